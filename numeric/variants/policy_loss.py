r"""A trainer's policy loss as written: its per-token weight, its aggregation, its edges.

A trainer's loss takes ``[B, T]`` batches and returns one scalar,

.. math::

    \mathcal L = \sum_{i,t} m_{it}\,\kappa_{it}\,\ell_{it}(r_{it}, A_{it}),
    \qquad
    \frac{\partial \mathcal L}{\partial \log\pi_{it}} = -\,\kappa_{it}\, w(r_{it}, A_{it})\, A_{it},

where :math:`\kappa_{it}` is the factor the aggregation gives token :math:`t` of
row :math:`i` (a function of its row's length :math:`n_i`, the batch's lengths,
:math:`B` and :math:`T`) and :math:`w` is the per-token gradient weight of
:func:`~numeric.variants.check_token_loss`.  :func:`check_policy_loss`
measures both by autograd:

* :math:`\kappa` at :math:`r = 1`, :math:`A = 1` (where :math:`w = 1` for a
  policy gradient) on designed masks, and identifies it among verl's modes
  (at the commit below): ``token-mean`` (:math:`\kappa = 1/\sum_j n_j`),
  ``seq-mean-token-mean`` (:math:`1/(B n_i)`), ``seq-mean-token-sum``
  (:math:`1/B`) and ``seq-mean-token-sum-norm`` (:math:`1/D`, a constant, or
  the mask's width :math:`T` as verl's default), each up to a constant factor
  and an :math:`n + \varepsilon` denominator, which are reported;
* :math:`w` by wrapping the loss as a per-token callable (each token in a row of
  its own, :math:`\kappa` divided out) and handing it to the token check, so the
  silenced regions, boundedness, the ratio-one limit and the known method come
  from the same machinery.  A loss whose token gradient depends on the other
  tokens of its row (GSPO, GMPO) is reported as sequence-level instead.

Tolerances: the aggregation model fits the measured :math:`\kappa` to a relative
``KAPPA_RTOL``; the weight is read to the token check's 1e-12.

References
----------
verl ``agg_loss`` and ``compute_policy_loss_vanilla``, volcengine/verl at
b178a3cd56f58b2d502255daba591e92833930a7 (``verl/trainer/ppo/core_algos.py``);
Z. Liu et al., "Understanding R1-Zero-like training" (Dr. GRPO), arXiv:2503.20783 (2025).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from derivations.gradient_weights import c as _c
from derivations.gradient_weights import eps_h as _eps_h
from derivations.gradient_weights import eps_l as _eps_l
from derivations.variants import ReportTable, TokenReport, report_html

from .checker import check_token_loss
from .trainer_loss import TrainerLoss

__all__ = ["KAPPA_RTOL", "LOSS_VERDICTS", "PolicyLossReport", "check_policy_loss"]

F64 = torch.float64
KAPPA_RTOL = 1e-9
"""Relative tolerance of the aggregation model fitted to the measured :math:`\\kappa`."""

LOSS_VERDICTS = ("unbiased", "scaled", "reweighted", "biased", "undecided")
"""Verdicts on a loss: ``unbiased`` (a policy gradient with :math:`\\kappa = 1/B`, the mean of the
per-sequence REINFORCE gradients at :math:`r = 1`), ``scaled`` (one factor for every token of the
batch, as token-mean's :math:`1/\\sum n`), ``reweighted`` (:math:`\\kappa` depends on the row's length:
length bias), ``biased`` (not a policy gradient, the wrong sign at :math:`r = 1`, or gradient on
masked tokens), ``undecided`` (an aggregation outside the four modes, or a token's gradient that depends on
other rows of the batch)."""

_DESIGNS = (("T=6, B=3", 6, (1, 3, 6)), ("T=6, B=2", 6, (3, 5)), ("T=9, B=3", 9, (1, 3, 6)))
_EMPTY_ROW = ("T=6, B=4, one row empty", 6, (1, 3, 6, 0))
_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def _mask(T: int, lengths) -> torch.Tensor:
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(F64)


def _old(shape, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return -0.1 - 2.9 * torch.rand(shape, generator=gen, dtype=F64)


# ------------------------------------------------------------------ the aggregation


@dataclass(frozen=True)
class _Fit:
    mode: str
    scale: float
    epsilon: float
    prefactor: Callable
    denominator: Callable
    counts: str | None  # what the denominator counts, where an epsilon can sit

    def kappa(self, n, B, T, N) -> float:
        return self.scale * self.prefactor(n, B, T, N) / (self.denominator(n, B, T, N) + self.epsilon)


_CANDIDATES = (  # (mode, prefactor P, denominator D, what D counts): kappa = s P / (D + eps)
    ("seq-mean-token-sum-norm", lambda n, B, T, N: 1.0, lambda n, B, T, N: 1.0, None),
    ("seq-mean-token-sum-norm/T", lambda n, B, T, N: 1.0, lambda n, B, T, N: float(T), "T"),
    ("seq-mean-token-sum", lambda n, B, T, N: 1.0, lambda n, B, T, N: float(B), "B"),
    ("token-mean", lambda n, B, T, N: 1.0, lambda n, B, T, N: float(N), "sum n"),
    ("seq-mean-token-mean", lambda n, B, T, N: 1.0 / B, lambda n, B, T, N: float(n), "n"),
)


def _fit(rows: list) -> _Fit | None:
    r"""The first mode whose model :math:`\kappa = sP/(D + \varepsilon)` fits every measured row to ``KAPPA_RTOL``."""
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
        if abs(eps) <= 1e-12 * d.max():
            eps, slope = 0.0, float(np.mean(y / d))
        if abs(eps) >= 0.5 or np.abs(y - slope * (d + eps)).max() > KAPPA_RTOL * np.abs(y).max():
            continue
        return _Fit(mode, 1.0 / slope, eps, P, D, counts)
    return None


def _measure(loss: TrainerLoss, label: str, T: int, lengths, notes: list) -> list | None:
    """``(design, row, n_i, B, T, sum n, kappa)`` for every valid token's row, at r = 1 and A = 1; ``None`` if non-finite."""
    mask = _mask(T, lengths)
    old = _old(mask.shape)
    value, g = loss.grad(old, old, torch.ones_like(old), mask)
    if not (math.isfinite(value) and bool(torch.isfinite(g).all())):
        return None
    leak = "masked tokens receive gradient: the loss is not masked"
    if bool((g[mask == 0] != 0).any()) and leak not in notes:
        notes.append(leak)
    B, N = len(lengths), int(sum(lengths))
    rows = []
    for i, n in enumerate(lengths):
        for t in range(n):
            rows.append((label, i, n, B, T, N, float(-g[i, t])))
    return rows


def _sign(rows: list) -> int:
    """+1 when every valid token's gradient at r = 1, A = 1 is -kappa (descends on A), -1 when every one is +kappa, 0 otherwise."""
    k = np.array([row[-1] for row in rows])
    return 1 if (k > 0).all() else -1 if (k < 0).all() else 0


def _empty_row_note(loss: TrainerLoss, fit: _Fit, notes: list) -> None:
    label, T, lengths = _EMPTY_ROW
    mask = _mask(T, lengths)
    old = _old(mask.shape)
    value, g = loss.grad(old, old, torch.ones_like(old), mask)
    if not (math.isfinite(value) and bool(torch.isfinite(g).all())):
        notes.append("an all-masked row makes the loss or its gradient non-finite (0/0)")
        return
    N, B = int(sum(lengths)), len(lengths)
    measured = [abs(float(g[i, t])) for i, n in enumerate(lengths) for t in range(n)]
    ns = [n for n in lengths for _ in range(n)]
    counted = [fit.kappa(n, B, T, N) for n in ns]
    excluded = [fit.kappa(n, B - 1, T, N) for n in ns]
    close = lambda a, b: all(abs(x - y) <= KAPPA_RTOL * abs(y) for x, y in zip(a, b))
    if close(counted, excluded) and close(measured, counted):
        notes.append("an all-masked row does not change the other rows' kappa")
    elif close(measured, counted):
        notes.append("an all-masked row is counted in B: it shrinks the other rows' kappa by (B - 1)/B")
    elif close(measured, excluded):
        notes.append("an all-masked row is not counted in B (rows with a token only)")
    else:
        notes.append("an all-masked row changes the other rows' kappa, neither as one more row nor as none")


def _padding_notes(loss: TrainerLoss, notes: list) -> None:
    """NaN and inf in the masked slots: does either reach the loss or the valid tokens' gradient?"""
    label, T, lengths = _DESIGNS[0]
    mask = _mask(T, lengths)
    old = _old(mask.shape)
    adv = torch.linspace(-1.5, 2.0, mask.numel(), dtype=F64).reshape(mask.shape)
    new = old + 0.05
    clean_value, clean_g = loss.grad(old, new, adv, mask)
    pad = mask == 0
    for name, fill in (("NaN", (math.nan, math.nan, math.nan)), ("inf", (-math.inf, -math.inf, math.inf))):
        o, n_, a = (torch.where(pad, torch.full_like(x, f), x) for x, f in zip((old, new, adv), fill))
        try:
            value, g = loss.grad(o, n_, a, mask)
        except TypeError as err:
            notes.append(f"{name} in masked slots: the function refuses it ({err.__cause__!r})")
            continue
        valid = g[~pad]
        if not math.isfinite(value) or abs(value - clean_value) > 1e-12 * max(1.0, abs(clean_value)):
            notes.append(f"{name} in masked slots leaks into the loss (value {value})")
        elif not bool(torch.isfinite(valid).all()) or float((valid - clean_g[~pad]).abs().max()) > 1e-12:
            notes.append(f"{name} in masked slots leaks into the gradient")
        else:
            notes.append(f"{name} in masked slots: no leak into the loss or the gradient")


# ------------------------------------------------------------------ sequence level, clip constants, clamps


def _row_coupling(loss: TrainerLoss) -> tuple[bool, bool]:
    """(sequence-level, batch-coupled): does a token's gradient change when another token of its row (of another row) moves?"""
    mask = _mask(4, (3, 4))
    old = _old(mask.shape, seed=1)
    adv = torch.ones_like(old)
    _, base = loss.grad(old, old, adv, mask)
    same_row, other_row = False, False
    for step in (0.3, -0.3):
        new = old.clone()
        new[0, 1] += step
        _, g = loss.grad(old, new, adv, mask)
        tol = 1e-9 * float(base.abs().max())
        same_row |= bool((g[0, [0, 2]] - base[0, [0, 2]]).abs().max() > tol)
        other_row |= bool((g[1] - base[1]).abs().max() > tol)
    return same_row, other_row


_RATIOS = torch.cat([torch.logspace(-2, 2, 401, dtype=F64), 1 + 0.005 * torch.arange(-40, 41, dtype=F64)]).unique()


def _boundary(loss: TrainerLoss, sign: int, upward: bool, holds: Callable) -> float | None:
    """The ratio where ``holds(r, w)`` stops holding, walking from r = 1 up (or down), its grid bracket narrowed 2^60-fold; None if it holds throughout."""
    def ok(r: torch.Tensor) -> torch.Tensor:
        new = torch.log(r) - 0.5
        w = loss.alone(new, torch.full_like(r, -0.5), torch.full_like(r, float(sign))) / sign
        return holds(r, w)

    r = _RATIOS[_RATIOS > 1] if upward else _RATIOS[_RATIOS < 1].flip(0)
    flags = ok(r)
    if bool(flags.all()) or not bool(flags[0]):
        return None
    k = int((~flags).nonzero()[0])
    inside, outside = float(r[k - 1]), float(r[k])
    for _ in range(6):  # each round cuts the bracket at 1023 points at once: 6 rounds narrow it by 2^60, as 60 halvings do
        x = torch.linspace(inside, outside, 1025, dtype=F64)[1:-1]
        held = ok(x)
        first = len(x) if bool(held.all()) else int((~held).nonzero()[0])
        inside, outside = (inside if first == 0 else float(x[first - 1])), (outside if first == len(x) else float(x[first]))
    return round(0.5 * (inside + outside), 9)


def _clip_constants(loss: TrainerLoss) -> dict:
    """The clip constants read off the weight: where w = r ends above 1 (A > 0), below 1 and above 1 (A < 0)."""
    is_r = lambda r, w: (w - r).abs() <= 1e-12 * r
    out = {}
    high = _boundary(loss, 1, True, is_r)
    if high is not None:
        out["eps_high"] = round(high - 1, 9)
    low = _boundary(loss, -1, False, is_r)
    if low is not None:
        out["eps_low"] = round(1 - low, 9)
    dual = _boundary(loss, -1, True, lambda r, w: is_r(r, w) | (w.abs() > 1e-12) & (r > 1.0))
    if dual is not None and dual > 1 + out.get("eps_high", 0.28) + 1e-6:
        out["dual_clip"] = dual
    return out


def _clamp_notes(loss: TrainerLoss, notes: list) -> None:
    """A clamp of the log-ratio: the gradient alive at |log r| = 5 and exactly zero at 60, with the loss constant beyond."""
    for direction in (1, -1):
        for sign in (1, -1):
            def grad_at(x: float, sign: int = sign) -> tuple[float, float]:
                old = torch.full((1, 1), -0.5, dtype=F64)
                value, g = loss.grad(old, old + x, torch.full_like(old, float(sign)), torch.ones_like(old))
                return value, float(g.abs().max())

            if grad_at(5.0 * direction)[1] == 0 or grad_at(60.0 * direction)[1] != 0:
                continue
            alive, dead = 5.0, 60.0
            for _ in range(50):
                mid = 0.5 * (alive + dead)
                alive, dead = (mid, dead) if grad_at(mid * direction)[1] != 0 else (alive, mid)
            where = round(direction * dead, 4)
            saturated = grad_at(direction * (dead + 1.0))[0] == grad_at(60.0 * direction)[0]
            notes.append(f"log-ratio clamped at {where:+g}: for A {'>' if sign > 0 else '<'} 0 the gradient vanishes"
                         + (" and the loss stops changing" if saturated else "") + f" beyond log r = {where:+g}")
            break


def _decomposition_gap(loss: TrainerLoss) -> float:
    r"""How far :math:`\partial\mathcal L/\partial\ell_{it} = -\kappa_{it}\,w(r_{it}, A_{it})\,A_{it}` is from holding on a ragged batch.

    Ratios in :math:`[e^{-0.7}, e^{0.7}]` and normal advantages, one per token; :math:`\kappa` measured
    on the same mask at :math:`r = 1`, :math:`A = 1`; :math:`w A` probed with each token alone, relative
    to its own value at :math:`r = 1`, :math:`A = 1` (so a weight that depends on :math:`\ell` is
    compared token by token too).  Relative to the largest gradient.
    """
    _, T, lengths = _DESIGNS[0]
    mask = _mask(T, lengths)
    old = _old(mask.shape, seed=2)
    gen = torch.Generator().manual_seed(3)
    new = old + 1.4 * torch.rand(mask.shape, generator=gen, dtype=F64) - 0.7
    adv = torch.randn(mask.shape, generator=gen, dtype=F64)
    _, at_one = loss.grad(old, old, torch.ones_like(old), mask)
    _, g = loss.grad(old, new, adv, mask)
    alone_at_one = loss.alone(old, old, torch.ones_like(old))
    valid = (mask > 0) & (alone_at_one.abs() > 1e-6)
    predicted = at_one * loss.alone(new, old, adv) / torch.where(valid, alone_at_one, torch.ones_like(old))
    return float((g - predicted)[valid].abs().max()) / max(float(g[valid].abs().max()), 1e-300)


# ------------------------------------------------------------------ the report


@dataclass(frozen=True, repr=False)
class PolicyLossReport:
    r"""What :func:`check_policy_loss` found.

    Attributes
    ----------
    verdict : str
        One of :data:`LOSS_VERDICTS`.
    method : str or None
        The known method of the per-token weight (the token check's name), ``"sequence-level"``, or ``None``.
    policy_gradient : bool or None
        The weight depends on :math:`\ell` only through :math:`r` (``None`` for a sequence-level loss).
    on_policy_at_ratio_one : bool
        At :math:`r = 1` every valid token's gradient is :math:`-\kappa A`.
    sequence_level : bool
        A token's gradient depends on the other tokens of its row (and on no other row).
    aggregation : str
        ``token-mean``, ``seq-mean-token-mean``, ``seq-mean-token-sum``, ``seq-mean-token-sum-norm`` or ``other``.
    scale : float or None
        :math:`s` in :math:`\kappa = s\times` the mode's factor (1 when exactly the mode).
    normaliser : str or None
        :math:`D` of ``seq-mean-token-sum-norm``: a number, or ``"T"`` (the mask's width).
    epsilon : float
        :math:`\varepsilon` of an :math:`n + \varepsilon` denominator (0 when exact).
    length_biased : bool
        :math:`\kappa` differs between rows of different lengths in one batch.
    claimed : str or None
        The ``loss_agg_mode`` passed in ``fixed``, if any.
    clip : tuple
        ``(name, value)`` of the clip constants read off the weight.
    kappa : tuple
        ``(design, row, n_i, B, T, measured kappa, model kappa)`` rows.
    notes : tuple of str
        The edges: clamps, denominators, empty rows, padding.
    token : TokenReport or None
        The token check's report on the per-token weight.
    decomposition_gap : float or None
        The largest relative gap between the gradient on a ragged batch with random ratios and
        advantages and :math:`-\kappa w A` built from the two measurements (``None`` when no
        per-token weight is stated); above ``KAPPA_RTOL`` the loss is not of that form and the
        verdict is ``undecided``.
    reason : str
        One paragraph.
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

    @property
    def claim_holds(self) -> bool:
        """The claimed ``loss_agg_mode`` (if any) is the measured aggregation."""
        return self.claimed is None or self.claimed not in _MODES or self.claimed == self.aggregation

    def holds(self, expect: str | None = None) -> bool:
        """Is the loss what ``expect`` says: a verdict, an aggregation mode, a method's name; ``None``: unbiased or scaled, its claim holding."""
        if expect is None:
            return self.verdict in ("unbiased", "scaled") and self.claim_holds
        if expect in LOSS_VERDICTS:
            return self.verdict == expect and self.claim_holds
        if expect in _MODES:
            return self.aggregation == expect and self.verdict != "biased"
        return self.method is not None and self.method.lower() == expect.lower() and self.verdict != "biased" and self.claim_holds

    def as_dict(self) -> dict:
        """The report as plain JSON-ready values (the token check's report and the kappa table left out)."""
        keep = ("verdict", "method", "policy_gradient", "on_policy_at_ratio_one", "sequence_level", "aggregation", "scale",
                "normaliser", "epsilon", "length_biased", "claimed", "reason")
        return {**{k: getattr(self, k) for k in keep}, "clip": dict(self.clip), "notes": list(self.notes)}

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

    def __repr__(self) -> str:
        return (f"PolicyLossReport(verdict={self.verdict!r}, method={self.method!r}, aggregation={self.aggregation!r}, "
                f"length_biased={self.length_biased}, notes={len(self.notes)})")

    def __str__(self) -> str:
        return "\n".join([self.headline(), self.reason, *("  - " + n for n in self.notes)])

    def _repr_html_(self) -> str:
        token = self.token
        latex = None if token is None or token.derivation is None else "$$" + token.derivation.to_latex() + "$$"
        return report_html(self.headline(), reason=self.reason, notes=self.notes, table=self.table(), latex=latex)


def _verdict(pg, on_policy: bool, fit: _Fit | None, length_biased: bool, leak: bool) -> str:
    if pg is False or not on_policy or leak:
        return "biased"
    if fit is None:
        return "undecided"
    if length_biased:
        return "reweighted"
    return "unbiased" if fit.mode == "seq-mean-token-sum" and abs(fit.scale - 1) <= KAPPA_RTOL and fit.epsilon == 0 else "scaled"


def _claimed_mode(fn: Callable, fixed: dict) -> str | None:
    """The ``loss_agg_mode`` the call claims: passed in ``fixed``, else the function's default."""
    if "loss_agg_mode" in fixed:
        mode = fixed["loss_agg_mode"]
    else:
        try:
            param = inspect.signature(fn).parameters.get("loss_agg_mode")
        except (TypeError, ValueError):
            param = None
        mode = None if param is None else param.default
    return mode if isinstance(mode, str) else None


def check_policy_loss(fn: Callable, *, names: Mapping | None = None, **fixed: object) -> PolicyLossReport:
    r"""Certify a trainer's policy loss as written: its per-token weight, its aggregation :math:`\kappa`, its edges.

    The function is called by keyword on fp64 ``[B, T]`` tensors
    ``old_log_prob, log_prob, advantages, response_mask`` (``names`` maps these
    roles to the function's own argument names), with ``fixed`` passed through;
    its loss is the scalar it returns (or the first element of a tuple).

    .. math::

        \frac{\partial \mathcal L}{\partial \log\pi_{it}} = -\,\kappa_{it}\, w(r_{it}, A_{it})\, A_{it}.

    Parameters
    ----------
    fn : callable
        The trainer's loss, e.g. ``compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config)``.
    names : dict, optional
        ``{"log_prob": "logprobs", ...}``: the function's names for the four roles.
    **fixed
        Passed to every call (``loss_agg_mode="token-mean"``, ``config=...``).

    Returns
    -------
    PolicyLossReport

    Raises
    ------
    TypeError
        ``fn`` not callable, cannot be called on the batch, or returns no scalar tensor.
    ValueError
        Bad ``names``, or a loss without a finite gradient at :math:`r = 1`.

    Examples
    --------
    >>> import torch
    >>> from numeric.variants import check_policy_loss
    >>> def loss_fn(old_log_prob, log_prob, advantages, response_mask):
    ...     ratio = torch.exp(log_prob - old_log_prob)
    ...     per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages)
    ...     return (per_token * response_mask).sum() / response_mask.sum()
    >>> rep = check_policy_loss(loss_fn)
    >>> rep.verdict, rep.method, rep.aggregation, rep.length_biased
    ('scaled', 'PPO', 'token-mean', False)
    >>> dict(rep.clip)
    {'eps_high': 0.28, 'eps_low': 0.2}
    """
    loss = TrainerLoss(fn, names, fixed)
    claimed = _claimed_mode(fn, fixed)
    notes: list[str] = []
    rows = []
    for label, T, lengths in _DESIGNS:
        measured = _measure(loss, label, T, lengths, notes)
        if measured is None:
            raise ValueError(f"fn returns a non-finite loss or gradient at r = 1, A = 1 on the batch {label}")
        rows += measured
    if all(row[-1] == 0 for row in rows):
        raise ValueError("fn has no gradient at r = 1, A = 1 on any valid token: it cannot be a policy loss")
    sign = _sign(rows)
    rows = [(*row[:-1], abs(row[-1])) for row in rows]
    fit = _fit(rows) if sign else None
    first = [row[-1] for row in rows if row[0] == _DESIGNS[0][0]]
    length_biased = max(first) - min(first) > KAPPA_RTOL * max(first)
    leak = any(n.startswith("masked tokens receive") for n in notes)
    same_row, batch_coupled = _row_coupling(loss)
    sequence_level = same_row and not batch_coupled
    token: TokenReport | None = None
    clip: dict = {}
    pg, gap = None, None
    if not (sequence_level or batch_coupled):
        gap = _decomposition_gap(loss)
        if gap > KAPPA_RTOL:
            notes.append(f"the gradient on a batch of random ratios and advantages is not -kappa*w*A (relative gap {gap:.2g}): "
                         "kappa depends on more than the mask (the ratios or the advantages?)")
        else:
            clip = _clip_constants(loss)
            constants = {sym: clip[k] for sym, k in ((_eps_l, "eps_low"), (_eps_h, "eps_high"), (_c, "dual_clip")) if k in clip}
            token = check_token_loss(loss.per_token(), constants=constants)
            pg = token.is_policy_gradient
    on_policy = sign > 0 and (token is None or bool(token.on_policy_at_ratio_one))
    method = "sequence-level" if sequence_level else (token.matches if token is not None else None)
    if batch_coupled:
        notes.append("a token's gradient depends on other rows of the batch: not a per-token loss with a fixed aggregation")
    if fit is not None:
        if fit.epsilon:
            notes.append(f"the denominator is {fit.counts} + eps with eps = {fit.epsilon:.3g}: kappa falls below the exact mode's "
                         f"by a relative eps/({fit.counts}) ({fit.epsilon:.3g} at {fit.counts} = 1)")
        _empty_row_note(loss, fit, notes)
    _clamp_notes(loss, notes)
    _padding_notes(loss, notes)
    mode = "other" if fit is None else fit.mode.removesuffix("/T")
    normaliser = None
    if fit is not None and fit.mode.startswith("seq-mean-token-sum-norm"):
        normaliser = ("T" if abs(fit.scale - 1) <= KAPPA_RTOL else f"T/{fit.scale:.6g}") if fit.mode.endswith("/T") else f"{1 / fit.scale:.6g}"
    table = tuple((*row[:2], row[2], row[3], row[4], row[6], None if fit is None else fit.kappa(*row[2:6])) for row in rows)
    undecidable = batch_coupled or gap is not None and gap > KAPPA_RTOL
    verdict = "undecided" if undecidable and not leak and on_policy else _verdict(pg, on_policy, fit, length_biased, leak)
    report = PolicyLossReport(
        verdict, method, pg, on_policy, sequence_level, mode,
        None if fit is None else (1.0 if normaliser is not None else fit.scale), normaliser,
        0.0 if fit is None else fit.epsilon, length_biased, claimed, tuple(clip.items()), table, tuple(notes), token, gap, "")
    return _with_reason(report)


def _with_reason(rep: PolicyLossReport) -> PolicyLossReport:
    parts = []
    if rep.sequence_level:
        parts.append("A token's gradient depends on the other tokens of its row: a sequence-level loss (as GSPO or GMPO), "
                     "so no per-token weight is stated; at r = 1 its gradient was measured directly.")
    elif rep.token is not None:
        parts.append(f"Per-token weight: {rep.token.reason}.")
    elif rep.decomposition_gap is not None:
        parts.append("The gradient is not kappa (from the mask) times a per-token weight, so no per-token weight is stated and the verdict is undecided.")
    else:
        parts.append("A token's gradient depends on other rows of the batch, so no per-token weight is stated and the verdict is undecided.")
    if not rep.on_policy_at_ratio_one:
        parts.append("At r = 1 the gradient is not -kappa*A on every token: where it is +kappa*A the update points the wrong way (a sign slip?).")
    if rep.policy_gradient is False:
        parts.append("The weight depends on log pi other than through the ratio: not a policy gradient (a missing detach?).")
    if rep.aggregation == "other":
        parts.append("The aggregation factor kappa fits none of token-mean, seq-mean-token-mean, seq-mean-token-sum, "
                     "seq-mean-token-sum-norm (see the table).")
    else:
        scale = "" if rep.scale is None or abs(rep.scale - 1) <= KAPPA_RTOL else f", times {rep.scale:.6g}"
        parts.append(f"Aggregation: {rep.aggregation}{scale}; a token's weight "
                     + ("depends on its row's length (length bias)." if rep.length_biased else "does not depend on its row's length."))
    if not rep.claim_holds:
        parts.append(f"It claims loss_agg_mode={rep.claimed!r} but aggregates as {rep.aggregation}.")
    return dataclasses.replace(rep, reason=" ".join(parts))
