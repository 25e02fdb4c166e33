r"""The answers to the trainers' questions about a loss, and the probes the questions share.

:class:`Answer` is what every question of :mod:`numeric.variants.questions` and
:mod:`numeric.variants.divergence_questions` returns; :data:`QUESTIONS` lists
each question's verdicts.  The probes are plumbing the question modules share
(public so that they share it without private names): the trainer's loss
completed with the optional roles its function takes (:func:`completed`),
the gradient of the part of a loss that moves with the advantages
(:func:`advantage_gradient`, a KL or entropy term subtracted out), whether a
token's gradient depends on its row (:func:`row_coupled`), whether the function
takes and reads an optional role (:func:`responds`), and the comparisons every
answer makes (:func:`close` to :data:`RTOL`, the quoted :func:`farthest` factor).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .trainer_loss import OPTIONAL_ROLES, TrainerLoss

__all__ = ["NOT_APPLICABLE", "QUESTIONS", "RTOL", "Answer", "Completed", "advantage_gradient", "close", "completed", "farthest", "in_float64",
           "not_applicable", "probe_log_probs", "probe_mask", "ratios", "require_trainer_loss", "responds", "row_coupled", "taken_roles"]

F64 = torch.float64

NOT_APPLICABLE = "not applicable"
QUESTIONS = {
    "mask_consistent": ("consistent", "inconsistent", "undecided"),
    "weighting": ("per token", "per sequence", "other", "undecided"),
    "kl_gradient": ("reverse KL", "reverse KL per token", "forward KL", "forward KL per token", "total variation per token",
                    "no gradient", "neither", NOT_APPLICABLE),
    "correction": ("once", "twice", "not detached", "not applied", "other", NOT_APPLICABLE),
    "sequence_weight_scale": ("product", "geometric mean", "other", NOT_APPLICABLE),
    "poison": ("clean", "leaks", "raises"),
}
"""Each question's verdicts, in the order the answers check them."""
RTOL = 1e-9
"""Relative tolerance of every exact comparison (float64)."""


@dataclass(frozen=True)
class Answer:
    """A question's answer: its verdict, one line naming the measured cause, the measurements.

    Attributes
    ----------
    question : str
        A key of :data:`QUESTIONS`.
    verdict : str
        One of that question's verdicts.
    explanation : str
        One line: what was measured that decides the verdict.
    evidence : tuple of (str, object)
        The named measurements (numbers, strings, tuples of them).
    ok : bool or None
        ``True``/``False`` where the question has a right answer (mask, correction, poison), ``None`` otherwise.
    """

    question: str
    verdict: str
    explanation: str
    evidence: tuple = ()
    ok: bool | None = None

    def as_dict(self) -> dict:
        """The answer as plain JSON-ready values."""
        return {"question": self.question, "verdict": self.verdict, "ok": self.ok, "explanation": self.explanation,
                "evidence": {k: _plain(v) for k, v in self.evidence}}

    def __str__(self) -> str:
        return f"{self.question}: {self.verdict} ({self.explanation})"


def _plain(v):
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, (np.integer, int)) and not isinstance(v, bool):
        return int(v)
    return v


def not_applicable(question: str, why: str) -> Answer:
    return Answer(question, NOT_APPLICABLE, why)


# ------------------------------------------------------------------ shared probes


def require_trainer_loss(loss: object) -> TrainerLoss:
    if not isinstance(loss, TrainerLoss):
        raise TypeError(f"loss must be a numeric.variants.trainer_loss.TrainerLoss (the trainer's function with its roles), got {type(loss).__name__}")
    return loss


class Completed(TrainerLoss):
    """The trainer's loss with the optional roles its function takes filled by the old log-probs (a zero KL, no correction) unless given."""

    def __init__(self, loss: TrainerLoss, dtype: torch.dtype):
        super().__init__(loss.fn, loss.names, loss.fixed, dtype=dtype)
        self.roles = taken_roles(loss)

    def __call__(self, old: torch.Tensor, new: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, **extra: object) -> torch.Tensor:
        for role in self.roles:
            extra.setdefault(role, old)
        return super().__call__(old, new, adv, mask, **extra)


def taken_roles(loss: TrainerLoss) -> tuple[str, ...]:
    """The optional roles the function names among its parameters (all of them if it takes ``**kwargs``)."""
    try:
        params = inspect.signature(loss.fn).parameters
    except (TypeError, ValueError):
        return ()
    anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return tuple(role for role in OPTIONAL_ROLES if anything or loss.names[role] in params)


def completed(loss: TrainerLoss, dtype: torch.dtype | None = None) -> TrainerLoss:
    """The same function with its optional roles filled, handed its batch in ``dtype`` (the trainer's if ``None``)."""
    return Completed(require_trainer_loss(loss), loss.dtype if dtype is None else dtype)


def in_float64(loss: TrainerLoss) -> TrainerLoss:
    """The same function, handed its batch in float64 (the exact measurements), its optional roles filled."""
    return completed(loss, F64)


def probe_mask(T: int, lengths: Sequence[int]) -> torch.Tensor:
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(F64)


def probe_log_probs(shape: Sequence[int], seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return -0.1 - 2.9 * torch.rand(shape, generator=gen, dtype=F64)


def ratios(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a / torch.where(b == 0, torch.ones_like(b), b)


def close(a: torch.Tensor, b: torch.Tensor, rtol: float = RTOL) -> bool:
    scale = max(float(a.abs().max()) if a.numel() else 0.0, float(b.abs().max()) if b.numel() else 0.0, 1e-300)
    return a.shape == b.shape and bool(torch.isfinite(a).all()) and float((a - b).abs().max() if a.numel() else 0.0) <= rtol * scale


def farthest(ratio: torch.Tensor) -> float:
    """The ratio farthest from 1 (in log), the factor an answer quotes."""
    r = ratio[torch.isfinite(ratio) & (ratio > 0)]
    return float(r[(r.log()).abs().argmax()]) if r.numel() else math.nan


def responds(loss: TrainerLoss, role: str) -> tuple[bool, str]:
    """Does the function take the optional ``role`` and does its value or gradient move with it? ``(answer, why not)``."""
    if role not in taken_roles(loss):
        return False, f"fn does not take {role} (no parameter {loss.names[role]!r})"
    mask = probe_mask(3, (2, 3))
    old = probe_log_probs(mask.shape, seed=7)
    adv = torch.ones_like(old)
    (v0, g0), (v1, g1) = (loss.grad(old, old + 0.03, adv, mask, **{role: old - 0.2 + shift}) for shift in (0.0, 0.4))
    if v0 == v1 and bool((g0 == g1).all()):
        return False, f"neither the loss nor its gradient moves with {role}"
    return True, ""


def advantage_gradient(loss: TrainerLoss, old: torch.Tensor, new: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                       **extra: torch.Tensor) -> torch.Tensor:
    """The gradient in log pi of the loss's part that moves with the advantages (a KL or entropy term subtracted out)."""
    _, g = loss.grad(old, new, adv, mask, **extra)
    _, g0 = loss.grad(old, new, torch.zeros_like(adv), mask, **extra)
    return g - g0


def row_coupled(loss: TrainerLoss) -> bool:
    """Does a token's gradient move when another token of its row moves (a sequence-level weight)?"""
    mask = probe_mask(4, (3, 4))
    old = probe_log_probs(mask.shape, seed=1)
    adv = torch.ones_like(old)
    new = old + 1e-5  # log-ratios inside the tightest clip (GSPO's 3e-4 on the sequence's mean)
    base = advantage_gradient(loss, old, new, adv, mask)
    new[0, 1] += 1e-4
    g = advantage_gradient(loss, old, new, adv, mask)
    return not close(g[0, [0, 2]], base[0, [0, 2]], 1e-12)
