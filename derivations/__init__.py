r"""Derivations: every identity of the lecture notes as a chain of CAS-checked steps.

SymPy only (no torch, no numpy).  The shared machinery:

:class:`Derivation`
    Ordered steps ``lhs = rhs  [reason]``; :meth:`Derivation.verify` checks each
    step with the CAS and names the first that fails; renders as LaTeX.
    A step that is not a plain equality carries a proof built by
    :mod:`derivations.proofs`; only the kernel (:mod:`derivations.kernel`)
    marks a step verified, after comparing what the proof establishes with the
    displayed :class:`Claim`.  The notation's meaning is a :class:`Definitions`
    value (:mod:`derivations.definitions`), data the kernel applies with fixed
    rules and the page shows.  :mod:`derivations.regions` decides which branch
    of a ``Min``/``Max``/``Abs``/``Piecewise`` holds at a point.
:class:`SoftmaxPolicy`, :class:`IndexedSoftmax`
    A symbolic softmax policy over a fixed or a symbolic number of actions, its
    scores and its expectation operator.
:class:`IIDGroup`, :class:`Expect`
    The expectation algebra of G i.i.d. answers, G symbolic.

One module per topic, in lecture order: :mod:`derivations.score_function`,
:mod:`derivations.baselines`, :mod:`derivations.group_baselines`,
:mod:`derivations.returns`, :mod:`derivations.gradient_weights`,
:mod:`derivations.trust_region`, :mod:`derivations.off_policy`.
"""

from . import kernel, proofs, regions
from .definitions import Definitions
from .derivation import Claim, Derivation, DerivationError, Step, is_zero, reason_to_latex
from .iid_groups import Expect, IIDGroup
from .policy import IndexedSoftmax, SoftmaxPolicy

__all__ = [
    "Claim",
    "Definitions",
    "Derivation",
    "DerivationError",
    "Expect",
    "IIDGroup",
    "IndexedSoftmax",
    "SoftmaxPolicy",
    "Step",
    "is_zero",
    "reason_to_latex",
]
