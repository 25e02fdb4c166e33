"""Tests a mutant of ``tests/mutants/run.py`` showed missing: PPO's clip edges, hit exactly.

The registry test (``tests/test_losses.py``) crosses every clip edge at
:math:`e(1 \\pm 10^{-3})`, never at the edge itself, so a torch form whose live
set :math:`r \\le 1 + \\varepsilon_h` (:math:`A > 0`) or :math:`r \\ge 1 - \\varepsilon_l`
(:math:`A < 0`) turned strict passed it.  The live sets are closed, as derived
(:mod:`derivations.gradient_weights`) and as verl, TRL and OpenRLHF compute it
(``torch.clamp`` passes the gradient at its bounds).
"""

import math

import pytest
import torch

from numeric import policy_loss, policy_weight


@pytest.mark.parametrize("advantage, ratio, eps", [(1.3, 2.0, {"eps_low": 0.2, "eps_high": 1.0}),  # r = 1 + eps_h exactly
                                                   (-0.7, 0.5, {"eps_low": 0.5, "eps_high": 0.2})])  # r = 1 - eps_l exactly
def test_ppo_keeps_the_gradient_of_a_ratio_exactly_at_its_clip_edge_and_drops_it_just_beyond(advantage, ratio, eps):
    old = torch.tensor([[math.log(0.25) if ratio == 2.0 else math.log(0.5)]], dtype=torch.float64)
    lp = torch.tensor([[math.log(0.5) if ratio == 2.0 else math.log(0.25)]], dtype=torch.float64)
    assert (lp - old).exp().item() == ratio == (1 + eps["eps_high"] if advantage > 0 else 1 - eps["eps_low"])
    A, m = torch.tensor([advantage], dtype=torch.float64), torch.ones(1, 1)
    at_edge = lp.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(policy_loss("ppo", at_edge, old, A, m, **eps), at_edge)
    assert g.item() == -advantage * ratio  # live: d(-rA)/d(ell) = -rA
    assert policy_weight("ppo", lp, old, A, m, **eps).item() == ratio  # the derived weight agrees at the edge
    past = (lp + (1e-12 if advantage > 0 else -1e-12)).requires_grad_(True)  # just outside the band
    assert ((past - old).exp().item() > ratio) if advantage > 0 else ((past - old).exp().item() < ratio)
    (g,) = torch.autograd.grad(policy_loss("ppo", past, old, A, m, **eps), past)
    assert g.item() == 0.0


# ------------------------------------------------------------------ issue 29: the bands' and DPPO's edges, hit exactly


def _edge_batch(ratio):
    """One token whose ratio is ``ratio`` exactly (2 or 1/2: log-probabilities of 1/2 and 1/4)."""
    big, small = math.log(0.5), math.log(0.25)
    lp, old = (big, small) if ratio == 2.0 else (small, big)
    lp, old = torch.tensor([[lp]], dtype=torch.float64), torch.tensor([[old]], dtype=torch.float64)
    assert (lp - old).exp().item() == ratio
    return lp, old


def _gradient(method, lp, old, A, **options):
    at = lp.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(policy_loss(method, at, old, torch.tensor([A], dtype=torch.float64), torch.ones(1, 1), **options), at)
    return g.item()


@pytest.mark.parametrize("ratio", [2.0, 0.5])
@pytest.mark.parametrize("advantage", [1.3, -0.7])
def test_icepop_keeps_its_edges_and_skyrls_rollout_band_drops_them(ratio, advantage):
    """IcePop's band [b_l, b_h] is closed (OpenRLHF's and AReaL's <=), SkyRL's rollout_is band is open (its < and >): at
    r = b_l, b_h exactly the first keeps the weight r, the second gives 0; the torch form, the derived weight and the
    registry's formula agree."""
    import sympy as sp

    from derivations import losses as dl
    from derivations import methods as registry

    lp, old = _edge_batch(ratio)
    assert _gradient("icepop", lp, old, advantage, is_bounds=(0.5, 2.0)) == -advantage * ratio
    assert policy_weight("icepop", lp, old, torch.tensor([advantage], dtype=torch.float64), torch.ones(1, 1), is_bounds=(0.5, 2.0)).item() == ratio
    assert _gradient("rollout_is", lp, old, advantage, eps_low=0.5, eps_high=1.0) == 0.0
    at = {registry.r: sp.Rational(ratio), registry.b_l: sp.Rational(1, 2), registry.b_h: 2, registry.eps_l: sp.Rational(1, 2), registry.eps_h: 1}
    assert dl.weight("icepop").subs(at) == sp.Rational(ratio) and dl.weight("rollout_is").subs(at) == 0


def test_dppo_keeps_a_probability_change_exactly_at_delta():
    """DPPO's binary TV mask keeps pi - pi_old <= delta_h (A > 0) with its edge, as SkyRL and prime-rl compare (<=): pi_old = 1/4,
    pi = 1/2, delta_h = 1/4; in torch, in the derived weight and in the registry's formula."""
    import sympy as sp

    from derivations import losses as dl
    from derivations import methods as registry

    lp, old = _edge_batch(2.0)
    assert _gradient("dppo", lp, old, 1.3, tv_delta=(0.25, 0.25)) == -1.3 * 2.0
    assert _gradient("dppo", lp + 1e-12, old, 1.3, tv_delta=(0.25, 0.25)) == 0.0
    at = {registry.r: 2, registry.A: 1, registry.ell0: sp.log(sp.Rational(1, 4)), registry.tv_h: sp.Rational(1, 4)}
    assert dl.weight("dppo").subs(at) == 2


def test_m2po_keeps_one_token_when_no_suffix_is_below():
    """AReaL's rule drops all but the smallest m2 when every suffix mean is at or above the threshold (m2 = 4, 1, 1/4; 0.1)."""
    from numeric.losses import m2po_selection

    beh = torch.tensor([[2.0, 1.0, 0.5]], dtype=torch.float64)
    assert m2po_selection(beh, torch.zeros_like(beh), torch.ones(1, 3), threshold=0.1).tolist() == [[True, True, False]]
