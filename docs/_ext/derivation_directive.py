"""Sphinx directives that render computed mathematics into the page.

``.. derivation:: derivations.score_function.log_derivative_trick()``
    Calls the function (a dotted path with literal arguments), verifies the
    returned :class:`derivations.Derivation` with the CAS at build time, and
    renders its steps with their reasons and a line saying how each step was
    proved.  A derivation that fails to verify fails the build.  The page
    records the source files of the ``derivations`` package and of the module
    it calls as dependencies, so an incremental build re-reads (and
    re-verifies) it whenever one of them changes.

``.. sympy-math:: derivations.baselines.optimal_baseline()``
    Renders ``sympy.latex`` of the returned expression as display math.

``.. latex-table:: numeric.losses.trainer_table()``
    Renders a LaTeX ``array`` computed by the code as an HTML table, one
    cell per entry: a ``\text{...}`` cell as text, any other as inline math,
    so a wide table wraps in the column instead of scrolling as one formula.

``.. html-report:: numeric.variants.certificate("rloo")``
    Renders the returned object's ``_repr_html_()`` as a notebook would, its
    ``$$...$$`` math typeset by MathJax.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from notation import record_derivation
from sphinx.util.docutils import SphinxDirective

from derivations import Derivation
from derivations.notation import latex as notes_latex

_cache: dict[str, object] = {}


def _source_files(source: str) -> list[str]:
    """The files a rendered derivation depends on: the called module and the whole ``derivations`` package."""
    import derivations

    files = sorted(str(p) for p in Path(derivations.__file__).parent.glob("*.py"))
    module_name = ast.unparse(ast.parse(source.strip(), mode="eval").body.func).rpartition(".")[0]
    module_file = inspect.getsourcefile(importlib.import_module(module_name))
    return sorted({*files, module_file})


def _call(source: str):
    """Evaluate ``package.module.function(literal, key=literal)``, cached per build."""
    if source in _cache:
        return _cache[source]
    tree = ast.parse(source.strip(), mode="eval").body
    if not isinstance(tree, ast.Call):
        raise ValueError(f"expected a call like module.function(...), got {source!r}")
    path = ast.unparse(tree.func)
    module_name, _, attr = path.rpartition(".")
    fn = getattr(importlib.import_module(module_name), attr)
    args = [ast.literal_eval(a) for a in tree.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in tree.keywords}
    _cache[source] = fn(*args, **kwargs)
    return _cache[source]


class DerivationDirective(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {"title": directives.unchanged, "label": directives.unchanged}

    def run(self):
        source = self.arguments[0]
        for path in _source_files(source):
            self.env.note_dependency(path)
        d = _call(source)
        if not isinstance(d, Derivation):
            raise self.error(f"{source} returned {type(d).__name__}, not a Derivation")
        d.verify()
        record_derivation(self.env, source, d)
        container = nodes.container(classes=["derivation"])
        title = self.options.get("title", d.title)
        container += nodes.paragraph("", "", nodes.strong(text=title))
        if d.assumptions:
            text = "Assumptions: " + "; ".join(d.assumptions) + "."
            container += self._inline_math_paragraph(text)
        latex = d.to_latex()
        block = nodes.math_block(latex, latex, nowrap=False, number=None, docname=self.env.docname)
        if "label" in self.options:
            block["label"] = self.options["label"]
        container += block
        # the steps as data: derivation-layout.js lays them out again when they are wider than the column
        rows = json.dumps(d.rows()).replace("</", "<\\/")
        container += nodes.raw("", f'<script type="application/json" class="derivation-rows">{rows}</script>', format="html")
        counts = ", ".join(f"{n}× {how}" for how, n in d.proved_by().items())
        partial = [st.badge for st in d.steps if st.badge]
        caveat = f"; {len(partial)} of them checked only partly, as boxed beside the step" if partial else ""
        status = nodes.paragraph(classes=["derivation-status"])
        status += nodes.Text(f"✓ Verified by the proof kernel at build time: {len(d.steps)} steps ({counts}){caveat}. Source: ")
        status += nodes.literal(text=source)
        container += status
        return [container]

    def _inline_math_paragraph(self, text: str) -> nodes.paragraph:
        para = nodes.paragraph()
        for i, part in enumerate(text.split("$")):
            if i % 2:
                para += nodes.math(part, part)
            elif part:
                para += nodes.Text(part)
        return para


class SympyMathDirective(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True

    def run(self):
        for path in _source_files(self.arguments[0]):
            self.env.note_dependency(path)
        value = _call(self.arguments[0])
        latex = value if isinstance(value, str) else notes_latex(value)
        return [nodes.math_block(latex, latex, nowrap=False, number=None, docname=self.env.docname)]


_TEXT_CELL = re.compile(r"^\\text\{([^{}]*)\}$")


def _split_top(latex: str, sep: str) -> list[str]:
    """Split at ``sep`` outside braces and ``\\begin...\\end`` environments."""
    parts, depth, i, last = [], 0, 0, 0
    while i < len(latex):
        if latex.startswith("\\begin{", i):
            depth += 1
        elif latex.startswith("\\end{", i):
            depth -= 1
        elif latex[i] == "\\" and latex[i + 1:i + 2] in ("{", "}", "&"):
            i += 2
            continue
        elif latex[i] == "{":
            depth += 1
        elif latex[i] == "}":
            depth -= 1
        if depth == 0 and latex.startswith(sep, i):
            parts.append(latex[last:i])
            i += len(sep)
            last = i
            continue
        i += 1
    parts.append(latex[last:])
    return parts


def _array_rows(latex: str) -> list[list[str]]:
    """The cells of a ``\\begin{array}...\\end{array}``, row by row (``\\hline`` dropped)."""
    body = latex.strip()
    if not body.startswith("\\begin{array}") or not body.endswith("\\end{array}"):
        raise ValueError("expected a LaTeX array")
    body = body[len("\\begin{array}"):-len("\\end{array}")]
    body = body[body.index("}") + 1:]  # the column spec
    rows = []
    for line in _split_top(body, "\\\\"):
        line = line.replace("\\hline", "").strip()
        if line:
            rows.append([cell.strip() for cell in _split_top(line, "&")])
    if len({len(r) for r in rows}) != 1:
        raise ValueError(f"rows of unequal length: {[len(r) for r in rows]}")
    return rows


def _cell(latex: str) -> nodes.entry:
    para = nodes.paragraph()
    text = _TEXT_CELL.match(latex)
    if text:
        para += nodes.Text(text.group(1).replace("\\_", "_"))
    elif latex:
        para += nodes.math(latex, latex)
    return nodes.entry("", para)


class LatexTableDirective(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True

    def run(self):
        for path in _source_files(self.arguments[0]):
            self.env.note_dependency(path)
        header, *body = _array_rows(_call(self.arguments[0]))
        table = nodes.table(classes=["computed-table"])
        group = nodes.tgroup(cols=len(header))
        table += group
        group += [nodes.colspec(colwidth=1) for _ in header]
        group += nodes.thead("", nodes.row("", *[_cell(c) for c in header]))
        group += nodes.tbody("", *[nodes.row("", *[_cell(c) for c in row]) for row in body])
        return [table]


class HtmlReportDirective(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True

    def run(self):
        for path in _source_files(self.arguments[0]):
            self.env.note_dependency(path)
        html = _call(self.arguments[0])._repr_html_()
        return [nodes.raw("", f"<div class='mathjax_process pgi-rendered'>\n{html}\n</div>", format="html")]


def setup(app):
    app.add_directive("derivation", DerivationDirective)
    app.add_directive("sympy-math", SympyMathDirective)
    app.add_directive("latex-table", LatexTableDirective)
    app.add_directive("html-report", HtmlReportDirective)
    app.add_css_file("derivation.css")
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
