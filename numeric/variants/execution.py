r"""A trainer's loss as it runs: micro-batches, gradient accumulation, data-parallel ranks.

A trainer never differentiates its loss on the whole batch at once.  The global
batch of :math:`B` rows is split over :math:`W` data-parallel ranks (contiguous
rows), each rank's share into :math:`U` micro-batches; each micro-batch's loss
:math:`\mathcal L_{p,q}` is back-propagated on its own and the gradients add up
over the :math:`U` accumulation steps; then DDP or FSDP averages the ranks'
gradients.  A token :math:`(i,t)` of micro-batch :math:`q` of rank :math:`p` gets

.. math::

    \kappa^{W,U}_{it} = -\frac{1}{W}\,\frac{\partial \mathcal L_{p,q}}{\partial \log\pi_{it}}
    \quad\text{at } r = 1,\ A = 1,

where the per-token weight is 1 (as in :func:`~numeric.variants.check_policy_loss`),
so :math:`\kappa` is the aggregation's factor alone.  The full batch's is
:math:`\kappa^{1,1}`.  A loss is **invariant** when :math:`\kappa^{W,U} =
\kappa^{1,1}` on every token of every batch, **scaled** when
:math:`\kappa^{W,U} = c\,\kappa^{1,1}` with one constant :math:`c` (named when it
is one of ``dp_size``, ``GA``, their products, quotients and squares), and
**depends on the split** otherwise.  A token-mean over the micro-batch's own
tokens, :math:`\mathcal L_{p,q} = \sum_{(i,t) \in (p,q)} \ell_{it}/Z_{p,q}`, gives
:math:`\kappa^{W,U}_{it} = 1/(W Z_{p,q})` against :math:`1/Z` (:math:`Z` the batch's valid tokens): it depends on how
many tokens the cut puts beside the token.

:func:`check_loss_execution` measures :math:`\kappa^{W,U}` by autograd on
designed batches — rows of equal lengths, of unequal lengths, and one whose last
rank (or, at :math:`W = 1`, last micro-batch) holds only all-masked rows — and,
on the same masks, the whole gradient at ratios near 1 and random advantages
(a loss that couples a share's tokens through their values, not their number,
shows there).  What the trainer passes with each micro-batch is its
*convention*, read from the trainers' code (:mod:`~numeric.variants.trainer_conventions`:
verl's, TRL's, OpenRLHF's, prime-rl's, SkyRL's, or one of one's own).

The engines are :mod:`~numeric.variants.worlds`':
``"gloo"`` (real processes under ``torch.distributed``), ``"simulate"`` (threads
in this process), or a held :class:`~numeric.variants.GlooWorld`; both
give the same report.

Scope: the batch is cut by rows, into equal micro-batches, and every rank holds the
same number; a packed row (several sequences with segment ids) or a sequence
sharded over context-parallel ranks would be a further field of
:class:`~numeric.variants.worlds.Job` and a further way to cut, not yet measured.

Tolerances: a cut's gradient matches :math:`c` times the full batch's when no
slot differs by more than ``EXECUTION_RTOL`` times the largest full-batch
gradient of that design and probe; the factor is invariant when
:math:`|c - 1| \le` ``EXECUTION_RTOL``.

References
----------
verl issue 7321 (token-mean falls back to the micro-batch's count), verl PR 5798
(seq-mean ``dp_size``\ :sup:`2` too small), TRL issue 2995 and PR 3231 (a local
token mean is not invariant to the split), prime-rl PR 2562 (the global count, then
FSDP's mean undone), SkyRL PR 1296 (the reduction moved into the advantages).
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from derivations.variants import ReportTable, report_html

from .trainer_conventions import EXECUTION_CONVENTIONS, Convention, Share
from .worlds import GlooWorld, Job, LossSpec, simulate

__all__ = ["EXECUTION_RTOL", "EXECUTION_VERDICTS", "ExecutionCase", "ExecutionReport", "Measurement", "check_loss_execution"]

F64 = torch.float64
EXECUTION_RTOL = 1e-9
"""Relative tolerance of a cut's gradient against :math:`c` times the full batch's (relative to the largest full-batch gradient)."""
EXECUTION_VERDICTS = ("invariant", "scaled", "depends on the split")
"""Verdicts on one cut :math:`(W, U)`, from the best to the worst."""


_FACTORS = (("dp_size", lambda W, M: W), ("1/dp_size", lambda W, M: 1 / W), ("GA", lambda W, M: M), ("1/GA", lambda W, M: 1 / M),
            ("dp_size*GA", lambda W, M: W * M), ("1/(dp_size*GA)", lambda W, M: 1 / (W * M)), ("dp_size/GA", lambda W, M: W / M),
            ("GA/dp_size", lambda W, M: M / W), ("dp_size^2", lambda W, M: W * W), ("1/dp_size^2", lambda W, M: 1 / (W * W)),
            ("GA^2", lambda W, M: M * M), ("1/GA^2", lambda W, M: 1 / (M * M)))


# ------------------------------------------------------------------ the designs


def _lengths(B: int, T: int, design: str, empty: int = 0) -> tuple[int, ...]:
    """Row lengths: equal (T - 1 each), or unequal (a ramp from T down to 1, so that no two of a cut's blocks
    of rows need hold the same number of tokens), the last ``empty`` rows all padding."""
    if design == "equal lengths":
        out = [max(T - 1, 1)] * B
    else:
        out = [1 + ((B - 1 - i) * (T - 1)) // (B - 1) for i in range(B)]
    return tuple(0 if i >= B - empty else n for i, n in enumerate(out))


def _designs(B: int, T: int, W: int, M: int) -> list[tuple[str, tuple[int, ...]]]:
    padded = (f"rank {W - 1} all padding", B // W) if W > 1 else (f"micro-batch {M - 1} all padding", B // M)
    return [("equal lengths", _lengths(B, T, "equal lengths")), ("unequal lengths", _lengths(B, T, "unequal lengths")),
            (padded[0], _lengths(B, T, "unequal lengths", padded[1]))]


def _mask(T: int, lengths) -> torch.Tensor:
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(F64)


def _probes(mask: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``kappa``: r = 1, A = 1; ``values``: ratios in [e^-0.3, e^0.3] and normal advantages (fixed seeds)."""
    gen = torch.Generator().manual_seed(0)
    old = -0.1 - 2.9 * torch.rand(mask.shape, generator=gen, dtype=F64)
    new = old + 0.6 * torch.rand(mask.shape, generator=gen, dtype=F64) - 0.3
    adv = torch.randn(mask.shape, generator=gen, dtype=F64)
    return {"kappa": (old, old.clone(), torch.ones_like(old)), "values": (old, new, adv)}


def _shares(mask: torch.Tensor, W: int, M: int) -> list[list[Share]]:
    B = mask.shape[0]
    per = B // (W * M)
    tokens = mask.reshape(W, M, per, -1).sum((2, 3))
    N, S = int(mask.sum()), int((mask.sum(-1) > 0).sum())
    return [[Share(W, M, w, m, N, B, S, int(tokens[w].sum()), int(tokens[w, m])) for m in range(M)] for w in range(W)]


# ------------------------------------------------------------------ the measurements and the verdict


@dataclass(frozen=True, eq=False)
class Measurement:
    """One design under one cut: the full batch's and the cut's :math:`\\kappa` (at r = 1, A = 1) and gradient (at the probe's values).

    ``old_log_prob``, ``log_prob`` and ``advantages`` are the values probe's inputs (before a
    convention's scaling of the advantages); ``values_full`` and ``values_split`` its gradients.
    """

    design: str
    mask: torch.Tensor
    kappa_full: torch.Tensor
    kappa_split: torch.Tensor
    values_full: torch.Tensor
    values_split: torch.Tensor
    old_log_prob: torch.Tensor
    log_prob: torch.Tensor
    advantages: torch.Tensor

    def ratio_range(self) -> tuple[float, float]:
        """The smallest and largest :math:`\\kappa^{W,U}/\\kappa^{1,1}` over the valid tokens (NaN if the cut is not finite)."""
        keep = (self.mask > 0) & (self.kappa_full.abs() > 0)
        r = self.kappa_split[keep] / self.kappa_full[keep]
        if not bool(torch.isfinite(r).all()) or not bool(torch.isfinite(self.values_split).all()):
            return (math.nan, math.nan)
        return (float(r.min()), float(r.max()))


@dataclass(frozen=True, eq=False)
class ExecutionCase:
    """The verdict on one cut: :math:`W` ranks, :math:`U` micro-batches each.

    Attributes
    ----------
    world_size, micro_batches : int
    verdict : str
        One of :data:`EXECUTION_VERDICTS`.
    factor : float or None
        :math:`c` (1 when invariant; ``None`` when it depends on the split).
    factor_name : str or None
        ``"dp_size"``, ``"1/GA"``, ... when :math:`c` is one of them.
    deviation : float
        The largest gap between the cut's gradient and :math:`c` times the full batch's, relative
        to the largest full-batch gradient (NaN when the cut's gradient is not finite).
    follows : str or None
        For a verdict "depends on the split": the count of its share that :math:`\\kappa` is inversely
        proportional to, when one is.
    evidence : str or None
        One token's :math:`\\kappa` in the full batch and under the cut, and its share's composition.
    measurements : tuple of Measurement
    """

    world_size: int
    micro_batches: int
    verdict: str
    factor: float | None
    factor_name: str | None
    deviation: float
    follows: str | None
    evidence: str | None
    measurements: tuple

    @property
    def label(self) -> str:
        return f"dp={self.world_size} x micro={self.micro_batches}"

    def summary(self) -> str:
        if self.verdict == "invariant":
            return f"{self.label}: invariant"
        if self.verdict == "scaled":
            name = f" = {self.factor_name}" if self.factor_name else ""
            return f"{self.label}: scaled by {self.factor:.6g}{name}"
        return f"{self.label}: depends on the split: {self.evidence}" + (f"; kappa is inversely proportional to {self.follows}" if self.follows else "")

    def as_dict(self) -> dict:
        return {"world_size": self.world_size, "micro_batches": self.micro_batches, "verdict": self.verdict, "factor": self.factor,
                "factor_name": self.factor_name, "deviation": self.deviation, "follows": self.follows, "evidence": self.evidence,
                "ratios": {m.design: list(m.ratio_range()) for m in self.measurements}}


def _counts(mask: torch.Tensor, W: int, M: int) -> dict[str, tuple[torch.Tensor, float]]:
    """Per row, each count of its share that a cut's denominator might be, with its global total."""
    B, T = mask.shape
    per = B // (W * M)
    grid = mask.reshape(W, M, per, T)
    rows_with_token = (grid.sum(-1) > 0).to(F64)

    def rows(x: torch.Tensor) -> torch.Tensor:
        return x[:, :, None].expand(W, M, per).reshape(B, 1)

    return {"its micro-batch's token count": (rows(grid.sum((2, 3))), float(mask.sum())),
            "its rank's token count": (rows(grid.sum((1, 2, 3))[:, None].expand(W, M)), float(mask.sum())),
            "the token count of its micro-batch step summed over the ranks": (rows(grid.sum((0, 2, 3))[None, :].expand(W, M)), float(mask.sum())),
            "its micro-batch's number of rows with a token": (rows(rows_with_token.sum(2)), float(rows_with_token.sum()))}


def _follows(W: int, M: int, measurements) -> str | None:
    """The counts :math:`n` of a token's share with :math:`\\kappa^{W,U}/\\kappa^{1,1} \\cdot n/n_{\\text{total}}` one constant on every valid token."""
    fits = []
    for label in _counts(measurements[0].mask, W, M):
        products = []
        for m in measurements:
            count, total = _counts(m.mask, W, M)[label]
            keep = (m.mask > 0) & (m.kappa_full.abs() > 0)
            products.append((m.kappa_split / m.kappa_full * count.expand_as(m.mask) / total)[keep])
        p = torch.cat(products)
        if len(p) and bool(torch.isfinite(p).all()) and float(p.max() - p.min()) <= EXECUTION_RTOL * float(p.abs().max()):
            fits.append(label)
    if not fits:
        return None
    return fits[0] + ("" if len(fits) == 1 else f" (at this cut also {' and '.join(fits[1:])})")


def _composition(m: Measurement, W: int, M: int, i: int) -> str:
    B = m.mask.shape[0]
    per = B // (W * M)
    w, k = divmod(i // per, M)
    block = m.mask[(w * M + k) * per:(w * M + k + 1) * per]
    return (f"'{m.design}': rank {w}, micro-batch {k} holds {int(block.sum())} of the batch's {int(m.mask.sum())} tokens, "
            f"in {int((block.sum(-1) > 0).sum())} of the {int((m.mask.sum(-1) > 0).sum())} rows that have one")


def _name(c: float, W: int, M: int) -> str | None:
    return next((name for name, f in _FACTORS if abs(f(W, M) - c) <= EXECUTION_RTOL * abs(c) and f(W, M) != 1), None)


def _judge(W: int, M: int, measurements: list[Measurement]) -> ExecutionCase:
    cut = f"{W} rank{'s' if W > 1 else ''} x {M} micro-batch{'es' if M > 1 else ''}"
    finite, broken = [], []
    for m in measurements:
        bad = ~(torch.isfinite(m.kappa_split) & torch.isfinite(m.values_split)).all(-1)
        if bool(bad.any()):
            broken.append(f"the gradient is not finite under {cut} ({_composition(m, W, M, int(bad.nonzero()[0]))})")
        else:
            finite.append(m)
    if not finite:
        return ExecutionCase(W, M, "depends on the split", None, None, math.nan, None, "; ".join(broken), tuple(measurements))
    kf = torch.cat([m.kappa_full[m.mask > 0] for m in finite])
    ks = torch.cat([m.kappa_split[m.mask > 0] for m in finite])
    c = float((kf * ks).sum() / (kf * kf).sum())

    def gap(full: torch.Tensor, split: torch.Tensor) -> torch.Tensor:
        return (split - c * full).abs() / max(float(full.abs().max()), 1e-300)

    kappa_gaps = [gap(m.kappa_full, m.kappa_split) for m in finite]
    value_gaps = [gap(m.values_full, m.values_split) for m in finite]
    deviation = max(float(g.max()) for g in kappa_gaps + value_gaps) if not broken else math.nan
    if not broken and deviation <= EXECUTION_RTOL:
        if abs(c - 1) <= EXECUTION_RTOL:
            return ExecutionCase(W, M, "invariant", 1.0, None, deviation, None, None, tuple(measurements))
        return ExecutionCase(W, M, "scaled", c, _name(c, W, M), deviation, None, None, tuple(measurements))
    on_kappa = max(float(g.max()) for g in kappa_gaps) > EXECUTION_RTOL
    on_values = max(float(g.max()) for g in value_gaps) > EXECUTION_RTOL
    evidence, follows = [], None
    if on_kappa or on_values:
        gaps = kappa_gaps if on_kappa else value_gaps
        d = max(range(len(gaps)), key=lambda j: float(gaps[j].max()))
        m = finite[d]
        i, t = divmod(int(gaps[d].argmax()), m.mask.shape[1])
        if on_kappa:
            evidence.append(f"token (row {i}, t {t}) has kappa {float(m.kappa_full[i, t]):.6g} in the full batch and "
                            f"{float(m.kappa_split[i, t]):.6g} under {cut} ({_composition(m, W, M, i)})")
            follows = _follows(W, M, finite)
        else:
            evidence.append(f"kappa at r = 1, A = 1 does not move, but at the probe's ratios and advantages token (row {i}, t {t}) "
                            f"has gradient {float(m.values_full[i, t]):.6g} in the full batch and {float(m.values_split[i, t]):.6g} "
                            f"under {cut} ({_composition(m, W, M, i)}): the loss couples the tokens of a share through their values")
    return ExecutionCase(W, M, "depends on the split", None, None, deviation, follows, "; ".join(evidence + broken), tuple(measurements))


def _named_across(cases: list[ExecutionCase]) -> list[ExecutionCase]:
    """One name for the factor that holds at every cut with a constant (so dp=2 x micro=2 reads dp_size or GA as the grid says)."""
    constant = [(c, c.factor) for c in cases if c.factor is not None]
    if not any(c.verdict == "scaled" for c, _ in constant):
        return cases
    for name, f in _FACTORS:
        if all(abs(f(c.world_size, c.micro_batches) - k) <= EXECUTION_RTOL * abs(k) for c, k in constant):
            return [ExecutionCase(c.world_size, c.micro_batches, c.verdict, c.factor, name if c.verdict == "scaled" else None,
                                  c.deviation, c.follows, c.evidence, c.measurements) for c in cases]
    return cases


# ------------------------------------------------------------------ the report


@dataclass(frozen=True, eq=False, repr=False)
class ExecutionReport:
    r"""What :func:`check_loss_execution` found.

    Attributes
    ----------
    verdict : str
        The worst verdict over the cuts (one of :data:`EXECUTION_VERDICTS`).
    engine : str
        ``"gloo"`` or ``"simulate"``.
    convention : str or None
        The convention's name.
    batch : tuple of int
        :math:`(B, T)` of the designed batches.
    cases : tuple of ExecutionCase
        One per cut :math:`(W, U)` other than the full batch :math:`(1, 1)`.
    designs : tuple of str
        The batch compositions every cut was measured on.
    reason : str
        One paragraph.
    """

    verdict: str
    engine: str
    convention: str | None
    batch: tuple
    cases: tuple
    designs: tuple
    reason: str

    def holds(self, allow_scaled: bool = False) -> bool:
        """Every cut invariant (or, with ``allow_scaled``, scaled by a constant).

        A constant factor is not invariance: it is a learning rate that changes with the cluster,
        and under global-norm gradient clipping it changes which steps are clipped.
        """
        return all(c.verdict == "invariant" or allow_scaled and c.verdict == "scaled" for c in self.cases)

    def case(self, world_size: int, micro_batches: int) -> ExecutionCase:
        """The verdict on the cut :math:`(W, U)`."""
        for c in self.cases:
            if (c.world_size, c.micro_batches) == (world_size, micro_batches):
                return c
        raise KeyError(f"no cut dp={world_size} x micro={micro_batches} in this report")

    def headline(self) -> str:
        counts = {v: sum(c.verdict == v for c in self.cases) for v in EXECUTION_VERDICTS}
        parts = ", ".join(f"{v} at {n} of {len(self.cases)}" for v, n in counts.items() if n)
        convention = "no convention" if self.convention is None else f"convention {self.convention}"
        return f"execution ({self.engine}, {convention}): {self.verdict} ({parts} cuts)"

    def table(self) -> ReportTable:
        """One row per cut and design: the range of :math:`\\kappa^{W,U}/\\kappa^{1,1}` over its valid tokens."""
        rows = []
        for c in self.cases:
            for m in c.measurements:
                lo, hi = m.ratio_range()
                ratio = "not finite" if math.isnan(lo) else f"{lo:.6g}" if abs(hi - lo) <= EXECUTION_RTOL * abs(hi) else f"{lo:.6g} .. {hi:.6g}"
                rows.append((c.world_size, c.micro_batches, m.design, ratio, c.verdict))
        return ReportTable(("dp", "micro", "design", "κ cut / κ full", "verdict"), rows)

    def as_dict(self) -> dict:
        """The report as plain JSON-ready values (the measured tensors left out)."""
        return {"verdict": self.verdict, "holds": self.holds(), "engine": self.engine, "convention": self.convention,
                "batch": list(self.batch), "designs": list(self.designs), "reason": self.reason, "cases": [c.as_dict() for c in self.cases]}

    def __repr__(self) -> str:
        return f"ExecutionReport(verdict={self.verdict!r}, engine={self.engine!r}, convention={self.convention!r}, cases={len(self.cases)})"

    def __str__(self) -> str:
        return "\n".join([self.headline(), self.reason, *("  - " + c.summary() for c in self.cases)])

    def _repr_html_(self) -> str:
        return report_html(self.headline(), reason=self.reason, notes=[c.summary() for c in self.cases], table=self.table())


def _reason(cases: list[ExecutionCase]) -> str:
    bad = [c for c in cases if c.verdict == "depends on the split"]
    scaled = [c for c in cases if c.verdict == "scaled"]
    if not bad and not scaled:
        return "Every cut gives every token the full batch's kappa: the loss is invariant to how the batch is split."
    parts = []
    if bad:
        c = bad[0]
        parts.append(f"At {c.label} a token's kappa depends on the split: {c.evidence}"
                     + (f"; kappa is inversely proportional to {c.follows}." if c.follows else "."))
    if scaled:
        text = "; ".join(f"{c.label}: {c.factor:.6g}" + (f" = {c.factor_name}" if c.factor_name else "") for c in scaled)
        parts.append(f"Scaled by a constant ({text}): the update's direction holds, its size changes with the cut, "
                     "which under global-norm gradient clipping changes the step.")
    return " ".join(parts)


# ------------------------------------------------------------------ the entry point


def _sizes(name: str, value) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise TypeError(f"{name} must be a non-empty tuple of ints, got {value!r}")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be a non-empty tuple of ints, got {value!r}")
        if v < 1:
            raise ValueError(f"{name} must hold ints >= 1, got {v}")
    return tuple(sorted({int(v) for v in value}))


def _convention(value) -> Convention:
    if value is None:
        return Convention("none")
    if isinstance(value, Convention):
        if value.reduction not in ("mean", "sum"):
            raise ValueError(f"convention.reduction must be 'mean' or 'sum', got {value.reduction!r}")
        return value
    if isinstance(value, str) and value in EXECUTION_CONVENTIONS:
        return EXECUTION_CONVENTIONS[value]
    raise ValueError(f"convention must be None, a Convention or one of {', '.join(map(repr, EXECUTION_CONVENTIONS))}, got {value!r}")


def _accepted(fn: Callable, names: Sequence[str]) -> set[str] | None:
    """The names among ``names`` that ``fn`` takes by keyword (``None``: all of them, through ``**kwargs`` or an unreadable signature)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    taken = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    return taken & set(names)


def _route(convention: Convention, fn: Callable, fixed: dict) -> Callable[[Share], dict]:
    """How the convention's arguments reach ``fn``: by keyword, or in ``config.<config_attribute>``."""
    probe = convention.arguments(Share(1, 1, 0, 0, 1, 1, 1, 1, 1))
    if not probe:
        return lambda share: {}
    clash = set(probe) & set(fixed)
    if clash:
        raise ValueError(f"fixed arguments {', '.join(sorted(clash))} are passed by convention={convention.name!r}; leave them out")
    taken = _accepted(fn, list(probe))
    if taken is None or taken:
        return lambda share: {k: v for k, v in convention.arguments(share).items() if taken is None or k in taken}
    config = fixed.get("config")
    attribute = convention.config_attribute
    if attribute and isinstance(getattr(config, attribute, None), dict):
        def in_config(share: Share) -> dict:
            filled = copy.copy(config)
            object.__setattr__(filled, attribute, {**getattr(config, attribute), **convention.arguments(share)})
            return {"config": filled}

        return in_config
    where = f" (nor a config with {attribute} among the fixed arguments)" if attribute else ""
    raise ValueError(f"convention={convention.name!r} passes {', '.join(probe)}; fn takes none of them{where}")


def _run(engine, spec: LossSpec, world_size: int, jobs: list, timeout: float) -> list:
    if isinstance(engine, GlooWorld):
        return engine.run(spec, world_size, jobs, timeout)
    return simulate(spec, world_size, jobs, timeout)


def check_loss_execution(fn: Callable, *, world_sizes: Sequence[int] = (1, 2, 4), micro_batches: Sequence[int] = (1, 2, 4),
                         convention: str | Convention | None = None, engine: str | GlooWorld = "gloo", names: Mapping | None = None,
                         batch: tuple[int, int] = (16, 8), timeout: float = 60.0, **fixed: object) -> ExecutionReport:
    r"""Run a trainer's loss the way trainers run it — cut into ranks and micro-batches — and compare every token's :math:`\kappa`.

    For every cut :math:`(W, U)` of ``world_sizes`` :math:`\times` ``micro_batches`` but
    :math:`(1, 1)`, and every designed batch (equal lengths, unequal lengths, one rank's
    share all padding), each micro-batch's loss is differentiated, the gradients summed
    over the micro-batches and reduced over the ranks as the convention says (DDP's mean
    by default), and compared, token by token, with the full batch's:

    .. math::

        \kappa^{W,U}_{it} = -\frac{1}{W}\,\frac{\partial \mathcal L_{p,q}}{\partial \log\pi_{it}} \overset{?}{=} c\,\kappa^{1,1}_{it}.

    Parameters
    ----------
    fn : callable
        The trainer's loss, called by keyword on ``old_log_prob, log_prob, advantages,
        response_mask`` (renamed by ``names``) as :func:`~numeric.variants.check_policy_loss`
        calls it; it returns a scalar (or a tuple whose first element is one).  It may call
        ``torch.distributed`` itself.
    world_sizes, micro_batches : tuple of int
        The data-parallel world sizes :math:`W` and micro-batches per rank :math:`U` to try.
    convention : str, Convention or None
        What the trainer passes with each micro-batch: ``"verl"``, ``"trl"``, ``"openrlhf"``,
        ``"prime-rl"``, ``"skyrl"`` (:data:`EXECUTION_CONVENTIONS`), a :class:`~numeric.variants.Convention`, or ``None`` (nothing).
    engine : str or GlooWorld
        ``"gloo"`` (worker processes started for this call and stopped after it), ``"simulate"``
        (threads in this process), or a held :class:`~numeric.variants.GlooWorld`.
    names : mapping, optional
        The function's own names for the roles (``{"log_prob": "logprobs"}``).
    batch : tuple of int
        :math:`(B, T)` of the designed batches; :math:`B` must be a multiple of every :math:`W U`.
    timeout : float
        Seconds one world size's ranks may take (a hang ends in a ``TimeoutError``, the processes stopped).
    **fixed
        Passed to every call (``loss_agg_mode="token-mean"``, ``config=...``).

    Returns
    -------
    ExecutionReport

    Raises
    ------
    TypeError
        ``fn`` not callable, or failing inside a rank (the rank's error is shown), or not
        reaching the worker processes; bad argument types.
    ValueError
        A world size or micro-batch count that does not fit the batch, an unknown engine or
        convention, a loss without a finite gradient on the full batch.
    TimeoutError
        A rank did not finish within ``timeout``.

    Examples
    --------
    A token-mean over the micro-batch's own tokens (verl's fallback when no global count
    is passed) moves with the cut; passing verl's global count and ``dp_size`` fixes it:

    >>> import torch
    >>> from numeric.variants import check_loss_execution
    >>> def loss(old_log_prob, log_prob, advantages, response_mask, dp_size=1, batch_num_tokens=None):
    ...     per_token = -torch.exp(log_prob - old_log_prob) * advantages * response_mask
    ...     count = response_mask.sum() if batch_num_tokens is None else batch_num_tokens
    ...     return per_token.sum() / count * dp_size
    >>> rep = check_loss_execution(loss, world_sizes=(1, 2), micro_batches=(1, 2), engine="simulate")
    >>> rep.verdict, rep.case(2, 2).follows
    ('depends on the split', "its micro-batch's token count")
    >>> check_loss_execution(loss, world_sizes=(1, 2), micro_batches=(1, 2), convention="verl", engine="simulate").verdict
    'invariant'
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable policy loss, got {type(fn).__name__}")
    Ws, Ms = _sizes("world_sizes", world_sizes), _sizes("micro_batches", micro_batches)
    if (not isinstance(batch, tuple) or len(batch) != 2 or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in batch)):
        raise TypeError(f"batch must be a tuple (B, T) of two ints, got {batch!r}")
    B, T = int(batch[0]), int(batch[1])
    if B < 2 or T < 2:
        raise ValueError(f"batch must have B >= 2 rows and T >= 2 positions, got {batch!r}")
    if Ws[-1] > B or B % Ws[-1] or any(B % W for W in Ws):
        bad = next(W for W in reversed(Ws) if W > B or B % W)
        raise ValueError(f"world_sizes: {bad} ranks cannot share the batch's {B} rows equally (a world size must divide B = {B})")
    for W in Ws:
        bad_m = [M for M in Ms if (B // W) % M]
        if bad_m:
            raise ValueError(f"micro_batches: {bad_m[0]} micro-batches do not fit a rank's {B // W} rows at {W} ranks "
                             f"(M must divide B/W; batch=(B, T) sets B)")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(engine, GlooWorld):
        if engine.size < Ws[-1]:
            raise ValueError(f"engine: the GlooWorld has {engine.size} processes, world_sizes needs {Ws[-1]}")
        name = "gloo"
    elif engine in ("gloo", "simulate"):
        name = engine
    else:
        raise ValueError(f"engine must be 'gloo', 'simulate' or a GlooWorld, got {engine!r}")
    conv = _convention(convention)
    spec = LossSpec(fn, names, dict(fixed))
    spec.loss()  # bad names or fixed arguments fail here, before any rank runs
    arguments = _route(conv, fn, dict(fixed))
    if name == "gloo":
        spec.portable()  # a function that cannot reach the processes fails before any starts
    cuts = [(W, M) for W in Ws for M in Ms if (W, M) != (1, 1)]
    if not cuts:
        raise ValueError("world_sizes and micro_batches must give a cut besides the full batch (1 rank, 1 micro-batch)")
    return _measure(spec, conv, arguments, cuts, B, T, engine, name, float(timeout))


def _job(mask: torch.Tensor, W: int, M: int, probe: tuple, conv: Convention, arguments: Callable) -> Job:
    old, new, adv = probe
    if conv.advantages is not None:
        adv = adv * conv.advantages(mask)
    shares = _shares(mask, W, M)
    extras = tuple(tuple(arguments(s) for s in row) for row in shares)
    factors = tuple(tuple(float(conv.loss_factor(s)) for s in row) for row in shares)
    return Job(old, new, adv, mask, M, extras, factors)


def _measure(spec, conv, arguments, cuts, B, T, engine, name, timeout) -> ExecutionReport:
    plans: dict[int, list] = {}  # world size -> [(key, job)]
    references: dict[tuple, None] = {}
    for W, M in cuts:
        for label, lengths in _designs(B, T, W, M):
            mask = _mask(T, lengths)
            for probe, tensors in _probes(mask).items():
                references.setdefault((lengths, probe))
                plans.setdefault(W, []).append(((W, M, label, lengths, probe), _job(mask, W, M, tensors, conv, arguments)))
    for lengths, probe in references:
        mask = _mask(T, lengths)
        plans.setdefault(1, []).append((("full", lengths, probe), _job(mask, 1, 1, _probes(mask)[probe], conv, arguments)))
    grads: dict[tuple, torch.Tensor] = {}
    world = GlooWorld(max(plans), timeout=timeout) if name == "gloo" and not isinstance(engine, GlooWorld) else engine
    try:
        for W, plan in sorted(plans.items()):
            out = _run(world, spec, W, [job for _, job in plan], timeout)
            divide = W if conv.reduction == "mean" else 1
            for (key, _), parts in zip(plan, out):
                grads[key] = torch.cat(parts) / divide
    finally:
        if world is not engine:
            world.close()
    for lengths, probe in references:
        g = grads[("full", lengths, probe)]
        if not bool(torch.isfinite(g).all()):
            raise ValueError(f"fn returns a non-finite gradient on the full batch of row lengths {list(lengths)} (at the {probe} probe)")
        if probe == "kappa" and not bool((g[_mask(T, lengths) > 0] != 0).any()):
            raise ValueError("fn has no gradient at r = 1, A = 1 on any valid token of the full batch: it cannot be a policy loss")
    cases = []
    for W, M in cuts:
        measurements = [Measurement(label, _mask(T, lengths), -grads[("full", lengths, "kappa")], -grads[(W, M, label, lengths, "kappa")],
                                    grads[("full", lengths, "values")], grads[(W, M, label, lengths, "values")],
                                    *_probes(_mask(T, lengths))["values"])
                        for label, lengths in _designs(B, T, W, M)]
        cases.append(_judge(W, M, measurements))
    cases = _named_across(cases)
    verdict = max((c.verdict for c in cases), key=EXECUTION_VERDICTS.index)
    designs = tuple(dict.fromkeys(m.design for c in cases for m in c.measurements))
    return ExecutionReport(verdict, name, None if conv.name == "none" else conv.name, (B, T), tuple(cases), designs, _reason(cases))
