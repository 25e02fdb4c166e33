r"""Advantage estimators trainers ship: whitening, REINFORCE++, ReMax, OPO, GPG, pass@k."""

from __future__ import annotations

import torch

from .._validate import (
    compute_dtype,
    like,
    masked_inputs,
    require_finite,
    require_nonnegative,
    require_real,
    result_dtype,
    to_tensor,
)
from ..group_baselines import _centred, group_advantage_weights
from .tokens import mask_of_rank

__all__ = [
    "advantage_scale",
    "gpg_advantages",
    "masked_whiten",
    "opo_advantages",
    "passk_advantages",
    "reinforce_pp_advantages",
    "reinforce_pp_baseline_advantages",
    "remax_advantages",
]


def masked_whiten(x, mask, shift_mean: bool = True, unbiased: bool = True, eps: float = 1e-8):
    r"""Batch whitening over the masked entries: :math:`(x - \mu)/\sqrt{\sigma^2 + \epsilon}`, 0 on masked slots.

    :math:`\mu, \sigma^2` are the mean and the variance (Bessel-corrected if
    ``unbiased``, as verl's and TRL's ``masked_var``) over every masked entry of
    the batch; ``shift_mean=False`` adds :math:`\mu` back.  Needs two unmasked
    entries when ``unbiased``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import masked_whiten
    >>> print(masked_whiten(np.array([[1.0, 3.0, 99.0]]), np.array([[1, 1, 0]]), eps=0.0).round(6))
    [[-0.707107  0.707107  0.      ]]
    """
    t, m, kind = masked_inputs(mask, x=x)
    v = t["x"]
    mf = m.to(v.dtype)
    n = mf.sum()
    if float(n) < (2 if unbiased else 1):
        raise ValueError(f"mask must select at least {2 if unbiased else 1} entries to whiten, got {int(n)}")
    eps = require_nonnegative("eps", eps)
    mean = (v * mf).sum() / n
    var = (((v - mean) * mf) ** 2).sum() / (n - 1 if unbiased else n)
    out = (v - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return like(kind, torch.where(m, out, torch.zeros_like(out)).to(result_dtype(x)))


def reinforce_pp_advantages(token_reward, mask, gamma: float = 1.0):
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
    t, m, kind = masked_inputs(mask, token_reward=token_reward)
    gamma = require_nonnegative("gamma", gamma)
    r = t["token_reward"]
    mf = m.to(r.dtype)
    out, running = torch.empty_like(r), torch.zeros_like(r[..., 0])
    for k in reversed(range(r.shape[-1])):
        running = (r[..., k] + gamma * running) * mf[..., k]
        out[..., k] = running
    return like(kind, masked_whiten(out, m).to(result_dtype(token_reward)))


def _group_rewards(name: str, reward):
    r, kind = to_tensor(name, reward)
    if r.ndim < 1:
        raise ValueError(f"{name} must have a group dimension (the last one), got a scalar")
    return require_finite(name, r).to(compute_dtype(r.dtype)), kind


def reinforce_pp_baseline_advantages(reward, mask):
    r"""REINFORCE++ with a baseline: group-mean-centred rewards on each token, whitened over the batch.

    ``reward`` ``[..., G]`` (one per answer, the group last), ``mask``
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
    r, kind = _group_rewards("reward", reward)
    centred = _centred(r)
    m_raw = mask_of_rank("mask", mask, 2, exact=False)
    if tuple(m_raw.shape[:-1]) != tuple(r.shape):
        raise ValueError(f"mask must have shape [..., G, T] with [..., G] = {tuple(r.shape)}, got {tuple(m_raw.shape)}")
    tokens = centred[..., None].expand(m_raw.shape).contiguous()
    return like(kind, masked_whiten(tokens, mask).to(result_dtype(reward)))


def remax_advantages(token_reward, baseline_reward, mask):
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
    t, m, kind = masked_inputs(mask, token_reward=token_reward)
    r = t["token_reward"]
    b, _ = to_tensor("baseline_reward", baseline_reward)
    if tuple(b.shape) != tuple(r.shape[:-1]):
        raise ValueError(f"baseline_reward must have shape {tuple(r.shape[:-1])}, got {tuple(b.shape)}")
    require_finite("baseline_reward", b)
    mf = m.to(r.dtype)
    returns = (r * mf).flip(-1).cumsum(-1).flip(-1)
    return like(kind, torch.where(m, returns - b.to(r)[..., None], torch.zeros_like(r)).to(result_dtype(token_reward)))


def opo_advantages(reward, length):
    r"""OPO: the length-weighted group baseline :math:`b = \sum_j n_j R_j / \sum_j n_j`, :math:`A_i = R_i - b`.

    ``reward`` and ``length`` ``[..., G]`` (verl ``compute_opo_outcome_advantage``;
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
    r, kind = _group_rewards("reward", reward)
    n, _ = _group_rewards("length", length)
    if n.shape != r.shape:
        raise ValueError(f"length must have the shape of reward {tuple(r.shape)}, got {tuple(n.shape)}")
    if bool((n <= 0).any()):
        raise ValueError("length must be positive")
    n = n.to(r)
    b = (n * r).sum(-1, keepdim=True) / n.sum(-1, keepdim=True)
    return like(kind, (r - b).to(result_dtype(reward)))


def gpg_advantages(reward, f_norm: float = 1.0, valid: str = "advantage"):
    r"""GPG: centred group rewards scaled by :math:`\alpha = B / M`, :math:`A_i = \alpha (R_i - \bar R)/F`.

    ``reward`` ``[..., n_groups, G]`` is one batch of groups (leading dimensions
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
    r, kind = _group_rewards("reward", reward)
    if r.ndim < 2:
        raise ValueError(f"reward must have shape [..., n_groups, G], got {tuple(r.shape)}")
    if valid not in ("advantage", "reward"):
        raise ValueError(f"valid must be 'advantage' or 'reward', got {valid!r}")
    f_norm = require_real("f_norm", f_norm)
    if not f_norm > 0:
        raise ValueError(f"f_norm must be > 0, got {f_norm}")
    centred = _centred(r)
    counted = (centred if valid == "advantage" else r) != 0
    alpha = (r.shape[-1] * r.shape[-2]) / counted.sum((-2, -1), keepdim=True).clamp(min=1).to(r)
    return like(kind, (alpha * centred / f_norm).to(result_dtype(reward)))


def passk_advantages(reward, eps: float = 1e-6, std: bool = False):
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
    r, kind = _group_rewards("reward", reward)
    if r.shape[-1] < 2:
        raise ValueError(f"reward must hold G >= 2 answers per group, got {r.shape[-1]}")
    eps = require_nonnegative("eps", eps)
    top = r.topk(2, -1)
    margin = top.values[..., :1] - top.values[..., 1:2]
    if std:
        margin = margin / (r.std(-1, keepdim=True) + eps)
    out = torch.zeros_like(r).scatter(-1, top.indices[..., :1], margin)
    return like(kind, out.to(result_dtype(reward)))


def advantage_scale(advantages, p: float, G: int) -> float:
    r"""The exact scale :math:`c` in :math:`\mathbb{E}[A_1 \nabla\log\pi(o_1)] = c\,\nabla J` for a binary reward.

    With :math:`R \in \{0, 1\}`, :math:`P(R = 1) = p`, the conditional mean
    :math:`a(v) = \mathbb{E}[A_1 \mid R_1 = v]` of any group estimator is
    computed exactly by :func:`~numeric.group_advantage_weights`; then
    :math:`\mathbb{E}[A_1 s_1] = \mathbb{E}[a(R) s] = (a(1) - a(0))\nabla p`,
    so :math:`c = a(1) - a(0)`.  ``advantages`` maps ``[n, G]`` rewards to
    ``[n, G]`` advantages, each row one group.

    Examples
    --------
    >>> from numeric import advantage_scale, passk_advantages, rloo_advantages
    >>> round(advantage_scale(rloo_advantages, 0.3, 4), 12), round(advantage_scale(passk_advantages, 0.3, 4), 12)
    (1.0, 0.343)
    """
    p = require_real("p", p)
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    a = group_advantage_weights(torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([1 - p, p], dtype=torch.float64), G, advantages)
    return float(a[1] - a[0])
