r"""The gradient each trainer loss follows, derived by differentiating it; the length bias of each aggregation.

Every policy loss of :func:`numeric.losses.policy_loss` has a per-token
derivative of the form

.. math::

    \frac{\partial\,\mathrm{loss}}{\partial \ell_{it}} = -\,\kappa_{it}\, w_{it}\, A_{it},

with :math:`\ell_{it} = \log\pi_\theta(o_{it}\mid o_{i,<t})`, the *gradient
weight* :math:`w` of the method and the *aggregation weight* :math:`\kappa` of
the mode.  This module derives both.

* Token methods (REINFORCE/GPG, PPO, dual-clip PPO, CISPO two ways, SAPO, and
  Clip-Cov's and KL-Cov's selected and unselected tokens):
  :func:`weight_derivation` differentiates the per-token loss in :math:`\ell`
  (stop-gradients held constant, clipped losses region by region with the
  machinery of :mod:`derivations.gradient_weights`); :func:`weight` returns
  :math:`w(r, A)`, and :func:`penalty_gradient` the part of the derivative that
  is no multiple of :math:`A` (KL-Cov's :math:`\beta\,\mathrm{sgn}(\ell - \ell_0)`
  on a selected token; 0 for every other form).
* Methods with a sequence ratio in a token loss (CISPO and SAPO at TRL's
  ``importance_sampling_level="sequence"``, VESPO, GSPO with dual clip):
  :func:`sequence_weight_derivation` differentiates a row's loss and finds the
  token form's weight at the row's ratio; :func:`sequence_table` lists them.
* Sequence methods: :func:`gspo_derivation` shows that both GSPO forms give
  PPO's weight evaluated at the *sequence* ratio :math:`\tilde r_i` (the sequence form
  through :math:`\partial\log \tilde r_i/\partial\ell_{it} = 1/n_i`, the token form
  through the straight-through ratio with :math:`\partial\log \tilde r_{it}/\partial\ell_{it} = 1`
  and seq-mean-token-mean's :math:`1/n_i`); :func:`gmpo_derivation` shows that
  GMPO's weight is its clipped geometric-mean ratio on the tokens whose
  log-ratio is inside the clip range (on the live side), 0 elsewhere.
* Aggregation: :func:`aggregation_weights` differentiates each mode with
  respect to a token's loss, for :math:`B` rows of symbolic lengths
  :math:`n_i`, and :func:`length_bias` states which objective the resulting
  REINFORCE update is an unbiased gradient of (token-mean's weight couples
  the answers of a batch, so it follows none of the batch objectives).

References
----------
Zheng et al., "Group Sequence Policy Optimization", arXiv:2507.18071 (2025).
Zhao et al., "Geometric-Mean Policy Optimization", arXiv:2507.20673 (2025).
Gao et al., "Soft Adaptive Policy Optimization", arXiv:2511.20347 (2025).
"Variational Sequence-Level Soft Policy Optimization" (VESPO), arXiv:2602.10693 (2026).
Cui et al., "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models" (Clip-Cov, KL-Cov), arXiv:2505.22617 (2025).
MiniMax, "MiniMax-M1", arXiv:2506.13585 (2025) (CISPO).
Liu et al., "Understanding R1-Zero-Like Training" (Dr. GRPO), arXiv:2503.20783 (2025).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import ParamSpec

import sympy as sp

from . import gradient_weights as gw
from . import methods, token_losses
from .definitions import Definitions, Differentiation
from .derivation import Derivation
from .gradient_weights import token_loss
from .notation import latex
from .proofs import on_regions
from .variants.token import derive_token_loss

__all__ = [
    "AGGREGATIONS",
    "READINGS",
    "TABLE_FORMS",
    "TOKEN_METHODS",
    "aggregation_weight",
    "aggregation_weights",
    "gmpo_derivation",
    "gspo_derivation",
    "length_bias",
    "loss_table",
    "penalty_gradient",
    "reading_weight",
    "row_ratio_derivation",
    "sequence_table",
    "sequence_weight_derivation",
    "two_sided_clip_derivation",
    "weight",
    "weight_derivation",
]

ell, ell0, r, A, eps_l, eps_h, c, sg = methods.ell, methods.ell0, methods.r, methods.A, methods.eps_l, methods.eps_h, methods.c, methods.sg
tau_pos, tau_neg = methods.tau_pos, methods.tau_neg
k, lam, beta = methods.k, methods.lam, methods.beta

TOKEN_METHODS = methods.TOKEN_FORMS
"""The per-token forms of :data:`derivations.methods.FORMS`: ``cispo`` is CISPO's two-sided clip, ``cispo_cap`` CISPO with ``eps_low=None``."""

_NAMES = {name: f.label for name, f in methods.FORMS.items()}
_PPO_FORMS = {"ppo": "ppo", "ppo_dual_clip": "ppo_dual_clip", "clip_cov_kept": "ppo", "top_entropy_kept": "ppo", "m2po_kept": "ppo"}
"""The forms clipped in the ratio, derived region by region in :mod:`derivations.gradient_weights` (an unselected token of Clip-Cov,
of the top-entropy mask and of M2PO has PPO's loss)."""
_SPLIT_FORMS = ("opsm",)
"""A stopped mask times a clipped surrogate: derived region by region by the variant checker's split (:func:`derivations.variants.derive_token_loss`)."""


_P = ParamSpec("_P")


def _built_once(build: Callable[_P, Derivation]) -> Callable[_P, Derivation]:
    """Build a derivation once per process (its arguments are immutable), and hand each caller a copy of its own.

    A :class:`~derivations.Derivation` is mutable, so the built one is never handed out; a copy's
    :meth:`~derivations.Derivation.verify` reads the kernel's remembered verdicts on the same claims.
    """
    built: Callable[..., Derivation] = cache(build)

    @wraps(build)
    def copy(*args: _P.args, **kwargs: _P.kwargs) -> Derivation:
        return built(*args, **kwargs).subs({})

    return copy


@_built_once
def weight_derivation(method: str) -> Derivation:
    r"""The gradient weight of a token method, by differentiating its loss in :math:`\ell`.

    Clipped surrogates (PPO, dual-clip) are derived region by region in
    :func:`derivations.gradient_weights.weight_derivation`; the others are
    smooth in :math:`\ell` once every :math:`\mathrm{sg}(\cdot)` is held
    constant, so one differentiation gives :math:`-A\,w`.

    Examples
    --------
    >>> from derivations.losses import weight_derivation
    >>> d = weight_derivation("sapo").verify()   # SAPO: one temperature per sign of A
    >>> [cond for _, cond in d.steps[-1].rhs.args]
    [A > 0, True]
    >>> d.steps[-1].rhs.args[0][0]
    -4*A*r*exp(tau_+)/(exp(2*tau_+)*exp(-r*tau_+) + 2*exp(tau_+) + exp(r*tau_+))
    """
    if method in _PPO_FORMS:
        return gw.weight_derivation(_PPO_FORMS[method])
    if method in _SPLIT_FORMS:
        d = derive_token_loss(token_loss(method)).derivation
        assert d is not None  # the registry's loss is split (the round trip tests it)
        return d
    loss = token_loss(method)
    d = Derivation(
        f"Gradient weight of {_NAMES[method]}",
        start=sp.Derivative(loss, ell, evaluate=False),
        assumptions=[r"$r = e^{\ell - \ell_0}$", r"$\mathrm{sg}(x)$ has the value of $x$ and derivative 0",
                     r"$\partial\,\mathrm{loss}/\partial\ell = -A\,w + p$, $p$ the part that is no multiple of $A$"],
        unfold=Definitions((), gw.differentiation),
    )
    d.then(sp.factor(gw.d_dell(loss)), r"differentiate in $\ell$, $\mathrm{sg}$ held constant, $\partial r/\partial\ell = r$")
    return d


def _by_branch(f, e: sp.Expr) -> sp.Expr:
    """``f`` applied to each branch of a ``Piecewise`` (SAPO's temperature per sign of :math:`A`), or to ``e``."""
    return sp.Piecewise(*[(f(v), cond) for v, cond in e.args]) if isinstance(e, sp.Piecewise) else f(e)


@cache
def weight(method: str) -> sp.Expr:
    r"""The gradient weight :math:`w(r, A)` of a token method, read off :func:`weight_derivation`.

    .. math::

        &w_{\mathrm{REINFORCE}} = 1, \qquad w_{\mathrm{CISPO}} = \mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h), \qquad
        w_{\mathrm{cap}} = \min(r, 1+\varepsilon_h), \\
        &w_{\mathrm{SAPO}} = 4\,q(1-q)\,r,\ q = \operatorname{sigmoid}(\tau(r-1)),\ \tau = \tau_+ \text{ if } A > 0 \text{ else } \tau_-,

    and PPO's and dual-clip PPO's from :func:`derivations.gradient_weights.gradient_weight`.
    SAPO's weight is 1 at :math:`r = 1` and decays smoothly on both sides,
    where PPO's drops to 0 at the clip.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.losses import A, r, weight
    >>> weight("cispo")
    Min(varepsilon_h + 1, Max(r, 1 - varepsilon_l))
    >>> weight("sapo").subs(A, -1)
    4*r*exp(tau_-*(r + 1))/(exp(tau_-) + exp(r*tau_-))**2
    >>> sp.simplify(weight("sapo").subs(r, 1))
    1
    """
    if method in _PPO_FORMS:
        return gw.gradient_weight(_PPO_FORMS[method])
    if method in _SPLIT_FORMS:
        return derive_token_loss(token_loss(method)).weight
    d = weight_derivation(method).verify()
    return _by_branch(lambda x: _tidied(sp.factor(-(x - penalty_gradient(method)) / A)), d.steps[-1].rhs)


def _tidied(w: sp.Expr) -> sp.Expr:
    """``simplify(w)`` for a smooth weight (SAPO's exponentials); a clip (``Min``/``Max``) or a stopped mask (``Piecewise``) as
    ``factor`` left it, which ``simplify`` returns unchanged for every registered form after a long search (0.36 s for CISPO's,
    3.9 s for DPPO's binary-KL mask)."""
    return w if w.has(sp.Min, sp.Max, sp.Piecewise) else sp.simplify(w)


@cache
def penalty_gradient(method: str) -> sp.Expr:
    r"""The part :math:`p` of :math:`\partial\,\mathrm{loss}/\partial\ell = -A\,w + p` that is no multiple of :math:`A`: the derivative at :math:`A = 0`.

    Every form's loss but KL-Cov's selected token is :math:`A` times a function
    of :math:`r` and :math:`\ell`, so :math:`p = 0`; KL-Cov adds
    :math:`\beta|\ell - \ell_0|` to a selected token, whose derivative
    :math:`\beta\,\mathrm{sgn}(\ell - \ell_0)` pulls the token back towards the old
    policy whatever its advantage (it vanishes at :math:`r = 1`).

    Examples
    --------
    >>> from derivations.losses import penalty_gradient
    >>> penalty_gradient("kl_cov_selected"), penalty_gradient("kl_cov_kept"), penalty_gradient("ppo")
    (beta*sign(ell - ell_0), 0, 0)
    """
    if method not in TOKEN_METHODS:
        raise ValueError(f"method must be one of {TOKEN_METHODS}, got {method!r}")
    if method in _PPO_FORMS or method in _SPLIT_FORMS:
        return sp.Integer(0)
    return weight_derivation(method).verify().steps[-1].rhs.subs(A, 0)


# ------------------------------------------------------------------ sequence methods


def _sequence_symbols(n: int):
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ValueError(f"n must be an int >= 2 (a sequence of several tokens), got {n!r}")
    ells = sp.symbols(f"ell_1:{n + 1}", real=True)
    olds = sp.symbols(f"ell_0_1:{n + 1}", real=True)
    return ells, olds


@_built_once
def gspo_derivation(n: int = 3) -> Derivation:
    r"""GSPO's gradient, both forms: PPO's weight at the sequence ratio, times :math:`1/n`.

    Sequence form (TRL): :math:`\tilde r = \exp\bigl(\frac1n\sum_t(\ell_t - \ell_{0,t})\bigr)` and
    the row's loss is :math:`f(\tilde r) = -\min(\tilde rA, \mathrm{clip}(\tilde r)A)` on every token,
    averaged over the row's tokens: :math:`\partial f(\tilde r)/\partial\ell_t =
    f'(\tilde r)\,\tilde r\,\partial\log \tilde r/\partial\ell_t` and :math:`f'(\tilde r)\,\tilde r = -w_{\mathrm{PPO}}(\tilde r, A)A`
    (the PPO derivation with :math:`r \to \tilde r`), so the step that remains is
    :math:`\partial\log \tilde r/\partial\ell_1 = 1/n`.

    Token form (verl): :math:`\log \tilde r_t = \mathrm{sg}(\log \tilde r) + \ell_t - \mathrm{sg}(\ell_t)`
    has value :math:`\log \tilde r` and :math:`\partial\log \tilde r_t/\partial\ell_t = 1`; the
    per-token losses :math:`f(\tilde r_t)` averaged with seq-mean-token-mean put
    :math:`1/n` back.  Both: :math:`\partial\,\mathrm{loss}/\partial\ell_t =
    -\frac1n w_{\mathrm{PPO}}(\tilde r, A)\,A`.

    Examples
    --------
    >>> from derivations.losses import gspo_derivation
    >>> [s.rhs for s in gspo_derivation(3).verify().steps]
    [1/3, 1]
    """
    ells, olds = _sequence_symbols(n)
    log_s = sum(e - o for e, o in zip(ells, olds)) / n
    d = Derivation(
        f"GSPO: the sequence ratio's log-derivative (n = {n} tokens)",
        assumptions=[r"$\log \tilde r = \frac1n\sum_t (\ell_t - \ell_{0,t})$", r"$\log \tilde r_t = \mathrm{sg}(\log \tilde r) + \ell_t - \mathrm{sg}(\ell_t)$"],
    )
    d.step(sp.Derivative(log_s, ells[0]), sp.Rational(1, n), r"sequence form: each token enters the mean with weight $1/n$")
    held = sp.Symbol("sg_logs", real=True), sp.Symbol("sg_ell", real=True)
    log_s_token = held[0] + ells[0] - held[1]  # the sg's are constants for the derivative
    d.step(sp.Derivative(log_s_token, ells[0]), sp.Integer(1), r"token form: $\mathrm{sg}(\log \tilde r)$ and $\mathrm{sg}(\ell_t)$ held constant")
    return d


_SEQUENCE_FORMS = {"cispo_seq": "cispo", "sapo_seq": "sapo", "vespo": None, "seq_mask_tis": None}
"""Methods whose token loss is a token form at the row's ratio: the form (chosen by the options), or None for VESPO's Gamma weight."""


def _sequence_form(method: str, eps_low: object = 0.2) -> str | None:
    if method not in _SEQUENCE_FORMS:
        raise ValueError(f"method must be one of {tuple(_SEQUENCE_FORMS)}, got {method!r}")
    return "cispo_cap" if method == "cispo_seq" and eps_low is None else _SEQUENCE_FORMS[method]


def _d_row(expr: sp.Expr, var: sp.Symbol) -> sp.Expr:
    r"""``d expr / d var`` with every :math:`\mathrm{sg}(x)` held constant (a fresh symbol while differentiating)."""
    held: dict = {}

    def hold(*args):
        x = sp.Dummy("sg")
        held[x] = args[0]
        return x

    return sp.diff(expr.replace(sg, hold), var).xreplace(held)


@_built_once
def sequence_weight_derivation(method: str, n: int = 2, eps_low: object = 0.2) -> Derivation:
    r"""The gradient weight of a method that puts a row's ratio into a token loss: the token form's weight at that ratio.

    For row :math:`i` with tokens :math:`t = 0, \dots, n-1` and :math:`\log r_t = \ell_t - \ell_{0,t}`:

    * ``cispo_seq`` (TRL's ``cispo`` at ``importance_sampling_level="sequence"``):
      token loss :math:`-\mathrm{sg}(\mathrm{clip}(\tilde r))\,A\,\ell_t` with
      :math:`\tilde r = \exp(\frac1n\sum_t\log r_t)`; the stopped weight is a constant, so
      :math:`w_t = \mathrm{clip}(\tilde r)` (``eps_low=None``: :math:`\min(\tilde r, 1+\varepsilon_h)`);
    * ``sapo_seq``: the row's value :math:`f(\tilde r) = -\frac4\tau\operatorname{sigmoid}(\tau(\tilde r-1))A` (:math:`\tau_\pm` by the sign of :math:`A`) on
      each of its :math:`n` tokens; :math:`\partial\log \tilde r/\partial\ell_t = 1/n` and the
      :math:`n` tokens cancel it: :math:`w_t = w_{\mathrm{SAPO}}(\tilde r)`;
    * ``seq_mask_tis`` (OpenRLHF's ``seq-mask-tis`` on a batch's first step): token loss
      :math:`-\mathrm{sg}(r_t\,\mathbb 1[l \le \tilde g \le h])\,A\,\ell_t` with the row's geometric-mean ratio :math:`\tilde g`:
      :math:`w_t = r_t\,\mathbb 1[l \le \tilde g \le h]`, the token's *own* ratio gated by its row;
    * ``vespo``: token loss :math:`-\mathrm{sg}(\phi(W))\,A\,\ell_t` with the
      *product* of the ratios :math:`W = \exp(\sum_t\log r_t)` and the Gamma weight
      :math:`\phi(W) = W^k e^{\zeta(1-W)}` (:func:`derivations.methods.gamma_weight`):
      :math:`w_t = \phi(W)`, the same for every token of the row.

    Each is :math:`\partial/\partial\ell_1` of the row's summed token losses, so an
    aggregation's :math:`\kappa` multiplies it as for a token method.  The
    second step writes the derivative as :math:`-A` times the token form's
    derived weight (:func:`weight`) at the row's ratio; the CAS checks both
    (SAPO's second step on each sign of :math:`A`, where its temperature is one symbol).

    Examples
    --------
    >>> from derivations.losses import sequence_weight_derivation
    >>> sequence_weight_derivation("vespo").verify().steps[-1].rhs
    -A*W**k*exp(zeta*(1 - W))
    >>> len(sequence_weight_derivation("sapo_seq").verify().steps)
    2
    >>> sequence_weight_derivation("cispo_seq", eps_low=None).verify().steps[-1].rhs
    -A*Min(rtilde, varepsilon_h + 1)
    """
    token_form = _sequence_form(method, eps_low)
    ells, olds = _sequence_symbols(n)
    total = sum(e - o for e, o in zip(ells, olds))
    if method == "vespo":
        ratio, value = sp.Symbol("W", positive=True), sp.exp(total)
        per_token = sp.Add(*(-sg(methods.gamma_weight(ratio)) * A * e for e in ells))
        w = methods.gamma_weight(ratio)
        where = r"$W = \exp\sum_t(\ell_t - \ell_{0,t})$"
    elif method == "seq_mask_tis":  # each token's own ratio, kept where the row's geometric mean lies in the band
        ratio, value = sp.Symbol("gtilde", positive=True), sp.exp(total / n)
        kept = sp.And(ratio >= methods.b_l, ratio <= methods.b_h)
        per_token = sp.Add(*(-sg(sp.Piecewise((sp.exp(e - o), kept), (0, True))) * A * e for e, o in zip(ells, olds)))
        w = sp.Piecewise((sp.exp(ells[0] - olds[0]), kept), (0, True))
        where = r"$\tilde g = \exp\bigl(\frac1n\sum_t(\ell_t - \ell_{0,t})\bigr)$, $r_1 = e^{\ell_1 - \ell_{0,1}}$"
    else:
        ratio, value = sp.Symbol("rtilde", positive=True), sp.exp(total / n)
        per_token = sp.Add(*(token_loss(str(token_form)).subs(r, ratio).subs(ell, e) for e in ells))
        w = weight(str(token_form)).subs(r, ratio)
        where = r"$\tilde r = \exp\bigl(\frac1n\sum_t(\ell_t - \ell_{0,t})\bigr)$"

    unfold = Definitions({ratio: value}, Differentiation(ells[0], held=(sg,)))  # the ratio in the log-probs, then d/dl_1 with sg held

    d = Derivation(
        f"Gradient weight of {methods.METHODS[method].label} (a row of n = {n} tokens)",
        start=sp.Derivative(per_token, ells[0], evaluate=False),
        assumptions=[where, r"$\mathrm{sg}(x)$ has the value of $x$ and derivative 0"],
        unfold=unfold,
    )
    if method == "sapo_seq":  # the ratio itself is differentiated: the chain rule through s, then SAPO's weight at s
        derivative = _d_row(per_token.subs(ratio, value), ells[0]).subs(value, ratio)
        d.then(sp.factor(derivative), r"differentiate the row's token losses in $\ell_1$: $\partial s/\partial\ell_1 = s/n$, $n$ tokens")
        d.then(-A * w, "SAPO's derived weight at the row's ratio", proof=on_regions((A, [0]), label="each sign of A"))
    else:  # the ratio sits inside sg: a constant for the derivative
        d.then(-A * w, r"differentiate in $\ell_1$, the stopped weight at the row's ratio held constant")
    return d


@_built_once
def two_sided_clip_derivation() -> Derivation:
    r"""TRL's two-sided clip is the dual clip: :math:`-\min(\min(r, \delta_{\mathrm{TRL}})A, \mathrm{clip}(r)A)` equals dual-clip PPO with :math:`C_d = \delta_{\mathrm{TRL}}`.

    TRL's ``delta`` (INTELLECT-2, ``grpo_trainer.py:3086-3087`` at ``f2cd577``) caps the ratio of the unclipped term at
    :math:`\delta_{\mathrm{TRL}}` after the clipped term is formed.  For :math:`\delta_{\mathrm{TRL}} > 1 + \varepsilon_h` (TRL's advice) the two losses are
    one function on every region of :math:`r` (cut at :math:`1 - \varepsilon_l`, :math:`1 + \varepsilon_h`, :math:`\delta_{\mathrm{TRL}}`) and each
    sign of :math:`A`, kinks included: so is their gradient, and ``policy_loss("ppo", ..., dual_clip=delta)`` is TRL's loss.

    Examples
    --------
    >>> from derivations.losses import two_sided_clip_derivation
    >>> two_sided_clip_derivation().verify().proved_by()
    {'regions': 1}
    """
    delta = sp.Symbol(r"\delta_{\mathrm{TRL}}", positive=True)  # TRL's delta (the global delta is GAE's TD error)
    trl = -sp.Min(sp.Min(r, delta) * A, token_losses.clip(r) * A)
    dual = token_losses.ppo(dual_clip=True).subs(c, delta)
    d = Derivation("TRL's two-sided clip and the dual clip", assumptions=[eps_l < 1, delta > 1 + eps_h])
    d.step(trl, dual, r"the same value on every region of $r$ and each sign of $A$", proof=on_regions((A, [0]), (r, [1 - eps_l, 1 + eps_h, delta])))
    return d


@_built_once
def row_ratio_derivation(n: int = 3) -> Derivation:
    r"""The log-derivative of a row's ratio in each of its tokens: :math:`1/n` (the geometric mean), :math:`1` (the product; and the geometric mean times :math:`n`).

    GSPO's row loss :math:`f(\tilde r)` has :math:`\partial/\partial\ell_t = f'(\tilde r)\tilde r\,\partial\log\tilde r/\partial\ell_t = -w(\tilde r)A/n`
    (:func:`gspo_derivation`); TRL's LUSPO multiplies the row's loss by :math:`n`, so the :math:`n` cancels and each token carries
    :math:`-w(\tilde r)A` before the mean over the :math:`B` rows (:math:`\kappa = 1/B`: seq-mean-token-sum's, no length bias); TRL's
    RLOOTrainer clips the *product* of the ratios, :math:`\log\rho = \sum_t(\ell_t - \ell_{0,t})`, whose log-derivative is 1:
    the same :math:`\kappa = 1/B`, with PPO's weight at :math:`\rho`.

    Examples
    --------
    >>> from derivations.losses import row_ratio_derivation
    >>> [s.rhs for s in row_ratio_derivation(3).verify().steps]
    [1/3, 1, 1]
    """
    ells, olds = _sequence_symbols(n)
    total = sum(e - o for e, o in zip(ells, olds))
    d = Derivation(f"A row's ratio, three ways (n = {n} tokens)",
                   assumptions=[r"$\log \tilde r = \frac1n\sum_t (\ell_t - \ell_{0,t})$", r"$\log\rho = \sum_t (\ell_t - \ell_{0,t})$"])
    d.step(sp.Derivative(total / n, ells[0]), sp.Rational(1, n), r"GSPO: each token enters the geometric mean with weight $1/n$")
    d.step(sp.Derivative(n * (total / n), ells[0]), sp.Integer(1), r"LUSPO: the row's loss times its length $n$")
    d.step(sp.Derivative(total, ells[0]), sp.Integer(1), r"the product ratio (TRL's RLOOTrainer): each token enters the sum once")
    return d


def _gmpo_log_ratio(sign: int, delta, low, high, evaluate: bool = True):
    clamped = sp.Min(sp.Max(delta, -low, evaluate=evaluate), high, evaluate=evaluate)
    return sign * sp.Min(sign * delta, sign * clamped, evaluate=evaluate)


@_built_once
def gmpo_derivation() -> Derivation:
    r"""GMPO's per-token factor :math:`g'(\log r)`: 1 on the live side of the clip, 0 beyond it.

    GMPO's row loss is :math:`-\bar A\,\exp\bigl(\frac1n\sum_t g(\log r_t)\bigr)` with
    :math:`g(\log r) = \mathrm{sgn}(A)\min\bigl(\mathrm{sgn}(A)\log r,\ \mathrm{sgn}(A)\,\mathrm{clamp}(\log r, -\tilde\varepsilon_l, \tilde\varepsilon_h)\bigr)`,
    so :math:`\partial\,\mathrm{loss}/\partial\ell_t = -\frac1n \bar A\,\bar r\, g'(\log r_t)`,
    :math:`\bar r = \exp\bigl(\frac1n\sum_t g(\log r_t)\bigr)` the clipped geometric-mean ratio.  On each region of
    :math:`\log r` (parametrised by a positive :math:`\eta`) the Min/Max resolve and
    :math:`g` is a constant or :math:`\log r`: for :math:`A > 0`, :math:`g' = 1`
    iff :math:`\log r \le \tilde\varepsilon_h`; for :math:`A < 0`, iff :math:`\log r \ge -\tilde\varepsilon_l`
    (PPO's live set, in log space).

    Examples
    --------
    >>> from derivations.losses import gmpo_derivation
    >>> [s.rhs for s in gmpo_derivation().verify().steps][:4]
    [\tilde\varepsilon_h, 0, -\tilde\varepsilon_l - eta, 1]
    """
    dd = sp.Symbol("eta", positive=True)
    low, high = sp.symbols(r"\tilde\varepsilon_l \tilde\varepsilon_h", positive=True)
    d = Derivation(
        "GMPO: the derivative of the sign-clipped log-ratio",
        assumptions=[r"$g(\log r) = \mathrm{sgn}(A)\min(\mathrm{sgn}(A)\log r, \mathrm{sgn}(A)\,\mathrm{clamp}(\log r, -\tilde\varepsilon_l, \tilde\varepsilon_h))$", r"$\tilde\varepsilon_l, \tilde\varepsilon_h, \eta > 0$"],
    )
    inside = sp.Symbol(r"\log r", real=True)
    a, b = sp.symbols("eta_h eta_l", positive=True)  # the distances of log r from the two edges
    regions = [  # (sign of A, Delta, its variable, (delta_l, delta_h), display, g' there)
        (1, high + dd, dd, (low, high), r"A > 0,\ \log r = \tilde\varepsilon_h + \eta", 0),
        (1, -low - dd, dd, (low, high), r"A > 0,\ \log r = -\tilde\varepsilon_l - \eta", 1),
        (1, inside, inside, (b - inside, inside + a), r"A > 0,\ -\tilde\varepsilon_l < \log r < \tilde\varepsilon_h$; $\tilde\varepsilon_l = \eta_l - \log r,\ \tilde\varepsilon_h = \log r + \eta_h", 1),
        (-1, high + dd, dd, (low, high), r"A < 0,\ \log r = \tilde\varepsilon_h + \eta", 1),
        (-1, -low - dd, dd, (low, high), r"A < 0,\ \log r = -\tilde\varepsilon_l - \eta", 0),
        (-1, inside, inside, (b - inside, inside + a), r"A < 0,\ -\tilde\varepsilon_l < \log r < \tilde\varepsilon_h$; $\tilde\varepsilon_l = \eta_l - \log r,\ \tilde\varepsilon_h = \log r + \eta_h", 1),
    ]
    for sign, point, var, (lo, hi), where, slope in regions:
        g = _gmpo_log_ratio(sign, point, lo, hi, evaluate=False)  # displayed as written, not pre-resolved
        piece = sp.simplify(_gmpo_log_ratio(sign, point, lo, hi))
        d.step(g, piece, f"on ${where}$; the min/max resolve")
        d.step(sp.Derivative(piece, var) / sp.diff(point, var), sp.Integer(slope),
               r"$g'(\log r)$ is $\partial g$ over $\partial\log r$ along the region's parameter")
    return d


# ------------------------------------------------------------------ aggregation

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "token-sum")


def aggregation_weights(B: int = 3) -> dict[str, Derivation]:
    r"""The weight :math:`\kappa_i = \partial\,\mathrm{aggregate}/\partial x_{it}` of each mode, for :math:`B` rows of lengths :math:`n_i`.

    Each mode is a function of the row sums :math:`S_i = \sum_{t \le n_i} x_{it}`
    and the lengths, so :math:`\partial/\partial x_{1t} = \partial/\partial S_1`:

    .. math::

        \kappa^{\text{token-mean}}_1 = \frac{1}{\sum_j n_j},\quad
        \kappa^{\text{seq-mean-token-mean}}_1 = \frac{1}{B\,n_1},\quad
        \kappa^{\text{seq-mean-token-sum}}_1 = \frac1B,\quad
        \kappa^{\text{seq-mean-token-sum-norm}}_1 = \frac{1}{D},\quad
        \kappa^{\text{token-sum}}_1 = 1.

    seq-mean-token-sum-norm is verl's: the token sum of the whole batch over a
    constant :math:`D` (``loss_scale_factor``, by default :math:`T`), with no
    mean over the :math:`B` rows (verl's tracker, issue #3741, disputes that the
    mode's name promises one).

    Examples
    --------
    >>> from derivations.losses import aggregation_weights
    >>> {k: d.verify().steps[-1].rhs for k, d in aggregation_weights(2).items()}["token-mean"]
    1/(n_1 + n_2)
    """
    if not isinstance(B, int) or isinstance(B, bool) or B < 2:
        raise ValueError(f"B must be an int >= 2, got {B!r}")
    S = sp.symbols(f"S_1:{B + 1}", real=True)
    n = sp.symbols(f"n_1:{B + 1}", positive=True)
    D = sp.Symbol("D", positive=True)  # the constant denominator (verl's loss_scale_factor); C is a cap
    modes = {
        "token-mean": (sum(S) / sum(n), 1 / sum(n)),
        "seq-mean-token-mean": (sum(s / k for s, k in zip(S, n)) / B, 1 / (B * n[0])),
        "seq-mean-token-sum": (sum(S) / B, sp.Rational(1, B)),
        "seq-mean-token-sum-norm": (sum(S) / D, 1 / D),
        "token-sum": (sum(S), sp.Integer(1)),
    }
    out = {}
    for mode, (agg, kappa_1) in modes.items():
        d = Derivation(f"Token weight of {mode} (B = {B})", assumptions=[r"$S_i = \sum_{t \le n_i} x_{it}$", "$D$ a constant"])
        d.step(sp.Derivative(agg, S[0]), kappa_1, r"$\partial/\partial x_{1t} = \partial/\partial S_1$")
        out[mode] = d
    return out


READINGS = ("verl@b178a3c", "verl@1dda039", "prompt-mean")
"""The readings :func:`reading_weight` derives: verl's ``seq-mean-token-sum-norm`` at each commit, SkyRL's ``prompt_mean``."""


def reading_weight(reading: str, B: int = 3) -> Derivation:
    r"""The token weight of a trainer's reading of an aggregation name, for :math:`B` rows of lengths :math:`n_i`.

    ``"verl@b178a3c"``
        ``seq-mean-token-sum-norm`` read at ``b178a3c``: :math:`\sum_i S_i/D`, :math:`\kappa = 1/D` (no mean over the rows);
    ``"verl@1dda039"``
        the same name since verl's #5417: the mean over the :math:`B'` rows with a token of :math:`S_i/D`,
        :math:`\kappa = 1/(B'D)` (TRL's ``dr_grpo`` and SkyRL's ``seq_mean_token_sum_norm`` count every row: :math:`1/(BD)`);
    ``"prompt-mean"``
        SkyRL's ``prompt_mean``: the rows in :math:`P = 2` prompts (rows :math:`1..B-1` the first, row :math:`B` the second),
        a token mean within each prompt, averaged over the prompts: :math:`\kappa_1 = 1/(P\,\sum_{j \in p(1)} n_j)`.

    Examples
    --------
    >>> from derivations.losses import reading_weight
    >>> [reading_weight(k, 3).verify().steps[0].rhs for k in ("verl@b178a3c", "verl@1dda039", "prompt-mean")]
    [1/D, 1/(B'*D), 1/(2*n_1 + 2*n_2)]
    """
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
    if not isinstance(B, int) or isinstance(B, bool) or B < 2:
        raise ValueError(f"B must be an int >= 2, got {B!r}")
    S = sp.symbols(f"S_1:{B + 1}", real=True)
    n = sp.symbols(f"n_1:{B + 1}", positive=True)
    D, rows = sp.Symbol("D", positive=True), sp.Symbol("B'", positive=True)
    agg = {"verl@b178a3c": sum(S) / D, "verl@1dda039": sum(S) / D / rows,
           "prompt-mean": (sum(S[:-1]) / sum(n[:-1]) + S[-1] / n[-1]) / 2}[reading]
    kappa = {"verl@b178a3c": 1 / D, "verl@1dda039": 1 / (rows * D), "prompt-mean": 1 / (2 * sum(n[:-1]))}[reading]
    d = Derivation(f"Token weight of {reading} (B = {B})", assumptions=[r"$S_i = \sum_{t \le n_i} x_{it}$", "$D$ a constant",
                                                                       "$B'$ the rows with a token"])
    d.step(sp.Derivative(agg, S[0]), kappa, r"$\partial/\partial x_{1t} = \partial/\partial S_1$")
    return d


def aggregation_weight(mode: str, B: int = 3) -> Derivation:
    r"""One mode's derivation from :func:`aggregation_weights`.

    Examples
    --------
    >>> from derivations.losses import aggregation_weight
    >>> aggregation_weight("seq-mean-token-mean").verify().steps[0].rhs
    1/(3*n_1)
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"mode must be one of {AGGREGATIONS}, got {mode!r}")
    return aggregation_weights(B)[mode]


def length_bias() -> dict[str, str]:
    r"""The objective each mode's REINFORCE update is an unbiased gradient of, with :math:`A_i = R(o_i) - b`.

    The update is :math:`-\nabla\sum_{i,t}\kappa_{it}(-A_i\ell_{it}) = \sum_i \kappa_i A_i \nabla\log\pi(o_i)`.
    When :math:`\kappa_i` depends on answer :math:`i` alone, the score-function
    identity gives :math:`\mathbb{E}[\kappa_i A_i\nabla\log\pi(o_i)] = \nabla\mathbb{E}[\kappa_i A_i]`:

    * seq-mean-token-sum: :math:`\mathbb{E}[A] = J - b`: the gradient of :math:`J`, no length bias;
    * seq-mean-token-sum-norm: :math:`B(J - b)/D`: the same direction, scaled by :math:`B/D`;
    * token-sum (verl's since ``1dda039``): :math:`B(J - b)`, scaled by :math:`B`;
    * seq-mean-token-mean: :math:`\mathbb{E}[(R - b)/|o|]`: reward per token, so short
      answers weigh more, and with :math:`b \ne 0` the baseline term no longer vanishes.

    token-mean's :math:`\kappa_i = 1/\sum_j n_j` depends on the *other* answers'
    lengths, so the batch objective :math:`\mathbb{E}[\sum_i\kappa_iA_i]` is not
    what it follows: averaging over the others first, answer :math:`i`'s term is
    :math:`\nabla\mathbb{E}[\psi(|o|)\,A]` with
    :math:`\psi(n) = \mathbb{E}[1/(n + \sum_{j \ne i}|o_j|)]` held at the current
    policy (token-mean's expected normaliser, a letter of its own: :math:`\kappa`
    is the per-token weight): a length weight that is neither 1 nor :math:`1/|o|`,
    and that moves with the policy.

    :func:`numeric.losses.length_bias_gradients` checks each exactly on TinyLM
    (suite ``losses``), token-mean included.

    Examples
    --------
    >>> from derivations.losses import length_bias
    >>> sorted(length_bias())
    ['seq-mean-token-mean', 'seq-mean-token-sum', 'seq-mean-token-sum-norm', 'token-mean', 'token-sum']
    """
    return {
        "token-mean": r"B\,\nabla\,\mathbb{E}\bigl[\psi(|o|)(R - b)\bigr],\ \psi(n) = \mathbb{E}\bigl[1/(n + \textstyle\sum_{j\ne i}|o_j|)\bigr]\ \text{frozen}",
        "seq-mean-token-mean": r"\nabla\,\mathbb{E}\Bigl[\frac{R - b}{|o|}\Bigr]",
        "seq-mean-token-sum": r"\nabla J",
        "seq-mean-token-sum-norm": r"\frac{B}{D}\nabla J",
        "token-sum": r"B\,\nabla J",
    }


def _differs_from_r(w: sp.Expr, constants: dict) -> bool:
    r"""True when :math:`w(r, A) \ne r` at one of a few points (A = ±1, r = 1/2, 2, the constants, :math:`\pi_0 = 1/2`, every other symbol 1).

    A nonzero value at a point refutes :math:`w = r` (a point never proves it), so the
    table's ``simplify`` runs only for the weights that pass every point.
    """
    for point in ({A: a, r: x, ell0: sp.log(sp.Rational(1, 2))} for a in (1, -1) for x in (sp.Rational(1, 2), 2)):
        value = (w - r).subs(point).subs(constants)
        value = value.subs({s: 1 for s in value.free_symbols})
        if value.is_number and value.is_zero is False:
            return True
    return False


_TABLE_CONSTANTS = {eps_l: sp.Rational(1, 5), eps_h: sp.Rational(7, 25), c: 3, methods.c_is: 3, methods.b_l: sp.Rational(1, 2), methods.b_h: 5,
                    methods.delta_opsm: sp.Rational(1, 10), methods.tv_l: sp.Rational(1, 5), methods.tv_h: sp.Rational(1, 5),
                    methods.delta_band: sp.Rational(1, 10)}
r"""The trainers' constants at which the loss table reads a weight at :math:`r = 1`: DAPO's clip, :math:`C_d = C_{\mathrm{IS}} = 3`, IcePop's
band :math:`[0.5, 5]`, OPSM's :math:`\delta = 0.1`, DPPO's and the TV band's thresholds."""


TABLE_FORMS = tuple(f for f in TOKEN_METHODS if methods.FORMS[f].method not in ("dppo", "dppo_tv", "dppo_kl", "tv_band"))
r"""The forms :func:`loss_table` lists: every token form but the trust regions on the probability change (DPPO, the TV band), whose
masks move with :math:`\pi_0` and are derived in their own section of the chapter (:func:`weight_derivation`)."""


@cache  # a str, built from cached derivations: nothing mutable is shared
def loss_table() -> str:
    r"""Every loss: its per-token loss, derived weight :math:`w`, default aggregation, and what it is unbiased for, as a LaTeX array.

    The last column is computed from the derived weight: :math:`w(1, A) = 1`
    (at the trainers' constants :math:`\varepsilon_l = 0.2`, :math:`\varepsilon_h = 0.28`,
    :math:`c = 3`) makes a method the REINFORCE estimator on
    policy, unbiased for :math:`\nabla J` with an admissible advantage and
    seq-mean-token-sum (other modes: :func:`length_bias`); :math:`w = r` keeps it
    unbiased off policy as well (token importance sampling).  GSPO and GMPO are
    sequence methods: :func:`gspo_derivation`, :func:`gmpo_derivation`.

    Examples
    --------
    >>> from derivations.losses import loss_table
    >>> print(loss_table().splitlines()[1])
    \text{method} & \text{per-token loss} & w(r, A) & \text{aggregation} & \text{unbiased for } \nabla J \\ \hline
    """
    constants = _TABLE_CONSTANTS
    lines = [r"\begin{array}{l|l|l|l|l}", r"\text{method} & \text{per-token loss} & w(r, A) & \text{aggregation} & \text{unbiased for } \nabla J \\ \hline"]
    for method in TABLE_FORMS:
        w, p = weight(method), penalty_gradient(method)
        on_policy = sp.simplify(sp.piecewise_fold(w.subs(r, 1)).subs(constants)) == 1
        off_policy = not _differs_from_r(w, constants) and sp.simplify(w - r) == 0
        verdict = r"\text{on and off policy}" if off_policy else (r"\text{on policy } (w(1, A) = 1)" if on_policy else r"\text{no}")
        if methods.undecided(method):
            verdict = r"\text{undecided (batch-dependent selection)}"
        cell = latex(w) + ("" if p == 0 else rf",\ p = {latex(p)}")
        lines.append(rf"\text{{{_NAMES[method]}}} & {latex(token_loss(method))} & {cell} & \text{{token-mean}} & {verdict} \\")
    r_seq = sp.Symbol("rtilde_i", positive=True)
    w_gspo = gw.gradient_weight("ppo").subs(r, r_seq)
    lines.append(rf"\text{{GSPO (both forms)}} & -\min(\tilde r_iA, \mathrm{{clip}}(\tilde r_i)A) & {latex(w_gspo)} & \text{{seq-mean-token-mean}} & \text{{on policy }} (\tilde r_i = 1) \\")
    lines.append(r"\text{GMPO} & -\bar A_i \exp\overline{g(\log r)} & \bar r_i\,g'(\log r_{it}) & \text{mean over rows} & \text{on policy } (\bar r_i = 1) \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)


@cache  # a str, built from cached derivations: nothing mutable is shared
def sequence_table() -> str:
    r"""The methods that put a row's ratio into a token loss: the row ratio, the derived weight, the default aggregation, the verdict, as a LaTeX array.

    The weight is :func:`sequence_weight_derivation`'s (GSPO with dual clip:
    :func:`gspo_derivation` and dual-clip PPO's weight at :math:`\tilde r_i`).  The
    verdict is computed as in :func:`loss_table`: :math:`w = 1` at the row's
    ratio 1 (the trainers' constants) makes the method REINFORCE on policy.

    Examples
    --------
    >>> from derivations.losses import sequence_table
    >>> print(sequence_table().splitlines()[-2][:40])
    \text{VESPO} & W_i = \prod_t r_{it} & W_
    """
    r_seq, W_i = sp.Symbol("rtilde_i", positive=True), sp.Symbol("W_i", positive=True)
    constants = {eps_l: sp.Rational(1, 5), eps_h: sp.Rational(7, 25), c: 3, k: 2, lam: 3}
    rows = [
        ("GSPO, dual clip", r"\tilde r_i", gw.gradient_weight("ppo_dual_clip").subs(r, r_seq), "gspo"),
        ("CISPO (sequence ratio)", r"\tilde r_i", weight("cispo").subs(r, r_seq), "cispo_seq"),
        ("SAPO (sequence ratio)", r"\tilde r_i", weight("sapo").subs(r, r_seq), "sapo_seq"),
        ("VESPO", r"W_i = \prod_t r_{it}", methods.gamma_weight(W_i), "vespo"),
    ]
    lines = [r"\begin{array}{l|l|l|l|l}", r"\text{method} & \text{row ratio} & w_{it} & \text{aggregation} & \text{unbiased for } \nabla J \\ \hline"]
    for label, ratio, w, name in rows:
        at_one = sp.simplify(sp.piecewise_fold(w.subs({r_seq: 1, W_i: 1})).subs(constants)) == 1
        verdict = r"\text{on policy (row ratio 1)}" if at_one else r"\text{no}"
        agg = methods.METHODS[name].aggregation
        lines.append(rf"\text{{{label}}} & {ratio} & {latex(w)} & \text{{{agg}}} & {verdict} \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)
