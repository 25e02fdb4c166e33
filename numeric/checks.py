r"""The check registry.

A *check* is a named number that must not exceed its tolerance: a maximum
absolute difference between two computations of the same quantity (kind
``"exact"``, tolerance near :math:`10^{-12}` in fp64), or a Monte-Carlo
z-score (kind ``"mc"``, tolerance a stated number of standard errors with a
fixed seed).  :func:`check` records it in :data:`CHECKS`, prints one line and
raises :class:`CheckFailed` when it fails.

Each topic module registers its cross-checks as a *suite* with
:func:`suite`; :func:`run_suites` (and the ``pg-identities-report`` command)
runs them all and keeps going past a failing suite.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ._types import Array
from ._validate import require_nonnegative

__all__ = ["CHECKS", "Check", "CheckFailed", "SUITES", "check", "maxabs", "run_suites", "suite"]


@dataclass(frozen=True)
class Check:
    """One recorded check: ``passed`` is ``|value| <= tol`` (NaN and infinities never pass)."""

    name: str
    value: float
    tol: float
    kind: str
    suite: str | None = None

    @property
    def passed(self) -> bool:
        return math.isfinite(self.value) and abs(self.value) <= self.tol

    def line(self) -> str:
        mark = "ok  " if self.passed else "FAIL"
        shown = f"{self.value:.3g}" if self.value >= 0 else f"|{self.value:.3g}|"
        return f"[{mark}] {self.name}: {shown} <= {self.tol:.3g} ({self.kind})"


class CheckFailed(AssertionError):
    """Raised by :func:`check` when a value exceeds its tolerance."""


CHECKS: list[Check] = []
"""Every check made in this process, in order."""

SUITES: dict[str, Callable[[], None]] = {}
"""Registered cross-check suites, by name."""

_current_suite: list[str] = []


def check(name: str, value: float | np.floating | torch.Tensor | np.ndarray, tol: float, kind: str = "exact", *, quiet: bool = False) -> float:
    r"""Record that the discrepancy ``value`` is at most ``tol`` in absolute value.

    The check compares :math:`|\text{value}|`, so a signed difference passes
    only when it is small, whatever its sign; NaN and :math:`\pm\infty` never
    pass.

    Parameters
    ----------
    name : str
        What is being checked, in words.
    value : float
        The discrepancy: a max-abs or signed difference, a count of
        mismatches, or a Monte-Carlo z-score.
    tol : float
        Largest acceptable value, ``>= 0``.
    kind : {"exact", "mc"}
        ``"exact"`` for fp64 comparisons, ``"mc"`` for Monte-Carlo bounds.
    quiet : bool
        Record without printing.

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    CheckFailed
        If ``|value| > tol`` or ``value`` is NaN or infinite.

    Examples
    --------
    >>> from numeric import check
    >>> check("two ways to add", (0.1 + 0.2) - 0.3, 1e-15)
    [ok  ] two ways to add: 5.55e-17 <= 1e-15 (exact)
    5.551115123125783e-17
    >>> check("a large negative difference", -5.0, 1e-15)
    Traceback (most recent call last):
    ...
    numeric.checks.CheckFailed: [FAIL] a large negative difference: |-5| <= 1e-15 (exact)
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if kind not in ("exact", "mc"):
        raise ValueError(f"kind must be 'exact' or 'mc', got {kind!r}")
    tol = require_nonnegative("tol", tol)
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if math.prod(value.shape) != 1:
            raise ValueError(f"value must be a single number, got shape {tuple(value.shape)}")
        value = value.item()
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"value must be a real number, got {type(value).__name__}") from None
    record = Check(name, value, tol, kind, _current_suite[-1] if _current_suite else None)
    CHECKS.append(record)
    if not quiet:
        print(record.line())
    if not record.passed:
        raise CheckFailed(record.line())
    return value


def maxabs(a: Array | float, b: Array | float) -> float:
    """Largest absolute elementwise difference of two arrays or tensors (shapes must match).

    NaN or an infinity in either gives NaN or inf, which no :func:`check` passes.

    Examples
    --------
    >>> import torch
    >>> from numeric import maxabs
    >>> maxabs(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
    0.5
    """
    a, b = _real_array("a", a), _real_array("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    return float((a.to(torch.float64) - b.to(torch.float64)).abs().max())


def _real_array(name: str, x) -> torch.Tensor:
    """A detached real tensor from a tensor, an array, a number or a nested list; NaN is kept (a check on it fails)."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        arr = np.asarray(x)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers, got {arr.dtype} values")
        t = torch.from_numpy(np.array(arr, dtype=np.float64))
    if t.is_complex() or not (t.is_floating_point() or t.dtype in (torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)):
        raise TypeError(f"{name} must hold real numbers, got {t.dtype}")
    return t


def suite(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register a function of no arguments that makes checks, under ``name``.

    Examples
    --------
    >>> from numeric.checks import SUITES, suite
    >>> @suite("demo")
    ... def demo():
    ...     pass
    >>> "demo" in SUITES
    True
    >>> del SUITES["demo"]
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")

    def register(fn: Callable[[], None]) -> Callable[[], None]:
        if not callable(fn):
            raise TypeError(f"a suite must be callable, got {type(fn).__name__}")
        SUITES[name] = fn
        return fn

    return register


def run_suites(names: Sequence[str] | None = None, *, quiet: bool = True) -> tuple[list[Check], dict[str, str]]:
    """Run registered suites; return their checks and the errors of suites that broke.

    A suite stops at its first failing check (recorded in the checks) or at
    any other exception (returned in the errors, by suite name); the other
    suites still run.  ``names`` selects suites (default: all, in
    registration order).

    Examples
    --------
    >>> from numeric import run_suites
    >>> checks, errors = run_suites(["score_function"])
    >>> all(c.passed for c in checks), errors
    (True, {})
    """
    chosen = list(SUITES) if names is None else list(names)
    unknown = [n for n in chosen if n not in SUITES]
    if unknown:
        raise ValueError(f"names must be registered suites {sorted(SUITES)}, got unknown {unknown}")
    start = len(CHECKS)
    errors: dict[str, str] = {}
    for name in chosen:
        _current_suite.append(name)
        try:
            with _float64_default():
                if quiet:
                    _silently(SUITES[name])
                else:
                    SUITES[name]()
        except CheckFailed:
            pass  # recorded in CHECKS; the other suites still run
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
        finally:
            _current_suite.pop()
    return CHECKS[start:], errors


@contextlib.contextmanager
def _float64_default():
    """Run a suite with float64 as torch's default dtype (checks are fp64), then restore the caller's."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _silently(fn: Callable[[], None]) -> None:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        fn()
