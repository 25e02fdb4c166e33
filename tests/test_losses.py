"""The losses trainers ship: trainer readiness of every batched helper, then numeric.losses.

Trainer readiness (each test names the mistake it would catch): no global state
changed on import; the caller's dtype out; masked slots never raise nor leak
NaN; boolean masks; near-tie groups; one spelling of every argument; numpy
views with negative strides; complex input refused; stopped advantages.
"""

import importlib
import inspect
import math
import sys
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
import torch

import numeric
from derivations import trust_region as dtr
from numeric import (
    cispo_loss,
    discounted_score_weights,
    gae_advantages,
    gradient_weight,
    group_mean_advantages,
    group_zscore_advantages,
    kl_k1,
    kl_k2,
    kl_k3,
    lambda_returns,
    leave_one_out_baselines,
    ppo_clipped_terms,
    ppo_diagnostics,
    ppo_loss,
    reward_to_go,
    rloo_advantages,
)
from numeric.baselines import reinforce_loss

DTYPES = [torch.float32, torch.bfloat16, torch.float64]
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float64: 1e-14}


@pytest.fixture
def float32_default():
    """Run a test under torch's own default dtype, as a trainer does."""
    torch.set_default_dtype(torch.float32)
    yield
    torch.set_default_dtype(torch.float64)


def _batch(B=3, T=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lp = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 2 - 0.05
    old = lp + 0.3 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    adv = torch.randn(B, 1, generator=gen, dtype=torch.float64).expand(B, T).contiguous()
    mask = torch.ones(B, T, dtype=torch.float64)
    mask[0, 3:] = 0
    mask[2, 1:] = 0
    return lp, old, adv, mask


# ------------------------------------------------------------------ import


@pytest.fixture
def fresh_numeric():
    """Import numeric anew (its submodules too) from a float32 default; restore the loaded modules afterwards."""
    saved = {k: v for k, v in sys.modules.items() if k == "numeric" or k.startswith("numeric.")}
    for k in saved:
        del sys.modules[k]
    torch.set_default_dtype(torch.float32)
    yield importlib.import_module
    for k in [k for k in sys.modules if k == "numeric" or k.startswith("numeric.")]:
        del sys.modules[k]
    sys.modules.update(saved)
    torch.set_default_dtype(torch.float64)


def test_importing_numeric_leaves_torch_default_dtype_alone_and_numeric_course_sets_it(fresh_numeric):
    fresh = fresh_numeric("numeric")
    assert fresh is not numeric and torch.get_default_dtype() == torch.float32
    course = fresh_numeric("numeric.course")
    assert torch.get_default_dtype() == torch.float64
    assert set(course.__all__) == set(fresh.__all__) and all(hasattr(course, n) for n in course.__all__)


# ------------------------------------------------------------------ dtype


def _token_helpers():
    lp, old, adv, mask = _batch()
    clean = lambda x: x.clone()  # noqa: E731
    return {
        "reinforce_loss": (lambda c: reinforce_loss(c(lp), c(adv[:, 0]), mask)),
        "ppo_loss": (lambda c: ppo_loss(c(lp), c(old), c(adv), mask, (0.2, 0.28))),
        "cispo_loss": (lambda c: cispo_loss(c(lp), c(old), c(adv), mask, 0.28)),
        "ppo_clipped_terms": (lambda c: ppo_clipped_terms(c((lp - old).exp()), c(adv), 0.2).pessimistic),
        "gradient_weight": (lambda c: gradient_weight("ppo", c((lp - old).exp()), c(adv), 0.2)),
        "kl_k1": (lambda c: kl_k1(c(lp), c(old), mask)),
        "kl_k2": (lambda c: kl_k2(c(lp), c(old), mask)),
        "kl_k3": (lambda c: kl_k3(c(lp), c(old), mask)),
        "leave_one_out_baselines": (lambda c: leave_one_out_baselines(c(lp))),
        "group_mean_advantages": (lambda c: group_mean_advantages(c(lp))),
        "rloo_advantages": (lambda c: rloo_advantages(c(lp))),
        "group_zscore_advantages": (lambda c: group_zscore_advantages(c(lp), std="bessel")),
        "reward_to_go": (lambda c: reward_to_go(c(lp), 0.9)),
        "discounted_score_weights": (lambda c: discounted_score_weights(c(lp), 0.9)),
        "gae_advantages": (lambda c: gae_advantages(c(lp), c(old), c(adv), mask == 2, mask == 0, 0.9, 0.8)),
        "lambda_returns": (lambda c: lambda_returns(c(lp), c(adv), mask == 2, mask == 0, 0.9, 0.8)),
    }, clean


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(_token_helpers()[0]))
def test_output_follows_the_input_dtype(name, dtype, float32_default):
    """Catches float64 results for float32 input (ppo_loss and cispo_loss did this) and bf16 crashes."""
    fn = _token_helpers()[0][name]
    out = fn(lambda x: x.to(dtype))
    exact = fn(lambda x: x.to(torch.float64))
    assert out.dtype == dtype and out.device == torch.device("cpu")
    scale = 1 + exact.abs().max().item()
    assert (out.double() - exact).abs().max().item() <= TOL[dtype] * 8 * scale


# ------------------------------------------------------------------ padding


SENTINELS = [-math.inf, math.inf, math.nan, -1e30, 1e4]


def _masked_losses():
    return {
        "reinforce_loss": lambda lp, old, adv, m: reinforce_loss(lp, adv[:, 0], m),
        "ppo_loss": lambda lp, old, adv, m: ppo_loss(lp, old, adv, m, (0.2, 0.28)),
        "cispo_loss": lambda lp, old, adv, m: cispo_loss(lp, old, adv, m, 0.28),
        "kl_k3 (sum)": lambda lp, old, adv, m: kl_k3(lp, old, m).sum(),
        "kl_k2 (sum)": lambda lp, old, adv, m: kl_k2(lp, old, m).sum(),
        "kl_k1 (sum)": lambda lp, old, adv, m: kl_k1(lp, old, m).sum(),
    }


@pytest.mark.parametrize("sentinel", SENTINELS)
@pytest.mark.parametrize("name", list(_masked_losses()))
def test_masked_slots_are_neutral_in_value_and_gradient(name, sentinel):
    """Catches 'ratio must be finite' on padding, and NaN from inf * 0 in the value or the gradient."""
    fn = _masked_losses()[name]
    lp, old, adv, mask = _batch()
    pad = mask == 0
    ref_lp = lp.clone().requires_grad_(True)
    ref = fn(ref_lp, old, adv, mask)
    (ref_grad,) = torch.autograd.grad(ref, ref_lp)
    dirty = [torch.where(pad, torch.full_like(x, sentinel), x) for x in (lp, old)]
    adv_dirty = adv if name == "reinforce_loss" else torch.where(pad, torch.full_like(adv, sentinel), adv)
    for m in (mask, mask.bool(), mask.numpy().astype(np.int64)):
        x = dirty[0].clone().requires_grad_(True)
        out = fn(x, dirty[1], adv_dirty, m)
        (g,) = torch.autograd.grad(out, x)
        assert torch.isfinite(out) and torch.isfinite(g).all()
        assert abs(out.item() - ref.item()) <= 1e-15 * (1 + abs(ref.item()))
        assert torch.equal(g, ref_grad) and g[pad].abs().max().item() == 0.0


def test_ppo_diagnostics_ignore_masked_slots():
    lp, old, adv, mask = _batch()
    pad = mask == 0
    clean = ppo_diagnostics(lp, old, adv, 0.2, mask)
    dirty = ppo_diagnostics(torch.where(pad, -math.inf, lp), torch.where(pad, math.nan, old), adv, 0.2, mask.bool())
    assert clean == dirty


def test_unmasked_non_finite_values_and_bad_masks_are_named():
    lp, old, adv, mask = _batch()
    bad = lp.clone()
    bad[1, 0] = math.nan
    for fn in (lambda: ppo_loss(bad, old, adv, mask), lambda: cispo_loss(bad, old, adv, mask), lambda: kl_k3(bad, old, mask)):
        with pytest.raises(ValueError, match="log_prob must be finite .*where mask is 1"):
            fn()
    with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
        ppo_loss(lp, old, adv, mask * 0.5)
    with pytest.raises(ValueError, match="mask must have the shape of log_prob"):
        ppo_loss(lp, old, adv, mask[:, :2])


# ------------------------------------------------------------------ near ties


def _zscore_exact(values, eps, ddof):
    """(R - mean) / (std + eps) in exact rational arithmetic on the given floats; one rounding at the end."""
    r = [Fraction(float(v)) for v in values]
    mean = sum(r) / len(r)
    dev = [x - mean for x in r]
    var = sum(d * d for d in dev) / (len(r) - ddof)
    std = math.sqrt(var) if var else 0.0  # rounded once; the rest is exact
    return [float(d) / (std + eps) if var else 0.0 for d in dev]


def test_zscore_near_tie_fp64_case_from_the_issue():
    """Catches the mean rounding to the first value: [0.1 + 0.2, 0.3, 0.3, 0.3] gave [0, -1.155, ...]."""
    r = np.array([0.1 + 0.2, 0.3, 0.3, 0.3])
    out = group_zscore_advantages(r, eps=0.0)
    s3 = math.sqrt(3)
    assert np.abs(out - np.array([s3, -1 / s3, -1 / s3, -1 / s3])).max() <= 1e-12


@pytest.mark.parametrize("ulps", [1, 2, 3])
@pytest.mark.parametrize("eps", [0.0, 1e-8])
@pytest.mark.parametrize("std, ddof", [("population", 0), ("bessel", 1)])
def test_zscore_float32_group_a_few_ulps_apart(ulps, eps, std, ddof):
    """A float32 group whose rewards differ by a few ulps: as accurate as its own values (rel. 1e-5)."""
    base = np.float32(0.7)
    r = np.array([base, np.nextafter(base, np.float32(1)), base, base], dtype=np.float32)
    for _ in range(ulps - 1):
        r[1] = np.nextafter(r[1], np.float32(1))
    out = group_zscore_advantages(torch.from_numpy(r), eps=eps, std=std)
    exact = np.array(_zscore_exact(r, eps, ddof))
    assert out.dtype == torch.float32
    assert np.abs(out.numpy() - exact).max() <= 1e-5 * np.abs(exact).max()


@pytest.mark.parametrize("eps", [1e-6, 1e-4, 1e-9])
def test_zscore_bessel_matches_the_trainers_formula(eps):
    """verl (1e-6), TRL (1e-4), OpenRLHF (1e-9): (R - mean) / (torch.std(R) + eps), torch.std being Bessel."""
    r = torch.tensor([[1.0, 0.0, 0.5, 0.25, 0.0], [0.3, -1.2, 2.0, 0.0, 0.7]])
    theirs = (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + eps)
    assert (group_zscore_advantages(r, eps, std="bessel") - theirs).abs().max().item() <= 1e-15


# ------------------------------------------------------------------ names and input kinds

CANONICAL = {"log_prob", "old_log_prob", "ref_log_prob", "advantage", "mask", "reward", "value", "next_value", "terminated", "trace_cut", "ratio"}
RETIRED = {"logprobs", "log_probs", "new_log_prob", "advantages", "rewards", "values", "next_values", "trace_cuts", "response_mask"}


@pytest.mark.parametrize(
    "fn",
    [reinforce_loss, leave_one_out_baselines, group_mean_advantages, rloo_advantages, group_zscore_advantages, reward_to_go,
     discounted_score_weights, gae_advantages, lambda_returns, ppo_clipped_terms, ppo_diagnostics, ppo_loss, cispo_loss,
     gradient_weight, kl_k1, kl_k2, kl_k3],
)
def test_one_spelling_of_every_tensor_argument(fn):
    names = set(inspect.signature(fn).parameters)
    assert not names & RETIRED
    assert names & CANONICAL


def test_numpy_views_with_negative_strides():
    r = np.arange(12.0).reshape(3, 4) ** 1.5
    view = r[:, ::-1]
    assert np.array_equal(rloo_advantages(view), rloo_advantages(view.copy()))
    assert np.array_equal(reward_to_go(view, 0.9), reward_to_go(view.copy(), 0.9))
    lp = -r[::-1] / 10 - 0.1
    assert ppo_loss(lp, lp[:, ::-1], view, np.ones((3, 4))[::-1]) == ppo_loss(lp.copy(), lp[:, ::-1].copy(), view.copy(), np.ones((3, 4)))


def test_complex_input_is_refused():
    for z in (np.ones(3, complex), torch.ones(3, dtype=torch.complex64)):
        with pytest.raises(TypeError, match="reward must hold real numbers"):
            rloo_advantages(z)
        with pytest.raises(TypeError, match="log_prob must hold real numbers"):
            kl_k1(z, np.zeros(3))


def test_gae_flags_and_values_are_checked_in_the_callers_words():
    r = np.zeros(4)
    term, cut = np.zeros(4, bool), np.array([False, False, False, True])
    with pytest.raises(TypeError, match="terminated must be boolean, got float64 values") as info:
        gae_advantages(r, r, r, term.astype(float), cut, 0.9, 0.9)
    assert "torch" not in str(info.value)
    with pytest.raises(TypeError, match="value must be a numpy array or a torch tensor, got NoneType"):
        gae_advantages(r, None, r, term, cut, 0.9, 0.9)


# ------------------------------------------------------------------ k3 and stopped advantages


def test_k3_is_the_derived_expression_and_accurate_in_float32():
    delta = torch.tensor([-2.0, -0.3, 0.0, 0.4, 3.0], dtype=torch.float64)
    derived = sp.lambdify(dtr.delta, dtr.k3, "math")
    assert max(abs(kl_k3(delta, torch.zeros(5))[i].item() - derived(float(d))) for i, d in enumerate(delta)) <= 1e-15
    small = torch.tensor([1e-3, -1e-3, 3e-4], dtype=torch.float32)
    exact = [math.expm1(-float(d)) + float(d) for d in small.double()]
    got = kl_k3(small, torch.zeros(3, dtype=torch.float32))
    rel = max(abs(g - e) / e for g, e in zip(got.double().tolist(), exact))
    naive = (torch.exp(-small) - 1 + small).double()
    naive_rel = max(abs(g - e) / e for g, e in zip(naive.tolist(), exact))
    assert rel <= 1e-3 < 0.1 <= naive_rel


@pytest.mark.parametrize("name", ["reinforce_loss", "ppo_loss", "cispo_loss"])
def test_an_advantage_that_requires_grad_is_stopped(name):
    """Catches a missing detach: A(theta) = theta * a carries a gradient the loss must ignore."""
    lp0, old, adv0, mask = _batch()
    fn = _masked_losses()[name]
    theta = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    (g_live,) = torch.autograd.grad(fn(theta * lp0, old, theta * adv0, mask), theta)
    (g_stopped,) = torch.autograd.grad(fn(theta * lp0, old, (theta * adv0).detach(), mask), theta)
    assert g_live.item() == g_stopped.item()
    # the test can fail: a loss that let A through would add d loss / d A . a, which is not 0 here
    a_live = (theta.detach() * adv0).requires_grad_(True)
    lp, m = (theta * lp0).detach(), mask
    ratio = (lp - old).exp()
    leaky = {
        "reinforce_loss": lambda A: -(A[:, 0] * (lp * m).sum(1)).mean(),
        "ppo_loss": lambda A: -(ppo_clipped_terms(ratio, A, (0.2, 0.28)).pessimistic * m).sum() / m.sum(),
        "cispo_loss": lambda A: -(ratio.clamp(max=1.28) * A * lp * m).sum() / m.sum(),
    }[name]
    assert abs(leaky(a_live).item() - fn(lp, old, a_live.detach(), m).item()) <= 1e-15
    (dA,) = torch.autograd.grad(leaky(a_live), a_live)
    assert abs((dA * adv0).sum().item()) > 1e-3
