r"""The field's certificate table: every policy loss and advantage estimator verl, TRL and OpenRLHF ship, checked.

Each row is a peer's name for a method, the package's own implementation of
it (written from the paper), and what the checker finds when it is run on that
implementation, at the time the table is built:

* a policy loss (:data:`derivations.methods.METHODS`, one row per
  :class:`~derivations.methods.Peer` of a trainer: one ``loss_type``): the
  peer's package call of :func:`numeric.policy_loss`, with the aggregation
  that trainer's loss function applies for that ``loss_type``
  (:func:`trainer_loss`), called as a trainer calls its loss, through
  :func:`~numeric.variants.check_policy_loss`: the per-token weight it
  identifies, the silenced tokens, boundedness, the aggregation and its
  length bias, the verdict, the call itself and where the trainer's loop
  differs from its function;
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

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial

import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations.methods import FORMS, METHODS, PEER_COMMITS, Peer
from derivations.variants import GroupReport, ReportTable, derive_token_loss

from ..group_baselines import group_mean_advantages, group_zscore_advantages, rloo_advantages
from ..losses import (
    gpg_advantages,
    opo_advantages,
    passk_advantages,
    policy_loss,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
)
from .checker import check_group_advantage
from .policy_loss import check_policy_loss

__all__ = ["ESTIMATORS", "TRAINER_DEFAULTS", "Estimator", "certificate", "certificate_latex", "certificate_table", "trainer_loss"]

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


TRAINER_DEFAULTS: dict[str, dict] = {
    "verl": {"clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0, "tau_pos": 1.0, "tau_neg": 1.05,
             "loss_agg_mode": "token-mean", "rollout_is_weights": None, "dro_beta": None},
    "TRL": {"epsilon": 0.2, "epsilon_high": 0.2, "sapo_temperature_pos": 1.0, "sapo_temperature_neg": 1.05,
            "vespo_k_pos": 2.0, "vespo_k_neg": 3.0, "vespo_lambda_pos": 3.0, "vespo_lambda_neg": 2.0, "max_completion_length": 512,
            "delta": None, "off_policy_mask_threshold": None},
    "OpenRLHF": {"clip_eps_low": 0.2, "clip_eps_high": 0.2, "dual_clip": None, "vllm_is_truncated_threshold": (0.5, 5.0)},
    "prime-rl": {"dppo_mask_low": 0.2, "dppo_mask_high": 0.2, "kl_tau": 1e-3, "ipo_threshold": 0.1},
    "SkyRL": {"eps_clip_low": 0.2, "eps_clip_high": 0.2, "clip_ratio_c": 3.0, "tau_pos": 1.0, "tau_neg": 1.05, "cispo_eps_clip_low": 1.0,
              "cispo_eps_clip_high": 4.0, "delta_low": 0.2, "delta_high": 0.2, "dppo_type": "binary_tv"},
    "slime": {"eps_clip": 0.2, "eps_clip_high": 0.2, "opsm_delta": 1e-4},
    "AReaL": {"eps_clip": 0.2, "eps_clip_higher": None, "upper": 5.0},
    "ms-swift": {"epsilon": 0.2, "epsilon_high": 0.2, "delta": None, "off_policy_sequence_mask_delta": None, "max_completion_length": 512},
}
"""The configuration names of each trainer's package calls (:class:`derivations.methods.Peer`), at their defaults at the
row's commit (verl ``actor.yaml``, TRL ``GRPOConfig``, whose ``epsilon_high=None`` means ``epsilon``, OpenRLHF ``PolicyLoss``
and ``train_ppo_ray.py``, prime-rl ``DefaultLossConfig``/``IPOLossConfig``, SkyRL ``config.py``, slime ``arguments.py``, AReaL
``cli_args.py``, ms-swift ``rlhf_args.py``/``args_mixin.py``); a peer row's ``config`` overrides them."""


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _value(node: ast.expr, names: dict):
    """A keyword's value: a constant, a configuration or batch name, a tuple, or ``+ - * /`` of them (nothing else is evaluated)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ValueError(f"a peer call's name {node.id!r} is no configuration field of the trainer nor B, num_items_in_batch")
        return names[node.id]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e, names) for e in node.elts)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_value(node.left, names), _value(node.right, names))
    raise ValueError(f"a peer call's keyword must be a number, a name, a tuple or arithmetic of them, got {ast.unparse(node)!r} "
                     "(a selection computed from the batch is not evaluated here)")


def _parsed(call: str) -> tuple[str, dict]:
    """``(method, {keyword: expression})`` of a peer's ``policy_loss("method", ..., key=expression, ...)``."""
    try:
        tree = ast.parse(call, mode="eval").body
    except SyntaxError:
        tree = None
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "policy_loss" and len(tree.args) == 2
            and isinstance(tree.args[0], ast.Constant) and isinstance(tree.args[0].value, str)
            and isinstance(tree.args[1], ast.Constant) and tree.args[1].value is Ellipsis):
        raise ValueError(f'a peer call must read policy_loss("method", ..., key=value, ...), got {call!r}')
    return str(tree.args[0].value), {kw.arg: kw.value for kw in tree.keywords}


def _peer(trainer: str, their: str) -> tuple[str, Peer]:
    for name, m in METHODS.items():
        for peer in m.peers.get(trainer, ()):
            if peer.name == their:
                return name, peer
    names = tuple(peer.name for m in METHODS.values() for peer in m.peers.get(trainer, ()))
    raise ValueError(f"their must be one of the names {trainer} gives a method in derivations.methods.METHODS {names}, got {their!r}")


def trainer_loss(trainer: str, their: str) -> Callable:
    r"""The package call of a trainer's loss (:class:`derivations.methods.Peer`), as a function a trainer would write.

    ``fn(old_log_prob, log_prob, advantages, response_mask)`` evaluates the
    call's keywords with the trainer's configuration (:data:`TRAINER_DEFAULTS`,
    the row's ``config`` over it) and the batch's ``B`` and
    ``num_items_in_batch`` (its tokens: one process, no gradient accumulation),
    and returns :func:`numeric.policy_loss`: the call shown in the peer table,
    executed as shown.  A keyword is a constant, a name, a tuple or ``+ - * /``
    of them; nothing else is evaluated (Clip-Cov's and KL-Cov's selections,
    computed from the batch, are refused with a ``ValueError``).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.field import trainer_loss
    >>> fn = trainer_loss("TRL", 'loss_type "dr_grpo"')
    >>> lp = torch.zeros(2, 3, dtype=torch.float64)
    >>> float(fn(lp, lp, torch.tensor([1.0, -0.5], dtype=torch.float64), torch.tensor([[1, 1, 0], [1, 0, 0]])))  # -(2 - 0.5) / (2 * 512)
    -0.00146484375
    """
    if trainer not in PEER_COMMITS:
        raise ValueError(f"trainer must be one of {tuple(PEER_COMMITS)}, got {trainer!r}")
    name, peer = _peer(trainer, their)
    method, keywords = _parsed(peer.call)
    if method != name:
        raise ValueError(f"the peer call of {their!r} names {method!r}, not its registry method {name!r}")
    config = {**TRAINER_DEFAULTS[trainer], **peer.config}
    for node in keywords.values():  # refused now, not on the first call: each keyword evaluates (B and N as placeholders)
        _value(node, {**config, "B": 1, "num_items_in_batch": 1.0})

    def loss(old_log_prob, log_prob, advantages, response_mask):
        mask = torch.as_tensor(response_mask)
        names = {**config, "B": mask.shape[0], "num_items_in_batch": float(mask.sum())}
        return policy_loss(method, log_prob, old_log_prob, advantages, response_mask, **{k: _value(e, names) for k, e in keywords.items()})
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
def _loss_row(trainer: str, their: str) -> tuple:
    """``(weight identified, silenced, bounded, aggregation, verdict, reason)`` of the package call of ``trainer``'s ``their`` (:func:`trainer_loss`).

    A method whose per-token loss is not the whole method (Clip-Cov, KL-Cov:
    :func:`derivations.methods.undecided`) reads ``undecided`` with the
    registry's reason; its weight cell is the symbolic checker's name for
    each of its token forms.
    """
    method, _ = _peer(trainer, their)
    m = METHODS[method]
    if m.undecided:
        forms = [f for f in FORMS.values() if f.method == method]
        named = "; ".join(f"{f.label}: {derive_token_loss(f.loss(), constants=_extra(f.loss())).matches}" for f in forms)
        return (named, "-", "-", "-", "undecided", m.undecided)
    try:
        rep = check_policy_loss(trainer_loss(trainer, their))
    except (TypeError, ValueError) as err:
        return ("-", "-", "-", "-", "undecided", _short(err))
    scale = "" if rep.scale is None or abs(rep.scale - 1) <= 1e-9 else f" x {rep.scale:.6g}"
    norm = f", D = {rep.normaliser}" if rep.normaliser not in (None, "T") else ""
    agg_text = f"{rep.aggregation}{scale}{norm} ({'length-biased' if rep.length_biased else 'no length bias'})"
    return (rep.method or "none known", _silenced(rep.token), _bounded(rep.token), agg_text, rep.verdict, rep.reason)


def _extra(loss: sp.Expr) -> dict:
    """The loss's constants beyond the token symbols (KL-Cov's beta), declared for the checker (their values are not used symbolically)."""
    return {s: 1.0 for s in loss.free_symbols - {gw.ell, gw.ell0, gw.r, gw.A, gw.eps_l, gw.eps_h, gw.c}}


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
    docstring); a loss row ends with the commit it was read at and the file and
    lines there (:class:`derivations.readings.Citation`).  Prints as aligned text, renders as an HTML table.

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
                  "aggregation (the trainer's)", "why, if undecided", "package call", "the trainer's loop, or what the call leaves out",
                  "commit", "read at (file:lines)")
        rows = []
        for trainer in PEER_COMMITS:
            for name, m in METHODS.items():
                for peer in m.peers.get(trainer, ()):
                    row = _loss_row(trainer, peer.name)
                    rows.append((trainer, peer.name, name, row[4], *row[:4], row[5] if row[4] == "undecided" else "", peer.call, peer.note,
                                 peer.cite.commit[:7], peer.cite.where))
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
