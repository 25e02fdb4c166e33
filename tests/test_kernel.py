"""Attacks on the proof kernel: each false derivation is refused, naming the step and the reason.

Each class of hole is tried with its near variants (strict vs non-strict,
covering vs non-covering, consistent vs contradictory, instance vs identity,
fact stated vs fact invented, a kernel proof vs a bare callable), and the true
near variant is accepted, so the suite cannot pass by refusing everything.
"""

import sys
from pathlib import Path

import pytest
import sympy as sp

from derivations import Definitions, Derivation, DerivationError, Expect, IndexedSoftmax, kernel
from derivations.proofs import (
    Argmin,
    at_values,
    by_cases,
    by_lemma,
    from_table,
    holds,
    is_argmin,
    numerically,
    on_regions,
    pointwise,
    to_tolerance,
)
from derivations.regions import resolve

x = sp.Symbol("x", real=True)
p = sp.Symbol("p", positive=True)
t = sp.Symbol("t", positive=True)


def refused(d: Derivation, *reason: str) -> str:
    """The refusal message of ``d.verify()``; it must name step 1 and each of ``reason``."""
    with pytest.raises(DerivationError) as info:
        d.verify()
    message = str(info.value)
    assert "step 1" in message and "does not hold" in message, message
    for part in reason:
        assert part in message, message
    assert not d.verified
    return message


def accepted(d: Derivation) -> Derivation:
    assert d.verify().verified
    return d


# ---------------------------------------------------------------- regions


def test_regions_must_cover_the_real_line():
    """The old hole: one region's point made Max(x, 0) = x verify.  A hand-made point is refused outright."""
    with pytest.raises(TypeError, match="hand-made point is refused"):
        on_regions({x: t})
    refused(Derivation("cover").step(sp.Max(x, 0), x, "cases", proof=on_regions((x, [0]))), "regions proof does not establish it")
    accepted(Derivation("cover").step(sp.Max(x, 0), x / 2 + sp.Abs(x) / 2, "cases", proof=on_regions((x, [0]))))


def test_a_claim_false_on_one_region_only_is_refused():
    """Max(x, 0) = 0 holds below and at 0, fails above: every region counts, not the first."""
    refused(Derivation("last region").step(sp.Max(x, 0), sp.Integer(0), "cases", proof=on_regions((x, [0]))), "regions")
    accepted(Derivation("half line", assumptions=[x <= 0]).step(sp.Max(x, 0), sp.Integer(0), "cases", proof=on_regions((x, [-1]))))


def test_the_domain_comes_from_assumptions_and_premises_not_from_the_caller():
    """Max(x, 0) = x is true for x > 0: a positive symbol or a premise gives the domain; a real x without one does not."""
    accepted(Derivation("positive").step(sp.Max(p, 0), p, "cases", proof=on_regions((p, [1]))))
    accepted(Derivation("premise", assumptions=[x > 0]).step(sp.Max(x, 0), x, "cases", proof=on_regions((x, [1]))))
    refused(Derivation("real").step(sp.Max(x, 0), x, "cases", proof=on_regions((x, [1]))), "regions")


def test_a_closed_end_is_a_region_of_its_own():
    """With x >= 0 the point x = 0 is admissible: |x| > 0 is refused there; with x > 0 it is accepted."""
    refused(Derivation("closed", assumptions=[x >= 0]).step(sp.Abs(x), sp.Integer(0), "cases", relation=">", proof=on_regions((x, [1]))))
    accepted(Derivation("open", assumptions=[x > 0]).step(sp.Abs(x), sp.Integer(0), "cases", relation=">", proof=on_regions((x, [1]))))


def test_breakpoints_outside_the_domain_or_out_of_order_are_refused():
    refused(Derivation("outside").step(sp.Max(p, 0), p, "cases", proof=on_regions((p, [-1]))), "does not lie inside the domain")
    refused(Derivation("order").step(sp.Max(x, 0), x / 2 + sp.Abs(x) / 2, "cases", proof=on_regions((x, [1, 0]))), "not provably increasing")


def test_a_kink_decided_strictly():
    """The branch x > 0 does not hold at x = 0: a claim that differs only at the kink is refused."""
    left, right = sp.Piecewise((1, x > 0), (0, True)), sp.Piecewise((1, x >= 0), (0, True))
    refused(Derivation("kink").step(left, right, "cases", proof=on_regions((x, [0]))))
    accepted(Derivation("kink", assumptions=[x > 0]).step(left, right, "cases", proof=on_regions((x, [1]))))
    assert resolve(left, {x: 0}) == 0 and resolve(right, {x: 0}) == 1
    # a condition SymPy leaves unevaluated (its two sides differ only in form): the resolver's own strict decision
    same = sp.Gt((p + 1) ** 2, p**2 + 2 * p + 1, evaluate=False)
    assert same.subs(p, 2) is sp.false and resolve(sp.Piecewise((1, same), (0, True))) == 0
    accepted(Derivation("unevaluated").step(sp.Piecewise((1, same), (0, True)), sp.Integer(0), "decide", proof=holds))
    refused(Derivation("unevaluated").step(sp.Piecewise((1, same), (0, True)), sp.Integer(1), "decide", proof=holds))
    weak = sp.Ge((p + 1) ** 2, p**2 + 2 * p + 1, evaluate=False)
    accepted(Derivation("unevaluated").step(sp.Piecewise((1, weak), (0, True)), sp.Integer(1), "decide", proof=holds))


# ---------------------------------------------------------------- relations


def test_a_strict_relation_needs_a_strict_proof():
    """x >= x holds, x > x does not; the chain of a step decided non-strictly cannot show a strict sign."""
    refused(Derivation("strict").step(p, p, "same", relation=">", proof=holds), "sign decided proof does not establish it")
    accepted(Derivation("non-strict").step(p, p, "same", relation=">=", proof=holds))
    accepted(Derivation("strict").step(p + 1, p, "one more", relation=">", proof=holds))
    refused(Derivation("square").step(x**2, sp.Integer(0), "a square", relation=">", proof=holds))
    accepted(Derivation("square").step(x**2, sp.Integer(0), "a square", relation=">=", proof=holds))


def test_a_chain_states_its_weakest_relation_and_a_lemma_uses_only_that():
    y = sp.Symbol("y", real=True)
    chain = Derivation("chain", start=y + 2).then(y + 1, "drop 1", relation=">", proof=holds).then(y + 1, "same", relation=">=", proof=holds)
    assert chain.statement() == (y + 2, ">=", y + 1)
    refused(Derivation("use").step(x + 2, x + 1, "lemma", relation=">", proof=by_lemma(chain, {y: x})),
            "establishes '>='", "does not prove the displayed '>'")
    accepted(Derivation("use").step(x + 2, x + 1, "lemma", relation=">=", proof=by_lemma(chain, {y: x})))


# ---------------------------------------------------------------- lemmas


def _positive_lemma() -> Derivation:
    return Derivation("p is positive").step(p, sp.Integer(0), "assumption", relation=">", proof=holds)


def test_a_lemma_instance_must_satisfy_the_symbol_assumptions():
    """A lemma about a positive p used at p = -1 would show -1 > 0."""
    refused(Derivation("abuse").step(sp.Integer(-1), sp.Integer(0), "lemma", relation=">", proof=by_lemma(_positive_lemma(), {p: -1})),
            "assumes p positive", "not provably positive")
    accepted(Derivation("use").step(sp.Integer(2), sp.Integer(0), "lemma", relation=">", proof=by_lemma(_positive_lemma(), {p: 2})))
    refused(Derivation("real").step(x, sp.Integer(0), "lemma", relation=">", proof=by_lemma(_positive_lemma(), {p: x})), "assumes p positive")
    accepted(Derivation("premise", assumptions=[x > 0]).step(x, sp.Integer(0), "lemma", relation=">", proof=by_lemma(_positive_lemma(), {p: x})))


def test_a_non_strict_lemma_does_not_prove_a_strict_claim():
    y = sp.Symbol("y", real=True)
    weak = Derivation("square").step(y**2, sp.Integer(0), "a square", relation=">=", proof=holds)
    refused(Derivation("strict").step(p**2, sp.Integer(0), "lemma", relation=">", proof=by_lemma(weak, {y: p})),
            "establishes '>='", "does not prove the displayed '>'")
    accepted(Derivation("non-strict").step(p**2, sp.Integer(0), "lemma", relation=">=", proof=by_lemma(weak, {y: p})))
    strong = Derivation("plus one").step(y**2 + 1, sp.Integer(0), "positive", relation=">", proof=holds)
    accepted(Derivation("weaker").step(x**2 + 1, sp.Integer(0), "lemma", relation=">=", proof=by_lemma(strong, {y: x})))


def test_a_termwise_strict_lemma_proves_only_a_non_strict_sum():
    y = sp.Symbol("y", real=True)
    a, K = sp.symbols("a K", integer=True, positive=True)
    P = sp.IndexedBase("P", real=True)
    strong = Derivation("plus one").step(y**2 + 1, y**2, "one more", relation=">", proof=holds)
    S = lambda e: sp.Sum(e, (a, 1, K))
    refused(Derivation("sum").step(S(P[a] ** 2 + 1), S(P[a] ** 2), "termwise", relation=">", proof=by_lemma(strong, {y: P[a]}, termwise=True)))
    accepted(Derivation("sum").step(S(P[a] ** 2 + 1), S(P[a] ** 2), "termwise", relation=">=", proof=by_lemma(strong, {y: P[a]}, termwise=True)))


def test_a_lemma_premise_must_hold_for_the_instance():
    c = sp.Symbol("c", real=True)
    lemma = Derivation("c at least one", assumptions=[c >= 1]).step(c, sp.Integer(0), "from c >= 1", relation=">", proof=holds)
    refused(Derivation("half").step(sp.Rational(1, 2), sp.Integer(0), "lemma", relation=">", proof=by_lemma(lemma, {c: sp.Rational(1, 2)})),
            "premise c >= 1 does not hold")
    accepted(Derivation("two").step(sp.Integer(2), sp.Integer(0), "lemma", relation=">", proof=by_lemma(lemma, {c: 2})))


# ---------------------------------------------------------------- premises


def test_contradictory_premises_discharge_nothing():
    """x > 1 and x < 0 (or False) cannot make anything true; x > 1 and x < 2 can."""
    refused(Derivation("contradiction", assumptions=[x > 1, x < 0]).step(x, sp.Integer(0), "premises", relation=">", proof=holds),
            "premises are contradictory")
    refused(Derivation("contradiction", assumptions=[x > 1, x < 0]).step(x, x + 1, "anything"), "premises are contradictory")
    accepted(Derivation("consistent", assumptions=[x > 1, x < 2]).step(x, sp.Integer(0), "premises", relation=">", proof=holds))
    with pytest.raises(ValueError, match="False is not an assumption"):
        Derivation("false", assumptions=[sp.false])
    with pytest.raises(ValueError, match="False is not a condition"):
        Derivation("false").step(x, x, "r", given=(sp.false,))


def test_contradictory_premises_do_not_discharge_a_lemma_premise():
    c = sp.Symbol("c", real=True)
    lemma = Derivation("c at least one", assumptions=[c >= 1]).step(c, sp.Integer(0), "from c >= 1", relation=">", proof=holds)
    refused(Derivation("abuse", assumptions=[c >= 1, c < 0]).step(c, sp.Integer(0), "lemma", relation=">", proof=by_lemma(lemma)),
            "premises are contradictory")
    accepted(Derivation("use", assumptions=[c >= 1]).step(c, sp.Integer(0), "lemma", relation=">", proof=by_lemma(lemma)))


def test_a_contradiction_between_two_variables_is_found():
    y = sp.Symbol("y", real=True)
    refused(Derivation("cycle", assumptions=[x > y + 1, x < y]).step(x, y, "premises", relation=">", proof=holds), "contradictory")
    accepted(Derivation("chain", assumptions=[x > y + 1]).step(x, y, "premises", relation=">", proof=holds))


# ---------------------------------------------------------------- instances


def test_instance_checks_carry_a_badge_on_the_page():
    """x^2 = x checked at x = 0 and 1 verifies as instances only, and the page says so."""
    d = accepted(Derivation("instances").step(x**2, x, "at two points", proof=at_values(x, [0, 1])))
    assert d.steps[0].badge == "checked at $x = 0, 1$ only"
    assert r"\boxed{\text{checked at }x = 0, 1\text{ only}}" in d.to_latex()
    refused(Derivation("instances").step(x**2, x, "at three points", proof=at_values(x, [0, 1, 2])), "does not establish")
    n = accepted(Derivation("number").step(sp.pi, sp.Integer(3), "evaluate", relation=">", proof=numerically(30)))
    assert "checked numerically to 30 digits" in n.to_latex()
    identity = accepted(Derivation("identity").step((x + 1) ** 2, x**2 + 2 * x + 1, "expand"))
    assert identity.steps[0].badge is None and r"\boxed" not in identity.to_latex()


def test_a_step_proved_pointwise_at_one_instance_keeps_its_badge():
    """Issue 28 (a decision no test guarded): E[x^2 s] = E[x s] with the integrands checked at x = 1 only is accepted as
    an instance check, and says so: the badge on the step, boxed on the page, and a derivation holding it is no lemma
    (its statement was checked at one point, not in general).  Without the badge it would read as a proof."""
    s_ = sp.Symbol("s_1", real=True)
    d = accepted(Derivation("one instance").step(Expect(x**2 * s_), Expect(x * s_), "at x = 1", proof=pointwise(at_values(x, [1]))))
    assert d.steps[0].badge == "checked at $x = 1$ only"
    assert r"\boxed{\text{checked at }x = 1\text{ only}}" in d.to_latex()
    use = Derivation("uses it").step(Expect(4 * s_), Expect(2 * s_), "the lemma at x = 2", proof=by_lemma(d, {x: 2}))
    refused(use, "checked only partly")


def test_regions_keep_the_badge_of_an_inner_proof_checked_at_instances():
    """A proof by regions whose inner proof checks instances is an instance check too: (z^2 - z) y + y = y on both
    sides of y = 1, each piece checked at z = 0, 1 only (false at z = 2), carries the inner badge."""
    y, z = sp.Symbol("y", positive=True), sp.Symbol("z", real=True)
    d = accepted(Derivation("pieces of instances").step((z**2 - z) * y + y, y, "by pieces", proof=on_regions((y, [1]), inner=at_values(z, [0, 1]))))
    assert d.steps[0].badge == "checked at $z = 0, 1$ only" and r"\boxed" in d.to_latex()
    whole = accepted(Derivation("pieces").step(sp.Max(y, 1) + sp.Min(y, 1), y + 1, "by pieces", proof=on_regions((y, [1]), inner=holds)))
    assert whole.steps[0].badge is None


def test_the_directive_shows_the_badge(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "_ext"))
    from derivation_directive import _call  # noqa: F401 - the directive renders d.to_latex(), badges included

    d = accepted(Derivation("instances").step(x**2, x, "at two points", proof=at_values(x, [0, 1])))
    assert "checked at" in d.to_latex()


def test_numerically_refuses_a_gap_below_its_margin():
    """A gap of 1e-40 cannot be told from rounding at 30 digits: refused, even though true."""
    close = sp.Rational(sp.floor(sp.pi * 10**40), 10**40)
    refused(Derivation("tiny gap").step(sp.pi, close, "evaluate", relation=">", proof=numerically(30)))
    accepted(Derivation("tiny gap").step(sp.pi, close, "evaluate", relation=">", proof=numerically(60)))


# ---------------------------------------------------------------- facts


def test_an_invented_fact_is_refused_and_a_stated_one_accepted():
    """facts={x: 1} out of nowhere makes x^2 = x verify; as a premise shown on the page it is honest."""
    refused(Derivation("invented").step(x**2, x, "x = 1", facts={x: 1}), "the fact x = 1 is neither a stated premise nor verified")
    accepted(Derivation("stated", assumptions=[sp.Eq(x, 1)]).step(x**2, x, "x = 1", facts={x: 1}))
    accepted(Derivation("given").step(x**2, x, "at x = 1", given=(sp.Eq(x, 1),)))
    verified = accepted(Derivation("verified").step(sp.Symbol("u") * (x + 1) ** 2, sp.Symbol("u") * (x**2 + 2 * x + 1), "expand",
                                                   facts={(x + 1) ** 2: x**2 + 2 * x + 1}))
    assert verified.verified


def test_a_sum_replaced_by_a_wrong_value_is_refused():
    a, K = sp.symbols("a K", integer=True, positive=True)
    q = sp.IndexedBase("q", positive=True)
    total = sp.Sum(q[a], (a, 1, K))
    stated = [sp.Eq(total, 1)]
    refused(Derivation("wrong", assumptions=stated).step(2 * total, sp.Integer(4), "sum", facts={total: 2}), "the fact")
    accepted(Derivation("right", assumptions=stated).step(2 * total, sp.Integer(2), "sum", facts={total: 1}))


def test_given_conditions_are_shown_with_the_step():
    d = accepted(Derivation("case").step(sp.Max(x, 0), x, "on x > 0", proof=holds, given=(x > 0,)))
    assert r"\boxed{\text{given } x > 0}" in d.to_latex()
    refused(Derivation("case").step(sp.Max(x, 0), x, "on x < 0", proof=holds, given=(x < 0,)))


# ---------------------------------------------------------------- what a proof is


def test_a_bare_callable_is_not_a_proof():
    for fake in (lambda claim: True, lambda: True, print, 3):
        with pytest.raises(TypeError, match="proof must be built by derivations.proofs"):
            Derivation("fake").step(x, x + 1, "trust me", relation="<=", proof=fake)


def test_a_proof_kind_made_outside_the_kernel_is_refused():
    """Subclassing the kernel's Proof does not make a proof: the kernel accepts its own kinds only."""

    class Liar(kernel.Proof):
        name = "liar"

        def establish(self, claim):
            return kernel.Established(claim.lhs, claim.relation, claim.rhs)

    claim = kernel.Claim(x, "=", x + 1)
    with pytest.raises(TypeError, match="a bare function is not a proof"):
        kernel.check(claim, Liar())
    with pytest.raises(TypeError, match="a bare function is not a proof"):
        Derivation("liar").step(x, x + 1, "trust me", proof=Liar())


def test_a_proof_of_another_claim_is_refused():
    """A lemma about something else does not prove the displayed step."""
    y = sp.Symbol("y", real=True)
    lemma = Derivation("square").step(y**2, sp.Integer(0), "a square", relation=">=", proof=holds)
    refused(Derivation("other").step(x**2 + 1, sp.Integer(0), "lemma", relation=">=", proof=by_lemma(lemma, {y: x})), "not the displayed claim")


def test_the_argmin_needs_positive_curvature():
    """(y - 3)^2 has its minimum at 3; -(y - 3)^2 has a maximum there and is refused."""
    y = sp.Symbol("y", real=True)
    accepted(Derivation("min").step(Argmin((y - 3) ** 2, y), sp.Integer(3), "stationary, convex", proof=is_argmin))
    refused(Derivation("max").step(Argmin(-((y - 3) ** 2), y), sp.Integer(3), "stationary", proof=is_argmin))
    refused(Derivation("flat").step(Argmin(y - y + 1, y), sp.Integer(3), "stationary", proof=is_argmin))


def test_a_lemma_checked_only_partly_or_under_conditions_is_no_lemma():
    """x^2 = x at x = 0, 1, or given x = 1, must not become x^2 = x for every x through by_lemma."""
    y = sp.Symbol("y", real=True)
    at_two = Derivation("instances").step(y**2, y, "at two points", proof=at_values(y, [0, 1]))
    refused(Derivation("abuse").step(x**2, x, "lemma", proof=by_lemma(at_two, {y: x})), "checked only partly")
    given = Derivation("case").step(y**2, y, "at y = 1", given=(sp.Eq(y, 1),))
    with pytest.raises(ValueError, match="states nothing unconditional"):
        given.statement()
    refused(Derivation("abuse").step(x**2, x, "lemma", proof=by_lemma(given, {y: x})), "states nothing usable")
    general = Derivation("identity").step((y + 1) ** 2, y**2 + 2 * y + 1, "expand")
    accepted(Derivation("use").step((x + 1) ** 2, x**2 + 2 * x + 1, "lemma", proof=by_lemma(general, {y: x})))


def test_the_argmin_lies_in_the_variable_domain():
    """For a positive v the minimiser of (v + 1)^2 over the reals, -1, is not an argmin over v > 0."""
    v = sp.Symbol("v", positive=True)
    refused(Derivation("outside").step(Argmin((v + 1) ** 2, v), sp.Integer(-1), "stationary", proof=is_argmin), "not provably positive")
    accepted(Derivation("inside").step(Argmin((v - 1) ** 2, v), sp.Integer(1), "stationary", proof=is_argmin))


# ---------------------------------------------------------------- definitions: data, shown, applied by the kernel

y = sp.Symbol("y", real=True)
g, h = sp.Function("g"), sp.Function("h")
Q, i = sp.IndexedBase("Q"), sp.Symbol("i", integer=True)


def test_an_unfold_callable_is_refused():
    """The old hole: an unfold mapping everything to 0 verified every step.  Only a Definitions value is accepted."""
    for fake in (lambda e: sp.Integer(0), print, {g(y): 0}):
        with pytest.raises(TypeError, match="unfold must be a Definitions"):
            Derivation("zero", unfold=fake)
        with pytest.raises(TypeError, match="unfold must be a Definitions"):
            kernel.Claim(x, "=", x + 1, unfold=fake)
    with pytest.raises(TypeError, match="entries must be a mapping"):
        Definitions(lambda e: sp.Integer(0))
    with pytest.raises(TypeError, match="a callable is not a rule"):
        Definitions({}, lambda e: sp.Integer(0))
    accepted(Derivation("square", unfold=Definitions({g(y): y**2})).step(g(2), sp.Integer(4), "definition"))


def test_a_definition_that_is_not_shown_cannot_be_used():
    """The kernel applies exactly the definitions the page shows: h is not among them, so h(2) = 4 is refused."""
    d = Derivation("shown", unfold=Definitions({g(y): y**2})).step(g(2), sp.Integer(4), "definition")
    assert r"\text{where } g{\left(y \right)} := y^{2}" in accepted(d).to_latex()
    refused(Derivation("not shown", unfold=Definitions({g(y): y**2})).step(h(2), sp.Integer(4), "definition"), "does not reduce")
    refused(Derivation("nothing shown").step(g(2), sp.Integer(4), "definition"), "does not reduce")


def test_a_wrong_definition_makes_a_step_fail():
    """pi_a without its normaliser does not sum to one; the softmax does."""
    pol = IndexedSoftmax()
    total = sp.Sum(pol.pi[pol.a], (pol.a, 1, pol.K))
    refused(Derivation("no normaliser", unfold=Definitions({pol.pi[pol.a]: sp.exp(pol.theta[pol.a])})).step(total, sp.Integer(1), "sums to one"))
    accepted(Derivation("softmax", unfold=pol.definitions).step(total, sp.Integer(1), "sums to one"))
    refused(Derivation("cube", unfold=Definitions({g(y): y**3})).step(g(2), sp.Integer(4), "definition"))


def test_a_definition_left_side_must_be_a_symbol_a_function_or_an_indexed_entry():
    for lhs in (x + 1, sp.exp(x), sp.Integer(1), Q[i + 1], Q[i, i], sp.Sum(Q[i], (i, 1, 3))):
        with pytest.raises(ValueError, match="entries:"):
            Definitions({lhs: sp.Integer(0)})
    with pytest.raises(ValueError, match="defined twice"):
        Definitions([(x, sp.Integer(0)), (x, sp.Integer(1))])
    defs = Definitions({x: y + 1, g(y): y**2, Q[i]: 2 * i})
    assert defs.apply(x + g(3) + Q[5]) == y + 20
    with pytest.raises(ValueError, match=r"circular \(x -> y -> x\)"):
        Definitions({x: y + 1, y: x - 1})
    with pytest.raises(ValueError, match="circular"):
        Definitions({g(y): g(y + 1)})
    accepted(Derivation("chained", unfold=Definitions({x: y + 1, y: 2 * t})).step(x, 2 * t + 1, "definitions"))


def test_differentiation_holds_the_stop_gradient_constant():
    """d/dl [-sg(r) A l] = -A r with r = e^(l - l0): the stop-gradient is held; without it the rule gives another weight."""
    from derivations.definitions import Differentiation

    ell, ell0, A, r = sp.symbols("ell ell_0 A r", real=True)
    sg = sp.Function("sg")
    rule = Differentiation(ell, held=(sg,), written=((r, sp.exp(ell - ell0)),))
    loss = -sg(r) * A * ell
    accepted(Derivation("held", unfold=Definitions((), rule)).step(sp.Derivative(loss, ell), -A * r, "sg held"))
    refused(Derivation("not held", unfold=Definitions((), Differentiation(ell, written=((r, sp.exp(ell - ell0)),))))
            .step(sp.Derivative(loss, ell), -A * r, "sg held"))
    with pytest.raises(TypeError, match="held must hold undefined functions"):
        Differentiation(ell, held=(sp.exp,))


# ---------------------------------------------------------------- tables and tolerances: data, never a callable

A1, s1, gp = sp.symbols("A_1 s_1 g", real=True)
RLOO_2 = [(0, (1, 0), 0), (0, (0, 1), -1), (1, (1, 0), 1), (1, (0, 1), 0)]  # RLOO at G = 2: a = R_1 - R_2


def _table_step(table, rhs=gp, lhs=None):
    proof = from_table(A1, s1, (0, 1), (1 - p, p), (-gp, gp), 2, table)
    return Derivation("RLOO at G = 2").step(Expect(A1 * s1) if lhs is None else lhs, rhs, "sum over the patterns", proof=proof)


def test_the_value_table_refuses_a_table_that_disagrees_at_one_pattern():
    """E[(R_1 - R_2) s_1] = grad p: the kernel sums the table itself; one wrong entry, a missing or a doubled pattern is refused."""
    d = accepted(_table_step(RLOO_2))
    assert "summed over the table" in d.steps[0].badge
    wrong = [*RLOO_2[:2], (1, (1, 0), 2), RLOO_2[3]]
    refused(_table_step(wrong), "does not establish it")
    refused(_table_step(RLOO_2[:3]), "one value of A_1 for each of the 4 count patterns")
    refused(_table_step([*RLOO_2, RLOO_2[0]]), "one value of A_1")
    refused(_table_step(RLOO_2, rhs=2 * gp))
    refused(_table_step(RLOO_2, lhs=Expect(2 * A1 * s1)))
    with pytest.raises(TypeError, match="callable|triples"):
        from_table(A1, s1, (0, 1), (1 - p, p), (-gp, gp), 2, [lambda v, c: 0])


def test_the_value_table_weighs_each_count_pattern_by_its_multiplicity():
    """RLOO at G = 3, a = R_1 - K/2: the pattern with one success among the others occurs in 2 orders; E[a s_1] = grad p."""
    table = [(v, (2 - k, k), v - sp.Rational(k, 2)) for v in (0, 1) for k in range(3)]
    proof = from_table(A1, s1, (0, 1), (1 - p, p), (-gp, gp), 3, table)
    accepted(Derivation("RLOO at G = 3").step(Expect(A1 * s1), gp, "sum over the patterns", proof=proof))
    refused(Derivation("RLOO at G = 3").step(Expect(A1 * s1), 2 * gp, "sum over the patterns", proof=proof))


def test_an_fp64_table_is_compared_per_coefficient_before_the_canonicalisers_run(monkeypatch):
    """RLOO at G = 2 with fp64 rounding in one entry: the sum differs from grad p by 1e-15 per coefficient, so the
    tolerance establishes it, without the canonicalisers failing exactly first (simplify took a second on such gaps).
    An exact table, a float table off by 1e-9 and a float gap that is not a polynomial still go to the canonicalisers."""
    import derivations.kernel as kernel

    rounded = [*RLOO_2[:2], (1, (1, 0), sp.Float(1 - 1e-15)), RLOO_2[3]]
    assert rounded[2][2] != 1 and abs(rounded[2][2] - 1) < 1e-15
    tolerant = from_table(A1, s1, (0, 1), (1 - p, p), (-gp, gp), 2, rounded, tol=1e-12)
    step = Derivation("RLOO at G = 2, fp64").step(Expect(A1 * s1), gp, "sum over the patterns", proof=tolerant)
    consulted = []
    real = kernel.relation_holds
    monkeypatch.setattr(kernel, "relation_holds", lambda *a: consulted.append(a) or real(*a))
    assert "summed over the table" in accepted(step).steps[0].badge and consulted == []
    exact = from_table(A1, s1, (0, 1), (1 - p, p), (-gp, gp), 2, RLOO_2, tol=1e-12)
    accepted(Derivation("RLOO at G = 2, exact").step(Expect(A1 * s1), gp, "sum over the patterns", proof=exact))
    assert len(consulted) == 1
    off = [*RLOO_2[:2], (1, (1, 0), sp.Float(1 + 1e-9)), RLOO_2[3]]
    refused(Derivation("off").step(Expect(A1 * s1), gp, "sum", proof=from_table(A1, s1, (0, 1), (1 - p, p), (-gp, gp), 2, off, tol=1e-12)))
    not_polynomial = Derivation("root").step(Expect(A1 * s1), gp + sp.Float(1e-15) * sp.sqrt(p) * gp, "sum", proof=tolerant)
    refused(not_polynomial, "does not establish")  # no coefficients to compare: refused (it raised PolynomialError before)
    assert len(consulted) == 3

def test_a_tolerance_proof_accepts_rounding_only():
    near = Derivation("rounding").step(gp * sp.Float(0.5), gp / 2 + sp.Float(1e-15) * gp, "fp64", proof=to_tolerance(1e-12))
    assert accepted(near).steps[0].badge == "floating-point coefficients equal to 1e-12"
    refused(Derivation("far").step(gp * sp.Float(0.5), gp / 2 + sp.Float(1e-9) * gp, "fp64", proof=to_tolerance(1e-12)), "does not establish")
    refused(Derivation("exact slip").step(gp / 2, gp / 3, "fp64", proof=to_tolerance(1e-12)), "does not establish")
    with pytest.raises(ValueError, match="tol must be a float"):
        to_tolerance(0.1)


def test_the_rules_refuse_bad_data():
    from derivations.definitions import GroupExpectation, Linearity

    with pytest.raises(TypeError, match="expectation must be a SymPy Function class"):
        Linearity(lambda e: e)
    with pytest.raises(TypeError, match="randoms must be a tuple of symbols"):
        Linearity(Expect, ("R",))
    with pytest.raises(ValueError, match="answer must be an answer index"):
        GroupExpectation(("R", "s"), None, answer=1)
    with pytest.raises(ValueError, match="answer must be an answer index"):
        GroupExpectation(("R", "s"), 3, answer=4)
    with pytest.raises(TypeError, match="names must be"):
        GroupExpectation("Rs")
    R_, s_ = sp.symbols("R s", real=True)
    assert Definitions((), Linearity(Expect)).apply(Expect(2 * R_ + 3 * s_)) == 2 * Expect(R_) + 3 * Expect(s_)


# ---------------------------------------------------------------- cases over a finite set, integrands, independence

r = sp.Symbol("r", real=True)
n = sp.Symbol("n", integer=True)
N = sp.Symbol("N", integer=True, positive=True)
k_ = sp.Symbol("k", integer=True)
f_ = sp.Function("f")
BINARY = sp.Contains(r, sp.FiniteSet(0, 1))


def test_cases_must_be_exactly_the_values_a_premise_states():
    """r^2 = r for r in {0, 1}; r = 0 holds at the case r = 0 only, so a value set short of the premise's is refused."""
    accepted(Derivation("binary", assumptions=[BINARY]).step(r**2, r, "cases", proof=by_cases(r, (0, 1))))
    refused(Derivation("one case", assumptions=[BINARY]).step(r, sp.Integer(0), "cases", proof=by_cases(r, (0,))),
            "no premise says that r takes only the values {0}")
    refused(Derivation("extra case", assumptions=[BINARY]).step(r**2, r, "cases", proof=by_cases(r, (0, 1, 2))), "no premise says")
    refused(Derivation("no premise").step(r**2, r, "cases", proof=by_cases(r, (0, 1))), "no premise says")
    refused(Derivation("false at 0", assumptions=[BINARY]).step(r**2, 2 * r - 1, "cases", proof=by_cases(r, (0, 1))),
            "proof does not establish it")
    with pytest.raises(ValueError, match="each case once"):
        by_cases(r, (0, 0))
    with pytest.raises(TypeError, match="quantity must be"):
        by_cases(r + 1, (0, 1))


def test_cases_do_not_reach_inside_an_expectation():
    """Inside E[.] the quantity is a random variable: r E[r] = r would hold 'at each value' (E[1] = 1), yet r E[r] = r p."""
    refused(Derivation("inside E", assumptions=[BINARY]).step(r * Expect(r), r, "cases", proof=by_cases(r, (0, 1))),
            "occurs inside an expectation")
    s_ = sp.Symbol("s", real=True)
    g_ = sp.Symbol("g", real=True)
    through_a_fact = Derivation("through a fact", assumptions=[BINARY, sp.Eq(Expect(r * s_), g_)])
    refused(through_a_fact.step(r * Expect(s_), r * g_, "cases", proof=by_cases(r, (0, 1)), facts={Expect(r * s_): g_}),
            "occurs inside an expectation")
    accepted(Derivation("outside E", assumptions=[BINARY]).step(r**2 * Expect(s_), r * Expect(s_), "cases", proof=by_cases(r, (0, 1))))
    # a premise about f(k) for the free k says nothing about f(1), ..., f(N); SymPy's subs would reach into the sum
    bound = Derivation("bound", assumptions=[sp.Contains(f_(k_), sp.FiniteSet(0, 1))])
    refused(bound.step(sp.Sum(f_(k_) ** 2, (k_, 1, N)), sp.Sum(f_(k_), (k_, 1, N)), "cases", proof=by_cases(f_(k_), (0, 1))),
            "a variable that a sum binds")


def test_cases_read_a_stated_range_as_true_and_nothing_else():
    """sum_k 1[n = k] f(k) over k = 0..N-1 is f(n) only when 0 <= n <= N - 1 is stated; without it the branch is undecided."""
    lhs, rhs = r * sp.Sum(sp.KroneckerDelta(n, k_) * f_(k_), (k_, 0, N - 1)), r * f_(n)
    accepted(Derivation("in range", assumptions=[BINARY, n >= 0, n <= N - 1]).step(lhs, rhs, "cases", proof=by_cases(r, (0, 1))))
    refused(Derivation("range unstated", assumptions=[BINARY, n >= 0]).step(lhs, rhs, "cases", proof=by_cases(r, (0, 1))),
            "does not establish it")
    refused(Derivation("off by one", assumptions=[BINARY, n >= 0, n <= N - 1]).step(lhs, r * f_(n + 1), "cases", proof=by_cases(r, (0, 1))))


def test_pointwise_compares_the_integrands_of_two_expectations():
    s_ = sp.Symbol("s", real=True)
    binary = Derivation("binary", assumptions=[BINARY])
    d = accepted(binary.step(Expect(r**2 * s_), Expect(r * s_), "r^2 = r", proof=pointwise(by_cases(r, (0, 1)))))
    assert d.proved_by() == {"equal integrands (cases r in {0, 1})": 1}
    refused(Derivation("binary", assumptions=[BINARY]).step(Expect(r**2 * s_), Expect(2 * r * s_), "r^2 = r",
                                                           proof=pointwise(by_cases(r, (0, 1)))), "proof does not establish it")
    refused(Derivation("binary", assumptions=[BINARY]).step(Expect(r**2 * s_), 2 * Expect(r * s_) / 2 + s_ - s_ + Expect(s_),
                                                           "r^2 = r", proof=pointwise(by_cases(r, (0, 1)))), "must be expectations")
    with pytest.raises(TypeError, match="inner must be a proof"):
        pointwise(lambda claim: True)


def _group_step(lhs, rhs):
    from derivations.iid_groups import IIDGroup

    return Derivation("independence", unfold=IIDGroup().definitions).step(lhs, rhs, "independence")


def test_a_function_of_the_others_factorises_from_the_answer_only():
    """E[1[S_-i = k] g(R_i, s_i)] = E[1[S_-i = k]] E[g(R, s)]; with answer m, or with the total that includes answer i, it must not."""
    from derivations.iid_groups import IIDGroup, OthersTotal

    grp = IIDGroup()
    R, s, i, j = grp.R, grp.s, grp.i, grp.j
    Rp, sp_ = grp.plain["R"], grp.plain["s"]
    m = sp.Symbol("m", integer=True, positive=True)
    one = sp.KroneckerDelta(OthersTotal(i), k_)
    accepted(_group_step(Expect(one * R[i] * s[i]), Expect(one) * Expect(Rp * sp_)))
    accepted(_group_step(Expect(one * (1 - R[i]) * s[i]), Expect(one) * (Expect(sp_) - Expect(Rp * sp_))))
    refused(_group_step(Expect(one * R[m] * s[m]), Expect(one) * Expect(Rp * sp_)), "mixes it with answer m")
    refused(_group_step(Expect(one * R[m] * s[m]), one * Expect(Rp * sp_)), "group algebra does not take")  # S_-i is no constant
    including_i = sp.KroneckerDelta(grp.total(), k_)
    refused(_group_step(Expect(including_i * R[i] * s[i]), Expect(including_i) * Expect(Rp * sp_)), "group algebra does not take")
    refused(_group_step(Expect(one * sp.Sum(R[j], (j, 1, grp.G)) * s[i]), Expect(one) * Expect(Rp * sp_)), "mixes it with answer")
    refused(_group_step(Expect(f_(R[i], OthersTotal(i)) * s[i]), Expect(f_(Rp, OthersTotal(i))) * Expect(sp_)), "group algebra does not take")


def test_the_expectation_moves_through_a_finite_sum_over_a_count_only():
    from derivations.iid_groups import IIDGroup, OthersTotal

    grp = IIDGroup()
    R, s, i = grp.R, grp.s, grp.i
    Rp, sp_ = grp.plain["R"], grp.plain["s"]
    one = sp.KroneckerDelta(OthersTotal(i), k_)
    accepted(_group_step(Expect(sp.Sum(f_(k_) * one, (k_, 0, grp.G - 1)) * R[i] * s[i]),
                         sp.Sum(f_(k_) * Expect(one), (k_, 0, grp.G - 1)) * Expect(Rp * sp_)))
    refused(_group_step(Expect(sp.Sum(f_(k_) * one, (k_, 0, sp.oo)) * R[i] * s[i]),
                        sp.Sum(f_(k_) * Expect(one), (k_, 0, sp.oo)) * Expect(Rp * sp_)), "finite limits")
