"""Argument checks shared by the public functions.

Every public function checks its input and raises a ``ValueError`` or
``TypeError`` that names the argument and says what was expected.  The batched
helpers accept numpy arrays and torch tensors and return the caller's kind:
:func:`to_tensor` remembers the kind, :func:`like` converts back.
"""

from __future__ import annotations

import math
import numbers
from typing import overload

import numpy as np
import torch

from ._types import Array


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


def _dtype_name(value) -> str:
    """The element type in the caller's own words: ``float64`` for numpy, ``float32`` for torch."""
    return str(value.dtype).removeprefix("torch.")


def raw_tensor(name: str, value) -> tuple[torch.Tensor, str]:
    """A tensor view of a numpy array or torch tensor, with its kind; complex and object input refused."""
    if isinstance(value, torch.Tensor):
        kind, tensor = "torch", value
    elif isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers, got {_dtype_name(value)} values")
        if any(stride < 0 for stride in value.strides):  # e.g. a[::-1]; torch.from_numpy refuses them
            value = value.copy()
        kind, tensor = "numpy", torch.from_numpy(value)
    else:
        raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(value).__name__}")
    if tensor.is_complex():
        raise TypeError(f"{name} must hold real numbers, got {_dtype_name(value)} values")
    if tensor.device.type == "meta":
        require_same_device(**{name: tensor})
    return tensor, kind


def to_tensor(name: str, value, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, str]:
    """Convert a numpy array or torch tensor to a tensor; return it with its original kind.

    Integers become float64; floating tensors keep their dtype and device.
    ``dtype=torch.bool`` demands boolean input (flags are not guessed from numbers).
    """
    tensor, kind = raw_tensor(name, value)
    if dtype is not None:
        if dtype == torch.bool and tensor.dtype != torch.bool:
            raise TypeError(f"{name} must be boolean, got {_dtype_name(value)} values")
        tensor = tensor.to(dtype)
    elif not tensor.is_floating_point():
        if tensor.dtype == torch.bool:
            raise TypeError(f"{name} must hold numbers, got a boolean array")
        tensor = tensor.to(torch.float64)
    return tensor, kind


def result_dtype(value) -> torch.dtype:
    """The dtype a result is returned in: the input's, float64 for integers."""
    return to_tensor("value", value)[0].dtype


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype to compute in: the caller's, but at least float32 (bf16 and fp16 accumulate in fp32)."""
    return torch.promote_types(dtype, torch.float32)


def as_mask(name: str, value, like_name: str, like: torch.Tensor) -> torch.Tensor:
    """A boolean mask, on ``like``'s device, from a boolean or 0/1 numeric array of ``like``'s shape."""
    m, _ = raw_tensor(name, value)
    if m.shape != like.shape:
        raise ValueError(f"{name} must have the shape of {like_name} {tuple(like.shape)}, got {tuple(m.shape)}")
    m = m.to(like.device)
    if m.dtype != torch.bool:
        b = m != 0
        if not torch.equal(b.to(m.dtype), m):  # 0/1 exactly: every non-zero entry equals 1 (NaN compares unequal)
            raise ValueError(f"{name} must hold only 0 and 1 (or be boolean)")
        m = b
    return m


@overload
def masked_inputs(mask: None, mask_name: str = ..., **arrays: object) -> tuple[dict[str, torch.Tensor], None, str]: ...
@overload
def masked_inputs(mask: Array, mask_name: str = ..., **arrays: object) -> tuple[dict[str, torch.Tensor], torch.Tensor, str]: ...
def masked_inputs(mask: Array | None, mask_name: str = "mask", **arrays: object) -> tuple[dict[str, torch.Tensor], torch.Tensor | None, str]:
    """Aligned token tensors in the first one's device and compute dtype, masked slots set to 0.

    Returns ``(tensors, mask, kind)``: the mask is boolean (``None`` means all
    ones), the kind is the first array's.  Unmasked slots must be finite;
    masked slots may hold anything (padding sentinels, ``-inf``) and are
    replaced by 0 with ``torch.where``, so neither the value nor the gradient
    of a loss ever sees them.
    """
    tensors, kind, first, torch_inputs = {}, None, None, {}
    for name, value in arrays.items():
        t, k = to_tensor(name, value)
        if k == "torch":
            torch_inputs[name] = t
        if first is None:
            kind, first, first_name = k, t, name
        tensors[name] = t
    if first is None or kind is None:
        raise TypeError("masked_inputs needs at least one array")
    if isinstance(mask, torch.Tensor):
        torch_inputs[mask_name] = mask
    device = require_same_device(**torch_inputs) if torch_inputs else first.device
    tensors = {name: t.to(device=device, dtype=compute_dtype(first.dtype)) for name, t in tensors.items()}
    first = tensors[first_name]
    require_same_shape(**tensors)
    m = None if mask is None else as_mask(mask_name, mask, first_name, first)
    if m is not None:
        zero = torch.zeros((), dtype=first.dtype, device=first.device)
        tensors = {name: torch.where(m, t, zero.to(t.dtype)) for name, t in tensors.items()}
    # one sync: a NaN or inf among the kept values makes its tensor's sum, and the total, non-finite;
    # only then is each tensor examined, to name the culprit
    if not bool(torch.isfinite(sum((t.detach().sum() for t in tensors.values()), first.new_zeros(())))):
        require_finite_where(m, mask_name, **tensors)
    return tensors, m, kind


def require_finite_where(keep: torch.Tensor | None, mask_name: str = "mask", **tensors: torch.Tensor | None) -> None:
    """Raise, naming the argument, if a tensor holds NaN or inf where the boolean ``keep`` holds.

    ``keep=None`` means everywhere; a ``[..., 1]`` tensor (one value per row)
    counts in the rows that keep a slot; ``None`` tensors are skipped.
    """
    for name, t in tensors.items():
        if t is None:
            continue
        if keep is not None:
            t = torch.where(keep if t.shape == keep.shape else keep.any(-1, keepdim=True), t.detach(), 0)
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} must be finite (no NaN or inf)" + ("" if keep is None else f" where {mask_name} is 1"))


def require_finite(name: str, tensor: torch.Tensor) -> torch.Tensor:
    # a finite sum has no NaN or inf term (both propagate, and inf - inf is NaN): one reduction decides,
    # and only a sum that overflowed from finite terms is examined entry by entry
    if not (bool(torch.isfinite(tensor.detach().sum())) or bool(torch.isfinite(tensor).all())):
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


# ---------------------------------------------------------------- options: one validator per kind


def require_bool(name: str, value) -> bool:
    """A Python or numpy bool (``np.bool_`` counts); anything else, ``None`` and ``"yes"`` included, is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def require_positive(name: str, value, finite: bool = True) -> float:
    """A real number > 0 (and finite unless ``finite=False``)."""
    value = require_real(name, value)
    if not value > 0 or (finite and math.isinf(value)):
        raise ValueError(f"{name} must be {'a finite number ' if finite else ''}> 0, got {value}")
    return value


def require_pair(name: str, value, check) -> tuple:
    """A pair ``(x, y)``, each element checked by ``check(name[i], x)``."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a pair of numbers, got {value!r}")
    return tuple(check(f"{name}[{i}]", x) for i, x in enumerate(value))


def require_finite_nonnegative(name: str, value) -> float:
    value = require_nonnegative(name, value)
    if math.isinf(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def require_eps_low(name: str, value, allow_none: bool = False) -> float | None:
    r""":math:`\varepsilon_l \in [0, 1]` (the clip's lower edge :math:`1 - \varepsilon_l \ge 0`); ``None`` where a method allows no lower clip."""
    if value is None and allow_none:
        return None
    value = require_nonnegative(name, value)
    if value > 1:
        raise ValueError(f"{name} must be <= 1 so that 1 - {name} >= 0, got {value}")
    return value


def require_dual_clip(name: str, value) -> float | None:
    """PPO's dual-clip constant :math:`C_d > 1` (verl ``clip_ratio_c``, OpenRLHF ``dual_clip``), or ``None``."""
    if value is None:
        return None
    value = require_real(name, value)
    if not value > 1:
        raise ValueError(f"{name} must be > 1, got {value}")
    return value


def require_choice(name: str, value, choices: tuple) -> str:
    """One of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def require_dro_beta(name: str, value) -> float:
    r"""DRO's :math:`\beta > 0`: required, as verl refuses a null ``dro_beta``."""
    if value is None:
        raise ValueError(f"{name} is required for 'dro' (a number > 0: verl's policy_loss.dro_beta has no default)")
    return require_positive(name, value)


def require_bounds(name: str, value) -> tuple:
    r"""A band ``(low, high)`` on the ratio: :math:`0 \le` low :math:`\le` high, both finite."""
    low, high = require_pair(name, value, require_finite_nonnegative)
    if low > high:
        raise ValueError(f"{name} must have low <= high, got {value!r}")
    return low, high


_OPTION_CHECKS = {
    "eps_low": lambda name, v, method: require_eps_low(name, v, allow_none=method in ("cispo", "cispo_seq")),
    "eps_high": lambda name, v, method: require_nonnegative(name, v),
    "dual_clip": lambda name, v, method: require_dual_clip(name, v),
    "sapo_tau": lambda name, v, method: require_pair(name, v, require_positive),
    "gmpo_clip": lambda name, v, method: require_pair(name, v, require_finite_nonnegative),
    "vespo_k": lambda name, v, method: require_pair(name, v, require_positive),
    "vespo_lambda": lambda name, v, method: require_pair(name, v, require_positive),
    "kl_cov_coef": lambda name, v, method: require_finite_nonnegative(name, v),
    "tv_delta": lambda name, v, method: require_pair(name, v, require_finite_nonnegative),
    "dppo_type": lambda name, v, method: require_choice(name, v, ("binary_tv", "binary_kl")),
    "kl_tau": lambda name, v, method: require_finite_nonnegative(name, v),
    "is_cap": lambda name, v, method: require_positive(name, v),
    "band_delta": lambda name, v, method: require_finite_nonnegative(name, v),
    "dro_beta": lambda name, v, method: require_dro_beta(name, v),
    "is_bounds": lambda name, v, method: require_bounds(name, v),
    "opsm_delta": lambda name, v, method: require_finite_nonnegative(name, v),
}


def method_options(method: str, options: dict) -> dict:
    """Every parameter of a registered policy-loss ``method``, the given ones checked and the rest at their defaults.

    A parameter the method does not take is refused by name
    (:data:`derivations.methods.METHODS` lists each method's parameters).
    """
    from derivations.methods import method as registered

    entry = registered(method)
    for name in options:
        if name not in entry.parameters:
            taken = ", ".join(entry.parameters) or "none"
            raise ValueError(f"{name} is not a parameter of {method!r} (it takes: {taken})")
    merged = {**entry.parameters, **options}
    return {name: _OPTION_CHECKS[name](name, value, method) for name, value in merged.items()}


def require_group_rewards(name: str, value, minimum: int = 1) -> tuple[torch.Tensor, str]:
    """Rewards with the group last, ``[..., G]``, finite, ``G >= minimum``, in the compute dtype; with their kind."""
    r, kind = to_tensor(name, value)
    if r.ndim < 1:
        raise ValueError(f"{name} must have a group dimension (the last one), got a scalar")
    if r.shape[-1] < minimum:
        raise ValueError(f"{name} must hold G >= {minimum} answers per group (last dimension), got G = {r.shape[-1]}")
    return require_finite(name, r).to(compute_dtype(r.dtype)), kind


def require_same_device(**tensors: object) -> torch.device:
    """The one device of the given arrays; a named error if one is on the meta device or two are on different devices.

    numpy arrays count as the CPU; ``None`` and anything without a ``device`` (numbers, lists) are skipped.
    """
    devices: dict[str, torch.device] = {}
    for name, t in tensors.items():
        device = torch.device("cpu") if isinstance(t, np.ndarray) else getattr(t, "device", None)
        if not isinstance(device, torch.device):
            continue
        if device.type == "meta":
            raise ValueError(f"{name} is on the meta device: it holds no values to compute with")
        devices[name] = device
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"arguments must live on one device, got {listed}")
    return next(iter(devices.values()), torch.device("cpu"))


def require_mask(mask: Array | None, name: str = "mask") -> Array:
    """``mask`` itself; a named error for ``None`` where a function needs to know which tokens count."""
    if mask is None:
        raise ValueError(f"{name} is required: a 0/1 or boolean response mask (None is not 'all kept' here)")
    return mask


def require_ratio(name: str, t: torch.Tensor) -> torch.Tensor:
    """Ratios of probabilities: >= 0, never NaN; 0 and ``inf`` (an under- or overflowed exp) are allowed."""
    if bool(torch.isnan(t).any()):
        raise ValueError(f"{name} must not be NaN")
    if bool((t < 0).any()):
        raise ValueError(f"{name} must be >= 0 (a ratio of probabilities), got min {float(t.min())}")
    return t


# ----------------------------------------------------------------------------------------------
# Validators of numeric.off_policy, numeric.tinylm and the topics built on the toy LM
# (appended by the off-policy helper; nothing above this line is theirs).
# ----------------------------------------------------------------------------------------------


def require_finite_real(name: str, value, minimum: float | None = None) -> float:
    """A finite real number (not NaN, not infinite), at least ``minimum`` when given."""
    value = require_real(name, value)
    if minimum is not None and not value >= minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def require_cap(name: str, value) -> float:
    """A truncation level :math:`C > 0` for a ratio (``inf`` allowed: no truncation)."""
    value = require_real(name, value)
    if not value > 0:
        raise ValueError(f"{name} must be > 0 (a truncation level C for the ratio), got {value}")
    return value


def require_band(low, high, low_name: str = "low", high_name: str = "high") -> tuple[float, float]:
    """A kept band ``0 <= low < high`` of a ratio."""
    low, high = require_nonnegative(low_name, low), require_real(high_name, high)
    if not low < high:
        raise ValueError(
            f"{low_name} must be < {high_name} (the kept band [{low_name}, {high_name}] of the ratio), "
            f"got {low_name}={low}, {high_name}={high}"
        )
    return low, high
