"""The variant checker at scale: the exact group engine streamed in chunks, beside the figures before it streamed.

Prints figures; it is not a test.  Targets (issue 18, item 6), on one core:

* a reward law with 5 values at G = 64 (814,385 groups of 64): under 10 s and 2 GB
  (before: refused, "needs 766,480 groups ... more than 50,000,000" entries);
* the binary z-score at G = 4096: under 1 s (before: 1.25 s on a quiet machine);
* the checker's report on a callable, ``check_group_advantage(fn, G=64, rewards=[0, 1, 2, 3, 4])``,
  confirmation on the toy LM included: under 10 s and 2 GB (before: the symbolic route over
  3,832,400 SymPy count patterns, not run here; now decided numerically from the Bernstein
  coefficients, see :func:`derivations.variants.patterns.coefficient_report`).  Each runs in a
  fresh process, so its peak memory is its own;
* the execution check of a verl-style token-mean loss (its global token count and ``dp_size``
  passed, ``convention="verl"``) at world sizes 2 and 4 with 2 micro-batches, B = 16, T = 64:
  under 20 s wall with the gloo engine (its worker processes started and stopped by the call),
  under 2 s simulated (issue 28).  ``--execution`` prints this figure alone.

"before" is the engine of the commit given with ``--before`` (default: the
commit before streaming), imported from ``git show``; both are timed here, in
turn, best of a few, in CPU seconds of this process (one torch thread), with
the peak resident memory of the process after each streamed case (torch itself is about 300 MiB).  Their numbers agree to 1e-12 where both run.

Run: ``python benchmarks/bench_variants.py [--before COMMIT] [--execution]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
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
from numeric.variants import check_group_advantage, check_loss_execution  # noqa: E402

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

CHECKS: dict[str, Callable] = {
    "check, RLOO, 5 values, G = 64": rloo_advantages,
    "check, z-score, 5 values, G = 64": partial(group_zscore_advantages, eps=0.0),
}


def run_check(name: str) -> None:
    """One checker case in this (fresh) process: prints its CPU seconds, peak MiB and verdict as JSON."""
    torch.set_num_threads(1)
    t0 = time.process_time()
    report = check_group_advantage(CHECKS[name], G=64, rewards=[0, 1, 2, 3, 4])
    print(json.dumps({"cpu": time.process_time() - t0, "peak": own_peak_mib(), "verdict": report.verdict}))


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


def own_peak_mib() -> float:
    """This process's own peak resident memory: Linux's VmHWM (``ru_maxrss`` of a child keeps its parent's peak across exec)."""
    try:
        status = Path("/proc/self/status").read_text().splitlines()
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return peak_mib()


def verl_token_mean(old_log_prob, log_prob, advantages, response_mask, dp_size=1, batch_num_tokens=None):
    """verl's token-mean: the micro-batch's token sum over the mini-batch's token count, times dp_size."""
    ratio = torch.exp(log_prob - old_log_prob)
    per_token = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages)
    count = response_mask.sum() if batch_num_tokens is None else batch_num_tokens
    return (per_token * response_mask).sum() / count * dp_size


def execution_figures(repeats: int) -> None:
    """Wall seconds of the execution check, gloo (processes started and stopped by each call) and simulated, best of ``repeats``."""
    options = {"world_sizes": (2, 4), "micro_batches": (2,), "batch": (16, 64), "convention": "verl"}
    for engine, target in (("gloo", 20.0), ("simulate", 2.0)):
        best, verdict = float("inf"), None
        for _ in range(repeats):
            t0 = time.perf_counter()
            verdict = check_loss_execution(verl_token_mean, engine=engine, **options).verdict
            best = min(best, time.perf_counter() - t0)
        print(f"{'execution, verl token-mean, ' + engine:32s} {best:7.2f}s wall (target < {target:g} s), verdict {verdict}")


_LOSS_CHECK = """
import time
t0 = time.process_time()
import torch
from numeric.variants import check_policy_loss
t1 = time.process_time()
def skyrl_regular(old_log_prob, log_prob, advantages, response_mask):
    ratio = torch.exp((log_prob - old_log_prob).float().clamp(-20, 20)).to(log_prob.dtype)
    per_token = torch.maximum(-ratio * advantages, -ratio.clamp(0.8, 1.2) * advantages)
    return (per_token * response_mask).sum() / response_mask.sum()
rep = check_policy_loss(skyrl_regular)
t2 = time.process_time()
rep32 = check_policy_loss(skyrl_regular, dtype=torch.float32)
t3 = time.process_time()
print(f"{t1 - t0:.2f} {t2 - t1:.2f} {t3 - t2:.2f} {rep.headline()}")
"""


def loss_check_figures() -> None:
    """The checker's time on one loss beside its import (issue 32: under 2 s), a fresh process each, CPU seconds."""
    for run in range(2):
        out = subprocess.run([sys.executable, "-c", _LOSS_CHECK], capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
        print(f"check_policy_loss, SkyRL's float32 PPO (run {run + 1}): import {out[0]} s, first check (float64 inputs) {out[1]} s, "
              f"second (float32) {out[2]} s CPU: {' '.join(out[3:])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the commit whose engine is timed as 'before'")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--check", choices=sorted(CHECKS), help=argparse.SUPPRESS)  # one checker case, in a child process
    parser.add_argument("--execution", action="store_true", help="print the execution check's figure only")
    parser.add_argument("--loss", action="store_true", help="print the policy-loss check's time only")
    args = parser.parse_args()
    if args.check:
        return run_check(args.check)
    if args.execution:
        return execution_figures(args.repeats)
    if args.loss:
        return loss_check_figures()
    torch.set_num_threads(1)
    before = engine_before(args.before)
    now, before_out = {}, {}
    for name, (v, q, G, est) in CASES.items():  # every case now first: the peak memory grows only with the streamed engine
        now[name] = (*timed(partial(group_advantage_weights, v, q, G, est), args.repeats), peak_mib())
    for name, (v, q, G, est) in CASES.items():
        before_out[name] = timed(partial(before, v, q, G, est), args.repeats)
    print(f"{'case':32s} {'before':>10s} {'now':>8s} {'peak MiB now':>13s} {'max |now - before|':>19s}")
    for name in CASES:
        t_now, out, peak = now[name]
        t_before, old = before_out[name]
        diff = f"{float((out - old).abs().max()):.1e}" if isinstance(old, torch.Tensor) else "(before refused)"
        shown = f"{t_before:9.2f}s" if t_before == t_before else f"{'refused':>10s}"
        print(f"{name:32s} {shown} {t_now:7.2f}s {peak:13.0f} {diff:>19s}")
    for name in CHECKS:  # the report a user asks for, each in a fresh process
        out = subprocess.run([sys.executable, __file__, "--check", name], capture_output=True, text=True, check=True).stdout
        got = json.loads(out.splitlines()[-1])
        print(f"{name:32s} {'(not run)':>10s} {got['cpu']:7.2f}s {got['peak']:13.0f} {'verdict ' + got['verdict']:>19s}")
    refused = {old for _, old in before_out.values() if not isinstance(old, torch.Tensor)}
    for message in refused:
        print(f"before: {message}")
    print("before, the checks: the symbolic reduction over 3,832,400 SymPy count patterns (not run: far beyond 10 s)")
    execution_figures(args.repeats)
    loss_check_figures()


if __name__ == "__main__":
    main()
