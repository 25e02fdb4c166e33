"""The ``off_policy`` check suite: the course's section 8 (8a-8g) and the schemes' bias formulas, on both exact models.

Also the batched weights against a per-sequence loop in plain Python, and
padding that holds NaN or infinities.
"""

from __future__ import annotations

import math

import sympy as sp
import torch

from derivations.corrections import k3_summands, k3_symbols

from ..checks import check, maxabs, suite
from .corrections import RULES, m2po_limit, rule_moments
from .masks import loglinear_proximal_log_prob, rejection_sampling_weight, trust_region_mask
from .models import (
    BAND,
    CAP,
    GEO_BAND,
    KL_THRESHOLD,
    SCHEMES,
    Episodes,
    agent_states,
    chain_score_moments,
    credit_assignment,
    estimator_samples,
    feedback_term,
    sampler_moments,
    scheme_moments,
    tinylm_episodes,
    token_bias_closed_form,
    truncation_bias,
    two_turn_agent,
)
from .rollout import rollout_rejection_mask
from .weights import (
    geometric_sequence_mask,
    kl_rejection_mask,
    masked_sequence_ratio,
    masked_token_ratio,
    sequence_ratio,
    token_ratio,
    truncated_sequence_ratio,
    truncated_token_ratio,
)

F64 = torch.float64

def _naive_weights(name: str, lp: list, lmu: list, m: list) -> list:
    """One sequence, one scheme primitive, in plain Python floats (the loop the batched path must match)."""
    r = [math.exp(a - b) if k else 0.0 for a, b, k in zip(lp, lmu, m)]
    n = sum(m)
    seq = math.exp(sum(a - b for a, b, k in zip(lp, lmu, m) if k))
    geo = math.exp(sum(a - b for a, b, k in zip(lp, lmu, m) if k) / max(n, 1))
    kl = sum(math.exp(a - b) - 1 - (a - b) for a, b, k in zip(lp, lmu, m) if k)
    per_seq = {
        "sequence": seq, "truncated_sequence": min(seq, CAP), "masked_sequence": seq if seq <= CAP else 0.0,
        "geometric": float(GEO_BAND[0] <= geo <= GEO_BAND[1]), "kl": float(kl <= KL_THRESHOLD),
    }
    if name in per_seq:
        return [per_seq[name] if k else 0.0 for k in m]
    per_token = {"token": lambda x: x, "truncated_token": lambda x: min(x, CAP), "masked_token": lambda x: x if BAND[0] <= x <= BAND[1] else 0.0}
    return [per_token[name](x) if k else 0.0 for x, k in zip(r, m)]


_PRIMITIVES = {
    "token": token_ratio,
    "sequence": sequence_ratio,
    "truncated_token": lambda lp, lmu, m: truncated_token_ratio(lp, lmu, m, CAP),
    "truncated_sequence": lambda lp, lmu, m: truncated_sequence_ratio(lp, lmu, m, CAP),
    "masked_token": lambda lp, lmu, m: masked_token_ratio(lp, lmu, m, *BAND),
    "masked_sequence": lambda lp, lmu, m: masked_sequence_ratio(lp, lmu, m, 0.0, CAP),
    "geometric": lambda lp, lmu, m: geometric_sequence_mask(lp, lmu, m, *GEO_BAND),
    "kl": lambda lp, lmu, m: kl_rejection_mask(lp, lmu, m, KL_THRESHOLD, "k3"),
}


def batched_vs_loop(ep: Episodes) -> float:
    """Largest relative difference between every batched weight function and :func:`_naive_weights` on ``ep``."""
    worst = 0.0
    rows = list(zip(ep.log_prob.tolist(), ep.sampler_log_prob.tolist(), ep.mask.int().tolist()))
    for name, fn in _PRIMITIVES.items():
        batched = fn(ep.log_prob, ep.sampler_log_prob, ep.mask)
        loop = torch.tensor([_naive_weights(name, *row) for row in rows], dtype=F64)
        worst = max(worst, maxabs(batched, loop) / max(1.0, float(loop.abs().max())))
    return worst


def padding_leak(ep: Episodes) -> float:
    """Append two padded slots holding ``nan`` / ``-inf`` / ``inf``: largest change of any weight (NaN counts as infinite)."""
    E = len(ep.prob)
    pad_lp = torch.tensor([[float("nan"), float("inf")]], dtype=F64).expand(E, 2)
    pad_mu = torch.tensor([[float("-inf"), -1e30]], dtype=F64).expand(E, 2)
    lp, lmu = torch.cat([ep.log_prob, pad_lp], 1), torch.cat([ep.sampler_log_prob, pad_mu], 1)
    m = torch.cat([ep.mask, torch.zeros(E, 2, dtype=F64)], 1)
    worst = 0.0
    for fn in _PRIMITIVES.values():
        padded = fn(lp, lmu, m)
        if not bool(torch.isfinite(padded).all()):
            return math.inf
        worst = max(worst, maxabs(padded[:, : ep.mask.shape[1]], fn(ep.log_prob, ep.sampler_log_prob, ep.mask)), float(padded[:, -2:].abs().max()))
    return worst



@suite("off_policy")
def cross_checks() -> None:
    """000 section 8 (8a-8g) on the two-turn agent, and the sampler-correction schemes on both models."""
    on, off = two_turn_agent(0.0), two_turn_agent(1.0)
    m_on = sampler_moments(on, estimator_samples(on, on.mask))
    check("8a. E_pi[R (s1 + s2)] == grad J (autograd of the enumerated objective)", maxabs(m_on.mean, on.grad_J), 1e-15)
    seq = sampler_moments(off, estimator_samples(off, sequence_ratio(off.log_prob, off.sampler_log_prob, off.mask)))
    check("8b. E_mu[rho1 rho2 R (s1 + s2)] == grad J under a stale sampler (m = 1)", maxabs(seq.mean, off.grad_J), 1e-15)
    tok = sampler_moments(off, estimator_samples(off, token_ratio(off.log_prob, off.sampler_log_prob, off.mask)))
    check("8c. token-level ratios are biased under mismatch (1 if ||bias|| < 1e-3)", float(tok.bias < 1e-3), 0.0)
    check("8c. token-ratio bias == the derived closed form sum pi1(mu2-pi2)A s1 + (mu1-pi1)pi2 A s2", maxabs(tok.mean - off.grad_J, token_bias_closed_form(1.0)), 1e-15)
    tok_on = sampler_moments(on, estimator_samples(on, token_ratio(on.log_prob, on.sampler_log_prob, on.mask)))
    check("8c. ... and exact when the sampler equals the policy", maxabs(tok_on.mean, on.grad_J), 1e-15)
    b = float(on.prob @ on.reward)
    const = off.prob @ estimator_samples(off, token_ratio(off.log_prob, off.sampler_log_prob, off.mask), torch.full_like(off.reward, b))
    check("8d. a constant baseline adds 0 to the token-ratio gradient: max |E_mu[sum_t rho_t b s_t]|", float(const.abs().max()), 1e-15)
    for c in (1.0, 1.28, 2.0):
        viol = max(float((p - c * q).clamp(min=0).sum() - 0.5 * (p - q).abs().sum()) for p, q in agent_states(1.0))
        check(f"8e. sum_a (pi - C mu)+ <= TV(pi, mu) at all 5 states (C = {c}; excess, rounding only)", max(viol, 0.0), 1e-15)
    for level in ("token", "sequence"):
        t = truncation_bias(off, 1.28, level)
        check(f"8e. {level} TIS minus IS == -E_mu[(rho - C)+ A s] (C = 1.28)", maxabs(t.difference, t.closed_form), 1e-15)
        check(f"8e. ||{level} TIS bias vs IS|| <= E_mu[(rho - C)+ |A| ||s||] (C = 1.28; excess)", max(float(t.difference.norm()) - t.bound, 0.0), 0.0)
    args = (off.log_prob, off.sampler_log_prob, off.mask)
    rho = token_ratio(*args)
    outside = rho * ((rho < BAND[0]) | (rho > BAND[1])) * off.mask
    diff = off.prob @ (estimator_samples(off, masked_token_ratio(*args, *BAND)) - estimator_samples(off, rho))
    check(f"8e. token mask (IcePop {BAND}) minus IS == -E_mu[sum_t rho_t 1[rho_t outside] A s_t]", maxabs(diff, -(off.prob @ estimator_samples(off, outside))), 1e-15)
    credit = credit_assignment(on)
    for name in ("broadcast", "per_turn"):
        check(f"8f. {name} estimator is unbiased for grad J", maxabs(on.prob @ getattr(credit, name), on.grad_J), 1e-15)
    s1, s2 = on.scores[:, 0], on.scores[:, 2]
    n1 = (s1 * s1).sum(1)
    lhs = float(on.prob @ ((on.reward - credit.V) ** 2 * n1))
    rhs = float(on.prob @ ((credit.Q - credit.V) ** 2 * n1)) + float(on.prob @ (credit.var_R * n1))
    check("8f. E[(R-V)^2 ||s1||^2] == E[(Q-V)^2 ||s1||^2] + E[Var(R|a) ||s1||^2] (R in {-0.5, 2})", lhs - rhs, 1e-14)
    dots = (s1 * s2).sum(1)
    check("8f. s1 . s2 is not 0 pointwise (shared parameters; 1 if max |s1.s2| < 0.01)", float(float(dots.abs().max()) < 0.01), 0.0)
    check("8f. martingale orthogonality E[s1 . s2] == 0", float(on.prob @ dots), 1e-15)
    for L in range(1, 6):
        m = chain_score_moments(L)
        check(f"8g. E||sum_t s_t||^2 == sum_t E||s_t||^2, L = {L} (shared parameters)", m.total - float(m.per_step.sum()), 1e-13)
    unmasked = on.prob @ estimator_samples(on, torch.ones_like(on.mask))
    check("8. unmasked feedback token adds exactly E[R s_f]", maxabs(unmasked - on.grad_J, feedback_term(on)), 1e-15)
    check("8. ... which is not 0 (1 if ||E[R s_f]|| < 1e-3)", float(float(feedback_term(on).norm()) < 1e-3), 0.0)
    lm_on, lm_off = tinylm_episodes(0.0), tinylm_episodes(0.3)
    check("TinyLM: sequence IS is unbiased under a perturbed sampler (m = 0.3)", scheme_moments(lm_off, "sequence IS").bias, 1e-14)
    check("TinyLM: token IS is biased under mismatch (1 if ||bias|| < 1e-3)", float(scheme_moments(lm_off, "token IS").bias < 1e-3), 0.0)
    check("TinyLM: every scheme is unbiased when the sampler is the policy (largest ||bias||)", max(scheme_moments(lm_on, s).bias for s in SCHEMES), 1e-14)
    const = lm_off.prob @ estimator_samples(lm_off, token_ratio(lm_off.log_prob, lm_off.sampler_log_prob, lm_off.mask), torch.ones_like(lm_off.reward))
    check("TinyLM: a constant baseline adds 0 to the token-ratio gradient", float(const.abs().max()), 1e-15)
    for level in ("token", "sequence"):
        t = truncation_bias(lm_off, CAP, level)
        check(f"TinyLM: {level} TIS minus IS == -E_mu[(rho - C)+ A s] (C = {CAP})", maxabs(t.difference, t.closed_form), 1e-15)
        check(f"TinyLM: ||{level} TIS bias vs IS|| <= its bound (excess)", max(float(t.difference.norm()) - t.bound, 0.0), 0.0)
    args = (lm_off.log_prob, lm_off.sampler_log_prob, lm_off.mask)
    rho_seq = sequence_ratio(*args)
    dropped = lm_off.prob @ estimator_samples(lm_off, rho_seq * (rho_seq > CAP))
    check(f"TinyLM: sequence mask bias == -E_mu[rho 1[rho > {CAP}] A sum_t s_t]", maxabs(lm_off.prob @ estimator_samples(lm_off, masked_sequence_ratio(*args, 0.0, CAP)) - lm_off.grad_J, -dropped), 1e-15)
    check("batched weight functions == per-sequence loop (8 functions, TinyLM m = 0.3; relative)", batched_vs_loop(lm_off), 1e-14)
    check("batched weight functions == per-sequence loop (8 functions, agent m = 1; relative)", batched_vs_loop(off), 1e-14)
    check("padding holding nan/-inf/inf changes no weight and gets weight 0", padding_leak(off), 0.0)
    correction_rules()


def correction_rules() -> None:
    """The trainers' rules of :data:`RULES`: each kept set is the band derived in :mod:`derivations.corrections`, on TinyLM."""
    ep = tinylm_episodes(0.3)
    lp, lmu, m = ep.log_prob, ep.sampler_log_prob, ep.mask
    rho, d = token_ratio(lp, lmu, m), (lp - lmu) * m
    keep = rollout_rejection_mask(lp, lmu, m, rollout_rs="token_k1", rollout_rs_threshold="0.8_1.1")
    check("verl token_k1 '0.8_1.1' keeps exactly the ratio band [1/1.1, 1/0.8] (k1 = -log rho; tokens that differ)",
          float(((keep > 0) != ((rho >= 1 / 1.1) & (rho <= 1 / 0.8)))[m > 0].sum()), 0.0)
    keep = rollout_rejection_mask(lp, lmu, m, rollout_rs="seq_max_k2", rollout_rs_threshold=0.02)
    band = (rho >= math.exp(-0.2)) & (rho <= math.exp(0.2)) | (m == 0)
    check("verl seq_max_k2 (0.02) keeps exactly the sequences with every |log rho_t| <= sqrt(2 * 0.02) (sequences that differ)",
          float(((keep.amax(1) > 0) != band.all(1))[m.sum(1) > 0].sum()), 0.0)
    n = m.sum(1, keepdim=True)
    product_band = ((d.sum(1, keepdim=True) >= n * math.log(0.8)) & (d.sum(1, keepdim=True) <= n * math.log(1.25))).expand_as(m)
    check("geometric band [0.8, 1.25] == the product band [0.8^n, 1.25^n] of each length n (tokens that differ)",
          float(((geometric_sequence_mask(lp, lmu, m, 0.8, 1.25) > 0) != product_band)[m > 0].sum()), 0.0)
    q = lmu.exp()
    A = ep.reward[:, None].expand_as(m)
    tv = (trust_region_mask(lp, lmu, ep.reward, m, low=0.05, high=0.05) > 0)
    ratio_band = ~(((A > 0) & (rho > 1 + 0.05 / q)) | ((A < 0) & (rho < 1 - 0.05 / q)))
    check("trust-region mask p - q > delta == the ratio band rho > 1 + delta/q, by the sign of A (delta 0.05; tokens that differ)",
          float((tv != ratio_band)[m > 0].sum()), 0.0)
    prox = loglinear_proximal_log_prob(lp, lmu, torch.full_like(lp, 8.0), m, current_version=10)
    w = rejection_sampling_weight(prox, lmu, m, upper=1.1) * token_ratio(lp, prox, m)
    check("log-linear proximal (2 steps stale): behaviour weight times PPO ratio == rho_t where rho_t^(1/2) <= 1.1",
          maxabs(w, torch.where(rho.sqrt() <= 1.1, rho, 0.0) * m), 1e-14)
    lim = m2po_limit(ep, 0.04)
    m2 = d * d
    expected = torch.where(m2 < lim.cut, 1.0, torch.where(m2 == lim.cut, lim.tie_fraction, 0.0)).to(F64) * m
    inside = (rho >= lim.band[0] * (1 - 1e-12)) & (rho <= lim.band[1] * (1 + 1e-12))
    check("M2PO, large micro-batch: the kept set is the band [e^-sqrt(c), e^sqrt(c)] on rho_t (tokens kept outside it)",
          float(((lim.keep > 0) & ~inside).sum()) + maxabs(lim.keep, expected), 0.0)
    terms = {k: sp.lambdify(k3_symbols, v, "numpy") for k, v in k3_summands().items()}
    worst = 0.0
    for p_state, q_state in agent_states(1.0):
        r = p_state / q_state
        means = {"verl": float(q_state @ (r - 1 - r.log())), "AReaL": float(q_state @ (1 / r - 1 + r.log()))}
        worst = max(worst, *(abs(means[k] - float(f(p_state.numpy(), q_state.numpy()).sum())) for k, f in terms.items()))
    check("E_mu[verl k3] == KL(mu||pi) and E_mu[AReaL kl_k3] == sum mu^2/pi - 1 - KL(mu||pi), at the agent's 5 states", worst, 1e-15)
    on = tinylm_episodes(0.0)
    check(f"every rule of RULES ({len(RULES)}) is exact when the sampler is the policy (largest ||bias||, TinyLM)",
          max(rule_moments(on, name).bias for name in RULES), 1e-14)

