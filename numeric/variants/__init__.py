r"""Checking a new variant, in numbers: the checker's entry points, a trainer's functions evaluated, every verdict confirmed on the toy LM.

The top of the stack.  The symbolic core is :mod:`derivations.variants`; this
package takes what a user holds — a SymPy expression or a trainer's numpy or
torch function — and

* :func:`check_group_advantage`, :func:`check_token_loss`: the entry points
  (:mod:`~numeric.variants.checker`);
* evaluates a trainer's callable on the count patterns of a reward law
  (:func:`advantage_table`, :func:`advantage_values`) after checking its shape,
  finiteness and permutation equivariance (:func:`require_advantage_callable`),
  and tabulates a torch loss's weight by autograd
  (:func:`token_report_from_callable`);
* confirms every symbolic verdict against exact numbers: the group engine
  :func:`numeric.exact_group_gradient` on :class:`~numeric.TinyLM` at
  :math:`G = 2..8` (or the given :math:`G`), and autograd on TinyLM's tokens
  for token losses (:func:`confirm_group`, :func:`confirm_token`).  A
  disagreement raises :class:`derivations.variants.SymbolicNumericMismatch`;
* certifies a trainer's own code as written: a policy loss over ``[B, T]``
  batches with its aggregation :math:`\kappa` and length bias
  (:func:`check_policy_loss`, :mod:`~numeric.variants.policy_loss`), an
  advantage estimator in verl's, TRL's or OpenRLHF's calling convention with
  ragged groups (:func:`check_grouped_advantage`,
  :mod:`~numeric.variants.grouped`), and a trainer's rule for a group of one
  answer (:func:`check_singleton`, :mod:`~numeric.variants.singleton`), and the same as assertions for a trainer's
  tests (:func:`assert_policy_loss`, :func:`assert_group_advantage`); the
  command ``pg-identities check`` (:mod:`numeric.cli`) runs them in its CI;
* certifies every policy loss and advantage estimator verl, TRL and OpenRLHF
  ship, by their names, on the package's own implementations
  (:func:`certificate_table`, :mod:`~numeric.variants.field`);
* reproduces three trainers' group advantages
  (:mod:`~numeric.variants.trainers`) and runs the chapter's suite of the
  check report (:mod:`~numeric.variants.suite`).

Everything is computed in float64, passed explicitly; nothing global is changed.
"""

from .answers import QUESTIONS, Answer
from .assertions import assert_group_advantage, assert_policy_loss
from .callables import advantage_table, advantage_values, require_advantage_callable
from .checker import check_group_advantage, check_token_loss
from .confirm import confirm_group, confirm_token
from .divergence_questions import correction, kl_gradient, sequence_weight_scale
from .divergences import DIVERGENT_NAMES, divergence_cells, divergence_table
from .execution import EXECUTION_RTOL, ExecutionCase, ExecutionReport, check_loss_execution
from .field import ESTIMATORS, Estimator, Reading, certificate, certificate_latex, certificate_table
from .grouped import CONVENTIONS, GroupedAdvantageReport, check_grouped_advantage
from .policy_loss import KAPPA_RTOL, LOSS_VERDICTS, PolicyLossReport, check_policy_loss
from .questions import QUESTION_FUNCTIONS, mask_consistent, poison, weighting
from .singleton import SingletonReport, check_singleton
from .token_callables import token_report_from_callable
from .trainer_conventions import EXECUTION_CONVENTIONS, Convention
from .trainer_loss import TrainerLoss
from .trainers import openrlhf_rloo_advantages, trl_grpo_advantages, verl_dr_grpo_advantages
from .worlds import GlooWorld

# isort: split
from . import suite  # registers the suite "variants", after the modules above

__all__ = [
    "DIVERGENT_NAMES",
    "Answer",
    "CONVENTIONS",
    "Convention",
    "ESTIMATORS",
    "EXECUTION_CONVENTIONS",
    "EXECUTION_RTOL",
    "Estimator",
    "ExecutionCase",
    "ExecutionReport",
    "GlooWorld",
    "GroupedAdvantageReport",
    "KAPPA_RTOL",
    "LOSS_VERDICTS",
    "PolicyLossReport",
    "Reading",
    "SingletonReport",
    "TrainerLoss",
    "QUESTIONS",
    "QUESTION_FUNCTIONS",
    "advantage_table",
    "advantage_values",
    "assert_group_advantage",
    "assert_policy_loss",
    "certificate",
    "certificate_latex",
    "certificate_table",
    "divergence_cells",
    "divergence_table",
    "check_group_advantage",
    "check_grouped_advantage",
    "check_loss_execution",
    "check_policy_loss",
    "check_singleton",
    "check_token_loss",
    "confirm_group",
    "confirm_token",
    "correction",
    "kl_gradient",
    "mask_consistent",
    "poison",
    "sequence_weight_scale",
    "weighting",
    "openrlhf_rloo_advantages",
    "require_advantage_callable",
    "token_report_from_callable",
    "trl_grpo_advantages",
    "verl_dr_grpo_advantages",
]

for _public in (advantage_table, advantage_values, check_group_advantage, check_singleton, check_token_loss, confirm_group, confirm_token,
                openrlhf_rloo_advantages, require_advantage_callable, token_report_from_callable, trl_grpo_advantages,
                verl_dr_grpo_advantages):
    _public.__module__ = __name__  # the public path in the API reference and the input sweep
del _public
