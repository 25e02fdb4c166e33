r"""Checking a new variant in numbers: callables evaluated, verdicts confirmed exactly on the toy LM.

:func:`derivations.variants.check_group_advantage` and
:func:`derivations.variants.check_token_loss` call into this module to

* evaluate a trainer's callable (numpy or torch) on reward patterns
  (:func:`advantage_values`) after checking its shape, finiteness and
  permutation equivariance (:func:`require_advantage_callable`);
* confirm every symbolic verdict against exact numbers: the group engine
  :func:`numeric.exact_group_gradient` on :class:`~numeric.TinyLM` at
  :math:`G = 2..8` (or the given :math:`G`), and autograd on TinyLM's tokens
  for token losses.  A disagreement raises
  :class:`derivations.variants.SymbolicNumericMismatch`.

Everything is computed in float64, passed explicitly; nothing global is changed.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable

import mpmath
import numpy as np
import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations import variants as derived
from derivations.group_baselines import GRAD_J, GRAD_P, P
from derivations.iid_groups import Expect
from derivations.methods import FORMS, METHODS

from ._validate import like, require_finite, require_int, to_tensor
from .checks import check, suite
from .expectations import expected_score_sum
from .gradient_weights import gradient_weight as _known_weight_numeric
from .group_baselines import exact_group_gradient
from .tinylm import TinyLM, default_reward, perturb, token_score_tensor


def _form_parameters(form: str, values: dict) -> dict:
    """The policy_loss parameters that select the registry form ``form``, at the constants ``values`` ({eps_l, eps_h, c: number})."""
    f = FORMS[form]
    taken = METHODS[f.method].parameters
    params = {k: values[sym] for k, sym in (("eps_low", gw.eps_l), ("eps_high", gw.eps_h)) if k in taken}
    params.update({k: (None if v is None else values[v]) for k, v in f.options.items()})
    return params


__all__ = [
    "advantage_values",
    "confirm_group",
    "confirm_token",
    "openrlhf_rloo_advantages",
    "require_advantage_callable",
    "token_report_from_callable",
    "trl_grpo_advantages",
    "verl_dr_grpo_advantages",
]

F64 = torch.float64
TOL = 1e-12
"""Relative tolerance of the exact comparisons (fp64)."""


# ------------------------------------------------------------------ callables


def _call(fn: Callable, rewards: np.ndarray) -> np.ndarray:
    """``fn`` on a float64 ``[B, G]`` batch: numpy first, then torch; the output as float64 numpy."""
    errors = []
    for make in (lambda x: x.copy(), lambda x: torch.tensor(x, dtype=F64)):
        try:
            out = fn(make(rewards))
        except Exception as err:  # the callable may accept only one of the two kinds
            errors.append(f"{type(err).__name__}: {err}")
            continue
        if isinstance(out, torch.Tensor):
            out = out.detach().to("cpu", F64).numpy()
        try:
            out = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"advantage must return an array or tensor of numbers, got {type(out).__name__}") from None
        if out.shape != rewards.shape:
            raise ValueError(f"advantage must return the shape of its input {tuple(rewards.shape)} ([..., G] advantages), got {tuple(out.shape)}")
        if not np.isfinite(out).all():
            bad = rewards[~np.isfinite(out).all(-1)][0].tolist()
            raise ValueError(f"advantage must return finite values, got a non-finite one for the group {bad}")
        _require_rows_independent(fn, make, rewards, out)
        return out
    raise TypeError("advantage could not be called on a float64 numpy array or torch tensor of rewards [B, G]: " + "; ".join(errors))


def _require_rows_independent(fn: Callable, make: Callable, rewards: np.ndarray, out: np.ndarray) -> None:
    """Each row of ``[B, G]`` must be its own group: the first, a middle and the last row, evaluated alone, give the same advantages."""
    if len(rewards) < 2:
        return
    for k in sorted({0, len(rewards) // 2, len(rewards) - 1}):
        alone = fn(make(rewards[k:k + 1]))
        alone = alone.detach().to("cpu", F64).numpy() if isinstance(alone, torch.Tensor) else np.asarray(alone, dtype=np.float64)
        if alone.shape != (1, rewards.shape[1]) or not np.allclose(alone[0], out[k], rtol=1e-12, atol=1e-12):
            raise ValueError(
                "advantage must treat each row of its [B, G] input as one group, but the advantages of the group "
                f"{rewards[k].tolist()} change with the other rows of the batch (a batch-level normalisation, as GPG's "
                "B/|valid| or whitening over the batch); check it one group at a time, e.g. "
                "lambda r: torch.cat([f(g[None]) for g in r])"
            )


def _require_report(name: str, report, kind: type):
    if not isinstance(report, kind):
        raise TypeError(f"{name} must be a {kind.__name__} (from derivations.variants), got {type(report).__name__}")
    return report


def _require_advantage(advantage):
    if not (callable(advantage) or isinstance(advantage, sp.Expr)):
        raise TypeError(f"advantage must be a sympy expression or a callable, got {type(advantage).__name__}")
    return advantage


def _groups(rewards) -> tuple[torch.Tensor, str]:
    """``[..., G]`` finite rewards (numpy or torch), ``G >= 2``, and the caller's kind."""
    t, kind = to_tensor("rewards", rewards)
    if t.ndim < 1 or t.shape[-1] < 2:
        raise ValueError(f"rewards must have shape [..., G] with G >= 2 answers per group, got {tuple(t.shape)}")
    return require_finite("rewards", t), kind


def advantage_values(fn: Callable, groups, G: int) -> list[float]:
    """Answer 1's advantage in each of ``groups`` (lists of ``G`` rewards), evaluated in one batch.

    Examples
    --------
    >>> from numeric import rloo_advantages
    >>> from numeric.variants import advantage_values
    >>> advantage_values(rloo_advantages, [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], 3)
    [1.0, -1.0]
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    G = require_int("G", G, minimum=2)
    if not isinstance(groups, (list, tuple)) or not groups or not all(isinstance(g, (list, tuple)) and len(g) == G for g in groups):
        raise ValueError(f"groups must be a non-empty list of lists of G = {G} rewards, got {groups!r}")
    if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for g in groups for x in g):
        raise TypeError(f"groups must hold real numbers, got {groups!r}")
    batch = np.array(groups, dtype=np.float64)
    if not np.isfinite(batch).all():
        raise ValueError("groups must hold finite rewards")
    return _call(fn, batch)[:, 0].tolist()


def require_advantage_callable(fn, G: int) -> None:
    """Refuse a callable that fails on ``[B, G]`` rewards, changes the shape, returns non-finite values, or is not permutation-equivariant.

    Equivariance is checked on 64 random groups (fixed seed), integer and real
    rewards, each under a random relabelling of the answers, to 1e-12.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.variants import require_advantage_callable
    >>> require_advantage_callable(lambda r: r - r[..., :1], 4)
    Traceback (most recent call last):
    ...
    derivations.variants.NotPermutationEquivariant: advantage is not permutation-equivariant: ...
    """
    if not callable(fn):
        raise TypeError(f"fn (the advantage) must be callable, got {type(fn).__name__}")
    G = require_int("G", G, minimum=2)
    rng = np.random.default_rng(0)
    rewards = np.concatenate([rng.integers(0, 3, (32, G)).astype(np.float64), rng.normal(size=(32, G))])
    out = _call(fn, rewards)
    for _ in range(3):
        perm = rng.permutation(G)
        moved = _call(fn, rewards[:, perm])
        if np.abs(moved - out[:, perm]).max() > TOL * max(1.0, np.abs(out).max()):
            raise derived.NotPermutationEquivariant(
                "advantage is not permutation-equivariant: relabelling the answers "
                f"(permutation {perm.tolist()}) changes the advantages beyond relabelling them"
            )


# ------------------------------------------------------------------ the toy LM and its reward laws


def _lm() -> TinyLM:
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
    A1 = derived._explicit(sp.sympify(expr).subs(constants), G)
    f = sp.lambdify([derived.R[k + 1] for k in range(G)], A1, modules=[{"Max": np.maximum, "Min": np.minimum}, "numpy"])

    def advantages(rewards):
        r = torch.as_tensor(rewards, dtype=F64)
        cols = []
        for i in range(G):
            order = [i, *[k for k in range(G) if k != i]]
            out = f(*[r[..., k].numpy() for k in order])
            cols.append(np.broadcast_to(np.asarray(out, dtype=np.float64), r.shape[:-1]))
        return torch.from_numpy(np.stack(cols, -1).copy())

    return advantages


def _moment(lm, theta, R, mono) -> object:
    """A moment of one answer on the toy LM: E[R^d s] as a [P] vector, E[R^d] as a number."""
    d = int(sp.degree(mono, derived._R_PLAIN))
    if mono.has(derived._S_PLAIN):
        return expected_score_sum(lm, theta, R**d)
    return float(lm.probs(theta) @ R**d)


def _predicted(report, lm, theta, R, G: int, constants: dict, law) -> torch.Tensor:
    """c grad J + residual of the report, in numbers on the toy LM."""
    total = report.scale * GRAD_J + report.residual
    total = total.xreplace({derived.G_SYMBOL: G}).subs(constants)
    p = lm.probs(theta)
    vectors = {GRAD_J: expected_score_sum(lm, theta, R), GRAD_P: expected_score_sum(lm, theta, R)}
    numbers = {P: sp.Rational(float(p @ R))}
    if law not in ("general", "binary"):
        values = torch.tensor([float(v) for v in law], dtype=F64)
        for k, v in enumerate(values):
            numbers[sp.Symbol(f"q_{k + 1}", positive=True)] = sp.Rational(float(p @ (R == v).to(F64)))
    for e in total.atoms(Expect):
        arg = e.args[0]
        if arg.has(derived._S_PLAIN):
            vectors[e] = _moment(lm, theta, R, arg)
        elif arg.is_polynomial(derived._R_PLAIN) and not arg.atoms(sp.Indexed):
            numbers[e] = sp.Rational(_moment(lm, theta, R, arg))
        else:
            numbers[e] = sp.Rational(_others_expectation(arg, lm, theta, R, constants))
    out = torch.zeros(lm.P, dtype=F64)
    present = [v for v in vectors if total.has(v)]
    if total.xreplace({v: 0 for v in present}) != 0:
        raise derived.SymbolicNumericMismatch(f"cannot read {total} as a combination of gradients")
    stand_ins = {v: sp.Dummy("g") for v in present}
    linear = total.xreplace(stand_ins)
    for v in present:  # linear in the gradients; no expansion (it would cancel digits of fp64 coefficients)
        coeff = sp.sympify(linear.xreplace({d: sp.Integer(int(w == v)) for w, d in stand_ins.items()}))  # linear: set this gradient to 1, the others to 0
        names = sorted(coeff.free_symbols & set(numbers), key=str) + sorted(coeff.atoms(Expect) & set(numbers), key=str)
        hidden = {e: sp.Dummy() for e in names}
        f = sp.lambdify(list(hidden.values()), coeff.xreplace(hidden), "mpmath")
        with mpmath.workdps(30):  # exact inputs, 30 digits: no cancellation
            out += float(f(*[mpmath.mpf(sp.Rational(numbers[e]).p) / sp.Rational(numbers[e]).q for e in names])) * vectors[v]
    return out


def _others_expectation(h, lm, theta, R, constants) -> float:
    """E[h(R_2, ..., R_G)] over the toy LM's reward law, by enumerating the answers h names."""
    p = lm.probs(theta)
    values, inverse = torch.unique(R, return_inverse=True)
    q = torch.zeros_like(values).index_add_(0, inverse, p)
    names = sorted(h.atoms(sp.Indexed), key=sp.default_sort_key)
    f = sp.lambdify(names, h.subs(constants), modules=[{"Max": max, "Min": min}, "math"])
    total = 0.0
    for combo in np.ndindex(*[values.numel()] * len(names)):
        total += math.prod(float(q[k]) for k in combo) * float(f(*[float(values[k]) for k in combo]))
    return total


def confirm_group(report, advantage, constants: dict):
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
    _require_report("report", report, derived.GroupReport)
    constants = derived._constants(constants)
    if report.verdict == "undecided":
        return report
    _require_advantage(advantage)
    lm = _lm()
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
            raise derived.SymbolicNumericMismatch(
                f"G = {G}: the symbolic expected update and the exact one on the toy LM differ by {gap:.3g} "
                f"(verdict {report.verdict}, c = {report.scale})"
            )
    return dataclasses.replace(report, numeric=tuple(rows))


# ------------------------------------------------------------------ token losses


DEFAULT_CONSTANTS = {gw.eps_l: 0.2, gw.eps_h: 0.28, gw.c: 3.0}
"""Values of the clip constants used when none are given."""

_RELATIONS = {sp.StrictLessThan: torch.lt, sp.LessThan: torch.le, sp.StrictGreaterThan: torch.gt, sp.GreaterThan: torch.ge}


def _torch_value(expr, env: dict):
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
            v, c_ = _torch_value(value, env), _torch_value(cond, env)
            out = v if c_ is True else torch.where(torch.as_tensor(c_), v, out)
        return out
    args = [_torch_value(a, env) for a in expr.args]
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


def _tokens(seed: int = 0):
    """TinyLM tokens with old and new log-probabilities far apart and advantages of both signs."""
    lm = TinyLM(V=3, L=3, seed=seed)
    old = lm.theta0
    theta = perturb(old, 1.5, seed=seed + 5).requires_grad_(True)
    gen = torch.Generator().manual_seed(seed)
    adv = torch.randn(lm.N, lm.L, generator=gen, dtype=F64)
    return lm, old, theta, adv


def _values(constants: dict) -> dict:
    return {**DEFAULT_CONSTANTS, **constants}


def _near_kink(ratio: torch.Tensor, breaks: list, values: dict) -> torch.Tensor:
    near = torch.zeros_like(ratio, dtype=torch.bool)
    for b in breaks:
        near |= (ratio - float(sp.sympify(b).subs(values))).abs() < 1e-6
    return near


def confirm_token(report, loss, constants: dict):
    r"""The report with autograd on TinyLM's tokens: :math:`\nabla_\theta \sum_t \mathrm{loss}_t = -\sum_t w_t A_t \nabla_\theta\log\pi_t`.

    The loss is evaluated on every token of ``TinyLM(V=3, L=3)`` with
    :math:`\theta` perturbed away from :math:`\theta_{\text{old}}` (ratios on
    both sides of every clip) and normal advantages; tokens within 1e-6 of a
    kink are left out.  Raises :class:`~derivations.variants.SymbolicNumericMismatch`
    above 1e-12.
    """
    _require_report("report", report, derived.TokenReport)
    if not isinstance(loss, sp.Expr):
        raise TypeError(f"loss must be a scalar sympy expression (one token's loss), got {type(loss).__name__}")
    values = _values(derived._constants(constants))
    lm, old, theta, adv = _tokens()
    ell = lm.token_logprobs(theta)
    ell0 = lm.token_logprobs(old).detach()
    ratio = torch.exp(ell - ell0)
    env = {gw.ell: ell, gw.ell0: ell0, gw.r: ratio, gw.A: adv, **{k: torch.tensor(v, dtype=F64) for k, v in values.items()}}
    keep = lm.mask.bool() & ~_near_kink(ratio.detach(), derived._breakpoints(loss), values)
    per_token = _torch_value(loss, env)
    total = torch.where(keep, per_token, torch.zeros_like(per_token)).sum()
    (grad,) = torch.autograd.grad(total, theta)
    wenv = {gw.ell: ell.detach(), gw.ell0: ell0, gw.r: ratio.detach(), gw.A: adv, **{k: torch.tensor(v, dtype=F64) for k, v in values.items()}}
    w = _torch_value(report.weight, wenv)
    w = torch.broadcast_to(torch.as_tensor(w, dtype=F64), adv.shape)
    predicted = torch.einsum("nl,nlp->p", torch.where(keep, -w * adv, torch.zeros_like(adv)), token_score_tensor(lm, theta.detach()))
    gap = float((grad - predicted).abs().max())
    if not gap <= TOL * max(1.0, float(grad.abs().max())):
        raise derived.SymbolicNumericMismatch(f"the derived weight and autograd on TinyLM's tokens differ by {gap:.3g}")
    return dataclasses.replace(report, numeric=(int(keep.sum()), gap))


_GRID = torch.cat([torch.logspace(-2, 2, 161, dtype=F64), torch.tensor([1.0], dtype=F64)]).unique()


def _callable_weight(fn, ratio: torch.Tensor, adv: torch.Tensor, ell0: float) -> torch.Tensor:
    old = torch.full_like(ratio, ell0)
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
    return -g / adv


def token_report_from_callable(fn, constants: dict):
    r"""A :class:`~derivations.variants.TokenReport` for a torch loss by autograd on a dense grid.

    :math:`w = -(\partial\,\mathrm{loss}/\partial\ell)/A` for :math:`r` on 162
    log-spaced points in :math:`[10^{-2}, 10^2]` (and 1), :math:`A = \pm 1`,
    at two old log-probabilities (:math:`\ell_0 = -0.5, -2`): a weight that
    changes with :math:`\ell_0` at a fixed ratio is not a policy gradient.
    Bounded means: :math:`|w|` does not grow over the last decade of the grid.
    """
    if not callable(fn):
        raise TypeError(f"fn (the loss) must be callable, got {type(fn).__name__}")
    values = _values(derived._constants(constants))
    r = _GRID
    w = {s: _callable_weight(fn, r, torch.full_like(r, float(s)), -0.5) for s in (1, -1)}
    other = {s: _callable_weight(fn, r, torch.full_like(r, float(s)), -2.0) for s in (1, -1)}
    is_pg = all(bool((w[s] - other[s]).abs().max() <= 1e-9) for s in (1, -1))
    table = tuple((float(x), float(a), float(b)) for x, a, b in zip(r, w[1], w[-1]))
    silenced = tuple(run for s in (1, -1) for run in _runs(s, r, w[s].abs() < 1e-12))
    top = r >= 10
    bounded = {s: bool(w[s][top].abs().max() <= 1.0001 * w[s][(r >= 1) & (r <= 10)].abs().max() + 1e-12) for s in (1, -1)}
    one = int((r - 1).abs().argmin())
    on_policy = all(abs(float(w[s][one]) - 1) <= 1e-12 for s in (1, -1))
    matches = None
    if is_pg:
        for method, label in derived._KNOWN.items():
            breaks = [float(sp.sympify(b).subs(values)) for b in derived._breakpoints(derived._known_weight(method))] if method != "reinforce" else []
            away = torch.ones_like(r, dtype=torch.bool)
            for b in breaks:
                away &= (r - b).abs() > 1e-6
            ok = True
            for s in (1, -1):
                known = torch.ones_like(r) if method == "reinforce" else torch.as_tensor(_known_weight_numeric(
                    FORMS[method].method, r, torch.full_like(r, float(s)), **_form_parameters(method, values)), dtype=F64)
                ok &= bool((known - w[s])[away].abs().max() <= 1e-12)
            if ok:
                matches = label
                break
    numeric = _callable_on_tokens(fn)
    reason = f"weight tabulated by autograd on {len(r)} ratios in [0.01, 100] for A = +1 and -1" + (
        "" if is_pg else "; it changes with ell_0 at a fixed ratio: not a policy gradient") + (f"; the weight of {matches}" if matches else "")
    return derived.TokenReport(None, silenced, bounded, on_policy, is_pg, matches, None, reason, table, numeric)


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


def _callable_on_tokens(fn) -> tuple:
    """The callable is per-token (each token's loss alone equals its entry of the batched loss), and autograd through TinyLM is the chain rule."""
    lm, old, theta, adv = _tokens()
    ell = lm.token_logprobs(theta)
    ell0 = lm.token_logprobs(old).detach()
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
    if not gap <= TOL * max(1.0, float(grad.abs().max())):
        raise ValueError(f"loss must be per-token (elementwise): its batched and one-token values or gradients differ by {gap:.3g}")
    return (int(mask.sum()), gap)


# ------------------------------------------------------------------ the suite


def trl_grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """TRL's GRPO convention: ``(r - mean) / (std + 1e-4)`` over each group, ``torch.std`` (Bessel).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants import openrlhf_rloo_advantages, trl_grpo_advantages, verl_dr_grpo_advantages
    >>> r = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    >>> [f(r).round(decimals=4).tolist() for f in (trl_grpo_advantages, verl_dr_grpo_advantages, openrlhf_rloo_advantages)]
    [[[0.8659, -0.8659, -0.8659, 0.8659]], [[0.5, -0.5, -0.5, 0.5]], [[0.6667, -0.6667, -0.6667, 0.6667]]]
    """
    r, kind = _groups(rewards)
    return like(kind, (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1e-4))


def verl_dr_grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """verl's GRPO with ``norm_adv_by_std_in_grpo=False`` (Dr. GRPO): ``r - mean``."""
    r, kind = _groups(rewards)
    return like(kind, r - r.mean(-1, keepdim=True))


def openrlhf_rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """OpenRLHF's RLOO: ``r - (sum - r) / (n - 1)``."""
    r, kind = _groups(rewards)
    n = r.shape[-1]
    return like(kind, r - (r.sum(-1, keepdim=True) - r) / (n - 1))


def _worst(report) -> float:
    return max(row[3] for row in report.numeric)


@suite("variants")
def cross_checks() -> None:
    """The variant checker on TinyLM: every verdict confirmed by the exact group engine and by autograd."""
    from derivations.group_baselines import grpo_weight as exact_grpo_weight
    from derivations.iid_groups import IIDGroup

    from .group_baselines import group_zscore_advantages

    grp = IIDGroup()
    R, i = grp.R, grp.i
    loo = derived.check_group_advantage(R[i] - grp.mean_others(i))
    check("leave-one-out: 'unbiased' for symbolic G, exact engine agrees at G = 2..8", _worst(loo) + (loo.verdict != "unbiased"), TOL)
    mean = derived.check_group_advantage(R[i] - grp.mean())
    check("mean including self: 'scaled' by (G-1)/G, exact engine agrees at G = 2..8", _worst(mean) + (mean.verdict != "scaled"), TOL)
    others = [R[2], R[3], R[4]]
    worst = 0.0
    for baseline in (sp.Max(*others), sum(others) - sp.Max(*others) - sp.Min(*others)):
        rep = derived.check_group_advantage(R[1] - baseline, G=4)
        worst = max(worst, _worst(rep) + (rep.verdict != "unbiased"))
    check("max and median of the others (G = 4, four-valued reward): 'unbiased', confirmed", worst, TOL)
    mixed = derived.check_group_advantage(R[i] - (R[i] ** 2 / 2 + grp.mean_others(i)))
    check("a baseline with R_i^2 / 2: 'biased' along E[R^2 s], confirmed on a four-valued reward", _worst(mixed) + (mixed.verdict != "biased"), TOL)

    p = float(_lm().probs(_lm().theta0) @ default_reward(_lm()))
    for std in ("population", "bessel"):
        worst = 0.0
        for G in range(2, 17) if std == "population" else (2, 3, 4, 8, 16):
            rep = derived.check_group_advantage(partial_zscore(group_zscore_advantages, std), G=G, rewards="binary")
            closed = float(sp.N(exact_grpo_weight(G, std).subs(P, sp.Rational(p)), 30))
            worst = max(worst, _worst(rep), abs(float(sp.N(rep.scale.subs(P, sp.Rational(p)), 30)) - closed))
        check(f"GRPO z-score ({std} std) as a callable, G = {'2..16' if std == 'population' else '2, 3, 4, 8, 16'}: c(p) = the closed form w(p, G), engine agrees", worst, TOL)

    trainers = {"TRL GRPO (Bessel std, eps = 1e-4 outside)": (trl_grpo_advantages, "reweighted"),
                "verl Dr. GRPO (no std)": (verl_dr_grpo_advantages, "scaled"),
                "OpenRLHF RLOO": (openrlhf_rloo_advantages, "unbiased")}
    for name, (fn, verdict) in trainers.items():
        worst = 0.0
        for G in (4, 8):
            rep = derived.check_group_advantage(fn, G=G, rewards="binary")
            worst = max(worst, _worst(rep) + (rep.verdict != verdict))
        check(f"trainer function {name}: '{verdict}' at G = 4, 8, confirmed", worst, TOL)

    mismatches = 0
    worst = 0.0
    for method, label in (("ppo", "PPO"), ("ppo_dual_clip", "dual-clip PPO"), ("cispo_cap", "CISPO"), ("is", "token IS")):
        rep = derived.check_token_loss(gw.token_loss(method))
        mismatches += rep.matches != label
        worst = max(worst, rep.numeric[1])
    check("token losses PPO, dual-clip, CISPO, IS: recognised (mismatches)", mismatches, 0)
    check("token losses: derived weight == autograd on TinyLM's tokens", worst, TOL)
    look_alike = derived.check_token_loss(-sp.Min(gw.r, 1 + gw.eps_h) * gw.A * gw.ell)
    check("look-alike without sg: not a policy gradient (count of wrong flags)", int(look_alike.is_policy_gradient) + int(bool(look_alike.on_policy_at_ratio_one)), 0)


def partial_zscore(fn, std: str) -> Callable:
    return lambda rewards: fn(rewards, eps=0.0, std=std)
