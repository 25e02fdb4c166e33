r"""A trainer's advantage function, evaluated: shape, finiteness, one group per row, equivariance, and its values on the count patterns.

The symbolic core (:func:`derivations.variants.derive_group_advantage`) is
handed answer 1's advantage on every
:class:`~derivations.variants.CountPattern`; :func:`advantage_table` computes
that table from a numpy or torch function of ``[B, G]`` rewards, in one batch,
after checking that the order of the answers does not matter.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Sequence

import numpy as np
import torch

from derivations.variants import CountPattern, NotPermutationEquivariant, count_patterns

from .._validate import require_int
from ..group_baselines import CHUNK

__all__ = ["advantage_table", "advantage_values", "require_advantage_callable", "zero_on_equal_rewards"]

F64 = torch.float64
TOL = 1e-12
"""Relative tolerance of the exact comparisons (fp64)."""


def _call(fn: Callable, rewards: np.ndarray) -> np.ndarray:
    """``fn`` on a float64 ``[B, G]`` batch: numpy first, then torch; the output as float64 numpy."""
    errors = []
    for make in (lambda x: x.copy(), lambda x: torch.tensor(x, dtype=F64)):
        try:
            out = fn(make(rewards))
        except Exception as err:  # the callable may accept only one of the two kinds
            errors.append(f"{type(err).__name__}: {err}")
            continue
        if isinstance(out, torch.Tensor):
            out = out.detach().to("cpu", F64).numpy()
        try:
            out = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"advantage must return an array or tensor of numbers, got {type(out).__name__}") from None
        if out.shape != rewards.shape:
            raise ValueError(f"advantage must return the shape of its input {tuple(rewards.shape)} ([..., G] advantages), got {tuple(out.shape)}")
        if not np.isfinite(out).all():
            bad = rewards[~np.isfinite(out).all(-1)][0].tolist()
            raise ValueError(f"advantage must return finite values, got a non-finite one for the group {bad}")
        _require_rows_independent(fn, make, rewards, out)
        return out
    raise TypeError("advantage could not be called on a float64 numpy array or torch tensor of rewards [B, G]: " + "; ".join(errors))


def _require_rows_independent(fn: Callable, make: Callable, rewards: np.ndarray, out: np.ndarray) -> None:
    """Each row of ``[B, G]`` must be its own group: the first, a middle and the last row, evaluated alone, give the same advantages."""
    if len(rewards) < 2:
        return
    for k in sorted({0, len(rewards) // 2, len(rewards) - 1}):
        alone = fn(make(rewards[k:k + 1]))
        alone = alone.detach().to("cpu", F64).numpy() if isinstance(alone, torch.Tensor) else np.asarray(alone, dtype=np.float64)
        if alone.shape != (1, rewards.shape[1]) or not np.allclose(alone[0], out[k], rtol=1e-12, atol=1e-12):
            raise ValueError(
                "advantage must treat each row of its [B, G] input as one group, but the advantages of the group "
                f"{rewards[k].tolist()} change with the other rows of the batch (a batch-level normalisation, as GPG's "
                "B/|valid| or whitening over the batch); check it one group at a time, e.g. "
                "lambda r: torch.cat([f(g[None]) for g in r])"
            )


def advantage_values(fn: Callable, groups: Sequence[Sequence[float]], G: int) -> list[float]:
    """Answer 1's advantage in each of ``groups`` (lists of ``G`` rewards), evaluated in batches of at most :data:`numeric.group_baselines.CHUNK` rewards.

    Examples
    --------
    >>> from numeric import rloo_advantages
    >>> from numeric.variants import advantage_values
    >>> advantage_values(rloo_advantages, [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], 3)
    [1.0, -1.0]
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    G = require_int("G", G, minimum=2)
    if not isinstance(groups, (list, tuple)) or not groups or not all(isinstance(g, (list, tuple)) and len(g) == G for g in groups):
        raise ValueError(f"groups must be a non-empty list of lists of G = {G} rewards, got {groups!r}")
    if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for g in groups for x in g):
        raise TypeError(f"groups must hold real numbers, got {groups!r}")
    batch = np.array(groups, dtype=np.float64)
    if not np.isfinite(batch).all():
        raise ValueError("groups must hold finite rewards")
    rows = max(2, CHUNK // G)  # streamed as numeric.group_advantage_weights streams its groups
    return np.concatenate([_call(fn, batch[k:k + rows])[:, 0] for k in range(0, len(batch), rows)]).tolist()


def require_advantage_callable(fn: Callable, G: int) -> None:
    """Refuse a callable that fails on ``[B, G]`` rewards, changes the shape, returns non-finite values, or is not permutation-equivariant.

    Equivariance is checked on 64 random groups (fixed seed), integer and real
    rewards, each under a random relabelling of the answers, to 1e-12.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.variants import require_advantage_callable
    >>> require_advantage_callable(lambda r: r - r[..., :1], 4)
    Traceback (most recent call last):
    ...
    derivations.variants.NotPermutationEquivariant: advantage is not permutation-equivariant: ...
    """
    if not callable(fn):
        raise TypeError(f"fn (the advantage) must be callable, got {type(fn).__name__}")
    G = require_int("G", G, minimum=2)
    rng = np.random.default_rng(0)
    rewards = np.concatenate([rng.integers(0, 3, (32, G)).astype(np.float64), rng.normal(size=(32, G))])
    out = _call(fn, rewards)
    for _ in range(3):
        perm = rng.permutation(G)
        moved = _call(fn, rewards[:, perm])
        if np.abs(moved - out[:, perm]).max() > TOL * max(1.0, np.abs(out).max()):
            raise NotPermutationEquivariant(
                "advantage is not permutation-equivariant: relabelling the answers "
                f"(permutation {perm.tolist()}) changes the advantages beyond relabelling them"
            )


def advantage_table(fn: Callable, G: int, rewards: str | Sequence[float]) -> dict[CountPattern, float]:
    """Answer 1's advantage on every count pattern of ``rewards`` (a binary or finite law) at ``G``, in one batch.

    Every ordering of the other answers' rewards that a pattern stands for
    (up to 1024 orderings per value of answer 1) must give the pattern's
    value to 1e-10, else :class:`~derivations.variants.NotPermutationEquivariant`.

    Examples
    --------
    >>> from numeric import rloo_advantages
    >>> from numeric.variants import advantage_table
    >>> [(p.group(), a) for p, a in advantage_table(rloo_advantages, 2, "binary").items()]
    [((0, 1), -1.0), ((0, 0), 0.0), ((1, 1), 0.0), ((1, 0), 1.0)]
    """
    patterns = count_patterns(rewards, G)
    values = patterns[0].values
    raw = advantage_values(fn, [[float(x) for x in p.group()] for p in patterns], G)
    table = dict(zip(patterns, raw))
    _require_order_free(fn, G, values, table)
    return table


def _require_order_free(fn: Callable, G: int, values: tuple, table: dict) -> None:
    orderings = list(itertools.islice(itertools.product(values, repeat=G - 1), 1024))
    groups, expected = [], []
    for v in values:
        for others in orderings:
            groups.append([v, *others])
            expected.append(table[CountPattern(v, tuple(others.count(x) for x in values), values)])
    got = advantage_values(fn, [[float(x) for x in g] for g in groups], G)
    for g, x, y in zip(groups, got, expected):
        if abs(float(x) - y) > 1e-10 * max(1.0, abs(float(x))):
            raise NotPermutationEquivariant(
                f"advantage of answer 1 depends on the order of the other answers: group {[float(t) for t in g]} gives {float(x)}, "
                f"its sorted pattern {y}"
            )


def zero_on_equal_rewards(fn: Callable, G: int) -> bool:
    """Whether every advantage vanishes (to 1e-12) on groups of equal rewards 0, 0.5, 1 and 3."""
    groups = [[float(v)] * G for v in (0.0, 0.5, 1.0, 3.0)]
    got = advantage_values(fn, groups, G)
    return all(abs(x) <= 1e-12 for x in got)
