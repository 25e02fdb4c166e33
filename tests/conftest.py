"""Fixtures shared by the tests."""

import pytest

from numeric import TinyLM


@pytest.fixture(scope="session")
def lm():
    """The seed notebooks' toy LM: V=4, L=4, seed 0 (121 sequences, 160 parameters)."""
    return TinyLM(V=4, L=4, seed=0, scale=1.0)


@pytest.fixture(scope="session")
def fails_to_verify():
    """``fails_to_verify(d)``: True when the derivation ``d`` raises :class:`derivations.DerivationError` on ``verify()``."""
    from derivations import DerivationError

    def fails(d) -> bool:
        try:
            d.verify()
        except DerivationError:
            return True
        return False

    return fails
