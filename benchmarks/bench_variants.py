"""The variant checker at scale: the exact group engine streamed in chunks, beside the figures before it streamed.

Prints figures; it is not a test.  Targets (issue 18, item 6), on one core:

* a reward law with 5 values at G = 64 (814,385 groups of 64): under 10 s and 2 GB
  (before: refused, "needs 766,480 groups ... more than 50,000,000" entries);
* the binary z-score at G = 4096: under 1 s (before: 1.25 s on a quiet machine).

"before" is the engine of the commit given with ``--before`` (default: the
commit before streaming), imported from ``git show``; both are timed here, in
turn, best of a few, in CPU seconds of this process (one torch thread), with
the peak resident memory of the process after each streamed case (torch itself is about 300 MiB).  Their numbers agree to 1e-12 where both run.

Run: ``python benchmarks/bench_variants.py [--before COMMIT]``
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from numeric import group_advantage_weights, group_zscore_advantages, rloo_advantages  # noqa: E402

BEFORE = "8f76864"
F64 = torch.float64
CASES: dict[str, tuple[torch.Tensor, torch.Tensor, int, Callable]] = {
    "binary z-score, G = 4096": (torch.tensor([0.0, 1.0], dtype=F64), torch.tensor([0.7, 0.3], dtype=F64), 4096,
                                 partial(group_zscore_advantages, eps=0.0)),
    "5 values, RLOO, G = 64": (torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0], dtype=F64), torch.tensor([0.1, 0.2, 0.3, 0.25, 0.15], dtype=F64), 64,
                               rloo_advantages),
    "5 values, z-score, G = 64": (torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0], dtype=F64), torch.tensor([0.1, 0.2, 0.3, 0.25, 0.15], dtype=F64), 64,
                                  partial(group_zscore_advantages, eps=0.0)),
}


def engine_before(commit: str):
    """``group_advantage_weights`` as it was at ``commit`` (its module loaded from ``git show``)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:numeric/group_baselines.py"], capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "group_baselines_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("numeric._group_baselines_before", path, submodule_search_locations=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "numeric"
    spec.loader.exec_module(module)
    return module.group_advantage_weights


def timed(fn: Callable, repeats: int) -> tuple[float, Any]:
    """Smallest CPU time of ``repeats`` calls, and the last result (or the exception's message)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.process_time()
        try:
            out = fn()
        except ValueError as err:
            return float("nan"), str(err)
        best = min(best, time.process_time() - t0)
    return best, out


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the commit whose engine is timed as 'before'")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    before = engine_before(args.before)
    now, before_out = {}, {}
    for name, (v, q, G, est) in CASES.items():  # every case now first: the peak memory grows only with the streamed engine
        now[name] = (*timed(partial(group_advantage_weights, v, q, G, est), args.repeats), peak_mib())
    for name, (v, q, G, est) in CASES.items():
        before_out[name] = timed(partial(before, v, q, G, est), args.repeats)
    print(f"{'case':28s} {'before':>10s} {'now':>8s} {'peak MiB now':>13s} {'max |now - before|':>19s}")
    for name in CASES:
        t_now, out, peak = now[name]
        t_before, old = before_out[name]
        diff = f"{float((out - old).abs().max()):.1e}" if isinstance(old, torch.Tensor) else "(before refused)"
        shown = f"{t_before:9.2f}s" if t_before == t_before else f"{'refused':>10s}"
        print(f"{name:28s} {shown} {t_now:7.2f}s {peak:13.0f} {diff:>19s}")
    refused = {old for _, old in before_out.values() if not isinstance(old, torch.Tensor)}
    for message in refused:
        print(f"before: {message}")

if __name__ == "__main__":
    main()
