"""Flink's snapshot names and newest()."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flotilla.checkpoints import Snapshot, newest
from flotilla.checkpoints.layout import checkpoint_id_of, is_savepoint_name, join, savepoint_prefix

T0 = datetime(2026, 1, 1, tzinfo=UTC)
JOB = "0123456789abcdef0123456789abcdef"


def snap(n: int | None, at: datetime | None, kind: str = "checkpoint") -> Snapshot:
    return Snapshot(f"s3://b/ck/{JOB}/chk-{n}", kind, JOB, n, at)  # type: ignore[arg-type]


def test_checkpoint_names() -> None:
    assert checkpoint_id_of("chk-42") == 42
    for name in (".chk-42.x.inprogress", "chk-", "chk-4a", "shared", "taskowned", "chk-1/"):
        assert checkpoint_id_of(name) is None


def test_savepoint_names_and_prefix() -> None:
    assert is_savepoint_name("savepoint-012345-0123456789ab")
    assert not is_savepoint_name(".savepoint-012345-0123456789ab")
    assert not is_savepoint_name("savepoint-01234-0123456789ab")
    assert savepoint_prefix(JOB.upper()) == "savepoint-012345-"


def test_join_keeps_the_scheme() -> None:
    assert join("s3://b/ck/", JOB, "chk-1") == f"s3://b/ck/{JOB}/chk-1"
    assert join("/", "a") == "/a"


def test_newest_by_completion_time_then_id() -> None:
    a, b, c = snap(1, T0), snap(2, T0 + timedelta(seconds=5)), snap(3, T0 + timedelta(seconds=5))
    assert newest([b, a, c]) == c
    assert newest([a, b]) == b
    sp = Snapshot("s3://b/sp/savepoint-012345-0123456789ab", "savepoint", JOB, None, T0 + timedelta(seconds=9))
    assert newest([a, b, sp]) == sp
    assert newest([]) is None
    assert newest([snap(7, None), a]) == a  # a known completion time beats an unknown one
