"""The trainer losses at training size: batched vs a naive token loop vs the shortest torch expression.

Prints figures; it is not a test.  At B = 64, T = 1024 (65,536 tokens, a
quarter of them padding), forward + backward of every method of
:func:`numeric.policy_loss`, in fp32 and fp64, on this machine's CPU (or
``--device cuda``).  Times are the best of ``--repeats`` runs, the compared
functions taking turns:

* ``batched``: :func:`numeric.policy_loss` on a clean batch (finite padding:
  its product path);
* ``shortest``: the shortest hand-written torch expression of the same
  formula (no input checks, no padding guard); target: batched within 1.5x;
* ``guarded``: that expression made safe for ``-inf`` padding (masked
  log-probs replaced by 0 with ``torch.where`` first), still without input
  checks: what the padding guarantee alone costs, so the rest of the gap is
  the input checks (0/1 mask, finite values, shapes);
* ``-inf pad``: :func:`numeric.policy_loss` with ``-inf`` in the padding of
  ``log_prob`` (its careful ``torch.where`` path, taken after the product
  path's witness turns NaN);
* ``naive``: the same loss written token by token in Python (one autograd
  node per scalar operation), timed on a slice of 2 rows and scaled to the
  batch by the number of tokens (the loop is linear in them); target: the
  batched loss at least 1000x faster;
* ``peak``: the most memory allocated at once during forward + backward,
  above what was live before (the inputs): on CUDA from
  ``torch.cuda.max_memory_allocated``, on a CPU from the profiler's
  allocation timeline; for the batched loss and the shortest expression;
* ``saved``: bytes of tensors autograd keeps between forward and backward
  (what a trainer holds per loss).

Run: ``python benchmarks/bench_losses.py [--device cuda] [--repeats 30]``
"""

import argparse
import time

import torch

from derivations.methods import METHODS
from numeric import POLICY_LOSSES, policy_loss

B, T = 64, 1024
EPS = (0.2, 0.28)


def _clip(method):
    """eps_low, eps_high for the methods that take them (the registry lists each method's parameters)."""
    return {k: v for k, v in zip(("eps_low", "eps_high"), EPS) if k in METHODS[method].parameters}


def _selected(method, like):
    """Clip-Cov's and KL-Cov's selection: every seventh token (any fixed mask times the same work)."""
    if method not in ("clip_cov", "kl_cov"):
        return {}
    return {"selected": (torch.arange(like.numel(), device=like.device).reshape(like.shape) % 7) == 0}


def batch(dtype, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(T // 2, T + 1, (B,), generator=gen)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(dtype)
    old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3 - 0.1
    lp = old + 0.3 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    A = torch.randn(B, generator=gen, dtype=torch.float64)
    return [x.to(device=device, dtype=dtype) for x in (lp, old, A, mask)]


def shortest(method, lp, old, A, m):
    """The formula in as few torch calls as it takes (token-mean, or per-row means for the sequence methods)."""
    At = A[:, None]
    if method in ("reinforce", "gpg"):
        return -(At * lp * m).sum() / m.sum()
    r = (lp - old).exp()
    if method == "ppo":
        return -(torch.min(r * At, r.clamp(0.8, 1.28) * At) * m).sum() / m.sum()
    if method == "cispo":
        return -(r.clamp(0.8, 1.28).detach() * At * lp * m).sum() / m.sum()
    if method == "is":
        return -(r.detach() * At * lp * m).sum() / m.sum()
    if method == "sapo":
        tau = torch.where(At > 0, 1.0, 1.05).to(lp)
        return -(torch.sigmoid(tau * (r - 1)) * 4 / tau * At * m).sum() / m.sum()
    if method in ("clip_cov", "kl_cov"):
        sel = _selected(method, lp)["selected"].to(lp)
        if method == "clip_cov":
            return (torch.max(-At * r, -At * r.clamp(0.8, 1.28)) * (1 - sel) * m).sum() / m.sum()
        return ((-At * r + sel * (lp - old).abs()) * m).sum() / m.sum()
    n = m.sum(1, keepdim=True)
    if method == "vespo":
        log_W = ((lp - old) * m).sum(1, keepdim=True).detach()
        k, lam = torch.where(At >= 0, 2.0, 3.0).to(lp), torch.where(At >= 0, 3.0, 2.0).to(lp)
        return -((lam + k * log_W - lam * log_W.exp()).exp() * At * lp * m).sum() / m.sum()
    log_s = ((lp - old) * m).sum(1, keepdim=True) / n
    if method == "cispo_seq":
        return -(log_s.exp().clamp(0.8, 1.28).detach() * At * lp * m).sum() / m.sum()
    if method == "sapo_seq":
        tau = torch.where(At > 0, 1.0, 1.05).to(lp)
        return -(torch.sigmoid(tau * (log_s.exp() - 1)) * 4 / tau * At).mean()
    if method == "gspo":
        s = log_s.exp()
        return -((torch.min(s * At, s.clamp(0.8, 1.28) * At) * m).sum(1, keepdim=True) / n).mean()
    if method == "gspo_token":
        s = (log_s.detach() + lp - lp.detach()).exp()
        return -((torch.min(s * At, s.clamp(0.8, 1.28) * At) * m).sum(1, keepdim=True) / n).mean()
    d = lp - old  # gmpo
    sg = torch.sign(At)
    dm = sg * torch.min(sg * d, sg * d.clamp(-0.4, 0.4))
    return -(At[:, 0] * ((dm * m).sum(1) / n[:, 0]).exp()).mean()


def guarded(method, lp, old, A, m):
    """The shortest expression on inputs whose masked slots are replaced by 0 (as ``-inf`` padding requires)."""
    keep = m.bool()
    zero = lp.new_zeros(())
    return shortest(method, torch.where(keep, lp, zero), torch.where(keep, old, zero), A, m)


def naive(method, lp, old, A, m):
    """Token by token in Python scalars (the kind of loop a notebook starts with)."""
    rows, cols = lp.shape
    total, count = 0.0, float(m.sum())
    for i in range(rows):
        toks = [t for t in range(cols) if m[i, t] > 0]
        if method in ("cispo_seq", "vespo", "sapo_seq"):
            deltas = sum(lp[i, t] - old[i, t] for t in toks)
            if method == "sapo_seq":
                tau, s = (1.0 if A[i] > 0 else 1.05), torch.exp(deltas / len(toks))
                total = total - torch.sigmoid(tau * (s - 1)) * 4 / tau * A[i] / rows
                continue
            if method == "cispo_seq":
                w = torch.exp(deltas / len(toks)).clamp(0.8, 1.28).detach()
            else:
                k, lam = (2.0, 3.0) if A[i] >= 0 else (3.0, 2.0)
                w = (torch.exp(deltas) ** k * torch.exp(lam * (1 - torch.exp(deltas)))).detach()
            for t in toks:
                total = total - w * A[i] * lp[i, t] / count
            continue
        if method in ("gspo", "gspo_token", "gmpo"):
            n = len(toks)
            deltas = [lp[i, t] - old[i, t] for t in toks]
            if method == "gmpo":
                s = 1.0 if A[i] > 0 else -1.0
                deltas = [s * torch.minimum(s * d, s * d.clamp(-0.4, 0.4)) for d in deltas]
                total = total - A[i] * torch.exp(sum(deltas) / n) / rows
                continue
            s = torch.exp(sum(deltas) / n)
            for t in toks:
                st = s.detach() * torch.exp(lp[i, t] - lp[i, t].detach()) if method == "gspo_token" else s
                total = total - torch.minimum(st * A[i], st.clamp(0.8, 1.28) * A[i]) / (rows * n)
            continue
        for t in toks:
            r = torch.exp(lp[i, t] - old[i, t])
            chosen = method in ("clip_cov", "kl_cov") and (i * cols + t) % 7 == 0
            if method in ("ppo", "clip_cov"):
                piece = -torch.minimum(r * A[i], r.clamp(0.8, 1.28) * A[i]) * (0.0 if chosen else 1.0)
            elif method == "kl_cov":
                piece = -r * A[i] + (torch.abs(lp[i, t] - old[i, t]) if chosen else 0.0)
            elif method == "cispo":
                piece = -r.clamp(0.8, 1.28).detach() * A[i] * lp[i, t]
            elif method == "is":
                piece = -r.detach() * A[i] * lp[i, t]
            elif method == "sapo":
                tau = 1.0 if A[i] > 0 else 1.05
                piece = -torch.sigmoid(tau * (r - 1)) * 4 / tau * A[i]
            else:
                piece = -A[i] * lp[i, t]
            total = total + piece / count
    return total


def fwd_bwd(fn, lp, *rest):
    x = lp.detach().clone().requires_grad_(True)
    loss = fn(x, *rest)
    loss.backward()
    return x.grad


def timed(fns, repeats, sync):
    """Best wall time of each function, the functions taking turns so that drift in the machine's load hits all alike."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def saved_bytes(fn, lp, *rest):
    """Bytes of distinct tensors autograd saves for backward."""
    seen = {}

    def pack(t):
        seen[(t.data_ptr(), t.dtype, tuple(t.shape))] = t.numel() * t.element_size()
        return t

    x = lp.detach().clone().requires_grad_(True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x, *rest)
    return sum(seen.values())


def peak_bytes(fn, lp, device):
    """The most bytes allocated at once while ``fwd_bwd(fn, lp)`` runs, above what was live before."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fwd_bwd(fn, lp)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fwd_bwd(fn, lp)
    try:  # the allocation timeline: +bytes at each allocation, -bytes at each free
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    except AttributeError:  # a torch without this (private) view of the trace
        return float("nan")
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(f"B = {B}, T = {T}, device {device}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'':<20} {'batched':>7} {'shortest':>8} {'':>5} {'guarded':>7} {'':>5} {'-inf pad':>8} {'naive s':>8} {'':>6} "
          f"{'peak MiB':>15} {'saved':>5}")
    print(f"{'method':<11} {'dtype':<8} {'ms':>7} {'ms':>8} {'ratio':>5} {'ms':>7} {'ratio':>5} {'ms':>8} {'(scaled)':>8} {'speed':>6} "
          f"{'batched':>7} {'short':>7} {'MiB':>5}  grad gap")
    worst = {}
    for dtype in (torch.float32, torch.float64):
        lp, old, A, m = batch(dtype, device)
        lp_inf = torch.where(m > 0, lp, -torch.inf)
        for method in POLICY_LOSSES:
            ours = lambda x, o=old, a=A, mk=m, meth=method: policy_loss(meth, x, o, a, mk, **_clip(meth), **_selected(meth, x))  # noqa: E731
            short = lambda x, o=old, a=A, mk=m, meth=method: shortest(meth, x, o, a, mk)  # noqa: E731
            safe = lambda x, o=old, a=A, mk=m, meth=method: guarded(meth, x, o, a, mk)  # noqa: E731
            runs = [lambda f=f, x=lp: fwd_bwd(f, x) for f in (ours, short, safe)] + [lambda f=ours, x=lp_inf: fwd_bwd(f, x)]
            t_ours, t_short, t_safe, t_inf = timed(runs, args.repeats, sync)
            gap = float((fwd_bwd(ours, lp) - fwd_bwd(short, lp)).abs().max())
            rows = 2  # the naive loop on a slice of two rows, scaled by tokens
            sl = [x[:rows].cpu() for x in (lp, old, A, m)]
            t0 = time.perf_counter()
            fwd_bwd(lambda x, meth=method, rest=sl[1:]: naive(meth, x, *rest), sl[0])
            t_naive = (time.perf_counter() - t0) * float(m.sum()) / float(sl[3].sum())
            peak_ours, peak_short = (peak_bytes(f, lp, device) / 2**20 for f in (ours, short))
            mib = saved_bytes(ours, lp) / 2**20
            worst[method] = max(worst.get(method, 0.0), t_ours / t_short)
            print(
                f"{method:<11} {str(dtype).removeprefix('torch.'):<8} {1e3 * t_ours:>7.2f} {1e3 * t_short:>8.2f} {t_ours / t_short:>5.2f} "
                f"{1e3 * t_safe:>7.2f} {t_ours / t_safe:>5.2f} {1e3 * t_inf:>8.2f} {t_naive:>8.1f} {t_naive / t_ours:>6.0f} "
                f"{peak_ours:>7.1f} {peak_short:>7.1f} {mib:>5.1f}  {gap:.1e}"
            )
    within = [m for m, r in worst.items() if r <= 1.5]
    print(f"within 1.5x of the shortest expression in both dtypes: {len(within)}/{len(worst)} ({', '.join(within)})")


if __name__ == "__main__":
    main()
