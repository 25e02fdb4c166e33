r"""What a derivation's premises allow: bounds on a symbol, a parametrisation of its admissible values, consistency, a partition.

The proof kernel (:mod:`derivations.kernel`) reads the premises through these
functions: :func:`bounds` (the stated and assumed bounds on a symbol),
:func:`parametrisation` (every admissible value as the image of fresh positive
symbols, so a sign decided for all of them holds for every admissible value),
:func:`require_consistent` (premises from which SymPy derives ``False`` are
refused) and :func:`covering_points` (the kernel's own partition of the
admissible values of the variables a proof by regions cuts).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import pairwise

import sympy as sp

from .canonical import DerivationError, is_zero
from .regions import at_least, truth

__all__ = ["Refused", "require_consistent"]


def is_relation(p) -> bool:
    """A SymPy relation or logical condition (a Boolean that is not an expression)."""
    return isinstance(p, sp.logic.boolalg.Boolean) and not isinstance(p, sp.Expr)


class Refused(DerivationError):
    """The kernel refuses a step; the message says why."""


def bounds(s: sp.Symbol, premises: Sequence) -> tuple[list, list]:
    """Bounds ``(value, closed)`` on ``s`` below and above: the premises' (``s > b``, either way round) first, then its assumptions'."""
    lows, highs = [], []
    for p in premises:
        if not isinstance(p, sp.core.relational.Relational) or isinstance(p, (sp.Eq, sp.Ne)):
            continue
        big, small, closed = p.gts, p.lts, p.rel_op in (">=", "<=")
        if big == s and not small.has(s):
            lows.append((small, closed))
        elif small == s and not big.has(s):
            highs.append((big, closed))
    if s.is_positive or s.is_nonnegative:
        lows.append((sp.Integer(0), not s.is_positive))
    if s.is_negative or s.is_nonpositive:
        highs.append((sp.Integer(0), not s.is_negative))
    return lows, highs


def parametrisation(premises: Sequence[sp.Basic], exclude: Iterable[sp.Symbol] = (), given: Sequence[sp.Basic] = ()) -> dict[sp.Symbol, sp.Expr]:
    r"""Each plain symbol that a premise bounds strictly, written as the image of fresh positive symbols.

    :math:`s > b` gives :math:`s = b + \eta`, :math:`s < c` gives :math:`s = c - \eta`,
    both give :math:`s = b + (c - b)\,\eta/(1 + \eta)`, :math:`\eta > 0`: every
    admissible value of :math:`s` is reached, so a sign decided for all
    :math:`\eta > 0` holds for all admissible :math:`s` (:math:`s \ge b` gives
    :math:`s = b + \eta`, :math:`\eta \ge 0`).  A symbol with several premise
    bounds on one side, or with a closed end of a bounded interval, is left alone.
    The ``given`` conditions of a step (a region) are parametrised second, in
    the parametrised constants of the premises.  (Remembered per premises: the
    same fresh symbols for the same premises, in a new dict each call.)
    """
    key = (tuple(premises), frozenset(exclude), tuple(given))
    try:
        hash(key)
    except TypeError:
        return _parametrisation(*key)
    return dict(_remembered_parametrisation(key))


@lru_cache(maxsize=1024)
def _remembered_parametrisation(key: tuple) -> dict:
    return _parametrisation(*key)


def _parametrisation(premises: tuple, exclude: frozenset, given: tuple) -> dict[sp.Symbol, sp.Expr]:
    if given:
        bounded = _bounded(given) - _bounded(premises)  # a constant the premises bound stays a constant
        first = _parametrisation(premises, exclude | bounded, ())
        second = _parametrisation(tuple(sp.sympify(g).xreplace(first) for g in given), exclude | set(first), ())
        return {**{k: v.xreplace(second) for k, v in first.items()}, **second}
    out: dict[sp.Symbol, sp.Expr] = {}
    used: set[sp.Basic] = set()
    for s in sorted({a for p in premises for a in p.free_symbols if isinstance(a, sp.Symbol)} - set(exclude), key=sp.default_sort_key):
        mine = [p for p in premises if p.has(s) and p not in used]  # a premise a < b bounds one of its symbols, not both
        lows, highs = bounds(s, mine)
        own_lows, own_highs = bounds(s, [])
        stated_lows, stated_highs = len(lows) - len(own_lows), len(highs) - len(own_highs)
        if stated_lows + stated_highs == 0 or stated_lows > 1 or stated_highs > 1:
            continue  # nothing stated, or several bounds on one side (which is tighter is not known)
        low, high = (lows[0] if lows else None), (highs[0] if highs else None)
        closed = bool((low and low[1]) or (high and high[1]))
        if closed and low and high:
            continue  # a closed end of a bounded interval: b + (c - b) eta/(1 + eta) would miss it
        used.update(p for p in mine if bounds(s, [p]) != bounds(s, []))
        eta = sp.Dummy(f"eta_{s}", nonnegative=True) if closed else sp.Dummy(f"eta_{s}", positive=True)
        if low and high:
            out[s] = low[0] + (high[0] - low[0]) * eta / (1 + eta)
        elif low:
            out[s] = low[0] + eta
        else:
            assert high is not None  # no bound at all was skipped above
            out[s] = high[0] - eta
    for _ in range(len(out)):  # bounds written in other bounded symbols
        out = {s: v.xreplace(out) for s, v in out.items()}
    if any(v.has(*out) for v in out.values()):
        return {}  # cyclic bounds: decide nothing from them
    return out


def _bounded(conditions: Sequence) -> set:
    """The plain symbols that some condition bounds (``s > b`` or ``b < s``)."""
    return {s for c in conditions if isinstance(c, sp.core.relational.Relational) and not isinstance(c, (sp.Eq, sp.Ne))
            for s in (c.lhs, c.rhs) if isinstance(s, sp.Symbol)}


def require_consistent(premises: tuple) -> None:
    """Refuse premises from which SymPy derives ``False`` (``sp.false``, a contradiction in one variable, or a premise false once the others are parametrised).

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.premises import require_consistent
    >>> x = sp.Symbol("x", real=True)
    >>> require_consistent((x > 1, x < 2))
    >>> require_consistent((x > 1, x < 0))
    Traceback (most recent call last):
    ...
    derivations.premises.Refused: its premises are contradictory (x > 1, x < 0 admit no x)
    """
    if not isinstance(premises, tuple) or not all(is_relation(p) for p in premises):
        raise TypeError(f"premises must be a tuple of SymPy relations, got {premises!r}")
    if premises:
        _require_consistent(tuple(premises))


@lru_cache(maxsize=256)
def _require_consistent(premises: tuple) -> None:
    if sp.false in premises or sp.And(*premises) == sp.false:
        raise Refused("its premises are contradictory (they contain False)")
    for s in {a for p in premises for a in p.free_symbols if isinstance(a, sp.Symbol)}:
        alone = [p for p in premises if p.free_symbols == {s} and isinstance(p, sp.core.relational.Relational)]
        domain = sp.Interval.open(0, sp.oo) if s.is_positive else sp.Interval(0, sp.oo) if s.is_nonnegative else sp.S.Reals
        try:
            solutions = sp.Intersection(domain, *[_solutions(p, s) for p in alone])
        except (NotImplementedError, ValueError, TypeError):  # solveset could not solve: no contradiction derived
            continue
        if alone and solutions == sp.S.EmptySet:
            raise Refused(f"its premises are contradictory ({', '.join(map(sp.sstr, alone))} admit no {s})")
    param = parametrisation(premises)
    for p in premises:
        if param and truth(p.subs(param)) is False:
            raise Refused(f"its premises are contradictory ({sp.sstr(p)} fails under the others)")


@lru_cache(maxsize=1024)
def _solutions(condition: sp.Basic, s: sp.Symbol) -> sp.Set:
    """``solveset(condition, s, Reals)``, remembered: one premise recurs under many regions' conditions."""
    return sp.solveset(condition, s, sp.S.Reals)


def covering_points(cuts: Sequence, premises: Sequence = (), given: Sequence = ()) -> list[dict]:
    """The kernel's own partition: for each cut ``(x, breakpoints)``, every breakpoint and an interior point of every gap of ``x``'s admissible domain."""
    points: list[dict[sp.Symbol, sp.Basic]] = [{}]
    param = parametrisation(premises, [x for x, _ in cuts], given)
    premises = tuple(premises) + tuple(given)
    for level, (x, breaks) in enumerate(cuts):
        out = []
        for p in points:
            def at(e, p=p):
                return sp.sympify(e).subs(param).subs(p)

            lows, highs = bounds(x, premises)
            lo, lo_closed = (at(lows[0][0]), lows[0][1]) if lows else (-sp.oo, False)
            hi, hi_closed = (at(highs[0][0]), highs[0][1]) if highs else (sp.oo, False)
            cut: list[sp.Basic] = []
            for b in (at(b) for b in breaks):
                if cut and is_zero(b - cut[-1]) is not None:
                    continue  # breakpoints that coincide at this point
                if cut and not at_least(b - cut[-1], True):
                    raise Refused(f"the breakpoints of {x} are not provably increasing ({sp.sstr(cut[-1])} then {sp.sstr(b)})")
                if (lo != -sp.oo and not at_least(b - lo, True)) or (hi != sp.oo and not at_least(hi - b, True)):
                    raise Refused(f"the breakpoint {sp.sstr(b)} does not lie inside the domain of {x}")
                cut.append(b)
            if not cut and lo == -sp.oo and hi == sp.oo:
                raise Refused(f"no cut point for {x}: nothing to split")
            t = _gap_parameter(level)
            edges = [lo, *cut, hi]
            for i, (a, b) in enumerate(pairwise(edges)):
                if i == 0 and lo_closed and lo != -sp.oo:
                    out.append({**p, x: a})
                inner = b - t if a == -sp.oo else a + t if b == sp.oo else a + (b - a) * t / (1 + t)
                out.append({**p, x: inner})
                if i < len(edges) - 2 or (hi_closed and hi != sp.oo):
                    out.append({**p, x: b})
        points = out
    return [{**{k: v for k, v in param.items()}, **p} for p in points]


_GAP_PARAMETERS: list[sp.Dummy] = []


def _gap_parameter(level: int) -> sp.Dummy:
    """The positive parameter of the interior points of the ``level``-th cut: one per cut, so nested cuts stay independent.

    The same symbol at every point of one cut is sound (each point is decided on
    its own) and lets the sign decisions one point needs be remembered for the
    next claim decided there (a perturbed step, a doctest and its chapter).
    """
    while len(_GAP_PARAMETERS) <= level:
        _GAP_PARAMETERS.append(sp.Dummy(f"t{len(_GAP_PARAMETERS)}", positive=True))
    return _GAP_PARAMETERS[level]
