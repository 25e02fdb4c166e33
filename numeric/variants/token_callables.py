r"""A trainer's per-token loss, as written: its gradient weight tabulated by autograd and matched with the known methods.

:func:`token_report_from_callable` is what :func:`numeric.variants.check_token_loss`
does for a torch function ``loss(log_prob, old_log_prob, advantage)``: there
is no expression to differentiate, so the weight is read off autograd on a
dense grid of ratios, and compared with the derived weights of
:func:`derivations.variants.known_methods`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations.methods import CONSTANTS, beta, tau_k2, tau_neg, tau_pos
from derivations.methods import k as vespo_k
from derivations.methods import lam as vespo_lam
from derivations.variants import TokenReport, breakpoints, known_label, known_methods, known_names
from derivations.variants.inputs import require_constants

from ..tinylm import token_score_tensor
from .callables import F64, TOL
from .confirm import near_kink, token_batch, torch_value, with_defaults
from .weight_probe import at_ratio_one, bounded

__all__ = ["callable_weight", "token_report_from_callable"]

_GRID = torch.cat([torch.logspace(-2, 2, 161, dtype=F64), torch.tensor([1.0], dtype=F64)]).unique()


def _callable_weight(fn, ratio: torch.Tensor, adv: torch.Tensor, ell0: float | torch.Tensor) -> torch.Tensor:
    old = ell0 if isinstance(ell0, torch.Tensor) else torch.full_like(ratio, ell0)
    new = (old + torch.log(ratio)).requires_grad_(True)
    out = fn(new, old, adv)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"loss must return a torch tensor of per-token losses, got {type(out).__name__}")
    if out.shape != ratio.shape:
        raise ValueError(f"loss must return one loss per token, shape {tuple(ratio.shape)}, got {tuple(out.shape)}")
    if not bool(torch.isfinite(out).all()):
        raise ValueError("loss must return finite values")
    (g,) = torch.autograd.grad(out.sum(), new, allow_unused=True)
    g = torch.zeros_like(new) if g is None else g
    return (-g / adv).to(F64)


def callable_weight(fn: Callable) -> Callable:
    """The per-token loss ``fn`` as a weight ``(ratio, sign, ell0) -> w`` for :mod:`~numeric.variants.weight_probe`."""
    def weight(ratio: torch.Tensor, sign: int, ell0: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            finite = torch.isfinite(ratio)
        return _callable_weight(fn, ratio.clamp_min(1e-300), torch.full_like(ratio, float(sign)), ell0) if bool(finite.all()) else ratio
    return weight


def token_report_from_callable(fn: Callable, constants: dict, *, tol: float = TOL) -> TokenReport:
    r"""A :class:`~derivations.variants.TokenReport` for a torch loss by autograd on a dense grid.

    :math:`w = -(\partial\,\mathrm{loss}/\partial\ell)/A` for :math:`r` on 162
    log-spaced points in :math:`[10^{-2}, 10^2]` (and 1), :math:`A = \pm 1`, at
    :math:`\ell_0 = -0.5`; then, by :mod:`~numeric.variants.weight_probe`:

    * a policy gradient has :math:`w(1, A; q) = 1` at every old probability
      :math:`q` (:func:`~numeric.variants.weight_probe.at_ratio_one`): a weight
      that moves with :math:`q` only away from :math:`r = 1` (clip bounds
      computed from :math:`\pi_{\text{old}}`) is one, with per-token constants;
    * bounded means :math:`|w|` stays bounded as :math:`r \to 0` and
      :math:`r \to \infty` (probed from :math:`10^{-12}` to :math:`10^{12}`,
      :func:`~numeric.variants.weight_probe.bounded`).

    ``tol`` is the relative tolerance of every comparison (the loss's
    precision sets it; 1e-12 in float64).
    """
    if not callable(fn):
        raise TypeError(f"fn (the loss) must be callable, got {type(fn).__name__}")
    if not isinstance(tol, float) or not 0 < tol < 1:
        raise ValueError(f"tol must be a float in (0, 1), got {tol!r}")
    values = with_defaults(require_constants(constants))
    r = _GRID
    weight = callable_weight(fn)
    w = {s: _callable_weight(fn, r, torch.full_like(r, float(s)), -0.5) for s in (1, -1)}
    other = {s: _callable_weight(fn, r, torch.full_like(r, float(s)), -2.0) for s in (1, -1)}
    one = at_ratio_one(weight, tol)
    per_token = one.policy_gradient and not all(bool((w[s] - other[s]).abs().max() <= tol * max(1.0, float(w[s].abs().max()))) for s in (1, -1))
    table = tuple((float(x), float(a), float(b)) for x, a, b in zip(r, w[1], w[-1]))
    silenced = tuple(run for s in (1, -1) for run in _silenced_runs(s, r, w[s]))
    ends = bounded(weight, tol)
    same: tuple[str, ...] = ()
    read: dict = {}
    if not one.policy_gradient:
        pass
    elif per_token:
        same, read = _match_per_token({-0.5: w, -2.0: other}, values, tol), {}
    else:
        same, read = _match(w, values, tol)
    numeric = _callable_on_tokens(fn, tol)
    reason = "; ".join([f"weight tabulated by autograd on {len(r)} ratios in [0.01, 100] for A = +1 and -1, its ends probed to 1e-12 and 1e12",
                        *([one.explanation] if one.explanation else []),
                        *(["its clip bounds move with the old probability (per-token constants): a policy gradient with a per-token "
                           "clip range"] if per_token else []), *known_names(same),
                       *([f"constants read off the weight: {', '.join(f'{k} = {v:.6g}' for k, v in read.items())}"] if read else [])])
    return TokenReport(None, silenced, ends, one.on_policy, one.policy_gradient, known_label(same), None, reason, table, numeric,
                       same_weight=same, per_token_constants=per_token, ratio_one=one.cause)


UNDERFLOW = 1e-9
"""A run of exact zeros entered from :math:`|w| <` this on each side is an underflow of a smooth weight (SAPO's sigmoid saturates), not a silenced region."""


def _silenced_runs(sign: int, r: torch.Tensor, w: torch.Tensor) -> list:
    """The runs of ratios where the weight is exactly 0 and that a kink enters: a grid neighbour of the run has :math:`|w| \\ge` :data:`UNDERFLOW` (or the whole grid is 0)."""
    out = []
    for run in _runs(sign, r, w == 0):
        lo, hi = int((r == run[1]).nonzero()), int((r == run[2]).nonzero())
        beside = [float(w[k].abs()) for k in (lo - 1, hi + 1) if 0 <= k < len(r)]
        if not beside or max(beside) >= UNDERFLOW:
            out.append(run)
    return out


def _runs(sign: int, r: torch.Tensor, flags: torch.Tensor) -> list:
    """``(sign, first r, last r)`` of each run of consecutive grid points where ``flags`` holds."""
    out, start = [], None
    for k, f in enumerate(flags.tolist() + [False]):
        if f and start is None:
            start = k
        elif not f and start is not None:
            out.append((sign, float(r[start]), float(r[k - 1])))
            start = None
    return out


def _callable_on_tokens(fn, tol: float = TOL) -> tuple:
    """The callable is per-token (each token's loss alone equals its entry of the batched loss), and autograd through TinyLM is the chain rule."""
    lm, old, theta, adv = token_batch()
    ell = lm.token_log_probs(theta)
    ell0 = lm.token_log_probs(old).detach()
    out = fn(ell, ell0, adv)
    if not isinstance(out, torch.Tensor) or out.shape != ell.shape:
        raise ValueError(f"loss must return one loss per token, shape {tuple(ell.shape)}")
    mask = lm.mask.bool()
    total = torch.where(mask, out, torch.zeros_like(out)).sum()
    (grad,) = torch.autograd.grad(total, theta)
    leaf = ell.detach().requires_grad_(True)
    (g_ell,) = torch.autograd.grad(torch.where(mask, fn(leaf, ell0, adv), torch.zeros_like(out)).sum(), leaf)
    predicted = torch.einsum("nl,nlp->p", g_ell, token_score_tensor(lm, theta.detach()))
    alone = max(abs(float(fn(leaf[n:n + 1, t:t + 1], ell0[n:n + 1, t:t + 1], adv[n:n + 1, t:t + 1]).detach()) - float(out[n, t].detach()))
                for n in range(0, lm.N, 3) for t in range(lm.L) if mask[n, t])
    gap = max(float((grad - predicted).abs().max()), alone)
    if not gap <= tol * max(1.0, float(grad.abs().max())):
        raise ValueError(f"loss must be per-token (elementwise): its batched and one-token values or gradients differ by {gap:.3g}")
    return (int(mask.sum()), gap)


def _match(w: dict, values: dict, tol: float = TOL) -> tuple[tuple[str, ...], dict]:
    r"""Every known form (in the order tried) whose weight, evaluated on the grid with the constants ``values``, equals the tabulated one to 1e-12 (off its kinks).

    A method is derived only if it passes a probe first: its exact weight at
    :data:`_PROBES` ratios (nothing derived) against the table.  A known weight
    has at most three kinks (:math:`1-\varepsilon_l`, :math:`1+\varepsilon_h`,
    :math:`c`), so a true match disagrees at no more than three of the seven
    probe ratios; a method that disagrees at more is not it.  Returns the
    names and the constants read off the weight for the names (:func:`_read_off`:
    SAPO's temperatures), which the report's reason states.
    """
    r = _GRID
    env = {gw.r: r, **{k: torch.tensor(v, dtype=F64) for k, v in values.items()}}
    found: list[str] = []
    read: dict = {}
    for method in known_methods():
        if method.per_token or method.parameters - set(values) - _READABLE:  # its constants are neither declared nor readable here
            continue
        fitted = _read_off(method, w, values) if not method.parameters <= set(values) else {}
        if fitted is None:  # KL-Cov's beta (not in its weight): only with a declared value
            continue
        given = {**values, **fitted}
        if _disagreements(method, w, given, tol) > 3:
            continue
        away = ~near_kink(r, breakpoints(method.weight), given)
        ok = True
        for s in (1, -1):
            at = {**env, **{k: torch.tensor(v, dtype=F64) for k, v in fitted.items()}, gw.A: torch.full_like(r, float(s))}
            known = torch.broadcast_to(torch.as_tensor(torch_value(method.weight, at), dtype=F64), r.shape)
            ok &= bool((known - w[s])[away].abs().max() <= tol * max(1.0, float(known[away].abs().max())))
        if ok:
            found.append(method.method)
            read.update(fitted)
    return tuple(found), read


def _agrees_per_token(weight: sp.Expr, table: torch.Tensor, sign: int, ell0: float, constants: dict, tol: float) -> bool:
    """``weight`` equals ``table`` on :data:`_GRID` at ``ell0``, off its own jumps and past no probability above 1."""
    r = _GRID
    env = {gw.A: torch.full_like(r, float(sign)), gw.ell0: torch.full_like(r, ell0), **{c: torch.tensor(v, dtype=F64) for c, v in constants.items()}}
    at = lambda x: torch.broadcast_to(torch.as_tensor(torch_value(weight, {**env, gw.r: x}), dtype=F64), r.shape)  # noqa: E731
    known = at(r)
    steady = (at(r * (1 - 1e-6)) - at(r * (1 + 1e-6))).abs() <= 1e-5 * (1 + known.abs())
    feasible = steady & (r * math.exp(ell0) < 1)
    return bool((known - table)[feasible].abs().max() <= max(1e-9, tol) * max(1.0, float(known[feasible].abs().max())))


_READABLE = frozenset({tau_pos, tau_neg, beta})
"""The constants :func:`_read_off` solves for when the caller did not declare them: SAPO's temperatures (KL-Cov's beta is tried
and refused: its weight does not hold it)."""


def _match_per_token(tables: dict, values: dict, tol: float = TOL) -> tuple[str, ...]:
    r"""Every known form whose bounds move with :math:`\pi_0` (DPPO, the TV band) and whose weight, with the constants ``values``, equals
    the tabulated one at both old log-probabilities of ``tables`` (``{ell0: {sign: w}}``), off the known weight's own jumps.

    Every constant of the form must be in ``values`` (read off the clip ranges by the caller); a penalty's coefficient is 0 here
    (the caller reads the weight without the penalty).  A ratio past :math:`1/\pi_0` (a probability above 1) is not compared.
    """
    found: list[str] = []
    for method in known_methods():
        given = {**values, **{p: 0.0 for p in method.parameters if p == tau_k2}}
        if not method.per_token or not method.parameters <= set(given):
            continue
        ok = all(_agrees_per_token(method.weight, w[sign], sign, ell0, given, tol) for ell0, w in tables.items() for sign in (1, -1))
        if ok:
            found.append(method.method)
    return tuple(found)


def _read_off(method, w: dict, values: dict) -> dict | None:
    r"""The constants of ``method`` that ``values`` leaves undeclared, read off the tabulated weight; ``None`` if one cannot be.

    For each sign of :math:`A`, the registry's weight at :math:`r = 2` with
    the declared constants must hold at most one undeclared constant; it is
    solved for so that the weight equals the table there (SAPO's
    :math:`\tau_+` from :math:`A > 0`, :math:`\tau_-` from :math:`A < 0`).  The match
    then checks the weight with these values on the whole grid, so a value read
    off a method that is not the function's names nothing.  A constant the
    weight does not hold (KL-Cov's :math:`\beta`) cannot be read: ``None``.
    """
    missing = method.parameters - set(values)
    i = int((_GRID - 2).abs().argmin())
    out = {}
    for sign in (1, -1):
        expr = method.weight_at(float(_GRID[i]), sign, values)
        free = expr.free_symbols & missing
        if len(free) > 1 or expr.free_symbols - free:
            return None
        if free:
            (p,) = free
            try:
                out[p] = float(sp.nsolve(expr - float(w[sign][i]), p, 1.0, prec=30))
            except (ValueError, ZeroDivisionError, TypeError):  # no root near 1: not this method
                return None
    return out if set(out) == missing and all(v > 0 for v in out.values()) else None


_PROBES = tuple(int(i) for i in torch.linspace(10, len(_GRID) - 10, 7))
"""Indices into :data:`_GRID` of the ratios the cheap probe of :func:`_match` reads."""


def _disagreements(method, w: dict, values: dict, tol: float = TOL) -> int:
    """How many of the :data:`_PROBES` ratios disagree (for either sign of A), counted up to 4: more than 3 rules the method out."""
    count = 0
    for i in _PROBES:
        count += any(_probe_disagrees(method, w, values, i, s, tol) for s in (1, -1))
        if count > 3:
            break
    return count


def _probe_disagrees(method, w: dict, values: dict, i: int, sign: int, tol: float = TOL) -> bool:
    known = _in_floats(method)(float(_GRID[i]), float(sign), *(float(values.get(c, math.nan)) for c in _PROBE_CONSTANTS))
    return not abs(float(known) - float(w[sign][i])) <= max(1e-9, tol) * max(1.0, abs(float(known)))


_PROBE_CONSTANTS = tuple(c for c in CONSTANTS if c not in (vespo_k, vespo_lam))
"""The constants a known weight is probed with (VESPO's per-sign k, lambda are no token form's)."""


@cache
def _in_floats(method):
    r"""A known method's derived weight as a float function of :math:`(r, A, \text{constants})`: the probe of :func:`_match` evaluates
    it without SymPy (deriving each known weight once per process); the match itself then compares the whole table exactly."""
    w = sp.sympify(method.weight).subs(gw.ell, gw.ell0 + sp.log(gw.r)).subs(gw.ell0, -0.5)
    return sp.lambdify((gw.r, gw.A, *_PROBE_CONSTANTS), w, modules=["math"])
