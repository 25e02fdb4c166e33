r"""Numbers: the enumerated toy LM, exact expectations, the check registry, batched paths.

``numeric`` evaluates both sides of every identity of the lecture notes in
fp64: exactly, by enumerating every response of a :class:`TinyLM`, and on
vectorised ``[batch, time]`` paths checked against a naive loop.  Formulas
derived in :mod:`derivations` are imported from there, never retyped.

Importing ``numeric`` changes no global state: the batched helpers follow the
device and dtype of their inputs, so they drop into a trainer.  The checks run
in fp64 whatever the default (:func:`run_suites`); code that relies on a
float64 default imports :mod:`numeric.course` instead.

Map
---
:class:`TinyLM`, :func:`default_reward`, :func:`score_matrix`, :func:`token_score_tensor`, :func:`perturb`
    The toy LM and its exact scores.
:func:`expected_score_sum`, :func:`score_estimator_moments`
    Exact means and variances of score-function estimators, per prefix.
:func:`check`, :data:`CHECKS`, :func:`maxabs`
    The check registry; ``python -m numeric`` prints the report.

Topics, in lecture order, each with its cross-check suite:

:mod:`numeric.score_function`
    Three computations of the gradient, the product rule, the environment.
:mod:`numeric.baselines`
    Baseline bias and variance, the optimal baseline, REINFORCE losses.
:mod:`numeric.group_baselines`
    Exact group expectations for any G; :func:`leave_one_out_baselines`,
    :func:`group_mean_advantages`, :func:`rloo_advantages`, :func:`group_zscore_advantages`.
:mod:`numeric.returns`
    :func:`reward_to_go`, :func:`discounted_score_weights`, :func:`gae_advantages`, :func:`lambda_returns`.
:mod:`numeric.gradient_weights`
    :func:`gradient_weight`, :func:`ppo_clipped_terms`, :func:`ppo_diagnostics`, :func:`ppo_loss`
    (``policy_loss("ppo", ...)`` by name), :func:`fork_token`.
:mod:`numeric.trust_region`
    The clip bias, and the KL estimators :func:`kl_k1`, :func:`kl_k2`, :func:`kl_k3`
    (:func:`kl_penalty` with its ``estimator``; the one definition is :func:`kl_estimate`).
:mod:`numeric.off_policy`
    Samplers that lag the policy and multi-turn agents, enumerated exactly; the
    sampler-correction weights trainers ship (:func:`token_ratio`, :func:`sequence_ratio`,
    truncated and masked IS, :func:`geometric_sequence_mask`, :func:`kl_rejection_mask`).
:mod:`numeric.losses`
    The losses trainers ship (a package: tokens, aggregation, policy, penalties, advantages):
    :func:`policy_loss` for every method of the registry :data:`derivations.methods.METHODS`,
    :func:`aggregate`, :func:`kl_penalty`, :func:`value_loss`, the advantage estimators, and
    the course's token bookkeeping.
:mod:`numeric.variants`
    The numeric half of the variant checker: trainer-style callables evaluated, and every
    verdict of :mod:`derivations.variants` confirmed on the toy LM.
"""

from .checks import CHECKS, Check, CheckFailed, check, maxabs, run_suites, suite
from .expectations import (
    ScoreMoments,
    expected_score_sum,
    score_estimator_moments,
    token_score_sqnorms,
)
from .tinylm import EOS, TinyLM, default_reward, perturb, score_matrix, token_score_tensor

# topic modules, in lecture order; importing them registers their cross-check suites in
# this order, so the block keeps its hand-written order
# isort: off
from . import score_function, baselines, group_baselines, returns, gradient_weights, trust_region, off_policy, losses
from .losses import certificates as _losses_suite  # registers the suite "losses" after off_policy's
from . import variants
from .baselines import *
from .gradient_weights import *
from .group_baselines import *
from .returns import *
from .score_function import *
from .trust_region import *
from .off_policy import *
from .losses import *
# isort: on

__all__ = [
    "CHECKS",
    "Check",
    "CheckFailed",
    "EOS",
    "ScoreMoments",
    "TinyLM",
    "check",
    "default_reward",
    "expected_score_sum",
    "maxabs",
    "perturb",
    "run_suites",
    "score_estimator_moments",
    "score_matrix",
    "suite",
    "token_score_sqnorms",
    "token_score_tensor",
    *baselines.__all__,
    *gradient_weights.__all__,
    *group_baselines.__all__,
    *returns.__all__,
    *score_function.__all__,
    *trust_region.__all__,
    *off_policy.__all__,
    *losses.__all__,
]
