r"""Checking a new estimator variant: group advantages and per-token losses, with a verdict.

Two questions a researcher (or a trainer engineer holding a function copied
from a trainer) asks before training anything, answered from the derivation.
This package is the checker's symbolic core (SymPy only); the entry points a
user calls with torch or numpy functions, and that confirm every verdict on
the toy LM, are :func:`numeric.variants.check_group_advantage` and
:func:`numeric.variants.check_token_loss`.

:func:`derive_group_advantage`
    For an advantage :math:`A_i` built from the rewards of a group of :math:`G`
    i.i.d. answers: is :math:`\mathbb{E}[A_i s_i]` the policy gradient
    :math:`\nabla_\theta J`, a constant multiple :math:`c\,\nabla_\theta J`, a
    policy-dependent multiple (the prompts are *reweighted*), or something else
    (*biased*)?
:func:`derive_token_loss`
    For a per-token loss in :math:`\ell = \log\pi_\theta`,
    :math:`\ell_0 = \log\pi_{\text{old}}`, :math:`r = e^{\ell-\ell_0}` and
    :math:`A`: its gradient weight :math:`w` (with
    :math:`\partial\,\mathrm{loss}/\partial\ell = -wA`), which tokens it
    silences, whether :math:`w` is bounded, whether it is a policy gradient at
    all, and which known method it is.

Each returns a frozen report whose ``derivation`` is a
:class:`~derivations.Derivation` checked against what it displays.  The core
is handed an expression, or the advantage's values on the count patterns
(:func:`count_patterns`: a table or a plain Python evaluator), and never
evaluates a torch or numpy function: :mod:`numeric.variants` tabulates those
and confirms the verdict by exact numbers on :class:`numeric.TinyLM` (a
disagreement raises :class:`SymbolicNumericMismatch`).  The modules:
:mod:`~derivations.variants.inputs` (vocabulary and input checks),
:mod:`~derivations.variants.reports` (reports and verdicts),
:mod:`~derivations.variants.render` (how a report shows itself in a notebook),
:mod:`~derivations.variants.group` (expressions, any law),
:mod:`~derivations.variants.patterns` (finite laws, count patterns),
:mod:`~derivations.variants.token` (per-token losses).

**The reduction for a finite reward law.**  Let one answer's reward take the
values :math:`y_1, \dots, y_m` with probabilities :math:`q_1, \dots, q_m`.
Condition on answer :math:`i`: with
:math:`\bar A(y) = \mathbb{E}[A_i \mid R_i = y]`,

.. math::

    \mathbb{E}[A_i s_i] = \sum_{y} \bar A(y)\, \mathbb{E}\bigl[\mathbb 1[R_i = y]\, s_i\bigr]
    = \sum_y \bar A(y)\, \nabla_\theta q_y ,

and :math:`\bar A(y)` is an average over the other :math:`G-1` answers, which are
independent of answer :math:`i`.  A permutation-equivariant advantage sees the
others only through how many take each value, a multinomial count
:math:`n = (n_1, \dots, n_m)` with probability :math:`\binom{G-1}{n}\prod_k q_k^{n_k}`:

.. math::

    \bar A(y) = \sum_{n_1 + \dots + n_m = G - 1} \binom{G-1}{n_1, \dots, n_m}
    \prod_k q_k^{n_k}\; A\bigl(y \,\big|\, n\bigr).

So the expected update sees the advantage only through its values on the
:math:`\binom{G+m-1}{m-1}` count patterns of the whole group (:math:`G + 1`
patterns for a binary reward: the pattern with :math:`n` successes gives a
success's advantage :math:`A(1, n - 1)` and a failure's :math:`A(0, n)`).  No
sampling is involved; :math:`c` is exact.  Writing :math:`\bar A(y)` as the
polynomial :math:`\sum_{d<m} \alpha_d y^d` through the :math:`m` points and
using :math:`\sum_y \nabla q_y = 0`,

.. math::

    \mathbb{E}[A_i s_i] = \alpha_1\, \nabla_\theta J + \sum_{d \ge 2} \alpha_d\, \mathbb{E}[R^d s],

the same decomposition as for a general law: :math:`c = \alpha_1` and a
residual along :math:`\nabla_\theta \mathbb{E}[R^d]`, :math:`d \ge 2`.  For a
binary reward :math:`R^d = R`: there is never a residual, and
:math:`c = a(1) - a(0)`.

References
----------
W. Kool, H. van Hoof, M. Welling, "Buy 4 REINFORCE samples, get a baseline for
free!" (2019).  Z. Shao et al., "DeepSeekMath" (GRPO), arXiv:2402.03300 (2024).
Z. Liu et al., "Understanding R1-Zero-like training: a critical perspective"
(Dr. GRPO), arXiv:2503.20783 (2025).
"""

from __future__ import annotations

import sympy as sp

from .. import gradient_weights as gw
from ..derivation import Derivation
from .group import derive_group_advantage
from .inputs import G_SYMBOL, GROUP, I, J, R
from .patterns import CountPattern, count_patterns
from .render import ReportTable, report_html
from .reports import VERDICTS, GroupReport, NotPermutationEquivariant, SymbolicNumericMismatch, TokenReport
from .token import KnownMethod, breakpoints, derive_token_loss, known_label, known_methods, known_names, token_loss_expression

__all__ = [
    "VERDICTS",
    "CountPattern",
    "GroupReport",
    "KnownMethod",
    "NotPermutationEquivariant",
    "ReportTable",
    "SymbolicNumericMismatch",
    "TokenReport",
    "breakpoints",
    "count_patterns",
    "derive_group_advantage",
    "derive_token_loss",
    "known_label",
    "known_methods",
    "known_names",
    "report_html",
    "token_loss_expression",
    "tutorial_derivation",
    "tutorial_variant",
]


# ============================================================ the tutorial's three variants


def tutorial_variant(name: str):
    r"""The three variants the chapter walks through, as ``(what, keyword arguments)`` for the checkers.

    ``"clip"``
        A two-sided truncated importance weight,
        :math:`-\mathrm{sg}\bigl(\mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h)\bigr)\,A\,\ell`.
    ``"zscore"``
        The std-normalised group advantage :math:`(R_i - \bar R)/(\sigma + \epsilon_{\mathrm{div}})`
        (population std) at :math:`G = 4`, binary reward.
    ``"own_reward"``
        A baseline that mixes in the answer's own reward,
        :math:`b_i = \tfrac12 R_i^2 + \bar R_{-i}`, any reward law.

    Examples
    --------
    >>> from derivations.variants import tutorial_variant
    >>> tutorial_variant("own_reward")[0]
    -R[i]**2/2 + R[i] - (-R[i] + Sum(R[j], (j, 1, G)))/(G - 1)
    """
    eps = sp.Symbol(r"\epsilon_{\mathrm{div}}", positive=True)
    if name == "clip":
        return -gw.sg(sp.Min(sp.Max(gw.r, 1 - gw.eps_l), 1 + gw.eps_h)) * gw.A * gw.ell, {}
    if name == "zscore":
        m = GROUP.mean()
        sigma = sp.sqrt(sp.Sum((R[J] - m) ** 2, (J, 1, G_SYMBOL)) / G_SYMBOL)
        return (R[I] - m) / (sigma + eps), {"G": 4, "rewards": "binary", "constants": {eps: 1e-3}}
    if name == "own_reward":
        return R[I] - (R[I] ** 2 / 2 + GROUP.mean_others(I)), {}
    raise ValueError(f"name must be one of 'clip', 'zscore', 'own_reward', got {name!r}")


def tutorial_derivation(name: str) -> Derivation:
    """The derivation of the checker's report on one of the tutorial's variants (the symbolic core's).

    Examples
    --------
    >>> from derivations.variants import tutorial_derivation
    >>> len(tutorial_derivation("own_reward").verify().steps)
    3
    """
    what, kwargs = tutorial_variant(name)
    report = derive_token_loss(what) if name == "clip" else derive_group_advantage(what, **kwargs)
    if report.derivation is None:
        raise ValueError(f"the tutorial variant {name!r} has no derivation: {report.reason}")
    return report.derivation


for _public in (GroupReport, TokenReport, NotPermutationEquivariant, SymbolicNumericMismatch,
                derive_group_advantage, derive_token_loss, count_patterns, token_loss_expression, breakpoints):
    _public.__module__ = __name__  # the public path in tracebacks, the API reference and the input sweep
del _public
