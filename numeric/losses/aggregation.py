r"""Aggregation: the modes that reduce a ``[B, T]`` per-token loss to a scalar, and each mode's token weight."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import torch

from derivations.losses import AGGREGATIONS
from derivations.readings import Citation, require_trainers, snapshot

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

__all__ = ["AGGREGATIONS", "CONVENTIONS", "EMPTY_ROWS", "GROUPED", "TRAINER_MODES", "Reading", "ReadingWarning", "aggregate", "token_weights",
           "trainer_table"]

GROUPED = ("prompt-mean",)
"""The modes that also read which prompt each row answers (``groups=``): SkyRL's ``prompt_mean``."""


class Reading(NamedTuple):
    r"""What one trainer's aggregation name computes at one commit, as a package mode and its options, with where it was read.

    ``args`` are :func:`aggregate`'s keywords the reading fixes (``count_eps``, ``empty_rows``), and ``norm`` written in the
    trainer's words where the trainer supplies it (``"max_completion_length"``: the caller passes that number as ``norm``).
    ``per_row`` says whether seq-mean-token-sum-norm's :math:`\sum/D` is also averaged over the rows (``"count"``: all
    :math:`B`; ``"exclude"``: those with a token; ``None``: no mean).  ``call`` is the package call that computes it.
    """

    mode: str
    args: dict
    note: str
    cite: Citation
    per_row: str | None = None

    @property
    def call(self) -> str:
        """The package's mode and the options the reading fixes, in words (``norm``: the trainer's name for it)."""
        extra = [f"{k}={v!r}" if not (k == "norm" and isinstance(v, str)) else f"norm={v}" for k, v in self.args.items()]
        if self.per_row:
            extra.append(f"then the mean over {'the rows with a token' if self.per_row == 'exclude' else 'every row'}")
        return ", ".join([self.mode, *extra])


def _cite(trainer: str, commit: str, where: str) -> Citation:
    return Citation(trainer, snapshot(trainer, commit).commit, where)


_VERL_OLD = _cite("verl", "b178a3c", "verl/trainer/ppo/core_algos.py:1025-1081")
_VERL = _cite("verl", "1dda039", "verl/trainer/ppo/core_algos.py:1140-1206")
_TRL = _cite("TRL", "f2cd577", "trl/trainer/grpo_trainer.py:3124-3150")
_ORLHF = _cite("OpenRLHF", "3c3be62", "openrlhf/models/loss.py:11-39")
_SKY = _cite("SkyRL", "a956457", "skyrl/backends/skyrl_train/utils/ppo_utils.py:1152-1220")
_SWIFT = _cite("ms-swift", "3602360", "swift/rlhf_trainers/grpo_trainer.py:1096-1143")
_VERL_EXCLUDE = {"empty_rows": "exclude"}
_VERL_SEQ_MEAN = {"count_eps": 1e-8, "empty_rows": "exclude"}

TRAINER_MODES: dict[tuple[str, str, str], Reading] = {
    ("verl", "token-mean", "b178a3c"): Reading("token-mean", {}, "an empty batch: NaN in verl, 0 here", _VERL_OLD),
    ("verl", "seq-mean-token-mean", "b178a3c"): Reading("seq-mean-token-mean", _VERL_SEQ_MEAN, "n_i + 1e-8; rows with a token", _VERL_OLD),
    ("verl", "seq-mean-token-sum", "b178a3c"): Reading("seq-mean-token-sum", _VERL_EXCLUDE, "rows with a token", _VERL_OLD),
    ("verl", "seq-mean-token-sum-norm", "b178a3c"): Reading("seq-mean-token-sum-norm", {}, "D = T, or loss_scale_factor as norm; no mean over B (#3741)",
                                                         _VERL_OLD),
    ("verl", "token-mean", "1dda039"): Reading("token-mean", {}, "an empty batch: NaN in verl, 0 here", _VERL),
    ("verl", "token-sum", "1dda039"): Reading("token-sum", {}, "added by #7197 (2026-08-03)", _VERL),
    ("verl", "seq-mean-token-mean", "1dda039"): Reading("seq-mean-token-mean", _VERL_SEQ_MEAN, "n_i + 1e-8; rows with a token", _VERL),
    ("verl", "seq-mean-token-sum", "1dda039"): Reading("seq-mean-token-sum", _VERL_EXCLUDE, "rows with a token", _VERL),
    ("verl", "seq-mean-token-sum-norm", "1dda039"): Reading("seq-mean-token-sum-norm", {}, "D = T, or loss_scale_factor as norm; the mean over "
                                                         "the rows with a token since #5417 (2026-02-26)", _VERL, "exclude"),
    ("TRL", "grpo", "f2cd577"): Reading("seq-mean-token-mean", {}, "an empty row: 0, counted in B", _TRL),
    ("TRL", "bnpo", "f2cd577"): Reading("token-mean", {}, "", _TRL),
    ("TRL", "dr_grpo", "f2cd577"): Reading("seq-mean-token-sum-norm", {"norm": "max_completion_length"}, "every row counted in B", _TRL, "count"),
    ("TRL", "dapo", "f2cd577"): Reading("token-mean", {"norm": "num_items_in_batch"}, "N: tokens of the global batch", _TRL),
    ("OpenRLHF", "per-token (token_level_loss=True)", "3c3be62"): Reading("token-mean", {}, "", _ORLHF),
    ("OpenRLHF", "per-sample (token_level_loss=False)", "3c3be62"): Reading("seq-mean-token-mean", _VERL_SEQ_MEAN, "n_i + 1e-8; rows with a token",
                                                                              _ORLHF),
    ("SkyRL", "token_mean", "a956457"): Reading("token-mean", {}, "by advantages pre-scaled with the mini-batch's tokens", _SKY),
    ("SkyRL", "sequence_mean", "a956457"): Reading("seq-mean-token-mean", {}, "max(n_i, 1); every row counted in B", _SKY),
    ("SkyRL", "seq_mean_token_sum_norm", "a956457"): Reading("seq-mean-token-sum-norm", {"norm": "max_seq_len"}, "every row counted in B", _SKY,
                                                             "count"),
    ("SkyRL", "prompt_mean", "a956457"): Reading("prompt-mean", {}, "a token mean within each prompt, then the mean over prompts (groups=)",
                                                 _SKY),
    ("ms-swift", "grpo", "3602360"): Reading("seq-mean-token-mean", {}, "max(n_i, 1); every row counted in B", _SWIFT),
    ("ms-swift", "dr_grpo", "3602360"): Reading("seq-mean-token-sum-norm", {"norm": "max_completion_length"}, "every row counted in B", _SWIFT,
                                                "count"),
    ("ms-swift", "dapo", "3602360"): Reading("token-mean", {"norm": "num_items_in_batch"}, "N: tokens of the generation batch", _SWIFT),
}
r"""Each trainer's aggregation name at each commit read: ``TRAINER_MODES[(trainer, name, commit7)]``, a :class:`Reading`.

:func:`aggregate`, :func:`token_weights` and :func:`numeric.policy_loss` compute a row with ``convention="trainer@commit7"`` and
the trainer's name as the mode.  verl's ``seq-mean-token-sum-norm`` is two rows: :math:`\sum/D` at ``b178a3c`` (the reading the
package's own mode of that name keeps), the mean over the rows with a token of :math:`\sum_t/D` at ``1dda039``.
"""

CONVENTIONS = tuple(sorted({f"{t}@{c}" for t, _, c in TRAINER_MODES}))
"""The conventions :func:`aggregate` accepts: ``"trainer@commit7"``."""


class ReadingWarning(UserWarning):
    """A package name whose trainer's meaning has moved since the package adopted it: the number is the package's, the warning
    names the trainer's readings."""


_MOVED = {"seq-mean-token-sum-norm": ("verl@b178a3c", "verl@1dda039")}
"""The package's names whose trainer's meaning moved: the reading the package's name keeps, and the newer one."""


def resolve(mode: str, convention: str | None = None, *, count_eps: float = 0.0, empty_rows: str = "count", name: str = "mode") -> tuple:
    r"""``(package mode, count_eps, empty_rows, per_row)`` of ``mode`` read in ``convention`` (a trainer's name at a commit), or as the package's.

    Without a convention, ``"seq-mean-token-sum-norm"`` keeps the package's number, :math:`\sum/D` (verl's at ``b178a3c``), and
    warns (:class:`ReadingWarning`): verl's meaning moved at ``1dda039`` to the mean over rows of :math:`\sum_t/D`; name the
    reading with ``convention`` to compute either without the warning.  A convention fixes ``count_eps`` and ``empty_rows``.

    Examples
    --------
    >>> from numeric.losses.aggregation import resolve
    >>> resolve("seq-mean-token-sum-norm", "verl@1dda039")
    ('seq-mean-token-sum-norm', 0.0, 'count', 'exclude')
    >>> resolve("dr_grpo", "TRL@f2cd577")
    ('seq-mean-token-sum-norm', 0.0, 'count', 'count')
    """
    if convention is None:
        check_mode(mode, name)
        if mode in _MOVED:
            kept, newer = _MOVED[mode]
            warnings.warn(f"{name}={mode!r} keeps the package's meaning, verl's at {kept[5:]} (sum / D, no mean over the rows); verl's "
                          f"meaning moved at {newer[5:]} to the mean over the rows with a token of sum_t / D: name the reading with "
                          f"convention={kept!r} or convention={newer!r}", ReadingWarning, stacklevel=3)
        return mode, count_eps, empty_rows, None
    if not isinstance(convention, str) or "@" not in convention:
        raise ValueError(f"convention must be 'trainer@commit' (one of {CONVENTIONS}), got {convention!r}")
    trainer, commit = convention.split("@", 1)
    try:
        full = snapshot(trainer, commit).commit
    except (TypeError, ValueError) as err:
        raise ValueError(f"convention must be one of {CONVENTIONS}: {err}") from None
    rows = {name_: r for (t, name_, c), r in TRAINER_MODES.items() if t == trainer and full.startswith(c)}
    if mode not in rows:
        raise ValueError(f"{name}={mode!r} is not a name {trainer} gives an aggregation at {full[:7]} (its names there: {tuple(rows)})")
    reading = rows[mode]
    fixed = {k: v for k, v in reading.args.items() if k != "norm"}
    for key, value, default in (("count_eps", count_eps, 0.0), ("empty_rows", empty_rows, "count")):
        if value != default and fixed.get(key, default) != value:
            raise ValueError(f"{key} is fixed by convention={convention!r} ({mode} there: {fixed.get(key, default)!r}), got {value!r}")
    return reading.mode, fixed.get("count_eps", 0.0), fixed.get("empty_rows", "count"), reading.per_row


def kappa_latex(reading: Reading) -> str:
    r"""The token weight :math:`\kappa_{it}` a :class:`Reading` gives, as LaTeX (:math:`B'`: the rows with a token; :math:`D`: ``norm``).

    Examples
    --------
    >>> from numeric.losses.aggregation import TRAINER_MODES, kappa_latex
    >>> kappa_latex(TRAINER_MODES[("verl", "seq-mean-token-sum-norm", "b178a3c")]), kappa_latex(TRAINER_MODES[("verl", "seq-mean-token-sum-norm", "1dda039")])
    ('1/D', "1/(B'\\,D)")
    """
    rows = "B'" if reading.args.get("empty_rows") == "exclude" or reading.per_row == "exclude" else "B"
    n = r"(n_i + 10^{-8})" if reading.args.get("count_eps") else "n_i"
    norm = reading.args.get("norm")
    return {
        "token-mean": r"1/\sum_j n_j" if norm is None else "1/N",
        "token-sum": "1",
        "seq-mean-token-mean": rf"1/({rows}\,{n})",
        "seq-mean-token-sum": f"1/{rows}",
        "seq-mean-token-sum-norm": "1/D" if reading.per_row is None else rf"1/({rows}\,D)",
        "prompt-mean": r"1/(P\,N_p)",
    }[reading.mode]


def trainer_table(trainers: tuple | None = None) -> str:
    r""":data:`TRAINER_MODES` as a LaTeX array: trainer @ commit, their name, the package call, the token weight, the note and where read.

    ``trainers`` limits the rows to those trainers.  :math:`D` is ``norm`` (verl: ``loss_scale_factor``, by default :math:`T`;
    TRL and ms-swift: ``max_completion_length``; SkyRL: ``max_seq_len``), :math:`N` the trainer's token count, :math:`B'` the rows
    with a token, :math:`P` the prompts and :math:`N_p` a prompt's tokens.

    Examples
    --------
    >>> from numeric.losses import trainer_table
    >>> print(trainer_table().splitlines()[2][:44])
    \text{verl @ b178a3c} & \text{token-mean} &
    """
    trainers = require_trainers(trainers)
    esc = lambda x: x.replace("_", r"\_")  # noqa: E731
    lines = [r"\begin{array}{lllll}",
             r"\text{trainer @ commit} & \text{name} & \text{package mode} & \kappa_{it} & \text{note, and where read} \\ \hline"]
    for (trainer, name, commit), reading in TRAINER_MODES.items():
        if trainers is not None and trainer not in trainers:
            continue
        call = reading.call
        note = f"{reading.note} ({reading.cite.where})" if reading.note else reading.cite.where
        lines.append(rf"\text{{{trainer} @ {commit}}} & \text{{{esc(name)}}} & \text{{{esc(call)}}} & {kappa_latex(reading)} & "
                     rf"\text{{{esc(note)}}} \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)


def check_mode(mode: str, name: str = "mode") -> str:
    if mode not in AGGREGATIONS + GROUPED:
        raise ValueError(f"{name} must be one of {AGGREGATIONS + GROUPED}, got {mode!r}")
    return mode


def token_weights(mask: ArrayT, mode: str = "token-mean", *, norm: float | None = None, count_eps: float = 0.0, empty_rows: str = "count",
                  convention: str | None = None, groups: Array | None = None) -> ArrayT:
    r"""The weight :math:`\kappa_{it} = \partial\,\mathrm{aggregate}/\partial x_{it}` each mode gives token :math:`t` of row :math:`i`.

    With :math:`n_i = \sum_t m_{it}` tokens in row :math:`i` of :math:`B`
    (:mod:`derivations.losses`, :func:`derivations.losses.aggregation_weights`):

    ``token-mean``
        :math:`1/\sum_j n_j` (or :math:`1/N` with ``norm=N``);
    ``token-sum``
        :math:`1`;
    ``seq-mean-token-mean``
        :math:`1/(B\,\max(n_i, 1))`;
    ``seq-mean-token-sum``
        :math:`1/B`;
    ``seq-mean-token-sum-norm``
        :math:`1/D`, :math:`D` = ``norm`` (default :math:`T`): verl's at ``b178a3c``, no mean over the rows
        (with ``convention="verl@1dda039"``, verl's since: :math:`1/(B'D)`);
    ``prompt-mean``
        :math:`1/(P\,\max(N_p, 1))`, :math:`P` the prompts of ``groups`` and :math:`N_p` the tokens of row :math:`i`'s prompt,

    on masked tokens, 0 elsewhere.  Leading dimensions before ``[B, T]`` are
    independent batches (not for ``prompt-mean``).  ``count_eps`` and ``empty_rows`` change the two
    seq-mean modes as in :func:`aggregate`: :math:`1/(B'\,(n_i + \epsilon))`
    and :math:`1/B'`, :math:`B'` the rows counted.  ``convention`` reads ``mode`` as a trainer's name (:func:`aggregate`).

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
    mode, count_eps, empty_rows, per_row = resolve(mode, convention, count_eps=count_eps, empty_rows=empty_rows)
    raw, kind = raw_tensor("mask", mask)
    m = mask_of_rank("mask", mask, 2, exact=False)
    m = m.to(raw.dtype if raw.is_floating_point() else torch.float64)
    g = prompt_groups(mode, groups, m)
    return like(kind, _kappa(m, mode, norm, count_eps, empty_rows, per_row, g))


def prompt_groups(mode: str, groups, m: torch.Tensor) -> torch.Tensor | None:
    """``groups`` checked: the prompt of each row, ``[B]`` integers, required by prompt-mean and refused elsewhere."""
    if mode not in GROUPED:
        if groups is not None:
            raise ValueError(f"groups is used by {GROUPED} only, not {mode!r}")
        return None
    if groups is None:
        raise ValueError(f"groups is required for {mode!r}: the prompt each row answers, [B] integers")
    g, _ = raw_tensor("groups", groups)
    if m.ndim != 2 or g.shape != m.shape[:1] or g.is_floating_point() or g.dtype == torch.bool:
        raise ValueError(f"groups must be [B] = {tuple(m.shape[:1])} integers (the prompt of each row of a [B, T] mask), got "
                         f"{tuple(g.shape)} {g.dtype}")
    return g.to(m.device)


def _norm(mode: str, norm) -> float | None:
    """``norm`` checked: a positive number, and only for the modes that take one."""
    if norm is None:
        return None
    if mode not in ("token-mean", "seq-mean-token-sum-norm"):
        raise ValueError(f"norm is used by token-mean and seq-mean-token-sum-norm only, not {mode!r}")
    return require_positive("norm", norm)


EMPTY_ROWS = ("count", "exclude")
"""How the seq-mean modes count an all-masked row in :math:`B`: ``"count"`` it (TRL ``grpo``), or ``"exclude"`` it (verl ``agg_loss``)."""


def _row_options(mode: str, count_eps, empty_rows, per_row: str | None = None) -> tuple[float, bool]:
    """``(count_eps, exclude)`` checked: each only for the modes that use it (a reading's mean over the rows, ``per_row``, uses
    ``empty_rows`` too)."""
    if empty_rows not in EMPTY_ROWS:
        raise ValueError(f"empty_rows must be one of {EMPTY_ROWS}, got {empty_rows!r}")
    if empty_rows == "exclude" and mode not in ("seq-mean-token-mean", "seq-mean-token-sum") and not per_row:
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


def _kappa(m: torch.Tensor, mode: str, norm, count_eps: float = 0.0, empty_rows: str = "count", per_row: str | None = None,
           groups: torch.Tensor | None = None) -> torch.Tensor:
    """Token weights of ``mode`` for a float 0/1 mask ``[..., B, T]`` (``per_row``: seq-mean-token-sum-norm's mean over the rows)."""
    B, T = m.shape[-2], m.shape[-1]
    n = m.sum(-1, keepdim=True)
    norm = _norm(mode, norm)
    count_eps, exclude = _row_options(mode, count_eps, "exclude" if per_row == "exclude" else empty_rows, per_row)
    if mode == "token-mean":
        denom = n.sum(-2, keepdim=True).clamp(min=1) if norm is None else torch.full_like(n[..., :1, :], norm)
        return m / denom
    if mode == "token-sum":
        return m.clone()
    if mode == "seq-mean-token-mean":
        return m / (_rows(n, B, exclude) * _row_count(n, count_eps, m.dtype))
    if mode == "seq-mean-token-sum":
        return m / _rows(n, B, exclude)
    if mode == "prompt-mean":
        assert groups is not None
        return m / _prompt_denominator(n, groups)
    return m / ((T if norm is None else norm) * (_rows(n, B, exclude) if per_row else 1))


def _prompt_denominator(n: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    r""":math:`P\,\max(N_p, 1)` for each row ``[B, 1]``: the prompts, and the tokens of the row's prompt."""
    _, index = torch.unique(groups, return_inverse=True)
    tokens = torch.zeros(int(index.max()) + 1, dtype=n.dtype, device=n.device).index_add(0, index, n[:, 0])
    return (len(tokens) * tokens.clamp(min=1))[index][:, None]


def reduce_tokens(x: torch.Tensor, keep: torch.Tensor, mode: str, norm: float | None, n: torch.Tensor | None = None, zero_outside: bool = False,
                  *, count_eps: float = 0.0, empty_rows: str = "count", per_row: str | None = None, groups: torch.Tensor | None = None) -> torch.Tensor:
    """``sum(kappa * x)`` over the last two dimensions, without building kappa (the same numbers as :func:`_kappa`).

    ``x`` is ``[..., B, T]``, or ``[..., B, 1]`` for a value constant along
    each row; ``keep`` is the ``[..., B, T]`` mask (boolean, or float 0/1 when
    ``x`` is finite) and ``n`` its row counts, if known.  Slots outside
    ``keep`` are never read, so they may hold anything (their gradient is 0),
    unless ``zero_outside`` says they already hold 0.
    """
    norm = _norm(mode, norm)
    count_eps, exclude = _row_options(mode, count_eps, "exclude" if per_row == "exclude" else empty_rows, per_row)
    B, T = keep.shape[-2], keep.shape[-1]
    row_constant = x.shape[-1] == 1 and T != 1
    if exclude or count_eps or mode == "prompt-mean":
        n = keep.sum(-1, keepdim=True) if n is None else n
    if row_constant:
        n = keep.sum(-1, keepdim=True) if n is None else n
        live = torch.where(n > 0, x, 0)  # an empty row's value is never read
        if mode == "seq-mean-token-mean":
            rows = live * n / _row_count(n, count_eps, x.dtype) if count_eps else live
        else:
            rows = live * n
    else:
        kept = x if zero_outside else zeroed(x, keep)
        rows = kept.sum(-1, keepdim=True)
        if mode == "seq-mean-token-mean":
            n = keep.sum(-1, keepdim=True) if n is None else n
            rows = rows / _row_count(n, count_eps, x.dtype)
    if mode == "prompt-mean":
        assert groups is not None and n is not None
        return (rows / _prompt_denominator(n.to(x.dtype), groups)).sum((-2, -1))
    total = rows.sum((-2, -1))
    if mode == "token-mean":
        if norm is not None:
            return total / norm
        return total / (keep.sum((-2, -1)) if n is None else n.sum((-2, -1))).clamp(min=1)
    if mode == "token-sum":
        return total
    if mode in ("seq-mean-token-mean", "seq-mean-token-sum") or per_row:
        counts = keep.sum(-1, keepdim=True) if n is None else n
        total = total / (_rows(counts, B, True)[..., 0, 0] if exclude else B)
        if mode != "seq-mean-token-sum-norm":
            return total
    return total / (T if norm is None else norm)


def aggregate(per_token: ArrayT, mask: Array, mode: str = "token-mean", *, norm: float | None = None, weight: Array | None = None,
              count_eps: float = 0.0, empty_rows: str = "count", convention: str | None = None, groups: Array | None = None) -> ArrayT:
    r"""Reduce a ``[B, T]`` per-token loss to a scalar the way trainers do: :math:`\sum_{i,t}\kappa_{it}\,w_{it}\,x_{it}`.

    ================================  =================================================================
    ``token-mean``                    :math:`\sum_{i,t} m x / \sum_{i,t} m` (``norm`` replaces the denominator)
    ``seq-mean-token-mean``           :math:`\frac1B\sum_i \frac{\sum_t m x}{\max(n_i, 1)}`
    ``seq-mean-token-sum``            :math:`\frac1B\sum_i \sum_t m x`
    ``seq-mean-token-sum-norm``       :math:`\frac{1}{D}\sum_{i,t} m x`, :math:`D` = ``norm`` or :math:`T` (verl's at ``b178a3c``, no mean over rows)
    ``token-sum``                     :math:`\sum_{i,t} m x` (verl's, since ``1dda039``)
    ``prompt-mean``                   :math:`\frac1P\sum_p \frac{\sum_{i \in p}\sum_t m x}{\max(N_p, 1)}`, the prompts of ``groups`` (SkyRL's ``prompt_mean``)
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

    ``convention``
        ``"trainer@commit7"``: ``mode`` is that trainer's name for an aggregation
        at that commit (:data:`TRAINER_MODES`), computed as read there, its
        options fixed: ``aggregate(x, m, "seq-mean-token-sum-norm",
        convention="verl@1dda039")`` is verl's newer reading, the mean over the
        rows with a token of :math:`\sum_t m x / D`; ``aggregate(x, m, "dr_grpo",
        convention="TRL@f2cd577", norm=L)`` is TRL's.  The package's own
        ``"seq-mean-token-sum-norm"`` keeps the number it always computed
        (verl's at ``b178a3c``) and warns (:class:`ReadingWarning`) that verl's
        meaning has moved.
    ``groups``
        prompt-mean only: ``[B]`` integers, the prompt each row answers.

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
    >>> round(float(aggregate(x, m, "dr_grpo", convention="TRL@f2cd577", norm=8)), 6)   # TRL's dr_grpo, B = 2, L = 8
    1.25
    >>> m3 = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]])            # a third row, empty
    >>> x3 = torch.cat([x, torch.zeros(1, 4)])
    >>> [round(float(aggregate(x3, m3, "seq-mean-token-mean", empty_rows=e)), 6) for e in ("count", "exclude")]
    [4.166667, 6.25]
    >>> round(float(aggregate(x, m, "token-mean", weight=torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]]))), 6)
    1.6
    """
    mode, count_eps, empty_rows, per_row = resolve(mode, convention, count_eps=count_eps, empty_rows=empty_rows)
    arrays: dict[str, object] = {"per_token": per_token} if weight is None else {"per_token": per_token, "weight": numeric_weight(weight)}
    t, m, kind = masked_inputs(require_mask(mask), "mask", **arrays)
    x = t["per_token"]
    if x.ndim < 2:
        raise ValueError(f"per_token must have shape [..., B, T], got {tuple(x.shape)}")
    if weight is not None:
        x = x * t["weight"].detach()
    g = prompt_groups(mode, groups, m)
    return like(kind, reduce_tokens(x, m, mode, norm, count_eps=count_eps, empty_rows=empty_rows, per_row=per_row, groups=g).to(result_dtype(per_token)))


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
