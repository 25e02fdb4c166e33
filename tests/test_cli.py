"""pg-identities check: exit 0 / 1 / 2 as specified; run as a subprocess on a file with a correct and a broken loss."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numeric.cli import load_function, main, parse_fixed

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.xdist_group("trainer code")  # one worker with tests/test_trainer_code.py: the same forms' region splits, derived once
TARGET = Path(__file__).parent / "trainer_style" / "ci_target.py"


_DRIVER = """
import runpy, sys
target = sys.argv[1]
for name, args in [("rloo", ["--kind", "advantage", "--G", "2", "--expect", "unbiased"]),
                   ("first_as_baseline", ["--kind", "advantage", "--G", "2", "--expect", "unbiased"]),
                   ("nothing", ["--kind", "loss"])]:
    print(f"@@run {name}", flush=True)
    sys.argv = ["pg-identities", "check", f"{target}:{name}", *args]
    try:
        runpy.run_module("numeric.cli", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        print(f"@@exit {exit_.code}", flush=True)
"""


def test_command_as_a_subprocess_exits_0_1_2():
    """``python -m numeric.cli check`` (the module as ``__main__``, its ``sys.exit``) in one interpreter: exit 0 as expected,
    1 not (a positional advantage whose summed update is scaled, not the expected unbiased), 2 a usage error; each run's output and exit status read back
    separately.  The reports themselves are checked in-process below, through ``main(argv)``."""
    done = subprocess.run([sys.executable, "-c", _DRIVER, str(TARGET)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    runs = {}
    for part in done.stdout.split("@@run ")[1:]:
        name, rest = part.split("\n", 1)
        stdout, code = rest.split("@@exit ")
        runs[name] = (stdout, int(code))
    assert {name: rc for name, (_, rc) in runs.items()} == {"rloo": 0, "first_as_baseline": 1, "nothing": 2}, done.stderr
    assert runs["rloo"][0].startswith("unbiased (batch convention)") and "OK: expected unbiased" in runs["rloo"][0]
    assert "FAIL: expected unbiased" in runs["first_as_baseline"][0] and "position 0: scaled, c = 0" in runs["first_as_baseline"][0]
    assert "has no function 'nothing'" in done.stderr


def test_command_correct_and_broken(capsys):
    assert main(["check", f"{TARGET}:correct_loss", "--kind", "loss"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith("unbiased: PPO, seq-mean-token-sum") and "OK: as expected" in stdout
    assert main(["check", f"{TARGET}:broken_loss", "--kind", "loss"]) == 1
    stdout = capsys.readouterr().out
    assert stdout.startswith("biased:") and "not a policy gradient" in stdout and "FAIL" in stdout


def test_expect_and_json(capsys):
    assert main(["check", f"{TARGET}:correct_loss", "--kind", "loss", "--expect", "PPO", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["holds"] and report["method"] == "PPO" and report["aggregation"] == "seq-mean-token-sum" and report["clip"] == {"eps_high": 0.2, "eps_low": 0.2}
    assert main(["check", f"{TARGET}:correct_loss", "--kind", "loss", "--expect", "token-mean"]) == 1
    assert main(["check", f"{TARGET}:rloo", "--kind", "advantage", "--G", "2,3", "--expect", "unbiased"]) == 0
    assert main(["check", f"{TARGET}:renamed_loss", "--kind", "loss", "--expect", "token-mean",
                 "--names", "log_prob=logprobs", "old_log_prob=old_logprobs", "response_mask=mask"]) == 0
    assert "FAIL: expected token-mean" in capsys.readouterr().out
    assert main(["check", f"{TARGET}:rloo", "--kind", "advantage", "--G", "3", "--expect", "scaled", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["holds"] and report["groups"][0]["verdict"] == "unbiased" and report["groups"][0]["scale"] == "1"
    assert main(["check", f"{TARGET}:first_as_baseline", "--kind", "advantage", "--G", "3", "--json"]) == 0  # scaled: c = 2/3
    report = json.loads(capsys.readouterr().out)
    assert report["groups"][0]["scale"] == "2/3" and [p["scale"] for p in report["groups"][0]["positions"]] == ["0", "1", "1"]
    assert main(["check", f"{TARGET}:rloo", "--kind", "advantage", "--rewards", "general"]) == 2
    capsys.readouterr()


@pytest.mark.parametrize("argv, message", [
    (["check", "no_colon.py", "--kind", "loss"], "FILE.py:FUNCTION"),
    (["check", "missing.py:f", "--kind", "loss"], "no such file"),
    ([f"{TARGET}:nothing"], None),  # no subcommand: argparse's usage error
    (["check", f"{TARGET}:nothing", "--kind", "loss"], "has no function 'nothing'"),
    (["check", f"{TARGET}:correct_loss", "--kind", "loss", "--fixed", "=1"], "--fixed takes key=value"),
    (["check", f"{TARGET}:correct_loss", "--kind", "loss", "--fixed", "clip=0.1"], "could not be called"),
    (["check", f"{TARGET}:rloo", "--kind", "advantage", "--G", "x"], "--G must be"),
    (["check", f"{TARGET}:rloo", "--kind", "advantage", "--rewards", "a,b"], "--rewards must be"),
    (["check", f"{TARGET}:rloo", "--kind", "advantage", "--expect", "PPO"], "--expect for an advantage"),
    (["check", f"{TARGET}:renamed_loss", "--kind", "loss", "--names", "logits=x"], "names may map only"),
])
def test_usage_errors_exit_2(argv, message, capsys):
    if message is None:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        return
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_parse_fixed_and_load_function():
    assert parse_fixed(["a=1", "b=token-mean", "c=None"]) == {"a": 1, "b": "token-mean", "c": None}
    with pytest.raises(ValueError, match="key=value"):
        parse_fixed(["novalue"])
    assert load_function(f"{TARGET}:rloo").__name__ == "rloo"
    with pytest.raises(ValueError, match="FILE.py:FUNCTION"):
        load_function("nothing")
