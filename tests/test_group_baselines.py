"""Group baselines: the i.i.d. group algebra against enumeration, closed forms, bad input."""

import copy
from functools import partial

import numpy as np
import pytest
import sympy as sp
import torch

from derivations import group_baselines as gb
from derivations.iid_groups import Expect, IIDGroup
from numeric import (
    TinyLM,
    brute_force_group_gradient,
    default_reward,
    exact_group_gradient,
    group_advantage_weights,
    group_mean_advantages,
    group_zscore_advantages,
    grpo_weight,
    leave_one_out_baselines,
    rloo_advantages,
)

# -- the i.i.d. group algebra -----------------------------------------------------------------


def _expressions(grp):
    R, s, i, j, G = grp.R, grp.s, grp.i, grp.j, grp.G
    k = sp.Symbol("k", integer=True, positive=True)
    return [
        (R[i] - grp.mean_others(i)) * s[i],
        (R[i] - grp.mean()) * s[i],
        (R[i] - grp.mean()) ** 2 * s[i],
        sp.Sum((R[j] - grp.mean()) ** 2, (j, 1, G)),
        R[i] * s[k] * grp.total() ** 2,
        grp.total("s") * grp.total(),
    ]


@pytest.mark.parametrize("K", [2, 3])
def test_expectation_operator_equals_enumeration(K):
    grp = IIDGroup()
    outcomes = [{"R": sp.Symbol(f"r{k}"), "s": sp.Symbol(f"t{k}")} for k in range(K)]
    q = sp.symbols(f"q0:{K - 1}", positive=True)
    probs = [*q, 1 - sum(q)]
    for expr in _expressions(grp):
        symbolic = grp.expect(expr)
        for G in (2, 3):
            if len(grp._free_indices(expr)) > G:
                continue
            diff = grp.brute_force(expr, G, outcomes, probs) - grp.evaluate(symbolic, outcomes, probs, G)
            assert sp.expand(diff) == 0, (expr, G)


def test_expectation_operator_uses_independence_only_for_distinct_answers():
    grp = IIDGroup()
    R, i = grp.R, grp.i
    k = sp.Symbol("k", integer=True, positive=True)
    ER, ER2 = Expect(grp.plain["R"]), Expect(grp.plain["R"] ** 2)
    assert grp.expect(R[i] * R[i]) == ER2
    assert grp.expect(R[i] * R[k]) == ER**2
    # E[R_i * sum_j R_j] = E[R^2] + (G - 1) E[R]^2: the j = i case is not p^2
    assert sp.expand(grp.expect(R[i] * grp.total()) - (ER2 + (grp.G - 1) * ER**2)) == 0


def test_expectation_operator_rejects_what_it_cannot_do():
    grp = IIDGroup()
    R, i, j = grp.R, grp.i, grp.j
    with pytest.raises(ValueError, match="polynomial"):
        grp.expect(sp.sqrt(R[i]))
    with pytest.raises(ValueError, match="1..G"):
        grp.expect(sp.Sum(R[j], (j, 2, grp.G)))
    with pytest.raises(TypeError, match="names"):
        IIDGroup(("R", "1x"))
    with pytest.raises(ValueError, match="distinct"):
        IIDGroup(("R", "R"))
    with pytest.raises(TypeError, match="G must be an int"):
        IIDGroup(G=2.0)
    with pytest.raises(ValueError, match="G must be >= 1"):
        IIDGroup(G=0)
    with pytest.raises(ValueError, match="name must be one of"):
        grp.total("Q")
    with pytest.raises(ValueError, match="G must be >= 1"):
        grp.brute_force(R[i], 0, [{"R": 1, "s": 0}], [1])
    with pytest.raises(ValueError, match="equal length"):
        grp.brute_force(R[i], 2, [{"R": 1, "s": 0}], [])


@pytest.mark.parametrize(
    ("probs", "match"),
    [([0.6, 0.5], "sum to one"), ([1.2, -0.2], "non-negative"), ([sp.Rational(1, 2), sp.Rational(1, 3)], "sum to one"), ([sp.nan, 1], "finite"), (["a", 1], "probs must hold numbers")],
)
def test_group_algebra_refuses_a_distribution_that_is_not_one(probs, match):
    """Probabilities summing to 1.1, or negative, used to be accepted by brute_force and evaluate."""
    grp = IIDGroup()
    outcomes = [{"R": 1, "s": 0}, {"R": 0, "s": 1}]
    for call in (lambda: grp.brute_force(grp.R[grp.i], 2, outcomes, probs), lambda: grp.evaluate(Expect(grp.plain["R"]), outcomes, probs, 2)):
        with pytest.raises((ValueError, TypeError), match=match):
            call()
    with pytest.raises(ValueError, match="outcomes must be mappings with exactly the keys"):
        grp.brute_force(grp.R[grp.i], 2, [{"R": 1}, {"R": 0, "s": 1}], [0.5, 0.5])


# -- derivations -------------------------------------------------------------------------------


def rendered(call: str) -> str:
    """The chapter's ``.. derivation::`` source of ``derivations.group_baselines.<call>``."""
    return f"derivations.group_baselines.{call}"


SYMBOLIC_G = ["leave_one_out_unbiased()", "mean_including_self()", "rloo_is_scaled_centred()", "equal_rewards_vanish()", "binary_group_variance()"]


@pytest.mark.parametrize("call", [pytest.param(c, marks=pytest.mark.reads_derivation(rendered(c))) for c in SYMBOLIC_G])
def test_symbolic_G_derivations_verify(call, verified_derivation):
    assert verified_derivation(rendered(call)).verified


@pytest.mark.parametrize("call", [pytest.param(c, marks=pytest.mark.reads_derivation(rendered(c))) for c in ("leave_one_out_unbiased()", "mean_including_self()")])
def test_derivation_results(call, verified_derivation):
    G, d = gb._group().G, verified_derivation(rendered(call))
    if call == "leave_one_out_unbiased()":
        assert d.rhs == gb.GRAD_J
    else:
        assert sp.simplify(d.rhs - (G - 1) / G * gb.GRAD_J) == 0


def test_a_wrong_baseline_fails_to_verify():
    from derivations import DerivationError

    d = gb._centred_update(lambda grp: grp.mean(), "wrong", gb.GRAD_J, "claims unbiased")
    with pytest.raises(DerivationError, match="claims unbiased"):
        d.verify()


@pytest.mark.parametrize(("G", "std"), [pytest.param(G, std, marks=pytest.mark.reads_derivation(rendered("grpo_weight_derivation(4)")) if (G, std) == (4, "population") else ())
                                          for std in ("population", "bessel") for G in (2, 3, 4, 5, 6)])
def test_grpo_weight_derivation_enumerates(G, std):
    assert gb.grpo_weight_derivation(G, std).verify().verified



@pytest.mark.reads_derivation(rendered("rloo_is_scaled_centred()"))  # its third slip keeps the chapter's first step: that verdict is shared
def test_the_group_derivations_reject_plausible_slips():
    """(G-1)/G replaced by G/(G-1), and a leave-one-out mean that forgets to remove R_i, both fail."""
    from derivations import DerivationError

    G = gb._group().G
    with pytest.raises(DerivationError, match="claims G/"):
        gb._centred_update(lambda grp: grp.mean(), "wrong", G / (G - 1) * gb.GRAD_J, "claims G/(G-1)").verify()
    with pytest.raises(DerivationError, match="claims unbiased"):
        gb._centred_update(lambda grp: grp.total() / (grp.G - 1), "wrong", gb.GRAD_J, "claims unbiased").verify()
    d = gb.rloo_is_scaled_centred()
    with pytest.raises(DerivationError, match="step 2 "):
        d.replaced(1, (G - 1) / G * (d.steps[1].rhs / (G / (G - 1)))).verify()


@pytest.mark.reads_derivation(rendered("grpo_conditioning()"))
def test_grpo_conditioning_holds_for_symbolic_G_with_no_badge(verified_derivation):
    d = verified_derivation(rendered("grpo_conditioning()"))
    assert d.steps[0].proved_by == "equal integrands (cases R[i] in {0, 1})"
    assert all(st.badge is None for st in d.steps)
    G = IIDGroup().G
    assert d.lhs.has(G) is False and d.rhs.has(G) and not G.is_number


@pytest.mark.reads_derivation(rendered("grpo_conditioning()"))
def test_grpo_conditioning_rejects_swapped_rewards_a_shifted_count_and_the_wrong_moment(verified_derivation):
    """Each slip fails the step that displays it, and the true step beside it verifies."""
    from derivations import DerivationError

    d = verified_derivation(rendered("grpo_conditioning()"))
    R, s = sp.Symbol("R", real=True), sp.Symbol("s", real=True)
    a, k, Pr = gb._a, gb._k, gb.OthersSucceedProbability
    swapped = d.steps[0].rhs.xreplace({a(1, k): a(0, k), a(0, k): a(1, k)})
    shifted = d.steps[2].rhs.xreplace({Pr(k): Pr(k + 1)})
    one_moment = d.steps[2].rhs.xreplace({Expect((1 - R) * s): Expect(R * s)})
    binomial_G = d.steps[2].rhs.xreplace({Pr(k): Pr(k) * (1 - gb.P)})  # one factor (1 - p) too many
    for index, wrong in ((0, swapped), (2, shifted), (2, one_moment), (2, binomial_G)):
        assert wrong != d.steps[index].rhs
        with pytest.raises(DerivationError, match=f"step {index + 1} "):
            d.replaced(index, wrong).verify()
    swapped_back = d.steps[0].rhs.xreplace({a(1, k): a(0, k), a(0, k): a(1, k)}).xreplace({a(1, k): a(0, k), a(0, k): a(1, k)})
    assert d.replaced(0, swapped_back).verify().verified


@pytest.mark.reads_derivation(rendered("grpo_conditioning()"))
def test_grpo_conditioning_cannot_drop_the_range_of_the_count(verified_derivation):
    """Without the premise S_-i <= G - 1 the indicator sum is not a(R_i, S_-i): step 1 is refused."""
    from derivations import Derivation, DerivationError

    d = verified_derivation(rendered("grpo_conditioning()"))
    S, G = gb.OthersSucceed(IIDGroup().i), IIDGroup().G
    kept = [c for c in d.premises if c != (S <= G - 1)]
    assert len(kept) == len(d.premises) - 1
    for premises, holds in ((d.premises, True), (kept, False)):
        e = Derivation(d.title, assumptions=list(premises), unfold=d.unfold)
        e.steps = [copy.copy(st) for st in d.steps]  # fresh steps: verify() records its verdict on each, and d is shared
        if holds:
            assert e.verify().verified
            continue
        with pytest.raises(DerivationError, match=r"step 1 .*cases R\[i\] in \{0, 1\} proof does not establish it"):
            e.verify()


def _binary_outcomes():
    t = sp.symbols("t0:3", real=True)
    q = sp.symbols("q0:2", positive=True)
    return [{"R": 1, "s": t[0]}, {"R": 1, "s": t[1]}, {"R": 0, "s": t[2]}], [q[0], q[1], 1 - q[0] - q[1]]


@pytest.mark.parametrize("G", [2, 3])
def test_the_independence_rule_equals_enumeration(G):
    """E[h(S_-i) g(R_i, s_i)] = E[h(S_-i)] E[g(R, s)] against all 3^G outcomes, E[h] enumerated too; with answer m it does not factorise."""
    from derivations.iid_groups import OthersTotal

    grp = IIDGroup()
    R, s, i = grp.R, grp.s, grp.i
    outcomes, probs = _binary_outcomes()
    S = OthersTotal(i)
    for k in range(G):
        one = sp.KroneckerDelta(S, k)
        for expr in (one * R[i] * s[i], one * (1 - R[i]) * s[i], S**2 * R[i] * s[i], one * S * R[i] ** 2 * s[i]):
            symbolic = grp.expect(expr).replace(lambda e: isinstance(e, Expect) and e.has(S), lambda e: grp.brute_force(e.args[0], G, outcomes, probs))
            assert sp.expand(grp.brute_force(expr, G, outcomes, probs) - grp.evaluate(symbolic, outcomes, probs, G)) == 0, (expr, G)
    m = sp.Symbol("m", integer=True, positive=True)
    mixed = sp.KroneckerDelta(S, 1) * R[m] * s[m]
    with pytest.raises(ValueError, match="mixes it with answer m"):
        grp.expect(mixed)
    naive = grp.brute_force(sp.KroneckerDelta(S, 1), G, outcomes, probs) * grp.evaluate(Expect(grp.plain["R"] * grp.plain["s"]), outcomes, probs)
    assert sp.expand(grp.brute_force(mixed, G, outcomes, probs) - naive) != 0


@pytest.mark.parametrize("G", [3, pytest.param(4, marks=pytest.mark.reads_derivation(rendered("grpo_weight_derivation(4)")))])
def test_grpo_weight_derivation_rejects_the_other_std_and_a_wrong_form(G):
    """Displaying the Bessel weight under the population std (or a weight off by one term) fails the pattern sum."""
    from derivations import DerivationError

    d = gb.grpo_weight_derivation(G)
    bessel = sp.Add(*gb._weight_terms(G, "bessel"), evaluate=False) * gb.GRAD_P
    dropped = sp.Add(*gb._weight_terms(G, "population")[1:], evaluate=False) * gb.GRAD_P
    for wrong in (bessel, dropped):
        with pytest.raises(DerivationError, match="step 1 "):
            d.replaced(0, wrong).verify()


@pytest.mark.reads_derivation(rendered("grpo_weight_closed_forms((2, 3, 4, 5))"))  # the chapter's steps for G = 2..5 are this test's first four: verdicts shared
def test_grpo_closed_forms_are_labelled_simplified_and_checked():
    """omega(p, 2) = 1, omega(p, 3) = sqrt(2) exactly; omega(p, G) -> sqrt(G - 1) at p = 0; a sign slip in omega(p, 4) fails."""
    from derivations import DerivationError

    d = gb.grpo_weight_closed_forms((2, 3, 4, 5, 6)).verify()
    w = sp.Function("omega")
    assert [st.lhs for st in d.steps] == [w(gb.P, G) for G in (2, 3, 4, 5, 6)]
    assert [st.rhs for st in d.steps][:2] == [1, sp.sqrt(2)]
    for st, G in zip(d.steps, (2, 3, 4, 5, 6)):
        assert st.rhs.subs(gb.P, 0) == sp.sqrt(G - 1)
        assert abs(float(st.rhs.subs(gb.P, sp.Rational(3, 10))) - float(grpo_weight(0.3, G))) < 1e-12
    four = d.steps[2].rhs
    for wrong in (sp.sqrt(3), four.subs(sp.sqrt(3), -sp.sqrt(3)) + 2 * sp.sqrt(3), 2 * sp.sqrt(3) - four):
        with pytest.raises(DerivationError, match="step 3 "):
            d.replaced(2, wrong).verify()
    with pytest.raises(ValueError, match="G_values must be >= 2"):
        gb.grpo_weight_closed_forms((1, 2))
    with pytest.raises(ValueError, match="at least one group size"):
        gb.grpo_weight_closed_forms(())


@pytest.mark.parametrize("make", [lambda: gb.grpo_weight_derivation(2, "bessel"), lambda: gb.grpo_weight_derivation(5, "bessel"),
                                  lambda: gb.grpo_weight_derivation(5), lambda: gb.grpo_weight_closed_forms((2, 4, 6), "bessel")])
def test_every_step_of_the_unrendered_grpo_variants_fails_when_perturbed(make):
    """The chapter renders population std and G = 4; the other variants' steps must be as sound."""
    from derivations import DerivationError

    d, delta = make(), sp.Symbol("delta", positive=True)
    assert d.verify().verified
    for st in d.steps:
        with pytest.raises(DerivationError):
            d.replaced(d.steps.index(st), st.perturbed(delta).rhs).verify()


def test_grpo_population_differences_closed_form():
    for G in range(2, 17):
        for k in range(G):
            others = [1] * k + [0] * (G - 1 - k)
            diff = gb.zscore_advantage([1, *others]) - gb.zscore_advantage([0, *others])
            closed = sp.sqrt(sp.Rational(G - 1 - k, k + 1)) + sp.sqrt(sp.Rational(k, G - k))
            assert sp.expand(diff - closed) == 0, (G, k)


def test_grpo_bessel_is_scaled_population():
    """omega_bessel(p, G) = sqrt((G-1)/G) omega_population(p, G): each weight is the sum of its Bernstein terms, and
    (the Bernstein polynomials being linearly independent) the identity holds iff every coefficient scales so."""
    for G in range(2, 17):
        for std in ("population", "bessel"):
            bernstein = [c * gb.P**k * (1 - gb.P) ** (G - 1 - k) for k, c in enumerate(gb.grpo_weight_coefficients(G, std))]
            assert gb.grpo_weight(G, std) == sp.Add(*bernstein), (G, std)
        scale = sp.sqrt(sp.Rational(G - 1, G))
        pairs = zip(gb.grpo_weight_coefficients(G, "bessel"), gb.grpo_weight_coefficients(G), strict=True)
        assert all(sp.expand(bessel - scale * population) == 0 for bessel, population in pairs), G


def test_grpo_weight_matches_convolution_engine_off_the_toy_lm():
    from numeric import binary_reward_weight

    for G in (2, 5, 16):
        for p in (0.05, 0.5, 0.93):
            for std in ("population", "bessel"):
                assert abs(grpo_weight(p, G, std) - binary_reward_weight(p, G, partial(group_zscore_advantages, eps=0.0, std=std))) < 1e-12


def test_grpo_weight_large_G_approaches_inverse_std():
    from numeric import binary_reward_weight

    gaps = [abs(binary_reward_weight(0.3, G, partial(group_zscore_advantages, eps=0.0)) * np.sqrt(0.3 * 0.7) - 1) for G in (16, 64, 256)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.01


def test_derivation_bad_input():
    with pytest.raises(ValueError, match="G must be >= 2"):
        gb.grpo_weight(1)
    with pytest.raises(TypeError, match="G must be an int"):
        gb.grpo_weight(2.0)
    with pytest.raises(ValueError, match="std must be one of"):
        gb.grpo_weight(3, "sample")
    with pytest.raises(ValueError, match="G must be <= 8"):
        gb.grpo_weight_derivation(9)
    with pytest.raises(ValueError, match="rewards must hold at least 2 answers"):
        gb.zscore_advantage([1])


# -- batched helpers ---------------------------------------------------------------------------

HELPERS = [leave_one_out_baselines, group_mean_advantages, rloo_advantages, group_zscore_advantages]


@pytest.mark.parametrize("fn", HELPERS)
def test_helpers_return_the_callers_kind_and_batch(fn):
    x = np.random.default_rng(0).integers(0, 3, size=(2, 3, 5)).astype(float)
    out_np, out_t = fn(x), fn(torch.from_numpy(x))
    assert isinstance(out_np, np.ndarray) and isinstance(out_t, torch.Tensor)
    assert out_np.shape == x.shape
    assert np.abs(out_np - out_t.numpy()).max() < 1e-15
    flat = np.stack([fn(row) for row in x.reshape(-1, 5)]).reshape(x.shape)
    assert np.abs(flat - out_np).max() < 1e-15


@pytest.mark.parametrize("fn", HELPERS)
def test_helpers_bad_input(fn):
    with pytest.raises(ValueError, match="finite"):
        fn(np.array([1.0, np.nan, 0.0]))
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        fn([1.0, 0.0])
    with pytest.raises(TypeError, match="boolean"):
        fn(np.array([True, False]))
    with pytest.raises(ValueError, match="group dimension"):
        fn(np.array(1.0))


@pytest.mark.parametrize("fn", [leave_one_out_baselines, rloo_advantages])
def test_leave_one_out_needs_two_answers(fn):
    with pytest.raises(ValueError, match="G >= 2"):
        fn(np.array([[1.0], [0.0]]))


def test_zscore_options():
    x = np.array([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="eps must be >= 0"):
        group_zscore_advantages(x, eps=-1e-8)
    with pytest.raises(ValueError, match="std must be one of"):
        group_zscore_advantages(x, std="unbiased")
    with pytest.raises(ValueError, match="G >= 2"):
        group_zscore_advantages(np.array([1.0]), std="bessel")
    assert np.abs(group_zscore_advantages(np.array([0.1, 0.1, 0.1]), eps=0.0)).max() == 0.0


# -- exact group expectations ------------------------------------------------------------------


@pytest.mark.parametrize("probs", [[0.2, 0.3, 0.5], [0.0, 0.3, 0.7], [0.4, 0.0, 0.6]])
def test_group_advantage_weights_matches_enumeration_with_three_values(probs):
    """Against the sum over all 3^G groups; a value of probability 0 still has its conditional weight (the others never take it)."""
    values, probs = np.array([0.0, 0.5, 2.0]), np.array(probs)
    est = partial(group_zscore_advantages, eps=1e-3, std="bessel")
    for G in (2, 3, 4):
        tuples = np.array(np.meshgrid(*[range(3)] * G, indexing="ij")).reshape(G, -1).T
        A1 = est(values[tuples])[:, 0]
        weight = probs[tuples[:, 1:]].prod(1)
        expected = [float((A1 * weight)[tuples[:, 0] == a].sum()) for a in range(3)]
        assert np.abs(group_advantage_weights(values, probs, G, est) - expected).max() < 1e-14


def test_group_expectations_bad_input():
    v, q = np.array([0.0, 1.0]), np.array([0.5, 0.5])
    with pytest.raises(ValueError, match="sum to one"):
        group_advantage_weights(v, np.array([0.5, 0.6]), 3, rloo_advantages)
    with pytest.raises(ValueError, match="distinct"):
        group_advantage_weights(np.array([1.0, 1.0]), q, 3, rloo_advantages)
    with pytest.raises(ValueError, match="equal length"):
        group_advantage_weights(v, np.array([1.0]), 3, rloo_advantages)
    with pytest.raises(TypeError, match="advantages must be a function"):
        group_advantage_weights(v, q, 3, "rloo")
    with pytest.raises(ValueError, match="more than"):
        group_advantage_weights(np.arange(8.0), np.full(8, 1 / 8), 256, rloo_advantages)
    with pytest.raises(ValueError, match="G >= 2"):
        group_advantage_weights(v, q, 1, rloo_advantages)  # the estimator itself refuses G = 1
    with pytest.raises(ValueError, match="shape"):
        group_advantage_weights(v, q, 3, lambda r: r[:, :1])
    lm = TinyLM(V=3, L=2)
    R = default_reward(lm)
    with pytest.raises(ValueError, match="shape"):
        exact_group_gradient(lm, lm.theta0, R[:-1], 3, rloo_advantages)
    with pytest.raises(ValueError, match="finite"):
        exact_group_gradient(lm, lm.theta0, R * float("nan"), 3, rloo_advantages)
    with pytest.raises(ValueError, match="G must be <= 3"):
        brute_force_group_gradient(lm, lm.theta0, R, 4, rloo_advantages)
    with pytest.raises(TypeError, match="lm must be a TinyLM"):
        exact_group_gradient(None, lm.theta0, R, 3, rloo_advantages)


def test_binary_reward_weight_bad_input():
    from numeric import binary_reward_weight

    with pytest.raises(ValueError, match="p must lie in"):
        binary_reward_weight(1.2, 4, rloo_advantages)
    with pytest.raises(TypeError, match="advantages must be a function"):
        binary_reward_weight(0.5, 4, None)
    with pytest.raises(ValueError, match="G must be >= 1"):
        binary_reward_weight(0.5, 0, rloo_advantages)


def test_grpo_weight_bad_input():
    with pytest.raises(ValueError, match="G must be <= 16"):
        grpo_weight(0.5, 17)
    with pytest.raises(ValueError, match="p must lie in"):
        grpo_weight(1.5, 4)
    with pytest.raises(ValueError, match="std must be one of"):
        grpo_weight(0.5, 4, "pop")
    assert grpo_weight(np.array([0.2, 0.8]), 2).shape == (2,)


# -- numbers at the edges (issue 16) -------------------------------------------------------------


def test_group_weights_accept_float32_probabilities_that_sum_to_one_in_float32():
    """Ten float32 probabilities 0.1 sum to 1 + 1.5e-8 (exactly, in fp64): within float32, so accepted;
    the same error in float64 probabilities is refused."""
    q32 = np.full(10, 0.1, dtype=np.float32)
    values = np.arange(10.0)
    assert abs(float(q32.astype(np.float64).sum()) - 1.0) > 1e-12
    a = group_advantage_weights(values, q32, 4, rloo_advantages)
    np.testing.assert_allclose(a, values - 4.5, rtol=1e-6)
    with pytest.raises(ValueError, match="probs must be non-negative and sum to one"):
        group_advantage_weights(values, q32.astype(np.float64), 4, rloo_advantages)
    with pytest.raises(ValueError, match="probs must be non-negative and sum to one"):
        group_advantage_weights(values, np.full(10, 0.1001, dtype=np.float32), 4, rloo_advantages)


@pytest.mark.parametrize("fn", [leave_one_out_baselines, group_mean_advantages, rloo_advantages, group_zscore_advantages])
def test_group_helpers_refuse_the_meta_device_by_name(fn):
    with pytest.raises(ValueError, match="rewards is on the meta device"):
        fn(torch.zeros(2, 4, device="meta"))


def test_centred_rewards_is_the_public_cancellation_safe_centring():
    from numeric.group_baselines import centred_rewards

    r = torch.tensor([0.1 + 0.2, 0.3, 0.3, 0.3], dtype=torch.float64)
    assert float(centred_rewards(r)[0]) == pytest.approx(0.75 * ((0.1 + 0.2) - 0.3), rel=1e-12, abs=0)
