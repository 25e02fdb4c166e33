r"""Exact expectations of score-function estimators, without the ``[N, P]`` score matrix.

A score-function estimator weights each token score by a number,

.. math::

    \hat g(o) = \sum_t v_t(o)\, s_t(o),
    \qquad s_t(o) = \nabla_\theta \log \pi_\theta(o_t \mid o_{<t}),

with :math:`v_t(o) = R(o) - b` for REINFORCE with a baseline, the reward-to-go
for the causal estimator, and so on.  Its mean and second moment are sums over
every sequence of the enumerated :class:`~numeric.TinyLM`.  A dense
``[N, P]`` score matrix cannot hold a large tree (:math:`N \approx 10^6`,
:math:`P \approx 10^6` for ``V=8, L=7``), so both are accumulated per prefix:

* :math:`s_t` lives in the block of its prefix :math:`o_{<t}` and equals
  :math:`\mathrm{onehot}(o_t) - \pi(\cdot\mid o_{<t})` there, hence

  .. math::

      \mathbb{E}[\hat g]_{h,\cdot} = \sum_{(o,t):\, o_{<t}=h} \pi(o)\, v_t(o)\,
      \bigl(\mathrm{onehot}(o_t) - \pi(\cdot \mid h)\bigr);

* the prefixes of one sequence are distinct, so its token scores occupy
  disjoint blocks and are orthogonal:

  .. math::

      \lVert \hat g(o) \rVert^2 = \sum_t v_t(o)^2 \lVert s_t(o) \rVert^2,
      \qquad
      \lVert s_t \rVert^2 = 1 - 2\pi(o_t \mid h) + \lVert \pi(\cdot \mid h) \rVert^2.

Memory is :math:`O(NL + P)`; nothing of size :math:`N \times P` is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._validate import require_finite
from .tinylm import TinyLM, check_lm, check_theta, real_tensor

__all__ = ["ScoreMoments", "expected_score_sum", "score_estimator_moments", "token_score_sqnorms"]


@dataclass(frozen=True)
class ScoreMoments:
    r"""Mean, second moment and trace variance of an estimator :math:`\hat g`.

    ``variance`` is :math:`\operatorname{tr}\operatorname{Cov}[\hat g] =
    \mathbb{E}\lVert \hat g\rVert^2 - \lVert \mathbb{E}\hat g \rVert^2`.
    """

    mean: torch.Tensor
    second_moment: float
    variance: float


def _token_weights(lm: TinyLM, weights) -> torch.Tensor:
    weights = real_tensor("weights", weights)
    if weights.shape == (lm.N,):
        weights = weights[:, None].expand(lm.N, lm.L)
    elif weights.shape != (lm.N, lm.L):
        raise ValueError(f"weights must have shape ({lm.N},) or ({lm.N}, {lm.L}), got {tuple(weights.shape)}")
    require_finite("weights", weights)
    return weights.detach().to(torch.float64) * lm.mask


def token_score_sqnorms(lm: TinyLM, theta: torch.Tensor) -> torch.Tensor:
    r"""``[N, L]`` :math:`\lVert s_t(o) \rVert^2`, 0 on padding.

    Examples
    --------
    >>> from numeric import TinyLM, token_score_sqnorms, token_score_tensor
    >>> lm = TinyLM()
    >>> direct = (token_score_tensor(lm, lm.theta0) ** 2).sum(-1)
    >>> float((token_score_sqnorms(lm, lm.theta0) - direct).abs().max()) < 1e-15
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    pi = torch.softmax(lm.logits(theta).detach(), -1)
    own = pi[lm.prefix_rows, lm.tokens]
    return (1.0 - 2.0 * own + (pi * pi).sum(-1)[lm.prefix_rows]) * lm.mask


def expected_score_sum(lm: TinyLM, theta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    r"""``[P]`` exact :math:`\mathbb{E}_{\pi_\theta}\bigl[\sum_t v_t(o)\, s_t(o)\bigr]`.

    Parameters
    ----------
    lm : TinyLM
    theta : torch.Tensor
        ``[P]`` parameters at which :math:`\pi_\theta` and the scores are taken.
    weights : torch.Tensor
        ``[N]`` (one number per sequence, broadcast over its tokens) or
        ``[N, L]`` (per token).

    Examples
    --------
    With :math:`v = R` this is the policy gradient :math:`\nabla J = \mathbb{E}[R\, s]`:

    >>> import torch
    >>> from numeric import TinyLM, default_reward, expected_score_sum
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> th = lm.theta0.clone().requires_grad_(True)
    >>> g_auto = torch.autograd.grad(lm.probs(th) @ R, th)[0]
    >>> float((expected_score_sum(lm, lm.theta0, R) - g_auto).abs().max()) < 1e-15
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    v = _token_weights(lm, weights)
    logits = lm.logits(theta).detach()
    pi = torch.softmax(logits, -1)
    c = lm.probs(theta.detach())[:, None] * v
    rows, toks = lm.prefix_rows.reshape(-1), lm.tokens.reshape(-1)
    onehot_part = torch.zeros_like(pi).index_put_((rows, toks), c.reshape(-1), accumulate=True)
    mass = torch.zeros(lm.n_prefixes, dtype=pi.dtype).index_add_(0, rows, c.reshape(-1))
    return (onehot_part - mass[:, None] * pi).reshape(-1)


def score_estimator_moments(lm: TinyLM, theta: torch.Tensor, weights: torch.Tensor) -> ScoreMoments:
    r"""Exact mean, second moment and trace variance of :math:`\sum_t v_t s_t`.

    Examples
    --------
    The trace variance of REINFORCE, :math:`\operatorname{tr}\operatorname{Cov}[R\, s]`,
    against the dense computation:

    >>> from numeric import TinyLM, default_reward, score_estimator_moments, score_matrix
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> m = score_estimator_moments(lm, lm.theta0, R)
    >>> p, S = lm.probs(lm.theta0), score_matrix(lm, lm.theta0)
    >>> dense = float(p @ (R[:, None] * S).pow(2).sum(1) - (p @ (R[:, None] * S)).pow(2).sum())
    >>> abs(m.variance - dense) < 1e-13
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    mean = expected_score_sum(lm, theta, weights)
    v = _token_weights(lm, weights)
    p = lm.probs(theta.detach())
    second = float(p @ (v * v * token_score_sqnorms(lm, theta)).sum(1))
    return ScoreMoments(mean, second, second - float(mean @ mean))
