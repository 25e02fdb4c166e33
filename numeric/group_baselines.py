r"""Group baselines in numbers: batched advantages and exact group expectations for any :math:`G`.

Batched helpers (numpy or torch in, the same kind out; the group is the last
dimension, any leading dimensions are batch):

:func:`leave_one_out_baselines`, :func:`group_mean_advantages`, :func:`rloo_advantages`, :func:`group_zscore_advantages`

Exact expectations over a group of :math:`G` i.i.d. answers of a
:class:`~numeric.TinyLM`: :func:`group_advantage_weights` computes, for each
reward value :math:`y`, :math:`\mathbb{E}[A_1 \mid R_1 = y]` from the
distribution of the *other* answers' rewards.  Those :math:`G - 1` rewards
enter any group estimator only through how many of them take each distinct
value :math:`y_1, \dots, y_m`; their counts are the :math:`(G-1)`-fold
convolution of one answer's reward distribution, a multinomial, so the cost is
:math:`\binom{G + m - 2}{m - 1}` groups instead of :math:`N^G` tuples
(:math:`G` groups for a binary reward).  :func:`exact_group_gradient` turns
the weights into :math:`\mathbb{E}[A_1 s_1]`; :func:`brute_force_group_gradient`
enumerates all :math:`N^G` tuples, the independent check at :math:`G = 2, 3`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache, lru_cache, partial
from typing import overload

import numpy as np
import torch

from derivations import group_baselines as derived

from ._types import Array, ArrayT
from ._validate import (
    like,
    require_finite,
    require_group_rewards,
    require_int,
    require_nonnegative,
    require_same_device,
    require_unit_interval,
    result_dtype,
    to_tensor,
)
from .checks import check, maxabs, suite
from .expectations import expected_score_sum
from .tinylm import TinyLM, check_lm, check_rewards, check_theta, default_reward, score_matrix

__all__ = [
    "binary_reward_weight",
    "brute_force_group_gradient",
    "count_vectors",
    "exact_group_gradient",
    "group_advantage_weights",
    "group_mean_advantages",
    "group_zscore_advantages",
    "grpo_weight",
    "leave_one_out_baselines",
    "rloo_advantages",
]

MAX_GROUPS = 20_000_000
"""Most groups (count patterns of the whole group) that :func:`group_advantage_weights` evaluates."""

CHUNK = 1 << 20
"""Rewards :func:`group_advantage_weights` hands the advantage in one call by default (8 MiB in fp64)."""


# -- batched helpers ---------------------------------------------------------------------------


def leave_one_out_baselines(rewards: ArrayT) -> ArrayT:
    r"""Mean reward of the *other* answers of each group.

    .. math::

        b_i = \frac{1}{G-1} \sum_{j \ne i} R_j = \frac{\sum_j R_j - R_i}{G - 1}.

    Parameters
    ----------
    rewards : numpy.ndarray or torch.Tensor
        ``[..., G]``, :math:`G \ge 2`.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``[..., G]``, the caller's kind, device and dtype.

    References
    ----------
    Kool, van Hoof, Welling, "Buy 4 REINFORCE samples, get a baseline for free!" (2019).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import leave_one_out_baselines
    >>> print(leave_one_out_baselines(np.array([1.0, 0.0, 0.0, 1.0])).round(6))
    [0.333333 0.666667 0.666667 0.333333]
    """
    r, kind = require_group_rewards("rewards", rewards, minimum=2)
    G = r.shape[-1]
    return like(kind, ((r.sum(-1, keepdim=True) - r) / (G - 1)).to(result_dtype(rewards)))


def group_mean_advantages(rewards: ArrayT) -> ArrayT:
    r"""Centred advantages :math:`R_i - \bar R`, the mean including the answer itself.

    Their expected update is :math:`\frac{G-1}{G} \nabla_\theta J`
    (:func:`derivations.group_baselines.mean_including_self`).

    Examples
    --------
    >>> import torch
    >>> from numeric import group_mean_advantages
    >>> group_mean_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]]))
    tensor([[ 0.5000, -0.5000, -0.5000,  0.5000],
            [ 0.0000,  0.0000,  0.0000,  0.0000]])
    """
    r, kind = require_group_rewards("rewards", rewards)
    return like(kind, centred_rewards(r).to(result_dtype(rewards)))


def rloo_advantages(rewards: ArrayT) -> ArrayT:
    r"""RLOO advantages :math:`R_i - b_i` with the leave-one-out baseline.

    .. math::

        R_i - \frac{1}{G-1}\sum_{j\ne i} R_j = \frac{G}{G-1}\bigl(R_i - \bar R\bigr).

    Unbiased for every :math:`G \ge 2`
    (:func:`derivations.group_baselines.leave_one_out_unbiased`).

    References
    ----------
    Ahmadian et al., "Back to basics: revisiting REINFORCE-style optimization for
    learning from human feedback in LLMs", ACL (2024).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import rloo_advantages
    >>> print(rloo_advantages(np.array([1.0, 0.0, 0.0, 1.0])).round(6))
    [ 0.666667 -0.666667 -0.666667  0.666667]
    """
    r, kind = require_group_rewards("rewards", rewards, minimum=2)
    G = r.shape[-1]
    return like(kind, (G / (G - 1) * centred_rewards(r)).to(result_dtype(rewards)))


_DDOF = {"population": 0, "bessel": 1}


def centred_rewards(r: torch.Tensor) -> torch.Tensor:
    r"""Deviations :math:`R_i - \bar R` over the last dimension, accurate when the rewards nearly tie.

    Subtracting the first reward first is exact for values within a factor of
    two of each other (Sterbenz), so the mean of the small differences, and the
    deviations, keep their leading digits where ``r - r.mean()`` would round
    them away: for ``[0.1 + 0.2, 0.3, 0.3, 0.3]`` the naive mean rounds to the
    first value and loses the whole deviation.
    """
    d = r - r[..., :1]
    return d - d.mean(-1, keepdim=True)


def group_zscore_advantages(rewards: ArrayT, eps: float = 1e-8, std: str = "population") -> ArrayT:
    r"""Std-normalised (GRPO) advantages :math:`(R_i - \bar R) / (\sigma + \varepsilon)`.

    .. math::

        \sigma^2 = \frac{1}{G - \delta}\sum_{j=1}^{G} (R_j - \bar R)^2,
        \qquad \delta = 0 \text{ (population) or } 1 \text{ (Bessel)}.

    A group whose rewards are all equal gets zero advantages (exactly, for any
    ``eps >= 0``); ``eps = 0`` is the limit :math:`\varepsilon \to 0` used by
    :func:`derivations.group_baselines.grpo_weight`.  Near ties are computed
    without cancellation: the deviations come from differences to one member of
    the group, and :math:`\sigma` is scaled by the largest deviation before
    squaring, so ``[0.1 + 0.2, 0.3, 0.3, 0.3]`` gets
    :math:`(\sqrt3, -1/\sqrt3, -1/\sqrt3, -1/\sqrt3)` at ``eps = 0``, and a float32
    group a few ulps apart is as accurate as its own values.

    Parameters
    ----------
    rewards : numpy.ndarray or torch.Tensor
        ``[..., G]``; :math:`G \ge 2` for ``std="bessel"``.
    eps : float
        Added to :math:`\sigma`, ``>= 0``.
    std : {"population", "bessel"}
        verl (``compute_grpo_outcome_advantage``, eps 1e-6), TRL
        (``GRPOTrainer``, ``scale_rewards="group"``, eps 1e-4) and OpenRLHF
        (``advantage_estimator="group_norm"``, eps 1e-9) all divide by
        ``torch.std``, the Bessel std: use ``std="bessel"`` with their eps to
        reproduce them.  The population std is the default here.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``[..., G]``, the caller's kind, device and dtype.

    References
    ----------
    Shao et al., "DeepSeekMath" (GRPO), arXiv:2402.03300 (2024).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import group_zscore_advantages
    >>> print(group_zscore_advantages(np.array([1.0, 0.0, 0.0, 0.0]), eps=0.0).round(6))
    [ 1.732051 -0.57735  -0.57735  -0.57735 ]
    >>> print(group_zscore_advantages(np.array([1.0, 0.0, 0.0, 0.0]), eps=0.0, std="bessel").round(6))
    [ 1.5 -0.5 -0.5 -0.5]
    >>> print(group_zscore_advantages(np.array([0.1 + 0.2, 0.3, 0.3, 0.3]), eps=0.0).round(6))
    [ 1.732051 -0.57735  -0.57735  -0.57735 ]
    """
    if std not in _DDOF:
        raise ValueError(f"std must be one of {sorted(_DDOF)}, got {std!r}")
    eps = require_nonnegative("eps", eps)
    r, kind = require_group_rewards("rewards", rewards, minimum=1 + _DDOF[std])
    centred = centred_rewards(r)
    scale = centred.abs().amax(-1, keepdim=True)
    equal = scale == 0
    scale = torch.where(equal, torch.ones_like(scale), scale)
    sigma = scale * ((centred / scale) ** 2).sum(-1, keepdim=True).div(r.shape[-1] - _DDOF[std]).sqrt()
    out = torch.where(equal, torch.zeros_like(r), centred / (sigma + eps))
    return like(kind, out.to(result_dtype(rewards)))


# -- exact group expectations ------------------------------------------------------------------

Advantages = Callable[[torch.Tensor], torch.Tensor]


def _check_advantages(advantages) -> Advantages:
    if not callable(advantages):
        raise TypeError(f"advantages must be a function mapping [B, G] rewards to [B, G] advantages, got {type(advantages).__name__}")
    return advantages


def _require_rows_are_groups(advantages: Advantages, groups: torch.Tensor, A: torch.Tensor) -> None:
    """Each row of the batch is one group: its first, middle and last rows, evaluated alone, give the same advantages.

    A batch-level normalisation (GPG's :math:`B/|\text{valid}|`, whitening over
    the batch) would otherwise mix the engine's reward patterns into one batch
    and give a number that belongs to no group.  A row whose values differ alone
    but not when the other rows are replaced (same shape) is its own group: the
    difference is rounding that moves with the batch's shape.
    """
    for k in sorted({0, len(groups) // 2, len(groups) - 1}):
        alone = torch.as_tensor(advantages(groups[k:k + 1])).to(A.dtype).reshape(-1)
        if alone.shape == A[k].shape and torch.allclose(alone, A[k], rtol=1e-12, atol=1e-12):
            continue
        # the same shape, the other rows replaced by equal rewards and by distinct ones: rounding that moves with the shape
        # is no coupling, a batch statistic (GPG's B/|valid|, a whitening) is
        equal, distinct = torch.zeros_like(groups), groups + 0.37 * torch.arange(groups.shape[1], dtype=groups.dtype) + 1.0
        equal[k] = distinct[k] = groups[k]
        if alone.shape == A[k].shape and all(torch.equal(torch.as_tensor(advantages(x)).to(A.dtype)[k], A[k]) for x in (equal, distinct)):
            continue
        raise ValueError(
            f"advantages must treat each row of [B, G] rewards as one group, but the group {groups[k].tolist()} "
            "gets other advantages when evaluated alone (a batch-level normalisation?); wrap it so that it "
            "sees one group at a time"
        )


def count_vectors(m: int, n: int) -> torch.Tensor:
    r"""``[C, m]``: every way to put ``n`` answers on ``m`` reward values, :math:`C = \binom{n+m-1}{m-1}` rows.

    Stars and bars: row :math:`c` has :math:`c_1 + \dots + c_m = n`, in the
    lexicographic order of the bars' positions (the order of
    :func:`derivations.variants.count_patterns`).  The exact group engine
    (:func:`group_advantage_weights`) and the checker's streamed coefficients
    enumerate whole groups with it.

    Examples
    --------
    >>> from numeric.group_baselines import count_vectors
    >>> count_vectors(3, 2).tolist()
    [[0, 0, 2], [0, 1, 1], [0, 2, 0], [1, 0, 1], [1, 1, 0], [2, 0, 0]]
    >>> count_vectors(0, 2)
    Traceback (most recent call last):
    ...
    ValueError: m must be >= 1, got 0
    """
    m = require_int("m", m, minimum=1)
    n = require_int("n", n, minimum=0)
    return torch.from_numpy(_compositions(m, n).copy())


@lru_cache(maxsize=8)
def _compositions(m: int, n: int) -> np.ndarray:
    """``[C, m]`` read-only: the rows of :func:`count_vectors`, ordered by :math:`c_1`, then :math:`c_2`, ... (the bars' lexicographic order).

    Built from the tables of fewer parts (:math:`c_1` first, then every way to
    put the other :math:`n - c_1` answers on :math:`m - 1` values), each built
    once; the result, a pure function of two ints that is never written to, is
    remembered for the last few ``(m, n)``.
    """
    tables: dict = {}

    def parts(k: int, total: int) -> np.ndarray:
        if (k, total) not in tables:
            tables[k, total] = np.array([[total]], dtype=np.int64) if k == 1 else np.concatenate(
                [np.column_stack([np.full(math.comb(total - first + k - 2, k - 2), first, dtype=np.int64), parts(k - 1, total - first)])
                 for first in range(total + 1)])
        return tables[k, total]

    out = parts(m, n)
    out.flags.writeable = False
    return out


def _multinomial_pmf(counts: torch.Tensor, probs: torch.Tensor, answers: int) -> torch.Tensor:
    """Probability of each count vector of ``answers`` answers: the (n-fold) convolution of one answer's law, in closed form."""
    n = torch.tensor(answers, dtype=torch.float64)
    log_factorial = torch.lgamma(torch.arange(answers + 2, dtype=torch.float64) + 1)  # lgamma(c + 1) for c <= answers + 1 (a row about to be dropped may hold that)
    log_q = torch.where(probs > 0, probs.log(), 0.0)  # sum_k c_k log q_k as one product (xlogy was 14 times slower); q_k = 0 below
    log = torch.lgamma(n + 1) - log_factorial[counts].sum(1) + counts.to(torch.float64) @ log_q
    return torch.where((counts[:, probs == 0] > 0).any(1), 0.0, log.exp())


def _others_weights(counts: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    r"""``[C, m]``: for the whole group's counts :math:`c` and each value :math:`j` it holds, the probability of the others' counts :math:`c - e_j`.

    The multinomial pmf of :math:`c - e_j` among :math:`G - 1` answers; 0 where :math:`c_j = 0`.
    """
    G = counts[0].sum()
    out = torch.zeros(counts.shape, dtype=torch.float64)
    for j in range(counts.shape[1]):
        has = counts[:, j] > 0
        if G == 1:
            out[has, j] = 1.0
            continue
        others = counts.clone()
        others[:, j] -= 1  # -1 where c_j = 0: a row that is computed, then dropped (each row on its own)
        out[:, j] = torch.where(has, _multinomial_pmf(others, probs, int(G) - 1), 0.0)
    return out


def _sorted_groups(v: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``[C, G]`` the groups with these counts of the values ``v``, sorted by value index (on ``v``'s device).

    numpy's ``repeat`` copies the same values as ``torch.repeat_interleave``, 15 times faster on the CPU
    (and, as indices into ``v``, 3 times faster for a dtype or device numpy does not hold, or values that carry a gradient).
    """
    reps = counts.reshape(-1).numpy()
    if v.device.type == "cpu" and v.dtype in (torch.float64, torch.float32) and not v.requires_grad:
        return torch.from_numpy(np.repeat(np.tile(v.numpy(), counts.shape[0]), reps).reshape(counts.shape[0], -1))
    index = torch.from_numpy(np.repeat(np.tile(np.arange(v.numel()), counts.shape[0]), reps))
    return v[index.to(v.device)].reshape(counts.shape[0], -1)


def _evaluate(advantages: Advantages, groups: torch.Tensor) -> torch.Tensor:
    """``advantages(groups)`` as a tensor of the groups' shape, else a ``ValueError``."""
    A = advantages(groups)
    A = A if isinstance(A, torch.Tensor) else torch.as_tensor(A)
    if A.shape != groups.shape:
        raise ValueError(f"advantages must return shape [B, G] = {tuple(groups.shape)}, got {tuple(A.shape)}")
    return A


_PROBE = 64
"""Groups on which :func:`group_advantage_weights` checks permutation equivariance, whatever the chunk."""


def _require_equivariant(advantages: Advantages, groups: torch.Tensor, A: torch.Tensor) -> None:
    """Reversing the answers of every group reverses its advantages (to 1e-12): the engine reads each value's advantage where it sits."""
    back = torch.as_tensor(advantages(groups.flip(1))).to(A.dtype).flip(1)
    if back.shape != A.shape or not torch.allclose(back, A, rtol=1e-12, atol=1e-12):
        raise ValueError("advantages must be permutation-equivariant (an answer's advantage a function of its own reward and the "
                         "others' rewards in any order), but reversing the answers of a group does not reverse its advantages")


def group_advantage_weights(values: ArrayT, probs: Array, G: int, advantages: Advantages, *, chunk: int = CHUNK) -> ArrayT:
    r"""Exact :math:`\bar A(y) = \mathbb{E}[A_1 \mid R_1 = y]` for a group of :math:`G` i.i.d. answers.

    The other :math:`G-1` answers' rewards take the distinct values
    :math:`y_1..y_m` with counts :math:`n \sim \mathrm{Multinomial}(G-1, q)`,
    the :math:`(G-1)`-fold convolution of one answer's law:

    .. math::

        \bar A(y) = \sum_{n} \frac{(G-1)!}{\prod_k n_k!} \prod_k q_k^{n_k}\;
        A_1\bigl(y, \underbrace{y_1, \dots, y_1}_{n_1}, \dots, \underbrace{y_m, \dots, y_m}_{n_m}\bigr).

    Each group is evaluated once, as a whole: the group with counts
    :math:`n'` (sorted by value) holds, at the first answer with value
    :math:`y_j`, the advantage :math:`A_1(y_j \mid n' - \mathbf{e}_j)`, so the
    :math:`\binom{G+m-1}{m-1}` groups give every term (not
    :math:`m\binom{G+m-2}{m-1}` groups, one per value of the answer labelled 1).  They are
    streamed to ``advantages`` in batches of at most ``chunk`` rewards (at
    least one group), so memory stays near ``chunk`` however many groups there
    are; the terms are kept and summed once at the end, so the result does not
    depend on ``chunk``.

    Parameters
    ----------
    values : numpy.ndarray or torch.Tensor
        ``[m]`` distinct reward values.
    probs : numpy.ndarray or torch.Tensor
        ``[m]`` their probabilities, summing to one.
    G : int
        Group size, at least 1.
    advantages : callable
        ``[B, G]`` rewards to ``[B, G]`` advantages, permutation-equivariant
        (every group estimator is; checked on the first 64 groups), e.g.
        :func:`rloo_advantages`.
    chunk : int
        The most rewards handed to ``advantages`` in one call (default :data:`CHUNK`).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``[m]``, the caller's kind (that of ``values``).

    Examples
    --------
    A binary reward with :math:`p = 0.3`: the leave-one-out advantage of a
    success is :math:`1 - p`, of a failure :math:`-p`, for any :math:`G`:

    >>> import numpy as np
    >>> from numeric import group_advantage_weights, rloo_advantages
    >>> a = group_advantage_weights(np.array([0.0, 1.0]), np.array([0.7, 0.3]), 256, rloo_advantages)
    >>> print(a.round(12))
    [-0.3  0.7]
    """
    require_same_device(values=values, probs=probs)
    v, kind = to_tensor("values", values)
    q, _ = to_tensor("probs", probs)
    G = require_int("G", G, minimum=1)
    chunk = require_int("chunk", chunk, minimum=1)
    advantages = _check_advantages(advantages)
    if v.ndim != 1 or q.shape != v.shape:
        raise ValueError(f"values and probs must be 1-D of equal length, got {tuple(v.shape)} and {tuple(q.shape)}")
    require_finite("values", v)
    require_finite("probs", q)
    tol = max(1e-12, q.numel() * torch.finfo(q.dtype).eps)  # the rounding of a sum of m numbers of q's dtype
    if bool((q < 0).any()) or abs(float(q.to(torch.float64).sum()) - 1.0) > tol:
        raise ValueError(f"probs must be non-negative and sum to one (within {tol:.1e}, from their dtype), got sum {float(q.to(torch.float64).sum())}")
    if v.unique().numel() != v.numel():
        raise ValueError("values must be distinct")
    m = v.numel()
    n_groups = math.comb(G + m - 1, m - 1)
    if n_groups > MAX_GROUPS:
        raise ValueError(f"G = {G} with {m} distinct reward values needs {n_groups:,} groups, more than {MAX_GROUPS:,}")
    counts = count_vectors(m, G)  # the whole group's counts
    weights = _others_weights(counts, q.to(torch.float64))
    first = (counts.cumsum(1) - counts).clamp(max=G - 1)  # where each value's first answer sits in the sorted group (G - 1 if it has none)
    at_first = torch.zeros(counts.shape, dtype=torch.float64)
    probe = _sorted_groups(v, counts[:_PROBE])  # the same groups whatever the chunk: their order is checked on them
    _require_equivariant(advantages, probe, _evaluate(advantages, probe))
    rows = max(1, chunk // G)
    for start in range(0, n_groups, rows):
        stop = min(start + rows, n_groups)
        groups = _sorted_groups(v, counts[start:stop])
        A = _evaluate(advantages, groups)
        if start == 0 or stop == n_groups:
            _require_rows_are_groups(advantages, groups, A)
        at_first[start:stop] = A.to("cpu", torch.float64).gather(1, first[start:stop])
    return like(kind, (weights * at_first).sum(0))


def exact_group_gradient(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, G: int, advantages: Advantages) -> torch.Tensor:
    r"""``[P]`` exact :math:`\mathbb{E}[A_1 s_1]` for a group of :math:`G` i.i.d. answers of ``lm``.

    By symmetry this is also :math:`\mathbb{E}\bigl[\frac1G \sum_i A_i s_i\bigr]`.
    Conditioning on the answer labelled 1, :math:`\mathbb{E}[A_1 s_1] = \mathbb{E}_{o}[a(R(o))\, s(o)]`
    with :math:`a` from :func:`group_advantage_weights`.

    Examples
    --------
    >>> from numeric import TinyLM, default_reward, exact_group_gradient, expected_score_sum, rloo_advantages
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> g = exact_group_gradient(lm, lm.theta0, R, 256, rloo_advantages)
    >>> float((g - expected_score_sum(lm, lm.theta0, R)).abs().max()) < 1e-12
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    R = check_rewards(lm, rewards)
    p = lm.probs(theta.detach())
    values, inverse = torch.unique(R, return_inverse=True)
    probs = torch.zeros_like(values).index_add_(0, inverse, p)
    probs = probs / probs.sum()
    a = group_advantage_weights(values, probs, G, advantages)
    return expected_score_sum(lm, theta, a[inverse])


def brute_force_group_gradient(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, G: int, advantages: Advantages) -> torch.Tensor:
    r"""``[P]`` :math:`\mathbb{E}[A_1 s_1]` by enumerating all :math:`N^G` tuples of answers (:math:`G \le 3`).

    .. math::

        \mathbb{E}[A_1 s_1] = \sum_{o_1, \dots, o_G} \prod_j \pi(o_j)\; A_1(R(o_1), \dots, R(o_G))\, s(o_1),

    with the dense score matrix; no convolution, no conditioning.

    Examples
    --------
    >>> from numeric import TinyLM, default_reward, brute_force_group_gradient, exact_group_gradient, rloo_advantages
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> bf = brute_force_group_gradient(lm, lm.theta0, R, 2, rloo_advantages)
    >>> float((bf - exact_group_gradient(lm, lm.theta0, R, 2, rloo_advantages)).abs().max()) < 1e-13
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    R = check_rewards(lm, rewards)
    G = require_int("G", G, minimum=1)
    if G > 3:
        raise ValueError(f"G must be <= 3 for brute force ({lm.N}^G tuples), got {G}")
    advantages = _check_advantages(advantages)
    p = lm.probs(theta.detach())
    rewards_of_tuples = _tuples(R, G)
    A = advantages(rewards_of_tuples)
    _require_rows_are_groups(advantages, rewards_of_tuples, A)
    A1 = A[:, 0].reshape(lm.N, -1)
    others = _tuples(p, G - 1).prod(1) if G > 1 else torch.ones(1, dtype=p.dtype)
    w = A1 @ others
    return (p * w) @ score_matrix(lm, theta)


def _tuples(values: torch.Tensor, G: int) -> torch.Tensor:
    """``[N^G, G]``: the values of every ``G``-tuple of the ``N`` answers, the answer labelled 1 varying slowest.

    Broadcast from ``values`` (what indexing it by the tuples of indices gives, without the index table).
    """
    shape = (len(values),) * G
    columns = [values.view([-1 if k == j else 1 for k in range(G)]).expand(shape) for j in range(G)]
    return torch.stack(columns, -1).reshape(-1, G)


# -- the GRPO weight ---------------------------------------------------------------------------


@cache
def _grpo_coefficients(G: int, std: str) -> np.ndarray:
    return np.array([float(c) for c in derived.grpo_weight_coefficients(G, std)])


@overload
def grpo_weight(p: float, G: int, std: str = ...) -> float: ...
@overload
def grpo_weight(p: np.ndarray, G: int, std: str = ...) -> np.ndarray: ...


def grpo_weight(p: float | np.ndarray, G: int, std: str = "population") -> float | np.ndarray:
    r"""The GRPO weight :math:`\omega(p, G)` from the closed form of :func:`derivations.group_baselines.grpo_weight`.

    For a binary reward with success probability :math:`p`, the std-normalised
    advantage (with :math:`\varepsilon \to 0`) has expected update
    :math:`\mathbb{E}[A_i s_i] = \omega(p, G)\, \nabla_\theta p`.  The CAS's exact
    coefficients (:func:`derivations.group_baselines.grpo_weight_coefficients`)
    are rounded to fp64 once and the Bernstein sum is evaluated vectorised.

    Parameters
    ----------
    p : float or numpy.ndarray
        Success probabilities in :math:`[0, 1]`.
    G : int
        Group size, :math:`2 \le G \le 16` (the closed forms derived by the CAS).
    std : {"population", "bessel"}

    Examples
    --------
    >>> from numeric import grpo_weight
    >>> [round(float(grpo_weight(0.5, G)), 6) for G in (2, 3, 4, 8, 16)]
    [1.0, 1.414214, 1.616025, 1.855656, 1.934123]
    """
    G = require_int("G", G, minimum=2)
    if G > 16:
        raise ValueError(f"G must be <= 16 (closed forms derived for G = 2..16), got {G}; use group_advantage_weights for larger G")
    if std not in _DDOF:
        raise ValueError(f"std must be one of {sorted(_DDOF)}, got {std!r}")
    if isinstance(p, (str, bytes)) or isinstance(p, np.ndarray) and p.dtype.kind not in "biuf" or isinstance(p, complex):
        raise TypeError(f"p must be a real number or a numpy array of them, got {type(p).__name__}")
    arr = np.asarray(p, dtype=float)
    if np.isnan(arr).any() or (arr < 0).any() or (arr > 1).any():
        raise ValueError("p must lie in [0, 1]")
    c = _grpo_coefficients(G, std)  # the CAS's exact Bernstein coefficients, in fp64
    k = np.arange(G)
    out = (c * arr[..., None] ** k * (1 - arr[..., None]) ** (G - 1 - k)).sum(-1)
    return float(out) if arr.ndim == 0 else out


def binary_reward_weight(p: float, G: int, advantages: Advantages) -> float:
    r"""The weight :math:`\omega` in :math:`\mathbb{E}[A_i s_i] = \omega\, \nabla_\theta p` for a binary reward, any :math:`G`.

    Every group advantage of a binary reward is a function :math:`a(R_i, S_{-i})`
    of the answer's reward and the successes among the others
    (:func:`derivations.group_baselines.grpo_conditioning`), so
    :math:`\omega = \mathbb{E}[A_1 \mid R_1 = 1] - \mathbb{E}[A_1 \mid R_1 = 0]`,
    computed by :func:`group_advantage_weights`.  For the std-normalised
    advantage with ``eps=0`` this is :func:`grpo_weight` at every :math:`G`.

    Examples
    --------
    >>> from functools import partial
    >>> from numeric import binary_reward_weight, group_mean_advantages, group_zscore_advantages, rloo_advantages
    >>> round(binary_reward_weight(0.3, 256, rloo_advantages), 12), round(binary_reward_weight(0.3, 4, group_mean_advantages), 12)
    (1.0, 0.75)
    >>> from numeric import grpo_weight
    >>> abs(binary_reward_weight(0.3, 16, partial(group_zscore_advantages, eps=0.0)) - grpo_weight(0.3, 16)) < 1e-13
    True
    """
    p = require_unit_interval("p", p)
    a = group_advantage_weights(torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([1 - p, p], dtype=torch.float64), G, advantages)
    return float(a[1] - a[0])


# -- cross-checks -----------------------------------------------------------------------------


def _estimators() -> dict[str, Advantages]:
    return {
        "leave-one-out": rloo_advantages,
        "mean including self": group_mean_advantages,
        "z-score (population, eps=0)": partial(group_zscore_advantages, eps=0.0),
        "z-score (Bessel, eps=1e-4)": partial(group_zscore_advantages, eps=1e-4, std="bessel"),
    }


@suite("group_baselines")
def cross_checks() -> None:
    """Group baselines on TinyLM(V=4, L=4, seed=0): brute force, convolution, closed forms, batched helpers."""
    lm = TinyLM(V=4, L=4, seed=0)
    theta = lm.theta0
    R = default_reward(lm)
    g = expected_score_sum(lm, theta, R)

    # 001 section 5: exact enumeration of all N^G tuples (each brute force computed once, reused)
    count_reward = ((lm.tokens == 1).to(torch.float64) * lm.mask).sum(1)
    cases = [(R, name, 2) for name in _estimators()] + [(count_reward, name, 2) for name in _estimators()]
    cases += [(R, name, 3) for name in ("leave-one-out", "mean including self", "z-score (population, eps=0)")]
    brute = {(id(rw), name, G): brute_force_group_gradient(lm, theta, rw, G, _estimators()[name]) for rw, name, G in cases}
    for G in (2, 3):
        loo, mean = brute[(id(R), "leave-one-out", G)], brute[(id(R), "mean including self", G)]
        check(f"G={G}: leave-one-out baseline is exactly unbiased (all N^G tuples)", maxabs(loo, g), 1e-14)
        check(f"G={G}: mean-including-self gives exactly (G-1)/G * grad J (all N^G tuples)", maxabs(mean, (G - 1) / G * g), 1e-14)

    g_count = expected_score_sum(lm, theta, count_reward)
    loo, mean = brute[(id(count_reward), "leave-one-out", 2)], brute[(id(count_reward), "mean including self", 2)]
    check("G=2, count reward (0..4): leave-one-out unbiased, mean-including-self = 1/2 grad J (all N^2 tuples)", max(maxabs(loo, g_count), maxabs(mean, g_count / 2)), 1e-14)

    # the convolution engine against brute force, for several estimators and two rewards
    worst = max(maxabs(exact_group_gradient(lm, theta, rw, G, _estimators()[name]), brute[(id(rw), name, G)]) for rw, name, G in cases)
    check("convolution == brute force at G=2 (4 estimators; binary and count rewards) and G=3 (3 estimators)", worst, 1e-14)

    # any G: the derived results
    worst_loo = max(maxabs(exact_group_gradient(lm, theta, R, G, rloo_advantages), g) for G in (4, 16, 64, 256))
    check("leave-one-out unbiased at G = 4, 16, 64, 256 (convolution)", worst_loo, 1e-13)
    worst_mean = max(maxabs(exact_group_gradient(lm, theta, R, G, group_mean_advantages), (G - 1) / G * g) for G in (4, 16, 64, 256))
    check("mean including self = (G-1)/G grad J at G = 4, 16, 64, 256 (convolution)", worst_mean, 1e-13)
    worst_count = max(
        max(maxabs(exact_group_gradient(lm, theta, count_reward, G, rloo_advantages), g_count),
            maxabs(exact_group_gradient(lm, theta, count_reward, G, group_mean_advantages), (G - 1) / G * g_count))
        for G in (4, 16)
    )
    check("count reward (5 values): leave-one-out unbiased and mean (G-1)/G grad J at G = 4, 16 (convolution)", worst_count, 1e-14)

    # GRPO: E[A s] = omega(p, G) grad p, closed forms lambdified from the CAS
    p = float(lm.probs(theta) @ R)
    for std in ("population", "bessel"):
        worst = 0.0
        for G in range(2, 17):
            est = partial(group_zscore_advantages, eps=0.0, std=std)
            worst = max(worst, maxabs(exact_group_gradient(lm, theta, R, G, est), grpo_weight(p, G, std) * g))
        check(f"GRPO ({std} std): E[A s] = omega(p, G) grad p for G = 2..16", worst, 1e-14)
    ratio = max(abs(grpo_weight(q, G, "bessel") - math.sqrt((G - 1) / G) * grpo_weight(q, G)) for G in range(2, 17) for q in (0.1, 0.5, 0.9))
    check("GRPO: Bessel omega = sqrt((G-1)/G) * population omega", ratio, 1e-14)

    # batched helpers against each other and a naive loop
    gen = torch.Generator().manual_seed(0)
    batch = torch.randint(0, 3, (5, 7, 6), generator=gen).to(torch.float64)
    G = batch.shape[-1]
    check("RLOO = G/(G-1) * centred (batched)", maxabs(rloo_advantages(batch), G / (G - 1) * group_mean_advantages(batch)), 1e-14)
    check("RLOO = R - leave-one-out baseline (batched)", maxabs(rloo_advantages(batch), batch - leave_one_out_baselines(batch)), 1e-14)
    check("batched helpers == naive loop (numpy and torch)", _naive_discrepancy(batch), 1e-14)
    equal = torch.full((3, G), 0.7)
    zero = max(float(torch.as_tensor(f(equal)).abs().max()) for f in (rloo_advantages, group_mean_advantages, group_zscore_advantages))
    check("equal rewards: every advantage is zero (to rounding)", zero, 1e-15)


def _naive_discrepancy(batch: torch.Tensor) -> float:
    worst = 0.0
    flat = batch.reshape(-1, batch.shape[-1]).tolist()
    for std, ddof in _DDOF.items():
        z = group_zscore_advantages(batch.numpy(), eps=1e-8, std=std).reshape(len(flat), -1)
        loo = leave_one_out_baselines(batch).reshape(len(flat), -1)
        for row, zrow, lrow in zip(flat, z, loo):
            G = len(row)
            mean = sum(row) / G
            sigma = math.sqrt(sum((x - mean) ** 2 for x in row) / (G - ddof))
            for k, x in enumerate(row):
                others = [y for t, y in enumerate(row) if t != k]
                expected_z = 0.0 if max(row) == min(row) else (x - mean) / (sigma + 1e-8)
                worst = max(worst, abs(zrow[k] - expected_z), abs(float(lrow[k]) - sum(others) / len(others)))
    return worst
