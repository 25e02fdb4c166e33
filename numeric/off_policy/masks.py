r"""Rejection and trust-region masks of AReaL, prime-rl, SkyRL and TRL, batched and trainer-ready.

Each of these trainers decides, token by token or sequence by sequence, which
sampled tokens may move the policy, from the sampler's log-probabilities
:math:`\log\mu` and the policy's :math:`\log\pi` (the proximal or old policy in
AReaL and verl, the current one in prime-rl and TRL's OPSM):

==========================================  ==========================================================================================
:func:`rejection_sampling_weight`           AReaL ``rejection_sampling``: ratio or KL metric, token or sequence, ``mask`` or ``clamp``
:func:`m2po_mask`                           AReaL ``m2_threshold`` (M2PO): the largest :math:`(\log\rho_t)^2` dropped until their mean is below :math:`\tau`
:func:`loglinear_proximal_log_prob`         AReaL ``prox_logp_method="loglinear"``: :math:`\log\pi_{\mathrm{prox}} = \log\mu + \alpha(\log\pi - \log\mu)`
:func:`trust_region_mask`                   prime-rl's default loss and ``ipo``, SkyRL ``dppo``: probability change or Bernoulli KL, by the sign of :math:`A`
:func:`off_policy_sequence_mask`            TRL ``off_policy_mask_threshold`` (OPSM): drop a negative-advantage sequence that drifted
:func:`outlier_sequence_mask`               SkyRL ``outlier_token_is_threshold_*``: drop a sequence with any token ratio out of its band
==========================================  ==========================================================================================

Every function takes ``[batch, time]`` arrays and a 0/1 ``mask``, returns the
caller's kind, dtype and device, detached, 0 on masked slots, and lets masked
slots hold anything (``-inf``, NaN): they never enter a comparison, a mean, a
maximum or a sort.  What each costs in bias and variance, exactly, on the toy
LM: :data:`numeric.off_policy.RULES` and chapter 7.

References
----------
H. Zheng et al., "Prosperity before collapse: how far can off-policy RL reach with
stale data on LLMs?", arXiv:2510.01161 (2025) (M2PO).
W. Fu et al., "AReaL: a large-scale asynchronous reinforcement learning system for
language reasoning", arXiv:2505.24298 (2025) (decoupled PPO, the proximal policy).
P. Qi et al., "Rethinking the trust region in LLM reinforcement learning",
arXiv:2602.04879 (2026) (DPPO: the binary TV and KL masks).
DeepSeek-AI, "DeepSeek-V3.2" (2025) (the off-policy sequence mask).
"""

from __future__ import annotations

import torch

from .._types import Array, ArrayT
from .._validate import require_finite_real, require_int, require_nonnegative, require_real, to_tensor
from ._tokens import log_probs, log_ratio, on_mask, out, per_sequence, token_count, with_advantages

__all__ = [
    "REJECTION_METRICS",
    "loglinear_proximal_log_prob",
    "m2po_mask",
    "off_policy_sequence_mask",
    "outlier_sequence_mask",
    "rejection_sampling_weight",
    "trust_region_mask",
]

REJECTION_METRICS = ("ratio", "kl_k1", "kl_k2", "kl_k3", "binary_kl")
"""The metrics of AReaL's ``rejection_sampling`` (``areal/utils/functional/functional.py:236-260`` at ``cbff54d``)."""

_BERNOULLI_EPS = 1e-8


def _bernoulli_kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    r"""AReaL's :math:`\mathrm{KL}(\mathrm{Bern}(p)\,\|\,\mathrm{Bern}(q))`, both probabilities clamped to :math:`[10^{-8}, 1 - 10^{-8}]`."""
    p = log_p.exp().clamp(_BERNOULLI_EPS, 1 - _BERNOULLI_EPS)
    q = log_q.exp().clamp(_BERNOULLI_EPS, 1 - _BERNOULLI_EPS)
    return p * torch.log(p / q) + (1 - p) * torch.log((1 - p) / (1 - q))


def _rejection_options(level, action, metric, agg, upper, lower) -> tuple[float, float | None]:
    for name, value, choices in (("level", level, ("token", "sequence")), ("action", action, ("mask", "clamp")),
                                 ("metric", metric, REJECTION_METRICS), ("agg", agg, ("sum", "mean", "max"))):
        if value not in choices:
            raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    upper = require_real("upper", upper)
    lower = None if lower is None else require_real("lower", lower)
    if lower is not None and lower > upper:
        raise ValueError(f"lower must be <= upper, got lower={lower}, upper={upper}")
    if metric == "ratio" and not upper > 1.0:
        raise ValueError(f"upper must be > 1 for metric='ratio' (AReaL refuses a band that drops every changed token), got {upper}")
    if metric == "ratio" and lower is not None and not lower > 0:
        raise ValueError(f"lower must be > 0 for metric='ratio', got {lower}")
    if metric in ("kl_k2", "kl_k3") and not upper > 0:
        raise ValueError(f"upper must be > 0 for metric={metric!r}, got {upper}")
    if action == "clamp" and metric != "ratio":
        raise ValueError(f"action='clamp' needs metric='ratio' (it truncates the importance weight), got metric={metric!r}")
    return upper, lower


def rejection_sampling_weight(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, *, level: str = "token", action: str = "mask",
                              metric: str = "ratio", agg: str = "mean", upper: float = 5.0, lower: float | None = None) -> ArrayT:
    r"""AReaL's behaviour weight under ``rejection_sampling``: the ratio :math:`\rho_t = \pi/\mu`, masked or clamped by a divergence.

    With :math:`z_t = \log\pi - \log\mu` (:math:`\pi` AReaL's proximal policy,
    :math:`\mu` the inference engine), a ``metric`` per token:

    .. math::

        \mathtt{ratio} = e^{z_t}, \quad \mathtt{kl\_k1} = z_t, \quad \mathtt{kl\_k2} = \tfrac12 z_t^2, \quad
        \mathtt{kl\_k3} = e^{-z_t} - 1 + z_t, \quad
        \mathtt{binary\_kl} = \max\bigl(\mathrm{KL}_B(\pi_t\|\mu_t), \mathrm{KL}_B(\mu_t\|\pi_t)\bigr),

    kept when it lies in :math:`[\text{lower}, \text{upper}]` (``lower=None``: no lower
    bound).  **Two signs differ from verl's** (:func:`numeric.off_policy.rollout_rejection_mask`):
    ``kl_k1`` is :math:`+\log\rho`, verl's ``k1`` is :math:`-\log\rho`; and ``kl_k3`` is
    :math:`1/\rho - 1 + \log\rho`, the :math:`k_3` of the *other* direction, whose
    sampler mean is :math:`\sum_a \mu_a^2/\pi_a - 1 - \mathrm{KL}(\mu\|\pi)`, not a KL
    (:func:`derivations.corrections.k3_directions`; AReaL's own help text calls it
    :math:`r - \log r - 1`).

    ``level="sequence"`` judges a sequence: the ratio metric aggregated in log
    space (``agg``: ``sum`` the product :math:`\rho`, ``mean`` the geometric mean,
    ``max`` the largest token ratio), a KL metric arithmetically; and with the
    ratio metric the weight of every token becomes the sequence's **geometric
    mean** :math:`(\prod_t\rho_t)^{1/|o|}`, whatever ``agg`` compares.  With a KL
    metric the token weights stay :math:`\rho_t`.

    ``action="mask"`` zeroes what fails; ``action="clamp"`` keeps it, clamped
    to :math:`[\text{lower or } 0, \text{upper}]` (per token; at sequence level only
    in the failing sequences).  AReaL multiplies the result into its
    decoupled PPO loss; at the proximal parameters that PPO ratio is 1, so this
    *is* the gradient weight of a token.

    Edges: both bounds kept (``metric >= lower``, ``metric <= upper``).  An
    all-masked row has statistic 0 under ``max``.  AReaL computes in float32
    and maps a non-finite log-ratio to 0; here the caller's dtype (at least
    float32) is kept and unmasked slots must be finite.

    References
    ----------
    AReaL ``cbff54d``, ``areal/utils/functional/functional.py:167-437`` (``_check_bounds``,
    ``apply_rejection_sampling``), ``:440-449`` (``compute_binary_kl_divergence``);
    ``areal/utils/data.py:1662-1698`` (``KLEstimator``, the signs); the options and
    their validation ``areal/api/cli_args.py:1505-1668``, whose list of metrics
    omits ``binary_kl`` (1608) although ``examples/math/gsm8k_kpop.yaml`` sets it.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.off_policy import rejection_sampling_weight
    >>> lp, lmu = np.log([[0.9, 0.2, 0.5], [0.5, 0.5, 0.5]]), np.log([[0.1, 0.4, 0.5], [0.5, 0.4, 0.5]])   # ratios 9, 0.5, 1 / 1, 1.25, 1
    >>> m = np.ones((2, 3))
    >>> rejection_sampling_weight(lp, lmu, m, upper=5.0).round(4).tolist()              # IcePop's upper edge
    [[0.0, 0.5, 1.0], [1.0, 1.25, 1.0]]
    >>> rejection_sampling_weight(lp, lmu, m, action="clamp", upper=5.0).round(4).tolist()   # TIS
    [[5.0, 0.5, 1.0], [1.0, 1.25, 1.0]]
    >>> rejection_sampling_weight(lp, lmu, m, level="sequence", upper=5.0).round(4).tolist()  # geometric mean 1.6510 and 1.0772
    [[1.651, 1.651, 1.651], [1.0772, 1.0772, 1.0772]]
    >>> rejection_sampling_weight(lp, lmu, m, level="sequence", agg="max", upper=5.0).round(4).tolist()
    [[0.0, 0.0, 0.0], [1.0772, 1.0772, 1.0772]]
    """
    upper, lower = _rejection_options(level, action, metric, agg, upper, lower)
    lp, lmu, m, kind, dtype = log_probs(log_prob, sampler_log_prob, mask)
    x = lp - lmu
    if metric == "binary_kl":
        stat = torch.maximum(_bernoulli_kl(lp, lmu), _bernoulli_kl(lmu, lp))
    else:
        stat = {"ratio": lambda: x.exp(), "kl_k1": lambda: x, "kl_k2": lambda: 0.5 * x**2, "kl_k3": lambda: (-x).exp() - 1 + x}[metric]()

    def within(s: torch.Tensor) -> torch.Tensor:
        return (s <= upper) if lower is None else (s >= lower) & (s <= upper)

    weight = x.exp()
    floor = 0.0 if lower is None else lower
    if level == "token":
        if action == "clamp":
            return out(kind, dtype, on_mask(m, weight.clamp(floor, upper)))
        return out(kind, dtype, on_mask(m & within(stat), weight))
    values = x if metric == "ratio" else stat
    n = token_count(m, x.dtype)
    if metric == "ratio":
        weight = (on_mask(m, x).sum(-1, keepdim=True) / n).exp().expand(x.shape)
    if agg == "sum":
        seq = on_mask(m, values).sum(-1, keepdim=True)
    elif agg == "mean":
        seq = on_mask(m, values).sum(-1, keepdim=True) / n
    elif not m.shape[-1]:
        seq = values.sum(-1, keepdim=True)
    else:
        top = torch.where(m, values, -torch.inf).amax(-1, keepdim=True)
        seq = torch.where(m.any(-1, keepdim=True), top, torch.zeros_like(top))
    passed = within(seq.exp() if metric == "ratio" else seq)
    if action == "clamp":
        return out(kind, dtype, on_mask(m, torch.where(passed, weight, weight.clamp(floor, upper))))
    return out(kind, dtype, on_mask(m & passed.expand(m.shape), weight))


def m2po_mask(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, *, threshold: float = 0.04) -> ArrayT:
    r"""M2PO: drop the tokens of largest :math:`(\log\rho_t)^2` until the mean of the rest is below :math:`\tau`.

    Over every masked token of the batch (AReaL: of the micro-batch), sort
    :math:`z_t^2 = (\log\mu - \log\pi)^2` in decreasing order and drop the
    fewest largest values for which the mean of the remaining ones is
    :math:`< \tau`; if there is none, keep only the smallest.  Dropping the
    largest values first, the kept set is a sublevel set
    :math:`\{z_t^2 \le d\}`: a band :math:`|\log\rho_t| \le \sqrt d` on the token
    ratio (:func:`derivations.corrections.m2_band`), whose edge :math:`d` the
    batch decides.  In the limit of a large batch :math:`d` is a number fixed by
    the sampler and the policy, and M2PO is IcePop with the band
    :math:`[e^{-\sqrt d}, e^{\sqrt d}]`
    (:func:`numeric.off_policy.m2po_limit`).

    Ties: tokens with equal :math:`z_t^2` at the cut are dropped in the order
    they appear (a stable sort, row by row); AReaL's ``torch.sort`` is not
    stable, so which of several tied tokens it drops is unspecified.

    Parameters
    ----------
    threshold : float
        :math:`\tau > 0` (AReaL ``m2_threshold``; ``examples/math/gsm8k_m2po.yaml`` sets 0.04).

    Returns
    -------
    The caller's kind, dtype and device, ``[batch, time]``: 1 on a kept token, 0 on a dropped or masked one.

    References
    ----------
    Zheng et al. (2025), arXiv:2510.01161.  AReaL ``cbff54d``, ``areal/trainer/ppo/actor.py:933-1014``
    (``_apply_m2po_masking``, ``_get_m2po_loss_mask``), applied at ``:571-573``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.off_policy import m2po_mask
    >>> lp = np.log([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]])
    >>> lmu = np.log([[0.5, 0.4, 0.1], [0.6, 0.5, 0.9]])        # (log rho)^2: 0, 0.05, 2.59 / 0.033, 0, 0.345
    >>> m2po_mask(lp, lmu, np.ones((2, 3)), threshold=0.04).tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]
    """
    tau = require_finite_real("threshold", threshold)
    if not tau > 0:
        raise ValueError(f"threshold must be > 0 (the bound on the mean second moment), got {tau}")
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    values = (d * d)[m]
    n = values.numel()
    keep = torch.ones(n, dtype=torch.bool, device=d.device)
    if n:
        order = torch.sort(values, descending=True, stable=True).indices
        ranked = values[order]
        suffix_mean = ranked.flip(0).cumsum(0).flip(0) / torch.arange(n, 0, -1, device=d.device, dtype=d.dtype)
        below = torch.nonzero(suffix_mean < tau)
        dropped = int(below[0]) if len(below) else n - 1
        keep[order[:dropped]] = False
    full = torch.zeros_like(m)
    full[m] = keep
    return out(kind, dtype, full.to(d.dtype))


def loglinear_proximal_log_prob(log_prob: ArrayT, sampler_log_prob: Array, versions: Array, mask: Array, *, current_version: int) -> ArrayT:
    r"""AReaL's log-linear proximal log-probability :math:`\log\mu + \alpha(\log\pi_\theta - \log\mu)`, with no forward pass.

    The proximal policy of decoupled PPO is the one a step behind the current
    :math:`\pi_\theta` (version :math:`\mathrm{ver}(\theta)`).  A token sampled at version
    :math:`\mathrm{ver}(\mu)` gets

    .. math::

        \alpha = \operatorname{clip}\Bigl(\frac{\mathrm{ver}(\theta) - 1 - \mathrm{ver}(\mu)}{\mathrm{ver}(\theta) - \mathrm{ver}(\mu)}, 0, 1\Bigr)
        \quad (\mathrm{ver}(\theta) > \mathrm{ver}(\mu) \ge 0;\ \text{else } 0),

    so :math:`\alpha = 1 - 1/\mathrm{lag}` after :math:`\mathrm{lag} = \mathrm{ver}(\theta) - \mathrm{ver}(\mu)` steps of staleness.  The decoupled
    loss's two factors then split the sampler ratio :math:`\rho_t = \pi_\theta/\mu`
    exactly: the PPO ratio is :math:`\pi_\theta/\pi_{\mathrm{prox}} = \rho_t^{1-\alpha}`
    and the behaviour weight :math:`\pi_{\mathrm{prox}}/\mu = \rho_t^{\alpha}`
    (:func:`derivations.corrections.loglinear_split`): their product is
    :math:`\rho_t`, token IS, and the clip and the rejection each see a power of
    it.  AReaL passes :math:`\log\pi_\theta` detached.

    Parameters
    ----------
    log_prob, sampler_log_prob : numpy array or torch tensor
        ``[batch, time]`` :math:`\log\pi_\theta` (current) and :math:`\log\mu` (behaviour).
    versions : numpy array or torch tensor
        ``[batch, time]`` the policy version that sampled each token (negative on prompt tokens).
    mask : numpy array or torch tensor
        ``[batch, time]`` 0/1.
    current_version : int
        :math:`\mathrm{ver}(\theta)`.

    References
    ----------
    AReaL ``cbff54d``, ``areal/trainer/ppo/actor.py:768-848`` (``compute_prox_logp_approximations``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.off_policy import loglinear_proximal_log_prob
    >>> lp, lmu = np.log([[0.8, 0.8, 0.8]]), np.log([[0.2, 0.2, 0.2]])
    >>> v = np.array([[9, 8, 6]])                        # 1, 2 and 4 steps stale at version 10
    >>> np.exp(loglinear_proximal_log_prob(lp, lmu, v, np.ones((1, 3)), current_version=10)).round(4).tolist()
    [[0.2, 0.4, 0.5657]]
    """
    v_theta = float(require_int("current_version", current_version))
    lp, lmu, m, kind, dtype = log_probs(log_prob, sampler_log_prob, mask)
    v, _ = to_tensor("versions", versions)
    if v.shape != lp.shape:
        raise ValueError(f"versions must have the shape of log_prob {tuple(lp.shape)}, got {tuple(v.shape)}")
    v = on_mask(m, v.to(device=lp.device, dtype=lp.dtype))
    if not bool(torch.isfinite(v).all()):
        raise ValueError("versions must be finite where mask is 1")
    diff = v_theta - v
    alpha = torch.where((diff > 0) & (v >= 0), (diff - 1) / torch.where(diff > 0, diff, torch.ones_like(diff)), torch.zeros_like(v)).clamp(0, 1)
    return out(kind, dtype, on_mask(m, lmu + alpha * (lp - lmu)))


TRUST_REGION_DIVERGENCES = ("tv", "binary_kl")


def trust_region_mask(log_prob: ArrayT, sampler_log_prob: Array, advantages: Array | None, mask: Array, *, low: float = 0.2,
                      high: float = 0.2, divergence: str = "tv") -> ArrayT:
    r"""A trust region on each token's probability, by the sign of its advantage (prime-rl's default loss, SkyRL ``dppo``).

    With :math:`\pi_t = \pi(o_t)`, :math:`\mu_t = \mu(o_t)` (the token's probability under
    the current policy and the sampler), a token is dropped when it has moved
    too far *in the direction its advantage pushes*:

    ``divergence="tv"``
        :math:`A > 0` and :math:`\pi_t - \mu_t > d_h`, or :math:`A < 0` and :math:`\mu_t - \pi_t > d_l`;
    ``divergence="binary_kl"``
        :math:`A > 0`, :math:`\pi_t > \mu_t` and :math:`\mathrm{KL}_B > d_h`, or :math:`A < 0`,
        :math:`\pi_t < \mu_t` and :math:`\mathrm{KL}_B > d_l`, with
        :math:`\mathrm{KL}_B = \mu_t\log(\mu_t/\pi_t) + (1-\mu_t)\log\frac{1-\mu_t+10^{-8}}{1-\pi_t+10^{-8}}` (SkyRL's).

    (:math:`d_h` is ``high``, :math:`d_l` is ``low``.)  ``advantages=None`` drops a token that moved too far either way (prime-rl
    ``ipo`` with :math:`d_l = d_h`).  Strict comparisons: a change exactly
    at the threshold is kept.  Both trainers multiply the mask into
    :math:`-A\,r_t` with :math:`r_t = \pi_\theta/\mu` *not* detached, so at the
    sampler's tokens the gradient weight is :math:`\rho_t\cdot\text{keep}_t`:
    token IS with this mask.  In ratio terms :math:`\pi_t - \mu_t > d` is
    :math:`\rho_t > 1 + d/\mu_t` (:func:`derivations.corrections.probability_band`):
    a band whose width grows as the sampler's probability of the token falls.
    A token with :math:`A = 0` is kept (its weight multiplies 0; prime-rl tests
    it against :math:`d_l`, which changes no gradient).

    References
    ----------
    prime-rl ``559b447``, ``src/prime_rl/trainer/rl/loss.py:109-161`` (default, with
    :math:`\beta(\log r)^2`, prime-rl's ``kl_tau``), ``:164-196`` (``ipo``), defaults
    ``packages/prime-rl-configs/src/prime_rl/configs/trainer.py:494-519``.
    SkyRL ``a956457``, ``skyrl/backends/skyrl_train/utils/ppo_utils.py:866-935`` (``dppo``).

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.off_policy import trust_region_mask
    >>> lp, lmu = np.log([[0.9, 0.3, 0.5]]), np.log([[0.5, 0.6, 0.45]])    # p - q: 0.4, -0.3, 0.05
    >>> m = np.ones((1, 3))
    >>> trust_region_mask(lp, lmu, np.array([1.0]), m).tolist(), trust_region_mask(lp, lmu, np.array([-1.0]), m).tolist()
    ([[0.0, 1.0, 1.0]], [[1.0, 0.0, 1.0]])
    >>> trust_region_mask(lp, lmu, None, m, low=0.1, high=0.1).tolist()
    [[0.0, 0.0, 1.0]]
    """
    low, high = require_nonnegative("low", low), require_nonnegative("high", high)
    if divergence not in TRUST_REGION_DIVERGENCES:
        raise ValueError(f"divergence must be one of {TRUST_REGION_DIVERGENCES}, got {divergence!r}")
    if advantages is None:
        lp, lmu, m, kind, dtype = log_probs(log_prob, sampler_log_prob, mask)
        A = None
    else:
        lp, lmu, A, m, kind, dtype = with_advantages(log_prob, sampler_log_prob, advantages, mask)
    p, q = lp.exp(), lmu.exp()
    if divergence == "tv":
        up, down = p - q > high, q - p > low
    else:
        kl = q * (lmu - lp) + (1 - q) * torch.log((1 - q + 1e-8) / (1 - p + 1e-8))
        up, down = (p > q) & (kl > high), (p < q) & (kl > low)
    dropped = up | down if A is None else ((A > 0) & up) | ((A < 0) & down)
    return out(kind, dtype, on_mask(m & ~dropped, torch.ones_like(p)))


def off_policy_sequence_mask(log_prob: ArrayT, sampler_log_prob: Array, advantages: Array, mask: Array, *, delta: float) -> ArrayT:
    r"""The off-policy sequence mask (OPSM): drop a sequence with :math:`A < 0` whose mean :math:`\log(\mu/\pi)` exceeds :math:`d` (``delta``).

    .. math::

        \text{keep}_{it} = \mathbb 1\Bigl[A_{it} \ge 0 \ \text{ or }\ \frac{1}{|o_i|}\sum_u m_{iu}\,(\log\mu_{iu} - \log\pi_{iu}) \le d\Bigr],

    :math:`|o_i|` the masked tokens (at least 1).  The statistic is the mean
    :math:`k_1` estimate of :math:`\mathrm{KL}(\mu\,\|\,\pi)` on the sequence, with
    the current policy: a sequence the policy has drifted away from, and
    which it is being told to make less likely still, no longer pushes.
    Outcome advantages are one number per sequence; per-token advantages
    (slime) decide token by token.  TRL multiplies the mask into the loss and
    leaves the dropped tokens in the token count.

    References
    ----------
    DeepSeek-V3.2 (2025).  TRL ``f2cd577``, ``trl/trainer/grpo_trainer.py:2920-2939``
    (``get_off_policy_mask``), used at ``:3039-3052`` and ``:3111-3112``; option
    ``off_policy_mask_threshold``, ``trl/trainer/grpo_config.py:953``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.off_policy import off_policy_sequence_mask
    >>> lp, lmu = np.log([[0.2, 0.3], [0.2, 0.3]]), np.log([[0.5, 0.5], [0.5, 0.5]])   # mean log(mu/pi) = 0.71
    >>> off_policy_sequence_mask(lp, lmu, np.array([1.0, -1.0]), np.ones((2, 2)), delta=0.5).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    """
    delta = require_finite_real("delta", delta)
    lp, lmu, A, m, kind, dtype = with_advantages(log_prob, sampler_log_prob, advantages, mask)
    drift = on_mask(m, lmu - lp).sum(-1, keepdim=True) / token_count(m, lp.dtype)
    return out(kind, dtype, on_mask(m & ((A >= 0) | (drift <= delta)), torch.ones_like(lp)))


def outlier_sequence_mask(log_prob: ArrayT, sampler_log_prob: Array, mask: Array, *, low: float | None = None, high: float | None = None) -> ArrayT:
    r"""Drop a whole sequence when any of its token ratios :math:`\rho_t` lies below ``low`` or above ``high`` (SkyRL).

    .. math::

        \text{keep}_i = \mathbb 1\bigl[\,l \le \rho_{it} \le h \ \text{ for every masked } t\,\bigr],

    both edges kept; ``None`` leaves that side open (at least one must be set).
    With :math:`l = e^{-\sqrt{2d}}`, :math:`h = e^{\sqrt{2d}}` it is verl's
    ``seq_max_k2`` at threshold :math:`d` (:func:`derivations.corrections.max_k2_band`).
    A sequence mask, so its bias is minus the whole weight of every dropped
    sequence, all of its tokens, where IcePop drops only the offending token.
    SkyRL forms :math:`\rho_t` in float32 after clamping :math:`\log\rho_t` to
    :math:`\pm 20`; here the caller's dtype (at least float32), unclamped.

    References
    ----------
    SkyRL ``a956457``, ``skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py:75-134``
    (``compute_outlier_token_mask``); options ``skyrl/train/config/config.py:811-814``.

    Examples
    --------
    >>> import numpy as np
    >>> from numeric.off_policy import outlier_sequence_mask
    >>> lp, lmu = np.log([[0.5, 0.9], [0.5, 0.5]]), np.log([[0.5, 0.1], [0.4, 0.5]])    # ratios 1, 9 / 1.25, 1
    >>> outlier_sequence_mask(lp, lmu, np.ones((2, 2)), high=5.0).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    if low is None and high is None:
        raise ValueError("low and high must not both be None: set the band of token ratios a sequence must keep")
    low_v = 0.0 if low is None else require_nonnegative("low", low)
    high_v = torch.inf if high is None else require_real("high", high)
    if not low_v <= high_v:
        raise ValueError(f"low must be <= high, got low={low}, high={high}")
    d, m, kind, dtype = log_ratio(log_prob, sampler_log_prob, mask)
    rho = d.exp()
    bad = m & ((rho < low_v) | (rho > high_v))
    return out(kind, dtype, per_sequence(m, (~bad.any(-1, keepdim=True)).to(d.dtype)))
