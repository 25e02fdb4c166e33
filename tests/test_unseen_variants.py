"""The checker on variants it was not built around (issue 28, item 3): one test group per failure class.

Each class is tried on several variants, papers of 2024-2026 among them (cited per test), and the truth
is computed here from the variant's own formula (autograd of a hand-written weight, exact enumeration on
the toy LM, the clip bound solved by hand), never read back from the checker.
"""

import math

import pytest
import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations.group_baselines import P
from numeric import TinyLM, brute_force_group_gradient, expected_score_sum
from numeric.variants import check_group_advantage, check_policy_loss, check_token_loss

F64 = torch.float64
pytestmark = pytest.mark.xdist_group("trainer code")  # the token checks share the registry's cached region splits


def _token_mean(per_token):
    """A trainer's loss from a per-token loss ``(ratio, A, old_log_prob, log_prob)``, token-mean aggregated."""
    def loss(old_log_prob, log_prob, advantages, response_mask):
        ratio = torch.exp(log_prob - old_log_prob)
        return (per_token(ratio, advantages, old_log_prob, log_prob) * response_mask).sum() / response_mask.sum()
    return loss


def _weight(per_token, ratio: float, sign: int, q: float) -> float:
    """The weight w = -(d loss/d log pi)/A of one token by autograd of the formula (the truth)."""
    old = torch.tensor(math.log(q), dtype=F64)
    new = (old + math.log(ratio)).clone().requires_grad_(True)
    A = torch.tensor(float(sign), dtype=F64)
    (g,) = torch.autograd.grad(per_token(torch.exp(new - old), A, old, new), new)
    return float(-g / A)


# ------------------------------------------------------------------ 1. boundedness over the whole ratio range

FLIPPED = lambda r, A, o, l: -torch.where(A > 0, 1 / r, r).detach() * A * l          # ASPO's flipped ratio for A > 0, unclipped
TOPR = lambda r, A, o, l: -torch.where(A > 0, torch.ones_like(r), r.clamp(max=1.0)).detach() * A * l
LOG_WEIGHT = lambda r, A, o, l: -(1 + torch.log(r)).detach() * A * l
CISPO_CAP = lambda r, A, o, l: -r.clamp(max=1.28).detach() * A * l


@pytest.mark.parametrize("per_token, expr, truth", [
    # ASPO (Wang et al., "Asymmetric Importance Sampling Policy Optimization", arXiv:2510.06062, 2025) flips the ratio of
    # positive tokens to 1/r: 1/r -> inf as r -> 0; for A < 0 the weight r -> inf as r -> inf
    (FLIPPED, -gw.sg(sp.Piecewise((1 / gw.r, gw.A > 0), (gw.r, True))) * gw.A * gw.ell, {1: False, -1: False}),
    # TOPR (Le Roux et al., "Tapered Off-Policy REINFORCE", arXiv:2503.14286, 2025): 1 for A > 0, min(r, 1) for A < 0
    (TOPR, -gw.sg(sp.Piecewise((1, gw.A > 0), (sp.Min(gw.r, 1), True))) * gw.A * gw.ell, {1: True, -1: True}),
    # a log-ratio weight: unbounded at both ends, though slowly (|1 + log r| grows by 4.6 per two decades)
    (LOG_WEIGHT, -gw.sg(1 + sp.log(gw.r)) * gw.A * gw.ell, {1: False, -1: False}),
    # CISPO's cap (MiniMax-M1, arXiv:2506.13585, 2025): min(r, 1.28), bounded
    (CISPO_CAP, -gw.sg(sp.Min(gw.r, sp.Rational(32, 25))) * gw.A * gw.ell, {1: True, -1: True}),
])
def test_boundedness_is_read_at_both_ends_and_the_two_routes_agree(per_token, expr, truth):
    for sign, bounded in truth.items():  # the truth, from the formula: |w| at 1e-9 and 1e9 against |w| at 1e-3 and 1e3
        far = max(abs(_weight(per_token, x, sign, 0.5)) for x in (1e-9, 1e9))
        near = max(abs(_weight(per_token, x, sign, 0.5)) for x in (1e-3, 1e3))
        assert (far <= near + 1e-12) == bounded
    by_callable = check_token_loss(lambda lp, old, adv: per_token(torch.exp(lp - old), adv, old, lp), confirm=False)
    by_expression = check_token_loss(expr, confirm=False)
    assert by_callable.bounded == by_expression.bounded == truth
    assert check_policy_loss(_token_mean(per_token)).bounded == truth


# ------------------------------------------------------------------ 2. clip bounds computed from pi_old


def _dcpo(r, A, old, new, eps_low=0.16, eps_high=0.2):
    """DCPO (Yang et al., "Dynamic Clipping Policy Optimization", arXiv:2509.02333, 2025): a per-token clip
    0.5 + 0.5 sqrt(max(1 - 4 eps_low/q, 0)) <= r <= 0.5 + 0.5 sqrt(1 + 4 eps_high/q), q = pi_old, PPO-style min."""
    q = torch.exp(old).detach()
    low = 0.5 + 0.5 * torch.sqrt((1 - 4 * eps_low / q).clamp(min=0))
    high = 0.5 + 0.5 * torch.sqrt(1 + 4 * eps_high / q)
    return -torch.minimum(r * A, torch.maximum(torch.minimum(r, high), low) * A)


def _tv_mask(r, A, old, new, delta=0.2):
    """prime-rl's default trust region (DPPO binary TV, arXiv:2602.04879): keep A > 0 while pi - pi_old <= delta and A < 0 while
    pi_old - pi <= delta (PrimeIntellect-ai/prime-rl 559b44772e471d1538537b8805cc77f3824a5e64, src/prime_rl/trainer/rl/loss.py:130-148)."""
    p, p_old = torch.exp(new), torch.exp(old)
    masked = torch.where(A > 0, p - p_old > delta, p - p_old < -delta)
    return -(~masked).to(r.dtype) * A * r


@pytest.mark.parametrize("per_token, high_of, low_of", [
    (_dcpo, lambda q: 0.5 + 0.5 * math.sqrt(1 + 4 * 0.2 / q), lambda q: 0.5 + 0.5 * math.sqrt(max(1 - 4 * 0.16 / q, 0))),
    (_tv_mask, lambda q: 1 + 0.2 / q, lambda q: 1 - 0.2 / q),
])
def test_clip_bounds_from_the_old_probability_are_a_per_token_range_not_a_missing_detach(per_token, high_of, low_of):
    rep = check_policy_loss(_token_mean(per_token))
    assert rep.policy_gradient and rep.on_policy_at_ratio_one and rep.verdict == "scaled" and rep.ratio_one == ""
    assert "missing detach" not in rep.reason and rep.token.per_token_constants
    pos, neg = rep.clip_ranges
    assert pos.per_token and neg.per_token
    for q, _, high in pos.per_token:  # the A > 0 end at each pi_old, solved by hand; None where it lies past r = 100
        truth = high_of(q)
        assert (high is None and truth > 100) or high == pytest.approx(truth, rel=1e-8)
    for q, low, _ in neg.per_token:
        truth = low_of(q)
        assert (low is None and truth < 0.01) or low == pytest.approx(truth, rel=1e-8)


def test_the_probability_change_trust_region_is_named_with_its_delta():
    rep = check_policy_loss(_token_mean(_tv_mask))
    assert dict(rep.clip) == {"delta_high": 0.2, "delta_low": 0.2}
    assert any("trust region on the probability change" in n for n in rep.notes)
    assert "delta_high" not in dict(check_policy_loss(_token_mean(_dcpo)).clip)  # DCPO's bound is not 1 + delta/q


def test_a_weight_that_moves_with_pi_old_at_ratio_one_is_still_not_a_policy_gradient():
    scaled_by_q = lambda r, A, old, new: -torch.exp(old) * r.detach() * A * new     # w(1) = pi_old: a reweighting, not a clip
    rep = check_policy_loss(_token_mean(scaled_by_q))
    assert rep.policy_gradient is False and rep.verdict == "biased" and "not a policy gradient" in rep.reason
    assert "moves with the old probability" in rep.ratio_one


# ------------------------------------------------------------------ 3. large values on the exact route


@pytest.mark.parametrize("eps", [1e-6, 3e-7])
@pytest.mark.parametrize("rewards", ["binary", [0.0, 0.1, 0.7], [0.0, 0.3, 0.6, 1.0]])
def test_an_advantage_divided_by_a_tiny_eps_gets_its_exact_scale(eps, rewards):
    """Centred rewards over eps (values near 1e6): E[A_1 s_1] = (G - 1)/(G eps) grad J.  The truth is brute force on the
    toy LM: every G-tuple of answers enumerated, the advantage taken as written."""
    G = 3
    centred = lambda r: (r - r.mean(-1, keepdims=True)) / eps
    rep = check_group_advantage(centred, G=G, rewards=rewards)
    assert rep.verdict == "scaled" and rep.residual == 0
    assert rep.derivation is not None, rep.reason  # the exact route verified: the numeric fallback is the next test's
    assert float(rep.scale) == pytest.approx((G - 1) / (G * eps), rel=1e-9)
    lm = TinyLM(V=2, L=2, seed=3)
    values = torch.tensor([0.0, 1.0] if rewards == "binary" else rewards, dtype=F64)
    R = values[torch.arange(lm.N) % len(values)]
    exact = brute_force_group_gradient(lm, lm.theta0, R, G, lambda r: centred(torch.as_tensor(r, dtype=F64)))
    grad_J = expected_score_sum(lm, lm.theta0, R)
    assert float((exact - float(rep.scale) * grad_J).abs().max()) <= 1e-9 * float(exact.abs().max())


def test_where_the_exact_route_fails_the_numeric_route_answers_with_its_tolerance(monkeypatch):
    """Never a crash: a reduction that does not verify (forced here) hands the table's values to the Bernstein route."""
    from derivations import DerivationError
    from numeric.variants import checker

    def refuse(*args, **kwargs):
        raise DerivationError("step 1 does not hold (forced)")

    monkeypatch.setattr(checker, "derive_group_advantage", refuse)
    rep = check_group_advantage(lambda r: (r - r.mean(-1, keepdims=True)) / 1e-6, G=3, rewards=[0.0, 0.1, 0.7], confirm=False)
    assert rep.verdict == "scaled" and rep.derivation is None and rep.reduction is not None
    assert "the exact reduction did not verify" in rep.reason and "forced" in rep.reason
    assert rep.reduction.bounds[0][1] == pytest.approx(2 / (3 * 1e-6), rel=1e-9)  # beta_1 = c = (G - 1)/(G eps) on every pattern


# ------------------------------------------------------------------ 4. advantages that depend on the answers' positions


def _at_position(fn, i, G):
    """Answer 0 of each group moved to position i; column 0 holds its advantage: brute force then gives E[A_i s_i]."""
    order = list(range(1, G))
    order.insert(i, 0)

    def moved(r):
        r = torch.as_tensor(r, dtype=F64)
        out = torch.as_tensor(fn(r[..., order]), dtype=F64)
        return torch.cat([out[..., i:i + 1], torch.zeros_like(r[..., 1:])], -1)
    return moved


def _ranks(r):
    """Rank advantages from a double argsort, ties broken by position (as a stable sort breaks them), centred."""
    r = torch.as_tensor(r, dtype=F64)
    return torch.argsort(torch.argsort(r, dim=-1, stable=True), dim=-1, stable=True).to(F64) - (r.shape[-1] - 1) / 2


@pytest.mark.parametrize("fn, summed", [
    (lambda r: r - r[..., :1], "scaled"),       # answer 0's reward as everyone's baseline: answer 0 never learns
    (_ranks, "unbiased"),                        # ranks with ties broken by position
    (lambda r: torch.as_tensor(r, dtype=F64) - torch.as_tensor(r, dtype=F64)[..., 1:].mean(-1, keepdims=True), "scaled"),
])
def test_a_positional_advantage_gets_the_verdict_of_its_summed_update_and_each_positions_scale(fn, summed):
    G = 3
    rep = check_group_advantage(fn, G=G, rewards="binary")
    assert rep.verdict == summed and [i for i, _, _ in rep.positions] == [0, 1, 2]
    assert "depends on the answers' positions" in rep.reason and "swapping answers" in rep.reason
    lm = TinyLM(V=2, L=2, seed=1)
    R = (torch.arange(lm.N) % 3 == 0).to(F64)
    grad_p = expected_score_sum(lm, lm.theta0, R)
    p = float((lm.probs(lm.theta0) * R).sum())
    by_position = []
    for i, _, c_i in rep.positions:  # the truth: E[A_i s_i] by brute force over all G-tuples, against c_i(p) grad p
        exact = brute_force_group_gradient(lm, lm.theta0, R, G, _at_position(fn, i, G))
        assert float((exact - float(sp.sympify(c_i).subs(P, p)) * grad_p).abs().max()) <= 1e-12
        by_position.append(exact)
    mean = torch.stack(by_position).mean(0)
    assert float((mean - float(sp.sympify(rep.scale).subs(P, p)) * grad_p).abs().max()) <= 1e-12


# ------------------------------------------------------------------ 5. aggregation read generally


def _aggregated(kappa_of):
    """PPO per token, aggregated by a hand-written normaliser ``kappa_of(mask) -> [B, T]``."""
    def loss(old_log_prob, log_prob, advantages, response_mask):
        ratio = torch.exp(log_prob - old_log_prob)
        per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages)
        return (per_token * response_mask * kappa_of(response_mask)).sum()
    return loss


@pytest.mark.parametrize("kappa_of, mode, law", [
    (lambda m: torch.full_like(m, 1.0 / m.numel()), "padded-mean", "kappa = T^-1 B^-1"),          # (x * mask).mean()
    (lambda m: torch.ones_like(m), "token-sum", "kappa = 1 (a constant)"),                          # verl's token-sum
    (lambda m: m.sum(-1, keepdim=True).clamp(min=1) ** -0.5 / m.shape[0], "other", "kappa = B^-1 n_i^-0.5"),
])
def test_aggregation_is_named_or_described_by_its_measured_law(kappa_of, mode, law):
    rep = check_policy_loss(_aggregated(kappa_of))
    assert rep.aggregation == mode and rep.kappa_law == law and rep.method == "PPO"
    for design, i, _, B, T, kappa, _ in rep.kappa:  # the truth: the normaliser itself, evaluated on the design's mask
        lengths = {row[1]: row[2] for row in rep.kappa if row[0] == design}
        mask = (torch.arange(T)[None, :] < torch.tensor([lengths.get(j, 0) for j in range(B)])[:, None]).to(F64)
        assert kappa == pytest.approx(float(kappa_of(mask)[i, 0]), rel=1e-12)
    if mode == "padded-mean":
        assert rep.verdict == "scaled" and "moves with the padding width T" in rep.reason
    if mode == "other":
        assert rep.verdict == "undecided" and rep.undecided[0][0] == "aggregation" and rep.length_biased


# ------------------------------------------------------------------ 6. reason texts name the measured cause


def test_a_half_weight_at_the_tie_r_equal_1_is_named_as_the_tie_rule():
    """TOPR's min(r, 1) for A < 0 written with torch.minimum: at r = 1 exactly (every token of an on-policy step) autograd
    splits the gradient between the two tied arguments, so the weight is 1/2 there; with clamp(max=1) it is 1."""
    tied = lambda r, A, o, l: -torch.where(A > 0, r, torch.minimum(r, torch.ones_like(r))) * A
    clamped = lambda r, A, o, l: -torch.where(A > 0, r, r.clamp(max=1.0)) * A
    assert _weight(tied, 1.0, -1, 0.5) == 0.5 and _weight(clamped, 1.0, -1, 0.5) == 1.0  # the truth, by autograd
    rep = check_policy_loss(_token_mean(tied))
    assert rep.verdict == "biased" and not rep.on_policy_at_ratio_one
    assert "tie rule" in rep.reason and "0.5 exactly at r = 1" in rep.reason and "sign" not in rep.reason
    assert check_policy_loss(_token_mean(clamped)).on_policy_at_ratio_one


def test_a_sign_slip_and_a_missing_detach_are_named_as_such():
    slipped = check_policy_loss(_token_mean(lambda r, A, o, l: r * A))
    assert "sign slip" in slipped.reason and "tie" not in slipped.reason and "detach" not in slipped.reason
    undetached = check_policy_loss(_token_mean(lambda r, A, o, l: -r * A * l))  # w = r (1 + log pi)
    assert "missing detach" in undetached.reason and "sign" not in undetached.reason and "tie" not in undetached.reason
    silenced = check_policy_loss(_token_mean(lambda r, A, o, l: -torch.where(A > 0, r, (r < 1).to(r.dtype) * r) * A))
    assert "for A < 0 the weight is 0 at r = 1" in silenced.reason and "silenced on policy" in silenced.reason
    with pytest.raises(ValueError, match="no gradient at r = 1, A = 1"):  # silenced for both signs: no kappa to measure
        check_policy_loss(_token_mean(lambda r, A, o, l: -(r < 1).to(r.dtype) * r * A))
