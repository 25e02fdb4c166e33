r"""The torch per-token losses of the registry's methods: :func:`token_terms`.

Each method of :data:`derivations.methods.METHODS` has its per-token (or
per-row) loss here, written so that both branches of every ``where`` are
finite: a clipped, capped or masked token's gradient is exactly 0 however
large its ratio, and no NaN reaches a gradient from finite inputs in any
dtype.  :func:`numeric.policy_loss` aggregates them; the tests compare each
with the registry's SymPy formula, values and gradients.
"""

from __future__ import annotations

import torch

__all__ = ["SEQUENCE_TERMS", "token_terms"]

SEQUENCE_TERMS = ("gspo", "gspo_token", "cispo_seq", "sapo_seq", "luspo")
"""The methods whose token loss reads the row's geometric-mean ratio :math:`\\tilde r_i` in place of the token's."""


def _ppo_terms(neg_A: torch.Tensor, log_ratio: torch.Tensor, low: float, high: float, dual_clip: float | None,
               dropped: torch.Tensor | None = None) -> torch.Tensor:
    r"""PPO's per-token loss :math:`-\min(rA, \mathrm{clip}(r)A)` (dual clip: :math:`\le -C_dA` for :math:`A < 0`), overflow-safe.

    A token is *live* where the loss is :math:`-rA` (:math:`A > 0`, :math:`r \le 1+\varepsilon_h`;
    :math:`A < 0`, :math:`1-\varepsilon_l \le r` (:math:`\le c`)); elsewhere the loss is
    the constant :math:`-A` times the bound, with no path to :math:`\ell`.  The
    ratio is exponentiated only where the token is live, so a clipped token with
    :math:`r = \infty` has gradient exactly 0 (``0 * exp(inf)`` would be NaN).
    The live sets are closed, as derived (:mod:`derivations.gradient_weights`).
    A ``dropped`` token (Clip-Cov's selected ones, a row OPSM drops) has loss 0,
    and is never live, so its ratio is not exponentiated either.
    """
    with torch.no_grad():
        r = log_ratio.exp()
        positive = neg_A < 0
        live = torch.where(positive, r <= 1 + high, r >= 1 - low)
        bound = torch.where(positive, torch.full_like(r, 1 + high), torch.full_like(r, 1 - low))
        if dual_clip is not None:
            beyond = (neg_A > 0) & (r > dual_clip)
            live = live & ~beyond
            bound = torch.where(beyond, torch.full_like(r, dual_clip), bound)
        live = live & (neg_A != 0)
        if dropped is not None:
            live = live & ~dropped
            bound = torch.where(dropped, torch.zeros_like(bound), bound)
    unclipped = neg_A * torch.where(live, log_ratio, torch.zeros_like(log_ratio)).exp()
    return torch.where(live, unclipped, neg_A * bound)


def _masked_ratio(neg_A: torch.Tensor, delta: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    r""":math:`-\mathrm{sg}(k)\,rA`: the ratio with its gradient where ``keep`` (and :math:`A \ne 0`), exponentiated only there."""
    live = keep & (neg_A != 0)
    return torch.where(live, neg_A * torch.where(live, delta, torch.zeros_like(delta)).exp(), torch.zeros_like(delta))


def _stopped(lp: torch.Tensor, weight: torch.Tensor, neg_A: torch.Tensor) -> torch.Tensor:
    r""":math:`-\mathrm{sg}(w)\,A\,\ell`, with :math:`wA` read as 0 where :math:`A = 0` (an infinite weight times 0 is no NaN)."""
    return lp * torch.where(neg_A != 0, weight.detach() * neg_A, torch.zeros_like(weight))


def _trust_region(lp: torch.Tensor, old: torch.Tensor, neg_A: torch.Tensor, options: dict) -> torch.Tensor:
    r"""DPPO's keep mask: the probability may rise by :math:`\delta_{\mathrm{high}}` (:math:`A > 0`) and fall by :math:`\delta_{\mathrm{low}}` (:math:`A \le 0`).

    ``binary_tv`` compares :math:`\pi - \pi_0` with the thresholds; ``binary_kl`` the binary KL
    :math:`\pi_0\log(\pi_0/\pi) + (1 - \pi_0)\log\frac{1 - \pi_0 + 10^{-8}}{1 - \pi + 10^{-8}}`, and keeps a move in
    the other direction.  Computed as the trainers do, from :math:`e^{\ell}` and :math:`e^{\ell_0}`.
    """
    low, high = options["tv_delta"]
    with torch.no_grad():
        p, p0 = lp.exp(), old.exp()
        positive = neg_A < 0
        if options.get("dppo_type", "binary_tv") == "binary_tv":
            return torch.where(positive, p - p0 <= high, p - p0 >= -low)
        kl = p0 * (old - lp) + (1 - p0) * torch.log((1 - p0 + 1e-8) / (1 - p + 1e-8))
        return torch.where(positive, (kl <= high) | (p <= p0), (kl <= low) | (p >= p0))


def _k2(delta: torch.Tensor, tau: float) -> torch.Tensor | float:
    r""":math:`\tau(\log r)^2`, or 0 when :math:`\tau = 0`."""
    return tau * delta**2 if tau else 0.0


def token_terms(method: str, lp: torch.Tensor, delta: torch.Tensor | None, A: torch.Tensor, n: torch.Tensor | None,
                options: dict, selected: torch.Tensor | None = None, old: torch.Tensor | None = None) -> torch.Tensor:
    r"""The torch per-token loss of ``method`` (:data:`derivations.methods.METHODS`), ``[B, T]``, or ``[B, 1]`` where constant along a row.

    ``lp`` is :math:`\ell`, ``delta`` the log-ratio :math:`\ell - \ell_{\mathrm{old}}`
    (with ``old`` detached; ``None`` for REINFORCE and GPG), ``A`` the advantages
    (detached here), ``n`` the rows' token counts (sequence-level methods),
    ``options`` from :func:`numeric._validate.method_options`, ``selected`` the
    boolean selected tokens (Clip-Cov, KL-Cov, the top-entropy mask, M2PO), ``old`` the old log-probabilities
    (DPPO's and the TV band's masks read :math:`\pi_0 = e^{\ell_0}`).  The test suite checks every
    method's values and gradients against the registry's SymPy formula.
    """
    neg_A = -A.detach()
    if method in ("reinforce", "gpg"):
        return neg_A * lp
    assert delta is not None
    if method == "dro":  # -(A ell - beta/2 (log r)^2)
        return neg_A * lp + options["dro_beta"] / 2 * delta**2
    if method in ("ppo", "clip_cov", "top_entropy", "m2po"):
        return _ppo_terms(neg_A, delta, options["eps_low"], options["eps_high"], options.get("dual_clip"), selected)
    if method in ("kl_cov", "importance_sampling"):  # -A r, exponentiated only where A != 0, plus beta |delta| where selected
        unclipped = _masked_ratio(neg_A, delta, torch.ones_like(delta, dtype=torch.bool))
        if method == "importance_sampling":
            return unclipped
        assert selected is not None
        return unclipped + torch.where(selected, delta.abs() * options["kl_cov_coef"], torch.zeros_like(delta))
    if method in ("dppo", "tv_band"):
        assert old is not None
        if method == "dppo":
            keep = _trust_region(lp, old, neg_A, options)
        else:
            with torch.no_grad():
                keep = (lp.exp() - old.exp()).abs() <= options["band_delta"]
        return _masked_ratio(neg_A, delta, keep) + _k2(delta, options["kl_tau"])
    if method in ("dppo_tv", "dppo_kl"):
        assert old is not None
        keep = _trust_region(lp, old, neg_A, {**options, "dppo_type": "binary_tv" if method == "dppo_tv" else "binary_kl"})
        return _stopped(lp, torch.where(keep, delta.detach().exp().clamp(max=options["is_cap"]), torch.zeros_like(delta)), neg_A)
    if method in ("icepop", "rollout_is", "seq_mask_tis"):
        with torch.no_grad():
            r = delta.exp()
            if method == "rollout_is":
                inside = (r > 1 - options["eps_low"]) & (r < 1 + options["eps_high"])
            else:
                low, high = options["is_bounds"]
                g = r if method == "icepop" else (delta.sum(-1, keepdim=True) / n.clamp(min=1)).exp()  # type: ignore[union-attr]
                inside = (g >= low) & (g <= high)
        return _stopped(lp, torch.where(inside, r, torch.zeros_like(r)), neg_A)
    if method == "opsm":  # PPO, a row dropped when A < 0 and its mean log-ratio is below -delta
        assert n is not None
        with torch.no_grad():
            kept = (neg_A <= 0) | (delta.sum(-1, keepdim=True) / n.clamp(min=1) >= -options["opsm_delta"])
        return _ppo_terms(neg_A, delta, options["eps_low"], options["eps_high"], None, ~kept.expand_as(delta))
    if method == "ppo_product":  # PPO's clip on the product of the row's ratios, one value per row
        assert n is not None
        row_neg_A = neg_A if neg_A.shape[-1] == 1 else neg_A.sum(-1, keepdim=True) / n.clamp(min=1)
        return _ppo_terms(row_neg_A, delta.sum(-1, keepdim=True), options["eps_low"], options["eps_high"], None)
    if method in SEQUENCE_TERMS:
        assert n is not None
        log_s = delta.sum(-1, keepdim=True) / n.clamp(min=1)
        if method == "gspo_token":  # straight-through: the value of rtilde_i, the gradient of pi_t / sg(pi_t)
            log_s = log_s.detach() + (delta - delta.detach())
        if method in ("gspo", "gspo_token", "luspo"):
            return _ppo_terms(neg_A, log_s, options["eps_low"], options["eps_high"], options.get("dual_clip"))
        method, delta = method[:-4], log_s  # CISPO and SAPO at the row's ratio
    if method in ("cispo", "is"):
        r = delta.detach().exp()
        if method == "cispo":
            low, high = options["eps_low"], options["eps_high"]
            r = r.clamp(max=1 + high) if low is None else r.clamp(1 - low, 1 + high)
        return lp * (r * neg_A)
    if method == "sapo":
        tau_pos, tau_neg = options["sapo_tau"]
        tau = torch.where(neg_A < 0, neg_A.new_tensor(tau_pos), neg_A.new_tensor(tau_neg))
        # beyond tau (r - 1) = 200 the sigmoid is 1 in every float format: stop there, so exp never overflows
        r = delta.clamp(max=torch.log1p(200 / tau)).exp()
        return torch.sigmoid(tau * (r - 1)) * (4 * neg_A / tau)
    if method == "vespo":  # the stopped Gamma weight of the product of the row's ratios, in log space (W = inf gives 0)
        with torch.no_grad():
            log_W = delta.sum(-1, keepdim=True)
            nonneg = neg_A <= 0  # TRL: A >= 0 takes the positive side's (k, lambda)
            k = torch.where(nonneg, neg_A.new_tensor(options["vespo_k"][0]), neg_A.new_tensor(options["vespo_k"][1]))
            lam = torch.where(nonneg, neg_A.new_tensor(options["vespo_lambda"][0]), neg_A.new_tensor(options["vespo_lambda"][1]))
            phi = (lam + k * log_W - lam * log_W.exp()).exp()
        return lp * (phi * neg_A)
    # gmpo: exp(mean_t of the sign-clipped log-ratio), times the row's mean advantage
    assert n is not None
    g_low, g_high = options["gmpo_clip"]
    sign = -torch.sign(neg_A)
    clipped = sign * torch.minimum(sign * delta, sign * delta.clamp(-g_low, g_high))
    mean_neg_A = neg_A if neg_A.shape[-1] == 1 else neg_A.sum(-1, keepdim=True) / n.clamp(min=1)
    return mean_neg_A * (clipped.sum(-1, keepdim=True) / n.clamp(min=1)).exp()
