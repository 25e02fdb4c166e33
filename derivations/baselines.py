r"""Baselines: which ones leave the gradient unchanged, and which one minimises the variance.

Subtracting a baseline :math:`b` from the reward changes the estimator
:math:`R\, s` into :math:`(R - b)\, s`.  Its mean is unchanged whenever
:math:`\mathbb{E}[b\, s] = 0`:

* a constant (:func:`constant_baseline`), or any function of the prefix
  (:func:`prefix_baseline`), passes, because the score has mean zero given
  the prefix;
* a baseline that depends on the action being scored does not
  (:func:`action_dependent_baseline` gives its bias), and the self-baseline
  :math:`b = R` removes the whole gradient (:func:`self_baseline`).

The trace variance of :math:`(R - b)\, s` is an exact quadratic in :math:`b`
(:func:`variance_quadratic`), minimised by
:math:`b^* = \mathbb{E}[R \lVert s\rVert^2] / \mathbb{E}\lVert s\rVert^2`
(:func:`optimal_baseline`), which differs from :math:`\mathbb{E}[R]` by
:math:`\operatorname{Cov}(R, \lVert s\rVert^2) / \mathbb{E}\lVert s \rVert^2`
(:func:`optimal_baseline_covariance`); a baseline improves on none exactly
when it lies between :math:`0` and :math:`2b^*` (:func:`improvement_interval`,
solved by the CAS).  :func:`bandit_optimal_baseline` shows why :math:`b^*`
weights a rare action more than :math:`V^\pi` does.

References
----------
L. Weaver and N. Tao, "The optimal reward baseline for gradient-based
reinforcement learning", UAI (2001).  E. Greensmith, P. Bartlett and
J. Baxter, "Variance reduction techniques for gradient estimates in
reinforcement learning", JMLR 5 (2004).
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from ._validate import require_int
from .definitions import Definitions
from .derivation import Derivation
from .policy import IndexedSoftmax
from .proofs import Argmin, is_argmin, same_solutions

__all__ = [
    "action_dependent_baseline",
    "bandit_optimal_baseline",
    "constant_baseline",
    "improvement_interval",
    "improving_baselines",
    "optimal_baseline",
    "optimal_baseline_covariance",
    "prefix_baseline",
    "self_baseline",
    "variance_coefficients",
    "variance_quadratic",
]

_ASSUME = r"softmax policy over $K = j + n$ actions"

b = sp.Symbol("b", real=True)
b_star = sp.Symbol("b^*", real=True)
grad_sq = sp.Symbol(r"\|\nabla J\|^2", nonnegative=True)
_a = sp.Symbol("a", integer=True, positive=True)
_K = sp.Symbol("K", integer=True, positive=True)
_p = sp.IndexedBase("p", positive=True)
_R = sp.IndexedBase("R", real=True)
_n = sp.IndexedBase("nu", nonnegative=True)  # nu_a = ||s_a||^2


def _E(expr) -> sp.Sum:
    """:math:`\\sum_{a=1}^K p_a\\, \\text{expr}` over a distribution :math:`p` on :math:`K` outcomes."""
    return sp.Sum(_p[_a] * expr, (_a, 1, _K))


_ONE = {sp.Sum(_p[_a], (_a, 1, _K)): 1}


def constant_baseline() -> Derivation:
    r"""A constant baseline leaves the gradient unchanged, for any ``K``.

    .. math::

        \mathbb{E}_\pi[(R - b)\, s_j] = \mathbb{E}_\pi[R\, s_j] - b\, \mathbb{E}_\pi[s_j]
        = \mathbb{E}_\pi[R\, s_j].

    Examples
    --------
    >>> from derivations.baselines import constant_baseline
    >>> constant_baseline().verify().verified
    True
    """
    pol = IndexedSoftmax()
    R = sp.IndexedBase("R", real=True)
    d = Derivation("A constant baseline is free", assumptions=[_ASSUME, r"$b$ a constant"], unfold=pol.definitions)
    d.step(
        pol.expectation(lambda x: (R[x] - b) * pol.score(x)),
        pol.expectation(lambda x: R[x] * pol.score(x)) - b * pol.expectation(pol.score),
        "linearity",
    )
    d.then(pol.expectation(lambda x: R[x] * pol.score(x)), r"the score has mean zero")
    return d


def prefix_baseline(K: int = 2) -> Derivation:
    r"""A baseline that is any function of the prefix adds nothing to the mean.

    Two tokens: :math:`a \sim \pi_\theta`, then :math:`a' \sim \pi'_\theta(\cdot
    \mid a)`, the second-step policy, a softmax over ``K`` tokens of arbitrary
    logits :math:`z_{a',a}(\theta)`.  A baseline :math:`b_a` for the second
    token may be any function of the prefix :math:`a`:

    .. math::

        \mathbb{E}\bigl[b_a\, \partial_\theta \log \pi'_{a' \mid a}\bigr]
        = \sum_a \pi_a b_a \sum_{a'} \pi'_{a'\mid a}\, \partial_\theta \log \pi'_{a'\mid a}
        = \sum_a \pi_a b_a\, \partial_\theta \sum_{a'} \pi'_{a' \mid a} = 0.

    Examples
    --------
    >>> from derivations.baselines import prefix_baseline
    >>> [prefix_baseline(K).verify().rhs for K in (2, 3)]
    [0, 0]
    """
    K = require_int("K", K, minimum=2)
    th = sp.Symbol("theta", real=True)
    a, a2, a3 = sp.symbols("a a' a''", integer=True, positive=True)
    pi, pi2, bb = sp.IndexedBase("pi"), sp.IndexedBase(r"\pi'"), sp.IndexedBase("b", real=True)
    pi_f, u = sp.Function("pi", positive=True), sp.Function("z", real=True)  # z: the second step's logits

    unfold = Definitions({pi[a]: pi_f(a, th), pi2[a2, a]: sp.exp(u(a2, a, th)) / sp.Sum(sp.exp(u(a3, a, th)), (a3, 1, K))})

    D = lambda e: sp.Derivative(e, th)
    d = Derivation(
        "A baseline that depends only on the prefix is free",
        assumptions=[
            rf"$\pi'_{{a',a}} = \pi'(a' \mid a)$ a softmax over {K} tokens of any logits $u_{{a',a}}(\theta)$",
            r"$b_a$ any function of the prefix $a$, free of $\theta$",
        ],
        unfold=unfold,
    )
    d.step(
        sp.Sum(pi[a] * pi2[a2, a] * bb[a] * D(sp.log(pi2[a2, a])), (a2, 1, K), (a, 1, K)),
        sp.Sum(pi[a] * bb[a] * D(sp.Sum(pi2[a2, a], (a2, 1, K))), (a, 1, K)),
        r"$b_a$ is fixed given the prefix; $\pi'\, \partial \log \pi' = \partial \pi'$",
    )
    d.then(sp.Sum(pi[a] * bb[a] * D(sp.Integer(1)), (a, 1, K)), r"$\pi'(\cdot \mid a)$ sums to one")
    d.then(sp.Integer(0), r"the derivative of a constant")
    return d


def action_dependent_baseline() -> Derivation:
    r"""The bias of a baseline that depends on the action being scored, for any ``K``.

    .. math::

        \mathbb{E}_\pi[(R - b)\, s_j] - \mathbb{E}_\pi[R\, s_j]
        = -\mathbb{E}_\pi[b\, s_j]
        = -\pi_j\bigl(b_j - \mathbb{E}_\pi[b]\bigr),

    which vanishes for every :math:`j` only when :math:`b` is constant on the
    support.

    Examples
    --------
    >>> from derivations.baselines import action_dependent_baseline
    >>> action_dependent_baseline().verify().rhs
    -(b[j] - Sum(b[a]*pi[a], (a, 1, j + n)))*pi[j]
    """
    pol = IndexedSoftmax()
    R, bb = sp.IndexedBase("R", real=True), sp.IndexedBase("b", real=True)
    a, j = pol.a, pol.j
    d = Derivation(
        "The bias of an action-dependent baseline",
        assumptions=[_ASSUME, r"$b_a$ depends on the action $a$"],
        unfold=pol.definitions,
    )
    d.step(
        pol.expectation(lambda x: (R[x] - bb[x]) * pol.score(x)) - pol.expectation(lambda x: R[x] * pol.score(x)),
        -pol.expectation(lambda x: bb[x] * pol.score(x)),
        "linearity",
    )
    d.then(-(pol.prob(j) * bb[j] - pol.prob(j) * pol.expectation(lambda x: bb[x])), r"the indicator picks $a = j$")
    d.then(-pol.prob(j) * (bb[j] - sp.Sum(pol.prob(a) * bb[a], (a, 1, pol.K))), r"factor $\pi_j$")
    return d


def self_baseline() -> Derivation:
    r"""The self-baseline :math:`b = R` removes the whole gradient.

    .. math::

        \mathbb{E}_\pi[(R - R)\, s_j] = 0
        = \mathbb{E}_\pi[R\, s_j] - \mathbb{E}_\pi[R\, s_j],

    a bias of :math:`-\nabla J`.

    Examples
    --------
    >>> from derivations.baselines import self_baseline
    >>> self_baseline().verify().steps[1].rhs
    0
    """
    pol = IndexedSoftmax()
    R, bb = sp.IndexedBase("R", real=True), sp.IndexedBase("b", real=True)
    d = Derivation("The self-baseline kills the gradient", assumptions=[_ASSUME, sp.Eq(bb, R)], unfold=pol.definitions)
    d.step(
        pol.expectation(lambda x: (R[x] - bb[x]) * pol.score(x)),
        pol.expectation(lambda x: R[x] * pol.score(x)) - pol.expectation(lambda x: bb[x] * pol.score(x)),
        "linearity",
    )
    d.then(sp.Integer(0), r"$b_a = R_a$: the two terms cancel", facts={bb: R})
    d.step(
        pol.expectation(lambda x: (R[x] - bb[x]) * pol.score(x)) - pol.expectation(lambda x: R[x] * pol.score(x)),
        -pol.expectation(lambda x: R[x] * pol.score(x)),
        r"so the bias is $-\nabla J$",
        facts={bb: R},
    )
    return d


@cache
def variance_coefficients() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    r"""The coefficients :math:`(\alpha_0, \alpha_1, \alpha_2)` of :math:`\operatorname{Var}(b)`, as sums over outcomes.

    .. math::

        \alpha_k = \mathbb{E}\bigl[R^{2-k} \lVert s \rVert^2\bigr] = \sum_{a=1}^K p_a R_a^{2-k} \lVert s_a \rVert^2,
        \qquad k = 0, 1, 2.

    Examples
    --------
    >>> from derivations.baselines import variance_coefficients
    >>> variance_coefficients()[1]
    Sum(R[a]*nu[a]*p[a], (a, 1, K))
    """
    return tuple(_E(_R[_a] ** (2 - k) * _n[_a]) for k in range(3))


def variance_quadratic() -> Derivation:
    r"""The trace variance of :math:`(R - b)\, s` is an exact quadratic in :math:`b`.

    Over any distribution :math:`p` on ``K`` outcomes (symbolic ``K``) with
    scores :math:`s_a` of squared norm :math:`\lVert s_a \rVert^2`: since the
    mean :math:`\mathbb{E}[(R - b)s] = \nabla J` does not depend on :math:`b`
    (:func:`constant_baseline`),

    .. math::

        \operatorname{Var}(b)
        = \mathbb{E}\lVert (R - b)s \rVert^2 - \lVert \nabla J \rVert^2
        = \alpha_0 - 2 b \alpha_1 + b^2 \alpha_2 - \lVert \nabla J \rVert^2.

    Examples
    --------
    >>> from derivations.baselines import variance_quadratic
    >>> variance_quadratic().verify().proved_by()
    {'sums as atoms, cancel(together)': 1}
    """
    A0, A1, A2 = variance_coefficients()
    d = Derivation(
        "The variance is a quadratic in the baseline",
        assumptions=[
            r"$p$ a distribution on $K$ outcomes, $K$ symbolic",
            r"$\nu_a = \|s_a\|^2$",
            r"$\mathbb{E}[(R-b)s] = \nabla J$ for every constant $b$",
        ],
    )
    d.step(_E((_R[_a] - b) ** 2 * _n[_a]) - grad_sq, A0 - 2 * b * A1 + b**2 * A2 - grad_sq, "expand the square; linearity")
    return d


def _variance_in_b(A0, A1, A2) -> sp.Expr:
    return A0 - 2 * b * A1 + b**2 * A2 - grad_sq


def optimal_baseline() -> Derivation:
    r"""The minimiser of :math:`\operatorname{Var}(b)`: :math:`b^* = \alpha_1 / \alpha_2`.

    .. math::

        \frac{d}{db}\operatorname{Var}(b) = 2 b \alpha_2 - 2 \alpha_1 = 0
        \iff b = b^* = \frac{\mathbb{E}[R \lVert s\rVert^2]}{\mathbb{E}\lVert s\rVert^2},
        \qquad \frac{d^2}{db^2}\operatorname{Var} = 2 \alpha_2 > 0,

    and :math:`\operatorname{Var}(b) = \operatorname{Var}(b^*) + \alpha_2 (b - b^*)^2`.
    The first step shows :math:`\operatorname{arg\,min}_b` of the displayed
    quadratic; the CAS differentiates that quadratic and checks that the
    displayed value is its stationary point and the curvature is positive
    (:func:`~derivations.proofs.is_argmin`).

    Examples
    --------
    >>> from derivations.baselines import optimal_baseline
    >>> d = optimal_baseline().verify()
    >>> d.steps[1].rhs
    Sum(R[a]*nu[a]*p[a], (a, 1, K))/Sum(nu[a]*p[a], (a, 1, K))
    >>> d.proved_by()["unique stationary point, f'' > 0"]
    1
    """
    A0, A1, A2 = (sp.Symbol(f"alpha_{k}", positive=(k == 2), real=True) for k in range(3))
    V = _variance_in_b(A0, A1, A2)
    sums = dict(zip((A0, A1, A2), variance_coefficients()))
    d = Derivation(
        "The optimal constant baseline",
        assumptions=[r"$\alpha_k = \mathbb{E}[R^{2-k}\|s\|^2]$, $\nu_a = \|s_a\|^2$", sp.Eq(A1, sums[A1]), sp.Eq(A2, sums[A2]), r"$\alpha_2 > 0$"],
    )
    d.step(Argmin(V, b), A1 / A2, r"the unique root of $\tfrac{d}{db}\mathrm{Var}$; $\tfrac{d^2}{db^2}\mathrm{Var} = 2\alpha_2 > 0$", proof=is_argmin)
    d.then(sums[A1] / sums[A2], r"the coefficients as expectations", facts={A1: sums[A1], A2: sums[A2]})
    d.step(V, V.subs(b, A1 / A2) + A2 * (b - A1 / A2) ** 2, r"complete the square: $\mathrm{Var}(b) = \mathrm{Var}(b^*) + \alpha_2 (b - b^*)^2$")
    return d


def optimal_baseline_covariance() -> Derivation:
    r""":math:`b^* - \mathbb{E}[R] = \operatorname{Cov}(R, \lVert s\rVert^2) / \mathbb{E}\lVert s\rVert^2`, for any ``K``.

    So :math:`b^*` lies above :math:`\mathbb{E}[R]` exactly when high rewards
    come with large score norms.

    Examples
    --------
    >>> from derivations.baselines import optimal_baseline_covariance
    >>> len(optimal_baseline_covariance().verify().steps)
    3
    """
    _, A1, A2 = variance_coefficients()
    m = sp.Symbol("a'", integer=True, positive=True)  # a second action index
    ER = sp.Sum(_p[m] * _R[m], (m, 1, _K))
    En = sp.Sum(_p[m] * _n[m], (m, 1, _K))
    d = Derivation(
        "The optimal baseline minus the mean reward is a covariance",
        assumptions=[r"$p$ a distribution on $K$ outcomes", *[sp.Eq(k, v) for k, v in _ONE.items()], r"$\nu_a = \|s_a\|^2$"],
    )
    d.step(A1 / A2 - ER, (A1 - ER * A2) / A2, "common denominator")
    total = sp.Sum(_p[_a], (_a, 1, _K))
    d.then((A1 - 2 * ER * En + ER * En * total) / A2, r"$\sum_a p_a = 1$", facts=_ONE)
    d.then(_E((_R[_a] - ER) * (_n[_a] - En)) / A2, r"expand $\mathrm{Cov}(R, \|s\|^2) = \mathbb{E}[(R - \mathbb{E}R)(\|s\|^2 - \mathbb{E}\|s\|^2)]$")
    return d


@cache
def improving_baselines(sign: int = 1) -> sp.Set:
    r"""The set :math:`\{b : \operatorname{Var}(b) < \operatorname{Var}(0)\}`, solved by the CAS.

    ``sign`` is the sign of :math:`b^*`; the answer is an interval with
    endpoints :math:`0` and :math:`2b^*`.

    Examples
    --------
    >>> from derivations.baselines import improving_baselines
    >>> improving_baselines(1), improving_baselines(-1)
    (Interval.open(0, 2*b^*), Interval.open(2*b^*, 0))
    """
    if sign not in (1, -1):
        raise ValueError(f"sign must be 1 or -1 (the sign of b*), got {sign!r}")
    return _solved_interval(sign) if type(sign) is int else _solve_interval(sign)


@cache
def _solved_interval(sign: int) -> sp.Set:
    """:func:`_solve_interval` once per process for each int sign (a SymPy set is immutable)."""
    return _solve_interval(sign)


def _solve_interval(sign: int) -> sp.Set:
    A2 = sp.Symbol("alpha_2", positive=True)
    beta = sp.Symbol("beta", positive=True)  # |b*|
    A0 = sp.Symbol("alpha_0", real=True)
    V = _variance_in_b(A0, A2 * sign * beta, A2)
    solution = sp.solve_univariate_inequality(V < V.subs(b, 0), b, relational=False)
    return solution.subs(beta, sign * b_star)


def improvement_interval() -> Derivation:
    r"""A baseline beats no baseline exactly between :math:`0` and :math:`2b^*`.

    .. math::

        \operatorname{Var}(b) - \operatorname{Var}(0) = b^2 \alpha_2 - 2 b \alpha_1
        = \alpha_2\, b\, (b - 2b^*) < 0
        \iff b \in (0, 2b^*) \ \text{(for } b^* > 0\text{)}.

    The last steps compare solution sets: the CAS solves the displayed
    inequality for :math:`b` on the region :math:`b^* > 0` (and
    :math:`b^* < 0`), each parametrised by a positive symbol, and checks that
    the solution is the displayed interval.  :func:`improving_baselines`
    gives that set as a function.

    Examples
    --------
    >>> from derivations.baselines import improvement_interval
    >>> d = improvement_interval().verify()
    >>> d.steps[1].rhs
    Contains(b, Interval.open(0, 2*b^*))
    """
    A0, A1 = sp.symbols("alpha_0 alpha_1", real=True)
    A2 = sp.Symbol("alpha_2", positive=True)
    V = _variance_in_b(A0, A1, A2)
    gap = V - V.subs(b, 0)
    d = Derivation("The interval of improving baselines", assumptions=[r"$\alpha_2 > 0$, $b^* = \alpha_1 / \alpha_2$"])
    d.step(gap, A2 * b * (b - 2 * A1 / A2), r"factor; $\alpha_1 = \alpha_2 b^*$")
    for region, where, interval in ((b_star > 0, r"b^* > 0", sp.Interval.open(0, 2 * b_star)), (b_star < 0, r"b^* < 0", sp.Interval.open(2 * b_star, 0))):
        d.step(
            sp.Lt(A2 * b * (b - 2 * b_star), 0),
            sp.Contains(b, interval, evaluate=False),
            rf"solved for $b$ by the CAS when ${where}$",
            relation="<=>",
            proof=same_solutions(b),
            given=(region,),
        )
    return d


def bandit_optimal_baseline() -> Derivation:
    r"""Two arms, probabilities :math:`(p, 1-p)`: :math:`b^* = (1-p)R(1) + p R(2)`, while :math:`V^\pi = pR(1) + (1-p)R(2)`.

    With the softmax score :math:`s_a = e_a - \pi`,
    :math:`\lVert s_1 \rVert^2 = 2(1-p)^2` and :math:`\lVert s_2 \rVert^2 = 2p^2`:
    the rare arm has the large score, and :math:`b^*` gives it the weight
    :math:`1-p` that :math:`V^\pi` gives the common one.

    .. math::

        b^* - V^\pi = (1 - 2p)(R(1) - R(2)).

    Examples
    --------
    >>> from derivations.baselines import bandit_optimal_baseline
    >>> d = bandit_optimal_baseline().verify()
    >>> d.steps[1].rhs
    R(1)*(1 - p) + R(2)*p
    """
    p = sp.Symbol("p", positive=True)
    R1, R2 = sp.symbols("R(1) R(2)", real=True)
    pi = sp.Matrix([p, 1 - p])
    scores = [sp.eye(2)[:, a] - pi for a in range(2)]
    sq = [sp.factor((s.T * s)[0]) for s in scores]
    R = (R1, R2)
    value = pi[0] * R1 + pi[1] * R2
    num = sum(pi[a] * R[a] * sp.Symbol(rf"{{\|s({a + 1})\|^2}}") for a in range(2))
    den = sum(pi[a] * sp.Symbol(rf"{{\|s({a + 1})\|^2}}") for a in range(2))
    norms = {sp.Symbol(rf"{{\|s({a + 1})\|^2}}"): sq[a] for a in range(2)}
    d = Derivation(
        "The optimal baseline of a two-armed bandit",
        assumptions=[r"$\pi = (p, 1 - p)$, softmax score $s(a) = \mathbf{e}_a - \pi$", *[sp.Eq(k, v) for k, v in norms.items()]],
    )
    d.step(num / den, (pi[0] * R1 * sq[0] + pi[1] * R2 * sq[1]) / (pi[0] * sq[0] + pi[1] * sq[1]), r"$\|s(1)\|^2 = 2(1-p)^2$, $\|s(2)\|^2 = 2p^2$", facts=norms)
    d.then((1 - p) * R1 + p * R2, r"cancel the common factor $2p(1-p)$")
    d.step(d.rhs - value, (1 - 2 * p) * (R1 - R2), r"subtract $V^\pi = p R(1) + (1-p) R(2)$")
    return d


# -- formulas by name, for numeric (which never reads a derivation's steps by position) ---------


def optimal_baseline_formula() -> sp.Expr:
    r"""The optimal constant baseline :math:`b^* = \sum_a p_a R_a \nu_a / \sum_a p_a \nu_a`, as :func:`optimal_baseline` displays and verifies it.

    Examples
    --------
    >>> from derivations.baselines import optimal_baseline_formula
    >>> optimal_baseline_formula()
    Sum(R[a]*nu[a]*p[a], (a, 1, K))/Sum(nu[a]*p[a], (a, 1, K))
    """
    return optimal_baseline().steps[1].rhs


def bandit_optimal_baseline_formula() -> sp.Expr:
    r"""The two-armed bandit's :math:`b^* = (1-p)R(1) + pR(2)`, as :func:`bandit_optimal_baseline` displays and verifies it.

    Examples
    --------
    >>> from derivations.baselines import bandit_optimal_baseline_formula
    >>> bandit_optimal_baseline_formula()
    R(1)*(1 - p) + R(2)*p
    """
    return bandit_optimal_baseline().steps[1].rhs


__all__ += ["bandit_optimal_baseline_formula", "optimal_baseline_formula"]
