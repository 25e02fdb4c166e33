r"""Mutation testing on demand: does the test suite notice a plausible mistake?

Each mutant is one textual replacement in one source file — a sign, a factor
:math:`(G-1)/G`, a clip bound, a missing detach, a bootstrap flag, a region's sign,
a bound's constant, :math:`R` where :math:`R^2` belongs.  For each, the script copies
the repository to a temporary folder (the working tree is never touched), applies
the replacement, runs only the tests relevant to that file, and records whether
they fail (*killed*) or pass (*survived*).  A mutant whose text is no longer in the
file is reported *stale* (the code moved on; update the mutant).

Not collected by pytest and not part of CI (it takes minutes)::

    python tests/mutants/run.py              # all mutants
    python tests/mutants/run.py --list       # list them
    python tests/mutants/run.py ppo_detach rloo_factor   # some of them

The exit status is 0 when every applicable mutant is killed.  ``--why`` names the
test or check that killed each one.

Last measured as a whole (2026-12-01, commit a9f5ba9, 84 mutants, about 45 minutes on 2 shared
cores, paused once): 84/84 killed (``kl_rejection_mean_as_sum`` timed out while the run was paused
and was re-run alone: killed in 11 s).  Added after that commit and run alone: ``underflow_read_as_silenced``
and ``checker_names_only_the_first_form``, both killed; the eight mutants of the cases, equal-integrands
and independence rules (``cases_any_value_set`` ... ``count_sum_infinite``), 2026-12-02, all killed
(each by a false step that verifies under the mutant); the checker's numeric route at scale
(``float_verdict_tolerance_loose``, ``float_residual_degree_two_only``), 2026-12-02, both killed.
After the day's speed work, run in batches on main: the 40 mutants of the files it touched (tinylm,
group baselines, trust region, losses, the registry, the checker's verdicts; commit 386291f) and the 27
mutants of the proof kernel, regions, derivation, definitions and group algebra (commit 907e8e9): all killed.
2026-12-02, branch speed5-r (e4d8b79): the 27 mutants of the kernel, regions, derivation, definitions and group
algebra, and the 7 of the canonicalisers (four of them new: the sums left to SymPy's closed forms), all killed.
The checker's speed work of 2026-12-02 (exact_number, the engine's groups, the token regions): the
eleven variants and engine mutants, ``exact_number_fallback_sign`` and ``sorted_groups_values_reversed`` new: all killed.
The whole script in one go, 2026-12-02, commit 6f9636c (the refutation after ``expand``, the log-pmf as a
product): 107/107 killed in 13 minutes at nice 19.  Again on commit bd7527d (the fifth speed round: the
interpolation step's exactness asked of ``expand``, an fp64 table's coefficients compared first, a third,
small refuting point): 107/107 killed in about 23 minutes at nice 19 beside other work; its five new mutants
(``interpolation_always_to_tolerance``, ``interpolation_always_exact``, ``tolerance_not_a_polynomial_raises``,
``table_canonicalisers_before_floats``, ``small_point_not_small``) run alone: 5/5 killed.
Branch looseends (issues 28 and 29): the eleven new mutants (the selection rules
``kl_cov_count_rounded``, ``kl_cov_count_may_be_zero``, ``clip_cov_band_closed``, ``clip_cov_count_may_be_zero``;
``unbiased_scale_not_compared``, ``coupling_probe_like_the_check``, ``coupling_probe_binary``,
``pointwise_badge_dropped``, ``regions_inner_badge_dropped``, ``checker_match_probe_only``,
``checker_refuses_registry_constants``) run with the 24 others of the files the branch touched (the kernel, now
split into kernel, claims and premises; the registry; the checker's token module): 35/35 killed in 2.3 minutes.
The fifteen mutants of the trainers' questions (``mask_probe_row_against_itself`` ... ``kl_form_abs_once_tv``),
2026-12-05, branch questions (commit 03ca16b), run alone: 15/15 killed in 75 s.
The execution check's four (issue 28: ``execution_tolerance_loosened``, ``execution_padding_split_skipped``,
``execution_sum_reduction_averaged``, ``execution_values_probe_ignored``), run alone on branch execution: 4/4 killed.
Branch estimators (issue 29 item 2): its 22 mutants (a lone answer's rule, the registry's epsilons and rules, MaxRL's guard
and epsilon, GDPO's batch steps, verl's count eps, AReaL's levels, the length penalty, rae's order, OpenRLHF's shaping,
the KL in the reward and its controller, OPD's and RLSD's signs, check_singleton's verdict, OTB's default), run alone:
22/22 killed in about 2.5 minutes (``overlong_excess_unclipped`` survived a first run, whose lengths never passed
max_new_tokens; the transcription now has one that does).
Branch corrections (issue 29, the trainers' rejection rules): the 31 new mutants of ``numeric/off_policy/rollout.py``,
``masks.py``, ``corrections.py`` and ``derivations/corrections.py`` (``verl_k1_sign`` ... ``k3_summand_sign``), 29/31
killed at first in 4.4 minutes at nice 19; the two survivors (``verl_sequence_clamp_per_token``, ``bypass_dual_clip_side``)
were killed by two new tests; and the eleven older mutants of ``weights.py``, whose helper names moved: 11/11 killed.
Branch registry (issue 29, policy losses and aggregation): the 25 new mutants of its decisions (``dppo_mask_direction`` ...
``checker_product_as_gspo``) and the 12 whose code moved to ``derivations/token_losses.py`` and
``numeric/losses/policy_terms.py``: 32/37 killed on the first run; the five survivors (``dppo_symbolic_mask_strict``,
``icepop_band_open``, ``icepop_symbolic_band_open``, ``rollout_is_band_closed``, ``m2po_drops_all``) were killed after the
edge tests of ``tests/test_mutant_gaps.py`` (the bands' and DPPO's edges hit exactly, M2PO's kept token): 37/37.
The whole script in one go after every branch of issues 28-32 was merged, 2026-12-05, commit c89f2c4: 228/229 killed
in about 16 minutes at nice 19.  The survivor, ``exact_route_absolute_tolerance``, had been killed on its branch; once
a reduction that does not verify falls back to the numeric route, the tiny-eps test got the right verdict either way.
The test now asserts that the exact route answered: killed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


def suites(*names: str) -> str:
    """The topic suites of the report (``python -m numeric NAME ...``)."""
    return "suite:" + ",".join(names)


def _topic(name: str, *extra: str) -> tuple[str, ...]:
    return (f"tests/test_{name}.py", suites(name), f"numeric/{name}.py", *extra)


def _losses(module: str) -> tuple[str, ...]:
    """The losses tests, suite and the doctests of one module of the package ``numeric/losses/``."""
    return ("tests/test_losses.py", suites("losses"), f"numeric/losses/{module}.py")


_KERNEL = ("tests/test_kernel.py",)
_CANONICAL = ("tests/test_canonical.py",)
# the registry's formulas feed the derived weights (gradient weights) and the torch forms (losses)
_REGISTRY = ("tests/test_gradient_weights.py", "tests/test_losses.py", suites("gradient_weights", "losses"),
             "derivations/methods.py", "derivations/token_losses.py", "derivations/gradient_weights.py")
# the torch forms: the losses' own tests, and the gradient-weights checks that read policy_loss
_LOSS_FORMS = (*_losses("policy"), "numeric/losses/policy_terms.py", "tests/test_gradient_weights.py", suites("gradient_weights"))
# issue 29: the registry's new methods (their torch forms, formulas and trainer rows), the readings, the checker's naming
_ISSUE29 = ("tests/test_losses.py", "tests/test_registry_methods.py", "tests/test_mutant_gaps.py",
            "tests/test_trainer_code.py::test_each_trainer_row_call_is_the_trainers_formula_on_a_ragged_batch")
_READINGS = ("tests/test_losses.py::test_every_trainer_mode_is_reproduced_by_arguments", "tests/test_registry_methods.py",
             "numeric/losses/aggregation.py")
_OFF_POLICY = ("tests/test_off_policy.py", "numeric/off_policy/weights.py")
_ESTIMATORS = ("tests/test_estimators.py", "numeric/losses/group_advantages.py", "numeric/losses/shaping.py")
# the trainers' rejection rules (issue 29): their transcription tests, the off_policy suite, the module's doctests
_RULES = ("tests/test_corrections.py", suites("off_policy"))
# the two tests that pin these edges (the variant suite as a whole takes minutes)
# the finite-law checks whose interpolation step is exact in one case and to a tolerance in others
_NUMERIC_ROUTE = ("tests/test_variants.py::test_the_numeric_route_gives_the_symbolic_verdict_where_both_run",)
# the trainers' questions: their tests, the module's and the penalties' doctests, the derivation's
_QUESTIONS = ("tests/test_questions.py", "numeric/variants/questions.py", "numeric/variants/divergence_questions.py", "numeric/variants/answers.py",
              "numeric/losses/penalties.py", "derivations/trust_region.py")
_VARIANTS = ("tests/test_variants.py::test_the_verdict_tolerance_is_1e12_not_looser",
             "tests/test_variants.py::test_binary_constancy_compares_every_coefficient_including_p_to_the_first",
             "derivations/variants/reports.py", "derivations/variants/patterns.py")

_UNSEEN = ("tests/test_unseen_variants.py",)
_SHIPPED = ("tests/test_shipped_losses.py",)

MUTANTS = [
    # -- the check registry and the toy LM
    Mutant("check_signed", "numeric/checks.py", "abs(self.value) <= self.tol", "self.value <= self.tol",
           ("tests/test_checks.py",), "a signed difference of -5 passes a check"),
    Mutant("theta_nan_accepted", "numeric/tinylm.py", "    if not bool(torch.isfinite(theta.detach()).all()):\n        raise",
           "    if False:\n        raise", ("tests/test_tinylm.py", "tests/test_validation.py"), "NaN theta returns NaN silently"),
    Mutant("score_sign", "numeric/tinylm.py", "one_hot(lm.tokens, lm.V).to(probs.dtype) - probs[lm.prefix_rows]",
           "one_hot(lm.tokens, lm.V).to(probs.dtype) + probs[lm.prefix_rows]", ("tests/test_tinylm.py", "numeric/tinylm.py"), "score = onehot + pi"),
    Mutant("score_sqnorm_factor", "numeric/expectations.py", "1.0 - 2.0 * own", "1.0 - own",
           ("tests/test_expectations.py",), "||s_t||^2 without the cross term's factor 2"),
    Mutant("score_sum_mass", "numeric/expectations.py", "onehot_part - mass[:, None] * pi", "onehot_part - pi",
           ("tests/test_expectations.py", suites("score_function")), "E[w s] without the prefix's mass"),
    Mutant("iid_probs_unchecked", "derivations/iid_groups.py", "        if not (gap == 0 or gap.is_number", "        if False and not (gap == 0 or gap.is_number",
           ("tests/test_group_baselines.py", "tests/test_validation.py"), "IIDGroup accepts probabilities summing to 1.1"),
    Mutant("theta_fp32_kept", "numeric/tinylm.py", 'return theta.to(device="cpu", dtype=torch.float64)', "return theta",
           ("tests/test_tinylm.py", "tests/test_validation.py"), "fp32 theta computed in fp32 (finite differences 11 % off)"),
    Mutant("default_reward_count", "numeric/tinylm.py", "* lm.mask).amax(1)", "* lm.mask).sum(1)",
           ("tests/test_tinylm.py", "numeric/tinylm.py"), "the binary reward becomes a count"),
    # -- score function
    Mutant("fd_step", "numeric/score_function.py", "/ (2 * h)", "/ (2.000001 * h)",
           _topic("score_function"), "central difference with a wrong denominator (relative 5e-7)"),
    # -- baselines
    Mutant("A0_uses_R", "numeric/baselines.py", "rewards ** (2 - k)", "rewards ** min(1, 2 - k)",
           _topic("baselines"), "A_0 = E[R ||s||^2] instead of E[R^2 ||s||^2] (R where R^2 belongs)"),
    Mutant("b_star_A0", "derivations/baselines.py", "d.then(sums[A1] / sums[A2]", "d.then(sums[A0] / sums[A2]",
           _topic("baselines"), "b* = A_0/A_2 instead of A_1/A_2 (hidden by a binary reward)"),
    Mutant("reinforce_rows", "numeric/baselines.py", 'advantages, mask, agg="seq-mean-token-sum")', 'advantages, mask, agg="token-mean")',
           _topic("baselines"), "token-level REINFORCE loss averaged over tokens, not rows (the stop-gradient: ppo_detach)"),
    Mutant("reinforce_mask", "numeric/baselines.py", 'advantages, mask, agg="seq-mean-token-sum")', 'advantages, np.ones(np.shape(mask)), agg="seq-mean-token-sum")',
           _topic("baselines"), "token-level REINFORCE loss ignores the mask (padding sentinels leak)"),
    Mutant("per_sample_mean", "numeric/baselines.py", "return total / len(samples)", "return total / (len(samples) - 1)",
           _topic("baselines"), "per-sample REINFORCE loop averages with n - 1"),
    Mutant("grad_sq_norm", "numeric/baselines.py", 'grad_sq = float(g @ g)', 'grad_sq = float(g.abs().sum())',
           _topic("baselines"), "||grad J||^2 computed as an L1 norm"),
    Mutant("reach_probability", "numeric/baselines.py", "weights = (p[:, None] * lm.mask).reshape(-1)", "weights = lm.mask.reshape(-1)",
           _topic("baselines"), "action-dependent bias without Pr(h)"),
    # -- group baselines
    Mutant("loo_factor", "numeric/group_baselines.py", "((r.sum(-1, keepdim=True) - r) / (G - 1))", "((r.sum(-1, keepdim=True) - r) / G)",
           _topic("group_baselines"), "leave-one-out mean divided by G"),
    Mutant("rloo_factor", "numeric/group_baselines.py", "(G / (G - 1) * centred_rewards(r))", "(centred_rewards(r))",
           _topic("group_baselines"), "RLOO without the factor G/(G-1), i.e. (G-1)/G too small"),
    Mutant("bessel_ddof", "numeric/group_baselines.py", '_DDOF = {"population": 0, "bessel": 1}', '_DDOF = {"population": 0, "bessel": 0}',
           _topic("group_baselines"), "Bessel std computed as population std"),
    Mutant("multinomial", "numeric/group_baselines.py", "torch.lgamma(n + 1) - log_factorial[counts]", "torch.lgamma(n + 2) - log_factorial[counts]",
           _topic("group_baselines"), "multinomial coefficient off by a factor n+1"),
    Mutant("others_weights_keep_dropped_rows", "numeric/group_baselines.py", "torch.where(has, _multinomial_pmf(others, probs, int(G) - 1), 0.0)",
           "_multinomial_pmf(others, probs, int(G) - 1)", _topic("group_baselines"),
           "a group without value j still weighs the others' counts c - e_j (a count of -1)"),
    Mutant("count_vectors_reversed_first", "numeric/group_baselines.py", "for first in range(total + 1)])", "for first in reversed(range(total + 1))])",
           _topic("group_baselines"), "count vectors in another order than the checker's count patterns"),
    Mutant("grpo_bernstein", "numeric/group_baselines.py", "(1 - arr[..., None]) ** (G - 1 - k)", "(1 - arr[..., None]) ** (G - k)",
           _topic("group_baselines"), "GRPO weight with the wrong Bernstein power"),
    Mutant("mean_self_unbiased", "derivations/group_baselines.py", "        (G - 1) / G * GRAD_J,", "        GRAD_J,",
           ("tests/test_group_baselines.py", "derivations/group_baselines.py"), "claim: mean including self is unbiased (a factor (G-1)/G)"),
    # -- returns
    Mutant("series_unchecked", "numeric/returns.py", "return require_finite(name, t).to(compute_dtype(t.dtype)), kind", "return t.to(compute_dtype(t.dtype)), kind",
           ("tests/test_validation.py",), "returns helpers accept NaN rewards silently"),
    Mutant("gae_bootstrap_flag", "numeric/returns.py", "gamma * (1 - d) * nv - v", "gamma * (1 - c) * nv - v",
           _topic("returns"), "GAE bootstraps on trace_cut instead of terminated"),
    Mutant("gae_trace_flag", "numeric/returns.py", "_backward_scan(deltas, gamma * lam * (1 - c))", "_backward_scan(deltas, gamma * lam * (1 - d))",
           _topic("returns"), "GAE recursion cut by terminated instead of trace_cut"),
    Mutant("discount_dropped", "numeric/returns.py", "(powers * g)", "(g)",
           _topic("returns"), "discounted score weights without gamma^t"),
    # -- gradient weights
    Mutant("clip_bound", "numeric/gradient_weights.py", "torch.clamp(r, min=1 - low, max=1 + high)", "torch.clamp(r, min=1 - low, max=1 + low)",
           _topic("gradient_weights"), "PPO upper clip at 1 + eps_low"),
    Mutant("ppo_detach", "numeric/losses/policy_terms.py", "    neg_A = -A.detach()\n", "    neg_A = -A\n",
           _LOSS_FORMS, "PPO loss without the stop-gradient on the advantage"),
    Mutant("cispo_weight_detach", "numeric/losses/policy_terms.py", "        r = delta.detach().exp()\n", "        r = delta.exp()\n",
           _LOSS_FORMS, "CISPO weight not stopped (gradient through clip(r))"),
    Mutant("cispo_eps_low", "derivations/token_losses.py", "weight = sp.Min(r, 1 + eps_h) if eps_low is None", "weight = sp.Min(r, 1 + eps_l) if eps_low is None",
           _REGISTRY, "derived CISPO cap at 1 + eps_low"),
    Mutant("ppo_max", "derivations/token_losses.py", "    loss = -sp.Min(r * A, clip(r) * A)", "    loss = -sp.Max(r * A, clip(r) * A)",
           _REGISTRY, "derived PPO takes the optimistic term: every region's sign flips"),
    Mutant("clip_low_sign", "derivations/token_losses.py", "def clip(x, low=1 - eps_l,", "def clip(x, low=1 + eps_l,",
           _REGISTRY, "derived lower clip at 1 + eps_low"),
    # -- trust region
    Mutant("k3_sign", "derivations/trust_region.py", "k3 = sp.exp(-delta) - 1 + delta", "k3 = sp.exp(delta) - 1 - delta",
           _topic("trust_region"), "k3 with the ratio inverted"),
    Mutant("tv_constant", "numeric/trust_region.py", "    termwise = (pi - C * mu).clamp(min=0).sum(-1)\n    tv = 0.5 *", "    termwise = (pi - C * mu).clamp(min=0).sum(-1)\n    tv = 0.25 *",
           _topic("trust_region"), "TV computed with half its constant"),
    Mutant("cispo_bias_reweight", "numeric/trust_region.py", "(s.q / p)[:, None]", "(p / s.q)[:, None]",
           _topic("trust_region"), "importance weight inverted in the CISPO bias"),
    Mutant("cispo_bound_no_sqrt", "numeric/trust_region.py", "token_score_sqnorms(lm, th).sqrt()", "token_score_sqnorms(lm, th)",
           _topic("trust_region"), "CISPO bias bound with ||s||^2 in place of ||s||"),
    Mutant("tv_bound_constant", "derivations/trust_region.py", "d.then(S(sp.Abs(pi[a] - mu[a])) / 2,", "d.then(S(sp.Abs(pi[a] - mu[a])) / 4,",
           ("tests/test_trust_region.py", "derivations/trust_region.py", "tests/test_derivation.py"), "displayed TV bound halved (needs steps verified against their display)"),
    # -- losses
    Mutant("loss_witness_no_advantage", "numeric/losses/policy.py", "    witness = A.detach().sum() + (0 if delta is None else delta.detach().sum())",
           "    witness = 0 if delta is None else delta.detach().sum()", _losses("policy"), "a NaN advantage of an empty row leaks NaN into GSPO's gradient"),
    Mutant("loss_witness_no_delta", "numeric/losses/policy.py", "    witness = A.detach().sum() + (0 if delta is None else delta.detach().sum())",
           "    witness = A.detach().sum()", _losses("policy"), "an infinite log-ratio clipped away by PPO goes unreported"),
    Mutant("loss_mask_test_no_abs", "numeric/losses/policy.py", "torch.addcmul(numbers, numbers, numbers, value=-1).abs().sum()",
           "torch.addcmul(numbers, numbers, numbers, value=-1).sum()", _losses("policy"), "a mask of 2 and eight 0.5s passes the 0/1 test"),
    Mutant("loss_mask_test_rounded", "numeric/losses/policy.py", "    numbers = m if m.is_floating_point() else m.to(like_t.dtype)",
           "    numbers = m.to(like_t.dtype)", _losses("policy"), "a float64 mask entry 1 + 1e-10 passes after rounding to float32"),
    Mutant("loss_padding_read", "numeric/losses/policy.py", '    zero_outside = keep.is_floating_point() and method in _PRODUCTS',
           '    zero_outside = method in _PRODUCTS', _losses("policy"), "the careful path sums padding it never zeroed"),
    Mutant("loss_empty_row_read", "numeric/losses/aggregation.py", "        live = torch.where(n > 0, x, 0)", "        live = x",
           _losses("aggregation"), "an empty row's sequence loss is read"),
    Mutant("sapo_tau_swapped", "numeric/losses/policy_terms.py", "tau = torch.where(neg_A < 0,", "tau = torch.where(neg_A > 0,",
           _losses("policy"), "SAPO's tau+ used for negative advantages"),
    Mutant("gspo_token_not_straight_through", "numeric/losses/policy_terms.py", "log_s = log_s.detach() + (delta - delta.detach())",
           "log_s = log_s + (delta - delta.detach())", _losses("policy"), "GSPO-token's gradient adds the sequence ratio's"),
    Mutant("dual_clip_side", "numeric/losses/policy_terms.py", "beyond = (neg_A > 0) & (r > dual_clip)", "beyond = (neg_A < 0) & (r > dual_clip)",
           _losses("policy"), "dual clip applied to positive advantages"),
    # -- the registry's torch forms: the clip's edges (closed live sets, as derived; issue 16)
    Mutant("registry_clip_high_edge", "numeric/losses/policy_terms.py", "live = torch.where(positive, r <= 1 + high, r >= 1 - low)",
           "live = torch.where(positive, r < 1 + high, r >= 1 - low)", (*_losses("policy"), "tests/test_mutant_gaps.py"), "PPO's torch form drops the gradient of A > 0 at r = 1 + eps_high exactly"),
    Mutant("registry_clip_low_edge", "numeric/losses/policy_terms.py", "live = torch.where(positive, r <= 1 + high, r >= 1 - low)",
           "live = torch.where(positive, r <= 1 + high, r > 1 - low)", (*_losses("policy"), "tests/test_mutant_gaps.py"), "PPO's torch form drops the gradient of A < 0 at r = 1 - eps_low exactly"),
    # -- sampler-correction weights: every masking band's inclusive edge (issue 16)
    Mutant("token_mask_low_strict", "numeric/off_policy/weights.py", "on_mask(m & (r >= low) &", "on_mask(m & (r > low) &",
           _OFF_POLICY, "masked_token_ratio drops a ratio exactly at low"),
    Mutant("token_mask_high_strict", "numeric/off_policy/weights.py", "(r <= high), r))", "(r < high), r))",
           _OFF_POLICY, "masked_token_ratio (IcePop) drops a ratio exactly at high"),
    Mutant("sequence_mask_low_strict", "numeric/off_policy/weights.py", "torch.where((r >= low) &", "torch.where((r > low) &",
           _OFF_POLICY, "masked_sequence_ratio drops a sequence ratio exactly at low"),
    Mutant("sequence_mask_high_strict", "numeric/off_policy/weights.py", "(r <= high), r, torch.zeros_like(r))", "(r < high), r, torch.zeros_like(r))",
           _OFF_POLICY, "masked_sequence_ratio drops a sequence ratio exactly at high"),
    Mutant("geometric_mask_low_strict", "numeric/off_policy/weights.py", "keep = ((g >= low) &", "keep = ((g > low) &",
           _OFF_POLICY, "geometric_sequence_mask drops a geometric mean exactly at low"),
    Mutant("geometric_mask_high_strict", "numeric/off_policy/weights.py", "(g <= high)).to(d.dtype)", "(g < high)).to(d.dtype)",
           _OFF_POLICY, "geometric_sequence_mask drops a geometric mean exactly at high"),
    Mutant("kl_rejection_strict", "numeric/off_policy/weights.py", "(stat <= threshold)", "(stat < threshold)",
           _OFF_POLICY, "kl_rejection_mask drops a sequence statistic exactly at threshold (threshold=0 rejects pi = mu)"),
    Mutant("kl_rejection_token_strict", "numeric/off_policy/weights.py", "(per_token <= threshold)", "(per_token < threshold)",
           _OFF_POLICY, "kl_rejection_mask(level='token') drops a token exactly at threshold"),
    Mutant("kl_rejection_mean_as_sum", "numeric/off_policy/weights.py", "stat = per_token.sum(-1, keepdim=True) / m.sum(", "stat = per_token.sum(-1, keepdim=True) * 1 / m.any(",
           _OFF_POLICY, "seq_mean divides by the number of kept tokens, not by 1"),
    Mutant("sequence_floor_ignored", "numeric/off_policy/weights.py", "d.sum(-1, keepdim=True).exp().clamp(min=floor, max=cap)", "d.sum(-1, keepdim=True).exp().clamp(max=cap)",
           _OFF_POLICY, "truncated_sequence_ratio's floor raises the small sequence ratios"),
    Mutant("batch_norm_token_mean_over_rows", "numeric/off_policy/weights.py", "mean = w.sum((-2, -1), keepdim=True) / n.sum(-2, keepdim=True).clamp(min=1)",
           "mean = w.sum((-2, -1), keepdim=True) / n.shape[-2]", _OFF_POLICY, "token-level batch normalisation averages over tokens, not rows"),
    # -- the trainers' rejection and masking rules (issue 29): a sign, a side, an edge, product vs geometric, max vs mean
    Mutant("verl_k1_sign", "numeric/off_policy/rollout.py", 'per_token = {"k1": -lam,', 'per_token = {"k1": lam,',
           (*_RULES, "numeric/off_policy/rollout.py"), "verl's k1 read as +log rho (AReaL's sign): its band bounds rho, not 1/rho"),
    Mutant("verl_k1_band_edge", "numeric/off_policy/rollout.py", "kept = (stat >= math.log(lower)) &", "kept = (stat > math.log(lower)) &",
           _RULES, "verl's k1 band drops a statistic exactly at log(lower)"),
    Mutant("verl_threshold_side", "numeric/off_policy/rollout.py", "kept = stat <= upper", "kept = stat >= upper",
           (*_RULES, "numeric/off_policy/rollout.py"), "verl's k2/k3 criteria keep the tokens above the threshold"),
    Mutant("verl_seq_max_as_mean", "numeric/off_policy/rollout.py", "top = torch.where(m, stat, -torch.inf).amax(-1, keepdim=True)",
           "top = stat.sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)", _RULES, "seq_max reduces by the mean, not the maximum"),
    Mutant("verl_seq_mean_as_sum", "numeric/off_policy/rollout.py", "/ (m.sum(-1, keepdim=True).to(stat.dtype) + 1e-8)", "/ 1.0",
           _RULES, "seq_mean sums the statistic"),
    Mutant("verl_chain_or", "numeric/off_policy/rollout.py", "keep = keep & kept.expand(m.shape)", "keep = kept.expand(m.shape)",
           (*_RULES, "numeric/off_policy/rollout.py"), "chained criteria: only the last one counts"),
    Mutant("verl_single_k1_bound", "numeric/off_policy/rollout.py", "lower = 1.0 / upper if symmetric else None", "lower = 0.5 / upper if symmetric else None",
           _RULES, "a single k1 threshold u is not the log-symmetric band [1/u, u]"),
    Mutant("verl_sequence_is_geometric", "numeric/off_policy/rollout.py", "per_sequence(m, d.sum(-1, keepdim=True).clamp(",
           "per_sequence(m, (d.sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)).clamp(", _RULES,
           "verl's sequence IS weight is the geometric mean, not the product"),
    Mutant("verl_sequence_clamp_per_token", "numeric/off_policy/rollout.py", "per_sequence(m, d.sum(-1, keepdim=True).clamp(-SAFETY_BOUND, SAFETY_BOUND).exp())",
           "per_sequence(m, d.clamp(-SAFETY_BOUND, SAFETY_BOUND).sum(-1, keepdim=True).exp())", _RULES,
           "the sequence log-ratio clamped token by token instead of after the sum (a product beyond e^20)"),
    Mutant("areal_k1_sign", "numeric/off_policy/masks.py", '"kl_k1": lambda: x,', '"kl_k1": lambda: -x,', (*_RULES, "numeric/off_policy/masks.py"),
           "AReaL's kl_k1 read as -log rho (verl's sign)"),
    Mutant("areal_k3_direction", "numeric/off_policy/masks.py", '"kl_k3": lambda: (-x).exp() - 1 + x', '"kl_k3": lambda: x.exp() - 1 - x',
           _RULES, "AReaL's kl_k3 read as verl's k3 (the other direction)"),
    Mutant("areal_sequence_weight_product", "numeric/off_policy/masks.py", "weight = (on_mask(m, x).sum(-1, keepdim=True) / n).exp()",
           "weight = on_mask(m, x).sum(-1, keepdim=True).exp()", _RULES, "AReaL's sequence weight is the product, not the geometric mean"),
    Mutant("areal_max_as_mean", "numeric/off_policy/masks.py", "top = torch.where(m, values, -torch.inf).amax(-1, keepdim=True)",
           "top = on_mask(m, values).sum(-1, keepdim=True) / n", _RULES, "agg='max' reduces by the mean"),
    Mutant("areal_clamp_every_sequence", "numeric/off_policy/masks.py", "torch.where(passed, weight, weight.clamp(floor, upper))",
           "weight.clamp(floor, upper)", _RULES, "sequence-level clamp truncates the sequences that pass too"),
    Mutant("areal_lower_ignored", "numeric/off_policy/masks.py", "return (s <= upper) if lower is None else (s >= lower) & (s <= upper)",
           "return s <= upper", _RULES, "AReaL's lower bound is not applied"),
    Mutant("m2po_mean_not_strict", "numeric/off_policy/masks.py", "below = torch.nonzero(suffix_mean < tau)", "below = torch.nonzero(suffix_mean <= tau)",
           _RULES, "M2PO stops when the mean equals the threshold"),
    Mutant("m2po_drops_smallest", "numeric/off_policy/masks.py", "torch.sort(values, descending=True, stable=True)", "torch.sort(values, descending=False, stable=True)",
           _RULES, "M2PO drops the smallest second moments first"),
    Mutant("m2po_none_below_keeps_all", "numeric/off_policy/masks.py", "dropped = int(below[0]) if len(below) else n - 1",
           "dropped = int(below[0]) if len(below) else 0", _RULES, "when no mean is below the threshold M2PO keeps everything (AReaL keeps one token)"),
    Mutant("trust_region_sign", "numeric/off_policy/masks.py", "else ((A > 0) & up) | ((A < 0) & down)", "else ((A < 0) & up) | ((A > 0) & down)",
           _RULES, "the trust-region mask drops the side the advantage does not push"),
    Mutant("trust_region_edge", "numeric/off_policy/masks.py", "up, down = p - q > high, q - p > low", "up, down = p - q >= high, q - p > low",
           _RULES, "the probability-change mask drops a change exactly at delta (prime-rl and SkyRL keep it)"),
    Mutant("binary_kl_direction", "numeric/off_policy/masks.py", "kl = q * (lmu - lp)", "kl = q * (lp - lmu)",
           _RULES, "SkyRL's Bernoulli KL with the first term's sign flipped"),
    Mutant("opsm_zero_advantage_dropped", "numeric/off_policy/masks.py", "on_mask(m & ((A >= 0) | (drift <= delta))", "on_mask(m & ((A > 0) | (drift <= delta))",
           _RULES, "OPSM drops a zero-advantage sequence that drifted (TRL keeps A >= 0)"),
    Mutant("opsm_drift_sign", "numeric/off_policy/masks.py", "drift = on_mask(m, lmu - lp)", "drift = on_mask(m, lp - lmu)",
           _RULES, "OPSM's statistic is log(pi/mu), not log(mu/pi)"),
    Mutant("loglinear_alpha_inverted", "numeric/off_policy/masks.py", "(diff - 1) / torch.where(diff > 0, diff, torch.ones_like(diff))",
           "1 / torch.where(diff > 0, diff, torch.ones_like(diff))", _RULES, "the log-linear weight alpha = 1/k instead of 1 - 1/k"),
    Mutant("outlier_all_as_any", "numeric/off_policy/masks.py", "(~bad.any(-1, keepdim=True))", "(~bad.all(-1, keepdim=True))",
           _RULES, "the outlier mask drops a sequence only when every token is out of band"),
    Mutant("outlier_edge", "numeric/off_policy/masks.py", "bad = m & ((rho < low_v) | (rho > high_v))", "bad = m & ((rho < low_v) | (rho >= high_v))",
           _RULES, "the outlier mask drops a ratio exactly at high"),
    Mutant("bypass_dual_clip_side", "numeric/off_policy/corrections.py", "dropped = dropped | ((A < 0) & (ratio > dual_clip))",
           "dropped = dropped | ((A > 0) & (ratio > dual_clip))", _RULES, "the dual clip drops positive-advantage tokens"),
    Mutant("m2po_limit_ties_kept", "numeric/off_policy/corrections.py", "torch.where(m2 == cut, share, 0.0)", "torch.where(m2 == cut, 1.0, 0.0)",
           (*_RULES, "numeric/off_policy/corrections.py"), "M2PO's large-batch limit keeps every token tied at the cut"),
    Mutant("m2po_limit_share", "numeric/off_policy/corrections.py", "(float(mass[last + 1]) * (cut - tau))", "(float(mass[last + 1]) * (cut + tau))",
           (*_RULES, "numeric/off_policy/corrections.py"), "the kept share at M2PO's cut solves the wrong equation"),
    Mutant("derived_k3_areal_sign", "derivations/corrections.py", "d.then(_S(_mu[_a] ** 2 / _pi[_a]) - 1 - kl,", "d.then(_S(_mu[_a] ** 2 / _pi[_a]) - 1 + kl,",
           ("tests/test_corrections.py", "derivations/corrections.py"), "AReaL's kl_k3 mean derived with + KL"),
    Mutant("derived_k1_band_sign", "derivations/corrections.py", "(-b <= _x) & (_x <= -a), r\"multiply", "(a <= _x) & (_x <= b), r\"multiply",
           ("tests/test_corrections.py", "derivations/corrections.py"), "verl's k1 band read on +x"),
    Mutant("k3_summand_sign", "derivations/corrections.py", '"AReaL": _q**2 / _p - _q - kl}', '"AReaL": _q**2 / _p - _q + kl}',
           (suites("off_policy"),), "the lambdified AReaL kl_k3 mean with + KL"),
    Mutant("aggregate_exclude_ignored", "numeric/losses/aggregation.py", "total = total / (_rows(counts, B, True)[..., 0, 0] if exclude else B)", "total = total / B",
           _losses("aggregation"), "empty_rows='exclude' divides by the rows that hold a token"),
    Mutant("otb_weights_not_squared", "numeric/losses/advantages.py", 'w = w * t["is_weights"].detach() ** 2', 'w = w * t["is_weights"].detach()',
           _losses("advantages"), "OTB scales the token energy by the squared importance weight"),
    Mutant("otb_energy_sign", "numeric/losses/advantages.py", "w = (1 - 2 * lp.exp() + s2) * mf", "w = (1 + 2 * lp.exp() - s2) * mf",
           _losses("advantages"), "the squared score of a softmax step is 1 - 2 pi + sum pi^2"),
    Mutant("bias_corrected_kl_ratio_detached", "numeric/losses/penalties.py", "log_ratio.exp() * k3", "log_ratio.detach().exp() * k3",
           _losses("penalties"), "the ratio of the bias-corrected KL carries the score (the reverse KL's gradient)"),
    Mutant("entropy_mask_strict", "numeric/losses/tokens.py", "(h >= torch.quantile(kept, 1 - tau))", "(h > torch.quantile(kept, 1 - tau))",
           _losses("tokens"), "the entropy mask keeps ties at the quantile (TRL: >=)"),
    # -- the variant checker's edges (issue 16)
    Mutant("verdict_tolerance_loosened", "derivations/variants/reports.py", "tol = sp.Float(10) ** (-12 if floats else -25)",
           "tol = sp.Float(10) ** (-6 if floats else -25)", _VARIANTS, "an RLOO scaled by 1 + 1e-9 reads 'unbiased'"),
    Mutant("binary_constancy_skips_p1", "derivations/variants/patterns.py", "equal = [nonzero(x - diffs[0], scale) for x in diffs[1:]]",
           "equal = [nonzero(x - diffs[0], scale) for x in diffs[2:]]", _VARIANTS, "c(p) = 1 + p at G = 2 reads as a constant"),
    Mutant("interpolation_always_to_tolerance", "derivations/variants/patterns.py",
           'return dict(CANONICALISERS)["expand"](evaluated(difference)) == 0', "return False", _NUMERIC_ROUTE,
           "an interpolation whose fp64 values cancel is shown to a tolerance (and refused: no float is left to compare)"),
    Mutant("interpolation_always_exact", "derivations/variants/patterns.py",
           'return dict(CANONICALISERS)["expand"](evaluated(difference)) == 0', "return True", _NUMERIC_ROUTE,
           "an interpolation whose fp64 values do not cancel is shown exact (and refused)"),
    Mutant("underflow_read_as_silenced", "numeric/variants/token_callables.py", "if not beside or max(beside) >= UNDERFLOW:",
           "if True:", ("tests/test_variants.py::test_a_saturating_smooth_weight_is_not_silenced_but_a_clip_is",),
           "SAPO's saturating sigmoid reads as silenced far from r = 1"),
    # -- Clip-Cov's and KL-Cov's selection (issue 29: read in verl at 1dda039, core_algos.py:1817-1818, 1905)
    Mutant("kl_cov_count_rounded", "numeric/losses/selection.py", "max(1, int(N * fraction))", "max(1, round(N * fraction))",
           ("tests/test_losses.py::test_kl_cov_selects_max_one_floor_fraction_n_tokens_as_verl",),
           "KL-Cov selects round(fraction N) tokens: 1.9 tokens become 2"),
    Mutant("kl_cov_count_may_be_zero", "numeric/losses/selection.py", "max(1, int(N * fraction))", "int(N * fraction)",
           ("tests/test_losses.py::test_kl_cov_selects_max_one_floor_fraction_n_tokens_as_verl",),
           "KL-Cov at verl's default fraction 2e-4 selects no token of a small batch"),
    Mutant("clip_cov_band_closed", "numeric/losses/selection.py", "(cov > low) & (cov < high)", "(cov >= low) & (cov <= high)",
           ("tests/test_losses.py::test_clip_cov_band_is_strict_and_count_is_at_least_one_as_verl",),
           "Clip-Cov selects a token whose covariance lies exactly on a bound of the band"),
    Mutant("clip_cov_count_may_be_zero", "numeric/losses/selection.py", "count = max(int(fraction * int(keep.sum())), 1)",
           "count = int(fraction * int(keep.sum()))",
           ("tests/test_losses.py::test_clip_cov_band_is_strict_and_count_is_at_least_one_as_verl",),
           "Clip-Cov at verl's default fraction 2e-4 drops no token of a small batch"),
    # -- decisions no test guarded (issue 28, item 6)
    Mutant("unbiased_scale_not_compared", "numeric/variants/policy_loss.py",
           'fit.mode == "seq-mean-token-sum" and abs(fit.scale - 1) <= tol and fit.epsilon == 0',
           'fit.mode == "seq-mean-token-sum" and fit.epsilon == 0',
           ("tests/test_trainer_code.py::test_unbiased_needs_seq_mean_token_sum_at_scale_one",),
           "check_policy_loss calls seq-mean-token-sum at twice the scale unbiased"),
    Mutant("coupling_probe_like_the_check", "numeric/variants/grouped.py", 'extra=3, law="spread")(rewards)', ")(rewards)",
           ("tests/test_trainer_code.py::test_a_batch_whitening_is_seen_in_the_trl_and_openrlhf_conventions",),
           "the batch-coupling probe draws its other groups as the check does (binary, two of them): TRL's batch std is missed at G = 3"),
    Mutant("coupling_probe_binary", "numeric/variants/grouped.py", 'extra=3, law="spread")(rewards)', 'extra=3, law="binary")(rewards)',
           ("tests/test_trainer_code.py::test_a_batch_whitening_is_seen_in_the_trl_and_openrlhf_conventions",),
           "the batch-coupling probe's other groups binary: a normalisation by the batch's largest reward is missed"),
    Mutant("pointwise_badge_dropped", "derivations/kernel.py", 'return Established(claim.lhs, "=", claim.rhs, check(integrands, self.inner).badge)',
           'return Established(claim.lhs, "=", claim.rhs, check(integrands, self.inner).badge and None)',
           ("tests/test_kernel.py",), "E[x^2 s] = E[x s] checked at x = 1 only reads as a proof: its badge is lost"),
    Mutant("regions_inner_badge_dropped", "derivations/kernel.py", '"; ".join(sorted(partly)) or None)', "None)",
           ("tests/test_kernel.py",), "a proof by regions whose pieces are checked at instances reads as a proof"),
    Mutant("checker_match_probe_only", "derivations/variants/token.py", "ok = (any(known == _known_weight(f) for f in found)",
           "ok = True or (any(known == _known_weight(f) for f in found)",
           ("tests/test_variants.py::test_sapo_temperature_is_chosen_by_the_sign_of_the_advantage",),
           "the cheap probe (every other constant 3/2) names a loss: SAPO with its temperatures swapped is named SAPO"),
    Mutant("checker_refuses_registry_constants", "derivations/variants/token.py",
           "unknown = loss.free_symbols - _TOKEN_SYMBOLS - _REGISTRY_CONSTANTS - set(constants)",
           "unknown = loss.free_symbols - _TOKEN_SYMBOLS - set(constants)",
           ("tests/test_variants.py::test_every_registered_form_is_named_by_the_checker",),
           "the checker refuses the registry's own SAPO (tau_+, tau_- undeclared), as before issue 29"),
    Mutant("checker_names_only_the_first_form", "derivations/variants/token.py", "            found.append(method.method)\n    return tuple(found)",
           "            return (method.method,)\n    return tuple(found)",
           ("tests/test_variants.py::test_every_registered_form_is_named_by_the_checker",),
           "the checker names PPO but not the unselected Clip-Cov token of the same weight"),

    Mutant("float_verdict_tolerance_loose", "derivations/variants/patterns.py", "FLOAT_TOL = 1e-12", "FLOAT_TOL = 1e-6",
           ("tests/test_variants.py::test_broken_variants_are_caught_on_the_numeric_route",),
           "the numeric route reads RLOO x (1 + 1e-9) as unbiased"),
    Mutant("float_residual_degree_two_only", "derivations/variants/patterns.py", "for dg in range(2, m) if max(", "for dg in range(2, min(m, 3)) if max(",
           ("tests/test_variants.py::test_five_values_at_G_64_rloo_and_zscore_get_their_verdicts",),
           "the numeric route ignores the residual's degrees 3 and up"),
    Mutant("exact_number_fallback_sign", "derivations/variants/patterns.py", "    return -r if fl < 0 else r\n", "    return r\n",
           ("tests/test_variants.py::test_exact_number_is_nsimplify_with_the_search_run_once",),
           "nsimplify's search run once: a negative float without a closed form read as its absolute value"),
    Mutant("sorted_groups_values_reversed", "numeric/group_baselines.py", "np.repeat(np.tile(v.numpy(), counts.shape[0]), reps)",
           "np.repeat(np.tile(v.numpy()[::-1], counts.shape[0]), reps)", _topic("group_baselines"),
           "the exact engine's groups built by numpy with the values in the wrong order"),

    # -- a trainer's loss as it runs (issue 28): the execution check's decisions
    Mutant("execution_tolerance_loosened", "numeric/variants/execution.py", "EXECUTION_RTOL = 1e-9", "EXECUTION_RTOL = 1e-3",
           ("tests/test_execution.py::test_a_cut_dependence_of_1e_6_is_not_invariant",),
           "a cut's kappa compared with the full batch's to 1e-3: a dependence of 1e-6 reads invariant"),
    Mutant("execution_padding_split_skipped", "numeric/variants/execution.py",
           ',\n            (padded[0], _lengths(B, T, "unequal lengths", padded[1]))]', "]",
           ("tests/test_execution.py::test_openrlhf_aggregate_loss_and_its_gas_pre_compensation",),
           "the split whose last rank holds only padding is skipped: a local mean over non-empty rows reads scaled by GA"),
    Mutant("execution_sum_reduction_averaged", "numeric/variants/execution.py", 'divide = W if conv.reduction == "mean" else 1', "divide = W",
           ("tests/test_execution.py::test_prime_rl_global_count_and_fsdps_mean_undone",),
           "a convention that undoes FSDP's mean (prime-rl) still has its ranks' gradients averaged"),
    Mutant("execution_values_probe_ignored", "numeric/variants/execution.py",
           "deviation = max(float(g.max()) for g in kappa_gaps + value_gaps) if not broken else math.nan",
           "deviation = max(float(g.max()) for g in kappa_gaps) if not broken else math.nan",
           ("tests/test_execution.py::test_a_batch_statistic_of_the_values_is_caught_by_the_values_probe",),
           "only kappa at r = 1, A = 1 is compared: a micro-batch statistic of the advantages goes unseen"),

    # -- the proof kernel: each of its decisions (issue 16)
    Mutant("kernel_strict_as_weak", "derivations/claims.py", 'return at_least(left - right, relation in ("<", ">"))',
           "return at_least(left - right, False)", _KERNEL, "relation_holds decides x > x as x >= x"),
    Mutant("resolver_strict_as_weak", "derivations/regions.py", 'strict = rel.rel_op in (">", "<")', "strict = False",
           _KERNEL, "the branch resolver decides a strict condition with equal sides as true"),
    Mutant("lemma_weak_proves_strict", "derivations/claims.py", '"<=": {"<="}, ">=": {">="}', '"<=": {"<=", "<"}, ">=": {">=", ">"}',
           _KERNEL, "by_lemma accepts a <= lemma for a displayed <"),
    Mutant("regions_one_region", "derivations/kernel.py", "points = covering_points(self.cuts, claim.premises, claim.given)",
           "points = covering_points(self.cuts, claim.premises, claim.given)[:1]", _KERNEL, "on_regions accepts a claim that holds on one region"),
    Mutant("regions_closed_end_dropped", "derivations/premises.py", "if i == 0 and lo_closed and lo != -sp.oo:", "if False:",
           _KERNEL, "a closed end of the domain (x >= 0 at x = 0) is not a region"),
    Mutant("argmin_no_curvature", "derivations/kernel.py", "if curvature.has(v) or not at_least(curvature, True):", "if False:",
           _KERNEL, "is_argmin without its curvature check: a maximiser passes"),
    Mutant("premises_unchecked", "derivations/kernel.py", "    require_consistent(claim.conditions)\n    if claim.facts:", "    if claim.facts:",
           _KERNEL, "contradictory premises discharge a claim"),
    Mutant("chain_strongest_relation", "derivations/derivation.py", "strict = relations == {direction}", "strict = direction in relations",
           _KERNEL, "a chain > then >= states >"),
    Mutant("lemma_assumptions_unchecked", "derivations/kernel.py", 'if getattr(s, f"is_{key}", None) is True and not _satisfies',
           'if False and getattr(s, f"is_{key}", None) is True and not _satisfies', _KERNEL, "a lemma about a positive p used at p = -1"),
    Mutant("facts_trusted", "derivations/kernel.py", "        justify_facts(claim.facts, claim.conditions, claim.unfold)", "        pass",
           _KERNEL, "facts={x: 1} out of nowhere is taken on trust"),
    Mutant("numeric_margin_dropped", "derivations/kernel.py", "abs(gap) <= scale * sp.Float(10) ** (5 - self.digits)", "abs(gap) <= 0",
           _KERNEL, "numerically accepts a gap it cannot tell from rounding"),
    # -- the definitions the kernel applies, and its tables and tolerances (issue 16, items 2 and 5)
    Mutant("definitions_callable_accepted", "derivations/derivation.py", "if unfold is not None and not isinstance(unfold, Definitions):",
           "if False:", _KERNEL, "Derivation(unfold=<a function>) is accepted again"),
    Mutant("definitions_any_lhs", "derivations/definitions.py", '    raise ValueError(f"entries: a left side must be',
           '    return "symbol"\n    raise ValueError(f"entries: a left side must be', _KERNEL, "x + 1 := 0 or exp(x) := 0 is a definition"),
    Mutant("definitions_cycle_unchecked", "derivations/definitions.py", "        _require_acyclic(checked)\n", "",
           _KERNEL, "x := y + 1, y := x - 1 is accepted"),
    Mutant("differentiation_sg_not_held", "derivations/definitions.py", "            expr = expr.replace(h, hold)", "            pass",
           _KERNEL, "the stop-gradient is differentiated through"),
    Mutant("table_patterns_unchecked", "derivations/kernel.py", "if len(set(keys)) != len(keys) or set(keys) != needed:", "if False:",
           _KERNEL, "a table missing a pattern (whose value is 0) is summed"),
    Mutant("table_multiplicity_dropped", "derivations/kernel.py", "total = sp.Add(*[ways[c] * sp.Mul(", "total = sp.Add(*[1 * sp.Mul(",
           _KERNEL, "each count pattern counted once, not once per ordering"),
    Mutant("tolerance_loosened", "derivations/kernel.py", "abs(sp.N(cf)) <= tol for cf", "abs(sp.N(cf)) <= 1e3 * tol for cf",
           _KERNEL, "a 1e-9 gap passes a 1e-12 tolerance"),
    Mutant("tolerance_not_a_polynomial_raises", "derivations/kernel.py",
           "    except sp.PolynomialError:  # sqrt(p), log(p): not a polynomial in its symbols, so no coefficients to compare\n        return False",
           "    except ZeroDivisionError:\n        return False", _KERNEL, "a float gap in sqrt(p) raises PolynomialError instead of being refused"),
    Mutant("table_canonicalisers_before_floats", "derivations/kernel.py",
           "by_coefficients = self.tol is not None and gap.has(sp.Float) and within(gap, self.tol)", "by_coefficients = False",
           _KERNEL, "an fp64 table runs every canonicaliser before its coefficients are compared"),
    # -- the canonicalisers' refutations and their piecewise stage
    Mutant("refute_tiny_value", "derivations/canonical.py", "abs(approx) > _RELATIVE * scale", "abs(approx) > 0 * scale",
           _CANONICAL, "a value 1e-40 of its largest term is trusted to be nonzero"),
    Mutant("small_point_not_small", "derivations/canonical.py", "rng.randint(1, d - 1), d * shrink)", "rng.randint(1, d - 1), d)",
           _CANONICAL, "the third point is as large as the second: log(1 - pi_1 - pi_2) stays off the real line"),
    Mutant("lone_term_anywhere", "derivations/canonical.py", "        if not any(other.has(symbol) for other in expr.args if other is not term):",
           "        if True:", _CANONICAL, "a term -delta refutes though delta occurs in another term"),
    Mutant("piecewise_edge_dropped", "derivations/canonical.py", "_STRICT = {sp.StrictGreaterThan: sp.StrictLessThan,",
           "_STRICT = {sp.StrictGreaterThan: sp.LessThan,", _CANONICAL, "r > 1 + eps and r >= 1 + eps read as one condition"),
    Mutant("opaque_sum_shifted_entry", "derivations/canonical.py", "return bool(entries) and all(a == i or i not in a.free_symbols",
           "return bool(entries) and all(True or i not in a.free_symbols", _CANONICAL,
           "a telescoping sum of R[a + 1] - R[a] is left unevaluated (SymPy sums it)"),
    Mutant("opaque_sum_before_expand", "derivations/canonical.py", "entries = [x for x in sp.expand(f).atoms(", "entries = [x for x in f.atoms(",
           _CANONICAL, "a sum whose table terms cancel once expanded (SymPy sums the rest) is left unevaluated"),
    Mutant("opaque_sum_delta", "derivations/canonical.py", "if f.has(sp.Piecewise) or _delta_in(f, i):",
           "if f.has(sp.Piecewise):", _CANONICAL, "a sum of p[a] times a Kronecker delta in a is left unevaluated"),
    Mutant("opaque_sum_delta_in_inner_sum", "derivations/canonical.py", "        return _delta_in(f.function, i)\n",
           "        return False\n", _CANONICAL, "a sum of p[a] times a sum over m of a Kronecker delta in a is left unevaluated"),
    # -- the loss checker on variants it was not built around and on trainers' shipped code (issues 28 item 3 and 32)
    Mutant("bounded_ends_near_one", "numeric/variants/weight_probe.py", "_FAR = torch.logspace(-12, 12, 49, dtype=F64)",
           "_FAR = torch.logspace(-2, 2, 49, dtype=F64)", _UNSEEN + _SHIPPED,
           "boundedness read on [0.01, 100] only: SkyRL's PPO, its log-ratio clamped at 20, called unbounded for A < 0"),
    Mutant("per_token_constants_not_a_policy_gradient", "numeric/variants/token_callables.py",
           "TokenReport(None, silenced, ends, one.on_policy, one.policy_gradient,",
           "TokenReport(None, silenced, ends, one.on_policy, one.policy_gradient and not per_token,", _UNSEEN + _SHIPPED,
           "clip bounds computed from pi_old called 'not a policy gradient' (the old rule)"),
    Mutant("tie_rule_unnamed", "numeric/variants/weight_probe.py", "if abs(below - above) > 1e-3 and", "if False and",
           _UNSEEN, "a half weight at the tie r = 1 told as a scale, not the tie rule"),
    Mutant("precision_ignored", "numeric/variants/precision.py", "return max(1e-12, min(32 * torch.finfo(dtype).eps, 0.05))",
           "return 1e-12", _SHIPPED, "a float32 loss compared to 1e-12: rounding read as structure"),
    Mutant("band_read_as_dual_clip", "numeric/variants/policy_loss.py",
           'band_high = pos.above == neg.above == "zero" and same(pos.high, neg.high)', "band_high = False",
           _SHIPPED, "a rejection rho <= 5 for both signs reported as dual_clip = 5"),
    Mutant("exact_route_absolute_tolerance", "derivations/variants/patterns.py", "    return max(1.0, largest * weight * spread)",
           "    return 1.0", _UNSEEN, "advantages near 1e6 checked to an absolute 1e-12: the exact route fails"),
    Mutant("relabellings_not_averaged", "numeric/variants/positional.py", "perms = np.array(list(itertools.permutations(range(G))))",
           "perms = np.array([list(range(G))])", _UNSEEN, "a positional advantage judged by its answer 0 only"),
    Mutant("kappa_law_integer_exponents", "numeric/variants/kappa.py", "np.round(coef[1:] * 2) / 2", "np.round(coef[1:])",
           _UNSEEN, "kappa = n^-1/2 / B not described (exponents rounded to integers)"),
    Mutant("sequence_ratio_swapped", "numeric/variants/policy_loss.py", 'return "geometric mean"\n', 'return "product"\n',
           _SHIPPED + ("tests/test_trainer_code.py",), "GSPO's geometric-mean ratio reported as the product"),
    # -- cases over a finite set, equal integrands, and the group algebra's independence (issue 16: no step runs the caller's code)
    Mutant("cases_any_value_set", "derivations/kernel.py", "c.args == (self.quantity, allowed)", "c.args[0] == self.quantity",
           _KERNEL, "by_cases checks r = 0 at r = 0 only, though the premise says r in {0, 1}"),
    Mutant("cases_inside_expectation", "derivations/kernel.py",
           "if any(e.has(self.quantity) for x in everything for e in sp.sympify(x).atoms(Expect)):", "if False:",
           _KERNEL, "r E[r] = r verifies: the case r = 1 sets r inside E[r] too"),
    Mutant("cases_bound_quantity", "derivations/kernel.py", "if any(self.quantity.has(v) for x in (claim.lhs, claim.rhs)",
           "if False and any(self.quantity.has(v) for x in (claim.lhs, claim.rhs)", _KERNEL,
           "a premise about f(k) (k free) decides a sum over k"),
    Mutant("cases_every_relation_true", "derivations/kernel.py", "and not (e.free_symbols & bound) and _holds_under(e, claim),",
           "and not (e.free_symbols & bound),", _KERNEL, "a Piecewise branch taken without the premise that selects it"),
    Mutant("pointwise_inner_unchecked", "derivations/kernel.py", 'return Established(claim.lhs, "=", claim.rhs, check(integrands, self.inner).badge)',
           'return Established(claim.lhs, "=", claim.rhs)', _KERNEL, "E[r^2 s] = E[2 r s] by 'equal integrands'"),
    Mutant("independence_ignores_answer", "derivations/iid_groups.py", "mixed = [c for c, _ in more] + [c for c in per_answer if c != b]",
           "mixed = []", _KERNEL, "E[1[S_-i = k] R_m s_m] factorises, though R_m is part of S_-i"),
    Mutant("others_total_constant", "derivations/iid_groups.py", " or bool(expr.atoms(OthersTotal))", "",
           _KERNEL, "S_-i is taken as a constant inside an expectation"),
    Mutant("count_sum_infinite", "derivations/iid_groups.py", "if lo.has(sp.oo, -sp.oo, sp.zoo) or hi.has(sp.oo, -sp.oo, sp.zoo):",
           "if False:", _KERNEL, "E moves inside an infinite sum"),
    # -- the trainers' questions (issue 28 item 2): the mask probe and each decision a question makes
    Mutant("mask_probe_row_against_itself", "numeric/variants/questions.py", "k_gone = _kappa(loss, old[1:], mask[1:])",
           "k_gone = _kappa(loss, old, rowless)[1:]", _QUESTIONS, "the masked row is compared with itself masked, never with the row removed"),
    Mutant("mask_probe_hole_is_the_deletion", "numeric/variants/questions.py", "short[i, n - 1] = 0", "short[i, t] = 0",
           _QUESTIONS, "the row 'with the token removed' is the row with the token masked"),
    Mutant("mask_probe_silenced_never_found", "numeric/variants/questions.py", "silenced = valid & (k0 == 0)", "silenced = valid & (k0 < 0)",
           _QUESTIONS, "tokens the function silences itself are never probed (TRL issue 6369 unseen)"),
    Mutant("kl_kappa_not_divided_out", "numeric/variants/divergence_questions.py", "c = torch.where(valid, g_kl / (kappa if has_policy else one), zero)",
           "c = torch.where(valid, g_kl, zero)", _QUESTIONS, "the KL coefficient is read with the aggregation's 1/N left in"),
    Mutant("kl_prefixes_weighted_uniformly", "numeric/variants/divergence_questions.py", "p.detach()[:, None].expand_as(lm.mask)[valid])",
           "torch.ones_like(lm.mask)[valid])", _QUESTIONS, "the per-token divergences weigh every prefix alike, not by pi's reach"),
    Mutant("correction_once_against_old", "numeric/variants/divergence_questions.py", "pi_mu, pi_old, old_mu = (new - rollout).exp(),",
           "pi_mu, pi_old, old_mu = (new - old).exp(),", _QUESTIONS, "'applied once' read as the ratio to the old policy, not to the sampler"),
    Mutant("correction_detach_unread", "numeric/variants/divergence_questions.py", "return 0.0 if g is None else float(g.abs().max())", "return 0.0",
           _QUESTIONS, "a weight without .detach() is taken as detached"),
    Mutant("sequence_probe_moves_another_row", "numeric/variants/answers.py", "new[0, 1] += 1e-4", "new[1, 1] += 1e-4",
           _QUESTIONS, "the sequence-level probe moves a token of the other row, so no loss is sequence-level"),
    Mutant("sequence_weight_per_token", "numeric/variants/divergence_questions.py", '"geometric mean": d.sum(1) / n}', '"geometric mean": d.mean(1)}',
           _QUESTIONS, "the geometric mean over the padded width, not over the response's tokens"),
    Mutant("poison_gradient_unchecked", "numeric/variants/questions.py", "    if not bool(torch.isfinite(g).all()):\n        return \"gradient\"",
           "    if False:\n        return \"gradient\"", _QUESTIONS, "a NaN that reaches only the gradient (torch.where after exp) is missed"),
    Mutant("poison_ratio_below_overflow", "numeric/variants/questions.py", "pair = 0.6 * big", "pair = 0.4 * big",
           _QUESTIONS, "the 'overflowing' log-ratio stays below exp's overflow in the dtype"),
    Mutant("weighting_per_token_by_sqrt", "numeric/variants/questions.py", "if spread(c_arr / n):", "if spread(c_arr / np.sqrt(n)):",
           _QUESTIONS, "per token read as a weight growing like sqrt(n)"),
    Mutant("verl_plus_gradient_of_the_value", "numeric/losses/penalties.py", "value = k2 - k2.detach() + value.detach()",
           "value = value - value.detach() + k2.detach()", _QUESTIONS, "the straight-through form keeps k2's value and k*'s gradient"),
    Mutant("verl_k3_unclamped", "numeric/losses/penalties.py", 'value = kl_estimate(delta.clamp(-20, 20), "k3").clamp(-10, 10)',
           'value = kl_estimate(delta.clamp(-20, 20), "k3")', _QUESTIONS, "verl's low_var_kl without its clamp at 10"),
    Mutant("kl_form_abs_once_tv", "derivations/trust_region.py", 'd.step(rows["abs"], 2 * rows["tv"],', 'd.step(rows["abs"], rows["tv"],',
           _QUESTIONS, "abs descends the total variation once, not twice"),
    # -- issue 29: one mutant per derivation decision of the new methods, the readings and the checker's naming
    Mutant("dppo_mask_direction", "numeric/losses/policy_terms.py", "return torch.where(positive, p - p0 <= high, p - p0 >= -low)",
           "return torch.where(positive, p - p0 >= -low, p - p0 <= high)", _ISSUE29, "DPPO's TV mask reads the other sign's direction"),
    Mutant("dppo_kl_other_direction_masked", "numeric/losses/policy_terms.py", "return torch.where(positive, (kl <= high) | (p <= p0), (kl <= low) | (p >= p0))",
           "return torch.where(positive, kl <= high, kl <= low)", _ISSUE29, "DPPO's binary-KL mask also silences a move against the advantage"),
    Mutant("dppo_tv_uncapped", "numeric/losses/policy_terms.py", 'delta.detach().exp().clamp(max=options["is_cap"])', "delta.detach().exp()",
           _ISSUE29, "verl's dppo_tv without the truncation at clip_ratio_c"),
    Mutant("dppo_symbolic_mask_strict", "derivations/token_losses.py", "rise, fall = _probability_change() <= tv_h, _probability_change() >= -tv_l",
           "rise, fall = _probability_change() < tv_h, _probability_change() > -tv_l", _ISSUE29, "DPPO's derived mask drops the edge pi - pi_0 = delta"),
    Mutant("tv_band_one_sided", "numeric/losses/policy_terms.py", 'keep = (lp.exp() - old.exp()).abs() <= options["band_delta"]',
           'keep = (lp.exp() - old.exp()) <= options["band_delta"]', _ISSUE29, "prime-rl's ipo band cut on one side only"),
    Mutant("dro_beta_not_halved", "numeric/losses/policy_terms.py", 'return neg_A * lp + options["dro_beta"] / 2 * delta**2',
           'return neg_A * lp + options["dro_beta"] * delta**2', _ISSUE29, "DRO's penalty beta (log r)^2, not beta/2"),
    Mutant("dro_twin_factor", "derivations/methods.py", '"reinforce": ("dro", beta_dro, sp.Rational(1, 2))}', '"reinforce": ("dro", beta_dro, 1)}',
           ("tests/test_registry_methods.py",), "the checker reads DRO's beta as the penalty's coefficient (beta/2)"),
    Mutant("icepop_band_open", "numeric/losses/policy_terms.py", "inside = (g >= low) & (g <= high)", "inside = (g > low) & (g < high)",
           _ISSUE29, "IcePop's band loses its edges (OpenRLHF keeps them)"),
    Mutant("icepop_symbolic_band_open", "derivations/token_losses.py", "(r, sp.And(r >= b_l, r <= b_h))", "(r, sp.And(r > b_l, r < b_h))",
           _ISSUE29, "the derived IcePop band loses its edges"),
    Mutant("rollout_is_band_closed", "numeric/losses/policy_terms.py", 'inside = (r > 1 - options["eps_low"]) & (r < 1 + options["eps_high"])',
           'inside = (r >= 1 - options["eps_low"]) & (r <= 1 + options["eps_high"])', _ISSUE29, "SkyRL's rollout band keeps its edges (SkyRL's is open)"),
    Mutant("seq_mask_tis_product", "numeric/losses/policy_terms.py", 'g = r if method == "icepop" else (delta.sum(-1, keepdim=True) / n.clamp(min=1)).exp()',
           'g = r if method == "icepop" else delta.sum(-1, keepdim=True).exp()', _ISSUE29, "seq-mask-TIS gates on the product of the ratios, not their geometric mean"),
    Mutant("opsm_delta_sign", "numeric/losses/policy_terms.py", '>= -options["opsm_delta"])', '>= options["opsm_delta"])',
           _ISSUE29, "OPSM keeps a row of negative advantage only when its mean log-ratio rose by delta"),
    Mutant("opsm_drops_positive_rows", "numeric/losses/policy_terms.py", "kept = (neg_A <= 0) | (", "kept = (neg_A >= 0) | (",
           _ISSUE29, "OPSM drops rows of positive advantage"),
    Mutant("ppo_product_geometric", "numeric/losses/policy_terms.py", 'delta.sum(-1, keepdim=True), options["eps_low"], options["eps_high"], None)',
           'delta.sum(-1, keepdim=True) / n.clamp(min=1), options["eps_low"], options["eps_high"], None)', _ISSUE29,
           "the RLOO trainer's product ratio read as GSPO's geometric mean"),
    Mutant("luspo_row_mean", "derivations/methods.py", '_method("luspo", "LUSPO", tl.ppo, True, "seq-mean-token-sum",', '_method("luspo", "LUSPO", tl.ppo, True, "seq-mean-token-mean",',
           _ISSUE29, "LUSPO without its row length factor (GSPO's per-sample mean)"),
    Mutant("m2po_suffix_not_strict", "numeric/losses/selection.py", "/ counts < threshold)", "/ counts <= threshold)",
           ("tests/test_registry_methods.py",), "M2PO stops dropping at a suffix mean equal to the threshold"),
    Mutant("m2po_drops_all", "numeric/losses/selection.py", "k = int(below[0]) if len(below) else len(ordered) - 1", "k = int(below[0]) if len(below) else len(ordered)",
           ("tests/test_registry_methods.py", "tests/test_mutant_gaps.py"), "M2PO drops every token when no suffix is below (AReaL keeps one)"),
    Mutant("m2po_denominator_kept", "numeric/losses/policy.py", '    if method == "m2po":  # AReaL replaces the mask: a dropped token leaves the denominators\n        assert',
           '    if False:\n        assert', _ISSUE29, "M2PO's dropped tokens stay in the denominators (AReaL replaces the mask)"),
    Mutant("verl_1dda039_counts_empty_rows", "numeric/losses/aggregation.py", '"the rows with a token since #5417 (2026-02-26)", _VERL, "exclude"),',
           '"the rows with a token since #5417 (2026-02-26)", _VERL, "count"),', _READINGS, "verl's newer seq-mean-token-sum-norm counts empty rows"),
    Mutant("bare_name_takes_the_newer_reading", "numeric/losses/aggregation.py", "        return mode, count_eps, empty_rows, None\n",
           '        return mode, count_eps, empty_rows, "exclude" if mode in _MOVED else None\n', _READINGS,
           "the package's own name silently takes verl's newer meaning"),
    Mutant("prompt_mean_counts_live_prompts", "numeric/losses/aggregation.py", "return (len(tokens) * tokens.clamp(min=1))[index][:, None]",
           "return (int((tokens > 0).sum()) * tokens.clamp(min=1))[index][:, None]", _READINGS, "prompt-mean's P leaves out a prompt with no token"),
    Mutant("two_sided_clip_any_delta", "derivations/losses.py", "assumptions=[eps_l < 1, delta > 1 + eps_h])", "assumptions=[eps_l < 1, delta > 1])",
           ("derivations/losses.py",), "TRL's two-sided clip taken as the dual clip below 1 + eps_h too"),
    Mutant("reading_weight_new_as_old", "derivations/losses.py", 'kappa = {"verl@b178a3c": 1 / D, "verl@1dda039": 1 / (rows * D),',
           'kappa = {"verl@b178a3c": 1 / D, "verl@1dda039": 1 / D,', ("derivations/losses.py",), "the derived weight of verl's newer reading forgets B'"),
    Mutant("checker_opsm_delta_sign", "numeric/variants/policy_loss.py", 'clip["opsm_delta"] = round(-math.log(ranges[1].low), _digits(tol))',
           'clip["opsm_delta"] = round(math.log(ranges[1].low), _digits(tol))', ("tests/test_registry_methods.py",), "OPSM's delta read with the wrong sign"),
    Mutant("checker_product_as_gspo", "numeric/variants/policy_loss.py", '("ppo", "product"): "ppo_product"', '("ppo", "product"): "gspo"',
           ("tests/test_registry_methods.py",), "the product ratio named GSPO"),
    # -- the trainers' estimators and shaping (issue 29 item 2): each convention a trainer's code fixes
    Mutant("singleton_rule_ignored", "numeric/losses/group_advantages.py", "out[rows[:, 0]] = c * s[rows[:, 0]]", "out[rows[:, 0]] = s[rows[:, 0]]",
           _ESTIMATORS, "a lone answer gets c R (verl's raw reward, TRL's 0), not always its reward"),
    Mutant("registry_verl_rloo_singleton_zero", "numeric/variants/estimators.py", 'Reading(\'adv_estimator "rloo"\', _cite("verl", VERL, f"{CORE}:587-636"), 1.0)',
           'Reading(\'adv_estimator "rloo"\', _cite("verl", VERL, f"{CORE}:587-636"), 0.0)', _ESTIMATORS, "verl's rloo loop keeps a lone answer's raw reward"),
    Mutant("registry_trl_eps_as_verls", "numeric/variants/estimators.py", 'partial(group_zscore_advantages, eps=1e-4, std="bessel"), (',
           'partial(group_zscore_advantages, eps=1e-6, std="bessel"), (', _ESTIMATORS, "TRL's and ms-swift's std epsilon is 1e-4"),
    Mutant("maxrl_guard_lets_negative_means", "numeric/losses/group_advantages.py", "keep = mean > 0", "keep = mean != 0",
           _ESTIMATORS, "prime-rl gives a group whose mean is <= 0 zero advantages"),
    Mutant("maxrl_divide_drops_eps", "numeric/losses/group_advantages.py", "out = centred / (mean + eps)", "out = centred / mean",
           _ESTIMATORS, "SkyRL divides by the mean plus 1e-6"),
    Mutant("gdpo_token_count_exact", "numeric/losses/group_advantages.py", "masked_whiten(tokens, mask, eps=whiten_eps, count_eps=1e-8)",
           "masked_whiten(tokens, mask, eps=whiten_eps)", _ESTIMATORS, "verl's masked_mean divides by the count plus 1e-8"),
    Mutant("gdpo_sequence_std_population", "numeric/losses/group_advantages.py", "centred / (centred.std() + whiten_eps)",
           "centred / (centred.std(unbiased=False) + whiten_eps)", _ESTIMATORS, "TRL's and ms-swift's batch std is Bessel's"),
    Mutant("whiten_count_eps_no_bessel", "numeric/losses/advantages.py", "/ (n + count_eps) * (n / (n - 1) if unbiased else 1)",
           "/ (n + count_eps)", _ESTIMATORS, "verl's masked_var is Bessel-corrected after its count-eps mean"),
    Mutant("areal_loo_singleton_zero_mean", "numeric/losses/group_advantages.py", "torch.where(n > 1, n - 1, torch.ones_like(n)), x)",
           "torch.where(n > 1, n - 1, torch.ones_like(n)), torch.zeros_like(x))", _ESTIMATORS,
           "AReaL's leave-one-out mean of a group of one is the answer itself (its advantage 0), not 0 (its raw reward)"),
    Mutant("areal_std_around_the_batch_mean", "numeric/losses/group_advantages.py", "index_add_(0, sid, centred**2)",
           "index_add_(0, sid, (x - x.mean()) ** 2)", _ESTIMATORS, "AReaL's std is taken around the chosen means (group mean, batch std: pooled)"),
    Mutant("areal_singleton_std_zero", "numeric/losses/group_advantages.py", "(sq / torch.where(n > 1, n - 1, torch.ones_like(n))).sqrt(), torch.ones_like(n))",
           "(sq / torch.where(n > 1, n - 1, torch.ones_like(n))).sqrt(), torch.zeros_like(n))", _ESTIMATORS, "AReaL's Bessel std of one element is 1"),
    Mutant("length_penalty_not_by_pass_rate", "numeric/losses/group_advantages.py", "shaped = r - r.mean(-1, keepdim=True) * sum(terms)",
           "shaped = r - sum(terms)", _ESTIMATORS, "prime-rl scales the length penalty by the group's mean reward"),
    Mutant("rae_scored_after_update", "numeric/losses/group_advantages.py", "        out.append(x - b)\n        state[a] = d * b + (1.0 - d) * x",
           "        state[a] = d * b + (1.0 - d) * x\n        out.append(x - state[a])", _ESTIMATORS,
           "rae scores each answer before its reward enters the baseline (else the baseline holds the answer: biased)"),
    Mutant("overlong_excess_unclipped", "numeric/losses/shaping.py", "torch.clamp(n.to(r) - (max_length - buffer), max=buffer)",
           "(n.to(r) - (max_length - buffer))", _ESTIMATORS, "the overlong penalty stops at the buffer (at most factor)"),
    Mutant("stop_properly_negative_scales", "numeric/losses/shaping.py", "shaped = torch.full_like(r, coef) if coef < 0 else coef * r",
           "shaped = coef * r", _ESTIMATORS, "a negative coef sets a truncated answer's reward, it does not scale it"),
    Mutant("kl_reward_count_exact", "numeric/losses/shaping.py", "(kl * mf).sum(-1) / (mf.sum(-1) + 1e-8)", "(kl * mf).sum(-1) / mf.sum(-1)",
           _ESTIMATORS, "verl's current_kl divides each row by its count plus 1e-8"),
    Mutant("kl_controller_clip_tenth", "numeric/losses/shaping.py", "np.clip(kl / self.target - 1, -0.2, 0.2)", "np.clip(kl / self.target - 1, -0.1, 0.1)",
           _ESTIMATORS, "the adaptive controller clips the proportional error at 0.2"),
    Mutant("opd_sign", "numeric/losses/shaping.py", 'out = a - coef * (ls - t["teacher_log_prob"])', 'out = a + coef * (ls - t["teacher_log_prob"])',
           _ESTIMATORS, "OPD subtracts the student-teacher log-ratio (a reverse-KL descent)"),
    Mutant("rlsd_sign_of_a_dropped", "numeric/losses/shaping.py", "torch.exp(torch.sign(a) * delta)", "torch.exp(delta)",
           _ESTIMATORS, "RLSD's evidence weight flips with the sign of the advantage"),
    Mutant("singleton_any_affine_unbiased", "numeric/variants/singleton.py", "if affine and c == 1:", "if affine:",
           _ESTIMATORS, "a lone answer with c = 0 (no update) is scaled, not unbiased"),
    Mutant("otb_default_tail_newest", "numeric/losses/advantages.py", 'tail = (align == "response") if handle_zero_tail is None',
           "tail = True if handle_zero_tail is None", _losses("advantages"), "handle_zero_tail=None keeps verl b178a3c's defaults (a call keeps its number)"),
]


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns(".git", "_build", "__pycache__", "*.egg-info", ".hypothesis", "build", ".venv")
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def _run(tree: Path, tests: tuple[str, ...], timeout: float) -> tuple[str, float, str]:
    """``killed``/``survived``/``timeout`` for the given tests (pytest paths, and ``suite:`` entries) in ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    names = [n for t in tests if t.startswith("suite:") for n in t[len("suite:"):].split(",")]
    paths = [t for t in tests if not t.startswith("suite:")]
    commands = []
    if names:
        commands.append([sys.executable, "-m", "numeric", *sorted(set(names))])
    if paths:
        commands.append([sys.executable, "-m", "pytest", "-n", "0", "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *paths])
    start = time.time()
    for cmd in commands:
        try:
            done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", time.time() - start, ""
        if done.returncode != 0:
            return "killed", time.time() - start, (done.stdout + done.stderr)[-3000:]
    return "survived", time.time() - start, ""


def _first_failure(output: str) -> str:
    """The first line of a test or check failure in pytest's or the report's output."""
    for line in output.splitlines():
        cells = line.split()
        if len(cells) > 5 and cells[4] == "NO":  # a failed row of the report table: suite value tol kind pass check
            return f"check '{' '.join(cells[5:])}' ({cells[0]}: {cells[1]} > {cells[2]})"[:160]
        if line.startswith(("FAILED", "[FAIL]", "E   ")) or "Error" in line[:40] or "stopped:" in line:
            return line.strip()[:160]
    return output.strip().splitlines()[-1][:160] if output.strip() else "?"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    parser.add_argument("--why", action="store_true", help="show the first failure that killed each mutant")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:22s} {m.path:34s} {m.why}")
        return 0
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutants {sorted(unknown)}")
    results = []
    with tempfile.TemporaryDirectory(prefix="pg-mutants-") as tmp:
        tree = Path(tmp) / "repo"
        _copy_tree(tree)
        check = subprocess.run([sys.executable, "-c", "import numeric; print(numeric.__file__)"], cwd=tree,
                               env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True)
        if not check.stdout.startswith(str(tree)):
            print(f"the copy does not shadow the installed package: {check.stdout or check.stderr}", file=sys.stderr)
            return 2
        baseline, seconds, output = _run(tree, tuple(sorted({t for m in chosen for t in m.tests})), args.timeout * 4)
        if baseline != "survived":
            print(f"the unmutated tests do not pass ({baseline}); fix them first:\n{output}", file=sys.stderr)
            return 2
        print(f"unmutated: the selected tests pass ({seconds:.0f} s)")
        for m in chosen:
            target = tree / m.path
            original = target.read_text()
            if original.count(m.old) != 1:
                results.append((m, "stale", 0.0))
            else:
                target.write_text(original.replace(m.old, m.new))
                try:
                    verdict, seconds, output = _run(tree, m.tests, args.timeout)
                finally:
                    target.write_text(original)
                results.append((m, verdict, seconds))
            m_, verdict, seconds = results[-1]
            print(f"{verdict:9s} {m.name:22s} {seconds:5.0f} s  {m.why}", flush=True)
            if args.why and verdict == "killed":
                print(f"          by: {_first_failure(output)}", flush=True)
    applicable = [r for r in results if r[1] != "stale"]
    killed = [r for r in applicable if r[1] in ("killed", "timeout")]
    print(f"\nmutation score: {len(killed)}/{len(applicable)} killed" + (f", {len(results) - len(applicable)} stale" if len(applicable) < len(results) else ""))
    for m, verdict, _ in results:
        if verdict in ("survived", "stale"):
            print(f"  {verdict}: {m.name} ({m.path}): {m.why}")
    return 0 if len(killed) == len(applicable) else 1


if __name__ == "__main__":
    sys.exit(main())
