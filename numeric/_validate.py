"""Argument checks shared by the public functions.

Every public function checks its input and raises a ``ValueError`` or
``TypeError`` that names the argument and says what was expected.  The batched
helpers accept numpy arrays and torch tensors and return the caller's kind:
:func:`to_tensor` remembers the kind, :func:`like` converts back.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch


def require_int(name: str, value, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def require_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 0:
            value = value.item()
        else:
            raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    return value


def require_nonnegative(name: str, value) -> float:
    value = require_real(name, value)
    if not value >= 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def require_unit_interval(name: str, value) -> float:
    value = require_real(name, value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def as_tensor(name: str, value) -> torch.Tensor:
    """A torch tensor (numpy arrays are converted); float64 unless already floating."""
    tensor, _ = to_tensor(name, value)
    return tensor


def to_tensor(name: str, value, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, str]:
    """Convert a numpy array or torch tensor to a tensor; return it with its original kind."""
    if isinstance(value, torch.Tensor):
        kind = "torch"
        tensor = value
    elif isinstance(value, np.ndarray):
        kind = "numpy"
        tensor = torch.from_numpy(value)
    else:
        raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(value).__name__}")
    if dtype is not None:
        if dtype == torch.bool and tensor.dtype != torch.bool:
            raise TypeError(f"{name} must be boolean, got dtype {tensor.dtype}")
        tensor = tensor.to(dtype)
    elif not tensor.is_floating_point():
        if tensor.dtype == torch.bool:
            raise TypeError(f"{name} must hold numbers, got a boolean array")
        tensor = tensor.to(torch.float64)
    return tensor, kind


def require_finite(name: str, tensor: torch.Tensor) -> torch.Tensor:
    if not bool(torch.isfinite(tensor).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return tensor


def require_same_shape(**tensors: torch.Tensor) -> None:
    items = list(tensors.items())
    name0, t0 = items[0]
    for name, t in items[1:]:
        if t.shape != t0.shape:
            raise ValueError(f"{name} must have the shape of {name0} {tuple(t0.shape)}, got {tuple(t.shape)}")


def like(kind: str, tensor: torch.Tensor):
    """Return ``tensor`` as the caller's kind ("numpy" or "torch")."""
    if kind == "numpy":
        return tensor.detach().cpu().numpy()
    return tensor
