"""The token plumbing every weight of :mod:`numeric.off_policy` shares: inputs in, the caller's kind out.

:func:`log_ratio` checks ``(log_prob, sampler_log_prob, mask)`` and returns the
detached log-ratio :math:`\\log\\pi - \\log\\mu` on the mask (0 elsewhere, so a
masked slot holding ``-inf`` or NaN never reaches a product, a mean or a sum),
the boolean mask, the caller's kind and dtype.  :func:`out` converts back.
"""

from __future__ import annotations

from typing import Any

import torch

from .._types import Array
from .._validate import like, masked_inputs, require_mask, require_same_device, to_tensor


def log_ratio(log_prob: Array, sampler_log_prob: Array, mask: Array) -> tuple[torch.Tensor, torch.Tensor, str, torch.dtype]:
    r"""``(d, m, kind, dtype)``: :math:`d_t = \log\pi - \log\mu` on the mask and 0 elsewhere (detached, compute dtype), the boolean mask, the caller's kind and dtype."""
    lp, lmu, m, kind, dtype = log_probs(log_prob, sampler_log_prob, mask)
    return lp - lmu, m, kind, dtype


def log_probs(log_prob: Array, sampler_log_prob: Array, mask: Array) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, str, torch.dtype]:
    r"""``(lp, lmu, m, kind, dtype)``: both log-probabilities on the mask and 0 elsewhere (detached, compute dtype), as :func:`log_ratio`."""
    require_mask(mask)
    require_same_device(log_prob=log_prob, sampler_log_prob=sampler_log_prob, mask=mask)
    raw, _ = to_tensor("log_prob", log_prob)
    t, m, kind = masked_inputs(mask, log_prob=log_prob, sampler_log_prob=sampler_log_prob)
    if raw.ndim < 1:
        raise ValueError("log_prob must have a time dimension (the last one), got a scalar")
    return t["log_prob"].detach(), t["sampler_log_prob"].detach(), m, kind, raw.dtype


def with_advantages(log_prob: Array, sampler_log_prob: Array, advantages: Array, mask: Array) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, str, torch.dtype]:
    r"""``(lp, lmu, A, m, kind, dtype)`` as :func:`log_probs`, with the advantages (``[batch]``, ``[batch, 1]`` or ``[batch, time]``) broadcast over the time axis."""
    require_mask(mask)
    require_same_device(log_prob=log_prob, sampler_log_prob=sampler_log_prob, advantages=advantages, mask=mask)
    raw, _ = to_tensor("log_prob", log_prob)
    A, _ = to_tensor("advantages", advantages)
    if raw.ndim < 1:
        raise ValueError("log_prob must have a time dimension (the last one), got a scalar")
    if A.ndim == raw.ndim - 1:
        A = A.unsqueeze(-1)
    if A.ndim != raw.ndim or A.shape[:-1] != raw.shape[:-1] or A.shape[-1] not in (1, raw.shape[-1]):
        raise ValueError(f"advantages must have shape {tuple(raw.shape[:-1])}, {tuple(raw.shape[:-1]) + (1,)} or {tuple(raw.shape)}, got {tuple(A.shape)}")
    t, m, kind = masked_inputs(mask, log_prob=log_prob, sampler_log_prob=sampler_log_prob, advantages=A.expand(raw.shape))
    return t["log_prob"].detach(), t["sampler_log_prob"].detach(), t["advantages"].detach(), m, kind, raw.dtype


def out(kind: str, dtype: torch.dtype, values: torch.Tensor) -> Any:
    """The caller's kind (numpy or torch, so typed ``Any``) and dtype."""
    return like(kind, values.to(dtype))


def on_mask(m: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``values`` where ``m`` holds, exactly 0 elsewhere (``where``, never a product: ``inf * 0`` would be NaN)."""
    return torch.where(m, values, torch.zeros((), dtype=values.dtype, device=values.device))


def per_sequence(m: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``[..., 1]`` per-sequence values broadcast over the sequence's masked tokens."""
    return on_mask(m, values.expand(m.shape))


def token_count(m: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[..., 1]`` the number of masked tokens of each sequence, at least 1 (an empty row divides by 1)."""
    return m.sum(-1, keepdim=True).clamp(min=1).to(dtype)
