r"""Proof builders: the only proofs a step accepts, each checked by the kernel.

A :class:`~derivations.derivation.Step` whose relation is not ``=`` (or whose
equality the canonicalisers cannot reach) carries a ``proof``.  Every builder
here returns a proof object of :mod:`derivations.kernel`, built from its
*method* and its *data*; the kernel hands it the step's displayed
:class:`~derivations.claims.Claim`, it states what it establishes, and the
kernel compares that with the display, relation included.  A bare function is
not a proof.

:func:`holds`
    Decide the relation directly: ``rhs - lhs`` canonicalised, its sign read
    off the factored form (positive symbols make it decidable).
:func:`on_regions`
    A case split: the caller names cut points, the kernel builds the regions
    (every breakpoint and a symbolic interior point of every gap of the
    variable's admissible domain, so none can be forgotten) and decides the
    claim on each (every ``Min``/``Max``/``Abs``/``Piecewise`` resolved by the
    sign of a factored difference).
:func:`by_lemma`
    Instantiate a verified derivation (its :meth:`~derivations.Derivation.statement`),
    possibly term by term inside a sum.
:func:`minimum_over`, :func:`same_solutions`, :func:`is_argmin`, :func:`limit_along`
    A minimum over an interval, equal solution sets, a unique minimiser, a
    limit along a tail.
:func:`from_table`, :func:`to_tolerance`
    An expectation over the count patterns of a finite law, summed by the
    kernel from a table of values (data, shown in the badge); an equality of
    floating-point coefficients to a tolerance.
:func:`by_cases`, :func:`pointwise`
    A claim at every value of a quantity that a stated premise restricts to a
    finite set; equal expectations of integrands equal for every outcome.
:func:`at_values`, :func:`numerically`
    Instances of a parameter, a numerical inequality between constants: each
    leaves a badge on the page.

Examples
--------
>>> import sympy as sp
>>> from derivations import Derivation
>>> from derivations.proofs import interval_points, on_regions
>>> x = sp.Symbol("x", real=True)
>>> d = Derivation("positive part")
>>> d = d.step(sp.Max(x, 0), x / 2 + sp.Abs(x) / 2, "on $x < 0$, $x = 0$, $x > 0$",
...            proof=on_regions((x, [0])))
>>> d.verify().proved_by()
{'regions': 1}
>>> d.perturbed(0).verify()
Traceback (most recent call last):
...
derivations.canonical.DerivationError: positive part: step 1 (on $x < 0$, $x = 0$, $x > 0$) does not hold: ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import sympy as sp

from . import kernel as _k
from ._validate import require_expr, require_int, require_optional, require_symbol
from .claims import relation_holds
from .derivation import Derivation
from .kernel import Argmin
from .regions import Undecided, at_least, decide_sign, resolve

__all__ = [
    "Argmin",
    "at_values",
    "by_cases",
    "by_lemma",
    "decide_sign",
    "from_table",
    "holds",
    "interval_points",
    "is_argmin",
    "limit_along",
    "minimum_over",
    "numerically",
    "on_regions",
    "pointwise",
    "relation_holds",
    "resolve",
    "same_solutions",
    "to_tolerance",
    "Undecided",
]

holds = _k.Decide()
"""Proof: decide the displayed relation directly (see :func:`relation_holds`), under the derivation's premises."""

is_argmin = _k.IsArgmin()
"""Proof of ``Argmin(f, v) = v*``: ``f'(v*) = 0`` and ``f''`` a positive constant (so ``v*`` is the unique minimiser)."""


def _proof(name: str, value) -> _k.Proof:
    if not _k.is_proof(value):
        raise TypeError(f"{name} must be a proof from derivations.proofs, got {type(value).__name__}")
    return value


def _set(name: str, value) -> sp.Set:
    if not isinstance(value, sp.Set):
        raise TypeError(f"{name} must be a SymPy Set (e.g. sp.Interval(0, 1)), got {type(value).__name__}")
    return value


def interval_points(x: sp.Symbol, breakpoints: Sequence[sp.Basic], lower: sp.Basic | float = -sp.oo) -> list[dict]:
    r"""Points that cover ``(lower, oo)`` cut at ``breakpoints``: each breakpoint and a symbolic interior point of each gap.

    The interior of :math:`(b_i, b_{i+1})` is :math:`b_i + (b_{i+1} - b_i)\,t/(1+t)`
    with :math:`t > 0` a fresh symbol; below the first breakpoint :math:`b_0 - t`
    (or :math:`b_0\,t/(1+t)` when ``lower`` is 0), above the last :math:`b_n + t`.
    The breakpoints must be provably increasing.  (A helper for tables and
    checks; a proof by cases is :func:`on_regions`, whose regions the kernel builds.)

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
    if lower != -sp.oo and not at_least(breaks[0] - lower, True):
        raise ValueError(f"lower must lie below the first breakpoint {sp.sstr(breaks[0])}, got {lower}")
    t = sp.Dummy("t", positive=True)
    frac = t / (1 + t)
    first = breaks[0] - t if lower == -sp.oo else lower + (breaks[0] - lower) * frac
    points = [first]
    for lo, hi in zip(breaks, breaks[1:]):
        points += [lo, lo + (hi - lo) * frac]
    points += [breaks[-1], breaks[-1] + t]
    return [{x: p} for p in points]


def on_regions(*cuts: tuple[sp.Symbol, Sequence[sp.Basic]], label: str = "regions", inner: _k.Proof | None = None) -> _k.Proof:
    r"""Proof by cases: the kernel cuts each variable's domain at the given points and decides the claim on every piece.

    Each cut is ``(x, breakpoints)``.  The domain of ``x`` is read off its
    assumptions and the derivation's premises (``x`` positive: :math:`(0, \infty)`;
    a premise :math:`c \ge 1`: :math:`[1, \infty)`); the breakpoints, which may
    depend on the variables cut before, must lie strictly inside it and be
    provably increasing (coinciding ones merge).  The kernel then takes every
    breakpoint, every closed end and a symbolic interior point of every gap, so
    the points cover the domain by construction.  With ``inner`` (another
    proof, e.g. :func:`same_solutions`) each region's claim is proved by it.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import Derivation
    >>> from derivations.proofs import on_regions
    >>> r, e = sp.Symbol("r", positive=True), sp.Symbol("varepsilon", positive=True)
    >>> d = Derivation("cap").step(sp.Min(r, 1 + e) - r, -sp.Max(r - 1 - e, 0), "around the cap", proof=on_regions((r, [1 + e])))
    >>> d.verify().proved_by()
    {'regions': 1}
    """
    if not cuts:
        raise ValueError("cuts: on_regions needs at least one cut (x, breakpoints)")
    for c in cuts:
        if isinstance(c, Mapping):
            raise TypeError("cuts must be (x, breakpoints) pairs: the kernel builds the regions itself, a hand-made point is refused")
        if not (isinstance(c, tuple) and len(c) == 2 and isinstance(c[1], (list, tuple))):
            raise TypeError(f"each cut must be a pair (x, breakpoints), got {c!r}")
        if not isinstance(c[0], sp.Symbol):
            raise TypeError(f"cuts: the variable of a cut must be a SymPy Symbol, got {type(c[0]).__name__}")
        for b in c[1]:
            try:
                require_expr("breakpoints", b)
            except (TypeError, ValueError) as e:
                raise type(e)(f"cuts: {e}") from None
    if not isinstance(label, str) or not label:
        raise TypeError(f"label must be a non-empty str, got {label!r}")
    if inner is not None:
        _proof("inner", inner)
    return _k.Regions(tuple((x, tuple(sp.sympify(b) for b in bs)) for x, bs in cuts), label, inner)


def by_lemma(lemma: Derivation, mapping: Mapping | None = None, *, termwise: bool = False) -> _k.Proof:
    r"""Proof: the verified ``lemma`` with ``mapping`` substituted is the displayed claim.

    With ``termwise=True`` the displayed sides are sums over the same range and
    the lemma is the claim about their summands (summing preserves ``=``,
    ``\le`` and ``\ge``, not strictness).  The lemma's statement is its
    :meth:`~derivations.Derivation.statement`, so its own steps are verified
    against what they display.  The kernel checks the instance: each mapped
    symbol's assumptions (a lemma about a positive :math:`p` does not apply at
    :math:`p = -1`) and each premise of the lemma, decided by the CAS or
    stated as a premise of the derivation that uses it.
    """
    if not isinstance(lemma, Derivation):
        raise TypeError(f"lemma must be a Derivation, got {type(lemma).__name__}")
    require_optional("mapping", mapping, Mapping, "a substitution mapping")
    if not isinstance(termwise, bool):
        raise TypeError(f"termwise must be a bool, got {type(termwise).__name__}")
    return _k.Lemma(lemma, tuple((k, sp.sympify(v)) for k, v in (mapping or {}).items()), termwise)


def minimum_over(var: sp.Symbol, domain: sp.Set) -> _k.Proof:
    """Proof of ``lhs >= rhs`` (or ``<=``): the minimum of the gap over ``domain`` (which must cover every admissible ``var``) is non-negative."""
    return _k.Minimum(require_symbol("var", var), _set("domain", domain))


def numerically(digits: int = 30) -> _k.Proof:
    """Proof of a strict relation between two constants, evaluated to ``digits`` significant digits (badged on the page).

    The gap must exceed the evaluation error by a wide margin (``10**(5 - digits)``
    relative).
    """
    return _k.Numerically(require_int("digits", digits, minimum=10))


def same_solutions(var: sp.Symbol, domain: sp.Set = sp.S.Reals) -> _k.Proof:
    r"""Proof of ``lhs <=> rhs`` for conditions on one variable: their solution sets in ``domain`` are equal.

    A condition may be a relation (solved by ``solveset``), a membership
    :math:`x \in S`, or a combination of them with and/or/not.  ``domain``
    must cover every admissible value of ``var``.

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
    derivations.canonical.DerivationError: a quadratic: step 1 (solve) does not hold: ...
    """
    return _k.SameSolutions(require_symbol("var", var), _set("domain", domain))


def limit_along(var: sp.Symbol, base: sp.Basic | float) -> _k.Proof:
    r"""Proof of ``Limit(f, var, oo) = L``: on the tail ``var = base + t``, :math:`t > 0`, ``f`` resolves and tends to ``L``."""
    return _k.LimitAlong(require_symbol("var", var), sp.sympify(require_expr("base", base)))


def at_values(symbol: sp.Symbol, values: Iterable, inner: _k.Proof | None = None) -> _k.Proof:
    """Proof by instances: the claim with ``symbol`` set to each of ``values`` (at least one), each proved by ``inner``.

    This checks instances, not the general statement: the page shows a badge
    "checked at symbol = values only".
    """
    require_symbol("symbol", symbol)
    if not isinstance(values, (list, tuple, range)):
        raise TypeError(f"values must be a list, tuple or range of values of {symbol}, got {type(values).__name__}")
    values = tuple(sp.sympify(require_expr("values", v)) for v in values)
    if not values:
        raise ValueError("values: at_values needs at least one value: checking no instance proves nothing")
    return _k.Instances(symbol, values, holds if inner is None else _proof("inner", inner))


def _tol(tol, scale=1.0) -> float:
    """The absolute tolerance ``tol * scale``: ``tol`` relative, below 1e-6; ``scale`` the size of the values it is relative to (at least 1)."""
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1e-6:
        raise ValueError(f"tol must be a float in (0, 1e-6), got {tol!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 1 <= scale < float("inf"):
        raise ValueError(f"scale must be a finite float >= 1 (the size of the values the tolerance is relative to), got {scale!r}")
    return float(tol) * float(scale)


def to_tolerance(tol: float, scale: float = 1.0) -> _k.Proof:
    """Proof of an equality whose sides differ only in floating-point coefficients, each at most ``tol * scale`` (badged on the page).

    ``scale`` is the size of the values the coefficients were computed from (1 by default): fp64 values
    near :math:`10^6` carry rounding near :math:`10^{-10}`, so a tolerance relative to them is ``tol * 1e6``.
    """
    return _k.Tolerance(_tol(tol, scale))


def from_table(advantage: sp.Symbol, score: sp.Basic, values: Sequence, q: Sequence, grads: Sequence, G: int,
               table: Iterable, tol: float | None = None, scale: float = 1.0) -> _k.Proof:
    r"""Proof of :math:`\mathbb{E}[a\, s_1] = \dots` for ``G`` i.i.d. draws of a finite law, from the table of ``a``'s values (badged with the table).

    ``table`` holds ``(v, counts, a)``: the answer labelled 1's value, the others' counts on
    ``values`` and the advantage there; the kernel enumerates the count
    patterns itself, requires one entry for each, and sums
    :math:`\binom{G-1}{n}\prod_k q_k^{n_k}\, A\, \nabla q_y` (``grads`` are the
    :math:`\nabla q_v`).  The table is data, shown on the page; no function is called.
    With ``tol``, fp64 table values may leave each coefficient off by ``tol * scale``
    (``scale``: the size of the values, as in :func:`to_tolerance`).

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import Derivation, Expect
    >>> from derivations.proofs import from_table
    >>> p, g, A, s = sp.symbols("p g A_1 s_1", real=True)
    >>> table = [(0, (1, 0), 0), (0, (0, 1), -1), (1, (1, 0), 1), (1, (0, 1), 0)]
    >>> d = Derivation("RLOO at G = 2").step(Expect(A * s), g, "sum over the patterns",
    ...                                     proof=from_table(A, s, (0, 1), (1 - p, p), (-g, g), 2, table))
    >>> d.verify().proved_by()
    {'summed over the value table': 1}
    """
    require_symbol("advantage", advantage)
    require_expr("score", score)
    G = require_int("G", G, minimum=2)
    values, q, grads = (tuple(sp.sympify(require_expr(n, x)) for x in v) for n, v in (("values", values), ("q", q), ("grads", grads)))
    if not values or len(q) != len(values) or len(grads) != len(values):
        raise ValueError(f"values, q and grads must be non-empty and of one length, got {len(values)}, {len(q)}, {len(grads)}")
    rows = []
    for row in table:
        if not (isinstance(row, tuple) and len(row) == 3 and isinstance(row[1], tuple)):
            raise TypeError(f"table must hold (value, counts, advantage) triples, got {row!r}")
        rows.append((sp.sympify(row[0]), tuple(int(c) for c in row[1]), sp.sympify(require_expr("table", row[2]))))
    return _k.Table(advantage, score, values, q, grads, G, tuple(rows), None if tol is None else _tol(tol, scale))


def by_cases(quantity: sp.Basic, values: Iterable) -> _k.Proof:
    r"""Proof by cases: the claim at each of ``values`` of ``quantity``, which a stated premise says are its only values.

    The derivation must state the premise ``Contains(quantity, FiniteSet(*values))``
    (shown as :math:`x \in \{x_1, \dots\}`), with exactly these values.  Each
    case is decided like :data:`holds`, every relation that a premise states
    (or the CAS decides) read as true, so a ``Piecewise`` branch that a premise
    selects is taken.  ``quantity`` must not occur inside an expectation: wrap
    the proof in :func:`pointwise` to compare the integrands.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import Derivation
    >>> from derivations.proofs import by_cases
    >>> r = sp.Symbol("r", real=True)
    >>> d = Derivation("a binary reward", assumptions=[sp.Contains(r, sp.FiniteSet(0, 1))])
    >>> d = d.step(r**2, r, "$r \\in \\{0, 1\\}$", proof=by_cases(r, (0, 1)))
    >>> d.verify().proved_by()
    {'cases r in {0, 1}': 1}
    >>> Derivation("not binary").step(r**2, r, "cases", proof=by_cases(r, (0, 1))).verify()
    Traceback (most recent call last):
    ...
    derivations.canonical.DerivationError: not binary: step 1 (cases) does not hold: r**2 = r (no premise says that r takes only the values {0, 1}: ...
    """
    if not isinstance(quantity, (sp.Symbol, sp.Indexed, sp.Function)) or isinstance(quantity, sp.Expr) and quantity.is_number:
        raise TypeError(f"quantity must be a symbol, an indexed entry or an applied function, got {quantity!r}")
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"values must be a list or tuple of the values of {quantity}, got {type(values).__name__}")
    values = tuple(sp.sympify(require_expr("values", v)) for v in values)
    if not values or len(set(values)) != len(values):
        raise ValueError(f"values must name each case once, and at least one, got {values!r}")
    return _k.Cases(quantity, values)


def pointwise(inner: _k.Proof) -> _k.Proof:
    r"""Proof of :math:`\mathbb{E}[X] = \mathbb{E}[Y]`: ``inner`` proves :math:`X = Y` for every outcome the premises allow.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import Derivation, Expect
    >>> from derivations.proofs import by_cases, pointwise
    >>> R, s = sp.Symbol("R_1", real=True), sp.Symbol("s_1", real=True)
    >>> d = Derivation("binary", assumptions=[sp.Contains(R, sp.FiniteSet(0, 1))])
    >>> d = d.step(Expect(R**2 * s), Expect(R * s), "$R_1^2 = R_1$", proof=pointwise(by_cases(R, (0, 1))))
    >>> d.verify().proved_by()
    {'equal integrands (cases R_1 in {0, 1})': 1}
    """
    return _k.Pointwise(_proof("inner", inner))
