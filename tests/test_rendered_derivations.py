"""Every derivation the chapters render verifies, and every one of its steps is sound.

Soundness is tested the sceptic's way: each step verifies on its own under the
derivation's unfold and premises, and then each displayed right-hand side in turn
is made false (``rhs + δ`` for ``=``, ``≥``, ``>``; ``rhs − δ`` for ``≤``, ``<``;
``¬rhs`` for ``⇔``, δ a fresh positive symbol), and the step must then fail to
verify; only a :class:`~derivations.DerivationError` counts as a rejection.  A
step that still verifies was checked against something other than what the page
shows.
"""

import re
from pathlib import Path

import pytest
import sympy as sp

from derivations import Derivation, DerivationError

DOCS = Path(__file__).resolve().parent.parent / "docs"
_DIRECTIVE = re.compile(r"^\s*\.\. derivation::\s*(.+?)\s*$", re.MULTILINE)


def rendered_sources() -> list[str]:
    """The call of every ``.. derivation::`` directive in the chapters, in page order."""
    found = []
    for page in sorted(DOCS.glob("*.rst")):
        found += [m.group(1) for m in _DIRECTIVE.finditer(page.read_text(encoding="utf-8"))]
    return list(dict.fromkeys(found))


SOURCES = rendered_sources()
# the readers of a source on one xdist worker (``--dist loadgroup``), so the derivation is built and verified once
GROUPED = [pytest.param(s, marks=pytest.mark.reads_derivation(s)) for s in SOURCES]
DELTA = sp.Symbol("delta_perturbation", positive=True)


def test_the_chapters_render_derivations():
    assert len(SOURCES) >= 40


@pytest.mark.parametrize("source", GROUPED)
def test_rendered_derivation_verifies(source, verified_derivation):
    assert verified_derivation(source).verified


def _rejected(step, d: Derivation) -> bool:
    """The kernel rejects ``step`` under the derivation's unfold and premises; only a DerivationError counts as a rejection."""
    try:
        return step.verify(d.unfold, d.premises) is None
    except DerivationError:
        return True


@pytest.mark.parametrize("source", GROUPED)
def test_every_perturbed_step_fails(source, verified_derivation):
    d = verified_derivation(source)  # raises DerivationError, naming the step, unless every unperturbed step verifies on its own
    assert d.verified and all(st.proved_by for st in d.steps)
    survivors = [
        f"step {i} ({st.reason})"
        for i, st in enumerate(d.steps, 1)
        if not _rejected(st.perturbed(DELTA), d)
    ]
    assert not survivors, f"{source}: these steps verify with a false right-hand side: {survivors}"


def test_a_rejection_for_another_reason_is_not_counted():
    """A step that raises TypeError while being checked is an error of the test, not a rejection."""

    class Broken(sp.Function):
        def doit(self, **hints):
            raise TypeError("not a rejection")

    x = sp.Symbol("x")
    d = Derivation("broken", start=Broken(x)).then(x, "a step that cannot be checked")
    with pytest.raises(TypeError, match="not a rejection"):
        _rejected(d.steps[0], d)


def test_incremental_build_reverifies_an_edited_module(tmp_path):
    """Break a derivation module between two builds into the same folder: the second build fails."""
    import os
    import subprocess
    import sys
    import textwrap
    import time

    (tmp_path / "topic_demo.py").write_text(textwrap.dedent('''
        import sympy as sp
        from derivations import Derivation
        x = sp.Symbol("x")
        def square():
            return Derivation("square", start=(x + 1) ** 2).then(x**2 + 2 * x + 1, "binomial formula")
    '''))
    (tmp_path / "conf.py").write_text(textwrap.dedent(f'''
        import sys
        sys.path[:0] = [{str(tmp_path)!r}, {str(DOCS / "_ext")!r}, {str(DOCS.parent)!r}]
        extensions = ["derivation_directive"]
    '''))
    (tmp_path / "index.rst").write_text("Demo\n====\n\n.. derivation:: topic_demo.square()\n")
    build = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(tmp_path), str(tmp_path / "_build")]
    first = subprocess.run(build, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    module = tmp_path / "topic_demo.py"
    module.write_text(module.read_text().replace("x**2 + 2 * x + 1", "x**2 + x + 1"))
    later = time.time() + 2
    os.utime(module, (later, later))
    second = subprocess.run(build, capture_output=True, text=True)
    assert second.returncode != 0
    assert "does not hold" in second.stderr


def test_computed_tables_split_into_cells_at_top_level_only():
    """A Piecewise inside a cell carries its own ``&`` and ``\\\\``: the table directive must not split there."""
    import sys

    sys.path.insert(0, str(DOCS / "_ext"))
    from derivation_directive import _array_rows

    from derivations.losses import TABLE_FORMS, loss_table
    from numeric.losses import TRAINER_MODES, trainer_table

    trainers = _array_rows(trainer_table())
    assert len(trainers) == len(TRAINER_MODES) + 1 and {len(r) for r in trainers} == {5}
    losses = _array_rows(loss_table())
    assert len(losses) == len(TABLE_FORMS) + 3 and {len(r) for r in losses} == {5}
    assert any(r"\begin{cases}" in cell for row in losses for cell in row)
    with pytest.raises(ValueError, match="unequal"):
        _array_rows(r"\begin{array}{ll} a & b \\ c \end{array}")
