r"""The precision a trainer's loss computes in, measured, and the tolerance every check of it then uses.

Trainers compute the ratio in float32 even when they are handed float64 (a
safe exponential, a cast before ``exp``), or run the whole loss in bfloat16.
A check that compares the loss's gradient with a model to 1e-12 then reads
rounding as structure: an invented :math:`\epsilon_{\mathrm{div}}` in a denominator, a
weight that "moves with the old probability" by :math:`10^{-8}`.  So the
precision is measured first, from the loss itself:

.. math::

    u_{\text{eff}} = \max\Bigl(\frac{\max_z |\mathcal L(z) - \tilde{\mathcal L}(z)|}{\max(|\mathcal L|, \lVert g\rVert_1)},\;
                              \max_z\frac{\lVert g(z) - \tilde g(z)\rVert_\infty}{\lVert g\rVert_\infty}\Bigr),

where :math:`\mathcal L(z)` and :math:`g(z)` are the loss and its gradient at the
log-probabilities moved by :math:`2^{-20} z` along a fixed direction
(:math:`z = 0..8`: the nine points span about 30
float32 steps of a log-probability), and :math:`\tilde{\mathcal L}`, :math:`\tilde g` their
least-squares parabolas.  A loss computed in float64 follows its parabola to
about :math:`10^{-16}`; one computed in float32 moves in steps of its last
bit, about :math:`10^{-7}` of the value.
The precision is the floating type whose unit roundoff explains
:math:`u_{\text{eff}}`, and the tolerance of every comparison is

.. math::

    \mathrm{tol} = \max\bigl(10^{-12},\ \min(32\,\epsilon_{\text{type}},\ 0.05)\bigr)

relative to the size of the values compared (:math:`\epsilon_{\text{type}}` the type's
machine epsilon): 1e-12 for float64, :math:`3.8\times 10^{-6}` for float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .trainer_loss import TrainerLoss

__all__ = ["PRECISIONS", "Precision", "loss_precision", "tolerance_of"]

F64 = torch.float64
PRECISIONS = (("float64", torch.float64), ("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16))
"""The floating types a loss may compute in, finest first."""
_EDGES = (1e-12, 1e-5, 2e-3)  # u_eff below each edge: float64, float32, float16; above the last: bfloat16


@dataclass(frozen=True)
class Precision:
    """The precision a loss was found to compute in.

    Attributes
    ----------
    name : str
        ``"float64"``, ``"float32"``, ``"float16"`` or ``"bfloat16"``.
    measured : float
        :math:`u_{\\text{eff}}`, the relative rounding seen in the loss and its gradient, to two digits (the
        last bits of a float32 sum may depend on how many threads computed it).
    tolerance : float
        The relative tolerance every comparison of the check uses.
    inputs : str
        The dtype the batch was handed over in.
    """

    name: str
    measured: float
    tolerance: float
    inputs: str

    def describe(self) -> str:
        """One line for the report."""
        return (f"computes in {self.name} (inputs {self.inputs}; rounding seen {self.measured:.1e} of the values); "
                f"every comparison to a relative {self.tolerance:.1e}")


def tolerance_of(name: str) -> float:
    """The relative tolerance for a loss computing in ``name`` (see the module's formula)."""
    dtype = dict(PRECISIONS)[name]
    return max(1e-12, min(32 * torch.finfo(dtype).eps, 0.05))


def _residual(y: torch.Tensor) -> torch.Tensor:
    """Largest distance of each column of ``y`` ``[t, ...]`` from its least-squares parabola in ``t``."""
    flat = y.reshape(y.shape[0], -1)
    t = torch.linspace(-1, 1, y.shape[0], dtype=F64)
    basis = torch.stack([torch.ones_like(t), t, t**2], 1)
    coef = torch.linalg.lstsq(basis, flat).solution
    return (flat - basis @ coef).abs().amax(0)


def loss_precision(loss: TrainerLoss) -> Precision:
    r"""Measure :math:`u_{\text{eff}}` of a trainer's loss (the module's formula) and name its precision.

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.precision import loss_precision
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> def loss_fn(old_log_prob, log_prob, advantages, response_mask):
    ...     ratio = torch.exp((log_prob - old_log_prob).float())        # the ratio in float32, as many trainers do
    ...     return -(ratio * advantages * response_mask).sum() / response_mask.sum()
    >>> loss_precision(TrainerLoss(loss_fn)).name
    'float32'
    >>> loss_precision(TrainerLoss(loss_fn, dtype=torch.bfloat16)).name
    'bfloat16'
    """
    gen = torch.Generator().manual_seed(11)
    mask = (torch.arange(6)[None, :] < torch.tensor([2, 4, 6])[:, None]).to(F64)
    old = -0.1 - 2.9 * torch.rand(mask.shape, generator=gen, dtype=F64)
    new = old + 0.3 * torch.randn(mask.shape, generator=gen, dtype=F64)
    adv = torch.randn(mask.shape, generator=gen, dtype=F64)
    direction = torch.randn(mask.shape, generator=gen, dtype=F64)
    values, grads = [], []
    for t in range(9):
        value, g = loss.grad(old, new + t * 2.0**-20 * direction, adv, mask)
        values.append(value)
        grads.append(g)
    L, g = torch.tensor(values, dtype=F64), torch.stack(grads)
    finite = bool(torch.isfinite(L).all() and torch.isfinite(g).all())
    if not finite:
        raise ValueError("fn returns a non-finite loss or gradient on a plain batch: its precision cannot be measured")
    scale_v = max(float(L.abs().max()), float(g[0].abs().sum()), 1e-300)
    scale_g = max(float(g.abs().max()), 1e-300)
    inputs = str(loss.dtype).removeprefix("torch.")
    measured = max(float(_residual(L)) / scale_v, float(_residual(g).max()) / scale_g, torch.finfo(loss.dtype).eps / 2)
    name = next((n for (n, _), edge in zip(PRECISIONS, _EDGES) if measured < edge), "bfloat16")
    if torch.finfo(loss.dtype).eps > torch.finfo(dict(PRECISIONS)[name]).eps:  # inputs rounded coarser than the loss computes
        name = inputs
    return Precision(name, float(f"{measured:.2g}"), tolerance_of(name), inputs)  # a size of rounding: two digits are all it has
