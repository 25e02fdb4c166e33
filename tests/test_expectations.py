"""The per-prefix expectation layer against dense enumeration."""

import pytest
import torch

from numeric import (
    TinyLM,
    default_reward,
    expected_score_sum,
    perturb,
    score_estimator_moments,
    score_matrix,
    token_score_sqnorms,
    token_score_tensor,
)


@pytest.fixture(scope="module")
def setup():
    lm = TinyLM(V=4, L=4, seed=0)
    th = perturb(lm.theta0, 0.6, seed=9)
    return lm, th, lm.probs(th), token_score_tensor(lm, th)


def test_sequence_weights_match_dense(setup):
    lm, th, p, T = setup
    w = default_reward(lm) - 0.3
    S = T.sum(1)
    dense_mean = p @ (w[:, None] * S)
    dense_second = float(p @ (w[:, None] * S).pow(2).sum(1))
    m = score_estimator_moments(lm, th, w)
    assert float((m.mean - dense_mean).abs().max()) < 1e-15
    assert abs(m.second_moment - dense_second) < 1e-13
    assert abs(m.variance - (dense_second - float(dense_mean @ dense_mean))) < 1e-13


def test_token_weights_match_dense(setup):
    lm, th, p, T = setup
    gen = torch.Generator().manual_seed(2)
    W = torch.randn(lm.N, lm.L, generator=gen)
    est = (W[:, :, None] * T * lm.mask[:, :, None]).sum(1)
    m = score_estimator_moments(lm, th, W)
    assert float((m.mean - p @ est).abs().max()) < 1e-15
    assert abs(m.second_moment - float(p @ est.pow(2).sum(1))) < 1e-13


def test_sqnorms_and_orthogonality_of_token_scores(setup):
    lm, th, p, T = setup
    assert float((token_score_sqnorms(lm, th) - T.pow(2).sum(-1)).abs().max()) < 1e-15
    S = score_matrix(lm, th)
    assert float((S.pow(2).sum(1) - token_score_sqnorms(lm, th).sum(1)).abs().max()) < 1e-14


def test_bad_weights(setup):
    lm, th, _, _ = setup
    with pytest.raises(ValueError, match=r"weights must have shape \(121,\) or \(121, 4\)"):
        expected_score_sum(lm, th, torch.ones(5))
    with pytest.raises(ValueError, match="weights must be finite"):
        score_estimator_moments(lm, th, torch.full((lm.N,), float("nan")))
    with pytest.raises(TypeError, match="weights must be a torch.Tensor"):
        expected_score_sum(lm, th, [1.0] * lm.N)
    with pytest.raises(TypeError, match="lm must be a TinyLM"):
        token_score_sqnorms(object(), th)
