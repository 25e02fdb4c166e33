r"""The rejection and masking rules trainers ship, as bands on the sampler ratio: what each keeps, and what it costs.

Every rule of :mod:`numeric.off_policy.rollout` and :mod:`numeric.off_policy.masks`
keeps a token (or a sequence) by comparing a statistic of the sampler ratio
:math:`\rho_t = \pi/\mu` with a threshold.  Written in :math:`z = \log\rho`, each
kept set is an interval, and the interval says what the rule is:

* verl's ``k1`` is :math:`-z`, AReaL's ``kl_k1`` is :math:`+z`: the same numbers
  :math:`[\log l, \log h]` keep mirror-image bands (:func:`k1_bands`);
* ``seq_max_k2`` and M2PO keep :math:`|z| \le \sqrt{2d}` and :math:`|z| \le \sqrt d`
  token by token: symmetric bands in log space (:func:`max_k2_band`, :func:`m2_band`);
* a geometric-mean band :math:`[\log l, \log h]` on :math:`\log\rho/|o|` is the band
  :math:`[|o|\log l, |o|\log h]` on the sequence's :math:`\log\rho = \sum_t z_t`: a product band that
  widens with the length (:func:`geometric_band`);
* prime-rl's and SkyRL's probability-change mask :math:`\pi_t - \mu_t > d` is the ratio
  band :math:`\rho_t > 1 + d/\mu_t` (:func:`probability_band`);
* a mask that depends on the sign of :math:`A` removes exactly the dropped
  terms :math:`\rho A` of each side (:func:`sign_aware_mask`).

And two facts about what the trainers compute: the :math:`k_3` of verl and the
``kl_k3`` of AReaL estimate different things on the sampler's tokens
(:func:`k3_directions`), and AReaL's log-linear proximal policy splits the
sampler ratio into the PPO ratio :math:`\rho^{1-\alpha}` and the behaviour weight
:math:`\rho^{\alpha}` (:func:`loglinear_split`).

References
----------
verl ``1dda039b`` ``verl/trainer/ppo/rollout_corr_helper.py``; AReaL ``cbff54d``
``areal/utils/functional/functional.py``, ``areal/trainer/ppo/actor.py``; prime-rl
``559b447`` ``src/prime_rl/trainer/rl/loss.py``; SkyRL ``a956457``
``skyrl/backends/skyrl_train/utils/ppo_utils.py``.
"""

from __future__ import annotations

import sympy as sp

from .definitions import Definitions
from .derivation import Derivation
from .proofs import on_regions, same_solutions

__all__ = [
    "geometric_band",
    "k1_bands",
    "k3_directions",
    "k3_summands",
    "k3_symbols",
    "loglinear_split",
    "m2_band",
    "max_k2_band",
    "probability_band",
    "sign_aware_mask",
]

_x = sp.Symbol("z", real=True)            # z = log rho, one token's log sampler ratio
_rho = sp.Symbol(r"\rho", positive=True)
_A = sp.Symbol("A", real=True)
_log_l, _log_h = sp.Symbol(r"\log l", real=True), sp.Symbol(r"\log h", real=True)  # a band's ends in log space (a, b are the action and the baseline)


def _kept(condition: sp.Basic) -> sp.Piecewise:
    r""":math:`\mathbb 1[\text{condition}]` as a ``Piecewise``."""
    return sp.Piecewise((1, condition), (0, True))


def k1_bands() -> Derivation:
    r"""verl keeps :math:`\log l \le -z \le \log h`; that is :math:`-\log h \le z \le -\log l`, AReaL's band on :math:`+z` reflected.

    With :math:`z = \log\rho`, verl's ``*_k1`` statistic is :math:`-z` (of a
    token, of the sum, or of the mean over the sequence), AReaL's ``kl_k1`` is
    :math:`+z`.  verl's threshold ``"l_u"`` (its two numbers :math:`l < h`) keeps
    :math:`\log l \le -z \le \log h`, the ratio band :math:`[1/h, 1/l]`; AReaL's
    ``lower = log l``, ``upper = log h`` keep :math:`\log l \le z \le \log h`, the band
    :math:`[l, h]`.  The same numbers keep mirror images: a bound copied
    from one trainer to the other drops the tokens the other keeps.

    Examples
    --------
    >>> from derivations.corrections import k1_bands
    >>> k1_bands().verify().proved_by()
    {'solution sets': 1}
    """
    a, b = _log_l, _log_h
    d = Derivation("verl's k1 band is a reflected band on the log-ratio",
                   assumptions=[r"$z = \log\rho$, $\rho = \pi/\mu$; verl's $k_1 = -z$, AReaL's $\mathtt{kl\_k1} = z$", b > a])
    d.step((a <= -_x) & (-_x <= b), (-b <= _x) & (_x <= -a), r"multiply by $-1$: the band on $z$ is $[-\log h, -\log l]$", relation="<=>",
           proof=same_solutions(_x))
    return d


def max_k2_band() -> Derivation:
    r""":math:`k_2 = \tfrac12 z^2 \le d` exactly when :math:`-\sqrt{2d} \le z \le \sqrt{2d}`.

    So ``seq_max_k2`` (the largest :math:`k_2` of a sequence at most :math:`d`)
    keeps a sequence exactly when *every* token ratio lies in
    :math:`[e^{-\sqrt{2d}}, e^{\sqrt{2d}}]`: SkyRL's outlier mask
    (:func:`numeric.off_policy.outlier_sequence_mask`) with a band symmetric in
    log space, and ``token_k2`` is IcePop with that band.

    Examples
    --------
    >>> from derivations.corrections import max_k2_band
    >>> max_k2_band().verify().proved_by()
    {'solution sets': 1}
    """
    delta = sp.Symbol("d", positive=True)  # the threshold (delta is the TD error)
    d = Derivation("The k2 statistic keeps a symmetric band of the log-ratio", assumptions=[r"$z = \log\rho$", r"$d > 0$"])
    d.step(_x**2 / 2 <= delta, sp.Contains(_x, sp.Interval(-sp.sqrt(2 * delta), sp.sqrt(2 * delta))), r"solve the quadratic", relation="<=>",
           proof=same_solutions(_x))
    return d


def m2_band() -> Derivation:
    r""":math:`z^2 \le d` exactly when :math:`-\sqrt d \le z \le \sqrt d`: M2PO keeps a symmetric band of the log-ratio.

    M2PO drops the tokens of largest :math:`z_t^2` first, so what it keeps is a
    sublevel set :math:`\{z_t^2 \le d\}`, with the cut :math:`d` set by the batch:
    a token ratio in :math:`[e^{-\sqrt d}, e^{\sqrt d}]`.

    Examples
    --------
    >>> from derivations.corrections import m2_band
    >>> m2_band().verify().proved_by()
    {'solution sets': 1}
    """
    c = sp.Symbol("d", positive=True)  # the cut (c is the scale of an expected update)
    d = Derivation("M2PO keeps a symmetric band of the log-ratio", assumptions=[r"$z = \log\rho$", r"$d > 0$: the cut"])
    d.step(_x**2 <= c, sp.Contains(_x, sp.Interval(-sp.sqrt(c), sp.sqrt(c))), r"solve the quadratic", relation="<=>", proof=same_solutions(_x))
    return d


def geometric_band() -> Derivation:
    r"""A band :math:`[\log l, \log h]` on the mean log-ratio :math:`\log\rho/|o|` is the band :math:`[|o|\log l, |o|\log h]` on the sequence's :math:`\log\rho = \sum_t z_t`.

    The geometric-mean masks (OpenRLHF ``seq-mask-tis``, verl ``seq_mean_k1``,
    SkyRL ``geometric``) keep :math:`l \le \rho^{1/|o|} \le h`: the product ratio in
    :math:`[l^{|o|}, h^{|o|}]`, a band that widens with the number :math:`|o|` of tokens;
    the product masks (TRL ``sequence_mask``, verl ``seq_sum_k1``, SkyRL
    ``product``) keep the same band at every length.

    Examples
    --------
    >>> from derivations.corrections import geometric_band
    >>> geometric_band().verify().proved_by()
    {'regions': 1}
    """
    a, b = _log_l, _log_h
    X = sp.Symbol(r"\log\rho", real=True)
    n = sp.Symbol(r"\left|o\right|", positive=True)  # the sequence's length, printed before log l and log h
    d = Derivation("A geometric-mean band is a product band that widens with the length",
                   assumptions=[r"$\log\rho = \sum_t \log\rho_t$ over the $|o|$ tokens of a sequence", b > a])
    d.step(_kept((a <= X / n) & (X / n <= b)), _kept((n * a <= X) & (X <= n * b)), r"multiply by $|o| > 0$; at both ends and on the three regions they cut",
           proof=on_regions((X, [n * a, n * b])))
    return d


def probability_band() -> Derivation:
    r"""A probability that rose by more than :math:`d`, :math:`\pi_t - \mu_t > d`, is a ratio above :math:`1 + d/\mu_t`; one that fell, below :math:`1 - d/\mu_t`.

    prime-rl's default loss and SkyRL's ``dppo`` (binary TV) mask a token by
    its change of probability :math:`\pi_t - \mu_t` (:math:`\pi_t = \pi(o_t)`, :math:`\mu_t = \mu(o_t)`,
    :math:`\rho_t = \pi_t/\mu_t`): in ratio terms a band whose half-width :math:`d/\mu_t` grows
    as the sampler's probability of the token falls.  A rare token may move
    its ratio far; a likely one barely.

    Examples
    --------
    >>> from derivations.corrections import probability_band
    >>> probability_band().verify().proved_by()
    {'regions': 2}
    """
    p, q, delta = sp.symbols(r"\pi_t \mu_t d", positive=True)  # the token's probabilities and the threshold
    d = Derivation("A probability-change mask is a ratio band of half-width d/μ_t", assumptions=[r"$\pi_t = \pi(o_t)$, $\mu_t = \mu(o_t)$, $d > 0$"],
                   unfold=Definitions({_rho: p / q}))
    d.step(_kept(p - q > delta), _kept(_rho > 1 + delta / q), r"divide by $\mu_t > 0$; at $\mu_t + d$ and on either side", proof=on_regions((p, [q + delta])))
    d.step(_kept(q - p > delta), _kept(_rho < 1 - delta / q), r"the same below", proof=on_regions((p, [q - delta]), label="regions"),
           given=(q > delta,))
    return d


def sign_aware_mask() -> Derivation:
    r"""Per token, :math:`\rho A\,\mathrm{keep} = \rho A - \rho A\,\mathbb 1[A > 0, \rho > h] - \rho A\,\mathbb 1[A < 0, \rho < l]`.

    The masks that look at the advantage's sign (PPO's clip read at the
    sampler's tokens, verl's bypass PPO-clip, prime-rl, SkyRL ``dppo``) drop a
    token only in the direction its advantage pushes.  Taking expectations, such
    a mask changes the token-IS gradient by exactly
    :math:`-\mathbb E_\mu[\sum_t \rho_t A\,\mathbb 1[\text{dropped}_t]\, s_t]`: the whole
    weight of the dropped tokens, each on one side only.  Checked on both signs
    of :math:`A` and on every region of :math:`\rho` cut at :math:`l < h`.

    Examples
    --------
    >>> from derivations.corrections import sign_aware_mask
    >>> sign_aware_mask().verify().proved_by()
    {'regions': 1}
    """
    low, high = sp.symbols("l h", positive=True)
    up, down = (_A > 0) & (_rho > high), (_A < 0) & (_rho < low)
    keep = sp.Piecewise((0, up), (0, down), (1, True))
    d = Derivation("A sign-aware mask removes the dropped side's whole weight", assumptions=[r"$\rho > 0$, $A$ real", high > low])
    d.step(_rho * _A * keep, _rho * _A - sp.Piecewise((_rho * _A, up), (0, True)) - sp.Piecewise((_rho * _A, down), (0, True)),
           r"on both signs of $A$, at $l$, at $h$ and on the regions they cut", proof=on_regions((_A, [0]), (_rho, [low, high])))
    return d


_K = sp.Symbol("K", integer=True, positive=True)
_a = sp.Symbol("a", integer=True, positive=True)
_mu, _pi, _rho_a = (sp.IndexedBase(s, positive=True) for s in (r"\mu", r"\pi", r"\rho"))


def _S(e: sp.Expr) -> sp.Sum:
    return sp.Sum(e, (_a, 1, _K))


_p, _q = sp.symbols(r"\pi \mu", positive=True)

k3_symbols = (_p, _q)
r"""The arguments of :func:`k3_summands`' expressions, in order: :math:`\pi`, :math:`\mu` (one outcome's probabilities)."""


def k3_summands() -> dict[str, sp.Expr]:
    r"""The per-outcome terms of :func:`k3_directions`'s two closed forms, in the plain symbols ``\pi`` and ``\mu``, for ``lambdify``.

    ``"verl"``: :math:`\mu\log(\mu/\pi)` (summed: :math:`\mathrm{KL}(\mu\,\|\,\pi)`);
    ``"AReaL"``: :math:`\mu^2/\pi - \mu - \mu\log(\mu/\pi)` (summed:
    :math:`\sum_a\mu_a^2/\pi_a - 1 - \mathrm{KL}(\mu\,\|\,\pi)`).

    Examples
    --------
    >>> from derivations.corrections import k3_summands
    >>> sorted(k3_summands())
    ['AReaL', 'verl']
    """
    kl = _q * sp.log(_q / _p)
    return {"verl": kl, "AReaL": _q**2 / _p - _q - kl}


def k3_directions() -> Derivation:
    r"""On the sampler's tokens verl's :math:`k_3` averages to :math:`\mathrm{KL}(\mu\|\pi)`; AReaL's ``kl_k3`` to :math:`\sum_a \mu_a^2/\pi_a - 1 - \mathrm{KL}(\mu\|\pi)`.

    verl's :math:`k_3 = \rho - 1 - \log\rho` is the unbiased, non-negative
    estimator of :math:`\mathrm{KL}(\mu\,\|\,\pi)` from :math:`\mu`'s samples.  AReaL's
    ``kl_k3`` is :math:`1/\rho - 1 + \log\rho`: the :math:`k_3` of the other direction,
    which would be unbiased for :math:`\mathrm{KL}(\pi\,\|\,\mu)` from :math:`\pi`'s samples,
    but the tokens come from :math:`\mu`.  Its mean there is a :math:`\chi^2` term minus
    a KL: still non-negative (a mean of non-negative terms), but not a KL, and
    larger than it wherever :math:`\chi^2(\mu\|\pi) > 2\,\mathrm{KL}(\mu\|\pi)`.  Over
    :math:`K` outcomes, both normalisations substituted last.

    Examples
    --------
    >>> from derivations.corrections import k3_directions
    >>> k3_directions().verify().proved_by()
    {'sums as atoms, cancel(together)': 2, 'expand': 2}
    """
    kl = _S(_mu[_a] * sp.log(_mu[_a] / _pi[_a]))
    norm = {_S(_pi[_a]): 1, _S(_mu[_a]): 1}
    d = Derivation("verl's k3 and AReaL's kl_k3 on the sampler's tokens",
                   assumptions=[r"$K$ outcomes $a \sim \mu$", r"$\rho_a = \pi_a/\mu_a$", sp.Eq(_S(_pi[_a]), 1), sp.Eq(_S(_mu[_a]), 1)],
                   unfold=Definitions({_rho_a[_a]: _pi[_a] / _mu[_a]}))
    d.step(_S(_mu[_a] * (_rho_a[_a] - 1 - sp.log(_rho_a[_a]))), _S(_pi[_a]) - _S(_mu[_a]) + kl,
           r"verl: $\mu_a\rho_a = \pi_a$, $-\log\rho_a = \log(\mu_a/\pi_a)$; linearity")
    d.then(kl, r"$\sum_a \pi_a = \sum_a \mu_a = 1$: the KL", facts=norm)
    d.step(_S(_mu[_a] * (1 / _rho_a[_a] - 1 + sp.log(_rho_a[_a]))), _S(_mu[_a] ** 2 / _pi[_a]) - _S(_mu[_a]) - kl,
           r"AReaL: $\mu_a/\rho_a = \mu_a^2/\pi_a$; linearity")
    d.then(_S(_mu[_a] ** 2 / _pi[_a]) - 1 - kl, r"$\sum_a \mu_a = 1$", facts=norm)
    return d


def loglinear_split() -> Derivation:
    r"""AReaL's log-linear proximal policy splits :math:`\rho = \pi_\theta/\mu` into :math:`r = \rho^{1-\alpha}` and :math:`\tilde\rho = \rho^{\alpha}`.

    With :math:`\ell_{\mathrm{prox}} = \ell_\mu + \alpha(\ell - \ell_\mu)`, the decoupled
    loss's PPO ratio :math:`r = e^{\ell - \ell_{\mathrm{prox}}}` and behaviour weight
    :math:`\tilde\rho = e^{\ell_{\mathrm{prox}} - \ell_\mu}` are powers of the sampler
    ratio :math:`\rho = e^{\ell - \ell_\mu}`, and their product is :math:`\rho`: where
    neither the clip nor the rejection binds, the weight is token IS.  The clip
    :math:`1 - \varepsilon \le r \le 1 + \varepsilon` is then the band
    :math:`(1\mp\varepsilon)^{1/(1-\alpha)}` on :math:`\rho`, and a rejection
    :math:`\tilde\rho \le C` the cap :math:`C^{1/\alpha}`: a stale token (large
    :math:`\alpha`) is clipped later and rejected sooner than a fresh one.

    Examples
    --------
    >>> from derivations.corrections import loglinear_split
    >>> loglinear_split().verify().proved_by()
    {'expand': 3}
    """
    ell, ell_mu, alpha = sp.symbols(r"\ell \ell_\mu \alpha", real=True)
    ell_prox = sp.Symbol(r"\ell_{\mathrm{prox}}", real=True)
    r, rho_tilde = sp.symbols(r"r \tilde{\rho}", positive=True)
    unfold = Definitions({ell_prox: ell_mu + alpha * (ell - ell_mu), _rho: sp.exp(ell - ell_mu),
                          r: sp.exp(ell - ell_prox), rho_tilde: sp.exp(ell_prox - ell_mu)})
    d = Derivation("The log-linear proximal policy splits the sampler ratio", unfold=unfold,
                   assumptions=[r"$\ell = \log\pi_\theta$, $\ell_\mu = \log\mu$, $\ell_{\mathrm{prox}} = \ell_\mu + \alpha(\ell - \ell_\mu)$",
                                r"$\rho = e^{\ell - \ell_\mu}$, $r = e^{\ell - \ell_{\mathrm{prox}}}$, $\tilde\rho = e^{\ell_{\mathrm{prox}} - \ell_\mu}$"])
    d.step(r, _rho ** (1 - alpha), r"the PPO ratio: $\ell - \ell_{\mathrm{prox}} = (1 - \alpha)(\ell - \ell_\mu)$")
    d.step(rho_tilde, _rho**alpha, r"the behaviour weight: $\ell_{\mathrm{prox}} - \ell_\mu = \alpha(\ell - \ell_\mu)$")
    d.step(r * rho_tilde, _rho, r"their product: token IS")
    return d
