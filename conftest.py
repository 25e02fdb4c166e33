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
"""

import os
import random

os.environ.setdefault("MPLBACKEND", "Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)
np.set_printoptions(precision=12, legacy="1.25")


@pytest.fixture(autouse=True)
def _deterministic():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float32)
    yield
