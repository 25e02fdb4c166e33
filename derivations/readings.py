r"""Where each trainer was read: its repository and the commits, and a citation that points a row at file and lines.

A name a trainer ships (a ``loss_type``, a ``loss_agg_mode``, an advantage
estimator) means what it means *in that trainer at that commit*.  Every row of
the package that quotes a trainer (a :class:`~derivations.methods.Peer` of the
method registry, an estimator of :data:`numeric.variants.ESTIMATORS`, an
aggregation mode of :data:`numeric.TRAINER_MODES`) carries a :class:`Citation`:
the trainer, the commit of :data:`SNAPSHOTS` it was read at, and the file and
lines there.  A reading changes by adding a row at another commit, never by
editing what an existing row (or a package name) computes.

Examples
--------
>>> from derivations.readings import SNAPSHOTS, Citation, snapshot
>>> snapshot("verl").repo, snapshot("verl").commit[:7]
('verl-project/verl', '1dda039')
>>> Citation("verl", "1dda039", "verl/trainer/ppo/core_algos.py:1140-1206").text()
'verl @ 1dda039 (verl-project/verl), verl/trainer/ppo/core_algos.py:1140-1206'
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["SNAPSHOTS", "Citation", "Snapshot", "require_trainers", "snapshot"]


class Snapshot(NamedTuple):
    """One commit of one trainer's repository that the package read."""

    trainer: str
    repo: str
    commit: str
    date: str


SNAPSHOTS: tuple[Snapshot, ...] = (
    Snapshot("verl", "volcengine/verl", "b178a3cd56f58b2d502255daba591e92833930a7", "2026-01-29"),
    Snapshot("verl", "verl-project/verl", "1dda039b9c6311889a9c9a26040677e1254814f9", "2026-08-22"),
    Snapshot("TRL", "huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8", "2026-07-24"),
    Snapshot("OpenRLHF", "OpenRLHF/OpenRLHF", "3c3be6234e0cb353e76bb8019947db9dfe99fca7", "2026-08-13"),
    Snapshot("prime-rl", "PrimeIntellect-ai/prime-rl", "559b44772e471d1538537b8805cc77f3824a5e64", "2026-08-21"),
    Snapshot("SkyRL", "NovaSky-AI/SkyRL", "a9564572eb8e91076be43c1bd5e4615e3de17265", "2026-08-21"),
    Snapshot("slime", "THUDM/slime", "624b824a898ab0ec1fcb4d373004c7f3852bf515", "2026-08-21"),
    Snapshot("AReaL", "areal-project/AReaL", "cbff54d645d2cd8ee1f1c358a82f3f473588433d", "2026-08-22"),
    Snapshot("ms-swift", "modelscope/ms-swift", "3602360a562313afbf2ef6065fdf61f271a2c5b9", "2026-08-22"),
)
"""Every commit read, oldest first per trainer: verl at its January 2026 home (volcengine) and at verl-project."""


def snapshot(trainer: str, commit: str | None = None) -> Snapshot:
    """The snapshot of ``trainer`` whose commit starts with ``commit`` (its newest when ``None``)."""
    if not isinstance(trainer, str):
        raise TypeError(f"trainer must be a str, got {type(trainer).__name__}")
    rows = [s for s in SNAPSHOTS if s.trainer == trainer]
    if not rows:
        raise ValueError(f"trainer must be one of {', '.join(sorted({s.trainer for s in SNAPSHOTS}))}, got {trainer!r}")
    if commit is None:
        return rows[-1]
    if not isinstance(commit, str):
        raise TypeError(f"commit must be a str (a commit hash or its first 7+ characters), got {type(commit).__name__}")
    found = [s for s in rows if len(commit) >= 7 and s.commit.startswith(commit)]
    if len(found) != 1:
        raise ValueError(f"commit must start one of {trainer}'s read commits ({', '.join(s.commit[:7] for s in rows)}), got {commit!r}")
    return found[0]


def require_trainers(trainers: object, name: str = "trainers") -> tuple[str, ...] | None:
    """``trainers`` as a tuple of trainers of :data:`SNAPSHOTS` (``None`` stays ``None``: all of them); else a named error."""
    if trainers is None:
        return None
    known = tuple(dict.fromkeys(s.trainer for s in SNAPSHOTS))
    if isinstance(trainers, str) or not isinstance(trainers, (tuple, list)):
        raise TypeError(f"{name} must be a tuple of trainer names (of {known}) or None, got {type(trainers).__name__}")
    unknown = [t for t in trainers if t not in known]
    if unknown:
        raise ValueError(f"{name} must be among {known}, got {unknown!r}")
    return tuple(trainers)


class Citation(NamedTuple):
    """A trainer, the commit (or its first 7+ characters) a row was read at, and ``path:lines`` there."""

    trainer: str
    commit: str
    where: str

    def snapshot(self) -> Snapshot:
        """The snapshot the commit names."""
        return snapshot(self.trainer, self.commit)

    def text(self) -> str:
        """``trainer @ commit7 (repo), path:lines``."""
        s = self.snapshot()
        return f"{self.trainer} @ {s.commit[:7]} ({s.repo}), {self.where}"
