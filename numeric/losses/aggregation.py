r"""Aggregation: the modes that reduce a ``[B, T]`` per-token loss to a scalar, and each mode's token weight."""

from __future__ import annotations

import numpy as np
import torch

from derivations.losses import AGGREGATIONS

from .._types import Array, ArrayT
from .._validate import (
    like,
    masked_inputs,
    raw_tensor,
    require_mask,
    require_nonnegative,
    require_positive,
    result_dtype,
)
from .tokens import mask_of_rank

__all__ = ["AGGREGATIONS", "EMPTY_ROWS", "TRAINER_MODES", "aggregate", "token_weights", "trainer_table"]


TRAINER_MODES = {
    ("verl", "token-mean"): ("token-mean", {}, "an empty batch: NaN in verl, 0 here"),
    ("verl", "seq-mean-token-mean"): ("seq-mean-token-mean", {}, "verl divides by the rows with a token and adds 1e-8 to n_i: exact with count_eps=1e-8, empty_rows='exclude'"),
    ("verl", "seq-mean-token-sum"): ("seq-mean-token-sum", {}, "verl divides by the rows with a token: exact with empty_rows='exclude'"),
    ("verl", "seq-mean-token-sum-norm"): ("seq-mean-token-sum-norm", {}, "D = T, or loss_scale_factor as norm; no mean over B (#3741)"),
    ("TRL", "grpo"): ("seq-mean-token-mean", {}, "an empty row: 0, counted in B"),
    ("TRL", "bnpo"): ("token-mean", {}, ""),
    ("TRL", "dr_grpo"): ("seq-mean-token-sum-norm", {"norm": "B * max_completion_length"}, ""),
    ("TRL", "dapo"): ("token-mean", {"norm": "num_items_in_batch"}, "N: tokens of the global batch"),
    ("OpenRLHF", "per-token (token_level_loss=True)"): ("token-mean", {}, ""),
    ("OpenRLHF", "per-sample (token_level_loss=False)"): ("seq-mean-token-mean", {}, ""),
}
r"""Each trainer's aggregation name as ``(mode, arguments, note)``: ``aggregate(x, mask, mode, **arguments)``.

Read at verl ``b178a3cd56f5`` (``agg_loss``), TRL ``f2cd57710ae3`` (``_compute_loss``) and
OpenRLHF ``3c3be6234e0c`` (``PolicyLoss``), the commits of :data:`derivations.methods.PEER_COMMITS`.
"""


def trainer_table() -> str:
    r""":data:`TRAINER_MODES` as a LaTeX array: trainer, name, mode, arguments, the token weight, notes.

    Examples
    --------
    >>> from numeric.losses import trainer_table
    >>> print(trainer_table().splitlines()[2])
    \text{verl} & \text{token-mean} & \text{token-mean} & \text{} & 1/\sum_j n_j & \text{an empty batch: NaN in verl, 0 here} \\
    """
    kappa = {
        "token-mean": r"1/\sum_j n_j",
        "seq-mean-token-mean": r"1/(B\,n_i)",
        "seq-mean-token-sum": r"1/B",
        "seq-mean-token-sum-norm": r"1/T",
    }
    lines = [r"\begin{array}{llllll}", r"\text{trainer} & \text{name} & \text{mode} & \text{arguments} & \kappa_{it} & \text{note} \\ \hline"]
    for (trainer, name), (mode, args, note) in TRAINER_MODES.items():
        k = kappa[mode]
        if args.get("norm"):
            k = (r"1/N\ (N" if mode == "token-mean" else r"1/D\ (D") + r" = \mathtt{" + args["norm"].replace("_", r"\_") + "})"
        arg_text = ", ".join(f"{key}={value}" for key, value in args.items()).replace("_", r"\_")
        lines.append(rf"\text{{{trainer}}} & \text{{{name.replace('_', chr(92) + '_')}}} & \text{{{mode}}} & \text{{{arg_text}}} & {k} & \text{{{note.replace('_', chr(92) + '_')}}} \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)


def check_mode(mode: str, name: str = "mode") -> str:
    if mode not in AGGREGATIONS:
        raise ValueError(f"{name} must be one of {AGGREGATIONS}, got {mode!r}")
    return mode


def token_weights(mask: ArrayT, mode: str = "token-mean", *, norm: float | None = None, count_eps: float = 0.0, empty_rows: str = "count") -> ArrayT:
    r"""The weight :math:`\kappa_{it} = \partial\,\mathrm{aggregate}/\partial x_{it}` each mode gives token :math:`t` of row :math:`i`.

    With :math:`n_i = \sum_t m_{it}` tokens in row :math:`i` of :math:`B`
    (:mod:`derivations.losses`, :func:`derivations.losses.aggregation_weights`):

    ``token-mean``
        :math:`1/\sum_j n_j` (or :math:`1/N` with ``norm=N``);
    ``seq-mean-token-mean``
        :math:`1/(B\,\max(n_i, 1))`;
    ``seq-mean-token-sum``
        :math:`1/B`;
    ``seq-mean-token-sum-norm``
        :math:`1/D`, :math:`D` = ``norm`` (default :math:`T`): verl's, no mean over the rows,

    on masked tokens, 0 elsewhere.  Leading dimensions before ``[B, T]`` are
    independent batches.  ``count_eps`` and ``empty_rows`` change the two
    seq-mean modes as in :func:`aggregate`: :math:`1/(B'\,(n_i + \epsilon))`
    and :math:`1/B'`, :math:`B'` the rows counted.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import token_weights
    >>> m = np.array([[1, 1, 1, 1], [1, 0, 0, 0]])
    >>> print(token_weights(m, "token-mean"))
    [[0.2 0.2 0.2 0.2]
     [0.2 0.  0.  0. ]]
    >>> print(token_weights(m, "seq-mean-token-mean"))
    [[0.125 0.125 0.125 0.125]
     [0.5   0.    0.    0.   ]]
    """
    mode = check_mode(mode)
    raw, kind = raw_tensor("mask", mask)
    m = mask_of_rank("mask", mask, 2, exact=False)
    return like(kind, _kappa(m.to(raw.dtype if raw.is_floating_point() else torch.float64), mode, norm, count_eps, empty_rows))


def _norm(mode: str, norm) -> float | None:
    """``norm`` checked: a positive number, and only for the modes that take one."""
    if norm is None:
        return None
    if mode not in ("token-mean", "seq-mean-token-sum-norm"):
        raise ValueError(f"norm is used by token-mean and seq-mean-token-sum-norm only, not {mode!r}")
    return require_positive("norm", norm)


EMPTY_ROWS = ("count", "exclude")
"""How the seq-mean modes count an all-masked row in :math:`B`: ``"count"`` it (TRL ``grpo``), or ``"exclude"`` it (verl ``agg_loss``)."""


def _row_options(mode: str, count_eps, empty_rows) -> tuple[float, bool]:
    """``(count_eps, exclude)`` checked: each only for the modes that use it."""
    if empty_rows not in EMPTY_ROWS:
        raise ValueError(f"empty_rows must be one of {EMPTY_ROWS}, got {empty_rows!r}")
    if empty_rows == "exclude" and mode not in ("seq-mean-token-mean", "seq-mean-token-sum"):
        raise ValueError(f"empty_rows is used by seq-mean-token-mean and seq-mean-token-sum only, not {mode!r}")
    count_eps = require_nonnegative("count_eps", count_eps)
    if count_eps and mode != "seq-mean-token-mean":
        raise ValueError(f"count_eps is used by seq-mean-token-mean only, not {mode!r}")
    return count_eps, empty_rows == "exclude"


def _row_count(n: torch.Tensor, count_eps: float, dtype: torch.dtype) -> torch.Tensor:
    r"""The divisor of a row's token sum in seq-mean-token-mean: :math:`\max(n_i, 1)`, or :math:`n_i + \epsilon` (in ``dtype``: an integer count plus 1e-8 would round in float32)."""
    return n.to(dtype) + count_eps if count_eps else n.clamp(min=1)


def _rows(n: torch.Tensor, B: int, exclude: bool):
    """:math:`B`, or the rows that hold a token (at least 1), per batch ``[..., 1, 1]``."""
    return (n > 0).sum(-2, keepdim=True).clamp(min=1).to(n.dtype) if exclude else B


def _kappa(m: torch.Tensor, mode: str, norm, count_eps: float = 0.0, empty_rows: str = "count") -> torch.Tensor:
    """Token weights of ``mode`` for a float 0/1 mask ``[..., B, T]``."""
    B, T = m.shape[-2], m.shape[-1]
    n = m.sum(-1, keepdim=True)
    norm = _norm(mode, norm)
    count_eps, exclude = _row_options(mode, count_eps, empty_rows)
    if mode == "token-mean":
        denom = n.sum(-2, keepdim=True).clamp(min=1) if norm is None else torch.full_like(n[..., :1, :], norm)
        return m / denom
    if mode == "seq-mean-token-mean":
        return m / (_rows(n, B, exclude) * _row_count(n, count_eps, m.dtype))
    if mode == "seq-mean-token-sum":
        return m / _rows(n, B, exclude)
    return m / (T if norm is None else norm)


def reduce_tokens(x: torch.Tensor, keep: torch.Tensor, mode: str, norm: float | None, n: torch.Tensor | None = None, zero_outside: bool = False,
                  *, count_eps: float = 0.0, empty_rows: str = "count") -> torch.Tensor:
    """``sum(kappa * x)`` over the last two dimensions, without building kappa (the same numbers as :func:`_kappa`).

    ``x`` is ``[..., B, T]``, or ``[..., B, 1]`` for a value constant along
    each row; ``keep`` is the ``[..., B, T]`` mask (boolean, or float 0/1 when
    ``x`` is finite) and ``n`` its row counts, if known.  Slots outside
    ``keep`` are never read, so they may hold anything (their gradient is 0),
    unless ``zero_outside`` says they already hold 0.
    """
    norm = _norm(mode, norm)
    count_eps, exclude = _row_options(mode, count_eps, empty_rows)
    B, T = keep.shape[-2], keep.shape[-1]
    row_constant = x.shape[-1] == 1 and T != 1
    if exclude or count_eps:
        n = keep.sum(-1, keepdim=True) if n is None else n
    if row_constant:
        n = keep.sum(-1, keepdim=True) if n is None else n
        live = torch.where(n > 0, x, 0)  # an empty row's value is never read
        if mode == "seq-mean-token-mean":
            total = (live * n / _row_count(n, count_eps, x.dtype) if count_eps else live).sum((-2, -1))
        else:
            total = (live * n).sum((-2, -1))
    else:
        kept = x if zero_outside else zeroed(x, keep)
        if mode == "seq-mean-token-mean":
            n = keep.sum(-1, keepdim=True) if n is None else n
            total = (kept.sum(-1, keepdim=True) / _row_count(n, count_eps, x.dtype)).sum((-2, -1))
        else:
            total = kept.sum((-2, -1))
    if mode == "token-mean":
        if norm is not None:
            return total / norm
        return total / (keep.sum((-2, -1)) if n is None else n.sum((-2, -1))).clamp(min=1)
    if mode in ("seq-mean-token-mean", "seq-mean-token-sum"):
        counts = keep.sum(-1, keepdim=True) if n is None else n
        return total / (_rows(counts, B, True)[..., 0, 0] if exclude else B)
    return total / (T if norm is None else norm)


def aggregate(per_token: ArrayT, mask: Array, mode: str = "token-mean", *, norm: float | None = None, weight: Array | None = None,
              count_eps: float = 0.0, empty_rows: str = "count") -> ArrayT:
    r"""Reduce a ``[B, T]`` per-token loss to a scalar the way trainers do: :math:`\sum_{i,t}\kappa_{it}\,w_{it}\,x_{it}`.

    ================================  =================================================================
    ``token-mean``                    :math:`\sum_{i,t} m x / \sum_{i,t} m` (``norm`` replaces the denominator)
    ``seq-mean-token-mean``           :math:`\frac1B\sum_i \frac{\sum_t m x}{\max(n_i, 1)}`
    ``seq-mean-token-sum``            :math:`\frac1B\sum_i \sum_t m x`
    ``seq-mean-token-sum-norm``       :math:`\frac{1}{D}\sum_{i,t} m x`, :math:`D` = ``norm`` or :math:`T` (verl's, no mean over rows)
    ================================  =================================================================

    :data:`TRAINER_MODES` maps verl's ``loss_agg_mode``, TRL's ``loss_type``
    and OpenRLHF's ``token_level_loss`` to a mode and its ``norm``.  An
    all-masked row contributes 0 (and still counts in :math:`B`); a batch
    with no unmasked token gives 0.  :func:`token_weights` returns
    :math:`\kappa`; the length bias each mode implies is derived in
    :func:`derivations.losses.aggregation_weights`.

    Options (defaults: the package's conventions above):

    ``weight``
        a per-token ``[B, T]`` weight :math:`w_{it}` multiplied into each
        token's loss (detached; masked slots may hold anything; a boolean
        weight counts as 0/1); the denominators do not change.  A sampler weight, or an entropy mask
        (:func:`~numeric.high_entropy_mask`), enters a loss this way.
    ``count_eps``
        seq-mean-token-mean divides a row's sum by :math:`n_i + \epsilon`
        instead of :math:`\max(n_i, 1)`: verl's ``1e-8``.
    ``empty_rows="exclude"``
        the two seq-mean modes divide by the number :math:`B'` of rows that
        hold a token instead of :math:`B` (verl's ``agg_loss`` with
        ``global_batch_size`` unset: "exclude fully masked sequences"); a batch
        with no token still gives 0 (verl: NaN).

    So verl's ``seq-mean-token-mean`` is
    ``aggregate(x, m, "seq-mean-token-mean", count_eps=1e-8, empty_rows="exclude")``
    and its ``seq-mean-token-sum`` is ``aggregate(x, m, "seq-mean-token-sum", empty_rows="exclude")``.

    Examples
    --------
    >>> import torch
    >>> from numeric import aggregate
    >>> x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 0.0, 0.0, 0.0]])
    >>> m = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    >>> [round(float(aggregate(x, m, mode)), 6) for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")]
    [4.0, 6.25, 10.0]
    >>> round(float(aggregate(x, m, "seq-mean-token-sum-norm", norm=2 * 8)), 6)   # TRL's dr_grpo, B = 2, L = 8
    1.25
    >>> m3 = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]])            # a third row, empty
    >>> x3 = torch.cat([x, torch.zeros(1, 4)])
    >>> [round(float(aggregate(x3, m3, "seq-mean-token-mean", empty_rows=e)), 6) for e in ("count", "exclude")]
    [4.166667, 6.25]
    >>> round(float(aggregate(x, m, "token-mean", weight=torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]]))), 6)
    1.6
    """
    mode = check_mode(mode)
    arrays: dict[str, object] = {"per_token": per_token} if weight is None else {"per_token": per_token, "weight": numeric_weight(weight)}
    t, m, kind = masked_inputs(require_mask(mask), "mask", **arrays)
    x = t["per_token"]
    if x.ndim < 2:
        raise ValueError(f"per_token must have shape [..., B, T], got {tuple(x.shape)}")
    if weight is not None:
        x = x * t["weight"].detach()
    return like(kind, reduce_tokens(x, m, mode, norm, count_eps=count_eps, empty_rows=empty_rows).to(result_dtype(per_token)))


def numeric_weight(weight):
    """A boolean per-token weight (a mask such as :func:`high_entropy_mask`'s) as 0/1 numbers; anything else as given."""
    if isinstance(weight, np.ndarray) and weight.dtype == np.bool_:
        return weight.astype(np.float64)
    if isinstance(weight, torch.Tensor) and weight.dtype == torch.bool:
        return weight.to(torch.float64)
    return weight


def zeroed(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``x`` with the slots outside ``keep`` set to 0, and no gradient there.

    A product with a float 0/1 ``keep`` (right when ``x`` is finite);
    ``torch.where`` with a boolean one (padding may hold NaN or inf).
    """
    return x * keep if keep.is_floating_point() else torch.where(keep, x, 0)
