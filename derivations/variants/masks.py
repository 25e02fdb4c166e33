r"""Stopped 0/1 masks in a per-token loss, and weights whose edges move with the old probability.

A mask :math:`\mathrm{sg}(k)` (DPPO's trust region, OPSM's row cut, a band on the ratio) is a constant of the
derivative: :func:`abstract_masks` writes each as a symbol before the region split, and :func:`at_sign` puts it back in
the weight for one sign of the advantage.  A weight that keeps a condition in :math:`\ell_0` has per-token bounds
(:func:`per_token_bounds`): its clip range moves with :math:`\pi_0 = e^{\ell_0}`.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from .. import gradient_weights as gw

__all__: list[str] = []  # the checker's plumbing, read by derivations.variants.token (no public entry point)


def _is_mask(x: sp.Expr) -> bool:
    """A 0/1 indicator: a ``Piecewise`` (nested ones too) whose every value is 0 or 1."""
    if x in (sp.Integer(0), sp.Integer(1)):
        return True
    return isinstance(x, sp.Piecewise) and all(_is_mask(v) for v, _ in x.args)


@cache
def abstract_masks(loss: sp.Expr) -> tuple[sp.Expr, dict]:
    r"""``loss`` with every stopped 0/1 mask :math:`\mathrm{sg}(k)` written as a symbol, and ``{symbol: k}``.

    A stopped product is first split into stopped factors (:math:`\mathrm{sg}(ab) = \mathrm{sg}(a)\,\mathrm{sg}(b)`: both sides
    have the value :math:`ab` and derivative 0).  A mask is a constant for the derivative, whatever its condition: DPPO's trust
    region on the probability change (an edge :math:`1 + \delta/\pi_0` that moves with :math:`\pi_0`), OPSM's row mask.  The
    region split then cuts only at the kinks of the rest, and the weight takes the mask back (:func:`at_sign`).
    """
    split = loss.replace(lambda e: e.func == gw.sg and isinstance(e.args[0], sp.Mul), lambda e: sp.Mul(*[gw.sg(f) for f in e.args[0].args]))
    masks = sorted({e for e in split.atoms(sp.Function) if e.func == gw.sg and _is_mask(e.args[0])}, key=sp.default_sort_key)
    symbols = {m: sp.Symbol(f"mask_{i + 1}", real=True) for i, m in enumerate(masks)}
    return split.xreplace(symbols), {v: m.args[0] for m, v in symbols.items()}


def at_sign(x: sp.Expr, sign: int) -> sp.Expr:
    """``x`` with every condition on :math:`A` alone decided for :math:`A` of sign ``sign``."""
    rels = {rel for rel in sp.sympify(x).atoms(sp.core.relational.Relational) if rel.free_symbols == {gw.A}}
    return sp.sympify(x).xreplace({rel: bool(rel.subs(gw.A, sign)) for rel in rels})


def per_token_bounds(weight: sp.Expr) -> bool:
    r"""The weight keeps a condition that moves with :math:`\ell_0` (a per-token bound, from a stopped mask)."""
    return any(rel.has(gw.ell0) for pw in sp.sympify(weight).atoms(sp.Piecewise) for _, cond in pw.args
               for rel in ([cond] if isinstance(cond, sp.core.relational.Relational) else cond.atoms(sp.core.relational.Relational)))


def edge_free(weight: sp.Expr) -> sp.Expr:
    r"""The weight with every condition that moves with :math:`\ell_0` replaced by a fresh symbol: what remains is its values."""
    conditions = {rel: sp.Dummy("edge") for pw in sp.sympify(weight).atoms(sp.Piecewise) for _, cond in pw.args
                  for rel in ([cond] if isinstance(cond, sp.core.relational.Relational) else cond.atoms(sp.core.relational.Relational))
                  if rel.has(gw.ell0)}
    return sp.sympify(weight).xreplace(conditions)


def mask_latex(k: sp.Expr) -> str:
    r"""A 0/1 mask as the notes write it: :math:`\mathbb{1}[\text{condition}]`, by cases on its other conditions (the sign of :math:`A`).

    Printed from its conditions as they stand, so no condition is negated or simplified (SymPy's exclusive
    ``Piecewise`` would simplify the logic of conditions in :math:`e^{\ell_0}`: seconds per mask).
    """
    from ..notation import latex

    if k in (sp.Integer(0), sp.Integer(1)):
        return latex(k)
    args = k.args
    if len(args) == 2 and args[0][0] == 1 and args[1] == (0, True):
        return rf"\mathbb{{1}}[{latex(args[0][1])}]"
    otherwise = r"\text{otherwise}"
    rows = [f"{mask_latex(v)} & {otherwise if c is sp.true else latex(c)}" for v, c in args]
    return r"\begin{cases} " + r" \\ ".join(rows) + r" \end{cases}"

