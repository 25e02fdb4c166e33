r"""The enumerated toy language model.

A :class:`TinyLM` is a tabular softmax policy over ``V`` tokens, one of them
end-of-sequence (token ``0``), that stops at EOS or at length ``L``.  Every
sequence it can emit is enumerated, so an expectation over its responses is a
finite sum and every identity of the lecture notes can be checked exactly in
fp64:

.. math::

    \mathbb{E}_{\pi_\theta}[f] = \sum_{o} \pi_\theta(o)\, f(o),
    \qquad
    \pi_\theta(o) = \prod_{t} \pi_\theta(o_t \mid o_{<t}),
    \qquad
    \pi_\theta(\cdot \mid o_{<t}) = \operatorname{softmax}\bigl(\theta_{o_{<t}}\bigr).

Each non-terminal prefix :math:`o_{<t}` owns a row of ``V`` logits in one flat
parameter vector :math:`\theta \in \mathbb{R}^{P}`, :math:`P = V \cdot
\#\text{prefixes}`.  Its score has the closed form

.. math::

    \nabla_\theta \log \pi_\theta(o_t \mid o_{<t})
    = e_{o_{<t}} \otimes \bigl(\mathrm{onehot}(o_t) - \pi_\theta(\cdot \mid o_{<t})\bigr),

which :func:`token_score_tensor` and :func:`score_matrix` evaluate for all
sequences at once.  Everything is vectorised over the ``N`` sequences and
differentiable by autograd.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np
import torch

from ._validate import as_tensor, require_finite, require_finite_real, require_int, require_nonnegative, require_same_device

__all__ = ["EOS", "TinyLM", "default_reward", "perturb", "score_matrix", "token_score_tensor"]

EOS = 0
"""The token id that ends a sequence."""

MAX_SEQUENCES = 2_000_000
"""Most responses a :class:`TinyLM` enumerates (``TinyLM(V=11, L=6)``, 1,111,111 of them, takes seconds; ten times more takes minutes)."""


def count_sequences(V: int, L: int) -> int:
    r"""Number of responses of a ``TinyLM(V, L)``: :math:`\sum_{k=1}^{L}(V-1)^{k-1} + (V-1)^L`, without enumerating them.

    Examples
    --------
    >>> from numeric.tinylm import count_sequences
    >>> count_sequences(4, 4), count_sequences(50, 6)
    (121, 14129647351)
    """
    C = V - 1
    return sum(C**k for k in range(L)) + C**L


class TinyLM:
    r"""Every response of a tabular softmax LM, enumerated.

    Parameters
    ----------
    V : int
        Vocabulary size, at least 2; token ``0`` is EOS.
    L : int
        Maximum response length, at least 1.
    seed : int
        Seed of the generator that draws :attr:`theta0`.
    scale : float
        :attr:`theta0` is standard normal times ``scale``.

    Attributes
    ----------
    N : int
        Number of sequences, :math:`\sum_{k=1}^{L}(V-1)^{k-1} + (V-1)^L`.
    tokens : torch.Tensor
        ``[N, L]`` int64 token ids, padded with EOS after the end.
    mask : torch.Tensor
        ``[N, L]`` float64, 1 on the tokens of a sequence and 0 on padding.
    lengths : torch.Tensor
        ``[N]`` int64 sequence lengths.
    prefix_rows : torch.Tensor
        ``[N, L]`` int64: the row of ``theta`` (the prefix) that emits token
        ``t`` of sequence ``n``; 0 on padding.
    theta0 : torch.Tensor
        ``[P]`` float64 initial parameters.

    Notes
    -----
    Sequences are listed shortest first; prefixes (the rows of
    ``theta.view(-1, V)``) likewise, the empty prefix first.

    Examples
    --------
    >>> from numeric import TinyLM
    >>> lm = TinyLM(V=4, L=4, seed=0)
    >>> lm.N, lm.P, lm.seqs[:3]
    (121, 160, [(0,), (1, 0), (2, 0)])
    >>> p = lm.probs(lm.theta0)
    >>> round(float(p.sum()), 12)
    1.0
    """

    def __init__(self, V: int = 4, L: int = 4, seed: int = 0, scale: float = 1.0) -> None:
        self.V = require_int("V", V, minimum=2)
        self.L = require_int("L", L, minimum=1)
        if (n := count_sequences(self.V, self.L)) > MAX_SEQUENCES:
            raise ValueError(f"TinyLM(V={self.V}, L={self.L}) has {n:,} responses, more than MAX_SEQUENCES = {MAX_SEQUENCES:,}; use a smaller V or L")
        require_int("seed", seed)
        self.scale = require_finite_real("scale", scale, minimum=0)
        self._enumerate()
        gen = torch.Generator().manual_seed(seed)
        self.theta0 = torch.randn(self.P, generator=gen, dtype=torch.float64) * self.scale

    def _enumerate(self) -> None:
        V, L, C = self.V, self.L, self.V - 1
        # prefixes[k]: [C**k, k] all EOS-free prefixes of depth k, in base-C order
        prefixes = [torch.zeros(1, 0, dtype=torch.int64)]
        for _ in range(L):
            last = prefixes[-1]
            nxt = torch.arange(1, V).repeat(last.shape[0])
            prefixes.append(torch.cat([last.repeat_interleave(C, 0), nxt[:, None]], 1))
        offsets = [0]
        for k in range(L):
            offsets.append(offsets[-1] + C**k)
        self.n_prefixes = offsets[L]
        self.P = self.n_prefixes * V
        self._depth_prefixes = prefixes[:L]
        self._offsets = offsets

        blocks_tok, blocks_row = [], []
        for k in range(L):  # prefix of depth k, then EOS: length k + 1
            pre = prefixes[k]
            blocks_tok.append(torch.cat([pre, torch.full((pre.shape[0], 1), EOS)], 1))
            blocks_row.append(self._rows_of(pre, k + 1))
        blocks_tok.append(prefixes[L])  # length L without EOS
        blocks_row.append(self._rows_of(prefixes[L], L))
        n = sum(b.shape[0] for b in blocks_tok)
        self.N = n
        self.tokens = torch.full((n, L), EOS, dtype=torch.int64)
        self.prefix_rows = torch.zeros((n, L), dtype=torch.int64)
        self.lengths = torch.empty(n, dtype=torch.int64)
        i = 0
        for tok, row in zip(blocks_tok, blocks_row):
            m, k = tok.shape
            self.tokens[i : i + m, :k] = tok
            self.prefix_rows[i : i + m, :k] = row
            self.lengths[i : i + m] = k
            i += m
        self.mask = (torch.arange(L)[None, :] < self.lengths[:, None]).to(torch.float64)

    def _rows_of(self, seqs: torch.Tensor, length: int) -> torch.Tensor:
        """Row index of the prefix before each of the first ``length`` tokens."""
        C = self.V - 1
        rows = torch.zeros(seqs.shape[0], length, dtype=torch.int64)
        code = torch.zeros(seqs.shape[0], dtype=torch.int64)
        for t in range(length):
            rows[:, t] = self._offsets[t] + code
            if t < seqs.shape[1]:
                code = code * C + (seqs[:, t] - 1)
        return rows

    @cached_property
    def seqs(self) -> list[tuple[int, ...]]:
        """Every sequence as a tuple of token ids, in the order of the rows of :attr:`tokens`."""
        return [tuple(row[:k]) for row, k in zip(self.tokens.tolist(), self.lengths.tolist())]

    def prefixes(self) -> list[tuple[int, ...]]:
        """The non-terminal prefixes, in the order of the rows of ``theta.view(-1, V)``."""
        return [tuple(p) for pre in self._depth_prefixes for p in pre.tolist()]

    def prefix_row(self, prefix: Sequence[int]) -> int:
        """Row of ``theta.view(-1, V)`` that holds the logits after ``prefix``.

        Raises
        ------
        ValueError
            If ``prefix`` is not a non-terminal prefix of this model.
        """
        try:
            prefix = tuple(int(t) for t in prefix)
        except TypeError:
            raise TypeError(f"prefix must be a sequence of token ids, got {type(prefix).__name__}") from None
        k = len(prefix)
        if k >= self.L or any(not 1 <= t < self.V for t in prefix):
            raise ValueError(
                f"prefix must be a tuple of at most L-1={self.L - 1} non-EOS token ids in 1..{self.V - 1}, got {prefix}"
            )
        code = 0
        for t in prefix:
            code = code * (self.V - 1) + (t - 1)
        return self._offsets[k] + code

    def logits(self, theta: torch.Tensor) -> torch.Tensor:
        """``[n_prefixes, V]`` view of the flat parameter vector (validated by :func:`check_theta`)."""
        return check_theta(self, theta).view(self.n_prefixes, self.V)

    def token_log_probs_from_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """``[N, L]`` token log-probabilities from an (unchecked) ``[n_prefixes, V]`` table of logits."""
        return torch.log_softmax(logits, -1)[self.prefix_rows, self.tokens] * self.mask

    def cond_probs(self, theta: torch.Tensor, prefix: Sequence[int]) -> torch.Tensor:
        r""":math:`\pi_\theta(\cdot \mid \text{prefix})`, a ``[V]`` tensor.

        Examples
        --------
        >>> from numeric import TinyLM
        >>> lm = TinyLM()
        >>> round(float(lm.cond_probs(lm.theta0, (1, 2)).sum()), 12)
        1.0
        """
        return torch.softmax(self.logits(theta)[self.prefix_row(prefix)], -1)

    def token_log_probs(self, theta: torch.Tensor) -> torch.Tensor:
        r"""``[N, L]`` :math:`\log \pi_\theta(o_t \mid o_{<t})`, 0 on padding."""
        return self.token_log_probs_from_logits(self.logits(theta))

    def sequence_log_prob(self, theta: torch.Tensor) -> torch.Tensor:
        r"""``[N]`` :math:`\log \pi_\theta(o) = \sum_t \log \pi_\theta(o_t \mid o_{<t})`."""
        return self.token_log_probs(theta).sum(1)

    def probs(self, theta: torch.Tensor) -> torch.Tensor:
        r"""``[N]`` :math:`\pi_\theta(o)`; sums to 1."""
        return self.sequence_log_prob(theta).exp()

    def __repr__(self) -> str:
        return f"TinyLM(V={self.V}, L={self.L}, N={self.N}, P={self.P})"


def check_theta(lm: TinyLM, theta: object, name: str = "theta") -> torch.Tensor:
    r"""``theta`` validated for ``lm``: a finite real ``[P]`` torch tensor, returned in float64 on the CPU.

    Every function of the toy-LM layer calls it first.  A float32 (or
    half-precision) tensor is accepted and converted exactly to float64, the
    precision of every exact check; the conversion is differentiable, so a
    ``theta`` that requires grad keeps its graph.

    Raises
    ------
    TypeError
        If ``theta`` is not a torch tensor (numpy arrays included: convert with
        ``torch.from_numpy``), or its dtype is not real floating point.
    ValueError
        If its shape is not ``(lm.P,)`` or it holds NaN or an infinity.

    Examples
    --------
    >>> import torch
    >>> from numeric import TinyLM
    >>> from numeric.tinylm import check_theta
    >>> lm = TinyLM()
    >>> check_theta(lm, lm.theta0.float()).dtype
    torch.float64
    >>> check_theta(lm, torch.full((lm.P,), float("nan")))
    Traceback (most recent call last):
    ...
    ValueError: theta must be finite (no NaN or inf)
    """
    if not isinstance(theta, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(theta).__name__}")
    if theta.is_complex() or not theta.is_floating_point():
        raise TypeError(f"{name} must be a real floating-point tensor, got {theta.dtype}")
    if theta.shape != (lm.P,):
        raise ValueError(f"{name} must have shape ({lm.P},) for V={lm.V}, L={lm.L}; got {tuple(theta.shape)}")
    require_same_device(**{name: theta})
    if not bool(torch.isfinite(theta.detach()).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return theta.to(device="cpu", dtype=torch.float64)


def check_lm(lm: object) -> TinyLM:
    """``lm`` if it is a :class:`TinyLM`, else a ``TypeError`` naming ``lm``."""
    if not isinstance(lm, TinyLM):
        raise TypeError(f"lm must be a TinyLM, got {type(lm).__name__}")
    return lm


def real_tensor(name: str, value: object) -> torch.Tensor:
    """``value`` if it is a real (not complex) torch tensor, else a ``TypeError`` naming ``name``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.is_complex():
        raise TypeError(f"{name} must hold real numbers, got {value.dtype}")
    return value


def check_rewards(lm: TinyLM, rewards: object, name: str = "rewards") -> torch.Tensor:
    """``rewards`` validated for ``lm``: a finite real ``[N]`` torch tensor (one number per sequence), returned in float64."""
    rewards = real_tensor(name, rewards)
    if rewards.shape != (lm.N,):
        raise ValueError(f"{name} must have shape ({lm.N},), one number per sequence; got {tuple(rewards.shape)}")
    if not bool(torch.isfinite(rewards).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return rewards.to(torch.float64)


def default_reward(lm: TinyLM) -> torch.Tensor:
    r"""A binary verifier reward: :math:`R(o) = 1` if token 1 occurs in :math:`o`.

    Parameters
    ----------
    lm : TinyLM

    Returns
    -------
    torch.Tensor
        ``[N]`` float64 of zeros and ones; :math:`0 < \mathbb{E}[R] < 1` for any
        finite ``theta`` (the response ``(EOS,)`` fails, ``(1, ...)`` succeeds).

    Examples
    --------
    >>> from numeric import TinyLM, default_reward
    >>> lm = TinyLM()
    >>> R = default_reward(lm)
    >>> [float(R[lm.seqs.index(o)]) for o in [(0,), (2, 1, 0), (2, 3, 0), (3, 3, 3, 1)]]
    [0.0, 1.0, 0.0, 1.0]
    """
    lm = check_lm(lm)
    return ((lm.tokens == 1).to(torch.float64) * lm.mask).amax(1)


def token_score_tensor(lm: TinyLM, theta: torch.Tensor) -> torch.Tensor:
    r"""``[N, L, P]`` token scores :math:`\nabla_\theta \log \pi_\theta(o_t \mid o_{<t})`.

    From the softmax's closed form (one-hot minus probabilities, placed in the
    prefix's block of logits); zero on padding.  No autograd.

    Examples
    --------
    >>> import torch
    >>> from numeric import TinyLM, token_score_tensor
    >>> lm = TinyLM()
    >>> T = token_score_tensor(lm, lm.theta0)
    >>> T.shape
    torch.Size([121, 4, 160])
    >>> th = lm.theta0.clone().requires_grad_(True)
    >>> g = torch.autograd.grad(lm.token_log_probs(th)[7, 1], th)[0]
    >>> float((g - T[7, 1]).abs().max()) < 1e-15
    True
    """
    lm = check_lm(lm)
    theta = check_theta(lm, theta)
    probs = torch.softmax(lm.logits(theta).detach(), -1)
    local = torch.nn.functional.one_hot(lm.tokens, lm.V).to(probs.dtype) - probs[lm.prefix_rows]
    local = local * lm.mask[..., None]
    out = torch.zeros(lm.N, lm.L, lm.n_prefixes, lm.V, dtype=probs.dtype)
    n = torch.arange(lm.N)[:, None].expand(-1, lm.L)
    t = torch.arange(lm.L)[None, :].expand(lm.N, -1)
    out[n, t, lm.prefix_rows] = local
    return out.view(lm.N, lm.L, lm.P)


def score_matrix(lm: TinyLM, theta: torch.Tensor) -> torch.Tensor:
    r"""``[N, P]`` sequence scores :math:`\nabla_\theta \log \pi_\theta(o) = \sum_t s_t(o)`.

    Examples
    --------
    >>> from numeric import TinyLM, score_matrix
    >>> lm = TinyLM()
    >>> S = score_matrix(lm, lm.theta0)
    >>> p = lm.probs(lm.theta0)
    >>> float((p @ S).abs().max()) < 1e-15   # E[s] = 0
    True
    """
    return token_score_tensor(lm, theta).sum(1)


def perturb(theta: torch.Tensor, scale: float, seed: int) -> torch.Tensor:
    r"""``theta`` plus ``scale`` times a standard normal vector drawn from ``seed``.

    One random stream per seed: the vector is drawn in float64 and rounded to
    ``theta``'s dtype, so a float32 and a float64 ``theta`` move in the same
    direction.

    Examples
    --------
    >>> from numeric import TinyLM, perturb
    >>> lm = TinyLM()
    >>> th = perturb(lm.theta0, 0.5, seed=3)
    >>> bool((th != lm.theta0).all()), bool((perturb(lm.theta0, 0.0, seed=3) == lm.theta0).all())
    (True, True)
    """
    if isinstance(theta, torch.Tensor) and theta.is_complex() or isinstance(theta, np.ndarray) and np.iscomplexobj(theta):
        raise TypeError(f"theta must be real, got dtype {theta.dtype}")
    theta = as_tensor("theta", theta)
    require_finite("theta", theta.detach())
    scale = require_nonnegative("scale", scale)
    require_int("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    return theta + scale * torch.randn(theta.shape, generator=gen, dtype=torch.float64).to(theta.dtype)
