"""Exact group expectations: convolution over reward values against brute force over N^G tuples.

Prints figures; it is not a test.  Targets (this 2-core machine), on
TinyLM(V=4, L=4) with the binary reward (N = 121 answers):

* G = 2, 3: convolution and brute force agree within 1e-13, and at G = 3 the
  convolution is at least 100x faster than enumerating 121^3 = 1,771,561 tuples;
* G = 256: the exact gradient of every group estimator in under 1 s.

It also shows the cost with more distinct reward values (the count of token 1,
five values): the number of groups of the others grows as C(G + 3, 4).

Run: ``python benchmarks/bench_group_baselines.py``
"""

import time
from functools import partial

from numeric import (
    TinyLM,
    brute_force_group_gradient,
    default_reward,
    exact_group_gradient,
    expected_score_sum,
    group_mean_advantages,
    group_zscore_advantages,
    maxabs,
    rloo_advantages,
)

ESTIMATORS = {
    "leave-one-out (RLOO)": rloo_advantages,
    "mean including self": group_mean_advantages,
    "z-score, population": partial(group_zscore_advantages, eps=0.0),
    "z-score, Bessel, eps=1e-4": partial(group_zscore_advantages, eps=1e-4, std="bessel"),
}


def best_of(fn, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    lm = TinyLM(V=4, L=4, seed=0)
    theta, R = lm.theta0, default_reward(lm)
    print(f"TinyLM(V=4, L=4): N = {lm.N}, P = {lm.P}, binary reward, E[R] = {float(lm.probs(theta) @ R):.6f}\n")
    print(f"{'estimator':28s} {'G':>3s} {'tuples':>10s} {'brute force':>12s} {'convolution':>12s} {'speed-up':>9s} {'max |diff|':>11s}")
    for name, est in ESTIMATORS.items():
        for G in (2, 3):
            bf = brute_force_group_gradient(lm, theta, R, G, est)
            cv = exact_group_gradient(lm, theta, R, G, est)
            t_bf = best_of(partial(brute_force_group_gradient, lm, theta, R, G, est), 3)
            t_cv = best_of(partial(exact_group_gradient, lm, theta, R, G, est), 50)
            print(f"{name:28s} {G:3d} {lm.N**G:10,d} {t_bf * 1e3:10.2f}ms {t_cv * 1e3:10.3f}ms {t_bf / t_cv:8.0f}x {maxabs(bf, cv):11.2e}")
    print("\nlarge groups (convolution only; brute force would need 121^G tuples)")
    print(f"{'estimator':28s} {'G':>3s} {'time':>10s}   target < 1 s")
    for name, est in ESTIMATORS.items():
        for G in (16, 64, 256):
            t = best_of(partial(exact_group_gradient, lm, theta, R, G, est), 5)
            print(f"{name:28s} {G:3d} {t * 1e3:8.2f}ms")
    count = ((lm.tokens == 1).double() * lm.mask).sum(1)
    print(f"\nreward = number of token-1s ({len(count.unique())} distinct values): C(G + 3, 4) groups of the others")
    for G in (3, 16, 32):
        t = best_of(partial(exact_group_gradient, lm, theta, count, G, rloo_advantages), 3)
        g = exact_group_gradient(lm, theta, count, G, rloo_advantages)
        err = maxabs(g, expected_score_sum(lm, theta, count))
        print(f"{'leave-one-out (RLOO)':28s} {G:3d} {t * 1e3:8.2f}ms   |E[A s] - grad J| = {err:.1e}")


if __name__ == "__main__":
    main()
