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
from .aggregation import prompt_groups, reduce_tokens, resolve, zeroed
from .policy_terms import token_terms

__all__ = ["POLICY_LOSSES", "penalty_gradient", "policy_loss", "policy_weight"]


POLICY_LOSSES = tuple(METHODS)
"""Methods of :func:`policy_loss`: the names of :data:`derivations.methods.METHODS`."""

SEQUENCE_LEVEL = tuple(name for name, m in METHODS.items() if m.sequence_level)
"""The methods whose loss is a function of a row's tokens together (GSPO, GMPO)."""

_NO_RATIO = ("reinforce", "gpg")  # methods that never read old_log_prob
_SELECTING = ("clip_cov", "kl_cov", "top_entropy", "m2po")  # methods that treat the caller's selected tokens differently
_PRODUCTS = ("reinforce", "gpg", "cispo", "is", "dro", "dppo_tv", "dppo_kl", "icepop", "rollout_is", "seq_mask_tis")
"""Methods whose per-token loss is a product of zeroed inputs: 0 outside a float mask already."""


class _Inputs(NamedTuple):
    """The tensors of a policy loss, shapes checked, on ``log_prob``'s device in its compute dtype."""

    log_prob: torch.Tensor
    old_log_prob: torch.Tensor | None  # None where the method never reads it (REINFORCE, GPG)
    advantages: torch.Tensor  # [B, 1] or [B, T]
    weight: torch.Tensor | None
    mask: torch.Tensor  # as given, on the device
    kind: str
    selected: torch.Tensor | None  # boolean [B, T] (Clip-Cov, KL-Cov), else None


def _selection(method: str, selected, like_t: torch.Tensor) -> torch.Tensor | None:
    """The caller's selected tokens as a boolean ``[B, T]`` tensor on ``like_t``'s device; required by Clip-Cov and KL-Cov, refused elsewhere."""
    if method not in _SELECTING:
        if selected is not None:
            raise ValueError(f"selected is a parameter of {_SELECTING} only (the tokens they treat apart), not of {method!r}")
        return None
    if selected is None:
        raise ValueError(f"selected is required for {method!r}: a [B, T] boolean mask of the selected tokens "
                         "(numeric.losses.selection computes verl's selection, with a seed)")
    t, _ = raw_tensor("selected", selected)
    if t.shape != like_t.shape:
        raise ValueError(f"selected must have the shape of log_prob {tuple(like_t.shape)}, got {tuple(t.shape)}")
    if t.dtype != torch.bool:
        if t.is_complex() or not bool(((t == 0) | (t == 1)).all()):
            raise ValueError("selected must hold only 0 and 1 (or be boolean)")
        t = t != 0
    return t.to(like_t.device)


def _policy_inputs(method, log_prob, old_log_prob, advantages, mask, weight, selected=None) -> _Inputs:
    lp, kind = to_tensor("log_prob", log_prob)
    if lp.ndim != 2:
        raise ValueError(f"log_prob must have shape [B, T], got {tuple(lp.shape)}")
    if mask is None:
        raise ValueError("mask is required: a [B, T] 0/1 or boolean response mask")
    raws = {"log_prob": lp}
    for name, value in (("old_log_prob", old_log_prob), ("advantages", advantages), ("mask", mask), ("weight", weight), ("selected", selected)):
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
    return _Inputs(lp, None if method in _NO_RATIO else old, A, w, m, kind, _selection(method, selected, lp))


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


def _policy_loss(method, x: _Inputs, keep: torch.Tensor, agg, norm, options, clamp, rows: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, witness)`` with padding zeroed by ``keep``.

    The witness is finite exactly when every input the loss reads is finite
    wherever ``keep`` zeroes it by a product (everywhere, for a float
    ``keep``; in the kept slots, up to overflow, for a boolean one): each
    input reaches the loss or the witness through a sum or a product, and
    ``0 * inf`` is NaN.
    """
    if method == "m2po":  # AReaL replaces the mask: a dropped token leaves the denominators
        assert x.selected is not None
        keep = keep * ~x.selected if keep.is_floating_point() else keep & ~x.selected
    n = keep.sum(-1, keepdim=True) if method in SEQUENCE_LEVEL or agg == "seq-mean-token-mean" else None
    lp = zeroed(x.log_prob, keep)
    old = delta = None
    if x.old_log_prob is not None:
        old, delta = zeroed(x.old_log_prob.detach(), keep), zeroed(x.log_prob - x.old_log_prob.detach(), keep)
    if delta is not None and clamp is not None:
        delta = delta.clamp(-clamp, clamp)
    A = x.advantages if x.advantages.shape[-1] == 1 else zeroed(x.advantages, keep)
    per_token = token_terms(method, lp, delta, A, n, options, x.selected, old)
    witness = A.detach().sum() + (0 if delta is None else delta.detach().sum())
    if x.weight is not None:
        per_token = per_token * zeroed(x.weight, keep).detach()
    zero_outside = keep.is_floating_point() and method in _PRODUCTS
    loss = reduce_tokens(per_token, keep, agg, norm, n, zero_outside, **rows)
    return loss, witness + loss.detach()


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
    weight: Array | None = None,
    selected: Array | None = None,
    log_ratio_clamp: float | None = None,
    count_eps: float = 0.0,
    empty_rows: str = "count",
    convention: str | None = None,
    groups: Array | None = None,
    **params: float | tuple[float, float] | None,
) -> ArrayT:
    r"""The policy losses trainers ship, batched: :func:`aggregate` of a per-token loss.

    With :math:`\ell = \log\pi_\theta`, :math:`r = e^{\ell - \ell_{\mathrm{old}}}`,
    :math:`\mathrm{clip}(x) = \min(\max(x, 1-\varepsilon_l), 1+\varepsilon_h)`
    (each method is an entry of :data:`derivations.methods.METHODS`, whose
    formula the tests check this code against):

    ``reinforce``, ``gpg``
        :math:`-A\,\ell` (verl ``gpg``; GPG changes the advantage, :func:`gpg_advantages`).
    ``ppo``
        :math:`-\min(rA, \mathrm{clip}(r)A)`; with ``dual_clip`` :math:`C_d`, for :math:`A < 0`
        :math:`\min(\cdot, -cA)` (verl ``vanilla``, TRL ``grpo``/``bnpo``/``dr_grpo``/``dapo``,
        OpenRLHF ``PolicyLoss``).
    ``gspo``
        :math:`-\min(\tilde r_iA, \mathrm{clip}(\tilde r_i)A)` on every token of row :math:`i`,
        :math:`\tilde r_i = \exp\overline{(\ell - \ell_{\mathrm{old}})}` (TRL
        ``importance_sampling_level="sequence"``).
    ``gspo_token``
        the same with the straight-through :math:`\tilde r_{it} = \mathrm{sg}(\tilde r_i)\,\pi_{it}/\mathrm{sg}(\pi_{it})` (verl ``gspo``).
    ``cispo``
        :math:`-\mathrm{sg}(\mathrm{clip}(r))\,A\,\ell` (MiniMax-M1 Eq. 4-5, verl ``cispo``); with
        ``eps_low=None`` the one-sided cap :math:`-\mathrm{sg}(\min(r, 1+\varepsilon_h))\,A\,\ell`
        (TRL ``cispo``, whose absolute cap ``epsilon_high`` is :math:`1 + \varepsilon_h`).
    ``cispo_seq``
        CISPO with the row's ratio :math:`\tilde r_i` in place of :math:`r`: :math:`-\mathrm{sg}(\mathrm{clip}(\tilde r_i))\,A\,\ell`
        (TRL ``cispo`` at ``importance_sampling_level="sequence"``, with ``eps_low=None``).
    ``sapo``
        :math:`-\frac{4}{\tau}\,\operatorname{sigmoid}(\tau(r-1))\,A`, :math:`\tau = \tau_+` if :math:`A > 0`
        else :math:`\tau_-` (verl and TRL ``sapo``).
    ``sapo_seq``
        SAPO at the row's ratio :math:`\tilde r_i`, one value per row (TRL ``sapo`` at ``importance_sampling_level="sequence"``).
    ``vespo``
        :math:`-\mathrm{sg}(\phi(W_i))\,A\,\ell` with the product of the row's ratios
        :math:`W_i = \prod_t r_{it}` and the Gamma weight :math:`\phi(W) = W^k e^{\zeta(1 - W)}`,
        :math:`(k, \zeta)` the positive side's if :math:`A \ge 0` (TRL ``vespo``).
    ``clip_cov``
        PPO's loss, and 0 on the ``selected`` tokens (verl ``clip_cov``; its selection is
        :func:`~numeric.losses.selection.clip_cov_selection`).
    ``kl_cov``
        :math:`-rA`, plus :math:`\beta\,|\ell - \ell_{\mathrm{old}}|` on the ``selected`` tokens
        (verl ``kl_cov``; :func:`~numeric.losses.selection.kl_cov_selection`).
    ``gmpo``
        per row, :math:`-\bar A_i \exp\overline{g(\log r)}` with
        :math:`g(\log r) = \mathrm{sgn}(A)\min(\mathrm{sgn}(A)\log r,\ \mathrm{sgn}(A)\,\mathrm{clamp}(\log r, -\tilde\varepsilon_l, \tilde\varepsilon_h))`,
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
    log_prob : numpy array or torch tensor
        ``[B, T]`` :math:`\log\pi_\theta` of each token; the loss is differentiable in it.
    old_log_prob : numpy array or torch tensor
        ``[B, T]`` :math:`\log\pi_{\mathrm{old}}` of each token (detached).
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
    count_eps : float
        :func:`aggregate`'s constant added to a row's length in seq-mean-token-mean
        (verl's and OpenRLHF's ``n_i + 1e-8``).
    empty_rows : str
        :func:`aggregate`'s ``"count"`` or ``"exclude"``: whether the seq-mean modes
        count a row with no token (verl and OpenRLHF exclude fully masked sequences).
    convention : str, optional
        :func:`aggregate`'s: ``agg`` read as a trainer's name at a commit
        (``agg="seq-mean-token-sum-norm", convention="verl@1dda039"``).
    groups : numpy array or torch tensor, optional
        :func:`aggregate`'s: the prompt of each row, ``[B]`` integers, for ``prompt-mean``.
    weight : numpy array or torch tensor, optional
        ``[B, T]`` non-negative per-token sampler-correction weights (detached),
        multiplying the per-token loss before aggregation, as TRL's
        ``importance_sampling_ratio`` and verl's ``rollout_is_weights``.
    selected : numpy array or torch tensor, optional
        Clip-Cov and KL-Cov only, and required there: ``[B, T]`` boolean (or 0/1)
        mask of the tokens the method treats apart.  Trainers draw it from the
        whole batch (a covariance rank, a random subset), so it is the caller's
        argument; :mod:`numeric.losses.selection` computes verl's, with a seed.
    log_ratio_clamp : float, optional
        Clamp :math:`\ell - \ell_{\mathrm{old}}` to :math:`[-v, v]` before anything
        else, as verl's ``vanilla`` and OpenRLHF's ``PolicyLoss`` do with
        :math:`v = 20`.  Off by default: without it the loss is exact, and a
        clipped token's gradient is exactly 0 whatever its ratio.
    eps_low : float or None
        PPO, GSPO and CISPO: the clip's low side :math:`\varepsilon_l \in [0, 1]`,
        default 0.2; CISPO's ``eps_low=None`` is the one-sided cap.
    eps_high : float
        PPO, GSPO and CISPO: the clip's high side :math:`\varepsilon_h \ge 0`
        (``inf``: no upper clip), default 0.2 (DAPO's clip-higher: 0.28).
    dual_clip : float, optional
        PPO only: the dual-clip constant :math:`C_d > 1` (verl ``clip_ratio_c``, OpenRLHF ``dual_clip``).
    sapo_tau : (float, float)
        SAPO only: :math:`(\tau_+, \tau_-)`, positive; TRL's defaults ``(1.0, 1.05)``.
    gmpo_clip : (float, float)
        GMPO only: :math:`(\tilde\varepsilon_l, \tilde\varepsilon_h)`, its clip range in log space (verl's clip ratios).
    vespo_k : (float, float)
        VESPO only: the Gamma shapes :math:`(k_+, k_-)` for :math:`A \ge 0` and :math:`A < 0`,
        positive; TRL's default ``(2.0, 3.0)``.
    vespo_lambda : (float, float)
        VESPO only: the Gamma rates :math:`(\zeta_+, \zeta_-)` (TRL's :math:`\lambda`),
        positive; TRL's default ``(3.0, 2.0)``.
    kl_cov_coef : float
        KL-Cov only: :math:`\beta \ge 0` (verl ``ppo_kl_coef``), default 1.

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
    Gao et al. (SAPO) arXiv:2511.20347; Zhao et al. (GMPO) arXiv:2507.20673; Chu et al. (GPG) arXiv:2504.02546;
    VESPO arXiv:2602.10693; Cui et al. (Clip-Cov, KL-Cov) arXiv:2505.22617.

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
    agg, count_eps, empty_rows, per_row = resolve(agg or METHODS[method].aggregation or "seq-mean-token-mean", convention, count_eps=count_eps,
                                                  empty_rows=empty_rows, name="agg")
    clamp = _clamp(log_ratio_clamp)
    rows = {"count_eps": count_eps, "empty_rows": empty_rows, "per_row": per_row}
    x = _policy_inputs(method, log_prob, old_log_prob, advantages, mask, weight, selected)
    rows["groups"] = prompt_groups(agg, groups, x.mask)
    keep, not_01 = _float_mask(x.mask, x.log_prob)
    loss, witness = _policy_loss(method, x, keep, agg, norm, options, clamp, rows)
    if (not_01 + 0 * witness).item() != 0:  # a mask not 0/1, or NaN or inf somewhere: the careful way
        keep = as_mask("mask", x.mask, "log_prob", x.log_prob)
        loss, witness = _policy_loss(method, x, keep, agg, norm, options, clamp, rows)
        if not bool(torch.isfinite(witness)):
            require_finite_where(keep, log_prob=x.log_prob, old_log_prob=x.old_log_prob, advantages=x.advantages, weight=x.weight)
    return like(x.kind, loss.to(result_dtype(log_prob)))


def policy_weight(method: str, log_prob: ArrayT, old_log_prob: Array, advantages: Array, mask: Array, *, selected: Array | None = None,
                  log_ratio_clamp: float | None = None, **params: float | tuple[float, float] | None) -> ArrayT:
    r"""The derived gradient weight :math:`w_{it}` of ``method``: :math:`\partial\,\mathrm{loss}/\partial\ell_{it} = -\kappa_{it} (w_{it} A_{it} - p_{it})`.

    The weights are :func:`derivations.losses.weight` lambdified
    (:func:`numeric.gradient_weights.derived_weight`), evaluated at the token
    ratio :math:`r_{it}` (token methods, the form chosen by the options, as
    :func:`derivations.methods.form`; Clip-Cov's and KL-Cov's by ``selected``),
    at the sequence ratio :math:`\tilde r_i` (GSPO, both forms, PPO's weight there;
    CISPO and SAPO at the sequence ratio), at VESPO's Gamma weight of the
    product :math:`W_i` of the row's ratios, or at GMPO's clipped geometric mean
    times the token's live indicator.  0 on masked tokens.  Takes the
    parameters of :func:`policy_loss`, checked the same way.  With
    ``log_ratio_clamp`` a token whose log-ratio is clamped has weight 0 where
    the gradient passes through the ratio (the clamp stops it).  The penalty
    part :math:`p` is 0 for every method but KL-Cov: :func:`penalty_gradient`.

    Examples
    --------
    >>> import torch
    >>> from numeric import policy_weight
    >>> lp = torch.log(torch.tensor([[0.3, 0.6]])); old = torch.log(torch.tensor([[0.2, 0.5]]))
    >>> policy_weight("ppo", lp, old, torch.tensor([1.0]), torch.ones(1, 2), eps_low=0.2, eps_high=0.28).tolist()
    [[0.0, 1.2]]
    >>> policy_weight("clip_cov", lp, old, torch.tensor([-1.0]), torch.ones(1, 2), selected=torch.tensor([[False, True]])).tolist()
    [[1.5, 0.0]]
    """
    method = _method(method)
    options = method_options(method, params)
    clamp = _clamp(log_ratio_clamp)
    x = _policy_inputs(method if method in _SELECTING else "ppo", log_prob, old_log_prob, advantages, mask, None, selected)
    t, keep, _ = masked_inputs(x.mask, log_prob=x.log_prob, old_log_prob=x.old_log_prob, advantages=x.advantages.expand_as(x.log_prob))
    kind, dtype, m = x.kind, t["log_prob"].dtype, keep.double()
    if method == "m2po":  # a dropped token leaves the mask: its weight is 0 (and it has no kappa)
        assert x.selected is not None
        m = m * ~x.selected.to(m.device)
    ell0 = t["old_log_prob"].detach().double()
    delta = (t["log_prob"] - t["old_log_prob"]).detach().double()
    A = t["advantages"].detach().double()
    inside = torch.ones_like(delta) if clamp is None else (delta.abs() <= clamp).double()
    if clamp is not None:
        delta = delta.clamp(-clamp, clamp)
    row_ratio = _row_mean(delta, m).exp().expand_as(A)
    if method in ("gspo", "gspo_token", "sapo_seq", "cispo_seq", "luspo"):
        token_method = {"gspo": "ppo", "gspo_token": "ppo", "luspo": "ppo"}.get(method, method[:-4])
        form = methods.form(token_method, **{k: v for k, v in params.items() if k in ("dual_clip", "eps_low")})
        w = derived_weight(form, row_ratio, A, options)
    elif method == "ppo_product":  # PPO's weight at the product of the row's ratios (kappa = 1/B: seq-mean-token-sum's)
        w = derived_weight("ppo", (delta * m).sum(-1, keepdim=True).exp().expand_as(A), A, options)
    elif method == "seq_mask_tis":  # the token's ratio, where the row's geometric-mean ratio lies in the band
        w = delta.exp() * (derived_weight("icepop", row_ratio, A, options) > 0)
    elif method == "opsm":  # PPO's weight, where the row is kept: A >= 0 or its mean log-ratio at least -delta
        kept = (A >= 0) | (_row_mean(delta, m) >= -options["opsm_delta"])
        w = derived_weight("ppo", delta.exp(), A, options) * kept
    elif method == "vespo":
        w = _gamma_weight((delta * m).sum(-1, keepdim=True).expand_as(A), A, options)
    elif method == "gmpo":
        g_low, g_high = options["gmpo_clip"]
        sign = torch.sign(A)
        clipped = sign * torch.minimum(sign * delta, sign * delta.clamp(-g_low, g_high))
        live = torch.where(A > 0, delta <= g_high, delta >= -g_low).double()
        w = _row_mean(clipped, m).exp() * live
    elif method in _SELECTING:
        assert x.selected is not None
        kept, chosen = (derived_weight(f"{method}_{which}", delta.exp(), A, options) for which in ("kept", "selected"))
        w = torch.where(x.selected.to(kept.device), chosen, kept)
    else:
        w = derived_weight(methods.form(method, **params), delta.exp(), A, options, ell0)
    if method in _THROUGH_RATIO:  # their gradient passes through the ratio: a clamped log-ratio stops it
        w = w * inside
    return like(kind, (w * m).to(dtype).to(result_dtype(log_prob)))


_THROUGH_RATIO = ("ppo", "gspo", "gspo_token", "sapo", "sapo_seq", "gmpo", "clip_cov", "kl_cov", "top_entropy", "m2po", "dppo", "tv_band",
                  "importance_sampling", "opsm", "luspo", "ppo_product")
"""The methods whose gradient passes through the ratio (the others hold it in a stop-gradient, or never read it)."""


def penalty_gradient(method: str, log_prob: ArrayT, old_log_prob: Array, mask: Array, *, selected: Array | None = None,
                     log_ratio_clamp: float | None = None, **params: float | tuple[float, float] | None) -> ArrayT:
    r"""The part :math:`p_{it}` of :math:`\partial\,\mathrm{loss}/\partial\ell_{it} = -\kappa_{it}(w_{it}A_{it} - p_{it})` that no advantage multiplies.

    :func:`derivations.losses.penalty_gradient` lambdified: KL-Cov's
    :math:`\beta\,\mathrm{sgn}(\ell - \ell_{\mathrm{old}})` on its selected tokens (its
    :math:`\beta|\ell - \ell_{\mathrm{old}}|` pulls them towards the old policy, whatever
    their advantage); prime-rl's :math:`2\tau\log r` (DPPO and the TV band with
    ``kl_tau``, its :math:`\tau(\log r)^2` toward the sampler) and DRO's
    :math:`\beta\log r`; 0 for every other method and on masked tokens.  With
    ``log_ratio_clamp`` a clamped token's is 0.

    Examples
    --------
    >>> import torch
    >>> from numeric.losses import penalty_gradient
    >>> lp = torch.log(torch.tensor([[0.3, 0.6, 0.5]])); old = torch.log(torch.tensor([[0.2, 0.7, 0.5]]))
    >>> penalty_gradient("kl_cov", lp, old, torch.ones(1, 3), selected=torch.ones(1, 3), kl_cov_coef=0.5).tolist()
    [[0.5, -0.5, 0.0]]
    >>> penalty_gradient("dro", lp, old, torch.ones(1, 3), dro_beta=0.1).round(decimals=4).tolist()   # beta log r
    [[0.0405, -0.0154, 0.0]]
    """
    method = _method(method)
    options = method_options(method, params)
    clamp = _clamp(log_ratio_clamp)
    lp, _ = to_tensor("log_prob", log_prob)
    x = _policy_inputs(method if method in _SELECTING else "ppo", log_prob, old_log_prob, torch.zeros(lp.shape[:1]), mask, None, selected)
    t, keep, _ = masked_inputs(x.mask, log_prob=x.log_prob, old_log_prob=x.old_log_prob)
    delta = (t["log_prob"] - t["old_log_prob"]).detach().double()
    p = torch.zeros_like(delta)
    inside = torch.ones_like(delta) if clamp is None else (delta.abs() <= clamp).double()
    if method == "kl_cov":
        assert x.selected is not None
        p = torch.where(x.selected.to(delta.device), _penalty_fn("kl_cov_selected")(delta, options), p) * inside
    elif method in _PENALISED:
        name = methods.form(method, **params)
        if derived.penalty_gradient(name) != 0:
            p = _penalty_fn(name)(delta.clamp(-clamp, clamp) if clamp is not None else delta, options) * inside
    return like(x.kind, (p * keep.double()).to(t["log_prob"].dtype).to(result_dtype(log_prob)))


_PENALISED = ("dppo", "tv_band", "dro")
r"""Token methods with an advantage-free term (prime-rl's :math:`\tau(\log r)^2`, DRO's :math:`\tfrac\beta2(\log r)^2`)."""


@cache
def _penalty_lambda(form_name: str):
    r"""A form's derived penalty gradient, lambdified in :math:`\Delta = \ell - \ell_0` and its constants."""
    delta = sp.Symbol("Delta", real=True)
    p = derived.penalty_gradient(form_name).subs(methods.ell, methods.ell0 + delta)
    return sp.lambdify((delta, methods.beta, methods.tau_k2, methods.beta_dro), p, "numpy")


def _penalty_fn(form_name: str):
    """The penalty gradient of ``form_name`` as ``(delta, options) -> tensor``, float64, on ``delta``'s device."""
    def p(delta: torch.Tensor, options: dict) -> torch.Tensor:
        out = _penalty_lambda(form_name)(delta.cpu().numpy(), options.get("kl_cov_coef", 0.0), options.get("kl_tau", 0.0),
                                         options.get("dro_beta") or 0.0)
        return torch.as_tensor(np.broadcast_to(np.asarray(out, dtype=np.float64), delta.shape).copy()).to(delta.device)
    return p


@cache
def _log_gamma_fn():
    r""":math:`\log\phi(e^L) = kL + \zeta(1 - e^L)` from :func:`derivations.methods.gamma_weight`, lambdified in :math:`L, k, \zeta`."""
    L = sp.Symbol("L", real=True)
    log_phi = sp.expand_log(sp.log(methods.gamma_weight(sp.exp(L))), force=True)
    return sp.lambdify((L, methods.k, methods.lam), log_phi, "numpy")


def _gamma_weight(log_W: torch.Tensor, A: torch.Tensor, options: dict) -> torch.Tensor:
    r"""VESPO's derived weight :math:`\phi(W)` at :math:`\log W`, float64: evaluated in log space, so :math:`W = \infty` gives 0, not NaN."""
    nonneg = (A >= 0).cpu().numpy()
    k = np.where(nonneg, options["vespo_k"][0], options["vespo_k"][1])
    lam = np.where(nonneg, options["vespo_lambda"][0], options["vespo_lambda"][1])
    with np.errstate(over="ignore"):
        log_phi = _log_gamma_fn()(log_W.detach().double().cpu().numpy(), k, lam)
    return torch.as_tensor(np.exp(log_phi)).to(log_W.device)


def _row_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Masked mean over the time dimension, ``[B, 1]``; 0 for an all-masked row."""
    return (x * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)


_WEIGHT_SYMBOLS = (methods.r, methods.A, methods.ell0, methods.eps_l, methods.eps_h, methods.c, methods.tau_pos, methods.tau_neg, methods.tv_l,
                   methods.tv_h, methods.c_is, methods.delta_band, methods.b_l, methods.b_h, methods.delta_opsm)


@cache
def _weight_fn(form_name: str):
    return sp.lambdify(_WEIGHT_SYMBOLS, derived.weight(form_name), modules=[{"Min": np.minimum, "Max": np.maximum}, "numpy"])


def derived_weight(form_name: str, r: torch.Tensor, A: torch.Tensor, options: dict, ell0: torch.Tensor | None = None) -> torch.Tensor:
    r"""The derived weight :math:`w(r, A)` of a per-token form (:data:`derivations.methods.FORMS`), float64, on ``r``'s device.

    The one lambdified table of :func:`derivations.losses.weight`: :func:`policy_weight`
    and :func:`numeric.gradient_weight` both evaluate it.  ``options`` are the
    checked parameters (:func:`numeric._validate.method_options`); ``ell0`` the
    old log-probabilities, for the forms whose bounds move with :math:`\pi_0 = e^{\ell_0}`
    (DPPO, the TV band; required there).  SAPO's
    weight :math:`4q(1-q)r`, :math:`q = \operatorname{sigmoid}(\tau(r-1))`, is below :math:`4r e^{-700}`, 0 in fp64,
    where :math:`\tau(r - 1) > 700`, and is written 0 there (its formula would
    divide two overflowed exponentials).

    Examples
    --------
    >>> import torch
    >>> from numeric.losses.policy import derived_weight
    >>> r, A = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    >>> derived_weight("cispo_cap", r, A, {"eps_low": None, "eps_high": 0.28}).tolist()
    [0.5, 1.0, 1.28]
    >>> q0 = torch.log(torch.full((3,), 0.5, dtype=torch.float64))   # pi_0 = 1/2: DPPO keeps r <= 1 + 0.2/0.5 for A > 0
    >>> derived_weight("dppo", r, A, {"tv_delta": (0.2, 0.2)}, q0).tolist()
    [0.5, 1.0, 0.0]
    """
    form = methods.FORMS[form_name]
    if ell0 is None and (form.method in ("dppo", "dppo_tv", "dppo_kl", "tv_band")):
        raise ValueError(f"the weight of {form_name!r} moves with the old probability: ell0 is required")
    r64, A64 = r.detach().double().cpu(), A.detach().double().cpu()
    e0 = np.zeros(r64.shape) if ell0 is None else ell0.detach().double().cpu().numpy()
    low = options.get("eps_low")
    tau_pos, tau_neg = options.get("sapo_tau", (1.0, 1.0))
    tv_low, tv_high = options.get("tv_delta", (0.0, 0.0))
    b_low, b_high = options.get("is_bounds", (0.0, 0.0))
    args = (0.0 if low is None else low, options.get("eps_high", 0.0), options.get("dual_clip") or 0.0, tau_pos, tau_neg, tv_low, tv_high,
            options.get("is_cap", 1.0), options.get("band_delta", 0.0), b_low, b_high, options.get("opsm_delta", 0.0))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = _weight_fn(form_name)(r64.numpy(), A64.numpy(), e0, *args)
    w = torch.as_tensor(np.broadcast_to(np.asarray(out, dtype=np.float64), r64.shape).copy())
    if form_name == "sapo":  # the registry's tau_+ where A > 0, tau_- elsewhere
        w = torch.where(torch.where(A64 > 0, tau_pos, tau_neg) * (r64 - 1) > 700, 0.0, w)
    return w.to(r.device)
