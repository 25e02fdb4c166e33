r"""verl's rollout correction, by its own option strings: ``rollout_is`` weights and ``rollout_rs`` rejection.

verl (``verl/trainer/ppo/rollout_corr_helper.py``) corrects the sampler with two
independent switches, and these two functions take the very values a verl
configuration holds, with the meaning they have at verl ``1dda039b``:

``rollout_is`` with ``rollout_is_threshold`` (:func:`rollout_is_weights`)
    an importance weight :math:`\rho_t` per token (``"token"``) or the product
    :math:`\rho = \prod_t \rho_t` per sequence (``"sequence"``), truncated at
    :math:`C` when the threshold is a number (TIS), or zeroed outside
    :math:`[l, h]` when it is the string ``"l_u"`` (IcePop);
``rollout_rs`` with ``rollout_rs_threshold`` (:func:`rollout_rejection_mask`)
    a 0/1 mask, the logical AND of comma-separated criteria, each a KL
    statistic (``k1``, ``k2``, ``k3``) per token or reduced per sequence
    (``seq_sum``, ``seq_mean``, ``seq_max``) against its threshold.

In verl's decoupled mode the loss multiplies the weight into every token and the
mask into the response mask (the rejected tokens leave the token count); in
bypass mode (the sampler's log-probs stand in for the old ones) the same
weight multiplies a REINFORCE loss, or none at all under PPO-clip, whose ratio
is then :math:`\pi_\theta/\mu` itself (:data:`numeric.off_policy.RULES`).

**The sign of k1.** verl's statistic is :math:`z_t = \log\pi - \log\mu`, clamped
to :math:`[-20, 20]`, and its ``k1`` is :math:`-z_t = \log(\mu/\pi)`: an
unbiased estimate of :math:`\mathrm{KL}(\mu\,\|\,\pi)` on the sampler's tokens.  A
``*_k1`` option with the threshold ``"l_u"`` keeps :math:`\log l \le k_1 \le \log h`, which is the band
:math:`1/h \le \rho \le 1/l` on the *ratio* (of the token, of the product, or of
the geometric mean); a single number :math:`h` means :math:`l = 1/h`, the band
symmetric in log space.  AReaL's ``kl_k1`` is the opposite sign,
:math:`+\log\rho` (:func:`numeric.off_policy.rejection_sampling_weight`):
``upper = 0.1`` keeps :math:`\rho \le e^{0.1}` there and :math:`\rho \ge e^{-0.1}` here
(:func:`derivations.corrections.k1_bands`).  The ``l_u`` of ``rollout_is_threshold``,
by contrast, bounds :math:`\rho` itself.

Arithmetic as verl's: each log-ratio is clamped to :math:`[-20, 20]` before any
statistic or weight is formed (the sequence sum is clamped after summing); a
``seq_mean`` divides by :math:`|o| + 10^{-8}`; bands are compared in log space,
both edges kept.  Masked slots never enter a sum, a mean or a maximum, and may
hold anything.

References
----------
J. Liu, Y. Li, Y. Fu, J. Wang, Q. Liu, Y. Shen, "When speed kills stability:
demystifying RL collapse from the training-inference mismatch" (2025).
verl ``1dda039b``, ``verl/trainer/ppo/rollout_corr_helper.py:93-194`` (the threshold
parsers), ``:197-413`` (``compute_rollout_rejection_mask``), ``:522-625``
(``compute_rollout_correction_weights``).
"""

from __future__ import annotations

import math
import numbers

import torch

from .._types import Array, ArrayT
from ._tokens import log_ratio, on_mask, out, per_sequence

__all__ = ["ROLLOUT_RS_OPTIONS", "SAFETY_BOUND", "rollout_is_weights", "rollout_rejection_mask"]

SAFETY_BOUND = 20.0
"""verl's clamp of every log-ratio before it is exponentiated or reduced."""

ROLLOUT_RS_OPTIONS = ("token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
                      "seq_mean_k1", "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3")
"""The options ``rollout_rs`` accepts at verl ``1dda039b`` (``rollout_corr_helper.py:77-89``); there is no ``seq_max_k1``."""


def _positive(name: str, text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must hold numbers, got {text!r} in {what}") from None
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"{name} must hold finite positive numbers, got {text!r} in {what}")
    return value


def _spec(name: str, spec: object) -> str:
    if isinstance(spec, bool) or not isinstance(spec, (str, numbers.Real)):
        raise TypeError(f"{name} must be a number or a str such as '0.5_2.0', got {type(spec).__name__}")
    text = spec.strip() if isinstance(spec, str) else repr(float(spec))
    if not text:
        raise ValueError(f"{name} must not be empty")
    return text


def _band(name: str, text: str, lower_allowed: bool, symmetric: bool) -> tuple[float | None, float]:
    """``(lower, upper)`` from ``"u"`` or ``"l_u"``; ``symmetric``: a single ``u`` means ``l = 1/u``."""
    lower: float | None
    if "_" in text:
        if not lower_allowed:
            raise ValueError(f"{name}: {text!r} gives a band 'l_u', but this option takes a single upper bound")
        low_text, high_text = text.split("_", 1)
        lower, upper = _positive(name, low_text, text), _positive(name, high_text, text)
    else:
        upper = _positive(name, text, text)
        lower = 1.0 / upper if symmetric else None
    if lower is not None and lower > upper:
        raise ValueError(f"{name} must have lower <= upper, got {text!r}")
    return lower, upper


def _rs_options(rollout_rs: object) -> list[str]:
    if not isinstance(rollout_rs, str):
        raise TypeError(f"rollout_rs must be a str of comma-separated options of {ROLLOUT_RS_OPTIONS}, got {type(rollout_rs).__name__}")
    options: list[str] = []
    for option in (o.strip() for o in rollout_rs.split(",")):
        if option and option not in ROLLOUT_RS_OPTIONS:
            raise ValueError(f"rollout_rs must list options of {ROLLOUT_RS_OPTIONS}, got {option!r}")
        if option and option not in options:
            options.append(option)
    if not options:
        raise ValueError(f"rollout_rs must name at least one option of {ROLLOUT_RS_OPTIONS}, got {rollout_rs!r}")
    return options


def _rs_thresholds(options: list[str], spec: object) -> list[tuple[float | None, float]]:
    parts = [p.strip() for p in _spec("rollout_rs_threshold", spec).split(",") if p.strip()]
    if len(parts) not in (1, len(options)):
        raise ValueError(f"rollout_rs_threshold must give one threshold, or one per option of rollout_rs ({len(options)}), got {len(parts)}")
    parts = parts * len(options) if len(parts) == 1 else parts
    return [_band("rollout_rs_threshold", p, o.endswith("k1"), o.endswith("k1")) for o, p in zip(options, parts)]


def rollout_is_weights(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, *, rollout_is: str = "token",
                       rollout_is_threshold: float | str = 2.0) -> ArrayT:
    r"""verl's rollout importance weights: token or sequence ratio, truncated (TIS) or band-masked (IcePop).

    With :math:`z_t = \operatorname{clamp}(\log\pi - \log\mu, \pm 20)`:

    .. math::

        v_t = \begin{cases} \min(\rho, C) & \text{threshold } C \text{ (TIS)} \\
              \rho\,\mathbb 1[l \le \rho \le h] & \text{threshold } \mathtt{"l\_u"} \text{ (IcePop)} \end{cases}
        \qquad \rho = \begin{cases} e^{z_t} & \mathtt{"token"} \\ e^{\operatorname{clamp}(\sum_u m_u (\log\pi_u - \log\mu_u),\, \pm 20)} & \mathtt{"sequence"} \end{cases}

    The sequence ratio is the **product** of the token ratios (TRL and SkyRL
    agree; OpenRLHF's ``seq-mask-tis``, ms-swift and AReaL's sequence weight
    use the geometric mean).  Their biases are chapter 7's: TIS removes the
    excess :math:`-\mathbb E_\mu[(\rho - C)_+ A s]`, the band the whole weight
    of every dropped token or sequence.  The clamp changes nothing once
    :math:`C < e^{20}` (a clamped ratio is above the cap or outside the band
    either way).  Batch normalisation (``rollout_is_batch_normalize``) is
    :func:`numeric.batch_normalized_weights`.

    Parameters
    ----------
    log_prob, sampler_log_prob : numpy array or torch tensor
        ``[batch, time]`` :math:`\log\pi` (verl's recomputed old policy, or the
        current one in bypass mode) and :math:`\log\mu` (the rollout engine's).
    mask : numpy array or torch tensor
        ``[batch, time]`` 0/1: the response mask.
    rollout_is : {"token", "sequence"}
    rollout_is_threshold : float or str
        :math:`C > 0` (TIS), or ``"l_u"``, its two numbers :math:`0 < l \le h` (IcePop; verl
        ``1dda039b``, added by verl PR 5722; at ``b178a3cd`` only the number existed).

    Returns
    -------
    The caller's kind, dtype and device, ``[batch, time]``, 0 where ``mask`` is 0, detached.

    References
    ----------
    verl ``1dda039b``, ``verl/trainer/ppo/rollout_corr_helper.py:522-625``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.off_policy import rollout_is_weights
    >>> lp, lmu = np.log([[0.9, 0.2, 0.5]]), np.log([[0.3, 0.4, 0.5]])    # ratios 3, 0.5, 1
    >>> m = np.ones((1, 3))
    >>> rollout_is_weights(lp, lmu, m, rollout_is="token").round(6).tolist()
    [[2.0, 0.5, 1.0]]
    >>> rollout_is_weights(lp, lmu, m, rollout_is="token", rollout_is_threshold="0.6_2.0").round(6).tolist()
    [[0.0, 0.0, 1.0]]
    >>> rollout_is_weights(lp, lmu, m, rollout_is="sequence", rollout_is_threshold=5.0).round(6).tolist()
    [[1.5, 1.5, 1.5]]
    """
    if rollout_is not in ("token", "sequence"):
        raise ValueError(f"rollout_is must be 'token' or 'sequence', got {rollout_is!r}")
    lower, upper = _band("rollout_is_threshold", _spec("rollout_is_threshold", rollout_is_threshold), True, False)
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    if rollout_is == "token":
        rho = on_mask(m, d.clamp(-SAFETY_BOUND, SAFETY_BOUND).exp())
    else:
        rho = per_sequence(m, d.sum(-1, keepdim=True).clamp(-SAFETY_BOUND, SAFETY_BOUND).exp())
    if lower is None:
        return out(kind, dtype, rho.clamp(max=upper))
    return out(kind, dtype, on_mask((rho >= lower) & (rho <= upper), rho))


def _sequence_statistic(level: str, stat: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """``[..., T]`` (token) or ``[..., 1]`` (a sequence statistic of the masked tokens; 0 for a row without one)."""
    if level == "token":
        return stat
    if level == "seq_sum":
        return stat.sum(-1, keepdim=True)
    if level == "seq_mean":
        return stat.sum(-1, keepdim=True) / (m.sum(-1, keepdim=True).to(stat.dtype) + 1e-8)
    if not m.shape[-1]:
        return stat.sum(-1, keepdim=True)
    top = torch.where(m, stat, -torch.inf).amax(-1, keepdim=True)
    return torch.where(m.any(-1, keepdim=True), top, torch.zeros_like(top))


def rollout_rejection_mask(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, *, rollout_rs: str,
                           rollout_rs_threshold: float | str) -> ArrayT:
    r"""verl's rollout rejection: a 0/1 mask, the AND of comma-separated KL criteria per token or per sequence.

    With :math:`z_t = \operatorname{clamp}(\log\pi - \log\mu, \pm 20)` the per-token statistics are

    .. math::

        k_1 = -z_t, \qquad k_2 = \tfrac12 z_t^2, \qquad k_3 = e^{z_t} - 1 - z_t ,

    the three estimators of :math:`\mathrm{KL}(\mu\,\|\,\pi)` on the sampler's tokens
    (:doc:`/trust_region`).  An option ``<level>_<k>`` compares, per token
    (``token``), or per sequence the sum (``seq_sum``), the mean over the
    masked tokens (``seq_mean``, divided by :math:`|o| + 10^{-8}`) or the maximum
    (``seq_max``, :math:`k_2` and :math:`k_3` only):

    * ``*_k1``: kept when :math:`\log l \le \text{stat} \le \log h` (threshold
      ``"l_u"``; a number :math:`h` means :math:`l = 1/h`) — the band
      :math:`[1/h, 1/l]` on the token ratio, the product, or the geometric mean;
    * ``*_k2``, ``*_k3``: kept when :math:`\text{stat} \le d` (a number).

    A sequence criterion drops the whole sequence.  Several options (``"token_k1,seq_max_k3"``)
    must all pass; ``rollout_rs_threshold`` gives one threshold for all or one
    per option, comma-separated.  ``seq_max_k2`` keeps exactly the sequences whose
    every token has :math:`|\log\rho_t| \le \sqrt{2d}`
    (:func:`derivations.corrections.max_k2_band`): SkyRL's outlier mask with a
    band symmetric in log space.  A row with no masked token has statistic 0.

    Returns
    -------
    The caller's kind, dtype and device, ``[batch, time]``: 1 on a kept token, 0 on a rejected or masked one.

    References
    ----------
    verl ``1dda039b``, ``verl/trainer/ppo/rollout_corr_helper.py:132-194`` (thresholds),
    ``:197-413`` (``compute_rollout_rejection_mask``; ``k1`` at 263, the bands at 316 and 330-349,
    ``seq_max`` at 279-284 and 361-372, the AND at 380).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.off_policy import rollout_rejection_mask
    >>> lp = np.log([[0.9, 0.5], [0.5, 0.5], [0.2, 0.5]])
    >>> lmu = np.log([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])     # first-token ratios 1.8, 1, 0.4
    >>> m = np.ones((3, 2))
    >>> rollout_rejection_mask(lp, lmu, m, rollout_rs="token_k1", rollout_rs_threshold="0.5_2.0").tolist()   # keeps 1/2 <= 1/rho <= 2
    [[1.0, 1.0], [1.0, 1.0], [0.0, 1.0]]
    >>> rollout_rejection_mask(lp, lmu, m, rollout_rs="seq_max_k2,token_k1", rollout_rs_threshold="0.1,2.0").tolist()
    [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    """
    options = _rs_options(rollout_rs)
    bands = _rs_thresholds(options, rollout_rs_threshold)
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    lam = d.clamp(-SAFETY_BOUND, SAFETY_BOUND)
    per_token = {"k1": -lam, "k2": 0.5 * lam**2, "k3": lam.exp() - 1.0 - lam}
    keep = torch.ones_like(m)
    for option, (lower, upper) in zip(options, bands):
        level, estimator = option.rsplit("_", 1)
        stat = _sequence_statistic(level, on_mask(m, per_token[estimator]), m)
        if lower is None:
            kept = stat <= upper
        else:
            kept = (stat >= math.log(lower)) & (stat <= math.log(upper))
        keep = keep & kept.expand(m.shape)
    return out(kind, dtype, on_mask(m & keep, torch.ones_like(d)))
