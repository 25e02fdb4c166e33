r"""What the variant checker found, and how a verdict is read off :math:`c` and the residual.

The reports are frozen; :func:`verdict` is the one place where "unbiased",
"scaled", "reweighted", "biased" or "undecided" is decided, with the tolerance
stated in :func:`nonzero`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp

from ..derivation import Derivation, is_zero
from ..iid_groups import Expect
from ..notation import latex
from .render import ReportTable, report_html

__all__ = [
    "FloatReduction",
    "GroupReport",
    "NotPermutationEquivariant",
    "SymbolicNumericMismatch",
    "TokenReport",
    "VERDICTS",
    "depends_on",
    "nonzero",
    "verdict",
]

VERDICTS = ("unbiased", "scaled", "reweighted", "biased", "undecided")
"""The possible verdicts, from best to unknown."""

class NotPermutationEquivariant(ValueError):
    """A group advantage that changes when the answers are relabelled: its expected update is not one per answer."""


class SymbolicNumericMismatch(AssertionError):
    """The symbolic verdict and the exact numbers on the toy LM disagree: a bug in the checker or in the variant."""


@dataclass(frozen=True)
class FloatReduction:
    r"""How a report too large for the symbolic reduction was decided: from the Bernstein coefficients of :math:`\alpha_d`, in floats.

    Interpolating :math:`\bar A(y) = \sum_{d<m} \alpha_d(q)\, v^d` through the
    :math:`m` reward values is linear, and :math:`\bar A(y)` is a sum over the
    others' count patterns :math:`c` with the same weights for every :math:`v`, so

    .. math::

        \alpha_d(q) = \sum_{n} \binom{G-1}{n} \prod_k q_k^{n_k}\; \eta_d(n),
        \qquad \eta_d(n) = \sum_k L_{dk}\, A(y_k \mid n),

    with :math:`L = V^{-1}` the inverse Vandermonde matrix of the values.  The
    weights form the (multinomial) Bernstein basis of degree :math:`G - 1` on
    the simplex: they are positive, sum to 1 and are linearly independent.
    Hence :math:`\alpha_d \equiv 0` iff every :math:`\eta_d(n) = 0`, and
    :math:`\alpha_1` is a constant :math:`K` iff every :math:`\eta_1(n) = K`;
    and when every :math:`\eta_d(n)` lies in :math:`[\text{low}, \text{high}]`
    so does :math:`\alpha_d(q)` at every :math:`q`.  The lemma is exact; the
    :math:`\eta_d(n)` are the advantage's fp64 values combined in floats, so a
    verdict read off them holds to the tolerance stated per degree, and is not
    a symbolic proof.

    Attributes
    ----------
    G : int
        The group size.
    values : tuple
        The reward law's values :math:`y_1 < \dots < y_m`.
    patterns : int
        How many count patterns :math:`c` of the other :math:`G - 1` answers (coefficients per degree).
    bounds : tuple
        ``(d, low, high, tol)`` for :math:`d = 1..m-1`: the range of :math:`\eta_d(n)` over all
        patterns, and the tolerance within which it counts as a constant (:math:`d = 1`) or as 0.
    alphas : tuple
        The undefined functions :math:`\alpha_1(q), \dots, \alpha_{m-1}(q)` that stand in the
        report's ``scale`` and ``residual`` where they are not constants.
    evaluate : callable or None
        ``q -> (alpha_1(q), ..., alpha_{m-1}(q))`` in floats, for a law ``q`` (a sequence of
        :math:`m` probabilities): the reduction evaluated (by the layer that holds the table).
    """

    G: int
    values: tuple
    patterns: int
    bounds: tuple
    alphas: tuple
    evaluate: Callable | None = field(default=None, compare=False, repr=False)

    def badge(self) -> str:
        """What was decided numerically, in one sentence."""
        tol = max(t for _, _, _, t in self.bounds)
        return (f"decided numerically, not proved symbolically: at G = {self.G} the {self.patterns:,} Bernstein coefficients "
                f"of each alpha_d (d = 1..{len(self.bounds)}), from the advantage's fp64 values, each compared within {tol:.1e}")

    def table(self) -> ReportTable:
        """The range of each degree's coefficients: prints as aligned text, renders as an HTML table."""
        rows = [(d, "grad J" if d == 1 else f"E[R^{d} s]", f"{lo:.15g}", f"{hi:.15g}", f"{tol:.1e}") for d, lo, hi, tol in self.bounds]
        return ReportTable(("d", "alpha_d multiplies", "min eta_d(n)", "max eta_d(n)", "tolerance"), rows)

    def to_latex(self) -> str:
        """The reduction formula, with the range of every degree's coefficients (no step claims a kernel check)."""
        m = len(self.values)
        formula = (r"\mathbb{E}[A_1 s_1] = \sum_{d=1}^{%d} \alpha_d(q)\, \mathbb{E}[R^d s], \quad "
                   r"\alpha_d(q) = \sum_{n} \binom{%d}{n} \prod_k q_k^{n_k}\, \eta_d(n), \quad "
                   r"\eta_d(n) = \sum_{k=1}^{%d} (V^{-1})_{dk}\, A(y_k \mid n)") % (m - 1, self.G - 1, m)
        ranges = r",\quad ".join(r"\beta_{%d}(c) \in [%s, %s]" % (d, latex(sp.Float(lo, 6)), latex(sp.Float(hi, 6)))
                                 for d, lo, hi, _ in self.bounds)
        return r"\begin{aligned}&" + formula + r"\\&" + ranges + r"\quad\text{(decided numerically, not a symbolic proof)}\end{aligned}"


@dataclass(frozen=True)
class GroupReport:
    r"""What the group-advantage checker found.

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
        against the exact group engine on the toy LM, per group size
        (filled by :func:`numeric.variants.confirm_group`; empty when not confirmed).
    reduction : FloatReduction or None
        Set when the verdict was decided numerically from the Bernstein coefficients (a callable
        above :data:`~derivations.variants.patterns.SYMBOLIC_PATTERNS` count patterns); ``derivation`` is then
        ``None`` and no step claims a kernel check.
    positions : tuple
        For an advantage that depends on the answers' positions: ``(i, verdict, c_i)`` of
        :math:`\mathbb{E}[A_i s_i]` at each position :math:`i` (from 0); the report's own verdict and
        scale are then the summed update's, :math:`\frac1G\sum_i \mathbb{E}[A_i s_i]`.  Empty otherwise.
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
    reduction: FloatReduction | None = None
    positions: tuple = ()

    def table(self) -> ReportTable:
        """The numeric confirmation: prints as aligned text, renders as an HTML table."""
        header = ("G", "|symbolic update|", "|exact update|", "discrepancy")
        if not self.numeric:
            return ReportTable(header, [], text="(no numeric confirmation)")
        lines = ["   G   |symbolic update|   |exact update|   discrepancy"]
        lines += [f"{g:4d}   {s:16.12f}   {e:14.12f}   {d:9.1e}" for g, s, e, d in self.numeric]
        return ReportTable(header, [(g, f"{s:.12f}", f"{e:.12f}", f"{d:.1e}") for g, s, e, d in self.numeric], text="\n".join(lines))

    def headline(self) -> str:
        """The verdict on one line, with :math:`c` when there is one."""
        return self.verdict + ("" if self.scale is None else f": c = {sp.sstr(self.scale)}")

    def __str__(self) -> str:
        c = "-" if self.scale is None else sp.sstr(self.scale)
        res = "-" if self.residual is None else sp.sstr(self.residual)
        by_position = "".join(f"\n  position {i}: {v}, c = {sp.sstr(ci)}" for i, v, ci in self.positions)
        return f"{self.verdict}: c = {c}, residual = {res}\n{self.reason}" + by_position + ("" if self.reduction is None else f"\n{self.reduction.table()}")

    def _repr_latex_(self) -> str:
        head = r"\text{verdict: " + self.verdict + "}"
        if self.scale is not None:
            head += r",\quad c = " + latex(self.scale)
        if self.reduction is not None:
            return "$$" + head + r"\\" + self.reduction.to_latex() + "$$"
        if self.derivation is None:
            return "$$" + head + "$$"
        return "$$" + head + r"\\" + self.derivation.to_latex() + "$$"

    def _repr_html_(self) -> str:
        if self.reduction is not None:
            confirmed = [f"confirmed on the toy LM at G = {g}: discrepancy {d:.1e}" for g, _, _, d in self.numeric]
            return report_html(self.headline(), reason=self.reason, table=self.reduction.table(), notes=confirmed,
                               latex="$$" + self.reduction.to_latex() + "$$")
        return report_html(self.headline(), reason=self.reason, table=self.table() if self.numeric else None,
                           latex=None if self.derivation is None else "$$" + self.derivation.to_latex() + "$$")


@dataclass(frozen=True)
class TokenReport:
    r"""What the token-loss checker found.

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
    same_weight : tuple
        The registry forms (:func:`derivations.methods.known_token_forms` keys) whose
        weight equals this one, ``matches``'s first; a form whose method a per-token
        loss does not settle (Clip-Cov, KL-Cov) is named with its "undecided" note in ``reason``.
    per_token_constants : bool
        The weight moves with :math:`\ell_0` at a fixed ratio away from :math:`r = 1` but not at it:
        constants (clip bounds, masks) computed from :math:`\pi_{\text{old}}` per token.
    ratio_one : str
        Why :math:`w(1) \ne 1`, measured (``""`` where it is 1): ``"tie"``, ``"sign"``, ``"zero"``,
        ``"scale"`` or ``"old probability"`` (callables; see :mod:`numeric.variants.weight_probe`).
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
    same_weight: tuple = ()
    per_token_constants: bool = False
    ratio_one: str = ""

    def __str__(self) -> str:
        w = "(table)" if self.weight is None else sp.sstr(self.weight)
        return (f"w = {w}\nsilenced: {self.silenced}\nbounded: {self.bounded}\n"
                f"on-policy at r = 1: {self.on_policy_at_ratio_one}; policy gradient: {self.is_policy_gradient}; "
                f"matches: {self.matches}\n{self.reason}")

    def headline(self) -> str:
        """The verdict on one line: a policy gradient or not, and the known method it is."""
        if not self.is_policy_gradient:
            return "not a policy gradient"
        return "policy gradient" + (f": the weight of {self.matches}" if self.matches else ", no known method")

    def properties(self) -> ReportTable:
        """What the weight implies, one row each: prints as aligned text, renders as an HTML table."""
        w = "(tabulated by autograd)" if self.weight is None else sp.sstr(self.weight)
        return ReportTable(("property", "value"), [
            ("w", w), ("silenced", self.silenced), ("bounded for A > 0", self.bounded.get(1)),
            ("bounded for A < 0", self.bounded.get(-1)), ("on-policy at r = 1", self.on_policy_at_ratio_one),
            ("policy gradient", self.is_policy_gradient), ("known method", self.matches)])

    def _repr_html_(self) -> str:
        return report_html(self.headline(), reason=self.reason, table=self.properties(),
                           latex=None if self.derivation is None else "$$" + self.derivation.to_latex() + "$$")

    def _repr_latex_(self) -> str:
        head = r"w = " + ("\\text{(table)}" if self.weight is None else latex(self.weight))
        if self.derivation is None:
            return "$$" + head + "$$"
        return "$$" + head + r"\\" + self.derivation.to_latex() + "$$"


# ============================================================ verdicts


def nonzero(x: sp.Expr | float, scale: float = 1.0) -> bool | None:
    """``True``/``False`` when ``x`` is decided non-zero/zero, ``None`` otherwise.

    Non-zero: at an exact point (or as a constant) it evaluates, to 40 digits,
    clearly away from 0 (above 1e-12 times ``scale`` when ``x`` holds floats:
    ``scale`` is the size of the fp64 values it was computed from, at least 1;
    above 1e-25 otherwise).  Zero: the canonicalisers reduce it to 0; for an
    expression holding floats (a callable's fp64 values), it is below
    1e-12 at three points.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.variants.reports import nonzero
    >>> nonzero(sp.Float(1e-11)), nonzero(sp.Float(1e-13)), nonzero(sp.Integer(0))
    (True, False, False)
    """
    x = sp.sympify(x)
    if x == 0:
        return False
    floats = x.has(sp.Float)
    tol = sp.Float(10) ** (-12 if floats else -25) * (max(1.0, float(scale)) if floats else 1)
    syms = sorted(x.free_symbols, key=str)
    points = [{s_: sp.Rational(2 + k, 7 + k) + sp.Rational(j, 13) for j, s_ in enumerate(syms)} for k in range(3)]
    values = [sp.N(x.xreplace(pt), 40) for pt in points]
    if any(v.is_number and v.is_real and abs(v) > tol for v in values):
        return True
    if floats and all(v.is_number and v.is_real for v in values):
        return False
    return False if is_zero(x) is not None else None


def depends_on(c: sp.Expr, policy: set, scale: float = 1.0) -> bool | None:
    """Whether ``c`` varies with the policy: its moments ``Expect(...)`` or the probabilities ``p``, ``q_k``.

    A polynomial ``c`` depends on the policy when the coefficient of some
    non-constant monomial (of any degree, the first included) is non-zero.
    """
    moments = sorted(c.atoms(Expect), key=sp.default_sort_key)
    stand_ins = [sp.Dummy("m") for _ in moments]
    c = c.xreplace(dict(zip(moments, stand_ins)))
    variables = [*stand_ins, *sorted(c.free_symbols & policy, key=str)]
    if not variables:
        return False
    if c.is_polynomial(*variables):
        answers = [nonzero(cf, scale) for monom, cf in sp.Poly(c, *variables).terms() if any(monom)]
    else:
        answers = [nonzero(sp.diff(c, v), scale) for v in variables]
    if any(a is True for a in answers):
        return True
    return False if all(a is False for a in answers) else None


def verdict(c: sp.Expr, residual: sp.Expr, policy: set, what: str, depends: bool | None = None, scale: float = 1.0) -> tuple[str, str]:
    """``(verdict, reason)`` for :math:`\\mathbb{E}[\\cdot] = c\\,\\nabla J + \\text{residual}`; ``depends`` when already decided; ``scale``: the size of fp64 values (see :func:`nonzero`)."""
    nz = nonzero(residual, scale)
    if nz is None:
        return "undecided", f"the CAS could not decide whether the residual {sp.sstr(residual)} vanishes"
    if nz:
        return "biased", f"{what} has a component along {', '.join(_moments_in(residual))}, not a multiple of the policy gradient"
    dep = depends_on(c, policy, scale) if depends is None else depends
    if dep is None:
        return "undecided", f"the CAS could not decide whether c = {sp.sstr(c)} depends on the policy"
    if dep:
        return "reweighted", f"{what} is c times the policy gradient with c = {sp.sstr(c)}, which depends on the policy: prompts are reweighted"
    off = nonzero(c - 1, scale)
    if off is None:
        return "undecided", f"the CAS could not decide whether c = {sp.sstr(c)} equals 1"
    if off:
        return "scaled", f"{what} is the policy gradient times the constant c = {sp.sstr(c)}"
    return "unbiased", f"{what} is exactly the policy gradient (c = 1)"


def _moments_in(expr) -> list:
    return sorted({sp.sstr(a) for a in sp.sympify(expr).atoms(Expect)} or {sp.sstr(expr)})
