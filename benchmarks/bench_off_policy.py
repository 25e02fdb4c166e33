"""Sampler-correction weights at trainer size: time per call, and no NaN from padding.

Prints figures; it is not a test.  Target (this 2-core machine): every weight
function of :mod:`numeric.off_policy` on a ``[256, 4096]`` float32 batch, a
quarter of it padding holding ``-inf``, in under 250 ms per call (timings on this
shared machine vary by 10x between runs), with a
finite result and weight 0 on every padded slot.  With a GPU, the same on
``cuda`` (the output stays on the caller's device).

Run: ``python benchmarks/bench_off_policy.py``
"""

import time
from functools import partial

import torch

from numeric import CORRECTION_WEIGHTS


def batch(B: int, T: int, device: str, dtype=torch.float32):
    """Log-probs of policy and sampler ~0.01 apart, the last quarter of every row padded with -inf."""
    gen = torch.Generator().manual_seed(0)
    lp = -torch.rand(B, T, generator=gen).to(device, dtype) * 3
    lmu = lp + 0.01 * torch.randn(B, T, generator=gen).to(device, dtype)
    mask = torch.ones(B, T, dtype=torch.bool, device=device)
    mask[:, 3 * T // 4 :] = False
    lmu[~mask] = float("-inf")
    return lp, lmu, mask


def best_of(fn, repeats: int, device: str) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        lp, lmu, mask = batch(256, 4096, device)
        print(f"[256, 4096] float32 on {device}, 1/4 padding with -inf")
        for fn in CORRECTION_WEIGHTS:
            out = fn(lp, lmu, mask)
            ok = bool(torch.isfinite(out).all()) and bool((out[~mask] == 0).all()) and out.device == lp.device
            ms = 1e3 * best_of(partial(fn, lp, lmu, mask), 5, device)
            print(f"  {fn.__name__:26s} {ms:8.2f} ms   finite, padding 0, same device: {ok}")


if __name__ == "__main__":
    main()
