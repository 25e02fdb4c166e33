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
