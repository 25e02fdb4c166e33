r"""How a report shows itself in a notebook: the verdict on one line, the derivation beneath it, the table.

:class:`ReportTable` is a table that prints as aligned text (it *is* that text,
a ``str``) and renders as an HTML ``<table>``; :func:`report_html` stacks a
report's parts in one column no wider than 900 px, so they stay legible in a
notebook or on a phone.  The derivation is MathJax-renderable ``$$...$$``;
every piece of user text (a function's name, a reason quoting it) is escaped.

Examples
--------
>>> from derivations.variants import ReportTable
>>> t = ReportTable(("G", "c"), [("2", "1"), ("3", "1")])
>>> print(t)
G  c
2  1
3  1
>>> t.header, t.rows
(('G', 'c'), (('2', '1'), ('3', '1')))
>>> print(t._repr_html_().splitlines()[1])
<thead><tr><th>G</th><th>c</th></tr></thead>
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

__all__ = ["ReportTable", "report_html"]

VERDICT_CLASS = "pgi-verdict"
"""The class of the one element that holds a report's verdict."""


class ReportTable(str):
    """Rows under a header: prints as the aligned text it is, renders as an HTML table.

    Parameters
    ----------
    header : sequence of str
        The column names.
    rows : iterable of sequences
        The cells, already formatted as text (each row as long as the header).
    text : str, optional
        The text to print, when a table keeps an established plain-text layout;
        default: the columns left-aligned, two spaces apart.
    """

    header: tuple
    rows: tuple

    def __new__(cls, header: Sequence[str], rows: Iterable[Sequence], text: str | None = None):
        header = tuple(str(h) for h in header)
        rows = tuple(tuple(str(c) for c in row) for row in rows)
        if any(len(row) != len(header) for row in rows):
            raise ValueError(f"rows must each have {len(header)} cells (one per header cell)")
        if text is None:
            widths = [max(len(c) for c in col) for col in zip(header, *rows)]
            text = "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in (header, *rows))
        self = super().__new__(cls, text)
        self.header, self.rows = header, rows
        return self

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self.rows)
        return f"<table class='pgi-table'>\n<thead><tr>{head}</tr></thead>\n<tbody>{body}</tbody>\n</table>"


def report_html(verdict: str, *, reason: str = "", latex: str | None = None, table: ReportTable | None = None,
                notes: Sequence[str] = (), more: Sequence[tuple[str, str]] = (), tables: Sequence[tuple[str, ReportTable]] = ()) -> str:
    """A report as one stacked column: verdict, reason, derivation (``$$...$$``), notes, table, folded extras.

    ``more`` holds ``(summary, latex)`` pairs shown folded (``<details>``), e.g. one
    derivation per group size; ``tables`` holds ``(summary, table)`` pairs shown
    folded the same way, e.g. the measurements behind the facts.  All text is
    escaped; the LaTeX too (MathJax reads the text, so ``r < 1`` survives as ``r &lt; 1``).
    """
    parts = [f"<p class='{VERDICT_CLASS}'><strong>{html.escape(verdict)}</strong></p>"]
    if reason:
        parts.append(f"<p>{html.escape(reason)}</p>")
    if latex:
        parts.append(f"<div class='pgi-derivation' style='overflow-x:auto'>{html.escape(latex)}</div>")
    if notes:
        parts.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    if table is not None:
        parts.append(f"<div style='overflow-x:auto'>{table._repr_html_()}</div>")
    for summary, folded in tables:
        parts.append(f"<details><summary>{html.escape(summary)}</summary><div style='overflow-x:auto'>{folded._repr_html_()}</div></details>")
    for summary, tex in more:
        parts.append(f"<details><summary>{html.escape(summary)}</summary>"
                     f"<div class='pgi-derivation' style='overflow-x:auto'>{html.escape(tex)}</div></details>")
    return "<div class='pgi-report' style='max-width:900px'>\n" + "\n".join(parts) + "\n</div>"
