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
* an advantage estimator (:data:`ESTIMATORS`, :mod:`~numeric.variants.estimators`;
  one row per trainer reading, of every trainer of
  :data:`derivations.readings.SNAPSHOTS`): the package's estimator as a
  ``[B, G]`` function of rewards, through
  :func:`~numeric.variants.check_group_advantage` at :math:`G = 4` with a
  binary reward: the scale :math:`c(p, 4)` and the verdict; what the
  trainer's rule for a group of one answer gives
  (:func:`~numeric.variants.check_singleton`); and where it was read (commit,
  ``path:lines``).

A method whose checker run fails (its token selection random or depending on
the batch, a batch-level normalisation, an input a check of rewards cannot
see) gets ``undecided`` and the checker's own reason; nothing is guessed.

References
----------
The losses' peer names are read at :data:`derivations.methods.PEER_COMMITS`; each
estimator reading carries its own :class:`~derivations.readings.Citation`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from functools import cache

import numpy as np
import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations.methods import FORMS, METHODS, PEER_COMMITS, Peer
from derivations.readings import SNAPSHOTS
from derivations.variants import GroupReport, ReportTable, derive_token_loss

from ..losses import grouped_advantages, policy_loss
from .checker import check_group_advantage
from .estimators import ESTIMATORS, Estimator, Reading
from .policy_loss import check_policy_loss
from .singleton import check_singleton

__all__ = ["ESTIMATORS", "TRAINER_DEFAULTS", "Estimator", "Reading", "certificate", "certificate_latex", "certificate_table", "trainer_loss"]

F64 = torch.float64
G_TABLE = 4
"""The group size at which the table states an estimator's scale :math:`c(p, G)`."""




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
        rep = _checked(*_call_key(trainer, their))
    except (TypeError, ValueError) as err:
        return ("-", "-", "-", "-", "undecided", _short(err))
    scale = "" if rep.scale is None or abs(rep.scale - 1) <= 1e-9 else f" x {rep.scale:.6g}"
    norm = f", D = {rep.normaliser}" if rep.normaliser not in (None, "T") else ""
    agg_text = f"{rep.aggregation}{scale}{norm} ({'length-biased' if rep.length_biased else 'no length bias'})"
    return (rep.method or "none known", _silenced(rep.token), _bounded(rep.token), agg_text, rep.verdict, rep.reason)


def _call_key(trainer: str, their: str) -> tuple:
    """``(trainer, their, key)``: the key is the row's package call with the trainer's configuration in it, evaluated at two
    batches (``B``, ``num_items_in_batch``): two rows whose calls agree there run the same loss, and the checker runs once."""
    name, peer = _peer(trainer, their)
    method, keywords = _parsed(peer.call)
    config = {**TRAINER_DEFAULTS.get(trainer, {}), **peer.config}
    points = ({**config, "B": 7, "num_items_in_batch": 101.0}, {**config, "B": 11, "num_items_in_batch": 257.0})
    key: tuple
    try:
        key = (method, tuple(sorted((k, repr([_value(e, at) for at in points])) for k, e in keywords.items())))
    except (TypeError, ValueError):  # a keyword that does not evaluate: its own row, refused by trainer_loss
        key = (trainer, their)
    return trainer, their, key


_CHECKED: dict = {}


def _checked(trainer: str, their: str, key: tuple):
    """The checker's report on the row's package call, once per distinct call (:func:`_call_key`)."""
    if key not in _CHECKED:
        _CHECKED[key] = check_policy_loss(trainer_loss(trainer, their))
    return _CHECKED[key]


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


def _never_called(rewards):
    raise AssertionError("a batch of groups of one answer calls no group estimator")


@cache
def _singleton_cell(name: str, rule) -> str:
    """What a group of one answer gets under the reading's rule, and the checker's scale for it (:func:`check_singleton`)."""
    if rule == "-":
        return "-"
    if rule == "refused":
        return "refused"
    est = ESTIMATORS[name]
    if rule == "own":
        if est.advantage is None:
            raise ValueError(f"{name}: a reading whose estimator covers a group of one ('own') needs the estimator")
        fn = est.advantage
    else:  # groups of one only: the estimator itself is never called (a row that needs more than rewards has none)
        def fn(rewards, c=float(rule)):
            r = torch.as_tensor(rewards, dtype=torch.float64)[:, 0]
            return grouped_advantages(est.advantage or _never_called, r, np.arange(r.shape[0]), singleton=c)[:, None]
    rep = check_singleton(fn)
    return f"{rep.verdict}, c = {_scale(rep.scale)}" if rep.scale is not None else rep.verdict


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
    r"""The certificate table of every ``"loss"`` (verl, TRL, OpenRLHF) or ``"advantage"`` (every trainer read) the trainers ship, computed now.

    One row per trainer name: trainer, their name, the package's method, and
    the checker's findings on the package's implementation (see the module
    docstring); a loss row ends with the commit it was read at and the file and
    lines there (:class:`derivations.readings.Citation`); an advantage row adds the
    trainer's rule for a group of one answer and the commit and ``path:lines`` it
    was read at.  Prints as aligned text, renders as an HTML table.

    Parameters
    ----------
    kind : {"loss", "advantage"}

    Examples
    --------
    >>> from numeric.variants import certificate_table
    >>> t = certificate_table("advantage")
    >>> t.header[:5]
    ('trainer', 'their name', 'package', 'verdict', 'c(p, G=4)')
    >>> [row[3:5] for row in t.rows if row[2] == "rloo"][:2]
    [('unbiased', '1'), ('unbiased', '1')]
    >>> [(row[0], row[6]) for row in t.rows if row[2] == "rloo"][:4]          # each trainer's rule for a group of one
    [('verl', 'unbiased, c = 1'), ('verl', 'scaled, c = 0'), ('TRL', 'scaled, c = 0'), ('OpenRLHF', 'refused')]
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
        header = ("trainer", "their name", "package", "verdict", f"c(p, G={G_TABLE})", "why, if undecided", "a group of one", "read at")
        rows = []
        for trainer in dict.fromkeys(s.trainer for s in SNAPSHOTS):
            for name, est in ESTIMATORS.items():
                for reading in est.peers:
                    if reading.cite.trainer == trainer:
                        c, verdict, reason = _estimator_row(name)
                        where = f"{reading.cite.snapshot().commit[:7]} {reading.cite.where}"
                        rows.append((trainer, reading.their, name, verdict, c, reason if verdict == "undecided" else "",
                                     _singleton_cell(name, reading.singleton), where))
    else:
        raise ValueError(f"kind must be 'loss' or 'advantage', got {kind!r}")
    return ReportTable(header, rows)


def certificate_latex(kind: str = "loss") -> str:
    r""":func:`certificate_table` as a LaTeX ``array`` of text cells, for the chapter's ``latex-table`` directive.

    Examples
    --------
    >>> from numeric.variants import certificate_latex
    >>> certificate_latex("advantage").splitlines()[0]
    '\\begin{array}{llllllll}'
    """
    table = certificate_table(kind)
    esc = lambda x: x.replace("\\", "/").replace("_", r"\_").replace("{", r"\{").replace("}", r"\}").replace("&", "and")  # noqa: E731
    line = lambda cells: " & ".join(rf"\text{{{esc(c)}}}" for c in cells) + r" \\"  # noqa: E731
    return "\n".join([r"\begin{array}{" + "l" * len(table.header) + "}", line(table.header) + r" \hline",
                      *[line(row) for row in table.rows], r"\end{array}"])
