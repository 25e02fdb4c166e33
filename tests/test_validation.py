"""Every public function validates what it says: a table-driven, property-based bad-input sweep.

Each row of the table is a public function with one valid call and the kind of each
argument.  For every argument the sweep builds the bad variants of its kind (NaN, inf,
wrong dtype or kind, wrong shape, empty, complex, out-of-range values) and requires a
``ValueError`` or ``TypeError`` that names the argument and is raised by the package
itself, never a crash from inside torch or SymPy and never a silent result.  Valid but
unusual inputs (float32, 0-d, negative strides, tensors that require grad) must work and
agree with the plain float64 call.  Hypothesis (derandomised) draws the shapes and the
poisoned positions of the batched helpers.

Every public function and class of ``numeric`` and ``derivations`` has a row, or a
reason in :data:`NOT_SWEPT` (result records, exceptions, registry plumbing).
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import traceback
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pytest
import sympy as sp
import torch

import derivations
import numeric
from derivations import baselines as d_baselines
from derivations import canonical as d_canonical
from derivations import definitions as d_definitions
from derivations import derivation as d_derivation
from derivations import gradient_weights as d_weights
from derivations import group_baselines as d_groups
from derivations import kernel as d_kernel
from derivations import losses as d_losses
from derivations import methods as d_methods
from derivations import off_policy as d_off
from derivations import proofs as d_proofs
from derivations import regions as d_regions
from derivations import returns as d_returns
from derivations import score_function as d_score
from derivations import trust_region as d_trust
from derivations import variants as d_variants
from derivations.gradient_weights import A as A_SYM
from derivations.gradient_weights import ell as ELL
from derivations.gradient_weights import r as R_SYM
from derivations.gradient_weights import sg
from derivations.iid_groups import IIDGroup
from derivations.policy import IndexedSoftmax, SoftmaxPolicy
from numeric import TinyLM
from numeric import baselines as n_baselines
from numeric import gradient_weights as n_weights
from numeric import losses as n_losses
from numeric import off_policy as n_off
from numeric import report as n_report
from numeric import score_function as n_score
from numeric import trust_region as n_trust
from numeric import variants as n_variants
from numeric.checks import Check

PACKAGE_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (numeric, derivations))

LM = TinyLM(V=3, L=2, seed=1)  # N = 7 responses, P = 9 parameters: every call is cheap
R_LM = numeric.default_reward(LM) + torch.arange(LM.N) % 3  # a non-binary reward
THETA = numeric.perturb(LM.theta0, 0.5, seed=3)


# ----------------------------------------------------------------------------- the table


class Lazy:
    """A value built on first use and then kept: collection (which every xdist worker repeats) builds nothing."""

    def __init__(self, build):
        self._build = functools.cache(build)

    def __call__(self):
        return self._build()


@dataclass
class Row:
    """One public function: a valid positional call and the kind of each argument (by position)."""

    fn: object
    call: tuple  # the valid positional call; a Lazy entry is built when a test first needs it
    kinds: dict  # position -> kind name; kinds are below
    ranges: dict = field(default_factory=dict)  # position -> out-of-range values of a scalar argument
    unusual: tuple = ()  # which unusual-but-valid inputs to try: "fp32", "grad", "0d", "neg_stride"
    empty_ok: bool = False  # an empty array is a valid input (elementwise helpers)
    valid: tuple = ()  # variant labels ("argument:label") that are valid here, e.g. a mask that alone sets T
    label: str = ""

    @property
    def args(self) -> tuple:
        return tuple(a() if isinstance(a, Lazy) else a for a in self.call)

    @property
    def name(self) -> str:
        return self.label or getattr(self.fn, "__qualname__", repr(self.fn))


def _arr(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, size=shape)


T_SHAPE = (3, 5)
R_BT = _arr(*T_SHAPE, seed=1)
V_BT = _arr(*T_SHAPE, seed=2)
NV_BT = _arr(*T_SHAPE, seed=3)
CUT = np.zeros(T_SHAPE, bool)
CUT[:, -1] = True
CUT[0, 2] = True
TERM = CUT.copy()
TERM[0, 2] = False
LOGP = np.log(_arr(*T_SHAPE, seed=4, low=0.05, high=0.95))
OLD_LOGP = np.log(_arr(*T_SHAPE, seed=5, low=0.05, high=0.95))
ADV = _arr(*T_SHAPE, seed=6)
MASK = np.ones(T_SHAPE)
RATIO = np.exp(LOGP - OLD_LOGP)
GROUP = np.array([[1.0, 0.0, 2.0, 1.0], [0.5, 0.5, 3.0, 0.0]])
TABLE = torch.zeros(LM.n_prefixes, LM.V, dtype=torch.float64)
LOGITS = _arr(3, 5, 6, seed=7, low=-2.0, high=2.0)
TOKENS = np.random.default_rng(8).integers(0, 6, size=(3, 5))
TABLE[:, 1] = 0.7


def _two_step_method(name):
    def call(theta):
        return getattr(numeric.TwoStepMDP(coupling=1.0), name)(theta)

    call.__signature__ = inspect.Signature([inspect.Parameter("theta", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    call.__qualname__ = f"TwoStepMDP.{name}"
    return call


def _lm_method(name):
    def call(theta):
        return getattr(LM, name)(theta)

    call.__signature__ = inspect.Signature([inspect.Parameter("theta", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    call.__qualname__ = f"TinyLM.{name}"
    return call


def _trainer_loss_value(trainer, their):
    """``numeric.variants.field.trainer_loss(trainer, their)`` run on a fixed fp64 batch: its loss, a number the table can compare."""
    lp = torch.log(torch.tensor([[0.3, 0.6, 0.5], [0.2, 0.1, 0.4]], dtype=torch.float64))
    return numeric.variants.field.trainer_loss(trainer, their)(lp - 0.1, lp, torch.tensor([1.0, -0.5], dtype=torch.float64), torch.tensor([[1, 1, 0], [1, 0, 0]]))


def _positional(fn, npos: int, keywords: tuple, label: str):
    """``fn`` with its first ``npos`` parameters and the keyword arguments ``keywords`` all passed by position (for the table)."""
    params = list(inspect.signature(fn).parameters.values())
    names = [p.name for p in params[:npos]] if params[0].kind != inspect.Parameter.VAR_POSITIONAL else [params[0].name]

    def call(*args):
        return fn(*args[:npos], **dict(zip(keywords, args[npos:])))

    call.__signature__ = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in (*names, *keywords)])
    call.__qualname__ = label
    return call


EP = n_off.two_turn_agent(0.5)
EP_W = n_off.token_ratio(EP.log_prob, EP.sampler_log_prob, EP.mask).numpy()
EP_G = n_off.estimator_samples(EP, EP.mask).numpy()
X = sp.Symbol("x", positive=True)
G_SYM = sp.Symbol("G", integer=True, positive=True)
CLAIM = d_derivation.Claim(X**2 + 1, ">=", 2 * X)
LEMMA = d_derivation.Derivation("a square", start=(X + 1) ** 2).then(X**2 + 2 * X + 1, "expand")
CHECKS = [Check("a == b", 1e-16, 1e-14, "exact", "demo")]
IDS = np.array([[5, 6, 7, 2, 0], [5, 7, 2, 9, 9]])
GRP = IIDGroup()


FLAT = np.array([1.0, 0.0, 0.5, 2.0, 1.0, 0.0])  # a flat batch: groups of 2, 1 and 3 answers
UID = np.array(["a", "a", "b", "c", "c", "c"], dtype=object)
FLAT_K = np.stack([FLAT, FLAT[::-1] * 0.5], 1)  # two rewards per answer
MASK6 = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]])


def _kl_update(current_kl, n_steps):
    return n_losses.AdaptiveKLController(0.01, 0.1, 1000).update(current_kl, n_steps)


_kl_update.__qualname__ = "AdaptiveKLController.update"


def _lone(rewards):
    return rewards * 0.5


def _short(rewards):
    return rewards[..., :-1]


def _non_finite(rewards):
    return rewards * math.nan


def _one_token(log_prob, old_log_prob, advantage):
    return log_prob[..., :1]


def _token_nan(log_prob, old_log_prob, advantage):
    return log_prob * math.nan


def _execution_loss(old_log_prob, log_prob, advantages, response_mask):
    return -((log_prob - old_log_prob).exp() * advantages * response_mask).sum() / response_mask.sum().clamp(min=1)


def _is_loss(log_prob, old_log_prob, advantage):
    return -(log_prob - old_log_prob).exp().detach() * advantage * log_prob


REP_G = Lazy(lambda: n_variants.check_group_advantage(numeric.rloo_advantages, G=3, rewards="binary", confirm=False))
REP_T = Lazy(lambda: n_variants.check_token_loss(-R_SYM * A_SYM * ELL, confirm=False))  # not a policy gradient: no match with the known methods


ROWS = [
    # -- the toy LM layer
    Row(TinyLM, (3, 2, 0, 1.0), {0: "int", 1: "int", 2: "int", 3: "real"}, ranges={0: [1, 0, -3], 1: [0, -1], 3: [-1.0, math.inf]}),
    *[Row(_lm_method(m), (THETA,), {0: "theta"}, unusual=("fp32", "grad")) for m in ("logits", "token_log_probs", "sequence_log_prob", "probs")],
    Row(LM.cond_probs, (THETA, (1,)), {0: "theta", 1: "prefix"}, unusual=("fp32", "grad"), label="TinyLM.cond_probs"),
    Row(numeric.default_reward, (LM,), {0: "lm"}),
    Row(numeric.token_score_tensor, (LM, THETA), {0: "lm", 1: "theta"}, unusual=("fp32", "grad")),
    Row(numeric.score_matrix, (LM, THETA), {0: "lm", 1: "theta"}, unusual=("fp32", "grad")),
    Row(numeric.perturb, (THETA, 0.1, 0), {0: "theta_any", 1: "real", 2: "int"}, ranges={1: [-0.1]}, unusual=("fp32", "grad")),
    Row(numeric.token_score_sqnorms, (LM, THETA), {0: "lm", 1: "theta"}, unusual=("fp32", "grad")),
    Row(numeric.expected_score_sum, (LM, THETA, R_LM), {0: "lm", 1: "theta", 2: "lm_vector"}, unusual=("fp32", "grad")),
    Row(numeric.score_estimator_moments, (LM, THETA, R_LM), {0: "lm", 1: "theta", 2: "lm_vector"}, unusual=("fp32",)),
    # -- score function
    Row(n_score.autograd_gradient, (LM, THETA, R_LM), {0: "lm", 1: "theta", 2: "lm_vector"}, unusual=("fp32", "grad")),
    Row(n_score.finite_difference_gradient, (LM, THETA, R_LM, 1e-6), {0: "lm", 1: "theta", 2: "lm_vector", 3: "real"}, ranges={3: [-1e-6, 0.0]}, unusual=("fp32",)),
    Row(n_score.log_ratio, (LM, THETA, LM.theta0), {0: "lm", 1: "theta", 2: "theta"}, unusual=("fp32", "grad")),
    Row(n_score.product_rule_terms, (LM, THETA, lambda th: R_LM - 0.1 * LM.sequence_log_prob(th)), {0: "lm", 1: "theta", 2: "callable"}, unusual=("fp32",)),
    Row(numeric.TwoStepMDP, (2, 2, 1.0, 0), {0: "int", 1: "int", 2: "real", 3: "int"}, ranges={0: [1], 1: [1, 3]}),
    *[Row(_two_step_method(m), (numeric.TwoStepMDP(coupling=1.0).theta0,), {0: "theta"}, unusual=("fp32", "grad"))
      for m in ("trajectory_probs", "policy_score_gradient", "kernel_score_gradient", "objective_gradient", "log_kernel")],
    # -- baselines
    Row(n_baselines.baseline_gradient, (LM, THETA, R_LM, 0.5), {0: "lm", 1: "theta", 2: "lm_vector", 3: "real"}, ranges={3: [math.inf]}, unusual=("fp32",)),
    Row(n_baselines.prefix_baseline, (LM, torch.arange(float(LM.n_prefixes))), {0: "lm", 1: "prefix_vector"}),
    Row(n_baselines.action_dependent_bias, (LM, THETA, TABLE), {0: "lm", 1: "theta", 2: "table"}, unusual=("fp32",)),
    Row(n_baselines.variance_terms, (LM, THETA, R_LM), {0: "lm", 1: "theta", 2: "lm_vector"}, unusual=("fp32",)),
    Row(n_baselines.baseline_variance, (LM, THETA, R_LM, 0.3), {0: "lm", 1: "theta", 2: "lm_vector", 3: "real"}, unusual=("fp32",)),
    Row(n_baselines.optimal_baseline, (LM, THETA, R_LM), {0: "lm", 1: "theta", 2: "lm_vector"}, unusual=("fp32",)),
    Row(n_baselines.improvement_interval, (LM, THETA, R_LM), {0: "lm", 1: "theta", 2: "lm_vector"}, unusual=("fp32",)),
    Row(n_baselines.reinforce_per_sample, (LM, THETA, torch.tensor([0, 3, 3]), torch.tensor([1.0, -0.5, 2.0])), {0: "lm", 1: "theta", 2: "samples", 3: "vector3"}, unusual=("fp32",)),
    Row(n_baselines.reinforce_monte_carlo, (LM, THETA, R_LM, 0.0, 100, 0), {0: "lm", 1: "theta", 2: "lm_vector", 3: "real", 4: "int", 5: "int"}, ranges={4: [1, 0]}, unusual=("fp32",)),
    Row(n_baselines.reinforce_loss, (LOGP[:, 0], ADV[:, 0]), {0: "array", 1: "array"}, unusual=("fp32", "grad", "neg_stride"), label="reinforce_loss[B]"),
    Row(n_baselines.reinforce_loss, (LOGP, ADV[:, 0], MASK), {0: "array", 1: "array", 2: "loss_mask"}, unusual=("fp32", "grad", "neg_stride"), label="reinforce_loss[B,T]"),
    # -- group baselines
    *[Row(f, (GROUP,), {0: "array"}, unusual=("fp32", "grad", "neg_stride"))
      for f in (numeric.leave_one_out_baselines, numeric.group_mean_advantages, numeric.rloo_advantages)],
    Row(numeric.group_zscore_advantages, (GROUP, 1e-8, "population"), {0: "array", 1: "real", 2: "choice"}, ranges={1: [-1e-8]}, unusual=("fp32", "grad", "neg_stride")),
    Row(numeric.group_advantage_weights, (np.array([0.0, 1.0, 2.0]), np.array([0.2, 0.3, 0.5]), 3, numeric.rloo_advantages),
        {0: "array", 1: "array", 2: "int", 3: "callable"}, ranges={2: [0]}, unusual=("neg_stride",)),
    Row(numeric.count_vectors, (3, 2), {0: "int", 1: "int"}, ranges={0: [0, -1], 1: [-1]}),
    Row(numeric.exact_group_gradient, (LM, THETA, R_LM, 3, numeric.rloo_advantages), {0: "lm", 1: "theta", 2: "lm_vector", 3: "int", 4: "callable"}, ranges={3: [0]}, unusual=("fp32",)),
    Row(numeric.brute_force_group_gradient, (LM, THETA, R_LM, 2, numeric.rloo_advantages), {0: "lm", 1: "theta", 2: "lm_vector", 3: "int", 4: "callable"}, ranges={3: [0, 4]}, unusual=("fp32",)),
    Row(numeric.grpo_weight, (0.3, 4, "population"), {0: "real", 1: "int", 2: "choice"}, ranges={0: [-0.1, 1.5, math.inf], 1: [1, 17]}),
    Row(numeric.binary_reward_weight, (0.3, 4, numeric.rloo_advantages), {0: "real", 1: "int", 2: "callable"}, ranges={0: [-0.1, 1.5], 1: [0]}),
    # -- returns
    Row(numeric.reward_to_go, (R_BT, 0.9), {0: "array", 1: "real"}, ranges={1: [-0.1, 1.1]}, unusual=("fp32", "grad", "neg_stride")),
    Row(numeric.discounted_score_weights, (R_BT, 0.9), {0: "array", 1: "real"}, ranges={1: [-0.1, 1.1]}, unusual=("fp32", "grad", "neg_stride")),
    Row(numeric.gae_advantages, (R_BT, V_BT, NV_BT, TERM, CUT, 0.9, 0.8), {0: "array", 1: "array", 2: "array", 3: "flags", 4: "flags", 5: "real", 6: "real"},
        ranges={5: [-0.1, 1.1], 6: [-0.1, 1.1]}, unusual=("fp32", "grad", "neg_stride")),
    Row(numeric.lambda_returns, (R_BT, NV_BT, TERM, CUT, 0.9, 0.8), {0: "array", 1: "array", 2: "flags", 3: "flags", 4: "real", 5: "real"},
        ranges={4: [-0.1, 1.1], 5: [-0.1, 1.1]}, unusual=("fp32", "grad", "neg_stride")),
    # -- gradient weights
    Row(_positional(numeric.gradient_weight, 3, ("eps_low", "eps_high"), "gradient_weight"), ("ppo", RATIO, ADV, 0.2, 0.28),
        {0: "choice", 1: "ratio", 2: "array", 3: "real", 4: "real"}, ranges={3: [-0.1, 1.5], 4: [-0.1]}, unusual=("fp32", "grad", "0d", "neg_stride"), empty_ok=True),
    Row(_positional(numeric.gradient_weight, 3, ("dual_clip",), "gradient_weight[dual_clip]"), ("ppo", RATIO, ADV, 3.0), {3: "real"}, ranges={3: [0.5, 1.0]},
        valid=("dual_clip:none",)),
    Row(_positional(numeric.ppo_clipped_terms, 2, ("eps_low", "eps_high"), "ppo_clipped_terms"), (RATIO, ADV, 0.2, 0.28),
        {0: "ratio", 1: "array", 2: "real", 3: "real"}, ranges={2: [-0.1, 1.5], 3: [-0.1]}, unusual=("fp32", "grad", "0d", "neg_stride"), empty_ok=True),
    Row(_positional(numeric.ppo_diagnostics, 4, ("eps_low", "eps_high"), "ppo_diagnostics"), (LOGP, OLD_LOGP, ADV, MASK, 0.2, 0.28),
        {0: "array", 1: "array", 2: "array", 3: "mask", 4: "real", 5: "real"}, ranges={4: [-0.1, 1.5], 5: [-0.1]}, unusual=("fp32", "neg_stride")),
    Row(_positional(numeric.ppo_loss, 4, ("eps_low", "eps_high", "dual_clip"), "ppo_loss"), (LOGP, OLD_LOGP, ADV, MASK, 0.2, 0.28, 3.0),
        {0: "array", 1: "array", 2: "array", 3: "loss_mask", 4: "real", 5: "real", 6: "real"}, ranges={4: [-0.1, 1.5], 5: [-0.1], 6: [0.5]},
        unusual=("fp32", "grad", "neg_stride"), valid=("dual_clip:none",)),
    Row(_positional(numeric.fork_token, 1, ("steps", "lr", "p_rare", "eps_low", "eps_high"), "fork_token"), ("ppo", 2, 30.0, 0.01, 0.2, 0.28),
        {0: "choice", 1: "int", 2: "real", 3: "real", 4: "real", 5: "real"}, ranges={1: [0], 2: [-1.0], 3: [0.0, 1.0, 1.5], 4: [-0.1, 1.5], 5: [-0.1]}),
    # -- trust region
    *[Row(f, (LOGP, OLD_LOGP), {0: "array", 1: "array"}, unusual=("fp32", "grad", "0d", "neg_stride"), empty_ok=True) for f in (numeric.kl_k1, numeric.kl_k2, numeric.kl_k3)],
    Row(_positional(numeric.clip_excess, 1, ("eps_high",), "clip_excess"), (RATIO, 0.28), {0: "ratio", 1: "real"}, ranges={1: [-0.1]},
        unusual=("fp32", "grad", "0d", "neg_stride"), empty_ok=True),
    Row(n_trust.per_prefix, (n_weights.setting().theta, n_weights.setting().theta_old), {0: "theta_setting", 1: "theta_setting"}, unusual=("fp32",)),
    # -- losses (issue 10) and off-policy corrections (issue 9): trainer-facing batched helpers
    Row(n_losses.aggregate, (ADV, MASK, "token-mean"), {0: "array", 1: "loss_mask", 2: "choice"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.broadcast_advantage, (ADV[:, 0], MASK), {0: "array", 1: "loss_mask"}, unusual=("fp32", "grad", "neg_stride"), valid=("mask:shape",)),
    Row(n_losses.gpg_advantages, (GROUP,), {0: "array"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.gpg_advantages, 1, ("f_norm", "valid"), "gpg_advantages[options]"), (GROUP, 1.0, "advantage"), {1: "real", 2: "choice"},
        ranges={1: [0.0, -1.0, math.inf]}),
    Row(n_losses.kl_penalty, (LOGP, OLD_LOGP, MASK), {0: "array", 1: "array", 2: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.kl_penalty, 3, ("estimator", "clamp"), "kl_penalty[options]"), (LOGP, OLD_LOGP, MASK, "k3", False), {3: "choice", 4: "bool"}),
    Row(n_losses.kl_estimate, (torch.zeros(3, dtype=torch.float64), "k3"), {1: "choice"}),
    Row(n_losses.verl_kl_penalty, (LOGP, OLD_LOGP, MASK), {0: "array", 1: "array", 2: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.verl_kl_penalty, 3, ("kl_penalty",), "verl_kl_penalty[kl_penalty]"), (LOGP, OLD_LOGP, MASK, "low_var_kl+"), {3: "choice"}),
    Row(n_losses.masked_whiten, (ADV, MASK), {0: "array", 1: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.opo_advantages, (GROUP, GROUP + 3.0), {0: "array", 1: "array"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.passk_advantages, ((GROUP > 0.7).astype(float),), {0: "array"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.policy_loss, ("ppo", LOGP, OLD_LOGP, ADV, MASK), {0: "choice", 1: "array", 2: "array", 3: "array", 4: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.policy_loss, 5, ("agg",), "policy_loss[agg]"), ("ppo", LOGP, OLD_LOGP, ADV, MASK, "seq-mean-token-mean"), {5: "choice"}, valid=("agg:none",)),
    Row(n_losses.policy_weight, ("ppo", LOGP, OLD_LOGP, ADV, MASK), {0: "choice", 1: "array", 2: "array", 3: "array", 4: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.penalty_gradient, ("ppo", LOGP, OLD_LOGP, MASK), {0: "choice", 1: "array", 2: "array", 3: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.kl_cov_selection, (LOGP, ADV, MASK), {0: "array", 1: "array", 2: "loss_mask"}, unusual=("fp32", "neg_stride")),
    Row(n_losses.clip_cov_selection, (LOGP, OLD_LOGP, ADV, MASK), {0: "array", 1: "array", 2: "array", 3: "loss_mask"}, unusual=("fp32", "neg_stride")),
    Row(n_losses.reinforce_pp_advantages, (ADV, MASK), {0: "array", 1: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.reinforce_pp_advantages, 2, ("gamma",), "reinforce_pp_advantages[gamma]"), (ADV, MASK, 0.9), {2: "real"}, ranges={2: [-0.1, 1.5]}),
    Row(_positional(n_losses.masked_whiten, 2, ("shift_mean", "unbiased", "eps", "count_eps"), "masked_whiten[options]"), (ADV, MASK, True, True, 1e-8, 1e-8),
        {2: "bool", 3: "bool", 4: "real", 5: "real"}, ranges={4: [-1e-8], 5: [-1e-8]}),
    Row(_positional(n_losses.passk_advantages, 1, ("eps", "std"), "passk_advantages[options]"), ((GROUP > 0.7).astype(float), 1e-6, True),
        {1: "real", 2: "bool"}, ranges={1: [-1e-6]}),
    Row(n_losses.reinforce_pp_baseline_advantages, (GROUP, np.ones(GROUP.shape + (3,))), {0: "array", 1: "loss_mask"}, unusual=("fp32", "grad", "neg_stride"), valid=("mask:shape",)),
    Row(n_losses.remax_advantages, (ADV, ADV[:, 0], MASK), {0: "array", 1: "array", 2: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.sequence_log_prob, (LOGP, MASK), {0: "array", 1: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.softmax_score, (LOGITS, TOKENS), {0: "array", 1: "index"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.stable_softmax, (LOGITS,), {0: "array"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.token_entropy, (LOGITS,), {0: "array"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.token_log_probs, (LOGITS, TOKENS), {0: "array", 1: "index"}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.token_weights, (MASK, "token-mean"), {0: "loss_mask", 1: "choice"}, valid=("mask:shape",)),
    Row(n_losses.value_loss, (V_BT, NV_BT, R_BT, MASK), {0: "array", 1: "array", 2: "array", 3: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    *[Row(getattr(n_off, f), (LOGP, OLD_LOGP, MASK), {0: "array", 1: "array", 2: "loss_mask"}, unusual=("fp32", "grad", "neg_stride"))
      for f in ("token_ratio", "sequence_ratio", "masked_token_ratio", "masked_sequence_ratio", "truncated_token_ratio",
                "truncated_sequence_ratio", "geometric_sequence_mask", "kl_rejection_mask")],
    # -- issue 29: the registry's new methods' options, the readings per commit, prompt-mean and the M2PO selection
    Row(_positional(n_losses.policy_loss, 5, ("tv_delta", "dppo_type", "kl_tau"), "policy_loss[dppo]"), ("dppo", LOGP, OLD_LOGP, ADV, MASK, (0.2, 0.2), "binary_tv", 0.01),
        {5: "pair", 6: "choice", 7: "real"}, ranges={7: [-0.1, math.inf]}),
    Row(_positional(n_losses.policy_loss, 5, ("tv_delta", "is_cap"), "policy_loss[dppo_tv]"), ("dppo_tv", LOGP, OLD_LOGP, ADV, MASK, (0.2, 0.2), 3.0),
        {5: "pair", 6: "real"}, ranges={6: [0.0, -1.0]}),
    Row(_positional(n_losses.policy_loss, 5, ("band_delta", "kl_tau"), "policy_loss[tv_band]"), ("tv_band", LOGP, OLD_LOGP, ADV, MASK, 0.1, 0.001),
        {5: "real", 6: "real"}, ranges={5: [-0.1, math.inf], 6: [-0.1]}),
    Row(_positional(n_losses.policy_loss, 5, ("dro_beta",), "policy_loss[dro]"), ("dro", LOGP, OLD_LOGP, ADV, MASK, 0.1), {5: "real"}, ranges={5: [0.0, -0.1]}),
    Row(_positional(n_losses.policy_loss, 5, ("is_bounds",), "policy_loss[icepop]"), ("icepop", LOGP, OLD_LOGP, ADV, MASK, (0.5, 5.0)), {5: "bounds"}),
    Row(_positional(n_losses.policy_loss, 5, ("opsm_delta",), "policy_loss[opsm]"), ("opsm", LOGP, OLD_LOGP, ADV, MASK, 0.05), {5: "real"},
        ranges={5: [-0.1, math.inf]}),
    Row(_positional(n_losses.policy_loss, 5, ("agg", "convention", "norm"), "policy_loss[convention]"),
        ("ppo", LOGP, OLD_LOGP, ADV, MASK, "seq-mean-token-sum-norm", "verl@1dda039", 4.0), {5: "choice", 6: "choice", 7: "real"},
        ranges={7: [0.0, -1.0]}, valid=("agg:none", "convention:none", "norm:none")),
    Row(_positional(n_losses.aggregate, 3, ("groups",), "aggregate[prompt-mean]"), (ADV, MASK, "prompt-mean", np.array([0, 0, 1])), {2: "choice", 3: "prompt_ids"}),
    Row(_positional(n_losses.m2po_selection, 3, ("threshold",), "m2po_selection"), (LOGP, OLD_LOGP, MASK, 0.05),
        {0: "array", 1: "array", 2: "loss_mask", 3: "real"}, ranges={3: [0.0, -0.1]}, unusual=("fp32", "neg_stride")),
    *[Row(f, (("verl", "TRL"),), {0: "trainers"}, valid=("trainers:none",)) for f in (n_losses.trainer_table, d_methods.peer_table, n_variants.divergence_table)],
    Row(n_variants.divergence_cells, ("CISPO",), {0: "choice"}),
    Row(d_losses.reading_weight, ("verl@1dda039", 3), {0: "choice", 1: "int"}, ranges={1: [1, 0]}),
    Row(d_losses.row_ratio_derivation, (3,), {0: "int"}, ranges={0: [1, 0]}),
    # -- issue 18 item 3 (brief E): the trainers' estimators, sampler corrections and conventions as arguments
    Row(n_losses.batch_scaled_advantages, (GROUP,), {0: "array"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.batch_scaled_advantages, 1, ("eps",), "batch_scaled_advantages[eps]"), (GROUP, 1e-4), {1: "real"}, ranges={1: [-1e-4]}),
    Row(n_losses.bias_corrected_kl, (LOGP, OLD_LOGP, LOGP * 0.5, MASK), {0: "array", 1: "array", 2: "array", 3: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.bias_corrected_kl, 4, ("level",), "bias_corrected_kl[level]"), (LOGP, OLD_LOGP, LOGP * 0.5, MASK, "sequence"), {4: "choice"}),
    Row(_positional(n_losses.high_entropy_mask, 2, ("top_quantile",), "high_entropy_mask"), (np.abs(ADV), MASK, 0.5), {0: "array", 1: "loss_mask", 2: "real"},
        ranges={2: [0.0, 1.5, -0.5]}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.optimal_token_baseline_advantages, (R_BT, LOGP, np.full(T_SHAPE, 0.5), MASK), {0: "array", 1: "array", 2: "array", 3: "loss_mask"},
        unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.optimal_token_baseline_advantages, 4, ("is_weights", "align", "handle_zero_tail", "eps"), "optimal_token_baseline_advantages[options]"),
        (R_BT, LOGP, np.full(T_SHAPE, 0.5), MASK, RATIO, "response", True, 1e-8), {4: "ratio", 5: "choice", 6: "bool", 7: "real"}, ranges={7: [-1e-8]},
        valid=("is_weights:none", "is_weights:inf")),
    # -- issue 29 item 2: the trainers' estimators on a flat batch, reward shaping, the KL in the reward, a teacher
    Row(_positional(n_losses.grouped_advantages, 3, ("singleton",), "grouped_advantages"), (numeric.rloo_advantages, FLAT, UID, 0.0),
        {0: "callable", 1: "array", 2: "group_index", 3: "real"}, unusual=("fp32", "grad", "neg_stride"), valid=("singleton:none",)),
    Row(n_losses.group_ids, (UID, 6), {0: "group_index", 1: "int"}, ranges={1: [-1]}),
    Row(n_losses.maxrl_advantages, (GROUP,), {0: "array"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.maxrl_advantages, 1, ("eps", "nonpositive"), "maxrl_advantages[options]"), (GROUP, 1e-6, "divide"), {1: "real", 2: "choice"},
        ranges={1: [-1e-6]}),
    Row(n_losses.length_penalized_advantages, (GROUP, GROUP * 10), {0: "array", 1: "array"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.length_penalized_advantages, 2, ("input_tokens", "turns"), "length_penalized_advantages[options]"),
        (GROUP, GROUP * 10, GROUP + 3, GROUP + 1), {2: "array", 3: "array"}, valid=("input_tokens:none", "turns:none")),
    Row(_positional(n_losses.gdpo_advantages, 2, ("weights", "eps", "singleton", "whiten", "mask", "whiten_eps"), "gdpo_advantages"),
        (FLAT_K, UID, [1.0, 0.5], 1e-6, 1.0, "tokens", MASK6, 1e-8), {0: "array", 1: "group_index", 3: "real", 5: "choice", 6: "loss_mask", 7: "real"},
        ranges={3: [-1e-6], 7: [-1e-8]}, unusual=("fp32", "grad", "neg_stride"), valid=("whiten:none", "mask:shape")),
    Row(_positional(n_losses.normalize_by_levels, 2, ("mean_level", "std_level", "leave_one_out", "unbiased", "eps"), "normalize_by_levels"),
        (FLAT, UID, "group", "batch", True, True, 1e-5), {0: "array", 1: "group_index", 2: "choice", 3: "choice", 4: "bool", 5: "bool", 6: "real"},
        ranges={6: [-1e-5]}, unusual=("fp32", "grad", "neg_stride"), valid=("mean_level:none", "std_level:none")),
    Row(_positional(n_losses.ema_baseline_advantages, 1, ("agents", "baselines", "decay"), "ema_baseline_advantages"), (FLAT, None, {"default": 0.3}, 0.9),
        {0: "array", 3: "real"}, ranges={3: [-0.1, 1.5]}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.overlong_penalized_rewards, 2, ("max_length", "buffer", "factor"), "overlong_penalized_rewards"),
        (FLAT, np.array([3.0, 9.0, 10.0, 1.0, 8.0, 0.0]), 10.0, 4.0, 1.0), {0: "array", 1: "array", 2: "real", 3: "real", 4: "real"},
        ranges={2: [1.0, math.inf], 3: [0.0, -1.0], 4: [-1.0]}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.stop_properly_rewards, 2, ("coef",), "stop_properly_rewards"), (FLAT, FLAT > 0.5, 0.5), {0: "array", 1: "flags", 2: "real"},
        ranges={2: [1.5, math.inf]}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.kl_in_reward, 4, ("beta", "kl_penalty"), "kl_in_reward"), (ADV, LOGP, OLD_LOGP, MASK, 0.1, "kl"),
        {0: "array", 1: "array", 2: "array", 3: "loss_mask", 4: "real", 5: "choice"}, ranges={4: [math.inf]}, unusual=("fp32", "grad", "neg_stride")),
    Row(n_losses.AdaptiveKLController, (0.01, 0.1, 1000.0), {0: "real", 1: "real", 2: "real"}, ranges={0: [-1.0, math.inf], 1: [0.0, math.inf], 2: [0.0]}),
    Row(_kl_update, (0.5, 64), {0: "real", 1: "real"}, ranges={0: [math.inf], 1: [-1]}),
    Row(_positional(n_losses.opd_advantages, 4, ("coef",), "opd_advantages"), (ADV[:, 0], LOGP, OLD_LOGP, MASK, 0.5),
        {0: "array", 1: "array", 2: "array", 3: "loss_mask", 4: "real"}, ranges={4: [math.inf]}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_losses.rlsd_advantages, 4, ("lam", "clip", "negative_only"), "rlsd_advantages"), (ADV[:, 0], LOGP, OLD_LOGP, MASK, 0.5, 0.2, True),
        {0: "array", 1: "array", 2: "array", 3: "loss_mask", 4: "real", 5: "real", 6: "bool"}, ranges={4: [-0.1, 1.5], 5: [-0.1, 1.5]},
        unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_variants.check_singleton, 1, ("rewards",), "check_singleton"), (_lone, (0.0, 1.0, 3.0)), {0: "callable", 1: "law_finite"}),
    Row(_positional(n_losses.aggregate, 3, ("weight", "count_eps", "empty_rows"), "aggregate[options]"), (ADV, MASK, "seq-mean-token-mean", RATIO, 1e-8, "exclude"),
        {3: "array", 4: "real", 5: "choice"}, ranges={4: [-1e-8]}, valid=("weight:none", "weight:bool")),
    Row(_positional(n_losses.token_weights, 2, ("count_eps", "empty_rows"), "token_weights[options]"), (MASK, "seq-mean-token-mean", 1e-8, "exclude"),
        {2: "real", 3: "choice"}, ranges={2: [-1e-8]}),
    Row(_positional(n_losses.value_loss, 4, ("weight",), "value_loss[weight]"), (V_BT, NV_BT, R_BT, MASK, RATIO), {4: "array"}, valid=("weight:none", "weight:bool")),
    Row(_positional(n_losses.reinforce_pp_advantages, 2, ("gamma", "unbiased", "eps"), "reinforce_pp_advantages[options]"), (ADV, MASK, 1.0, False, 1e-8),
        {3: "bool", 4: "real"}, ranges={4: [-1e-8]}),
    Row(_positional(n_losses.reinforce_pp_baseline_advantages, 2, ("unbiased", "eps"), "reinforce_pp_baseline_advantages[options]"),
        (GROUP, np.ones(GROUP.shape + (3,)), False, 1e-8), {2: "bool", 3: "real"}, ranges={3: [-1e-8]}),
    Row(n_off.batch_normalized_weights, (RATIO, MASK), {0: "ratio", 1: "loss_mask"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_off.batch_normalized_weights, 2, ("level", "eps"), "batch_normalized_weights[options]"), (RATIO, MASK, "sequence", 1e-8),
        {2: "choice", 3: "real"}, ranges={3: [-1e-8]}),
    Row(_positional(n_off.kl_rejection_mask, 3, ("threshold", "estimator", "level"), "kl_rejection_mask[options]"), (LOGP, OLD_LOGP, MASK, 0.05, "k2", "seq_max"),
        {3: "real", 4: "choice", 5: "choice"}, ranges={3: [-0.05]}),
    Row(_positional(n_off.truncated_sequence_ratio, 3, ("cap", "floor"), "truncated_sequence_ratio[floor]"), (LOGP, OLD_LOGP, MASK, 2.0, 0.5),
        {3: "real", 4: "real"}, ranges={3: [0.0, -1.0, 0.5], 4: [-0.5, 2.0]}),
    Row(d_trust.bias_corrected_kl_gradient, (2,), {0: "int"}, ranges={0: [1]}),
    # -- issue 29: the trainers' rejection and masking rules (numeric.off_policy.rollout, .masks, .corrections)
    Row(_positional(n_off.rollout_is_weights, 3, ("rollout_is", "rollout_is_threshold"), "rollout_is_weights"), (LOGP, OLD_LOGP, MASK, "token", "0.5_2.0"),
        {0: "array", 1: "array", 2: "loss_mask", 3: "choice", 4: "real"}, ranges={4: [0.0, -1.0, "2_0.5", "a_b"]}, unusual=("fp32", "grad", "neg_stride"),
        valid=("rollout_is_threshold:string",)),
    Row(_positional(n_off.rollout_rejection_mask, 3, ("rollout_rs", "rollout_rs_threshold"), "rollout_rejection_mask"), (LOGP, OLD_LOGP, MASK, "seq_max_k3", 0.1),
        {0: "array", 1: "array", 2: "loss_mask", 3: "choice", 4: "real"}, ranges={4: [0.0, "0.1_0.2", "0.1,0.2"]}, unusual=("fp32", "grad", "neg_stride"),
        valid=("rollout_rs_threshold:string",)),
    Row(_positional(n_off.rejection_sampling_weight, 3, ("level", "action", "metric", "agg", "upper", "lower"), "rejection_sampling_weight"),
        (LOGP, OLD_LOGP, MASK, "sequence", "clamp", "ratio", "max", 2.0, 0.5),
        {0: "array", 1: "array", 2: "loss_mask", 3: "choice", 4: "choice", 5: "choice", 6: "choice", 7: "real", 8: "real"},
        ranges={7: [1.0, 0.4], 8: [0.0, 3.0]}, unusual=("fp32", "grad", "neg_stride"), valid=("lower:none",)),
    Row(_positional(n_off.m2po_mask, 3, ("threshold",), "m2po_mask"), (LOGP, OLD_LOGP, MASK, 0.04),
        {0: "array", 1: "array", 2: "loss_mask", 3: "real"}, ranges={3: [0.0, -1.0, math.inf]}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_off.loglinear_proximal_log_prob, 4, ("current_version",), "loglinear_proximal_log_prob"), (LOGP, OLD_LOGP, np.full(T_SHAPE, 3.0), MASK, 5),
        {0: "array", 1: "array", 2: "array", 3: "loss_mask", 4: "int"}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_off.trust_region_mask, 4, ("low", "high", "divergence"), "trust_region_mask"), (LOGP, OLD_LOGP, ADV, MASK, 0.1, 0.2, "binary_kl"),
        {0: "array", 1: "array", 2: "array", 3: "loss_mask", 4: "real", 5: "real", 6: "choice"}, ranges={4: [-0.1], 5: [-0.1]},
        unusual=("fp32", "grad", "neg_stride"), valid=("advantages:none",)),
    Row(_positional(n_off.off_policy_sequence_mask, 4, ("delta",), "off_policy_sequence_mask"), (LOGP, OLD_LOGP, ADV[:, 0], MASK, 0.1),
        {0: "array", 1: "array", 2: "array", 3: "loss_mask", 4: "real"}, ranges={4: [math.inf]}, unusual=("fp32", "grad", "neg_stride")),
    Row(_positional(n_off.outlier_sequence_mask, 3, ("low", "high"), "outlier_sequence_mask"), (LOGP, OLD_LOGP, MASK, 0.5, 2.0),
        {0: "array", 1: "array", 2: "loss_mask", 3: "real", 4: "real"}, ranges={3: [-0.5, 3.0]}, unusual=("fp32", "grad", "neg_stride"),
        valid=("low:none", "high:none")),
    Row(n_off.m2po_limit, (EP, 0.04), {0: "episodes", 1: "real"}, ranges={1: [0.0, math.inf]}),
    Row(n_off.rule_moments, (EP, "verl Seq-MIS", 0.5), {0: "episodes", 1: "choice", 2: "real"}, ranges={2: [math.inf]}),
    Row(n_off.chain_score_moments, (3, 4, 5), {0: "int", 1: "int", 2: "int"}, ranges={0: [0], 1: [1]}),
    *[Row(getattr(n_off, f), (0.3,), {0: "real"}, ranges={0: [math.inf]}) for f in ("tinylm_episodes", "two_turn_agent", "token_bias_closed_form")],
    Row(n_off.estimator_samples, (EP, EP_W, EP.reward.numpy()), {0: "episodes", 1: "array", 2: "array"}, unusual=("fp32", "neg_stride"), valid=("advantages:none",)),
    Row(n_off.sampler_moments, (EP, EP_G), {0: "episodes", 1: "array"}, unusual=("fp32", "neg_stride")),
    Row(n_off.scheme_moments, (EP, "token TIS", 0.5), {0: "episodes", 1: "choice", 2: "real"}, ranges={2: [math.inf]}),
    Row(n_off.credit_assignment, (EP,), {0: "episodes"}),
    Row(n_off.feedback_term, (EP, 0.5), {0: "episodes", 1: "real"}, ranges={1: [-math.inf]}),
    Row(n_off.truncation_bias, (EP, 2.0, "sequence"), {0: "episodes", 1: "real", 2: "choice"}, ranges={1: [0.0, -1.0]}),
    Row(n_losses.response_mask, (IDS, np.array([2, 1]), 0, 2), {0: "ids", 1: "lengths", 2: "int", 3: "int"}, unusual=("neg_stride",)),
    # -- the numeric side of the variant checkers
    Row(n_variants.advantage_values, (numeric.rloo_advantages, [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], 3), {0: "callable", 1: "groups", 2: "int"}, ranges={2: [1]}),
    Row(n_variants.require_advantage_callable, (numeric.rloo_advantages, 3), {0: "callable", 1: "int"}, ranges={1: [1]}),
    Row(n_variants.advantage_table, (numeric.rloo_advantages, 3, "binary"), {0: "callable", 1: "int", 2: "law_finite"}, ranges={1: [1]}),
    *[Row(f, (GROUP,), {0: "array"}, unusual=("fp32", "grad", "neg_stride"))
      for f in (n_variants.trl_grpo_advantages, n_variants.verl_dr_grpo_advantages, n_variants.openrlhf_rloo_advantages)],
    Row(n_variants.confirm_group, (REP_G, numeric.rloo_advantages, None), {0: "group_report", 1: "callable", 2: "constants"}),
    Row(n_variants.confirm_token, (REP_T, -R_SYM * A_SYM * ELL, None), {0: "token_report", 1: "token_expr", 2: "constants"}),
    Row(n_variants.token_report_from_callable, (_is_loss, None), {0: "callable", 1: "constants"}),
    # -- the report
    Row(n_report.format_report, (CHECKS, {"x": "boom"}, 60), {0: "checks", 1: "errors", 2: "int_or_none"}, ranges={2: [0]}),
    Row(n_report.report_json, (CHECKS, {}), {0: "checks", 1: "errors"}),
    Row(n_report.main, (["--list"],), {0: "argv"}),
    # -- the check registry
    Row(numeric.check, ("x", 0.0, 1.0, "exact"), {0: "name", 1: "real_value", 2: "real", 3: "choice"}, ranges={2: [-1.0]}),
    Row(numeric.maxabs, (np.zeros(3), np.zeros(3)), {0: "array_any", 1: "array_any"}, empty_ok=True),
    # -- derivations
    Row(d_baselines.prefix_baseline, (2,), {0: "int"}, ranges={0: [1]}),
    Row(d_baselines.improving_baselines, (1,), {0: "sign"}),
    *[Row(f, ("ppo",), {0: "choice"}) for f in (d_weights.gradient_weight, d_weights.token_loss, d_weights.weight_derivation)],
    *[Row(f, (3, "population"), {0: "int", 1: "choice"}, ranges={0: [1]}) for f in (d_groups.grpo_weight, d_groups.grpo_weight_coefficients, d_groups.grpo_weight_derivation)],
    Row(d_groups.zscore_advantage, ([1, 0, 0], "population"), {0: "sym_list", 1: "choice"}),
    Row(d_groups.grpo_weight_closed_forms, ((2,), "population"), {0: "int_tuple", 1: "choice"}),
    *[Row(f, (2,), {0: "int"}, ranges={0: [0]}) for f in (d_returns.gae_lambda_one, d_returns.gae_lambda_zero, d_returns.gae_unrolled, d_returns.one_done_for_both, d_returns.reward_to_go_unbiased)],
    Row(d_returns.past_reward_score_vanishes, (2,), {0: "int"}, ranges={0: [1]}),
    Row(d_score.environment_gradient, (False, 2, 2), {0: "bool", 1: "int", 2: "int"}, ranges={1: [1], 2: [1]}),
    Row(d_score.instances, (d_score.expected_score, 2), {0: "callable", 1: "int"}, ranges={1: [1]}),
    Row(d_trust.kl_estimator_gradients, (2,), {0: "int"}, ranges={0: [1]}),
    Row(d_trust.kl_form_gradients, (2,), {0: "int"}, ranges={0: [1]}),
    *[Row(f, (2,), {0: "int_or_none"}, ranges={0: [1]}) for f in (d_trust.k3_unbiased, d_trust.kl_estimators_unbiased)],
    Row(SoftmaxPolicy, (3, "theta"), {0: "int", 1: "name"}, ranges={0: [1]}),
    Row(IndexedSoftmax, ("theta",), {0: "name"}),
    Row(IIDGroup, (("R", "s"), None), {0: "names", 1: "int_or_none"}, ranges={1: [0]}),
    # -- derivations: the losses and off-policy chapters
    Row(d_losses.aggregation_weight, ("token-mean", 3), {0: "choice", 1: "int"}, ranges={1: [1]}),
    Row(d_losses.aggregation_weights, (3,), {0: "int"}, ranges={0: [1]}),
    Row(d_losses.gspo_derivation, (3,), {0: "int"}, ranges={0: [1]}),
    Row(_positional(d_losses.sequence_weight_derivation, 2, (), "sequence_weight_derivation"), ("vespo", 2), {0: "choice", 1: "int"}, ranges={1: [1]}),
    Row(d_losses.penalty_gradient, ("ppo",), {0: "choice"}),
    Row(numeric.variants.certificate_table, ("loss",), {0: "choice"}),
    Row(numeric.variants.certificate_latex, ("loss",), {0: "choice"}),
    Row(numeric.variants.certificate, ("rloo",), {0: "choice"}),
    Row(d_methods.undecided, ("ppo",), {0: "choice"}),
    Row(d_losses.weight, ("ppo",), {0: "choice"}),
    *[Row(f, ("ppo",), {0: "choice"}) for f in (d_methods.method, d_methods.form, d_methods.form_of, d_methods.symbol_values)],
    Row(_trainer_loss_value, ("TRL", 'loss_type "grpo"'), {0: "choice", 1: "choice"}, label="trainer_loss"),
    *[Row(f, (2,), {0: "int"}, ranges={0: [1]}) for f in (d_off.martingale_orthogonality, d_off.turn1_decomposition, d_off.unmasked_feedback_term)],
    # -- derivations: the step machinery and the proofs
    Row(d_derivation.Claim, (X + 1, "=", 1 + X, None, None, (), ()), {0: "expr", 1: "choice", 2: "expr", 3: "optional_callable", 4: "mapping", 5: "premises", 6: "premises"}),
    Row(d_derivation.Step, (X + 1, 1 + X, "commute", "=", None, None, (), None), {0: "expr", 1: "expr", 2: "reason", 3: "choice", 4: "proof", 5: "mapping", 6: "conditions", 7: "optional_str"}),
    Row(d_derivation.Derivation, ("a title", X, ("x > 0",), None), {0: "title", 1: "expr", 2: "assumptions", 3: "optional_callable"}, valid=("start:none",)),
    Row(d_derivation.is_zero, (X - X, None, None), {0: "expr", 1: "mapping", 2: "optional_callable"}),
    Row(d_derivation.reason_to_latex, ("a $x$",), {0: "reason"}, valid=("reason:empty",)),  # an empty reason is empty text
    Row(d_regions.decide_sign, (X - 1,), {0: "expr"}),
    Row(_positional(d_regions.resolve, 2, ("keep_variables",), "resolve"), (X - 1, None, False), {0: "expr", 1: "mapping", 2: "bool"}),
    Row(d_canonical.reject_vacuous_derivatives, (X,), {0: "expr"}),
    Row(d_canonical.refuting_point, (X + 1,), {0: "expr"}),
    Row(d_canonical.evaluated, (X + 1,), {0: "expr"}),
    Row(d_canonical.facts_key, ({X: 1},), {0: "mapping"}),
    Row(d_regions.at_point, (X - 1, {X: 2}), {0: "expr", 1: "mapping"}),
    Row(d_kernel.relation_holds, (X**2 + 1, ">=", 2 * X), {0: "expr", 1: "choice", 2: "expr"}),
    Row(d_kernel.implies, ("=", "<="), {0: "choice", 1: "choice"}),
    Row(d_kernel.check, (CLAIM, d_proofs.holds), {0: "claim", 1: "proof"}),
    Row(d_kernel.require_consistent, ((X > 1,),), {0: "premises"}),
    Row(d_kernel.Verdict, ("expand", None), {0: "title", 1: "optional_str"}),
    Row(d_proofs.interval_points, (X, [1, 2], 0), {0: "symbol", 1: "expr_list", 2: "expr"}, ranges={2: [5]}),
    Row(_positional(d_proofs.on_regions, 1, ("label", "inner"), "on_regions"), ((X, [1]), "regions", None), {0: "cut", 1: "title", 2: "optional_callable"}),
    Row(d_proofs.limit_along, (X, 1), {0: "symbol", 1: "expr"}),
    Row(d_proofs.by_cases, (X, (0, 1)), {0: "symbol", 1: "values"}),
    Row(d_proofs.pointwise, (d_proofs.holds,), {0: "proof"}),
    Row(_positional(d_proofs.by_lemma, 2, ("termwise",), "by_lemma"), (LEMMA, {X: 2}, False), {0: "derivation", 1: "mapping", 2: "bool"}),
    *[Row(f, (X, sp.Interval(0, 1)), {0: "symbol", 1: "set"}) for f in (d_proofs.minimum_over, d_proofs.same_solutions)],
    Row(d_proofs.numerically, (30,), {0: "int"}, ranges={0: [0, 5]}),
    Row(d_proofs.to_tolerance, (1e-12,), {0: "real"}, ranges={0: [0, 0.5, -1e-13]}),
    Row(d_proofs.from_table, (X, sp.Symbol("s_1"), (0, 1), (1 - sp.Symbol("p"), sp.Symbol("p")), (-1, 1), 2, [(0, (1, 0), 0), (0, (0, 1), -1), (1, (1, 0), 1), (1, (0, 1), 0)]),
        {0: "symbol", 1: "expr", 5: "int"}, ranges={5: [1]}),
    Row(d_definitions.Definitions, ({X: 1},), {0: "mapping"}),
    Row(d_definitions.Differentiation, (X, (), ()), {0: "symbol"}),
    Row(d_proofs.at_values, (G_SYM, (2, 3), None), {0: "symbol", 1: "values", 2: "optional_callable"}),
    # -- the variant checkers (issue 11's bad inputs): the entry points in numeric, the symbolic core in derivations
    Row(_positional(n_variants.check_group_advantage, 1, ("G", "rewards", "constants", "name", "confirm"), "check_group_advantage"),
        (GRP.R[GRP.i] - GRP.mean_others(GRP.i), None, "general", None, "RLOO", False),
        {0: "group_advantage", 1: "int_or_none", 2: "law", 3: "constants", 4: "title", 5: "bool"}, ranges={1: [1]}),
    Row(_positional(n_variants.check_group_advantage, 1, ("G", "rewards", "constants", "name", "confirm"), "check_group_advantage[callable]"),
        (numeric.rloo_advantages, 3, "binary", None, "RLOO", False),
        {0: "group_advantage_fn", 1: "int", 2: "law_finite", 5: "bool"}, ranges={1: [1]}),
    Row(_positional(n_variants.check_loss_execution, 1, ("world_sizes", "micro_batches", "engine", "batch"), "check_loss_execution"),
        (_execution_loss, (2,), (2,), "simulate", (4, 3)), {0: "callable", 1: "int_tuple", 2: "int_tuple", 3: "choice"},
        ranges={1: [(3,), (8,)], 2: [(3,)]}),
    Row(_positional(n_variants.check_token_loss, 1, ("constants", "confirm"), "check_token_loss"),
        (-R_SYM * A_SYM * ELL, None, False), {0: "token_loss", 1: "constants", 2: "bool"}),
    Row(_positional(n_variants.check_token_loss, 1, ("constants", "confirm"), "check_token_loss[callable]"),
        (_is_loss, None, False), {0: "token_loss_fn", 2: "bool"}),
    Row(_positional(d_variants.derive_group_advantage, 1, ("G", "rewards", "constants", "name"), "derive_group_advantage"),
        (GRP.R[GRP.i] - GRP.mean_others(GRP.i), None, "general", None, "RLOO"),
        {0: "group_advantage", 1: "int_or_none", 2: "law", 3: "constants", 4: "title"}, ranges={1: [1]}),
    Row(_positional(d_variants.derive_token_loss, 1, ("constants",), "derive_token_loss"), (-R_SYM * A_SYM * ELL, None), {0: "token_loss", 1: "constants"}),
    Row(d_variants.token_loss_expression, (-R_SYM * A_SYM * ELL, None), {0: "token_loss", 1: "constants"}),
    Row(d_variants.count_patterns, ("binary", 3), {0: "law_finite", 1: "int"}, ranges={1: [1]}),
    Row(d_variants.breakpoints, (-R_SYM * A_SYM * ELL,), {0: "expr"}),
    *[Row(f, ("own_reward",), {0: "choice"}) for f in (d_variants.tutorial_variant, d_variants.tutorial_derivation)],
]

# ----------------------------------------------------------------------------- variants


def _poison(x, value):
    """A copy of the array or tensor ``x`` with one entry set to ``value``."""
    if isinstance(x, torch.Tensor):
        y = x.detach().clone().reshape(-1)
        y[len(y) // 2] = value
        return y.reshape(x.shape)
    y = np.array(x, dtype=float).reshape(-1)
    y[len(y) // 2] = value
    return y.reshape(np.shape(x))


def bad_variants(kind: str, valid):
    """``(label, bad value)`` pairs for an argument of this kind."""
    nan, inf = math.nan, math.inf
    if kind in ("theta", "theta_setting", "lm_vector", "prefix_vector", "table", "vector3"):
        out = [("nan", _poison(valid, nan)), ("inf", _poison(valid, inf)), ("-inf", _poison(valid, -inf)),
               ("numpy", valid.detach().numpy()), ("list", valid.tolist()), ("complex", valid.to(torch.complex128)),
               ("shape", valid[..., :-1]), ("empty", valid[..., :0]), ("string", "abc")]
        if kind in ("theta", "theta_setting"):
            out.append(("int dtype", valid.to(torch.int64)))
        return out
    if kind == "theta_any":
        return [("nan", _poison(valid, nan)), ("inf", _poison(valid, inf)), ("complex", valid.to(torch.complex128)), ("string", "abc")]
    if kind in ("array", "ratio", "array_any"):
        x = np.asarray(valid)
        out = [("complex", x.astype(np.complex128) + 1j), ("string dtype", x.astype(str)), ("string", "abc"), ("object", x.astype(object))]
        if kind != "array_any":  # maxabs takes lists and returns NaN for NaN, which no check passes
            out += [("nan", _poison(x, nan)), ("inf", _poison(x, inf)), ("-inf", _poison(x, -inf)), ("list", x.tolist()), ("bool", x > 0), ("none", None)]
        if kind == "ratio":  # 0 and inf are ratios (an exp that under- or overflowed); negative and NaN are not
            out = [(label, v) for label, v in out if label != "inf"] + [("negative", _poison(x, -1.0))]
        return out
    if kind == "flags":
        x = np.asarray(valid)
        return [("float flags", x.astype(float)), ("list", x.tolist()), ("string", "abc"), ("complex", x.astype(np.complex128))]
    if kind in ("mask", "loss_mask"):  # a loss over an all-masked batch is 0 (verl's convention); the diagnostics refuse it
        x = np.asarray(valid)
        out = [("two", x * 2), ("nan", _poison(x, nan)), ("list", x.tolist()), ("complex", x.astype(np.complex128)), ("shape", x[..., :-1])]
        return out + ([("all zero", np.zeros_like(x))] if kind == "mask" else [])
    if kind == "index":
        x = np.asarray(valid)
        return [("float", x.astype(float)), ("out of range", x + 100), ("negative", x - 100), ("shape", x[..., :-1]), ("list", x.tolist())]
    if kind == "group_index":
        x = np.asarray(valid)
        return [("float", np.linspace(0.0, 1.0, x.size)), ("shape", x[:-1]), ("two-d", x[None]), ("string", "abc"), ("none", None),
                ("float tensor", torch.zeros(x.size))]
    if kind == "samples":
        return [("float", valid.double()), ("out of range", torch.tensor([0, 99])), ("negative", torch.tensor([-1])), ("empty", valid[:0]), ("numpy", valid.numpy())]
    if kind == "real":
        return [("nan", nan), ("string", "0.5"), ("complex", 1j), ("none", None)]
    if kind == "real_value":  # check(): NaN and -inf are failed checks (CheckFailed), not bad arguments
        return [("string", "0.5"), ("complex", 1j), ("none", None), ("array of two", np.zeros(2))]
    if kind == "int":
        return [("float", 2.5), ("bool", True), ("string", "3"), ("none", None)]
    if kind == "int_or_none":
        return [("float", 2.5), ("string", "3")]
    if kind == "int_tuple":
        return [("empty", ()), ("zero", (0,)), ("float", (2.5,)), ("string", "2")]
    if kind == "choice":
        return [("unknown", "no such option"), ("int", 3), ("none", None)]
    if kind == "clip":
        return [("negative", -0.1), ("nan", nan), ("triple", (0.1, 0.2, 0.3)), ("string", "0.2"), ("low > 1", (1.5, 0.2))]
    if kind == "pair":
        return [("negative", (-0.1, 0.2)), ("nan", (nan, 0.2)), ("inf", (0.2, inf)), ("triple", (0.1, 0.2, 0.3)), ("string", "0.2"), ("none", None)]
    if kind == "bounds":
        return [("negative", (-0.1, 5.0)), ("nan", (nan, 5.0)), ("inf", (0.5, inf)), ("low > high", (5.0, 0.5)), ("string", "0.5"), ("none", None)]
    if kind == "prompt_ids":
        x = np.asarray(valid)
        return [("float", x.astype(float)), ("bool", x > 0), ("shape", x[:-1]), ("string", "abc"), ("none", None), ("complex", x.astype(np.complex128))]
    if kind == "trainers":
        return [("unknown", ("verl", "nobody")), ("string", "verl"), ("int", 3)]
    if kind == "sign":
        return [("zero", 0), ("two", 2), ("string", "+")]
    if kind == "lm":
        return [("string", "lm"), ("none", None)]
    if kind == "callable":
        return [("string", "rloo"), ("none", None)]
    if kind == "prefix":
        return [("int", 3), ("eos inside", (0, 1)), ("too long", (1, 1, 1))]
    if kind == "name":
        return [("int", 3), ("empty", "")]
    if kind == "names":
        return [("duplicate", ("R", "R")), ("bad identifier", ("R", "1x")), ("string", "Rs")]
    if kind == "sym_list":
        return [("nan", [1, nan, 0]), ("one answer", [1]), ("string", "abc")]
    if kind == "bool":
        return [("string", "yes"), ("int", 1)]
    if kind == "groups":
        return [("ragged", [[1.0, 0.0], [0.0]]), ("nan", [[nan, 0.0, 0.0]]), ("string item", [["1", 0.0, 0.0]]), ("empty", []), ("string", "abc")]
    if kind == "group_report":
        return [("string", "report"), ("none", None), ("token report", REP_T())]
    if kind == "token_report":
        return [("string", "report"), ("none", None), ("group report", REP_G())]
    if kind == "token_expr":
        return [("string", "-A*ell"), ("none", None), ("matrix", sp.Matrix([1, 2]))]
    if kind == "episodes":
        return [("string", "episodes"), ("none", None), ("dict", {"prob": valid.prob})]
    if kind == "ids":
        x = np.asarray(valid)
        return [("float", x.astype(float)), ("list", x.tolist()), ("one row", x[0]), ("one column", x[:, :1]), ("complex", x.astype(np.complex128)), ("none", None)]
    if kind == "lengths":
        x = np.asarray(valid)
        return [("float", x.astype(float)), ("zero", x * 0), ("shape", x[:1]), ("list", x.tolist()), ("none", None)]
    if kind == "checks":
        return [("string", "abc"), ("none", None), ("list of str", ["a == b"])]
    if kind == "errors":
        return [("list", []), ("none", None), ("int message", {"x": 3})]
    if kind == "argv":
        return [("string", "--list"), ("int", 3), ("list of int", [3])]
    if kind == "expr":
        return [("string", "x"), ("none", None), ("nan", nan), ("object", object())]
    if kind == "expr_list":
        return [("string", "12"), ("empty", []), ("nan", [nan]), ("decreasing", [2, 1]), ("string item", ["a"])]
    if kind == "symbol":
        return [("string", "x"), ("sum", sp.Symbol("y") + 1), ("int", 3)]
    if kind == "claim":
        return [("string", "x >= 0"), ("none", None), ("relation", sp.Symbol("y") >= 0)]
    if kind == "set":
        return [("string", "Reals"), ("list", [0, 1]), ("none", None)]
    if kind == "mapping":
        return [("list", [1]), ("string", "x")]
    if kind == "optional_callable":
        return [("string", "f"), ("int", 3)]
    if kind == "optional_str":
        return [("int", 3), ("list", ["expand"])]
    if kind == "premises":
        return [("list", [X > 0]), ("string", "x > 0")]
    if kind == "reason":
        return [("empty", ""), ("int", 3), ("none", None), ("unmatched $", "a $x")]
    if kind == "title":
        return [("empty", ""), ("int", 3), ("none", None)]
    if kind == "assumptions":
        return [("string", "x > 0"), ("int item", [3]), ("none", None), ("expression item", [X + 1])]
    if kind == "point":
        return [("empty dict", {}), ("string", "x"), ("none", None)]
    if kind == "cut":
        return [("point", {X: 1}), ("string", "x"), ("none", None), ("string breakpoint", (X, ["a"])), ("expression variable", (X + 1, [1]))]
    if kind == "proof":
        return [("function", lambda claim: True), ("int", 3), ("string", "holds")]
    if kind == "conditions":
        return [("string", "x > 0"), ("expression item", (X + 1,)), ("false", (sp.false,)), ("none", None)]
    if kind == "derivation":
        return [("string", "lemma"), ("none", None), ("step", d_derivation.Step(X, X, "same"))]
    if kind == "values":
        return [("empty", ()), ("string", "23"), ("nan", [nan]), ("none", None), ("string item", ["2"])]
    if kind == "group_advantage":
        return [("unknown symbol", GRP.R[GRP.i] - sp.Symbol("z")), ("matrix", sp.Matrix([1, 2])), ("string", "R[i]"), ("none", None), ("score", GRP.s[GRP.i])]
    if kind == "group_advantage_fn":
        return [("wrong shape", _short), ("non-finite", _non_finite), ("string", "rloo"), ("none", None)]
    if kind in ("law", "law_finite"):
        out = [("unknown", "gaussian"), ("one value", [1]), ("nan value", [1, nan]), ("int", 3), ("none", None), ("string item", [1, "a"])]
        return out + ([("general", "general")] if kind == "law_finite" else [])
    if kind == "constants":
        return [("string", "eps"), ("nan value", {sp.Symbol("z"): nan}), ("string key", {"z": 1}), ("list", [1])]
    if kind == "token_loss":
        return [("string", "ppo"), ("none", None), ("matrix", sp.Matrix([1, 2])), ("unknown symbol", -A_SYM * ELL + sp.Symbol("z")), ("no gradient", A_SYM * sg(R_SYM))]
    if kind == "token_loss_fn":
        return [("wrong shape", _one_token), ("non-finite", _token_nan), ("string", "ppo")]
    raise AssertionError(f"unknown kind {kind}")


def _param_name(fn, i: int) -> str:
    params = list(inspect.signature(fn).parameters)
    return params[i]


def _variants(row: Row):
    for i, kind in row.kinds.items():
        for label, bad in [*bad_variants(kind, row.args[i]), *[(f"out of range {v!r}", v) for v in row.ranges.get(i, [])]]:
            if not (label == "empty" and row.empty_ok) and f"{_param_name(row.fn, i)}:{label}" not in row.valid:
                yield i, f"{row.name}:{_param_name(row.fn, i)}:{label}", bad


def _raised_by_the_package(exc: BaseException) -> bool:
    """The innermost frame that raised is in numeric/ or derivations/, not in torch, numpy or SymPy."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(PACKAGE_DIRS)


def _verdict(row: Row, i: int, bad) -> str | None:
    """None if the call raises a named ValueError/TypeError from the package; else what went wrong."""
    name = _param_name(row.fn, i)
    args = list(row.args)
    args[i] = bad
    try:
        result = row.fn(*args)
    except (ValueError, TypeError) as exc:
        if not _raised_by_the_package(exc):
            return f"raised inside a dependency: {type(exc).__name__}: {exc}"
        if not any(a in str(exc) for a in (name, name.rstrip("s"), name + "s")):  # 'reward' / 'rewards'
            return f"message does not name {name!r}: {exc}"
        if row.kinds[i] == "choice" and isinstance(row.args[i], str) and repr(row.args[i]) not in str(exc):
            return f"message does not list the valid choices (e.g. {row.args[i]!r}): {exc}"
        return None
    except Exception as exc:  # noqa: BLE001 - anything else is a crash
        return f"crash: {type(exc).__name__}: {exc}"
    return f"silent result: {type(result).__name__}"


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_bad_input_gets_a_named_error_from_the_package(row):
    """Every bad variant of every argument: a ValueError/TypeError raised by the package that names the argument."""
    problems = [f"{key}: {verdict}" for i, key, bad in _variants(row) if (verdict := _verdict(row, i, bad)) is not None]
    assert problems == []


NOT_SWEPT = {
    "known_label": "bad input: tests/test_variants.py::test_naming_helpers_refuse_unknown_forms",
    "known_names": "bad input: tests/test_variants.py::test_naming_helpers_refuse_unknown_forms",
    "Estimator": "a record of the estimator registry numeric.variants.field.ESTIMATORS (no user input); its rows are tested in tests/test_variants.py",
    "Reading": "a record: of the estimator registry (a trainer's name, its Citation, its rule for a group of one; rows tested in "
               "tests/test_trainer_code.py), of numeric.off_policy.READINGS (rows tested in tests/test_corrections.py), and of numeric.losses.TRAINER_MODES (rows tested in "
               "tests/test_losses.py)",
    "EMABaseline": "a result record", "KLInReward": "a result record", "SingletonReport": "a result record",
    # the trainer-code checks: their bad input is tested by name in tests/test_trainer_code.py (test_*_bad_input, the assertion helpers)
    "check_policy_loss": "bad input: tests/test_trainer_code.py::test_policy_loss_bad_input",
    "check_grouped_advantage": "bad input: tests/test_trainer_code.py::test_grouped_advantage_bad_input",
    "assert_policy_loss": "bad input: tests/test_trainer_code.py (expect must be None or a non-empty str)",
    "assert_group_advantage": "bad input: tests/test_trainer_code.py (expect must be None or a non-empty str)",
    "PolicyLossReport": "a result record", "Answer": "a result record (numeric.variants.questions)",
    # the trainers' questions take a TrainerLoss, whose own input is checked where it is built; a non-TrainerLoss is refused by name
    **{q: "bad input: tests/test_questions.py::test_bad_input" for q in ("mask_consistent", "weighting", "kl_gradient", "correction",
                                                                         "sequence_weight_scale", "poison")},
    # the questions' shared probes (numeric.variants.answers), public so that the two question modules share them without private
    # names; every loss reaching them passed require_trainer_loss in a question's entry
    **{p: "the questions' plumbing" for p in ("Completed", "advantage_gradient", "close", "completed", "farthest", "in_float64",
                                             "not_applicable", "probe_log_probs", "probe_mask", "ratios", "responds", "row_coupled",
                                             "taken_roles")},
    "require_trainer_loss": "a validator itself (tests/test_questions.py::test_bad_input)", "GroupedAdvantageReport": "a result record", "CountPattern": "a record of the checker's core",
    "KnownMethod": "a record of the checker's core", "ReportTable": "a str with an HTML view (bad input: tests/test_variants.py)",
    # the variant checker's shared plumbing, public so that its modules share it without private names;
    # every value reaching it was validated by the entry points (check_group_advantage, check_token_loss)
    "zero_on_equal_rewards": "checker plumbing", "torch_value": "checker plumbing", "advantage_expression": "checker plumbing",
    "explicit_advantage": "checker plumbing", "require_constants": "a validator itself", "require_group_size": "a validator itself",
    "reward_law": "a validator itself", "scalar_expression": "a validator itself", "require_bool": "a validator itself", "exact_number": "checker plumbing",
    "finite_report": "checker plumbing", "report_html": "checker plumbing", "depends_on": "checker plumbing", "nonzero": "checker plumbing",
    "verdict": "checker plumbing", "is_proof": "a predicate of the kernel: any object is a valid argument",
    "Established": "a record of what a proof established, built by the kernel's proof kinds (tests/test_kernel.py)",
    "Check": "a record built by check()", "ScoreMoments": "a result record", "PPODiagnostics": "a result record",
    "PPOTerms": "a result record", "ForkTrajectory": "a result record", "SchemeMoments": "a result record", "VarianceTerms": "a result record", "MonteCarloEstimate": "a result record",
    "Episodes": "a record built by two_turn_agent / tinylm_episodes", "CreditAssignment": "a result record", "ChainMoments": "a result record", "TruncationBias": "a result record", "GroupReport": "a result record", "TokenReport": "a result record",
    "Expect": "SymPy notation (an unevaluated function; SymPy checks its arity)", "OthersTotal": "SymPy notation (an unevaluated function; SymPy checks its arity)", "Argmin": "SymPy notation (an unevaluated function; SymPy checks its arity)",
    "suite": "registry plumbing (tests/test_checks.py)", "run_suites": "registry plumbing (tests/test_checks.py)",
    "gamma_weight": "SymPy notation: VESPO's weight of any expression (tests/test_losses.py::test_vespo_weight_is_the_gamma_weight_of_the_row_product)",
    "Method": "a registry record (derivations.methods)", "Form": "a registry record (derivations.methods)",
    "Peer": "a registry record (derivations.methods); its calls are run by numeric.variants.field.trainer_loss, which has a row",
    "load_function": "the command's FILE.py:FUNCTION loader (bad input: tests/test_cli.py)",
    "Linearity": "a rule of the kernel's definitions (bad input: tests/test_kernel.py)",
    "GroupExpectation": "a rule of the kernel's definitions (bad input: tests/test_kernel.py)",
    "parse_fixed": "the command's --fixed parser (bad input: tests/test_cli.py)",
    # the checker at scale: bad input tested by name in tests/test_variants.py::test_the_numeric_route_refuses_bad_input_by_name
    "coefficient_report": "bad input: tests/test_variants.py::test_the_numeric_route_refuses_bad_input_by_name",
    "advantage_coefficients": "bad input: tests/test_variants.py::test_the_numeric_route_refuses_bad_input_by_name",
    "interpolation_rows": "bad input: tests/test_variants.py::test_the_numeric_route_refuses_bad_input_by_name",
    "pattern_count": "bad input: tests/test_variants.py::test_the_numeric_route_refuses_bad_input_by_name",
    "Coefficients": "a result record (its evaluate's bad q: tests/test_variants.py)", "FloatReduction": "a result record",
    # the loss checker's probes (issues 28 and 32): public so that its modules share them; every value reaching them was
    # validated by check_policy_loss (bad input: tests/test_trainer_code.py::test_policy_loss_bad_input)
    "TrainerLoss": "bad input: tests/test_trainer_code.py::test_policy_loss_bad_input (names, fn, dtype)",
    "loss_precision": "checker plumbing", "tolerance_of": "checker plumbing", "callable_weight": "checker plumbing",
    "at_ratio_one": "checker plumbing", "bounded": "checker plumbing", "clip_ranges": "checker plumbing", "runs": "checker plumbing",
    "fit": "checker plumbing", "kappa_rows": "checker plumbing", "mask_of": "checker plumbing", "old_log_probs": "checker plumbing",
    "power_law": "checker plumbing", "Fit": "a result record", "PowerLaw": "a result record", "Precision": "a result record",
    "ClipRange": "a result record", "RatioOne": "a result record", "Run": "a result record",
    "relabelling_averaged": "checker plumbing (reached through check_group_advantage, which validates G and the callable)",
    "position_tables": "checker plumbing (reached through check_group_advantage)", "what_moves": "checker plumbing",
    "positional_report": "checker plumbing",
    "Snapshot": "a record of derivations.readings.SNAPSHOTS", "Citation": "a record (bad input of its snapshot(): tests/test_trainer_code.py::test_readings_refuse_an_unknown_trainer_or_commit)",
    "snapshot": "bad input: tests/test_trainer_code.py::test_readings_refuse_an_unknown_trainer_or_commit",
    # the notation registry (issue 30): its records and helpers, bad input tested by name in tests/test_notation.py
    "Symbol": "a registry record (bad input: tests/test_notation.py::test_an_entry_needs_a_meaning_a_page_a_reason_and_one_symbol)",
    "Notation": "a registry (bad input: tests/test_notation.py::test_a_duplicate_is_named_with_both_meanings)",
    "exclusive": "bad input: tests/test_notation.py::test_the_notation_helpers_name_bad_input",
    "symbols_of": "bad input: tests/test_notation.py::test_the_notation_helpers_name_bad_input",
    "latex": "a printer: any object sympy.latex prints is valid input", "latex_terms": "a printer: any object sympy.latex prints is valid input",
    # the execution check: its engines' bad input is tested by name in tests/test_execution.py
    "GlooWorld": "bad input: tests/test_execution.py::test_bad_functions_get_the_package_s_errors (size, and a world too small)",
    "simulate": "engine plumbing: every value reaching it was validated by check_loss_execution",
    "rank_gradients": "engine plumbing: every value reaching it was validated by check_loss_execution",
    "Job": "a record built by check_loss_execution", "LossSpec": "a record built by check_loss_execution",
    "Share": "a record built by check_loss_execution", "Measurement": "a result record", "ExecutionCase": "a result record",
    "ExecutionReport": "a result record",
    # issue 29: the registry's formulas and records, the trainers' code as the checker reads it, the torch forms' plumbing
    **{f: "SymPy notation of the registry (derivations.token_losses): its arguments come from derivations.methods (tests/test_losses.py)"
       for f in ("clip", "cispo", "clip_cov", "dppo", "dppo_is", "kl_cov", "ppo", "selected_token", "tv_band")},
    **{f: "a transcription of a trainer's code, as the checker reads it (numeric.variants.defects): it validates nothing, by design"
       for f in ("openrlhf_seq_mask_tis", "prime_rl_default", "trl_luspo_token_level", "trl_top_entropy", "verl_dppo_tv")},
    "require_trainers": "a validator itself (the rows of trainer_table, peer_table and divergence_table)",
    "token_terms": "the torch forms' plumbing: every value reaching it was validated by policy_loss / policy_weight",
    "Convention": "a record; a bad one is named by check_loss_execution (tests/test_execution.py::test_bad_input_is_named)",
    "M2POLimit": "a result record", "Setting": "a record of numeric.off_policy.RULES", "Rule": "a record of numeric.off_policy.RULES",
}


def _public_callables():
    """``(module name, name, object)`` for every public callable with parameters of numeric and derivations."""
    import importlib
    import pkgutil

    for pkg in (numeric, derivations):
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg.__name__}."):  # into subpackages (numeric.losses)
            parts = info.name.split(".")[1:]
            if any(p.startswith("_") for p in parts) or parts[0] == "course":  # numeric.course sets torch's default dtype on import
                continue
            mod = importlib.import_module(info.name)
            for n in getattr(mod, "__all__", []):
                obj = getattr(mod, n)
                if callable(obj) and getattr(obj, "__module__", None) == mod.__name__:
                    try:
                        has_params = bool(inspect.signature(obj).parameters)
                    except (TypeError, ValueError):
                        has_params = False
                    if has_params:
                        yield mod.__name__, n, obj


def _unswept():
    in_table = {id(r.fn) for r in ROWS} | {r.name.split(".")[0] for r in ROWS}
    return [f"{m}.{n}" for m, n, obj in _public_callables() if id(obj) not in in_table and n not in in_table and n not in NOT_SWEPT]


def test_the_table_covers_every_public_function():
    """Every public callable with arguments of numeric and derivations has a row (or a reason in NOT_SWEPT)."""
    assert _unswept() == []
    public = {n for _, n, _ in _public_callables()}
    assert sorted(set(NOT_SWEPT) - public) == []  # no stale excuse


CERTIFICATE_TABLE = pytest.mark.xdist_group("certificate table")  # the table is built once per worker: its readers share one


def _dtype_param(row: Row):
    shares_the_table = getattr(row.fn, "__module__", "") == "numeric.variants.field"
    return pytest.param(row, marks=CERTIFICATE_TABLE, id=row.name) if shares_the_table else pytest.param(row, id=row.name)


@pytest.mark.parametrize("row", [_dtype_param(r) for r in ROWS if r.kinds and getattr(r.fn, "__module__", "").startswith("numeric")])
def test_results_do_not_depend_on_torch_default_dtype(row):
    """Importing numeric leaves torch's default dtype alone, so nothing may depend on it: float32 and float64 defaults agree exactly."""
    previous = torch.get_default_dtype()
    try:
        results = []
        for default in (torch.float32, torch.float64):
            torch.set_default_dtype(default)
            results.append(row.fn(*row.args))
    finally:
        torch.set_default_dtype(previous)
    _agree(results[0], results[1], 0.0)


# ----------------------------------------------------------------------------- valid unusual input

FLOAT_KINDS = ("array", "ratio", "theta", "theta_setting", "theta_any", "lm_vector")


def _flatten(result) -> list[torch.Tensor]:
    """Every number in a result (tensors, arrays, floats, tuples, dataclasses, dicts) as float64 tensors."""
    if isinstance(result, (tuple, list)):
        return [y for x in result for y in _flatten(x)]
    if hasattr(result, "__dataclass_fields__"):
        return [y for f in result.__dataclass_fields__ for y in _flatten(getattr(result, f))]
    if isinstance(result, dict):
        return [y for v in result.values() for y in _flatten(v)]
    if isinstance(result, (TinyLM, numeric.TwoStepMDP)):  # a model: its tensors
        return _flatten([v for v in vars(result).values() if isinstance(v, torch.Tensor) and v.is_floating_point()])
    if isinstance(result, torch.Tensor):
        return [result.detach().to(torch.float64).reshape(-1)]
    if isinstance(result, np.ndarray):
        return [torch.from_numpy(np.array(result, dtype=np.float64)).reshape(-1)]
    if result is None:
        return []
    if isinstance(result, d_derivation.Derivation):
        result = result.to_latex()
    if isinstance(result, (str, sp.Basic)):  # text and exact SymPy results: equal or not, by their characters
        return [torch.tensor([float(ord(c)) for c in str(result)], dtype=torch.float64)]
    return [torch.tensor([float(result)], dtype=torch.float64)]


def _agree(a, b, rel: float) -> None:
    fa, fb = _flatten(a), _flatten(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        assert x.shape == y.shape
        if x.numel():
            scale = 1 + float(y.abs().max())
            assert float((x - y).abs().max()) <= rel * scale, (x, y)


def _torch(x, dtype=None):
    """numpy -> torch (a copy); floating tensors converted to ``dtype`` when given."""
    t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.array(x))
    return t.to(dtype) if dtype is not None and t.is_floating_point() else t


def _unusual_cases():
    for row in ROWS:
        for how in row.unusual:
            yield pytest.param(row, how, id=f"{row.name}:{how}")


@pytest.mark.parametrize(("row", "how"), list(_unusual_cases()))
def test_valid_unusual_input_works(row, how):
    """float32, requires_grad, 0-d, negative strides: no error, and the numbers of the plain float64 call."""
    floats = [i for i, k in row.kinds.items() if k in FLOAT_KINDS]
    arrays = [i for i, k in row.kinds.items() if k in FLOAT_KINDS + ("flags", "mask", "loss_mask", "index")]
    as_torch = [_torch(a) if i in arrays else a for i, a in enumerate(row.args)]
    if how == "fp32":
        args = [_torch(a, torch.float32) if i in floats else a for i, a in enumerate(as_torch)]
        _agree(row.fn(*args), row.fn(*as_torch), 1e-5)
    elif how == "grad":
        i = floats[0]
        args = list(as_torch)
        args[i] = as_torch[i].detach().clone().requires_grad_(True)
        _agree(row.fn(*args), row.fn(*as_torch), 0.0)
    elif how == "0d":
        first = [np.asarray(a).reshape(-1)[:1] if i in arrays else a for i, a in enumerate(row.args)]
        zero_d = [np.array(np.asarray(a).reshape(-1)[0]) if i in arrays else a for i, a in enumerate(row.args)]
        out = row.fn(*zero_d)
        assert all(x.numel() == 1 for x in _flatten(out))
        _agree(out, row.fn(*first), 0.0)
    elif how == "neg_stride":
        flipped = [np.ascontiguousarray(np.asarray(a)[..., ::-1])[..., ::-1] if i in arrays else a for i, a in enumerate(row.args)]
        assert all(flipped[i].strides[-1] < 0 for i in arrays if flipped[i].shape[-1] > 1)
        _agree(row.fn(*flipped), row.fn(*row.args), 0.0)
    else:
        raise AssertionError(how)


# ----------------------------------------------------------------------------- property-based: poisoned batches

BATCHED = {
    "reward_to_go": (lambda r: numeric.reward_to_go(r, 0.9), 1),
    "discounted_score_weights": (lambda r: numeric.discounted_score_weights(r, 0.9), 1),
    "rloo_advantages": (numeric.rloo_advantages, 2),
    "group_mean_advantages": (numeric.group_mean_advantages, 1),
    "group_zscore_advantages": (numeric.group_zscore_advantages, 1),
    "leave_one_out_baselines": (numeric.leave_one_out_baselines, 2),
    "kl_k3": (lambda x: numeric.kl_k3(x, np.zeros_like(x)), 0),
}  # clip_excess takes inf (an overflowed ratio): its NaN and negative entries are in the table (kind "ratio")


def _sweep(**strategies):
    """``@given(**strategies)`` under the sweep's settings (12 derandomised examples).

    Hypothesis is imported here, by the one worker that runs the property tests (they
    share the xdist group ``hypothesis``), not at collection in every worker.
    """
    from hypothesis import HealthCheck, given, settings

    sweep = settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    return lambda test: sweep(given(**strategies)(test))


@pytest.mark.xdist_group("hypothesis")
def test_a_poisoned_entry_anywhere_is_named():
    from hypothesis import strategies as st

    @_sweep(
        which=st.sampled_from(sorted(BATCHED)),
        shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
        poison=st.sampled_from([math.nan, math.inf, -math.inf]),
        where=st.floats(0, 1, exclude_max=True),
        kind=st.sampled_from(["numpy", "torch", "torch32"]),
    )
    def named(which, shape, poison, where, kind):
        fn, min_last = BATCHED[which]
        shape[-1] = max(shape[-1], min_last)
        x = np.random.default_rng(len(shape)).normal(size=shape)
        x.reshape(-1)[int(where * x.size)] = poison
        arg = x if kind == "numpy" else torch.from_numpy(x).to(torch.float32 if kind == "torch32" else torch.float64)
        with pytest.raises(ValueError, match="must be finite"):
            fn(arg)

    named()


@pytest.mark.xdist_group("hypothesis")
def test_layouts_do_not_change_the_numbers():
    """Negative strides, transposed (non-contiguous) views and torch/numpy give the same result as a contiguous numpy call."""
    from hypothesis import strategies as st

    @_sweep(which=st.sampled_from(sorted(BATCHED)), shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=st.integers(0, 100))
    def unchanged(which, shape, seed):
        fn, min_last = BATCHED[which]
        shape[-1] = max(shape[-1], min_last)
        x = np.random.default_rng(seed).normal(size=shape)
        reference = np.asarray(fn(x))
        reversed_view = np.ascontiguousarray(x[..., ::-1])[..., ::-1]
        assert np.array_equal(np.asarray(fn(reversed_view)), reference)
        if x.ndim >= 2:
            non_contiguous = torch.from_numpy(np.ascontiguousarray(np.swapaxes(x, 0, -1))).transpose(0, -1)
            assert not non_contiguous.is_contiguous() or x.shape[0] == 1 or x.shape[-1] == 1
            assert np.array_equal(fn(non_contiguous).numpy(), reference)
        assert np.array_equal(fn(torch.from_numpy(x)).numpy(), reference)

    unchanged()


@pytest.mark.xdist_group("hypothesis")
def test_toy_lm_theta_poisoned_anywhere_is_named():
    from hypothesis import strategies as st

    @_sweep(theta_scale=st.floats(0.0, 3.0), seed=st.integers(0, 50), poison=st.sampled_from([math.nan, math.inf, -math.inf]), where=st.integers(0, LM.P - 1))
    def named(theta_scale, seed, poison, where):
        theta = numeric.perturb(LM.theta0, theta_scale, seed)
        assert float(LM.probs(theta).sum()) == pytest.approx(1.0, abs=1e-14)
        theta[where] = poison
        fn = [LM.probs, partial(numeric.expected_score_sum, LM, weights=R_LM), partial(numeric.token_score_sqnorms, LM)][seed % 3]
        with pytest.raises(ValueError, match="theta must be finite"):
            fn(theta=theta) if fn is not LM.probs else fn(theta)

    named()


def test_finiteness_is_decided_by_one_sum_and_an_overflowed_sum_is_looked_at_entrywise():
    """``require_finite`` reads the sum first: NaN and inf propagate into it (and inf - inf is NaN), so a finite sum
    clears the tensor.  A sum that overflowed from finite entries (four fp16 rewards of 60,000) must still pass, and
    +inf beside -inf, or a lone NaN, must still be named."""
    from numeric import rloo_advantages

    big = torch.full((1, 4), 60000.0, dtype=torch.float16)
    assert not torch.isfinite(big.sum()) and torch.equal(rloo_advantages(big), torch.zeros_like(big))
    for poison in ([math.inf, -math.inf, 0.0, 1.0], [math.nan, 0.0, 0.0, 1.0], [-math.inf, 0.0, 0.0, 1.0]):
        with pytest.raises(ValueError, match="rewards must be finite"):
            rloo_advantages(torch.tensor([poison]))
