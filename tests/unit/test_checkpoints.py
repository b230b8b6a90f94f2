"""The shared checkpoint store: layout, atomic writes, retention, newest snapshot, path resolution."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
import pytest

from flotilla.member.checkpoints import (
    METADATA,
    CheckpointExistsError,
    CheckpointStore,
    SnapshotCorruptError,
    SnapshotNotFoundError,
    valid_job_id,
)

JOB = "6f1c0e2b9a4d4b7e8c3a1d2e5f607182"
OTHER = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def store(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore(tmp_path / "checkpoints")


def test_layout_and_metadata(store: CheckpointStore) -> None:
    snap = store.write_checkpoint(JOB, 7, 1400, 1734462491693, restored_from=None, extra={"writer": "a"})
    chk = store.root / JOB / "chk-7"
    assert snap.path == str(chk)
    assert snap.metadata_path == str(chk / METADATA)
    assert (store.root / JOB / "shared").is_dir() and (store.root / JOB / "taskowned").is_dir()
    meta = orjson.loads((chk / METADATA).read_bytes())
    assert meta["jobId"] == JOB and meta["checkpointId"] == 7 and meta["offset"] == 1400
    assert meta["timestamp"] == 1734462491693 and meta["kind"] == "checkpoint" and meta["writer"] == "a"
    assert store.resolve(snap.path) == snap
    assert store.checkpoint_path(JOB, 7) == snap.path


def test_retention_keeps_the_newest(store: CheckpointStore) -> None:
    for n in range(1, 6):
        store.write_checkpoint(JOB, n, n * 100, 1000 + n, retained=3)
    assert [s.checkpoint_id for s in store.checkpoints(JOB)] == [3, 4, 5]
    store.write_checkpoint(JOB, 6, 600, 1006)  # default retention: 1
    assert [s.checkpoint_id for s in store.checkpoints(JOB)] == [6]
    assert sorted(os.listdir(store.root / JOB)) == ["chk-6", "shared", "taskowned"]


def test_newest_checkpoint_and_job_isolation(store: CheckpointStore) -> None:
    assert store.latest_checkpoint(JOB) is None
    store.write_checkpoint(JOB, 9, 900, 2000, retained=5)
    store.write_checkpoint(JOB, 10, 1000, 2001, retained=5)
    store.write_checkpoint(OTHER, 11, 5, 2002)
    latest = store.latest_checkpoint(JOB)
    assert latest is not None and latest.checkpoint_id == 10 and latest.offset == 1000
    assert store.job_ids() == sorted([JOB, OTHER])
    # ordering is numeric, not lexical (chk-10 > chk-9)
    assert [s.checkpoint_id for s in store.checkpoints(JOB)] == [9, 10]


def test_crashed_write_leaves_no_checkpoint(store: CheckpointStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.write_checkpoint(JOB, 1, 100, 1000)

    def crash(src: str, dst: str) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(os, "rename", crash)
    with pytest.raises(OSError, match="power cut"):
        store.write_checkpoint(JOB, 2, 200, 2000)
    monkeypatch.undo()
    assert not (store.root / JOB / "chk-2").exists()
    assert [n for n in os.listdir(store.root / JOB) if n.startswith(".")] == []  # the temp dir is cleaned up
    latest = store.latest_checkpoint(JOB)
    assert latest is not None and latest.checkpoint_id == 1


def test_half_written_temp_dirs_are_invisible(store: CheckpointStore) -> None:
    store.write_checkpoint(JOB, 1, 100, 1000)
    # what a writer killed before its rename leaves: a hidden in-progress directory with a partial file
    tmp = store.root / JOB / ".chk-2.x1y2.inprogress"
    tmp.mkdir()
    (tmp / METADATA).write_bytes(b'{"format": "flotilla-sim-snap')
    latest = store.latest_checkpoint(JOB)
    assert latest is not None and latest.checkpoint_id == 1
    assert [s.checkpoint_id for s in store.checkpoints(JOB)] == [1]
    assert store.cleanup_incomplete(JOB) == 1 and not tmp.exists()


def test_corrupt_newest_falls_back_to_older(store: CheckpointStore) -> None:
    store.write_checkpoint(JOB, 1, 100, 1000, retained=2)
    store.write_checkpoint(JOB, 2, 200, 2000, retained=2)
    (store.root / JOB / "chk-2" / METADATA).write_bytes(b"garbage")
    latest = store.latest_checkpoint(JOB)
    assert latest is not None and latest.checkpoint_id == 1
    with pytest.raises(SnapshotCorruptError):
        store.resolve(str(store.root / JOB / "chk-2"))


def test_same_checkpoint_twice_is_refused(store: CheckpointStore) -> None:
    store.write_checkpoint(JOB, 3, 300, 1000)
    with pytest.raises(CheckpointExistsError):
        store.write_checkpoint(JOB, 3, 999, 2000)
    snap = store.latest_checkpoint(JOB)
    assert snap is not None and snap.offset == 300  # the first writer's checkpoint is intact


def test_resolve_accepts_dir_metadata_file_and_uri(store: CheckpointStore) -> None:
    snap = store.write_checkpoint(JOB, 4, 400, 1000)
    assert store.resolve(snap.path) == snap
    assert store.resolve(snap.path + "/") == snap
    assert store.resolve(snap.metadata_path) == snap
    assert store.resolve("file://" + snap.path) == snap
    assert store.resolve("file://" + snap.metadata_path) == snap


def test_resolve_errors_have_flinks_messages(store: CheckpointStore, tmp_path: Path) -> None:
    missing = str(store.root / JOB / "chk-99")
    with pytest.raises(SnapshotNotFoundError) as e:
        store.resolve(missing)
    assert str(e.value) == f"Cannot find checkpoint or savepoint file/directory '{missing}' on file system 'file'."
    assert e.value.java_type == "java.io.FileNotFoundException"
    empty = store.root / JOB / "chk-5"
    empty.mkdir(parents=True)
    with pytest.raises(SnapshotNotFoundError, match="Cannot find meta data file '_metadata' in directory"):
        store.resolve(str(empty))
    with pytest.raises(SnapshotNotFoundError, match="on file system 's3'"):
        store.resolve("s3://bucket/checkpoints/" + JOB + "/chk-1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / METADATA).write_text("{}")
    with pytest.raises(SnapshotNotFoundError):  # the shared directory is the only file system
        store.resolve(str(outside))
    with pytest.raises(SnapshotNotFoundError):
        store.resolve(str(store.root / ".." / "elsewhere"))
    with pytest.raises(SnapshotNotFoundError):
        store.resolve("relative/chk-1")


def test_savepoints_and_newest_snapshot(store: CheckpointStore) -> None:
    store.write_checkpoint(JOB, 5, 500, 1000)
    path = store.new_savepoint_path(JOB)
    assert Path(path).parent == store.root / "savepoints"
    assert Path(path).name.startswith(f"savepoint-{JOB[:6]}-") and len(Path(path).name) == len("savepoint-") + 6 + 1 + 12
    sp = store.write_savepoint(JOB, 6, 560, 1100, path=path)
    assert sp.kind == "savepoint" and store.resolve(path) == sp
    assert store.savepoints(JOB) == [sp] and store.savepoints(OTHER) == []
    newest = store.latest_snapshot(JOB)
    assert newest == sp
    assert store.latest_snapshot(JOB, include_savepoints=False) == store.latest_checkpoint(JOB)
    store.write_checkpoint(JOB, 7, 600, 1200)
    newest = store.latest_snapshot(JOB)
    assert newest is not None and newest.kind == "checkpoint" and newest.checkpoint_id == 7


def test_job_ids_are_validated(store: CheckpointStore) -> None:
    assert valid_job_id(JOB) and valid_job_id(JOB.upper())
    for bad in ("", "xyz", JOB + "0", "../" + JOB[3:], None, 42):
        assert not valid_job_id(bad)
    with pytest.raises(ValueError):
        store.write_checkpoint("../../etc", 1, 0, 0)
    assert store.latest_checkpoint("../../etc") is None
    assert store.latest_snapshot("nope") is None


def test_concurrent_writers_and_readers_never_see_partial_checkpoints(store: CheckpointStore) -> None:
    jobs = [f"{i:032x}" for i in range(1, 4)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(job: str) -> None:
        try:
            for n in range(1, 40):
                store.write_checkpoint(job, n, n * 10, n, retained=2)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader() -> None:
        try:
            while not stop.is_set():
                for job in jobs:
                    snap = store.latest_checkpoint(job)
                    if snap is not None:
                        assert snap.offset == snap.checkpoint_id * 10
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(j,)) for j in jobs]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors
    for job in jobs:
        assert [s.checkpoint_id for s in store.checkpoints(job)] == [38, 39]
