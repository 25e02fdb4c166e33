"""The canonicalisers' two speed-ups change no verdict: the memo of :func:`is_zero` and the refutation at a rational point."""

import pytest
import sympy as sp

from derivations import is_zero
from derivations.canonical import CANONICALISERS, refuting_point

x = sp.Symbol("x")
xp = sp.Symbol("x", positive=True)
n = sp.Symbol("n", integer=True)
k = sp.Symbol("k", integer=True)
K = sp.Symbol("K", integer=True, positive=True)
d = sp.Symbol("delta", positive=True)
p = sp.IndexedBase("p", positive=True)
theta = sp.IndexedBase("theta", real=True)
SOFTMAX_1 = sp.exp(theta[1]) / (sp.exp(theta[1]) + sp.exp(theta[2]))

IDENTITIES = [
    (x + 1) ** 2 - x**2 - 2 * x - 1,
    sp.exp(x) / (1 + sp.exp(x)) - 1 / (1 + sp.exp(-x)),
    sp.sqrt(xp**2) - xp,  # zero only because x > 0
    (-1) ** (2 * n) - 1,  # zero only because n is an integer
    sp.Sum(k, (k, 1, K)) - K * (K + 1) / 2,
    sp.Sum(p[k] * (k - 1), (k, 1, K)) - sp.Sum(k * p[k], (k, 1, K)) + sp.Sum(p[k], (k, 1, K)),
    SOFTMAX_1 + sp.exp(theta[2]) / (sp.exp(theta[1]) + sp.exp(theta[2])) - 1,
    sp.log(xp**2) - 2 * sp.log(xp),
]

FALSE_CLAIMS = [
    (x + 1) ** 2 - x**2 - x - 1,
    SOFTMAX_1 * (1 - SOFTMAX_1) - SOFTMAX_1 + d,
    sp.sqrt(x**2) - x,  # x may be negative
    sp.Sum(k, (k, 1, K)) - K**2 / 2,
    sp.Sum(p[k] ** 2, (k, 1, K)) - sp.Sum(p[k], (k, 1, K)) ** 2,
    sp.Max(x, 0) - x,
]


@pytest.mark.parametrize("expr", IDENTITIES)
def test_an_identity_is_never_refuted_and_still_verifies(expr):
    assert refuting_point(expr) is None
    assert is_zero(expr) is not None


@pytest.mark.parametrize("expr", FALSE_CLAIMS)
def test_a_refutation_is_an_admissible_point_where_the_value_is_a_nonzero_rational(expr):
    at = refuting_point(expr)
    assert at is not None
    for atom, value in at.items():  # every value has the atom's assumptions
        for key in ("positive", "negative", "nonnegative", "integer", "zero", "nonzero"):
            if getattr(atom, f"is_{key}") is not None:
                assert getattr(value, f"is_{key}") == getattr(atom, f"is_{key}"), (atom, value, key)
    value = expr.subs({a: v for a, v in at.items() if isinstance(a, sp.Symbol)}).doit()
    value = value.subs({a: v for a, v in at.items() if isinstance(a, sp.Indexed)})
    assert value.is_Rational and value != 0
    # and no canonicaliser reaches 0 on it: the refutation only says sooner what they all say
    for name, canon in CANONICALISERS:
        try:
            assert canon(expr.doit()) != 0, name
        except (TypeError, ValueError, NotImplementedError):
            pass
    assert is_zero(expr) is None


def test_no_refutation_where_nothing_is_exact():
    theta_0 = sp.Symbol("theta_0", positive=True)  # e^theta is never rational at a positive rational theta
    assert refuting_point(sp.exp(theta_0) - 1) is None
    assert refuting_point(sp.Derivative(x**2, x) - 3 * x) is None  # a derivative is not evaluated at a point
    assert refuting_point(sp.Function("f")(x) - 1) is None
    assert refuting_point(sp.Float(0.1) * xp - xp / 10) is None  # a float is exact only where it vanishes


def test_the_memo_is_keyed_by_the_facts_and_the_assumptions():
    a, b = sp.symbols("a b", positive=True)
    # with the fact, then without: the remembered verdict of one key is not handed to the other
    assert is_zero(a + b - 1, {b: 1 - a}) == "expand"
    assert is_zero(a + b - 1) is None
    assert is_zero(a + b - 1, {b: 1 - a}) == "expand"
    # the same name with other assumptions is another expression
    assert is_zero(sp.sqrt(xp**2) - xp) is not None
    assert is_zero(sp.sqrt(x**2) - x) is None
    # the fact order is immaterial (SymPy substitutes a mapping in its own order)
    assert is_zero(a + b + x - 1, {b: 1 - a, x: 0}) == is_zero(a + b + x - 1, {x: 0, b: 1 - a}) == "expand"


def test_the_memo_applies_unfold_first_and_hands_out_nothing_mutable():
    pi = sp.Symbol("pi_1")
    assert is_zero(pi - SOFTMAX_1, unfold=lambda e: e.subs(pi, SOFTMAX_1)) is not None
    assert is_zero(pi - SOFTMAX_1, unfold=lambda e: e.subs(pi, 1 - SOFTMAX_1)) is None
    assert is_zero(pi - SOFTMAX_1) is None
    verdict = is_zero(sp.Matrix([x - x, xp - xp]))
    assert isinstance(verdict, str)  # a str: immutable, so a remembered verdict cannot be changed by a caller
