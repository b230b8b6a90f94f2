"""D22, the failover history: ``flotilla get failovers`` rows (pure rendering of the history entries)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from flotilla.cli.get_command import (
    FAILOVER_HEADERS,
    FAILOVER_WIDE,
    failover_item,
    failover_row,
    render_table,
)
from flotilla.failover.history import HISTORY_ANNOTATION, entries_of

NOW = datetime(2026, 1, 1, 12, 5, 0, tzinfo=UTC)


def entry(**fields: Any) -> dict[str, Any]:
    e: dict[str, Any] = {
        "at": "2026-01-01T12:00:00Z", "from": "member1", "to": "member2", "trigger": "ClusterTaint",
        "purgeMode": "Directly", "preservedState": {"jobid": "abc", "b": "2"},
        "restoredPath": "s3://bucket/ck/abc/chk-42", "restoreOutcome": "Restored",
        "runningAt": "2026-01-01T12:00:31Z", "timeToRunning": 31.2,
        "stateGap": {"ageAtFault": 12.5, "recordsReprocessed": 1200}, "phase": "Completed"}
    e.update(fields)
    return e


def binding(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "ResourceBinding",
            "metadata": {"name": "orders-flinkdeployment", "namespace": "streaming",
                         "annotations": {HISTORY_ANNOTATION: json.dumps(list(entries))}},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                  "name": "orders"}}}


def test_d22_a_completed_failover_row_shows_time_to_running_and_state_gap() -> None:
    b = binding(entry())
    row = failover_row(b, entry(), NOW)
    assert dict(zip(FAILOVER_HEADERS, row, strict=True)) == {
        "NAMESPACE": "streaming", "WORKLOAD": "FlinkDeployment/orders", "FROM": "member1", "TO": "member2",
        "TRIGGER": "ClusterTaint", "STARTED": "5m", "TIME-TO-RUNNING": "31.2s",
        "STATE-GAP": "12.5s / 1200 records"}


def test_d22_wide_rows_add_purge_mode_restored_path_and_preserved_state() -> None:
    row = failover_row(binding(entry()), entry(), NOW, wide=True)
    cells = dict(zip(FAILOVER_WIDE, row, strict=True))
    assert cells["PURGE-MODE"] == "Directly" and cells["RESTORED-PATH"] == "s3://bucket/ck/abc/chk-42"
    assert cells["PRESERVED-STATE"] == "b=2,jobid=abc"


def test_d22_in_progress_and_unknown_parts_say_so() -> None:
    running = entry(phase="InProgress", to=None, runningAt=None, timeToRunning=None, restoredPath=None,
                    restoreOutcome=None, stateGap={"ageAtFault": None, "recordsReprocessed": None})
    cells = dict(zip(FAILOVER_HEADERS, failover_row(binding(running), running, NOW), strict=True))
    assert (cells["TO"], cells["TIME-TO-RUNNING"], cells["STATE-GAP"]) == (
        "<pending>", "<in progress>", "<pending>")
    fresh = entry(restoreOutcome="Fresh", restoredPath=None,
                  stateGap={"ageAtFault": None, "recordsReprocessed": None})
    assert failover_row(binding(fresh), fresh, NOW)[-1] == "fresh start"
    unknown = entry(restoreOutcome=None, stateGap={})
    assert failover_row(binding(unknown), unknown, NOW)[-1] == "<unknown>"
    superseded = entry(phase="Superseded", timeToRunning=None)
    assert failover_row(binding(superseded), superseded, NOW)[6] == "<superseded>"


def test_d22_the_table_and_json_items_list_every_entry_newest_first() -> None:
    newer, older = entry(at="2026-01-01T12:04:00Z", phase="InProgress"), entry()
    pairs = entries_of([binding(newer, older)])
    table = render_table(FAILOVER_HEADERS, [failover_row(b, e, NOW) for b, e in pairs]).splitlines()
    assert table[0].split() == FAILOVER_HEADERS and len(table) == 3
    assert "<in progress>" in table[1] and "31.2s" in table[2]
    item = failover_item(*pairs[0])
    assert item["binding"] == "orders-flinkdeployment" and item["namespace"] == "streaming"
    assert item["workload"] == {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                "name": "orders"}
    assert item["from"] == "member1" and item["phase"] == "InProgress"
    json.dumps(item)  # printable as JSON
