r"""Penalties: the per-token KL estimates of a KL penalty, and the clipped value loss."""

from __future__ import annotations

import sympy as sp
import torch

from derivations import trust_region as tr

from .._types import Array, ArrayT
from .._validate import (
    like,
    masked_inputs,
    require_bool,
    require_finite_nonnegative,
    require_mask,
    result_dtype,
)
from .aggregation import check_mode, numeric_weight, reduce_tokens

__all__ = ["KL_ESTIMATORS", "VERL_KL_PENALTIES", "bias_corrected_kl", "kl_estimate", "kl_penalty", "value_loss", "verl_kl_penalty"]


KL_ESTIMATORS = ("k1", "k2", "k3")
r"""Schulman's estimators of :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})` from the reference ratio :math:`r_{\mathrm{ref}} = \pi_{\mathrm{ref}}/\pi` of a sampled token."""

_K = {name: sp.lambdify(tr.delta, getattr(tr, name), modules=[{"exp": torch.exp, "log": torch.log}]) for name in ("k1", "k2")}
# k3 = e^{-Delta} - 1 + Delta (derivations.trust_region.k3) loses every digit to cancellation for
# small Delta when written with exp; expm1 keeps them (relative error ~ 2u/|Delta| instead of u/Delta^2).
_K["k3"] = lambda delta: torch.expm1(-delta) + delta


def kl_estimate(delta: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    r"""The KL estimate :math:`k_1`, :math:`k_2` or :math:`k_3` of a log-ratio tensor ``delta`` :math:`= \log\pi - \log\pi_{\mathrm{ref}} = -\log r_{\mathrm{ref}}`.

    :math:`k_1 = -\log r_{\mathrm{ref}}`, :math:`k_2 = \tfrac12(\log r_{\mathrm{ref}})^2`,
    :math:`k_3 = r_{\mathrm{ref}} - 1 - \log r_{\mathrm{ref}}`: the one definition of the
    estimators (:mod:`derivations.trust_region` derives them; :func:`kl_penalty`,
    :func:`numeric.kl_k1` to :func:`numeric.kl_k3` and :func:`numeric.ppo_diagnostics`
    call it).  :math:`k_3` is computed as
    :math:`\operatorname{expm1}(\log r_{\mathrm{ref}}) - \log r_{\mathrm{ref}}`, so a float32
    log-ratio of :math:`10^{-3}` keeps about four digits of :math:`k_3 \approx (\log r_{\mathrm{ref}})^2/2`.

    Examples
    --------
    >>> import torch
    >>> from numeric.losses import kl_estimate
    >>> [round(float(kl_estimate(torch.tensor(0.5, dtype=torch.float64), k)), 6) for k in ("k1", "k2", "k3")]
    [0.5, 0.125, 0.106531]
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")
    if not isinstance(delta, torch.Tensor):
        raise TypeError(f"delta must be a torch tensor, got {type(delta).__name__}")
    return _K[estimator](delta) + 0 * delta


def kl_penalty(log_prob: ArrayT, ref_log_prob: Array, mask: Array | None = None, *, estimator: str = "k3", clamp: bool = False) -> ArrayT:
    r"""Per-token KL estimates :math:`k_1, k_2, k_3` of :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`, 0 on masked tokens.

    With :math:`r_{\mathrm{ref}} = \pi_{\mathrm{ref}}/\pi`: :math:`k_1 = -\log r_{\mathrm{ref}}`,
    :math:`k_2 = \tfrac12(\log r_{\mathrm{ref}})^2`, :math:`k_3 = r_{\mathrm{ref}} - 1 - \log r_{\mathrm{ref}}`
    (:mod:`numeric.trust_region`).  ``clamp=True`` is verl's ``low_var_kl``:
    :math:`\log r_{\mathrm{ref}}` clamped to :math:`[-20, 20]` and :math:`k_3` to
    :math:`[-10, 10]` (TRL's :math:`k_3` is unclamped).  As a loss term,
    :math:`\beta` times :func:`aggregate` of it (verl ``use_kl_loss``, TRL
    ``beta``); as a reward penalty, :math:`-\beta k_1` added to the token
    rewards (verl ``compute_rewards``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import kl_penalty
    >>> lp, ref = np.log([[0.5, 0.5]]), np.log([[0.25, 0.75]])
    >>> [kl_penalty(lp, ref, np.ones((1, 2)), estimator=k).round(6).tolist() for k in ("k1", "k3")]
    [[[0.693147, -0.405465]], [[0.193147, 0.094535]]]
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")
    clamp = require_bool("clamp", clamp)
    t, m, kind = masked_inputs(mask, log_prob=log_prob, ref_log_prob=ref_log_prob)
    delta = t["log_prob"] - t["ref_log_prob"]
    if clamp:
        delta = delta.clamp(-20, 20)
    k = kl_estimate(delta, estimator)
    if clamp and estimator == "k3":
        k = k.clamp(-10, 10)
    return like(kind, k.to(result_dtype(log_prob)))


def value_loss(value: ArrayT, old_value: Array, returns: Array, mask: Array, *, clip: float | None = None, agg: str = "token-mean", norm: float | None = None,
               weight: Array | None = None) -> ArrayT:
    r"""The clipped value loss :math:`\frac12 \max\bigl((V - G)^2, (V_{\mathrm{clip}} - G)^2\bigr)`, aggregated.

    :math:`V_{\mathrm{clip}} = V_{\mathrm{old}} + \mathrm{clamp}(V - V_{\mathrm{old}}, -\epsilon, \epsilon)`;
    without ``clip``, :math:`\frac12 (V - G)^2`.  verl ``compute_value_loss``
    (``cliprange_value``) and OpenRLHF ``ValueLoss`` (``clip_eps``).  A
    per-token ``weight`` (detached; masked slots may hold anything) multiplies
    each token's squared error before the aggregation, as in :func:`aggregate`.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric import value_loss
    >>> V, V0, G = np.array([[1.0, 0.0]]), np.array([[0.5, 0.0]]), np.array([[0.0, 1.0]])
    >>> round(float(value_loss(V, V0, G, np.ones((1, 2)), clip=0.2)), 6)
    0.5
    >>> round(float(value_loss(V, V0, G, np.ones((1, 2)), clip=0.2, weight=np.array([[3.0, 0.0]]))), 6)
    0.75
    """
    arrays: dict[str, object] = dict(value=value, old_value=old_value, returns=returns)
    if weight is not None:
        arrays["weight"] = numeric_weight(weight)
    t, m, kind = masked_inputs(require_mask(mask), "mask", **arrays)
    v, v0, g = t["value"], t["old_value"].detach(), t["returns"].detach()
    sq = (v - g) ** 2
    if clip is not None:
        clip = require_finite_nonnegative("clip", clip)
        sq = torch.maximum(sq, (v0 + (v - v0).clamp(-clip, clip) - g) ** 2)
    if weight is not None:
        sq = sq * t["weight"].detach()
    return like(kind, (0.5 * reduce_tokens(sq, m, check_mode(agg, "agg"), norm)).to(result_dtype(value)))


def bias_corrected_kl(log_prob: ArrayT, old_log_prob: Array, ref_log_prob: Array, mask: Array, *, level: str = "token") -> ArrayT:
    r"""TRL's bias-corrected KL term: the :math:`k_3` estimate times the importance ratio, :math:`r_t\,k_3`, per token.

    With :math:`r_{\mathrm{ref},t} = \pi_{\mathrm{ref}}/\pi_\theta` and
    :math:`r_t = \pi_\theta/\pi_{\mathrm{old}}` (differentiated through
    :math:`\pi_\theta`; :math:`\pi_{\mathrm{old}}` detached), the term is
    :math:`r_t\,(r_{\mathrm{ref},t} - 1 - \log r_{\mathrm{ref},t})` (TRL ``f2cd57710ae3``,
    ``use_bias_correction_kl``: ``per_token_kl * coef_1``; with
    ``importance_sampling_level="sequence"``, ``level="sequence"`` here,
    :math:`r_t` is the geometric-mean sequence ratio
    :math:`\tilde r = \exp(\frac1n\sum_t m_t \log r_t)` on every token of the row).

    What is corrected: the tokens were sampled from :math:`\pi_{\mathrm{old}}`,
    not :math:`\pi_\theta`.  The ratio makes the *value* unbiased,
    :math:`\mathbb E_{\mathrm{old}}[r\,k_3] = \mathrm{KL}(\pi_\theta\,\|\,\pi_{\mathrm{ref}})`,
    and — already at :math:`\pi_\theta = \pi_{\mathrm{old}}`, where
    :math:`r = 1` in value — it corrects the *gradient*:
    :math:`\mathbb E[\nabla k_3]` is :math:`\nabla\mathrm{KL}(\pi_{\mathrm{ref}}\,\|\,\pi_\theta)`,
    the other direction (:func:`derivations.trust_region.kl_estimator_gradients`),
    while :math:`\mathbb E_{\mathrm{old}}[\nabla(r\,k_3)] = \nabla\mathrm{KL}(\pi_\theta\,\|\,\pi_{\mathrm{ref}})`
    for every :math:`\pi_{\mathrm{old}}` (:func:`derivations.trust_region.bias_corrected_kl_gradient`).
    The sequence-level ratio is no importance weight of the token, so it
    corrects neither exactly.  Add :math:`\beta` times :func:`aggregate` of the
    result to the loss, as TRL adds ``beta * per_token_kl`` before aggregating.

    Examples
    --------
    >>> import torch
    >>> from numeric.losses import bias_corrected_kl
    >>> lp = torch.log(torch.tensor([[0.5, 0.2]], dtype=torch.float64)).requires_grad_()
    >>> old, ref = torch.log(torch.tensor([[0.4, 0.2]], dtype=torch.float64)), torch.log(torch.tensor([[0.25, 0.4]], dtype=torch.float64))
    >>> bias_corrected_kl(lp, old, ref, torch.ones(1, 2)).detach().round(decimals=6).tolist()
    [[0.241434, 0.306853]]
    """
    if level not in ("token", "sequence"):
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    t, m, kind = masked_inputs(require_mask(mask), log_prob=log_prob, old_log_prob=old_log_prob, ref_log_prob=ref_log_prob)
    lp = t["log_prob"]
    if lp.ndim < 1:
        raise ValueError("log_prob must have a time dimension (the last one), got a scalar")
    log_ratio = lp - t["old_log_prob"].detach()
    if level == "sequence":
        log_ratio = log_ratio.sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1).to(lp.dtype)
    k3 = kl_estimate(lp - t["ref_log_prob"].detach(), "k3")
    out = torch.where(m, log_ratio.exp() * k3, torch.zeros((), dtype=lp.dtype, device=lp.device))
    return like(kind, out.to(result_dtype(log_prob)))


VERL_KL_PENALTIES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "kl+", "k1+", "abs+", "mse+", "k2+", "low_var_kl+", "k3+")
r"""verl's names for a KL term (``kl_loss_type``, ``kl_penalty``), each meaning what it means there: ``kl``/``k1``
:math:`\Delta`, ``abs`` :math:`|\Delta|`, ``mse``/``k2`` :math:`\Delta^2/2`, ``low_var_kl``/``k3`` the clamped
:math:`k_3`, and a trailing ``+`` the straight-through form (its value, :math:`k_2`'s gradient).  verl's ``full``
needs the whole vocabulary's log-probabilities and is refused there too."""


def verl_kl_penalty(log_prob: ArrayT, ref_log_prob: Array, mask: Array | None = None, *, kl_penalty: str = "low_var_kl") -> ArrayT:
    r"""verl's per-token KL term by its own name: ``kl``/``k1``, ``abs``, ``mse``/``k2``, ``low_var_kl``/``k3``, and the ``+`` forms.

    With :math:`\Delta = \log\pi - \log\pi_{\mathrm{ref}}`: ``k1`` is
    :math:`\Delta`, ``abs`` :math:`|\Delta|`, ``k2`` :math:`\tfrac12\Delta^2`, and ``low_var_kl``

    .. math::

        \mathrm{clamp}\bigl(k_3(\mathrm{clamp}(\Delta, -20, 20)), -10, 10\bigr),
        \qquad k_3(\Delta) = e^{-\Delta} - 1 + \Delta,

    with verl's ``k3`` the clamped form (unlike :func:`kl_penalty`'s ``"k3"``,
    Schulman's and TRL's, unclamped).  A trailing ``+`` keeps the value and
    takes the gradient of :math:`k_2`: :math:`k_2 - \mathrm{sg}(k_2) + \mathrm{sg}(k_*)`.

    Which divergence each descends in expectation, per state
    (:func:`derivations.trust_region.kl_estimator_gradients`,
    :func:`~derivations.trust_region.kl_form_gradients`,
    :func:`~derivations.trust_region.low_var_kl_clamp`): ``k1`` none (expected
    gradient 0); ``k2`` and every ``+`` form the reverse KL
    :math:`\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})`; ``low_var_kl`` the
    forward KL :math:`\mathrm{KL}(\pi_{\mathrm{ref}}\,\|\,\pi)` where
    :math:`-2.611 < \Delta < 10.99998` and nothing beyond (the clamp at 10
    binds first); ``abs`` neither, twice the total variation's gradient.

    Parameters
    ----------
    log_prob, ref_log_prob : numpy array or torch tensor
        Aligned; finite where ``mask`` is 1.  The result has ``log_prob``'s kind, device and dtype.
    mask : numpy array or torch tensor, optional
        0/1 or boolean; masked slots may hold anything and get 0 with zero gradient.
    kl_penalty : str
        One of :data:`VERL_KL_PENALTIES`.

    References
    ----------
    verl ``kl_penalty`` and ``kl_penalty_forward``, verl-project/verl at
    1dda039b9c6311889a9c9a26040677e1254814f9, ``verl/trainer/ppo/core_algos.py`` lines 2187-2247.

    Examples
    --------
    >>> import torch
    >>> from numeric.losses import verl_kl_penalty
    >>> lp = torch.log(torch.tensor([[0.5, 0.01]], dtype=torch.float64)).requires_grad_()
    >>> ref = torch.log(torch.tensor([[0.25, 0.5]], dtype=torch.float64))
    >>> for name in ("k1", "abs", "k2", "low_var_kl", "low_var_kl+"):
    ...     k = verl_kl_penalty(lp, ref, kl_penalty=name)
    ...     (g,) = torch.autograd.grad(k.sum(), lp)
    ...     print(f"{name:12s}", k.detach().round(decimals=4).tolist(), g.round(decimals=4).tolist())
    k1           [[0.6931, -3.912]] [[1.0, 1.0]]
    abs          [[0.6931, 3.912]] [[1.0, -1.0]]
    k2           [[0.2402, 7.6519]] [[0.6931, -3.912]]
    low_var_kl   [[0.1931, 10.0]] [[0.5, 0.0]]
    low_var_kl+  [[0.1931, 10.0]] [[0.6931, -3.912]]
    """
    if not isinstance(kl_penalty, str) or kl_penalty not in VERL_KL_PENALTIES:
        if kl_penalty in ("full", "full+"):
            raise ValueError("kl_penalty='full' needs the whole vocabulary's log-probabilities, not one token's (verl raises NotImplementedError for it)")
        raise ValueError(f"kl_penalty must be one of {VERL_KL_PENALTIES}, got {kl_penalty!r}")
    t, m, kind = masked_inputs(mask, log_prob=log_prob, ref_log_prob=ref_log_prob)
    delta = t["log_prob"] - t["ref_log_prob"]
    base = kl_penalty.removesuffix("+")
    if base in ("kl", "k1"):
        value = delta
    elif base == "abs":
        value = delta.abs()
    elif base in ("mse", "k2"):
        value = kl_estimate(delta, "k2")
    else:
        value = kl_estimate(delta.clamp(-20, 20), "k3").clamp(-10, 10)
    if kl_penalty.endswith("+"):
        k2 = kl_estimate(delta, "k2")
        value = k2 - k2.detach() + value.detach()
    return like(kind, value.to(result_dtype(log_prob)))
