r"""The advantage estimators the trainers ship, as the package computes them, each with where and when it was read.

:data:`ESTIMATORS` maps the package's name of an estimator to an
:class:`Estimator`: a ``[B, G]`` function of rewards (each row one group,
as :func:`~numeric.variants.check_group_advantage` takes it) and the
:class:`Reading` of each trainer that ships it: the trainer's own name, the
:class:`~derivations.readings.Citation` (trainer, commit, ``path:lines``) and
that trainer's rule for a group of one answer.  The certificate table
(:func:`numeric.variants.certificate_table`) runs the checker on every row.

A reading's ``singleton`` is the factor :math:`c` of a lone answer's advantage
:math:`A = c\,R` (:func:`numeric.losses.grouped_advantages`), ``"refused"``
where the trainer stops on it, ``"own"`` where the estimator's own formula
covers a group of one, and ``"-"`` where it does not apply (a batch-level
estimator) or was not read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np
import torch

from derivations.readings import Citation

from ..group_baselines import group_mean_advantages, group_zscore_advantages, rloo_advantages
from ..losses import (
    ema_baseline_advantages,
    gdpo_advantages,
    gpg_advantages,
    maxrl_advantages,
    normalize_by_levels,
    opo_advantages,
    passk_advantages,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
)

__all__ = ["ESTIMATORS", "Estimator", "Reading"]

F64 = torch.float64

VERL, VERL_OLD = "1dda039", "b178a3c"
CORE = "verl/trainer/ppo/core_algos.py"
TRL_GRPO = "trl/trainer/grpo_trainer.py"
OPENRLHF = "openrlhf/trainer/ppo_utils/experience_maker.py"
SKYRL = "skyrl/backends/skyrl_train/utils/ppo_utils.py"
SWIFT = "swift/rl_core/advantage.py"
AREAL = "areal/utils/data.py"
RAW = 1 / (1 + 1e-6)  # verl's and SkyRL's z-score of a lone answer: mean 0, std 1, so R / (1 + eps)


class Reading(NamedTuple):
    """A trainer's name for an estimator, where it was read, and the trainer's rule for a group of one answer."""

    their: str
    cite: Citation
    singleton: float | str = "-"


@dataclass(frozen=True)
class Estimator:
    """An advantage estimator a trainer ships, as the package computes it.

    ``advantage`` maps ``[B, G]`` rewards to ``[B, G]`` advantages (``None``
    when the estimator needs an input besides the group's rewards, said in
    ``needs``); ``peers`` holds each trainer's :class:`Reading`.
    """

    name: str
    label: str
    advantage: Callable | None = field(repr=False)
    peers: tuple
    needs: str = ""


def _tensor(rewards) -> torch.Tensor:
    return torch.as_tensor(np.asarray(rewards.detach().cpu() if isinstance(rewards, torch.Tensor) else rewards, dtype=np.float64))


def _reinforce_pp_baseline(rewards):
    """verl's REINFORCE++-baseline on one-token responses: ``[B, G]`` rewards in, ``[B, G]`` advantages out."""
    r = _tensor(rewards)
    return reinforce_pp_baseline_advantages(r, torch.ones(*r.shape, 1, dtype=F64))[..., 0]


def _reinforce_pp(rewards):
    """REINFORCE++ (no group baseline) on one-token responses, the batch's ``B * G`` responses whitened together."""
    r = _tensor(rewards)
    return reinforce_pp_advantages(r.reshape(-1, 1), torch.ones(r.numel(), 1, dtype=F64)).reshape(r.shape)


def _batch_scale(rewards):
    """TRL's and ms-swift's ``scale_rewards="batch"``: group-centred rewards over the std of every reward of the batch, plus 1e-4."""
    r = _tensor(rewards)
    return group_mean_advantages(r) / (r.std() + 1e-4)


def _floored_zscore(rewards):
    """verl ``grpo_vectorized`` at b178a3c: the Bessel variance floored at 1e-6 (``group_mean_std(eps=1e-6)``), then ``/(std + 1e-6)``."""
    r = _tensor(rewards)
    var = ((r - r.mean(-1, keepdim=True)) ** 2).sum(-1, keepdim=True) / (r.shape[-1] - 1)
    return (r - r.mean(-1, keepdim=True)) / (var.clamp(min=1e-6).sqrt() + 1e-6)


def _flat(fn: Callable, **options) -> Callable:
    """A flat ``(scores [N], index [N])`` estimator as a ``[B, G]`` one, each row a group."""
    def advantage(rewards):
        r = _tensor(rewards)
        return torch.as_tensor(fn(r.reshape(-1), np.repeat(np.arange(r.shape[0]), r.shape[1]), **options)).reshape(r.shape)
    return advantage


def _gdpo(**options) -> Callable:
    """GDPO with one reward (a ``[B, G]`` function), its batch step as the trainer's: it couples the groups."""
    def advantage(rewards):
        r = _tensor(rewards)
        idx = np.repeat(np.arange(r.shape[0]), r.shape[1])
        if options.get("whiten") == "tokens":
            return gdpo_advantages(r.reshape(-1, 1), idx, mask=torch.ones(r.numel(), 1, dtype=F64), **options)[:, 0].reshape(r.shape)
        return gdpo_advantages(r.reshape(-1, 1), idx, **options).reshape(r.shape)
    return advantage


def _rae(rewards):
    """prime-rl ``rae`` on each group in order, from a baseline of 0.3 left by earlier batches (decay 0.95): each row its own agent."""
    r = _tensor(rewards)
    agents = np.repeat(np.arange(r.shape[0]), r.shape[1]).tolist()
    out = ema_baseline_advantages(r.reshape(-1), agents, baselines=dict.fromkeys(range(r.shape[0]), 0.3))
    return torch.as_tensor(out.advantages).reshape(r.shape)


def _cite(trainer: str, commit: str, where: str) -> Citation:
    return Citation(trainer, commit, where)


ESTIMATORS: dict[str, Estimator] = {
    e.name: e
    for e in (
        Estimator("zscore_1e-6", "z-score, Bessel std, eps 1e-6", partial(group_zscore_advantages, eps=1e-6, std="bessel"), (
            Reading('adv_estimator "grpo"', _cite("verl", VERL, f"{CORE}:267-331"), RAW),
            Reading('adv_estimator "grpo_vectorized"', _cite("verl", VERL, f"{CORE}:334-358"), RAW),
            Reading('advantage_estimator "grpo"', _cite("SkyRL", "a956457", f"{SKYRL}:1343-1393"), RAW),
            Reading('advantage_estimator "grpo"', _cite("slime", "624b824", "slime/ray/rollout.py:608-633"), 0.0))),
        Estimator("zscore_floor", "z-score, Bessel variance floored at 1e-6, eps 1e-6", _floored_zscore, (
            Reading('adv_estimator "grpo_vectorized"', _cite("verl", VERL_OLD, "verl/utils/groupwise.py:164-223"), RAW),)),
        Estimator("zscore_1e-4", "z-score, Bessel std, eps 1e-4", partial(group_zscore_advantages, eps=1e-4, std="bessel"), (
            Reading('scale_rewards "group"', _cite("TRL", "f2cd577", f"{TRL_GRPO}:2681-2707"), 0.0),
            Reading('scale_rewards "group"', _cite("ms-swift", "3602360", f"{SWIFT}:58-99"), 0.0))),
        Estimator("zscore_1e-5", "z-score, Bessel std, eps 1e-5", partial(group_zscore_advantages, eps=1e-5, std="bessel"), (
            Reading('reward_norm mean_level "group", std_level "group"', _cite("AReaL", "cbff54d", f"{AREAL}:1431-1538"), 0.0),)),
        Estimator("zscore_1e-9", "z-score, Bessel std, eps 1e-9", partial(group_zscore_advantages, eps=1e-9, std="bessel"), (
            Reading('advantage_estimator "group_norm"', _cite("OpenRLHF", "3c3be62", f"{OPENRLHF}:269-270"), "refused"),)),
        Estimator("group_mean", "group mean (Dr. GRPO)", group_mean_advantages, (
            Reading('adv_estimator "grpo", norm_adv_by_std_in_grpo=False', _cite("verl", VERL, f"{CORE}:267-331"), 1.0),
            Reading('scale_rewards "none"', _cite("TRL", "f2cd577", f"{TRL_GRPO}:2681-2707"), 0.0),
            Reading('advantage_estimator "dr_grpo"', _cite("OpenRLHF", "3c3be62", f"{OPENRLHF}:267-268"), "refused"),
            Reading('algo "grpo" (no length_penalty)', _cite("prime-rl", "559b447", "src/prime_rl/orchestrator/algo/grpo.py:25-45"), 0.0),
            Reading('advantage_estimator "grpo", grpo_norm_by_std=False', _cite("SkyRL", "a956457", f"{SKYRL}:1343-1393"), 1.0),
            Reading("--disable-grpo-std-normalization", _cite("slime", "624b824", "slime/ray/rollout.py:608-633"), 0.0),
            Reading('scale_rewards "none"', _cite("ms-swift", "3602360", f"{SWIFT}:58-99"), 0.0))),
        Estimator("rloo", "leave-one-out (RLOO)", rloo_advantages, (
            Reading('adv_estimator "rloo"', _cite("verl", VERL, f"{CORE}:587-636"), 1.0),
            Reading('adv_estimator "rloo_vectorized"', _cite("verl", VERL, f"{CORE}:833-868"), 0.0),
            Reading("RLOOTrainer", _cite("TRL", "f2cd577", "trl/trainer/rloo_trainer.py:1537-1561"), 0.0),
            Reading('advantage_estimator "rloo"', _cite("OpenRLHF", "3c3be62", f"{OPENRLHF}:264-266"), "refused"),
            Reading('advantage_estimator "rloo"', _cite("SkyRL", "a956457", f"{SKYRL}:1259-1309"), 0.0),
            Reading('reward_norm mean_level "group", mean_leave1out, std_level None', _cite("AReaL", "cbff54d", f"{AREAL}:1463-1486"), 0.0),
            Reading('advantage_estimator "rloo"', _cite("ms-swift", "3602360", f"{SWIFT}:63-70"), 0.0))),
        Estimator("areal_loo_zscore", "leave-one-out mean, std of its residuals, eps 1e-5",
                  _flat(normalize_by_levels, mean_level="group", std_level="group", leave_one_out=True), (
            Reading('reward_norm mean_level "group", mean_leave1out, std_level "group"', _cite("AReaL", "cbff54d", f"{AREAL}:1463-1538"), 0.0),)),
        Estimator("areal_group_batch", "group mean, pooled batch std, eps 1e-5", _flat(normalize_by_levels, mean_level="group", std_level="batch"), (
            Reading('reward_norm mean_level "group", std_level "batch"', _cite("AReaL", "cbff54d", f"{AREAL}:1463-1507"), "-"),)),
        Estimator("maxrl", "MaxRL (R - mean)/mean, 0 where mean <= 0", maxrl_advantages, (
            Reading('algo "max_rl"', _cite("prime-rl", "559b447", "src/prime_rl/orchestrator/algo/max_rl.py:22-28"), 0.0),)),
        Estimator("maxrl_1e-6", "MaxRL (R - mean)/(mean + 1e-6)", partial(maxrl_advantages, eps=1e-6, nonpositive="divide"), (
            Reading('advantage_estimator "maxrl"', _cite("SkyRL", "a956457", f"{SKYRL}:1396-1428"), 1.0),)),
        Estimator("rae", "EMA baseline per agent (here from 0.3)", _rae, (
            Reading('algo "rae"', _cite("prime-rl", "559b447", "src/prime_rl/orchestrator/algo/rae.py:39-43"), "own"),)),
        Estimator("passk", "pass@k, Bessel std, eps 1e-6", partial(passk_advantages, eps=1e-6, std=True), (
            Reading('adv_estimator "grpo_passk"', _cite("verl", VERL, f"{CORE}:471-530"), "refused"),)),
        Estimator("opo", "OPO, equal lengths", lambda r: opo_advantages(r, torch.ones_like(torch.as_tensor(r, dtype=F64))), (
            Reading('adv_estimator "opo"', _cite("verl", VERL, f"{CORE}:639-690"), 1.0),)),
        Estimator("batch_std", "group-centred, std of the batch's rewards", _batch_scale, (
            Reading('scale_rewards "batch"', _cite("TRL", "f2cd577", f"{TRL_GRPO}:2694-2707"), "-"),
            Reading('scale_rewards "batch"', _cite("ms-swift", "3602360", f"{SWIFT}:79-80"), "-"))),
        Estimator("gpg", "GPG, alpha = B/M", partial(gpg_advantages, valid="reward"), (
            Reading('adv_estimator "gpg"', _cite("verl", VERL, f"{CORE}:770-830"), "-"),)),
        Estimator("gdpo_tokens", "GDPO: z per reward (eps 1e-6), token whitening", _gdpo(whiten="tokens"), (
            Reading('adv_estimator "gdpo"', _cite("verl", VERL, f"{CORE}:361-468"), "-"),)),
        Estimator("gdpo_1e-4", "GDPO: z per reward (eps 1e-4), batch z-score", _gdpo(eps=1e-4, singleton=0.0, whiten="sequences", whiten_eps=1e-4), (
            Reading('multi_objective_aggregation "normalize_then_sum"', _cite("TRL", "f2cd577", f"{TRL_GRPO}:2710-2720"), "-"),)),
        Estimator("gdpo_1e-8", "GDPO: z per reward (eps 1e-8), batch z-score", _gdpo(eps=1e-8, singleton=0.0, whiten="sequences", whiten_eps=1e-8), (
            Reading('scale_rewards "gdpo"', _cite("ms-swift", "3602360", f"{SWIFT}:83-94"), "-"),)),
        Estimator("reinforce_pp_baseline", "REINFORCE++ baseline", _reinforce_pp_baseline, (
            Reading('adv_estimator "reinforce_plus_plus_baseline"', _cite("verl", VERL, f"{CORE}:533-584"), "-"),
            Reading('advantage_estimator "reinforce_baseline"', _cite("OpenRLHF", "3c3be62", f"{OPENRLHF}:267-268, 315-328"), "-"))),
        Estimator("reinforce_pp", "REINFORCE++", _reinforce_pp, (
            Reading('adv_estimator "reinforce_plus_plus"', _cite("verl", VERL, f"{CORE}:693-731"), "-"),
            Reading('advantage_estimator "reinforce"', _cite("OpenRLHF", "3c3be62", f"{OPENRLHF}:292-328"), "-"))),
        Estimator("remax", "ReMax", None, (Reading('adv_estimator "remax"', _cite("verl", VERL, f"{CORE}:734-767")),),
                  needs="the greedy answer's reward (remax_advantages' baseline_reward), which a check of the group's rewards cannot see"),
        Estimator("length_penalty", "group mean of a length-shaped reward", None, (
            Reading('algo "grpo", length_penalty', _cite("prime-rl", "559b447", "src/prime_rl/orchestrator/algo/grpo.py:25-45"), 0.0),),
                  needs="each answer's length (length_penalized_advantages); biased: see the losses chapter, exact on the toy LM"),
        Estimator("otb", "optimal token baseline", None, (
            Reading('adv_estimator "optimal_token_baseline"', _cite("verl", VERL, f"{CORE}:871-987")),
            Reading('adv_estimator "tir_optimal_token_baseline"', _cite("verl", VERL, f"{CORE}:990-1121"))),
                  needs="the tokens' log-probs and sum of squared probabilities (optimal_token_baseline_advantages)"),
    )
}
"""Every advantage estimator of the trainers read in :data:`derivations.readings.SNAPSHOTS`, by the package's name, with each trainer's reading."""
