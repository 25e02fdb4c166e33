"""The layers point down: derivations is SymPy only, and no module reaches into another's private names.

Three checks, from the strongest to the most local:

* every module of ``derivations`` imports in a fresh interpreter in which
  ``torch``, ``numpy`` and ``numeric`` cannot be imported at all;
* no file under ``derivations/`` names ``numeric``, ``torch`` or ``numpy`` in an
  import statement or an ``importlib.import_module``/``__import__`` call, lazy
  (inside a function) or not;
* no module of ``derivations`` or ``numeric`` imports a ``_private`` name from
  another module or reads ``module._private`` (a package's own private helper
  modules, such as ``numeric._validate``, may be imported; their private
  names may not), and no module of ``numeric`` reads a derivation's
  steps by position (``.steps[k]``).

Offenders outside the variant checker are listed in ``KNOWN`` as strict xfails
with the reason, for the lead to route: an entry fails once its file is clean,
so the list cannot go stale.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("derivations", "numeric")
FORBIDDEN_IN_DERIVATIONS = ("numeric", "torch", "numpy")


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    """The module an ``ImportFrom`` names, with relative imports resolved against ``path``."""
    if not node.level:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _is_project_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return dotted.split(".")[0] in PACKAGES and (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file())


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once per process (the scans only read it)."""
    return ast.parse(path.read_text())


def _tree(path: Path, source: str | None) -> ast.Module:
    return _parsed(path) if source is None else ast.parse(source)


def imported_modules(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """``(line, module)`` for every import statement and every ``import_module``/``__import__`` call with a literal name."""
    out = []
    for node in ast.walk(_tree(path, source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, path)
            out += [(node.lineno, module)] + [(node.lineno, f"{module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                out.append((node.lineno, node.args[0].value))
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reaches(path: Path, source: str | None = None) -> list[str]:
    """Every ``from M import _name`` and ``m._name`` (``m`` an imported project module) in ``path``; ``.steps[k]`` outside derivations."""
    outside_derivations = path.relative_to(ROOT).parts[0] != "derivations"
    modules, found, private_reads = set(), [], []  # a read counts once every import is known: one walk
    for node in ast.walk(_tree(path, source)):
        if isinstance(node, ast.Import):
            modules |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in PACKAGES}
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, path)
            if module.split(".")[0] not in PACKAGES:
                continue
            for a in node.names:
                if _private(a.name) and not _is_project_module(f"{module}.{a.name}"):
                    found.append(f"line {node.lineno}: from {module} import {a.name}")
                if _is_project_module(f"{module}.{a.name}"):
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            private_reads.append((node.lineno, node.value.id, node.attr))
        elif (outside_derivations and isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Attribute) and node.value.attr == "steps"):
            found.append(f"line {node.lineno}: .steps[...] read by position")
    found += [f"line {line}: {name}.{attr}" for line, name, attr in private_reads if name in modules]
    return sorted(found)


KNOWN: dict[str, str] = {}


def _params(paths):
    return [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=KNOWN[str(p.relative_to(ROOT))]))
            if str(p.relative_to(ROOT)) in KNOWN else p for p in paths]


def test_every_derivations_module_imports_with_torch_numpy_and_numeric_unimportable():
    modules = [_module_name(p) for p in _sources("derivations")]
    assert len(modules) > 15 and "derivations.variants.group" in modules
    script = textwrap.dedent(f"""
        import importlib, importlib.abc, sys

        class Blocker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {FORBIDDEN_IN_DERIVATIONS!r}:
                    raise ImportError(f"{{name}} is blocked: derivations must not need it")
                return None

        sys.meta_path.insert(0, Blocker())
        for name in {modules!r}:
            importlib.import_module(name)
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in {FORBIDDEN_IN_DERIVATIONS!r})
        assert not leaked, leaked
        print(len({modules!r}), "modules")
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(len(modules)), "modules"]


def test_the_blocker_would_notice_an_import_of_torch():
    """The subprocess check is live: the same blocker refuses ``import torch``."""
    script = textwrap.dedent(f"""
        import importlib.abc, sys

        class Blocker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {FORBIDDEN_IN_DERIVATIONS!r}:
                    raise ImportError(name + " is blocked")
                return None

        sys.meta_path.insert(0, Blocker())
        sys.modules.pop("torch", None)
        import torch
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "torch is blocked" in result.stderr


@pytest.mark.parametrize("path", _sources("derivations"), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_derivations_file_imports_numeric_torch_or_numpy(path):
    bad = [f"line {line}: {module}" for line, module in imported_modules(path) if module.split(".")[0] in FORBIDDEN_IN_DERIVATIONS]
    assert bad == []


def test_the_import_scan_sees_lazy_relative_and_dynamic_imports():
    text = "def f():\n    import torch\n    from numeric.variants import x\n    importlib.import_module('numpy')\n    from .. import proofs\n"
    found = sorted(m for _, m in imported_modules(ROOT / "derivations" / "variants" / "group.py", text))
    assert found == ["derivations", "derivations.proofs", "numeric.variants", "numeric.variants.x", "numpy", "torch"]


@pytest.mark.parametrize("path", _params([p for pkg in PACKAGES for p in _sources(pkg)]), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_reaches_into_another_modules_private_names(path):
    assert private_reaches(path) == []


def test_the_private_scan_sees_each_form():
    text = ("from derivations import variants as derived\nfrom .confirm import _lm, toy_lm\nfrom .._validate import like\n"
            "from . import callables\nx = derived._explicit\ny = callables._call\nz = report.steps[0].rhs\nw = toy_lm._cache\n")
    assert private_reaches(ROOT / "numeric" / "variants" / "checker.py", text) == [
        "line 2: from numeric.variants.confirm import _lm",
        "line 5: derived._explicit",
        "line 6: callables._call",
        "line 7: .steps[...] read by position",
    ]
