r"""The ``losses`` cross-check suite: gradient certificates, the length bias of every mode, exact scales."""

from __future__ import annotations

import torch

from derivations.methods import METHODS

from ..checks import check, maxabs, suite
from ..expectations import expected_score_sum
from ..group_baselines import (
    binary_reward_weight,
    exact_group_gradient,
    group_zscore_advantages,
    rloo_advantages,
)
from ..tinylm import TinyLM, default_reward
from .advantages import gpg_advantages, passk_advantages
from .aggregation import AGGREGATIONS, aggregate, token_weights
from .policy import POLICY_LOSSES, penalty_gradient, policy_loss, policy_weight
from .selection import clip_cov_selection, kl_cov_selection

__all__: list[str] = []  # the suite; certificate_gap and length_bias_gradients are its helpers (numeric.losses exports them)


def _batch_on(lm, theta, idx: torch.Tensor):
    """Token log-probs, mask and a non-binary per-sequence advantage for sequences ``idx`` of ``lm``."""
    R = (lm.tokens == 1).to(torch.float64).mul(lm.mask).sum(1) / lm.lengths  # fraction of 1-tokens: non-binary
    lp = lm.token_log_probs(theta)[idx]
    return lp, lm.mask[idx], R[idx] - 0.3


def certificate_gap(method: str, agg: str | None = None, seed: int = 3, **options: object) -> float:
    r"""Largest gap between autograd of :func:`policy_loss` and :math:`-\kappa\,(w\,A - p)` (derived weights) on a TinyLM batch.

    Twelve answers drawn from the old policy of the gradient-weights setting
    (variable lengths), a non-binary advantage, the setting's current policy.
    The selecting methods (Clip-Cov, KL-Cov, the top-entropy mask, M2PO) get a ``selected`` mask drawn with ``seed`` (each token
    with probability 1/2) unless ``options`` holds one; :math:`p` is
    :func:`penalty_gradient` (KL-Cov's selected tokens, prime-rl's and DRO's squared log-ratio; 0 elsewhere).  DRO takes
    :math:`\beta = 0.1` and DPPO and the TV band :math:`\tau = 0.01` unless ``options`` say otherwise.
    """
    from ..gradient_weights import setting

    s = setting()
    gen = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(s.q, 12, replacement=True, generator=gen)
    old, mask, A = _batch_on(s.lm, s.theta_old, idx)
    old = old.detach()
    lp = s.lm.token_log_probs(s.theta)[idx].detach().requires_grad_(True)
    params: dict = {k: v for k, v in {"eps_low": 0.2, "eps_high": 0.28, "dro_beta": 0.1, "kl_tau": 0.01}.items() if k in METHODS[method].parameters}
    params.update(options)
    if method in SELECTING and "selected" not in params:
        params["selected"] = torch.rand(lp.shape, generator=gen) < 0.5
    loss = policy_loss(method, lp, old, A, mask, agg=agg, **params, **explicit(agg or ""))
    (g,) = torch.autograd.grad(loss, lp)
    w = policy_weight(method, lp.detach(), old, A, mask, **params)
    p = penalty_gradient(method, lp.detach(), old, mask, **{k: v for k, v in params.items() if k not in PENALTY_FREE})
    kept = mask * ~params["selected"] if method == "m2po" else mask  # M2PO's dropped tokens leave the denominators
    mode = kappa_mode(method, agg)
    return float((g + token_weights(kept, mode, **explicit(mode)) * (w * A[:, None] - p)).abs().max())


def explicit(mode: str) -> dict:
    """``{"convention": ...}`` naming the reading the package's ``mode`` keeps, where a trainer's meaning of the name moved
    (``seq-mean-token-sum-norm``: verl's at ``b178a3c``); ``{}`` for every other mode."""
    return {"convention": "verl@b178a3c"} if mode == "seq-mean-token-sum-norm" else {}


SELECTING = ("clip_cov", "kl_cov", "top_entropy", "m2po")
PENALTY_FREE = ("eps_low", "eps_high", "dual_clip")
"""Parameters penalty_gradient does not need (the others it takes as policy_loss does)."""


def kappa_mode(method: str, agg: str | None = None) -> str:
    r"""The mode whose :math:`\kappa` multiplies ``method``'s derived weight: ``agg``, or the method's aggregation.

    A sequence loss averaged over rows (no aggregation of its own) is seq-mean-token-mean's when the row's loss is a
    function of its *mean* log-ratio (GMPO: :math:`\partial/\partial\ell_t` carries :math:`1/n_i`), and seq-mean-token-sum's
    when it is a function of the *sum* (PPO on the product ratio: no :math:`1/n_i`).
    """
    if agg is not None:
        return agg
    return METHODS[method].aggregation or ("seq-mean-token-sum" if method == "ppo_product" else "seq-mean-token-mean")


def length_bias_gradients(lm: TinyLM, theta: torch.Tensor, b: float = 0.3) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    r"""Each mode's expected REINFORCE update over batches of two answers, and the gradient of the objective it follows.

    Every pair of responses is enumerated with its probability; the reward is
    the (non-binary) fraction of 1-tokens and :math:`A_i = R(o_i) - b`.  The
    update is :math:`\mathbb{E}[\sum_i \kappa_i A_i \nabla\log\pi(o_i)]`.  When
    :math:`\kappa_i` depends on :math:`o_i` alone (every mode but token-mean) it
    equals :math:`\nabla\mathbb{E}[\sum_i\kappa_iA_i]`; token-mean's
    :math:`\kappa_i = 1/(n_1 + n_2)` depends on the other answer too, and its
    update is :math:`2\nabla\mathbb{E}[\psi(n)\,A]` with
    :math:`\psi(n) = \mathbb{E}_{o'}[1/(n + |o'|)]` frozen at the current policy.

    Returns ``({mode: (expected update, gradient of its objective)}, grad J)``.
    """
    N = lm.N
    R = (lm.tokens == 1).to(torch.float64).mul(lm.mask).sum(1) / lm.lengths
    i, j = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    pairs = torch.stack([i.reshape(-1), j.reshape(-1)], 1)  # [N^2, 2]
    mask, A = lm.mask[pairs], (R - b)[pairs]  # [P, 2, L], [P, 2]
    th = theta.detach().clone().requires_grad_(True)
    lp, p = lm.token_log_probs(th), lm.probs(th)
    pair_prob = p[pairs].prod(1)
    grad = lambda f: torch.autograd.grad(f, th, retain_graph=True)[0]
    n = lm.lengths.to(torch.float64)
    psi = (p.detach()[None, :] / (n[:, None] + n[None, :])).sum(1)  # E_{o'}[1 / (n + |o'|)], frozen
    out = {}
    for mode in AGGREGATIONS:
        loss = aggregate(-A[..., None] * lp[pairs], mask, mode, **explicit(mode))  # [P], one loss per batch of two
        update = -grad((pair_prob.detach() * loss).sum())
        if mode == "token-mean":
            objective = 2 * (p * psi * (R - b)).sum()
        else:
            kappa = token_weights(mask, mode, **explicit(mode))[..., 0]  # kappa_i: the same on every token of row i
            objective = (pair_prob * (kappa * A).sum(-1)).sum()
        out[mode] = (update, grad(objective))
    return out, grad(p @ R)


def length_bias_newer_norm(lm: TinyLM, theta: torch.Tensor, b: float = 0.3) -> torch.Tensor:
    r"""verl's ``seq-mean-token-sum-norm`` at ``1dda039``: its expected REINFORCE update over every batch of two answers (as in
    :func:`length_bias_gradients`), :math:`\nabla J/T` (the mean over the rows of :math:`\sum_t/D`, :math:`D = T`)."""
    N = lm.N
    R = (lm.tokens == 1).to(torch.float64).mul(lm.mask).sum(1) / lm.lengths
    i, j = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    pairs = torch.stack([i.reshape(-1), j.reshape(-1)], 1)
    mask, A = lm.mask[pairs], (R - b)[pairs]
    th = theta.detach().clone().requires_grad_(True)
    lp, p = lm.token_log_probs(th), lm.probs(th)
    loss = aggregate(-A[..., None] * lp[pairs], mask, "seq-mean-token-sum-norm", convention="verl@1dda039")
    return -torch.autograd.grad((p[pairs].prod(1).detach() * loss).sum(), th)[0]


def _verl_selections() -> dict[str, torch.Tensor]:
    """Clip-Cov's and KL-Cov's selections as verl computes them, on the batch :func:`certificate_gap` draws (seed 3); Clip-Cov's band scaled to its covariances."""
    from ..gradient_weights import setting

    s = setting()
    idx = torch.multinomial(s.q, 12, replacement=True, generator=torch.Generator().manual_seed(3))
    old, mask, A = _batch_on(s.lm, s.theta_old, idx)
    lp = s.lm.token_log_probs(s.theta)[idx].detach()
    return {"clip_cov": clip_cov_selection(lp, old.detach(), A, mask, fraction=0.2, bounds=(0.0, 1.0), eps_low=0.2, eps_high=0.28, seed=0),
            "kl_cov": kl_cov_selection(lp, A, mask, fraction=0.2)}


@suite("losses")
def cross_checks() -> None:
    """Gradient certificates of every loss, the length bias of every mode, and exact scales of the estimators."""
    for method in POLICY_LOSSES:
        check(f"{method}: autograd of policy_loss == -kappa w A with the derived weight w", certificate_gap(method), 1e-15)
    check("dual-clip PPO (C_d = 3): autograd == -kappa w A", certificate_gap("ppo", dual_clip=3.0), 1e-15)
    check("CISPO with eps_low=None (TRL's cap, 1 + eps_high = 1.1): autograd == -kappa w A", certificate_gap("cispo", eps_low=None, eps_high=0.1), 1e-15)
    check("CISPO at the sequence ratio with eps_low=None (TRL, 1 + eps_high = 1.1): autograd == -kappa w A",
          certificate_gap("cispo_seq", eps_low=None, eps_high=0.1), 1e-15)
    check("GSPO with dual clip (OpenRLHF, C_d = 3): autograd == -kappa w A", certificate_gap("gspo", dual_clip=3.0), 1e-15)
    for method, select in _verl_selections().items():
        check(f"{method} with verl's selection ({int(select.sum())} of the batch's tokens): autograd == -kappa (w A - p)",
              certificate_gap(method, selected=select), 1e-15)
    for agg in AGGREGATIONS[1:]:
        check(f"PPO aggregated with {agg}: autograd == -kappa w A", certificate_gap("ppo", agg=agg), 1e-15)
    for method in ("dppo", "tv_band"):  # prime-rl's tau (log r)^2: -kappa (w A - 2 tau log r)
        check(f"{method} with kl_tau = 0.01: autograd == -kappa (w A - p)", certificate_gap(method, kl_tau=0.01), 1e-15)
    check("dppo with dppo_type binary_kl: autograd == -kappa w A", certificate_gap("dppo", dppo_type="binary_kl"), 1e-15)
    lm = TinyLM()
    out, gJ = length_bias_gradients(lm, lm.theta0)
    for mode, (update, objective) in out.items():
        check(f"{mode}: expected update over every batch of two == gradient of its derived objective", maxabs(update, objective), 1e-15)
    check("seq-mean-token-sum: expected update == grad J (no length bias)", maxabs(out["seq-mean-token-sum"][0], gJ), 1e-15)
    check("seq-mean-token-sum-norm (D = T; verl at b178a3c: no mean over the B = 2 rows): expected update == B grad J / T",
          maxabs(out["seq-mean-token-sum-norm"][0], 2 * gJ / lm.L), 1e-15)
    check("token-sum (verl since 1dda039): expected update == B grad J", maxabs(out["token-sum"][0], 2 * gJ), 1e-15)
    newer = length_bias_newer_norm(lm, lm.theta0)
    check("seq-mean-token-sum-norm as verl reads it at 1dda039 (the mean over the B = 2 rows of sum_t / T): expected update == grad J / T",
          maxabs(newer, gJ / lm.L), 1e-15)
    for mode in ("token-mean", "seq-mean-token-mean"):
        update = out[mode][0]
        residual = float((update - (update @ gJ) / (gJ @ gJ) * gJ).norm() / update.norm())
        check(f"{mode}: expected update is not a multiple of grad J (1 if it is; relative residual {residual:.3f})", float(residual < 1e-6), 0.0)
    R = default_reward(lm)
    p, G = float(lm.probs(lm.theta0) @ R), 4
    grad_J = expected_score_sum(lm, lm.theta0, R)
    estimators = {
        "RLOO": rloo_advantages,
        "GRPO (Bessel std, eps 1e-6)": lambda r: group_zscore_advantages(r, 1e-6, "bessel"),
        "pass@k": passk_advantages,
        "GPG (one group per batch)": lambda r: gpg_advantages(r[:, None, :])[:, 0, :],
    }
    for name, est in estimators.items():
        c = binary_reward_weight(p, G, est)
        check(f"{name}: exact E[A s] (group engine, G = {G}) == c grad J, c = {c:.6f}", maxabs(exact_group_gradient(lm, lm.theta0, R, G, est), c * grad_J), 1e-15)
    check("pass@k: c == (1 - p)^(G - 1), so the update is grad pass@G / G", abs(binary_reward_weight(p, G, passk_advantages) - (1 - p) ** (G - 1)), 1e-15)
    gpg = estimators["GPG (one group per batch)"]
    check("GPG, one group per batch: c == (G - 1)/G (alpha = 1 in every mixed group: the mean-including-self scale)", abs(binary_reward_weight(p, G, gpg) - (G - 1) / G), 1e-15)
