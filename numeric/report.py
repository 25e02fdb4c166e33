"""The check report: run every registered cross-check and print the table.

``python -m numeric`` (or the ``pg-identities-report`` console script) imports
every topic module, runs their suites, prints one row per check — name, value,
tolerance, kind, pass — and ends with the line ``N passed, M failed``.  A suite
that breaks with an exception is listed under the table and counts as a failure.
The exit status is 0 only when everything passed.
"""

from __future__ import annotations

import argparse
import sys

from .checks import SUITES, Check, run_suites

__all__ = ["format_report", "main"]


def format_report(checks: list[Check], errors: dict[str, str]) -> str:
    """The report table as text.

    Examples
    --------
    >>> from numeric.checks import Check
    >>> from numeric.report import format_report
    >>> print(format_report([Check("a == b", 1e-16, 1e-14, "exact", "demo")], {}))
    suite  check   value     tol       kind   pass
    demo   a == b  1.00e-16  1.00e-14  exact  yes
    <BLANKLINE>
    1 passed, 0 failed
    """
    rows = [("suite", "check", "value", "tol", "kind", "pass")]
    for c in checks:
        rows.append((c.suite or "-", c.name, f"{c.value:.2e}", f"{c.tol:.2e}", c.kind, "yes" if c.passed else "NO"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    for name, err in errors.items():
        lines.append(f"suite {name} stopped: {err}")
    passed = sum(c.passed for c in checks)
    failed = len(checks) - passed + len(errors)
    lines += ["", f"{passed} passed, {failed} failed"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m numeric``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m numeric", description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", help=f"suites to run (default: all of {', '.join(SUITES)})")
    parser.add_argument("--list", action="store_true", help="list the suites and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(SUITES))
        return 0
    checks, errors = run_suites(args.suites or None)
    print(format_report(checks, errors))
    return 0 if all(c.passed for c in checks) and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
