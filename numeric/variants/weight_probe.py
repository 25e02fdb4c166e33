r"""A per-token gradient weight read off by probing: its value at :math:`r = 1`, its two ends, its clip ranges.

A loss's weight :math:`w(r, A; \pi_{\text{old}})` is defined by
:math:`\partial\,\mathrm{loss}/\partial\ell = -\kappa\,w\,A`.  A trainer's
function gives it only by evaluation, so this module reads it the way the
math asks:

* **at the ratio one** (:func:`at_ratio_one`): :math:`w(1, A; \pi_{\text{old}})` on a grid of
  old probabilities :math:`\pi_{\text{old}}`.  A policy gradient has :math:`w(1, A; \pi_{\text{old}}) = 1`
  for every :math:`\pi_{\text{old}}`: then on-policy the update is :math:`-\kappa A\nabla\ell`,
  whatever the weight does elsewhere.  A weight that moves with :math:`\pi_{\text{old}}`
  away from :math:`r = 1` only (clip bounds computed from :math:`\pi_{\text{old}}`,
  as in a trust region on the probability change) is still a policy
  gradient, with a *per-token* clip range.  Where :math:`w(1) \ne 1` the
  measured cause is named: the tie rule of ``torch.minimum``/``maximum``
  (half the gradient to each side of a kink at :math:`r = 1`), a sign, a
  weight of 0, a scale, a dependence on :math:`\pi_{\text{old}}`;
* **at its ends** (:func:`bounded`): :math:`r` from :math:`10^{-12}` to
  :math:`10^{12}`.  :math:`|w|` is unbounded at an end when it keeps growing
  there by a non-shrinking step per two decades (so :math:`r`, :math:`1/r`
  and :math:`\log r` are unbounded; :math:`1 - 1/r` and a saturating gate
  are not);
* **region by region** (:func:`clip_ranges`): for each sign of :math:`A`, the
  runs of :math:`r` on which the weight is 0, the ratio :math:`r`, 1, another
  constant, or something else; each boundary narrowed :math:`2^{60}`-fold
  by bisection.  The runs are what a trainer calls its clip ranges: PPO's
  :math:`[1-\varepsilon_l, 1+\varepsilon_h]` per sign, a dual clip's cap, a
  band that zeros both signs (a rejection or masking band), CISPO's caps.

Every comparison is to a relative tolerance the caller states (the loss's
precision sets it: :mod:`~numeric.variants.precision`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["ELL0", "OLD_PROBS", "ClipRange", "RatioOne", "Run", "at_ratio_one", "bounded", "clip_ranges", "runs"]

F64 = torch.float64
ELL0 = -0.5
r"""The reference old log-probability :math:`\ell_0` at which a weight's table is read."""
OLD_PROBS = (0.001, 0.05, 0.2, math.exp(ELL0), 0.9, 0.999)
r"""The old probabilities :math:`\pi_{\text{old}}` at which a weight is compared with itself."""

WeightFn = Callable[[torch.Tensor, int, torch.Tensor], torch.Tensor]
"""``weight(ratio, sign, ell0) -> w``: the weight at each ratio for A of sign ``sign``, old log-probability ``ell0`` (same shape)."""

_GRID = torch.cat([torch.logspace(-2, 2, 161, dtype=F64), 1 + 0.002 * torch.arange(-100, 101, dtype=F64)]).unique()
_FAR = torch.logspace(-12, 12, 49, dtype=F64)


def _at(weight: WeightFn, ratio: torch.Tensor, sign: int, ell0: float) -> torch.Tensor:
    return weight(ratio, sign, torch.full_like(ratio, ell0))


# ------------------------------------------------------------------ r = 1


@dataclass(frozen=True)
class RatioOne:
    r"""What the weight is at :math:`r = 1`.

    Attributes
    ----------
    values : tuple
        ``(sign, q, w(1, A; q))`` for each sign of :math:`A` and each old probability of :data:`OLD_PROBS`.
    policy_gradient : bool
        :math:`w(1, A; \pi_{\text{old}})` is the same at every :math:`\pi_{\text{old}}` (for each sign).
    on_policy : bool
        :math:`w(1, A; \pi_{\text{old}}) = 1` for every :math:`\pi_{\text{old}}` and both signs.
    cause : str
        Why not, measured: ``""`` (it is 1), ``"tie"``, ``"sign"``, ``"zero"``, ``"scale"`` or ``"old probability"``.
    explanation : str
        One sentence naming the cause with its numbers.
    """

    values: tuple
    policy_gradient: bool
    on_policy: bool
    cause: str
    explanation: str


def at_ratio_one(weight: WeightFn, tol: float) -> RatioOne:
    r""":math:`w(1, A; \pi_{\text{old}})` over :data:`OLD_PROBS`, and the cause when it is not 1.

    The tie rule is told apart by the one-sided limits: where the weight has a
    kink at :math:`r = 1` (limits :math:`w_-\ne w_+`) and
    :math:`w(1) = (w_- + w_+)/2`, autograd split the gradient between the two
    arguments of a ``minimum``/``maximum`` that tie there.
    """
    ells = torch.tensor([math.log(q) for q in OLD_PROBS], dtype=F64)
    values, w1 = [], {}
    for sign in (1, -1):
        w = weight(torch.ones_like(ells), sign, ells)
        w1[sign] = w
        values += [(sign, q, float(x)) for q, x in zip(OLD_PROBS, w)]
    spread = max(float(w.max() - w.min()) for w in w1.values())
    pg = spread <= tol * max(1.0, max(float(w.abs().max()) for w in w1.values()))
    on_policy = pg and all(bool(((w - 1).abs() <= tol).all()) for w in w1.values())
    if on_policy:
        return RatioOne(tuple(values), True, True, "", "")
    if not pg:
        return RatioOne(tuple(values), False, False, "old probability",
                        f"at r = 1 the weight moves with the old probability (from {float(min(w.min() for w in w1.values())):.6g} "
                        f"to {float(max(w.max() for w in w1.values())):.6g}): not a policy gradient; the gradient depends on log pi other "
                        "than through the ratio (a missing detach)")
    sign = next(s for s in (1, -1) if abs(float(w1[s][0]) - 1) > tol)
    at_one = float(w1[sign][0])
    h = 1e-6
    below, above = (float(_at(weight, torch.tensor([1.0 + d], dtype=F64), sign, math.log(OLD_PROBS[0]))[0]) for d in (-h, h))
    a = "A > 0" if sign > 0 else "A < 0"
    if abs(below - above) > 1e-3 and abs(at_one - 0.5 * (below + above)) <= 1e-3 * max(1.0, abs(below), abs(above)):
        return RatioOne(tuple(values), True, False, "tie",
                        f"for {a} the weight is {at_one:.6g} exactly at r = 1 but {below:.6g} just below and {above:.6g} just above: "
                        "a kink at r = 1 where torch's minimum/maximum split the gradient between two tied arguments (the tie rule); "
                        "move the kink off r = 1 or break the tie")
    if abs(at_one) <= tol:
        return RatioOne(tuple(values), True, False, "zero", f"for {a} the weight is 0 at r = 1: the token is silenced on policy")
    if abs(at_one + 1) <= tol:
        return RatioOne(tuple(values), True, False, "sign",
                        f"for {a} the weight is -1 at r = 1: a sign slip, the update points the wrong way (the loss's minus sign is "
                        "missing or doubled)")
    return RatioOne(tuple(values), True, False, "scale", f"for {a} the weight is {at_one:.6g} at r = 1, not 1")


# ------------------------------------------------------------------ the two ends


def bounded(weight: WeightFn, tol: float) -> dict:
    r"""``{+1: bool, -1: bool}``: is :math:`|w|` bounded over :math:`r \in (0, \infty)` for each sign of :math:`A`?

    Read at :math:`\ell_0 =` :data:`ELL0` on 49 ratios from :math:`10^{-12}` to
    :math:`10^{12}`.  At each end the last three steps of two decades each are
    compared: :math:`|w|` is unbounded there when it is not finite, or when
    it still grows by more than the tolerance in the last step and that step
    is at least half the one before (a bounded weight's steps shrink, or
    vanish).
    """
    out = {}
    for sign in (1, -1):
        w = _at(weight, _FAR, sign, ELL0).abs()
        ok = True
        for end in (w[:9].flip(0), w[-9:]):  # from r = 1e-8 down to 1e-12, and from 1e8 up to 1e12
            if not bool(torch.isfinite(end).all()):
                ok = False
                continue
            steps = end[4::2][1:] - end[4::2][:-1]  # two decades a step: 1e-8 -> 1e-10 -> 1e-12
            last, before = float(steps[-1]), float(steps[-2])
            ok &= not (last > tol * max(1.0, float(end.max())) and last >= 0.5 * before)
        out[sign] = ok
    return out


# ------------------------------------------------------------------ runs and clip ranges

FORMS = ("zero", "ratio", "one", "constant", "other")
"""What the weight is on a run of ratios: 0, :math:`r`, 1, another constant, or none of these."""


@dataclass(frozen=True)
class Run:
    """A maximal run of ratios ``[low, high]`` on which the weight has one form (``value``: the constant, if one)."""

    form: str
    low: float
    high: float
    value: float | None = None


def _forms(r: torch.Tensor, w: torch.Tensor, tol: float) -> list:
    """Each point's form; a point of none of 0, r, 1 that equals a neighbour of that kind is ``constant``."""
    forms = ["zero" if abs(y) <= tol else "ratio" if abs(y - x) <= tol * x else "one" if abs(y - 1) <= tol else "other"
             for x, y in zip(r.tolist(), w.tolist())]
    ys = w.tolist()
    flat = lambda k, j: 0 <= j < len(ys) and forms[j] in ("other", "constant") and abs(ys[k] - ys[j]) <= tol * max(1.0, abs(ys[k]))
    return [("constant" if f == "other" and (flat(k, k - 1) or flat(k, k + 1)) else f) for k, f in enumerate(forms)]


def _merge(w: torch.Tensor, forms: list, tol: float) -> list:
    """``[form, first, last]`` runs of equal form (a constant run ends where its value changes)."""
    out: list = []
    for k, f in enumerate(forms):
        same = out and out[-1][0] == f and (f != "constant" or abs(float(w[k] - w[out[-1][1]])) <= tol * max(1.0, abs(float(w[k]))))
        if same:
            out[-1][2] = k
        else:
            out.append([f, k, k])
    return out


def _holds(form: str, value: float | None, r: torch.Tensor, w: torch.Tensor, tol: float) -> torch.Tensor:
    if form == "zero":
        return w.abs() <= tol
    if form == "ratio":
        return (w - r).abs() <= tol * r
    if form == "one":
        return (w - 1).abs() <= tol
    if form == "constant" and value is not None:
        return (w - value).abs() <= tol * max(1.0, abs(value))
    return torch.zeros_like(w, dtype=torch.bool)


def _edge(weight: WeightFn, sign: int, ell0: float, inside: float, outside: float, form: str, value, tol: float) -> float:
    """Where ``form`` stops holding between ``inside`` (it holds) and ``outside`` (it does not): 6 rounds of 1023 points, 2^60-fold."""
    for _ in range(6):
        x = torch.linspace(inside, outside, 1025, dtype=F64)[1:-1]
        held = _holds(form, value, x, _at(weight, x, sign, ell0), tol)
        first = len(x) if bool(held.all()) else int((~held).nonzero()[0])
        inside = inside if first == 0 else float(x[first - 1])
        outside = outside if first == len(x) else float(x[first])
    return 0.5 * (inside + outside)


def runs(weight: WeightFn, sign: int, tol: float, ell0: float = ELL0) -> tuple:
    r"""The runs of the weight over :math:`r \in [10^{-2}, 10^2]` for :math:`A` of sign ``sign``, each edge narrowed by bisection.

    Each edge is found by the run on its side nearer :math:`r = 1` (the other
    run's form if that one is ``other``), so it is read to about 1e-9
    relative; the first run starts at 0 and the last ends at infinity (the
    grid's reach).
    """
    r = _GRID
    w = _at(weight, r, sign, ell0)
    merged = _merge(w, _forms(r, w, tol), tol)
    one = int((r - 1).abs().argmin())
    values = [float(w[b if b < one else a]) if f == "constant" else None for f, a, b in merged]
    bounds = [0.0]
    for i in range(len(merged) - 1):
        b0, a1 = merged[i][2], merged[i + 1][1]
        order = [(i, b0, a1), (i + 1, a1, b0)] if b0 >= one else [(i + 1, a1, b0), (i, b0, a1)]
        edge = 0.5 * float(r[b0] + r[a1])
        for k, inside, outside in order:
            if merged[k][0] != "other":
                edge = _edge(weight, sign, ell0, float(r[inside]), float(r[outside]), merged[k][0], values[k], tol)
                break
        pair = {merged[i][0], merged[i + 1][0]}
        cap = values[i] if merged[i][0] == "constant" else values[i + 1]
        if pair == {"ratio", "constant"} and cap is not None and abs(edge - cap) <= max(1e-7, 16 * tol) * cap:
            edge = cap  # w = r meets the cap where r equals it: the bisection at a tolerance stops up to tol * r past the kink
        bounds.append(edge)
    bounds.append(math.inf)
    return tuple(Run(f, bounds[i], bounds[i + 1], values[i]) for i, (f, _, _) in enumerate(merged))


@dataclass(frozen=True)
class ClipRange:
    r"""The clip range of one sign of :math:`A`: where the weight keeps its in-band form around :math:`r = 1`, and what it is beyond.

    Attributes
    ----------
    sign : int
        +1 for :math:`A > 0`, -1 for :math:`A < 0`.
    form : str
        The weight at and around :math:`r = 1`: ``"ratio"`` (:math:`w = r`), ``"one"``, or ``"other"`` (no clip range is read).
    low, high : float or None
        The ratios where it stops (``None``: it never does on :math:`[10^{-2}, 10^{2}]`).
    below, above : str
        What the weight is beyond each end: ``"zero"`` (silenced), ``"capped"`` (a constant), ``"ratio"``, ``"other"``, or ``""``.
    per_token : tuple
        ``(q, low(q), high(q))`` at each old probability of :data:`OLD_PROBS` when the ends move with :math:`\pi_{\text{old}}`; ``()`` when they do not.
    runs : tuple
        Every :class:`Run` at :math:`\ell_0 =` :data:`ELL0`.
    """

    sign: int
    form: str
    low: float | None
    high: float | None
    below: str
    above: str
    per_token: tuple
    runs: tuple

    def describe(self) -> str:
        """One line: ``A > 0: w = r on [0.8, 1.28], 0 above``."""
        a = "A > 0" if self.sign > 0 else "A < 0"
        w = {"ratio": "w = r", "one": "w = 1"}.get(self.form)
        if w is None:
            return f"{a}: no clip range (the weight is neither r nor 1 around r = 1)"
        lo = "0" if self.low is None else f"{self.low:.6g}"
        hi = "inf" if self.high is None else f"{self.high:.6g}"
        beyond = [f"{_beyond(self.below)} below" for _ in [0] if self.low is not None] + \
                 [f"{_beyond(self.above)} above" for _ in [0] if self.high is not None]
        moving = " (per token: the ends move with pi_old)" if self.per_token else ""
        return f"{a}: {w} on [{lo}, {hi}]" + (", " + ", ".join(beyond) if beyond else "") + moving


def _beyond(what: str) -> str:
    return {"zero": "0", "capped": "capped"}.get(what, what)


def _clip_of(sign: int, found: tuple) -> tuple:
    """``(form, low, high, below, above)`` of the run around r = 1; ``"other"`` when there is no clean one.

    A clip range is a run of ``ratio`` or ``one`` around :math:`r = 1`, wider than 1e-6, with an end beyond
    which the weight takes a clean form (0, a constant, ...), or with no end at all: a smooth weight (SAPO's
    gate) equals 1 only at a point and has no clip range.
    """
    one = next((k for k, run in enumerate(found) if run.low <= 1.0 <= run.high), None)
    if one is None or found[one].form not in ("ratio", "one") or not found[one].high - found[one].low > 1e-6:
        return "other", None, None, "", ""
    run = found[one]
    beyond = lambda k: "" if not 0 <= k < len(found) else {"zero": "zero", "constant": "capped", "one": "capped"}.get(found[k].form, found[k].form)
    low = None if one == 0 else run.low
    high = None if one == len(found) - 1 else run.high
    below, above = beyond(one - 1), beyond(one + 1)
    if (low is not None or high is not None) and {below, above} <= {"other", ""}:
        return "other", None, None, "", ""
    return run.form, low, high, below, above


def clip_ranges(weight: WeightFn, tol: float) -> tuple[ClipRange, ClipRange]:
    r"""The clip range of each sign of :math:`A`, and whether its ends move with the old probability.

    Read at :math:`\ell_0 =` :data:`ELL0`; then at every old probability of
    :data:`OLD_PROBS`: where the ends differ (beyond about 1e-9 relative),
    ``per_token`` lists them, so a bound computed from :math:`\pi_{\text{old}}`
    (a trust region on the probability change, a dynamic clip) is reported
    as the function it is, on the grid.
    """
    out = []
    for sign in (1, -1):
        found = runs(weight, sign, tol)
        form, low, high, below, above = _clip_of(sign, found)
        per_token: list = []
        if form != "other":
            for q in OLD_PROBS:
                _, lo_q, hi_q, _, _ = _clip_of(sign, runs(weight, sign, tol, math.log(q)))
                per_token.append((q, lo_q, hi_q))
            same = all(_close(lo_q, low, tol) and _close(hi_q, high, tol) for _, lo_q, hi_q in per_token)
            per_token = [] if same else per_token
        out.append(ClipRange(sign, form, low, high, below, above, tuple(per_token), found))
    return out[0], out[1]


def _close(a: float | None, b: float | None, tol: float) -> bool:
    """Two ends equal to the resolution of a bisection at the tolerance (an end read at another pi_old rounds differently)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= max(1e-7, 16 * tol) * max(1.0, abs(b))
