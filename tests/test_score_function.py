"""The score function: derivations at several K, the suite, negative controls, bad input."""

import pytest
import torch

from derivations import DerivationError
from derivations.score_function import (
    environment_gradient,
    instances,
    kl_penalty_direct_term,
)
from numeric import default_reward, perturb
from numeric.score_function import (
    TwoStepMDP,
    autograd_gradient,
    finite_difference_gradient,
    log_ratio,
    product_rule_terms,
)


def test_general_K_derivations_hold_at_K_2_3_4():
    """The general-K derivation (verified by its doctest) instantiated at fixed K, every coordinate.

    An instance fixes ``j`` and ``n = K - j`` and is checked on the explicit sum over ``a = 1..K``: the
    coordinate first, interior and last, with 0 to 3 other actions before it and after it.
    ``log_derivative_trick`` at K = 2, 3, 4 is checked by the chapter's doctest (docs/score_function.rst,
    "The log-derivative trick"), and ``expected_score`` at K = 2, 3, 4 by
    ``tests/test_derivation.py::test_first_derivations_general_and_fixed_K`` (and at K = 3 by its own doctest),
    the same ``instances`` verified in the same way, so neither is verified twice.
    """
    for K in (2, 3, 4):
        assert all(d.verify().verified for d in instances(kl_penalty_direct_term, K))


def test_environment_derivation_holds_with_three_states():
    for parametrised in (False, True):
        assert environment_gradient(parametrised, K=2, M=3).verify().verified


def rendered(call: str) -> str:
    """The chapter's ``.. derivation::`` source of ``derivations.score_function.<call>``."""
    return f"derivations.score_function.{call}"



@pytest.mark.reads_derivation(rendered("environment_gradient(True)"))
def test_a_parametrised_kernel_is_not_free(verified_derivation):
    """Negative control: the fixed-kernel conclusion fails when the kernel depends on theta."""
    d = verified_derivation(rendered("environment_gradient(True)")).replaced(0)  # a copy of the shared derivation, to change
    d.steps[-1] = environment_gradient(False).steps[-1]
    with pytest.raises(DerivationError, match=r"is fixed\) does not hold"):
        d.verify()


@pytest.mark.reads_derivation(rendered("stopped_direct_term()"))
def test_stopping_is_not_free_in_general(verified_derivation):
    """Negative control: the stopped surrogate is not the full gradient for a general integrand."""
    d = verified_derivation(rendered("stopped_direct_term()"))
    full_gradient, minus_direct = sorted(d.steps[-1].rhs.args, key=lambda e: e.could_extract_minus_sign())
    assert minus_direct.could_extract_minus_sign()
    with pytest.raises(DerivationError):
        d.replaced(len(d.steps) - 1, full_gradient).verify()



def _slip(call: str, d):
    """The slip of each rendered derivation: its step index and the wrong right-hand side."""
    import sympy as sp

    from derivations import IndexedSoftmax

    pol = IndexedSoftmax()
    a, j, K = pol.a, pol.j, pol.K
    if call == "expected_score()":  # s_j(a) = delta_aj - pi_a with the wrong index
        return 0, sp.Sum(pol.prob(a) * sp.KroneckerDelta(a, j), (a, 1, K)) - sp.Sum(pol.prob(a) ** 2, (a, 1, K))
    if call == "log_derivative_trick()":  # d pi = d log pi, without the pi_a factor
        return 1, sp.Sum(sp.IndexedBase("R", real=True)[a] * sp.Derivative(sp.log(pol.prob(a)), pol.theta[j]), (a, 1, K))
    return 0, d.steps[0].rhs.args[0]  # the product rule without its direct term


@pytest.mark.parametrize("call", [pytest.param(c, marks=pytest.mark.reads_derivation(rendered(c))) for c in ("expected_score()", "log_derivative_trick()", "product_rule()")])
def test_the_score_derivations_reject_plausible_slips(call, verified_derivation):
    """s_j(a) = delta_aj - pi_a (wrong index), d pi = d log pi (no pi_a factor), a product rule without its direct term."""
    d = verified_derivation(rendered(call))
    index, wrong = _slip(call, d)
    assert d.verified and wrong != d.steps[index].rhs
    with pytest.raises(DerivationError, match=f"step {index + 1} "):
        d.replaced(index, wrong).verify()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_log_ratio_direct_term_vanishes_at_other_thetas(lm, seed):
    R, theta = default_reward(lm), perturb(lm.theta0, 1.0, seed=seed)
    ref = perturb(lm.theta0, 0.7, seed=seed + 10)
    score, direct = product_rule_terms(lm, theta, lambda th: R - 0.3 * log_ratio(lm, th, ref))
    assert float(direct.abs().max()) < 1e-14
    th = theta.clone().requires_grad_(True)
    full = torch.autograd.grad(lm.probs(th) @ (R - 0.3 * log_ratio(lm, th, ref)), th)[0]
    assert float((score - full).abs().max()) < 1e-14


def test_integrand_free_of_theta_has_no_direct_term(lm):
    R = default_reward(lm)
    score, direct = product_rule_terms(lm, lm.theta0, lambda th: R)
    assert float(direct.abs().max()) == 0.0
    assert float((score - autograd_gradient(lm, lm.theta0, R)).abs().max()) < 1e-14


def test_bad_input(lm):
    R = default_reward(lm)
    with pytest.raises(ValueError, match="rewards must have shape"):
        autograd_gradient(lm, lm.theta0, R[:-1])
    with pytest.raises(ValueError, match="rewards must be finite"):
        autograd_gradient(lm, lm.theta0, torch.where(R > 0, float("nan"), R))
    with pytest.raises(TypeError, match="rewards must be a torch.Tensor"):
        finite_difference_gradient(lm, lm.theta0, R.numpy())
    with pytest.raises(ValueError, match="h must be a positive float"):
        finite_difference_gradient(lm, lm.theta0, R, h=-1.0)
    with pytest.raises(TypeError, match="lm must be a TinyLM"):
        autograd_gradient("lm", lm.theta0, R)
    with pytest.raises(ValueError, match="theta must have shape"):
        log_ratio(lm, lm.theta0[:-1], lm.theta0)
    with pytest.raises(TypeError, match="integrand must be a function"):
        product_rule_terms(lm, lm.theta0, R)
    with pytest.raises(ValueError, match="integrand must return a tensor of shape"):
        product_rule_terms(lm, lm.theta0, lambda th: R[:-1])
    with pytest.raises(ValueError, match="must be finite"):
        product_rule_terms(lm, lm.theta0, lambda th: R / 0.0)


def test_wrong_K_and_bad_mdp():
    with pytest.raises(ValueError, match="K must be >= 2"):
        environment_gradient(False, K=1)
    with pytest.raises(ValueError, match="M must be >= 2"):
        environment_gradient(False, M=0)
    with pytest.raises(TypeError, match="parametrised must be a bool"):
        environment_gradient("yes")
    with pytest.raises(ValueError, match="K must be >= 2"):
        instances(kl_penalty_direct_term, 1)
    with pytest.raises(ValueError, match="K must be >= 2"):
        TwoStepMDP(K=1)
    with pytest.raises(ValueError, match="M must equal K"):
        TwoStepMDP(K=2, M=3, coupling=1.0)
    mdp = TwoStepMDP()
    with pytest.raises(ValueError, match="theta must be a torch.Tensor of shape"):
        mdp.objective_gradient(torch.zeros(3))
