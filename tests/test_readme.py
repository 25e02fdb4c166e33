"""The package as a reader meets it: the README's example runs as written, the license is there, the sources compile cleanly."""

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", README, re.S | re.M)


def test_the_readme_has_a_short_python_example():
    assert len(PYTHON_BLOCKS) == 1
    code_lines = [line for line in PYTHON_BLOCKS[0].splitlines() if line.strip()]
    assert len(code_lines) <= 6


@pytest.mark.parametrize("code", PYTHON_BLOCKS)
def test_readme_python_block_runs_as_written(code, tmp_path):
    # a fresh interpreter outside the repository: no conftest, torch's own default dtype; it imports this checkout
    # (not whichever tree the editable install points at)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    promised = re.search(r"The last line prints `([^`]*)`", README).group(1)
    assert result.stdout.rstrip().splitlines()[-1] == promised
    assert result.stdout.startswith("\\begin{aligned}")


def test_the_license_the_package_declares_is_there():
    root = Path(__file__).resolve().parents[1]
    assert 'license = "MIT"' in (root / "pyproject.toml").read_text()
    assert (root / "LICENSE").read_text().startswith("MIT License")


def test_every_source_compiles_without_a_warning():
    """Catches an invalid escape such as ``\\s`` in a docstring that is not raw (LaTeX in a docstring needs ``r\"\"\"``)."""
    root = Path(__file__).resolve().parents[1]
    sources = [p for d in ("numeric", "derivations", "benchmarks", "tests", "docs") for p in (root / d).rglob("*.py")]
    assert len(sources) > 30
    for path in sources:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(path.read_text(), str(path), "exec")
