r"""The selected tokens of Clip-Cov and KL-Cov: which tokens of a batch those losses treat apart.

Cui et al. (arXiv:2505.22617) relate the change of a policy's entropy to the
covariance, over the batch's tokens, of a token's log-probability and its
advantage, and tame it by treating the tokens of large covariance apart:

.. math::

    \mathrm{Cov}_{it} = \bigl(A_{it} - \bar A\bigr)\bigl(\ell_{it} - \bar\ell\bigr),

with :math:`\bar A`, :math:`\bar\ell` the means over the batch's response
tokens.  Clip-Cov drops the loss of a random few of the tokens whose
covariance lies in a band :math:`(\omega_{\mathrm{low}}, \omega_{\mathrm{high}})`
(among those PPO does not clip already); KL-Cov adds a penalty
:math:`\beta|\ell - \ell_{\mathrm{old}}|` to the tokens of largest covariance.

Which tokens are selected depends on the whole batch (its means, its rank
order) and, for Clip-Cov, on a random draw, so :func:`numeric.policy_loss`
takes the selection as an argument and these functions compute the one verl
computes (``verl/trainer/ppo/core_algos.py``, ``compute_policy_loss_clip_cov``
and ``compute_policy_loss_kl_cov`` at ``b178a3c``), the random draw from an
explicit ``seed``.  Read again at verl-project/verl ``1dda039`` (2026-08-22),
the two rules are unchanged: each selects ``max(int(ratio * N), 1)`` tokens of
the batch's :math:`N` (``core_algos.py:1817`` and ``:1905``: one token at the
default ratio on a small batch, never none), and Clip-Cov's band is open
(``:1818``: a covariance exactly on a bound is no candidate).  The per-token weights of a selected and of an unselected
token are certified (:func:`numeric.policy_weight`); the expected update over
the selection is not stated anywhere (:func:`derivations.methods.undecided`).
"""

from __future__ import annotations

import torch

from .._types import Array, ArrayT
from .._validate import like, masked_inputs, require_int, require_pair, require_real, to_tensor

__all__ = ["clip_cov_selection", "kl_cov_selection", "m2po_selection"]


def _fraction(value: object) -> float:
    value = require_real("fraction", value)
    if not 0 < value <= 1:
        raise ValueError(f"fraction must lie in (0, 1] (the share of the batch's response tokens to select), got {value}")
    return value


def _covariance(log_prob: Array, advantages: Array, mask: Array | None, **more: Array) -> tuple[torch.Tensor, torch.Tensor, dict, str]:
    """``(Cov, keep, tensors, kind)``: the centred products over the kept tokens (means over the kept tokens), float64."""
    if mask is None:
        raise ValueError("mask is required: a [B, T] 0/1 or boolean response mask")
    lp, _ = to_tensor("log_prob", log_prob)
    A, _ = to_tensor("advantages", advantages)
    if lp.ndim == 2 and A.shape == lp.shape[:1]:
        A = A[:, None].expand(lp.shape)
    elif A.shape != lp.shape:
        raise ValueError(f"advantages must have shape [B] = {tuple(lp.shape[:1])} or the shape of log_prob {tuple(lp.shape)}, got {tuple(A.shape)}")
    if isinstance(advantages, torch.Tensor):
        A = A.to(lp.device)
    t, keep, kind = masked_inputs(mask, "mask", log_prob=log_prob, advantages=A, **more)
    t = {name: x.detach().double() for name, x in t.items()}
    n = keep.sum().clamp(min=1)
    centred = {name: torch.where(keep, t[name] - t[name].sum() / n, 0.0) for name in ("log_prob", "advantages")}
    return centred["advantages"] * centred["log_prob"], keep, t, kind


def clip_cov_selection(log_prob: ArrayT, old_log_prob: Array, advantages: Array, mask: Array, *, fraction: float = 2e-4,
                       bounds: tuple[float, float] = (1.0, 5.0), eps_low: float = 0.2, eps_high: float = 0.2, seed: int = 0) -> ArrayT:
    r"""Clip-Cov's selected tokens: a uniformly random ``max(int(fraction·N), 1)`` of the candidates (all of them if fewer).

    A candidate is a response token that PPO does not clip (:math:`-A\,\mathrm{clip}(r) \le -A r`)
    and whose covariance :math:`\mathrm{Cov}_{it}` lies strictly inside
    ``bounds`` :math:`= (\omega_{\mathrm{low}}, \omega_{\mathrm{high}})`; :math:`N` counts the
    batch's response tokens.  verl's defaults: ``clip_cov_ratio = 2e-4``,
    ``(clip_cov_lb, clip_cov_ub) = (1, 5)``; it draws from torch's global
    generator, this function from a generator seeded with ``seed``.

    Parameters
    ----------
    log_prob : numpy array or torch tensor
        ``[B, T]`` token log-probabilities under the current policy.
    old_log_prob : numpy array or torch tensor
        ``[B, T]`` token log-probabilities under the old policy.
    advantages : numpy array or torch tensor
        ``[B, T]``, or ``[B]`` (broadcast over the row).
    mask : numpy array or torch tensor
        ``[B, T]`` 0/1 or boolean response mask.
    fraction : float
        In :math:`(0, 1]`: the share of the response tokens to select.
    bounds : (float, float)
        The open covariance band, ``low < high``.
    eps_low : float
        PPO's clip low side (verl's ``clip_ratio_low``).
    eps_high : float
        PPO's clip high side (verl's ``clip_ratio_high``).
    seed : int
        Seeds the draw: the same inputs and seed give the same selection.

    Returns
    -------
    A boolean ``[B, T]`` array of ``log_prob``'s kind (torch: on its device).

    Examples
    --------
    >>> import torch
    >>> from numeric.losses import clip_cov_selection
    >>> lp = torch.tensor([[-0.2, -3.0, -1.0], [-2.5, -0.1, -1.0]]); A = torch.tensor([2.0, -2.0])
    >>> clip_cov_selection(lp, lp, A, torch.ones(2, 3), fraction=0.5, bounds=(0.5, 5.0)).tolist()  # Cov 2.2, 0.6, 2.4 in the band
    [[True, False, True], [True, False, False]]
    >>> int(clip_cov_selection(lp, lp, A, torch.ones(2, 3), fraction=0.34, bounds=(0.5, 5.0)).sum())  # 2 of the 3, drawn
    2
    """
    fraction = _fraction(fraction)
    low, high = require_pair("bounds", bounds, require_real)
    if not low < high:
        raise ValueError(f"bounds must be (low, high) with low < high, got {bounds!r}")
    eps_l, eps_h = require_real("eps_low", eps_low), require_real("eps_high", eps_high)
    if not (0 <= eps_l <= 1 and eps_h >= 0):
        raise ValueError(f"eps_low must lie in [0, 1] and eps_high be >= 0, got {eps_low}, {eps_high}")
    gen = torch.Generator().manual_seed(require_int("seed", seed))
    cov, keep, t, kind = _covariance(log_prob, advantages, mask, old_log_prob=old_log_prob)
    r = (t["log_prob"] - t["old_log_prob"]).exp()
    A = t["advantages"]
    clipped = -A * r.clamp(1 - eps_l, 1 + eps_h) > -A * r
    candidates = torch.nonzero(keep & ~clipped & (cov > low) & (cov < high))
    count = max(int(fraction * int(keep.sum())), 1)
    chosen = candidates[torch.randperm(len(candidates), generator=gen)[:count].to(candidates.device)]
    selected = torch.zeros_like(keep)
    selected[chosen[:, 0], chosen[:, 1]] = True
    return like(kind, selected)


def kl_cov_selection(log_prob: ArrayT, advantages: Array, mask: Array, *, fraction: float = 2e-4) -> ArrayT:
    r"""KL-Cov's selected tokens: the ``max(int(fraction·N), 1)`` response tokens of largest covariance :math:`\mathrm{Cov}_{it}`.

    :math:`N` counts the batch's response tokens (none selected when it is 0).
    verl's default ``kl_cov_ratio`` is ``2e-4``.  Ties are broken by
    ``torch.topk``, as in verl.

    Parameters
    ----------
    log_prob : numpy array or torch tensor
        ``[B, T]`` current token log-probabilities.
    advantages : numpy array or torch tensor
        ``[B, T]``, or ``[B]`` (broadcast over the row).
    mask : numpy array or torch tensor
        ``[B, T]`` 0/1 or boolean response mask.
    fraction : float
        In :math:`(0, 1]`: the share of the response tokens to select.

    Returns
    -------
    A boolean ``[B, T]`` array of ``log_prob``'s kind (torch: on its device).

    Examples
    --------
    >>> import torch
    >>> from numeric.losses import kl_cov_selection
    >>> lp = torch.tensor([[-0.2, -3.0, -1.0], [-2.5, -0.1, -1.0]]); A = torch.tensor([2.0, -2.0])
    >>> kl_cov_selection(lp, A, torch.ones(2, 3), fraction=0.4).tolist()
    [[True, False, False], [True, False, False]]
    """
    fraction = _fraction(fraction)
    cov, keep, _, kind = _covariance(log_prob, advantages, mask)
    N = int(keep.sum())
    selected = torch.zeros_like(keep)
    if N > 0:
        flat = torch.nonzero(keep.reshape(-1)).squeeze(-1)
        top = torch.topk(cov.reshape(-1)[flat], max(1, int(N * fraction))).indices
        selected.reshape(-1)[flat[top]] = True
    return like(kind, selected)


def m2po_selection(sampler_log_prob: ArrayT, old_log_prob: Array, mask: Array, *, threshold: float) -> ArrayT:
    r"""M2PO's dropped tokens: those of largest second moment :math:`(\ell_{\mathrm{beh}} - \ell_{\mathrm{prox}})^2`, until the rest's mean is below ``threshold``.

    The batch's response tokens are sorted by :math:`m_2 = (\ell_{\mathrm{beh}} - \ell_{\mathrm{prox}})^2`, largest first, and
    the first :math:`k` dropped, :math:`k` the first index whose suffix mean :math:`\frac{1}{N-k}\sum_{j \ge k} m_{2,(j)}`
    is strictly below the threshold (every suffix at or above it: all but the smallest dropped).  AReaL's
    ``_apply_m2po_masking`` and ``_get_m2po_loss_mask`` (areal-project/AReaL ``cbff54d``, ``areal/trainer/ppo/actor.py:933-1014``);
    ties in :math:`m_2` go as ``torch.sort`` orders them.  ``sampler_log_prob`` is AReaL's behaviour log-probability (the
    rollout's), ``old_log_prob`` its proximal one.  Returns a boolean ``[B, T]``: True on a dropped token, the
    ``selected`` of ``policy_loss("m2po", ...)``, which leaves it out of the denominators too (AReaL replaces the loss mask).

    Examples
    --------
    >>> import torch
    >>> from numeric.losses.selection import m2po_selection
    >>> beh = torch.tensor([[0.0, 0.0, 0.0, 0.0]]); prox = torch.tensor([[-2.0, -0.1, 0.0, -0.2]])
    >>> m2po_selection(beh, prox, torch.ones(1, 4), threshold=0.015).tolist()  # m2 = 4, 0.01, 0, 0.04; suffix means 1.01, 0.0167, 0.005
    [[True, False, False, True]]
    """
    threshold = require_real("threshold", threshold)
    if not threshold > 0:
        raise ValueError(f"threshold must be > 0 (the largest mean second moment kept), got {threshold}")
    t, keep, kind = masked_inputs(mask, "mask", sampler_log_prob=sampler_log_prob, old_log_prob=old_log_prob)
    m2 = (t["sampler_log_prob"].double() - t["old_log_prob"].double()) ** 2
    values = m2[keep]
    dropped = torch.zeros_like(keep)
    if values.numel() == 0:
        return like(kind, dropped)
    ordered, order = torch.sort(values, descending=True)
    counts = torch.arange(len(ordered), 0, -1, dtype=ordered.dtype, device=ordered.device)
    below = torch.nonzero(ordered.flip(0).cumsum(0).flip(0) / counts < threshold)
    k = int(below[0]) if len(below) else len(ordered) - 1
    flat = torch.zeros_like(values, dtype=torch.bool)
    flat[order[:k]] = True
    dropped[keep] = flat
    return like(kind, dropped)
