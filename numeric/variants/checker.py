r"""The variant checker's entry points: a variant as a trainer writes it in, a confirmed verdict out.

:func:`check_group_advantage` and :func:`check_token_loss` take SymPy
expressions or the torch/numpy functions a trainer holds.  A function is
evaluated here (:mod:`~numeric.variants.callables`,
:mod:`~numeric.variants.token_callables`); the symbolic core
(:func:`derivations.variants.derive_group_advantage`,
:func:`derivations.variants.derive_token_loss`) derives the verdict; and,
unless ``confirm=False``, the verdict is confirmed by exact numbers on the toy
LM (:mod:`~numeric.variants.confirm`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import sympy as sp

from derivations.canonical import DerivationError
from derivations.variants import (
    GroupReport,
    NotPermutationEquivariant,
    TokenReport,
    derive_group_advantage,
    derive_token_loss,
    token_loss_expression,
)
from derivations.variants.inputs import require_bool, require_constants, require_group_size, reward_law
from derivations.variants.patterns import SYMBOLIC_PATTERNS, coefficient_report, pattern_count

from .callables import advantage_coefficients, advantage_table, require_advantage_callable, zero_on_equal_rewards
from .confirm import confirm_group, confirm_token
from .positional import MAX_G, positional_report, relabelling_averaged, what_moves
from .token_callables import token_report_from_callable

__all__ = ["check_group_advantage", "check_token_loss"]


def _is_function(x) -> bool:
    return callable(x) and not isinstance(x, sp.Basic)


def check_group_advantage(advantage: sp.Expr | Callable, *, G: int | None = None, rewards: str | Sequence[float] = "general",
                          constants: Mapping | None = None, name: str = "the advantage", confirm: bool = True) -> GroupReport:
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
    (the CAS could not decide; the reason says why).  The derivation is
    :func:`derivations.variants.derive_group_advantage`'s; a function is
    first tabulated on the count patterns (:func:`advantage_table`).

    Parameters
    ----------
    advantage : sympy expression or callable
        Either answer :math:`i`'s advantage in the vocabulary of
        :class:`~derivations.iid_groups.IIDGroup` (``R[i]``, sums over
        ``j = 1..G``, ``mean()``, ``mean_others(i)``, constants; with a number
        ``G`` also explicit answers ``R[1]..R[G]``, the answer labelled 1 under study), or a
        function mapping rewards ``[..., G]`` (numpy or torch) to advantages of
        the same shape, as a trainer writes it.
    G : int, optional
        The group size (:math:`\ge 2`); symbolic when omitted (expressions only).
    rewards : {"general", "binary"} or list of numbers
        The reward law: any law, Bernoulli(:math:`p`), or a finite set of values
        with symbolic probabilities :math:`q_k`.  A callable needs a binary or
        finite law: its expected update is then exact
        (the count-pattern reduction, see :mod:`derivations.variants`).  Up to
        :data:`~derivations.variants.patterns.SYMBOLIC_PATTERNS` count patterns
        (binary up to :math:`G = 87`, five values up to :math:`G = 4`) the
        reduction is symbolic and its derivation kernel-checked; above, the
        whole groups are streamed and the verdict is decided numerically from
        the Bernstein coefficients, to the tolerance the report states
        (:func:`derivations.variants.patterns.coefficient_report`; the report
        has no derivation and says so).
    constants : dict, optional
        Symbols the expression may use besides the group's (``{eps: 1e-6}``);
        the derivation keeps them symbolic, the numeric confirmation uses the value.
    name : str
        What to call the variant in the derivation's title.
    confirm : bool
        Confirm the symbolic answer with the exact group engine on
        :class:`numeric.TinyLM` (default).

    Returns
    -------
    GroupReport

    Raises
    ------
    TypeError, ValueError
        Bad input: unknown free symbols, a non-scalar expression, ``G < 2``, a
        callable with the wrong output shape or non-finite values, an unknown reward law.
    NotPermutationEquivariant
        An expression whose advantage depends on the order of the answers, or such a callable at
        :math:`G >` :data:`~numeric.variants.positional.MAX_G`.  A callable at smaller :math:`G` gets the
        verdict of its summed update :math:`\frac1G\sum_i\mathbb{E}[A_i s_i]` and each position's scale
        (:mod:`~numeric.variants.positional`).
    SymbolicNumericMismatch
        The exact numbers disagree with the symbolic result.

    Examples
    --------
    >>> from derivations.iid_groups import IIDGroup
    >>> from numeric import rloo_advantages
    >>> from numeric.variants import check_group_advantage
    >>> grp = IIDGroup()
    >>> rep = check_group_advantage(grp.R[grp.i] - grp.mean())
    >>> rep.verdict, rep.scale
    ('scaled', (G - 1)/G)
    >>> check_group_advantage(grp.R[grp.i] - grp.mean_others(grp.i)).verdict
    'unbiased'
    >>> check_group_advantage(rloo_advantages, G=5, rewards="binary").verdict
    'unbiased'
    """
    constants, confirm = require_constants(constants), require_bool("confirm", confirm)
    if isinstance(advantage, Mapping):
        raise TypeError("advantage must be a sympy expression or a function of [B, G] rewards; values on the count patterns "
                        "go to derivations.variants.derive_group_advantage")
    law, values = reward_law(rewards)
    is_fn = _is_function(advantage)
    size = require_group_size(G, needed=is_fn)
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if is_fn:
        if law == "general":
            raise ValueError("rewards must be 'binary' or a list of values for a callable advantage: "
                             "under a general law its expected update is not fixed by finitely many values")
        try:
            require_advantage_callable(advantage, size)
        except NotPermutationEquivariant:
            if size > MAX_G:
                raise NotPermutationEquivariant(f"the advantage depends on the answers' positions ({what_moves(advantage, size)}); its "
                                                f"summed update is derived by enumerating the G! relabellings, for G <= {MAX_G}, got "
                                                f"G = {size}") from None
            averaged = relabelling_averaged(advantage, size)
            require_advantage_callable(averaged, size)  # equivariant by construction: a failure here is the checker's, not the user's
            summed = _callable_report(averaged, size, rewards, values, constants, name)
            if confirm:
                summed = confirm_group(summed, averaged, constants)
            return positional_report(advantage, size, rewards, constants, name, summed)
        report = _callable_report(advantage, size, rewards, values, constants, name)
    else:
        report = derive_group_advantage(advantage, G=G, rewards=rewards, constants=constants, name=name)
    if confirm:
        report = confirm_group(report, advantage, constants)
    return report


def _callable_report(advantage: Callable, size: int, rewards, values: tuple, constants: dict, name: str) -> GroupReport:
    """The report of an equivariant callable: its table derived symbolically, or its coefficients decided numerically at scale."""
    report, lost = None, ""
    if pattern_count(len(values), size) <= SYMBOLIC_PATTERNS:
        table = advantage_table(advantage, size, rewards)
        try:
            report = derive_group_advantage(table, G=size, rewards=rewards, constants=constants, name=name)
        except DerivationError as err:  # fp64 values the exact route cannot carry: the numeric route, its tolerance stated
            lost = f"the exact reduction did not verify on the advantage's fp64 values ({str(err).splitlines()[0][:160]}); "
    if report is None:
        co = advantage_coefficients(advantage, size, rewards)
        report = coefficient_report(size, rewards, co.bounds(), largest=co.largest, evaluate=co.evaluate, name=name)
        report = dataclasses.replace(report, reason=lost + report.reason)
    return dataclasses.replace(report, zero_on_equal_rewards=zero_on_equal_rewards(advantage, size))


def check_token_loss(loss: sp.Expr | Callable, *, constants: Mapping | None = None, confirm: bool = True) -> TokenReport:
    r"""The gradient weight of a per-token loss, and what it implies.

    For a loss in :math:`\ell = \log\pi_\theta(o_t\mid s_t)`, :math:`\ell_0`,
    :math:`r = e^{\ell-\ell_0}`, :math:`A` and constants, the weight :math:`w`
    is defined by

    .. math::

        \frac{\partial\,\mathrm{loss}}{\partial\ell} = -\,w\,A .

    An expression's weight is derived region by region by
    :func:`derivations.variants.derive_token_loss`; a torch function's is
    tabulated by autograd on a grid (:func:`token_report_from_callable`).

    Parameters
    ----------
    loss : sympy expression or callable
        One token's loss (minimised) in the symbols of
        :mod:`derivations.gradient_weights`, or a torch function
        ``loss(log_prob, old_log_prob, advantage)`` returning the per-token
        loss (then the weight is tabulated by autograd on a grid).
    constants : dict, optional
        ``{symbol: value}``: extra constants the expression may use; the values
        (and those of ``eps_l``, ``eps_h``, ``c``, default 0.2, 0.28, 3) are used
        by the numeric confirmation and to match a callable with the known methods.
        The registry's own constants (:data:`derivations.methods.CONSTANTS`:
        SAPO's :math:`\tau_\pm`, GMPO's :math:`\delta`, VESPO's :math:`k, \lambda`,
        KL-Cov's :math:`\beta`) need no declaring: an expression keeps them
        symbolic, and the confirmation takes the registry's defaults.
    confirm : bool
        Confirm by autograd on TinyLM's tokens.

    Returns
    -------
    TokenReport

    Raises
    ------
    TypeError, ValueError
        A non-scalar expression, unknown free symbols, a loss without
        :math:`\ell`, a callable with the wrong output shape or non-finite values.
    SymbolicNumericMismatch
        The derived weight disagrees with autograd on the toy LM.

    Examples
    --------
    >>> from derivations.gradient_weights import A, ell, r, token_loss
    >>> from numeric.variants import check_token_loss
    >>> rep = check_token_loss(token_loss("cispo_cap"))
    >>> rep.weight, rep.matches, rep.bounded
    (Piecewise((r, r <= varepsilon_h + 1), (varepsilon_h + 1, True)), 'CISPO (one-sided)', {1: True, -1: True})
    >>> check_token_loss(-r * A * ell).is_policy_gradient   # forgot sg(r)
    False
    >>> from derivations.methods import METHODS
    >>> check_token_loss(METHODS["sapo"].loss()).matches   # tau_+ for A > 0, tau_- otherwise
    'SAPO'
    """
    constants, confirm = require_constants(constants), require_bool("confirm", confirm)
    if _is_function(loss):
        return token_report_from_callable(loss, constants)
    expr = token_loss_expression(loss, constants)
    report = derive_token_loss(expr, constants=constants)
    if confirm and report.weight is not None:
        report = confirm_token(report, expr, constants)
    return report
