r"""Group advantages as three trainers write them: conventions reproduced from their code, not copied.

The variants chapter certifies each with :func:`numeric.variants.check_group_advantage`.
"""

from __future__ import annotations

import torch

from .._validate import like, require_finite, to_tensor

__all__ = ["openrlhf_rloo_advantages", "trl_grpo_advantages", "verl_dr_grpo_advantages"]


def _groups(rewards) -> tuple[torch.Tensor, str]:
    """``[..., G]`` finite rewards (numpy or torch), ``G >= 2``, and the caller's kind."""
    t, kind = to_tensor("rewards", rewards)
    if t.ndim < 1 or t.shape[-1] < 2:
        raise ValueError(f"rewards must have shape [..., G] with G >= 2 answers per group, got {tuple(t.shape)}")
    return require_finite("rewards", t), kind


def trl_grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """TRL's GRPO convention: ``(r - mean) / (std + 1e-4)`` over each group, ``torch.std`` (Bessel).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants import openrlhf_rloo_advantages, trl_grpo_advantages, verl_dr_grpo_advantages
    >>> r = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    >>> [f(r).round(decimals=4).tolist() for f in (trl_grpo_advantages, verl_dr_grpo_advantages, openrlhf_rloo_advantages)]
    [[[0.8659, -0.8659, -0.8659, 0.8659]], [[0.5, -0.5, -0.5, 0.5]], [[0.6667, -0.6667, -0.6667, 0.6667]]]
    """
    r, kind = _groups(rewards)
    return like(kind, (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1e-4))


def verl_dr_grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """verl's GRPO with ``norm_adv_by_std_in_grpo=False`` (Dr. GRPO): ``r - mean``."""
    r, kind = _groups(rewards)
    return like(kind, r - r.mean(-1, keepdim=True))


def openrlhf_rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """OpenRLHF's RLOO: ``r - (sum - r) / (n - 1)``."""
    r, kind = _groups(rewards)
    n = r.shape[-1]
    return like(kind, r - (r.sum(-1, keepdim=True) - r) / (n - 1))
