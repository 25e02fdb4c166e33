"""Argument checks shared by the derivations: errors name the argument and say what was expected."""

from __future__ import annotations


def require_int(name: str, value, minimum: int | None = None) -> int:
    """``value`` as an int, else ``TypeError``; below ``minimum``, ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value
