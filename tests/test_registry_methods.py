"""Issue 29: the checker names each new method from trainer-style code; the readings per commit; prompt-mean; M2PO's rule.

The trainer-style functions are tests/trainer_style/registry_methods.py (issue 29's losses as their trainers write them,
repository, commit and file:lines in each docstring) and prime-rl's default loss of tests/trainer_style/shipped.py.  For
each, ``check_policy_loss`` must name the registry's method, the trainer's own aggregation and the clip constants its code
sets; the four functions of the acceptance (verl's ``dppo_tv``, TRL's ``luspo``, OpenRLHF's ``seq-mask-tis``, prime-rl's
default) go through the command as well.  The aggregation names whose meaning moved between two commits of one trainer are
reached by ``convention=``; the package's own names keep their number (and warn).
"""

import importlib.util
import json
import math
import warnings
from functools import cache
from pathlib import Path

import pytest
import torch

from numeric.cli import main
from numeric.losses import ReadingWarning, aggregate, m2po_selection, policy_loss, token_weights
from numeric.variants import check_policy_loss, divergence_cells
from numeric.variants.defects import DEFECTS, defect_table
from numeric.variants.divergences import DIVERGENT_NAMES

F64 = torch.float64
STYLE = Path(__file__).parent / "trainer_style"
pytestmark = pytest.mark.xdist_group("trainer code")


def _load(name):
    spec = importlib.util.spec_from_file_location(f"trainer_style_{name}", STYLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R, S = _load("registry_methods"), _load("shipped")

NAMED = {  # function: (method, aggregation, clip constants, sequence ratio)
    "verl_dppo_tv": ("DPPO binary TV (verl)", "token-mean", {"is_cap": 3.0, "delta_high": 0.2, "delta_low": 0.2}, None),
    "verl_dppo_kl": ("DPPO binary KL (verl)", "token-mean", {"is_cap": 3.0, "kl_delta_high": 0.05, "kl_delta_low": 0.05}, None),
    "verl_dro": ("DRO", "token-mean", {}, None),
    "trl_luspo": ("LUSPO", "seq-mean-token-sum", {"eps_high": 0.2, "eps_low": 0.2}, "geometric mean"),
    "trl_opsm": ("OPSM", "seq-mean-token-mean", {"eps_high": 0.2, "eps_low": 1 - math.exp(-0.05), "opsm_delta": 0.05}, "token ratio, gated by its row"),
    "trl_rloo": ("sequence PPO (product ratio)", "seq-mean-token-sum", {"eps_high": 0.2, "eps_low": 0.2}, "product"),
    "openrlhf_icepop": ("IcePop", "token-mean", {"band_low": 0.5, "band_high": 5.0}, None),
    "openrlhf_seq_mask_tis": ("seq-mask-TIS", "token-mean", {"band_low": 0.5, "band_high": 5.0}, "token ratio, gated by its row"),
    "skyrl_dppo": ("DPPO", "token-mean", {"delta_high": 0.2, "delta_low": 0.2}, None),
    "skyrl_importance_sampling": ("token IS", "token-mean", {}, None),
}


@cache
def _report(name):
    return check_policy_loss(getattr(R, name))


def test_every_transcription_is_named():
    functions = {n for n in vars(R) if not n.startswith("_") and callable(getattr(R, n)) and getattr(R, n).__module__ == R.__name__}
    assert functions == set(NAMED) | {"trl_luspo_token_level"}


@pytest.mark.parametrize("name", NAMED)
def test_the_checker_names_the_method_its_aggregation_and_constants(name):
    method, aggregation, clip, ratio = NAMED[name]
    rep = _report(name)
    assert (rep.method, rep.aggregation, rep.sequence_ratio) == (method, aggregation, ratio)
    assert dict(rep.clip) == pytest.approx(clip, rel=1e-7)
    assert rep.token is not None and rep.token.is_policy_gradient  # the per-token weight is certified (the one-token row's for a sequence)
    assert rep.verdict in ("unbiased", "scaled", "reweighted") and rep.length_biased == (aggregation == "seq-mean-token-mean")


def test_a_penalised_twin_reads_its_constant():
    """DRO's beta/2 (log r)^2 is read as tau = beta/2: the report gives verl's beta = 0.1, not tau."""
    assert "dro_beta = 0.1)" in _report("verl_dro").token.reason


def test_the_luspo_warning_case_is_not_luspo():
    """TRL's luspo at importance_sampling_level "token" (its warning's case): the (B, T) loss's .mean() over every slot is no
    mode, and the row-length factor makes it length-biased: not LUSPO, and not a policy gradient of any aggregation."""
    rep = _report("trl_luspo_token_level")
    assert (rep.method, rep.aggregation, rep.verdict, rep.length_biased) == ("PPO", "other", "biased", True)


ACCEPTANCE = [  # (file, function, method, aggregation, verdict)
    ("registry_methods", "verl_dppo_tv", "DPPO binary TV (verl)", "token-mean", "scaled"),
    ("registry_methods", "trl_luspo", "LUSPO", "seq-mean-token-sum", "unbiased"),
    ("registry_methods", "openrlhf_seq_mask_tis", "seq-mask-TIS", "token-mean", "scaled"),
    ("shipped", "prime_rl_default", "DPPO (binary TV) + tau (log r)^2", "token-mean", "scaled"),
]


@pytest.mark.parametrize("file, function, method, aggregation, verdict", ACCEPTANCE, ids=[a[1] for a in ACCEPTANCE])
def test_the_command_certifies_the_acceptance_functions(capsys, file, function, method, aggregation, verdict):
    """``pg-identities check FILE.py:FUNCTION --kind loss --expect METHOD --json``: the method, the trainer's aggregation, the verdict."""
    assert main(["check", f"{STYLE / file}.py:{function}", "--kind", "loss", "--expect", method, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["holds"] and (report["method"], report["aggregation"], report["verdict"]) == (method, aggregation, verdict)
    if function == "trl_luspo":  # a wrong expectation fails the command (one case: each run checks the function again)
        assert main(["check", f"{STYLE / file}.py:{function}", "--kind", "loss", "--expect", "seq-mean-token-mean"]) == 1
        assert "FAIL: expected seq-mean-token-mean" in capsys.readouterr().out


# ------------------------------------------------------------------ readings per commit


def _ragged():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [5.0, 6.0, 0.0], [9.0, 9.0, 9.0]], dtype=F64)
    m = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 0]], dtype=F64)
    return x, m


def test_a_moved_name_keeps_the_package_number_and_warns():
    """verl's seq-mean-token-sum-norm: sum/D at b178a3c, the mean over the rows with a token of sum/D at 1dda039.  The bare name
    keeps the package's number (b178a3c's, what it computed before) and warns naming both readings; a convention silences it."""
    x, m = _ragged()
    with pytest.warns(ReadingWarning, match=r"convention='verl@b178a3c' or convention='verl@1dda039'"):
        bare = aggregate(x, m, "seq-mean-token-sum-norm").item()
    assert bare == 21 / 3  # sum over the kept tokens / T
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old = aggregate(x, m, "seq-mean-token-sum-norm", convention="verl@b178a3c").item()
        new = aggregate(x, m, "seq-mean-token-sum-norm", convention="verl@1dda039").item()
        trl = aggregate(x, m, "dr_grpo", convention="TRL@f2cd577", norm=3).item()
    assert (old, new, trl) == (bare, 21 / 3 / 3, 21 / 3 / 4)  # 1dda039: the 3 rows with a token; TRL's dr_grpo: all 4
    kappa = token_weights(m, "seq-mean-token-sum-norm", convention="verl@1dda039")
    assert torch.equal(kappa, m / 9)


def test_a_convention_refuses_what_the_trainer_did_not_have():
    x, m = _ragged()
    with pytest.raises(ValueError, match=r"not a name verl gives an aggregation at b178a3c"):
        aggregate(x, m, "token-sum", convention="verl@b178a3c")  # token-sum came with 1dda039's #7197
    with pytest.raises(ValueError, match="convention must be one of"):
        aggregate(x, m, "token-mean", convention="verl@0000000")
    with pytest.raises(ValueError, match="convention must be 'trainer@commit'"):
        aggregate(x, m, "token-mean", convention="verl")
    with pytest.raises(ValueError, match="count_eps is fixed by convention='verl@1dda039'"):
        aggregate(x, m, "seq-mean-token-mean", convention="verl@1dda039", count_eps=0.0 + 1e-3)


def test_token_sum_and_the_policy_loss_reach_a_reading():
    x, m = _ragged()
    assert aggregate(x, m, "token-sum").item() == 21.0
    assert torch.equal(token_weights(m, "token-sum"), m)
    lp = torch.log(torch.tensor([[0.3, 0.6, 0.5], [0.2, 0.1, 0.4], [0.5, 0.5, 0.5], [0.1, 0.1, 0.1]], dtype=F64))
    A = torch.tensor([1.0, -0.5, 2.0, 1.0], dtype=F64)
    per_token = policy_loss("reinforce", lp, lp, A, m, agg="token-sum")
    assert abs(per_token.item() - (-(lp * m).sum(-1) * A).sum().item()) <= 1e-15
    new = policy_loss("reinforce", lp, lp, A, m, agg="seq-mean-token-sum-norm", convention="verl@1dda039")
    assert abs(new.item() - (-(lp * m).sum(-1) * A).sum().item() / 9) <= 1e-15


def test_prompt_mean_is_skyrls_pre_scaled_advantages():
    """SkyRL's prompt_mean (ppo_utils.py:1152-1220 at a956457): the advantages are divided by P max(N_p, 1) before a masked sum;
    the package's aggregate(..., "prompt-mean", groups=...) has the same value and gradient.  A prompt with no token counts in P."""
    x, m = _ragged()
    groups = torch.tensor([0, 0, 1, 2])
    lp0 = torch.log(torch.tensor([[0.3, 0.6, 0.5], [0.2, 0.1, 0.4], [0.5, 0.5, 0.5], [0.1, 0.1, 0.1]], dtype=F64))
    A = torch.tensor([1.0, -0.5, 2.0, 1.0], dtype=F64)
    P, N = 3, torch.tensor([4.0, 4.0, 2.0, 0.0], dtype=F64)  # the prompts, the tokens of each row's prompt
    lp = lp0.clone().requires_grad_(True)
    theirs = (-lp * (A / (P * N.clamp(min=1)))[:, None] * m).sum()
    ours = policy_loss("reinforce", lp, lp0, A, m, agg="prompt-mean", groups=groups)
    assert abs(ours.item() - theirs.item()) <= 1e-15
    (g_ours,), (g_theirs,) = torch.autograd.grad(ours, lp), torch.autograd.grad(theirs, lp)
    assert (g_ours - g_theirs).abs().max().item() <= 1e-15
    assert torch.equal(token_weights(m, "prompt-mean", groups=groups), m / (P * N.clamp(min=1))[:, None])
    with pytest.raises(ValueError, match="groups is required for 'prompt-mean'"):
        aggregate(x, m, "prompt-mean")
    with pytest.raises(ValueError, match="groups is used by"):
        aggregate(x, m, "token-mean", groups=groups)


# ------------------------------------------------------------------ M2PO's selection


def _areal_m2po(old_logp, prox_logp, loss_mask, m2_threshold):
    """AReaL's _apply_m2po_masking and _get_m2po_loss_mask (areal/trainer/ppo/actor.py:933-1014 at cbff54d), in our words:
    the kept tokens (a bool loss mask)."""
    m2 = (old_logp - prox_logp) ** 2
    flat = loss_mask.view(-1)
    selected = m2.view(-1)[flat]
    if selected.numel() == 0:
        return loss_mask
    ordered, indices = torch.sort(selected, descending=True)
    n = ordered.numel()
    means = ordered.flip(0).cumsum(0).flip(0) / torch.arange(n, 0, -1, dtype=ordered.dtype)
    below = torch.where(means < m2_threshold)[0]
    k = below[0].item() if len(below) > 0 else n - 1
    keep = torch.ones_like(ordered, dtype=torch.bool)
    keep[:k] = False
    out = torch.zeros_like(flat)
    out[flat] = keep[torch.argsort(indices)]
    return out.view_as(loss_mask)


@pytest.mark.parametrize("threshold", [1e-3, 0.02, 0.3, 50.0])
def test_m2po_selection_is_areals_rule(threshold):
    gen = torch.Generator().manual_seed(4)
    mask = torch.rand(5, 7, generator=gen) < 0.7
    behaviour = -torch.rand(5, 7, generator=gen, dtype=F64) * 2
    proximal = behaviour + 0.3 * torch.randn(5, 7, generator=gen, dtype=F64)
    dropped = m2po_selection(behaviour, torch.where(mask, proximal, math.nan), mask, threshold=threshold)
    kept = _areal_m2po(behaviour, proximal, mask, threshold)
    assert torch.equal(dropped, mask & ~kept)
    assert 0 < int(kept.sum()) <= int(mask.sum())  # at least one token kept ("all but one" when no suffix is below)
    if threshold == 1e-3:
        assert int(kept.sum()) == 1


def test_m2po_compares_the_suffix_mean_strictly():
    """m2 = 4, 1, 1/4 (exact): the suffix means are 7/4, 5/8, 1/4; at the threshold 5/8 AReaL keeps only the last (the mean
    must be strictly below), so the first two are dropped."""
    beh = torch.tensor([[2.0, 1.0, 0.5]], dtype=F64)
    dropped = m2po_selection(beh, torch.zeros_like(beh), torch.ones(1, 3), threshold=0.625)
    assert dropped.tolist() == [[True, True, False]] == (~_areal_m2po(beh, torch.zeros_like(beh), torch.ones(1, 3, dtype=torch.bool), 0.625)).tolist()


# ------------------------------------------------------------------ the divergence table and the defects


@pytest.mark.parametrize("name", DIVERGENT_NAMES)
def test_every_divergent_name_has_two_meanings(name):
    cells = {t: c for t, c in divergence_cells(name).items() if c != r"\text{-}"}
    assert len(cells) >= 2 and len(set(cells.values())) >= 2, cells


def test_the_defects_are_what_the_checker_reports():
    findings = {what: finding(fn) for _, what, fn, _, finding in DEFECTS}
    assert findings["luspo at importance_sampling_level token"].startswith("biased: masked tokens receive gradient")
    assert findings["top_entropy_quantile (loss_type dapo)"].startswith("inconsistent: tokens the function silences itself")
    for k in ("vllm_is_correction_type seq-mask-tis", "loss default"):  # exp(...) * mask: a poisoned masked slot reaches the loss
        assert findings[k].startswith("leaks: NaN in the masked slot") and "through a product with the mask" in findings[k]
    assert findings["dppo_tv at ActorConfig's defaults"] == "truncation read off the weight: C = 3.0"
    assert len(defect_table().splitlines()) == len(DEFECTS) + 3
