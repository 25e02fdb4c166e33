r"""Scan the built lecture notes for the defects a reader sees on the page.

Run after ``sphinx-build -b html docs docs/_build/html``::

    python docs/_ext/scan_site.py docs/_build/html [--allow-missing-exercises a,b]

Each defect is printed as ``page: kind: what`` and the exit status is 1 when
there is one. The kinds:

``literal-role``
    a literal ``:math:`` (or ``:func:``, ``:doc:``, ``:ref:``, …) in the rendered
    text: a role the parser did not see, e.g. nested in bold;
``text-underscore``
    ``\text{..\_..}`` in a formula: MathJax prints the backslash;
``mailto``
    a ``mailto:`` link whose target is not an e-mail address (``Pass@k's``);
``numbering``
    figure, table, listing, equation or theorem numbers that skip within a
    chapter, or do not start at 1;
``exercises``
    a numbered chapter without an *Exercises* section;
``network``
    a page (or a stylesheet it loads) that fetches anything from the network;
``alt-text``
    a figure's image whose alt text is empty or its file name;
``citation``
    a paper-like citation in a page's text (an arXiv number, "Name et al.")
    that the References page does not list;
``indexing``
    rows, turns or answers counted from 1: a page names "row N" (or
    "turns N and M", "answer N") for a kind but never number 0 of that kind,
    although positions, turns, answers and rows count from 0 (the notes'
    conventions). An action is a label, not a position, and is not scanned.

The indexing check also runs inside the Sphinx build (this module is the
extension ``scan_site``: each phrase is a warning, so ``sphinx-build -W``
fails on it).

Text inside ``pre``, ``code``, ``script`` and ``style`` is code, not prose,
and is not scanned for roles. Only the standard library is used.
"""

import argparse
import html.parser
import posixpath
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
CODE = {"pre", "code", "script", "style", "kbd", "samp", "tt"}
EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
LITERAL_ROLE = re.compile(r":(?:math|func|class|meth|attr|data|mod|obj|doc|ref|numref|eq|term|cite(?::[pt])?)"
                          r":`[^`]{0,40}`?")
TEXT_UNDERSCORE = re.compile(r"\\text(?:rm|tt|bf|it|sf|normal)?\{[^{}]*\\_")
CAPTION_NUMBER = re.compile(r"^\s*([A-Za-z][A-Za-z .]*?)\.?\s+(\d+(?:\.\d+)*)\s*$")
EQUATION_NUMBER = re.compile(r"^\s*\((\d+(?:\.\d+)*)\)\s*$")
REMOTE = re.compile(r"^\s*(?:https?:)?//", re.I)
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])\s*((?:https?:)?//[^'")\s]+)""", re.I)
# link relations that make the browser fetch (or connect to) the target
LOADING_RELS = {"stylesheet", "preload", "prefetch", "modulepreload", "icon", "shortcut",
                "apple-touch-icon", "manifest", "preconnect", "dns-prefetch", "prerender"}
LOADING_ATTRS = {"script": ("src",), "img": ("src", "srcset"), "iframe": ("src",), "frame": ("src",),
                 "source": ("src", "srcset"), "audio": ("src",), "video": ("src", "poster"),
                 "embed": ("src",), "object": ("data",), "track": ("src",), "input": ("src",)}
SKIP_PAGES = {"genindex.html", "search.html", "py-modindex.html"}
INDEX_PHRASE = re.compile(r"\b(rows?|turns?|answers?)\s+(\d+(?:\s*(?:,|and|or|to)\s*\d+)*)\b", re.I)
_KIND = {"row": "row", "rows": "row", "turn": "turn", "turns": "turn", "answer": "answer", "answers": "answer"}


@dataclass
class Node:
    tag: str
    attrs: dict
    parent: "Node | None" = None
    children: list = field(default_factory=list)

    def classes(self):
        return set((self.attrs.get("class") or "").split())

    def text(self, skip=()):
        return "".join(c if isinstance(c, str) else c.text(skip) for c in self.children
                       if isinstance(c, str) or c.tag not in skip)

    def walk(self):
        """The descendant elements in document order (iterative: pages nest deeply)."""
        stack = [c for c in reversed(self.children) if isinstance(c, Node)]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(c for c in reversed(node.children) if isinstance(c, Node))

    def inside(self, tags):
        p = self.parent
        while p is not None:
            if p.tag in tags:
                return True
            p = p.parent
        return False


class _TreeBuilder(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.open = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v or "") for k, v in attrs}, self.open[-1])
        self.open[-1].children.append(node)
        if tag not in VOID:
            self.open.append(node)

    def handle_startendtag(self, tag, attrs):
        node = Node(tag, {k: (v or "") for k, v in attrs}, self.open[-1])
        self.open[-1].children.append(node)

    def handle_endtag(self, tag):
        for i in range(len(self.open) - 1, 0, -1):
            if self.open[i].tag == tag:
                del self.open[i:]
                return

    def handle_data(self, data):
        self.open[-1].children.append(data)


def parse(text):
    """The document tree of an HTML string."""
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    return builder.root


def _prose(node, out):
    """Text nodes outside code, math and scripts, in document order."""
    for c in node.children:
        if isinstance(c, str):
            out.append(c)
        elif c.tag not in CODE and "math" not in c.classes():
            _prose(c, out)
    return out


def check_roles(root):
    """``literal-role``: a literal ``:math:`` (or other role) in the prose; ``text-underscore`` in a formula."""
    found = []
    prose = " ".join(_prose(root, []))
    for m in LITERAL_ROLE.finditer(prose):
        found.append(("literal-role", f"literal {m.group(0)!r} in the text"))
    for node in root.walk():
        if "math" in node.classes() and node.tag in {"span", "div"}:
            for m in TEXT_UNDERSCORE.finditer(node.text()):
                found.append(("text-underscore", f"MathJax prints the backslash of {m.group(0)!r}…"))
    return found


def check_mailto(root):
    """``mailto``: links whose target is not an e-mail address."""
    found = []
    for node in root.walk():
        href = node.attrs.get("href", "") if node.tag == "a" else ""
        if href.lower().startswith("mailto:"):
            address = href[len("mailto:"):].split("?")[0]
            if not EMAIL.match(address):
                found.append(("mailto", f"{node.text().strip()!r} is a mailto: link to {address!r}"))
    return found


def _numbers(root):
    """(kind, number) of each numbered figure, table, listing, theorem and equation, in order."""
    for node in root.walk():
        classes = node.classes()
        if "caption-number" in classes:
            m = CAPTION_NUMBER.match(node.text())
            if m:
                yield m.group(1).strip(), m.group(2)
        elif "eqno" in classes:
            m = EQUATION_NUMBER.match(node.text(skip={"a"}))
            if m:
                yield "Equation", m.group(1)


def check_numbering(root):
    """``numbering``: within a page each kind counts 1, 2, 3, … under one chapter prefix."""
    found, last = [], {}
    for kind, number in _numbers(root):
        *prefix, n = number.split(".")
        key = (kind, ".".join(prefix))
        expected = last.get(key, 0) + 1
        if int(n) != expected:
            before = f"{kind} {'.'.join(prefix + [str(expected - 1)])}" if expected > 1 else "the chapter's start"
            found.append(("numbering", f"{kind} {number} follows {before}"))
        last[key] = int(n)
    prefixes = {p for _, p in last}
    if len(prefixes) > 1:
        found.append(("numbering", f"numbers under several chapter prefixes: {sorted(prefixes)}"))
    return found


def _heading_text(node):
    return " ".join(node.text(skip={"a"}).replace("\u00b6", "").split())


def chapter_number(root):
    """The section number of the page's title (``"2"``), or None for an unnumbered page."""
    for node in root.walk():
        if node.tag == "h1":
            for c in node.walk():
                if "section-number" in c.classes():
                    return c.text().strip().rstrip(".")
    return None


def has_exercises(root):
    """Whether the page has a section headed *Exercises* (optionally numbered)."""
    for node in root.walk():
        if node.tag in {"h2", "h3"}:
            title = _heading_text(node)
            if re.fullmatch(r"(?:[\d.]+\s+)?Exercises", title):
                return True
    return False


def check_network(root, page, site):
    """``network``: anything the page (or a local stylesheet it links) fetches from the network."""
    found = []
    for node in root.walk():
        urls = [node.attrs.get(a, "") for a in LOADING_ATTRS.get(node.tag, ())]
        if node.tag == "link" and set(node.attrs.get("rel", "").lower().split()) & LOADING_RELS:
            urls.append(node.attrs.get("href", ""))
            href = node.attrs.get("href", "")
            if "stylesheet" in node.attrs.get("rel", "").lower() and not REMOTE.match(href):
                css = (page.parent / href.split("?")[0].split("#")[0])
                if site is not None and css.is_file():
                    for m in CSS_URL.finditer(css.read_text(errors="replace")):
                        found.append(("network", f"stylesheet {href.split('?')[0]} loads {m.group(1)}"))
        for url in urls:
            for part in url.split(","):
                if REMOTE.match(part):
                    found.append(("network", f"<{node.tag}> loads {part.strip().split()[0]}"))
        if node.tag == "style":
            for m in CSS_URL.finditer(node.text()):
                found.append(("network", f"<style> loads {m.group(1)}"))
    return found


def check_alt_text(root):
    """``alt-text``: a figure image whose alt text is empty or its own file name."""
    found = []
    for node in root.walk():
        if node.tag == "img" and node.inside({"figure"}):
            alt, src = node.attrs.get("alt", "").strip(), node.attrs.get("src", "")
            if not alt or alt == src or posixpath.basename(alt) == posixpath.basename(src):
                found.append(("alt-text", f"image {posixpath.basename(src)} has alt text {alt!r}"))
    return found


def index_phrases(text):
    """The numbers each kind (row, turn, answer) is given in ``text``: ``{"row": {1, 4}}`` for "rows 1 and 4".

    Examples
    --------
    >>> index_phrases("clipped in rows 1 and 4, but not in row 2; turn 0 then turn 1")
    {'row': {1, 2, 4}, 'turn': {0, 1}}
    """
    found = {}
    for m in INDEX_PHRASE.finditer(text):
        kind = _KIND[m.group(1).lower()]
        found.setdefault(kind, set()).update(int(n) for n in re.findall(r"\d+", m.group(2)))
    return found


def check_indexing_text(text):
    """``indexing``: a kind numbered without its number 0 counts from 1 (see the module docstring)."""
    out = []
    for kind, numbers in sorted(index_phrases(text).items()):
        if 0 not in numbers:
            shown = ", ".join(str(n) for n in sorted(numbers))
            out.append(("indexing", f"{kind}s are numbered {shown} but never {kind} 0: "
                                    f"{kind}s count from 0 (a first {kind} is {kind} 0)"))
    return out


def check_indexing(root):
    """``indexing`` on a page's prose (code and math are not prose)."""
    return check_indexing_text(" ".join(_prose(root, [])))


def _page_names(names):
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"allow_missing_exercises: expected a tuple of page names, got {names!r}")
    return tuple(names)


def scan_page(text, name="page.html", path=None, site=None, allow_missing_exercises=()):
    """Every defect of one page, as ``(kind, message)`` pairs."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected the page's HTML as str, got {type(text).__name__}")
    allow_missing_exercises = _page_names(allow_missing_exercises)
    root = parse(text)
    found = check_roles(root) + check_mailto(root) + check_numbering(root) + check_alt_text(root) + check_indexing(root)
    found += check_network(root, Path(path) if path else Path(name), site)
    stem, chapter = Path(name).stem, chapter_number(root)
    if chapter is not None:
        if not has_exercises(root) and stem not in allow_missing_exercises:
            found.append(("exercises", f"chapter {chapter} has no Exercises section"))
        elif has_exercises(root) and stem in allow_missing_exercises:
            found.append(("exercises", "has an Exercises section now: drop it from --allow-missing-exercises"))
    return found


ARXIV = re.compile(r"arXiv:\s?(\d{4}\.\d{4,5})")
ET_AL = re.compile(r"\b([A-Z][A-Za-z\-]+) et al\.")


def check_citations(pages, references):
    """``citation``: ``(page, kind, message)`` for each arXiv number or "Name et al." of ``pages`` missing from ``references``.

    ``pages`` maps a page's name to its prose; ``references`` is the text of the
    References page.

    Examples
    --------
    >>> check_citations({"a.html": "as Cui et al., arXiv:2505.22617, and Gao et al. show"},
    ...                 "Cui, G. ... 2025. arXiv:2505.22617.")
    [('a.html', 'citation', "'Gao et al.' is cited but the References page does not list Gao")]
    """
    found = []
    for page, text in pages.items():
        for number in sorted(set(ARXIV.findall(text))):
            if number not in references:
                found.append((page, "citation", f"arXiv:{number} is cited but the References page does not list it"))
        for name in sorted(set(ET_AL.findall(text))):
            if name not in references:
                found.append((page, "citation", f"'{name} et al.' is cited but the References page does not list {name}"))
    return found


def scan_site(site, allow_missing_exercises=()):
    """Every defect of a built site, as ``(page, kind, message)``; raises for a site that is not one."""
    allow_missing_exercises = _page_names(allow_missing_exercises)
    site = Path(site)
    if not (site / "index.html").is_file():
        raise ValueError(f"site: expected a built HTML site with an index.html, got {str(site)!r}")
    pages = [p for p in sorted(site.rglob("*.html"))
             if not {"_static", "_sources"} & set(p.relative_to(site).parts)]
    stems = {p.stem for p in pages if p.parent == site}
    unknown = sorted(set(allow_missing_exercises) - stems)
    if unknown:
        raise ValueError(f"allow_missing_exercises: expected page names of the site, got {unknown}")
    found, prose = [], {}
    for page in pages:
        rel = page.relative_to(site).as_posix()
        if rel in SKIP_PAGES:
            continue
        allowed = allow_missing_exercises if page.parent == site else ()
        text = page.read_text(errors="replace")
        for kind, message in scan_page(text, rel, page, site, allowed):
            found.append((rel, kind, message))
        if page.parent == site and rel != "references.html":
            prose[rel] = " ".join(_prose(parse(text), []))
    if (site / "references.html").is_file():
        references = " ".join(parse((site / "references.html").read_text(errors="replace")).text().split())
        found += check_citations(prose, references)
    return found


def _doctree_prose(doctree):
    """A doctree's prose: its text outside literal blocks, code, math and raw HTML."""
    from docutils import nodes

    skip = (nodes.literal_block, nodes.literal, nodes.math, nodes.math_block, nodes.raw, nodes.doctest_block)
    parts = []
    for node in doctree.findall(nodes.Text):
        parent, inside = node.parent, False
        while parent is not None:
            if isinstance(parent, skip):
                inside = True
                break
            parent = parent.parent
        if not inside:
            parts.append(node.astext())
    return " ".join(parts)


def _check_doctree(app, doctree, docname):
    """``doctree-resolved``: the indexing check of one page, as warnings (``sphinx-build -W`` fails)."""
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    for kind, message in check_indexing_text(_doctree_prose(doctree)):
        logger.warning(f"scan_site: {kind}: {message}", location=docname, type="scan_site", subtype=kind)


def setup(app):
    """The indexing check as a Sphinx extension (``extensions = [..., "scan_site"]``)."""
    app.connect("doctree-resolved", _check_doctree)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", help="the built HTML folder (docs/_build/html)")
    parser.add_argument("--allow-missing-exercises", default="", metavar="PAGES",
                        help="comma-separated chapter pages known to lack exercises (a page listed "
                             "here that has them is reported, so the list cannot go stale)")
    args = parser.parse_args(argv)
    allowed = tuple(p.strip() for p in args.allow_missing_exercises.split(",") if p.strip())
    try:
        found = scan_site(args.site, allowed)
    except ValueError as err:
        parser.error(str(err))
    for page, kind, message in found:
        print(f"{page}: {kind}: {message}")
    pages = len({p for p, _, _ in found})
    print(f"scan_site: {len(found)} defect(s) on {pages} page(s)" if found else "scan_site: no defects")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
