"""JobStorage: one FlinkDeployment's snapshots go where its flinkConfiguration says, else to the shared store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flotilla.member.checkpoints import (
    CheckpointStore,
    JobStorage,
    SnapshotNotFoundError,
    StorageConfigurationError,
)

JOB = "0123456789abcdef0123456789abcdef"


def storage(tmp_path: Path, conf: dict[str, Any] | None) -> tuple[JobStorage, CheckpointStore]:
    shared = CheckpointStore(tmp_path / "shared")
    return JobStorage(shared, lambda: conf), shared


def test_without_directory_keys_the_shared_store_is_used(tmp_path: Path) -> None:
    js, shared = storage(tmp_path, {"taskmanager.numberOfTaskSlots": "2"})
    snap = js.write_checkpoint(JOB, 1, 100, 1000)
    assert snap.path == shared.checkpoint_path(JOB, 1)
    assert js.latest_checkpoint(JOB) == shared.latest_checkpoint(JOB)
    assert js.new_savepoint_path(JOB).startswith(str(shared.root / "savepoints"))


def test_configured_file_directories_hold_checkpoints_and_savepoints(tmp_path: Path) -> None:
    conf = {"state.checkpoints.dir": f"file://{tmp_path}/ck", "state.savepoints.dir": f"{tmp_path}/sp"}
    js, shared = storage(tmp_path, conf)
    for n in (1, 2, 3):
        js.write_checkpoint(JOB, n, n * 100, 1000 + n, retained=2)
    assert sorted(p.name for p in (tmp_path / "ck" / JOB).iterdir()) == ["chk-2", "chk-3", "shared", "taskowned"]
    latest = js.latest_checkpoint(JOB)
    assert latest is not None and latest.path == f"file://{tmp_path}/ck/{JOB}/chk-3" and latest.offset == 300
    assert shared.latest_checkpoint(JOB) is None
    sp_path = js.new_savepoint_path(JOB)
    assert sp_path.startswith(f"{tmp_path}/sp/savepoint-012345-")
    js.write_savepoint(JOB, 4, 350, 2000, path=sp_path)
    assert js.resolve(sp_path).offset == 350 and js.resolve(sp_path + "/_metadata").kind == "savepoint"
    assert js.resolve(f"{tmp_path}/ck/{JOB}/chk-3").checkpoint_id == 3  # a plain path under its own directory


def test_paths_elsewhere_keep_the_shared_stores_rules(tmp_path: Path) -> None:
    js, shared = storage(tmp_path, {"state.checkpoints.dir": f"{tmp_path}/ck"})
    shared.write_checkpoint(JOB, 7, 700, 1)
    assert js.resolve(shared.checkpoint_path(JOB, 7)).offset == 700
    with pytest.raises(SnapshotNotFoundError, match="Cannot find checkpoint or savepoint"):
        js.resolve("/etc")


def test_an_unusable_configuration_refuses_reads_and_writes(tmp_path: Path) -> None:
    js, _ = storage(tmp_path, {"execution.checkpointing.dir": "relative/ck"})
    assert js.configuration_error() is not None and "execution.checkpointing.dir" in js.configuration_error()
    with pytest.raises(StorageConfigurationError):
        js.write_checkpoint(JOB, 1, 1, 1)
    assert js.latest_checkpoint(JOB) is None


def test_configuration_changes_are_followed(tmp_path: Path) -> None:
    conf: dict[str, Any] = {}
    js, shared = storage(tmp_path, conf)
    js.write_checkpoint(JOB, 1, 1, 1)
    conf["state.checkpoints.dir"] = f"{tmp_path}/ck"
    js.write_checkpoint(JOB, 2, 2, 2)
    assert (tmp_path / "ck" / JOB / "chk-2" / "_metadata").is_file()
    assert shared.latest_checkpoint(JOB) is not None and shared.latest_checkpoint(JOB).checkpoint_id == 1
