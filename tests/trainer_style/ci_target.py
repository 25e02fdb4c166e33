"""A file a trainer's CI points the command at: a correct policy loss, a broken one, and an estimator."""

import torch


def correct_loss(old_log_prob, log_prob, advantages, response_mask):
    """PPO, seq-mean-token-sum: unbiased."""
    ratio = torch.exp(log_prob - old_log_prob)
    per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages)
    kept = torch.where(response_mask > 0, per_token, torch.zeros_like(per_token))
    return kept.sum() / response_mask.shape[0]


def broken_loss(old_log_prob, log_prob, advantages, response_mask):
    """The same with the ratio's detach misplaced: the weight is r * (1 + log pi)."""
    ratio = torch.exp(log_prob - old_log_prob)
    per_token = -ratio * advantages * log_prob
    kept = torch.where(response_mask > 0, per_token, torch.zeros_like(per_token))
    return kept.sum() / response_mask.shape[0]


def renamed_loss(logprobs, old_logprobs, advantages, mask):
    """Token IS, token-mean, with its own argument names."""
    per_token = -torch.exp(logprobs - old_logprobs) * advantages
    return torch.where(mask > 0, per_token, torch.zeros_like(per_token)).sum() / mask.sum()


def first_as_baseline(rewards):
    """Every answer minus answer 1's reward: depends on the labelling of the answers."""
    return rewards - rewards[..., :1]


def rloo(rewards):
    """RLOO on [B, G] rewards."""
    G = rewards.shape[-1]
    return rewards - (rewards.sum(-1, keepdims=True) - rewards) / (G - 1)
