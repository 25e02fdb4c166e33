r"""The variant checker's suite of the check report: ``python -m numeric variants``."""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from derivations import gradient_weights as gw
from derivations.group_baselines import P

from ..checks import check, suite
from ..tinylm import default_reward
from .callables import TOL
from .checker import check_group_advantage, check_token_loss
from .confirm import toy_lm
from .trainers import openrlhf_rloo_advantages, trl_grpo_advantages, verl_dr_grpo_advantages

__all__ = ["cross_checks"]


def _worst(report) -> float:
    return max(row[3] for row in report.numeric)


@suite("variants")
def cross_checks() -> None:
    """The variant checker on TinyLM: every verdict confirmed by the exact group engine and by autograd."""
    from derivations.group_baselines import grpo_weight as exact_grpo_weight
    from derivations.iid_groups import IIDGroup

    from ..group_baselines import group_zscore_advantages

    grp = IIDGroup()
    R, i = grp.R, grp.i
    loo = check_group_advantage(R[i] - grp.mean_others(i))
    check("leave-one-out: 'unbiased' for symbolic G, exact engine agrees at G = 2..8", _worst(loo) + (loo.verdict != "unbiased"), TOL)
    mean = check_group_advantage(R[i] - grp.mean())
    check("mean including self: 'scaled' by (G-1)/G, exact engine agrees at G = 2..8", _worst(mean) + (mean.verdict != "scaled"), TOL)
    others = [R[2], R[3], R[4]]
    worst = 0.0
    for baseline in (sp.Max(*others), sum(others) - sp.Max(*others) - sp.Min(*others)):
        rep = check_group_advantage(R[1] - baseline, G=4)
        worst = max(worst, _worst(rep) + (rep.verdict != "unbiased"))
    check("max and median of the others (G = 4, four-valued reward): 'unbiased', confirmed", worst, TOL)
    mixed = check_group_advantage(R[i] - (R[i] ** 2 / 2 + grp.mean_others(i)))
    check("a baseline with R_i^2 / 2: 'biased' along E[R^2 s], confirmed on a four-valued reward", _worst(mixed) + (mixed.verdict != "biased"), TOL)

    p = float(toy_lm().probs(toy_lm().theta0) @ default_reward(toy_lm()))
    for std in ("population", "bessel"):
        worst = 0.0
        for G in range(2, 17) if std == "population" else (2, 3, 4, 8, 16):
            rep = check_group_advantage(partial_zscore(group_zscore_advantages, std), G=G, rewards="binary")
            closed = {q: _at(exact_grpo_weight(G, std), q) for q in (p, 0.1, 0.37, 0.9)}
            gap = float("inf") if rep.scale is None else max(float(abs(_at(rep.scale, q) - c)) for q, c in closed.items())
            worst = max(worst, _worst(rep), gap + (rep.verdict != _verdict_of(closed)))
        check(f"GRPO z-score ({std} std) as a callable, G = {'2..16' if std == 'population' else '2, 3, 4, 8, 16'}: c(p) = the closed form w(p, G) "
              "at TinyLM's p and p = 0.1, 0.37, 0.9, the verdict it implies, engine agrees", worst, TOL)

    trainers = {"TRL GRPO (Bessel std, eps = 1e-4 outside)": (trl_grpo_advantages, "reweighted"),
                "verl Dr. GRPO (no std)": (verl_dr_grpo_advantages, "scaled"),
                "OpenRLHF RLOO": (openrlhf_rloo_advantages, "unbiased")}
    for name, (fn, verdict) in trainers.items():
        worst = 0.0
        for G in (4, 8):
            rep = check_group_advantage(fn, G=G, rewards="binary")
            worst = max(worst, _worst(rep) + (rep.verdict != verdict))
        check(f"trainer function {name}: '{verdict}' at G = 4, 8, confirmed", worst, TOL)

    mismatches = 0
    worst = 0.0
    for method, label in (("ppo", "PPO"), ("ppo_dual_clip", "dual-clip PPO"), ("cispo_cap", "CISPO (one-sided)"), ("is", "token IS")):
        token = check_token_loss(gw.token_loss(method))
        mismatches += token.matches != label
        worst = max(worst, token.numeric[1])
    check("token losses PPO, dual-clip, CISPO, IS: recognised (mismatches)", mismatches, 0)
    check("token losses: derived weight == autograd on TinyLM's tokens", worst, TOL)
    look_alike = check_token_loss(-sp.Min(gw.r, 1 + gw.eps_h) * gw.A * gw.ell)
    check("look-alike without sg: not a policy gradient (count of wrong flags)", int(look_alike.is_policy_gradient) + int(bool(look_alike.on_policy_at_ratio_one)), 0)


def _at(c: sp.Expr, p: float) -> sp.Float:
    """c(p) at ``p`` (the exact rational the float stores), to 30 digits (``xreplace``: the same number as ``subs``, half the time)."""
    return sp.N(c.xreplace({P: sp.Rational(p)}), 30)


def _verdict_of(values: dict) -> str:
    """The verdict the closed form's values c(p) imply: all 1 'unbiased', one other constant 'scaled', else 'reweighted' (to 1e-20)."""
    c = list(values.values())
    if max(c) - min(c) > 1e-20:
        return "reweighted"
    return "unbiased" if abs(c[0] - 1) <= 1e-20 else "scaled"


def partial_zscore(fn: Callable, std: str) -> Callable:
    return lambda rewards: fn(rewards, eps=0.0, std=std)
