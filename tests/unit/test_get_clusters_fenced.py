"""``flotilla get clusters`` shows who is fenced and why (the FENCED column)."""

from __future__ import annotations

from typing import Any

from flotilla.cli.get_command import CLUSTER_HEADERS, CLUSTER_WIDE, cluster_row

OUT_OF_SERVICE = {"key": "cluster.flotilla.io/out-of-service", "effect": "NoExecute"}


def cluster(taints: list[dict[str, Any]], conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p1", "creationTimestamp": "2026-03-01T12:00:00Z"},
            "spec": {"syncMode": "Pull", "taints": taints, "apiEndpoint": "https://p1"},
            "status": {"conditions": conditions or []}}


def fenced_column(c: dict[str, Any], wide: bool = False) -> str:
    headers = CLUSTER_WIDE if wide else CLUSTER_HEADERS
    return cluster_row(c, wide=wide)[headers.index("FENCED")]


def test_get_clusters_says_who_is_fenced_and_why() -> None:
    assert fenced_column(cluster([])) == "<none>"
    assert fenced_column(cluster([OUT_OF_SERVICE])) == "Manual"
    automatic = cluster([OUT_OF_SERVICE], [{"type": "Fenced", "status": "True", "reason": "LeaseExpired"}])
    assert fenced_column(automatic) == "LeaseExpired"
    assert fenced_column(automatic, wide=True) == "LeaseExpired"
    row = cluster_row(automatic, wide=True)
    assert row[CLUSTER_WIDE.index("ENDPOINT")] == "https://p1" and len(row) == len(CLUSTER_WIDE)
    # unfenced by a person after an automatic fence: the stale condition does not make it look fenced
    unfenced = cluster([], [{"type": "Fenced", "status": "True", "reason": "LeaseExpired"}])
    assert fenced_column(unfenced) == "<none>"


def test_watch_table_prints_a_row_again_only_when_more_than_its_age_changed() -> None:
    from flotilla.cli.get_command import TablePrinter

    out: list[str] = []
    t = TablePrinter(["NAME", "READY", "AGE"], out.append)
    t.print_rows([("a", ["a", "True", "5s"]), ("bb", ["bb", "True", "6s"])])
    assert out == ["NAME   READY   AGE", "a      True    5s", "bb     True    6s"]
    t.print_rows([("a", ["a", "True", "9s"])])
    assert len(out) == 3
    t.print_rows([("a", ["a", "False", "10s"])])
    assert out[-1] == "a      False   10s"
    t.print_rows([("a", ["a", "False", "11s"])], deleted=True)
    assert out[-1] == "a      False   11s" and len(out) == 5
