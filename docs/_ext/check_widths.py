"""Measure the built pages in headless Chromium: does every derivation fit its column, and does any page scroll sideways?

As a Sphinx extension (``extensions = [..., "check_widths"]``) it runs when the
HTML build has finished: every page is measured at 1,280 px and at 390 px, and
each defect is a warning, so ``sphinx-build -W`` fails on it:

* at 1,280 px, a rendered derivation (or any other display formula) whose
  content is wider than the text column after ``derivation-layout.js`` has laid
  it out (reasons under the steps, long sides broken at top-level sums and
  relations, at most a fifth smaller);
* at either width, a page that scrolls sideways.

``check_widths`` in ``conf.py`` (or ``-D check_widths=...``) says when to
measure: ``"auto"`` (default: measure when ``chromium`` is on the PATH, and say
so in the build's log when it is not), ``"require"`` (a missing Chromium is a
warning too; CI sets it) or ``"off"``; ``check_widths_at`` lists the widths
(default ``[1280, 390]``; a width under 1,280 px is checked for sideways
scrolling only).

As a script, on a built site::

    python docs/_ext/check_widths.py docs/_build/html [--width 1280] [--pages a,b]

prints what it measured and exits with 1 when a page has a defect.

All pages of one width are measured in one Chromium process: a frame page
holds one ``<iframe>`` per page, each page posts what it measured to the frame
once its math is laid out, and Chromium prints the frame (``--dump-dom``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WIDTHS = (1280, 390)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

PROBE = r"""
<script>
window.addEventListener("load", function () {
  function done() { return !window.MathJax || document.body.dataset.derivationsFitted === "yes"; }
  function measure() {
    var vw = document.documentElement.clientWidth;
    var column = document.querySelector("article.bd-article") || document.body;
    var out = {page: location.pathname.split("/").pop(), viewport: vw,
               scroll: document.documentElement.scrollWidth, column: Math.round(column.clientWidth), wide: []};
    document.querySelectorAll("div.math").forEach(function (box, k) {
      var c = box.querySelector("mjx-container") || box;
      var inner = c.firstElementChild || c;
      var natural = Math.max(c.scrollWidth, inner.getBoundingClientRect().width);
      if (natural > box.clientWidth + 1 || box.getBoundingClientRect().right > column.getBoundingClientRect().right + 1) {
        var title = box.closest("div.derivation");
        out.wide.push({index: k, width: Math.round(natural), box: box.clientWidth,
                       what: title ? title.querySelector("strong").textContent : box.textContent.slice(0, 60)});
      }
    });
    parent.postMessage(JSON.stringify(out), "*");
  }
  (function wait(n) {
    if (done() || n > 400) setTimeout(measure, 100); else setTimeout(function () { wait(n + 1); }, 50);
  })(0);
});
</script>
"""

FRAME = """<!DOCTYPE html><html><body style="margin:0">{frames}
<pre id="width-probe"></pre>
<script>var results = [], expected = {count};
window.addEventListener("message", function (e) {{
  results.push(JSON.parse(e.data));
  if (results.length === expected) document.getElementById("width-probe").textContent = JSON.stringify(results);
}});</script></body></html>"""


def chromium() -> str | None:
    """The Chromium binary on the PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def pages_of(site: Path) -> list[str]:
    """The top-level pages of a built site that a reader opens (not the index of names or the search page)."""
    return sorted(p.name for p in site.glob("*.html") if p.name not in {"genindex.html", "search.html", "py-modindex.html"}
                  and not p.name.startswith("_"))


def measure(site: Path, width: int, pages: list[str] | None = None, timeout: float = 300) -> list[dict]:
    """What the probe measured on each page of a copy of ``site`` at ``width`` px (one Chromium run)."""
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "site"
        shutil.copytree(site, copy, ignore=shutil.ignore_patterns("_sources", ".doctrees", "_modules"))
        names = pages or pages_of(copy)
        for name in names:
            page = copy / name
            page.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
        frames = "".join(f'<iframe src="{n}" style="width:{width}px;height:1200px;border:0;display:block"></iframe>' for n in names)
        (copy / "_widths.html").write_text(FRAME.format(frames=frames, count=len(names)))
        with tempfile.TemporaryDirectory() as profile:
            cmd = [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={max(width, 500)},1200",
                   "--virtual-time-budget=120000", "--dump-dom", (copy / "_widths.html").as_uri()]
            dom = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout
    m = re.search(r'<pre id="width-probe">(.*?)</pre>', dom, re.S)
    if not m or not m.group(1).strip():
        raise RuntimeError(f"the width probe did not report at {width} px (Chromium printed {len(dom)} characters)")
    text = m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return json.loads(text)


def defects(results: list[dict], width: int) -> list[tuple[str, str]]:
    """``(page, message)`` for each defect of one width's measurements (see the module docstring).

    Examples
    --------
    >>> defects([{"page": "a.html", "viewport": 1265, "scroll": 1265, "column": 900,
    ...           "wide": [{"index": 3, "width": 1451, "box": 900, "what": "A derivation"}]}], 1280)
    [('a.html', 'a display formula is wider than the text column at 1280 px: A derivation (1451 px in 900 px)')]
    >>> defects([{"page": "a.html", "viewport": 390, "scroll": 420, "column": 360, "wide": []}], 390)
    [('a.html', 'the page scrolls sideways at 390 px (420 px in 390 px)')]
    """
    out = []
    for r in results:
        if r["scroll"] > r["viewport"] + 1:
            out.append((r["page"], f"the page scrolls sideways at {width} px ({r['scroll']} px in {r['viewport']} px)"))
        if width >= 1280:
            for w in r["wide"]:
                out.append((r["page"], f"a display formula is wider than the text column at {width} px: "
                                       f"{' '.join(w['what'].split())} ({w['width']} px in {w['box']} px)"))
    return out


# ------------------------------------------------------------------ Sphinx


def check_built_site(app, exception):
    """``build-finished``: measure the HTML just built and warn on each defect."""
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    mode = str(app.config.check_widths)
    if exception is not None or mode == "off" or app.builder.format != "html":
        return
    if chromium() is None:
        message = "check_widths: chromium is not on the PATH, so the widths of the derivations were not measured"
        if mode == "require":
            logger.warning(message, type="check_widths", subtype="chromium")
        else:
            logger.info(message)
        return
    site = Path(app.outdir)
    for width in app.config.check_widths_at:
        try:
            results = measure(site, width)
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            logger.warning(f"check_widths: {err}", type="check_widths", subtype="probe")
            continue
        for page, message in defects(results, width):
            logger.warning(f"check_widths: {message}", location=page.removesuffix(".html"), type="check_widths", subtype="wide")


def setup(app):
    app.add_config_value("check_widths", "auto", "html")
    app.add_config_value("check_widths_at", list(WIDTHS), "html")
    app.connect("build-finished", check_built_site)
    return {"version": "0.2", "parallel_read_safe": True, "parallel_write_safe": True}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--pages", default="", help="comma-separated page names (default: every top-level page)")
    args = parser.parse_args(argv)
    pages = [p.strip() + ".html" for p in args.pages.split(",") if p.strip()] or None
    results = measure(Path(args.site), args.width, pages)
    for r in results:
        print(f"{r['page']} @ {args.width}px: page {r['scroll']} in {r['viewport']}, column {r['column']}")
        for w in r["wide"]:
            print(f"    wide: {' '.join(w['what'].split())[:70]} ({w['width']} px in {w['box']} px)")
    found = defects(results, args.width)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
