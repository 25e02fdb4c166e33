"""Gradient weights: the derivations verify, the suite passes, the batched helpers reject bad input."""

import math

import numpy as np
import pytest
import sympy as sp
import torch

from derivations import Definitions, Derivation
from derivations import gradient_weights as dgw
from derivations.proofs import limit_along
from numeric import (
    PPODiagnostics,
    fork_token,
    gradient_weight,
    policy_loss,
    ppo_clipped_terms,
    ppo_diagnostics,
    ppo_loss,
)


def cispo_cap_loss(log_prob, old_log_prob, advantages, mask, *, eps_high=0.28):
    """CISPO's one-sided cap (``eps_low=None``) through the one code path."""
    return policy_loss("cispo", log_prob, old_log_prob, advantages, mask, eps_low=None, eps_high=eps_high)


def _rendered(call: str, *values):
    """``call`` as the chapter renders it (after ``values``), marked so that under ``--dist loadgroup`` its readers share one worker (tests/conftest.py)."""
    source = f"derivations.gradient_weights.{call}"
    return pytest.param(*values, source, marks=pytest.mark.reads_derivation(source), id=call)


@pytest.mark.parametrize("source", [_rendered(f'weight_derivation("{m}")') for m in dgw.METHODS])
def test_weight_derivations_verify(source, verified_derivation):
    assert verified_derivation(source).verified


@pytest.mark.parametrize("source", [_rendered(f"{make}()") for make in ("silenced_set", "on_policy_limit", "stop_gradient_semantics", "sign_flip")])
def test_claims_verify(source, verified_derivation):
    assert verified_derivation(source).verified


A, r, ell = dgw.A, dgw.r, dgw.ell
eps_l, eps_h, c = dgw.eps_l, dgw.eps_h, dgw.c


@pytest.mark.parametrize("method, source", [_rendered(f'weight_derivation("{m}")', m) for m in dgw.METHODS])
def test_a_region_resolved_on_the_wrong_sign_of_A_fails(method, source, fails_to_verify, verified_derivation):
    """Each region's piece, swapped with the piece of the same r-interval for the other sign of A, must fail (where they differ)."""
    d = verified_derivation(source)  # its unchanged steps' verdicts are remembered; replaced() returns a copy
    half = len(d.steps) // 2
    swapped = 0
    for i in range(0, half, 2):
        pos, neg = d.steps[i].rhs, d.steps[i + half].rhs
        if pos != neg:
            assert fails_to_verify(d.replaced(i, rhs=neg)) and fails_to_verify(d.replaced(i + half, rhs=pos))
            swapped += 1
    assert swapped == {"ppo": 2, "ppo_dual_clip": 3, "cispo_cap": 0, "is": 0}[method]


def test_wrong_clip_bounds_and_weights_fail(fails_to_verify):
    d = dgw.weight_derivation("ppo")
    assert d.steps[6].rhs == -A * (1 - eps_l)  # A < 0, r < 1 - eps_l: the clipped constant
    assert fails_to_verify(d.replaced(6, rhs=-A * (1 + eps_l)))  # the wrong bound
    assert fails_to_verify(d.replaced(4, rhs=-A * (1 - eps_l)))  # A > 0 clipped at the lower bound
    assert fails_to_verify(d.replaced(5, rhs=-A * r))  # a silenced region given weight r
    dual = dgw.weight_derivation("ppo_dual_clip")
    assert dual.steps[14].rhs == -A * c
    assert fails_to_verify(dual.replaced(14, rhs=-A * (1 + eps_h)))  # the dual clip's constant is c
    cispo = dgw.weight_derivation("cispo_cap")
    assert fails_to_verify(cispo.replaced(2, rhs=-A * ell * (1 + eps_h)))  # the cap without its stop-gradient
    assert fails_to_verify(cispo.replaced(3, rhs=-A * r))  # beyond the cap the weight is 1 + eps_h, not r


@pytest.mark.reads_derivation("derivations.gradient_weights.silenced_set()")
def test_silenced_set_and_limits_catch_a_wrong_mask_or_weight(fails_to_verify):
    d = dgw.silenced_set()  # a fresh build: `wrong` below shares its steps, and verifying it writes to them
    M_ = next(s for s in d.steps[2].rhs.free_symbols if s.name == "M")
    wrong_mask = sp.Piecewise((0, ((A > 0) & (r > 1 + eps_h)) | ((A < 0) & (r > 1 - eps_l))), (1, True))
    wrong = Derivation(d.title, unfold=Definitions({**d.unfold.entries, M_: wrong_mask}, *d.unfold.rules))
    wrong.steps = d.steps
    assert fails_to_verify(wrong)
    limits = dgw.on_policy_limit()
    assert fails_to_verify(limits.replaced(0, rhs=1 + eps_h))  # CISPO without a clip is IS, not the cap
    ppo_at_2 = sp.Subs(dgw.gradient_weight("ppo"), r, 2)  # outside the clip range one sign is silenced
    assert fails_to_verify(limits.replaced(1, lhs=ppo_at_2))


# each reads the rendered derivation on its worker: the true steps before a replaced one are remembered verdicts there
@pytest.mark.reads_derivation("derivations.gradient_weights.stop_gradient_semantics()")
def test_a_missing_stop_gradient_fails(fails_to_verify, verified_derivation):
    d = verified_derivation("derivations.gradient_weights.stop_gradient_semantics()")  # replaced() returns copies
    assert fails_to_verify(d.replaced(1, rhs=-A * r * (1 + ell)))  # (a) differentiated as if sg were missing
    assert fails_to_verify(d.replaced(0, rhs=-A * r))  # loss (a) is not the ratio loss (c)
    assert fails_to_verify(d.replaced(10, rhs=-A * r))  # (c) beyond the clip is the constant cap


@pytest.mark.reads_derivation("derivations.gradient_weights.sign_flip()")
def test_wrong_solution_sets_fail(fails_to_verify, verified_derivation):
    flip = verified_derivation("derivations.gradient_weights.sign_flip()")
    assert fails_to_verify(flip.replaced(2, rhs=ell < 1))
    assert fails_to_verify(flip.replaced(3, rhs=sp.Symbol("pi", positive=True) < sp.Rational(1, 2)))


def test_weight_table_has_a_row_per_region():
    assert dgw.weight_table().count(r"\\") == 1 + 8  # header + 2 signs x 4 intervals


def test_unknown_method():
    with pytest.raises(ValueError, match="method"):
        dgw.token_loss("trpo")
    for make in (dgw.weight_derivation, dgw.gradient_weight):
        with pytest.raises(ValueError, match="method must be one of"):
            make("trpo")
        with pytest.raises(ValueError, match="method must be one of"):
            make(None)
    with pytest.raises(TypeError, match="var must be a SymPy Symbol"):
        limit_along(2 * r, r)
    with pytest.raises(ValueError, match="method"):
        gradient_weight("trpo", np.ones(2), np.ones(2))


def test_kink_convention_matches_torch_clamp():
    """At r = 1 + eps_h with A > 0 the derived PPO weight is r, as autograd through torch.clamp gives."""
    for r0, adv in ((1 + 0.28, 1.0), (1 - 0.2, -1.0)):
        r = torch.tensor([r0], requires_grad=True)
        pess = ppo_clipped_terms(r, torch.tensor([adv]), eps_low=0.2, eps_high=0.28).pessimistic
        d_loss_d_ell = -torch.autograd.grad(pess.sum(), r)[0] * r0  # d/d ell = r d/dr
        w = gradient_weight("ppo", r.detach(), torch.tensor([adv]), eps_low=0.2, eps_high=0.28)
        assert float(d_loss_d_ell) == pytest.approx(float(-w * adv), abs=1e-15)


def test_kinds_round_trip():
    r, a = np.array([0.5, 2.0]), np.array([1.0, -1.0])
    assert isinstance(gradient_weight("cispo", r, a), np.ndarray)
    assert isinstance(gradient_weight("cispo", torch.from_numpy(r), torch.from_numpy(a)), torch.Tensor)
    terms = ppo_clipped_terms(torch.from_numpy(r), torch.from_numpy(a))
    assert all(isinstance(t, torch.Tensor) for t in (terms.unclipped, terms.clipped, terms.pessimistic))
    np_terms = ppo_clipped_terms(r, a)
    assert all(isinstance(t, np.ndarray) for t in (np_terms.unclipped, np_terms.clipped, np_terms.pessimistic))


def test_asymmetric_clip_is_a_pair():
    r, a = np.array([0.75, 1.25]), np.array([-1.0, 1.0])
    sym = ppo_clipped_terms(r, a).pessimistic
    asym = ppo_clipped_terms(r, a, eps_low=0.3, eps_high=0.28).pessimistic
    assert sym.tolist() == [-0.8, 1.2]
    assert asym.tolist() == [-0.75, 1.25]


@pytest.mark.parametrize(
    "ratio, adv, eps, match",
    [
        (np.array([-1.0, 1.0]), np.ones(2), {}, "ratio must be >= 0"),
        (np.ones(2), np.ones(2), {"eps_low": -0.1}, "eps_low"),
        (np.ones(2), np.ones(2), {"eps_high": -0.1}, "eps_high"),
        (np.ones(2), np.ones(2), {"eps_low": 1.5}, "eps_low"),
        (np.ones(2), np.ones(2), {"eps_high": math.nan}, "eps_high"),
        (np.ones(2), np.ones(3), {}, "shape"),
        (np.array([1.0, np.nan]), np.ones(2), {}, "NaN"),
        (np.ones(2), np.array([1.0, np.inf]), {}, "finite"),
    ],
)
def test_bad_input_terms_and_weights(ratio, adv, eps, match):
    with pytest.raises(ValueError, match=match):
        ppo_clipped_terms(ratio, adv, **eps)
    with pytest.raises(ValueError, match=match):
        gradient_weight("ppo", ratio, adv, **eps)


def test_bad_types():
    with pytest.raises(TypeError, match="ratio"):
        ppo_clipped_terms([1.0, 2.0], np.ones(2))
    with pytest.raises(TypeError, match="eps_low"):
        ppo_clipped_terms(np.ones(2), np.ones(2), eps_low="0.2")
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        gradient_weight("ppo", np.ones(2), np.ones(2), dual_clip=0.5)
    with pytest.raises(ValueError, match="dual_clip is not a parameter of 'cispo'"):
        gradient_weight("cispo", np.ones(2), np.ones(2), dual_clip=3.0)
    with pytest.raises(ValueError, match="sequence-level"):
        gradient_weight("gspo", np.ones(2), np.ones(2))


def test_diagnostics_properties_and_bad_input():
    rng = np.random.default_rng(0)
    old = np.log(rng.uniform(0.05, 0.9, size=(4, 6)))
    new = old + rng.normal(0, 0.4, size=(4, 6))
    adv = rng.normal(size=(4, 6))
    mask = (rng.uniform(size=(4, 6)) < 0.7).astype(float)
    d = ppo_diagnostics(new, old, adv, mask, eps_low=0.2, eps_high=0.28)
    assert isinstance(d, PPODiagnostics)
    with pytest.raises(AttributeError):
        d.kl = 0.0  # frozen
    # against a per-element loop
    sel = mask > 0
    r = np.exp(new - old)[sel]
    a = adv[sel]
    outside = np.mean([(x < 0.8) or (x > 1.28) for x in r])
    active = np.mean([min(x * y, min(max(x, 0.8), 1.28) * y) < x * y for x, y in zip(r, a)])
    assert d.ratio_outside_fraction == pytest.approx(outside, abs=1e-15)
    assert d.active_clip_fraction == pytest.approx(active, abs=1e-15)
    assert d.kl == pytest.approx(np.mean(r - 1 - np.log(r)), abs=1e-15) and d.kl >= 0
    assert d.mean_log_ratio == pytest.approx(np.mean(np.log(r)), abs=1e-15)
    # active clip == PPO's silenced tokens (weight 0)
    w = gradient_weight("ppo", np.exp(new - old), adv, eps_low=0.2, eps_high=0.28)
    assert d.active_clip_fraction == pytest.approx(np.mean((w == 0)[sel]), abs=1e-15)
    with pytest.raises(ValueError, match="mask must select"):
        ppo_diagnostics(new, old, adv, mask=np.zeros_like(mask))
    with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
        ppo_diagnostics(new, old, adv, mask=mask * 2)
    with pytest.raises(ValueError, match="shape"):
        ppo_diagnostics(new, old[:, :3], adv)
    with pytest.raises(ValueError, match="finite"):
        ppo_diagnostics(np.full_like(new, np.nan), old, adv)
    with pytest.raises(ValueError, match="eps_low"):
        ppo_diagnostics(new, old, adv, eps_low=-0.2)
    assert ppo_diagnostics(new, old, adv) == ppo_diagnostics(new, old, adv, np.ones_like(mask))  # mask=None keeps every token


def test_losses_token_normalised_and_bad_input():
    lp = torch.log(torch.tensor([[0.3, 0.6, 0.5]])).requires_grad_(True)
    old = torch.log(torch.tensor([[0.2, 0.5, 0.5]]))
    adv, mask = torch.tensor([[1.0, -1.0, 2.0]]), torch.tensor([[1.0, 1.0, 0.0]])
    g = torch.autograd.grad(cispo_cap_loss(lp, old, adv, mask), lp)[0]
    w = gradient_weight("cispo", (lp - old).exp().detach(), adv, eps_low=None, eps_high=0.28)
    assert torch.allclose(g, -w * adv * mask / 2, atol=1e-15, rtol=0)
    g = torch.autograd.grad(ppo_loss(lp, old, adv, mask, eps_low=0.2, eps_high=0.28), lp)[0]
    w = gradient_weight("ppo", (lp - old).exp().detach(), adv, eps_low=0.2, eps_high=0.28)
    assert torch.allclose(g, -w * adv * mask / 2, atol=1e-15, rtol=0)
    assert isinstance(cispo_cap_loss(lp.detach().numpy(), old.numpy(), adv.numpy(), mask.numpy()), np.ndarray)
    for loss in (ppo_loss, cispo_cap_loss):
        with pytest.raises(ValueError, match="shape"):
            loss(lp, old[:, :2], adv, mask)
        empty = loss(lp, old, adv, torch.zeros_like(mask))  # stated: 0, with a zero gradient
        assert empty.item() == 0.0 and torch.autograd.grad(empty, lp)[0].abs().max().item() == 0.0
        with pytest.raises(ValueError, match="finite"):
            loss(lp, old, adv * math.inf, mask)
        with pytest.raises(ValueError, match="eps_high"):
            loss(lp, old, adv, mask, eps_high=-1.0)
        with pytest.raises(ValueError, match="mask is required"):
            loss(lp, old, adv, None)


def test_fork_token_trajectories_and_bad_input():
    ppo, cispo = fork_token("ppo"), fork_token("cispo", eps_low=None)
    assert ppo.rare_prob.shape == (16,) and cispo.rare_prob[-1] > 10 * ppo.rare_prob[-1]
    # the first update starts at r = 1, where both losses have the on-policy gradient pi_old(a) A(a) (E_old[A] = 0):
    pi_old = torch.tensor([0.6, 0.39, 0.01], dtype=torch.float64)
    adv = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64) - 0.01
    first = torch.softmax(pi_old.log() + 30.0 * pi_old * adv, 0)[2]
    assert abs(float(ppo.rare_prob[0] - first)) < 1e-15 and abs(float(cispo.rare_prob[0] - first)) < 1e-15
    assert bool((cispo.rare_weight > 0).all())
    with pytest.raises(ValueError, match="method"):
        fork_token("is")
    with pytest.raises(ValueError, match="p_rare"):
        fork_token("ppo", p_rare=1.5)
    with pytest.raises(ValueError, match="steps"):
        fork_token("ppo", steps=0)
    with pytest.raises(ValueError, match="lr"):
        fork_token("ppo", lr=-1.0)
