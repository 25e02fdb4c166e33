r"""A trainer's advantage function, evaluated: shape, finiteness, one group per row, equivariance, and its values on the count patterns.

The symbolic core (:func:`derivations.variants.derive_group_advantage`) is
handed the answer labelled 1's advantage on every
:class:`~derivations.variants.CountPattern`; :func:`advantage_table` computes
that table from a numpy or torch function of ``[B, G]`` rewards, in one batch,
after checking that the order of the answers does not matter.  Above
:data:`derivations.variants.patterns.SYMBOLIC_PATTERNS` patterns (five reward
values at :math:`G = 64` are 3.8 million) :func:`advantage_coefficients`
streams the whole groups in chunks instead and hands the symbolic core only
the range of each Bernstein coefficient :math:`\beta_d(c)`
(:func:`derivations.variants.patterns.coefficient_report`).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from derivations.variants import CountPattern, NotPermutationEquivariant, count_patterns
from derivations.variants.inputs import require_group_size, reward_law
from derivations.variants.patterns import interpolation_rows

from .._validate import require_int
from ..group_baselines import CHUNK, MAX_GROUPS, count_vectors

__all__ = ["Coefficients", "advantage_coefficients", "advantage_table", "advantage_values", "require_advantage_callable",
           "zero_on_equal_rewards"]

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
    as_array = lambda x: x.detach().to("cpu", F64).numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)
    for k in sorted({0, len(rewards) // 2, len(rewards) - 1}):
        alone = as_array(fn(make(rewards[k:k + 1])))
        if alone.shape == (1, rewards.shape[1]) and np.allclose(alone[0], out[k], rtol=1e-12, atol=1e-12):
            continue
        # the same shape, the other rows replaced (by equal rewards, then by distinct ones): a row that keeps its values
        # is its own group, and the difference alone was rounding that depends on the batch's shape (an estimator that
        # amplifies it, as 0/eps on equal rewards); a batch statistic (GPG's B/|valid|, a whitening) moves it
        if alone.shape == (1, rewards.shape[1]) and all(np.array_equal(as_array(fn(make(others)))[k], out[k])
                                                        for others in _replaced_others(rewards, k)):
            continue
        raise ValueError(
            "advantage must treat each row of its [B, G] input as one group, but the advantages of the group "
            f"{rewards[k].tolist()} change with the other rows of the batch (a batch-level normalisation, as GPG's "
            "B/|valid| or whitening over the batch); check it one group at a time, e.g. "
            "lambda r: torch.cat([f(g[None]) for g in r])"
        )


def _replaced_others(rewards: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``rewards`` with every row but ``k`` replaced by equal rewards, and by distinct ones."""
    equal, distinct = np.zeros_like(rewards), rewards + 0.37 * np.arange(rewards.shape[1]) + 1.0
    equal[k] = distinct[k] = rewards[k]
    return equal, distinct


def advantage_values(fn: Callable, groups: Sequence[Sequence[float]], G: int) -> list[float]:
    """The advantage of the answer labelled 1 in each of ``groups`` (lists of ``G`` rewards), evaluated in batches of at most :data:`numeric.group_baselines.CHUNK` rewards.

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
    return _first_answers(fn, batch).tolist()


def _first_answers(fn: Callable, batch: np.ndarray) -> np.ndarray:
    """The advantage of the answer labelled 1 in each row of ``batch``, streamed as :func:`numeric.group_advantage_weights` streams its groups."""
    rows = max(2, CHUNK // batch.shape[1])
    return np.concatenate([_call(fn, batch[k:k + rows])[:, 0] for k in range(0, len(batch), rows)])


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
    """The advantage of the answer labelled 1 on every count pattern of ``rewards`` (a binary or finite law) at ``G``, in one batch.

    Every ordering of the other answers' rewards that a pattern stands for
    (up to 1024 orderings per value of the answer labelled 1) must give the pattern's
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
    _require_order_free(fn, G, values, lambda own, counts: [table[CountPattern(values[k], tuple(c), values)] for k, c in zip(own.tolist(), counts.tolist())])
    return table


def _require_order_free(fn: Callable, G: int, values: tuple, tabulated: Callable) -> None:
    """Up to 1024 orderings of the others per own value give the tabulated value to 1e-10.

    ``tabulated(own, counts)`` returns the table's values for own-value indices ``[n]`` and others' counts ``[n, m]``.
    """
    m = len(values)
    orderings = np.array(list(itertools.islice(itertools.product(range(m), repeat=G - 1), 1024)), dtype=np.int64)
    own = np.repeat(np.arange(m), len(orderings))
    others = np.tile(orderings, (m, 1))
    counts = (others[:, :, None] == np.arange(m)).sum(1)
    v = np.array([float(x) for x in values])
    groups = np.concatenate([v[own][:, None], v[others]], 1)
    got = _first_answers(fn, groups)
    expected = np.asarray(tabulated(own, counts), dtype=np.float64)
    bad = np.flatnonzero(np.abs(got - expected) > 1e-10 * np.maximum(1.0, np.abs(got)))
    if bad.size:
        k = int(bad[0])
        raise NotPermutationEquivariant(
            f"advantage of answer 1 depends on the order of the other answers: group {groups[k].tolist()} gives {float(got[k])}, "
            f"its sorted pattern {float(expected[k])}"
        )


def zero_on_equal_rewards(fn: Callable, G: int) -> bool:
    """Whether every advantage vanishes (to 1e-12) on groups of equal rewards 0, 0.5, 1 and 3."""
    groups = [[float(v)] * G for v in (0.0, 0.5, 1.0, 3.0)]
    got = advantage_values(fn, groups, G)
    return all(abs(x) <= 1e-12 for x in got)


# ------------------------------------------------------------------ above SYMBOLIC_PATTERNS: streamed, in floats


@dataclass(frozen=True, repr=False)
class Coefficients:
    r"""A callable's Bernstein coefficients :math:`\beta_d(c) = \sum_k L_{dk} A(v_k \mid c)` on every count pattern.

    Attributes
    ----------
    G : int
    values : tuple
        The reward law's exact values.
    others : numpy.ndarray
        ``[C, m]`` the other :math:`G - 1` answers' counts, one row per pattern.
    beta : numpy.ndarray
        ``[m - 1, C]`` :math:`\beta_d(c)` for :math:`d = 1..m-1`.
    largest : float
        :math:`\max |A(v \mid c)|`.
    """

    G: int
    values: tuple
    others: np.ndarray
    beta: np.ndarray
    largest: float

    def bounds(self) -> tuple:
        r"""``((low, high), ...)``: the range of :math:`\beta_d` over the patterns, for :math:`d = 1..m-1`."""
        return tuple((float(b.min()), float(b.max())) for b in self.beta)

    def evaluate(self, q: Sequence[float]) -> tuple:
        r""":math:`\alpha_d(q) = \sum_c \binom{G-1}{c}\prod_k q_k^{c_k}\,\beta_d(c)` for :math:`d = 1..m-1`, at a law ``q``."""
        law = np.asarray(q, dtype=np.float64)
        if law.shape != (len(self.values),) or not np.isfinite(law).all() or bool((law < 0).any()) or abs(float(law.sum()) - 1) > 1e-12:
            raise ValueError(f"q must be {len(self.values)} probabilities summing to one, got {law.tolist()}")
        log_factorial = np.array([math.lgamma(k + 1.0) for k in range(self.G)])
        log_q = np.log(np.where(law > 0, law, 1.0))  # a zero q_k enters only as q_k^0 = 1, or the term is dropped below
        log_weight = log_factorial[self.G - 1] - log_factorial[self.others].sum(1) + (self.others * log_q).sum(1)
        reachable = ((self.others > 0) & (law == 0)).sum(1) == 0
        return tuple(float(x) for x in self.beta[:, reachable] @ np.exp(log_weight[reachable]))


def advantage_coefficients(fn: Callable, G: int, rewards: str | Sequence[float]) -> Coefficients:
    r"""The Bernstein coefficients :math:`\beta_d(c)` of a callable advantage under a finite law, streamed over whole groups.

    Each of the :math:`\binom{G+m-1}{m-1}` whole groups (sorted by value) is
    evaluated once, in batches of at most :data:`numeric.group_baselines.CHUNK`
    rewards, as :func:`numeric.group_advantage_weights` does: the first answer
    with value :math:`v_j` of the group with counts :math:`c'` holds
    :math:`A(v_j \mid c' - e_j)`.  Those fill the table
    :math:`A(v \mid c)` of every own value and others' pattern, and
    :math:`\beta = L\,A` with :math:`L` the exact inverse Vandermonde matrix
    (:func:`derivations.variants.patterns.interpolation_rows`) in floats.
    Up to 1024 orderings of the others per own value must give the table's
    value to 1e-10, else :class:`~derivations.variants.NotPermutationEquivariant`.

    Examples
    --------
    >>> from numeric import rloo_advantages
    >>> from numeric.variants.callables import advantage_coefficients
    >>> co = advantage_coefficients(rloo_advantages, 64, [0, 1, 2, 3, 4])
    >>> co.beta.shape, co.bounds()[0], max(abs(x) for b in co.bounds()[1:] for x in b) < 1e-13
    ((4, 766480), (1.0, 1.0), True)
    """
    if not callable(fn):
        raise TypeError(f"fn (the advantage) must be callable, got {type(fn).__name__}")
    law, values = reward_law(rewards)
    if law == "general":
        raise ValueError("rewards must be 'binary' or a list of values: a general law has no count patterns")
    G = require_group_size(G, needed=True)
    m = len(values)
    if math.comb(G + m - 1, m - 1) > MAX_GROUPS:
        raise ValueError(f"G = {G} with {m} reward values needs {math.comb(G + m - 1, m - 1):,} groups, more than {MAX_GROUPS:,}")
    v = np.array([float(x) for x in values])
    others, by_key, keys, whole = _patterns_by_key(m, G)
    radix = (G + 1) ** np.arange(m, dtype=np.int64)
    table = np.full((m, len(others)), np.nan)
    filled = np.zeros(m, dtype=np.int64)  # per own value, how many of the others' patterns (by key) are filled
    rows = max(2, CHUNK // G)
    for start in range(0, len(whole), rows):
        counts = whole[start:start + rows]
        first = np.cumsum(counts, 1) - counts  # where each value's first answer sits in the sorted group
        A = _call(fn, np.repeat(np.tile(v, len(counts)), counts.reshape(-1)).reshape(len(counts), G))
        for j in range(m):
            has = np.flatnonzero(counts[:, j] > 0)
            table[j, by_key[filled[j]:filled[j] + has.size]] = A[has, first[has, j]]
            filled[j] += has.size
    if (filled != len(others)).any() or np.isnan(table).any():
        raise AssertionError("every (own value, others' counts) pattern sits in exactly one whole group")
    _require_order_free(fn, G, values, lambda own, counts: table[own, by_key[np.searchsorted(keys, counts @ radix)]].tolist())
    L = np.array([[float(x) for x in row] for row in interpolation_rows(values)])
    return Coefficients(G, values, others.copy(), L[1:] @ table, float(np.abs(table).max()))


@lru_cache(maxsize=4)
def _patterns_by_key(m: int, G: int) -> tuple:
    r"""``(others, by_key, keys, whole)``, read-only, a pure function of ``(m, G)``: the others' count patterns, their order by the key
    :math:`\sum_k c_k (G+1)^{k-1}` and the sorted keys, and the whole groups' counts sorted by the same key."""
    radix = (G + 1) ** np.arange(m, dtype=np.int64)
    others, whole = count_vectors(m, G - 1).numpy(), count_vectors(m, G).numpy()
    by_key = np.argsort(others @ radix)
    whole = whole[np.argsort(whole @ radix)]  # c' -> c' - e_j lowers every key by radix[j]: the order of the others is kept
    out = (others, by_key, others[by_key] @ radix, whole)
    for a in out:
        a.flags.writeable = False
    return out
