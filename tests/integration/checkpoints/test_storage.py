"""flotilla.checkpoints against real storage: a local directory (file://) and an S3 server (moto, IAM auth)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from flotilla.checkpoints import (
    SnapshotExistsError,
    SnapshotStorageError,
    StorageConfig,
    describe_snapshot,
    list_snapshots,
    new_savepoint_dir,
    newest,
    prune_checkpoints,
    read_metadata,
    storage_config,
    write_snapshot,
)
from tests.support.s3 import S3Server, s3_server, s3_server_process  # noqa: F401

JOB = "0123456789abcdef0123456789abcdef"
OTHER = "012345ffffffffffffffffffffffffff"  # same 6-digit savepoint prefix, another job
THIRD = "fedcba9876543210fedcba9876543210"


@pytest.fixture(params=["file", "s3"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> StorageConfig:
    if request.param == "file":
        return storage_config({"execution.checkpointing.dir": f"file://{tmp_path}/ck",
                               "execution.checkpointing.savepoint-dir": f"file://{tmp_path}/sp"})
    server: S3Server = request.getfixturevalue("s3_server")
    return server.storage_config("flink/checkpoints")


def ck(config: StorageConfig, job: str, n: int) -> str:
    assert config.checkpoint_dir
    return f"{config.checkpoint_dir}/{job}/chk-{n}"


async def test_newest_complete_checkpoint_among_several(config: StorageConfig) -> None:
    for n in (1, 2, 3):
        await write_snapshot(config, ck(config, JOB, n), b'{"n": %d}' % n, markers=("shared", "taskowned"))
        await asyncio.sleep(1.05)  # completion times a second apart (S3 LastModified has one-second resolution)
    snaps = await list_snapshots(config, JOB)
    assert sorted(s.checkpoint_id for s in snaps if s.checkpoint_id) == [1, 2, 3]
    best = newest(snaps)
    assert best is not None and best.path == ck(config, JOB, 3) and best.kind == "checkpoint"
    assert best.job_id == JOB and best.completed_at is not None
    assert all(s.completed_at and s.completed_at.tzinfo for s in snaps)
    assert best.completed_at > min(s.completed_at for s in snaps if s.completed_at)


async def test_half_written_checkpoint_is_skipped(config: StorageConfig, tmp_path: Path) -> None:
    await write_snapshot(config, ck(config, JOB, 4), b"{}")
    # chk-5 has its payload but no _metadata yet; a hidden in-progress directory never counts
    await write_snapshot(config, ck(config, JOB, 5) + "/x", b"{}")  # x/_metadata: chk-5 itself is incomplete
    await write_snapshot(config, ck(config, JOB, 6).replace("chk-6", ".chk-6.abc.inprogress"), b"{}")
    snaps = await list_snapshots(config, JOB)
    assert [s.checkpoint_id for s in snaps] == [4]
    with pytest.raises(SnapshotStorageError) as e:
        await describe_snapshot(config, ck(config, JOB, 5))
    assert e.value.reason == "invalid"


async def test_savepoints_found_by_job_id_prefix(config: StorageConfig) -> None:
    assert config.savepoint_dir
    mine = new_savepoint_dir(config.savepoint_dir, JOB)
    await write_snapshot(config, mine, b"{}")
    await write_snapshot(config, new_savepoint_dir(config.savepoint_dir, THIRD), b"{}")
    snaps = await list_snapshots(config, JOB)
    assert [(s.kind, s.path) for s in snaps] == [("savepoint", mine)]
    # the name holds 6 digits of the job id only: another job with the same prefix sees it too (as in Flink)
    assert [s.path for s in await list_snapshots(config, OTHER)] == [mine]
    described = await describe_snapshot(config, mine + "/_metadata")
    assert described.path == mine and described.kind == "savepoint" and described.completed_at is not None


async def test_nothing_for_the_job_is_an_empty_list(config: StorageConfig) -> None:
    assert await list_snapshots(config, JOB) == []
    await write_snapshot(config, ck(config, THIRD, 1), b"{}")
    assert await list_snapshots(config, JOB) == []


async def test_a_later_call_sees_new_checkpoints(config: StorageConfig) -> None:
    await write_snapshot(config, ck(config, JOB, 1), b"{}")
    assert len(await list_snapshots(config, JOB)) == 1
    await write_snapshot(config, ck(config, JOB, 2), b"{}")
    assert {s.checkpoint_id for s in await list_snapshots(config, JOB)} == {1, 2}


async def test_metadata_read_back_and_retention(config: StorageConfig) -> None:
    for n in (1, 2, 3):
        await write_snapshot(config, ck(config, JOB, n), b'{"offset": %d}' % (n * 100))
    snap, data = await read_metadata(config, ck(config, JOB, 2))
    assert data == b'{"offset": 200}' and snap.checkpoint_id == 2
    removed = await prune_checkpoints(config, JOB, 2)
    assert removed == [ck(config, JOB, 1)]
    assert sorted(s.checkpoint_id or 0 for s in await list_snapshots(config, JOB)) == [2, 3]


async def test_writing_a_complete_snapshot_twice_is_refused(config: StorageConfig) -> None:
    await write_snapshot(config, ck(config, JOB, 1), b"first")
    with pytest.raises(SnapshotExistsError):
        await write_snapshot(config, ck(config, JOB, 1), b"second")
    assert (await read_metadata(config, ck(config, JOB, 1)))[1] == b"first"


async def test_missing_snapshot_path_is_invalid(config: StorageConfig) -> None:
    with pytest.raises(SnapshotStorageError) as e:
        await describe_snapshot(config, ck(config, JOB, 99))
    assert e.value.reason == "invalid"


# ---------------------------------------------------------------------------------------------- S3 failures
@pytest.mark.parametrize("which", ["secret", "key"])
async def test_wrong_credentials_are_denied(s3_server: S3Server, which: str) -> None:  # noqa: F811
    bad = {"secret_key": "not-the-secret"} if which == "secret" else {"access_key": "AKIANOSUCHKEY0000000",
                                                                       "secret_key": "not-the-secret"}
    config = s3_server.storage_config(**bad)
    with pytest.raises(SnapshotStorageError) as e:
        await list_snapshots(config, JOB)
    assert e.value.reason == "denied"
    assert "not-the-secret" not in str(e.value) and s3_server.secret_key not in str(e.value)
    with pytest.raises(SnapshotStorageError) as e2:
        await write_snapshot(config, ck(config, JOB, 1), b"{}")
    assert e2.value.reason == "denied"


async def test_missing_bucket_is_invalid(s3_server: S3Server) -> None:  # noqa: F811
    config = s3_server.storage_config(bucket="no-such-bucket")
    with pytest.raises(SnapshotStorageError) as e:
        await list_snapshots(config, JOB)
    assert e.value.reason == "invalid" and "bucket" in str(e.value)
    with pytest.raises(SnapshotStorageError) as e2:
        await describe_snapshot(config, "s3://no-such-bucket/ck/x/chk-1")
    assert e2.value.reason == "invalid"


async def test_server_down_is_unreachable_within_the_timeout(tmp_path: Path) -> None:
    server = S3Server.start(tmp_path)
    try:
        server.new_bucket()
        config = server.storage_config()
        await write_snapshot(config, ck(config, JOB, 1), b"{}")
    finally:
        server.stop()
    started = time.monotonic()
    with pytest.raises(SnapshotStorageError) as e:
        await list_snapshots(config, JOB, timeout=5.0)
    assert e.value.reason == "unreachable"
    assert time.monotonic() - started < 5.5


async def test_unanswered_requests_time_out_as_unreachable() -> None:
    import socket

    with socket.socket() as listener:  # accepts connections (the backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        config = storage_config({"state.checkpoints.dir": "s3://b/ck", "s3.endpoint": f"http://127.0.0.1:{port}",
                                 "s3.access-key": "a", "s3.secret-key": "b"})
        started = time.monotonic()
        with pytest.raises(SnapshotStorageError) as e:
            await list_snapshots(config, JOB, timeout=1.0)
        assert e.value.reason == "unreachable"
        assert time.monotonic() - started < 2.0
