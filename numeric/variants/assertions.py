r"""The checks as assertions, for a trainer's own tests.

Each raises :class:`AssertionError` with one paragraph that explains the verdict
when the function is not what ``expect`` says, and returns the report otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from derivations.variants import VERDICTS

from .answers import QUESTIONS
from .execution import Convention
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
                       mask_consistent: bool | None = None, poison: str | None = None, weighting: str | None = None,
                       kl_gradient: str | None = None, correction: str | None = None, **fixed: Any) -> PolicyLossReport:
    r"""Assert that a trainer's policy loss is what ``expect`` says (see :meth:`PolicyLossReport.holds`), and what the trainers' questions should answer.

    ``expect`` is a verdict (``"unbiased"``, ``"scaled"``, ``"reweighted"``, ...), an
    aggregation mode (``"token-mean"``, ...), a method's name (``"PPO"``), or ``None``:
    a policy gradient up to a factor common to the batch, whose claimed
    ``loss_agg_mode`` (if any) is the one it computes.  With ``invariant=True`` the
    loss must also give every token the full batch's :math:`\kappa` when the batch is
    cut into data-parallel ranks and micro-batches
    (:func:`~numeric.variants.check_loss_execution`, under ``convention``, on the
    ``engine``, the simulation unless told otherwise; a constant factor fails).
    ``mask_consistent=True`` asks the mask question's verdict ``"consistent"``;
    ``poison``, ``weighting``, ``kl_gradient`` and ``correction`` name the verdict their
    question must give (``poison="clean"``, ``weighting="per token"``, ``kl_gradient="reverse KL"``,
    ``correction="once"``; :data:`~numeric.variants.QUESTIONS` lists them).

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
    >>> def masked_by_product(old_log_prob, log_prob, advantages, response_mask):
    ...     per_token = -torch.exp(log_prob - old_log_prob) * advantages
    ...     return (per_token * response_mask).sum() / response_mask.sum()
    >>> assert_policy_loss(masked_by_product, poison="clean")
    Traceback (most recent call last):
    ...
    AssertionError: masked_by_product answers poison: leaks, not 'clean' (NaN in the masked slot ...
    """
    expect = _expect(expect)
    if not isinstance(invariant, bool):
        raise TypeError(f"invariant must be a bool, got {type(invariant).__name__}")
    wanted = _wanted_answers(mask_consistent=mask_consistent, poison=poison, weighting=weighting, kl_gradient=kl_gradient,
                             correction=correction)
    report = check_policy_loss(fn, names=names, dtype=dtype, execution={"convention": convention, "engine": engine} if invariant else None,
                               **fixed)
    name = getattr(fn, "__name__", "the loss")
    if not report.holds(expect):
        raise AssertionError(f"{name} is not {_wanted(expect)}: {report.headline()}. {report.reason} Facts: "
                             + "; ".join(f"{k}: {v}" for k, v in report.facts()) + ".")
    for question, verdict in wanted.items():
        got = report.answer(question)
        if got.verdict != verdict:
            raise AssertionError(f"{name} answers {question}: {got.verdict}, not {verdict!r} ({got.explanation})")
    if report.execution is not None and not report.execution.holds():
        raise AssertionError(f"{name} is not invariant to how the batch is cut: {report.execution.headline()}. {report.execution.reason}")
    return report


def _wanted_answers(**asked: object) -> dict[str, str]:
    """``{question: verdict}`` for each question asked a verdict (``mask_consistent`` a bool: True is ``"consistent"``)."""
    out = {}
    for question, want in asked.items():
        if want is None:
            continue
        if question == "mask_consistent":
            if not isinstance(want, bool):
                raise TypeError(f"mask_consistent must be None or a bool, got {type(want).__name__}")
            out[question] = "consistent" if want else "inconsistent"
        elif not isinstance(want, str) or want not in QUESTIONS[question]:
            raise ValueError(f"{question} must be None or one of {', '.join(map(repr, QUESTIONS[question]))}, got {want!r}")
        else:
            out[question] = want
    return out


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
