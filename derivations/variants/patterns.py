r"""Finite reward laws: the count patterns, the advantage's values on them, and the exact reduction.

For a reward with values :math:`y_1 < \dots < y_m`, the expected update of a
permutation-equivariant group advantage depends on it only through the answer labelled 1's
advantage on the :math:`m\binom{G+m-2}{m-1}` *count patterns*: the answer labelled 1's own
reward :math:`y` and how many of the other :math:`G-1` answers take each value
(:class:`CountPattern`).  :func:`finite_report` is handed those values — by a
SymPy expression, by a table ``{pattern: value}`` or by an evaluator
``pattern -> value`` — and derives

.. math::

    \mathbb{E}[A_1 s_1] = \sum_y \bar A(y)\,\nabla_\theta q_y,
    \qquad \bar A(y) = \sum_n \binom{G-1}{n}\prod_k q_k^{n_k}\,A(y \mid n),

then :math:`c` and the residual.  Floats in a table (a callable's fp64
values) are read as exact numbers when a short closed form matches them to
1e-14, else kept as floats; a verdict on floats uses the tolerance of
:func:`~derivations.variants.reports.nonzero`.

**Symbolic and numeric, by size.**  The symbolic reduction builds one SymPy
value per count pattern and expands :math:`\bar A(y)` in :math:`q`; it is used up
to :data:`SYMBOLIC_PATTERNS` patterns (a binary reward up to :math:`G = 87`,
three values up to :math:`G = 10`, five up to :math:`G = 4`), and its
derivation is checked by the kernel.  Above that (five values at
:math:`G = 64` are 3,832,400 patterns) :func:`coefficient_report` decides
from the ranges of the Bernstein coefficients :math:`\eta_d(n)` of
:math:`\alpha_d(q)` that the numeric layer computes from a callable's fp64
values (see :class:`~derivations.variants.reports.FloatReduction`): an exact
lemma applied to floats, so the verdict holds to a stated tolerance, is
labelled "decided numerically" and carries no derivation.
"""

from __future__ import annotations

import ast
import itertools
import math
import numbers
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import mpmath
import sympy as sp

from .._validate import require_int
from ..canonical import CANONICALISERS, evaluated
from ..definitions import Definitions
from ..derivation import Derivation, is_zero
from ..group_baselines import GRAD_J, GRAD_P, P
from ..iid_groups import Expect
from ..proofs import from_table, to_tolerance
from .inputs import R_PLAIN, S_PLAIN, R, S, explicit_advantage, require_group_size, reward_law
from .reports import FloatReduction, GroupReport, NotPermutationEquivariant, nonzero, verdict

__all__ = ["FLOAT_TOL", "SYMBOLIC_PATTERNS", "CountPattern", "coefficient_report", "count_patterns", "exact_number",
           "finite_report", "interpolation_rows", "pattern_count"]

SYMBOLIC_PATTERNS = 175
"""The most count patterns handed to the symbolic reduction of a callable (binary up to G = 87, three values up to G = 10, five up to G = 4)."""

FLOAT_TOL = 1e-12
"""Relative tolerance of a verdict decided numerically (:func:`coefficient_report`)."""


@dataclass(frozen=True)
class CountPattern:
    r"""The reward of the answer labelled 1 and the counts of the other answers' rewards.

    Attributes
    ----------
    own : sympy number
        The reward of the answer labelled 1, :math:`y`.
    others : tuple of int
        How many of the other :math:`G - 1` answers take each of ``values``.
    values : tuple of sympy numbers
        The reward law's values, increasing.

    Examples
    --------
    >>> from derivations.variants import count_patterns
    >>> pat = count_patterns("binary", 3)[1]
    >>> pat.own, pat.others, pat.group()
    (0, (1, 1), (0, 0, 1))
    """

    own: sp.Expr
    others: tuple[int, ...]
    values: tuple

    @property
    def G(self) -> int:
        """The group size."""
        return 1 + sum(self.others)

    def group(self) -> tuple:
        """The group's rewards, the answer labelled 1 first, the others in increasing order."""
        return (self.own, *[v for v, c_ in zip(self.values, self.others) for _ in range(c_)])


def _compositions(m: int, n: int):
    """Every way to put ``n`` answers on ``m`` values, as count tuples."""
    for bars in itertools.combinations(range(n + m - 1), m - 1):
        edges = (-1, *bars, n + m - 1)
        yield tuple(b - a - 1 for a, b in zip(edges, edges[1:]))


def count_patterns(rewards: str | Sequence[float], G: int) -> tuple[CountPattern, ...]:
    r"""Every count pattern of a group of ``G`` under a binary or finite reward law, the answer labelled 1's reward first.

    Parameters
    ----------
    rewards : "binary" or list of numbers
        The reward law's values.
    G : int
        The group size, at least 2.

    Returns
    -------
    tuple of CountPattern
        Ordered by the answer labelled 1's reward, then by the others' counts
        (:math:`m\binom{G+m-2}{m-1}` patterns for :math:`m` values).

    Examples
    --------
    >>> from derivations.variants import count_patterns
    >>> [p.group() for p in count_patterns("binary", 2)]
    [(0, 1), (0, 0), (1, 1), (1, 0)]
    """
    law, values = reward_law(rewards)
    if law == "general":
        raise ValueError("rewards must be 'binary' or a list of values: a general law has no finite count patterns")
    G = require_group_size(G, needed=True)
    patterns = list(_compositions(len(values), G - 1))
    return tuple(CountPattern(v, c_, values) for v in values for c_ in patterns)


def _multinomial(counts) -> int:
    out, n = 1, 0
    for c_ in counts:
        n += c_
        out *= math.comb(n, c_)
    return out


@cache
def exact_number(x: float) -> sp.Expr:
    """A float as an exact number: a short closed form when one matches to 1e-14, else the float itself.

    Examples
    --------
    >>> from derivations.variants.patterns import exact_number
    >>> exact_number(0.75), exact_number(3 ** 0.5), exact_number(1 + 1e-11)
    (3/4, sqrt(3), 1.0000000000100000)
    """
    if not math.isfinite(x):
        raise ValueError(f"advantage returned a non-finite value {x}")
    guess = _nsimplified(x)
    if len(sp.sstr(guess)) <= 16 and abs(float(guess) - x) <= 1e-14 * max(1.0, abs(x)):
        return guess
    return sp.Float(x, 17)


def _nsimplified(x: float) -> sp.Expr:
    """``sympy.nsimplify(x)`` for a finite float, its search run once instead of twice when it finds nothing.

    ``nsimplify`` (SymPy 1.14) asks ``mpmath.identify`` at 30 digits, tolerance
    ``1e-15``, for a closed form; when there is none, its fallback
    ``_real_to_rational`` calls ``nsimplify(x, rational=False)``, which runs the
    same deterministic search a second time (about 25 ms) before it reads the
    15-digit decimal of ``x`` as a rational.  This is that code path, the second
    search skipped; integers, zero and anything evalf would chop go to
    ``nsimplify`` itself.  ``tests/test_variants.py`` compares the two on every
    kind of float the checker meets.
    """
    if x == int(x):
        return sp.nsimplify(x)
    fl = sp.Float(x)
    re, im = fl.evalf(30, chop=True).as_real_imag()
    if not (re and re.is_Number and im == 0):
        return sp.nsimplify(x)
    dps = mpmath.mp.dps
    try:
        mpmath.mp.dps = 30
        found = mpmath.identify(re._to_mpmath(99), constants={}, tol=10**-15)
    finally:
        mpmath.mp.dps = dps
    if found:
        expr = _formula(found)
        if expr and expr.is_finite is not False:
            return expr
    a = -fl if fl < 0 else fl
    d = sp.Pow(10, int(mpmath.log(a) / mpmath.log(10)))
    r = sp.Rational(str(a / d)) * d
    return -r if fl < 0 else r


_FORMULA_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv, ast.Pow: operator.pow}
_FORMULA_CALLS = {"sqrt": sp.sqrt, "exp": sp.exp, "log": sp.log}


def _formula(text: str) -> sp.Expr:
    """``sympify(text)`` for a formula of ``mpmath.identify``: integers, ``+ - * / **``, ``sqrt``, ``exp``, ``log``.

    ``sympify`` evaluates the same Python expression with every integer
    literal made a SymPy ``Integer`` (about 8 ms a string in its parser);
    this walks the parsed tree and applies the same operations in the same
    order.  Anything else is handed to ``sympify``.
    """
    def value(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return sp.Integer(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _FORMULA_OPS:
            return _FORMULA_OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else +inner
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FORMULA_CALLS
                and len(node.args) == 1 and not node.keywords):
            return _FORMULA_CALLS[node.func.id](value(node.args[0]))
        raise ValueError(node)

    try:
        return value(ast.parse(text, mode="eval").body)
    except (ValueError, SyntaxError):
        return sp.sympify(text)


def _value(x, pattern: CountPattern, constants: dict) -> sp.Expr:
    """One entry of a table or an evaluator's answer, checked and made exact."""
    if isinstance(x, bool) or not isinstance(x, (numbers.Real, sp.Expr)):
        raise TypeError(f"advantage must give a real number for the pattern {pattern.group()}, got {x!r}")
    if isinstance(x, float) or (isinstance(x, numbers.Real) and not isinstance(x, (int, sp.Expr))):
        return exact_number(float(x))
    x = sp.sympify(x)
    if x.free_symbols - set(constants) or not x.is_real or x.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        raise ValueError(f"advantage must give a finite real number (or an expression in the declared constants) for the pattern {pattern.group()}, got {x}")
    return x


class _Values:
    """The advantage's values on the count patterns, from an expression, a table or an evaluator."""

    def __init__(self, advantage, G: int, values: tuple, constants: dict):
        self.G, self.values = G, values
        self.patterns = list(_compositions(len(values), G - 1))
        if isinstance(advantage, sp.Basic):
            table = [self._from_expression(advantage, v, c_) for v in values for c_ in self.patterns]
        else:
            read = advantage.__getitem__ if isinstance(advantage, Mapping) else advantage
            table = []
            for v in values:
                for c_ in self.patterns:
                    pattern = CountPattern(v, c_, values)
                    try:
                        x = read(pattern)
                    except KeyError:
                        raise ValueError(f"advantage table has no value for the pattern {pattern} (see count_patterns)") from None
                    table.append(_value(x, pattern, constants))
        n = len(self.patterns)
        self.a = {v: table[k * n:(k + 1) * n] for k, v in enumerate(values)}

    def _from_expression(self, expr, v, c_) -> sp.Expr:
        group = CountPattern(v, c_, self.values).group()
        val = explicit_advantage(expr, self.G).xreplace({R[k + 1]: x for k, x in enumerate(group)})
        val = sp.nsimplify(sp.simplify(val)) if val.has(sp.Float) else sp.simplify(val)
        if val.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or val.has(sp.Indexed):
            raise ValueError(f"advantage is undefined on the group {list(group)} (got {val}): add an epsilon to a denominator that can vanish")
        return val

    def conditional(self, v, q) -> sp.Expr:
        r""":math:`\bar A(y) = \sum_n \binom{G-1}{n} \prod_k q_k^{n_k} A(y \mid n)`."""
        return sp.Add(*[_multinomial(c_) * sp.Mul(*[qk**ck for qk, ck in zip(q, c_)]) * val
                        for c_, val in zip(self.patterns, self.a[v])])

    def on_equal_rewards(self) -> bool:
        """Whether the advantage vanishes on every group whose rewards are all equal (one of the law's values)."""
        m = len(self.values)
        return all(nonzero(self.a[v][self.patterns.index(tuple((self.G - 1) * (k == j) for j in range(m)))]) is False
                   for k, v in enumerate(self.values))


def _q(m: int) -> tuple:
    return sp.symbols(f"q_1:{m + 1}", positive=True)


def finite_report(advantage: sp.Expr | Mapping | Callable, G: int, law: str, values: tuple, constants: dict, name: str,
                  zero_on_equal: bool | None = None) -> GroupReport:
    """The report for a binary or finite law at a number ``G``, from an expression, a table or an evaluator.

    ``zero_on_equal`` is the expression's answer (computed by the caller); for
    a table or evaluator it is read off the constant patterns.
    """
    m = len(values)
    tab = _Values(advantage, G, values, constants)
    scale = _scale(tab, values)
    binary = law == "binary"
    q = (1 - P, P) if binary else _q(m)
    grads = (-GRAD_P, GRAD_P) if binary else tuple(sp.Symbol(r"\nabla_{\theta} q_{%d}" % (k + 1), real=True) for k in range(m))
    cond = {v: tab.conditional(v, q) for v in values}
    # the displayed reduction: sum_v \bar A(y) grad q_y (for a binary law collected on grad p)
    if binary:
        bern = [sp.binomial(G - 1, k) * (tab.a[1][_binary_index(tab, k)] - tab.a[0][_binary_index(tab, k)]) for k in range(G)]
        reduced = sp.Add(*[b * P**k * (1 - P) ** (G - 1 - k) for k, b in enumerate(bern)], evaluate=False) * GRAD_P
        shown = r"$A(1, k) - A(0, k)$ (success minus failure among $k$ other successes) on the " + f"{G + 1}" + r" reward patterns; $S_{-i} \sim \mathrm{Bin}(G-1, p)$"
    else:
        reduced = sp.Add(*[sp.expand(cond[v]) * gq for v, gq in zip(values, grads)], evaluate=False)
        shown = r"condition on $R_1$; the others enter through their multinomial counts: " + f"{len(tab.patterns) * m}" + r" patterns"
    lhs = Expect(sp.Symbol("A_1", real=True) * S[1])
    law_text = r"$R \in \{0, 1\}$, $p = \Pr[R = 1]$" if binary else (
        r"$R \in \{" + ", ".join(map(sp.latex, values)) + r"\}$, $q_k = \Pr[R = y_k]$, $\sum_k q_k = 1$")
    d = Derivation(
        f"Expected update of {name} ({'binary' if binary else 'finite'} reward, G = {G})",
        assumptions=[law_text, f"$G = {G}$ answers drawn i.i.d. from $\\pi_\\theta$; $A_1$ the advantage of the answer labelled 1",
                     r"$\nabla_\theta J = \mathbb{E}[R s]$" + (r" $= \nabla_\theta p$" if binary else "")],
        unfold=None if binary else _finite_unfold(values, q, grads),
    )
    d.step(lhs, reduced, shown, proof=_reduction_proof(advantage, G, values, q, grads, constants, scale))
    depends = None
    if binary:
        residual = sp.Integer(0)
        c, depends = _binary_scale(d, bern, reduced / GRAD_P, G, scale)
        policy = {P}
    else:
        alphas = _interpolate(values, cond)
        c = _nice(sp.expand(alphas[1].subs(q[-1], 1 - sum(q[:-1]))))
        residual = sp.Add(*[_nice(sp.expand(alphas[dg].subs(q[-1], 1 - sum(q[:-1])))) * Expect(R_PLAIN**dg * S_PLAIN) for dg in range(2, m)])
        d.then(c * GRAD_J + residual, r"interpolate $\bar A(y) = \sum_{d<m} \alpha_d y^d$; $\sum_k \nabla q_k = 0$; $\sum_k q_k = 1$",
               proof=to_tolerance(1e-12, scale) if reduced.has(sp.Float) and not _exact(d, c * GRAD_J + residual) else None)
        policy = set(q)
    found, reason = verdict(c, residual, policy, "E[A_i s_i]", depends, scale)
    if not binary and found in ("scaled", "unbiased") and (c.free_symbols & policy or residual != 0):
        c, residual = exact_number(float(c.subs({x: 0 for x in policy}))), sp.Integer(0)  # the constant c is, fp64 rounding dropped
        d.then(c * GRAD_J, "coefficients of fp64 rounding dropped (each below the tolerance)", proof=to_tolerance(1e-12, scale))
    equal = tab.on_equal_rewards() if zero_on_equal is None and not isinstance(advantage, sp.Basic) else zero_on_equal
    return GroupReport(found, c, residual, reason, d, "binary" if binary else values, G, equal)


def _scale(tab: _Values, values: tuple) -> float:
    r"""The size of the numbers the reduction combines: :math:`\max(1, \max|a| \cdot \max_c \binom{G-1}{c} \cdot \max_d \sum_k |L_{dk}|)`.

    fp64 advantages of size :math:`10^6` carry rounding of about :math:`10^{-10}`, and the reduction adds
    them with multinomial weights and the interpolation's :math:`L = V^{-1}`: every tolerance on this
    route is relative to this size (and the page states the absolute bound).
    """
    largest = max((abs(float(sp.N(a))) for v in values for a in tab.a[v] if sp.sympify(a).is_number), default=1.0)
    weight = max(_multinomial(c) for c in tab.patterns)
    spread = max(float(sum(abs(x) for x in row)) for row in interpolation_rows(values)) if len(values) > 2 else 1.0
    return max(1.0, largest * weight * spread)


def _binary_scale(d: Derivation, bern: list, bernstein: sp.Expr, G: int, scale: float = 1.0) -> tuple[sp.Expr, bool | None]:
    r"""``(c, depends on p)`` for a binary law: :math:`c(p)` is constant iff its Bernstein coefficients are all equal.

    The Bernstein polynomials of degree :math:`G - 1` are linearly
    independent, so every coefficient is compared with the first (at
    :math:`G = 2` the only comparison is the one that carries :math:`p^1`).
    """
    c = bernstein
    diffs = [sp.radsimp(b / sp.binomial(G - 1, k)) for k, b in enumerate(bern)]
    equal = [nonzero(x - diffs[0], scale) for x in diffs[1:]]
    depends = True if any(e is True for e in equal) else (False if all(e is False for e in equal) else None)
    if depends is False and not bernstein.has(sp.Float):
        c = diffs[0]
        d.then(c * GRAD_P, r"equal coefficients; the Bernstein polynomials sum to 1")
    elif depends is False:
        c = diffs[0]
        d.then(c * GRAD_P, r"coefficients equal to fp64 rounding; the Bernstein polynomials sum to 1",
               proof=to_tolerance(1e-12, scale))
    elif not bernstein.has(sp.Float) and G <= 6:  # fp64 values, and long radicals, stay in the Bernstein form
        c_nice = _nice(sp.collect(sp.expand(bernstein), P))
        if len(sp.sstr(c_nice)) < len(sp.sstr(bernstein)):
            c = c_nice
            d.then(c * GRAD_P, "expand and collect")
    return c, depends


def _exact(d: Derivation, rhs: sp.Expr) -> bool:
    r"""Whether ``expand`` maps ``<last rhs> - rhs``, unfolded, to 0 (fp64 values whose rounding cancels): then the step is shown exact, else to a tolerance.

    Both sides are polynomials in :math:`q` and :math:`\nabla q` with float
    coefficients, and ``expand`` (the kernel's first canonicaliser) sums each
    monomial's floats; the later canonicalisers would only add the same floats
    in another order, and ``simplify`` took a second to say so.  This only
    chooses which claim to display: the kernel verifies whichever it is.
    """
    difference = d.steps[-1].rhs - rhs
    if d.unfold is not None:
        difference = d.unfold.apply(difference)
    return dict(CANONICALISERS)["expand"](evaluated(difference)) == 0


def _binary_index(tab: _Values, k: int) -> int:
    """Index of the pattern with ``k`` successes among the others (values (0, 1): counts (G-1-k, k))."""
    return tab.patterns.index((tab.G - 1 - k, k))


def _nice(c: sp.Expr) -> sp.Expr:
    """A readable exact form: a polynomial symmetric under p -> 1 - p written in u = p(1 - p)."""
    c = sp.sympify(c)
    if c.free_symbols != {P} or c.has(sp.Float) or not c.is_polynomial(P):
        return c
    rest = sp.expand(c)
    if is_zero(rest.subs(P, 1 - P) - rest) is None:
        return c
    out = sp.Integer(0)
    for k in range(sp.degree(rest, P) // 2, 0, -1):
        cf = sp.radsimp(sp.Poly(rest, P).coeff_monomial(P ** (2 * k)) * (-1) ** k)
        out += cf * (P * (1 - P)) ** k
        rest = sp.expand(rest - cf * (P * (1 - P)) ** k)
    if rest.has(P):
        return c
    return sp.radsimp(rest) + out


def _interpolate(values: tuple, cond: dict) -> dict:
    """Coefficients alpha_d of the polynomial through (v, \bar A(y)), d = 0..m-1."""
    m = len(values)
    V = sp.Matrix([[v**dg for dg in range(m)] for v in values])
    alpha = V.LUsolve(sp.Matrix([cond[v] for v in values]))
    return {dg: alpha[dg] for dg in range(m)}


def _finite_unfold(values: tuple, q: tuple, grads: tuple) -> Definitions:
    r"""Definitions: :math:`\nabla J` and the residual's :math:`\mathbb{E}[R^d s]` (:math:`2 \le d < m`) in :math:`\nabla q_k`; the last :math:`\nabla q_m = -\sum_{k<m} \nabla q_k`, :math:`q_m = 1 - \sum_{k<m} q_k`."""
    moments = {Expect(R_PLAIN**dg * S_PLAIN): sum(v**dg * g for v, g in zip(values, grads)) for dg in range(2, len(values))}
    return Definitions({**moments, GRAD_J: sum(v * g for v, g in zip(values, grads)), grads[-1]: -sum(grads[:-1]), q[-1]: 1 - sum(q[:-1])})


def _reduction_proof(advantage, G, values, q, grads, constants, scale: float = 1.0):
    """Proof of the reduction step: recompute sum_v \bar A(y) grad q_y from a fresh reading of the advantage.

    An expression is evaluated again on every pattern and on every ordering of
    the others' rewards that the pattern stands for (up to 1024 orderings), so
    a non-symmetric advantage, or a displayed value that is not the
    advantage's, fails the step; an evaluator is called again; a table is read
    again (the caller's callable was checked for orderings before it was
    tabulated, by :mod:`numeric.variants`).  The kernel sums the fresh table
    itself (:func:`~derivations.proofs.from_table`).
    """
    fresh = _Values(advantage, G, values, constants)
    if isinstance(advantage, sp.Basic):
        _require_symmetric(advantage, G, values, constants, fresh)
    table = [(v, c_, a) for v in values for c_, a in zip(fresh.patterns, fresh.a[v])]
    return from_table(sp.Symbol("A_1", real=True), S[1], values, q, grads, G, table, tol=1e-12, scale=scale)


def _require_symmetric(expr, G, values, constants, tab: _Values) -> None:
    """Every ordering of the others gives the pattern's value (checked on up to 1024 orderings per own value)."""
    orderings = list(itertools.islice(itertools.product(values, repeat=G - 1), 1024))
    index = {c_: k for k, c_ in enumerate(tab.patterns)}
    as_float = {v: [float(sp.N(y.subs(constants) if constants else y, 20)) for y in tab.a[v]] for v in values}
    explicit = explicit_advantage(expr, G)
    f = sp.lambdify([R[k + 1] for k in range(G)], explicit.subs(constants) if constants else explicit, "math", docstring_limit=0)
    for v in values:
        for others in orderings:
            group = [v, *others]
            x = f(*[float(t) for t in group])
            y = as_float[v][index[tuple(others.count(t) for t in values)]]
            if abs(float(x) - y) > 1e-10 * max(1.0, abs(float(x))):
                raise NotPermutationEquivariant(
                    f"advantage of answer 1 depends on the order of the other answers: group {[float(t) for t in group]} gives {float(x)}, "
                    f"its sorted pattern {y}"
                )


# ============================================================ above SYMBOLIC_PATTERNS: the verdict from the Bernstein coefficients


def pattern_count(m: int, G: int) -> int:
    r"""How many count patterns a law with ``m`` values has at ``G``: :math:`m\binom{G+m-2}{m-1}`.

    Examples
    --------
    >>> from derivations.variants.patterns import pattern_count
    >>> pattern_count(2, 64), pattern_count(5, 4), pattern_count(5, 64)
    (128, 175, 3832400)
    """
    m = require_int("m", m, minimum=1)
    G = require_group_size(G, needed=True)
    return m * math.comb(G + m - 2, m - 1)


def interpolation_rows(values: Sequence) -> tuple[tuple, ...]:
    r"""The exact inverse Vandermonde matrix :math:`L = V^{-1}` of the reward values: :math:`\alpha_d = \sum_k L_{dk}\, a(v_k)`.

    Row :math:`d` gives the coefficient of :math:`v^d` in the polynomial of
    degree :math:`< m` through the points :math:`(v_k, a(v_k))`.

    Examples
    --------
    >>> from derivations.variants.patterns import interpolation_rows
    >>> interpolation_rows([0, 1, 2])
    ((1, 0, 0), (-3/2, 2, -1/2), (1/2, -1, 1/2))
    """
    _, values = reward_law(list(values))
    m = len(values)
    L = sp.Matrix([[v**dg for dg in range(m)] for v in values]).inv()
    return tuple(tuple(L[dg, k] for k in range(m)) for dg in range(m))


def _bounds(bounds, m: int) -> list[tuple[float, float]]:
    if not isinstance(bounds, Sequence) or len(bounds) != m - 1:
        raise ValueError(f"bounds must hold one (low, high) pair for each degree d = 1..{m - 1}, got {bounds!r}")
    out = []
    for pair in bounds:
        if not (isinstance(pair, Sequence) and len(pair) == 2 and all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in pair)):
            raise TypeError(f"bounds must hold (low, high) pairs of real numbers, got {pair!r}")
        lo, hi = float(pair[0]), float(pair[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise ValueError(f"bounds must hold finite pairs with low <= high, got {pair!r}")
        out.append((lo, hi))
    return out


def coefficient_report(G: int, rewards: str | Sequence[float], bounds: Sequence, *, largest: float,
                       evaluate: Callable | None = None, name: str = "the advantage") -> GroupReport:
    r"""The verdict of a finite law at ``G`` from the range of the Bernstein coefficients :math:`\eta_d(n)`, decided numerically.

    With :math:`\bar A(y) = \sum_{d<m}\alpha_d(q)\,v^d`, the expected update is
    :math:`\alpha_1(q)\,\nabla_\theta J + \sum_{d \ge 2}\alpha_d(q)\,\mathbb{E}[R^d s]`,
    and (:class:`~derivations.variants.reports.FloatReduction`) :math:`\alpha_d`
    vanishes iff all its coefficients :math:`\eta_d(n)` do, and is a constant
    :math:`K` iff all of them equal :math:`K`.  Degree :math:`d`'s coefficients
    count as equal (or as 0) when they lie within

    .. math::

        \text{tol}_d = 10^{-12}\,\max\Bigl(1,\ \textstyle\sum_k |L_{dk}|\ \max_{y, n} |A(y \mid n)|\Bigr),

    the rounding a sum :math:`\sum_k L_{dk} A(y_k \mid n)` of fp64 values can
    carry, scaled.  The report has no derivation: its ``reduction`` shows the
    formula, the ranges and the tolerances, labelled as decided numerically.

    Parameters
    ----------
    G : int
        The group size.
    rewards : "binary" or list of numbers
        The finite reward law.
    bounds : sequence of (low, high)
        For :math:`d = 1..m-1`, the least and greatest :math:`\eta_d(n)` over every count pattern
        :math:`c` of the other :math:`G - 1` answers.
    largest : float
        :math:`\max |A(y \mid n)|` over the table (it scales the tolerance).
    evaluate : callable, optional
        ``q -> (alpha_1(q), ..., alpha_{m-1}(q))``, kept on the report for the numeric confirmation.
    name : str
        What to call the variant.

    Returns
    -------
    GroupReport
        With ``derivation=None`` and ``reduction`` set; :math:`c` is a number when
        :math:`\alpha_1` is a constant, else the undefined function :math:`\alpha_1(q)`;
        the residual names the moments :math:`\mathbb{E}[R^d s]` whose :math:`\alpha_d` is not 0.

    Examples
    --------
    RLOO under three reward values: :math:`\bar A(y) = v - \mathbb{E}[R]`, so every
    :math:`\eta_1(n) = 1` and every :math:`\eta_2(n) = 0`:

    >>> from derivations.variants.patterns import coefficient_report
    >>> rep = coefficient_report(64, [0, 1, 2], [(1.0, 1.0), (0.0, 0.0)], largest=2.0)
    >>> rep.verdict, rep.scale, rep.derivation is None
    ('unbiased', 1, True)
    >>> coefficient_report(64, [0, 1, 2], [(1.0, 1.0), (-0.1, 0.2)], largest=2.0).residual
    alpha_2(q_1, q_2, q_3)*Expect(R**2*s)
    """
    law, values = reward_law(rewards)
    if law == "general":
        raise ValueError("rewards must be 'binary' or a list of values: a general law has no count patterns")
    G = require_group_size(G, needed=True)
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if isinstance(largest, bool) or not isinstance(largest, numbers.Real) or not math.isfinite(largest) or largest < 0:
        raise ValueError(f"largest must be a finite number >= 0 (the largest |advantage| in the table), got {largest!r}")
    if evaluate is not None and not callable(evaluate):
        raise TypeError(f"evaluate must be callable or None, got {type(evaluate).__name__}")
    m = len(values)
    pairs = _bounds(bounds, m)
    L = interpolation_rows(values)
    tols = [FLOAT_TOL * max(1.0, float(sum(abs(x) for x in L[dg])) * float(largest)) for dg in range(1, m)]
    args = (P,) if law == "binary" else _q(m)
    alpha = [sp.Function(f"alpha_{dg}", real=True)(*args) for dg in range(m)]
    nonzero_degrees = [dg for dg in range(2, m) if max(abs(pairs[dg - 1][0]), abs(pairs[dg - 1][1])) > tols[dg - 1]]
    residual = sp.Add(*[alpha[dg] * Expect(R_PLAIN**dg * S_PLAIN) for dg in nonzero_degrees])
    lo, hi = pairs[0]
    constant = hi - lo <= tols[0]
    c = exact_number((lo + hi) / 2) if constant else alpha[1]
    what = "E[A_i s_i]"
    if nonzero_degrees:
        found, reason = "biased", f"{what} has a component along {', '.join(sp.sstr(Expect(R_PLAIN**dg * S_PLAIN)) for dg in nonzero_degrees)}, not a multiple of the policy gradient"
    elif not constant:
        found, reason = "reweighted", (f"{what} is c times the policy gradient with c = {sp.sstr(c)}, which depends on the policy "
                                       f"(its coefficients range over [{lo:.6g}, {hi:.6g}]): prompts are reweighted")
    elif abs((lo + hi) / 2 - 1) > tols[0]:
        found, reason = "scaled", f"{what} is the policy gradient times the constant c = {sp.sstr(c)}"
    else:
        found, reason = "unbiased", f"{what} is exactly the policy gradient (c = 1)"
    patterns = math.comb(G + m - 2, m - 1)
    reduction = FloatReduction(G, values, patterns, tuple((dg, *pairs[dg - 1], tols[dg - 1]) for dg in range(1, m)), tuple(alpha[1:]), evaluate)
    reason += f"; {reduction.badge()}"
    return GroupReport(found, c, residual, reason, None, "binary" if law == "binary" else values, G, None, reduction=reduction)
