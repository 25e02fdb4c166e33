r"""Every sampler correction the trainers ship, as read at a pinned commit, with its exact bias and variance on the toy LM.

:data:`READINGS` are the rows of chapter 7's first trainer table (the weights
:data:`numeric.off_policy.SCHEMES` computes, each trainer option with its
:class:`~derivations.readings.Citation`); :data:`RULES` are the rules the
trainers ship beyond them (verl's presets and rejection criteria, bypass mode,
OpenRLHF, TRL's OPSM, SkyRL, AReaL's rejection sampling, M2PO and log-linear
proximal policy, prime-rl's trust-region masks), each as configured by its
trainer's defaults or shipped example.  :func:`rule_moments` gives the exact
bias :math:`\lVert\mathbb E_\mu\hat g - \nabla J\rVert` and trace variance of a
rule's estimator :math:`\hat g = \sum_t v_t A s_t` on any :class:`Episodes`;
:func:`rule_table` renders them for the chapter, computed when the book is built.

M2PO decides with the whole micro-batch, so it has two exact readings: a
micro-batch of one sequence (the rule applied to each episode alone), and the
limit of a large micro-batch, where the cut becomes a number fixed by the
sampler and the policy (:func:`m2po_limit`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from derivations.readings import Citation

from .._validate import require_finite_real
from .masks import loglinear_proximal_log_prob, m2po_mask, off_policy_sequence_mask, rejection_sampling_weight, trust_region_mask
from .models import Episodes, SchemeMoments, estimator_samples, sampler_moments, scheme_moments, tinylm_episodes
from .rollout import rollout_is_weights, rollout_rejection_mask
from .weights import (
    geometric_sequence_mask,
    masked_sequence_ratio,
    token_ratio,
    truncated_sequence_ratio,
    truncated_token_ratio,
)

__all__ = ["READINGS", "RULES", "M2POLimit", "Reading", "Rule", "Setting", "m2po_limit", "reading_table", "rule_moments", "rule_table"]

F64 = torch.float64


@dataclass(frozen=True)
class Setting:
    """A trainer's option values, and where they were read."""

    text: str
    citation: Citation


@dataclass(frozen=True)
class Rule:
    r"""A correction rule: the trainers' settings that ship it, its weight :math:`v_t` in LaTeX, and the weight on the exact models.

    ``weight(episodes, advantages)`` is ``[E, T]``; ``advantages`` is ``[E]``.
    """

    settings: tuple[Setting, ...]
    formula: str
    weight: Callable[[Episodes, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Reading:
    r"""A row of chapter 7's first table: a scheme of :data:`~numeric.off_policy.SCHEMES`, the trainers' settings, when it is unbiased, and its exact bias."""

    name: str
    settings: tuple[Setting, ...]
    weight: str
    unbiased_when: str
    bias: str


def _lines(*parts: str) -> str:
    """A formula on several lines of a table cell."""
    return r"\begin{array}{l}" + r" \\ ".join(parts) + r"\end{array}"


def _c(trainer: str, commit: str, where: str) -> Citation:
    return Citation(trainer, commit, where)


VERL, VERL_OLD, TRL, OPENRLHF, PRIME, SKYRL, AREAL = "1dda039", "b178a3c", "f2cd577", "3c3be62", "559b447", "a956457", "cbff54d"
_HELPER, _ALGO = "verl/trainer/ppo/rollout_corr_helper.py", "verl/trainer/config/algorithm.py"
_TRL_IS = _c("TRL", TRL, "trl/trainer/grpo_trainer.py:2578-2623")
_ORL = "openrlhf/models/loss.py"
_SKY = "skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py"
_AREAL_RS = "areal/utils/functional/functional.py:185-437"


def _lp(ep: Episodes) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return ep.log_prob, ep.sampler_log_prob, ep.mask


# -- the first table: what SCHEMES computes, with each trainer's name for it ------------------------

READINGS: tuple[Reading, ...] = (
    Reading("no correction", (), r"1", r"\mu = \pi", r"\mathbb E_\mu[A\sum_t s_t] - \mathbb E_\pi[A\sum_t s_t]"),
    Reading("sequence IS", (), r"\rho", r"\text{always}", r"0"),
    Reading("sequence TIS", (Setting('sequence_truncate', _TRL_IS),
                             Setting('rollout_is="sequence"', _c("verl", VERL_OLD, f"{_HELPER}:481-598"))),
            r"\min(\rho, C)", r"\rho \le C", r"-\mathbb E_\mu[(\rho - C)_+ A \sum_t s_t]"),
    Reading("sequence mask", (Setting('sequence_mask (no clip_min: l = 0)', _TRL_IS),
                              Setting('rollout_rs="seq_sum_k1" times rollout_is="sequence" (cap >= h)', _c("verl", VERL_OLD, f"{_HELPER}:156-372"))),
            r"\rho\,\mathbb 1[l \le \rho \le h]", r"\text{no sequence dropped}", r"-\mathbb E_\mu[\rho\,\mathbb 1[\rho \notin [l, h]]\, A \sum_t s_t]"),
    Reading("token IS", (), r"\rho_t", r"\mu = \pi", r"\sum_{a,a'}\pi_0(\mu_2 - \pi_2)As_0 + (\mu_0 - \pi_0)\pi_2 A s_2"),
    Reading("token TIS", (Setting("token_truncate", _TRL_IS), Setting("tis", _c("OpenRLHF", OPENRLHF, f"{_ORL}:214-217")),
                          Setting('rollout_is="token"', _c("verl", VERL_OLD, f"{_HELPER}:481-598"))),
            r"\min(\rho_t, C)", r"\mu = \pi", r"\text{token IS's} - \mathbb E_\mu[\sum_t (\rho_t - C)_+ A s_t]"),
    Reading("token mask (IcePop)", (Setting("icepop", _c("OpenRLHF", OPENRLHF, f"{_ORL}:200-205")), Setting("token_mask", _TRL_IS),
                                    Setting('rollout_rs="token_k1" times rollout_is="token" (cap >= h)', _c("verl", VERL_OLD, f"{_HELPER}:156-372"))),
            r"\rho_t\,\mathbb 1[l \le \rho_t \le h]", r"\mu = \pi", r"\text{token IS's} - \mathbb E_\mu[\sum_t \rho_t \mathbb 1[\rho_t \notin [l, h]] A s_t]"),
    Reading("geometric mask x token TIS", (Setting("seq-mask-tis (with v_t = rho_t)", _c("OpenRLHF", OPENRLHF, f"{_ORL}:206-213")),
                                           Setting('rollout_rs="seq_mean_k1" times rollout_is="token"', _c("verl", VERL_OLD, f"{_HELPER}:156-372"))),
            r"v_t\,\mathbb 1[l \le \rho^{1/|o|} \le h]", r"\mu = \pi", r"\text{that of } v - \mathbb E_\mu[\mathbb 1[\text{dropped}] \sum_t v_t A s_t]"),
    Reading("k3 rejection x token IS", (Setting('rollout_rs="seq_sum_k2", "seq_sum_k3"', _c("verl", VERL_OLD, f"{_HELPER}:156-372")),),
            r"v_t\,\mathbb 1[\sum_t k_3(\rho_t) \le d]", r"\mu = \pi", r"\text{that of } v - \mathbb E_\mu[\mathbb 1[\text{rejected}] \sum_t v_t A s_t]"),
)
"""The rows of chapter 7's first trainer table; ``name`` is the scheme of :data:`~numeric.off_policy.SCHEMES`."""


# -- the rules beyond them ---------------------------------------------------------------------------------


def _verl(ep: Episodes, A: torch.Tensor, rollout_is: str | None = None, is_threshold: float | str = 2.0,
          rollout_rs: str | None = None, rs_threshold: float | str = 0.0) -> torch.Tensor:
    """verl's decoupled mode: the IS weight (or 1) times the rejection mask (or 1)."""
    lp, lmu, m = _lp(ep)
    v = m if rollout_is is None else rollout_is_weights(lp, lmu, m, rollout_is=rollout_is, rollout_is_threshold=is_threshold)
    if rollout_rs is not None:
        v = v * rollout_rejection_mask(lp, lmu, m, rollout_rs=rollout_rs, rollout_rs_threshold=rs_threshold)
    return v


def _ppo_clip_weight(ratio: torch.Tensor, A: torch.Tensor, low: float, high: float, dual_clip: float | None = None) -> torch.Tensor:
    r"""The gradient weight of PPO-clip at its ratio :math:`r`: :math:`r` unless the clip (or the dual clip) holds the loss constant.

    :math:`r\,\mathbb 1[A > 0 \Rightarrow r \le 1 + \varepsilon_h]\,\mathbb 1[A < 0 \Rightarrow 1 - \varepsilon_l \le r \le C_d]`
    (:func:`derivations.corrections.sign_aware_mask`; the registry's derived weight,
    :func:`numeric.policy_weight` ``("ppo", ...)``, agrees off the kinks).  ``ratio`` is
    ``[E, T]`` (0 on masked slots), ``A`` ``[E]``.
    """
    A = A[:, None].expand_as(ratio)
    dropped = ((A > 0) & (ratio > 1 + high)) | ((A < 0) & (ratio < 1 - low))
    if dual_clip is not None:
        dropped = dropped | ((A < 0) & (ratio > dual_clip))
    return torch.where(dropped, torch.zeros_like(ratio), ratio)


def _bypass_ppo_clip(ep: Episodes, A: torch.Tensor) -> torch.Tensor:
    """PPO-clip with the sampler's log-probs as the old ones: the ratio pi/mu, clipped at 0.2, dual clip 3 (verl's defaults)."""
    return _ppo_clip_weight(token_ratio(*_lp(ep)), A, 0.2, 0.2, 3.0)


def _sign_mask(ep: Episodes, A: torch.Tensor, **options) -> torch.Tensor:
    """Token IS times a trust-region mask (prime-rl, SkyRL dppo): the ratio is not detached, so its gradient weight is rho_t."""
    lp, lmu, m = _lp(ep)
    return token_ratio(lp, lmu, m) * trust_region_mask(lp, lmu, A, m, **options)


def _skyrl_rollout_is(ep: Episodes, A: torch.Tensor) -> torch.Tensor:
    """SkyRL ``rollout_is``: rho_t where 1 - 0.2 < rho_t < 1 + 0.2 (strict), 0 elsewhere."""
    rho = token_ratio(*_lp(ep))
    return torch.where((rho > 0.8) & (rho < 1.2), rho, torch.zeros_like(rho))


def _skyrl(ep: Episodes, A: torch.Tensor, tis: str, mask: str) -> torch.Tensor:
    """SkyRL's TIS ratio (token cap 2, product cap 5) times its sequence mask (geometric [0.99, 1.01], product [0.5, 2])."""
    lp, lmu, m = _lp(ep)
    w = truncated_token_ratio(lp, lmu, m, 2.0) if tis == "token" else truncated_sequence_ratio(lp, lmu, m, 5.0)
    keep = geometric_sequence_mask(lp, lmu, m, 0.99, 1.01) if mask == "geometric" else (masked_sequence_ratio(lp, lmu, m, 0.5, 2.0) > 0).to(F64)
    return w * keep


def _areal(ep: Episodes, A: torch.Tensor, **options) -> torch.Tensor:
    return rejection_sampling_weight(*_lp(ep), **options)


def _m2po_per_sequence(ep: Episodes, A: torch.Tensor, threshold: float = 0.04) -> torch.Tensor:
    """M2PO with each episode its own micro-batch, times AReaL's example rejection (token ratio <= 5)."""
    lp, lmu, m = _lp(ep)
    keep = torch.cat([m2po_mask(lp[i:i + 1], lmu[i:i + 1], m[i:i + 1], threshold=threshold) for i in range(len(lp))])
    return rejection_sampling_weight(lp, lmu, m, upper=5.0) * keep


def _m2po_large(ep: Episodes, A: torch.Tensor, threshold: float = 0.04) -> torch.Tensor:
    return rejection_sampling_weight(*_lp(ep), upper=5.0) * m2po_limit(ep, threshold).keep


def _loglinear(ep: Episodes, A: torch.Tensor, staleness: int = 2) -> torch.Tensor:
    r"""AReaL's decoupled PPO with the log-linear proximal policy: PPO weight of r = pi/pi_prox (clip 0.4) times the behaviour weight (ratio <= 5)."""
    lp, lmu, m = _lp(ep)
    prox = loglinear_proximal_log_prob(lp, lmu, torch.full_like(lp, 10.0 - staleness), m, current_version=10)
    return _ppo_clip_weight(token_ratio(lp, prox, m), A, 0.4, 0.4) * rejection_sampling_weight(prox, lmu, m, upper=5.0)


def _opsm(ep: Episodes, A: torch.Tensor, delta: float) -> torch.Tensor:
    lp, lmu, m = _lp(ep)
    return masked_sequence_ratio(lp, lmu, m, 0.0, 3.0) * off_policy_sequence_mask(lp, lmu, A, m, delta=delta)


_S = Setting
RULES: dict[str, Rule] = {
    "verl token IcePop; AReaL and OpenRLHF icepop": Rule(
        (_S('rollout_is="token", rollout_is_threshold="0.5_5.0" (preset decoupled_token_icepop)', _c("verl", VERL, f"{_ALGO}:215-233; {_HELPER}:594-604")),
         _S("rejection_sampling: level=token, metric=ratio, lower=0.5, upper=5.0 (examples/math/gsm8k_icepop.yaml:76-81)", _c("AReaL", AREAL, _AREAL_RS)),
         _S("vllm_is_correction_type=icepop, thresholds [0.5, 5.0] (the defaults, openrlhf/cli/train_ppo_ray.py:257-271)", _c("OpenRLHF", OPENRLHF, f"{_ORL}:200-205"))),
        r"\rho_t\,\mathbb 1[\tfrac12 \le \rho_t \le 5]", partial(_verl, rollout_is="token", is_threshold="0.5_5.0")),
    "verl Seq-MIS": Rule(
        (_S('rollout_is="sequence", 2.0; rollout_rs="seq_sum_k1", "0.5_2.0" (preset decoupled_seq_is_rs)', _c("verl", VERL, f"{_ALGO}:236-258; {_HELPER}:323-341")),),
        r"\min(\rho, 2)\,\mathbb 1[\tfrac12 \le \rho \le 2]", partial(_verl, rollout_is="sequence", rollout_rs="seq_sum_k1", rs_threshold="0.5_2.0")),
    "verl Geo-RS": Rule(
        (_S('rollout_rs="seq_mean_k1", "0.999_1.001", no IS weight (preset decoupled_geo_rs)', _c("verl", VERL, f"{_ALGO}:261-281; {_HELPER}:342-360")),),
        r"\mathbb 1[1.001^{-1} \le \rho^{1/|o|} \le 0.999^{-1}]", partial(_verl, rollout_rs="seq_mean_k1", rs_threshold="0.999_1.001")),
    "verl K3-RS, token TIS": Rule(
        (_S('rollout_is="token", 2.0; rollout_rs="seq_mean_k3", 0.01 (preset decoupled_k3_rs_token_tis)', _c("verl", VERL, f"{_ALGO}:582-605; {_HELPER}:342-360")),),
        r"\min(\rho_t, 2)\,\mathbb 1[\tfrac{1}{|o|}\sum_u k_3(\rho_u) \le 0.01]", partial(_verl, rollout_is="token", rollout_rs="seq_mean_k3", rs_threshold=0.01)),
    "verl seq_max_k2 and token_k1, token TIS": Rule(
        (_S('rollout_is="token", 2.0; rollout_rs="token_k1,seq_max_k2", "0.5_2.0,0.02" (chained)', _c("verl", VERL, f"{_HELPER}:132-194, 279-284, 312-316, 361-380")),),
        _lines(r"\min(\rho_t, 2)\,\mathbb 1[\tfrac12 \le \rho_t \le 2]", r"\cdot\,\mathbb 1[\max_u |\log\rho_u| \le 0.2]"),
        partial(_verl, rollout_is="token", rollout_rs="token_k1,seq_max_k2", rs_threshold="0.5_2.0,0.02")),
    "verl bypass PPO-clip": Rule(
        (_S('bypass_mode=True, loss_type="ppo_clip" (preset bypass_ppo_clip); clip_ratio 0.2, clip_ratio_c 3.0', _c("verl", VERL, "verl/trainer/ppo/core_algos.py:1255-1279, 2412-2540")),),
        _lines(r"\rho_t\,\mathbb 1[A > 0 \Rightarrow \rho_t \le 1.2]", r"\cdot\,\mathbb 1[A < 0 \Rightarrow 0.8 \le \rho_t \le 3]"), _bypass_ppo_clip),
    "verl bypass REINFORCE, sequence TIS": Rule(
        (_S('bypass_mode=True, loss_type="reinforce", rollout_is="sequence", 2.0 (preset bypass_pg_is)', _c("verl", VERL, f"{_ALGO}:352-370; verl/trainer/ppo/core_algos.py:2386-2388, 2516-2526")),),
        r"\min(\rho, 2)", partial(_verl, rollout_is="sequence")),
    "OpenRLHF tis": Rule(
        (_S("vllm_is_correction_type=tis, thresholds [0.5, 5.0] (the defaults)", _c("OpenRLHF", OPENRLHF, f"{_ORL}:214-217")),),
        r"\min(\max(\rho_t, \tfrac12), 5)", lambda ep, A: truncated_token_ratio(*_lp(ep), cap=5.0, floor=0.5)),
    "OpenRLHF seq-mask-tis": Rule(
        (_S("vllm_is_correction_type=seq-mask-tis, thresholds [0.5, 5.0]", _c("OpenRLHF", OPENRLHF, f"{_ORL}:206-213")),),
        r"\rho_t\,\mathbb 1[\tfrac12 \le \rho^{1/|o|} \le 5]", lambda ep, A: token_ratio(*_lp(ep)) * geometric_sequence_mask(*_lp(ep), 0.5, 5.0)),
    "TRL default (sequence_mask, 3)": Rule(
        (_S("vllm_importance_sampling_mode=sequence_mask, clip_max=3.0 (the defaults, trl/trainer/grpo_config.py:924-951)", _TRL_IS),),
        r"\rho\,\mathbb 1[\rho \le 3]", lambda ep, A: masked_sequence_ratio(*_lp(ep), 0.0, 3.0)),
    "TRL OPSM (0.5) on the default": Rule(
        (_S("off_policy_mask_threshold=0.5 (the help text's example), on the default sequence_mask", _c("TRL", TRL, "trl/trainer/grpo_trainer.py:2920-2939, 3039-3052, 3111-3118")),),
        _lines(r"\rho\,\mathbb 1[\rho \le 3]", r"\cdot\,\mathbb 1[A \ge 0 \text{ or } \tfrac1{|o|}\sum_t \log\tfrac{\mu_t}{\pi_t} \le 0.5]"), partial(_opsm, delta=0.5)),
    "TRL OPSM (0.05) on the default": Rule(
        (_S("off_policy_mask_threshold=0.05", _c("TRL", TRL, "trl/trainer/grpo_trainer.py:2920-2939")),),
        _lines(r"\rho\,\mathbb 1[\rho \le 3]", r"\cdot\,\mathbb 1[A \ge 0 \text{ or } \tfrac1{|o|}\sum_t \log\tfrac{\mu_t}{\pi_t} \le 0.05]"), partial(_opsm, delta=0.05)),
    "SkyRL token TIS, geometric mask": Rule(
        (_S('tis_ratio_type="token" (cap 2.0), sequence_mask_metric="geometric" ([0.99, 1.01]) (skyrl/train/config/config.py:792-810)', _c("SkyRL", SKYRL, f"{_SKY}:24-72, 191-236")),),
        r"\min(\rho_t, 2)\,\mathbb 1[0.99 \le \rho^{1/|o|} \le 1.01]", partial(_skyrl, tis="token", mask="geometric")),
    "SkyRL sequence TIS, product mask": Rule(
        (_S('tis_ratio_type="sequence" (cap 5.0), sequence_mask_metric="product" ([0.5, 2.0])', _c("SkyRL", SKYRL, f"{_SKY}:61-70, 237-252")),),
        r"\min(\rho, 5)\,\mathbb 1[\tfrac12 \le \rho \le 2]", partial(_skyrl, tis="sequence", mask="product")),
    "SkyRL rollout_is loss": Rule(
        (_S('policy_loss_type="rollout_is", eps_clip_low = eps_clip_high = 0.2', _c("SkyRL", SKYRL, "skyrl/backends/skyrl_train/utils/ppo_utils.py:824-863")),),
        r"\rho_t\,\mathbb 1[0.8 < \rho_t < 1.2]", _skyrl_rollout_is),
    "SkyRL dppo binary_kl (0.05)": Rule(
        (_S('policy_loss_type="dppo", dppo_type="binary_kl", delta 0.05 (the recommended KL value, skyrl/train/config/config.py:775-784)', _c("SkyRL", SKYRL, "skyrl/backends/skyrl_train/utils/ppo_utils.py:866-935")),),
        _lines(r"\rho_t\,\mathbb 1[\text{not } (A\,(\pi_t - \mu_t) > 0,", r"\qquad \mathrm{KL}_B > 0.05)]"), partial(_sign_mask, low=0.05, high=0.05, divergence="binary_kl")),
    "prime-rl default": Rule(
        (_S("loss: default (dppo_mask_low = dppo_mask_high = 0.2), the policy-gradient part", _c("prime-rl", PRIME, "src/prime_rl/trainer/rl/loss.py:109-161")),
         _S('policy_loss_type="dppo", dppo_type="binary_tv" (delta 0.2)', _c("SkyRL", SKYRL, "skyrl/backends/skyrl_train/utils/ppo_utils.py:866-935"))),
        _lines(r"\rho_t\,\mathbb 1[A > 0 \Rightarrow \pi_t - \mu_t \le 0.2]", r"\cdot\,\mathbb 1[A < 0 \Rightarrow \mu_t - \pi_t \le 0.2]"), _sign_mask),
    "prime-rl ipo": Rule(
        (_S("loss: ipo (ipo_threshold 0.1)", _c("prime-rl", PRIME, "src/prime_rl/trainer/rl/loss.py:164-196")),),
        r"\rho_t\,\mathbb 1[|\pi_t - \mu_t| \le 0.1]", lambda ep, A: token_ratio(*_lp(ep)) * trust_region_mask(*_lp(ep)[:2], None, ep.mask, low=0.1, high=0.1)),
    "AReaL KPop": Rule(
        (_S("rejection_sampling: metric=binary_kl, upper=2.0 (examples/math/gsm8k_kpop.yaml:76-80)", _c("AReaL", AREAL, f"{_AREAL_RS}; 440-449")),),
        _lines(r"\rho_t\,\mathbb 1[\max(\mathrm{KL}_B(\pi_t\|\mu_t),", r"\qquad\mathrm{KL}_B(\mu_t\|\pi_t)) \le 2]"), partial(_areal, metric="binary_kl", upper=2.0)),
    "AReaL sequence ratio, mean": Rule(
        (_S("rejection_sampling: level=sequence, metric=ratio, agg=mean, upper=5.0", _c("AReaL", AREAL, "areal/utils/functional/functional.py:358-388")),),
        r"\rho^{1/|o|}\,\mathbb 1[\rho^{1/|o|} \le 5]", partial(_areal, level="sequence", upper=5.0)),
    "AReaL sequence kl_k3, mean": Rule(
        (_S("rejection_sampling: level=sequence, metric=kl_k3, agg=mean, upper=0.01", _c("AReaL", AREAL, "areal/utils/functional/functional.py:239-247, 358-388; areal/utils/data.py:1691-1694")),),
        _lines(r"\rho_t\,\mathbb 1[\tfrac{1}{|o|}\sum_u (\rho_u^{-1} - 1", r"\qquad + \log\rho_u) \le 0.01]"), partial(_areal, level="sequence", metric="kl_k3", upper=0.01)),
    "AReaL M2PO, one sequence per micro-batch": Rule(
        (_S("m2_threshold=0.04, rejection ratio <= 5 (examples/math/gsm8k_m2po.yaml:76-87)", _c("AReaL", AREAL, "areal/trainer/ppo/actor.py:571-573, 933-1014")),),
        r"\rho_t\,\mathbb 1[\rho_t \le 5]\,\mathbb 1[(\log\rho_t)^2 \le d_i]", _m2po_per_sequence),
    "AReaL M2PO, large micro-batch": Rule(
        (_S("the same, in the limit of a large micro-batch", _c("AReaL", AREAL, "areal/trainer/ppo/actor.py:933-1014")),),
        r"\rho_t\,\mathbb 1[\rho_t \le 5]\,\mathbb 1[(\log\rho_t)^2 \le d^*]", _m2po_large),
    "AReaL log-linear proximal, 2 steps stale": Rule(
        (_S("prox_logp_method=loglinear, eps_clip 0.4, rejection ratio <= 5 (examples/experimental/prox_approx/gsm8k_grpo_prox_approx.yaml:62-82)",
            _c("AReaL", AREAL, "areal/trainer/ppo/actor.py:768-848; areal/utils/functional/functional.py:536-571")),),
        _lines(r"\rho_t\,\mathrm{keep}_{\mathrm{PPO}}(\rho_t^{1/2}, A)", r"\cdot\,\mathbb 1[\rho_t^{1/2} \le 5]"), _loglinear),
}
r"""The correction rules beyond :data:`READINGS`: name -> :class:`Rule`, each with its trainers' settings and citations."""


@dataclass(frozen=True, repr=False)
class M2POLimit:
    r"""M2PO in the limit of a large micro-batch: the cut :math:`d^*`, the share of the tokens exactly at it that are kept, and ``keep`` ``[E, T]``.

    ``keep`` is 1 below the cut, ``tie_fraction`` at it, 0 above (and on masked
    slots); ``band`` is :math:`(e^{-\sqrt{d^*}}, e^{\sqrt{d^*}})`, the band on
    :math:`\rho_t` (:func:`derivations.corrections.m2_band`).
    """

    cut: float
    tie_fraction: float
    keep: torch.Tensor
    band: tuple[float, float]

    def __repr__(self) -> str:
        return f"M2POLimit(cut={self.cut:.6g}, tie_fraction={self.tie_fraction:.4f}, band=({self.band[0]:.4f}, {self.band[1]:.4f}))"


def m2po_limit(episodes: Episodes, threshold: float = 0.04) -> M2POLimit:
    r"""M2PO's mask in the limit of a large micro-batch of episodes drawn from the sampler: a band on the log-ratio.

    Each token of a micro-batch of :math:`B` episodes carries
    :math:`z_t^2 = (\log\rho_t)^2`.  M2PO keeps the smallest values up to the
    largest set whose mean is below :math:`\tau`.  As :math:`B \to \infty` the
    values, counted per episode, follow the measure
    :math:`\mathbb E_\mu[\sum_t \mathbb 1[z_t^2 = \cdot\,]]`, and the kept set is
    :math:`\{z_t^2 < d^*\}` plus a share ``tie_fraction`` of the tokens at :math:`d^*`,

    .. math::

        \mathtt{tie\_fraction} = \frac{\mathbb E_\mu\bigl[\sum_t (\tau - z_t^2)\,\mathbb 1[z_t^2 < d^*]\bigr]}
                                      {(d^* - \tau)\,\mathbb E_\mu\bigl[\sum_t \mathbb 1[z_t^2 = d^*]\bigr]},

    the share at which the mean reaches :math:`\tau` (which of the tied tokens
    are kept is the sort's order: in an i.i.d. batch, any).  When the mean of
    every value is below :math:`\tau`, nothing is dropped.

    Examples
    --------
    >>> from numeric.off_policy import m2po_limit, tinylm_episodes
    >>> m2po_limit(tinylm_episodes(0.3), 0.04)
    M2POLimit(cut=0.414759, tie_fraction=0.6933, band=(0.5252, 1.9041))
    """
    if not isinstance(episodes, Episodes):
        raise TypeError(f"episodes must be an Episodes (from two_turn_agent or tinylm_episodes), got {type(episodes).__name__}")
    tau = require_finite_real("threshold", threshold)
    if not tau > 0:
        raise ValueError(f"threshold must be > 0 (the bound on the mean second moment), got {tau}")
    m = episodes.mask > 0
    m2 = torch.where(m, episodes.log_prob - episodes.sampler_log_prob, torch.zeros((), dtype=F64)) ** 2
    values, index = torch.unique(m2[m], return_inverse=True)
    mass = torch.zeros_like(values).index_add_(0, index, episodes.prob[:, None].expand(m.shape)[m])
    N, S = mass.cumsum(0), (mass * values).cumsum(0)
    below = torch.nonzero(S < tau * N).flatten()   # prefixes of the ascending values whose mean is below tau
    last = int(below[-1]) if len(below) else -1
    if last == len(values) - 1:
        cut, share = float(values[-1]), 1.0
    else:
        n_below, s_below = (float(N[last]), float(S[last])) if last >= 0 else (0.0, 0.0)
        cut = float(values[last + 1])
        share = min(max((tau * n_below - s_below) / (float(mass[last + 1]) * (cut - tau)), 0.0), 1.0)
    keep = torch.where(m2 < cut, 1.0, torch.where(m2 == cut, share, 0.0)).to(F64) * m
    root = cut**0.5
    return M2POLimit(cut, share, keep, (float(torch.tensor(-root, dtype=F64).exp()), float(torch.tensor(root, dtype=F64).exp())))


def rule_moments(episodes: Episodes, rule: str, baseline: float = 0.0) -> SchemeMoments:
    r"""Exact bias :math:`\lVert\mathbb E_\mu\hat g - \nabla J\rVert` and trace variance of the rule ``rule`` of :data:`RULES`, advantage :math:`R - b`.

    Examples
    --------
    >>> from numeric.off_policy import rule_moments, tinylm_episodes
    >>> m = rule_moments(tinylm_episodes(0.3), "verl Seq-MIS")
    >>> round(m.bias, 4), round(m.variance, 3)
    (0.0468, 3.182)
    """
    if not isinstance(episodes, Episodes):
        raise TypeError(f"episodes must be an Episodes (from two_turn_agent or tinylm_episodes), got {type(episodes).__name__}")
    if not isinstance(rule, str) or rule not in RULES:
        raise ValueError(f"rule must be one of {list(RULES)}, got {rule!r}")
    A = episodes.reward - require_finite_real("baseline", baseline)
    v = RULES[rule].weight(episodes, A)
    return sampler_moments(episodes, estimator_samples(episodes, v, A))


def _text(s: str) -> str:
    return r"\text{" + s.replace("_", r"\_") + "}"


def _cited(settings: tuple[Setting, ...]) -> str:
    return "; ".join(f"{s.citation.trainer} {s.text} ({s.citation.snapshot().commit[:7]}, {s.citation.where})" for s in settings)


MISMATCHES = (0.03, 0.3)
"""The sampler mismatches of :func:`rule_table`: a numerical mismatch (engine vs trainer) and a stale policy."""


def rule_table() -> str:
    r"""Chapter 7's table of :data:`RULES`: settings with citations, the weight, and the exact bias and variance on TinyLM at :data:`MISMATCHES`.

    Computed when the book is built (a LaTeX ``array`` for the ``latex-table`` directive).

    Examples
    --------
    >>> from numeric.off_policy import rule_table
    >>> table = rule_table()
    >>> table.startswith(r"\begin{array}{llll}"), "verl Seq-MIS" in table
    (True, True)
    """
    episodes = [tinylm_episodes(z) for z in MISMATCHES]
    head = [_text("rule (trainer, setting, commit, file:lines)"), r"\text{weight } v_t"]
    head += [rf"\zeta = {z}\text{{: bias, variance}}" for z in MISMATCHES]

    def cells(moments: list[SchemeMoments]) -> list[str]:
        return [_lines(f"{s.bias:.4f}", f"{s.variance:.3f}") for s in moments]

    rows = [" & ".join(head)]
    for name, weight in (("no correction", "1"), ("token IS", r"\rho_t"), ("sequence IS", r"\rho")):   # chapter 7's schemes, for reference
        rows.append(" & ".join([_text(name + " (for reference)"), weight, *cells([scheme_moments(ep, name) for ep in episodes])]))
    for name, rule in RULES.items():
        rows.append(" & ".join([_text(f"{name}: {_cited(rule.settings)}"), rule.formula, *cells([rule_moments(ep, name) for ep in episodes])]))
    return r"\begin{array}{llll}" + r" \\ ".join(rows) + r"\end{array}"


def reading_table() -> str:
    r"""Chapter 7's first table: each scheme, the trainers' options that compute it (with commit and file:lines), its weight, when it is unbiased, and its exact bias.

    Examples
    --------
    >>> from numeric.off_policy import reading_table
    >>> "3c3be62" in reading_table() and "b178a3c" in reading_table()
    True
    """
    rows = [" & ".join([_text("scheme: trainer options (commit, file:lines)"), r"\text{weight } v_t", r"\text{unbiased when}",
                        r"\text{exact bias } \mathbb E_\mu[\hat g] - \nabla J"])]
    for r in READINGS:
        label = r.name + (": " + _cited(r.settings) if r.settings else "")
        rows.append(" & ".join([_text(label), r.weight, r.unbiased_when, r.bias]))
    return r"\begin{array}{llll}" + r" \\ ".join(rows) + r"\end{array}"
