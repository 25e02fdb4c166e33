"""pg-identities check: exit 0 / 1 / 2 as specified; run as a subprocess on a file with a correct and a broken loss."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numeric.cli import load_function, main, parse_fixed

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(__file__).parent / "trainer_style" / "ci_target.py"


_DRIVER = """
import runpy, sys
target, names = sys.argv[1], sys.argv[2:]
for name in names:
    print(f"@@run {name}", flush=True)
    sys.argv = ["pg-identities", "check", f"{target}:{name}", "--kind", "loss"]
    try:
        runpy.run_module("numeric.cli", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        print(f"@@exit {exit_.code}", flush=True)
"""


def test_command_as_a_subprocess_correct_and_broken():
    """``python -m numeric.cli check`` (the module as ``__main__``, its ``sys.exit``) on both functions, in one interpreter:
    the imports are paid once; each run's output and exit status are read back separately."""
    done = subprocess.run([sys.executable, "-c", _DRIVER, str(TARGET), "correct_loss", "broken_loss"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    runs = {}
    for part in done.stdout.split("@@run ")[1:]:
        name, rest = part.split("\n", 1)
        stdout, code = rest.split("@@exit ")
        runs[name] = (stdout, int(code))
    stdout, rc = runs["correct_loss"]
    assert rc == 0 and stdout.startswith("unbiased: PPO, seq-mean-token-sum") and "OK: as expected" in stdout
    stdout, rc = runs["broken_loss"]
    assert rc == 1 and stdout.startswith("biased:") and "not a policy gradient" in stdout and "FAIL" in stdout


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
    assert main(["check", f"{TARGET}:first_as_baseline", "--kind", "advantage", "--G", "3"]) == 1
    assert "not a group advantage" in capsys.readouterr().err
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
