r"""A trainer's advantage estimator as written: flat scores and a group index, groups of any sizes in any order.

Trainers compute group advantages on a flat batch of responses.  The check of
:func:`~numeric.variants.check_group_advantage` wants a ``[B, G]`` callable;
:func:`check_grouped_advantage` builds one for each group size :math:`G` from a
function in one of the trainers' calling conventions (:data:`CONVENTIONS`):

``"batch"``
    ``fn(rewards [B, G]) -> [B, G]`` (the checker's own form; OpenRLHF's after its reshape).
``"flat"``
    ``fn(scores [N], index [N]) -> [N]``: one score per response and an integer group id.
``"verl"``
    ``fn(token_level_rewards [N, T], response_mask [N, T], index, **fixed) -> (advantages [N, T], returns)``,
    as verl's ``compute_*_outcome_advantage`` (``index`` a numpy array of uid strings; the outcome
    reward sits on the response's last token; the advantage is read on its first and must be the
    same on all its tokens).
``"trl"``
    ``fn(rewards [B*G], num_generations=G, **fixed) -> [B*G]``: contiguous groups, as TRL's GRPO
    trainer views its rewards (``rewards.view(-1, num_generations)``).
``"openrlhf"``
    ``fn(rewards [B*G], n_samples_per_prompt=G, **fixed) -> [B*G] or [B, G]``, as OpenRLHF's
    experience maker reshapes its rewards.

For ``"flat"`` and ``"verl"`` the groups under test are shuffled among groups
of other sizes (ragged groups), with uids in no particular order.  Before any
verdict the function is called twice on the same batch in two orders (a
function that groups by position changes its answer) and with different other
groups, other in number and drawn from another law than the check's binary
ones (a function that normalises across the batch, as a batch whitening,
changes its answer); either makes the verdict ``"undecided"`` with the reason.

References
----------
verl ``compute_grpo_outcome_advantage`` and siblings, volcengine/verl at
b178a3cd56f58b2d502255daba591e92833930a7 (``verl/trainer/ppo/core_algos.py``); TRL
``GRPOTrainer._generate_and_score_completions``, huggingface/trl at
f2cd57710ae345ea6428ae95363267fcf38a3dc8 (``trl/trainer/grpo_trainer.py``); OpenRLHF
``compute_advantages_and_returns``, OpenRLHF/OpenRLHF at 3c3be6234e0cb353e76bb8019947db9dfe99fca7
(``openrlhf/trainer/ppo_utils/experience_maker.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp
import torch

from derivations.variants import VERDICTS, ReportTable, report_html

from .._validate import require_int
from .checker import check_group_advantage

__all__ = ["CONVENTIONS", "GroupedAdvantageReport", "check_grouped_advantage"]

F64 = torch.float64
CONVENTIONS = ("batch", "flat", "verl", "trl", "openrlhf")
_RAGGED = ("flat", "verl")
_T = 5


class _Grouped:
    r"""The trainer's estimator as a ``[B, G]`` callable: each call builds a trainer-style batch and reads the groups back.

    The batch holds other groups beside the ones under test: of sizes ``others`` (ragged conventions; by default
    :math:`G \pm 1`, two of each) or ``extra`` groups of :math:`G` (TRL's and OpenRLHF's contiguous groups), their
    rewards drawn with ``seed`` from ``law``: ``"binary"`` (0 or 1, the check's own batches) or ``"spread"`` (real
    numbers in [-3, 6), for the batch-coupling probe: a batch statistic, a mean, a std or a largest reward, that
    happened to be the same for two binary draws would hide a batch normalisation).
    """

    def __init__(self, fn: Callable, convention: str, G: int, lengths: str, fixed: dict, seed: int = 0, others: tuple = (),
                 reorder: int | None = None, extra: int = 2, law: str = "binary"):
        self.fn, self.convention, self.G, self.lengths, self.fixed, self.seed = fn, convention, G, lengths, fixed, seed
        self.reorder = reorder  # a second shuffle of the same batch (seed), to see whether the order matters
        self.others = others if others else tuple(g for g in (G - 1, G + 1) if g >= 1)
        self.extra, self.law = extra, law

    def _draw(self, rng: np.random.Generator, n: int) -> torch.Tensor:
        """The other groups' ``n`` rewards."""
        return torch.tensor(rng.integers(0, 2, n) if self.law == "binary" else rng.uniform(-3.0, 6.0, n), dtype=F64)

    def __call__(self, rewards) -> torch.Tensor:
        r = torch.as_tensor(np.asarray(rewards.detach().cpu() if isinstance(rewards, torch.Tensor) else rewards, dtype=np.float64))
        if r.ndim != 2 or r.shape[1] != self.G:
            raise ValueError(f"rewards must have shape [B, {self.G}], got {tuple(r.shape)}")
        if self.convention == "batch":
            return self._out(self._invoke(r), r.shape)
        flat = r.reshape(-1)
        if self.convention in ("trl", "openrlhf"):
            extra = self._draw(np.random.default_rng(self.seed), self.extra * self.G)
            out = self._out(self._invoke(torch.cat([flat, extra])), (flat.numel() + extra.numel(),))
            return out[:flat.numel()].reshape(r.shape)
        rng = np.random.default_rng(self.seed)
        sizes = [self.G] * r.shape[0] + [g for g in self.others for _ in range(2)]
        scores = torch.cat([flat, self._draw(rng, sum(sizes) - flat.numel())])
        group = np.repeat(np.arange(len(sizes)), sizes)
        order = rng.permutation(scores.numel())
        if self.reorder is not None:
            order = order[np.random.default_rng(self.reorder).permutation(order.size)]
        labels = rng.permutation(len(sizes))
        out = torch.empty_like(scores)
        out[order] = self._ragged(scores[order], group[order], labels)
        return out[:flat.numel()].reshape(r.shape)

    def _ragged(self, scores: torch.Tensor, group: np.ndarray, labels: np.ndarray) -> torch.Tensor:
        if self.convention == "flat":
            return self._out(self._invoke(scores, np.asarray(labels[group], dtype=np.int64)), scores.shape)
        n = self._length(scores)
        mask = (torch.arange(_T)[None, :] < n[:, None]).to(F64)
        token_rewards = torch.zeros_like(mask)
        token_rewards[torch.arange(scores.numel()), n - 1] = scores
        index = np.array([f"uid-{k:03d}" for k in labels[group]], dtype=object)
        out = self._invoke(token_rewards, mask, index)
        out = self._out(out[0] if isinstance(out, (tuple, list)) else out, mask.shape)
        first = out[:, 0]
        spread = torch.where(mask > 0, out - first[:, None], torch.zeros_like(out)).abs().max()
        if float(spread) > 1e-12 * max(1.0, float(first.abs().max())):
            raise ValueError("fn must return an outcome advantage, one number per response broadcast over its tokens; "
                             f"its values vary along a response by {float(spread):.3g}")
        return first

    def _length(self, scores: torch.Tensor) -> torch.Tensor:
        if self.lengths == "equal":
            return torch.full(scores.shape, 3, dtype=torch.long)
        return 1 + (scores.abs() * 7).round().to(torch.long) % _T

    def _invoke(self, *args):
        try:
            if self.convention == "verl":
                return self.fn(token_level_rewards=args[0], response_mask=args[1], index=args[2], **self.fixed)
            if self.convention == "trl":
                return self.fn(args[0], num_generations=self.G, **self.fixed)
            if self.convention == "openrlhf":
                return self.fn(args[0], n_samples_per_prompt=self.G, **self.fixed)
            return self.fn(*args, **self.fixed)
        except (TypeError, AttributeError, KeyError, IndexError, RuntimeError) as err:
            raise TypeError(f"fn could not be called in the {self.convention!r} convention: {type(err).__name__}: {err}") from err

    @staticmethod
    def _out(out, shape) -> torch.Tensor:
        if not isinstance(out, (torch.Tensor, np.ndarray)):
            raise TypeError(f"fn must return a tensor or array of advantages, got {type(out).__name__}")
        out = torch.as_tensor(np.asarray(out.detach().cpu()) if isinstance(out, torch.Tensor) else out, dtype=F64)
        if out.numel() != int(np.prod(shape)):
            raise ValueError(f"fn must return {int(np.prod(shape))} advantages (shape {tuple(shape)}), got shape {tuple(out.shape)}")
        return out.reshape(shape)


@dataclass(frozen=True, repr=False)
class GroupedAdvantageReport:
    r"""What :func:`check_grouped_advantage` found, per group size.

    Attributes
    ----------
    convention : str
        One of :data:`CONVENTIONS`.
    verdict : str
        The weakest verdict over the group sizes (in the order of ``VERDICTS``: unbiased, scaled,
        reweighted, biased, undecided); ``"undecided"`` when the function depends on the batch's
        order or on other groups.
    reports : tuple
        ``(G, GroupReport)`` for each group size checked (empty when undecided before the check).
    reason : str
    """

    convention: str
    verdict: str
    reports: tuple
    reason: str

    def holds(self, expect: str | None = None) -> bool:
        """``expect`` a verdict; ``None``: a policy gradient up to a positive constant (``unbiased``, or ``scaled`` with c > 0)."""
        if expect is None:
            return self.verdict == "unbiased" or self.verdict == "scaled" and all(float(rep.scale) > 0 for _, rep in self.reports)
        return self.verdict == expect

    def as_dict(self) -> dict:
        """The report as plain JSON-ready values (expressions as strings)."""
        return {"convention": self.convention, "verdict": self.verdict, "reason": self.reason,
                "groups": [{"G": G, "verdict": rep.verdict, "scale": sp.sstr(rep.scale), "residual": sp.sstr(rep.residual),
                            "reason": rep.reason, "positions": [{"position": i, "verdict": v, "scale": sp.sstr(c)} for i, v, c in rep.positions]}
                           for G, rep in self.reports]}

    def table(self) -> ReportTable:
        """The verdict and :math:`c` per group size: aligned text, or an HTML table."""
        lines = ["   G  verdict     c"]
        lines += [f"{G:4d}  {rep.verdict:10s}  {sp.sstr(rep.scale)}" for G, rep in self.reports]
        return ReportTable(("G", "verdict", "c"), [(G, rep.verdict, sp.sstr(rep.scale)) for G, rep in self.reports], text="\n".join(lines))

    def __repr__(self) -> str:
        return f"GroupedAdvantageReport(convention={self.convention!r}, verdict={self.verdict!r}, G={[G for G, _ in self.reports]})"

    def __str__(self) -> str:
        positions = "".join(f"\nG = {G}, position {i}: {v}, c = {sp.sstr(c)}" for G, rep in self.reports for i, v, c in rep.positions)
        return f"{self.verdict} ({self.convention} convention): {self.reason}\n{self.table()}{positions}"

    def _repr_html_(self) -> str:
        more = [(f"derivation at G = {G}", "$$" + rep.derivation.to_latex() + "$$") if rep.reduction is None
                else (f"numeric reduction at G = {G} (decided numerically)", "$$" + rep.reduction.to_latex() + "$$")
                for G, rep in self.reports if rep.derivation is not None or rep.reduction is not None]
        return report_html(f"{self.verdict} ({self.convention} convention)", reason=self.reason, table=self.table(), more=more)

    def _repr_latex_(self) -> str:
        return "$$" + r",\quad ".join(f"c_{{G={G}}} = {sp.latex(rep.scale)}" for G, rep in self.reports if rep.scale is not None) + "$$"


def _sizes(G) -> tuple:
    if isinstance(G, Sequence) and not isinstance(G, str):
        if not G:
            raise ValueError("G must be an int >= 2 or a non-empty list of them")
        return tuple(require_int("G", g, minimum=2) for g in G)
    return (require_int("G", G, minimum=2),)


def _order_dependence(fn, convention, G, lengths, fixed) -> str | None:
    """Why the function's answer for a group depends on more than the group (None when it does not)."""
    rewards = torch.tensor(np.random.default_rng(7).integers(0, 3, (3, G)), dtype=F64)
    base = _Grouped(fn, convention, G, lengths, fixed, seed=0)(rewards)
    if convention in _RAGGED:
        shuffled = _Grouped(fn, convention, G, lengths, fixed, seed=0, reorder=99)(rewards)
        if float((shuffled - base).abs().max()) > 1e-12 * max(1.0, float(base.abs().max())):
            return "its advantages change when the same responses come in another order: it groups by position, not by the index"
    # other groups unlike the check's own (binary, seed 0) in number and in law, so that no batch statistic coincides
    other = _Grouped(fn, convention, G, lengths, fixed, seed=11, others=(G + 2,) if convention in _RAGGED else (), extra=3, law="spread")(rewards)
    if float((other - base).abs().max()) > 1e-12 * max(1.0, float(base.abs().max())):
        return ("a group's advantages change with the other groups of the batch (a normalisation across the batch, "
                "as a batch whitening): it is not a function of its group, and the checker decides nothing")
    return None


def check_grouped_advantage(fn: Callable, *, G: int | Sequence[int], convention: str = "batch", rewards: str | Sequence[float] = "binary",
                            lengths: str = "equal", **fixed: object) -> GroupedAdvantageReport:
    r"""Certify a trainer's group-advantage estimator as written, for each group size.

    For each :math:`G` the function is turned into the ``[B, G]`` callable that
    :func:`~numeric.variants.check_group_advantage` takes (see the module
    notes for the conventions) and checked under the reward law ``rewards``:
    :math:`\mathbb{E}[A_i s_i] = c\,\nabla_\theta J + \text{residual}`, with the
    verdict ``unbiased``, ``scaled``, ``reweighted``, ``biased`` or ``undecided``.

    Parameters
    ----------
    fn : callable
        The estimator, in the calling convention ``convention``.
    G : int or list of int
        The group sizes to certify (each :math:`\ge 2`); with ``"flat"``/``"verl"`` every call
        mixes them with groups of other sizes, shuffled.
    convention : str
        One of :data:`CONVENTIONS` (default ``"batch"``, the checker's own ``[B, G]`` form).
    rewards : {"binary"} or list of numbers
        The reward law (a finite law: the expected update is exact).
    lengths : {"equal", "by_reward"}
        ``"verl"`` only: every response 3 tokens long, or a length fixed by the response's reward
        (so a length-aware estimator, as OPO, is checked under a length that moves with the reward).
    **fixed
        Passed to every call (``norm_adv_by_std_in_grpo=False``, ``epsilon=1e-6``, ``config=...``).

    Returns
    -------
    GroupedAdvantageReport

    Raises
    ------
    TypeError, ValueError
        An unknown convention, a bad ``G``, ``lengths`` or ``rewards``; a function that cannot be
        called in its convention or returns the wrong number of advantages.

    Examples
    --------
    >>> import torch
    >>> from numeric.variants import check_grouped_advantage
    >>> def rloo(scores, index):   # flat scores and a group index
    ...     out = torch.empty_like(scores)
    ...     for g in set(index.tolist()):
    ...         k = torch.as_tensor(index == g)
    ...         out[k] = scores[k] - (scores[k].sum() - scores[k]) / (int(k.sum()) - 1)
    ...     return out
    >>> rep = check_grouped_advantage(rloo, G=[3, 4], convention="flat")
    >>> rep.verdict, [str(r.scale) for _, r in rep.reports]
    ('unbiased', ['1', '1'])
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable advantage estimator, got {type(fn).__name__}")
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    if lengths not in ("equal", "by_reward"):
        raise ValueError(f"lengths must be 'equal' or 'by_reward', got {lengths!r}")
    if isinstance(rewards, str) and rewards != "binary":
        raise ValueError(f"rewards must be 'binary' or a list of reward values (a finite law), got {rewards!r}")
    sizes = _sizes(G)
    for g in sizes:
        why = _order_dependence(fn, convention, g, lengths, fixed)
        if why is not None:
            return GroupedAdvantageReport(convention, "undecided", (), f"At G = {g} {why}.")
    name = getattr(fn, "__name__", "the estimator")
    reports = tuple((g, check_group_advantage(_Grouped(fn, convention, g, lengths, fixed), G=g, rewards=rewards, name=f"{name} ({convention}, G = {g})"))
                    for g in sizes)
    verdict = max((rep.verdict for _, rep in reports), key=VERDICTS.index)
    ragged = " (ragged groups, shuffled)" if convention in _RAGGED else ""
    reason = "; ".join(f"G = {g}: {rep.reason}" for g, rep in reports) + ragged
    if len({rep.verdict for _, rep in reports}) > 1:
        reason = f"{verdict} at some group size, the weakest verdict of all: " + reason
    return GroupedAdvantageReport(convention, verdict, reports, reason)
