"""Measure the built pages in headless Chromium: does anything scroll the page sideways?

    python docs/_ext/check_widths.py docs/_build/html [--width 390] [--pages a,b]

Each page is copied into a frame of the asked width, with a small script that waits for the math to be laid out,
then writes into the page what it measured: the page's scroll width against the
window's, and every table, code block or formula wider than its box (those
scroll inside their own box, which is allowed) or sticking out of the window
(which is not). Chromium prints the page after the script ran (``--dump-dom``).
From 992 px it also clicks the visible "Contents" button of a page with
sections and reports whether the page's contents open (or show as a sidebar).
Needs ``chromium`` on the PATH; not part of CI. Exit status 1 when a page
scrolls sideways or has no working contents menu.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = r"""
<script>
window.addEventListener("load", function () {
  function measure() {
    var vw = document.documentElement.clientWidth, out = {viewport: vw,
      page: document.documentElement.scrollWidth, sticking_out: [], scrolling_boxes: []};
    document.querySelectorAll("article *").forEach(function (el) {
      var r = el.getBoundingClientRect();
      var hidden = false;
      for (var p = el.parentElement; p; p = p.parentElement) {
        var ox = getComputedStyle(p).overflowX;
        if (ox === "auto" || ox === "scroll" || ox === "hidden") {
          var pr = p.getBoundingClientRect();
          if (pr.right <= vw + 1) { hidden = true; break; }
        }
      }
      if (r.width > 0 && r.right > vw + 1 && !hidden)
        out.sticking_out.push(el.tagName.toLowerCase() + "." + el.className + " right=" + Math.round(r.right));
    });
    document.querySelectorAll(".pst-scrollable-table-container, div.highlight pre, div.math").forEach(function (el) {
      if (el.scrollWidth > el.clientWidth + 1)
        out.scrolling_boxes.push(el.className + " " + el.scrollWidth + " in " + el.clientWidth);
    });
    out.tables = Array.prototype.map.call(document.querySelectorAll("article table"), function (t) {
      return Math.round(t.getBoundingClientRect().width) + " in " + t.parentElement.clientWidth; });
    out.contents = contents(vw);
    parent.postMessage(JSON.stringify(out), "*");
  }
  // from 992 px a page with sections shows its contents: as a sidebar, or as a menu
  // that the visible "Contents" button opens (clicked here, after measuring)
  function contents(vw) {
    if (vw < 992) return "";
    var side = document.querySelector("div.bd-sidebar-secondary");
    if (side && side.offsetWidth > 0 && side.querySelector("a")) return "sidebar";
    if (!document.querySelector(".bd-sidebar-secondary a, dialog a.nav-link")) return "none (no sections)";
    var visible = Array.prototype.filter.call(document.querySelectorAll(".secondary-toggle"),
      function (b) { return b.offsetWidth > 0; });
    if (!visible.length) return "NO CONTENTS BUTTON";
    visible[0].click();
    var open = document.querySelector("dialog[open]");
    return open && open.querySelector("a") ? "menu opens" : "CONTENTS BUTTON OPENS NOTHING";
  }
  var wait = window.MathJax && MathJax.startup ? MathJax.startup.promise : Promise.resolve();
  wait.then(function () { setTimeout(measure, 500); });
});
</script>
"""

# headless Chromium's window is at least 500 px wide: the page is measured in a frame
# of the width asked for, and posts what it measured to the frame's parent
FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe src="{page}" style="width:{width}px;height:1900px;border:0"></iframe>
<script>window.addEventListener("message", function (e) {{
  var pre = document.createElement("pre"); pre.id = "width-probe"; pre.textContent = e.data;
  document.body.appendChild(pre); }});</script></body></html>"""

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=20000"]


def measure(site: Path, page: str, width: int) -> dict:
    """What the probe measured on one page of a copy of the site."""
    frame = site / f"_frame_{page}"
    frame.write_text(FRAME.format(page=page, width=width))
    with tempfile.TemporaryDirectory() as profile:
        cmd = ["chromium", *FLAGS, f"--user-data-dir={profile}", f"--window-size={max(width, 500)},2000",
               "--dump-dom", frame.as_uri()]
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=180).stdout
    m = re.search(r'<pre id="width-probe">(.*?)</pre>', dom, re.S)
    if not m:
        raise RuntimeError(f"{page}: the probe did not run")
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site")
    parser.add_argument("--width", type=int, default=390)
    parser.add_argument("--pages", default="", help="comma-separated page names (default: every top-level page)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "site"
        shutil.copytree(args.site, copy)
        names = [p.strip() + ".html" for p in args.pages.split(",") if p.strip()] or sorted(
            p.name for p in copy.glob("*.html") if p.name not in {"genindex.html", "search.html"} and not p.name.startswith("_"))
        bad = 0
        for name in names:
            page = copy / name
            page.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
            out = measure(copy, name, args.width)
            sideways = out["page"] > out["viewport"]
            no_contents = out["contents"].isupper()
            bad += sideways or no_contents
            print(f"{name} @ {args.width}px: page {out['page']} in {out['viewport']}"
                  f"{'  SCROLLS SIDEWAYS' if sideways else ''}; tables {out['tables']}"
                  + (f"; contents: {out['contents']}" if out["contents"] else ""))
            for what in out["sticking_out"][:8]:
                print(f"    sticks out: {what}")
            for what in out["scrolling_boxes"][:8]:
                print(f"    scrolls in its box: {what}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
