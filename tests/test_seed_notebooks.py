"""Acceptance: the two seed notebooks run to the end on ``numeric``.

Each notebook is read from ``../shared/seeds`` at test time (never copied into
the project), its helper import replaced by ``import torch`` and the drop-in
``from numeric.course import *``, and executed from a float32 default (the
course module must set float64 itself); every check must pass and the count
must be the notebook's own (28 and 25).
"""

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest
import torch

import numeric

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
HELPER_IMPORT = "from _m1_lib import *"


def notebook_source(stem: str) -> str:
    """The notebook's code: from its first cell marker to its closing ``print("done; ...")``."""
    path = next(SEEDS.glob(f"{stem}_*.txt"))
    text = path.read_text()
    start = text.index("# %% [markdown]")
    end = re.search(r'^print\("done; checks:".*$', text[start:], re.M)
    code = text[start : start + end.end()] + "\n"
    assert code.count(HELPER_IMPORT) == 1
    return code.replace(HELPER_IMPORT, "import torch\nfrom numeric.course import *")


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the course's seed notebooks are not distributed with the package; put them in {SEEDS} to run this acceptance test")
@pytest.mark.parametrize(("stem", "expected"), [("000", 28), ("001", 25)])
def test_seed_notebook_runs_with_every_check_passing(stem, expected):
    code = notebook_source(stem)
    numeric.CHECKS.clear()
    out = io.StringIO()
    sys.modules.pop("numeric.course", None)  # so that the notebook's import runs it again
    torch.set_default_dtype(torch.float32)
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"seed-{stem}", "exec"), {"__name__": f"seed_{stem}"})
    assert len(numeric.CHECKS) == expected, out.getvalue()[-2000:]
    assert all(c.passed for c in numeric.CHECKS)
    assert f"done; checks: {expected}" in out.getvalue()
    assert torch.get_default_dtype() == torch.float64
