r"""A group of one answer: what a trainer's convention does to the gradient there, exactly.

A trainer whose batch holds a prompt with one response (a filtered or failed
rollout, ``n = 1``) has no peer to centre on, and decides: the raw reward
(verl ``grpo``: mean 0, std 1), 0 (TRL, ms-swift, slime, prime-rl) or an
error (OpenRLHF).  For one answer the expected update is

.. math::

    \mathbb{E}[A(R)\,\nabla\log\pi(o)] = \sum_y A(y)\,\nabla q_y
    = \sum_y \bigl(A(y) - A(y_0)\bigr)\nabla q_y,

over the values :math:`y` of the reward, :math:`q_y = \Pr[R = y]`, since :math:`\sum_y \nabla q_y = 0`;
with :math:`\nabla J = \sum_y (y - y_0)\nabla q_y`
and the :math:`\nabla q_y` free, it is :math:`c\,\nabla J` exactly when
:math:`A(y) - A(y_0) = c\,(y - y_0)` on every value of the law: an affine
advantage.  The raw reward gives :math:`c = 1` (REINFORCE without a baseline),
0 gives :math:`c = 0` (the prompt drops out of the update), and a binary law
always gives :math:`c = A(1) - A(0)`.  :func:`check_singleton` decides this from
the callable's values and confirms it on the toy LM by enumeration
(:func:`numeric.brute_force_group_gradient` at :math:`G = 1`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp
import torch

from derivations.variants import SymbolicNumericMismatch
from derivations.variants.patterns import exact_number

from ..expectations import expected_score_sum
from ..group_baselines import brute_force_group_gradient
from .callables import F64, TOL
from .confirm import toy_lm

__all__ = ["SingletonReport", "check_singleton"]


@dataclass(frozen=True)
class SingletonReport:
    r"""What :func:`check_singleton` found for a group of one answer.

    Attributes
    ----------
    verdict : str
        ``"unbiased"`` (:math:`c = 1`), ``"scaled"`` (a constant :math:`c`, 0 included: no update)
        or ``"biased"`` (the advantage is not affine in the reward).
    scale : sympy number or None
        :math:`c` (``None`` when biased).
    values : tuple
        The reward law's values and the advantage on each, ``((v, A(v)), ...)``.
    reason : str
    gap : float
        The largest difference between :math:`c\,\nabla J` (plus the residual, when biased)
        and the exact enumeration on the toy LM.
    """

    verdict: str
    scale: sp.Expr | None
    values: tuple
    reason: str
    gap: float


def _values(rewards) -> tuple:
    if isinstance(rewards, str):
        if rewards != "binary":
            raise ValueError(f"rewards must be 'binary' or a list of at least two distinct reward values, got {rewards!r}")
        return (0.0, 1.0)
    if not isinstance(rewards, (list, tuple)) or len(rewards) < 2:
        raise ValueError(f"rewards must be 'binary' or a list of at least two distinct reward values, got {rewards!r}")
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(float(v)) for v in rewards):
        raise TypeError(f"rewards must hold finite real numbers, got {rewards!r}")
    values = tuple(sorted(float(v) for v in rewards))
    if len(set(values)) != len(values):
        raise ValueError(f"rewards must be distinct values, got {rewards!r}")
    return values


def _advantage_of_one(fn: Callable, values: tuple) -> np.ndarray:
    """``A(v)`` for each value, from ``fn`` on ``[K, 1]`` rewards (numpy first, then torch)."""
    batch = np.array(values, dtype=np.float64)[:, None]
    for make in (lambda x: x.copy(), lambda x: torch.tensor(x, dtype=F64)):
        try:
            out = fn(make(batch))
        except (TypeError, AttributeError):
            continue
        out = out.detach().to("cpu", F64).numpy() if isinstance(out, torch.Tensor) else np.asarray(out, dtype=np.float64)
        if out.shape != batch.shape:
            raise ValueError(f"advantage must return [K, 1] advantages for [K, 1] rewards (groups of one), got shape {out.shape}")
        if not np.isfinite(out).all():
            raise ValueError("advantage must return finite values on groups of one answer")
        return out[:, 0]
    raise TypeError("advantage could not be called on [K, 1] rewards (groups of one answer), as numpy or torch")


def check_singleton(advantage: Callable, *, rewards: str | Sequence[float] = (0.0, 1.0, 2.5, 4.0)) -> SingletonReport:
    r"""The expected update of a group of one answer, :math:`\mathbb{E}[A(R)\,s] = c\,\nabla J` or biased, exactly.

    ``advantage`` maps ``[B, 1]`` rewards (one group of one per row) to
    ``[B, 1]`` advantages: a trainer's convention for a lone answer, e.g.
    :func:`numeric.losses.grouped_advantages` with its ``singleton``.  The law's
    values default to a four-valued reward (a binary one cannot tell an
    affine advantage from any other).  A refusal (the convention raises) is
    the caller's to catch: the function's own error propagates.

    Examples
    --------
    >>> import numpy as np
    >>> from functools import partial
    >>> from numeric import group_zscore_advantages
    >>> from numeric.losses import grouped_advantages
    >>> from numeric.variants import check_singleton
    >>> z = partial(group_zscore_advantages, eps=1e-6, std="bessel")
    >>> one = lambda c: (lambda r: grouped_advantages(z, r[:, 0], np.arange(len(r)), singleton=c)[:, None])
    >>> rep = check_singleton(one(1 / (1 + 1e-6)))                     # verl grpo: the raw reward
    >>> rep.verdict, float(rep.scale)
    ('scaled', 0.999999000001)
    >>> check_singleton(one(0.0)).scale                                # TRL: no update
    0
    >>> check_singleton(lambda r: r ** 2).verdict
    'biased'
    """
    if not callable(advantage):
        raise TypeError(f"advantage must be a callable of [B, 1] rewards, got {type(advantage).__name__}")
    values = _values(rewards)
    a = _advantage_of_one(advantage, values)
    v = np.array(values)
    slope = (a[1] - a[0]) / (v[1] - v[0])
    residual = (a - a[0]) - slope * (v - v[0])
    size = max(1.0, float(np.abs(a).max()))
    affine = bool(np.abs(residual).max() <= TOL * size)
    c = exact_number(float(slope)) if affine else None
    if affine and c == 1:
        verdict, reason = "unbiased", "a lone answer gets its reward (plus a constant): REINFORCE, c = 1"
    elif affine:
        verdict = "scaled"
        reason = "a lone answer gets no update (c = 0)" if c == 0 else f"a lone answer's advantage is affine in its reward: c = {sp.sstr(c)}"
    else:
        verdict, reason = "biased", "a lone answer's advantage is not affine in its reward: its update is not along grad J"
    gap = _confirm(advantage, values, a, float(slope) if affine else None)
    return SingletonReport(verdict, c, tuple(zip(values, a.tolist())), reason, gap)


def _confirm(advantage: Callable, values: tuple, a: np.ndarray, slope: float | None) -> float:
    """The report's update against the enumeration over the toy LM's answers (G = 1)."""
    lm = toy_lm()
    theta = lm.theta0
    law = torch.tensor(values, dtype=F64)
    R = law[torch.arange(lm.N) % law.numel()]
    exact = brute_force_group_gradient(lm, theta, R, 1, lambda r: torch.as_tensor(advantage(r), dtype=F64))
    table = torch.tensor(a, dtype=F64)[torch.arange(lm.N) % law.numel()]
    predicted = expected_score_sum(lm, theta, slope * R) if slope is not None else expected_score_sum(lm, theta, table)
    gap = float((exact - predicted).abs().max())
    if not gap <= TOL * max(1.0, float(exact.abs().max())):
        raise SymbolicNumericMismatch(f"a group of one: the predicted update and the enumeration on the toy LM differ by {gap:.3g}")
    return gap
