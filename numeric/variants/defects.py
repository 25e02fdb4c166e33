r"""Defects of shipped trainers' losses that the checker sees: each loss transcribed in our own words, and the checker's finding.

Each function below is a trainer's policy loss as its code computes it at the commit cited in its docstring (read, not
copied), called as :func:`~numeric.variants.check_policy_loss` calls a loss.  :func:`defect_table` runs the checker on each
when the chapter is built and prints what it finds, in its own words: the evidence the losses chapter cites.

==============================================  ==============================================================================
:func:`trl_luspo_token_level`                   TRL's ``luspo`` at ``importance_sampling_level="token"``: ``.mean()`` over every slot
:func:`trl_top_entropy`                         TRL's top-entropy mask: a dropped token still counts in the denominator
:func:`openrlhf_seq_mask_tis`                   OpenRLHF's ``seq-mask-tis``: ``exp(...) * mask``, an overflowed ratio times 0
:func:`prime_rl_default`                        prime-rl's default loss: the mask multiplies the per-token loss
:func:`verl_dppo_tv`                            verl's ``dppo_tv`` at its defaults: ``clip_ratio_c`` (3) truncates, not the 20 its code names
==============================================  ==============================================================================
"""

from __future__ import annotations

import torch

from ..losses import high_entropy_mask
from .policy_loss import check_policy_loss
from .questions import QUESTION_FUNCTIONS
from .trainer_loss import TrainerLoss

__all__ = ["DEFECTS", "defect_table", "openrlhf_seq_mask_tis", "prime_rl_default", "trl_luspo_token_level", "trl_top_entropy", "verl_dppo_tv"]


def _ppo(ratio, advantages, low=0.2, high=0.2):
    return -torch.minimum(ratio * advantages, ratio.clamp(1 - low, 1 + high) * advantages)


def trl_luspo_token_level(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """TRL's ``luspo`` with ``importance_sampling_level="token"`` (huggingface/trl ``f2cd577``, ``grpo_trainer.py:891-895`` warns,
    ``3083-3091``, ``3143-3148``): the per-token loss is ``[B, T]``, times the row's length, and ``.mean()`` averages every slot."""
    return (_ppo(torch.exp(log_prob - old_log_prob), advantages) * response_mask.sum(1, keepdim=True)).mean()


def trl_top_entropy(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor, top_entropy_quantile: float = 0.5) -> torch.Tensor:
    """TRL's ``top_entropy_quantile`` with its default ``loss_type="dapo"`` (``grpo_trainer.py:1396-1432``, ``3020-3023``,
    ``3114-3115``, ``3139-3142``): the tokens below the quantile of the masked tokens' entropies are dropped from the numerator;
    the denominator, the batch's token count, still counts them.  The token's entropy is written :math:`-\\log\\pi_{\\mathrm{old}}` of the sampled token here (a detached
    per-token statistic, as TRL's is; the model's full entropy needs its logits); the mask's rule is TRL's."""
    entropy_mask = high_entropy_mask(-old_log_prob.detach(), response_mask, top_quantile=top_entropy_quantile)  # TRL's rule
    per_token = _ppo(torch.exp(log_prob - old_log_prob), advantages) * entropy_mask
    return (per_token * response_mask).sum() / response_mask.sum().clamp(min=1.0)


def openrlhf_seq_mask_tis(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor, low: float = 0.5, high: float = 5.0) -> torch.Tensor:
    """OpenRLHF's ``seq-mask-tis`` (OpenRLHF/OpenRLHF ``3c3be62``, ``openrlhf/models/loss.py:196-227``, ``aggregate_loss`` ``11-39``)
    on a batch's first step (``old_log_prob`` plays the rollout's): the token weight is ``exp(old - rollout)`` unclamped, and the
    aggregation multiplies by the mask, so an overflowed ratio in a masked slot is ``inf * 0``."""
    old = log_prob.detach()
    loss = _ppo(torch.exp((log_prob - old).clamp(-20.0, 20.0)), advantages)
    rollout_log_ratio = old - old_log_prob
    seq_is = torch.exp((rollout_log_ratio * response_mask).sum(-1) / response_mask.sum(-1))
    keep = (seq_is >= low) & (seq_is <= high)
    loss = keep.unsqueeze(-1) * torch.exp(rollout_log_ratio).detach() * loss
    return (loss * response_mask).sum() / response_mask.sum()


def prime_rl_default(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor, dppo_mask_low: float = 0.2, dppo_mask_high: float = 0.2, kl_tau: float = 1e-3) -> torch.Tensor:
    """prime-rl's default loss (PrimeIntellect-ai/prime-rl ``559b447``, ``src/prime_rl/trainer/rl/loss.py:109-161``): the trust-region
    mask and the loss mask multiply the per-token loss, its ratio against the inference log-probs."""
    log_ratio = log_prob - old_log_prob
    change = torch.exp(log_prob) - torch.exp(old_log_prob)
    keep = ~torch.where(advantages > 0, change > dppo_mask_high, change < -dppo_mask_low)
    per_token = -(keep * response_mask) * advantages * torch.exp(log_ratio) + kl_tau * response_mask * log_ratio**2
    return per_token.sum() / response_mask.sum()


def verl_dppo_tv(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor, clip_ratio_low: float = 0.2, clip_ratio_high: float = 0.2, clip_ratio_c: float = 3.0) -> torch.Tensor:
    """verl's ``dppo_tv`` (verl-project/verl ``1dda039``, ``verl/trainer/ppo/core_algos.py:1379-1457``) at ``ActorConfig``'s defaults:
    ``config.get("clip_ratio_c", 20.0)`` finds the dual clip's field, always set (3.0), so the truncation is 3."""
    ratio = torch.exp(torch.clamp(log_prob - old_log_prob, -20.0, 20.0))
    truncated = torch.clamp(ratio, max=clip_ratio_c).detach()
    change = torch.exp(log_prob) - torch.exp(old_log_prob)
    valid = torch.where(advantages > 0, change <= clip_ratio_high, change >= -clip_ratio_low).detach().float()
    pg = -advantages * truncated * log_prob * valid
    return torch.where(response_mask.bool(), pg, 0.0).mul(response_mask).sum() / response_mask.sum()


def _note(fn, start: str) -> str:
    rep = check_policy_loss(fn)
    return f"{rep.verdict}: " + next((n for n in rep.notes if n.startswith(start)), "")


def _answer(fn, question: str) -> str:
    """One question's answer (:data:`~numeric.variants.questions.QUESTION_FUNCTIONS`), asked alone: a selection made across the
    batch's tokens (TRL's quantile) is no per-token loss, so the whole check refuses it, and the question is what it asks."""
    answer = QUESTION_FUNCTIONS[question](TrainerLoss(fn))
    return f"{answer.verdict}: {answer.explanation}"


DEFECTS = (
    ("TRL", "luspo at importance_sampling_level token", trl_luspo_token_level,
     "the (B, T) loss averaged over every slot", lambda fn: _note(fn, "masked tokens receive gradient")),
    ("TRL", "top_entropy_quantile (loss_type dapo)", trl_top_entropy,
     "a dropped token stays in the denominator", lambda fn: _answer(fn, "mask_consistent")),
    ("OpenRLHF", "vllm_is_correction_type seq-mask-tis", openrlhf_seq_mask_tis,
     "exp(...) * mask", lambda fn: _answer(fn, "poison")),
    ("prime-rl", "loss default", prime_rl_default,
     "the mask multiplies the per-token loss", lambda fn: _answer(fn, "poison")),
    ("verl", "dppo_tv at ActorConfig's defaults", verl_dppo_tv,
     "clip_ratio_c truncates", lambda fn: f"truncation read off the weight: C = {dict(check_policy_loss(fn).clip).get('is_cap')}"),
)
"""``(trainer, what, transcription, the defect, the checker's finding on the transcription)``."""


def defect_table() -> str:
    r"""Each defect of :data:`DEFECTS` with what the checker reports on the transcription, computed now, as a LaTeX array of text.

    Examples
    --------
    >>> from numeric.variants.defects import DEFECTS, defect_table
    >>> rows = defect_table().splitlines()
    >>> len(rows) == len(DEFECTS) + 3 and rows[1].startswith(r"\text{trainer}")
    True
    """
    esc = lambda x: x.replace("\\", "/").replace("_", r"\_").replace("{", r"\{").replace("}", r"\}").replace("&", "and")  # noqa: E731
    lines = [r"\begin{array}{llll}", r"\text{trainer} & \text{what} & \text{defect} & \text{the checker's finding} \\ \hline"]
    for trainer, what, fn, defect, finding in DEFECTS:
        cells = (trainer, what, defect, finding(fn))
        lines.append(" & ".join(rf"\text{{{esc(c)}}}" for c in cells) + r" \\")
    lines.append(r"\end{array}")
    return "\n".join(lines)
