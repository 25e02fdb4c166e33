r"""A symbolic softmax policy over K actions, its scores, and the expectation operator.

For logits :math:`\theta \in \mathbb{R}^K`,

.. math::

    \pi_a = \frac{e^{\theta_a}}{Z}, \qquad Z = \sum_{b=1}^{K} e^{\theta_b},
    \qquad
    s_a = \nabla_\theta \log \pi_a = e_a - \pi,
    \qquad
    \mathbb{E}_\pi[f] = \sum_{a=1}^{K} \pi_a f(a).

:class:`SoftmaxPolicy` builds these for a fixed ``K`` (every entry an explicit
expression in :math:`\theta_1, \dots, \theta_K`); :class:`IndexedSoftmax` builds
them for a symbolic ``K`` with ``IndexedBase`` and ``Sum``, writing
:math:`K = j + n` with :math:`n \ge 0` so that the coordinate :math:`j` lies in
range and ``KroneckerDelta`` sums resolve.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from ._validate import require_int, require_name
from .definitions import Definitions

__all__ = ["IndexedSoftmax", "SoftmaxPolicy"]


class SoftmaxPolicy:
    r"""Softmax policy over ``K`` actions with symbolic real logits.

    Parameters
    ----------
    K : int
        Number of actions, at least 2.
    logit : str
        Name of the logit symbols (``theta`` gives :math:`\theta_1, \dots, \theta_K`).

    Examples
    --------
    >>> from derivations import SoftmaxPolicy
    >>> pol = SoftmaxPolicy(3)
    >>> pol.probs[0]
    exp(theta_1)/(exp(theta_1) + exp(theta_2) + exp(theta_3))
    >>> pol.score(0).T
    Matrix([[1 - exp(theta_1)/(exp(theta_1) + exp(theta_2) + exp(theta_3)), -exp(theta_2)/(exp(theta_1) + exp(theta_2) + exp(theta_3)), -exp(theta_3)/(exp(theta_1) + exp(theta_2) + exp(theta_3))]])
    """

    def __init__(self, K: int, logit: str = "theta") -> None:
        self.K = require_int("K", K, minimum=2)
        self.theta = sp.Matrix(sp.symbols(f"{require_name('logit', logit)}_1:{K + 1}", real=True))
        self.Z = sum(sp.exp(t) for t in self.theta)
        self.probs = sp.Matrix([sp.exp(t) / self.Z for t in self.theta])

    def symbols(self, name: str, **assumptions: bool) -> sp.Matrix:
        """A column of ``K`` symbols ``name_1 .. name_K`` (per-action rewards, say)."""
        return sp.Matrix(sp.symbols(f"{name}_1:{self.K + 1}", **assumptions))

    def log_prob(self, a: int) -> sp.Expr:
        r""":math:`\log \pi_a = \theta_a - \log Z`."""
        return self.theta[self._action(a)] - sp.log(self.Z)

    def score(self, a: int) -> sp.Matrix:
        r"""Closed-form score :math:`s_a = e_a - \pi` (a ``K x 1`` column)."""
        e = sp.zeros(self.K, 1)
        e[self._action(a)] = 1
        return e - self.probs

    def score_by_differentiation(self, a: int) -> sp.Matrix:
        r""":math:`\nabla_\theta \log \pi_a` computed by ``diff`` (to check :meth:`score`)."""
        return sp.Matrix([sp.diff(sp.log(self.probs[self._action(a)]), t) for t in self.theta])

    def gradient(self, expr: sp.Expr) -> sp.Matrix:
        r""":math:`\nabla_\theta` of a scalar expression, a ``K x 1`` column."""
        return sp.Matrix([sp.diff(expr, t) for t in self.theta])

    def expectation(self, f: Callable[[int], sp.Basic]) -> sp.Basic:
        r""":math:`\mathbb{E}_\pi[f] = \sum_a \pi_a f(a)` for ``f`` mapping an action index to an expression or column."""
        if not callable(f):
            raise TypeError(f"f must be a function of the action index, got {type(f).__name__}")
        total = 0 * f(0)
        for a in range(self.K):
            total = total + self.probs[a] * f(a)
        return total

    def _action(self, a) -> int:
        if isinstance(a, bool) or not isinstance(a, int):
            raise TypeError(f"a must be an int action index, got {type(a).__name__}")
        if not 0 <= a < self.K:
            raise ValueError(f"a must be an action index in 0..{self.K - 1}, got {a}")
        return a


class IndexedSoftmax:
    r"""Softmax policy over a symbolic number :math:`K = j + n` of actions.

    ``j`` is the coordinate of the gradient under study (a positive integer) and
    :math:`n \ge 0`, so :math:`1 \le j \le K` holds by construction.

    Examples
    --------
    >>> from derivations import IndexedSoftmax
    >>> pol = IndexedSoftmax()
    >>> pol.K
    j + n
    >>> pol.prob(pol.a), pol.unfold(pol.prob(pol.a))
    (pi[a], exp(theta[a])/Sum(exp(theta[b]), (b, 1, j + n)))
    """

    def __init__(self, logit: str = "theta") -> None:
        self.j = sp.Symbol("j", integer=True, positive=True)
        self.n = sp.Symbol("n", integer=True, nonnegative=True)
        self.K = self.j + self.n
        self.a, self.b = sp.symbols("a b", integer=True, positive=True)
        self.theta = sp.IndexedBase(require_name("logit", logit), real=True)
        self.pi = sp.IndexedBase("pi", positive=True)
        self.Z = sp.Sum(sp.exp(self.theta[self.b]), (self.b, 1, self.K))

    def prob(self, a: sp.Basic | int) -> sp.Expr:
        r""":math:`\pi_a` in notation; :meth:`unfold` turns it into :math:`e^{\theta_a} / Z`."""
        return self.pi[a]

    def softmax(self, a: sp.Basic | int) -> sp.Expr:
        r""":math:`e^{\theta_a} / Z` with :math:`Z = \sum_{b=1}^{K} e^{\theta_b}`."""
        return sp.exp(self.theta[a]) / self.Z

    @property
    def definitions(self) -> Definitions:
        r"""The notation's definition :math:`\pi_a := e^{\theta_a} / Z`, for ``Derivation(unfold=...)``."""
        return Definitions({self.pi[self.a]: self.softmax(self.a)})

    def unfold(self, expr: sp.Expr) -> sp.Expr:
        r"""Replace every :math:`\pi_i` by its softmax definition (:attr:`definitions` applied)."""
        return self.definitions.apply(expr)

    def score(self, a: sp.Basic | int) -> sp.Expr:
        r"""Coordinate :math:`j` of the closed-form score: :math:`\mathbb{1}[a = j] - \pi_j`."""
        return sp.KroneckerDelta(a, self.j) - self.prob(self.j)

    def expectation(self, f: Callable[[sp.Symbol], sp.Expr]) -> sp.Sum:
        r"""Unevaluated :math:`\sum_{a=1}^{K} \pi_a f(a)`."""
        if not callable(f):
            raise TypeError(f"f must be a function of the action index, got {type(f).__name__}")
        return sp.Sum(self.prob(self.a) * f(self.a), (self.a, 1, self.K))
