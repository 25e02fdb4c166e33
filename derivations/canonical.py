r"""Canonicalisers: the CAS's test that a difference is zero.

:func:`is_zero` tries canonicalisers from cheap to expensive and names the
first that maps an expression to 0.  This is one of the two things the proof
kernel (:mod:`derivations.kernel`) trusts; the other is SymPy's sign decisions
(:mod:`derivations.regions`).

Two things make it fast without changing a verdict.  The verdict on one
expression (after ``unfold``) under one set of facts is remembered, so a claim
that a doctest, a chapter and a test all check is reduced once per process
(the verdict is a ``str`` or ``None``, nothing mutable is shared).  And an
expression shown not identically zero is refuted as soon as the cheapest
canonicaliser (``expand``, which proves most true steps) has failed: no sound
canonicaliser maps it to 0, so trying the rest would only return ``None``
slowly, and a true step that ``expand`` proves never pays for the search.  It
is shown so by a rational point its symbols' assumptions admit at which it is
an exact nonzero rational, or a real number that a 50-digit evaluation finds
clearly nonzero (:func:`refuting_point`), or by a symbol that occurs in it
only as one whole term :math:`c\,\delta` of its sum (varying :math:`\delta`
varies it; this one is tried first, before anything is evaluated).  A
refutation can only turn a would-be ✗ into an earlier ✗: a numerical error
could at worst reject a true step (a failure anyone sees), never accept a
false one.  A point never proves a step: a zero
there decides nothing.  (:func:`evaluated` is cheap for the same reason: a sum
whose closed form SymPy cannot find is returned as SymPy returns it, without
the search.)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from functools import lru_cache

import sympy as sp
from sympy.core.operations import AssocOp

from ._validate import require_expr, require_optional, require_optional_callable

__all__ = ["CANONICALISERS", "DerivationError", "evaluated", "facts_key", "is_zero", "refuting_point", "reject_vacuous_derivatives"]


class DerivationError(AssertionError):
    """A step of a derivation could not be verified (the message names the step and the reason)."""


def _exp_to_symbols(expr: sp.Expr) -> sp.Expr:
    """Replace each ``exp(u)`` by a positive symbol (after splitting ``exp(a + b)``).

    Only sound outside sums: an ``exp`` of a bound index is not one number.
    """
    if expr.has(sp.Sum, sp.Product, sp.Integral):
        return expr
    expr = sp.expand_power_exp(expr)
    exps = sorted(expr.atoms(sp.exp), key=sp.default_sort_key)
    if not exps:
        return expr
    return expr.xreplace({e: sp.Dummy("x", positive=True) for e in exps})


def _cancel(expr: sp.Expr) -> sp.Expr:
    return sp.cancel(sp.together(expr))


_SUM_INDEX = sp.Symbol("k_sum", integer=True)


def _canonical_sum(s: sp.Sum) -> sp.Expr:
    """One dummy name, one term per Sum, factors free of the index pulled out."""
    (x, lo, hi), = s.limits
    out = 0
    for term in sp.Add.make_args(sp.expand(s.function.xreplace({x: _SUM_INDEX}))):
        free, bound = term.as_independent(_SUM_INDEX, as_Add=False)
        out += free * sp.Sum(bound, (_SUM_INDEX, lo, hi))
    return out


def _sums_to_symbols(expr: sp.Expr) -> sp.Expr:
    """Canonicalise every single-index ``Sum``, then treat each distinct sum as an atom."""
    if not expr.has(sp.Sum):
        return expr
    for _ in range(3):  # canonical form can expose sums that doit() now resolves (Kronecker deltas)
        new = evaluated(expr.replace(lambda e: isinstance(e, sp.Sum) and len(e.limits) == 1, _canonical_sum))
        if new == expr:
            break
        expr = new
    sums = sorted(expr.atoms(sp.Sum), key=sp.default_sort_key)
    return expr.xreplace({s: sp.Dummy("S") for s in sums})


def _as_is(expr: sp.Expr) -> sp.Expr:
    return expr


_STRICT = {sp.StrictGreaterThan: sp.StrictLessThan, sp.GreaterThan: sp.LessThan}


def _as_sign_condition(rel: sp.Basic) -> sp.Basic:
    """``a < b`` as ``expand(a - b) < 0`` (and ``a > b`` as ``expand(b - a) < 0``): one form for one condition."""
    if isinstance(rel, (sp.StrictLessThan, sp.LessThan)):
        return rel.func(sp.expand(rel.lhs - rel.rhs), 0)
    return _STRICT[type(rel)](sp.expand(rel.rhs - rel.lhs), 0)


def _piecewise_folded(expr: sp.Expr) -> sp.Expr:
    """Each order condition in one form, then the ``Piecewise`` terms folded into one (branch by branch).

    ``r > 1 + eps`` and ``eps < r - 1`` are one condition written twice; once
    both read ``1 + eps - r < 0`` the branches of a difference line up.
    """
    if not expr.has(sp.Piecewise):
        return expr
    orders = expr.atoms(sp.StrictLessThan, sp.LessThan, sp.StrictGreaterThan, sp.GreaterThan)
    return sp.piecewise_fold(expr.xreplace({rel: _as_sign_condition(rel) for rel in orders}))


# (name, rewrite, reduction): the canonicaliser is reduction(rewrite(expr))
_STAGES = (
    ("expand", _as_is, sp.expand),
    ("cancel(together)", _as_is, _cancel),
    ("exp->x, cancel(together)", _exp_to_symbols, _cancel),
    ("expand_log, cancel", sp.expand_log, _cancel),
    ("sums as atoms, cancel(together)", lambda e: _exp_to_symbols(_sums_to_symbols(e)), _cancel),
    ("piecewise folded, cancel(together)", _piecewise_folded, _cancel),
    ("simplify", _as_is, sp.simplify),
)


def _composed(rewrite: Callable, reduction: Callable) -> Callable[[sp.Expr], sp.Expr]:
    return lambda e: reduction(rewrite(e))


CANONICALISERS: tuple[tuple[str, Callable[[sp.Expr], sp.Expr]], ...] = tuple((name, _composed(rw, red)) for name, rw, red in _STAGES)
"""Canonicalisers tried in order: the first that maps ``lhs - rhs`` to 0 proves the step."""


def _entries(expr) -> list[sp.Expr]:
    if isinstance(expr, sp.MatrixBase):
        return list(expr)
    return [sp.sympify(expr)]


def is_zero(expr: sp.Basic | sp.MatrixBase | float, facts: Mapping | None = None, unfold: Callable | None = None) -> str | None:
    """Name of the canonicaliser that reduces ``expr`` (scalar or matrix) to 0, else ``None``.

    ``unfold`` rewrites display notation into definitions (``pi[a]`` into
    ``exp(theta[a]) / Z``, say) before unevaluated operators are evaluated;
    ``facts`` is a substitution applied after that, e.g.
    ``{Sum(p[a], (a, 1, K)): 1}``.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import is_zero
    >>> x = sp.Symbol("x")
    >>> is_zero((x + 1) ** 2 - x**2 - 2 * x - 1)
    'expand'
    >>> is_zero(sp.exp(x) / (1 + sp.exp(x)) - 1 / (1 + sp.exp(-x)))
    'cancel(together)'
    >>> is_zero(x) is None
    True
    """
    require_expr("expr", expr)
    require_optional("facts", facts, Mapping, "a mapping")
    require_optional_callable("unfold", unfold)
    known = facts_key(facts)
    used = []
    for entry in _entries(expr):
        if unfold is not None:
            entry = unfold(entry)
        name = _reduced_by(entry, known) if known is not None and _hashable(entry) else _reduce(entry, facts)
        if name is None:
            return None
        used.append(name)
    # the most expensive canonicaliser any entry needed
    order = [name for name, _ in CANONICALISERS]
    return max(used, key=order.index) if used else "expand"


def facts_key(facts: Mapping | None) -> frozenset | None:
    """``facts`` as a hashable key, ``frozenset()`` for none, ``None`` for facts that cannot be one (unhashable, not SymPy).

    SymPy substitutes a mapping in its own canonical order, so the order is
    immaterial.  The canonicalisers' verdicts and the kernel's are remembered
    under this key.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.canonical import facts_key
    >>> a, b = sp.symbols("a b")
    >>> facts_key({a: 1, b: 2}) == facts_key({b: 2, a: 1}), facts_key(None), facts_key({a: [1, 2]})
    (True, frozenset(), None)
    """
    require_optional("facts", facts, Mapping, "a mapping")
    if not facts:
        return frozenset()
    try:
        key = frozenset((sp.sympify(k), sp.sympify(v)) for k, v in facts.items())
    except (TypeError, sp.SympifyError):
        return None
    return key if _hashable(key) else None


def _hashable(x) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


@lru_cache(maxsize=8192)
def _reduced_by(entry: sp.Basic, facts: frozenset) -> str | None:
    """:func:`_reduce`, remembered per (expression, facts): both are immutable, the verdict a ``str`` or ``None``."""
    return _reduce(entry, dict(facts))


def _reduce(entry: sp.Basic, facts: Mapping | None) -> str | None:
    """The first canonicaliser that maps the unfolded ``entry`` to 0 once the facts are substituted, else ``None``.

    ``expand`` is tried before any refutation (it proves most true steps, and
    a refutation there would only find zeros); the lone-term test, which costs
    nothing, before ``expand``.
    """
    reject_vacuous_derivatives(entry)
    if not facts and _alone(entry) is not None:
        return None
    shown = entry
    entry = evaluated(entry)
    if facts:
        # split logs while the symbols still carry their signs (a fact like pi_K = 1 - ... hides them);
        # without force, expand_log splits only what the assumptions allow
        entry = evaluated(sp.expand_log(entry).subs(facts))
    cheapest, _, expand = _STAGES[0]
    tried = {(expand, entry)}
    try:
        if expand(entry) == 0:
            return cheapest
    except Exception:  # a canonicaliser that breaks proves nothing
        pass
    if not facts and refuting_point(shown) is not None:
        return None
    if (facts or entry != shown) and _refuted(entry):
        return None
    for name, rewrite, reduction in _STAGES:
        try:
            rewritten = rewrite(entry)
            if (reduction, rewritten) in tried:
                continue  # the same reduction of the same expression already gave a nonzero result
            tried.add((reduction, rewritten))
            reduced = reduction(rewritten)
        except Exception:  # a canonicaliser that breaks proves nothing; try the next
            continue
        if reduced == 0:
            return name
    return None


def evaluated(expr: sp.Basic) -> sp.Basic:
    """``expr.doit()``, each ``Sum``, ``Derivative`` and other evaluating node evaluated once per process.

    Where a node's ``doit`` is the generic one (``Add``, ``Mul``, ``Pow``, a
    function application: rebuild from the arguments' ``doit``), it is rebuilt
    here the same way; every other node's ``doit`` is remembered (an expression
    is immutable and ``doit`` a function of it).  So the sums that a chain's
    neighbouring steps, a perturbed right-hand side, a doctest and a chapter
    share are evaluated once.  A sum over a symbolic range that SymPy's closed
    forms cannot do (a term holds a table entry or an undefined function at
    the bare index, and none is shifted) is returned as ``doit`` returns it,
    without the search (:func:`_beyond_closed_form`).

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.canonical import evaluated
    >>> k, n = sp.symbols("k n", integer=True, positive=True)
    >>> evaluated(2 * sp.Sum(k, (k, 1, n))).factor()
    n*(n + 1)
    >>> evaluated("k")
    Traceback (most recent call last):
    ...
    TypeError: expr must be a SymPy expression or a real number, got str
    """
    expr = require_expr("expr", expr)
    if not isinstance(expr, sp.Basic):
        return expr.doit() if isinstance(expr, sp.MatrixBase) else sp.sympify(expr)
    return _evaluated(expr)


def _evaluated(e: sp.Basic) -> sp.Basic:
    how = type(e).doit
    if how is sp.Atom.doit:
        return e
    if how is AssocOp.doit:
        return e.func(*[_evaluated(a) for a in e.args], evaluate=True)
    if how is sp.Basic.doit:
        return e.func(*[_evaluated(a) if isinstance(a, sp.Basic) else a for a in e.args])
    return _doit(e) if _hashable(e) else e.doit()


@lru_cache(maxsize=8192)
def _doit(node: sp.Basic) -> sp.Basic:
    if isinstance(node, sp.Sum):
        kept = _beyond_closed_form(node)
        if kept is not None:
            return kept
    return node.doit()


# ------------------------------------------------------------ sums SymPy would leave unevaluated

try:  # the dummy index Sum.doit substitutes: the index with every assumption both limits share (None: it has them)
    from sympy.concrete.summations import _dummy_with_inherited_properties_concrete as _inherited_dummy
except ImportError:  # pragma: no cover - a SymPy without it: every sum goes to doit
    _inherited_dummy = None


def _beyond_closed_form(s: sp.Sum) -> sp.Sum | None:
    r"""What ``s.doit()`` returns when SymPy's closed forms cannot succeed: ``s`` with its summand evaluated; else ``None``.

    Over a range of symbolic length, ``Sum.doit`` tries Faulhaber, geometric,
    telescoping, Gosper, hypergeometric and residue closed forms of the
    expanded summand (a second or more on the sums of undefined table entries
    and functions) before it gives up and returns the sum with its summand
    evaluated; and it sums a sum of terms only if it sums every term.  Those
    forms cannot sum a term of the expanded summand that holds a table entry
    or undefined function :math:`h` at the index :math:`i` when every such
    entry in the summand has the bare index among its arguments
    (:math:`h_i`, :math:`h(0, i)`, never :math:`h_{i+1}`): the values
    :math:`h_i` are independent unknowns, so no formula in :math:`i` and the
    limits sums them; the ratio of consecutive terms holds
    :math:`h_{i+1}/h_i`, which is not rational in :math:`i` (Gosper and the
    hypergeometric forms need it rational); and the term shifted to
    :math:`i + s`, :math:`s \ne 0`, holds :math:`h_{i+s}`, which no other term
    holds, so it cancels none (telescoping needs that).  Here that give-up
    result is returned without the attempts.  Every case this does not
    recognise (a range of numeric length, a Kronecker delta or ``Piecewise``
    SymPy sums by cases, a matrix, an empty or reversed range, an infinite
    limit) goes to ``doit`` unchanged.
    """
    if _inherited_dummy is None:
        return None
    reps = {}
    for limit in s.limits:
        if len(limit) != 3:
            return None
        d = _inherited_dummy(limit)
        if d is not None:
            reps[limit[0]] = d
    if reps:  # as Sum.doit: the index first takes the assumptions its limits give it
        kept = _beyond_closed_form(s.xreplace(reps))
        return None if kept is None else kept.xreplace({v: k for k, v in reps.items()})
    i, a, b = s.limits[0]
    if s.function.is_Matrix or a.has(sp.oo, -sp.oo) or b.has(sp.oo, -sp.oo) or (b - a).is_Integer or a == b:
        return None
    if ((b - a).is_integer and (b - a).is_negative is not False) or (a.is_comparable and b.is_comparable):
        return None  # a reversed range, or limits SymPy orders first
    f = _evaluated(s.function)
    if f.is_zero is True or i not in f.free_symbols or not _opaque_in(f, i):
        return None
    return s if f == s.function else s.func(f, *s.limits)


def _opaque_in(f: sp.Expr, i: sp.Symbol) -> bool:
    """A term of ``expand(f)`` holds a table entry or undefined function at the bare index ``i``, and none at a shifted one."""
    if f.has(sp.Piecewise) or _delta_in(f, i):
        return False
    if any(i in x.variables for x in f.atoms(sp.Sum, sp.Product, sp.Integral, sp.Lambda)):
        return False  # the index bound again inside: its occurrences there are another variable
    entries = [x for x in sp.expand(f).atoms(sp.Indexed, sp.core.function.AppliedUndef) if i in x.free_symbols]
    return bool(entries) and all(a == i or i not in a.free_symbols for x in entries for a in _arguments(x))


def _arguments(entry: sp.Basic) -> tuple:
    return entry.indices if isinstance(entry, sp.Indexed) else entry.args


def _delta_in(f: sp.Expr, i: sp.Symbol) -> bool:
    """A Kronecker delta in ``i`` among the terms and factors of ``f``, or of a sum inside (which SymPy factors first)."""
    if isinstance(f, sp.KroneckerDelta):
        return i in f.free_symbols
    if isinstance(f, sp.Sum):
        return _delta_in(f.function, i)
    return (f.is_Add or f.is_Mul or f.is_Pow) and any(_delta_in(x, i) for x in f.args)


# ------------------------------------------------------------ refutation at a rational point

_UNEVALUATED = (sp.Integral, sp.Derivative, sp.Subs, sp.Limit, sp.Lambda, sp.Idx)  # nothing exact to evaluate at a point
_CANDIDATES = (*map(sp.Integer, (0, 1, 2, 3, -1, -2, 5, 7)), *(sp.Rational(n, d) for n, d in ((1, 2), (-1, 3), (3, 7), (-5, 11))))


def _admits(atom: sp.Basic, value: sp.Rational) -> bool:
    """``value`` has every assumption SymPy knows of ``atom`` (``positive``, ``integer``, ``zero``, ...), true or false."""
    return all(getattr(value, f"is_{key}") is known for key, known in atom.assumptions0.items())


def _point(atoms: list, rng: random.Random | None, shrink: int = 1) -> dict | None:
    """Admissible values for ``atoms``: the simplest each admits (``rng`` None), or pseudo-random small ones, the non-integers
    divided by ``shrink``; ``None`` if one admits none."""
    out = {}
    for atom in atoms:
        if rng is None:
            choices = _CANDIDATES
        else:
            d = rng.choice((2, 3, 5, 7, 11, 13))
            q = sp.Rational(rng.randint(0, 7) * d + rng.randint(1, d - 1), d * shrink) * rng.choice((1, -1))  # never an integer
            n = sp.Integer(rng.randint(2, 6))  # an integer stays small: it may be a sum's upper limit
            choices = (q, -q, n, -n, *_CANDIDATES)
        value = next((v for v in choices if _admits(atom, v)), None)
        if value is None:
            return None
        out[atom] = value
    return out


def _plain_symbols(expr: sp.Basic) -> set:
    """The symbols of ``expr`` outside a table's name (the label of an ``IndexedBase`` names the table, not a value)."""
    if isinstance(expr, sp.IndexedBase):
        return set()
    if isinstance(expr, sp.Symbol):
        return {expr}
    return set().union(*map(_plain_symbols, expr.args)) if expr.args else set()


def refuting_point(expr: sp.Basic) -> dict | None:
    r"""A rational point, admissible under the symbols' assumptions, at which ``expr`` is clearly nonzero; else ``None``.

    Every free symbol (then every table entry :math:`p_i` with a numeric
    index) gets a rational value that has each of its stated assumptions
    (positive, integer, nonzero, ...); a sum or product whose limits become
    integers is expanded term by term.  If ``expr`` then evaluates, by exact
    arithmetic alone, to a nonzero ``Rational``, it is not identically zero on
    the domain the assumptions describe, and no sound canonicaliser maps it to
    0: a rigorous refutation.  A value in ``exp``, ``log`` or roots of
    rationals is evaluated to 50 digits and refutes only when it is real,
    finite, above :math:`10^{-30}` times the largest term of any sum inside it,
    and SymPy's strict evaluation guarantees those digits.  Tried at the
    simplest admissible point (where :math:`e^0 = 1` keeps a softmax rational)
    and at one pseudo-random one (fixed seed); and where either left the real
    line (a logarithm of a negative number: after a fact
    :math:`\pi_3 = 1 - \pi_1 - \pi_2` the first point has
    :math:`\pi_3 = -1`), at a pseudo-random one whose non-integer values are
    each below one over the number of values, so that such sums stay inside
    their domain.  Anything else (a complex or
    infinite value, a division by zero, a derivative, an undefined function, a
    sum whose upper limit falls below its lower) refutes nothing.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.canonical import refuting_point
    >>> x, d = sp.Symbol("x"), sp.Symbol("delta", positive=True)
    >>> refuting_point((x + 1) ** 2 - x**2 - 2 * x - 1) is None
    True
    >>> refuting_point(sp.exp(x) / (1 + sp.exp(x)) - 1 / (1 + sp.exp(-x)) + d)
    {delta: 1, x: 0}
    >>> k, K = sp.Symbol("k", integer=True), sp.Symbol("K", integer=True, positive=True)
    >>> refuting_point(sp.Sum(k, (k, 1, K)) - K * (K + 1) / 2) is None
    True
    >>> refuting_point(sp.Sum(k, (k, 1, K)) - K**2 / 2)
    {K: 1}
    >>> y = sp.Symbol("y", positive=True)
    >>> refuting_point(sp.log(y * sp.exp(y)) - sp.log(y) - y + sp.sqrt(y) * sp.sqrt(2 * y) - sp.sqrt(2) * y) is None
    True
    >>> refuting_point(sp.log(y * sp.exp(y)) - y - d)
    {delta: 1, y: 1}
    >>> p1, p2 = sp.symbols("pi_1 pi_2", positive=True)
    >>> refuting_point((1 - p1 - p2) * sp.log(1 - p1 - p2))  # pi_3 log pi_3 after pi_3 = 1 - pi_1 - pi_2: small values
    {pi_1: 21/88, pi_2: 5/48}
    >>> big, tiny = sp.exp(100 * y), sp.exp(-100 * y) / 10**40  # about 1e43 and 1e-83 at y = 1
    >>> refuting_point((big + 1) ** 2 - big**2 - 2 * big - 1 + tiny) is None  # too small beside its terms to trust
    True
    """
    require_expr("expr", expr)
    expr = sp.sympify(expr)
    if not isinstance(expr, sp.Expr) or expr.has(*_UNEVALUATED) or expr.atoms(sp.core.function.AppliedUndef):
        return None
    symbols = sorted(_plain_symbols(expr) & expr.free_symbols, key=sp.default_sort_key)
    named = {b.label for b in expr.atoms(sp.IndexedBase)} | {v for x in expr.atoms(sp.Sum, sp.Product) for v in x.variables}
    if named & set(symbols):
        return None  # a table's name or a summation index that is also free: substituting one would change the other
    rng = random.Random(0)
    left_the_real_line = False
    for draw, small in ((None, False), (rng, False), (rng, True)):
        if small and not left_the_real_line:
            break
        at = _point(symbols, draw, 8 * len(symbols) if small else 1)
        if at is None:
            return None
        try:
            value = expr.xreplace(at)
            if value.has(sp.Sum, sp.Product):
                limits = [lim for x in value.atoms(sp.Sum, sp.Product) for lim in x.limits]
                if not all(lo.is_Integer and hi.is_Integer and hi >= lo - 1 for _, lo, hi in limits):
                    continue
                value = evaluated(value)  # a sum at the point, shared by a step and its perturbation, evaluated once
            entries = sorted(value.atoms(sp.Indexed), key=sp.default_sort_key)
            if any(not i.is_Integer for e in entries for i in e.indices):
                continue
            table = _point(entries, draw, 8 * len(entries) if small else 1)
            if table is None:
                return None
            value = value.xreplace(table)
        except (TypeError, ValueError, ZeroDivisionError, ArithmeticError):
            continue
        left_the_real_line = left_the_real_line or value.has(sp.I)
        if _clearly_nonzero(value):
            return {**at, **table}
    return None


_DIGITS = 50
_RELATIVE = sp.Float("1e-30")


def _clearly_nonzero(value: sp.Basic) -> bool:
    r"""``value`` (an expression in no symbol) is an exact nonzero rational, or a real number clearly not 0.

    A value in ``exp``, ``log``, roots ... of rationals is evaluated to
    ``_DIGITS`` significant digits by SymPy's strict evaluation (which raises
    rather than return a digit it cannot guarantee); it counts as nonzero only
    when it is real, finite and larger than ``_RELATIVE`` times the largest
    term of any sum inside it.  Anything complex, infinite, undefined, not
    evaluable to that precision or holding a float (a rounded number) counts as
    not clearly nonzero.
    """
    if isinstance(value, sp.Rational):
        return value != 0
    if not isinstance(value, sp.Expr) or value.free_symbols or value.has(sp.Float, sp.Sum, sp.Product, *_UNEVALUATED):
        return False  # a float in the claim is a rounded number: the canonicalisers, not a point, judge it
    try:
        approx = value.evalf(_DIGITS, strict=True)
        if not approx.is_Float or approx == 0:
            return False
        terms = [t.evalf(15) for node in sp.preorder_traversal(value) if node.is_Add for t in node.args]
        if not all(t.is_number and t.is_finite for t in terms):
            return False
        scale = max((abs(t) for t in terms), default=abs(approx))
        return bool(abs(approx) > _RELATIVE * scale)
    except Exception:  # PrecisionExhausted, or an evaluation that breaks: nothing is refuted
        return False


def _alone(expr: sp.Basic) -> sp.Symbol | None:
    r"""A symbol that occurs in ``expr`` once, as a whole term ``c\,\delta`` of its top-level sum (``c`` a nonzero number).

    Then ``expr = A + c\,\delta`` with ``A`` free of :math:`\delta`, and two
    admissible values of :math:`\delta` give two different values of ``expr``:
    it is not identically zero (a symbol that is not known to be 0 admits
    infinitely many values).  This refutes a step whose right-hand side gained
    a free term, whatever else it holds (undefined functions, derivatives).
    """
    if not isinstance(expr, sp.Add):
        return None
    for term in expr.args:
        c, symbol = term.as_coeff_Mul()
        if not (isinstance(symbol, sp.Symbol) and c.is_nonzero and symbol.is_zero is not True):
            continue
        if not any(other.has(symbol) for other in expr.args if other is not term):
            return symbol
    return None


def _refuted(expr: sp.Basic) -> bool:
    """``expr`` is shown not identically zero: a lone free term (:func:`_alone`) or a refuting point (:func:`refuting_point`)."""
    return _alone(expr) is not None or refuting_point(expr) is not None


def reject_vacuous_derivatives(expr: sp.Basic) -> None:
    """Refuse a displayed derivative of an undefined function with respect to a variable not among its arguments.

    SymPy evaluates ``Derivative(pi(theta), theta_j)`` to 0 when ``theta_j`` is
    not an argument of ``pi``, while a reader sees a derivative of the policy:
    such a step would be checked against something other than what it shows.
    (A derivative of a plain symbol or table entry, ``log P[s, a]``, is a
    statement that it is free of the variable, and stays allowed.)
    """
    require_expr("expr", expr)
    if not isinstance(expr, sp.Basic):
        return
    for d in expr.atoms(sp.Derivative):
        if not d.expr.atoms(sp.core.function.AppliedUndef):
            continue
        for v, _ in d.variable_count:
            if not d.expr.has(v.base if isinstance(v, sp.Indexed) else v):
                raise DerivationError(
                    f"the displayed derivative {sp.sstr(d)} is of an undefined function free of {v}: "
                    "SymPy would check it as 0; unfold the notation into definitions first"
                )
