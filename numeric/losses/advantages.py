r"""Advantage estimators trainers ship: whitening, REINFORCE++, ReMax, OPO, GPG, pass@k."""

from __future__ import annotations

import torch

from .._types import Array, ArrayT
from .._validate import (
    like,
    masked_inputs,
    require_bool,
    require_finite,
    require_group_rewards,
    require_mask,
    require_nonnegative,
    require_positive,
    require_unit_interval,
    result_dtype,
    to_tensor,
)
from ..group_baselines import group_mean_advantages
from .tokens import mask_of_rank

__all__ = [
    "gpg_advantages",
    "masked_whiten",
    "opo_advantages",
    "passk_advantages",
    "reinforce_pp_advantages",
    "reinforce_pp_baseline_advantages",
    "remax_advantages",
]


def masked_whiten(x: ArrayT, mask: Array, *, shift_mean: bool = True, unbiased: bool = True, eps: float = 1e-8) -> ArrayT:
    r"""Batch whitening over the masked entries: :math:`(x - \mu)/\sqrt{\sigma^2 + \epsilon}`, 0 on masked slots.

    :math:`\mu, \sigma^2` are the mean and the variance (Bessel-corrected if
    ``unbiased``, as verl's and TRL's ``masked_var``) over every masked entry of
    the batch; ``shift_mean=False`` adds :math:`\mu` back.  Needs two unmasked
    entries when ``unbiased``.  The deviations are computed as the z-score
    computes them (:func:`numeric.group_zscore_advantages`): from differences to
    one kept entry, with :math:`\sigma` scaled by the largest deviation before
    squaring, so entries a few ulps apart, or :math:`1000 \pm 10^{-3}`, keep
    their digits; a constant batch whitens to 0, also with ``eps=0``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import masked_whiten
    >>> print(masked_whiten(np.array([[1.0, 3.0, 99.0]]), np.array([[1, 1, 0]]), eps=0.0).round(6))
    [[-0.707107  0.707107  0.      ]]
    """
    t, m, kind = masked_inputs(require_mask(mask), x=x)
    shift_mean, unbiased = require_bool("shift_mean", shift_mean), require_bool("unbiased", unbiased)
    v = t["x"]
    mf = m.to(v.dtype)
    n = mf.sum()
    if float(n) < (2 if unbiased else 1):
        raise ValueError(f"mask must select at least {2 if unbiased else 1} entries to whiten, got {int(n)}")
    eps = require_nonnegative("eps", eps)
    pivot = v.reshape(-1)[m.reshape(-1).nonzero()[0, 0]]  # one kept entry: differences to it are exact near a tie
    d = (v - pivot) * mf
    centred = (d - d.sum() / n) * mf
    scale = centred.abs().amax()
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    var = safe**2 * ((centred / safe) ** 2).sum() / (n - 1 if unbiased else n)
    out = torch.where(scale == 0, torch.zeros_like(v), centred * torch.rsqrt(var + eps))
    if not shift_mean:
        out = out + (pivot + d.sum() / n)
    return like(kind, torch.where(m, out, torch.zeros_like(out)).to(result_dtype(x)))


def reinforce_pp_advantages(rewards: ArrayT, mask: Array, *, gamma: float = 1.0) -> ArrayT:
    r"""REINFORCE++: discounted reward-to-go within each response, whitened over the batch.

    :math:`G_t = \sum_{u \ge t} \gamma^{u-t} m_u r_u`, then :func:`masked_whiten`
    (verl ``compute_reinforce_plus_plus_outcome_advantage``).  The whitening
    couples the rows of the batch, so no fixed scale :math:`c` exists.

    References
    ----------
    J. Hu, "REINFORCE++", arXiv:2501.03262 (2025).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import reinforce_pp_advantages
    >>> r = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]); m = np.array([[1, 1, 0], [1, 1, 1]])
    >>> print(reinforce_pp_advantages(r, m).round(4))
    [[ 1.0954  1.0954  0.    ]
     [-0.7303 -0.7303 -0.7303]]
    """
    t, m, kind = masked_inputs(require_mask(mask), rewards=rewards)
    gamma = require_unit_interval("gamma", gamma)
    r = t["rewards"]
    mf = m.to(r.dtype)
    out, running = torch.empty_like(r), torch.zeros_like(r[..., 0])
    for k in reversed(range(r.shape[-1])):
        running = (r[..., k] + gamma * running) * mf[..., k]
        out[..., k] = running
    return like(kind, masked_whiten(out, m).to(result_dtype(rewards)))


def reinforce_pp_baseline_advantages(rewards: ArrayT, mask: Array) -> ArrayT:
    r"""REINFORCE++ with a baseline: group-mean-centred rewards on each token, whitened over the batch.

    ``rewards`` ``[..., G]`` (one per answer, the group last), ``mask``
    ``[..., G, T]``: :math:`A_{it} = \mathrm{whiten}(R_i - \bar R)` over every
    masked token of the batch (verl
    ``compute_reinforce_plus_plus_baseline_outcome_advantage``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import reinforce_pp_baseline_advantages
    >>> A = reinforce_pp_baseline_advantages(np.array([[1.0, 0.0]]), np.ones((1, 2, 2)))
    >>> print(A.round(6))
    [[[ 0.866025  0.866025]
      [-0.866025 -0.866025]]]
    """
    r, kind = require_group_rewards("rewards", rewards)
    centred = group_mean_advantages(r)
    m_raw = mask_of_rank("mask", mask, 2, exact=False)
    if tuple(m_raw.shape[:-1]) != tuple(r.shape):
        raise ValueError(f"mask must have shape [..., G, T] with [..., G] = {tuple(r.shape)}, got {tuple(m_raw.shape)}")
    tokens = centred[..., None].expand(m_raw.shape).contiguous()
    return like(kind, masked_whiten(tokens, mask).to(result_dtype(rewards)))


def remax_advantages(rewards: ArrayT, baseline_reward: Array, mask: Array) -> ArrayT:
    r"""ReMax: reward-to-go minus the reward of the greedy answer, :math:`A_t = \sum_{u\ge t} m_u r_u - b`.

    ``baseline_reward`` ``[B]`` is the reward of the greedy decoding of the same
    prompt (verl ``compute_remax_outcome_advantage``).  The greedy answer does not
    depend on the sampled one, so the baseline is admissible: :math:`c = 1`.

    References
    ----------
    Li et al., "ReMax", arXiv:2310.10505 (2023).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import remax_advantages
    >>> print(remax_advantages(np.array([[0.0, 1.0, 0.0]]), np.array([0.25]), np.array([[1, 1, 0]])))
    [[0.75 0.75 0.  ]]
    """
    t, m, kind = masked_inputs(require_mask(mask), rewards=rewards)
    r = t["rewards"]
    b, _ = to_tensor("baseline_reward", baseline_reward)
    if tuple(b.shape) != tuple(r.shape[:-1]):
        raise ValueError(f"baseline_reward must have shape {tuple(r.shape[:-1])}, got {tuple(b.shape)}")
    require_finite("baseline_reward", b)
    mf = m.to(r.dtype)
    returns = (r * mf).flip(-1).cumsum(-1).flip(-1)
    return like(kind, torch.where(m, returns - b.to(r)[..., None], torch.zeros_like(r)).to(result_dtype(rewards)))


def opo_advantages(rewards: ArrayT, length: Array) -> ArrayT:
    r"""OPO: the length-weighted group baseline :math:`b = \sum_j n_j R_j / \sum_j n_j`, :math:`A_i = R_i - b`.

    ``rewards`` and ``length`` ``[..., G]`` (verl ``compute_opo_outcome_advantage``;
    the baseline includes the answer itself).  The baseline moves with the
    answer's own length, so with variable lengths the expected update is not a
    multiple of :math:`\nabla J`: on TinyLM at :math:`G = 2`, enumerated over
    every pair, its best fit :math:`0.506\,\nabla J` leaves 8.6% of it unexplained
    (``tests/test_losses.py``).

    References
    ----------
    Hao et al., "On-Policy RL with Optimal Reward Baseline", arXiv:2505.23585 (2025).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import opo_advantages
    >>> print(opo_advantages(np.array([1.0, 0.0]), np.array([1.0, 3.0])))
    [ 0.75 -0.25]
    """
    r, kind = require_group_rewards("rewards", rewards)
    n, _ = require_group_rewards("length", length)
    if n.shape != r.shape:
        raise ValueError(f"length must have the shape of rewards {tuple(r.shape)}, got {tuple(n.shape)}")
    if bool((n <= 0).any()):
        raise ValueError("length must be positive")
    n = n.to(r)
    b = (n * r).sum(-1, keepdim=True) / n.sum(-1, keepdim=True)
    return like(kind, (r - b).to(result_dtype(rewards)))


def gpg_advantages(rewards: ArrayT, *, f_norm: float = 1.0, valid: str = "advantage") -> ArrayT:
    r"""GPG: centred group rewards scaled by :math:`\alpha = B / M`, :math:`A_i = \alpha (R_i - \bar R)/F`.

    ``rewards`` ``[..., n_groups, G]`` is one batch of groups (leading dimensions
    are independent batches); :math:`B` is its number of answers and :math:`M`
    the number that count as valid: with ``valid="advantage"`` (the paper)
    answers whose centred advantage is non-zero, with ``valid="reward"`` (verl
    ``compute_gpg_outcome_advantage``, ``count_nonzero(scores)``) answers whose
    *reward* is non-zero.  :math:`M` is clamped at 1.

    References
    ----------
    Chu et al., "GPG: A Simple and Strong Reinforcement Learning Baseline", arXiv:2504.02546 (2025).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import gpg_advantages
    >>> R = np.array([[1.0, 0.0], [1.0, 1.0]])
    >>> print(gpg_advantages(R)), print(gpg_advantages(R, valid="reward").round(6))
    [[ 1. -1.]
     [ 0.  0.]]
    [[ 0.666667 -0.666667]
     [ 0.        0.      ]]
    (None, None)
    """
    r, kind = require_group_rewards("rewards", rewards)
    if r.ndim < 2:
        raise ValueError(f"rewards must have shape [..., n_groups, G], got {tuple(r.shape)}")
    if valid not in ("advantage", "reward"):
        raise ValueError(f"valid must be 'advantage' or 'reward', got {valid!r}")
    f_norm = require_positive("f_norm", f_norm)
    centred = group_mean_advantages(r)
    counted = (centred if valid == "advantage" else r) != 0
    alpha = (r.shape[-1] * r.shape[-2]) / counted.sum((-2, -1), keepdim=True).clamp(min=1).to(r)
    return like(kind, (alpha * centred / f_norm).to(result_dtype(rewards)))


def _bessel_std(r: torch.Tensor) -> torch.Tensor:
    """The Bessel std over the last dimension, from cancellation-safe deviations scaled before squaring (as the z-score)."""
    centred = group_mean_advantages(r)
    scale = centred.abs().amax(-1, keepdim=True)
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return safe * ((centred / safe) ** 2).sum(-1, keepdim=True).div(r.shape[-1] - 1).sqrt()


def passk_advantages(rewards: ArrayT, *, eps: float = 1e-6, std: bool = False) -> ArrayT:
    r"""The pass@k advantage: only the best answer of a group gets :math:`R_{(1)} - R_{(2)}`, the rest 0.

    With ``std=True`` it is divided by the group's Bessel std plus ``eps``
    (verl ``compute_grpo_passk_outcome_advantage`` with ``norm_adv_by_std_in_grpo``).
    Ties for the best: the first one gets it (the margin is then 0).  For a
    binary reward :math:`c = (1-p)^{G-1}` without the std: the update is
    :math:`\nabla\,\mathrm{pass@}G / G`.

    References
    ----------
    Chen et al., "Pass@k Training", arXiv:2508.10751 (2025); verl cites arXiv:2503.19595.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import passk_advantages
    >>> print(passk_advantages(np.array([0.2, 0.9, 0.5])))
    [0.  0.4 0. ]
    """
    r, kind = require_group_rewards("rewards", rewards)
    if r.shape[-1] < 2:
        raise ValueError(f"rewards must hold G >= 2 answers per group, got {r.shape[-1]}")
    eps = require_nonnegative("eps", eps)
    top = r.topk(2, -1)
    margin = top.values[..., :1] - top.values[..., 1:2]
    if require_bool("std", std):
        margin = torch.where(margin == 0, margin, margin / (_bessel_std(r) + eps))  # a tie for the best: 0, also at eps = 0
    out = torch.zeros_like(r).scatter(-1, top.indices[..., :1], margin)
    return like(kind, out.to(result_dtype(rewards)))
