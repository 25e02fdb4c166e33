r"""Baselines on the toy LM: unbiasedness, the exact variance, the optimal baseline, the estimator in code.

Every formula here is taken from :mod:`derivations.baselines` by
``lambdify``: the variance quadratic :math:`\operatorname{Var}(b) = \alpha_0 - 2b\alpha_1
+ b^2 \alpha_2 - \lVert\nabla J\rVert^2`, the optimal baseline :math:`b^* =
\alpha_1/\alpha_2`, the improving interval solved by the CAS, and the bias
:math:`-\pi_j(b_j - \mathbb{E}_\pi[b])` of an action-dependent baseline.  The
coefficients :math:`A_k = \mathbb{E}[R^{2-k}\lVert s\rVert^2]` are exact sums
over the enumerated responses, with :math:`\lVert s(o)\rVert^2 =
\sum_t \lVert s_t(o)\rVert^2` (token scores of one response live in disjoint
blocks).

The estimator in code is the surrogate loss :func:`reinforce_loss`,
:math:`-\tfrac1n \sum_i \operatorname{sg}(A_i) \log\pi_\theta(o_i)`, whose one
backward pass equals the per-sample loop :func:`reinforce_per_sample`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import overload

import numpy as np
import sympy as sp
import torch

from derivations import baselines as derived
from derivations.score_function import instances

from ._types import Array, ArrayT
from ._validate import (
    require_finite,
    require_int,
    require_real,
    require_same_device,
    to_tensor,
)
from .checks import check, maxabs, suite
from .expectations import expected_score_sum, token_score_sqnorms
from .score_function import autograd_gradient
from .tinylm import TinyLM, check_lm, check_rewards, check_theta, default_reward, real_tensor, score_matrix

__all__ = [
    "action_dependent_bias",
    "baseline_gradient",
    "baseline_variance",
    "improvement_interval",
    "optimal_baseline",
    "prefix_baseline",
    "reinforce_loss",
    "MonteCarloEstimate",
    "reinforce_monte_carlo",
    "reinforce_per_sample",
    "VarianceTerms",
    "variance_terms",
]


def baseline_gradient(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, baseline: float | torch.Tensor) -> torch.Tensor:
    r"""``[P]`` exact :math:`\mathbb{E}_{\pi_\theta}\bigl[\sum_t (R(o) - b_t(o))\, s_t(o)\bigr]`.

    Parameters
    ----------
    lm : TinyLM
    theta : torch.Tensor
        ``[P]`` parameters.
    rewards : torch.Tensor
        ``[N]`` finite rewards.
    baseline : float or torch.Tensor
        A constant, ``[N]`` (one number per response) or ``[N, L]`` (per token).

    Examples
    --------
    >>> from numeric import TinyLM, default_reward, maxabs
    >>> from numeric.baselines import baseline_gradient
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> maxabs(baseline_gradient(lm, lm.theta0, R, 5.0), baseline_gradient(lm, lm.theta0, R, 0.0)) < 1e-14
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    rewards = check_rewards(lm, rewards)
    if isinstance(baseline, torch.Tensor):
        baseline = real_tensor("baseline", baseline)
        if baseline.shape not in ((lm.N,), (lm.N, lm.L)):
            raise ValueError(f"baseline must be a number or have shape ({lm.N},) or ({lm.N}, {lm.L}), got {tuple(baseline.shape)}")
        require_finite("baseline", baseline)
        b = baseline.to(torch.float64)
        weights = (rewards - b) if b.ndim == 1 else rewards[:, None] - b
    else:
        weights = rewards - require_real("baseline", baseline)
        if not np.isfinite(float(baseline)):
            raise ValueError("baseline must be finite")
    return expected_score_sum(lm, theta, weights)


def prefix_baseline(lm: TinyLM, values: torch.Tensor) -> torch.Tensor:
    r"""``[N, L]`` token baselines :math:`b_t(o) = v(o_{<t})` from one number per prefix.

    Any function of the prefix is a table over the non-terminal prefixes, in
    the order of :meth:`TinyLM.prefixes`.

    Examples
    --------
    >>> import torch
    >>> from numeric import TinyLM
    >>> from numeric.baselines import prefix_baseline
    >>> lm = TinyLM()
    >>> B = prefix_baseline(lm, torch.arange(float(lm.n_prefixes)))
    >>> B[lm.seqs.index((2, 1, 0))].tolist()   # rows of (), (2,), (2, 1)
    [0.0, 2.0, 7.0, 0.0]
    """
    lm = check_lm(lm)
    values = real_tensor("values", values)
    if values.shape != (lm.n_prefixes,):
        raise ValueError(f"values must have shape ({lm.n_prefixes},), one number per prefix; got {tuple(values.shape)}")
    require_finite("values", values)
    return values.to(torch.float64)[lm.prefix_rows] * lm.mask


@cache
def _bias_formula(V: int):
    """Lambdified rhs of the ``K = V`` instances of the action-dependent bias, one per coordinate."""
    pi, bb = sp.IndexedBase("pi", positive=True), sp.IndexedBase("b", real=True)
    args = [pi[i] for i in range(1, V + 1)] + [bb[i] for i in range(1, V + 1)]
    rows = [inst.rhs.doit() for inst in instances(derived.action_dependent_baseline, V)]
    return sp.lambdify(args, rows, "numpy")


def action_dependent_bias(lm: TinyLM, theta: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    r"""``[P]`` bias of a baseline :math:`b(o_{<t}, o_t)` that depends on the token it scores.

    The derived bias of :func:`derivations.baselines.action_dependent_baseline`,
    weighted by the probability :math:`\Pr(h)` of reaching each prefix :math:`h`:

    .. math::

        \mathbb{E}\Bigl[\sum_t (R - b_t) s_t\Bigr] - \nabla J
        = \Bigl(-\Pr(h)\, \pi_j(\cdot\mid h)\bigl(b(h, j) - \mathbb{E}_{\pi(\cdot\mid h)}[b(h, \cdot)]\bigr)\Bigr)_{h, j}.

    Parameters
    ----------
    table : torch.Tensor
        ``[n_prefixes, V]``: :math:`b(h, a)` for prefix ``h`` and token ``a``.

    Examples
    --------
    >>> import torch
    >>> from numeric import TinyLM, default_reward, maxabs
    >>> from numeric.baselines import action_dependent_bias, baseline_gradient
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> table = torch.zeros(lm.n_prefixes, lm.V); table[:, 1] = 0.7
    >>> B = table[lm.prefix_rows, lm.tokens] * lm.mask
    >>> bias = baseline_gradient(lm, lm.theta0, R, B) - baseline_gradient(lm, lm.theta0, R, 0.0)
    >>> maxabs(bias, action_dependent_bias(lm, lm.theta0, table)) < 1e-14
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    table = real_tensor("table", table)
    if table.shape != (lm.n_prefixes, lm.V):
        raise ValueError(f"table must have shape ({lm.n_prefixes}, {lm.V}), one row per prefix; got {tuple(table.shape)}")
    require_finite("table", table)
    pi = torch.softmax(lm.logits(theta).detach(), -1).numpy()
    per_prefix = np.stack(_bias_formula(lm.V)(*pi.T, *table.to(torch.float64).numpy().T), -1)
    return (torch.from_numpy(per_prefix) * _reach_probability(lm, theta)[:, None]).reshape(-1)


def _reach_probability(lm: TinyLM, theta: torch.Tensor) -> torch.Tensor:
    """``[n_prefixes]`` probability that a response passes through each prefix."""
    p = lm.probs(theta.detach())
    weights = (p[:, None] * lm.mask).reshape(-1)
    return torch.zeros(lm.n_prefixes, dtype=weights.dtype).index_add_(0, lm.prefix_rows.reshape(-1), weights)


@dataclass(frozen=True)
class VarianceTerms:
    r"""The coefficients of :math:`\operatorname{Var}(b) = \alpha_0 - 2b\alpha_1 + b^2\alpha_2 - \lVert\nabla J\rVert^2` (:func:`variance_terms`): ``A_0`` holds :math:`\alpha_0`, and so on."""

    A_0: float
    A_1: float
    A_2: float
    grad_sq: float


def variance_terms(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor) -> VarianceTerms:
    r"""The exact coefficients of :math:`\operatorname{Var}(b)`: :math:`\alpha_0, \alpha_1, \alpha_2, \lVert\nabla J\rVert^2` (fields ``A_0``, ``A_1``, ``A_2``, ``grad_sq``).

    .. math::

        A_k = \sum_o \pi_\theta(o)\, R(o)^{2-k} \lVert s(o)\rVert^2,
        \qquad \lVert s(o) \rVert^2 = \sum_t \lVert s_t(o) \rVert^2.

    Examples
    --------
    Against the dense ``[N, P]`` score matrix, with a count reward (:math:`R^2 \ne R`):

    >>> from numeric import TinyLM, score_matrix
    >>> from numeric.baselines import variance_terms
    >>> lm = TinyLM()
    >>> C = ((lm.tokens == 1).double() * lm.mask).sum(1)
    >>> t = variance_terms(lm, lm.theta0, C)
    >>> p, sq = lm.probs(lm.theta0), (score_matrix(lm, lm.theta0) ** 2).sum(1)
    >>> [abs(getattr(t, f"A_{k}") - float(p @ (C ** (2 - k) * sq))) < 1e-13 for k in range(3)]
    [True, True, True]
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    rewards = check_rewards(lm, rewards)
    p = lm.probs(theta.detach())
    sq = token_score_sqnorms(lm, theta).sum(1)
    g = expected_score_sum(lm, theta, rewards)
    A_0, A_1, A_2 = (float(p @ (rewards ** (2 - k) * sq)) for k in range(3))
    grad_sq = float(g @ g)
    return VarianceTerms(A_0, A_1, A_2, grad_sq)


@cache
def _variance_formula():
    A = sp.symbols("A_0:3")
    quadratic = derived.variance_quadratic().rhs.subs(dict(zip(derived.variance_coefficients(), A)))
    return sp.lambdify([*A, derived.grad_sq, derived.b], quadratic, "numpy")


@cache
def _optimal_formula():
    A = sp.symbols("A_0:3")
    b_star = derived.optimal_baseline_formula().subs(dict(zip(derived.variance_coefficients(), A)))
    return sp.lambdify(A, b_star, "numpy")


@overload
def baseline_variance(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, b: float) -> float: ...
@overload
def baseline_variance(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, b: np.ndarray) -> np.ndarray: ...


def baseline_variance(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, b: float | np.ndarray) -> float | np.ndarray:
    r"""Exact trace variance of :math:`(R - b)\, s`, from the derived quadratic.

    .. math::

        \operatorname{Var}(b) = \alpha_0 - 2b\alpha_1 + b^2 \alpha_2 - \lVert\nabla J\rVert^2

    (:func:`derivations.baselines.variance_quadratic`, lambdified; ``b`` may
    be a float or a numpy array of baselines).

    Examples
    --------
    Against the exact trace variance of :math:`(R - b)\,s` summed over the enumerated responses:

    >>> from numeric import TinyLM, default_reward, score_estimator_moments
    >>> from numeric.baselines import baseline_variance
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> exact = score_estimator_moments(lm, lm.theta0, R - 0.3).variance
    >>> abs(baseline_variance(lm, lm.theta0, R, 0.3) - exact) < 1e-14
    True
    """
    t = variance_terms(lm, theta, rewards)
    if isinstance(b, np.ndarray):
        if not np.isfinite(b).all():
            raise ValueError("b must be finite")
        return _variance_formula()(t.A_0, t.A_1, t.A_2, t.grad_sq, b.astype(np.float64))
    return float(_variance_formula()(t.A_0, t.A_1, t.A_2, t.grad_sq, require_real("b", b)))


def optimal_baseline(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor) -> float:
    r"""The variance-minimising constant :math:`b^* = \mathbb{E}[R\lVert s\rVert^2] / \mathbb{E}\lVert s\rVert^2`.

    From :func:`derivations.baselines.optimal_baseline`, lambdified.

    Raises
    ------
    ValueError
        At a deterministic policy (every :math:`\pi_\theta(\cdot\mid h)` one-hot in
        fp64, so :math:`\alpha_2 = 0`): every score vanishes, every baseline gives
        variance 0, and :math:`b^*` is undefined (no limit is taken).

    Examples
    --------
    >>> from numeric import TinyLM, default_reward
    >>> from numeric.baselines import baseline_variance, optimal_baseline
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> b = optimal_baseline(lm, lm.theta0, R)
    >>> var = lambda x: baseline_variance(lm, lm.theta0, R, x)
    >>> var(b) < min(var(b - 1e-3), var(b + 1e-3)), b > float(lm.probs(lm.theta0) @ R)   # a minimum, above E[R]
    (True, True)
    """
    t = variance_terms(lm, theta, rewards)
    if not t.A_2 > 0:
        raise ValueError(
            "theta gives a deterministic policy (A_2 = E||s||^2 = 0): every score is 0, every baseline "
            "has the same variance 0, and b* = A_1/A_2 is undefined"
        )
    return float(_optimal_formula()(t.A_0, t.A_1, t.A_2))


@cache
def _interval_formula(sign: int):
    interval = derived.improving_baselines(sign)
    return sp.lambdify([derived.b_star], [interval.start, interval.end], "numpy")


def improvement_interval(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor) -> tuple[float, float]:
    r"""The open interval of baselines with :math:`\operatorname{Var}(b) < \operatorname{Var}(0)`.

    The endpoints are those of the set solved by the CAS
    (:func:`derivations.baselines.improving_baselines`), evaluated at
    :math:`b^*`: :math:`(0, 2b^*)` when :math:`b^* > 0`.

    Examples
    --------
    >>> from numeric import TinyLM, default_reward
    >>> from numeric.baselines import improvement_interval, optimal_baseline
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> lo, hi = improvement_interval(lm, lm.theta0, R)
    >>> lo, abs(hi - 2 * optimal_baseline(lm, lm.theta0, R)) < 1e-15
    (0.0, True)
    """
    b_star = optimal_baseline(lm, theta, rewards)
    if b_star == 0.0:
        raise ValueError("rewards give b* = 0: no baseline improves on b = 0")
    lo, hi = _interval_formula(1 if b_star > 0 else -1)(b_star)
    return float(lo), float(hi)


def reinforce_loss(log_prob: ArrayT, advantages: Array, mask: Array | None = None) -> ArrayT:
    r"""The REINFORCE surrogate loss :math:`-\frac1n\sum_i \operatorname{sg}(A_i) \sum_t m_{it} \log \pi_\theta(o_{it} \mid o_{i,<t})`.

    Its gradient is minus the REINFORCE estimate
    :math:`\frac1n\sum_i A_i \nabla_\theta \log\pi_\theta(o_i)`; the advantages
    are detached, so one backward pass does the whole batch (an advantage that
    requires grad contributes nothing to the gradient).  It is
    :func:`numeric.policy_loss` ``("reinforce", ..., agg="seq-mean-token-sum")``,
    the one code path of every policy loss; ``[B]`` sequence log-probabilities
    are rows of one token.

    Parameters
    ----------
    log_prob : torch.Tensor or numpy.ndarray
        ``[B]`` sequence log-probabilities, or ``[B, T]`` token log-probabilities.
    advantages : torch.Tensor or numpy.ndarray
        ``[B]``, one number per sequence (broadcast over its tokens).
    mask : torch.Tensor or numpy.ndarray, optional
        ``[B, T]`` 0/1 or boolean mask of response tokens; only with ``[B, T]``
        log-probabilities.  Masked slots may hold anything (``-inf``, padding
        sentinels): they enter neither the loss nor its gradient.

    Returns
    -------
    torch.Tensor or numpy.ndarray
        A scalar of the caller's kind, device and dtype.

    Examples
    --------
    >>> import torch
    >>> from numeric.baselines import reinforce_loss
    >>> logp = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]], requires_grad=True)
    >>> loss = reinforce_loss(logp, torch.tensor([1.0, -1.0]), torch.tensor([[1.0, 1.0], [1.0, 0.0]]))
    >>> round(float(loss.detach()), 6)
    1.25
    >>> loss.backward(); logp.grad.tolist()
    [[-0.5, -0.5], [0.5, 0.0]]
    """
    from .losses.policy import policy_loss  # one code path: REINFORCE is policy_loss("reinforce") with seq-mean-token-sum

    require_same_device(log_prob=log_prob, advantages=advantages, mask=mask)
    logp, _ = to_tensor("log_prob", log_prob)
    adv, _ = to_tensor("advantages", advantages)
    if logp.ndim not in (1, 2) or adv.shape != logp.shape[:1]:
        raise ValueError(f"advantages must have shape [B] matching log_prob [B] or [B, T]; got {tuple(adv.shape)} and {tuple(logp.shape)}")
    require_finite("advantages", adv)
    if logp.ndim == 2:
        if mask is None:
            raise ValueError("mask is required with [B, T] token log-probabilities")
        return policy_loss("reinforce", log_prob, log_prob, advantages, mask, agg="seq-mean-token-sum")
    if mask is not None:
        raise ValueError("mask must be None with [B] sequence log-probabilities")
    require_finite("log_prob", logp)
    column = log_prob[:, None]  # each sequence a row of one token
    return policy_loss("reinforce", column, column, advantages, np.ones(column.shape) if isinstance(column, np.ndarray) else torch.ones_like(column, dtype=torch.bool),
                       agg="seq-mean-token-sum")


def reinforce_per_sample(lm: TinyLM, theta: torch.Tensor, samples: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    r"""The REINFORCE estimate by a loop: one backward pass per distinct sampled response.

    .. math::

        \hat g = \frac1n \sum_{i=1}^n A_i\, \nabla_\theta \log \pi_\theta(o_i)
                = \frac1n \sum_{o} \Big(\sum_{i:\, o_i = o} A_i\Big) \nabla_\theta \log \pi_\theta(o),

    the second sum over the distinct responses :math:`o` in the sample (a toy LM
    has few, so ``n`` samples cost at most :math:`N` backward passes).

    Examples
    --------
    >>> import torch
    >>> from numeric import TinyLM, maxabs
    >>> from numeric.baselines import reinforce_loss, reinforce_per_sample
    >>> lm = TinyLM()
    >>> idx, A = torch.tensor([3, 40, 3]), torch.tensor([1.0, -0.5, 2.0])
    >>> th = lm.theta0.clone().requires_grad_(True)
    >>> (g_loss,) = torch.autograd.grad(reinforce_loss(lm.sequence_log_prob(th)[idx], A), th)
    >>> maxabs(reinforce_per_sample(lm, lm.theta0, idx, A), -g_loss) < 1e-15
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    samples, advantages = _check_samples(lm, samples, advantages)
    th = theta.detach().clone().requires_grad_(True)
    total = torch.zeros_like(th)
    distinct, which = torch.unique(samples, return_inverse=True)
    summed = torch.zeros(len(distinct), dtype=advantages.dtype, device=advantages.device).index_add_(0, which, advantages)
    for i, a in zip(distinct.tolist(), summed.tolist()):
        k = int(lm.lengths[i])
        rows, toks = lm.prefix_rows[i, :k], lm.tokens[i, :k]
        logp = torch.log_softmax(lm.logits(th)[rows], -1)[torch.arange(k), toks].sum()  # log pi(o)
        total += a * torch.autograd.grad(logp, th)[0]
    return total / len(samples)


def _check_samples(lm: TinyLM, samples, advantages) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(samples, torch.Tensor) or samples.dtype != torch.int64 or samples.ndim != 1:
        raise TypeError("samples must be a 1-d int64 torch.Tensor of sequence indices")
    if len(samples) == 0 or int(samples.min()) < 0 or int(samples.max()) >= lm.N:
        raise ValueError(f"samples must be a non-empty tensor of indices in 0..{lm.N - 1}")
    if not isinstance(advantages, torch.Tensor) or advantages.is_complex() or advantages.shape != samples.shape:
        raise ValueError(f"advantages must be a real torch.Tensor of shape {tuple(samples.shape)}, one per sample")
    return samples, require_finite("advantages", advantages.to(torch.float64))


@dataclass(frozen=True)
class MonteCarloEstimate:
    r"""A Monte-Carlo gradient: ``mean`` ``[P]`` and its ``standard_error`` ``[P]``, per coordinate (:func:`reinforce_monte_carlo`)."""

    mean: torch.Tensor
    standard_error: torch.Tensor


def reinforce_monte_carlo(
    lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, baseline: float, n: int, seed: int
) -> MonteCarloEstimate:
    r"""Monte-Carlo REINFORCE from ``n`` sampled responses: the mean and its standard error, per coordinate.

    .. math::

        \hat g = \frac1n \sum_{i=1}^n (R(o_i) - b)\, s(o_i),
        \qquad \mathrm{se}_j = \sqrt{\widehat{\mathrm{Var}}[(R - b)s_j] / n},

    computed from the sample counts of each response (no ``[n, P]`` array).

    Examples
    --------
    >>> from numeric import TinyLM, default_reward, expected_score_sum
    >>> from numeric.baselines import reinforce_monte_carlo
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> mc = reinforce_monte_carlo(lm, lm.theta0, R, 0.0, n=400_000, seed=12)
    >>> se = mc.standard_error
    >>> z = (mc.mean - expected_score_sum(lm, lm.theta0, R)).abs()[se > 0] / se[se > 0]
    >>> bool(z.max() < 4)
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    rewards = check_rewards(lm, rewards)
    baseline = require_real("baseline", baseline)
    n = require_int("n", n, minimum=2)
    require_int("seed", seed)
    p = lm.probs(theta.detach())
    gen = torch.Generator().manual_seed(seed)
    freq = torch.bincount(torch.multinomial(p, n, replacement=True, generator=gen), minlength=lm.N).to(p.dtype) / n
    x = (rewards - baseline)[:, None] * score_matrix(lm, theta)
    mean = freq @ x
    var = (freq @ x**2 - mean**2) * n / (n - 1)
    return MonteCarloEstimate(mean, (var.clamp(min=0.0) / n).sqrt())


@suite("baselines")
def cross_checks() -> None:
    """Notebook 001 §2–4 on TinyLM(V=4, L=4, seed=0): baselines, the variance quadratic, the estimator in code."""
    lm = TinyLM(V=4, L=4, seed=0)
    R, theta = default_reward(lm), lm.theta0
    p = lm.probs(theta)
    g = autograd_gradient(lm, theta, R)
    ER = float(p @ R)

    # §2 baselines are free, or not
    for b in (0.0, ER, 5.0, -3.0):
        check(f"unbiased with constant baseline b={b:+.3f}", maxabs(baseline_gradient(lm, theta, R, b), g), 1e-14)
    gen = torch.Generator().manual_seed(5)
    B_prefix = prefix_baseline(lm, 3.0 * torch.randn(lm.n_prefixes, generator=gen))
    check("unbiased with arbitrary prefix-dependent baseline b(o_<t)", maxabs(baseline_gradient(lm, theta, R, B_prefix), g), 1e-14)
    table = torch.zeros(lm.n_prefixes, lm.V)
    table[:, 1] = 0.7  # b_t = 0.7 * 1[o_t == 1]: depends on the token it scores
    bias = baseline_gradient(lm, theta, R, table[lm.prefix_rows, lm.tokens] * lm.mask) - g
    check("token-dependent baseline: bias == derived -pi_j (b_j - E_pi[b]) per prefix", maxabs(bias, action_dependent_bias(lm, theta, table)), 1e-14)
    check("token-dependent baseline: bias == -0.7 Pr(h) pi_j (1[j = 1] - pi_1), written out per prefix", maxabs(bias, _token_baseline_bias_by_hand(lm, theta, 0.7)), 1e-14)
    count = ((lm.tokens == 1).to(torch.float64) * lm.mask).sum(1)  # a non-binary reward, 0..L
    g_count = autograd_gradient(lm, theta, count)
    leak = 0.3
    check("baseline b = 0.3 C that leaks the response's own reward: E[(C - b) s] == 0.7 grad J (count reward C)", maxabs(baseline_gradient(lm, theta, count, leak * count), (1 - leak) * g_count), 1e-14)

    # §3 the variance as a quadratic in b, for the binary reward and a count (where R^2 != R)
    S = score_matrix(lm, theta)
    sq = (S**2).sum(1)
    for label, rew in (("binary R", R), ("count C", count)):
        _variance_checks(lm, theta, rew, label, p, S)
    b_star = optimal_baseline(lm, theta, R)
    success, failure = float(p @ (R * sq) / (p @ R)), float(p @ ((1 - R) * sq) / (p @ (1 - R)))
    check("binary R: b* > E[R] exactly when E[||s||^2 | R=1] > E[||s||^2 | R=0] (mismatches)", float((success > failure) != (b_star > ER)), 0.0)

    # the two-armed bandit: the derived closed form against the definition, non-binary rewards
    formula = derived.bandit_optimal_baseline_formula()
    R1, R2, p_ = sorted(formula.free_symbols, key=str)  # R(1), R(2), p
    closed_form = sp.lambdify((p_, R1, R2), formula, dummify=True)
    worst = 0.0
    for prob, R1, R2 in ((0.1, 2.0, -0.5), (0.7, 1.0, 3.0)):
        pi = torch.tensor([prob, 1 - prob])
        norms = ((torch.eye(2) - pi) ** 2).sum(1)
        worst = max(worst, abs(closed_form(prob, R1, R2) - float(pi @ (torch.tensor([R1, R2]) * norms) / (pi @ norms))))
    check("bandit: b* closed form (1-p)R(1) + pR(2) == E[R||s||^2]/E||s||^2 (R = (2, -0.5), (1, 3))", worst, 1e-15)

    # §4 the estimator in code
    gen = torch.Generator().manual_seed(11)
    idx = torch.multinomial(p, 2000, replacement=True, generator=gen)
    A = R[idx] - ER
    th = theta.clone().requires_grad_(True)
    (grad_loss,) = torch.autograd.grad(reinforce_loss(lm.sequence_log_prob(th)[idx], A), th)
    check("per-sample loop == one backward through -mean(sg(A) log pi)", maxabs(reinforce_per_sample(lm, theta, idx, A), -grad_loss), 1e-13)
    padded = torch.where(lm.mask[idx] > 0, lm.token_log_probs(th)[idx], -math.inf)  # a padding sentinel, as trainers leave it
    (grad_token_loss,) = torch.autograd.grad(reinforce_loss(padded, A, lm.mask[idx]), th)
    check("token-level [B, T] masked loss, -inf on padding: same gradient as the sequence-level loss", maxabs(grad_token_loss, grad_loss), 1e-14)
    # an advantage that carries a gradient (a baseline computed from theta) must be stopped
    A_live = R[idx] - lm.probs(th) @ R
    (grad_live,) = torch.autograd.grad(reinforce_loss(lm.sequence_log_prob(th)[idx], A_live), th)
    check("advantage that requires grad: the loss stops it (gradient == loop with A as numbers)", maxabs(-grad_live, reinforce_per_sample(lm, theta, idx, A_live.detach())), 1e-13)
    mc = reinforce_monte_carlo(lm, theta, R, ER, n=400_000, seed=12)
    live = mc.standard_error > 0
    check("MC REINFORCE gradient within 4 SE of exact (max z, 400k samples, seed 12)", float(((mc.mean - g).abs()[live] / mc.standard_error[live]).max()), 4.0, kind="mc")


def _token_baseline_bias_by_hand(lm: TinyLM, theta: torch.Tensor, c: float) -> torch.Tensor:
    r"""``[P]`` bias of :math:`b_t = c\,\mathbb 1[o_t = 1]`, typed from the softmax: :math:`-c \Pr(h)\, \pi_j (\mathbb 1[j = 1] - \pi_1)`."""
    pi = torch.softmax(lm.logits(theta), -1)
    onehot = torch.zeros(lm.V, dtype=pi.dtype)
    onehot[1] = 1.0
    return (-c * _reach_probability(lm, theta)[:, None] * pi * (onehot - pi[:, 1:2])).reshape(-1)


def _variance_checks(lm: TinyLM, theta: torch.Tensor, R: torch.Tensor, label: str, p: torch.Tensor, S: torch.Tensor) -> None:
    """The derived quadratic against the direct variance, the optimal baseline, the CAS interval; for one reward."""

    def variance_direct(b: float) -> float:
        x = (R - b)[:, None] * S
        return float(p @ (x**2).sum(1) - (p @ x).pow(2).sum())

    worst = max(abs(variance_direct(b) - baseline_variance(lm, theta, R, b)) for b in (0.0, 0.3, 1.0, 2.0))
    check(f"{label}: variance quadratic (derived) == direct at b = 0, 0.3, 1, 2", worst, 1e-14)
    sq, ER = (S**2).sum(1), float(p @ R)
    b_star = optimal_baseline(lm, theta, R)
    grid = np.linspace(-2.0, 4.0, 6001)
    var_direct = np.array([variance_direct(b) for b in grid[::50]])  # the definition, every 0.05
    check(f"{label}: b* below the direct variance on a grid (Var(b*) - min direct)", max(0.0, baseline_variance(lm, theta, R, b_star) - var_direct.min()), 1e-14)
    on_grid = baseline_variance(lm, theta, R, grid)
    check(f"{label}: grid minimiser within half a grid step of b*", abs(float(grid[on_grid.argmin()]) - b_star), 5e-4 + 1e-12)
    check(f"{label}: b* == E[R||s||^2] / E||s||^2 (dense score matrix)", abs(b_star - float(p @ (R * sq)) / float(p @ sq)), 1e-14)
    cov = float(p @ (R * sq) - ER * (p @ sq))
    check(f"{label}: b* - E[R] == Cov(R, ||s||^2) / E||s||^2", abs((b_star - ER) - cov / float(p @ sq)), 1e-14)
    lo, hi = improvement_interval(lm, theta, R)
    var0 = variance_direct(0.0)
    inside = np.array([variance_direct(b) for b in np.linspace(lo + 0.01, hi - 0.01, 50)])
    outside = np.array([variance_direct(b) for b in (hi + 0.01, hi + 1.0, lo - 0.01, lo - 1.0)])
    check(f"{label}: direct Var(b) < Var(0) iff b in the CAS interval (0, 2b*): violations in 50 inside, 4 outside", float((inside >= var0).sum() + (outside <= var0).sum()), 0.0)

