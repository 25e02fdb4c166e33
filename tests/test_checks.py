"""The check registry and the report."""

import math

import numpy as np
import pytest
import torch

from numeric import CHECKS, CheckFailed, check, maxabs, run_suites
from numeric.checks import SUITES, suite
from numeric.report import format_report, main


def test_check_records_and_returns():
    n = len(CHECKS)
    assert check("ok", 1e-16, 1e-15, quiet=True) == 1e-16
    assert len(CHECKS) == n + 1 and CHECKS[-1].passed
    assert check("tensor value", torch.tensor(0.0), 0.0, quiet=True) == 0.0


@pytest.mark.parametrize("value", [-5.0, -math.inf, math.inf, math.nan, -1e-12, torch.tensor(-0.5), np.float64(-2.0)])
def test_check_compares_the_absolute_value_and_rejects_nan_and_inf(value):
    """A signed difference passes only when it is small: check('x', -5.0, 0.0) must fail."""
    with pytest.raises(CheckFailed):
        check("signed", value, 1e-13, quiet=True)
    assert not CHECKS[-1].passed


def test_a_small_negative_difference_passes_and_prints_its_absolute_value():
    assert check("small negative", -1e-16, 1e-15, quiet=True) == -1e-16
    assert CHECKS[-1].passed
    assert "|-1e-16| <= 1e-15" in CHECKS[-1].line()
    with pytest.raises(CheckFailed, match=r"\|-5\| <= 0"):
        check("x", -5.0, 0.0, quiet=True)


def test_failing_and_nan_checks_raise():
    with pytest.raises(CheckFailed, match="too big"):
        check("too big", 1.0, 0.5, quiet=True)
    with pytest.raises(CheckFailed):
        check("nan never passes", math.nan, 1.0, quiet=True)
    assert not CHECKS[-1].passed


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("x", 0.0, -1.0), {}, ValueError, "tol must be >= 0"),
        (("x", 0.0, 1.0), {"kind": "approx"}, ValueError, "kind must be 'exact' or 'mc'"),
        (("", 0.0, 1.0), {}, TypeError, "name must be a non-empty str"),
        (("x", "abc", 1.0), {}, TypeError, "value must be a real number"),
        (("x", np.zeros(3), 1.0), {}, ValueError, "value must be a single number"),
    ],
)
def test_bad_check_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        check(*args, **kwargs)


def test_maxabs_propagates_nan_so_that_no_check_passes_on_it():
    assert math.isnan(maxabs(np.array([0.0, math.nan]), np.zeros(2)))
    with pytest.raises(CheckFailed):
        check("nan difference", maxabs(torch.tensor([math.nan]), torch.zeros(1)), 1.0, quiet=True)
    for bad in (np.array(["a", "b"]), np.zeros(2) + 1j, "ab"):
        with pytest.raises(TypeError, match="a must hold real numbers"):
            maxabs(bad, np.zeros(2))


def test_maxabs():
    assert maxabs(np.array([1.0, 2.0]), torch.tensor([1.0, 2.25])) == 0.25
    assert maxabs(torch.zeros(0), torch.zeros(0)) == 0.0
    with pytest.raises(ValueError, match="a and b must have the same shape"):
        maxabs(torch.zeros(2), torch.zeros(3))


def test_suites_keep_going_past_a_failure(capsys):
    @suite("t_fail")
    def failing():
        check("fails", 1.0, 0.0)

    @suite("t_pass")
    def passing():
        check("passes", 0.0, 0.0)

    try:
        checks, errors = run_suites(["t_fail", "t_pass"])
        assert [c.passed for c in checks] == [False, True]
        assert errors == {}
        text = format_report(checks, errors)
        assert text.endswith("1 passed, 1 failed")
        assert main(["t_fail"]) == 1
        assert main(["t_pass"]) == 0
        assert capsys.readouterr().out.rstrip().endswith("1 passed, 0 failed")
    finally:
        del SUITES["t_fail"], SUITES["t_pass"]


def test_a_broken_suite_is_reported_and_counted():
    @suite("t_broken")
    def broken():
        raise RuntimeError("boom")

    try:
        checks, errors = run_suites(["t_broken"])
        assert checks == [] and errors == {"t_broken": "RuntimeError: boom"}
        assert format_report(checks, errors).endswith("0 passed, 1 failed")
    finally:
        del SUITES["t_broken"]


def test_bad_suite_arguments():
    with pytest.raises(ValueError, match="names must be registered suites"):
        run_suites(["no such suite"])
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        suite(3)
    with pytest.raises(TypeError, match="a suite must be callable"):
        suite("x")(5)


@pytest.mark.parametrize(
    ("name", "count"),
    [
        pytest.param(name, count, marks=pytest.mark.xdist_group(f"suite {name}"))  # shares the run with test_report
        for name, count in [("score_function", 13), ("baselines", 26), ("group_baselines", 16), ("returns", 16), ("gradient_weights", 15), ("trust_region", 24), ("off_policy", 46), ("losses", 58), ("variants", 12)]
    ],
)
def test_every_topic_suite_passes(name, count, suite_run):
    """Each chapter's cross-checks, as the report runs them (the count guards against a suite that silently shrinks)."""
    checks, errors = suite_run(name)
    assert errors == {}
    assert len(checks) == count
    assert all(c.passed for c in checks), [c.line() for c in checks if not c.passed]


def test_the_report_lists_every_topic_in_lecture_order():
    assert list(SUITES) == ["score_function", "baselines", "group_baselines", "returns", "gradient_weights", "trust_region", "off_policy", "losses", "variants"]



@pytest.mark.xdist_group("suite score_function")
def test_a_shared_suite_run_is_handed_out_fresh(suite_run):
    """The per-worker cache of suite runs (tests/conftest.py) shares no mutable state between its readers."""
    checks, errors = suite_run("score_function")
    checks.clear()
    errors["x"] = "a reader's edit"
    again, errors_again = suite_run("score_function")
    assert len(again) == 13 and errors_again == {}
