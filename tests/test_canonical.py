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
    assert refuting_point(sp.Derivative(x**2, x) - 3 * x) is None  # a derivative is not evaluated at a point
    assert refuting_point(sp.Function("f")(x) - 1) is None
    assert refuting_point(sp.Float(0.1) * xp - xp / 10) is None  # a float is exact only where it vanishes
    assert is_zero(sp.Float(0.1) * xp - xp / 10) == "expand"  # ... and the canonicalisers still judge it


y = sp.Symbol("y", positive=True)
TRANSCENDENTAL_IDENTITIES = [
    sp.log(y * sp.exp(y)) - sp.log(y) - y,
    sp.sqrt(y) * sp.sqrt(2 * y) - sp.sqrt(2) * y,
    sp.exp(2 * sp.log(y)) - y**2,
    sp.log(SOFTMAX_1) - theta[1] + sp.log(sp.exp(theta[1]) + sp.exp(theta[2])),
    sp.Sum(sp.exp(k * y), (k, 1, K)) * (sp.exp(y) - 1) - sp.exp(y) * (sp.exp(K * y) - 1),
    sp.atan(y) + sp.atan(1 / y) - sp.pi / 2,  # true only because y > 0 (for y < 0 it is -pi)
]


@pytest.mark.parametrize("expr", TRANSCENDENTAL_IDENTITIES)
def test_a_true_identity_in_exp_log_sqrt_is_never_refuted(expr):
    assert refuting_point(expr) is None


@pytest.mark.parametrize("wrong", [
    sp.exp(y) - 1,  # e - 1 at y = 1: no exact rational, but clearly not 0
    sp.log(y * sp.exp(y)) - sp.log(y) - y - d,
    sp.sqrt(y) * sp.sqrt(2 * y) - sp.sqrt(3) * y,
    sp.log(SOFTMAX_1) - theta[1] + sp.log(sp.exp(theta[1]) + sp.exp(theta[2])) + d / 10**20,  # small, not tiny
    sp.Sum(sp.exp(k * y), (k, 1, K)) * (sp.exp(y) - 1) - sp.exp(K * y) + 1,  # a factor e^y dropped
])
def test_a_false_claim_in_exp_log_sqrt_is_refuted_at_an_admissible_point(wrong):
    at = refuting_point(wrong)
    assert at is not None
    value = wrong.xreplace({a: v for a, v in at.items() if isinstance(a, sp.Symbol)}).doit()
    value = value.xreplace({a: v for a, v in at.items() if isinstance(a, sp.Indexed)})
    assert value.is_real and abs(value.evalf(50)) > 1e-25
    assert is_zero(wrong) is None


def test_a_tiny_value_beside_huge_terms_is_not_trusted_to_be_nonzero():
    big = sp.exp(100 * y)  # about 2.7e43 at y = 1, so its square is about 7e86
    for tiny in (big**2 / 10**40, sp.exp(-100 * y) / 10**40, sp.Integer(10) ** -60 * sp.exp(-y)):
        expr = (big + 1) ** 2 - big**2 - 2 * big - 1 + tiny  # a value below 1e-30 of its largest term
        assert refuting_point(expr) is None
        assert is_zero(expr) is None  # not refuted, and not called zero either: the canonicalisers still decide
    assert refuting_point((big + 1) ** 2 - big**2 - 2 * big - 1 + big**2 / 10**20) is not None  # 1e-20 of it is enough


def test_a_complex_value_refutes_nothing():
    z = sp.Symbol("z", negative=True)
    assert refuting_point(sp.log(z) - sp.log(-z) - sp.I * sp.pi) is None  # log of a negative is complex: no verdict here
    assert refuting_point(sp.sqrt(z) - 5) is None


def test_a_logarithm_a_fact_moved_off_the_real_line_is_refuted_at_small_values():
    """After the fact pi_3 = 1 - pi_1 - pi_2, the simplest point (pi_1 = pi_2 = 1) and the first pseudo-random one put
    log pi_3 off the real line; the third keeps pi_1 + pi_2 < 1 and refutes a wrong claim there, in exact arithmetic.
    A true identity stays unrefuted, and a value complex at every point still refutes nothing."""
    p1, p2 = sp.symbols("pi_1 pi_2", positive=True)
    p3 = 1 - p1 - p2
    at = refuting_point(p3 * sp.log(p3) - p3 * sp.log(p1))  # pi_3 log(pi_3 / pi_1) = 0: wrong
    assert at is not None and 0 < p3.xreplace(at) < 1 and at[p1] < sp.Rational(1, 2) and at[p2] < sp.Rational(1, 2)
    assert (p3 * sp.log(p3) - p3 * sp.log(p1)).xreplace(at).evalf(30).is_real
    assert refuting_point(sp.log(2 * p3) - sp.log(p3) - sp.log(2)) is None
    assert refuting_point(sp.sqrt(-p1) - 5) is None


def test_a_lone_free_term_refutes_where_no_point_can():
    f = sp.Function("f")
    lhs = sp.Derivative(f(x) ** 2, x)
    assert is_zero(lhs - 2 * f(x) * sp.Derivative(f(x), x)) == "expand"
    assert is_zero(lhs - 2 * f(x) * sp.Derivative(f(x), x) - d) is None  # refuted: the value moves with delta
    assert is_zero(d * (x + 1) - d * x - d) == "expand"  # a term -delta, but delta occurs in another term too
    assert is_zero(lhs - 2 * f(x) * sp.Derivative(f(x), x) + d * (f(x) - 1) - d * f(x) + d) == "expand"
    assert is_zero((d + x) ** 2 - d**2 - 2 * d * x - x**2) == "expand"


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


def test_one_condition_written_twice_lines_up_without_simplify():
    r, eps, a = sp.Symbol("r", positive=True), sp.Symbol("varepsilon", positive=True), sp.Symbol("A", real=True)
    clipped = a * sp.Piecewise((0, (a > 0) & (r > 1 + eps)), (1, True))
    same = a * sp.Piecewise((0, (a > 0) & (eps < r - 1)), (1, True))
    assert is_zero(clipped - same) == "piecewise folded, cancel(together)"
    assert is_zero(clipped - a * sp.Piecewise((0, (a < 0) & (r > 1 + eps)), (1, True))) is None  # the other side of A
    # the edge r = 1 + eps differs (no point finds it: it is one line), shown without A to keep simplify's share small
    assert is_zero(sp.Piecewise((0, r > 1 + eps), (1, True)) - sp.Piecewise((0, eps < r - 1), (1, True))) == "piecewise folded, cancel(together)"
    assert is_zero(sp.Piecewise((0, r > 1 + eps), (1, True)) - sp.Piecewise((0, r >= 1 + eps), (1, True))) is None


a_, j_, m_ = sp.symbols("a j m", integer=True)
R_, b_ = sp.IndexedBase("R"), sp.Symbol("b")
g_ = sp.Function("g")
# sums that SymPy's closed forms cannot do (a term with a table or undefined function at the bare index, none shifted),
# beside sums that look alike but SymPy does evaluate (telescoping, a Kronecker delta, table terms that cancel)
OPAQUE_SUMS = [
    sp.Sum((R_[a_] - sp.Sum(R_[m_] * p[m_], (m_, 1, K))) * (R_[a_] - b_) * p[a_], (a_, 1, K)),
    sp.Sum(g_(0, k) * sp.exp(theta[k]) + k**2 * g_(1, k), (k, 0, K - 1)),
    sp.Sum(p[a_] * sp.Derivative(g_(a_, x), x), (a_, 1, K)),
    sp.Sum(sp.Abs(R_[a_] - p[a_]) / 2 - R_[a_] / 2 + k * p[a_], (a_, 1, K)),  # no one table in every term
]
CLOSED_FORM_SUMS = [
    sp.Sum(R_[a_ + 1] - R_[a_], (a_, 1, K)),  # telescoping: R[K + 1] - R[1]
    sp.Sum(p[a_] * sp.KroneckerDelta(a_, j_), (a_, 1, K)),  # a Kronecker delta: p[j] where 1 <= j <= K
    sp.Sum(p[a_] * sp.Sum(sp.KroneckerDelta(a_, j_) * R_[m_], (m_, 1, K)), (a_, 1, K)),  # the delta inside a sum over m
    sp.Sum(a_ * (b_ + 1) - b_, (a_, 1, K)),
    sp.Sum(p[a_] * (b_ + 1) - p[a_] * b_ - p[a_] + a_, (a_, 1, K)),  # the table's terms cancel once expanded
    sp.Sum(p[a_] * R_[a_], (a_, 1, 3)),  # numeric limits: summed term by term
]


@pytest.mark.parametrize("s", OPAQUE_SUMS + CLOSED_FORM_SUMS)
def test_a_sum_is_evaluated_as_sympy_evaluates_it(s):
    from derivations.canonical import evaluated

    assert evaluated(s) == s.doit()


def test_the_sums_without_a_closed_form_are_the_opaque_ones():
    assert all(isinstance(s.doit(), sp.Sum) for s in OPAQUE_SUMS)
    assert not any(isinstance(s.doit(), sp.Sum) for s in CLOSED_FORM_SUMS)


def test_a_sum_sympy_cannot_close_still_decides_a_step_both_ways():
    s = sp.Sum((R_[a_] - b_) * p[a_], (a_, 1, K))
    true = s - sp.Sum(R_[a_] * p[a_], (a_, 1, K)) + b_ * sp.Sum(p[a_], (a_, 1, K))
    assert is_zero(true) == "sums as atoms, cancel(together)"
    assert is_zero(true - 2 * b_ * sp.Sum(p[a_], (a_, 1, K))) is None  # the baseline's sign flipped
    # with a derivative of an undefined function no point refutes: the canonicalisers judge the unevaluated sums
    dg = sp.Derivative(g_(a_, x), x)
    split = sp.Sum((p[a_] + R_[a_]) * dg, (a_, 1, K)) - sp.Sum(p[a_] * dg, (a_, 1, K))
    assert refuting_point(split - 2 * sp.Sum(R_[a_] * dg, (a_, 1, K))) is None
    assert is_zero(split - sp.Sum(R_[a_] * dg, (a_, 1, K))) == "expand"
    assert is_zero(split - 2 * sp.Sum(R_[a_] * dg, (a_, 1, K))) is None  # a factor 2 on one term
