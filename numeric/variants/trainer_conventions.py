r"""How trainers call their losses: what they pass with each micro-batch, and what they do around the call.

:func:`~numeric.variants.check_loss_execution` runs a loss cut into :math:`W`
data-parallel ranks and :math:`U` micro-batches.  Around each call a trainer passes
counts of the global batch (so that a micro-batch's loss is a slice of the batch's),
may scale the returned loss before the backward pass, reduces the ranks' gradients
(DDP's and FSDP's mean, or a sum), and may fold the normaliser into the advantages
before the split.  A :class:`Convention` records those four choices; the engine
computes, for each micro-batch, the counts of its :class:`Share` the trainer would
pass, and hands them over under the trainer's own names.  The trainers', as read
in their code (:data:`EXECUTION_CONVENTIONS`):

``"verl"``
    ``dp_size``, ``batch_num_tokens`` (the mini-batch's valid tokens, all-reduced over
    the data-parallel group before the micro-batch split) and ``global_batch_size``
    (the mini-batch's rows, ``ppo_mini_batch_size * rollout.n``, empty ones included),
    by keyword or in ``config.global_batch_info``; ``agg_loss`` multiplies by
    ``dp_size`` to undo FSDP's mean; each micro-batch's loss is back-propagated as
    it is.  verl-project/verl at 1dda039b9c6311889a9c9a26040677e1254814f9:
    ``verl/trainer/ppo/core_algos.py:1140`` (``agg_loss``; token-mean 1170,
    seq-mean 1181, 1194), ``verl/workers/engine/fsdp/transformer_impl.py:706-711``
    (the count all-reduced, ``dp_size``) and ``:743`` (``loss.backward()``),
    ``verl/workers/utils/losses.py:65-67`` (``config.global_batch_info``),
    ``verl/trainer/ppo/ray_trainer.py:1353-1362`` (``global_batch_size``).
``"trl"``
    ``num_items_in_batch`` (the accumulated batch's tokens, gathered over the
    processes), ``num_processes`` and ``current_gradient_accumulation_steps``, the
    names TRL's ``GRPOTrainer`` reads them by; its loss divides by them itself and is
    back-propagated as returned.  huggingface/trl at
    f2cd57710ae345ea6428ae95363267fcf38a3dc8: ``trl/trainer/grpo_trainer.py:2427``
    (``num_items_in_batch``), ``:3124-3140`` (the loss types' normalisers).
``"openrlhf"``
    ``dp_size``, ``batch_num_tokens`` and ``global_batch_size`` (non-empty rows),
    both summed over the optimizer step's micro-batches and all ranks and divided by
    the accumulation steps, because DeepSpeed multiplies every micro-batch's loss by
    ``1/gas`` before its backward pass (so does the engine here).  OpenRLHF/OpenRLHF
    at 3c3be6234e0cb353e76bb8019947db9dfe99fca7: ``openrlhf/utils/loss_utils.py:54-77``,
    ``openrlhf/models/loss.py:11-39`` (``aggregate_loss``),
    ``openrlhf/trainer/ray/ppo_actor.py:189, 306-312, 354``.
``"prime-rl"``
    ``rl_scale``, the step's loss tokens summed over its micro-batches and
    all-reduced over the data-parallel group, and FSDP's mean undone after the
    accumulation, so the ranks' gradients are *summed*.  PrimeIntellect-ai/prime-rl at
    559b44772e471d1538537b8805cc77f3824a5e64: ``src/prime_rl/trainer/rl/train.py:301-323``
    and ``:556-558``, ``src/prime_rl/trainer/rl/loss.py:285-298``.
``"skyrl"``
    nothing: the driver divides each mini-batch's advantages by its token count
    before the split (``loss_reduction="token_mean"``), the loss is a masked sum, and
    the worker multiplies it by ``dp_size`` before the backward pass.
    NovaSky-AI/SkyRL at a9564572eb8e91076be43c1bd5e4615e3de17265:
    ``skyrl/train/trainer.py:1484-1505``,
    ``skyrl/backends/skyrl_train/utils/ppo_utils.py:1145-1181``,
    ``skyrl/backends/skyrl_train/workers/worker.py:1082-1091``.

``None`` (in :func:`~numeric.variants.check_loss_execution`) passes nothing and reduces
by the mean; a :class:`Convention` of one's own describes another trainer.

References
----------
The commits and lines above; verl PR 3994 (the global token count), TRL PR 3938 (DAPO's
accumulated normaliser), prime-rl PR 2562, SkyRL PR 1296.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = ["EXECUTION_CONVENTIONS", "Convention", "Share"]

F64 = torch.float64


@dataclass(frozen=True)
class Share:
    """One micro-batch's place in the global batch: the counts a trainer can pass with it.

    Attributes
    ----------
    world_size, micro_batches, rank, micro_batch : int
        :math:`W`, :math:`U`, and which rank :math:`p` and micro-batch :math:`q` this is.
    tokens, rows, sequences : int
        The global batch's valid tokens :math:`Z`, rows :math:`B`, rows with a token :math:`B'`.
    rank_tokens, micro_tokens : int
        The valid tokens of this rank's share, and of this micro-batch (:math:`Z_{p,q}`).
    """

    world_size: int
    micro_batches: int
    rank: int
    micro_batch: int
    tokens: int
    rows: int
    sequences: int
    rank_tokens: int
    micro_tokens: int


@dataclass(frozen=True)
class Convention:
    """How a trainer calls its loss: the keyword arguments it passes, what it does to the loss and to the gradients.

    Attributes
    ----------
    name : str
    arguments : callable
        ``Share -> dict``: the keyword arguments passed with the micro-batch (by the trainer's own names).
    loss_factor : callable
        ``Share -> float``: the factor the trainer applies to the returned loss before the backward pass.
    reduction : str
        ``"mean"`` (DDP, FSDP: the ranks' gradients averaged) or ``"sum"`` (the mean undone).
    advantages : callable or None
        ``mask -> tensor``: a factor the trainer applies to the advantages over the global batch, before the split.
    config_attribute : str or None
        Where the arguments go instead when the function takes none of them by name but a ``config``
        among the fixed arguments has this dict attribute (verl's ``global_batch_info``).
    source : str
        Where it was read.
    """

    name: str
    arguments: Callable[[Share], dict] = field(default=lambda share: {})
    loss_factor: Callable[[Share], float] = field(default=lambda share: 1.0)
    reduction: str = "mean"
    advantages: Callable[[torch.Tensor], torch.Tensor] | None = None
    config_attribute: str | None = None
    source: str = ""


EXECUTION_CONVENTIONS: dict[str, Convention] = {
    "verl": Convention(
        "verl", lambda s: {"dp_size": s.world_size, "batch_num_tokens": s.tokens, "global_batch_size": s.rows},
        config_attribute="global_batch_info",
        source="verl-project/verl@1dda039b9c6311889a9c9a26040677e1254814f9 verl/trainer/ppo/core_algos.py:1140"),
    "trl": Convention(
        "trl", lambda s: {"num_items_in_batch": torch.tensor(float(s.tokens), dtype=F64), "num_processes": s.world_size,
                          "current_gradient_accumulation_steps": s.micro_batches},
        source="huggingface/trl@f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py:2427, 3124-3140"),
    "openrlhf": Convention(
        "openrlhf", lambda s: {"dp_size": s.world_size, "batch_num_tokens": s.tokens / s.micro_batches,
                               "global_batch_size": s.sequences / s.micro_batches},
        loss_factor=lambda s: 1.0 / s.micro_batches,
        source="OpenRLHF/OpenRLHF@3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/utils/loss_utils.py:54-77"),
    "prime-rl": Convention(
        "prime-rl", lambda s: {"rl_scale": max(s.tokens, 1)}, reduction="sum",
        source="PrimeIntellect-ai/prime-rl@559b44772e471d1538537b8805cc77f3824a5e64 src/prime_rl/trainer/rl/train.py:301-323, 556-558"),
    "skyrl": Convention(
        "skyrl", loss_factor=lambda s: float(s.world_size), advantages=lambda mask: torch.full_like(mask, 1.0 / max(float(mask.sum()), 1.0)),
        source="NovaSky-AI/SkyRL@a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/train/trainer.py:1484-1505"),
}
"""The trainers' conventions by name (see the module's notes for what each passes and where it was read)."""
