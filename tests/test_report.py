"""The command line of the check report: usage errors, terminal width, JSON output."""

import json

import pytest

from numeric.checks import SUITES, Check
from numeric.report import format_report, main, report_json


def test_an_unknown_suite_is_a_usage_error_that_lists_the_suites(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["nosuch"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m numeric")
    assert "unknown suite 'nosuch'" in err
    assert all(name in err for name in SUITES)
    assert "Traceback" not in err


def test_a_bad_thread_count_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--threads", "0", "score_function"])
    assert exc.value.code == 2
    assert "--threads must be at least 1" in capsys.readouterr().err


def test_list_names_every_suite_in_order(capsys):
    assert main(["--list"]) == 0
    assert capsys.readouterr().out.split() == list(SUITES)


@pytest.mark.xdist_group("suite score_function")  # shares the suite's one run with test_checks
@pytest.mark.parametrize("columns", [60, 80, 120])
def test_the_report_fits_the_terminal(capsys, monkeypatch, columns, suite_run):
    checks, errors = suite_run("score_function")
    assert max(len(line) for line in format_report(checks, errors).splitlines()) > 60  # would overflow unwrapped
    monkeypatch.setenv("COLUMNS", str(columns))
    # main formats the suite's run of this worker (main running the suites itself: the JSON test below, and test_checks)
    monkeypatch.setattr("numeric.report.run_suites", lambda names: suite_run(*names))
    assert main(["score_function"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= columns
    assert out.rstrip().endswith(f"{len(checks)} passed, 0 failed")
    # every name is still there, word for word, once the continuation lines are joined
    flat = " ".join(out.split())
    assert all(" ".join(c.name.split()) in flat for c in checks)


def test_wrapping_keeps_the_other_columns_on_the_first_line():
    rows = [Check("a rather long name of a check that must wrap somewhere", 1e-16, 1e-14, "exact", "demo")]
    lines = format_report(rows, {}, width=56).splitlines()
    assert lines[1].startswith("demo   1.00e-16  1.00e-14  exact  yes   a rather")
    assert all(len(line) <= 56 for line in lines)
    indent = lines[0].index("check")
    assert lines[2][:indent].strip() == "" and lines[2][indent] != " "


def test_a_narrow_terminal_puts_each_name_under_its_row():
    rows = [Check("a rather long name of a check that must wrap somewhere", 1e-16, 1e-14, "exact", "demo")]
    lines = format_report(rows, {}, width=44).splitlines()
    assert lines[1] == "    check" and lines[2] == "demo   1.00e-16  1.00e-14  exact  yes"
    assert lines[3].startswith("    a rather long") and all(len(line) <= 44 for line in lines)


def test_a_name_wider_than_the_minimum_column_never_vanishes():
    rows = [Check("z" * 40, 0.0, 1.0, "exact", "demo")]
    text = format_report(rows, {}, width=10)      # narrower than the fixed columns
    assert "z" * 16 in text and text.count("z") == 40


@pytest.mark.parametrize("width", [0, -3, 2.5, True, "80"])
def test_format_report_rejects_a_bad_width(width):
    with pytest.raises(ValueError, match="width must be a positive int or None"):
        format_report([], {}, width=width)


@pytest.mark.xdist_group("suite returns")
def test_json_output_is_strict_json_with_every_check(capsys, suite_run):
    checks, _ = suite_run("returns")
    assert main(["--json", "returns"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] == 0 and out["errors"] == {}
    assert out["passed"] == len(checks) == len(out["checks"])
    assert [c["name"] for c in out["checks"]] == [c.name for c in checks]
    assert all(c["passed"] is True and c["suite"] == "returns" for c in out["checks"])


def test_json_counts_failures_and_broken_suites():
    rows = [Check("ok", 0.0, 1.0, "exact", "s"), Check("bad", 2.0, 1.0, "exact", "s"), Check("nan", float("inf"), 1.0, "mc", "s")]
    out = json.loads(report_json(rows, {"t": "RuntimeError: boom"}))
    assert (out["passed"], out["failed"]) == (1, 3)
    assert [c["passed"] for c in out["checks"]] == [True, False, False]
    assert out["checks"][2]["value"] == "inf"
