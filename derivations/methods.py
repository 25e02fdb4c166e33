r"""One registry of policy losses: each method declared once, with its per-token loss as a formula.

Every policy loss of :func:`numeric.policy_loss` is an entry of :data:`METHODS`:
its name, its per-token loss as a SymPy expression in the ratio
:math:`r = e^{\ell - \ell_0}`, the log-probability :math:`\ell` and the
advantage :math:`A` (and its parameters; the formulas and their symbols are
:mod:`derivations.token_losses`), whether it is a sequence-level
method, its default aggregation, its parameters with their defaults, the
names trainers give it (:mod:`derivations.peers`), and a reference.  The derived gradient
weights (:mod:`derivations.gradient_weights`, :mod:`derivations.losses`), the
batched loss and weight of :mod:`numeric.losses`, and the chapters' tables all
read it; the torch form of each loss lives in :mod:`numeric.losses.policy_terms`
and is tested against the formula here, values and gradients.

Optional parameters change the formula, not only its constants: PPO (and
GSPO) with ``dual_clip`` (the constant :math:`C_d > 1`, a cap: :math:`C` with :math:`d` for dual) bounds the loss of a
negative advantage by :math:`-cA`, CISPO with ``eps_low=None`` caps the
stopped weight from above only, DPPO's ``dppo_type`` picks its trust region
and ``kl_tau`` adds prime-rl's :math:`\tau(\log r)^2`.  Clip-Cov and KL-Cov
(and TRL's top-entropy mask, AReaL's M2PO) treat a few *selected*
tokens differently from the rest; which tokens are selected depends on the
whole batch (and, for Clip-Cov, on a random draw), so the selection is an
argument (``selected=True`` or ``False`` here, a ``[B, T]`` mask in
:func:`numeric.policy_loss`), each method has a form per case, and
:attr:`Method.undecided` says what no per-token check can state about it.  Each such choice is a *form* of the method, named by
:func:`form` (``"ppo"`` or ``"ppo_dual_clip"``, ``"cispo"`` or ``"cispo_cap"``);
:data:`FORMS` lists every form with its method and the options that select it.
A form's name is never the name of another method.

Symbols (:mod:`derivations.token_losses`): :data:`ell`, :data:`ell0`, :data:`r`, :data:`A`, :data:`eps_l`,
:data:`eps_h`, :data:`c` (dual clip), :data:`tau_pos`, :data:`tau_neg` (SAPO's temperatures for :math:`A > 0` and :math:`A \le 0`),
:data:`delta_l`, :data:`delta_h` (GMPO's clip range in log space, :math:`\tilde\varepsilon_l, \tilde\varepsilon_h`), :data:`k`,
:data:`lam` (VESPO's Gamma weight), :data:`beta` (KL-Cov's coefficient),
:data:`tv_l`, :data:`tv_h` (DPPO's trust region on the probability change),
:data:`c_is` (verl DPPO's truncation), :data:`tau_k2`, :data:`delta_band`,
:data:`beta_dro`, :data:`b_l`, :data:`b_h` (IcePop's band), :data:`delta_opsm` and the
stop-gradient :data:`sg`.

Adding a method is one entry of :data:`METHODS` (and, for the batched loss,
its torch form in :mod:`numeric.losses.policy_terms`), its trainers' rows in
:data:`derivations.peers.PEERS`, plus its tests.

Examples
--------
>>> from derivations.methods import FORMS, METHODS, form
>>> list(METHODS)[:14]
['reinforce', 'gpg', 'ppo', 'gspo', 'gspo_token', 'cispo', 'cispo_seq', 'sapo', 'sapo_seq',
 'vespo', 'gmpo', 'clip_cov', 'kl_cov', 'is']
>>> form("ppo", dual_clip=3.0), form("cispo", eps_low=None), form("cispo", eps_low=0.2)
('ppo_dual_clip', 'cispo_cap', 'cispo')
>>> form("clip_cov", selected=True), form("kl_cov", selected=False)
('clip_cov_selected', 'kl_cov_kept')
>>> form("dppo", kl_tau=1e-3), form("dppo", dppo_type="binary_kl"), form("tv_band")
('dppo_k2', 'dppo_bkl', 'tv_band_k2')
>>> METHODS["cispo"].loss(eps_low=None)
-A*ell*sg(Min(r, varepsilon_h + 1))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp

from . import token_losses as tl
from .peers import PEERS, Peer
from .readings import SNAPSHOTS, require_trainers
from .token_losses import (
    A,
    b_h,
    b_l,
    beta,
    beta_dro,
    c,
    c_is,
    delta_band,
    delta_h,
    delta_l,
    delta_opsm,
    ell,
    ell0,
    eps_h,
    eps_l,
    gamma_weight,
    k,
    lam,
    r,
    sg,
    tau_k2,
    tau_neg,
    tau_pos,
    tv_h,
    tv_l,
)

__all__ = [
    "CONSTANTS",
    "FORMS",
    "METHODS",
    "PARAMETER_SYMBOLS",
    "PEER_COMMITS",
    "PENALISED",
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
    # the symbols of the formulas (derivations.token_losses), read here by their users
    "A", "b_h", "b_l", "beta", "beta_dro", "c", "c_is", "delta_band", "delta_h", "delta_l", "delta_opsm", "ell", "ell0", "eps_h", "eps_l",
    "k", "lam", "r", "sg", "tau_k2", "tau_neg", "tau_pos", "tv_h", "tv_l",
]


@dataclass(frozen=True)
class Method:
    r"""One policy loss: its per-token formula and everything a table or a trainer needs to know about it.

    ``loss(**options)`` is the per-token loss (minimised) for the given optional
    parameters (``dual_clip``, ``eps_low``, ``dppo_type``, ``kl_tau`` and the
    selections' ``selected`` change the formula); for a sequence-level method it is the loss
    of a row of one token, in which the sequence ratio is the token's ratio.
    ``parameters`` maps each parameter the method takes to its default; ``peers``
    maps a trainer to its :class:`Peer` rows (one per name that selects
    the method, each with its citation).  ``undecided`` is empty when the
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


PEER_COMMITS = {s.trainer: s.commit for s in SNAPSHOTS}
"""The newest commit read of each trainer (:data:`derivations.readings.SNAPSHOTS`).  A row's own commit is its
:class:`~derivations.readings.Citation` (verl's older rows were read at ``b178a3c``, its newer ones at ``1dda039``)."""

_CLIP = {"eps_low": 0.2, "eps_high": 0.2}

_SELECTION = (
    "which tokens are selected depends on the whole batch ({how}); the per-token weight of a selected and of an "
    "unselected token is certified, but the expected update (bias, scale, length bias) is a property of the "
    "selection law, which a per-token loss does not carry: undecided"
)


def _method(name, label, loss, sequence_level, aggregation, parameters, reference, undecided="") -> Method:
    return Method(name, label, loss, sequence_level, aggregation, parameters, PEERS.get(name, {}), reference, undecided)


def _dppo(dppo_type: str = "binary_tv", kl_tau: object = 0.0) -> sp.Expr:
    return tl.dppo(dppo_type, kl_tau)


def _tv_band(kl_tau: object = 1e-3) -> sp.Expr:
    return tl.tv_band(kl_tau)


_DPPO_REF = "DPPO, arXiv:2602.04879 (2026), binary TV and binary KL; Kimi K2.5 (the squared log-ratio), arXiv:2602.02276 (2026)"

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _method("reinforce", "REINFORCE", lambda: -A * ell, False, "token-mean", {}, "Williams, Machine Learning 8 (1992)"),
        _method("gpg", "GPG", lambda: -A * ell, False, "token-mean", {}, "Chu et al., arXiv:2504.02546 (2025)"),
        _method("ppo", "PPO", tl.ppo, False, "token-mean", {**_CLIP, "dual_clip": None},
                "Schulman et al., arXiv:1707.06347 (2017); Ye et al. (dual clip), AAAI (2020)"),
        _method("gspo", "GSPO (sequence form)", tl.ppo, True, "seq-mean-token-mean", {**_CLIP, "dual_clip": None},
                "Zheng et al., arXiv:2507.18071 (2025); Ye et al. (dual clip), AAAI (2020)"),
        _method("gspo_token", "GSPO (token form)", tl.ppo, True, "seq-mean-token-mean", dict(_CLIP), "Zheng et al., arXiv:2507.18071 (2025)"),
        _method("cispo", "CISPO", tl.cispo, False, "token-mean", dict(_CLIP), "MiniMax, arXiv:2506.13585 (2025), Eq. 4-5"),
        _method("cispo_seq", "CISPO (sequence ratio)", tl.cispo, True, "token-mean", dict(_CLIP),
                "MiniMax, arXiv:2506.13585 (2025); Zheng et al. (the sequence ratio), arXiv:2507.18071 (2025)"),
        _method("sapo", "SAPO", tl.sapo, False, "token-mean", {"sapo_tau": (1.0, 1.05)}, "Gao et al., arXiv:2511.20347 (2025)"),
        _method("sapo_seq", "SAPO (sequence ratio)", tl.sapo, True, "seq-mean-token-mean", {"sapo_tau": (1.0, 1.05)},
                "Gao et al., arXiv:2511.20347 (2025); Zheng et al. (the sequence ratio), arXiv:2507.18071 (2025)"),
        _method("vespo", "VESPO", tl.vespo, True, "token-mean", {"vespo_k": (2.0, 3.0), "vespo_lambda": (3.0, 2.0)},
                "VESPO, arXiv:2602.10693 (2026)"),
        _method("gmpo", "GMPO", tl.gmpo, True, None, {"gmpo_clip": (0.4, 0.4)}, "Zhao et al., arXiv:2507.20673 (2025)"),
        _method("clip_cov", "Clip-Cov", tl.clip_cov, False, "token-mean", dict(_CLIP), "Cui et al., arXiv:2505.22617 (2025), Clip-Cov",
                _SELECTION.format(how="a random draw among the unclipped tokens whose centred covariance of A and log-probability lies in the bounds")),
        _method("kl_cov", "KL-Cov", tl.kl_cov, False, "token-mean", {"kl_cov_coef": 1.0}, "Cui et al., arXiv:2505.22617 (2025), KL-Cov",
                _SELECTION.format(how="the tokens of largest centred covariance of A and log-probability in the batch")),
        _method("is", "token IS", lambda: -sg(r) * A * ell, False, "token-mean", {}, "the unclipped importance-sampling surrogate (CISPO without a clip)"),
        _method("dppo", "DPPO", _dppo, False, "token-mean", {"tv_delta": (0.2, 0.2), "dppo_type": "binary_tv", "kl_tau": 0.0}, _DPPO_REF),
        _method("dppo_tv", "DPPO binary TV (verl)", lambda: tl.dppo_is("binary_tv"), False, "token-mean",
                {"tv_delta": (0.2, 0.2), "is_cap": 3.0}, _DPPO_REF),
        _method("dppo_kl", "DPPO binary KL (verl)", lambda: tl.dppo_is("binary_kl"), False, "token-mean",
                {"tv_delta": (0.2, 0.2), "is_cap": 3.0}, _DPPO_REF),
        _method("tv_band", "TV band (prime-rl ipo)", _tv_band, False, "token-mean", {"band_delta": 0.1, "kl_tau": 1e-3},
                "prime-rl's ipo loss, loss.py:164-196 at 559b447"),
        _method("dro", "DRO", tl.dro, False, "token-mean", {"dro_beta": None},
                "Richemond et al., 'Offline regularised reinforcement learning for large language models alignment' (DRO), 2024"),
        _method("importance_sampling", "IS surrogate", tl.importance_sampling, False, "token-mean", {},
                "Tinker's importance_sampling loss (SkyRL); the ratio keeps its gradient"),
        _method("icepop", "IcePop", tl.icepop, False, "token-mean", {"is_bounds": (0.5, 5.0)},
                "IcePop (Ling team, 2025); OpenRLHF's vllm_is_correction_type icepop"),
        _method("rollout_is", "rollout IS band", tl.rollout_is, False, "token-mean", dict(_CLIP), "SkyRL's rollout_is (GLM-5, IcePop)"),
        _method("seq_mask_tis", "seq-mask-TIS", tl.icepop, True, "token-mean", {"is_bounds": (0.5, 5.0)},
                "OpenRLHF's seq-mask-tis: a geometric-mean sequence mask times the token ratio"),
        _method("opsm", "OPSM", tl.opsm, True, "token-mean", {**_CLIP, "opsm_delta": 1e-4},
                "DeepSeek-V3.2 technical report (off-policy sequence masking), 2025"),
        _method("luspo", "LUSPO", tl.ppo, True, "seq-mean-token-sum", dict(_CLIP), "LUSPO: GSPO with each row weighted by its length (TRL)"),
        _method("ppo_product", "sequence PPO (product ratio)", tl.ppo, True, None, dict(_CLIP),
                "TRL's RLOOTrainer: PPO's clip on the product of a row's ratios"),
        _method("top_entropy", "top-entropy mask", tl.clip_cov, False, "token-mean", dict(_CLIP),
                "Wang et al., 'Beyond the 80/20 rule: high-entropy minority tokens' (2025); TRL's top_entropy_quantile",
                _SELECTION.format(how="the tokens below a quantile of the micro-batch's entropies, gathered over processes, are selected "
                                  "and dropped; a dropped token stays in the denominators")),
        _method("m2po", "M2PO", tl.clip_cov, False, "token-mean", dict(_CLIP), "M2PO (second-moment trust policy optimization, 2025); AReaL's m2_threshold",
                _SELECTION.format(how="the tokens of largest (log pi_beh - log pi_prox)^2 are selected and dropped until the rest's mean "
                                  "is under the threshold; a dropped token leaves the denominator")),
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
    "tv_delta": (tv_l, tv_h), "is_cap": c_is, "kl_tau": tau_k2, "band_delta": delta_band, "dro_beta": beta_dro, "is_bounds": (b_l, b_h),
    "opsm_delta": delta_opsm,
}
"""The symbol (or pair of symbols) of each parameter in the registry's formulas; VESPO's per-sign pairs select one :data:`k`, :data:`lam`
by the sign of :math:`A` and have none, and DPPO's ``dppo_type`` chooses a formula."""


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


CONSTANTS = (eps_l, eps_h, c, tau_pos, tau_neg, delta_l, delta_h, k, lam, beta, tv_l, tv_h, c_is, tau_k2, delta_band, beta_dro, b_l, b_h,
             delta_opsm)
"""Every constant of the registry's formulas (each a positive symbol): the symbols of a loss beyond :data:`ell`, :data:`ell0`, :data:`r` and :data:`A`."""


def symbol_defaults() -> dict:
    r"""A value for each constant of :data:`CONSTANTS` whose parameter has a default: the default of the parameter it stands for.

    Each method's :func:`symbol_values` at its defaults, the first method that
    names a symbol with a positive value giving its value (DPPO's ``kl_tau = 0``,
    "off", gives none; prime-rl's TV band's :math:`10^{-3}` does); VESPO's per-sign pairs have no symbol
    (:data:`PARAMETER_SYMBOLS`), and its formula's one :data:`k`, :data:`lam`
    take the pairs' entries for :math:`A \ge 0`.  :data:`c` has none (no dual
    clip by default); DRO's :data:`beta_dro` has no default either (verl refuses
    a null ``dro_beta``), and takes 0.1, the value its trainer row sets.  A caller that evaluates a registry formula without
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
            if value > 0:
                out.setdefault(symbol, value)
    vespo = METHODS["vespo"].parameters
    out.setdefault(k, vespo["vespo_k"][0])
    out.setdefault(lam, vespo["vespo_lambda"][0])
    out.setdefault(beta_dro, 0.1)
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
        Form("importance_sampling", "importance_sampling", {}, "IS surrogate (-r A)"),
        Form("dppo", "dppo", {"dppo_type": "binary_tv", "kl_tau": 0}, "DPPO (binary TV)"),
        Form("dppo_k2", "dppo", {"dppo_type": "binary_tv", "kl_tau": tau_k2}, "DPPO (binary TV) + tau (log r)^2"),
        Form("dppo_bkl", "dppo", {"dppo_type": "binary_kl", "kl_tau": 0}, "DPPO (binary KL)"),
        Form("dppo_bkl_k2", "dppo", {"dppo_type": "binary_kl", "kl_tau": tau_k2}, "DPPO (binary KL) + tau (log r)^2"),
        Form("dppo_tv", "dppo_tv", {}, "DPPO binary TV (verl: truncated, stopped ratio)"),
        Form("dppo_kl", "dppo_kl", {}, "DPPO binary KL (verl: truncated, stopped ratio)"),
        Form("tv_band", "tv_band", {"kl_tau": 0}, "TV band"),
        Form("tv_band_k2", "tv_band", {"kl_tau": tau_k2}, "TV band + tau (log r)^2 (prime-rl ipo)"),
        Form("dro", "dro", {}, "DRO"),
        Form("icepop", "icepop", {}, "IcePop"),
        Form("rollout_is", "rollout_is", {}, "rollout IS band (open)"),
        Form("opsm", "opsm", {}, "OPSM (a row of one token)"),
        Form("top_entropy_kept", "top_entropy", {"selected": False}, "top-entropy mask (kept token)"),
        Form("top_entropy_selected", "top_entropy", {"selected": True}, "top-entropy mask (dropped token)"),
        Form("m2po_kept", "m2po", {"selected": False}, "M2PO (kept token)"),
        Form("m2po_selected", "m2po", {"selected": True}, "M2PO (dropped token)"),
    )
}
r"""The per-token forms: each token method, PPO with ``dual_clip``, CISPO with ``eps_low=None``, DPPO's two trust regions with and
without prime-rl's :math:`\tau(\log r)^2`, the selections' selected and unselected tokens, and OPSM's row of one token (the one
sequence-level method whose row of one token is no other form)."""

PENALISED = {"dppo": ("dppo_k2", tau_k2, 1), "dppo_bkl": ("dppo_bkl_k2", tau_k2, 1), "tv_band": ("tv_band_k2", tau_k2, 1),
             "reinforce": ("dro", beta_dro, sp.Rational(1, 2))}
r"""A form, and its twin with an advantage-free :math:`f\,s\,(\log r)^2` added: ``{form: (twin, s, f)}``.  The twin's weight at
:math:`A \ne 0` is the form's, plus :math:`-2fs\log r/A`; a checker that reads the penalty apart (its coefficient is :math:`fs`)
names the twin and reads :math:`s`."""

TOKEN_FORMS = tuple(FORMS)
"""The names of :data:`FORMS`, in table order."""


_SELECTING = ("clip_cov", "kl_cov", "top_entropy", "m2po")


def form(method: str, **options: object) -> str:
    """The per-token form of ``method`` that ``options`` select: PPO with ``dual_clip`` set, CISPO with ``eps_low=None``, DPPO's
    ``dppo_type`` and ``kl_tau``, the TV band's ``kl_tau``, a selecting method's token ``selected`` or not.

    Examples
    --------
    >>> from derivations.methods import form
    >>> form("ppo"), form("ppo", dual_clip=None), form("sapo", sapo_tau=(1.0, 1.05))
    ('ppo', 'ppo', 'sapo')
    >>> form("kl_cov", selected=True, kl_cov_coef=1.0)
    'kl_cov_selected'
    >>> form("dppo", dppo_type="binary_kl", kl_tau=1e-3), form("tv_band", kl_tau=0.0)
    ('dppo_bkl_k2', 'tv_band')
    """
    m = globals()["method"](method)
    if m.sequence_level:
        raise ValueError(f"method {method!r} is sequence-level: it has no per-token form")
    if method in _SELECTING:
        if "selected" not in options:
            raise ValueError(f"selected is required for {method!r}: a selected and an unselected token have different losses")
        return f"{method}_{'selected' if tl.selected_token(options['selected']) else 'kept'}"
    if method == "ppo" and options.get("dual_clip") is not None:
        return "ppo_dual_clip"
    if method == "cispo" and "eps_low" in options and options["eps_low"] is None:
        return "cispo_cap"
    penalised = options.get("kl_tau", m.parameters.get("kl_tau")) not in (None, 0, 0.0)
    if method == "dppo":
        base = "dppo" if options.get("dppo_type", "binary_tv") == "binary_tv" else "dppo_bkl"
        return base + ("_k2" if penalised else "")
    if method == "tv_band":
        return "tv_band_k2" if penalised else "tv_band"
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


def peer_table(trainers: tuple | None = None) -> str:
    r"""Each trainer's name for a method and the package call that reproduces it, with the commit read, as a LaTeX array.

    ``trainers`` limits the rows to those trainers (all of them by default).

    Examples
    --------
    >>> from derivations.methods import peer_table
    >>> print(peer_table().splitlines()[3][:60])
    \text{verl @ b178a3c} & \text{policy\_loss "gpg"} & \mathtt{
    """
    trainers = require_trainers(trainers)
    esc = lambda x: x.replace("_", r"\_").replace("{", r"\{").replace("}", r"\}")  # noqa: E731
    lines = [r"\begin{array}{lll}", r"\text{trainer @ commit} & \text{their name} & \text{package call} \\ \hline"]
    for trainer in PEER_COMMITS if trainers is None else trainers:
        for m in METHODS.values():
            for peer in m.peers.get(trainer, ()):
                lines.append(rf"\text{{{trainer} @ {peer.cite.commit[:7]}}} & \text{{{esc(peer.name)}}} & \mathtt{{{esc(peer.call)}}} \\")
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

    Clip-Cov and KL-Cov (and the top-entropy mask, M2PO) choose their selected tokens from the whole batch, so
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
