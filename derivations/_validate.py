"""Argument checks shared by the derivations: errors name the argument and say what was expected."""

from __future__ import annotations


def require_int(name: str, value, minimum: int | None = None) -> int:
    """``value`` as an int, else ``TypeError``; below ``minimum``, ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def require_name(name: str, value) -> str:
    """``value`` as a symbol name (a Python identifier such as ``"theta"``), else ``TypeError``/``ValueError``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value.isidentifier():
        raise ValueError(f"{name} must be an identifier such as 'theta', got {value!r}")
    return value
