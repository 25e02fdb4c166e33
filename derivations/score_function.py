r"""The score function and the log-derivative trick.

For a policy :math:`\pi_\theta` and a reward :math:`R` that does not depend on
:math:`\theta`,

.. math::

    \nabla_\theta \mathbb{E}_{\pi_\theta}[R]
    = \sum_a R_a \nabla_\theta \pi_a
    = \sum_a \pi_a R_a \nabla_\theta \log \pi_a
    = \mathbb{E}_{\pi_\theta}[R\, s],
    \qquad s = \nabla_\theta \log \pi_\theta,

and :math:`\mathbb{E}_{\pi_\theta}[s] = \nabla_\theta \sum_a \pi_a = 0`.  Both
are derived here for a softmax policy over a *symbolic* number of actions
:math:`K = j + n` (coordinate :math:`j` of the gradient), and each derivation
can be instantiated at any fixed ``K`` by :func:`instances`, which re-verifies
every step for every coordinate.

References
----------
R. J. Williams, "Simple statistical gradient-following algorithms for
connectionist reinforcement learning", Machine Learning 8 (1992).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from .derivation import Derivation
from .policy import IndexedSoftmax

__all__ = ["expected_score", "instances", "log_derivative_trick"]


def expected_score() -> Derivation:
    r"""The score has mean zero: :math:`\mathbb{E}_\pi[s_j] = 0`, for any ``K``.

    .. math::

        \mathbb{E}_\pi[s_j] = \sum_a \pi_a (\delta_{aj} - \pi_j)
        = \pi_j - \pi_j \sum_a \pi_a = 0.

    Examples
    --------
    >>> from derivations.score_function import expected_score
    >>> d = expected_score().verify()
    >>> d.verified, d.rhs
    (True, 0)
    >>> all(inst.verify().verified for inst in instances(expected_score, K=3))
    True
    """
    pol = IndexedSoftmax()
    a, j = pol.a, pol.j
    d = Derivation(
        r"The score has mean zero",
        assumptions=[r"softmax policy over $K = j + n$ actions, $n \ge 0$"],
        unfold=pol.unfold,
    )
    d.step(
        pol.expectation(pol.score),
        sp.Sum(pol.prob(a) * sp.KroneckerDelta(a, j), (a, 1, pol.K)) - pol.prob(j) * sp.Sum(pol.prob(a), (a, 1, pol.K)),
        r"closed-form score $s_{j}(a) = \delta_{aj} - \pi_j$; linearity",
    )
    d.then(pol.prob(j) - pol.prob(j) * sp.Sum(pol.prob(a), (a, 1, pol.K)), r"the Kronecker delta picks $a = j$")
    d.then(sp.Integer(0), r"probabilities sum to one")
    return d


def log_derivative_trick() -> Derivation:
    r"""The log-derivative trick: :math:`\partial_{\theta_j} \mathbb{E}_\pi[R] = \mathbb{E}_\pi[R\, s_j]`.

    .. math::

        \frac{\partial}{\partial\theta_j} \sum_a \pi_a R_a
        = \sum_a R_a \frac{\partial \pi_a}{\partial\theta_j}
        = \sum_a \pi_a R_a \frac{\partial \log\pi_a}{\partial\theta_j}
        = \sum_a \pi_a R_a (\delta_{aj} - \pi_j).

    Examples
    --------
    >>> from derivations.score_function import log_derivative_trick
    >>> d = log_derivative_trick().verify()
    >>> len(d.steps), d.verified
    (3, True)
    """
    pol = IndexedSoftmax()
    a, j, theta = pol.a, pol.j, pol.theta
    R = sp.IndexedBase("R", real=True)
    d = Derivation(
        r"The log-derivative trick",
        assumptions=[r"softmax policy over $K = j + n$ actions", r"rewards $R_a$ free of $\theta$"],
        unfold=pol.unfold,
    )
    d.step(
        sp.Derivative(sp.Sum(pol.prob(a) * R[a], (a, 1, pol.K)), theta[j]),
        sp.Sum(R[a] * sp.Derivative(pol.prob(a), theta[j]), (a, 1, pol.K)),
        r"linearity; $R_a$ does not depend on $\theta$",
    )
    d.then(
        sp.Sum(pol.prob(a) * R[a] * sp.Derivative(sp.log(pol.prob(a)), theta[j]), (a, 1, pol.K)),
        r"$\partial \pi_a = \pi_a\, \partial \log \pi_a$",
    )
    d.then(pol.expectation(lambda x: R[x] * pol.score(x)), r"closed-form softmax score")
    return d


def instances(make: Callable[[], Derivation], K: int) -> list[Derivation]:
    """The derivation ``make()`` at a fixed ``K``, one instance per gradient coordinate ``j``.

    Each instance has every step re-checked by the CAS on explicit sums of
    ``K`` terms.

    Examples
    --------
    >>> from derivations.score_function import instances, log_derivative_trick
    >>> [len(instances(log_derivative_trick, K)) for K in (2, 3, 4)]
    [2, 3, 4]
    """
    if not callable(make):
        raise TypeError(f"make must be a function returning a Derivation, got {type(make).__name__}")
    if isinstance(K, bool) or not isinstance(K, int) or K < 2:
        raise ValueError(f"K must be an int >= 2, got {K!r}")
    pol = IndexedSoftmax()
    general = make()
    return [
        general.subs({pol.j: jj, pol.n: K - jj}, title=f"{general.title} (K = {K}, j = {jj})")
        for jj in range(1, K + 1)
    ]
