r"""Certify a trainer's own code as it is written.

:func:`check_policy_loss`
    A loss over ``[B, T]`` batches: its per-token weight, its aggregation
    :math:`\kappa` and length bias, and its edges (clamps, denominators, empty
    rows, padding).
:func:`check_grouped_advantage`
    An advantage estimator in a trainer's calling convention (verl, TRL,
    OpenRLHF, or flat scores with a group index), groups of any sizes in any
    order, checked per group size.
:func:`assert_policy_loss`, :func:`assert_group_advantage`
    The same as assertions for a trainer's own tests; ``pg-identities check``
    (:mod:`numeric.cli`) for its CI.
"""

from .assertions import assert_group_advantage, assert_policy_loss
from .grouped_advantage import CONVENTIONS, GroupedAdvantageReport, check_grouped_advantage
from .policy_loss import KAPPA_RTOL, LOSS_VERDICTS, PolicyLossReport, check_policy_loss

__all__ = [
    "CONVENTIONS",
    "GroupedAdvantageReport",
    "KAPPA_RTOL",
    "LOSS_VERDICTS",
    "PolicyLossReport",
    "assert_group_advantage",
    "assert_policy_loss",
    "check_grouped_advantage",
    "check_policy_loss",
]
