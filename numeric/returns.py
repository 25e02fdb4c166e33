r"""Returns in numbers: reward-to-go, discounted weights, λ-returns and GAE, batched and exact.

Batched helpers (numpy or torch in, the same kind out; time is the last
dimension, any leading dimensions are batch).  Each is one backward scan:
:math:`O(T)` Python steps, vectorised over the batch.

:func:`reward_to_go`, :func:`discounted_score_weights`, :func:`gae_advantages`, :func:`lambda_returns`

GAE takes two flags (:mod:`derivations.returns`): ``terminated`` (no
continuation exists: do not bootstrap from the next value) and ``trace_cut``
(the next entry of the array does not continue this trajectory: stop the
backward recursion).  A terminated step must also cut the trace; the last
entry of the array always ends the recursion.

The suite ``returns`` checks them on the enumerated toy LM with a per-token
reward: both the full-return and the reward-to-go estimator are unbiased with
exact trace variances, the discounted objective's gradient is
:math:`\mathbb{E}[\sum_t \gamma^t R^\gamma_{\ge t} s_t]`, and GAE with the exact
value function is unbiased for every :math:`\lambda`.
"""

from __future__ import annotations

import torch

from ._types import Array, ArrayT
from ._validate import (
    compute_dtype,
    like,
    require_finite,
    require_same_device,
    require_same_shape,
    require_unit_interval,
    to_tensor,
)
from .checks import check, maxabs, suite
from .expectations import expected_score_sum, score_estimator_moments
from .tinylm import TinyLM, token_score_tensor

__all__ = ["discounted_score_weights", "gae_advantages", "lambda_returns", "reward_to_go"]


def _series(name: str, x: Array) -> tuple[torch.Tensor, str]:
    require_same_device(**{name: x})
    t, kind = to_tensor(name, x)
    if t.ndim < 1 or t.shape[-1] < 1:
        raise ValueError(f"{name} must have a time dimension (the last one) of length >= 1, got shape {tuple(t.shape)}")
    return require_finite(name, t).to(compute_dtype(t.dtype)), kind


def _backward_scan(x: torch.Tensor, carry: torch.Tensor) -> torch.Tensor:
    r""":math:`y_t = x_t + \text{carry}_t\, y_{t+1}`, :math:`y_T = 0` (positions :math:`0, \dots, T-1`), over the last dimension."""
    out = torch.empty_like(x)
    running = torch.zeros_like(x[..., 0])
    for t in reversed(range(x.shape[-1])):
        running = x[..., t] + carry[..., t] * running
        out[..., t] = running
    return out


def reward_to_go(rewards: ArrayT, gamma: float = 1.0) -> ArrayT:
    r"""Discounted reward-to-go :math:`R^\gamma_{\ge t} = \sum_{u = t}^{T-1} \gamma^{u-t} R_u`, steps :math:`t = 0, \dots, T-1`.

    Backward: :math:`R^\gamma_{\ge t} = R_t + \gamma R^\gamma_{\ge t+1}`, :math:`R^\gamma_{\ge T} = 0`.

    Parameters
    ----------
    rewards : numpy.ndarray or torch.Tensor
        ``[..., T]`` per-step rewards (0 on padding).
    gamma : float
        Discount in :math:`[0, 1]`.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``[..., T]``, the caller's kind, device and dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import reward_to_go
    >>> print(reward_to_go(np.array([1.0, 0.0, 2.0]), gamma=0.5))
    [1.5 1.  2. ]
    """
    r, kind = _series("rewards", rewards)
    gamma = require_unit_interval("gamma", gamma)
    return like(kind, _backward_scan(r, torch.full_like(r, gamma)).to(_dtype(rewards)))


def discounted_score_weights(rewards: ArrayT, gamma: float) -> ArrayT:
    r"""Weights :math:`\gamma^t R^\gamma_{\ge t}` of the token scores in the gradient of the literal discounted objective.

    .. math::

        \nabla_\theta\, \mathbb{E}\Bigl[\sum_t \gamma^t R_t\Bigr]
        = \mathbb{E}\Bigl[\sum_t \gamma^t R^\gamma_{\ge t}\, s_t\Bigr],
        \qquad t = 0, 1, \dots, T - 1

    (:func:`derivations.returns.discounted_objective_weights`).  Weighting by
    :math:`R^\gamma_{\ge t}` alone optimises something else and turns the gradient.

    Examples
    --------
    >>> import torch
    >>> from numeric import discounted_score_weights
    >>> discounted_score_weights(torch.tensor([1.0, 0.0, 2.0]), gamma=0.5)
    tensor([1.5000, 0.5000, 0.5000])
    """
    r, kind = _series("rewards", rewards)
    gamma = require_unit_interval("gamma", gamma)
    g = _backward_scan(r, torch.full_like(r, gamma))
    powers = gamma ** torch.arange(r.shape[-1], dtype=r.dtype, device=r.device)
    return like(kind, (powers * g).to(_dtype(rewards)))


def _dtype(x) -> torch.dtype:
    """The dtype a result is returned in: the first input's, float64 for integers."""
    return to_tensor("x", x)[0].dtype


def _flagged_inputs(rewards, next_value, terminated, trace_cut, gamma, lam, value=None):
    require_same_device(rewards=rewards, value=value, next_value=next_value, terminated=terminated, trace_cut=trace_cut)
    r, kind = _series("rewards", rewards)
    nv, _ = _series("next_value", next_value)
    d, _ = to_tensor("terminated", terminated, dtype=torch.bool)
    c, _ = to_tensor("trace_cut", trace_cut, dtype=torch.bool)
    require_same_shape(rewards=r, next_value=nv, terminated=d, trace_cut=c)
    if bool((d & ~c).any()):
        raise ValueError("trace_cut must be True wherever terminated is True (a terminal step ends the trajectory)")
    gamma = require_unit_interval("gamma", gamma)
    lam = require_unit_interval("lam", lam)
    as_r = lambda t: t.to(device=r.device, dtype=r.dtype)  # noqa: E731
    return r, as_r(nv), as_r(d), as_r(c), gamma, lam, kind


def gae_advantages(
    rewards: ArrayT, value: Array, next_value: Array, terminated: Array, trace_cut: Array, gamma: float, lam: float
) -> ArrayT:
    r"""Generalised advantage estimates with separate ``terminated`` and ``trace_cut`` flags.

    .. math::

        \delta_t = R_t + \gamma (1 - d_t) V'_t - V_t,
        \qquad
        A_t = \delta_t + \gamma \lambda (1 - \chi_t) A_{t+1},

    :math:`d_t` = ``terminated[t]``, :math:`\chi_t` = ``trace_cut[t]``, and the
    recursion starts from :math:`A_T = 0` (steps :math:`t = 0, \dots, T-1`).  At a time limit followed by
    ``reset()`` or at the end of a buffer that cuts an episode, set
    ``terminated=False, trace_cut=True``: the target bootstraps from
    :math:`V'_t`, and nothing from the next entry leaks back.

    Parameters
    ----------
    rewards : numpy.ndarray or torch.Tensor
        ``[..., T]`` finite per-step rewards :math:`R_t`.  The result has
        ``rewards``'s kind, device and dtype.
    value : numpy.ndarray or torch.Tensor
        ``[..., T]`` the critic's :math:`V_t`, the value of the observation
        before step ``t`` (finite).
    next_value : numpy.ndarray or torch.Tensor
        ``[..., T]`` :math:`V'_t`, the value of the observation after step
        ``t`` (finite); used only where ``terminated`` is False.
    terminated : boolean numpy.ndarray or torch.Tensor
        ``[..., T]`` :math:`d_t`: no continuation after step ``t`` (no bootstrap).
    trace_cut : boolean numpy.ndarray or torch.Tensor
        ``[..., T]`` :math:`\chi_t`: the next array entry is not this
        trajectory's next step (the recursion stops); implied by ``terminated``.
    gamma : float
        The discount :math:`\gamma \in [0, 1]`.
    lam : float
        The GAE parameter :math:`\lambda \in [0, 1]`.

    References
    ----------
    Schulman et al., "High-dimensional continuous control using generalized
    advantage estimation", ICLR (2016); Pardo et al., "Time limits in
    reinforcement learning", ICML (2018).

    Examples
    --------
    A time limit after the second step, then ``reset()``; the third entry
    belongs to a new episode:

    >>> import numpy as np
    >>> from numeric import gae_advantages
    >>> r = np.array([0.0, 1.0, 100.0]); V = np.array([1.0, 1.0, 0.0]); Vn = np.array([1.0, 2.0, 0.0])
    >>> term = np.array([False, False, True]); cut = np.array([False, True, True])
    >>> print(gae_advantages(r, V, Vn, term, cut, gamma=0.9, lam=0.5).round(6))
    [  0.71   1.8  100.  ]
    """
    r, nv, d, c, gamma, lam, kind = _flagged_inputs(rewards, next_value, terminated, trace_cut, gamma, lam, value)
    v, _ = _series("value", value)
    require_same_shape(rewards=r, value=v)
    deltas = r + gamma * (1 - d) * nv - v.to(r)
    return like(kind, _backward_scan(deltas, gamma * lam * (1 - c)).to(_dtype(rewards)))


def lambda_returns(rewards: ArrayT, next_value: Array, terminated: Array, trace_cut: Array, gamma: float, lam: float) -> ArrayT:
    r"""λ-returns with the two flags.

    .. math::

        R^\lambda_{\ge t} = R_t + \gamma (1 - d_t)\bigl[V'_t + \lambda (1 - \chi_t)\bigl(R^\lambda_{\ge t+1} - V'_t\bigr)\bigr].

    Without flags this is :math:`R_t + \gamma\bigl((1-\lambda) V_{t+1} + \lambda R^\lambda_{\ge t+1}\bigr)`;
    :func:`gae_advantages` is :math:`R^\lambda_{\ge t} - V_t` whenever
    ``next_value[t] == value[t+1]`` inside a trajectory
    (:func:`derivations.returns.gae_is_lambda_return_minus_value`).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import lambda_returns
    >>> r = np.array([0.0, 1.0, 100.0]); Vn = np.array([1.0, 2.0, 0.0])
    >>> term = np.array([False, False, True]); cut = np.array([False, True, True])
    >>> print(lambda_returns(r, Vn, term, cut, gamma=0.9, lam=0.5).round(6))
    [  1.71   2.8  100.  ]
    """
    r, nv, d, c, gamma, lam, kind = _flagged_inputs(rewards, next_value, terminated, trace_cut, gamma, lam)
    # R^lam_{>=t} = [R_t + g(1-d)(1 - lam(1-c)) V'_t] + g lam (1-d)(1-c) R^lam_{>=t+1}
    x = r + gamma * (1 - d) * (1 - lam * (1 - c)) * nv
    return like(kind, _backward_scan(x, gamma * lam * (1 - d) * (1 - c)).to(_dtype(rewards)))


# -- exact checks on the toy LM ----------------------------------------------------------------


def _token_rewards(lm: TinyLM) -> torch.Tensor:
    """Per-token reward R_t = 1[o_t == 1] (0 on padding)."""
    return (lm.tokens == 1).to(torch.float64) * lm.mask


def _objective_gradient(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """Autograd of J = sum_o pi(o) sum_t gamma^t R_t(o): the definition, no estimator."""
    th = theta.detach().clone().requires_grad_(True)
    returns = (rewards * gamma ** torch.arange(lm.L, dtype=torch.float64)).sum(1)
    return torch.autograd.grad(lm.probs(th) @ returns, th)[0]


def _exact_values(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, gamma: float):
    r"""``[N, L]`` :math:`V(o_{<t}) = \mathbb{E}[R^\gamma_{\ge t} \mid o_{<t}]` and the next values :math:`V(o_{\le t})` (0 at the end)."""
    p = lm.probs(theta.detach())
    G = reward_to_go(rewards, gamma)
    rows = lm.prefix_rows.reshape(-1)
    mass = (p[:, None] * lm.mask).reshape(-1)
    num = torch.zeros(lm.n_prefixes).index_add_(0, rows, (p[:, None] * G * lm.mask).reshape(-1))
    den = torch.zeros(lm.n_prefixes).index_add_(0, rows, mass)
    V = (num / den.clamp_min(1e-300))[lm.prefix_rows] * lm.mask
    V_next = torch.cat([V[:, 1:], torch.zeros(lm.N, 1)], 1)
    return V, V_next


def _naive_gae(r, v, nv, d, c, gamma, lam):
    """Per-row, per-step Python loop, straight from the definitions."""
    out = []
    for row in zip(*(x.tolist() for x in (r, v, nv, d, c))):
        adv, running = [0.0] * len(row[0]), 0.0
        for t in reversed(range(len(row[0]))):
            delta = row[0][t] + (0.0 if row[3][t] else gamma * row[2][t]) - row[1][t]
            running = delta + (0.0 if row[4][t] else gamma * lam * running)
            adv[t] = running
        out.append(adv)
    return torch.tensor(out)


@suite("returns")
def cross_checks() -> None:
    """Reward-to-go, discounting and GAE on TinyLM(V=4, L=4, seed=0) with R_t = 1[o_t == 1]."""
    lm = TinyLM(V=4, L=4, seed=0)
    theta = lm.theta0
    r = _token_rewards(lm)

    # 001 section 6: per-token rewards, full return vs reward-to-go
    gJ = _objective_gradient(lm, theta, r, 1.0)
    full = score_estimator_moments(lm, theta, r.sum(1))
    rtg = score_estimator_moments(lm, theta, reward_to_go(r))
    check("full-return estimator unbiased", maxabs(full.mean, gJ), 1e-14)
    check("reward-to-go estimator unbiased (dropped terms E[s_t R_u], u < t, vanish)", maxabs(rtg.mean, gJ), 1e-14)
    check("reward-to-go trace variance / full-return trace variance < 1", rtg.variance / full.variance, 1.0)
    T = token_score_tensor(lm, theta)
    p = lm.probs(theta)
    for label, w, moments in (("full return", r.sum(1)[:, None].expand(-1, lm.L), full), ("reward-to-go", reward_to_go(r), rtg)):
        est = (w[:, :, None] * T).sum(1)
        dense_var = float(p @ est.pow(2).sum(1) - (p @ est).pow(2).sum())
        check(f"{label}: exact trace variance == dense enumeration of the [N, P] estimator", abs(moments.variance - dense_var), 1e-13)
    R = (r.sum(1) > 0).to(torch.float64)  # outcome: did token 1 occur
    last = torch.nn.functional.one_hot(lm.lengths - 1, lm.L).to(torch.float64)
    check("outcome reward: reward-to-go == outcome at every token", maxabs(reward_to_go(R[:, None] * last), R[:, None] * lm.mask), 1e-15)

    # discounting
    gamma = 0.7
    gJ_gamma = _objective_gradient(lm, theta, r, gamma)
    literal = expected_score_sum(lm, theta, discounted_score_weights(r, gamma))
    dropped = expected_score_sum(lm, theta, reward_to_go(r, gamma))
    check("literal discounted objective: gradient == E[sum_t gamma^t R_{>=t} s_t]", maxabs(literal, gJ_gamma), 1e-14)
    depth = torch.tensor([len(h) for h in lm.prefixes()], dtype=torch.float64)  # each prefix owns its block of theta
    per_block = (gamma**depth)[:, None] * dropped.view(lm.n_prefixes, lm.V)
    check("dropping gamma^t scales each depth-t block by 1/gamma^t: literal == gamma^depth(h) * dropped, block by block", maxabs(literal, per_block.reshape(-1)), 1e-14)
    dense = lm.probs(theta) @ (reward_to_go(r, gamma)[:, :, None] * token_score_tensor(lm, theta)).sum(1)
    check("E[sum_t R_{>=t} s_t] (per-prefix sums) == dense sum over responses and tokens", maxabs(dropped, dense), 1e-14)

    # GAE with the exact value function is unbiased for every lambda
    done = (torch.arange(lm.L)[None, :] >= lm.lengths[:, None] - 1).expand(lm.N, lm.L)
    for g in (1.0, gamma):
        V, V_next = _exact_values(lm, theta, r, g)
        target = _objective_gradient(lm, theta, r, g)
        worst = 0.0
        for lam in (0.0, 0.5, 1.0):
            A = gae_advantages(r, V, V_next, done, done, g, lam) * lm.mask
            est = expected_score_sum(lm, theta, A * g ** torch.arange(lm.L, dtype=torch.float64))
            worst = max(worst, maxabs(est, target))
        check(f"GAE with exact V is unbiased for lambda = 0, 0.5, 1 (gamma = {g})", worst, 1e-14)

    # batched GAE against the naive loop and against the lambda-return
    gen = torch.Generator().manual_seed(0)
    shape = (6, 9)
    rr, vv = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    cut = torch.rand(shape, generator=gen) < 0.3
    cut[:, -1] = True
    term = cut & (torch.rand(shape, generator=gen) < 0.5)
    nv = torch.where(cut, torch.randn(shape, generator=gen), torch.cat([vv[:, 1:], torch.zeros(shape[0], 1)], 1))
    A = gae_advantages(rr, vv, nv, term, cut, 0.9, 0.8)
    naive = max(maxabs(A, _naive_gae(rr, vv, nv, term, cut, 0.9, 0.8)), maxabs(gae_advantages(rr.numpy(), vv.numpy(), nv.numpy(), term.numpy(), cut.numpy(), 0.9, 0.8), A))
    check("GAE batched == naive loop (numpy and torch, random flags)", naive, 1e-14)
    check("GAE == lambda-return - V (random flags)", maxabs(A, lambda_returns(rr, nv, term, cut, 0.9, 0.8) - vv), 1e-14)
    check("GAE(lambda=0) == TD error", maxabs(gae_advantages(rr, vv, nv, term, cut, 0.9, 0.0), rr + 0.9 * (~term) * nv - vv), 1e-15)
    ends = torch.zeros(shape, dtype=torch.bool)
    ends[:, -1] = True
    nv_traj = torch.cat([vv[:, 1:], torch.zeros(shape[0], 1)], 1)
    one = gae_advantages(rr, vv, nv_traj, ends, ends, 0.9, 1.0)
    check("GAE(lambda=1) == discounted reward-to-go - V", maxabs(one, reward_to_go(rr, 0.9) - vv), 1e-14)
    check("reward_to_go batched == naive loop", maxabs(reward_to_go(rr, 0.9), _naive_gae(rr, torch.zeros(shape), torch.zeros(shape), ends, ends, 0.9, 1.0)), 1e-14)
