r"""The questions trainer engineers ask about a policy loss, answered by measuring the function as written.

Each question is one public function that takes a
:class:`~numeric.variants.trainer_loss.TrainerLoss` and returns an
:class:`~numeric.variants.answers.Answer`: a verdict, one line that names the
measured cause, and the measurements behind it.  This module holds the
questions about the batch's bookkeeping (the mask, the weighting, poisoned
slots) and the registry of all six; the three about the other policies a loss
sees (the reference, the rollout sampler, a lagging old policy) are in
:mod:`numeric.variants.divergence_questions`.

=================================  ==========================================================================================
:func:`mask_consistent`            does a token the mask (or the function itself) leaves out of the numerator leave the denominator?
:func:`weighting`                  does each sequence weigh the same (per sequence) or each token (per token)?
:func:`.kl_gradient`               which divergence does the KL term's expected gradient descend (toy LM, exact enumeration)?
:func:`.correction`                is a rollout-correction weight applied once, and detached?
:func:`.sequence_weight_scale`     how does a sequence importance weight spread with length (product or geometric mean)?
:func:`poison`                     do NaN, :math:`\pm\infty`, :math:`\pm 10^4` or an overflowing ratio in masked slots reach the loss?
=================================  ==========================================================================================

A question that does not apply (no KL term, no rollout log-prob, no sequence
weight) answers ``"not applicable"`` after one or two calls.  Every measurement
but :func:`poison` runs in float64 whatever the trainer's dtype (the answers are
exact identities); :func:`poison` runs in the trainer's dtype, whose overflow
threshold it probes.

References
----------
TRL issue 6369 and PR 6439 (truncated completions out of the numerator, still in
the denominator) and TRL ``get_high_entropy_mask`` with its use in ``_compute_loss``
(huggingface/trl at f2cd57710ae345ea6428ae95363267fcf38a3dc8,
``trl/trainer/grpo_trainer.py`` lines 1396-1432 and 3114-3161); verl ``agg_loss``
(verl-project/verl at 1dda039b9c6311889a9c9a26040677e1254814f9,
``verl/trainer/ppo/core_algos.py`` lines 1140-1207), which excludes all-masked rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from .answers import (
    F64,
    Answer,
    advantage_gradient,
    close,
    completed,
    farthest,
    in_float64,
    probe_log_probs,
    probe_mask,
    ratios,
    require_trainer_loss,
    responds,
    row_coupled,
)
from .divergence_questions import correction, kl_gradient, sequence_weight_scale
from .trainer_loss import TrainerLoss

__all__ = ["QUESTION_FUNCTIONS", "mask_consistent", "poison", "weighting"]


# ------------------------------------------------------------------ the mask


_MASK_T, _MASK_LENGTHS = 6, (2, 4, 6, 3)  # row 2 fills the width: a truncated completion in TRL's sense


def _kappa(loss: TrainerLoss, old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``-dL/dlog pi`` of the advantage's part at r = 1, A = 1: each token's aggregation factor."""
    return -advantage_gradient(loss, old, old, torch.ones_like(old), mask)


def mask_consistent(loss: TrainerLoss) -> Answer:
    r"""Is a token that the mask leaves out of the numerator also out of the denominator?

    At :math:`r = 1`, :math:`A = 1` each valid token's gradient is
    :math:`-\kappa_{it}`, its share of the aggregation.  Five probes compare
    :math:`\kappa` of the other tokens between two batches that should be the
    same batch:

    * **numerator**: a masked token has no gradient;
    * **hole**: a token inside a row masked, against the row with that token
      removed (the rest shifted left);
    * **row**: a whole row masked, against the batch without that row (verl's
      ``agg_loss`` excludes all-masked rows; a plain ``.mean()`` over rows counts them);
    * **padding**: one more all-masked column (a mean over :math:`B\,T` slots,
      or verl's ``seq-mean-token-sum-norm`` with its default :math:`D = T`, counts it);
    * **silenced**: tokens the function removes itself (gradient exactly 0 at
      :math:`r = 1`, :math:`A = 1` though valid: an internal truncation or
      top-entropy mask), one at a time masked, where the function's own selection
      of the others stays put — TRL issue 6369: truncated completions out of the
      numerator but counted in ``num_items_in_batch``.  Where masking any of
      them moves the selection (a quantile of the batch's values: TRL's
      ``top_entropy_quantile``), the kept tokens' :math:`\kappa` is compared
      with the same batch's with every value tied (nothing silenced): a
      denominator that counts tokens, silenced ones excluded, gives them more.

    Returns
    -------
    Answer
        ``consistent``, ``inconsistent`` (with the factor the probe moved
        :math:`\kappa` by: the first probe that failed) or ``undecided`` (no
        gradient at :math:`r = 1`).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import mask_consistent
    >>> def padded_mean(old_log_prob, log_prob, advantages, response_mask):
    ...     ratio = torch.exp(log_prob - old_log_prob)
    ...     return (-ratio * advantages * response_mask).mean()        # B*T slots in the denominator
    >>> a = mask_consistent(TrainerLoss(padded_mean))
    >>> a.verdict, a.ok
    ('inconsistent', False)
    >>> print(a.explanation)
    an all-masked row still counts in the denominator: masking row 0 moves the other rows' kappa x0.75 against removing it
    """
    loss = in_float64(require_trainer_loss(loss))
    mask = probe_mask(_MASK_T, _MASK_LENGTHS)
    old = probe_log_probs(mask.shape, seed=11)
    k0 = _kappa(loss, old, mask)
    valid = mask > 0
    if not bool(torch.isfinite(k0).all()) or not bool((k0[valid] != 0).any()):
        return Answer("mask_consistent", "undecided", "no finite gradient at r = 1, A = 1 on a valid token: nothing to compare", ok=None)
    evidence: list = []
    failures: list[str] = []

    def record(name: str, factor: float, why: str) -> None:
        evidence.append((name, factor))
        if not abs(factor - 1.0) <= 1e-9 and why:
            failures.append(why.format(f=f"{factor:.6g}"))

    leak = float(k0[~valid].abs().max())
    evidence.append(("masked_gradient", leak))
    if leak != 0:
        failures.append(f"a masked token still receives gradient (|dL/dlog pi| up to {leak:.3g}): the mask does not reach the numerator")
    # hole: token 1 of row 1 masked, against row 1 without it (its later tokens shifted left)
    i, t, n = 1, 1, _MASK_LENGTHS[1]
    holed = mask.clone()
    holed[i, t] = 0
    short, shifted = mask.clone(), old.clone()
    short[i, n - 1] = 0
    shifted[i, t:n - 1] = old[i, t + 1:n]
    k_hole, k_del = _kappa(loss, old, holed), _kappa(loss, shifted, short)
    pairs = [((r, c), (r, c if r != i or c < t else c - 1)) for r, c in (holed > 0).nonzero().tolist()]
    moved = torch.stack([k_hole[a] for a, _ in pairs])
    ref = torch.stack([k_del[b] for _, b in pairs])
    record("hole_factor", 1.0 if close(moved, ref) else farthest(ratios(moved, ref)),
           "a masked token inside a row still counts in the denominator: masking it moves the other tokens' kappa x{f} against removing it")
    # row: row 0 masked, against the batch without it
    rowless = mask.clone()
    rowless[0] = 0
    k_row = _kappa(loss, old, rowless)[1:]
    k_gone = _kappa(loss, old[1:], mask[1:])
    kept = mask[1:] > 0
    record("row_factor", 1.0 if close(k_row[kept], k_gone[kept]) else farthest(ratios(k_row[kept], k_gone[kept])),
           "an all-masked row still counts in the denominator: masking row 0 moves the other rows' kappa x{f} against removing it")
    # padding: one more all-masked column
    wide_mask = torch.cat([mask, torch.zeros(len(_MASK_LENGTHS), 1, dtype=F64)], 1)
    wide_old = torch.cat([old, old[:, -1:]], 1)
    k_wide = _kappa(loss, wide_old, wide_mask)[:, :_MASK_T]
    record("padding_factor", 1.0 if close(k_wide[valid], k0[valid]) else farthest(ratios(k_wide[valid], k0[valid])),
           "padded slots count in the denominator: one more all-masked column moves kappa x{f} (a mean over B*T slots, or D = T)")
    silenced = valid & (k0 == 0)
    evidence.append(("silenced_tokens", int(silenced.sum())))
    undecided = False
    if bool(silenced.any()):
        key, factor, failure = _silenced_probe(loss, old, mask, k0)
        evidence.append((key, factor))
        undecided = factor is None
        if failure:
            failures.append(failure.format(n=int(silenced.sum()), N=int(valid.sum())))
    if failures:
        return Answer("mask_consistent", "inconsistent", failures[0], tuple(evidence), ok=False)
    if undecided:
        return Answer("mask_consistent", "undecided", "the tokens the function silences move its own selection when masked, and a batch "
                      "with tied values still silences some: whether they count in the denominator is not measured", tuple(evidence), ok=None)
    return Answer("mask_consistent", "consistent", "masked tokens, holes, all-masked rows, padding"
                  + (" and the tokens the function silences" if bool(silenced.any()) else "")
                  + " are out of the denominator as they are out of the numerator", tuple(evidence), ok=True)


_SILENCED = ("tokens the function silences itself ({n} of {N} at r = 1, A = 1: an internal truncation or entropy mask) still count in "
             "the denominator: ")


def _silenced_probe(loss: TrainerLoss, old: torch.Tensor, mask: torch.Tensor, k0: torch.Tensor) -> tuple[str, float | None, str | None]:
    """``(evidence key, factor, failure)``: do the valid tokens the function silences itself count in the denominator?

    First one silenced token masked, where the function's selection of the others stays put (a truncated row, TRL issue 6369):
    the kept tokens' kappa must not move.  Where every such token moves the selection (a quantile of the batch's values, TRL's
    top-entropy mask), the same batch with every value tied, where a value-based selection silences nothing: a denominator that
    counts tokens must then give the kept tokens a smaller kappa than the silenced batch does.
    """
    valid = mask > 0
    alive = valid & (k0 != 0)
    for i, t in (valid & (k0 == 0)).nonzero().tolist()[:4]:
        probe = mask.clone()
        probe[i, t] = 0
        k_u = _kappa(loss, old, probe)
        if bool((((probe > 0) & (k_u != 0)) == alive).all()):
            factor = 1.0 if close(k_u[alive], k0[alive]) else farthest(ratios(k0[alive], k_u[alive]))
            return "silenced_factor", factor, None if factor == 1.0 else _SILENCED + f"the others' kappa is x{factor:.6g} what it is without one of them"
    tied = torch.full_like(old, float(old[valid].mean()))
    k_tied = _kappa(loss, tied, mask)
    if not bool((k_tied[valid] != 0).all()):
        return "silenced_factor", None, None
    one = mask.clone()
    first = tuple(alive.nonzero()[0].tolist())
    one[first] = 0
    rest = valid & (one > 0)
    if close(_kappa(loss, tied, one)[rest], k_tied[rest]):
        return "kept_over_tied", 1.0, None  # the denominator counts no tokens: silenced ones cannot count either
    ratio = farthest(ratios(k0[alive], k_tied[alive]))
    if close(k0[alive], k_tied[alive]):
        return "kept_over_tied", 1.0, _SILENCED + "the kept tokens' kappa is what it is when the same batch, values tied, has nothing silenced"
    return "kept_over_tied", ratio, None


# ------------------------------------------------------------------ the weighting


def weighting(loss: TrainerLoss) -> Answer:
    r"""Does each sequence weigh the same in the loss, or each token?

    A sequence's weight is the change of the loss when its advantage moves, at
    :math:`r = 1`: :math:`\kappa_i = -\bigl(\mathcal L(A + \mathbf{e}_i) - \mathcal L(A)\bigr)`,
    :math:`\mathbf{e}_i` one more unit of advantage on every token of row :math:`i`
    (exact: at :math:`r = 1` the known losses are linear in :math:`A`; a KL or
    entropy term cancels).  *Per sequence*: :math:`\kappa_i` does not depend on the
    row's length :math:`|o_i|` (``seq-mean-token-mean``, GSPO's sequence mean);
    *per token*: :math:`\kappa_i \propto |o_i|` (``token-mean``, ``seq-mean-token-sum``
    — for a sequence-level loss, a sequence term broadcast over its tokens and
    then averaged over tokens weighs each sequence by its length); *other*: any
    other dependence, with the measured :math:`\kappa_i`.

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import weighting
    >>> def gspo_token_mean(old_log_prob, log_prob, advantages, response_mask):
    ...     n = response_mask.sum(-1, keepdim=True)
    ...     s = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True) / n)
    ...     per_token = -s * advantages                        # the sequence's term on each of its tokens
    ...     return (per_token * response_mask).sum() / response_mask.sum()
    >>> a = weighting(TrainerLoss(gspo_token_mean))
    >>> a.verdict
    'per token'
    >>> print(a.explanation)
    a sequence-level loss broadcast over its tokens: each sequence weighs by its length (c_i / n_i = 0.0769231 for n_i = 1, 2, 4, 6)
    """
    loss = in_float64(require_trainer_loss(loss))
    lengths = (1, 2, 4, 6)
    mask = probe_mask(6, lengths)
    old = probe_log_probs(mask.shape, seed=3)
    adv = torch.ones_like(old)
    base = float(loss(old, old, adv, mask).detach())
    c = []
    for i in range(len(lengths)):
        moved = adv.clone()
        moved[i] += 1.0
        c.append(-(float(loss(old, old, moved, mask).detach()) - base))
    c_arr, n = np.array(c), np.array(lengths, dtype=float)
    sequence_level = row_coupled(loss)
    evidence: tuple = (("lengths", lengths), ("sequence_weights", tuple(c)), ("sequence_level", sequence_level))
    if not np.isfinite(c_arr).all() or np.abs(c_arr).max() == 0:
        return Answer("weighting", "undecided", "the loss's value does not move with the advantages at r = 1: no sequence weight to read from it",
                      evidence)
    spread = lambda x: float(np.ptp(x)) <= 1e-6 * float(np.abs(x).max())  # noqa: E731  (an n + 1e-8 denominator, verl's, is within)
    listed = ", ".join(map(str, lengths))
    if spread(c_arr):
        return Answer("weighting", "per sequence", f"each sequence weighs c_i = {c_arr[0]:.6g} whatever its length (n_i = {listed})", evidence)
    if spread(c_arr / n):
        what = ("a sequence-level loss broadcast over its tokens: each sequence weighs by its length" if sequence_level
                else "each token weighs the same, so a sequence's weight grows with its length")
        return Answer("weighting", "per token", f"{what} (c_i / n_i = {c_arr[0] / n[0]:.6g} for n_i = {listed})", evidence)
    return Answer("weighting", "other", "a sequence's weight depends on its length, neither as a constant nor in proportion: "
                  + ", ".join(f"c({k}) = {v:.4g}" for k, v in zip(lengths, c)), evidence)


# ------------------------------------------------------------------ poisoned slots


def _poisons(dtype: torch.dtype) -> list[tuple[str, dict]]:
    """``(label, {role: value})`` put into every masked slot; the overflow pair's log-ratio passes exp's overflow in ``dtype``."""
    big = math.log(torch.finfo(dtype).max)
    pair = 0.6 * big
    return [("NaN", {"role": math.nan}), ("-inf", {"role": -math.inf}), ("+inf", {"role": math.inf}),
            ("-1e4", {"role": -1e4}), ("+1e4", {"role": 1e4}),
            (f"log-ratio {2 * pair:.0f} (exp overflows)", {"log_prob": pair, "old_log_prob": -pair})]


def poison(loss: TrainerLoss) -> Answer:
    r"""Do NaN, :math:`\pm\infty`, :math:`\pm 10^4` or an overflowing ratio in masked slots reach the loss or its gradient?

    Each input (``old_log_prob``, ``log_prob``, ``advantages``, and
    ``ref_log_prob`` / ``rollout_log_prob`` where the function takes them) gets
    the poison in every masked slot, the valid slots unchanged, in the
    trainer's dtype; and the log-ratio of a masked slot is set past ``exp``'s
    overflow (:math:`\approx 1.2 \times 709.8` in float64, :math:`1.2\times 88.7`
    in float32).  The loss and its whole gradient (masked slots included: a
    NaN there reaches the weights through the backward pass) must equal the
    clean batch's.  A leak is located by the input, the poison, the first slot
    that alone leaks it, and whether it is in the value or only in the
    gradient:

    * a finite poison that makes a NaN: an overflow (``exp`` to ``inf``)
      multiplied by the mask (:math:`\infty \cdot 0` = NaN);
    * NaN or :math:`\pm\infty` in the value: the slot's value reaches the loss
      through a product with the mask (:math:`\mathrm{NaN}\cdot 0`, :math:`\infty\cdot 0`);
    * only in the gradient: the value is masked by selection (``torch.where``,
      ``masked_fill``) but the backward pass runs through the poisoned slot
      (:math:`0 \cdot \infty` in the backward of ``exp``, ``log`` or a division);
    * a finite change: the input is not masked at all.

    Returns ``clean``, ``leaks`` (the first finding explained, every finding in
    the evidence) or ``raises`` (the function refuses poisoned padding: a
    trainer's padding then stops training).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import poison
    >>> def masked_after_exp(old_log_prob, log_prob, advantages, response_mask):
    ...     ratio = torch.exp(log_prob - old_log_prob) * response_mask   # inf * 0 in a padded slot
    ...     return (-ratio * advantages).sum() / response_mask.sum()
    >>> a = poison(TrainerLoss(masked_after_exp))
    >>> a.verdict, a.ok
    ('leaks', False)
    >>> print(a.explanation)
    NaN in the masked slot (0, 2) of old_log_prob reaches the loss (nan): the slot's value reaches the loss through a product with the mask (NaN * 0 = NaN)
    """
    loss = completed(loss)
    mask = probe_mask(6, (2, 4, 6, 0))
    old = probe_log_probs(mask.shape, seed=13)
    clean = {"old_log_prob": old, "log_prob": old + 0.05, "advantages": torch.linspace(-1.5, 2.0, mask.numel(), dtype=F64).reshape(mask.shape)}
    for role in ("ref_log_prob", "rollout_log_prob"):
        if responds(loss, role)[0]:
            clean[role] = old - 0.1
    pad = mask == 0
    first = tuple(int(x) for x in pad.nonzero()[0])

    def run(batch):
        extra = {k: v for k, v in batch.items() if k not in ("old_log_prob", "log_prob", "advantages")}
        return loss.grad(batch["old_log_prob"], batch["log_prob"], batch["advantages"], mask, **extra)

    def poisoned(fill: dict, where: torch.Tensor) -> dict:
        return {k: torch.where(where, torch.full_like(v, fill[k]), v) if k in fill else v for k, v in clean.items()}

    value0, g0 = run(clean)
    tol = lambda ref: 1e-12 * max(1.0, abs(ref)) if loss.dtype == F64 else 1e-5 * max(1.0, abs(ref))  # noqa: E731
    findings: list[tuple] = []
    refused: list[str] = []
    for label, fill in _poisons(loss.dtype):
        roles: list[str | None] = list(clean) if "role" in fill else [None]
        for target in roles:
            spec = {target: fill["role"]} if target is not None else fill
            try:
                value, g = run(poisoned(spec, pad))
            except TypeError as err:
                refused.append(f"{label} in {target or 'log_prob/old_log_prob'}: {err.__cause__!r}")
                continue
            where = _leak(value, g, value0, g0, tol(value0))
            if where is None:
                continue
            slot = first
            for cand in pad.nonzero().tolist():
                one = torch.zeros_like(pad)
                one[tuple(cand)] = True
                v1, g1 = run(poisoned(spec, one))
                if _leak(v1, g1, value0, g0, tol(value0)) is not None:
                    slot = tuple(cand)
                    break
            findings.append((target or "log_prob and old_log_prob", label, slot, *where))
    evidence = (("findings", tuple(findings)), ("refused", tuple(refused)), ("dtype", str(loss.dtype).removeprefix("torch.")))
    if findings:
        role, label, slot, part, what = findings[0]
        return Answer("poison", "leaks", f"{label} in the masked slot {slot} of {role} reaches the {part} ({what}): {_cause(label, part, what)}",
                      evidence, ok=False)
    if refused:
        return Answer("poison", "raises", f"the function raises on poisoned padding ({refused[0]}): masked slots must be allowed to hold anything",
                      evidence, ok=False)
    return Answer("poison", "clean", f"NaN, +-inf, +-1e4 and an overflowing log-ratio in masked slots of {', '.join(clean)} leave the loss and "
                  "its gradient as they are", evidence, ok=True)


def _leak(value: float, g: torch.Tensor, value0: float, g0: torch.Tensor, tol: float) -> tuple[str, str] | None:
    """``(where, what)`` of a difference from the clean batch: the loss first, then the gradient; None if none."""
    if not math.isfinite(value):
        return "loss", "nan" if math.isnan(value) else "inf"
    if abs(value - value0) > tol:
        return "loss", f"changed by {value - value0:.3g}"
    if not bool(torch.isfinite(g).all()):
        return "gradient", "nan" if bool(torch.isnan(g).any()) else "inf"
    if float((g - g0).abs().max()) > tol:
        return "gradient", f"changed by {float((g - g0).abs().max()):.3g}"
    return None


def _cause(label: str, part: str, what: str) -> str:
    finite = label not in ("NaN", "-inf", "+inf")
    if what.startswith("changed"):
        return "the input is not masked: its masked slots enter the arithmetic"
    if part == "gradient":
        return ("the value is masked by selection but the backward pass runs through the slot (0 * inf = NaN in the backward of exp, "
                "log or a division)")
    if finite:
        return "exp overflows in the slot (inf) and the mask multiplies it (inf * 0 = NaN)"
    return f"the slot's value reaches the loss through a product with the mask ({'NaN' if label == 'NaN' else 'inf'} * 0 = NaN)"


QUESTION_FUNCTIONS: dict[str, Callable[[TrainerLoss], Answer]] = {
    "mask_consistent": mask_consistent, "weighting": weighting, "kl_gradient": kl_gradient, "correction": correction,
    "sequence_weight_scale": sequence_weight_scale, "poison": poison,
}
"""Each question's function, by the name of its report field (the keys of :data:`~numeric.variants.answers.QUESTIONS`)."""
