"""The root conftest's promise: every test starts from the same seeds and from torch's float32 default."""

import random

import numpy as np
import pytest
import torch


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_starts_from_seed_0(run):
    """Both runs see the seeded streams, whichever runs first: each then draws and changes the dtype, and the next starts afresh."""
    assert torch.get_default_dtype() == torch.float32
    drawn = torch.rand(4, dtype=torch.float64)
    assert torch.equal(drawn, torch.rand(4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    assert np.random.random() == np.random.RandomState(0).random_sample()
    assert random.random() == random.Random(0).random()
    torch.set_default_dtype(torch.float64)



def test_sympy_cache_is_as_the_environment_says_unbounded_by_default():
    """The root conftest sets SYMPY_CACHE_SIZE before SymPy is first imported; set after it, it would do nothing and
    every cached SymPy function would keep SymPy's default of 1,000 entries."""
    import os

    from sympy.core.cache import CACHE

    size = os.environ["SYMPY_CACHE_SIZE"]
    expected = None if size.lower() == "none" else int(size)
    assert CACHE and {f.cache_info().maxsize for f in CACHE} == {expected}


def test_young_collections_run_every_50000_allocations_and_collection_built_nothing_collectable():
    """The root conftest froze what collection built and raised the young generation's threshold from CPython's 700
    (SymPy's short-lived objects otherwise force full collections over its cache again and again)."""
    import gc

    assert gc.isenabled() and gc.get_threshold()[0] == 50_000
    assert gc.get_freeze_count() > 100_000  # torch, SymPy, the package and the test tables


def test_only_the_plugins_the_suite_uses_are_loaded(pytestconfig):
    """pyproject's addopts: no plugin autoloaded (hypothesis was rewritten for asserts in every worker), no log capture
    around each phase of each test (no test reads log records), no cache of the last failures; xdist named."""
    plugins = pytestconfig.pluginmanager
    assert pytestconfig.known_args_namespace.disable_plugin_autoload
    assert not plugins.has_plugin("logging") and not plugins.has_plugin("cacheprovider")
    assert not plugins.has_plugin("hypothesispytest")


def test_every_doctest_group_names_an_example_that_exists():
    """The root conftest puts some examples in a test group by node id: a renamed or moved example would leave its
    group silently (nothing fails, the shared work is done twice), so each id must name a file or function with an example."""
    import importlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("root_conftest", root / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    assert len(conftest._DOCTEST_GROUPS) >= 2
    for nodeid in conftest._DOCTEST_GROUPS:
        path, _, name = nodeid.partition("::")
        if path.endswith(".rst"):
            assert name == Path(path).name and ">>> " in (root / path).read_text(), nodeid
            continue
        module, _, function = name.rpartition(".")
        assert module == path.removesuffix(".py").replace("/", "."), nodeid
        assert ">>> " in getattr(importlib.import_module(module), function).__doc__, nodeid


@pytest.mark.xdist_group("scheduling")
def test_a_test_group_reaches_the_scheduler(request):
    """Under the suite's ``--dist loadgroup`` xdist groups a test by a suffix ``@group`` on its node id.  pytest 9.2 keeps
    the node id elsewhere, and xdist 3.8's suffix then never reaches the scheduler: every group is silently split over the
    workers (the gloo world of tests/test_execution.py started twice, the trainer table computed twice), about a fifth
    more CPU and nothing failing.  pyproject pins pytest below 9.2 until xdist follows."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not an xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@scheduling")
