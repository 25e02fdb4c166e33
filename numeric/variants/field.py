r"""The field's certificate table: every policy loss and advantage estimator verl, TRL and OpenRLHF ship, checked.

Each row is a peer's name for a method, the package's own implementation of
it (written from the paper), and what the checker finds when it is run on that
implementation, at the time the table is built:

* a policy loss (:data:`derivations.methods.METHODS`, one row per trainer
  name in its ``peers``): the package's batched :func:`numeric.policy_loss`,
  called as a trainer calls its loss, through
  :func:`~numeric.variants.check_policy_loss`: the per-token weight it
  identifies, the silenced tokens, boundedness, the aggregation (the
  registry's default) and its length bias, the verdict;
* an advantage estimator (:data:`ESTIMATORS`, one row per trainer name):
  the package's estimator as a ``[B, G]`` function of rewards, through
  :func:`~numeric.variants.check_group_advantage` at :math:`G = 4` with a
  binary reward: the scale :math:`c(p, 4)` and the verdict.

A method whose checker run fails (its token selection random or depending on
the batch, a batch-level normalisation, an input a check of rewards cannot
see) gets ``undecided`` and the checker's own reason; nothing is guessed.

References
----------
The peers' names are read at :data:`derivations.methods.PEER_COMMITS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial

import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations.methods import FORMS, METHODS, PEER_COMMITS
from derivations.variants import GroupReport, ReportTable, derive_token_loss

from ..group_baselines import group_mean_advantages, group_zscore_advantages, rloo_advantages
from ..losses import (
    TRAINER_MODES,
    gpg_advantages,
    opo_advantages,
    passk_advantages,
    policy_loss,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
)
from .checker import check_group_advantage
from .policy_loss import check_policy_loss

__all__ = ["ESTIMATORS", "Estimator", "certificate", "certificate_latex", "certificate_table"]

F64 = torch.float64
G_TABLE = 4
"""The group size at which the table states an estimator's scale :math:`c(p, G)`."""


@dataclass(frozen=True)
class Estimator:
    """An advantage estimator a trainer ships, as the package computes it.

    ``advantage`` maps ``[B, G]`` rewards to ``[B, G]`` advantages (``None``
    when the estimator needs an input besides the group's rewards, said in
    ``needs``); ``peers`` maps a trainer to its name for the estimator at
    :data:`~derivations.methods.PEER_COMMITS`.
    """

    name: str
    label: str
    advantage: Callable | None = field(repr=False)
    peers: dict
    needs: str = ""


def _reinforce_pp_baseline(rewards):
    """verl's REINFORCE++-baseline on one-token responses: ``[B, G]`` rewards in, ``[B, G]`` advantages out."""
    r = torch.as_tensor(rewards, dtype=F64)
    return reinforce_pp_baseline_advantages(r, torch.ones(*r.shape, 1, dtype=F64))[..., 0]


def _reinforce_pp(rewards):
    """REINFORCE++ (no group baseline) on one-token responses, the batch's ``B * G`` responses whitened together."""
    r = torch.as_tensor(rewards, dtype=F64)
    return reinforce_pp_advantages(r.reshape(-1, 1), torch.ones(r.numel(), 1, dtype=F64)).reshape(r.shape)


def _trl_batch_scale(rewards):
    """TRL ``scale_rewards="batch"``: group-centred rewards over the std of every reward of the batch, plus 1e-4."""
    r = torch.as_tensor(rewards, dtype=F64)
    return group_mean_advantages(r) / (r.std() + 1e-4)


ESTIMATORS: dict[str, Estimator] = {
    e.name: e
    for e in (
        Estimator("zscore_1e-6", "z-score, Bessel std, eps 1e-6", partial(group_zscore_advantages, eps=1e-6, std="bessel"),
                  {"verl": 'adv_estimator "grpo"'}),
        Estimator("zscore_1e-4", "z-score, Bessel std, eps 1e-4", partial(group_zscore_advantages, eps=1e-4, std="bessel"),
                  {"TRL": 'scale_rewards "group"'}),
        Estimator("zscore_1e-9", "z-score, Bessel std, eps 1e-9", partial(group_zscore_advantages, eps=1e-9, std="bessel"),
                  {"OpenRLHF": 'advantage_estimator "group_norm"'}),
        Estimator("group_mean", "group mean (Dr. GRPO)", group_mean_advantages,
                  {"verl": 'adv_estimator "grpo", norm_adv_by_std_in_grpo=False', "TRL": 'scale_rewards "none"',
                   "OpenRLHF": 'advantage_estimator "dr_grpo"'}),
        Estimator("rloo", "leave-one-out (RLOO)", rloo_advantages, {"verl": 'adv_estimator "rloo"', "OpenRLHF": 'advantage_estimator "rloo"'}),
        Estimator("passk", "pass@k, Bessel std, eps 1e-6", partial(passk_advantages, eps=1e-6, std=True), {"verl": 'adv_estimator "grpo_passk"'}),
        Estimator("opo", "OPO, equal lengths", lambda r: opo_advantages(r, torch.ones_like(torch.as_tensor(r, dtype=F64))),
                  {"verl": 'adv_estimator "opo"'}),
        Estimator("trl_batch", "group-centred, batch std", _trl_batch_scale, {"TRL": 'scale_rewards "batch"'}),
        Estimator("gpg", "GPG, alpha = B/M", partial(gpg_advantages, valid="reward"), {"verl": 'adv_estimator "gpg"'}),
        Estimator("reinforce_pp_baseline", "REINFORCE++ baseline", _reinforce_pp_baseline,
                  {"verl": 'adv_estimator "reinforce_plus_plus_baseline"', "OpenRLHF": 'advantage_estimator "reinforce_baseline"'}),
        Estimator("reinforce_pp", "REINFORCE++", _reinforce_pp,
                  {"verl": 'adv_estimator "reinforce_plus_plus"', "OpenRLHF": 'advantage_estimator "reinforce"'}),
        Estimator("remax", "ReMax", None, {"verl": 'adv_estimator "remax"'},
                  needs="the greedy answer's reward (remax_advantages' baseline_reward), which a check of the group's rewards cannot see"),
    )
}
"""Every advantage estimator of the three trainers, by the package's name, with each trainer's name for it."""


# ------------------------------------------------------------------ the rows


def _short(err: Exception) -> str:
    """The checker's message, its clause that says why (after "but"), without the examples in brackets."""
    text = str(err).split("; ")[0]
    return text.split(", but ", 1)[-1].split(" (")[0]


def _trainer_loss(method: str, agg: str | None) -> Callable:
    """The package's loss for ``method`` as a trainer writes one: by keyword on ``[B, T]`` tensors, a scalar out."""
    def loss(old_log_prob, log_prob, advantages, response_mask):
        return policy_loss(method, log_prob, old_log_prob, advantages, response_mask, agg=agg)
    return loss


def _silenced(token) -> str:
    if token is None:
        return "-"
    def where(lo: float, hi: float) -> str:  # the grid runs from r = 0.01 to 100
        return f"r >= {lo:.3g}" if hi >= 100 else (f"r <= {hi:.3g}" if lo <= 0.01 else f"{lo:.3g} <= r <= {hi:.3g}")

    runs = [f"A{'>' if s > 0 else '<'}0: {where(lo, hi)}" for s, lo, hi in token.silenced]
    return "; ".join(runs) if runs else "none"


def _bounded(token) -> str:
    if token is None:
        return "-"
    return "yes" if all(token.bounded.values()) else "no"


@cache
def _loss_row(method: str, agg: str | None = None) -> tuple:
    """``(weight identified, silenced, bounded, aggregation, verdict, reason)`` of the package's ``method`` aggregated by ``agg`` (default: the registry's).

    A method whose per-token loss is not the whole method (Clip-Cov, KL-Cov:
    :func:`derivations.methods.undecided`) reads ``undecided`` with the
    registry's reason; its weight cell is the symbolic checker's name for
    each of its token forms.
    """
    m = METHODS[method]
    if m.undecided:
        forms = [f for f in FORMS.values() if f.method == method]
        named = "; ".join(f"{f.label}: {derive_token_loss(f.loss(), constants=_extra(f.loss())).matches}" for f in forms)
        return (named, "-", "-", "-", "undecided", m.undecided)
    try:
        rep = check_policy_loss(_trainer_loss(method, m.aggregation if agg is None else agg))
    except (TypeError, ValueError) as err:
        return ("-", "-", "-", "-", "undecided", _short(err))
    agg_text = f"{rep.aggregation} ({'length-biased' if rep.length_biased else 'no length bias'})"
    return (rep.method or "none known", _silenced(rep.token), _bounded(rep.token), agg_text, rep.verdict, rep.reason)


def _extra(loss: sp.Expr) -> dict:
    """The loss's constants beyond the token symbols (KL-Cov's beta), declared for the checker (their values are not used symbolically)."""
    return {s: 1.0 for s in loss.free_symbols - {gw.ell, gw.ell0, gw.r, gw.A, gw.eps_l, gw.eps_h, gw.c}}


def _peer_rows(trainer: str, name: str) -> list[tuple[str, str | None]]:
    """``(their name, aggregation)`` rows of a peer's name for ``name``: one per quoted loss name that :data:`numeric.losses.TRAINER_MODES` maps to a mode for that trainer, else the name with the registry's default (``None``)."""
    their = METHODS[name].peers[trainer][0]
    quoted = re.findall(r'"([^"]+)"', their)
    modes = [(q, TRAINER_MODES[(trainer, q)][0]) for q in quoted if (trainer, q) in TRAINER_MODES]
    if not modes or METHODS[name].sequence_level:
        return [(their, None)]
    prefix = their.split('"', 1)[0]
    return [(f'{prefix}"{q}"', mode) for q, mode in modes]


def _scale(c) -> str:
    """``c`` as short text: fp64 coefficients to 6 digits, zero terms dropped."""
    if c is None:
        return "-"
    c = sp.sympify(c).xreplace({f: sp.Float(f, 6) for f in sp.sympify(c).atoms(sp.Float)})
    return sp.sstr(c.replace(lambda x: x.is_Add, lambda x: sp.Add(*x.args)))


@cache
def certificate(name: str) -> GroupReport:
    r"""The checker's report on the package's estimator ``name`` (a key of :data:`ESTIMATORS`) at :math:`G = 4`, binary reward.

    Raises the checker's error for an estimator it cannot check as a ``[B, G]`` function.

    Examples
    --------
    >>> from numeric.variants import certificate
    >>> rep = certificate("group_mean")
    >>> rep.verdict, rep.scale
    ('scaled', 3/4)
    """
    if not isinstance(name, str) or name not in ESTIMATORS:
        raise ValueError(f"name must be one of {tuple(ESTIMATORS)}, got {name!r}")
    est = ESTIMATORS[name]
    if est.advantage is None:
        raise ValueError(f"{name} needs {est.needs}")
    return check_group_advantage(est.advantage, G=G_TABLE, rewards="binary", name=est.label)


@cache
def _estimator_row(name: str) -> tuple:
    """``(c(p, G), verdict, reason)`` of the package's estimator ``name`` at G = :data:`G_TABLE`, binary reward."""
    est = ESTIMATORS[name]
    if est.advantage is None:
        return ("-", "undecided", f"needs {est.needs}")
    try:
        rep = certificate(name)
    except (TypeError, ValueError) as err:  # NotPermutationEquivariant is a ValueError
        return ("-", "undecided", _short(err))
    return (_scale(rep.scale), rep.verdict, rep.reason)


def certificate_table(kind: str = "loss") -> ReportTable:
    r"""The certificate table of every ``"loss"`` or ``"advantage"`` the three trainers ship, computed now.

    One row per trainer name: trainer, their name, the package's method, and
    the checker's findings on the package's implementation (see the module
    docstring).  Prints as aligned text, renders as an HTML table.

    Parameters
    ----------
    kind : {"loss", "advantage"}

    Examples
    --------
    >>> from numeric.variants import certificate_table
    >>> t = certificate_table("advantage")
    >>> t.header[:5]
    ('trainer', 'their name', 'package', 'verdict', 'c(p, G=4)')
    >>> [row[3:5] for row in t.rows if row[2] == "rloo"]
    [('unbiased', '1'), ('unbiased', '1')]
    """
    header: tuple[str, ...]
    if kind == "loss":
        header = ("trainer", "their name", "package", "verdict", "weight identified", "silenced (w = 0)", "bounded",
                  "aggregation (the trainer's loss_type, else the registry default)", "why, if undecided")
        rows = []
        for trainer in PEER_COMMITS:
            for name, m in METHODS.items():
                if trainer in m.peers:
                    for their, agg in _peer_rows(trainer, name):
                        row = _loss_row(name, agg)
                        rows.append((trainer, their, name, row[4], *row[:4], row[5] if row[4] == "undecided" else ""))
    elif kind == "advantage":
        header = ("trainer", "their name", "package", "verdict", f"c(p, G={G_TABLE})", "why, if undecided")
        rows = []
        for trainer in PEER_COMMITS:
            for name, est in ESTIMATORS.items():
                if trainer in est.peers:
                    c, verdict, reason = _estimator_row(name)
                    rows.append((trainer, est.peers[trainer], name, verdict, c, reason if verdict == "undecided" else ""))
    else:
        raise ValueError(f"kind must be 'loss' or 'advantage', got {kind!r}")
    return ReportTable(header, rows)


def certificate_latex(kind: str = "loss") -> str:
    r""":func:`certificate_table` as a LaTeX ``array`` of text cells, for the chapter's ``latex-table`` directive.

    Examples
    --------
    >>> from numeric.variants import certificate_latex
    >>> certificate_latex("advantage").splitlines()[0]
    '\\begin{array}{llllll}'
    """
    table = certificate_table(kind)
    esc = lambda x: x.replace("\\", "/").replace("_", r"\_").replace("{", r"\{").replace("}", r"\}").replace("&", "and")  # noqa: E731
    line = lambda cells: " & ".join(rf"\text{{{esc(c)}}}" for c in cells) + r" \\"  # noqa: E731
    return "\n".join([r"\begin{array}{" + "l" * len(table.header) + "}", line(table.header) + r" \hline",
                      *[line(row) for row in table.rows], r"\end{array}"])
