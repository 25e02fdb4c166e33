"""TinyLM: enumeration, probabilities, closed-form scores against autograd, bad input."""

import numpy as np
import pytest
import torch

from numeric import EOS, TinyLM, default_reward, perturb, score_matrix, token_score_tensor


def test_enumeration_is_complete_and_well_formed(lm):
    assert (lm.N, lm.P, lm.n_prefixes) == (121, 160, 40)
    assert len(set(lm.seqs)) == lm.N
    for s in lm.seqs:
        assert 1 <= len(s) <= lm.L
        assert all(t != EOS for t in s[:-1])  # EOS only at the end
        assert s[-1] == EOS or len(s) == lm.L
    assert torch.equal(lm.mask.sum(1).long(), lm.lengths)


def test_prefix_rows_name_the_prefix_before_each_token(lm):
    for n, s in enumerate(lm.seqs):
        for t in range(len(s)):
            assert lm.prefix_rows[n, t] == lm.prefix_row(s[:t])
    assert [lm.prefix_row(p) for p in lm.prefixes()] == list(range(lm.n_prefixes))


@pytest.mark.xdist_group("hypothesis")  # hypothesis is imported by the one worker that runs its tests, not at collection
def test_probabilities_sum_to_one_and_count_matches():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=25, deadline=None, derandomize=True)
    @given(V=st.integers(2, 5), L=st.integers(1, 4), seed=st.integers(0, 10**6), scale=st.floats(0, 4))
    def holds(V, L, seed, scale):
        lm = TinyLM(V=V, L=L, seed=seed, scale=scale)
        assert lm.N == sum((V - 1) ** (k - 1) for k in range(1, L + 1)) + (V - 1) ** L
        assert abs(float(lm.probs(lm.theta0).sum()) - 1) < 1e-13

    holds()


def test_probabilities_are_products_of_conditionals(lm):
    th = perturb(lm.theta0, 0.7, seed=4)
    p = lm.probs(th)
    for n in (0, 5, 37, 120):
        s = lm.seqs[n]
        direct = np.prod([float(lm.cond_probs(th, s[:t])[s[t]]) for t in range(len(s))])
        assert abs(float(p[n]) - direct) < 1e-15


def test_token_scores_match_autograd(lm):
    th = perturb(lm.theta0, 0.5, seed=1)
    T = token_score_tensor(lm, th)
    x = th.clone().requires_grad_(True)
    lp = lm.token_log_probs(x)
    for n in range(0, lm.N, 7):
        for t in range(lm.L):
            g = torch.autograd.grad(lp[n, t], x, retain_graph=True)[0]
            assert float((g - T[n, t]).abs().max()) < 1e-15
    S = score_matrix(lm, th)
    jac = torch.autograd.functional.jacobian(lm.sequence_log_prob, th)
    assert float((jac - S).abs().max()) < 1e-14


def test_default_reward_is_binary_with_mean_strictly_inside(lm):
    R = default_reward(lm)
    assert set(R.tolist()) == {0.0, 1.0}
    ER = float(lm.probs(lm.theta0) @ R)
    assert 0 < ER < 1


def test_perturb_is_deterministic_per_seed(lm):
    assert torch.equal(perturb(lm.theta0, 1.0, 3), perturb(lm.theta0, 1.0, 3))
    assert not torch.equal(perturb(lm.theta0, 1.0, 3), perturb(lm.theta0, 1.0, 4))
    noise = perturb(torch.zeros(lm.P, dtype=torch.float64), 1.0, 3)  # the standard normal draw itself
    assert torch.equal(noise, torch.randn(lm.P, generator=torch.Generator().manual_seed(3), dtype=torch.float64))
    assert float((perturb(lm.theta0, 0.25, 3) - (lm.theta0 + 0.25 * noise)).abs().max()) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"V": 1}, ValueError, "V must be >= 2"),
        ({"L": 0}, ValueError, "L must be >= 1"),
        ({"V": 2.5}, TypeError, "V must be an int"),
        ({"seed": "a"}, TypeError, "seed must be an int"),
        ({"scale": -1.0}, ValueError, "scale must be >= 0"),
    ],
)
def test_bad_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        TinyLM(**kwargs)


def test_bad_prefix_and_theta(lm):
    with pytest.raises(ValueError, match="prefix must be"):
        lm.cond_probs(lm.theta0, (0, 1))  # EOS inside a prefix
    with pytest.raises(ValueError, match="prefix must be"):
        lm.cond_probs(lm.theta0, (1, 1, 1, 1))  # too long: terminal
    with pytest.raises(TypeError, match="prefix must be a sequence"):
        lm.cond_probs(lm.theta0, 3)
    with pytest.raises(ValueError, match=r"theta must have shape \(160,\)"):
        lm.probs(torch.zeros(10))
    with pytest.raises(TypeError, match="theta must be a torch.Tensor"):
        lm.probs(np.zeros(160))
    with pytest.raises(TypeError, match="theta must be a real floating-point tensor"):
        lm.probs(torch.zeros(160, dtype=torch.int64))
    with pytest.raises(TypeError, match="theta must be a real floating-point tensor"):
        lm.probs(torch.zeros(160, dtype=torch.complex128))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_theta_is_refused_by_every_toy_lm_function(lm, bad):
    """NaN/inf theta used to return NaN silently; now each function names theta."""
    from numeric import expected_score_sum, score_estimator_moments, token_score_sqnorms
    from numeric.baselines import baseline_gradient, optimal_baseline, variance_terms
    from numeric.group_baselines import exact_group_gradient, rloo_advantages
    from numeric.score_function import autograd_gradient, finite_difference_gradient, log_ratio

    theta = lm.theta0.clone()
    theta[17] = bad
    R = default_reward(lm)
    calls = [
        lambda: lm.probs(theta),
        lambda: lm.cond_probs(theta, ()),
        lambda: token_score_tensor(lm, theta),
        lambda: score_matrix(lm, theta),
        lambda: token_score_sqnorms(lm, theta),
        lambda: expected_score_sum(lm, theta, R),
        lambda: score_estimator_moments(lm, theta, R),
        lambda: autograd_gradient(lm, theta, R),
        lambda: finite_difference_gradient(lm, theta, R),
        lambda: log_ratio(lm, lm.theta0, theta),
        lambda: baseline_gradient(lm, theta, R, 0.0),
        lambda: variance_terms(lm, theta, R),
        lambda: optimal_baseline(lm, theta, R),
        lambda: exact_group_gradient(lm, theta, R, 3, rloo_advantages),
        lambda: perturb(theta, 0.1, seed=0),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="theta must be finite"):
            call()


def test_fp32_theta_is_computed_in_fp64(lm):
    """fp32 theta converts exactly to fp64: the finite-difference gradient is no longer 11 % off."""
    from numeric.score_function import autograd_gradient, finite_difference_gradient

    R = default_reward(lm)
    th32 = perturb(lm.theta0, 0.3, seed=2).float()
    th64 = th32.double()
    assert torch.equal(lm.probs(th32), lm.probs(th64))
    exact = autograd_gradient(lm, th64, R)
    assert float((autograd_gradient(lm, th32, R) - exact).abs().max()) == 0.0
    assert float((finite_difference_gradient(lm, th32, R) - exact).abs().max()) < 1e-9
    x = th32.clone().requires_grad_(True)  # the conversion keeps the graph
    (g,) = torch.autograd.grad(lm.probs(x) @ R, x)
    assert g.dtype == torch.float32 and float((g.double() - exact).abs().max()) < 1e-6


def test_numpy_theta_is_a_named_type_error(lm):
    from numeric import expected_score_sum

    with pytest.raises(TypeError, match="theta must be a torch.Tensor, got ndarray"):
        expected_score_sum(lm, lm.theta0.numpy(), default_reward(lm))
    with pytest.raises(TypeError, match="theta must be a torch.Tensor, got ndarray"):
        token_score_tensor(lm, lm.theta0.numpy())


def test_bad_arguments_of_module_functions(lm):
    with pytest.raises(TypeError, match="lm must be a TinyLM"):
        default_reward("lm")
    with pytest.raises(TypeError, match="lm must be a TinyLM"):
        score_matrix(None, lm.theta0)
    with pytest.raises(ValueError, match="theta must have shape"):
        token_score_tensor(lm, torch.zeros(3))
    with pytest.raises(ValueError, match="scale must be >= 0"):
        perturb(lm.theta0, -0.1, seed=0)
    with pytest.raises(TypeError, match="theta must be a numpy array or a torch tensor"):
        perturb([1.0], 0.1, seed=0)


# -- numbers at the edges (issue 16) -------------------------------------------------------------


def test_a_size_guard_names_the_size_and_the_limit_before_enumerating():
    from numeric.tinylm import MAX_SEQUENCES, count_sequences

    with pytest.raises(ValueError, match=r"TinyLM\(V=50, L=6\) has 14,129,647,351 responses, more than MAX_SEQUENCES = 2,000,000"):
        TinyLM(V=50, L=6)
    for V, L in ((2, 1), (3, 5), (4, 4), (5, 3)):
        assert TinyLM(V=V, L=L).N == count_sequences(V, L)  # the count the guard uses is the enumeration's
    assert count_sequences(12, 6) <= MAX_SEQUENCES < count_sequences(13, 6)


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_perturb_draws_one_random_stream_per_seed_whatever_the_dtype(seed):
    theta = torch.linspace(-1, 1, 37, dtype=torch.float64)
    step64 = perturb(theta, 1.0, seed) - theta
    step32 = perturb(theta.float(), 1.0, seed) - theta.float()
    assert torch.allclose(step32.double(), step64, atol=1e-6, rtol=0)
    assert perturb(theta.float(), 0.5, seed).dtype == torch.float32


def test_the_toy_lm_validators_are_public_and_name_the_argument():
    from numeric.tinylm import check_lm, check_rewards

    lm = TinyLM()
    assert check_lm(lm) is lm
    with pytest.raises(TypeError, match="lm must be a TinyLM"):
        check_lm("lm")
    assert check_rewards(lm, default_reward(lm)).dtype == torch.float64
    with pytest.raises(ValueError, match=r"rewards must have shape \(121,\)"):
        check_rewards(lm, torch.zeros(3))
    with pytest.raises(ValueError, match="R must be finite"):
        check_rewards(lm, torch.full((lm.N,), float("nan")), "R")


def test_theta_on_the_meta_device_is_refused_by_name():
    from numeric.expectations import expected_score_sum
    from numeric.tinylm import check_theta

    lm = TinyLM()
    meta = torch.zeros(lm.P, device="meta")
    with pytest.raises(ValueError, match="theta is on the meta device"):
        check_theta(lm, meta)
    with pytest.raises(ValueError, match="theta is on the meta device"):
        expected_score_sum(lm, meta, default_reward(lm))
