"""Sphinx configuration for the pg-identities lecture notes.

Math renders offline: MathJax is copied from the ``sphinx-mathjax-offline``
package into ``_static``; no page loads anything from the network.
"""

import os
import sys
import warnings

from sphinx.deprecation import RemovedInSphinx10Warning

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "docs", "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")

import site_layout  # noqa: E402  (docs/_ext, on the path above)

# sphinx-autodoc-typehints 3.6 calls an API that Sphinx 9 deprecates; not ours to fix
warnings.filterwarnings("ignore", category=RemovedInSphinx10Warning)

project = "pg-identities"
author = "pg-identities developers"
copyright = "2026, pg-identities developers"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.napoleon",
    "sphinx_autodoc_typehints",
    "sphinx.ext.viewcode",
    "matplotlib.sphinxext.plot_directive",
    "sphinx-mathjax-offline",
    "sphinxcontrib.bibtex",
    "sphinx_proof",
    "sphinx_copybutton",
    "sphinx_togglebutton",
    "derivation_directive",
    "check_report",
    "notation",
    "check_widths",
    "scan_site",
    "site_layout",
]

# every derivation is measured in headless Chromium at 1,280 and 390 px after the build
# (docs/_ext/check_widths.py): "auto" measures when chromium is installed, "require" (CI) also
# fails when it is not, "off" skips it
check_widths = os.environ.get("PGI_CHECK_WIDTHS", "auto")

# the notation registry (derivations/symbols.py), checked by the build (docs/_ext/notation.py):
# a docstring on the API page uses the letters of its topic's page
notation_module_pages = {
    "iid_groups": "group_baselines", "policy": "score_function", "methods": "losses",
    "corrections": "off_policy", "readings": "variants", "token_losses": "losses",
    # the loss checker's execution and the trainers' questions are the chapter "A loss as it runs"
    **{f"variants.{m}": "execution" for m in ("execution", "worlds", "trainer_conventions", "trainer_loss",
                                               "answers", "questions", "divergence_questions")},
}
# the changelog names the letters that changed, each from its own page
notation_exempt_pages = ["notation", "changelog"]

exclude_patterns = ["_build"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["notes.css"]
html_js_files = ["derivation-layout.js"]
html_title = "pg-identities"

# a book-style theme made for lecture notes: chapter navigation on the left,
# previous/next links under every page, the page's own contents on the right
html_theme = "sphinx_book_theme"
# chapters are numbered, and theorems and figures counted within each: "Theorem 3.1"
numfig_secnum_depth = 1

# the theme's sidebar repeats the header's search field; keep the header's
html_sidebars = {"**": ["navbar-logo.html", "icon-links.html", "sbt-sidebar-nav.html"]}
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "show_prev_next": True,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
}

# the papers, cited where each estimator is used (docs/references.rst lists them)
bibtex_bibfiles = ["refs.bib"]
bibtex_default_style = "plain"
bibtex_reference_style = "author_year"

# copy the code of an example, without its prompts and output
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True

# theorem and proof blocks, numbered per chapter
proof_number_within_section = False

# offline MathJax 3 (copied by sphinx-mathjax-offline); load nothing from a CDN
mathjax3_config = {
    "tex": {"macros": {"E": r"\mathbb{E}", "sg": r"\operatorname{sg}"}},
    "options": {"enableMenu": False},
}

autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autosummary_generate = False
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
typehints_use_rtype = False
typehints_document_rtype = True
always_document_param_types = False

# one numbered figure per plot, its source folded under it (see docs/_ext/site_layout.py)
plot_include_source = True
plot_template = site_layout.PLOT_TEMPLATE
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]
plot_rcparams = {"figure.figsize": (6.4, 3.6), "font.size": 11, "legend.fontsize": 10}

nitpicky = False
suppress_warnings = []
