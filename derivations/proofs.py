r"""Proofs of steps that are not plain equalities, each a function of the displayed claim.

A :class:`~derivations.derivation.Step` whose relation is not ``=`` (or whose
equality the canonicalisers cannot reach) carries a ``proof``.  Every proof
here is built from its *method* and its *data*, and then receives the step's
displayed :class:`~derivations.derivation.Claim`; it never holds a copy of the
statement it proves.  Change the displayed right-hand side and the proof sees
the change.

:func:`holds`
    Decide the relation directly: ``rhs - lhs`` canonicalised, its sign read
    off the factored form (positive symbols make it decidable).
:func:`on_regions`, :func:`interval_points`
    A case split: the claim is decided at a symbolic interior point of each
    region (every ``Min``/``Max``/``Abs``/``Piecewise`` resolved by the sign of
    a factored difference).  :func:`interval_points` builds points that cover
    a line cut at given breakpoints, so no region can be forgotten.
:func:`by_lemma`
    Instantiate a verified derivation (its :meth:`~derivations.Derivation.statement`),
    possibly term by term inside a sum.
:func:`minimum_over`, :func:`numerically`, :func:`same_solutions`, :func:`is_argmin`, :func:`at_values`
    A minimum over an interval, a numerical inequality between constants,
    equal solution sets, a unique minimiser, and instances of a parameter.

Examples
--------
>>> import sympy as sp
>>> from derivations import Derivation
>>> from derivations.proofs import interval_points, on_regions
>>> x = sp.Symbol("x", real=True)
>>> d = Derivation("positive part")
>>> d = d.step(sp.Max(x, 0), x / 2 + sp.Abs(x) / 2, "on $x < 0$, $x = 0$, $x > 0$",
...            proof=on_regions(*interval_points(x, [0])))
>>> d.verify().proved_by()
{'regions': 1}
>>> d.perturbed(0).verify()
Traceback (most recent call last):
...
derivations.derivation.DerivationError: positive part: step 1 (on $x < 0$, $x = 0$, $x > 0$) does not hold: ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import sympy as sp

from ._validate import require_expr, require_int, require_optional, require_optional_callable, require_symbol
from .derivation import Claim, Derivation, is_zero

__all__ = [
    "Argmin",
    "at_values",
    "by_lemma",
    "decide_sign",
    "holds",
    "interval_points",
    "is_argmin",
    "minimum_over",
    "numerically",
    "on_regions",
    "relation_holds",
    "resolve",
    "same_solutions",
    "Undecided",
]


def _named(name: str, fn: Callable[[Claim], bool]) -> Callable[[Claim], bool]:
    fn.name = name
    return fn


# ------------------------------------------------------------- signs and cases


def _signs(expr) -> frozenset | None:
    """The signs ``expr`` can take (a subset of {-1, 0, 1}) as far as SymPy can tell, else ``None``."""
    expr = sp.sympify(expr)
    for form in (expr, sp.factor(sp.cancel(sp.together(expr)))):
        if form.is_zero:
            return frozenset({0})
        if form.is_positive:
            return frozenset({1})
        if form.is_negative:
            return frozenset({-1})
        if form.is_nonnegative:
            return frozenset({0, 1})
        if form.is_nonpositive:
            return frozenset({-1, 0})
    return None


def _claim(claim) -> Claim:
    if not isinstance(claim, Claim):
        raise TypeError(f"claim must be a Claim (a step's displayed statement), got {type(claim).__name__}")
    return claim


def _relation(relation) -> str:
    if not isinstance(relation, str) or relation not in _KNOWN_RELATIONS:
        raise ValueError(f"relation must be one of {sorted(_KNOWN_RELATIONS)}, got {relation!r}")
    return relation


_KNOWN_RELATIONS = ("=", "<=", ">=", "<", ">", "=>", "<=>")


def _set(name: str, value) -> sp.Set:
    if not isinstance(value, sp.Set):
        raise TypeError(f"{name} must be a SymPy Set (e.g. sp.Interval(0, 1)), got {type(value).__name__}")
    return value


def decide_sign(expr) -> int | None:
    """``1``, ``0`` or ``-1`` when SymPy can decide the sign of ``expr``, else ``None``.

    The expression is brought to one fraction and factored first, so that
    products and quotients of positive symbols are recognised.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.proofs import decide_sign
    >>> d, e = sp.symbols("delta varepsilon", positive=True)
    >>> decide_sign((1 + e) * (1 + d) - 1 - e), decide_sign(d - e)
    (1, None)
    """
    require_expr("expr", expr)
    s = _signs(expr)
    return next(iter(s)) if s is not None and len(s) == 1 else None


def _at_least(expr, strict: bool) -> bool:
    """``expr > 0`` (strict) or ``expr >= 0`` is established."""
    s = _signs(expr)
    if s is None:
        s = _signs(sp.expand(expr))
    return s is not None and s <= ({1} if strict else {0, 1})


def _truth(rel) -> bool | None:
    """The truth value of a relational, decided by the sign of its difference."""
    if rel in (sp.true, sp.false):
        return bool(rel)
    if isinstance(rel, sp.Eq):
        s = decide_sign(rel.lhs - rel.rhs)
        return None if s is None else s == 0
    if isinstance(rel, sp.Ne):
        s = decide_sign(rel.lhs - rel.rhs)
        return None if s is None else s != 0
    strict = rel.rel_op in (">", "<")
    gap = rel.gts - rel.lts  # the claim is gts >= lts (or >)
    if _at_least(gap, strict):
        return True
    if _at_least(-gap, not strict):
        return False
    return None


class Undecided(Exception):
    """A ``Min``/``Max``/``Abs``/``Piecewise`` whose branch the CAS could not decide."""


def _resolve(e):
    if isinstance(e, sp.MatrixBase):
        return e.applyfunc(_resolve)
    if not isinstance(e, sp.Basic) or not e.args or isinstance(e, (sp.Symbol, sp.Indexed, sp.Dummy)):
        return e
    if isinstance(e, sp.Piecewise):
        for value, cond in e.args:
            t = _truth(_resolve(cond))
            if t is None:
                raise Undecided(sp.sstr(cond))
            if t:
                return _resolve(value)
        raise Undecided(f"no branch of {sp.sstr(e)} holds")
    e = e.func(*[_resolve(a) for a in e.args])
    if isinstance(e, (sp.Min, sp.Max)):
        args = list(e.args)
        sign = 1 if isinstance(e, sp.Max) else -1
        for cand in args:
            if all(_at_least(sign * (cand - other), False) for other in args if other is not cand):
                return cand
        raise Undecided(sp.sstr(e))
    if isinstance(e, sp.Abs):
        if _at_least(e.args[0], False):
            return e.args[0]
        if _at_least(-e.args[0], False):
            return -e.args[0]
        raise Undecided(sp.sstr(e))
    if isinstance(e, sp.sign):
        s = decide_sign(e.args[0])
        if s is None:
            raise Undecided(sp.sstr(e))
        return sp.Integer(s)
    if isinstance(e, sp.Heaviside):
        s = decide_sign(e.args[0])
        if s is None or s == 0:  # Heaviside(0) is a convention, not a fact
            raise Undecided(sp.sstr(e))
        return sp.Integer(int(s > 0))
    if isinstance(e, sp.core.relational.Relational):
        t = _truth(e)
        if t is None:
            raise Undecided(sp.sstr(e))
        return sp.true if t else sp.false
    return e


def resolve(expr):
    """``expr`` with every ``Piecewise``, ``Min``, ``Max``, ``Abs``, ``sign``, ``Heaviside`` and relation decided.

    Each is decided by the sign of a factored difference (:func:`decide_sign`);
    ``None`` if one cannot be decided.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.proofs import resolve
    >>> d, e = sp.symbols("delta varepsilon", positive=True)
    >>> r = (1 + e) * (1 + d)
    >>> resolve(sp.Min(r, 1 + e))
    varepsilon + 1
    >>> resolve(sp.Min(d, e)) is None
    True
    """
    require_expr("expr", expr)
    try:
        return _resolve(sp.sympify(expr))
    except Undecided:
        return None


def _is_condition(e) -> bool:
    return isinstance(e, sp.logic.boolalg.Boolean) and not isinstance(e, sp.Expr)


def relation_holds(left, relation: str, right) -> bool:
    """Whether ``left <relation> right`` is established (equalities by :func:`~derivations.is_zero`).

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.proofs import relation_holds
    >>> x = sp.Symbol("x", positive=True)
    >>> relation_holds(x**2 + 1, ">=", 2 * x), relation_holds(x, ">", 2 * x)
    (True, False)
    """
    require_expr("left", left), _relation(relation), require_expr("right", right)
    left, right = resolve(left), resolve(right)
    if left is None or right is None:
        return False
    if relation in ("<=>", "=>"):
        lt, rt = _truth(left), _truth(right)
        if lt is None or rt is None:
            return False
        return lt == rt if relation == "<=>" else (not lt) or rt
    if _is_condition(left) or _is_condition(right):
        return False
    if relation == "=":
        return is_zero(left - right) is not None
    if relation in ("<=", "<"):
        left, right = right, left  # now: left >= right (or >)
    elif relation not in (">=", ">"):
        return False
    return _at_least(left - right, relation in ("<", ">"))


def holds(claim: Claim) -> bool:
    """Proof: decide the displayed relation directly (see :func:`relation_holds`)."""
    claim = _claim(claim)
    return relation_holds(claim.left, claim.relation, claim.right)


holds.name = "sign decided"


def interval_points(x: sp.Symbol, breakpoints: Sequence, lower=-sp.oo) -> list[dict]:
    r"""Points that cover ``(lower, oo)`` cut at ``breakpoints``: each breakpoint and a symbolic interior point of each gap.

    The interior of :math:`(b_i, b_{i+1})` is :math:`b_i + (b_{i+1} - b_i)\,t/(1+t)`
    with :math:`t > 0` a fresh symbol; below the first breakpoint :math:`b_0 - t`
    (or :math:`b_0\,t/(1+t)` when ``lower`` is 0), above the last :math:`b_n + t`.
    The breakpoints must be provably increasing.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.proofs import interval_points
    >>> x, e = sp.Symbol("x", positive=True), sp.Symbol("varepsilon", positive=True)
    >>> len(interval_points(x, [1, 1 + e], lower=0))
    5
    """
    require_symbol("x", x)
    if not isinstance(breakpoints, (list, tuple)):
        raise TypeError(f"breakpoints must be a list or tuple of expressions, got {type(breakpoints).__name__}")
    breaks = [sp.sympify(require_expr("breakpoints", b)) for b in breakpoints]
    if lower != -sp.oo:
        lower = sp.sympify(require_expr("lower", lower))
    if not breaks:
        raise ValueError("breakpoints must name at least one point")
    for lo, hi in zip(breaks, breaks[1:]):
        if decide_sign(hi - lo) != 1:
            raise ValueError(f"breakpoints must be provably increasing, got {sp.sstr(lo)} then {sp.sstr(hi)}")
    if lower != -sp.oo and not _at_least(breaks[0] - lower, True):
        raise ValueError(f"lower must lie below the first breakpoint {sp.sstr(breaks[0])}, got {lower}")
    t = sp.Dummy("t", positive=True)
    frac = t / (1 + t)
    first = breaks[0] - t if lower == -sp.oo else lower + (breaks[0] - lower) * frac
    points = [first]
    for lo, hi in zip(breaks, breaks[1:]):
        points += [lo, lo + (hi - lo) * frac]
    points += [breaks[-1], breaks[-1] + t]
    return [{x: p} for p in points]


def on_regions(*points: Mapping, label: str = "regions", inner: Callable[[Claim], bool] | None = None) -> Callable[[Claim], bool]:
    """Proof: the displayed claim, decided at each of ``points`` (one substitution per region).

    The points should parametrise every region by positive symbols (see
    :func:`interval_points`); the step's reason names the regions.  With
    ``inner`` (another proof, e.g. :func:`same_solutions`) each region's claim,
    the displayed sides with the point substituted, is proved by it instead.
    """
    if not points:
        raise ValueError("points: on_regions needs at least one point")
    if not isinstance(label, str) or not label:
        raise TypeError(f"label must be a non-empty str, got {label!r}")
    for p in points:
        if not isinstance(p, Mapping) or not p:
            raise TypeError(f"each point must be a non-empty substitution dict, got {p!r}")
    if inner is not None and not callable(inner):
        raise TypeError(f"inner must be a proof (a function of the Claim), got {type(inner).__name__}")

    def proof(claim: Claim) -> bool:
        if inner is not None:
            return all(bool(inner(claim.subs(p))) for p in points)
        left, right = claim.left, claim.right
        return all(relation_holds(left.subs(p), claim.relation, right.subs(p)) for p in points)

    return _named(label, proof)


# ------------------------------------------------------------------- lemmas


_IMPLIES = {"=": {"=", "<=", ">="}, "<=": {"<="}, ">=": {">="}, "<": {"<", "<="}, ">": {">", ">="}}


def by_lemma(lemma: Derivation, mapping: Mapping | None = None, *, termwise: bool = False) -> Callable[[Claim], bool]:
    r"""Proof: the verified ``lemma`` with ``mapping`` substituted is the displayed claim.

    With ``termwise=True`` the displayed sides are sums over the same range and
    the lemma is the claim about their summands (summing preserves ``=``,
    ``\le`` and ``\ge``).  The lemma's statement is its
    :meth:`~derivations.Derivation.statement`, so its own steps are verified
    against what they display.  Each premise of the lemma (a relation among its
    assumptions) must hold for the instance: decided by the CAS, or stated as
    a premise of the derivation that uses the lemma.
    """
    if not isinstance(lemma, Derivation):
        raise TypeError(f"lemma must be a Derivation, got {type(lemma).__name__}")
    require_optional("mapping", mapping, Mapping, "a substitution mapping")
    if not isinstance(termwise, bool):
        raise TypeError(f"termwise must be a bool, got {type(termwise).__name__}")
    mapping = dict(mapping or {})

    def proof(claim: Claim) -> bool:
        lemma.verify()
        lhs, rel, rhs = lemma.statement()
        if claim.relation not in _IMPLIES.get(rel, set()) or (termwise and claim.relation in ("<", ">")):
            return False
        for premise in lemma.premises:
            instance = premise.subs(mapping)
            if instance not in claim.premises and _truth(instance) is not True:
                return False
        lhs, rhs = lhs.subs(mapping), rhs.subs(mapping)
        left, right = claim.lhs, claim.rhs
        if termwise:
            if not (isinstance(left, sp.Sum) and isinstance(right, sp.Sum) and left.limits == right.limits):
                return False
            left, right = left.function, right.function
        return is_zero(left - lhs) is not None and is_zero(right - rhs) is not None

    return _named("lemma", proof)


# ------------------------------------------------------------------- others


def minimum_over(var: sp.Symbol, domain: sp.Set) -> Callable[[Claim], bool]:
    """Proof of ``lhs >= rhs`` (or ``<=``): the minimum of the gap over ``domain`` is non-negative."""
    require_symbol("var", var), _set("domain", domain)

    def proof(claim: Claim) -> bool:
        if claim.relation not in (">=", "<="):
            return False
        gap = claim.left - claim.right if claim.relation == ">=" else claim.right - claim.left
        if gap.free_symbols - {var}:
            return False
        return _at_least(sp.minimum(gap, var, domain), claim.relation in ("<", ">"))

    return _named("minimum", proof)


def numerically(digits: int = 30) -> Callable[[Claim], bool]:
    """Proof of a relation between two constants, evaluated to ``digits`` significant digits.

    The gap must exceed the evaluation error by a wide margin (``10**(5 - digits)``
    relative), so only strict relations between closed forms qualify.
    """
    digits = require_int("digits", digits, minimum=10)

    def proof(claim: Claim) -> bool:
        left, right = claim.left, claim.right
        if left.free_symbols or right.free_symbols or claim.relation not in ("<", ">", "<=", ">="):
            return False
        gap = (left - right).evalf(digits)
        scale = max(abs(left.evalf(digits)), abs(right.evalf(digits)), 1)
        if not gap.is_number or abs(gap) <= scale * sp.Float(10) ** (5 - digits):
            return False
        return bool(gap > 0) if claim.relation in (">", ">=") else bool(gap < 0)

    return _named(f"numeric ({digits} digits)", proof)


def _solution_set(cond, var: sp.Symbol, domain: sp.Set) -> sp.Set:
    """The set of ``var`` in ``domain`` where ``cond`` holds: relations solved, ``var ∈ S`` read off, connectives as set operations."""
    if cond in (sp.true, sp.false):
        return domain if cond == sp.true else sp.S.EmptySet
    if isinstance(cond, sp.Contains) and cond.args[0] == var:
        return sp.Intersection(cond.args[1], domain)
    if isinstance(cond, sp.And):
        return sp.Intersection(*[_solution_set(c, var, domain) for c in cond.args])
    if isinstance(cond, sp.Or):
        return sp.Union(*[_solution_set(c, var, domain) for c in cond.args])
    if isinstance(cond, sp.Not):
        return sp.Complement(domain, _solution_set(cond.args[0], var, domain))
    return sp.solveset(cond, var, domain)


def same_solutions(var: sp.Symbol, domain: sp.Set = sp.S.Reals) -> Callable[[Claim], bool]:
    r"""Proof of ``lhs <=> rhs`` for conditions on one variable: their solution sets in ``domain`` are equal.

    A condition may be a relation (solved by ``solveset``), a membership
    :math:`x \in S`, or a combination of them with and/or/not.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import Derivation
    >>> from derivations.proofs import same_solutions
    >>> x = sp.Symbol("x", real=True)
    >>> d = Derivation("a quadratic").step(x**2 < 4, sp.Contains(x, sp.Interval.open(-2, 2)), "solve",
    ...                                    relation="<=>", proof=same_solutions(x))
    >>> d.verify().proved_by()
    {'solution sets': 1}
    >>> d.perturbed(0).verify().verified
    Traceback (most recent call last):
    ...
    derivations.derivation.DerivationError: a quadratic: step 1 (solve) does not hold: ...
    """
    require_symbol("var", var), _set("domain", domain)

    def proof(claim: Claim) -> bool:
        if claim.relation != "<=>":
            return False
        left, right = (_solution_set(c, var, domain) for c in (claim.left, claim.right))
        if left == right:
            return True
        return all(sp.Complement(u, v) == sp.S.EmptySet for u, v in ((left, right), (right, left)))

    return _named("solution sets", proof)


class Argmin(sp.Function):
    r"""Unevaluated :math:`\operatorname{arg\,min}_v f`, displayed as such; ``Argmin(f, v)``."""

    nargs = 2

    def _latex(self, printer):
        f, v = self.args
        return r"\operatorname*{arg\,min}_{%s} \left(%s\right)" % (printer._print(v), printer._print(f))


def is_argmin(claim: Claim) -> bool:
    """Proof of ``Argmin(f, v) = v*``: ``f'(v*) = 0`` and ``f''`` is positive (so ``v*`` is the unique minimiser)."""
    claim = _claim(claim)
    if claim.relation != "=" or not isinstance(claim.lhs, Argmin):
        return False
    f, v = (claim.content(a) for a in claim.lhs.args)
    star = claim.right
    if star.has(v):
        return False
    stationary = is_zero(sp.diff(f, v).subs(v, star)) is not None
    curvature = sp.diff(f, v, 2)
    return stationary and not curvature.has(v) and _at_least(curvature, True)


is_argmin.name = "unique stationary point, f'' > 0"


def at_values(symbol: sp.Symbol, values: Iterable, inner: Callable[[Claim], bool] | None = None) -> Callable[[Claim], bool]:
    """Proof by instances: the claim with ``symbol`` set to each of ``values`` (at least one), each proved by ``inner``.

    This checks instances, not the general statement: the step's reason must say so.
    """
    require_symbol("symbol", symbol)
    if not isinstance(values, (list, tuple, range)):
        raise TypeError(f"values must be a list, tuple or range of values of {symbol}, got {type(values).__name__}")
    values = tuple(require_expr("values", v) for v in values)
    if not values:
        raise ValueError("values: at_values needs at least one value: checking no instance proves nothing")
    inner = holds if inner is None else require_optional_callable("inner", inner)

    def proof(claim: Claim) -> bool:
        return all(inner(claim.subs({symbol: v})) for v in values)

    return _named(f"instances {symbol} = {', '.join(map(str, values))}", proof)


