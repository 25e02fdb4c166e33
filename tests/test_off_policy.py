"""Off-policy: the sceptic's mutants fail, the weights follow the caller, padding is neutral, bad input is named."""

import numpy as np
import pytest
import torch

import numeric.off_policy as op
import numeric.off_policy.models as models
from numeric import (
    CORRECTION_WEIGHTS,
    geometric_sequence_mask,
    kl_rejection_mask,
    masked_sequence_ratio,
    masked_token_ratio,
    scheme_moments,
    sequence_ratio,
    token_ratio,
    truncated_sequence_ratio,
    truncated_token_ratio,
    two_turn_agent,
)


@pytest.fixture(scope="module")
def stale():
    return two_turn_agent(1.0)


@pytest.fixture(scope="module")
def fresh():
    return two_turn_agent(0.0)


def bias(ep, weights, advantage=None):
    return float((ep.prob @ op.estimator_samples(ep, weights, advantage) - ep.grad_J).norm())


# -- the sceptic's mutants: each mistake fails a check that the correct code passes -----------------


def test_a_missing_rho_factor_is_biased(stale):
    args = (stale.log_prob, stale.sampler_log_prob, stale.mask)
    assert bias(stale, sequence_ratio(*args)) < 1e-14
    rho = token_ratio(*args)
    only_turn2 = rho[:, 2:3].expand(-1, 3) * stale.mask  # rho_2 for the whole sequence: rho_1 forgotten
    only_turn1 = rho[:, 0:1].expand(-1, 3) * stale.mask
    assert bias(stale, only_turn2) > 1e-2
    assert bias(stale, only_turn1) > 1e-2


def test_a_wrong_clip_side_breaks_the_truncation_identity(stale):
    """min(rho, C) = rho - (rho - C)+ ; clamping from below (max(rho, C)) does not satisfy it."""
    args = (stale.log_prob, stale.sampler_log_prob, stale.mask)
    t = op.truncation_bias(stale, 1.28, "token")
    diff, closed = t.difference, t.closed_form
    assert float((diff - closed).abs().max()) < 1e-15
    rho = token_ratio(*args)
    wrong = rho.clamp(min=1.28) * stale.mask
    wrong_diff = stale.prob @ (op.estimator_samples(stale, wrong) - op.estimator_samples(stale, rho))
    assert float((wrong_diff - closed).abs().max()) > 1e-2
    w = truncated_token_ratio(*args, 1.28)
    assert float(w.max()) <= 1.28 and bool(torch.equal(w[rho <= 1.28], rho[rho <= 1.28]))


def test_an_unmasked_feedback_token_is_biased(fresh):
    assert bias(fresh, fresh.mask) < 1e-15
    unmasked = torch.ones_like(fresh.mask)
    assert bias(fresh, unmasked) > 1e-2
    extra = fresh.prob @ op.estimator_samples(fresh, unmasked) - fresh.grad_J
    assert float((extra - op.feedback_term(fresh)).abs().max()) < 1e-15


def test_a_feedback_token_in_the_sequence_ratio_is_biased(stale):
    args = (stale.log_prob, stale.sampler_log_prob)
    with_feedback = sequence_ratio(*args, torch.ones_like(stale.mask)) * stale.mask
    assert bias(stale, with_feedback) > 1e-3


def test_R_where_R_squared_belongs_fails_the_decomposition(fresh):
    c = op.credit_assignment(fresh)
    n1 = fresh.scores[:, 0].pow(2).sum(1)
    lhs = float(fresh.prob @ ((fresh.reward - c.V) ** 2 * n1))
    explained = float(fresh.prob @ ((c.Q - c.V) ** 2 * n1))
    assert abs(lhs - explained - float(fresh.prob @ (c.var_R * n1))) < 1e-14
    var_with_R = models._conditional_on_turn1(fresh, fresh.reward) - c.Q ** 2  # E[R|y1] - Q^2: R where R^2 belongs
    assert abs(lhs - explained - float(fresh.prob @ (var_with_R * n1))) > 1e-2


def test_a_constant_baseline_without_the_ratio_is_not_free(stale):
    b = torch.ones_like(stale.reward)
    free = stale.prob @ op.estimator_samples(stale, token_ratio(stale.log_prob, stale.sampler_log_prob, stale.mask), b)
    assert float(free.abs().max()) < 1e-15
    assert float((stale.prob @ op.estimator_samples(stale, stale.mask, b)).abs().max()) > 1e-2


def test_schemes_unbiased_only_where_the_derivation_says(stale):
    assert scheme_moments(stale, "sequence IS").bias < 1e-14
    for name in op.SCHEMES:
        if name != "sequence IS":
            assert scheme_moments(stale, name).bias > 1e-3, name


def test_monte_carlo_sampling_from_the_episode_probabilities(stale):
    """Sample 20000 episodes from mu (seed 0); every coordinate of sequence IS within z < 4.5 of grad J (40 coordinates)."""
    samples = op.estimator_samples(stale, sequence_ratio(stale.log_prob, stale.sampler_log_prob, stale.mask))
    n = 20000
    idx = torch.multinomial(stale.prob, n, replacement=True, generator=torch.Generator().manual_seed(0))
    mean = samples[idx].mean(0)
    var = stale.prob @ samples**2 - (stale.prob @ samples) ** 2
    live = var > 1e-12
    z = (mean - stale.grad_J)[live] / (var[live] / n).sqrt()
    assert int(live.sum()) >= 20 and float(z.abs().max()) < 4.5


def test_chain_identity_and_growth():
    totals = [op.chain_score_moments(L).total for L in range(1, 5)]
    assert all(b > a for a, b in zip(totals, totals[1:]))


# -- the caller's kind, dtype and device; padding -----------------------------------------------


@pytest.mark.parametrize("fn", CORRECTION_WEIGHTS)
def test_kinds_dtypes_and_detach(fn):
    lp = np.log(np.array([[0.5, 0.2, 0.9], [0.3, 0.3, 0.3]]))
    lmu = np.log(np.array([[0.4, 0.3, 0.9], [0.3, 0.2, 0.7]]))
    m = np.array([[1, 1, 0], [1, 1, 1]])
    out = fn(lp, lmu, m)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (2, 3)
    t32 = torch.tensor(lp, dtype=torch.float32, requires_grad=True)
    out32 = fn(t32, torch.tensor(lmu, dtype=torch.float32), torch.tensor(m))
    assert isinstance(out32, torch.Tensor) and out32.dtype == torch.float32 and not out32.requires_grad
    assert out32.device == t32.device
    np.testing.assert_allclose(out32.numpy(), out, rtol=1e-6, atol=1e-6)
    assert out[0, 2] == 0.0


@pytest.mark.parametrize("fn", CORRECTION_WEIGHTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masked_slots_may_hold_anything(fn, dtype):
    lp = torch.tensor([[-0.5, float("nan"), float("inf")], [-1e30, -0.2, -0.1]], dtype=dtype)
    lmu = torch.tensor([[-0.7, float("-inf"), float("-inf")], [float("-inf"), -0.3, -0.1]], dtype=dtype)
    m = torch.tensor([[1, 0, 0], [0, 1, 1]], dtype=torch.bool)
    out = fn(lp, lmu, m)
    assert bool(torch.isfinite(out).all())
    assert bool((out[~m] == 0).all())
    clean = fn(torch.where(m, lp, 0.0), torch.where(m, lmu, 0.0), m)
    assert torch.equal(out, clean)


def test_sequence_ratio_is_the_product_over_the_mask():
    lp = torch.log(torch.tensor([[0.5, 0.2, 0.7]], dtype=torch.float64))
    lmu = torch.log(torch.tensor([[0.25, 0.4, 0.1]], dtype=torch.float64))
    out = sequence_ratio(lp, lmu, torch.tensor([[1.0, 1.0, 0.0]]))
    assert torch.allclose(out, torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64), atol=1e-15)


def test_kl_rejection_estimators_and_direction():
    lp, lmu = np.log([[0.9, 0.1]]), np.log([[0.3, 0.6]])
    d = np.log([0.3, 0.6]) - np.log([0.9, 0.1])  # log mu - log pi on tokens sampled by mu
    for name, k in (("k1", d), ("k2", d**2 / 2), ("k3", np.exp(-d) - 1 + d)):
        total = float(k.sum())
        assert kl_rejection_mask(lp, lmu, np.ones((1, 2)), threshold=total + 1e-9, estimator=name)[0, 0] == 1.0
        assert kl_rejection_mask(lp, lmu, np.ones((1, 2)), threshold=max(total - 1e-9, 0.0), estimator=name)[0, 0] == 0.0


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", CORRECTION_WEIGHTS)
def test_weight_functions_reject_bad_input(fn):
    z = np.zeros((2, 3))
    one = np.ones((2, 3))
    with pytest.raises(ValueError, match="shape"):
        fn(z, np.zeros((2, 2)), one)
    with pytest.raises(ValueError, match="shape"):
        fn(z, z, np.ones((3, 2)))
    with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
        fn(z, z, np.full((2, 3), 0.5))
    with pytest.raises(ValueError, match="log_prob must be finite.* where mask is 1"):
        fn(np.array([[0.0, np.nan, 0.0]] * 2), z, one)
    with pytest.raises(ValueError, match="sampler_log_prob must be finite.* where mask is 1"):
        fn(z, np.array([[0.0, -np.inf, 0.0]] * 2), one)
    with pytest.raises(TypeError, match="log_prob"):
        fn([[0.0]], np.zeros((1, 1)), np.ones((1, 1)))
    with pytest.raises(TypeError, match="mask"):
        fn(z, z, [[1, 1, 1]] * 2)
    with pytest.raises(ValueError, match="time dimension"):
        fn(np.zeros(()), np.zeros(()), np.ones(()))


@pytest.mark.parametrize("fn", [truncated_token_ratio, truncated_sequence_ratio])
@pytest.mark.parametrize("cap", [0.0, -1.0, float("nan")])
def test_truncation_rejects_bad_cap(fn, cap):
    with pytest.raises(ValueError, match="cap"):
        fn(np.zeros((1, 2)), np.zeros((1, 2)), np.ones((1, 2)), cap)


@pytest.mark.parametrize("fn", [masked_token_ratio, masked_sequence_ratio, geometric_sequence_mask])
def test_bands_reject_bad_bounds(fn):
    args = (np.zeros((1, 2)), np.zeros((1, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="low must be < high"):
        fn(*args, 2.0, 2.0)
    with pytest.raises(ValueError, match="low must be < high"):
        fn(*args, 3.0, 2.0)
    with pytest.raises(ValueError, match="low must be >= 0"):
        fn(*args, -0.1, 2.0)


def test_kl_rejection_rejects_bad_settings():
    args = (np.zeros((1, 2)), np.zeros((1, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="estimator"):
        kl_rejection_mask(*args, 0.1, "k4")
    with pytest.raises(ValueError, match="threshold must be >= 0"):
        kl_rejection_mask(*args, -0.1)


def test_models_and_moments_reject_bad_input(stale):
    with pytest.raises(ValueError, match="mismatch"):
        two_turn_agent(-1.0)
    with pytest.raises(ValueError, match="mismatch"):
        op.tinylm_episodes(-0.1)
    with pytest.raises(TypeError, match="theta"):
        two_turn_agent(0.0, theta=torch.zeros(3))
    with pytest.raises(ValueError, match="scheme must be one of"):
        scheme_moments(stale, "token ISS")
    with pytest.raises(TypeError, match="episodes"):
        scheme_moments("episodes", "token IS")
    with pytest.raises(ValueError, match="weights must have shape"):
        op.estimator_samples(stale, torch.ones(32, 2))
    with pytest.raises(ValueError, match="advantages must have shape"):
        op.estimator_samples(stale, stale.mask, torch.ones(5))
    with pytest.raises(ValueError, match="L must be >= 1"):
        op.chain_score_moments(0)
    with pytest.raises(ValueError, match="level"):
        op.truncation_bias(stale, 2.0, "episode")


# -- derivations --------------------------------------------------------------------------------

import sympy as sp  # noqa: E402

from derivations import DerivationError  # noqa: E402
from derivations import off_policy as dop  # noqa: E402


@pytest.mark.parametrize("K", [2])
@pytest.mark.parametrize("make", [dop.turn1_decomposition, dop.martingale_orthogonality, dop.unmasked_feedback_term])
def test_written_out_derivations_verify(make, K):
    """K = 3 is verified by the doctests and the rendered chapter; K = 2 here."""
    assert make(K).verify().verified


def test_a_wrong_sign_in_the_token_bias_fails():
    """Swap mu and pi in the turn-2 term of the per-episode bias: the lemma, and so the sum, must fail."""
    lemma = dop._token_bias_lemma()
    p1, p2, q1, q2, A, s1, s2 = dop.token_bias_symbols
    wrong = lemma.steps[0].rhs.subs({q1: p1, p1: q1}, simultaneous=True)
    from derivations import Derivation

    bad = Derivation("wrong", unfold=lemma.unfold).step(lemma.steps[0].lhs, wrong, "slip")
    with pytest.raises(DerivationError):
        bad.verify()


def test_truncation_identity_fails_for_clipping_from_below():
    r, C, w = sp.Symbol(r"\rho", positive=True), sp.Symbol("C", positive=True), sp.Symbol("w", real=True)
    from derivations import Derivation
    from derivations.proofs import on_regions

    bad = Derivation("lower clip").step(w * (sp.Max(r, C) - r), -w * sp.Max(r - C, 0), "slip", proof=on_regions((r, [C])))
    with pytest.raises(DerivationError):
        bad.verify()


def test_derivation_bad_input():
    for make in (dop.turn1_decomposition, dop.martingale_orthogonality, dop.unmasked_feedback_term):
        with pytest.raises(ValueError, match="K must be >= 2"):
            make(1)
        with pytest.raises(TypeError, match="K must be an int"):
            make(2.0)


def test_closed_form_token_bias_matches_enumeration(stale):
    tok = stale.prob @ op.estimator_samples(stale, token_ratio(stale.log_prob, stale.sampler_log_prob, stale.mask))
    assert float((tok - stale.grad_J - op.token_bias_closed_form(1.0)).abs().max()) < 1e-15


def test_agent_scores_are_the_autograd_jacobian(stale):
    _, theta, _ = models._agent_tables()
    rows = [(y1, op.feedback_token(y1), y2) for y1 in range(4) for y2 in range(4) for _ in (0, 1)]
    y1, f, y2 = (torch.tensor(c) for c in zip(*rows))
    jac = torch.autograd.functional.jacobian(lambda th: models._agent_token_log_probs(th, y1, f, y2), theta)
    assert float((jac - stale.scores).abs().max()) < 1e-15


def test_openrlhf_band_tis_clamps_from_both_sides_and_its_bias_is_the_mirror_term():
    """OpenRLHF's tis with vllm_is_truncated_threshold = [l, C] is clamp(rho, l, C); the floor adds E[(l - rho)+ A s]."""
    gen = torch.Generator().manual_seed(4)
    lp = -torch.rand(3, 5, generator=gen, dtype=torch.float64) * 3
    lmu = lp + torch.randn(3, 5, generator=gen, dtype=torch.float64)
    mask = torch.ones(3, 5, dtype=torch.float64)
    rho = (lp - lmu).exp()
    assert torch.equal(truncated_token_ratio(lp, lmu, mask, 2.0, floor=0.5), rho.clamp(0.5, 2.0))
    assert torch.equal(truncated_token_ratio(lp, lmu, mask, 2.0), rho.clamp(max=2.0))
    band = truncated_token_ratio(lp, lmu, mask, 2.0, floor=0.5)
    assert torch.allclose(band - truncated_token_ratio(lp, lmu, mask, 2.0), (0.5 - rho).clamp(min=0), atol=1e-15, rtol=0)
    with pytest.raises(ValueError, match="floor must be < cap"):
        truncated_token_ratio(lp, lmu, mask, 2.0, floor=2.0)
    with pytest.raises(ValueError, match="floor"):
        truncated_token_ratio(lp, lmu, mask, 2.0, floor=-0.1)


# -- band edges (issue 16 item 4): every band is closed, as the trainers it names ----------------
# log 0.5 - log 0.25 == log 2 exactly in fp64 and exp of it is exactly 2.0 (and 0.5 the other way),
# so a ratio sits exactly on an edge; nextafter moves the edge by one ulp to either side.

LOG = np.log
ABOVE, BELOW = np.nextafter(2.0, np.inf), np.nextafter(2.0, 0.0)


def ratio_two(n_tokens: int = 1):
    """``n_tokens`` tokens each with ratio exactly 2 (fp64), and a padded slot holding -inf."""
    lp = np.array([[LOG(0.5)] * n_tokens + [0.0]])
    lmu = np.array([[LOG(0.25)] * n_tokens + [-np.inf]])
    return lp, lmu, np.array([[1] * n_tokens + [0]])


def test_the_edge_ratios_are_exact():
    lp, lmu, m = ratio_two()
    assert token_ratio(lp, lmu, m)[0, 0] == 2.0 and token_ratio(lmu, lp, m)[0, 0] == 0.5
    assert sequence_ratio(*ratio_two(1))[0, 0] == 2.0


@pytest.mark.parametrize("fn", [masked_token_ratio, masked_sequence_ratio])
def test_masked_ratio_keeps_a_ratio_exactly_at_either_edge(fn):
    lp, lmu, m = ratio_two()
    assert fn(lp, lmu, m, low=0.5, high=2.0)[0, 0] == 2.0  # exactly at high: kept
    assert fn(lp, lmu, m, low=0.5, high=BELOW)[0, 0] == 0.0  # one ulp above high: dropped
    assert fn(lp, lmu, m, low=2.0, high=4.0)[0, 0] == 2.0  # exactly at low: kept
    assert fn(lp, lmu, m, low=ABOVE, high=4.0)[0, 0] == 0.0  # one ulp below low: dropped
    assert fn(lmu, lp, m, low=0.5, high=2.0)[0, 0] == 0.5  # ratio 0.5 exactly at low
    assert fn(lmu, lp, m, low=np.nextafter(0.5, 1.0), high=2.0)[0, 0] == 0.0


def test_geometric_mask_keeps_a_mean_exactly_at_either_edge():
    lp, lmu, m = ratio_two(2)  # geometric mean of (2, 2) is 2: mean of two log 2 is log 2 exactly
    assert geometric_sequence_mask(lp, lmu, m, low=0.5, high=2.0)[0].tolist() == [1.0, 1.0, 0.0]
    assert geometric_sequence_mask(lp, lmu, m, low=0.5, high=BELOW)[0].tolist() == [0.0, 0.0, 0.0]
    assert geometric_sequence_mask(lp, lmu, m, low=2.0, high=4.0)[0].tolist() == [1.0, 1.0, 0.0]
    assert geometric_sequence_mask(lp, lmu, m, low=ABOVE, high=4.0)[0].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("estimator, value", [("k1", np.log(2.0)), ("k2", np.log(2.0) ** 2 / 2)])
def test_kl_rejection_keeps_a_sum_exactly_at_the_threshold(estimator, value):
    """Tokens with ratio 1/2: Delta = log mu - log pi = log 2 exactly, k1 = log 2, k2 = (log 2)^2 / 2."""
    lp, lmu, m = ratio_two()
    lp, lmu = lmu.copy(), lp.copy()
    lp[0, -1], lmu[0, -1] = -np.inf, 0.0  # the padded slot stays padding
    assert kl_rejection_mask(lp, lmu, m, threshold=value, estimator=estimator)[0, 0] == 1.0
    assert kl_rejection_mask(lp, lmu, m, threshold=np.nextafter(value, 0.0), estimator=estimator)[0, 0] == 0.0


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_rejection_with_threshold_zero_keeps_an_on_policy_sequence(estimator):
    lp = np.log([[0.3, 0.6]])
    assert kl_rejection_mask(lp, lp.copy(), np.ones((1, 2)), threshold=0.0, estimator=estimator).tolist() == [[1.0, 1.0]]


def test_a_truncation_is_continuous_at_its_cap():
    lp, lmu, m = ratio_two()
    assert truncated_token_ratio(lp, lmu, m, cap=2.0)[0, 0] == 2.0
    assert truncated_token_ratio(lp, lmu, m, cap=BELOW)[0, 0] == BELOW
    assert truncated_sequence_ratio(lp, lmu, m, cap=2.0)[0, 0] == 2.0
    assert truncated_token_ratio(lmu, lp, m, cap=2.0, floor=0.5)[0, 0] == 0.5


# -- numbers at the edges (issue 16) -------------------------------------------------------------

LOG_MAX32 = float(np.log(np.finfo(np.float32).max))  # 88.7228...


@pytest.mark.parametrize("total, finite", [(LOG_MAX32 - 0.01, True), (LOG_MAX32 + 0.01, False)])
def test_sequence_ratio_at_the_float32_overflow_threshold(total, finite):
    """Below log(max float32) the weight is the fp64 value rounded; above it is +inf (the exact value
    exceeds the dtype), never NaN, and its truncated and masked forms are exactly C and 0."""
    lp = torch.full((1, 4), total / 4, dtype=torch.float32)
    lmu, m = torch.zeros_like(lp), torch.ones_like(lp)
    w = sequence_ratio(lp, lmu, m)
    assert not bool(w.isnan().any())
    if finite:
        exact = torch.tensor(float(lp.double().sum()), dtype=torch.float64).exp()
        assert bool(torch.isfinite(w).all()) and abs(float(w[0, 0]) / float(exact) - 1) < 1e-6
    else:
        assert bool((w == float("inf")).all())
    assert truncated_sequence_ratio(lp, lmu, m, cap=2.0).tolist() == [[2.0] * 4]
    assert masked_sequence_ratio(lp, lmu, m, high=2.0).tolist() == [[0.0] * 4]
    # a loss that uses the truncated weight has a finite gradient however far past the threshold
    theta = lp.clone().requires_grad_(True)
    loss = -(truncated_sequence_ratio(theta, lmu, m, cap=2.0) * 0.0 * theta).sum()  # advantage 0: inf * 0 would be NaN
    loss.backward()
    assert bool(torch.isfinite(theta.grad).all())


def test_half_precision_log_ratios_are_summed_in_float32():
    """40,000 fp16 tokens with log-ratio 2: the sum (80,000) overflows fp16, the geometric mean e^2 does not."""
    lp = torch.zeros(1, 40_000, dtype=torch.float16)
    lmu, m = torch.full_like(lp, -2.0), torch.ones_like(lp)
    keep = geometric_sequence_mask(lp, lmu, m, low=0.5, high=10.0)
    assert keep.dtype == torch.float16 and bool((keep == 1).all())


def test_two_turn_agent_refuses_a_nan_theta_by_name():
    _, theta, _ = models._agent_tables()
    with pytest.raises(ValueError, match="theta must be finite"):
        two_turn_agent(0.5, theta=torch.full_like(theta, float("nan")))
    with pytest.raises(ValueError, match="theta must be finite"):
        two_turn_agent(0.5, theta=theta.clone().index_fill_(0, torch.tensor([3]), float("inf")))


def test_chain_score_moments_has_a_size_guard_that_names_the_size_and_the_limit():
    with pytest.raises(ValueError, match=r"L=12, K=4\) enumerates 16,777,216 sequences .* MAX_CHAIN_ENTRIES = 16,777,216"):
        op.chain_score_moments(12)
    assert op.chain_score_moments(7).total > 0  # the largest chain under the limit still runs


@pytest.mark.parametrize("fn", CORRECTION_WEIGHTS)
def test_weights_refuse_a_missing_mask_by_name(fn):
    z = np.zeros((2, 3))
    with pytest.raises(ValueError, match="mask is required"):
        fn(z, z, None)


@pytest.mark.parametrize("fn", CORRECTION_WEIGHTS)
def test_weights_refuse_the_meta_device_by_name(fn):
    z = torch.zeros(2, 3)
    meta = torch.zeros(2, 3, device="meta")
    for args, name in (((meta, z, z), "log_prob"), ((z, meta, z), "sampler_log_prob"), ((z, z, meta), "mask")):
        with pytest.raises(ValueError, match=f"{name} is on the meta device"):
            fn(*args)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second device")
@pytest.mark.parametrize("fn", CORRECTION_WEIGHTS)
def test_weights_refuse_arguments_on_different_devices(fn):
    z = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="arguments must live on one device, got log_prob on cpu, sampler_log_prob on cuda"):
        fn(z, z.cuda(), torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask on cuda"):
        fn(z, z, torch.ones(2, 3).cuda())
    out = fn(z.cuda(), z.cuda(), torch.ones(2, 3).cuda())
    assert out.device.type == "cuda"


def test_results_with_named_parts_are_frozen_records_with_a_readable_repr(stale, fresh):
    import dataclasses

    t = op.truncation_bias(stale, 1.28, "sequence")
    c = op.credit_assignment(fresh)
    for record in (t, c):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.bound = 0.0
        assert len(repr(record)) < 200  # no tensor dumped
    assert repr(t).startswith("TruncationBias(level='sequence', cap=1.28, |difference|=0.")
    assert (t.level, t.cap) == ("sequence", 1.28) and t.difference.shape == t.closed_form.shape == (40,)


# -- issue 18 item 3: rejection levels with k2/k3, the sequence ratio's floor, batch-normalised weights ----------
# Expected values are verl's (b178a3c, rollout_corr_helper) and the package's documented formulas written out in loops.

import math  # noqa: E402

from derivations import off_policy as dop  # noqa: E402
from numeric import batch_normalized_weights  # noqa: E402


def _stats_by_hand(lp, lmu, m, estimator, level):
    """verl's per-token k2 = d^2/2, k3 = e^d - 1 - d with d = log pi - log mu, reduced over a row's kept tokens."""
    out = []
    for lp_i, lmu_i, m_i in zip(lp, lmu, m):
        ks = []
        for a, b, keep in zip(lp_i, lmu_i, m_i):
            if keep:
                d = a - b
                ks.append({"k1": -d, "k2": d * d / 2, "k3": math.exp(d) - 1 - d}[estimator])
        if level == "token":
            it = iter(ks)
            out.append([next(it) if keep else None for keep in m_i])
        else:
            stat = {"seq_sum": sum(ks), "seq_mean": sum(ks) / len(ks) if ks else 0.0, "seq_max": max(ks) if ks else 0.0}[level]
            out.append([stat if keep else None for keep in m_i])
    return out


def _rs_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    lp = -torch.rand(5, 6, generator=g, dtype=torch.float64) * 2 - 0.01
    lmu = lp + torch.randn(5, 6, generator=g, dtype=torch.float64) * 0.4
    m = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 0, 1, 1, 0]], dtype=torch.float64)
    return lp, lmu, m


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize("level", ["token", "seq_sum", "seq_mean", "seq_max"])
def test_kl_rejection_levels_match_the_statistic_written_out(estimator, level):
    lp, lmu, m = _rs_batch()
    stats = _stats_by_hand(lp.tolist(), lmu.tolist(), m.tolist(), estimator, level)
    finite = sorted(set(v for row in stats for v in row if v is not None))
    lmu_pad = torch.where(m == 1, lmu, torch.tensor(-float("inf"), dtype=torch.float64))
    # thresholds between two statistics (at a statistic, a hand formula and expm1 may round apart)
    cuts = [(a + b) / 2 for a, b in zip(finite, finite[1:]) if (a + b) / 2 >= 0]
    picks = [cuts[0], cuts[len(cuts) // 2], cuts[-1]] if cuts else []
    for threshold in picks + [0.0, finite[-1] + 1.0]:
        theirs = torch.tensor([[0.0 if v is None else float(v <= threshold) for v in row] for row in stats], dtype=torch.float64)
        ours = kl_rejection_mask(lp, lmu_pad, m, threshold=threshold, estimator=estimator, level=level)
        assert torch.equal(ours, theirs), (threshold, ours, theirs)


@pytest.mark.parametrize("estimator", ["k1", "k2"])
@pytest.mark.parametrize("level", ["token", "seq_sum", "seq_mean", "seq_max"])
def test_kl_rejection_keeps_a_statistic_exactly_at_the_threshold(estimator, level):
    lp = torch.tensor([[-1.0, -2.0], [-1.0, -1.0]], dtype=torch.float64)
    lmu = torch.tensor([[-1.5, -2.5], [-1.5, -1.0]], dtype=torch.float64)  # log-ratios 0.5 exactly (and 0)
    m = torch.ones(2, 2)
    k = {"k1": 0.0, "k2": 0.125}[estimator]  # row 0 tokens: k1 = -0.5, k2 = 0.125; exactly representable
    stat = {"token": k, "seq_sum": 2 * k, "seq_mean": k, "seq_max": k}[level] if estimator == "k2" else 0.0
    at = kl_rejection_mask(lp, lmu, m, threshold=stat, estimator=estimator, level=level)
    below = kl_rejection_mask(lp, lmu, m, threshold=float(np.nextafter(stat, -1)) if stat > 0 else 0.0, estimator=estimator, level=level)
    assert at[0].tolist() == [1.0, 1.0]
    if estimator == "k2":
        assert below[0].tolist() == [0.0, 0.0]


def test_kl_rejection_levels_differ_where_they_should_and_keep_empty_rows():
    lp, lmu, m = _rs_batch(1)
    masks = {lv: kl_rejection_mask(lp, lmu, m, threshold=0.05, estimator="k2", level=lv) for lv in ("token", "seq_sum", "seq_mean", "seq_max")}
    assert not torch.equal(masks["seq_sum"], masks["seq_mean"])  # a mean is not a sum (rows of several tokens)
    assert torch.equal(masks["seq_max"], masks["token"].where(m == 1, 1).amin(-1, keepdim=True).expand_as(m) * m)  # max <= d iff every token
    default = kl_rejection_mask(lp, lmu, m, threshold=0.05, estimator="k2")
    assert torch.equal(default, masks["seq_sum"])  # today's behaviour is the default
    for mask in masks.values():
        assert mask[3].sum() == 0  # an empty row has no token to keep
    one_empty = torch.zeros(1, 3)
    for lv in ("seq_mean", "seq_max", "seq_sum", "token"):
        assert kl_rejection_mask(torch.zeros(1, 3), torch.zeros(1, 3), one_empty, threshold=0.0, level=lv).tolist() == [[0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match=r"level must be one of \('token', 'seq_sum', 'seq_mean', 'seq_max'\), got 'seq_min'"):
        kl_rejection_mask(lp, lmu, m, level="seq_min")


def test_truncated_sequence_ratio_floor_mirrors_the_token_twin():
    lp, lmu, m = _rs_batch(2)
    d = ((lp - lmu) * m).sum(-1, keepdim=True)
    for floor, cap in ((0.0, 2.0), (0.5, 2.0), (0.9, 1.1)):
        theirs = torch.exp(d).clamp(min=floor, max=cap).expand_as(m) * m
        assert (truncated_sequence_ratio(lp, lmu, m, cap=cap, floor=floor) - theirs).abs().max().item() <= 1e-15
    assert torch.equal(truncated_sequence_ratio(lp, lmu, m), truncated_sequence_ratio(lp, lmu, m, floor=0.0))
    big = torch.tensor([[800.0, 0.0], [-800.0, 0.0]], dtype=torch.float64)  # exp overflows, and underflows
    assert truncated_sequence_ratio(big, torch.zeros(2, 2), torch.ones(2, 2), cap=3.0, floor=0.25).tolist() == [[3.0, 3.0], [0.25, 0.25]]
    with pytest.raises(ValueError, match="floor must be < cap"):
        truncated_sequence_ratio(lp, lmu, m, cap=1.0, floor=1.0)
    with pytest.raises(ValueError, match="floor must be"):
        truncated_sequence_ratio(lp, lmu, m, floor=-0.1)


def _verl_batch_norm(w, m, level):
    """verl compute_rollout_correction_weights, rollout_is_batch_normalize=True, one process, written out."""
    if level == "token":
        mean = sum(a * b for row, mr in zip(w, m) for a, b in zip(row, mr)) / (sum(map(sum, m)) + 1e-8)
    else:
        rows = [sum(a * b for a, b in zip(row, mr)) / (sum(mr) + 1e-8) for row, mr in zip(w, m)]
        valid = [float(sum(mr) > 0) for mr in m]
        mean = sum(r * v for r, v in zip(rows, valid)) / max(sum(valid), 1e-8)
    return [[a * b / mean if mean > 1e-8 else a * b for a, b in zip(row, mr)] for row, mr in zip(w, m)], mean


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_batch_normalized_weights_are_verls(level):
    lp, lmu, m = _rs_batch(3)
    w = truncated_token_ratio(lp, lmu, m, cap=2.0) if level == "token" else truncated_sequence_ratio(lp, lmu, m, cap=2.0)
    theirs, mean = _verl_batch_norm(w.tolist(), m.tolist(), level)
    w_pad = torch.where(m == 1, w, torch.tensor(float("nan"), dtype=torch.float64))
    ours = batch_normalized_weights(w_pad, m, level=level)
    assert (ours - torch.tensor(theirs, dtype=torch.float64)).abs().max().item() <= 1e-7  # verl's + 1e-8 in the counts
    exact = w / mean * m
    if level == "token":
        assert abs((ours * m).sum().item() / m.sum().item() - 1) <= 1e-15  # mean exactly 1 over the kept tokens
        exact = w / ((w * m).sum() / m.sum())
    else:
        n = m.sum(-1)
        row_means = (ours * m).sum(-1)[n > 0] / n[n > 0]
        assert abs(row_means.mean().item() - 1) <= 1e-15  # the mean of the sequence weights is exactly 1
        exact = w / ((w * m).sum(-1)[n > 0] / n[n > 0]).mean()
    assert (ours - exact * m).abs().max().item() <= 1e-15


def test_batch_normalized_weights_levels_differ_edges_and_inputs():
    w = torch.tensor([[2.0, 2.0, 2.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    m = torch.tensor([[1, 1, 1], [1, 0, 0]], dtype=torch.float64)
    assert batch_normalized_weights(w, m, level="token")[0, 0].item() == pytest.approx(2 / (7 / 4), rel=1e-15)
    assert batch_normalized_weights(w, m, level="sequence")[0, 0].item() == pytest.approx(2 / 1.5, rel=1e-15)
    zero = torch.zeros(2, 3)
    assert torch.equal(batch_normalized_weights(zero, m), zero)  # nothing to normalise: unchanged, as verl
    assert batch_normalized_weights(w.numpy(), m.numpy()).dtype == np.float64
    assert batch_normalized_weights(w.float(), m).dtype == torch.float32
    with pytest.raises(ValueError, match="weights must be >= 0 where mask is 1"):
        batch_normalized_weights(-w, m)
    with pytest.raises(ValueError, match="level must be 'token' or 'sequence', got 'seq'"):
        batch_normalized_weights(w, m, level="seq")
    with pytest.raises(ValueError, match="mask is required"):
        batch_normalized_weights(w, None)
    with pytest.raises(ValueError, match="weights must be finite"):
        batch_normalized_weights(w.where(m == 0, float("inf")), m)


@pytest.mark.reads_derivation("derivations.off_policy.truncated_ratio_mean()")  # shares the chapter's build with test_rendered_derivations
def test_truncated_ratio_mean_derivation_and_its_numbers(fails_to_verify, verified_derivation):
    d = verified_derivation("derivations.off_policy.truncated_ratio_mean()")
    assert d.verified
    assert fails_to_verify(d.replaced(2, rhs=2 * d.steps[2].rhs))  # the untruncated mean is 1, not 2
    assert fails_to_verify(d.replaced(0, rhs=-d.steps[0].rhs))  # truncation removes the excess, it does not add it
    g = torch.Generator().manual_seed(4)
    for C in (0.5, 1.0, 1.7):
        pi, mu = (torch.softmax(torch.randn(7, generator=g, dtype=torch.float64) * 1.5, 0) for _ in range(2))
        rho = pi / mu
        assert abs((mu * rho.clamp(max=C)).sum().item() - (1 - (mu * (rho - C).clamp(min=0)).sum().item())) <= 1e-15
