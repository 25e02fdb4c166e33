r"""The aggregation factor :math:`\kappa` of a trainer's loss: measured on designed batches, named, or described.

A loss over ``[B, T]`` batches gives token :math:`t` of row :math:`i` the
gradient :math:`-\kappa_{it}\,w\,A`.  At :math:`r = 1`, :math:`A = 1`, where
:math:`w = 1` for a policy gradient, :math:`\kappa_{it} = -\partial\mathcal
L/\partial\ell_{it}` is read directly.  It is measured on designed masks that
vary, one at a time and together, the padding width :math:`T`, the number of
rows :math:`B`, the row's own length :math:`n_i` and the batch's token count
:math:`N = \sum_j n_j`, and then

* **named** when it is a known mode, up to a constant factor :math:`c` and an
  :math:`\epsilon_{\mathrm{div}}` added to the count it divides by (:data:`MODES`): ``token-mean``
  (:math:`1/N`), ``seq-mean-token-mean`` (:math:`1/(B n_i)`),
  ``seq-mean-token-sum`` (:math:`1/B`), ``seq-mean-token-sum-norm``
  (:math:`1/D`, a constant, or the width :math:`T`), ``token-sum``
  (:math:`\kappa = 1`), and ``padded-mean`` (:math:`1/(BT)`: ``(x * mask).mean()``,
  which moves with the padding);
* otherwise **described** by the power law it follows, a constant times
  powers of :math:`T`, :math:`B`, :math:`n_i` and :math:`N`, its exponents fitted by least
  squares on :math:`\log\kappa` and stated when the fit is exact to the
  tolerance; "undecided" only when :math:`\kappa` follows neither.

References
----------
verl ``agg_loss`` (volcengine/verl at b178a3cd56f58b2d502255daba591e92833930a7,
``verl/trainer/ppo/core_algos.py``); Z. Liu et al., "Understanding R1-Zero-like
training" (Dr. GRPO), arXiv:2503.20783 (2025).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .trainer_loss import TrainerLoss

__all__ = ["DESIGNS", "EMPTY_ROW", "MODES", "Fit", "PowerLaw", "fit", "kappa_rows", "mask_of", "old_log_probs", "power_law"]

F64 = torch.float64
DESIGNS = (("T=6, B=3", 6, (1, 3, 6)), ("T=6, B=2", 6, (3, 5)), ("T=9, B=3", 9, (1, 3, 6)),
           ("T=6, B=3, other lengths", 6, (2, 2, 6)), ("T=7, B=4", 7, (1, 2, 4, 7)), ("T=6, B=2, short", 6, (1, 2)))
r"""The designed masks ``(label, T, lengths)``: :math:`T`, :math:`B`, :math:`n_i` and :math:`N` each vary independently of the others."""
EMPTY_ROW = ("T=6, B=4, one row empty", 6, (1, 3, 6, 0))
MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "token-sum", "padded-mean")
"""The aggregation modes :math:`\\kappa` is matched with (the first four are verl's ``loss_agg_mode`` values)."""


def mask_of(T: int, lengths: tuple) -> torch.Tensor:
    """The 0/1 float64 mask ``[len(lengths), T]`` of right-padded rows."""
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(F64)


def old_log_probs(shape: tuple, seed: int = 0) -> torch.Tensor:
    """Old log-probabilities in ``[-3, -0.1]``, drawn with a fixed seed."""
    gen = torch.Generator().manual_seed(seed)
    return -0.1 - 2.9 * torch.rand(shape, generator=gen, dtype=F64)


def kappa_rows(loss: TrainerLoss, label: str, T: int, lengths: tuple) -> tuple[list | None, bool]:
    r"""``(design, row, n_i, B, T, N, kappa)`` for every valid token at r = 1, A = 1 (``None`` if non-finite), and whether a masked token got gradient.

    :math:`\kappa = -\partial\mathcal L/\partial\ell` divided by the token's own weight at :math:`r = 1`
    relative to the reference old probability (1 for a policy gradient), so that a weight
    that moves with :math:`\pi_{\text{old}}` at :math:`r = 1` (a missing detach) does not hide the aggregation.
    """
    mask = mask_of(T, lengths)
    old = old_log_probs(mask.shape)
    value, g = loss.grad(old, old, torch.ones_like(old), mask)
    if not (math.isfinite(value) and bool(torch.isfinite(g).all())):
        return None, False
    leak = bool((g[mask == 0] != 0).any())
    own = loss.alone(old, old, torch.ones_like(old))
    g = torch.where(own.abs() > 1e-6, g / torch.where(own.abs() > 1e-6, own, torch.ones_like(own)), g)
    B, N = len(lengths), int(sum(lengths))
    return [(label, i, n, B, T, N, float(-g[i, t])) for i, n in enumerate(lengths) for t in range(n)], leak


@dataclass(frozen=True)
class Fit:
    r"""A mode that fits the measured :math:`\kappa`: a constant times the mode's factor, an :math:`\epsilon_{\mathrm{div}}` added to the count it divides by."""

    mode: str
    scale: float
    epsilon: float
    prefactor: Callable
    denominator: Callable
    counts: str | None  # what the denominator counts, where an epsilon can sit

    def kappa(self, n: int, B: int, T: int, N: int) -> float:
        return self.scale * self.prefactor(n, B, T, N) / (self.denominator(n, B, T, N) + self.epsilon)


_CANDIDATES = (  # (mode, prefactor P, denominator D, what D counts): kappa = s P / (D + eps)
    ("seq-mean-token-sum-norm", lambda n, B, T, N: 1.0, lambda n, B, T, N: 1.0, None),
    ("seq-mean-token-sum-norm/T", lambda n, B, T, N: 1.0, lambda n, B, T, N: float(T), "T"),
    ("seq-mean-token-sum", lambda n, B, T, N: 1.0, lambda n, B, T, N: float(B), "B"),
    ("token-mean", lambda n, B, T, N: 1.0, lambda n, B, T, N: float(N), "sum n"),
    ("seq-mean-token-mean", lambda n, B, T, N: 1.0 / B, lambda n, B, T, N: float(n), "n"),
    ("padded-mean", lambda n, B, T, N: 1.0, lambda n, B, T, N: float(B * T), "B T"),
)


def fit(rows: list, tol: float, rounding: float = 1e-12) -> Fit | None:
    r"""The first mode whose model (a constant times its factor, an :math:`\epsilon_{\mathrm{div}}` added to its count) fits every measured row to the relative ``tol``.

    A constant :math:`\kappa = 1` is ``token-sum``, another constant is
    ``seq-mean-token-sum-norm`` with :math:`D = 1/\kappa`.  An
    :math:`\epsilon_{\mathrm{div}}` is kept only when it is larger than the loss's own
    rounding (the relative ``rounding``, its precision's tolerance) could make it.
    """
    for mode, P, D, counts in _CANDIDATES:
        y = np.array([P(n, B, T, N) / k for _, _, n, B, T, N, k in rows])
        d = np.array([D(n, B, T, N) for _, _, n, B, T, N, _ in rows])
        if np.ptp(d) == 0:
            slope, intercept = float(y.mean()) / d[0], 0.0
        else:
            slope, intercept = (float(v) for v in np.polyfit(d, y, 1))
        if not slope > 0:
            continue
        eps = intercept / slope
        if abs(eps) <= max(1e-12, 4 * rounding) * d.max():
            eps, slope = 0.0, float(np.mean(y / d))
        if abs(eps) >= 0.5 or np.abs(y - slope * (d + eps)).max() > tol * np.abs(y).max():
            continue
        scale = 1.0 / slope
        if mode == "seq-mean-token-sum-norm" and abs(scale - 1) <= tol:
            mode = "token-sum"
        return Fit(mode, scale, eps, P, D, counts)
    return None


@dataclass(frozen=True)
class PowerLaw:
    r""":math:`\kappa` as a constant times powers of :math:`T`, :math:`B`, :math:`n_i` and :math:`N`, fitted to the measured rows (exponents rounded to halves when they are within the tolerance)."""

    scale: float
    exponents: tuple  # ((name, exponent), ...) for T, B, n_i, N
    residual: float
    exact: bool

    def describe(self) -> str:
        """``kappa = 0.5 * T^-1 B^-1``, or why no power law fits."""
        if not self.exact:
            return f"kappa follows no power law in T, B, n_i and N (relative residual {self.residual:.2g}): it depends on more of the batch"
        terms = " ".join(f"{n}^{e:g}" for n, e in self.exponents if e != 0)
        scale = "" if abs(self.scale - 1) <= 1e-9 and terms else f"{self.scale:.6g}" + (" * " if terms else " (a constant)")
        return f"kappa = {scale}{terms}"

    def depends_on(self) -> tuple:
        """The batch quantities :math:`\\kappa` moves with."""
        return tuple(n for n, e in self.exponents if e != 0)


def power_law(rows: list, tol: float) -> PowerLaw:
    """Least squares on log kappa = log s + a log T + b log B + c log n_i + d log N over every measured row."""
    X = np.array([[1.0, math.log(T), math.log(B), math.log(n), math.log(N)] for _, _, n, B, T, N, _ in rows])
    y = np.log(np.array([k for *_, k in rows]))
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    rounded = np.concatenate([[coef[0]], np.round(coef[1:] * 2) / 2])
    rounded[0] = float(np.mean(y - X[:, 1:] @ rounded[1:]))
    residual = float(np.abs(np.expm1(X @ rounded - y)).max())
    names = ("T", "B", "n_i", "N")
    scale = float(np.exp(rounded[0]))
    return PowerLaw(1.0 if abs(scale - 1) <= max(tol, 1e-9) else scale, tuple((n, float(e) + 0.0) for n, e in zip(names, rounded[1:])),
                    residual, residual <= max(tol, 1e-9))
