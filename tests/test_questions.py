"""The trainers' questions about a loss: every verdict on losses written as verl, TRL and OpenRLHF write them, bugs included.

Ground truth comes from the test, not from the checker: the aggregation factor
a formula gives (``1/(B T)``, ``(N - 1)/N``), the toy LM's divergences computed
here by other means (a loop over prefixes with ``torch.distributions``), the
importance weights written out, the exact spread of an i.i.d. log-weight.
Each verdict and each explanation branch of :mod:`numeric.variants.questions`
is produced by one of these losses; the tests name the tracker's bug each one
stands for.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sympy as sp
import torch

from derivations import DerivationError
from derivations import trust_region as tr
from numeric import TinyLM, perturb
from numeric.losses import bias_corrected_kl, high_entropy_mask, kl_penalty, verl_kl_penalty
from numeric.variants import (
    QUESTION_FUNCTIONS,
    QUESTIONS,
    Answer,
    correction,
    kl_gradient,
    mask_consistent,
    poison,
    sequence_weight_scale,
    weighting,
)
from numeric.variants.trainer_loss import TrainerLoss

F64 = torch.float64


def _ppo(old_log_prob, log_prob, advantages, eps=0.2):
    ratio = torch.exp(log_prob - old_log_prob)
    return -torch.minimum(ratio * advantages, ratio.clamp(1 - eps, 1 + eps) * advantages)


def _ev(answer: Answer) -> dict:
    return dict(answer.evidence)


# ------------------------------------------------------------------ the mask: numerator and denominator


def verl_token_mean(old_log_prob, log_prob, advantages, response_mask):
    """verl ``agg_loss(token-mean)``: masked sum over the mask's count."""
    return (_ppo(old_log_prob, log_prob, advantages) * response_mask).sum() / response_mask.sum()


def verl_seq_mean_token_mean(old_log_prob, log_prob, advantages, response_mask):
    """verl 1dda039 ``agg_loss(seq-mean-token-mean)``: all-masked rows excluded from the mean over sequences."""
    n = response_mask.sum(-1)
    rows = (_ppo(old_log_prob, log_prob, advantages) * response_mask).sum(-1) / (n + 1e-8)
    has = (n > 0).to(rows.dtype)
    return (rows * has).sum() / has.sum()


def trl_grpo_rows(old_log_prob, log_prob, advantages, response_mask):
    """TRL ``loss_type="grpo"``: a plain mean over rows, an all-masked (truncated) row counted in it."""
    per = _ppo(old_log_prob, log_prob, advantages)
    return ((per * response_mask).sum(-1) / response_mask.sum(-1).clamp(min=1.0)).mean()


def padded_mean(old_log_prob, log_prob, advantages, response_mask):
    """``(per_token * mask).mean()``: B*T slots in the denominator."""
    return (_ppo(old_log_prob, log_prob, advantages) * response_mask).mean()


def verl_norm_default(old_log_prob, log_prob, advantages, response_mask):
    """verl ``seq-mean-token-sum-norm`` with ``loss_scale_factor=None``: D is the mask's width T."""
    n = response_mask.sum(-1)
    has = (n > 0).to(log_prob.dtype)
    rows = (_ppo(old_log_prob, log_prob, advantages) * response_mask).sum(-1)
    return (rows * has).sum() / has.sum() / response_mask.shape[-1]


def _truncated(mask, max_completion_length):
    """A completion that ran out of room: its last valid slot is the last one allowed (no EOS), as TRL reads it from the ids."""
    positions = torch.arange(mask.shape[-1], device=mask.device)
    last = torch.where(mask > 0, positions, torch.full_like(positions, -1)).amax(-1)
    return last == max_completion_length - 1


def trl_dapo_truncation_bug(old_log_prob, log_prob, advantages, response_mask, max_completion_length=6):
    """TRL issue 6369: truncated completions out of the numerator, still in the denominator (``num_items_in_batch``)."""
    keep = response_mask * (~_truncated(response_mask, max_completion_length))[:, None].to(response_mask.dtype)
    return (_ppo(old_log_prob, log_prob, advantages) * keep).sum() / response_mask.sum()


def trl_dapo_truncation_fixed(old_log_prob, log_prob, advantages, response_mask, max_completion_length=6):
    """TRL PR 6439: the denominator counts the same tokens as the numerator."""
    keep = response_mask * (~_truncated(response_mask, max_completion_length))[:, None].to(response_mask.dtype)
    return (_ppo(old_log_prob, log_prob, advantages) * keep).sum() / keep.sum().clamp(min=1.0)


def trl_top_entropy(old_log_prob, log_prob, advantages, response_mask, fixed_denominator=True):
    """TRL ``top_entropy_quantile=0.5``: the low-entropy half silenced, the denominator still the mask's count.

    The token's surprisal ``-old_log_prob`` stands in for its entropy (a detached per-token statistic, as TRL's is).
    """
    keep = high_entropy_mask(-old_log_prob.detach(), response_mask, top_quantile=0.5)
    per = _ppo(old_log_prob, log_prob, advantages) * keep * response_mask
    denominator = response_mask.sum() if fixed_denominator else (keep * response_mask).sum().clamp(min=1.0)
    return per.sum() / denominator


def numerator_unmasked(old_log_prob, log_prob, advantages, response_mask):
    return _ppo(old_log_prob, log_prob, advantages).sum() / response_mask.sum()


def row_length_by_position(old_log_prob, log_prob, advantages, response_mask):
    """A row's length read as its last valid position + 1: a masked hole (a tool's output) still counts."""
    positions = torch.arange(response_mask.shape[-1], dtype=log_prob.dtype)
    n = (response_mask * (positions + 1)).amax(-1).clamp(min=1.0)
    return ((_ppo(old_log_prob, log_prob, advantages) * response_mask).sum(-1) / n).mean()


def truncation_by_count(old_log_prob, log_prob, advantages, response_mask, max_completion_length=6):
    """Truncation read from the row's count: masking a token of a truncated row un-truncates it (the selection moves)."""
    full = response_mask.sum(-1) >= max_completion_length
    keep = response_mask * (~full)[:, None].to(response_mask.dtype)
    return (_ppo(old_log_prob, log_prob, advantages) * keep).sum() / response_mask.sum()


def no_gradient(old_log_prob, log_prob, advantages, response_mask):
    return (log_prob - log_prob).sum()


LENGTHS, T = (2, 4, 6, 3), 6  # the probe's batch, as its docstring states it (row 2 fills the width)
B, N = len(LENGTHS), sum(LENGTHS)


@pytest.mark.parametrize("fn", [verl_token_mean, verl_seq_mean_token_mean, trl_dapo_truncation_fixed], ids=lambda f: f.__name__)
def test_consistent_masks(fn):
    a = mask_consistent(TrainerLoss(fn, fixed={"max_completion_length": 6} if "truncation" in fn.__name__ else None))
    assert (a.verdict, a.ok) == ("consistent", True), a
    ev = _ev(a)
    assert ev["masked_gradient"] == 0 and all(ev[k] == 1.0 for k in ("hole_factor", "row_factor", "padding_factor"))
    if fn is trl_dapo_truncation_fixed:  # the truncated row (6 tokens) is silenced, and out of the denominator too
        assert ev["silenced_tokens"] == 6 and ev["silenced_factor"] == 1.0 and "the tokens the function silences" in a.explanation


def test_a_row_mean_counts_an_all_masked_row():
    """TRL's grpo loss: a truncated completion masked whole still counts among the B rows: kappa x (B - 1)/B."""
    a = mask_consistent(TrainerLoss(trl_grpo_rows))
    assert a.verdict == "inconsistent" and a.explanation.startswith("an all-masked row still counts")
    assert _ev(a)["row_factor"] == pytest.approx((B - 1) / B, rel=1e-12)


def test_a_mean_over_slots_counts_padding_and_masked_rows():
    a = mask_consistent(TrainerLoss(padded_mean))
    ev = _ev(a)
    assert ev["hole_factor"] == 1.0  # a hole is one slot either way
    assert ev["row_factor"] == pytest.approx((B - 1) / B, rel=1e-12)  # B*T against (B-1)*T
    assert ev["padding_factor"] == pytest.approx(T / (T + 1), rel=1e-12)  # B*T against B*(T+1)


def test_verl_norm_with_its_default_D_counts_padding_only():
    a = mask_consistent(TrainerLoss(verl_norm_default))
    ev = _ev(a)
    assert a.verdict == "inconsistent" and a.explanation.startswith("padded slots count in the denominator")
    assert ev["row_factor"] == 1.0 and ev["padding_factor"] == pytest.approx(T / (T + 1), rel=1e-12)


def test_trl_issue_6369_truncated_completions_in_the_denominator():
    """The bug of TRL issue 6369: 6 truncated tokens silenced but counted; masking one of them moves the others by (N-1)/N."""
    a = mask_consistent(TrainerLoss(trl_dapo_truncation_bug, fixed={"max_completion_length": 6}))
    ev = _ev(a)
    assert a.verdict == "inconsistent" and a.explanation.startswith("tokens the function silences itself")
    assert ev["silenced_tokens"] == 6 and ev["silenced_factor"] == pytest.approx((N - 1) / N, rel=1e-12)
    assert ev["row_factor"] == 1.0 and ev["padding_factor"] == 1.0


def test_trl_top_entropy_mask_keeps_the_silenced_tokens_in_the_denominator():
    """TRL's top-entropy mask: its median moves when any token is masked, so the kept tokens are compared with a tied batch."""
    buggy = mask_consistent(TrainerLoss(trl_top_entropy))
    ev = _ev(buggy)
    assert buggy.verdict == "inconsistent" and buggy.explanation.startswith(f"tokens the function silences itself ({N // 2} of {N}")
    assert ev["silenced_tokens"] == N // 2 and ev["kept_over_tied"] == 1.0  # 1/N with and without the silencing: they count
    fixed = mask_consistent(TrainerLoss(trl_top_entropy, fixed={"fixed_denominator": False}))
    kept = N - N // 2  # the median of 15 tokens keeps 8
    assert fixed.verdict == "consistent" and _ev(fixed)["kept_over_tied"] == pytest.approx(N / kept, rel=1e-12)


def test_a_numerator_without_the_mask():
    a = mask_consistent(TrainerLoss(numerator_unmasked))
    assert a.verdict == "inconsistent" and a.explanation.startswith("a masked token still receives gradient")
    assert _ev(a)["masked_gradient"] == pytest.approx(1 / N, rel=1e-12)  # at r = 1, A = 1 every slot gets 1/N


def test_a_hole_counted_by_position():
    """Row 1 has 4 tokens; masking its token 1 leaves the position-length at 4, removing it makes it 3: x 3/4."""
    a = mask_consistent(TrainerLoss(row_length_by_position))
    assert a.verdict == "inconsistent" and a.explanation.startswith("a masked token inside a row still counts")
    assert _ev(a)["hole_factor"] == pytest.approx(3 / 4, rel=1e-12)


def test_mask_undecided_branches():
    a = mask_consistent(TrainerLoss(no_gradient))
    assert a.verdict == "undecided" and a.ok is None and "no finite gradient" in a.explanation
    b = mask_consistent(TrainerLoss(truncation_by_count, fixed={"max_completion_length": 6}))
    assert b.verdict == "undecided" and "move its own selection" in b.explanation and _ev(b)["silenced_factor"] is None


def trl_dr_grpo_top_entropy(old_log_prob, log_prob, advantages, response_mask):
    keep = high_entropy_mask(-old_log_prob.detach(), response_mask, top_quantile=0.5)
    return (_ppo(old_log_prob, log_prob, advantages) * keep * response_mask).sum() / (response_mask.shape[0] * 6.0)


def test_a_constant_denominator_with_an_internal_mask_is_consistent():
    """Dr. GRPO's constant normaliser D counts no tokens, so tokens silenced by the entropy mask cannot count either.

    (TRL's dr_grpo divides by ``B * max_completion_length``: that B counts an all-masked row, which the row probe reports.)
    """
    def constant_d_top_entropy(old_log_prob, log_prob, advantages, response_mask, D=24.0):
        keep = high_entropy_mask(-old_log_prob.detach(), response_mask, top_quantile=0.5)
        return (_ppo(old_log_prob, log_prob, advantages) * keep * response_mask).sum() / D
    a = mask_consistent(TrainerLoss(constant_d_top_entropy))
    assert a.verdict == "consistent" and _ev(a)["kept_over_tied"] == 1.0
    b = mask_consistent(TrainerLoss(trl_dr_grpo_top_entropy))
    assert b.verdict == "inconsistent" and _ev(b)["row_factor"] == pytest.approx((B - 1) / B, rel=1e-12)


# ------------------------------------------------------------------ weighting


def gspo(old_log_prob, log_prob, advantages, response_mask, agg="seq-mean-token-mean", eps=(3e-4, 4e-4)):
    n = response_mask.sum(-1, keepdim=True)
    s = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True) / n.clamp(min=1))
    per = -torch.minimum(s * advantages, s.clamp(1 - eps[0], 1 + eps[1]) * advantages)
    if agg == "token-mean":
        return (per * response_mask).sum() / response_mask.sum()
    return ((per * response_mask).sum(-1) / n.squeeze(-1).clamp(min=1)).mean()


def sqrt_length(old_log_prob, log_prob, advantages, response_mask):
    n = response_mask.sum(-1)
    return ((_ppo(old_log_prob, log_prob, advantages) * response_mask).sum(-1) / n.clamp(min=1).sqrt()).mean()


def zero_valued(old_log_prob, log_prob, advantages, response_mask):
    ratio = torch.exp(log_prob - old_log_prob)
    return (-(ratio - ratio.detach()) * advantages * response_mask).sum() / response_mask.sum()


W_LENGTHS = (1, 2, 4, 6)


@pytest.mark.parametrize("fn, fixed, verdict, weights", [
    (verl_token_mean, None, "per token", [n / sum(W_LENGTHS) for n in W_LENGTHS]),
    (verl_seq_mean_token_mean, None, "per sequence", [n / (n + 1e-8) / len(W_LENGTHS) for n in W_LENGTHS]),  # verl's n + 1e-8
    (gspo, {"agg": "token-mean"}, "per token", [n / sum(W_LENGTHS) for n in W_LENGTHS]),
    (gspo, None, "per sequence", [1 / len(W_LENGTHS)] * 4),
    (sqrt_length, None, "other", [math.sqrt(n) / len(W_LENGTHS) for n in W_LENGTHS]),
], ids=["verl token-mean", "verl seq-mean-token-mean", "GSPO broadcast, token-mean", "GSPO seq-mean", "sqrt length"])
def test_weighting(fn, fixed, verdict, weights):
    a = weighting(TrainerLoss(fn, fixed=fixed))
    ev = _ev(a)
    assert a.verdict == verdict and ev["lengths"] == W_LENGTHS
    assert np.allclose(ev["sequence_weights"], weights, rtol=1e-12, atol=0)
    assert ev["sequence_level"] == (fn is gspo)
    if verdict == "per token":
        assert ("broadcast over its tokens" in a.explanation) == (fn is gspo)


def test_weighting_undecided_on_a_zero_valued_surrogate():
    a = weighting(TrainerLoss(zero_valued))
    assert a.verdict == "undecided" and "does not move with the advantages" in a.explanation


# ------------------------------------------------------------------ the KL term


BETA = 0.05


def _policy_with(kl):
    """A GRPO-style token-mean loss plus BETA times a per-token KL term ``kl(log_prob, ref, old)``."""
    def fn(old_log_prob, log_prob, advantages, response_mask, ref_log_prob):
        per = _ppo(old_log_prob, log_prob, advantages) + BETA * kl(log_prob, ref_log_prob, old_log_prob)
        return (per * response_mask).sum() / response_mask.sum()
    return fn


def k1_reward_to_go(old_log_prob, log_prob, advantages, response_mask, ref_log_prob):
    """k1 in the reward (verl ``apply_kl_penalty``), returned to each token as REINFORCE's reward-to-go."""
    k1 = ((old_log_prob - ref_log_prob) * response_mask).detach()
    to_go = k1.flip(-1).cumsum(-1).flip(-1)
    ratio = torch.exp(log_prob - old_log_prob)
    per = -ratio * (advantages - BETA * to_go)
    return (per * response_mask).sum(-1).mean()


def forward_by_sequence_weight(old_log_prob, log_prob, advantages, response_mask, ref_log_prob):
    """Descends KL(pi_ref || pi) of whole responses: -sg(pi_ref(o)/pi(o)) log pi(o), aggregated per sequence."""
    rho = torch.exp(((ref_log_prob - log_prob) * response_mask).sum(-1, keepdim=True)).detach()
    per = _ppo(old_log_prob, log_prob, advantages) - BETA * rho * log_prob
    return (per * response_mask).sum(-1).mean()


def kl_only_k2(old_log_prob, log_prob, advantages, response_mask, ref_log_prob):
    return (0.5 * (log_prob - ref_log_prob) ** 2 * response_mask).sum() / response_mask.sum()


def ignores_ref(old_log_prob, log_prob, advantages, response_mask, ref_log_prob=None):
    return verl_token_mean(old_log_prob, log_prob, advantages, response_mask)


KL_FORMS = {  # name: (kl(log_prob, ref, old), expected verdict)
    "k1": (lambda lp, ref, old: verl_kl_penalty(lp, ref, kl_penalty="k1"), "no gradient"),
    "k2": (lambda lp, ref, old: verl_kl_penalty(lp, ref, kl_penalty="k2"), "reverse KL per token"),
    "k3 (TRL)": (lambda lp, ref, old: torch.exp(ref - lp) - (ref - lp) - 1, "forward KL per token"),
    "low_var_kl": (lambda lp, ref, old: verl_kl_penalty(lp, ref, kl_penalty="low_var_kl"), "forward KL per token"),
    "k3+": (lambda lp, ref, old: verl_kl_penalty(lp, ref, kl_penalty="k3+"), "reverse KL per token"),
    "abs": (lambda lp, ref, old: verl_kl_penalty(lp, ref, kl_penalty="abs"), "total variation per token"),
    "abs+": (lambda lp, ref, old: verl_kl_penalty(lp, ref, kl_penalty="abs+"), "reverse KL per token"),
    "importance-weighted k3": (lambda lp, ref, old: bias_corrected_kl(lp, old, ref, torch.ones_like(lp)), "reverse KL per token"),
    "k2 + k3": (lambda lp, ref, old: verl_kl_penalty(lp, ref, kl_penalty="k2") + kl_penalty(lp, ref, estimator="k3"), "neither"),
}


@pytest.fixture(scope="module")
def toy():
    """The toy LM the answer enumerates, and the five divergences' gradients computed here, prefix by prefix."""
    lm = TinyLM(V=3, L=2, seed=0)
    theta = perturb(lm.theta0, 0.5, seed=1)
    ref = perturb(theta, 0.6, seed=2)
    th = theta.clone().requires_grad_(True)
    dist = lambda t, h: torch.distributions.Categorical(logits=lm.logits(t)[lm.prefix_row(h)])  # noqa: E731
    p = lm.probs(theta)
    reach = {h: float(sum(p[o] for o, seq in enumerate(lm.seqs) if len(seq) > len(h) and seq[:len(h)] == h)) for h in lm.prefixes()}
    kl = torch.distributions.kl_divergence
    per_token = {
        "reverse KL per token": sum(reach[h] * kl(dist(th, h), dist(ref, h)) for h in lm.prefixes()),
        "forward KL per token": sum(reach[h] * kl(dist(ref, h), dist(th, h)) for h in lm.prefixes()),
        "total variation per token": sum(reach[h] * (dist(th, h).probs - dist(ref, h).probs).abs().sum() for h in lm.prefixes()),
    }
    seq_p, seq_q = lm.probs(th), lm.probs(ref)
    whole = {"reverse KL": (seq_p * (seq_p.log() - seq_q.log())).sum(), "forward KL": (seq_q * (seq_q.log() - seq_p.log())).sum()}
    grads = {k: torch.autograd.grad(v, th, retain_graph=True)[0] for k, v in {**per_token, **whole}.items()}
    return lm, theta, ref, grads


def _expected_gradient(lm, theta, ref, fn):
    """E_pi[grad of the KL term] by autograd of the loss summed per response (tokens' log-probs through theta, samples fixed)."""
    th = theta.clone().requires_grad_(True)
    lp = lm.token_log_probs(th)
    old, rlp, p = lp.detach(), lm.token_log_probs(ref).detach(), lm.probs(theta).detach()
    total = 0.0
    for o in range(lm.N):  # one response per call: the KL term summed over its tokens (the aggregation is 1 per token here)
        mask = lm.mask[o:o + 1]
        total = total + p[o] * fn(old[o:o + 1], lp[o:o + 1], torch.zeros_like(mask), mask, rlp[o:o + 1]) * mask.sum()
    return torch.autograd.grad(total, th)[0]


@pytest.mark.parametrize("name", list(KL_FORMS))
def test_kl_direction_of_each_shipped_form(name, toy):
    """The verdict is the divergence whose gradient, computed here, the loss's expected KL gradient (also computed here) is BETA times."""
    kl, verdict = KL_FORMS[name]
    fn = _policy_with(kl)
    a = kl_gradient(TrainerLoss(fn))
    assert a.verdict == verdict, a
    lm, theta, ref, grads = toy
    G = _expected_gradient(lm, theta, ref, fn)
    if verdict == "no gradient":
        assert float(G.norm()) < 1e-15
    elif verdict == "neither":
        assert all(float((G - (G @ g) / (g @ g) * g).norm()) > 1e-3 * float(G.norm()) for g in grads.values())
        assert _ev(a)["bias"] > 1e-3
    else:
        assert torch.allclose(G, BETA * grads[verdict], rtol=0, atol=1e-14)
        assert _ev(a)["coefficient"] == pytest.approx(BETA, rel=1e-10)


def test_kl_estimator_named(toy):
    ev = _ev(kl_gradient(TrainerLoss(_policy_with(KL_FORMS["k3+"][0]))))
    assert ev["estimator"].startswith("k2 (mse), a straight-through k*+")
    assert _ev(kl_gradient(TrainerLoss(_policy_with(KL_FORMS["abs"][0]))))["estimator"] == "abs"
    # on policy rho = 1 and d(rho k3)/dl = k3 + (1 - e^-Delta) = Delta: TRL's bias-corrected KL differentiates as k2 there
    both = _ev(kl_gradient(TrainerLoss(_policy_with(KL_FORMS["importance-weighted k3"][0]))))["estimator"]
    assert both.startswith("k2 (mse)") and both.endswith("importance-weighted k3 (TRL's bias-corrected KL)")


@pytest.mark.parametrize("fn, verdict", [(k1_reward_to_go, "reverse KL"), (forward_by_sequence_weight, "forward KL")],
                         ids=["k1 in the reward, to go", "sequence weight to the reference"])
def test_kl_of_whole_responses(fn, verdict, toy):
    """k1 in the reward carries later tokens' KL to earlier tokens: the reverse KL of whole responses, not per token."""
    a = kl_gradient(TrainerLoss(fn))
    assert a.verdict == verdict and "of whole responses" in a.explanation
    lm, theta, ref, grads = toy
    assert float((grads[verdict] - grads[f"{verdict} per token"]).norm()) > 1e-3  # the two readings differ on this toy LM
    assert _ev(a)["coefficient"] == pytest.approx(BETA, rel=1e-10)  # the KL and policy terms share the aggregation: kappa divides out


def test_kl_with_the_wrong_sign_and_without_a_policy_term():
    a = kl_gradient(TrainerLoss(_policy_with(lambda lp, ref, old: -verl_kl_penalty(lp, ref, kl_penalty="k2"))))
    assert a.verdict == "reverse KL per token" and _ev(a)["coefficient"] == pytest.approx(-BETA, rel=1e-10)
    assert "negative coefficient: the loss ascends it" in a.explanation
    b = kl_gradient(TrainerLoss(kl_only_k2))
    assert b.verdict == "reverse KL per token" and _ev(b)["kappa_divided_out"] is False
    lm = TinyLM(V=3, L=2, seed=0)
    assert _ev(b)["coefficient"] == pytest.approx(1 / float(lm.mask.sum()), rel=1e-10)  # token-mean's 1/N left in


def test_kl_not_applicable():
    for fn in (verl_token_mean, ignores_ref):
        a = kl_gradient(TrainerLoss(fn))
        assert a.verdict == "not applicable" and a.ok is None
    assert "does not take ref_log_prob" in kl_gradient(TrainerLoss(verl_token_mean)).explanation
    assert "moves with ref_log_prob" in kl_gradient(TrainerLoss(ignores_ref)).explanation


# ------------------------------------------------------------------ the rollout correction


def _ppo_vs(reference, log_prob, advantages, response_mask, weight=1.0):
    ratio = torch.exp(log_prob - reference)
    per = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages) * weight
    return (per * response_mask).sum() / response_mask.sum()


def verl_decoupled(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    """verl's decoupled mode: PPO against the recomputed old policy times the truncated, detached pi_old/mu (TIS)."""
    w = torch.exp((old_log_prob - rollout_log_prob).clamp(-20, 20)).clamp(max=2.0).detach()
    return _ppo_vs(old_log_prob, log_prob, advantages, response_mask, w)


def bypass_inside(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    """verl's bypass mode with ppo_clip, written inside the loss: the ratio against the rollout policy, no second weight."""
    return _ppo_vs(rollout_log_prob, log_prob, advantages, response_mask)


def verl_bypass_reinforce(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    """verl ``compute_policy_loss_reinforce``: -A log pi sg(min(pi/mu, 2))."""
    w = torch.exp((log_prob - rollout_log_prob).clamp(-20, 20)).clamp(max=2.0).detach()
    return (-advantages * log_prob * w * response_mask).sum() / response_mask.sum()


def weight_from_current(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    """The bug: the weight taken from the current policy (as bypass mode's REINFORCE takes it) on top of a PPO ratio."""
    w = torch.exp(log_prob - rollout_log_prob).detach()
    return _ppo_vs(old_log_prob, log_prob, advantages, response_mask, w)


def bypass_twice(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    """The PPO ratio already against the rollout policy, times the rollout weight: (pi/mu)^2."""
    return _ppo_vs(rollout_log_prob, log_prob, advantages, response_mask, torch.exp(log_prob - rollout_log_prob).detach())


def bypass_times_old_weight(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    return _ppo_vs(rollout_log_prob, log_prob, advantages, response_mask, torch.exp(old_log_prob - rollout_log_prob).detach())


def weight_only_logged(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    """The weight computed and returned in the loss's value for logging, never multiplied into the gradient."""
    w = torch.exp(old_log_prob - rollout_log_prob).detach()
    return _ppo_vs(old_log_prob, log_prob, advantages, response_mask) + (w * response_mask).sum().detach()


def reinforce_undetached(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    w = torch.exp(log_prob - rollout_log_prob)  # no .detach()
    return (-advantages * log_prob * w * response_mask).sum() / response_mask.sum()


def half_weight(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    return _ppo_vs(old_log_prob, log_prob, advantages, response_mask, torch.exp(0.5 * (old_log_prob - rollout_log_prob)).detach())


@pytest.mark.parametrize("fn, verdict, phrase", [
    (verl_decoupled, "once", "applied once"),
    (bypass_inside, "once", "applied once"),
    (verl_bypass_reinforce, "once", "applied once"),
    (weight_from_current, "twice", "pi/mu x pi/pi_old"),
    (bypass_twice, "twice", "(pi/mu)^2: the correction"),
    (bypass_times_old_weight, "twice", "pi/mu x pi_old/mu"),
    (weight_only_logged, "not applied", "change nothing"),
    (reinforce_undetached, "not detached", "its own derivative joins the gradient"),
    (half_weight, "other", "neither pi/mu nor"),
], ids=lambda x: x.__name__ if callable(x) else None)
def test_correction(fn, verdict, phrase):
    a = correction(TrainerLoss(fn))
    assert a.verdict == verdict and phrase in a.explanation and a.ok == (verdict == "once"), a


def test_correction_weights_by_hand():
    """The token weight of each written form, by autograd of one token alone: pi/mu once, (pi/mu)^2 twice (ground truth for the verdicts)."""
    old = torch.tensor([[-1.2]], dtype=F64)
    lp, mu = old + 0.05, old + 0.08  # pi/pi_old = e^0.05, pi_old/mu = e^-0.08
    for fn, power in ((verl_decoupled, 1), (bypass_twice, 2)):
        x = lp.clone().requires_grad_(True)
        fn(old, x, torch.ones_like(x), torch.ones_like(x), mu).backward()
        assert float(-x.grad) == pytest.approx(math.exp(power * (0.05 - 0.08)), rel=1e-12)
    assert _ev(correction(TrainerLoss(verl_bypass_reinforce)))["detached"] is True
    assert _ev(correction(TrainerLoss(reinforce_undetached)))["detached"] is False


def test_an_undetached_weight_of_the_old_policy_is_harmless():
    """verl's decoupled weight without .detach(): pi_old/mu depends on no log-prob the optimizer moves, so it is applied once."""
    def undetached(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
        return _ppo_vs(old_log_prob, log_prob, advantages, response_mask, torch.exp(old_log_prob - rollout_log_prob))
    a = correction(TrainerLoss(undetached))
    assert a.verdict == "once" and _ev(a)["detached"] is False and "not detached, but depends on no log-prob" in a.explanation


def test_correction_without_a_gradient_at_ratio_one():
    def rollout_only(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
        return (rollout_log_prob * response_mask).sum() + 0.0 * log_prob.sum()
    a = correction(TrainerLoss(rollout_only))
    assert a.verdict == "other" and a.ok is False and "no gradient at r = 1" in a.explanation


def test_correction_not_applicable():
    a = correction(TrainerLoss(verl_token_mean))
    assert a.verdict == "not applicable" and "rollout_log_prob" in a.explanation


# ------------------------------------------------------------------ the sequence weight


def seq_is_reinforce(old_log_prob, log_prob, advantages, response_mask):
    """verl's sequence IS on REINFORCE: -A log pi times the detached product of the token ratios."""
    w = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True)).detach()
    return (-advantages * log_prob * w * response_mask).sum(-1).mean()


def max_ratio(old_log_prob, log_prob, advantages, response_mask):
    d = torch.where(response_mask > 0, log_prob - old_log_prob, torch.full_like(log_prob, -1e9))
    w = torch.exp(d.amax(-1, keepdim=True)).detach()
    return (-advantages * log_prob * w * response_mask).sum(-1).mean()


@pytest.mark.parametrize("fn, verdict, power", [(seq_is_reinforce, "product", 1), (gspo, "geometric mean", -1)], ids=["product", "GSPO"])
def test_sequence_weight_spread(fn, verdict, power):
    """Independent tokens: Var[log w | n] is n times Var[log r] for the product, 1/n of it for the geometric mean."""
    a = sequence_weight_scale(TrainerLoss(fn))
    ev = _ev(a)
    assert a.verdict == verdict and ev["same_on_every_token"]
    v = np.array(ev["log_weight_variance"])
    assert np.allclose(v / v[0], np.array(ev["lengths"], dtype=float) ** power, rtol=1e-8)
    assert ev["slope"] == pytest.approx(power, abs=1e-8)
    assert ("grows" if power > 0 else "shrinks") in a.explanation


def token_times_sequence(old_log_prob, log_prob, advantages, response_mask):
    """A token ratio times the row's geometric mean: coupled, but not one weight per row."""
    d = (log_prob - old_log_prob) * response_mask
    s = torch.exp(d.sum(-1, keepdim=True) / response_mask.sum(-1, keepdim=True)).detach()
    return (-advantages * torch.exp(d) * s * response_mask).sum(-1).mean()


def first_token_dropped(old_log_prob, log_prob, advantages, response_mask):
    keep = response_mask * (torch.arange(response_mask.shape[-1]) > 0)
    return gspo(old_log_prob, log_prob, advantages, keep) + 0.0 * log_prob.sum()


def test_sequence_weight_branches():
    a = sequence_weight_scale(TrainerLoss(token_times_sequence))
    assert a.verdict == "other" and "(it differs between the tokens of a row)" in a.explanation and not _ev(a)["same_on_every_token"]
    b = sequence_weight_scale(TrainerLoss(first_token_dropped))
    assert b.verdict == "other" and "no gradient at r = 1" in b.explanation


def test_sequence_weight_other_and_not_applicable():
    a = sequence_weight_scale(TrainerLoss(max_ratio))
    assert a.verdict == "other" and "neither the product nor the geometric mean" in a.explanation
    b = sequence_weight_scale(TrainerLoss(verl_token_mean))
    assert b.verdict == "not applicable" and "no sequence weight" in b.explanation


# ------------------------------------------------------------------ poisoned slots


def where_then_exp(old_log_prob, log_prob, advantages, response_mask):
    keep = response_mask > 0
    log_ratio = torch.where(keep, log_prob - old_log_prob, torch.zeros_like(log_prob))
    per = torch.where(keep, _ppo(torch.zeros_like(log_ratio), log_ratio, torch.where(keep, advantages, 0.0)), 0.0)
    return per.sum() / response_mask.sum()


def mask_after_exp(old_log_prob, log_prob, advantages, response_mask):
    return (-torch.exp(log_prob - old_log_prob) * advantages * response_mask).sum() / response_mask.sum()


def cleaned_then_exp(old_log_prob, log_prob, advantages, response_mask):
    """NaN and inf replaced first, so only a finite value that overflows in exp leaks."""
    old, lp, adv = (torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0) for x in (old_log_prob, log_prob, advantages))
    return (-torch.exp(lp - old) * adv * response_mask).sum() / response_mask.sum()


def where_after_exp(old_log_prob, log_prob, advantages, response_mask):
    """The value masked by selection after exp: clean value, NaN gradient (0 * inf in exp's backward)."""
    per = -torch.exp(log_prob - old_log_prob) * torch.where(response_mask > 0, advantages, 0.0)
    return torch.where(response_mask > 0, per, 0.0).sum() / response_mask.sum()


def advantages_unmasked(old_log_prob, log_prob, advantages, response_mask):
    old, lp, adv = (torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0) for x in (old_log_prob, log_prob, advantages))
    ratio = torch.where(response_mask > 0, torch.exp(torch.where(response_mask > 0, lp - old, 0.0)), 0.0)
    return (-ratio * response_mask).sum() / response_mask.sum() - adv.mean()


def refuses(old_log_prob, log_prob, advantages, response_mask):
    if not bool(torch.isfinite(log_prob).all()):
        raise ValueError("log_prob must be finite")
    return where_then_exp(old_log_prob, log_prob, advantages, response_mask)


def verl_clamped(old_log_prob, log_prob, advantages, response_mask):
    """verl ``compute_policy_loss_vanilla``: the log-ratio clamped to [-20, 20] before exp, then ``agg_loss``'s product with the mask."""
    ratio = torch.exp((log_prob - old_log_prob).clamp(-20, 20))
    per = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages)
    return (per * response_mask).sum() / response_mask.sum()


def test_poison_clean():
    a = poison(TrainerLoss(where_then_exp))
    assert (a.verdict, a.ok) == ("clean", True) and _ev(a)["findings"] == ()


@pytest.mark.parametrize("fn, first, cause", [
    (mask_after_exp, ("old_log_prob", "NaN", (0, 2), "loss", "nan"), "product with the mask (NaN * 0"),
    (cleaned_then_exp, ("old_log_prob", "-1e4", (0, 2), "loss", "nan"), "exp overflows in the slot"),
    (where_after_exp, ("old_log_prob", "NaN", (0, 2), "gradient", "nan"), "backward pass runs through the slot"),
    (advantages_unmasked, ("advantages", "NaN", (0, 2), "loss"), "the input is not masked"),
], ids=lambda x: x.__name__ if callable(x) else None)
def test_poison_leaks(fn, first, cause):
    a = poison(TrainerLoss(fn))
    findings = _ev(a)["findings"]
    assert a.verdict == "leaks" and a.ok is False and findings[0][:len(first)] == first and cause in a.explanation


def test_poison_value_by_hand():
    """The ground truth of the two leaks, written out: inf * 0 is NaN, and exp's backward at inf multiplies 0 by inf."""
    x = torch.tensor([1e4, 0.0], dtype=F64, requires_grad=True)
    assert math.isnan(float((torch.exp(x) * torch.tensor([0.0, 1.0], dtype=F64)).sum().detach()))
    torch.where(torch.tensor([False, True]), torch.exp(x), 0.0).sum().backward()
    assert math.isnan(float(x.grad[0]))


def test_poison_overflow_threshold_follows_the_dtype():
    """verl's clamp at 20 keeps exp finite in fp64 and fp32; the ratio overflow pair is past log(max) of the dtype."""
    for dtype in (F64, torch.float32):
        a = poison(TrainerLoss(verl_clamped, dtype=dtype))
        labels = {f[1] for f in _ev(a)["findings"]}
        assert not any(label.startswith("log-ratio") for label in labels)
        assert _ev(a)["dtype"] == str(dtype).removeprefix("torch.")
    leaky = poison(TrainerLoss(cleaned_then_exp, dtype=torch.float32))
    over = [f for f in _ev(leaky)["findings"] if f[1].startswith("log-ratio")]
    threshold = math.log(torch.finfo(torch.float32).max)
    assert over and float(over[0][1].split()[1]) > threshold and float(over[0][1].split()[1]) / 1.2 == pytest.approx(threshold, abs=0.5)


def test_poison_raises():
    a = poison(TrainerLoss(refuses))
    assert a.verdict == "raises" and "must be allowed to hold anything" in a.explanation and _ev(a)["refused"]


# ------------------------------------------------------------------ the answers as records, bad input


def test_answers_are_records_with_known_verdicts():
    answers = [f(TrainerLoss(_policy_with(KL_FORMS["k2"][0]))) for f in QUESTION_FUNCTIONS.values()]
    for a in answers:
        assert a.verdict in QUESTIONS[a.question]
        json.dumps(a.as_dict())
        assert str(a).startswith(a.question + ": ")
    with pytest.raises(AttributeError):
        answers[0].verdict = "x"  # type: ignore[misc]


@pytest.mark.parametrize("name", list(QUESTION_FUNCTIONS))
def test_bad_input(name):
    fn = QUESTION_FUNCTIONS[name]
    for bad in (verl_token_mean, "loss", None):
        with pytest.raises(TypeError, match="loss must be a numeric.variants.trainer_loss.TrainerLoss"):
            fn(bad)


# ------------------------------------------------------------------ verl's KL forms against the derivation


LP = torch.log(torch.tensor([[0.5, 0.01, 0.3], [0.2, 0.9, 0.05]], dtype=F64))
REF = torch.log(torch.tensor([[0.25, 0.5, 0.3], [0.4, 0.5, 0.9]], dtype=F64))


def _value_and_grad(f, lp=LP):
    x = lp.clone().requires_grad_(True)
    v = f(x)
    (g,) = torch.autograd.grad(v.sum(), x)
    return v.detach(), g


def test_verl_forms_are_the_derived_formulas():
    delta = LP - REF
    lam = {k: sp.lambdify(tr.delta, getattr(tr, k), "math") for k in ("k1", "k2", "k3")}
    derived = {"k1": lam["k1"], "k2": lam["k2"], "abs": abs}
    for name, alias in (("k1", "kl"), ("k2", "mse"), ("abs", "abs")):
        v, g = _value_and_grad(lambda x, name=name: verl_kl_penalty(x, REF, kl_penalty=name))
        assert torch.allclose(v, torch.tensor([[derived[name](float(d)) for d in row] for row in delta], dtype=F64), rtol=1e-15, atol=0)
        assert torch.equal(v, verl_kl_penalty(LP, REF, kl_penalty=alias))
    v, g = _value_and_grad(lambda x: verl_kl_penalty(x, REF, kl_penalty="low_var_kl"))
    k3 = torch.tensor([[lam["k3"](float(d)) for d in row] for row in delta], dtype=F64)
    assert torch.allclose(v, k3.clamp(max=10), rtol=1e-14) and float(v[0, 1]) == 10.0  # Delta = log(0.02) < Delta_-: clamped
    assert torch.equal(v, verl_kl_penalty(LP, REF, kl_penalty="k3")) and torch.equal(v, kl_penalty(LP, REF, estimator="k3", clamp=True))
    assert float(g[0, 1]) == 0.0 and float(g[0, 0]) == pytest.approx(1 - math.exp(-float(delta[0, 0])), rel=1e-14)


@pytest.mark.parametrize("base", ["k1", "abs", "low_var_kl", "k3", "kl", "mse", "k2"])
def test_straight_through_keeps_the_value_and_takes_k2s_gradient(base):
    v, g = _value_and_grad(lambda x: verl_kl_penalty(x, REF, kl_penalty=base + "+"))
    v0, _ = _value_and_grad(lambda x: verl_kl_penalty(x, REF, kl_penalty=base))
    assert torch.equal(v, v0) and torch.allclose(g, LP - REF, rtol=1e-15, atol=0)


def test_low_var_kl_silences_beyond_the_derived_roots():
    """The gradient is k3's strictly between 11 + W_{-1}(-e^-11) and 11 + W_0(-e^-11), and 0 beyond: verl's clamp at 10 binds first."""
    lo, hi = (float(11 + sp.LambertW(-sp.exp(-11), k)) for k in (-1, 0))
    assert lo == pytest.approx(-2.6108686, abs=1e-6) and hi == pytest.approx(10.9999833, abs=1e-6)
    ref = torch.zeros(4, dtype=F64)
    lp = torch.tensor([lo + 1e-6, lo - 1e-6, hi - 1e-4, hi + 1e-4], dtype=F64)
    _, g = _value_and_grad(lambda x: verl_kl_penalty(x, ref, kl_penalty="low_var_kl"), lp)
    assert float(g[0]) == pytest.approx(1 - math.exp(-(lo + 1e-6)), rel=1e-9) and float(g[1]) == 0.0
    assert float(g[2]) == pytest.approx(1 - math.exp(-(hi - 1e-4)), rel=1e-12) and float(g[3]) == 0.0


def test_verl_kl_penalty_masks_and_refuses():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    lp = LP.clone()
    lp[mask == 0] = math.nan
    x = lp.clone().requires_grad_(True)
    for name in ("low_var_kl+", "abs"):
        v = verl_kl_penalty(x, REF, mask, kl_penalty=name)
        (g,) = torch.autograd.grad(v.sum(), x)
        assert bool(torch.isfinite(v).all()) and bool((v[mask == 0] == 0).all()) and bool((g[mask == 0] == 0).all())
    with pytest.raises(ValueError, match="kl_penalty='full' needs the whole vocabulary"):
        verl_kl_penalty(LP, REF, kl_penalty="full")
    with pytest.raises(ValueError, match="kl_penalty must be one of"):
        verl_kl_penalty(LP, REF, kl_penalty="k4")


def test_expected_gradient_per_state_matches_the_derivation():
    """At each prefix of a toy LM: E_pi[grad abs] = 2 grad TV, E_pi[grad k*+] = grad KL(pi || ref) (autograd, not the derivation's algebra)."""
    lm = TinyLM(V=4, L=2, seed=3)
    theta, ref = perturb(lm.theta0, 0.4, seed=1), perturb(lm.theta0, 0.4, seed=2)
    th = theta.clone().requires_grad_(True)
    log_pi, log_rho = torch.log_softmax(lm.logits(th), -1), torch.log_softmax(lm.logits(ref), -1).detach()
    pi = log_pi.exp()

    def expected(name):
        return torch.autograd.grad((pi.detach() * verl_kl_penalty(log_pi, log_rho, kl_penalty=name)).sum(), th, retain_graph=True)[0]

    reverse = torch.autograd.grad((pi * (log_pi - log_rho)).sum(), th, retain_graph=True)[0]
    tv = torch.autograd.grad(0.5 * (pi - log_rho.exp()).abs().sum(), th, retain_graph=True)[0]
    assert torch.allclose(expected("abs"), 2 * tv, rtol=0, atol=1e-15)
    for name in ("k1+", "k3+", "abs+", "low_var_kl+", "k2"):
        assert torch.allclose(expected(name), reverse, rtol=0, atol=1e-15)


def test_kl_form_derivation_slips_are_refused():
    d = tr.kl_form_gradients(3)
    abs_step = 5
    with pytest.raises(DerivationError):
        d.replaced(abs_step, rhs=d.steps[abs_step].rhs / 2).verify()  # E[grad |Delta|] = grad TV: the factor 2 dropped
    st = 2  # the straight-through form differentiated as k_* instead of k_2
    with pytest.raises(DerivationError):
        d.replaced(st, rhs=sp.Derivative(tr.k_star(tr.ell - tr.ell_ref), tr.ell)).verify()
    c = tr.low_var_kl_clamp()
    with pytest.raises(DerivationError):
        c.replaced(3, rhs=sp.Integer(11)).verify()  # k3 = 10 at the root, not 11
