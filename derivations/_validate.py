"""Argument checks shared by the derivations: errors name the argument and say what was expected."""

from __future__ import annotations

import math
import numbers
from typing import TypeVar

import sympy as sp

_T = TypeVar("_T")


def require_int(name: str, value: object, minimum: int | None = None) -> int:
    """``value`` as an int, else ``TypeError``; below ``minimum``, ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def require_name(name: str, value: object) -> str:
    """``value`` as a symbol name (a Python identifier such as ``"theta"``), else ``TypeError``/``ValueError``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value.isidentifier():
        raise ValueError(f"{name} must be an identifier such as 'theta', got {value!r}")
    return value


def require_expr(name: str, value: _T) -> _T:
    """A SymPy object (expression, relation, matrix) or a real number; a string is refused (SymPy would parse it)."""
    if isinstance(value, (sp.Basic, sp.MatrixBase)):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a SymPy expression or a real number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def require_symbol(name: str, value: object) -> sp.Symbol:
    """A SymPy symbol (the variable of a proof)."""
    if not isinstance(value, sp.Symbol):
        raise TypeError(f"{name} must be a SymPy Symbol, got {type(value).__name__}")
    return value


def require_optional(name: str, value: _T, kind: type, what: str) -> _T:
    """``value`` if it is ``None`` or an instance of ``kind``; ``what`` says what was expected."""
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be {what} or None, got {type(value).__name__}")
    return value


def require_optional_callable(name: str, value: _T) -> _T:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be callable or None, got {type(value).__name__}")
    return value
