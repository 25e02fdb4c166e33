r"""Checking a new variant in numbers: callables evaluated, verdicts confirmed exactly on the toy LM.

:func:`derivations.variants.check_group_advantage` and
:func:`derivations.variants.check_token_loss` call into this module to

* evaluate a trainer's callable (numpy or torch) on reward patterns
  (:func:`advantage_values`) after checking its shape, finiteness and
  permutation equivariance (:func:`require_advantage_callable`);
* confirm every symbolic verdict against exact numbers: the group engine
  :func:`numeric.exact_group_gradient` on :class:`~numeric.TinyLM` at
  :math:`G = 2..8` (or the given :math:`G`), and autograd on TinyLM's tokens
  for token losses.  A disagreement raises
  :class:`derivations.variants.SymbolicNumericMismatch`.

Everything is computed in float64, passed explicitly; nothing global is changed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import sympy as sp
import torch

from derivations import variants as derived
from derivations.group_baselines import GRAD_J, GRAD_P, P
from derivations.iid_groups import Expect

from .checks import check, suite
from .expectations import expected_score_sum
from .group_baselines import exact_group_gradient
from .tinylm import TinyLM, default_reward

__all__ = ["advantage_values", "confirm_group", "require_advantage_callable"]

F64 = torch.float64
TOL = 1e-12
"""Relative tolerance of the exact comparisons (fp64)."""


# ------------------------------------------------------------------ callables


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
        return out
    raise TypeError("advantage could not be called on a float64 numpy array or torch tensor of rewards [B, G]: " + "; ".join(errors))


def advantage_values(fn: Callable, groups, G: int) -> list[float]:
    """Answer 1's advantage in each of ``groups`` (lists of ``G`` rewards), evaluated in one batch.

    Examples
    --------
    >>> from numeric import rloo_advantages
    >>> from numeric.variants import advantage_values
    >>> advantage_values(rloo_advantages, [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], 3)
    [1.0, -1.0]
    """
    batch = np.asarray(groups, dtype=np.float64).reshape(-1, G)
    return _call(fn, batch)[:, 0].tolist()


def require_advantage_callable(fn, G: int) -> None:
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
        raise TypeError(f"advantage must be callable, got {type(fn).__name__}")
    rng = np.random.default_rng(0)
    rewards = np.concatenate([rng.integers(0, 3, (32, G)).astype(np.float64), rng.normal(size=(32, G))])
    out = _call(fn, rewards)
    for _ in range(3):
        perm = rng.permutation(G)
        moved = _call(fn, rewards[:, perm])
        if np.abs(moved - out[:, perm]).max() > TOL * max(1.0, np.abs(out).max()):
            raise derived.NotPermutationEquivariant(
                "advantage is not permutation-equivariant: relabelling the answers "
                f"(permutation {perm.tolist()}) changes the advantages beyond relabelling them"
            )


# ------------------------------------------------------------------ the toy LM and its reward laws


def _lm() -> TinyLM:
    return TinyLM(V=3, L=3, seed=1)


_GENERAL_VALUES = (0.0, 1.0, 2.5, 4.0)


def _reward(lm: TinyLM, law) -> torch.Tensor:
    """A reward on the toy LM with the law's values, each taken by some response."""
    if law == "binary":
        return default_reward(lm)
    values = torch.tensor([float(v) for v in (_GENERAL_VALUES if law == "general" else law)], dtype=F64)
    return values[torch.arange(lm.N) % values.numel()]


def _expression_callable(expr, G: int, constants: dict) -> Callable:
    """Answer ``i``'s advantage from the expression, vectorised: answer i swapped to the front."""
    A1 = derived._explicit(sp.sympify(expr).subs(constants), G)
    f = sp.lambdify([derived.R[k + 1] for k in range(G)], A1, modules=[{"Max": np.maximum, "Min": np.minimum}, "numpy"])

    def advantages(rewards):
        r = torch.as_tensor(rewards, dtype=F64)
        cols = []
        for i in range(G):
            order = [i, *[k for k in range(G) if k != i]]
            out = f(*[r[..., k].numpy() for k in order])
            cols.append(np.broadcast_to(np.asarray(out, dtype=np.float64), r.shape[:-1]))
        return torch.from_numpy(np.stack(cols, -1).copy())

    return advantages


def _moment(lm, theta, R, mono) -> object:
    """A moment of one answer on the toy LM: E[R^d s] as a [P] vector, E[R^d] as a number."""
    d = int(sp.degree(mono, derived._R_PLAIN))
    if mono.has(derived._S_PLAIN):
        return expected_score_sum(lm, theta, R**d)
    return float(lm.probs(theta) @ R**d)


def _predicted(report, lm, theta, R, G: int, constants: dict, law) -> torch.Tensor:
    """c grad J + residual of the report, in numbers on the toy LM."""
    total = report.scale * GRAD_J + report.residual
    total = total.xreplace({derived.G_SYMBOL: G}).subs(constants)
    p = lm.probs(theta)
    vectors = {GRAD_J: expected_score_sum(lm, theta, R), GRAD_P: expected_score_sum(lm, theta, R)}
    numbers = {P: sp.Rational(float(p @ R))}
    if law not in ("general", "binary"):
        values = torch.tensor([float(v) for v in law], dtype=F64)
        for k, v in enumerate(values):
            numbers[sp.Symbol(f"q_{k + 1}", positive=True)] = sp.Rational(float(p @ (R == v).to(F64)))
    for e in total.atoms(Expect):
        arg = e.args[0]
        if arg.has(derived._S_PLAIN):
            vectors[e] = _moment(lm, theta, R, arg)
        elif arg.is_polynomial(derived._R_PLAIN) and not arg.atoms(sp.Indexed):
            numbers[e] = sp.Rational(_moment(lm, theta, R, arg))
        else:
            numbers[e] = sp.Rational(_others_expectation(arg, lm, theta, R, constants))
    out = torch.zeros(lm.P, dtype=F64)
    present = [v for v in vectors if total.has(v)]
    if total.xreplace({v: 0 for v in present}) != 0:
        raise derived.SymbolicNumericMismatch(f"cannot read {total} as a combination of gradients")
    stand_ins = {v: sp.Dummy("g") for v in present}
    linear = total.xreplace(stand_ins)
    for v in present:  # linear in the gradients; no expansion (it would cancel digits of fp64 coefficients)
        coeff = sp.diff(linear, stand_ins[v]).xreplace(numbers)
        out += float(sp.N(coeff, 30)) * vectors[v]  # exact inputs, 30 digits
    return out


def _others_expectation(h, lm, theta, R, constants) -> float:
    """E[h(R_2, ..., R_G)] over the toy LM's reward law, by enumerating the answers h names."""
    p = lm.probs(theta)
    values, inverse = torch.unique(R, return_inverse=True)
    q = torch.zeros_like(values).index_add_(0, inverse, p)
    names = sorted(h.atoms(sp.Indexed), key=sp.default_sort_key)
    f = sp.lambdify(names, h.subs(constants), modules=[{"Max": max, "Min": min}, "math"])
    total = 0.0
    for combo in np.ndindex(*[values.numel()] * len(names)):
        total += math.prod(float(q[k]) for k in combo) * float(f(*[float(values[k]) for k in combo]))
    return total


def confirm_group(report, advantage, constants: dict):
    r"""The report with its numeric confirmation: symbolic :math:`c\nabla J + \text{residual}` against the exact group engine.

    On ``TinyLM(V=3, L=3, seed=1)`` with a reward of the report's law
    (a four-valued reward 0, 1, 2.5, 4 for a general law), for the report's
    :math:`G` or each :math:`G = 2..8` when it is symbolic.  An undecided
    report is returned unchanged (there is nothing to confirm).

    Raises
    ------
    derivations.variants.SymbolicNumericMismatch
        When the two differ by more than 1e-12 (relative to the gradient).
    """
    if report.verdict == "undecided":
        return report
    lm = _lm()
    theta = lm.theta0
    R = _reward(lm, report.rewards)
    Gs = [report.G] if isinstance(report.G, int) else list(range(2, 9))
    rows = []
    for G in Gs:
        fn = advantage if callable(advantage) and not isinstance(advantage, sp.Basic) else _expression_callable(advantage, G, constants)
        exact = exact_group_gradient(lm, theta, R, G, fn)
        symbolic = _predicted(report, lm, theta, R, G, constants, report.rewards)
        gap = float((exact - symbolic).abs().max())
        scale = max(1.0, float(exact.abs().max()))
        rows.append((G, float(symbolic.norm()), float(exact.norm()), gap))
        if not gap <= TOL * scale:
            raise derived.SymbolicNumericMismatch(
                f"G = {G}: the symbolic expected update and the exact one on the toy LM differ by {gap:.3g} "
                f"(verdict {report.verdict}, c = {report.scale})"
            )
    return dataclasses.replace(report, numeric=tuple(rows))
