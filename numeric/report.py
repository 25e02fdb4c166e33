"""The check report: run every registered cross-check and print the table.

``python -m numeric`` (or the ``pg-identities-report`` console script) imports
every topic module, runs their suites, prints one row per check — suite,
value, tolerance, kind, pass, name — and ends with the line
``N passed, M failed``.  A suite that breaks with an exception is listed under
the table and counts as a failure.  The exit status is 0 only when everything
passed.

The table fits the terminal: a check's name, the last column, wraps onto
continuation lines.  ``--json`` prints the same content as one JSON object for
CI.  The checks use tiny tensors, so torch runs them on one thread (``--threads``
changes that); a pool of threads on a small, busy machine only adds overhead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import textwrap

from .checks import SUITES, Check, run_suites

__all__ = ["format_report", "report_json", "main"]

_HEADER = ("suite", "value", "tol", "kind", "pass", "check")
_MIN_NAME_WIDTH = 16


def _cells(c: Check) -> tuple[str, ...]:
    return (c.suite or "-", f"{c.value:.2e}", f"{c.tol:.2e}", c.kind, "yes" if c.passed else "NO", c.name)


def _require_report(checks, errors) -> None:
    """``checks`` a list of :class:`~numeric.checks.Check`, ``errors`` a dict from suite name to message."""
    if not isinstance(checks, (list, tuple)) or not all(isinstance(c, Check) for c in checks):
        raise TypeError(f"checks must be a list of Check records (from run_suites), got {type(checks).__name__}")
    if not isinstance(errors, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in errors.items()):
        raise TypeError(f"errors must be a dict from suite name to message (str to str), got {type(errors).__name__}")


def _summary(checks: list[Check], errors: dict[str, str]) -> tuple[int, int]:
    passed = sum(c.passed for c in checks)
    return passed, len(checks) - passed + len(errors)


def format_report(checks: list[Check], errors: dict[str, str], width: int | None = None) -> str:
    """The report table as text, at most ``width`` columns wide (``None``: no limit).

    The check's name is the last column; when a row would be wider than
    ``width``, the name wraps onto continuation lines under its column.  If
    that column would be narrower than 16 characters, every name goes on lines
    of its own under its row, indented by four spaces.

    Examples
    --------
    >>> from numeric.checks import Check
    >>> from numeric.report import format_report
    >>> rows = [Check("a == b", 1e-16, 1e-14, "exact", "demo"),
    ...         Check("the leave-one-out baseline is unbiased at G = 4", 2e-15, 1e-12, "exact", "demo")]
    >>> print(format_report(rows, {}))
    suite  value     tol       kind   pass  check
    demo   1.00e-16  1.00e-14  exact  yes   a == b
    demo   2.00e-15  1.00e-12  exact  yes   the leave-one-out baseline is unbiased at G = 4
    <BLANKLINE>
    2 passed, 0 failed
    >>> print(format_report(rows, {}, width=62))
    suite  value     tol       kind   pass  check
    demo   1.00e-16  1.00e-14  exact  yes   a == b
    demo   2.00e-15  1.00e-12  exact  yes   the leave-one-out
                                            baseline is unbiased
                                            at G = 4
    <BLANKLINE>
    2 passed, 0 failed
    """
    if width is not None and (not isinstance(width, int) or isinstance(width, bool) or width < 1):
        raise ValueError(f"width must be a positive int or None, got {width!r}")
    _require_report(checks, errors)
    rows = [_HEADER, *(_cells(c) for c in checks)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER) - 1)]
    indent = sum(widths) + 2 * len(widths)
    stacked = width is not None and width - indent < _MIN_NAME_WIDTH
    if stacked:  # too narrow for a name column: each name goes under its row
        indent = 4
    name_width = None if width is None else max(_MIN_NAME_WIDTH, width - indent)
    lines = []
    for r in rows:
        head = "  ".join(cell.ljust(w) for cell, w in zip(r, widths))
        name = [r[-1]] if name_width is None else textwrap.wrap(r[-1], name_width, break_on_hyphens=False) or [""]
        if stacked:
            lines.append(head.rstrip())
            lines += [" " * indent + part for part in name]
        else:
            lines.append(f"{head}  {name[0]}".rstrip())
            lines += [" " * indent + part for part in name[1:]]
    for suite, err in errors.items():
        lines += textwrap.wrap(f"suite {suite} stopped: {err}", width or 10**9, subsequent_indent="    ")
    passed, failed = _summary(checks, errors)
    lines += ["", f"{passed} passed, {failed} failed"]
    return "\n".join(lines)


def report_json(checks: list[Check], errors: dict[str, str]) -> str:
    """The report as one JSON object: ``checks``, ``errors``, ``passed``, ``failed``.

    A value that is NaN or infinite (such a check never passes) is written as a
    string, ``"nan"`` or ``"inf"``, so the output is strict JSON.

    Examples
    --------
    >>> import json
    >>> from numeric.checks import Check
    >>> from numeric.report import report_json
    >>> out = json.loads(report_json([Check("a == b", float("nan"), 1e-14, "exact", "demo")], {"x": "boom"}))
    >>> out["checks"][0]["value"], out["checks"][0]["passed"], out["passed"], out["failed"]
    ('nan', False, 0, 2)
    """

    def number(x: float):
        return x if math.isfinite(x) else str(x)

    _require_report(checks, errors)

    passed, failed = _summary(checks, errors)
    return json.dumps(
        {
            "checks": [
                {"suite": c.suite, "name": c.name, "value": number(c.value), "tol": number(c.tol), "kind": c.kind, "passed": c.passed}
                for c in checks
            ],
            "errors": errors,
            "passed": passed,
            "failed": failed,
        },
        indent=1,
        allow_nan=False,
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m numeric``; returns the exit status (2 for a usage error)."""
    if argv is not None and (not isinstance(argv, (list, tuple)) or not all(isinstance(a, str) for a in argv)):
        raise TypeError(f"argv must be a list of str (command-line arguments) or None, got {argv!r}")
    parser = argparse.ArgumentParser(
        prog="python -m numeric",
        description=__doc__.splitlines()[0],
        epilog=f"suites: {', '.join(SUITES)}",
    )
    parser.add_argument("suites", nargs="*", metavar="suite", help="suites to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the suites and exit")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object (for CI)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default: 1)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.suites if name not in SUITES]
    if unknown:
        parser.error(f"unknown suite {', '.join(map(repr, unknown))}; the suites are: {', '.join(SUITES)}")
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.list:
        print("\n".join(SUITES))
        return 0
    import torch

    torch.set_num_threads(args.threads)
    checks, errors = run_suites(args.suites or None)
    if args.json:
        text = report_json(checks, errors)
    else:
        text = format_report(checks, errors, width=shutil.get_terminal_size((100, 24)).columns)
    status = 0 if all(c.passed for c in checks) and not errors else 1
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `python -m numeric | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return status


if __name__ == "__main__":
    sys.exit(main())
