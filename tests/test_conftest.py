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
