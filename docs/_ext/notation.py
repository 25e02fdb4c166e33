r"""The notation registry, rendered and checked by the build.

The registry is :data:`derivations.symbols.SYMBOLS` (the config value
``notation_registry`` names another, as ``"module.NAME"``, for a test project).

``.. notation-table:: <section>``
    The Notation page's table of one section of the registry: symbol (and the
    forms it is printed in), meaning, the page that defines it, its name in
    code, and why this letter.  A symbol local to a page is listed too, marked
    as such.
``.. notation-locals::``
    The Notation page's list of every page's local symbols, page by page.
``.. local-notation::``
    The page's "Local notation" box: the symbols the registry declares local
    to this page.  A page with local symbols must show the box.

A docstring rendered into the API page is the mathematics of its topic: a
formula in the docstring of ``numeric.losses.policy`` may use the letters of
``losses`` (the first part of the module's name after the package that is a
page), one in ``derivations.iid_groups`` those of the page that
``notation_module_pages`` maps ``iid_groups`` to (a function or class is read
by the module that defines it, also where a package re-exports it; a dotted key,
``"variants.execution"``, maps one module of a package whose first part is a
page); the rest use the API page's own local letters.

What the build checks (each a warning, so ``sphinx-build -W`` fails):

* the registry declares no letter twice: not two global symbols, not a local
  symbol with a global letter, not two local symbols on one page (two pages
  may each give a letter a local meaning);
* every symbol of every formula of a page — ``:math:``, ``.. math::``, the
  rendered derivations, tables and reports, the docstrings rendered into the
  page — is global or declared locally on that page
  (:func:`derivations.notation.symbols_of` says what a symbol is);
* every SymPy symbol a rendered derivation displays is in the registry (the
  message names the SymPy object and the derivation);
* every section of the registry is shown on the Notation page, every page
  with local symbols shows its box, and every registry entry is used on some page.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections import defaultdict

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from derivations.notation import Notation

logger = logging.getLogger(__name__)

_RAW_MATH = re.compile(r"\$\$(.+?)\$\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)


_registries: dict[str, Notation] = {}


def registry(config) -> Notation:
    """The registry the config names (``"module.NAME"``), as a :class:`Notation` (built once per build process)."""
    path = config.notation_registry
    if path not in _registries:
        module, _, name = path.rpartition(".")
        _registries[path] = Notation(getattr(importlib.import_module(module), name))
    return _registries[path]


def _env_data(env) -> dict:
    if not hasattr(env, "notation_uses"):
        env.notation_uses = {}          # docname -> {key: a formula that uses it}
        env.notation_sympy = {}         # docname -> [(source, atom, key)]
        env.notation_shown = {}         # docname -> {"tables": [sections], "box": bool}
    return env


def _depend(directive) -> None:
    """A generated table is re-read when the registry's module changes."""
    module = importlib.import_module(directive.config.notation_registry.rpartition(".")[0])
    directive.env.note_dependency(module.__file__)


def _cell(text: str) -> str:
    return " ".join(text.split()) if text else ""


def _math(latex: str) -> str:
    return f":math:`{latex}`"


class NotationTable(SphinxDirective):
    """The Notation page's table of one section of the registry."""

    required_arguments = 1
    final_argument_whitespace = True

    def run(self):
        section = self.arguments[0].strip()
        reg = registry(self.config)
        _depend(self)
        symbols = reg.sections().get(section)
        if not symbols:
            raise self.error(f"notation-table: the registry has no section {section!r} "
                             f"(it has {sorted(reg.sections())})")
        _env_data(self.env).notation_shown.setdefault(self.env.docname, {"tables": [], "box": False})["tables"].append(section)
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 16 40 14 15 15", "   :class: notation-table", "",
                 "   * - symbol", "     - meaning", "     - defined in", "     - in code", "     - why this letter"]
        for s in symbols:
            shown = ", ".join(_math(f) for f in (s.latex, *s.forms))
            where = f":doc:`{s.page}`" + (" (local)" if s.local else "")
            lines += [f"   * - {shown}", f"     - {_cell(s.meaning)}", f"     - {where}",
                      f"     - {_cell(s.code)}", f"     - {_cell(s.why)}"]
        return self._parse(lines)

    def _parse(self, lines):
        box = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, box)
        return box.children


class LocalNotation(NotationTable):
    """The page's "Local notation" box: the symbols the registry declares local to it."""

    required_arguments = 0
    option_spec = {"class": directives.class_option}

    def run(self):
        reg = registry(self.config)
        _depend(self)
        symbols = reg.local_to(self.env.docname)
        _env_data(self.env).notation_shown.setdefault(self.env.docname, {"tables": [], "box": False})["box"] = True
        if not symbols:
            raise self.error(f"local-notation: the registry declares no symbol local to {self.env.docname!r}")
        lines = [".. admonition:: Local notation", "   :class: local-notation dropdown", "",
                 "   These letters mean this on this page only (:doc:`notation` lists every symbol).", "",
                 "   .. list-table::", "      :widths: 18 52 30", ""]
        for s in symbols:
            shown = ", ".join(_math(f) for f in (s.latex, *s.forms))
            lines += [f"      * - {shown}", f"        - {_cell(s.meaning)}", f"        - {_cell(s.code)}"]
        return self._parse(lines)


class NotationLocals(NotationTable):
    """Every page's local symbols, page by page, for the Notation page."""

    required_arguments = 0

    def run(self):
        reg = registry(self.config)
        _depend(self)
        _env_data(self.env).notation_shown.setdefault(self.env.docname, {"tables": [], "box": False})["tables"].append("(locals)")
        pages = list(dict.fromkeys(s.page for s in reg.symbols if s.local))
        lines = []
        for page in pages:
            lines += [f".. rubric:: Local to :doc:`{page}`", "", ".. list-table::", "   :header-rows: 1",
                      "   :widths: 16 44 20 20", "   :class: notation-table", "",
                      "   * - symbol", "     - meaning", "     - in code", "     - why this letter"]
            for s in reg.local_to(page):
                shown = ", ".join(_math(f) for f in (s.latex, *s.forms))
                lines += [f"   * - {shown}", f"     - {_cell(s.meaning)}", f"     - {_cell(s.code)}", f"     - {_cell(s.why)}"]
            lines.append("")
        return self._parse(lines)


def _scopes(doctree, docname, topics):
    """Each formula of a page with the page whose letters it may use (a docstring: its topic's)."""
    module = None
    for node in doctree.findall():
        ids = node.get("ids", ()) if isinstance(node, nodes.Element) else ()
        if any(i.startswith("module-") for i in ids):  # a module's target; docutils moves its ids onto the next element
            module = next(i for i in ids if i.startswith("module-"))[len("module-"):]
        latex = None
        if isinstance(node, (nodes.math, nodes.math_block)):
            latex = [node.astext()]
        elif isinstance(node, nodes.raw) and not node.astext().startswith('<script type="application/json"'):
            latex = [next(g for g in m.groups() if g is not None) for m in _RAW_MATH.finditer(node.astext())]
        if not latex:
            continue
        owner = module
        for parent in _ancestors(node):  # the nearest documented object that names its module
            signature = parent.next_node(addnodes.desc_signature) if isinstance(parent, addnodes.desc) else None
            if signature is not None and signature.get("module"):
                owner = _defining_module(signature.get("module"), signature.get("fullname"))
                break
        scope = topics(owner) if owner else docname
        for text in latex:
            yield scope or docname, text


@functools.cache
def _defining_module(module, fullname):
    """The module that defines a documented function or class (a package re-exports it under its own name)."""
    if not module or not fullname:
        return module
    try:
        obj = importlib.import_module(module)
    except Exception:  # an object autodoc could not import has no other module to read
        return module
    found = module
    for part in fullname.split("."):
        obj = getattr(obj, part, None)
        if not (inspect.isclass(obj) or inspect.isroutine(obj)):
            break
        found = getattr(obj, "__module__", None) or found
    return found


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def collect_symbols(app, doctree):
    """Record, per page and scope, each symbol its formulas use and the first formula that uses it."""
    env = _env_data(app.env)
    docname = app.env.docname
    mapping = app.config.notation_module_pages

    def topic(module):
        parts = module.split(".")[1:]
        for k in range(len(parts), 1, -1):  # a dotted key ("variants.execution") before its parts
            if ".".join(parts[:k]) in mapping:
                return mapping[".".join(parts[:k])]
        for part in parts:
            if part in mapping:
                return mapping[part]
            if part in app.env.found_docs and part not in app.config.notation_exempt_pages:
                return part
        return docname

    uses: dict[str, list[str]] = {}
    for scope, latex in _scopes(doctree, docname, topic):
        formulas = uses.setdefault(scope, [])
        if latex not in formulas:
            formulas.append(latex)
    env.notation_uses[docname] = uses


def record_derivation(env, source: str, derivation) -> None:
    """Record the SymPy symbols a rendered derivation displays (called by the ``derivation`` directive)."""
    import sympy as sp
    from sympy.core.function import AppliedUndef

    if "notation_registry" not in env.config:  # a project that renders derivations without the registry
        return
    exprs = []
    for st in derivation.steps:
        exprs += [st.lhs, st.rhs, *st.given]
    exprs += list(derivation.premises)
    if derivation.unfold:
        for lhs, rhs in derivation.unfold.entries.items():
            exprs += [lhs, rhs]
    found: dict[str, str] = {}
    reg = registry(env.config)
    for e in exprs:
        if not isinstance(e, sp.Basic):
            continue
        for atom in e.atoms(sp.Symbol, sp.Indexed, AppliedUndef):
            head = atom.base if isinstance(atom, sp.Indexed) else atom.func if isinstance(atom, AppliedUndef) else atom
            for key in reg.keys_of(sp.latex(head)):
                shown = sp.sstr(head)
                if key not in found or len(shown) < len(found[key]):
                    found[key] = shown
    found_list = [(source, atom, key) for key, atom in found.items()]
    _env_data(env).notation_sympy.setdefault(env.docname, []).extend(found_list)


def purge(app, env, docname):
    _env_data(env)
    for table in (env.notation_uses, env.notation_sympy, env.notation_shown):
        table.pop(docname, None)


def merge(app, env, docnames, other):
    _env_data(env)
    _env_data(other)
    for name in ("notation_uses", "notation_sympy", "notation_shown"):
        mine, theirs = getattr(env, name), getattr(other, name)
        for docname in docnames:
            if docname in theirs:
                mine[docname] = theirs[docname]


def check(app, env):
    """Every warning the registry and the pages earn (run once all pages are read)."""
    env = _env_data(env)
    reg = registry(app.config)
    for problem in reg.problems():
        logger.warning(f"notation: {problem}", type="notation", subtype="duplicate")
    exempt = set(app.config.notation_exempt_pages)
    for docname in sorted(env.notation_sympy):
        for source, atom, key in env.notation_sympy[docname]:
            if not reg.declared(key, docname):
                logger.warning(f"notation: the derivation {source} displays the SymPy symbol {atom}, printed as "
                               f"{key!r}, which the registry does not declare for this page",
                               location=docname, type="notation", subtype="sympy")
    used = defaultdict(set)
    for docname in sorted(env.notation_uses):
        for scope, formulas in env.notation_uses[docname].items():
            reported = set()
            for latex in formulas:
                for key in reg.keys_of(latex):
                    symbol = reg.lookup(key, scope)
                    if symbol is not None:
                        used[id(symbol)].add(docname)
                    if docname in exempt or symbol is not None or key in reported:
                        continue
                    reported.add(key)
                    where = "" if scope == docname else f" (in a docstring of the topic {scope!r})"
                    short = " ".join(latex.split())[:120]
                    logger.warning(f"notation: the letter {key!r} is neither global nor declared locally on this page{where}; "
                                   f"first in: {short}", location=docname, type="notation", subtype="undeclared")
    shown = env.notation_shown
    tables = {section for page in shown.values() for section in page["tables"]}
    for section in reg.sections():
        if section not in tables:
            logger.warning(f"notation: the registry's section {section!r} is shown on no page (.. notation-table::)",
                           type="notation", subtype="page")
    for symbol in reg.symbols:
        if symbol.local and not shown.get(symbol.page, {}).get("box"):
            logger.warning(f"notation: {symbol.page} has local symbols ({symbol.key!r}) but no '.. local-notation::' box",
                           type="notation", subtype="page")
        if symbol.page not in env.all_docs:
            logger.warning(f"notation: {symbol.key!r} is defined on page {symbol.page!r}, which is not a page",
                           type="notation", subtype="page")
        elif not (used[id(symbol)] - exempt):
            logger.warning(f"notation: {symbol.key!r} ({symbol.meaning[:60]}) is used on no page: drop it from the registry",
                           type="notation", subtype="unused")


def outdated(app, env, added, changed, removed):
    """The generated pages depend on every page: re-read them when anything changed."""
    if added or changed or removed:
        return [d for d in app.config.notation_exempt_pages if d in env.found_docs]
    return []


def setup(app):
    app.add_config_value("notation_registry", "derivations.symbols.SYMBOLS", "env")
    app.add_config_value("notation_exempt_pages", ["notation"], "env")
    app.add_config_value("notation_module_pages", {}, "env")
    app.add_directive("notation-table", NotationTable)
    app.add_directive("local-notation", LocalNotation)
    app.add_directive("notation-locals", NotationLocals)
    app.connect("doctree-read", collect_symbols)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    app.connect("env-check-consistency", check)
    app.connect("env-get-outdated", outdated)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
