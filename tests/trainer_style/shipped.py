"""Current policy losses of five trainers, transcribed in our own words (issue 32): each with its trainer's normalisation
and the dtype it computes in, called as check_policy_loss calls a loss (old_log_prob, log_prob, advantages, response_mask).

Read at (repository, commit, file:lines in each function's docstring):

* prime-rl  PrimeIntellect-ai/prime-rl 559b44772e471d1538537b8805cc77f3824a5e64 (2026-08-21)
* SkyRL     NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 (2026-08-21)
* slime     THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 (2026-08-21)
* AReaL     areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d (2026-08-22)
* ms-swift  modelscope/ms-swift 3602360a562313afbf2ef6065fdf61f271a2c5b9 (2026-08-22)

A trainer that spreads its normaliser over micro-batches and ranks (a global token count, advantages pre-scaled by it,
a per-sample mean over the step's batch) computes, over one whole batch, the full-batch aggregation written here.
"""

import torch


def _token_mean(per_token, mask):
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


def _sample_mean(per_token, mask):
    """slime's and ms-swift's per-sample mean: each row's masked mean (an empty row counts as 1 token), over the B rows."""
    return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()


def _ppo(ratio, advantages, low, high):
    return torch.maximum(-ratio * advantages, -ratio.clamp(1 - low, 1 + high) * advantages)


def _float32_ratio(log_prob, old_log_prob):
    """SkyRL's safe exponential: the log-ratio cast to float32, clamped to [-20, 20], exponentiated, cast back."""
    return torch.exp((log_prob - old_log_prob).float().clamp(-20, 20)).to(log_prob.dtype)


def prime_rl_default(old_log_prob, log_prob, advantages, response_mask, dppo_mask_low=0.2, dppo_mask_high=0.2, kl_tau=1e-3):
    """prime-rl's default loss (DPPO binary TV + a squared log-ratio): src/prime_rl/trainer/rl/loss.py:109-161, the global
    token count train.py:301-323.  Tokens whose probability moved past delta in the advantage's direction are masked;
    the ratio keeps its gradient; tau (log r)^2 on every valid token; the inputs' dtype."""
    log_ratio = log_prob - old_log_prob
    p, p_old = torch.exp(log_prob), torch.exp(old_log_prob)
    masked = torch.where(advantages > 0, p - p_old > dppo_mask_high, p - p_old < -dppo_mask_low)
    keep = (~masked).to(log_prob.dtype)
    return _token_mean(-keep * advantages * torch.exp(log_ratio) + kl_tau * log_ratio**2, response_mask)


def prime_rl_ipo(old_log_prob, log_prob, advantages, response_mask, ipo_threshold=0.1, kl_tau=1e-3):
    """prime-rl's ``ipo``: src/prime_rl/trainer/rl/loss.py:164-196.  The mask |p - p_old| <= delta holds for both signs of A."""
    log_ratio = log_prob - old_log_prob
    keep = ((torch.exp(log_prob) - torch.exp(old_log_prob)).abs() <= ipo_threshold).to(log_prob.dtype)
    return _token_mean(-keep * advantages * torch.exp(log_ratio) + kl_tau * log_ratio**2, response_mask)


def skyrl_regular(old_log_prob, log_prob, advantages, response_mask, eps_clip_low=0.2, eps_clip_high=0.2):
    """SkyRL's default ``regular`` PPO: skyrl/backends/skyrl_train/utils/ppo_utils.py:555-587, the ratio by torch_utils.py:187-192
    (float32), token_mean by advantages pre-scaled with the mini-batch's token count (ppo_utils.py:1152-1220)."""
    return _token_mean(_ppo(_float32_ratio(log_prob, old_log_prob), advantages, eps_clip_low, eps_clip_high), response_mask)


def skyrl_rollout_is(old_log_prob, log_prob, advantages, response_mask, eps_clip_low=0.2, eps_clip_high=0.2):
    """SkyRL's ``rollout_is``: ppo_utils.py:824-863.  rho against the sampler, in float32, kept strictly inside
    (1 - eps_low, 1 + eps_high) for both signs of A, detached; old_log_prob plays the sampler's log-probs here."""
    rho = _float32_ratio(log_prob, old_log_prob)
    inside = ((rho > 1 - eps_clip_low) & (rho < 1 + eps_clip_high)).to(rho.dtype)
    return _token_mean(-(rho * inside).detach() * advantages * log_prob, response_mask)


def skyrl_cispo(old_log_prob, log_prob, advantages, response_mask, cispo_eps_clip_low=1.0, cispo_eps_clip_high=4.0):
    """SkyRL's ``cispo`` with its defaults: ppo_utils.py:732-821, config.py:748-772.  The band [1 - 1, 1 + 4] is a cap at 5."""
    weight = _float32_ratio(log_prob, old_log_prob).clamp(1 - cispo_eps_clip_low, 1 + cispo_eps_clip_high).detach()
    return _token_mean(-weight * advantages * log_prob, response_mask)


def slime_gspo(old_log_prob, log_prob, advantages, response_mask, eps_clip=4e-4):
    """slime's GSPO as its large-model scripts run it (--eps-clip 4e-4): slime/utils/ppo_utils.py:95-148, per-sample mean
    (slime/backends/megatron_utils/cp_utils.py:47-124).  The row's geometric-mean ratio, with gradient through every token."""
    n = response_mask.sum(-1, keepdim=True).clamp(min=1)
    s = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True) / n).expand_as(log_prob)
    return _sample_mean(_ppo(s, advantages, eps_clip, eps_clip), response_mask)


def slime_cispo(old_log_prob, log_prob, advantages, response_mask, eps_clip=0.2, eps_clip_high=0.2):
    """slime's CISPO: slime/utils/ppo_utils.py:151-171, a two-sided band on the detached ratio, per-sample mean."""
    weight = torch.exp(log_prob - old_log_prob).clamp(1 - eps_clip, 1 + eps_clip_high).detach()
    return _sample_mean(-weight * advantages * log_prob, response_mask)


def areal_decoupled_rejection(old_log_prob, log_prob, advantages, response_mask, eps_clip=0.2, upper=5.0):
    """AReaL's decoupled PPO with token rejection sampling (ratio <= 5): areal/utils/functional/functional.py:185-437 and
    452-596, the proximal policy reused from the training pass (prox_logp_method="reuse_train_logp": ell_prox = sg(ell)),
    old_log_prob plays the behaviour log-probs.  The behaviour weight is computed in float32 and detached; a rejected
    token stays in the denominator."""
    prox = log_prob.detach()
    rho = torch.exp(prox.float() - old_log_prob.float()).detach()
    kept = rho * (rho <= upper).to(rho.dtype)
    ratio = torch.exp(log_prob - prox)
    return _token_mean(kept.to(log_prob.dtype) * _ppo(ratio, advantages, eps_clip, eps_clip), response_mask)


def areal_gspo(old_log_prob, log_prob, advantages, response_mask, eps_clip=0.2):
    """AReaL's sequence-level importance sampling (GSPO): functional.py:56-149 and 530-535; a token mean over the batch, so a
    row weighs n_i / N (advantages are constant over a row here, as an outcome advantage is)."""
    n = response_mask.sum(-1, keepdim=True).clamp(min=1)
    s = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True) / n).expand_as(log_prob)
    return _token_mean(_ppo(s, advantages, eps_clip, eps_clip), response_mask)


def swift_cispo(old_log_prob, log_prob, advantages, response_mask, epsilon_high=5.0):
    """ms-swift's ``cispo``: swift/rlhf_trainers/grpo_trainer.py:1050-1052 (an absolute cap at epsilon_high, as its docs set it),
    normalised by the generation batch's token count (grpo_trainer.py:1140-1143)."""
    weight = torch.exp(log_prob - old_log_prob).clamp(max=epsilon_high).detach()
    return _token_mean(-weight * advantages * log_prob, response_mask)


def swift_gspo(old_log_prob, log_prob, advantages, response_mask, epsilon=3e-4, epsilon_high=4e-4):
    """ms-swift's GSPO (importance_sampling_level="sequence", its docs' --epsilon 3e-4 --epsilon_high 4e-4):
    grpo_trainer.py:1025-1039, 1062-1072 and 1096-1098, the default ``grpo`` per-sample mean."""
    n = response_mask.sum(-1, keepdim=True).clamp(min=1)
    s = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True) / n).expand_as(log_prob)
    return _sample_mean(_ppo(s, advantages, epsilon, epsilon_high), response_mask)
