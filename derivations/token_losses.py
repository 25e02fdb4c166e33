r"""The registry's per-token loss formulas and their symbols.

One token's loss (minimised) as a SymPy expression in the ratio
:math:`r = e^{\ell - \ell_0}`, the log-probability :math:`\ell`, the old
log-probability :math:`\ell_0` and the advantage :math:`A`, with the
stop-gradient :data:`sg`.  :mod:`derivations.methods` assembles them into
the registry (:data:`~derivations.methods.METHODS`); the variant checker,
the derived weights and the chapters read them there.

Three kinds of token:

* a *clipped surrogate* (PPO and its dual clip): the ratio carries the
  gradient, a clip silences it on a region of :math:`r`;
* a *stopped weight* :math:`-\mathrm{sg}(w)\,A\,\ell` (CISPO, token IS, IcePop,
  verl's DPPO): the weight :math:`w` is a value, the gradient is REINFORCE's
  times :math:`w`;
* a *masked ratio* :math:`-\mathrm{sg}(k)\,r\,A` (DPPO as SkyRL and prime-rl
  write it, prime-rl's TV band): the gradient passes through :math:`r`, a
  stopped 0/1 mask :math:`k` silences it.

The masks of DPPO and of the TV band test the *probability change*
:math:`\pi - \pi_0 = e^{\ell_0}(r - 1)`: their edges in :math:`r` move with
the old probability :math:`e^{\ell_0}` (per-token bounds).

Examples
--------
>>> from derivations.token_losses import A, dppo, icepop
>>> icepop()
-A*ell*sg(Piecewise((r, (h >= r) & (l <= r)), (0, True)))
>>> dppo().subs(A, 1)   # A > 0: the probability may rise by delta_high at most
-r*sg(Piecewise((1, \delta_{\mathrm{high}} >= (r - 1)*exp(ell_0)), (0, True)))
"""

from __future__ import annotations

import sympy as sp

__all__ = [
    "A", "b_h", "b_l", "beta", "beta_dro", "c", "c_is", "delta_band", "delta_h", "delta_l", "delta_opsm", "eps_h", "eps_l", "ell",
    "ell0", "k", "lam", "r", "sg", "tau_k2", "tau_neg", "tau_pos", "tv_h", "tv_l",
    "bernoulli_kl", "clip", "cispo", "clip_cov", "dppo", "dppo_is", "dro", "gamma_weight", "gmpo", "icepop", "importance_sampling",
    "kl_cov", "opsm", "ppo", "rollout_is", "sapo", "selected_token", "tv_band", "vespo",
]

ell, ell0 = sp.symbols("ell ell_0", real=True)
r = sp.Symbol("r", positive=True)
A = sp.Symbol("A", real=True)
eps_l, eps_h = sp.symbols("varepsilon_l varepsilon_h", positive=True)
c = sp.Symbol("C_d", positive=True)  # the dual-clip constant C_d: a cap on the ratio for A < 0 (C is every cap; d for dual)
tau_pos, tau_neg = sp.symbols("tau_+ tau_-", positive=True)  # SAPO's temperatures for A > 0 and for A <= 0
delta_l, delta_h = sp.symbols(r"\tilde\varepsilon_l \tilde\varepsilon_h", positive=True)  # GMPO's clip range, on log r
k, lam = sp.symbols("k zeta", positive=True)  # VESPO's Gamma shape and rate (zeta: lambda is GAE's)
beta = sp.Symbol("beta", positive=True)  # KL-Cov's coefficient
tv_l, tv_h = sp.symbols(r"\delta_{\mathrm{low}} \delta_{\mathrm{high}}", positive=True)  # DPPO's trust region on the probability change
c_is = sp.Symbol(r"C_{\mathrm{IS}}", positive=True)  # verl DPPO's truncation of the stopped ratio (its clip_ratio_c)
tau_k2 = sp.Symbol(r"\tau_{\mathrm{KL}}", positive=True)  # prime-rl's coefficient of (log r)^2
delta_band = sp.Symbol(r"\delta_{\mathrm{band}}", positive=True)  # prime-rl's ipo: a band |pi - pi_0| <= delta_band for both signs of A
beta_dro = sp.Symbol(r"\beta_{\mathrm{DRO}}", positive=True)  # verl's dro: (beta/2)(log r)^2
b_l, b_h = sp.symbols("l h", positive=True)  # IcePop's band [l, h] on the ratio (the notes' band of kept ratios)
delta_opsm = sp.Symbol(r"\delta_{\mathrm{OPSM}}", positive=True)  # OPSM: a row is dropped when A < 0 and its mean log-ratio is below -delta
sg = sp.Function("sg")
"""Stop-gradient in notation: the value of its argument, derivative 0."""


def clip(x, low=1 - eps_l, high=1 + eps_h) -> sp.Expr:
    r""":math:`\min(\max(x, \text{low}), \text{high})`."""
    return sp.Min(sp.Max(x, low), high)


def ppo(dual_clip: object = None) -> sp.Expr:
    r"""PPO's :math:`-\min(rA, \mathrm{clip}(r)A)`; with a dual clip :math:`C_d`, :math:`-\max(\min(\cdot), C_dA)` where :math:`A < 0`."""
    loss = -sp.Min(r * A, clip(r) * A)
    if dual_clip is None:
        return loss
    return sp.Piecewise((loss, A >= 0), (-sp.Max(sp.Min(r * A, clip(r) * A), c * A), True))


def cispo(eps_low: object = 0.2) -> sp.Expr:
    r"""CISPO's stopped weight :math:`-\mathrm{sg}(\mathrm{clip}(r))A\ell`; ``eps_low=None``: the cap :math:`\min(r, 1 + \varepsilon_h)`."""
    weight = sp.Min(r, 1 + eps_h) if eps_low is None else clip(r)
    return -sg(weight) * A * ell


def gamma_weight(x: sp.Expr) -> sp.Expr:
    r"""VESPO's Gamma weight :math:`\phi(x) = x^k e^{\zeta(1 - x)}`, normalised so that :math:`\phi(1) = 1`.

    It is the density of a Gamma law (shape :math:`k + 1`, rate :math:`\zeta`)
    up to a constant: it vanishes at :math:`x = 0` and as :math:`x \to \infty`
    and peaks at :math:`x = k/\zeta`.

    Examples
    --------
    >>> from derivations.methods import gamma_weight, k, lam
    >>> gamma_weight(1), gamma_weight(k / lam).subs({k: 2, lam: 3})
    (1, 4*E/9)
    """
    return x**k * sp.exp(lam * (1 - x))


def vespo() -> sp.Expr:
    return -sg(gamma_weight(r)) * A * ell


def selected_token(selected: object) -> bool:
    """``selected`` checked: is the token one of the selected ones (a bool)."""
    if not isinstance(selected, bool):
        raise TypeError(f"selected must be True or False (is the token one of the selected ones?), got {selected!r}")
    return selected


def clip_cov(selected: object) -> sp.Expr:
    """Clip-Cov (and every rule that drops selected tokens): PPO's loss on a token that is not selected; a selected token's loss is 0."""
    return sp.Integer(0) if selected_token(selected) else ppo()


def kl_cov(selected: object) -> sp.Expr:
    r"""KL-Cov: the unclipped surrogate :math:`-rA`, plus :math:`\beta|\ell - \ell_0|` on a selected token."""
    return -r * A + (beta * sp.Abs(ell - ell0) if selected_token(selected) else 0)


def sapo() -> sp.Expr:
    r"""SAPO's soft gate :math:`-\frac{4}{\tau}\operatorname{sigmoid}(\tau(r - 1))A`, with :math:`\tau_+` where :math:`A > 0` and :math:`\tau_-` elsewhere (verl, TRL)."""
    gate = lambda t: 4 / t / (1 + sp.exp(-t * (r - 1)))  # noqa: E731
    return sp.Piecewise((-gate(tau_pos) * A, A > 0), (-gate(tau_neg) * A, True))


def gmpo() -> sp.Expr:
    """One token's GMPO loss, :math:`-A\\exp g(\\log r)` (a row of one token; :func:`derivations.losses.gmpo_derivation`)."""
    d = sp.log(r)
    g = sp.Piecewise((sp.Min(d, sp.Min(sp.Max(d, -delta_l), delta_h)), A > 0), (sp.Max(d, sp.Min(sp.Max(d, -delta_l), delta_h)), True))
    return -A * sp.exp(g)


# ------------------------------------------------------------------ trust regions on the probability change


def _indicator(condition) -> sp.Piecewise:
    return sp.Piecewise((1, condition), (0, True))


def _probability_change() -> sp.Expr:
    r""":math:`\pi - \pi_0 = e^{\ell_0}(r - 1)`."""
    return sp.exp(ell0) * (r - 1)


def bernoulli_kl() -> sp.Expr:
    r"""The binary KL :math:`\pi_0\log(\pi_0/\pi) + (1 - \pi_0)\log\frac{1 - \pi_0 + 10^{-8}}{1 - \pi + 10^{-8}}` of DPPO's KL mask, with verl's and SkyRL's guards.

    With :math:`\pi = \pi_0 r`: :math:`\pi_0(\ell_0 - \ell) = -\pi_0\log r`.
    """
    p0, guard = sp.exp(ell0), sp.Rational(1, 10**8)
    return -p0 * sp.log(r) + (1 - p0) * sp.log((1 - p0 + guard) / (1 - p0 * r + guard))


def _trust_region(dppo_type: str) -> sp.Piecewise:
    r"""DPPO's keep mask, by the sign of :math:`A`: the probability may rise by :math:`\delta_{\mathrm{high}}` (:math:`A > 0`) and fall by :math:`\delta_{\mathrm{low}}` (:math:`A \le 0`).

    ``"binary_tv"``: :math:`\pi - \pi_0 \le \delta_{\mathrm{high}}`, resp. :math:`\ge -\delta_{\mathrm{low}}`;
    ``"binary_kl"``: the binary KL at most the threshold, or the move in the other direction.
    """
    if dppo_type == "binary_tv":
        rise, fall = _probability_change() <= tv_h, _probability_change() >= -tv_l
    elif dppo_type == "binary_kl":
        rise, fall = sp.Or(bernoulli_kl() <= tv_h, r <= 1), sp.Or(bernoulli_kl() <= tv_l, r >= 1)
    else:
        raise ValueError(f"dppo_type must be 'binary_tv' or 'binary_kl', got {dppo_type!r}")
    return sp.Piecewise((_indicator(rise), A > 0), (_indicator(fall), True))


def _k2(kl_tau: object) -> sp.Expr:
    r""":math:`\tau(\log r)^2` (prime-rl's penalty toward the sampler), or 0 when ``kl_tau`` is 0 or ``None``."""
    return 0 if kl_tau in (None, 0, 0.0) else tau_k2 * sp.log(r) ** 2


def dppo(dppo_type: str = "binary_tv", kl_tau: object = 0.0) -> sp.Expr:
    r"""DPPO as SkyRL (``dppo``) and prime-rl (its default loss) write it: :math:`-\mathrm{sg}(k)\,rA` (+ :math:`\tau(\log r)^2`).

    The ratio keeps its gradient; the stopped mask :math:`k` (:func:`_trust_region`)
    silences a token whose probability moved past the trust region in the
    advantage's direction.
    """
    return -sg(_trust_region(dppo_type)) * r * A + _k2(kl_tau)


def dppo_is(dppo_type: str = "binary_tv") -> sp.Expr:
    r"""DPPO as verl writes it (``dppo_tv``, ``dppo_kl``): :math:`-\mathrm{sg}(\min(r, C_{IS})\,k)\,A\ell`, a truncated stopped ratio."""
    return -sg(sp.Min(r, c_is) * _trust_region(dppo_type)) * A * ell


def tv_band(kl_tau: object = 1e-3) -> sp.Expr:
    r"""prime-rl's ``ipo``: :math:`-\mathrm{sg}(\mathbb 1[|\pi - \pi_0| \le \delta_{\mathrm{band}}])\,rA + \tau_{\mathrm{KL}}(\log r)^2`, a band for both signs of :math:`A`."""
    return -sg(_indicator(sp.Abs(_probability_change()) <= delta_band)) * r * A + _k2(kl_tau)


def dro() -> sp.Expr:
    r"""verl's ``dro``: :math:`-(A\ell - \tfrac{\beta}{2}(\log r)^2)`."""
    return -(A * ell - beta_dro / 2 * sp.log(r) ** 2)


def importance_sampling() -> sp.Expr:
    r"""SkyRL's ``importance_sampling``: :math:`-rA`, the ratio with its gradient, no clip."""
    return -r * A


def icepop() -> sp.Expr:
    r"""IcePop: :math:`-\mathrm{sg}(r\,\mathbb 1[l \le r \le h])\,A\ell`, a band on the ratio for both signs of :math:`A`, edges kept."""
    return -sg(sp.Piecewise((r, sp.And(r >= b_l, r <= b_h)), (0, True))) * A * ell


def rollout_is() -> sp.Expr:
    r"""SkyRL's ``rollout_is``: :math:`-\mathrm{sg}(r\,\mathbb 1[1 - \varepsilon_l < r < 1 + \varepsilon_h])\,A\ell`, the band open at both edges."""
    return -sg(sp.Piecewise((r, sp.And(r > 1 - eps_l, r < 1 + eps_h)), (0, True))) * A * ell


def opsm() -> sp.Expr:
    r"""OPSM on a row of one token: PPO's loss, kept where :math:`A \ge 0` or :math:`\log r \ge -\delta` (the row's mean log-ratio)."""
    return sg(_indicator(sp.Or(A >= 0, r >= sp.exp(-delta_opsm)))) * ppo()
