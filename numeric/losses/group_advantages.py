r"""Group advantages as the trainers compute them: a flat batch, a group index, ragged groups, and their conventions.

A trainer scores a flat batch of responses, one reward each, with an index
that names each response's prompt (verl's ``uid``, TRL's contiguous
``num_generations``).  The groups may differ in size (failed or filtered
rollouts), and a group may hold one response.  What happens there is a
convention of each trainer, and so are the constants:

* :func:`grouped_advantages` applies any ``[..., G]`` estimator of the package
  to each group of a ragged batch, with the trainer's rule for a group of one
  (``singleton``: the reward times a constant, or refused);
* :func:`maxrl_advantages` (prime-rl ``max_rl``, SkyRL ``maxrl``),
  :func:`length_penalized_advantages` (prime-rl's GRPO length penalty) are
  ``[..., G]`` estimators in the same convention;
* :func:`gdpo_advantages` (verl ``gdpo``, TRL ``normalize_then_sum``, ms-swift
  ``gdpo``) and :func:`normalize_by_levels` (AReaL's mean and std levels) need
  the whole batch, and take the flat scores and the index;
* :func:`ema_baseline_advantages` (prime-rl ``rae``) keeps a baseline across
  batches: its state is returned with the advantages.

What each does to :math:`\mathbb{E}[A_i\nabla\log\pi(o_i)]` is in the losses
chapter, computed by the variant checker (:mod:`numeric.variants`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._types import Array, ArrayT
from .._validate import (
    compute_dtype,
    like,
    require_finite,
    require_group_rewards,
    require_int,
    require_nonnegative,
    require_real,
    require_unit_interval,
    result_dtype,
    to_tensor,
)
from ..group_baselines import centred_rewards, group_zscore_advantages
from .advantages import masked_whiten

__all__ = [
    "EMABaseline",
    "ema_baseline_advantages",
    "gdpo_advantages",
    "group_ids",
    "grouped_advantages",
    "length_penalized_advantages",
    "maxrl_advantages",
    "normalize_by_levels",
]


# ------------------------------------------------------------------ the index


def group_ids(index, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(ids, counts)``: each response's group as ``0..K-1`` in order of first appearance, and each group's size.

    ``index`` holds one group label per response: ints or strings, as a list,
    a numpy array (verl's ``uid`` strings) or an integer torch tensor, ``n`` of them.

    Examples
    --------
    >>> from numeric.losses.group_advantages import group_ids
    >>> ids, counts = group_ids(["b", "a", "b", "c"], 4)
    >>> ids.tolist(), counts.tolist()
    ([0, 1, 0, 2], [2, 1, 1])
    """
    n = require_int("n", n, minimum=0)
    if isinstance(index, torch.Tensor):
        if index.is_floating_point() or index.is_complex() or index.dtype == torch.bool:
            raise TypeError(f"index must hold group labels (ints or strings), got {str(index.dtype).removeprefix('torch.')} values")
        labels = index.detach().cpu().numpy()
    elif isinstance(index, (np.ndarray, list, tuple)):
        labels = np.asarray(index, dtype=object if not isinstance(index, np.ndarray) else None)
    else:
        raise TypeError(f"index must be a list, a numpy array or an integer tensor of group labels, got {type(index).__name__}")
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"index must hold one label per response, shape ({n},), got {tuple(labels.shape)}")
    if labels.dtype.kind in "iuU":  # one kind of label: numpy numbers them (sorted), then first appearance orders them
        _, first_at, inverse = np.unique(labels, return_index=True, return_inverse=True)
        rank = np.empty(len(first_at), dtype=np.int64)
        rank[np.argsort(first_at, kind="stable")] = np.arange(len(first_at))
        ids_t = torch.from_numpy(rank[inverse.reshape(-1)])
        return ids_t, torch.bincount(ids_t, minlength=len(first_at))
    flat = labels.tolist()
    if any(isinstance(x, (bool, float, complex, np.floating)) or not isinstance(x, (numbers.Integral, str)) for x in flat):
        bad = next(x for x in flat if isinstance(x, (bool, float, complex, np.floating)) or not isinstance(x, (numbers.Integral, str)))
        raise TypeError(f"index must hold group labels (ints or strings), got {bad!r}")
    first: dict = {}
    ids = [first.setdefault((type(x) is str, x), len(first)) for x in flat]
    ids_t = torch.tensor(ids, dtype=torch.long)
    return ids_t, torch.bincount(ids_t, minlength=len(first))


def _members(ids: torch.Tensor, counts: torch.Tensor, size: int) -> torch.Tensor:
    """``[n, size]``: the responses of each group of ``size`` answers, in batch order, one group per row."""
    order = torch.argsort(ids, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    chosen = (counts == size).nonzero()[:, 0]
    return order[starts[chosen][:, None] + torch.arange(size)]


def _singleton(value) -> float | None:
    if value is None:
        return None
    return require_real("singleton", value)


def grouped_advantages(estimator: Callable, scores: ArrayT, index, *per_answer: Array, singleton: float | None = 0.0) -> ArrayT:
    r"""Any ``[..., G]`` group estimator on a flat batch with ragged groups: the trainers' way to call it.

    The responses of each group (``index``: one label per response) are
    gathered, in batch order, into one row per group, the groups of one size
    together, and ``estimator(rewards [n, G], *per_answer [n, G])`` gives their
    advantages.  A group of one response has no peer, and each trainer decides
    what it gets: ``singleton = c`` gives it :math:`A = c\,R`, and ``None``
    refuses the batch with a ``ValueError``:

    * verl ``grpo`` and SkyRL ``grpo`` (mean := 0, std := 1):
      :math:`c = 1/(1 + 10^{-6})`, the raw reward; verl ``rloo`` (the loop),
      ``opo``, Dr. GRPO and SkyRL ``maxrl``: :math:`c = 1`;
    * TRL, ms-swift, slime, prime-rl, verl ``rloo_vectorized``, SkyRL ``rloo``,
      AReaL's group mean: :math:`c = 0` (no update);
    * OpenRLHF (an assert on ``n_samples_per_prompt > 1``) and verl ``grpo_passk``
      (``ValueError``): refused.

    On one answer the expected update is :math:`c\,\nabla J`
    (:func:`numeric.variants.check_singleton`): the raw reward trains the
    prompt with plain REINFORCE, 0 drops it.

    Parameters
    ----------
    estimator : callable
        ``[..., G]`` rewards (and the ``per_answer`` arrays, as ``[..., G]``) to
        ``[..., G]`` advantages, e.g. :func:`numeric.group_zscore_advantages`.
    scores : numpy.ndarray or torch.Tensor
        ``[N]`` one reward per response.
    index : list, numpy array or integer tensor
        ``[N]`` group labels (ints or strings).
    *per_answer : arrays
        ``[N]`` further per-response inputs (lengths), gathered like ``scores``.
    singleton : float or None
        The factor :math:`c` of a lone response's reward, or ``None`` to refuse one.

    Examples
    --------
    >>> import numpy as np
    >>> from functools import partial
    >>> from numeric import group_zscore_advantages
    >>> from numeric.losses import grouped_advantages
    >>> verl_grpo = partial(group_zscore_advantages, eps=1e-6, std="bessel")
    >>> s, uid = np.array([1.0, 0.0, 0.5, 1.0, 0.0]), ["a", "a", "b", "c", "c"]
    >>> print(grouped_advantages(verl_grpo, s, uid, singleton=1 / (1 + 1e-6)).round(6))
    [ 0.707106 -0.707106  0.5       0.707106 -0.707106]
    >>> print(grouped_advantages(verl_grpo, s, uid, singleton=0.0).round(6))     # TRL, slime, ms-swift
    [ 0.707106 -0.707106  0.        0.707106 -0.707106]
    """
    if not callable(estimator):
        raise TypeError(f"estimator must be a callable of [..., G] rewards, got {type(estimator).__name__}")
    s, kind = to_tensor("scores", scores)
    if s.ndim != 1:
        raise ValueError(f"scores must have shape [N] (one reward per response), got {tuple(s.shape)}")
    s = require_finite("scores", s).to(compute_dtype(s.dtype))
    extra = []
    for k, a in enumerate(per_answer):
        t, _ = to_tensor(f"per_answer[{k}]", a)
        if t.shape != s.shape:
            raise ValueError(f"per_answer[{k}] must have the shape of scores {tuple(s.shape)}, got {tuple(t.shape)}")
        extra.append(require_finite(f"per_answer[{k}]", t).to(device=s.device, dtype=s.dtype))
    c = _singleton(singleton)
    ids, counts = group_ids(index, s.shape[0])
    out = torch.empty_like(s)
    for size in sorted(set(counts.tolist())):
        rows = _members(ids, counts, size).to(s.device)
        if size == 1:
            if c is None:
                raise ValueError(f"index holds a group of one response ({int((counts == 1).sum())} of them); this convention refuses it (singleton=None)")
            out[rows[:, 0]] = c * s[rows[:, 0]]
            continue
        adv = torch.as_tensor(estimator(s[rows], *(e[rows] for e in extra)))
        if tuple(adv.shape) != tuple(rows.shape):
            raise ValueError(f"estimator must return [n, G] advantages for [n, G] rewards, got shape {tuple(adv.shape)} for {tuple(rows.shape)}")
        out[rows] = adv.to(device=s.device, dtype=s.dtype)
    return like(kind, out.to(result_dtype(scores)))


# ------------------------------------------------------------------ [..., G] estimators


def maxrl_advantages(rewards: ArrayT, *, eps: float = 0.0, nonpositive: str = "zero") -> ArrayT:
    r"""MaxRL: the centred reward over the group's mean, :math:`A_i = (R_i - \bar R)/(\bar R + \epsilon_{\mathrm{div}})`.

    For a binary reward and a group with pass rate :math:`\bar R > 0` the
    update is :math:`\frac{1}{\bar R}\sum_{i:R_i=1} s_i - \sum_i s_i`; the second sum
    has mean 0 and answer :math:`i` succeeds with the others' successes :math:`S_{-i}` independent of it,
    so

    .. math::

        \mathbb{E}[A_i s_i] = \mathbb{E}\Bigl[\frac{G}{1 + S_{-i}}\Bigr]\nabla p
        = \frac{1 - (1-p)^G}{p}\,\nabla p = \bigl(1 + (1-p) + \dots + (1-p)^{G-1}\bigr)\nabla p,
        \qquad S_{-i} \sim \mathrm{Bin}(G - 1, p),

    the first :math:`G` terms of :math:`1/p = 1 + (1-p) + (1-p)^2 + \cdots`: the update
    tends to :math:`\nabla\log p` (maximum likelihood of success) as :math:`G`
    grows, and at :math:`G = 1` it is REINFORCE.  The variant checker derives
    the same :math:`c(p, G)` from the code (``tests/test_estimators.py``).

    ``nonpositive="zero"`` gives a group whose mean is :math:`\le 0` zero
    advantages (prime-rl, ``eps = 0``: its rewards are meant to be
    non-negative); ``"divide"`` divides anyway (SkyRL, ``eps = 1e-6``), which
    flips the sign of a group with a negative mean and blows up a mean near
    :math:`-\epsilon_{\mathrm{div}}` (a mean of exactly :math:`-\epsilon_{\mathrm{div}}` is refused).  A
    group of one answer is the caller's convention: :func:`grouped_advantages`
    with ``singleton=0.0`` (prime-rl, where :math:`(R - R)/R = 0`) or ``1.0``
    (SkyRL, the raw reward).

    References
    ----------
    Tajwar et al., "Maximum Likelihood Reinforcement Learning", arXiv:2602.02710 (2026).
    prime-rl ``559b447`` ``src/prime_rl/orchestrator/algo/max_rl.py:22-28``; SkyRL ``a956457``
    ``skyrl/backends/skyrl_train/utils/ppo_utils.py:1396-1428``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import maxrl_advantages
    >>> print(maxrl_advantages(np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])))
    [[ 3. -1. -1. -1.]
     [ 0.  0.  0.  0.]]
    """
    r, kind = require_group_rewards("rewards", rewards)
    eps = require_nonnegative("eps", eps)
    if nonpositive not in ("zero", "divide"):
        raise ValueError(f"nonpositive must be 'zero' or 'divide', got {nonpositive!r}")
    centred = centred_rewards(r)
    mean = r.mean(-1, keepdim=True)
    if nonpositive == "zero":
        keep = mean > 0
        out = torch.where(keep, centred / torch.where(keep, mean + eps, torch.ones_like(mean)), torch.zeros_like(r))
    else:
        if bool((mean + eps == 0).any()):
            raise ValueError(f"rewards hold a group whose mean + eps is 0 (eps = {eps}): MaxRL divides by it")
        out = centred / (mean + eps)
    return like(kind, out.to(result_dtype(rewards)))


def length_penalized_advantages(rewards: ArrayT, output_tokens: Array, *, input_tokens: Array | None = None, turns: Array | None = None,
                                weights: tuple = (0.25, 0.1, 0.1)) -> ArrayT:
    r"""prime-rl's GRPO with its length penalty: a length-shaped reward, centred on its group mean.

    With the group's mean reward :math:`\bar R` (its pass rate), output
    lengths :math:`|o_i|`, input lengths :math:`n^{\mathrm{in}}_i`, turns :math:`n^{\mathrm{turns}}_i`
    and the ``weights`` :math:`(\xi_{\mathrm{out}}, \xi_{\mathrm{in}}, \xi_{\mathrm{turns}})` (prime-rl's defaults
    0.25, 0.1, 0.1):

    .. math::

        R'_i = R_i - \bar R\Bigl(\xi_{\mathrm{out}} \frac{|o_i|}{\max(\max_j |o_j|, 1)}
               + \xi_{\mathrm{in}}\frac{n^{\mathrm{in}}_i}{\max(\max_j n^{\mathrm{in}}_j, 1)}
               + \xi_{\mathrm{turns}}\frac{n^{\mathrm{turns}}_i}{\max(\max_j n^{\mathrm{turns}}_j, 1)}\Bigr),
        \qquad A_i = R'_i - \overline{R'} .

    The penalty is scaled by the group's own mean reward and by its longest
    answer, so it is no reward of one answer: no fixed objective has this as
    its gradient.  Where the lengths vary with the answer, the expected update
    leaves the direction of :math:`\nabla J`; a term equal across the group (one
    prompt's input length, one turn) cancels in the centring.
    ``input_tokens`` and ``turns`` default to 0 (their terms vanish).

    References
    ----------
    prime-rl ``559b447`` ``src/prime_rl/orchestrator/algo/grpo.py:25-45``, weights
    ``packages/prime-rl-configs/src/prime_rl/configs/algorithm.py:95-110``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import length_penalized_advantages
    >>> print(length_penalized_advantages(np.array([1.0, 1.0, 0.0, 0.0]), np.array([10.0, 40.0, 20.0, 40.0])).round(6))
    [ 0.554688  0.460938 -0.476562 -0.539062]
    """
    r, kind = require_group_rewards("rewards", rewards)
    arrays = {"output_tokens": output_tokens, "input_tokens": input_tokens, "turns": turns}
    terms: list[torch.Tensor] = []
    if not isinstance(weights, (tuple, list)) or len(weights) != 3:
        raise TypeError(f"weights must be a triple (output, input, turns) of numbers, got {weights!r}")
    if output_tokens is None:
        raise TypeError("output_tokens must be a numpy array or a torch tensor of output lengths, got None")
    for (name, value), w in zip(arrays.items(), weights):
        w = require_nonnegative(f"weights[{len(terms)}]", w)
        if value is None:
            terms.append(torch.zeros_like(r))
            continue
        n, _ = to_tensor(name, value)
        if n.shape != r.shape:
            raise ValueError(f"{name} must have the shape of rewards {tuple(r.shape)}, got {tuple(n.shape)}")
        n = require_finite(name, n).to(device=r.device, dtype=r.dtype)
        if bool((n < 0).any()):
            raise ValueError(f"{name} must be >= 0 (a count)")
        terms.append(w * n / n.amax(-1, keepdim=True).clamp(min=1))
    shaped = r - r.mean(-1, keepdim=True) * sum(terms)
    return like(kind, centred_rewards(shaped).to(result_dtype(rewards)))


# ------------------------------------------------------------------ batch-level estimators


def _z(s: torch.Tensor, index, eps: float, singleton: float | None) -> torch.Tensor:
    """Each group's Bessel z-score with ``eps`` outside the std, singletons by the convention."""
    return grouped_advantages(lambda r: group_zscore_advantages(r, eps=eps, std="bessel"), s, index, singleton=singleton)


def gdpo_advantages(scores: ArrayT, index, *, weights: Sequence[float] | None = None, eps: float = 1e-6, singleton: float | None = 1 / (1 + 1e-6),
                    whiten: str | None = "tokens", mask: Array | None = None, whiten_eps: float = 1e-8) -> ArrayT:
    r"""GDPO: each reward z-scored in its group, the z-scores summed with weights, then standardised over the batch.

    With answer :math:`i`'s several rewards (one column each), the vector
    :math:`\mathbf z_i` of their group z-scores (Bessel std, ``eps`` outside it,
    a lone answer by ``singleton``, as in :func:`grouped_advantages`) and the
    ``weights`` :math:`\xi`:

    .. math::

        \tilde R_i = \xi^\top \mathbf z_i, \qquad
        A_i = \frac{\tilde R_i - \operatorname{mean}\tilde R}{\operatorname{std}\tilde R + \epsilon_{\mathrm{div}}} \;\text{(sequences)} \quad\text{or}\quad
        A_{it} = \frac{\tilde R_i - \operatorname{mean}_{\mathrm{tok}}\tilde R}{\sqrt{\operatorname{var}_{\mathrm{tok}}\tilde R + \epsilon_{\mathrm{div}}}}\;\text{(tokens)},

    (:math:`\epsilon_{\mathrm{div}}` the ``whiten_eps``); ``whiten="sequences"``: the mean and Bessel std of :math:`\tilde R` over the
    responses (TRL ``multi_objective_aggregation="normalize_then_sum"``,
    ``eps = whiten_eps = 1e-4``, a lone answer 0; ms-swift
    ``scale_rewards="gdpo"``, ``eps = whiten_eps = 1e-8``, a lone
    answer 0); ``whiten="tokens"``: verl's ``masked_whiten`` of :math:`\tilde R`
    broadcast over each response's tokens (``mask`` ``[N, T]``; each response
    weighted by its length, the Bessel variance, verl's count plus
    ``1e-8``; verl ``gdpo``, ``eps = 1e-6`` with the raw
    reward for a lone answer, ``whiten_eps = 1e-8``); ``whiten=None``:
    :math:`\tilde R` itself.

    What it does to the gradient.  Before the batch step the update is
    linear in the z-scores, so for binary rewards
    :math:`\mathbb{E}[\tilde R_i s_i]` is the :math:`\xi`-weighted sum over the rewards of
    :math:`c(p, G)\,\nabla J`, each at its own pass rate :math:`p` (:math:`c(p, G)` the z-score's scale): the gradient
    of the weighted sum of the objectives only where every reward's :math:`c(p, G)` is equal.  In
    each group of two or more the z-scores sum to 0, so the sequence-level
    mean of :math:`\tilde R` is 0 (a lone answer's raw reward moves it), and the
    batch std is one number for the whole batch: no fixed scale exists
    (``check_grouped_advantage``: undecided).  The token-level mean weighs
    each :math:`\tilde R_i` by its length, so it is not 0 when lengths differ: a
    length-dependent shift.

    Returns ``[N]`` for ``"sequences"`` and ``None``, ``[N, T]`` (0 on masked
    slots) for ``"tokens"``.

    References
    ----------
    GDPO, arXiv:2601.05242 (2026). verl ``1dda039`` ``verl/trainer/ppo/core_algos.py:361-468``;
    TRL ``f2cd577`` ``trl/trainer/grpo_trainer.py:2710-2720``; ms-swift ``3602360``
    ``swift/rl_core/advantage.py:83-94``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import gdpo_advantages
    >>> R = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])    # two rewards, two groups of two
    >>> print(gdpo_advantages(R, [0, 0, 1, 1], whiten=None).round(6))     # S: the first group's z-scores cancel
    [ 0.        0.        1.414212 -1.414212]
    >>> print(gdpo_advantages(R, [0, 0, 1, 1], weights=[2.0, 1.0], eps=1e-4, singleton=0.0, whiten="sequences", whiten_eps=1e-4).round(6))
    [ 0.387277 -0.387277  1.161831 -1.161831]
    >>> m = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 0, 0]])        # verl: the token mean of S is not 0
    >>> print(gdpo_advantages(R, [0, 0, 1, 1], mask=m).round(6))
    [[-0.377964 -0.377964  0.      ]
     [-0.377964  0.        0.      ]
     [ 0.944911  0.944911  0.944911]
     [-1.70084   0.        0.      ]]
    """
    s, kind = to_tensor("scores", scores)
    if s.ndim != 2:
        raise ValueError(f"scores must have shape [N, K] (K rewards per response), got {tuple(s.shape)}")
    s = require_finite("scores", s).to(compute_dtype(s.dtype))
    K = s.shape[1]
    if weights is None:
        w = torch.ones(K, dtype=s.dtype, device=s.device)
    else:
        w_raw, _ = to_tensor("weights", np.asarray(weights, dtype=np.float64) if isinstance(weights, (list, tuple)) else weights)
        if w_raw.shape != (K,):
            raise ValueError(f"weights must hold one weight per reward, shape ({K},), got {tuple(w_raw.shape)}")
        w = require_finite("weights", w_raw).to(device=s.device, dtype=s.dtype)
    eps, whiten_eps = require_nonnegative("eps", eps), require_nonnegative("whiten_eps", whiten_eps)
    if whiten not in ("tokens", "sequences", None):
        raise ValueError(f"whiten must be 'tokens', 'sequences' or None, got {whiten!r}")
    S = sum((w[k] * _z(s[:, k], index, eps, singleton) for k in range(K)), torch.zeros_like(s[:, 0]))
    if whiten is None:
        if mask is not None:
            raise ValueError("mask is only read with whiten='tokens'")
        return like(kind, S.to(result_dtype(scores)))
    if whiten == "sequences":
        if mask is not None:
            raise ValueError("mask is only read with whiten='tokens'")
        if S.numel() < 2:  # TRL: the std of one value is taken as 0
            return like(kind, torch.zeros_like(S).to(result_dtype(scores)))
        centred = S - S.mean()
        return like(kind, (centred / (centred.std() + whiten_eps)).to(result_dtype(scores)))
    if mask is None:
        raise ValueError("mask is required with whiten='tokens': a 0/1 or boolean [N, T] response mask")
    m, _ = to_tensor("mask", mask)
    if m.ndim != 2 or m.shape[0] != S.shape[0]:
        raise ValueError(f"mask must have shape [N, T] with N = {S.shape[0]}, got {tuple(m.shape)}")
    tokens = S[:, None].expand(m.shape).contiguous()
    return like(kind, masked_whiten(tokens, mask, eps=whiten_eps, count_eps=1e-8).to(result_dtype(scores)))


_LEVELS = ("batch", "group", None)


def _level_mean(x: torch.Tensor, ids: torch.Tensor, counts: torch.Tensor, level, leave_one_out: bool) -> torch.Tensor:
    """Each element's mean at ``level``: over its group or the batch, its own value left out if asked, 0 for None."""
    if level is None:
        return torch.zeros_like(x)
    if level == "batch":
        ids, counts = torch.zeros_like(ids), counts.sum()[None]
    n = counts.to(x.dtype)[ids]
    total = torch.zeros(counts.numel(), dtype=x.dtype, device=x.device).index_add_(0, ids.to(x.device), x)[ids]
    if not leave_one_out:
        return total / n
    if level == "batch" and int(counts[0]) <= 1:  # AReaL: a batch of one has no peer, its mean is 0
        return torch.zeros_like(x)
    # AReaL: a group of one is its own baseline (so it gets 0), the others the mean of their peers
    return torch.where(n > 1, (total - x) / torch.where(n > 1, n - 1, torch.ones_like(n)), x)


def normalize_by_levels(rewards: ArrayT, index, *, mean_level: str | None = "batch", std_level: str | None = "batch", leave_one_out: bool = False,
                        unbiased: bool = True, eps: float = 1e-5) -> ArrayT:
    r"""AReaL's normalisation: a mean and a std each taken over the group, the batch, or not at all, :math:`(R_i - \bar R)/(\sigma + \epsilon_{\mathrm{div}})`.

    The levels are chosen separately (AReaL ``NormConfig``, defaults ``batch``,
    ``batch``, Bessel, :math:`\epsilon_{\mathrm{div}} = 10^{-5}`):

    * the mean :math:`\bar R` is the mean of answer :math:`i`'s group (of :math:`G` answers) or of the batch,
      or with ``leave_one_out`` the mean of the others,
      :math:`\bar R_{-i} = (\sum_j R_j - R_i)/(G - 1)`; a group of one is its own mean (0 out),
      a batch of one has mean 0;
    * the std is taken around those means, :math:`\sigma^2 = \sum_j (R_j - \bar R)^2/(G - 1)`
      over the group (:math:`B - 1` over the batch): with a group mean and a batch std, the pooled
      spread of the group-centred values (not the std of the raw rewards, TRL's
      and ms-swift's ``scale_rewards="batch"``); a group or batch of one (Bessel)
      has std 1; ``std_level=None`` divides by 1 and drops :math:`\epsilon_{\mathrm{div}}`.

    Group levels with a group std are the z-score (reweighted, as GRPO); the
    leave-one-out mean alone is RLOO (unbiased); a batch level makes each
    group's advantages depend on the other groups, so no fixed scale exists.
    Leave-one-out with a group std: the std is that of the leave-one-out
    residuals :math:`\frac{G}{G-1}(R_i - \bar R)`, so this is the z-score again
    with :math:`\epsilon_{\mathrm{div}}` scaled by :math:`(G-1)/G`.

    References
    ----------
    AReaL ``cbff54d`` ``areal/utils/data.py:1382-1637`` (``Normalization``), ``areal/api/cli_args.py:42-97``
    (``NormConfig``); applied to the rewards in ``areal/trainer/ppo/actor.py:211-212``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import normalize_by_levels
    >>> x, uid = np.array([1.0, 0.0, 0.0, 1.0, 1.0]), [0, 0, 0, 1, 1]
    >>> print(normalize_by_levels(x, uid, mean_level="group", std_level="batch").round(6))
    [ 1.632953 -0.816477 -0.816477  0.        0.      ]
    >>> print(normalize_by_levels(x, uid, mean_level="group", leave_one_out=True, std_level=None).round(6))
    [ 1.  -0.5 -0.5  0.   0. ]
    """
    x, kind = to_tensor("rewards", rewards)
    if x.ndim != 1:
        raise ValueError(f"rewards must have shape [N] (one per response), got {tuple(x.shape)}")
    x = require_finite("rewards", x).to(torch.float64 if x.dtype != torch.float64 else x.dtype)
    for name, level in (("mean_level", mean_level), ("std_level", std_level)):
        if level not in _LEVELS:
            raise ValueError(f"{name} must be 'batch', 'group' or None, got {level!r}")
    if not isinstance(leave_one_out, (bool, np.bool_)) or not isinstance(unbiased, (bool, np.bool_)):
        raise TypeError(f"leave_one_out and unbiased must be bools, got {leave_one_out!r}, {unbiased!r}")
    eps = require_nonnegative("eps", eps)
    ids, counts = group_ids(index, x.shape[0])
    ids = ids.to(x.device)
    mean = _level_mean(x, ids, counts.to(x.device), mean_level, bool(leave_one_out))
    centred = x - mean
    if std_level is None:
        return like(kind, centred.to(result_dtype(rewards)))
    if std_level == "batch":
        sid, scount = torch.zeros_like(ids), counts.sum()[None].to(x.device)
    else:
        sid, scount = ids, counts.to(x.device)
    sq = torch.zeros(scount.numel(), dtype=x.dtype, device=x.device).index_add_(0, sid, centred**2)
    n = scount.to(x.dtype)
    if unbiased:
        std = torch.where(n > 1, (sq / torch.where(n > 1, n - 1, torch.ones_like(n))).sqrt(), torch.ones_like(n))
    else:
        std = (sq / n).sqrt()
    return like(kind, (centred / (std[sid] + eps)).to(result_dtype(rewards)))


# ------------------------------------------------------------------ a baseline kept across batches


@dataclass(frozen=True)
class EMABaseline:
    """What :func:`ema_baseline_advantages` returns: the advantages and each agent's baseline after the batch (a new dict)."""

    advantages: object
    baselines: dict


def ema_baseline_advantages(rewards: ArrayT, agents: Sequence[Hashable] | None = None, *, baselines: Mapping | None = None,
                            decay: float = 0.95) -> EMABaseline:
    r"""prime-rl's ``rae``: each response minus its agent's running baseline, the baseline updated after it is used.

    In batch order, for response :math:`i`, with :math:`b` the baseline of its agent:

    .. math::

        A_i = R_i - b, \qquad b \leftarrow \mathtt{decay}\cdot b + (1 - \mathtt{decay})\,R_i,

    with :math:`b` from ``baselines`` (0 for an agent not in it) and the
    ``decay`` (prime-rl 0.95).  Each response is scored before its own
    reward enters the baseline, so :math:`b` is a function of *other*
    responses only: earlier batches, and earlier responses of the same batch
    (the same prompt's group included), all independent of response
    :math:`i` given the policy.  So :math:`\mathbb{E}[A_i s_i] = \nabla J` for
    every response: unbiased, at any group size, one answer included.  (The
    advantage depends on the responses' order; the checker's positional route
    derives the scale of each position: 1.)

    References
    ----------
    SPIRAL, arXiv:2506.24119 (2025) (role-conditioned advantage estimation).
    prime-rl ``559b447`` ``src/prime_rl/orchestrator/algo/rae.py:39-43``, decay
    ``packages/prime-rl-configs/src/prime_rl/configs/algorithm.py:242-260``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import ema_baseline_advantages
    >>> out = ema_baseline_advantages(np.array([1.0, 0.0, 1.0]), ["p", "q", "p"], decay=0.5)
    >>> print(out.advantages), dict(out.baselines)
    [1.  0.  0.5]
    (None, {'p': 0.75, 'q': 0.0})
    """
    r, kind = to_tensor("rewards", rewards)
    if r.ndim != 1:
        raise ValueError(f"rewards must have shape [N] (one per response, in order), got {tuple(r.shape)}")
    r = require_finite("rewards", r)
    n = r.shape[0]
    who = ["default"] * n if agents is None else list(agents) if isinstance(agents, (list, tuple)) else None
    if who is None:
        raise TypeError(f"agents must be a list or tuple of agent names, got {type(agents).__name__}")
    if len(who) != n:
        raise ValueError(f"agents must name one agent per response ({n}), got {len(who)}")
    for a in who:
        if not isinstance(a, Hashable):
            raise TypeError(f"agents must hold hashable names, got {type(a).__name__}")
    if baselines is not None and not isinstance(baselines, Mapping):
        raise TypeError(f"baselines must map agent names to numbers, got {type(baselines).__name__}")
    state = {k: require_real(f"baselines[{k!r}]", v) for k, v in (baselines or {}).items()}
    if any(not math.isfinite(v) for v in state.values()):
        raise ValueError("baselines must be finite")
    d = require_unit_interval("decay", decay)
    values = r.tolist()
    out = []
    for a, x in zip(who, values):
        b = state.get(a, 0.0)
        out.append(x - b)
        state[a] = d * b + (1.0 - d) * x
    adv = torch.tensor(out, dtype=compute_dtype(r.dtype), device=r.device).to(result_dtype(rewards))
    return EMABaseline(like(kind, adv), state)
