r"""A trainer's policy loss, called as the trainer calls it: the one wrapper every loss check goes through.

:class:`TrainerLoss` holds the user's function, the names it gives the batch's
inputs (its *roles*), the keyword arguments fixed for every call, and the dtype
the inputs are handed over in.  It returns the scalar loss, the gradient in the
new log-probabilities, and, for the per-token weight, each token's gradient
with the token alone in a row of its own (so the aggregation is divided out).
Every check of :mod:`numeric.variants` on a loss — the full-batch reading of
:func:`~numeric.variants.check_policy_loss`, the execution engines, the
trainers' questions — reads the function through it, so one function is called
one way.

Roles: ``old_log_prob``, ``log_prob``, ``advantages``, ``response_mask`` (always
passed), and the optional ``ref_log_prob`` and ``rollout_log_prob`` (passed
only by the checks that probe a KL term or a rollout correction).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

__all__ = ["OPTIONAL_ROLES", "ROLES", "TrainerLoss"]

F64 = torch.float64
ROLES = ("old_log_prob", "log_prob", "advantages", "response_mask")
"""The four inputs every call passes, by the names verl's ``compute_policy_loss`` gives them."""
OPTIONAL_ROLES = ("ref_log_prob", "rollout_log_prob")
"""Inputs passed only by the checks that ask for them (a KL term's reference, a rollout correction's sampler)."""


class TrainerLoss:
    """The trainer's function, called by keyword on ``[B, T]`` tensors in ``dtype``; its scalar loss and gradients in fp64.

    Parameters
    ----------
    fn : callable
        The loss; it returns a scalar tensor, or a tuple whose first element is one.
    names : mapping, optional
        The function's own names for the roles of :data:`ROLES` and :data:`OPTIONAL_ROLES`.
    fixed : dict, optional
        Keyword arguments passed to every call (``loss_agg_mode="token-mean"``, ``config=...``).
    dtype : torch.dtype
        The dtype the batch is handed over in (the trainer's); gradients come back in float64.
    """

    def __init__(self, fn: Callable, names: Mapping | None = None, fixed: dict | None = None, *, dtype: torch.dtype = F64):
        if not callable(fn):
            raise TypeError(f"fn must be a callable policy loss, got {type(fn).__name__}")
        names = {} if names is None else names
        if not isinstance(names, Mapping) or not all(isinstance(v, str) and v for v in names.values()):
            raise TypeError(f"names must map {', '.join(ROLES)} to the function's own argument names (str), got {names!r}")
        unknown = set(names) - set(ROLES) - set(OPTIONAL_ROLES)
        if unknown:
            raise ValueError(f"names may map only {', '.join(ROLES + OPTIONAL_ROLES)}, got {', '.join(sorted(map(str, unknown)))}")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch dtype (torch.float64, torch.float32, torch.bfloat16), got {dtype!r}")
        self.fn, self.fixed, self.dtype = fn, {} if fixed is None else dict(fixed), dtype
        self.names = {role: names.get(role, role) for role in ROLES + OPTIONAL_ROLES}
        clash = {self.names[role] for role in ROLES} & set(self.fixed)
        if clash:
            raise ValueError(f"fixed arguments {', '.join(sorted(clash))} are the batch's own inputs; pass them through names=")
        self._kappa: dict[int, float] = {}

    def __call__(self, old: torch.Tensor, new: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, **extra: object) -> torch.Tensor:
        """The scalar loss; ``extra`` holds optional roles (by role) and further keyword arguments for this call only."""
        batch = dict(zip((self.names[role] for role in ROLES), (old, new, adv, mask)))
        for key, value in extra.items():
            batch[self.names.get(key, key)] = value
        batch = {k: v.to(self.dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in batch.items()}
        try:
            out = self.fn(**batch, **{k: v for k, v in self.fixed.items() if k not in batch})
        except Exception as err:
            call = ", ".join([*batch, *self.fixed])
            raise TypeError(f"fn could not be called as fn({call}) on [B, T] tensors of dtype={self.dtype}: {type(err).__name__}: {err}") from err
        if isinstance(out, (tuple, list)) and out:
            out = out[0]
        if not isinstance(out, torch.Tensor) or out.numel() != 1:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise TypeError(f"fn must return a scalar loss tensor (or a tuple whose first element is one), got {shape}")
        return out.reshape(())

    def grad(self, old: torch.Tensor, new: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, **extra: object) -> tuple[float, torch.Tensor]:
        """The loss and its gradient in the new log-probabilities (float64, zeros where the loss has none)."""
        leaf = new.detach().to(self.dtype).clone().requires_grad_(True)
        value = self(old, leaf, adv, mask, **extra)
        g = None
        if value.requires_grad:
            (g,) = torch.autograd.grad(value, leaf, allow_unused=True)
        g = torch.zeros_like(leaf) if g is None else g.detach()
        return float(value.detach()), g.to(F64)

    def kappa_alone(self, n: int) -> float:
        r""":math:`|\partial\mathcal L/\partial\ell|` at :math:`r = 1`, :math:`A = 1`, with each of ``n`` tokens in a row of its own."""
        if n not in self._kappa:
            old = torch.full((n, 1), -0.5, dtype=F64)
            _, g = self.grad(old, old, torch.ones_like(old), torch.ones_like(old))
            k = float(g.abs().mean())
            if not k > 0 or not math.isfinite(k):
                raise ValueError("fn has no gradient at r = 1, A = 1 (or no finite one): it cannot be a policy loss")
            self._kappa[n] = k
        return self._kappa[n]

    def alone(self, log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
        r"""Each token in a row of its own: :math:`-\partial\mathcal L/\partial\ell / \kappa`, i.e. :math:`w A`."""
        shape = log_prob.shape
        new, old, adv = (x.reshape(-1, 1).to(F64) for x in (log_prob.detach(), old_log_prob.detach(), advantage.detach()))
        _, g = self.grad(old, new, adv, torch.ones_like(new))
        return (-g / self.kappa_alone(new.shape[0])).reshape(shape)

    def per_token(self) -> Callable:
        """A per-token loss ``(log_prob, old_log_prob, advantage) -> [...]`` with the trainer's token gradient, aggregation divided out."""

        def loss(log_prob, old_log_prob, advantage):
            return -self.alone(log_prob, old_log_prob, torch.as_tensor(advantage, dtype=F64)) * log_prob

        return loss
