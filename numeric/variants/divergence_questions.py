r"""The trainers' questions about the other policies a loss sees: the reference of its KL term, the rollout sampler, a lagging old policy.

* :func:`kl_gradient`: which divergence the KL term's expected gradient descends,
  on the toy LM by exact enumeration, against the forms derived in
  :mod:`derivations.trust_region`;
* :func:`correction`: whether a rollout-correction weight is applied once, and detached;
* :func:`sequence_weight_scale`: how a sequence importance weight spreads with length;
* :func:`kl_form_table`: the first question asked of every KL form verl and TRL ship.

Each takes a :class:`~numeric.variants.trainer_loss.TrainerLoss` and returns an
:class:`~numeric.variants.answers.Answer`, measured in float64.

References
----------
verl ``kl_penalty``, ``compute_policy_loss_bypass_mode``, ``compute_policy_loss_reinforce``
and ``compute_rollout_correction_weights`` (verl-project/verl at
1dda039b9c6311889a9c9a26040677e1254814f9, ``verl/trainer/ppo/core_algos.py`` lines
2187-2247 and 2332-2548, ``verl/trainer/ppo/rollout_corr_helper.py`` lines 522-657 and
1109-1145); TRL ``use_bias_correction_kl`` (huggingface/trl at
f2cd57710ae345ea6428ae95363267fcf38a3dc8, ``trl/trainer/grpo_trainer.py`` lines 3069-3076).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..losses import bias_corrected_kl, kl_penalty, verl_kl_penalty
from ..tinylm import TinyLM, perturb
from .answers import (
    F64,
    RTOL,
    Answer,
    advantage_gradient,
    close,
    farthest,
    in_float64,
    not_applicable,
    probe_mask,
    require_trainer_loss,
    responds,
    row_coupled,
)
from .trainer_loss import TrainerLoss

__all__ = ["KL_FORMS", "correction", "kl_form_table", "kl_gradient", "sequence_weight_scale"]


# ------------------------------------------------------------------ the KL term


_KL_LM = dict(V=3, L=2, seed=0)  # 7 responses, 3 prefixes: the two-step case parts per-token from whole-sequence divergences


@dataclass(frozen=True)
class _Toy:
    lm: TinyLM
    theta: torch.Tensor
    log_prob: torch.Tensor  # [N, L] log pi of every response's tokens
    ref_log_prob: torch.Tensor
    probs: torch.Tensor  # [N] pi(o)
    targets: dict  # the candidate divergences' exact gradients in theta
    forms: dict  # each shipped form's derivative in log pi at every token


@functools.cache
def _kl_toy() -> _Toy:
    """The toy LM, its reference and the candidates' gradients: built once per process (read-only; every call reads the same)."""
    lm = TinyLM(**_KL_LM)
    theta = perturb(lm.theta0, 0.5, seed=1)
    ref = perturb(theta, 0.6, seed=2)
    lp, ref_lp = lm.token_log_probs(theta).detach(), lm.token_log_probs(ref).detach()
    return _Toy(lm, theta, lp, ref_lp, lm.probs(theta).detach(), _divergence_gradients(lm, theta, ref), _kl_forms(lp, ref_lp))


def _divergence_gradients(lm: TinyLM, theta: torch.Tensor, ref_theta: torch.Tensor) -> dict:
    """The exact gradients of the candidate divergences at ``theta`` (sequences enumerated, prefixes weighted by pi's reach)."""
    th = theta.detach().clone().requires_grad_(True)
    log_seq, log_ref = lm.sequence_log_prob(th), lm.sequence_log_prob(ref_theta).detach()
    p, q = log_seq.exp(), log_ref.exp()
    logits, ref_logits = lm.logits(th), lm.logits(ref_theta).detach()
    log_pi, log_rho = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
    valid = lm.mask > 0
    reach = torch.zeros(lm.n_prefixes, dtype=F64).index_add_(0, lm.prefix_rows[valid], p.detach()[:, None].expand_as(lm.mask)[valid])
    per_prefix = {
        "reverse KL per token": (log_pi.exp() * (log_pi - log_rho)).sum(-1),
        "forward KL per token": (log_rho.exp() * (log_rho - log_pi)).sum(-1),
        "total variation per token": (log_pi.exp() - log_rho.exp()).abs().sum(-1),  # 2 TV: the abs estimator's expected gradient
    }
    objectives = {"reverse KL": (p * (log_seq - log_ref)).sum(), "forward KL": (q * (log_ref - log_seq)).sum(),
                  **{k: (reach * v).sum() for k, v in per_prefix.items()}}
    return {k: torch.autograd.grad(v, th, retain_graph=True)[0] for k, v in objectives.items()}


def _kl_forms(lp: torch.Tensor, ref: torch.Tensor) -> dict:
    """Each shipped form's derivative in log pi at the probe's tokens (on policy), from the package's own forms."""
    def derivative(f):
        x = lp.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(f(x).sum(), x)
        return g

    return {
        "k1": derivative(lambda x: verl_kl_penalty(x, ref, kl_penalty="k1")),
        "k2 (mse), a straight-through k*+, or k1 in the reward on its own token": derivative(lambda x: verl_kl_penalty(x, ref, kl_penalty="k2")),
        "k3": derivative(lambda x: kl_penalty(x, ref, estimator="k3")),
        "low_var_kl (verl's clamped k3)": derivative(lambda x: verl_kl_penalty(x, ref, kl_penalty="low_var_kl")),
        "abs": derivative(lambda x: verl_kl_penalty(x, ref, kl_penalty="abs")),
        "importance-weighted k3 (TRL's bias-corrected KL)": derivative(lambda x: bias_corrected_kl(x, lp.detach(), ref, torch.ones_like(x))),
    }


def kl_gradient(loss: TrainerLoss) -> Answer:
    r"""Which divergence's gradient does the loss's KL term give in expectation?

    Measured on the toy LM ``TinyLM(V=3, L=2)`` (every response enumerated),
    on policy (:math:`\pi_{\mathrm{old}} = \pi_\theta`), the reference a
    perturbed copy: the loss is called on every response as a row with
    :math:`A = 0` (only its KL term moves it), each token's gradient is divided
    by the token's aggregation factor :math:`\kappa` (read with :math:`A = 1`
    and :math:`A = 0` subtracted), and the expected gradient

    .. math::

        g = \sum_o \pi(o) \sum_t \frac{\partial\mathcal L/\partial\log\pi_{ot}}{\kappa_{ot}}\,\nabla_\theta \log\pi(o_t \mid o_{<t}),

    is compared with the exact gradients of the reverse and forward KL of the
    whole responses, and of the per-token reverse KL, forward KL and total
    variation :math:`\sum_t \mathbb E_{o_{<t}}\bigl[\mathrm{D}\bigl(\pi(\cdot \mid o_{<t}), \pi_{\mathrm{ref}}(\cdot \mid o_{<t})\bigr)\bigr]`
    with the prefixes' distribution held fixed (what a per-token loss can
    descend).  The verdict is the one :math:`g` is a multiple of (to
    :data:`RTOL`), the multiple (the KL coefficient) in the evidence;
    otherwise *neither*, with its distance from the reverse KL's direction.
    Per state (:func:`derivations.trust_region.kl_estimator_gradients`,
    :func:`~derivations.trust_region.kl_form_gradients`): ``k2``, the ``+``
    forms, importance-weighted ``k3`` and ``k1`` in the reward give the reverse
    KL; ``k3`` and ``low_var_kl`` the forward KL; ``k1`` nothing; ``abs`` twice
    the total variation.  Over whole responses only ``k1`` in the reward,
    summed over the later tokens, gives the reverse KL of the responses.

    Not applicable when the function does not take ``ref_log_prob`` (or
    neither its loss nor its gradient moves with it).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import kl_gradient
    >>> def grpo_with_k3(old_log_prob, log_prob, advantages, response_mask, ref_log_prob):
    ...     ratio = torch.exp(log_prob - old_log_prob)
    ...     kl = torch.exp(ref_log_prob - log_prob) - (ref_log_prob - log_prob) - 1
    ...     per_token = -ratio * advantages + 0.04 * kl
    ...     return (per_token * response_mask).sum() / response_mask.sum()
    >>> a = kl_gradient(TrainerLoss(grpo_with_k3))
    >>> a.verdict, dict(a.evidence)["coefficient"], dict(a.evidence)["estimator"]
    ('forward KL per token', 0.04, "k3 = low_var_kl (verl's clamped k3)")
    """
    loss = in_float64(require_trainer_loss(loss))
    applies, why = responds(loss, "ref_log_prob")
    if not applies:
        return not_applicable("kl_gradient", why)
    toy = _kl_toy()
    lm, lp, ref = toy.lm, toy.log_prob, toy.ref_log_prob
    mask, valid = lm.mask, lm.mask > 0
    zero, one = torch.zeros_like(lp), torch.ones_like(lp)
    _, g_kl = loss.grad(lp, lp, zero, mask, ref_log_prob=ref)
    _, g_one = loss.grad(lp, lp, one, mask, ref_log_prob=ref)
    kappa = g_kl - g_one  # -dL/dlog pi of the policy term alone, at r = 1, A = 1
    has_policy = bool((kappa[valid] != 0).all())
    c = torch.where(valid, g_kl / (kappa if has_policy else one), zero)
    th = toy.theta.detach().clone().requires_grad_(True)
    (G,) = torch.autograd.grad((toy.probs[:, None] * c * lm.token_log_probs(th)).sum(), th)
    evidence: list = [("kappa_divided_out", has_policy)]
    matched = [name for name, f in toy.forms.items() if _multiple(c[valid], f[valid])[1] <= RTOL]
    evidence.append(("estimator", " = ".join(matched) if matched else None))
    targets = toy.targets
    size = float(G.norm())
    if size <= 1e-12 * float(max(t.norm() for t in targets.values())):
        return Answer("kl_gradient", "no gradient", f"the KL term's expected gradient is 0 (|G| = {size:.1e}): it moves the loss's value, never its expected update",
                      tuple(evidence + [("expected_gradient_norm", size)]))
    for name, target in targets.items():
        s, residual = _multiple(G, target)
        if residual <= RTOL:
            sign = "" if s > 0 else " with a negative coefficient: the loss ascends it"
            per = " (the prefixes' distribution held fixed: a per-token term)" if name.endswith("per token") else " of whole responses"
            return Answer("kl_gradient", name, f"the expected gradient is {s:.6g} x the gradient of the {name.removesuffix(' per token')}{per}{sign}",
                          tuple(evidence + [("coefficient", round(s, 12)), ("residual", residual)]))
    s, residual = _multiple(G, targets["reverse KL per token"])
    return Answer("kl_gradient", "neither", f"the expected gradient is no multiple of a KL's or the total variation's: it is {residual:.3g} "
                  f"(relative) from {s:.4g} x the per-token reverse KL's", tuple(evidence + [("coefficient", round(s, 12)), ("bias", residual)]))


def _multiple(g: torch.Tensor, target: torch.Tensor) -> tuple[float, float]:
    """``(s, relative residual)`` of the least-squares fit ``g = s * target``."""
    tt = float(target @ target)
    if tt == 0:
        return 0.0, math.inf if float(g.norm()) > 0 else 0.0
    s = float(g @ target) / tt
    return s, float((g - s * target).norm()) / max(float(g.norm()), 1e-300)


# ------------------------------------------------------------------ the rollout correction


def _correction_grid():
    """Single-token rows at log-ratios inside every trust region: d1 = log pi - log pi_old, d2 = log pi_old - log mu, two levels, A = +-1."""
    rows = [(d1, d2, level) for d1 in (-0.04, 0.0, 0.05) for d2 in (-0.08, 0.0, 0.06) for level in (-1.2, -2.1)]
    d1, d2, level = (torch.tensor(x, dtype=F64)[:, None] for x in zip(*rows))
    old = level
    new, rollout = old + d1, old - d2
    adv = torch.cat([torch.ones_like(old), -torch.ones_like(old)])
    return torch.cat([new, new]), torch.cat([old, old]), torch.cat([rollout, rollout]), adv


def correction(loss: TrainerLoss) -> Answer:
    r"""Is the rollout-correction weight detached, and applied once?

    Tokens were sampled by the rollout engine :math:`\mu`; a correct loss gives
    each token inside the trust region the gradient weight
    :math:`\pi_\theta/\mu` in all: the PPO ratio against :math:`\pi_{\mathrm{old}}`
    times a detached :math:`\pi_{\mathrm{old}}/\mu` (verl's decoupled mode), the
    PPO ratio against :math:`\mu` alone (verl's ``bypass_mode`` with
    ``ppo_clip``: old log-probs := rollout log-probs, no second weight), or
    :math:`-\mathrm{sg}(\pi_\theta/\mu)\,A\log\pi_\theta` (``bypass_mode`` with
    ``reinforce``).  The weight is read with each token alone in a row,
    :math:`w = -(\partial\mathcal L/\partial\log\pi)/(\kappa A)`, at log-ratios
    within :math:`\pm 0.08` (inside every clip and cap), with
    :math:`\pi_{\mathrm{old}} \ne \mu` and with :math:`\pi_{\mathrm{old}} = \mu`
    (as bypass mode passes them), and compared with

    * :math:`\pi/\mu`: **once**;
    * :math:`\pi/\pi_{\mathrm{old}}`: **not applied** (the rollout log-prob changes nothing);
    * :math:`\pi/\mu` times :math:`\pi/\mu`, :math:`\pi/\pi_{\mathrm{old}}` or
      :math:`\pi_{\mathrm{old}}/\mu`: **twice** (a PPO ratio already against
      the rollout policy, times a rollout weight);
    * otherwise **not detached** when a gradient reaches ``rollout_log_prob``
      (a weight built from it without ``.detach()``: its own derivative joins
      the gradient), else **other**.

    The evidence says whether the weight is detached (no gradient in
    ``rollout_log_prob``) whatever the verdict.

    Not applicable when the function does not take ``rollout_log_prob``.

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import correction
    >>> def bypass_ppo_times_weight(old_log_prob, log_prob, advantages, response_mask, rollout_log_prob):
    ...     ratio = torch.exp(log_prob - old_log_prob)         # in bypass mode old_log_prob is the rollout's
    ...     weight = torch.exp(log_prob - rollout_log_prob).detach().clamp(max=2.0)
    ...     per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages) * weight
    ...     return (per_token * response_mask).sum() / response_mask.sum()
    >>> a = correction(TrainerLoss(bypass_ppo_times_weight))
    >>> a.verdict, a.ok
    ('twice', False)
    >>> print(a.explanation)
    the token weight is pi/mu x pi/pi_old: the correction is applied twice (equal to (pi/mu)^2 when old log-probs are the rollout's, bypass mode)
    """
    loss = in_float64(require_trainer_loss(loss))
    applies, why = responds(loss, "rollout_log_prob")
    if not applies:
        return not_applicable("correction", why)
    new, old, rollout, adv = _correction_grid()
    mask = torch.ones_like(new)
    kappa = -advantage_gradient(loss, old, old, torch.ones_like(old), mask, rollout_log_prob=old)
    if not bool((kappa != 0).all()) or not bool(torch.isfinite(kappa).all()):
        return Answer("correction", "other", "no gradient at r = 1 with the rollout log-probs equal to the old ones: no weight to read", ok=False)
    w = -advantage_gradient(loss, old, new, adv, mask, rollout_log_prob=rollout) / (kappa * adv)
    pi_mu, pi_old, old_mu = (new - rollout).exp(), (new - old).exp(), (old - rollout).exp()
    candidates = {
        "once": (pi_mu, "the token weight is pi/mu: the correction is applied once"),
        "not applied": (pi_old, "the token weight is pi/pi_old: the rollout log-probs change nothing, so the sampler's mismatch is not corrected"),
        "twice pi/mu": (pi_mu * pi_mu, "the token weight is (pi/mu)^2: the correction is applied twice"),
        "twice pi/pi_old": (pi_mu * pi_old, "the token weight is pi/mu x pi/pi_old: the correction is applied twice "
                                            "(equal to (pi/mu)^2 when old log-probs are the rollout's, bypass mode)"),
        "twice pi_old/mu": (pi_mu * old_mu, "the token weight is pi/mu x pi_old/mu: the rollout weight is applied on top of a ratio "
                                            "that already corrects for mu"),
    }
    leak = _rollout_gradient(loss, old, new, adv, mask, rollout)
    evidence = (("weight_over_pi_mu", (float((w / pi_mu).min()), float((w / pi_mu).max()))), ("detached", leak == 0),
                ("rollout_gradient", leak))
    for key, (target, why) in candidates.items():
        if close(w, target):
            verdict = key.split(" pi")[0]
            if leak and verdict == "once":
                why += " (its weight is not detached, but depends on no log-prob the optimizer moves)"
            return Answer("correction", verdict, why, evidence, ok=verdict == "once")
    if leak:
        return Answer("correction", "not detached", f"the correction weight is not detached (the loss has a gradient up to {leak:.3g} in "
                      f"rollout_log_prob), so its own derivative joins the gradient: the token weight is {farthest(w / pi_mu):.6g} x pi/mu "
                      "at the farthest probe", evidence, ok=False)
    return Answer("correction", "other", f"the token weight is neither pi/mu nor a product of two ratios: up to {farthest(w / pi_mu):.6g} x pi/mu",
                  evidence, ok=False)


def _rollout_gradient(loss: TrainerLoss, old, new, adv, mask, rollout) -> float:
    """The largest gradient of the loss in the rollout log-probs: 0 when every weight built from them is detached."""
    mu = rollout.clone().requires_grad_(True)
    value = loss(old, new, adv, mask, rollout_log_prob=mu)
    g = torch.autograd.grad(value, mu, allow_unused=True)[0] if value.requires_grad else None
    return 0.0 if g is None else float(g.abs().max())


# ------------------------------------------------------------------ the sequence weight


def _lagging_unigram(V: int = 3, L: int = 4, lag: float = 2e-5, seed: int = 6):
    """Every response of lengths 1..L from i.i.d. tokens: ``(log pi, log mu, mask, mu(response), lengths)``, mu a sampler that lags pi."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(V, generator=gen, dtype=F64)
    log_pi = torch.log_softmax(z, -1)
    log_mu = torch.log_softmax(z + lag * torch.randn(V, generator=gen, dtype=F64), -1)
    rows = [seq for n in range(1, L + 1) for seq in itertools.product(range(V), repeat=n)]
    tokens = torch.zeros(len(rows), L, dtype=torch.int64)
    lengths = torch.tensor([len(seq) for seq in rows])
    for i, seq in enumerate(rows):
        tokens[i, :len(seq)] = torch.tensor(seq)
    mask = probe_mask(L, lengths.tolist())
    lp, old = log_pi[tokens] * mask, log_mu[tokens] * mask
    return lp, old, mask, old.sum(1).exp(), lengths


def sequence_weight_scale(loss: TrainerLoss) -> Answer:
    r"""How does the loss's sequence importance weight spread as responses grow longer?

    A sequence weight is read off the gradient: with each response a row,
    :math:`w(o) = g_{ot}/g_{ot}|_{r = 1}` (the aggregation and the advantage
    cancel), the same on every token of the row.  The responses are every
    sequence of :math:`|o| = 1..4` tokens of a policy :math:`\pi` over 3 tokens
    whose sampler :math:`\mu` lags it (each token i.i.d., so the spread's
    growth is exact).  The form is named by an exact identity on every
    response: :math:`\log w = \sum_t \log r_t` (**product** of the token
    ratios: verl's and TRL's sequence IS, verl's ``rollout_is="sequence"``) or
    :math:`\log w = \frac{1}{|o|}\sum_t \log r_t` (**geometric mean**: GSPO,
    ms-swift, OpenRLHF's ``seq-mask-tis``).  The spread is
    :math:`\mathrm{Var}_\mu[\log w \mid |o|]`, and the growth is the slope
    of :math:`\log\mathrm{Var}` against :math:`\log |o|`: with
    independent tokens 1 for a product (the log-weight is a sum of
    :math:`|o|` log-ratios, and :math:`\mathrm{Var}_\mu[w] = (\mathbb E_\mu[r^2])^{|o|} - 1`
    grows exponentially) and -1 for a geometric mean (:math:`1/|o|^2`
    of it: it concentrates at 1, the price being that it is no importance weight
    of the response).  The lag is small (:math:`2\times 10^{-5}` per logit), so
    the weight stays inside any clip; the slope does not depend on it.

    Not applicable when a token's gradient does not depend on the other tokens
    of its row (no sequence weight).

    Examples
    --------
    >>> import torch
    >>> from numeric.variants.trainer_loss import TrainerLoss
    >>> from numeric.variants import sequence_weight_scale
    >>> def gspo(old_log_prob, log_prob, advantages, response_mask):
    ...     n = response_mask.sum(-1, keepdim=True)
    ...     s = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True) / n)
    ...     per_token = -torch.minimum(s * advantages, s.clamp(1 - 3e-4, 1 + 4e-4) * advantages)
    ...     return ((per_token * response_mask).sum(-1) / n.squeeze(-1)).mean()
    >>> a = sequence_weight_scale(TrainerLoss(gspo))
    >>> print(a.verdict, round(dict(a.evidence)["slope"], 6))
    geometric mean -1.0
    """
    loss = in_float64(require_trainer_loss(loss))
    if not row_coupled(loss):
        return not_applicable("sequence_weight_scale", "a token's gradient does not depend on the other tokens of its row: no sequence weight")
    lp, old, mask, mu, n = _lagging_unigram()
    valid = mask > 0
    adv = torch.ones_like(lp)
    g1, g = advantage_gradient(loss, old, old, adv, mask), advantage_gradient(loss, old, lp, adv, mask)
    if not bool((g1[valid] != 0).all()):
        return Answer("sequence_weight_scale", "other", "some token has no gradient at r = 1: no weight to read")
    w = torch.where(valid, g / torch.where(valid, g1, adv), adv)
    log_w = w[:, 0].log()
    same_in_row = bool(((w - w[:, :1]).abs() <= 1e-9 * w[:, :1].abs())[valid].all())
    d = (lp - old) * mask
    forms = {"product": d.sum(1), "geometric mean": d.sum(1) / n}
    scale = float(log_w.abs().max())
    name = next((k for k, f in forms.items() if same_in_row and float((log_w - f).abs().max()) <= 1e-6 * scale), "other")
    lengths = sorted(set(n.tolist()))
    variances = []
    for k in lengths:
        p = mu[n == k] / mu[n == k].sum()
        variances.append(float(p @ (log_w[n == k] - float(p @ log_w[n == k])) ** 2))
    slope = float(np.polyfit(np.log(lengths), np.log(variances), 1)[0])
    evidence = (("lengths", tuple(lengths)), ("log_weight_variance", tuple(variances)), ("slope", slope), ("same_on_every_token", same_in_row))
    if name == "other":
        return Answer("sequence_weight_scale", "other", "the weight is neither the product nor the geometric mean of the token ratios"
                      + (" (it differs between the tokens of a row)" if not same_in_row else "") + f"; Var[log w | n] grows as n^{slope:.2f}", evidence)
    growth = "grows" if slope > 0 else "shrinks"
    return Answer("sequence_weight_scale", name, f"{name if name == 'geometric mean' else 'product'} of the token ratios: "
                  f"Var[log w | n] {growth} as n^{slope:.2f} (n = {lengths[0]}..{lengths[-1]}, a sampler that lags)", evidence)


# ------------------------------------------------------------------ every shipped form, asked


def _grpo_plus(kl_term, beta: float):
    """A GRPO-style token-mean loss plus ``beta`` times a per-token KL term, as verl's ``use_kl_loss`` and TRL's ``beta`` add it."""
    def loss(old_log_prob, log_prob, advantages, response_mask, ref_log_prob):
        ratio = torch.exp(log_prob - old_log_prob)
        per_token = -ratio * advantages + beta * kl_term(log_prob, ref_log_prob, old_log_prob, response_mask)
        return (per_token * response_mask).sum() / response_mask.sum()
    return loss


def _k1_in_the_reward(beta: float):
    """verl's ``use_kl_in_reward``: the reward less beta k1 of the sampled tokens, returned to each token as its reward-to-go."""
    def loss(old_log_prob, log_prob, advantages, response_mask, ref_log_prob):
        k1 = ((old_log_prob - ref_log_prob) * response_mask).detach()
        to_go = k1.flip(-1).cumsum(-1).flip(-1)
        ratio = torch.exp(log_prob - old_log_prob)
        return (-ratio * (advantages - beta * to_go) * response_mask).sum() / response_mask.sum()
    return loss


def _verl(name: str):
    return lambda lp, ref, old, mask: verl_kl_penalty(lp, ref, mask, kl_penalty=name)


KL_FORMS = (
    (r"k_1", "verl kl, k1", _grpo_plus(_verl("k1"), 0.1)),
    (r"k_2", "verl mse, k2", _grpo_plus(_verl("k2"), 0.1)),
    (r"k_3", "TRL beta (k3, unclamped)", _grpo_plus(lambda lp, ref, old, mask: kl_penalty(lp, ref, mask, estimator="k3"), 0.1)),
    (r"\mathrm{clamp}(k_3)", "verl low_var_kl, k3", _grpo_plus(_verl("low_var_kl"), 0.1)),
    (r"|\Delta|", "verl abs", _grpo_plus(_verl("abs"), 0.1)),
    (r"k_1^{+}", "verl k1+", _grpo_plus(_verl("k1+"), 0.1)),
    (r"k_3^{+}", "verl k3+, low_var_kl+", _grpo_plus(_verl("k3+"), 0.1)),
    (r"|\Delta|^{+}", "verl abs+", _grpo_plus(_verl("abs+"), 0.1)),
    (r"\rho\,k_3", "TRL use_bias_correction_kl", _grpo_plus(lambda lp, ref, old, mask: bias_corrected_kl(lp, old, ref, mask), 0.1)),
    (r"-k_1 \text{ in the reward}", "verl use_kl_in_reward", _k1_in_the_reward(0.1)),
)
"""``(form, the trainers' name, a trainer-style loss with the form at beta = 0.1)`` for :func:`kl_form_table`."""


def kl_form_table() -> str:
    r"""Every KL form verl and TRL ship, asked :func:`kl_gradient` in a trainer-style loss: a LaTeX array.

    Each row is a GRPO-style token-mean loss plus :math:`\beta = 0.1` times the
    form (``k1`` in the reward: the reward less :math:`\beta k_1`, to go), its
    verdict on the toy LM and the coefficient read off (:math:`\beta` when the
    form descends a divergence, the KL term and the policy term sharing the
    aggregation).

    Examples
    --------
    >>> from numeric.variants.divergence_questions import kl_form_table
    >>> for line in kl_form_table().splitlines()[2:6]:
    ...     print(line)
    k_1 & \text{verl kl, k1} & \text{no gradient} & \text{--} \\
    k_2 & \text{verl mse, k2} & \text{reverse KL per token} & 0.1 \\
    k_3 & \text{TRL beta (k3, unclamped)} & \text{forward KL per token} & 0.1 \\
    \mathrm{clamp}(k_3) & \text{verl low\_var\_kl, k3} & \text{forward KL per token} & 0.1 \\
    """
    lines = [r"\begin{array}{llll}", r"\text{form} & \text{in the trainer} & \text{descends (toy LM)} & \text{coefficient} \\ \hline"]
    for form, name, loss in KL_FORMS:
        answer = kl_gradient(TrainerLoss(loss))
        coefficient = dict(answer.evidence).get("coefficient") if answer.verdict not in ("no gradient", "neither") else None
        cell = r"\text{--}" if coefficient is None else f"{coefficient:.6g}"
        lines.append(rf"{form} & \text{{{name.replace('_', chr(92) + '_')}}} & \text{{{answer.verdict}}} & {cell} \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)
