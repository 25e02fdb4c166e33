r"""One registry of policy losses: each method declared once, with its per-token loss as a formula.

Every policy loss of :func:`numeric.policy_loss` is an entry of :data:`METHODS`:
its name, its per-token loss as a SymPy expression in the ratio
:math:`r = e^{\ell - \ell_0}`, the log-probability :math:`\ell` and the
advantage :math:`A` (and its parameters), whether it is a sequence-level
method, its default aggregation, its parameters with their defaults, the
names verl, TRL and OpenRLHF give it, and a reference.  The derived gradient
weights (:mod:`derivations.gradient_weights`, :mod:`derivations.losses`), the
batched loss and weight of :mod:`numeric.losses`, and the chapters' tables all
read it; the torch form of each loss lives in :mod:`numeric.losses.policy`
and is tested against the formula here, values and gradients.

Optional parameters change the formula, not only its constants: PPO (and
GSPO) with ``dual_clip`` (the constant :math:`C_d > 1`, a cap: :math:`C` with :math:`d` for dual) bounds the loss of a
negative advantage by :math:`-cA`, and CISPO with ``eps_low=None`` caps the
stopped weight from above only.  Clip-Cov and KL-Cov treat a few *selected*
tokens differently from the rest; which tokens are selected depends on the
whole batch (and, for Clip-Cov, on a random draw), so the selection is an
argument (``selected=True`` or ``False`` here, a ``[B, T]`` mask in
:func:`numeric.policy_loss`), each method has a form per case, and
:attr:`Method.undecided` says what no per-token check can state about it.  Each such choice is a *form* of the method, named by
:func:`form` (``"ppo"`` or ``"ppo_dual_clip"``, ``"cispo"`` or ``"cispo_cap"``);
:data:`FORMS` lists every form with its method and the options that select it.
A form's name is never the name of another method.

Symbols: :data:`ell`, :data:`ell0`, :data:`r`, :data:`A`, :data:`eps_l`,
:data:`eps_h`, :data:`c` (dual clip), :data:`tau_pos`, :data:`tau_neg` (SAPO's temperatures for :math:`A > 0` and :math:`A \le 0`),
:data:`delta_l`, :data:`delta_h` (GMPO's clip range in log space, :math:`\tilde\varepsilon_l, \tilde\varepsilon_h`), :data:`k`,
:data:`lam` (VESPO's Gamma weight), :data:`beta` (KL-Cov's coefficient) and the
stop-gradient :data:`sg`.

Adding a method is one entry of :data:`METHODS` (and, for the batched loss,
its torch form in :mod:`numeric.losses.policy`), plus its tests.

Peers were read at: verl ``b178a3cd56f58b2d502255daba591e92833930a7``
(``verl/trainer/ppo/core_algos.py``), TRL ``f2cd57710ae345ea6428ae95363267fcf38a3dc8``
(``trl/trainer/grpo_trainer.py``), OpenRLHF ``3c3be6234e0cb353e76bb8019947db9dfe99fca7``
(``openrlhf/models/loss.py``).

Examples
--------
>>> from derivations.methods import FORMS, METHODS, form
>>> list(METHODS)
['reinforce', 'gpg', 'ppo', 'gspo', 'gspo_token', 'cispo', 'cispo_seq', 'sapo', 'sapo_seq',
 'vespo', 'gmpo', 'clip_cov', 'kl_cov', 'is']
>>> form("ppo", dual_clip=3.0), form("cispo", eps_low=None), form("cispo", eps_low=0.2)
('ppo_dual_clip', 'cispo_cap', 'cispo')
>>> form("clip_cov", selected=True), form("kl_cov", selected=False)
('clip_cov_selected', 'kl_cov_kept')
>>> METHODS["cispo"].loss(eps_low=None)
-A*ell*sg(Min(r, varepsilon_h + 1))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import sympy as sp

__all__ = [
    "CONSTANTS",
    "FORMS",
    "METHODS",
    "PARAMETER_SYMBOLS",
    "PEER_COMMITS",
    "TOKEN_FORMS",
    "Form",
    "Method",
    "Peer",
    "form",
    "form_of",
    "gamma_weight",
    "known_token_forms",
    "method",
    "peer_table",
    "symbol_defaults",
    "symbol_values",
    "undecided",
]

ell, ell0 = sp.symbols("ell ell_0", real=True)
r = sp.Symbol("r", positive=True)
A = sp.Symbol("A", real=True)
eps_l, eps_h = sp.symbols("varepsilon_l varepsilon_h", positive=True)
c = sp.Symbol("C_d", positive=True)  # the dual-clip constant C_d: a cap on the ratio for A < 0 (C is every cap; d for dual)
tau_pos, tau_neg = sp.symbols("tau_+ tau_-", positive=True)  # SAPO's temperatures for A > 0 and for A <= 0
delta_l, delta_h = sp.symbols(r"\tilde\varepsilon_l \tilde\varepsilon_h", positive=True)  # GMPO's clip range, on log r
k, lam = sp.symbols("k zeta", positive=True)  # VESPO's Gamma shape and rate (zeta: lambda is GAE's)
beta = sp.Symbol("beta", positive=True)
sg = sp.Function("sg")
"""Stop-gradient in notation: the value of its argument, derivative 0."""


def _clip(x, low=1 - eps_l, high=1 + eps_h) -> sp.Expr:
    return sp.Min(sp.Max(x, low), high)


def _ppo(dual_clip: object = None) -> sp.Expr:
    ppo = -sp.Min(r * A, _clip(r) * A)
    if dual_clip is None:
        return ppo
    return sp.Piecewise((ppo, A >= 0), (-sp.Max(sp.Min(r * A, _clip(r) * A), c * A), True))


def _cispo(eps_low: object = 0.2) -> sp.Expr:
    weight = sp.Min(r, 1 + eps_h) if eps_low is None else _clip(r)
    return -sg(weight) * A * ell


def gamma_weight(x: sp.Expr) -> sp.Expr:
    r"""VESPO's Gamma weight :math:`\phi(x) = x^k e^{\zeta(1 - x)}`, normalised so that :math:`\phi(1) = 1`.

    It is the density of a Gamma law (shape :math:`k + 1`, rate :math:`\zeta`)
    up to a constant: it vanishes at :math:`x = 0` and as :math:`x \to \infty`
    and peaks at :math:`x = k/\zeta`.

    Examples
    --------
    >>> from derivations.methods import gamma_weight, k, lam
    >>> gamma_weight(1), gamma_weight(k / lam).subs({k: 2, lam: 3})
    (1, 4*E/9)
    """
    return x**k * sp.exp(lam * (1 - x))


def _vespo() -> sp.Expr:
    return -sg(gamma_weight(r)) * A * ell


def _selected(selected: object) -> bool:
    if not isinstance(selected, bool):
        raise TypeError(f"selected must be True or False (is the token one of the selected ones?), got {selected!r}")
    return selected


def _clip_cov(selected: object) -> sp.Expr:
    """Clip-Cov: PPO's loss on a token that is not selected; a selected token's loss is dropped (0)."""
    return sp.Integer(0) if _selected(selected) else _ppo()


def _kl_cov(selected: object) -> sp.Expr:
    r"""KL-Cov: the unclipped surrogate :math:`-rA`, plus :math:`\beta|\ell - \ell_0|` on a selected token."""
    return -r * A + (beta * sp.Abs(ell - ell0) if _selected(selected) else 0)


def _sapo() -> sp.Expr:
    r"""SAPO's soft gate :math:`-\frac{4}{\tau}\operatorname{sigmoid}(\tau(r - 1))A`, with :math:`\tau_+` where :math:`A > 0` and :math:`\tau_-` elsewhere (verl, TRL)."""
    gate = lambda t: 4 / t / (1 + sp.exp(-t * (r - 1)))  # noqa: E731
    return sp.Piecewise((-gate(tau_pos) * A, A > 0), (-gate(tau_neg) * A, True))


def _gmpo() -> sp.Expr:
    """One token's GMPO loss, :math:`-A\\exp g(\\log r)` (a row of one token; :func:`derivations.losses.gmpo_derivation`)."""
    d = sp.log(r)
    g = sp.Piecewise((sp.Min(d, sp.Min(sp.Max(d, -delta_l), delta_h)), A > 0), (sp.Max(d, sp.Min(sp.Max(d, -delta_l), delta_h)), True))
    return -A * sp.exp(g)


class Peer(NamedTuple):
    r"""A trainer's name for a method (one ``loss_type``), the package call that reproduces its loss, and a note.

    ``call`` is a Python call of :func:`numeric.policy_loss` in which ``...``
    stands for ``log_prob, old_log_prob, advantages, mask`` and every other
    name is the trainer's own: a configuration field at its default (or at
    ``config``, where the row sets one) or a quantity of the batch (``B``,
    ``num_items_in_batch``).  The aggregation in it (``agg``, ``norm``,
    ``count_eps``, ``empty_rows``) is the one the trainer's loss function
    applies for that ``loss_type``; ``note`` says where its training loop
    differs, or what the call does not reproduce.
    """

    name: str
    call: str
    note: str = ""
    config: dict = {}


@dataclass(frozen=True)
class Method:
    r"""One policy loss: its per-token formula and everything a table or a trainer needs to know about it.

    ``loss(**options)`` is the per-token loss (minimised) for the given optional
    parameters (only ``dual_clip``, ``eps_low`` and Clip-Cov's and KL-Cov's
    ``selected`` change the formula); for a sequence-level method it is the loss
    of a row of one token, in which the sequence ratio is the token's ratio.
    ``parameters`` maps each parameter the method takes to its default; ``peers``
    maps a trainer to its :class:`Peer` rows (one per ``loss_type`` that selects
    the method) at :data:`PEER_COMMITS`.  ``undecided`` is empty when the
    per-token loss is the whole method; otherwise it says what a check of the
    per-token loss cannot state about the method (a variant checker reports it
    as "undecided" rather than guess).
    """

    name: str
    label: str
    loss: Callable[..., sp.Expr] = field(repr=False)
    sequence_level: bool
    aggregation: str | None
    parameters: dict = field(default_factory=dict)
    peers: dict[str, tuple[Peer, ...]] = field(default_factory=dict)
    reference: str = ""
    undecided: str = ""


PEER_COMMITS = {
    "verl": "b178a3cd56f58b2d502255daba591e92833930a7",
    "TRL": "f2cd57710ae345ea6428ae95363267fcf38a3dc8",
    "OpenRLHF": "3c3be6234e0cb353e76bb8019947db9dfe99fca7",
}
"""The commit of each peer at which the names in :data:`METHODS` and :data:`numeric.TRAINER_MODES` were read."""

_CLIP = {"eps_low": 0.2, "eps_high": 0.2}

_SELECTION = (
    "which tokens are selected depends on the whole batch ({how}); the per-token weight of a selected and of an "
    "unselected token is certified, but the expected update (bias, scale, length bias) is a property of the "
    "selection law, which a per-token loss does not carry: undecided"
)

_VERL_LOOP = "verl's engine loop sets global_batch_info: token-mean / the mini-batch's tokens, seq-mean / its rows (empty ones counted)"
_VERL_SEQ = "seq-mean-token-mean whatever loss_agg_mode says; " + _VERL_LOOP
_TRL_ACCUMULATION = "/ gradient_accumulation_steps in training (a constant)"
_TRL_ITEMS = "num_items_in_batch: the generation batch's tokens (all processes and steps) / num_processes; here this batch's"
_ORLHF_LOOP = "its loop divides by the global batch_num_tokens / dp_size"


def _trl_ppo(loss_type: str, aggregation: str, note: str = _TRL_ACCUMULATION) -> Peer:
    return Peer(f'loss_type "{loss_type}"', f'policy_loss("ppo", ..., eps_low=epsilon, eps_high=epsilon_high, {aggregation})', note)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("reinforce", "REINFORCE", lambda: -A * ell, False, "token-mean", {},
               {"verl": (Peer('policy_loss "bypass_mode", loss_type "reinforce"',
                              'policy_loss("reinforce", ..., agg=loss_agg_mode, weight=rollout_is_weights)', _VERL_LOOP),)},
               "Williams, Machine Learning 8 (1992)"),
        Method("gpg", "GPG", lambda: -A * ell, False, "token-mean", {},
               {"verl": (Peer('policy_loss "gpg"', 'policy_loss("gpg", ..., agg=loss_agg_mode)', _VERL_LOOP),)},
               "Chu et al., arXiv:2504.02546 (2025)"),
        Method("ppo", "PPO", _ppo, False, "token-mean", {**_CLIP, "dual_clip": None},
               {"verl": (Peer('policy_loss "vanilla"',
                              'policy_loss("ppo", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, dual_clip=clip_ratio_c, '
                              'log_ratio_clamp=20, agg=loss_agg_mode)', _VERL_LOOP),),
                "TRL": (_trl_ppo("grpo", 'agg="seq-mean-token-mean"'),
                        _trl_ppo("bnpo", 'agg="token-mean"'),
                        _trl_ppo("dr_grpo", 'agg="seq-mean-token-sum-norm", norm=B * max_completion_length'),
                        _trl_ppo("dapo", 'agg="token-mean", norm=num_items_in_batch', _TRL_ITEMS)),
                "OpenRLHF": (Peer('PolicyLoss, policy_loss_type "ppo"',
                                  'policy_loss("ppo", ..., eps_low=clip_eps_low, eps_high=clip_eps_high, dual_clip=dual_clip, '
                                  'log_ratio_clamp=20, agg="token-mean")', "token_level_loss=True; " + _ORLHF_LOOP),)},
               "Schulman et al., arXiv:1707.06347 (2017); Ye et al. (dual clip), AAAI (2020)"),
        Method("gspo", "GSPO (sequence form)", _ppo, True, "seq-mean-token-mean", {**_CLIP, "dual_clip": None},
               {"TRL": (Peer('importance_sampling_level "sequence"',
                             'policy_loss("gspo", ..., eps_low=epsilon, eps_high=epsilon_high, agg="seq-mean-token-mean")',
                             "loss_type grpo; " + _TRL_ACCUMULATION),),
                "OpenRLHF": (Peer('policy_loss_type "gspo"',
                                  'policy_loss("gspo", ..., eps_low=clip_eps_low, eps_high=clip_eps_high, dual_clip=dual_clip, '
                                  'agg="seq-mean-token-mean", count_eps=1e-8, empty_rows="exclude")',
                                  "gspo forces token_level_loss=False; " + _ORLHF_LOOP),)},
               "Zheng et al., arXiv:2507.18071 (2025); Ye et al. (dual clip), AAAI (2020)"),
        Method("gspo_token", "GSPO (token form)", _ppo, True, "seq-mean-token-mean", dict(_CLIP),
               {"verl": (Peer('policy_loss "gspo"',
                              'policy_loss("gspo_token", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, '
                              'agg="seq-mean-token-mean", count_eps=1e-8, empty_rows="exclude")',
                              "verl caps the row's mean log-ratio at 10 (not here); " + _VERL_SEQ),)},
               "Zheng et al., arXiv:2507.18071 (2025)"),
        Method("cispo", "CISPO", _cispo, False, "token-mean", dict(_CLIP),
               {"verl": (Peer('policy_loss "cispo"',
                              'policy_loss("cispo", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, log_ratio_clamp=20, agg=loss_agg_mode)',
                              _VERL_LOOP),),
                "TRL": (Peer('loss_type "cispo"',
                             'policy_loss("cispo", ..., eps_low=None, eps_high=epsilon_high - 1, agg="token-mean", norm=num_items_in_batch)',
                             "epsilon_high = 5.0 (TRL's advice for cispo); " + _TRL_ITEMS, {"epsilon_high": 5.0}),)},
               "MiniMax, arXiv:2506.13585 (2025), Eq. 4-5"),
        Method("cispo_seq", "CISPO (sequence ratio)", _cispo, True, "token-mean", dict(_CLIP),
               {"TRL": (Peer('loss_type "cispo", importance_sampling_level "sequence"',
                             'policy_loss("cispo_seq", ..., eps_low=None, eps_high=epsilon_high - 1, agg="token-mean", norm=num_items_in_batch)',
                             "epsilon_high = 5.0 (TRL's advice for cispo); " + _TRL_ITEMS, {"epsilon_high": 5.0}),)},
               "MiniMax, arXiv:2506.13585 (2025); Zheng et al. (the sequence ratio), arXiv:2507.18071 (2025)"),
        Method("sapo", "SAPO", _sapo, False, "token-mean", {"sapo_tau": (1.0, 1.05)},
               {"verl": (Peer('policy_loss "sapo"',
                              'policy_loss("sapo", ..., sapo_tau=(tau_pos, tau_neg), agg="seq-mean-token-mean", count_eps=1e-8, '
                              'empty_rows="exclude", log_ratio_clamp=20)', _VERL_SEQ),),
                "TRL": (Peer('loss_type "sapo"',
                             'policy_loss("sapo", ..., sapo_tau=(sapo_temperature_pos, sapo_temperature_neg), agg="seq-mean-token-mean")',
                             "grpo's aggregation; " + _TRL_ACCUMULATION),)},
               "Gao et al., arXiv:2511.20347 (2025)"),
        Method("sapo_seq", "SAPO (sequence ratio)", _sapo, True, "seq-mean-token-mean", {"sapo_tau": (1.0, 1.05)},
               {"TRL": (Peer('loss_type "sapo", importance_sampling_level "sequence"',
                             'policy_loss("sapo_seq", ..., sapo_tau=(sapo_temperature_pos, sapo_temperature_neg), agg="seq-mean-token-mean")',
                             "grpo's aggregation; " + _TRL_ACCUMULATION),)},
               "Gao et al., arXiv:2511.20347 (2025); Zheng et al. (the sequence ratio), arXiv:2507.18071 (2025)"),
        Method("vespo", "VESPO", _vespo, True, "token-mean", {"vespo_k": (2.0, 3.0), "vespo_lambda": (3.0, 2.0)},
               {"TRL": (Peer('loss_type "vespo"',
                             'policy_loss("vespo", ..., vespo_k=(vespo_k_pos, vespo_k_neg), vespo_lambda=(vespo_lambda_pos, vespo_lambda_neg), '
                             'log_ratio_clamp=20, agg="token-mean", norm=num_items_in_batch)',
                             "TRL also clamps log W to [ln 1e-8, 20] (not here); " + _TRL_ITEMS),)},
               "VESPO, arXiv:2602.10693 (2026)"),
        Method("gmpo", "GMPO", _gmpo, True, None, {"gmpo_clip": (0.4, 0.4)},
               {"verl": (Peer('policy_loss "geo_mean"', 'policy_loss("gmpo", ..., gmpo_clip=(clip_ratio_low, clip_ratio_high))',
                              "the mean over all B rows whatever loss_agg_mode says; verl's n_i + 1e-8 is max(n_i, 1) here (relative 1e-8/n_i)"),)},
               "Zhao et al., arXiv:2507.20673 (2025)"),
        Method("clip_cov", "Clip-Cov", _clip_cov, False, "token-mean", dict(_CLIP),
               {"verl": (Peer('policy_loss "clip_cov"',
                              'policy_loss("clip_cov", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, '
                              'selected=clip_cov_selection(..., fraction=clip_cov_ratio, bounds=(clip_cov_lb, clip_cov_ub)), agg=loss_agg_mode)',
                              _VERL_LOOP),)},
               "Cui et al., arXiv:2505.22617 (2025), Clip-Cov",
               _SELECTION.format(how="a random draw among the unclipped tokens whose centred covariance of A and log-probability lies in the bounds")),
        Method("kl_cov", "KL-Cov", _kl_cov, False, "token-mean", {"kl_cov_coef": 1.0},
               {"verl": (Peer('policy_loss "kl_cov"',
                              'policy_loss("kl_cov", ..., kl_cov_coef=ppo_kl_coef, selected=kl_cov_selection(..., fraction=kl_cov_ratio), '
                              'agg=loss_agg_mode)', _VERL_LOOP),)},
               "Cui et al., arXiv:2505.22617 (2025), KL-Cov",
               _SELECTION.format(how="the tokens of largest centred covariance of A and log-probability in the batch")),
        Method("is", "token IS", lambda: -sg(r) * A * ell, False, "token-mean", {},
               {}, "the unclipped importance-sampling surrogate (CISPO without a clip)"),
    )
}
"""Every policy loss, by name, in the order of the chapters' tables."""


def method(method: str) -> Method:
    """The registry entry called ``method``; a ``ValueError`` naming the known methods otherwise.

    Examples
    --------
    >>> from derivations.methods import method
    >>> method("ppo").parameters
    {'eps_low': 0.2, 'eps_high': 0.2, 'dual_clip': None}
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {tuple(METHODS)}, got {method!r}")
    return METHODS[method]


PARAMETER_SYMBOLS: dict[str, sp.Symbol | tuple[sp.Symbol, sp.Symbol]] = {
    "eps_low": eps_l, "eps_high": eps_h, "dual_clip": c, "sapo_tau": (tau_pos, tau_neg), "gmpo_clip": (delta_l, delta_h), "kl_cov_coef": beta,
}
"""The symbol (or pair of symbols) of each parameter in the registry's formulas; VESPO's per-sign pairs select one :data:`k`, :data:`lam` by the sign of :math:`A` and have none."""


def symbol_values(method: str, **options: object) -> dict:
    r"""The values of ``method``'s parameters as values of its formula's symbols: the registry's defaults, overridden by ``options``.

    A pair parameter gives a value to each of its symbols: SAPO's
    ``sapo_tau=(1.0, 1.05)`` is :math:`\tau_+ = 1`, :math:`\tau_- = 1.05`.  A parameter
    set to ``None`` (no dual clip, CISPO's one-sided cap) gives none.

    Examples
    --------
    >>> from derivations.methods import symbol_values
    >>> symbol_values("sapo", sapo_tau=(2.0, 3.0))
    {tau_+: 2.0, tau_-: 3.0}
    >>> symbol_values("ppo", eps_high=0.28)
    {varepsilon_l: 0.2, varepsilon_h: 0.28}
    """
    m = globals()["method"](method)
    unknown = set(options) - set(m.parameters)
    if unknown:
        raise ValueError(f"options must be parameters of {method!r} {tuple(m.parameters)}, got {sorted(unknown)}")
    out: dict = {}
    for name, value in {**m.parameters, **options}.items():
        symbols = PARAMETER_SYMBOLS.get(name)
        if value is None or symbols is None:
            continue
        out.update(zip(symbols, value) if isinstance(symbols, tuple) else {symbols: value})
    return out


CONSTANTS = (eps_l, eps_h, c, tau_pos, tau_neg, delta_l, delta_h, k, lam, beta)
"""Every constant of the registry's formulas (each a positive symbol): the symbols of a loss beyond :data:`ell`, :data:`ell0`, :data:`r` and :data:`A`."""


def symbol_defaults() -> dict:
    r"""A value for each constant of :data:`CONSTANTS` whose parameter has a default: the default of the parameter it stands for.

    Each method's :func:`symbol_values` at its defaults, the first method that
    names a symbol giving its value; VESPO's per-sign pairs have no symbol
    (:data:`PARAMETER_SYMBOLS`), and its formula's one :data:`k`, :data:`lam`
    take the pairs' entries for :math:`A \ge 0`.  :data:`c` has none (no dual
    clip by default).  A caller that evaluates a registry formula without
    stating every constant (the variant checker's numeric confirmation) reads
    these.

    Examples
    --------
    >>> from derivations.methods import symbol_defaults, tau_neg, tau_pos
    >>> defaults = symbol_defaults()
    >>> defaults[tau_pos], defaults[tau_neg]
    (1.0, 1.05)
    """
    out: dict = {}
    for name in METHODS:
        for symbol, value in symbol_values(name).items():
            out.setdefault(symbol, value)
    vespo = METHODS["vespo"].parameters
    out.setdefault(k, vespo["vespo_k"][0])
    out.setdefault(lam, vespo["vespo_lambda"][0])
    return out


@dataclass(frozen=True)
class Form:
    """A method with the optional parameters that change its formula: ``METHODS[method].loss(**options)``."""

    name: str
    method: str
    options: dict = field(default_factory=dict)
    label: str = ""

    def loss(self) -> sp.Expr:
        """The per-token loss of this form."""
        return METHODS[self.method].loss(**self.options)


FORMS: dict[str, Form] = {
    f.name: f
    for f in (
        Form("reinforce", "reinforce", {}, "REINFORCE"),
        Form("gpg", "gpg", {}, "GPG"),
        Form("ppo", "ppo", {"dual_clip": None}, "PPO/GRPO"),
        Form("ppo_dual_clip", "ppo", {"dual_clip": c}, "dual-clip PPO"),
        Form("cispo", "cispo", {"eps_low": eps_l}, "CISPO"),
        Form("cispo_cap", "cispo", {"eps_low": None}, "CISPO (one-sided)"),
        Form("sapo", "sapo", {}, "SAPO"),
        Form("clip_cov_kept", "clip_cov", {"selected": False}, "Clip-Cov (unselected token)"),
        Form("clip_cov_selected", "clip_cov", {"selected": True}, "Clip-Cov (selected token)"),
        Form("kl_cov_kept", "kl_cov", {"selected": False}, "KL-Cov (unselected token)"),
        Form("kl_cov_selected", "kl_cov", {"selected": True}, "KL-Cov (selected token)"),
        Form("is", "is", {}, "token IS"),
    )
}
"""The per-token forms: each token method, PPO with ``dual_clip``, CISPO with ``eps_low=None``, and Clip-Cov's and KL-Cov's selected and unselected tokens."""

TOKEN_FORMS = tuple(FORMS)
"""The names of :data:`FORMS`, in table order."""


def form(method: str, **options: object) -> str:
    """The per-token form of ``method`` that ``options`` select: PPO with ``dual_clip`` set, CISPO with ``eps_low=None``, Clip-Cov's and KL-Cov's token ``selected`` or not.

    Examples
    --------
    >>> from derivations.methods import form
    >>> form("ppo"), form("ppo", dual_clip=None), form("sapo", sapo_tau=(1.0, 1.05))
    ('ppo', 'ppo', 'sapo')
    >>> form("kl_cov", selected=True, kl_cov_coef=1.0)
    'kl_cov_selected'
    """
    m = globals()["method"](method)
    if m.sequence_level:
        raise ValueError(f"method {method!r} is sequence-level: it has no per-token form")
    if method in ("clip_cov", "kl_cov"):
        if "selected" not in options:
            raise ValueError(f"selected is required for {method!r}: a selected and an unselected token have different losses")
        return f"{method}_{'selected' if _selected(options['selected']) else 'kept'}"
    if method == "ppo" and options.get("dual_clip") is not None:
        return "ppo_dual_clip"
    if method == "cispo" and "eps_low" in options and options["eps_low"] is None:
        return "cispo_cap"
    return method


def form_of(form: str) -> Form:
    """The :class:`Form` called ``form``; a ``ValueError`` naming the known forms otherwise.

    Examples
    --------
    >>> from derivations.methods import form_of
    >>> form_of("cispo_cap").options
    {'eps_low': None}
    """
    if not isinstance(form, str) or form not in FORMS:
        raise ValueError(f"form must be one of {TOKEN_FORMS}, got {form!r}")
    return FORMS[form]


def peer_table() -> str:
    r"""Each peer's name for a method and the package call that reproduces it, with the commit read, as a LaTeX array.

    Examples
    --------
    >>> from derivations.methods import peer_table
    >>> print(peer_table().splitlines()[3][:60])
    \text{verl @ b178a3c} & \text{policy\_loss "gpg"} & \mathtt{
    """
    esc = lambda x: x.replace("_", r"\_").replace("{", r"\{").replace("}", r"\}")  # noqa: E731
    lines = [r"\begin{array}{lll}", r"\text{trainer @ commit} & \text{their name} & \text{package call} \\ \hline"]
    for trainer in PEER_COMMITS:
        for m in METHODS.values():
            for peer in m.peers.get(trainer, ()):
                lines.append(rf"\text{{{trainer} @ {PEER_COMMITS[trainer][:7]}}} & \text{{{esc(peer.name)}}} & \mathtt{{{esc(peer.call)}}} \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)


def known_token_forms() -> dict[str, str]:
    """``{form name: label}`` of every per-token form, for the variant checker's list of known methods.

    Clip-Cov's and KL-Cov's forms are a selected and an unselected token: a
    checker that matches a loss with one of them can certify that token's
    weight, and must report the method's :func:`undecided` note for the rest.

    Examples
    --------
    >>> from derivations.methods import known_token_forms
    >>> known_token_forms()["cispo_cap"]
    'CISPO (one-sided)'
    """
    return {name: f.label for name, f in FORMS.items()}


def undecided(name: str) -> str:
    """What a check of the per-token loss cannot state about a method or form (``""`` when the per-token loss is the whole method).

    Clip-Cov and KL-Cov choose their selected tokens from the whole batch, so
    the weight of each kind of token is certified and the expected update is
    left undecided.

    Examples
    --------
    >>> from derivations.methods import undecided
    >>> undecided("ppo"), undecided("clip_cov_selected")[:60]
    ('', 'which tokens are selected depends on the whole batch (a rand')
    """
    if not isinstance(name, str) or name not in {**METHODS, **FORMS}:
        raise ValueError(f"name must be a method {tuple(METHODS)} or a form {TOKEN_FORMS}, got {name!r}")
    return METHODS[FORMS[name].method if name in FORMS else name].undecided
