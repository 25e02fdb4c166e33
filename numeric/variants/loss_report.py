r"""What :func:`~numeric.variants.check_policy_loss` found, in one record that every form reads.

The text report, ``--json`` (:meth:`PolicyLossReport.as_dict`), the notebook's
HTML and the assertions' messages all print the same facts, from one method,
:meth:`PolicyLossReport.facts`: the verdict, the method, the clip range of
each sign of :math:`A`, boundedness, the aggregation and :math:`\kappa`, the
length bias, the precision and tolerance, what could not be decided and why,
and the edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from derivations.variants import ReportTable, TokenReport, report_html

from .answers import Answer
from .execution import ExecutionReport
from .kappa import MODES
from .precision import Precision

__all__ = ["LOSS_VERDICTS", "PolicyLossReport"]

LOSS_VERDICTS = ("unbiased", "scaled", "reweighted", "biased", "undecided")
"""Verdicts on a loss: ``unbiased`` (a policy gradient with :math:`\\kappa = 1/B`, the mean of the
per-sequence REINFORCE gradients at :math:`r = 1`), ``scaled`` (one factor for every token of the
batch, as token-mean's :math:`1/\\sum n`), ``reweighted`` (:math:`\\kappa` depends on the row's length:
length bias), ``biased`` (not a policy gradient, the wrong weight at :math:`r = 1`, or gradient on
masked tokens), ``undecided`` (a question the checker could not answer; the report's ``undecided``
says which and why)."""


@dataclass(frozen=True, repr=False)
class PolicyLossReport:
    r"""What :func:`~numeric.variants.check_policy_loss` found.

    Attributes
    ----------
    verdict : str
        One of :data:`LOSS_VERDICTS`.
    method : str or None
        The known method of the per-token weight (the token check's name), ``"sequence-level"``, or ``None``.
    policy_gradient : bool or None
        :math:`w(1, A; \pi_{\text{old}})` is the same at every old probability :math:`\pi_{\text{old}}` (``None`` for a sequence-level loss).
    on_policy_at_ratio_one : bool
        At :math:`r = 1` every valid token's gradient is :math:`-\kappa A`.
    sequence_level : bool
        A token's gradient depends on the other tokens of its row (and on no other row).
    aggregation : str
        One of :data:`~numeric.variants.kappa.MODES`, or ``other``.
    scale : float or None
        :math:`c` in :math:`\kappa = c\times` the mode's factor (1 when exactly the mode).
    normaliser : str or None
        :math:`D` of ``seq-mean-token-sum-norm``: a number, or ``"T"`` (the mask's width).
    epsilon : float
        :math:`\epsilon_{\mathrm{div}}` added to the count a mode divides by (0 when exact).
    length_biased : bool
        :math:`\kappa` differs between rows of different lengths in one batch.
    claimed : str or None
        The ``loss_agg_mode`` passed in ``fixed``, if any.
    clip : tuple
        ``(name, value)`` of the clip constants read off the weight (``eps_low``, ``eps_high``, ``dual_clip``, ...).
    kappa : tuple
        ``(design, row, n_i, B, T, measured kappa, model kappa)`` rows.
    notes : tuple of str
        The edges: clamps, denominators, empty rows, padding.
    token : TokenReport or None
        The token check's report on the per-token weight.
    decomposition_gap : float or None
        The largest relative gap between the gradient on a ragged batch with random ratios and
        advantages and :math:`-\kappa w A` built from the two measurements.
    reason : str
        One paragraph.
    clip_ranges : tuple
        A :class:`~numeric.variants.weight_probe.ClipRange` per sign of :math:`A`, or ``()``.
    bounded : dict
        ``{+1: bool, -1: bool}``: is the weight bounded over :math:`r \in (0, \infty)` (``{}`` when not read).
    precision : Precision or None
        The precision the loss computes in and the tolerance used.
    kappa_law : str
        :math:`\kappa` described as the power law it follows in :math:`T, B, n_i, N`.
    undecided : tuple
        ``(question, why)`` for every question the checker could not answer.
    ratio_one : str
        Why the weight at :math:`r = 1` is not 1, measured (``""`` when it is).
    sequence_ratio : str or None
        For a sequence-level loss: the ratio its clip reads, ``"geometric mean"`` or ``"product"`` of the token ratios.
    questions : tuple
        The trainers' questions answered (:class:`~numeric.variants.answers.Answer`, one per
        :data:`~numeric.variants.questions.QUESTION_FUNCTIONS`): ``mask_consistent``, ``weighting``,
        ``kl_gradient``, ``correction``, ``sequence_weight_scale``, ``poison``.
    execution : ExecutionReport or None
        The loss run cut into ranks and micro-batches, when asked for (``check_policy_loss(..., execution=...)``).
    """

    verdict: str
    method: str | None
    policy_gradient: bool | None
    on_policy_at_ratio_one: bool
    sequence_level: bool
    aggregation: str
    scale: float | None
    normaliser: str | None
    epsilon: float
    length_biased: bool
    claimed: str | None
    clip: tuple
    kappa: tuple
    notes: tuple
    token: TokenReport | None
    decomposition_gap: float | None
    reason: str
    clip_ranges: tuple = ()
    bounded: dict = field(default_factory=dict)
    precision: Precision | None = None
    kappa_law: str = ""
    undecided: tuple = ()
    ratio_one: str = ""
    sequence_ratio: str | None = None
    questions: tuple = ()
    execution: ExecutionReport | None = None

    def answer(self, question: str) -> Answer:
        """The answer to one of the trainers' questions (``"poison"``, ``"mask_consistent"``, ...)."""
        found = [a for a in self.questions if a.question == question]
        if not found:
            raise ValueError(f"question must be one of {', '.join(a.question for a in self.questions)}, got {question!r}")
        return found[0]

    @property
    def claim_holds(self) -> bool:
        """The claimed ``loss_agg_mode`` (if any) is the measured aggregation."""
        return self.claimed is None or self.claimed not in MODES or self.claimed == self.aggregation

    def holds(self, expect: str | None = None) -> bool:
        """Is the loss what ``expect`` says: a verdict, an aggregation mode, a method's name; ``None``: unbiased or scaled, its claim holding."""
        if expect is None:
            return self.verdict in ("unbiased", "scaled") and self.claim_holds
        if expect in LOSS_VERDICTS:
            return self.verdict == expect and self.claim_holds
        if expect in MODES:
            return self.aggregation == expect and self.verdict != "biased"
        return self.method is not None and self.method.lower() == expect.lower() and self.verdict != "biased" and self.claim_holds

    # ------------------------------------------------------------------ the facts, once

    def facts(self) -> tuple[tuple[str, str], ...]:
        """``(fact, value)`` rows: what the text, the HTML and the assertions print."""
        rows = [("verdict", self.verdict), ("method", self.method or "no known method")]
        if self.clip_ranges:
            rows += [("clip range", c.describe()) for c in self.clip_ranges]
        if self.clip:
            rows.append(("clip constants", ", ".join(f"{k} = {v:.6g}" for k, v in self.clip)))
        if self.sequence_ratio:
            rows.append(("sequence ratio", f"the clip reads the {self.sequence_ratio} of the token ratios"))
        if self.bounded:
            rows.append(("bounded", ", ".join(f"{'A > 0' if s > 0 else 'A < 0'}: {'yes' if b else 'no'}" for s, b in sorted(self.bounded.items(), reverse=True))))
        if self.ratio_one:
            rows.append(("at r = 1", self.ratio_one))
        rows.append(("aggregation", self._aggregation_text()))
        if self.kappa_law:
            rows.append(("kappa", self.kappa_law))
        rows.append(("length bias", "yes: kappa depends on the row's length" if self.length_biased else "no"))
        if self.precision is not None:
            rows.append(("precision", self.precision.describe()))
        rows += [(f"undecided: {q}", why) for q, why in self.undecided]
        rows += [(a.question, f"{a.verdict}: {a.explanation}") for a in self.questions]
        if self.execution is not None:
            rows.append(("execution", self.execution.headline()))
        rows += [("edge", n) for n in self.notes]
        return tuple(rows)

    def _aggregation_text(self) -> str:
        if self.aggregation == "other":
            return "other (no known mode; see kappa)"
        text = self.aggregation + ("" if self.normaliser is None else f" (D = {self.normaliser})")
        if self.scale is not None and self.normaliser is None and abs(self.scale - 1) > 1e-9:
            text += f", times {self.scale:.6g}"
        if self.epsilon:
            text += f", denominator + {self.epsilon:.3g}"
        if self.claimed is not None and not self.claim_holds:
            text += f" (claims loss_agg_mode={self.claimed!r})"
        return text

    def as_dict(self) -> dict:
        """The report as plain JSON-ready values: every fact of :meth:`facts`, structured (the token report and kappa rows left out)."""
        keep = ("verdict", "method", "policy_gradient", "on_policy_at_ratio_one", "sequence_level", "aggregation", "scale",
                "normaliser", "epsilon", "length_biased", "claimed", "kappa_law", "ratio_one", "sequence_ratio", "reason")
        ranges = [{"sign": c.sign, "form": c.form, "low": c.low, "high": c.high, "below": c.below, "above": c.above,
                   "per_token": [list(p) for p in c.per_token], "text": c.describe()} for c in self.clip_ranges]
        return {**{k: getattr(self, k) for k in keep}, "clip": dict(self.clip), "clip_ranges": ranges,
                "bounded": {("A>0" if s > 0 else "A<0"): b for s, b in self.bounded.items()},
                "precision": None if self.precision is None else {"name": self.precision.name, "measured": self.precision.measured,
                                                                  "tolerance": self.precision.tolerance, "inputs": self.precision.inputs},
                "undecided": [{"question": q, "why": why} for q, why in self.undecided], "notes": list(self.notes),
                "questions": {a.question: a.as_dict() for a in self.questions},
                **({} if self.execution is None else {"execution": self.execution.as_dict()})}

    def headline(self) -> str:
        method = self.method or "no known method"
        agg = self.aggregation + ("" if self.normaliser is None else f" (D = {self.normaliser})")
        return f"{self.verdict}: {method}, {agg}, {'length-biased' if self.length_biased else 'no length bias'}"

    def table(self) -> ReportTable:
        """The measured kappa against the identified mode's, one row per (design, row): aligned text, or an HTML table."""
        lines = ["design                     row  n_i  kappa measured    kappa model"]
        for design, i, n, _, _, k, model in self.kappa:
            lines.append(f"{design:25s}  {i:3d}  {n:3d}  {k:14.10g}  {model:14.10g}" if model is not None
                         else f"{design:25s}  {i:3d}  {n:3d}  {k:14.10g}  {'-':>14s}")
        rows = [(design, i, n, f"{k:.10g}", "-" if model is None else f"{model:.10g}") for design, i, n, _, _, k, model in self.kappa]
        return ReportTable(("design", "row", "n_i", "κ measured", "κ model"), rows, text="\n".join(lines))

    def facts_table(self) -> ReportTable:
        """:meth:`facts` as a two-column table."""
        return ReportTable(("fact", "value"), self.facts())

    def __repr__(self) -> str:
        return (f"PolicyLossReport(verdict={self.verdict!r}, method={self.method!r}, aggregation={self.aggregation!r}, "
                f"length_biased={self.length_biased}, notes={len(self.notes)})")

    def __str__(self) -> str:
        return "\n".join([self.headline(), self.reason, *(f"  {k}: {v}" for k, v in self.facts())])

    def _repr_html_(self) -> str:
        token = self.token
        latex = None if token is None or token.derivation is None else "$$" + token.derivation.to_latex() + "$$"
        return report_html(self.headline(), reason=self.reason, table=self.facts_table(), latex=latex,
                           tables=[("kappa measured on the designed batches", self.table())])
