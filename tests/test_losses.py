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


def _clip(method):
    """DAPO's clip range (0.2, 0.28) for the methods that take one (the registry names each method's parameters)."""
    from derivations.methods import METHODS

    return {k: v for k, v in {"eps_low": 0.2, "eps_high": 0.28}.items() if k in METHODS[method].parameters}


def _selected(method, shape):
    """The arguments a method requires: a fixed selection (every third token) for the selecting methods (Clip-Cov, KL-Cov, the
    top-entropy mask, M2PO), DRO's beta (no default, as in verl); nothing for the others."""
    if method == "dro":
        return {"dro_beta": 0.1}
    if method not in ("clip_cov", "kl_cov", "top_entropy", "m2po"):
        return {}
    B, T = shape
    return {"selected": torch.arange(B * T).reshape(B, T) % 3 == 0}


def _mode(method):
    """The mode whose kappa multiplies the method's weight (GMPO: seq-mean-token-mean's; PPO on the product ratio: seq-mean-token-sum's)."""
    from numeric.losses.certificates import kappa_mode

    return kappa_mode(method)


def _kappa(method, mask, params):
    """Each token's kappa under the method's mode; M2PO's dropped tokens leave the mask first."""
    kept = mask * ~params["selected"] if method == "m2po" else mask
    return token_weights(kept, _mode(method))


def cispo_loss(log_prob, old_log_prob, advantages, mask, eps_high=0.28):
    """CISPO's one-sided cap (``eps_low=None``), through the one code path, ``policy_loss``."""
    return numeric.policy_loss("cispo", log_prob, old_log_prob, advantages, mask, eps_low=None, eps_high=eps_high)

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
    assert set(course.__all__) == {*fresh.__all__, "use_course_defaults"} and all(hasattr(course, n) for n in course.__all__)


# ------------------------------------------------------------------ dtype


def _token_helpers():
    lp, old, adv, mask = _batch()
    clean = lambda x: x.clone()  # noqa: E731
    return {
        "reinforce_loss": (lambda c: reinforce_loss(c(lp), c(adv[:, 0]), mask)),
        "ppo_loss": (lambda c: ppo_loss(c(lp), c(old), c(adv), mask, eps_low=0.2, eps_high=0.28)),
        "cispo_loss": (lambda c: cispo_loss(c(lp), c(old), c(adv), mask, 0.28)),
        "ppo_clipped_terms": (lambda c: ppo_clipped_terms(c((lp - old).exp()), c(adv)).pessimistic),
        "gradient_weight": (lambda c: gradient_weight("ppo", c((lp - old).exp()), c(adv))),
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
        "ppo_loss": lambda lp, old, adv, m: ppo_loss(lp, old, adv, m, eps_low=0.2, eps_high=0.28),
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
    clean = ppo_diagnostics(lp, old, adv, mask)
    dirty = ppo_diagnostics(torch.where(pad, -math.inf, lp), torch.where(pad, math.nan, old), adv, mask.bool())
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
    r = torch.tensor([[1.0, 0.0, 0.5, 0.25, 0.0], [0.3, -1.2, 2.0, 0.0, 0.7]], dtype=torch.float64)
    theirs = (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + eps)
    assert (group_zscore_advantages(r, eps, std="bessel") - theirs).abs().max().item() <= 1e-15


# ------------------------------------------------------------------ names and input kinds

# the lead's vocabulary is ``advantages`` / ``rewards``; the singular spellings stay allowed until every module has moved
CANONICAL = {"log_prob", "old_log_prob", "ref_log_prob", "advantage", "advantages", "mask", "reward", "rewards", "value", "next_value", "terminated", "trace_cut", "ratio"}
RETIRED = {"logprobs", "log_probs", "new_log_prob", "values", "next_values", "trace_cuts", "response_mask"}
# the lead's convention for the losses house (brief L): plural advantages and rewards, mask after the tensors
HOUSE_CANONICAL = {"log_prob", "old_log_prob", "ref_log_prob", "advantages", "mask", "rewards", "ratio"}
HOUSE_RETIRED = {"logprobs", "log_probs", "new_log_prob", "advantage", "reward", "token_reward", "response_mask", "clip_epsilon", "cispo_cap"}


@pytest.mark.parametrize(
    "fn",
    [reinforce_loss, leave_one_out_baselines, group_mean_advantages, rloo_advantages, group_zscore_advantages, reward_to_go,
     discounted_score_weights, gae_advantages, lambda_returns],
)
def test_one_spelling_of_every_tensor_argument(fn):
    names = set(inspect.signature(fn).parameters)
    assert not names & RETIRED
    assert names & CANONICAL


@pytest.mark.parametrize(
    "fn",
    [numeric.ppo_clipped_terms, numeric.ppo_diagnostics, numeric.ppo_loss, numeric.gradient_weight, numeric.policy_loss,
     numeric.policy_weight, numeric.kl_k1, numeric.kl_k2, numeric.kl_k3, numeric.kl_penalty, numeric.masked_whiten,
     numeric.reinforce_pp_advantages, numeric.reinforce_pp_baseline_advantages, numeric.remax_advantages,
     numeric.opo_advantages, numeric.gpg_advantages, numeric.passk_advantages, numeric.clip_excess],
)
def test_one_spelling_in_the_losses_house(fn):
    """Tensors first (log_prob, old_log_prob, advantages), then mask, then keyword-only options; no retired spelling."""
    params = inspect.signature(fn).parameters
    assert not set(params) & HOUSE_RETIRED
    assert set(params) & HOUSE_CANONICAL
    positional = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if "mask" in positional:  # nothing but tensors before the mask, and no option after it
        assert positional[-1] == "mask", positional


def test_numpy_views_with_negative_strides():
    r = np.arange(12.0).reshape(3, 4) ** 1.5
    view = r[:, ::-1]
    assert np.array_equal(rloo_advantages(view), rloo_advantages(view.copy()))
    assert np.array_equal(reward_to_go(view, 0.9), reward_to_go(view.copy(), 0.9))
    lp = -r[::-1] / 10 - 0.1
    assert ppo_loss(lp, lp[:, ::-1], view, np.ones((3, 4))[::-1]) == ppo_loss(lp.copy(), lp[:, ::-1].copy(), view.copy(), np.ones((3, 4)))


def test_complex_input_is_refused():
    for z in (np.ones(3, complex), torch.ones(3, dtype=torch.complex64)):
        with pytest.raises(TypeError, match="rewards? must hold real numbers"):
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
        "ppo_loss": lambda A: -(ppo_clipped_terms(ratio, A, eps_low=0.2, eps_high=0.28).pessimistic * m).sum() / m.sum(),
        "cispo_loss": lambda A: -(ratio.clamp(max=1.28) * A * lp * m).sum() / m.sum(),
    }[name]
    assert abs(leaky(a_live).item() - fn(lp, old, a_live.detach(), m).item()) <= 1e-15
    (dA,) = torch.autograd.grad(leaky(a_live), a_live)
    assert abs((dA * adv0).sum().item()) > 1e-3


# ================================================================== numeric.losses

from numeric import (  # noqa: E402
    POLICY_LOSSES,
    TRAINER_MODES,
    aggregate,
    broadcast_advantage,
    gpg_advantages,
    kl_penalty,
    masked_whiten,
    opo_advantages,
    passk_advantages,
    penalty_gradient,
    policy_loss,
    policy_weight,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
    remax_advantages,
    response_mask,
    sequence_log_prob,
    softmax_score,
    stable_softmax,
    token_entropy,
    token_log_probs,
    token_weights,
    value_loss,
)
from numeric.losses import clip_cov_selection, kl_cov_selection, length_bias_gradients  # noqa: E402


def _trainer_batch(B=6, T=7, seed=1):
    """Random fp64 batch with lengths 1..T (no all-masked row), ratios spread around 1, one advantage per row."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    lengths[0] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.float64)
    old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3 - 0.1
    lp = old + 0.4 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    A = torch.randn(B, generator=gen, dtype=torch.float64)
    return lp, old, A, mask


# ------------------------------------------------------------------ bookkeeping


def test_token_log_probs_is_the_gather_of_log_softmax_with_its_gradient():
    gen = torch.Generator().manual_seed(0)
    z = (3 * torch.randn(3, 5, 11, generator=gen, dtype=torch.float64)).requires_grad_(True)
    ids = torch.randint(0, 11, (3, 5), generator=gen)
    ours = token_log_probs(z, ids)
    ref = torch.log_softmax(z, -1).gather(-1, ids[..., None])[..., 0]
    assert (ours - ref).abs().max().item() <= 1e-14
    g1, g2 = (torch.autograd.grad(x.sum(), z)[0] for x in (ours, ref))
    assert (g1 - g2).abs().max().item() <= 1e-15
    assert token_log_probs(z.detach().float(), ids).dtype == torch.float32
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 11\)"):
        token_log_probs(z, ids + 11)
    with pytest.raises(TypeError, match="tokens must hold integers"):
        token_log_probs(z, ids.double())


def test_softmax_and_its_score_against_autograd_and_overflow():
    z = torch.tensor([800.0, 799.0, -5.0, 0.3], dtype=torch.float64, requires_grad=True)
    p = stable_softmax(z)
    assert torch.isfinite(p).all() and abs(p.sum().item() - 1) <= 1e-15
    for a in range(4):
        (g,) = torch.autograd.grad(torch.log_softmax(z, -1)[a], z)
        assert (softmax_score(z.detach(), torch.tensor(a)) - g).abs().max().item() <= 1e-15
    assert abs(float(token_entropy(np.log([0.5, 0.25, 0.25]))) - (1.5 * math.log(2))) <= 1e-15


def _course_mask(ids, prompt, pad, eos):
    """The course's loop, with EOS taking precedence over PAD when their ids coincide."""
    out = np.zeros((ids.shape[0], ids.shape[1] - 1))
    for b in range(ids.shape[0]):
        for pos in range(max(prompt[b], 1), ids.shape[1]):
            tok = ids[b, pos]
            if tok == eos:
                out[b, pos - 1] = 1
                break
            if tok != pad:
                out[b, pos - 1] = 1
    return out


@pytest.mark.parametrize("pad, eos", [(0, 2), (2, 2)])
def test_response_mask_matches_a_loop_with_the_one_position_shift(pad, eos):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 5, size=(40, 9))
    prompt = rng.integers(1, 6, size=40)
    assert np.array_equal(response_mask(ids, prompt, pad, eos).astype(float), _course_mask(ids, prompt, pad, eos))
    assert response_mask(torch.from_numpy(ids), torch.from_numpy(prompt), pad, eos).dtype == torch.bool
    with pytest.raises(ValueError, match="prompt_length must be >= 1"):
        response_mask(ids, np.zeros(40, int), pad, eos)
    with pytest.raises(ValueError, match="prompt_length must have shape"):
        response_mask(ids, prompt[:3], pad, eos)


def test_sequence_log_prob_and_broadcast():
    lp, _, A, mask = _trainer_batch()
    dirty = torch.where(mask > 0, lp, -math.inf)
    assert (sequence_log_prob(dirty, mask) - (lp * mask).sum(1)).abs().max().item() <= 1e-15
    assert torch.equal(broadcast_advantage(A, mask.bool()), A[:, None] * mask)
    with pytest.raises(ValueError, match="advantages must have shape"):
        broadcast_advantage(A[:2], mask)


# ------------------------------------------------------------------ aggregation: each trainer's formula, written out


def _their_aggregation(trainer, name, commit, x, m, T, L, N, groups):
    """Each trainer's reduction at its commit, written out from its code (the research notes' file:lines), on a batch with an empty row."""
    rows, n = (x * m).sum(-1), m.sum(-1)
    live = n > 0
    if (trainer, name) in {("verl", "token-mean"), ("TRL", "bnpo"), ("OpenRLHF", "per-token (token_level_loss=True)"), ("SkyRL", "token_mean")}:
        return rows.sum() / m.sum().clamp(min=1)
    if (trainer, name) in {("verl", "seq-mean-token-mean"), ("OpenRLHF", "per-sample (token_level_loss=False)")}:
        return (rows / (n + 1e-8))[live].mean()  # masked_mean's n_i + 1e-8, then the rows with a token
    if (trainer, name) in {("TRL", "grpo"), ("SkyRL", "sequence_mean"), ("ms-swift", "grpo")}:
        return (rows / n.clamp(min=1)).mean()
    if (trainer, name) == ("verl", "seq-mean-token-sum"):
        return rows[live].mean()
    if (trainer, name) == ("verl", "token-sum"):
        return rows.sum()
    if (trainer, name, commit) == ("verl", "seq-mean-token-sum-norm", "b178a3c"):
        return rows.sum() / T
    if (trainer, name, commit) == ("verl", "seq-mean-token-sum-norm", "1dda039"):
        return (rows / T)[live].mean()  # #5417: the mean over the rows with a token of sum_t / D
    if name in ("dr_grpo", "seq_mean_token_sum_norm"):
        return (rows / L).mean()  # every row counted
    if name == "dapo":
        return rows.sum() / N
    if (trainer, name) == ("SkyRL", "prompt_mean"):
        prompts = groups.unique()
        return sum(rows[groups == p].sum() / n[groups == p].sum().clamp(min=1) for p in prompts) / len(prompts)
    raise KeyError((trainer, name, commit))


def _ragged_with_an_empty_row():
    lp, _, _, mask = _trainer_batch()
    mask[2] = 0.0
    return lp * 1.7 + 0.2, mask, torch.tensor([0, 0, 1, 1, 2, 2])


@pytest.mark.parametrize("key", list(TRAINER_MODES), ids=["@".join(k) for k in TRAINER_MODES])
def test_every_trainer_mode_is_reproduced_by_arguments(key):
    """A reading's row, called by convention='trainer@commit' with the trainer's own name, is the trainer's reduction."""
    x, mask, groups = _ragged_with_an_empty_row()
    x = torch.where(mask > 0, x, math.nan)  # a masked slot is never read
    T, L, N = x.shape[1], 11, 97
    trainer, name, commit = key
    reading = TRAINER_MODES[key]
    args = {k: {"T": T, "max_completion_length": L, "max_seq_len": L, "num_items_in_batch": N}[v] for k, v in reading.args.items() if k == "norm"}
    theirs = _their_aggregation(*key, torch.nan_to_num(x), mask, T, L, N, groups).item()
    ours = aggregate(x, mask, name, convention=f"{trainer}@{commit}", groups=groups if reading.mode == "prompt-mean" else None, **args).item()
    assert abs(ours - theirs) <= 1e-15 * (1 + abs(theirs))  # relative: summation order
    kappa = token_weights(mask, name, convention=f"{trainer}@{commit}", groups=groups if reading.mode == "prompt-mean" else None, **args)
    assert abs((kappa * torch.nan_to_num(x)).sum().item() - theirs) <= 1e-15 * (1 + abs(theirs))


def test_aggregation_edge_cases_are_stated():
    x = torch.tensor([[1.0, 2.0], [5.0, 7.0]])
    m = torch.tensor([[1, 1], [0, 0]])
    assert aggregate(x, m, "seq-mean-token-mean").item() == 0.75  # the empty row counts in B, contributes 0
    assert aggregate(x, torch.zeros(2, 2), "token-mean").item() == 0.0
    with pytest.raises(ValueError, match=r"mode must be one of \('token-mean', 'seq-mean-token-mean'"):
        aggregate(x, m, "sum")
    with pytest.raises(ValueError, match="norm is used by token-mean and seq-mean-token-sum-norm only"):
        aggregate(x, m, "seq-mean-token-mean", norm=3)
    with pytest.warns(numeric.ReadingWarning, match="verl@1dda039"):  # the name's meaning moved in verl: the package keeps its number
        w = token_weights(np.array([[1, 1, 1], [1, 0, 0]]), "seq-mean-token-sum-norm", norm=4)
    assert np.array_equal(w, np.array([[1, 1, 1], [1, 0, 0]]) / 4)  # verl's: no mean over the B = 2 rows (was / 8)


# ------------------------------------------------------------------ policy losses: each trainer's formula, written out


def _their_policy_loss(method, lp, old, A, m, eps_l=0.2, eps_h=0.28, **kw):
    """Hand-written per-token formulas of verl / TRL / OpenRLHF, with their own aggregation."""
    At = A[:, None].expand_as(lp)
    r = (lp - old).exp()
    tok_mean = lambda x: (x * m).sum() / m.sum()  # noqa: E731
    seq_mean = lambda x: ((x * m).sum(-1) / m.sum(-1)).mean()  # noqa: E731
    if method == "ppo":  # verl vanilla / OpenRLHF PolicyLoss: max of the negated surrogates, dual clip for A < 0
        loss = torch.max(-At * r, -At * torch.clamp(r, 1 - eps_l, 1 + eps_h))
        if "dual_clip" in kw:
            loss = torch.where(At < 0, torch.min(-At * kw["dual_clip"], loss), loss)
        return tok_mean(loss)
    if method == "gspo":  # TRL importance_sampling_level="sequence", loss_type="grpo"
        coef = (((lp - old) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True)).exp()
        return seq_mean(-torch.min(coef * At, torch.clamp(coef, 1 - eps_l, 1 + eps_h) * At))
    if method == "gspo_token":  # verl gspo
        log_s = ((lp - old) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True)
        s = (lp - lp.detach() + log_s.detach()).exp()
        return seq_mean(torch.max(-At * s, -At * torch.clamp(s, 1 - eps_l, 1 + eps_h)))
    if method == "cispo":
        w = torch.clamp(r, max=kw["cispo_cap"]) if "cispo_cap" in kw else torch.clamp(r, 1 - eps_l, 1 + eps_h)
        return tok_mean(-w.detach() * At * lp)
    if method == "sapo":  # TRL sapo with its default temperatures
        t = torch.where(At > 0, torch.ones_like(At), torch.full_like(At, 1.05))
        return seq_mean(-torch.sigmoid(t * (r - 1)) * 4 / t * At)
    if method == "gspo_dual":  # OpenRLHF PolicyLoss, policy_loss_type "gspo", dual_clip c: mean log-ratio per row, per-sample mean
        coef = (((lp - old) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True)).exp()
        clip1 = torch.min(coef * At, torch.clamp(coef, 1 - eps_l, 1 + eps_h) * At)
        return seq_mean(-torch.where(At < 0, torch.max(clip1, kw["dual_clip"] * At), clip1))
    if method == "cispo_seq":  # TRL cispo at importance_sampling_level="sequence": (B, 1) ratio capped at epsilon_high, / num_items
        coef = (((lp - old) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1.0)).exp()
        return tok_mean(-torch.clamp(coef, max=kw["cispo_cap"]).detach() * At * lp)
    if method == "sapo_seq":  # TRL sapo at importance_sampling_level="sequence": one gate per row, grpo's per-row mean
        coef = (((lp - old) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1.0)).exp()
        t = torch.where(A[:, None] > 0, torch.tensor(1.0, dtype=lp.dtype), torch.tensor(1.05, dtype=lp.dtype))
        return seq_mean((-torch.sigmoid(t * (coef - 1)) * 4 / t * A[:, None]).expand_as(lp))
    if method == "vespo":  # TRL vespo: phi of the clamped product of ratios, in log space, detached; / num_items
        log_w = torch.clamp((torch.clamp(lp - old, -20.0, 20.0) * m).sum(-1, keepdim=True), math.log(1e-8), 20.0).detach()
        k = torch.where(A[:, None] >= 0, 2.0, 3.0).to(lp.dtype)
        lam = torch.where(A[:, None] >= 0, 3.0, 2.0).to(lp.dtype)
        phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w))
        return tok_mean(-phi * At * lp)
    if method == "clip_cov":  # verl clip_cov with the selection given: max of the negated surrogates, times 0 where selected
        corr = torch.where(kw["selected"], 0.0, 1.0).to(lp.dtype)
        return tok_mean(torch.max(-At * r, -At * torch.clamp(r, 1 - eps_l, 1 + eps_h)) * corr)
    if method == "kl_cov":  # verl kl_cov with the selection given: -A r, plus coef |log r| where selected
        return tok_mean(-At * r + torch.where(kw["selected"], kw["coef"] * (lp - old).abs(), 0.0))
    if method == "gmpo":  # verl geo_mean, clip (0.4, 0.4) in log space
        d = lp - old
        sgn = torch.sign(At)
        dmin = sgn * torch.min(sgn * d, sgn * torch.clamp(d, -0.4, 0.4))
        ratio = torch.exp((dmin * m).sum(-1) / m.sum(-1))
        return (-(At * m).sum(-1) / m.sum(-1) * ratio).mean()
    return tok_mean(-lp * At)  # reinforce / gpg


CONVENTIONS = [
    ("ppo", {}, {}), ("ppo", {"dual_clip": 3.0}, {"dual_clip": 3.0}), ("gspo", {}, {}), ("gspo_token", {}, {}),
    ("cispo", {}, {}), ("cispo", {"eps_low": None, "eps_high": 0.1}, {"cispo_cap": 1.1}), ("sapo", {"agg": "seq-mean-token-mean"}, {}),
    ("gmpo", {}, {}), ("reinforce", {}, {}), ("gpg", {}, {}),
    ("gspo", {"dual_clip": 3.0}, {"method": "gspo_dual", "dual_clip": 3.0}),
    ("cispo_seq", {"eps_low": None, "eps_high": 0.1}, {"cispo_cap": 1.1}),
    ("sapo_seq", {}, {}),
    ("vespo", {"log_ratio_clamp": 20.0}, {}),
    ("clip_cov", {}, {}),
    ("kl_cov", {"kl_cov_coef": 0.7}, {"coef": 0.7}),
]


@pytest.mark.parametrize("method, ours, theirs", CONVENTIONS, ids=[f"{m}{'-' + '-'.join(o) if o else ''}" for m, o, _ in CONVENTIONS])
def test_policy_loss_reproduces_each_trainer_convention_value_and_gradient(method, ours, theirs):
    lp0, old, A, mask = _trainer_batch()
    lp = lp0.clone().requires_grad_(True)
    sel = _selected(method, lp0.shape)
    a = policy_loss(method, lp, old, A, mask, **{**_clip(method), **ours, **sel})
    theirs = dict(theirs)
    b = _their_policy_loss(theirs.pop("method", method), lp, old, A, mask, **theirs, **sel)
    (ga,), (gb,) = torch.autograd.grad(a, lp), torch.autograd.grad(b, lp)
    assert abs(a.item() - b.item()) <= 1e-15 * (1 + abs(b.item()))
    assert (ga - gb).abs().max().item() <= 1e-15


def test_both_gspo_forms_follow_the_same_gradient_with_different_values_of_nothing():
    lp0, old, A, mask = _trainer_batch()
    grads = []
    for method in ("gspo", "gspo_token"):
        lp = lp0.clone().requires_grad_(True)
        grads.append(torch.autograd.grad(policy_loss(method, lp, old, A, mask), lp)[0])
    assert (grads[0] - grads[1]).abs().max().item() <= 1e-15


def _naive_loss(method, lp, old, A, m, eps_l=0.2, eps_h=0.28, selected=None):
    """Token by token, in Python scalars: the loss as a sum over (row, token) of each token's share."""
    B, T = lp.shape
    total = 0.0
    if method == "m2po":  # AReaL replaces the mask: a dropped token leaves the denominator too
        m = m * ~selected
    for i in range(B):
        n = int(m[i].sum())
        toks = [t for t in range(T) if m[i, t] > 0]
        deltas = [lp[i, t] - old[i, t] for t in toks]
        if method in ("luspo", "ppo_product"):  # one value per row: luspo's n_i L(s_i), the RLOO trainer's L(prod r)
            ratio = torch.exp(sum(deltas) / n) if method == "luspo" else torch.exp(sum(deltas))
            row = -torch.minimum(ratio * A[i], ratio.clamp(1 - eps_l, 1 + eps_h) * A[i])
            total = total + (n * row if method == "luspo" else row) / B
            continue
        if method in ("seq_mask_tis", "opsm"):
            mean_log = sum(d.detach() for d in deltas) / n
            kept = 0.5 <= math.exp(mean_log) <= 5.0 if method == "seq_mask_tis" else (A[i] >= 0 or mean_log >= -1e-4)
            for t, d in zip(toks, deltas):
                r = torch.exp(d)
                piece = -r.detach() * A[i] * lp[i, t] if method == "seq_mask_tis" else -torch.minimum(r * A[i], r.clamp(1 - eps_l, 1 + eps_h) * A[i])
                total = total + (piece if kept else 0 * piece) / m.sum()
            continue
        if method in ("gspo", "gspo_token", "gmpo", "sapo_seq"):
            if method == "gmpo":
                s = 1 if A[i] > 0 else -1
                deltas = [s * torch.minimum(s * d, s * d.clamp(-0.4, 0.4)) for d in deltas]
                total = total + (-A[i] * torch.exp(sum(deltas) / n)) / B
                continue
            ratio = torch.exp(sum(deltas) / n)
            if method == "sapo_seq":  # one value per row, the mean over rows
                tau = 1.0 if A[i] > 0 else 1.05
                total = total - torch.sigmoid(tau * (ratio - 1)) * 4 / tau * A[i] / B
                continue
            if method == "gspo_token":
                ratio = [ratio.detach() * torch.exp(lp[i, t] - lp[i, t].detach()) for t in toks]
            else:
                ratio = [ratio] * n
            for rt in ratio:
                total = total - torch.minimum(rt * A[i], rt.clamp(1 - eps_l, 1 + eps_h) * A[i]) / (B * n)
            continue
        for t in toks:
            r = torch.exp(lp[i, t] - old[i, t])
            if method in ("ppo", "clip_cov"):
                piece = -torch.minimum(r * A[i], r.clamp(1 - eps_l, 1 + eps_h) * A[i])
                if method == "clip_cov" and selected[i, t]:
                    piece = 0 * piece
            elif method == "kl_cov":
                piece = -r * A[i] + (torch.abs(lp[i, t] - old[i, t]) if selected[i, t] else 0.0)
            elif method == "cispo":
                piece = -r.clamp(1 - eps_l, 1 + eps_h).detach() * A[i] * lp[i, t]
            elif method == "cispo_seq":
                s = torch.exp(sum(deltas) / n)
                piece = -s.clamp(1 - eps_l, 1 + eps_h).detach() * A[i] * lp[i, t]
            elif method == "vespo":  # TRL's defaults: (k, lambda) = (2, 3) for A >= 0, (3, 2) for A < 0
                W = torch.exp(sum(deltas))
                k, lam = (2.0, 3.0) if A[i] >= 0 else (3.0, 2.0)
                piece = -(W**k * torch.exp(lam * (1 - W))).detach() * A[i] * lp[i, t]
            elif method == "sapo":
                tau = 1.0 if A[i] > 0 else 1.05
                piece = -torch.sigmoid(tau * (r - 1)) * 4 / tau * A[i]
            elif method == "is":
                piece = -r.detach() * A[i] * lp[i, t]
            elif method in ("reinforce", "gpg"):
                piece = -A[i] * lp[i, t]
            elif method in ("top_entropy", "m2po"):  # PPO; a selected token's loss is 0 (M2PO's left the mask above)
                piece = -torch.minimum(r * A[i], r.clamp(1 - eps_l, 1 + eps_h) * A[i]) * (0.0 if selected[i, t] else 1.0)
            elif method in ("dppo", "dppo_tv", "dppo_kl", "tv_band"):  # prime-rl / SkyRL / verl, their trust regions on pi - pi_0
                p, p0 = torch.exp(lp[i, t]).item(), math.exp(old[i, t].item())
                if method == "tv_band":
                    keep = abs(p - p0) <= 0.1
                elif method == "dppo_kl":
                    kl = p0 * (math.log(p0) - math.log(p)) + (1 - p0) * math.log((1 - p0 + 1e-8) / (1 - p + 1e-8))
                    keep = (kl <= 0.2 or p <= p0) if A[i] > 0 else (kl <= 0.2 or p >= p0)
                else:
                    keep = p - p0 <= 0.2 if A[i] > 0 else p - p0 >= -0.2
                if method == "dppo_tv" or method == "dppo_kl":
                    piece = -A[i] * min(r.item(), 3.0) * keep * lp[i, t]
                else:
                    piece = -keep * r * A[i] + (1e-3 * (lp[i, t] - old[i, t]) ** 2 if method == "tv_band" else 0.0)
            elif method == "dro":
                piece = -(A[i] * lp[i, t] - 0.05 * (lp[i, t] - old[i, t]) ** 2)
            elif method == "importance_sampling":
                piece = -r * A[i]
            elif method in ("icepop", "rollout_is"):
                inside = 0.5 <= r.item() <= 5.0 if method == "icepop" else 1 - eps_l < r.item() < 1 + eps_h
                piece = -(r.detach() if inside else 0.0) * A[i] * lp[i, t]
            else:
                raise AssertionError(f"no naive loop for {method}")
            total = total + piece / m.sum()
    return total


@pytest.mark.parametrize("method", POLICY_LOSSES)
def test_batched_gradient_equals_derived_weight_and_a_naive_token_loop(method):
    """autograd of the batched loss == -kappa w A grad(log pi) with the derived w == a naive per-token loop."""
    lp0, old, A, mask = _trainer_batch(B=4, T=5, seed=2)
    lp = lp0.clone().requires_grad_(True)
    params = {**_clip(method), **_selected(method, lp0.shape)}
    (g,) = torch.autograd.grad(policy_loss(method, lp, old, A, mask, **params), lp)
    w = policy_weight(method, lp0, old, A, mask, **params)
    p = penalty_gradient(method, lp0, old, mask, **_selected(method, lp0.shape))
    derived = -_kappa(method, mask, params) * (w * A[:, None] - p)
    lp_loop = lp0.clone().requires_grad_(True)
    (g_loop,) = torch.autograd.grad(_naive_loss(method, lp_loop, old, A, mask, selected=params.get("selected")), lp_loop)
    assert (g - derived).abs().max().item() <= 1e-15
    assert (g - g_loop).abs().max().item() <= 1e-15
    assert (w[mask > 0] != 0).any()  # the batch exercises live tokens
    if method in ("clip_cov", "kl_cov", "top_entropy", "m2po"):  # and the selection matters: ignoring it would be caught
        ignored = policy_loss(method, lp, old, A, mask, **{**params, "selected": torch.zeros_like(params["selected"])})
        assert (torch.autograd.grad(ignored, lp)[0] - g).abs().max().item() > 1e-3


def test_policy_weight_mistakes_would_be_caught():
    """The certificate is not vacuous: a weight off by the clip, or missing r, gives a different gradient."""
    lp0, old, A, mask = _trainer_batch(B=4, T=5, seed=2)
    lp = lp0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(policy_loss("ppo", lp, old, A, mask, **_clip("ppo")), lp)
    kappa = token_weights(mask)
    wrong = {"no clip (IS weight)": (lp0 - old).exp(), "no ratio (REINFORCE)": torch.ones_like(lp0)}
    for w in wrong.values():
        assert (g + kappa * w * A[:, None] * mask).abs().max().item() > 1e-3


def test_sampler_weights_multiply_the_per_token_loss():
    lp, old, A, mask = _trainer_batch()
    weight = torch.rand(lp.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    ours = policy_loss("cispo", lp, old, A, mask, weight=weight)
    r = (lp - old).exp().clamp(0.8, 1.2)
    theirs = (-r * A[:, None] * lp * weight * mask).sum() / mask.sum()
    assert abs(ours.item() - theirs.item()) <= 1e-15


@pytest.mark.parametrize("dtype", DTYPES)
def test_policy_loss_is_trainer_ready(dtype):
    lp, old, A, mask = _trainer_batch()
    pad = mask == 0
    x = torch.where(pad, -math.inf, lp).to(dtype).requires_grad_(True)
    for method in POLICY_LOSSES:
        sel = _selected(method, lp.shape)
        out = policy_loss(method, x, torch.where(pad, math.nan, old).to(dtype), A.to(dtype), mask.bool(), **sel)
        (g,) = torch.autograd.grad(out, x)
        ref = policy_loss(method, lp, old, A, mask, **sel)
        assert out.dtype == dtype and torch.isfinite(g).all() and g[pad].abs().max().item() == 0.0
        assert abs(out.double().item() - ref.item()) <= TOL[dtype] * 10 * (1 + abs(ref.item()))


def test_policy_loss_bad_input_is_named():
    lp, old, A, mask = _trainer_batch()
    with pytest.raises(ValueError, match=r"method must be one of \('reinforce', 'gpg', 'ppo'"):
        policy_loss("trpo", lp, old, A, mask)
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        policy_loss("ppo", lp, old, A, mask, dual_clip=0.5)
    with pytest.raises(ValueError, match=r"dual_clip is not a parameter of 'cispo' \(it takes: eps_low, eps_high\)"):
        policy_loss("cispo", lp, old, A, mask, dual_clip=3.0)
    with pytest.raises(ValueError, match="agg must be None for gmpo"):
        policy_loss("gmpo", lp, old, A, mask, agg="token-mean")
    with pytest.raises(ValueError, match="mask is required"):
        policy_loss("ppo", lp, old, A, None)
    with pytest.raises(ValueError, match="old_log_prob must have the shape of log_prob"):
        policy_loss("ppo", lp, old[:, :3], A, mask)
    with pytest.raises(TypeError, match="sapo_tau must be a pair"):
        policy_loss("sapo", lp, old, A, mask, sapo_tau=1.0)


# ------------------------------------------------------------------ penalties


def test_kl_penalty_and_verls_clamped_low_var_kl():
    lp = torch.tensor([[-1.0, -30.0, -0.5]], dtype=torch.float64)
    ref = torch.tensor([[-1.2, -0.1, -28.0]], dtype=torch.float64)
    m = torch.ones(1, 3)
    for k, fn in (("k1", kl_k1), ("k2", kl_k2), ("k3", kl_k3)):
        assert torch.equal(kl_penalty(lp, ref, m, estimator=k), fn(lp, ref))
    kl = torch.clamp(ref - lp, -20, 20)  # verl low_var_kl, written out
    theirs = torch.clamp(kl.exp() - kl - 1, -10, 10)
    assert (kl_penalty(lp, ref, m, estimator="k3", clamp=True) - theirs).abs().max().item() <= 1e-15
    assert kl_penalty(lp, ref, m, estimator="k3").max().item() > 1e9  # unclamped k3 explodes there
    with pytest.raises(ValueError, match=r"estimator must be one of \('k1', 'k2', 'k3'\)"):
        kl_penalty(lp, ref, m, estimator="k4")


def test_value_loss_matches_the_clipped_formula():
    lp, old, A, mask = _trainer_batch()
    v, v0, g = lp, old, A[:, None] + 0 * lp
    clipped = v0 + (v - v0).clamp(-0.2, 0.2)
    theirs = 0.5 * (torch.max((v - g) ** 2, (clipped - g) ** 2) * mask).sum() / mask.sum()
    assert abs(value_loss(v, v0, g, mask, clip=0.2).item() - theirs.item()) <= 1e-15
    assert abs(value_loss(v, v0, g, mask).item() - (0.5 * ((v - g) ** 2 * mask).sum() / mask.sum()).item()) <= 1e-15


# ------------------------------------------------------------------ advantage estimators, against per-group loops


def test_masked_whiten_matches_the_bessel_formula_and_ignores_padding():
    lp, _, _, mask = _trainer_batch()
    vals = lp[mask > 0]
    theirs = (lp - vals.mean()) / torch.sqrt(vals.var() + 1e-8)  # torch.var: Bessel
    ours = masked_whiten(torch.where(mask > 0, lp, math.nan), mask)
    assert (ours[mask > 0] - theirs[mask > 0]).abs().max().item() <= 1e-14 and ours[mask == 0].abs().max() == 0


def test_estimators_against_loops_of_the_trainers_formulas():
    gen = torch.Generator().manual_seed(7)
    R = torch.rand(5, 4, generator=gen, dtype=torch.float64).round(decimals=1)
    n = torch.randint(1, 9, (5, 4), generator=gen).double()
    # OPO: length-weighted baseline including the answer itself
    opo = torch.stack([R[g] - (n[g] * R[g]).sum() / n[g].sum() for g in range(5)])
    assert (opo_advantages(R, n) - opo).abs().max().item() <= 1e-15
    # pass@k (verl grpo_passk): best minus second best, optionally over the Bessel std + eps
    for std in (False, True):
        loop = torch.zeros_like(R)
        for g in range(5):
            top = torch.topk(R[g], 2)
            margin = top.values[0] - top.values[1]
            loop[g, top.indices[0]] = margin / (R[g].std() + 1e-6) if std else margin
        assert (passk_advantages(R, std=std) - loop).abs().max().item() <= 1e-15
    # GPG as verl counts (non-zero rewards over the whole batch)
    alpha = R.numel() / max(int((R != 0).sum()), 1)
    assert (gpg_advantages(R, valid="reward") - alpha * (R - R.mean(-1, keepdim=True))).abs().max().item() <= 1e-15
    # ReMax: reward-to-go minus the greedy answer's reward
    r = torch.rand(3, 6, generator=gen, dtype=torch.float64)
    m = (torch.arange(6)[None] < torch.tensor([[6], [3], [1]])).double()
    b = torch.rand(3, generator=gen, dtype=torch.float64)
    loop = torch.zeros_like(r)
    for i in range(3):
        for t in range(6):
            if m[i, t]:
                loop[i, t] = sum(r[i, u] * m[i, u] for u in range(t, 6)) - b[i]
    assert (remax_advantages(r, b, m) - loop).abs().max().item() <= 1e-15
    # REINFORCE++: masked discounted return-to-go, whitened with the Bessel variance
    ret = torch.zeros_like(r)
    for i in range(3):
        run = 0.0
        for t in reversed(range(6)):
            run = (r[i, t] + 0.9 * run) * m[i, t]
            ret[i, t] = run
    vals = ret[m > 0]
    assert (reinforce_pp_advantages(r, m, gamma=0.9)[m > 0] - ((vals - vals.mean()) / torch.sqrt(vals.var() + 1e-8))).abs().max().item() <= 1e-14
    # REINFORCE++ baseline: group-centred reward on each token, whitened over the batch
    mm = torch.ones(5, 4, 3)
    mm[0, 0, 1:] = 0
    tok = (R - R.mean(-1, keepdim=True))[..., None].expand(5, 4, 3)
    vals = tok[mm > 0]
    ours = reinforce_pp_baseline_advantages(R, mm)
    assert (ours[mm > 0] - (vals - vals.mean()) / torch.sqrt(vals.var() + 1e-8)).abs().max().item() <= 1e-14


def test_gpg_counts_valid_answers_as_the_paper_does():
    R = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]])
    # the paper: 4 of 8 answers have a non-zero advantage, alpha = 2; verl counts non-zero rewards: 5, alpha = 8/5
    assert torch.allclose(gpg_advantages(R), 2 * (R - R.mean(-1, keepdim=True)), atol=1e-15, rtol=0)
    assert torch.allclose(gpg_advantages(R, valid="reward"), 1.6 * (R - R.mean(-1, keepdim=True)), atol=1e-15, rtol=0)


# ------------------------------------------------------------------ length bias and the suite


def test_length_bias_on_tinylm_is_what_was_derived(lm):
    out, gJ = length_bias_gradients(lm, lm.theta0)
    for mode, (update, objective) in out.items():
        assert (update - objective).abs().max().item() <= 1e-15, mode
    assert (out["seq-mean-token-sum"][0] - gJ).abs().max().item() <= 1e-15
    # the naive batch objective E[sum_i A_i / sum_j n_j] is NOT what token-mean follows
    N = lm.N
    R = (lm.tokens == 1).double().mul(lm.mask).sum(1) / lm.lengths
    th = lm.theta0.clone().requires_grad_(True)
    p = lm.probs(th)
    n = lm.lengths.double()
    naive = (p[:, None] * p[None, :] * ((R - 0.3)[:, None] + (R - 0.3)[None, :]) / (n[:, None] + n[None, :])).sum()
    (g_naive,) = torch.autograd.grad(naive, th)
    assert (out["token-mean"][0] - g_naive).abs().max().item() > 1e-4
    assert N == 121


# ------------------------------------------------------------------ derivations.losses

from derivations import DerivationError  # noqa: E402
from derivations import losses as dl  # noqa: E402

# the calls as the chapters write them where a chapter renders the derivation, so that under --dist loadgroup
# this test shares the worker, the build and the verdicts of test_rendered_derivations (tests/conftest.py)
MY_DERIVATIONS = [
    *(f'derivations.losses.weight_derivation("{m}")' for m in ("reinforce", "cispo", "cispo_cap", "sapo", "clip_cov_selected", "kl_cov_kept", "kl_cov_selected")),
    *(f'derivations.losses.sequence_weight_derivation("{m}", {n})' for m in ("cispo_seq", "sapo_seq", "vespo") for n in (2, 3)),
    'derivations.losses.sequence_weight_derivation("cispo_seq", 2, eps_low=None)',
    "derivations.losses.gspo_derivation(3)",
    "derivations.losses.gmpo_derivation()",
    *(f'derivations.losses.aggregation_weight("{mode}", 3)' for mode in dl.AGGREGATIONS),
]


@pytest.mark.parametrize("source", [pytest.param(s, marks=pytest.mark.reads_derivation(s)) for s in MY_DERIVATIONS])
def test_each_derivation_verifies_and_every_perturbed_step_fails(source, verified_derivation):
    d = verified_derivation(source)
    assert d.verified
    for i in range(len(d.steps)):
        with pytest.raises(DerivationError):
            d.perturbed(i).verify()


def _differs_at_a_point(u, v) -> bool:
    """u and v differ at r = 2 (or rtilde = 2), tau_+ = 1, tau_- = 2: a point that proves them different, where simplify(u - v) != 0 only fails to prove them equal."""
    point = {dl.r: 2, sp.Symbol("rtilde", positive=True): 2, dl.tau_pos: 1, dl.tau_neg: 2}
    return abs(float((u - v).subs(point))) > 1e-3


def test_derived_weights_are_the_known_closed_forms():
    r = dl.r
    closed = lambda tau: 4 * r / (1 + sp.exp(-tau * (r - 1))) * (1 - 1 / (1 + sp.exp(-tau * (r - 1))))  # noqa: E731  4 sigma (1 - sigma) r
    for a, tau, other in ((sp.Rational(3, 2), dl.tau_pos, dl.tau_neg), (-sp.Rational(1, 2), dl.tau_neg, dl.tau_pos)):  # SAPO: tau per sign of A
        assert sp.simplify(dl.weight("sapo").subs(dl.A, a) - closed(tau)) == 0
        assert _differs_at_a_point(dl.weight("sapo").subs(dl.A, a), closed(other))  # the temperatures swapped
    assert dl.weight("reinforce") == 1 and dl.weight("gpg") == 1
    assert dl.weight("cispo_cap") == sp.Min(r, 1 + dl.eps_h)
    assert dl.weight("cispo") == sp.Min(sp.Max(r, 1 - dl.eps_l), 1 + dl.eps_h)
    assert dl.weight("is") == r
    assert dl.weight("ppo") == dtr_weight("ppo") == dl.weight("clip_cov_kept")
    assert dl.weight("clip_cov_selected") == 0 and dl.penalty_gradient("clip_cov_selected") == 0
    assert dl.weight("kl_cov_kept") == dl.weight("kl_cov_selected") == r  # the advantage's weight; the penalty apart:
    assert dl.penalty_gradient("kl_cov_selected") == dl.beta * sp.sign(dl.ell - dl.ell0)
    for twin in ("dppo_k2", "dppo_bkl_k2", "tv_band_k2"):  # prime-rl's tau (log r)^2: 2 tau log r, whatever the advantage
        assert sp.expand(dl.penalty_gradient(twin) - 2 * registry.tau_k2 * (dl.ell - dl.ell0)) == 0
    assert sp.expand(dl.penalty_gradient("dro") - registry.beta_dro * (dl.ell - dl.ell0)) == 0 and dl.weight("dro") == 1
    penalised = {"kl_cov_selected", "dppo_k2", "dppo_bkl_k2", "tv_band_k2", "dro"}
    assert all(dl.penalty_gradient(m) == 0 for m in dl.TOKEN_METHODS if m not in penalised)
    q = sp.exp(dl.ell0)  # DPPO: the ratio where the probability may still move; verl's form truncated at C_IS and stopped
    for a, keep in ((1, q * (r - 1) <= registry.tv_h), (-1, q * (r - 1) >= -registry.tv_l)):
        for name, w in (("dppo", r), ("dppo_k2", r), ("dppo_tv", sp.Min(r, registry.c_is))):
            got = dl.weight(name).subs(dl.A, a)
            for x, e0 in ((sp.Rational(13, 10), sp.log(sp.Rational(1, 2))), (sp.Rational(17, 10), sp.log(sp.Rational(1, 2))),
                          (sp.Rational(1, 2), sp.log(sp.Rational(9, 10))), (sp.Rational(9, 10), sp.log(sp.Rational(9, 10)))):
                at = {r: x, dl.ell0: e0, registry.tv_h: sp.Rational(1, 5), registry.tv_l: sp.Rational(1, 5), registry.c_is: 3}
                assert sp.simplify(got.subs(at) - (w * sp.Piecewise((1, keep), (0, True))).subs(at)) == 0, (name, a, x)


def _sequence_weight(method: str, n: int, *values):
    """``sequence_weight_derivation(method, n)`` as MY_DERIVATIONS names it, marked so that its readers share the worker that verifies it."""
    source = f'derivations.losses.sequence_weight_derivation("{method}", {n})'
    return pytest.param(*values, source, marks=pytest.mark.reads_derivation(source), id=f"{method}-{n}")


# two row lengths show that n cancels; the sizes the derivation tests above build and verify (and share)
@pytest.mark.parametrize("form, source", [_sequence_weight(m, n, form) for m, form in (("cispo_seq", "cispo"), ("sapo_seq", "sapo")) for n in (2, 3)])
def test_sequence_ratio_weights_are_the_token_forms_at_the_row_ratio(form, source, verified_derivation):
    """CISPO and SAPO at the sequence ratio: their token form's weight at the row ratio rtilde (no 1/n left: the n tokens of the row cancel it)."""
    rt = sp.Symbol("rtilde", positive=True)
    rhs = verified_derivation(source).steps[-1].rhs
    assert sp.simplify(rhs + dl.A * dl.weight(form).subs(dl.r, rt)) == 0


@pytest.mark.reads_derivation('derivations.losses.sequence_weight_derivation("vespo", 3)')
def test_vespo_weight_is_the_gamma_weight_of_the_row_product(verified_derivation):
    """VESPO: the Gamma weight of the product of the ratios, 1 at W = 1, largest at W = k / lambda; the table's rows."""
    W = sp.Symbol("W", positive=True)
    phi = -verified_derivation('derivations.losses.sequence_weight_derivation("vespo", 3)').steps[-1].rhs / dl.A
    assert phi.subs(W, 1) == 1
    assert sp.solve(sp.diff(phi, W), W) == [dl.k / dl.lam]
    table = dl.sequence_table()
    assert table.count(r"\text{on policy (row ratio 1)}") == 4 and "VESPO" in table and "GSPO, dual clip" in table


def dtr_weight(method):
    from derivations import gradient_weights as dgw

    return dgw.gradient_weight(method)


def test_each_call_hands_out_its_own_derivation():
    """The builders are remembered per process, but a Derivation is mutable: a caller that extends or verifies
    its copy changes nobody else's (before, every caller shared one object)."""
    for build in (lambda: dl.weight_derivation("cispo"), lambda: dl.sequence_weight_derivation("vespo", 2),
                  lambda: dl.gspo_derivation(3), dl.gmpo_derivation):
        mine, theirs = build(), build()
        assert mine is not theirs and mine.steps[0] is not theirs.steps[0]
        n = len(theirs.steps)
        mine.step(sp.Integer(0), sp.Integer(1), "a slip")
        assert len(build().steps) == len(theirs.steps) == n and not build().verified


def test_derivations_reject_bad_arguments():
    with pytest.raises(ValueError, match="method must be one of"):
        dl.weight_derivation("trpo")
    with pytest.raises(ValueError, match="n must be an int >= 2"):
        dl.gspo_derivation(1)
    with pytest.raises(ValueError, match="B must be an int >= 2"):
        dl.aggregation_weights(1)
    with pytest.raises(ValueError, match="mode must be one of"):
        dl.aggregation_weight("sum")
    with pytest.raises(ValueError, match="method must be one of"):
        dl.sequence_weight_derivation("gspo")
    with pytest.raises(ValueError, match="n must be an int >= 2"):
        dl.sequence_weight_derivation("vespo", 1)
    with pytest.raises(ValueError, match="method must be one of"):
        dl.penalty_gradient("kl_cov")


# ------------------------------------------------------------------ every public function of numeric.losses: bad input, dtype


_lp, _old, _A, _m = _trainer_batch()
_R = torch.tensor([[1.0, 0.0, 0.5, 0.5]], dtype=torch.float64)

BAD_INPUT = [
    (lambda: stable_softmax(np.array([0.0, np.nan])), ValueError, "logits must be finite"),
    (lambda: softmax_score(np.zeros(3), np.array(3)), ValueError, r"action must lie in \[0, 3\)"),
    (lambda: token_entropy(np.zeros((2, 0))), ValueError, "logits must have a vocabulary dimension"),
    (lambda: token_log_probs(np.zeros((2, 3)), np.zeros((2,), int)), ValueError, r"logits must have shape \[B, T, V\]"),
    (lambda: response_mask(np.zeros((2, 4)), np.ones(2, int), 0, 2), TypeError, "input_ids must hold integers"),
    (lambda: sequence_log_prob(_lp, _m * 3), ValueError, "mask must hold only 0 and 1"),
    (lambda: token_weights(np.ones(3), "token-mean"), ValueError, "mask must have at least 2 dimensions"),
    (lambda: aggregate(_lp, _m, "token-mean", norm=0.0), ValueError, "norm must be a finite number > 0"),
    (lambda: policy_weight("ppo", _lp, _old, _A[:2], _m), ValueError, r"advantages must have shape \[B\] = \(6,\) or the shape of log_prob"),
    (lambda: kl_penalty(_lp, _old, _m, clamp=1), TypeError, "clamp must be a bool"),
    (lambda: value_loss(_lp, _old, _lp, _m, clip=-0.1), ValueError, "clip must be >= 0"),
    (lambda: masked_whiten(_lp, torch.zeros_like(_m)), ValueError, "mask must select at least 2 entries"),
    (lambda: reinforce_pp_advantages(_lp, _m, gamma=-1.0), ValueError, r"gamma must lie in \[0, 1\]"),
    (lambda: reinforce_pp_baseline_advantages(_R, torch.ones(1, 3, 2)), ValueError, r"mask must have shape \[..., G, T\]"),
    (lambda: remax_advantages(_lp, _A[:2], _m), ValueError, "baseline_reward must have shape"),
    (lambda: opo_advantages(_R, torch.zeros_like(_R)), ValueError, "length must be positive"),
    (lambda: gpg_advantages(_R, valid="score"), ValueError, "valid must be 'advantage' or 'reward'"),
    (lambda: passk_advantages(torch.ones(3, 1)), ValueError, "rewards must hold G >= 2"),
    (lambda: policy_loss("ppo", _lp, _old, _A, _m, agg="mean"), ValueError, r"agg must be one of \('token-mean'"),
]


@pytest.mark.parametrize("call, error, match", BAD_INPUT, ids=[m.split(" ")[0] for _, _, m in BAD_INPUT])
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_other_batched_losses_follow_the_dtype(dtype, float32_default):
    lp, old, A, m = (x.to(dtype) for x in _trainer_batch())
    outs = [
        aggregate(lp, m, "seq-mean-token-mean"), kl_penalty(lp, old, m), value_loss(lp, old, lp + 1, m, clip=0.2),
        masked_whiten(lp, m), reinforce_pp_advantages(lp, m), remax_advantages(lp, A, m), opo_advantages(A, A.abs() + 1),
        passk_advantages(lp), gpg_advantages(lp), sequence_log_prob(lp, m), token_weights(m, "token-mean"),
        policy_weight("sapo", lp, old, A, m),
    ]
    assert all(o.dtype == dtype for o in outs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_policy_loss_stays_on_the_callers_device():
    lp, old, A, m = (x.cuda() for x in _trainer_batch())
    for method in POLICY_LOSSES:
        assert policy_loss(method, lp, old, A, m).device.type == "cuda"


def test_opo_has_no_single_scale_on_variable_lengths(lm):
    """OPO's baseline moves with the answer's own length: E[A_1 s_1] at G = 2, enumerated over every pair, is not c grad J."""
    from numeric import default_reward, expected_score_sum

    R = default_reward(lm)
    n = lm.lengths.double()
    th = lm.theta0.clone().requires_grad_(True)
    p = lm.probs(th)
    seq = lm.sequence_log_prob(th)
    i, j = torch.meshgrid(torch.arange(lm.N), torch.arange(lm.N), indexing="ij")
    pair_R = torch.stack([R[i], R[j]], -1).reshape(-1, 2)
    pair_n = torch.stack([n[i], n[j]], -1).reshape(-1, 2)
    A1 = opo_advantages(pair_R, pair_n)[:, 0]
    weight = (p[i] * p[j]).reshape(-1).detach()
    (g,) = torch.autograd.grad((weight * A1 * seq[i.reshape(-1)]).sum(), th)
    gJ = expected_score_sum(lm, lm.theta0, R)
    residual = (g - (g @ gJ) / (gJ @ gJ) * gJ).norm() / g.norm()
    assert residual.item() > 1e-3
    # the same enumeration gives RLOO's c = 1 exactly: the enumeration is not the cause
    A1 = rloo_advantages(pair_R)[:, 0]
    (g,) = torch.autograd.grad((weight * A1 * lm.sequence_log_prob(th)[i.reshape(-1)]).sum(), th)
    assert (g - gJ).abs().max().item() <= 1e-15


@pytest.mark.parametrize("method", POLICY_LOSSES)
def test_an_all_masked_row_contributes_nothing_and_counts_in_B(method):
    """Stated behaviour: an empty row adds 0 to the loss (no NaN) and, in the per-row modes, still counts in B."""
    lp0, old, A, mask = _trainer_batch()
    mask = mask.clone()
    mask[2] = 0
    lp = torch.where(mask > 0, lp0, -math.inf).requires_grad_(True)
    sel = _selected(method, lp0.shape)
    loss = policy_loss(method, lp, old, A, mask, **sel)
    (g,) = torch.autograd.grad(loss, lp)
    assert torch.isfinite(loss) and torch.isfinite(g).all() and g[2].abs().max().item() == 0.0
    keep = torch.tensor([0, 1, 3, 4, 5])
    rest = policy_loss(method, lp0[keep], old[keep], A[keep], mask[keep], **{k: v[keep] if torch.is_tensor(v) else v for k, v in sel.items()})
    scale = 5 / 6 if _mode(method) in ("seq-mean-token-mean", "seq-mean-token-sum") else 1.0  # seq-mean divides by B = 6
    assert abs(loss.item() - scale * rest.item()) <= 1e-15 * (1 + abs(rest.item()))


@pytest.mark.parametrize("method", POLICY_LOSSES)
def test_parameter_gradient_is_derived_weight_times_advantage_times_score(method, lm):
    """On TinyLM, in theta: autograd of the batched loss == -sum kappa w A grad log pi, grad log pi in closed form (no autograd)."""
    from numeric import perturb, token_score_tensor

    gen = torch.Generator().manual_seed(11)
    idx = torch.randint(0, lm.N, (10,), generator=gen)
    theta_old = lm.theta0
    theta = perturb(theta_old, 0.5, seed=4)
    old = lm.token_log_probs(theta_old)[idx]
    R = (lm.tokens == 1).double().mul(lm.mask).sum(1) / lm.lengths
    A, mask = R[idx] - 0.4, lm.mask[idx]
    th = theta.clone().requires_grad_(True)
    params = {**_clip(method), **_selected(method, mask.shape)}
    (g,) = torch.autograd.grad(policy_loss(method, lm.token_log_probs(th)[idx], old, A, mask, **params), th)
    w = policy_weight(method, lm.token_log_probs(theta)[idx], old, A, mask, **params)
    p = penalty_gradient(method, lm.token_log_probs(theta)[idx], old, mask, **_selected(method, mask.shape))
    coef = -_kappa(method, mask, params) * (w * A[:, None] - p)  # [n, L]
    scores = token_score_tensor(lm, theta)[idx]  # [n, L, P]
    assert (g - (coef[..., None] * scores).sum((0, 1))).abs().max().item() <= 1e-15


# ------------------------------------------------------------------ padding: the fast path and the careful one
# policy_loss zeroes padding by a product with a float 0/1 mask when one sum finds every input finite and the
# mask 0/1, and with torch.where otherwise.  These tests drive both paths with the same numbers.

PAD_SENTINELS = [-math.inf, math.inf, math.nan, -1e30, 1e4, 3e38]
PAD_ARGS = ["log_prob", "old_log_prob", "advantages", "weight"]
_ISSUE_29 = {"dppo", "dppo_tv", "dppo_kl", "tv_band", "dro", "importance_sampling", "icepop", "rollout_is", "seq_mask_tis", "opsm", "luspo",
             "ppo_product", "top_entropy", "m2po"}
"""issue 29's methods: their padding is checked with a float and a boolean mask (the product path and the careful one; an int64
and a float32 mask take the float mask's path, checked on the earlier methods)."""


def _pad_case(method, dirty_arg, sentinel):
    """Clean inputs with [B, T] advantages and sampler weights, and the same with ``sentinel`` in the padding of one argument."""
    lp, old, A, mask = _trainer_batch()
    gen = torch.Generator().manual_seed(5)
    args = {"log_prob": lp, "old_log_prob": old, "advantages": A[:, None] * (1 + torch.rand(lp.shape, generator=gen, dtype=torch.float64)),
            "weight": 0.5 + torch.rand(lp.shape, generator=gen, dtype=torch.float64)}
    dirty = dict(args)
    dirty[dirty_arg] = torch.where(mask > 0, args[dirty_arg], sentinel)
    return args, dirty, mask


def _loss_and_grad(method, args, mask):
    lp = args["log_prob"].clone().requires_grad_(True)
    loss = policy_loss(method, lp, args["old_log_prob"], args["advantages"], mask, weight=args["weight"], **_selected(method, lp.shape))
    (g,) = torch.autograd.grad(loss, lp)
    return loss, g


@pytest.mark.parametrize("dirty_arg", PAD_ARGS)
@pytest.mark.parametrize("method", POLICY_LOSSES)
def test_any_padding_in_any_argument_leaves_value_and_gradient_exact(method, dirty_arg):
    """Catches a product guard (inf * 0 = NaN) used on non-finite padding, an overflow to inf at a padded slot
    (3e38 * 1.28 in fp32), and a fast path that skips the careful one when it should not.
    Every sentinel against one clean reference (the clean inputs do not depend on the sentinel)."""
    args, _, mask = _pad_case(method, dirty_arg, 0.0)
    ref, ref_grad = _loss_and_grad(method, args, mask)
    pad = mask == 0
    for sentinel in PAD_SENTINELS:
        _, dirty, _ = _pad_case(method, dirty_arg, sentinel)
        for m in (mask, mask.bool()) if method in _ISSUE_29 else (mask, mask.bool(), mask.to(torch.int64), mask.float()):
            for dtype in (torch.float64, torch.float32):
                case = f"sentinel {sentinel}, mask {m.dtype}, {dtype}"
                cast = {k: v.to(dtype) for k, v in dirty.items()}
                loss, g = _loss_and_grad(method, cast, m)
                assert torch.isfinite(loss) and torch.isfinite(g).all() and g[pad].abs().max().item() == 0.0, case
                tol = 1e-15 if dtype == torch.float64 else 1e-5
                assert abs(loss.item() - ref.item()) <= tol * (1 + abs(ref.item())), case
                assert (g.double() - ref_grad).abs().max().item() <= tol * (1 + ref_grad.abs().max().item()), case


@pytest.mark.parametrize("method", POLICY_LOSSES)
def test_an_empty_row_may_hold_a_nan_advantage(method):
    """A per-sequence advantage of a row with no response token is never read, on either path."""
    lp, old, A, mask = _trainer_batch()
    mask, A_nan = mask.clone(), A.clone()
    mask[2] = 0
    A_nan[2] = math.nan
    ref, ref_grad = _loss_and_grad(method, {"log_prob": lp, "old_log_prob": old, "advantages": A, "weight": None}, mask)
    loss, g = _loss_and_grad(method, {"log_prob": lp, "old_log_prob": old, "advantages": A_nan, "weight": None}, mask)
    assert torch.isfinite(g).all() and g[2].abs().max().item() == 0.0
    assert loss.item() == ref.item() and torch.equal(g, ref_grad)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("method, arg", [(m, a) for m in POLICY_LOSSES for a in PAD_ARGS if not (a == "old_log_prob" and m in ("reinforce", "gpg"))])
def test_a_non_finite_kept_value_is_named(method, arg, bad):
    """Catches a witness that misses an input: inf hidden by a clip (r = inf is clipped to 1 + eps), or by max/min."""
    args, _, mask = _pad_case(method, arg, 0.0)
    args[arg] = args[arg].clone()
    args[arg][1, 0] = bad
    for m in (mask, mask.bool()):
        with pytest.raises(ValueError, match=f"^{arg} must be finite .*where mask is 1"):
            policy_loss(method, args["log_prob"], args["old_log_prob"], args["advantages"], m, weight=args["weight"], **_selected(method, m.shape))


def test_reinforce_and_gpg_never_read_old_log_prob():
    lp, old, A, mask = _trainer_batch()
    for method in ("reinforce", "gpg"):
        assert policy_loss(method, lp, torch.full_like(old, math.nan), A, mask).item() == policy_loss(method, lp, old, A, mask).item()


@pytest.mark.parametrize("mask_dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_the_one_sum_mask_test_is_exact_on_every_16_bit_value_and_near_0_and_1(mask_dtype):
    """sum |m - m^2| == 0 exactly when m is 0 or 1: every fp16/bf16 value, and the floats next to 0 and 1 in fp32/fp64."""
    from numeric.losses.policy import _float_mask

    if mask_dtype in (torch.float16, torch.bfloat16):
        values = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(mask_dtype)
    else:
        near = [torch.nextafter(torch.tensor(v, dtype=mask_dtype), torch.tensor(d, dtype=mask_dtype)) for v in (0.0, 1.0) for d in (-1.0, 2.0)]
        tiny = torch.finfo(mask_dtype).tiny
        values = torch.stack(near + [torch.tensor(x, dtype=mask_dtype) for x in (0.0, -0.0, 1.0, 2.0, 0.5, tiny, tiny / 2**10, math.inf, -math.inf, math.nan)])
    like = torch.zeros((), dtype=torch.float32)
    # one call of the test per value, as a one-entry mask; vmap batches the calls (the same kernels, value by value)
    not_01 = torch.vmap(lambda v: _float_mask(v.reshape(1, 1), like)[1])(values)
    assert not_01.shape == values.shape
    is_01 = (values == 0) | (values == 1)
    wrong = (not_01 == 0) != is_01
    assert not wrong.any(), values[wrong].tolist()


def test_a_float64_mask_that_rounds_to_1_in_float32_is_refused():
    lp, old, A, mask = _trainer_batch()
    near_one = mask.clone()
    near_one[0, 0] = 1 + 1e-10  # float32(1 + 1e-10) == 1
    for method in POLICY_LOSSES:
        with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
            policy_loss(method, lp.float(), old.float(), A.float(), near_one, **_selected(method, lp.shape))
    for bad in (0.5, 2.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
            policy_loss("ppo", lp, old, A, torch.where(mask > 0, bad, 0.0))
    cancelling = torch.zeros_like(mask)  # m - m^2: -2 at m = 2, +0.25 at each of eight m = 0.5; they sum to 0 without |.|
    cancelling[0, 0], cancelling[1, :2], cancelling[0, 1:] = 2.0, 0.5, 0.5
    assert (cancelling - cancelling**2).sum().item() == 0.0
    with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
        policy_loss("ppo", lp, old, A, cancelling)


# ------------------------------------------------------------------ the registry: torch forms == SymPy formulas

from derivations import methods as registry  # noqa: E402
from derivations.gradient_weights import d_dell  # noqa: E402

_CONSTANTS = {"eps_low": 0.2, "eps_high": 0.28, "dual_clip": 3.0, "sapo_tau": (1.0, 1.05), "gmpo_clip": (0.4, 0.4),
              "vespo_k": (2.0, 3.0), "vespo_lambda": (3.0, 2.0), "kl_cov_coef": 0.7, "tv_delta": (0.15, 0.2), "is_cap": 3.0, "kl_tau": 0.01,
              "band_delta": 0.1, "dro_beta": 0.3, "is_bounds": (0.45, 4.5), "opsm_delta": 0.1, "dppo_type": "binary_tv"}
_Q0 = math.exp(-1.5)  # the old probability of the grid: DPPO's and the TV band's edges 1 + delta/q, 1 - delta/q
# every edge of every method: 1 - eps_l, 1 + eps_h, c, GMPO's e^{-0.4}, e^{0.4}, IcePop's 0.45 and 4.5, OPSM's e^{-0.1}, DPPO's and the
# TV band's edges at pi_0 = e^{-1.5}, and r = 1; each crossed on both sides
_EDGES = [0.8, 1.28, 3.0, math.exp(-0.4), math.exp(0.4), 0.45, 4.5, math.exp(-0.1), 1 + 0.2 / _Q0, 1 - 0.15 / _Q0, 1 + 0.1 / _Q0,
          1 - 0.1 / _Q0, 1.0]
_GRID = sorted({e * (1 + s) for e in _EDGES for s in (-1e-3, 1e-3)} | {0.05, 0.5, 1.1, 2.0, 5.0, 40.0})


def _forms():
    """(method, the optional parameters that select a formula, the SymPy value of those parameters)."""
    for name in registry.METHODS:
        variants = {"ppo": [({}, {}), ({"dual_clip": 3.0}, {"dual_clip": registry.c})],
                    "gspo": [({}, {}), ({"dual_clip": 3.0}, {"dual_clip": registry.c})],
                    "cispo": [({}, {}), ({"eps_low": None}, {"eps_low": None})],
                    "cispo_seq": [({}, {}), ({"eps_low": None}, {"eps_low": None})],
                    "clip_cov": [({"selected": False}, {"selected": False}), ({"selected": True}, {"selected": True})],
                    "kl_cov": [({"selected": False}, {"selected": False}), ({"selected": True}, {"selected": True})],
                    "top_entropy": [({"selected": False}, {"selected": False}), ({"selected": True}, {"selected": True})],
                    "m2po": [({"selected": False}, {"selected": False})],  # a dropped token leaves the mask: no loss to compare
                    "dppo": [({"kl_tau": 0.0}, {"kl_tau": 0}), ({"kl_tau": 0.01}, {"kl_tau": registry.tau_k2}),
                             ({"dppo_type": "binary_kl", "kl_tau": 0.0}, {"dppo_type": "binary_kl", "kl_tau": 0})],
                    "tv_band": [({"kl_tau": 0.0}, {"kl_tau": 0}), ({"kl_tau": 0.01}, {"kl_tau": registry.tau_k2})]}.get(name, [({}, {})])
        for given, symbolic in variants:
            yield name, given, symbolic


def _sympy_value_and_gradient(name, symbolic, r, A, ell0=-1.5):
    """The registry's per-token loss and its derivative in ell (sg held constant), lambdified, at ell = ell0 + log r."""
    plain = lambda e: e.replace(registry.sg, lambda x: x)  # noqa: E731  (the value of sg(x) is x)
    k = sp.Piecewise((_CONSTANTS["vespo_k"][0], registry.A >= 0), (_CONSTANTS["vespo_k"][1], True))  # TRL: A >= 0 is the positive side
    lam = sp.Piecewise((_CONSTANTS["vespo_lambda"][0], registry.A >= 0), (_CONSTANTS["vespo_lambda"][1], True))
    values = {registry.eps_l: 0.2, registry.eps_h: 0.28, registry.c: 3.0, registry.delta_l: 0.4, registry.delta_h: 0.4,
              **registry.symbol_values("sapo", sapo_tau=_CONSTANTS["sapo_tau"]),
              registry.k: k, registry.lam: lam, registry.beta: _CONSTANTS["kl_cov_coef"], registry.tv_l: 0.15, registry.tv_h: 0.2,
              registry.c_is: 3.0, registry.tau_k2: 0.01, registry.delta_band: 0.1, registry.beta_dro: 0.3, registry.b_l: 0.45, registry.b_h: 4.5,
              registry.delta_opsm: 0.1}
    # the constants first: none depends on ell, so d/d ell commutes with setting them, and the Min/Max that
    # d_dell rebuilds then compare numbers, not symbols (the 20 forms: 9.2 to 6.0 s under cProfile)
    loss = registry.METHODS[name].loss(**symbolic).subs(values)
    grad = d_dell(loss)
    heaviside = {"Heaviside": lambda x, h0=0.5: np.heaviside(np.asarray(x, dtype=float), 0.5)}  # off the kinks: never 0.5
    out = []
    for expr in (loss, grad):
        e = plain(expr).subs(registry.ell, registry.ell0 + sp.log(registry.r)).subs(registry.ell0, ell0)
        f = sp.lambdify((registry.r, registry.A), e, modules=[heaviside, "numpy"])
        with np.errstate(invalid="ignore"):  # numpy's select evaluates every branch: the binary KL's log(1 - pi) past pi = 1 is never taken
            out.append(np.array([float(f(x, a)) for x, a in zip(r, A)]))
    return out


@pytest.mark.parametrize("name, given, symbolic", list(_forms()), ids=[f"{n}{'-' + '-'.join(f'{k}={v}' for k, v in g.items()) if g else ''}" for n, g, _ in _forms()])
def test_every_registered_method_is_its_sympy_formula_values_and_gradients(name, given, symbolic):
    """Each torch form against the registry's formula on a grid crossing every clip edge, both signs of A:
    catches a wrong clip edge, a missing stop-gradient, the wrong sign, or a form that drifted from the registry."""
    r = np.array([x for x in _GRID for _ in (1, -1)])
    A = np.array([a for _ in _GRID for a in (1.3, -0.7)])
    params = {k: _CONSTANTS[k] for k in registry.METHODS[name].parameters if k != "dual_clip"}  # dual_clip: only where given
    params.update(given)
    old = torch.full((len(r), 1), -1.5, dtype=torch.float64)
    if "selected" in params:  # the same choice for every token of the grid
        params["selected"] = torch.full(old.shape, params["selected"])
    lp = (old + torch.from_numpy(np.log(r))[:, None]).requires_grad_(True)  # one token per row: s_i = r_i
    loss = policy_loss(name, lp, old, torch.from_numpy(A), torch.ones_like(old), **params)
    (g,) = torch.autograd.grad(loss, lp)
    value, grad = _sympy_value_and_gradient(name, symbolic, r, A)
    assert abs(loss.item() - value.mean()) <= 1e-13 * (1 + np.abs(value).max())  # every method averages the one-token rows
    assert np.abs(g[:, 0].numpy() * len(r) - grad).max() <= 1e-12 * (1 + np.abs(grad).max())
    w = policy_weight(name, lp.detach(), old, torch.from_numpy(A), torch.ones_like(old), **params)[:, 0].numpy()
    p = penalty_gradient(name, lp.detach(), old, torch.ones_like(old), **{k: v for k, v in params.items() if k not in ("eps_low", "eps_high", "dual_clip")})
    assert np.abs(-w * A + p[:, 0].numpy() - grad).max() <= 1e-12 * (1 + np.abs(grad).max())  # the derived weight says the same
    if given == {"selected": True}:
        assert name == "kl_cov" or np.abs(grad).max() == 0.0  # Clip-Cov drops a selected token
    else:
        assert len({np.sign(x) for x in grad}) > 1 or name in ("reinforce", "gpg")  # the grid exercises both signs


def test_the_registry_is_complete_and_each_name_means_one_thing():
    assert POLICY_LOSSES == tuple(registry.METHODS)
    assert set(registry.FORMS) & set(registry.METHODS) == {f for f in registry.FORMS if registry.FORMS[f].method == f}
    assert registry.form("ppo", dual_clip=3.0) == "ppo_dual_clip" and registry.form("cispo", eps_low=None) == "cispo_cap"
    assert registry.form("cispo", eps_low=0.2) == registry.form("cispo") == "cispo"
    for f in registry.FORMS.values():  # a form is its method's loss with its options: one formula per name
        assert f.loss() == registry.METHODS[f.method].loss(**f.options)
    with pytest.raises(ValueError, match="sequence-level"):
        registry.form("gmpo")
    with pytest.raises(ValueError, match="method must be one of"):
        registry.method("dual_clip")


def test_the_registry_constants_are_the_symbols_of_its_losses_and_have_defaults():
    """CONSTANTS (what the variant checker accepts undeclared) is every symbol of every registered loss but ell, ell_0,
    r, A: a new method's parameter is accepted by the checker only once it is listed, and this test says so.  Each
    has a default (the confirmation's value) but the dual clip, whose parameter defaults to None."""
    losses = [f.loss() for f in registry.FORMS.values()]
    losses += [m.loss() for name, m in registry.METHODS.items() if name not in ("clip_cov", "kl_cov", "top_entropy", "m2po")]  # theirs: the forms
    found = set().union(*(loss.free_symbols for loss in losses)) - {registry.ell, registry.ell0, registry.r, registry.A}
    assert found == set(registry.CONSTANTS) and all(x.is_positive for x in registry.CONSTANTS)
    defaults = registry.symbol_defaults()
    assert set(defaults) == set(registry.CONSTANTS) - {registry.c} and all(v > 0 for v in defaults.values())
    assert registry.METHODS["dro"].parameters["dro_beta"] is None  # verl's has no default: the checker's 0.1 is a value to confirm at
    assert defaults[registry.tau_pos] != defaults[registry.tau_neg]  # SAPO's two temperatures are told apart where they are used


def test_clip_cov_and_kl_cov_forms_and_what_stays_undecided():
    """A selected and an unselected token are two forms; the method's note says what no per-token check can state."""
    assert registry.form("clip_cov", selected=True) == "clip_cov_selected" and registry.form("kl_cov", selected=False) == "kl_cov_kept"
    assert registry.FORMS["clip_cov_kept"].loss() == registry.FORMS["ppo"].loss()
    with pytest.raises(ValueError, match="selected is required for 'clip_cov'"):
        registry.form("clip_cov")
    with pytest.raises(TypeError, match="selected must be True or False"):
        registry.form("kl_cov", selected=1)
    for name in ("clip_cov", "kl_cov", "clip_cov_selected", "kl_cov_kept"):
        assert "undecided" in registry.undecided(name) and "whole batch" in registry.undecided(name)
    assert [m for m in registry.METHODS if registry.undecided(m)] == ["clip_cov", "kl_cov", "top_entropy", "m2po"]
    assert {"clip_cov_kept", "clip_cov_selected", "kl_cov_kept", "kl_cov_selected"} <= set(registry.known_token_forms())
    assert "undecided" in dl.loss_table().split("Clip-Cov (selected token)")[1].split(r"\\")[0]


def _selection_batch(seed=0):
    gen = torch.Generator().manual_seed(seed)
    B, T = 8, 9
    old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3
    lp = old + 0.3 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    A = 1.5 * torch.randn(B, generator=gen, dtype=torch.float64)
    mask = (torch.rand(B, T, generator=gen) < 0.8).double()
    return lp, old, A, mask


def _covariances(lp, A, mask):
    """Cov_it = (A - mean A)(lp - mean lp) over the response tokens, by a loop in Python floats."""
    kept = [(i, t) for i in range(lp.shape[0]) for t in range(lp.shape[1]) if mask[i, t] > 0]
    mA = sum(float(A[i]) for i, _ in kept) / len(kept)
    ml = sum(float(lp[i, t]) for i, t in kept) / len(kept)
    return {(i, t): (float(A[i]) - mA) * (float(lp[i, t]) - ml) for i, t in kept}


def test_kl_cov_selection_is_the_top_covariances_by_a_loop():
    lp, old, A, mask = _selection_batch()
    cov = _covariances(lp, A, mask)
    for fraction in (0.05, 0.2, 1.0):
        sel = kl_cov_selection(lp, A, mask, fraction=fraction)
        count = max(1, int(len(cov) * fraction))
        top = sorted(cov, key=cov.get, reverse=True)[:count]
        assert {(i, t) for i, t in torch.nonzero(sel).tolist()} == set(top)
    assert kl_cov_selection(lp, A, torch.zeros_like(mask)).sum().item() == 0  # no response token, nothing selected
    assert isinstance(kl_cov_selection(lp.numpy(), A.numpy(), mask.numpy()), np.ndarray)


def test_clip_cov_selection_draws_from_the_candidates_by_a_loop_and_its_seed():
    lp, old, A, mask = _selection_batch()
    cov = _covariances(lp, A, mask)
    band = (0.05, 1.0)
    candidates = set()
    for (i, t), c in cov.items():
        r = math.exp(float(lp[i, t] - old[i, t]))
        clipped = -float(A[i]) * min(max(r, 0.8), 1.28) > -float(A[i]) * r  # PPO takes the clipped branch strictly
        if band[0] < c < band[1] and not clipped:
            candidates.add((i, t))
    assert 4 < len(candidates) < len(cov)  # the band and the clip both bite
    draws = []
    for seed in range(4):
        sel = clip_cov_selection(lp, old, A, mask, fraction=0.05, bounds=band, eps_low=0.2, eps_high=0.28, seed=seed)
        chosen = {(i, t) for i, t in torch.nonzero(sel).tolist()}
        assert chosen <= candidates and len(chosen) == max(1, int(0.05 * len(cov)))
        assert torch.equal(sel, clip_cov_selection(lp, old, A, mask, fraction=0.05, bounds=band, eps_low=0.2, eps_high=0.28, seed=seed))
        draws.append(frozenset(chosen))
    assert len(set(draws)) > 1  # the seed draws
    everything = clip_cov_selection(lp, old, A, mask, fraction=1.0, bounds=band, eps_low=0.2, eps_high=0.28)
    assert {(i, t) for i, t in torch.nonzero(everything).tolist()} == candidates  # fewer candidates than asked: all of them


VERL_SELECTION = "verl-project/verl 1dda039b9c6311889a9c9a26040677e1254814f9, verl/trainer/ppo/core_algos.py"
"""Where the two selection rules were read: compute_policy_loss_clip_cov (count :1817, band :1818) and
compute_policy_loss_kl_cov (count :1905, top-k :1906), the newest snapshot of verl."""


def _ten_tokens():
    """Ten response tokens (one row padded): their covariances all distinct, so the top ones are one set."""
    lp, _, A, _ = _selection_batch(seed=3)
    mask = torch.zeros(lp.shape, dtype=torch.float64)
    mask.view(-1)[torch.arange(0, 40, 4)] = 1.0
    return lp, A, mask


def test_kl_cov_selects_max_one_floor_fraction_n_tokens_as_verl():
    """KL-Cov selects max(1, floor(fraction * N)) of the N response tokens (VERL_SELECTION:1905): verl's default fraction
    2e-4 on a batch of 10 tokens selects exactly one (the largest covariance), never none; 1.9 tokens is 1 (floor,
    not round) and 2.9 is 2 (not ceil).  The counts are written out, not computed by the rule under test."""
    lp, A, mask = _ten_tokens()
    cov = _covariances(lp, A, mask)
    assert len(cov) == 10 and len(set(cov.values())) == 10
    ranked = sorted(cov, key=cov.get, reverse=True)
    for fraction, count in ((2e-4, 1), (0.05, 1), (0.19, 1), (0.29, 2), (0.5, 5), (1.0, 10)):
        sel = kl_cov_selection(lp, A, mask, fraction=fraction)
        assert {(i, t) for i, t in torch.nonzero(sel).tolist()} == set(ranked[:count]), fraction


def _covariances_on_the_band():
    """Six one-token rows whose covariances are exactly 1, 1, 5, 5, 2, 2 in fp64: the log-probs' mean is -3 and the
    advantages' 0, both exact, and each product of two binary fractions is exact.  Old = new: no token is clipped."""
    lp = torch.tensor([[-2.5], [-3.5], [-0.5], [-5.5], [-2.0], [-4.0]], dtype=torch.float64)
    A = torch.tensor([2.0, -2.0, 2.0, -2.0, 2.0, -2.0], dtype=torch.float64)
    return lp, lp.clone(), A, torch.ones_like(lp)


def test_clip_cov_band_is_strict_and_count_is_at_least_one_as_verl():
    """Clip-Cov's candidates have their covariance strictly inside (clip_cov_lb, clip_cov_ub) (VERL_SELECTION:1818,
    `cov_all < clip_cov_ub` and `cov_all > clip_cov_lb`): at verl's default band (1, 5) a token exactly on a bound is
    never selected, so of the covariances 1, 1, 5, 5, 2, 2 only the two 2s are candidates.  It draws
    max(floor(fraction * N), 1) of them (:1817): verl's default fraction 2e-4 draws exactly one, 0.4 of 6 tokens two."""
    lp, old, A, mask = _covariances_on_the_band()
    assert [round(v, 15) for v in _covariances(lp, A, mask).values()] == [1.0, 1.0, 5.0, 5.0, 2.0, 2.0]
    inside = {(4, 0), (5, 0)}
    everything = clip_cov_selection(lp, old, A, mask, fraction=1.0, bounds=(1.0, 5.0))
    assert {(i, t) for i, t in torch.nonzero(everything).tolist()} == inside
    for seed in range(3):
        for fraction, count in ((2e-4, 1), (0.3, 1), (0.4, 2)):
            chosen = {(i, t) for i, t in torch.nonzero(clip_cov_selection(lp, old, A, mask, fraction=fraction, seed=seed)).tolist()}
            assert len(chosen) == count and chosen <= inside, (seed, fraction, chosen)
    wider = clip_cov_selection(lp, old, A, mask, fraction=1.0, bounds=(0.5, 5.5))  # the bounds moved off the values: all six
    assert int(wider.sum()) == 6


@pytest.mark.parametrize("call, error, match", [
    (lambda b: policy_loss("clip_cov", *b), ValueError, "selected is required for 'clip_cov'"),
    (lambda b: policy_weight("kl_cov", *b), ValueError, "selected is required for 'kl_cov'"),
    (lambda b: policy_loss("ppo", *b, selected=torch.ones(b[0].shape, dtype=torch.bool)), ValueError, "selected is a parameter of"),
    (lambda b: policy_loss("clip_cov", *b, selected=torch.ones(2, 2, dtype=torch.bool)), ValueError, "selected must have the shape of log_prob"),
    (lambda b: policy_loss("kl_cov", *b, selected=torch.full(b[0].shape, 0.5)), ValueError, "selected must hold only 0 and 1"),
    (lambda b: policy_loss("kl_cov", *b, selected=torch.ones(b[0].shape), kl_cov_coef=-1.0), ValueError, "kl_cov_coef must be >= 0"),
    (lambda b: policy_loss("vespo", *b, vespo_k=(2.0, 0.0)), ValueError, r"vespo_k\[1\] must be a finite number > 0"),
    (lambda b: policy_weight("vespo", *b, vespo_lambda=3.0), TypeError, "vespo_lambda must be a pair"),
    (lambda b: policy_loss("vespo", *b, eps_high=0.2), ValueError, r"eps_high is not a parameter of 'vespo' \(it takes: vespo_k, vespo_lambda\)"),
    (lambda b: policy_loss("gspo_token", *b, dual_clip=3.0), ValueError, "dual_clip is not a parameter of 'gspo_token'"),
    (lambda b: policy_loss("gspo", *b, dual_clip=1.0), ValueError, "dual_clip must be > 1"),
    (lambda b: penalty_gradient("kl_cov", b[0], b[1], None, selected=torch.ones(b[0].shape)), ValueError, "mask is required"),
    (lambda b: kl_cov_selection(b[0], b[2], b[3], fraction=0.0), ValueError, r"fraction must lie in \(0, 1\]"),
    (lambda b: kl_cov_selection(b[0], b[2][:2], b[3]), ValueError, "advantages must have shape"),
    (lambda b: kl_cov_selection(b[0], b[2], None), ValueError, "mask is required"),
    (lambda b: clip_cov_selection(*b, bounds=(5.0, 1.0)), ValueError, "bounds must be"),
    (lambda b: clip_cov_selection(*b, seed=1.5), TypeError, "seed must be an int"),
    (lambda b: clip_cov_selection(*b, eps_low=2.0), ValueError, "eps_low must lie in"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_new_methods_and_selections_refuse_bad_input_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call(_trainer_batch())


def test_vespo_weight_is_the_gamma_weight_of_the_product_of_ratios():
    """phi(W) = W^k e^{lambda(1 - W)} with W the product (not the geometric mean) of the row's ratios; 1 on policy;
    (k, lambda) by the sign of A with A = 0 on the positive side; no NaN where W overflows."""
    lp, old, A, mask = _trainer_batch()
    A = A.clone()
    A[1] = 0.0
    w = policy_weight("vespo", lp, old, A, mask)
    logW = ((lp - old) * mask).sum(-1)
    k = torch.where(A >= 0, 2.0, 3.0).double()
    lam = torch.where(A >= 0, 3.0, 2.0).double()
    phi = logW.exp() ** k * torch.exp(lam * (1 - logW.exp()))
    assert (w - phi[:, None] * mask).abs().max().item() <= 1e-15
    assert policy_weight("vespo", old, old, A, mask)[mask > 0].eq(1.0).all()
    geometric = (logW / mask.sum(-1)).exp() ** k * torch.exp(lam * (1 - (logW / mask.sum(-1)).exp()))
    assert (w - geometric[:, None] * mask).abs().max().item() > 1e-3  # the mean would be caught
    huge = old + 400.0  # W = e^{400 n}: phi underflows to 0, exactly, with no NaN in value or gradient
    x = huge.clone().requires_grad_(True)
    loss = policy_loss("vespo", x, old, A, mask)
    (g,) = torch.autograd.grad(loss, x)
    assert loss.item() == 0.0 and g.abs().max().item() == 0.0 and policy_weight("vespo", huge, old, A, mask).abs().max().item() == 0.0


def test_reinforce_loss_is_policy_loss_reinforce_with_seq_mean_token_sum():
    """One code path: the same numbers, bit for bit, and the old per-row formula to fp64 rounding."""
    from numeric.baselines import reinforce_loss as baseline_reinforce

    lp, old, A, mask = _trainer_batch()
    padded = torch.where(mask > 0, lp, -math.inf)
    ours = baseline_reinforce(padded, A, mask)
    assert ours.item() == policy_loss("reinforce", padded, old, A, mask, agg="seq-mean-token-sum").item()
    assert abs(ours.item() - (-(A * (lp * mask).sum(1)).mean()).item()) <= 1e-15
    seq = lp[:, 0]
    assert baseline_reinforce(seq, A).item() == policy_loss("reinforce", seq[:, None], seq[:, None], A, torch.ones(6, 1), agg="seq-mean-token-sum").item()


# ------------------------------------------------------------------ numbers at the edges (issue 16)

_EDGE_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# log-ratios at and past where exp overflows: fp32 88.72, fp64 709.78 (fp16 and bf16 are computed in fp32), and far below 0
_LOG_RATIOS = [0.0, 0.1, 5.0, 88.0, 88.7, 89.0, 700.0, 709.8, 710.0, 6.0e4, -6.0e4, -1.0e3, -104.0]
# where the exact loss itself exceeds the dtype, so inf is its value: an unclipped ratio times a negative advantage
_MAY_BE_INF = {("ppo", -1), ("gspo", -1), ("gspo_token", -1), ("gmpo", -1), ("is", -1), ("is", 1), ("clip_cov", -1), ("kl_cov", -1), ("kl_cov", 1),
               ("top_entropy", -1), ("m2po", -1), ("opsm", -1), ("luspo", -1), ("ppo_product", -1), ("dppo", -1), ("importance_sampling", -1),
               ("importance_sampling", 1), ("tv_band", 1), ("tv_band", -1), ("dro", 1), ("dro", -1)}
# (the TV band's and DRO's squared log-ratio at 6e4 is above float16's largest number: inf is its value there)


def _edge_batch(dtype, sign):
    delta = torch.tensor(_LOG_RATIOS, dtype=torch.float64)
    old = torch.full((len(_LOG_RATIOS), 1), -1.5, dtype=torch.float64)
    lp = (old + delta[:, None]).to(dtype)
    return lp, old.to(dtype), torch.full((len(_LOG_RATIOS),), float(sign), dtype=dtype), torch.ones(len(_LOG_RATIOS), 1)


@pytest.mark.parametrize("dtype", _EDGE_DTYPES, ids=str)
@pytest.mark.parametrize("method", POLICY_LOSSES)
def test_no_nan_gradient_for_any_finite_input_at_any_dtype(method, dtype):
    """A log-ratio past 88.7 (fp32) or 709.8 (fp64) made exp(.) = inf, and a clipped branch's zero gradient times
    inf gave NaN (PPO, dual clip, SAPO, GSPO): one such token poisoned a whole step.  Now: no NaN, and inf only
    where the exact value exceeds the dtype."""
    for sign in (1, -1):
        for params in ({}, {"dual_clip": 3.0}) if method in ("ppo", "gspo") else ({},):
            lp, old, A, m = _edge_batch(dtype, sign)
            lp = lp.clone().requires_grad_(True)
            loss = policy_loss(method, lp, old, A, m, **params, **_selected(method, lp.shape))
            (g,) = torch.autograd.grad(loss, lp)
            assert not torch.isnan(loss) and not torch.isnan(g).any(), (sign, params, g)
            if (method, sign) not in _MAY_BE_INF or params:
                assert torch.isfinite(loss) and torch.isfinite(g).all(), (sign, params, loss, g)


@pytest.mark.parametrize("dtype", _EDGE_DTYPES, ids=str)
def test_a_clipped_or_capped_token_has_gradient_exactly_zero_however_large_its_ratio(dtype):
    """PPO with A > 0 beyond 1 + eps_h, A < 0 below 1 - eps_l, dual clip beyond c: exactly 0, also where r = inf or 0."""
    delta = torch.tensor(_LOG_RATIOS, dtype=torch.float64)
    for sign, params, silenced in (
        (1, {}, delta > math.log(1.2)),
        (-1, {}, delta < math.log(0.8)),
        (-1, {"dual_clip": 3.0}, (delta < math.log(0.8)) | (delta > math.log(3.0))),
    ):
        lp, old, A, m = _edge_batch(dtype, sign)
        lp = lp.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(policy_loss("ppo", lp, old, A, m, **params), lp)
        assert bool((g[silenced] == 0).all()) and bool((g[~silenced & (delta.abs() < 5)] != 0).all())
        w = policy_weight("ppo", lp.detach(), old, A, m, **params)
        assert bool((w[silenced] == 0).all())


def test_sapo_saturates_without_overflow():
    """SAPO's sigmoid(tau (r - 1)) is 1 in every format beyond tau (r - 1) = 200: the value is exact, the gradient 0."""
    lp = torch.tensor([[0.0], [10.0], [100.0], [800.0]], dtype=torch.float64).requires_grad_(True)
    old, A, m = torch.zeros(4, 1, dtype=torch.float64), torch.ones(4, dtype=torch.float64), torch.ones(4, 1)
    per_row = [policy_loss("sapo", lp[i:i + 1], old[i:i + 1], A[i:i + 1], m[i:i + 1]).item() for i in range(4)]
    assert per_row[1:] == [-4.0, -4.0, -4.0]
    (g,) = torch.autograd.grad(policy_loss("sapo", lp, old, A, m), lp)
    assert g[2:].abs().max().item() == 0.0 and g[0].item() != 0.0
    assert policy_weight("sapo", lp.detach(), old, A, m)[2:].abs().max().item() == 0.0


def test_verls_log_ratio_clamp_is_an_argument_off_by_default():
    """verl (vanilla) and OpenRLHF clamp log pi - log pi_old to [-20, 20] before exp; here only when asked."""
    lp = torch.tensor([[25.0, 0.1]], dtype=torch.float64).requires_grad_(True)
    old, A, m = torch.zeros(1, 2, dtype=torch.float64), torch.tensor([-1.0], dtype=torch.float64), torch.ones(1, 2)
    exact = policy_loss("ppo", lp, old, A, m)
    clamped = policy_loss("ppo", lp, old, A, m, log_ratio_clamp=20.0)
    theirs = (torch.exp(torch.clamp(lp - old, -20.0, 20.0)) * 1.0).mean()  # verl: -A * ratio with A = -1, live
    assert exact.item() == pytest.approx((math.exp(25.0) + math.exp(0.1)) / 2, rel=1e-15)
    assert clamped.item() == pytest.approx(theirs.item(), rel=1e-15)
    (g,) = torch.autograd.grad(clamped, lp)
    assert g[0, 0].item() == 0.0  # the clamp stops the gradient
    assert policy_weight("ppo", lp.detach(), old, A, m, log_ratio_clamp=20.0)[0, 0].item() == 0.0
    with pytest.raises(ValueError, match="log_ratio_clamp"):
        policy_loss("ppo", lp, old, A, m, log_ratio_clamp=-1.0)


def test_ratios_that_under_or_overflowed_are_ratios_everywhere():
    """ppo_clipped_terms, gradient_weight, ppo_loss and fork_token refused r = 0 or inf ('ratio must be positive')."""
    r = torch.tensor([0.0, 1.0, math.inf, math.inf, 0.0], dtype=torch.float64)
    A = torch.tensor([1.0, 1.0, 1.0, -1.0, 0.0], dtype=torch.float64)
    terms = ppo_clipped_terms(r, A, eps_low=0.2, eps_high=0.28)
    assert terms.pessimistic.tolist() == [0.0, 1.0, 1.28, -math.inf, 0.0]
    assert gradient_weight("ppo", r, A, eps_low=0.2, eps_high=0.28).tolist() == [0.0, 1.0, 0.0, math.inf, 0.0]
    assert gradient_weight("cispo", r, A, eps_low=None, eps_high=0.28).tolist() == [0.0, 1.0, 1.28, 1.28, 0.0]
    lp = torch.tensor([[-800.0, 0.0, 800.0]], dtype=torch.float64).requires_grad_(True)  # r = 0, 1, inf
    loss = ppo_loss(lp, torch.zeros(1, 3, dtype=torch.float64), torch.ones(1, 3, dtype=torch.float64), torch.ones(1, 3))
    (g,) = torch.autograd.grad(loss, lp)
    assert torch.isfinite(loss) and g.tolist() == [[0.0, -1 / 3, 0.0]]
    run = numeric.fork_token("ppo", lr=1e5)  # the common tokens' probabilities underflow to 0
    assert bool(torch.isfinite(run.rare_weight).all())


@pytest.mark.parametrize("call, error, match", [
    (lambda: policy_weight("sapo", *_trainer_batch(), sapo_tau=(math.nan, math.nan)), ValueError, r"sapo_tau\[0\] must not be NaN"),
    (lambda: policy_loss("sapo", *_trainer_batch(), sapo_tau=(1.0, -1.0)), ValueError, r"sapo_tau\[1\] must be a finite number > 0"),
    (lambda: policy_weight("cispo", *_trainer_batch(), eps_low=None, eps_high=-1.0), ValueError, "eps_high must be >= 0"),
    (lambda: policy_weight("ppo", *_trainer_batch(), dual_clip=0.5), ValueError, "dual_clip must be > 1"),
    (lambda: gradient_weight("ppo", np.ones(2), np.ones(2), dual_clip=0.5), ValueError, "dual_clip must be > 1"),
    (lambda: policy_loss("ppo", *_trainer_batch(), cispo_cap=1.1), ValueError, r"cispo_cap is not a parameter of 'ppo' \(it takes: eps_low, eps_high, dual_clip\)"),
    (lambda: policy_weight("cispo", *_trainer_batch(), dual_clip=3.0), ValueError, "dual_clip is not a parameter of 'cispo'"),
    (lambda: policy_loss("ppo", *_trainer_batch(), eps_low=None), TypeError, "eps_low must be a real number, got NoneType"),
    (lambda: reinforce_pp_advantages(torch.ones(2, 2), torch.ones(2, 2), gamma=1.5), ValueError, r"gamma must lie in \[0, 1\]"),
    (lambda: passk_advantages(torch.tensor([1.0, 0.0]), std="yes"), TypeError, "std must be a bool"),
    (lambda: passk_advantages(torch.tensor([1.0, 0.0]), std=None), TypeError, "std must be a bool"),
    (lambda: masked_whiten(torch.ones(1, 3), torch.ones(1, 3), unbiased=1), TypeError, "unbiased must be a bool"),
    (lambda: aggregate(torch.ones(1, 2), torch.ones(1, 2), "token-mean", norm=math.inf), ValueError, "norm must be a finite number > 0"),
    (lambda: gpg_advantages(torch.ones(1, 2), f_norm=math.inf), ValueError, "f_norm must be a finite number > 0"),
    (lambda: value_loss(*_trainer_batch()[:2], _trainer_batch()[0], _trainer_batch()[3], clip=math.inf), ValueError, "clip must be finite"),
    (lambda: policy_loss("ppo", *_trainer_batch()[:4], weight=-torch.ones(6, 7)), ValueError, "weight must be >= 0 where mask is 1"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_every_option_is_checked_the_same_way_wherever_accepted(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_numpy_bools_are_bools():
    lp, old, _, m = _trainer_batch()
    assert torch.equal(kl_penalty(lp, old, m, clamp=np.bool_(True)), kl_penalty(lp, old, m, clamp=True))
    R = torch.tensor([[0.2, 0.9, 0.5]], dtype=torch.float64)
    assert torch.equal(passk_advantages(R, std=np.bool_(True)), passk_advantages(R, std=True))
    assert torch.equal(masked_whiten(lp, m, unbiased=np.bool_(False)), masked_whiten(lp, m, unbiased=False))


def test_whitening_is_cancellation_safe():
    """masked_whiten and passk's std used x - mean: 60 % and 26 % wrong on a group 1 ulp apart, REINFORCE++ 2.6 % off on
    rewards 1000 +- 1e-3, and NaN on a constant batch with eps = 0 (the z-score gives 0)."""
    one = torch.tensor([[1.0, 1.0 + 2.0**-52]], dtype=torch.float64)
    assert masked_whiten(one, torch.ones(1, 2), eps=0.0)[0].tolist() == pytest.approx([-math.sqrt(0.5), math.sqrt(0.5)], rel=1e-15)
    ulp = torch.tensor([1.0, 1.0 + 2.0**-52, 1.0], dtype=torch.float64)
    assert passk_advantages(ulp, eps=0.0, std=True).tolist() == pytest.approx([0.0, math.sqrt(3.0), 0.0], rel=1e-12)
    assert masked_whiten(torch.full((2, 3), 0.7), torch.ones(2, 3), eps=0.0).abs().max().item() == 0.0
    assert passk_advantages(torch.full((3,), 0.7, dtype=torch.float64), eps=0.0, std=True).tolist() == [0.0, 0.0, 0.0]
    # REINFORCE++ on rewards 1000 +- 1e-3: whitening the returns, against exact rational arithmetic
    r = torch.tensor([[0.0, 1000.001], [0.0, 999.999], [0.0, 1000.0005]], dtype=torch.float64)
    m = torch.tensor([[0, 1], [0, 1], [0, 1]])
    got = reinforce_pp_advantages(r, m, gamma=1.0)[:, 1]
    vals = [Fraction(float(x)) for x in r[:, 1]]
    mean = sum(vals) / 3
    var = sum((v - mean) ** 2 for v in vals) / 2
    exact = [float((v - mean) / Fraction(math.sqrt(float(var) + 1e-8))) for v in vals]
    assert max(abs(a - b) / abs(b) for a, b in zip(got.tolist(), exact)) <= 1e-13  # x - mean: 1.1e-10


@pytest.mark.parametrize("call", [
    lambda lp, old, A, m: aggregate(lp, None),
    lambda lp, old, A, m: ppo_loss(lp, old, A, None),
    lambda lp, old, A, m: policy_loss("cispo", lp, old, A, None),
    lambda lp, old, A, m: masked_whiten(lp, None),
    lambda lp, old, A, m: value_loss(lp, old, lp, None),
    lambda lp, old, A, m: remax_advantages(lp, A, None),
    lambda lp, old, A, m: reinforce_pp_advantages(lp, None),
])
def test_mask_none_is_refused_by_name(call):
    """mask=None reached aggregate, ppo_loss, masked_whiten, value_loss, remax and reinforce_pp and failed inside
    with AttributeError; where None means 'all kept' (kl_penalty, ppo_diagnostics, kl_k*) the docstring says so."""
    with pytest.raises(ValueError, match="mask is required"):
        call(*_trainer_batch())


def test_mask_none_means_all_kept_where_documented():
    lp, old, A, m = _trainer_batch()
    full = torch.ones_like(lp)
    assert torch.equal(kl_penalty(lp, old), kl_penalty(lp, old, full))
    assert ppo_diagnostics(lp, old, A[:, None].expand_as(lp)) == ppo_diagnostics(lp, old, A[:, None].expand_as(lp), full)


def test_tensors_on_the_meta_device_or_on_two_devices_get_a_named_error():
    lp, old, A, m = _trainer_batch()
    meta = torch.empty(lp.shape, device="meta")
    for call in (lambda: policy_loss("ppo", meta, old, A, m), lambda: policy_loss("ppo", lp, meta, A, m),
                 lambda: aggregate(meta, m), lambda: kl_penalty(lp, meta, m), lambda: masked_whiten(meta, m),
                 lambda: gradient_weight("ppo", meta, A[:, None].expand_as(lp))):
        with pytest.raises(ValueError, match="is on the meta device"):
            call()
    from types import SimpleNamespace

    from numeric._validate import require_same_device

    other = SimpleNamespace(device=torch.device("cuda", 1))  # no second device here: the check reads only .device
    with pytest.raises(ValueError, match=r"arguments must live on one device, got mask on cpu, log_prob on cuda:1"):
        require_same_device(mask=m, log_prob=other)


# ------------------------------------------------------------------ estimators and conventions the trainers ship (issue 18 item 3)
# Each expected value is a formula written here from the trainer's documented definition (verl b178a3c, TRL f2cd577),
# in plain loops where the batched code vectorises, so a shared mistake would have to be made twice.

from derivations import trust_region as _dtr  # noqa: E402
from numeric import aggregate as _aggregate  # noqa: E402
from numeric import batch_scaled_advantages, bias_corrected_kl, high_entropy_mask, optimal_token_baseline_advantages  # noqa: E402
from numeric import reinforce_pp_advantages as _rpp  # noqa: E402
from numeric import reinforce_pp_baseline_advantages as _rpp_baseline  # noqa: E402
from numeric import token_weights as _token_weights  # noqa: E402
from numeric import value_loss as _value_loss  # noqa: E402


def _ragged_batch(seed=0, B=5, T=6, empty=(3,)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, generator=g, dtype=torch.float64) * 2 + 0.3
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    m = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.float64)
    for i in empty:
        m[i] = 0
    return x, m


def _verl_agg(x, m, mode):
    """verl agg_loss at b178a3c, global_batch_size unset, dp_size 1, written out row by row."""
    rows, kept = [], 0
    for xi, mi in zip(x.tolist(), m.tolist()):
        n = sum(mi)
        s = sum(a * b for a, b in zip(xi, mi))
        if n > 0:
            kept += 1
            rows.append(s / (n + 1e-8) if mode == "seq-mean-token-mean" else s)
    return sum(rows) / kept


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "seq-mean-token-sum"])
def test_verls_empty_row_rule_is_an_option_of_aggregate(mode):
    x, m = _ragged_batch(empty=(1, 3))
    x[m == 0] = float("nan")  # padding may hold anything
    opts = {"empty_rows": "exclude", **({"count_eps": 1e-8} if mode == "seq-mean-token-mean" else {})}
    theirs = _verl_agg(torch.nan_to_num(x), m, mode)
    ours = _aggregate(x, m, mode, **opts).item()
    assert abs(ours - theirs) <= 1e-15 * (1 + abs(theirs))
    # the default counts the two empty rows in B: a factor 5/3 here, so the option is not a no-op
    assert abs(_aggregate(x, m, mode).item() * 5 / 3 - _aggregate(x, m, mode, empty_rows="exclude").item()) <= 1e-14
    # count_eps alone moves seq-mean-token-mean by 1e-8/n_i relative, not more
    if mode == "seq-mean-token-mean":
        a, b = _aggregate(x, m, mode).item(), _aggregate(x, m, mode, count_eps=1e-8).item()
        assert a != b and abs(a - b) <= 1e-8 * abs(a)


@pytest.mark.filterwarnings("ignore::numeric.ReadingWarning")  # the bare seq-mean-token-sum-norm: the package's number, verl's older reading
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("opts", [{}, {"empty_rows": "exclude"}, {"count_eps": 0.25}, {"count_eps": 0.25, "empty_rows": "exclude"}])
def test_token_weights_are_the_gradient_of_aggregate_with_every_option(mode, opts):
    if ("empty_rows" in opts and mode not in ("seq-mean-token-mean", "seq-mean-token-sum")) or ("count_eps" in opts and mode != "seq-mean-token-mean"):
        with pytest.raises(ValueError, match="(empty_rows|count_eps) is used by"):
            _aggregate(torch.zeros(2, 2), torch.ones(2, 2), mode, **opts)
        return
    x, m = _ragged_batch(seed=1)
    x.requires_grad_()
    w = torch.rand(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) + 0.5
    _aggregate(x, m, mode, weight=w, **opts).backward()
    kappa = _token_weights(m, mode, **opts)
    assert (x.grad - kappa * w).abs().max().item() <= 1e-15
    if opts.get("count_eps"):  # 1/(B'(n + eps)) by hand, not 1/(B' max(n, 1))
        n, rows = m.sum(-1), (m.sum(-1) > 0).sum() if opts.get("empty_rows") else m.shape[0]
        assert abs(kappa[0, 0].item() - 1 / (rows * (n[0].item() + 0.25))) <= 1e-16


def test_aggregate_weight_is_detached_masked_and_checked():
    x, m = _ragged_batch(seed=2)
    w = torch.full(x.shape, 2.0, dtype=torch.float64, requires_grad=True)
    w_pad = w.detach().clone()
    w_pad[m == 0] = float("inf")
    assert _aggregate(x, m, "token-mean", weight=w_pad).item() == pytest.approx(2 * _aggregate(x, m, "token-mean").item(), rel=1e-15)
    _aggregate(x.requires_grad_(), m, weight=w).backward()
    assert w.grad is None  # a weight is a stop-gradient coefficient
    with pytest.raises(ValueError, match=r"weight must have the shape of per_token \(5, 6\), got \(5,\)"):
        _aggregate(x, m, weight=torch.ones(5))
    with pytest.raises(ValueError, match="weight must be finite"):
        _aggregate(x, m, weight=torch.full(x.shape, float("nan")))
    with pytest.raises(ValueError, match=r"empty_rows must be one of \('count', 'exclude'\), got 'drop'"):
        _aggregate(x, m, "seq-mean-token-sum", empty_rows="drop")
    with pytest.raises(ValueError, match="count_eps must be"):
        _aggregate(x, m, "seq-mean-token-mean", count_eps=-1e-8)
    assert _aggregate(x, torch.zeros_like(m), "seq-mean-token-mean", empty_rows="exclude").item() == 0.0  # verl: NaN


def test_value_loss_weight_multiplies_each_tokens_squared_error():
    g = torch.Generator().manual_seed(3)
    V, V0, G = (torch.randn(3, 4, generator=g, dtype=torch.float64) for _ in range(3))
    m = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)
    w = torch.rand(3, 4, generator=g, dtype=torch.float64)
    clipped = V0 + (V - V0).clamp(-0.2, 0.2)
    per_token = 0.5 * torch.maximum((V - G) ** 2, (clipped - G) ** 2)
    theirs = (per_token * w * m).sum() / m.sum()
    assert abs(_value_loss(V, V0, G, m, clip=0.2, weight=w).item() - theirs.item()) <= 1e-15
    seq = sum((per_token[i] * w[i] * m[i]).sum() / m[i].sum() for i in range(3)) / 3
    assert abs(_value_loss(V, V0, G, m, clip=0.2, weight=w, agg="seq-mean-token-mean").item() - seq.item()) <= 1e-15
    with pytest.raises(ValueError, match="weight must have the shape of value"):
        _value_loss(V, V0, G, m, weight=w[:, :2])


def test_reinforce_pp_take_their_variance_convention_and_eps():
    r = torch.tensor([[0.0, 0.7, 0.0], [0.0, 0.0, -0.4], [1.3, 0.0, 0.0]], dtype=torch.float64)
    m = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]], dtype=torch.float64)
    rtg = torch.tensor([[0.7, 0.7, 0.0], [-0.4, -0.4, -0.4], [1.3, 0.0, 0.0]], dtype=torch.float64)
    vals = rtg[m == 1]
    for unbiased, eps in ((True, 1e-8), (False, 1e-8), (True, 0.5), (False, 0.0)):
        var = vals.var(unbiased=unbiased)
        theirs = torch.where(m == 1, (rtg - vals.mean()) / torch.sqrt(var + eps), 0)
        assert (_rpp(r, m, unbiased=unbiased, eps=eps) - theirs).abs().max().item() <= 1e-14
    assert torch.equal(_rpp(r, m), _rpp(r, m, unbiased=True, eps=1e-8))  # today's values are the defaults
    R, mm = torch.tensor([[1.0, 0.0, 0.25]], dtype=torch.float64), torch.tensor([[[1, 1], [1, 0], [1, 1]]], dtype=torch.float64)
    c = R - R.mean()
    toks = torch.cat([c[0, 0].repeat(2), c[0, 1:2], c[0, 2].repeat(2)])
    theirs = (c - toks.mean()) / torch.sqrt(toks.var(unbiased=False) + 0.1)
    assert (_rpp_baseline(R, mm, unbiased=False, eps=0.1)[0, :, 0] - theirs[0]).abs().max().item() <= 1e-14
    with pytest.raises(TypeError, match="unbiased must be a bool"):
        _rpp(r, m, unbiased=1)
    with pytest.raises(ValueError, match="eps must be"):
        _rpp_baseline(R, mm, eps=-1.0)


def test_batch_scaled_advantages_is_trls_batch_scaling():
    """TRL f2cd577, scale_rewards="batch": (R - group mean) / (nanstd(all rewards) + 1e-4), nanstd Bessel."""
    R = torch.tensor([[[0.2, 1.0, 0.5], [3.0, 3.0, 3.0]], [[1.0, 0.0, 0.0], [0.1, 0.9, 0.4]]], dtype=torch.float64)
    for batch in R:  # the leading dimension holds independent batches
        flat = batch.reshape(-1).tolist()
        mean = sum(flat) / len(flat)
        std = math.sqrt(sum((v - mean) ** 2 for v in flat) / (len(flat) - 1))
        theirs = torch.tensor([[(v - sum(row) / len(row)) / (std + 1e-4) for v in row] for row in batch.tolist()], dtype=torch.float64)
        ours = batch_scaled_advantages(batch[None])[0]
        assert (ours - theirs).abs().max().item() <= 1e-14
    assert (batch_scaled_advantages(R)[1] - batch_scaled_advantages(R[1:])[0]).abs().max().item() == 0.0
    assert batch_scaled_advantages(np.array([[2.0]])).tolist() == [[0.0]]  # one answer: std 0 (TRL), centred reward 0
    with pytest.raises(ValueError, match=r"rewards must have shape \[..., n_groups, G\]"):
        batch_scaled_advantages(np.ones(3))
    with pytest.raises(ValueError, match="eps must be"):
        batch_scaled_advantages(np.ones((2, 3)), eps=-1.0)


def test_high_entropy_mask_is_trls_quantile_rule():
    g = torch.Generator().manual_seed(4)
    H = torch.rand(4, 7, generator=g, dtype=torch.float64) * 3
    m = torch.rand(4, 7, generator=g) < 0.7
    H_pad = torch.where(m, H, torch.tensor(1e9, dtype=torch.float64))  # padding must not move the quantile
    for tau in (0.2, 0.5, 0.8, 1.0):
        q = torch.quantile(H[m], 1 - tau)
        theirs = m & (H >= q)
        ours = high_entropy_mask(H_pad, m, top_quantile=tau)
        assert torch.equal(ours, theirs)
        assert abs(ours.sum().item() - tau * m.sum().item()) <= 1 + 1e-9
    assert torch.equal(high_entropy_mask(H, m, top_quantile=1.0), m)
    ties = torch.tensor([[1.0, 1.0, 1.0, 0.5]])
    assert high_entropy_mask(ties, torch.ones(1, 4), top_quantile=0.25).tolist() == [[True, True, True, False]]  # ties at q kept
    assert not high_entropy_mask(H, torch.zeros(4, 7), top_quantile=0.5).any()
    assert high_entropy_mask(H.numpy(), m.numpy(), top_quantile=0.5).dtype == np.bool_
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="top_quantile must"):
            high_entropy_mask(H, m, top_quantile=bad)
    with pytest.raises(ValueError, match="mask is required"):
        high_entropy_mask(H, None, top_quantile=0.5)


def test_bias_corrected_kl_value_and_gradient_by_hand():
    g = torch.Generator().manual_seed(6)
    lp = -torch.rand(3, 4, generator=g, dtype=torch.float64) * 2 - 0.05
    old = lp.detach() + torch.randn(3, 4, generator=g, dtype=torch.float64) * 0.3
    ref = lp.detach() + torch.randn(3, 4, generator=g, dtype=torch.float64) * 0.5
    m = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)
    old_pad = torch.where(m == 1, old, torch.tensor(-float("inf"), dtype=torch.float64))
    lp_ = lp.clone().requires_grad_()
    out = bias_corrected_kl(lp_, old_pad, ref, m)
    rho, d = torch.exp(lp - old), lp - ref
    k3 = torch.exp(-d) - 1 + d
    assert (out.detach() - rho * k3 * m).abs().max().item() <= 1e-14
    out.sum().backward()
    by_hand = rho * k3 + rho * (1 - torch.exp(-d))  # d(rho k3)/d log pi: the ratio carries the score
    assert (lp_.grad - by_hand * m).abs().max().item() <= 1e-14
    seq = bias_corrected_kl(lp, old, ref, m, level="sequence")
    geo = torch.exp(((lp - old) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True))
    assert (seq - geo * k3 * m).abs().max().item() <= 1e-14
    with pytest.raises(ValueError, match="level must be 'token' or 'sequence', got 'seq'"):
        bias_corrected_kl(lp, old, ref, m, level="seq")
    with pytest.raises(ValueError, match="old_log_prob must be finite"):
        bias_corrected_kl(lp, old_pad, ref, torch.ones(3, 4))


def test_bias_corrected_kl_expected_gradient_is_the_reverse_kl_on_a_softmax():
    """Enumerated over K actions: E_mu[grad(rho k3)] = grad KL(pi || ref) for any mu; at mu = pi the plain k3 is not."""
    K = 5
    g = torch.Generator().manual_seed(7)
    theta = torch.randn(K, generator=g, dtype=torch.float64, requires_grad=True)
    ref = torch.softmax(torch.randn(K, generator=g, dtype=torch.float64), 0)
    for mu in (torch.softmax(torch.randn(K, generator=g, dtype=torch.float64), 0), None):
        logpi = torch.log_softmax(theta, 0)
        mu_ = torch.exp(logpi).detach() if mu is None else mu
        terms = bias_corrected_kl(logpi[None], torch.log(mu_)[None], torch.log(ref)[None], torch.ones(1, K))[0]
        (grad_corrected,) = torch.autograd.grad((mu_ * terms).sum(), theta, retain_graph=True)
        kl = (torch.exp(logpi) * (logpi - torch.log(ref))).sum()
        (grad_kl,) = torch.autograd.grad(kl, theta)
        assert (grad_corrected - grad_kl).abs().max().item() <= 1e-14
        value = (mu_ * terms).sum().item()
        assert abs(value - kl.item()) <= 1e-14
    logpi = torch.log_softmax(theta, 0)
    (grad_kl,) = torch.autograd.grad((torch.exp(logpi) * (logpi - torch.log(ref))).sum(), theta, retain_graph=True)
    plain = kl_k3(logpi[None], torch.log(ref)[None])[0]
    (grad_plain,) = torch.autograd.grad((torch.exp(logpi).detach() * plain).sum(), theta)
    assert (grad_plain - grad_kl).abs().max().item() > 1e-3  # without the ratio: the forward KL's gradient


@pytest.mark.reads_derivation("derivations.trust_region.bias_corrected_kl_gradient(3)")  # the chapter renders it
def test_bias_corrected_kl_derivation_fails_on_the_wrong_claims(fails_to_verify, verified_derivation):
    d = verified_derivation("derivations.trust_region.bias_corrected_kl_gradient(3)")  # replaced() below returns copies
    assert d.verified
    pi, rho = sp.symbols("pi_1:4", positive=True), sp.symbols("rho_1:4", positive=True)  # the derivation's own symbols
    mu = sp.symbols("mu_1:4", positive=True)
    k3 = lambda p, q: q / p - 1 - sp.log(q / p)
    assert fails_to_verify(d.replaced(1, lhs=sum(mu[a] * k3(pi[a], rho[a]) for a in range(3))))  # the ratio dropped
    assert fails_to_verify(d.replaced(1, rhs=sum(q * sp.log(q / p) for p, q in zip(pi, rho))))  # the forward KL
    assert fails_to_verify(d.replaced(2, rhs=d.steps[2].rhs * 2))  # twice the gradient
    assert fails_to_verify(d.replaced(2, rhs=_dtr.kl_estimator_gradients(3).steps[3].rhs))  # the forward KL's gradient


def _otb_by_hand(r, m, lp, s2, isw=None, align="position", tail=False, eps=1e-8):
    """verl's OTB (b178a3c docstrings: B_t = sum G W / (sum W + eps), W_t = cumsum of 1 - 2 pi + sum pi^2), in loops, one group."""
    G, T = len(r), len(r[0])
    ret = [[sum(r[i][u] * m[i][u] for u in range(t, T)) for t in range(T)] for i in range(G)]
    W = []
    for i in range(G):
        acc, row = 0.0, []
        for t in range(T):
            w = (1 - 2 * math.exp(lp[i][t]) + s2[i][t]) * (1 if isw is None else isw[i][t] ** 2)
            acc += w * m[i][t]
            row.append(acc)
        W.append(row)
    n = [int(sum(mi)) for mi in m]
    if align == "response":  # the k-th response token of each row, empty rows out of the group
        idx = [[t for t in range(T) if m[i][t]] for i in range(G)]
        members = [i for i in range(G) if n[i] > 0]
        L = max(n) if members else 0
        Rc = {i: [ret[i][t] for t in idx[i]] + [0.0] * (L - n[i]) for i in members}
        Wc = {i: [W[i][t] for t in idx[i]] + [0.0] * (L - n[i]) for i in members}
        b = {i: [0.0] * L for i in members}
        if len(members) > 1:
            for k in range(L):
                base = sum(Rc[i][k] * Wc[i][k] for i in members) / (sum(Wc[i][k] for i in members) + eps)
                for i in members:
                    b[i][k] = base
            if tail:
                ls = sorted(n[i] for i in members)
                if ls[-1] > ls[-2]:
                    j = [i for i in members if n[i] == ls[-1]][0]
                    b[j][ls[-2]:] = [0.0] * (L - ls[-2])
        out = [[0.0] * T for _ in range(G)]
        for i in members:
            for k, t in enumerate(idx[i]):
                out[i][t] = Rc[i][k] - b[i][k]
        return out
    b = [[0.0] * T for _ in range(G)]
    if G > 1:
        for t in range(T):
            base = sum(ret[i][t] * W[i][t] * m[i][t] for i in range(G)) / (sum(W[i][t] * m[i][t] for i in range(G)) + eps)
            for i in range(G):
                b[i][t] = base
        if tail:
            ls = sorted(n)
            if n.count(ls[-1]) == 1 and ls[-1] > ls[-2]:
                j = n.index(ls[-1])
                b[j][ls[-2]:] = [0.0] * (T - ls[-2])
    return [[(ret[i][t] - b[i][t]) * m[i][t] for t in range(T)] for i in range(G)]


def _otb_batch(seed, G=4, T=7, holes=False):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(G, T, 6, generator=g, dtype=torch.float64)
    p = torch.softmax(logits, -1)
    tok = torch.randint(0, 6, (G, T), generator=g)
    lp = torch.log(p.gather(-1, tok[..., None])[..., 0])
    s2 = (p**2).sum(-1)
    r = torch.zeros(G, T, dtype=torch.float64)
    lengths = torch.tensor([7, 3, 5, 0][:G] if G == 4 else torch.randint(1, T + 1, (G,), generator=g).tolist())
    m = (torch.arange(T)[None] < lengths[:, None]).to(torch.float64)
    if holes:  # tool tokens inside the responses
        m[:, 1] = 0
    for i in range(G):
        if lengths[i] > 0:
            r[i, int(lengths[i]) - 1] = torch.rand(1, generator=g, dtype=torch.float64).item() * 2 - 0.5  # non-binary outcome
        r[i, 0] += 0.1  # and a token-level reward
    isw = torch.rand(G, T, generator=g, dtype=torch.float64) + 0.5
    return r, m, lp, s2, isw


@pytest.mark.parametrize("align", ["position", "response"])
@pytest.mark.parametrize("tail", [False, True])
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("with_is", [False, True])
def test_optimal_token_baseline_matches_verls_definition(align, tail, holes, with_is):
    r, m, lp, s2, isw = _otb_batch(8, holes=holes)
    theirs = torch.tensor(_otb_by_hand(r.tolist(), m.tolist(), lp.tolist(), s2.tolist(), isw.tolist() if with_is else None, align, tail), dtype=torch.float64)
    lp_pad = torch.where(m == 1, lp, torch.tensor(-float("inf"), dtype=torch.float64))
    ours = optimal_token_baseline_advantages(r[None], lp_pad[None], s2[None], m[None], is_weights=isw[None] if with_is else None,
                                             align=align, handle_zero_tail=tail)[0]
    assert (ours - theirs).abs().max().item() <= 1e-14
    assert torch.isfinite(ours).all()


def test_optimal_token_baseline_groups_defaults_and_inputs():
    r, m, lp, s2, _ = _otb_batch(9)
    batch = [_otb_batch(s) for s in (9, 10)]
    stacked = [torch.stack(t) for t in zip(*batch)]
    both = optimal_token_baseline_advantages(stacked[0], stacked[2], stacked[3], stacked[1])
    for k, (r_, m_, lp_, s2_, _) in enumerate(batch):  # groups are independent
        assert torch.equal(both[k], optimal_token_baseline_advantages(r_, lp_, s2_, m_))
    # one answer: no baseline, the advantage is the reward-to-go
    alone = optimal_token_baseline_advantages(r[:1], lp[:1], s2[:1], m[:1])
    assert torch.equal(alone, (r[:1] * m[:1]).flip(-1).cumsum(-1).flip(-1) * m[:1])
    # verl's defaults of handle_zero_tail: False by position, True by response
    assert torch.equal(optimal_token_baseline_advantages(r, lp, s2, m, align="response"),
                       optimal_token_baseline_advantages(r, lp, s2, m, align="response", handle_zero_tail=True))
    assert not torch.equal(optimal_token_baseline_advantages(r, lp, s2, m), optimal_token_baseline_advantages(r, lp, s2, m, handle_zero_tail=True))
    assert optimal_token_baseline_advantages(r.float(), lp.float(), s2.float(), m).dtype == torch.float32
    with pytest.raises(ValueError, match="sum_pi_squared must lie in"):
        optimal_token_baseline_advantages(r, lp, s2 + 1, m)
    with pytest.raises(ValueError, match="log_prob must be <= 0"):
        optimal_token_baseline_advantages(r, -lp, s2, m)
    with pytest.raises(ValueError, match="is_weights must be >= 0 where mask is 1"):
        optimal_token_baseline_advantages(r, lp, s2, m, is_weights=-torch.ones_like(r))
    with pytest.raises(ValueError, match="align must be 'position' or 'response', got 'token'"):
        optimal_token_baseline_advantages(r, lp, s2, m, align="token")
    with pytest.raises(ValueError, match=r"rewards must have shape \[..., G, T\]"):
        optimal_token_baseline_advantages(r[0], lp[0], s2[0], m[0])
    with pytest.raises(ValueError, match="mask is required"):
        optimal_token_baseline_advantages(r, lp, s2, None)


def test_otb_token_energy_is_the_squared_score_norm_in_the_logits():
    """w = 1 - 2 pi(o) + sum pi^2 is |grad_z log pi(o)|^2 for a softmax step, checked against autograd."""
    g = torch.Generator().manual_seed(11)
    for V in (2, 5, 50):
        z = torch.randn(V, generator=g, dtype=torch.float64, requires_grad=True)
        for o in (0, V - 1):
            (score,) = torch.autograd.grad(torch.log_softmax(z, 0)[o], z)
            p = torch.softmax(z.detach(), 0)
            assert abs(score.pow(2).sum().item() - (1 - 2 * p[o] + (p**2).sum()).item()) <= 1e-14


def test_otb_baseline_minimises_the_weighted_squared_error():
    """b_t = sum W G / sum W is the minimiser of sum_i W_i (G_i - b)^2: a shift of b either way increases it."""
    r, m, lp, s2, _ = _otb_batch(12, G=5, T=4)
    A = optimal_token_baseline_advantages(r, lp, s2, m, eps=0.0)
    ret = (r * m).flip(-1).cumsum(-1).flip(-1) * m
    W = ((1 - 2 * lp.exp() + s2) * m).cumsum(-1) * m
    for t in range(4):
        b = (ret[:, t] - A[:, t])[m[:, t] == 1]
        assert b.numel() == 0 or (b - b[0]).abs().max().item() <= 1e-15  # one baseline per step, shared by the group
        if b.numel():
            loss = lambda c, t=t: (W[:, t] * m[:, t] * (ret[:, t] - c) ** 2).sum().item()
            assert loss(b[0].item()) < min(loss(b[0].item() + 1e-3), loss(b[0].item() - 1e-3))


def test_a_boolean_weight_counts_as_zero_one():
    x, m = _ragged_batch(seed=13)
    keep = high_entropy_mask(x.abs(), m, top_quantile=0.5)
    assert keep.dtype == torch.bool
    assert _aggregate(x, m, weight=keep).item() == _aggregate(x, m, weight=keep.to(torch.float64)).item()
    V = x + 1
    assert _value_loss(V, V, x, m, weight=keep.numpy()).item() == _value_loss(V, V, x, m, weight=keep.numpy().astype(float)).item()


@pytest.mark.parametrize("mode, opts", [("seq-mean-token-mean", {"count_eps": 1e-8, "empty_rows": "exclude"}), ("seq-mean-token-mean", {"count_eps": 0.5}),
                                        ("seq-mean-token-sum", {"empty_rows": "exclude"}), ("token-mean", {})])
def test_row_constant_values_reduce_like_their_broadcast_with_every_option(mode, opts):
    """The sequence-level losses hand reduce_tokens one value per row; the options must give what the broadcast gives."""
    from numeric.losses.aggregation import reduce_tokens

    x, m = _ragged_batch(seed=14, empty=(0, 2))
    keep = m.bool()
    row = x[:, :1]
    full = reduce_tokens(row.expand_as(x), keep, mode, None, **opts)
    assert abs(reduce_tokens(row, keep, mode, None, **opts).item() - full.item()) <= 1e-15 * (1 + abs(full.item()))
    assert abs(full.item() - _aggregate(row.expand_as(x).contiguous(), m, mode, **opts).item()) <= 1e-15 * (1 + abs(full.item()))


def test_token_weights_refuse_options_by_name():
    m = np.array([[1, 1, 0], [1, 0, 0]])
    with pytest.raises(ValueError, match="empty_rows is used by seq-mean-token-mean and seq-mean-token-sum only, not 'token-mean'"):
        _token_weights(m, "token-mean", empty_rows="exclude")
    with pytest.raises(ValueError, match="count_eps is used by seq-mean-token-mean only, not 'seq-mean-token-sum'"):
        _token_weights(m, "seq-mean-token-sum", count_eps=1e-8)
    with pytest.raises(ValueError, match=r"empty_rows must be one of \('count', 'exclude'\)"):
        _token_weights(m, "seq-mean-token-sum", empty_rows=True)
    kappa = _token_weights(np.array([[1, 1, 0], [0, 0, 0]]), "seq-mean-token-sum", empty_rows="exclude")
    assert kappa.tolist() == [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]  # B' = 1: the empty row is not counted


# ------------------------------------------------------------------ SAPO: one temperature per sign of A


def _sapo_sympy(tau_pos, tau_neg, r, A, ell0=-1.5):
    """The registry's SAPO loss and its ell-derivative at the given temperatures, at ell = ell0 + log r, in 100-bit mpmath (the ground truth, to well below 1 ulp)."""
    import mpmath

    loss = registry.METHODS["sapo"].loss()
    out = []
    with mpmath.workprec(100):
        for expr in (loss, d_dell(loss)):
            e = expr.subs(registry.symbol_values("sapo", sapo_tau=(tau_pos, tau_neg))).subs(registry.ell, registry.ell0 + sp.log(registry.r))
            f = sp.lambdify((registry.r, registry.A, registry.ell0), e, "mpmath")
            out.append(np.array([float(f(mpmath.mpf(x), mpmath.mpf(a), mpmath.mpf(ell0))) for x, a in zip(r, A)]))
    return out


def test_sapo_torch_form_is_the_per_sign_sympy_form_to_1e_15_and_a_swap_is_caught():
    """policy_loss("sapo") against the registry's Piecewise form, fp64, tau_+ != tau_-, A of both signs and 0:
    each token alone (a [1, 1] batch), its value and its gradient to 1e-15.  The same check with the temperatures
    swapped (tau_- where A > 0) fails by far: a swap in either form would be caught."""
    tau = (0.7, 1.6)
    ell = np.log(np.array([0.3, 0.8, 0.99, 1.0, 1.01, 1.25, 2.0, 4.0] * 3))
    r = np.exp(ell)  # the ratio torch computes from ell - 0, so both sides see the same number
    A = np.array([1.3] * 8 + [-0.6] * 8 + [0.0] * 8)
    value, grad = _sapo_sympy(*tau, r, A, ell0=0.0)
    ours_v, ours_g = [], []
    for x, a in zip(ell, A):
        old = torch.zeros((1, 1), dtype=torch.float64)
        lp = torch.full((1, 1), x, dtype=torch.float64, requires_grad=True)
        loss = policy_loss("sapo", lp, old, torch.tensor([a], dtype=torch.float64), torch.ones(1, 1), sapo_tau=tau)
        ours_v.append(loss.item())
        ours_g.append(torch.autograd.grad(loss, lp)[0].item())
    ours_v, ours_g = np.array(ours_v), np.array(ours_g)
    assert np.abs(ours_v - value).max() <= 1e-15 * (1 + np.abs(value).max())
    assert np.abs(ours_g - grad).max() <= 1e-15 * (1 + np.abs(grad).max())
    assert (ours_v[A == 0] == 0).all() and (ours_g[A == 0] == 0).all()  # A = 0: no loss, whichever temperature
    w = policy_weight("sapo", torch.from_numpy(ell)[:, None], torch.zeros((len(r), 1), dtype=torch.float64),
                      torch.from_numpy(A), torch.ones(len(r), 1), sapo_tau=tau)[:, 0].numpy()
    live = A != 0
    assert np.abs(-w[live] * A[live] - grad[live]).max() <= 1e-15 * (1 + np.abs(grad).max())  # the derived weight, per sign
    swapped_v, swapped_g = _sapo_sympy(tau[1], tau[0], r, A)
    assert np.abs(ours_v - swapped_v).max() > 1e-2 and np.abs(ours_g - swapped_g).max() > 1e-2


def test_sapo_parameters_map_to_the_per_sign_symbols():
    assert registry.symbol_values("sapo") == {registry.tau_pos: 1.0, registry.tau_neg: 1.05}  # TRL's and verl's defaults
    loss = registry.METHODS["sapo"].loss()
    assert loss.subs(registry.A, 2).free_symbols == {registry.r, registry.tau_pos}
    assert loss.subs(registry.A, -2).free_symbols == {registry.r, registry.tau_neg}
    assert loss.subs(registry.A, 0) == 0
    assert registry.METHODS["sapo_seq"].loss() == loss  # sapo_seq is the same gate at the row's ratio
    with pytest.raises(ValueError, match=r"options must be parameters of 'sapo'"):
        registry.symbol_values("sapo", tau=1.0)
    with pytest.raises(ValueError, match="method must be one of"):
        registry.symbol_values("sappo")


@pytest.mark.reads_derivation('derivations.losses.sequence_weight_derivation("sapo_seq", 3)')  # shares its worker's verified build
def test_sapo_sequence_weight_is_the_per_sign_weight_at_the_row_ratio(verified_derivation):
    """sapo_seq's derived weight: SAPO's per-sign weight at the row ratio; a row with A < 0 reads tau_-, not tau_+."""
    rt = sp.Symbol("rtilde", positive=True)
    rhs = verified_derivation('derivations.losses.sequence_weight_derivation("sapo_seq", 3)').steps[-1].rhs
    for a, keep, drop in ((sp.Integer(2), dl.tau_pos, dl.tau_neg), (-sp.Integer(2), dl.tau_neg, dl.tau_pos)):
        w = -rhs.subs(dl.A, a) / a
        assert w.free_symbols == {rt, keep}
        assert sp.simplify(w - dl.weight("sapo").subs(dl.A, a).subs(dl.r, rt)) == 0
        assert _differs_at_a_point(w, dl.weight("sapo").subs(dl.A, a).subs(dl.r, rt).subs(keep, drop))


def test_policy_loss_takes_the_seq_mean_options_of_aggregate():
    """verl's and OpenRLHF's n_i + 1e-8 and "exclude fully masked sequences" reach policy_loss by name, as in aggregate."""
    lp, old, A, mask = _trainer_batch(B=5, T=6, seed=9)
    mask[2] = 0
    opts = {"count_eps": 1e-8, "empty_rows": "exclude"}
    per_token = policy_loss("sapo", lp, old, A, mask, agg="seq-mean-token-mean", **opts)
    n = mask.sum(-1)
    t = torch.where(A > 0, torch.tensor(1.0, dtype=torch.float64), torch.tensor(1.05, dtype=torch.float64))[:, None]  # fp64: 1.05 in fp32 is off by 5e-8
    x = -torch.sigmoid(t * ((lp - old).exp() - 1)) * 4 / t * A[:, None]
    theirs = ((x * mask).sum(-1) / (n + 1e-8)).sum() / (n > 0).sum()
    assert abs(per_token.item() - theirs.item()) <= 1e-15 * (1 + abs(theirs.item()))
    assert abs(policy_loss("sapo", lp, old, A, mask, agg="seq-mean-token-mean").item() - theirs.item()) > 1e-3  # B counts the empty row
    with pytest.raises(ValueError, match="count_eps is used by seq-mean-token-mean only, not 'token-mean'"):
        policy_loss("sapo", lp, old, A, mask, count_eps=1e-8)
    with pytest.raises(ValueError, match=r"empty_rows must be one of \('count', 'exclude'\)"):
        policy_loss("ppo", lp, old, A, mask, agg="seq-mean-token-sum", empty_rows="drop")
