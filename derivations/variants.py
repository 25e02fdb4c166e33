r"""Checking a new estimator variant: group advantages and per-token losses, with a verdict.

Two questions a researcher (or a trainer engineer holding a function copied
from a trainer) asks before training anything, answered from the derivation:

:func:`check_group_advantage`
    For an advantage :math:`A_i` built from the rewards of a group of :math:`G`
    i.i.d. answers: is :math:`\mathbb{E}[A_i s_i]` the policy gradient
    :math:`\nabla_\theta J`, a constant multiple :math:`c\,\nabla_\theta J`, a
    policy-dependent multiple (the prompts are *reweighted*), or something else
    (*biased*)?
:func:`check_token_loss`
    For a per-token loss in :math:`\ell = \log\pi_\theta`,
    :math:`\ell_0 = \log\pi_{\text{old}}`, :math:`r = e^{\ell-\ell_0}` and
    :math:`A`: its gradient weight :math:`w` (with
    :math:`\partial\,\mathrm{loss}/\partial\ell = -wA`), which tokens it
    silences, whether :math:`w` is bounded, whether it is a policy gradient at
    all, and which known method it is.

Each returns a frozen report whose ``derivation`` is a
:class:`~derivations.Derivation` checked against what it displays, and whose
verdict is confirmed by exact numbers on :class:`numeric.TinyLM`
(:mod:`numeric.variants`; a disagreement raises :class:`SymbolicNumericMismatch`).
The numeric confirmation and the evaluation of torch callables are the one
place where this module calls into :mod:`numeric`, lazily, at call time:
``confirm=False`` keeps a check SymPy-only (expressions only).

**The reduction for a finite reward law.**  Let one answer's reward take the
values :math:`v_1, \dots, v_m` with probabilities :math:`q_1, \dots, q_m`.
Condition on answer :math:`i`: with
:math:`a(v) = \mathbb{E}[A_i \mid R_i = v]`,

.. math::

    \mathbb{E}[A_i s_i] = \sum_{v} a(v)\, \mathbb{E}\bigl[\mathbb 1[R_i = v]\, s_i\bigr]
    = \sum_v a(v)\, \nabla_\theta q_v ,

and :math:`a(v)` is an average over the other :math:`G-1` answers, which are
independent of answer :math:`i`.  A permutation-equivariant advantage sees the
others only through how many take each value, a multinomial count
:math:`c` with probability :math:`\binom{G-1}{c}\prod_k q_k^{c_k}`:

.. math::

    a(v) = \sum_{c_1 + \dots + c_m = G - 1} \binom{G-1}{c_1, \dots, c_m}
    \prod_k q_k^{c_k}\; A\bigl(v \,\big|\, c\bigr).

So the expected update sees the advantage only through its values on the
:math:`\binom{G+m-1}{m-1}` count patterns of the whole group (:math:`G + 1`
patterns for a binary reward: the pattern with :math:`n` successes gives a
success's advantage :math:`a(1, n - 1)` and a failure's :math:`a(0, n)`).  No
sampling is involved; :math:`c` is exact.  Writing :math:`a(v)` as the
polynomial :math:`\sum_{d<m} \alpha_d v^d` through the :math:`m` points and
using :math:`\sum_v \nabla q_v = 0`,

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

import itertools
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cmp_to_key

import sympy as sp

from ._validate import require_int
from .derivation import Claim, Derivation, is_zero
from .group_baselines import GRAD_J, GRAD_P, P
from .iid_groups import Expect, IIDGroup
from . import gradient_weights as gw
from .proofs import decide_sign, interval_points, on_regions, resolve

__all__ = [
    "GroupReport",
    "TokenReport",
    "check_token_loss",
    "NotPermutationEquivariant",
    "SymbolicNumericMismatch",
    "VERDICTS",
    "check_group_advantage",
]

VERDICTS = ("unbiased", "scaled", "reweighted", "biased", "undecided")
"""The possible verdicts, from best to unknown."""


class NotPermutationEquivariant(ValueError):
    """A group advantage that changes when the answers are relabelled: its expected update is not one per answer."""


class SymbolicNumericMismatch(AssertionError):
    """The symbolic verdict and the exact numbers on the toy LM disagree: a bug in the checker or in the variant."""


_GROUP = IIDGroup(("R", "s"))
R, S, I, J, G_SYMBOL = _GROUP.R, _GROUP.s, _GROUP.i, _GROUP.j, _GROUP.G
_R_PLAIN, _S_PLAIN = _GROUP.plain["R"], _GROUP.plain["s"]


# ============================================================ the report


@dataclass(frozen=True)
class GroupReport:
    r"""What :func:`check_group_advantage` found.

    Attributes
    ----------
    verdict : str
        One of :data:`VERDICTS`.
    scale : sympy expression or None
        :math:`c` in :math:`\mathbb{E}[A_i s_i] = c\,\nabla_\theta J + \text{residual}`
        (:math:`\nabla_\theta J = \nabla_\theta p` for a binary reward).
    residual : sympy expression or None
        The part of the expected update that is not along :math:`\nabla_\theta J`,
        in the moments :math:`\mathbb{E}[R^d s] = \nabla_\theta\mathbb{E}[R^d]`.
    reason : str
        One sentence.
    derivation : Derivation or None
        The verified chain from :math:`\mathbb{E}[A_i s_i]` to the result.
    rewards : str or tuple
        The reward law checked.
    G : int or sympy.Symbol
        The group size.
    zero_on_equal_rewards : bool or None
        Whether every advantage vanishes when all rewards are equal (``None``: undefined there).
    numeric : tuple
        ``(G, symbolic, exact, discrepancy)`` rows: :math:`\|c\nabla J + \text{residual}\|`
        against the exact group engine on the toy LM, per group size.
    """

    verdict: str
    scale: sp.Expr | None
    residual: sp.Expr | None
    reason: str
    derivation: Derivation | None
    rewards: object
    G: object
    zero_on_equal_rewards: bool | None = None
    numeric: tuple = field(default=(), compare=False)

    def table(self) -> str:
        """The numeric confirmation as a plain-text table."""
        if not self.numeric:
            return "(no numeric confirmation)"
        lines = ["   G   |symbolic update|   |exact update|   discrepancy"]
        lines += [f"{g:4d}   {s:16.12f}   {e:14.12f}   {d:9.1e}" for g, s, e, d in self.numeric]
        return "\n".join(lines)

    def __str__(self) -> str:
        c = "-" if self.scale is None else sp.sstr(self.scale)
        res = "-" if self.residual is None else sp.sstr(self.residual)
        return f"{self.verdict}: c = {c}, residual = {res}\n{self.reason}"

    def _repr_latex_(self) -> str:
        head = r"\text{verdict: " + self.verdict + "}"
        if self.scale is not None:
            head += r",\quad c = " + sp.latex(self.scale)
        if self.derivation is None:
            return "$$" + head + "$$"
        return "$$" + head + r"\\" + self.derivation.to_latex() + "$$"


# ============================================================ input checks


def _law(rewards) -> tuple[str, tuple]:
    """``("general", ())``, ``("binary", (0, 1))`` or ``("finite", values)`` with exact distinct values."""
    if isinstance(rewards, str):
        if rewards == "general":
            return "general", ()
        if rewards == "binary":
            return "binary", (sp.Integer(0), sp.Integer(1))
        raise ValueError(f"rewards must be 'general', 'binary' or a list of at least two distinct reward values, got {rewards!r}")
    if not isinstance(rewards, Sequence) or isinstance(rewards, (bytes, Mapping)):
        raise TypeError(f"rewards must be 'general', 'binary' or a list of reward values, got {type(rewards).__name__}")
    values = []
    for v in rewards:
        if isinstance(v, bool) or not isinstance(v, (numbers.Real, sp.Rational)):
            raise TypeError(f"rewards must hold real numbers (ints, floats, sympy rationals), got {v!r}")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"rewards must be finite, got {v}")
        values.append(sp.nsimplify(v, rational=True) if isinstance(v, float) else sp.sympify(v))
    if len(values) < 2 or len(set(values)) != len(values):
        raise ValueError(f"rewards must list at least two distinct values, got {list(rewards)!r}")
    values = tuple(sorted(values))
    if values == (0, 1):
        return "binary", values
    return "finite", values


def _require_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def _require_G(G, needed: bool):
    if G is None:
        if needed:
            raise ValueError("G must be an int >= 2 for a callable advantage (the callable sees a concrete group)")
        return G_SYMBOL
    return require_int("G", G, minimum=2)


def _constants(constants) -> dict:
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


def _scalar_expression(name: str, value, what: str, alternative: str) -> sp.Expr:
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


def _check_expression(expr, G, constants) -> sp.Expr:
    expr = _scalar_expression("advantage", expr, "a scalar sympy expression (one answer's advantage)", "a callable")
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


def _explicit(expr, G: int) -> sp.Expr:
    """Answer 1's advantage at a number ``G``, a function of ``R[1..G]`` (sums written out)."""
    return expr.xreplace({G_SYMBOL: sp.Integer(G)}).subs(I, 1).doit()


# ============================================================ verdicts


def _q(m: int) -> tuple:
    return sp.symbols(f"q_1:{m + 1}", positive=True)


def _nonzero(x) -> bool | None:
    """``True``/``False`` when ``x`` is decided non-zero/zero, ``None`` otherwise.

    Non-zero: at an exact point (or as a constant) it evaluates, to 40 digits,
    clearly away from 0.  Zero: the canonicalisers reduce it to 0; for an
    expression holding floats (a callable's fp64 values), it is below 1e-12 at
    three points.
    """
    x = sp.sympify(x)
    if x == 0:
        return False
    floats = x.has(sp.Float)
    tol = sp.Float(10) ** (-12 if floats else -25)
    syms = sorted(x.free_symbols, key=str)
    points = [{s_: sp.Rational(2 + k, 7 + k) + sp.Rational(j, 13) for j, s_ in enumerate(syms)} for k in range(3)]
    values = [sp.N(x.xreplace(pt), 40) for pt in points]
    if any(v.is_number and v.is_real and abs(v) > tol for v in values):
        return True
    if floats and all(v.is_number and v.is_real for v in values):
        return False
    return False if is_zero(x) is not None else None


def _depends_on(c: sp.Expr, policy: set) -> bool | None:
    """Whether ``c`` varies with the policy: its moments ``Expect(...)`` or the probabilities ``p``, ``q_k``."""
    moments = sorted(c.atoms(Expect), key=sp.default_sort_key)
    stand_ins = [sp.Dummy("m") for _ in moments]
    c = c.xreplace(dict(zip(moments, stand_ins)))
    variables = [*stand_ins, *sorted(c.free_symbols & policy, key=str)]
    if not variables:
        return False
    if c.is_polynomial(*variables):
        answers = [_nonzero(cf) for monom, cf in sp.Poly(c, *variables).terms() if any(monom)]
    else:
        answers = [_nonzero(sp.diff(c, v)) for v in variables]
    if any(a is True for a in answers):
        return True
    return False if all(a is False for a in answers) else None


def _verdict(c: sp.Expr, residual: sp.Expr, policy: set, what: str, depends: bool | None = None) -> tuple[str, str]:
    nz = _nonzero(residual)
    if nz is None:
        return "undecided", f"the CAS could not decide whether the residual {sp.sstr(residual)} vanishes"
    if nz:
        return "biased", f"{what} has a component along {', '.join(_moments_in(residual))}, not a multiple of the policy gradient"
    dep = _depends_on(c, policy) if depends is None else depends
    if dep is None:
        return "undecided", f"the CAS could not decide whether c = {sp.sstr(c)} depends on the policy"
    if dep:
        return "reweighted", f"{what} is c times the policy gradient with c = {sp.sstr(c)}, which depends on the policy: prompts are reweighted"
    off = _nonzero(c - 1)
    if off is None:
        return "undecided", f"the CAS could not decide whether c = {sp.sstr(c)} equals 1"
    if off:
        return "scaled", f"{what} is the policy gradient times the constant c = {sp.sstr(c)}"
    return "unbiased", f"{what} is exactly the policy gradient (c = 1)"


def _moments_in(expr) -> list:
    return sorted({sp.sstr(a) for a in sp.sympify(expr).atoms(Expect)} or {sp.sstr(expr)})


# ============================================================ general law: the i.i.d. group algebra


def _separable_expect(expr, grp: IIDGroup) -> sp.Expr:
    r"""E[expr] for a number G, answer 1 under study: polynomial in R[1]; any function of the others.

    Each term is :math:`g(R_1)\,h(R_2, \dots, R_G)\,s_1`; independence gives
    :math:`\mathbb{E}[g(R)s]\,\mathbb{E}[h]`, and a non-polynomial ``h`` stays
    an unevaluated :math:`\mathbb{E}[h]`.
    """
    out = sp.Integer(0)
    for term in sp.Add.make_args(sp.expand(expr)):
        own, others = sp.Integer(1), sp.Integer(1)
        for f in sp.Mul.make_args(term):
            idx = {a.indices[0] for a in f.atoms(sp.Indexed)}
            if not idx:
                own *= f
            elif idx == {1}:
                own *= f
            elif 1 in idx:
                raise _NotSeparable(sp.sstr(f))
            else:
                others *= f
        if not own.is_polynomial(R[1], S[1]) and own.has(R[1]):
            raise _NotSeparable(sp.sstr(own))
        if others == 1:
            out += grp.expect(own)
        elif others.is_polynomial(*sorted(others.atoms(sp.Indexed), key=str)):
            out += grp.expect(own * others)
        else:
            out += grp.expect(own) * Expect(others)
    return sp.expand(out)


class _NotSeparable(Exception):
    pass


def _general(expr, G, constants) -> GroupReport:
    grp = IIDGroup(("R", "s"), G=G if isinstance(G, int) else None)
    ERs, Es = Expect(_R_PLAIN * _S_PLAIN), Expect(_S_PLAIN)
    if isinstance(G, int):
        A1 = _explicit(expr, G)
        try:
            moments = _separable_expect(A1 * S[1], grp)
        except (_NotSeparable, ValueError) as err:
            return _undecided_general(expr, G, f"the advantage is not a polynomial in the answer's own reward times a function of the others ({err})")

        def unfold(e):
            return e.replace(lambda x: isinstance(x, Expect) and x.args[0].has(S[1]), lambda x: _separable_expect(x.args[0], grp))

        start = Expect(A1 * S[1])
    else:
        try:
            moments = grp.expect(expr * S[I])
        except ValueError as err:
            return _undecided_general(expr, G, f"the advantage is not a polynomial in the rewards, so the i.i.d. algebra has no closed form ({err}); pass a number G or a finite reward law")
        unfold = grp.unfold
        start = Expect(expr * S[I])
    d = Derivation(
        "Expected update of the group advantage (any reward law)",
        assumptions=[f"$G = {sp.latex(G)}$ answers drawn i.i.d. from $\\pi_\\theta$" if isinstance(G, int) else r"$G \ge 2$ answers drawn i.i.d. from $\pi_\theta$",
                     r"$s$: a coordinate of the score of the answer; $\nabla_\theta J = \mathbb{E}[R s]$"],
        unfold=unfold,
    )
    d.step(start, moments, r"linearity; independence of distinct answers; identical moments")
    after = sp.expand(moments.xreplace({Es: 0}))
    d.then(after, r"$\mathbb{E}[s] = 0$", facts={Es: 0})
    c = sp.factor(after.coeff(ERs))
    residual = sp.expand(after - c * ERs)
    result = c * GRAD_J + residual
    d.then(result, r"$\mathbb{E}[R s] = \nabla_\theta J$", facts={ERs: GRAD_J})
    verdict, reason = _verdict(c, residual, set(), "E[A_i s_i]")
    return GroupReport(verdict, c, residual, reason, d, "general", G, _zero_on_equal(expr, G))


def _undecided_general(expr, G, why: str) -> GroupReport:
    return GroupReport("undecided", None, None, f"under a general reward law {why}", None, "general", G, _zero_on_equal(expr, G))


def _zero_on_equal(expr, G) -> bool | None:
    """Whether the advantage vanishes when every reward equals the same value ``u``."""
    u = sp.Symbol("u", real=True)
    e = expr.replace(lambda x: isinstance(x, sp.Indexed) and x.base == R, lambda x: u).doit()
    e = sp.simplify(e)
    if e.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        return None
    return _nonzero(e) is False


# ============================================================ finite laws: count patterns


def _count_patterns(m: int, n: int):
    """Every way to put ``n`` answers on ``m`` values, as count tuples."""
    for bars in itertools.combinations(range(n + m - 1), m - 1):
        edges = (-1, *bars, n + m - 1)
        yield tuple(b - a - 1 for a, b in zip(edges, edges[1:]))


def _multinomial(counts) -> int:
    out, n = 1, 0
    for c_ in counts:
        n += c_
        out *= math.comb(n, c_)
    return out


def _group_of(own, counts, values) -> list:
    return [own, *[v for v, c_ in zip(values, counts) for _ in range(c_)]]


class _Values:
    """The advantage's values on the count patterns: answer 1's advantage for each own value and pattern of the others."""

    def __init__(self, advantage, G: int, values: tuple, constants: dict):
        self.G, self.values = G, values
        self.patterns = list(_count_patterns(len(values), G - 1))
        if callable(advantage) and not isinstance(advantage, sp.Basic):
            from numeric.variants import advantage_values  # the callable may want torch

            groups = [_group_of(v, c_, values) for v in values for c_ in self.patterns]
            raw = advantage_values(advantage, [[float(x) for x in g] for g in groups], G)
            table = [_exact(x) for x in raw]
        else:
            A1 = _explicit(advantage, G)
            table = []
            for v in values:
                for c_ in self.patterns:
                    val = A1.xreplace({R[k + 1]: x for k, x in enumerate(_group_of(v, c_, values))})
                    val = sp.nsimplify(sp.simplify(val)) if val.has(sp.Float) else sp.simplify(val)
                    if val.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or val.has(sp.Indexed):
                        raise ValueError(
                            f"advantage is undefined on the group {_group_of(v, c_, values)} (got {val}): "
                            "add an epsilon to a denominator that can vanish"
                        )
                    table.append(val)
        n = len(self.patterns)
        self.a = {v: table[k * n:(k + 1) * n] for k, v in enumerate(values)}

    def conditional(self, v, q) -> sp.Expr:
        r""":math:`a(v) = \sum_c \binom{G-1}{c} \prod_k q_k^{c_k} A(v \mid c)`."""
        return sp.Add(*[_multinomial(c_) * sp.Mul(*[qk**ck for qk, ck in zip(q, c_)]) * val
                        for c_, val in zip(self.patterns, self.a[v])])


@cache
def _exact(x: float) -> sp.Expr:
    """A float as an exact number: a short closed form when one matches to 1e-14, else the float itself."""
    if not math.isfinite(x):
        raise ValueError(f"advantage returned a non-finite value {x}")
    guess = sp.nsimplify(x)
    if len(sp.sstr(guess)) <= 16 and abs(float(guess) - x) <= 1e-14 * max(1.0, abs(x)):
        return guess
    return sp.Float(x, 17)


def _finite(advantage, G: int, law: str, values: tuple, constants: dict, name: str) -> GroupReport:
    m = len(values)
    tab = _Values(advantage, G, values, constants)
    binary = law == "binary"
    q = (1 - P, P) if binary else _q(m)
    grads = (-GRAD_P, GRAD_P) if binary else tuple(sp.Symbol(r"\nabla_{\theta} q_{%d}" % (k + 1), real=True) for k in range(m))
    cond = {v: tab.conditional(v, q) for v in values}
    # the displayed reduction: sum_v a(v) grad q_v (for a binary law collected on grad p)
    if binary:
        bern = [sp.binomial(G - 1, k) * (tab.a[1][_binary_index(tab, k, 1)] - tab.a[0][_binary_index(tab, k, 0)]) for k in range(G)]
        reduced = sp.Add(*[b * P**k * (1 - P) ** (G - 1 - k) for k, b in enumerate(bern)], evaluate=False) * GRAD_P
        shown = r"$a(1, k) - a(0, k)$ (success minus failure among $k$ other successes) on the " + f"{G + 1}" + r" reward patterns; $K \sim \mathrm{Bin}(G-1, p)$"
    else:
        reduced = sp.Add(*[sp.expand(cond[v]) * gq for v, gq in zip(values, grads)], evaluate=False)
        shown = r"condition on $R_1$; the others enter through their multinomial counts: " + f"{len(tab.patterns) * m}" + r" patterns"
    lhs = Expect(sp.Symbol("A_1", real=True) * S[1])
    law_text = r"$R \in \{0, 1\}$, $p = \Pr[R = 1]$" if binary else (
        r"$R \in \{" + ", ".join(map(sp.latex, values)) + r"\}$, $q_k = \Pr[R = v_k]$, $\sum_k q_k = 1$")
    d = Derivation(
        f"Expected update of {name} ({'binary' if binary else 'finite'} reward, G = {G})",
        assumptions=[law_text, f"$G = {G}$ answers drawn i.i.d. from $\\pi_\\theta$; $A_1$ the advantage of answer 1",
                     r"$\nabla_\theta J = \mathbb{E}[R s]$" + (r" $= \nabla_\theta p$" if binary else "")],
        unfold=None if binary else _finite_unfold(values, q, grads),
    )
    d.step(lhs, reduced, shown, proof=_reduction_proof(advantage, G, values, q, grads, constants, binary))
    if binary:
        bernstein = reduced / GRAD_P
        residual = sp.Integer(0)
        c = bernstein
        diffs = [sp.radsimp(b / sp.binomial(G - 1, k)) for k, b in enumerate(bern)]
        # the Bernstein polynomials are linearly independent: c is constant in p iff its coefficients are equal
        equal = [_nonzero(x - diffs[0]) for x in diffs[1:]]
        depends = True if any(e is True for e in equal) else (False if all(e is False for e in equal) else None)
        if depends is False and not bernstein.has(sp.Float):
            c = diffs[0]
            d.then(c * GRAD_P, r"equal coefficients; the Bernstein polynomials sum to 1")
        elif depends is False:
            c = diffs[0]
            d.then(c * GRAD_P, r"coefficients equal to fp64 rounding; the Bernstein polynomials sum to 1",
                   proof=_named_proof("equal to 1e-12 per coefficient", lambda claim: _same(claim.left, claim.right)))
        elif not bernstein.has(sp.Float) and G <= 6:  # fp64 values, and long radicals, stay in the Bernstein form
            c_nice = _nice(sp.collect(sp.expand(bernstein), P))
            if len(sp.sstr(c_nice)) < len(sp.sstr(bernstein)):
                c = c_nice
                d.then(c * GRAD_P, "expand and collect")
        policy = {P}
    else:
        alphas = _interpolate(values, cond)
        c = _nice(sp.expand(alphas[1].subs(q[-1], 1 - sum(q[:-1]))))
        residual = sp.Add(*[_nice(sp.expand(alphas[dg].subs(q[-1], 1 - sum(q[:-1])))) * Expect(_R_PLAIN**dg * _S_PLAIN) for dg in range(2, m)])
        d.then(c * GRAD_J + residual, r"interpolate $a(v) = \sum_{d<m} \alpha_d v^d$; $\sum_k \nabla q_k = 0$; $\sum_k q_k = 1$")
        policy = set(q)
    verdict, reason = _verdict(c, residual, policy, "E[A_i s_i]", depends if binary else None)
    equal = _callable_equal(advantage, G, values, constants) if callable(advantage) and not isinstance(advantage, sp.Basic) else _zero_on_equal(advantage, G)
    return GroupReport(verdict, c, residual, reason, d, "binary" if binary else values, G, equal)


def _binary_index(tab: _Values, k: int, own) -> int:
    """Index of the pattern with ``k`` successes among the others (values (0, 1): counts (G-1-k, k))."""
    return tab.patterns.index((tab.G - 1 - k, k))


def _nice(c: sp.Expr) -> sp.Expr:
    """A readable exact form: a polynomial symmetric under p -> 1 - p written in u = p(1 - p)."""
    c = sp.sympify(c)
    if c.free_symbols != {P} or c.has(sp.Float) or not c.is_polynomial(P):
        return c
    rest = sp.expand(c)
    if is_zero(rest.subs(P, 1 - P) - rest) is None:
        return c
    out = sp.Integer(0)
    for k in range(sp.degree(rest, P) // 2, 0, -1):
        cf = sp.radsimp(sp.Poly(rest, P).coeff_monomial(P ** (2 * k)) * (-1) ** k)
        out += cf * (P * (1 - P)) ** k
        rest = sp.expand(rest - cf * (P * (1 - P)) ** k)
    if rest.has(P):
        return c
    return sp.radsimp(rest) + out


def _interpolate(values: tuple, cond: dict) -> dict:
    """Coefficients alpha_d of the polynomial through (v, a(v)), d = 0..m-1."""
    m = len(values)
    V = sp.Matrix([[v**dg for dg in range(m)] for v in values])
    alpha = V.LUsolve(sp.Matrix([cond[v] for v in values]))
    return {dg: alpha[dg] for dg in range(m)}


def _finite_unfold(values: tuple, q: tuple, grads: tuple):
    """Write grad J and E[R^d s] in grad q_k, eliminate the last (sum of grad q = 0) and q_m = 1 - sum q."""
    last = {grads[-1]: -sum(grads[:-1]), q[-1]: 1 - sum(q[:-1])}

    def unfold(e):
        e = e.replace(lambda x: isinstance(x, Expect), lambda x: _moment_in_q(x, values, grads))
        e = e.xreplace({GRAD_J: sum(v * g for v, g in zip(values, grads))})
        return e.xreplace(last)

    return unfold


def _moment_in_q(x: Expect, values, grads):
    mono = x.args[0]
    dg = sp.degree(mono, _R_PLAIN)
    if mono != _R_PLAIN**dg * _S_PLAIN:
        return x
    return sum(v**dg * g for v, g in zip(values, grads))


def _reduction_proof(advantage, G, values, q, grads, constants, binary) -> Callable[[Claim], bool]:
    """Proof of the reduction step: recompute sum_v a(v) grad q_v from a fresh evaluation of the advantage.

    The advantage is evaluated again on every ordering of the others'
    rewards that the pattern stands for (up to 1024 orderings), so a
    non-symmetric advantage, or a displayed value that is not the advantage's,
    fails the step.
    """

    def proof(claim: Claim) -> bool:
        fresh = _Values(advantage, G, values, constants)
        _require_symmetric(advantage, G, values, constants, fresh)
        total = sum(fresh.conditional(v, q) * gq for v, gq in zip(values, grads))
        return _same(total, claim.rhs)

    proof.name = "advantage re-evaluated on every pattern"
    return proof


def _named_proof(name: str, fn):
    fn.name = name
    return fn


def _same(a, b) -> bool:
    """``a == b`` as polynomials: exactly, or to 1e-12 per coefficient when a callable's fp64 values are involved."""
    gap = sp.expand(a - b)
    if is_zero(gap) is not None:
        return True
    if not gap.has(sp.Float):
        return False
    syms = sorted(gap.free_symbols, key=str)
    coeffs = sp.Poly(gap, *syms).coeffs() if syms else [gap]
    return all(cf.is_number and abs(sp.N(cf)) <= 1e-12 for cf in coeffs)


def _require_symmetric(advantage, G, values, constants, tab: _Values) -> None:
    """Every ordering of the others gives the pattern's value (checked on up to 1024 orderings per own value)."""
    orderings = list(itertools.islice(itertools.product(values, repeat=G - 1), 1024))
    index = {c_: k for k, c_ in enumerate(tab.patterns)}
    as_float = {v: [float(sp.N(y.subs(constants) if constants else y, 20)) for y in tab.a[v]] for v in values}
    groups, expected = [], []
    for v in values:
        for others in orderings:
            groups.append([v, *others])
            expected.append(as_float[v][index[tuple(others.count(x) for x in values)]])
    if callable(advantage) and not isinstance(advantage, sp.Basic):
        from numeric.variants import advantage_values

        got = advantage_values(advantage, [[float(x) for x in g] for g in groups], G)
    else:
        f = sp.lambdify([R[k + 1] for k in range(G)], _explicit(advantage, G).subs(constants) if constants else _explicit(advantage, G), "math")
        got = [f(*[float(x) for x in g]) for g in groups]
    for g, x, y in zip(groups, got, expected):
        if abs(float(x) - y) > 1e-10 * max(1.0, abs(float(x))):
            raise NotPermutationEquivariant(
                f"advantage of answer 1 depends on the order of the other answers: group {[float(t) for t in g]} gives {float(x)}, "
                f"its sorted pattern {y}"
            )


def _callable_equal(advantage, G, values, constants) -> bool:
    from numeric.variants import advantage_values

    groups = [[float(v)] * G for v in (0.0, 0.5, 1.0, 3.0)]
    got = advantage_values(advantage, groups, G)
    return all(abs(x) <= 1e-12 for x in got)


# ============================================================ the public checker


def check_group_advantage(advantage, *, G=None, rewards="general", constants=None, name: str = "the advantage", confirm: bool = True) -> GroupReport:
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
    (the CAS could not decide; the reason says why).

    Parameters
    ----------
    advantage : sympy expression or callable
        Either answer :math:`i`'s advantage in the vocabulary of
        :class:`~derivations.iid_groups.IIDGroup` (``R[i]``, sums over
        ``j = 1..G``, ``mean()``, ``mean_others(i)``, constants; with a number
        ``G`` also explicit answers ``R[1]..R[G]``, answer 1 under study), or a
        function mapping rewards ``[..., G]`` (numpy or torch) to advantages of
        the same shape, as a trainer writes it.
    G : int, optional
        The group size (:math:`\ge 2`); symbolic when omitted (expressions only).
    rewards : {"general", "binary"} or list of numbers
        The reward law: any law, Bernoulli(:math:`p`), or a finite set of values
        with symbolic probabilities :math:`q_k`.  A callable needs a binary or
        finite law: its expected update is then exact
        (the count-pattern reduction, see the module notes).
    constants : dict, optional
        Symbols the expression may use besides the group's (``{eps: 1e-6}``);
        the derivation keeps them symbolic, the numeric confirmation uses the value.
    name : str
        What to call the variant in the derivation's title.
    confirm : bool
        Confirm the symbolic answer with the exact group engine on
        :class:`numeric.TinyLM` (default; :mod:`numeric.variants`).

    Returns
    -------
    GroupReport

    Raises
    ------
    TypeError, ValueError
        Bad input: unknown free symbols, a non-scalar expression, ``G < 2``, a
        callable with the wrong output shape or non-finite values, an unknown reward law.
    NotPermutationEquivariant
        A callable (or expression) whose advantage depends on the order of the answers.
    SymbolicNumericMismatch
        The exact numbers disagree with the symbolic result.

    Examples
    --------
    >>> from derivations.variants import check_group_advantage
    >>> from derivations.iid_groups import IIDGroup
    >>> grp = IIDGroup()
    >>> rep = check_group_advantage(grp.R[grp.i] - grp.mean())
    >>> rep.verdict, rep.scale
    ('scaled', (G - 1)/G)
    >>> check_group_advantage(grp.R[grp.i] - grp.mean_others(grp.i)).verdict
    'unbiased'
    """
    constants, confirm = _constants(constants), _require_bool("confirm", confirm)
    law, values = _law(rewards)
    is_fn = callable(advantage) and not isinstance(advantage, sp.Basic)
    G = _require_G(G, needed=is_fn)
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if is_fn:
        if law == "general":
            raise ValueError("rewards must be 'binary' or a list of values for a callable advantage: "
                             "under a general law its expected update is not fixed by finitely many values")
        from numeric.variants import require_advantage_callable

        require_advantage_callable(advantage, G)
        report = _finite(advantage, G, law, values, constants, name)
    else:
        expr = _check_expression(advantage, G, constants)
        if law == "general":
            report = _general(expr, G, constants)
        elif isinstance(G, int):
            report = _finite(expr, G, law, values, constants, name)
        else:
            report = _symbolic_G_finite(expr, law, values, constants)
    if report.derivation is not None:
        report.derivation.verify()
    if confirm:
        from numeric.variants import confirm_group

        report = confirm_group(report, advantage, constants)
    return report


def _symbolic_G_finite(expr, law, values, constants) -> GroupReport:
    """A finite law with symbolic G: the general result with the law's moments, when the advantage is polynomial."""
    general = _general(expr, G_SYMBOL, constants)
    if general.verdict == "undecided":
        return GroupReport("undecided", None, None,
                           f"with a symbolic G {general.reason.removeprefix('under a general reward law ').removesuffix('; pass a number G or a finite reward law')}; pass a number G",
                           None, law if law == "binary" else values, G_SYMBOL, general.zero_on_equal_rewards)
    d = general.derivation
    if law == "binary":
        moments = {e: (P if not e.args[0].has(_S_PLAIN) else GRAD_P) for e in (general.scale * GRAD_J + general.residual).atoms(Expect)}
        result = sp.expand((general.scale * GRAD_J + general.residual).xreplace(moments).xreplace({GRAD_J: GRAD_P}))
        c = sp.factor(result.coeff(GRAD_P))
        d.then(c * GRAD_P, r"binary reward: $R^d = R$, $\mathbb{E}[R^d s] = \nabla_\theta p$, $\mathbb{E}[R^d] = p$",
               facts={**{e: v for e, v in moments.items()}, GRAD_J: GRAD_P})
        verdict, reason = _verdict(c, sp.Integer(0), {P}, "E[A_i s_i]")
        return GroupReport(verdict, c, sp.Integer(0), reason, d, "binary", G_SYMBOL, general.zero_on_equal_rewards)
    return GroupReport("undecided", None, None, "a finite law with a symbolic G is checked for binary rewards only; pass a number G",
                       None, values, G_SYMBOL, general.zero_on_equal_rewards)


# ============================================================ token level



_pm, _pgamma, _pa = sp.symbols("m_admissible gamma_admissible a_admissible", positive=True)
_ADMISSIBLE = {gw.eps_l: 1 / (1 + _pm), gw.c: 1 + gw.eps_h + _pgamma}
"""0 < eps_l < 1 and c > 1 + eps_h, written with positive symbols (eps_h is positive itself)."""

# keys: the forms of derivations.methods.FORMS (known_token_forms() lists every form with the registry's label)
_KNOWN = {"ppo": "PPO", "ppo_dual_clip": "dual-clip PPO", "cispo_cap": "CISPO", "is": "token IS", "reinforce": "on-policy REINFORCE"}
_TOKEN_SYMBOLS = {gw.ell, gw.ell0, gw.r, gw.A, gw.eps_l, gw.eps_h, gw.c}


@dataclass(frozen=True)
class TokenReport:
    r"""What :func:`check_token_loss` found.

    Attributes
    ----------
    weight : sympy.Piecewise or None
        :math:`w` with :math:`\partial\,\mathrm{loss}/\partial\ell = -wA`, in
        :math:`r` and the sign of :math:`A` (kinks go to the live side).  For a
        callable: ``None``, see ``table``.
    silenced : sympy condition or tuple
        Where :math:`w = 0` (for :math:`A \ne 0`); for a callable, the grid
        intervals ``(sign, r_low, r_high)``.
    bounded : dict
        ``{+1: bool, -1: bool}``: is :math:`w` bounded over :math:`r > 0` for each sign of :math:`A`.
    on_policy_at_ratio_one : bool or None
        At :math:`r = 1` (:math:`\ell = \ell_0`) the gradient is :math:`-A\nabla\log\pi`.
    is_policy_gradient : bool
        ``False`` when :math:`w` depends on :math:`\ell` or :math:`\ell_0` other than through :math:`r`.
    matches : str or None
        The known method with the same weight on every open region, if any.
    derivation : Derivation or None
    reason : str
    table : tuple
        ``(r, w for A > 0, w for A < 0)`` rows (callables: autograd on a grid; expressions: the weight evaluated).
    numeric : tuple
        ``(tokens compared, max discrepancy)`` of the autograd confirmation on TinyLM's tokens.
    """

    weight: sp.Expr | None
    silenced: object
    bounded: dict
    on_policy_at_ratio_one: bool | None
    is_policy_gradient: bool
    matches: str | None
    derivation: Derivation | None
    reason: str
    table: tuple = field(default=(), compare=False)
    numeric: tuple = field(default=(), compare=False)

    def __str__(self) -> str:
        w = "(table)" if self.weight is None else sp.sstr(self.weight)
        return (f"w = {w}\nsilenced: {self.silenced}\nbounded: {self.bounded}\n"
                f"on-policy at r = 1: {self.on_policy_at_ratio_one}; policy gradient: {self.is_policy_gradient}; "
                f"matches: {self.matches}\n{self.reason}")

    def _repr_latex_(self) -> str:
        head = r"w = " + ("\\text{(table)}" if self.weight is None else sp.latex(self.weight))
        if self.derivation is None:
            return "$$" + head + "$$"
        return "$$" + head + r"\\" + self.derivation.to_latex() + "$$"


def _token_expression(loss, constants: dict) -> sp.Expr:
    loss = _scalar_expression("loss", loss, "one token's loss, a scalar sympy expression", "a torch callable")
    unknown = loss.free_symbols - _TOKEN_SYMBOLS - set(constants)
    if unknown:
        raise ValueError(
            f"loss has unknown free symbols {', '.join(sorted(map(str, unknown)))}: allowed are ell, ell_0, r, A, "
            "varepsilon_l, varepsilon_h, c (derivations.gradient_weights) and constants declared in constants={symbol: value}"
        )
    loss = loss.subs(sp.exp(gw.ell - gw.ell0), gw.r)
    held = loss.replace(gw.sg, lambda *a: sp.Dummy("held"))
    if not (held.has(gw.ell) or held.has(gw.r)):
        raise ValueError("loss must depend on ell = log pi (directly or through r = exp(ell - ell_0)) outside sg(...): "
                         "otherwise it has no gradient")
    return loss


def _breakpoints(loss) -> list:
    """Candidate kinks in r: r-free arguments of every Min/Max, and r-free sides of conditions on r."""
    found = set()
    for node in loss.atoms(sp.Min, sp.Max):
        for arg in node.args:
            for sign in (1, -1):
                x = sp.simplify(arg.subs(gw.A, sign) / sign) if arg.has(gw.A) else arg
                if not x.has(gw.r, gw.ell, gw.ell0, sp.Min, sp.Max):
                    found.add(sp.sympify(x))
    for pw in loss.atoms(sp.Piecewise):
        for _, cond in pw.args:
            for rel in (cond.atoms(sp.core.relational.Relational) if not isinstance(cond, sp.core.relational.Relational) else {cond}):
                if rel.has(gw.r):
                    sol = sp.solve(sp.Eq(rel.lhs, rel.rhs), gw.r)
                    found.update(s for s in sol if not s.has(gw.ell, gw.ell0, gw.A))
    return [b for b in found if b.free_symbols and _positive(b) or (b.is_number and b > 0)]


def _positive(b) -> bool:
    return decide_sign(b.subs(_ADMISSIBLE)) == 1


def _order(breaks: list) -> list | None:
    """The breakpoints in increasing order (decided with the admissible constants), or ``None``."""
    out = []
    for b in breaks:
        if any(is_zero((b - o).subs(_ADMISSIBLE)) is not None for o in out):
            continue
        out.append(b)
    try:

        def cmp(x, y):
            s = decide_sign((x - y).subs(_ADMISSIBLE))
            if s is None:
                raise _Unordered(f"{x} and {y}")
            return s

        return sorted(out, key=cmp_to_key(cmp))
    except _Unordered:
        return None


class _Unordered(Exception):
    pass


def _piece(expr, point: dict):
    """``expr`` with every Min/Max/Piecewise replaced by the branch that holds at ``point`` (in the original variables)."""
    if not isinstance(expr, sp.Basic) or not expr.args or isinstance(expr, (sp.Symbol, sp.Indexed)):
        return expr
    if isinstance(expr, sp.Piecewise):
        for value, cond in expr.args:
            t = resolve(sp.sympify(cond).subs(point))
            if t is None:
                raise _Unordered(sp.sstr(cond))
            if t is sp.true or t is True:
                return _piece(value, point)
        raise _Unordered(f"no branch of {sp.sstr(expr)}")
    args = [_piece(a, point) for a in expr.args]
    if isinstance(expr, (sp.Min, sp.Max)):
        sign = 1 if isinstance(expr, sp.Max) else -1
        for cand in args:
            if all(decide_sign((sign * (cand - o)).subs(point)) in (1, 0) for o in args if o is not cand):
                return cand
        raise _Unordered(sp.sstr(expr))
    return expr.func(*args)


def _regions(breaks: list) -> list:
    """(lo, hi, interior point) for each open interval of r between 0, the breakpoints and infinity."""
    pts = interval_points(gw.r, [sp.sympify(b).subs(_ADMISSIBLE) for b in breaks], lower=0) if breaks else [{gw.r: 1 + sp.Dummy("t", positive=True)}]
    edges = [sp.Integer(0), *breaks, sp.oo]
    interiors = pts[0::2]
    return [(lo, hi, p[gw.r]) for (lo, hi), p in zip(zip(edges, edges[1:]), interiors)]


def _token_unfold(name, loss):
    return lambda e: e.xreplace({name: loss}).replace(lambda x: isinstance(x, sp.Derivative), lambda x: gw.d_dell(x.expr))


def _region_condition(sign: int, lo, hi):
    parts = [sp.StrictGreaterThan(gw.A, 0) if sign > 0 else sp.StrictLessThan(gw.A, 0)]
    if lo != 0:
        parts.append(sp.StrictLessThan(lo, gw.r))
    if hi != sp.oo:
        parts.append(sp.StrictLessThan(gw.r, hi))
    return sp.And(*parts)


def _flip(weight) -> str:
    """Where the weight at r = 1 is negative (the update points the wrong way), for a weight that depends on ell."""
    at_one = resolve(weight.subs({gw.r: 1, gw.A: _pa}).subs(_ADMISSIBLE))
    if at_one is None or not at_one.has(gw.ell):
        return ""
    where = sp.solveset(sp.StrictLessThan(at_one, 0), gw.ell, sp.S.Reals)
    return f"; at r = 1 the weight is {sp.sstr(at_one)}, negative (the update flips sign) for ell in {sp.sstr(where)}" if where != sp.S.EmptySet else ""


def _bounded(pieces: list) -> bool | None:
    """Every piece has finite limits at its region's ends (ell written as ell_0 + log r)."""
    for lo, hi, w in pieces:
        w = w.xreplace({gw.ell: gw.ell0 + sp.log(gw.r)}).subs(_ADMISSIBLE)
        if not w.has(gw.r):
            continue
        for end, direction in ((lo, "+"), (hi, "-")):
            end = sp.sympify(end).subs(_ADMISSIBLE)
            try:
                lim = sp.limit(w, gw.r, end, direction)
            except Exception:
                return None
            if lim.has(sp.oo, -sp.oo, sp.zoo, sp.nan):
                return False
            if isinstance(lim, (sp.Limit, sp.AccumBounds)):
                return None
        den = sp.denom(sp.together(w))
        if den.has(gw.r):
            return None
    return True


def check_token_loss(loss, *, constants=None, confirm: bool = True) -> TokenReport:
    r"""The gradient weight of a per-token loss, and what it implies.

    For a loss in :math:`\ell = \log\pi_\theta(o_t\mid s_t)`, :math:`\ell_0`,
    :math:`r = e^{\ell-\ell_0}`, :math:`A` and constants, with
    :math:`\mathrm{sg}(\cdot)` marking stop-gradients, the weight :math:`w` is
    defined by

    .. math::

        \frac{\partial\,\mathrm{loss}}{\partial\ell} = -\,w\,A ,

    and obtained region by region (between the kinks of every ``Min``/``Max``/
    ``Piecewise`` in :math:`r`, for each sign of :math:`A`): the loss equals a
    smooth piece on the region, checked for *every* point of it (the region is
    parametrised by a positive symbol), and the piece is differentiated with
    :math:`\mathrm{sg}` held constant.  Admissible constants:
    :math:`0 < \varepsilon_l < 1`, :math:`\varepsilon_h > 0`,
    :math:`c > 1 + \varepsilon_h`; declared constants are as their SymPy
    assumptions say (declare them ``positive=True``).

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
    confirm : bool
        Confirm by autograd on TinyLM's tokens (:mod:`numeric.variants`).

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
    >>> from derivations.gradient_weights import A, ell, eps_h, r, sg, token_loss
    >>> from derivations.variants import check_token_loss
    >>> rep = check_token_loss(token_loss("cispo"))
    >>> rep.weight, rep.matches, rep.bounded
    (Piecewise((r, r <= varepsilon_h + 1), (varepsilon_h + 1, True)), 'CISPO', {1: True, -1: True})
    >>> check_token_loss(-r * A * ell).is_policy_gradient   # forgot sg(r)
    False
    """
    constants, confirm = _constants(constants), _require_bool("confirm", confirm)
    if callable(loss) and not isinstance(loss, sp.Basic):
        from numeric.variants import token_report_from_callable

        return token_report_from_callable(loss, constants)
    expr = _token_expression(loss, constants)
    report = _token_symbolic(expr)
    if confirm and report.weight is not None:
        from numeric.variants import confirm_token

        report = confirm_token(report, expr, constants)
    return report


def _token_symbolic(loss) -> TokenReport:
    breaks = _order(_breakpoints(loss))
    if breaks is None:
        return TokenReport(None, None, {}, None, False, None, None,
                           "undecided: the kinks of the loss cannot be ordered under the stated assumptions on the constants")
    name = sp.Symbol(r"\mathcal{L}")
    d = Derivation(
        "Gradient weight of the loss",
        assumptions=[f"${sp.latex(name)} = {sp.latex(loss)}$", r"$r = e^{\ell - \ell_0}$",
                     r"$0 < \varepsilon_l < 1$, $\varepsilon_h > 0$, $c > 1 + \varepsilon_h$",
                     r"$\partial\,\mathcal{L}/\partial\ell = -A\,w$; $\mathrm{sg}$ held constant"],
        unfold=_token_unfold(name, loss),
    )
    pieces = {}
    try:
        for sign in (1, -1):
            pieces[sign] = []
            for lo, hi, inside in _regions(breaks):
                point = {gw.r: inside, gw.A: sign * _pa}
                at = {**{k: sp.sympify(v).subs(_ADMISSIBLE) for k, v in point.items()}, **_ADMISSIBLE}
                piece = _piece(loss, at)
                where = ("A > 0" if sign > 0 else "A < 0") + r",\ " + (sp.latex(lo) + " < " if lo != 0 else "0 < ") + "r" + ("" if hi == sp.oo else " < " + sp.latex(hi))
                d.step(name, piece, f"on ${where}$", proof=on_regions(at, label="whole region"))
                w = sp.factor(-gw.d_dell(piece) / gw.A)
                d.step(sp.Derivative(piece, gw.ell), -gw.A * w, r"differentiate, $\mathrm{sg}$ held constant")
                pieces[sign].append((lo, hi, w))
    except _Unordered as err:
        return TokenReport(None, None, {}, None, False, None, None, f"undecided: the CAS could not decide the branch of {err} on a region")
    weight = gw._piecewise_weight(pieces)
    silenced = sp.Or(*[_region_condition(s, lo, hi) for s in (1, -1) for lo, hi, w in gw._merged_runs(pieces[s]) if w == 0])
    is_pg = not any(w.has(gw.ell, gw.ell0) for s in pieces for _, _, w in pieces[s])
    bounded = {s: _bounded(pieces[s]) for s in (1, -1)}
    on_policy = _at_ratio_one(weight)
    matches = _match(pieces) if is_pg else None
    parts = [f"w = {sp.sstr(weight)}"]
    if not is_pg:
        parts.append("w depends on ell other than through r: not a policy gradient (a missing stop-gradient?)" + _flip(weight))
    if matches:
        parts.append(f"the weight of {matches}")
    d.verify()
    return TokenReport(weight, silenced, bounded, on_policy, is_pg, matches, d, "; ".join(parts))


def _at_ratio_one(weight) -> bool | None:
    answers = []
    for sign in (1, -1):
        v = resolve(weight.subs({gw.r: 1, gw.A: sign * _pa}).subs(_ADMISSIBLE))
        if v is None:
            return None
        answers.append(is_zero(sp.sympify(v).subs(gw.ell, gw.ell0) - 1) is not None)
    return all(answers)


def _agree_at(pieces: dict, known, probe: dict, ratios: list) -> bool:
    """Equal at a few exact ratios (off the probe's kinks), each sign of A; other constants set to 3/2."""
    for sign in (1, -1):
        ours = sp.Piecewise(*[(w, gw.r < hi) for lo, hi, w in pieces[sign]])
        ours = ours.subs(probe)
        ours = ours.subs({x: sp.Rational(3, 2) for x in ours.free_symbols - {gw.r, gw.ell, gw.ell0, gw.A}})
        theirs = sp.sympify(known).subs(probe).subs(gw.A, sign)
        for x in ratios:
            a, b = ours.subs(gw.r, x), theirs.subs(gw.r, x)
            if a.free_symbols or b.free_symbols or a != b:
                return False
    return True


@cache
def _known_breakpoints(method: str) -> tuple:
    return tuple(_breakpoints(_known_weight(method)))


@cache
def _known_weight(method: str):
    return sp.Integer(1) if method == "reinforce" else gw.gradient_weight(method)


def _match(pieces: dict) -> str | None:
    """The known method whose weight equals this one on every open region (each sign of A)."""
    probe = {gw.eps_l: sp.Rational(1, 5), gw.eps_h: sp.Rational(2, 7), gw.c: 3}
    ratios = [sp.Rational(k, 10) for k in (1, 6, 9, 11, 15, 25, 50)]
    for method, label in _KNOWN.items():
        known = _known_weight(method)
        if not _agree_at(pieces, known, probe, ratios):  # a cheap exact probe first
            continue
        ok = True
        for sign in (1, -1):  # compare at the interior points of the common refinement of both partitions
            breaks = _order(list({*[b for b in (p[0] for p in pieces[sign]) if b != 0], *_known_breakpoints(method)}))
            if breaks is None:
                ok = False
                break
            ours = sp.Piecewise(*[(w, gw.r < hi) for lo, hi, w in pieces[sign]]) if len(pieces[sign]) > 1 else pieces[sign][0][2]
            for lo, hi, inside in _regions(breaks):
                at = {gw.r: sp.sympify(inside).subs(_ADMISSIBLE), gw.A: sign * _pa, **_ADMISSIBLE}
                a, b = resolve(sp.sympify(ours).subs(at)), resolve(sp.sympify(known).subs(at))
                if a is None or b is None or is_zero(a - b) is None:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return label
    return None


# ============================================================ the tutorial's three variants


def tutorial_variant(name: str):
    r"""The three variants the chapter walks through, as ``(what, keyword arguments)`` for the checkers.

    ``"clip"``
        A two-sided truncated importance weight,
        :math:`-\mathrm{sg}\bigl(\mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h)\bigr)\,A\,\ell`.
    ``"zscore"``
        The std-normalised group advantage :math:`(R_i - \bar R)/(\sigma + \varepsilon)`
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
    eps = sp.Symbol("varepsilon", positive=True)
    if name == "clip":
        return -gw.sg(sp.Min(sp.Max(gw.r, 1 - gw.eps_l), 1 + gw.eps_h)) * gw.A * gw.ell, {}
    if name == "zscore":
        m = _GROUP.mean()
        sigma = sp.sqrt(sp.Sum((R[J] - m) ** 2, (J, 1, G_SYMBOL)) / G_SYMBOL)
        return (R[I] - m) / (sigma + eps), {"G": 4, "rewards": "binary", "constants": {eps: 1e-3}}
    if name == "own_reward":
        return R[I] - (R[I] ** 2 / 2 + _GROUP.mean_others(I)), {}
    raise ValueError(f"name must be one of 'clip', 'zscore', 'own_reward', got {name!r}")


def tutorial_derivation(name: str) -> Derivation:
    """The derivation of the checker's report on one of the tutorial's variants (SymPy only: no numeric confirmation).

    Examples
    --------
    >>> from derivations.variants import tutorial_derivation
    >>> len(tutorial_derivation("own_reward").verify().steps)
    3
    """
    what, kwargs = tutorial_variant(name)
    if name == "clip":
        return check_token_loss(what, confirm=False).derivation
    return check_group_advantage(what, confirm=False, **kwargs).derivation
