"""Condition taints of a Cluster: which NoSchedule taints for which Ready condition, and
that no other taint is ever touched."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from flotilla.cluster.taints import (
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    condition_taint_changes,
    set_taints,
    taint_string,
    taints_for_condition,
    taints_message,
    taints_patch,
)

NOW = datetime(2025, 3, 1, 8, 0, 0, tzinfo=UTC)
STAMP = "2025-03-01T08:00:00Z"
OLD = "2024-01-01T00:00:00Z"


def cluster(ready: str | None, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready, "reason": "R", "message": "",
                                             "lastTransitionTime": OLD}]
    spec: dict[str, Any] = {"syncMode": "Push"}
    if taints is not None:
        spec["taints"] = taints
    return {"metadata": {"name": "m1", "resourceVersion": "7"}, "spec": spec, "status": {"conditions": conditions}}


def not_ready(stamp: str = OLD) -> dict[str, Any]:
    return {**NOT_READY_TAINT, "timeAdded": stamp}


def unreachable(stamp: str = OLD) -> dict[str, Any]:
    return {**UNREACHABLE_TAINT, "timeAdded": stamp}


def test_changes_per_condition() -> None:
    assert condition_taint_changes(None) == ([NOT_READY_TAINT], [])
    assert condition_taint_changes({"status": "False"}) == ([NOT_READY_TAINT], [UNREACHABLE_TAINT])
    assert condition_taint_changes({"status": "Unknown"}) == ([UNREACHABLE_TAINT], [NOT_READY_TAINT])
    assert condition_taint_changes({"status": "True"}) == ([], [NOT_READY_TAINT, UNREACHABLE_TAINT])
    assert condition_taint_changes({"status": "Bogus"}) == ([], [])
    assert NOT_READY_TAINT == {"key": "cluster.karmada.io/not-ready", "effect": "NoSchedule"}
    assert UNREACHABLE_TAINT == {"key": "cluster.karmada.io/unreachable", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("ready", "before", "after"),
    [
        (None, None, [not_ready(STAMP)]),  # a new cluster is not-ready until the status controller says otherwise
        ("False", [], [not_ready(STAMP)]),
        ("False", [unreachable()], [not_ready(STAMP)]),
        ("Unknown", [not_ready()], [unreachable(STAMP)]),
        ("True", [not_ready(), unreachable()], []),
    ],
)
def test_taints_for_condition(ready: str | None, before: list[dict[str, Any]] | None,
                              after: list[dict[str, Any]]) -> None:
    assert taints_for_condition(cluster(ready, before), NOW) == after


@pytest.mark.parametrize(("ready", "present"), [(None, [not_ready()]), ("False", [not_ready()]),
                                                ("Unknown", [unreachable()]), ("True", [])])
def test_nothing_to_do_returns_none_and_keeps_time_added(ready: str | None, present: list[dict[str, Any]]) -> None:
    assert taints_for_condition(cluster(ready, present), NOW) is None


def test_other_taints_are_never_touched() -> None:
    user = {"key": "dedicated", "value": "flink", "effect": "NoSchedule"}
    policy = {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute", "timeAdded": OLD}  # a taint policy's
    cordon = {"key": "cluster.karmada.io/unschedulable", "effect": "NoSchedule"}
    before = [user, policy, not_ready(), cordon]
    assert taints_for_condition(cluster("True", before), NOW) == [user, policy, cordon]
    after = taints_for_condition(cluster("Unknown", before), NOW)
    assert after == [user, policy, cordon, unreachable(STAMP)]


def test_existing_taint_with_other_value_is_kept() -> None:
    valued = {"key": "cluster.karmada.io/not-ready", "value": "x", "effect": "NoSchedule", "timeAdded": OLD}
    assert taints_for_condition(cluster("False", [valued]), NOW) is None


def test_set_taints_copies() -> None:
    current = [not_ready()]
    out = set_taints(current, [UNREACHABLE_TAINT], [], NOW)
    out[0]["key"] = "changed"
    assert current == [not_ready()]
    assert set_taints(None, [NOT_READY_TAINT], [], NOW) == [not_ready(STAMP)]


def test_patch_and_messages() -> None:
    assert taints_patch([not_ready()], "12") == {"spec": {"taints": [not_ready()]},
                                                 "metadata": {"resourceVersion": "12"}}
    assert taints_patch([], None) == {"spec": {"taints": []}}
    assert taint_string({"key": "k", "value": "v", "effect": "NoExecute"}) == "k=v:NoExecute"
    assert taints_message([not_ready(), {"key": "a", "effect": "NoSchedule"}]) == \
        "cluster.karmada.io/not-ready:NoSchedule,a:NoSchedule"
    assert taints_message([]) == "none"
