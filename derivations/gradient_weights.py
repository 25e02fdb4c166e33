r"""Gradient weights of clipped surrogates, derived by differentiating the losses.

For one token with log-probability :math:`\ell = \log\pi_\theta(o_t\mid o_{<t})`,
old log-probability :math:`\ell_0`, ratio :math:`r = e^{\ell-\ell_0}` and
advantage :math:`A`, every method's per-token loss has a derivative of the form

.. math::

    \frac{\partial\,\mathrm{loss}}{\partial \ell} = -\,w(r, A)\, A,
    \qquad\text{so}\qquad
    \nabla_\theta\,\mathrm{loss} = -\,w(r, A)\, A\, \nabla_\theta \log\pi_\theta(o_t\mid o_{<t}).

The *gradient weight* :math:`w` is obtained here by differentiating each loss:

========================  ==================================================================
``ppo``                   :math:`-\min\bigl(rA,\ \mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h)A\bigr)`
``ppo_dual_clip``         for :math:`A < 0`: :math:`-\max\bigl(\min(rA, \mathrm{clip}(r)A),\ C_dA\bigr)`, :math:`C_d > 1+\varepsilon_h`
``cispo_cap``             :math:`-\,\mathrm{sg}\bigl(\min(r, 1+\varepsilon_h)\bigr)\, A\, \ell` (CISPO with ``eps_low=None``)
``is``                    :math:`-\,\mathrm{sg}(r)\, A\, \ell`
========================  ==================================================================

The losses are the forms of :data:`derivations.methods.FORMS`: PPO with and
without ``dual_clip``, CISPO with ``eps_low=None`` (the one-sided cap of
MiniMax-M1, where the paper leaves :math:`\varepsilon_l` unset), token IS.

**Stop-gradient.** :math:`\mathrm{sg}(x)` has the value of :math:`x` and zero
derivative.  The CAS models it by a fresh symbol: every :math:`\mathrm{sg}(x)`
is replaced by a new symbol, the loss is differentiated, and :math:`x` is
substituted back afterwards.

**Clipping.** ``diff`` of ``Min``/``Max`` leaves Heaviside terms undecided at
the kinks, so the losses are differentiated region by region: each open
interval of :math:`r` between the breakpoints (and each sign of :math:`A`) is
parametrised by positive symbols (for example :math:`r = (1+\varepsilon_h)(1+d)`,
:math:`d > 0`), every ``Min``/``Max`` is resolved by the sign of the factored
difference of its arguments, and the smooth piece left over is differentiated.

**Kink convention.** At a breakpoint the weight takes its value from the *live*
side (the side with a non-zero weight): the live sets are closed.  This is what
``torch.clamp`` does (it passes the gradient at the bound).  ``torch.minimum``
and ``torch.maximum`` split the gradient in half at a tie, so dual-clip PPO
written with ``torch.maximum`` gives :math:`c/2` at exactly :math:`r = c`.
Kinks have probability zero under a continuous perturbation; the numeric checks
stay off them.  At :math:`A = 0` the gradient vanishes whatever :math:`w` is;
the formulas use the :math:`A < 0` branch there.

References
----------
J. Schulman et al., "Proximal Policy Optimization Algorithms", arXiv:1707.06347 (2017).
Z. Shao et al., "DeepSeekMath" (GRPO), arXiv:2402.03300 (2024).
MiniMax, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning
Attention", arXiv:2506.13585 (2025), Sec. 3.1 (CISPO, Eq. 4-7).
D. Ye et al., "Mastering Complex Control in MOBA Games with Deep Reinforcement
Learning" (dual-clip PPO), AAAI (2020).
"""

from __future__ import annotations

from functools import cache, lru_cache

import sympy as sp

from .definitions import Definitions, Differentiation
from .derivation import Derivation, is_zero
from .methods import (  # the registry's symbols; sg: stop-gradient (d_dell holds it constant)
    FORMS,
    TOKEN_FORMS,
    A,
    c,
    ell,
    ell0,
    eps_h,
    eps_l,
    r,
    sg,
)
from .notation import latex
from .proofs import holds, limit_along, on_regions, same_solutions
from .regions import resolve

__all__ = [
    "METHODS",
    "differentiation",
    "gradient_weight",
    "look_alike_gradients",
    "on_policy_limit",
    "sign_flip",
    "silenced_set",
    "stop_gradient_semantics",
    "token_loss",
    "unified_mask",
    "weight_derivation",
    "weight_table",
]

METHODS = ("ppo", "ppo_dual_clip", "cispo_cap", "is")
"""The forms (:data:`derivations.methods.FORMS`) whose gradient weights are derived region by region, in the order of the table."""

_NAMES = {name: FORMS[name].label for name in METHODS}
_SUBSCRIPTS = {"ppo": r"\mathrm{PPO}", "ppo_dual_clip": r"\mathrm{dual}", "cispo_cap": r"\mathrm{CISPO}", "is": r"\mathrm{IS}"}

# positive symbols that parametrise the admissible constants and the regions
_m, _gamma, _a, _d = sp.symbols("m gamma a d", positive=True)
_CONSTANTS = {eps_l: 1 / (1 + _m), c: 1 + eps_h + _gamma}  # 0 < eps_l < 1, C_d > 1 + eps_h


def token_loss(method: str) -> sp.Expr:
    r"""The per-token loss of a token form (:data:`derivations.methods.FORMS`, minimised), in :math:`r = e^{\ell - \ell_0}`, :math:`\ell` and :math:`A`.

    .. math::

        \mathcal L_{\mathrm{PPO}} = -\min\bigl(rA, \mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h) A\bigr),
        \qquad
        \mathcal L_{\mathrm{CISPO}} = -\,\mathrm{sg}\bigl(\min(r, 1+\varepsilon_h)\bigr) A \ell,
        \qquad
        \mathcal L_{\mathrm{IS}} = -\,\mathrm{sg}(r) A \ell;

    dual-clip PPO takes :math:`\max(\cdot, C_dA)` of the PPO minimum when :math:`A < 0`.
    The forms of chapter 8 (:mod:`derivations.losses`) are read here too:

    .. math::

        \mathcal L_{\mathrm{REINFORCE}} = -A\ell,\quad
        \mathcal L_{\mathrm{CISPO}} = -\mathrm{sg}\bigl(\mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h)\bigr)A\ell,\quad
        \mathcal L_{\mathrm{SAPO}} = -\tfrac{4}{\tau}\,\operatorname{sigmoid}\bigl(\tau(r - 1)\bigr)A\ \ (\tau = \tau_+ \text{ if } A > 0 \text{ else } \tau_-);

    Clip-Cov's unselected token has PPO's loss and its selected one the loss 0;
    KL-Cov's is :math:`-rA`, plus :math:`\beta|\ell - \ell_0|` on a selected token.
    (:math:`A` is a number here: the advantage is detached in every loss.)
    This module derives the weights of :data:`METHODS` region by region; the
    others are :func:`derivations.losses.weight_derivation`'s.

    Examples
    --------
    >>> from derivations.gradient_weights import token_loss
    >>> token_loss("cispo_cap")
    -A*ell*sg(Min(r, varepsilon_h + 1))
    >>> token_loss("kl_cov_selected")
    -A*r + beta*Abs(ell - ell_0)
    """
    if method not in TOKEN_FORMS:
        raise ValueError(f"method must be one of {TOKEN_FORMS}, got {method!r}")
    return FORMS[method].loss()


def _method(method) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return method


differentiation = Differentiation(ell, held=(sg,), written=((r, sp.exp(ell - ell0)),))
r"""The kernel's rule for :math:`\partial/\partial\ell`: :math:`\mathrm{sg}` held constant, :math:`r = e^{\ell - \ell_0}` (the model of :func:`d_dell`)."""


def d_dell(expr: sp.Expr) -> sp.Expr:
    r""":math:`\partial/\partial\ell` with :math:`r = e^{\ell-\ell_0}` and :math:`\mathrm{sg}` held constant.

    Each :math:`\mathrm{sg}(x)` becomes a fresh symbol, the expression is
    differentiated, then :math:`x` is put back; :math:`e^{\ell-\ell_0}` is
    written :math:`r` again at the end.

    Examples
    --------
    >>> from derivations.gradient_weights import A, d_dell, ell, r, sg
    >>> d_dell(-sg(r) * A * ell), d_dell(-r * A * ell)
    (-A*r, -A*ell*r - A*r)
    """
    return differentiation.of(expr)


def _unfolding(definitions: dict) -> Definitions:
    r"""The definitions of the display names, then :data:`differentiation` for every derivative in :math:`\ell`."""
    return Definitions(definitions, differentiation)


# ----------------------------------------------------------------- regions


def _resolve(expr, point: dict):
    """``expr`` with every Min, Max and Piecewise replaced by the branch that holds at ``point`` (:func:`derivations.regions.resolve`)."""
    out = resolve(expr, _at(point), keep_variables=True)
    if out is None:
        raise ValueError(f"cannot decide a branch of {expr} at {point}")
    return out


def _breakpoints(method: str) -> list:
    return {"ppo": [1 - eps_l, 1 + eps_h], "ppo_dual_clip": [1 - eps_l, 1 + eps_h, c], "cispo_cap": [1 + eps_h], "is": []}[method]


def _regions(breaks: list) -> list[tuple]:
    """Open intervals ``(lo, hi)`` of ``r`` between the breakpoints, each with an interior point."""
    edges = [sp.Integer(0), *breaks, sp.oo]
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if lo == 0 and hi == sp.oo:
            inside = 1 + _d
        elif lo == 0:
            inside = hi / (1 + _d)
        elif hi == sp.oo:
            inside = lo * (1 + _d)
        else:
            inside = lo + (hi - lo) / (1 + _d)
        out.append((lo, hi, inside))
    return out


def _at(point: dict) -> dict:
    """``point`` with the admissible constants parametrised, as a substitution for a proof."""
    return {**{k: sp.sympify(v).subs(_CONSTANTS) for k, v in point.items()}, **_CONSTANTS}


def _region(sign, lo, hi) -> tuple:
    """The region ``sign(A)``, ``lo < r < hi`` as the conditions a step is claimed under."""
    conditions = [] if sign is None else [A > 0 if sign > 0 else A < 0]
    if lo != 0:
        conditions.append(r > lo)
    if hi != sp.oo:
        conditions.append(r < hi)
    return tuple(conditions)


def _admissible(method: str = "ppo_dual_clip") -> list:
    """The premises on the clip constants: :math:`\\varepsilon_l < 1` (and :math:`C_d > 1 + \\varepsilon_h` for dual-clip)."""
    return [eps_l < 1] + ([c > 1 + eps_h] if method == "ppo_dual_clip" else [])


def _region_latex(sign, lo, hi) -> str:
    a = "" if sign is None else ("A > 0,\\ " if sign > 0 else "A < 0,\\ ")
    lower = "0 < " if lo == 0 and hi == sp.oo else ("" if lo == 0 else latex(lo) + " < ")
    upper = "" if hi == sp.oo else " < " + latex(hi)
    return a + lower + "r" + upper


_SIGNS = ((1, sp.StrictGreaterThan(A, 0)), (-1, sp.StrictLessThan(A, 0)))


def weight_derivation(method: str) -> Derivation:
    r"""The gradient weight of ``method``, region by region: resolve the clip, then differentiate.

    For each sign of :math:`A` and each open interval of :math:`r`, two steps:
    the loss equals a smooth piece there, and the derivative of that piece in
    :math:`\ell` (stop-gradient held constant) is :math:`-A\,w`.  The first is
    proved by unfolding the loss's name into the loss itself and evaluating it
    at the region's interior point, written with positive symbols (every
    ``Min``/``Max`` decided by the sign of a factored difference): it holds on
    the whole region, and a piece read off the wrong region or the wrong sign
    of :math:`A` fails.

    Examples
    --------
    >>> from derivations.gradient_weights import weight_derivation
    >>> d = weight_derivation("ppo").verify()
    >>> len(d.steps), d.proved_by()
    (12, {'sign decided': 6, 'expand': 6})
    """
    loss = token_loss(_method(method))
    name = sp.Symbol(r"\mathcal{L}_{%s}" % _SUBSCRIPTS[method])
    d = Derivation(
        f"Gradient weight of {_NAMES[method]}",
        assumptions=[
            f"${latex(name)} = {latex(loss)}$",
            r"$r = e^{\ell - \ell_0}$",
            r"$\varepsilon_l, \varepsilon_h > 0$" + (r", $C_d > 0$" if method == "ppo_dual_clip" else ""),
            *_admissible(method),
            r"$\partial\,\mathrm{loss}/\partial\ell = -A\,w$",
            "on each region every min/max is decided by the sign of the difference of its arguments",
        ],
        unfold=_unfolding({name: loss}),
    )
    for sign, _ in _SIGNS:
        for lo, hi, inside in _regions(_breakpoints(method)):
            point = {r: inside, A: sign * _a}
            piece = _resolve(loss, point)
            d.step(name, piece, f"on ${_region_latex(sign, lo, hi)}$", proof=holds, given=_region(sign, lo, hi))
            w = sp.factor(-d_dell(piece) / A)
            d.step(sp.Derivative(piece, ell), -A * w, r"differentiate, $\mathrm{sg}$ held constant")
    return d


@cache
def _pieces(method: str) -> dict[int, list[tuple]]:
    """``{sign of A: [(lo, hi, w), ...]}`` read off the verified derivation."""
    d = weight_derivation(method).verify()
    steps = iter(d.steps[1::2])
    out = {}
    for sign, _ in _SIGNS:
        out[sign] = [(lo, hi, sp.factor(-next(steps).rhs / A)) for lo, hi, _ in _regions(_breakpoints(method))]
    return out


def merged_runs(pieces: list[tuple]) -> list[tuple]:
    """Consecutive regions whose weights are equal (by the canonicaliser, not only in form) merged into one ``(lo, hi, w)``."""
    out: list[tuple] = []
    for lo, hi, w in pieces:
        if out and is_zero(out[-1][2] - w) is not None:
            out[-1] = (out[-1][0], hi, out[-1][2])
        else:
            out.append((lo, hi, w))
    return out


def _merged_conditions(pieces: list[tuple]) -> list[tuple]:
    """``(w, condition on r)`` with equal neighbours merged; each kink given to its live (non-zero) side."""
    merged = merged_runs(pieces)
    out = []
    for i, (_, hi, w) in enumerate(merged):
        if hi == sp.oo:
            out.append((w, sp.true))
        else:
            closed = w != 0 or merged[i + 1][2] == 0
            out.append((w, sp.LessThan(r, hi) if closed else sp.StrictLessThan(r, hi)))
    return out


def piecewise_weight(pieces: dict[int, list[tuple]]) -> sp.Piecewise:
    """One ``Piecewise`` in :math:`(A, r)` from ``{sign of A: [(lo, hi, w), ...]}``; ``A`` appears only if the signs differ."""
    pos, neg = _merged_conditions(pieces[1]), _merged_conditions(pieces[-1])
    if pos == neg:
        return sp.Piecewise(*pos)
    return sp.Piecewise(*[(w, sp.And(A > 0, cond)) for w, cond in pos], *neg)


def gradient_weight(method: str) -> sp.Piecewise:
    r"""The gradient weight :math:`w(r, A)` of ``method`` as a ``Piecewise``, from :func:`weight_derivation`.

    .. math::

        &w_{\mathrm{PPO}} = r\,\mathbb 1\bigl[(A>0,\ r \le 1+\varepsilon_h) \lor (A<0,\ r \ge 1-\varepsilon_l)\bigr], \\
        &w_{\mathrm{CISPO}} = \min(r, 1+\varepsilon_h), \qquad w_{\mathrm{IS}} = r.

    Examples
    --------
    >>> from derivations.gradient_weights import A, eps_h, eps_l, gradient_weight, r
    >>> gradient_weight("cispo_cap")
    Piecewise((r, r <= varepsilon_h + 1), (varepsilon_h + 1, True))
    >>> w = gradient_weight("ppo").subs({eps_l: 0.2, eps_h: 0.28})
    >>> [w.subs({A: a, r: x}) for a in (1, -1) for x in (0.5, 1.0, 2.0)]
    [0.500000000000000, 1.00000000000000, 0, 0, 1.00000000000000, 2.00000000000000]
    """
    return piecewise_weight(_pieces(_method(method)))


def unified_mask() -> sp.Piecewise:
    r"""The MiniMax-M1 token mask (their Eq. 7).

    .. math::

        M = \begin{cases} 0 & A > 0,\ r > 1+\varepsilon_h \text{ or } A < 0,\ r < 1-\varepsilon_l,\\ 1 & \text{otherwise.}\end{cases}

    Examples
    --------
    >>> from derivations.gradient_weights import A, eps_h, eps_l, r, unified_mask
    >>> M = unified_mask().subs({eps_l: 0.2, eps_h: 0.28})
    >>> [M.subs({A: a, r: x}) for a in (1, -1) for x in (0.5, 1.0, 2.0)]
    [1, 1, 0, 0, 1, 1]
    """
    return sp.Piecewise((0, ((A > 0) & (r > 1 + eps_h)) | ((A < 0) & (r < 1 - eps_l))), (1, True))


def silenced_set() -> Derivation:
    r"""PPO's silenced tokens are exactly the MiniMax-M1 mask's zeros; the unified form reproduces PPO.

    The unified loss :math:`-\mathrm{sg}(\hat r)\, A\, \ell\, M` with :math:`\hat r = r`
    has weight :math:`r M`; it equals :math:`w_{\mathrm{PPO}}` on every region
    and at every kink, so (as :math:`r > 0`, and for :math:`A \ne 0`) :math:`\{w_{\mathrm{PPO}} = 0\} = \{M = 0\}`.

    Examples
    --------
    >>> from derivations.gradient_weights import silenced_set
    >>> silenced_set().verify().verified
    True
    """
    M = unified_mask()
    w_ppo = gradient_weight("ppo")
    rhat = sp.Symbol(r"\hat{r}", positive=True)
    M_, w_ = sp.Symbol("M"), sp.Symbol(r"w_{\mathrm{PPO}}")
    unified = -sg(rhat) * A * ell * M_
    d = Derivation(
        "PPO's silenced set is the MiniMax-M1 mask",
        assumptions=[f"$M = {latex(M)}$", r"$M$ is held constant", r"$w_{\mathrm{PPO}}$ as derived above",
                     r"at $A = 0$ the gradient vanishes whatever the weight, and $w$ takes its $A < 0$ branch", *_admissible()],
        unfold=_unfolding({M_: M, w_: w_ppo}),
    )
    d.step(sp.Derivative(unified, ell), -A * rhat * M_, r"differentiate the unified loss")
    d.step(-A * r * M_, -A * w_, r"$\hat r = r$; equal on every region and at every kink",
           proof=on_regions((A, [0]), (r, _breakpoints("ppo_dual_clip")), label="every region and kink"))
    d.step(sp.Eq(w_, 0), sp.Eq(M_, 0), r"$A \ne 0$: $w_{\mathrm{PPO}} = r M$ and $r > 0$; on every region and kink",
           relation="<=>", proof=on_regions((A, [0]), (r, _breakpoints("ppo_dual_clip")), label="every region and kink, A ≠ 0"), given=(sp.Ne(A, 0),))
    return d


def on_policy_limit() -> Derivation:
    r"""CISPO with :math:`\varepsilon_h = \infty` is token IS; at :math:`\theta_{\text{old}}` every weight is 1.

    At :math:`\theta = \theta_{\text{old}}` every ratio is :math:`r = 1`, inside
    every clip range, so all methods give :math:`-A\,\nabla\log\pi`: the
    on-policy policy gradient.

    Examples
    --------
    >>> from derivations.gradient_weights import on_policy_limit
    >>> d = on_policy_limit().verify()
    >>> len(d.steps)
    5
    """
    w = {m: gradient_weight(m) for m in METHODS}
    d = Derivation("CISPO without a clip, and every method at the old policy", assumptions=_admissible())
    d.step(sp.Limit(w["cispo_cap"], eps_h, sp.oo), w["is"], r"$r \le 1 + \varepsilon_h$ eventually, for every $r$",
           proof=limit_along(eps_h, r))
    each_sign = on_regions((A, [0]), label="each sign of A")
    for m in METHODS:
        d.step(sp.Subs(w[m], r, 1), sp.Integer(1), f"{_NAMES[m]} at $r = 1$ (every sign of $A$)", proof=each_sign)
    return d


@cache  # a str: nothing mutable is shared
def weight_table() -> str:
    r"""The table of live and silenced regions: :math:`w(r, A)` per method, as a LaTeX array.

    Rows are the signs of :math:`A` and the open intervals of :math:`r` between
    :math:`1-\varepsilon_l < 1+\varepsilon_h < c`; each entry is read off the
    derived ``Piecewise`` at an interior point of the row's region.

    Examples
    --------
    >>> from derivations.gradient_weights import weight_table
    >>> print(weight_table().splitlines()[1])
    \text{region} & \text{PPO/GRPO} & \text{dual-clip PPO} & \text{CISPO (one-sided)} & \text{token IS} \\ \hline
    """
    w = {m: gradient_weight(m) for m in METHODS}
    lines = [r"\begin{array}{l|cccc}", r"\text{region} & " + " & ".join(rf"\text{{{_NAMES[m]}}}" for m in METHODS) + r" \\ \hline"]
    for sign, _ in _SIGNS:
        for lo, hi, inside in _regions(_breakpoints("ppo_dual_clip")):
            point = {r: inside, A: sign * _a}
            cells = [_resolve(w[m], point) for m in METHODS]
            entries = [r"0\ (\text{silenced})" if x == 0 else latex(x) for x in cells]
            lines.append(_region_latex(sign, lo, hi) + " & " + " & ".join(entries) + r" \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)


# ----------------------------------------------------------- stop-gradient

_LOOK_ALIKES = {
    "a": -sg(sp.Min(r, 1 + eps_h)) * A * ell,
    "b": -sp.Min(r, 1 + eps_h) * A * ell,
    "c": -sp.Min(r, 1 + eps_h) * A,
}


def stop_gradient_semantics() -> Derivation:
    r"""Three look-alike losses, three gradients :math:`\partial\,\mathrm{loss}/\partial\ell`.

    .. math::

        &\text{(a)}\ -\mathrm{sg}(\min(r,1+\varepsilon))A\ell \to -A\min(r, 1+\varepsilon), \\
        &\text{(b)}\ -\min(r,1+\varepsilon)A\ell \to -A r(1+\ell)\ \text{on } r<1+\varepsilon, \\
        &\text{(c)}\ -\min(r,1+\varepsilon)A \to -A r\,\mathbb 1[r<1+\varepsilon].

    Here :math:`\varepsilon = \varepsilon_h`.

    Examples
    --------
    >>> from derivations.gradient_weights import stop_gradient_semantics
    >>> len(stop_gradient_semantics().verify().steps)
    12
    """
    names = {k: sp.Symbol(r"\mathcal{L}_{(%s)}" % k) for k in _LOOK_ALIKES}
    d = Derivation(
        "Stop-gradient semantics: three look-alike losses",
        assumptions=[f"${latex(names[k])} = {latex(v)}$" for k, v in _LOOK_ALIKES.items()] + [r"$r = e^{\ell-\ell_0}$"],
        unfold=_unfolding({names[k]: v for k, v in _LOOK_ALIKES.items()}),
    )
    for name, loss in _LOOK_ALIKES.items():
        for lo, hi, inside in _regions([1 + eps_h]):
            point = {r: inside}  # any A: the clip does not involve it
            piece = _resolve(loss, point)
            d.step(names[name], piece, f"on ${_region_latex(None, lo, hi)}$", proof=holds, given=_region(None, lo, hi))
            d.step(sp.Derivative(piece, ell), sp.factor(d_dell(piece)), r"differentiate, $\mathrm{sg}$ held constant")
    return d


def look_alike_gradients() -> dict[str, sp.Piecewise]:
    r""":math:`\partial\,\mathrm{loss}/\partial\ell` of the look-alike losses (a), (b), (c), as ``Piecewise`` in :math:`r, \ell, A`.

    Read off :func:`stop_gradient_semantics`; the kink :math:`r = 1+\varepsilon_h`
    goes to the unclipped side (the ``torch.clamp`` convention).

    Examples
    --------
    >>> from derivations.gradient_weights import look_alike_gradients
    >>> g = look_alike_gradients()
    >>> g["b"]
    Piecewise((-A*r*(ell + 1), r <= varepsilon_h + 1), (-A*(varepsilon_h + 1), True))
    >>> g["c"]
    Piecewise((-A*r, r <= varepsilon_h + 1), (0, True))
    """
    return dict(_look_alike_pieces())


@lru_cache(maxsize=1)
def _look_alike_pieces() -> tuple[tuple[str, sp.Piecewise], ...]:
    steps = stop_gradient_semantics().verify().steps[1::2]
    return tuple(
        (name, sp.Piecewise((steps[2 * i].rhs, r <= 1 + eps_h), (steps[2 * i + 1].rhs, True)))
        for i, name in enumerate(_LOOK_ALIKES)
    )


def sign_flip() -> Derivation:
    r"""Forgetting the stop-gradient flips a live token's gradient when :math:`\pi < 1/e`.

    At :math:`r = 1` the correct loss (a) has :math:`\partial/\partial\ell = -A`;
    loss (b) has :math:`-A(1+\ell)`.  Their ratio :math:`1+\ell` is negative
    exactly when :math:`\ell < -1`, i.e. :math:`\pi = e^{\ell} < e^{-1}`.

    Examples
    --------
    >>> from derivations.gradient_weights import sign_flip
    >>> sign_flip().verify().verified
    True
    """
    g = look_alike_gradients()
    pi = sp.Symbol("pi", positive=True)
    d = Derivation("Without sg, the sign flips when π < 1/e", assumptions=[r"$r = 1$ (the token is live)", r"$\pi = e^{\ell}$"],
                   unfold=Definitions({pi: sp.exp(ell)}))
    d.step(sp.Subs(g["a"], r, 1), -A, r"gradient of (a) at $r = 1$")
    d.step(sp.Subs(g["b"], r, 1), -A * (1 + ell), r"gradient of (b) at $r = 1$: (a) times $1 + \ell$")
    d.step(1 + ell < 0, ell < -1, "(b) and (a) have opposite signs; solve for $\\ell$", relation="<=>",
           proof=same_solutions(ell))
    d.step(ell < -1, pi < sp.exp(-1), r"$\exp$ is increasing", relation="<=>", proof=same_solutions(ell))
    return d
