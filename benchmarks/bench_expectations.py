"""Exact expectations at scale, and closed-form token scores against autograd.

Prints figures; it is not a test.  Targets (this 2-core machine):

* TinyLM(V=8, L=7), 960,800 sequences: exact grad J and the trace variance of
  REINFORCE in under 10 s and 4 GB, without the [N, P] score matrix
  (P = 1,098,056: the dense matrix would need 8.4 TB);
* the [N, L, P] token scores of TinyLM(V=4, L=4) in closed form against a
  per-sequence autograd loop: at least 100x faster.

Run: ``python benchmarks/bench_expectations.py``
"""

import resource
import time

import torch

from numeric import TinyLM, default_reward, score_estimator_moments, token_score_tensor


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def large_tree() -> None:
    t0 = time.perf_counter()
    lm = TinyLM(V=8, L=7, seed=0)
    t1 = time.perf_counter()
    R = default_reward(lm)
    m = score_estimator_moments(lm, lm.theta0, R)
    m_b = score_estimator_moments(lm, lm.theta0, R - float(lm.probs(lm.theta0) @ R))
    t2 = time.perf_counter()
    print(f"TinyLM(V=8, L=7): N = {lm.N:,}  P = {lm.P:,}  (dense [N, P] would be {lm.N * lm.P * 8 / 1e12:.1f} TB)")
    print(f"  build the tree            {t1 - t0:6.2f} s")
    print(f"  exact grad J, Var(b=0), Var(b=E[R])  {t2 - t1:6.2f} s")
    print(f"  |grad J| = {float(m.mean.norm()):.6f}  Var(b=0) = {m.variance:.6f}  Var(b=E[R]) = {m_b.variance:.6f}")
    print(f"  total {t2 - t0:.2f} s (target < 10 s), peak RSS {peak_rss_gb():.2f} GB (target < 4 GB)")


def token_scores() -> None:
    lm = TinyLM(V=4, L=4, seed=0)
    theta = lm.theta0
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        T = token_score_tensor(lm, theta)
    closed = (time.perf_counter() - t0) / reps

    t0 = time.perf_counter()
    th = theta.clone().requires_grad_(True)
    loop = torch.zeros(lm.N, lm.L, lm.P)
    for n in range(lm.N):
        lp = lm.token_log_probs(th)[n]
        for t in range(int(lm.lengths[n])):
            loop[n, t] = torch.autograd.grad(lp[t], th, retain_graph=True)[0]
    auto = time.perf_counter() - t0
    err = float((loop - T).abs().max())
    print(f"token scores [N, L, P] = [{lm.N}, {lm.L}, {lm.P}] for TinyLM(V=4, L=4):")
    print(f"  closed form {closed * 1e3:8.3f} ms   per-sequence autograd loop {auto * 1e3:8.1f} ms   "
          f"speed-up {auto / closed:6.0f}x (target >= 100x)   max |diff| {err:.1e}")


if __name__ == "__main__":
    torch.set_num_threads(2)
    token_scores()
    large_tree()
