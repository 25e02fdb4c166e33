r"""Group baselines: leave-one-out, the group mean, RLOO and std-normalised (GRPO) advantages.

A trainer samples :math:`G` answers to one prompt, i.i.d. from
:math:`\pi_\theta`, and gives answer :math:`i` the advantage
:math:`A_i = R_i - b_i` with a baseline :math:`b_i` built from the group's
rewards.  With :math:`s_i` a coordinate of the score of answer :math:`i`, the
expected update is :math:`\mathbb{E}[A_i s_i]`.  Derived here for a *symbolic*
group size :math:`G` with the i.i.d. group algebra of
:mod:`derivations.iid_groups`:

.. math::

    \mathbb{E}\Bigl[\bigl(R_i - \tfrac{1}{G-1}\textstyle\sum_{j\ne i} R_j\bigr) s_i\Bigr] = \nabla_\theta J,
    \qquad
    \mathbb{E}\Bigl[\bigl(R_i - \tfrac{1}{G}\textstyle\sum_{j} R_j\bigr) s_i\Bigr] = \tfrac{G-1}{G}\,\nabla_\theta J,

RLOO advantages are :math:`\frac{G}{G-1}` times the centred ones, and every
advantage vanishes when the group's rewards are equal.  For a binary reward
with success probability :math:`p`, the std-normalised (GRPO) advantage has
expected update :math:`\omega(p, G)\, \nabla_\theta p`; :func:`grpo_weight` gives
the GRPO weight :math:`\omega` in closed form for each :math:`G`.

References
----------
W. Kool, H. van Hoof, M. Welling, "Buy 4 REINFORCE samples, get a baseline for
free!", ICLR DeepRL Meets Structured Prediction workshop (2019).
Z. Shao et al., "DeepSeekMath: pushing the limits of mathematical reasoning in
open language models" (GRPO), arXiv:2402.03300 (2024).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from functools import cache

import sympy as sp

from ._validate import require_int
from .definitions import Definitions
from .derivation import Derivation
from .iid_groups import Expect, IIDGroup, OthersTotal
from .proofs import by_cases, from_table, pointwise

__all__ = [
    "GRAD_J",
    "GRAD_P",
    "binary_group_variance",
    "equal_rewards_vanish",
    "grpo_conditioning",
    "grpo_weight",
    "grpo_weight_closed_forms",
    "grpo_weight_coefficients",
    "grpo_weight_derivation",
    "leave_one_out_unbiased",
    "mean_including_self",
    "rloo_is_scaled_centred",
    "zscore_advantage",
]

GRAD_J = sp.Symbol(r"\nabla_{\theta} J", real=True)
r""":math:`\nabla_\theta J = \mathbb{E}[R\, s]` (one coordinate), by the log-derivative trick."""

GRAD_P = sp.Symbol(r"\nabla_{\theta} p", real=True)
r""":math:`\nabla_\theta p` for a binary reward, :math:`p = \Pr[R = 1]`."""

P = sp.Symbol("p", positive=True)
_STDS = {"population": 0, "bessel": 1}


def _group() -> IIDGroup:
    return IIDGroup(("R", "s"))


def _moments(grp: IIDGroup):
    R, s = grp.plain["R"], grp.plain["s"]
    return Expect(R * s), Expect(R), Expect(s)


def _centred_update(baseline, title: str, result, result_reason: str) -> Derivation:
    """The chain E[(R_i - b_i) s_i] -> moments -> result, for a baseline linear in the rewards."""
    grp = _group()
    R, s, i, j, G = grp.R, grp.s, grp.i, grp.j, grp.G
    ERs, ER, Es = _moments(grp)
    b = baseline(grp)
    d = Derivation(
        title,
        assumptions=[r"$G \ge 2$ answers drawn i.i.d. from $\pi_\theta$", r"$s_i$: a coordinate of the score of answer $i$",
                     sp.Eq(Es, 0), sp.Eq(ERs, GRAD_J)],
        unfold=grp.definitions,
    )
    coeff_total = sp.Poly(sp.expand(b), grp.total()).coeff_monomial(grp.total())
    coeff_self = sp.expand(b - coeff_total * grp.total()).coeff(R[i])
    d.step(
        Expect((R[i] - b) * s[i]),
        Expect(R[i] * s[i]) - coeff_total * sp.Sum(Expect(R[j] * s[i]), (j, 1, G)) - coeff_self * Expect(R[i] * s[i]),
        r"linearity of $\mathbb{E}$",
    )
    d.then(
        ERs - coeff_total * (ERs + (G - 1) * ER * Es) - coeff_self * ERs,
        r"independence for $j \ne i$",
    )
    d.then(sp.factor(sp.expand(ERs - coeff_total * ERs - coeff_self * ERs)), r"$\mathbb{E}[s] = 0$", facts={Es: 0})
    d.then(result, result_reason, facts={ERs: GRAD_J})
    return d


def leave_one_out_unbiased() -> Derivation:
    r"""The leave-one-out baseline is unbiased for every :math:`G \ge 2`.

    .. math::

        \mathbb{E}\bigl[(R_i - \bar R_{-i})\, s_i\bigr] = \nabla_\theta J,
        \qquad \bar R_{-i} = \frac{1}{G-1}\Bigl(\sum_{j=1}^{G} R_j - R_i\Bigr).

    Examples
    --------
    >>> from derivations.group_baselines import leave_one_out_unbiased
    >>> d = leave_one_out_unbiased().verify()
    >>> d.verified, d.rhs
    (True, \nabla_{\theta} J)
    """
    return _centred_update(
        lambda grp: grp.mean_others(grp.i),
        "The leave-one-out baseline is unbiased",
        GRAD_J,
        r"$\mathbb{E}[R s] = \nabla_\theta J$",
    )


def mean_including_self() -> Derivation:
    r"""The group mean including the answer itself scales the gradient by :math:`(G-1)/G`.

    .. math::

        \mathbb{E}\Bigl[\Bigl(R_i - \frac1G \sum_{j=1}^{G} R_j\Bigr) s_i\Bigr] = \frac{G-1}{G}\, \nabla_\theta J.

    Examples
    --------
    >>> from derivations.group_baselines import mean_including_self
    >>> d = mean_including_self().verify()
    >>> d.rhs
    \nabla_{\theta} J*(G - 1)/G
    """
    G = _group().G
    return _centred_update(
        lambda grp: grp.mean(),
        "The group mean including self scales the gradient by (G − 1)/G",
        (G - 1) / G * GRAD_J,
        r"$\mathbb{E}[R s] = \nabla_\theta J$",
    )


def rloo_is_scaled_centred() -> Derivation:
    r"""RLOO advantages are :math:`\frac{G}{G-1}` times the centred advantages.

    .. math::

        R_i - \bar R_{-i} = \frac{G R_i - \sum_j R_j}{G - 1} = \frac{G}{G-1}\bigl(R_i - \bar R\bigr).

    Examples
    --------
    >>> from derivations.group_baselines import rloo_is_scaled_centred
    >>> rloo_is_scaled_centred().verify().verified
    True
    """
    grp = _group()
    R, i, G = grp.R, grp.i, grp.G
    d = Derivation("RLOO advantages are G/(G − 1) times the centred advantages", assumptions=[r"$G \ge 2$"])
    d.step(R[i] - grp.mean_others(i), (G * R[i] - grp.total()) / (G - 1), "common denominator")
    d.then(G / (G - 1) * (R[i] - grp.mean()), r"take out $G$")
    return d


def equal_rewards_vanish() -> Derivation:
    r"""When every answer gets the same reward, :math:`R_j = R_1` for every :math:`j`, every group advantage is zero.

    Leave-one-out, centred and std-normalised advantages (with :math:`\epsilon_{\mathrm{div}} > 0`):
    no answer is better than another, so there is no signal.

    Examples
    --------
    >>> from derivations.group_baselines import equal_rewards_vanish
    >>> d = equal_rewards_vanish().verify()
    >>> [st.rhs for st in d.steps][-1]
    0
    """
    grp = _group()
    j, G = grp.j, grp.G
    c = sp.Symbol("R_1", real=True)  # the common reward: every answer gets the answer labelled 1's
    eps = sp.Symbol(r"\epsilon_{\mathrm{div}}", positive=True)
    const_sum = sp.Sum(c, (j, 1, G))
    mean = const_sum / G
    std = sp.sqrt(sp.Sum((c - mean) ** 2, (j, 1, G)) / G)
    d = Derivation(
        "Equal rewards give zero advantages",
        assumptions=[r"$R_j = R_1$ for every answer $j$", r"$\epsilon_{\mathrm{div}} > 0$"],
    )
    d.step(c - (const_sum - c) / (G - 1), c - (G * c - c) / (G - 1), r"leave-one-out: a sum of $G$ equal terms")
    d.then(sp.Integer(0), "algebra")
    d.step(c - mean, c - sp.Mul(G * c, sp.Pow(G, -1, evaluate=False), evaluate=False), r"centred: a sum of $G$ equal terms")
    d.then(sp.Integer(0), "algebra")
    zero_over = sp.Mul(0, sp.Pow(sp.sqrt(sp.Sum(0, (j, 1, G)) / G) + eps, -1, evaluate=False), evaluate=False)
    d.step((c - mean) / (std + eps), zero_over, r"std-normalised: $R_1 - \bar R = 0$ in every term")
    d.then(sp.Integer(0), r"$0 / \epsilon_{\mathrm{div}} = 0$")
    return d


def binary_group_variance() -> Derivation:
    r"""For binary rewards with :math:`n` successes among :math:`G`, :math:`\sum_j (R_j - \bar R)^2 = G\,\bar R(1 - \bar R)`.

    So the std-normalised advantage depends on the rewards only through the
    count of successes: :math:`\bar R = n/G`, population std
    :math:`\sqrt{\bar R(1-\bar R)}`.

    Examples
    --------
    >>> from derivations.group_baselines import binary_group_variance
    >>> binary_group_variance().verify().verified
    True
    """
    grp = _group()
    R, j, G = grp.R, grp.j, grp.G
    n = sp.Symbol("n", integer=True, nonnegative=True)
    m = n / G
    d = Derivation(
        "Variance of a binary group",
        assumptions=[r"$R_j \in \{0, 1\}$:", sp.Eq(sp.Sum(R[j] ** 2, (j, 1, G)), n), r"$n$ successes:", sp.Eq(sp.Sum(R[j], (j, 1, G)), n)],
    )
    d.step(
        sp.Sum((R[j] - m) ** 2, (j, 1, G)),
        sp.Sum(R[j] ** 2, (j, 1, G)) - 2 * m * sp.Sum(R[j], (j, 1, G)) + G * m**2,
        r"expand the square",
    )
    d.then(n - 2 * m * n + G * m**2, r"$R_j^2 = R_j$, $\sum_j R_j = n$", facts={sp.Sum(R[j] ** 2, (j, 1, G)): n, sp.Sum(R[j], (j, 1, G)): n})
    d.then(G * m * (1 - m), "algebra")
    return d


# -- std-normalised (GRPO) advantages with a binary reward -------------------------------------

_a = sp.Function("A")  # the advantage as a function of (own reward, others' successes)
_k = sp.Symbol("k", integer=True, nonnegative=True)


class OthersSucceed(OthersTotal):
    r""":math:`S_{-i} = \sum_{j \ne i} R_j`, the number of successes among the answers other than :math:`i` (notation).

    A function of the other answers only: the group algebra's independence
    rule (:class:`~derivations.iid_groups.OthersTotal`) reads that off it.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.group_baselines import OthersSucceed
    >>> sp.latex(OthersSucceed(sp.Symbol("i")))
    'S_{-i}'
    """

    quantity = "R"

    def _latex(self, printer):
        return "S_{-" + printer._print(self.args[0]) + "}"


class KroneckerIndicator(sp.KroneckerDelta):
    r""":math:`\mathbb{1}[x = y]`: 1 when the two arguments are equal, else 0 (SymPy's ``KroneckerDelta``, displayed as an indicator).

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.group_baselines import KroneckerIndicator, OthersSucceed
    >>> sp.latex(KroneckerIndicator(OthersSucceed(sp.Symbol("i")), sp.Symbol("k")))
    '\\mathbb{1}[S_{-i} = k]'
    >>> KroneckerIndicator(2, 2), KroneckerIndicator(2, 3)
    (1, 0)
    """

    def _latex(self, printer):
        x, y = self.args
        if isinstance(x, sp.Symbol) and not isinstance(y, sp.Symbol):
            x, y = y, x  # the random quantity first: 1[S = k]
        return r"\mathbb{1}[" + printer._print(x) + " = " + printer._print(y) + "]"


class OthersSucceedProbability(sp.Function):
    r""":math:`\Pr[S_{-i} = k]`, the probability that :math:`k` of the other answers succeed: notation for :math:`\mathbb{E}[\mathbb{1}[S_{-i} = k]]`.

    Its value :math:`\binom{G-1}{k} p^k (1-p)^{G-1-k}` enters only where the
    GRPO weight is computed (:func:`grpo_weight`); a derivation that displays it
    unfolds it to the expectation.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.group_baselines import OthersSucceedProbability
    >>> sp.latex(OthersSucceedProbability(sp.Symbol("k")))
    '\\Pr[S_{-i} = k]'
    """

    nargs = 1

    def _latex(self, printer):
        return r"\Pr[S_{-i} = " + printer._print(self.args[0]) + "]"


def grpo_conditioning() -> Derivation:
    r"""A binary-reward group advantage has expected update :math:`\omega(p, G)\,\nabla_\theta p`.

    Any advantage that depends on the rewards only through the answer's own
    reward :math:`R_i` and the number :math:`S_{-i}` of successes among the other
    :math:`G-1` answers, :math:`A_i = A(R_i, S_{-i})`, satisfies

    .. math::

        \mathbb{E}[A(R_i, S_{-i})\, s_i] = \sum_{k=0}^{G-1} \Pr[S_{-i} = k]
        \bigl(A(1, k) - A(0, k)\bigr)\, \nabla_\theta p,

    for every :math:`G`, with :math:`\Pr[S_{-i} = k] = \binom{G-1}{k} p^k (1-p)^{G-1-k}`.
    Three steps condition on :math:`(R_i, S_{-i})`: write :math:`a` with
    indicators (checked at :math:`R_i = 0` and :math:`R_i = 1`, the only values a
    premise allows, for every outcome); linearity; and independence, since
    :math:`S_{-i}` is a function of the *other* answers
    (:class:`~derivations.iid_groups.OthersTotal`), and
    :math:`\Pr[S_{-i} = k]` is :math:`\mathbb{E}[\mathbb{1}[S_{-i} = k]]` by definition.

    Examples
    --------
    >>> from derivations.group_baselines import grpo_conditioning
    >>> d = grpo_conditioning().verify()
    >>> d.proved_by()
    {'equal integrands (cases R[i] in {0, 1})': 1, 'expand': 3, 'cancel(together)': 1}
    >>> [st.badge for st in d.steps]
    [None, None, None, None, None]
    """
    grp = _group()
    R, s, i, G = grp.R, grp.s, grp.i, grp.G
    Rp, sp_ = grp.plain["R"], grp.plain["s"]
    S = OthersSucceed(i)
    pr = OthersSucceedProbability(_k)
    one = KroneckerIndicator(S, _k)
    d = Derivation(
        "Expected update of a binary-reward group advantage",
        assumptions=[
            r"$A_i = A(R_i, S_{-i})$, $S_{-i} = \sum_{j \ne i} R_j$, $p = \Pr[R = 1]$",
            sp.Contains(R[i], sp.FiniteSet(0, 1)), sp.Contains(S, sp.Integers), S >= 0, S <= G - 1,
            sp.Eq(Expect(sp_), 0), sp.Eq(Expect(Rp * sp_), GRAD_P),
        ],
        unfold=Definitions({pr: Expect(one)}) | grp.definitions,
    )
    d.step(
        Expect(_a(R[i], S) * s[i]),
        Expect(sp.Sum(one * (R[i] * _a(1, _k) + (1 - R[i]) * _a(0, _k)), (_k, 0, G - 1)) * s[i]),
        r"$\mathbb{1}[S_{-i} = k]$ picks $k = S_{-i}$; cases $R_i = 1$, $R_i = 0$",
        proof=pointwise(by_cases(R[i], (0, 1))),
    )
    d.then(
        sp.Sum(_a(1, _k) * Expect(one * R[i] * s[i]) + _a(0, _k) * Expect(one * (1 - R[i]) * s[i]), (_k, 0, G - 1)),
        r"linearity",
    )
    d.then(
        sp.Sum(pr * (_a(1, _k) * Expect(Rp * sp_) + _a(0, _k) * Expect((1 - Rp) * sp_)), (_k, 0, G - 1)),
        r"independence: $S_{-i}$ is a function of the other answers",
    )
    d.then(
        sp.Sum(pr * (_a(1, _k) - _a(0, _k)), (_k, 0, G - 1)) * Expect(Rp * sp_) + sp.Sum(pr * _a(0, _k), (_k, 0, G - 1)) * Expect(sp_),
        r"linearity",
    )
    d.then(
        sp.Sum(pr * (_a(1, _k) - _a(0, _k)), (_k, 0, G - 1)) * GRAD_P,
        r"$\mathbb{E}[s] = 0$, $\mathbb{E}[R s] = \nabla_\theta p$",
        facts={Expect(sp_): 0, Expect(Rp * sp_): GRAD_P},
    )
    return d


def _require_std(std: str) -> int:
    if std not in _STDS:
        raise ValueError(f"std must be one of {sorted(_STDS)}, got {std!r}")
    return _STDS[std]


def _require_G(G) -> int:
    return require_int("G", G, minimum=2)  # a group baseline needs other answers


def _group_sizes(name: str, values, why: str = "") -> tuple[int, ...]:
    """A non-empty tuple of group sizes G >= 2 (a tuple or list of ints)."""
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{name} must be a tuple of group sizes, got {type(values).__name__}")
    if not values:
        raise ValueError(f"{name} must name at least one group size{why}")
    return tuple(require_int(name, g, minimum=2) for g in values)


def _explicit_rewards(rewards) -> list[sp.Expr]:
    """The rewards of an explicit group: a list or tuple of at least 2 finite real numbers, as exact SymPy numbers."""
    if not isinstance(rewards, (tuple, list)):
        raise TypeError(f"rewards must be a list or tuple of numbers, got {type(rewards).__name__}")
    if len(rewards) < 2:
        raise ValueError(f"rewards must hold at least 2 answers (a group baseline needs other answers), got {len(rewards)}")
    out = []
    for x in rewards:
        if isinstance(x, (bool, str)) or not isinstance(x, (numbers.Real, sp.Expr)):
            raise TypeError(f"rewards must hold real numbers, got {type(x).__name__}")
        r = sp.sympify(x)
        if not (r.is_real and r.is_finite):
            raise ValueError(f"rewards must be finite real numbers, got {x!r}")
        out.append(r)
    return out


def zscore_advantage(rewards: Sequence[sp.Expr | float], std: str = "population") -> sp.Expr:
    r"""The std-normalised advantage of the first answer of an explicit group, in the limit :math:`\epsilon_{\mathrm{div}} \to 0`.

    .. math::

        A_1 = \frac{R_1 - \bar R}{\sigma},\qquad
        \sigma^2 = \frac{1}{G - \delta}\sum_{j=1}^{G} (R_j - \bar R)^2,

    :math:`\delta = 0` (population) or :math:`1` (Bessel); :math:`A_1 = 0`
    when all rewards are equal (the :math:`\epsilon_{\mathrm{div}} > 0` convention).

    Examples
    --------
    >>> from derivations.group_baselines import zscore_advantage
    >>> zscore_advantage([1, 0, 0]), zscore_advantage([1, 0, 0], std="bessel"), zscore_advantage([1, 1])
    (sqrt(2), 2*sqrt(3)/3, 0)
    """
    ddof = _require_std(std)
    r = _explicit_rewards(rewards)
    G = len(r)
    mean = sp.Add(*r) / G
    var = sp.Add(*[(x - mean) ** 2 for x in r]) / (G - ddof)
    if var == 0:
        return sp.Integer(0)
    return (r[0] - mean) / sp.sqrt(var)


@cache
def grpo_weight_coefficients(G: int, std: str = "population") -> tuple[sp.Expr, ...]:
    r"""Bernstein coefficients :math:`\binom{G-1}{k}\Delta_k` of :math:`\omega(p, G)`, :math:`k = 0, \dots, G-1`.

    :math:`\omega(p, G) = \sum_k \binom{G-1}{k}\Delta_k\, p^k (1-p)^{G-1-k}` with
    :math:`\Delta_k = A(1, k) - A(0, k)`, the advantage a success gets over a
    failure when :math:`k` of the other answers succeed, and :math:`A(y, k)` from
    :func:`zscore_advantage` (exact radicals).

    Examples
    --------
    >>> from derivations.group_baselines import grpo_weight_coefficients
    >>> grpo_weight_coefficients(4)
    (sqrt(3), sqrt(3) + 3, sqrt(3) + 3, sqrt(3))
    """
    _require_G(G)
    _require_std(std)
    out = []
    for k in range(G):
        others = [1] * k + [0] * (G - 1 - k)
        diff = zscore_advantage([1, *others], std) - zscore_advantage([0, *others], std)
        out.append(sp.binomial(G - 1, k) * diff)
    return tuple(out)


def _weight_terms(G: int, std: str) -> list[sp.Expr]:
    """binom(G-1, k) Delta_k p^k (1 - p)^(G-1-k) for k = 0..G-1."""
    return [c * P**k * (1 - P) ** (G - 1 - k) for k, c in enumerate(grpo_weight_coefficients(G, std))]


@cache
def grpo_weight(G: int, std: str = "population") -> sp.Expr:
    r"""Closed form of the GRPO weight :math:`\omega(p, G)`: the GRPO expected update is :math:`\omega(p, G)\, \nabla_\theta p`.

    .. math::

        \omega(p, G) = \sum_{k=0}^{G-1} \binom{G-1}{k} p^k (1-p)^{G-1-k}\,\Delta_k, \qquad
        \Delta_k = A(1, k) - A(0, k),

    with :math:`A(y, k)` the std-normalised advantage (:func:`zscore_advantage`)
    of an answer with reward :math:`r` among :math:`k` other successes.  The CAS
    computes each :math:`A(y, k)` from the definition; for the population std
    this gives :math:`\Delta_k = \sqrt{\tfrac{G-1-k}{k+1}} + \sqrt{\tfrac{k}{G-k}}`.

    Parameters
    ----------
    G : int
        Group size, at least 2.
    std : {"population", "bessel"}
        Divide the sum of squares by :math:`G` or by :math:`G - 1`.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.group_baselines import grpo_weight, P
    >>> grpo_weight(2), sp.simplify(grpo_weight(3))
    (1, sqrt(2))
    >>> sp.expand(grpo_weight(4))
    -3*p**2 + 2*sqrt(3)*p**2 - 2*sqrt(3)*p + 3*p + sqrt(3)
    >>> round(float(grpo_weight(8, "bessel").subs(P, 0.5)), 6)
    1.735807
    """
    _require_G(G)
    _require_std(std)
    return sp.Add(*_weight_terms(G, std))


def grpo_weight_derivation(G: int, std: str = "population") -> Derivation:
    r"""The GRPO weight at a fixed :math:`G`: conditioning (summed over the :math:`2G` entries of the table of :math:`A_1`), then the closed form.

    The first step's proof is the kernel's sum over the reward patterns
    (:func:`~derivations.proofs.from_table`): the table of :math:`A_1` (the
    std-normalised advantage, :func:`zscore_advantage`, of the answer labelled 1's reward
    and the others' counts), times the probability of the others' counts,
    times :math:`\mathbb{E}[\mathbb{1}[R_1 = r_1]\, s_1] = \pm\nabla_\theta p`.

    Examples
    --------
    >>> from derivations.group_baselines import grpo_weight_derivation
    >>> d = grpo_weight_derivation(3).verify()
    >>> d.rhs
    sqrt(2)*\nabla_{\theta} p
    """
    G = _require_G(G)
    ddof = _require_std(std)
    if G > 8:
        raise ValueError(f"G must be <= 8 for the enumerated derivation (2^G groups), got {G}; use grpo_weight for the closed form")
    grp = IIDGroup(("R", "s"), G=G)
    s = grp.s
    terms = _weight_terms(G, std)
    sigma = r"$\sigma^2 = \frac{1}{" + ("G" if ddof == 0 else "G - 1") + r"}\sum_j (R_j - \bar R)^2$"
    d = Derivation(
        f"GRPO weight at G = {G} ({std} std)",
        assumptions=[
            r"$R \in \{0, 1\}$, $p = \Pr[R = 1]$",
            r"$A_1 = (R_1 - \bar R) / \sigma$, " + sigma + r", $A_1 = 0$ if $\sigma = 0$",
            r"$\mathbb{E}[\mathbb{1}[R = 1]\, s] = \nabla_\theta p = -\mathbb{E}[\mathbb{1}[R = 0]\, s]$",
        ],
    )
    d.step(
        Expect(_A1 * s[1]),
        sp.Add(*terms, evaluate=False) * GRAD_P,
        r"sum over the answer labelled 1's reward and the others' count ($2G = " + str(2 * G) + r"$ table entries)",
        proof=_reward_patterns(G, std, s[1]),
    )
    d.then(sp.collect(sp.expand(sp.Add(*terms)), P) * GRAD_P, "expand")
    return d


_A1 = sp.Symbol("A_1", real=True)


def _reward_patterns(G: int, std: str, score: sp.Basic):
    r"""Proof: :math:`\mathbb{E}[A_1 s_1]` summed by the kernel over the reward patterns, from the table of :math:`A_1` (:func:`zscore_advantage`)."""
    table = [(r, (k0, G - 1 - k0), zscore_advantage([r] + [0] * k0 + [1] * (G - 1 - k0), std)) for r in (0, 1) for k0 in range(G)]
    return from_table(_A1, score, (0, 1), (1 - P, P), (-GRAD_P, GRAD_P), G, table)


def grpo_weight_closed_forms(G_values: Sequence[int] = (2, 3, 4, 5), std: str = "population") -> Derivation:
    r"""The GRPO weight :math:`\omega(p, G)` in closed form for each ``G`` in ``G_values``, simplified and labelled.

    :math:`\omega` is symmetric under :math:`p \leftrightarrow 1 - p` (a success
    and a failure are mirror images), so it is a polynomial in
    :math:`p(1-p)`, with constant term :math:`\omega(0, G) = \sqrt{G - 1}` for the
    population std.  Each step's left side unfolds into the Bernstein sum of
    :func:`grpo_weight` (each :math:`A(y, k)` computed from the definition);
    the right side is that polynomial written in powers of :math:`p(1-p)`.

    Examples
    --------
    >>> from derivations.group_baselines import grpo_weight_closed_forms
    >>> d = grpo_weight_closed_forms().verify()
    >>> [st.rhs for st in d.steps][:2]
    [1, sqrt(2)]
    >>> d.steps[2].lhs, d.steps[2].rhs
    (omega(p, 4), p*(1 - p)*(3 - 2*sqrt(3)) + sqrt(3))
    """
    _require_std(std)
    G_values = _group_sizes("G_values", G_values)
    w = sp.Function("omega")  # the GRPO weight ω(p, G)
    unfold = Definitions({w(P, G): grpo_weight(G, std) for G in G_values})

    d = Derivation(
        f"The GRPO weight in closed form ({std} std)",
        assumptions=[
            r"$\omega(p, G) = \sum_{k=0}^{G-1} \binom{G-1}{k} p^k (1-p)^{G-1-k} \Delta_k$, $\Delta_k = A(1, k) - A(0, k)$",
            r"$a(r, k)$: the std-normalised advantage of reward $r$ among $k$ other successes",
        ],
        unfold=unfold,
    )
    for n, G in enumerate(G_values):
        reason = r"$\Delta_k = A(1, k) - A(0, k)$ from the definition; powers of $p(1-p)$" if n == 0 else rf"the same at $G = {G}$"
        d.step(w(P, G), _in_powers_of_variance(grpo_weight(G, std)), reason)
    return d


def _in_powers_of_variance(weight: sp.Expr) -> sp.Expr:
    r"""A polynomial in :math:`p` that is symmetric under :math:`p \leftrightarrow 1-p`, written in powers of :math:`p(1-p)`."""
    poly, out = sp.Poly(sp.expand(weight), P), []
    while not poly.is_zero:
        m, rem = divmod(poly.degree(), 2)
        if rem:
            raise ValueError(f"not symmetric under p -> 1 - p: {weight}")
        c = sp.simplify(poly.LC() * (-1) ** m)
        if c == 0:
            raise ValueError(f"the CAS could not reduce the leading coefficient of {weight}")
        out.append(c * sp.Mul(P, 1 - P, evaluate=False) ** m if m else c)
        poly = sp.Poly(sp.expand(poly.as_expr() - c * (P * (1 - P)) ** m), P)
    return sp.Add(*out)

