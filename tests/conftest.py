"""Fixtures shared by the tests."""

import pytest

from numeric import TinyLM


@pytest.fixture(scope="session")
def lm():
    """The seed notebooks' toy LM: V=4, L=4, seed 0 (121 sequences, 160 parameters)."""
    return TinyLM(V=4, L=4, seed=0, scale=1.0)
