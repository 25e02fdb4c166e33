r"""The losses trainers ship, batched and trainer-ready, each with its derived gradient weight.

Every function takes ``[B, T]`` token tensors (numpy or torch; the result has
the first tensor's kind, device and dtype, computed in at least fp32) with a
0/1 or boolean response ``mask``.  Masked slots may hold anything (``-inf``,
padding sentinels): they enter neither a value nor a gradient.  Losses are
minimised, with the minus sign in front of the advantage; old log-probs,
advantages and sampler weights are detached.

Map
---
Token bookkeeping
    :func:`token_log_probs`, :func:`stable_softmax`, :func:`softmax_score`,
    :func:`response_mask`, :func:`sequence_log_prob`, :func:`broadcast_advantage`,
    :func:`token_entropy`, :func:`high_entropy_mask`.
Aggregation
    :func:`aggregate` over the modes in :data:`AGGREGATIONS`, :func:`token_weights`
    (the weight each mode gives each token), :data:`TRAINER_MODES` (each trainer's
    name as a mode and its arguments).
Policy losses
    :func:`policy_loss` for every method in :data:`POLICY_LOSSES`, and
    :func:`policy_weight`, the derived weight :math:`w` with
    :math:`\partial\,\mathrm{loss}/\partial\ell_{it} = -\,\kappa_{it}\, w_{it}\, A_{it}`
    (:math:`\kappa` from :func:`token_weights`; :mod:`derivations.losses`).
Penalties
    :func:`kl_penalty` (:math:`k_1, k_2, k_3`, clamped as verl clamps),
    :func:`value_loss` (clipped), :func:`bias_corrected_kl` (TRL's :math:`\rho\,k_3`),
    :func:`verl_kl_penalty` (verl's KL forms by verl's names, :data:`VERL_KL_PENALTIES`: ``abs``,
    ``low_var_kl``, the straight-through ``+`` forms).
Advantage estimators
    :func:`masked_whiten`, :func:`reinforce_pp_advantages`,
    :func:`reinforce_pp_baseline_advantages`, :func:`remax_advantages`,
    :func:`opo_advantages`, :func:`gpg_advantages`, :func:`passk_advantages`,
    :func:`optimal_token_baseline_advantages`, :func:`batch_scaled_advantages`; the exact scale :math:`c` of
    :math:`\mathbb{E}[A\,\nabla\log\pi] = c\,\nabla J` for a binary reward is
    :func:`numeric.binary_reward_weight`.
Group advantages on a flat batch (:mod:`~numeric.losses.group_advantages`)
    :func:`grouped_advantages` (ragged groups, each trainer's rule for a group of one),
    :func:`maxrl_advantages`, :func:`length_penalized_advantages`, :func:`gdpo_advantages`,
    :func:`normalize_by_levels` (AReaL), :func:`ema_baseline_advantages` (prime-rl ``rae``).
Reward and advantage shaping (:mod:`~numeric.losses.shaping`)
    :func:`overlong_penalized_rewards`, :func:`stop_properly_rewards`, :func:`kl_in_reward` with
    :class:`AdaptiveKLController`, :func:`opd_advantages`, :func:`rlsd_advantages`.

Trainer code was read at: verl ``verl/trainer/ppo/core_algos.py`` (``agg_loss``,
``compute_policy_loss_*``, ``kl_penalty``, ``compute_*_outcome_advantage``),
TRL ``trl/trainer/grpo_trainer.py`` (``_compute_loss``, ``loss_type``),
OpenRLHF ``openrlhf/models/loss.py`` (``PolicyLoss``, ``ValueLoss``) and its
experience maker (``group_norm``, REINFORCE++).

The package holds one concern per module: :mod:`~numeric.losses.tokens`,
:mod:`~numeric.losses.aggregation`, :mod:`~numeric.losses.policy` (with
:mod:`~numeric.losses.selection`, the token selections of Clip-Cov and KL-Cov),
:mod:`~numeric.losses.penalties`, :mod:`~numeric.losses.advantages`,
:mod:`~numeric.losses.group_advantages`, :mod:`~numeric.losses.shaping`, and the
suite ``losses`` in :mod:`~numeric.losses.certificates`.
"""

from . import advantages, aggregation, group_advantages, penalties, policy, selection, shaping, tokens
from .advantages import *
from .aggregation import *
from .group_advantages import *
from .penalties import *
from .policy import *
from .selection import *
from .shaping import *
from .tokens import *

__all__ = [
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "ReadingWarning",
    "TRAINER_MODES",
    "aggregate",
    "broadcast_advantage",
    "clip_cov_selection",
    "gpg_advantages",
    "kl_estimate",
    "kl_cov_selection",
    "kl_penalty",
    "m2po_selection",
    "masked_whiten",
    "opo_advantages",
    "passk_advantages",
    "penalty_gradient",
    "policy_loss",
    "policy_weight",
    "reinforce_pp_advantages",
    "reinforce_pp_baseline_advantages",
    "remax_advantages",
    "response_mask",
    "sequence_log_prob",
    "softmax_score",
    "stable_softmax",
    "token_entropy",
    "token_log_probs",
    "token_weights",
    "trainer_table",
    "value_loss",
    "EMPTY_ROWS",
    "batch_scaled_advantages",
    "bias_corrected_kl",
    "high_entropy_mask",
    "optimal_token_baseline_advantages",
    "AdaptiveKLController",
    "EMABaseline",
    "KLInReward",
    "ema_baseline_advantages",
    "gdpo_advantages",
    "group_ids",
    "grouped_advantages",
    "kl_in_reward",
    "length_penalized_advantages",
    "maxrl_advantages",
    "normalize_by_levels",
    "opd_advantages",
    "overlong_penalized_rewards",
    "rlsd_advantages",
    "stop_properly_rewards",
    "VERL_KL_PENALTIES",
    "verl_kl_penalty",
]


def __getattr__(name: str):
    """The suite's helpers, from :mod:`numeric.losses.certificates` (imported by :mod:`numeric` in lecture order)."""
    if name in ("certificate_gap", "length_bias_gradients"):
        from . import certificates

        return getattr(certificates, name)
    raise AttributeError(f"module 'numeric.losses' has no attribute {name!r}")
