"""The Derivation record, the canonicalisers and the symbolic softmax policy."""

import pytest
import sympy as sp

from derivations import Derivation, DerivationError, IndexedSoftmax, SoftmaxPolicy, is_zero, reason_to_latex
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
    d = Derivation("wrong", unfold=pol.unfold)
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


def test_inequality_steps_need_a_proof():
    d = Derivation("ineq").step(x**2 + 1, 2 * x, "AM-GM", relation=">=")
    with pytest.raises(DerivationError, match="needs a proof"):
        d.verify()
    ok = Derivation("ineq").step(x**2 + 1, 2 * x, "AM-GM", relation=">=", proof=lambda: sp.expand((x - 1) ** 2) == x**2 - 2 * x + 1)
    assert ok.verify().proved_by() == {"proof": 1}
    bad = Derivation("ineq").step(x, 2 * x, "false", relation=">=", proof=lambda: False)
    with pytest.raises(DerivationError):
        bad.verify()


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
    with pytest.raises(TypeError, match="unfold must be callable"):
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
