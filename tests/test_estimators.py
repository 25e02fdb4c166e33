"""The trainers' advantage estimators, reward shaping and KL in the reward (issue 29, item 2).

Three kinds of test, for each estimator:

* a hand transcription of the trainer's formula (loops over a ragged batch with a group of
  one, as the trainer's code at the cited commit computes it) against the package's call,
  to 1e-15;
* the checker's verdict and exact scale with the trainer's conventions, against a ground truth
  computed independently: a closed form derived by hand, or an exact enumeration of the toy
  LM's answers (``brute_force_group_gradient``, or a loop over every pair of answers);
* the statements the docstrings make about the gradient (a shaped reward changes the
  objective, the KL in the reward is a score-function term, a teacher's token log-ratio is a
  per-state KL gradient), each computed on the toy LM against an independent route.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import partial

import numpy as np
import pytest
import sympy as sp
import torch

from derivations.group_baselines import P
from numeric import (
    TinyLM,
    brute_force_group_gradient,
    default_reward,
    exact_group_gradient,
    expected_score_sum,
    group_mean_advantages,
    group_zscore_advantages,
    rloo_advantages,
    token_score_tensor,
)
from numeric.losses import (
    AdaptiveKLController,
    ema_baseline_advantages,
    gdpo_advantages,
    group_ids,
    grouped_advantages,
    kl_in_reward,
    length_penalized_advantages,
    masked_whiten,
    maxrl_advantages,
    normalize_by_levels,
    opd_advantages,
    optimal_token_baseline_advantages,
    overlong_penalized_rewards,
    rlsd_advantages,
    stop_properly_rewards,
)
from numeric.variants import check_group_advantage, check_grouped_advantage, check_singleton

F64 = torch.float64
RAW = 1 / (1 + 1e-6)


@pytest.fixture(scope="module")
def toy():
    """The checker's toy LM (V = 3, L = 3: 15 answers of 1 to 3 tokens), its binary reward and its score matrix."""
    lm = TinyLM(V=3, L=3, seed=1)
    return lm, default_reward(lm)


def _ragged(seed=0, binary=False):
    """A flat batch as a trainer holds it: groups of 4, 1, 3, 2, 1 answers, shuffled, uids as strings; non-binary rewards."""
    g = torch.Generator().manual_seed(seed)
    sizes = [4, 1, 3, 2, 1]
    labels = np.repeat(np.array([f"uid-{k}" for k in range(len(sizes))], dtype=object), sizes)
    order = torch.randperm(len(labels), generator=g).numpy()
    scores = torch.randint(0, 2, (len(labels),), generator=g).to(F64) if binary else torch.rand(len(labels), generator=g, dtype=F64) * 3 - 1
    return scores, labels[order]


def _by_uid(index):
    groups = defaultdict(list)
    for i, u in enumerate(index):
        groups[u].append(i)
    return groups


# ------------------------------------------------------------------ hand transcriptions of the trainers' code


def _verl_grpo(scores, index, eps=1e-6, norm=True):
    """verl 1dda039 core_algos.py:304-331: id2score, a lone answer's mean 0 and std 1, torch.std (Bessel), eps outside."""
    out = scores.clone()
    groups = _by_uid(index)
    for rows in groups.values():
        s = scores[rows]
        mean, std = (torch.tensor(0.0, dtype=F64), torch.tensor(1.0, dtype=F64)) if len(rows) == 1 else (s.mean(), s.std())
        for i in rows:
            out[i] = (scores[i] - mean) / (std + eps) if norm else scores[i] - mean
    return out


def _verl_rloo_loop(scores, index):
    """verl 1dda039 core_algos.py:612-634: a lone answer keeps its raw score."""
    out = scores.clone()
    for rows in _by_uid(index).values():
        n = len(rows)
        if n > 1:
            mean = scores[rows].mean()
            for i in rows:
                out[i] = scores[i] * n / (n - 1) - mean * n / (n - 1)
    return out


def _verl_rloo_vectorized(scores, index):
    """verl 1dda039 core_algos.py:858-864: ((c s - group sum)/max(c - 1, 1)) * [c > 1]."""
    inv = torch.from_numpy(np.unique(index, return_inverse=True)[1])
    c = torch.bincount(inv)[inv].to(F64)
    return ((c * scores - torch.bincount(inv, weights=scores)[inv]) / (c - 1).clamp_min(1)) * (c > 1)


def _skyrl_maxrl(scores, index, eps=1e-6):
    """SkyRL a956457 ppo_utils.py:1405-1426."""
    out = scores.clone()
    for rows in _by_uid(index).values():
        if len(rows) > 1:
            mean = scores[rows].mean()
            for i in rows:
                out[i] = (scores[i] - mean) / (mean + eps)
    return out


def _prime_maxrl(scores, index):
    """prime-rl 559b447 max_rl.py:24-26, one group at a time."""
    out = scores.clone()
    for rows in _by_uid(index).values():
        r = scores[rows]
        mean = r.mean()
        out[rows] = torch.zeros_like(r) if mean <= 0 else (r - mean) / mean
    return out


def test_the_group_of_one_conventions_are_the_trainers():
    """verl grpo (raw reward over 1 + 1e-6), verl rloo (raw) vs rloo_vectorized (0), SkyRL maxrl (raw) vs prime-rl max_rl (0)."""
    s, uid = _ragged()
    z = partial(group_zscore_advantages, eps=1e-6, std="bessel")
    cases = [
        (_verl_grpo(s, uid), grouped_advantages(z, s, uid, singleton=RAW)),
        (_verl_grpo(s, uid, norm=False), grouped_advantages(group_mean_advantages, s, uid, singleton=1.0)),
        (_verl_rloo_loop(s, uid), grouped_advantages(rloo_advantages, s, uid, singleton=1.0)),
        (_verl_rloo_vectorized(s, uid), grouped_advantages(rloo_advantages, s, uid, singleton=0.0)),
        (_skyrl_maxrl(s.abs() + 0.1, uid), grouped_advantages(partial(maxrl_advantages, eps=1e-6, nonpositive="divide"), s.abs() + 0.1, uid, singleton=1.0)),
        (_prime_maxrl(s, uid), grouped_advantages(maxrl_advantages, s, uid, singleton=0.0)),
    ]
    for theirs, ours in cases:
        assert (ours - theirs).abs().max().item() <= 1e-15
    lone = [i for i, u in enumerate(uid) if list(uid).count(u) == 1]
    assert cases[0][1][lone].tolist() == (s[lone] / (1 + 1e-6)).tolist() and cases[3][1][lone].abs().max() == 0
    assert any(float(_prime_maxrl(s, uid)[rows].abs().max()) == 0 and float(s[rows].mean()) <= 0 for rows in _by_uid(uid).values())  # the guard fires
    with pytest.raises(ValueError, match="index holds a group of one response"):  # OpenRLHF's assert
        grouped_advantages(z, s, uid, singleton=None)


def test_the_registrys_group_of_one_rules_are_what_the_transcribed_code_does():
    """Each reading's singleton factor in numeric.variants.ESTIMATORS, against check_singleton run on the trainer's loop at G = 1."""
    from numeric.variants import ESTIMATORS

    def lone(loop):  # each row a group of one, labelled by its row
        return lambda r: loop(torch.as_tensor(r, dtype=F64)[:, 0].clone(), np.array([f"u{k}" for k in range(len(r))], dtype=object))[:, None]

    readings = {(name, rd.cite.trainer, rd.their): rd.singleton for name, e in ESTIMATORS.items() for rd in e.peers}
    pairs = [(("zscore_1e-6", "verl", 'adv_estimator "grpo"'), _verl_grpo),
             (("group_mean", "verl", 'adv_estimator "grpo", norm_adv_by_std_in_grpo=False'), partial(_verl_grpo, norm=False)),
             (("rloo", "verl", 'adv_estimator "rloo"'), _verl_rloo_loop),
             (("rloo", "verl", 'adv_estimator "rloo_vectorized"'), _verl_rloo_vectorized),
             (("maxrl_1e-6", "SkyRL", 'advantage_estimator "maxrl"'), _skyrl_maxrl),
             (("maxrl", "prime-rl", 'algo "max_rl"'), _prime_maxrl)]
    for key, loop in pairs:
        rep = check_singleton(lone(loop), rewards=(0.25, 1.0, 2.5, 4.0))  # positive rewards: prime-rl's guard zeroes a mean <= 0
        assert abs(float(rep.scale) - readings[key]) <= 1e-15, key


def test_the_registry_rows_compute_each_trainers_formula():
    """Each ESTIMATORS row with a [B, G] function, on contiguous groups whose spread is near the std epsilons (so a wrong
    epsilon shows), against the trainer's formula written out: verl/SkyRL/slime 1e-6, TRL/ms-swift 1e-4, AReaL 1e-5,
    OpenRLHF 1e-9, MaxRL's two readings, TRL's batch std."""
    from numeric.variants import ESTIMATORS

    g = torch.Generator().manual_seed(11)
    R = 1e-3 * torch.rand(3, 4, generator=g, dtype=F64)  # a spread of about 3e-4: every epsilon moves the numbers
    z = lambda eps: (R - R.mean(-1, keepdim=True)) / (R.std(-1, keepdim=True) + eps)  # noqa: E731
    theirs = {"zscore_1e-6": z(1e-6), "zscore_1e-4": z(1e-4), "zscore_1e-9": z(1e-9),
              "zscore_1e-5": torch.stack([_areal_normalize(row, [4], "group", "group", False, True, 1e-5) for row in R]),
              "maxrl": torch.stack([_prime_maxrl(row, np.zeros(4)) for row in R]),
              "maxrl_1e-6": torch.stack([_skyrl_maxrl(row, np.zeros(4)) for row in R]),
              "batch_std": (R - R.mean(-1, keepdim=True)) / (R.std() + 1e-4),
              "rloo": torch.stack([_verl_rloo_loop(row, np.zeros(4)) for row in R]),
              "group_mean": torch.stack([_verl_grpo(row, np.zeros(4), norm=False) for row in R])}
    for name, expected in theirs.items():
        ours = torch.as_tensor(ESTIMATORS[name].advantage(R))
        assert (ours - expected).abs().max().item() <= 1e-15 * max(1.0, expected.abs().max().item()), name
    var = R.var(-1, keepdim=True)  # verl grpo_vectorized at b178a3c: the variance floored at 1e-6 (it binds here)
    floored = (R - R.mean(-1, keepdim=True)) / (var.clamp(min=1e-6).sqrt() + 1e-6)
    assert (torch.as_tensor(ESTIMATORS["zscore_floor"].advantage(R)) - floored).abs().max().item() <= 1e-15


def _verl_masked_whiten(values, mask):
    """verl torch_functional.py:294-346: masked_mean divides by the count + 1e-8; Bessel; rsqrt(var + 1e-8)."""
    mean = (values * mask).sum() / (mask.sum() + 1e-8)
    var = ((values - mean) ** 2 * mask).sum() / (mask.sum() + 1e-8) * (mask.sum() / (mask.sum() - 1))
    return (values - mean) * torch.rsqrt(var + 1e-8)


def test_gdpo_is_verls_trls_and_ms_swifts():
    """verl 1dda039 core_algos.py:451-466 (tokens), TRL f2cd577 grpo_trainer.py:2711-2719, ms-swift 3602360 advantage.py:84-93."""
    s, uid = _ragged(1)
    g = torch.Generator().manual_seed(2)
    R = torch.stack([s, torch.randint(0, 2, s.shape, generator=g).to(F64), torch.rand(s.shape, generator=g, dtype=F64)], 1)
    w = [1.0, 0.5, 2.0]
    lengths = torch.randint(1, 6, s.shape, generator=g)
    mask = (torch.arange(6)[None] < lengths[:, None]).to(F64)
    total = sum(wk * _verl_grpo(R[:, k], uid)[:, None] * mask for k, wk in enumerate(w))
    theirs = _verl_masked_whiten(total, mask) * mask
    ours = gdpo_advantages(R, uid, weights=w, mask=mask)
    assert (ours - theirs).abs().max().item() <= 1e-15
    # TRL and ms-swift: contiguous groups of num_generations, no ragged groups
    G, K = 3, 3
    flat = torch.rand(12, K, generator=g, dtype=F64).round(decimals=1)
    idx = np.repeat(np.arange(4), G)
    grouped = flat.view(-1, G, K)
    z = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
    S = (z.reshape(-1, K) * torch.tensor(w, dtype=F64)).sum(1)
    trl = (S - S.mean()) / (S.std() + 1e-4)
    assert (gdpo_advantages(flat, idx, weights=w, eps=1e-4, singleton=0.0, whiten="sequences", whiten_eps=1e-4) - trl).abs().max().item() <= 1e-15
    z8 = torch.nan_to_num((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-8), nan=0.0)
    S8 = (z8.reshape(-1, K) * torch.tensor(w, dtype=F64)).sum(1)
    swift = (S8 - S8.mean()) / (S8.std() + 1e-8)
    assert (gdpo_advantages(flat, idx, weights=w, eps=1e-8, singleton=0.0, whiten="sequences", whiten_eps=1e-8) - swift).abs().max().item() <= 1e-15
    # num_generations = 1 (TRL: std := 0, so every z_k is 0, and so is the batch step)
    assert gdpo_advantages(flat, np.arange(12), eps=1e-4, singleton=0.0, whiten="sequences", whiten_eps=1e-4).abs().max() == 0
    # the sequence-level mean of S is 0 in groups of two or more (TRL's centring does nothing), not the token mean (verl's does)
    S_only = gdpo_advantages(flat, idx, weights=w, whiten=None)
    mask12 = (torch.arange(6)[None] < torch.randint(1, 6, (12,), generator=g)[:, None]).to(F64)
    assert abs(float(S_only.mean())) <= 1e-15 and abs(float((S_only[:, None] * mask12).sum() / mask12.sum())) > 1e-3


def _areal_normalize(x, group_sizes, mean_level, std_level, leave_one_out, unbiased, eps):
    """AReaL cbff54d data.py:1431-1637, Normalization.__call__ with loss_mask None, transcribed."""
    slices, off = [], 0
    for n in group_sizes:
        slices.append(slice(off, off + n))
        off += n

    def mean_of(xx, loo):
        n = xx.numel()
        if loo:
            if n <= 1:
                return torch.zeros_like(xx)
            return (xx.sum() - xx) / (n - 1)
        return xx.sum() / n * torch.ones_like(xx)

    def std_of(xx, mm):
        n = xx.numel()
        sq = ((xx - mm) ** 2).sum()
        if unbiased:
            return torch.ones(()) if n <= 1 else (sq / (n - 1)).sqrt()
        return (sq / n).sqrt()

    if mean_level == "batch":
        mean = mean_of(x, leave_one_out)
    elif mean_level == "group":
        mean = torch.zeros_like(x)
        for s_ in slices:
            mean[s_] = x[s_] if (s_.stop - s_.start == 1 and leave_one_out) else mean_of(x[s_], leave_one_out)
    else:
        mean = torch.zeros_like(x)
    centred = x - mean
    if std_level == "batch":
        std = std_of(x, mean) * torch.ones_like(x)
    elif std_level == "group":
        std = torch.zeros_like(x)
        for s_ in slices:
            std[s_] = torch.ones(()) if (s_.stop - s_.start == 1 and unbiased) else std_of(x[s_], mean[s_])
    else:
        std, eps = torch.ones_like(x), 0.0
    return centred / (std + eps)


@pytest.mark.parametrize("leave_one_out", [False, True])
def test_areal_levels_are_arealss_normalization(leave_one_out):
    x = torch.rand(11, generator=torch.Generator().manual_seed(3), dtype=F64) * 2 - 0.5
    sizes = [4, 1, 3, 2, 1]
    uid = np.repeat(np.arange(len(sizes)), sizes)
    for mean_level in ("batch", "group", None):
        for std_level in ("batch", "group", None):
            for unbiased in (True, False):
                theirs = _areal_normalize(x, sizes, mean_level, std_level, leave_one_out, unbiased, 1e-5)
                ours = normalize_by_levels(x, uid, mean_level=mean_level, std_level=std_level, leave_one_out=leave_one_out, unbiased=unbiased)
                assert (ours - theirs).abs().max().item() <= 1e-15, (mean_level, std_level, unbiased)
    # leave-one-out with a group std is the z-score with eps scaled by (n - 1)/n: the residuals are n/(n-1) (x - mean)
    if leave_one_out:
        g4 = x[:4][None]
        ours = normalize_by_levels(x[:4], np.zeros(4, int), mean_level="group", std_level="group", leave_one_out=True)
        assert (ours - group_zscore_advantages(g4, eps=1e-5 * 3 / 4, std="bessel")[0]).abs().max().item() <= 1e-15


def test_prime_rl_length_penalty_and_rae_are_prime_rls():
    """prime-rl 559b447 grpo.py:26-43 (one group per call) and rae.py:39-43 (in batch order, per agent)."""
    s, uid = _ragged(4, binary=True)
    g = torch.Generator().manual_seed(5)
    out_tok, total, turns = (torch.randint(0, 50, s.shape, generator=g).to(F64) for _ in range(3))
    total = total + out_tok
    theirs = torch.empty_like(s)
    for rows in _by_uid(uid).values():
        r, o, tt, T = s[rows], out_tok[rows], total[rows], turns[rows]
        inp = tt - o
        frac = 0.25 * (o / o.max().clamp(min=1)) + 0.1 * (inp / inp.max().clamp(min=1)) + 0.1 * (T / T.max().clamp(min=1))
        shaped = r - r.mean() * frac
        theirs[rows] = shaped - shaped.mean()
    ours = grouped_advantages(lambda r, o, i, t: length_penalized_advantages(r, o, input_tokens=i, turns=t), s, uid, out_tok, total - out_tok, turns)
    assert (ours - theirs).abs().max().item() <= 1e-15
    agents = ["a", "b", "a", "a", "b", "c", "a", "b", "c", "a", "a"]
    base, d = {"a": 0.2, "b": -0.1}, 0.9
    state, loop = defaultdict(float, base), []
    for a, r in zip(agents, s.tolist()):
        b = state[a]
        loop.append(r - b)
        state[a] = d * b + (1 - d) * r
    out = ema_baseline_advantages(s, agents, baselines=base, decay=d)
    assert (out.advantages - torch.tensor(loop, dtype=F64)).abs().max().item() <= 1e-15
    assert dict(out.baselines) == dict(state) and base == {"a": 0.2, "b": -0.1}  # the caller's state is not changed


def test_openrlhf_length_shaping_is_openrlhfs():
    """OpenRLHF 3c3be62 length_penalty.py:41-56 and 83-103, one response at a time."""
    r = torch.tensor([1.0, 0.3, 1.0, 0.0, 0.7, 1.0], dtype=F64)
    lengths = torch.tensor([100, 470, 500, 512, 300, 530])  # 530: longer than max_new_tokens (its max_len fallback), the cap binds
    max_new, buf, factor = 512, 64, 0.7
    loop = r.clone()
    for j in range(6):
        exceed = min(int(lengths[j]) - (max_new - buf), buf)
        if exceed > 0:
            loop[j] += -exceed / buf * factor
    assert (overlong_penalized_rewards(r, lengths, max_length=max_new, buffer=buf, factor=factor) - loop).abs().max().item() <= 1e-15
    cut = torch.tensor([False, True, True, False, True, False])
    for coef in (0.5, 0.0, -0.5):
        loop = r.clone()
        for j in range(6):
            if cut[j]:
                loop[j] = coef if coef < 0 else loop[j] * coef
        assert torch.equal(stop_properly_rewards(r, cut, coef=coef), loop)
    with pytest.raises(ValueError, match="coef must be in"):
        stop_properly_rewards(r, cut, coef=1.5)


def test_kl_in_the_reward_and_the_adaptive_controller_are_verls():
    """verl 1dda039 ray_trainer.py:94-112 (apply_kl_penalty, default 'kl' = k1) and core_algos.py:153-174."""
    g = torch.Generator().manual_seed(6)
    old, ref = (torch.log(torch.rand(3, 5, generator=g, dtype=F64) * 0.9 + 0.05) for _ in range(2))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=F64)
    scores = torch.zeros(3, 5, dtype=F64)
    scores[0, 2], scores[1, 4], scores[2, 0] = 1.0, 0.0, 1.0
    beta = 0.05
    kld = (old - ref) * mask
    theirs = scores - beta * kld
    current = ((kld * mask).sum(-1) / (mask.sum(-1) + 1e-8)).mean().item()
    out = kl_in_reward(scores, torch.where(mask > 0, old, torch.nan), ref, mask, beta=beta)
    assert (out.rewards - theirs * mask).abs().max().item() <= 1e-15 and abs(out.current_kl - current) <= 1e-15
    ctl, value = AdaptiveKLController(0.01, 0.1, 1000), 0.01
    for kl, n in ((0.3, 64), (0.05, 64), (0.1, 32), (0.0, 640)):
        value *= 1 + np.clip(kl / 0.1 - 1, -0.2, 0.2) * n / 1000
        ctl = ctl.update(kl, n)
        assert ctl.value == value
    with pytest.raises(ValueError, match="target must be"):
        AdaptiveKLController(0.01, 0.0, 1000)


def test_opd_and_rlsd_are_slimes_and_ms_swifts():
    """slime 624b824 loss.py:694-697 (adv - coef * (student - teacher)); ms-swift 3602360 advantage.py:333-343 (apply_rlsd_reweight)."""
    g = torch.Generator().manual_seed(7)
    ls, lt = (torch.log(torch.rand(3, 4, generator=g, dtype=F64) * 0.9 + 0.05) for _ in range(2))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=F64)
    A = torch.tensor([0.7, -1.2, 0.0], dtype=F64)
    theirs = (A[:, None] - 0.3 * (ls - lt)) * mask  # slime's advantages are per token already; masked by the loss
    assert (opd_advantages(A, ls, lt, mask, coef=0.3) - theirs).abs().max().item() <= 1e-15
    for lam, clip, neg in ((0.5, 0.2, False), (1.0, 0.5, True), (0.0, 0.2, False)):
        base = A[:, None].expand_as(mask)
        delta = (lt - ls) * mask
        w = torch.exp(torch.sign(base) * delta) * mask
        reweight = (1.0 - lam) + lam * torch.clamp(w, min=1.0 - clip, max=1.0 + clip)
        if neg:
            seq_neg = (A < 0).to(F64)[:, None]
            reweight = seq_neg * reweight + (1.0 - seq_neg)
        theirs = base * reweight * mask
        assert (rlsd_advantages(A, lt, ls, mask, lam=lam, clip=clip, negative_only=neg) - theirs).abs().max().item() <= 1e-15


# ------------------------------------------------------------------ verdicts and scales, against independent ground truth


def _maxrl_closed_form(G):
    """The expected update of (R - mean)/mean with all-fail groups at 0, derived by hand: (1 - (1-p)^(G-1))/p."""
    return sp.cancel((1 - (1 - P) ** (G - 1)) / P)


def test_maxrl_is_the_order_g_minus_1_truncation_of_grad_log_p(toy):
    """Binary reward: c(p, G) = sum_{k < G-1} (1-p)^k, the gradient of the (G-1)-term truncation of log p (not G terms: the
    all-fail group's advantage is 0, so the mean-score control variate is left out exactly there). Checked by the checker at
    G = 2..5, and by enumerating every group of the toy LM at G = 2, 3 against c(p) grad J."""
    lm, R = toy
    for G in (2, 3, 4, 5):
        rep = check_group_advantage(maxrl_advantages, G=G, rewards="binary")
        assert rep.verdict == ("unbiased" if G == 2 else "reweighted") and sp.simplify(rep.scale - _maxrl_closed_form(G)) == 0
    p = float(lm.probs(lm.theta0) @ R)
    gJ = expected_score_sum(lm, lm.theta0, R)
    for G in (2, 3):
        exact = brute_force_group_gradient(lm, lm.theta0, R, G, maxrl_advantages)
        assert (exact - float(_maxrl_closed_form(G).subs(P, p)) * gJ).abs().max().item() <= 1e-13
    # SkyRL's eps = 1e-6 moves the scale by about 1e-6; a graded reward makes both biased (R^2 appears)
    skyrl = check_group_advantage(partial(maxrl_advantages, eps=1e-6, nonpositive="divide"), G=4, rewards="binary")
    gap = float((skyrl.scale - _maxrl_closed_form(4)).subs(P, 0.3))
    assert skyrl.verdict == "reweighted" and 1e-8 < abs(gap) < 1e-5
    for f in (maxrl_advantages, partial(maxrl_advantages, eps=1e-6, nonpositive="divide")):
        assert check_group_advantage(f, G=3, rewards=[0, 0.5, 1]).verdict == "biased"


def test_the_singleton_rules_scale_the_update_of_a_lone_answer(toy):
    """c = 1/(1 + 1e-6) for verl's raw reward, 0 for TRL's rule, c = 1 for prime-rl rae; the enumeration at G = 1 agrees."""
    lm, _ = toy
    z = partial(group_zscore_advantages, eps=1e-6, std="bessel")
    one = lambda c: (lambda r: grouped_advantages(z, torch.as_tensor(r)[:, 0], np.arange(len(r)), singleton=c)[:, None])  # noqa: E731
    verl = check_singleton(one(RAW))
    assert verl.verdict == "scaled" and abs(float(verl.scale) - RAW) <= 1e-15
    assert check_singleton(one(0.0)).scale == 0 and check_singleton(one(1.0)).verdict == "unbiased"
    rae = check_singleton(lambda r: torch.stack([ema_baseline_advantages(row, baselines={"default": 0.4}).advantages for row in torch.as_tensor(r)]))
    assert rae.verdict == "unbiased"
    assert check_singleton(lambda r: torch.as_tensor(r) ** 2).verdict == "biased"
    with pytest.raises(ValueError, match="index holds a group of one"):
        check_singleton(lambda r: grouped_advantages(z, torch.as_tensor(r)[:, 0], np.arange(len(r)), singleton=None)[:, None])
    # independently: a lone answer with advantage c R on the toy LM, enumerated, is c grad J (R non-binary)
    R = torch.arange(lm.N, dtype=F64) % 4 * 0.5
    g = brute_force_group_gradient(lm, lm.theta0, R, 1, one(RAW))
    assert (g - RAW * expected_score_sum(lm, lm.theta0, R)).abs().max().item() <= 1e-14


def test_ragged_batches_keep_the_group_verdicts_and_rae_is_unbiased_at_every_position(toy):
    """grouped_advantages in the flat convention, among groups of other sizes (singletons included at G = 2): the z-score's
    verdict; rae's baseline uses only earlier answers, so each position's scale is 1 (the positional route)."""
    z = partial(group_zscore_advantages, eps=1e-6, std="bessel")
    rep = check_grouped_advantage(lambda s, i: grouped_advantages(z, s, i, singleton=RAW), G=[2, 4], convention="flat")
    assert rep.verdict == "reweighted" and rep.reports[0][1].verdict == "scaled"  # a constant c at G = 2, c(p) at G = 4
    direct = check_group_advantage(z, G=4, rewards="binary")
    assert all(abs(float((rep.reports[1][1].scale - direct.scale).subs(P, q))) <= 1e-12 for q in (0.1, 0.5, 0.9))
    rae = lambda r: torch.stack([ema_baseline_advantages(row, baselines={"default": 0.3}).advantages for row in torch.as_tensor(r)])  # noqa: E731
    rep = check_group_advantage(rae, G=3, rewards="binary")
    assert rep.verdict == "unbiased" and [c for _, _, c in rep.positions] == [1, 1, 1]
    # independently, at G = 2, position 2 (baseline from answer 1) by a loop over every pair of the toy LM's answers
    lm, R = toy
    th = lm.theta0.clone().requires_grad_(True)
    p, seq = lm.probs(th).detach(), lm.sequence_log_prob(th)
    total = sum(p[i] * p[j] * (R[j] - (0.95 * 0.3 + 0.05 * R[i])) * seq[j] for i in range(lm.N) for j in range(lm.N))
    (g,) = torch.autograd.grad(total, th)
    assert (g - expected_score_sum(lm, lm.theta0, R)).abs().max().item() <= 1e-13


def test_gdpo_is_a_sum_of_per_reward_z_scores_scales_and_its_batch_step_is_undecided(toy):
    """Two binary rewards on the toy LM, coded as one reward R1 + 2 R2: GDPO's update before the batch step is
    w1 c_z(p1) grad J1 + w2 c_z(p2) grad J2, each c_z the checker's z-score scale at that reward's p; at G = 4, where c_z
    depends on p, it is not a multiple of grad (w1 J1 + w2 J2). The trainers' batch steps couple the groups: undecided."""
    lm, R1 = toy
    R2 = ((lm.tokens[:, 0] == 2) & (R1 == 0)).to(F64)  # a second binary reward, rarer (p = 0.05, the first's is 0.52)
    code = R1 + 2 * R2
    w = (1.0, 0.5)

    def gdpo_coded(rewards):
        r = torch.as_tensor(rewards, dtype=F64)
        both = torch.stack([r % 2, (r >= 2).to(F64)], -1).reshape(-1, 2)
        return gdpo_advantages(both, np.repeat(np.arange(r.shape[0]), r.shape[1]), weights=w, whiten=None).reshape(r.shape)

    G = 4
    exact = exact_group_gradient(lm, lm.theta0, code, G, gdpo_coded)
    zscale = check_group_advantage(partial(group_zscore_advantages, eps=1e-6, std="bessel"), G=G, rewards="binary").scale
    probs = lm.probs(lm.theta0)
    parts = [wk * float(zscale.subs(P, float(probs @ Rk))) * expected_score_sum(lm, lm.theta0, Rk) for wk, Rk in zip(w, (R1, R2))]
    assert (exact - sum(parts)).abs().max().item() <= 1e-13
    target = expected_score_sum(lm, lm.theta0, w[0] * R1 + w[1] * R2)
    residual = (exact - (exact @ target) / (target @ target) * target).norm() / exact.norm()
    assert 1e-3 < residual.item() < 1e-2  # the chapter: 0.6 % of the update off grad (w1 J1 + w2 J2)
    for whiten, extra in (("tokens", {}), ("sequences", {"eps": 1e-4, "singleton": 0.0, "whiten_eps": 1e-4})):
        def fn(scores, index, whiten=whiten, extra=extra):
            mask = torch.ones(len(scores), 2, dtype=F64) if whiten == "tokens" else None
            out = gdpo_advantages(torch.as_tensor(scores)[:, None], index, whiten=whiten, mask=mask, **extra)
            return out[:, 0] if whiten == "tokens" else out
        rep = check_grouped_advantage(fn, G=3, convention="flat")
        assert rep.verdict == "undecided" and "other groups of the batch" in rep.reason


def _pair_gradient(lm, R, advantage_of_pair):
    """E[A_1 s_1] at G = 2 by a loop over every ordered pair of the toy LM's answers (autograd of the weighted log-prob)."""
    th = lm.theta0.clone().requires_grad_(True)
    p, seq = lm.probs(th).detach(), lm.sequence_log_prob(th)
    i, j = torch.meshgrid(torch.arange(lm.N), torch.arange(lm.N), indexing="ij")
    a1 = advantage_of_pair(i.reshape(-1), j.reshape(-1))
    (g,) = torch.autograd.grad(((p[i] * p[j]).reshape(-1) * a1 * seq[i.reshape(-1)]).sum(), th)
    return g


def _off_grad_j(g, gJ):
    return ((g - (g @ gJ) / (gJ @ gJ) * gJ).norm() / g.norm()).item()


def test_the_length_penalty_is_biased_and_vanishes_with_equal_lengths(toy):
    """prime-rl's length-shaped GRPO at G = 2 on the toy LM (answers of 1 to 3 tokens): the expected update leaves grad J;
    with every length equal the penalty cancels and it is the group mean's (G - 1)/G grad J."""
    lm, R = toy
    n = lm.lengths.to(F64)
    gJ = expected_score_sum(lm, lm.theta0, R)
    shaped = lambda i, j: length_penalized_advantages(torch.stack([R[i], R[j]], -1), torch.stack([n[i], n[j]], -1))[:, 0]  # noqa: E731
    g = _pair_gradient(lm, R, shaped)
    assert 0.03 < _off_grad_j(g, gJ) < 0.035 and round(float(g @ gJ / (gJ @ gJ)), 3) == 0.463  # the chapter's 3.2 % and 0.463
    flat = lambda i, j: length_penalized_advantages(torch.stack([R[i], R[j]], -1), torch.full((len(i), 2), 7.0, dtype=F64))[:, 0]  # noqa: E731
    assert (_pair_gradient(lm, R, flat) - 0.5 * gJ).abs().max().item() <= 1e-15


def test_per_answer_shaping_changes_the_objective_and_the_law(toy):
    """The stop-properly penalty makes the reward three-valued: RLOO stays unbiased for J', the z-score turns biased
    (it is only reweighted for a binary reward). The overlong penalty is a reward of the answer: RLOO on it is grad J', not grad J."""
    lm, R = toy
    assert check_group_advantage(rloo_advantages, G=3, rewards=[0, 0.5, 1]).verdict == "unbiased"
    z = check_group_advantage(partial(group_zscore_advantages, eps=1e-9, std="bessel"), G=3, rewards=[0, 0.5, 1])
    assert z.verdict == "biased"
    cut = lm.lengths == lm.L  # answers that hit the length limit
    shaped = stop_properly_rewards(R, cut, coef=0.5)
    assert sorted(set(shaped.tolist())) == [0.0, 0.5, 1.0]
    longer = overlong_penalized_rewards(R, lm.lengths, max_length=3, buffer=2)
    g = exact_group_gradient(lm, lm.theta0, longer, 3, rloo_advantages)
    assert (g - expected_score_sum(lm, lm.theta0, longer)).abs().max().item() <= 1e-14
    assert (g - expected_score_sum(lm, lm.theta0, R)).abs().max().item() > 1e-3


def _state_kl_gradient(lm, theta, other_logits, forward=False):
    """sum over states of d(s) grad KL(pi(.|s) || q(.|s)) (or KL(q || pi)), the visiting distribution d held fixed: by autograd of
    the per-state KL weighted by detached visit probabilities (no token scores)."""
    th = theta.clone().requires_grad_(True)
    logp = torch.log_softmax(lm.logits(th), -1)
    logq = torch.log_softmax(other_logits, -1)
    visits = torch.zeros(lm.n_prefixes, dtype=F64).index_add_(0, lm.prefix_rows.reshape(-1),
                                                               (lm.probs(theta)[:, None] * lm.mask).reshape(-1))
    if forward:
        kl = (logq.exp() * (logq - logp)).sum(-1)
    else:
        kl = (logp.exp() * (logp - logq)).sum(-1)
    (g,) = torch.autograd.grad((visits * kl).sum(), th)
    return g


def _sequence_kl_gradient(lm, theta, other_theta):
    """grad KL(pi || q) of the sequences, by autograd of the enumerated sum."""
    th = theta.clone().requires_grad_(True)
    lp = lm.sequence_log_prob(th)
    (g,) = torch.autograd.grad((lp.exp() * (lp - lm.sequence_log_prob(other_theta))).sum(), th)
    return g


def test_the_kl_in_the_reward_and_a_teachers_token_log_ratio(toy):
    """On the toy LM, exactly: k1 summed over the answer (or as reward-to-go) as a reward gives grad KL(pi || ref) of the
    sequences; k3 gives that less the per-state grad KL(ref || pi) (states fixed); the OPD token term gives the per-state
    grad KL(pi || teacher) with the states fixed, which is not the sequences' KL gradient."""
    lm, _ = toy
    theta = lm.theta0
    ref = theta + 0.7 * torch.randn(lm.P, generator=torch.Generator().manual_seed(9), dtype=F64)
    lp, lr = lm.token_log_probs(theta), lm.token_log_probs(ref)
    scores = token_score_tensor(lm, theta).reshape(lm.N, lm.L, -1)
    prob = lm.probs(theta)
    mask = lm.mask > 0

    def update(token_adv):  # E[sum_t A_t grad l_t]
        return torch.einsum("n,nl,nlp->p", prob, token_adv * lm.mask, scores)

    k1 = kl_in_reward(torch.zeros_like(lp), lp, lr, mask, beta=1.0).kl
    summed = k1.sum(-1, keepdim=True).expand_as(k1)
    to_go = k1.flip(-1).cumsum(-1).flip(-1)
    seq = _sequence_kl_gradient(lm, theta, ref)
    assert (update(summed) - seq).abs().max().item() <= 1e-14 and (update(to_go) - seq).abs().max().item() <= 1e-14
    k3 = kl_in_reward(torch.zeros_like(lp), lp, lr, mask, beta=1.0, kl_penalty="low_var_kl").kl
    fwd = _state_kl_gradient(lm, theta, lm.logits(ref), forward=True)
    assert (update(k3.sum(-1, keepdim=True).expand_as(k3)) - (seq - fwd)).abs().max().item() <= 1e-13
    # OPD: each token's own log-ratio as its advantage (A = 0 here), coef 1: minus the per-state reverse-KL gradient
    opd = opd_advantages(torch.zeros(lm.N, dtype=F64), lp, lr, mask, coef=1.0)
    state = _state_kl_gradient(lm, theta, lm.logits(ref))
    assert (update(-opd) - state).abs().max().item() <= 1e-14
    assert (state - seq).abs().max().item() > 1e-2


def test_rlsd_leaves_the_policy_gradient_unless_the_teacher_agrees(toy):
    """RLSD on RLOO's advantage at G = 2 (every pair of the toy LM's answers): a teacher that is the policy gives RLOO's
    grad J back exactly; another teacher weighs the tokens of an answer unequally and leaves grad J."""
    lm, R = toy
    theta = lm.theta0
    teacher = theta + torch.randn(lm.P, generator=torch.Generator().manual_seed(10), dtype=F64)
    scores = token_score_tensor(lm, theta).reshape(lm.N, lm.L, -1)
    prob = lm.probs(theta)
    gJ = expected_score_sum(lm, theta, R)
    lp = lm.token_log_probs(theta)
    for t_theta, same in ((theta, True), (teacher, False)):
        lt = lm.token_log_probs(t_theta)
        total = torch.zeros(lm.P, dtype=F64)
        for j in range(lm.N):  # answer 1 of every pair (i, j), its partner j
            A1 = rloo_advantages(torch.stack([R, R[j].expand(lm.N)], -1))[:, 0]
            tok = rlsd_advantages(A1, lt, lp, lm.mask)
            total += prob[j] * torch.einsum("n,nl,nlp->p", prob, tok * lm.mask, scores)
        if same:
            assert (total - gJ).abs().max().item() <= 1e-14
        else:
            assert _off_grad_j(total, gJ) > 1e-4


def test_the_optimal_token_baseline_has_no_fixed_scale(toy):
    """verl's OTB at G = 2 over every pair of the toy LM's answers (answers of 1 to 3 tokens, an outcome reward on the last):
    the expected update leaves grad J (its baseline is built from the answer itself); handle_zero_tail (verl's default since
    2026-02-24, 8acd940) changes the number."""
    lm, R = toy
    theta = lm.theta0
    scores = token_score_tensor(lm, theta).reshape(lm.N, lm.L, -1)
    prob = lm.probs(theta)
    lp = lm.token_log_probs(theta)
    probs = torch.softmax(lm.logits(theta), -1)[lm.prefix_rows]
    s2 = (probs**2).sum(-1)
    last = torch.nn.functional.one_hot(lm.lengths - 1, lm.L).to(F64) * R[:, None]
    gJ = expected_score_sum(lm, theta, R)
    out = {}
    for tail in (False, True):
        total = torch.zeros(lm.P, dtype=F64)
        for j in range(lm.N):
            pair = lambda x, j=j: torch.stack([x, x[j].expand_as(x)], 1)  # noqa: E731
            adv = optimal_token_baseline_advantages(pair(last), pair(lp), pair(s2), pair(lm.mask), handle_zero_tail=tail)[:, 0]
            total += prob[j] * torch.einsum("n,nl,nlp->p", prob, adv * lm.mask, scores)
        out[tail] = total
        assert _off_grad_j(total, gJ) > 1e-3
    assert (out[True] - out[False]).abs().max().item() > 1e-6


# ------------------------------------------------------------------ inputs


def test_bad_inputs_are_named():
    s, uid = _ragged()
    with pytest.raises(TypeError, match="index must hold group labels"):
        grouped_advantages(group_mean_advantages, s, np.linspace(0, 1, len(s)))
    with pytest.raises(ValueError, match="index must hold one label per response"):
        group_ids(uid[:-1], len(s))
    with pytest.raises(ValueError, match="estimator must return"):
        grouped_advantages(lambda r: r[..., :1], s, uid)
    with pytest.raises(ValueError, match="rewards hold a group whose mean"):
        maxrl_advantages(np.array([[-1e-6, -1e-6]]), eps=1e-6, nonpositive="divide")
    with pytest.raises(ValueError, match="nonpositive must be"):
        maxrl_advantages(np.ones((1, 2)), nonpositive="keep")
    with pytest.raises(ValueError, match="mask is required with whiten='tokens'"):
        gdpo_advantages(np.ones((3, 2)), [0, 0, 1])
    with pytest.raises(ValueError, match="weights must hold one weight per reward"):
        gdpo_advantages(np.ones((3, 2)), [0, 0, 1], weights=[1.0], whiten=None)
    with pytest.raises(TypeError, match="weights must be a triple"):
        length_penalized_advantages(np.ones(3), np.ones(3), weights=(0.25, 0.1))
    with pytest.raises(ValueError, match=r"weights\[1\] must be >= 0"):
        length_penalized_advantages(np.ones(3), np.ones(3), weights=(0.25, -0.1, 0.1))
    with pytest.raises(ValueError, match="mean_level must be"):
        normalize_by_levels(np.ones(3), [0, 0, 1], mean_level="prompt")
    with pytest.raises(ValueError, match="agents must name one agent per response"):
        ema_baseline_advantages(np.ones(3), ["a"])
    with pytest.raises(ValueError, match="max_length must be"):
        overlong_penalized_rewards(np.ones(2), np.array([3, 4]), max_length=2, buffer=4)
    with pytest.raises(ValueError, match="advantages must have shape"):
        rlsd_advantages(np.ones((2, 2)), np.zeros((2, 2)), np.zeros((2, 2)), np.ones((2, 2)))
    # the padding may hold anything: masked slots of the token inputs never leak
    lp = np.log(np.full((2, 3), 0.5))
    m = np.array([[1, 1, 0], [1, 0, 0]])
    lp_pad, lp_inf = np.where(m > 0, lp, np.nan), np.where(m > 0, lp - 0.1, -np.inf)
    assert np.isfinite(opd_advantages(np.ones(2), lp_pad, lp_inf, m)).all()
    assert np.isfinite(rlsd_advantages(np.ones(2), lp_pad, lp_inf, m)).all()
    assert np.isfinite(kl_in_reward(np.zeros((2, 3)), lp_pad, lp_pad, m, beta=0.1).rewards).all()
    assert math.isfinite(masked_whiten(np.arange(4.0), np.ones(4), count_eps=1e-8).sum())
