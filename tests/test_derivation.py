"""The Derivation record, the canonicalisers and the symbolic softmax policy."""

import pytest
import sympy as sp

from derivations import Derivation, DerivationError, IndexedSoftmax, SoftmaxPolicy, is_zero, reason_to_latex
from derivations.proofs import (
    Argmin,
    at_values,
    by_lemma,
    holds,
    interval_points,
    is_argmin,
    minimum_over,
    numerically,
    on_regions,
    same_solutions,
)
from derivations.score_function import expected_score, instances, log_derivative_trick

x, y = sp.symbols("x y", positive=True)


def test_chain_and_rendering():
    d = Derivation("demo", start=(x + y) ** 2, assumptions=["$x, y > 0$"])
    d.then(x**2 + 2 * x * y + y**2, "expand the square")
    d.then(sp.log(sp.exp(x**2 + 2 * x * y + y**2)), "log of exp")
    assert d.verify().verified
    assert d.lhs == (x + y) ** 2 and d.rhs == sp.log(sp.exp(x**2 + 2 * x * y + y**2))
    latex = d.to_latex()
    assert latex.count(r"\\") == 1 and r"\text{expand the square}" in latex
    assert d._repr_latex_().startswith("$$")


def test_first_failing_step_is_named():
    d = Derivation("slip", start=x).then(x, "fine").then(2 * x, "the slip").then(2 * x, "fine again")
    with pytest.raises(DerivationError, match=r"step 2 \(the slip\)"):
        d.verify()
    assert not d.verified


def test_wrong_softmax_step_is_rejected():
    """Soundness: flipping a sign in the log-derivative trick must fail verification."""
    pol = IndexedSoftmax()
    R = sp.IndexedBase("R", real=True)
    d = Derivation("wrong", unfold=pol.definitions)
    d.step(
        sp.Derivative(sp.Sum(pol.prob(pol.a) * R[pol.a], (pol.a, 1, pol.K)), pol.theta[pol.j]),
        pol.expectation(lambda a: R[a] * (sp.KroneckerDelta(a, pol.j) + pol.prob(pol.j))),
        "a wrong score",
    )
    with pytest.raises(DerivationError):
        d.verify()
    for inst in instances(lambda: d, 3):
        with pytest.raises(DerivationError):
            inst.verify()


def test_inequality_steps_need_a_proof_of_the_displayed_claim():
    d = Derivation("ineq").step(x**2 + 1, 2 * x, "AM-GM", relation=">=")
    with pytest.raises(DerivationError, match="needs a proof"):
        d.verify()
    ok = Derivation("ineq").step(x**2 + 1, 2 * x, "AM-GM", relation=">=", proof=holds)
    assert ok.verify().proved_by() == {"sign decided": 1}
    bad = Derivation("ineq").step(x, 2 * x, "false", relation=">=", proof=holds)
    with pytest.raises(DerivationError):
        bad.verify()
    assert Derivation("t").step(x, x + 1, "r", relation="<=", proof=holds).verify().verified


def test_perturbing_the_displayed_rhs_breaks_every_kind_of_proof():
    r = sp.Symbol("r", real=True)
    eps = sp.Symbol("varepsilon", positive=True)
    steps = [
        Derivation("regions").step(sp.Min(r, 1 + eps) - r, -sp.Max(r - 1 - eps, 0), "cases",
                                   proof=on_regions((r, [1 + eps]))),
        Derivation("lemma").step(sp.Max(r - 2, 0), sp.Max(r - 1, 0), "cases", relation="<=",
                                 proof=on_regions((r, [1, 2]))),
        Derivation("minimum").step(x - 1 - sp.log(x), sp.Integer(0), "min", relation=">=",
                                   proof=minimum_over(x, sp.Interval.open(0, sp.oo))),
        Derivation("number").step(sp.pi, sp.Integer(3), "pi > 3", relation=">", proof=numerically()),
        Derivation("sets").step(2 * r + 2 < 0, r < -1, "solve", relation="<=>", proof=same_solutions(r)),
        Derivation("argmin").step(Argmin((y - 3) ** 2 + x, y), sp.Integer(3), "stationary", proof=is_argmin),
    ]
    for d in steps:
        assert d.verify().verified, d.title
        with pytest.raises(DerivationError):
            d.perturbed(0).verify()


def test_a_lemma_instantiated_termwise():
    u, v = sp.Symbol("u", real=True), sp.Symbol("v", positive=True)
    lemma = Derivation("lemma").step(sp.Max(u - 2 * v, 0), sp.Max(u - v, 0), "cases", relation="<=",
                                     proof=on_regions((u, [v, 2 * v])))
    a, K = sp.symbols("a K", integer=True, positive=True)
    P, M = sp.IndexedBase("P", positive=True), sp.IndexedBase("M", positive=True)
    S = lambda e: sp.Sum(e, (a, 1, K))
    d = Derivation("sum").step(S(sp.Max(P[a] - 2 * M[a], 0)), S(sp.Max(P[a] - M[a], 0)), "termwise", relation="<=",
                               proof=by_lemma(lemma, {u: P[a], v: M[a]}, termwise=True))
    assert d.verify().proved_by() == {"lemma": 1}
    with pytest.raises(DerivationError):
        d.perturbed(0).verify()
    wrong = Derivation("sum").step(S(sp.Max(P[a] - 2 * M[a], 0)), S(sp.Max(P[a] - 3 * M[a], 0)), "termwise", relation="<=",
                                   proof=by_lemma(lemma, {u: P[a], v: M[a]}, termwise=True))
    with pytest.raises(DerivationError):
        wrong.verify()


def test_proofs_must_see_the_claim_and_regions_must_cover():
    with pytest.raises(ValueError, match="provably increasing"):
        interval_points(x, [2, 1])
    with pytest.raises(ValueError, match="at least one value"):
        at_values(x, [])
    with pytest.raises(ValueError, match="at least one cut"):
        on_regions()
    with pytest.raises(TypeError, match="a hand-made point is refused"):
        on_regions({x: 1})
    with pytest.raises(TypeError, match="proof must be built by derivations.proofs"):
        Derivation("t").step(x, x, "r", relation="<=", proof=3)


def test_a_derivative_of_an_opaque_function_of_other_variables_is_refused():
    theta, theta_j = sp.symbols("theta theta_j")
    pi = sp.Function("pi")(theta)
    d = Derivation("vacuous").step(sp.Derivative(pi, theta_j), sp.Integer(0), "looks like a Jacobian entry")
    with pytest.raises(DerivationError, match="free of theta_j"):
        d.verify()


def test_statement_of_a_chain():
    d = Derivation("chain", start=x**2 + 1).then(x**2 + 1, "same").then(2 * x, "AM-GM", relation=">=", proof=holds)
    assert d.statement() == (x**2 + 1, ">=", 2 * x)
    with pytest.raises(ValueError, match="do not chain"):
        Derivation("mixed", start=x).then(x + 1, "a", relation="<=", proof=holds).then(x, "b", relation=">=", proof=holds).statement()


def test_matrix_steps():
    pol = SoftmaxPolicy(3)
    for a in range(3):
        d = Derivation("score").step(pol.score_by_differentiation(a), pol.score(a), "softmax closed form")
        assert d.verify().verified
    assert is_zero(pol.expectation(pol.score)) is not None
    R = pol.symbols("R", real=True)
    grad = pol.gradient(pol.expectation(lambda a: R[a]))
    assert is_zero(grad - pol.expectation(lambda a: R[a] * pol.score(a))) is not None


@pytest.mark.parametrize("make", [expected_score, log_derivative_trick])
def test_first_derivations_general_and_fixed_K(make):
    assert make().verify().verified
    for K in (2, 3, 4):
        assert all(d.verify().verified for d in instances(make, K))


def test_bad_input():
    with pytest.raises(TypeError, match="title must be a non-empty str"):
        Derivation("")
    with pytest.raises(TypeError, match="unfold must be a Definitions"):
        Derivation("t", unfold=3)
    with pytest.raises(ValueError, match="then\\(\\) needs a start"):
        Derivation("t").then(x, "r")
    with pytest.raises(ValueError, match="relation must be one of"):
        Derivation("t").step(x, x, "r", relation="~")
    with pytest.raises(TypeError, match="reason must be a non-empty str"):
        Derivation("t").step(x, x, "")
    with pytest.raises(ValueError, match="unmatched"):
        reason_to_latex("a $b")
    with pytest.raises(ValueError, match="K must be >= 2"):
        SoftmaxPolicy(1)
    with pytest.raises(TypeError, match="K must be an int"):
        SoftmaxPolicy(2.0)
    with pytest.raises(ValueError, match="a must be an action index"):
        SoftmaxPolicy(2).score(2)
    with pytest.raises(TypeError, match="f must be a function"):
        SoftmaxPolicy(2).expectation(3)
    with pytest.raises(TypeError, match="f must be a function"):
        IndexedSoftmax().expectation(3)
    with pytest.raises(ValueError, match="K must be >= 2"):
        instances(expected_score, 1)
    with pytest.raises(TypeError, match="make must be a function"):
        instances(None, 3)


def test_solution_sets_of_memberships_and_proofs_on_regions():
    """same_solutions reads ``x ∈ S`` and and/or/not; on_regions(inner=...) proves each region's displayed claim."""
    r = sp.Symbol("r", real=True)
    c = sp.Symbol("c", real=True)
    ok = same_solutions(r)
    step = lambda lhs, rhs, proof: Derivation("sets").step(lhs, rhs, "solve", relation="<=>", proof=proof)
    assert step(r**2 < 4, sp.Contains(r, sp.Interval.open(-2, 2)), ok).verify().verified
    assert step(r**2 >= 4, sp.Or(r <= -2, r >= 2), ok).verify().verified
    assert step(r**2 >= 4, sp.Not(sp.Contains(r, sp.Interval.open(-2, 2))), ok).verify().verified
    with pytest.raises(DerivationError):
        step(r**2 < 4, sp.Contains(r, sp.Interval(-2, 2)), ok).verify()  # closed: the endpoints differ
    on_positive = same_solutions(r)
    good = Derivation("sets").step(r * (r - c) < 0, sp.Contains(r, sp.Interval.open(0, c)), "solve", relation="<=>", proof=on_positive, given=(c > 0,))
    assert good.verify().proved_by() == {"solution sets": 1}
    with pytest.raises(DerivationError):
        good.perturbed(0).verify()
    with pytest.raises(DerivationError):  # the interval of the other region
        Derivation("sets").step(r * (r - c) < 0, sp.Contains(r, sp.Interval.open(c, 0)), "solve", relation="<=>", proof=on_positive, given=(c > 0,)).verify()
    both = on_regions((c, [0]), inner=same_solutions(r))
    assert step(r * (r - c) < 0, sp.Or(sp.Contains(r, sp.Interval.open(0, c)), sp.Contains(r, sp.Interval.open(c, 0))), both).verify().verified
    with pytest.raises(TypeError, match="inner must be a proof"):
        on_regions((c, [0]), inner=3)


def test_a_proof_of_nothing_is_refused():
    with pytest.raises(TypeError, match="a bare function is not a proof"):
        Derivation("t").step(x, x + 1, "r", relation="<=", proof=lambda: True)
    with pytest.raises(TypeError, match="a bare function is not a proof"):
        Derivation("t").step(x, x + 1, "r", relation="<=", proof=lambda claim: True)


def test_a_lemma_premise_must_hold_for_the_instance():
    from derivations.trust_region import positive_part_lemma

    u, v, c = sp.symbols("x y c", real=True)
    lemma = positive_part_lemma()
    assert lemma.premises and lemma.assumptions[0].startswith("$")
    c = next(iter(p.lhs for p in lemma.premises if p.lhs.name == "C"))
    P, M = sp.symbols("P M", positive=True)
    claim = (sp.Max(P - c * M, 0), sp.Max(P - M, 0))
    mapping = {s: t for s, t in zip(sorted(lemma.lhs.free_symbols - {c}, key=str), (P, M))}
    stated = Derivation("with the premise", assumptions=[c >= 1]).step(*claim, "lemma", relation="<=", proof=by_lemma(lemma, mapping))
    assert stated.verify().verified
    unstated = Derivation("without it").step(*claim, "lemma", relation="<=", proof=by_lemma(lemma, mapping))
    with pytest.raises(DerivationError):
        unstated.verify()
    half = Derivation("c = 1/2").step(sp.Max(P - M / 2, 0), sp.Max(P - M, 0), "lemma", relation="<=",
                                      proof=by_lemma(lemma, {**mapping, c: sp.Rational(1, 2)}))
    with pytest.raises(DerivationError):
        half.verify()


def test_a_replaced_step_keeps_the_premises_so_a_slip_fails_for_its_own_reason():
    from derivations.trust_region import tv_bound

    d = tv_bound()
    same = d.replaced(1, rhs=d.steps[1].rhs)
    assert same.premises == d.premises and same.verify().verified
    with pytest.raises(DerivationError, match="step 2"):
        d.replaced(1, rhs=d.steps[1].rhs / 2).verify()
    with pytest.raises(IndexError, match="index must name a step"):
        d.replaced(9, rhs=x)


def test_logs_split_only_where_the_signs_allow():
    """log(uv) = log u + log v is false for u, v < 0: the canonicalisers must not force it."""
    u, v = sp.symbols("u v", real=True)
    with pytest.raises(DerivationError):
        Derivation("forced").step(sp.log(u * v), sp.log(u) + sp.log(v), "log of a product").verify()
    assert Derivation("positive").step(sp.log(x * y), sp.log(x) + sp.log(y), "log of a product").verify().verified


def test_subs_keeps_the_cursor_of_the_instance():
    """A ``then`` after ``subs`` continues from the substituted right-hand side (it continued from the old one)."""
    d = Derivation("instance", start=x + y).then(y + x, "commute").subs({y: 1})
    d.then(x + 1, "the same")
    assert d.steps[-1].lhs == x + 1
    assert d.statement() == (x + 1, "=", x + 1) and d.verify().verified


def test_replaced_keeps_the_cursor():
    """A ``then`` after ``replaced`` continues from the last right-hand side (it had no cursor and raised)."""
    d = Derivation("double", start=2 * x).then(x + x, "double")
    e = d.replaced(0, rhs=x * 2)
    e.then(x + x, "again")
    assert [st.lhs for st in e.steps] == [2 * x, 2 * x] and e.verify().verified
    f = Derivation("more", start=x).then(x, "same").then(x, "same").replaced(0, rhs=x)
    assert f.then(x, "again").steps[-1].lhs == x


def test_a_chain_states_its_weakest_relation():
    """``>`` then ``>=`` states ``>=``; all strict states ``>``; equalities do not weaken."""
    d = Derivation("chain", start=x + 2).then(x + 1, "drop 1", relation=">", proof=holds).then(x + 1, "same", relation=">=", proof=holds)
    assert d.statement() == (x + 2, ">=", x + 1)
    strict = Derivation("strict", start=x + 2).then(x + 1, "drop 1", relation=">", proof=holds).then(x, "drop 1", relation=">", proof=holds)
    assert strict.statement() == (x + 2, ">", x)
    mixed = Derivation("mixed", start=x + 2).then(x + 2, "same").then(x, "drop 2", relation=">", proof=holds)
    assert mixed.statement() == (x + 2, ">", x)
