r"""An advantage that depends on the answers' positions: the summed update, exactly, and the scale of each position.

A trainer's advantage need not be permutation-equivariant: ties broken by
position, ranks from an ``argsort``, a baseline taken from answer 0.  Then
:math:`\mathbb{E}[A_i s_i]` differs between positions, and the question a
trainer asks is about the update it applies, :math:`\sum_i A_i s_i`.  Since the
answers are i.i.d., relabelling them changes no expectation, so

.. math::

    \frac1G \sum_{i} \mathbb{E}[A_i s_i] = \mathbb{E}[\bar A_i s_i],
    \qquad
    \bar A(R) = \frac{1}{G!}\sum_{\psi} \psi^{-1} A(\psi R),

the advantage averaged over every relabelling :math:`\psi` of the group (a
permutation of the answers, acting on the vector :math:`R` of their rewards),
which *is* equivariant.  Its verdict and scale are the summed update's, derived
and confirmed on the toy LM like any advantage's.  Each position's own
:math:`\mathbb{E}[A_i s_i] = c_i\nabla J + \dots` is derived from its table: the
advantage of the answer at position :math:`i` given its reward :math:`y` and
the others' count pattern :math:`n`, averaged over the distinct orderings of the
others (each equally likely given :math:`n`).  The relabellings are enumerated,
so :math:`G \le` :data:`MAX_G`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import numpy as np
import torch

from derivations.variants import GroupReport, count_patterns, derive_group_advantage

__all__ = ["MAX_G", "position_tables", "positional_report", "relabelling_averaged", "what_moves"]

MAX_G = 6
"""The largest group whose :math:`G!` relabellings the positional route enumerates."""


def _as_numpy(fn: Callable, rewards: np.ndarray) -> np.ndarray:
    """``fn`` on float64 ``[B, G]`` rewards, as numpy or else as torch (as the callable accepts), out as numpy."""
    try:
        out = fn(rewards.copy())
    except Exception:  # a torch-only callable
        out = fn(torch.tensor(rewards, dtype=torch.float64))
    if isinstance(out, torch.Tensor):
        out = out.detach().to("cpu", torch.float64).numpy()
    return np.asarray(out, dtype=np.float64)


def relabelling_averaged(fn: Callable, G: int) -> Callable:
    r""":math:`\bar A`: the advantage averaged over all :math:`G!` relabellings of the group (an equivariant callable on ``[B, G]`` numpy rewards).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.variants.positional import relabelling_averaged
    >>> first_as_baseline = lambda r: r - r[..., :1]
    >>> relabelling_averaged(first_as_baseline, 3)(np.array([[1.0, 0.0, 0.0]])).round(4).tolist()
    [[0.6667, -0.3333, -0.3333]]
    """
    perms = np.array(list(itertools.permutations(range(G))))
    inverse = np.argsort(perms, axis=1)

    def averaged(rewards) -> np.ndarray:
        r = np.asarray(rewards, dtype=np.float64)
        flat = r.reshape(-1, G)
        moved = flat[:, perms]  # [B, G!, G]: group b relabelled by each sigma
        out = _as_numpy(fn, moved.reshape(-1, G)).reshape(moved.shape)
        back = np.take_along_axis(out, np.broadcast_to(inverse, out.shape), axis=2)  # each original answer's advantage
        return back.mean(1).reshape(r.shape)

    return averaged


def position_tables(fn: Callable, G: int, rewards: str | Sequence[float]) -> tuple[dict, ...]:
    """For each position ``i`` (from 0), its advantage on every count pattern (its reward, the others' counts), averaged over the others' distinct orderings.

    Examples
    --------
    >>> from numeric.variants.positional import position_tables
    >>> tables = position_tables(lambda r: r - r[..., :1], 2, "binary")
    >>> [[(p.group(), a) for p, a in t.items()] for t in tables]
    [[((0, 1), 0.0), ((0, 0), 0.0), ((1, 1), 0.0), ((1, 0), 0.0)], [((0, 1), -1.0), ((0, 0), 0.0), ((1, 1), 0.0), ((1, 0), 1.0)]]
    """
    patterns = count_patterns(rewards, G)
    groups, owners = [], []
    for k, pattern in enumerate(patterns):
        others = pattern.group()[1:]
        for order in sorted(set(itertools.permutations(others))):
            for i in range(G):
                groups.append([float(x) for x in (*order[:i], pattern.own, *order[i:])])
                owners.append((k, i))
    out = _as_numpy(fn, np.array(groups))
    sums, counts = np.zeros((len(patterns), G)), np.zeros((len(patterns), G))
    for row, (k, i) in enumerate(owners):
        sums[k, i] += out[row, i]
        counts[k, i] += 1
    means = sums / counts
    return tuple({p: float(means[k, i]) for k, p in enumerate(patterns)} for i in range(G))


def what_moves(fn: Callable, G: int) -> str:
    """The first relabelling, of a fixed set of groups, that changes an advantage beyond relabelling it: which answers, which values."""
    rng = np.random.default_rng(0)
    groups = np.concatenate([np.eye(G)[:1], rng.integers(0, 3, (16, G)).astype(np.float64), rng.normal(size=(16, G))])
    out = _as_numpy(fn, groups)
    for a, b in itertools.combinations(range(G), 2):
        swap = list(range(G))
        swap[a], swap[b] = b, a
        moved = _as_numpy(fn, groups[:, swap])[:, swap]
        gap = np.abs(moved - out)
        if gap.max() > 1e-10 * max(1.0, np.abs(out).max()):
            g, j = np.unravel_index(int(gap.argmax()), gap.shape)
            return (f"swapping answers {a} and {b} of the group {np.round(groups[g], 4).tolist()} changes answer {int(j)}'s advantage "
                    f"from {out[g, j]:.6g} to {moved[g, j]:.6g}")
    return "a relabelling of more than two answers changes the advantages"


def positional_report(fn: Callable, G: int, rewards: str | Sequence[float], constants: dict, name: str, summed: GroupReport) -> GroupReport:
    """``summed`` (the report of :func:`relabelling_averaged`) with each position's derived scale and the reason."""
    positions = []
    for i, table in enumerate(position_tables(fn, G, rewards)):
        rep = derive_group_advantage(table, G=G, rewards=rewards, constants=constants, name=f"{name}, position {i}")
        positions.append((i, rep.verdict, rep.scale))
    reason = (f"the advantage depends on the answers' positions ({what_moves(fn, G)}); the summed update (1/G) sum_i E[A_i s_i] "
              f"is that of the advantage averaged over all {G}! relabellings: {summed.reason}")
    return dataclasses.replace(summed, reason=reason, positions=tuple(positions))
