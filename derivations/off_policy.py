r"""Off-policy samplers and multi-turn agents: which weights are unbiased, and what the others cost.

A sampler :math:`\mu` (an inference engine, stale weights) produces the
episodes; the gradient is wanted for :math:`\pi`.  For a two-turn episode
:math:`(a, a')` with ratios :math:`\rho_0 = \pi_0/\mu_0`,
:math:`\rho_2 = \pi_2/\mu_2` and any per-episode quantity :math:`g`:

* the **sequence ratio** is exact, :math:`\mathbb E_\mu[\rho_0\rho_2\, g] = \mathbb E_\pi[g]`
  (:func:`sequence_ratio_unbiased`);
* **token ratios** :math:`\rho_0 A s_0 + \rho_2 A s_2` are biased by
  :math:`\sum_{a,a'}\pi_0(\mu_2 - \pi_2)A s_0 + (\mu_0 - \pi_0)\pi_2 A s_2`: turn 0
  misses the future ratio, turn 1 the prefix ratio; the bias vanishes at
  :math:`\mu = \pi` (:func:`token_ratio_bias`);
* a **constant baseline** still adds nothing, because
  :math:`\mathbb E_\mu[\rho\, b\, s \mid \text{context}] = b\,\mathbb E_\pi[s] = 0`
  (:func:`constant_baseline_adds_zero`);
* **truncation** :math:`\min(\rho, C) = \rho - (\rho - C)_+` and **masking**
  :math:`\rho\,\mathbb 1[l \le \rho \le h] = \rho - \rho\,\mathbb 1[\rho \notin [l, h]]`
  remove exactly those terms (:func:`truncation_identity`, :func:`truncated_is_bias`,
  :func:`masking_identity`); per state the excess mass is at most the total
  variation (:func:`derivations.trust_region.tv_bound`).

For credit assignment over turns (on-policy, oracle baselines :math:`V`,
:math:`Q_a = \mathbb E[R \mid a]`): the turn-0 second moment of the
broadcast estimator splits into credit and turn-1 noise
(:func:`turn1_decomposition`); score terms of successive tokens are orthogonal
martingale differences (:func:`martingale_orthogonality`), so the second moment
of the summed score is the sum of the per-token ones (:func:`score_sum_second_moment`);
and a feedback token chosen by the environment but left in the loss adds
:math:`\mathbb E[A\, s_f] \ne 0` (:func:`unmasked_feedback_term`).

References
----------
J. Liu, Y. Li, Y. Fu, J. Wang, Q. Liu, Y. Shen, "When speed kills stability:
demystifying RL collapse from the training-inference mismatch" (2025).
Mistral AI, "Magistral" technical report (2025).
"""

from __future__ import annotations

import sympy as sp

from ._validate import require_int
from .definitions import Definitions
from .derivation import Derivation
from .policy import IndexedSoftmax
from .proofs import at_values, by_lemma, holds, on_regions

__all__ = [
    "constant_baseline_adds_zero",
    "martingale_orthogonality",
    "masking_identity",
    "score_sum_second_moment",
    "sequence_ratio_unbiased",
    "token_bias_symbols",
    "token_bias_term",
    "token_ratio_bias",
    "truncated_is_bias",
    "truncated_ratio_mean",
    "truncation_identity",
    "turn1_decomposition",
    "unmasked_feedback_term",
]

_a, _b, _k = sp.symbols("a a' k", integer=True, positive=True)   # _b: the second action a'
_K = sp.Symbol("K", integer=True, positive=True)

_pi1, _pi2 = sp.IndexedBase(r"\pi_0", positive=True), sp.IndexedBase(r"\pi_2", positive=True)
_mu1, _mu2 = sp.IndexedBase(r"\mu_0", positive=True), sp.IndexedBase(r"\mu_2", positive=True)
_rho1, _rho2 = sp.IndexedBase(r"\rho_0", positive=True), sp.IndexedBase(r"\rho_2", positive=True)


_ratios = Definitions({_rho1[_a]: _pi1[_a] / _mu1[_a], _rho2[_a, _b]: _pi2[_a, _b] / _mu2[_a, _b]})
r"""The ratios' definitions :math:`\rho_0[a] := \pi_0[a]/\mu_0[a]`, :math:`\rho_2[a, b] := \pi_2[a, b]/\mu_2[a, b]`."""


def _episodes(term):
    r""":math:`\sum_{a=1}^{K}\sum_{a\'=1}^{K}` term, one Sum with both limits."""
    return sp.Sum(term, (_b, 1, _K), (_a, 1, _K))


_ASSUME = [
    r"two turns, $K$ actions each; $a \sim \mu_0$, $a' \sim \mu_2(\cdot \mid a)$",
    r"$\pi, \mu > 0$; $\rho_0 = \pi_0/\mu_0$, $\rho_2 = \pi_2/\mu_2$",
]


def sequence_ratio_unbiased() -> Derivation:
    r"""The full-sequence ratio is exact: :math:`\mathbb E_\mu[\rho_0\rho_2\, g] = \mathbb E_\pi[g]`, any :math:`K`, any :math:`g`.

    With :math:`g_{aa'} = A_{aa'}(s_0 + s_2)` this is :math:`\nabla J`, whatever the sampler.

    Examples
    --------
    >>> from derivations.off_policy import sequence_ratio_unbiased
    >>> sequence_ratio_unbiased().verify().proved_by()
    {'expand': 1}
    """
    g = sp.IndexedBase("g", real=True)
    d = Derivation("The sequence ratio is unbiased under any sampler", assumptions=_ASSUME + [r"$g_{aa'}$: any per-episode quantity"], unfold=_ratios)
    d.step(_episodes(_mu1[_a] * _mu2[_a, _b] * _rho1[_a] * _rho2[_a, _b] * g[_a, _b]), _episodes(_pi1[_a] * _pi2[_a, _b] * g[_a, _b]),
           r"$\mu_0\mu_2\,\rho_0\rho_2 = \pi_0\pi_2$: the sampler cancels")
    return d


_p1, _p2, _q1, _q2 = sp.symbols(r"\pi_0 \pi_2 \mu_0 \mu_2", positive=True)
_r1, _r2 = sp.symbols(r"\rho_0 \rho_2", positive=True)
_A, _s1, _s2 = sp.symbols("A s_0 s_2", real=True)


token_bias_symbols = (_p1, _p2, _q1, _q2, _A, _s1, _s2)
r"""The arguments of :func:`token_bias_term`, in order: :math:`\pi_0, \pi_2, \mu_0, \mu_2, A, s_0, s_2`."""


def token_bias_term() -> sp.Expr:
    r"""The token-ratio bias of one episode :math:`(a, a')`: :math:`\pi_0(\mu_2 - \pi_2)A s_0 + (\mu_0 - \pi_0)\pi_2 A s_2`.

    A function of the plain symbols ``\pi_0 \pi_2 \mu_0 \mu_2 A s_0 s_2`` (the
    right-hand side of :func:`token_ratio_bias`'s lemma), for ``lambdify``.

    Examples
    --------
    >>> from derivations.off_policy import token_bias_term
    >>> token_bias_term()
    A*\pi_0*s_0*(\mu_2 - \pi_2) + A*\pi_2*s_2*(\mu_0 - \pi_0)
    """
    return _p1 * (_q2 - _p2) * _A * _s1 + (_q1 - _p1) * _p2 * _A * _s2


def _token_bias_lemma() -> Derivation:
    unfold = Definitions({_r1: _p1 / _q1, _r2: _p2 / _q2})
    d = Derivation("Token-ratio bias of one episode", assumptions=[r"$\rho_0 = \pi_0/\mu_0$, $\rho_2 = \pi_2/\mu_2$"], unfold=unfold)
    d.step(_q1 * _q2 * (_r1 * _s1 + _r2 * _s2) * _A - _p1 * _p2 * (_s1 + _s2) * _A, token_bias_term(),
           r"$\mu_0\mu_2\rho_0 = \pi_0\mu_2$, $\mu_0\mu_2\rho_2 = \mu_0\pi_2$")
    return d


def token_ratio_bias() -> Derivation:
    r"""Token-level ratios are biased: :math:`\mathbb E_\mu[\rho_0 A s_0 + \rho_2 A s_2] - \mathbb E_\pi[A(s_0 + s_2)]`, any :math:`K`.

    .. math::

        \sum_{a,a'}\Bigl[\pi_0(\mu_2 - \pi_2) A s_0 + (\mu_0 - \pi_0)\pi_2 A s_2\Bigr],

    one coordinate of the scores at a time.  Turn 0 is weighted by the sampler's
    turn 1 (its future ratio is dropped), turn 1 by the sampler's turn 0 (its
    prefix ratio is dropped).  Proved per episode (a lemma, checked with the
    ratios unfolded) and summed; at :math:`\mu = \pi` every term vanishes.

    Examples
    --------
    >>> from derivations.off_policy import token_ratio_bias
    >>> d = token_ratio_bias().verify()
    >>> d.proved_by()
    {'lemma': 1, 'expand': 1}
    """
    A, s1, s2 = sp.IndexedBase("A", real=True), sp.IndexedBase("s_0", real=True), sp.IndexedBase("s_2", real=True)
    mapping = {_p1: _pi1[_a], _q1: _mu1[_a], _r1: _rho1[_a], _s1: s1[_a],
               _p2: _pi2[_a, _b], _q2: _mu2[_a, _b], _r2: _rho2[_a, _b], _A: A[_a, _b], _s2: s2[_a, _b]}
    lemma = _token_bias_lemma()
    lhs, _, rhs = lemma.statement()
    d = Derivation("Token-level ratios are biased by the dropped prefix and future ratios", assumptions=_ASSUME + [r"$s_0 = s_0(a)$, $s_2 = s_2(a, a')$: one coordinate of the scores"], unfold=_ratios)
    d.step(_episodes(lhs.subs(mapping)), _episodes(rhs.subs(mapping)), "per episode (the lemma), summed",
           proof=by_lemma(lemma, mapping, termwise=True))
    d.then(sp.Integer(0), r"when the sampler is the policy, $\mu = \pi$", given=(sp.Eq(_mu1, _pi1), sp.Eq(_mu2, _pi2)))
    return d


def constant_baseline_adds_zero() -> Derivation:
    r"""A constant baseline adds nothing to the token-ratio gradient: :math:`\mathbb E_\mu[\rho\, b\, s_j] = 0`, any :math:`K`.

    At any context, the ratio turns the sampler's expectation into the
    policy's, where the score has mean zero:
    :math:`\sum_a \mu_a \rho_a b\,(\mathbb{1}[a = j] - \pi_j) = b(\pi_j - \pi_j\sum_a\pi_a) = 0`.

    Examples
    --------
    >>> from derivations.off_policy import constant_baseline_adds_zero
    >>> constant_baseline_adds_zero().verify().rhs
    0
    """
    pol = IndexedSoftmax()
    a, j = pol.a, pol.j
    mu, rho = sp.IndexedBase(r"\mu", positive=True), sp.IndexedBase(r"\rho", positive=True)
    b = sp.Symbol("b", real=True)

    unfold = Definitions({rho[a]: pol.prob(a) / mu[a]}) | pol.definitions

    d = Derivation("A constant baseline adds zero under a mismatched sampler",
                   assumptions=[r"softmax policy over $K = j + n$ actions; $a \sim \mu$, $\rho_a = \pi_a/\mu_a$", r"$b$ constant"], unfold=unfold)
    d.step(sp.Sum(mu[a] * rho[a] * b * pol.score(a), (a, 1, pol.K)), b * sp.Sum(pol.prob(a) * pol.score(a), (a, 1, pol.K)),
           r"$\mu_a\rho_a = \pi_a$; $b$ comes out")
    d.then(b * (pol.prob(j) - pol.prob(j) * sp.Sum(pol.prob(a), (a, 1, pol.K))), r"the indicator picks $a = j$")
    d.then(sp.Integer(0), "probabilities sum to one")
    return d


# -- truncation and masking --------------------------------------------------------------------

_r = sp.Symbol(r"\rho", positive=True)
_C = sp.Symbol("C", positive=True)
_z = sp.Symbol("g", real=True)  # any real quantity g (here mu A s), as g_{aa'} elsewhere in the chapter


def truncation_identity() -> Derivation:
    r"""Per sample, :math:`g\,(\min(\rho, C) - \rho) = -g\,(\rho - C)_+`: truncation removes the excess above :math:`C`.

    Checked on :math:`\rho < C`, :math:`\rho = C`, :math:`\rho > C` (each region
    parametrised by a positive symbol); :math:`g` stands for :math:`\mu A s`.

    Examples
    --------
    >>> from derivations.off_policy import truncation_identity
    >>> truncation_identity().verify().proved_by()
    {'regions': 1}
    """
    d = Derivation("Truncation removes the excess ratio", assumptions=[r"$\rho > 0$, $C > 0$, $g$ real"])
    d.step(_z * (sp.Min(_r, _C) - _r), -_z * sp.Max(_r - _C, 0), r"on $\rho < C$, $\rho = C$, $\rho > C$",
           proof=on_regions((_r, [_C])))
    return d


def truncated_is_bias() -> Derivation:
    r"""Truncated IS minus IS: :math:`\mathbb E_\mu[(\min(\rho, C) - \rho) A s] = -\mathbb E_\mu[(\rho - C)_+ A s]`.

    The same at token level (:math:`\rho = \rho_t`, summed over tokens) and at
    sequence level (:math:`\rho` the product, :math:`s = \sum_t s_t`): since
    sequence IS is unbiased, the bias of sequence TIS is exactly
    :math:`-\mathbb E_\mu[(\rho - C)_+ A \sum_t s_t]`, and by the triangle
    inequality its norm is at most :math:`\mathbb E_\mu[(\rho - C)_+ |A|\,\lVert\sum_t s_t\rVert]`.
    The sum runs over the :math:`N` outcomes :math:`i` of whatever is weighted.

    Examples
    --------
    >>> from derivations.off_policy import truncated_is_bias
    >>> truncated_is_bias().verify().proved_by()
    {'lemma': 1}
    """
    i, N = sp.Symbol("i", integer=True, positive=True), sp.Symbol("N", integer=True, positive=True)
    mu, rho, A, s = (sp.IndexedBase(n, **kw) for n, kw in ((r"\mu", {"positive": True}), (r"\rho", {"positive": True}), ("A", {"real": True}), ("s", {"real": True})))
    lemma = truncation_identity()
    lhs, _, rhs = lemma.statement()
    mapping = {_z: mu[i] * A[i] * s[i], _r: rho[i]}
    d = Derivation("Truncated IS minus IS is minus the excess", assumptions=[r"$N$ outcomes $i \sim \mu$; $\rho_i > 0$; $C > 0$", r"$s_i$: one coordinate of the score"])
    d.step(sp.Sum(lhs.subs(mapping), (i, 1, N)), sp.Sum(rhs.subs(mapping), (i, 1, N)), "the identity, per outcome",
           proof=by_lemma(lemma, mapping, termwise=True))
    return d


def masking_identity() -> Derivation:
    r"""Per sample, :math:`\rho\,\mathbb 1[l \le \rho \le h] = \rho - \rho\,\mathbb 1[\rho < l] - \rho\,\mathbb 1[\rho > h]`.

    Masked IS (IcePop, ``token_mask``, ``sequence_mask``) therefore differs from
    IS by :math:`-\mathbb E_\mu[\rho\,\mathbb 1[\rho\notin[l,h]]\, A s]`: the
    whole weight of every dropped sample, not only its excess.  Checked at
    every breakpoint and inside every region, with :math:`h = l + \eta`, :math:`\eta > 0`.

    Examples
    --------
    >>> from derivations.off_policy import masking_identity
    >>> masking_identity().verify().proved_by()
    {'regions': 1}
    """
    low, high = sp.Symbol("l", positive=True), sp.Symbol("h", positive=True)
    kept = sp.Piecewise((_r, (_r >= low) & (_r <= high)), (0, True))
    below = sp.Piecewise((_r, _r < low), (0, True))
    above = sp.Piecewise((_r, _r > high), (0, True))
    d = Derivation("Masking drops the whole weight outside the band", assumptions=[r"$\rho > 0$, $l > 0$", high > low])
    d.step(kept, _r - below - above, r"at $l$, at $h$ and on the three regions they cut", proof=on_regions((_r, [low, high])))
    return d


# -- credit over turns -------------------------------------------------------------------------


def turn1_decomposition(K: int = 3) -> Derivation:
    r"""Turn-0 second moment of the broadcast estimator: credit plus turn-1 noise.

    .. math::

        \mathbb E\bigl[(R - V)^2 \lVert s_0\rVert^2\bigr]
        = \mathbb E\bigl[(Q - V)^2 \lVert s_0\rVert^2\bigr] + \mathbb E\bigl[\mathrm{Var}(R \mid a) \lVert s_0\rVert^2\bigr],

    with :math:`Q_a = \mathbb E[R \mid a]`.  :math:`\bar R_{aa'}` and
    :math:`\overline{R^2}_{aa'}` are the first two moments of :math:`R` given
    :math:`(a, a')`, kept apart (a reward need not be binary); :math:`\nu_a = \lVert s_0(a)\rVert^2`.
    Every sum is written out for ``K`` actions, and :math:`\sum_{a'} \pi_2(a' \mid a) = 1`
    is substituted last.

    Examples
    --------
    >>> from derivations.off_policy import turn1_decomposition
    >>> len(turn1_decomposition(3).verify().steps)
    2
    """
    K = require_int("K", K, minimum=2)
    a, b, a3 = _a, _b, sp.Symbol("a''", integer=True, positive=True)   # a3: the dummy of the inner sums
    pi1, pi2 = sp.IndexedBase(r"\pi_0", positive=True), sp.IndexedBase(r"\pi_2", positive=True)
    Rm, R2, nu = sp.IndexedBase(r"\bar{R}", real=True), sp.IndexedBase(r"\overline{R^2}", real=True), sp.IndexedBase(r"\nu", nonnegative=True)
    Q, W = sp.IndexedBase("Q", real=True), sp.IndexedBase(r"\mathrm{Var}_R", nonnegative=True)
    V = sp.Symbol("V", real=True)
    S = lambda e, i: sp.Sum(e, (i, 1, K))

    unfold = Definitions({W[a]: S(pi2[a, a3] * R2[a, a3], a3) - Q[a] ** 2, Q[a]: S(pi2[a, a3] * Rm[a, a3], a3)})

    normalised = {pi2[i, K]: 1 - sum(pi2[i, j] for j in range(1, K)) for i in range(1, K + 1)}
    d = Derivation(f"Turn-0 second moment: credit plus turn-1 noise (K = {K})",
                   assumptions=[r"$a \sim \pi_0$, $a' \sim \pi_2(\cdot \mid a)$, on-policy", r"$V = \mathbb E[R]$, $Q_a = \sum_{a'} \pi_2(a' \mid a)\bar R_{aa'}$",
                                r"$\mathrm{Var}_R[a] = \sum_{a'} \pi_2(a' \mid a)\overline{R^2}_{aa'} - Q_a^2$", *[sp.Eq(k_, v) for k_, v in normalised.items()]],
                   unfold=unfold)
    d.step(S(pi1[a] * nu[a] * S(pi2[a, b] * (R2[a, b] - 2 * V * Rm[a, b] + V**2), b), a), S(pi1[a] * nu[a] * ((Q[a] - V) ** 2 + W[a]), a),
           r"per $a$: $\mathbb E[(R - V)^2 \mid a] = (Q_a - V)^2 + \mathrm{Var}(R \mid a)$", facts=normalised)
    d.then(S(pi1[a] * nu[a] * (Q[a] - V) ** 2, a) + S(pi1[a] * nu[a] * W[a], a), "linearity", facts=normalised)
    return d


def martingale_orthogonality(K: int = 3) -> Derivation:
    r"""Scores of successive turns are orthogonal in expectation: :math:`\mathbb E[s_0 \cdot s_2] = 0`.

    The turns share a block of parameters :math:`\theta^{\mathrm{sh}}` (logits :math:`\theta^{\mathrm{sh}} + \theta^{(1)}` and
    :math:`\theta^{\mathrm{sh}} + \theta^{(2)}_{a}`), where :math:`s_0 = \mathbf{e}_{a} - \pi_0` and
    :math:`s_2 = \mathbf{e}_{a'} - \pi_2(\cdot\mid a)` overlap, so :math:`s_0\cdot s_2 \ne 0`
    pointwise; the other blocks are disjoint.  Summing over :math:`a'` first,
    :math:`\mathbb E[s_2 \mid a] = 0`.  Written out for ``K`` actions;
    normalisations substituted last.

    Examples
    --------
    >>> from derivations.off_policy import martingale_orthogonality
    >>> martingale_orthogonality(3).verify().rhs
    0
    """
    K = require_int("K", K, minimum=2)
    a, b, k = _a, _b, _k
    pi1, pi2 = sp.IndexedBase(r"\pi_0", positive=True), sp.IndexedBase(r"\pi_2", positive=True)
    d_ak, d_bk = sp.KroneckerDelta(a, k), sp.KroneckerDelta(b, k)
    normalised = {pi1[K]: 1 - sum(pi1[j] for j in range(1, K))} | {pi2[i, K]: 1 - sum(pi2[i, j] for j in range(1, K)) for i in range(1, K + 1)}
    d = Derivation(f"Successive scores are orthogonal in expectation (K = {K})",
                   assumptions=[r"$a \sim \pi_0$, $a' \sim \pi_2(\cdot \mid a)$", r"shared block: $s_0 = \mathbf{e}_a - \pi_0$, $s_2 = \mathbf{e}_{a'} - \pi_2(\cdot \mid a)$",
                                *[sp.Eq(k_, v) for k_, v in normalised.items()]])
    d.step(sp.Sum(pi1[a] * pi2[a, b] * sp.Sum((d_ak - pi1[k]) * (d_bk - pi2[a, k]), (k, 1, K)), (b, 1, K), (a, 1, K)),
           sp.Sum(pi1[a] * sp.Sum((d_ak - pi1[k]) * sp.Sum(pi2[a, b] * (d_bk - pi2[a, k]), (b, 1, K)), (k, 1, K)), (a, 1, K)),
           r"sum over $a'$ first")
    d.then(sp.Integer(0), r"$\mathbb E[s_2 \mid a] = \sum_{a'} \pi_2(a' \mid a)(\mathbb{1}[a' = k] - \pi_2(k \mid a)) = 0$", facts=normalised)
    return d


class Inner(sp.Function):
    r""":math:`\mathbb E[s_t \cdot s_u]`, symmetric: ``Inner(2, 1)`` is ``Inner(1, 2)``."""

    nargs = 2

    @classmethod
    def eval(cls, t: sp.Basic, u: sp.Basic) -> sp.Basic | None:
        if t.is_Integer and u.is_Integer and t > u:
            return cls(u, t)
        return None

    def _latex(self, printer):
        t, u = (printer._print(x) for x in self.args)
        return r"\mathbb{E}\left[s_{%s} \cdot s_{%s}\right]" % (t, u)


class Before(sp.Function):
    r""":math:`\mathbb 1[t < u]`, evaluated once both indices are integers."""

    nargs = 2

    @classmethod
    def eval(cls, t: sp.Basic, u: sp.Basic) -> sp.Basic | None:
        if t.is_Integer and u.is_Integer:
            return sp.Integer(1 if bool(t < u) else 0)
        return None

    def _latex(self, printer):
        t, u = (printer._print(x) for x in self.args)
        return r"\mathbb{1}[%s < %s]" % (t, u)


class SquaredScoreSum(sp.Function):
    r""":math:`\mathbb E\lVert\sum_{t=0}^{L-1} s_t\rVert^2`; unfolds into :math:`\sum_t\sum_u \mathbb E[s_t\cdot s_u]`."""

    nargs = 1

    def _latex(self, printer):
        return r"\mathbb{E}\left\lVert \sum_{t=0}^{%s - 1} s_t \right\rVert^{2}" % printer._print(self.args[0])


def score_sum_second_moment() -> Derivation:
    r""":math:`\mathbb E\lVert\sum_{t=0}^{L-1} s_t\rVert^2 = \sum_{t=0}^{L-1}\mathbb E\lVert s_t\rVert^2`: the second moment grows with the number of tokens.

    Expand the square; split the double sum into the diagonal and twice the
    upper triangle; the cross terms are 0 because score terms are martingale
    differences (:func:`martingale_orthogonality`: :math:`\mathbb E[s_u \mid o_{<u}] = 0`
    makes every term of :math:`\sum_t\sum_u \mathbb 1[t < u]\,\mathbb E[s_t \cdot s_u]`
    zero: the premise shown on the page), which the kernel substitutes for
    symbolic :math:`L`.  The split
    into diagonal and triangles is checked at :math:`L = 1, \dots, 5` (sums
    written out), not for a symbolic :math:`L`.

    Examples
    --------
    >>> from derivations.off_policy import score_sum_second_moment
    >>> score_sum_second_moment().verify().proved_by()
    {'expand': 2, 'instances L = 1, 2, 3, 4, 5': 1}
    """
    L = sp.Symbol("L", integer=True, positive=True)
    t, u = sp.symbols("t u", integer=True, nonnegative=True)
    lengths = range(1, 6)

    unfold = Definitions({SquaredScoreSum(L): sp.Sum(Inner(t, u), (u, 0, L - 1), (t, 0, L - 1))})
    cross = sp.Eq(sp.Sum(Before(t, u) * Inner(t, u), (u, 0, L - 1), (t, 0, L - 1)), 0)  # martingale_orthogonality: every term is 0
    d = Derivation("The second moment of the score sum is the sum of the second moments",
                   assumptions=[r"$s_t$: score of token $t$ of an $L$-token sequence", r"$\mathbb E[s_u \mid o_{<u}] = 0$, hence",
                                cross], unfold=unfold)
    d.step(SquaredScoreSum(L), sp.Sum(Inner(t, u), (u, 0, L - 1), (t, 0, L - 1)), "expand the square; linearity")
    d.then(sp.Sum(Inner(t, t), (t, 0, L - 1)) + 2 * sp.Sum(Before(t, u) * Inner(t, u), (u, 0, L - 1), (t, 0, L - 1)), r"diagonal and twice the upper triangle ($L = 1..5$)",
           proof=at_values(L, lengths))
    d.then(sp.Sum(Inner(t, t), (t, 0, L - 1)), r"the cross terms are 0: the premise $\mathbb E[s_u \mid o_{<u}] = 0$",
           facts={cross.lhs: cross.rhs})
    return d


def unmasked_feedback_term(K: int = 3) -> Derivation:
    r"""A feedback token left in the loss adds :math:`\mathbb E[A\, s_f] = \sum_a \pi_0(a)\, Q_a\, (\mathbf{e}_{f(a)} - \pi_f(\cdot \mid a))`, which is not 0.

    The environment writes :math:`f = f(a)`; the model's own distribution at
    that slot is :math:`\pi_f(\cdot \mid a)`, and its score
    :math:`s_f = \mathbf{e}_{f} - \pi_f` has conditional mean :math:`\mathbf{e}_{f(a)} - \pi_f(\cdot\mid a)`,
    not 0: nobody sampled :math:`f` from :math:`\pi_f`.  First step: the extra
    term of the unmasked loss (linearity, written out for ``K`` actions);
    second: the squared norm of :math:`\mathbb E[s_f \mid a]` is positive
    (coordinates :math:`k`, :math:`f(a) = 1` without loss of generality).

    Examples
    --------
    >>> from derivations.off_policy import unmasked_feedback_term
    >>> unmasked_feedback_term(3).verify().proved_by()
    {'expand': 1, 'sign decided': 1}
    """
    K = require_int("K", K, minimum=2)
    a, b, k = _a, _b, _k
    pi1, pi2 = sp.IndexedBase(r"\pi_0", positive=True), sp.IndexedBase(r"\pi_2", positive=True)
    A, s1, s2, sf = (sp.IndexedBase(n, real=True) for n in ("A", "s_0", "s_2", "s_f"))
    Q = sp.IndexedBase("Q", real=True)
    pf = sp.IndexedBase(r"\pi_f", positive=True)
    E = lambda g: sp.Sum(pi1[a] * pi2[a, b] * A[a, b] * g, (b, 1, K), (a, 1, K))
    d = Derivation(f"An unmasked feedback token adds a term (K = {K})",
                   assumptions=[r"$a \sim \pi_0$, $a' \sim \pi_2(\cdot \mid a)$; $f = f(a)$ chosen by the environment",
                                r"$Q_a = \sum_{a'} \pi_2(a' \mid a) A_{aa'}$; $s_0, s_f$ depend on $a$ only", sp.Eq(pf[1], 1 - sum(pf[j] for j in range(2, K + 1)))],
                   unfold=Definitions({Q[a]: sp.Sum(pi2[a, b] * A[a, b], (b, 1, K))}))
    d.step(E(s1[a] + sf[a] + s2[a, b]) - E(s1[a] + s2[a, b]), sp.Sum(pi1[a] * Q[a] * sf[a], (a, 1, K)), r"linearity; sum over $a'$")
    d.step(sp.Sum((sp.KroneckerDelta(k, 1) - pf[k]) ** 2, (k, 1, K)), sp.Integer(0),
           r"$\lVert \mathbf{e}_{f} - \pi_f \rVert^2 > 0$ unless $\pi_f(f) = 1$", relation=">",
           facts={pf[1]: 1 - sum(pf[j] for j in range(2, K + 1))}, proof=holds)
    return d


def truncated_ratio_mean() -> Derivation:
    r"""The mean of a truncated ratio: :math:`\mathbb E_\mu[\min(\rho, C)] = 1 - \mathbb E_\mu[(\rho - C)_+]`, over :math:`K` outcomes.

    The limit of the batch mean that :func:`numeric.batch_normalized_weights`
    divides by, for a truncated weight: the untruncated ratio has mean 1
    (:math:`\sum_a \mu_a \rho_a = \sum_a \pi_a`), and truncation removes the
    excess mass, per outcome by :func:`truncation_identity` (with
    :math:`g = \mu_a`).  The statement holds for a token ratio given its prefix
    and for a sequence ratio alike (the outcomes :math:`a` are then whole
    sequences).

    Examples
    --------
    >>> from derivations.off_policy import truncated_ratio_mean
    >>> d = truncated_ratio_mean().verify()
    >>> d.verified, d.proved_by()
    (True, {'lemma': 1, 'sums as atoms, cancel(together)': 1, 'expand': 1})
    """
    mu, rho, pi = (sp.IndexedBase(n, positive=True) for n in (r"\mu", r"\rho", r"\pi"))
    S = lambda e: sp.Sum(e, (_a, 1, _K))
    unfold = Definitions({rho[_a]: pi[_a] / mu[_a]})
    d = Derivation(
        "The mean of a truncated ratio",
        assumptions=[r"$K$ outcomes $a \sim \mu$", r"$\rho_a = \pi_a/\mu_a > 0$, $C > 0$", sp.Eq(S(pi[_a]), 1)],
        unfold=unfold,
    )
    d.step(S(mu[_a] * (sp.Min(rho[_a], _C) - rho[_a])), S(-mu[_a] * sp.Max(rho[_a] - _C, 0)),
           r"truncation removes the excess, per outcome ($g = \mu_a$)",
           proof=by_lemma(truncation_identity(), {_z: mu[_a], _r: rho[_a]}, termwise=True))
    d.step(S(mu[_a] * sp.Min(rho[_a], _C)), S(mu[_a] * rho[_a]) + S(mu[_a] * (sp.Min(rho[_a], _C) - rho[_a])), "linearity")
    d.step(S(mu[_a] * rho[_a]), sp.Integer(1), r"$\mu_a\rho_a = \pi_a$, $\sum_a \pi_a = 1$", facts={S(pi[_a]): 1})
    return d
