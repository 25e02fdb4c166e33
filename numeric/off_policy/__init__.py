r"""Off-policy samplers and multi-turn agents: sampler-correction weights, batched and exact.

A trainer samples with :math:`\mu` (an inference engine, a lagged copy of the
weights) and differentiates :math:`\pi`.  Every correction scheme that trainers
ship is a stop-gradient weight :math:`v_t` on the token score:

.. math::

    \hat g = \sum_t v_t\, A\, s_t, \qquad s_t = \nabla_\theta \log\pi_\theta(o_t \mid o_{<t}),
    \qquad \rho_t = \frac{\pi(o_t \mid o_{<t})}{\mu(o_t \mid o_{<t})},
    \qquad \rho = \prod_{t\,:\,m_t = 1} \rho_t .

Batched weight functions (``[batch, time]`` log-probabilities and a 0/1 mask;
numpy or torch in, the caller's kind, dtype and device out; detached):

==================================  ==============================================================================================================
:func:`token_ratio`                 :math:`\rho_t`
:func:`sequence_ratio`              :math:`\rho`, broadcast over the sequence's tokens
:func:`truncated_token_ratio`       :math:`\min(\rho_t, C)` (TIS, ``token_truncate``)
:func:`truncated_sequence_ratio`    :math:`\min(\rho, C)` (``sequence_truncate``)
:func:`masked_token_ratio`          :math:`\rho_t\,\mathbb 1[l \le \rho_t \le h]` (IcePop, ``token_mask``)
:func:`masked_sequence_ratio`       :math:`\rho\,\mathbb 1[l \le \rho \le h]` (``sequence_mask``)
:func:`geometric_sequence_mask`     :math:`\mathbb 1[l \le \rho^{1/|o|} \le h]` (seq-mask-tis, geometric RS)
:func:`kl_rejection_mask`           :math:`\mathbb 1[\sum_t k_t \le d]`, :math:`k \in \{k_1, k_2, k_3\}` of :math:`\mathrm{KL}(\mu\,\|\,\pi)` (or per token, mean, max)
:func:`batch_normalized_weights`    :math:`v_t / \bar v`, any weight over its batch mean
==================================  ==============================================================================================================

Masked slots (prompt, tool output, feedback, padding) never enter a product, a
mean or a KL sum, get weight 0, and may hold anything (``-inf``, sentinels):
they never raise and never produce NaN.

The package has three rooms: :mod:`numeric.off_policy.weights` (the
batched weights above, what a trainer imports), :mod:`numeric.off_policy.models`
(the exact teaching models below) and :mod:`numeric.off_policy.suite` (the
``off_policy`` checks).  Every public name is importable from
``numeric.off_policy`` (and from ``numeric``).

Exact models: :func:`two_turn_agent` (two turns of 4 actions, a feedback token
between them that is context only, a stale sampler with a mismatch knob) and
:func:`tinylm_episodes` (:class:`~numeric.TinyLM` with a perturbed sampler).
Both give :class:`Episodes`, every episode with its sampler probability, so
:func:`scheme_moments` computes the exact bias :math:`\lVert\mathbb E_\mu[\hat g] - \nabla J\rVert`
and trace variance of any scheme.  The suite ``off_policy`` checks every
statement of :doc:`/off_policy` and the schemes' bias formulas.

References
----------
F. Yao, L. Liu, D. Zhang, C. Dong, J. Shang, J. Gao, "Your efficient RL framework
secretly brings you off-policy RL training" (2025) (TIS).
J. Liu, Y. Li, Y. Fu, J. Wang, Q. Liu, Y. Shen, "When speed kills stability:
demystifying RL collapse from the training-inference mismatch" (2025) (token,
sequence and geometric rejection; verl rollout correction).
Ling Team, "Every step evolves: scaling reinforcement learning for trillion-scale
thinking model", arXiv:2510.18855 (2025) (IcePop).
"""

from . import suite  # noqa: F401  (registers the ``off_policy`` check suite)
from .corrections import (
    READINGS,
    RULES,
    M2POLimit,
    Reading,
    Rule,
    Setting,
    m2po_limit,
    reading_table,
    rule_moments,
    rule_table,
)
from .masks import (
    REJECTION_METRICS,
    loglinear_proximal_log_prob,
    m2po_mask,
    off_policy_sequence_mask,
    outlier_sequence_mask,
    rejection_sampling_weight,
    trust_region_mask,
)
from .models import (
    SCHEMES,
    ChainMoments,
    CreditAssignment,
    Episodes,
    SchemeMoments,
    TruncationBias,
    chain_score_moments,
    credit_assignment,
    estimator_samples,
    feedback_term,
    feedback_token,  # noqa: F401  (not in __all__; tests read it as numeric.off_policy.feedback_token)
    sampler_moments,
    scheme_moments,
    tinylm_episodes,
    token_bias_closed_form,
    truncation_bias,
    two_turn_agent,
)
from .rollout import ROLLOUT_RS_OPTIONS, SAFETY_BOUND, rollout_is_weights, rollout_rejection_mask
from .weights import (
    CORRECTION_WEIGHTS,
    KL_REJECTION_LEVELS,
    batch_normalized_weights,
    geometric_sequence_mask,
    kl_rejection_mask,
    masked_sequence_ratio,
    masked_token_ratio,
    sequence_ratio,
    token_ratio,
    truncated_sequence_ratio,
    truncated_token_ratio,
)

__all__ = [
    "READINGS",
    "RULES",
    "M2POLimit",
    "Reading",
    "Rule",
    "Setting",
    "m2po_limit",
    "reading_table",
    "rule_moments",
    "rule_table",
    "REJECTION_METRICS",
    "ROLLOUT_RS_OPTIONS",
    "SAFETY_BOUND",
    "loglinear_proximal_log_prob",
    "m2po_mask",
    "off_policy_sequence_mask",
    "outlier_sequence_mask",
    "rejection_sampling_weight",
    "rollout_is_weights",
    "rollout_rejection_mask",
    "trust_region_mask",
    "CORRECTION_WEIGHTS",
    "KL_REJECTION_LEVELS",
    "batch_normalized_weights",
    "Episodes",
    "SCHEMES",
    "SchemeMoments",
    "ChainMoments",
    "CreditAssignment",
    "TruncationBias",
    "chain_score_moments",
    "credit_assignment",
    "estimator_samples",
    "feedback_term",
    "geometric_sequence_mask",
    "kl_rejection_mask",
    "masked_sequence_ratio",
    "masked_token_ratio",
    "scheme_moments",
    "sampler_moments",
    "sequence_ratio",
    "tinylm_episodes",
    "token_bias_closed_form",
    "token_ratio",
    "truncated_sequence_ratio",
    "truncated_token_ratio",
    "truncation_bias",
    "two_turn_agent",
]
