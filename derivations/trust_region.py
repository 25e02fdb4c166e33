r"""Trust-region facts: the per-state TV bound, the CISPO clip bias, the KL estimators.

**Clip excess and total variation.**  For a behaviour policy :math:`\mu`, a
current policy :math:`\pi`, ratio :math:`r_a = \pi_a/\mu_a` and a cap :math:`C \ge 1`,

.. math::

    \mathbb{E}_{a\sim\mu}\bigl[(r_a - C)_+\bigr] = \sum_a (\pi_a - C\,\mu_a)_+
    \le \sum_a (\pi_a - \mu_a)_+ = \tfrac12 \sum_a |\pi_a - \mu_a| = \mathrm{TV}(\pi, \mu),

proved for a symbolic number :math:`K` of actions from a scalar lemma,
:math:`(x - C y)_+ \le (x - y)_+` for :math:`C \ge 1`, :math:`y \ge 0`, which is
checked region by region and then instantiated termwise.  With
:math:`C = 1+\varepsilon` this bounds the mass that CISPO's clip removes.

**CISPO's bias.**  Per token, :math:`\min(r, 1+\varepsilon) - r = -(r - 1 - \varepsilon)_+`,
so the CISPO gradient differs from the token-IS gradient by
:math:`-\mathbb{E}\bigl[\sum_t (r_t - 1 - \varepsilon)_+ A\, s_t\bigr]`, and the
triangle inequality gives
:math:`\lVert\mathrm{bias}\rVert \le \sum_t \mathbb{E}\bigl[(r_t - 1 - \varepsilon)_+ |A|\, \lVert s_t\rVert\bigr]`.

**KL estimators.**  With :math:`a \sim \pi` and the *reference* ratio
:math:`r_{\mathrm{ref}} = \pi_{\mathrm{ref}}(a)/\pi(a)` (not the ratio :math:`r` of the
clip above, whose reference is in the denominator):
:math:`k_1 = -\log r_{\mathrm{ref}}`, :math:`k_2 = \tfrac12(\log r_{\mathrm{ref}})^2`,
:math:`k_3 = (r_{\mathrm{ref}} - 1) - \log r_{\mathrm{ref}}`.
:math:`k_1` and :math:`k_3` are unbiased for :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`,
:math:`k_3 \ge 0`; :math:`k_2` is biased (it agrees to second order).  Used as
a loss (samples held fixed, the estimator differentiated), :math:`k_1` has
expected gradient 0, :math:`k_2` gives :math:`\nabla\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`,
and :math:`k_3` gives :math:`\nabla\mathrm{KL}(\pi_{\mathrm{ref}}\,\|\,\pi)`, the other direction.
The forms the trainers ship besides (:func:`kl_form_gradients`, :func:`low_var_kl_clamp`):
verl's straight-through ``k*+`` and :math:`k_1` in the reward give the reverse KL's gradient too,
``abs`` twice the total variation's, and verl's clamped :math:`k_3` (``low_var_kl``) :math:`k_3`'s
between the two roots of :math:`k_3 = 10` and none beyond.

References
----------
J. Schulman, "Approximating KL Divergence", blog note (2020) (k1, k2, k3).
MiniMax, "MiniMax-M1", arXiv:2506.13585 (2025), Sec. 3.1 (CISPO).
"""

from __future__ import annotations

import sympy as sp

from ._validate import require_int
from .definitions import Definitions, Differentiation
from .derivation import Derivation
from .policy import IndexedSoftmax, SoftmaxPolicy
from .proofs import by_lemma, holds, minimum_over, on_regions

__all__ = [
    "bias_corrected_kl_gradient",
    "clip_bias_term",
    "clip_excess",
    "ell",
    "ell_ref",
    "epsilon",
    "k1",
    "k2",
    "k2_bias",
    "k3",
    "k3_nonnegative",
    "k3_unbiased",
    "k_star",
    "kl_estimator_gradients",
    "kl_estimators_unbiased",
    "kl_form_gradients",
    "low_var_kl_clamp",
    "positive_part_lemma",
    "ratio",
    "tv_bound",
]

delta = sp.Symbol("Delta", real=True)
r"""The log-ratio :math:`\log\pi - \log\pi_{\mathrm{ref}} = -\log r_{\mathrm{ref}}` (the symbol of :data:`k1`, :data:`k2`, :data:`k3`)."""

k1 = delta
r""":math:`k_1 = -\log r_{\mathrm{ref}}`."""
k2 = delta**2 / 2
r""":math:`k_2 = \tfrac12 (\log r_{\mathrm{ref}})^2`."""
k3 = sp.exp(-delta) - 1 + delta
r""":math:`k_3 = (r_{\mathrm{ref}} - 1) - \log r_{\mathrm{ref}}`."""

r_ref = sp.Symbol(r"r_{\mathrm{ref}}", positive=True)
r"""The reference ratio :math:`r_{\mathrm{ref}} = \pi_{\mathrm{ref}}(a)/\pi(a)` of the KL estimators."""

ratio = sp.Symbol("r", positive=True)
r"""The importance ratio :math:`r = \pi_\theta/\pi_{\text{old}}` of a token, as the clip sees it."""
epsilon = sp.Symbol("varepsilon", positive=True)
r"""The clip parameter :math:`\varepsilon`: CISPO caps the ratio at :math:`1 + \varepsilon`."""
clip_excess = sp.Max(ratio - 1 - epsilon, 0)
r""":math:`(r - 1 - \varepsilon)_+`, the weight CISPO's cap removes from a token: the formula
:func:`clip_bias_term` displays and verifies (``-clip_excess * A`` is its first right-hand side),
exported by name for :func:`numeric.clip_excess`."""

_x, _y = sp.symbols("x y", real=True)
_C, _mu = sp.symbols("C mu", positive=True)
_pos = lambda e: sp.Max(e, 0)


def positive_part_lemma() -> Derivation:
    r"""The scalar lemma :math:`(x - C y)_+ \le (x - y)_+` for a cap :math:`C \ge 1` and :math:`y \ge 0`.

    Since :math:`y \le C y`, the real line of :math:`x` is cut at :math:`y` and
    :math:`C y`.  The claim is decided at each cut and at a symbolic interior
    point of each piece, for :math:`C > 1` or :math:`C = 1`, and for
    :math:`y > 0` or :math:`y = 0`: 14 points, each open case written with a
    positive symbol, that cover every :math:`(x, C, y)` allowed.

    Examples
    --------
    >>> from derivations.trust_region import positive_part_lemma
    >>> d = positive_part_lemma().verify()
    >>> d.statement()
    (Max(0, -C*y + x), '<=', Max(0, x - y))
    >>> d.proved_by()
    {'regions': 1}
    """
    d = Derivation(r"Scalar lemma: (x - C y)+ <= (x - y)+", assumptions=[_C >= 1, _y >= 0])
    d.step(_pos(_x - _C * _y), _pos(_x - _y),
           r"$x$ below, at, between and above $y \le C y$; for $C = 1$ or $C > 1$, $y = 0$ or $y > 0$", relation="<=",
           proof=on_regions((_C, []), (_y, []), (_x, [_y, _C * _y])))
    return d


def _positive_part_identity() -> Derivation:
    r""":math:`x_+ = x/2 + |x|/2` for real :math:`x`, decided on :math:`x < 0`, at :math:`x = 0` and on :math:`x > 0`."""
    d = Derivation("positive part as a mean of x and |x|")
    return d.step(_pos(_x), _x / 2 + sp.Abs(_x) / 2, r"on $x < 0$, $x = 0$, $x > 0$", proof=on_regions((_x, [0])))


def _homogeneity() -> Derivation:
    r""":math:`\mu\,(x/\mu - C)_+ = (x - C\mu)_+` for :math:`\mu > 0`, decided below, at and above :math:`x = C\mu`."""
    d = Derivation("positive homogeneity of the positive part")
    return d.step(_mu * _pos(_x / _mu - _C), _pos(_x - _C * _mu), r"on $x < C\mu$, $x = C\mu$, $x > C\mu$",
                  proof=on_regions((_x, [_C * _mu])))


def tv_bound() -> Derivation:
    r"""The per-state bound :math:`\mathbb{E}_\mu[(r - C)_+] \le \mathrm{TV}(\pi, \mu)` for a cap :math:`C \ge 1`, any :math:`K`.

    .. math::

        \sum_{a=1}^K \mu_a\Bigl(\frac{\pi_a}{\mu_a} - C\Bigr)_+
        = \sum_a (\pi_a - C\mu_a)_+
        \le \sum_a (\pi_a - \mu_a)_+
        = \tfrac12 \sum_a |\pi_a - \mu_a|.

    The middle inequality is :func:`positive_part_lemma` with :math:`x = \pi_a`,
    :math:`y = \mu_a`, term by term (its verified statement, instantiated); so
    are the first step (positive homogeneity) and the third
    (:math:`x_+ = x/2 + |x|/2`), each a lemma decided region by region; the last
    substitutes :math:`\sum_a \pi_a = \sum_a \mu_a = 1`.

    Examples
    --------
    >>> from derivations.trust_region import tv_bound
    >>> d = tv_bound().verify()
    >>> len(d.steps), d.verified
    (5, True)
    """
    pi, mu = sp.IndexedBase("pi", positive=True), sp.IndexedBase("mu", positive=True)
    a = sp.Symbol("a", integer=True, positive=True)
    K = sp.Symbol("K", integer=True, positive=True)
    C = sp.Symbol("C", positive=True)
    S = lambda e: sp.Sum(e, (a, 1, K))
    d = Derivation(
        r"Per-state bound: E_mu[(r - C)+] <= TV(pi, mu)",
        assumptions=[C >= 1, r"$\pi_a, \mu_a > 0$", sp.Eq(S(pi[a]), 1), sp.Eq(S(mu[a]), 1), r"$r_a = \pi_a / \mu_a$"],
    )
    d.step(S(mu[a] * _pos(pi[a] / mu[a] - C)), S(_pos(pi[a] - C * mu[a])),
           r"$\mu (x/\mu - C)_+ = (x - C\mu)_+$, $\mu > 0$, termwise",
           proof=by_lemma(_homogeneity(), {_x: pi[a], _mu: mu[a], _C: C}, termwise=True))
    d.then(S(_pos(pi[a] - mu[a])), r"the lemma, termwise", relation="<=",
           proof=by_lemma(positive_part_lemma(), {_x: pi[a], _y: mu[a], _C: C}, termwise=True))
    d.then(S((pi[a] - mu[a]) / 2 + sp.Abs(pi[a] - mu[a]) / 2), r"$x_+ = x/2 + |x|/2$, termwise",
           proof=by_lemma(_positive_part_identity(), {_x: pi[a] - mu[a]}, termwise=True))
    d.then(S(pi[a]) / 2 - S(mu[a]) / 2 + S(sp.Abs(pi[a] - mu[a])) / 2, "linearity")
    d.then(S(sp.Abs(pi[a] - mu[a])) / 2, r"$\sum_a \pi_a = \sum_a \mu_a = 1$", facts={S(pi[a]): 1, S(mu[a]): 1})
    return d


def clip_bias_term() -> Derivation:
    r"""Per token, CISPO minus token IS: :math:`(\min(r, 1+\varepsilon) - r) A = -(r - 1 - \varepsilon)_+ A`.

    Its norm times :math:`\lVert s_t \rVert` is :math:`(r - 1 - \varepsilon)_+ |A|\,\lVert s_t\rVert`;
    summing over tokens and taking expectations, the triangle inequality gives
    the bound on :math:`\lVert\mathrm{bias}\rVert` (checked in numbers by
    :mod:`numeric.trust_region`).

    Examples
    --------
    >>> from derivations.trust_region import clip_bias_term
    >>> clip_bias_term().verify().proved_by()
    {'regions': 1, 'regions and signs of A': 1}
    """
    r, eps, excess = ratio, epsilon, clip_excess
    A = sp.Symbol("A", real=True)
    d = Derivation("CISPO minus token IS, per token", assumptions=[r"$r > 0$", r"$\varepsilon > 0$"])
    d.step((sp.Min(r, 1 + eps) - r) * A, -excess * A, r"on $r < 1+\varepsilon$, $r = 1+\varepsilon$, $r > 1+\varepsilon$",
           proof=on_regions((r, [1 + eps])))
    d.step(sp.Abs(-excess * A), excess * sp.Abs(A), r"$(\cdot)_+ \ge 0$; on each region of $r$, for $A > 0$, $A = 0$, $A < 0$",
           proof=on_regions((r, [1 + eps]), (A, [0]), label="regions and signs of A"))
    return d


# --------------------------------------------------------------- KL estimators


def kl_estimators_unbiased(K: int | None = None) -> tuple[Derivation, Derivation]:
    r""":math:`\mathbb{E}_\pi[k_1] = \mathbb{E}_\pi[k_3] = \mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`, for a symbolic ``K`` or a fixed one.

    All probabilities are positive symbols; the logs are expanded before
    anything else and :math:`\sum_a \pi_a = \sum_a \pi_{\mathrm{ref},a} = 1` is
    substituted last.  With
    ``K=None`` the sums run to a symbolic :math:`K`; with an int they are
    written out term by term.

    Examples
    --------
    >>> from derivations.trust_region import kl_estimators_unbiased
    >>> [d.verify().verified for d in kl_estimators_unbiased()]
    [True, True]
    >>> [d.verify().verified for d in kl_estimators_unbiased(4)]
    [True, True]
    """
    if K is None:
        pi, ref = sp.IndexedBase("pi", positive=True), sp.IndexedBase(r"\pi_{\mathrm{ref}}", positive=True)
        a = sp.Symbol("a", integer=True, positive=True)
        n = sp.Symbol("K", integer=True, positive=True)
        S = lambda f: sp.Sum(f(pi[a], ref[a]), (a, 1, n))
        total = {S(lambda p, q: p): 1, S(lambda p, q: q): 1}
    else:
        pis, refs, total = _probabilities(K)
        S = lambda f: sum(f(p, q) for p, q in zip(pis, refs))
    kl = S(lambda p, q: p * sp.log(p / q))
    assumptions = [r"$a \sim \pi$, $r_{\mathrm{ref}} = \pi_{\mathrm{ref},a} / \pi_a$", r"$\pi_a, \pi_{\mathrm{ref},a} > 0$",
                   *[sp.Eq(k, v) for k, v in total.items()]]
    size = "any K" if K is None else f"K = {K}"
    d1 = Derivation(f"k1 is unbiased for KL(π ‖ π_ref), {size}", assumptions=assumptions)
    d1.step(S(lambda p, q: p * (-sp.log(q / p))), kl, r"$-\log(\pi_{\mathrm{ref}}/\pi) = \log(\pi/\pi_{\mathrm{ref}})$")
    d3 = Derivation(f"k3 is unbiased for KL(π ‖ π_ref), {size}", assumptions=assumptions)
    d3.step(S(lambda p, q: p * (q / p - 1 - sp.log(q / p))), S(lambda p, q: q) - S(lambda p, q: p) + kl,
            "expand the logs")
    d3.then(kl, r"$\sum_a \pi_{\mathrm{ref},a} = \sum_a \pi_a = 1$", facts=total)
    return d1, d3


def k3_unbiased(K: int | None = None) -> Derivation:
    r""":math:`\mathbb{E}_\pi[k_3] = \mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})` over ``K`` actions (the second of :func:`kl_estimators_unbiased`).

    Examples
    --------
    >>> from derivations.trust_region import k3_unbiased
    >>> k3_unbiased().verify().proved_by()
    {'sums as atoms, cancel(together)': 1, 'expand': 1}
    """
    return kl_estimators_unbiased(K)[1]


def _probabilities(K: int):
    require_int("K", K, minimum=2)
    pi = sp.symbols(f"pi_1:{K + 1}", positive=True)
    ref = tuple(sp.Symbol(r"\pi_{\mathrm{ref},%d}" % a, positive=True) for a in range(1, K + 1))
    total = {pi[-1]: 1 - sum(pi[:-1]), ref[-1]: 1 - sum(ref[:-1])}
    return pi, ref, total


def k3_nonnegative() -> Derivation:
    r""":math:`k_3 = (r_{\mathrm{ref}} - 1) - \log r_{\mathrm{ref}} \ge 0` for :math:`r_{\mathrm{ref}} > 0`, with equality only at :math:`r_{\mathrm{ref}} = 1`.

    :math:`f(r) = r - 1 - \log r` is convex (:math:`f'' = 1/r^2 > 0`) with
    :math:`f'(1) = 0`, so its minimum over :math:`(0, \infty)` is :math:`f(1) = 0`
    (the last step asks SymPy for that minimum of the displayed gap).

    Examples
    --------
    >>> from derivations.trust_region import k3_nonnegative
    >>> k3_nonnegative().verify().verified
    True
    """
    r = r_ref
    f = r - 1 - sp.log(r)
    d = Derivation("k3 is non-negative", assumptions=[r"$r_{\mathrm{ref}} = \pi_{\mathrm{ref}}(a)/\pi(a) > 0$"])
    d.step(sp.Derivative(f, r, 2), 1 / r**2, r"second derivative, positive: $f$ is convex")
    d.step(sp.Subs(sp.Derivative(f, r), r, 1), sp.Integer(0), r"$r_{\mathrm{ref}} = 1$ is the stationary point")
    d.step(f, sp.Integer(0), r"minimum of $f$ over $r_{\mathrm{ref}} > 0$", relation=">=",
           proof=minimum_over(r, sp.Interval.open(0, sp.oo)))
    return d


def k2_bias() -> Derivation:
    r""":math:`\mathbb{E}_\pi[k_2] - \mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}}) = O(t^3)` but not zero (two actions).

    With :math:`\pi = (p, 1-p)` and :math:`\pi_{\mathrm{ref}} = (p + t, 1 - p - t)`,
    the Taylor series of the difference in :math:`t` starts at :math:`t^3`; at
    :math:`p = 1/2`, :math:`t = 1/4` the difference is non-zero.

    Examples
    --------
    >>> from derivations.trust_region import k2_bias
    >>> k2_bias().verify().verified
    True
    """
    p = sp.Symbol("p", positive=True)
    t = sp.Symbol("t", real=True)
    pi, rho = (p, 1 - p), (p + t, 1 - p - t)
    gap = sum(a * sp.log(b / a) ** 2 / 2 for a, b in zip(pi, rho)) - sum(a * sp.log(a / b) for a, b in zip(pi, rho))
    g = sp.Function("g")
    d = Derivation(
        "k2 is biased, at third order",
        assumptions=[r"$\pi = (p, 1-p)$, $\pi_{\mathrm{ref}} = (p+t, 1-p-t)$",
                     r"$g(t) = \mathbb{E}_\pi[k_2] - \mathrm{KL}(\pi \| \pi_{\mathrm{ref}})$"],
        unfold=Definitions({g(t): gap}),
    )
    d.step(g(0), sp.Integer(0), "no gap at $t = 0$")
    d.step(sp.Subs(sp.Derivative(g(t), t), t, 0), sp.Integer(0), "first order")
    d.step(sp.Subs(sp.Derivative(g(t), t, 2), t, 0), sp.Integer(0), "second order: $k_2$ matches KL to second order")
    half, quarter = sp.Rational(1, 2), sp.Rational(1, 4)
    exact = (sp.log(sp.Rational(3, 2)) ** 2 + sp.log(2) ** 2) / 4 - sp.log(sp.Rational(4, 3)) / 2
    d.step(sp.Subs(g(t), (p, t), (half, quarter)), exact, r"at $p = 1/2$, $t = 1/4$: $\pi_{\mathrm{ref}} = (3/4, 1/4)$")
    d.then(sp.Integer(0), f"but not exactly: $g = {float(exact):.4f}$ there", relation=">", proof=holds)
    return d


def _k3(p, q):
    """:math:`k_3 = q/p - 1 - \\log(q/p)` of one action, in probabilities."""
    return q / p - 1 - sp.log(q / p)


def _softmax_gradient(K: int, pi: tuple) -> tuple:
    """The softmax, its Jacobian (displayed and checked as a derivation's first step), and
    ``grad(f)``: the row :math:`\\partial f(\\pi(\\theta))/\\partial\\theta_j` through that Jacobian."""
    softmax = IndexedSoftmax()
    a_, j_, pa = softmax.a, softmax.j, softmax.pi
    jacobian = pa[a_] * (sp.KroneckerDelta(a_, j_) - pa[j_])
    on_symbols = {pa[b + 1]: pi[b] for b in range(K)}
    jac = sp.Matrix(K, K, lambda a, j: jacobian.subs({a_: a + 1, j_: j + 1}).subs(on_symbols))

    def grad(f):
        return sp.Matrix([[sum(sp.diff(f, pi[a]) * jac[a, j] for a in range(K)) for j in range(K)]])

    return softmax, jacobian, grad


def _shown_row(latex: str, row: sp.Matrix, definitions: dict) -> sp.Matrix:
    """A row of display symbols, one per coordinate j, each defined in ``definitions`` as its entry of ``row``."""
    out = []
    for j in range(row.shape[1]):
        s = sp.Symbol(latex.replace("_j", "_{%d}" % (j + 1)))
        definitions[s] = row[j]
        out.append(s)
    return sp.Matrix([out])


def kl_estimator_gradients(K: int = 3) -> Derivation:
    r"""Expected gradients of :math:`k_1, k_2, k_3` used as a loss, for a softmax over ``K`` actions.

    With the samples held fixed (:math:`a \sim \mathrm{sg}(\pi)`) and the estimator
    differentiated through :math:`\pi_\theta(a)`:

    .. math::

        \mathbb{E}_\pi[\nabla k_1] = 0, \qquad
        \mathbb{E}_\pi[\nabla k_2] = \nabla\,\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}}), \qquad
        \mathbb{E}_\pi[\nabla k_3] = \nabla\,\mathrm{KL}(\pi_{\mathrm{ref}}\,\|\,\pi).

    Each gradient is a ``K``-vector over the logits; the softmax Jacobian
    :math:`\partial\pi_a/\partial\theta_j = \pi_a(\mathbb{1}[a = j] - \pi_j)` is checked
    first, with :math:`\pi_a` unfolded into :math:`e^{\theta_a}/\sum_b e^{\theta_b}`
    for any number of actions; every later step differentiates through that
    Jacobian and is an identity in positive symbols :math:`\pi_a, \pi_{\mathrm{ref},a}`
    with :math:`\sum\pi = \sum\pi_{\mathrm{ref}} = 1` substituted last.

    Examples
    --------
    >>> from derivations.trust_region import kl_estimator_gradients
    >>> d = kl_estimator_gradients(3).verify()
    >>> len(d.steps), d.verified
    (4, True)
    """
    SoftmaxPolicy(K)  # validates K
    pi, ref, total = _probabilities(K)
    softmax, jacobian, grad = _softmax_gradient(K, pi)
    a_, j_, pa = softmax.a, softmax.j, softmax.pi

    def expected_grad(k):
        return sum((pi[a] * grad(k(pi[a], ref[a])) for a in range(K)), sp.zeros(1, K))

    k_1 = lambda p, q: sp.log(p) - sp.log(q)
    k_2 = lambda p, q: (sp.log(p) - sp.log(q)) ** 2 / 2
    k_3 = _k3
    reverse = sum(p * sp.log(p / q) for p, q in zip(pi, ref))
    forward = sum(q * sp.log(q / p) for p, q in zip(pi, ref))
    definitions: dict = {}

    def shown(latex, row):
        return _shown_row(latex, row, definitions)

    rows = {k: shown(latex, row) for k, latex, row in (
        ("k1", r"\mathbb{E}_\pi[\partial_j k_1]", expected_grad(k_1)), ("k2", r"\mathbb{E}_\pi[\partial_j k_2]", expected_grad(k_2)),
        ("reverse", r"\partial_j \mathrm{KL}(\pi \| \pi_{\mathrm{ref}})", grad(reverse)), ("k3", r"\mathbb{E}_\pi[\partial_j k_3]", expected_grad(k_3)),
        ("forward", r"\partial_j \mathrm{KL}(\pi_{\mathrm{ref}} \| \pi)", grad(forward)))}
    d = Derivation(
        f"Expected gradients of the KL estimators as losses, K = {K}",
        assumptions=[r"$a \sim \mathrm{sg}(\pi)$", r"$\pi_{\mathrm{ref}}$ fixed", r"$\partial_j = \partial / \partial\theta_j$",
                     *[sp.Eq(k, v) for k, v in total.items()]],
        unfold=Definitions(definitions) | softmax.definitions,
    )
    d.step(sp.Derivative(pa[a_], softmax.theta[j_]), jacobian,
           r"softmax Jacobian, $\pi_a = e^{\theta_a} / \sum_b e^{\theta_b}$ (any number of actions)")
    d.step(rows["k1"], sp.zeros(1, K), r"$\sum_a \partial_j \pi_a = 0$", facts=total)
    d.step(rows["k2"], rows["reverse"], r"the reverse KL", facts=total)
    d.step(rows["k3"], rows["forward"], r"the forward KL, not the reverse", facts=total)
    return d


def bias_corrected_kl_gradient(K: int = 3) -> Derivation:
    r"""TRL's bias-corrected KL, :math:`\rho\,k_3` with :math:`\rho = \pi_\theta/\pi_{\mathrm{old}}`: its value and its gradient under :math:`a \sim \pi_{\mathrm{old}}`.

    The tokens come from a fixed :math:`\mu = \pi_{\mathrm{old}}` (positive
    symbols :math:`\mu_a`, independent of :math:`\theta`); the ratio is
    differentiated through :math:`\pi_\theta`:

    .. math::

        \mathbb{E}_\mu[\rho\,k_3] = \mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}}), \qquad
        \mathbb{E}_\mu[\nabla(\rho\,k_3)] = \nabla\,\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}}),

    for every :math:`\mu`, :math:`\mu = \pi` included, where :math:`\rho = 1` in
    value but not in gradient: the plain :math:`k_3` gives
    :math:`\nabla\mathrm{KL}(\pi_{\mathrm{ref}}\,\|\,\pi)` there
    (:func:`kl_estimator_gradients`).  So the correction fixes the direction of
    the KL even on the first step on policy, and the value off policy.  The
    gradient is a ``K``-vector over the logits, through the softmax Jacobian
    checked first (any number of actions); later steps are identities in
    positive symbols with :math:`\sum\pi = \sum\pi_{\mathrm{ref}} = 1` substituted last.

    References
    ----------
    TRL ``f2cd57710ae3``, ``trl/trainer/grpo_trainer.py`` (``use_bias_correction_kl``: ``per_token_kl * coef_1``).

    Examples
    --------
    >>> from derivations.trust_region import bias_corrected_kl_gradient
    >>> d = bias_corrected_kl_gradient(3).verify()
    >>> len(d.steps), d.verified
    (3, True)
    """
    SoftmaxPolicy(K)  # validates K
    pi, rho, total = _probabilities(K)
    mu = sp.symbols(f"mu_1:{K + 1}", positive=True)
    softmax, jacobian, grad = _softmax_gradient(K, pi)
    a_, j_, pa = softmax.a, softmax.j, softmax.pi

    corrected = lambda a: pi[a] / mu[a] * _k3(pi[a], rho[a])
    reverse = sum(p * sp.log(p / q) for p, q in zip(pi, rho))
    definitions: dict = {}

    def shown(latex, row):
        return _shown_row(latex, row, definitions)

    expected_value = sp.Symbol(r"\mathbb{E}_\mu[\rho\,k_3]")
    kl_value = sp.Symbol(r"\mathrm{KL}(\pi \| \pi_{\mathrm{ref}})")
    definitions[expected_value] = sum(mu[a] * corrected(a) for a in range(K))
    definitions[kl_value] = reverse
    expected_grad = sum((mu[a] * grad(corrected(a)) for a in range(K)), sp.zeros(1, K))
    corrected_row = shown(r"\mathbb{E}_\mu[\partial_j(\rho k_3)]", expected_grad)  # every definition before Definitions is built
    reverse_row = shown(r"\partial_j \mathrm{KL}(\pi \| \pi_{\mathrm{ref}})", grad(reverse))
    d = Derivation(
        f"The bias-corrected KL term, K = {K}",
        assumptions=[r"$a \sim \mu = \pi_{\mathrm{old}}$, fixed", r"$\rho = \pi_\theta(a)/\mu(a)$, differentiated through $\pi_\theta$",
                     r"$\pi_{\mathrm{ref}} = \pi_{\mathrm{ref}}$ fixed", r"$\partial_j = \partial / \partial\theta_j$",
                     *[sp.Eq(k, v) for k, v in total.items()]],
        unfold=Definitions(definitions) | softmax.definitions,
    )
    d.step(sp.Derivative(pa[a_], softmax.theta[j_]), jacobian,
           r"softmax Jacobian, $\pi_a = e^{\theta_a} / \sum_b e^{\theta_b}$ (any number of actions)")
    d.step(expected_value, kl_value, r"$\mu_a \rho_a = \pi_a$: the value is the reverse KL, for any $\mu$", facts=total)
    d.step(corrected_row, reverse_row,
           r"and so is the gradient: $\sum_a \mu_a\,\partial_j(\pi_a k_{3,a}/\mu_a) = \partial_j \sum_a \pi_a k_{3,a}$", facts=total)
    return d


# --------------------------------------------------------------- the trainers' KL forms

ell = sp.Symbol(r"\ell", real=True)
r"""The log-probability :math:`\ell = \log\pi_\theta(a)` of a sampled token, the variable the KL forms are differentiated in."""
ell_ref = sp.Symbol(r"\ell_{\mathrm{ref}}", real=True)
r""":math:`\ell_{\mathrm{ref}} = \log\pi_{\mathrm{ref}}(a)`, held fixed."""
k_star = sp.Function(r"k_{*}")
r"""Any estimator :math:`k_*(\Delta)` whose value a straight-through form keeps (verl's ``k1+``, ``k3+``, ``abs+``, ``low_var_kl+``)."""

_sg = sp.Function("sg")  # stop-gradient: the registry's sg (derivations.methods.sg), held constant by the rule below
_d_dell = Differentiation(ell, held=(_sg,))
_k2_of = (ell - ell_ref) ** 2 / 2


def kl_form_gradients(K: int = 3) -> Derivation:
    r"""The trainers' other KL forms: which divergence each one's expected gradient descends, per state, ``K`` actions.

    With :math:`\Delta = \ell - \ell_{\mathrm{ref}}` and the sampled token held
    fixed (:math:`a \sim \mathrm{sg}(\pi)`):

    * **straight-through** ``k*+`` (verl): the value of any estimator
      :math:`k_*`, the gradient of :math:`k_2`:
      :math:`k_2 - \mathrm{sg}(k_2) + \mathrm{sg}(k_*)` differentiates as
      :math:`k_2`, so its expected gradient is :math:`\nabla\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`
      whatever :math:`k_*` is;
    * **k1 in the reward**: a reward :math:`-\beta k_1` enters the loss through
      the score-function surrogate :math:`\beta\,\mathrm{sg}(k_1)\,\ell`, whose
      derivative is again :math:`\beta\Delta`: per state, the reverse KL too (over
      whole sequences the two part ways: the reward carries the later tokens'
      :math:`k_1` to earlier tokens, :mod:`numeric.variants.questions` measures it);
    * ``abs``: :math:`\mathbb E_\pi[\nabla|\Delta|] = \sum_a \mathrm{sign}(\Delta_a)\nabla\pi_a
      = 2\,\nabla\mathrm{TV}(\pi, \pi_{\mathrm{ref}})`, since
      :math:`\mathrm{sign}(\log\pi_a - \log\pi_{\mathrm{ref},a}) = \mathrm{sign}(\pi_a - \pi_{\mathrm{ref},a})`
      (the logarithm increases): neither KL, twice the total variation's gradient,
      wherever no :math:`\pi_a` equals :math:`\pi_{\mathrm{ref},a}`.

    The derivatives in :math:`\ell` are the kernel's rule (:math:`\mathrm{sg}`
    held constant); the expectations go through the softmax Jacobian, checked
    first, as in :func:`kl_estimator_gradients` (which derives :math:`k_1`,
    :math:`k_2`, :math:`k_3`); the importance-weighted :math:`k_3` is
    :func:`bias_corrected_kl_gradient`, verl's clamped :math:`k_3` is
    :func:`low_var_kl_clamp`.

    References
    ----------
    verl ``kl_penalty`` (the ``+`` suffix: ``backward_score - backward_score.detach() + forward_score.detach()``),
    verl-project/verl at 1dda039b9c6311889a9c9a26040677e1254814f9, ``verl/trainer/ppo/core_algos.py`` lines 2187-2212.

    Examples
    --------
    >>> from derivations.trust_region import kl_form_gradients
    >>> d = kl_form_gradients(3).verify()
    >>> len(d.steps), d.verified
    (6, True)
    """
    SoftmaxPolicy(K)  # validates K
    pi, ref, total = _probabilities(K)
    softmax, jacobian, grad = _softmax_gradient(K, pi)
    a_, j_, pa = softmax.a, softmax.j, softmax.pi
    definitions: dict = {}

    def shown(latex, row):
        return _shown_row(latex, row, definitions)

    score_times_delta = sum((p * (sp.log(p) - sp.log(q)) * grad(sp.log(p)) for p, q in zip(pi, ref)), sp.zeros(1, K))
    reverse = sum(p * sp.log(p / q) for p, q in zip(pi, ref))
    tv = sum(sp.Abs(p - q) for p, q in zip(pi, ref)) / 2
    abs_row = sum((p * grad(sp.Abs(sp.log(p) - sp.log(q))) for p, q in zip(pi, ref)), sp.zeros(1, K))
    rows = {
        "delta": shown(r"\mathbb{E}_\pi[\Delta\,\partial_j \ell]", score_times_delta),
        "reverse": shown(r"\partial_j \mathrm{KL}(\pi \| \pi_{\mathrm{ref}})", grad(reverse)),
        "abs": shown(r"\mathbb{E}_\pi[\partial_j |\Delta|]", abs_row),
        "tv": shown(r"\partial_j \mathrm{TV}(\pi, \pi_{\mathrm{ref}})", grad(tv)),
    }
    # sign(log x - log y) = sign(x - y), in the orientation SymPy gives each sign the derivative holds
    signs = tuple(sp.Eq(s, sp.sign(s.args[0].replace(sp.log, lambda x: x))) for s in sorted(abs_row.atoms(sp.sign), key=sp.default_sort_key))
    d = Derivation(
        f"Expected gradients of the straight-through, reward-side and abs KL forms, K = {K}",
        assumptions=[r"$a \sim \mathrm{sg}(\pi)$", r"$\pi_{\mathrm{ref}}$ fixed", r"$\Delta = \ell - \ell_{\mathrm{ref}}$",
                     r"$\partial_j = \partial / \partial\theta_j$", *[sp.Eq(k, v) for k, v in total.items()]],
        unfold=Definitions(definitions, _d_dell) | softmax.definitions,
    )
    d.step(sp.Derivative(pa[a_], softmax.theta[j_]), jacobian,
           r"softmax Jacobian, $\pi_a = e^{\theta_a} / \sum_b e^{\theta_b}$ (any number of actions)")
    d.step(sp.Derivative(_k2_of, ell), ell - ell_ref, r"$k_2 = \tfrac12\Delta^2$ as a loss (mse, k2)")
    d.step(sp.Derivative(_k2_of - _sg(_k2_of) + _sg(k_star(ell - ell_ref)), ell), ell - ell_ref,
           r"straight-through $k_*^{+}$: the stop-gradients are constants, whatever $k_*$ is")
    d.step(sp.Derivative(_sg(ell - ell_ref) * ell, ell), ell - ell_ref,
           r"$k_1$ in the reward: the score-function surrogate $\mathrm{sg}(k_1)\,\ell$")
    d.step(rows["delta"], rows["reverse"], r"all three: the reverse KL", facts=total)
    d.step(rows["abs"], 2 * rows["tv"], r"abs: twice the total variation's gradient, $\log$ increasing", given=signs)
    return d


def low_var_kl_clamp() -> Derivation:
    r"""verl's ``low_var_kl``: where its two clamps bind, so where its gradient is :math:`k_3`'s and where it is 0.

    verl computes :math:`\mathrm{clamp}\bigl(k_3(\mathrm{clamp}(\Delta, -20, 20)), -10, 10\bigr)`.
    :math:`k_3(\Delta) = e^{-\Delta} - 1 + \Delta` decreases for :math:`\Delta < 0`
    and increases for :math:`\Delta > 0` (its derivative :math:`1 - e^{-\Delta}`),
    and it reaches 10 at

    .. math::

        \Delta_- = 11 + W_{-1}(-e^{-11}) \approx -2.611, \qquad
        \Delta_+ = 11 + W_0(-e^{-11}) \approx 10.99998,

    both inside :math:`(-20, 20)` (:math:`k_3(\pm 20) > 10`).  So the clamp of
    :math:`\Delta` never binds first: on :math:`\Delta_- < \Delta < \Delta_+` the
    form is :math:`k_3`, with :math:`k_3`'s gradient (the forward KL's,
    :func:`kl_estimator_gradients`); outside it is the constant 10, with
    gradient 0.  A token whose current probability is below
    :math:`e^{\Delta_-} \approx 0.073` of the reference's is silenced.  Each root
    is checked with the defining property :math:`z e^{z} = -e^{-11}` of
    Lambert's :math:`W` on its two real branches (:math:`z = W_0(-e^{-11})` or
    :math:`W_{-1}(-e^{-11})`), stated with the step.

    Examples
    --------
    >>> from derivations.trust_region import low_var_kl_clamp
    >>> d = low_var_kl_clamp().verify()
    >>> len(d.steps), d.verified
    (4, True)
    """
    w = sp.Symbol("z", real=True)  # a branch value of Lambert's W (w is the notes' gradient weight)
    d = Derivation("Where verl's low_var_kl is k3", assumptions=[r"$\Delta = \log\pi - \log\pi_{\mathrm{ref}}$",
                                                                 r"$k_3(\Delta) = e^{-\Delta} - 1 + \Delta$"])
    d.step(sp.Derivative(k3, delta), 1 - sp.exp(-delta), r"$k_3$ falls for $\Delta < 0$, rises for $\Delta > 0$")
    d.step(k3.subs(delta, 20), sp.Integer(10), r"the clamp of $\Delta$ at $20$ is past the clamp of $k_3$ at 10", relation=">", proof=holds)
    d.step(k3.subs(delta, -20), sp.Integer(10), r"and so is its clamp at $-20$", relation=">", proof=holds)
    d.step(k3.subs(delta, 11 + w), sp.Integer(10),
           r"at $\Delta = 11 + z$ with $z e^{z} = -e^{-11}$ (either real branch of Lambert's function): $k_3 = 10$ there",
           given=(sp.Eq(sp.exp(-11 - w), -w),))
    return d
