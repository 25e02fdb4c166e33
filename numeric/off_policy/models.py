r"""Exact off-policy models: every episode enumerated, so bias and variance of a correction are numbers.

:func:`two_turn_agent` (two turns of 4 actions, a feedback token between them
that is context only, a stale sampler with a mismatch knob) and
:func:`tinylm_episodes` (:class:`~numeric.TinyLM` with a perturbed sampler)
give :class:`Episodes`, every episode with its sampler probability;
:func:`scheme_moments` computes the exact bias and trace variance of any scheme
of :data:`SCHEMES`, :func:`credit_assignment` the two credit estimators of a
multi-turn outcome, :func:`truncation_bias` the change TIS makes and its
derived closed form, :func:`chain_score_moments` the second moment of a score
sum.  The weights themselves are :mod:`numeric.off_policy.weights`.
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

from .._types import Array
from .._validate import require_cap, require_finite, require_finite_real, require_int, to_tensor
from ..tinylm import TinyLM, perturb, token_score_tensor
from .weights import (
    geometric_sequence_mask,
    kl_rejection_mask,
    masked_sequence_ratio,
    masked_token_ratio,
    sequence_ratio,
    token_ratio,
    truncated_sequence_ratio,
    truncated_token_ratio,
)

__all__ = [
    "Episodes",
    "SCHEMES",
    "SchemeMoments",
    "ChainMoments",
    "CreditAssignment",
    "TruncationBias",
    "chain_score_moments",
    "credit_assignment",
    "estimator_samples",
    "feedback_term",
    "sampler_moments",
    "scheme_moments",
    "tinylm_episodes",
    "token_bias_closed_form",
    "truncation_bias",
    "two_turn_agent",
]

F64 = torch.float64


def _no_correction(log_prob, sampler_log_prob, mask):
    """Weight 1 on every model token: no correction (the geometric mask with the band [0, inf] keeps every sequence)."""
    return geometric_sequence_mask(log_prob, sampler_log_prob, mask, 0.0, math.inf)


CAP, BAND, GEO_BAND, KL_THRESHOLD = 2.0, (0.5, 2.0), (0.8, 1.25), 0.05
"""The settings of :data:`SCHEMES`: TIS cap, IcePop band, geometric band, KL-rejection threshold."""

SCHEMES = {
    "no correction": _no_correction,
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


def estimator_samples(episodes: Episodes, weights: Array, advantages: Array | None = None) -> torch.Tensor:
    r"""``[E, P]`` per-episode estimates :math:`\hat g = \sum_t v_t A\, s_t`.

    ``weights`` is ``[E, T]``; ``advantages`` is ``[E]`` or ``[E, T]`` (default the reward).

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
    v = _f64("weights", weights)
    A = ep.reward if advantages is None else _f64("advantages", advantages)
    if v.shape != ep.mask.shape:
        raise ValueError(f"weights must have shape {tuple(ep.mask.shape)}, got {tuple(v.shape)}")
    if A.shape == ep.reward.shape:
        A = A[:, None]
    elif A.shape != ep.mask.shape:
        raise ValueError(f"advantages must have shape {tuple(ep.reward.shape)} or {tuple(ep.mask.shape)}, got {tuple(A.shape)}")
    return torch.einsum("et,etp->ep", v * A, ep.scores)


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
    b = require_finite_real("baseline", baseline)
    v = SCHEMES[scheme](ep.log_prob, ep.sampler_log_prob, ep.mask)
    return sampler_moments(ep, estimator_samples(ep, v, ep.reward - b))


# -- the two-turn agent ------------------------------------------------------------------------

ACTIONS = 4
"""Actions per turn of the two-turn agent."""
REWARD_VALUES = (-0.5, 2.0)
r"""The two values of the agent's outcome: :math:`R = -0.5` on failure, :math:`2` on success (not 0/1, so :math:`R^2 \ne R`)."""


def feedback_token(y1: int) -> int:
    """The environment's feedback token after the turn-0 action ``y1`` (a fixed function, context only)."""
    return (y1 + 1) % ACTIONS


@cache
def _agent_tables():
    gen = torch.Generator().manual_seed(8)
    K = ACTIONS
    success = 0.05 + 0.9 * torch.rand(K, K, generator=gen, dtype=F64)
    theta = 0.8 * torch.randn(K + K + 2 * K * K, generator=gen, dtype=F64)
    lag = 0.35 * torch.randn(theta.shape, generator=gen, dtype=F64)
    return success, theta, lag


def agent_logits(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""``(turn1 [K], feedback [K, K], turn2 [K, K])`` logits; a shared block :math:`\theta^{\mathrm{sh}}` enters all three.

    Layout of :math:`\theta` (``4K + 2K^2 = 40`` entries): :math:`\theta^{\mathrm{sh}}` (shared), :math:`\theta^{(1)}`
    (turn 0), :math:`\theta^{f}` (the model's logits at the feedback slot, per turn-0
    action), :math:`\theta^{(2)}` (turn 1, per turn-0 action).  Turn 0: :math:`\theta^{\mathrm{sh}} + \theta^{(1)}`;
    feedback slot after :math:`a`: :math:`\theta^{\mathrm{sh}} + \theta^{f}_{a}`; turn 1: :math:`\theta^{\mathrm{sh}} + \theta^{(2)}_{a}`.
    The shared :math:`\theta^{\mathrm{sh}}` makes :math:`s_0 \cdot s_2 \ne 0` pointwise, so
    :math:`\mathbb E[s_0 \cdot s_2] = 0` is a fact about expectations, not about blocks.
    """
    K = ACTIONS
    u, a = theta[:K], theta[K : 2 * K]
    F = theta[2 * K : 2 * K + K * K].view(K, K)
    B = theta[2 * K + K * K :].view(K, K)
    return u + a, u + F, u + B


def _agent_token_log_probs(theta, y1, f, y2):
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


def two_turn_agent(mismatch: float = 1.0, *, theta: torch.Tensor | None = None) -> Episodes:
    r"""Every episode :math:`(a, f, a', R)` of the two-turn agent under a stale sampler.

    Turn 0 picks :math:`a` of 4 actions; the environment answers with the
    feedback token :math:`f = (a + 1) \bmod 4` (context only: mask 0); turn 1
    picks :math:`a'` given :math:`a`; the outcome is :math:`R = 2` with
    probability :math:`q_{aa'}`, else :math:`R = -0.5`.  The sampler is the
    policy with stale weights, :math:`\theta_\mu = \theta + \zeta\,\xi` (fixed
    :math:`\xi`, entries :math:`\mathcal N(0, 0.35^2)`); ``mismatch`` is :math:`\zeta`.
    ``E = 32`` episodes, ``T = 3`` slots ``[a, f, a']``, ``P = 40`` parameters.

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
    m = require_finite_real("mismatch", mismatch, minimum=0)
    success, theta0, lag = _agent_tables()
    theta = theta0 if theta is None else theta
    if not isinstance(theta, torch.Tensor) or theta.shape != theta0.shape or not theta.is_floating_point():
        raise TypeError(f"theta must be a float torch.Tensor of shape {tuple(theta0.shape)}")
    theta = require_finite("theta", theta.detach().to(F64))
    theta_mu = theta + m * lag
    K = ACTIONS
    rows = [(y1, feedback_token(y1), y2, r) for y1 in range(K) for y2 in range(K) for r in (0, 1)]
    y1, f, y2, r = (torch.tensor(c) for c in zip(*rows))
    lp = _agent_token_log_probs(theta, y1, f, y2)
    lmu = _agent_token_log_probs(theta_mu, y1, f, y2)
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
    r"""``(pi, mu)`` at the agent's 5 decision states: turn 0 and turn 1 after each :math:`a`."""
    m = require_finite_real("mismatch", mismatch, minimum=0)
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
    r"""Every response of ``TinyLM(V=4, L=4, seed=0)``, sampled by :math:`\theta_\mu = \theta_0 + \zeta\,\xi` (``perturb``, seed 1).

    The reward is :func:`graded_reward`; every token is the model's (mask = the
    response mask).

    Examples
    --------
    >>> from numeric import scheme_moments, tinylm_episodes
    >>> ep = tinylm_episodes(0.3)
    >>> tuple(ep.scores.shape), round(scheme_moments(ep, "sequence IS").bias, 12)
    ((121, 4, 160), 0.0)
    """
    m = require_finite_real("mismatch", mismatch, minimum=0)
    lm, theta, scores, R = _tinylm()
    theta_mu = perturb(theta, m, seed=1)
    th = theta.clone().requires_grad_(True)
    grad_J = torch.autograd.grad(lm.probs(th) @ R, th)[0]
    return Episodes(lm.probs(theta_mu), lm.probs(theta), R, lm.token_log_probs(theta), lm.token_log_probs(theta_mu), lm.mask, scores, grad_J)


# -- an L-step chain with shared parameters -----------------------------------------------------

MAX_CHAIN_ENTRIES = 2**24
"""Largest score tensor :func:`chain_score_moments` builds (``L = 7, K = 4``: 11.9 million entries, seconds)."""


@dataclass(frozen=True)
class ChainMoments:
    r"""``total`` :math:`\mathbb E\lVert\sum_t s_t\rVert^2` and ``per_step`` ``[L]`` :math:`\mathbb E\lVert s_t\rVert^2` of a chain (:func:`chain_score_moments`)."""

    total: float
    per_step: torch.Tensor


def chain_score_moments(L: int, K: int = 4, seed: int = 5) -> ChainMoments:
    r""":math:`\mathbb E\lVert\sum_t s_t\rVert^2` and each :math:`\mathbb E\lVert s_t\rVert^2` for an ``L``-step chain, enumerated over :math:`K^L` sequences.

    Step :math:`t` picks :math:`o_t` with logits :math:`\theta^{\mathrm{sh}} + \Theta_{t, o_{t-1}}`
    (a shared :math:`\theta^{\mathrm{sh}}`, so the token scores overlap and
    :math:`s_t \cdot s_u \ne 0` pointwise).  The score terms are martingale
    differences, so ``total`` is the sum of ``per_step``.

    Examples
    --------
    >>> from numeric.off_policy import chain_score_moments
    >>> m = chain_score_moments(3)
    >>> abs(m.total - float(m.per_step.sum())) < 1e-12, tuple(m.per_step.shape)
    (True, (3,))
    """
    L = require_int("L", L, minimum=1)
    K = require_int("K", K, minimum=2)
    size = K**L * L * (2 * K + (L - 1) * K * K)  # the [K^L, L, P] score tensor
    if size > MAX_CHAIN_ENTRIES:
        raise ValueError(f"chain_score_moments(L={L}, K={K}) enumerates {K**L:,} sequences ({size:,} score entries), more than MAX_CHAIN_ENTRIES = {MAX_CHAIN_ENTRIES:,}")
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
    return ChainMoments(float(prob @ scores.sum(1).pow(2).sum(-1)), prob @ scores.pow(2).sum(-1))


# ------------------------------------------------------------------- checks


def _turn1_index(ep: Episodes) -> torch.Tensor:
    """Turn-0 action of each agent episode (episodes are listed y1-major: 8 per y1)."""
    return torch.arange(len(ep.prob)) // (2 * ACTIONS)


def _conditional_on_turn1(ep: Episodes, values: torch.Tensor) -> torch.Tensor:
    r"""``[E]``: :math:`\mathbb E_\mu[\text{values} \mid a]` at each episode's :math:`a`."""
    y1 = _turn1_index(ep)
    num = torch.zeros(ACTIONS, dtype=F64).index_add_(0, y1, ep.prob * values)
    den = torch.zeros(ACTIONS, dtype=F64).index_add_(0, y1, ep.prob)
    return (num / den)[y1]


def _shape(t: torch.Tensor) -> str:
    return f"<{list(t.shape)}>" if t.ndim else f"{float(t):.4g}"


@dataclass(frozen=True, repr=False)
class CreditAssignment:
    r"""Samples of the two credit estimators of a two-turn outcome, and the oracle baselines they use.

    ``broadcast`` and ``per_turn`` are ``[E, P]`` per-episode estimates;
    ``Q`` (:math:`\mathbb E[R \mid a]`) and ``var_R`` (:math:`\mathrm{Var}(R \mid a)`)
    are ``[E]``, at each episode's :math:`a`; ``V`` (:math:`\mathbb E[R]`) is a scalar tensor.
    """

    broadcast: torch.Tensor
    per_turn: torch.Tensor
    Q: torch.Tensor
    var_R: torch.Tensor
    V: torch.Tensor

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={_shape(getattr(self, k))}" for k in ("broadcast", "per_turn", "Q", "var_R", "V"))
        return f"CreditAssignment({parts})"


def credit_assignment(ep: Episodes) -> CreditAssignment:
    r"""Outcome broadcast :math:`(R - V)(s_0 + s_2)` and per-turn credit :math:`(Q - V)s_0 + (R - Q)s_2`, per episode.

    With oracle baselines :math:`V = \mathbb E[R]`, :math:`Q_a = \mathbb E[R \mid a]`
    (for the on-policy agent, ``two_turn_agent(0.0)``).  Returns a
    :class:`CreditAssignment`: ``[E, P]`` samples of both estimators, and
    :math:`Q`, :math:`\mathrm{Var}(R \mid a)`, :math:`V`.

    Examples
    --------
    >>> from numeric import credit_assignment, two_turn_agent
    >>> c = credit_assignment(two_turn_agent(0.0))
    >>> c
    CreditAssignment(broadcast=<[32, 40]>, per_turn=<[32, 40]>, Q=<[32]>, var_R=<[32]>, V=0.7346)
    >>> round(float(c.V), 4)
    0.7346
    """
    ep = _episodes(ep, "ep")
    V = float(ep.prob @ ep.reward)
    Q = _conditional_on_turn1(ep, ep.reward)
    var = _conditional_on_turn1(ep, ep.reward**2) - Q**2
    broadcast = estimator_samples(ep, ep.mask, ep.reward - V)
    per_turn = estimator_samples(ep, ep.mask, torch.stack([Q - V, torch.zeros_like(Q), ep.reward - Q], 1))
    return CreditAssignment(broadcast, per_turn, Q, var, torch.tensor(V, dtype=F64))


def feedback_term(ep: Episodes, baseline: float = 0.0) -> torch.Tensor:
    r"""``[P]`` :math:`\mathbb E_\pi[(R - b)\, s_f]`: what a feedback token left unmasked adds to the gradient.

    The environment, not :math:`\pi`, chose :math:`f`, so :math:`\mathbb E[s_f \mid a] \ne 0`
    (:func:`derivations.off_policy.unmasked_feedback_term`).

    Examples
    --------
    >>> from numeric import feedback_term, two_turn_agent
    >>> round(float(feedback_term(two_turn_agent(0.0)).norm()), 3)
    0.683
    """
    ep, baseline = _episodes(ep, "ep"), require_finite_real("baseline", baseline)
    return ep.policy_prob @ ((ep.reward - baseline)[:, None] * ep.scores[:, 1])


@cache
def _token_bias():
    """The derived term, compiled once, on first use (not at import: every process that imports the package would pay)."""
    return sp.lambdify(dop.token_bias_symbols, dop.token_bias_term(), "numpy")


def token_bias_closed_form(mismatch: float = 1.0) -> torch.Tensor:
    r"""``[P]`` the derived token-ratio bias of the two-turn agent, :math:`\sum_{a,a'} \pi_0(\mu_2 - \pi_2)\bar A s_0 + (\mu_0 - \pi_0)\pi_2 \bar A s_2`.

    :func:`derivations.off_policy.token_bias_term`, lambdified and summed over
    :math:`(a, a')`, with :math:`\bar A = \mathbb E[R \mid a, a']`.

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
    terms = _token_bias()(p1[:, None, None].numpy(), p2[..., None].numpy(), q1[:, None, None].numpy(), q2[..., None].numpy(),
                        mean_reward[..., None].numpy(), s1[:, None, :].numpy(), s2.numpy())
    return torch.from_numpy(np.ascontiguousarray(terms.sum((0, 1))))


@dataclass(frozen=True, repr=False)
class TruncationBias:
    r"""What truncating the ratio at :math:`C` changes in the expected gradient, three ways.

    ``difference`` is :math:`\mathbb E_\mu[\hat g_{\mathrm{TIS}}] - \mathbb E_\mu[\hat g_{\mathrm{IS}}]`
    (``[P]``, by enumeration), ``closed_form`` its derived value
    :math:`-\mathbb E_\mu[\sum_t (\rho_t - C)_+ A s_t]` (``[P]``), ``bound`` the bound on its norm.
    """

    level: str
    cap: float
    difference: torch.Tensor
    closed_form: torch.Tensor
    bound: float

    def __repr__(self) -> str:
        return (f"TruncationBias(level={self.level!r}, cap={self.cap}, |difference|={float(self.difference.norm()):.4f}, "
                f"|difference - closed_form|={float((self.difference - self.closed_form).abs().max()):.1e}, bound={self.bound:.4f})")


def truncation_bias(ep: Episodes, cap: float = CAP, level: str = "token") -> TruncationBias:
    r"""The change truncated IS makes to the gradient of IS, its closed form and a bound, at the token or sequence ``level``.

    The closed form is :func:`derivations.off_policy.truncation_identity`
    taken in expectation; ``bound`` is
    :math:`\mathbb E_\mu[\sum_t (\rho_t - C)_+ |A|\, \lVert s_t\rVert]` (token) or
    :math:`\mathbb E_\mu[(\rho - C)_+ |A|\, \lVert\sum_t s_t\rVert]` (sequence).

    Examples
    --------
    >>> from numeric import truncation_bias, two_turn_agent
    >>> t = truncation_bias(two_turn_agent(1.0), 2.0, "sequence")
    >>> float((t.difference - t.closed_form).abs().max()) < 1e-15, float(t.difference.norm()) <= t.bound
    (True, True)
    """
    ep, cap = _episodes(ep, "ep"), require_cap("cap", cap)
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
    return TruncationBias(level, cap, diff, closed, bound)
