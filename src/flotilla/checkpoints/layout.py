"""Flink's layout of checkpoints and savepoints (pure: names in, snapshots out).

::

    <checkpoint dir>/<jobId>/chk-<n>/_metadata          a complete checkpoint (``_metadata`` is written last)
    <checkpoint dir>/<jobId>/shared/, taskowned/        Flink's shared and task-owned state
    <savepoint dir>/savepoint-<jobId[:6]>-<12 hex>/_metadata    a complete savepoint

Entries whose names start with ``.`` are in progress (a writer's temporary directory) and never count; a
``chk-<n>`` without ``_metadata`` is incomplete.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

__all__ = [
    "METADATA", "JOB_ID_RE", "Snapshot", "SnapshotKind", "checkpoint_id_of", "is_savepoint_name", "join",
    "newest", "savepoint_prefix", "valid_job_id",
]

METADATA = "_metadata"
JOB_ID_RE = re.compile(r"^[0-9a-fA-F]{32}$")
_CHK_RE = re.compile(r"^chk-(\d+)$")
_SAVEPOINT_RE = re.compile(r"^savepoint-([0-9a-fA-F]{6})-([0-9a-fA-F]{12})$")

SnapshotKind = Literal["checkpoint", "savepoint"]


@dataclass(frozen=True)
class Snapshot:
    """One complete checkpoint or savepoint."""

    path: str  # what Flink takes in initialSavepointPath: "s3://b/ck/<jobId>/chk-42"
    kind: SnapshotKind
    job_id: str | None
    checkpoint_id: int | None
    completed_at: datetime | None  # UTC: when its _metadata was written

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "kind": self.kind, "jobId": self.job_id, "checkpointId": self.checkpoint_id,
                "completedAt": self.completed_at.isoformat().replace("+00:00", "Z") if self.completed_at else None}


def valid_job_id(job_id: object) -> bool:
    return isinstance(job_id, str) and bool(JOB_ID_RE.match(job_id))


def checkpoint_id_of(name: str) -> int | None:
    """``n`` for a directory named ``chk-<n>``; None for anything else (hidden entries included)."""
    m = _CHK_RE.match(name)
    return int(m.group(1)) if m else None


def is_savepoint_name(name: str) -> bool:
    return bool(_SAVEPOINT_RE.match(name))


def savepoint_prefix(job_id: str) -> str:
    """The name prefix of the savepoints of ``job_id``: ``savepoint-<jobId[:6]>-``."""
    return f"savepoint-{job_id[:6].lower()}-"


def join(base: str, *names: str) -> str:
    """``base`` (a URI or path) with ``names`` appended by ``/``."""
    out = base.rstrip("/") or "/"
    for n in names:
        out = out + n if out.endswith("/") else f"{out}/{n}"
    return out


def _order(s: Snapshot) -> tuple[int, float, int, int]:
    ts = s.completed_at.timestamp() if s.completed_at is not None else float("-inf")
    return (1 if s.completed_at is not None else 0, ts, s.checkpoint_id if s.checkpoint_id is not None else -1,
            1 if s.kind == "checkpoint" else 0)


def newest(snapshots: Iterable[Snapshot]) -> Snapshot | None:
    """The newest snapshot: by ``completed_at``, then checkpoint id (checkpoints win exact ties)."""
    best: Snapshot | None = None
    for s in snapshots:
        if best is None or _order(s) > _order(best):
            best = s
    return best
