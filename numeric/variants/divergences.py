r"""The names trainers share and mean differently: one row per name, one column per trainer, each cell computed from the registry.

A name a trainer ships means what it means *in that trainer at that commit*.  Several names are shared and do not mean the same
thing: CISPO is a band on the stopped ratio in verl, SkyRL, slime and AReaL and an absolute cap in TRL and ms-swift; GSPO's
token weight is the sequence ratio's everywhere, but each trainer aggregates it its own way; verl's ``seq-mean-token-sum-norm``
changed its meaning between two commits; DPPO's truncated, stopped ratio in verl is the ratio itself in SkyRL and prime-rl.  Each
cell is computed when the table is built:

* a policy loss's cell is the derived gradient weight (:func:`derivations.losses.weight`) of the form the trainer's row calls
  (:data:`derivations.peers.PEERS`), its constants written in the trainer's own parametrisation (:data:`SYMBOLS`: TRL's
  ``epsilon_high`` is the cap itself, verl's ``clip_ratio_high`` the cap minus 1), and the row's aggregation weight
  :math:`\kappa` (:func:`numeric.losses.aggregation.kappa_latex`);
* an aggregation name's cell is each reading's :math:`\kappa` (:data:`numeric.losses.TRAINER_MODES`), commit by commit.

The sign of verl's ``k1`` rejection statistic (:math:`-\log r` against AReaL's :math:`+\log r`) is a rollout correction's, not a
policy loss's: it is not a row here.
"""

from __future__ import annotations

import ast

import sympy as sp

from derivations import losses as derived
from derivations.methods import METHODS, PEER_COMMITS, c_is, form, tau_k2
from derivations.peers import Peer
from derivations.readings import require_trainers

from ..losses.aggregation import TRAINER_MODES, Reading, kappa_latex
from .field import TRAINER_DEFAULTS

__all__ = ["DIVERGENT_NAMES", "SYMBOLS", "divergence_cells", "divergence_table"]

_EPS_L, _EPS_H = sp.symbols("varepsilon_l varepsilon_h", positive=True)
_DELTA_L, _DELTA_H = sp.symbols(r"\delta_{\mathrm{low}} \delta_{\mathrm{high}}", positive=True)
_CAP = sp.Symbol("C", positive=True)
_TAU = sp.Symbol(r"\tau_{\mathrm{KL}}", positive=True)
SYMBOLS = {
    "clip_ratio_low": _EPS_L, "clip_ratio_high": _EPS_H, "epsilon": _EPS_L, "epsilon_high": _EPS_H, "eps_clip_low": _EPS_L,
    "eps_clip_high": _EPS_H, "cispo_eps_clip_low": _EPS_L, "cispo_eps_clip_high": _EPS_H, "eps_clip": _EPS_L, "eps_clip_higher": _EPS_H,
    "clip_eps_low": _EPS_L, "clip_eps_high": _EPS_H, "dppo_mask_low": _DELTA_L, "dppo_mask_high": _DELTA_H, "delta_low": _DELTA_L,
    "delta_high": _DELTA_H, "clip_ratio_c": _CAP, "kl_tau": _TAU,
}
"""Each trainer's configuration name for a constant, as the generic symbol a cell shows: :math:`\\varepsilon_l, \\varepsilon_h` the
trainer's low and high clip fields *as the trainer writes them* (TRL's ``epsilon_high`` is the cap itself, SkyRL's
``cispo_eps_clip_high`` the cap minus 1), :math:`\\delta_{\\mathrm{low}}, \\delta_{\\mathrm{high}}` DPPO's thresholds, :math:`\\tau_{\\mathrm{KL}}` prime-rl's ``kl_tau``, :math:`C` verl's ``clip_ratio_c``."""

_TRAINERS = tuple(PEER_COMMITS)


def _symbolic(node: ast.expr, config: dict):
    """A keyword of a peer call as a SymPy expression in :data:`SYMBOLS` (a constant, a name, a tuple, ``+ - * /``); a name that
    chooses a formula (DPPO's ``dppo_type``) takes its value from the trainer's configuration."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if isinstance(config.get(node.id), str):
            return config[node.id]
        return SYMBOLS.get(node.id, sp.Symbol(node.id))
    if isinstance(node, ast.Tuple):
        return tuple(_symbolic(e, config) for e in node.elts)
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}
        return ops[type(node.op)](_symbolic(node.left, config), _symbolic(node.right, config))
    raise ValueError(f"a peer call's keyword must be a number, a name, a tuple or arithmetic of them, got {ast.unparse(node)!r}")


def _keywords(peer: Peer, trainer: str) -> dict:
    tree = ast.parse(peer.call, mode="eval").body
    assert isinstance(tree, ast.Call)
    config = {**TRAINER_DEFAULTS.get(trainer, {}), **peer.config}
    return {kw.arg: _symbolic(kw.value, config) for kw in tree.keywords}


def _kappa(method: str, keywords: dict) -> str:
    """The row's aggregation weight, as :func:`numeric.losses.aggregation.kappa_latex` writes it."""
    agg = keywords.get("agg")
    if not isinstance(agg, str):
        agg = METHODS[method].aggregation or ("seq-mean-token-sum" if method == "ppo_product" else "seq-mean-token-mean")
    if keywords.get("convention"):
        trainer, commit = str(keywords["convention"]).split("@")
        return kappa_latex(TRAINER_MODES[(trainer, agg, commit)])
    args = {k: keywords[k] for k in ("count_eps", "empty_rows") if k in keywords}
    if "norm" in keywords:
        args["norm"] = "N" if agg == "token-mean" else "D"
    return kappa_latex(Reading(agg, args, "", None))  # type: ignore[arg-type]


_ROW = sp.Symbol(r"\tilde r_i", positive=True)
_TOKEN_TWIN = {"gspo": ("ppo", _ROW), "gspo_token": ("ppo", _ROW), "luspo": ("ppo", _ROW), "cispo_seq": ("cispo", _ROW)}
"""A sequence-level method's token form and the row's ratio it reads (the geometric mean :math:`\tilde r_i`)."""


def _weight(method: str, keywords: dict) -> sp.Expr:
    """The derived weight of the row's form with the row's constants in :data:`SYMBOLS`; verl's and SkyRL's mask as :math:`k`."""
    options = {k: v for k, v in keywords.items() if k in ("dual_clip", "eps_low", "dppo_type", "kl_tau")}
    twin, ratio = _TOKEN_TWIN.get(method, (method, None))
    name = form(twin, **{k: (v if not isinstance(v, sp.Basic) else 1.0) for k, v in options.items()})
    w = derived.weight(name) if ratio is None else derived.weight(name).subs(derived.r, ratio)
    values = {derived.eps_l: keywords.get("eps_low"), derived.eps_h: keywords.get("eps_high"), derived.c: keywords.get("dual_clip"),
              c_is: keywords.get("is_cap")}
    w = w.subs({s: v for s, v in values.items() if v is not None})
    masks = [p for p in w.atoms(sp.Piecewise) if {v for v, _ in p.args} <= {0, 1} and p.has(derived.ell0)]
    k = sp.Symbol(r"k_{\mathrm{KL}}" if "kl" in name else r"k_{\mathrm{TV}}")  # DPPO's mask: binary KL or binary TV
    return w.xreplace({p: k for p in masks}) if masks else w


_NAMED_WEIGHTS = {"ppo": r"w_{\mathrm{PPO}}", "ppo_dual_clip": r"w_{\mathrm{dual}}"}
"""Weights shown by name (their formulas are chapter 5's): what differs between the trainers is where they are read."""


_CLIP = sp.Function(r"\mathrm{clip}")


def _clip_shown(w: sp.Expr) -> sp.Expr:
    """``min(hi, max(x, lo))`` written ``clip(x, lo, hi)``, as the chapters write it (a display: the weight is unchanged)."""
    def clip(e):
        inner = [a for a in e.args if isinstance(a, sp.Max)]
        if len(e.args) == 2 and len(inner) == 1 and len(inner[0].args) == 2:
            hi = next(a for a in e.args if a is not inner[0])
            x, lo = sorted(inner[0].args, key=lambda a: 0 if a.has(derived.r) or a.free_symbols & {_ROW} else 1)
            return _CLIP(x, lo, hi)
        return e
    return w.replace(lambda e: isinstance(e, sp.Min), clip)


def _weight_latex(method: str, keywords: dict) -> str:
    """``w = ...`` of the row, compact, and ``p = ...``: the part of the gradient no advantage multiplies (prime-rl's penalty)."""
    options = {k: v for k, v in keywords.items() if k in ("dual_clip", "eps_low", "dppo_type", "kl_tau")}
    twin, ratio = _TOKEN_TWIN.get(method, (method, None))
    name = form(twin, **{k: (v if not isinstance(v, sp.Basic) else 1.0) for k, v in options.items()})
    if name in _NAMED_WEIGHTS:
        return rf"w = {_NAMED_WEIGHTS[name]}({sp.latex(derived.r if ratio is None else ratio)})"
    out = rf"w = {sp.latex(_clip_shown(_weight(method, keywords)))}"
    p = derived.penalty_gradient(name)
    if p != 0:
        p = sp.expand(p.subs(derived.ell, derived.ell0 + sp.log(derived.r))).subs(tau_k2, keywords.get("kl_tau", tau_k2))
        out += rf" \\ p = {sp.latex(sp.factor(p))}"
    return out


def _loss_cell(method_names: tuple, trainer: str) -> str:
    """Each of the trainer's rows for these methods: :math:`w` and :math:`\\kappa`, one line each."""
    lines = []
    for name in method_names:
        for peer in METHODS[name].peers.get(trainer, ()):
            keywords = _keywords(peer, trainer)
            lines += [_weight_latex(name, keywords), rf"\kappa = {_kappa(name, keywords)}"]
    return r"\begin{array}{l}" + r" \\ ".join(lines) + r"\end{array}" if lines else r"\text{-}"


def _reading_cell(names: tuple, trainer: str) -> str:
    """Each reading of these aggregation names in the trainer, commit by commit: :math:`\\kappa`."""
    lines = [rf"\text{{{commit}: }} {kappa_latex(reading)}" for (t, name, commit), reading in TRAINER_MODES.items() if t == trainer and name in names]
    return r"\begin{array}{l}" + r" \\ ".join(lines) + r"\end{array}" if lines else r"\text{-}"


def _ratio_cell(trainer: str) -> str:
    """The row ratios the trainer's sequence-level methods read: the geometric mean or the product of the token ratios."""
    geometric, product = r"\exp\bigl(\tfrac{1}{n_i}\textstyle\sum_t \log r_{it}\bigr)", r"\textstyle\prod_t r_{it}"
    kinds = []
    for name, m in METHODS.items():
        if m.sequence_level and m.peers.get(trainer):
            kind = "product" if name in ("vespo", "ppo_product") else "geometric mean"
            kinds.append((name, kind))
    if not kinds:
        return r"\text{-}"
    seen: dict = {}
    for label, kind in kinds:
        seen.setdefault(kind, []).append(label)
    lines = [line for kind, labels in seen.items() for line in (geometric if kind == "geometric mean" else product, rf"\text{{{', '.join(labels)}}}")]
    return r"\begin{array}{l}" + r" \\ ".join(lines) + r"\end{array}"


DIVERGENT_NAMES = {
    "CISPO": ("loss", ("cispo", "cispo_seq")),
    "GSPO": ("loss", ("gspo", "gspo_token", "luspo")),
    "DPPO": ("loss", ("dppo", "dppo_tv", "dppo_kl")),
    "sequence ratio": ("ratio", ()),
    "seq-mean-token-sum-norm, dr_grpo": ("reading", ("seq-mean-token-sum-norm", "dr_grpo", "seq_mean_token_sum_norm")),
}
"""Each name shared by several trainers with different meanings, and what its cells read: a loss's registry methods, the row
ratio of every sequence-level method, or an aggregation name's readings (verl's ``seq-mean-token-sum-norm`` at both commits, and
TRL's and ms-swift's ``dr_grpo``, SkyRL's ``seq_mean_token_sum_norm``, which mean what verl means since ``1dda039``)."""


def divergence_cells(name: str) -> dict[str, str]:
    r"""``{trainer: LaTeX}`` of one shared name: each trainer's meaning of it, computed from the registry and the readings.

    Examples
    --------
    >>> from numeric.variants import divergence_cells
    >>> cells = divergence_cells("CISPO")
    >>> print(cells["TRL"])   # TRL's epsilon_high is the cap itself (token and sequence ratio)
    \begin{array}{l}w = \min\left(r, \varepsilon_{h}\right) \\ \kappa = 1/N \\ w = \min\left(\tilde r_{i}, \varepsilon_{h}\right) \\ \kappa = 1/N\end{array}
    >>> "1 - \\varepsilon_{l}" in cells["verl"], cells["OpenRLHF"]   # verl's is a band; OpenRLHF ships none
    (True, '\\text{-}')
    """
    if name not in DIVERGENT_NAMES:
        raise ValueError(f"name must be one of {tuple(DIVERGENT_NAMES)}, got {name!r}")
    kind, what = DIVERGENT_NAMES[name]
    if kind == "loss":
        return {t: _loss_cell(what, t) for t in _TRAINERS}
    if kind == "reading":
        return {t: _reading_cell(what, t) for t in _TRAINERS}
    return {t: _ratio_cell(t) for t in _TRAINERS}


def divergence_table(trainers: tuple | None = None) -> str:
    r"""The divergence table as a LaTeX array: one row per shared name (:data:`DIVERGENT_NAMES`), one column per trainer.

    ``trainers`` picks the columns (all eight by default; the chapter shows them four at a time, to fit its text column).

    Examples
    --------
    >>> from numeric.variants import divergence_table
    >>> divergence_table(("verl", "TRL")).splitlines()[1]
    '\\text{name} & \\text{verl} & \\text{TRL} \\\\ \\hline'
    """
    chosen = require_trainers(trainers)
    trainers = _TRAINERS if chosen is None else chosen
    lines = [r"\begin{array}{" + "l" * (len(trainers) + 1) + "}", r"\text{name} & " + " & ".join(rf"\text{{{t}}}" for t in trainers) + r" \\ \hline"]
    for name in DIVERGENT_NAMES:
        cells = divergence_cells(name)
        lines.append(rf"\text{{{name}}} & " + " & ".join(cells[t] for t in trainers) + r" \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)
