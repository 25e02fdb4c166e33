r"""Gradient weights on the toy LM, the batched PPO/CISPO paths, and the PPO diagnostics.

Every clipped surrogate has a per-token gradient
:math:`-\,w(r_t, A_t)\, A_t\, \nabla_\theta \log\pi_\theta(o_t \mid s_t)`; the weights
:math:`w` are derived in :mod:`derivations.gradient_weights` and evaluated here by
``lambdify`` (:func:`gradient_weight`).  The suite ``gradient_weights`` checks them
against autograd of the actual losses on :class:`~numeric.TinyLM`, shows which
tokens PPO silences and CISPO keeps, runs the fork-token experiment, and checks the
vectorised masked loss against a per-token loop.

Clip ranges
-----------
``clip_epsilon`` is either one number :math:`\varepsilon` (symmetric:
:math:`\varepsilon_l = \varepsilon_h = \varepsilon`) or a pair
``(eps_low, eps_high)``; the clip interval is
:math:`[1-\varepsilon_l,\ 1+\varepsilon_h]`.  :math:`0 \le \varepsilon_l \le 1`,
:math:`\varepsilon_h \ge 0`, and :math:`\varepsilon_h = \infty` is allowed (no upper clip).

Batched helpers take numpy arrays or torch tensors ``[batch, time]`` (any shape,
all aligned) and return the caller's kind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import NamedTuple

import numpy as np
import sympy as sp
import torch

from derivations import gradient_weights as gw
from derivations import trust_region as tr

from ._validate import (
    like,
    masked_inputs,
    require_finite,
    require_int,
    require_nonnegative,
    require_real,
    require_same_shape,
    to_tensor,
)
from .checks import check, maxabs, suite
from .tinylm import TinyLM, default_reward, perturb

__all__ = [
    "ForkTrajectory",
    "PPODiagnostics",
    "PPOTerms",
    "cispo_loss",
    "fork_token",
    "gradient_weight",
    "ppo_clipped_terms",
    "ppo_diagnostics",
    "ppo_loss",
]


# ------------------------------------------------------------------ inputs


def clip_bounds(clip_epsilon) -> tuple[float, float]:
    """``(eps_low, eps_high)`` from a number or a pair; raise on a negative or NaN value.

    Examples
    --------
    >>> from numeric.gradient_weights import clip_bounds
    >>> clip_bounds(0.2), clip_bounds((0.2, 0.28))
    ((0.2, 0.2), (0.2, 0.28))
    """
    if isinstance(clip_epsilon, (tuple, list)):
        if len(clip_epsilon) != 2:
            raise ValueError(f"clip_epsilon must be a number or a pair (eps_low, eps_high), got {clip_epsilon!r}")
        low, high = clip_epsilon
    else:
        low = high = clip_epsilon
    low = require_nonnegative("clip_epsilon (eps_low)", low)
    high = require_nonnegative("clip_epsilon (eps_high)", high)
    if low > 1:
        raise ValueError(f"clip_epsilon (eps_low) must be <= 1 so that 1 - eps_low >= 0, got {low}")
    return low, high


def _aligned(**arrays) -> tuple[dict[str, torch.Tensor], str]:
    """Tensors of the same shape, all finite, on the first one's device and in its compute dtype; the first one's kind."""
    tensors, _, kind = masked_inputs(None, **arrays)
    return tensors, kind


def _positive(name: str, t: torch.Tensor) -> torch.Tensor:
    if not bool((t > 0).all()):
        raise ValueError(f"{name} must be positive (a ratio of probabilities), got min {float(t.min())}")
    return t


# ----------------------------------------------------------------- weights


@cache
def _weight_fn(method: str):
    return sp.lambdify((gw.r, gw.A, gw.eps_l, gw.eps_h, gw.c), gw.gradient_weight(method), "numpy")


def gradient_weight(method: str, ratio, advantage, clip_epsilon=0.2, dual_clip: float = 3.0):
    r"""The derived gradient weight :math:`w(r, A)`, elementwise.

    The per-token loss gradient is :math:`-\,w(r, A)\, A\, \nabla_\theta\log\pi_\theta`:

    .. math::

        w_{\mathrm{PPO}} = r\,\mathbb 1\bigl[(A > 0,\ r \le 1+\varepsilon_h) \lor (A < 0,\ r \ge 1-\varepsilon_l)\bigr],
        \quad
        w_{\mathrm{CISPO}} = \min(r, 1+\varepsilon_h),
        \quad
        w_{\mathrm{IS}} = r;

    dual-clip PPO also silences :math:`A < 0,\ r > c`.  The formula is
    :func:`derivations.gradient_weights.gradient_weight`, lambdified.

    Parameters
    ----------
    method : {"ppo", "dual_clip", "cispo", "is"}
    ratio, advantage : numpy array or torch tensor
        Aligned; ratios positive, both finite.
    clip_epsilon : float or (float, float)
        :math:`\varepsilon` or :math:`(\varepsilon_l, \varepsilon_h)`.
    dual_clip : float
        The dual-clip constant :math:`c > 1 + \varepsilon_h` (used by ``"dual_clip"`` only).

    Returns
    -------
    Same kind and shape as ``ratio``.

    References
    ----------
    MiniMax, "MiniMax-M1", arXiv:2506.13585 (2025), Sec. 3.1.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import gradient_weight
    >>> r = np.array([0.5, 1.0, 2.0])
    >>> A = np.array([1.0, 1.0, 1.0])
    >>> gradient_weight("ppo", r, A, (0.2, 0.28)).tolist()
    [0.5, 1.0, 0.0]
    >>> gradient_weight("cispo", r, -A, (0.2, 0.28)).tolist()
    [0.5, 1.0, 1.28]
    """
    if method not in gw.METHODS:
        raise ValueError(f"method must be one of {gw.METHODS}, got {method!r}")
    t, kind = _aligned(ratio=ratio, advantage=advantage)
    _positive("ratio", t["ratio"])
    low, high = clip_bounds(clip_epsilon)
    c = require_real("dual_clip", dual_clip)
    if method == "dual_clip" and not c > 1 + high:
        raise ValueError(f"dual_clip must exceed 1 + eps_high = {1 + high}, got {c}")
    r_np, a_np = (t[k].detach().to(torch.float64).cpu().numpy() for k in ("ratio", "advantage"))
    w = np.broadcast_to(_weight_fn(method)(r_np, a_np, low, high, c), r_np.shape).astype(np.float64)
    return like(kind, torch.from_numpy(np.ascontiguousarray(w)).to(t["ratio"].device, _dtype_of(ratio)))


# -------------------------------------------------------------- PPO terms


class PPOTerms(NamedTuple):
    r"""The three PPO terms, elementwise: :math:`rA`, :math:`\mathrm{clip}(r)A`, and their minimum."""

    unclipped: object
    clipped: object
    pessimistic: object


def ppo_clipped_terms(ratio, advantage, clip_epsilon=0.2) -> PPOTerms:
    r"""PPO's unclipped, clipped and pessimistic terms (objective, to be maximised).

    .. math::

        u = rA, \qquad
        v = \mathrm{clip}(r, 1-\varepsilon_l, 1+\varepsilon_h)\,A, \qquad
        \min(u, v).

    Parameters
    ----------
    ratio, advantage : numpy array or torch tensor
        Aligned; ratios positive; all finite.  Differentiable in ``ratio``.
    clip_epsilon : float or (float, float)
        :math:`\varepsilon`, or :math:`(\varepsilon_l, \varepsilon_h)` for asymmetric clipping.

    Returns
    -------
    PPOTerms
        ``(unclipped, clipped, pessimistic)``, each of ``ratio``'s kind, device and dtype.

    References
    ----------
    J. Schulman et al., "Proximal Policy Optimization Algorithms", arXiv:1707.06347 (2017).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import ppo_clipped_terms
    >>> terms = ppo_clipped_terms(np.array([1.5, 0.5, 1.5, 0.5]), np.array([1.0, 1.0, -1.0, -1.0]), 0.2)
    >>> terms.pessimistic.round(6).tolist()
    [1.2, 0.5, -1.5, -0.8]
    """
    t, kind = _aligned(ratio=ratio, advantage=advantage)
    r, a = _positive("ratio", t["ratio"]), t["advantage"]
    low, high = clip_bounds(clip_epsilon)
    unclipped = r * a
    clipped = torch.clamp(r, min=1 - low, max=1 + high) * a
    pessimistic = torch.minimum(unclipped, clipped)
    dtype = _dtype_of(ratio)
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


def _k3(delta: torch.Tensor) -> torch.Tensor:
    r""":math:`k_3(\Delta) = e^{-\Delta} - 1 + \Delta` (:data:`derivations.trust_region.k3`), with ``expm1`` for small :math:`\Delta`."""
    return torch.expm1(-delta) + delta


def ppo_diagnostics(log_prob, old_log_prob, advantage, clip_epsilon=0.2, mask=None) -> PPODiagnostics:
    r"""Clip fractions and KL estimates of one PPO batch.

    With :math:`r = e^{\log\pi_\theta - \log\pi_{\text{old}}}` over the masked tokens:

    .. math::

        \mathtt{ratio\_outside} = \overline{\mathbb 1[r \notin [1-\varepsilon_l, 1+\varepsilon_h]]},\quad
        \mathtt{active\_clip} = \overline{\mathbb 1[\min(rA, \mathrm{clip}(r)A) < rA]},\quad
        \mathtt{kl} = \overline{(r - 1) - \log r},\quad
        \mathtt{mean\_log\_ratio} = \overline{\log r}.

    ``kl`` uses :math:`k_3` from :mod:`derivations.trust_region` (lambdified): it is
    non-negative for every batch and unbiased for
    :math:`\mathrm{KL}(\pi_{\text{old}}\,\|\,\pi_\theta)` when the tokens are
    drawn from :math:`\pi_{\text{old}}`; a finite batch gives an estimate, not a bound.

    Parameters
    ----------
    log_prob, old_log_prob, advantage : numpy array or torch tensor
        Aligned; finite where ``mask`` is 1.
    clip_epsilon : float or (float, float)
    mask : numpy array or torch tensor, optional
        0/1 or boolean, aligned; at least one token must be unmasked (a mean
        over no token has no value, so an all-masked batch raises).  Masked
        slots may hold anything.

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
    >>> d = ppo_diagnostics(new, old, np.array([1.0, 1.0, -1.0, -1.0]), 0.2)
    >>> d.ratio_outside_fraction, d.active_clip_fraction, round(d.kl, 6), round(d.mean_log_ratio, 6)
    (1.0, 0.5, 0.143841, -0.143841)
    """
    t, m, _ = masked_inputs(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantage=advantage)
    m = torch.ones_like(t["advantage"]) if m is None else _mask01(m).to(t["advantage"])
    log_ratio = (t["log_prob"] - t["old_log_prob"]).detach()
    ratio = log_ratio.exp()
    low, high = clip_bounds(clip_epsilon)
    unclipped, _, pessimistic = ppo_clipped_terms(ratio, t["advantage"].detach(), (low, high))
    mean = lambda x: float((x.to(m.dtype) * m).sum() / m.sum())
    return PPODiagnostics(
        ratio_outside_fraction=mean((ratio < 1 - low) | (ratio > 1 + high)),
        active_clip_fraction=mean(pessimistic < unclipped),
        kl=mean(_k3(-log_ratio)),
        mean_log_ratio=mean(log_ratio),
    )


def _mask01(m: torch.Tensor) -> torch.Tensor:
    """A boolean mask that selects at least one token."""
    if not bool(m.any()):
        raise ValueError("mask must select at least one token")
    return m


def _dtype_of(x) -> torch.dtype:
    """The dtype a result is returned in: the input's, float64 for integers."""
    return to_tensor("x", x)[0].dtype


def _token_mean(per_token: torch.Tensor, m: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    r""":math:`\sum m x / \max(1, \sum m)` in the caller's dtype: 0 with a zero gradient when nothing is unmasked."""
    return ((per_token * m).sum() / m.sum().clamp(min=1)).to(dtype)


# --------------------------------------------------------------- the losses


def ppo_loss(log_prob, old_log_prob, advantage, mask, clip_epsilon=0.2):
    r"""Token-level PPO/GRPO loss: :math:`-\frac{1}{\sum m}\sum_{i,t} m_{it}\min(r_{it}A_{it}, \mathrm{clip}(r_{it})A_{it})`.

    The batched, trainer-facing form: the caller's kind, device and dtype
    (fp32, bf16, fp64) in and out, computed in at least fp32; ``old_log_prob``
    and ``advantage`` are detached.  Masked slots may hold anything
    (``-inf``, padding sentinels) and enter neither the loss nor its gradient;
    a batch with no unmasked token gives 0 with a zero gradient (verl's
    ``masked_mean`` convention).  :func:`numeric.losses.policy_loss` has every
    variant and aggregation mode.

    Parameters
    ----------
    log_prob : numpy array or torch tensor
        ``[batch, time]`` :math:`\log\pi_\theta`; the loss is differentiable in it.
    old_log_prob, advantage, mask : same shape
        :math:`\log\pi_{\text{old}}`, advantages broadcast over tokens, 0/1 or boolean mask.
    clip_epsilon : float or (float, float)

    Examples
    --------
    >>> import torch
    >>> from numeric import ppo_loss
    >>> lp = torch.log(torch.tensor([[0.3, 0.6]])).requires_grad_(True)
    >>> old = torch.log(torch.tensor([[0.2, 0.5]]))
    >>> loss = ppo_loss(lp, old, torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 1.0]]), 0.2)
    >>> round(loss.item(), 6), torch.autograd.grad(loss, lp)[0].round(decimals=6).tolist()
    (-1.2, [[0.0, -0.6]])
    """
    t, m, kind = masked_inputs(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantage=advantage)
    ratio = (t["log_prob"] - t["old_log_prob"].detach()).exp()
    pessimistic = ppo_clipped_terms(ratio, t["advantage"].detach(), clip_epsilon).pessimistic
    return like(kind, _token_mean(-pessimistic, m, _dtype_of(log_prob)))


def cispo_loss(log_prob, old_log_prob, advantage, mask, clip_epsilon=0.28):
    r"""Token-level CISPO loss: :math:`-\frac{1}{\sum m}\sum_{i,t} m_{it}\,\mathrm{sg}(\min(r_{it}, 1+\varepsilon_h))\,A_{it}\log\pi_\theta`.

    Only :math:`\varepsilon_h` is used (CISPO clips the weight from above); a
    pair ``(eps_low, eps_high)`` is accepted for symmetry with :func:`ppo_loss`,
    whose conventions (dtype, device, padding, empty batch) it shares.

    References
    ----------
    MiniMax, "MiniMax-M1", arXiv:2506.13585 (2025), Eq. 4.

    Examples
    --------
    >>> import torch
    >>> from numeric import cispo_loss
    >>> lp = torch.log(torch.tensor([[0.3, 0.6]])).requires_grad_(True)
    >>> old = torch.log(torch.tensor([[0.2, 0.5]]))
    >>> loss = cispo_loss(lp, old, torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 1.0]]), 0.28)
    >>> torch.autograd.grad(loss, lp)[0].round(decimals=6).tolist()   # -min(r, 1.28) A / 2
    [[-0.64, -0.6]]
    """
    t, m, kind = masked_inputs(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantage=advantage)
    _, high = clip_bounds(clip_epsilon)
    lp = t["log_prob"]
    weight = torch.clamp((lp - t["old_log_prob"]).exp(), max=1 + high).detach()
    return like(kind, _token_mean(-weight * t["advantage"].detach() * lp, m, _dtype_of(log_prob)))


# -------------------------------------------------------------- fork token


@dataclass(frozen=True)
class ForkTrajectory:
    r"""The rare token's probability after each update, and the weight on its own term before it."""

    rare_prob: torch.Tensor
    rare_weight: torch.Tensor


def fork_token(method: str, steps: int = 16, lr: float = 30.0, clip_epsilon=(0.2, 0.28), p_rare: float = 0.01) -> ForkTrajectory:
    r"""The fork-token experiment: many off-policy updates on one decision.

    One state with three tokens, :math:`\pi_{\text{old}} = (0.6, 0.39, 0.01)`
    (``p_rare`` for the third, the rest renormalised), reward 1 only for the rare
    token, advantage :math:`A = R - \mathbb{E}_{\pi_{\text{old}}}[R]`.  Each of
    ``steps`` updates is a gradient-ascent step of size ``lr`` on the logits of
    the exact objective :math:`\sum_a \pi_{\text{old}}(a)\,(-\mathrm{loss}_a)`
    (PPO: the pessimistic term; CISPO: :math:`\mathrm{sg}(\min(r, 1+\varepsilon_h)) A \log\pi`).
    Once the rare token's ratio passes :math:`1+\varepsilon_h`, PPO gives it
    weight 0; CISPO keeps :math:`1+\varepsilon_h`.

    Parameters
    ----------
    method : {"ppo", "cispo"}
    steps : int
    lr : float
    clip_epsilon : float or (float, float)
    p_rare : float
        :math:`\pi_{\text{old}}` of the rare token, in (0, 1).

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
    low, high = clip_bounds(clip_epsilon)
    pi_old = torch.tensor([0.6, 0.39, p_rare], dtype=torch.float64)
    pi_old = pi_old / pi_old.sum()
    reward = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    adv = reward - pi_old @ reward
    z = pi_old.log().clone().requires_grad_(True)
    probs, weights = [], []
    for _ in range(steps):
        log_pi = torch.log_softmax(z, 0)
        ratio = (log_pi - pi_old.log()).exp()
        if method == "ppo":
            per_token = ppo_clipped_terms(ratio, adv, (low, high)).pessimistic
        else:
            per_token = torch.clamp(ratio, max=1 + high).detach() * adv * log_pi
        grad = torch.autograd.grad(pi_old @ per_token, z)[0]
        weights.append(gradient_weight(method, ratio.detach(), adv, (low, high))[2])
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
        if method in ("ppo", "dual_clip"):
            f = ppo_clipped_terms(r, A, (EPS_LOW, eps_high)).pessimistic
            if method == "dual_clip":
                f = torch.where(A < 0, torch.maximum(f, DUAL_CLIP * A), f)
        elif method == "cispo":
            f = torch.clamp(r, max=1 + eps_high).detach() * A * lp
        else:
            f = r.detach() * A * lp
        return -(q * f * m).sum()

    def grad(self, method: str, theta, **kw):
        th = theta.detach().clone().requires_grad_(True)
        return torch.autograd.grad(self.loss(method, th, **kw), th)[0]

    def grad_from_weights(self, w, theta):
        """:math:`-\\sum_{o,t} q(o)\\, w\\, A\\, \\nabla\\log\\pi_\\theta(o_t|s_t)`."""
        th = theta.detach().clone().requires_grad_(True)
        lp = self.lm.token_log_probs(th)
        return -torch.autograd.grad((self.q[:, None] * w * self.A * lp * self.lm.mask).sum(), th)[0]

    def weights(self, method: str, theta):
        r, _ = self.ratio(theta)
        return gradient_weight(method, r.detach(), self.A, (EPS_LOW, EPS_HIGH), DUAL_CLIP)


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
    w_ppo, w_cispo = s.weights("ppo", th), s.weights("cispo", th)
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
          maxabs(s.grad("cispo", th, eps_high=math.inf), g_ratio), 1e-14)
    th0 = s.theta_old.detach().clone().requires_grad_(True)
    gJ = torch.autograd.grad(lm.probs(th0) @ default_reward(lm), th0)[0]
    worst = max(maxabs(-s.grad(m, s.theta_old), gJ) for m in gw.METHODS)
    check("at theta_old every method's gradient == -grad J (r = 1, nothing clipped)", worst, 1e-14)
    # 5. stop-gradient semantics
    _look_alike_checks()
    # 6. fork token
    ppo, cispo = fork_token("ppo"), fork_token("cispo")
    ratio_before = torch.cat([torch.tensor([0.01], dtype=torch.float64), ppo.rare_prob[:-1]]) / 0.01
    mismatches = int(((ppo.rare_weight == 0) != (ratio_before > 1 + EPS_HIGH)).sum()) + int((cispo.rare_weight == 0).sum())
    check("fork token: PPO silences the rare token exactly when its ratio before the update exceeds 1 + eps_h (in > 8 of 16), CISPO never (mismatches)",
          mismatches + int((ppo.rare_weight == 0).sum() <= 8), 0.0)
    # 7. naive loop vs vectorised masked loss
    check("naive per-token loop == vectorised masked CISPO loss (gradient)", naive_vs_vectorised(), 1e-14)
    check("advantage that requires grad (baseline E_theta[R]): ppo_loss and cispo_loss stop it (gradient gap)", _stopped_advantage_gap(), 1e-15)


def _stopped_advantage_gap(group: int = 8, seed: int = 5) -> float:
    """Gradient of each loss with an advantage that depends on theta, minus the gradient with the same numbers detached."""
    s = setting()
    lm = s.lm
    gen = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(s.q, group, replacement=True, generator=gen)
    R = default_reward(lm)
    worst = 0.0
    for loss in (ppo_loss, cispo_loss):
        grads = []
        for stop in (False, True):
            th = perturb(s.theta_old, 0.8, seed=2).requires_grad_(True)
            adv = (R[idx] - lm.probs(th) @ R)[:, None] * lm.mask[idx]  # carries a gradient
            adv = adv.detach() if stop else adv
            grads.append(torch.autograd.grad(loss(lm.token_log_probs(th)[idx], s.lp_old[idx], adv, lm.mask[idx], (EPS_LOW, EPS_HIGH)), th)[0])
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
    out = []
    for build in (
        lambda r, lp: -(torch.clamp(r, max=1 + eps).detach() * advantage * lp),
        lambda r, lp: -(torch.clamp(r, max=1 + eps) * advantage * lp),
        lambda r, lp: -(torch.clamp(r, max=1 + eps) * advantage),
    ):
        lp = torch.tensor(log_prob, dtype=torch.float64, requires_grad=True)
        out.append(float(torch.autograd.grad(build((lp - _LOG_PROB_OLD).exp(), lp), lp)[0]))
    return tuple(out)


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
    """Max gradient difference, per-token Python loop vs :func:`cispo_loss`, on a sampled group.

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
    total, n = 0.0, 0
    for i in range(group):
        for t in range(int(mask[i].sum())):
            r = math.exp(float((lp[i, t] - lp_old[i, t]).detach()))
            total = total + min(r, 1 + EPS_HIGH) * adv[i, t] * lp[i, t]
            n += 1
    g_loop = torch.autograd.grad(-total / n, th, retain_graph=True)[0]
    g_vec = torch.autograd.grad(cispo_loss(lp, lp_old, adv, mask, EPS_HIGH), th)[0]
    return maxabs(g_loop, g_vec)
