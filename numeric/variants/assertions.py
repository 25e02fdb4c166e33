r"""The checks as assertions, for a trainer's own tests.

Each raises :class:`AssertionError` with one paragraph that explains the verdict
when the function is not what ``expect`` says, and returns the report otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from derivations.variants import VERDICTS

from .execution import Convention, check_loss_execution
from .grouped import GroupedAdvantageReport, check_grouped_advantage
from .policy_loss import PolicyLossReport, check_policy_loss

__all__ = ["assert_group_advantage", "assert_policy_loss"]


def _expect(expect) -> str | None:
    if expect is not None and (not isinstance(expect, str) or not expect):
        raise TypeError(f"expect must be None or a non-empty str (a verdict, an aggregation mode or a method's name), got {expect!r}")
    return expect


def _wanted(expect: str | None) -> str:
    return "a policy gradient up to a positive constant (unbiased or scaled)" if expect is None else repr(expect)


def assert_policy_loss(fn: Callable, expect: str | None = None, *, names: Mapping | None = None, dtype: torch.dtype | None = None,
                       invariant: bool = False, convention: str | Convention | None = None, engine: str = "simulate",
                       **fixed: object) -> PolicyLossReport:
    r"""Assert that a trainer's policy loss is what ``expect`` says (see :meth:`PolicyLossReport.holds`).

    ``expect`` is a verdict (``"unbiased"``, ``"scaled"``, ``"reweighted"``, ...), an
    aggregation mode (``"token-mean"``, ...), a method's name (``"PPO"``), or ``None``:
    a policy gradient up to a factor common to the batch, whose claimed
    ``loss_agg_mode`` (if any) is the one it computes.  With ``invariant=True`` the
    loss must also give every token the full batch's :math:`\kappa` when the batch is
    cut into data-parallel ranks and micro-batches
    (:func:`~numeric.variants.check_loss_execution`, under ``convention``, on the
    ``engine``, the simulation unless told otherwise; a constant factor fails).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants import assert_policy_loss
    >>> def loss_fn(old_log_prob, log_prob, advantages, response_mask):
    ...     per_token = torch.exp(log_prob - old_log_prob) * advantages   # the minus sign forgotten
    ...     return (per_token * response_mask).sum() / response_mask.sum()
    >>> assert_policy_loss(loss_fn)
    Traceback (most recent call last):
    ...
    AssertionError: loss_fn is not a policy gradient up to a positive constant ...: biased: ...
    """
    expect = _expect(expect)
    if not isinstance(invariant, bool):
        raise TypeError(f"invariant must be a bool, got {type(invariant).__name__}")
    report = check_policy_loss(fn, names=names, dtype=dtype, **fixed)
    name = getattr(fn, "__name__", "the loss")
    if not report.holds(expect):
        raise AssertionError(f"{name} is not {_wanted(expect)}: {report.headline()}. {report.reason} Facts: "
                             + "; ".join(f"{k}: {v}" for k, v in report.facts()) + ".")
    if invariant:
        passed: dict[str, Any] = dict(fixed)
        execution = check_loss_execution(fn, convention=convention, engine=engine, names=names, **passed)
        if not execution.holds():
            raise AssertionError(f"{name} is not invariant to how the batch is cut: {execution.headline()}. {execution.reason}")
    return report


def assert_group_advantage(fn: Callable, expect: str | None = None, *, G: int | Sequence[int], convention: str = "batch",
                           rewards: str | Sequence[float] = "binary", **fixed: Any) -> GroupedAdvantageReport:
    r"""Assert that a group-advantage estimator is what ``expect`` says, at every group size in ``G``.

    ``expect`` is one of the checker's verdicts, or ``None``: unbiased, or scaled by a positive
    constant.  ``convention`` is one of :data:`~numeric.variants.CONVENTIONS` (default: a
    ``[B, G]`` callable).

    Examples
    --------
    >>> from numeric.variants import assert_group_advantage
    >>> assert_group_advantage(lambda r: r - r.mean(-1, keepdims=True), "scaled", G=4).verdict
    'scaled'
    """
    expect = _expect(expect)
    if expect is not None and expect not in VERDICTS:
        raise ValueError(f"expect must be one of {', '.join(VERDICTS)} for an advantage, got {expect!r}")
    report = check_grouped_advantage(fn, G=G, convention=convention, rewards=rewards, **fixed)
    if not report.holds(expect):
        name = getattr(fn, "__name__", "the estimator")
        raise AssertionError(f"{name} is not {_wanted(expect)}: {report.verdict}. {report.reason}")
    return report
