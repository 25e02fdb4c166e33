r"""The losses trainers ship, batched and trainer-ready, each with its derived gradient weight.

Every function takes ``[B, T]`` token tensors (numpy or torch; the result has
the first tensor's kind, device and dtype, computed in at least fp32) with a
0/1 or boolean response ``mask``.  Masked slots may hold anything (``-inf``,
padding sentinels): they enter neither a value nor a gradient.  Losses are
minimised, with the minus sign in front of the advantage; old log-probs,
advantages and sampler weights are detached.

Map
---
Token bookkeeping
    :func:`token_log_probs`, :func:`stable_softmax`, :func:`softmax_score`,
    :func:`response_mask`, :func:`sequence_log_prob`, :func:`broadcast_advantage`,
    :func:`token_entropy`.
Aggregation
    :func:`aggregate` over the modes in :data:`AGGREGATIONS`, :func:`token_weights`
    (the weight each mode gives each token), :data:`TRAINER_MODES` (each trainer's
    name as a mode and its arguments).
Policy losses
    :func:`policy_loss` for every method in :data:`POLICY_LOSSES`, and
    :func:`policy_weight`, the derived weight :math:`w` with
    :math:`\partial\,\mathrm{loss}/\partial\ell_{it} = -\,\kappa_{it}\, w_{it}\, A_{it}`
    (:math:`\kappa` from :func:`token_weights`; :mod:`derivations.losses`).
Penalties
    :func:`kl_penalty` (:math:`k_1, k_2, k_3`, clamped as verl clamps),
    :func:`value_loss` (clipped).
Advantage estimators
    :func:`masked_whiten`, :func:`reinforce_pp_advantages`,
    :func:`reinforce_pp_baseline_advantages`, :func:`remax_advantages`,
    :func:`opo_advantages`, :func:`gpg_advantages`, :func:`passk_advantages`,
    and :func:`advantage_scale`, the exact scale :math:`c` of
    :math:`\mathbb{E}[A\,\nabla\log\pi] = c\,\nabla J` for a binary reward.

Trainer code was read at: verl ``verl/trainer/ppo/core_algos.py`` (``agg_loss``,
``compute_policy_loss_*``, ``kl_penalty``, ``compute_*_outcome_advantage``),
TRL ``trl/trainer/grpo_trainer.py`` (``_compute_loss``, ``loss_type``),
OpenRLHF ``openrlhf/models/loss.py`` (``PolicyLoss``, ``ValueLoss``) and its
experience maker (``group_norm``, REINFORCE++).
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
import sympy as sp
import torch

from derivations import losses as derived

from ._validate import (
    _raw_tensor,
    as_mask,
    compute_dtype,
    like,
    masked_inputs,
    require_finite,
    require_finite_where,
    require_int,
    require_nonnegative,
    require_real,
    to_tensor,
)
from .checks import check, maxabs, suite
from .expectations import expected_score_sum
from .gradient_weights import clip_bounds
from .group_baselines import _centred, exact_group_gradient, group_advantage_weights, group_zscore_advantages, rloo_advantages
from .tinylm import TinyLM, default_reward
from .trust_region import _K as _KL

__all__ = [
    "AGGREGATIONS",
    "POLICY_LOSSES",
    "TRAINER_MODES",
    "advantage_scale",
    "aggregate",
    "broadcast_advantage",
    "gpg_advantages",
    "kl_penalty",
    "masked_whiten",
    "opo_advantages",
    "passk_advantages",
    "policy_loss",
    "policy_weight",
    "reinforce_pp_advantages",
    "reinforce_pp_baseline_advantages",
    "remax_advantages",
    "response_mask",
    "sequence_log_prob",
    "softmax_score",
    "stable_softmax",
    "token_entropy",
    "token_log_probs",
    "token_weights",
    "trainer_table",
    "value_loss",
]


def _dtype(x) -> torch.dtype:
    return to_tensor("x", x)[0].dtype


# ------------------------------------------------------------ token bookkeeping


def _logits(logits):
    z, kind = to_tensor("logits", logits)
    if z.ndim < 1 or z.shape[-1] < 1:
        raise ValueError(f"logits must have a vocabulary dimension (the last one), got shape {tuple(z.shape)}")
    require_finite("logits", z)
    return z, kind


def stable_softmax(logits):
    r"""Softmax over the last dimension, shifted by the maximum: :math:`\pi_a = e^{z_a - m} / \sum_b e^{z_b - m}`.

    Subtracting :math:`m = \max_b z_b` leaves :math:`\pi` unchanged and keeps every
    exponent :math:`\le 0`, so nothing overflows.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import stable_softmax
    >>> print(stable_softmax(np.array([1000.0, 1000.0, 0.0])).round(6))
    [0.5 0.5 0. ]
    """
    z, kind = _logits(logits)
    e = (z - z.amax(-1, keepdim=True)).exp()
    return like(kind, e / e.sum(-1, keepdim=True))


def softmax_score(logits, action):
    r"""The score of a softmax policy in its logits: :math:`\partial \log\pi_a / \partial z = e_a - \pi`.

    Parameters
    ----------
    logits : numpy array or torch tensor
        ``[..., V]``.
    action : numpy array or torch tensor of ints
        ``[...]``, each in ``[0, V)``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import softmax_score
    >>> print(softmax_score(np.log(np.array([0.5, 0.25, 0.25])), np.array(1)).round(6))
    [-0.5   0.75 -0.25]
    """
    z, kind = _logits(logits)
    a = _token_ids("action", action, z.shape[:-1], z.shape[-1], z.device)
    onehot = torch.nn.functional.one_hot(a, z.shape[-1]).to(z.dtype)
    return like(kind, onehot - stable_softmax(z))


def _token_ids(name: str, ids, shape, vocab: int | None, device) -> torch.Tensor:
    t, _ = _raw_ids(name, ids)
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    if vocab is not None and t.numel() and (int(t.min()) < 0 or int(t.max()) >= vocab):
        raise ValueError(f"{name} must lie in [0, {vocab}), got values in [{int(t.min())}, {int(t.max())}]")
    return t.to(device)


def _raw_ids(name: str, ids):
    if isinstance(ids, np.ndarray):
        ids = torch.from_numpy(np.array(ids))  # a copy: negative strides and 0-d arrays are fine
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got {str(ids.dtype).removeprefix('torch.')}")
    return ids.long(), None


def token_log_probs(logits, tokens):
    r"""Token log-probabilities :math:`\log\pi(o_t) = z_{o_t} - \log\sum_b e^{z_b}`, gathered, ``[B, T]``.

    The gather of ``log_softmax``, written without materialising it: only the
    chosen logit and the log-sum-exp are kept (``logsumexp`` allocates a
    transient ``[B, T, V]`` buffer, freed at once; bf16/fp16 logits are first
    upcast to fp32, one more transient copy).  Differentiable in ``logits``;
    the result has the logits' dtype.  Align the logits with their labels first: the logits at
    position :math:`k` score token :math:`k + 1` (``logits[:, :-1]`` with
    ``input_ids[:, 1:]``, the shift of :func:`response_mask`).

    Parameters
    ----------
    logits : numpy array or torch tensor
        ``[B, T, V]``.
    tokens : integer numpy array or torch tensor
        ``[B, T]``.

    Examples
    --------
    >>> import torch
    >>> from numeric import token_log_probs
    >>> z = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]]))
    >>> token_log_probs(z, torch.tensor([[0, 2]])).exp().round(decimals=6)
    tensor([[0.5000, 0.8000]])
    """
    z, kind = _logits(logits)
    if z.ndim != 3:
        raise ValueError(f"logits must have shape [B, T, V], got {tuple(z.shape)}")
    ids = _token_ids("tokens", tokens, z.shape[:2], z.shape[-1], z.device)
    zc = z.to(compute_dtype(z.dtype))
    chosen = zc.gather(-1, ids[..., None])[..., 0]
    return like(kind, (chosen - torch.logsumexp(zc, -1)).to(z.dtype))


def token_entropy(logits):
    r"""Entropy of each next-token distribution, :math:`H = \log\sum_b e^{z_b} - \sum_a \pi_a z_a`, ``[...]``.

    The entropy bonus of verl (``entropy_coeff``) and OpenRLHF is
    :math:`-\beta` times :func:`aggregate` of it.  The softmax is a transient
    ``[..., V]`` tensor, kept by autograd for the backward pass.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import token_entropy
    >>> round(float(token_entropy(np.zeros(4))), 6), round(float(np.log(4)), 6)
    (1.386294, 1.386294)
    """
    z, kind = _logits(logits)
    zc = z.to(compute_dtype(z.dtype))
    p = torch.softmax(zc, -1)
    return like(kind, (torch.logsumexp(zc, -1) - (p * zc).sum(-1)).to(z.dtype))


def response_mask(input_ids, prompt_length, pad_token_id: int, eos_token_id: int):
    r"""The response-token mask, shifted to ``[B, T-1]``: which labels a policy loss scores.

    Position :math:`k` of the result refers to token :math:`k + 1` of
    ``input_ids`` (the logits at :math:`k` score the token at :math:`k+1`).  A
    token counts when it lies at or after its row's prompt length, is not
    padding, and is not after the row's first EOS; the EOS itself is an action
    of the policy and counts.  When ``pad_token_id == eos_token_id`` (common),
    the first such id after the prompt is the EOS and the rest are padding.

    Parameters
    ----------
    input_ids : integer array
        ``[B, T]`` prompt + response (+ padding).
    prompt_length : integer array
        ``[B]``, the number of prompt tokens of each row (``>= 1``).
    pad_token_id, eos_token_id : int

    Returns
    -------
    torch.Tensor or numpy.ndarray
        ``[B, T-1]`` boolean, the kind of ``input_ids``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import response_mask
    >>> ids = np.array([[5, 6, 7, 2, 0], [5, 7, 2, 9, 9]])   # pad 0, EOS 2
    >>> response_mask(ids, np.array([2, 1]), 0, 2).astype(int)
    array([[0, 1, 1, 0],
           [1, 1, 0, 0]])
    """
    kind = "numpy" if isinstance(input_ids, np.ndarray) else "torch"
    ids, _ = _raw_ids("input_ids", input_ids)
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(f"input_ids must have shape [B, T] with T >= 2, got {tuple(ids.shape)}")
    lengths = _token_ids("prompt_length", prompt_length, ids.shape[:1], None, ids.device)
    if lengths.numel() and int(lengths.min()) < 1:
        raise ValueError(f"prompt_length must be >= 1 (the first label follows a prompt token), got {int(lengths.min())}")
    pad, eos = require_int("pad_token_id", pad_token_id), require_int("eos_token_id", eos_token_id)
    labels = ids[:, 1:]
    position = torch.arange(1, ids.shape[1], device=ids.device)
    in_response = position[None, :] >= lengths[:, None]
    is_eos = in_response & (labels == eos)
    after_eos = (is_eos.cumsum(1) - is_eos.long()) > 0
    out = in_response & ~after_eos & ((labels != pad) | is_eos)
    return out.numpy() if kind == "numpy" else out


def sequence_log_prob(log_prob, mask):
    r"""Sequence log-probability :math:`\log\pi(o) = \sum_t m_t \log\pi(o_t \mid o_{<t})`, ``[B]``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import sequence_log_prob
    >>> print(sequence_log_prob(np.log([[0.5, 0.5, 0.3]]), np.array([[1, 1, 0]])).round(6))
    [-1.386294]
    """
    t, _, kind = masked_inputs(mask, log_prob=log_prob)
    return like(kind, t["log_prob"].sum(-1).to(_dtype(log_prob)))


def broadcast_advantage(advantage, mask):
    r"""One advantage per sequence, put on each of its response tokens: :math:`A_{it} = m_{it} A_i`, ``[B, T]``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import broadcast_advantage
    >>> print(broadcast_advantage(np.array([1.5, -0.5]), np.array([[1, 1, 0], [1, 0, 0]])))
    [[ 1.5  1.5  0. ]
     [-0.5  0.   0. ]]
    """
    a, kind = to_tensor("advantage", advantage)
    require_finite("advantage", a)
    m = _mask_of_rank("mask", mask, 2)
    if a.ndim != 1 or a.shape[0] != m.shape[0]:
        raise ValueError(f"advantage must have shape [B] = {(m.shape[0],)} (mask is [B, T]), got {tuple(a.shape)}")
    return like(kind, torch.where(m.to(a.device), a[:, None], torch.zeros((), dtype=a.dtype, device=a.device)))


def _mask_of_rank(name: str, mask, rank: int, exact: bool = True) -> torch.Tensor:
    """A boolean mask with ``rank`` dimensions (at least ``rank`` unless ``exact``)."""
    raw, _ = _raw_tensor(name, mask)
    if raw.ndim < rank or (exact and raw.ndim != rank):
        raise ValueError(f"{name} must have {'' if exact else 'at least '}{rank} dimensions, got shape {tuple(raw.shape)}")
    return as_mask(name, raw, name, raw)


# ------------------------------------------------------------------ aggregation

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
"""The aggregation modes, in verl's names (see :data:`TRAINER_MODES` for the others)."""

TRAINER_MODES = {
    ("verl", "token-mean"): ("token-mean", {}, ""),
    ("verl", "seq-mean-token-mean"): ("seq-mean-token-mean", {}, "an empty row: NaN in verl, 0 here"),
    ("verl", "seq-mean-token-sum"): ("seq-mean-token-sum", {}, ""),
    ("verl", "seq-mean-token-sum-norm"): ("token-mean", {"norm": "T"}, "B times TRL's dr_grpo at L = T"),
    ("TRL", "grpo"): ("seq-mean-token-mean", {}, "an empty row: 0, counted in B"),
    ("TRL", "bnpo"): ("token-mean", {}, ""),
    ("TRL", "dr_grpo"): ("seq-mean-token-sum-norm", {"norm": "max_completion_length"}, ""),
    ("TRL", "dapo"): ("token-mean", {"norm": "num_items_in_batch"}, "N: tokens of the global batch"),
    ("OpenRLHF", "per-token (token_level_loss=True)"): ("token-mean", {}, ""),
    ("OpenRLHF", "per-sample (token_level_loss=False)"): ("seq-mean-token-mean", {}, ""),
}
r"""Each trainer's aggregation name as ``(mode, arguments, note)``: ``aggregate(x, mask, mode, **arguments)``."""


def trainer_table() -> str:
    r""":data:`TRAINER_MODES` as a LaTeX array: trainer, name, mode, arguments, the token weight, notes.

    Examples
    --------
    >>> from numeric.losses import trainer_table
    >>> print(trainer_table().splitlines()[2])
    \text{verl} & \text{token-mean} & \text{token-mean} & \text{} & 1/\sum_j n_j & \text{} \\
    """
    kappa = {
        "token-mean": r"1/\sum_j n_j",
        "seq-mean-token-mean": r"1/(B\,n_i)",
        "seq-mean-token-sum": r"1/B",
        "seq-mean-token-sum-norm": r"1/(B\,C)",
    }
    lines = [r"\begin{array}{llllll}", r"\text{trainer} & \text{name} & \text{mode} & \text{arguments} & \kappa_{it} & \text{note} \\ \hline"]
    for (trainer, name), (mode, args, note) in TRAINER_MODES.items():
        k = kappa[mode]
        if args.get("norm"):
            k = r"1/N" if mode == "token-mean" else r"1/(B\,L)"
            k += r"\ (" + ("N = T" if args["norm"] == "T" else ("N" if mode == "token-mean" else "L") + r" = \mathtt{" + args["norm"].replace("_", r"\_") + "}") + ")"
        arg_text = ", ".join(f"{key}={value}" for key, value in args.items()).replace("_", r"\_")
        lines.append(rf"\text{{{trainer}}} & \text{{{name.replace('_', chr(92) + '_')}}} & \text{{{mode}}} & \text{{{arg_text}}} & {k} & \text{{{note.replace('_', chr(92) + '_')}}} \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)


def _mode(mode: str, name: str = "mode") -> str:
    if mode not in AGGREGATIONS:
        raise ValueError(f"{name} must be one of {AGGREGATIONS}, got {mode!r}")
    return mode


def token_weights(mask, mode: str = "token-mean", norm: float | None = None):
    r"""The weight :math:`\kappa_{it} = \partial\,\mathrm{aggregate}/\partial x_{it}` each mode gives token :math:`t` of row :math:`i`.

    With :math:`n_i = \sum_t m_{it}` tokens in row :math:`i` of :math:`B`
    (:mod:`derivations.losses`, :func:`derivations.losses.aggregation_weights`):

    ``token-mean``
        :math:`1/\sum_j n_j` (or :math:`1/N` with ``norm=N``);
    ``seq-mean-token-mean``
        :math:`1/(B\,\max(n_i, 1))`;
    ``seq-mean-token-sum``
        :math:`1/B`;
    ``seq-mean-token-sum-norm``
        :math:`1/(B\,C)`, :math:`C` = ``norm`` (default :math:`T`),

    on masked tokens, 0 elsewhere.  Leading dimensions before ``[B, T]`` are
    independent batches.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import token_weights
    >>> m = np.array([[1, 1, 1, 1], [1, 0, 0, 0]])
    >>> print(token_weights(m, "token-mean"))
    [[0.2 0.2 0.2 0.2]
     [0.2 0.  0.  0. ]]
    >>> print(token_weights(m, "seq-mean-token-mean"))
    [[0.125 0.125 0.125 0.125]
     [0.5   0.    0.    0.   ]]
    """
    mode = _mode(mode)
    raw, kind = _raw_tensor("mask", mask)
    m = _mask_of_rank("mask", mask, 2, exact=False)
    return like(kind, _kappa(m.to(raw.dtype if raw.is_floating_point() else torch.float64), mode, norm))


def _norm(mode: str, norm) -> float | None:
    """``norm`` checked: a positive number, and only for the modes that take one."""
    if norm is None:
        return None
    if mode not in ("token-mean", "seq-mean-token-sum-norm"):
        raise ValueError(f"norm is used by token-mean and seq-mean-token-sum-norm only, not {mode!r}")
    norm = require_real("norm", norm)
    if not norm > 0:
        raise ValueError(f"norm must be > 0, got {norm}")
    return norm


def _kappa(m: torch.Tensor, mode: str, norm) -> torch.Tensor:
    """Token weights of ``mode`` for a float 0/1 mask ``[..., B, T]``."""
    B, T = m.shape[-2], m.shape[-1]
    n = m.sum(-1, keepdim=True)
    norm = _norm(mode, norm)
    if mode == "token-mean":
        denom = n.sum(-2, keepdim=True).clamp(min=1) if norm is None else torch.full_like(n[..., :1, :], norm)
        return m / denom
    if mode == "seq-mean-token-mean":
        return m / (B * n.clamp(min=1))
    if mode == "seq-mean-token-sum":
        return m / B
    return m / (B * (T if norm is None else norm))


def _reduce(x: torch.Tensor, keep: torch.Tensor, mode: str, norm, n: torch.Tensor | None = None, zero_outside: bool = False) -> torch.Tensor:
    """``sum(kappa * x)`` over the last two dimensions, without building kappa (the same numbers as :func:`_kappa`).

    ``x`` is ``[..., B, T]``, or ``[..., B, 1]`` for a value constant along
    each row; ``keep`` is the ``[..., B, T]`` mask (boolean, or float 0/1 when
    ``x`` is finite) and ``n`` its row counts, if known.  Slots outside
    ``keep`` are never read, so they may hold anything (their gradient is 0),
    unless ``zero_outside`` says they already hold 0.
    """
    norm = _norm(mode, norm)
    B, T = keep.shape[-2], keep.shape[-1]
    row_constant = x.shape[-1] == 1 and T != 1
    if n is None and (row_constant or mode == "seq-mean-token-mean"):
        n = keep.sum(-1, keepdim=True)
    if row_constant:
        live = torch.where(n > 0, x, 0)  # an empty row's value is never read
        total = (live if mode == "seq-mean-token-mean" else live * n).sum((-2, -1))
    else:
        kept = x if zero_outside else _zeroed(x, keep)
        if mode == "seq-mean-token-mean":
            total = (kept.sum(-1, keepdim=True) / n.clamp(min=1)).sum((-2, -1))
        else:
            total = kept.sum((-2, -1))
    if mode == "token-mean":
        if norm is not None:
            return total / norm
        return total / (keep.sum((-2, -1)) if n is None else n.sum((-2, -1))).clamp(min=1)
    if mode in ("seq-mean-token-mean", "seq-mean-token-sum"):
        return total / B
    return total / (B * (T if norm is None else norm))


def aggregate(per_token, mask, mode: str = "token-mean", norm: float | None = None):
    r"""Reduce a ``[B, T]`` per-token loss to a scalar the way trainers do: :math:`\sum_{i,t}\kappa_{it}\,x_{it}`.

    ================================  =================================================================
    ``token-mean``                    :math:`\sum_{i,t} m x / \sum_{i,t} m` (``norm`` replaces the denominator)
    ``seq-mean-token-mean``           :math:`\frac1B\sum_i \frac{\sum_t m x}{\max(n_i, 1)}`
    ``seq-mean-token-sum``            :math:`\frac1B\sum_i \sum_t m x`
    ``seq-mean-token-sum-norm``       :math:`\frac{1}{B C}\sum_{i,t} m x`, :math:`C` = ``norm`` or :math:`T`
    ================================  =================================================================

    :data:`TRAINER_MODES` maps verl's ``loss_agg_mode``, TRL's ``loss_type``
    and OpenRLHF's ``token_level_loss`` to a mode and its ``norm``.  An
    all-masked row contributes 0 (and still counts in :math:`B`); a batch
    with no unmasked token gives 0.  :func:`token_weights` returns
    :math:`\kappa`; the length bias each mode implies is derived in
    :func:`derivations.losses.aggregation_weights`.

    Examples
    --------
    >>> import torch
    >>> from numeric import aggregate
    >>> x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 0.0, 0.0, 0.0]])
    >>> m = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    >>> [round(float(aggregate(x, m, mode)), 6) for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")]
    [4.0, 6.25, 10.0]
    >>> round(float(aggregate(x, m, "seq-mean-token-sum-norm", norm=8)), 6)
    1.25
    """
    mode = _mode(mode)
    t, m, kind = masked_inputs(mask, per_token=per_token)
    x = t["per_token"]
    if x.ndim < 2:
        raise ValueError(f"per_token must have shape [..., B, T], got {tuple(x.shape)}")
    return like(kind, _reduce(x, m, mode, norm).to(_dtype(per_token)))


# ------------------------------------------------------------------ policy losses

POLICY_LOSSES = ("reinforce", "gpg", "ppo", "gspo", "gspo_token", "cispo", "sapo", "gmpo")
"""Methods of :func:`policy_loss`; ``ppo`` takes ``dual_clip``, ``cispo`` takes ``cispo_cap``."""

_SEQUENCE_LEVEL = ("gspo", "gspo_token", "gmpo")


def _method(method: str) -> str:
    if method not in POLICY_LOSSES:
        raise ValueError(f"method must be one of {POLICY_LOSSES}, got {method!r}")
    return method


class _Inputs(NamedTuple):
    """The tensors of a policy loss, shapes checked, on ``log_prob``'s device in its compute dtype."""

    log_prob: torch.Tensor
    old_log_prob: torch.Tensor | None  # None where the method never reads it (REINFORCE, GPG)
    advantage: torch.Tensor  # [B, 1] or [B, T]
    weight: torch.Tensor | None
    mask: torch.Tensor  # as given, on the device
    kind: str


def _policy_inputs(method, log_prob, old_log_prob, advantage, mask, weight) -> _Inputs:
    lp, kind = to_tensor("log_prob", log_prob)
    if lp.ndim != 2:
        raise ValueError(f"log_prob must have shape [B, T], got {tuple(lp.shape)}")
    lp = lp.to(compute_dtype(lp.dtype))
    old = _aligned("old_log_prob", old_log_prob, lp)
    if mask is None:
        raise ValueError("mask is required: a [B, T] 0/1 or boolean response mask")
    m, _ = _raw_tensor("mask", mask)
    if m.shape != lp.shape:
        raise ValueError(f"mask must have the shape of log_prob {tuple(lp.shape)}, got {tuple(m.shape)}")
    A, _ = to_tensor("advantage", advantage)
    A = A.to(device=lp.device, dtype=lp.dtype)
    if A.shape == lp.shape[:1]:
        A = A[:, None]
    elif A.shape != lp.shape:
        raise ValueError(f"advantage must have shape [B] = {tuple(lp.shape[:1])} or the shape of log_prob {tuple(lp.shape)}, got {tuple(A.shape)}")
    w = None if weight is None else _aligned("weight", weight, lp)
    return _Inputs(lp, None if method in ("reinforce", "gpg") else old, A, w, m.to(lp.device), kind)


def _aligned(name: str, value, like_t: torch.Tensor) -> torch.Tensor:
    t, _ = to_tensor(name, value)
    if t.shape != like_t.shape:
        raise ValueError(f"{name} must have the shape of log_prob {tuple(like_t.shape)}, got {tuple(t.shape)}")
    return t.to(device=like_t.device, dtype=like_t.dtype)


def _zeroed(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``x`` with the slots outside ``keep`` set to 0, and no gradient there.

    A product with a float 0/1 ``keep`` (right when ``x`` is finite);
    ``torch.where`` with a boolean one (padding may hold NaN or inf).
    """
    return x * keep if keep.is_floating_point() else torch.where(keep, x, 0)


def _float_mask(m: torch.Tensor, like_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The mask as numbers in ``like_t``'s dtype, and :math:`\sum|m - m^2|`: 0 exactly when every entry is 0 or 1.

    A sum of non-negative floats is 0 only if every term is, and
    :math:`m - m^2` rounds to 0 only where :math:`m^2 = m`, at 0 and 1
    (:math:`+\infty` gives NaN).  A float mask is tested in its own precision.
    """
    if m.dtype == torch.bool:
        return m.to(like_t.dtype), torch.zeros((), dtype=like_t.dtype, device=like_t.device)
    numbers = m if m.is_floating_point() else m.to(like_t.dtype)
    return m.to(like_t.dtype), torch.addcmul(numbers, numbers, numbers, value=-1).abs().sum()


def _policy_loss(method, x: _Inputs, keep: torch.Tensor, agg, norm, options) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, witness)`` with padding zeroed by ``keep``.

    The witness is finite exactly when every input the loss reads is finite
    wherever ``keep`` zeroes it by a product (everywhere, for a float
    ``keep``; in the kept slots, up to overflow, for a boolean one): each
    input reaches the loss or the witness through a sum or a product, and
    ``0 * inf`` is NaN.
    """
    n = keep.sum(-1, keepdim=True) if method in _SEQUENCE_LEVEL or agg == "seq-mean-token-mean" else None
    lp = _zeroed(x.log_prob, keep)
    delta = None if x.old_log_prob is None else _zeroed(x.log_prob - x.old_log_prob.detach(), keep)
    A = x.advantage if x.advantage.shape[-1] == 1 else _zeroed(x.advantage, keep)
    per_token = _policy_terms(method, lp, delta, A, n, *options)
    witness = A.detach().sum() + (0 if delta is None else delta.detach().sum())
    if x.weight is not None:
        per_token = per_token * _zeroed(x.weight, keep).detach()
    zero_outside = keep.is_floating_point() and method in ("reinforce", "gpg", "cispo")  # products of zeroed inputs
    loss = _reduce(per_token, keep, agg, norm, n, zero_outside)
    return loss, witness + loss.detach()


def _policy_terms(method, lp, delta, A, n, low, high, dual_clip, cispo_cap, sapo_tau, gmpo_clip):
    """The loss of ``method`` per token, ``[B, T]``, or ``[B, 1]`` where it is constant along a row (GSPO, GMPO)."""
    neg_A = -A.detach()
    if method in ("reinforce", "gpg"):
        return neg_A * lp
    if method == "ppo":
        r = delta.exp()
        loss = torch.maximum(neg_A * r, neg_A * r.clamp(1 - low, 1 + high))
        if dual_clip is not None:
            loss = torch.where(neg_A > 0, torch.minimum(loss, neg_A * dual_clip), loss)
        return loss
    if method in ("gspo", "gspo_token"):
        log_s = delta.sum(-1, keepdim=True) / n.clamp(min=1)
        if method == "gspo_token":  # straight-through: the value of s_i, the gradient of pi_t / sg(pi_t)
            log_s = log_s.detach() + (delta - delta.detach())
        s = log_s.exp()
        return torch.maximum(neg_A * s, neg_A * s.clamp(1 - low, 1 + high))
    if method == "cispo":
        r = delta.detach().exp()
        w = r.clamp(max=cispo_cap) if cispo_cap is not None else r.clamp(1 - low, 1 + high)
        return lp * (w * neg_A)
    if method == "sapo":
        tau = torch.where(neg_A < 0, neg_A.new_tensor(sapo_tau[0]), neg_A.new_tensor(sapo_tau[1]))
        return torch.sigmoid(tau * (delta.exp() - 1)) * (4 * neg_A / tau)
    # gmpo: exp(mean_t of the sign-clipped log-ratio), times the row's mean advantage
    g_low, g_high = gmpo_clip
    sign = -torch.sign(neg_A)
    clipped = sign * torch.minimum(sign * delta, sign * delta.clamp(-g_low, g_high))
    mean_neg_A = neg_A if neg_A.shape[-1] == 1 else neg_A.sum(-1, keepdim=True) / n.clamp(min=1)
    return mean_neg_A * (clipped.sum(-1, keepdim=True) / n.clamp(min=1)).exp()


def policy_loss(
    method: str,
    log_prob,
    old_log_prob,
    advantage,
    mask,
    *,
    agg: str | None = None,
    norm: float | None = None,
    clip_epsilon=0.2,
    dual_clip: float | None = None,
    cispo_cap: float | None = None,
    sapo_tau=(1.0, 1.05),
    gmpo_clip=(0.4, 0.4),
    weight=None,
):
    r"""The policy losses trainers ship, batched: :func:`aggregate` of a per-token loss.

    With :math:`\ell = \log\pi_\theta`, :math:`r = e^{\ell - \ell_{\mathrm{old}}}`,
    :math:`\mathrm{clip}(x) = \min(\max(x, 1-\varepsilon_l), 1+\varepsilon_h)`:

    ``reinforce``, ``gpg``
        :math:`-A\,\ell` (verl ``gpg``; GPG changes the advantage, :func:`gpg_advantages`).
    ``ppo``
        :math:`-\min(rA, \mathrm{clip}(r)A)`; with ``dual_clip`` :math:`c`, for :math:`A < 0`
        :math:`\min(\cdot, -cA)` (verl ``vanilla``, TRL ``grpo``/``bnpo``/``dr_grpo``/``dapo``,
        OpenRLHF ``PolicyLoss``).
    ``gspo``
        :math:`-\min(s_iA, \mathrm{clip}(s_i)A)` on every token of row :math:`i`,
        :math:`s_i = \exp\overline{(\ell - \ell_{\mathrm{old}})}` (TRL
        ``importance_sampling_level="sequence"``).
    ``gspo_token``
        the same with the straight-through :math:`s_{it} = \mathrm{sg}(s_i)\,\pi_{it}/\mathrm{sg}(\pi_{it})` (verl ``gspo``).
    ``cispo``
        :math:`-\mathrm{sg}(\mathrm{clip}(r))\,A\,\ell` (verl ``cispo``); with ``cispo_cap``
        :math:`\kappa`, :math:`-\mathrm{sg}(\min(r, \kappa))\,A\,\ell` (TRL ``cispo``, whose
        ``epsilon_high`` is :math:`\kappa`).
    ``sapo``
        :math:`-\frac{4}{\tau}\,\sigma(\tau(r-1))\,A`, :math:`\tau = \tau_+` if :math:`A > 0`
        else :math:`\tau_-` (TRL ``sapo``).
    ``gmpo``
        per row, :math:`-\bar A_i \exp\overline{g(\Delta)}` with
        :math:`g(\Delta) = \mathrm{sgn}(A)\min(\mathrm{sgn}(A)\Delta,\ \mathrm{sgn}(A)\,\mathrm{clamp}(\Delta, -\delta_l, \delta_h))`,
        averaged over rows (verl ``geo_mean``).

    (:math:`\bar x` is the mean over a row's response tokens.)  Every
    gradient is :math:`-\kappa_{it}\,w_{it}\,A_{it}\,\nabla\ell_{it}` with
    :math:`w` from :func:`policy_weight` (derived in :mod:`derivations.losses`)
    and :math:`\kappa` from :func:`token_weights`.

    Parameters
    ----------
    method : str
        One of :data:`POLICY_LOSSES`.
    log_prob, old_log_prob : numpy array or torch tensor
        ``[B, T]``; differentiable in ``log_prob``.
    advantage : numpy array or torch tensor
        ``[B, T]``, or ``[B]`` (one per sequence, broadcast).
    mask : numpy array or torch tensor
        ``[B, T]`` 0/1 or boolean.
    agg : str, optional
        An :func:`aggregate` mode; default ``"token-mean"``, for GSPO
        ``"seq-mean-token-mean"`` (as verl forces).  GMPO is a sequence loss
        averaged over rows (verl ``geo_mean`` ignores the mode) and takes none.
    norm : float, optional
        :func:`aggregate`'s ``norm``.
    clip_epsilon : float or (float, float)
        :math:`\varepsilon` or :math:`(\varepsilon_l, \varepsilon_h)` (DAPO's clip-higher: ``(0.2, 0.28)``).
    dual_clip : float, optional
        Dual-clip constant :math:`c > 1` (verl ``clip_ratio_c``, OpenRLHF ``dual_clip``).
    cispo_cap : float, optional
        CISPO's absolute cap :math:`\kappa` (TRL); without it, the two-sided clip (verl).
    sapo_tau : (float, float)
        :math:`(\tau_+, \tau_-)`; TRL's defaults ``(1.0, 1.05)``.
    gmpo_clip : (float, float)
        :math:`(\delta_l, \delta_h)`, GMPO's clip range in log space (verl's clip ratios).
    weight : numpy array or torch tensor, optional
        ``[B, T]`` per-token sampler-correction weights (detached), multiplying
        the per-token loss before aggregation, as TRL's
        ``importance_sampling_ratio`` and verl's ``rollout_is_weights``.

    Returns
    -------
    A scalar of ``log_prob``'s kind, device and dtype.

    Notes
    -----
    Masked slots may hold anything (padding sentinels, ``-inf``, NaN): they
    reach neither the value nor the gradient.  When every input is finite
    everywhere and the mask is 0/1 (one sum and one synchronisation tell),
    padding is zeroed by a product with the mask; otherwise the loss is
    computed a second time with ``torch.where``, which also names an
    argument holding NaN or inf where the mask is 1.  ``reinforce`` and
    ``gpg`` never read ``old_log_prob`` (only its shape is checked).

    References
    ----------
    Schulman et al. (PPO) arXiv:1707.06347; Ye et al. (dual clip) AAAI 2020; Yu et al. (DAPO)
    arXiv:2503.14476; Zheng et al. (GSPO) arXiv:2507.18071; MiniMax (CISPO) arXiv:2506.13585;
    Gao et al. (SAPO) arXiv:2511.20347; Zhao et al. (GMPO) arXiv:2507.20673; Chu et al. (GPG) arXiv:2504.02546.

    Examples
    --------
    >>> import torch
    >>> from numeric import policy_loss
    >>> lp = torch.log(torch.tensor([[0.3, 0.6, 0.5]])).requires_grad_(True)
    >>> old = torch.log(torch.tensor([[0.2, 0.5, 0.5]]))
    >>> A, m = torch.tensor([1.0]), torch.tensor([[1, 1, 0]])
    >>> loss = policy_loss("ppo", lp, old, A, m, clip_epsilon=(0.2, 0.28))
    >>> round(loss.item(), 6), torch.autograd.grad(loss, lp)[0].round(decimals=6).tolist()
    (-1.24, [[-0.0, -0.6, 0.0]])
    """
    method = _method(method)
    if method == "gmpo" and agg is not None:
        raise ValueError("agg must be None for gmpo: it is a sequence loss averaged over rows")
    agg = agg or ("seq-mean-token-mean" if method in ("gspo", "gspo_token", "gmpo") else "token-mean")
    _mode(agg, "agg")
    low, high = clip_bounds(clip_epsilon)
    if dual_clip is not None:
        if method != "ppo":
            raise ValueError(f"dual_clip is a PPO option, not {method!r}'s")
        dual_clip = require_real("dual_clip", dual_clip)
        if not dual_clip > 1:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    if cispo_cap is not None:
        cispo_cap = require_nonnegative("cispo_cap", cispo_cap)
    tau = tuple(require_real(f"sapo_tau[{i}]", x) for i, x in enumerate(_pair("sapo_tau", sapo_tau)))
    if not min(tau) > 0:
        raise ValueError(f"sapo_tau must be positive, got {tau}")
    gclip = tuple(require_nonnegative(f"gmpo_clip[{i}]", x) for i, x in enumerate(_pair("gmpo_clip", gmpo_clip)))
    x = _policy_inputs(method, log_prob, old_log_prob, advantage, mask, weight)
    options = (low, high, dual_clip, cispo_cap, tau, gclip)
    keep, not_01 = _float_mask(x.mask, x.log_prob)
    loss, witness = _policy_loss(method, x, keep, agg, norm, options)
    if (not_01 + 0 * witness).item() != 0:  # a mask not 0/1, or NaN or inf somewhere: the careful way
        keep = as_mask("mask", x.mask, "log_prob", x.log_prob)
        loss, witness = _policy_loss(method, x, keep, agg, norm, options)
        if not bool(torch.isfinite(witness)):
            require_finite_where(keep, log_prob=x.log_prob, old_log_prob=x.old_log_prob, advantage=x.advantage, weight=x.weight)
    return like(x.kind, loss.to(_dtype(log_prob)))


def _pair(name: str, value) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a pair of numbers, got {value!r}")
    return tuple(value)


@cache
def _weight_fn(method: str):
    w = derived.weight(method)
    syms = (derived.r, derived.A, derived.eps_l, derived.eps_h, derived.c, derived.kappa, derived.tau)
    return sp.lambdify(syms, w, modules=[{"Min": np.minimum, "Max": np.maximum}, "numpy"])


def policy_weight(
    method: str,
    log_prob,
    old_log_prob,
    advantage,
    mask,
    *,
    clip_epsilon=0.2,
    dual_clip: float | None = None,
    cispo_cap: float | None = None,
    sapo_tau=(1.0, 1.05),
    gmpo_clip=(0.4, 0.4),
):
    r"""The derived gradient weight :math:`w_{it}` of ``method``: :math:`\partial\,\mathrm{loss}/\partial\ell_{it} = -\kappa_{it} w_{it} A_{it}`.

    The weights are :func:`derivations.losses.weight` lambdified, evaluated at
    the token ratio :math:`r_{it}` (token methods), at the sequence ratio
    :math:`s_i` (GSPO, both forms, PPO's weight there), or at GMPO's clipped
    geometric mean times the token's live indicator.  0 on masked tokens.

    Examples
    --------
    >>> import torch
    >>> from numeric import policy_weight
    >>> lp = torch.log(torch.tensor([[0.3, 0.6]])); old = torch.log(torch.tensor([[0.2, 0.5]]))
    >>> policy_weight("ppo", lp, old, torch.tensor([1.0]), torch.ones(1, 2), clip_epsilon=(0.2, 0.28)).tolist()
    [[0.0, 1.2]]
    """
    method = _method(method)
    low, high = clip_bounds(clip_epsilon)
    x = _policy_inputs("ppo", log_prob, old_log_prob, advantage, mask, None)
    t, keep, _ = masked_inputs(x.mask, log_prob=x.log_prob, old_log_prob=x.old_log_prob, advantage=x.advantage.expand_as(x.log_prob))
    kind, dtype, m = x.kind, t["log_prob"].dtype, keep.double()
    delta = (t["log_prob"] - t["old_log_prob"]).detach().double()
    A = t["advantage"].detach().double()
    tau_p, tau_n = _pair("sapo_tau", sapo_tau)
    args = dict(eps_l=low, eps_h=high, c=dual_clip or 0.0, kappa=cispo_cap or 0.0)
    if method in ("gspo", "gspo_token"):
        w = _evaluate("ppo", _row_mean(delta, m).exp().expand_as(A), A, **args)
    elif method == "gmpo":
        g_low, g_high = _pair("gmpo_clip", gmpo_clip)
        sign = torch.sign(A)
        clipped = sign * torch.minimum(sign * delta, sign * delta.clamp(-g_low, g_high))
        live = torch.where(A > 0, delta <= g_high, delta >= -g_low).double()
        w = _row_mean(clipped, m).exp() * live
    else:
        name = {"ppo": "dual_clip" if dual_clip is not None else "ppo", "cispo": "cispo_cap" if cispo_cap is not None else "cispo"}.get(method, method)
        tau = torch.where(A > 0, A.new_tensor(tau_p), A.new_tensor(tau_n))
        w = _evaluate(name, delta.exp(), A, tau=tau, **args)
    return like(kind, (w * m).to(dtype).to(_dtype(log_prob)))


def _row_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Masked mean over the time dimension, ``[B, 1]``; 0 for an all-masked row."""
    return (x * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)


def _evaluate(name, r, A, eps_l, eps_h, c, kappa, tau=1.0):
    fn = _weight_fn(name)
    out = fn(r.numpy(), A.numpy(), eps_l, eps_h, c, kappa, tau.numpy() if isinstance(tau, torch.Tensor) else tau)
    return torch.as_tensor(np.broadcast_to(np.asarray(out, dtype=np.float64), r.shape).copy())


# ------------------------------------------------------------------ penalties

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_penalty(log_prob, ref_log_prob, mask, estimator: str = "k3", clamp: bool = False):
    r"""Per-token KL estimates :math:`k_1, k_2, k_3` of :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`, 0 on masked tokens.

    With :math:`\Delta = \log\pi - \log\pi_{\mathrm{ref}}`: :math:`k_1 = \Delta`,
    :math:`k_2 = \Delta^2/2`, :math:`k_3 = e^{-\Delta} - 1 + \Delta`
    (:mod:`numeric.trust_region`).  ``clamp=True`` is verl's ``low_var_kl``:
    :math:`\Delta` clamped to :math:`[-20, 20]` and :math:`k_3` to
    :math:`[-10, 10]` (TRL's :math:`k_3` is unclamped).  As a loss term,
    :math:`\beta` times :func:`aggregate` of it (verl ``use_kl_loss``, TRL
    ``beta``); as a reward penalty, :math:`-\beta k_1` added to the token
    rewards (verl ``compute_rewards``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import kl_penalty
    >>> lp, ref = np.log([[0.5, 0.5]]), np.log([[0.25, 0.75]])
    >>> [kl_penalty(lp, ref, np.ones((1, 2)), k).round(6).tolist() for k in ("k1", "k3")]
    [[[0.693147, -0.405465]], [[0.193147, 0.094535]]]
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")
    if not isinstance(clamp, bool):
        raise TypeError(f"clamp must be a bool, got {type(clamp).__name__}")
    t, m, kind = masked_inputs(mask, log_prob=log_prob, ref_log_prob=ref_log_prob)
    delta = t["log_prob"] - t["ref_log_prob"]
    if clamp:
        delta = delta.clamp(-20, 20)
    k = _KL[estimator](delta) + 0 * delta
    if clamp and estimator == "k3":
        k = k.clamp(-10, 10)
    return like(kind, k.to(_dtype(log_prob)))


def value_loss(value, old_value, returns, mask, clip: float | None = None, agg: str = "token-mean", norm: float | None = None):
    r"""The clipped value loss :math:`\frac12 \max\bigl((V - G)^2, (V_{\mathrm{clip}} - G)^2\bigr)`, aggregated.

    :math:`V_{\mathrm{clip}} = V_{\mathrm{old}} + \mathrm{clamp}(V - V_{\mathrm{old}}, -\epsilon, \epsilon)`;
    without ``clip``, :math:`\frac12 (V - G)^2`.  verl ``compute_value_loss``
    (``cliprange_value``) and OpenRLHF ``ValueLoss`` (``clip_eps``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import value_loss
    >>> V, V0, G = np.array([[1.0, 0.0]]), np.array([[0.5, 0.0]]), np.array([[0.0, 1.0]])
    >>> round(float(value_loss(V, V0, G, np.ones((1, 2)), clip=0.2)), 6)
    0.5
    """
    t, m, kind = masked_inputs(mask, value=value, old_value=old_value, returns=returns)
    v, v0, g = t["value"], t["old_value"].detach(), t["returns"].detach()
    sq = (v - g) ** 2
    if clip is not None:
        clip = require_nonnegative("clip", clip)
        sq = torch.maximum(sq, (v0 + (v - v0).clamp(-clip, clip) - g) ** 2)
    return like(kind, (0.5 * _reduce(sq, m, _mode(agg, "agg"), norm)).to(_dtype(value)))


# ------------------------------------------------------------------ advantage estimators


def masked_whiten(x, mask, shift_mean: bool = True, unbiased: bool = True, eps: float = 1e-8):
    r"""Batch whitening over the masked entries: :math:`(x - \mu)/\sqrt{\sigma^2 + \epsilon}`, 0 on masked slots.

    :math:`\mu, \sigma^2` are the mean and the variance (Bessel-corrected if
    ``unbiased``, as verl's and TRL's ``masked_var``) over every masked entry of
    the batch; ``shift_mean=False`` adds :math:`\mu` back.  Needs two unmasked
    entries when ``unbiased``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import masked_whiten
    >>> print(masked_whiten(np.array([[1.0, 3.0, 99.0]]), np.array([[1, 1, 0]]), eps=0.0).round(6))
    [[-0.707107  0.707107  0.      ]]
    """
    t, m, kind = masked_inputs(mask, x=x)
    v = t["x"]
    mf = m.to(v.dtype)
    n = mf.sum()
    if float(n) < (2 if unbiased else 1):
        raise ValueError(f"mask must select at least {2 if unbiased else 1} entries to whiten, got {int(n)}")
    eps = require_nonnegative("eps", eps)
    mean = (v * mf).sum() / n
    var = (((v - mean) * mf) ** 2).sum() / (n - 1 if unbiased else n)
    out = (v - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return like(kind, torch.where(m, out, torch.zeros_like(out)).to(_dtype(x)))


def reinforce_pp_advantages(token_reward, mask, gamma: float = 1.0):
    r"""REINFORCE++: discounted reward-to-go within each response, whitened over the batch.

    :math:`G_t = \sum_{u \ge t} \gamma^{u-t} m_u r_u`, then :func:`masked_whiten`
    (verl ``compute_reinforce_plus_plus_outcome_advantage``).  The whitening
    couples the rows of the batch, so no fixed scale :math:`c` exists.

    References
    ----------
    J. Hu, "REINFORCE++", arXiv:2501.03262 (2025).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import reinforce_pp_advantages
    >>> r = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]); m = np.array([[1, 1, 0], [1, 1, 1]])
    >>> print(reinforce_pp_advantages(r, m).round(4))
    [[ 1.0954  1.0954  0.    ]
     [-0.7303 -0.7303 -0.7303]]
    """
    t, m, kind = masked_inputs(mask, token_reward=token_reward)
    gamma = require_nonnegative("gamma", gamma)
    r = t["token_reward"]
    mf = m.to(r.dtype)
    out, running = torch.empty_like(r), torch.zeros_like(r[..., 0])
    for k in reversed(range(r.shape[-1])):
        running = (r[..., k] + gamma * running) * mf[..., k]
        out[..., k] = running
    return like(kind, masked_whiten(out, m).to(_dtype(token_reward)))


def _group_rewards(name: str, reward):
    r, kind = to_tensor(name, reward)
    if r.ndim < 1:
        raise ValueError(f"{name} must have a group dimension (the last one), got a scalar")
    return require_finite(name, r).to(compute_dtype(r.dtype)), kind


def reinforce_pp_baseline_advantages(reward, mask):
    r"""REINFORCE++ with a baseline: group-mean-centred rewards on each token, whitened over the batch.

    ``reward`` ``[..., G]`` (one per answer, the group last), ``mask``
    ``[..., G, T]``: :math:`A_{it} = \mathrm{whiten}(R_i - \bar R)` over every
    masked token of the batch (verl
    ``compute_reinforce_plus_plus_baseline_outcome_advantage``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import reinforce_pp_baseline_advantages
    >>> A = reinforce_pp_baseline_advantages(np.array([[1.0, 0.0]]), np.ones((1, 2, 2)))
    >>> print(A.round(6))
    [[[ 0.866025  0.866025]
      [-0.866025 -0.866025]]]
    """
    r, kind = _group_rewards("reward", reward)
    centred = _centred(r)
    m_raw = _mask_of_rank("mask", mask, 2, exact=False)
    if tuple(m_raw.shape[:-1]) != tuple(r.shape):
        raise ValueError(f"mask must have shape [..., G, T] with [..., G] = {tuple(r.shape)}, got {tuple(m_raw.shape)}")
    tokens = centred[..., None].expand(m_raw.shape).contiguous()
    return like(kind, masked_whiten(tokens, mask).to(_dtype(reward)))


def remax_advantages(token_reward, baseline_reward, mask):
    r"""ReMax: reward-to-go minus the reward of the greedy answer, :math:`A_t = \sum_{u\ge t} m_u r_u - b`.

    ``baseline_reward`` ``[B]`` is the reward of the greedy decoding of the same
    prompt (verl ``compute_remax_outcome_advantage``).  The greedy answer does not
    depend on the sampled one, so the baseline is admissible: :math:`c = 1`.

    References
    ----------
    Li et al., "ReMax", arXiv:2310.10505 (2023).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import remax_advantages
    >>> print(remax_advantages(np.array([[0.0, 1.0, 0.0]]), np.array([0.25]), np.array([[1, 1, 0]])))
    [[0.75 0.75 0.  ]]
    """
    t, m, kind = masked_inputs(mask, token_reward=token_reward)
    r = t["token_reward"]
    b, _ = to_tensor("baseline_reward", baseline_reward)
    if tuple(b.shape) != tuple(r.shape[:-1]):
        raise ValueError(f"baseline_reward must have shape {tuple(r.shape[:-1])}, got {tuple(b.shape)}")
    require_finite("baseline_reward", b)
    mf = m.to(r.dtype)
    returns = (r * mf).flip(-1).cumsum(-1).flip(-1)
    return like(kind, torch.where(m, returns - b.to(r)[..., None], torch.zeros_like(r)).to(_dtype(token_reward)))


def opo_advantages(reward, length):
    r"""OPO: the length-weighted group baseline :math:`b = \sum_j n_j R_j / \sum_j n_j`, :math:`A_i = R_i - b`.

    ``reward`` and ``length`` ``[..., G]`` (verl ``compute_opo_outcome_advantage``;
    the baseline includes the answer itself).  The baseline moves with the
    answer's own length, so with variable lengths the expected update is not a
    multiple of :math:`\nabla J`: on TinyLM at :math:`G = 2`, enumerated over
    every pair, its best fit :math:`0.506\,\nabla J` leaves 8.6% of it unexplained
    (``tests/test_losses.py``).

    References
    ----------
    Hao et al., "On-Policy RL with Optimal Reward Baseline", arXiv:2505.23585 (2025).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import opo_advantages
    >>> print(opo_advantages(np.array([1.0, 0.0]), np.array([1.0, 3.0])))
    [ 0.75 -0.25]
    """
    r, kind = _group_rewards("reward", reward)
    n, _ = _group_rewards("length", length)
    if n.shape != r.shape:
        raise ValueError(f"length must have the shape of reward {tuple(r.shape)}, got {tuple(n.shape)}")
    if bool((n <= 0).any()):
        raise ValueError("length must be positive")
    n = n.to(r)
    b = (n * r).sum(-1, keepdim=True) / n.sum(-1, keepdim=True)
    return like(kind, (r - b).to(_dtype(reward)))


def gpg_advantages(reward, f_norm: float = 1.0, valid: str = "advantage"):
    r"""GPG: centred group rewards scaled by :math:`\alpha = B / M`, :math:`A_i = \alpha (R_i - \bar R)/F`.

    ``reward`` ``[..., n_groups, G]`` is one batch of groups (leading dimensions
    are independent batches); :math:`B` is its number of answers and :math:`M`
    the number that count as valid: with ``valid="advantage"`` (the paper)
    answers whose centred advantage is non-zero, with ``valid="reward"`` (verl
    ``compute_gpg_outcome_advantage``, ``count_nonzero(scores)``) answers whose
    *reward* is non-zero.  :math:`M` is clamped at 1.

    References
    ----------
    Chu et al., "GPG: A Simple and Strong Reinforcement Learning Baseline", arXiv:2504.02546 (2025).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import gpg_advantages
    >>> R = np.array([[1.0, 0.0], [1.0, 1.0]])
    >>> print(gpg_advantages(R)), print(gpg_advantages(R, valid="reward").round(6))
    [[ 1. -1.]
     [ 0.  0.]]
    [[ 0.666667 -0.666667]
     [ 0.        0.      ]]
    (None, None)
    """
    r, kind = _group_rewards("reward", reward)
    if r.ndim < 2:
        raise ValueError(f"reward must have shape [..., n_groups, G], got {tuple(r.shape)}")
    if valid not in ("advantage", "reward"):
        raise ValueError(f"valid must be 'advantage' or 'reward', got {valid!r}")
    f_norm = require_real("f_norm", f_norm)
    if not f_norm > 0:
        raise ValueError(f"f_norm must be > 0, got {f_norm}")
    centred = _centred(r)
    counted = (centred if valid == "advantage" else r) != 0
    alpha = (r.shape[-1] * r.shape[-2]) / counted.sum((-2, -1), keepdim=True).clamp(min=1).to(r)
    return like(kind, (alpha * centred / f_norm).to(_dtype(reward)))


def passk_advantages(reward, eps: float = 1e-6, std: bool = False):
    r"""The pass@k advantage: only the best answer of a group gets :math:`R_{(1)} - R_{(2)}`, the rest 0.

    With ``std=True`` it is divided by the group's Bessel std plus ``eps``
    (verl ``compute_grpo_passk_outcome_advantage`` with ``norm_adv_by_std_in_grpo``).
    Ties for the best: the first one gets it (the margin is then 0).  For a
    binary reward :math:`c = (1-p)^{G-1}` without the std: the update is
    :math:`\nabla\,\mathrm{pass@}G / G`.

    References
    ----------
    Chen et al., "Pass@k Training", arXiv:2508.10751 (2025); verl cites arXiv:2503.19595.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import passk_advantages
    >>> print(passk_advantages(np.array([0.2, 0.9, 0.5])))
    [0.  0.4 0. ]
    """
    r, kind = _group_rewards("reward", reward)
    if r.shape[-1] < 2:
        raise ValueError(f"reward must hold G >= 2 answers per group, got {r.shape[-1]}")
    eps = require_nonnegative("eps", eps)
    top = r.topk(2, -1)
    margin = top.values[..., :1] - top.values[..., 1:2]
    if std:
        margin = margin / (r.std(-1, keepdim=True) + eps)
    out = torch.zeros_like(r).scatter(-1, top.indices[..., :1], margin)
    return like(kind, out.to(_dtype(reward)))


def advantage_scale(advantages, p: float, G: int) -> float:
    r"""The exact scale :math:`c` in :math:`\mathbb{E}[A_1 \nabla\log\pi(o_1)] = c\,\nabla J` for a binary reward.

    With :math:`R \in \{0, 1\}`, :math:`P(R = 1) = p`, the conditional mean
    :math:`a(v) = \mathbb{E}[A_1 \mid R_1 = v]` of any group estimator is
    computed exactly by :func:`~numeric.group_advantage_weights`; then
    :math:`\mathbb{E}[A_1 s_1] = \mathbb{E}[a(R) s] = (a(1) - a(0))\nabla p`,
    so :math:`c = a(1) - a(0)`.  ``advantages`` maps ``[n, G]`` rewards to
    ``[n, G]`` advantages, each row one group.

    Examples
    --------
    >>> from numeric import advantage_scale, passk_advantages, rloo_advantages
    >>> round(advantage_scale(rloo_advantages, 0.3, 4), 12), round(advantage_scale(passk_advantages, 0.3, 4), 12)
    (1.0, 0.343)
    """
    p = require_real("p", p)
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    a = group_advantage_weights(torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([1 - p, p], dtype=torch.float64), G, advantages)
    return float(a[1] - a[0])


# ------------------------------------------------------------------ checks on the toy LM


def _batch_on(lm, theta, idx: torch.Tensor):
    """Token log-probs, mask and a non-binary per-sequence advantage for sequences ``idx`` of ``lm``."""
    R = (lm.tokens == 1).to(torch.float64).mul(lm.mask).sum(1) / lm.lengths  # fraction of 1-tokens: non-binary
    lp = lm.token_log_probs(theta)[idx]
    return lp, lm.mask[idx], R[idx] - 0.3


def certificate_gap(method: str, agg: str | None = None, seed: int = 3, **options) -> float:
    r"""Largest gap between autograd of :func:`policy_loss` and :math:`-\kappa\,w\,A` (derived weights) on a TinyLM batch.

    Twelve answers drawn from the old policy of the gradient-weights setting
    (variable lengths), a non-binary advantage, the setting's current policy.
    """
    from .gradient_weights import setting

    s = setting()
    gen = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(s.q, 12, replacement=True, generator=gen)
    old, mask, A = _batch_on(s.lm, s.theta_old, idx)
    old = old.detach()
    lp = s.lm.token_log_probs(s.theta)[idx].detach().requires_grad_(True)
    loss = policy_loss(method, lp, old, A, mask, agg=agg, clip_epsilon=(0.2, 0.28), **options)
    (g,) = torch.autograd.grad(loss, lp)
    w = policy_weight(method, lp.detach(), old, A, mask, clip_epsilon=(0.2, 0.28), **options)
    mode = agg or ("seq-mean-token-mean" if method in _SEQUENCE_LEVEL else "token-mean")
    return float((g + token_weights(mask, mode) * w * A[:, None]).abs().max())


def length_bias_gradients(lm, theta, b: float = 0.3):
    r"""Each mode's expected REINFORCE update over batches of two answers, and the gradient of the objective it follows.

    Every pair of responses is enumerated with its probability; the reward is
    the (non-binary) fraction of 1-tokens and :math:`A_i = R(o_i) - b`.  The
    update is :math:`\mathbb{E}[\sum_i \kappa_i A_i \nabla\log\pi(o_i)]`.  When
    :math:`\kappa_i` depends on :math:`o_i` alone (every mode but token-mean) it
    equals :math:`\nabla\mathbb{E}[\sum_i\kappa_iA_i]`; token-mean's
    :math:`\kappa_i = 1/(n_1 + n_2)` depends on the other answer too, and its
    update is :math:`2\nabla\mathbb{E}[\bar\kappa(n)\,A]` with
    :math:`\bar\kappa(n) = \mathbb{E}_{o'}[1/(n + |o'|)]` frozen at the current policy.

    Returns ``({mode: (expected update, gradient of its objective)}, grad J)``.
    """
    N = lm.N
    R = (lm.tokens == 1).to(torch.float64).mul(lm.mask).sum(1) / lm.lengths
    i, j = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    pairs = torch.stack([i.reshape(-1), j.reshape(-1)], 1)  # [N^2, 2]
    mask, A = lm.mask[pairs], (R - b)[pairs]  # [P, 2, L], [P, 2]
    th = theta.detach().clone().requires_grad_(True)
    lp, p = lm.token_log_probs(th), lm.probs(th)
    pair_prob = p[pairs].prod(1)
    grad = lambda f: torch.autograd.grad(f, th, retain_graph=True)[0]  # noqa: E731
    n = lm.lengths.to(torch.float64)
    kappa_bar = (p.detach()[None, :] / (n[:, None] + n[None, :])).sum(1)  # E_{o'}[1 / (n + |o'|)], frozen
    out = {}
    for mode in AGGREGATIONS:
        loss = aggregate(-A[..., None] * lp[pairs], mask, mode)  # [P], one loss per batch of two
        update = -grad((pair_prob.detach() * loss).sum())
        if mode == "token-mean":
            objective = 2 * (p * kappa_bar * (R - b)).sum()
        else:
            kappa = token_weights(mask, mode)[..., 0]  # kappa_i: the same on every token of row i
            objective = (pair_prob * (kappa * A).sum(-1)).sum()
        out[mode] = (update, grad(objective))
    return out, grad(p @ R)


@suite("losses")
def cross_checks() -> None:
    """Gradient certificates of every loss, the length bias of every mode, and exact scales of the estimators."""
    for method in POLICY_LOSSES:
        check(f"{method}: autograd of policy_loss == -kappa w A with the derived weight w", certificate_gap(method), 1e-15)
    check("dual-clip PPO (c = 3): autograd == -kappa w A", certificate_gap("ppo", dual_clip=3.0), 1e-15)
    check("CISPO with an absolute cap (TRL): autograd == -kappa w A", certificate_gap("cispo", cispo_cap=1.1), 1e-15)
    for agg in AGGREGATIONS[1:]:
        check(f"PPO aggregated with {agg}: autograd == -kappa w A", certificate_gap("ppo", agg=agg), 1e-15)
    lm = TinyLM()
    out, gJ = length_bias_gradients(lm, lm.theta0)
    for mode, (update, objective) in out.items():
        check(f"{mode}: expected update over every batch of two == gradient of its derived objective", maxabs(update, objective), 1e-15)
    check("seq-mean-token-sum: expected update == grad J (no length bias)", maxabs(out["seq-mean-token-sum"][0], gJ), 1e-15)
    check("seq-mean-token-sum-norm (C = T): expected update == grad J / T", maxabs(out["seq-mean-token-sum-norm"][0], gJ / lm.L), 1e-15)
    for mode in ("token-mean", "seq-mean-token-mean"):
        update = out[mode][0]
        residual = float((update - (update @ gJ) / (gJ @ gJ) * gJ).norm() / update.norm())
        check(f"{mode}: expected update is not a multiple of grad J (1 if it is; relative residual {residual:.3f})", float(residual < 1e-6), 0.0)
    R = default_reward(lm)
    p, G = float(lm.probs(lm.theta0) @ R), 4
    grad_J = expected_score_sum(lm, lm.theta0, R)
    estimators = {
        "RLOO": rloo_advantages,
        "GRPO (Bessel std, eps 1e-6)": lambda r: group_zscore_advantages(r, 1e-6, "bessel"),
        "pass@k": passk_advantages,
        "GPG (one group per batch)": lambda r: gpg_advantages(r[:, None, :])[:, 0, :],
    }
    for name, est in estimators.items():
        c = advantage_scale(est, p, G)
        check(f"{name}: exact E[A s] (group engine, G = {G}) == c grad J, c = {c:.6f}", maxabs(exact_group_gradient(lm, lm.theta0, R, G, est), c * grad_J), 1e-15)
    check("pass@k: c == (1 - p)^(G - 1), so the update is grad pass@G / G", abs(advantage_scale(passk_advantages, p, G) - (1 - p) ** (G - 1)), 1e-15)
    gpg = estimators["GPG (one group per batch)"]
    check("GPG, one group per batch: c == (G - 1)/G (alpha = 1 in every mixed group: the mean-including-self scale)", abs(advantage_scale(gpg, p, G) - (G - 1) / G), 1e-15)
