/* Fit each rendered derivation (and any other display formula) to the text column.
 *
 * A derivation is an `aligned` block, one step a row:  lhs &= rhs && reason.
 * When a block is wider than the column, it is typeset again with each reason
 * on its own row under its step; if it is still too wide, a long left-hand
 * side gets a row of its own too; a block that still does not fit is scaled
 * down (not below 80 %), and only then scrolls.  Any other display formula
 * that is too wide is only scaled down.  Nothing is loaded from the
 * network: this runs on the MathJax copy shipped with the pages.
 */
(function () {
  "use strict";
  var REASON = "&& \\color{gray}";

  function splitRows(tex) {
    var m = tex.replace(/^\s*\\begin\{split\}|\\end\{split\}\s*$/g, "")
      .match(/^\s*\\begin\{aligned\}\n([\s\S]*)\n\\end\{aligned\}\s*$/);
    if (!m) return null;
    var rows = m[1].split(" \\\\\n").map(function (line) {
      var at = line.indexOf("&"), why = line.lastIndexOf(REASON);
      if (at < 0 || why < at) return null;
      return { lhs: line.slice(0, at).trim(), step: line.slice(at, why).trim(), reason: line.slice(why + 3).trim() };
    });
    return rows.indexOf(null) >= 0 ? null : rows;
  }

  function stacked(rows, lhsAlone) {
    var out = [];
    rows.forEach(function (r) {
      if (lhsAlone && r.lhs) { out.push(r.lhs + " & "); out.push("& " + r.step.replace(/^&/, "")); }
      else out.push(r.lhs + " " + r.step);
      out.push("& \\qquad " + r.reason);
    });
    return "\\begin{aligned}\n" + out.join(" \\\\\n") + "\n\\end{aligned}";
  }

  function fits(box) {
    var c = box.querySelector("mjx-container") || box;
    return c.scrollWidth <= c.clientWidth + 1 && box.scrollWidth <= box.clientWidth + 1;
  }

  function retypeset(box, tex) {
    MathJax.typesetClear([box]);
    box.textContent = "\\[" + tex + "\\]";
    return MathJax.typesetPromise([box]);
  }

  function fit(box) {
    if (fits(box)) return Promise.resolve();
    var items = MathJax.startup.document.getMathItemsWithin(box);
    var inDerivation = box.closest("div.derivation") !== null;
    var rows = inDerivation && items.length === 1 ? splitRows(items[0].math) : null;
    var chain = Promise.resolve();
    if (rows) {
      box.classList.add("derivation-stacked");
      chain = retypeset(box, stacked(rows, false)).then(function () {
        if (!fits(box)) return retypeset(box, stacked(rows, true));
      });
    }
    return chain.then(function () {
      var c = box.querySelector("mjx-container");
      if (!c || fits(box)) return;
      var scale = Math.max(0.8, box.clientWidth / c.scrollWidth);
      var size = parseFloat(c.style.fontSize) || 100;  // MathJax's own scale, in %
      c.style.fontSize = Math.floor(size * scale) + "%";
    });
  }

  window.addEventListener("load", function () {
    if (!window.MathJax || !MathJax.startup) { document.body.dataset.derivationsFitted = "yes"; return; }
    MathJax.startup.promise.then(function () {
      var boxes = document.querySelectorAll("div.math");
      return Array.prototype.reduce.call(boxes, function (p, box) {
        return p.then(function () { return fit(box); });
      }, Promise.resolve()).then(function () { document.body.dataset.derivationsFitted = "yes"; });
    });
  });
})();
