r"""The trainers' names for the registry's methods: each a :class:`Peer` row with the package call that reproduces it and its citation.

A row is one trainer's name for one method (one ``loss_type``, ``loss_mode``,
``policy_loss_type`` or ``loss``), read at one commit of :data:`derivations.readings.SNAPSHOTS`
(its :class:`~derivations.readings.Citation`: trainer, commit, ``path:lines``).
``call`` is a Python call of :func:`numeric.policy_loss` in which ``...``
stands for ``log_prob, old_log_prob, advantages, mask`` and every other name
is the trainer's own configuration field (at its default, or at the row's
``config``) or a quantity of the batch (``B``, ``num_items_in_batch``).  The
aggregation in it is the one the trainer's loss function applies for that
name; ``note`` says where the trainer's loop differs, or what the call does
not reproduce.  A test writes each trainer's formula out by hand and checks
the call against it (``tests/test_trainer_code.py``).

Where the trainer's ratio is against a third log-probability (the sampler's,
in OpenRLHF's and AReaL's corrections), the row's method is the one the
trainer computes on a batch's first step, where the old log-probabilities
*are* the current ones in value: ``old_log_prob`` then plays the sampler's
log-probabilities (its note says so, and that the loss's value differs).

Examples
--------
>>> from derivations.peers import PEERS
>>> [(p.name, p.cite.commit) for p in PEERS["dppo_tv"]["verl"]]
[('policy_loss "dppo_tv"', '1dda039b9c6311889a9c9a26040677e1254814f9')]
"""

from __future__ import annotations

from typing import NamedTuple

from .readings import Citation, snapshot

__all__ = ["PEERS", "Peer"]


class Peer(NamedTuple):
    r"""A trainer's name for a method, the package call that reproduces its loss, where it was read, and a note.

    ``call`` is a Python call of :func:`numeric.policy_loss` in which ``...``
    stands for ``log_prob, old_log_prob, advantages, mask`` and every other
    name is the trainer's own: a configuration field at its default (or at
    ``config``, where the row sets one) or a quantity of the batch (``B``,
    ``num_items_in_batch``).  ``cite`` names the trainer, the commit and the
    file and lines the row was read at.
    """

    name: str
    call: str
    cite: Citation
    note: str = ""
    config: dict = {}


def _at(trainer: str, commit: str, where: str) -> Citation:
    return Citation(trainer, snapshot(trainer, commit).commit, where)


_VERL_OLD = lambda where: _at("verl", "b178a3c", "verl/trainer/ppo/core_algos.py:" + where)  # noqa: E731
_VERL = lambda where: _at("verl", "1dda039", "verl/trainer/ppo/core_algos.py:" + where)  # noqa: E731
_TRL = lambda where: _at("TRL", "f2cd577", "trl/trainer/grpo_trainer.py:" + where)  # noqa: E731
_ORLHF = lambda where: _at("OpenRLHF", "3c3be62", "openrlhf/models/loss.py:" + where)  # noqa: E731
_PRIME = lambda where: _at("prime-rl", "559b447", "src/prime_rl/trainer/rl/loss.py:" + where + ", src/prime_rl/trainer/rl/train.py:301-323")  # noqa: E731
_SKY = lambda where: _at("SkyRL", "a956457", "skyrl/backends/skyrl_train/utils/ppo_utils.py:" + where + ", 1152-1220")  # noqa: E731
_SLIME = lambda where: _at("slime", "624b824", "slime/utils/ppo_utils.py:" + where + ", slime/backends/megatron_utils/cp_utils.py:47-124")  # noqa: E731
_AREAL = lambda where: _at("AReaL", "cbff54d", "areal/utils/functional/functional.py:" + where)  # noqa: E731
_SWIFT = lambda where: _at("ms-swift", "3602360", "swift/rlhf_trainers/grpo_trainer.py:" + where)  # noqa: E731

_VERL_LOOP = "verl's engine loop sets global_batch_info: token-mean / the mini-batch's tokens, seq-mean / its rows (empty ones counted)"
_VERL_SEQ = "seq-mean-token-mean whatever loss_agg_mode says; " + _VERL_LOOP
_TRL_ACCUMULATION = "/ gradient_accumulation_steps in training (a constant)"
_TRL_ITEMS = "num_items_in_batch: the generation batch's tokens (all processes and steps) / num_processes; here this batch's"
_ORLHF_LOOP = "its loop divides by the global batch_num_tokens / dp_size"
_SKY_LOOP = "SkyRL divides the advantages by the mini-batch's token count and sums (token_mean); its ratio is computed in float32"
_SWIFT_BETA = "ms-swift's default beta = 0.04 adds a k3 term to a reference model (not in the call)"
_FIRST_STEP = ("on a batch's first step (old_log_probs equal to log_probs in value): old_log_prob here plays the rollout log-probs; "
               "the trainer multiplies PPO's loss (value -A at ratio 1) by the weight, so the gradient is the call's and the value is not")

_CLIP = 'eps_low={low}, eps_high={high}'


def _ppo(name: str, low: str, high: str, agg: str, cite: Citation, note: str = "", method: str = "ppo", extra: str = "", config=None) -> Peer:
    return Peer(name, f'policy_loss("{method}", ..., {_CLIP.format(low=low, high=high)}{extra}, {agg})', cite, note, config or {})


def _trl_ppo(loss_type: str, aggregation: str, note: str = _TRL_ACCUMULATION) -> Peer:
    return _ppo(f'loss_type "{loss_type}"', "epsilon", "epsilon_high", aggregation, _TRL("3083-3091, 3124-3142"), note)


PEERS: dict[str, dict[str, tuple[Peer, ...]]] = {
    "reinforce": {
        "verl": (Peer('policy_loss "bypass_mode", loss_type "reinforce"',
                      'policy_loss("reinforce", ..., agg=loss_agg_mode, weight=rollout_is_weights)',
                      _VERL_OLD("1984-2061, 2064-2200"), _VERL_LOOP),),
    },
    "gpg": {"verl": (Peer('policy_loss "gpg"', 'policy_loss("gpg", ..., agg=loss_agg_mode)', _VERL_OLD("1414-1447"), _VERL_LOOP),)},
    "ppo": {
        "verl": (Peer('policy_loss "vanilla"',
                      'policy_loss("ppo", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, dual_clip=clip_ratio_c, '
                      'log_ratio_clamp=20, agg=loss_agg_mode)', _VERL_OLD("1159-1250"), _VERL_LOOP),
                 Peer('policy_loss "bypass_mode", loss_type "ppo_clip"',
                      'policy_loss("ppo", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, dual_clip=clip_ratio_c, '
                      'log_ratio_clamp=20, agg=loss_agg_mode)', _VERL("2412-2548"),
                      "vanilla with old_log_prob := rollout_log_probs and no IS weight; a rejection rule's 0/1 mask is weight= "
                      "(verl's global token count keeps rejected tokens); " + _VERL_LOOP)),
        "TRL": (_trl_ppo("grpo", 'agg="seq-mean-token-mean"'),
                _trl_ppo("bnpo", 'agg="token-mean"'),
                _trl_ppo("dr_grpo", 'agg="dr_grpo", convention="TRL@f2cd577", norm=max_completion_length'),
                _trl_ppo("dapo", 'agg="token-mean", norm=num_items_in_batch', _TRL_ITEMS),
                _ppo('loss_type "dapo", delta', "epsilon", "epsilon_high", 'agg="token-mean", norm=num_items_in_batch', _TRL("3083-3091, 3139-3142"),
                     "delta = 4 (INTELLECT-2's); for delta > 1 + epsilon_high, TRL's two-sided clip min(min(r, delta) A, clip(r) A) is the "
                     "dual clip C_d = delta (derivations.losses.two_sided_clip_derivation); below it TRL also lowers the A > 0 cap to delta; "
                     + _TRL_ITEMS, extra=", dual_clip=delta", config={"delta": 4.0})),
        "OpenRLHF": (Peer('PolicyLoss, policy_loss_type "ppo"',
                          'policy_loss("ppo", ..., eps_low=clip_eps_low, eps_high=clip_eps_high, dual_clip=dual_clip, '
                          'log_ratio_clamp=20, agg="token-mean")', _ORLHF("11-39, 116-230"), "token_level_loss=True; " + _ORLHF_LOOP),),
        "SkyRL": (_ppo('policy_loss_type "regular"', "eps_clip_low", "eps_clip_high", 'log_ratio_clamp=20, agg="token-mean"',
                       _SKY("555-587"), _SKY_LOOP),
                  _ppo('policy_loss_type "dual_clip"', "eps_clip_low", "eps_clip_high", 'log_ratio_clamp=20, agg="token-mean"',
                       _SKY("555-587"), _SKY_LOOP, extra=", dual_clip=clip_ratio_c")),
        "slime": (_ppo('advantage_estimator "grpo"', "eps_clip", "eps_clip_high", 'agg="seq-mean-token-mean"', _SLIME("124-148"),
                       "the per-sample mean over the step's samples (an empty sample counted); log-probs in float32"),),
        "AReaL": (_ppo("ppo_actor_loss_fn", "eps_clip", "eps_clip", 'agg="token-mean"', _AREAL("452-596"),
                       "use_decoupled_loss off (the old policy is the proximal one); the token mean over the PPO minibatch"),),
        "ms-swift": (_ppo('loss_type "grpo"', "epsilon", "epsilon_high", 'agg="seq-mean-token-mean"', _SWIFT("1062-1074, 1096-1098"),
                          _SWIFT_BETA),
                     _ppo('loss_type "dapo", delta', "epsilon", "epsilon_high", 'agg="token-mean", norm=num_items_in_batch',
                          _SWIFT("1062-1074, 1140-1143"), "delta = 4; the dual clip C_d = delta for delta > 1 + epsilon_high; " + _SWIFT_BETA,
                          extra=", dual_clip=delta", config={"delta": 4.0})),
    },
    "gspo": {
        "TRL": (Peer('importance_sampling_level "sequence"',
                     'policy_loss("gspo", ..., eps_low=epsilon, eps_high=epsilon_high, agg="seq-mean-token-mean")',
                     _TRL("3054-3066, 3083-3091, 3124-3128"), "loss_type grpo; " + _TRL_ACCUMULATION),),
        "OpenRLHF": (Peer('policy_loss_type "gspo"',
                          'policy_loss("gspo", ..., eps_low=clip_eps_low, eps_high=clip_eps_high, dual_clip=dual_clip, '
                          'agg="seq-mean-token-mean", count_eps=1e-8, empty_rows="exclude")',
                          _ORLHF("11-39, 170-193"), "gspo forces token_level_loss=False; " + _ORLHF_LOOP),),
        "slime": (_ppo('advantage_estimator "gspo"', "eps_clip", "eps_clip_high", 'agg="seq-mean-token-mean"', _SLIME("95-148"),
                       "the row's mean log-ratio with its gradient through every token, on each token; per-sample mean", method="gspo"),),
        "AReaL": (_ppo('importance_sampling_level "sequence"', "eps_clip", "eps_clip", 'agg="token-mean"', _AREAL("56-149, 530-535"),
                       "AReaL replaces A by the row's mean advantage (the same here: one advantage per row); a row weighs n_i / N",
                       method="gspo"),),
        "ms-swift": (_ppo('importance_sampling_level "sequence"', "epsilon", "epsilon_high", 'agg="seq-mean-token-mean"',
                          _SWIFT("1025-1039, 1062-1074, 1096-1098"), _SWIFT_BETA, method="gspo"),),
    },
    "gspo_token": {
        "verl": (Peer('policy_loss "gspo"',
                      'policy_loss("gspo_token", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, '
                      'agg="seq-mean-token-mean", count_eps=1e-8, empty_rows="exclude")',
                      _VERL_OLD("1253-1326"), "verl caps the row's mean log-ratio at 10 (not here); " + _VERL_SEQ),),
        "SkyRL": (_ppo('policy_loss_type "gspo"', "eps_clip_low", "eps_clip_high", 'agg="token-mean"', _SKY("663-729"),
                       "SkyRL caps the log of the straight-through ratio at 10 (not here) and warns unless loss_reduction is sequence_mean; "
                       + _SKY_LOOP, method="gspo_token"),),
    },
    "cispo": {
        "verl": (Peer('policy_loss "cispo"',
                      'policy_loss("cispo", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, log_ratio_clamp=20, agg=loss_agg_mode)',
                      _VERL_OLD("1721-1779"), _VERL_LOOP),),
        "TRL": (Peer('loss_type "cispo"',
                     'policy_loss("cispo", ..., eps_low=None, eps_high=epsilon_high - 1, agg="token-mean", norm=num_items_in_batch)',
                     _TRL("3080-3082, 3139-3142"), "epsilon_high = 5.0 (TRL's advice for cispo); " + _TRL_ITEMS, {"epsilon_high": 5.0}),),
        "SkyRL": (_ppo('policy_loss_type "cispo"', "cispo_eps_clip_low", "cispo_eps_clip_high", 'log_ratio_clamp=20, agg="token-mean"',
                       _SKY("732-821"), "the band [1 - 1.0, 1 + 4.0]: the cap min(r, 5) at the defaults; " + _SKY_LOOP, method="cispo"),),
        "slime": (_ppo('advantage_estimator "cispo"', "eps_clip", "eps_clip_high", 'agg="seq-mean-token-mean"', _SLIME("151-171"),
                       "the band [1 - eps_clip, 1 + eps_clip_high] (0.2, 0.2 by default; slime advises 1.0, 4.0)", method="cispo"),),
        "AReaL": (_ppo("use_cispo_loss", "eps_clip", "eps_clip_higher", 'agg="token-mean"', _AREAL("678-793"),
                       "eps_clip_higher is required (no default); the row sets AReaL's advice eps_clip = 1.0, eps_clip_higher = 4.0",
                       method="cispo", config={"eps_clip": 1.0, "eps_clip_higher": 4.0}),),
        "ms-swift": (Peer('loss_type "cispo"',
                          'policy_loss("cispo", ..., eps_low=None, eps_high=epsilon_high - 1, agg="token-mean", norm=num_items_in_batch)',
                          _SWIFT("1050-1052, 1140-1143"), "epsilon_high = 5.0 (ms-swift's docs; the code's default is epsilon = 0.2); "
                          + _SWIFT_BETA, {"epsilon_high": 5.0}),),
    },
    "cispo_seq": {
        "TRL": (Peer('loss_type "cispo", importance_sampling_level "sequence"',
                     'policy_loss("cispo_seq", ..., eps_low=None, eps_high=epsilon_high - 1, agg="token-mean", norm=num_items_in_batch)',
                     _TRL("3054-3066, 3080-3082, 3139-3142"), "epsilon_high = 5.0 (TRL's advice for cispo); " + _TRL_ITEMS,
                     {"epsilon_high": 5.0}),),
    },
    "sapo": {
        "verl": (Peer('policy_loss "sapo"',
                      'policy_loss("sapo", ..., sapo_tau=(tau_pos, tau_neg), agg="seq-mean-token-mean", count_eps=1e-8, '
                      'empty_rows="exclude", log_ratio_clamp=20)', _VERL_OLD("1329-1411"), _VERL_SEQ),),
        "TRL": (Peer('loss_type "sapo"',
                     'policy_loss("sapo", ..., sapo_tau=(sapo_temperature_pos, sapo_temperature_neg), agg="seq-mean-token-mean")',
                     _TRL("3092-3095, 3124-3128"), "grpo's aggregation; " + _TRL_ACCUMULATION),),
        "SkyRL": (Peer('policy_loss_type "sapo"', 'policy_loss("sapo", ..., sapo_tau=(tau_pos, tau_neg), log_ratio_clamp=20, agg="token-mean")',
                       _SKY("590-660"), "SkyRL's sapo exponentiates in the input dtype; " + _SKY_LOOP),),
    },
    "sapo_seq": {
        "TRL": (Peer('loss_type "sapo", importance_sampling_level "sequence"',
                     'policy_loss("sapo_seq", ..., sapo_tau=(sapo_temperature_pos, sapo_temperature_neg), agg="seq-mean-token-mean")',
                     _TRL("3054-3066, 3092-3095, 3124-3128"), "grpo's aggregation; " + _TRL_ACCUMULATION),),
    },
    "vespo": {
        "TRL": (Peer('loss_type "vespo"',
                     'policy_loss("vespo", ..., vespo_k=(vespo_k_pos, vespo_k_neg), vespo_lambda=(vespo_lambda_pos, vespo_lambda_neg), '
                     'log_ratio_clamp=20, agg="token-mean", norm=num_items_in_batch)',
                     _TRL("2943-2989, 3096-3107, 3139-3142"), "TRL also clamps log W to [ln 1e-8, 20] (not here); " + _TRL_ITEMS),),
    },
    "gmpo": {
        "verl": (Peer('policy_loss "geo_mean"', 'policy_loss("gmpo", ..., gmpo_clip=(clip_ratio_low, clip_ratio_high))', _VERL_OLD("1635-1718"),
                      "the mean over all B rows whatever loss_agg_mode says; verl's n_i + 1e-8 is max(n_i, 1) here (relative 1e-8/n_i)"),),
    },
    "clip_cov": {
        "verl": (Peer('policy_loss "clip_cov"',
                      'policy_loss("clip_cov", ..., eps_low=clip_ratio_low, eps_high=clip_ratio_high, '
                      'selected=clip_cov_selection(..., fraction=clip_cov_ratio, bounds=(clip_cov_lb, clip_cov_ub)), agg=loss_agg_mode)',
                      _VERL_OLD("1450-1552"), _VERL_LOOP),),
    },
    "kl_cov": {
        "verl": (Peer('policy_loss "kl_cov"',
                      'policy_loss("kl_cov", ..., kl_cov_coef=ppo_kl_coef, selected=kl_cov_selection(..., fraction=kl_cov_ratio), '
                      'agg=loss_agg_mode)', _VERL_OLD("1555-1632"), _VERL_LOOP),),
    },
    "dppo": {
        "prime-rl": (Peer('loss "default"',
                          'policy_loss("dppo", ..., tv_delta=(dppo_mask_low, dppo_mask_high), kl_tau=kl_tau, agg="token-mean")',
                          _PRIME("109-161"), "old_log_prob: the inference log-probs (prime-rl's ratio is against the sampler); adv_tau = 1; "
                          "the count of the step's loss tokens over the data-parallel group"),),
        "SkyRL": (Peer('policy_loss_type "dppo"',
                       'policy_loss("dppo", ..., tv_delta=(delta_low, delta_high), dppo_type=dppo_type, log_ratio_clamp=20, agg="token-mean")',
                       _SKY("866-935"), "old_log_prob: the rollout log-probs where given; " + _SKY_LOOP),),
    },
    "dppo_tv": {
        "verl": (Peer('policy_loss "dppo_tv"',
                      'policy_loss("dppo_tv", ..., tv_delta=(clip_ratio_low, clip_ratio_high), is_cap=clip_ratio_c, agg=loss_agg_mode)',
                      _VERL("1379-1457"), "clip_ratio_low/high are the TV thresholds; the truncation is clip_ratio_c = 3 (the code's fallback "
                      "20 never applies: ActorConfig always sets it); verl clamps log r at +-20 before min(r, C) (no effect for C < e^20); "
                      + _VERL_LOOP),),
    },
    "dppo_kl": {
        "verl": (Peer('policy_loss "dppo_kl"',
                      'policy_loss("dppo_kl", ..., tv_delta=(clip_ratio_low, clip_ratio_high), is_cap=clip_ratio_c, agg=loss_agg_mode)',
                      _VERL("1460-1542"), "clip_ratio_low/high are the binary-KL bounds (the paper's 0.05 set here); the truncation is "
                      "clip_ratio_c = 3; " + _VERL_LOOP, {"clip_ratio_low": 0.05, "clip_ratio_high": 0.05}),),
    },
    "tv_band": {
        "prime-rl": (Peer('loss "ipo"', 'policy_loss("tv_band", ..., band_delta=ipo_threshold, kl_tau=kl_tau, agg="token-mean")',
                          _PRIME("164-196"), "old_log_prob: the inference log-probs; adv_tau = 1"),),
    },
    "dro": {
        "verl": (Peer('policy_loss "dro"', 'policy_loss("dro", ..., dro_beta=dro_beta, agg=loss_agg_mode)', _VERL("2013-2043"),
                      "dro_beta has no default in verl (null raises); the row sets 0.1; " + _VERL_LOOP, {"dro_beta": 0.1}),),
    },
    "importance_sampling": {
        "SkyRL": (Peer('policy_loss_type "importance_sampling"', 'policy_loss("importance_sampling", ..., agg="token-mean")',
                       _SKY("1095-1142"), "Tinker's semantics: the masked sum of -r A (r unclamped, in the input dtype); " + _SKY_LOOP),),
    },
    "icepop": {
        "OpenRLHF": (Peer('vllm_is_correction_type "icepop"',
                          'policy_loss("icepop", ..., is_bounds=vllm_is_truncated_threshold, agg="token-mean")',
                          _ORLHF("11-39, 196-227"), _FIRST_STEP + "; " + _ORLHF_LOOP),),
        "AReaL": (Peer("rejection_sampling (token, ratio, upper 5)", 'policy_loss("icepop", ..., is_bounds=(0, upper), agg="token-mean")',
                       _AREAL("185-437, 452-596"), "prox_logp_method reuse_train_logp (the proximal policy is the current one); "
                       + _FIRST_STEP + "; a rejected token stays in the denominator"),),
    },
    "rollout_is": {
        "SkyRL": (Peer('policy_loss_type "rollout_is"',
                       'policy_loss("rollout_is", ..., eps_low=eps_clip_low, eps_high=eps_clip_high, log_ratio_clamp=20, agg="token-mean")',
                       _SKY("824-863"), "old_log_prob: the rollout log-probs; " + _SKY_LOOP),),
    },
    "seq_mask_tis": {
        "OpenRLHF": (Peer('vllm_is_correction_type "seq-mask-tis"',
                          'policy_loss("seq_mask_tis", ..., is_bounds=vllm_is_truncated_threshold, agg="token-mean")',
                          _ORLHF("11-39, 196-227"), _FIRST_STEP + "; the token weight is the raw ratio (no clamp), the row kept when its "
                          "geometric-mean ratio is in the bounds; " + _ORLHF_LOOP),),
    },
    "opsm": {
        "TRL": (Peer('off_policy_mask_threshold (loss_type "grpo")',
                     'policy_loss("opsm", ..., eps_low=epsilon, eps_high=epsilon_high, opsm_delta=off_policy_mask_threshold, '
                     'agg="seq-mean-token-mean")', _TRL("2920-2939, 3039-3052, 3083-3091, 3109-3110, 3124-3128"),
                     "off_policy_mask_threshold = 0.05 (TRL's default None: OPSM off); the statistic compares the sampler's log-probs "
                     "(here old_log_prob) with the current ones; a dropped row stays in the denominators; " + _TRL_ACCUMULATION,
                     {"off_policy_mask_threshold": 0.05}),),
        "slime": (Peer("use_opsm", 'policy_loss("opsm", ..., eps_low=eps_clip, eps_high=eps_clip_high, opsm_delta=opsm_delta, '
                       'agg="seq-mean-token-mean")', _SLIME("54-92, 124-148"),
                       "opsm_delta = 0.05 (slime's default 1e-4); slime drops a token where its own advantage is negative (one advantage "
                       "per row here); a dropped token stays in the denominator", {"opsm_delta": 0.05}),),
        "ms-swift": (Peer("off_policy_sequence_mask_delta",
                          'policy_loss("opsm", ..., eps_low=epsilon, eps_high=epsilon_high, opsm_delta=off_policy_sequence_mask_delta, '
                          'agg="seq-mean-token-mean")', _SWIFT("1083-1094, 2378-2418"),
                          "off_policy_sequence_mask_delta = 0.05 (default None: off); the row-mean advantage decides its sign; ms-swift "
                          "edits the completion mask (a dropped row leaves bnpo's denominator, stays in grpo's B); " + _SWIFT_BETA,
                          {"off_policy_sequence_mask_delta": 0.05}),),
    },
    "luspo": {
        "TRL": (Peer('loss_type "luspo"', 'policy_loss("luspo", ..., eps_low=epsilon, eps_high=epsilon_high)',
                     _TRL("3054-3066, 3083-3091, 3143-3148"),
                     "importance_sampling_level sequence (TRL warns otherwise): a (B, 1) loss times n_i, averaged over B; "
                     + _TRL_ACCUMULATION),),
    },
    "ppo_product": {
        "TRL": (Peer("RLOOTrainer", 'policy_loss("ppo_product", ..., eps_low=epsilon, eps_high=epsilon_high)',
                     _at("TRL", "f2cd577", "trl/trainer/rloo_trainer.py:1655-1694"),
                     "the row's summed log-ratio (the product of its ratios), clipped as PPO, averaged over the B rows (an all-masked row "
                     "adds -A_i / B to TRL's value, nothing to its gradient; 0 here); HF's Trainer divides by the accumulation steps"),),
    },
    "top_entropy": {
        "TRL": (Peer('top_entropy_quantile (loss_type "grpo")',
                     'policy_loss("top_entropy", ..., eps_low=epsilon, eps_high=epsilon_high, '
                     'selected=~high_entropy_mask(entropies, mask, top_quantile=top_entropy_quantile), agg="seq-mean-token-mean")',
                     _TRL("1396-1432, 3020-3023, 3114-3115, 3124-3128"),
                     "the quantile is over the micro-batch's entropies gathered over processes; a dropped token stays in n_i; "
                     + _TRL_ACCUMULATION),),
    },
    "m2po": {
        "AReaL": (Peer("m2_threshold (M2PO)",
                       'policy_loss("m2po", ..., eps_low=eps_clip, eps_high=eps_clip, '
                       'selected=m2po_selection(rollout_log_probs, old_log_prob, mask, threshold=m2_threshold), '
                       'agg="token-mean")', _at("AReaL", "cbff54d", "areal/trainer/ppo/actor.py:933-1014, 571-573"),
                       "the selection is per micro-batch; the engine still weighs the micro-batch by its count before the drop"),),
    },
}
"""Each method's rows, by trainer: ``PEERS[method][trainer]``."""
