"""The trainers' correction rules: hand transcriptions of each trainer's code agree, the derived bands hold, the sceptic's slips fail.

Each ``_trainer_*`` function below writes one trainer's rule out as its code
computes it (read at the commit of its docstring, written in our own words): on
the trainer's padded tensors (masked slots 0, as the trainers fill them), with
the trainer's multiplicative masking.  The package gets the same batch with its
masked slots poisoned (NaN, ``-inf``) and must agree to 1e-15 on every token
the mask keeps.  The batch is ragged, with an empty row.
"""

import math

import numpy as np
import pytest
import torch

import numeric.off_policy as op
import numeric.off_policy.corrections as corrections
from derivations import DerivationError
from derivations import corrections as dc

F64 = torch.float64
LENGTHS = (6, 4, 0, 2, 5)


def _batch():
    gen = torch.Generator().manual_seed(29)
    B, T = len(LENGTHS), max(LENGTHS)
    m = torch.arange(T) < torch.tensor(LENGTHS)[:, None]
    lp = torch.rand(B, T, generator=gen, dtype=F64).mul(0.9).add(0.05).log()
    lmu = torch.rand(B, T, generator=gen, dtype=F64).mul(0.9).add(0.05).log()
    A = torch.tensor([1.0, -0.7, 0.3, -1.2, 0.8], dtype=F64)
    clean = (lp * m, lmu * m)                                   # the trainers' padding: 0
    poisoned = (torch.where(m, lp, torch.nan), torch.where(m, lmu, -torch.inf))
    return clean, poisoned, m, A


CLEAN, POISONED, M, A = _batch()
MF = M.to(F64)


def _agree(package, trainer):
    """On every kept token: equal to 1e-15; on masked slots the package holds exactly 0."""
    assert bool((package[~M] == 0).all())
    assert float((package - trainer)[M].abs().max()) <= 1e-15


# -- verl 1dda039b, verl/trainer/ppo/rollout_corr_helper.py ----------------------------------------------


def _trainer_verl_weights(lp, lmu, m, level, threshold):
    """compute_rollout_correction_weights (522-625): token or product ratio from clamped log-ratios, times the mask, then TIS or IcePop."""
    lam = lp - lmu
    if level == "token":
        w = torch.exp(lam.clamp(-20, 20))
    else:
        w = torch.exp((lam * m).sum(-1, keepdim=True).clamp(-20, 20)).expand_as(lam)
    w = w * m
    if isinstance(threshold, str) and "_" in threshold:
        low, high = (float(x) for x in threshold.split("_"))
        return torch.where((w >= low) & (w <= high), w, torch.zeros_like(w))
    return w.clamp(max=float(threshold))


def _trainer_verl_rejection(lp, lmu, m, options, thresholds):
    """compute_rollout_rejection_mask (197-413): k1 = -lambda, k2, k3 from clamped log-ratios; token, sum, mean (n + 1e-8), max; AND."""
    lam = (lp - lmu).clamp(-20, 20)
    k = {"k1": -lam, "k2": 0.5 * lam**2, "k3": torch.exp(lam) - 1.0 - lam}
    mf = m.to(F64)
    combined = torch.ones_like(mf)
    for option, spec in zip(options.split(","), thresholds.split(",")):
        level, est = option.rsplit("_", 1)
        if est == "k1":
            low, high = (float(x) for x in spec.split("_")) if "_" in spec else (1 / float(spec), float(spec))
        stat = torch.where(m, k[est], 0.0) * mf
        if level == "token":
            s = k[est]
        elif level == "seq_sum":
            s = stat.sum(-1, keepdim=True)
        elif level == "seq_mean":
            s = stat.sum(-1, keepdim=True) / (mf.sum(-1, keepdim=True) + 1e-8)
        else:
            top = k[est].masked_fill(~m, -math.inf).max(-1, keepdim=True).values
            s = torch.where(top == -math.inf, torch.zeros_like(top), top)
        keep = ((s >= math.log(low)) & (s <= math.log(high))) if est == "k1" else (s <= float(spec))
        combined = combined * keep.expand_as(mf).to(F64)
    return mf * combined


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("threshold", [2.0, 1.3, "0.5_2.0", "0.7_1.1"])
def test_verl_rollout_is_weights_are_verls(level, threshold):
    _agree(op.rollout_is_weights(*POISONED, M, rollout_is=level, rollout_is_threshold=threshold), _trainer_verl_weights(*CLEAN, M, level, threshold))


@pytest.mark.parametrize(("options", "thresholds"), [
    ("token_k1", "0.5_2.0"), ("token_k1", "1.5"), ("token_k2", "0.1"), ("token_k3", "0.05"),
    ("seq_sum_k1", "0.3_3.0"), ("seq_sum_k2", "0.5"), ("seq_sum_k3", "0.4"),
    ("seq_mean_k1", "0.7_1.5"), ("seq_mean_k2", "0.1"), ("seq_mean_k3", "0.08"),
    ("seq_max_k2", "0.3"), ("seq_max_k3", "0.2"), ("token_k1,seq_max_k2", "0.5_2.0,0.4"), ("seq_mean_k3,token_k2,seq_sum_k1", "0.1,0.3,0.2_5.0"),
])
def test_verl_rollout_rejection_mask_is_verls(options, thresholds):
    package = op.rollout_rejection_mask(*POISONED, M, rollout_rs=options, rollout_rs_threshold=thresholds)
    trainer = _trainer_verl_rejection(*CLEAN, M, options, thresholds)
    _agree(package, trainer)
    assert 0 < float(package.sum()) < float(MF.sum()) or options in ("seq_sum_k2",)   # the batch exercises both outcomes


def test_verl_k1_sign_is_minus_log_rho_so_its_band_bounds_one_over_rho():
    """verl keeps log(l) <= -log rho <= log(u): the ratio band [1/u, 1/l]. With +log rho (AReaL's sign) another set is kept."""
    keep = op.rollout_rejection_mask(*POISONED, M, rollout_rs="token_k1", rollout_rs_threshold="0.6_1.2")
    rho = op.token_ratio(*POISONED, M)
    assert torch.equal(keep.bool(), M & (rho >= 1 / 1.2) & (rho <= 1 / 0.6))
    assert not torch.equal(keep.bool(), M & (rho >= 0.6) & (rho <= 1.2))
    areal = op.rejection_sampling_weight(*POISONED, M, metric="kl_k1", lower=math.log(0.6), upper=math.log(1.2)) > 0
    assert torch.equal(areal, M & (rho >= 0.6) & (rho <= 1.2))


def test_verl_seq_max_k2_is_skyrls_outlier_mask_with_a_log_symmetric_band():
    delta = 0.3
    verl = op.rollout_rejection_mask(*POISONED, M, rollout_rs="seq_max_k2", rollout_rs_threshold=delta)
    edge = math.sqrt(2 * delta)
    skyrl = op.outlier_sequence_mask(*POISONED, M, low=math.exp(-edge), high=math.exp(edge))
    assert torch.equal(verl, skyrl) and 0 < float(verl.sum()) < float(MF.sum())
    mean = op.rollout_rejection_mask(*POISONED, M, rollout_rs="seq_mean_k2", rollout_rs_threshold=delta)
    assert not torch.equal(verl, mean)   # max is not mean


def test_verl_options_are_refused_by_name():
    args = (*POISONED, M)
    with pytest.raises(ValueError, match="rollout_rs must list options"):
        op.rollout_rejection_mask(*args, rollout_rs="seq_max_k1", rollout_rs_threshold="0.5_2.0")
    with pytest.raises(ValueError, match="rollout_rs must name at least one option"):
        op.rollout_rejection_mask(*args, rollout_rs=" , ", rollout_rs_threshold=0.1)
    with pytest.raises(ValueError, match="rollout_rs_threshold must give one threshold"):
        op.rollout_rejection_mask(*args, rollout_rs="token_k2,seq_sum_k3", rollout_rs_threshold="0.1,0.2,0.3")
    with pytest.raises(ValueError, match="takes a single upper bound"):
        op.rollout_rejection_mask(*args, rollout_rs="token_k2", rollout_rs_threshold="0.1_0.2")
    with pytest.raises(ValueError, match="lower <= upper"):
        op.rollout_rejection_mask(*args, rollout_rs="token_k1", rollout_rs_threshold=0.5)    # l = 1/u = 2 > u
    with pytest.raises(ValueError, match="rollout_is_threshold must hold finite positive numbers"):
        op.rollout_is_weights(*args, rollout_is_threshold="0_2")
    with pytest.raises(TypeError, match="rollout_is_threshold must be a number or a str"):
        op.rollout_is_weights(*args, rollout_is_threshold=True)
    with pytest.raises(ValueError, match="rollout_is must be 'token' or 'sequence'"):
        op.rollout_is_weights(*args, rollout_is="geometric")


# -- OpenRLHF 3c3be62, openrlhf/models/loss.py:196-218 -----------------------------------------------------


def _trainer_openrlhf(lp, lmu, m, kind, low, high):
    """The vLLM IS factor of PolicyLoss: icepop, seq-mask-tis (masked_mean with no zero guard) or tis, times the mask by the loss."""
    ratio = torch.exp(lp - lmu)
    if kind == "icepop":
        w = ratio * ((ratio >= low) & (ratio <= high))
    elif kind == "seq-mask-tis":
        mf = m.to(F64)
        g = torch.exp(((lp - lmu) * mf).sum(-1) / mf.sum(-1))       # 0/0 = NaN on the empty row: NaN >= low is False
        w = ((g >= low) & (g <= high)).unsqueeze(-1) * ratio
    else:
        w = ratio.clamp(min=low, max=high)
    return w * m


@pytest.mark.parametrize("kind", ["icepop", "seq-mask-tis", "tis"])
def test_openrlhf_corrections(kind):
    package = {"icepop": lambda: op.masked_token_ratio(*POISONED, M, 0.5, 2.0),
               "seq-mask-tis": lambda: op.token_ratio(*POISONED, M) * op.geometric_sequence_mask(*POISONED, M, 0.8, 1.25),
               "tis": lambda: op.truncated_token_ratio(*POISONED, M, cap=2.0, floor=0.5)}[kind]()
    low, high = (0.8, 1.25) if kind == "seq-mask-tis" else (0.5, 2.0)
    _agree(package, _trainer_openrlhf(*CLEAN, M, kind, low, high))


def test_openrlhf_seq_mask_tis_is_the_geometric_mean_not_the_product():
    geometric = op.geometric_sequence_mask(*POISONED, M, 0.8, 1.25)
    product = (op.masked_sequence_ratio(*POISONED, M, 0.8, 1.25) > 0).to(F64)
    assert not torch.equal(geometric, product)


def test_openrlhf_multiplicative_masking_leaks_nan_where_the_package_does_not():
    """OpenRLHF's icepop: exp(...) * mask with an overflowed ratio is inf * False = NaN (bug 11 of the reading)."""
    lp, lmu = CLEAN[0].clone(), CLEAN[1].clone()
    lp[0, 0], lmu[0, 0] = 0.0, -800.0                    # a kept token whose ratio overflows float64
    trainer = _trainer_openrlhf(lp, lmu, M, "icepop", 0.5, 2.0)
    assert bool(trainer[0, 0].isnan())
    assert float(op.masked_token_ratio(lp, lmu, M, 0.5, 2.0)[0, 0]) == 0.0


# -- TRL f2cd577, trl/trainer/grpo_trainer.py:2578-2623 and 2920-2939 --------------------------------------------


def _trainer_trl_is(lp, lmu, m, mode, clip_min, clip_max):
    d = (lp - lmu) * m
    ratio = torch.exp(d.sum(-1, keepdim=True) if mode.startswith("sequence") else d)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max).expand_as(d)
    bad = (ratio < (clip_min if clip_min is not None else -math.inf)) | (ratio > (clip_max if clip_max is not None else math.inf))
    return ratio.masked_fill(bad, 0.0).expand_as(d)


def _trainer_trl_opsm(lp, lmu, A, m, delta):
    kl = lmu - lp
    avg = (kl * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp(min=1.0)
    return ((A[:, None] >= 0) | (avg <= delta)).to(F64)


@pytest.mark.parametrize(("mode", "clip_min", "clip_max", "package"), [
    ("sequence_mask", None, 3.0, lambda: op.masked_sequence_ratio(*POISONED, M, 0.0, 3.0)),
    ("token_mask", 0.5, 2.0, lambda: op.masked_token_ratio(*POISONED, M, 0.5, 2.0)),
    ("token_truncate", 0.5, 2.0, lambda: op.truncated_token_ratio(*POISONED, M, cap=2.0, floor=0.5)),
    ("sequence_truncate", None, 3.0, lambda: op.truncated_sequence_ratio(*POISONED, M, cap=3.0)),
])
def test_trl_vllm_importance_sampling(mode, clip_min, clip_max, package):
    _agree(package(), _trainer_trl_is(*CLEAN, M, mode, clip_min, clip_max) * MF)


@pytest.mark.parametrize("delta", [0.05, 0.3])
def test_trl_opsm(delta):
    package = op.off_policy_sequence_mask(*POISONED, A, M, delta=delta)
    _agree(package, _trainer_trl_opsm(*CLEAN, A, M, delta) * MF)
    drift = ((CLEAN[1] - CLEAN[0]) * MF).sum(1) / MF.sum(1).clamp(min=1)
    rows = M.any(1)
    assert torch.equal((package.amax(1) == 0)[rows], ((A < 0) & (drift > delta))[rows])   # only negative advantages that drifted


def test_opsm_keeps_a_zero_advantage():
    lp, lmu = np.log([[0.1, 0.1]]), np.log([[0.9, 0.9]])
    assert op.off_policy_sequence_mask(lp, lmu, np.array([0.0]), np.ones((1, 2)), delta=0.0).tolist() == [[1.0, 1.0]]
    assert op.off_policy_sequence_mask(lp, lmu, np.array([-1e-300]), np.ones((1, 2)), delta=0.0).tolist() == [[0.0, 0.0]]


# -- SkyRL a956457 --------------------------------------------------------------------------------------------------


def _trainer_skyrl(lp, lmu, loss_mask, cfg):
    """compute_off_policy_correction (off_policy_correction_utils.py:257-348), in float64 (SkyRL forms its ratios in float32)."""
    lam = lp - lmu
    ratio = torch.exp(lam.clamp(-20, 20))
    loss_mask = loss_mask.to(F64)
    over = (ratio > cfg["outlier_high"]) & (loss_mask > 0)
    under = (ratio < cfg["outlier_low"]) & (loss_mask > 0)
    loss_mask = loss_mask * (~over & ~under | (loss_mask == 0)).all(-1, keepdim=True).to(F64)
    in_bounds = (ratio >= cfg["token_low"]) & (ratio <= cfg["token_high"])
    loss_mask = loss_mask * (in_bounds | (loss_mask == 0)).to(F64)
    tis = ratio.clamp(max=2.0)
    n = loss_mask.sum(-1, keepdim=True).clamp(min=1.0)
    geo = torch.exp(((lam * loss_mask).sum(-1, keepdim=True) / n).clamp(-20, 20))
    loss_mask = loss_mask * (~(geo > cfg["geo_high"]) & ~(geo < cfg["geo_low"])).to(F64)
    return tis * loss_mask


def _skyrl_by_the_package(lp, lmu, m, cfg):
    m1 = m & (op.outlier_sequence_mask(lp, lmu, m, low=cfg["outlier_low"], high=cfg["outlier_high"]) > 0)
    m2 = m1 & (op.masked_token_ratio(lp, lmu, m1, cfg["token_low"], cfg["token_high"]) > 0)
    m3 = m2 & (op.geometric_sequence_mask(lp, lmu, m2, cfg["geo_low"], cfg["geo_high"]) > 0)   # judged on the tokens m2 left
    return op.truncated_token_ratio(lp, lmu, m3, cap=2.0)


def test_skyrl_chained_correction():
    cfg = dict(outlier_low=0.05, outlier_high=20.0, token_low=0.3, token_high=3.0, geo_low=0.7, geo_high=1.4)
    package = _skyrl_by_the_package(*POISONED, M, cfg)
    _agree(package, _trainer_skyrl(*CLEAN, M, cfg))
    assert 0 < int((package[M] > 0).sum()) < int(M.sum())


def test_skyrl_judges_its_sequence_mask_on_the_tokens_the_token_mask_left():
    """Ratios 4, 1, 1: the token mask [0.3, 3] drops the 4; the geometric mean of the rest is 1, kept (over all three: 1.59, dropped)."""
    cfg = dict(outlier_low=0.05, outlier_high=20.0, token_low=0.3, token_high=3.0, geo_low=0.7, geo_high=1.4)
    lp, lmu, m = torch.log(torch.tensor([[0.8, 0.5, 0.5]], dtype=F64)), torch.log(torch.tensor([[0.2, 0.5, 0.5]], dtype=F64)), torch.ones(1, 3, dtype=torch.bool)
    assert _trainer_skyrl(lp, lmu, m, cfg).tolist() == [[0.0, 1.0, 1.0]] == _skyrl_by_the_package(lp, lmu, m, cfg).tolist()
    assert op.geometric_sequence_mask(lp, lmu, m, 0.7, 1.4).tolist() == [[0.0, 0.0, 0.0]]


def test_skyrl_rollout_is_is_a_strict_band_and_dppo_is_the_trust_region_mask():
    """rollout_is_policy_loss (ppo_utils.py:824-863): rho where 0.8 < rho < 1.2; dppo (866-935): the mask's gradient weight."""
    rho = torch.exp(CLEAN[0] - CLEAN[1])
    trainer = torch.where((rho > 0.8) & (rho < 1.2), rho, torch.zeros_like(rho)) * MF
    _agree(corrections._skyrl_rollout_is(_Episodes(), A), trainer)
    for kind, low, high in (("binary_tv", 0.2, 0.2), ("binary_kl", 0.05, 0.05)):
        lp, mu_lp = CLEAN
        p, q = lp.exp(), mu_lp.exp()
        keep = torch.ones_like(p)
        Ab = A[:, None].expand_as(p)
        if kind == "binary_tv":
            keep[(Ab > 0) & (p - q > high)] = 0.0
            keep[(Ab < 0) & (-(p - q) > low)] = 0.0
        else:
            kl = q * (mu_lp - lp) + (1 - q) * torch.log((1 - q + 1e-8) / (1 - p + 1e-8))
            keep[(Ab > 0) & (p - q > 0) & (kl > high)] = 0.0
            keep[(Ab < 0) & (p - q < 0) & (kl > low)] = 0.0
        divergence = "tv" if kind == "binary_tv" else "binary_kl"
        _agree(op.trust_region_mask(*POISONED, A, M, low=low, high=high, divergence=divergence), keep * MF)


class _Episodes(op.Episodes):
    """The test batch as an Episodes, for the rules' private weights (only the log-probs and the mask are read)."""

    def __init__(self):
        object.__setattr__(self, "log_prob", POISONED[0])
        object.__setattr__(self, "sampler_log_prob", POISONED[1])
        object.__setattr__(self, "mask", M)


# -- prime-rl 559b447, src/prime_rl/trainer/rl/loss.py:109-196 -------------------------------------------------------


def _trainer_prime(lp, lmu, adv, m, loss, delta_low=0.2, delta_high=0.2, ipo=0.1, kl_tau=1e-3):
    """The per-token loss of default_loss_fn or ipo_loss_fn, summed; returns its gradient in the trainer's log-probs."""
    lp = lp.clone().requires_grad_(True)
    log_r = lp - lmu
    r = torch.exp(log_r)
    diff = torch.exp(lp) - torch.exp(lmu)
    Ab = adv[:, None].expand_as(lp)
    if loss == "default":
        masked = torch.where(Ab > 0, diff > delta_high, diff < -delta_low)
    else:
        masked = diff.abs() > ipo
    keep = m & ~masked
    per_token = -(keep * Ab * r) + kl_tau * (m * log_r**2)
    return torch.autograd.grad(per_token.sum(), lp)[0]


@pytest.mark.parametrize("loss", ["default", "ipo"])
def test_prime_rl_masks_give_token_is_times_the_mask(loss):
    grad = _trainer_prime(*CLEAN, A, M, loss)
    log_r = (CLEAN[0] - CLEAN[1]) * MF
    pg = -(grad - 2e-3 * log_r)                                    # the policy-gradient part: A times the weight
    keep = op.trust_region_mask(*POISONED, A if loss == "default" else None, M, low=0.1 if loss == "ipo" else 0.2, high=0.1 if loss == "ipo" else 0.2)
    weight = op.token_ratio(*POISONED, M) * keep
    _agree(weight * A[:, None], pg)


def test_trust_region_mask_is_the_derived_ratio_band():
    """p - q > delta iff rho > 1 + delta/q (derivations.corrections.probability_band); by the sign of A."""
    rho, q = op.token_ratio(*POISONED, M), torch.where(M, POISONED[1], 0.0).exp()
    keep = op.trust_region_mask(*POISONED, A, M, low=0.1, high=0.15) > 0
    Ab = A[:, None].expand_as(rho)
    band = M & ~(((Ab > 0) & (rho > 1 + 0.15 / q)) | ((Ab < 0) & (rho < 1 - 0.1 / q)))
    assert torch.equal(keep, band) and bool((~keep & M).any())


# -- verl bypass mode: PPO-clip with old := rollout, at the current parameters ---------------------------------------


def _trainer_verl_vanilla_weight(lp, old, adv, m, eps=0.2, c=3.0):
    """compute_policy_loss_vanilla (core_algos.py:1255-1279, dual clip always on): minus the gradient in log_prob over A."""
    lp = lp.clone().requires_grad_(True)
    ratio = torch.exp(lp - old)
    Ab = adv[:, None].expand_as(ratio)
    l1, l2 = -Ab * ratio, -Ab * torch.clamp(ratio, 1 - eps, 1 + eps)
    clipped = torch.maximum(l1, l2)
    dual = torch.min(-Ab * c, clipped)
    loss = torch.where(Ab < 0, dual, clipped) * m
    return -torch.autograd.grad(loss.sum(), lp)[0] / Ab


def test_verl_bypass_ppo_clip_is_token_is_with_a_sign_aware_mask():
    trainer = _trainer_verl_vanilla_weight(*CLEAN, A, M)
    package = corrections._ppo_clip_weight(op.token_ratio(*POISONED, M), A, 0.2, 0.2, 3.0)
    _agree(package, trainer * MF)
    assert bool((package[M] == 0).any()) and bool((package[M] > 0).any())


def test_the_rules_ppo_weight_is_the_registrys_derived_weight():
    """The private PPO-clip weight of the rules equals numeric.policy_weight('ppo', ...) on TinyLM (no ratio sits on a kink)."""
    from numeric import policy_weight

    ep = op.tinylm_episodes(0.3)
    derived = policy_weight("ppo", ep.log_prob, ep.sampler_log_prob, ep.reward, ep.mask, eps_low=0.2, eps_high=0.2, dual_clip=3.0)
    mine = corrections._ppo_clip_weight(op.token_ratio(ep.log_prob, ep.sampler_log_prob, ep.mask), ep.reward, 0.2, 0.2, 3.0)
    assert float((derived - mine).abs().max()) <= 1e-15 and bool((mine[ep.mask > 0] == 0).any())


# -- AReaL cbff54d ---------------------------------------------------------------------------------------------------


def _trainer_areal_rejection(prox, beh, mask, level, action, metric, agg, upper, lower):
    """apply_rejection_sampling, the 2-D padded path (functional.py:229-431), in float64 (AReaL upcasts to float32)."""
    x = prox - beh
    x = torch.where(torch.isfinite(x), x, 0.0)
    if metric == "ratio":
        stat = torch.exp(x)
    elif metric == "kl_k1":
        stat = x
    elif metric == "kl_k2":
        stat = x**2 / 2.0
    elif metric == "kl_k3":
        stat = (-x).exp() - 1 - (-x)
    else:
        def bern(a, b):
            p, q = a.exp().clamp(1e-8, 1 - 1e-8), b.exp().clamp(1e-8, 1 - 1e-8)
            return p * torch.log(p / q) + (1 - p) * torch.log((1 - p) / (1 - q))
        stat = torch.maximum(bern(prox, beh), bern(beh, prox))

    def bounds(s):
        return (s >= lower) & (s <= upper) if lower is not None else s <= upper

    lower_c = lower if lower is not None else 0.0
    weight = torch.exp(x)
    if level == "sequence":
        values = x if metric == "ratio" else stat
        masked = torch.where(mask, values, 0.0)
        count = mask.sum(-1, keepdim=True).clamp(min=1)
        if metric == "ratio":
            weight = torch.exp(masked.sum(-1, keepdim=True) / count).expand_as(x)
        if agg == "sum":
            seq = masked.sum(-1, keepdim=True)
        elif agg == "mean":
            seq = masked.sum(-1, keepdim=True) / count
        else:
            seq = values.masked_fill(~mask, -math.inf).max(-1, keepdim=True)[0]
            seq = torch.where(mask.sum(-1, keepdim=True) == 0, torch.zeros_like(seq), seq)
        seq = torch.exp(seq) if metric == "ratio" else seq
        if action == "mask":
            keep = bounds(seq).expand_as(mask)
        else:
            weight = torch.where((~bounds(seq)).expand_as(mask), weight.clamp(min=lower_c, max=upper), weight)
    elif action == "mask":
        keep = bounds(stat)
    else:
        weight = weight.clamp(min=lower_c, max=upper)
    updated = mask & keep if action == "mask" else mask
    return torch.where(updated, weight, 0.0)


AREAL_CASES = [
    ("token", "mask", "ratio", "mean", 2.0, 0.5), ("token", "clamp", "ratio", "mean", 1.5, None), ("token", "clamp", "ratio", "mean", 1.5, 0.7),
    ("token", "mask", "kl_k1", "mean", 0.3, -0.2), ("token", "mask", "kl_k2", "mean", 0.1, None), ("token", "mask", "kl_k3", "mean", 0.1, None),
    ("token", "mask", "binary_kl", "mean", 0.05, None),
    ("sequence", "mask", "ratio", "mean", 1.1, 0.7), ("sequence", "mask", "ratio", "sum", 3.0, 0.3), ("sequence", "mask", "ratio", "max", 2.5, None),
    ("sequence", "clamp", "ratio", "mean", 1.1, None), ("sequence", "clamp", "ratio", "mean", 1.1, 0.75), ("sequence", "clamp", "ratio", "max", 2.0, 0.9),
    ("sequence", "mask", "kl_k1", "sum", 0.6, -1.2), ("sequence", "mask", "kl_k2", "max", 0.3, None), ("sequence", "mask", "kl_k3", "mean", 0.1, None),
    ("sequence", "mask", "binary_kl", "sum", 0.2, None),
]


@pytest.mark.parametrize(("level", "action", "metric", "agg", "upper", "lower"), AREAL_CASES)
def test_areal_rejection_sampling(level, action, metric, agg, upper, lower):
    package = op.rejection_sampling_weight(*POISONED, M, level=level, action=action, metric=metric, agg=agg, upper=upper, lower=lower)
    _agree(package, _trainer_areal_rejection(*CLEAN, M, level, action, metric, agg, upper, lower))
    if action == "mask":   # the case drops some tokens and keeps others
        assert 0 < int((package[M] > 0).sum()) < int(M.sum())
    else:                  # the clamp moves some weights
        free = op.rejection_sampling_weight(*POISONED, M, level=level, metric=metric, agg=agg, upper=1e9)
        assert bool((package[M] != free[M]).any())


def test_areal_kl_k3_is_the_other_directions_k3_and_kl_k1_the_other_sign():
    """At rho = 2: AReaL's kl_k3 = 1/2 - 1 + log 2, verl's k3 = 2 - 1 - log 2; AReaL's kl_k1 = +log 2, verl's -log 2."""
    lp, lmu, m = np.log([[0.8]]), np.log([[0.4]]), np.ones((1, 1))
    kept = {u: op.rejection_sampling_weight(lp, lmu, m, metric="kl_k3", upper=u)[0, 0] for u in (0.1931, 0.1932)}
    assert (kept[0.1931], kept[0.1932]) == (0.0, 2.0)                        # 0.19315 = 1/2 - 1 + log 2
    verl = {u: op.rollout_rejection_mask(lp, lmu, m, rollout_rs="token_k3", rollout_rs_threshold=u)[0, 0] for u in (0.3068, 0.3069)}
    assert (verl[0.3068], verl[0.3069]) == (0.0, 1.0)                        # 0.30685 = 2 - 1 - log 2
    assert op.rejection_sampling_weight(lp, lmu, m, metric="kl_k1", upper=0.7)[0, 0] == 2.0          # +0.693 <= 0.7
    assert op.rejection_sampling_weight(lp, lmu, m, metric="kl_k1", upper=0.69, lower=-1.0)[0, 0] == 0.0


def test_areal_sequence_aggregation_max_is_not_mean_and_the_weight_is_the_geometric_mean():
    by_mean = op.rejection_sampling_weight(*POISONED, M, level="sequence", agg="mean", upper=1.3)
    by_max = op.rejection_sampling_weight(*POISONED, M, level="sequence", agg="max", upper=1.3)
    assert not torch.equal(by_mean > 0, by_max > 0)
    geo = torch.exp((torch.where(M, POISONED[0] - POISONED[1], 0.0)).sum(1) / MF.sum(1).clamp(min=1))
    kept = by_mean.amax(1) > 0
    assert torch.allclose(by_mean.amax(1)[kept], geo[kept], rtol=0, atol=1e-15)


def _trainer_areal_m2po(beh, prox, mask, threshold):
    """_apply_m2po_masking and _get_m2po_loss_mask (actor.py:933-1014)."""
    m2 = (beh - prox) ** 2
    flat = mask.reshape(-1)
    selected = m2.reshape(-1)[flat]
    ranked, order = torch.sort(selected, descending=True)
    n = ranked.numel()
    means = ranked.flip(0).cumsum(0).flip(0) / torch.arange(n, 0, -1, dtype=ranked.dtype)
    below = torch.where(means < threshold)[0]
    drop = below[0].item() if len(below) else n - 1
    keep_sorted = torch.ones(n, dtype=torch.bool)
    keep_sorted[:drop] = False
    full = torch.zeros_like(flat)
    full[flat] = keep_sorted[torch.argsort(order)]
    return full.view_as(mask)


@pytest.mark.parametrize("threshold", [0.02, 0.1, 0.4, 1e-9, 50.0])
def test_areal_m2po(threshold):
    package = op.m2po_mask(*POISONED, M, threshold=threshold)
    trainer = _trainer_areal_m2po(CLEAN[1], CLEAN[0], M, threshold).to(F64)
    _agree(package, trainer)
    assert float(package.sum()) >= 1


def test_m2po_drops_the_largest_values_first_until_the_mean_is_strictly_below():
    lp = np.log(np.full((1, 4), 0.5))
    x = np.array([0.1, 0.2, 0.3, 0.4])                      # m2 = 0.01, 0.04, 0.09, 0.16: means of the smallest k 0.01, 0.025, 0.0467, 0.075
    lmu = lp + x[None]
    m = np.ones((1, 4))
    assert op.m2po_mask(lp, lmu, m, threshold=0.025).tolist() == [[1.0, 0.0, 0.0, 0.0]]          # 0.025 is not < 0.025
    assert op.m2po_mask(lp, lmu, m, threshold=0.0251).tolist() == [[1.0, 1.0, 0.0, 0.0]]
    assert op.m2po_mask(lp, lmu, m, threshold=0.005).tolist() == [[1.0, 0.0, 0.0, 0.0]]          # none below: keep the smallest


def test_m2po_large_batch_limit_against_a_sampled_batch():
    """One batch of 20000 episodes drawn from mu (seed 0): its cut is the limit's, and the kept share at the cut is within z < 4.5."""
    ep = op.tinylm_episodes(0.3)
    lim = op.m2po_limit(ep, 0.04)
    idx = torch.multinomial(ep.prob, 20000, replacement=True, generator=torch.Generator().manual_seed(0))
    lp, lmu, m = ep.log_prob[idx], ep.sampler_log_prob[idx], ep.mask[idx] > 0
    keep = op.m2po_mask(lp, lmu, m, threshold=0.04) > 0
    m2 = ((lp - lmu) * m) ** 2
    at_cut = m & (m2 == lim.cut)
    assert bool((keep[m & (m2 < lim.cut)]).all()) and not bool(keep[m & (m2 > lim.cut)].any())
    n = int(at_cut.sum())
    share = float(keep[at_cut].sum()) / n
    assert 0 < lim.tie_fraction < 1 and abs(share - lim.tie_fraction) < 4.5 * math.sqrt(lim.tie_fraction * (1 - lim.tie_fraction) / n)


def _trainer_areal_loglinear(beh, cur, versions, current):
    """compute_prox_logp_approximations, method loglinear (actor.py:793-831)."""
    v_b = versions.to(F64)
    diff, gap = current - v_b, (current - 1) - v_b
    alpha = torch.where((diff > 0) & (versions >= 0), gap / diff, torch.zeros_like(v_b)).clamp(0.0, 1.0)
    return beh + alpha * (cur - beh)


def test_areal_loglinear_proximal_log_prob():
    versions = torch.tensor([[7, 8, 9, 10, 11, -1], [3] * 6, [9] * 6, [0, 5, 9, 9, 9, 9], [6] * 6])
    package = op.loglinear_proximal_log_prob(*POISONED, versions, M, current_version=10)
    _agree(package, _trainer_areal_loglinear(CLEAN[1], CLEAN[0], versions, 10) * MF)


def test_loglinear_split_the_ppo_ratio_and_the_behaviour_weight_multiply_to_token_is():
    versions = torch.full(M.shape, 6)                                   # 4 steps stale: alpha = 3/4
    prox = op.loglinear_proximal_log_prob(*POISONED, versions, M, current_version=10)
    r, rho_t = op.token_ratio(POISONED[0], prox, M), op.token_ratio(prox, POISONED[1], M)
    rho = op.token_ratio(*POISONED, M)
    assert float((r * rho_t - rho).abs().max()) < 1e-15
    assert float((r - rho ** 0.25).abs().max()) < 1e-15 and float((rho_t - rho ** 0.75).abs().max()) < 1e-15


# -- the exact models: every rule's bias and variance ---------------------------------------------------------------


def test_every_rule_carries_a_citation_of_a_read_commit():
    for name, rule in op.RULES.items():
        assert rule.settings, name
        for s in rule.settings:
            assert s.citation.snapshot().commit.startswith(s.citation.commit) and ":" in s.citation.where, name
    cited = {s.citation.trainer for r in op.RULES.values() for s in r.settings}
    assert cited == {"verl", "OpenRLHF", "TRL", "SkyRL", "AReaL", "prime-rl"}
    assert all(r.settings or r.name in ("no correction", "sequence IS", "token IS") for r in op.READINGS)
    assert {r.name for r in op.READINGS} <= set(op.SCHEMES)


@pytest.fixture(scope="module")
def stale():
    return op.tinylm_episodes(0.3)


def test_rule_moments_are_the_enumerated_mean_and_variance(stale):
    """rule_moments against a direct sum over the 121 responses, for a rule that reads the advantage's sign."""
    A_ep = stale.reward - 0.4
    v = corrections._bypass_ppo_clip(stale, A_ep)
    g = torch.einsum("et,etp->ep", v * A_ep[:, None], stale.scores)
    mean = stale.prob @ g
    var = float(stale.prob @ (g * g).sum(1)) - float(mean @ mean)
    got = op.rule_moments(stale, "verl bypass PPO-clip", baseline=0.4)
    assert abs(got.bias - float((mean - stale.grad_J).norm())) < 1e-15 and abs(got.variance - var) < 1e-12


def test_bypass_reinforce_is_decoupled_sequence_tis_and_bypass_ppo_clip_is_more_biased_than_token_is(stale):
    assert op.rule_moments(stale, "verl bypass REINFORCE, sequence TIS").bias == op.scheme_moments(stale, "sequence TIS").bias
    token = op.scheme_moments(stale, "token IS").bias
    assert op.rule_moments(stale, "verl bypass PPO-clip").bias > token + 0.05


def test_the_sign_aware_mask_removes_exactly_the_dropped_tokens_whole_weight(stale):
    """derivations.corrections.sign_aware_mask in expectation: bypass PPO-clip minus token IS == -E[sum rho 1[dropped] A s]."""
    rho = op.token_ratio(stale.log_prob, stale.sampler_log_prob, stale.mask)
    v = corrections._bypass_ppo_clip(stale, stale.reward)
    dropped = rho * (v == 0) * stale.mask
    diff = stale.prob @ (op.estimator_samples(stale, v) - op.estimator_samples(stale, rho))
    assert float((diff + stale.prob @ op.estimator_samples(stale, dropped)).abs().max()) < 1e-15
    assert float(diff.norm()) > 1e-2


def test_m2po_two_readings_differ_and_the_limit_is_an_icepop_band(stale):
    one, large = (op.rule_moments(stale, n).bias for n in ("AReaL M2PO, one sequence per micro-batch", "AReaL M2PO, large micro-batch"))
    assert abs(one - large) > 1e-2
    lim = op.m2po_limit(stale, 0.04)
    rho = op.token_ratio(stale.log_prob, stale.sampler_log_prob, stale.mask)
    kept = lim.keep > 0
    assert bool(((rho[kept] >= lim.band[0] * (1 - 1e-12)) & (rho[kept] <= lim.band[1] * (1 + 1e-12))).all())
    everything = op.m2po_limit(stale, 1e3)
    assert everything.tie_fraction == 1.0 and torch.equal(everything.keep, stale.mask)


def _top_level_rows(array: str) -> list[list[str]]:
    """The rows and cells of a LaTeX array, split outside nested environments (as the chapter's latex-table directive splits them)."""
    body = array[array.index("}", len(r"\begin{array}")) + 1 : -len(r"\end{array}")]
    rows, cells, depth, start, i = [], [], 0, 0, 0
    while i < len(body):
        if body.startswith(r"\begin{", i) or body.startswith(r"\end{", i):
            depth += 1 if body[i + 1] == "b" else -1
        elif depth == 0 and body.startswith("\\\\", i):
            rows.append([*cells, body[start:i].strip()])
            cells, start, i = [], i + 2, i + 2
            continue
        elif depth == 0 and body[i] == "&" and body[i - 1] != "\\":
            cells.append(body[start:i].strip())
            start = i + 1
        i += 1
    return [*rows, [*cells, body[start:].strip()]]


def test_rule_tables_render_one_row_per_rule():
    rows = _top_level_rows(op.rule_table())
    assert len(rows) == 4 + len(op.RULES) and {len(r) for r in rows} == {4}
    assert [r[0][len(r"\text{"):].split(":")[0].replace(r"\_", "_") for r in rows[4:]] == list(op.RULES)
    readings = _top_level_rows(op.reading_table())
    assert len(readings) == 1 + len(op.READINGS) and {len(r) for r in readings} == {4}


def test_models_refuse_bad_input(stale):
    with pytest.raises(ValueError, match="rule must be one of"):
        op.rule_moments(stale, "verl Seq-MIS!")
    with pytest.raises(TypeError, match="episodes must be an Episodes"):
        op.rule_moments("stale", "verl Seq-MIS")
    with pytest.raises(ValueError, match="baseline must not be NaN"):
        op.rule_moments(stale, "verl Seq-MIS", math.nan)
    with pytest.raises(ValueError, match="threshold must be > 0"):
        op.m2po_limit(stale, 0.0)
    with pytest.raises(TypeError, match="episodes must be an Episodes"):
        op.m2po_limit(None)


# -- the caller's kind, dtype and device; masked slots ------------------------------------------------------------------

CALLS = {
    "rollout_is_weights": lambda lp, lmu, a, m: op.rollout_is_weights(lp, lmu, m, rollout_is="sequence", rollout_is_threshold="0.5_2.0"),
    "rollout_rejection_mask": lambda lp, lmu, a, m: op.rollout_rejection_mask(lp, lmu, m, rollout_rs="token_k1,seq_max_k3", rollout_rs_threshold="0.5_2.0,0.3"),
    "rejection_sampling_weight": lambda lp, lmu, a, m: op.rejection_sampling_weight(lp, lmu, m, level="sequence", agg="max", upper=2.0),
    "m2po_mask": lambda lp, lmu, a, m: op.m2po_mask(lp, lmu, m, threshold=0.05),
    "loglinear_proximal_log_prob": lambda lp, lmu, a, m: op.loglinear_proximal_log_prob(lp, lmu, np.full(lp.shape, 8), m, current_version=10),
    "trust_region_mask": lambda lp, lmu, a, m: op.trust_region_mask(lp, lmu, a, m, divergence="binary_kl", low=0.01, high=0.02),
    "off_policy_sequence_mask": lambda lp, lmu, a, m: op.off_policy_sequence_mask(lp, lmu, a, m, delta=0.1),
    "outlier_sequence_mask": lambda lp, lmu, a, m: op.outlier_sequence_mask(lp, lmu, m, low=0.5, high=1.5),
}


@pytest.mark.parametrize("name", CALLS)
def test_new_rules_keep_the_callers_kind_dtype_and_ignore_masked_slots(name):
    call = CALLS[name]
    ref = call(*POISONED, A, M)
    assert isinstance(ref, torch.Tensor) and ref.dtype == F64 and not ref.requires_grad and bool(torch.isfinite(ref).all())
    assert torch.equal(ref, call(*CLEAN, A, M))                         # masked slots: poisoned or 0, the same weights
    out_np = call(CLEAN[0].numpy(), CLEAN[1].numpy(), A.numpy(), M.numpy())
    assert isinstance(out_np, np.ndarray) and np.array_equal(out_np, ref.numpy())
    lp32 = POISONED[0].float().requires_grad_(True)
    out32 = call(lp32, POISONED[1].float(), A.float(), M)
    assert out32.dtype == torch.float32 and not out32.requires_grad
    assert float((out32.double() - ref).abs().max()) < 1e-4 or name in ("m2po_mask",)


# -- the derivations: the plausible slips fail ----------------------------------------------------------------------------


@pytest.mark.parametrize(("make", "step", "wrong"), [
    (dc.k1_bands, 0, lambda d: d.steps[0].lhs.subs(dc._x, -dc._x)),                      # the band read with AReaL's sign
    (dc.loglinear_split, 0, lambda d: dc._rho ** d.steps[1].rhs.exp),                     # r = rho^alpha: the two factors swapped
    (dc.k3_directions, 3, lambda d: d.steps[3].rhs + 2 * d.steps[1].rhs),                 # AReaL's kl_k3 read as + KL
    (dc.max_k2_band, 0, lambda d: d.steps[0].rhs.subs(2, 1)),                             # sqrt(delta) for sqrt(2 delta)
])
def test_a_slip_in_a_correction_derivation_fails(make, step, wrong):
    d = make()
    with pytest.raises(DerivationError):
        d.replaced(step, rhs=wrong(d)).verify()


# -- the edges: each rule keeps (or drops) a statistic exactly at its threshold as its trainer does -------------------------


def test_edges_are_the_trainers():
    """p - q = 0.25 exactly (exp(log 0.75) = 0.75 and exp(log 0.5) = 0.5 in fp64): kept by the strict masks of prime-rl and SkyRL."""
    lp, lmu, m = torch.log(torch.tensor([[0.75, 0.5]], dtype=F64)), torch.log(torch.tensor([[0.5, 0.75]], dtype=F64)), torch.ones(1, 2)
    assert float(lp.exp()[0, 0] - lmu.exp()[0, 0]) == 0.25
    assert op.trust_region_mask(lp, lmu, torch.tensor([1.0]), m, high=0.25).tolist() == [[1.0, 1.0]]
    assert op.trust_region_mask(lp, lmu, torch.tensor([1.0]), m, high=math.nextafter(0.25, 0)).tolist() == [[0.0, 1.0]]
    assert op.trust_region_mask(lp, lmu, torch.tensor([-1.0]), m, low=0.25).tolist() == [[1.0, 1.0]]
    assert op.trust_region_mask(lp, lmu, None, m, low=math.nextafter(0.25, 0), high=0.25).tolist() == [[1.0, 0.0]]
    # OPSM keeps a mean log(mu/pi) exactly at delta: log(0.5/0.75) + log(0.75/0.5) = 0 exactly
    assert op.off_policy_sequence_mask(lp, lmu, torch.tensor([-1.0]), m, delta=0.0).tolist() == [[1.0, 1.0]]
    assert op.off_policy_sequence_mask(lp, lmu, torch.tensor([-1.0]), m, delta=-1e-300).tolist() == [[0.0, 0.0]]
    # SkyRL's outlier band keeps a ratio exactly at low or high (ratios 1.5 and 2/3)
    rho = op.token_ratio(lp, lmu, m)
    assert op.outlier_sequence_mask(lp, lmu, m, low=float(rho[0, 1]), high=float(rho[0, 0])).tolist() == [[1.0, 1.0]]
    assert op.outlier_sequence_mask(lp, lmu, m, high=math.nextafter(float(rho[0, 0]), 0)).tolist() == [[0.0, 0.0]]
    assert op.outlier_sequence_mask(lp, lmu, m, low=math.nextafter(float(rho[0, 1]), 1)).tolist() == [[0.0, 0.0]]
    # AReaL keeps a metric exactly at upper and at lower
    assert op.rejection_sampling_weight(lp, lmu, m, upper=float(rho[0, 0]), lower=float(rho[0, 1])).tolist() == rho.tolist()
    assert op.rejection_sampling_weight(lp, lmu, m, upper=math.nextafter(float(rho[0, 0]), 0)).tolist() == [[0.0, float(rho[0, 1])]]


def test_verl_keeps_a_statistic_exactly_at_either_log_edge():
    """lambda = log 2 exactly (log 0.5 - log 0.25): k1 = -log 2 = log 0.5, verl's lower edge; the IcePop weight 2 = its upper edge."""
    lp, lmu, m = torch.log(torch.tensor([[0.5, 0.25]], dtype=F64)), torch.log(torch.tensor([[0.25, 0.5]], dtype=F64)), torch.ones(1, 2)
    assert op.rollout_rejection_mask(lp, lmu, m, rollout_rs="token_k1", rollout_rs_threshold="0.5_2.0").tolist() == [[1.0, 1.0]]
    assert op.rollout_rejection_mask(lp, lmu, m, rollout_rs="token_k1", rollout_rs_threshold=f"{math.nextafter(0.5, 1)}_2.0").tolist() == [[0.0, 1.0]]
    assert op.rollout_rejection_mask(lp, lmu, m, rollout_rs="token_k2", rollout_rs_threshold=0.5 * math.log(2) ** 2).tolist() == [[1.0, 1.0]]
    assert op.rollout_is_weights(lp, lmu, m, rollout_is_threshold="0.5_2.0").tolist() == [[2.0, 0.5]]
    assert op.rollout_is_weights(lp, lmu, m, rollout_is_threshold=f"{math.nextafter(0.5, 1)}_{math.nextafter(2.0, 0)}").tolist() == [[0.0, 0.0]]


def test_verl_clamps_the_sequence_log_ratio_after_the_sum():
    """Three tokens of log-ratio 8: verl's sequence weight is e^20 (the sum 24 clamped), not e^24; below the clamp nothing changes."""
    lp, lmu, m = torch.zeros(1, 3, dtype=F64), torch.full((1, 3), -8.0, dtype=F64), torch.ones(1, 3)
    w = op.rollout_is_weights(lp, lmu, m, rollout_is="sequence", rollout_is_threshold=1e30)
    assert torch.equal(w, torch.full((1, 3), math.exp(20.0), dtype=F64))
    assert torch.equal(op.rollout_is_weights(lp, lmu, m, rollout_is="token", rollout_is_threshold=1e30), torch.full((1, 3), math.exp(8.0), dtype=F64))


def test_verl_bypass_dual_clip_drops_a_negative_advantage_token_above_c():
    """A < 0 and ratios 4, 2, 0.5: the dual clip (c = 3) drops the 4, the clip the 0.5; the 2 keeps its ratio."""
    lp = torch.log(torch.tensor([[0.8, 0.4, 0.1]], dtype=F64))
    lmu = torch.log(torch.tensor([[0.2, 0.2, 0.2]], dtype=F64))
    m, adv = torch.ones(1, 3, dtype=torch.bool), torch.tensor([-1.0], dtype=F64)
    mine = corrections._ppo_clip_weight(op.token_ratio(lp, lmu, m), adv, 0.2, 0.2, 3.0)
    assert float((mine - torch.tensor([[0.0, 2.0, 0.0]], dtype=F64)).abs().max()) < 1e-15
    assert float((mine - _trainer_verl_vanilla_weight(lp, lmu, adv, m)).abs().max()) < 1e-15
