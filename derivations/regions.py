r"""Signs and branches: which piece of a ``Min``/``Max``/``Abs``/``Piecewise`` holds at a point.

The one implementation of the branch resolver (the proof kernel, the derived
gradient weights and the variant checker all use it).  A point is written with
positive symbols (:math:`r = (1+\varepsilon)(1+d)`, :math:`d > 0`, for
:math:`r > 1 + \varepsilon`), so that SymPy can decide the sign of each
factored difference; anything it cannot decide is reported, never guessed.

:func:`decide_sign`
    ``1``, ``0`` or ``-1`` when SymPy decides the sign of an expression.
:func:`resolve`
    An expression with every ``Piecewise``, ``Min``, ``Max``, ``Abs``,
    ``sign``, ``Heaviside`` and relation decided, optionally at a point.

Examples
--------
>>> import sympy as sp
>>> from derivations.regions import resolve
>>> r, e, d = sp.symbols("r varepsilon d", positive=True)
>>> resolve(sp.Min(r, 1 + e), {r: (1 + e) * (1 + d)})
varepsilon + 1
>>> resolve(sp.Min(r, 1 + e), {r: (1 + e) * (1 + d)}, keep_variables=True)
varepsilon + 1
>>> resolve(sp.Min(r, 1 + e)) is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import sympy as sp
from sympy.core.operations import ShortCircuit
from sympy.functions.elementary.miscellaneous import MinMaxBase

from ._validate import require_expr, require_optional

__all__ = ["Undecided", "at_point", "decide_sign", "resolve"]


class Undecided(Exception):
    """A ``Min``/``Max``/``Abs``/``Piecewise`` (or a relation) whose branch the CAS could not decide."""


def _signs(expr) -> frozenset | None:
    """The signs ``expr`` can take (a subset of {-1, 0, 1}) as far as SymPy can tell, else ``None``."""
    expr = sp.sympify(expr)
    try:
        hash(expr)
    except TypeError:  # unhashable (a mutable matrix, say): decided afresh
        return _signs_of.__wrapped__(expr)
    return _signs_of(expr)


@lru_cache(maxsize=16384)
def _signs_of(expr: sp.Basic) -> frozenset | None:
    """:func:`_signs`, remembered per expression (immutable, its symbols' assumptions part of its identity).

    The forms are tried in turn, each built only when the one before decided nothing.
    """
    forms = (lambda: expr, lambda: sp.factor(sp.cancel(sp.together(expr))), lambda: sp.expand(expr))
    for build in forms:
        form = build()
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


def decide_sign(expr: sp.Basic | float) -> int | None:
    """``1``, ``0`` or ``-1`` when SymPy can decide the sign of ``expr``, else ``None``.

    The expression is brought to one fraction and factored first, so that
    products and quotients of positive symbols are recognised.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.regions import decide_sign
    >>> d, e = sp.symbols("delta varepsilon", positive=True)
    >>> decide_sign((1 + e) * (1 + d) - 1 - e), decide_sign(d - e)
    (1, None)
    """
    require_expr("expr", expr)
    s = _signs(expr)
    return next(iter(s)) if s is not None and len(s) == 1 else None


def at_least(expr: sp.Basic, strict: bool) -> bool:
    """``expr > 0`` (``strict``) or ``expr >= 0`` is established by SymPy's sign decision."""
    s = _signs(expr)
    return s is not None and s <= ({1} if strict else {0, 1})


def truth(rel: sp.Basic | bool) -> bool | None:
    """The truth value of a relation (or ``And``/``Or``/``Not`` of relations), decided by signs; ``None`` if undecided."""
    if rel in (sp.true, sp.false) or isinstance(rel, bool):
        return bool(rel)
    if isinstance(rel, (sp.And, sp.Or)):
        values = [truth(a) for a in rel.args]
        if isinstance(rel, sp.And):
            return False if False in values else (None if None in values else True)
        return True if True in values else (None if None in values else False)
    if isinstance(rel, sp.Not):
        t = truth(rel.args[0])
        return None if t is None else not t
    if isinstance(rel, (sp.Eq, sp.Ne)):
        s = decide_sign(rel.lhs - rel.rhs)
        return None if s is None else (s == 0) == isinstance(rel, sp.Eq)
    if not isinstance(rel, sp.core.relational.Relational):
        return None
    strict = rel.rel_op in (">", "<")
    gap = rel.gts - rel.lts  # the relation says gap > 0 (strict) or gap >= 0
    if at_least(gap, strict):
        return True
    if at_least(-gap, not strict):
        return False
    return None


def _decided(e, at):
    """``e`` (a condition or an expression) evaluated at the point, for deciding only."""
    return sp.sympify(e).subs(at) if at else e


def _extreme(cls: type[MinMaxBase], args: list, at: Mapping) -> sp.Basic | None:
    """The one argument of ``cls(*args)`` (``Min`` or ``Max``) that holds at the point, by the signs of its differences from the others.

    SymPy's own ``Min``/``Max`` constructor is skipped (it compares every pair
    under assumptions, which is what makes substituting a point slow); its
    filter still runs, so a non-real argument raises as it did.  ``None`` when
    no argument, or more than one distinct argument, is decided extreme: the
    caller then builds ``cls(*args)`` and decides as before.
    """
    try:
        args = list(cls._new_args_filter(args))
    except ShortCircuit:
        return cls.zero
    sign = 1 if cls is sp.Max else -1
    candidates = list(sp.ordered(set(args)))
    winners = []
    for cand in candidates:
        strictly = True
        for other in candidates:
            if other is cand:
                continue
            s = _signs(_decided(sign * (cand - other), at))
            if s is None or not s <= {0, 1}:
                break
            strictly = strictly and s == {1}
        else:
            if strictly:
                return cand  # strictly beyond every other argument: no other can be decided extreme
            winners.append(cand)
    return winners[0] if len(winners) == 1 else None


def at_point(expr: sp.Basic, at: Mapping[sp.Basic, sp.Basic]) -> sp.Basic:
    r"""``expr.subs(at)``, with each ``Min``/``Max`` decided at the point instead of rebuilt there.

    Substituting a point into a ``Min``/``Max`` makes SymPy compare its
    arguments pairwise under assumptions, slowly; here each ``Min``/``Max`` whose
    extreme argument :func:`decide_sign` settles at the point (one argument,
    provably at or beyond every other) is replaced by that argument at the
    point, and any other is substituted as before.  The value is that of
    ``expr.subs(at)`` at the point.  Only plain symbols are substituted this way
    (any other key, or a node that binds variables, goes through ``subs``).

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.regions import at_point
    >>> r, e, d = sp.symbols("r varepsilon d", positive=True)
    >>> at_point(2 * sp.Min(r, 1 + e), {r: (1 + e) * (1 + d)})
    2*varepsilon + 2
    >>> at_point(sp.Min(r, d), {r: 1 + e})
    Min(d, varepsilon + 1)
    """
    require_expr("expr", expr)
    if not isinstance(at, Mapping):
        raise TypeError(f"at must be a substitution mapping, got {type(at).__name__}")
    if not at:
        return expr
    if isinstance(expr, sp.MatrixBase) or not all(isinstance(k, sp.Symbol) for k in at):
        return expr.subs(at)
    return _at_point(sp.sympify(expr), dict(at))


# nodes whose ``subs`` of a symbol rebuilds them from their substituted arguments; a Piecewise and an And/Or keep
# their own ``subs`` (it skips the pieces after a true condition, the arguments after a false one)
_WALKED = (sp.Add, sp.Mul, sp.Pow, MinMaxBase, sp.core.relational.Relational, sp.Function)


def _at_point(e: sp.Basic, at: dict) -> sp.Basic:
    if not isinstance(e, _WALKED) or isinstance(e, sp.Piecewise) or not e.has(sp.Min, sp.Max):
        return e.subs(at)
    args = [_at_point(a, at) for a in e.args]
    if isinstance(e, (sp.Min, sp.Max)):
        picked = _extreme(e.func, args, {})
        if picked is not None:
            return picked
    return e.func(*args)


def _resolve(e, at: Mapping, keep: bool):
    if isinstance(e, sp.MatrixBase):
        return e.applyfunc(lambda x: _resolve(x, at, keep))
    if not isinstance(e, sp.Basic) or not e.args or isinstance(e, (sp.Symbol, sp.Indexed, sp.Dummy)):
        return e
    if isinstance(e, sp.Piecewise):
        for value, cond in e.args:
            t = truth(_resolve(_decided(cond, at), {}, False))
            if t is None:
                raise Undecided(sp.sstr(cond))
            if t:
                return _resolve(value, at, keep)
        raise Undecided(f"no branch of {sp.sstr(e)} holds")
    args = [_resolve(a, at, keep) for a in e.args]
    if isinstance(e, (sp.Min, sp.Max)):
        picked = _extreme(e.func, args, at)
        if picked is not None:
            return picked
    e = e.func(*args)
    if isinstance(e, (sp.Min, sp.Max)):
        sign = 1 if isinstance(e, sp.Max) else -1
        for cand in e.args:
            if all(at_least(_decided(sign * (cand - other), at), False) for other in e.args if other is not cand):
                return cand
        raise Undecided(sp.sstr(e))
    if isinstance(e, sp.Abs):
        if at_least(_decided(e.args[0], at), False):
            return e.args[0]
        if at_least(_decided(-e.args[0], at), False):
            return -e.args[0]
        raise Undecided(sp.sstr(e))
    if isinstance(e, (sp.sign, sp.Heaviside)):
        s = decide_sign(_decided(e.args[0], at))
        if s is None or (s == 0 and isinstance(e, sp.Heaviside)):  # Heaviside(0) is a convention, not a fact
            raise Undecided(sp.sstr(e))
        return sp.Integer(s if isinstance(e, sp.sign) else int(s > 0))
    if isinstance(e, sp.core.relational.Relational):
        t = truth(_decided(e, at))
        if t is None:
            raise Undecided(sp.sstr(e))
        return sp.true if t else sp.false
    return e


def resolve(expr: sp.Basic | float, at: Mapping[sp.Basic, sp.Basic] | None = None, *, keep_variables: bool = False) -> sp.Basic | None:
    """``expr`` with every ``Piecewise``, ``Min``, ``Max``, ``Abs``, ``sign``, ``Heaviside`` and relation decided.

    Each branch is chosen by the sign of a factored difference (:func:`decide_sign`).
    With ``at`` (a substitution, e.g. an interior point of a region written with
    positive symbols) the signs are decided at that point; the result is the
    expression at the point, or, with ``keep_variables=True``, the branch that
    holds there written in the original variables (a piece of a piecewise
    function).  ``None`` if a branch cannot be decided.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.regions import resolve
    >>> r, A, d, a = sp.symbols("r A d a", positive=True)
    >>> resolve(sp.Max(r * A, 2 * A), {r: 2 + d}, keep_variables=True)
    A*r
    >>> resolve(sp.Max(r * A, 2 * A), {r: 2 + d})
    A*(d + 2)
    """
    require_expr("expr", expr)
    require_optional("at", at, Mapping, "a substitution mapping")
    if not isinstance(keep_variables, bool):
        raise TypeError(f"keep_variables must be a bool, got {type(keep_variables).__name__}")
    at = dict(at or {})
    expr = sp.sympify(expr) if not isinstance(expr, sp.MatrixBase) else expr
    try:
        if keep_variables:
            return _resolve(expr, at, True)
        return _resolve(expr.subs(at) if at else expr, {}, False)
    except Undecided:
        return None
