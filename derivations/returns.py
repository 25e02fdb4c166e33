r"""Returns: reward-to-go, discounting, λ-returns and GAE with two flags.

With per-step rewards :math:`R_0, \dots, R_{T-1}` (steps and array positions
counted from 0, step :math:`t` discounted by :math:`\gamma^t`) and token scores
:math:`s_t = \nabla_\theta \log \pi_\theta(o_t \mid o_{<t})`,

.. math::

    \nabla_\theta\, \mathbb{E}\Bigl[\sum_u R_u\Bigr] = \mathbb{E}\Bigl[\sum_t s_t \sum_u R_u\Bigr]
    = \mathbb{E}\Bigl[\sum_t s_t\, R_{\ge t}\Bigr], \qquad R_{\ge t} = \sum_{u = t}^{T-1} R_u,

because a reward that came before step :math:`t` is fixed given the prefix
:math:`o_{<t}`, where the score has mean zero.  The literal discounted
objective :math:`\mathbb{E}[\sum_u \gamma^u R_u]` weights the score by
:math:`\gamma^t R^\gamma_{\ge t}`, :math:`R^\gamma_{\ge t} = \sum_{u \ge t} \gamma^{u-t} R_u`;
dropping :math:`\gamma^t` turns the gradient.

A critic gives :math:`V_t`, the value of the observation before step
:math:`t`, and :math:`V'_t`, the value of the observation after it.  With two
flags, :math:`d_t` = ``terminated`` (there is no continuation: do not
bootstrap) and :math:`\chi_t` = ``trace_cut`` (the next entry of the array does
not continue this trajectory: stop the backward recursion), the TD error, the
generalised advantage estimate and the λ-return are

.. math::

    \delta_t = R_t + \gamma (1 - d_t) V'_t - V_t, \qquad
    A_t = \delta_t + \gamma\lambda (1 - \chi_t) A_{t+1}, \qquad
    R^\lambda_{\ge t} = R_t + \gamma(1 - d_t)\bigl[V'_t + \lambda (1 - \chi_t)(R^\lambda_{\ge t+1} - V'_t)\bigr].

A terminal step also cuts the trace, and :math:`A_t = R^\lambda_{\ge t} - V_t`.

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
    r"""A reward that came before a step is uncorrelated with that step's score: :math:`\mathbb{E}[R_0\, s_1] = 0`.

    Two decisions, at steps 0 and 1: :math:`a \sim \pi_\theta`, then
    :math:`a' \sim \pi'(\cdot \mid a)` (softmax policies over ``K`` actions; the
    second decision has its own block of logits :math:`\theta^{(a)}` for each first
    action :math:`a`); the reward :math:`R_0(a)` of step 0 is known after the first.
    The score of the second decision with respect to the block :math:`\theta^{(1)}`
    (the logits used after :math:`a = 1`) has coordinates
    :math:`s_{1,k} = \mathbb{1}[a = 1]\,(\mathbb{1}[a' = k] - \pi'(k \mid 1))`, :math:`k = 1, \dots, K`
    (the softmax score :math:`\mathbf{e}_{a'} - \pi'`).  Summing over :math:`a'` first:

    .. math::

        \mathbb{E}[R_0\, s_{1,k}] = \sum_a \pi_\theta(a)\, R_0(a)\, \mathbb{1}[a = 1] \sum_{a'} \pi'(a' \mid a)\,\bigl(\mathbb{1}[a' = k] - \pi'(k \mid a)\bigr)
        = \pi_\theta(1)\, R_0(1) \cdot 0 = 0.

    The probabilities are symbols; their normalisation is a stated premise,
    substituted last.

    Examples
    --------
    >>> from derivations.returns import past_reward_score_vanishes
    >>> past_reward_score_vanishes(3).verify().rhs.T
    Matrix([[0, 0, 0]])
    """
    K = require_int("K", K, minimum=2)
    a, b = sp.symbols("a a'", integer=True, positive=True)  # b: the second decision a'
    first, second = sp.IndexedBase(r"\pi_{\theta}", positive=True), sp.IndexedBase(r"\pi'", positive=True)
    R0 = sp.Function("R_0", real=True)
    normalised = {second[1, K]: 1 - sum(second[1, j] for j in range(1, K))}

    def score(k, after):  # coordinate k of the second decision's score with respect to theta^(1)
        return sp.KroneckerDelta(b, k) - second[after, k]

    d = Derivation(
        f"A past reward times a later score has mean zero (K = {K})",
        assumptions=[
            r"$a \sim \pi_\theta$, then $a' \sim \pi'(\cdot \mid a)$, with ${\pi'}_{a,a'} = \pi'(a' \mid a)$",
            r"$\theta^{(a)}$: the logits of the second decision after the first action $a$",
            r"$s_{1,k} = \mathbb{1}[a = 1]\,(\mathbb{1}[a' = k] - \pi'(k \mid 1))$: the score of step 1 with respect to $\theta^{(1)}$",
            r"$R_0$ depends on $a$ only",
            *[sp.Eq(k_, v) for k_, v in normalised.items()],
        ],
    )
    d.step(
        sp.Matrix([sp.Sum(first[a] * second[a, b] * R0(a) * sp.KroneckerDelta(a, 1) * score(k, a), (b, 1, K), (a, 1, K)) for k in range(1, K + 1)]),
        sp.Matrix([first[1] * R0(1) * sp.Sum(second[1, b] * score(k, 1), (b, 1, K)) for k in range(1, K + 1)]),
        r"only $a = 1$ touches $\theta^{(1)}$; sum over $a'$ inside",
    )
    d.then(sp.zeros(K, 1), r"$\mathbb{E}[s_1 \mid a = 1] = \sum_{a'} \pi'(a' \mid 1)\,(\mathbb{1}[a' = k] - \pi'(k \mid 1)) = 0$", facts=normalised)
    return d


class Indicator(sp.Function):
    r""":math:`\mathbb{1}[\text{condition}]`: 1 where the condition holds, 0 where it fails, evaluated once it is decided.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.returns import Indicator
    >>> t, u = sp.symbols("t u", integer=True)
    >>> Indicator(u >= t), Indicator(sp.Integer(2) >= 1), Indicator(sp.Integer(0) >= 1)
    (Indicator(u >= t), 1, 0)
    """

    nargs = 1

    @classmethod
    def eval(cls, condition: sp.Basic) -> sp.Basic | None:
        if condition is sp.true:
            return sp.Integer(1)
        if condition is sp.false:
            return sp.Integer(0)
        return None

    def _latex(self, printer):
        return r"\mathbb{1}\left[" + printer._print(self.args[0]) + r"\right]"


_R = sp.IndexedBase("R", real=True)  # R_t: the reward of step t
_s = sp.IndexedBase("s", real=True)  # s_t: the score of step t
_u = sp.Symbol("u", integer=True, nonnegative=True)


def reward_to_go_unbiased(T: int = 3) -> Derivation:
    r"""Reward-to-go drops only terms of mean zero: :math:`\mathbb{E}[\sum_t s_t \sum_u R_u] = \mathbb{E}[\sum_t s_t R_{\ge t}]`.

    Steps :math:`t, u = 0, \dots, T-1` at a fixed horizon ``T`` (the CAS
    writes every sum out).  One idea a line: the product of two sums is a
    sum over all pairs :math:`(t, u)`; each pair is either causal
    (:math:`u \ge t`, the reward comes at or after the decision) or not;
    a non-causal pair has mean zero (:func:`past_reward_score_vanishes`:
    :math:`R_u` is fixed by the prefix :math:`o_{<t}`, and
    :math:`\mathbb{E}[s_t \mid o_{<t}] = 0`; stated here as premises); the
    indicator :math:`\mathbb{1}[u \ge t]` then cuts the inner sum to
    :math:`u = t, \dots, T-1`, which is the reward-to-go
    :math:`R_{\ge t} = \sum_{u \ge t} R_u`.

    Examples
    --------
    >>> from derivations.returns import reward_to_go_unbiased
    >>> d = reward_to_go_unbiased(3).verify()
    >>> d.rhs
    Sum(Expect(s[t]*Sum(R[u], (u, t, 2))), (t, 0, 2))
    >>> len(d.steps), d.proved_by()
    (4, {'expand': 4})
    """
    T = require_int("T", T, minimum=1)
    t, u, last = _t, _u, T - 1
    pair = Expect(_R[u] * _s[t])
    past = {Expect(_R[b] * _s[a]): 0 for a in range(T) for b in range(a)}
    d = Derivation(
        f"Reward-to-go is unbiased (T = {T})",
        assumptions=[r"steps $t, u = 0, \dots, T - 1$", r"$R_u$ is known once $o_{\le u}$ is", r"$s_t$: score of step $t$",
                     r"past rewards are uncorrelated with later scores (the lemma above):", *[sp.Eq(k, v) for k, v in past.items()]],
        unfold=Definitions((), Linearity(Expect)),
    )
    both = ((u, 0, last), (t, 0, last))
    causal = sp.Sum(Indicator(u >= t) * pair, *both)
    d.step(Expect(sp.Sum(_s[t], (t, 0, last)) * sp.Sum(_R[u], (u, 0, last))), sp.Sum(pair, *both),
           r"linearity: every score times every reward")
    d.then(causal + sp.Sum(Indicator(u < t) * pair, *both), r"$1 = \mathbb{1}[u \ge t] + \mathbb{1}[u < t]$")
    d.then(causal, r"$\mathbb{E}[R_u s_t] = \mathbb{E}\bigl[R_u\, \mathbb{E}[s_t \mid o_{<t}]\bigr] = 0$ for $u < t$", facts=past)
    d.then(sp.Sum(Expect(_s[t] * sp.Sum(_R[u], (u, t, last))), (t, 0, last)),
           r"the indicator keeps $u = t, \dots, T - 1$: $\sum_{u \ge t} R_u = R_{\ge t}$")
    return d


def outcome_reward_to_go() -> Derivation:
    r"""With an outcome reward, the reward-to-go is the outcome at every step: :math:`R_{\ge t} = R`.

    An outcome reward is one number at the last step :math:`T - 1`,
    :math:`R_u = R\, \mathbb{1}[u = T-1]`, so
    :math:`R_{\ge t} = \sum_{u=t}^{T-1} R\,\mathbb{1}[u = T-1] = R` for every step
    :math:`t \le T - 1` (written :math:`T - 1 = t + n`, :math:`n \ge 0`):
    causality has nothing to drop.

    Examples
    --------
    >>> from derivations.returns import outcome_reward_to_go
    >>> outcome_reward_to_go().verify().rhs
    R
    """
    t = sp.Symbol("t", integer=True, nonnegative=True)
    n = sp.Symbol("n", integer=True, nonnegative=True)
    u = sp.Symbol("u", integer=True)
    R = sp.Symbol("R", real=True)
    r = _R
    last = t + n

    unfold = Definitions({r[u]: R * sp.KroneckerDelta(u, last)})

    d = Derivation(
        "An outcome reward is its own reward-to-go",
        assumptions=[r"$R_u = R\,\mathbb{1}[u = T-1]$ (one reward, at the last step)", r"$T - 1 = t + n$, $n \ge 0$"],
        unfold=unfold,
    )
    d.step(sp.Sum(r[u], (u, t, last)), sp.Sum(R * sp.KroneckerDelta(u, last), (u, t, last)), "outcome reward")
    d.then(R, r"$t \le T - 1$")
    return d


# -- discounting -------------------------------------------------------------------------------


def discounted_objective_weights() -> Derivation:
    r"""The literal discounted objective weights the score of step :math:`t` by :math:`\gamma^t R^\gamma_{\ge t}`.

    Steps :math:`u = 0, \dots, T-1`, step :math:`u` discounted by
    :math:`\gamma^u` (array position :math:`u` holds step :math:`u`, as in
    :func:`numeric.discounted_score_weights`).  After dropping past rewards
    (:func:`reward_to_go_unbiased`), the score of step :math:`t` multiplies
    :math:`\sum_{u \ge t} \gamma^u R_u`, which is

    .. math::

        \sum_{u=t}^{T-1} \gamma^{u} R_u = \gamma^{t} \sum_{u=t}^{T-1} \gamma^{u - t} R_u = \gamma^{t} R^\gamma_{\ge t}.

    Examples
    --------
    >>> from derivations.returns import discounted_objective_weights
    >>> discounted_objective_weights().verify().proved_by()
    {'sums as atoms, cancel(together)': 1}
    """
    t, T, u = sp.symbols("t T u", integer=True)
    g = sp.Symbol("gamma", positive=True)
    d = Derivation(
        "The literal discounted objective weights step t by γᵗ R^γ_{≥t}",
        assumptions=[r"steps $u = 0, \dots, T - 1$", r"$J_\gamma = \mathbb{E}[\sum_{u=0}^{T-1} \gamma^{u} R_u]$", r"$0 < \gamma \le 1$"],
    )
    d.step(sp.Sum(g**u * _R[u], (u, t, T - 1)), g**t * sp.Sum(g ** (u - t) * _R[u], (u, t, T - 1)), r"take out $\gamma^{t}$")
    return d


def dropping_discount_turns_gradient() -> Derivation:
    r"""Weighting by :math:`R^\gamma_{\ge t}` instead of :math:`\gamma^t R^\gamma_{\ge t}` changes the direction.

    Two decisions, at steps 0 and 1, with separate parameter blocks: the literal
    gradient is :math:`(\gamma^0 g_0, \gamma^1 g_1) = (g_0, \gamma g_1)` and the one without
    :math:`\gamma^t` is :math:`(g_0, g_1)`, with :math:`g_0 = \mathbb{E}[s_0 R^\gamma_{\ge 0}]`,
    :math:`g_1 = \mathbb{E}[s_1 R^\gamma_{\ge 1}]`.
    They are parallel only if their determinant vanishes:

    .. math::

        \det\begin{pmatrix} g_0 & g_0 \\ \gamma g_1 & g_1 \end{pmatrix} = (1 - \gamma)\, g_0 g_1 \ne 0
        \quad\text{for } \gamma < 1,\ g_0 g_1 \ne 0.

    Examples
    --------
    >>> from derivations.returns import dropping_discount_turns_gradient
    >>> dropping_discount_turns_gradient().verify().rhs
    g_0*g_1*(1 - gamma)
    """
    a, b = sp.symbols("g_0 g_1", real=True)
    M = sp.Matrix([[a, a], [gamma * b, b]])
    d = Derivation(
        "Dropping γᵗ turns the gradient",
        assumptions=[r"step 0 and step 1 have separate parameters", r"columns: literal $(g_0, \gamma g_1)$ and dropped $(g_0, g_1)$"],
    )
    d.step(sp.Determinant(M), a * b * (1 - gamma), "determinant")
    return d


# -- λ-returns and GAE -------------------------------------------------------------------------


class LambdaReturn(sp.Function):
    r"""The λ-return :math:`R^\lambda_{\ge t}` of step :math:`t` (notation; the recursion defines it).

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.returns import LambdaReturn
    >>> sp.latex(LambdaReturn(sp.Symbol("t") + 1))
    'R^{\\lambda}_{\\geq t + 1}'
    """

    nargs = 1

    def _latex(self, printer):
        return r"R^{\lambda}_{\geq " + printer._print(self.args[0]) + "}"


_t = sp.Symbol("t", integer=True)
_V, _Vn, _A, _delta = (sp.IndexedBase(n, real=True) for n in ("V", "V'", "A", "delta"))
_d, _c = (sp.IndexedBase(n) for n in ("d", r"\chi"))   # _c: the trace cut chi_t


def _td_error(t, terminated=0):
    return _R[t] + gamma * (1 - terminated) * _Vn[t] - _V[t]


def gae_is_lambda_return_minus_value() -> Derivation:
    r"""GAE is the λ-return minus the value: :math:`A_t = R^\lambda_{\ge t} - V_t`, by backward induction.

    Two cases.  *Trace cut* (:math:`\chi_t = 1`): both recursions stop, and
    :math:`R^\lambda_{\ge t} - V_t = R_t + \gamma(1 - d_t)V'_t - V_t = \delta_t = A_t`.
    *No cut* (:math:`\chi_t = 0`, hence :math:`d_t = 0`, and the next entry
    continues the trajectory, :math:`V'_t = V_{t+1}`): assume
    :math:`A_{t+1} = R^\lambda_{\ge t+1} - V_{t+1}`.

    Examples
    --------
    >>> from derivations.returns import gae_is_lambda_return_minus_value
    >>> d = gae_is_lambda_return_minus_value().verify()
    >>> len(d.steps), d.verified
    (4, True)
    """
    t = _t
    next_return = LambdaReturn(t + 1)
    d = Derivation(
        "GAE is the λ-return minus the value",
        assumptions=[
            sp.Eq(_delta[t], _td_error(t, _d[t])), r"$A_t = \delta_t + \gamma\lambda(1 - \chi_t)A_{t+1}$",
            r"$d_t = 1 \Rightarrow \chi_t = 1$ (a terminal step ends the trace)",
            r"without a cut the next entry continues the trajectory: $V'_t = V_{t+1}$",
            r"induction:", sp.Eq(next_return, _A[t + 1] + _V[t + 1]),
        ],
    )
    lambda_return = _R[t] + gamma * (1 - _d[t]) * (_Vn[t] + lam * (1 - _c[t]) * (next_return - _Vn[t]))
    regrouped = _delta[t] + gamma * lam * (1 - _d[t]) * (1 - _c[t]) * (next_return - _Vn[t])
    d.step(lambda_return - _V[t], regrouped, "regroup", facts={_delta[t]: _td_error(t, _d[t])})
    d.step(regrouped, _delta[t], r"$\chi_t = 1$", given=(sp.Eq(_c[t], 1),))
    d.step(
        regrouped,
        _delta[t] + gamma * lam * (next_return - _V[t + 1]),
        r"$\chi_t = 0$",
        given=(sp.Eq(_c[t], 0), sp.Eq(_d[t], 0), sp.Eq(_Vn[t], _V[t + 1])),
    )
    d.then(_delta[t] + gamma * lam * _A[t + 1], "induction", facts={next_return: _A[t + 1] + _V[t + 1]})
    return d


def _gae_recursion(T: int, lam_value=lam, terminated=None, cuts=None):
    """A_0 .. A_{T-1} built by the two-flag recursion, explicit in R_t, V_t, V'_t."""
    terminated = terminated or [0] * T
    cuts = cuts or [0] * (T - 1) + [1]
    A, nxt = [None] * T, sp.Integer(0)
    for t in reversed(range(T)):
        delta = _R[t] + gamma * (1 - terminated[t]) * _Vn[t] - _V[t]
        nxt = delta + gamma * lam_value * (1 - cuts[t]) * nxt
        A[t] = nxt
    return A


def _consistent(T: int) -> dict:
    """Within one trajectory the next value is the next entry's value: V'_t = V_{t+1}."""
    return {_Vn[t]: _V[t + 1] for t in range(T - 1)}


def gae_unrolled(T: int = 3) -> Derivation:
    r"""The recursion unrolled: :math:`A_0 = \sum_{u=0}^{T-1} (\gamma\lambda)^{u} \delta_u` (one trajectory, no cut before the last step).

    Examples
    --------
    >>> from derivations.returns import gae_unrolled
    >>> gae_unrolled(4).verify().verified
    True
    """
    T = require_int("T", T, minimum=1)
    A = _gae_recursion(T)
    deltas = [_td_error(u) for u in range(T)]
    d = Derivation(f"GAE unrolled (T = {T})", assumptions=[r"steps $u = 0, \dots, T - 1$", r"trace cut only at the last step $T - 1$, not terminated", *[sp.Eq(_delta[u], deltas[u]) for u in range(T)]])
    d.step(A[0], sp.Add(*[(gamma * lam) ** u * _delta[u] for u in range(T)]), "unroll", facts={_delta[u]: deltas[u] for u in range(T)})
    return d


def gae_lambda_zero(T: int = 3) -> Derivation:
    r"""GAE with :math:`\lambda = 0` is the TD error: :math:`A_t = \delta_t`.

    Examples
    --------
    >>> from derivations.returns import gae_lambda_zero
    >>> gae_lambda_zero().verify().rhs
    gamma*V'[0] + R[0] - V[0]
    """
    T = require_int("T", T, minimum=1)
    d = Derivation(f"GAE(λ = 0) is the TD error (T = {T})", assumptions=[r"steps $0, \dots, T - 1$"])
    d.step(_gae_recursion(T)[0], _gae_recursion(T, lam_value=0)[0], r"$\lambda = 0$", given=(sp.Eq(lam, 0),))
    return d


def gae_lambda_one(T: int = 3) -> Derivation:
    r"""GAE with :math:`\lambda = 1` is the discounted return minus :math:`V`: the TD errors telescope.

    .. math::

        A_0 = \sum_{u=0}^{T-1} \gamma^{u}\delta_u = \sum_{u=0}^{T-1} \gamma^{u} R_u + \gamma^{T} V'_{T-1} - V_0
        \qquad (V'_u = V_{u+1} \text{ inside the trajectory}).

    Examples
    --------
    >>> from derivations.returns import gae_lambda_one
    >>> gae_lambda_one(3).verify().rhs
    gamma**3*V'[2] + gamma**2*R[2] + gamma*R[1] + R[0] - V[0]
    """
    T = require_int("T", T, minimum=1)
    A0 = _gae_recursion(T)[0]
    d = Derivation(
        f"GAE(λ = 1) is the discounted return minus V (T = {T})",
        assumptions=[r"steps $0, \dots, T - 1$", r"one trajectory:", *[sp.Eq(k, v) for k, v in _consistent(T).items()], "bootstrap from $V'_{T-1}$ at the end"],
    )
    telescoped = sp.Add(*[gamma**u * _R[u] for u in range(T)]) + gamma**T * _Vn[T - 1] - _V[0]
    d.step(A0, telescoped, r"$\lambda = 1$", facts=_consistent(T), given=(sp.Eq(lam, 1),))
    return d


def one_done_for_both(T: int = 3) -> Derivation:
    r"""One ``done`` flag for both questions biases the targets at a time limit by :math:`-(\gamma\lambda)^{T-1-t}\gamma V'_{T-1}`.

    A trajectory cut off by a time limit after its last step :math:`T - 1`
    (truncated, not terminated) has :math:`d_{T-1} = 0, c_{T-1} = 1`.  A single
    ``done = 1`` sets :math:`d_{T-1} = c_{T-1} = 1` and drops the bootstrap
    :math:`\gamma V'_{T-1}`: the error reaches step :math:`t` scaled by
    :math:`(\gamma\lambda)^{T-1-t}`.  Targets are too low when
    :math:`V'_{T-1} > 0`, too high when :math:`V'_{T-1} < 0`.

    Examples
    --------
    >>> from derivations.returns import one_done_for_both
    >>> one_done_for_both(3).verify().rhs
    -gamma**3*lambda**2*V'[2]
    """
    T = require_int("T", T, minimum=1)
    two_flags = _gae_recursion(T, terminated=[0] * T)
    one_done = _gae_recursion(T, terminated=[0] * (T - 1) + [1])
    d = Derivation(
        f"One done flag for both drops the bootstrap at a time limit (T = {T})",
        assumptions=[r"steps $0, \dots, T - 1$", r"time limit after the last step $T - 1$: truncated, not terminated"],
    )
    d.step(one_done[0] - two_flags[0], -((gamma * lam) ** (T - 1)) * gamma * _Vn[T - 1], r"only $\delta_{T-1}$ differs")
    return d
