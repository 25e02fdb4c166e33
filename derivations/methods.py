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

Optional parameters change the formula, not only its constants: PPO with
``dual_clip`` (the constant :math:`c > 1`) bounds the loss of a negative
advantage by :math:`-cA`, and CISPO with ``eps_low=None`` caps the stopped
weight from above only.  Each such choice is a *form* of the method, named by
:func:`form` (``"ppo"`` or ``"ppo_dual_clip"``, ``"cispo"`` or ``"cispo_cap"``);
:data:`FORMS` lists every form with its method and the options that select it.
A form's name is never the name of another method.

Symbols: :data:`ell`, :data:`ell0`, :data:`r`, :data:`A`, :data:`eps_l`,
:data:`eps_h`, :data:`c` (dual clip), :data:`tau` (SAPO's temperature),
:data:`delta_l`, :data:`delta_h` (GMPO's clip range in log space) and the
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
['reinforce', 'gpg', 'ppo', 'gspo', 'gspo_token', 'cispo', 'sapo', 'gmpo', 'is']
>>> form("ppo", dual_clip=3.0), form("cispo", eps_low=None), form("cispo", eps_low=0.2)
('ppo_dual_clip', 'cispo_cap', 'cispo')
>>> METHODS["cispo"].loss(eps_low=None)
-A*ell*sg(Min(r, varepsilon_h + 1))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp

__all__ = [
    "FORMS",
    "METHODS",
    "PEER_COMMITS",
    "TOKEN_FORMS",
    "Form",
    "Method",
    "form",
    "form_of",
    "known_token_forms",
    "method",
    "peer_table",
]

ell, ell0 = sp.symbols("ell ell_0", real=True)
r = sp.Symbol("r", positive=True)
A = sp.Symbol("A", real=True)
eps_l, eps_h = sp.symbols("varepsilon_l varepsilon_h", positive=True)
c = sp.Symbol("c", positive=True)
tau = sp.Symbol("tau", positive=True)
delta_l, delta_h = sp.symbols("delta_l delta_h", positive=True)
sg = sp.Function("sg")
"""Stop-gradient in notation: the value of its argument, derivative 0."""


def _clip(x, low=1 - eps_l, high=1 + eps_h):
    return sp.Min(sp.Max(x, low), high)


def _ppo(dual_clip=None) -> sp.Expr:
    ppo = -sp.Min(r * A, _clip(r) * A)
    if dual_clip is None:
        return ppo
    return sp.Piecewise((ppo, A >= 0), (-sp.Max(sp.Min(r * A, _clip(r) * A), c * A), True))


def _cispo(eps_low=0.2) -> sp.Expr:
    weight = sp.Min(r, 1 + eps_h) if eps_low is None else _clip(r)
    return -sg(weight) * A * ell


def _sapo() -> sp.Expr:
    return -4 / tau * A / (1 + sp.exp(-tau * (r - 1)))


def _gmpo() -> sp.Expr:
    """One token's GMPO loss, :math:`-A\\exp g(\\log r)` (a row of one token; :func:`derivations.losses.gmpo_derivation`)."""
    d = sp.log(r)
    g = sp.Piecewise((sp.Min(d, sp.Min(sp.Max(d, -delta_l), delta_h)), A > 0), (sp.Max(d, sp.Min(sp.Max(d, -delta_l), delta_h)), True))
    return -A * sp.exp(g)


@dataclass(frozen=True)
class Method:
    r"""One policy loss: its per-token formula and everything a table or a trainer needs to know about it.

    ``loss(**options)`` is the per-token loss (minimised) for the given optional
    parameters (only ``dual_clip`` and ``eps_low`` change the formula); for a
    sequence-level method it is the loss of a row of one token, in which the
    sequence ratio is the token's ratio.  ``parameters`` maps each parameter the
    method takes to its default; ``peers`` maps a trainer to ``(its name for the
    method, the package call that reproduces it)`` at :data:`PEER_COMMITS`.
    """

    name: str
    label: str
    loss: Callable[..., sp.Expr] = field(repr=False)
    sequence_level: bool
    aggregation: str | None
    parameters: dict = field(default_factory=dict)
    peers: dict = field(default_factory=dict)
    reference: str = ""


PEER_COMMITS = {
    "verl": "b178a3cd56f58b2d502255daba591e92833930a7",
    "TRL": "f2cd57710ae345ea6428ae95363267fcf38a3dc8",
    "OpenRLHF": "3c3be6234e0cb353e76bb8019947db9dfe99fca7",
}
"""The commit of each peer at which the names in :data:`METHODS` and :data:`numeric.TRAINER_MODES` were read."""

_CLIP = {"eps_low": 0.2, "eps_high": 0.2}

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("reinforce", "REINFORCE", lambda: -A * ell, False, "token-mean", {},
               {}, "Williams, Machine Learning 8 (1992)"),
        Method("gpg", "GPG", lambda: -A * ell, False, "token-mean", {},
               {"verl": ('policy_loss "gpg"', 'policy_loss("gpg", ...)')}, "Chu et al., arXiv:2504.02546 (2025)"),
        Method("ppo", "PPO", _ppo, False, "token-mean", {**_CLIP, "dual_clip": None},
               {"verl": ('policy_loss "vanilla"',
                         'policy_loss("ppo", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, dual_clip=clip_ratio_c, log_ratio_clamp=20)'),
                "TRL": ('loss_type "grpo", "bnpo", "dr_grpo", "dapo"',
                        'policy_loss("ppo", ..., eps_low=epsilon, eps_high=epsilon_high, agg=..., norm=...) (TRAINER_MODES)'),
                "OpenRLHF": ('PolicyLoss, policy_loss_type "ppo"',
                             'policy_loss("ppo", ..., eps_low=clip_eps_low, eps_high=clip_eps_high, dual_clip=dual_clip, log_ratio_clamp=20)')},
               "Schulman et al., arXiv:1707.06347 (2017); Ye et al. (dual clip), AAAI (2020)"),
        Method("gspo", "GSPO (sequence form)", _ppo, True, "seq-mean-token-mean", dict(_CLIP),
               {"TRL": ('importance_sampling_level "sequence"', 'policy_loss("gspo", ..., eps_low=epsilon, eps_high=epsilon_high)'),
                "OpenRLHF": ('policy_loss_type "gspo"', 'policy_loss("gspo", ..., eps_low=clip_eps_low, eps_high=clip_eps_high)')},
               "Zheng et al., arXiv:2507.18071 (2025)"),
        Method("gspo_token", "GSPO (token form)", _ppo, True, "seq-mean-token-mean", dict(_CLIP),
               {"verl": ('policy_loss "gspo"', 'policy_loss("gspo_token", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high)')},
               "Zheng et al., arXiv:2507.18071 (2025)"),
        Method("cispo", "CISPO", _cispo, False, "token-mean", dict(_CLIP),
               {"verl": ('policy_loss "cispo"', 'policy_loss("cispo", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high)'),
                "TRL": ('loss_type "cispo"', 'policy_loss("cispo", ..., eps_low=None, eps_high=epsilon_high - 1, norm=num_items_in_batch)')},
               "MiniMax, arXiv:2506.13585 (2025), Eq. 4-5"),
        Method("sapo", "SAPO", _sapo, False, "token-mean", {"sapo_tau": (1.0, 1.05)},
               {"TRL": ('loss_type "sapo"', 'policy_loss("sapo", ..., sapo_tau=(sapo_temperature_pos, sapo_temperature_neg), agg="seq-mean-token-mean")')},
               "Gao et al., arXiv:2511.20347 (2025)"),
        Method("gmpo", "GMPO", _gmpo, True, None, {"gmpo_clip": (0.4, 0.4)},
               {"verl": ('policy_loss "geo_mean"', 'policy_loss("gmpo", ..., gmpo_clip=(clip_ratio_low, clip_ratio_high))')},
               "Zhao et al., arXiv:2507.20673 (2025)"),
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
        Form("is", "is", {}, "token IS"),
    )
}
"""The per-token forms: each token method, and PPO with ``dual_clip``, CISPO with ``eps_low=None``."""

TOKEN_FORMS = tuple(FORMS)
"""The names of :data:`FORMS`, in table order."""


def form(method: str, **options) -> str:
    """The per-token form of ``method`` that ``options`` select: PPO with ``dual_clip`` set, CISPO with ``eps_low=None``.

    Examples
    --------
    >>> from derivations.methods import form
    >>> form("ppo"), form("ppo", dual_clip=None), form("sapo", sapo_tau=(1.0, 1.05))
    ('ppo', 'ppo', 'sapo')
    """
    m = globals()["method"](method)
    if m.sequence_level:
        raise ValueError(f"method {method!r} is sequence-level: it has no per-token form")
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
    >>> print(peer_table().splitlines()[2][:60])
    \text{verl @ b178a3c} & \text{policy\_loss "gpg"} & \mathtt{
    """
    esc = lambda x: x.replace("_", r"\_").replace("{", r"\{").replace("}", r"\}")  # noqa: E731
    lines = [r"\begin{array}{lll}", r"\text{trainer @ commit} & \text{their name} & \text{package call} \\ \hline"]
    for trainer in PEER_COMMITS:
        for m in METHODS.values():
            if trainer in m.peers:
                name, call = m.peers[trainer]
                lines.append(rf"\text{{{trainer} @ {PEER_COMMITS[trainer][:7]}}} & \text{{{esc(name)}}} & \mathtt{{{esc(call)}}} \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)


def known_token_forms() -> dict[str, str]:
    """``{form name: label}`` of every per-token form, for the variant checker's list of known methods.

    Examples
    --------
    >>> from derivations.methods import known_token_forms
    >>> known_token_forms()["cispo_cap"]
    'CISPO (one-sided)'
    """
    return {name: f.label for name, f in FORMS.items()}
