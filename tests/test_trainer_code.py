"""numeric.variants (check_policy_loss, check_grouped_advantage): a trainer's policy loss and advantage estimator certified as written.

The trainer-style functions live in tests/trainer_style/ (written from the papers and the peers'
signatures).  Every expected kappa is computed here from the mode's definition, never read back
from the module's own fit.
"""

import html
import importlib.util
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import torch

from derivations.group_baselines import P
from derivations.readings import snapshot
from numeric import opo_advantages
from numeric.variants import (
    assert_group_advantage,
    assert_policy_loss,
    check_grouped_advantage,
    check_policy_loss,
)

STYLE = Path(__file__).parent / "trainer_style"

pytestmark = pytest.mark.xdist_group("trainer code")
"""tests/test_cli.py checks the same PPO-style losses: under ``--dist loadgroup`` both files share one worker, so the region
split of each registry form that a loss's weight is matched against (:mod:`derivations.variants.token`, cached per
process) is derived once (measured: 37 CPU-s as two processes, 31 as one)."""


def _load(name):
    spec = importlib.util.spec_from_file_location(f"trainer_style_{name}", STYLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


L = _load("losses")
ADV = _load("advantages")
SHIPPED = _load("shipped")
REGISTRY = _load("registry_methods")


@cache
def loss_report(name, **fixed):
    return check_policy_loss(getattr(L, name), **fixed)


def _expected_kappa(mode, n, B, T, N, norm=None):
    return {"token-mean": 1 / N, "seq-mean-token-mean": 1 / (B * n), "seq-mean-token-sum": 1 / B,
            "seq-mean-token-sum-norm": 1 / (T if norm is None else norm)}[mode]


# ------------------------------------------------------------------ losses: the four modes


@pytest.mark.parametrize("mode, norm, biased, verdict", [
    ("token-mean", None, False, "scaled"),
    ("seq-mean-token-mean", None, True, "reweighted"),
    ("seq-mean-token-sum", None, False, "unbiased"),
    ("seq-mean-token-sum-norm", 4096, False, "scaled"),
    ("seq-mean-token-sum-norm", None, False, "scaled"),
])
def test_four_aggregation_modes_certified(mode, norm, biased, verdict):
    rep = loss_report("ppo_loss", loss_agg_mode=mode, norm=norm)
    assert (rep.method, rep.aggregation, rep.length_biased, rep.verdict) == ("PPO", mode, biased, verdict)
    assert rep.policy_gradient and rep.on_policy_at_ratio_one and not rep.sequence_level and rep.claim_holds
    assert rep.decomposition_gap <= 1e-12  # the gradient on a random ragged batch is -kappa w A
    assert dict(rep.clip) == {"eps_high": 0.28, "eps_low": 0.2}
    assert rep.epsilon == 0.0
    for design in {row[0] for row in rep.kappa}:
        rows = [row for row in rep.kappa if row[0] == design]
        N = sum({row[1]: row[2] for row in rows}.values())
        for _, _, n, B, T, kappa, _ in rows:
            assert kappa == pytest.approx(_expected_kappa(mode, n, B, T, N, norm), rel=1e-12)
    if mode == "seq-mean-token-sum-norm":
        assert rep.normaliser == ("T" if norm is None else "4096")


def test_known_methods_and_sequence_level():
    assert loss_report("cispo_loss").method == "CISPO (one-sided)"
    assert dict(loss_report("cispo_loss").clip) == {"eps_high": 0.28}
    dual = loss_report("dual_clip_ppo_loss")
    assert dual.method == "dual-clip PPO" and dict(dual.clip)["dual_clip"] == 3.0
    gspo = loss_report("gspo_loss")
    assert gspo.sequence_level and gspo.method == "GSPO" and gspo.policy_gradient is None and gspo.sequence_ratio == "geometric mean"
    assert dict(gspo.clip) == {"eps_high": 0.0003, "eps_low": 0.0003}  # the clip of the sequence ratio, read on rows of one token
    assert gspo.aggregation == "seq-mean-token-mean" and gspo.on_policy_at_ratio_one
    assert not loss_report("ppo_loss", loss_agg_mode="token-mean", norm=None).sequence_level


def test_clip_constants_read_off_the_weight():
    rep = loss_report("ppo_loss", loss_agg_mode="token-mean", clip_low=0.1, clip_high=0.35)
    assert dict(rep.clip) == {"eps_high": 0.35, "eps_low": 0.1} and rep.method == "PPO"
    table = torch.tensor(rep.token.table)  # (r, w for A > 0, w for A < 0): PPO's weight at these constants
    r = table[:, 0]
    away = ((r - 1.35).abs() > 1e-6) & ((r - 0.9).abs() > 1e-6)
    assert torch.allclose(table[away, 1], torch.where(r < 1.35, r, 0.0)[away], rtol=0, atol=1e-12)
    assert torch.allclose(table[away, 2], torch.where(r > 0.9, r, 0.0)[away], rtol=0, atol=1e-12)


def test_constant_factor_and_batch_coupling_reported():
    doubled = loss_report("doubled_token_mean_loss")
    assert doubled.aggregation == "token-mean" and doubled.scale == pytest.approx(2.0, rel=1e-12) and "times 2" in doubled.reason
    coupled = loss_report("ratio_normalised_loss")
    assert coupled.token is None and coupled.method is None and not coupled.sequence_level and coupled.verdict == "undecided"
    assert [q for q, why in coupled.undecided if "depends on other rows" in why] == ["per-token weight"]
    by_advantage = loss_report("advantage_normalised_loss")
    assert by_advantage.verdict == "undecided" and by_advantage.decomposition_gap > 1e-3
    assert [q for q, why in by_advantage.undecided if "is not -kappa*w*A" in why] == ["per-token weight"]
    assert "Undecided (per-token weight)" in by_advantage.reason and "undecided: per-token weight" in str(by_advantage)
    assert loss_report("ppo_loss", loss_agg_mode="seq-mean-token-mean", norm=None).decomposition_gap <= 1e-12


@pytest.mark.parametrize("factor", [2.0, 1 + 1e-6])
def test_unbiased_needs_seq_mean_token_sum_at_scale_one(factor):
    """Issue 28 (a decision no test guarded): "unbiased" is kappa = 1/B exactly.  seq-mean-token-sum times 2, or off by
    a relative 1e-6 (above KAPPA_RTOL = 1e-9), is the mode at another scale: "scaled", with the factor reported, and
    not unbiased; the same loss at factor 1 is unbiased (test_four_aggregation_modes_certified)."""
    def times(old_log_prob, log_prob, advantages, response_mask):
        loss, _ = L.ppo_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="seq-mean-token-sum")
        return factor * loss

    rep = check_policy_loss(times)
    assert (rep.method, rep.aggregation, rep.epsilon, rep.length_biased) == ("PPO", "seq-mean-token-sum", 0.0, False)
    assert rep.scale == pytest.approx(factor, rel=1e-12) and rep.verdict == "scaled" and not rep.holds("unbiased")
    for _, _, _, B, _, kappa, _ in rep.kappa:
        assert kappa == pytest.approx(factor / B, rel=1e-12)


# ------------------------------------------------------------------ losses: the edges


def test_log_ratio_clamp_found_where_it_is():
    notes = " ".join(loss_report("clamped_ppo_loss").notes)
    assert "clamped at +20" in notes and "clamped at -20" in notes and "stops changing" in notes
    assert "clamped" not in " ".join(loss_report("ppo_loss", loss_agg_mode="token-mean", norm=None).notes)


def test_n_plus_eps_denominator():
    rep = loss_report("eps_seq_mean_loss")
    assert rep.aggregation == "seq-mean-token-mean" and rep.length_biased
    assert rep.epsilon == pytest.approx(1e-8, rel=1e-3)
    assert any(n.startswith("the denominator is n + eps with eps = 1e-08") for n in rep.notes)
    for _, _, n, B, _, kappa, _ in rep.kappa:
        assert 1 - kappa * B * n == pytest.approx(1e-8 / n, rel=1e-3)  # below 1 by eps/n, relative
    on_B = loss_report("eps_batch_mean_loss")
    assert on_B.aggregation == "seq-mean-token-sum" and on_B.epsilon == pytest.approx(1e-6, rel=1e-3) and on_B.verdict == "scaled"
    assert any(n.startswith("the denominator is B + eps with eps = 1e-06") for n in on_B.notes)
    exact = loss_report("ppo_loss", loss_agg_mode="seq-mean-token-mean", norm=None)
    assert exact.epsilon == 0.0 and not any("eps" in n for n in exact.notes)


def test_empty_row_counting():
    assert "counted in B: it shrinks" in " ".join(loss_report("all_rows_seq_mean_loss").notes)
    assert "not counted in B" in " ".join(loss_report("ppo_loss", loss_agg_mode="seq-mean-token-sum", norm=None).notes)
    assert "does not change" in " ".join(loss_report("ppo_loss", loss_agg_mode="token-mean", norm=None).notes)


def test_padding_leaks_reported():
    """The poison question (numeric.variants.questions.poison; its cases are tests/test_questions.py's) answers in the report."""
    leaky = loss_report("mask_multiply_loss").answer("poison")
    assert leaky.verdict == "leaks" and "NaN * 0 = NaN" in leaky.explanation
    selected = loss_report("ppo_loss", loss_agg_mode="token-mean", norm=None).answer("poison")  # masked by torch.where after exp:
    assert selected.verdict == "leaks" and "reaches the gradient" in selected.explanation    # the backward of exp meets the NaN

    def sanitised(old_log_prob, log_prob, advantages, response_mask):
        keep = response_mask > 0
        log_ratio = torch.where(keep, log_prob - old_log_prob, torch.zeros_like(log_prob))
        adv = torch.where(keep, advantages, torch.zeros_like(advantages))
        per_token = -torch.minimum(torch.exp(log_ratio) * adv, torch.exp(log_ratio).clamp(0.8, 1.28) * adv)
        return torch.where(keep, per_token, torch.zeros_like(per_token)).sum() / response_mask.sum()

    assert check_policy_loss(sanitised).answer("poison").verdict == "clean"
    assert "poison: leaks" in str(loss_report("mask_multiply_loss"))
    with pytest.raises(ValueError, match="question must be one of"):
        leaky_report = loss_report("mask_multiply_loss")
        leaky_report.answer("padding")


# ------------------------------------------------------------------ losses: wrong ones caught


def test_sign_slip_caught():
    rep = loss_report("sign_slip_ppo_loss")
    assert rep.verdict == "biased" and not rep.on_policy_at_ratio_one and rep.method is None and not rep.holds()


def test_missing_detach_caught():
    rep = loss_report("no_detach_cispo_loss")
    assert rep.policy_gradient is False and rep.verdict == "biased" and not rep.holds("CISPO")


def test_length_bias_claiming_token_mean_caught():
    for rep in (loss_report("length_biased_token_mean_loss"), loss_report("length_biased_token_mean_loss", loss_agg_mode="token-mean")):
        assert rep.claimed == "token-mean" and rep.aggregation == "seq-mean-token-mean" and rep.length_biased
        assert not rep.claim_holds and not rep.holds() and not rep.holds("token-mean") and not rep.holds("PPO")
        assert "claims loss_agg_mode='token-mean'" in rep.reason


def test_unmasked_loss_caught():
    rep = loss_report("unmasked_loss")
    assert rep.verdict == "biased" and "masked tokens receive gradient: the loss is not masked" in rep.notes


def test_names_map_the_function_own_arguments():
    def loss(logprobs, old_logprobs, advantages, mask, agg):
        ratio = torch.exp(logprobs - old_logprobs)
        per = torch.where(mask > 0, -ratio * advantages, torch.zeros_like(ratio))
        return per.sum() / mask.sum(), {"agg": agg}

    rep = check_policy_loss(loss, names={"log_prob": "logprobs", "old_log_prob": "old_logprobs", "response_mask": "mask"}, agg="x")
    assert (rep.method, rep.aggregation) == ("token IS", "token-mean")


def test_report_renders(html_outline):
    rep = loss_report("ppo_loss", loss_agg_mode="token-mean", norm=None)
    assert repr(rep).startswith("PolicyLossReport(verdict='scaled', method='PPO'") and "\n" not in repr(rep)
    page = rep._repr_html_()
    outline = html_outline(page)
    assert [t for t in outline.tags if t[1] == "pgi-verdict"] == [("p", "pgi-verdict")] and outline.text[0] == "scaled: PPO, token-mean, no length bias"
    assert outline.tags.count(("table", "pgi-table")) == 2 and page.count("<tr>") == len(rep.facts()) + 1 + len(rep.kappa) + 1
    assert outline.th == ["fact", "value", "design", "row", "n_i", "κ measured", "κ model"]
    assert rep.table().count("\n") == len(rep.kappa) and rep.table().header == tuple(outline.th[2:])
    for fact, value in rep.facts():  # one record, every form: the text and the HTML print the same facts
        assert f"  {fact}: {value}" in str(rep) and html.escape(value) in page


def test_policy_loss_bad_input():
    with pytest.raises(TypeError, match="fn must be a callable"):
        check_policy_loss(3)
    with pytest.raises(TypeError, match="names must map"):
        check_policy_loss(L.ppo_loss, names={"log_prob": 1})
    with pytest.raises(ValueError, match="names may map only"):
        check_policy_loss(L.ppo_loss, names={"logits": "x"})
    with pytest.raises(ValueError, match="fixed arguments log_prob"):
        check_policy_loss(L.ppo_loss, log_prob=1)
    with pytest.raises(TypeError, match="could not be called"):
        check_policy_loss(L.ppo_loss, no_such_argument=1)
    with pytest.raises(TypeError, match="scalar loss tensor"):
        check_policy_loss(lambda old_log_prob, log_prob, advantages, response_mask: log_prob)
    with pytest.raises(ValueError, match="no gradient at r = 1"):
        check_policy_loss(lambda old_log_prob, log_prob, advantages, response_mask: (log_prob * 0).sum())
    with pytest.raises(TypeError, match="dtype must be one of torch.float64"):
        check_policy_loss(L.ppo_loss, dtype=torch.int64)
    with pytest.raises(TypeError, match="dtype must be one of"):
        check_policy_loss(L.ppo_loss, dtype="float32")

    def fp64_only(old_log_prob, log_prob, advantages, response_mask):
        if log_prob.dtype != torch.float64:
            raise RuntimeError(f"expected float64, got {log_prob.dtype}")
        return -(torch.exp(log_prob - old_log_prob) * advantages * response_mask).sum()

    with pytest.raises(TypeError, match="dtype=torch.bfloat16: RuntimeError: expected float64"):
        check_policy_loss(fp64_only, dtype=torch.bfloat16)


# ------------------------------------------------------------------ advantages as written


def test_verl_style_estimators_ragged_and_shuffled():
    G = [2, 3]
    rloo = check_grouped_advantage(ADV.rloo_advantage, G=G, convention="verl")
    assert rloo.verdict == "unbiased" and [rep.scale for _, rep in rloo.reports] == [1, 1] and rloo.holds()
    dr = check_grouped_advantage(ADV.grpo_advantage, G=G, norm_adv_by_std_in_grpo=False, convention="verl")
    assert dr.verdict == "scaled" and [rep.scale for _, rep in dr.reports] == [sp.Rational(g - 1, g) for g in G]
    opo = check_grouped_advantage(ADV.opo_advantage, G=G, convention="verl")
    assert opo.verdict == "scaled" and [rep.scale for _, rep in opo.reports] == [sp.Rational(g - 1, g) for g in G]
    grpo = check_grouped_advantage(ADV.grpo_advantage, G=[3, 4], convention="verl")
    assert grpo.verdict == "reweighted" and [rep.verdict for _, rep in grpo.reports] == ["scaled", "reweighted"]
    passk = check_grouped_advantage(ADV.passk_advantage, G=G, convention="verl")
    assert passk.verdict == "reweighted"
    for g, rep in passk.reports:  # only the lone success learns: c = (1 - p)^(G - 1)
        assert sp.expand(rep.scale - (1 - P) ** (g - 1)) == 0


def test_a_finite_reward_law_and_the_flat_convention():
    values = [0.0, 0.5, 2.0]  # non-binary: R^2 terms would show a residual
    rloo = check_grouped_advantage(ADV.rloo_advantage, G=[3], convention="verl", rewards=values)
    assert rloo.verdict == "unbiased" and rloo.reports[0][1].residual == 0

    def flat_mean_baseline(scores, index):
        out = scores.clone()
        for g in np.unique(index):
            k = torch.as_tensor(index == g)
            out[k] = scores[k] - scores[k].mean()
        return out

    rep = check_grouped_advantage(flat_mean_baseline, G=[2, 4], convention="flat", rewards=values)
    assert rep.verdict == "scaled" and [r.scale for _, r in rep.reports] == [sp.Rational(1, 2), sp.Rational(3, 4)]


def test_opo_with_lengths_that_move_with_the_reward():
    rep = check_grouped_advantage(ADV.opo_advantage, G=[2], lengths="by_reward", convention="verl")
    length = lambda r: 1 + np.round(np.abs(np.asarray(r)) * 7).astype(np.int64) % 5  # the adapter's rule, restated
    independent = assert_group_advantage(lambda r: opo_advantages(np.asarray(r), length(r).astype(np.float64)), G=2, expect="reweighted")
    assert sp.simplify(rep.reports[0][1].scale - independent.reports[0][1].scale) == 0


def test_batch_coupled_and_positional_estimators_undecided():
    rpp = check_grouped_advantage(ADV.reinforce_pp_baseline_advantage, G=[2, 3], convention="verl")
    assert rpp.verdict == "undecided" and "across the batch" in rpp.reason and not rpp.holds()
    pos = check_grouped_advantage(ADV.positional_rloo_advantage, G=[4], convention="verl")
    assert pos.verdict == "undecided" and "groups by position" in pos.reason


def _trl_batch_scaled(rewards, num_generations):
    """TRL's GRPO with scale_rewards="batch" (huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8,
    trl/trainer/grpo_trainer.py:2685-2707): each reward minus its group's mean, over the std of all the batch's rewards
    plus 1e-4.  Written from that reading."""
    grouped = rewards.view(-1, num_generations)
    return (grouped - grouped.mean(1, keepdim=True)).reshape(-1) / (rewards.std() + 1e-4)


def _openrlhf_reinforce_baseline(rewards, n_samples_per_prompt):
    """OpenRLHF's reinforce_baseline (OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7,
    openrlhf/trainer/ppo_utils/experience_maker.py:267-268, then whitened across the batch at :314-326): each reward
    minus its group's mean, then minus the batch mean and over the batch's population std (variance clamped at 1e-8)."""
    grouped = rewards.reshape(-1, n_samples_per_prompt)
    centred = (grouped - grouped.mean(-1, keepdim=True)).reshape(-1)
    mean = centred.mean()
    return (centred - mean) * (centred - mean).pow(2).mean().clamp(min=1e-8).rsqrt()


def _over_the_batch_largest(rewards, num_generations):
    """A batch statistic other than a mean or a std: group-centred rewards over the batch's largest |reward|."""
    grouped = rewards.view(-1, num_generations)
    return (grouped - grouped.mean(1, keepdim=True)).reshape(-1) / rewards.abs().max()


@pytest.mark.parametrize("fn, convention", [(_trl_batch_scaled, "trl"), (_openrlhf_reinforce_baseline, "openrlhf"),
                                            (_over_the_batch_largest, "trl")])
def test_a_batch_whitening_is_seen_in_the_trl_and_openrlhf_conventions(fn, convention):
    """Issue 28 (a decision no test guarded): the batch-coupling probe must change the other groups so that a batch
    statistic changes.  With the other groups drawn binary, as the check's own, a batch's mean and std coincided for
    some G (TRL at G = 3 and 5, OpenRLHF at G = 2), the probe saw nothing, and the check crashed on the coupling
    later; binary draws never move the batch's largest reward (the groups under test hold a 2).  At every G the
    verdict is "undecided", with the reason, before any check runs."""
    for G in range(2, 9):
        rep = check_grouped_advantage(fn, G=G, convention=convention)
        assert rep.verdict == "undecided" and rep.reports == () and not rep.holds(), (G, rep.reason)
        assert "change with the other groups of the batch" in rep.reason and "batch whitening" in rep.reason
    # the per-group estimators in these conventions are still certified (test_trl_and_openrlhf_conventions)


def test_negated_estimator_is_not_a_policy_gradient():
    rep = check_grouped_advantage(ADV.negated_rloo_advantage, G=[2], convention="verl")
    assert rep.verdict == "scaled" and rep.reports[0][1].scale == -1 and not rep.holds()


def test_trl_and_openrlhf_conventions():
    trl = check_grouped_advantage(ADV.trl_grpo_advantage, G=[4], convention="trl")
    assert trl.verdict == "reweighted"
    openrlhf = check_grouped_advantage(ADV.openrlhf_rloo_advantage, G=[2, 3], convention="openrlhf")
    assert openrlhf.verdict == "unbiased"


def test_grouped_report_renders(html_outline):
    rep = check_grouped_advantage(ADV.rloo_advantage, G=[2], convention="verl")
    assert repr(rep) == "GroupedAdvantageReport(convention='verl', verdict='unbiased', G=[2])"
    assert rep._repr_html_().count("<tr>") == 2 and rep.as_dict()["groups"][0]["scale"] == "1"
    outline = html_outline(rep._repr_html_())
    assert outline.text[0] == "unbiased (verl convention)" and outline.th == ["G", "verdict", "c"]
    assert [t for t in outline.tags if t[1] == "pgi-verdict"] == [("p", "pgi-verdict")] and outline.tags.count(("details", None)) == 1
    assert rep._repr_latex_() == "$$c_{G=2} = 1$$" and str(rep.table()).splitlines()[1] == "   2  unbiased    1"


def test_grouped_advantage_bad_input():
    with pytest.raises(TypeError, match="fn must be a callable"):
        check_grouped_advantage(None, G=2)
    with pytest.raises(ValueError, match="convention must be one of"):
        check_grouped_advantage(ADV.rloo_advantage, G=2, convention="deepspeed")
    with pytest.raises(ValueError, match="G must be >= 2"):
        check_grouped_advantage(ADV.rloo_advantage, G=[1], convention="verl")
    with pytest.raises(ValueError, match="lengths must be"):
        check_grouped_advantage(ADV.rloo_advantage, G=2, lengths="long", convention="verl")
    with pytest.raises(ValueError, match="rewards must be 'binary'"):
        check_grouped_advantage(ADV.rloo_advantage, G=2, rewards="general", convention="verl")
    with pytest.raises(TypeError, match="could not be called in the 'verl' convention"):
        check_grouped_advantage(lambda scores, index: scores, G=2, convention="verl")
    with pytest.raises(ValueError, match="must return 6 advantages"):
        check_grouped_advantage(lambda r: r[:, :1], G=2, convention="batch")
    with pytest.raises(ValueError, match="vary along a response"):
        check_grouped_advantage(lambda token_level_rewards, response_mask, index: token_level_rewards, G=2, convention="verl")


# ------------------------------------------------------------------ assertions


def test_assertions():
    assert assert_policy_loss(L.ppo_loss, "PPO", loss_agg_mode="seq-mean-token-sum").verdict == "unbiased"
    with pytest.raises(AssertionError, match=r"sign_slip_ppo_loss is not a policy gradient .*: biased: .*sign slip"):
        assert_policy_loss(L.sign_slip_ppo_loss)
    with pytest.raises(AssertionError, match="is not 'token-mean'"):
        assert_policy_loss(L.length_biased_token_mean_loss, "token-mean")
    with pytest.raises(TypeError, match="expect must be None or a non-empty str"):
        assert_policy_loss(L.ppo_loss, 3)
    with pytest.raises(AssertionError, match="grpo_advantage is not 'unbiased': reweighted"):
        assert_group_advantage(ADV.grpo_advantage, "unbiased", G=[4], convention="verl")
    with pytest.raises(ValueError, match="expect must be one of"):
        assert_group_advantage(ADV.rloo_advantage, "PPO", G=2, convention="verl")


# ------------------------------------------------------------------ the field's certificate table


@pytest.fixture(scope="module")
def field_tables():
    from numeric.variants import certificate_table

    return {kind: certificate_table(kind) for kind in ("loss", "advantage")}


def methods_peers(method, trainer):
    from derivations.methods import METHODS

    return METHODS[method].peers.get(trainer, ())


def test_every_peer_name_in_the_registries_has_a_row(field_tables):
    from derivations.methods import METHODS
    from numeric.variants import ESTIMATORS

    losses = {(row[0], row[1], row[2]) for row in field_tables["loss"].rows}
    assert losses == {(t, peer.name, name) for name, m in METHODS.items() for t, peers in m.peers.items() for peer in peers}  # one row per loss_type
    assert {row[1] for row in field_tables["loss"].rows if row[2] == "ppo" and row[0] == "TRL"} == {
        *(f'loss_type "{t}"' for t in ("grpo", "bnpo", "dr_grpo", "dapo")), 'loss_type "dapo", delta'}
    for row in field_tables["loss"].rows:  # each row names the commit it was read at and the file and lines there
        peer = next(p for p in methods_peers(row[2], row[0]) if p.name == row[1])
        assert row[11] == peer.cite.commit[:7] and row[12] == peer.cite.where and ".py:" in row[12]
        assert snapshot(row[0], row[11]).commit == peer.cite.commit
    advantages = {(row[0], row[1], row[2], row[7]) for row in field_tables["advantage"].rows}
    readings = {(rd.cite.trainer, rd.their, name, f"{rd.cite.snapshot().commit[:7]} {rd.cite.where}") for name, e in ESTIMATORS.items() for rd in e.peers}
    assert advantages == readings  # one row per reading, each naming the commit and the file:lines it was read at
    assert len(field_tables["loss"].rows) == len(losses) and len(field_tables["advantage"].rows) == len(advantages)
    assert {row[0] for row in field_tables["advantage"].rows} == {"verl", "TRL", "OpenRLHF", "prime-rl", "SkyRL", "slime", "AReaL", "ms-swift"}


def test_a_loss_row_is_what_the_checker_finds_on_the_packages_loss(field_tables):
    """Each row's verdict, aggregation and identified weight, against check_policy_loss run here on numeric.policy_loss: the
    first row of each method and every row named below (the table runs the same checker on every row; one row per method
    keeps the check cheap while each method's row is recomputed)."""
    from derivations.methods import METHODS
    from numeric.variants.field import trainer_loss

    seen = {}
    named = {("TRL", 'importance_sampling_level "sequence"'), ("verl", 'policy_loss "geo_mean"'), ("verl", 'policy_loss "vanilla"')}
    methods_seen = set()
    for row in field_tables["loss"].rows:
        name = row[2]
        if METHODS[name].undecided:  # Clip-Cov, KL-Cov: the registry's reason, never a guessed verdict
            assert row[3] == "undecided" and row[8] == METHODS[name].undecided and row[5:8] == ("-", "-", "-")
            continue
        if name in methods_seen and (row[0], row[1]) not in named:
            continue
        methods_seen.add(name)
        seen[row[0], row[1]] = rep = check_policy_loss(trainer_loss(row[0], row[1]))  # the row's package call, with the trainer's aggregation
        assert row[3] == rep.verdict and row[8] == ""
        assert row[7].startswith(rep.aggregation) and ("length-biased" in row[7]) == rep.length_biased
        assert row[4] in (rep.method, "none known") and (row[4] == rep.method) == (rep.method is not None)
    assert {seen[k].verdict for k in (("TRL", 'importance_sampling_level "sequence"'), ("verl", 'policy_loss "geo_mean"'))} == {"reweighted"}
    assert seen["verl", 'policy_loss "vanilla"'].verdict == "scaled"
    rows = {(row[0], row[1]): row for row in field_tables["loss"].rows}
    assert rows["TRL", 'loss_type "grpo"'][7] == "seq-mean-token-mean (length-biased)" and rows["TRL", 'loss_type "grpo"'][3] == "reweighted"
    assert rows["TRL", 'loss_type "dr_grpo"'][7] == "seq-mean-token-sum x 0.00195312 (no length bias)"  # 1/(B L): L = max_completion_length = 512
    assert rows["verl", 'policy_loss "cispo"'][4] == "CISPO" and rows["verl", 'policy_loss "sapo"'][5] == "none"  # smooth: never exactly 0
    assert rows["verl", 'policy_loss "clip_cov"'][4] == "Clip-Cov (unselected token): PPO; Clip-Cov (selected token): Clip-Cov (selected token)"


def test_an_advantage_row_is_what_the_checker_finds_and_batch_coupling_is_undecided(field_tables):
    """Scales against closed forms (RLOO 1, group mean (G-1)/G, pass@k's (1-p)^(G-1) x margin/std), and every estimator
    that couples the batch reads undecided with the checker's reason, not a number."""
    from numeric.variants import ESTIMATORS, check_group_advantage

    rows = {row[2]: row for row in field_tables["advantage"].rows}
    assert rows["rloo"][3:5] == ("unbiased", "1")
    assert rows["group_mean"][3:5] == ("scaled", "3/4")
    for name in ("gpg", "batch_std", "reinforce_pp", "reinforce_pp_baseline", "gdpo_tokens", "gdpo_1e-4", "gdpo_1e-8", "areal_group_batch"):
        assert rows[name][3:5] == ("undecided", "-")
        with pytest.raises(ValueError, match="each row of its") as err:
            check_group_advantage(ESTIMATORS[name].advantage, G=4, rewards="binary")
        assert rows[name][5] and rows[name][5] in str(err.value)
    assert rows["remax"][3] == "undecided" and "greedy" in rows["remax"][5]
    zscore = check_group_advantage(ESTIMATORS["zscore_1e-4"].advantage, G=4, rewards="binary")
    assert rows["zscore_1e-4"][3] == zscore.verdict == "reweighted"
    shown = sp.sympify(rows["zscore_1e-4"][4])
    for q in (0.1, 0.5, 0.8):  # the cell rounds the fp64 coefficients to 6 digits
        assert float(shown.subs({s: q for s in shown.free_symbols})) == pytest.approx(float(zscore.scale.subs(P, q)), rel=1e-5)
    assert sp.simplify(sp.sympify(rows["maxrl"][4]) - (3 - 3 * sp.Symbol("p") + sp.Symbol("p") ** 2)) == 0  # sum_{k<3} (1-p)^k
    assert rows["rae"][3:5] == ("unbiased", "1") and rows["areal_loo_zscore"][3] == "reweighted"


def test_the_group_of_one_column_is_each_trainers_rule(field_tables):
    """verl's z-score gives a lone answer R/(1 + 1e-6), TRL's 0, OpenRLHF refuses it; the cell is check_singleton's verdict."""
    cells = {(row[0], row[1], row[2]): row[6] for row in field_tables["advantage"].rows}
    assert cells["verl", 'adv_estimator "grpo"', "zscore_1e-6"] == "scaled, c = 0.999999"
    assert cells["verl", 'adv_estimator "rloo"', "rloo"] == "unbiased, c = 1"
    assert cells["verl", 'adv_estimator "rloo_vectorized"', "rloo"] == "scaled, c = 0"
    assert cells["TRL", 'scale_rewards "group"', "zscore_1e-4"] == "scaled, c = 0"
    assert cells["OpenRLHF", 'advantage_estimator "group_norm"', "zscore_1e-9"] == "refused"
    assert cells["prime-rl", 'algo "rae"', "rae"] == "unbiased, c = 1"
    assert cells["SkyRL", 'advantage_estimator "maxrl"', "maxrl_1e-6"] == "unbiased, c = 1"
    assert cells["verl", 'adv_estimator "gdpo"', "gdpo_tokens"] == "-"


def test_a_method_added_to_a_registry_gets_a_row_and_an_unreadable_one_is_undecided(monkeypatch):
    """The table reads the registries when it is built: a new estimator (here one whose advantages are random, so no
    verdict can hold) and a new loss the batched policy_loss does not know both appear, as undecided with a reason."""
    from derivations import methods
    from numeric.variants import ESTIMATORS, Estimator, certificate_table, field

    gen = torch.Generator().manual_seed(0)
    noisy = lambda r: torch.as_tensor(r, dtype=torch.float64) + torch.rand(torch.as_tensor(r).shape, generator=gen, dtype=torch.float64)  # noqa: E731
    from derivations.readings import Citation
    from numeric.variants import Reading

    monkeypatch.setitem(ESTIMATORS, "noisy", Estimator("noisy", "random selection", noisy, (Reading('adv_estimator "noisy"', Citation("verl", "1dda039", "x.py:1")),)))
    cite = methods.METHODS["ppo"].peers["TRL"][0].cite
    fake = methods.Method("made_up", "made up", methods.METHODS["ppo"].loss, False, "token-mean", {}, {"TRL": (methods.Peer('loss_type "made_up"', "", cite),)})
    monkeypatch.setitem(methods.METHODS, "made_up", fake)
    monkeypatch.setattr(field, "METHODS", methods.METHODS)
    adv = {row[2]: row for row in certificate_table("advantage").rows}
    assert adv["noisy"][3] == "undecided" and adv["noisy"][5]
    loss = {row[2]: row for row in certificate_table("loss").rows}
    assert loss["made_up"][1] == 'loss_type "made_up"' and loss["made_up"][3] == "undecided"
    with pytest.raises(ValueError, match="kind"):
        certificate_table("losses")
    with pytest.raises(ValueError, match="name must be one of"):
        field.certificate("grpo")


def test_the_certificate_latex_is_the_table_cell_for_cell(field_tables):
    from numeric.variants import certificate_latex

    lines = certificate_latex("advantage").splitlines()
    assert len(lines) == len(field_tables["advantage"].rows) + 3
    assert lines[3].count("&") == len(field_tables["advantage"].header) - 1
    assert "\\text{rloo}" in "".join(lines)


# ------------------------------------------------------------------ each trainer row's call against the trainer's formula, by hand

F64 = torch.float64


def _ragged():
    """B = 6 rows of lengths 6, 1, 0, 4, 3, 5 (an all-masked row: its counting differs between the trainers), ratios in
    [e^-0.5, e^0.5] (across every clip edge at 0.2), advantages of both signs, one 0, broadcast over the row's tokens."""
    gen = torch.Generator().manual_seed(11)
    lengths = torch.tensor([6, 1, 0, 4, 3, 5])
    mask = (torch.arange(6)[None, :] < lengths[:, None]).to(F64)
    old = -torch.rand(6, 6, generator=gen, dtype=F64) * 2 - 0.2
    lp = old + torch.rand(6, 6, generator=gen, dtype=F64) - 0.5
    A = torch.tensor([1.3, -0.7, 0.9, 0.0, -1.6, 0.45], dtype=F64)
    return lp, old, A[:, None].expand(6, 6), mask


def _t(x):
    return torch.tensor(x, dtype=F64)


def _verl_agg(x, m, mode):
    """verl agg_loss with config.global_batch_info empty (the function as written)."""
    if mode == "token-mean":
        return (x * m).sum() / m.sum()
    n = m.sum(-1)
    seq, rows = (x * m).sum(-1) / (n + 1e-8), (n > 0).to(x.dtype)  # seq-mean-token-mean: n + 1e-8, empty rows excluded
    return (seq * rows).sum() / rows.sum()


def _trl_grpo(x, m):
    return ((x * m).sum(-1) / m.sum(-1).clamp(min=1.0)).mean()


def _ppo_max(A, r, low, high):
    return torch.maximum(-A * r, -A * torch.clamp(r, 1 - low, 1 + high))


def _sapo_gate(A, r, pos, neg):
    t = torch.where(A > 0, _t(pos), _t(neg))
    return -torch.sigmoid(t * (r - 1)) * 4 / t * A


def _seq_log_ratio(d, m):
    return (d * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1.0)


def _theirs(trainer, their, lp, old, A, m):
    """Each trainer's loss for ``their`` written out from reading its code at PEER_COMMITS, at TRAINER_DEFAULTS."""
    d = lp - old
    dc = d.clamp(-20.0, 20.0)
    B, N = m.shape[0], m.sum()
    if trainer == "verl":
        if their in ('policy_loss "bypass_mode", loss_type "reinforce"', 'policy_loss "gpg"'):
            return _verl_agg(-A * lp, m, "token-mean")
        if their == 'policy_loss "vanilla"':
            r = dc.exp()
            clipped = _ppo_max(A, r, 0.2, 0.2)
            return _verl_agg(torch.where(A < 0, torch.minimum(-A * 3.0, clipped), clipped), m, "token-mean")
        if their == 'policy_loss "gspo"':
            log_s = (lp - lp.detach() + _seq_log_ratio(d, m).detach()).clamp(max=10.0)
            return _verl_agg(_ppo_max(A, log_s.exp(), 0.2, 0.2), m, "seq-mean-token-mean")
        if their == 'policy_loss "cispo"':
            return _verl_agg(-torch.clamp(dc.exp(), 0.8, 1.2).detach() * A * lp, m, "token-mean")
        if their == 'policy_loss "sapo"':
            return _verl_agg(_sapo_gate(A, dc.exp(), 1.0, 1.05), m, "seq-mean-token-mean")
        if their == 'policy_loss "geo_mean"':
            sgn = torch.sign(A)
            kept = sgn * torch.minimum(sgn * d, sgn * d.clamp(-0.2, 0.2))
            n = m.sum(-1)
            ratio = torch.exp((kept * m).sum(-1) / (n + 1e-8))
            return (-(A * m).sum(-1) / (n + 1e-8) * ratio).mean()
    if trainer == "TRL":
        seq = _seq_log_ratio(d, m).exp()
        ppo = -torch.minimum(d.exp() * A, torch.clamp(d.exp(), 0.8, 1.2) * A)
        if their == 'loss_type "grpo"':
            return _trl_grpo(ppo, m)
        if their == 'loss_type "bnpo"':
            return (ppo * m).sum() / m.sum().clamp(min=1.0)
        if their == 'loss_type "dr_grpo"':
            return (ppo * m).sum() / (B * 512)
        if their == 'loss_type "dapo"':
            return (ppo * m).sum() / N
        if their == 'importance_sampling_level "sequence"':
            return _trl_grpo(-torch.minimum(seq * A, torch.clamp(seq, 0.8, 1.2) * A), m)
        if their == 'loss_type "cispo"':
            return (-torch.clamp(d.exp(), max=5.0).detach() * A * lp * m).sum() / N
        if their == 'loss_type "cispo", importance_sampling_level "sequence"':
            return (-torch.clamp(seq, max=5.0).detach() * A * lp * m).sum() / N
        if their == 'loss_type "sapo"':
            return _trl_grpo(_sapo_gate(A, d.exp(), 1.0, 1.05), m)
        if their == 'loss_type "sapo", importance_sampling_level "sequence"':
            return _trl_grpo(_sapo_gate(A, seq, 1.0, 1.05), m)
        if their == 'loss_type "vespo"':
            log_w = torch.clamp((dc * m).sum(-1, keepdim=True), np.log(1e-8), 20.0).detach()
            k = torch.where(A >= 0, _t(2.0), _t(3.0))
            lam = torch.where(A >= 0, _t(3.0), _t(2.0))
            phi = torch.exp(lam + k * log_w - lam * log_w.exp())
            return (-phi * A * lp * m).sum() / N
    if trainer == "OpenRLHF":
        if their == 'PolicyLoss, policy_loss_type "ppo"':
            r = dc.exp()
            return (-torch.minimum(r * A, r.clamp(0.8, 1.2) * A) * m).sum() / m.sum()
        if their == 'policy_loss_type "gspo"':
            ratio = _seq_log_ratio(d, m).exp() * m
            loss = -torch.minimum(ratio * A, ratio.clamp(0.8, 1.2) * A)
            n = m.sum(-1)
            seq, rows = (loss * m).sum(-1) / (n + 1e-8), (n > 0).to(F64)
            return (seq * rows).sum() / rows.sum()
    return _theirs_new(trainer, their, lp, old, A, m)


def _styled(module, name):
    """A trainer-style transcription of tests/trainer_style/ (written from the trainer at its cited commit), called as a trainer calls it."""
    return getattr({"shipped": SHIPPED, "registry": REGISTRY}[module], name)


def _sample_mean(x, m):
    """slime's and ms-swift's per-sample mean: each row's masked mean (an empty row counts as 1 token), over the B rows."""
    return ((x * m).sum(-1) / m.sum(-1).clamp(min=1.0)).mean()


def _theirs_new(trainer, their, lp, old, A, m):
    """The rows of issue 29 (verl at 1dda039; TRL, OpenRLHF; prime-rl, SkyRL, slime, AReaL, ms-swift at the commits of
    derivations.readings.SNAPSHOTS), each written out from the trainer's code at its row's file:lines."""
    d = lp - old
    N = m.sum()
    tok = lambda x: (x * m).sum() / N  # noqa: E731  (a token mean over the batch: prime-rl's, SkyRL's, AReaL's)
    ppo = lambda r, low=0.2, high=0.2: -torch.minimum(r * A, r.clamp(1 - low, 1 + high) * A)  # noqa: E731
    geo = _seq_log_ratio(d, m).exp()
    rows = {
        ("verl", 'policy_loss "bypass_mode", loss_type "ppo_clip"'):  # vanilla against the rollout log-probs: its dual clip at 3
            lambda: _verl_agg(torch.where(A < 0, torch.minimum(-A * 3.0, _ppo_max(A, d.clamp(-20, 20).exp(), 0.2, 0.2)),
                                          _ppo_max(A, d.clamp(-20, 20).exp(), 0.2, 0.2)), m, "token-mean"),
        ("verl", 'policy_loss "dppo_tv"'): lambda: _styled("registry", "verl_dppo_tv")(old, lp, A, m),
        ("verl", 'policy_loss "dppo_kl"'): lambda: _styled("registry", "verl_dppo_kl")(old, lp, A, m),
        ("verl", 'policy_loss "dro"'): lambda: _styled("registry", "verl_dro")(old, lp, A, m),
        ("TRL", 'loss_type "dapo", delta'): lambda: (-torch.minimum(torch.clamp(d.exp(), max=4.0) * A, d.exp().clamp(0.8, 1.2) * A) * m).sum() / N,
        ("TRL", 'off_policy_mask_threshold (loss_type "grpo")'): lambda: _styled("registry", "trl_opsm")(old, lp, A, m),
        ("TRL", 'loss_type "luspo"'): lambda: _styled("registry", "trl_luspo")(old, lp, A, m),
        ("TRL", "RLOOTrainer"): lambda: _styled("registry", "trl_rloo")(old, lp, A, m),
        ("OpenRLHF", 'vllm_is_correction_type "icepop"'): lambda: _styled("registry", "openrlhf_icepop")(old, lp, A, m),
        ("OpenRLHF", 'vllm_is_correction_type "seq-mask-tis"'): lambda: _styled("registry", "openrlhf_seq_mask_tis")(old, lp, A, m),
        ("prime-rl", 'loss "default"'): lambda: _styled("shipped", "prime_rl_default")(old, lp, A, m),
        ("prime-rl", 'loss "ipo"'): lambda: _styled("shipped", "prime_rl_ipo")(old, lp, A, m),
        ("SkyRL", 'policy_loss_type "regular"'): lambda: _styled("shipped", "skyrl_regular")(old, lp, A, m),
        ("SkyRL", 'policy_loss_type "dual_clip"'):
            lambda: tok(torch.where(A < 0, torch.minimum(-A * 3.0, ppo(_f32_ratio(lp, old))), ppo(_f32_ratio(lp, old)))),
        ("SkyRL", 'policy_loss_type "gspo"'):  # the straight-through ratio, its log capped at 10, token_mean
            lambda: tok(ppo((lp - lp.detach() + _seq_log_ratio(d, m).detach()).clamp(max=10.0).exp())),
        ("SkyRL", 'policy_loss_type "cispo"'): lambda: _styled("shipped", "skyrl_cispo")(old, lp, A, m),
        ("SkyRL", 'policy_loss_type "sapo"'): lambda: tok(_sapo_gate(A, d.clamp(-20, 20).exp(), 1.0, 1.05)),
        ("SkyRL", 'policy_loss_type "dppo"'): lambda: _styled("registry", "skyrl_dppo")(old, lp, A, m),
        ("SkyRL", 'policy_loss_type "importance_sampling"'): lambda: _styled("registry", "skyrl_importance_sampling")(old, lp, A, m),
        ("SkyRL", 'policy_loss_type "rollout_is"'): lambda: _styled("shipped", "skyrl_rollout_is")(old, lp, A, m),
        ("slime", 'advantage_estimator "grpo"'): lambda: _sample_mean(ppo(d.exp()), m),
        ("slime", 'advantage_estimator "gspo"'): lambda: _sample_mean(ppo(geo), m),
        ("slime", 'advantage_estimator "cispo"'): lambda: _styled("shipped", "slime_cispo")(old, lp, A, m),
        ("slime", "use_opsm"):  # a token dropped when its advantage is negative and its row's mean (old - current) exceeds 0.05
            lambda: _sample_mean(ppo(d.exp()) * (1 - ((A < 0) & (((old - lp) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)
                                                               > 0.05)).to(F64)), m),
        ("AReaL", "ppo_actor_loss_fn"): lambda: tok(ppo(torch.where(m > 0, d, 0.0).exp())),
        ("AReaL", 'importance_sampling_level "sequence"'): lambda: _styled("shipped", "areal_gspo")(old, lp, A, m),
        ("AReaL", "use_cispo_loss"): lambda: tok(-torch.clamp(d.detach().exp(), 0.0, 5.0) * A * lp),
        ("AReaL", "rejection_sampling (token, ratio, upper 5)"): lambda: _styled("shipped", "areal_decoupled_rejection")(old, lp, A, m),
        ("ms-swift", 'loss_type "grpo"'): lambda: _sample_mean(ppo(d.exp()), m),
        ("ms-swift", 'loss_type "dapo", delta'): lambda: (-torch.minimum(torch.clamp(d.exp(), max=4.0) * A, d.exp().clamp(0.8, 1.2) * A) * m).sum() / N,
        ("ms-swift", 'importance_sampling_level "sequence"'): lambda: _sample_mean(ppo(geo), m),
        ("ms-swift", 'loss_type "cispo"'): lambda: (-torch.clamp(d.exp(), max=5.0).detach() * A * lp * m).sum() / N,
        ("ms-swift", "off_policy_sequence_mask_delta"):  # a row dropped when its mean advantage is negative and its mean (old - current) > 0.05
            lambda: _sample_mean(ppo(d.exp()) * ~((A.mean(-1, keepdim=True) < 0) & (((old - lp) * m).sum(-1, keepdim=True)
                                                                                  / m.sum(-1, keepdim=True).clamp(min=1) > 0.05)), m),
    }
    return rows[trainer, their]()


def _f32_ratio(lp, old):
    """SkyRL's safe exponential (torch_utils.py:187-192): the log-ratio in float32, clamped to +-20, exponentiated, cast back."""
    return torch.exp((lp - old).float().clamp(-20, 20)).to(lp.dtype)


def _executed_rows():
    from derivations.methods import METHODS

    return [(t, p.name) for m in METHODS.values() if not m.undecided for t, peers in m.peers.items() for p in peers]


_REL = {("verl", 'policy_loss "geo_mean"'): 2e-8, **{("SkyRL", name): 1e-7 for name in (
    'policy_loss_type "regular"', 'policy_loss_type "dual_clip"', 'policy_loss_type "cispo"', 'policy_loss_type "dppo"',
    'policy_loss_type "rollout_is"')}, ("AReaL", "rejection_sampling (token, ratio, upper 5)"): 1e-7}
"""A row whose call does not reproduce the trainer to 1e-15, with the bound its note states: verl's geo_mean divides by
n_i + 1e-8 where the package divides by max(n_i, 1), a relative 1e-8/n_i; SkyRL computes its ratio in float32 (its safe
exponential), a relative 6e-8, which the package's float64 call does not; so does AReaL its behaviour weight."""

_GRADIENT_ONLY = {("OpenRLHF", 'vllm_is_correction_type "icepop"'), ("OpenRLHF", 'vllm_is_correction_type "seq-mask-tis"'),
                  ("AReaL", "rejection_sampling (token, ratio, upper 5)")}
"""Rows read on a batch's first step (the old log-probs are the current ones in value, old_log_prob plays the rollout's): the
trainer multiplies PPO's loss (value -A at ratio 1) by the weight, the package's stopped-weight loss has value -w A log pi; the
gradients are the same (the rows' notes say so), the values are not compared."""

_EMPTY_ROW_VALUE = {("TRL", "RLOOTrainer")}
"""TRL's RLOOTrainer gives an all-masked row the ratio 1 and adds its -A_i / B to the loss's value (no gradient); the package's
empty row adds nothing (its row's note): the value is compared with that term taken out."""


@pytest.mark.parametrize("trainer, their", _executed_rows(), ids=lambda x: x.replace('"', "").replace(" ", "_"))
def test_each_trainer_row_call_is_the_trainers_formula_on_a_ragged_batch(trainer, their):
    """The package call shown in the row (run as written by trainer_loss) against the trainer's own formula, aggregation
    included, on a ragged batch with an all-masked row: value and gradient to 1e-15 (relative; the one exception, verl's
    geo_mean, is stated in its row and bounded here)."""
    from numeric.variants.field import trainer_loss

    lp0, old, A, m = _ragged()
    lp = lp0.clone().requires_grad_(True)
    ours, theirs = trainer_loss(trainer, their)(old, lp, A, m), _theirs(trainer, their, lp, old, A, m)
    (g_ours,), (g_theirs,) = torch.autograd.grad(ours, lp), torch.autograd.grad(theirs, lp)
    tol = _REL.get((trainer, their), 1e-15)
    if (trainer, their) in _EMPTY_ROW_VALUE:
        empty = m.sum(-1) == 0
        theirs = theirs + A[empty, 0].sum() / m.shape[0]  # the empty row's -A / B, out
    if (trainer, their) not in _GRADIENT_ONLY:
        assert abs(ours.item() - theirs.item()) <= tol * (1 + abs(theirs.item()))
    assert (g_ours - g_theirs).abs().max().item() <= tol * (1 + g_theirs.abs().max().item())
    assert int((g_theirs != 0).sum()) >= 5  # the batch drives a gradient on several tokens


def test_the_row_calls_are_not_interchangeable():
    """The check above is not vacuous: the aggregation of the row matters on the ragged batch (grpo, bnpo, dr_grpo
    give three different numbers; verl's SAPO counts rows as verl does, TRL's as TRL does), and SAPO's temperatures matter."""
    from numeric.variants.field import trainer_loss

    lp, old, A, m = _ragged()
    values = {their: trainer_loss("TRL", their)(old, lp, A, m).item() for their in ('loss_type "grpo"', 'loss_type "bnpo"', 'loss_type "dr_grpo"', 'loss_type "dapo"')}
    assert len({round(v, 12) for v in values.values()}) == 3  # dapo's num_items_in_batch is this batch's tokens here: bnpo's number
    assert values['loss_type "dapo"'] == values['loss_type "bnpo"']
    verl, trl = trainer_loss("verl", 'policy_loss "sapo"')(old, lp, A, m).item(), trainer_loss("TRL", 'loss_type "sapo"')(old, lp, A, m).item()
    assert abs(verl - trl) > 1e-3  # the empty row: excluded by verl, counted by TRL
    assert abs(trl - _trl_grpo(_sapo_gate(A, (lp - old).exp(), 1.05, 1.0), m).item()) > 1e-4  # the temperatures swapped


def test_trainer_loss_refuses_what_is_not_a_row():
    from numeric.variants.field import trainer_loss

    with pytest.raises(ValueError, match="trainer must be one of"):
        trainer_loss("DeepSpeed", 'loss_type "grpo"')
    with pytest.raises(ValueError, match=r"their must be one of the names TRL gives a method .*loss_type \"dr_grpo\""):
        trainer_loss("TRL", 'loss_type "grpoo"')


def test_the_sapo_rows_name_sapo_and_the_checker_reads_other_temperatures():
    """Issue 18: the checker given the package's SAPO (per-sign temperatures) names SAPO, in both certificate rows;
    a SAPO with other temperatures is named too (they are read off the weight), and a sigmoid gate that is not SAPO's is not."""
    from numeric import policy_loss
    from numeric.variants import certificate_table

    rows = {(row[0], row[1]): row for row in certificate_table("loss").rows}
    assert rows["verl", 'policy_loss "sapo"'][4] == rows["TRL", 'loss_type "sapo"'][4] == "SAPO"
    assert rows["verl", 'policy_loss "sapo"'][7].startswith("seq-mean-token-mean") and "count_eps=1e-8" in rows["verl", 'policy_loss "sapo"'][9]

    def other(old_log_prob, log_prob, advantages, response_mask):
        return policy_loss("sapo", log_prob, old_log_prob, advantages, response_mask, sapo_tau=(2.5, 0.4))

    def not_sapo(old_log_prob, log_prob, advantages, response_mask):  # 4 sigma (1 - sigma) r's gate, but with r^2 inside
        r = torch.exp(log_prob - old_log_prob)
        return -(torch.sigmoid(r**2 - 1) * 4 * advantages * response_mask).sum() / response_mask.sum()

    rep = check_policy_loss(other)
    assert rep.method == "SAPO" and "constants read off the weight: tau_+ = 2.5, tau_- = 0.4" in rep.reason
    assert check_policy_loss(not_sapo).method is None


def test_trainer_loss_evaluates_only_arithmetic_of_names(monkeypatch):
    """A peer call's keywords are numbers, the trainer's names, tuples and + - * / of them; a call on the batch (Clip-Cov's
    selection), an unknown name, or a call of something else than policy_loss is refused by name, before any batch."""
    from derivations import methods
    from numeric.variants import field

    with pytest.raises(ValueError, match="a selection computed from the batch is not evaluated"):
        field.trainer_loss("verl", 'policy_loss "clip_cov"')
    for call, message in (('policy_loss("ppo_fake", ..., eps_low=epsilonn)', "name 'epsilonn' is no configuration field"),
                          ('__import__("os")', "a peer call must read policy_loss"), ("policy_loss(", "a peer call must read policy_loss")):
        cite = methods.METHODS["ppo"].peers["TRL"][0].cite
        fake = methods.Method("ppo_fake", "fake", methods.METHODS["ppo"].loss, False, "token-mean", {}, {"TRL": (methods.Peer("fake", call, cite),)})
        monkeypatch.setitem(methods.METHODS, "ppo_fake", fake)
        with pytest.raises(ValueError, match=message):
            field.trainer_loss("TRL", "fake")


def test_readings_refuse_an_unknown_trainer_or_commit():
    from derivations.readings import SNAPSHOTS, Citation, snapshot

    assert {s.trainer for s in SNAPSHOTS} == {"verl", "TRL", "OpenRLHF", "prime-rl", "SkyRL", "slime", "AReaL", "ms-swift"}
    assert all(len(s.commit) == 40 for s in SNAPSHOTS)
    assert snapshot("verl", "b178a3c").repo == "volcengine/verl" and snapshot("verl").repo == "verl-project/verl"
    with pytest.raises(ValueError, match="trainer must be one of"):
        snapshot("trlx")
    with pytest.raises(TypeError, match="trainer must be a str"):
        snapshot(3)
    with pytest.raises(ValueError, match="commit must start one of verl's read commits"):
        Citation("verl", "b178a3", "x.py:1").snapshot()  # six characters name no commit: seven at least
    with pytest.raises(TypeError, match="commit must be a str"):
        snapshot("verl", 1)


def test_the_assertion_asks_the_trainers_questions_and_names_bad_expectations():
    """assert_policy_loss(mask_consistent=..., poison=..., ...): each question's verdict, and a clear error for a verdict that is none."""
    rep = assert_policy_loss(L.ppo_loss, loss_agg_mode="token-mean", mask_consistent=True, weighting="per token")
    assert rep.answer("mask_consistent").verdict == "consistent"
    with pytest.raises(AssertionError, match="answers poison: leaks, not 'clean'"):
        assert_policy_loss(L.mask_multiply_loss, poison="clean")
    with pytest.raises(AssertionError, match="answers mask_consistent: consistent, not 'inconsistent'"):
        assert_policy_loss(L.ppo_loss, mask_consistent=False)
    with pytest.raises(ValueError, match="weighting must be None or one of 'per token'"):
        assert_policy_loss(L.ppo_loss, weighting="per-token")
    with pytest.raises(TypeError, match="mask_consistent must be None or a bool"):
        assert_policy_loss(L.ppo_loss, mask_consistent="yes")


def test_the_execution_is_a_field_of_the_loss_report():
    """check_policy_loss(execution=...) fills report.execution: the facts, the JSON and the assertion read it."""
    rep = check_policy_loss(L.ppo_loss, loss_agg_mode="token-mean", execution={"world_sizes": (1, 2), "micro_batches": (1, 2),
                                                                                "engine": "simulate"})
    assert rep.execution is not None and dict(rep.facts())["execution"] == rep.execution.headline()
    assert rep.as_dict()["execution"]["verdict"] == rep.execution.as_dict()["verdict"]
    with pytest.raises(TypeError, match="execution must be None, a bool or a dict"):
        check_policy_loss(L.ppo_loss, execution="simulate")
