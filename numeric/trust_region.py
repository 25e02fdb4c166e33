r"""Trust-region numbers: how far CISPO's cap moves the gradient and its bound, the TV bound per prefix, KL estimators.

The KL estimators :math:`k_1, k_2, k_3` are the expressions of
:mod:`derivations.trust_region`, lambdified for torch (so they stay
differentiable) and applied elementwise to log-probabilities.  The suite
``trust_region`` checks, on :class:`~numeric.TinyLM` at the perturbed
:math:`\theta` of the gradient-weights suite:

* CISPO's shift from token IS, :math:`-\mathbb{E}_{\text{old}}[\sum_t (r_t - 1 - \varepsilon)_+ A\, s_t]`,
  against autograd, and its bound, for several :math:`\varepsilon`;
* :math:`\mathbb{E}_{\mu}[(\rho - C)_+] = \sum_a(\pi_a - C\mu_a)_+ \le \mathrm{TV}(\pi, \mu)` at every prefix, for caps :math:`C`;
* the means and the expected loss gradients of :math:`k_1, k_2, k_3` at every prefix.
"""

from __future__ import annotations

import sympy as sp
import torch

from derivations import trust_region as tr

from ._types import Array, ArrayT
from ._validate import (
    like,
    require_nonnegative,
    require_ratio,
    to_tensor,
)
from .checks import check, maxabs, suite
from .expectations import expected_score_sum, token_score_sqnorms
from .gradient_weights import EPS_HIGH, setting
from .losses.penalties import kl_penalty
from .tinylm import check_theta, token_score_tensor

__all__ = ["clip_excess", "kl_k1", "kl_k2", "kl_k3"]


def kl_k1(log_prob: ArrayT, ref_log_prob: Array, mask: Array | None = None) -> ArrayT:
    r""":math:`k_1 = -\log r_{\mathrm{ref}} = \log\pi - \log\pi_{\mathrm{ref}}`, with :math:`r_{\mathrm{ref}} = \pi_{\mathrm{ref}}/\pi`, elementwise.

    With :math:`a \sim \pi` it is unbiased for :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`
    but takes both signs; as a loss its expected gradient is 0.

    Parameters
    ----------
    log_prob : numpy array or torch tensor
        :math:`\log\pi(a)` of the sampling policy, finite where ``mask`` is 1.
        The result has ``log_prob``'s kind, device and dtype.
    ref_log_prob : numpy array or torch tensor
        :math:`\log\pi_{\mathrm{ref}}(a)` of the reference, aligned with
        ``log_prob``, finite where ``mask`` is 1.
    mask : numpy array or torch tensor, optional
        0/1 or boolean, aligned.  Masked slots may hold anything (``-inf``,
        padding sentinels); the estimate there is 0, with a zero gradient.
        :func:`kl_k2` and :func:`kl_k3` take the same arguments; each is
        :func:`numeric.kl_penalty` with its ``estimator`` (one definition of the estimators).

    References
    ----------
    J. Schulman, "Approximating KL Divergence" (2020).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import kl_k1
    >>> kl_k1(np.log([0.5, 0.5]), np.log([0.25, 0.75])).round(6).tolist()
    [0.693147, -0.405465]
    """
    return kl_penalty(log_prob, ref_log_prob, mask, estimator="k1")


def kl_k2(log_prob: ArrayT, ref_log_prob: Array, mask: Array | None = None) -> ArrayT:
    r""":math:`k_2 = \tfrac12 (\log r_{\mathrm{ref}})^2`, elementwise.

    Non-negative, biased for :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})` at third
    order; as a loss its expected gradient is :math:`\nabla\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import kl_k2
    >>> kl_k2(np.log([0.5, 0.5]), np.log([0.25, 0.75])).round(6).tolist()
    [0.240227, 0.082201]
    """
    return kl_penalty(log_prob, ref_log_prob, mask, estimator="k2")


def kl_k3(log_prob: ArrayT, ref_log_prob: Array, mask: Array | None = None) -> ArrayT:
    r""":math:`k_3 = (r_{\mathrm{ref}} - 1) - \log r_{\mathrm{ref}}`, :math:`r_{\mathrm{ref}} = \pi_{\mathrm{ref}}/\pi`, elementwise.

    Non-negative and unbiased for :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`;
    as a loss its expected gradient is :math:`\nabla\mathrm{KL}(\pi_{\mathrm{ref}}\,\|\,\pi)`.
    Computed as :math:`\operatorname{expm1}(\log r_{\mathrm{ref}}) - \log r_{\mathrm{ref}}`,
    so a float32 log-ratio of :math:`10^{-3}` keeps about four digits of
    :math:`k_3 \approx (\log r_{\mathrm{ref}})^2/2` (``exp`` would keep none).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import kl_k3
    >>> pi, ref = np.array([0.5, 0.5]), np.array([0.25, 0.75])
    >>> k = kl_k3(np.log(pi), np.log(ref))
    >>> k.round(6).tolist(), round(float(pi @ k), 6), round(float(pi @ np.log(pi / ref)), 6)
    ([0.193147, 0.094535], 0.143841, 0.143841)
    """
    return kl_penalty(log_prob, ref_log_prob, mask, estimator="k3")


def clip_excess(ratio: ArrayT, *, eps_high: float = EPS_HIGH) -> ArrayT:
    r""":math:`(r - 1 - \varepsilon_h)_+`, the weight CISPO's clip removes from a token (elementwise).

    CISPO's weight is :math:`\min(r, 1+\varepsilon_h) = r - (r - 1 - \varepsilon_h)_+`
    (:func:`derivations.trust_region.clip_bias_term`); the excess is
    :data:`derivations.trust_region.clip_excess`, the formula that derivation
    displays, lambdified.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import clip_excess
    >>> clip_excess(np.array([0.5, 1.28, 2.0]), eps_high=0.28).round(6).tolist()
    [0.0, 0.0, 0.72]

    A ratio that underflowed to 0 or overflowed to ``inf`` is a ratio: its excess is 0 or ``inf``.
    """
    t, kind = to_tensor("ratio", ratio)
    require_ratio("ratio", t)
    high = require_nonnegative("eps_high", eps_high)
    return like(kind, _EXCESS(t, high))


_EXCESS = sp.lambdify((tr.ratio, tr.epsilon), tr.clip_excess, modules=[{"Max": lambda x, y: torch.maximum(torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64))}])


# ------------------------------------------------------------------- checks


def cispo_bias(eps: float) -> tuple[torch.Tensor, float]:
    r"""``(shift, bound)``: how far CISPO's cap moves the token-IS gradient, on the toy LM of :func:`~numeric.gradient_weights.setting`.

    .. math::

        \mathrm{shift} = -\sum_{o,t} \pi_{\text{old}}(o)\,(r_t - 1 - \varepsilon)_+ A\, s_t,
        \qquad
        \mathrm{bound} = \sum_{o,t} \pi_{\text{old}}(o)\,(r_t-1-\varepsilon)_+ |A|\,\lVert s_t\rVert,

    with scores :math:`s_t` at the current :math:`\theta`.

    Examples
    --------
    >>> from numeric.trust_region import cispo_bias
    >>> shift, bound = cispo_bias(0.28)
    >>> float(shift.norm()) <= bound
    True
    """
    s = setting()
    lm, th = s.lm, s.theta
    r, _ = s.ratio(th)
    excess = clip_excess(r.detach(), eps_high=eps) * lm.mask
    p = lm.probs(th)
    bias = -expected_score_sum(lm, th, (s.q / p)[:, None] * excess * s.A)  # E_q via reweighting E_p
    bound = float((s.q[:, None] * excess * s.A.abs() * token_score_sqnorms(lm, th).sqrt()).sum())
    return bias, bound


def per_prefix(theta_pi: torch.Tensor, theta_mu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[n_prefixes, V]`` conditional distributions of two parameter vectors of the setting's TinyLM.

    Examples
    --------
    >>> from numeric.gradient_weights import setting
    >>> from numeric.trust_region import per_prefix
    >>> s = setting()
    >>> pi, mu = per_prefix(s.theta, s.theta_old)
    >>> float((pi[s.lm.prefix_row((2, 1))] - s.lm.cond_probs(s.theta, (2, 1))).abs().max())
    0.0
    """
    lm = setting().lm
    theta_pi, theta_mu = check_theta(lm, theta_pi, "theta_pi"), check_theta(lm, theta_mu, "theta_mu")
    return torch.softmax(lm.logits(theta_pi), -1), torch.softmax(lm.logits(theta_mu), -1)


def tv_gap(C: float) -> tuple[float, float]:
    r"""``(identity error, max violation)`` of the per-state bound at the cap :math:`C`, over the prefixes of the toy LM.

    .. math::

        \max_h \Bigl|\mathbb{E}_\mu[(r-C)_+] - \sum_a(\pi_a - C\mu_a)_+\Bigr|,
        \qquad
        \max_h \Bigl(\sum_a(\pi_a - C\mu_a)_+ - \mathrm{TV}(\pi, \mu)\Bigr),

    with :math:`\mu = \pi_{\text{old}}` and :math:`\pi` the perturbed policy.

    Examples
    --------
    >>> from numeric.trust_region import tv_gap
    >>> identity, violation = tv_gap(1.28)
    >>> identity < 1e-15, violation < 0
    (True, True)
    """
    s = setting()
    pi, mu = per_prefix(s.theta, s.theta_old)
    excess = (mu * (pi / mu - C).clamp(min=0)).sum(-1)
    termwise = (pi - C * mu).clamp(min=0).sum(-1)
    tv = 0.5 * (pi - mu).abs().sum(-1)
    return maxabs(excess, termwise), float((termwise - tv).max())


@suite("trust_region")
def cross_checks() -> None:
    """000 section 4 and the KL estimators, on TinyLM(V=4, L=4, seed=0) at the perturbed theta."""
    s = setting()
    lm, th = s.lm, s.theta
    # CISPO's shift from token IS: derived formula vs autograd, and its bound
    norms = token_score_tensor(lm, th).norm(dim=-1)  # [N, L] ||s_t||, dense
    r_now, _ = s.ratio(th)
    bound_gap = 0.0
    for eps in (0.05, 0.1, 0.28):
        bias, bound = cispo_bias(eps)
        autograd_bias = -(s.grad("cispo_cap", th, eps_high=eps) - s.grad("is", th))
        check(f"CISPO - token IS: shift -E[sum_t (r-1-eps)+ A s_t] == autograd (eps_high = {eps})", maxabs(bias, autograd_bias), 1e-15)
        check(f"||shift|| <= sum_t E[(r-1-eps)+ |A| ||s_t||] (eps_high = {eps}; excess)", max(0.0, float(bias.norm()) - bound), 0.0)
        dense = float((s.q[:, None] * clip_excess(r_now.detach(), eps_high=eps) * lm.mask * s.A.abs() * norms).sum())
        bound_gap = max(bound_gap, abs(bound - dense))
    check("the bound == the dense sum over (o, t) with ||s_t|| of the [N, L, P] token scores (eps_high = 0.05, 0.1, 0.28)", bound_gap, 1e-15)
    check("CISPO weights bounded by 1 + eps_high (excess)", max(0.0, float(s.weights("cispo_cap", th).max()) - (1 + EPS_HIGH)), 0.0)
    # per-state TV bound at every prefix
    pi, mu = per_prefix(th, s.theta_old)
    tv = 0.5 * (pi - mu).abs().sum(-1)
    at_one = (mu * clip_excess(pi / mu, eps_high=0.0)).sum(-1)
    check("C = 1: E_mu[(rho-1)+] == TV(pi, mu) = sum|pi - mu| / 2 at every prefix (the bound is tight)", maxabs(at_one, tv), 1e-15)
    for C in (1.05, 1.28, 2.0):
        _, violation = tv_gap(C)
        check(f"E_mu[(rho-C)+] <= TV(pi, mu) at every prefix (C = {C}; max violation, rounding only)", max(0.0, violation), 1e-15)
    below = (mu * (pi / mu - 0.5).clamp(min=0)).sum(-1) - tv
    check("C = 1/2 < 1: the bound fails at some prefix (1 if E_mu[(rho-C)+] <= TV everywhere)", float(bool((below <= 0).all())), 0.0)
    # KL estimators at every prefix: pi = current, pi_ref = old
    pi, ref = per_prefix(th, s.theta_old)
    kl = torch.distributions.kl_divergence(torch.distributions.Categorical(probs=pi), torch.distributions.Categorical(probs=ref))
    for name, k in (("k1", kl_k1), ("k3", kl_k3)):
        check(f"E_pi[{name}] == KL(pi || pi_ref) at every prefix", maxabs((pi * k(pi.log(), ref.log())).sum(-1), kl), 1e-14)
    check("k3 >= 0 at every (prefix, token) (most negative value)", max(0.0, -float(kl_k3(pi.log(), ref.log()).min())), 0.0)
    delta = pi.log() - ref.log()
    for name, k in (("k1", kl_k1), ("k2", kl_k2), ("k3", kl_k3)):
        derived = sp.lambdify(tr.delta, getattr(tr, name), modules=[{"exp": torch.exp, "log": torch.log}])(delta) + 0 * delta
        gap = float(((k(pi.log(), ref.log()) - derived).abs() / (1 + derived.abs())).max())
        check(f"kl_{name} == derivations.trust_region.{name} lambdified, at every (prefix, token) (error relative to 1 + |k|)", gap, 1e-15)
    seq = lm.probs(th)
    seq_kl = float(seq @ (lm.sequence_log_prob(th) - lm.sequence_log_prob(s.theta_old)))
    k3_seq = (kl_k3(lm.token_log_probs(th), lm.token_log_probs(s.theta_old)) * lm.mask).sum(1)
    check("E_pi[sum_t k3_t] == KL(pi || pi_ref) over whole responses", abs(float(seq @ k3_seq) - seq_kl), 1e-14)
    _kl_estimator_gradient_checks()


def _kl_estimator_gradient_checks() -> None:
    r"""Autograd of :math:`\sum_h \sum_a \mathrm{sg}(\pi_a) k(a)` against autograd of the KL it should match."""
    s = setting()
    lm = s.lm
    ref = torch.softmax(lm.logits(s.theta_old), -1)
    th = s.theta.detach().clone().requires_grad_(True)
    log_pi = torch.log_softmax(lm.logits(th), -1)
    pi = log_pi.exp()

    def grad(x):
        return torch.autograd.grad(x, th, retain_graph=True)[0]

    as_loss = {name: grad((pi.detach() * k(log_pi, ref.log())).sum()) for name, k in (("k1", kl_k1), ("k2", kl_k2), ("k3", kl_k3))}
    reverse = grad((pi * (log_pi - ref.log())).sum())
    forward = grad((ref * (ref.log() - log_pi)).sum())
    check("E_pi[grad k1] == 0 (k1 as a loss), every prefix", float(as_loss["k1"].abs().max()), 1e-14)
    check("E_pi[grad k2] == grad KL(pi || pi_ref), every prefix", maxabs(as_loss["k2"], reverse), 1e-14)
    check("E_pi[grad k3] == grad KL(pi_ref || pi), every prefix", maxabs(as_loss["k3"], forward), 1e-14)
    check("E_pi[grad k3] differs from grad KL(pi || pi_ref) (1 if they agree to 1e-6)", float(maxabs(as_loss["k3"], reverse) < 1e-6), 0.0)
