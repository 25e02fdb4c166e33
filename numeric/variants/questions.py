r"""The questions trainer engineers ask about a policy loss, answered by measuring the function as written.

Each question is one public function that takes a
:class:`~numeric.variants.trainer_loss.TrainerLoss` and returns an
:class:`Answer`: a verdict, one line that names the measured cause, and the
measurements behind it.

=================================  ==========================================================================================
:func:`mask_consistent`            does a token the mask (or the function itself) leaves out of the numerator leave the denominator?
:func:`weighting`                  does each sequence weigh the same (per sequence) or each token (per token)?
:func:`kl_gradient`                which divergence does the KL term's expected gradient descend (toy LM, exact enumeration)?
:func:`correction`                 is a rollout-correction weight applied once, and detached?
:func:`sequence_weight_scale`      how does a sequence importance weight spread with length (product or geometric mean)?
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
the denominator), TRL ``get_high_entropy_mask`` (huggingface/trl at
f2cd57710ae345ea6428ae95363267fcf38a3dc8, ``trl/trainer/grpo_trainer.py`` lines 1396-1432
and 3114-3161); verl ``agg_loss``, ``kl_penalty``, ``compute_policy_loss_bypass_mode``
and ``compute_rollout_correction_weights`` (verl-project/verl at
1dda039b9c6311889a9c9a26040677e1254814f9, ``verl/trainer/ppo/core_algos.py`` lines
1140-1200, 2187-2247, 2332-2540, and ``verl/trainer/ppo/rollout_corr_helper.py``
lines 522-657 and 1109-1145).
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..losses import bias_corrected_kl, kl_penalty, verl_kl_penalty
from ..tinylm import TinyLM, perturb
from .trainer_loss import OPTIONAL_ROLES, TrainerLoss

__all__ = ["Answer", "QUESTIONS", "QUESTION_FUNCTIONS", "correction", "kl_gradient", "mask_consistent", "poison", "sequence_weight_scale", "weighting"]

F64 = torch.float64
NOT_APPLICABLE = "not applicable"
QUESTIONS = {
    "mask_consistent": ("consistent", "inconsistent", "undecided"),
    "weighting": ("per token", "per sequence", "other", "undecided"),
    "kl_gradient": ("reverse KL", "reverse KL per token", "forward KL", "forward KL per token", "total variation per token",
                    "no gradient", "neither", NOT_APPLICABLE),
    "correction": ("once", "twice", "not detached", "not applied", "other", NOT_APPLICABLE),
    "sequence_weight_scale": ("product", "geometric mean", "other", NOT_APPLICABLE),
    "poison": ("clean", "leaks", "raises"),
}
"""Each question's verdicts, in the order the answers check them."""
RTOL = 1e-9
"""Relative tolerance of every exact comparison (float64)."""


@dataclass(frozen=True)
class Answer:
    """A question's answer: its verdict, one line naming the measured cause, the measurements.

    Attributes
    ----------
    question : str
        A key of :data:`QUESTIONS`.
    verdict : str
        One of that question's verdicts.
    explanation : str
        One line: what was measured that decides the verdict.
    evidence : tuple of (str, object)
        The named measurements (numbers, strings, tuples of them).
    ok : bool or None
        ``True``/``False`` where the question has a right answer (mask, correction, poison), ``None`` otherwise.
    """

    question: str
    verdict: str
    explanation: str
    evidence: tuple = ()
    ok: bool | None = None

    def as_dict(self) -> dict:
        """The answer as plain JSON-ready values."""
        return {"question": self.question, "verdict": self.verdict, "ok": self.ok, "explanation": self.explanation,
                "evidence": {k: _plain(v) for k, v in self.evidence}}

    def __str__(self) -> str:
        return f"{self.question}: {self.verdict} ({self.explanation})"


def _plain(v):
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, (np.integer, int)) and not isinstance(v, bool):
        return int(v)
    return v


def _not_applicable(question: str, why: str) -> Answer:
    return Answer(question, NOT_APPLICABLE, why)


# ------------------------------------------------------------------ shared probes


def _require_loss(loss) -> TrainerLoss:
    if not isinstance(loss, TrainerLoss):
        raise TypeError(f"loss must be a numeric.variants.trainer_loss.TrainerLoss (the trainer's function with its roles), got {type(loss).__name__}")
    return loss


class _Completed(TrainerLoss):
    """The trainer's loss with the optional roles its function takes filled by the old log-probs (a zero KL, no correction) unless given."""

    def __init__(self, loss: TrainerLoss, dtype: torch.dtype):
        super().__init__(loss.fn, loss.names, loss.fixed, dtype=dtype)
        self.roles = _taken_roles(loss)

    def __call__(self, old, new, adv, mask, **extra) -> torch.Tensor:
        for role in self.roles:
            extra.setdefault(role, old)
        return super().__call__(old, new, adv, mask, **extra)


def _taken_roles(loss: TrainerLoss) -> tuple[str, ...]:
    """The optional roles the function names among its parameters (all of them if it takes ``**kwargs``)."""
    try:
        params = inspect.signature(loss.fn).parameters
    except (TypeError, ValueError):
        return ()
    anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return tuple(role for role in OPTIONAL_ROLES if anything or loss.names[role] in params)


def _f64(loss: TrainerLoss) -> TrainerLoss:
    """The same function, handed its batch in float64 (the exact measurements), its optional roles filled."""
    return _Completed(loss, F64)


def _mask(T: int, lengths) -> torch.Tensor:
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(F64)


def _old(shape, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return -0.1 - 2.9 * torch.rand(shape, generator=gen, dtype=F64)


def _ratios(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a / torch.where(b == 0, torch.ones_like(b), b)


def _same(a: torch.Tensor, b: torch.Tensor, rtol: float = RTOL) -> bool:
    scale = max(float(a.abs().max()) if a.numel() else 0.0, float(b.abs().max()) if b.numel() else 0.0, 1e-300)
    return a.shape == b.shape and bool(torch.isfinite(a).all()) and float((a - b).abs().max() if a.numel() else 0.0) <= rtol * scale


def _farthest(ratio: torch.Tensor) -> float:
    """The ratio farthest from 1 (in log), the factor an answer quotes."""
    r = ratio[torch.isfinite(ratio) & (ratio > 0)]
    return float(r[(r.log()).abs().argmax()]) if r.numel() else math.nan


def _responds(loss: TrainerLoss, role: str) -> tuple[bool, str]:
    """Does the function take the optional ``role`` and does its value or gradient move with it? ``(answer, why not)``."""
    if role not in _taken_roles(loss):
        return False, f"fn does not take {role} (no parameter {loss.names[role]!r})"
    mask = _mask(3, (2, 3))
    old = _old(mask.shape, seed=7)
    adv = torch.ones_like(old)
    (v0, g0), (v1, g1) = (loss.grad(old, old + 0.03, adv, mask, **{role: old - 0.2 + shift}) for shift in (0.0, 0.4))
    if v0 == v1 and bool((g0 == g1).all()):
        return False, f"neither the loss nor its gradient moves with {role}"
    return True, ""


def _pg(loss: TrainerLoss, old, new, adv, mask, **extra) -> torch.Tensor:
    """The gradient in log pi of the loss's part that moves with the advantages (a KL or entropy term subtracted out)."""
    _, g = loss.grad(old, new, adv, mask, **extra)
    _, g0 = loss.grad(old, new, torch.zeros_like(adv), mask, **extra)
    return g - g0


def _row_coupled(loss: TrainerLoss) -> bool:
    """Does a token's gradient move when another token of its row moves (a sequence-level weight)?"""
    mask = _mask(4, (3, 4))
    old = _old(mask.shape, seed=1)
    adv = torch.ones_like(old)
    new = old + 1e-5  # log-ratios inside the tightest clip (GSPO's 3e-4 on the sequence's mean)
    base = _pg(loss, old, new, adv, mask)
    new[0, 1] += 1e-4
    g = _pg(loss, old, new, adv, mask)
    return not _same(g[0, [0, 2]], base[0, [0, 2]], 1e-12)


# ------------------------------------------------------------------ the mask


_MASK_T, _MASK_LENGTHS = 6, (2, 4, 6, 3)  # row 2 fills the width: a truncated completion in TRL's sense


def _kappa(loss: TrainerLoss, old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``-dL/dlog pi`` of the advantage's part at r = 1, A = 1: each token's aggregation factor."""
    return -_pg(loss, old, old, torch.ones_like(old), mask)


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
    loss = _f64(_require_loss(loss))
    mask = _mask(_MASK_T, _MASK_LENGTHS)
    old = _old(mask.shape, seed=11)
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
    record("hole_factor", 1.0 if _same(moved, ref) else _farthest(_ratios(moved, ref)),
           "a masked token inside a row still counts in the denominator: masking it moves the other tokens' kappa x{f} against removing it")
    # row: row 0 masked, against the batch without it
    rowless = mask.clone()
    rowless[0] = 0
    k_row = _kappa(loss, old, rowless)[1:]
    k_gone = _kappa(loss, old[1:], mask[1:])
    kept = mask[1:] > 0
    record("row_factor", 1.0 if _same(k_row[kept], k_gone[kept]) else _farthest(_ratios(k_row[kept], k_gone[kept])),
           "an all-masked row still counts in the denominator: masking row 0 moves the other rows' kappa x{f} against removing it")
    # padding: one more all-masked column
    wide_mask = torch.cat([mask, torch.zeros(len(_MASK_LENGTHS), 1, dtype=F64)], 1)
    wide_old = torch.cat([old, old[:, -1:]], 1)
    k_wide = _kappa(loss, wide_old, wide_mask)[:, :_MASK_T]
    record("padding_factor", 1.0 if _same(k_wide[valid], k0[valid]) else _farthest(_ratios(k_wide[valid], k0[valid])),
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
            factor = 1.0 if _same(k_u[alive], k0[alive]) else _farthest(_ratios(k0[alive], k_u[alive]))
            return "silenced_factor", factor, None if factor == 1.0 else _SILENCED + f"the others' kappa is x{factor:.6g} what it is without one of them"
    tied = torch.full_like(old, float(old[valid].mean()))
    k_tied = _kappa(loss, tied, mask)
    if not bool((k_tied[valid] != 0).all()):
        return "silenced_factor", None, None
    one = mask.clone()
    first = tuple(alive.nonzero()[0].tolist())
    one[first] = 0
    rest = valid & (one > 0)
    if _same(_kappa(loss, tied, one)[rest], k_tied[rest]):
        return "kept_over_tied", 1.0, None  # the denominator counts no tokens: silenced ones cannot count either
    ratio = _farthest(_ratios(k0[alive], k_tied[alive]))
    if _same(k0[alive], k_tied[alive]):
        return "kept_over_tied", 1.0, _SILENCED + "the kept tokens' kappa is what it is when the same batch, values tied, has nothing silenced"
    return "kept_over_tied", ratio, None


# ------------------------------------------------------------------ the weighting


def weighting(loss: TrainerLoss) -> Answer:
    r"""Does each sequence weigh the same in the loss, or each token?

    A sequence's weight is the change of the loss when its advantage moves, at
    :math:`r = 1`: :math:`c_i = -\bigl(\mathcal L(A + e_i) - \mathcal L(A)\bigr)`,
    :math:`e_i` one more unit of advantage on every token of row :math:`i`
    (exact: at :math:`r = 1` the known losses are linear in :math:`A`; a KL or
    entropy term cancels).  *Per sequence*: :math:`c_i` does not depend on the
    row's length :math:`n_i` (``seq-mean-token-mean``, GSPO's sequence mean);
    *per token*: :math:`c_i \propto n_i` (``token-mean``, ``seq-mean-token-sum``
    — for a sequence-level loss, a sequence term broadcast over its tokens and
    then averaged over tokens weighs each sequence by its length); *other*: any
    other dependence, with the measured :math:`c_i`.

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
    loss = _f64(_require_loss(loss))
    lengths = (1, 2, 4, 6)
    mask = _mask(6, lengths)
    old = _old(mask.shape, seed=3)
    adv = torch.ones_like(old)
    base = float(loss(old, old, adv, mask).detach())
    c = []
    for i in range(len(lengths)):
        moved = adv.clone()
        moved[i] += 1.0
        c.append(-(float(loss(old, old, moved, mask).detach()) - base))
    c_arr, n = np.array(c), np.array(lengths, dtype=float)
    sequence_level = _row_coupled(loss)
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


# ------------------------------------------------------------------ the KL term


_KL_LM = dict(V=3, L=2, seed=0)  # 7 responses, 3 prefixes: the two-step case parts per-token from whole-sequence divergences


def _kl_setting():
    lm = TinyLM(**_KL_LM)
    theta = perturb(lm.theta0, 0.5, seed=1)
    ref = perturb(theta, 0.6, seed=2)
    return lm, theta, ref


def _divergence_gradients(lm: TinyLM, theta: torch.Tensor, ref_theta: torch.Tensor) -> dict:
    """The exact gradients of the candidate divergences at ``theta`` (sequences enumerated, prefixes weighted by pi's reach)."""
    th = theta.detach().clone().requires_grad_(True)
    log_seq, log_ref = lm.sequence_log_prob(th), lm.sequence_log_prob(ref_theta).detach()
    p, q = log_seq.exp(), log_ref.exp()
    logits, ref_logits = lm.logits(th), lm.logits(ref_theta).detach()
    log_pi, log_rho = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
    valid = lm.mask > 0
    reach = torch.zeros(lm.n_prefixes, dtype=F64).index_add_(0, lm.prefix_rows[valid], p.detach()[:, None].expand_as(lm.mask)[valid])
    per_prefix = {
        "reverse KL per token": (log_pi.exp() * (log_pi - log_rho)).sum(-1),
        "forward KL per token": (log_rho.exp() * (log_rho - log_pi)).sum(-1),
        "total variation per token": (log_pi.exp() - log_rho.exp()).abs().sum(-1),  # 2 TV: the abs estimator's expected gradient
    }
    objectives = {"reverse KL": (p * (log_seq - log_ref)).sum(), "forward KL": (q * (log_ref - log_seq)).sum(),
                  **{k: (reach * v).sum() for k, v in per_prefix.items()}}
    return {k: torch.autograd.grad(v, th, retain_graph=True)[0] for k, v in objectives.items()}


def _kl_forms(lp: torch.Tensor, ref: torch.Tensor) -> dict:
    """Each shipped form's derivative in log pi at the probe's tokens (on policy), from the package's own forms."""
    def derivative(f):
        x = lp.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(f(x).sum(), x)
        return g

    return {
        "k1": derivative(lambda x: verl_kl_penalty(x, ref, kl_penalty="k1")),
        "k2 (mse), a straight-through k*+, or k1 in the reward on its own token": derivative(lambda x: verl_kl_penalty(x, ref, kl_penalty="k2")),
        "k3": derivative(lambda x: kl_penalty(x, ref, estimator="k3")),
        "low_var_kl (verl's clamped k3)": derivative(lambda x: verl_kl_penalty(x, ref, kl_penalty="low_var_kl")),
        "abs": derivative(lambda x: verl_kl_penalty(x, ref, kl_penalty="abs")),
        "importance-weighted k3 (TRL's bias-corrected KL)": derivative(lambda x: bias_corrected_kl(x, lp.detach(), ref, torch.ones_like(x))),
    }


def kl_gradient(loss: TrainerLoss) -> Answer:
    r"""Which divergence's gradient does the loss's KL term give in expectation?

    Measured on the toy LM ``TinyLM(V=3, L=2)`` (every response enumerated),
    on policy (:math:`\pi_{\mathrm{old}} = \pi_\theta`), the reference a
    perturbed copy: the loss is called on every response as a row with
    :math:`A = 0` (only its KL term moves it), each token's gradient is divided
    by the token's aggregation factor :math:`\kappa` (read with :math:`A = 1`
    and :math:`A = 0` subtracted), and the expected gradient

    .. math::

        G = \sum_o \pi(o) \sum_t c_{ot}\,\nabla_\theta \log\pi(o_t \mid o_{<t}),
        \qquad c_{ot} = \frac{\partial\mathcal L}{\partial\log\pi_{ot}} \Big/ \kappa_{ot},

    is compared with the exact gradients of the reverse and forward KL of the
    whole responses, and of the per-token reverse KL, forward KL and total
    variation :math:`\sum_h d_\pi(h)\,D(\pi_h, \pi_{\mathrm{ref},h})` with the
    prefix distribution :math:`d_\pi` held fixed (what a per-token loss can
    descend).  The verdict is the one :math:`G` is a multiple of (to
    :data:`RTOL`), the multiple (the KL coefficient) in the evidence;
    otherwise *neither*, with its distance from the reverse KL's direction.
    Per state (:func:`derivations.trust_region.kl_estimator_gradients`,
    :func:`~derivations.trust_region.kl_form_gradients`): ``k2``, the ``+``
    forms, importance-weighted ``k3`` and ``k1`` in the reward give the reverse
    KL; ``k3`` and ``low_var_kl`` the forward KL; ``k1`` nothing; ``abs`` twice
    the total variation.  Over whole responses only ``k1`` in the reward,
    summed over the later tokens, gives the reverse KL of the responses.

    Not applicable when the function does not take ``ref_log_prob`` (or
    neither its loss nor its gradient moves with it).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import kl_gradient
    >>> def grpo_with_k3(old_log_prob, log_prob, advantages, response_mask, ref_log_prob):
    ...     ratio = torch.exp(log_prob - old_log_prob)
    ...     kl = torch.exp(ref_log_prob - log_prob) - (ref_log_prob - log_prob) - 1
    ...     per_token = -ratio * advantages + 0.04 * kl
    ...     return (per_token * response_mask).sum() / response_mask.sum()
    >>> a = kl_gradient(TrainerLoss(grpo_with_k3))
    >>> a.verdict, dict(a.evidence)["coefficient"], dict(a.evidence)["estimator"]
    ('forward KL per token', 0.04, "k3 = low_var_kl (verl's clamped k3)")
    """
    loss = _f64(_require_loss(loss))
    applies, why = _responds(loss, "ref_log_prob")
    if not applies:
        return _not_applicable("kl_gradient", why)
    lm, theta, ref_theta = _kl_setting()
    lp, ref = lm.token_log_probs(theta).detach(), lm.token_log_probs(ref_theta).detach()
    mask, valid = lm.mask, lm.mask > 0
    zero, one = torch.zeros_like(lp), torch.ones_like(lp)
    _, g_kl = loss.grad(lp, lp, zero, mask, ref_log_prob=ref)
    _, g_one = loss.grad(lp, lp, one, mask, ref_log_prob=ref)
    kappa = g_kl - g_one  # -dL/dlog pi of the policy term alone, at r = 1, A = 1
    has_policy = bool((kappa[valid] != 0).all())
    c = torch.where(valid, g_kl / (kappa if has_policy else one), zero)
    th = theta.detach().clone().requires_grad_(True)
    surrogate = (lm.probs(theta).detach()[:, None] * c * lm.token_log_probs(th)).sum()
    (G,) = torch.autograd.grad(surrogate, th)
    evidence: list = [("kappa_divided_out", has_policy)]
    fits = _kl_forms(lp, ref)
    matched = [name for name, f in fits.items() if _multiple(c[valid], f[valid])[1] <= RTOL]
    evidence.append(("estimator", " = ".join(matched) if matched else None))
    targets = _divergence_gradients(lm, theta, ref_theta)
    size = float(G.norm())
    if size <= 1e-12 * float(max(t.norm() for t in targets.values())):
        return Answer("kl_gradient", "no gradient", "the KL term's expected gradient is 0 (as k1's: a log-probability's score has mean 0)",
                      tuple(evidence + [("expected_gradient_norm", size)]))
    for name, target in targets.items():
        s, residual = _multiple(G, target)
        if residual <= RTOL:
            sign = "" if s > 0 else " with a negative coefficient: the loss ascends it"
            per = " (the prefixes' distribution held fixed: a per-token term)" if name.endswith("per token") else " of whole responses"
            return Answer("kl_gradient", name, f"the expected gradient is {s:.6g} x the gradient of the {name.removesuffix(' per token')}{per}{sign}",
                          tuple(evidence + [("coefficient", round(s, 12)), ("residual", residual)]))
    s, residual = _multiple(G, targets["reverse KL per token"])
    return Answer("kl_gradient", "neither", f"the expected gradient is no multiple of a KL's or the total variation's: it is {residual:.3g} "
                  f"(relative) from {s:.4g} x the per-token reverse KL's", tuple(evidence + [("coefficient", round(s, 12)), ("bias", residual)]))


def _multiple(g: torch.Tensor, target: torch.Tensor) -> tuple[float, float]:
    """``(s, relative residual)`` of the least-squares fit ``g = s * target``."""
    tt = float(target @ target)
    if tt == 0:
        return 0.0, math.inf if float(g.norm()) > 0 else 0.0
    s = float(g @ target) / tt
    return s, float((g - s * target).norm()) / max(float(g.norm()), 1e-300)


# ------------------------------------------------------------------ the rollout correction


def _correction_grid():
    """Single-token rows at log-ratios inside every trust region: d1 = log pi - log pi_old, d2 = log pi_old - log mu, two levels, A = +-1."""
    rows = [(d1, d2, level) for d1 in (-0.04, 0.0, 0.05) for d2 in (-0.08, 0.0, 0.06) for level in (-1.2, -2.1)]
    d1, d2, level = (torch.tensor(x, dtype=F64)[:, None] for x in zip(*rows))
    old = level
    new, rollout = old + d1, old - d2
    adv = torch.cat([torch.ones_like(old), -torch.ones_like(old)])
    return torch.cat([new, new]), torch.cat([old, old]), torch.cat([rollout, rollout]), adv


def correction(loss: TrainerLoss) -> Answer:
    r"""Is the rollout-correction weight detached, and applied once?

    Tokens were sampled by the rollout engine :math:`\mu`; a correct loss gives
    each token inside the trust region the gradient weight
    :math:`\pi_\theta/\mu` in all: the PPO ratio against :math:`\pi_{\mathrm{old}}`
    times a detached :math:`\pi_{\mathrm{old}}/\mu` (verl's decoupled mode), the
    PPO ratio against :math:`\mu` alone (verl's ``bypass_mode`` with
    ``ppo_clip``: old log-probs := rollout log-probs, no second weight), or
    :math:`-\mathrm{sg}(\pi_\theta/\mu)\,A\log\pi_\theta` (``bypass_mode`` with
    ``reinforce``).  The weight is read with each token alone in a row,
    :math:`w = -(\partial\mathcal L/\partial\log\pi)/(\kappa A)`, at log-ratios
    within :math:`\pm 0.08` (inside every clip and cap), with
    :math:`\pi_{\mathrm{old}} \ne \mu` and with :math:`\pi_{\mathrm{old}} = \mu`
    (as bypass mode passes them), and compared with

    * :math:`\pi/\mu`: **once**;
    * :math:`\pi/\pi_{\mathrm{old}}`: **not applied** (the rollout log-prob changes nothing);
    * :math:`\pi/\mu` times :math:`\pi/\mu`, :math:`\pi/\pi_{\mathrm{old}}` or
      :math:`\pi_{\mathrm{old}}/\mu`: **twice** (a PPO ratio already against
      the rollout policy, times a rollout weight);
    * otherwise **not detached** when a gradient reaches ``rollout_log_prob``
      (a weight built from it without ``.detach()``: its own derivative joins
      the gradient), else **other**.

    The evidence says whether the weight is detached (no gradient in
    ``rollout_log_prob``) whatever the verdict.

    Not applicable when the function does not take ``rollout_log_prob``.

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import correction
    >>> def bypass_ppo_times_weight(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    ...     ratio = torch.exp(log_prob - old_log_prob)         # in bypass mode old_log_prob is the rollout's
    ...     weight = torch.exp(log_prob - rollout_log_prob).detach().clamp(max=2.0)
    ...     per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages) * weight
    ...     return (per_token * response_mask).sum() / response_mask.sum()
    >>> a = correction(TrainerLoss(bypass_ppo_times_weight))
    >>> a.verdict, a.ok
    ('twice', False)
    >>> print(a.explanation)
    the token weight is pi/mu x pi/pi_old: the correction is applied twice (equal to (pi/mu)^2 when old log-probs are the rollout's, bypass mode)
    """
    loss = _f64(_require_loss(loss))
    applies, why = _responds(loss, "rollout_log_prob")
    if not applies:
        return _not_applicable("correction", why)
    new, old, rollout, adv = _correction_grid()
    mask = torch.ones_like(new)
    kappa = -_pg(loss, old, old, torch.ones_like(old), mask, rollout_log_prob=old)
    if not bool((kappa != 0).all()) or not bool(torch.isfinite(kappa).all()):
        return Answer("correction", "other", "no gradient at r = 1 with the rollout log-probs equal to the old ones: no weight to read", ok=False)
    w = -_pg(loss, old, new, adv, mask, rollout_log_prob=rollout) / (kappa * adv)
    pi_mu, pi_old, old_mu = (new - rollout).exp(), (new - old).exp(), (old - rollout).exp()
    candidates = {
        "once": (pi_mu, "the token weight is pi/mu: the correction is applied once"),
        "not applied": (pi_old, "the token weight is pi/pi_old: the rollout log-probs change nothing, so the sampler's mismatch is not corrected"),
        "twice pi/mu": (pi_mu * pi_mu, "the token weight is (pi/mu)^2: the correction is applied twice"),
        "twice pi/pi_old": (pi_mu * pi_old, "the token weight is pi/mu x pi/pi_old: the correction is applied twice "
                                            "(equal to (pi/mu)^2 when old log-probs are the rollout's, bypass mode)"),
        "twice pi_old/mu": (pi_mu * old_mu, "the token weight is pi/mu x pi_old/mu: the rollout weight is applied on top of a ratio "
                                            "that already corrects for mu"),
    }
    leak = _rollout_gradient(loss, old, new, adv, mask, rollout)
    evidence = (("weight_over_pi_mu", (float((w / pi_mu).min()), float((w / pi_mu).max()))), ("detached", leak == 0),
                ("rollout_gradient", leak))
    for key, (target, why) in candidates.items():
        if _same(w, target):
            verdict = key.split(" pi")[0]
            if leak and verdict == "once":
                why += " (its weight is not detached, but depends on no log-prob the optimizer moves)"
            return Answer("correction", verdict, why, evidence, ok=verdict == "once")
    if leak:
        return Answer("correction", "not detached", f"the correction weight is not detached (the loss has a gradient up to {leak:.3g} in "
                      f"rollout_log_prob), so its own derivative joins the gradient: the token weight is {_farthest(w / pi_mu):.6g} x pi/mu "
                      "at the farthest probe", evidence, ok=False)
    return Answer("correction", "other", f"the token weight is neither pi/mu nor a product of two ratios: up to {_farthest(w / pi_mu):.6g} x pi/mu",
                  evidence, ok=False)


def _rollout_gradient(loss: TrainerLoss, old, new, adv, mask, rollout) -> float:
    """The largest gradient of the loss in the rollout log-probs: 0 when every weight built from them is detached."""
    mu = rollout.clone().requires_grad_(True)
    value = loss(old, new, adv, mask, rollout_log_prob=mu)
    g = torch.autograd.grad(value, mu, allow_unused=True)[0] if value.requires_grad else None
    return 0.0 if g is None else float(g.abs().max())


# ------------------------------------------------------------------ the sequence weight


def _lagging_unigram(V: int = 3, L: int = 4, lag: float = 2e-5, seed: int = 6):
    """Every response of lengths 1..L from i.i.d. tokens: ``(log pi, log mu, mask, mu(response), lengths)``, mu a sampler that lags pi."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(V, generator=gen, dtype=F64)
    log_pi = torch.log_softmax(z, -1)
    log_mu = torch.log_softmax(z + lag * torch.randn(V, generator=gen, dtype=F64), -1)
    rows = [seq for n in range(1, L + 1) for seq in itertools.product(range(V), repeat=n)]
    tokens = torch.zeros(len(rows), L, dtype=torch.int64)
    lengths = torch.tensor([len(seq) for seq in rows])
    for i, seq in enumerate(rows):
        tokens[i, :len(seq)] = torch.tensor(seq)
    mask = _mask(L, lengths.tolist())
    lp, old = log_pi[tokens] * mask, log_mu[tokens] * mask
    return lp, old, mask, old.sum(1).exp(), lengths


def sequence_weight_scale(loss: TrainerLoss) -> Answer:
    r"""How does the loss's sequence importance weight spread as responses grow longer?

    A sequence weight is read off the gradient: with each response a row,
    :math:`w(o) = g_{ot}/g_{ot}|_{r = 1}` (the aggregation and the advantage
    cancel), the same on every token of the row.  The responses are every
    sequence of :math:`n = 1..4` tokens of a policy :math:`\pi` over 3 tokens
    whose sampler :math:`\mu` lags it (each token i.i.d., so the spread's
    growth is exact).  The form is named by an exact identity on every
    response: :math:`\log w = \sum_t \log r_t` (**product** of the token
    ratios: verl's and TRL's sequence IS, verl's ``rollout_is="sequence"``) or
    :math:`\log w = rac1n\sum_t \log r_t` (**geometric mean**: GSPO,
    ms-swift, OpenRLHF's ``seq-mask-tis``).  The spread is
    :math:`\mathrm{Var}_\mu[\log w \mid n]`, and the growth is the slope
    :math:`p` of :math:`\log\mathrm{Var}` against :math:`\log n`: with
    independent tokens :math:`p = 1` for a product (the log-weight is a sum of
    :math:`n` log-ratios, and :math:`\mathrm{Var}_\mu[w] = (\mathbb E_\mu[r^2])^n - 1`
    grows exponentially) and :math:`p = -1` for a geometric mean (:math:`1/n^2`
    of it: it concentrates at 1, the price being that it is no importance weight
    of the response).  The lag is small (:math:`2	imes 10^{-5}` per logit), so
    the weight stays inside any clip; the slope does not depend on it.

    Not applicable when a token's gradient does not depend on the other tokens
    of its row (no sequence weight).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import sequence_weight_scale
    >>> def gspo(old_log_prob, log_prob, advantages, response_mask):
    ...     n = response_mask.sum(-1, keepdim=True)
    ...     s = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True) / n)
    ...     per_token = -torch.minimum(s * advantages, s.clamp(1 - 3e-4, 1 + 4e-4) * advantages)
    ...     return ((per_token * response_mask).sum(-1) / n.squeeze(-1)).mean()
    >>> a = sequence_weight_scale(TrainerLoss(gspo))
    >>> print(a.verdict, round(dict(a.evidence)["slope"], 6))
    geometric mean -1.0
    """
    loss = _f64(_require_loss(loss))
    if not _row_coupled(loss):
        return _not_applicable("sequence_weight_scale", "a token's gradient does not depend on the other tokens of its row: no sequence weight")
    lp, old, mask, mu, n = _lagging_unigram()
    valid = mask > 0
    adv = torch.ones_like(lp)
    g1, g = _pg(loss, old, old, adv, mask), _pg(loss, old, lp, adv, mask)
    if not bool((g1[valid] != 0).all()):
        return Answer("sequence_weight_scale", "other", "some token has no gradient at r = 1: no weight to read")
    w = torch.where(valid, g / torch.where(valid, g1, adv), adv)
    log_w = w[:, 0].log()
    same_in_row = bool(((w - w[:, :1]).abs() <= 1e-9 * w[:, :1].abs())[valid].all())
    d = (lp - old) * mask
    forms = {"product": d.sum(1), "geometric mean": d.sum(1) / n}
    scale = float(log_w.abs().max())
    name = next((k for k, f in forms.items() if same_in_row and float((log_w - f).abs().max()) <= 1e-6 * scale), "other")
    lengths = sorted(set(n.tolist()))
    variances = []
    for k in lengths:
        p = mu[n == k] / mu[n == k].sum()
        variances.append(float(p @ (log_w[n == k] - float(p @ log_w[n == k])) ** 2))
    slope = float(np.polyfit(np.log(lengths), np.log(variances), 1)[0])
    evidence = (("lengths", tuple(lengths)), ("log_weight_variance", tuple(variances)), ("slope", slope), ("same_on_every_token", same_in_row))
    if name == "other":
        return Answer("sequence_weight_scale", "other", "the weight is neither the product nor the geometric mean of the token ratios"
                      + (" (it differs between the tokens of a row)" if not same_in_row else "") + f"; Var[log w | n] grows as n^{slope:.2f}", evidence)
    growth = "grows" if slope > 0 else "shrinks"
    return Answer("sequence_weight_scale", name, f"{name if name == 'geometric mean' else 'product'} of the token ratios: "
                  f"Var[log w | n] {growth} as n^{slope:.2f} (n = {lengths[0]}..{lengths[-1]}, a sampler that lags)", evidence)


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
    loss = _Completed(_require_loss(loss), loss.dtype)
    mask = _mask(6, (2, 4, 6, 0))
    old = _old(mask.shape, seed=13)
    clean = {"old_log_prob": old, "log_prob": old + 0.05, "advantages": torch.linspace(-1.5, 2.0, mask.numel(), dtype=F64).reshape(mask.shape)}
    for role in ("ref_log_prob", "rollout_log_prob"):
        if _responds(loss, role)[0]:
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
"""Each question's function, by the name of its report field."""
