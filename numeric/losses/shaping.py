r"""What trainers add to the reward or the advantage besides the estimator: length penalties, KL in the reward, a teacher.

Each changes :math:`\mathbb{E}[A\,\nabla\log\pi]` in its own way, and the
docstrings say how:

* a **per-answer reward shaping** (:func:`overlong_penalized_rewards`,
  :func:`stop_properly_rewards`, OpenRLHF) changes the objective, not the
  identity: every estimator's verdict holds for the shaped reward
  :math:`J' = \mathbb{E}[R']` instead of :math:`J`; but it makes a binary
  reward many-valued, and the verdict of an estimator can change with the
  law (the group z-score is reweighted for a binary reward, biased for most
  others);
* the **KL in the reward** (:func:`kl_in_reward`, verl's
  ``use_kl_in_reward`` with :class:`AdaptiveKLController`) is a score-function
  term: with :math:`k_1` summed over the answer its expected update is exactly
  :math:`-\beta\,\nabla\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})` of the sequences;
* a **teacher's token log-ratio** in the advantage (:func:`opd_advantages`,
  slime and ms-swift on-policy distillation) credits each token with its own
  log-ratio only: the gradient of the per-state reverse KL with the states
  held fixed, not of the sequences' KL; :func:`rlsd_advantages` (ms-swift RLSD)
  reweights each token's share of the advantage by the teacher, which no
  estimator of :math:`\nabla J` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from .._types import Array, ArrayT
from .._validate import (
    like,
    masked_inputs,
    require_bool,
    require_finite,
    require_mask,
    require_nonnegative,
    require_positive,
    require_real,
    require_unit_interval,
    result_dtype,
    to_tensor,
)
from .penalties import verl_kl_penalty

__all__ = [
    "AdaptiveKLController",
    "KLInReward",
    "kl_in_reward",
    "opd_advantages",
    "overlong_penalized_rewards",
    "rlsd_advantages",
    "stop_properly_rewards",
]


# ------------------------------------------------------------------ length penalties on the reward


def _per_answer(name: str, value) -> tuple[torch.Tensor, str]:
    t, kind = to_tensor(name, value)
    if t.ndim != 1:
        raise ValueError(f"{name} must have shape [N] (one per response), got {tuple(t.shape)}")
    return require_finite(name, t), kind


def overlong_penalized_rewards(rewards: ArrayT, lengths: Array, *, max_length: float, buffer: float, factor: float = 1.0) -> ArrayT:
    r"""DAPO's overlong penalty: a response that runs into the last ``buffer`` tokens of ``max_length`` loses up to ``factor``.

    With the answer's length :math:`n_i` and :math:`L_{\max}` = ``max_length``:

    .. math::

        R'_i = R_i - \mathtt{factor}\cdot\mathrm{clip}\Bigl(\frac{n_i - (L_{\max} - \mathtt{buffer})}{\mathtt{buffer}},\ 0,\ 1\Bigr).

    The penalty depends on the answer's own length only, so :math:`R'` is a
    reward of the answer and any estimator certified for a reward law
    certifies the same for :math:`J' = \mathbb{E}[R']`: the update climbs
    :math:`J` less ``factor`` times the mean penalty share, a length cost, not :math:`J`.

    References
    ----------
    DAPO, arXiv:2503.14476 (2025). OpenRLHF ``3c3be62`` ``openrlhf/trainer/ppo_utils/length_penalty.py:16-58``
    (``max_length`` is ``max_new_tokens``, ``buffer`` is ``overlong_buffer_len``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import overlong_penalized_rewards
    >>> print(overlong_penalized_rewards(np.array([1.0, 1.0, 1.0, 1.0]), np.array([10, 14, 17, 20]), max_length=20, buffer=8))
    [1.    0.75  0.375 0.   ]
    """
    r, kind = _per_answer("rewards", rewards)
    n, _ = _per_answer("lengths", lengths)
    if n.shape != r.shape:
        raise ValueError(f"lengths must have the shape of rewards {tuple(r.shape)}, got {tuple(n.shape)}")
    if bool((n < 0).any()):
        raise ValueError("lengths must be >= 0 (token counts)")
    buffer = require_positive("buffer", buffer)
    max_length = require_real("max_length", max_length)
    if not (math.isfinite(max_length) and max_length >= buffer):
        raise ValueError(f"max_length must be a finite number >= buffer ({buffer}), got {max_length}")
    factor = require_nonnegative("factor", factor)
    excess = torch.clamp(n.to(r) - (max_length - buffer), max=buffer)
    penalty = torch.where(excess > 0, excess / buffer * factor, torch.zeros_like(excess))
    return like(kind, (r - penalty).to(result_dtype(rewards)))


def stop_properly_rewards(rewards: ArrayT, truncated: Array, *, coef: float) -> ArrayT:
    r"""ProRL's stop-properly penalty: a truncated response's reward scaled by ``coef`` in [0, 1], or set to ``coef`` < 0.

    :math:`R'_i = \mathtt{coef}\cdot R_i` (or :math:`R'_i = \mathtt{coef}` for :math:`\mathtt{coef} < 0`)
    where response :math:`i` hit the length limit, :math:`R_i` otherwise.  A
    reward of the answer again (:func:`overlong_penalized_rewards`): the
    identity holds for :math:`J'`; a binary reward becomes three-valued
    (:math:`\{0, \mathtt{coef}, 1\}`), and under such a law the
    group z-score's update is no longer a multiple of :math:`\nabla J'`
    (``tests/test_estimators.py``).

    References
    ----------
    ProRL, arXiv:2505.24864 (2025). OpenRLHF ``3c3be62`` ``openrlhf/trainer/ppo_utils/length_penalty.py:61-106``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import stop_properly_rewards
    >>> r, cut = np.array([1.0, 1.0, 0.0]), np.array([False, True, True])
    >>> print(stop_properly_rewards(r, cut, coef=0.5), stop_properly_rewards(r, cut, coef=-0.5))
    [1.  0.5 0. ] [ 1.  -0.5 -0.5]
    """
    r, kind = _per_answer("rewards", rewards)
    cut, _ = to_tensor("truncated", truncated, dtype=torch.bool)
    if cut.shape != r.shape:
        raise ValueError(f"truncated must have the shape of rewards {tuple(r.shape)}, got {tuple(cut.shape)}")
    coef = require_real("coef", coef)
    if coef > 1 or not math.isfinite(coef):
        raise ValueError(f"coef must be in [0, 1] (a scale) or negative (a fixed reward), got {coef}")
    cut = cut.to(r.device)
    shaped = torch.full_like(r, coef) if coef < 0 else coef * r
    return like(kind, torch.where(cut, shaped, r).to(result_dtype(rewards)))


# ------------------------------------------------------------------ KL in the reward


@dataclass(frozen=True)
class KLInReward:
    """What :func:`kl_in_reward` returns: the token rewards, the per-token KL estimate, and its batch mean (the controller's input)."""

    rewards: object
    kl: object
    current_kl: float


def kl_in_reward(scores: ArrayT, old_log_prob: Array, ref_log_prob: Array, mask: Array, *, beta: float, kl_penalty: str = "kl") -> KLInReward:
    r"""verl's KL in the reward: :math:`R_t = \mathrm{score}_t - \beta\,\mathrm{kl}_t` on every response token, and the KL the controller reads.

    :math:`\mathrm{kl}_t` is :func:`verl_kl_penalty` of the old and the reference
    log-probs, by verl's name (``algorithm.kl_penalty``, default ``"kl"``,
    i.e. :math:`k_1 = \ell_0 - \ell_{\mathrm{ref}}`; only its value enters);
    ``current_kl`` is the mean over responses of each one's token mean (verl
    divides by the count plus ``1e-8``, as here), which
    :meth:`AdaptiveKLController.update` reads.

    What it does to the gradient.  The penalty enters through the advantage,
    never differentiated: it is a reward.  On policy (:math:`\ell_0 = \ell` in
    value) an estimator that credits each answer with its summed token
    rewards, or each token with its reward-to-go, gets from :math:`k_1`

    .. math::

        -\beta\,\mathbb{E}\Bigl[\Bigl(\sum_t (\ell_{0,t} - \ell_{\mathrm{ref},t})\Bigr)\nabla\log\pi(o)\Bigr]
        = -\beta\,\mathbb{E}\bigl[(\log\pi(o) - \log\pi_{\mathrm{ref}}(o))\,\nabla\log\pi(o)\bigr]
        = -\beta\,\nabla\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}}),

    exactly: the log-ratio's own gradient, the term the stop-gradient drops,
    has mean :math:`\mathbb{E}[\nabla\log\pi] = 0`
    (:func:`derivations.score_function.kl_penalty_direct_term`).  With
    :math:`k_3` (``"low_var_kl"``, where its clamps do not bind) the dropped term
    :math:`\mathbb{E}[(1 - \pi_{\mathrm{ref}}/\pi)\nabla\ell_t]`
    is not 0: the update is :math:`-\beta` times
    :math:`\nabla\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})` less the per-state
    gradients of :math:`\mathrm{KL}(\pi_{\mathrm{ref}}\,\|\,\pi)` with the states held
    fixed (``tests/test_estimators.py`` computes both on the toy LM).  A
    group estimator then transforms the penalised reward as any other (the
    z-score of a continuous reward is biased, RLOO stays unbiased).

    References
    ----------
    verl ``1dda039`` ``verl/trainer/ppo/ray_trainer.py:78-117`` (``apply_kl_penalty``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import kl_in_reward
    >>> scores = np.array([[0.0, 1.0], [0.0, 0.0]])
    >>> old, ref = np.log([[0.5, 0.5], [0.2, 0.9]]), np.log([[0.25, 0.5], [0.4, 0.9]])
    >>> out = kl_in_reward(scores, old, ref, np.array([[1, 1], [1, 0]]), beta=0.1)
    >>> print(out.rewards.round(6)), round(out.current_kl, 6)
    [[-0.069315  1.      ]
     [ 0.069315  0.      ]]
    (None, -0.173287)
    """
    t, m, kind = masked_inputs(require_mask(mask), scores=scores, old_log_prob=old_log_prob, ref_log_prob=ref_log_prob)
    beta = require_real("beta", beta)
    if not math.isfinite(beta):
        raise ValueError(f"beta must be finite, got {beta}")
    kl = verl_kl_penalty(t["old_log_prob"], t["ref_log_prob"], m, kl_penalty=kl_penalty).detach()
    mf = m.to(kl.dtype)
    rewards = torch.where(m, t["scores"] - beta * kl, torch.zeros_like(kl))
    current = float(((kl * mf).sum(-1) / (mf.sum(-1) + 1e-8)).mean()) if kl.ndim > 1 else float((kl * mf).sum() / (mf.sum() + 1e-8))
    return KLInReward(like(kind, rewards.to(result_dtype(scores))), like(kind, kl.to(result_dtype(scores))), current)


@dataclass(frozen=True)
class AdaptiveKLController:
    r"""verl's (and OpenRLHF's) adaptive KL coefficient: :math:`\beta \leftarrow \beta\,(1 + \mathrm{clip}(\mathrm{KL}/\mathrm{target} - 1, \pm 0.2)\, \mathtt{n\_steps}/\mathtt{horizon})`.

    ``update(current_kl, n_steps)`` returns the next controller (this one is
    frozen).  Within a step :math:`\beta` is a number fixed before the step's
    batch is drawn, so the step's expected update is :math:`-\beta` times the
    penalty's gradient (:func:`kl_in_reward`); the controller only schedules
    :math:`\beta` between steps, from the last batch's KL.  (OpenRLHF passes
    ``n_steps = rollout_batch_size * n_samples_per_prompt``; verl the batch's
    rows.)

    References
    ----------
    Ziegler et al., "Fine-Tuning Language Models from Human Preferences", arXiv:1909.08593 (2019).
    verl ``1dda039`` ``verl/trainer/ppo/core_algos.py:153-212``; OpenRLHF ``3c3be62`` ``openrlhf/trainer/ppo_utils/kl_controller.py:4-19``.

    Examples
    --------
    >>> from numeric.losses import AdaptiveKLController
    >>> ctl = AdaptiveKLController(value=0.001, target=0.1, horizon=10000)
    >>> round(ctl.update(current_kl=0.5, n_steps=256).value, 9)     # KL 5x the target: the error is clipped at +0.2
    0.00100512
    """

    value: float
    target: float
    horizon: float

    def __post_init__(self):
        value = require_nonnegative("value", self.value)
        if not math.isfinite(value):
            raise ValueError(f"value must be finite, got {value}")
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "target", require_positive("target", self.target))
        object.__setattr__(self, "horizon", require_positive("horizon", self.horizon))

    def update(self, current_kl: float, n_steps: float) -> AdaptiveKLController:
        """The controller after one step that measured ``current_kl`` over ``n_steps`` samples."""
        kl = require_real("current_kl", current_kl)
        if not math.isfinite(kl):
            raise ValueError(f"current_kl must be finite, got {kl}")
        n = require_nonnegative("n_steps", n_steps)
        error = float(np.clip(kl / self.target - 1, -0.2, 0.2))
        return replace(self, value=self.value * (1 + error * n / self.horizon))


# ------------------------------------------------------------------ a teacher in the advantage


def _token_advantages(advantages, shape, device, dtype) -> torch.Tensor:
    a, _ = to_tensor("advantages", advantages)
    if tuple(a.shape) == tuple(shape[:-1]):
        a = a[..., None].expand(shape)
    elif tuple(a.shape) != tuple(shape):
        raise ValueError(f"advantages must have shape {tuple(shape[:-1])} (one per response) or {tuple(shape)} (per token), got {tuple(a.shape)}")
    return a.to(device=device, dtype=dtype)


def opd_advantages(advantages: ArrayT, student_log_prob: Array, teacher_log_prob: Array, mask: Array, *, coef: float = 1.0) -> ArrayT:
    r"""On-policy distillation in the advantage: :math:`A_t - \beta\,(\ell_{0,t} - \ell_{\mathrm{teacher},t})`, each token's own student-teacher log-ratio.

    ``advantages`` is ``[B]`` (broadcast over the tokens) or ``[B, T]``;
    ``student_log_prob`` are the sampling (old) log-probs :math:`\ell_{0,t}`, ``teacher_log_prob``
    the teacher's on the same tokens; :math:`\beta` is ``coef``.

    What it does to the gradient.  The added term is a per-token advantage
    that is not a return: token :math:`t` is credited with its own log-ratio
    only.  At each state :math:`\sum_a \pi_a(\log\pi_a - \log\pi_{\mathrm{teacher},a})\nabla\log\pi_a
    = \nabla\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{teacher}})` (the log-ratio's own gradient has mean
    0), so on policy

    .. math::

        \mathbb{E}\Bigl[\sum_t (\ell_t - \ell_{\mathrm{teacher},t})\nabla\ell_t\Bigr]
        = \sum_t \mathbb{E}_{o_{<t}}\bigl[\nabla_\theta \mathrm{KL}(\pi(\cdot\mid o_{<t})\,\|\,\pi_{\mathrm{teacher}}(\cdot\mid o_{<t}))\bigr]_{\text{prefixes fixed}},

    the reverse KL of each visited state, the visiting distribution held
    fixed; the gradient of the sequences' :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{teacher}})`
    would also credit token :math:`t` with the log-ratios after it.  The
    policy-gradient identity of :math:`A` is unchanged; the update adds
    :math:`-\beta` times that per-state term (``tests/test_estimators.py``, exact
    on the toy LM).

    References
    ----------
    slime ``624b824`` ``slime/backends/megatron_utils/loss.py:663-701``; the same signal in ms-swift ``3602360``
    ``swift/rl_core/advantage.py:241-291`` (``teacher_kl_coef``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import opd_advantages
    >>> lp_s, lp_t = np.log([[0.5, 0.4]]), np.log([[0.25, 0.4]])
    >>> print(opd_advantages(np.array([1.0]), lp_s, lp_t, np.array([[1, 1]])).round(6))
    [[0.306853 1.      ]]
    """
    t, m, kind = masked_inputs(require_mask(mask), student_log_prob=student_log_prob, teacher_log_prob=teacher_log_prob)
    coef = require_real("coef", coef)
    if not math.isfinite(coef):
        raise ValueError(f"coef must be finite, got {coef}")
    ls = t["student_log_prob"]
    a = _token_advantages(advantages, ls.shape, ls.device, ls.dtype)
    a = torch.where(m, a, torch.zeros_like(a))
    require_finite("advantages", a)
    out = a - coef * (ls - t["teacher_log_prob"])
    return like(kind, torch.where(m, out, torch.zeros_like(out)).to(result_dtype(student_log_prob)))


def rlsd_advantages(advantages: ArrayT, teacher_log_prob: Array, old_log_prob: Array, mask: Array, *, lam: float = 0.5, clip: float = 0.2,
                    negative_only: bool = False) -> ArrayT:
    r"""ms-swift's RLSD: each token's share of the answer's advantage reweighted by how much the teacher prefers it.

    With the teacher's and the sampling log-probs :math:`\ell_{\mathrm{teacher},t}` and :math:`\ell_{0,t}` (both detached),
    ``lam`` and :math:`\varepsilon` = ``clip``:

    .. math::

        A_t = A\,\Bigl((1 - \mathtt{lam}) + \mathtt{lam}\cdot\mathrm{clip}\bigl(e^{\mathrm{sign}(A)\,(\ell_{\mathrm{teacher},t} - \ell_{0,t})},\, 1 - \varepsilon,\, 1 + \varepsilon\bigr)\Bigr),

    ms-swift's defaults ``lam = 0.5``, ``clip = 0.2``: a factor in
    :math:`[1 - \mathtt{lam}\cdot\varepsilon, 1 + \mathtt{lam}\cdot\varepsilon]` that never flips the sign;
    ``negative_only`` reweights only answers with :math:`A < 0`.

    It is an advantage-side method (the loss sees a per-token advantage), and
    it changes the identity: the update :math:`\sum_t A_t\nabla\ell_t` weighs
    the tokens of one answer unequally by a teacher's preference, so its
    expectation is no multiple of :math:`\nabla J` (``tests/test_estimators.py``,
    exact on the toy LM: a teacher that agrees with the policy gives the
    estimator's own update back).

    References
    ----------
    RLSD (self-distilled RLVR). ms-swift ``3602360`` ``swift/rl_core/advantage.py:294-343`` (``apply_rlsd_reweight``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.losses import rlsd_advantages
    >>> lt, l0 = np.log([[0.9, 0.1], [0.9, 0.1]]), np.log([[0.5, 0.5], [0.5, 0.5]])
    >>> print(rlsd_advantages(np.array([1.0, -1.0]), lt, l0, np.ones((2, 2))).round(6))
    [[ 1.1  0.9]
     [-0.9 -1.1]]
    """
    t, m, kind = masked_inputs(require_mask(mask), teacher_log_prob=teacher_log_prob, old_log_prob=old_log_prob)
    lam, clip = require_unit_interval("lam", lam), require_unit_interval("clip", clip)
    negative_only = require_bool("negative_only", negative_only)
    lt = t["teacher_log_prob"].detach()
    a, _ = to_tensor("advantages", advantages)
    if tuple(a.shape) != tuple(lt.shape[:-1]):
        raise ValueError(f"advantages must have shape {tuple(lt.shape[:-1])} (one per response), got {tuple(a.shape)}")
    a = require_finite("advantages", a).to(device=lt.device, dtype=lt.dtype).detach()[..., None]
    delta = lt - t["old_log_prob"].detach()
    w = torch.exp(torch.sign(a) * delta).clamp(1 - clip, 1 + clip)
    factor = (1 - lam) + lam * w
    if negative_only:
        factor = torch.where(a < 0, factor, torch.ones_like(factor))
    out = a * factor
    return like(kind, torch.where(m, out, torch.zeros_like(out)).to(result_dtype(teacher_log_prob)))
