r"""The notation's definitions, held as data and applied by the kernel with fixed rules.

A derivation displays notation (:math:`\pi_a`, :math:`g(t)`, :math:`Q_a`,
:math:`\mathbb{E}[\cdot]`) and the CAS checks what the notation means.  That
meaning is a :class:`Definitions` value: immutable, shown on the page beside
the steps ("where :math:`\pi_a := e^{\theta_a}/Z`"), and applied by the
kernel with the rules below and nothing else; a callable is never accepted.

**Entries** ``lhs := rhs``, the left side one of

- a symbol :math:`x` (applied by ``xreplace``);
- an applied function :math:`f(x, y)` of an undefined function (or of a
  notation class defined outside SymPy), whose arguments are distinct symbols
  (bound, as in a ``Lambda``) or fixed expressions (matched exactly):
  :math:`f(u, v)` becomes ``Lambda((x, y), rhs)(u, v)``;
- an indexed entry :math:`Q_{i,j}` with distinct symbol indices: every
  :math:`Q_{u,v}` becomes ``Lambda((i, j), rhs)(u, v)``.

Entries are applied in order, pass after pass, until none changes anything
(a circular set of definitions is refused).

**Operators**, each a fixed rule of this module parametrised by data:

:class:`Differentiation`
    every :math:`\partial/\partial v` evaluated with the listed functions held
    constant (a stop-gradient :math:`\mathrm{sg}(x)`: the value of :math:`x`,
    derivative 0) and symbols written through their definitions while
    differentiating (:math:`r = e^{\ell - \ell_0}`), then written back;
:class:`Linearity`
    :math:`\mathbb{E}[\sum_k c_k X_k] = \sum_k c_k\,\mathbb{E}[X_k]` with
    :math:`c_k` numbers (or free of the listed random symbols);
:class:`GroupExpectation`
    the i.i.d. group algebra of :mod:`derivations.iid_groups` (linearity, a
    summation index bound or fresh, independence of distinct answers,
    identical single-answer moments, linearity through a finite sum over a
    count, independence of an answer from a function of the others) for the
    quantities ``names`` and group size ``G``; with ``answer`` (a number
    ``G``), the expectation of a polynomial in that answer's quantities times
    any function of the others.  An expectation outside these rules is refused.

Examples
--------
>>> import sympy as sp
>>> from derivations.definitions import Definitions
>>> t, p = sp.symbols("t p", positive=True)
>>> g, Q, i = sp.Function("g"), sp.IndexedBase("Q"), sp.Symbol("i")
>>> defs = Definitions({g(t): t**2, Q[i]: p * i})
>>> defs.apply(g(3) + Q[2])
2*p + 9
>>> defs.latex()
['g{\\left(t \\right)} := t^{2}', '{Q}_{i} := i p']
>>> Definitions(lambda e: 0)
Traceback (most recent call last):
...
TypeError: entries must be a mapping lhs -> rhs (or pairs), got function
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import sympy as sp
from sympy.core.function import AppliedUndef

from .notation import latex
from .premises import Refused

__all__ = ["Definitions", "Differentiation", "GroupExpectation", "Linearity"]


def _kind_of(lhs: sp.Basic) -> str:
    """``symbol``, ``function`` or ``indexed``; anything else is refused."""
    if isinstance(lhs, sp.Symbol):
        return "symbol"
    if isinstance(lhs, sp.Indexed):
        if not all(isinstance(i, sp.Symbol) for i in lhs.indices) or len(set(lhs.indices)) != len(lhs.indices):
            raise ValueError(f"entries: the indices of {sp.sstr(lhs)} must be distinct symbols")
        return "indexed"
    if isinstance(lhs, AppliedUndef) or (isinstance(lhs, sp.Function) and not type(lhs).__module__.startswith("sympy.")):
        bound = [a for a in lhs.args if isinstance(a, sp.Symbol)]
        if len(set(bound)) != len(bound):
            raise ValueError(f"entries: the symbol arguments of {sp.sstr(lhs)} must be distinct")
        return "function"
    raise ValueError(f"entries: a left side must be a symbol, an applied undefined function f(x, ...) or an indexed entry Q[i], "
                     f"got {sp.sstr(lhs)} ({type(lhs).__name__})")


def _apply_entry(expr: sp.Basic, lhs: sp.Basic, rhs: sp.Basic, kind: str) -> sp.Basic:
    if kind == "symbol":
        return expr.xreplace({lhs: rhs})
    if kind == "indexed":
        rule = sp.Lambda(lhs.indices, rhs)
        return expr.replace(lambda e: isinstance(e, sp.Indexed) and e.base == lhs.base and len(e.indices) == len(lhs.indices),
                            lambda e: rule(*e.indices))
    bound = [k for k, a in enumerate(lhs.args) if isinstance(a, sp.Symbol)]
    rule = sp.Lambda(tuple(lhs.args[k] for k in bound), rhs) if bound else None

    def matches(e) -> bool:
        return (e.func == lhs.func and len(e.args) == len(lhs.args)
                and all(k in bound or e.args[k] == a for k, a in enumerate(lhs.args)))

    return expr.replace(matches, lambda e: rule(*(e.args[k] for k in bound)) if rule is not None else rhs)


def _uses(expr: sp.Basic, lhs: sp.Basic, kind: str) -> bool:
    """Whether ``expr`` mentions the notation that ``lhs`` defines."""
    if kind == "symbol":
        return expr.has(lhs)
    if kind == "indexed":
        return any(e.base == lhs.base for e in expr.atoms(sp.Indexed))
    return any(e.func == lhs.func for e in expr.atoms(sp.Function))


def _require_acyclic(entries: list) -> None:
    """Refuse definitions that use themselves, directly or through others."""
    uses = {k: [j for j, (lhs, _, kind) in enumerate(entries) if _uses(entries[k][1], lhs, kind)] for k in range(len(entries))}
    state: dict[int, int] = {}

    def visit(k: int, path: tuple) -> None:
        if state.get(k) == 2:
            return
        if state.get(k) == 1:
            cycle = " -> ".join(sp.sstr(entries[j][0]) for j in (*path[path.index(k):], k))
            raise ValueError(f"entries: they are circular ({cycle})")
        state[k] = 1
        for j in uses[k]:
            visit(j, (*path, k))
        state[k] = 2

    for k in range(len(entries)):
        visit(k, ())


class Definitions:
    r"""The notation's definitions: entries ``lhs := rhs`` and operator rules, applied by the kernel.

    Parameters
    ----------
    entries : mapping or sequence of pairs
        ``{lhs: rhs}``; each ``lhs`` a symbol, an applied undefined function
        or an indexed entry (see the module docstring).
    *rules : Differentiation, Linearity or GroupExpectation
        Operators, applied in order after the entries.

    Immutable: :meth:`subs` returns a new value.
    """

    __slots__ = ("_entries", "_rules", "_instance")

    def __init__(self, entries: Mapping | Iterable = (), *rules) -> None:
        if callable(entries) and not isinstance(entries, Mapping):
            raise TypeError(f"entries must be a mapping lhs -> rhs (or pairs), got {type(entries).__name__}")
        pairs = list(entries.items()) if isinstance(entries, Mapping) else list(entries)
        checked: list[tuple] = []
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"entries must be pairs (lhs, rhs), got {pair!r}")
            lhs, rhs = pair
            if not isinstance(lhs, sp.Basic):
                raise TypeError(f"entries: a left side must be a SymPy object, got {type(lhs).__name__}")
            if not isinstance(rhs, (sp.Basic, int)) or isinstance(rhs, bool):
                raise TypeError(f"entries: the right side of {sp.sstr(lhs)} must be a SymPy expression, got {type(rhs).__name__}")
            if any(lhs == seen for seen, _, _ in checked):
                raise ValueError(f"entries: {sp.sstr(lhs)} is defined twice")
            checked.append((lhs, sp.sympify(rhs), _kind_of(lhs)))
        for rule in rules:
            if type(rule) not in _RULES:
                raise TypeError(f"rules must be Differentiation, Linearity or GroupExpectation (a callable is not a rule), got {type(rule).__name__}")
        _require_acyclic(checked)
        self._entries = tuple(checked)
        self._rules = tuple(rules)
        self._instance: tuple = ()

    def __setattr__(self, name, value):
        if hasattr(self, "_instance") and name in self.__slots__:
            raise AttributeError("Definitions are immutable")
        object.__setattr__(self, name, value)

    @property
    def entries(self) -> dict:
        """The entries ``{lhs: rhs}``, in order."""
        return {lhs: rhs for lhs, rhs, _ in self._entries}

    @property
    def rules(self) -> tuple:
        return self._rules

    def __or__(self, other: Definitions) -> Definitions:
        """These definitions, then ``other``'s (entries and rules)."""
        if not isinstance(other, Definitions):
            return NotImplemented
        return Definitions([*self.entries.items(), *other.entries.items()], *self._rules, *other.rules)

    def __bool__(self) -> bool:
        return bool(self._entries or self._rules)

    def __eq__(self, other) -> bool:
        return isinstance(other, Definitions) and (self._entries, self._rules, self._instance) == (other._entries, other._rules, other._instance)

    def __hash__(self) -> int:
        return hash((self._entries, self._rules, self._instance))

    def __repr__(self) -> str:
        return f"Definitions({', '.join(self.latex())})"

    def subs(self, mapping: Mapping) -> Definitions:
        """An instance: after the definitions are applied, ``mapping`` is substituted (shown on the page)."""
        out = Definitions([(lhs, rhs) for lhs, rhs, _ in self._entries], *self._rules)
        object.__setattr__(out, "_instance", self._instance + tuple((sp.sympify(k), sp.sympify(v)) for k, v in mapping.items()))
        return out

    def apply(self, expr: sp.Basic) -> sp.Basic:
        """``expr`` with the notation written as its definitions: the entries to a fixed point, then the rules, then the instance."""
        expr = sp.sympify(expr)
        for _ in range(len(self._entries) + 1):
            before = expr
            for lhs, rhs, kind in self._entries:
                expr = _apply_entry(expr, lhs, rhs, kind)
            if expr == before:
                break
        else:
            raise Refused("the definitions are circular: applying them never stops changing the expression")
        for rule in self._rules:
            expr = rule.apply(expr)
        if self._instance:
            expr = expr.subs(dict(self._instance))
        return expr

    def latex(self) -> list[str]:
        """One line per entry and rule, as the page shows them after "where"."""
        lines = [f"{latex(lhs)} := {latex(rhs)}" for lhs, rhs, _ in self._entries]
        lines += [rule.latex() for rule in self._rules]
        lines += [r"\text{at } " + ", ".join(f"{latex(k)} = {latex(v)}" for k, v in self._instance)] if self._instance else []
        return lines


# ---------------------------------------------------------------- the operator rules


def _symbols(name: str, value) -> tuple:
    if isinstance(value, sp.Basic) or not isinstance(value, (tuple, list)):
        raise TypeError(f"{name} must be a tuple, got {type(value).__name__}")
    return tuple(value)


@dataclass(frozen=True)
class Differentiation:
    r""":math:`\partial/\partial\,` ``var`` evaluated with ``held`` functions constant and ``written`` symbols through their definitions.

    Each ``h(x)`` with ``h`` in ``held`` becomes a fresh symbol while
    differentiating, and :math:`x` afterwards (the value of a stop-gradient is
    its argument); each symbol of ``written`` is its definition while
    differentiating and is written back afterwards (so a ratio
    :math:`r = e^{\ell - \ell_0}` stays :math:`r` for the regions).
    """

    var: sp.Symbol
    held: tuple = ()
    written: tuple = ()

    def __post_init__(self):
        if not isinstance(self.var, sp.Symbol):
            raise TypeError(f"var must be a SymPy Symbol, got {type(self.var).__name__}")
        for h in _symbols("held", self.held):
            if not isinstance(h, sp.core.function.UndefinedFunction):
                raise TypeError(f"held must hold undefined functions such as sg, got {h!r}")
        for pair in _symbols("written", self.written):
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], sp.Symbol) and isinstance(pair[1], sp.Basic)):
                raise TypeError(f"written must hold (symbol, definition) pairs, got {pair!r}")

    def apply(self, expr: sp.Basic) -> sp.Basic:
        return expr.replace(lambda e: isinstance(e, sp.Derivative) and all(v == self.var for v, _ in e.variable_count),
                            lambda e: self.of(e.expr, sum(n for _, n in e.variable_count)))

    def of(self, expr: sp.Basic, order: int = 1) -> sp.Basic:
        """The ``order``-th derivative of ``expr`` in :attr:`var` under this rule."""
        held: dict = {}

        def hold(*args):
            s = sp.Dummy("held")
            held[s] = args[0]
            return s

        for h in self.held:
            expr = expr.replace(h, hold)
        written = dict(self.written)
        out = sp.diff(expr.xreplace(written), self.var, order).xreplace(held)
        back = {v: k for k, v in written.items()}
        return out.xreplace(back).subs(back)

    def latex(self) -> str:
        d = rf"\tfrac{{\partial}}{{\partial {latex(self.var)}}}"
        dot = sp.Symbol(r"{\cdot}")
        parts = [d + r" \text{ holds } " + latex(h(dot)) + r" \text{ constant (its value is its argument)}" for h in self.held] or [d]
        parts += [rf"{latex(k)} = {latex(v)}" for k, v in self.written]
        return r",\ ".join(parts)


@dataclass(frozen=True)
class Linearity:
    r""":math:`\mathbb{E}[\sum_k c_k X_k] = \sum_k c_k\,\mathbb{E}[X_k]` for the operator ``expectation``; :math:`c_k` numbers, or free of ``randoms``.

    Sums with numeric limits are written out first (a finite sum is its terms), so
    linearity reaches through them."""

    expectation: type
    randoms: tuple | None = None

    def __post_init__(self):
        if not (isinstance(self.expectation, type) and issubclass(self.expectation, sp.Function)):
            raise TypeError(f"expectation must be a SymPy Function class such as Expect, got {self.expectation!r}")
        if self.randoms is not None and not all(isinstance(s, sp.Symbol) for s in _symbols("randoms", self.randoms)):
            raise TypeError("randoms must be a tuple of symbols")

    def apply(self, expr: sp.Basic) -> sp.Basic:
        def split(e):
            out = sp.Integer(0)
            for term in sp.Add.make_args(sp.expand(e.args[0])):
                const, mono = term.as_coeff_Mul() if self.randoms is None else term.as_independent(*self.randoms, as_Add=False)
                out += const * self.expectation(mono)
            return out

        finite = expr.replace(lambda e: isinstance(e, sp.Sum) and all(lim[1].is_Integer and lim[2].is_Integer for lim in e.limits),
                              lambda e: e.doit())
        return finite.replace(lambda e: isinstance(e, self.expectation), split)

    def latex(self) -> str:
        E = latex(self.expectation(sp.Symbol(r"{\cdot}")))
        if self.randoms is None:
            return E + r"\text{ is linear: sums come out of it, and numbers}"
        return E + r"\text{ is linear: sums come out of it, and factors free of }" + ", ".join(map(latex, self.randoms))


@dataclass(frozen=True)
class GroupExpectation:
    """The i.i.d. group algebra of :class:`~derivations.iid_groups.IIDGroup` for ``names`` and ``G`` (a number or ``None`` for symbolic).

    With ``answer`` (and a number ``G``), each expectation involving that
    answer's score is taken as a polynomial in its own quantities times any
    function of the others (independence; the others' factor stays an
    unevaluated expectation when it is not a polynomial).
    """

    names: tuple = ("R", "s")
    G: int | None = None
    answer: int | None = None

    def __post_init__(self):
        from .iid_groups import IIDGroup

        IIDGroup(self.names, self.G)  # validates names and G
        if self.answer is not None and (self.G is None or not isinstance(self.answer, int) or not 1 <= self.answer <= self.G):
            raise ValueError(f"answer must be an answer index 1..G of a number G, got {self.answer!r} with G = {self.G!r}")

    def apply(self, expr: sp.Basic) -> sp.Basic:
        from .iid_groups import Expect, IIDGroup

        grp = IIDGroup(self.names, self.G)
        try:
            if self.answer is None:
                return grp.unfold(expr)
            score = grp.bases[self.names[-1]][self.answer]
            return expr.replace(lambda x: isinstance(x, Expect) and x.args[0].has(score), lambda x: grp.expect_separable(x.args[0], self.answer))
        except ValueError as e:  # an expectation the algebra's rules do not cover: the step is refused, not guessed
            raise Refused(f"the i.i.d. group algebra does not take this expectation ({e})") from None

    def latex(self) -> str:
        size = "G" if self.G is None else str(self.G)
        own = "" if self.answer is None else rf" \text{{ (answer {self.answer}: polynomial in its own quantities)}}"
        return rf"\mathbb{{E}} \text{{ over {size} i.i.d. answers}}" + own


_RULES = (Differentiation, Linearity, GroupExpectation)
