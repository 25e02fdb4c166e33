r"""Sampler-correction weights: the batched, trainer-facing half of :mod:`numeric.off_policy`.

Every function takes ``[batch, time]`` log-probabilities of the policy
(``log_prob``) and of the sampler (``sampler_log_prob``) and a 0/1 ``mask``;
numpy or torch in, the caller's kind, dtype and device out, detached.  Masked
slots never enter a product, a mean or a KL sum, get weight 0, and may hold
anything (``-inf``, sentinels).  The log-ratios are formed in the compute dtype
(at least float32: fp16 and bf16 inputs are accumulated in float32) and the
weight is returned in the caller's dtype.  ``mask=None`` is refused (write the
mask of ones if every token is kept), and so are arguments on different devices
or on the meta device.

Band edges
----------
Every band is closed: a ratio exactly at ``low`` or exactly at ``high`` is
kept, and a rejection threshold keeps a sum exactly at it.  This is the edge of
every trainer these weights name, read from their code at these commits:

* OpenRLHF ``3c3be6234e0c``, ``openrlhf/models/loss.py`` (``PolicyLoss``):
  ``icepop`` keeps ``(vllm_is >= low_threshold) & (vllm_is <= high_threshold)``;
  ``seq-mask-tis`` the same test on the geometric mean ``exp(masked_mean(log ratio))``.
* TRL ``f2cd57710ae3``, ``trl/trainer/grpo_trainer.py``: ``token_mask`` and
  ``sequence_mask`` zero a ratio ``< vllm_importance_sampling_clip_min`` or
  ``> vllm_importance_sampling_clip_max``, so both edges are kept.
* verl ``b178a3cd56f5``, ``verl/trainer/ppo/rollout_corr_helper.py``
  (``compute_rollout_rejection_mask``): ``token_k1``, ``seq_sum_k1`` and
  ``seq_mean_k1`` keep ``log(lower) <= stat <= log(upper)``, and the ``k2``/``k3``
  options keep ``stat <= upper``.  verl compares log-ratios with log bounds (a
  ratio and its log can disagree by one rounding exactly at an edge) and clamps
  each token's log-ratio to :math:`[-20, 20]` first; here the ratios themselves
  are compared, as in OpenRLHF and TRL, and nothing is clamped.

A truncation :math:`\min(\rho, C)` is continuous at :math:`C`: a ratio exactly at
the cap is the cap on either reading, so it has no edge to choose.
"""

from __future__ import annotations

import torch

from .._types import Array, ArrayT
from .._validate import (
    masked_inputs,
    require_band,
    require_cap,
    require_mask,
    require_nonnegative,
    require_same_device,
    to_tensor,
)
from ..trust_region import kl_k1, kl_k2, kl_k3
from ._tokens import log_ratio, on_mask, out, per_sequence

__all__ = [
    "CORRECTION_WEIGHTS",
    "KL_REJECTION_LEVELS",
    "batch_normalized_weights",
    "geometric_sequence_mask",
    "kl_rejection_mask",
    "masked_sequence_ratio",
    "masked_token_ratio",
    "sequence_ratio",
    "token_ratio",
    "truncated_sequence_ratio",
    "truncated_token_ratio",
]

# ----------------------------------------------------------------- weights


def token_ratio(log_prob: ArrayT, sampler_log_prob: Array, mask: Array) -> ArrayT:
    r"""Token-level importance ratio :math:`\rho_t = \pi(o_t \mid o_{<t}) / \mu(o_t \mid o_{<t})` on the mask.

    Unbiased per token only when the sampler equals the policy: it drops the
    ratio of the prefix and of the future (:func:`derivations.off_policy.token_ratio_bias`).

    Parameters
    ----------
    log_prob : numpy array or torch tensor
        ``[batch, time]`` :math:`\log\pi` of the policy being trained, finite where ``mask`` is 1.
    sampler_log_prob : numpy array or torch tensor
        ``[batch, time]`` :math:`\log\mu` of the sampler, finite where ``mask`` is 1.
    mask : numpy array or torch tensor
        ``[batch, time]`` 0/1 (or boolean): 1 on the model's own tokens.

    Returns
    -------
    The caller's kind, dtype and device, ``[batch, time]``, 0 where ``mask`` is 0, detached.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import token_ratio
    >>> lp = np.log([[0.5, 0.2, 1.0]])
    >>> lmu = np.array([[np.log(0.25), np.log(0.4), -np.inf]])   # padding may be -inf
    >>> token_ratio(lp, lmu, np.array([[1, 1, 0]])).round(6).tolist()
    [[2.0, 0.5, 0.0]]
    """
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    return out(kind, dtype, on_mask(m, d.exp()))


def sequence_ratio(log_prob: ArrayT, sampler_log_prob: Array, mask: Array) -> ArrayT:
    r"""Sequence-level ratio :math:`\rho = \prod_{t: m_t = 1} \rho_t = \pi(y)/\mu(y)`, broadcast over the sequence's tokens.

    The only weight here that is unbiased for :math:`\nabla J` under any sampler:
    :math:`\mathbb E_\mu[\rho\, A \sum_t s_t] = \mathbb E_\pi[A \sum_t s_t]`
    (:func:`derivations.off_policy.sequence_ratio_unbiased`).  Its variance
    grows with the length.

    Overflow: the product is formed as :math:`\exp(\sum_t \log\rho_t)`.  When
    the sum exceeds the log of the dtype's largest number (88.72 in float32,
    709.78 in float64; bf16 and fp16 are summed in float32 and the weight rounded
    to the caller's dtype, 11.09 for fp16) the exact ratio is not representable,
    and the weight is ``+inf``, the correctly rounded value; it is never NaN.
    Do not hand an ``inf`` weight to a loss (``inf * 0`` is NaN in the
    gradient): :func:`truncated_sequence_ratio` gives :math:`C` and
    :func:`masked_sequence_ratio` gives 0 for such a sequence, both exactly.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import sequence_ratio
    >>> lp = np.log([[0.5, 0.2, 1.0]])
    >>> lmu = np.log([[0.25, 0.4, 0.5]])
    >>> sequence_ratio(lp, lmu, np.array([[1, 1, 0]])).round(6).tolist()
    [[1.0, 1.0, 0.0]]
    """
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    return out(kind, dtype, per_sequence(m, d.sum(-1, keepdim=True).exp()))


def truncated_token_ratio(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, cap: float = 2.0, floor: float = 0.0) -> ArrayT:
    r"""Truncated importance sampling per token, :math:`\min(\max(\rho_t, l), C)` (TIS; TRL ``token_truncate``).

    :math:`\min(\rho, C) = \rho - (\rho - C)_+`, so it removes
    :math:`\mathbb E_\mu[\sum_t (\rho_t - C)_+ A s_t]` from the token-IS gradient
    (:func:`derivations.off_policy.truncation_identity`).  A ``floor``
    :math:`l > 0` also raises the ratios below it, adding
    :math:`\mathbb E_\mu[\sum_t (l - \rho_t)_+ A s_t]`: OpenRLHF's ``tis`` with
    ``vllm_is_truncated_threshold = [l, C]``.  The default ``floor = 0`` leaves
    every ratio above it untouched (TRL, verl).  The clamp is continuous, so a
    ratio exactly at ``cap`` (or ``floor``) is returned unchanged.

    Examples
    --------
    >>> import torch
    >>> from numeric import truncated_token_ratio
    >>> lp = torch.log(torch.tensor([[0.9, 0.2, 0.1]]))
    >>> lmu = torch.log(torch.tensor([[0.3, 0.4, 0.5]]))
    >>> truncated_token_ratio(lp, lmu, torch.ones(1, 3), cap=2.0).round(decimals=6).tolist()
    [[2.0, 0.5, 0.2]]
    >>> truncated_token_ratio(lp, lmu, torch.ones(1, 3), cap=2.0, floor=0.5).round(decimals=6).tolist()
    [[2.0, 0.5, 0.5]]
    """
    cap = require_cap("cap", cap)
    floor = require_nonnegative("floor", floor)
    if not floor < cap:
        raise ValueError(f"floor must be < cap (the ratio is clamped to [floor, cap]), got floor={floor}, cap={cap}")
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    return out(kind, dtype, on_mask(m, d.exp().clamp(min=floor, max=cap)))


def truncated_sequence_ratio(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, cap: float = 2.0, floor: float = 0.0) -> ArrayT:
    r"""Truncated sequence ratio :math:`\min(\max(\rho, l), C)` broadcast over the tokens (TRL ``sequence_truncate``; verl sequence IS).

    Its bias is exactly :math:`-\mathbb E_\mu[(\rho - C)_+ A \sum_t s_t]`.  A
    sequence whose ratio overflows the dtype (see :func:`sequence_ratio`) gets
    exactly :math:`C`.  A ``floor`` :math:`l > 0` also raises the sequence
    ratios below it, adding :math:`+\mathbb E_\mu[(l - \rho)_+ A \sum_t s_t]`
    (the mirror of the truncation identity, as for :func:`truncated_token_ratio`);
    the default ``floor = 0`` truncates from above only (TRL, verl).  A ratio
    that underflows to 0 gets exactly :math:`l`.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import truncated_sequence_ratio
    >>> lp, lmu = np.log([[0.9, 0.9], [0.1, 0.5]]), np.log([[0.3, 0.3], [0.5, 0.5]])
    >>> truncated_sequence_ratio(lp, lmu, np.ones((2, 2)), cap=5.0).round(6).tolist()
    [[5.0, 5.0], [0.2, 0.2]]
    >>> truncated_sequence_ratio(lp, lmu, np.ones((2, 2)), cap=5.0, floor=0.5).round(6).tolist()
    [[5.0, 5.0], [0.5, 0.5]]
    """
    cap = require_cap("cap", cap)
    floor = require_nonnegative("floor", floor)
    if not floor < cap:
        raise ValueError(f"floor must be < cap (the ratio is clamped to [floor, cap]), got floor={floor}, cap={cap}")
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    return out(kind, dtype, per_sequence(m, d.sum(-1, keepdim=True).exp().clamp(min=floor, max=cap)))


def masked_token_ratio(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, low: float = 0.5, high: float = 2.0) -> ArrayT:
    r"""Masked importance sampling per token, :math:`\rho_t\,\mathbb 1[l \le \rho_t \le h]` (IcePop; TRL ``token_mask``; verl ``token_k1``).

    A token whose ratio leaves the band is dropped from the gradient; the bias is
    :math:`-\mathbb E_\mu[\sum_t \rho_t \mathbb 1[\rho_t \notin [l, h]]\, A s_t]` relative to token IS.

    Edges: the band is closed, a ratio exactly at ``low`` or ``high`` is kept,
    as in OpenRLHF ``icepop``, TRL ``token_mask`` and verl ``token_k1`` (see the
    module's notes for the commits).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import masked_token_ratio
    >>> lp, lmu = np.log([[0.9, 0.2, 0.5]]), np.log([[0.3, 0.4, 0.5]])
    >>> masked_token_ratio(lp, lmu, np.ones((1, 3)), low=0.5, high=2.0).round(6).tolist()
    [[0.0, 0.5, 1.0]]
    """
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    low, high = require_band(low, high)
    r = d.exp()
    return out(kind, dtype, on_mask(m & (r >= low) & (r <= high), r))


def masked_sequence_ratio(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, low: float = 0.0, high: float = 2.0) -> ArrayT:
    r"""Masked sequence ratio :math:`\rho\,\mathbb 1[l \le \rho \le h]` (TRL ``sequence_mask``; verl ``seq_sum_k1`` rejection times sequence IS).

    Edges: the band is closed, a sequence ratio exactly at ``low`` or ``high``
    is kept (TRL ``sequence_mask``; verl ``seq_sum_k1`` with bounds
    :math:`[1/h, 1/l]` on :math:`1/\rho`).  A ratio that overflows the dtype is
    above any ``high`` and gets 0.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import masked_sequence_ratio
    >>> lp, lmu = np.log([[0.9, 0.9], [0.5, 0.5]]), np.log([[0.3, 0.3], [0.5, 0.5]])
    >>> masked_sequence_ratio(lp, lmu, np.ones((2, 2)), high=2.0).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    low, high = require_band(low, high)
    r = d.sum(-1, keepdim=True).exp()
    return out(kind, dtype, per_sequence(m, torch.where((r >= low) & (r <= high), r, torch.zeros_like(r))))


def geometric_sequence_mask(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, low: float = 0.5, high: float = 2.0) -> ArrayT:
    r"""Keep a sequence when its geometric-mean ratio :math:`\rho^{1/|o|} = \exp(\frac1{|o|}\sum_t \log\rho_t)` lies in :math:`[l, h]`.

    A 0/1 mask, broadcast over the sequence's tokens; multiply it into another
    weight (OpenRLHF ``seq-mask-tis`` multiplies it into the plain token ratio
    :math:`\rho_t`; verl's ``seq_mean_k1`` rejection, bounds :math:`[1/h, 1/l]` on
    the geometric mean of :math:`1/\rho_t`).  :math:`|o|` counts the masked
    tokens; a sequence with none is kept (it has no tokens to weight).

    Edges: the band is closed, a geometric mean exactly at ``low`` or ``high``
    is kept, as in OpenRLHF ``seq-mask-tis`` and verl ``seq_mean_k1``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import geometric_sequence_mask
    >>> lp, lmu = np.log([[0.9, 0.1], [0.9, 0.5]]), np.log([[0.3, 0.3], [0.3, 0.5]])
    >>> geometric_sequence_mask(lp, lmu, np.ones((2, 2)), low=0.8, high=1.25).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    """
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    low, high = require_band(low, high)
    n = m.sum(-1, keepdim=True).clamp(min=1).to(d.dtype)
    g = (d.sum(-1, keepdim=True) / n).exp()
    keep = ((g >= low) & (g <= high)).to(d.dtype)
    return out(kind, dtype, per_sequence(m, keep))


_KL = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


KL_REJECTION_LEVELS = ("token", "seq_sum", "seq_mean", "seq_max")
"""How :func:`kl_rejection_mask` reduces the per-token estimates: verl's ``rollout_rs`` prefixes."""


def kl_rejection_mask(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, threshold: float = 0.05, estimator: str = "k3", level: str = "seq_sum") -> ArrayT:
    r"""Keep a token, or a sequence, when its estimate of :math:`\mathrm{KL}(\mu\,\|\,\pi)` is at most ``threshold``.

    The tokens come from :math:`\mu`, so with the sampler ratio :math:`\rho_t = \pi/\mu`
    (here in the place of the reference ratio) the per-token estimators of
    :mod:`numeric.trust_region` are unbiased (:math:`k_1 = -\log\rho_t`,
    :math:`k_3 = \rho_t - 1 - \log\rho_t`) or second-order (:math:`k_2 = \tfrac12(\log\rho_t)^2`).
    ``level`` says what is compared with the threshold :math:`d`
    (verl's ``rollout_rs`` options of the same names):

    ``"token"``
        each token's :math:`k_t` (``token_k2``, ``token_k3``): a per-token mask;
    ``"seq_sum"``
        :math:`\sum_t m_t k_t` (``seq_sum_k2``, ``seq_sum_k3``), the default;
    ``"seq_mean"``
        :math:`\sum_t m_t k_t / |o|` (``seq_mean_k2``, ``seq_mean_k3``), :math:`|o|` the masked tokens;
    ``"seq_max"``
        :math:`\max_{t: m_t = 1} k_t` (``seq_max_k2``, ``seq_max_k3``).

    A sequence statistic is broadcast over the sequence's tokens.  verl's
    :math:`k_3` is the same :math:`\rho_t - 1 - \log\rho_t`; verl's ``*_k1``
    options are two-sided bands on the ratio (:func:`masked_token_ratio`,
    :func:`masked_sequence_ratio`, :func:`geometric_sequence_mask`), whereas
    ``estimator="k1"`` here keeps :math:`k_1 \le d`, one-sided.  A row
    with no masked token has statistic 0 at every level and is kept (verl: the
    same).  Differences from verl ``b178a3cd56f5``: verl divides the seq_mean
    sum by :math:`|o| + 10^{-8}` and clamps each log-ratio to :math:`[-20, 20]`;
    neither moves a statistic unless it sits within :math:`10^{-8}` relative of
    :math:`d`, or a token's :math:`|\log\rho_t| > 20` (then :math:`k_2 > 200`,
    :math:`k_3 > 19`).

    Edge: a statistic exactly at ``threshold`` is kept (verl's ``stat <= upper``),
    so ``threshold=0`` keeps a sequence on which the sampler equals the policy.
    Every level with :math:`k_2` or :math:`k_3` drops exactly the same tokens
    when :math:`\mu = \pi` (none), so the weight it multiplies keeps its
    on-policy bias; off policy its bias is
    :math:`-\mathbb E_\mu[\sum_t \mathbb 1[\text{dropped}_t]\, v_t A s_t]`.

    Parameters
    ----------
    threshold : float
        :math:`d \ge 0`.
    estimator : {"k1", "k2", "k3"}
    level : {"token", "seq_sum", "seq_mean", "seq_max"}

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import kl_rejection_mask
    >>> lp, lmu = np.log([[0.5, 0.5], [0.9, 0.1]]), np.log([[0.5, 0.4], [0.3, 0.6]])
    >>> kl_rejection_mask(lp, lmu, np.ones((2, 2)), threshold=0.1).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    >>> lp, lmu = np.log([[0.5, 0.5], [0.9, 0.3]]), np.log([[0.5, 0.4], [0.3, 0.6]])   # k3: [0, 0.027], [0.901, 0.193]
    >>> for level in ("token", "seq_sum", "seq_mean", "seq_max"):
    ...     print(level, kl_rejection_mask(lp, lmu, np.ones((2, 2)), threshold=0.6, level=level).tolist())
    token [[1.0, 1.0], [0.0, 1.0]]
    seq_sum [[1.0, 1.0], [0.0, 0.0]]
    seq_mean [[1.0, 1.0], [1.0, 1.0]]
    seq_max [[1.0, 1.0], [0.0, 0.0]]
    """
    if estimator not in _KL:
        raise ValueError(f"estimator must be one of {sorted(_KL)}, got {estimator!r}")
    if level not in KL_REJECTION_LEVELS:
        raise ValueError(f"level must be one of {KL_REJECTION_LEVELS}, got {level!r}")
    threshold = require_nonnegative("threshold", threshold)
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    zero = torch.zeros_like(d)
    per_token = on_mask(m, _KL[estimator](-d, zero))  # log_prob = log mu, ref = log pi
    if level == "token":
        return out(kind, dtype, on_mask(m, (per_token <= threshold).to(d.dtype)))
    if level == "seq_sum":
        stat = per_token.sum(-1, keepdim=True)
    elif level == "seq_mean":
        stat = per_token.sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1).to(d.dtype)
    else:
        stat = torch.where(m, per_token, -torch.inf).amax(-1, keepdim=True).clamp(min=0) if m.shape[-1] else zero.sum(-1, keepdim=True)
    return out(kind, dtype, per_sequence(m, (stat <= threshold).to(d.dtype)))


def batch_normalized_weights(weights: ArrayT, mask: Array, *, level: str = "token", eps: float = 1e-8) -> ArrayT:
    r"""Importance weights divided by their batch mean, so that the mean is 1 (verl ``rollout_is_batch_normalize``).

    For ``level="token"`` the mean is over every masked token of the batch,
    :math:`\bar v = \sum_{i,t} m_{it} v_{it} / \sum_{i,t} m_{it}`; for
    ``level="sequence"`` it is over the rows that hold a token, of each row's
    token mean, :math:`\bar v = \frac{1}{|\{i: n_i > 0\}|}\sum_{i: n_i > 0}\frac{1}{n_i}\sum_t m_{it} v_{it}`
    (for a sequence weight, constant along its row, the mean of the sequence
    weights).  The result is :math:`v_{it}/\bar v`, 0 on masked slots; when
    :math:`\bar v \le` ``eps`` (every weight 0, or an empty batch) the weights
    are returned unchanged, as verl does.

    What it does to the gradient: within a batch it multiplies every weight by
    the same :math:`1/\bar v`, so the direction of the update is the weights'
    and only its length changes; across batches :math:`\bar v` is random, so
    the estimate is a ratio (self-normalised) estimator, biased at finite
    batch size.  As the batch grows :math:`\bar v` tends to its expectation:
    for the sequence ratio :math:`\mathbb E_\mu[\rho] = 1`
    (:func:`derivations.off_policy.sequence_ratio_unbiased`), so normalising
    untruncated sequence IS changes nothing in the limit, while a truncated
    weight has :math:`\mathbb E_\mu[\min(\rho, C)] = 1 - \mathbb E_\mu[(\rho - C)_+]`
    (:func:`derivations.off_policy.truncated_ratio_mean`), which the
    normalisation divides back out.

    verl ``b178a3cd56f5`` (``compute_rollout_correction_weights``) normalises the
    truncated weights of ``rollout_is="token"`` or ``"sequence"`` this way,
    dividing by ``mask.sum() + 1e-8`` inside its token mean (a relative
    difference of :math:`10^{-8}/\sum m`), and over the data-parallel group
    when one is initialised (here: the batch given).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import batch_normalized_weights
    >>> w, m = np.array([[2.0, 0.5, 9.0], [1.5, 0.0, 0.0]]), np.array([[1, 1, 0], [1, 0, 0]])
    >>> print(batch_normalized_weights(w, m).round(6))
    [[1.5      0.375    0.      ]
     [1.125    0.       0.      ]]
    >>> print(batch_normalized_weights(np.array([[2.0, 2.0], [1.0, 0.0]]), np.array([[1, 1], [1, 0]]), level="sequence").round(6))
    [[1.333333 1.333333]
     [0.666667 0.      ]]
    """
    if level not in ("token", "sequence"):
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    eps = require_nonnegative("eps", eps)
    require_mask(mask)
    require_same_device(weights=weights, mask=mask)
    raw, _ = to_tensor("weights", weights)
    t, m, kind = masked_inputs(mask, weights=weights)
    w = t["weights"].detach()
    if w.ndim < 1:
        raise ValueError("weights must have a time dimension (the last one), got a scalar")
    if bool((w < 0).any()):
        raise ValueError(f"weights must be >= 0 where mask is 1 (importance weights), got min {float(w.min())}")
    n = m.sum(-1, keepdim=True).to(w.dtype)
    if level == "token":
        mean = w.sum((-2, -1), keepdim=True) / n.sum(-2, keepdim=True).clamp(min=1) if w.ndim > 1 else w.sum(-1, keepdim=True) / n.clamp(min=1)
    else:
        rows = (n > 0).to(w.dtype)
        row_mean = w.sum(-1, keepdim=True) / n.clamp(min=1)
        mean = row_mean.sum(-2, keepdim=True) / rows.sum(-2, keepdim=True).clamp(min=1) if w.ndim > 1 else row_mean
    scaled = torch.where(mean > eps, w / torch.where(mean > eps, mean, torch.ones_like(mean)), w)
    return out(kind, raw.dtype, on_mask(m, scaled))


CORRECTION_WEIGHTS = (
    token_ratio,
    sequence_ratio,
    truncated_token_ratio,
    truncated_sequence_ratio,
    masked_token_ratio,
    masked_sequence_ratio,
    geometric_sequence_mask,
    kl_rejection_mask,
)
"""The batched sampler-correction weights, each ``fn(log_prob, sampler_log_prob, mask, ...)`` giving ``[B, T]``."""
