r"""What a step claims, and when a relation between two expressions is established.

The vocabulary of the proof kernel (:mod:`derivations.kernel`): a
:class:`Claim` is a step's displayed statement ``lhs <relation> rhs`` with
what checking it may use (the notation's definitions, the justified facts,
the premises and the step's ``given`` conditions); a proof object states what
it :class:`Established`, and :func:`implies` says whether that proves the
displayed relation (``<=`` does not prove ``<``); :func:`relation_holds`
decides one relation between two expressions (equalities by the
canonicalisers, orders by signs); a :class:`Verdict` is how the kernel
verified a step.  Nothing here marks a step verified: only
:func:`derivations.kernel.check` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

import sympy as sp

from ._validate import require_expr, require_optional
from .canonical import evaluated, is_zero, reject_vacuous_derivatives
from .definitions import Definitions
from .premises import is_relation, parametrisation
from .regions import at_least, resolve, truth

__all__ = ["RELATIONS", "Claim", "Established", "Verdict", "implies", "relation_holds"]

RELATIONS = ("=", "<=", ">=", "<", ">", "=>", "<=>")

_IMPLIES = {"=": {"=", "<=", ">="}, "<=": {"<="}, ">=": {">="}, "<": {"<", "<="}, ">": {">", ">="},
            "<=>": {"<=>", "=>"}, "=>": {"=>"}}


def implies(established: str, displayed: str) -> bool:
    """Whether a proof of ``established`` proves the ``displayed`` relation (``<=`` does not prove ``<``).

    Examples
    --------
    >>> from derivations.claims import implies
    >>> implies("<", "<="), implies("<=", "<"), implies("=", ">=")
    (True, False, True)
    """
    _require_relation("established", established), _require_relation("displayed", displayed)
    return displayed in _IMPLIES[established]


def _require_relation(name: str, relation) -> str:
    if not isinstance(relation, str) or relation not in RELATIONS:
        raise ValueError(f"{name} must be one of {RELATIONS}, got {relation!r}")
    return relation


@dataclass(frozen=True)
class Claim:
    r"""The displayed statement ``lhs <relation> rhs`` of a step, with what checking it may use.

    ``premises`` are the derivation's stated relations and the step's ``given``
    conditions; ``facts`` are substitutions the kernel has justified.
    :meth:`content` is a displayed expression as the CAS checks it: the
    notation unfolded, unevaluated operators evaluated, the facts substituted.
    """

    lhs: sp.Basic
    relation: str
    rhs: sp.Basic
    unfold: Definitions | None = None
    facts: Mapping | None = None
    premises: tuple = ()
    given: tuple = ()

    def __post_init__(self):
        require_expr("lhs", self.lhs)
        _require_relation("relation", self.relation)
        require_expr("rhs", self.rhs)
        require_optional("unfold", self.unfold, Definitions, "a Definitions (the notation's definitions, as data)")
        require_optional("facts", self.facts, Mapping, "a mapping")
        for name in ("premises", "given"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(is_relation(p) for p in value):
                raise TypeError(f"{name} must be a tuple of SymPy relations, got {value!r}")

    @property
    def conditions(self) -> tuple:
        """The derivation's premises and the step's ``given`` conditions."""
        return self.premises + self.given

    def parametrisation(self, exclude: Iterable[sp.Symbol] = ()) -> dict[sp.Symbol, sp.Expr]:
        """:func:`~derivations.premises.parametrisation` of the premises, then of the ``given`` conditions."""
        return parametrisation(self.premises, exclude, self.given)

    def content(self, expr: sp.Basic) -> sp.Basic:
        """``expr`` as the CAS checks it: unfolded, evaluated, facts substituted."""
        if self.unfold is not None:
            expr = self.unfold.apply(expr)
        reject_vacuous_derivatives(expr)
        expr = evaluated(expr)
        if self.facts:
            expr = evaluated(sp.expand_log(expr).subs(self.facts))
        return expr

    @cached_property
    def left(self) -> sp.Basic:
        """:meth:`content` of ``lhs``, computed once (the claim is immutable)."""
        return self.content(self.lhs)

    @cached_property
    def right(self) -> sp.Basic:
        """:meth:`content` of ``rhs``, computed once (the claim is immutable)."""
        return self.content(self.rhs)

    def subs(self, mapping: Mapping[sp.Basic, sp.Basic]) -> Claim:
        """The claim with ``mapping`` substituted into both sides, the facts and the premises."""
        facts = None if not self.facts else {sp.sympify(k).subs(mapping): sp.sympify(v).subs(mapping) for k, v in self.facts.items()}
        return Claim(sp.sympify(self.lhs).subs(mapping), self.relation, sp.sympify(self.rhs).subs(mapping),
                     self.unfold, facts, tuple(p.subs(mapping) for p in self.premises), tuple(p.subs(mapping) for p in self.given))


@dataclass(frozen=True)
class Verdict:
    """How a step was verified: the method's name and, for a step checked only partially, the badge the page shows."""

    method: str
    badge: str | None = None

    def __post_init__(self):
        if not isinstance(self.method, str) or not self.method:
            raise TypeError(f"method must be a non-empty str, got {self.method!r}")
        require_optional("badge", self.badge, str, "a str")


def relation_holds(left: sp.Basic | float, relation: str, right: sp.Basic | float) -> bool:
    """Whether ``left <relation> right`` is established: equalities by :func:`~derivations.is_zero`, orders by signs.

    Every ``Min``/``Max``/``Abs``/``Piecewise`` is resolved first
    (:func:`derivations.regions.resolve`); a strict relation needs a strict sign.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.claims import relation_holds
    >>> x = sp.Symbol("x", positive=True)
    >>> relation_holds(x**2 + 1, ">=", 2 * x), relation_holds(x, ">", 2 * x), relation_holds(x, ">=", x), relation_holds(x, ">", x)
    (True, False, True, False)
    """
    require_expr("left", left), _require_relation("relation", relation), require_expr("right", right)
    left, right = resolve(left), resolve(right)
    if left is None or right is None:
        return False
    if relation in ("<=>", "=>"):
        lt, rt = truth(left), truth(right)
        if lt is None or rt is None:
            return False
        return lt == rt if relation == "<=>" else (not lt) or rt
    if is_relation(left) or is_relation(right):
        return False
    if relation == "=":
        return is_zero(left - right) is not None
    if relation in ("<=", "<"):
        left, right = right, left  # now: left >= right (or >)
    return at_least(left - right, relation in ("<", ">"))


@dataclass(frozen=True)
class Established:
    """What a proof object established: ``lhs <relation> rhs``, with a badge when it holds only at instances."""

    lhs: sp.Basic
    relation: str
    rhs: sp.Basic
    badge: str | None = None
