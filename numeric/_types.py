"""Type names shared by the numeric layer's annotations."""

from __future__ import annotations

from typing import TypeAlias, TypeVar

import numpy as np
import torch

Array: TypeAlias = np.ndarray | torch.Tensor
"""A numpy array or a torch tensor: what a batched helper accepts."""

ArrayT = TypeVar("ArrayT", np.ndarray, torch.Tensor)
"""The caller's kind: a batched helper returns the kind (numpy or torch) of its first array argument."""
