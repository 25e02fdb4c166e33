r"""The score function on the toy LM: the log-derivative trick in numbers.

:math:`\nabla_\theta J = \mathbb{E}_{\pi_\theta}[R\, s]` is computed three
independent ways — the derived formula (:func:`numeric.expected_score_sum`),
autograd of :math:`J(\theta) = \sum_o \pi_\theta(o) R(o)`, and central finite
differences — and :math:`\mathbb{E}_{\pi_\theta}[s] = 0` at every prefix.

When the integrand depends on :math:`\theta` (a KL penalty),
:func:`product_rule_terms` splits the gradient into the score term and the
direct term of :func:`derivations.score_function.product_rule`; stopping the
integrand's gradient keeps only the first.  :class:`TwoStepMDP` shows what a
fixed and a parametrised transition kernel contribute.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._validate import require_finite, require_int, require_real
from .checks import check, maxabs, suite
from .expectations import expected_score_sum
from .tinylm import TinyLM, check_lm, check_rewards, check_theta, default_reward, perturb, token_score_tensor

__all__ = ["TwoStepMDP", "autograd_gradient", "finite_difference_gradient", "log_ratio", "product_rule_terms"]


def autograd_gradient(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
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
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    rewards = check_rewards(lm, rewards)
    th = theta.detach().clone().requires_grad_(True)
    return torch.autograd.grad(lm.probs(th) @ rewards, th)[0]


def finite_difference_gradient(lm: TinyLM, theta: torch.Tensor, rewards: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
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
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    rewards = check_rewards(lm, rewards)
    if not (isinstance(h, float) and h > 0):
        raise ValueError(f"h must be a positive float, got {h!r}")
    theta = theta.detach()
    steps = h * torch.eye(lm.P, dtype=theta.dtype)
    J = torch.func.vmap(lambda th: lm.token_log_probs_from_logits(th.view(lm.n_prefixes, lm.V)).sum(1).exp() @ rewards)
    return (J(theta + steps) - J(theta - steps)) / (2 * h)


def log_ratio(lm: TinyLM, theta: torch.Tensor, ref_theta: torch.Tensor) -> torch.Tensor:
    r"""``[N]`` :math:`\log \pi_\theta(o) - \log \pi_{\mathrm{ref}}(o)` with :math:`\pi_{\mathrm{ref}}` fixed; differentiable in ``theta``.

    Its mean is :math:`\mathrm{KL}(\pi_\theta \,\|\, \pi_{\mathrm{ref}})`.

    Examples
    --------
    >>> from numeric import TinyLM, perturb
    >>> from numeric.score_function import log_ratio
    >>> lm = TinyLM()
    >>> ref = perturb(lm.theta0, 0.3, seed=1)
    >>> kl = lm.probs(lm.theta0) @ log_ratio(lm, lm.theta0, ref)
    >>> bool(kl > 0), float(log_ratio(lm, ref, ref).abs().max())
    (True, 0.0)
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    ref_theta = check_theta(lm, ref_theta, "ref_theta")
    return lm.sequence_log_prob(theta) - lm.sequence_log_prob(ref_theta).detach()


def product_rule_terms(
    lm: TinyLM, theta: torch.Tensor, integrand: Callable[[torch.Tensor], torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The score term and the direct term of :math:`\nabla_\theta \mathbb{E}_{\pi_\theta}[f_\theta]`.

    .. math::

        \nabla_\theta \mathbb{E}_{\pi_\theta}[f_\theta]
        = \underbrace{\mathbb{E}[f_\theta\, s]}_{\text{score term}}
        + \underbrace{\mathbb{E}[\nabla_\theta f_\theta]}_{\text{direct term}}

    (:func:`derivations.score_function.product_rule`).  The score term is
    what a surrogate with a stopped integrand, :math:`\sum_o \pi_\theta(o)
    \operatorname{sg}(f_\theta(o))`, differentiates to.

    Parameters
    ----------
    integrand : callable
        Maps ``theta`` (``[P]``) to ``[N]`` values :math:`f_\theta(o)`, differentiably.

    Examples
    --------
    With a log-ratio KL penalty the direct term is :math:`-\beta\,\mathbb{E}[s] = 0`:

    >>> from numeric import TinyLM, default_reward, perturb
    >>> from numeric.score_function import log_ratio, product_rule_terms
    >>> lm = TinyLM()
    >>> R, ref = default_reward(lm), perturb(lm.theta0, 0.3, seed=1)
    >>> score, direct = product_rule_terms(lm, lm.theta0, lambda th: R - 0.1 * log_ratio(lm, th, ref))
    >>> float(direct.abs().max()) < 1e-15
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    if not callable(integrand):
        raise TypeError(f"integrand must be a function of theta, got {type(integrand).__name__}")
    th = theta.detach().clone().requires_grad_(True)
    f = integrand(th)
    if not isinstance(f, torch.Tensor) or f.shape != (lm.N,):
        raise ValueError(f"integrand must return a tensor of shape ({lm.N},), one value per sequence")
    require_finite("integrand(theta)", f.detach())
    score = expected_score_sum(lm, theta, f.detach())
    if not f.requires_grad:  # f does not depend on theta
        return score, torch.zeros_like(score)
    (direct,) = torch.autograd.grad(lm.probs(theta.detach()) @ f, th)
    return score, direct


class TwoStepMDP:
    r"""A two-step MDP: the agent acts, the environment moves, the agent acts again.

    :math:`a \sim \pi_\theta = \operatorname{softmax}(\theta^{(1)})`,
    the state :math:`x' \sim P(\cdot \mid a) = \operatorname{softmax}(\Omega_a + \Upsilon\, \theta^{(2)}_{\cdot, a})`,
    the second action :math:`a' \sim \pi'_\theta(\cdot \mid x') = \operatorname{softmax}(\theta^{(2)}_{x'})`,
    reward :math:`R(a, x', a')`.  With ``coupling`` :math:`\Upsilon = 0` the kernel is
    fixed; otherwise it shares the second-step parameters.

    Parameters
    ----------
    K, M : int
        Numbers of actions and of states, at least 2 (``M == K`` when coupled).
    coupling : float
        :math:`\Upsilon`.
    seed : int
        Seed for :math:`\Omega`, :math:`R` and :attr:`theta0`.

    Examples
    --------
    The first action's marginal is the policy :math:`\operatorname{softmax}(\theta^{(1)})`:

    >>> import torch
    >>> from numeric.score_function import TwoStepMDP
    >>> mdp = TwoStepMDP(K=2, M=2, coupling=1.0)
    >>> p = mdp.trajectory_probs(mdp.theta0)   # [K, M, K]: (a, x', a')
    >>> float((p.sum((1, 2)) - torch.softmax(mdp.theta0[:2], -1)).abs().max()) < 1e-16
    True
    """

    def __init__(self, K: int = 2, M: int = 2, coupling: float = 0.0, seed: int = 0) -> None:
        self.K = require_int("K", K, minimum=2)
        self.M = require_int("M", M, minimum=2)
        self.coupling = require_real("coupling", coupling)
        if self.coupling != 0.0 and self.M != self.K:
            raise ValueError(f"M must equal K when the kernel is coupled, got K={K}, M={M}")
        gen = torch.Generator().manual_seed(require_int("seed", seed))
        self.omega = torch.randn(self.K, self.M, generator=gen, dtype=torch.float64)
        self.reward = torch.rand(self.K, self.M, self.K, generator=gen, dtype=torch.float64)
        self.P = self.K + self.M * self.K
        self.theta0 = torch.randn(self.P, generator=gen, dtype=torch.float64)

    def _theta(self, theta) -> torch.Tensor:
        """``theta`` as a finite real float64 ``[P]`` tensor, else a named error."""
        if not isinstance(theta, torch.Tensor):
            raise TypeError(f"theta must be a torch.Tensor, got {type(theta).__name__}")
        if theta.is_complex() or not theta.is_floating_point():
            raise TypeError(f"theta must be a real floating-point tensor, got {theta.dtype}")
        if theta.shape != (self.P,):
            raise ValueError(f"theta must be a torch.Tensor of shape ({self.P},), got {tuple(theta.shape)}")
        if not bool(torch.isfinite(theta.detach()).all()):
            raise ValueError("theta must be finite (no NaN or inf)")
        return theta.to(device="cpu", dtype=torch.float64)

    def _split(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        theta = self._theta(theta)
        return theta[: self.K], theta[self.K :].view(self.M, self.K)

    def log_kernel(self, theta: torch.Tensor) -> torch.Tensor:
        r"""``[K, M]`` :math:`\log P(x' \mid a)`."""
        _, th2 = self._split(theta)
        shared = th2.T if self.coupling != 0.0 else torch.zeros_like(self.omega)
        return torch.log_softmax(self.omega + self.coupling * shared, -1)

    def trajectory_probs(self, theta: torch.Tensor) -> torch.Tensor:
        r"""``[K, M, K]`` :math:`p_\theta(a, x', a') = \pi_a P(x' \mid a) \pi'(a' \mid x')`."""
        th1, th2 = self._split(theta)
        logp = torch.log_softmax(th1, -1)[:, None, None] + self.log_kernel(theta)[:, :, None]
        return (logp + torch.log_softmax(th2, -1)[None, :, :]).exp()

    def policy_score_gradient(self, theta: torch.Tensor) -> torch.Tensor:
        r"""``[P]`` :math:`\mathbb{E}[R\,(\nabla \log \pi_a + \nabla \log \pi'_{a' \mid x'})]` from the closed-form softmax scores."""
        theta = self._theta(theta)
        th1, th2 = self._split(theta.detach())
        w = self.trajectory_probs(theta.detach()) * self.reward
        pi1, pi2 = torch.softmax(th1, -1), torch.softmax(th2, -1)
        g1 = w.sum((1, 2)) - w.sum() * pi1
        g2 = w.sum(0) - w.sum((0, 2))[:, None] * pi2
        return torch.cat([g1, g2.reshape(-1)])

    def kernel_score_gradient(self, theta: torch.Tensor) -> torch.Tensor:
        r"""``[P]`` :math:`\mathbb{E}[R\, \nabla \log P_\theta(x' \mid a)]`, the kernel's own term."""
        theta = self._theta(theta)
        th = theta.detach().clone().requires_grad_(True)
        w = (self.trajectory_probs(theta.detach()) * self.reward).sum(2)
        return torch.autograd.grad((w * self.log_kernel(th)).sum(), th)[0]

    def objective_gradient(self, theta: torch.Tensor) -> torch.Tensor:
        r"""``[P]`` :math:`\nabla_\theta \sum_\tau p_\theta(\tau) R(\tau)` by autograd through the definition."""
        theta = self._theta(theta)
        th = theta.detach().clone().requires_grad_(True)
        return torch.autograd.grad((self.trajectory_probs(th) * self.reward).sum(), th)[0]


@suite("score_function")
def cross_checks() -> None:
    """The log-derivative trick and the zero-mean score on TinyLM(V=4, L=4, seed=0)."""
    lm = TinyLM(V=4, L=4, seed=0)
    R = default_reward(lm)
    theta = lm.theta0
    g = expected_score_sum(lm, theta, R)
    check("log-derivative formula E[R s] == autograd of J", maxabs(g, autograd_gradient(lm, theta, R)), 1e-14)
    check("log-derivative formula E[R s] == central finite differences", maxabs(g, finite_difference_gradient(lm, theta, R)), 1e-9)
    count = ((lm.tokens == 1).to(torch.float64) * lm.mask).sum(1)  # a non-binary reward, 0..L
    check("log-derivative formula E[R s] == autograd of J, R = the count of token 1 (non-binary)", maxabs(expected_score_sum(lm, theta, count), autograd_gradient(lm, theta, count)), 1e-14)
    ones = torch.ones(lm.N)
    check("E[s] = 0 (every coordinate)", float(expected_score_sum(lm, theta, ones).abs().max()), 1e-14)
    check("E[s_t | o_<t] = 0 at each prefix (closed-form token scores, weighted by pi(a | prefix))", _conditional_score_means(lm, theta), 1e-14)

    # the product rule when the integrand depends on theta: a KL penalty
    ref, beta = perturb(theta, 0.5, seed=1), 0.1
    kl_penalised = lambda th: R - beta * log_ratio(lm, th, ref)
    score, direct = product_rule_terms(lm, theta, kl_penalised)
    th = theta.clone().requires_grad_(True)
    full = torch.autograd.grad(lm.probs(th) @ kl_penalised(th), th)[0]
    check("product rule: score term + direct term == autograd of E[R - beta log(pi/pi_ref)]", maxabs(score + direct, full), 1e-14)
    check("log-ratio KL penalty: direct term -beta E[s] == 0", float(direct.abs().max()), 1e-14)
    squared = lambda th: R - 0.5 * beta * log_ratio(lm, th, ref) ** 2
    score, direct = product_rule_terms(lm, theta, squared)
    stopped = torch.autograd.grad(lm.probs(th) @ squared(th).detach(), th)[0]
    full = torch.autograd.grad(lm.probs(th) @ squared(th), th)[0]
    check("stop-gradient on the integrand == full gradient - direct term (squared log-ratio)", maxabs(stopped, full - direct), 1e-14)
    kl_grad = torch.autograd.grad(lm.probs(th) @ log_ratio(lm, th, ref), th)[0]
    check("squared log-ratio: direct term == -beta grad KL(pi||pi_ref)", maxabs(direct, -beta * kl_grad), 1e-14)
    by_scores = expected_score_sum(lm, theta, -beta * log_ratio(lm, theta, ref).detach())
    check("squared log-ratio: direct term == E[-beta log(pi/pi_ref) s] (grad f = -beta log(pi/pi_ref) s; score sums, no autograd)", maxabs(direct, by_scores), 1e-14)

    # what the environment contributes, in a two-step MDP
    fixed, coupled = TwoStepMDP(coupling=0.0, seed=3), TwoStepMDP(coupling=1.0, seed=3)
    th0 = fixed.theta0
    check("fixed kernel: autograd of J == E[R (policy scores)]", maxabs(fixed.objective_gradient(th0), fixed.policy_score_gradient(th0)), 1e-14)
    extra = coupled.objective_gradient(th0) - coupled.policy_score_gradient(th0)
    check("parametrised kernel: autograd - policy-score term == E[R grad log P_theta]", maxabs(extra, coupled.kernel_score_gradient(th0)), 1e-14)
    check("parametrised kernel: E[R grad log P_theta] == Upsilon (Phi(a,x') - Phi(a) P(x'|a)) (softmax closed form)", maxabs(extra, _kernel_term_closed_form(coupled, th0)), 1e-14)


def _conditional_score_means(lm: TinyLM, theta: torch.Tensor) -> float:
    r"""Largest :math:`|\sum_a \pi(a \mid h)\, s(h, a)|` over prefixes :math:`h`, from :func:`token_score_tensor`.

    Every token slot :math:`(n, t)` with prefix :math:`h` and token :math:`a` holds the same score
    :math:`s(h, a)`; each is weighted by :math:`\pi(a \mid h)` over its number of copies.
    """
    T = token_score_tensor(lm, theta)
    live = lm.mask > 0
    rows, toks = lm.prefix_rows[live], lm.tokens[live]
    copies = torch.zeros(lm.n_prefixes, lm.V).index_put_((rows, toks), torch.ones(len(rows)), accumulate=True)
    pi = torch.softmax(lm.logits(theta), -1)
    w = pi[rows, toks] / copies[rows, toks]
    means = torch.zeros(lm.n_prefixes, lm.P).index_add_(0, rows, w[:, None] * T[live])
    return float(means.abs().max())


def _kernel_term_closed_form(mdp: TwoStepMDP, theta: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathbb{E}[R\,\nabla\log P_\theta(x' \mid a)]` from the softmax score of the kernel, no autograd.

    :math:`\partial \log P(x' \mid a) / \partial \theta^{(2)}_{j, a''} = \Upsilon\, [a = a''] ([x' = j] - P(j \mid a))`,
    so the :math:`(j, a)` entry is :math:`\Upsilon\,(\Phi(a, j) - \Phi(a) P(j \mid a))` with
    :math:`\Phi(a, x') = \sum_{a'} p(a, x', a') R(a, x', a')` and :math:`\Phi(a) = \sum_{x'} \Phi(a, x')`;
    the first-step block is zero.
    """
    Phi = (mdp.trajectory_probs(theta) * mdp.reward).sum(2)  # [K, M]
    P = mdp.log_kernel(theta).exp()  # [K, M]
    block = mdp.coupling * (Phi - Phi.sum(1, keepdim=True) * P)  # [a, m]
    return torch.cat([torch.zeros(mdp.K, dtype=block.dtype), block.T.reshape(-1)])
