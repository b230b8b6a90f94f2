"""D22, the failover history: the simulated Flink operator reports its job's progress in status.clusterInfo (simulation only)."""

from __future__ import annotations

from pathlib import Path

from flotilla.failover.history import job_progress
from flotilla.member.checkpoints import CheckpointStore
from flotilla.member.flink_model import FlinkModelConfig
from tests.unit.test_flink_model import Driver, fdep, running


def test_d22_progress_shows_at_start_checkpoints_stop_and_when_reported(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    d = Driver(store, fdep(), FlinkModelConfig(records_per_second=100, checkpoint_interval=2.0))
    assert job_progress(d.status) == (None, None), "nothing before the job first runs"
    d.until(running)
    assert job_progress(d.status) == (0, 0)
    d.advance(2.5)  # checkpoint 1 at start + 2 s
    assert job_progress(d.status) == (200, 0)
    start = d.model.runs[0].start
    d.model.report_progress(start + 3.0)
    assert job_progress(d.status) == (300, 0)
    d.apply(d.model.stop(start + 3.7, deleted=True))
    assert job_progress(d.status) == (370, 0), "the offset the job stopped at"
    assert all(isinstance(v, str) for v in d.status["clusterInfo"].values()), "clusterInfo is a string map"


def test_d22_a_restored_job_reports_where_it_resumed(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    cfg = FlinkModelConfig(records_per_second=100, checkpoint_interval=2.0)
    old = Driver(store, fdep("a"), cfg)
    old.until(running)
    old.advance(4.5)
    old.apply(old.model.stop(old.t, deleted=True))
    newest = store.latest_checkpoint(old.model.job_id or "")
    assert newest is not None
    new = Driver(store, fdep("b", job={"upgradeMode": "savepoint", "initialSavepointPath": newest.path}), cfg,
                 t0=old.t)
    new.until(running)
    processed, restored = job_progress(new.status)
    assert restored == newest.offset == 400 and processed == 400
    at_fault = job_progress(old.status)[0]
    assert at_fault is not None and at_fault - restored == 50, "records the new job processes a second time"
