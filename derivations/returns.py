r"""Returns: reward-to-go, discounting, λ-returns and GAE with two flags.

With per-step rewards :math:`r_0, \dots, r_{T-1}` (steps and array positions
counted from 0, step :math:`t` discounted by :math:`\gamma^t`) and token scores
:math:`s_t = \nabla_\theta \log \pi_\theta(o_t \mid o_{<t})`,

.. math::

    \nabla_\theta\, \mathbb{E}\Bigl[\sum_u r_u\Bigr] = \mathbb{E}\Bigl[\sum_t s_t \sum_u r_u\Bigr]
    = \mathbb{E}\Bigl[\sum_t s_t\, G_t\Bigr], \qquad G_t = \sum_{u \ge t} r_u,

because a reward that came before step :math:`t` is fixed given the prefix
:math:`o_{<t}`, where the score has mean zero.  The literal discounted
objective :math:`\mathbb{E}[\sum_u \gamma^u r_u]` weights the score by
:math:`\gamma^t G^\gamma_t`; dropping :math:`\gamma^t` turns the gradient.

For a critic :math:`V`, the TD error, the generalised advantage estimate and
the λ-return are

.. math::

    \delta_t = r_t + \gamma (1 - d_t) V'_t - V_t, \qquad
    A_t = \delta_t + \gamma\lambda (1 - c_t) A_{t+1}, \qquad
    G^\lambda_t = r_t + \gamma(1 - d_t)\bigl[V'_t + \lambda (1 - c_t)(G^\lambda_{t+1} - V'_t)\bigr],

with :math:`V'_t` the value of the observation after step :math:`t`, and two
flags: :math:`d_t` = ``terminated`` (there is no continuation: do not
bootstrap) and :math:`c_t` = ``trace_cut`` (the next entry of the array does
not continue this trajectory: stop the backward recursion).  A terminal step
also cuts the trace.  :math:`A_t = G^\lambda_t - V_t`.

References
----------
J. Schulman, P. Moritz, S. Levine, M. Jordan, P. Abbeel, "High-dimensional
continuous control using generalized advantage estimation", ICLR (2016).
R. S. Sutton, A. G. Barto, *Reinforcement Learning: An Introduction*, 2nd ed.,
ch. 12 (λ-returns) (2018).
F. Pardo, A. Tavakoli, V. Levdik, P. Kormushev, "Time limits in reinforcement
learning", ICML (2018).
"""

from __future__ import annotations

import sympy as sp

from ._validate import require_int
from .definitions import Definitions, Linearity
from .derivation import Derivation
from .iid_groups import Expect
from .policy import SoftmaxPolicy

__all__ = [
    "discounted_objective_weights",
    "dropping_discount_turns_gradient",
    "gae_is_lambda_return_minus_value",
    "gae_lambda_one",
    "gae_lambda_zero",
    "gae_unrolled",
    "one_done_for_both",
    "outcome_reward_to_go",
    "past_reward_score_vanishes",
    "reward_to_go_unbiased",
]

gamma = sp.Symbol("gamma", nonnegative=True)
lam = sp.Symbol("lambda", nonnegative=True)


# -- reward-to-go ------------------------------------------------------------------------------


def past_reward_score_vanishes(K: int = 2) -> Derivation:
    r"""A reward that came before a step is uncorrelated with that step's score: :math:`\mathbb{E}[r_0 s_1] = 0`.

    Two decisions, at steps 0 and 1: :math:`a \sim \pi_\theta`, then
    :math:`b \sim \pi_\phi(\cdot \mid a)` (softmax policies over ``K`` actions; the
    second decision has its own block of logits :math:`\phi^{(a)}` for each first
    action :math:`a`); the reward :math:`r(a)` is known after the first.  The score of
    the second decision with respect to the block :math:`\phi^{(1)}` (the logits
    used after :math:`a = 1`) is :math:`s_1 = \mathbb{1}[a = 1](e_b - \pi_\phi(\cdot \mid 1))`.

    .. math::

        \mathbb{E}[r(a)\, s_1] = \sum_a \pi(a)\, r(a) \sum_b \pi(b \mid a)\, s_1(a, b)
        = \sum_a \pi(a)\, r(a) \cdot 0 = 0.

    Examples
    --------
    >>> from derivations.returns import past_reward_score_vanishes
    >>> past_reward_score_vanishes(3).verify().rhs.T
    Matrix([[0, 0, 0]])
    """
    K = require_int("K", K, minimum=2)
    first = SoftmaxPolicy(K, "theta")
    second = SoftmaxPolicy(K, "phi")  # the policy after a = 1; the others do not touch phi^(1)
    r = first.symbols("r", real=True)
    s2 = [second.score(b) for b in range(K)]
    inner = sum((second.probs[b] * s2[b] for b in range(K)), sp.zeros(K, 1))
    d = Derivation(
        f"A past reward times a later score has mean zero (K = {K})",
        assumptions=[
            r"$a \sim \pi_\theta$, then $b \sim \pi_\phi(\cdot \mid a)$",
            r"$\phi^{(a)}$: the logits of the second decision after the first action $a$",
            r"$r$ depends on $a$ only",
        ],
    )
    d.step(
        sum((first.probs[a] * second.probs[b] * r[a] * (s2[b] if a == 0 else sp.zeros(K, 1)) for a in range(K) for b in range(K)), sp.zeros(K, 1)),
        first.probs[0] * r[0] * inner,
        r"only $a = 1$ touches $\phi^{(1)}$",
    )
    d.then(sp.zeros(K, 1), r"$\mathbb{E}[s_1 \mid a] = 0$, $s_1$ the second decision's score")
    return d


def _returns_symbols(T: int):
    r = sp.symbols(f"r_1:{T + 1}", real=True)
    s = sp.symbols(f"s_1:{T + 1}", real=True)
    return r, s


def reward_to_go_unbiased(T: int = 3) -> Derivation:
    r"""Reward-to-go drops only terms of mean zero: :math:`\mathbb{E}[\sum_t s_t \sum_u r_u] = \mathbb{E}[\sum_t s_t G_t]`.

    At a fixed horizon ``T`` (each step checked on explicit sums); the dropped
    terms :math:`\mathbb{E}[r_u s_t]`, :math:`u < t`, vanish by
    :func:`past_reward_score_vanishes`; the derivation states them as premises.

    Examples
    --------
    >>> from derivations.returns import reward_to_go_unbiased
    >>> d = reward_to_go_unbiased(3).verify()
    >>> d.rhs
    Expect(r_3*s_3) + Expect(s_1*(r_1 + r_2 + r_3)) + Expect(s_2*(r_2 + r_3))
    """
    T = require_int("T", T, minimum=1)
    r, s = _returns_symbols(T)
    G = [sp.Add(*r[t:]) for t in range(T)]
    past = {Expect(r[u] * s[t]): 0 for t in range(T) for u in range(t)}
    d = Derivation(
        f"Reward-to-go is unbiased (T = {T})",
        assumptions=[r"steps counted from 1 in this derivation (array position $u - 1$ holds step $u$)", r"$r_u$ is known once $o_{\le u}$ is", r"$s_t$: score of step $t$",
                     r"past rewards are uncorrelated with later scores (the lemma above):", *[sp.Eq(k, v) for k, v in past.items()]],
        unfold=Definitions((), Linearity(Expect)),
    )
    kept = sp.Add(*[Expect(r[u] * s[t]) for t in range(T) for u in range(t, T)])
    dropped = sp.Add(*[Expect(r[u] * s[t]) for t in range(T) for u in range(t)])
    d.step(Expect(sp.Add(*s) * sp.Add(*r)), kept + dropped, r"linearity")
    d.then(kept, r"$\mathbb{E}[r_u s_t] = 0$ for $u < t$", facts=past)
    d.then(sp.Add(*[Expect(s[t] * G[t]) for t in range(T)]), r"$G_t = \sum_{u \ge t} r_u$")
    return d


def outcome_reward_to_go() -> Derivation:
    r"""With an outcome reward, the reward-to-go is the outcome at every step: :math:`G_t = R`.

    An outcome reward is one number at the end, :math:`r_u = R\, \delta_{uT}`,
    so :math:`G_t = \sum_{u=t}^{T} R\,\delta_{uT} = R` for every :math:`t \le T`
    (written :math:`T = t + n`, :math:`n \ge 0`): causality has nothing to drop.

    Examples
    --------
    >>> from derivations.returns import outcome_reward_to_go
    >>> outcome_reward_to_go().verify().rhs
    R
    """
    t = sp.Symbol("t", integer=True, positive=True)
    n = sp.Symbol("n", integer=True, nonnegative=True)
    u = sp.Symbol("u", integer=True)
    R = sp.Symbol("R", real=True)
    r = sp.IndexedBase("r", real=True)
    T = t + n

    unfold = Definitions({r[u]: R * sp.KroneckerDelta(u, T)})
    d = Derivation(
        "An outcome reward is its own reward-to-go",
        assumptions=[r"$r_u = R\,\delta_{uT}$ (one reward, at the end)", r"$T = t + n$, $n \ge 0$"],
        unfold=unfold,
    )
    d.step(sp.Sum(r[u], (u, t, T)), sp.Sum(R * sp.KroneckerDelta(u, T), (u, t, T)), "outcome reward")
    d.then(R, r"$t \le T$")
    return d


# -- discounting -------------------------------------------------------------------------------


def discounted_objective_weights() -> Derivation:
    r"""The literal discounted objective weights the score of step :math:`t` by :math:`\gamma^{t-1} G^\gamma_t`.

    This derivation counts steps from 1, and step :math:`u` is discounted by
    :math:`\gamma^{u-1}` (array position :math:`u - 1` holds step :math:`u`); with
    steps from 0, as in the rest of the book and in
    :func:`numeric.discounted_score_weights`, the same identity reads
    :math:`\sum_{u \ge t} \gamma^u r_u = \gamma^t G^\gamma_t`.
    After dropping past rewards (:func:`reward_to_go_unbiased`), the score of
    step :math:`t` multiplies :math:`\sum_{u \ge t} \gamma^{u-1} r_u`, which is

    .. math::

        \sum_{u=t}^{T} \gamma^{u-1} r_u = \gamma^{t-1} \sum_{u=t}^{T} \gamma^{u - t} r_u = \gamma^{t-1} G^\gamma_t.

    Examples
    --------
    >>> from derivations.returns import discounted_objective_weights
    >>> discounted_objective_weights().verify().proved_by()
    {'sums as atoms, cancel(together)': 1}
    """
    t, T, u = sp.symbols("t T u", integer=True)
    r = sp.IndexedBase("r", real=True)
    g = sp.Symbol("gamma", positive=True)
    d = Derivation(
        "The literal discounted objective weights step t by γᵗ⁻¹ Gₜ",
        assumptions=[r"steps counted from 1 in this derivation (array position $u - 1$ holds step $u$)", r"$J_\gamma = \mathbb{E}[\sum_{u=1}^{T} \gamma^{u-1} r_u]$", r"$0 < \gamma \le 1$"],
    )
    d.step(sp.Sum(g ** (u - 1) * r[u], (u, t, T)), g ** (t - 1) * sp.Sum(g ** (u - t) * r[u], (u, t, T)), r"take out $\gamma^{t-1}$")
    return d


def dropping_discount_turns_gradient() -> Derivation:
    r"""Weighting by :math:`G^\gamma_t` instead of :math:`\gamma^t G^\gamma_t` changes the direction.

    Two decisions, at steps 0 and 1, with separate parameter blocks: the literal
    gradient is :math:`(\gamma^0 a, \gamma^1 b) = (a, \gamma b)` and the one without
    :math:`\gamma^t` is :math:`(a, b)`, with :math:`a = \mathbb{E}[s_0 G^\gamma_0]`,
    :math:`b = \mathbb{E}[s_1 G^\gamma_1]`.
    They are parallel only if their determinant vanishes:

    .. math::

        \det\begin{pmatrix} a & a \\ \gamma b & b \end{pmatrix} = (1 - \gamma)\, a b \ne 0
        \quad\text{for } \gamma < 1,\ a b \ne 0.

    Examples
    --------
    >>> from derivations.returns import dropping_discount_turns_gradient
    >>> dropping_discount_turns_gradient().verify().rhs
    a*b*(1 - gamma)
    """
    a, b = sp.symbols("a b", real=True)
    M = sp.Matrix([[a, a], [gamma * b, b]])
    d = Derivation(
        "Dropping γᵗ turns the gradient",
        assumptions=[r"step 0 and step 1 have separate parameters", r"columns: literal $(a, \gamma b)$ and dropped $(a, b)$"],
    )
    d.step(sp.Determinant(M), a * b * (1 - gamma), "determinant")
    return d


# -- λ-returns and GAE -------------------------------------------------------------------------

_t = sp.Symbol("t", integer=True)
_r, _V, _Vn, _A, _Gl, _delta = (sp.IndexedBase(n, real=True) for n in ("r", "V", "V'", "A", "G^{\\lambda}", "delta"))
_d, _c = (sp.IndexedBase(n) for n in ("d", "c"))


def _td_error(t, terminated=0):
    return _r[t] + gamma * (1 - terminated) * _Vn[t] - _V[t]


def gae_is_lambda_return_minus_value() -> Derivation:
    r"""GAE is the λ-return minus the value: :math:`A_t = G^\lambda_t - V_t`, by backward induction.

    Two cases.  *Trace cut* (:math:`c_t = 1`): both recursions stop, and
    :math:`G^\lambda_t - V_t = r_t + \gamma(1 - d_t)V'_t - V_t = \delta_t = A_t`.
    *No cut* (:math:`c_t = 0`, hence :math:`d_t = 0`, and the next entry
    continues the trajectory, :math:`V'_t = V_{t+1}`): assume
    :math:`A_{t+1} = G^\lambda_{t+1} - V_{t+1}`.

    Examples
    --------
    >>> from derivations.returns import gae_is_lambda_return_minus_value
    >>> d = gae_is_lambda_return_minus_value().verify()
    >>> len(d.steps), d.verified
    (4, True)
    """
    t = _t
    d = Derivation(
        "GAE is the λ-return minus the value",
        assumptions=[
            sp.Eq(_delta[t], _td_error(t, _d[t])), r"$A_t = \delta_t + \gamma\lambda(1 - c_t)A_{t+1}$",
            r"$d_t = 1 \Rightarrow c_t = 1$ (a terminal step ends the trace)",
            r"without a cut the next entry continues the trajectory: $V'_t = V_{t+1}$",
            r"induction:", sp.Eq(_Gl[t + 1], _A[t + 1] + _V[t + 1]),
        ],
    )
    lambda_return = _r[t] + gamma * (1 - _d[t]) * (_Vn[t] + lam * (1 - _c[t]) * (_Gl[t + 1] - _Vn[t]))
    regrouped = _delta[t] + gamma * lam * (1 - _d[t]) * (1 - _c[t]) * (_Gl[t + 1] - _Vn[t])
    d.step(lambda_return - _V[t], regrouped, "regroup", facts={_delta[t]: _td_error(t, _d[t])})
    d.step(regrouped, _delta[t], r"$c_t = 1$", given=(sp.Eq(_c[t], 1),))
    d.step(
        regrouped,
        _delta[t] + gamma * lam * (_Gl[t + 1] - _V[t + 1]),
        r"$c_t = 0$",
        given=(sp.Eq(_c[t], 0), sp.Eq(_d[t], 0), sp.Eq(_Vn[t], _V[t + 1])),
    )
    d.then(_delta[t] + gamma * lam * _A[t + 1], "induction", facts={_Gl[t + 1]: _A[t + 1] + _V[t + 1]})
    return d


def _gae_recursion(T: int, lam_value=lam, terminated=None, cuts=None):
    """A_1 .. A_T built by the two-flag recursion, explicit in r_t, V_t, V'_t."""
    terminated = terminated or [0] * T
    cuts = cuts or [0] * (T - 1) + [1]
    A, nxt = [None] * T, sp.Integer(0)
    for t in reversed(range(T)):
        delta = _r[t + 1] + gamma * (1 - terminated[t]) * _Vn[t + 1] - _V[t + 1]
        nxt = delta + gamma * lam_value * (1 - cuts[t]) * nxt
        A[t] = nxt
    return A


def _consistent(T: int) -> dict:
    """Within one trajectory the next value is the next entry's value: V'_t = V_{t+1}."""
    return {_Vn[t]: _V[t + 1] for t in range(1, T)}


def gae_unrolled(T: int = 3) -> Derivation:
    r"""The recursion unrolled: :math:`A_1 = \sum_{u=1}^{T} (\gamma\lambda)^{u-1} \delta_u` (one trajectory, no cut before :math:`T`).

    Steps are counted from 1 here (step :math:`u` at array position :math:`u - 1`);
    from 0, as in the rest of the book, :math:`A_0 = \sum_{u=0}^{T-1} (\gamma\lambda)^u \delta_u`.

    Examples
    --------
    >>> from derivations.returns import gae_unrolled
    >>> gae_unrolled(4).verify().verified
    True
    """
    T = require_int("T", T, minimum=1)
    A = _gae_recursion(T)
    deltas = [_r[u] + gamma * _Vn[u] - _V[u] for u in range(1, T + 1)]
    d = Derivation(f"GAE unrolled (T = {T})", assumptions=[r"steps counted from 1 in this derivation (array position $u - 1$ holds step $u$)", r"trace cut only at $T$, not terminated", *[sp.Eq(_delta[u], deltas[u - 1]) for u in range(1, T + 1)]])
    d.step(A[0], sp.Add(*[(gamma * lam) ** (u - 1) * _delta[u] for u in range(1, T + 1)]), "unroll", facts={_delta[u]: deltas[u - 1] for u in range(1, T + 1)})
    return d


def gae_lambda_zero(T: int = 3) -> Derivation:
    r"""GAE with :math:`\lambda = 0` is the TD error: :math:`A_t = \delta_t`.

    Examples
    --------
    >>> from derivations.returns import gae_lambda_zero
    >>> gae_lambda_zero().verify().rhs
    gamma*V'[1] - V[1] + r[1]
    """
    T = require_int("T", T, minimum=1)
    d = Derivation(f"GAE(λ = 0) is the TD error (T = {T})", assumptions=[r"steps counted from 1 in this derivation (array position $u - 1$ holds step $u$)"])
    d.step(_gae_recursion(T)[0], _gae_recursion(T, lam_value=0)[0], r"$\lambda = 0$", given=(sp.Eq(lam, 0),))
    return d


def gae_lambda_one(T: int = 3) -> Derivation:
    r"""GAE with :math:`\lambda = 1` is the discounted return minus :math:`V`: the TD errors telescope.

    .. math::

        A_1 = \sum_{u=1}^{T} \gamma^{u-1}\delta_u = \sum_{u=1}^{T} \gamma^{u-1} r_u + \gamma^{T} V'_T - V_1
        \qquad (V'_u = V_{u+1} \text{ inside the trajectory}).

    Examples
    --------
    >>> from derivations.returns import gae_lambda_one
    >>> gae_lambda_one(3).verify().rhs
    gamma**3*V'[3] + gamma**2*r[3] + gamma*r[2] - V[1] + r[1]
    """
    T = require_int("T", T, minimum=1)
    A1 = _gae_recursion(T)[0]
    d = Derivation(
        f"GAE(λ = 1) is the discounted return minus V (T = {T})",
        assumptions=[r"steps counted from 1 in this derivation (array position $u - 1$ holds step $u$)", r"one trajectory:", *[sp.Eq(k, v) for k, v in _consistent(T).items()], "bootstrap from $V'_T$ at the end"],
    )
    telescoped = sp.Add(*[gamma ** (u - 1) * _r[u] for u in range(1, T + 1)]) + gamma**T * _Vn[T] - _V[1]
    d.step(A1, telescoped, r"$\lambda = 1$", facts=_consistent(T), given=(sp.Eq(lam, 1),))
    return d


def one_done_for_both(T: int = 3) -> Derivation:
    r"""One ``done`` flag for both questions biases the targets at a time limit by :math:`-(\gamma\lambda)^{T-t}\gamma V'_T`.

    A trajectory cut off by a time limit at step :math:`T` (truncated, not
    terminated) has :math:`d_T = 0, c_T = 1`.  A single ``done = 1`` sets
    :math:`d_T = c_T = 1` and drops the bootstrap :math:`\gamma V'_T`: the
    error reaches step :math:`t` scaled by :math:`(\gamma\lambda)^{T-t}`.
    Targets are too low when :math:`V'_T > 0`, too high when :math:`V'_T < 0`.

    Examples
    --------
    >>> from derivations.returns import one_done_for_both
    >>> one_done_for_both(3).verify().rhs
    -gamma**3*lambda**2*V'[3]
    """
    T = require_int("T", T, minimum=1)
    two_flags = _gae_recursion(T, terminated=[0] * T)
    one_done = _gae_recursion(T, terminated=[0] * (T - 1) + [1])
    d = Derivation(
        f"One done flag for both drops the bootstrap at a time limit (T = {T})",
        assumptions=[r"steps counted from 1 in this derivation (array position $u - 1$ holds step $u$)", r"time limit at step $T$: truncated, not terminated"],
    )
    d.step(one_done[0] - two_flags[0], -((gamma * lam) ** (T - 1)) * gamma * _Vn[T], r"only $\delta_T$ differs")
    return d
