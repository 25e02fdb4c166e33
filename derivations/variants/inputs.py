r"""The checker's vocabulary and its input checks: the group's symbols, reward laws, constants, expressions.

Every check raises a ``TypeError`` or ``ValueError`` that names the argument
and says what was expected; :mod:`numeric.variants` uses the same checks for
its entry points, so an argument is refused in the same words in both layers.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import sympy as sp

from .._validate import require_int
from ..iid_groups import IIDGroup

__all__ = [
    "G_SYMBOL",
    "GROUP",
    "I",
    "J",
    "R",
    "R_PLAIN",
    "S",
    "S_PLAIN",
    "advantage_expression",
    "explicit_advantage",
    "require_bool",
    "require_constants",
    "require_group_size",
    "reward_law",
    "scalar_expression",
]

GROUP = IIDGroup(("R", "s"))
"""The group the checker's expressions are written in: rewards ``R[j]``, scores ``s[j]``, answer ``i``, size ``G``."""
R, S, I, J, G_SYMBOL = GROUP.R, GROUP.s, GROUP.i, GROUP.j, GROUP.G
R_PLAIN, S_PLAIN = GROUP.plain["R"], GROUP.plain["s"]


def reward_law(rewards: str | Sequence[float]) -> tuple[str, tuple]:
    """``("general", ())``, ``("binary", (0, 1))`` or ``("finite", values)`` with exact, distinct, sorted values.

    Examples
    --------
    >>> from derivations.variants.inputs import reward_law
    >>> reward_law("binary"), reward_law([2, 0.5, 0])
    (('binary', (0, 1)), ('finite', (0, 1/2, 2)))
    """
    if isinstance(rewards, str):
        if rewards == "general":
            return "general", ()
        if rewards == "binary":
            return "binary", (sp.Integer(0), sp.Integer(1))
        raise ValueError(f"rewards must be 'general', 'binary' or a list of at least two distinct reward values, got {rewards!r}")
    if not isinstance(rewards, Sequence) or isinstance(rewards, (bytes, Mapping)):
        raise TypeError(f"rewards must be 'general', 'binary' or a list of reward values, got {type(rewards).__name__}")
    values: list[sp.Expr] = []
    for v in rewards:
        if isinstance(v, bool) or not isinstance(v, (numbers.Real, sp.Rational)):
            raise TypeError(f"rewards must hold real numbers (ints, floats, sympy rationals), got {v!r}")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"rewards must be finite, got {v}")
        values.append(sp.nsimplify(v, rational=True) if isinstance(v, float) else sp.sympify(v))
    if len(values) < 2 or len(set(values)) != len(values):
        raise ValueError(f"rewards must list at least two distinct values, got {list(rewards)!r}")
    ordered = tuple(sorted(values))
    if ordered == (0, 1):
        return "binary", ordered
    return "finite", ordered


def require_bool(name: str, value: object) -> bool:
    """``value`` if it is a ``bool``, else a ``TypeError`` naming ``name``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def require_group_size(G: int | None, needed: bool) -> int | sp.Symbol:
    """``G`` as an int >= 2, or the symbol :math:`G` when omitted and not ``needed``."""
    if G is None:
        if needed:
            raise ValueError("G must be an int >= 2 for a callable advantage (the callable sees a concrete group)")
        return G_SYMBOL
    return require_int("G", G, minimum=2)


def require_constants(constants: Mapping | None) -> dict:
    """``{symbol: float}`` from ``constants`` (``None`` for none); each value a finite real number."""
    if constants is None:
        return {}
    if not isinstance(constants, Mapping):
        raise TypeError(f"constants must map sympy symbols to numbers, got {type(constants).__name__}")
    out = {}
    for k, v in constants.items():
        if not isinstance(k, sp.Symbol):
            raise TypeError(f"constants must map sympy symbols to numbers, got key {k!r}")
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
            raise TypeError(f"constants[{k}] must be a finite real number (used by the numeric confirmation), got {v!r}")
        out[k] = float(v)
    return out


def scalar_expression(name: str, value: object, what: str, alternative: str) -> sp.Expr:
    """``value`` as a scalar SymPy expression (strict sympify), or a ``TypeError`` naming ``name``."""
    if isinstance(value, sp.MatrixBase) or isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be {what}, got a matrix or sequence")
    try:
        value = sp.sympify(value, strict=True)
    except sp.SympifyError:
        raise TypeError(f"{name} must be a sympy expression or {alternative}, got {type(value).__name__}") from None
    if not isinstance(value, sp.Expr):
        raise TypeError(f"{name} must be a scalar sympy expression, got {type(value).__name__}")
    return value


def advantage_expression(expr: sp.Expr, G: int | sp.Symbol, constants: dict) -> sp.Expr:
    """One answer's advantage as a checked expression in ``R[i]``, sums over the group, ``G`` and the declared constants."""
    expr = scalar_expression("advantage", expr, "a scalar sympy expression (one answer's advantage)", "a callable")
    if expr.has(S):
        raise ValueError("advantage must not contain the score s: it is a function of the group's rewards")
    allowed = {G_SYMBOL, I, R.label, *constants}
    unknown = {x for x in expr.free_symbols if not isinstance(x, sp.Indexed) and x not in allowed}
    if unknown:
        names = ", ".join(sorted(map(str, unknown)))
        raise ValueError(
            f"advantage has unknown free symbols {names}: allowed are R[i], sums over j = 1..G, G, "
            "and constants declared in constants={symbol: value}"
        )
    for ind in expr.atoms(sp.Indexed):
        if ind.base != R:
            raise ValueError(f"advantage may index only the rewards R, got {ind}")
        (idx,) = ind.indices
        if idx.is_number and (not isinstance(G, int) or not 1 <= idx <= G):
            raise ValueError(f"advantage names answer {idx}: explicit answers need a number G and lie in 1..G (answer 1 is the one under study)")
    return expr


def explicit_advantage(expr: sp.Expr, G: int) -> sp.Expr:
    """The advantage of the answer labelled 1 at a number ``G``, a function of ``R[1..G]`` (sums written out).

    Examples
    --------
    >>> from derivations.variants.inputs import GROUP, explicit_advantage
    >>> explicit_advantage(GROUP.R[GROUP.i] - GROUP.mean(), 3)
    2*R[1]/3 - R[2]/3 - R[3]/3
    """
    return expr.xreplace({G_SYMBOL: sp.Integer(G)}).subs(I, 1).doit()
