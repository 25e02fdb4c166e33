r"""Canonicalisers: the CAS's test that a difference is zero.

:func:`is_zero` tries canonicalisers from cheap to expensive and names the
first that maps an expression to 0.  This is one of the two things the proof
kernel (:mod:`derivations.kernel`) trusts; the other is SymPy's sign decisions
(:mod:`derivations.regions`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sympy as sp

from ._validate import require_expr, require_optional, require_optional_callable

__all__ = ["CANONICALISERS", "DerivationError", "is_zero", "reject_vacuous_derivatives"]


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
        new = expr.replace(lambda e: isinstance(e, sp.Sum) and len(e.limits) == 1, _canonical_sum).doit()
        if new == expr:
            break
        expr = new
    sums = sorted(expr.atoms(sp.Sum), key=sp.default_sort_key)
    return expr.xreplace({s: sp.Dummy("S") for s in sums})


CANONICALISERS: tuple[tuple[str, Callable[[sp.Expr], sp.Expr]], ...] = (
    ("expand", sp.expand),
    ("cancel(together)", _cancel),
    ("exp->x, cancel(together)", lambda e: _cancel(_exp_to_symbols(e))),
    ("expand_log, cancel", lambda e: _cancel(sp.expand_log(e))),
    ("sums as atoms, cancel(together)", lambda e: _cancel(_exp_to_symbols(_sums_to_symbols(e)))),
    ("simplify", sp.simplify),
)
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
    used = []
    for entry in _entries(expr):
        if unfold is not None:
            entry = unfold(entry)
        reject_vacuous_derivatives(entry)
        entry = entry.doit()
        if facts:
            # split logs while the symbols still carry their signs (a fact like pi_K = 1 - ... hides them);
            # without force, expand_log splits only what the assumptions allow
            entry = sp.expand_log(entry).subs(facts).doit()
        for name, canon in CANONICALISERS:
            try:
                reduced = canon(entry)
            except Exception:  # a canonicaliser that breaks proves nothing; try the next
                continue
            if reduced == 0:
                used.append(name)
                break
        else:
            return None
    # the most expensive canonicaliser any entry needed
    order = [name for name, _ in CANONICALISERS]
    return max(used, key=order.index) if used else "expand"


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
