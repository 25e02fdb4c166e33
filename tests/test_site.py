"""The site scan (``docs/_ext/scan_site.py``) finds each defect kind on a seeded page.

Each test page is a small copy of what Sphinx writes (a numbered chapter title,
figure captions, math spans, an Exercises section), seeded with one defect: the
scan must report that defect's kind and nothing else, and the clean page must
pass. No Sphinx build runs here; CI scans the real site after building it.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

SCANNER = Path(__file__).resolve().parent.parent / "docs" / "_ext" / "scan_site.py"
_spec = importlib.util.spec_from_file_location("scan_site", SCANNER)
scan_site = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("scan_site", scan_site)
_spec.loader.exec_module(scan_site)


def figure(number, alt="The exact variance as a function of the baseline.", kind="Fig."):
    return (f'<figure class="align-default"><img alt="{alt}" class="plot-directive" '
            f'src="_images/baselines-{number[-1]}.png" /><figcaption><p>'
            f'<span class="caption-number">{kind} {number} </span>'
            f'<span class="caption-text">A caption.</span></p></figcaption></figure>')


def page(body="", title='<span class="section-number">2. </span>Baselines',
         head='<link rel="stylesheet" type="text/css" href="_static/notes.css?v=1" />'
              '<script src="_static/doctools.js?v=2"></script>',
         exercises=True):
    """A chapter as Sphinx writes it: a header title, the numbered h1, two figures, exercises."""
    exercises_html = ('<section id="exercises"><h2>Exercises<a class="headerlink" '
                      'href="#exercises">#</a></h2><p>Exercise 2.1</p></section>') if exercises else ""
    return (f"<!DOCTYPE html><html><head>{head}</head><body>"
            f"<div class=\"header\"><h1>Baselines</h1></div><article class=\"bd-article\">"
            f'<section id="baselines"><h1>{title}<a class="headerlink" href="#baselines">#</a></h1>'
            f'<p>A baseline <span class="math notranslate nohighlight">\\(b\\)</span> is free; '
            f'see <a class="reference external" href="https://github.com/volcengine/verl">verl</a> '
            f'and write to <a href="mailto:pg.identities@example.org">us</a>.</p>'
            f"{figure('2.1')}{figure('2.2')}{body}{exercises_html}</section></article></body></html>")


def kinds(html, **kw):
    return sorted({kind for kind, _ in scan_site.scan_page(html, **kw)})


def test_a_clean_page_passes():
    assert scan_site.scan_page(page()) == []


def test_code_is_not_prose():
    # a role shown as code, and \text{..\_..} inside a code example, are intended
    html = page("<pre>:math:`t-1` and \\text{active\\_clip}</pre><p><code>:math:`x`</code></p>")
    assert scan_site.scan_page(html) == []


@pytest.mark.parametrize(
    "body, kind",
    [
        ("<p><strong>array position :math:`t-1` holds step</strong></p>", "literal-role"),
        ("<p><em>see :func:`numeric.aggregate`</em></p>", "literal-role"),
        ("<p>as in :cite:p:`schulman2017ppo`</p>", "literal-role"),
        ('<p>Field <span class="math notranslate nohighlight">\\(\\text{active\\_clip}\\)</span></p>',
         "text-underscore"),
        ('<div class="math notranslate nohighlight">\\[\\textrm{clip\\_ratio} = 1\\]</div>', "text-underscore"),
        ('<p><a class="reference external" href="mailto:Pass&#37;&#52;&#48;k\'s">Pass@k’s</a></p>', "mailto"),
        ('<p><a href="mailto:someone@localhost">x</a></p>', "mailto"),
        (figure("2.4"), "numbering"),
        (figure("3.3"), "numbering"),
        (figure("2.1", kind="Theorem") + figure("2.3", kind="Theorem"), "numbering"),
        (figure("2.2", kind="Theorem"), "numbering"),
        ('<div class="math"><span class="eqno">(2.1)</span></div>'
         '<div class="math"><span class="eqno">(2.3)</span></div>', "numbering"),
        (figure("2.3", alt="_images/baselines-3.png"), "alt-text"),
        (figure("2.3", alt="baselines-3.png"), "alt-text"),
        (figure("2.3", alt=""), "alt-text"),
        ('<img src="https://example.org/logo.png" alt="logo" />', "network"),
        ('<script src="//cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>', "network"),
        ('<iframe src="http://example.org/"></iframe>', "network"),
        ('<img src="a.png" srcset="a.png 1x, https://example.org/a2.png 2x" alt="a" />', "network"),
        ("<style>@import url('https://fonts.googleapis.com/css2?family=Roboto');</style>", "network"),
        ("<p>The first row is row 1; rows 2 and 3 follow.</p>", "indexing"),
        ("<p>Turn 1 samples, turn 2 is scored.</p>", "indexing"),
        ("<p>answers 1 to 4</p>", "indexing"),
    ],
)
def test_each_seeded_defect_is_reported(body, kind):
    assert kinds(page(body)) == [kind]


@pytest.mark.parametrize(
    "head",
    [
        '<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/katex/dist/katex.min.css" />',
        '<link rel="preload" as="font" href="https://example.org/font.woff2" />',
        '<script defer="defer" src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>',
    ],
)
def test_a_head_that_loads_from_the_network_is_reported(head):
    assert kinds(page(head=head)) == ["network"]


def test_links_the_reader_follows_are_not_loads():
    head = '<link rel="canonical" href="https://example.org/baselines.html" />'
    assert scan_site.scan_page(page(head=head)) == []


def test_a_local_stylesheet_that_imports_a_font_is_reported(tmp_path):
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "notes.css").write_text(
        "@font-face { src: url('https://fonts.gstatic.com/s/roboto.woff2'); }\n")
    (tmp_path / "baselines.html").write_text(page())
    found = scan_site.scan_page(page(), "baselines.html", tmp_path / "baselines.html", tmp_path)
    assert [k for k, _ in found] == ["network"] and "fonts.gstatic.com" in found[0][1]


def test_numbering_messages_name_the_gap():
    (message,) = [m for _, m in scan_site.scan_page(page(figure("2.4")))]
    assert message == "Fig 2.4 follows Fig 2.2"


def test_a_chapter_without_exercises_is_reported():
    assert kinds(page(exercises=False), name="off_policy.html") == ["exercises"]


def test_an_unnumbered_page_needs_no_exercises():
    assert scan_site.scan_page(page(title="Conventions", exercises=False), name="conventions.html") == []


def test_allowed_missing_exercises_pass_and_go_stale():
    html = page(exercises=False)
    assert scan_site.scan_page(html, name="off_policy.html", allow_missing_exercises=("off_policy",)) == []
    # the allowance names one page, not every page
    assert kinds(html, name="variants.html", allow_missing_exercises=("off_policy",)) == ["exercises"]
    # once the chapter has exercises, the allowance must be dropped
    found = scan_site.scan_page(page(), name="off_policy.html", allow_missing_exercises=("off_policy",))
    assert [k for k, _ in found] == ["exercises"] and "drop it" in found[0][1]


def site(tmp_path, pages):
    for name, html in pages.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(html)
    return tmp_path


def test_scan_site_walks_the_pages(tmp_path):
    root = site(tmp_path, {
        "index.html": page(title="pg-identities", exercises=False),
        "baselines.html": page(),
        "off_policy.html": page(exercises=False),
        "_modules/numeric/losses.html": page(title="Source code", exercises=False,
                                            head='<script src="https://example.org/x.js"></script>'),
        "_static/vendor.html": page(figure("2.9")),  # the theme's files are not pages
        "genindex.html": page(figure("2.9")),
    })
    assert scan_site.scan_site(root) == [
        ("_modules/numeric/losses.html", "network", "<script> loads https://example.org/x.js"),
        ("off_policy.html", "exercises", "chapter 2 has no Exercises section"),
    ]
    assert scan_site.scan_site(root, ("off_policy",)) == [
        ("_modules/numeric/losses.html", "network", "<script> loads https://example.org/x.js"),
    ]


def test_bad_input_is_named(tmp_path):
    with pytest.raises(ValueError, match="site: expected a built HTML site"):
        scan_site.scan_site(tmp_path)
    root = site(tmp_path, {"index.html": page(title="x", exercises=False)})
    with pytest.raises(ValueError, match=r"allow_missing_exercises: expected page names.*'offpolicy'"):
        scan_site.scan_site(root, ("offpolicy",))
    with pytest.raises(TypeError, match="allow_missing_exercises: expected a tuple of page names"):
        scan_site.scan_site(root, "off_policy")


def test_bad_page_input_is_named():
    with pytest.raises(TypeError, match="text: expected the page's HTML as str, got bytes"):
        scan_site.scan_page(page().encode())
    with pytest.raises(TypeError, match="allow_missing_exercises: expected a tuple of page names"):
        scan_site.scan_page(page(), allow_missing_exercises="off_policy")


def test_main_exit_status_and_report(tmp_path, capsys):
    clean = site(tmp_path / "clean", {"index.html": page(title="x", exercises=False), "baselines.html": page()})
    assert scan_site.main([str(clean)]) == 0
    assert capsys.readouterr().out == "scan_site: no defects\n"
    broken = site(tmp_path / "broken", {"index.html": page(title="x", exercises=False),
                                        "baselines.html": page(exercises=False)})
    assert scan_site.main([str(broken)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "baselines.html: exercises: chapter 2 has no Exercises section",
        "scan_site: 1 defect(s) on 1 page(s)",
    ]
    assert scan_site.main([str(broken), "--allow-missing-exercises", "baselines"]) == 0
    with pytest.raises(SystemExit):
        scan_site.main([str(tmp_path / "missing")])


# --- the build-time touches of docs/_ext/site_layout.py --------------------------------------

_layout_spec = importlib.util.spec_from_file_location("site_layout", SCANNER.parent / "site_layout.py")
site_layout = importlib.util.module_from_spec(_layout_spec)
sys.modules.setdefault("site_layout", site_layout)
_layout_spec.loader.exec_module(site_layout)


def doctree(rst):
    from docutils.core import publish_doctree

    return publish_doctree(rst, settings_overrides={"report_level": 5, "halt_level": 5})


def render_plot_template(images=("baselines-1",), source="x = 1"):
    import jinja2

    caption = "\n" + "\n".join("      " + line for line in ["The variance of :math:`(R - b)\\,s`", "against b."])
    return jinja2.Template(site_layout.PLOT_TEMPLATE).render(
        images=[type("Img", (), {"basename": b}) for b in images], build_dir="plot_directive",
        default_fmt="png", options=[":class: plot-directive"], caption=caption,
        source_code="::\n\n" + "\n".join("    " + line for line in source.splitlines()) if source else "")


def test_one_figure_per_plot_and_its_source_folded():
    from docutils import nodes

    tree = doctree(render_plot_template(source="import numpy as np\nplt.plot([1, 2])"))
    (figure,) = tree.findall(nodes.figure)  # matplotlib's template wrote two: numbers skipped
    assert figure.next_node(nodes.caption).astext() == "The variance of (R - b)\\,s\nagainst b."
    (fold,) = tree.findall(nodes.admonition)
    assert {"dropdown", "plot-source"} <= set(fold["classes"])
    assert fold.next_node(nodes.literal_block).astext() == "import numpy as np\nplt.plot([1, 2])"
    assert not list(doctree(render_plot_template(source="")).findall(nodes.admonition))


def test_a_figure_without_alt_text_is_described_by_its_caption():
    from docutils import nodes

    tree = doctree(render_plot_template())
    site_layout.describe_figures(None, tree)
    assert tree.next_node(nodes.image)["alt"] == "The variance of (R - b) s against b."
    explicit = doctree(".. figure:: a.png\n   :alt: Two curves that cross at b*.\n\n   A caption.\n")
    site_layout.describe_figures(None, explicit)
    assert explicit.next_node(nodes.image)["alt"] == "Two curves that cross at b*."


@pytest.mark.parametrize("latex, plain", [
    (r"\mathbb{E}[(R - b)\,s]", "E[(R - b) s]"),
    (r"\lVert s(o)\rVert^2", "‖ s(o)‖^2"),
    (r"\frac{1}{G-1}\sum_{j \ne i} R_j", "1/(G-1) Σ_(j ≠ i) R_j"),
    (r"\mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})", "KL(π ‖ π_ref)"),
    (r"1-\varepsilon_l", "1-ε_l"),
])
def test_plain_math(latex, plain):
    assert site_layout.plain_math(latex) == plain


def test_one_hyphenated_name_per_cell_does_not_break():
    from docutils import nodes

    tree = doctree("=================== =========\nmode                note\n=================== =========\n"
                   "seq-mean-token-mean an empty row: 0\n=================== =========\n")
    site_layout.unbroken_cells(None, tree, "losses")
    cells = {e.astext(): "nowrap" in e["classes"] for e in tree.findall(nodes.entry)}
    assert cells == {"mode": False, "note": False, "seq-mean-token-mean": True, "an empty row: 0": False}


def test_words_and_code_leave_a_cells_formula_so_they_wrap():
    from docutils import nodes

    tree = doctree("=== ========\nx   y\n=== ========\na   :math:`1/C\\ (C = \\mathtt{B * max\\_len})`\n"
                   "b   :math:`\\text{on policy } (w(1, A) = 1)`\nc   :math:`\\begin{cases} 0 & \\text{for } r < 1 \\end{cases}`\n"
                   "=== ========\n")
    site_layout.split_cell_math(None, tree, "losses")
    cells = [e for e in tree.findall(nodes.entry)]
    kinds = [[type(n).__name__ for n in c.children[0].children] for c in cells[3::2]]
    assert kinds == [["math", "Text", "literal", "math"], ["Text", "math"], ["math"]]
    assert cells[3].next_node(nodes.literal).astext() == "B * max_len"  # unescaped: it is code, not TeX
    assert [m.astext() for m in cells[3].findall(nodes.math)] == ["1/C\\ (C =", ")"]
    # a \text inside an environment stays in its formula: cutting it out broke the cases
    assert cells[7].next_node(nodes.math).astext() == "\\begin{cases} 0 & \\text{for } r < 1 \\end{cases}"


def test_a_long_word_with_equals_may_break_after_it():
    from docutils import nodes

    tree = doctree("=== =======================\nx   arguments\n=== =======================\n"
                   "a   norm=num_items_in_batch\nb   a = b\n=== =======================\n")
    site_layout.break_after_equals(None, tree, "losses")
    (wbr,) = tree.findall(nodes.raw)
    assert wbr.astext() == "<wbr>" and wbr.parent.astext() == "norm=<wbr>num_items_in_batch"


@pytest.mark.parametrize("body", [
    "<p>The first row is row 0; rows 1 and 2 follow.</p>",
    "<p>turn 0, then turn 1</p>",
    "<p>the answer labelled 1 of the symbolic group</p>",  # a label, not a position
    "<p>the array <code>row 1</code></p>",  # code is not prose
    '<p><span class="math notranslate nohighlight">\\(\\text{row } 1\\)</span></p>',  # nor is math
])
def test_indexing_from_zero_and_labels_pass(body):
    assert kinds(page(body)) == []


def test_every_citation_is_on_the_references_page(tmp_path):
    root = site(tmp_path, {
        "index.html": page(title="pg-identities", exercises=False),
        "baselines.html": page("<p>As Cui et al. show (arXiv:2505.22617), and Gao et al. (arXiv:2511.20347).</p>"),
        "references.html": page("<p>Cui, G. et al. The entropy mechanism. arXiv:2505.22617.</p>",
                                title="References", exercises=False),
    })
    assert scan_site.scan_site(root) == [
        ("baselines.html", "citation", "arXiv:2511.20347 is cited but the References page does not list it"),
        ("baselines.html", "citation", "'Gao et al.' is cited but the References page does not list Gao"),
    ]
