"""Make every example run the same under ``pytest`` from the repository root.

The tests and doctests run under torch's own default dtype (float32), as a
user's trainer would: every function must choose fp64 itself where it
computes exactly, and follow its input's dtype where it is a batched helper;
only the seed notebooks' test imports the course's float64 default
(:mod:`numeric.course`), and each test starts from float32 again.  Torch uses
one intra-op thread (the tensors here are tiny, and a
thread pool only adds overhead on a small shared machine); numpy prints legacy
scalars (``0.5`` rather than ``np.float64(0.5)``) with 12 digits; matplotlib
draws off-screen; and every test starts from the same seeds.

SymPy's cache of constructed expressions and assumption queries is unbounded
here (``SYMPY_CACHE_SIZE=none``, unless the caller chose a size): its default
of 1,000 entries is far below what one worker's derivations rebuild again and
again, and an unbounded cache took a whole run from 193 to 178 user CPU-s for
some 30 MB more per worker.  The cache only remembers a function's value
(SymPy's own suite runs with it on and off); the subprocesses the tests start
inherit the setting.

Each process that collects tests sets torch and numpy up, and imports the two packages, before it collects;
the xdist controller, which collects and runs nothing, never imports them.
Collection (importing torch, SymPy and every module, building the test
tables) runs without the cyclic garbage collector, and what it built is then
frozen (:func:`gc.freeze`): it lives for the whole session, and the
collections during the tests no longer walk it again and again.  During the
tests a young collection runs every 50,000 allocations rather than every 700:
SymPy allocates millions of short-lived objects, and at CPython's default each
worker ran some 18 full collections over SymPy's growing cache; every cycle is
still collected.  At the end of the session SymPy's cache is cleared before
pytest's own five final collections walk the heap.  Together: 3.9–5.1 s of
collection a worker became 1.9–2.6 s (whole run, timed by :data:`gc.callbacks`).  The chapters'
doctests run first (see :func:`pytest_collection_modifyitems`).
"""

import functools
import gc
import os
import random
import sys
from collections.abc import Callable

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("SYMPY_CACHE_SIZE", "none")  # read once, when SymPy is first imported (below, at collection)


def _set_up_torch_and_numpy() -> None:
    import numpy as np
    import torch

    # the packages first, under their own names: pytest's importlib mode, collecting
    # ``derivations/kernel.py`` alone, would otherwise run the file a second time
    # beside the copy its package imports (two registries of proof kinds)
    import derivations  # noqa: F401
    import numeric  # noqa: F401

    torch.set_num_threads(1)
    np.set_printoptions(precision=12, legacy="1.25")


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    if session.config.pluginmanager.hasplugin("dsession"):  # the xdist controller: its workers collect
        return (yield)
    _set_up_torch_and_numpy()
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.set_threshold(_YOUNG_OBJECTS, *gc.get_threshold()[1:])
        gc.enable()


_YOUNG_OBJECTS = 50_000  # CPython's default is 700


def pytest_sessionfinish(session):
    """SymPy's cache dropped before pytest's last collections: they walk what is left (five times over)."""
    if "sympy" in sys.modules:
        from sympy.core.cache import clear_cache

        clear_cache()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "reads_derivation(source): the test reads verified_derivation(source); it runs on the xdist worker "
        "that builds and verifies that rendered derivation (see _derivation_groups)",
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items):
    """Readers of one rendered derivation on one worker (:func:`_derivation_groups`), and the chapters'
    doctests first (stably): they are the longest single items, and under xdist the last items decide
    how long one worker runs alone after the other has finished."""
    _derivation_groups(items)
    for item in items:
        if item.nodeid in _DOCTEST_GROUPS:
            item.add_marker(pytest.mark.xdist_group(_DOCTEST_GROUPS[item.nodeid]))
    items.sort(key=lambda item: not item.nodeid.startswith("docs/"))


_DOCTEST_GROUPS = {
    # the variants chapter checks the suite's token losses: on the suite's worker, each is derived once
    "docs/variants.rst::variants.rst": "suite variants",
    # five reward values at G = 64: the 814,385 whole groups and their order by key, built once (about 0.9 s)
    "numeric/variants/callables.py::numeric.variants.callables.advantage_coefficients": "five values at G = 64",
}


def _derivation_groups(items) -> None:
    """Each test marked ``reads_derivation(source)`` joins the ``xdist_group`` of the function that
    ``source`` calls (``derivations.m.f`` for ``derivations.m.f(True)``), and so does the docstring
    example of ``derivations.m.f``, which may read any of its calls.

    A rendered derivation is built and verified once per worker (``verified_derivation``); under
    ``--dist loadgroup`` all its readers, its docstring example among them, then run on that worker
    and read the kernel's remembered verdicts.  Scheduling only: nothing asserted changes.
    """
    functions = set()
    for item in items:
        for mark in item.iter_markers("reads_derivation"):
            (source,) = mark.args
            function = source.partition("(")[0]
            item.add_marker(pytest.mark.xdist_group(f"derivation {function}"))
            functions.add(function)
    for item in items:
        if type(item).__name__ == "DoctestItem" and item.name in functions:
            item.add_marker(pytest.mark.xdist_group(f"derivation {item.name}"))


@functools.cache
def _torch_seeder() -> Callable[[], object]:
    """``torch.manual_seed(0)``, or, where torch was built without an accelerator, the one thing it then does.

    ``torch.manual_seed`` also queues a seed for each lazily initialised device (CUDA, XPU, MTIA), and
    queueing formats the caller's stack: from inside a pytest fixture, about 60 frames deep, that costs
    1-4 ms, paid by each of the suite's ~2,800 items.  Without an accelerator the queued seeds can never
    run, so seeding the CPU generator is all that it does.
    """
    import torch

    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if accelerator is not None and accelerator.current_accelerator() is None:
        return functools.partial(torch.default_generator.manual_seed, 0)
    return functools.partial(torch.manual_seed, 0)


@pytest.fixture(autouse=True)
def _deterministic():
    import numpy as np
    import torch

    random.seed(0)
    np.random.seed(0)
    _torch_seeder()()
    torch.set_default_dtype(torch.float32)
    yield
