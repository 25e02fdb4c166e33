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

When the integrand depends on :math:`\theta` itself (a KL penalty), the
product rule adds a *direct* term (:func:`product_rule`); stopping its gradient
removes exactly that term (:func:`stopped_direct_term`), which for the
log-ratio penalty has mean zero (:func:`kl_penalty_direct_term`).  In an MDP a
fixed transition kernel contributes no derivative, a parametrised one its own
score term (:func:`environment_gradient`).

References
----------
R. J. Williams, "Simple statistical gradient-following algorithms for
connectionist reinforcement learning", Machine Learning 8 (1992).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from ._validate import require_int
from .definitions import Definitions, Differentiation
from .derivation import Derivation
from .policy import IndexedSoftmax

_THETA = sp.Symbol("theta", real=True)


def _as_functions_of(theta: sp.Symbol, *entries: sp.Indexed) -> dict:
    r"""Definitions that write each ``base[i, ...]`` as an undefined function ``base(i, ..., theta)``.

    The page shows :math:`\pi_a`; the CAS checks with :math:`\pi(a, \theta)`, a
    positive function of the parameter about which nothing else is assumed.
    """
    return {e: sp.Function(str(e.base.label), positive=True)(*e.indices, theta) for e in entries}

__all__ = [
    "environment_gradient",
    "expected_score",
    "instances",
    "kl_penalty_direct_term",
    "log_derivative_trick",
    "product_rule",
    "stopped_direct_term",
]


def expected_score() -> Derivation:
    r"""The score has mean zero: :math:`\mathbb{E}_\pi[s_j] = 0`, for any ``K``.

    .. math::

        \mathbb{E}_\pi[s_j] = \sum_a \pi_a (\mathbb{1}[a = j] - \pi_j)
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
        unfold=pol.definitions,
    )
    d.step(
        pol.expectation(pol.score),
        sp.Sum(pol.prob(a) * sp.KroneckerDelta(a, j), (a, 1, pol.K)) - pol.prob(j) * sp.Sum(pol.prob(a), (a, 1, pol.K)),
        r"closed-form score $s_{j}(a) = \mathbb{1}[a = j] - \pi_j$; linearity",
    )
    d.then(pol.prob(j) - pol.prob(j) * sp.Sum(pol.prob(a), (a, 1, pol.K)), r"the indicator picks $a = j$")
    d.then(sp.Integer(0), r"probabilities sum to one")
    return d


def log_derivative_trick() -> Derivation:
    r"""The log-derivative trick: :math:`\partial_{\theta_j} \mathbb{E}_\pi[R] = \mathbb{E}_\pi[R\, s_j]`.

    .. math::

        \frac{\partial}{\partial\theta_j} \sum_a \pi_a R_a
        = \sum_a R_a \frac{\partial \pi_a}{\partial\theta_j}
        = \sum_a \pi_a R_a \frac{\partial \log\pi_a}{\partial\theta_j}
        = \sum_a \pi_a R_a (\mathbb{1}[a = j] - \pi_j).

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
        unfold=pol.definitions,
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


def product_rule() -> Derivation:
    r"""Product rule for an integrand that depends on :math:`\theta`: score term plus direct term.

    For any positive differentiable :math:`\pi_a(\theta)` and differentiable
    :math:`f_a(\theta)`, over a symbolic number of actions :math:`K`:

    .. math::

        \frac{d}{d\theta} \mathbb{E}_{\pi_\theta}[f_\theta]
        = \mathbb{E}_{\pi_\theta}\bigl[f_\theta\, \partial_\theta \log \pi_\theta\bigr]
        + \mathbb{E}_{\pi_\theta}\bigl[\partial_\theta f_\theta\bigr].

    The first term is the change of the distribution of outcomes, the second the
    change of the quantity at a fixed outcome.

    Examples
    --------
    >>> from derivations.score_function import product_rule
    >>> d = product_rule().verify()
    >>> len(d.steps), d.verified
    (2, True)
    """
    a, K = sp.Symbol("a", integer=True, positive=True), sp.Symbol("K", integer=True, positive=True)
    pi, f = sp.IndexedBase("pi"), sp.IndexedBase("f")
    D = lambda e: sp.Derivative(e, _THETA)
    E = lambda e: sp.Sum(pi[a] * e, (a, 1, K))
    d = Derivation(
        "Product rule: a score term and a direct term",
        assumptions=[r"$\pi_a(\theta) > 0$ and $f_a(\theta)$ differentiable", r"$K$ actions, $K$ symbolic"],
        unfold=Definitions(_as_functions_of(_THETA, pi[a], f[a])),
    )
    d.step(D(E(f[a])), sp.Sum(f[a] * D(pi[a]), (a, 1, K)) + E(D(f[a])), r"product rule under the finite sum")
    d.then(E(f[a] * D(sp.log(pi[a]))) + E(D(f[a])), r"$\partial \pi_a = \pi_a\, \partial \log \pi_a$")
    return d


def stopped_direct_term() -> Derivation:
    r"""Stopping the integrand's gradient drops exactly the direct term.

    Stop-gradient means "evaluate at a frozen copy :math:`\bar\theta` of the
    parameters, then set :math:`\bar\theta = \theta`":

    .. math::

        \frac{d}{d\theta} \mathbb{E}_{\pi_\theta}\bigl[\operatorname{sg}(f_\theta)\bigr]
        = \mathbb{E}_{\pi_\theta}[f_\theta\, \partial_\theta\log\pi_\theta]
        = \frac{d}{d\theta}\mathbb{E}_{\pi_\theta}[f_\theta]
        - \mathbb{E}_{\pi_\theta}[\partial_\theta f_\theta].

    So a surrogate with a stopped integrand follows the true gradient only
    when :math:`\mathbb{E}[\partial_\theta f_\theta] = 0`; otherwise it
    defines a different target.

    Examples
    --------
    >>> from derivations.score_function import stopped_direct_term
    >>> stopped_direct_term().verify().verified
    True
    """
    a, K = sp.Symbol("a", integer=True, positive=True), sp.Symbol("K", integer=True, positive=True)
    pi, f = sp.IndexedBase("pi"), sp.IndexedBase("f")
    fn, sg = sp.Function("f", real=True), sp.Function("sg")
    frozen = sp.IndexedBase(r"\operatorname{sg}(f)")
    D = lambda e: sp.Derivative(e, _THETA)
    E = lambda e: sp.Sum(pi[a] * e, (a, 1, K))
    # f is a function of theta; sg(f) has its value and is held constant under d/dtheta
    unfold_sg = Definitions({**_as_functions_of(_THETA, pi[a]), f[a]: fn(a, _THETA), frozen[a]: sg(fn(a, _THETA))},
                            Differentiation(_THETA, held=(sg,)))

    d = Derivation(
        "Stopping the gradient of the integrand drops the direct term",
        assumptions=[r"$\operatorname{sg}(f_a)$ is $f_a$ at a frozen copy $\bar\theta$, then $\bar\theta = \theta$"],
        unfold=unfold_sg,
    )
    d.step(D(E(frozen[a])), E(f[a] * D(sp.log(pi[a]))), r"only $\pi$ depends on $\theta$; $\partial \pi_a = \pi_a\, \partial \log \pi_a$")
    d.then(D(E(f[a])) - E(D(f[a])), r"the product rule, rearranged")
    return d


def kl_penalty_direct_term() -> Derivation:
    r"""The log-ratio KL penalty has a direct term of mean zero, for any ``K``.

    For :math:`f_a = R_a - \beta(\log \pi_a - \log \pi_{\mathrm{ref},a})` with a fixed
    reference policy :math:`\pi_{\mathrm{ref}}`, :math:`\partial_{\theta_j} f_a = -\beta s_j(a)`, so

    .. math::

        \mathbb{E}_\pi[\partial_{\theta_j} f] = -\beta\, \mathbb{E}_\pi[s_j] = 0,

    and by :func:`stopped_direct_term` stopping the penalty's gradient leaves
    the expected gradient unchanged.

    Examples
    --------
    >>> from derivations.score_function import instances, kl_penalty_direct_term
    >>> kl_penalty_direct_term().verify().rhs
    0
    >>> [len(d.steps) for d in instances(kl_penalty_direct_term, K=3)]
    [3, 3, 3]
    """
    pol = IndexedSoftmax()
    a, j, theta = pol.a, pol.j, pol.theta
    R, ref = sp.IndexedBase("R", real=True), sp.IndexedBase(r"\pi_{\mathrm{ref}}", positive=True)
    beta = sp.Symbol("beta", positive=True)
    f = R[a] - beta * (sp.log(pol.prob(a)) - sp.log(ref[a]))
    d = Derivation(
        "The direct term of a log-ratio KL penalty has mean zero",
        assumptions=[r"softmax policy over $K = j + n$ actions", r"$R_a$, $\pi_{\mathrm{ref},a}$ free of $\theta$"],
        unfold=pol.definitions,
    )
    d.step(
        pol.expectation(lambda x: sp.Derivative(f.subs(a, x), theta[j])),
        -beta * pol.expectation(lambda x: sp.Derivative(sp.log(pol.prob(x)), theta[j])),
        r"$R_a$ and $\pi_{\mathrm{ref},a}$ do not depend on $\theta$",
    )
    d.then(-beta * pol.expectation(pol.score), r"closed-form softmax score")
    d.then(sp.Integer(0), r"the score has mean zero")
    return d


def environment_gradient(parametrised: bool = False, K: int = 2, M: int = 2) -> Derivation:
    r"""What the environment contributes to the gradient, in a two-step MDP.

    The agent takes :math:`a \sim \pi_\theta`, the environment moves to the
    state :math:`x' \sim P(x' \mid a)`, the agent takes its second action
    :math:`a' \sim \pi'_\theta(a' \mid x')` and receives :math:`R(a, x', a')`.  With
    :math:`p_\theta(\tau) = \pi_a P_{x' \mid a} \pi'_{a' \mid x'}`,

    .. math::

        \partial_\theta \mathbb{E}[R]
        = \mathbb{E}\bigl[R\,(\partial\log\pi_a + \partial\log P_{x'\mid a}
          + \partial\log\pi'_{a'\mid x'})\bigr].

    A fixed kernel has :math:`\partial \log P = 0`: only the policy's scores
    remain.  A kernel parametrised by :math:`\theta` adds
    :math:`\mathbb{E}[R\, \partial \log P_\theta]`.

    Parameters
    ----------
    parametrised : bool
        Whether the transition kernel depends on :math:`\theta`.
    K, M : int
        Numbers of actions and of intermediate states (each at least 2).

    Examples
    --------
    >>> from derivations.score_function import environment_gradient
    >>> [environment_gradient(p).verify().verified for p in (False, True)]
    [True, True]
    """
    if not isinstance(parametrised, bool):
        raise TypeError(f"parametrised must be a bool, got {type(parametrised).__name__}")
    require_int("K", K, minimum=2)
    require_int("M", M, minimum=2)
    a, x, b = sp.symbols("a x' a'", integer=True, positive=True)   # b: the second action a'
    pi, P, pi2, R = (sp.IndexedBase(n) for n in ("pi", "P", r"\pi'", "R"))
    D = lambda e: sp.Derivative(e, _THETA)
    ranges = ((a, 1, K), (x, 1, M), (b, 1, K))
    traj = sp.IndexedBase("p")
    p, Rt = traj[a, x, b], R[a, x, b]
    E = lambda e: sp.Sum(p * e, *ranges)
    policy_scores = D(sp.log(pi[a])) + D(sp.log(pi2[b, x]))
    kernel = r"a transition kernel $P_\theta$ that depends on $\theta$" if parametrised else "a fixed transition kernel $P$"
    unfold = Definitions({p: pi[a] * P[x, a] * pi2[b, x], **_as_functions_of(_THETA, pi[a], pi2[b, x], *((P[x, a],) if parametrised else ()))})

    d = Derivation(
        "What the environment contributes" + (" (parametrised kernel)" if parametrised else " (fixed kernel)"),
        assumptions=[
            f"two-step MDP, {K} actions, {M} states",
            r"$p_{a,x',a'} = \pi_a P_{x',a} \pi'_{a',x'}$",
            kernel,
            r"$R$ free of $\theta$",
        ],
        unfold=unfold,
    )
    d.step(D(sp.Sum(p * Rt, *ranges)), sp.Sum(Rt * D(p), *ranges), r"linearity; $R$ does not depend on $\theta$")
    d.then(E(Rt * D(sp.log(p))), r"$\partial p = p\, \partial \log p$")
    d.then(E(Rt * (policy_scores + D(sp.log(P[x, a])))), r"the log of a product is a sum of logs")
    if parametrised:
        d.then(E(Rt * policy_scores) + E(Rt * D(sp.log(P[x, a]))), r"the kernel's score term remains")
    else:
        d.then(E(Rt * policy_scores), r"$\partial \log P = 0$: $P$ is fixed")
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
    require_int("K", K, minimum=2)
    pol = IndexedSoftmax()
    general = make()
    return [
        general.subs({pol.j: jj, pol.n: K - jj}, title=f"{general.title} (K = {K}, j = {jj})")
        for jj in range(1, K + 1)
    ]
