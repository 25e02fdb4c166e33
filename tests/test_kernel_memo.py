"""The kernel's shortcuts decide exactly what the long way decides, and its memories share nothing mutable.

``regions.at_point`` (a Min/Max decided at a point instead of rebuilt there),
``canonical.evaluated`` (``doit`` with each evaluating node remembered) and the
verdicts ``kernel.check`` remembers are each compared with the long way, on a
true claim and on its near false variant, so a shortcut that decides more, or
less, than the procedure it replaces fails here.
"""

import pytest
import sympy as sp

from derivations import Derivation, DerivationError, kernel
from derivations.canonical import evaluated
from derivations.kernel import Claim, check
from derivations.losses import loss_table
from derivations.proofs import by_lemma, holds, on_regions
from derivations.regions import at_point, decide_sign, resolve

r, e, d, t = sp.symbols("r varepsilon d t", positive=True)
x = sp.Symbol("x", real=True)
A = sp.Symbol("A", real=True)


NUMBERS = {e: sp.Rational(1, 5), d: sp.Rational(1, 3), t: sp.Rational(7, 2)}


RATIOS = [(1 + e) * (1 + d), 1 + e, 1 + e / (1 + d), sp.Integer(1), 1 / ((1 + e) * (1 + d)), 1 / (1 + e)]


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("advantage", [t, -t])
def test_at_point_and_resolve_have_the_value_of_subs_there(ratio, advantage):
    """Above, at and between the kinks, with either sign of A: the branches decided at the point give the value that
    ``subs`` and exact arithmetic give at numbers for its parameters (a branch of the wrong side would not)."""
    expr = sp.Min(r * A, sp.Min(sp.Max(r, 1 / (1 + e)), 1 + e) * A) + sp.Max(r - 1 - e, 0)
    point = {r: ratio, A: advantage}
    exact = expr.subs(point).subs(NUMBERS)
    assert exact.is_Rational
    assert at_point(expr, point).subs(NUMBERS) == exact
    assert resolve(at_point(expr, point)).subs(NUMBERS) == exact
    assert resolve(expr, point).subs(NUMBERS) == exact
    assert resolve(expr, point, keep_variables=True).subs(point).subs(NUMBERS) == exact


def test_at_point_leaves_an_undecided_min_to_the_constructor():
    """No sign decides Min(d, 1 + eps): the Min stays, as ``subs`` leaves it, and the resolver reports it undecided."""
    expr = sp.Min(r, d)
    assert at_point(expr, {r: 1 + e}) == expr.subs(r, 1 + e) == sp.Min(d, 1 + e)
    assert resolve(at_point(expr, {r: 1 + e})) is None


def test_at_point_refuses_bad_input():
    with pytest.raises(TypeError, match="at must be a substitution mapping"):
        at_point(sp.Min(r, 1), [(r, 1)])
    with pytest.raises(TypeError, match="expr must be a SymPy expression"):
        at_point("Min(r, 1)", {r: 1})


def test_a_remembered_sign_depends_on_the_assumptions():
    """The sign memory is keyed on the expression, whose symbols carry their assumptions."""
    assert decide_sign(sp.Symbol("y", positive=True)) == 1
    assert decide_sign(sp.Symbol("y", real=True)) is None
    assert decide_sign(sp.Symbol("y", negative=True)) == -1


@pytest.mark.parametrize("expr", [
    sp.Sum(sp.Symbol("k", integer=True) ** 2, (sp.Symbol("k", integer=True), 1, sp.Symbol("K", integer=True, positive=True))),
    2 * sp.Derivative(x**3, x) - sp.Sum(x, (sp.Symbol("j", integer=True), 1, 3)),
    sp.exp(sp.Derivative(sp.sin(x), x)) + sp.Min(x, sp.Derivative(x**2, x)),
])
def test_evaluated_is_doit(expr):
    assert evaluated(expr) == expr.doit()
    assert evaluated(expr) == expr.doit()  # the second time from memory, the same


def test_a_remembered_verdict_is_the_verdict():
    """A true claim twice: the same frozen verdict; a false one twice: a fresh Refused each time, with the same message."""
    claim = Claim(r + 1, ">", r)
    first, second = check(claim, holds), check(claim, holds)
    assert first == second == kernel.Verdict("sign decided")
    with pytest.raises(AttributeError):
        first.method = "something else"
    refusals = []
    for _ in range(2):
        with pytest.raises(kernel.Refused) as info:
            check(Claim(r, ">", r), holds)
        refusals.append(info.value)
    assert refusals[0] is not refusals[1] and str(refusals[0]) == str(refusals[1]) == "the sign decided proof does not establish it"


def test_a_remembered_verdict_is_per_claim_and_proof():
    """The same sides under other assumptions, another relation or a proof with other cuts are decided afresh."""
    check(Claim(sp.Max(r, 0), "=", r), on_regions((r, [1])))
    with pytest.raises(kernel.Refused):
        check(Claim(sp.Max(x, 0), "=", x), on_regions((x, [1])))
    with pytest.raises(kernel.Refused):
        check(Claim(r + 1, "<", r), holds)


def test_a_lemma_is_checked_again_after_it_changes():
    """A lemma holds a mutable derivation: its verdict is never remembered, so an edited lemma is verified afresh."""
    lemma = Derivation("square", start=(x + 1) ** 2).then(x**2 + 2 * x + 1, "binomial formula")
    y = sp.Symbol("y", real=True)
    use = Derivation("instance").step((y + 1) ** 2, y**2 + 2 * y + 1, "the lemma at x = y", proof=by_lemma(lemma, {x: y}))
    assert use.verify().verified
    lemma.steps[0] = type(lemma.steps[0])(lemma.steps[0].lhs, x**2 + 1, "binomial formula")
    with pytest.raises(DerivationError, match="does not hold"):
        use.verify()


def test_a_cached_table_is_an_immutable_value():
    assert isinstance(loss_table(), str) and loss_table() is loss_table()


def test_nested_cuts_keep_independent_parameters():
    """The gap parameter is shared between points of one cut, never between two cuts: a claim true only on the
    diagonal x = y of the cell x > 1, y > 1 must be refused (one parameter for both cuts would check only x = y there)."""
    u, v = sp.symbols("u v", positive=True)
    claim = sp.Max(u - v, 0) * sp.Max(u - 1, 0) * sp.Max(v - 1, 0)
    with pytest.raises(DerivationError, match="does not establish it"):
        Derivation("diagonal").step(claim, 0, "cases", proof=on_regions((u, [1]), (v, [1]))).verify()
    true = sp.Max(u - 1, 0) * sp.Max(v - 1, 0) * (u + v - 2)
    assert Derivation("cell").step(true, 0, "cases", relation=">=", proof=on_regions((u, [1]), (v, [1]))).verify().verified


def test_a_remembered_parametrisation_is_a_new_dict_each_time():
    from derivations.premises import parametrisation

    y = sp.Symbol("y", real=True)
    first = parametrisation((y > 1,))
    first[y] = sp.Integer(0)
    second = parametrisation((y > 1,))
    assert second[y] != 0 and (second[y] - 1).is_positive
