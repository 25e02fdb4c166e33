"""Trust region: the derivations verify, the suite passes, the KL estimators behave and reject bad input."""

import numpy as np
import pytest
import sympy as sp
import torch

from derivations import trust_region as dtr
from numeric import clip_excess, kl_k1, kl_k2, kl_k3


@pytest.mark.parametrize(
    "make", [dtr.positive_part_lemma, dtr.tv_bound, dtr.clip_bias_term, dtr.k3_nonnegative, dtr.k2_bias, dtr.kl_estimator_gradients]
)
def test_derivations_verify(make):
    assert make().verify().verified


@pytest.mark.parametrize("K", [None, 2, 3, 5])
def test_kl_unbiasedness_for_several_K(K):
    assert all(d.verify().verified for d in dtr.kl_estimators_unbiased(K))


def test_kl_gradients_K2():
    assert dtr.kl_estimator_gradients(2).verify().verified


def test_lemma_fails_for_c_below_one():
    """The lemma needs c >= 1: at c = 1/2, x = 1, y = 1 the left side is 1/2 > 0 = right side."""
    x, y, c = sp.Rational(1), sp.Rational(1), sp.Rational(1, 2)
    assert sp.Max(x - c * y, 0) > sp.Max(x - y, 0)


def test_kl_unbiased_K_validation():
    with pytest.raises(ValueError, match="K"):
        dtr.kl_estimators_unbiased(1)


def test_estimators_on_random_distributions():
    rng = np.random.default_rng(1)
    for _ in range(20):
        pi, ref = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
        kl = float(pi @ np.log(pi / ref))
        k1, k2, k3 = (k(np.log(pi), np.log(ref)) for k in (kl_k1, kl_k2, kl_k3))
        assert float(pi @ k1) == pytest.approx(kl, abs=1e-14)
        assert float(pi @ k3) == pytest.approx(kl, abs=1e-14)
        assert (k3 >= 0).all() and (k2 >= 0).all()


def test_kinds_and_gradients():
    lp = torch.log(torch.tensor([0.2, 0.8])).requires_grad_(True)
    ref = torch.log(torch.tensor([0.5, 0.5]))
    out = kl_k3(lp, ref)
    assert isinstance(out, torch.Tensor) and out.requires_grad
    assert isinstance(kl_k1(np.zeros(3), np.zeros(3)), np.ndarray)
    assert isinstance(clip_excess(np.ones(3)), np.ndarray)


@pytest.mark.parametrize("k", [kl_k1, kl_k2, kl_k3])
def test_kl_bad_input(k):
    with pytest.raises(ValueError, match="shape"):
        k(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="finite"):
        k(np.array([0.0, -np.inf]), np.zeros(2))
    with pytest.raises(ValueError, match="finite"):
        k(np.zeros(2), np.array([np.nan, 0.0]))
    with pytest.raises(TypeError, match="log_prob"):
        k([0.0], np.zeros(1))


def test_clip_excess_bad_input():
    with pytest.raises(ValueError, match="positive"):
        clip_excess(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="finite"):
        clip_excess(np.array([np.inf, 1.0]))
    with pytest.raises(ValueError, match="clip_epsilon"):
        clip_excess(np.ones(2), -0.1)
