r"""The group-advantage checker's symbolic core: :func:`derive_group_advantage`.

It is handed one answer's advantage as a SymPy expression (any reward law,
symbolic or numeric :math:`G`) or, for a binary or finite law at a number
:math:`G`, as its values on the count patterns (a table or an evaluator, see
:mod:`derivations.variants.patterns`), and returns a
:class:`~derivations.variants.GroupReport` whose derivation is verified.  It
evaluates nothing numerically beyond SymPy: a trainer's torch or numpy
function is tabulated, and the verdict confirmed on the toy LM, by
:func:`numeric.variants.check_group_advantage`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import sympy as sp

from ..definitions import Definitions, GroupExpectation
from ..derivation import Derivation
from ..group_baselines import GRAD_J, GRAD_P, P
from ..iid_groups import Expect, IIDGroup
from ..notation import latex
from .inputs import (
    G_SYMBOL,
    R_PLAIN,
    S_PLAIN,
    I,
    R,
    S,
    advantage_expression,
    explicit_advantage,
    require_constants,
    require_group_size,
    reward_law,
)
from .patterns import finite_report
from .reports import GroupReport, nonzero, verdict

__all__ = ["derive_group_advantage"]


def derive_group_advantage(advantage: sp.Expr | Mapping | Callable, *, G: int | None = None, rewards: str | Sequence[float] = "general",
                           constants: Mapping | None = None, name: str = "the advantage") -> GroupReport:
    r"""Is a group advantage an unbiased, scaled, reweighted or biased estimate of the policy gradient?

    For answer :math:`i` of a group of :math:`G` i.i.d. answers with score
    :math:`s_i = \nabla_\theta\log\pi_\theta(o_i)`, the expected update is
    decomposed as

    .. math::

        \mathbb{E}[A_i s_i] = c\,\nabla_\theta J + \text{residual},

    with the verdict ``"unbiased"`` (:math:`c = 1`, no residual), ``"scaled"``
    (:math:`c` a constant, possibly depending on :math:`G`), ``"reweighted"``
    (:math:`c` depends on the policy, e.g. on :math:`p`), ``"biased"`` (a
    residual that is not along :math:`\nabla_\theta J`) or ``"undecided"``
    (the CAS could not decide; the reason says why).  SymPy only: the report
    carries no numeric confirmation (:func:`numeric.variants.check_group_advantage`
    adds it, and takes torch and numpy functions).

    Parameters
    ----------
    advantage : sympy expression, mapping or callable
        Either answer :math:`i`'s advantage in the vocabulary of
        :class:`~derivations.iid_groups.IIDGroup` (``R[i]``, sums over
        ``j = 1..G``, ``mean()``, ``mean_others(i)``, constants; with a number
        ``G`` also explicit answers ``R[1]..R[G]``, the answer labelled 1 under study), or
        the answer labelled 1's advantage on every :class:`~derivations.variants.CountPattern`
        of ``count_patterns(rewards, G)``: a mapping ``{pattern: value}`` or a
        plain Python function ``pattern -> value`` (numbers, floats read as
        exact when a short closed form matches to 1e-14).
    G : int, optional
        The group size (:math:`\ge 2`); symbolic when omitted (expressions only).
    rewards : {"general", "binary"} or list of numbers
        The reward law: any law, Bernoulli(:math:`p`), or a finite set of values
        with symbolic probabilities :math:`q_k`.  Values on patterns need a
        binary or finite law.
    constants : dict, optional
        Symbols the expression may use besides the group's (``{eps: 1e-6}``);
        the derivation keeps them symbolic.
    name : str
        What to call the variant in the derivation's title.

    Returns
    -------
    GroupReport

    Raises
    ------
    TypeError, ValueError
        Bad input: unknown free symbols, a non-scalar expression, ``G < 2``, a
        table without a value for some pattern, an unknown reward law.
    NotPermutationEquivariant
        An expression whose advantage depends on the order of the answers.

    Examples
    --------
    >>> from derivations.iid_groups import IIDGroup
    >>> from derivations.variants import count_patterns, derive_group_advantage
    >>> grp = IIDGroup()
    >>> rep = derive_group_advantage(grp.R[grp.i] - grp.mean())
    >>> rep.verdict, rep.scale
    ('scaled', (G - 1)/G)
    >>> rloo = {p: p.own - sum(p.group()[1:]) / 3 for p in count_patterns("binary", 4)}
    >>> derive_group_advantage(rloo, G=4, rewards="binary").verdict
    'unbiased'
    """
    constants = require_constants(constants)
    law, values = reward_law(rewards)
    on_patterns = isinstance(advantage, Mapping) or (callable(advantage) and not isinstance(advantage, sp.Basic))
    G = require_group_size(G, needed=on_patterns)
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if on_patterns:
        if law == "general":
            raise ValueError("rewards must be 'binary' or a list of values for an advantage given on the count patterns: "
                             "under a general law its expected update is not fixed by finitely many values")
        report = finite_report(advantage, G, law, values, constants, name)
    else:
        expr = advantage_expression(advantage, G, constants)
        if law == "general":
            report = _general(expr, G)
        elif isinstance(G, int):
            report = finite_report(expr, G, law, values, constants, name, _zero_on_equal(expr, G))
        else:
            report = _symbolic_G_finite(expr, law, values)
    if report.derivation is not None:
        report.derivation.verify()
    return report


# ============================================================ general law: the i.i.d. group algebra


def _general(expr, G) -> GroupReport:
    grp = IIDGroup(("R", "s"), G=G if isinstance(G, int) else None)
    ERs, Es = Expect(R_PLAIN * S_PLAIN), Expect(S_PLAIN)
    if isinstance(G, int):
        A1 = explicit_advantage(expr, G)
        try:
            moments = grp.expect_separable(A1 * S[1], 1)
        except ValueError as err:
            return _undecided_general(expr, G, f"the advantage is not a polynomial in the answer's own reward times a function of the others ({err})")

        unfold = Definitions((), GroupExpectation(("R", "s"), G, answer=1))

        start = Expect(A1 * S[1])
    else:
        try:
            moments = grp.expect(expr * S[I])
        except ValueError as err:
            return _undecided_general(expr, G, f"the advantage is not a polynomial in the rewards, so the i.i.d. algebra has no closed form ({err}); pass a number G or a finite reward law")
        unfold = Definitions((), GroupExpectation(("R", "s")))
        start = Expect(expr * S[I])
    d = Derivation(
        "Expected update of the group advantage (any reward law)",
        assumptions=[f"$G = {latex(G)}$ answers drawn i.i.d. from $\\pi_\\theta$" if isinstance(G, int) else r"$G \ge 2$ answers drawn i.i.d. from $\pi_\theta$",
                     r"$s$: a coordinate of the score of the answer; $\nabla_\theta J = \mathbb{E}[R s]$"],
        unfold=unfold,
    )
    d.step(start, moments, r"linearity; independence of distinct answers; identical moments")
    after = sp.expand(moments.xreplace({Es: 0}))
    d.then(after, r"$\mathbb{E}[s] = 0$", given=(sp.Eq(Es, 0),))
    c = sp.factor(after.coeff(ERs))
    residual = sp.expand(after - c * ERs)
    result = c * GRAD_J + residual
    d.then(result, r"$\mathbb{E}[R s] = \nabla_\theta J$", given=(sp.Eq(ERs, GRAD_J),))
    found, reason = verdict(c, residual, set(), "E[A_i s_i]")
    return GroupReport(found, c, residual, reason, d, "general", G, _zero_on_equal(expr, G))


def _undecided_general(expr, G, why: str) -> GroupReport:
    return GroupReport("undecided", None, None, f"under a general reward law {why}", None, "general", G, _zero_on_equal(expr, G))


def _zero_on_equal(expr, G) -> bool | None:
    """Whether the advantage vanishes when every reward equals the same value ``u``."""
    u = sp.Symbol("u", real=True)
    e = expr.replace(lambda x: isinstance(x, sp.Indexed) and x.base == R, lambda x: u).doit()
    e = sp.simplify(e)
    if e.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        return None
    return nonzero(e) is False


def _symbolic_G_finite(expr, law, values) -> GroupReport:
    """A finite law with symbolic G: the general result with the law's moments, when the advantage is polynomial."""
    general = _general(expr, G_SYMBOL)
    if general.verdict == "undecided":
        return GroupReport("undecided", None, None,
                           f"with a symbolic G {general.reason.removeprefix('under a general reward law ').removesuffix('; pass a number G or a finite reward law')}; pass a number G",
                           None, law if law == "binary" else values, G_SYMBOL, general.zero_on_equal_rewards)
    d = general.derivation
    assert d is not None  # a decided report carries its derivation
    if law == "binary":
        moments = {e: (P if not e.args[0].has(S_PLAIN) else GRAD_P) for e in (general.scale * GRAD_J + general.residual).atoms(Expect)}
        result = sp.expand((general.scale * GRAD_J + general.residual).xreplace(moments).xreplace({GRAD_J: GRAD_P}))
        c = sp.factor(result.coeff(GRAD_P))
        d.then(c * GRAD_P, r"binary reward: $R^d = R$, $\mathbb{E}[R^d s] = \nabla_\theta p$, $\mathbb{E}[R^d] = p$",
               given=tuple(sp.Eq(e, v) for e, v in {**moments, GRAD_J: GRAD_P}.items()))
        found, reason = verdict(c, sp.Integer(0), {P}, "E[A_i s_i]")
        return GroupReport(found, c, sp.Integer(0), reason, d, "binary", G_SYMBOL, general.zero_on_equal_rewards)
    return GroupReport("undecided", None, None, "a finite law with a symbolic G is checked for binary rewards only; pass a number G",
                       None, values, G_SYMBOL, general.zero_on_equal_rewards)
