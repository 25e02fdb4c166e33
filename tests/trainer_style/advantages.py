"""Group-advantage estimators written the way trainers write them, from the papers and the peers' signatures.

verl convention: ``fn(token_level_rewards [N, T], response_mask [N, T], index, epsilon=1e-6, ...)
-> (advantages [N, T], returns [N, T])`` with groups found through a dict keyed by the index.
Written for the tests of :mod:`numeric.variants`; no trainer's code is copied.
"""

from collections import defaultdict

import torch


def _groups(index):
    members = defaultdict(list)
    for k, uid in enumerate(index):
        members[uid].append(k)
    return members.values()


def _broadcast(scores, response_mask):
    return scores[:, None] * response_mask, scores[:, None] * response_mask


def grpo_advantage(token_level_rewards, response_mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
    """GRPO (Shao et al. 2024): (R - mean) / (std + eps) within each group, Bessel std; Dr. GRPO without the std."""
    scores = token_level_rewards.sum(-1)
    out = torch.zeros_like(scores)
    for rows in _groups(index):
        s = scores[rows]
        if len(rows) == 1:
            continue
        centred = s - s.mean()
        out[rows] = centred / (s.std() + epsilon) if norm_adv_by_std_in_grpo else centred
    return _broadcast(out, response_mask)


def rloo_advantage(token_level_rewards, response_mask, index, epsilon=1e-6):
    """RLOO (Kool et al. 2019): R minus the mean of the others' rewards."""
    scores = token_level_rewards.sum(-1)
    out = torch.zeros_like(scores)
    for rows in _groups(index):
        s = scores[rows]
        if len(rows) > 1:
            out[rows] = s - (s.sum() - s) / (len(rows) - 1)
    return _broadcast(out, response_mask)


def reinforce_pp_baseline_advantage(token_level_rewards, response_mask, index, epsilon=1e-6):
    """REINFORCE++-baseline (Hu 2025): subtract the group mean, then whiten over every token of the batch."""
    scores = token_level_rewards.sum(-1)
    centred = scores.clone()
    for rows in _groups(index):
        centred[rows] = scores[rows] - scores[rows].mean()
    tokens = centred[:, None] * response_mask
    n = response_mask.sum()
    mean = tokens.sum() / n
    var = (((tokens - mean) * response_mask) ** 2).sum() / (n - 1)
    adv = (tokens - mean) / torch.sqrt(var + 1e-8) * response_mask
    return adv, adv


def opo_advantage(token_level_rewards, response_mask, index, epsilon=1e-6):
    """OPO (Hao et al. 2025): the length-weighted mean reward of the group as baseline."""
    scores = token_level_rewards.sum(-1)
    lengths = response_mask.sum(-1)
    out = torch.zeros_like(scores)
    for rows in _groups(index):
        if len(rows) > 1:
            out[rows] = scores[rows] - (lengths[rows] * scores[rows]).sum() / lengths[rows].sum()
    return _broadcast(out, response_mask)


def passk_advantage(token_level_rewards, response_mask, index, epsilon=1e-6):
    """Pass@k (Chen et al. 2025): only the group's best response learns, with r_max - r_second."""
    scores = token_level_rewards.sum(-1)
    out = torch.zeros_like(scores)
    for rows in _groups(index):
        if len(rows) < 2:
            continue
        s = scores[rows]
        top = torch.topk(s, 2).values
        out[rows[int(torch.argmax(s))]] = top[0] - top[1]
    return _broadcast(out, response_mask)


def trl_grpo_advantage(rewards, num_generations):
    """TRL's convention: flat rewards viewed as contiguous groups of num_generations; std with eps 1e-4."""
    grouped = rewards.view(-1, num_generations)
    mean = grouped.mean(1).repeat_interleave(num_generations)
    std = grouped.std(1).repeat_interleave(num_generations)
    return (rewards - mean) / (std + 1e-4)


def openrlhf_rloo_advantage(rewards, n_samples_per_prompt):
    """OpenRLHF's convention: flat rewards reshaped to [-1, n_samples_per_prompt]; RLOO baseline."""
    r = rewards.reshape(-1, n_samples_per_prompt)
    return (r - (r.sum(-1, keepdim=True) - r) / (n_samples_per_prompt - 1)).reshape(-1)


# ------------------------------------------------------------------ broken on purpose


def positional_rloo_advantage(token_level_rewards, response_mask, index, epsilon=1e-6):
    """RLOO that ignores the index and assumes the batch holds contiguous groups of 4."""
    scores = token_level_rewards.sum(-1)
    usable = scores.numel() - scores.numel() % 4
    out = torch.zeros_like(scores)
    g = scores[:usable].view(-1, 4)
    out[:usable] = (g - (g.sum(-1, keepdim=True) - g) / 3).reshape(-1)
    return _broadcast(out, response_mask)


def negated_rloo_advantage(token_level_rewards, response_mask, index, epsilon=1e-6):
    """RLOO with the sign flipped."""
    adv, ret = rloo_advantage(token_level_rewards, response_mask, index, epsilon)
    return -adv, -ret
