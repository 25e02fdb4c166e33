"""The check report, computed when the notes are built.

``.. check-report::`` runs every suite of :func:`numeric.run_suites` (once per
build) and renders one part per suite, with the label ``checks-<suite>`` (its
underscores written as hyphens: ``checks-group-baselines``):
a table of each check's name, value, tolerance, kind and whether it passed, and
a line with the suite's totals.  A chapter links its own rows with
``:ref:`the report's rows <checks-returns>```.  A suite that fails or breaks is a warning, so
``sphinx-build -W`` does not publish a report with a failed check.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)
_RESULT: dict = {}


def _run():
    if "checks" not in _RESULT:
        from numeric import run_suites

        _RESULT["checks"], _RESULT["errors"] = run_suites()
    return _RESULT["checks"], _RESULT["errors"]


def _cell(text: str, literal: bool = False) -> nodes.entry:
    para = nodes.paragraph()
    para += nodes.literal(text=text) if literal else nodes.Text(text)
    return nodes.entry("", para)


def _table(rows) -> nodes.table:
    header = ("check", "value", "tolerance", "kind", "passed")
    table = nodes.table(classes=["check-report"])
    group = nodes.tgroup(cols=len(header))
    table += group
    group += [nodes.colspec(colwidth=w) for w in (60, 12, 12, 8, 8)]
    group += nodes.thead("", nodes.row("", *[_cell(h) for h in header]))
    group += nodes.tbody("", *[nodes.row("", _cell(c.name), _cell(f"{c.value:.3g}", True), _cell(f"{c.tol:.3g}", True),
                                         _cell(c.kind), _cell("yes" if c.passed else "NO")) for c in rows])
    return table


class CheckReport(SphinxDirective):
    """Every suite's checks, run at build time, one section per suite."""

    def run(self):
        import numeric  # noqa: F401  (imports the topic modules, which register their suites)
        from numeric.checks import SUITES

        for module in ("numeric.score_function", "numeric.baselines", "numeric.group_baselines", "numeric.returns",
                       "numeric.gradient_weights", "numeric.trust_region", "numeric.off_policy", "numeric.losses",
                       "numeric.variants"):
            self.env.note_dependency(__import__(module, fromlist=["_"]).__file__)
        checks, errors = _run()
        out = []
        total = nodes.paragraph()
        passed = sum(c.passed for c in checks)
        total += nodes.Text(f"{len(checks)} checks in {len(SUITES)} suites, computed when these pages were built: "
                            f"{passed} passed, {len(checks) - passed} failed" + (f", {len(errors)} suites broke." if errors else "."))
        out.append(total)
        for suite in SUITES:
            rows = [c for c in checks if c.suite == suite]
            label = f"checks-{suite.replace('_', '-')}"
            target = nodes.target("", "", ids=[label], names=[label])
            self.state.document.note_explicit_target(target, target)
            heading = nodes.rubric(text=f"The {suite} suite")
            summary = nodes.paragraph()
            summary += nodes.Text(f"{sum(c.passed for c in rows)} of {len(rows)} checks passed")
            summary += nodes.Text(f"; the suite broke: {errors[suite]}" if suite in errors else ".")
            out += [target, heading, summary, _table(rows)]
            for c in rows:
                if not c.passed:
                    logger.warning(f"check_report: {suite}: {c.name} failed ({c.value:.3g} > {c.tol:.3g})", location=self.get_location())
            if suite in errors:
                logger.warning(f"check_report: the suite {suite} broke: {errors[suite]}", location=self.get_location())
        return out


def setup(app):
    app.add_directive("check-report", CheckReport)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
