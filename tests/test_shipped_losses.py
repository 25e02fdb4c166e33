"""The checker on trainers' code as shipped (issue 32): eleven current losses of five trainers, in float64 and float32.

The transcriptions are tests/trainer_style/shipped.py (repository, commit, file and lines in each docstring).  For each,
the truth is written here by hand from the trainer's formula: its per-token weight w(r, A; pi_old) and its aggregation
kappa, checked first against autograd of the transcription on a ragged batch, then every field of the checker's
report is compared with what the formula implies: the verdict, the method, the clip range of each sign (per token where
it moves with pi_old), the clip constants, boundedness, the aggregation and its length bias, the sequence ratio, and the
precision.  A float32 run and its float64 twin give the same facts; the command gives the same JSON as the Python API.
"""

import importlib.util
import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
import torch

from numeric.cli import main
from numeric.variants import check_policy_loss

F64 = torch.float64
SHIPPED = Path(__file__).parent / "trainer_style" / "shipped.py"
_spec = importlib.util.spec_from_file_location("trainer_style_shipped", SHIPPED)
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)
pytestmark = pytest.mark.xdist_group("trainer code")


@dataclass(frozen=True)
class Truth:
    """What the trainer's formula says: ``weight(r, A, q)``, ``kappa(n, B, N)``, and the report fields it implies."""

    weight: object
    kappa: object
    verdict: str
    method: str | None
    clip: dict
    bounded: dict
    aggregation: str
    ranges: dict  # sign -> (low, high, below, above) at pi_old = e^-0.5, the reference
    precision: str  # at float64 inputs
    ends: object = None  # q -> {sign: (low, high)} for a range that moves with pi_old
    sequence: bool = False
    penalty: float = 0.0  # tau of an advantage-free tau (log r)^2
    notes: tuple = field(default=())


PPO = lambda lo, hi: (lambda r, A, q: r * ((r <= 1 + hi) if A > 0 else (r >= 1 - lo)))
TOKEN_MEAN = lambda n, B, N: 1 / N
SAMPLE_MEAN = lambda n, B, N: 1 / (B * n)
Q_REF = math.exp(-0.5)


def _tv(r, A, q, delta=0.2):
    return r * ((r - 1) * q <= delta if A > 0 else (1 - r) * q <= delta)


CASES = {
    "prime_rl_default": Truth(_tv, TOKEN_MEAN, "scaled", "DPPO (binary TV) + tau (log r)^2", {"delta_high": 0.2, "delta_low": 0.2}, {1: True, -1: False}, "token-mean",
                              {1: (None, 1 + 0.2 / Q_REF, "", "zero"), -1: (1 - 0.2 / Q_REF, None, "zero", "")}, "float64",
                              ends=lambda q: {1: (None, 1 + 0.2 / q), -1: (1 - 0.2 / q, None)}, penalty=1e-3),
    "prime_rl_ipo": Truth(lambda r, A, q: r * (abs(r - 1) * q <= 0.1), TOKEN_MEAN, "scaled", "TV band + tau (log r)^2 (prime-rl ipo)", {"band_delta": 0.1}, {1: True, -1: True},
                          "token-mean", {s: (1 - 0.1 / Q_REF, 1 + 0.1 / Q_REF, "zero", "zero") for s in (1, -1)}, "float64",
                          ends=lambda q: {s: (1 - 0.1 / q, 1 + 0.1 / q) for s in (1, -1)}, penalty=1e-3),
    # the log-ratio clamp at +-20 bounds the A < 0 weight by e^20: the gradient is 0 beyond
    "skyrl_regular": Truth(PPO(0.2, 0.2), TOKEN_MEAN, "scaled", "PPO", {"eps_high": 0.2, "eps_low": 0.2}, {1: True, -1: True}, "token-mean",
                           {1: (None, 1.2, "", "zero"), -1: (0.8, None, "zero", "")}, "float32"),
    # a band on the ratio: IcePop's (closed) and SkyRL's own (open) have one weight off the two edges; the report names both
    "skyrl_rollout_is": Truth(lambda r, A, q: r * (0.8 < r < 1.2), TOKEN_MEAN, "scaled", "IcePop", {"band_low": 0.8, "band_high": 1.2},
                              {1: True, -1: True}, "token-mean", {s: (0.8, 1.2, "zero", "zero") for s in (1, -1)}, "float32"),
    "skyrl_cispo": Truth(lambda r, A, q: min(r, 5.0), TOKEN_MEAN, "scaled", "CISPO (one-sided)", {"eps_high": 4.0}, {1: True, -1: True},
                         "token-mean", {s: (None, 5.0, "", "capped") for s in (1, -1)}, "float32"),
    "slime_gspo": Truth(PPO(4e-4, 4e-4), SAMPLE_MEAN, "reweighted", "GSPO", {"eps_high": 4e-4, "eps_low": 4e-4}, {1: True, -1: False},
                        "seq-mean-token-mean", {1: (None, 1 + 4e-4, "", "zero"), -1: (1 - 4e-4, None, "zero", "")}, "float64", sequence=True),
    "slime_cispo": Truth(lambda r, A, q: min(max(r, 0.8), 1.2), SAMPLE_MEAN, "reweighted", "CISPO", {"eps_high": 0.2, "eps_low": 0.2},
                         {1: True, -1: True}, "seq-mean-token-mean", {s: (0.8, 1.2, "capped", "capped") for s in (1, -1)}, "float64"),
    # AReaL's rejection rho <= 5 holds for both signs: a band, not a dual clip
    "areal_decoupled_rejection": Truth(lambda r, A, q: r * (r <= 5.0), TOKEN_MEAN, "scaled", "IcePop", {"band_high": 5.0}, {1: True, -1: True},
                                       "token-mean", {s: (None, 5.0, "", "zero") for s in (1, -1)}, "float32"),
    "areal_gspo": Truth(PPO(0.2, 0.2), TOKEN_MEAN, "scaled", "GSPO", {"eps_high": 0.2, "eps_low": 0.2}, {1: True, -1: False},
                        "token-mean", {1: (None, 1.2, "", "zero"), -1: (0.8, None, "zero", "")}, "float64", sequence=True),
    "swift_cispo": Truth(lambda r, A, q: min(r, 5.0), TOKEN_MEAN, "scaled", "CISPO (one-sided)", {"eps_high": 4.0}, {1: True, -1: True},
                         "token-mean", {s: (None, 5.0, "", "capped") for s in (1, -1)}, "float64"),
    "swift_gspo": Truth(PPO(3e-4, 4e-4), SAMPLE_MEAN, "reweighted", "GSPO", {"eps_high": 4e-4, "eps_low": 3e-4}, {1: True, -1: False},
                        "seq-mean-token-mean", {1: (None, 1 + 4e-4, "", "zero"), -1: (1 - 3e-4, None, "zero", "")}, "float64", sequence=True),
}
TRAINERS = {name.split("_")[0] for name in CASES}


@cache
def report(name, dtype):
    return check_policy_loss(getattr(S, name), dtype=dtype)


def _batch(sequence: bool):
    """A ragged batch (lengths 1, 3, 4, one row empty) away from every kink; a sequence loss gets one log-ratio per row."""
    mask = (torch.arange(4)[None, :] < torch.tensor([1, 3, 4, 0])[:, None]).to(F64)
    gen = torch.Generator().manual_seed(5)
    old = -0.2 - 2.0 * torch.rand(mask.shape, generator=gen, dtype=F64)
    step = (0.03 * torch.randn(mask.shape[0], 1, generator=gen, dtype=F64)).expand(mask.shape) if sequence else \
        0.3 * torch.randn(mask.shape, generator=gen, dtype=F64)
    if sequence:
        step = step * 1e-2  # inside a 3e-4 clip for some rows, outside for others
    adv = torch.randn(mask.shape[0], 1, generator=gen, dtype=F64).expand(mask.shape).clone()
    return old, old + step, adv, mask


def test_the_transcriptions_cover_five_trainers():
    assert len(CASES) >= 10 and TRAINERS == {"prime", "skyrl", "slime", "areal", "swift"}


@pytest.mark.parametrize("name", CASES)
def test_the_truth_is_the_transcriptions_gradient(name):
    """-kappa (w(r, A; pi_old) A - 2 tau log r) per token, from the formula, against autograd of the transcription (float64).

    For a sequence loss r is the row's geometric-mean ratio s: each of the row's n tokens carries the row's loss, whose
    derivative in ell_t is s/n, so a per-sample mean gives kappa = 1/(B n) and a token mean kappa = 1/N (the row's n tokens
    then weigh it n/N: AReaL's GSPO is length-weighted)."""
    truth = CASES[name]
    old, new, adv, mask = _batch(truth.sequence)
    leaf = new.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(getattr(S, name)(old, leaf, adv, mask), leaf)
    n, B, N = mask.sum(-1), mask.shape[0], int(mask.sum())
    for i in range(B):
        for t in range(int(n[i])):
            if truth.sequence:  # the row's geometric-mean ratio s, d s/d ell_t = s/n, on each of the row's n tokens: weight s
                r = math.exp(float(((new - old)[i] * mask[i]).sum() / n[i]))
                expected = -truth.kappa(int(n[i]), B, N) * truth.weight(r, float(adv[i, t]), None) * float(adv[i, t])
            else:
                r = math.exp(float(new[i, t] - old[i, t]))
                w = truth.weight(r, float(adv[i, t]), math.exp(float(old[i, t])))
                expected = -truth.kappa(int(n[i]), B, N) * (w * float(adv[i, t]) - 2 * truth.penalty * math.log(r))
            assert float(g[i, t]) == pytest.approx(expected, rel=1e-6, abs=1e-12)
    assert bool((g[mask == 0] == 0).all())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", CASES)
def test_every_field_of_the_report_is_what_the_formula_says(name, dtype):
    truth, rep = CASES[name], report(name, dtype)
    digits = 9 if dtype == torch.float64 and truth.precision == "float64" else 4
    assert (rep.verdict, rep.method, rep.aggregation, rep.sequence_level) == (truth.verdict, truth.method, truth.aggregation, truth.sequence)
    assert rep.policy_gradient is (None if truth.sequence else True) and rep.on_policy_at_ratio_one and rep.undecided == ()
    assert rep.length_biased == (truth.aggregation == "seq-mean-token-mean")
    assert dict(rep.clip) == pytest.approx(truth.clip, rel=10.0**-digits)
    assert rep.bounded == truth.bounded
    assert rep.sequence_ratio == ("geometric mean" if truth.sequence else None)
    assert rep.precision.name == ("float32" if dtype == torch.float32 else truth.precision)
    for c in rep.clip_ranges:
        low, high, below, above = truth.ranges[c.sign]
        assert (c.form, c.below, c.above) == ("ratio", below, above)
        assert (c.low is None) == (low is None) and (c.high is None) == (high is None)
        for got, want in ((c.low, low), (c.high, high)):
            assert want is None or got == pytest.approx(want, rel=10.0**-digits)
        assert bool(c.per_token) == (truth.ends is not None)
        for q, lo_q, hi_q in c.per_token:  # each end at each pi_old against the formula's; None where it lies past [0.01, 100]
            want_lo, want_hi = truth.ends(q)[c.sign]
            assert (lo_q is None and (want_lo is None or want_lo < 0.01)) or lo_q == pytest.approx(want_lo, rel=1e-5)
            assert (hi_q is None and (want_hi is None or want_hi > 100)) or hi_q == pytest.approx(want_hi, rel=1e-5)
    assert any("2 tau log r with tau = 0.001" in n for n in rep.notes) == (truth.penalty > 0)
    for c in rep.clip_ranges:  # the text report states every range, the precision and boundedness
        assert c.describe() in str(rep)
    assert f"computes in {rep.precision.name}" in str(rep) and "bounded: A > 0: " in str(rep)


@pytest.mark.parametrize("name", CASES)
def test_a_float32_run_and_its_float64_twin_state_the_same_facts(name):
    double, single = report(name, torch.float64), report(name, torch.float32)
    same = lambda rep: (rep.verdict, rep.method, rep.aggregation, rep.length_biased, tuple(sorted(dict(rep.clip))), rep.bounded,
                        rep.sequence_ratio, [(c.form, c.below, c.above, c.low is None, c.high is None, bool(c.per_token)) for c in rep.clip_ranges])
    assert same(double) == same(single)


@pytest.mark.parametrize("name", CASES)
def test_the_command_prints_the_same_report_as_the_api(name, capsys):
    code = main(["check", f"{SHIPPED}:{name}", "--kind", "loss", "--dtype", "float32", "--json"])
    out = json.loads(capsys.readouterr().out)
    api = report(name, torch.float32).as_dict()
    assert code == (0 if CASES[name].verdict == "scaled" else 1)
    assert {k: out[k] for k in api} == json.loads(json.dumps(api, default=str))
    assert out["precision"]["name"] == "float32" and out["clip_ranges"] and out["bounded"]
