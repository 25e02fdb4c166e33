/* Fit each rendered derivation (and any other display formula) to the text column.
 *
 * A derivation is an `aligned` block, one step a row:  lhs &= rhs && reason.
 * Its steps also come as data (a JSON script beside the formula): each side cut
 * at its top-level sum, the relation, the reason.  When the block is wider than
 * the column it is typeset again, in this order, until it fits:
 *   1. each reason on its own row under its step;
 *   2. a step's left-hand side on a row of its own, starting where the
 *      relations are aligned (so every line starts at the same place);
 *   3. long sides broken at their top-level sums into two, three, ... lines,
 *      each continuation line led by its sign.
 * A block that still does not fit is scaled down (not below 80 %, 70 % in a
 * column narrower than 600 px), and only then scrolls. Any other display
 * formula that is too wide is set again with its side-by-side parts (separated
 * by \qquad at the top level) one under the other, then also broken before
 * its top-level relations, and then scaled down like a derivation.
 * Nothing is loaded from the network: this runs on the MathJax copy shipped
 * with the pages. When it has finished, <body data-derivations-fitted="yes">.
 */
(function () {
  "use strict";

  function fits(box) {
    var c = box.querySelector("mjx-container") || box;
    return c.scrollWidth <= c.clientWidth + 1 && box.scrollWidth <= box.clientWidth + 1;
  }

  function retypeset(box, tex) {
    MathJax.typesetClear([box]);
    box.textContent = "\\[" + tex + "\\]";
    return MathJax.typesetPromise([box]);
  }

  // a rough width of a piece of LaTeX: its characters without the commands' names and braces
  function size(tex) {
    return tex.replace(/\\(left|right|Bigl|Bigr|mathrm|operatorname|text|mathbb|color)\b/g, "")
              .replace(/\\[A-Za-z]+/g, "x").replace(/[{}\s]/g, "").length;
  }

  // pack the pieces of one side into lines of at most `budget` (at least one piece a line)
  function lines(pieces, budget, sep) {
    var out = [], line = "";
    sep = sep || " ";
    pieces.forEach(function (p) {
      if (line && size(line + p) > budget) { out.push(line); line = p; }
      else line = line ? line + sep + p : p;
    });
    if (line) out.push(line);
    return out;
  }

  function layout(rows, under, alone, budget) {
    var out = [];
    rows.forEach(function (r) {
      var lhs = lines(r.lhs, budget), rhs = lines(r.rhs, budget);
      var rel = r.rel ? r.rel + " " : "\\quad ";
      if (lhs.length && (alone || lhs.length > 1)) {
        // in the relations' column, so that a long left side does not push every right side over
        lhs.forEach(function (l, k) { out.push("& " + (k ? "\\quad " : "") + l); });
        lhs = [];
      }
      rhs.forEach(function (l, k) {
        var line = (k === 0 ? (lhs.join(" ") + " &" + rel) : "& \\quad ") + l;
        if (!under && k === rhs.length - 1 && r.reason.length) line += " && " + r.reason.join(" \\quad ");
        out.push(line);
      });
      if (under) lines(r.reason, budget, " \\quad ").forEach(function (l) { out.push("& \\qquad " + l); });
    });
    return "\\begin{aligned}\n" + out.join(" \\\\\n") + "\n\\end{aligned}";
  }

  function candidates(rows) {
    var longest = 0;
    rows.forEach(function (r) {
      longest = Math.max(longest, size(r.lhs.join(" ")), size(r.rhs.join(" ")), size(r.reason.join(" ")));
    });
    var out = [[true, false, Infinity], [true, true, Infinity]];
    for (var k = 2; k <= 12 && longest / k >= 12; k++) out.push([true, true, Math.ceil(longest / k)]);
    return out;
  }

  // split `tex` at each top-level match of `at` (outside braces, brackets, \left..\right
  // and environments); [] when the groups do not balance
  function topLevel(tex, at) {
    var parts = [], depth = 0, start = 0, m;
    for (var i = 0; i < tex.length; i++) {
      var rest = tex.slice(i);
      if ((m = /^\\(left|begin)\b/.exec(rest))) { depth++; i += m[0].length - 1; continue; }
      if ((m = /^\\(right|end)\b/.exec(rest))) { depth--; i += m[0].length - 1; continue; }
      if ((m = /^\\([A-Za-z]+|.)/.exec(rest)) && !at.exec(rest)) { i += m[0].length - 1; continue; }
      var ch = tex[i];
      if ("{[(".indexOf(ch) >= 0) depth++;
      else if ("}])".indexOf(ch) >= 0) depth--;
      else if (depth === 0 && (m = at.exec(rest))) {
        parts.push(tex.slice(start, i));
        start = i;
        i += m[0].length - 1;
      }
      if (depth < 0) return [];
    }
    if (depth !== 0) return [];
    parts.push(tex.slice(start));
    return parts.map(function (s) { return s.trim(); }).filter(function (s) { return s; });
  }

  var SIDE_BY_SIDE = /^\\qquad(?![A-Za-z])/;
  var RELATION = /^(=|<|>|\\(le|ge|leq|geq|ne|approx|iff)(?![A-Za-z]))/;

  // a display formula that is not a derivation, set again: its side-by-side parts one
  // under the other, and (with `chains`) each part broken before its relations
  function plainLayouts(tex) {
    var parts = topLevel(tex, SIDE_BY_SIDE).map(function (s) { return s.replace(/^\\qquad/, "").trim(); });
    var out = [];
    if (parts.length > 1) out.push("\\begin{gathered}" + parts.join(" \\\\ ") + "\\end{gathered}");
    var rows = [];
    parts.forEach(function (part) {
      topLevel(part, RELATION).forEach(function (piece, k) { rows.push("& " + (k ? "\\quad " : "") + piece); });
    });
    if (rows.length > parts.length) out.push("\\begin{aligned}" + rows.join(" \\\\ ") + "\\end{aligned}");
    return out;
  }

  function fit(box) {
    if (fits(box)) return Promise.resolve();
    var derivation = box.closest("div.derivation");
    var data = derivation && derivation.querySelector("script.derivation-rows");
    var chain = Promise.resolve();
    if (data) {
      var rows = JSON.parse(data.textContent);
      box.classList.add("derivation-stacked");
      candidates(rows).forEach(function (c) {
        chain = chain.then(function () {
          if (!box.dataset.fitted && !(c[0] && box.dataset.tried && fits(box))) {
            return retypeset(box, layout(rows, c[0], c[1], c[2])).then(function () {
              box.dataset.tried = "yes";
              if (fits(box)) box.dataset.fitted = "yes";
            });
          }
        });
      });
    } else if (!derivation && !box.querySelector(".eqno")) {
      var items = MathJax.startup.document.getMathItemsWithin(box);
      var tex = items.length === 1 ? items[0].math : "";
      if (!/\\begin|\\\\/.test(tex)) {
        plainLayouts(tex).forEach(function (layout) {
          chain = chain.then(function () { if (!fits(box)) return retypeset(box, layout); });
        });
      }
    }
    return chain.then(function () {
      var c = box.querySelector("mjx-container");
      if (!c || fits(box)) return;
      var start = parseFloat(c.style.fontSize) || 100;  // MathJax's own scale, in %
      var least = box.clientWidth < 600 ? 0.7 : 0.8;     // a phone's column: down to 70 %
      var size = start * Math.max(least, box.clientWidth / c.scrollWidth);
      c.style.fontSize = size + "%";
      while (!fits(box) && size > least * start + 0.5) {  // the fonts do not scale exactly: shrink in steps
        size = Math.max(least * start, size - 0.02 * start);
        c.style.fontSize = size + "%";
      }
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
