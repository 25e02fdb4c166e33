r"""Trust-region facts: the per-state TV bound, the CISPO clip bias, the KL estimators.

**Clip excess and total variation.**  For a behaviour policy :math:`\mu`, a
current policy :math:`\pi`, ratio :math:`r_a = \pi_a/\mu_a` and :math:`c \ge 1`,

.. math::

    \mathbb{E}_{a\sim\mu}\bigl[(r_a - c)_+\bigr] = \sum_a (\pi_a - c\,\mu_a)_+
    \le \sum_a (\pi_a - \mu_a)_+ = \tfrac12 \sum_a |\pi_a - \mu_a| = \mathrm{TV}(\pi, \mu),

proved for a symbolic number :math:`K` of actions from a scalar lemma,
:math:`(x - c y)_+ \le (x - y)_+` for :math:`c \ge 1`, :math:`y \ge 0`, which is
checked region by region and then instantiated termwise.  With
:math:`c = 1+\varepsilon` this bounds the mass that CISPO's clip removes.

**CISPO's bias.**  Per token, :math:`\min(r, 1+\varepsilon) - r = -(r - 1 - \varepsilon)_+`,
so the CISPO gradient differs from the token-IS gradient by
:math:`-\mathbb{E}\bigl[\sum_t (r_t - 1 - \varepsilon)_+ A\, s_t\bigr]`, and the
triangle inequality gives
:math:`\lVert\mathrm{bias}\rVert \le \sum_t \mathbb{E}\bigl[(r_t - 1 - \varepsilon)_+ |A|\, \lVert s_t\rVert\bigr]`.

**KL estimators.**  With :math:`a \sim \pi` and :math:`r = \pi_{\mathrm{ref}}(a)/\pi(a)`:
:math:`k_1 = -\log r`, :math:`k_2 = \tfrac12(\log r)^2`, :math:`k_3 = (r - 1) - \log r`.
:math:`k_1` and :math:`k_3` are unbiased for :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`,
:math:`k_3 \ge 0`; :math:`k_2` is biased (it agrees to second order).  Used as
a loss (samples held fixed, the estimator differentiated), :math:`k_1` has
expected gradient 0, :math:`k_2` gives :math:`\nabla\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`,
and :math:`k_3` gives :math:`\nabla\mathrm{KL}(\pi_{\mathrm{ref}}\,\|\,\pi)`, the other direction.

References
----------
J. Schulman, "Approximating KL Divergence", blog note (2020) (k1, k2, k3).
MiniMax, "MiniMax-M1", arXiv:2506.13585 (2025), Sec. 3.1 (CISPO).
"""

from __future__ import annotations

import sympy as sp

from ._validate import require_int
from .derivation import Derivation, is_zero
from .policy import SoftmaxPolicy

__all__ = [
    "clip_bias_term",
    "k1",
    "k2",
    "k2_bias",
    "k3",
    "k3_nonnegative",
    "k3_unbiased",
    "kl_estimator_gradients",
    "kl_estimators_unbiased",
    "positive_part_lemma",
    "tv_bound",
]

delta = sp.Symbol("Delta", real=True)
r"""The log-ratio :math:`\Delta = \log\pi - \log\pi_{\mathrm{ref}} = -\log r`."""

k1 = delta
r""":math:`k_1 = -\log r = \Delta`."""
k2 = delta**2 / 2
r""":math:`k_2 = \tfrac12 (\log r)^2 = \tfrac12\Delta^2`."""
k3 = sp.exp(-delta) - 1 + delta
r""":math:`k_3 = (r - 1) - \log r = e^{-\Delta} - 1 + \Delta`."""

_x, _y = sp.symbols("x y", real=True)
_c = sp.Symbol("c", positive=True)
_pos = lambda e: sp.Max(e, 0)


def _all_true(claims) -> bool:
    return all(bool(sp.simplify(claim)) is True for claim in claims)


def positive_part_lemma() -> Derivation:
    r"""The scalar lemma :math:`(x - c y)_+ \le (x - y)_+` for :math:`c \ge 1`, :math:`y \ge 0`.

    Since :math:`y \le c y`, every real :math:`x` lies in one of three regions;
    each is parametrised by non-negative symbols (:math:`c = 1 + \gamma`,
    :math:`y = \eta`, gaps :math:`\delta, \zeta`), where SymPy evaluates both
    positive parts and decides the inequality.

    Examples
    --------
    >>> from derivations.trust_region import positive_part_lemma
    >>> positive_part_lemma().verify().proved_by()
    {'proof': 3}
    """
    g, eta, zeta = sp.symbols("gamma eta zeta", nonnegative=True)
    dpos = sp.Symbol("delta", positive=True)
    dnn = sp.Symbol("delta", nonnegative=True)
    eta_pos = sp.Symbol("eta", positive=True)
    lhs, rhs = _pos(_x - _c * _y), _pos(_x - _y)

    def claim(x, c, y):
        return sp.LessThan(lhs.subs({_x: x, _c: c, _y: y}), rhs.subs({_x: x, _c: c, _y: y}))

    d = Derivation(r"Scalar lemma: (x - c y)+ <= (x - y)+", assumptions=[r"$c \ge 1$", r"$y \ge 0$"])
    d.step(lhs, rhs, r"case $x \le y$: both sides are $0$", relation="<=",
           proof=lambda: _all_true([claim(eta - dnn, 1 + g, eta)]))
    d.step(lhs, rhs, r"case $y < x \le c y$: left side $0$, right side $x - y > 0$", relation="<=",
           proof=lambda: _all_true([claim(eta_pos + dpos, 1 + (dpos + zeta) / eta_pos, eta_pos)]))
    d.step(lhs, rhs, r"case $x > c y$: the sides differ by $(c - 1) y \ge 0$", relation="<=",
           proof=lambda: _all_true([claim((1 + g) * eta + dpos, 1 + g, eta)]))
    return d


def _positive_part_identity() -> bool:
    r""":math:`x_+ = x/2 + |x|/2` for real :math:`x`, on :math:`x \ge 0` and on :math:`x < 0`."""
    dnn, dpos = sp.Symbol("delta", nonnegative=True), sp.Symbol("delta", positive=True)
    f = lambda x: _pos(x) - x / 2 - sp.Abs(x) / 2
    return f(dnn) == 0 and f(-dpos) == 0


def _homogeneity() -> bool:
    r""":math:`\mu\,(x/\mu - c)_+ = (x - c\mu)_+` for :math:`\mu > 0`, on both sides of :math:`x = c\mu`."""
    mu, c = sp.symbols("mu c", positive=True)
    dnn, dpos = sp.Symbol("delta", nonnegative=True), sp.Symbol("delta", positive=True)
    f = lambda x: sp.expand(mu * _pos(x / mu - c) - _pos(x - c * mu))
    return f(c * mu + dnn) == 0 and f(c * mu - dpos) == 0


def tv_bound() -> Derivation:
    r"""The per-state bound :math:`\mathbb{E}_\mu[(r - c)_+] \le \mathrm{TV}(\pi, \mu)` for :math:`c \ge 1`, any :math:`K`.

    .. math::

        \sum_{a=1}^K \mu_a\Bigl(\frac{\pi_a}{\mu_a} - c\Bigr)_+
        = \sum_a (\pi_a - c\mu_a)_+
        \le \sum_a (\pi_a - \mu_a)_+
        = \tfrac12 \sum_a |\pi_a - \mu_a|.

    The middle inequality is :func:`positive_part_lemma` with :math:`x = \pi_a`,
    :math:`y = \mu_a`, term by term; the last equality uses :math:`x_+ = x/2 + |x|/2`
    and :math:`\sum_a \pi_a = \sum_a \mu_a = 1`, substituted last.

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
    c = sp.Symbol("c", positive=True)
    S = lambda e: sp.Sum(e, (a, 1, K))
    lemma = positive_part_lemma()
    d = Derivation(
        r"Per-state bound: E_mu[(r - c)+] <= TV(pi, mu)",
        assumptions=[r"$c \ge 1$", r"$\pi_a, \mu_a > 0$, $\sum_a \pi_a = \sum_a \mu_a = 1$", r"$r_a = \pi_a / \mu_a$"],
    )
    d.step(S(mu[a] * _pos(pi[a] / mu[a] - c)), S(_pos(pi[a] - c * mu[a])),
           r"$\mu (x/\mu - c)_+ = (x - c\mu)_+$, $\mu > 0$",
           proof=_homogeneity)
    d.then(S(_pos(pi[a] - mu[a])), r"the lemma, termwise", relation="<=",
           proof=lambda: lemma.verify().verified
           and lemma.lhs.subs({_x: pi[a], _y: mu[a], _c: c}) == _pos(pi[a] - c * mu[a])
           and lemma.steps[0].rhs.subs({_x: pi[a], _y: mu[a]}) == _pos(pi[a] - mu[a]))
    d.then(S((pi[a] - mu[a]) / 2 + sp.Abs(pi[a] - mu[a]) / 2), r"$x_+ = x/2 + |x|/2$",
           proof=_positive_part_identity)
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
    {'proof': 2}
    """
    r, eps = sp.Symbol("r", positive=True), sp.Symbol("varepsilon", positive=True)
    A = sp.Symbol("A", real=True)
    dnn, dpos = sp.Symbol("delta", nonnegative=True), sp.Symbol("delta", positive=True)
    excess = _pos(r - 1 - eps)

    def identity() -> bool:
        f = lambda rr: sp.expand((sp.Min(rr, 1 + eps) - rr) + _pos(rr - 1 - eps))
        return f(1 + eps + dnn) == 0 and f(1 + eps - dpos) == 0

    def norm() -> bool:
        f = lambda rr: sp.expand(sp.Abs(-_pos(rr - 1 - eps) * A) - _pos(rr - 1 - eps) * sp.Abs(A))
        return f(1 + eps + dnn) == 0 and f(1 + eps - dpos) == 0

    d = Derivation("CISPO minus token IS, per token", assumptions=[r"$r > 0$", r"$\varepsilon > 0$"])
    d.step((sp.Min(r, 1 + eps) - r) * A, -excess * A, r"checked on $r \ge 1+\varepsilon$ and on $r < 1+\varepsilon$", proof=identity)
    d.step(sp.Abs(-excess * A), excess * sp.Abs(A), r"$(\cdot)_+ \ge 0$, checked on both regions", proof=norm)
    return d


# --------------------------------------------------------------- KL estimators


def kl_estimators_unbiased(K: int | None = None) -> tuple[Derivation, Derivation]:
    r""":math:`\mathbb{E}_\pi[k_1] = \mathbb{E}_\pi[k_3] = \mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`, for a symbolic ``K`` or a fixed one.

    All probabilities are positive symbols (:math:`\rho = \pi_{\mathrm{ref}}`);
    the logs are expanded before anything else and
    :math:`\sum_a \pi_a = \sum_a \rho_a = 1` is substituted last.  With
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
        pi, rho = sp.IndexedBase("pi", positive=True), sp.IndexedBase("rho", positive=True)
        a = sp.Symbol("a", integer=True, positive=True)
        n = sp.Symbol("K", integer=True, positive=True)
        S = lambda f: sp.Sum(f(pi[a], rho[a]), (a, 1, n))
        total = {S(lambda p, q: p): 1, S(lambda p, q: q): 1}
    else:
        pis, rhos, total = _probabilities(K)
        S = lambda f: sum(f(p, q) for p, q in zip(pis, rhos))
    kl = S(lambda p, q: p * sp.log(p / q))
    assumptions = [r"$a \sim \pi$, $r = \rho_a / \pi_a$", r"$\pi_a, \rho_a > 0$"]
    size = "any K" if K is None else f"K = {K}"
    d1 = Derivation(f"k1 is unbiased for KL(π ‖ π_ref), {size}", assumptions=assumptions)
    d1.step(S(lambda p, q: p * (-sp.log(q / p))), kl, r"$-\log(\rho/\pi) = \log(\pi/\rho)$")
    d3 = Derivation(f"k3 is unbiased for KL(π ‖ π_ref), {size}", assumptions=assumptions)
    d3.step(S(lambda p, q: p * (q / p - 1 - sp.log(q / p))), S(lambda p, q: q) - S(lambda p, q: p) + kl,
            "expand the logs")
    d3.then(kl, r"$\sum_a \rho_a = \sum_a \pi_a = 1$", facts=total)
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
    rho = sp.symbols(f"rho_1:{K + 1}", positive=True)
    total = {pi[-1]: 1 - sum(pi[:-1]), rho[-1]: 1 - sum(rho[:-1])}
    return pi, rho, total


def k3_nonnegative() -> Derivation:
    r""":math:`k_3 = (r - 1) - \log r \ge 0` for :math:`r > 0`, with equality only at :math:`r = 1`.

    :math:`f(r) = r - 1 - \log r` is convex (:math:`f'' = 1/r^2 > 0`) with
    :math:`f'(1) = 0`, so its minimum over :math:`(0, \infty)` is :math:`f(1) = 0`.

    Examples
    --------
    >>> from derivations.trust_region import k3_nonnegative
    >>> k3_nonnegative().verify().verified
    True
    """
    r = sp.Symbol("r", positive=True)
    f = r - 1 - sp.log(r)
    d = Derivation("k3 is non-negative", assumptions=[r"$r > 0$"])
    d.step(sp.Derivative(f, r, 2), 1 / r**2, r"second derivative, positive: $f$ is convex")
    d.step(sp.Subs(sp.Derivative(f, r), r, 1), sp.Integer(0), r"$r = 1$ is the stationary point")
    d.step(f, sp.Integer(0), r"minimum of $f$ over $r > 0$", relation=">=",
           proof=lambda: sp.minimum(f, r, sp.Interval.open(0, sp.oo)) == 0)
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
        unfold=lambda e: e.replace(g, lambda x: gap.subs(t, x)),
    )
    d.step(g(0), sp.Integer(0), "no gap at $t = 0$")
    d.step(sp.Subs(sp.Derivative(g(t), t), t, 0), sp.Integer(0), "first order")
    d.step(sp.Subs(sp.Derivative(g(t), t, 2), t, 0), sp.Integer(0), "second order: $k_2$ matches KL to second order")
    quarter = gap.subs({p: sp.Rational(1, 2), t: sp.Rational(1, 4)})
    d.step(sp.Subs(g(t), (p, t), (sp.Rational(1, 2), sp.Rational(1, 4))), sp.Integer(0),
           f"but not exactly: $g = {float(quarter):.4f}$ there", relation=">",
           proof=lambda: bool(quarter.evalf(30) > 0))
    return d


def kl_estimator_gradients(K: int = 3) -> Derivation:
    r"""Expected gradients of :math:`k_1, k_2, k_3` used as a loss, for a softmax over ``K`` actions.

    With the samples held fixed (:math:`a \sim \mathrm{sg}(\pi)`) and the estimator
    differentiated through :math:`\pi_\theta(a)`:

    .. math::

        \mathbb{E}_\pi[\nabla k_1] = 0, \qquad
        \mathbb{E}_\pi[\nabla k_2] = \nabla\,\mathrm{KL}(\pi\,\|\,\rho), \qquad
        \mathbb{E}_\pi[\nabla k_3] = \nabla\,\mathrm{KL}(\rho\,\|\,\pi).

    Each gradient is a ``K``-vector over the logits; the softmax Jacobian
    :math:`\partial\pi_a/\partial\theta_j = \pi_a(\delta_{aj} - \pi_j)` is checked
    first, then every step is an identity in positive symbols :math:`\pi_a, \rho_a`
    with :math:`\sum\pi = \sum\rho = 1` substituted last.

    Examples
    --------
    >>> from derivations.trust_region import kl_estimator_gradients
    >>> d = kl_estimator_gradients(3).verify()
    >>> len(d.steps), d.verified
    (4, True)
    """
    pol = SoftmaxPolicy(K)
    pi, rho, total = _probabilities(K)
    jac = sp.Matrix(K, K, lambda a, j: pi[a] * (int(a == j) - pi[j]))
    jac_softmax = sp.Matrix(K, K, lambda a, j: sp.diff(pol.probs[a], pol.theta[j]))
    on_softmax = {p: q for p, q in zip(pi, pol.probs)}

    def grad(f):
        """Row vector of d f(pi(theta)) / d theta_j through the softmax Jacobian."""
        return sp.Matrix([[sum(sp.diff(f, pi[a]) * jac[a, j] for a in range(K)) for j in range(K)]])

    def expected_grad(k):
        return sum((pi[a] * grad(k(pi[a], rho[a])) for a in range(K)), sp.zeros(1, K))

    k_1 = lambda p, q: sp.log(p) - sp.log(q)
    k_2 = lambda p, q: (sp.log(p) - sp.log(q)) ** 2 / 2
    k_3 = lambda p, q: q / p - 1 - sp.log(q / p)
    reverse = sum(p * sp.log(p / q) for p, q in zip(pi, rho))
    forward = sum(q * sp.log(q / p) for p, q in zip(pi, rho))
    definitions = {}

    def shown(latex, row):
        """A row of display symbols, one per coordinate j, that unfold into the entries of ``row``."""
        out = []
        for j in range(K):
            s = sp.Symbol(latex.replace("_j", "_{%d}" % (j + 1)))
            definitions[s] = row[j]
            out.append(s)
        return sp.Matrix([out])

    d = Derivation(
        f"Expected gradients of the KL estimators as losses, K = {K}",
        assumptions=[r"$a \sim \mathrm{sg}(\pi)$", r"$\rho = \pi_{\mathrm{ref}}$ fixed", r"$\partial_j = \partial / \partial\theta_j$"],
        unfold=lambda e: e.xreplace(definitions),
    )
    a_, j_ = sp.symbols("a j", integer=True, positive=True)
    pa = sp.Indexed("pi", a_)
    d.step(sp.Derivative(sp.Function("pi_a")(sp.Symbol("theta")), sp.Symbol("theta_j")), pa * (sp.KroneckerDelta(a_, j_) - sp.Indexed("pi", j_)),
           "softmax Jacobian, every entry",
           proof=lambda: is_zero(jac_softmax - jac.subs(on_softmax)) is not None)
    d.step(shown(r"\mathbb{E}_\pi[\partial_j k_1]", expected_grad(k_1)), sp.zeros(1, K), r"$\sum_a \partial_j \pi_a = 0$", facts=total)
    d.step(shown(r"\mathbb{E}_\pi[\partial_j k_2]", expected_grad(k_2)), shown(r"\partial_j \mathrm{KL}(\pi \| \rho)", grad(reverse)),
           r"the reverse KL", facts=total)
    d.step(shown(r"\mathbb{E}_\pi[\partial_j k_3]", expected_grad(k_3)), shown(r"\partial_j \mathrm{KL}(\rho \| \pi)", grad(forward)),
           r"the forward KL, not the reverse", facts=total)
    return d
