r"""The score function on the toy LM: the log-derivative trick in numbers.

:math:`\nabla_\theta J = \mathbb{E}_{\pi_\theta}[R\, s]` is computed three
independent ways — the derived formula (:func:`numeric.expected_score_sum`),
autograd of :math:`J(\theta) = \sum_o \pi_\theta(o) R(o)`, and central finite
differences — and :math:`\mathbb{E}_{\pi_\theta}[s] = 0` at every prefix.
"""

from __future__ import annotations

import torch

from .checks import check, maxabs, suite
from .expectations import expected_score_sum
from .tinylm import TinyLM, _check_lm, default_reward

__all__ = ["autograd_gradient", "finite_difference_gradient"]


def autograd_gradient(lm: TinyLM, theta: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    r""":math:`\nabla_\theta \sum_o \pi_\theta(o) R(o)` by autograd through the definition.

    Examples
    --------
    >>> from numeric import TinyLM, default_reward, expected_score_sum
    >>> from numeric.score_function import autograd_gradient
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> g = autograd_gradient(lm, lm.theta0, R)
    >>> float((g - expected_score_sum(lm, lm.theta0, R)).abs().max()) < 1e-15
    True
    """
    lm = _check_lm(lm)
    reward = _check_reward(lm, reward)
    th = theta.detach().clone().requires_grad_(True)
    return torch.autograd.grad(lm.probs(th) @ reward, th)[0]


def finite_difference_gradient(lm: TinyLM, theta: torch.Tensor, reward: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
    r"""Central differences :math:`(J(\theta + h e_i) - J(\theta - h e_i)) / 2h`, all ``i`` at once.

    Error :math:`O(h^2)` plus rounding :math:`O(\epsilon / h)`: about
    :math:`10^{-10}` at the default ``h``.

    Examples
    --------
    >>> from numeric import TinyLM, default_reward
    >>> from numeric.score_function import autograd_gradient, finite_difference_gradient
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> err = (finite_difference_gradient(lm, lm.theta0, R) - autograd_gradient(lm, lm.theta0, R)).abs().max()
    >>> float(err) < 1e-8
    True
    """
    lm = _check_lm(lm)
    reward = _check_reward(lm, reward)
    if not (isinstance(h, float) and h > 0):
        raise ValueError(f"h must be a positive float, got {h!r}")
    theta = theta.detach()
    steps = h * torch.eye(lm.P, dtype=theta.dtype)
    J = torch.func.vmap(lambda th: lm.probs(th) @ reward)
    return (J(theta + steps) - J(theta - steps)) / (2 * h)


def _check_reward(lm: TinyLM, reward) -> torch.Tensor:
    if not isinstance(reward, torch.Tensor):
        raise TypeError(f"reward must be a torch.Tensor, got {type(reward).__name__}")
    if reward.shape != (lm.N,):
        raise ValueError(f"reward must have shape ({lm.N},), one number per sequence; got {tuple(reward.shape)}")
    if not bool(torch.isfinite(reward).all()):
        raise ValueError("reward must be finite (no NaN or inf)")
    return reward.to(torch.float64)


@suite("score_function")
def cross_checks() -> None:
    """The log-derivative trick and the zero-mean score on TinyLM(V=4, L=4, seed=0)."""
    lm = TinyLM(V=4, L=4, seed=0)
    R = default_reward(lm)
    theta = lm.theta0
    g = expected_score_sum(lm, theta, R)
    check("log-derivative formula E[R s] == autograd of J", maxabs(g, autograd_gradient(lm, theta, R)), 1e-14)
    check("log-derivative formula E[R s] == central finite differences", maxabs(g, finite_difference_gradient(lm, theta, R)), 1e-8)
    ones = torch.ones(lm.N)
    check("E[s] = 0 (every coordinate)", float(expected_score_sum(lm, theta, ones).abs().max()), 1e-14)
    worst = max(
        float((lm.cond_probs(theta, h) @ (torch.eye(lm.V) - lm.cond_probs(theta, h))).abs().max())
        for h in lm.prefixes()
    )
    check("E[s | prefix] = 0 at each prefix", worst, 1e-14)
