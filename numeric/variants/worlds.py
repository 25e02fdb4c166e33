r"""The two engines that run a trainer's loss as it runs: real ranks under torch.distributed, and their simulation.

A *world* of :math:`W` data-parallel ranks receives a list of :class:`Job`\ s —
a global ``[B, T]`` batch, the number :math:`U` of micro-batches per rank, and
what the trainer passes with each micro-batch — and every rank returns the
gradient of its own rows: rank :math:`p` holds the contiguous rows
:math:`[pB/W, (p+1)B/W)`, cut into :math:`U` contiguous micro-batches, and each
micro-batch's loss is differentiated on its own, as ``loss.backward()`` over
:math:`U` accumulation steps adds them up (every token lies in one micro-batch, so
the accumulated gradient of a token is its micro-batch's).  How the ranks'
gradients are then reduced (DDP's mean, or a sum) is the caller's business:
:mod:`~numeric.variants.execution`.

:class:`~numeric.variants.GlooWorld`
    ``size`` worker processes on this machine, rank :math:`p` a process of its own,
    grouped under ``torch.distributed`` with the gloo backend (a TCP store on a
    free port of 127.0.0.1).  A job for :math:`W \le` ``size`` ranks runs on the
    first :math:`W` workers in a process group of its own, so the loss may call
    ``torch.distributed`` itself (``all_reduce`` a token count, as verl's engines
    and TRL do).  Workers are forked from the calling process where the platform
    allows it (Linux), so they start in milliseconds without importing torch again;
    elsewhere they are spawned.  Hold one as a context manager to run several
    checks in one world.  No worker outlives its world: a rank that hangs past the
    timeout, raises, or dies, and an interrupt of the caller, stop every worker
    (they also die with the calling process); the next job starts fresh ones.
:func:`simulate`
    The same jobs in this process, one thread per rank.  While it runs, the
    collectives a loss may call (``is_initialized``, ``get_world_size``,
    ``get_rank``, ``all_reduce``, ``all_gather``, ``broadcast``, ``barrier``, as
    attributes of ``torch.distributed``) are answered by an in-process world of
    threads that meet at a barrier; other threads of the program still reach the
    real functions.  Why threads, and not the global quantities passed in: a loss
    that all-reduces its own count needs the other ranks' counts *when it asks*,
    at whatever point of its computation, and threads give them without knowing
    what the loss will ask.  Limits: a name bound before the run
    (``from torch.distributed import all_reduce`` at import) is not redirected, the
    ``group`` argument is read as the whole world, and a rank that loops forever
    cannot be stopped (the timeout raises, the thread is left to finish): use
    :class:`~numeric.variants.GlooWorld` for a function that may hang.

The function reaches the worker processes by reference: a function defined at
module level in an importable module, or in a file (as ``pg-identities check
FILE.py:FN`` loads it), which each worker loads by its path; a lambda or a
function defined inside another one cannot, and gets a ``TypeError`` (the
simulation takes any callable).

References
----------
PyTorch, ``torch.distributed`` (gloo backend, ``TCPStore``, ``PrefixStore``), https://pytorch.org/docs/stable/distributed.html.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from .trainer_loss import TrainerLoss

__all__ = ["GlooWorld", "Job", "LossSpec", "rank_gradients", "simulate"]

HOST = "127.0.0.1"


@dataclass(frozen=True, eq=False)
class Job:
    """One global batch, cut into ranks and micro-batches: what every rank is handed.

    ``extras[w][m]`` are the keyword arguments the trainer passes with micro-batch ``m``
    of rank ``w``; ``factors[w][m]`` the factor it applies to that micro-batch's loss
    before the backward pass (DeepSpeed's ``1/gas``, SkyRL's ``dp_size``; 1 for most).
    """

    old_log_prob: torch.Tensor
    log_prob: torch.Tensor
    advantages: torch.Tensor
    response_mask: torch.Tensor
    micro_batches: int
    extras: tuple
    factors: tuple


@dataclass(frozen=True, eq=False)
class LossSpec:
    """What builds the :class:`~numeric.variants.trainer_loss.TrainerLoss` in a rank: the function, its names, its fixed arguments."""

    fn: Callable
    names: Mapping | None = None
    fixed: Mapping | None = None

    def loss(self) -> TrainerLoss:
        fn = self.fn.resolve() if isinstance(self.fn, _FileFunction) else self.fn
        return TrainerLoss(fn, self.names, dict(self.fixed or {}))

    def portable(self) -> LossSpec:
        """This spec as it travels to a worker process: the function by reference, everything checked to pickle."""
        spec = LossSpec(_by_reference(self.fn), self.names, self.fixed)
        for name, value in dict(self.fixed or {}).items():
            try:
                pickle.dumps(value)
            except Exception as err:
                raise TypeError(f"the fixed argument {name} must pickle to reach the gloo engine's processes "
                                f"({type(err).__name__}: {err}); use engine='simulate'") from None
        return spec


@dataclass(frozen=True)
class _FileFunction:
    """A module-level function named by its file, for a worker whose ``sys.modules`` lacks the module."""

    path: str
    module: str
    qualname: str

    def resolve(self) -> Callable:
        module = sys.modules.get(self.module)
        if module is None or os.path.abspath(getattr(module, "__file__", "") or "") != self.path:
            folder = os.path.dirname(self.path)
            if folder not in sys.path:
                sys.path.insert(0, folder)  # the file's own imports, as the command's loader allows them
            spec = importlib.util.spec_from_file_location(self.module, self.path)
            if spec is None or spec.loader is None:
                raise TypeError(f"fn's file {self.path} cannot be imported in the worker process")
            module = importlib.util.module_from_spec(spec)
            sys.modules[self.module] = module
            spec.loader.exec_module(module)
        obj: object = module
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        if not callable(obj):
            raise TypeError(f"{self.module}.{self.qualname} in {self.path} is not callable")
        return obj


def _by_reference(fn: Callable):
    """``fn`` itself if pickle can name it, else its file and name; a TypeError if neither reaches another process."""
    try:
        pickle.loads(pickle.dumps(fn))
        return fn
    except Exception:  # noqa: BLE001 - any pickling failure means: not by the module's name
        pass
    qualname = getattr(fn, "__qualname__", "")
    path = getattr(fn, "__globals__", {}).get("__file__")
    if path and qualname and "<" not in qualname:
        return _FileFunction(os.path.abspath(path), fn.__module__, qualname)
    what = "a lambda" if "<lambda>" in qualname else "a function defined inside another function" if "<locals>" in qualname else type(fn).__name__
    raise TypeError(f"fn must reach the gloo engine's worker processes by reference (a function defined at module level in a "
                    f"file or an importable module), got {what}; define it at module level, or use engine='simulate'")


def rank_gradients(loss: TrainerLoss, rank: int, world_size: int, jobs: Sequence[Job]) -> list[torch.Tensor]:
    """For each job, the gradient of rank ``rank``'s rows: each micro-batch's loss (times its factor) differentiated on its own."""
    out = []
    for job in jobs:
        B = job.response_mask.shape[0]
        share, M = B // world_size, job.micro_batches
        per = share // M
        g = torch.zeros((share, *job.response_mask.shape[1:]), dtype=torch.float64)
        for m in range(M):
            rows = slice(rank * share + m * per, rank * share + (m + 1) * per)
            inputs = (job.old_log_prob[rows], job.log_prob[rows], job.advantages[rows], job.response_mask[rows])
            _, gm = loss.grad(*inputs, **job.extras[rank][m])
            g[m * per:(m + 1) * per] = gm * job.factors[rank][m]
        out.append(g)
    return out


# ------------------------------------------------------------------ the gloo world


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this worker when the process that forked it dies (no orphan survives a crash)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def _worker(rank: int, conn, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the caller's to handle: it stops the workers
    _die_with_parent(parent)
    torch.set_num_threads(1)
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    store: dist.TCPStore | None = None
    store_port = None
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not data:
            return
        try:
            world_size, prefix, port, timeout, spec, jobs = pickle.loads(data)
            loss = spec.loss()
            if store is None or port != store_port:
                store = dist.TCPStore(HOST, port, is_master=False, timeout=timedelta(seconds=timeout))
                store_port = port
            if dist.is_initialized():  # a group left by a job that failed here
                dist.destroy_process_group()
            dist.init_process_group("gloo", store=dist.PrefixStore(prefix, store), rank=rank, world_size=world_size,
                                    timeout=timedelta(seconds=timeout))
            # every rank has connected before any computes, and has computed before any tears the group down: a fast
            # rank that closes its sockets while a slow one is still in its handshake fails the slow one's init
            dist.barrier()
        except Exception as err:  # noqa: BLE001 - every error goes back to the caller, named by its rank
            conn.send(("error", type(err).__name__, str(err), traceback.format_exc()))
            continue
        try:
            out = rank_gradients(loss, rank, world_size, jobs)
        except Exception as err:  # noqa: BLE001 - the group is left as it is: closing it would break the other ranks'
            conn.send(("error", type(err).__name__, str(err), traceback.format_exc()))  # waits, and their errors would hide this one
            continue
        conn.send(("result", out))
        try:
            dist.barrier()
            dist.destroy_process_group()
            conn.send(("left", None))
        except Exception as err:  # noqa: BLE001
            conn.send(("error", type(err).__name__, str(err), traceback.format_exc()))


def _stop(procs: list, conns: list, patience: float = 1.0) -> None:
    """Ask every worker to leave, wait ``patience`` seconds, then kill whoever is still there; close the pipes."""
    for conn in conns:
        with contextlib.suppress(Exception):
            conn.send_bytes(b"")
    deadline = time.monotonic() + patience
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(5.0)
    for conn in conns:
        with contextlib.suppress(Exception):
            conn.close()
    procs.clear()
    conns.clear()


def _raised(kind: str, message: str, rank: int, world_size: int, trace: str) -> Exception:
    cls = {"TypeError": TypeError, "ValueError": ValueError}.get(kind, RuntimeError)
    err = cls(f"rank {rank} of {world_size}: {message}" if kind in ("TypeError", "ValueError") else f"rank {rank} of {world_size}: {kind}: {message}")
    err.add_note("the rank's traceback:\n" + trace.rstrip())
    return err


class GlooWorld:
    r"""``size`` worker processes under ``torch.distributed`` (gloo, CPU), held across checks.

    Parameters
    ----------
    size : int
        The number of worker processes: the largest world size it can run.
    timeout : float
        Seconds a job may take before its ranks are declared hung (a ``TimeoutError``)
        and the workers are stopped; a call's own ``timeout`` overrides it.

    Examples
    --------
    The workers start on first use and stop when the ``with`` block ends::

        with GlooWorld(4) as world:
            check_loss_execution(fn_a, engine=world)
            check_loss_execution(fn_b, engine=world)
    """

    def __init__(self, size: int = 4, *, timeout: float = 60.0):
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"size must be an int (the number of ranks), got {type(size).__name__}")
        if size < 1:
            raise ValueError(f"size must be >= 1 (the number of ranks), got {size}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.size, self.timeout = size, float(timeout)
        self._procs: list = []
        self._conns: list = []
        self._store: dist.TCPStore | None = None
        self._jobs = 0
        self._finalizer = weakref.finalize(self, _stop, self._procs, self._conns)

    def __repr__(self) -> str:
        return f"GlooWorld(size={self.size}, {'running' if self.running else 'stopped'})"

    def __enter__(self) -> GlooWorld:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return bool(self._procs) and all(p.is_alive() for p in self._procs)

    @property
    def pids(self) -> tuple[int, ...]:
        """The worker processes' ids (empty while stopped)."""
        return tuple(p.pid for p in self._procs)

    def start(self) -> None:
        """Start the workers (a no-op while they run; a world with a dead worker is restarted)."""
        if self.running:
            return
        if not dist.is_available():
            raise ValueError("engine: this torch build has no torch.distributed; use engine='simulate'")
        self.close()
        methods = multiprocessing.get_all_start_methods()
        ctx: Any = multiprocessing.get_context("fork" if "fork" in methods and sys.platform != "darwin" else "spawn")
        try:
            for rank in range(self.size):
                parent_end, child_end = ctx.Pipe()
                proc = ctx.Process(target=_worker, args=(rank, child_end, os.getpid()), daemon=True, name=f"pg-identities rank {rank}")
                proc.start()
                child_end.close()
                self._procs.append(proc)
                self._conns.append(parent_end)
            self._store = dist.TCPStore(HOST, 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=self.timeout))
        except BaseException:
            self.close()
            raise

    def close(self, patience: float = 1.0) -> None:
        """Stop every worker (waiting up to ``patience`` seconds for them to leave, then killing them)."""
        _stop(self._procs, self._conns, patience)
        self._store = None

    def run(self, spec: LossSpec, world_size: int, jobs: Sequence[Job], timeout: float | None = None) -> list[list[torch.Tensor]]:
        """``out[j][w]``: the gradient of rank ``w``'s rows in job ``j``, the job run on ``world_size`` processes."""
        if world_size > self.size:
            raise ValueError(f"engine: this GlooWorld has {self.size} processes, the check needs {world_size}")
        timeout = self.timeout if timeout is None else timeout
        self.start()
        assert self._store is not None
        self._jobs += 1
        data = pickle.dumps((world_size, f"job{self._jobs}", self._store.port, timeout, spec.portable(), list(jobs)))
        try:
            for rank in range(world_size):
                self._conns[rank].send_bytes(data)
            answers = self._gather(world_size, timeout)
        except BaseException:  # a hang, a rank's error, a dead worker, an interrupt: no worker is left in an unknown state
            self.close(patience=0.0)
            raise
        return [[answers[w][j] for w in range(world_size)] for j in range(len(jobs))]

    def _gather(self, world_size: int, timeout: float) -> list:
        """Each rank's result, then its word that it left the process group; a rank's error, a death or the deadline raise."""
        results: dict[int, list] = {}
        left: set[int] = set()
        conns: dict[Any, int] = {self._conns[r]: r for r in range(world_size)}
        deadline = time.monotonic() + timeout
        while len(left) < world_size:
            remaining = deadline - time.monotonic()
            waiting = [c for c, r in conns.items() if r not in left]
            ready = multiprocessing.connection.wait(waiting, timeout=remaining) if remaining > 0 else []
            if not ready:
                missing = [r for r in range(world_size) if r not in results] or [r for r in range(world_size) if r not in left]
                what = "did not finish" if len(results) < world_size else "did not leave the process group"
                raise TimeoutError(f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of {world_size} {what} "
                                   f"within {timeout:g} s (does fn hang, or wait in a collective the other ranks never call?); "
                                   "the worker processes were stopped")
            for conn in ready:
                rank = conns[conn]
                assert isinstance(conn, multiprocessing.connection.Connection)
                try:
                    answer = conn.recv()
                except (EOFError, OSError):
                    code = self._procs[rank].exitcode
                    raise RuntimeError(f"rank {rank} of {world_size}: the worker process died (exit code {code})") from None
                if answer[0] == "error":
                    raise _raised(answer[1], answer[2], rank, world_size, answer[3])
                if answer[0] == "result":
                    results[rank] = answer[1]
                else:
                    left.add(rank)
        return [results[r] for r in range(world_size)]


# ------------------------------------------------------------------ the simulation


class _Aborted(RuntimeError):
    pass


_local = threading.local()
_patch_lock = threading.Lock()
_SIMULATED = ("is_initialized", "get_world_size", "get_rank", "all_reduce", "all_gather", "broadcast", "barrier")


class _ThreadWorld:
    """Ranks as threads: each collective is one exchange of every rank's value at a barrier."""

    def __init__(self, size: int, timeout: float):
        self.size = size
        self._barrier = threading.Barrier(size, timeout=timeout)
        self._slots: list = [None] * size

    def abort(self) -> None:
        self._barrier.abort()

    def _exchange(self, value) -> list:
        self._slots[_local.rank] = value
        try:
            self._barrier.wait()
            values = list(self._slots)
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise _Aborted("the simulated world was stopped (another rank failed, or the timeout passed)") from None
        return values

    def is_initialized(self) -> bool:
        return True

    def get_world_size(self, group=None) -> int:
        return self.size

    def get_rank(self, group=None) -> int:
        return _local.rank

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        values = torch.stack(self._exchange(tensor.detach().clone()))
        ops = {dist.ReduceOp.SUM: lambda v: v.sum(0), dist.ReduceOp.AVG: lambda v: v.mean(0), dist.ReduceOp.PRODUCT: lambda v: v.prod(0),
               dist.ReduceOp.MAX: lambda v: v.amax(0), dist.ReduceOp.MIN: lambda v: v.amin(0)}
        reduce = next((f for known, f in ops.items() if op == known), None)
        if reduce is None:
            raise ValueError(f"the simulated world reduces with SUM, AVG, PRODUCT, MAX or MIN, got {op}")
        with torch.no_grad():
            tensor.copy_(reduce(values))
        return _Done() if async_op else None

    def all_gather(self, tensor_list, tensor, group=None, async_op=False):
        values = self._exchange(tensor.detach().clone())
        with torch.no_grad():
            for out, value in zip(tensor_list, values):
                out.copy_(value)
        return _Done() if async_op else None

    def broadcast(self, tensor, src, group=None, async_op=False):
        values = self._exchange(tensor.detach().clone())
        with torch.no_grad():
            tensor.copy_(values[src])
        return _Done() if async_op else None

    def barrier(self, group=None, async_op=False, device_ids=None):
        self._exchange(None)
        return _Done() if async_op else None


class _Done:
    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _redirect(name: str, original: Callable) -> Callable:
    def call(*args, **kwargs):
        world = getattr(_local, "world", None)
        return original(*args, **kwargs) if world is None else getattr(world, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


@contextlib.contextmanager
def _simulated_distributed():
    """``torch.distributed``'s collectives answered by the calling thread's simulated world (if any), for the duration."""
    if not dist.is_available():  # nothing to redirect: a loss that calls torch.distributed fails as it would anywhere
        yield
        return
    modules = (dist, dist.distributed_c10d)
    with _patch_lock:
        saved = [(module, name, getattr(module, name)) for module in modules for name in _SIMULATED]
        for module, name, original in saved:
            setattr(module, name, _redirect(name, original))
        try:
            yield
        finally:
            for module, name, original in saved:
                setattr(module, name, original)


def simulate(spec: LossSpec, world_size: int, jobs: Sequence[Job], timeout: float = 60.0) -> list[list[torch.Tensor]]:
    """The same as :meth:`~numeric.variants.GlooWorld.run`, computed in this process: one thread per rank, collectives simulated."""
    loss = spec.loss()
    world = _ThreadWorld(world_size, timeout)
    results: list = [None] * world_size
    errors: list[tuple[int, BaseException]] = []
    record = threading.Lock()

    def rank_main(rank: int) -> None:
        _local.world, _local.rank = world, rank
        try:
            results[rank] = rank_gradients(loss, rank, world_size, jobs)
        except BaseException as err:  # noqa: BLE001 - the first error is the caller's; the others are its echo
            with record:
                errors.append((rank, err))
            world.abort()
        finally:
            del _local.world

    with _simulated_distributed():
        threads = [threading.Thread(target=rank_main, args=(r,), daemon=True, name=f"pg-identities simulated rank {r}") for r in range(world_size)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, thread in enumerate(threads) if thread.is_alive()]
        if hung:
            world.abort()
            raise TimeoutError(f"simulated rank{'s' if len(hung) > 1 else ''} {', '.join(map(str, hung))} of {world_size} did not finish "
                               f"within {timeout:g} s (does fn hang?); a thread cannot be stopped: use the gloo engine for such a function")
    if errors:
        rank, err = errors[0]
        kind = type(err).__name__
        raise _raised(kind, str(err), rank, world_size, "".join(traceback.format_exception(err))) from err
    return [[results[w][j] for w in range(world_size)] for j in range(len(jobs))]
