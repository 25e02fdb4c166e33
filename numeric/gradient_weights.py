r"""Gradient weights on the toy LM, the batched PPO/CISPO paths, and the PPO diagnostics.

Every clipped surrogate has a per-token gradient
:math:`-\,w(r_t, A_t)\, A_t\, \nabla_\theta \log\pi_\theta(o_t \mid o_{<t})`; the weights
:math:`w` are derived in :mod:`derivations.gradient_weights` and evaluated here by
``lambdify`` (:func:`gradient_weight`).  The suite ``gradient_weights`` checks them
against autograd of the actual losses on :class:`~numeric.TinyLM`, shows which
tokens PPO silences and CISPO keeps, runs the fork-token experiment, and checks the
vectorised masked loss against a per-token loop.

Clip ranges
-----------
``eps_low`` and ``eps_high`` are :math:`\varepsilon_l` and :math:`\varepsilon_h`; the
clip interval is :math:`[1-\varepsilon_l,\ 1+\varepsilon_h]`,
:math:`0 \le \varepsilon_l \le 1`, :math:`\varepsilon_h \ge 0`, and
:math:`\varepsilon_h = \infty` is allowed (no upper clip).  CISPO's
``eps_low=None`` is its one-sided cap.  Every function checks them with the
validators :func:`numeric.policy_loss` uses.

Batched helpers take numpy arrays or torch tensors ``[batch, time]`` (any shape,
all aligned) and return the caller's kind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic

import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations.methods import FORMS, form

from ._types import Array, ArrayT
from ._validate import (
    compute_dtype,
    like,
    masked_inputs,
    method_options,
    require_int,
    require_nonnegative,
    require_ratio,
    require_real,
    require_same_device,
    require_same_shape,
    result_dtype,
    to_tensor,
)
from .checks import check, maxabs, suite
from .losses.penalties import kl_estimate
from .losses.policy import derived_weight, policy_loss, token_terms
from .tinylm import TinyLM, default_reward, perturb

__all__ = [
    "ForkTrajectory",
    "PPODiagnostics",
    "PPOTerms",
    "fork_token",
    "gradient_weight",
    "ppo_clipped_terms",
    "ppo_diagnostics",
    "ppo_loss",
]


# ------------------------------------------------------------------ inputs


def _aligned(**arrays) -> tuple[dict[str, torch.Tensor], str]:
    """Tensors of the same shape, all finite, on the first one's device and in its compute dtype; the first one's kind."""
    tensors, _, kind = masked_inputs(None, **arrays)
    return tensors, kind


def _ratio_and_advantages(ratio, advantages) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Aligned ratios (>= 0, 0 and ``inf`` allowed: an exp that under- or overflowed) and finite advantages."""
    r, kind = to_tensor("ratio", ratio)
    require_ratio("ratio", r)
    (a,) = _aligned(advantages=advantages)[0].values()
    require_same_shape(ratio=r, advantages=a)
    require_same_device(ratio=r, advantages=a)
    return r.to(compute_dtype(r.dtype)), a.to(compute_dtype(r.dtype)), kind


# ----------------------------------------------------------------- weights


def gradient_weight(method: str, ratio: ArrayT, advantages: Array, **params: float | tuple[float, float] | None) -> ArrayT:
    r"""The derived gradient weight :math:`w(r, A)` of a per-token ``method``, elementwise.

    The per-token loss gradient is :math:`-\,w(r, A)\, A\, \nabla_\theta\log\pi_\theta`:

    .. math::

        &w_{\mathrm{PPO}} = r\,\mathbb 1\bigl[(A > 0,\ r \le 1+\varepsilon_h) \lor (A < 0,\ r \ge 1-\varepsilon_l)\bigr], \\
        &w_{\mathrm{CISPO}} = \mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h)\ \ (\min(r, 1+\varepsilon_h) \text{ with } \varepsilon_l = \texttt{None}),
        \qquad w_{\mathrm{IS}} = r;

    PPO with ``dual_clip`` :math:`C_d` also silences :math:`A < 0,\ r > C_d`.  The
    formula is :func:`derivations.losses.weight` of the form
    :func:`derivations.methods.form` picks, lambdified once
    (:func:`numeric.losses.policy.derived_weight`, which :func:`numeric.policy_weight` uses too).

    Parameters
    ----------
    method : str
        A per-token method of :data:`derivations.methods.METHODS` (not GSPO or GMPO).
    ratio : numpy array or torch tensor
        The importance ratios :math:`r \ge 0` (0 and ``inf``, an exp that under-
        or overflowed, are ratios too).
    advantages : numpy array or torch tensor
        The advantages :math:`A`, finite, aligned with ``ratio``.
    **params
        The method's parameters, as :func:`numeric.policy_loss` takes them
        (``eps_low``, ``eps_high``, ``dual_clip``, ``sapo_tau``), checked the same way.

    Returns
    -------
    Same kind, shape and dtype as ``ratio``.

    References
    ----------
    MiniMax, "MiniMax-M1", arXiv:2506.13585 (2025), Sec. 3.1.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import gradient_weight
    >>> r = np.array([0.5, 1.0, 2.0])
    >>> A = np.array([1.0, 1.0, 1.0])
    >>> gradient_weight("ppo", r, A, eps_low=0.2, eps_high=0.28).tolist()
    [0.5, 1.0, 0.0]
    >>> gradient_weight("cispo", r, -A, eps_low=None, eps_high=0.28).tolist()
    [0.5, 1.0, 1.28]
    """
    options = method_options(method, params)
    name = form(method, **params)
    r, a, kind = _ratio_and_advantages(ratio, advantages)
    w = derived_weight(name, r, a, options)
    return like(kind, w.to(r.device, result_dtype(ratio)))


# -------------------------------------------------------------- PPO terms


@dataclass(frozen=True)
class PPOTerms(Generic[ArrayT]):
    r"""The three PPO terms, elementwise: :math:`rA`, :math:`\mathrm{clip}(r)A`, and their minimum."""

    unclipped: ArrayT
    clipped: ArrayT
    pessimistic: ArrayT


def ppo_clipped_terms(ratio: ArrayT, advantages: Array, *, eps_low: float = 0.2, eps_high: float = 0.2) -> PPOTerms[ArrayT]:
    r"""PPO's unclipped, clipped and pessimistic terms (objective, to be maximised).

    .. math::

        u = rA, \qquad
        v = \mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h)\,A, \qquad
        \min(u, v).

    Parameters
    ----------
    ratio : numpy array or torch tensor
        The ratios :math:`r \ge 0` (0 and ``inf`` allowed: the unclipped term
        :math:`rA` is then 0 where :math:`A = 0`, its exact value); the terms are
        differentiable in it.
    advantages : numpy array or torch tensor
        The advantages :math:`A`, finite, aligned with ``ratio``.
    eps_low : float
        :math:`\varepsilon_l \in [0, 1]`, the clip's low side, checked as :func:`numeric.policy_loss` checks it.
    eps_high : float
        :math:`\varepsilon_h \ge 0`, the clip's high side.

    Returns
    -------
    PPOTerms
        ``unclipped``, ``clipped``, ``pessimistic``, each of ``ratio``'s kind, device and dtype.

    References
    ----------
    J. Schulman et al., "Proximal Policy Optimization Algorithms", arXiv:1707.06347 (2017).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import ppo_clipped_terms
    >>> terms = ppo_clipped_terms(np.array([1.5, 0.5, 1.5, 0.5]), np.array([1.0, 1.0, -1.0, -1.0]), eps_low=0.2, eps_high=0.2)
    >>> terms.pessimistic.round(6).tolist()
    [1.2, 0.5, -1.5, -0.8]
    """
    options = method_options("ppo", {"eps_low": eps_low, "eps_high": eps_high})
    low, high = options["eps_low"], options["eps_high"]
    r, a, kind = _ratio_and_advantages(ratio, advantages)
    unclipped = torch.where(a == 0, torch.zeros_like(r), r) * a  # 0 * inf would be NaN; the exact value is 0
    clipped = torch.clamp(r, min=1 - low, max=1 + high) * a
    pessimistic = torch.minimum(unclipped, clipped)
    dtype = result_dtype(ratio)
    return PPOTerms(*(like(kind, x.to(dtype)) for x in (unclipped, clipped, pessimistic)))


@dataclass(frozen=True)
class PPODiagnostics:
    r"""Four numbers to watch during PPO updates (fractions over the masked tokens).

    ``ratio_outside_fraction``
        tokens with :math:`r \notin [1-\varepsilon_l, 1+\varepsilon_h]`;
    ``active_clip_fraction``
        tokens where the pessimistic minimum differs from the unclipped term
        (the clip actually changes the objective; exactly PPO's silenced tokens);
    ``kl``
        mean of :math:`k_3 = (r - 1) - \log r \ge 0`, an estimate of
        :math:`\mathrm{KL}(\pi_{\text{old}}\,\|\,\pi_\theta)` from samples of :math:`\pi_{\text{old}}`;
    ``mean_log_ratio``
        mean of :math:`\log r`, the (sign-indefinite) :math:`-k_1` estimate.
    """

    ratio_outside_fraction: float
    active_clip_fraction: float
    kl: float
    mean_log_ratio: float


def ppo_diagnostics(log_prob: Array, old_log_prob: Array, advantages: Array, mask: Array | None = None, *, eps_low: float = 0.2, eps_high: float = 0.2) -> PPODiagnostics:
    r"""Clip fractions and KL estimates of one PPO batch.

    With :math:`r = e^{\log\pi_\theta - \log\pi_{\text{old}}}` over the masked tokens:

    .. math::

        &\mathtt{ratio\_outside} = \operatorname{mean}\,\mathbb 1[r \notin [1-\varepsilon_l, 1+\varepsilon_h]], \qquad
        \mathtt{active\_clip} = \operatorname{mean}\,\mathbb 1[\min(rA, \mathrm{clip}(r)A) < rA], \\
        &\mathtt{kl} = \operatorname{mean}\,\bigl((r - 1) - \log r\bigr), \qquad
        \mathtt{mean\_log\_ratio} = \operatorname{mean}\,\log r.

    ``kl`` is :math:`k_3` (:func:`numeric.losses.kl_estimate`, the one definition of
    the estimators): non-negative for every batch and unbiased for
    :math:`\mathrm{KL}(\pi_{\text{old}}\,\|\,\pi_\theta)` when the tokens are
    drawn from :math:`\pi_{\text{old}}`; a finite batch gives an estimate, not a bound.

    Parameters
    ----------
    log_prob : numpy array or torch tensor
        :math:`\log\pi_\theta` of each token, finite where ``mask`` is 1.
    old_log_prob : numpy array or torch tensor
        :math:`\log\pi_{\mathrm{old}}` of each token, aligned, finite where ``mask`` is 1.
    advantages : numpy array or torch tensor
        The advantages, aligned, finite where ``mask`` is 1.
    mask : numpy array or torch tensor, optional
        0/1 or boolean, aligned; ``None`` keeps every token.  At least one token
        must be kept (a mean over no token has no value, so an all-masked batch
        raises).  Masked slots may hold anything.
    eps_low : float
        The clip's low side :math:`\varepsilon_l`, as in :func:`numeric.policy_loss`.
    eps_high : float
        The clip's high side :math:`\varepsilon_h`.

    Returns
    -------
    PPODiagnostics

    Examples
    --------
    Ratios :math:`(1.5, 0.5, 1.5, 0.5)` with advantages :math:`(+1, +1, -1, -1)` and
    :math:`\varepsilon = 0.2`: every ratio is outside :math:`[0.8, 1.2]`, but the clip
    changes the minimum only in the first and fourth rows.

    >>> import numpy as np
    >>> from numeric import ppo_diagnostics
    >>> old = np.log(np.full(4, 0.2))
    >>> new = old + np.log([1.5, 0.5, 1.5, 0.5])
    >>> d = ppo_diagnostics(new, old, np.array([1.0, 1.0, -1.0, -1.0]))
    >>> d.ratio_outside_fraction, d.active_clip_fraction, round(d.kl, 6), round(d.mean_log_ratio, 6)
    (1.0, 0.5, 0.143841, -0.143841)
    """
    t, m, _ = masked_inputs(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    m = torch.ones_like(t["advantages"]) if m is None else _mask01(m).to(t["advantages"])
    log_ratio = (t["log_prob"] - t["old_log_prob"]).detach()
    ratio = log_ratio.exp()
    terms = ppo_clipped_terms(ratio, t["advantages"].detach(), eps_low=eps_low, eps_high=eps_high)
    unclipped, pessimistic = terms.unclipped, terms.pessimistic
    mean = lambda x: float((x.to(m.dtype) * m).sum() / m.sum())
    return PPODiagnostics(
        ratio_outside_fraction=mean((ratio < 1 - eps_low) | (ratio > 1 + eps_high)),
        active_clip_fraction=mean(pessimistic < unclipped),
        kl=mean(kl_estimate(-log_ratio, "k3")),
        mean_log_ratio=mean(log_ratio),
    )


def _mask01(m: torch.Tensor) -> torch.Tensor:
    """A boolean mask that selects at least one token."""
    if not bool(m.any()):
        raise ValueError("mask must select at least one token")
    return m


# --------------------------------------------------------------- the loss


def ppo_loss(log_prob: ArrayT, old_log_prob: Array, advantages: Array, mask: Array, *, eps_low: float = 0.2, eps_high: float = 0.2, dual_clip: float | None = None) -> ArrayT:
    r"""Token-level PPO/GRPO loss: :math:`-\frac{1}{\sum m}\sum_{i,t} m_{it}\min(r_{it}A_{it}, \mathrm{clip}(r_{it})A_{it})`.

    ``policy_loss("ppo", ...)`` with token-mean, by name: one code path
    (:func:`numeric.policy_loss` has every method and aggregation mode).  The
    caller's kind, device and dtype (fp32, bf16, fp64) in and out, computed in
    at least fp32; ``old_log_prob`` and ``advantages`` are detached.  Masked
    slots may hold anything (``-inf``, padding sentinels) and enter neither the
    loss nor its gradient; a batch with no unmasked token gives 0 with a zero
    gradient (verl's ``masked_mean`` convention).

    Parameters
    ----------
    log_prob : numpy array or torch tensor
        ``[batch, time]`` :math:`\log\pi_\theta`; the loss is differentiable in it.
    old_log_prob : numpy array or torch tensor
        ``[batch, time]`` :math:`\log\pi_{\text{old}}` of each token (detached).
    advantages : numpy array or torch tensor
        ``[batch]`` (one per sequence, broadcast) or ``[batch, time]``.
    mask : numpy array or torch tensor
        ``[batch, time]`` 0/1 or boolean response mask (required).
    eps_low : float
        The clip's low side :math:`\varepsilon_l`, as in :func:`numeric.policy_loss`.
    eps_high : float
        The clip's high side :math:`\varepsilon_h`.
    dual_clip : float, optional
        The dual-clip constant :math:`C_d`, as in :func:`numeric.policy_loss`.

    Examples
    --------
    >>> import torch
    >>> from numeric import ppo_loss
    >>> lp = torch.log(torch.tensor([[0.3, 0.6]])).requires_grad_(True)
    >>> old = torch.log(torch.tensor([[0.2, 0.5]]))
    >>> loss = ppo_loss(lp, old, torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 1.0]]))
    >>> round(loss.item(), 6), torch.autograd.grad(loss, lp)[0].round(decimals=6).tolist()
    (-1.2, [[0.0, -0.6]])
    """
    return policy_loss("ppo", log_prob, old_log_prob, advantages, mask, agg="token-mean", eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip)


# -------------------------------------------------------------- fork token


@dataclass(frozen=True)
class ForkTrajectory:
    r"""The rare token's probability after each update, and the weight on its own term before it."""

    rare_prob: torch.Tensor
    rare_weight: torch.Tensor


def fork_token(method: str, *, steps: int = 16, lr: float = 30.0, p_rare: float = 0.01, eps_low: float | None = 0.2, eps_high: float = 0.28) -> ForkTrajectory:
    r"""The fork-token experiment: many off-policy updates on one decision.

    One state with three tokens, :math:`\pi_{\text{old}} = (0.6, 0.39, 0.01)`
    (``p_rare`` for the third, the rest renormalised), reward 1 only for the rare
    token, advantage :math:`A = R - \mathbb{E}_{\pi_{\text{old}}}[R]`.  Each of
    ``steps`` updates is a gradient-ascent step of size ``lr`` on the logits of
    the exact objective :math:`\sum_a \pi_{\text{old}}(a)\,(-\mathrm{loss}_a)`
    (the per-token losses of :func:`numeric.policy_loss`, one code path: PPO's
    pessimistic term; CISPO's :math:`\mathrm{sg}(\mathrm{clip}(r)) A \log\pi`, or with
    ``eps_low=None`` :math:`\mathrm{sg}(\min(r, 1+\varepsilon_h)) A \log\pi`).
    Once the rare token's ratio passes :math:`1+\varepsilon_h`, PPO gives it
    weight 0; CISPO keeps :math:`1+\varepsilon_h`.

    Parameters
    ----------
    method : {"ppo", "cispo"}
    steps : int
    lr : float
    p_rare : float
        :math:`\pi_{\text{old}}` of the rare token, in (0, 1).
    eps_low : float or None
        The clip's low side, checked as :func:`numeric.policy_loss` checks it (``None``: CISPO's one-sided cap).
    eps_high : float
        The clip's high side.

    Returns
    -------
    ForkTrajectory
        ``rare_prob[k]`` after update ``k + 1``; ``rare_weight[k]`` the derived
        :math:`w(r, A)` of the rare token at update ``k + 1``.

    References
    ----------
    MiniMax, "MiniMax-M1", arXiv:2506.13585 (2025), Sec. 3.1 (fork tokens).

    Examples
    --------
    PPO silences the rare token exactly at the updates where its ratio before the update
    exceeds :math:`1 + \varepsilon_h = 1.28`; CISPO never does:

    >>> import torch
    >>> from numeric import fork_token
    >>> ppo, cispo = fork_token("ppo"), fork_token("cispo")
    >>> ratio_before = torch.cat([torch.tensor([0.01], dtype=torch.float64), ppo.rare_prob[:-1]]) / 0.01
    >>> bool(((ppo.rare_weight == 0) == (ratio_before > 1.28)).all()), int((cispo.rare_weight == 0).sum())
    (True, 0)
    """
    if method not in ("ppo", "cispo"):
        raise ValueError(f"method must be 'ppo' or 'cispo', got {method!r}")
    steps = require_int("steps", steps, minimum=1)
    lr = require_nonnegative("lr", lr)
    p_rare = require_real("p_rare", p_rare)
    if not 0 < p_rare < 1:
        raise ValueError(f"p_rare must lie in (0, 1), got {p_rare}")
    params = {"eps_low": eps_low, "eps_high": eps_high}
    options = method_options(method, params)
    pi_old = torch.tensor([0.6, 0.39, p_rare], dtype=torch.float64)
    pi_old = pi_old / pi_old.sum()
    reward = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    adv = reward - pi_old @ reward
    z = pi_old.log().clone().requires_grad_(True)
    probs, weights = [], []
    for _ in range(steps):
        log_pi = torch.log_softmax(z, 0)
        delta = log_pi - pi_old.log()
        per_token = -token_terms(method, log_pi, delta, adv, None, options)  # the objective, to be maximised
        grad = torch.autograd.grad(pi_old @ per_token, z)[0]
        weights.append(gradient_weight(method, delta.detach().exp(), adv, **params)[2])
        with torch.no_grad():
            z += lr * grad
        probs.append(torch.softmax(z.detach(), 0)[2])
    return ForkTrajectory(torch.stack(probs), torch.stack(weights))


# -------------------------------------------------------------- the checks

EPS_LOW, EPS_HIGH, DUAL_CLIP = 0.2, 0.28, 3.0


class _Setting:
    """The seed's setting: TinyLM(4, 4), outcome advantages R - E[R], a perturbed theta."""

    def __init__(self):
        self.lm = lm = TinyLM(V=4, L=4, seed=0)
        self.theta_old = lm.theta0
        self.q = lm.probs(self.theta_old)
        R = default_reward(lm)
        self.A = (R - self.q @ R)[:, None] * lm.mask
        self.lp_old = lm.token_log_probs(self.theta_old)
        self.theta = perturb(self.theta_old, 1.5, seed=11)

    def ratio(self, theta):
        """``[N, L]`` ratios and log-probs at theta; ratio 1 on padding."""
        lp = self.lm.token_log_probs(theta)
        return (lp - self.lp_old).exp() * self.lm.mask + (1 - self.lm.mask), lp

    def loss(self, method: str, theta, eps_high=EPS_HIGH):
        """Exact expected loss over the old policy's sequences (autograd-able)."""
        r, lp = self.ratio(theta)
        A, m, q = self.A, self.lm.mask, self.q[:, None]
        if method in ("ppo", "ppo_dual_clip"):
            f = ppo_clipped_terms(r, A, eps_low=EPS_LOW, eps_high=eps_high).pessimistic
            if method == "ppo_dual_clip":
                f = torch.where(A < 0, torch.maximum(f, DUAL_CLIP * A), f)
        elif method == "cispo_cap":
            f = torch.clamp(r, max=1 + eps_high).detach() * A * lp
        else:
            f = r.detach() * A * lp
        return -(q * f * m).sum()

    def grad(self, method: str, theta, **kw):
        th = theta.detach().clone().requires_grad_(True)
        return torch.autograd.grad(self.loss(method, th, **kw), th)[0]

    def grad_from_weights(self, w, theta):
        """:math:`-\\sum_{o,t} q(o)\\, w\\, A\\, \\nabla\\log\\pi_\\theta(o_t \\mid o_{<t})`."""
        th = theta.detach().clone().requires_grad_(True)
        lp = self.lm.token_log_probs(th)
        return -torch.autograd.grad((self.q[:, None] * w * self.A * lp * self.lm.mask).sum(), th)[0]

    def weights(self, method: str, theta):
        """The derived weights of the form ``method`` (:data:`derivations.gradient_weights.METHODS`) at every token."""
        r, _ = self.ratio(theta)
        return gradient_weight(FORMS[method].method, r.detach(), self.A, **form_parameters(method))


def form_parameters(name: str) -> dict:
    """The parameters of :func:`numeric.policy_loss` that select the form ``name`` at the setting's constants (eps_low 0.2, eps_high 0.28, dual_clip 3).

    Examples
    --------
    >>> from numeric.gradient_weights import form_parameters
    >>> form_parameters("ppo_dual_clip"), form_parameters("cispo_cap")
    ({'eps_low': 0.2, 'eps_high': 0.28, 'dual_clip': 3.0}, {'eps_low': None, 'eps_high': 0.28})
    """
    f = FORMS[name]
    values = {gw.eps_l: EPS_LOW, gw.c: DUAL_CLIP}
    taken = method_options(f.method, {})
    params = {k: v for k, v in {"eps_low": EPS_LOW, "eps_high": EPS_HIGH, "dual_clip": None}.items() if k in taken}
    params.update({k: (None if v is None else values[v]) for k, v in f.options.items()})
    return params


@lru_cache(maxsize=1)
def setting() -> _Setting:
    r"""The shared setting of the gradient-weight and trust-region suites (built once).

    TinyLM(4, 4, seed=0), :math:`\theta_{\text{old}} = \theta_0`, outcome advantages
    :math:`A = R - \mathbb{E}_{\text{old}}[R]` on every token, and the current
    :math:`\theta` = ``perturb(theta_old, 1.5, seed=11)``.  ``s.grad(method, theta)``
    is autograd of the exact expected loss; ``s.weights(method, theta)`` the derived
    weights at every token.

    Examples
    --------
    >>> from numeric.gradient_weights import setting
    >>> s = setting()
    >>> abs(float(s.q @ s.A[:, 0])) < 1e-15   # advantages centred under the old policy
    True
    """
    return _Setting()


def silenced_cells(s: _Setting) -> dict[str, torch.Tensor]:
    r"""Boolean ``[N, L]`` masks of the three regions where PPO and CISPO differ, at the perturbed theta.

    Examples
    --------
    PPO's weight is 0 on the first two cells; CISPO's is capped at :math:`1 + \varepsilon_h` on the first and third:

    >>> from numeric.gradient_weights import setting, silenced_cells
    >>> s = setting()
    >>> ppo, cispo = s.weights("ppo", s.theta), s.weights("cispo", s.theta)
    >>> cells = silenced_cells(s).values()
    >>> [bool((ppo[m] == 0).all()) for m in cells], [bool((cispo[m] == 1.28).all()) for m in cells]
    ([True, True, False], [True, False, True])
    """
    r, _ = s.ratio(s.theta)
    live, A = s.lm.mask > 0, s.A
    return {
        "A>0, r>1+eps_h (PPO silences)": live & (A > 0) & (r > 1 + EPS_HIGH),
        "A<0, r<1-eps_l (PPO silences)": live & (A < 0) & (r < 1 - EPS_LOW),
        "A<0, r>1+eps_h (PPO weight r, CISPO caps)": live & (A < 0) & (r > 1 + EPS_HIGH),
    }


@suite("gradient_weights")
def cross_checks() -> None:
    """000 sections 1-3 and 5-7 on TinyLM(V=4, L=4, seed=0), eps_low = 0.2, eps_high = 0.28."""
    s = setting()
    lm, th = s.lm, s.theta
    # 1. derived weights against autograd of the losses
    for method in gw.METHODS:
        check(f"{method}: autograd of the loss == -sum q w(r,A) A grad log pi (derived weights)",
              maxabs(s.grad(method, th), s.grad_from_weights(s.weights(method, th), th)), 1e-14)
    # 2. silenced tokens
    r, _ = s.ratio(th)
    live = lm.mask > 0
    w_ppo, w_cispo = s.weights("ppo", th), s.weights("cispo_cap", th)
    cells = silenced_cells(s)
    silenced = cells["A>0, r>1+eps_h (PPO silences)"] | cells["A<0, r<1-eps_l (PPO silences)"]
    check("{PPO weight 0, CISPO weight > 0} == the two silenced cells (symmetric difference size)",
          float(((live & (w_ppo == 0) & (w_cispo > 0)) ^ silenced).sum()), 0.0)
    check("CISPO silences no token (count of zero CISPO weights)", float((live & (w_cispo == 0)).sum()), 0.0)
    mask_eq7 = ((s.A > 0) & (r > 1 + EPS_HIGH)) | ((s.A < 0) & (r < 1 - EPS_LOW))
    check("PPO silenced set == MiniMax-M1 mask M = 0 of Eq. 7 (symmetric difference size)",
          float(((live & (w_ppo == 0)) ^ (live & mask_eq7)).sum()), 0.0)
    # 3. unified form, CISPO without a clip, the old policy
    M = (~mask_eq7).to(torch.float64)
    thr = th.detach().clone().requires_grad_(True)
    r_u, lp_u = s.ratio(thr)
    g_unified = torch.autograd.grad(-(s.q[:, None] * r_u.detach() * s.A * lp_u * M * lm.mask).sum(), thr)[0]
    check("unified loss sg(r) A log pi M == PPO gradient", maxabs(g_unified, s.grad("ppo", th)), 1e-14)
    thr = th.detach().clone().requires_grad_(True)
    r_is, _ = s.ratio(thr)
    g_ratio = torch.autograd.grad(-(s.q[:, None] * r_is * s.A * lm.mask).sum(), thr)[0]  # the ratio itself, no sg, no log
    check("CISPO with eps_high = inf == autograd of the unclipped ratio objective -E_old[sum_t r_t A] (sg(r) grad log pi = grad r)",
          maxabs(s.grad("cispo_cap", th, eps_high=math.inf), g_ratio), 1e-14)
    th0 = s.theta_old.detach().clone().requires_grad_(True)
    gJ = torch.autograd.grad(lm.probs(th0) @ default_reward(lm), th0)[0]
    worst = max(maxabs(-s.grad(m, s.theta_old), gJ) for m in gw.METHODS)
    check("at theta_old every method's gradient == -grad J (r = 1, nothing clipped)", worst, 1e-14)
    # 5. stop-gradient semantics
    _look_alike_checks()
    # 6. fork token
    ppo, cispo = fork_token("ppo"), fork_token("cispo", eps_low=None)
    ratio_before = torch.cat([torch.tensor([0.01], dtype=torch.float64), ppo.rare_prob[:-1]]) / 0.01
    mismatches = int(((ppo.rare_weight == 0) != (ratio_before > 1 + EPS_HIGH)).sum()) + int((cispo.rare_weight == 0).sum())
    check("fork token: PPO silences the rare token exactly when its ratio before the update exceeds 1 + eps_h (in > 8 of 16), CISPO never (mismatches)",
          mismatches + int((ppo.rare_weight == 0).sum() <= 8), 0.0)
    # 7. naive loop vs vectorised masked loss
    check("naive per-token loop == vectorised masked CISPO loss (gradient)", naive_vs_vectorised(), 1e-14)
    check("advantage that requires grad (baseline E_theta[R]): PPO and CISPO (eps_low=None) stop it (gradient gap)", _stopped_advantage_gap(), 1e-15)


def _ppo(log_prob, old_log_prob, advantages, mask):
    return policy_loss("ppo", log_prob, old_log_prob, advantages, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH)


def _cispo_cap(log_prob, old_log_prob, advantages, mask):
    return policy_loss("cispo", log_prob, old_log_prob, advantages, mask, eps_low=None, eps_high=EPS_HIGH)


def _stopped_advantage_gap(group: int = 8, seed: int = 5) -> float:
    """Gradient of each loss with an advantage that depends on theta, minus the gradient with the same numbers detached."""
    s = setting()
    lm = s.lm
    gen = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(s.q, group, replacement=True, generator=gen)
    R = default_reward(lm)
    worst = 0.0
    for loss in (_ppo, _cispo_cap):
        grads = []
        for stop in (False, True):
            th = perturb(s.theta_old, 0.8, seed=2).requires_grad_(True)
            adv = (R[idx] - lm.probs(th) @ R)[:, None] * lm.mask[idx]  # carries a gradient
            adv = adv.detach() if stop else adv
            grads.append(torch.autograd.grad(loss(lm.token_log_probs(th)[idx], s.lp_old[idx], adv, lm.mask[idx]), th)[0])
        worst = max(worst, maxabs(*grads))
    return worst


_LOOK_ALIKE_POINTS = ((-2.3, 1.0), (-1.5, 1.0), (-1.5, -1.0), (-3.0, 1.0), (-0.5, 1.0), (-0.5, -1.0))
_LOG_PROB_OLD = -2.3


def look_alike_gradients_autograd(log_prob: float, advantage: float, eps: float = EPS_HIGH) -> tuple[float, float, float]:
    r"""Autograd of the look-alike losses (a), (b), (c) with respect to :math:`\ell`, with :math:`\ell_0 = -2.3`.

    Examples
    --------
    >>> from numeric.gradient_weights import look_alike_gradients_autograd
    >>> [round(g, 6) for g in look_alike_gradients_autograd(-2.3, 1.0)]
    [-1.0, 1.3, -1.0]
    """
    out: list[float] = []
    for build in (
        lambda r, lp: -(torch.clamp(r, max=1 + eps).detach() * advantage * lp),
        lambda r, lp: -(torch.clamp(r, max=1 + eps) * advantage * lp),
        lambda r, lp: -(torch.clamp(r, max=1 + eps) * advantage),
    ):
        lp = torch.tensor(log_prob, dtype=torch.float64, requires_grad=True)
        out.append(float(torch.autograd.grad(build((lp - _LOG_PROB_OLD).exp(), lp), lp)[0]))
    return out[0], out[1], out[2]


@lru_cache(maxsize=1)
def _look_alike_fns():
    g = gw.look_alike_gradients()
    return {k: sp.lambdify((gw.r, gw.ell, gw.A, gw.eps_h), v, "math") for k, v in g.items()}


def _look_alike_checks() -> None:
    """Derived (a), (b), (c) against autograd at six points; the sign flip at r = 1."""
    fns = _look_alike_fns()
    worst = 0.0
    for lp, adv in _LOOK_ALIKE_POINTS:
        r = math.exp(lp - _LOG_PROB_OLD)
        derived = [fns[k](r, lp, adv, EPS_HIGH) for k in "abc"]
        worst = max(worst, *(abs(x - y) for x, y in zip(derived, look_alike_gradients_autograd(lp, adv))))
    check("look-alikes: (a) -A min(r,1+eps), (b) -A r (1+log pi) live, (c) -A r 1[r<1+eps] == autograd (6 points)", worst, 1e-12)
    ga, gb, _ = look_alike_gradients_autograd(_LOG_PROB_OLD, 1.0)
    check("without sg the live weight is r(1 + log pi): opposite sign at r = 1, pi = e^-2.3 < 1/e (ga * gb > 0 counts)",
          float(ga * gb > 0), 0.0)


def naive_vs_vectorised(group: int = 8, seed: int = 5) -> float:
    """Max gradient difference, per-token Python loop vs the batched CISPO loss (``eps_low=None``), on a sampled group.

    Examples
    --------
    >>> from numeric.gradient_weights import naive_vs_vectorised
    >>> naive_vs_vectorised(group=4, seed=1) < 1e-14
    True
    """
    s = setting()
    lm = s.lm
    gen = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(s.q, group, replacement=True, generator=gen)
    R = default_reward(lm)[idx]
    adv = (R - R.mean())[:, None] * lm.mask[idx]
    th = perturb(s.theta_old, 0.8, seed=2).requires_grad_(True)
    lp, lp_old, mask = lm.token_log_probs(th)[idx], s.lp_old[idx], lm.mask[idx]
    total, n = lp.new_zeros(()), 0
    for i in range(group):
        for t in range(int(mask[i].sum())):
            r = math.exp(float((lp[i, t] - lp_old[i, t]).detach()))
            total = total + min(r, 1 + EPS_HIGH) * adv[i, t] * lp[i, t]
            n += 1
    g_loop = torch.autograd.grad(-total / n, th, retain_graph=True)[0]
    g_vec = torch.autograd.grad(_cispo_cap(lp, lp_old, adv, mask), th)[0]
    return maxabs(g_loop, g_vec)
