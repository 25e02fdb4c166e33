r"""Policy losses: :func:`policy_loss` and its derived gradient weight :func:`policy_weight`.

The methods are the registry :data:`derivations.methods.METHODS`; this module
holds their torch per-token forms (:func:`token_terms`), each written so that
both branches of every ``where`` are finite: a clipped or capped token's
gradient is exactly 0 however large its ratio, and no NaN reaches a gradient
from finite inputs in any dtype.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
import sympy as sp
import torch

from derivations import losses as derived
from derivations import methods
from derivations.methods import METHODS

from .._types import Array, ArrayT
from .._validate import (
    as_mask,
    compute_dtype,
    like,
    masked_inputs,
    method_options,
    raw_tensor,
    require_finite_where,
    require_positive,
    require_same_device,
    result_dtype,
    to_tensor,
)
from .aggregation import check_mode, reduce_tokens, zeroed

__all__ = ["POLICY_LOSSES", "policy_loss", "policy_weight"]


POLICY_LOSSES = tuple(METHODS)
"""Methods of :func:`policy_loss`: the names of :data:`derivations.methods.METHODS`."""

SEQUENCE_LEVEL = tuple(name for name, m in METHODS.items() if m.sequence_level)
"""The methods whose loss is a function of a row's tokens together (GSPO, GMPO)."""

_NO_RATIO = ("reinforce", "gpg")  # methods that never read old_log_prob


class _Inputs(NamedTuple):
    """The tensors of a policy loss, shapes checked, on ``log_prob``'s device in its compute dtype."""

    log_prob: torch.Tensor
    old_log_prob: torch.Tensor | None  # None where the method never reads it (REINFORCE, GPG)
    advantages: torch.Tensor  # [B, 1] or [B, T]
    weight: torch.Tensor | None
    mask: torch.Tensor  # as given, on the device
    kind: str


def _policy_inputs(method, log_prob, old_log_prob, advantages, mask, weight) -> _Inputs:
    lp, kind = to_tensor("log_prob", log_prob)
    if lp.ndim != 2:
        raise ValueError(f"log_prob must have shape [B, T], got {tuple(lp.shape)}")
    if mask is None:
        raise ValueError("mask is required: a [B, T] 0/1 or boolean response mask")
    raws = {"log_prob": lp}
    for name, value in (("old_log_prob", old_log_prob), ("advantages", advantages), ("mask", mask), ("weight", weight)):
        if value is not None:
            raws[name], k = raw_tensor(name, value)
            if k == "numpy":
                raws.pop(name)
    require_same_device(**raws)
    lp = lp.to(compute_dtype(lp.dtype))
    old = _aligned("old_log_prob", old_log_prob, lp)
    m, _ = raw_tensor("mask", mask)
    if m.shape != lp.shape:
        raise ValueError(f"mask must have the shape of log_prob {tuple(lp.shape)}, got {tuple(m.shape)}")
    A, _ = to_tensor("advantages", advantages)
    A = A.to(device=lp.device, dtype=lp.dtype)
    if A.shape == lp.shape[:1]:
        A = A[:, None]
    elif A.shape != lp.shape:
        raise ValueError(f"advantages must have shape [B] = {tuple(lp.shape[:1])} or the shape of log_prob {tuple(lp.shape)}, got {tuple(A.shape)}")
    m = m.to(lp.device)
    w = None
    if weight is not None:
        w = _aligned("weight", weight, lp)
        if bool(((w < 0) & (m != 0) & torch.isfinite(w)).any()):  # padding may hold anything; inf and NaN are named below
            raise ValueError("weight must be >= 0 where mask is 1 (sampler-correction weights are ratios of probabilities)")
    return _Inputs(lp, None if method in _NO_RATIO else old, A, w, m, kind)


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


def _policy_loss(method, x: _Inputs, keep: torch.Tensor, agg, norm, options, clamp) -> tuple[torch.Tensor, torch.Tensor]:
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
    if delta is not None and clamp is not None:
        delta = delta.clamp(-clamp, clamp)
    A = x.advantages if x.advantages.shape[-1] == 1 else zeroed(x.advantages, keep)
    per_token = token_terms(method, lp, delta, A, n, options)
    witness = A.detach().sum() + (0 if delta is None else delta.detach().sum())
    if x.weight is not None:
        per_token = per_token * zeroed(x.weight, keep).detach()
    zero_outside = keep.is_floating_point() and method in ("reinforce", "gpg", "cispo", "is")  # products of zeroed inputs
    loss = reduce_tokens(per_token, keep, agg, norm, n, zero_outside)
    return loss, witness + loss.detach()


def _ppo_terms(neg_A: torch.Tensor, log_ratio: torch.Tensor, low: float, high: float, dual_clip: float | None) -> torch.Tensor:
    r"""PPO's per-token loss :math:`-\min(rA, \mathrm{clip}(r)A)` (dual clip: :math:`\le -cA` for :math:`A < 0`), overflow-safe.

    A token is *live* where the loss is :math:`-rA` (:math:`A > 0`, :math:`r \le 1+\varepsilon_h`;
    :math:`A < 0`, :math:`1-\varepsilon_l \le r` (:math:`\le c`)); elsewhere the loss is
    the constant :math:`-A` times the bound, with no path to :math:`\ell`.  The
    ratio is exponentiated only where the token is live, so a clipped token with
    :math:`r = \infty` has gradient exactly 0 (``0 * exp(inf)`` would be NaN).
    The live sets are closed, as derived (:mod:`derivations.gradient_weights`).
    """
    with torch.no_grad():
        r = log_ratio.exp()
        positive = neg_A < 0
        live = torch.where(positive, r <= 1 + high, r >= 1 - low)
        bound = torch.where(positive, torch.full_like(r, 1 + high), torch.full_like(r, 1 - low))
        if dual_clip is not None:
            beyond = (neg_A > 0) & (r > dual_clip)
            live = live & ~beyond
            bound = torch.where(beyond, torch.full_like(r, dual_clip), bound)
        live = live & (neg_A != 0)
    unclipped = neg_A * torch.where(live, log_ratio, torch.zeros_like(log_ratio)).exp()
    return torch.where(live, unclipped, neg_A * bound)


def token_terms(method: str, lp, delta, A, n, options: dict) -> torch.Tensor:
    r"""The torch per-token loss of ``method`` (:data:`derivations.methods.METHODS`), ``[B, T]``, or ``[B, 1]`` where constant along a row.

    ``lp`` is :math:`\ell`, ``delta`` the log-ratio :math:`\ell - \ell_{\mathrm{old}}`
    (with ``old`` detached), ``A`` the advantages (detached here), ``n`` the
    rows' token counts (sequence-level methods), ``options`` from
    :func:`numeric._validate.method_options`.  The test suite checks every
    method's values and gradients against the registry's SymPy formula.
    """
    neg_A = -A.detach()
    if method in ("reinforce", "gpg"):
        return neg_A * lp
    if method == "ppo":
        return _ppo_terms(neg_A, delta, options["eps_low"], options["eps_high"], options["dual_clip"])
    if method in ("gspo", "gspo_token"):
        log_s = delta.sum(-1, keepdim=True) / n.clamp(min=1)
        if method == "gspo_token":  # straight-through: the value of s_i, the gradient of pi_t / sg(pi_t)
            log_s = log_s.detach() + (delta - delta.detach())
        return _ppo_terms(neg_A, log_s, options["eps_low"], options["eps_high"], None)
    if method in ("cispo", "is"):
        r = delta.detach().exp()
        if method == "cispo":
            low, high = options["eps_low"], options["eps_high"]
            r = r.clamp(max=1 + high) if low is None else r.clamp(1 - low, 1 + high)
        return lp * (r * neg_A)
    if method == "sapo":
        tau_pos, tau_neg = options["sapo_tau"]
        tau = torch.where(neg_A < 0, neg_A.new_tensor(tau_pos), neg_A.new_tensor(tau_neg))
        # beyond tau (r - 1) = 200 the sigmoid is 1 in every float format: stop there, so exp never overflows
        r = delta.clamp(max=torch.log1p(200 / tau)).exp()
        return torch.sigmoid(tau * (r - 1)) * (4 * neg_A / tau)
    # gmpo: exp(mean_t of the sign-clipped log-ratio), times the row's mean advantage
    g_low, g_high = options["gmpo_clip"]
    sign = -torch.sign(neg_A)
    clipped = sign * torch.minimum(sign * delta, sign * delta.clamp(-g_low, g_high))
    mean_neg_A = neg_A if neg_A.shape[-1] == 1 else neg_A.sum(-1, keepdim=True) / n.clamp(min=1)
    return mean_neg_A * (clipped.sum(-1, keepdim=True) / n.clamp(min=1)).exp()


def _method(method: str) -> str:
    if method not in POLICY_LOSSES:
        raise ValueError(f"method must be one of {POLICY_LOSSES}, got {method!r}")
    return method


def _clamp(value) -> float | None:
    return None if value is None else require_positive("log_ratio_clamp", value)


def policy_loss(
    method: str,
    log_prob: ArrayT,
    old_log_prob: Array,
    advantages: Array,
    mask: Array,
    *,
    agg: str | None = None,
    norm: float | None = None,
    weight=None,
    log_ratio_clamp: float | None = None,
    **params,
) -> ArrayT:
    r"""The policy losses trainers ship, batched: :func:`aggregate` of a per-token loss.

    With :math:`\ell = \log\pi_\theta`, :math:`r = e^{\ell - \ell_{\mathrm{old}}}`,
    :math:`\mathrm{clip}(x) = \min(\max(x, 1-\varepsilon_l), 1+\varepsilon_h)`
    (each method is an entry of :data:`derivations.methods.METHODS`, whose
    formula the tests check this code against):

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
        :math:`-\mathrm{sg}(\mathrm{clip}(r))\,A\,\ell` (MiniMax-M1 Eq. 4-5, verl ``cispo``); with
        ``eps_low=None`` the one-sided cap :math:`-\mathrm{sg}(\min(r, 1+\varepsilon_h))\,A\,\ell`
        (TRL ``cispo``, whose absolute cap ``epsilon_high`` is :math:`1 + \varepsilon_h`).
    ``sapo``
        :math:`-\frac{4}{\tau}\,\sigma(\tau(r-1))\,A`, :math:`\tau = \tau_+` if :math:`A > 0`
        else :math:`\tau_-` (TRL ``sapo``).
    ``gmpo``
        per row, :math:`-\bar A_i \exp\overline{g(\Delta)}` with
        :math:`g(\Delta) = \mathrm{sgn}(A)\min(\mathrm{sgn}(A)\Delta,\ \mathrm{sgn}(A)\,\mathrm{clamp}(\Delta, -\delta_l, \delta_h))`,
        averaged over rows (verl ``geo_mean``).
    ``is``
        :math:`-\mathrm{sg}(r)\,A\,\ell`, token importance sampling (CISPO without a clip).

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
    advantages : numpy array or torch tensor
        ``[B, T]``, or ``[B]`` (one per sequence, broadcast).
    mask : numpy array or torch tensor
        ``[B, T]`` 0/1 or boolean; required (``None`` is refused).
    agg : str, optional
        An :func:`aggregate` mode; default the method's (``"token-mean"``, for GSPO
        ``"seq-mean-token-mean"``, as verl forces).  GMPO is a sequence loss
        averaged over rows (verl ``geo_mean`` ignores the mode) and takes none.
    norm : float, optional
        :func:`aggregate`'s ``norm``.
    weight : numpy array or torch tensor, optional
        ``[B, T]`` non-negative per-token sampler-correction weights (detached),
        multiplying the per-token loss before aggregation, as TRL's
        ``importance_sampling_ratio`` and verl's ``rollout_is_weights``.
    log_ratio_clamp : float, optional
        Clamp :math:`\ell - \ell_{\mathrm{old}}` to :math:`[-v, v]` before anything
        else, as verl's ``vanilla`` and OpenRLHF's ``PolicyLoss`` do with
        :math:`v = 20`.  Off by default: without it the loss is exact, and a
        clipped token's gradient is exactly 0 whatever its ratio.
    eps_low, eps_high : float
        PPO, GSPO and CISPO: :math:`\varepsilon_l \in [0, 1]`, :math:`\varepsilon_h \ge 0`
        (``inf``: no upper clip); default 0.2 each (DAPO's clip-higher: 0.2, 0.28).
        CISPO's ``eps_low=None`` is the one-sided cap.
    dual_clip : float, optional
        PPO only: the dual-clip constant :math:`c > 1` (verl ``clip_ratio_c``, OpenRLHF ``dual_clip``).
    sapo_tau : (float, float)
        SAPO only: :math:`(\tau_+, \tau_-)`, positive; TRL's defaults ``(1.0, 1.05)``.
    gmpo_clip : (float, float)
        GMPO only: :math:`(\delta_l, \delta_h)`, its clip range in log space (verl's clip ratios).

    A parameter the method does not take is refused by name.

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

    A ratio that overflows (a log-ratio above 88.7 in fp32, 709.8 in fp64;
    fp16 and bf16 inputs are computed in fp32) or underflows to 0 is handled:
    a clipped or capped token keeps a finite loss and a zero gradient; the
    loss is infinite only where its exact value exceeds the dtype (unclipped
    PPO with :math:`A < 0`, token IS, GMPO with :math:`A < 0`).

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
    >>> loss = policy_loss("ppo", lp, old, A, m, eps_low=0.2, eps_high=0.28)
    >>> round(loss.item(), 6), torch.autograd.grad(loss, lp)[0].round(decimals=6).tolist()
    (-1.24, [[-0.0, -0.6, 0.0]])
    """
    method = _method(method)
    options = method_options(method, params)
    if METHODS[method].aggregation is None and agg is not None:
        raise ValueError(f"agg must be None for {method}: it is a sequence loss averaged over rows")
    agg = check_mode(agg or METHODS[method].aggregation or "seq-mean-token-mean", "agg")
    clamp = _clamp(log_ratio_clamp)
    x = _policy_inputs(method, log_prob, old_log_prob, advantages, mask, weight)
    keep, not_01 = _float_mask(x.mask, x.log_prob)
    loss, witness = _policy_loss(method, x, keep, agg, norm, options, clamp)
    if (not_01 + 0 * witness).item() != 0:  # a mask not 0/1, or NaN or inf somewhere: the careful way
        keep = as_mask("mask", x.mask, "log_prob", x.log_prob)
        loss, witness = _policy_loss(method, x, keep, agg, norm, options, clamp)
        if not bool(torch.isfinite(witness)):
            require_finite_where(keep, log_prob=x.log_prob, old_log_prob=x.old_log_prob, advantages=x.advantages, weight=x.weight)
    return like(x.kind, loss.to(result_dtype(log_prob)))


def policy_weight(method: str, log_prob: ArrayT, old_log_prob: Array, advantages: Array, mask: Array, *, log_ratio_clamp: float | None = None, **params: float | tuple[float, float] | None) -> ArrayT:
    r"""The derived gradient weight :math:`w_{it}` of ``method``: :math:`\partial\,\mathrm{loss}/\partial\ell_{it} = -\kappa_{it} w_{it} A_{it}`.

    The weights are :func:`derivations.losses.weight` lambdified
    (:func:`numeric.gradient_weights.derived_weight`), evaluated at the token
    ratio :math:`r_{it}` (token methods, the form chosen by the options, as
    :func:`derivations.methods.form`), at the sequence ratio :math:`s_i` (GSPO,
    both forms, PPO's weight there), or at GMPO's clipped geometric mean times
    the token's live indicator.  0 on masked tokens.  Takes the parameters of
    :func:`policy_loss`, checked the same way.  With ``log_ratio_clamp`` a
    token whose log-ratio is clamped has weight 0 (the clamp stops its gradient).

    Examples
    --------
    >>> import torch
    >>> from numeric import policy_weight
    >>> lp = torch.log(torch.tensor([[0.3, 0.6]])); old = torch.log(torch.tensor([[0.2, 0.5]]))
    >>> policy_weight("ppo", lp, old, torch.tensor([1.0]), torch.ones(1, 2), eps_low=0.2, eps_high=0.28).tolist()
    [[0.0, 1.2]]
    """
    method = _method(method)
    options = method_options(method, params)
    clamp = _clamp(log_ratio_clamp)
    x = _policy_inputs("ppo", log_prob, old_log_prob, advantages, mask, None)
    t, keep, _ = masked_inputs(x.mask, log_prob=x.log_prob, old_log_prob=x.old_log_prob, advantages=x.advantages.expand_as(x.log_prob))
    kind, dtype, m = x.kind, t["log_prob"].dtype, keep.double()
    delta = (t["log_prob"] - t["old_log_prob"]).detach().double()
    A = t["advantages"].detach().double()
    inside = torch.ones_like(delta) if clamp is None else (delta.abs() <= clamp).double()
    if clamp is not None:
        delta = delta.clamp(-clamp, clamp)
    if method in ("gspo", "gspo_token"):
        w = derived_weight("ppo", _row_mean(delta, m).exp().expand_as(A), A, options)
    elif method == "gmpo":
        g_low, g_high = options["gmpo_clip"]
        sign = torch.sign(A)
        clipped = sign * torch.minimum(sign * delta, sign * delta.clamp(-g_low, g_high))
        live = torch.where(A > 0, delta <= g_high, delta >= -g_low).double()
        w = _row_mean(clipped, m).exp() * live
    else:
        w = derived_weight(methods.form(method, **params), delta.exp(), A, options)
    if method not in ("reinforce", "gpg", "cispo", "is"):  # their gradient does not pass through the ratio
        w = w * inside
    return like(kind, (w * m).to(dtype).to(result_dtype(log_prob)))


def _row_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Masked mean over the time dimension, ``[B, 1]``; 0 for an all-masked row."""
    return (x * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)


@cache
def _weight_fn(form_name: str):
    syms = (methods.r, methods.A, methods.eps_l, methods.eps_h, methods.c, methods.tau)
    return sp.lambdify(syms, derived.weight(form_name), modules=[{"Min": np.minimum, "Max": np.maximum}, "numpy"])


def derived_weight(form_name: str, r: torch.Tensor, A: torch.Tensor, options: dict) -> torch.Tensor:
    r"""The derived weight :math:`w(r, A)` of a per-token form (:data:`derivations.methods.FORMS`), float64, on ``r``'s device.

    The one lambdified table of :func:`derivations.losses.weight`: :func:`policy_weight`
    and :func:`numeric.gradient_weight` both evaluate it.  ``options`` are the
    checked parameters (:func:`numeric._validate.method_options`).  SAPO's
    weight :math:`4\sigma(1-\sigma)r` is below :math:`4r e^{-700}`, 0 in fp64,
    where :math:`\tau(r - 1) > 700`, and is written 0 there (its formula would
    divide two overflowed exponentials).

    Examples
    --------
    >>> import torch
    >>> from numeric.losses.policy import derived_weight
    >>> r, A = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    >>> derived_weight("cispo_cap", r, A, {"eps_low": None, "eps_high": 0.28}).tolist()
    [0.5, 1.0, 1.28]
    """
    r64, A64 = r.detach().double().cpu(), A.detach().double().cpu()
    low = options.get("eps_low")
    tau: float | np.ndarray = 1.0
    if "sapo_tau" in options:
        tau = torch.where(A64 > 0, A64.new_tensor(options["sapo_tau"][0]), A64.new_tensor(options["sapo_tau"][1])).numpy()
    args = (0.0 if low is None else low, options.get("eps_high", 0.0), options.get("dual_clip") or 0.0, tau)
    with np.errstate(over="ignore", invalid="ignore"):
        out = _weight_fn(form_name)(r64.numpy(), A64.numpy(), *args)
    w = torch.as_tensor(np.broadcast_to(np.asarray(out, dtype=np.float64), r64.shape).copy())
    if form_name == "sapo":
        w = torch.where(torch.as_tensor(tau) * (r64 - 1) > 700, 0.0, w)
    return w.to(r.device)
