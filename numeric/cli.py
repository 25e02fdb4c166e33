r"""``pg-identities``: the checks of a trainer's own code, from its CI.

.. code-block:: console

    pg-identities check FILE.py:FUNCTION --kind loss|advantage [--G 8] [--rewards binary|v1,v2,...]
                        [--expect unbiased|scaled|reweighted|METHOD] [--convention verl|trl|openrlhf|flat|batch]
                        [--fixed key=value ...] [--names role=name ...] [--dtype float32] [--json]
                        [--execution dp=1,2,4 micro=1,2,4 convention=verl|trl|openrlhf|prime-rl|skyrl]

Prints the report (or its JSON) and exits with 0 when the function is what
``--expect`` says (without it: a policy gradient up to a positive constant, see
:meth:`~numeric.variants.PolicyLossReport.holds`), 1 when it is not, 2 on a
usage error or a function that cannot be loaded or called.  ``--fixed`` values
are Python literals (``0.2``, ``'token-mean'``, ``True``) or, failing that, strings;
``--names`` maps a loss's roles to its own argument names (``log_prob=logprobs``).
``--execution`` also runs a loss cut into data-parallel ranks (``dp``) and
micro-batches (``micro``) on gloo processes, with what the trainer passes
(``convention``), and prints :func:`~numeric.variants.check_loss_execution`'s
report after the loss's; the exit status is then 1 unless every cut is
invariant — a constant factor counts as a failure, since under global-norm
gradient clipping it changes the step.

Examples
--------
>>> from numeric.cli import parse_fixed
>>> parse_fixed(["loss_agg_mode=seq-mean-token-mean", "clip_high=0.28", "norm_adv_by_std_in_grpo=False"])
{'loss_agg_mode': 'seq-mean-token-mean', 'clip_high': 0.28, 'norm_adv_by_std_in_grpo': False}
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from derivations.variants import NotPermutationEquivariant

from .variants import GroupedAdvantageReport, PolicyLossReport, check_grouped_advantage, check_policy_loss

__all__ = ["load_function", "main", "parse_fixed"]

OK, NOT_AS_EXPECTED, USAGE = 0, 1, 2


class _Usage(Exception):
    pass


def parse_fixed(items: Sequence[str]) -> dict:
    """``["key=value", ...]`` as keyword arguments; values read as Python literals, else kept as strings."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--fixed takes key=value with a Python name as key, got {item!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def load_function(target: str) -> Callable:
    """``FILE.py:FUNCTION`` loaded from the file (its folder first on ``sys.path``, for its own imports)."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise ValueError(f"the target must be FILE.py:FUNCTION, got {target!r}")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"no such file: {path}")
    sys.path.insert(0, str(file.resolve().parent))
    spec = importlib.util.spec_from_file_location(f"_pg_identities_target_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise ValueError(f"{path} could not be imported: {type(err).__name__}: {err}") from err
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{path} has no function {name!r}")
    return fn


def _rewards(text: str):
    if text in ("binary", "general"):
        return text
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"--rewards must be binary, general or comma-separated numbers, got {text!r}") from None


def _sizes(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"--G must be an int or comma-separated ints, got {text!r}") from None


def _execution(items: Sequence[str]) -> dict:
    """``["dp=2,4", "micro=2", "convention=verl"]`` as the keyword arguments of :func:`check_loss_execution`."""
    keys = {"dp": "world_sizes", "micro": "micro_batches", "convention": "convention"}
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in keys:
            raise ValueError(f"--execution takes dp=W,W,... micro=M,M,... convention=NAME, got {item!r}")
        try:
            out[keys[key]] = value if key == "convention" else tuple(int(v) for v in value.split(","))
        except ValueError:
            raise ValueError(f"--execution {key} must be comma-separated ints, got {value!r}") from None
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pg-identities", description="Certify a trainer's policy loss or advantage estimator as written.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check FILE.py:FUNCTION")
    check.add_argument("target", help="FILE.py:FUNCTION")
    check.add_argument("--kind", choices=("loss", "advantage"), required=True)
    check.add_argument("--G", default="8", help="group size(s) for an advantage: 8 or 2,4,8")
    check.add_argument("--rewards", default="binary", help="binary, general, or v1,v2,... (advantage)")
    check.add_argument("--expect", default=None, help="unbiased, scaled, reweighted, biased, an aggregation mode, or a method's name")
    check.add_argument("--convention", default="batch", help="advantage calling convention: batch, flat, verl, trl, openrlhf")
    check.add_argument("--fixed", nargs="*", default=[], metavar="KEY=VALUE", help="keyword arguments passed to every call")
    check.add_argument("--names", nargs="*", default=[], metavar="ROLE=NAME",
                       help="a loss's argument names: old_log_prob, log_prob, advantages, response_mask")
    check.add_argument("--dtype", choices=("float64", "float32", "bfloat16", "float16"), default="float64",
                       help="the dtype a loss's batch is handed over in (the trainer's; default float64)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--execution", nargs="*", default=None, metavar="KEY=VALUE",
                       help="a loss cut into ranks and micro-batches: dp=1,2,4 micro=1,2,4 convention=verl")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (0 as expected, 1 not, 2 usage error or uncallable function)."""
    args = _parser().parse_args(argv)
    report: PolicyLossReport | GroupedAdvantageReport
    execution = None
    try:
        fixed = parse_fixed(args.fixed)
        fn = load_function(args.target)
        if args.kind == "loss":
            names = {role: str(name) for role, name in parse_fixed(args.names).items()}
            report = check_policy_loss(fn, names=names, dtype=getattr(torch, args.dtype),
                                       execution=None if args.execution is None else _execution(args.execution), **fixed)
            execution = report.execution
        else:
            if args.execution is not None:
                raise ValueError("--execution applies to --kind loss")
            if args.expect is not None and args.expect not in ("unbiased", "scaled", "reweighted", "biased", "undecided"):
                raise ValueError(f"--expect for an advantage must be a verdict (unbiased, scaled, reweighted, biased, undecided), got {args.expect!r}")
            report = check_grouped_advantage(fn, G=_sizes(args.G), convention=args.convention, rewards=_rewards(args.rewards), **fixed)
    except NotPermutationEquivariant as err:
        print(f"not a group advantage: {err}", file=sys.stderr)
        return NOT_AS_EXPECTED
    except (TypeError, ValueError, TimeoutError) as err:
        print(f"pg-identities: error: {err}", file=sys.stderr)
        return USAGE
    holds = report.holds(args.expect)
    if args.json:
        print(json.dumps({**report.as_dict(), "expect": args.expect, "holds": holds}, indent=2, default=str))  # "execution": its own "holds"
    else:
        print(report)
        print(("OK: " if holds else "FAIL: ") + ("as expected" if args.expect is None else f"expected {args.expect}"))
        if execution is not None:
            print(execution)
            print("OK: invariant to the cut" if execution.holds() else "FAIL: not invariant to the cut")
    holds = holds and (execution is None or execution.holds())
    return OK if holds else NOT_AS_EXPECTED


if __name__ == "__main__":
    sys.exit(main())
