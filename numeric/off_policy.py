r"""Off-policy samplers and multi-turn agents: sampler-correction weights, batched and exact.

A trainer samples with :math:`\mu` (an inference engine, a lagged copy of the
weights) and differentiates :math:`\pi`.  Every correction scheme that trainers
ship is a stop-gradient weight :math:`w_t` on the token score:

.. math::

    \hat g = \sum_t w_t\, A\, s_t, \qquad s_t = \nabla_\theta \log\pi_\theta(y_t \mid y_{<t}),
    \qquad \rho_t = \frac{\pi(y_t \mid y_{<t})}{\mu(y_t \mid y_{<t})},
    \qquad \rho = \prod_{t\,:\,m_t = 1} \rho_t .

Batched weight functions (``[batch, time]`` log-probabilities and a 0/1 mask;
numpy or torch in, the caller's kind, dtype and device out; detached):

==================================  ==============================================================================================================
:func:`token_ratio`                 :math:`\rho_t`
:func:`sequence_ratio`              :math:`\rho`, broadcast over the sequence's tokens
:func:`truncated_token_ratio`       :math:`\min(\rho_t, C)` (TIS, ``token_truncate``)
:func:`truncated_sequence_ratio`    :math:`\min(\rho, C)` (``sequence_truncate``)
:func:`masked_token_ratio`          :math:`\rho_t\,\mathbb 1[l \le \rho_t \le h]` (IcePop, ``token_mask``)
:func:`masked_sequence_ratio`       :math:`\rho\,\mathbb 1[l \le \rho \le h]` (``sequence_mask``)
:func:`geometric_sequence_mask`     :math:`\mathbb 1[l \le \rho^{1/|y|} \le h]` (seq-mask-tis, geometric RS)
:func:`kl_rejection_mask`           :math:`\mathbb 1[\sum_t k_t \le \delta]`, :math:`k \in \{k_1, k_2, k_3\}` of :math:`\mathrm{KL}(\mu\,\|\,\pi)`
==================================  ==============================================================================================================

Masked slots (prompt, tool output, feedback, padding) never enter a product, a
mean or a KL sum, get weight 0, and may hold anything (``-inf``, sentinels):
they never raise and never produce NaN.

Exact models: :func:`two_turn_agent` (two turns of 4 actions, a feedback token
between them that is context only, a stale sampler with a mismatch knob) and
:func:`tinylm_episodes` (:class:`~numeric.TinyLM` with a perturbed sampler).
Both give :class:`Episodes`, every episode with its sampler probability, so
:func:`scheme_moments` computes the exact bias :math:`\lVert\mathbb E_\mu[\hat g] - \nabla J\rVert`
and trace variance of any scheme.  The suite ``off_policy`` checks the seed's
§8 (8a–8g) and the schemes' bias formulas.

References
----------
F. Yao, L. Liu, D. Zhang, C. Dong, J. Shang, J. Gao, "Your efficient RL framework
secretly brings you off-policy RL training" (2025) (TIS).
J. Liu, Y. Li, Y. Fu, J. Wang, Q. Liu, Y. Shen, "When speed kills stability:
demystifying RL collapse from the training-inference mismatch" (2025) (token,
sequence and geometric rejection; verl rollout correction).
Ling Team, "Every step evolves: scaling reinforcement learning for trillion-scale
thinking model", arXiv:2510.18855 (2025) (IcePop).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import sympy as sp
import torch

from derivations import off_policy as dop

from ._validate import as_mask, like, require_finite, require_int, require_nonnegative, require_real, require_same_shape, to_tensor
from .checks import check, maxabs, suite
from .tinylm import TinyLM, perturb, token_score_tensor
from .trust_region import kl_k1, kl_k2, kl_k3

__all__ = [
    "CORRECTION_WEIGHTS",
    "Episodes",
    "SCHEMES",
    "SchemeMoments",
    "chain_score_moments",
    "credit_assignment",
    "estimator_samples",
    "feedback_term",
    "geometric_sequence_mask",
    "kl_rejection_mask",
    "masked_sequence_ratio",
    "masked_token_ratio",
    "scheme_moments",
    "sampler_moments",
    "sequence_ratio",
    "tinylm_episodes",
    "token_bias_closed_form",
    "token_ratio",
    "truncated_sequence_ratio",
    "truncated_token_ratio",
    "truncation_bias",
    "two_turn_agent",
]

F64 = torch.float64

# ------------------------------------------------------------------ inputs


def _log_ratio(log_prob, sampler_log_prob, mask):
    r"""``(d, m, kind)``: :math:`d_t = \log\pi - \log\mu` on the mask and 0 elsewhere (detached), the boolean mask, the caller's kind."""
    lp, kind = to_tensor("log_prob", log_prob)
    slp, _ = to_tensor("sampler_log_prob", sampler_log_prob)
    require_same_shape(log_prob=lp, sampler_log_prob=slp)
    m = as_mask("mask", mask, "log_prob", lp)
    if lp.ndim < 1:
        raise ValueError("log_prob must have a time dimension (the last one), got a scalar")
    lp = lp.detach()
    slp = slp.detach().to(device=lp.device, dtype=lp.dtype)
    for name, t in (("log_prob", lp), ("sampler_log_prob", slp)):
        if not bool((torch.isfinite(t) | ~m).all()):
            raise ValueError(f"{name} must be finite where mask is 1 (masked slots may hold anything)")
    d = torch.where(m, lp - slp, torch.zeros((), dtype=lp.dtype, device=lp.device))
    return d, m, kind


def _on_mask(m: torch.Tensor, values: torch.Tensor):
    return torch.where(m, values, torch.zeros((), dtype=values.dtype, device=values.device))


def _per_sequence(m: torch.Tensor, values: torch.Tensor):
    """``[..., 1]`` per-sequence values broadcast over the sequence's masked tokens."""
    return _on_mask(m, values.expand(m.shape))


def _mismatch(mismatch) -> float:
    m = require_nonnegative("mismatch", mismatch)
    if not math.isfinite(m):
        raise ValueError(f"mismatch must be finite (the size of the sampler's lag), got {m}")
    return m


def _baseline(baseline) -> float:
    b = require_real("baseline", baseline)
    if not math.isfinite(b):
        raise ValueError(f"baseline must be finite, got {b}")
    return b


def _cap(cap) -> float:
    cap = require_real("cap", cap)
    if not cap > 0:
        raise ValueError(f"cap must be > 0 (a truncation level C for the ratio), got {cap}")
    return cap


def _band(low, high) -> tuple[float, float]:
    low, high = require_nonnegative("low", low), require_real("high", high)
    if not low < high:
        raise ValueError(f"low must be < high (the kept band [low, high] of the ratio), got low={low}, high={high}")
    return low, high


# ----------------------------------------------------------------- weights


def token_ratio(log_prob, sampler_log_prob, mask):
    r"""Token-level importance ratio :math:`\rho_t = \pi(y_t \mid y_{<t}) / \mu(y_t \mid y_{<t})` on the mask.

    Unbiased per token only when the sampler equals the policy: it drops the
    ratio of the prefix and of the future (:func:`derivations.off_policy.token_ratio_bias`).

    Parameters
    ----------
    log_prob, sampler_log_prob : numpy array or torch tensor
        ``[batch, time]`` :math:`\log\pi` of the policy being trained and
        :math:`\log\mu` of the sampler, finite where ``mask`` is 1.
    mask : numpy array or torch tensor
        ``[batch, time]`` 0/1 (or boolean): 1 on the model's own tokens.

    Returns
    -------
    The caller's kind, dtype and device, ``[batch, time]``, 0 where ``mask`` is 0, detached.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import token_ratio
    >>> lp = np.log([[0.5, 0.2, 1.0]])
    >>> lmu = np.array([[np.log(0.25), np.log(0.4), -np.inf]])   # padding may be -inf
    >>> token_ratio(lp, lmu, np.array([[1, 1, 0]])).round(6).tolist()
    [[2.0, 0.5, 0.0]]
    """
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    return like(kind, _on_mask(m, d.exp()))


def sequence_ratio(log_prob, sampler_log_prob, mask):
    r"""Sequence-level ratio :math:`\rho = \prod_{t: m_t = 1} \rho_t = \pi(y)/\mu(y)`, broadcast over the sequence's tokens.

    The only weight here that is unbiased for :math:`\nabla J` under any sampler:
    :math:`\mathbb E_\mu[\rho\, A \sum_t s_t] = \mathbb E_\pi[A \sum_t s_t]`
    (:func:`derivations.off_policy.sequence_ratio_unbiased`).  Its variance
    grows with the length.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import sequence_ratio
    >>> lp = np.log([[0.5, 0.2, 1.0]])
    >>> lmu = np.log([[0.25, 0.4, 0.5]])
    >>> sequence_ratio(lp, lmu, np.array([[1, 1, 0]])).round(6).tolist()
    [[1.0, 1.0, 0.0]]
    """
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    return like(kind, _per_sequence(m, d.sum(-1, keepdim=True).exp()))


def truncated_token_ratio(log_prob, sampler_log_prob, mask, cap: float = 2.0, floor: float = 0.0):
    r"""Truncated importance sampling per token, :math:`\min(\max(\rho_t, l), C)` (TIS; TRL ``token_truncate``).

    :math:`\min(\rho, C) = \rho - (\rho - C)_+`, so it removes
    :math:`\mathbb E_\mu[\sum_t (\rho_t - C)_+ A s_t]` from the token-IS gradient
    (:func:`derivations.off_policy.truncation_identity`).  A ``floor``
    :math:`l > 0` also raises the ratios below it, adding
    :math:`\mathbb E_\mu[\sum_t (l - \rho_t)_+ A s_t]`: OpenRLHF's ``tis`` with
    ``vllm_is_truncated_threshold = [l, C]``.  The default ``floor = 0`` leaves
    every ratio above it untouched (TRL, verl).

    Examples
    --------
    >>> import torch
    >>> from numeric import truncated_token_ratio
    >>> lp = torch.log(torch.tensor([[0.9, 0.2, 0.1]]))
    >>> lmu = torch.log(torch.tensor([[0.3, 0.4, 0.5]]))
    >>> truncated_token_ratio(lp, lmu, torch.ones(1, 3), cap=2.0).round(decimals=6).tolist()
    [[2.0, 0.5, 0.2]]
    >>> truncated_token_ratio(lp, lmu, torch.ones(1, 3), cap=2.0, floor=0.5).round(decimals=6).tolist()
    [[2.0, 0.5, 0.5]]
    """
    cap = _cap(cap)
    floor = require_nonnegative("floor", floor)
    if not floor < cap:
        raise ValueError(f"floor must be < cap (the ratio is clamped to [floor, cap]), got floor={floor}, cap={cap}")
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    return like(kind, _on_mask(m, d.exp().clamp(min=floor, max=cap)))


def truncated_sequence_ratio(log_prob, sampler_log_prob, mask, cap: float = 2.0):
    r"""Truncated sequence ratio :math:`\min(\rho, C)` broadcast over the tokens (TRL ``sequence_truncate``; verl sequence IS).

    Its bias is exactly :math:`-\mathbb E_\mu[(\rho - C)_+ A \sum_t s_t]`.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import truncated_sequence_ratio
    >>> lp, lmu = np.log([[0.9, 0.9]]), np.log([[0.3, 0.3]])
    >>> truncated_sequence_ratio(lp, lmu, np.ones((1, 2)), cap=5.0).tolist()
    [[5.0, 5.0]]
    """
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    return like(kind, _per_sequence(m, d.sum(-1, keepdim=True).exp().clamp(max=_cap(cap))))


def masked_token_ratio(log_prob, sampler_log_prob, mask, low: float = 0.5, high: float = 2.0):
    r"""Masked importance sampling per token, :math:`\rho_t\,\mathbb 1[l \le \rho_t \le h]` (IcePop; TRL ``token_mask`` with :math:`l = 0`).

    A token whose ratio leaves the band is dropped from the gradient; the bias is
    :math:`-\mathbb E_\mu[\sum_t \rho_t \mathbb 1[\rho_t \notin [l, h]]\, A s_t]` relative to token IS.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import masked_token_ratio
    >>> lp, lmu = np.log([[0.9, 0.2, 0.5]]), np.log([[0.3, 0.4, 0.5]])
    >>> masked_token_ratio(lp, lmu, np.ones((1, 3)), low=0.5, high=2.0).round(6).tolist()
    [[0.0, 0.5, 1.0]]
    """
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    low, high = _band(low, high)
    r = d.exp()
    return like(kind, _on_mask(m & (r >= low) & (r <= high), r))


def masked_sequence_ratio(log_prob, sampler_log_prob, mask, low: float = 0.0, high: float = 2.0):
    r"""Masked sequence ratio :math:`\rho\,\mathbb 1[l \le \rho \le h]` (TRL ``sequence_mask`` with :math:`l = 0`; verl sequence RS with sequence IS).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import masked_sequence_ratio
    >>> lp, lmu = np.log([[0.9, 0.9], [0.5, 0.5]]), np.log([[0.3, 0.3], [0.5, 0.5]])
    >>> masked_sequence_ratio(lp, lmu, np.ones((2, 2)), high=2.0).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    low, high = _band(low, high)
    r = d.sum(-1, keepdim=True).exp()
    return like(kind, _per_sequence(m, torch.where((r >= low) & (r <= high), r, torch.zeros_like(r))))


def geometric_sequence_mask(log_prob, sampler_log_prob, mask, low: float = 0.5, high: float = 2.0):
    r"""Keep a sequence when its geometric-mean ratio :math:`\rho^{1/|y|} = \exp(\frac1{|y|}\sum_t \log\rho_t)` lies in :math:`[l, h]`.

    A 0/1 mask, broadcast over the sequence's tokens; multiply it into another
    weight (OpenRLHF ``seq-mask-tis``: times :func:`truncated_token_ratio`; verl
    ``geometric`` rejection).  :math:`|y|` counts the masked tokens; a sequence
    with none is kept (it has no tokens to weight).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import geometric_sequence_mask
    >>> lp, lmu = np.log([[0.9, 0.1], [0.9, 0.5]]), np.log([[0.3, 0.3], [0.3, 0.5]])
    >>> geometric_sequence_mask(lp, lmu, np.ones((2, 2)), low=0.8, high=1.25).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    """
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    low, high = _band(low, high)
    n = m.sum(-1, keepdim=True).clamp(min=1).to(d.dtype)
    g = (d.sum(-1, keepdim=True) / n).exp()
    keep = ((g >= low) & (g <= high)).to(d.dtype)
    return like(kind, _per_sequence(m, keep))


_KL = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


def kl_rejection_mask(log_prob, sampler_log_prob, mask, threshold: float = 0.05, estimator: str = "k3"):
    r"""Keep a sequence when its estimate of :math:`\mathrm{KL}(\mu\,\|\,\pi)` is at most ``threshold``.

    The tokens come from :math:`\mu`, so with :math:`\Delta_t = \log\mu - \log\pi`
    the per-token estimators of :mod:`numeric.trust_region` are unbiased
    (:math:`k_1 = \Delta`, :math:`k_3 = e^{-\Delta} - 1 + \Delta`) or second-order
    (:math:`k_2 = \Delta^2/2`); the sequence estimate is their sum over the
    masked tokens.  Returns a 0/1 mask broadcast over the tokens (rollout
    rejection).

    Parameters
    ----------
    threshold : float
        :math:`\delta \ge 0`.
    estimator : {"k1", "k2", "k3"}

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import kl_rejection_mask
    >>> lp, lmu = np.log([[0.5, 0.5], [0.9, 0.1]]), np.log([[0.5, 0.4], [0.3, 0.6]])
    >>> kl_rejection_mask(lp, lmu, np.ones((2, 2)), threshold=0.1).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    """
    if estimator not in _KL:
        raise ValueError(f"estimator must be one of {sorted(_KL)}, got {estimator!r}")
    threshold = require_nonnegative("threshold", threshold)
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    zero = torch.zeros_like(d)
    per_token = _on_mask(m, _KL[estimator](-d, zero))  # log_prob = log mu, ref = log pi
    keep = (per_token.sum(-1, keepdim=True) <= threshold).to(d.dtype)
    return like(kind, _per_sequence(m, keep))


CORRECTION_WEIGHTS = (
    token_ratio,
    sequence_ratio,
    truncated_token_ratio,
    truncated_sequence_ratio,
    masked_token_ratio,
    masked_sequence_ratio,
    geometric_sequence_mask,
    kl_rejection_mask,
)
"""The batched sampler-correction weights, each ``fn(log_prob, sampler_log_prob, mask, ...)`` giving ``[B, T]``."""


def _on_policy(log_prob, sampler_log_prob, mask):
    """Weight 1 on every model token: no correction."""
    d, m, kind = _log_ratio(log_prob, sampler_log_prob, mask)
    return like(kind, m.to(d.dtype))


CAP, BAND, GEO_BAND, KL_THRESHOLD = 2.0, (0.5, 2.0), (0.8, 1.25), 0.05
"""The settings of :data:`SCHEMES`: TIS cap, IcePop band, geometric band, KL-rejection threshold."""

SCHEMES = {
    "no correction": _on_policy,
    "sequence IS": sequence_ratio,
    "token IS": token_ratio,
    "token TIS": lambda lp, lmu, m: truncated_token_ratio(lp, lmu, m, CAP),
    "sequence TIS": lambda lp, lmu, m: truncated_sequence_ratio(lp, lmu, m, CAP),
    "token mask (IcePop)": lambda lp, lmu, m: masked_token_ratio(lp, lmu, m, *BAND),
    "sequence mask": lambda lp, lmu, m: masked_sequence_ratio(lp, lmu, m, 0.0, CAP),
    "geometric mask x token TIS": lambda lp, lmu, m: truncated_token_ratio(lp, lmu, m, CAP) * geometric_sequence_mask(lp, lmu, m, *GEO_BAND),
    "k3 rejection x token IS": lambda lp, lmu, m: token_ratio(lp, lmu, m) * kl_rejection_mask(lp, lmu, m, KL_THRESHOLD, "k3"),
}
r"""Every correction scheme of the chapter: name -> weight function of ``(log_prob, sampler_log_prob, mask)``."""


# ------------------------------------------------------------ exact models


@dataclass(frozen=True)
class Episodes:
    r"""Every episode of a model sampled by :math:`\mu`, as ``[E, T]`` arrays (float64).

    ``prob`` is the sampler's probability of each episode (reward outcome
    included), ``scores`` the token scores :math:`\nabla_\theta\log\pi` at the
    policy's parameters (``[E, T, P]``, also at masked slots, so that an
    unmasked feedback token can be studied), ``mask`` 1 on the model's tokens.
    ``policy_prob`` is :math:`\pi` of each episode, ``grad_J`` the exact
    :math:`\nabla_\theta \mathbb E_\pi[R]` (autograd of the enumerated objective).
    """

    prob: torch.Tensor
    policy_prob: torch.Tensor
    reward: torch.Tensor
    log_prob: torch.Tensor
    sampler_log_prob: torch.Tensor
    mask: torch.Tensor
    scores: torch.Tensor
    grad_J: torch.Tensor


@dataclass(frozen=True)
class SchemeMoments:
    r"""Exact mean, bias :math:`\lVert\mathbb E_\mu\hat g - \nabla J\rVert` and trace variance of an estimator."""

    mean: torch.Tensor
    bias: float
    variance: float


def _episodes(ep, name: str = "episodes") -> Episodes:
    if not isinstance(ep, Episodes):
        raise TypeError(f"{name} must be an Episodes (from two_turn_agent or tinylm_episodes), got {type(ep).__name__}")
    return ep


def _f64(name: str, value) -> torch.Tensor:
    """A finite float64 tensor from a numpy array or torch tensor (detached)."""
    return require_finite(name, to_tensor(name, value)[0].detach().to(F64))


def estimator_samples(episodes: Episodes, weights, advantage=None) -> torch.Tensor:
    r"""``[E, P]`` per-episode estimates :math:`\hat g = \sum_t w_t A\, s_t`.

    ``weights`` is ``[E, T]``; ``advantage`` is ``[E]`` or ``[E, T]`` (default the reward).

    Examples
    --------
    On-policy, weight 1 on the model's tokens: the mean is :math:`\nabla J`.

    >>> from numeric import estimator_samples, two_turn_agent
    >>> ep = two_turn_agent(0.0)
    >>> g = estimator_samples(ep, ep.mask)
    >>> tuple(g.shape), float((ep.prob @ g - ep.grad_J).abs().max()) < 1e-15
    ((32, 40), True)
    """
    ep = _episodes(episodes)
    w = _f64("weights", weights)
    A = ep.reward if advantage is None else _f64("advantage", advantage)
    if w.shape != ep.mask.shape:
        raise ValueError(f"weights must have shape {tuple(ep.mask.shape)}, got {tuple(w.shape)}")
    if A.shape == ep.reward.shape:
        A = A[:, None]
    elif A.shape != ep.mask.shape:
        raise ValueError(f"advantage must have shape {tuple(ep.reward.shape)} or {tuple(ep.mask.shape)}, got {tuple(A.shape)}")
    return torch.einsum("et,etp->ep", w * A, ep.scores)


def sampler_moments(episodes: Episodes, samples: torch.Tensor) -> SchemeMoments:
    r"""Exact :math:`\mathbb E_\mu`, bias against :math:`\nabla J` and trace variance of ``[E, P]`` per-episode estimates.

    Examples
    --------
    >>> from numeric import estimator_samples, sampler_moments, two_turn_agent
    >>> ep = two_turn_agent(0.0)
    >>> m = sampler_moments(ep, estimator_samples(ep, ep.mask))
    >>> m.bias < 1e-15, round(m.variance, 3)
    (True, 4.915)
    """
    ep = _episodes(episodes)
    samples = _f64("samples", samples)
    if samples.shape != (len(ep.prob), ep.scores.shape[-1]):
        raise ValueError(f"samples must have shape {(len(ep.prob), ep.scores.shape[-1])} (episodes, parameters), got {tuple(samples.shape)}")
    mean = ep.prob @ samples
    second = float(ep.prob @ (samples * samples).sum(1))
    return SchemeMoments(mean, float((mean - ep.grad_J).norm()), second - float(mean @ mean))


def scheme_moments(episodes: Episodes, scheme: str, baseline: float = 0.0) -> SchemeMoments:
    r"""Exact bias and trace variance of the scheme ``scheme`` of :data:`SCHEMES`, advantage :math:`R - b`.

    Examples
    --------
    >>> from numeric import scheme_moments, two_turn_agent
    >>> ep = two_turn_agent(mismatch=1.0)
    >>> for name in ("sequence IS", "token IS", "token TIS"):
    ...     print(f"{name:10s} {scheme_moments(ep, name).bias:.4f}")
    sequence IS 0.0000
    token IS   0.0620
    token TIS  0.0440
    """
    ep = _episodes(episodes)
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {list(SCHEMES)}, got {scheme!r}")
    b = _baseline(baseline)
    w = SCHEMES[scheme](ep.log_prob, ep.sampler_log_prob, ep.mask)
    return sampler_moments(ep, estimator_samples(ep, w, ep.reward - b))


# -- the two-turn agent ------------------------------------------------------------------------

ACTIONS = 4
"""Actions per turn of the two-turn agent."""
REWARD_VALUES = (-0.5, 2.0)
r"""The two values of the agent's outcome: :math:`R = -0.5` on failure, :math:`2` on success (not 0/1, so :math:`R^2 \ne R`)."""


def feedback_token(y1: int) -> int:
    """The environment's feedback token after the turn-1 action ``y1`` (a fixed function, context only)."""
    return (y1 + 1) % ACTIONS


@cache
def _agent_tables():
    gen = torch.Generator().manual_seed(8)
    K = ACTIONS
    success = 0.05 + 0.9 * torch.rand(K, K, generator=gen, dtype=F64)
    theta = 0.8 * torch.randn(K + K + 2 * K * K, generator=gen, dtype=F64)
    lag = 0.35 * torch.randn(theta.shape, generator=gen, dtype=F64)
    return success, theta, lag


def agent_logits(theta: torch.Tensor):
    r"""``(turn1 [K], feedback [K, K], turn2 [K, K])`` logits; a shared block :math:`u` enters all three.

    Layout of :math:`\theta` (``4K + 2K^2 = 40`` entries): :math:`u` (shared), :math:`a`
    (turn 1), :math:`F` (the model's logits at the feedback slot, per turn-1
    action), :math:`B` (turn 2, per turn-1 action).  Turn 1: :math:`u + a`;
    feedback slot after :math:`y_1`: :math:`u + F_{y_1}`; turn 2: :math:`u + B_{y_1}`.
    The shared :math:`u` makes :math:`s_1 \cdot s_2 \ne 0` pointwise, so
    :math:`\mathbb E[s_1 \cdot s_2] = 0` is a fact about expectations, not about blocks.
    """
    K = ACTIONS
    u, a = theta[:K], theta[K : 2 * K]
    F = theta[2 * K : 2 * K + K * K].view(K, K)
    B = theta[2 * K + K * K :].view(K, K)
    return u + a, u + F, u + B


def _agent_token_logprobs(theta, y1, f, y2):
    l1, lf, l2 = agent_logits(theta)
    return torch.stack(
        [torch.log_softmax(l1, -1)[y1], torch.log_softmax(lf, -1)[y1, f], torch.log_softmax(l2, -1)[y1, y2]], -1
    )


def _agent_token_scores(theta, y1, f, y2):
    r"""``[E, 3, P]`` closed-form token scores: :math:`e_y - \pi` in the shared block and in the slot's own block."""
    K, E = ACTIONS, len(y1)
    probs = [torch.softmax(l, -1) for l in agent_logits(theta)]
    eye = torch.eye(K, dtype=F64)
    out = torch.zeros(E, 3, len(theta), dtype=F64)
    rows = torch.arange(E)[:, None]
    own = (K + torch.zeros_like(y1), 2 * K + K * y1, 2 * K + K * K + K * y1)  # first index of each slot's block
    for slot, (token, p) in enumerate(zip((y1, f, y2), (probs[0].expand(E, K), probs[1][y1], probs[2][y1]))):
        local = eye[token] - p
        out[:, slot, :K] = local
        out[rows, slot, own[slot][:, None] + torch.arange(K)] = local
    return out


def _agent_objective(theta, success):
    l1, _, l2 = agent_logits(theta)
    p1, p2 = torch.softmax(l1, -1), torch.softmax(l2, -1)
    lo, hi = REWARD_VALUES
    return (p1[:, None] * p2 * (lo + (hi - lo) * success)).sum()


def two_turn_agent(mismatch: float = 1.0, *, theta=None) -> Episodes:
    r"""Every episode :math:`(y_1, f, y_2, R)` of the two-turn agent under a stale sampler.

    Turn 1 picks :math:`y_1` of 4 actions; the environment answers with the
    feedback token :math:`f = (y_1 + 1) \bmod 4` (context only: mask 0); turn 2
    picks :math:`y_2` given :math:`y_1`; the outcome is :math:`R = 2` with
    probability :math:`T_{y_1 y_2}`, else :math:`R = -0.5`.  The sampler is the
    policy with stale weights, :math:`\theta_\mu = \theta + m\,\xi` (fixed
    :math:`\xi`, entries :math:`\mathcal N(0, 0.35^2)`); ``mismatch`` is :math:`m`.
    ``E = 32`` episodes, ``T = 3`` slots ``[y1, f, y2]``, ``P = 40`` parameters.

    Parameters
    ----------
    mismatch : float
        :math:`m \ge 0`; at 0 the sampler is the policy.
    theta : torch.Tensor, optional
        ``[40]`` policy parameters (default: fixed draws).

    Examples
    --------
    >>> from numeric import two_turn_agent
    >>> ep = two_turn_agent(0.0)
    >>> tuple(ep.scores.shape), round(float(ep.prob.sum()), 12), ep.mask[0].tolist()
    ((32, 3, 40), 1.0, [1.0, 0.0, 1.0])
    """
    m = _mismatch(mismatch)
    success, theta0, lag = _agent_tables()
    theta = theta0 if theta is None else theta
    if not isinstance(theta, torch.Tensor) or theta.shape != theta0.shape or not theta.is_floating_point():
        raise TypeError(f"theta must be a float torch.Tensor of shape {tuple(theta0.shape)}")
    theta = theta.detach().to(F64)
    theta_mu = theta + m * lag
    K = ACTIONS
    rows = [(y1, feedback_token(y1), y2, r) for y1 in range(K) for y2 in range(K) for r in (0, 1)]
    y1, f, y2, r = (torch.tensor(c) for c in zip(*rows))
    lp = _agent_token_logprobs(theta, y1, f, y2)
    lmu = _agent_token_logprobs(theta_mu, y1, f, y2)
    p_r = torch.where(r == 1, success[y1, y2], 1 - success[y1, y2])
    model = torch.tensor([1.0, 0.0, 1.0], dtype=F64)
    prob = (lmu * model).sum(1).exp() * p_r
    policy_prob = (lp * model).sum(1).exp() * p_r
    jac = _agent_token_scores(theta, y1, f, y2)
    th = theta.clone().requires_grad_(True)
    grad_J = torch.autograd.grad(_agent_objective(th, success), th)[0]
    lo, hi = REWARD_VALUES
    reward = torch.where(r == 1, hi, lo).to(F64)
    return Episodes(prob, policy_prob, reward, lp, lmu, model.expand(len(rows), 3).clone(), jac, grad_J)


def agent_states(mismatch: float = 1.0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    r"""``(pi, mu)`` at the agent's 5 decision states: turn 1 and turn 2 after each :math:`y_1`."""
    m = _mismatch(mismatch)
    _, theta, lag = _agent_tables()
    (p1, _, p2), (q1, _, q2) = ([torch.softmax(l, -1) for l in agent_logits(t)] for t in (theta, theta + m * lag))
    return [(p1, q1)] + [(p2[y], q2[y]) for y in range(ACTIONS)]


# -- TinyLM with a perturbed sampler ------------------------------------------------------------


def graded_reward(lm: TinyLM) -> torch.Tensor:
    r"""A non-binary reward on :class:`~numeric.TinyLM`: :math:`2\cdot\mathbb 1[1 \in o] - 0.5 + 0.1\,|o|`."""
    hit = ((lm.tokens == 1) & (lm.mask > 0)).any(1).to(F64)
    return 2.0 * hit - 0.5 + 0.1 * lm.lengths.to(F64)


@cache
def _tinylm():
    lm = TinyLM(V=4, L=4, seed=0)
    theta = lm.theta0.to(F64)
    return lm, theta, token_score_tensor(lm, theta), graded_reward(lm)


def tinylm_episodes(mismatch: float = 0.3) -> Episodes:
    r"""Every response of ``TinyLM(V=4, L=4, seed=0)``, sampled by :math:`\theta_\mu = \theta_0 + m\,\xi` (``perturb``, seed 1).

    The reward is :func:`graded_reward`; every token is the model's (mask = the
    response mask).

    Examples
    --------
    >>> from numeric import scheme_moments, tinylm_episodes
    >>> ep = tinylm_episodes(0.3)
    >>> tuple(ep.scores.shape), round(scheme_moments(ep, "sequence IS").bias, 12)
    ((121, 4, 160), 0.0)
    """
    m = _mismatch(mismatch)
    lm, theta, scores, R = _tinylm()
    theta_mu = perturb(theta, m, seed=1)
    th = theta.clone().requires_grad_(True)
    grad_J = torch.autograd.grad(lm.probs(th) @ R, th)[0]
    return Episodes(lm.probs(theta_mu), lm.probs(theta), R, lm.token_logprobs(theta), lm.token_logprobs(theta_mu), lm.mask, scores, grad_J)


# -- an L-step chain with shared parameters -----------------------------------------------------


def chain_score_moments(L: int, K: int = 4, seed: int = 5) -> tuple[float, torch.Tensor]:
    r"""``(E||sum_t s_t||^2, [E||s_t||^2 for t])`` for an ``L``-step chain, enumerated over :math:`K^L` sequences.

    Step :math:`t` picks :math:`y_t` with logits :math:`u + \Theta_{t, y_{t-1}}`
    (a shared :math:`u`, so the token scores overlap and
    :math:`s_t \cdot s_u \ne 0` pointwise).  The score terms are martingale
    differences, so the first number is the sum of the second.

    Examples
    --------
    >>> from numeric.off_policy import chain_score_moments
    >>> total, per_step = chain_score_moments(3)
    >>> abs(total - float(per_step.sum())) < 1e-12
    True
    """
    L = require_int("L", L, minimum=1)
    K = require_int("K", K, minimum=2)
    gen = torch.Generator().manual_seed(require_int("seed", seed))
    u = 0.8 * torch.randn(K, generator=gen, dtype=F64)
    first = 0.8 * torch.randn(K, generator=gen, dtype=F64)
    table = 0.8 * torch.randn(max(L - 1, 0), K, K, generator=gen, dtype=F64)
    P = 2 * K + table.numel()
    seqs = torch.tensor(list(itertools.product(range(K), repeat=L)))
    n = len(seqs)
    prob = torch.ones(n, dtype=F64)
    scores = torch.zeros(n, L, P, dtype=F64)
    eye = torch.eye(K, dtype=F64)
    for t in range(L):
        block = first.expand(n, K) if t == 0 else table[t - 1, seqs[:, t - 1]]
        p = torch.softmax(u + block, -1)
        prob = prob * p[torch.arange(n), seqs[:, t]]
        local = eye[seqs[:, t]] - p
        scores[:, t, :K] = local
        if t == 0:
            scores[:, t, K : 2 * K] = local
        else:
            start = 2 * K + (t - 1) * K * K
            idx = start + seqs[:, t - 1, None] * K + torch.arange(K)
            scores[torch.arange(n)[:, None], t, idx] = local
    total = float(prob @ scores.sum(1).pow(2).sum(-1))
    return total, prob @ scores.pow(2).sum(-1)


# ------------------------------------------------------------------- checks


def _turn1_index(ep: Episodes) -> torch.Tensor:
    """Turn-1 action of each agent episode (episodes are listed y1-major: 8 per y1)."""
    return torch.arange(len(ep.prob)) // (2 * ACTIONS)


def _conditional_on_turn1(ep: Episodes, values: torch.Tensor) -> torch.Tensor:
    r"""``[E]``: :math:`\mathbb E_\mu[\text{values} \mid y_1]` at each episode's :math:`y_1`."""
    y1 = _turn1_index(ep)
    num = torch.zeros(ACTIONS, dtype=F64).index_add_(0, y1, ep.prob * values)
    den = torch.zeros(ACTIONS, dtype=F64).index_add_(0, y1, ep.prob)
    return (num / den)[y1]


def credit_assignment(ep: Episodes) -> dict[str, torch.Tensor]:
    r"""Outcome broadcast :math:`(R - V)(s_1 + s_2)` and per-turn credit :math:`(Q - V)s_1 + (R - Q)s_2`, per episode.

    With oracle baselines :math:`V = \mathbb E[R]`, :math:`Q(y_1) = \mathbb E[R \mid y_1]`
    (for the on-policy agent, ``two_turn_agent(0.0)``).  Returns ``[E, P]``
    samples of both estimators, and ``[E]`` :math:`Q`, :math:`\mathrm{Var}(R \mid y_1)`, :math:`V`.

    Examples
    --------
    >>> from numeric import credit_assignment, two_turn_agent
    >>> c = credit_assignment(two_turn_agent(0.0))
    >>> sorted(c), round(float(c["V"]), 4)
    (['Q', 'V', 'broadcast', 'per_turn', 'var_R'], 0.7346)
    """
    ep = _episodes(ep, "ep")
    V = float(ep.prob @ ep.reward)
    Q = _conditional_on_turn1(ep, ep.reward)
    var = _conditional_on_turn1(ep, ep.reward**2) - Q**2
    broadcast = estimator_samples(ep, ep.mask, ep.reward - V)
    per_turn = estimator_samples(ep, ep.mask, torch.stack([Q - V, torch.zeros_like(Q), ep.reward - Q], 1))
    return {"broadcast": broadcast, "per_turn": per_turn, "Q": Q, "var_R": var, "V": torch.tensor(V, dtype=F64)}


def feedback_term(ep: Episodes, baseline: float = 0.0) -> torch.Tensor:
    r"""``[P]`` :math:`\mathbb E_\pi[(R - b)\, s_f]`: what a feedback token left unmasked adds to the gradient.

    The environment, not :math:`\pi`, chose :math:`f`, so :math:`\mathbb E[s_f \mid y_1] \ne 0`
    (:func:`derivations.off_policy.unmasked_feedback_term`).

    Examples
    --------
    >>> from numeric import feedback_term, two_turn_agent
    >>> round(float(feedback_term(two_turn_agent(0.0)).norm()), 3)
    0.683
    """
    ep, baseline = _episodes(ep, "ep"), _baseline(baseline)
    return ep.policy_prob @ ((ep.reward - baseline)[:, None] * ep.scores[:, 1])


_TOKEN_BIAS = sp.lambdify(dop.token_bias_symbols, dop.token_bias_term(), "numpy")


def token_bias_closed_form(mismatch: float = 1.0) -> torch.Tensor:
    r"""``[P]`` the derived token-ratio bias of the two-turn agent, :math:`\sum_{a,b} \pi_1(\mu_2 - \pi_2)\bar A s_1 + (\mu_1 - \pi_1)\pi_2 \bar A s_2`.

    :func:`derivations.off_policy.token_bias_term`, lambdified and summed over
    :math:`(y_1, y_2)`, with :math:`\bar A = \mathbb E[R \mid y_1, y_2]`.

    Examples
    --------
    >>> from numeric.off_policy import token_bias_closed_form
    >>> round(float(token_bias_closed_form(1.0).norm()), 4), float(token_bias_closed_form(0.0).abs().max())
    (0.062, 0.0)
    """
    ep = two_turn_agent(mismatch)
    success, _, _ = _agent_tables()
    (p1, p2), (q1, q2) = ((torch.exp(ep_lp[::2 * ACTIONS, 0]), torch.exp(ep_lp[::2, 2]).view(ACTIONS, ACTIONS)) for ep_lp in (ep.log_prob, ep.sampler_log_prob))
    lo, hi = REWARD_VALUES
    mean_reward = lo + (hi - lo) * success
    s1, s2 = ep.scores[::2 * ACTIONS, 0], ep.scores[::2, 2].view(ACTIONS, ACTIONS, -1)
    terms = _TOKEN_BIAS(p1[:, None, None].numpy(), p2[..., None].numpy(), q1[:, None, None].numpy(), q2[..., None].numpy(),
                        mean_reward[..., None].numpy(), s1[:, None, :].numpy(), s2.numpy())
    return torch.from_numpy(np.ascontiguousarray(terms.sum((0, 1))))


def _naive_weights(name: str, lp: list, lmu: list, m: list) -> list:
    """One sequence, one scheme primitive, in plain Python floats (the loop the batched path must match)."""
    r = [math.exp(a - b) if k else 0.0 for a, b, k in zip(lp, lmu, m)]
    n = sum(m)
    seq = math.exp(sum(a - b for a, b, k in zip(lp, lmu, m) if k))
    geo = math.exp(sum(a - b for a, b, k in zip(lp, lmu, m) if k) / max(n, 1))
    kl = sum(math.exp(a - b) - 1 - (a - b) for a, b, k in zip(lp, lmu, m) if k)
    per_seq = {
        "sequence": seq, "truncated_sequence": min(seq, CAP), "masked_sequence": seq if seq <= CAP else 0.0,
        "geometric": float(GEO_BAND[0] <= geo <= GEO_BAND[1]), "kl": float(kl <= KL_THRESHOLD),
    }
    if name in per_seq:
        return [per_seq[name] if k else 0.0 for k in m]
    per_token = {"token": lambda x: x, "truncated_token": lambda x: min(x, CAP), "masked_token": lambda x: x if BAND[0] <= x <= BAND[1] else 0.0}
    return [per_token[name](x) if k else 0.0 for x, k in zip(r, m)]


_PRIMITIVES = {
    "token": token_ratio,
    "sequence": sequence_ratio,
    "truncated_token": lambda *a: truncated_token_ratio(*a, CAP),
    "truncated_sequence": lambda *a: truncated_sequence_ratio(*a, CAP),
    "masked_token": lambda *a: masked_token_ratio(*a, *BAND),
    "masked_sequence": lambda *a: masked_sequence_ratio(*a, 0.0, CAP),
    "geometric": lambda *a: geometric_sequence_mask(*a, *GEO_BAND),
    "kl": lambda *a: kl_rejection_mask(*a, KL_THRESHOLD, "k3"),
}


def batched_vs_loop(ep: Episodes) -> float:
    """Largest relative difference between every batched weight function and :func:`_naive_weights` on ``ep``."""
    worst = 0.0
    rows = list(zip(ep.log_prob.tolist(), ep.sampler_log_prob.tolist(), ep.mask.int().tolist()))
    for name, fn in _PRIMITIVES.items():
        batched = fn(ep.log_prob, ep.sampler_log_prob, ep.mask)
        loop = torch.tensor([_naive_weights(name, *row) for row in rows], dtype=F64)
        worst = max(worst, maxabs(batched, loop) / max(1.0, float(loop.abs().max())))
    return worst


def padding_leak(ep: Episodes) -> float:
    """Append two padded slots holding ``nan`` / ``-inf`` / ``inf``: largest change of any weight (NaN counts as infinite)."""
    E = len(ep.prob)
    pad_lp = torch.tensor([[float("nan"), float("inf")]], dtype=F64).expand(E, 2)
    pad_mu = torch.tensor([[float("-inf"), -1e30]], dtype=F64).expand(E, 2)
    lp, lmu = torch.cat([ep.log_prob, pad_lp], 1), torch.cat([ep.sampler_log_prob, pad_mu], 1)
    m = torch.cat([ep.mask, torch.zeros(E, 2, dtype=F64)], 1)
    worst = 0.0
    for fn in _PRIMITIVES.values():
        padded = fn(lp, lmu, m)
        if not bool(torch.isfinite(padded).all()):
            return math.inf
        worst = max(worst, maxabs(padded[:, : ep.mask.shape[1]], fn(ep.log_prob, ep.sampler_log_prob, ep.mask)), float(padded[:, -2:].abs().max()))
    return worst


def truncation_bias(ep: Episodes, cap: float = CAP, level: str = "token") -> tuple[torch.Tensor, torch.Tensor, float]:
    r"""``(E[g_TIS] - E[g_IS], -E_mu[sum_t (rho_t - C)+ A s_t], bound)`` at the token or sequence ``level``.

    The second is the derived closed form of the first
    (:func:`derivations.off_policy.truncation_identity`); ``bound`` is
    :math:`\mathbb E_\mu[\sum_t (\rho_t - C)_+ |A|\, \lVert s_t\rVert]` (token) or
    :math:`\mathbb E_\mu[(\rho - C)_+ |A|\, \lVert\sum_t s_t\rVert]` (sequence).

    Examples
    --------
    >>> from numeric import truncation_bias, two_turn_agent
    >>> diff, closed, bound = truncation_bias(two_turn_agent(1.0), 2.0, "sequence")
    >>> float((diff - closed).abs().max()) < 1e-15, float(diff.norm()) <= bound
    (True, True)
    """
    ep, cap = _episodes(ep, "ep"), _cap(cap)
    args = (ep.log_prob, ep.sampler_log_prob, ep.mask)
    if level == "token":
        rho, trunc = token_ratio(*args), truncated_token_ratio(*args, cap)
    elif level == "sequence":
        rho, trunc = sequence_ratio(*args), truncated_sequence_ratio(*args, cap)
    else:
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    excess = (rho - cap).clamp(min=0) * ep.mask
    diff = ep.prob @ (estimator_samples(ep, trunc) - estimator_samples(ep, rho))
    closed = -(ep.prob @ estimator_samples(ep, excess))
    if level == "token":
        norms = ep.scores.norm(dim=-1)
        bound = float(ep.prob @ (excess * ep.reward.abs()[:, None] * norms).sum(1))
    else:
        bound = float(ep.prob @ (excess.amax(1) * ep.reward.abs() * (ep.mask[..., None] * ep.scores).sum(1).norm(dim=-1)))
    return diff, closed, bound


@suite("off_policy")
def cross_checks() -> None:
    """000 section 8 (8a-8g) on the two-turn agent, and the sampler-correction schemes on both models."""
    on, off = two_turn_agent(0.0), two_turn_agent(1.0)
    m_on = sampler_moments(on, estimator_samples(on, on.mask))
    check("8a. E_pi[R (s1 + s2)] == grad J (autograd of the enumerated objective)", maxabs(m_on.mean, on.grad_J), 1e-15)
    seq = sampler_moments(off, estimator_samples(off, sequence_ratio(off.log_prob, off.sampler_log_prob, off.mask)))
    check("8b. E_mu[rho1 rho2 R (s1 + s2)] == grad J under a stale sampler (m = 1)", maxabs(seq.mean, off.grad_J), 1e-15)
    tok = sampler_moments(off, estimator_samples(off, token_ratio(off.log_prob, off.sampler_log_prob, off.mask)))
    check("8c. token-level ratios are biased under mismatch (1 if ||bias|| < 1e-3)", float(tok.bias < 1e-3), 0.0)
    check("8c. token-ratio bias == the derived closed form sum pi1(mu2-pi2)A s1 + (mu1-pi1)pi2 A s2", maxabs(tok.mean - off.grad_J, token_bias_closed_form(1.0)), 1e-15)
    tok_on = sampler_moments(on, estimator_samples(on, token_ratio(on.log_prob, on.sampler_log_prob, on.mask)))
    check("8c. ... and exact when the sampler equals the policy", maxabs(tok_on.mean, on.grad_J), 1e-15)
    b = float(on.prob @ on.reward)
    const = off.prob @ estimator_samples(off, token_ratio(off.log_prob, off.sampler_log_prob, off.mask), torch.full_like(off.reward, b))
    check("8d. a constant baseline adds 0 to the token-ratio gradient: max |E_mu[sum_t rho_t b s_t]|", float(const.abs().max()), 1e-15)
    for c in (1.0, 1.28, 2.0):
        viol = max(float((p - c * q).clamp(min=0).sum() - 0.5 * (p - q).abs().sum()) for p, q in agent_states(1.0))
        check(f"8e. sum_a (pi - c mu)+ <= TV(pi, mu) at all 5 states (c = {c}; excess, rounding only)", max(viol, 0.0), 1e-15)
    for level in ("token", "sequence"):
        diff, closed, bound = truncation_bias(off, 1.28, level)
        check(f"8e. {level} TIS minus IS == -E_mu[(rho - C)+ A s] (C = 1.28)", maxabs(diff, closed), 1e-15)
        check(f"8e. ||{level} TIS bias vs IS|| <= E_mu[(rho - C)+ |A| ||s||] (C = 1.28; excess)", max(float(diff.norm()) - bound, 0.0), 0.0)
    args = (off.log_prob, off.sampler_log_prob, off.mask)
    rho = token_ratio(*args)
    outside = rho * ((rho < BAND[0]) | (rho > BAND[1])) * off.mask
    diff = off.prob @ (estimator_samples(off, masked_token_ratio(*args, *BAND)) - estimator_samples(off, rho))
    check(f"8e. token mask (IcePop {BAND}) minus IS == -E_mu[sum_t rho_t 1[rho_t outside] A s_t]", maxabs(diff, -(off.prob @ estimator_samples(off, outside))), 1e-15)
    credit = credit_assignment(on)
    for name in ("broadcast", "per_turn"):
        check(f"8f. {name} estimator is unbiased for grad J", maxabs(on.prob @ credit[name], on.grad_J), 1e-15)
    s1, s2 = on.scores[:, 0], on.scores[:, 2]
    n1 = (s1 * s1).sum(1)
    lhs = float(on.prob @ ((on.reward - credit["V"]) ** 2 * n1))
    rhs = float(on.prob @ ((credit["Q"] - credit["V"]) ** 2 * n1)) + float(on.prob @ (credit["var_R"] * n1))
    check("8f. E[(R-V)^2 ||s1||^2] == E[(Q-V)^2 ||s1||^2] + E[Var(R|y1) ||s1||^2] (R in {-0.5, 2})", lhs - rhs, 1e-14)
    dots = (s1 * s2).sum(1)
    check("8f. s1 . s2 is not 0 pointwise (shared parameters; 1 if max |s1.s2| < 0.01)", float(float(dots.abs().max()) < 0.01), 0.0)
    check("8f. martingale orthogonality E[s1 . s2] == 0", float(on.prob @ dots), 1e-15)
    for L in range(1, 6):
        total, per_step = chain_score_moments(L)
        check(f"8g. E||sum_t s_t||^2 == sum_t E||s_t||^2, L = {L} (shared parameters)", total - float(per_step.sum()), 1e-13)
    unmasked = on.prob @ estimator_samples(on, torch.ones_like(on.mask))
    check("8. unmasked feedback token adds exactly E[R s_f]", maxabs(unmasked - on.grad_J, feedback_term(on)), 1e-15)
    check("8. ... which is not 0 (1 if ||E[R s_f]|| < 1e-3)", float(float(feedback_term(on).norm()) < 1e-3), 0.0)
    lm_on, lm_off = tinylm_episodes(0.0), tinylm_episodes(0.3)
    check("TinyLM: sequence IS is unbiased under a perturbed sampler (m = 0.3)", scheme_moments(lm_off, "sequence IS").bias, 1e-14)
    check("TinyLM: token IS is biased under mismatch (1 if ||bias|| < 1e-3)", float(scheme_moments(lm_off, "token IS").bias < 1e-3), 0.0)
    check("TinyLM: every scheme is unbiased when the sampler is the policy (largest ||bias||)", max(scheme_moments(lm_on, s).bias for s in SCHEMES), 1e-14)
    const = lm_off.prob @ estimator_samples(lm_off, token_ratio(lm_off.log_prob, lm_off.sampler_log_prob, lm_off.mask), torch.ones_like(lm_off.reward))
    check("TinyLM: a constant baseline adds 0 to the token-ratio gradient", float(const.abs().max()), 1e-15)
    for level in ("token", "sequence"):
        diff, closed, bound = truncation_bias(lm_off, CAP, level)
        check(f"TinyLM: {level} TIS minus IS == -E_mu[(rho - C)+ A s] (C = {CAP})", maxabs(diff, closed), 1e-15)
        check(f"TinyLM: ||{level} TIS bias vs IS|| <= its bound (excess)", max(float(diff.norm()) - bound, 0.0), 0.0)
    args = (lm_off.log_prob, lm_off.sampler_log_prob, lm_off.mask)
    seq = sequence_ratio(*args)
    dropped = lm_off.prob @ estimator_samples(lm_off, seq * (seq > CAP))
    check(f"TinyLM: sequence mask bias == -E_mu[rho 1[rho > {CAP}] A sum_t s_t]", maxabs(lm_off.prob @ estimator_samples(lm_off, masked_sequence_ratio(*args, 0.0, CAP)) - lm_off.grad_J, -dropped), 1e-15)
    check("batched weight functions == per-sequence loop (8 functions, TinyLM m = 0.3; relative)", batched_vs_loop(lm_off), 1e-14)
    check("batched weight functions == per-sequence loop (8 functions, agent m = 1; relative)", batched_vs_loop(off), 1e-14)
    check("padding holding nan/-inf/inf changes no weight and gets weight 0", padding_leak(off), 0.0)
