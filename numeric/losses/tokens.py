r"""Token bookkeeping: log-probs, softmax, the response mask, sequence log-probs, broadcast advantages."""

from __future__ import annotations

import numpy as np
import torch

from .._types import Array, ArrayT
from .._validate import (
    as_mask,
    compute_dtype,
    like,
    masked_inputs,
    raw_tensor,
    require_finite,
    require_int,
    require_unit_interval,
    result_dtype,
    to_tensor,
)

__all__ = [
    "broadcast_advantage",
    "high_entropy_mask",
    "response_mask",
    "sequence_log_prob",
    "softmax_score",
    "stable_softmax",
    "token_entropy",
    "token_log_probs",
]


def _logits(logits):
    z, kind = to_tensor("logits", logits)
    if z.ndim < 1 or z.shape[-1] < 1:
        raise ValueError(f"logits must have a vocabulary dimension (the last one), got shape {tuple(z.shape)}")
    require_finite("logits", z)
    return z, kind


def stable_softmax(logits: ArrayT) -> ArrayT:
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


def softmax_score(logits: ArrayT, action: Array) -> ArrayT:
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


def token_log_probs(logits: ArrayT, tokens: Array) -> ArrayT:
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


def token_entropy(logits: ArrayT) -> ArrayT:
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


def high_entropy_mask(entropy: ArrayT, mask: Array, *, top_quantile: float) -> ArrayT:
    r"""Keep the highest-entropy tokens: :math:`m_{it}\,\mathbb 1[H_{it} \ge H^*]`, :math:`H^*` the (1 - ``top_quantile``)-quantile (TRL ``top_entropy_quantile``).

    :math:`H^*` is the quantile of the masked entropies of the whole batch at
    level 1 - ``top_quantile``, linearly
    interpolated between order statistics (``torch.quantile``'s default, as in
    TRL ``f2cd57710ae3`` ``get_high_entropy_mask``, which gathers the entropies of
    every process first); a token is kept when its entropy is at least
    :math:`H^*`, so ties at :math:`H^*` are kept and ``top_quantile=1`` keeps every
    masked token.  An empty mask keeps nothing.  Multiply the result into the
    per-token loss (``aggregate(..., weight=...)``); TRL keeps the
    aggregation's own mask in the denominators.

    What it does to the gradient: the kept set depends on the batch (through
    :math:`q`) and on the policy's own entropies, so no per-token weight
    :math:`w(r, A)` describes it; on the tokens it keeps the gradient is the
    method's, the others are silenced.

    References
    ----------
    S. Wang et al., "Beyond the 80/20 rule: high-entropy minority tokens drive
    effective reinforcement learning for LLM reasoning", arXiv:2506.01939 (2025).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import high_entropy_mask
    >>> H = np.array([[0.1, 2.0, 0.5, 9.0], [1.0, 0.3, 0.0, 0.0]])
    >>> m = np.array([[1, 1, 1, 0], [1, 1, 0, 0]])
    >>> high_entropy_mask(H, m, top_quantile=0.4).astype(int)
    array([[0, 1, 0, 0],
           [1, 0, 0, 0]])
    """
    t, m, kind = masked_inputs(mask, entropy=entropy)
    if m is None:
        raise ValueError("mask is required: a 0/1 or boolean response mask (None is not 'all kept' here)")
    tau = require_unit_interval("top_quantile", top_quantile)
    if not tau > 0:
        raise ValueError(f"top_quantile must be in (0, 1] (the fraction of tokens kept), got {top_quantile}")
    h = t["entropy"].detach()
    if h.ndim < 1:
        raise ValueError("entropy must have a time dimension (the last one), got a scalar")
    kept = h[m]
    if kept.numel() == 0:
        out = torch.zeros_like(m)
    else:
        out = m & (h >= torch.quantile(kept, 1 - tau))
    return like(kind, out)


def response_mask(input_ids: ArrayT, prompt_length: Array, pad_token_id: int, eos_token_id: int) -> ArrayT:
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
    pad_token_id : int
        The id of the padding token.
    eos_token_id : int
        The id of the end-of-sequence token (the policy's action that stops; it is in the mask).

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


def sequence_log_prob(log_prob: ArrayT, mask: Array) -> ArrayT:
    r"""Sequence log-probability :math:`\log\pi(o) = \sum_t m_t \log\pi(o_t \mid o_{<t})`, ``[B]``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import sequence_log_prob
    >>> print(sequence_log_prob(np.log([[0.5, 0.5, 0.3]]), np.array([[1, 1, 0]])).round(6))
    [-1.386294]
    """
    t, _, kind = masked_inputs(mask, log_prob=log_prob)
    return like(kind, t["log_prob"].sum(-1).to(result_dtype(log_prob)))


def broadcast_advantage(advantages: ArrayT, mask: Array) -> ArrayT:
    r"""One advantage per sequence, put on each of its response tokens: :math:`A_{it} = m_{it} A_i`, ``[B, T]``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import broadcast_advantage
    >>> print(broadcast_advantage(np.array([1.5, -0.5]), np.array([[1, 1, 0], [1, 0, 0]])))
    [[ 1.5  1.5  0. ]
     [-0.5  0.   0. ]]
    """
    a, kind = to_tensor("advantages", advantages)
    require_finite("advantages", a)
    m = mask_of_rank("mask", mask, 2)
    if a.ndim != 1 or a.shape[0] != m.shape[0]:
        raise ValueError(f"advantages must have shape [B] = {(m.shape[0],)} (mask is [B, T]), got {tuple(a.shape)}")
    return like(kind, torch.where(m.to(a.device), a[:, None], torch.zeros((), dtype=a.dtype, device=a.device)))


def mask_of_rank(name: str, mask: Array, rank: int, exact: bool = True) -> torch.Tensor:
    """A boolean mask with ``rank`` dimensions (at least ``rank`` unless ``exact``)."""
    raw, _ = raw_tensor(name, mask)
    if raw.ndim < rank or (exact and raw.ndim != rank):
        raise ValueError(f"{name} must have {'' if exact else 'at least '}{rank} dimensions, got shape {tuple(raw.shape)}")
    return as_mask(name, raw, name, raw)
