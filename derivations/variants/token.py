r"""The token-loss checker's symbolic core: :func:`derive_token_loss`.

For a per-token loss written in :math:`\ell = \log\pi_\theta`, :math:`\ell_0`,
:math:`r = e^{\ell-\ell_0}` and :math:`A` (the symbols of
:mod:`derivations.gradient_weights`), it derives the gradient weight :math:`w`
with :math:`\partial\,\mathrm{loss}/\partial\ell = -wA` region by region,
and reads off what the weight implies: silenced tokens, boundedness, the
on-policy limit, whether it is a policy gradient at all, and which known
method it is (:func:`known_methods`).  A torch loss, and the confirmation by
autograd on the toy LM, are :func:`numeric.variants.check_token_loss`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cmp_to_key

import sympy as sp

from .. import gradient_weights as gw
from ..definitions import Definitions
from ..derivation import Derivation, is_zero
from ..methods import (
    CONSTANTS,
    METHODS,
    b_h,
    b_l,
    beta_dro,
    c_is,
    delta_band,
    delta_opsm,
    form_of,
    known_token_forms,
    tau_k2,
    tv_h,
    tv_l,
    undecided,
)
from ..notation import latex
from ..proofs import decide_sign, holds, interval_points, resolve
from .inputs import require_constants, scalar_expression
from .masks import abstract_masks, at_sign, edge_free, mask_latex, per_token_bounds
from .reports import TokenReport

__all__ = ["KnownMethod", "breakpoints", "derive_token_loss", "known_label", "known_methods", "known_names", "token_loss_expression"]

_pm, _pgamma, _pa = sp.symbols("m_admissible gamma_admissible a_admissible", positive=True)
_pc, _pbl, _pbh, _po = sp.symbols("c_admissible bl_admissible bh_admissible o_admissible", positive=True)
_ADMISSIBLE = {gw.eps_l: 1 / (1 + _pm), gw.c: 1 + gw.eps_h + _pgamma, c_is: 1 + _pc, b_l: 1 / (1 + _pbl), b_h: 1 + _pbh,
               delta_opsm: sp.log(1 + _po)}
"""0 < eps_l < 1, c > 1 + eps_h, verl DPPO's truncation C_IS > 1, IcePop's band around 1 (b_l < 1 < b_h) and OPSM's
delta > 0 (so that e^{-delta} < 1), each written with positive symbols (eps_h is positive itself)."""
_BAND_PREMISES = (c_is > 1, b_l < 1, b_h > 1)

_TOKEN_SYMBOLS = {gw.ell, gw.ell0, gw.r, gw.A, gw.eps_l, gw.eps_h, gw.c}
_REGISTRY_CONSTANTS = frozenset(CONSTANTS) - _TOKEN_SYMBOLS
"""The registry's other constants (SAPO's temperatures, GMPO's log-space clip, VESPO's Gamma weight, KL-Cov's coefficient): a loss may hold them undeclared."""


@dataclass(frozen=True)
class KnownMethod:
    """A per-token loss the checker can name: its form's key in the registry and the label a report shows.

    Its gradient weight (:attr:`weight`) is derived on first use and cached, from
    the registry's loss (:func:`derivations.methods.form_of`) by the same region
    split as :func:`derive_token_loss`; :meth:`weight_at` evaluates it at one
    ratio and numeric constants without deriving it, so a check pays only for
    the methods its weight matches.  :attr:`undecided` is what naming this form
    does not settle about its method (:func:`derivations.methods.undecided`).
    """

    method: str
    label: str

    @property
    def weight(self) -> sp.Expr:
        """The gradient weight :math:`w(r, A)`, a ``Piecewise`` (for the chapter's methods, the weights of :func:`derivations.gradient_weights.gradient_weight`)."""
        return _known_weight(self.method)

    @property
    def parameters(self) -> frozenset:
        r"""The constants of the registry's loss beyond :math:`\\varepsilon_l, \\varepsilon_h, c` (SAPO's :math:`\\tau`, KL-Cov's :math:`\\beta`)."""
        return frozenset(_registry_loss(self.method).free_symbols - _TOKEN_SYMBOLS)

    @property
    def undecided(self) -> str:
        """What a per-token check cannot state about this form's method (``""``: nothing)."""
        return undecided(self.method)

    @property
    def per_token(self) -> bool:
        r"""The form's edges move with :math:`\pi_0 = e^{\ell_0}` (DPPO's trust region, the TV band): its weight needs :math:`\ell_0`."""
        return per_token_bounds(_registry_loss(self.method))

    def weight_at(self, ratio: float | sp.Expr, sign: int, constants: dict) -> sp.Expr:
        """:math:`w` at ``ratio`` for :math:`A` of sign ``sign``, the constants numbers: an exact value off the kinks (a kink takes either side)."""
        exact = {k: _exact(v) for k, v in constants.items()}
        return _known_weight_at(self.method, _exact(ratio), sign, tuple(sorted(exact.items(), key=lambda kv: kv[0].name)))


def _exact(x) -> sp.Expr:
    """A float as the exact rational it stores (so branches are decided exactly), anything else sympified."""
    return sp.Rational(x) if isinstance(x, float) else sp.sympify(x)


@cache
def known_methods() -> tuple[KnownMethod, ...]:
    """The methods the checker recognises, in the order they are tried: every per-token form of the registry (:func:`derivations.methods.known_token_forms`), those whose per-token loss is the whole method first.

    The one place where the checker reads the method table.  Nothing is derived
    here (see :class:`KnownMethod`).  Forms with the same weight (REINFORCE and
    GPG; PPO and an unselected Clip-Cov token; token IS and an unselected
    KL-Cov token) are all named by a report (:attr:`TokenReport.same_weight`);
    the first one tried is its :attr:`~TokenReport.matches`.

    Examples
    --------
    >>> from derivations.variants import known_methods
    >>> [m.method for m in known_methods()][:7]
    ['reinforce', 'gpg', 'ppo', 'ppo_dual_clip', 'cispo', 'cispo_cap', 'sapo']
    >>> from derivations.gradient_weights import eps_h, eps_l
    >>> ppo = known_methods()[2]
    >>> [float(ppo.weight_at(x, 1, {eps_l: 0.2, eps_h: 0.28})) for x in (0.5, 2.0)]
    [0.5, 0.0]
    """
    forms = known_token_forms()  # a form that is its method in its default shape reads as the method ("PPO", not "PPO/GRPO")
    known = (KnownMethod(name, METHODS[name].label if name in METHODS else label) for name, label in forms.items())
    return tuple(sorted(known, key=lambda m: bool(undecided(m.method))))


@cache
def _registry_loss(method: str) -> sp.Expr:
    return token_loss_expression(form_of(method).loss(), {s: 1 for s in form_of(method).loss().free_symbols - _TOKEN_SYMBOLS})


def _known_weight(method: str) -> sp.Expr:
    return _weight_of(_registry_loss(method))  # keyed by the loss: forms with one loss (PPO, unselected Clip-Cov) derive once


@cache
def _weight_of(loss: sp.Expr) -> sp.Expr:
    split = _split(loss)
    if isinstance(split, str):
        raise ValueError(f"the registry's loss {loss}: {split}")
    return gw.piecewise_weight(_weights(split[1]))


def _weights(pieces: dict) -> dict:
    """``{sign: [(lo, hi, w), ...]}`` of a split's ``{sign: ((lo, hi, piece, w), ...)}``."""
    return {sign: [(lo, hi, w) for lo, hi, _, w in runs] for sign, runs in pieces.items()}


@cache  # pure, keyed by the (immutable) loss: a report and a known method's weight share one split of each distinct form
def _split(loss: sp.Expr) -> tuple | str:
    """The region split of ``loss``: ``(breaks, {sign: ((lo, hi, smooth piece, w), ...)})`` for each sign of A, or why it is undecided.

    The stopped masks are symbols in the pieces (:func:`abstract_masks`) and their values again in the weights.
    """
    held, masks = abstract_masks(loss)
    breaks = _order(breakpoints(held))
    if breaks is None:
        return "undecided: the kinks of the loss cannot be ordered under the stated assumptions on the constants"
    try:
        pieces = {sign: tuple((lo, hi, *_piece_weight(held, sign, inside)) for lo, hi, inside in _regions(breaks)) for sign in (1, -1)}
    except _Unordered as err:
        return f"undecided: the CAS could not decide the branch of {err} on a region"
    if masks:
        pieces = {sign: tuple((lo, hi, piece, at_sign(w.xreplace(masks), sign)) for lo, hi, piece, w in runs) for sign, runs in pieces.items()}
    return breaks, pieces


@cache
def _known_weight_at(method: str, ratio: sp.Expr, sign: int, constants: tuple) -> sp.Expr:
    held, masks = abstract_masks(_signed_loss(method, sign, constants))
    return at_sign(_in_ratio((-_d_dell(_piece(held, {gw.r: ratio})) / sign).xreplace(masks)), sign).subs(gw.r, ratio)


@cache  # pure: one substitution per (form, sign of A, constants), read at every probed ratio
def _signed_loss(method: str, sign: int, constants: tuple) -> sp.Expr:
    return _registry_loss(method).subs({gw.A: sign, **dict(constants)})


@cache  # pure: ratios on one region share its smooth piece, differentiated once
def _d_dell(piece: sp.Expr) -> sp.Expr:
    return gw.d_dell(piece)




def token_loss_expression(loss: sp.Expr, constants: Mapping | None = None) -> sp.Expr:
    r"""``loss`` checked (a scalar expression in the token symbols and the declared constants, with a gradient) and with :math:`e^{\ell - \ell_0}` written as :math:`r`.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import gradient_weights as gw
    >>> from derivations.variants import token_loss_expression
    >>> token_loss_expression(-sp.exp(gw.ell - gw.ell0) * gw.A)
    -A*r
    >>> token_loss_expression(sp.Abs(gw.ell - gw.ell0))   # |x| as max(x, -x), its kink in r
    Max(-log(r), log(r))

    A loss that is exactly 0 (a dropped token) is accepted: its weight is 0.
    Any other loss without :math:`\ell` outside :math:`\mathrm{sg}` has no gradient and is refused.
    """
    constants = require_constants(constants)
    loss = scalar_expression("loss", loss, "one token's loss, a scalar sympy expression", "a torch callable")
    unknown = loss.free_symbols - _TOKEN_SYMBOLS - _REGISTRY_CONSTANTS - set(constants)
    if unknown:
        raise ValueError(
            f"loss has unknown free symbols {', '.join(sorted(map(str, unknown)))}: allowed are ell, ell_0, r, A, "
            f"the registry's constants {', '.join(map(str, CONSTANTS))} (derivations.methods) "
            "and constants declared in constants={symbol: value}"
        )
    loss = loss.subs(sp.exp(gw.ell - gw.ell0), gw.r)
    loss = loss.replace(sp.Abs, lambda x: sp.Max(*(s * x.subs(gw.ell, gw.ell0 + sp.log(gw.r)) for s in (1, -1))))
    held = loss.replace(gw.sg, lambda *a: sp.Dummy("held"))
    if loss != 0 and not (held.has(gw.ell) or held.has(gw.r)):
        raise ValueError("loss must depend on ell = log pi (directly or through r = exp(ell - ell_0)) outside sg(...): "
                         "otherwise it has no gradient")
    return loss


def breakpoints(loss: sp.Expr) -> list:
    """Candidate kinks in :math:`r`: the :math:`r`-free arguments of every Min/Max, and the :math:`r`-free sides of conditions on :math:`r`.

    Examples
    --------
    >>> from derivations import gradient_weights as gw
    >>> from derivations.variants import breakpoints
    >>> sorted(breakpoints(gw.token_loss("ppo")), key=str)
    [1 - varepsilon_l, varepsilon_h + 1]
    """
    loss = scalar_expression("loss", loss, "a scalar sympy expression in r", "a number")
    if loss.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        raise ValueError(f"loss must be finite, got {loss}")
    return list(_breakpoints(loss))


@cache  # pure, keyed by the (immutable) expression: the kinks of each distinct loss or weight are solved for once
def _breakpoints(loss: sp.Expr) -> tuple:
    found = set()
    for node in loss.atoms(sp.Min, sp.Max):
        for arg in node.args:
            for sign in (1, -1):
                x = _kink(arg, sign) if arg.has(gw.A) else arg
                if not x.has(gw.r, gw.ell, gw.ell0, sp.Min, sp.Max):
                    found.add(sp.sympify(x))
        smooth = [a for a in node.args if a.has(gw.r) and not a.has(gw.ell, gw.ell0, gw.A, sp.Min, sp.Max, sp.Piecewise)]
        for i, a in enumerate(smooth):  # two smooth arguments in r cross where they are equal (|log r| at r = 1)
            for b in smooth[i + 1:]:
                found.update(s for s in sp.solve(sp.Eq(a, b), gw.r) if not s.has(gw.ell, gw.ell0, gw.A))
    for pw in loss.atoms(sp.Piecewise):
        for _, cond in pw.args:
            for rel in (cond.atoms(sp.core.relational.Relational) if not isinstance(cond, sp.core.relational.Relational) else {cond}):
                if rel.has(gw.r) and not rel.has(gw.ell0, gw.ell):  # an edge that moves with pi_old is no kink in r
                    sol = sp.solve(sp.Eq(rel.lhs, rel.rhs), gw.r)
                    found.update(s for s in sol if not s.has(gw.ell, gw.ell0, gw.A))
    return tuple(b for b in found if b.free_symbols and _positive(b) or (b.is_number and b > 0))


@cache  # pure: one Min/Max argument at one sign of A, simplified once for every loss that holds it (PPO's r A, the clipped ratio's)
def _kink(arg: sp.Expr, sign: int) -> sp.Expr:
    return sp.simplify(arg.subs(gw.A, sign) / sign)


def _positive(b) -> bool:
    return decide_sign(b.subs(_ADMISSIBLE)) == 1


def _order(breaks: list) -> list | None:
    """The breakpoints in increasing order (decided with the admissible constants), or ``None``."""
    ordered = _ordered(tuple(breaks))
    return None if ordered is None else list(ordered)


@cache
def _ordered(breaks: tuple) -> tuple | None:
    out: list = []
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

        return tuple(sorted(out, key=cmp_to_key(cmp)))
    except _Unordered:
        return None


class _Unordered(Exception):
    pass


def _branch_at(expr, point: dict):
    """``expr`` with every Min/Max/Piecewise replaced by the branch that holds at ``point``; raises ``_Unordered``.

    The one place where the checker decides a branch with its own resolver
    (:func:`_piece`): switching to the kernel's resolver is this line.
    """
    return _piece(expr, point)


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


def _piece_weight(loss, sign: int, inside) -> tuple:
    """The smooth piece of ``loss`` on the region holding ``inside`` (for A of sign ``sign``) and its gradient weight."""
    point = {gw.r: inside, gw.A: sign * _pa}
    at = {**{k: sp.sympify(v).subs(_ADMISSIBLE) for k, v in point.items()}, **_ADMISSIBLE}
    piece = _branch_at(loss, at)
    return piece, _in_ratio(sp.factor(-gw.d_dell(piece) / gw.A))


def _in_ratio(w: sp.Expr) -> sp.Expr:
    r"""``w`` with :math:`\ell` written :math:`\ell_0 + \log r` where that leaves no :math:`\ell_0` outside a per-token bound.

    The derivative of an advantage-free :math:`\tau(\log r)^2` is :math:`2\tau(\ell - \ell_0)`: a function of the ratio, written
    :math:`2\tau\log r`; a weight that keeps :math:`\ell` otherwise (a missing stop-gradient) is left as it is.
    """
    if not w.has(gw.ell):
        return w
    ratio = sp.expand(w.subs(gw.ell, gw.ell0 + sp.log(gw.r)))
    return sp.factor(ratio) if not edge_free(ratio).has(gw.ell0) else w


def _regions(breaks: list) -> tuple:
    """(lo, hi, interior point) for each open interval of r between 0, the breakpoints and infinity."""
    return _regions_of(tuple(breaks))


@cache  # pure: losses with the same kinks share one interior point per region, so the sign decisions they share are made once
def _regions_of(breaks: tuple) -> tuple:
    pts = interval_points(gw.r, [sp.sympify(b).subs(_ADMISSIBLE) for b in breaks], lower=0) if breaks else [{gw.r: 1 + sp.Dummy("t", positive=True)}]
    edges = [sp.Integer(0), *breaks, sp.oo]
    interiors = pts[0::2]
    return tuple((lo, hi, p[gw.r]) for (lo, hi), p in zip(zip(edges, edges[1:]), interiors))


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


def derive_token_loss(loss: sp.Expr, *, constants: Mapping | None = None) -> TokenReport:
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
    loss : sympy expression
        One token's loss (minimised) in the symbols of
        :mod:`derivations.gradient_weights` (a torch function is
        :func:`numeric.variants.check_token_loss`'s).
    constants : dict, optional
        ``{symbol: value}``: extra constants the expression may use (the
        derivation keeps them symbolic; the values are the numeric
        confirmation's).  The registry's own constants
        (:data:`derivations.methods.CONSTANTS`: SAPO's :math:`\tau_+, \tau_-`,
        KL-Cov's :math:`\beta`, ...) need no declaring, so every registered
        loss is accepted as the registry writes it.

    Returns
    -------
    TokenReport

    Raises
    ------
    TypeError, ValueError
        A non-scalar expression, unknown free symbols, a loss without :math:`\ell`.

    Examples
    --------
    >>> from derivations.gradient_weights import A, ell, eps_h, r, sg, token_loss
    >>> from derivations.variants import derive_token_loss
    >>> rep = derive_token_loss(token_loss("cispo_cap"))
    >>> rep.weight, rep.matches, rep.bounded
    (Piecewise((r, r <= varepsilon_h + 1), (varepsilon_h + 1, True)), 'CISPO (one-sided)', {1: True, -1: True})
    >>> derive_token_loss(-r * A * ell).is_policy_gradient   # forgot sg(r)
    False
    >>> from derivations.methods import METHODS
    >>> derive_token_loss(METHODS["sapo"].loss()).matches   # tau_+ where A > 0, tau_- elsewhere
    'SAPO'
    """
    constants = require_constants(constants)
    return _token_symbolic(token_loss_expression(loss, constants))


@cache  # pure: the report of one loss expression is a constant (its derivation already verified), shared by every check of it
def _token_symbolic(loss) -> TokenReport:
    split = _split(loss)
    if isinstance(split, str):
        return TokenReport(None, None, {}, None, False, None, None, split)
    name = sp.Symbol(r"\mathcal{L}")
    held, masks = abstract_masks(loss)
    d = Derivation(
        "Gradient weight of the loss",
        assumptions=[f"${latex(name)} = {latex(held)}$", r"$r = e^{\ell - \ell_0}$",
                     *[f"${latex(m)} = \\mathrm{{sg}}({mask_latex(k)})$, a stopped mask (a constant for the derivative)" for m, k in masks.items()],
                     r"$\varepsilon_l, \varepsilon_h, C_d > 0$", gw.eps_l < 1, gw.c > 1 + gw.eps_h,
                     *[p for p in _BAND_PREMISES if p.free_symbols & held.free_symbols],
                     r"$\partial\,\mathcal{L}/\partial\ell = -A\,w$; $\mathrm{sg}$ held constant"],
        unfold=Definitions({name: held}, gw.differentiation),
    )
    for sign in (1, -1):
        for lo, hi, piece, _ in split[1][sign]:
            where = ("A > 0" if sign > 0 else "A < 0") + r",\ " + (latex(lo) + " < " if lo != 0 else "0 < ") + "r" + ("" if hi == sp.oo else " < " + latex(hi))
            region = (gw.A > 0 if sign > 0 else gw.A < 0, *([gw.r > lo] if lo != 0 else []), *([gw.r < hi] if hi != sp.oo else []))
            d.step(name, piece, f"on ${where}$", proof=holds, given=region)
            d.step(sp.Derivative(piece, gw.ell), -gw.A * sp.factor(-gw.d_dell(piece) / gw.A), r"differentiate, $\mathrm{sg}$ held constant")
    pieces = _weights(split[1])
    weight = gw.piecewise_weight(pieces)
    silenced = sp.Or(*[_region_condition(s, lo, hi) for s in (1, -1) for lo, hi, w in gw.merged_runs(pieces[s]) if w == 0])
    is_pg = not any(edge_free(w).has(gw.ell, gw.ell0) for s in pieces for _, _, w in pieces[s])  # a per-token bound may move with ell_0
    bounded = {s: _bounded(pieces[s]) for s in (1, -1)}
    on_policy = _at_ratio_one(weight)
    same = _match(pieces) if is_pg else ()
    parts = [f"w = {sp.sstr(weight)}"]
    if not is_pg:
        parts.append("w depends on ell other than through r: not a policy gradient (a missing stop-gradient?)" + _flip(weight))
    parts += known_names(same)
    d.verify()
    return TokenReport(weight, silenced, bounded, on_policy, is_pg, known_label(same), d, "; ".join(parts), same_weight=same)


def known_label(forms: tuple) -> str | None:
    """The label (:func:`known_methods`) of the first form of ``forms`` (:func:`derivations.methods.known_token_forms` keys), or ``None``.

    Examples
    --------
    >>> from derivations.variants import known_label, known_names
    >>> known_label(("ppo", "clip_cov_kept")), known_names(("ppo", "clip_cov_kept"))
    ('PPO', ['the weight of PPO', 'also the weight of Clip-Cov (unselected token)'])
    """
    forms = _require_forms(forms)
    return _labels()[forms[0]] if forms else None


def _require_forms(forms: tuple) -> tuple:
    if not isinstance(forms, tuple) or not set(forms) <= set(_labels()):
        raise ValueError(f"forms must be a tuple of registry form names {tuple(_labels())}, got {forms!r}")
    return forms


@cache
def _labels() -> dict[str, str]:
    return {m.method: m.label for m in known_methods()}


def known_names(forms: tuple) -> list[str]:
    """The report's sentences naming ``forms``: the first as "the weight of" (with its method's "undecided" note, if any), the others as "also"."""
    labels = _labels()
    if not _require_forms(forms):
        return []
    out = [f"the weight of {labels[forms[0]]}"]
    if len(forms) > 1:
        out.append("also the weight of " + ", ".join(labels[f] for f in forms[1:]))
    if undecided(forms[0]):
        out.append(f"{METHODS[form_of(forms[0]).method].label}: {undecided(forms[0])}")
    return out


def _at_ratio_one(weight) -> bool | None:
    answers = []
    for sign in (1, -1):
        v = resolve(weight.subs({gw.r: 1, gw.A: sign * _pa}).subs(_ADMISSIBLE))
        if v is None:
            return None
        answers.append(is_zero(sp.sympify(v).subs(gw.ell, gw.ell0) - 1) is not None)
    return all(answers)


_OLD_PROBABILITIES = (sp.Rational(1, 2), sp.Rational(1, 10), sp.Rational(9, 10))
r"""The old probabilities :math:`e^{\ell_0}` at which a weight with per-token bounds is compared with a known one."""


def _at_old(expr: sp.Expr, q) -> sp.Expr:
    return sp.sympify(expr).subs(gw.ell0, sp.log(q))


def _agree_at(pieces: dict, method: KnownMethod, probe: dict, ratios: list, per_token: bool = False) -> bool:
    """Equal at a few exact ratios (off the probe's kinks), each sign of A (A = +-1); other constants set to 3/2 in both.

    With ``per_token`` (a weight whose edges move with the old probability) it is compared at each old probability of
    :data:`_OLD_PROBABILITIES` too.
    """
    olds = _OLD_PROBABILITIES if per_token else (None,)
    for sign in (1, -1):
        ours = sp.Piecewise(*[(w, gw.r < hi) for lo, hi, w in pieces[sign]])
        ours = ours.subs({**probe, gw.A: sign})
        ours = ours.subs({x: sp.Rational(3, 2) for x in ours.free_symbols - {gw.r, gw.ell, gw.ell0}})
        for x in ratios:
            b0 = method.weight_at(x, sign, probe)
            b0 = b0.subs({y: sp.Rational(3, 2) for y in b0.free_symbols - {gw.r, gw.ell, gw.ell0}})
            for q in olds:
                if q is not None and x * q >= 1:  # a ratio past 1/pi_0 would make the token's probability exceed 1
                    continue
                a, b = ours.subs(gw.r, x), b0
                if q is not None:
                    a, b = _at_old(a, q), _at_old(b, q)
                if a.free_symbols or b.free_symbols or abs(sp.N(a - b, 30)) > sp.Float("1e-25", 30):
                    return False
    return True


_PROBE = {gw.eps_l: sp.Rational(1, 5), gw.eps_h: sp.Rational(2, 7), gw.c: 3, tv_l: sp.Rational(3, 20), tv_h: sp.Rational(3, 10), c_is: 3,
          delta_band: sp.Rational(1, 10), b_l: sp.Rational(1, 2), b_h: 4, delta_opsm: sp.Rational(1, 10), tau_k2: sp.Rational(1, 100),
          beta_dro: sp.Rational(1, 10)}
"""The constants at which :func:`_match` probes a weight before deriving anything: distinct values, each edge away from the others."""


def _match(pieces: dict) -> tuple[str, ...]:
    r"""The registry forms whose weight equals this one on every open region (each sign of A), in the order tried.

    A weight whose regions move with :math:`\ell_0` (a per-token bound) is compared only with the known forms that have one,
    and the others only with the others.  Forms with per-token bounds are confirmed by the same pieces on the same regions, or
    else at instances (:func:`_equal_at_instances`).
    """
    per_token = any(per_token_bounds(w) for s in pieces for _, _, w in pieces[s])
    ratios = [sp.Rational(k, 10) for k in (1, 6, 9, 11, 15, 25, 50)]
    found: list[str] = []
    for method in known_methods():
        if per_token_bounds(_registry_loss(method.method)) != per_token:
            continue
        if per_token and not _agree_in_floats(pieces, method):  # a cheap probe first, in floats (the exact check follows)
            continue
        if not per_token and not _agree_at(pieces, method, _PROBE, ratios):  # a cheap exact probe first: nothing derived
            continue
        known = method.weight
        split = _split(_registry_loss(method.method))
        ok = (any(known == _known_weight(f) for f in found)  # the weight of a form already confirmed
              or not isinstance(split, str) and _weights(split[1]) == pieces  # the same pieces on the same regions
              or (_equal_at_instances(pieces, known) if per_token else _equal_on_refinement(pieces, known)))
        if ok:
            found.append(method.method)
    return tuple(found)


@cache
def _in_floats(weight: sp.Expr):
    r"""``weight`` at the probe's constants (:data:`_PROBE`; any other at 3/2) as a float function of :math:`(r, A, \ell_0)`."""
    w = sp.sympify(weight).subs(_PROBE)
    w = w.subs({x: sp.Rational(3, 2) for x in w.free_symbols - {gw.r, gw.A, gw.ell0, gw.ell}}).subs(gw.ell, gw.ell0 + sp.log(gw.r))
    return sp.lambdify((gw.r, gw.A, gw.ell0), w, modules=["math", "mpmath", "sympy"])


def _agree_in_floats(pieces: dict, method: KnownMethod) -> bool:
    """Equal in floats (relative 1e-9) at a few ratios and old probabilities off the edges, each sign of A: a probe, nothing exact."""
    ours = {sign: _in_floats(sp.Piecewise(*[(w, gw.r < hi) for lo, hi, w in pieces[sign]])) for sign in (1, -1)}
    known = _in_floats(method.weight)
    for sign in (1, -1):
        for q in (0.5, 0.1, 0.9):
            for x in (0.13, 0.61, 0.93, 1.07, 1.52, 2.53, 4.7):
                if x * q >= 1:
                    continue
                try:
                    a, b = float(ours[sign](x, sign, math.log(q))), float(known(x, sign, math.log(q)))
                except (TypeError, ValueError):  # a log of a negative number: a probability past 1, not compared
                    continue
                if abs(a - b) > 1e-9 * max(1.0, abs(b)):
                    return False
    return True


def _equal_at_instances(pieces: dict, known: sp.Expr) -> bool:
    r"""``pieces`` and ``known`` agree, each sign of A, at every old probability of :data:`_OLD_PROBABILITIES` and the constants of
    :data:`_PROBE`, at the interior points of the common refinement of both partitions there (a check at instances: the edges of a
    per-token bound are numbers only once :math:`\pi_0` and the constants are)."""
    for sign in (1, -1):
        ours = sp.Piecewise(*[(w, gw.r < hi) for lo, hi, w in pieces[sign]]) if len(pieces[sign]) > 1 else pieces[sign][0][2]
        for q in _OLD_PROBABILITIES:
            a, b = (_at_old(sp.sympify(e).subs({**_PROBE, gw.A: sign}), q) for e in (ours, known))
            a, b = (e.subs({x: sp.Rational(3, 2) for x in e.free_symbols - {gw.r, gw.ell}}) for e in (a, b))
            edges = sorted({float(e) for e in (*_breakpoints(a), *_breakpoints(b)) if e.is_number and e > 0})
            inside = [e * (1 - 1e-3) for e in edges] + [e * (1 + 1e-3) for e in edges] + [0.05, 1.0, 50.0]
            for x in (x for x in inside if x * q < 1):  # a ratio past 1/pi_0 would make the token's probability exceed 1
                point = {gw.r: sp.Rational(x)}
                u, v = resolve(a.subs(point)), resolve(b.subs(point))
                if u is None or v is None or abs(sp.N(u - v, 30)) > sp.Float("1e-25", 30):
                    return False
    return True


def _equal_on_refinement(pieces: dict, known: sp.Expr) -> bool:
    """``pieces`` and the weight ``known`` agree at the interior points of the common refinement of both partitions, each sign of A."""
    for sign in (1, -1):
        breaks = _order(list({*[b for b in (p[0] for p in pieces[sign]) if b != 0], *breakpoints(known)}))
        if breaks is None:
            return False
        ours = sp.Piecewise(*[(w, gw.r < hi) for lo, hi, w in pieces[sign]]) if len(pieces[sign]) > 1 else pieces[sign][0][2]
        for _, _, inside in _regions(breaks):
            at = {gw.r: sp.sympify(inside).subs(_ADMISSIBLE), gw.A: sign * _pa, **_ADMISSIBLE}
            a, b = resolve(sp.sympify(ours).subs(at)), resolve(sp.sympify(known).subs(at))
            if a is None or b is None or is_zero(a - b) is None:
                return False
    return True
