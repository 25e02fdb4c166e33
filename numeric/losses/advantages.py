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
    "batch_scaled_advantages",
    "gpg_advantages",
    "masked_whiten",
    "opo_advantages",
    "optimal_token_baseline_advantages",
    "passk_advantages",
    "reinforce_pp_advantages",
    "reinforce_pp_baseline_advantages",
    "remax_advantages",
]


def masked_whiten(x: ArrayT, mask: Array, *, shift_mean: bool = True, unbiased: bool = True, eps: float = 1e-8, count_eps: float = 0.0) -> ArrayT:
    r"""Batch whitening over the masked entries: :math:`(x - \mu)/\sqrt{\sigma^2 + \epsilon}`, 0 on masked slots.

    :math:`\mu, \sigma^2` are the mean and the variance (Bessel-corrected if
    ``unbiased``, as verl's and TRL's ``masked_var``) over every masked entry of
    the batch; ``shift_mean=False`` adds :math:`\mu` back.  Needs two unmasked
    entries when ``unbiased``.  The deviations are computed as the z-score
    computes them (:func:`numeric.group_zscore_advantages`): from differences to
    one kept entry, with :math:`\sigma` scaled by the largest deviation before
    squaring, so entries a few ulps apart, or :math:`1000 \pm 10^{-3}`, keep
    their digits; a constant batch whitens to 0, also with ``eps=0`` (and ``count_eps=0``).

    ``count_eps`` reproduces verl's ``masked_mean``, which divides by the count
    plus ``1e-8``: the mean becomes :math:`\sum x/(n + \epsilon_n)` and the
    variance :math:`\sum (x - \mu)^2/(n + \epsilon_n)`, times :math:`n/(n-1)` when
    ``unbiased`` (verl ``verl/utils/torch_functional.py:294-346`` at ``1dda039``;
    :func:`numeric.losses.gdpo_advantages` passes ``count_eps=1e-8``).

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
    eps, count_eps = require_nonnegative("eps", eps), require_nonnegative("count_eps", count_eps)
    pivot = v.reshape(-1)[m.reshape(-1).nonzero()[0, 0]]  # one kept entry: differences to it are exact near a tie
    d = (v - pivot) * mf
    shift = d.sum() / n if count_eps == 0 else (d.sum() - count_eps * pivot) / (n + count_eps)  # the mean, less the pivot
    centred = (d - shift) * mf
    scale = centred.abs().amax()
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    if count_eps == 0:
        var = safe**2 * ((centred / safe) ** 2).sum() / (n - 1 if unbiased else n)
    else:
        var = safe**2 * ((centred / safe) ** 2).sum() / (n + count_eps) * (n / (n - 1) if unbiased else 1)
    out = torch.where(scale == 0, torch.zeros_like(v), centred * torch.rsqrt(var + eps))
    if not shift_mean:
        out = out + (pivot + shift)
    return like(kind, torch.where(m, out, torch.zeros_like(out)).to(result_dtype(x)))


def reinforce_pp_advantages(rewards: ArrayT, mask: Array, *, gamma: float = 1.0, unbiased: bool = True, eps: float = 1e-8) -> ArrayT:
    r"""REINFORCE++: discounted reward-to-go within each response, whitened over the batch.

    :math:`G_t = \sum_{u \ge t} \gamma^{u-t} m_u r_u`, then :func:`masked_whiten`
    (verl ``compute_reinforce_plus_plus_outcome_advantage``).  The whitening
    couples the rows of the batch, so no fixed scale :math:`c` exists.
    ``unbiased`` (Bessel's variance, verl's ``masked_var``) and ``eps`` (added to
    the variance, verl's ``1e-8``) are :func:`masked_whiten`'s, with verl's values
    as defaults.

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
    return like(kind, masked_whiten(out, m, unbiased=unbiased, eps=eps).to(result_dtype(rewards)))


def reinforce_pp_baseline_advantages(rewards: ArrayT, mask: Array, *, unbiased: bool = True, eps: float = 1e-8) -> ArrayT:
    r"""REINFORCE++ with a baseline: group-mean-centred rewards on each token, whitened over the batch.

    ``rewards`` ``[..., G]`` (one per answer, the group last), ``mask``
    ``[..., G, T]``: :math:`A_{it} = \mathrm{whiten}(R_i - \bar R)` over every
    masked token of the batch (verl
    ``compute_reinforce_plus_plus_baseline_outcome_advantage``); ``unbiased`` and
    ``eps`` as in :func:`reinforce_pp_advantages`.

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
    return like(kind, masked_whiten(tokens, mask, unbiased=unbiased, eps=eps).to(result_dtype(rewards)))


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
    Chen et al., "Pass@k Training", arXiv:2508.10751 (2025).

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


def batch_scaled_advantages(rewards: ArrayT, *, eps: float = 1e-4) -> ArrayT:
    r"""Group-centred rewards over the batch's std: :math:`A_i = (R_i - \bar R_{\mathrm{group}})/(\sigma_{\mathrm{batch}} + \epsilon)` (TRL ``scale_rewards="batch"``).

    ``rewards`` ``[..., n_groups, G]`` is one batch of groups (leading
    dimensions are independent batches).  The mean is each group's; the std is
    Bessel's over every answer of the batch, all groups together (TRL
    ``f2cd57710ae3``: ``nanstd(rewards)``, and 0 for a batch of one answer), and
    ``eps`` is TRL's ``1e-4``.  ``scale_rewards="group"`` is
    :func:`numeric.group_zscore_advantages` with ``std="bessel"``, ``eps=1e-4``;
    ``"none"`` is :func:`numeric.group_mean_advantages`.

    The std is one number for the whole batch, so within a batch this is the
    Dr. GRPO advantage times a constant: a group of constant rewards gets 0, and
    no group's advantage is blown up by its own small std.  Across batches the
    constant is random and depends on every group, so for a binary reward no
    fixed scale :math:`c(p, G)` exists (unlike the group z-score).

    References
    ----------
    K. Liu et al., "Part I: Tricks or traps? A deep dive into RL for LLM reasoning", arXiv:2508.08221 (2025) (batch-level std).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import batch_scaled_advantages
    >>> print(batch_scaled_advantages(np.array([[1.0, 0.0], [1.0, 1.0]]), eps=0.0).round(6))
    [[ 1. -1.]
     [ 0.  0.]]
    """
    r, kind = require_group_rewards("rewards", rewards)
    if r.ndim < 2:
        raise ValueError(f"rewards must have shape [..., n_groups, G], got {tuple(r.shape)}")
    eps = require_nonnegative("eps", eps)
    flat = r.reshape(*r.shape[:-2], -1)
    std = _bessel_std(flat)[..., None] if flat.shape[-1] > 1 else torch.zeros_like(flat[..., None])
    return like(kind, (group_mean_advantages(r) / (std + eps)).to(result_dtype(rewards)))


def optimal_token_baseline_advantages(
    rewards: ArrayT,
    log_prob: Array,
    sum_pi_squared: Array,
    mask: Array,
    *,
    is_weights: Array | None = None,
    align: str = "position",
    handle_zero_tail: bool | None = None,
    eps: float = 1e-8,
) -> ArrayT:
    r"""verl's optimal token baseline (OTB): a baseline per step, :math:`A_{it} = R_{i,\ge t} - b_t`, weighted by the path's score energy.

    For each group (``[..., G, T]``, the group in the second-to-last
    dimension) with token rewards :math:`R`, reward-to-go
    :math:`R_{i,\ge t} = \sum_{u \ge t} m_{iu} R_{iu}` and

    .. math::

        \eta_{it} = \lVert \nabla_z \log\pi(o_{it}) \rVert^2 = 1 - 2\pi(o_{it}) + \sum_a \pi_a^2,
        \qquad \nu_{it} = \sum_{u \le t} m_{iu}\, \eta_{iu}\, v_{iu}^2,
        \qquad b_t = \frac{\sum_i m_{it} R_{i,\ge t} \nu_{it}}{\sum_i m_{it} \nu_{it} + \epsilon},

    :math:`\eta` the squared norm of the score of a softmax step in its logits
    :math:`z` (:math:`e_a - \pi`, whose squared norm is the middle expression;
    ``tests/test_losses.py`` checks it against autograd), :math:`\pi(o)` from
    ``log_prob`` (verl: ``old_log_probs``), :math:`\sum_a\pi_a^2` given as
    ``sum_pi_squared`` (from logits: ``(stable_softmax(z) ** 2).sum(-1)``), and
    :math:`v` the optional sampler-correction weights ``is_weights`` (verl
    ``rollout_is_weights``; 1 without).  :math:`b_t` minimises
    :math:`\sum_i m_{it} \nu_{it} (R_{i,\ge t} - b)^2`, the group's estimate of
    :math:`\mathbb E[\nu_t (R_{\ge t} - b)^2]`; :math:`\nu_t` stands in for
    :math:`\lVert\sum_{u\le t} s_u\rVert^2`, whose cross terms vanish in
    expectation (:func:`derivations.off_policy.martingale_orthogonality`), so
    it is verl's variance proxy, not the exact minimiser of the estimator's
    variance.  The baseline uses every answer of the group, the answer itself
    included, so it is not an admissible (independent) baseline and no fixed
    scale :math:`c` exists.

    ``align`` says which tokens of different answers share a :math:`b_t`:
    ``"position"`` the same column :math:`t` (verl
    ``compute_optimal_token_baseline_advantage``), ``"response"`` the
    :math:`k`-th masked token of each answer, so that tool tokens between turns
    do not shift the count (verl ``compute_multi_turn_optimal_token_baseline_advantage``,
    ``tir_optimal_token_baseline``; there answers with no token are left out
    of their group).  A group of one answer gets no baseline (:math:`A = G`).
    ``handle_zero_tail`` sets the baseline to 0 beyond the second longest
    answer on the answer that is the unique longest, which would otherwise
    be its own baseline there (:math:`A \approx 0`).

    Two readings of verl.  At ``b178a3c`` (``verl/trainer/ppo/core_algos.py:758-873``)
    ``handle_zero_tail`` defaulted to ``False`` by position and ``True`` by
    response; verl ``8acd940`` (#5380, 2026-02-24) made it ``True`` for both, as
    at ``1dda039`` (``core_algos.py:871-987`` and ``990-1121``; the multi-turn
    docstring there still says ``False``).  ``handle_zero_tail=None`` keeps the
    ``b178a3c`` defaults, so that a call never changes its number; verl
    ``1dda039`` is ``handle_zero_tail=True``.  (At ``b178a3c`` verl's trainer did
    not pass ``old_log_probs`` to either estimator, a ``TypeError`` through the
    trainer, fixed by #5615, ``e2e80d1``.)  verl takes ``(token_level_rewards,
    response_mask, index, old_log_probs, sum_pi_squared)`` with groups given by
    ``index``; here the groups are contiguous and the mask comes after the
    tensors.  verl returns the advantage and :math:`G` both, this function the
    advantage.  The expected update is no multiple of :math:`\nabla J` (on the
    toy LM at :math:`G = 2`, enumerated: ``tests/test_estimators.py``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import optimal_token_baseline_advantages
    >>> r = np.array([[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]])     # one group of two answers
    >>> m = np.array([[[1, 1, 0], [1, 1, 1]]])
    >>> lp, s2 = np.log(np.full((1, 2, 3), 0.5)), np.full((1, 2, 3), 0.5)   # w = 1 - 1 + 0.5 = 0.5
    >>> print(optimal_token_baseline_advantages(r, lp, s2, m).round(6))
    [[[ 0.5  0.5  0. ]
      [-0.5 -0.5  0. ]]]
    """
    if align not in ("position", "response"):
        raise ValueError(f"align must be 'position' or 'response', got {align!r}")
    tail = (align == "response") if handle_zero_tail is None else require_bool("handle_zero_tail", handle_zero_tail)
    eps = require_nonnegative("eps", eps)
    arrays: dict[str, object] = {"rewards": rewards, "log_prob": log_prob, "sum_pi_squared": sum_pi_squared}
    if is_weights is not None:
        arrays["is_weights"] = is_weights
    t, m, kind = masked_inputs(require_mask(mask), "mask", **arrays)
    r = t["rewards"]
    if r.ndim < 2:
        raise ValueError(f"rewards must have shape [..., G, T], got {tuple(r.shape)}")
    lp, s2 = t["log_prob"], t["sum_pi_squared"]
    if bool((lp > 0).any()):
        raise ValueError("log_prob must be <= 0 where mask is 1 (log-probabilities)")
    if bool(((s2 < 0) | (s2 > 1)).any()):
        raise ValueError("sum_pi_squared must lie in [0, 1] where mask is 1 (a sum of squared probabilities)")
    mf = m.to(r.dtype)
    returns = r.flip(-1).cumsum(-1).flip(-1) * mf
    w = (1 - 2 * lp.exp() + s2) * mf
    if is_weights is not None:
        if bool((t["is_weights"] < 0).any()):
            raise ValueError("is_weights must be >= 0 where mask is 1 (importance weights)")
        w = w * t["is_weights"].detach() ** 2
    W = w.cumsum(-1) * mf
    n = m.sum(-1)  # [..., G]
    T = r.shape[-1]
    if align == "response":
        k = torch.where(m, m.cumsum(-1) - 1, T)  # the k-th response token of its row; T is a dump column
        compact = lambda x: torch.zeros(*x.shape[:-1], T + 1, dtype=x.dtype, device=x.device).scatter(-1, k, x)[..., :T]
        returns, W = compact(returns), compact(W)
        members = (n > 0).sum(-1, keepdim=True)
    else:
        members = torch.full_like(n[..., :1], n.shape[-1])
    b = (returns * W).sum(-2, keepdim=True) / (W.sum(-2, keepdim=True) + eps)
    b = torch.where((members > 1)[..., None], b, torch.zeros_like(b)).expand(returns.shape)
    if tail and n.shape[-1] >= 2:
        top = n.topk(2, -1).values
        longest, second = top[..., :1], top[..., 1:2]
        unique = ((n == longest).sum(-1, keepdim=True) == 1) & (longest > second)
        row = (n == longest) & unique  # [..., G]
        cols = torch.arange(T, device=r.device) >= second[..., None]  # [..., 1, T]
        b = torch.where(row[..., None] & cols, torch.zeros_like(b), b)
    adv = returns - b
    if align == "response":
        adv = adv.gather(-1, torch.where(m, m.cumsum(-1) - 1, 0))
    return like(kind, torch.where(m, adv, torch.zeros_like(adv)).to(result_dtype(rewards)))
