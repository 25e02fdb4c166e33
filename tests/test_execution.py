"""A trainer's loss as it runs: the losses trainers write, and the bugs their trackers record, cut into ranks and micro-batches.

Every loss here is written the way a trainer writes it (verl, TRL, OpenRLHF, SkyRL,
prime-rl, open-instruct, ms-swift), the buggy forms from the trackers' descriptions.
Each test names the bug it catches.  The ground truth is written out by hand: the
factor :math:`\\kappa` every token gets from the micro-batch's loss as its definition
says (``micro`` below, at r = 1, A = 1 where the per-token loss is :math:`-r`), cut as
the trainer cuts the batch (``cut_kappa``); the checker's measurements must equal it
token by token, and its verdict must be the one the formula implies.  Every case runs
on both engines, and the two reports must agree.

The gloo world (four worker processes) is started once for the module and held
(``world``); the tests of the engine's failures start worlds of their own.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import signal
import threading
import time
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

from numeric.variants import Convention, GlooWorld, check_loss_execution

pytestmark = pytest.mark.xdist_group("execution")  # one worker holds the module's gloo world

SMALL = {"world_sizes": (1, 2), "micro_batches": (1, 2), "batch": (8, 5)}
F64 = torch.float64


@pytest.fixture(scope="module")
def world():
    with GlooWorld(4, timeout=60) as held:
        yield held


# ----------------------------------------------------------------------------- the ground truth


def cut_kappa(mask, W, M, micro, reduction="mean"):
    """kappa under W ranks x M micro-batches: each micro-batch's -dL/dlog_prob from ``micro``, summed, reduced over the ranks."""
    B = mask.shape[0]
    per = B // (W * M)
    out = torch.empty_like(mask)
    for w in range(W):
        for m in range(M):
            rows = slice((w * M + m) * per, (w * M + m + 1) * per)
            out[rows] = micro(mask[rows], mask, W, M)
    return out / (W if reduction == "mean" else 1)


def assert_kappa(case, micro, reduction="mean"):
    """The measured kappa of every design, full batch and cut, equals the hand-written formula on every slot."""
    for m in case.measurements:
        full = cut_kappa(m.mask, 1, 1, micro, reduction)
        split = cut_kappa(m.mask, case.world_size, case.micro_batches, micro, reduction)
        torch.testing.assert_close(m.kappa_full, full, rtol=1e-12, atol=1e-15, equal_nan=True)
        torch.testing.assert_close(m.kappa_split, split, rtol=1e-12, atol=1e-15, equal_nan=True)


def agree(a, b):
    """Two reports of the same check: the same verdicts, names and counts, the same numbers to 1e-12."""
    assert (a.verdict, a.convention, a.batch, a.designs) == (b.verdict, b.convention, b.batch, b.designs)
    for x, y in zip(a.cases, b.cases, strict=True):
        assert (x.world_size, x.micro_batches, x.verdict, x.factor_name, x.follows) == (y.world_size, y.micro_batches, y.verdict, y.factor_name, y.follows)
        assert (x.factor is None) == (y.factor is None) and (x.factor is None or math.isclose(x.factor, y.factor, rel_tol=1e-12))
        for p, q in zip(x.measurements, y.measurements, strict=True):
            for field in ("kappa_full", "kappa_split", "values_full", "values_split"):
                torch.testing.assert_close(getattr(p, field), getattr(q, field), rtol=1e-12, atol=1e-15, equal_nan=True)


def both(world, fn, **kwargs):
    """The check on the simulated world and on the held gloo world; they must agree; the simulated report is returned."""
    simulated = check_loss_execution(fn, engine="simulate", **kwargs)
    real = check_loss_execution(fn, engine=world, **kwargs)
    assert (simulated.engine, real.engine) == ("simulate", "gloo")
    agree(simulated, real)
    return simulated


def n_valid(mask):
    return mask.sum()


def rows_with_token(mask):
    return (mask.sum(-1) > 0).to(F64).sum()


# ----------------------------------------------------------------------------- losses as the trainers write them


def _pg(old_log_prob, log_prob, advantages):
    return -torch.exp(log_prob - old_log_prob) * advantages


def verl_agg_loss(loss_mat, loss_mask, loss_agg_mode, dp_size=1, batch_num_tokens=None, global_batch_size=None):
    """verl's ``agg_loss`` as its docstring and PR 5798 describe it: global counts times dp_size, or the micro-batch's own."""
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            if dp_size > 1:
                raise ValueError("(global) batch_num_tokens is required when dp_size > 1")
            batch_num_tokens = loss_mask.sum()
        return (loss_mat * loss_mask).sum() / batch_num_tokens * dp_size
    if loss_agg_mode == "seq-mean-token-mean":
        per_seq = (loss_mat * loss_mask).sum(-1) / (loss_mask.sum(-1) + 1e-8)
    else:
        per_seq = (loss_mat * loss_mask).sum(-1)
    seq_mask = (loss_mask.sum(-1) > 0).to(loss_mat.dtype)
    if global_batch_size is None:
        global_batch_size = seq_mask.sum()
    return (per_seq * seq_mask).sum() / global_batch_size * dp_size


def verl_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", dp_size=1,
                     batch_num_tokens=None, global_batch_size=None):
    return verl_agg_loss(_pg(old_log_prob, log_prob, advantages), response_mask, loss_agg_mode, dp_size, batch_num_tokens, global_batch_size)


def verl_seq_mean_before_5798(old_log_prob, log_prob, advantages, response_mask, dp_size=1, global_batch_size=None):
    """verl PR 5798: the seq-mean denominator multiplied by dp_size where it should have been divided."""
    per_seq = (_pg(old_log_prob, log_prob, advantages) * response_mask).sum(-1) / (response_mask.sum(-1) + 1e-8)
    return per_seq.sum() / (global_batch_size * dp_size)


def verl_legacy_ga_scaling(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", dp_size=1, global_batch_size=None):
    """verl PR 906: the micro-batch's loss (its token mean, or its rows' mean of token means) scaled by its share of the
    rank's rows, as verl's actor did before: right for a sequence mean only."""
    per_token = _pg(old_log_prob, log_prob, advantages) * response_mask
    if loss_agg_mode == "token-mean":
        micro_loss = per_token.sum() / response_mask.sum()
    else:
        micro_loss = (per_token.sum(-1) / response_mask.sum(-1).clamp(min=1)).mean()
    return micro_loss * (response_mask.shape[0] / (global_batch_size / dp_size))


def verl_policy_loss_with_config(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None):
    """verl's policy losses read the global counts from ``config.global_batch_info``."""
    return verl_agg_loss(_pg(old_log_prob, log_prob, advantages), response_mask, loss_agg_mode, **config.global_batch_info), {}


def trl_grpo_loss(old_log_prob, log_prob, advantages, response_mask, loss_type="dapo", num_items_in_batch=None, num_processes=1,
                  current_gradient_accumulation_steps=1, max_completion_length=5):
    """TRL GRPOTrainer's loss types (trl/trainer/grpo_trainer.py:3124-3140): bnpo's local count is TRL issue 2995's."""
    per_token, mask = _pg(old_log_prob, log_prob, advantages), response_mask
    if loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / current_gradient_accumulation_steps
    if loss_type == "bnpo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0) / current_gradient_accumulation_steps
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (per_token.size(0) * max_completion_length) / current_gradient_accumulation_steps
    return (per_token * mask).sum() / (num_items_in_batch.clamp(min=1.0) / num_processes)


def _not_truncated(mask):
    return (mask[:, -1:] == 0).to(mask.dtype)  # a row whose last slot is a token ran out of room


def trl_dapo_truncation_6369(old_log_prob, log_prob, advantages, response_mask, num_items_in_batch=None, num_processes=1):
    """TRL issue 6369: truncated rows left out of the numerator, still counted in num_items_in_batch."""
    kept = response_mask * _not_truncated(response_mask)
    return (_pg(old_log_prob, log_prob, advantages) * kept).sum() / (num_items_in_batch.clamp(min=1.0) / num_processes)


def trl_dapo_truncation_local_fix(old_log_prob, log_prob, advantages, response_mask, num_items_in_batch=None, num_processes=1):
    """A fix of 6369 that counts the kept tokens of the micro-batch only (PR 6439 counts them before the split, over all processes)."""
    kept = response_mask * _not_truncated(response_mask)
    return (_pg(old_log_prob, log_prob, advantages) * kept).sum() / kept.sum().clamp(min=1.0)


def open_instruct_before_1137(old_log_prob, log_prob, advantages, response_mask, accumulation_steps=1):
    """open-instruct before PR 1137: masked_mean over the micro-batch's tokens, divided by the accumulation steps."""
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum() / response_mask.sum() / accumulation_steps


def open_instruct_1137(old_log_prob, log_prob, advantages, response_mask, masked_mean_denominator=None):
    """open-instruct PR 1137: a token sum over the denominator, by default the micro-batch's own token count."""
    denominator = response_mask.sum() if masked_mean_denominator is None else masked_mean_denominator
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum() / denominator


def open_instruct_1161(old_log_prob, log_prob, advantages, response_mask, total_tokens=None, world_size=1):
    """open-instruct PR 1161: the accumulation group's token count precomputed over all ranks, times world_size."""
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum() / total_tokens * world_size


def skyrl_token_mean_legacy(old_log_prob, log_prob, advantages, response_mask, num_micro_batches=1):
    """SkyRL before PR 925/1296 (token_mean_legacy): each micro-batch's token mean, averaged over the micro-batches."""
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum() / response_mask.sum().clamp(min=1) / num_micro_batches


def skyrl_reduce_loss(old_log_prob, log_prob, advantages, response_mask):
    """SkyRL after PR 1296: a masked sum; the reduction lives in the advantages (skyrl/backends/skyrl_train/utils/ppo_utils.py:1145)."""
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum()


def ms_swift_gkd_before_10165(old_log_prob, log_prob, advantages, response_mask):
    """ms-swift PR 10165: the HF GKD loss normalised by the micro-batch's valid tokens (the Trainer then divides by GA)."""
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum() / response_mask.sum().clamp(min=1)


def ms_swift_dapo_10117(old_log_prob, log_prob, advantages, response_mask, num_items_in_batch=None, num_processes=1,
                        current_gradient_accumulation_steps=1, undo_trainer_division=False):
    """ms-swift issue 10117: a window-normalised DAPO loss that HF's Trainer still divides by GA; PR 10116 multiplies it back."""
    loss = (_pg(old_log_prob, log_prob, advantages) * response_mask).sum() / (num_items_in_batch / num_processes)
    return loss * current_gradient_accumulation_steps if undo_trainer_division else loss


def prime_rl_loss(old_log_prob, log_prob, advantages, response_mask, rl_scale=1, loss_scale=None):
    """prime-rl's compute_loss: a token sum over the step's loss scale (rank-local before PR 2562, global after)."""
    scale = rl_scale if loss_scale is None else loss_scale
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum() / scale


def openrlhf_aggregate(old_log_prob, log_prob, advantages, response_mask, token_level_loss=True, dp_size=1, batch_num_tokens=None,
                       global_batch_size=None):
    """OpenRLHF's aggregate_loss (openrlhf/models/loss.py:11-39): global counts times dp_size, or local masked means."""
    loss = _pg(old_log_prob, log_prob, advantages)
    if token_level_loss:
        if batch_num_tokens is None:
            return (loss * response_mask).sum() / response_mask.sum()
        return (loss * response_mask).sum() / batch_num_tokens * dp_size
    counts = response_mask.sum(-1)
    seq_loss = (loss * response_mask).sum(-1) / (counts + 1e-8)
    seq_mask = (counts > 0).to(loss.dtype)
    if global_batch_size is None:
        return (seq_loss * seq_mask).sum() / seq_mask.sum()
    return (seq_loss * seq_mask).sum() / global_batch_size * dp_size


def count_all_reduced_in_the_loss(old_log_prob, log_prob, advantages, response_mask):
    """The micro-batch's token count all-reduced over the ranks inside the loss, times the world size (verl issue 1963's pattern)."""
    count = response_mask.sum().detach().clone()
    world = 1
    if dist.is_initialized():
        dist.all_reduce(count, op=dist.ReduceOp.SUM)
        world = dist.get_world_size()
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum() / count * world


def micro_batch_normalised_advantage(old_log_prob, log_prob, advantages, response_mask, dp_size=1, batch_num_tokens=None):
    """A global token-mean whose advantages are rescaled by the micro-batch's mean |A| (a batch statistic of the wrong scope)."""
    count = response_mask.sum()
    scale = (advantages.abs() * response_mask).sum() / count if count > 0 else torch.ones_like(count)
    return (_pg(old_log_prob, log_prob, advantages / scale) * response_mask).sum() / batch_num_tokens * dp_size


def near_miss(old_log_prob, log_prob, advantages, response_mask, dp_size=1, batch_num_tokens=None):
    """A global token-mean plus 1e-6 of the micro-batch's own token mean: a cut dependence of about 1e-6, far above 1e-9."""
    per_token = _pg(old_log_prob, log_prob, advantages) * response_mask
    return per_token.sum() / batch_num_tokens * dp_size + 1e-6 * per_token.sum() / response_mask.sum().clamp(min=1)


# the conventions these trainers use that the package does not name
HF_TRAINER = Convention("hf-trainer", lambda s: {"num_items_in_batch": torch.tensor(float(s.tokens), dtype=F64), "num_processes": s.world_size,
                                                 "current_gradient_accumulation_steps": s.micro_batches},
                        loss_factor=lambda s: 1.0 / s.micro_batches)  # transformers' Trainer.training_step divides by GA
HF_TRAINER_GA = Convention("hf-trainer, no loss arguments", loss_factor=lambda s: 1.0 / s.micro_batches)
PRIME_RL_BEFORE_2562 = Convention("prime-rl before PR 2562", lambda s: {"loss_scale": max(s.rank_tokens, 1)})
PRIME_RL_MEAN_KEPT = Convention("prime-rl, FSDP's mean kept", lambda s: {"rl_scale": max(s.tokens, 1)})
OPEN_INSTRUCT = Convention("open-instruct", lambda s: {"accumulation_steps": s.micro_batches, "total_tokens": s.tokens, "world_size": s.world_size})
SKYRL_LEGACY = Convention("skyrl legacy", lambda s: {"num_micro_batches": s.micro_batches})
OPENRLHF_NO_GAS = Convention("openrlhf without the 1/gas pre-compensation", lambda s: {"dp_size": s.world_size, "batch_num_tokens": s.tokens},
                             loss_factor=lambda s: 1.0 / s.micro_batches)


# ----------------------------------------------------------------------------- the micro-batch's own token count


def _local_mean(mb, full, W, M):
    return mb / mb.sum()


def _local_mean_clamped(mb, full, W, M):
    return mb / mb.sum().clamp(min=1)


LOCAL_TOKEN_MEANS = [  # (loss, convention, fixed, micro kappa written from its definition)
    pytest.param(verl_policy_loss, None, {}, _local_mean, id="verl issue 7321: agg_loss's fallback to the micro-batch's count"),
    pytest.param(trl_grpo_loss, "trl", {"loss_type": "bnpo"}, lambda mb, full, W, M: _local_mean_clamped(mb, full, W, M) / M,
                 id="TRL issue 2995: bnpo's local completion_mask.sum(), then / GA"),
    pytest.param(open_instruct_before_1137, OPEN_INSTRUCT, {}, lambda mb, full, W, M: _local_mean(mb, full, W, M) / M,
                 id="open-instruct PR 1137: masked_mean / accumulation_steps"),
    pytest.param(open_instruct_1137, None, {}, _local_mean, id="open-instruct PR 1137's local denominator"),
    pytest.param(skyrl_token_mean_legacy, SKYRL_LEGACY, {}, lambda mb, full, W, M: _local_mean_clamped(mb, full, W, M) / M,
                 id="SkyRL PR 925: token_mean_legacy"),
    pytest.param(ms_swift_gkd_before_10165, HF_TRAINER_GA, {}, lambda mb, full, W, M: _local_mean_clamped(mb, full, W, M) / M,
                 id="ms-swift PR 10165: GKD's micro-batch token mean under HF's Trainer"),
]


@pytest.mark.parametrize(("fn", "convention", "fixed", "micro"), LOCAL_TOKEN_MEANS)
def test_a_token_mean_over_the_micro_batch_depends_on_the_split(world, fn, convention, fixed, micro):
    """verl issue 7321, TRL issue 2995, open-instruct PRs 1137/1161, SkyRL PR 925, ms-swift PR 10165: one bug, written six ways.

    A token of micro-batch m of rank w gets 1/(W n_wm) (times 1/GA where the loss divides by it)
    instead of 1/N: it depends on how many tokens the cut puts beside it.  Rows of equal length
    hide it at W > 1 and M = 1 (every share has N/W tokens); unequal lengths show it.
    """
    rep = both(world, fn, convention=convention, **SMALL, **fixed)
    assert rep.verdict == "depends on the split" and not rep.holds() and not rep.holds(allow_scaled=True)
    for case in rep.cases:
        assert case.verdict == "depends on the split"
        assert case.follows.startswith("its micro-batch's token count")
        assert_kappa(case, micro)
    equal = next(m for m in rep.case(2, 1).measurements if m.design == "equal lengths")
    ratio = equal.kappa_split[equal.mask > 0] / equal.kappa_full[equal.mask > 0]
    assert float((ratio - 1).abs().max()) <= 1e-12  # W = 2, M = 1: every share holds N/2 tokens


def test_verl_agg_loss_with_its_global_counts_is_invariant_in_every_mode(world):
    """verl PR 3994 / PR 5798 as merged: batch_num_tokens and global_batch_size of the whole mini-batch, times dp_size.

    token-mean gives 1/N, seq-mean-token-mean 1/(B n_i), seq-mean-token-sum 1/B on every cut;
    the all-padding rows count in verl's global_batch_size (ppo_mini_batch_size * n rows).
    """
    micros = {"token-mean": lambda mb, full, W, M: mb * W / n_valid(full),
              "seq-mean-token-mean": lambda mb, full, W, M: mb / (mb.sum(-1, keepdim=True) + 1e-8) / full.shape[0] * W,
              "seq-mean-token-sum": lambda mb, full, W, M: mb / full.shape[0] * W}
    for mode, micro in micros.items():
        grid = {"world_sizes": (1, 2, 4), "micro_batches": (1, 2, 4), "batch": (16, 6)} if mode == "token-mean" else SMALL
        rep = both(world, verl_policy_loss, convention="verl", loss_agg_mode=mode, **grid)
        assert rep.verdict == "invariant" and rep.holds(), mode
        for case in rep.cases:
            assert (case.verdict, case.factor) == ("invariant", 1.0)
            assert_kappa(case, micro)


def test_verl_seq_mean_before_pr_5798_is_dp_size_squared_too_small(world):
    """verl PR 5798: global_batch_size * dp_size in the denominator makes every token's kappa 1/dp_size^2 of the full batch's."""
    rep = both(world, verl_seq_mean_before_5798, convention="verl", world_sizes=(1, 2, 4), micro_batches=(1, 2), batch=(8, 5))
    assert rep.verdict == "scaled" and not rep.holds() and rep.holds(allow_scaled=True)
    for case in rep.cases:
        W = case.world_size
        assert case.verdict == ("invariant" if W == 1 else "scaled")
        if W > 1:
            assert math.isclose(case.factor, 1 / W**2, rel_tol=1e-12) and case.factor_name == "1/dp_size^2"
        assert_kappa(case, lambda mb, full, W, M: mb / (mb.sum(-1, keepdim=True) + 1e-8) / (full.shape[0] * W))


def test_verl_legacy_ga_scaling_fits_a_sequence_mean_only(world):
    """verl PR 906: the micro-batch's loss times its rows over the rank's rows is right for seq-mean-token-mean, not for token-mean."""
    rep = both(world, verl_legacy_ga_scaling, convention="verl", loss_agg_mode="seq-mean-token-mean", **SMALL)
    assert rep.verdict == "invariant"
    rep = both(world, verl_legacy_ga_scaling, convention="verl", loss_agg_mode="token-mean", **SMALL)
    assert rep.verdict == "depends on the split"
    for case in rep.cases:
        assert case.follows.startswith("its micro-batch's token count")
        assert_kappa(case, lambda mb, full, W, M: mb / mb.sum() * (mb.shape[0] / (full.shape[0] / W)))


def test_verl_counts_reach_a_loss_through_config_global_batch_info(world):
    """verl's policy losses take ``config`` and read ``config.global_batch_info`` (verl/workers/utils/losses.py:65-67)."""
    config = SimpleNamespace(global_batch_info={})
    rep = both(world, verl_policy_loss_with_config, convention="verl", config=config, **SMALL)
    assert rep.verdict == "invariant" and config.global_batch_info == {}  # the caller's config is not touched
    assert check_loss_execution(verl_policy_loss_with_config, engine="simulate", config=config, **SMALL).verdict == "depends on the split"


def renamed_loss(old_logprobs, logprobs, advantages, mask, num_items_in_batch=None, num_processes=1):
    return (_pg(old_logprobs, logprobs, advantages) * mask).sum() / (num_items_in_batch / num_processes)


def test_a_loss_with_its_own_argument_names(world):
    """``names`` maps the roles to the function's names (``logprobs``, ``mask``), on both engines."""
    names = {"old_log_prob": "old_logprobs", "log_prob": "logprobs", "response_mask": "mask"}
    assert both(world, renamed_loss, names=names, convention="trl", **SMALL).verdict == "invariant"


def test_trl_loss_types_under_trls_convention(world):
    """TRL's dapo (num_items_in_batch / num_processes), grpo (per-sequence mean / GA) and dr_grpo (B * L / GA) are invariant.

    grpo: 1/(B n_i) on every cut, an all-padding row counted in the mean as in the full batch;
    dr_grpo: 1/(B L) with L = max_completion_length.
    """
    micros = {"dapo": lambda mb, full, W, M: mb * W / n_valid(full),
              "grpo": lambda mb, full, W, M: mb / mb.sum(-1, keepdim=True).clamp(min=1) / mb.shape[0] / M,
              "dr_grpo": lambda mb, full, W, M: mb / (mb.shape[0] * 5) / M}
    for loss_type, micro in micros.items():
        rep = both(world, trl_grpo_loss, convention="trl", loss_type=loss_type, **SMALL)
        assert rep.verdict == "invariant", loss_type
        for case in rep.cases:
            assert_kappa(case, micro)


def test_trl_6369_is_invariant_and_its_local_fix_is_not(world):
    """TRL issue 6369 / PR 6439: the denominator counts truncated rows the numerator drops.

    The execution check rightly finds the buggy form invariant — num_items_in_batch is global, so every
    cut gives every kept token the same 1/N as the full batch (the bug is the mask's, the same at every
    cut); what it catches is the tempting fix that counts the kept tokens of the micro-batch only.
    """
    rep = both(world, trl_dapo_truncation_6369, convention="trl", **SMALL)
    assert rep.verdict == "invariant"
    for case in rep.cases:
        assert_kappa(case, lambda mb, full, W, M: mb * _not_truncated(mb) * W / n_valid(full))
    rep = both(world, trl_dapo_truncation_local_fix, convention="trl", **SMALL)
    assert rep.verdict == "depends on the split"
    for case in rep.cases:
        assert_kappa(case, lambda mb, full, W, M: mb * _not_truncated(mb) / (mb * _not_truncated(mb)).sum().clamp(min=1))


def test_ms_swift_dapo_under_hf_trainers_division_is_one_over_ga(world):
    """ms-swift issue 10117 / PR 10116: a loss already normalised over the accumulation window, divided by GA again by the Trainer."""
    rep = both(world, ms_swift_dapo_10117, convention=HF_TRAINER, **SMALL)
    assert rep.verdict == "scaled"
    for case in rep.cases:
        M = case.micro_batches
        assert case.verdict == ("invariant" if M == 1 else "scaled")
        if M > 1:
            assert math.isclose(case.factor, 1 / M, rel_tol=1e-12) and case.factor_name == "1/GA"
        assert_kappa(case, lambda mb, full, W, M: mb * W / n_valid(full) / M)
    assert both(world, ms_swift_dapo_10117, convention=HF_TRAINER, undo_trainer_division=True, **SMALL).verdict == "invariant"


def test_prime_rl_global_count_and_fsdps_mean_undone(world):
    """prime-rl PR 2562 (after PR 2034 made every loss token-normalised): the rank-local token count over its micro-batches
    moved with the rank's share; the count all-reduced over dp, with FSDP's mean undone, is invariant; all-reduced
    with FSDP's mean kept, it is 1/dp_size too small.
    """
    rep = both(world, prime_rl_loss, convention=PRIME_RL_BEFORE_2562, **SMALL)
    assert rep.case(1, 2).verdict == "invariant"  # one rank: its count is the batch's, whatever the micro-batches
    assert rep.case(2, 1).follows == "its micro-batch's token count (at this cut also its rank's token count)"
    assert (rep.case(2, 2).verdict, rep.case(2, 2).follows) == ("depends on the split", "its rank's token count")

    for case in rep.cases:
        for m in case.measurements:
            W = case.world_size
            rank_tokens = m.mask.reshape(W, -1).sum(-1).clamp(min=1)
            expected = (m.mask.reshape(W, -1) / rank_tokens[:, None]).reshape(m.mask.shape) / W
            torch.testing.assert_close(m.kappa_split, expected, rtol=1e-12, atol=1e-15)
    rep = both(world, prime_rl_loss, convention="prime-rl", **SMALL)
    assert rep.verdict == "invariant"
    for case in rep.cases:
        assert_kappa(case, lambda mb, full, W, M: mb / n_valid(full), reduction="sum")
    rep = both(world, prime_rl_loss, convention=PRIME_RL_MEAN_KEPT, **SMALL)
    assert [(c.verdict, c.factor_name) for c in rep.cases] == [("invariant", None), ("scaled", "1/dp_size"), ("scaled", "1/dp_size")]


def test_open_instruct_1161_counts_the_accumulation_group_over_all_ranks(world):
    """open-instruct PR 1161: the token count of the whole accumulation group over every rank, times world_size: invariant."""
    rep = both(world, open_instruct_1161, convention=OPEN_INSTRUCT, **SMALL)
    assert rep.verdict == "invariant"
    for case in rep.cases:
        assert_kappa(case, lambda mb, full, W, M: mb * W / n_valid(full))


def test_openrlhf_aggregate_loss_and_its_gas_pre_compensation(world):
    """OpenRLHF's global normalisers divided by gas (DeepSpeed multiplies each loss by 1/gas): invariant at token and sample level.

    Without the division the loss is 1/GA too small; without any global count, the sample-level
    mean over the micro-batch's non-empty rows is GA times too large on batches without empty rows
    and breaks (0/0) on a share of padding — the design that tells the two apart.
    """
    for token_level, micro in ((True, lambda mb, full, W, M: mb / n_valid(full)),
                               (False, lambda mb, full, W, M: mb / (mb.sum(-1, keepdim=True) + 1e-8) / rows_with_token(full))):
        rep = both(world, openrlhf_aggregate, convention="openrlhf", token_level_loss=token_level, **SMALL)
        assert rep.verdict == "invariant", token_level
        for case in rep.cases:
            assert_kappa(case, lambda mb, full, W, M, f=micro: f(mb, full, W, M) * W)  # dp_size / W
    rep = both(world, openrlhf_aggregate, convention=OPENRLHF_NO_GAS, **SMALL)
    assert [(c.micro_batches, c.verdict, c.factor_name) for c in rep.cases] == [(2, "scaled", "1/GA"), (1, "invariant", None), (2, "scaled", "1/GA")]
    rep = both(world, openrlhf_aggregate, token_level_loss=False, **SMALL)
    for case in rep.cases:
        assert case.verdict == "depends on the split"
        padded = case.measurements[2]
        assert "all padding" in padded.design and not bool(torch.isfinite(padded.kappa_split).all())
        for m in case.measurements[:2]:  # without the padding design this cut would read "scaled by GA"
            ratio = m.kappa_split[m.mask > 0] / m.kappa_full[m.mask > 0]
            assert torch.allclose(ratio, torch.full_like(ratio, float(case.micro_batches)), rtol=1e-12, atol=0)
        assert "not finite" in case.evidence


def test_skyrl_normalises_the_advantages_and_sums(world):
    """SkyRL PR 1296: advantages divided by the mini-batch's tokens before the split, a masked sum times dp_size: invariant."""
    rep = both(world, skyrl_reduce_loss, convention="skyrl", **SMALL)
    assert rep.verdict == "invariant"
    for case in rep.cases:
        assert_kappa(case, lambda mb, full, W, M: mb / n_valid(full) * W)


def test_a_count_all_reduced_inside_the_loss_runs_on_both_engines(world):
    """A loss that calls torch.distributed itself (the micro-batch's count all-reduced, as verl issue 1963's balance_dp_token):
    invariant over ranks with one micro-batch, but with several each micro-batch step's count over the ranks is not the batch's."""
    rep = both(world, count_all_reduced_in_the_loss, **SMALL)
    assert rep.case(2, 1).verdict == "invariant"
    for case in (rep.case(1, 2), rep.case(2, 2)):
        assert case.verdict == "depends on the split"
    assert rep.case(1, 2).follows == "its micro-batch's token count (at this cut also the token count of its micro-batch step summed over the ranks)"
    assert rep.case(2, 2).follows == "the token count of its micro-batch step summed over the ranks"
    for case in rep.cases:
        W, M = case.world_size, case.micro_batches
        for m in case.measurements:
            per = m.mask.shape[0] // (W * M)
            step_tokens = m.mask.reshape(W, M, per, -1).sum((0, 2, 3))  # micro-batch step k over all ranks
            expected = (m.mask.reshape(W, M, per, -1) / step_tokens[None, :, None, None]).reshape(m.mask.shape)
            torch.testing.assert_close(m.kappa_split, expected, rtol=1e-12, atol=1e-15, equal_nan=True)


def test_a_batch_statistic_of_the_values_is_caught_by_the_values_probe(world):
    """Advantages rescaled by the micro-batch's mean |A|: kappa at A = 1 never moves, the gradient at other advantages does.

    (SkyRL normalises advantages over the whole batch in the driver, skyrl/train/trainer.py:1476-1482;
    inside the loss the same statistic has the micro-batch's scope.)
    """
    rep = both(world, micro_batch_normalised_advantage, convention="verl", **SMALL)
    for case in rep.cases:
        assert case.verdict == "depends on the split" and case.follows is None
        assert "couples the tokens of a share through their values" in case.evidence
        assert_kappa(case, lambda mb, full, W, M: mb / n_valid(full) * W)
        W, M = case.world_size, case.micro_batches
        for m in case.measurements:
            ratio, a = torch.exp(m.log_prob - m.old_log_prob), m.advantages
            per = m.mask.shape[0] // (W * M)
            counts = m.mask.reshape(W * M, per, -1).sum((1, 2))
            blocks = torch.where(counts > 0, (a.abs() * m.mask).reshape(W * M, per, -1).sum((1, 2)) / counts.clamp(min=1), 1.0)
            scale = blocks.repeat_interleave(per)[:, None]
            full_scale = (a.abs() * m.mask).sum() / m.mask.sum()
            torch.testing.assert_close(m.values_split, -ratio * a / scale * m.mask / n_valid(m.mask), rtol=1e-12, atol=1e-15)
            torch.testing.assert_close(m.values_full, -ratio * a / full_scale * m.mask / n_valid(m.mask), rtol=1e-12, atol=1e-15)


def test_a_cut_dependence_of_1e_6_is_not_invariant(world):
    """A near miss: one millionth of a local token mean beside a global one moves kappa by about 1e-6 — above EXECUTION_RTOL."""
    rep = check_loss_execution(near_miss, convention="verl", engine="simulate", **SMALL)
    for case in rep.cases:
        assert case.verdict == "depends on the split"
        assert 1e-8 < case.deviation < 1e-4


# ----------------------------------------------------------------------------- the report


def test_the_report_prints_serialises_and_renders(world, html_outline):
    rep = check_loss_execution(verl_seq_mean_before_5798, convention="verl", engine="simulate", **SMALL)
    data = json.loads(json.dumps(rep.as_dict()))
    assert data["verdict"] == "scaled" and data["holds"] is False and data["convention"] == "verl"
    assert [c["factor_name"] for c in data["cases"]] == [None, "1/dp_size^2", "1/dp_size^2"]
    assert set(data["cases"][1]["ratios"]) == {"equal lengths", "unequal lengths", "rank 1 all padding"}
    text = str(rep)
    assert text.splitlines()[0] == "execution (simulate, convention verl): scaled (invariant at 1 of 3, scaled at 2 of 3 cuts)"
    assert "dp=2 x micro=1: scaled by 0.25 = 1/dp_size^2" in text
    assert "dp  micro  design" in rep.table()
    page = html_outline(rep._repr_html_())
    assert ("div", "pgi-report") in page.tags and ("table", "pgi-table") in page.tags
    assert page.th == ["dp", "micro", "design", "κ cut / κ full", "verdict"]
    assert repr(rep).startswith("ExecutionReport(verdict='scaled'")
    with pytest.raises(KeyError, match="dp=4 x micro=1"):
        rep.case(4, 1)


# ----------------------------------------------------------------------------- bad input and failing ranks


def non_scalar(old_log_prob, log_prob, advantages, response_mask):
    return _pg(old_log_prob, log_prob, advantages) * response_mask


def no_gradient(old_log_prob, log_prob, advantages, response_mask):
    return (old_log_prob * response_mask).sum()


def raises_on_rank_1(old_log_prob, log_prob, advantages, response_mask):
    if dist.get_rank() == 1:
        raise RuntimeError("rank one's own error")
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum()


def sleeps_on_rank_1(old_log_prob, log_prob, advantages, response_mask):
    if dist.is_initialized() and dist.get_rank() == 1:
        time.sleep(60)
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum()


RELEASE = threading.Event()


def waits_on_rank_1(old_log_prob, log_prob, advantages, response_mask):
    if dist.get_rank() == 1:
        RELEASE.wait(10)
    return (_pg(old_log_prob, log_prob, advantages) * response_mask).sum()


def _gone(pids):
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True


def _our_children(world):
    return [p for p in multiprocessing.active_children() if p.name.startswith("pg-identities") and p.pid not in world.pids]


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"world_sizes": (0,)}, ValueError, "world_sizes"),
    ({"world_sizes": ()}, TypeError, "world_sizes"),
    ({"world_sizes": (2.0,)}, TypeError, "world_sizes"),
    ({"world_sizes": (32,)}, ValueError, "world_sizes: 32 ranks"),
    ({"world_sizes": (3,)}, ValueError, "world_sizes: 3 ranks"),
    ({"micro_batches": (3,)}, ValueError, "micro_batches: 3 micro-batches"),
    ({"micro_batches": (1,), "world_sizes": (1,)}, ValueError, "world_sizes and micro_batches"),
    ({"batch": (16,)}, TypeError, "batch"),
    ({"batch": (1, 4)}, ValueError, "batch"),
    ({"engine": "nccl"}, ValueError, "engine must be 'gloo', 'simulate'"),
    ({"convention": "deepspeed"}, ValueError, "convention must be None"),
    ({"convention": "trl"}, ValueError, "convention='trl' passes num_items_in_batch"),
    ({"convention": "verl", "dp_size": 2}, ValueError, "fixed arguments dp_size"),
    ({"convention": Convention("x", reduction="max")}, ValueError, "convention.reduction"),
    ({"timeout": 0}, ValueError, "timeout"),
    ({"names": {"log_prob": 3}}, TypeError, "names"),
])
def test_bad_input_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        check_loss_execution(verl_policy_loss, **{"engine": "simulate", **kwargs})


def test_bad_functions_get_the_package_s_errors(world):
    with pytest.raises(TypeError, match="fn must be a callable"):
        check_loss_execution("loss", engine="simulate")
    for engine in ("simulate", world):
        with pytest.raises(TypeError, match="rank 0 of 1: fn must return a scalar loss tensor"):
            check_loss_execution(non_scalar, engine=engine, **SMALL)
        with pytest.raises(ValueError, match="no gradient at r = 1, A = 1"):
            check_loss_execution(no_gradient, engine=engine, **SMALL)
    with pytest.raises(ValueError, match="the GlooWorld has 4 processes, world_sizes needs 8"):
        check_loss_execution(verl_policy_loss, engine=world, world_sizes=(8,), micro_batches=(1,))
    with pytest.raises(TypeError, match="a lambda.*engine='simulate'"):
        check_loss_execution(lambda old_log_prob, log_prob, advantages, response_mask: log_prob.sum(), engine="gloo", **SMALL)

    def local(old_log_prob, log_prob, advantages, response_mask):
        return log_prob.sum()

    with pytest.raises(TypeError, match="a function defined inside another function"):
        check_loss_execution(local, engine=world, **SMALL)
    with pytest.raises(TypeError, match="the fixed argument config must pickle"):
        check_loss_execution(verl_policy_loss_with_config, engine=world, convention="verl", config=SimpleNamespace(global_batch_info={}, hook=lambda: 0), **SMALL)
    with pytest.raises(TypeError, match="size must be an int"):
        GlooWorld("4")
    with pytest.raises(ValueError, match="size must be >= 1"):
        GlooWorld(0)


def test_an_error_inside_a_rank_is_shown_and_its_world_restarted(world):
    """The rank's own error comes back (its type and message, the rank named, its traceback as a note); no worker is left."""
    before = world.pids
    with pytest.raises(TypeError, match="rank 1 of 2: fn could not be called .*rank one's own error") as caught:
        check_loss_execution(raises_on_rank_1, engine=world, **SMALL)
    assert "the rank's traceback" in "".join(getattr(caught.value, "__notes__", []))
    assert _gone(before) and not world.running
    with pytest.raises(TypeError, match="rank 1 of 2: fn could not be called .*rank one's own error"):
        check_loss_execution(raises_on_rank_1, engine="simulate", **SMALL)
    assert check_loss_execution(verl_policy_loss, engine=world, convention="verl", **SMALL).verdict == "invariant"  # a fresh world
    assert world.running and set(world.pids).isdisjoint(before)


def test_a_hanging_rank_ends_in_a_timeout_and_no_process_is_left(world):
    """A rank that sleeps past the timeout: a TimeoutError naming it, and the one-off world's processes gone."""
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="rank 1 of 2 did not finish within 0.5 s"):
        check_loss_execution(sleeps_on_rank_1, engine="gloo", world_sizes=(2,), micro_batches=(1,), batch=(4, 3), timeout=0.5)
    assert time.monotonic() - start < 10
    assert _our_children(world) == []
    RELEASE.clear()
    try:
        with pytest.raises(TimeoutError, match="simulated rank 1 of 2 did not finish within 0.3 s"):
            check_loss_execution(waits_on_rank_1, engine="simulate", world_sizes=(2,), micro_batches=(1,), batch=(4, 3), timeout=0.3)
    finally:
        RELEASE.set()


def test_an_interrupt_stops_the_workers(world):
    """Ctrl-C while the ranks run: the KeyboardInterrupt reaches the caller and the one-off world's processes are gone."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a pytest-xdist worker may ignore SIGINT
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            check_loss_execution(sleeps_on_rank_1, engine="gloo", world_sizes=(2,), micro_batches=(1,), batch=(4, 3), timeout=30)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 10
    assert _our_children(world) == []


def test_a_one_off_gloo_check_leaves_no_process(world):
    rep = check_loss_execution(verl_policy_loss, convention="verl", engine="gloo", **SMALL)
    assert rep.verdict == "invariant" and rep.engine == "gloo"
    assert _our_children(world) == []


# ----------------------------------------------------------------------------- the command and the assertion

CLI_LOSS = '''import torch


def loss(old_log_prob, log_prob, advantages, response_mask, dp_size=1, batch_num_tokens=None):
    per_token = -torch.exp(log_prob - old_log_prob) * advantages * response_mask
    count = response_mask.sum() if batch_num_tokens is None else batch_num_tokens
    return per_token.sum() / count * dp_size
'''


def test_the_command_prints_the_execution_report_and_fails_a_cut_that_moves(world, tmp_path, capsys):
    """``pg-identities check FILE.py:FN --kind loss --execution dp=... micro=...``: the report after the loss's, exit 1 unless invariant."""
    from numeric.cli import main

    path = tmp_path / "trainer_code.py"
    path.write_text(CLI_LOSS)
    assert main(["check", f"{path}:loss", "--kind", "loss", "--execution", "dp=2", "micro=2"]) == 1
    out = capsys.readouterr().out
    assert "execution (gloo, no convention): depends on the split" in out
    assert out.rstrip().endswith("FAIL: not invariant to the cut")
    assert main(["check", f"{path}:loss", "--kind", "loss", "--execution", "dp=2", "micro=2", "convention=verl", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["execution"]["verdict"] == "invariant" and data["execution"]["holds"] is True and data["holds"] is True
    assert [(c["world_size"], c["micro_batches"]) for c in data["execution"]["cases"]] == [(2, 2)]
    assert main(["check", f"{path}:loss", "--kind", "loss", "--execution", "dp=two"]) == 2
    assert "--execution dp must be comma-separated ints" in capsys.readouterr().err
    assert _our_children(world) == []


def test_assert_policy_loss_with_invariant(world):
    from numeric.variants import assert_policy_loss

    assert assert_policy_loss(verl_policy_loss, invariant=True, convention="verl").aggregation == "token-mean"
    with pytest.raises(AssertionError, match="verl_policy_loss is not invariant to how the batch is cut: execution .simulate"):
        assert_policy_loss(verl_policy_loss, invariant=True)
    with pytest.raises(TypeError, match="invariant must be a bool"):
        assert_policy_loss(verl_policy_loss, invariant="yes")
    assert assert_policy_loss(verl_policy_loss).verdict == "scaled"  # without invariant=True: the loss's report alone, as before
