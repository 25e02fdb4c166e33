"""``sphinx-build -W`` fails on each defect the notes' build checks for, planted in a tiny Sphinx project.

Each test writes a project of one or two pages into a temporary folder, with its
own notation registry, and builds it in this process with the extensions the
notes use (``docs/_ext``): the clean project builds, and each planted defect — a
letter neither global nor declared locally, a letter declared twice, a SymPy
symbol a derivation displays that the registry lacks, a row numbered from 1, a
derivation wider than the text column — makes the build fail with the warning
that names it.  The whole site's build is not run here (CI runs it).
"""

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("sphinx")

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "docs" / "_ext"

REGISTRY = '''
from derivations.notation import Symbol

SYMBOLS = [
    Symbol(r"\\pi", "a policy", "index", "", "the field's letter", "Letters", forms=(r"\\pi_a",)),
    Symbol("a", "an action", "index", "", "the RL letter", "Letters"),
    Symbol("x", "a point", "index", "", "x for a point", "Letters"),
    Symbol("c", "a constant of the first page", "index", "", "c for a constant", "Letters", local=True),
]
'''

INDEX = '''
A page
======

.. local-notation::

The policy :math:`\\pi_a` at :math:`x`, scaled by :math:`c`; the first row is row 0.

.. toctree::

   notation
'''

DERIVATIONS = '''
import sympy as sp
from derivations import Derivation

def small():
    x = sp.Symbol("x")
    return Derivation("a square", start=(x + 1) ** 2).then(x**2 + 2 * x + 1, "the binomial formula")

def with_z():
    z = sp.Symbol("z")
    return Derivation("a square in z", start=(z + 1) ** 2).then(z**2 + 2 * z + 1, "the binomial formula")

def wide(n):
    xs = sp.symbols(f"x_1:{n + 1}", positive=True)
    return Derivation("a long product", start=sp.Mul(*xs)).then(sp.Mul(*xs) * 1, "nothing changes")
'''


def build(tmp_path, *, index=INDEX, registry=REGISTRY, extensions=("notation", "scan_site"), conf="", pages=None,
          name="project"):
    """Build the tiny project (in ``tmp_path / name``) with ``-W``; return ``(exit status, the warnings)``.

    ``pages`` maps more documents' names to their text (list them in ``index``'s toctree).
    """
    from sphinx.cmd.build import build_main

    tmp_path = tmp_path / name
    src = tmp_path / "src"
    src.mkdir(parents=True)
    for doc, text in (pages or {}).items():
        (src / f"{doc}.rst").write_text(text)
    module = f"tiny_registry_{tmp_path.parent.name.replace('-', '_')}_{name}"  # one module per test: importlib caches modules by name
    (src / f"{module}.py").write_text(registry)
    (src / f"tiny_derivations_{module}.py").write_text(DERIVATIONS)
    (src / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(src)!r}, {str(EXT)!r}, {str(ROOT)!r}]
        extensions = ["sphinx.ext.mathjax", *{list(extensions)!r}]
        notation_registry = "{module}.SYMBOLS"
        notation_exempt_pages = ["notation"]
        check_widths = "off"
        """) + textwrap.dedent(conf))
    (src / "index.rst").write_text(index.replace("tiny_derivations.", f"tiny_derivations_{module}."))
    (src / "notation.rst").write_text("Notation\n========\n\n.. notation-table:: Letters\n\n.. notation-locals::\n")
    for path in (str(EXT), str(ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)
    warnings = tmp_path / "warnings.txt"
    status = build_main(["-W", "--keep-going", "-q", "-w", str(warnings), "-b", "html", str(src), str(tmp_path / "html")])
    return status, warnings.read_text() if warnings.exists() else ""


def test_the_clean_project_builds(tmp_path):
    status, warnings = build(tmp_path)
    assert (status, warnings) == (0, "")
    notation = (tmp_path / "project" / "html" / "notation.html").read_text()
    assert "a constant of the first page" in notation and "a policy" in notation


def test_an_undeclared_letter_fails_the_build(tmp_path):
    status, warnings = build(tmp_path, index=INDEX.replace(":math:`x`", ":math:`x + y`"))
    assert status == 1
    assert "the letter 'y' is neither global nor declared locally on this page" in warnings
    assert "index.rst" in warnings and "first in: x + y" in warnings


def test_a_local_letter_is_not_declared_on_another_page(tmp_path):
    """``c`` is local to the first page, so a second chapter that prints it fails."""
    status, warnings = build(tmp_path, index=INDEX.replace("   notation", "   notation\n   other"),
                             pages={"other": "Other\n=====\n\nHere :math:`c` is not declared.\n"})
    assert status == 1
    assert "other.rst" in warnings and "the letter 'c' is neither global nor declared locally" in warnings


def test_a_letter_declared_twice_fails_the_build(tmp_path):
    registry = REGISTRY.replace("]\n", '    Symbol("x", "a second meaning of x", "notation", "", "a clash", "Letters"),\n]\n')
    status, warnings = build(tmp_path, registry=registry)
    assert status == 1
    assert "'x' is declared twice: x (a point, page index) and x (a second meaning of x, page notation)" in warnings


def test_a_local_letter_that_is_global_fails_the_build(tmp_path):
    registry = REGISTRY.replace('Symbol("c", "a constant', 'Symbol("a", "a constant')
    status, warnings = build(tmp_path, registry=registry, index=INDEX.replace(":math:`c`", ":math:`a`"))
    assert status == 1 and "'a' is declared twice" in warnings and "local to index" in warnings


def test_a_derivation_with_a_sympy_symbol_missing_from_the_registry_fails_the_build(tmp_path):
    clean = INDEX + "\n.. derivation:: tiny_derivations.small()\n"
    extensions = ("notation", "scan_site", "derivation_directive")
    assert build(tmp_path, index=clean, extensions=extensions, name="clean") == (0, "")
    planted = INDEX + "\n.. derivation:: tiny_derivations.with_z()\n"
    status, warnings = build(tmp_path, index=planted, extensions=extensions, name="planted")
    assert status == 1
    assert "displays the SymPy symbol z, printed as 'z', which the registry does not declare for this page" in warnings


def test_a_row_numbered_from_one_fails_the_build(tmp_path):
    status, warnings = build(tmp_path, index=INDEX.replace("the first row is row 0", "the first row is row 1, then row 2"))
    assert status == 1
    assert "scan_site: indexing: rows are numbered 1, 2 but never row 0: rows count from 0" in warnings
    # a turn numbered from 0 in the same sentence is not a defect
    status, warnings = build(tmp_path, index=INDEX.replace("the first row is row 0", "turn 0 and turn 1"), name="turns")
    assert (status, warnings) == (0, "")


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="Chromium is not installed (CI installs it; the build measures widths only where it is)")
def test_a_derivation_wider_than_the_column_fails_the_build(tmp_path):
    """One Chromium run at 1,280 px with the notes' MathJax and layout script: 70 factors do not fit, however laid out."""
    pytest.importorskip("sphinx-mathjax-offline")
    index = "A page\n======\n\n.. derivation:: tiny_derivations.wide(70)\n"
    registry = 'from derivations.notation import Symbol\nSYMBOLS = [Symbol("x", "a factor", "index", "", "x for a factor", "Letters")]\n'
    conf = f"""
        html_static_path = [{str(ROOT / "docs" / "_static")!r}]
        html_js_files = ["derivation-layout.js"]
        mathjax3_config = {{"options": {{"enableMenu": False}}}}
        check_widths = "require"
        check_widths_at = [1280]
        """
    status, warnings = build(tmp_path, index=index, registry=registry, conf=conf,
                             extensions=("sphinx-mathjax-offline", "derivation_directive", "check_widths"))
    assert status == 1
    assert "check_widths: a display formula is wider than the text column at 1280 px: a long product" in warnings


def test_a_docstring_uses_the_letters_of_the_page_its_module_is_mapped_to(tmp_path):
    """``notation_module_pages``: a dotted key sends one module of a package whose first part is a page elsewhere;
    a function is read by the module that defines it, also where its package re-exports it."""
    package = tmp_path / "modules" / f"tinypkg_{tmp_path.name.replace('-', '_')}"
    (package / "index").mkdir(parents=True)
    (package / "__init__.py").write_text("from .index.part import f\n")
    (package / "index" / "__init__.py").write_text("")
    (package / "index" / "part.py").write_text('r"""A module with the letter :math:`y` of the page other."""\n\n\n'
                                               'def f():\n    r"""A function of :math:`y`."""\n')
    index = INDEX.replace("   notation", "   notation\n   other") + (f"\n.. automodule:: {package.name}.index.part\n   :no-members:\n"
                                                                     f"\n.. autofunction:: {package.name}.f\n")
    registry = REGISTRY.replace("]\n", '    Symbol("y", "a letter of the other page", "other", "", "y for a test", "Letters", local=True),\n]\n')
    pages = {"other": "Other\n=====\n\n.. local-notation::\n\nHere :math:`y`.\n"}
    conf = f"sys.path.insert(0, {str(package.parent)!r})\n"
    extensions = ("sphinx.ext.autodoc", "notation", "scan_site")
    mapped = conf + "notation_module_pages = {'index.part': 'other'}\n"
    assert build(tmp_path, index=index, registry=registry, pages=pages, conf=mapped, extensions=extensions,
                 name="mapped") == (0, "")
    status, warnings = build(tmp_path, index=index, registry=registry, pages=pages, conf=conf, extensions=extensions,
                             name="unmapped")
    assert status == 1 and "the letter 'y' is neither global nor declared locally on this page" in warnings
