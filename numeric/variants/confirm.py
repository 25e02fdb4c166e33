r"""Every verdict of the variant checker confirmed by exact numbers on the toy LM.

:func:`confirm_group` compares :math:`c\,\nabla J + \text{residual}` with the
exact group engine :func:`numeric.exact_group_gradient` on
:class:`~numeric.TinyLM`; :func:`confirm_token` compares the derived weight
with autograd on TinyLM's tokens.  A disagreement above 1e-12 raises
:class:`derivations.variants.SymbolicNumericMismatch`.  Everything is
float64, passed explicitly; nothing global is changed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import mpmath
import numpy as np
import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations.group_baselines import GRAD_J, GRAD_P, P
from derivations.iid_groups import Expect
from derivations.methods import symbol_defaults
from derivations.variants import GroupReport, SymbolicNumericMismatch, TokenReport, breakpoints
from derivations.variants.inputs import G_SYMBOL, R_PLAIN, S_PLAIN, R, explicit_advantage, require_constants

from ..expectations import expected_score_sum
from ..group_baselines import exact_group_gradient
from ..tinylm import TinyLM, default_reward, perturb, token_score_tensor
from .callables import F64, TOL

__all__ = ["DEFAULT_CONSTANTS", "confirm_group", "confirm_token", "toy_lm", "torch_value"]


def _require_report(name: str, report, kind: type):
    if not isinstance(report, kind):
        raise TypeError(f"{name} must be a {kind.__name__} (from derivations.variants), got {type(report).__name__}")
    return report


def _require_advantage(advantage):
    if not (callable(advantage) or isinstance(advantage, sp.Expr)):
        raise TypeError(f"advantage must be a sympy expression or a callable, got {type(advantage).__name__}")
    return advantage


# ------------------------------------------------------------------ the toy LM and its reward laws


def toy_lm() -> TinyLM:
    """The toy LM every group verdict is confirmed on."""
    return TinyLM(V=3, L=3, seed=1)


_GENERAL_VALUES = (0.0, 1.0, 2.5, 4.0)


def _reward(lm: TinyLM, law) -> torch.Tensor:
    """A reward on the toy LM with the law's values, each taken by some response."""
    if law == "binary":
        return default_reward(lm)
    values = torch.tensor([float(v) for v in (_GENERAL_VALUES if law == "general" else law)], dtype=F64)
    return values[torch.arange(lm.N) % values.numel()]


def _expression_callable(expr, G: int, constants: dict) -> Callable:
    """Answer ``i``'s advantage from the expression, vectorised: answer i swapped to the front."""
    A1 = explicit_advantage(sp.sympify(expr).subs(constants), G)
    f = sp.lambdify([R[k + 1] for k in range(G)], A1, modules=[{"Max": np.maximum, "Min": np.minimum}, "numpy"], docstring_limit=0)

    def advantages(rewards):
        r = torch.as_tensor(rewards, dtype=F64)
        cols = []
        for i in range(G):
            order = [i, *[k for k in range(G) if k != i]]
            out = f(*[r[..., k].numpy() for k in order])
            cols.append(np.broadcast_to(np.asarray(out, dtype=np.float64), r.shape[:-1]))
        return torch.from_numpy(np.stack(cols, -1).copy())

    return advantages


def _score_moment(lm, theta, R, mono) -> torch.Tensor:
    """E[R^d s] of one answer on the toy LM, a [P] vector."""
    return expected_score_sum(lm, theta, R ** int(sp.degree(mono, R_PLAIN)))


def _moment(lm, theta, R, mono) -> float:
    """E[R^d] of one answer on the toy LM."""
    return float(lm.probs(theta) @ R ** int(sp.degree(mono, R_PLAIN)))


def _predicted(report, lm, theta, R, G: int, constants: dict, law) -> torch.Tensor:
    """c grad J + residual of the report, in numbers on the toy LM."""
    total = report.scale * GRAD_J + report.residual
    total = total.xreplace({G_SYMBOL: G}).subs(constants)
    p = lm.probs(theta)
    vectors = {GRAD_J: expected_score_sum(lm, theta, R), GRAD_P: expected_score_sum(lm, theta, R)}
    numbers = {P: sp.Rational(float(p @ R))}
    if law not in ("general", "binary"):
        values = torch.tensor([float(v) for v in law], dtype=F64)
        for k, v in enumerate(values):
            numbers[sp.Symbol(f"q_{k + 1}", positive=True)] = sp.Rational(float(p @ (R == v).to(F64)))
    if report.reduction is not None:  # decided numerically: alpha_d(q) evaluated from the streamed table at the toy LM's law
        unknown = [a for a in report.reduction.alphas if total.has(a)]
        if unknown and report.reduction.evaluate is None:
            raise ValueError(f"report.reduction has no evaluate, so {', '.join(map(str, unknown))} cannot be confirmed in numbers")
        if unknown:
            alphas = report.reduction.evaluate([float(p @ (R == float(v)).to(F64)) for v in report.reduction.values])
            total = total.xreplace({a: sp.Float(x, 17) for a, x in zip(report.reduction.alphas, alphas)})
    for e in total.atoms(Expect):
        arg = e.args[0]
        if arg.has(S_PLAIN):
            vectors[e] = _score_moment(lm, theta, R, arg)
        elif arg.is_polynomial(R_PLAIN) and not arg.atoms(sp.Indexed):
            numbers[e] = sp.Rational(_moment(lm, theta, R, arg))
        else:
            numbers[e] = sp.Rational(_others_expectation(arg, lm, theta, R, constants))
    out = torch.zeros(lm.P, dtype=F64)
    present = [v for v in vectors if total.has(v)]
    if total.xreplace({v: 0 for v in present}) != 0:
        raise SymbolicNumericMismatch(f"cannot read {total} as a combination of gradients")
    stand_ins = {v: sp.Dummy("g") for v in present}
    linear = total.xreplace(stand_ins)
    for v in present:  # linear in the gradients; no expansion (it would cancel digits of fp64 coefficients)
        coeff = sp.sympify(linear.xreplace({d: sp.Integer(int(w == v)) for w, d in stand_ins.items()}))  # linear: set this gradient to 1, the others to 0
        names = sorted(coeff.free_symbols & set(numbers), key=str) + sorted(coeff.atoms(Expect) & set(numbers), key=str)
        hidden = {e: sp.Dummy() for e in names}
        # docstring_limit=0: no docstring rendering the whole coefficient (a third of lambdify's time); the same function
        f = sp.lambdify(list(hidden.values()), coeff.xreplace(hidden), "mpmath", docstring_limit=0)
        with mpmath.workdps(30):  # exact inputs, 30 digits: no cancellation
            out += float(f(*[mpmath.mpf(sp.Rational(numbers[e]).p) / sp.Rational(numbers[e]).q for e in names])) * vectors[v]
    return out


def _others_expectation(h, lm, theta, R, constants) -> float:
    """E[h(R_2, ..., R_G)] over the toy LM's reward law, by enumerating the answers h names."""
    p = lm.probs(theta)
    values, inverse = torch.unique(R, return_inverse=True)
    q = torch.zeros_like(values).index_add_(0, inverse, p)
    names = sorted(h.atoms(sp.Indexed), key=sp.default_sort_key)
    f = sp.lambdify(names, h.subs(constants), modules=[{"Max": max, "Min": min}, "math"], docstring_limit=0)
    total = 0.0
    for combo in np.ndindex(*[values.numel()] * len(names)):
        total += math.prod(float(q[k]) for k in combo) * float(f(*[float(values[k]) for k in combo]))
    return total


def confirm_group(report: GroupReport, advantage: sp.Expr | Callable, constants: dict) -> GroupReport:
    r"""The report with its numeric confirmation: symbolic :math:`c\nabla J + \text{residual}` against the exact group engine.

    On ``TinyLM(V=3, L=3, seed=1)`` with a reward of the report's law
    (a four-valued reward 0, 1, 2.5, 4 for a general law), for the report's
    :math:`G` or each :math:`G = 2..8` when it is symbolic.  An undecided
    report is returned unchanged (there is nothing to confirm).

    Raises
    ------
    derivations.variants.SymbolicNumericMismatch
        When the two differ by more than 1e-12 (relative to the gradient).
    """
    _require_report("report", report, GroupReport)
    constants = require_constants(constants)
    if report.verdict == "undecided":
        return report
    _require_advantage(advantage)
    lm = toy_lm()
    theta = lm.theta0
    R = _reward(lm, report.rewards)
    Gs = [report.G] if isinstance(report.G, int) else list(range(2, 9))
    rows = []
    for G in Gs:
        fn = advantage if callable(advantage) and not isinstance(advantage, sp.Basic) else _expression_callable(advantage, G, constants)
        exact = exact_group_gradient(lm, theta, R, G, fn)
        symbolic = _predicted(report, lm, theta, R, G, constants, report.rewards)
        gap = float((exact - symbolic).abs().max())
        scale = max(1.0, float(exact.abs().max()))
        rows.append((G, float(symbolic.norm()), float(exact.norm()), gap))
        if not gap <= TOL * scale:
            raise SymbolicNumericMismatch(
                f"G = {G}: the symbolic expected update and the exact one on the toy LM differ by {gap:.3g} "
                f"(verdict {report.verdict}, c = {report.scale})"
            )
    return dataclasses.replace(report, numeric=tuple(rows))


# ------------------------------------------------------------------ token losses


DEFAULT_CONSTANTS = {gw.eps_l: 0.2, gw.eps_h: 0.28, gw.c: 3.0}
"""Values of the clip constants used when none are given."""

_RELATIONS = {sp.StrictLessThan: torch.lt, sp.LessThan: torch.le, sp.StrictGreaterThan: torch.gt, sp.GreaterThan: torch.ge}


def torch_value(expr: sp.Expr, env: dict):
    """Evaluate a loss expression on tensors: ``sg`` detaches, Min/Max/Piecewise elementwise; autograd flows through the rest."""
    if expr in env:
        return env[expr]
    if isinstance(expr, (bool, sp.logic.boolalg.BooleanAtom)):
        return bool(expr)
    if expr.is_number:
        return torch.tensor(float(expr), dtype=F64)
    if isinstance(expr, sp.Symbol):
        raise ValueError(f"no value for the symbol {expr}")
    if isinstance(expr, sp.Piecewise):
        out = torch.tensor(float("nan"), dtype=F64)
        for value, cond in reversed(expr.args):
            v, c_ = torch_value(value, env), torch_value(cond, env)
            out = v if c_ is True else torch.where(torch.as_tensor(c_), v, out)
        return out
    args = [torch_value(a, env) for a in expr.args]
    if isinstance(expr, sp.Add):
        return sum(args[1:], args[0])
    if isinstance(expr, sp.Mul):
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if isinstance(expr, sp.Pow):
        return args[0] ** args[1]
    if isinstance(expr, sp.exp):
        return torch.exp(args[0])
    if isinstance(expr, sp.log):
        return torch.log(args[0])
    if isinstance(expr, sp.Abs):
        return torch.abs(args[0])
    if isinstance(expr, sp.Min):
        return _reduce(torch.minimum, args)
    if isinstance(expr, sp.Max):
        return _reduce(torch.maximum, args)
    if expr.func == gw.sg:
        return args[0].detach()
    if type(expr) in _RELATIONS:
        return _RELATIONS[type(expr)](args[0], args[1])
    if isinstance(expr, sp.And):
        return _reduce(torch.logical_and, args)
    if isinstance(expr, sp.Or):
        return _reduce(torch.logical_or, args)
    raise TypeError(f"cannot evaluate {type(expr).__name__} ({expr}) on tensors")


def _reduce(op, args):
    out = args[0]
    for a in args[1:]:
        out = op(torch.as_tensor(out, dtype=F64) if not isinstance(out, torch.Tensor) else out, a if isinstance(a, torch.Tensor) else torch.as_tensor(a, dtype=F64))
    return out


def token_batch(seed: int = 0):
    """TinyLM tokens with old and new log-probabilities far apart and advantages of both signs."""
    lm = TinyLM(V=3, L=3, seed=seed)
    old = lm.theta0
    theta = perturb(old, 1.5, seed=seed + 5).requires_grad_(True)
    gen = torch.Generator().manual_seed(seed)
    adv = torch.randn(lm.N, lm.L, generator=gen, dtype=F64)
    return lm, old, theta, adv


def with_defaults(constants: dict) -> dict:
    """The clip constants: ``constants`` over :data:`DEFAULT_CONSTANTS`."""
    return {**DEFAULT_CONSTANTS, **constants}


def near_kink(ratio: torch.Tensor, breaks: list, values: dict) -> torch.Tensor:
    near = torch.zeros_like(ratio, dtype=torch.bool)
    for b in breaks:
        near |= (ratio - float(sp.sympify(b).subs(values))).abs() < 1e-6
    return near


def confirm_token(report: TokenReport, loss: sp.Expr, constants: dict) -> TokenReport:
    r"""The report with autograd on TinyLM's tokens: :math:`\nabla_\theta \sum_t \mathrm{loss}_t = -\sum_t w_t A_t \nabla_\theta\log\pi_t`.

    The loss is evaluated on every token of ``TinyLM(V=3, L=3)`` with
    :math:`\theta` perturbed away from :math:`\theta_{\text{old}}` (ratios on
    both sides of every clip) and normal advantages; tokens within 1e-6 of a
    kink are left out.  The constants are ``constants`` over
    :data:`DEFAULT_CONSTANTS`; a constant of the registry's formulas that the
    loss holds and neither names takes the registry's default
    (:func:`derivations.methods.symbol_defaults`: SAPO's
    :math:`\tau_+ = 1 \ne \tau_- = 1.05`, so the temperature chosen by the
    sign of :math:`A` is confirmed too).  Raises
    :class:`~derivations.variants.SymbolicNumericMismatch` above 1e-12.
    """
    _require_report("report", report, TokenReport)
    if not isinstance(loss, sp.Expr):
        raise TypeError(f"loss must be a scalar sympy expression (one token's loss), got {type(loss).__name__}")
    registry = {s: v for s, v in symbol_defaults().items() if s in loss.free_symbols and s not in DEFAULT_CONSTANTS}
    values = with_defaults({**registry, **require_constants(constants)})
    lm, old, theta, adv = token_batch()
    ell = lm.token_log_probs(theta)
    ell0 = lm.token_log_probs(old).detach()
    ratio = torch.exp(ell - ell0)
    env = {gw.ell: ell, gw.ell0: ell0, gw.r: ratio, gw.A: adv, **{k: torch.tensor(v, dtype=F64) for k, v in values.items()}}
    keep = lm.mask.bool() & ~near_kink(ratio.detach(), breakpoints(loss), values)
    per_token = torch.broadcast_to(torch.as_tensor(torch_value(loss, env), dtype=F64), adv.shape)
    total = torch.where(keep, per_token, torch.zeros_like(per_token)).sum()
    grad = torch.autograd.grad(total, theta)[0] if total.requires_grad else torch.zeros_like(theta)  # a dropped token's loss is 0
    wenv = {gw.ell: ell.detach(), gw.ell0: ell0, gw.r: ratio.detach(), gw.A: adv, **{k: torch.tensor(v, dtype=F64) for k, v in values.items()}}
    w = torch_value(report.weight, wenv)
    w = torch.broadcast_to(torch.as_tensor(w, dtype=F64), adv.shape)
    predicted = torch.einsum("nl,nlp->p", torch.where(keep, -w * adv, torch.zeros_like(adv)), token_score_tensor(lm, theta.detach()))
    gap = float((grad - predicted).abs().max())
    if not gap <= TOL * max(1.0, float(grad.abs().max())):
        raise SymbolicNumericMismatch(f"the derived weight and autograd on TinyLM's tokens differ by {gap:.3g}")
    return dataclasses.replace(report, numeric=(int(keep.sum()), gap))
