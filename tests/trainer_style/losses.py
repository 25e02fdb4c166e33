"""Policy losses written the way trainers write them, from the papers and the peers' signatures.

``loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode=...) -> (loss, metrics)``
over ``[B, T]`` batches.  Written for the tests of :mod:`numeric.variants`; no trainer's code
is copied.  The broken ones carry their defect in their name.
"""

import torch


def aggregate(per_token, mask, mode="token-mean", norm=None, eps=0.0):
    """The four modes, empty rows left out of the sequence count; masked slots selected away (padding-safe)."""
    kept = torch.where(mask > 0, per_token, torch.zeros_like(per_token))
    if mode == "token-mean":
        return kept.sum() / mask.sum()
    n = mask.sum(-1)
    rows = (n > 0).to(per_token.dtype)
    if mode == "seq-mean-token-mean":
        seq = kept.sum(-1) / torch.where(n > 0, n + eps, torch.ones_like(n))
        return seq.sum() / rows.sum()
    if mode == "seq-mean-token-sum":
        return kept.sum(-1).sum() / rows.sum()
    if mode == "seq-mean-token-sum-norm":
        return kept.sum() / (mask.shape[-1] if norm is None else norm)
    raise ValueError(f"unknown loss_agg_mode {mode!r}")


def _ratio(old_log_prob, log_prob):
    return torch.exp(log_prob - old_log_prob)


def ppo_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", clip_low=0.2, clip_high=0.28, norm=None):
    ratio = _ratio(old_log_prob, log_prob)
    per_token = -torch.minimum(ratio * advantages, ratio.clamp(1 - clip_low, 1 + clip_high) * advantages)
    return aggregate(per_token, response_mask, loss_agg_mode, norm), {"clipfrac": 0.0}


def dual_clip_ppo_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", clip_ratio_c=3.0):
    """Dual-clip PPO (Ye et al. 2020): for A < 0 the clipped loss is capped at -c A; beyond r = c the token is silenced."""
    ratio = _ratio(old_log_prob, log_prob)
    clipped = torch.maximum(-ratio * advantages, -ratio.clamp(0.8, 1.28) * advantages)
    per_token = torch.where(advantages < 0, torch.minimum(clipped, -clip_ratio_c * advantages), clipped)
    return aggregate(per_token, response_mask, loss_agg_mode), {}


def cispo_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", clip_high=0.28):
    """CISPO (MiniMax-M1): the capped importance weight, stopped, times A log pi."""
    weight = _ratio(old_log_prob, log_prob).clamp(max=1 + clip_high).detach()
    return aggregate(-weight * advantages * log_prob, response_mask, loss_agg_mode), {}


def gspo_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="seq-mean-token-mean", clip=3e-4):
    """GSPO (Zheng et al. 2025): the sequence ratio exp(mean log r), clipped, on every token of the row."""
    n = response_mask.sum(-1, keepdim=True).clamp(min=1)
    log_r = torch.where(response_mask > 0, log_prob - old_log_prob, torch.zeros_like(log_prob))
    seq = (log_r.sum(-1, keepdim=True) / n).detach()
    token_ratio = torch.exp(seq + log_prob - log_prob.detach())
    per_token = -torch.minimum(token_ratio * advantages, token_ratio.clamp(1 - clip, 1 + clip) * advantages)
    return aggregate(per_token, response_mask, loss_agg_mode), {}


def clamped_ppo_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean"):
    """PPO with the log-ratio clamped to [-20, 20] before the exponential (against overflow)."""
    ratio = torch.exp((log_prob - old_log_prob).clamp(-20.0, 20.0))
    per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages)
    return aggregate(per_token, response_mask, loss_agg_mode), {}


def eps_seq_mean_loss(old_log_prob, log_prob, advantages, response_mask):
    """PPO, seq-mean-token-mean with an n + 1e-8 denominator."""
    ratio = _ratio(old_log_prob, log_prob)
    per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages)
    return aggregate(per_token, response_mask, "seq-mean-token-mean", eps=1e-8), {}


def eps_batch_mean_loss(old_log_prob, log_prob, advantages, response_mask):
    """REINFORCE-style, seq-mean-token-sum with a B + 1e-6 denominator."""
    per_token = -_ratio(old_log_prob, log_prob) * advantages
    kept = torch.where(response_mask > 0, per_token, torch.zeros_like(per_token))
    return kept.sum() / (response_mask.shape[0] + 1e-6), {}


def all_rows_seq_mean_loss(old_log_prob, log_prob, advantages, response_mask):
    """REINFORCE at r = 1, seq-mean-token-sum over all B rows (an empty row counts)."""
    per_token = -_ratio(old_log_prob, log_prob) * advantages
    kept = torch.where(response_mask > 0, per_token, torch.zeros_like(per_token))
    return kept.sum() / response_mask.shape[0]


def mask_multiply_loss(old_log_prob, log_prob, advantages, response_mask):
    """Token-mean by multiplying with the mask: 0 * NaN lets padding through."""
    per_token = -_ratio(old_log_prob, log_prob) * advantages
    return (per_token * response_mask).sum() / response_mask.sum()


def advantage_normalised_loss(old_log_prob, log_prob, advantages, response_mask):
    """Token IS divided by the batch's mean |A|: kappa depends on the advantages, not only on the mask."""
    per_token = -_ratio(old_log_prob, log_prob) * advantages
    scale = torch.where(response_mask > 0, advantages.abs(), torch.zeros_like(advantages)).sum() / response_mask.sum()
    return aggregate(per_token / scale, response_mask, "token-mean"), {}


# ------------------------------------------------------------------ broken on purpose


def sign_slip_ppo_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean"):
    """PPO with the minus sign dropped: it ascends the loss."""
    ratio = _ratio(old_log_prob, log_prob)
    per_token = torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages)
    return aggregate(per_token, response_mask, loss_agg_mode), {}


def no_detach_cispo_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean"):
    """CISPO with the .detach() forgotten: the weight's own gradient enters."""
    weight = _ratio(old_log_prob, log_prob).clamp(max=1.28)
    return aggregate(-weight * advantages * log_prob, response_mask, loss_agg_mode), {}


def length_biased_token_mean_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean"):
    """Claims token-mean but averages within each row first (seq-mean-token-mean): length bias."""
    ratio = _ratio(old_log_prob, log_prob)
    per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages)
    return aggregate(per_token, response_mask, "seq-mean-token-mean"), {}


def unmasked_loss(old_log_prob, log_prob, advantages, response_mask):
    """Forgets the mask in the numerator: padding tokens get gradient."""
    per_token = -_ratio(old_log_prob, log_prob) * advantages
    return per_token.sum() / response_mask.sum()


def doubled_token_mean_loss(old_log_prob, log_prob, advantages, response_mask):
    """Token-mean REINFORCE-style loss times 2 (a learning-rate factor folded into the loss)."""
    per_token = -2.0 * _ratio(old_log_prob, log_prob) * advantages
    return aggregate(per_token, response_mask, "token-mean"), {}


def ratio_normalised_loss(old_log_prob, log_prob, advantages, response_mask):
    """Divides by 1 + the batch's mean squared ratio deviation (not detached): every token's gradient depends on every other row."""
    ratio = _ratio(old_log_prob, log_prob)
    spread = torch.where(response_mask > 0, (ratio - 1) ** 2, torch.zeros_like(ratio))
    scale = 1 + spread.sum() / response_mask.sum()
    return aggregate(-ratio * advantages / scale, response_mask, "token-mean"), {}
