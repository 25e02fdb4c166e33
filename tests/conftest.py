"""Fixtures shared by the tests."""

import functools
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def lm():
    """The seed notebooks' toy LM: V=4, L=4, seed 0 (121 sequences, 160 parameters)."""
    from numeric import TinyLM  # here, not at the top: the xdist controller loads this file and runs no test

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


DOCS = Path(__file__).resolve().parent.parent / "docs"


@functools.cache
def _verified(source: str):
    if str(DOCS / "_ext") not in sys.path:
        sys.path.insert(0, str(DOCS / "_ext"))
    from derivation_directive import _call

    from derivations import Derivation

    d = _call(source)
    assert isinstance(d, Derivation), f"{source} returned {type(d).__name__}"
    return d.verify()


@pytest.fixture(scope="session")
def verified_derivation():
    """``verified_derivation(source)``: the derivation a chapter's ``.. derivation:: source`` renders, built and verified once per worker.

    ``source`` is the directive's call (``derivations.trust_region.tv_bound()``), evaluated as the
    directive evaluates it.  ``verify`` runs ``step.verify(d.unfold, d.premises)`` on every step and
    raises a :class:`~derivations.DerivationError` naming the first that fails, so a returned derivation
    is one whose every unperturbed step verifies (a raise is not cached: the next reader builds again
    and raises again).  Readers share the object and must not change it (``replaced`` and
    ``perturbed`` return copies).  A test that reads ``source`` carries the mark
    ``reads_derivation(source)`` (root ``conftest.py`` makes it an ``xdist_group``), so that under ``--dist loadgroup`` all its readers (the
    rendered-derivation tests and the topic tests) share one worker, one build and the kernel's
    remembered verdicts.
    """
    return _verified


@functools.cache
def _suite_once(name: str) -> tuple:
    from numeric import run_suites

    checks, errors = run_suites([name])
    return tuple(checks), tuple(errors.items())


@pytest.fixture(scope="session")
def suite_run():
    """``suite_run(name)``: ``(checks, errors)`` of one registered suite, as ``run_suites([name])`` returns them.

    Each suite runs once per worker, however many tests read it; every call hands out a
    fresh list and dict.  A test that reads a suite carries the mark ``xdist_group("suite <name>")``
    so that, under ``--dist loadgroup``, all its readers share one worker.
    """

    def run(name: str) -> tuple[list, dict]:
        checks, errors = _suite_once(name)
        return list(checks), dict(errors)

    return run


class _Outline(HTMLParser):
    """What a report's HTML holds: each element's tag and class, the header cells, the text."""

    def __init__(self):
        super().__init__()
        self.tags, self.th, self.text, self._in_th = [], [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs).get("class")))
        self._in_th = tag == "th"

    def handle_endtag(self, tag):
        self._in_th = False

    def handle_data(self, data):
        if data.strip():
            self.text.append(data)
        if self._in_th:
            self.th.append(data)



@pytest.fixture(scope="session")
def html_outline():
    """``html_outline(page)``: the tags and classes, header cells and text of a report's HTML."""

    def outline(page: str) -> _Outline:
        out = _Outline()
        out.feed(page)
        out.close()
        return out

    return outline
