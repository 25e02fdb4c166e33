r"""A trainer's policy loss as written: its per-token weight, its aggregation, its precision, its edges.

A trainer's loss takes ``[B, T]`` batches and returns one scalar,

.. math::

    \mathcal L = \sum_{i,t} m_{it}\,\kappa_{it}\,\ell_{it}(r_{it}, A_{it}),
    \qquad
    \frac{\partial \mathcal L}{\partial \log\pi_{it}} = -\,\kappa_{it}\, w(r_{it}, A_{it}; \pi_{\text{old}})\, A_{it},

where :math:`\kappa_{it}` is the factor the aggregation gives token :math:`t` of
row :math:`i` and :math:`w` is the per-token gradient weight.
:func:`check_policy_loss` measures all of it by autograd, in this order:

1. the precision the loss computes in, and from it the tolerance of every
   comparison below (:mod:`~numeric.variants.precision`);
2. :math:`\kappa` on designed masks at :math:`r = 1`, :math:`A = 1`, named
   among the aggregation modes or described by the power law it follows
   (:mod:`~numeric.variants.kappa`);
3. whether a token's gradient depends on the other tokens of its row (a
   sequence-level loss, as GSPO) or of other rows (then no per-token weight);
4. the weight, each token alone in a row of its own so :math:`\kappa` divides
   out (:mod:`~numeric.variants.weight_probe`): its value at :math:`r = 1`
   across old probabilities (a policy gradient has :math:`w(1) = 1` for
   every :math:`\pi_{\text{old}}`; clip bounds computed from
   :math:`\pi_{\text{old}}` keep it one), its ends, the clip range of each
   sign of :math:`A` (per token where the ends move with
   :math:`\pi_{\text{old}}`; a band that zeros both signs named as such), and
   the known method whose weight it is
   (:func:`~numeric.variants.token_report_from_callable`);
5. the edges: an all-masked row, a clamped log-ratio;
6. the trainers' questions (:data:`~numeric.variants.questions.QUESTION_FUNCTIONS`):
   do the mask's numerator and denominator agree, is a sequence weighted per
   token or per sequence, which divergence a KL term descends, is a rollout
   correction detached and applied once, how a sequence weight spreads with
   length, and whether NaN, infinities or an overflowing ratio in masked slots
   poison the loss or its gradient.

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

import numpy as np
import sympy as sp
import torch

from derivations.gradient_weights import c as _c
from derivations.gradient_weights import eps_h as _eps_h
from derivations.gradient_weights import eps_l as _eps_l
from derivations.methods import METHODS, PARAMETER_SYMBOLS, PENALISED, b_h, b_l, c_is, delta_band, tv_h, tv_l
from derivations.variants import TokenReport, known_label

from .execution import ExecutionReport, check_loss_execution
from .kappa import DESIGNS, EMPTY_ROW, Fit, fit, kappa_rows, mask_of, old_log_probs, power_law
from .loss_report import LOSS_VERDICTS, PolicyLossReport
from .precision import PRECISIONS, loss_precision
from .questions import QUESTION_FUNCTIONS
from .token_callables import token_report_from_callable
from .trainer_loss import TrainerLoss
from .weight_probe import ELL0, ClipRange, at_ratio_one, clip_ranges

__all__ = ["KAPPA_RTOL", "LOSS_VERDICTS", "PolicyLossReport", "check_policy_loss"]

F64 = torch.float64
KAPPA_RTOL = 1e-9
"""Relative tolerance of the aggregation model fitted to the measured :math:`\\kappa` in float64 (a coarser precision widens it)."""


# ------------------------------------------------------------------ edges


def _empty_row_note(loss: TrainerLoss, fit: Fit, notes: list, tol: float) -> None:
    label, T, lengths = EMPTY_ROW
    mask = mask_of(T, lengths)
    old = old_log_probs(mask.shape)
    value, g = loss.grad(old, old, torch.ones_like(old), mask)
    if not (math.isfinite(value) and bool(torch.isfinite(g).all())):
        notes.append("an all-masked row makes the loss or its gradient non-finite (0/0)")
        return
    N, B = int(sum(lengths)), len(lengths)
    measured = [abs(float(g[i, t])) for i, n in enumerate(lengths) for t in range(n)]
    ns = [n for n in lengths for _ in range(n)]
    counted = [fit.kappa(n, B, T, N) for n in ns]
    excluded = [fit.kappa(n, B - 1, T, N) for n in ns]
    close = lambda a, b: all(abs(x - y) <= tol * abs(y) for x, y in zip(a, b))
    if close(counted, excluded) and close(measured, counted):
        notes.append("an all-masked row does not change the other rows' kappa")
    elif close(measured, counted):
        notes.append("an all-masked row is counted in B: it shrinks the other rows' kappa by (B - 1)/B")
    elif close(measured, excluded):
        notes.append("an all-masked row is not counted in B (rows with a token only)")
    else:
        notes.append("an all-masked row changes the other rows' kappa, neither as one more row nor as none")


def _clamp_notes(loss: TrainerLoss, notes: list) -> None:
    """A clamp of the log-ratio: the gradient alive at |log r| = 5 and exactly zero at 60, with the loss constant beyond."""
    for direction in (1, -1):
        for sign in (1, -1):
            def grad_at(x: float, sign: int = sign) -> tuple[float, float]:
                old = torch.full((1, 1), ELL0, dtype=F64)
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


# ------------------------------------------------------------------ structure: rows, the decomposition, the weight


def _row_coupling(loss: TrainerLoss, tol: float) -> tuple[bool, bool]:
    """(sequence-level, batch-coupled): does a token's gradient change when another token of its row (of another row) moves?

    Moves of 0.3 in the log-ratio find a row's ratio (GSPO, GMPO); moves of 3 with either sign of the advantage also find a row
    that gates its tokens (OPSM drops a row of negative advantage whose mean log-ratio fell; seq-mask-TIS one whose geometric-mean
    ratio left its band), which a small move inside the gate does not change.  Only the small moves decide batch coupling.
    """
    mask = mask_of(4, (3, 4))
    old = old_log_probs(mask.shape, seed=1)
    same_row, other_row = False, False
    for sign, steps in ((1, (0.3, -0.3, 3.0, -3.0)), (-1, (3.0, -3.0))):
        adv = torch.full_like(old, float(sign))
        _, base = loss.grad(old, old, adv, mask)
        limit = max(1e-9, 8 * tol) * float(base.abs().max())
        for step in steps:
            new = old.clone()
            new[0, 1] += step
            _, g = loss.grad(old, new, adv, mask)
            same_row |= bool((g[0, [0, 2]] - base[0, [0, 2]]).abs().max() > limit)
            if abs(step) < 1:
                other_row |= bool((g[1] - base[1]).abs().max() > limit)
    return same_row, other_row


def _decomposition_gap(loss: TrainerLoss) -> float:
    r"""How far :math:`\partial\mathcal L/\partial\ell_{it} = -\kappa_{it}\,w(r_{it}, A_{it})\,A_{it}` is from holding on a ragged batch.

    Ratios in :math:`[e^{-0.7}, e^{0.7}]` and normal advantages, one per token; :math:`\kappa` measured
    on the same mask at :math:`r = 1`, :math:`A = 1`; :math:`w A` probed with each token alone, relative
    to its own value at :math:`r = 1`, :math:`A = 1` (so a weight that depends on :math:`\ell` is
    compared token by token too).  Relative to the largest gradient.
    """
    _, T, lengths = DESIGNS[0]
    mask = mask_of(T, lengths)
    old = old_log_probs(mask.shape, seed=2)
    gen = torch.Generator().manual_seed(3)
    new = old + 1.4 * torch.rand(mask.shape, generator=gen, dtype=F64) - 0.7
    adv = torch.randn(mask.shape, generator=gen, dtype=F64)
    _, at_one = loss.grad(old, old, torch.ones_like(old), mask)
    _, g = loss.grad(old, new, adv, mask)
    alone_at_one = loss.alone(old, old, torch.ones_like(old))
    valid = (mask > 0) & (alone_at_one.abs() > 1e-6)
    predicted = at_one * loss.alone(new, old, adv) / torch.where(valid, alone_at_one, torch.ones_like(old))
    return float((g - predicted)[valid].abs().max()) / max(float(g[valid].abs().max()), 1e-300)


def _penalty(loss: TrainerLoss, tol: float) -> str | None:
    r"""An advantage-free term: the gradient at :math:`A = 0`, :math:`\kappa\,p(r)`, described; ``None`` when there is none.

    A loss :math:`-\kappa\,(w A\,\ell) + \kappa\,\tau\,\phi(r)` (a KL-like penalty to the sampler, as prime-rl's
    :math:`\tau(\log r)^2`) has :math:`\partial\mathcal L/\partial\ell = -\kappa(wA - p)` with
    :math:`p = \tau\,r\phi'(r)`; the weight is read with it subtracted.  :math:`p \propto \log r` is named.
    """
    ratios = torch.tensor([0.5, 0.8, 1.25, 2.0], dtype=F64)
    ell0 = torch.full_like(ratios, ELL0)
    p = -loss.alone(ell0 + torch.log(ratios), ell0, torch.zeros_like(ratios))
    if float(p.abs().max()) <= tol:
        return None
    per_log = p / torch.log(ratios)
    if _k2_tau(per_log, tol) is not None:
        tau = _k2_tau(per_log, tol)
        return (f"an advantage-free term: its gradient at A = 0 is kappa * 2 tau log r with tau = {tau:.6g}, the gradient of "
                f"tau (log r)^2 (a k2-like penalty toward the sampler, on every valid token); the weight is read without it")
    return ("an advantage-free term: its gradient at A = 0 is kappa * p(r) with p = " +
            ", ".join(f"{float(v):.4g} at r = {float(x):g}" for x, v in zip(ratios, p)) + "; the weight is read without it")


def _k2_tau(per_log: torch.Tensor, tol: float) -> float | None:
    r""":math:`\tau` when the penalty's gradient is :math:`2\tau\log r` at every probed ratio (``per_log`` is :math:`p/\log r`)."""
    if float(per_log.max() - per_log.min()) <= 10 * tol * float(per_log.abs().max()):
        return float(per_log.mean()) / 2
    return None


def _penalty_tau(loss: TrainerLoss, tol: float) -> float | None:
    r"""The :math:`\tau` of an advantage-free :math:`\tau(\log r)^2` (:func:`_penalty`), or ``None``."""
    ratios = torch.tensor([0.5, 0.8, 1.25, 2.0], dtype=F64)
    ell0 = torch.full_like(ratios, ELL0)
    p = -loss.alone(ell0 + torch.log(ratios), ell0, torch.zeros_like(ratios))
    return None if float(p.abs().max()) <= tol else _k2_tau(p / torch.log(ratios), tol)


def _weight(loss: TrainerLoss, penalised: bool) -> Callable:
    """The weight ``(ratio, sign, ell0) -> w`` of the trainer's loss, each token alone in its row (an advantage-free term subtracted)."""
    def weight(ratio: torch.Tensor, sign: int, ell0: torch.Tensor) -> torch.Tensor:
        new = ell0 + torch.log(ratio)
        w = loss.alone(new, ell0, torch.full_like(ratio, float(sign)))
        if penalised:
            w = w - loss.alone(new, ell0, torch.zeros_like(ratio))
        return w / sign
    return weight


def _without_penalty(loss: TrainerLoss) -> Callable:
    """The per-token loss of :meth:`TrainerLoss.per_token` with the advantage-free term's gradient taken out."""
    def per_token(log_prob, old_log_prob, advantage):
        adv = torch.as_tensor(advantage, dtype=F64)
        w_a = loss.alone(log_prob, old_log_prob, adv) - loss.alone(log_prob, old_log_prob, torch.zeros_like(adv))
        return -w_a * log_prob
    return per_token


def _digits(tol: float) -> int:
    """Decimals a constant read to the relative ``tol`` is reported with (9 in float64)."""
    return max(2, min(9, int(-math.log10(tol))))


def _named(ranges: tuple[ClipRange, ClipRange], tol: float) -> tuple[dict, list]:
    r"""The clip constants the ranges imply, by the names the trainers use, and notes on what they mean.

    ``eps_high`` where :math:`w = r` ends above 1 for :math:`A > 0`; ``eps_low`` where it ends below 1 for
    :math:`A < 0`; ``dual_clip`` where it ends above :math:`1 + \varepsilon_h` for :math:`A < 0` only; and a
    *band* (``band_low``, ``band_high``) where the weight is 0 beyond the same ratio for both signs: a
    rejection or masking band, not a clip of one sign.  Ends that move with :math:`\pi_{\text{old}}` give no
    constants: the ranges state them per token.
    """
    pos, neg = ranges
    digits = _digits(tol)
    same = lambda a, b: a is not None and b is not None and abs(a - b) <= max(1e-7, 4 * tol) * max(1.0, abs(b))
    out: dict = {}
    notes: list = []
    if pos.per_token or neg.per_token:
        moving = [c for c in ranges if c.per_token]
        cap = neg.high if neg.form == "ratio" and neg.above == "capped" and not any(hi != neg.high for _, _, hi in neg.per_token if hi is not None) else None
        if cap is not None:  # a truncated ratio (verl's DPPO): w = r up to C, then C; the trust region's cut lies elsewhere
            out["is_cap"] = round(cap, digits)
            notes.append(f"the weight is capped at {cap:.6g} for both signs of A (a truncated ratio min(r, C), C = {cap:.6g})")
        found = {c.sign: _probability_change(c, tol, cap=cap) for c in moving}
        if not all(d is not None for d in found.values()):
            kl = {c.sign: _probability_change(c, tol, cap=cap, statistic=_binary_kl) for c in moving}
            read = {s: d for s, d in kl.items() if d is not None}
            if len(read) == len(kl):
                out.update({("kl_delta_high" if s > 0 else "kl_delta_low"): round(d, digits) for s, d in read.items()})
                notes.append("the clip range is a trust region on the binary KL of the old and new probabilities (a per-token bound): "
                             + "; ".join(f"for A {'> 0' if s > 0 else '< 0'}, KL <= {d:.6g}" for s, d in read.items()) + " (as DPPO's binary KL mask)")
        delta = {s: d for s, d in found.items() if d is not None}
        band = [_probability_change(c, tol, "both") for c in ranges]
        if band[0] is not None and band[1] is not None and abs(band[0] - band[1]) <= max(1e-7, 10 * tol) * band[0]:
            out["band_delta"] = round(band[0], digits)
            notes.append(f"a band on the probability change for both signs of A: |pi - pi_old| <= {band[0]:.6g} (the per-token bounds "
                         "1 +- delta/pi_old), a masking band, not a clip of one sign (as prime-rl's ipo)")
        elif len(delta) == len(found):
            out.update({("delta_high" if s > 0 else "delta_low"): round(d, digits) for s, d in delta.items()})
            notes.append("the clip range is a trust region on the probability change (a per-token bound 1 +- delta/pi_old): "
                         + "; ".join(f"for A {'> 0, pi - pi_old <=' if s > 0 else '< 0, pi_old - pi <='} {d:.6g}" for s, d in delta.items())
                         + " (as DPPO's binary TV mask)")
        notes.append("the clip range moves with pi_old (per-token bounds): " + "; ".join(
            f"{'A > 0' if c.sign > 0 else 'A < 0'} at pi_old = " + ", ".join(
                f"{q:.3g}: [{'0' if lo is None else f'{lo:.6g}'}, {'inf' if hi is None else f'{hi:.6g}'}]" for q, lo, hi in c.per_token)
            for c in moving))
        return out, notes
    band_high = pos.above == neg.above == "zero" and same(pos.high, neg.high)
    band_low = pos.below == neg.below == "zero" and same(pos.low, neg.low)
    if band_high or band_low:
        if band_low and neg.low is not None:
            out["band_low"] = round(neg.low, digits)
        if band_high and pos.high is not None:
            out["band_high"] = round(pos.high, digits)
        notes.append("a band that zeros the weight for both signs of A (a rejection or masking band, as IcePop's or a "
                     "rollout-anchored mask), not a clip of one sign: tokens with r outside it get no gradient")
    if pos.form == "ratio" and pos.high is not None and not band_high:
        out["eps_high"] = round(pos.high - 1, digits)
    if neg.form == "ratio" and neg.low is not None and not band_low:
        out["eps_low"] = round(1 - neg.low, digits)
    if neg.form == "ratio" and neg.high is not None and neg.above == "zero" and not band_high:
        if pos.high is not None and neg.high > pos.high * (1 + 1e-6):
            out["dual_clip"] = round(neg.high, digits)
            if pos.above == "zero":
                notes.append(f"A < 0 is cut above r = {neg.high:.6g}: a dual clip, or a rejection at that ratio for both signs "
                             f"(for A > 0 the clip at {pos.high:.6g} already silences every larger ratio)")
    if pos.form == "ratio" and pos.low is not None and pos.below == "capped" and neg.below == "capped" and same(pos.low, neg.low):
        out.setdefault("eps_low", round(1 - pos.low, digits))
    return out, notes


def _binary_kl(q: float, ratio: float) -> float:
    r"""DPPO's binary KL of the old probability :math:`q` and the new :math:`qr`, with its :math:`10^{-8}` guards."""
    p = q * ratio
    return -q * math.log(ratio) + (1 - q) * math.log((1 - q + 1e-8) / (1 - p + 1e-8)) if p < 1 + 1e-8 else math.inf


def _probability_change(c: ClipRange, tol: float, ends: str = "one", cap: float | None = None,
                        statistic: Callable | None = None) -> float | None:
    r""":math:`\delta` when the sign's cut is :math:`|r - 1|\,\pi_{\text{old}} = \delta` at every old probability where it is read.

    ``ends="one"``: the cut in the advantage's direction only (above 1 for :math:`A > 0`, below for :math:`A < 0`);
    ``"both"``: a band cut at both ends by the same :math:`\delta`.  An end at ``cap`` (a truncated ratio's :math:`C`) is not a cut.
    ``statistic(q, r)``: the cut is where it equals :math:`\delta` instead (:func:`_binary_kl`: DPPO's KL mask).
    """
    at_cap = lambda x: cap is not None and abs(x - cap) <= max(1e-7, 16 * tol) * cap  # noqa: E731  (an end where the cap, not the cut, is)
    if ends == "one" and ((c.sign > 0 and c.low is not None) or (c.sign < 0 and c.high is not None and not at_cap(c.high))):
        return None
    sides = ("high", "low") if ends == "both" else (("high",) if c.sign > 0 else ("low",))
    gaps = [(q, hi - 1) for q, lo, hi in c.per_token if "high" in sides and hi is not None and not at_cap(hi)] + \
           [(q, 1 - lo) for q, lo, hi in c.per_token if "low" in sides and lo is not None]
    if len(gaps) < 2 or ends == "both" and (c.low is None or c.high is None):
        return None
    deltas = [q * gap for q, gap in gaps] if statistic is None else [statistic(q, 1 + gap if c.sign > 0 else 1 - gap) for q, gap in gaps]
    return deltas[0] if max(deltas) - min(deltas) <= max(1e-7, 10 * tol) * max(deltas) else None


ROW_GATED = "token ratio, gated by its row"
"""What :func:`_sequence_ratio` reports when each token keeps its own ratio and the row only decides which tokens count (OPSM, seq-mask-TIS)."""


def _row_gated(loss: TrainerLoss, tol: float) -> bool:
    r"""A row of two tokens at log-ratios :math:`\pm 0.1` (geometric mean 1): does each token keep its own ratio's weight?

    A sequence ratio gives both the row's weight (at the geometric mean 1: the same); a row-gated token ratio gives each
    :math:`e^{\pm 0.1}`, relative to :math:`r = 1`.
    """
    old = torch.full((1, 2), ELL0, dtype=F64)
    mask, adv = torch.ones_like(old), torch.ones_like(old)
    _, g0 = loss.grad(old, old, adv, mask)
    _, g = loss.grad(old, old + torch.tensor([[0.1, -0.1]], dtype=F64), adv, mask)
    if bool((g0 == 0).any()):
        return False
    w = (g / g0)[0]
    return all(abs(float(w[k]) - math.exp(x)) <= 10 * tol * math.exp(x) for k, x in ((0, 0.1), (1, -0.1)))


def _sequence_ratio(loss: TrainerLoss, weight: Callable, tol: float) -> str | None:
    r"""Which ratio a sequence-level loss reads: a row of two tokens at the same log-ratio :math:`x` has geometric mean :math:`e^x`, product :math:`e^{2x}`.

    The first token's weight, relative to its value at :math:`x = 0`, is compared with the one-token
    weight (a row of one token: its ratio is the sequence's) at :math:`e^{x}` and at :math:`e^{2x}`.  A loss whose tokens keep their
    own ratios, the row deciding only which count (:func:`_row_gated`), reads :data:`ROW_GATED`.
    """
    if _row_gated(loss, tol):
        return ROW_GATED
    for x in (2e-4, 0.05):
        one = lambda ratio: float(weight(torch.tensor([ratio], dtype=F64), 1, torch.tensor([ELL0], dtype=F64))[0])
        old = torch.full((1, 2), ELL0, dtype=F64)
        mask = torch.ones_like(old)
        _, g0 = loss.grad(old, old, torch.ones_like(old), mask)
        _, gx = loss.grad(old, old + x, torch.ones_like(old), mask)
        if float(g0[0, 0]) == 0:
            return None
        seen = float(gx[0, 0] / g0[0, 0])
        geo, prod = one(math.exp(x)), one(math.exp(2 * x))
        if abs(geo - prod) <= 100 * tol * max(1.0, abs(geo)):
            continue
        if abs(seen - geo) <= 10 * tol * max(1.0, abs(geo)):
            return "geometric mean"
        if abs(seen - prod) <= 10 * tol * max(1.0, abs(prod)):
            return "product"
        return None
    return None


_SEQUENCE_FORMS: dict[tuple[str, str | None], str] = {("ppo", "geometric mean"): "gspo", ("cispo", "geometric mean"): "cispo_seq", ("cispo_cap", "geometric mean"): "cispo_seq",
                   ("sapo", "geometric mean"): "sapo_seq", ("ppo", "product"): "ppo_product", ("icepop", ROW_GATED): "seq_mask_tis",
                   ("ppo", ROW_GATED): "opsm"}
"""A per-token form whose weight, read on the row's ratio (its geometric mean, its product) or on the token's own ratio gated by its row,
is the registry's sequence-level method."""


def _sequence_method(token: TokenReport | None, ratio: str | None, aggregation: str | None = None) -> str:
    r"""The registry's sequence-level method whose weight the loss has on rows of one token, read with the row's ratio it reads.

    GSPO's sequence and token forms have the same gradient when the advantage is constant over a row (an outcome
    advantage), so a function names the method, ``"GSPO"``, not the form; GSPO whose rows weigh their length
    (seq-mean-token-sum's :math:`\kappa = 1/B` on each token) is LUSPO.  A token ratio gated by a row statistic reads as OPSM
    (PPO's weight on a row of one token, OPSM's cut below 1 read as its lower clip there) or as seq-mask-TIS (a band).
    """
    forms = () if token is None else token.same_weight
    known = next((_SEQUENCE_FORMS[f, ratio] for f in forms if (f, ratio) in _SEQUENCE_FORMS), None)
    if known is None:
        what = f"the weight of {token.matches}" if token is not None and token.matches else "no known weight"
        return f"sequence-level ({what}" + (f", on the {ratio} of the token ratios)" if ratio else ")")
    if known == "gspo":
        return "LUSPO" if aggregation == "seq-mean-token-sum" else "GSPO"
    return METHODS[known].label


_CLIP_SYMBOLS = {"eps_low": _eps_l, "eps_high": _eps_h, "dual_clip": _c, "band_low": b_l, "band_high": b_h, "delta_low": tv_l,
                 "delta_high": tv_h, "kl_delta_low": tv_l, "kl_delta_high": tv_h, "band_delta": delta_band, "is_cap": c_is}
"""The registry's symbol of each clip constant the ranges name (:func:`_named`)."""


def _constants(clip: dict) -> dict:
    """The registry's constants for the named clip ranges; a band on the ratio also as SkyRL's rollout band's
    :math:`1 - \varepsilon_l, 1 + \varepsilon_h` (an open band and a closed one differ at their two edges only)."""
    out = {_CLIP_SYMBOLS[k]: v for k, v in clip.items() if k in _CLIP_SYMBOLS}
    if "band_high" in clip and "band_low" not in clip:  # a band cut above only (AReaL's rejection): IcePop's from 0
        out[b_l] = 0.0
    if "band_low" in clip and "band_high" in clip:
        out.setdefault(_eps_l, 1 - clip["band_low"])
        out.setdefault(_eps_h, clip["band_high"] - 1)
    return out


def _penalised_twin(token: TokenReport, tau: float | None) -> TokenReport:
    r"""The report naming the registry's form with an advantage-free :math:`\tau(\log r)^2` added, when the weight (read without it) is
    the weight of a form that has such a twin (:data:`derivations.methods.PENALISED`: DPPO and the TV band with prime-rl's
    ``kl_tau``, REINFORCE with DRO's :math:`\tfrac\beta2(\log r)^2`); the twin's constant is read off :math:`\tau`."""
    twins = [(f, PENALISED[f]) for f in token.same_weight if f in PENALISED]
    if tau is None or not twins or tau <= 0:
        return token
    forms = tuple(twin for _, (twin, _, _) in twins)
    option = {v: k for k, v in PARAMETER_SYMBOLS.items() if isinstance(v, sp.Symbol)}
    read = "; ".join(f"{twin}: {option[symbol]} = {tau / float(factor):.6g}" for _, (twin, symbol, factor) in twins)
    reason = f"{token.reason}; with the advantage-free tau (log r)^2, tau = {tau:.6g}: the weight of {known_label(forms)} ({read})"
    return dataclasses.replace(token, matches=known_label(forms), same_weight=forms + tuple(f for f in token.same_weight if f not in forms),
                               reason=reason)


# ------------------------------------------------------------------ the verdict and the reason


def _verdict(pg, on_policy: bool, fit: Fit | None, length_biased: bool, leak: bool, tol: float) -> str:
    if pg is False or not on_policy or leak:
        return "biased"
    if fit is None:
        return "undecided"
    if length_biased:
        return "reweighted"
    return "unbiased" if fit.mode == "seq-mean-token-sum" and abs(fit.scale - 1) <= tol and fit.epsilon == 0 else "scaled"


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


def _with_reason(rep: PolicyLossReport) -> PolicyLossReport:
    parts = []
    if rep.sequence_level:
        parts.append("A token's gradient depends on the other tokens of its row: a sequence-level loss (as GSPO or GMPO); "
                     "its weight is read on rows of one token, where the sequence's ratio is the token's"
                     + (f": {rep.token.reason}." if rep.token is not None else "."))
    elif rep.token is not None:
        parts.append(f"Per-token weight: {rep.token.reason}.")
    if rep.ratio_one and (rep.token is None or rep.ratio_one not in rep.token.reason):
        parts.append(f"At r = 1: {rep.ratio_one}.")
    elif not rep.on_policy_at_ratio_one:
        parts.append("At r = 1 the gradient is not -kappa*A on every token.")
    if rep.aggregation == "other":
        parts.append("The aggregation factor kappa fits no known mode: " + (rep.kappa_law or "see the table") + ".")
    else:
        scale = "" if rep.scale is None or abs(rep.scale - 1) <= 1e-9 else f", times {rep.scale:.6g}"
        parts.append(f"Aggregation: {rep.aggregation}{scale}; a token's weight "
                     + ("depends on its row's length (length bias)." if rep.length_biased else "does not depend on its row's length."))
        if rep.aggregation == "padded-mean":
            parts.append("kappa = 1/(B T) moves with the padding width T: the step size changes with the longest response in the batch.")
    if not rep.claim_holds:
        parts.append(f"It claims loss_agg_mode={rep.claimed!r} but aggregates as {rep.aggregation}.")
    parts += [f"Undecided ({q}): {why}." for q, why in rep.undecided]
    return dataclasses.replace(rep, reason=" ".join(parts))


def _dtype(dtype) -> torch.dtype:
    if dtype is None:
        return F64
    if dtype not in dict(PRECISIONS).values():
        raise TypeError(f"dtype must be one of torch.float64, torch.float32, torch.float16, torch.bfloat16 (the dtype the trainer "
                        f"hands its loss), got {dtype!r}")
    return dtype


def check_policy_loss(fn: Callable, *, names: Mapping | None = None, dtype: torch.dtype | None = None,
                      execution: Mapping | bool | None = None, **fixed: object) -> PolicyLossReport:
    r"""Certify a trainer's policy loss as written: its per-token weight, its aggregation :math:`\kappa`, its precision, its edges.

    The function is called by keyword on ``[B, T]`` tensors ``old_log_prob,
    log_prob, advantages, response_mask`` (``names`` maps these roles to the
    function's own argument names) in ``dtype`` (float64 unless the trainer's
    is given), with ``fixed`` passed through; its loss is the scalar it
    returns (or the first element of a tuple).

    .. math::

        \frac{\partial \mathcal L}{\partial \log\pi_{it}} = -\,\kappa_{it}\, w(r_{it}, A_{it})\, A_{it}.

    Parameters
    ----------
    fn : callable
        The trainer's loss, e.g. ``compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config)``.
    names : dict, optional
        ``{"log_prob": "logprobs", ...}``: the function's names for the four roles.
    dtype : torch.dtype, optional
        The dtype the batch is handed over in: ``torch.float32`` or ``torch.bfloat16`` to check the loss as the
        trainer runs it (default float64).  Whatever it is, the precision the loss computes in is measured and
        sets the tolerance of every comparison.
    execution : bool or dict, optional
        Also run the loss as trainers run it, cut into data-parallel ranks and micro-batches
        (:func:`~numeric.variants.check_loss_execution`; a dict holds its arguments, e.g.
        ``{"world_sizes": (2, 4), "micro_batches": (2,), "convention": "verl", "engine": "simulate"}``;
        ``True``: its defaults on the simulated engine); the report's ``execution`` field.
    **fixed
        Passed to every call (``loss_agg_mode="token-mean"``, ``config=...``).

    Returns
    -------
    PolicyLossReport

    Raises
    ------
    TypeError
        ``fn`` not callable, cannot be called on the batch (in ``dtype``), or returns no scalar tensor; ``dtype`` not a floating dtype.
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
    >>> print(rep.clip_ranges[0].describe())
    A > 0: w = r on [0, 1.28], 0 above
    >>> check_policy_loss(loss_fn, dtype=torch.float32).precision.name
    'float32'
    """
    loss = TrainerLoss(fn, names, fixed, dtype=_dtype(dtype))
    claimed = _claimed_mode(fn, fixed)
    precision = loss_precision(loss)
    tol = precision.tolerance
    kappa_tol = max(KAPPA_RTOL, tol)
    notes: list[str] = []
    undecided: list[tuple[str, str]] = []
    rows: list = []
    leak = False
    for label, T, lengths in DESIGNS:
        measured, leaked = kappa_rows(loss, label, T, lengths)
        if measured is None:
            raise ValueError(f"fn returns a non-finite loss or gradient at r = 1, A = 1 on the batch {label}")
        rows += measured
        leak |= leaked
    if leak:
        notes.append("masked tokens receive gradient: the loss is not masked")
    if all(row[-1] == 0 for row in rows):
        raise ValueError("fn has no gradient at r = 1, A = 1 on any valid token: it cannot be a policy loss")
    signs = np.sign([row[-1] for row in rows])
    sign = 1 if (signs > 0).all() else -1 if (signs < 0).all() else 0
    rows = [(*row[:-1], abs(row[-1])) for row in rows]
    fitted = fit(rows, kappa_tol, tol) if sign else None
    law = power_law(rows, kappa_tol) if sign else None
    if fitted is None:
        undecided.append(("aggregation", "kappa changes sign between tokens" if not sign else law.describe() if law and not law.exact
                          else "kappa fits no known mode"))
    first = [row[-1] for row in rows if row[0] == DESIGNS[0][0]]
    length_biased = max(first) - min(first) > kappa_tol * max(first)
    same_row, batch_coupled = _row_coupling(loss, tol)
    sequence_level = same_row and not batch_coupled
    token: TokenReport | None = None
    clip: dict = {}
    ranges: tuple = ()
    bounded: dict = {}
    pg, gap, ratio_one, sequence_ratio = None, None, "", None
    penalty = None if batch_coupled else _penalty(loss, tol)
    if penalty is not None:
        notes.append(penalty)
    weight = _weight(loss, penalty is not None)
    if batch_coupled:
        undecided.append(("per-token weight", "a token's gradient depends on other rows of the batch: not a per-token loss with a fixed aggregation"))
    elif not sequence_level:
        gap = _decomposition_gap(loss)
        if gap > kappa_tol:
            undecided.append(("per-token weight", f"the gradient on a batch of random ratios and advantages is not -kappa*w*A (relative gap "
                                                  f"{gap:.2g}): kappa depends on more than the mask (the ratios or the advantages?)"))
    if not batch_coupled and (sequence_level or gap is not None and gap <= kappa_tol):
        ranges = clip_ranges(weight, tol)
        clip, clip_notes = _named(ranges, tol)
        notes += clip_notes
        one = at_ratio_one(weight, tol)
        ratio_one = one.explanation
        constants = _constants(clip)
        per_token = loss.per_token() if penalty is None else _without_penalty(loss)
        token = token_report_from_callable(per_token, constants, tol=tol)  # for a sequence-level loss: rows of one token
        if penalty is not None:
            token = _penalised_twin(token, _penalty_tau(loss, tol))
        pg, bounded, on_policy_weight = token.is_policy_gradient, token.bounded, bool(token.on_policy_at_ratio_one)
        if sequence_level:
            sequence_ratio = _sequence_ratio(loss, weight, tol)
            pg = None if pg else False
    else:
        on_policy_weight = True
    on_policy = sign > 0 and on_policy_weight
    if sign < 0 and not ratio_one:
        ratio_one = "every valid token's gradient at r = 1, A = 1 is +kappa: the update points the wrong way (the loss's minus sign is missing)"
    aggregation = None if fitted is None else fitted.mode
    method = _sequence_method(token, sequence_ratio, aggregation) if sequence_level else (token.matches if token is not None else None)
    if method == METHODS["opsm"].label and 0 < clip.get("eps_low", 0) < 1:  # OPSM's row cut, read as the lower clip on a row of one token
        clip["opsm_delta"] = round(-math.log(ranges[1].low), _digits(tol))
        notes.append(f"the A < 0 lower edge {1 - clip['eps_low']:.6g} is OPSM's row cut e^-delta, delta = {clip['opsm_delta']:.6g} (a row of "
                     "negative advantage whose mean log-ratio fell below -delta is dropped; where that cut lies above 1 - eps_low the clip's own "
                     "edge is not seen)")
    if fitted is not None:
        if fitted.epsilon:
            notes.append(f"the denominator is {fitted.counts} + eps with eps = {fitted.epsilon:.3g}: kappa falls below the exact mode's "
                         f"by a relative eps/({fitted.counts}) ({fitted.epsilon:.3g} at {fitted.counts} = 1)")
        _empty_row_note(loss, fitted, notes, kappa_tol)
    _clamp_notes(loss, notes)
    mode = "other" if fitted is None else fitted.mode.removesuffix("/T")
    normaliser = None
    if fitted is not None and fitted.mode.startswith("seq-mean-token-sum-norm"):
        normaliser = ("T" if abs(fitted.scale - 1) <= kappa_tol else f"T/{fitted.scale:.6g}") if fitted.mode.endswith("/T") else f"{1 / fitted.scale:.6g}"
    table = tuple((*row[:2], row[2], row[3], row[4], row[6], None if fitted is None else fitted.kappa(*row[2:6])) for row in rows)
    verdict = "undecided" if undecided and not leak and on_policy and pg is not False else _verdict(pg, on_policy, fitted, length_biased, leak, kappa_tol)
    report = PolicyLossReport(
        verdict, method, pg, on_policy, sequence_level, mode,
        None if fitted is None else (1.0 if normaliser is not None or abs(fitted.scale - 1) <= kappa_tol else fitted.scale), normaliser,
        0.0 if fitted is None else fitted.epsilon, length_biased, claimed, tuple(clip.items()), table, tuple(notes), token, gap, "",
        clip_ranges=ranges, bounded=bounded, precision=precision, kappa_law="" if law is None else law.describe(),
        undecided=tuple(undecided), ratio_one=ratio_one, sequence_ratio=sequence_ratio,
        questions=tuple(ask(loss) for ask in QUESTION_FUNCTIONS.values()), execution=_execution(fn, names, fixed, execution))
    return _with_reason(report)


def _execution(fn: Callable, names: Mapping | None, fixed: dict, execution: Mapping | bool | None) -> ExecutionReport | None:
    if execution is None or execution is False:
        return None
    if execution is True:
        execution = {"engine": "simulate"}
    if not isinstance(execution, Mapping):
        raise TypeError(f"execution must be None, a bool or a dict of check_loss_execution's arguments, got {type(execution).__name__}")
    return check_loss_execution(fn, names=names, **{**execution, **fixed})
