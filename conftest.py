"""Make every example run the same under ``pytest`` from the repository root.

The tests and doctests run in the course's environment (:mod:`numeric.course`:
fp64 is torch's default dtype; tests of the batched helpers pass their dtype
explicitly); torch uses one intra-op thread (the tensors here are tiny, and a
thread pool only adds overhead on a small shared machine); numpy prints legacy
scalars (``0.5`` rather than ``np.float64(0.5)``) with 12 digits; matplotlib
draws off-screen; and every test starts from the same seeds.
"""

import os
import random

os.environ.setdefault("MPLBACKEND", "Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import numeric.course  # noqa: E402,F401  (float64 default, as in the course)

torch.set_num_threads(1)
np.set_printoptions(precision=12, legacy="1.25")


@pytest.fixture(autouse=True)
def _deterministic():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    yield
