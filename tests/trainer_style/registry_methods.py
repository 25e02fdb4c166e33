"""Issue 29's policy losses as their trainers write them, in our own words: each with its trainer's aggregation, called as
check_policy_loss calls a loss (old_log_prob, log_prob, advantages, response_mask).

Read at (repository, commit, file:lines in each function's docstring):

* verl      verl-project/verl 1dda039b9c6311889a9c9a26040677e1254814f9 (2026-08-22)
* TRL       huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 (2026-07-24)
* OpenRLHF  OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 (2026-08-13)
* SkyRL     NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 (2026-08-21)

Where the trainer's ratio runs against a third log-probability (OpenRLHF's corrections against the rollout's), the function is
the trainer's loss on a batch's first step: the old log-probs are the current ones in value (detached), and ``old_log_prob``
plays the rollout log-probs.  A trainer that spreads its normaliser over micro-batches and ranks computes, over one whole batch,
the full-batch aggregation written here.
"""

import torch


def _verl_token_mean(per_token, mask):
    """verl agg_loss "token-mean" with global_batch_info empty (core_algos.py:1163-1169): the masked sum over the mask's count."""
    return torch.where(mask.bool(), per_token, 0.0).mul(mask).sum() / mask.sum()


def _ppo(ratio, advantages, low, high):
    return -torch.minimum(ratio * advantages, ratio.clamp(1 - low, 1 + high) * advantages)


def verl_dppo_tv(old_log_prob, log_prob, advantages, response_mask, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0):
    """verl's ``dppo_tv`` (core_algos.py:1379-1457): the ratio truncated at clip_ratio_c and detached, a token kept while its
    probability moved by at most clip_ratio_high up (A > 0) or clip_ratio_low down (A <= 0); REINFORCE's -A log pi times both."""
    ratio = torch.exp(torch.clamp(log_prob - old_log_prob, -20.0, 20.0))
    truncated = torch.clamp(ratio, max=clip_ratio_c).detach()
    change = torch.exp(log_prob) - torch.exp(old_log_prob)
    valid = torch.where(advantages > 0, change <= clip_ratio_high, change >= -clip_ratio_low).detach().float()
    return _verl_token_mean(-advantages * truncated * log_prob * valid, response_mask)


def verl_dppo_kl(old_log_prob, log_prob, advantages, response_mask, clip_ratio_low=0.05, clip_ratio_high=0.05, clip_ratio_c=3.0):
    """verl's ``dppo_kl`` (core_algos.py:1460-1542): as dppo_tv with the binary KL of the old and new probability (1e-8 guards),
    a token kept when it is under the threshold or its probability moved against the advantage's direction."""
    ratio = torch.exp(torch.clamp(log_prob - old_log_prob, -20.0, 20.0))
    truncated = torch.clamp(ratio, max=clip_ratio_c).detach()
    p, p0 = torch.exp(log_prob), torch.exp(old_log_prob)
    kl = p0 * (old_log_prob - log_prob) + (1 - p0) * torch.log((1.0 - p0 + 1e-8) / (1.0 - p + 1e-8))
    valid = torch.where(advantages > 0, (kl <= clip_ratio_high) | (p <= p0), (kl <= clip_ratio_low) | (p >= p0)).detach().float()
    return _verl_token_mean(-advantages * truncated * log_prob * valid, response_mask)


def verl_dro(old_log_prob, log_prob, advantages, response_mask, dro_beta=0.1):
    """verl's ``dro`` (core_algos.py:2013-2043): -(A log pi - beta/2 (log pi - log pi_old)^2), token-mean."""
    log_ratio = log_prob - old_log_prob
    return _verl_token_mean(-(log_prob * advantages - 0.5 * dro_beta * log_ratio.square()), response_mask)


def trl_luspo(old_log_prob, log_prob, advantages, response_mask, epsilon=0.2, epsilon_high=0.2):
    """TRL's ``luspo`` at importance_sampling_level="sequence" (grpo_trainer.py:3054-3066, 3083-3091, 3143-3148): the row's
    geometric-mean ratio, PPO's clip on it, a (B, 1) loss times the row's length, averaged over the rows."""
    n = response_mask.sum(-1, keepdim=True)
    s = torch.exp(((log_prob - old_log_prob) * response_mask).sum(-1, keepdim=True) / n.clamp(min=1.0))
    return (_ppo(s, advantages[:, :1], epsilon, epsilon_high) * n).mean()


def trl_luspo_token_level(old_log_prob, log_prob, advantages, response_mask, epsilon=0.2, epsilon_high=0.2):
    """TRL's ``luspo`` at importance_sampling_level="token" (its warning's case, grpo_trainer.py:891-895, 3143-3148): the per-token
    loss is (B, T), times the row's length, and ``.mean()`` averages every slot, padding included: the mask never enters."""
    ratio = torch.exp(log_prob - old_log_prob)
    return (_ppo(ratio, advantages, epsilon, epsilon_high) * response_mask.sum(1, keepdim=True)).mean()


def trl_opsm(old_log_prob, log_prob, advantages, response_mask, epsilon=0.2, epsilon_high=0.2, off_policy_mask_threshold=0.05):
    """TRL's off-policy sequence mask with loss_type "grpo" (grpo_trainer.py:2920-2939, 3039-3052, 3083-3128): a row whose
    advantage is negative and whose mean of (sampler - current) log-probs exceeds the threshold is dropped; old_log_prob plays the
    sampler's; the per-sequence mean over B keeps the dropped row's tokens in its n_i."""
    kl = ((old_log_prob - log_prob.detach()) * response_mask).sum(1, keepdim=True) / response_mask.sum(1, keepdim=True).clamp(min=1.0)
    keep = ((advantages[:, :1] >= 0) | (kl <= off_policy_mask_threshold)).to(response_mask.dtype)
    per_token = _ppo(torch.exp(log_prob - old_log_prob), advantages, epsilon, epsilon_high) * keep
    return ((per_token * response_mask).sum(-1) / response_mask.sum(-1).clamp(min=1.0)).mean()


def trl_rloo(old_log_prob, log_prob, advantages, response_mask, epsilon=0.2, epsilon_high=0.2):
    """TRL's RLOOTrainer loss (rloo_trainer.py:1655-1694): the row's summed log-probs against the stored old sum, the product of the
    ratios, PPO's clip on it, the plain mean over the rows."""
    log_ratio = (log_prob * response_mask).sum(1) - (old_log_prob * response_mask).sum(1)
    return _ppo(torch.exp(log_ratio), advantages[:, 0], epsilon, epsilon_high).mean()


def openrlhf_icepop(old_log_prob, log_prob, advantages, response_mask, low=0.5, high=5.0):
    """OpenRLHF's PolicyLoss "ppo" with vllm_is_correction_type "icepop" (loss.py:161-227, aggregate_loss 11-39), on a batch's first
    step: old_log_probs := log_probs (detached), old_log_prob plays rollout_log_probs; the token weight exp(old - rollout) kept
    within [low, high] for both signs, times PPO's loss, token-mean."""
    old = log_prob.detach()
    loss = _ppo(torch.exp((log_prob - old).clamp(-20.0, 20.0)), advantages, 0.2, 0.2)
    vllm_is = torch.exp(old - old_log_prob).detach()
    loss = vllm_is * ((vllm_is >= low) & (vllm_is <= high)) * loss
    return (loss * response_mask).sum() / response_mask.sum()


def openrlhf_seq_mask_tis(old_log_prob, log_prob, advantages, response_mask, low=0.5, high=5.0):
    """OpenRLHF's PolicyLoss "ppo" with vllm_is_correction_type "seq-mask-tis" (loss.py:161-227, masked_mean utils.py:166-169), on a
    batch's first step: the row kept when the geometric mean of exp(old - rollout) is within [low, high], each token weighted by its
    own raw ratio (no clamp), times PPO's loss, token-mean."""
    old = log_prob.detach()
    loss = _ppo(torch.exp((log_prob - old).clamp(-20.0, 20.0)), advantages, 0.2, 0.2)
    rollout_log_ratio = old - old_log_prob
    seq_is = torch.exp((rollout_log_ratio * response_mask).sum(-1) / response_mask.sum(-1))
    seq_mask = (seq_is >= low) & (seq_is <= high)
    loss = seq_mask.unsqueeze(-1) * torch.exp(rollout_log_ratio).detach() * loss
    return (loss * response_mask).sum() / response_mask.sum()


def skyrl_dppo(old_log_prob, log_prob, advantages, response_mask, delta_low=0.2, delta_high=0.2):
    """SkyRL's ``dppo`` with dppo_type "binary_tv" (ppo_utils.py:866-935): the ratio with its gradient (float32, log-ratio clamped
    at +-20), zeroed where the probability moved past delta in the advantage's direction; token_mean by pre-scaled advantages."""
    ratio = torch.exp((log_prob - old_log_prob).float().clamp(-20, 20)).to(log_prob.dtype)
    with torch.no_grad():
        diff = torch.exp(log_prob) - torch.exp(old_log_prob)
        mask = torch.ones_like(advantages)
        mask[(advantages > 0) & (diff > delta_high)] = 0.0
        mask[(advantages < 0) & (-diff > delta_low)] = 0.0
    return (-(ratio * advantages * mask) * response_mask).sum() / response_mask.sum().clamp(min=1)


def skyrl_importance_sampling(old_log_prob, log_prob, advantages, response_mask):
    """SkyRL's ``importance_sampling`` (ppo_utils.py:1095-1142): -exp(log pi - log pi_old) A, unclamped, summed with pre-scaled
    advantages (token_mean)."""
    return (-(torch.exp(log_prob - old_log_prob) * advantages) * response_mask).sum() / response_mask.sum().clamp(min=1)
