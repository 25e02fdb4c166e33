r"""Policy losses: :func:`policy_loss` and its derived gradient weight :func:`policy_weight`."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
import sympy as sp
import torch

from derivations import losses as derived

from .._validate import (
    as_mask,
    compute_dtype,
    like,
    masked_inputs,
    raw_tensor,
    require_finite_where,
    require_nonnegative,
    require_real,
    result_dtype,
    to_tensor,
)
from ..gradient_weights import clip_bounds
from .aggregation import check_mode, reduce_tokens, zeroed

__all__ = ["POLICY_LOSSES", "policy_loss", "policy_weight"]


POLICY_LOSSES = ("reinforce", "gpg", "ppo", "gspo", "gspo_token", "cispo", "sapo", "gmpo")
"""Methods of :func:`policy_loss`; ``ppo`` takes ``dual_clip``, ``cispo`` takes ``cispo_cap``."""

SEQUENCE_LEVEL = ("gspo", "gspo_token", "gmpo")


def _method(method: str) -> str:
    if method not in POLICY_LOSSES:
        raise ValueError(f"method must be one of {POLICY_LOSSES}, got {method!r}")
    return method


class _Inputs(NamedTuple):
    """The tensors of a policy loss, shapes checked, on ``log_prob``'s device in its compute dtype."""

    log_prob: torch.Tensor
    old_log_prob: torch.Tensor | None  # None where the method never reads it (REINFORCE, GPG)
    advantage: torch.Tensor  # [B, 1] or [B, T]
    weight: torch.Tensor | None
    mask: torch.Tensor  # as given, on the device
    kind: str


def _policy_inputs(method, log_prob, old_log_prob, advantage, mask, weight) -> _Inputs:
    lp, kind = to_tensor("log_prob", log_prob)
    if lp.ndim != 2:
        raise ValueError(f"log_prob must have shape [B, T], got {tuple(lp.shape)}")
    lp = lp.to(compute_dtype(lp.dtype))
    old = _aligned("old_log_prob", old_log_prob, lp)
    if mask is None:
        raise ValueError("mask is required: a [B, T] 0/1 or boolean response mask")
    m, _ = raw_tensor("mask", mask)
    if m.shape != lp.shape:
        raise ValueError(f"mask must have the shape of log_prob {tuple(lp.shape)}, got {tuple(m.shape)}")
    A, _ = to_tensor("advantage", advantage)
    A = A.to(device=lp.device, dtype=lp.dtype)
    if A.shape == lp.shape[:1]:
        A = A[:, None]
    elif A.shape != lp.shape:
        raise ValueError(f"advantage must have shape [B] = {tuple(lp.shape[:1])} or the shape of log_prob {tuple(lp.shape)}, got {tuple(A.shape)}")
    w = None if weight is None else _aligned("weight", weight, lp)
    return _Inputs(lp, None if method in ("reinforce", "gpg") else old, A, w, m.to(lp.device), kind)


def _aligned(name: str, value, like_t: torch.Tensor) -> torch.Tensor:
    t, _ = to_tensor(name, value)
    if t.shape != like_t.shape:
        raise ValueError(f"{name} must have the shape of log_prob {tuple(like_t.shape)}, got {tuple(t.shape)}")
    return t.to(device=like_t.device, dtype=like_t.dtype)


def _float_mask(m: torch.Tensor, like_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The mask as numbers in ``like_t``'s dtype, and :math:`\sum|m - m^2|`: 0 exactly when every entry is 0 or 1.

    A sum of non-negative floats is 0 only if every term is, and
    :math:`m - m^2` rounds to 0 only where :math:`m^2 = m`, at 0 and 1
    (:math:`+\infty` gives NaN).  A float mask is tested in its own precision.
    """
    if m.dtype == torch.bool:
        return m.to(like_t.dtype), torch.zeros((), dtype=like_t.dtype, device=like_t.device)
    numbers = m if m.is_floating_point() else m.to(like_t.dtype)
    return m.to(like_t.dtype), torch.addcmul(numbers, numbers, numbers, value=-1).abs().sum()


def _policy_loss(method, x: _Inputs, keep: torch.Tensor, agg, norm, options) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, witness)`` with padding zeroed by ``keep``.

    The witness is finite exactly when every input the loss reads is finite
    wherever ``keep`` zeroes it by a product (everywhere, for a float
    ``keep``; in the kept slots, up to overflow, for a boolean one): each
    input reaches the loss or the witness through a sum or a product, and
    ``0 * inf`` is NaN.
    """
    n = keep.sum(-1, keepdim=True) if method in SEQUENCE_LEVEL or agg == "seq-mean-token-mean" else None
    lp = zeroed(x.log_prob, keep)
    delta = None if x.old_log_prob is None else zeroed(x.log_prob - x.old_log_prob.detach(), keep)
    A = x.advantage if x.advantage.shape[-1] == 1 else zeroed(x.advantage, keep)
    per_token = _policy_terms(method, lp, delta, A, n, *options)
    witness = A.detach().sum() + (0 if delta is None else delta.detach().sum())
    if x.weight is not None:
        per_token = per_token * zeroed(x.weight, keep).detach()
    zero_outside = keep.is_floating_point() and method in ("reinforce", "gpg", "cispo")  # products of zeroed inputs
    loss = reduce_tokens(per_token, keep, agg, norm, n, zero_outside)
    return loss, witness + loss.detach()


def _policy_terms(method, lp, delta, A, n, low, high, dual_clip, cispo_cap, sapo_tau, gmpo_clip):
    """The loss of ``method`` per token, ``[B, T]``, or ``[B, 1]`` where it is constant along a row (GSPO, GMPO)."""
    neg_A = -A.detach()
    if method in ("reinforce", "gpg"):
        return neg_A * lp
    if method == "ppo":
        r = delta.exp()
        loss = torch.maximum(neg_A * r, neg_A * r.clamp(1 - low, 1 + high))
        if dual_clip is not None:
            loss = torch.where(neg_A > 0, torch.minimum(loss, neg_A * dual_clip), loss)
        return loss
    if method in ("gspo", "gspo_token"):
        log_s = delta.sum(-1, keepdim=True) / n.clamp(min=1)
        if method == "gspo_token":  # straight-through: the value of s_i, the gradient of pi_t / sg(pi_t)
            log_s = log_s.detach() + (delta - delta.detach())
        s = log_s.exp()
        return torch.maximum(neg_A * s, neg_A * s.clamp(1 - low, 1 + high))
    if method == "cispo":
        r = delta.detach().exp()
        w = r.clamp(max=cispo_cap) if cispo_cap is not None else r.clamp(1 - low, 1 + high)
        return lp * (w * neg_A)
    if method == "sapo":
        tau = torch.where(neg_A < 0, neg_A.new_tensor(sapo_tau[0]), neg_A.new_tensor(sapo_tau[1]))
        return torch.sigmoid(tau * (delta.exp() - 1)) * (4 * neg_A / tau)
    # gmpo: exp(mean_t of the sign-clipped log-ratio), times the row's mean advantage
    g_low, g_high = gmpo_clip
    sign = -torch.sign(neg_A)
    clipped = sign * torch.minimum(sign * delta, sign * delta.clamp(-g_low, g_high))
    mean_neg_A = neg_A if neg_A.shape[-1] == 1 else neg_A.sum(-1, keepdim=True) / n.clamp(min=1)
    return mean_neg_A * (clipped.sum(-1, keepdim=True) / n.clamp(min=1)).exp()


def policy_loss(
    method: str,
    log_prob,
    old_log_prob,
    advantage,
    mask,
    *,
    agg: str | None = None,
    norm: float | None = None,
    clip_epsilon=0.2,
    dual_clip: float | None = None,
    cispo_cap: float | None = None,
    sapo_tau=(1.0, 1.05),
    gmpo_clip=(0.4, 0.4),
    weight=None,
):
    r"""The policy losses trainers ship, batched: :func:`aggregate` of a per-token loss.

    With :math:`\ell = \log\pi_\theta`, :math:`r = e^{\ell - \ell_{\mathrm{old}}}`,
    :math:`\mathrm{clip}(x) = \min(\max(x, 1-\varepsilon_l), 1+\varepsilon_h)`:

    ``reinforce``, ``gpg``
        :math:`-A\,\ell` (verl ``gpg``; GPG changes the advantage, :func:`gpg_advantages`).
    ``ppo``
        :math:`-\min(rA, \mathrm{clip}(r)A)`; with ``dual_clip`` :math:`c`, for :math:`A < 0`
        :math:`\min(\cdot, -cA)` (verl ``vanilla``, TRL ``grpo``/``bnpo``/``dr_grpo``/``dapo``,
        OpenRLHF ``PolicyLoss``).
    ``gspo``
        :math:`-\min(s_iA, \mathrm{clip}(s_i)A)` on every token of row :math:`i`,
        :math:`s_i = \exp\overline{(\ell - \ell_{\mathrm{old}})}` (TRL
        ``importance_sampling_level="sequence"``).
    ``gspo_token``
        the same with the straight-through :math:`s_{it} = \mathrm{sg}(s_i)\,\pi_{it}/\mathrm{sg}(\pi_{it})` (verl ``gspo``).
    ``cispo``
        :math:`-\mathrm{sg}(\mathrm{clip}(r))\,A\,\ell` (verl ``cispo``); with ``cispo_cap``
        :math:`\kappa`, :math:`-\mathrm{sg}(\min(r, \kappa))\,A\,\ell` (TRL ``cispo``, whose
        ``epsilon_high`` is :math:`\kappa`).
    ``sapo``
        :math:`-\frac{4}{\tau}\,\sigma(\tau(r-1))\,A`, :math:`\tau = \tau_+` if :math:`A > 0`
        else :math:`\tau_-` (TRL ``sapo``).
    ``gmpo``
        per row, :math:`-\bar A_i \exp\overline{g(\Delta)}` with
        :math:`g(\Delta) = \mathrm{sgn}(A)\min(\mathrm{sgn}(A)\Delta,\ \mathrm{sgn}(A)\,\mathrm{clamp}(\Delta, -\delta_l, \delta_h))`,
        averaged over rows (verl ``geo_mean``).

    (:math:`\bar x` is the mean over a row's response tokens.)  Every
    gradient is :math:`-\kappa_{it}\,w_{it}\,A_{it}\,\nabla\ell_{it}` with
    :math:`w` from :func:`policy_weight` (derived in :mod:`derivations.losses`)
    and :math:`\kappa` from :func:`token_weights`.

    Parameters
    ----------
    method : str
        One of :data:`POLICY_LOSSES`.
    log_prob, old_log_prob : numpy array or torch tensor
        ``[B, T]``; differentiable in ``log_prob``.
    advantage : numpy array or torch tensor
        ``[B, T]``, or ``[B]`` (one per sequence, broadcast).
    mask : numpy array or torch tensor
        ``[B, T]`` 0/1 or boolean.
    agg : str, optional
        An :func:`aggregate` mode; default ``"token-mean"``, for GSPO
        ``"seq-mean-token-mean"`` (as verl forces).  GMPO is a sequence loss
        averaged over rows (verl ``geo_mean`` ignores the mode) and takes none.
    norm : float, optional
        :func:`aggregate`'s ``norm``.
    clip_epsilon : float or (float, float)
        :math:`\varepsilon` or :math:`(\varepsilon_l, \varepsilon_h)` (DAPO's clip-higher: ``(0.2, 0.28)``).
    dual_clip : float, optional
        Dual-clip constant :math:`c > 1` (verl ``clip_ratio_c``, OpenRLHF ``dual_clip``).
    cispo_cap : float, optional
        CISPO's absolute cap :math:`\kappa` (TRL); without it, the two-sided clip (verl).
    sapo_tau : (float, float)
        :math:`(\tau_+, \tau_-)`; TRL's defaults ``(1.0, 1.05)``.
    gmpo_clip : (float, float)
        :math:`(\delta_l, \delta_h)`, GMPO's clip range in log space (verl's clip ratios).
    weight : numpy array or torch tensor, optional
        ``[B, T]`` per-token sampler-correction weights (detached), multiplying
        the per-token loss before aggregation, as TRL's
        ``importance_sampling_ratio`` and verl's ``rollout_is_weights``.

    Returns
    -------
    A scalar of ``log_prob``'s kind, device and dtype.

    Notes
    -----
    Masked slots may hold anything (padding sentinels, ``-inf``, NaN): they
    reach neither the value nor the gradient.  When every input is finite
    everywhere and the mask is 0/1 (one sum and one synchronisation tell),
    padding is zeroed by a product with the mask; otherwise the loss is
    computed a second time with ``torch.where``, which also names an
    argument holding NaN or inf where the mask is 1.  ``reinforce`` and
    ``gpg`` never read ``old_log_prob`` (only its shape is checked).

    References
    ----------
    Schulman et al. (PPO) arXiv:1707.06347; Ye et al. (dual clip) AAAI 2020; Yu et al. (DAPO)
    arXiv:2503.14476; Zheng et al. (GSPO) arXiv:2507.18071; MiniMax (CISPO) arXiv:2506.13585;
    Gao et al. (SAPO) arXiv:2511.20347; Zhao et al. (GMPO) arXiv:2507.20673; Chu et al. (GPG) arXiv:2504.02546.

    Examples
    --------
    >>> import torch
    >>> from numeric import policy_loss
    >>> lp = torch.log(torch.tensor([[0.3, 0.6, 0.5]])).requires_grad_(True)
    >>> old = torch.log(torch.tensor([[0.2, 0.5, 0.5]]))
    >>> A, m = torch.tensor([1.0]), torch.tensor([[1, 1, 0]])
    >>> loss = policy_loss("ppo", lp, old, A, m, clip_epsilon=(0.2, 0.28))
    >>> round(loss.item(), 6), torch.autograd.grad(loss, lp)[0].round(decimals=6).tolist()
    (-1.24, [[-0.0, -0.6, 0.0]])
    """
    method = _method(method)
    if method == "gmpo" and agg is not None:
        raise ValueError("agg must be None for gmpo: it is a sequence loss averaged over rows")
    agg = agg or ("seq-mean-token-mean" if method in ("gspo", "gspo_token", "gmpo") else "token-mean")
    check_mode(agg, "agg")
    low, high = clip_bounds(clip_epsilon)
    if dual_clip is not None:
        if method != "ppo":
            raise ValueError(f"dual_clip is a PPO option, not {method!r}'s")
        dual_clip = require_real("dual_clip", dual_clip)
        if not dual_clip > 1:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    if cispo_cap is not None:
        cispo_cap = require_nonnegative("cispo_cap", cispo_cap)
    tau = tuple(require_real(f"sapo_tau[{i}]", x) for i, x in enumerate(_pair("sapo_tau", sapo_tau)))
    if not min(tau) > 0:
        raise ValueError(f"sapo_tau must be positive, got {tau}")
    gclip = tuple(require_nonnegative(f"gmpo_clip[{i}]", x) for i, x in enumerate(_pair("gmpo_clip", gmpo_clip)))
    x = _policy_inputs(method, log_prob, old_log_prob, advantage, mask, weight)
    options = (low, high, dual_clip, cispo_cap, tau, gclip)
    keep, not_01 = _float_mask(x.mask, x.log_prob)
    loss, witness = _policy_loss(method, x, keep, agg, norm, options)
    if (not_01 + 0 * witness).item() != 0:  # a mask not 0/1, or NaN or inf somewhere: the careful way
        keep = as_mask("mask", x.mask, "log_prob", x.log_prob)
        loss, witness = _policy_loss(method, x, keep, agg, norm, options)
        if not bool(torch.isfinite(witness)):
            require_finite_where(keep, log_prob=x.log_prob, old_log_prob=x.old_log_prob, advantage=x.advantage, weight=x.weight)
    return like(x.kind, loss.to(result_dtype(log_prob)))


def _pair(name: str, value) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a pair of numbers, got {value!r}")
    return tuple(value)


@cache
def _weight_fn(method: str):
    w = derived.weight(method)
    syms = (derived.r, derived.A, derived.eps_l, derived.eps_h, derived.c, derived.kappa, derived.tau)
    return sp.lambdify(syms, w, modules=[{"Min": np.minimum, "Max": np.maximum}, "numpy"])


def policy_weight(
    method: str,
    log_prob,
    old_log_prob,
    advantage,
    mask,
    *,
    clip_epsilon=0.2,
    dual_clip: float | None = None,
    cispo_cap: float | None = None,
    sapo_tau=(1.0, 1.05),
    gmpo_clip=(0.4, 0.4),
):
    r"""The derived gradient weight :math:`w_{it}` of ``method``: :math:`\partial\,\mathrm{loss}/\partial\ell_{it} = -\kappa_{it} w_{it} A_{it}`.

    The weights are :func:`derivations.losses.weight` lambdified, evaluated at
    the token ratio :math:`r_{it}` (token methods), at the sequence ratio
    :math:`s_i` (GSPO, both forms, PPO's weight there), or at GMPO's clipped
    geometric mean times the token's live indicator.  0 on masked tokens.

    Examples
    --------
    >>> import torch
    >>> from numeric import policy_weight
    >>> lp = torch.log(torch.tensor([[0.3, 0.6]])); old = torch.log(torch.tensor([[0.2, 0.5]]))
    >>> policy_weight("ppo", lp, old, torch.tensor([1.0]), torch.ones(1, 2), clip_epsilon=(0.2, 0.28)).tolist()
    [[0.0, 1.2]]
    """
    method = _method(method)
    low, high = clip_bounds(clip_epsilon)
    x = _policy_inputs("ppo", log_prob, old_log_prob, advantage, mask, None)
    t, keep, _ = masked_inputs(x.mask, log_prob=x.log_prob, old_log_prob=x.old_log_prob, advantage=x.advantage.expand_as(x.log_prob))
    kind, dtype, m = x.kind, t["log_prob"].dtype, keep.double()
    delta = (t["log_prob"] - t["old_log_prob"]).detach().double()
    A = t["advantage"].detach().double()
    tau_p, tau_n = _pair("sapo_tau", sapo_tau)
    args = dict(eps_l=low, eps_h=high, c=dual_clip or 0.0, kappa=cispo_cap or 0.0)
    if method in ("gspo", "gspo_token"):
        w = _evaluate("ppo", _row_mean(delta, m).exp().expand_as(A), A, **args)
    elif method == "gmpo":
        g_low, g_high = _pair("gmpo_clip", gmpo_clip)
        sign = torch.sign(A)
        clipped = sign * torch.minimum(sign * delta, sign * delta.clamp(-g_low, g_high))
        live = torch.where(A > 0, delta <= g_high, delta >= -g_low).double()
        w = _row_mean(clipped, m).exp() * live
    else:
        name = {"ppo": "dual_clip" if dual_clip is not None else "ppo", "cispo": "cispo_cap" if cispo_cap is not None else "cispo"}.get(method, method)
        tau = torch.where(A > 0, A.new_tensor(tau_p), A.new_tensor(tau_n))
        w = _evaluate(name, delta.exp(), A, tau=tau, **args)
    return like(kind, (w * m).to(dtype).to(result_dtype(log_prob)))


def _row_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Masked mean over the time dimension, ``[B, 1]``; 0 for an all-masked row."""
    return (x * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)


def _evaluate(name, r, A, eps_l, eps_h, c, kappa, tau=1.0):
    fn = _weight_fn(name)
    out = fn(r.numpy(), A.numpy(), eps_l, eps_h, c, kappa, tau.numpy() if isinstance(tau, torch.Tensor) else tau)
    return torch.as_tensor(np.broadcast_to(np.asarray(out, dtype=np.float64), r.shape).copy())
