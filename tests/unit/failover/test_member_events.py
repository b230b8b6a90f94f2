"""The Events of a member's run permit (the agent) and of its guard: recorded on transitions only."""

from __future__ import annotations

from typing import Any

from flotilla.failover.run_permit import (
    EVENT_RUN_PERMIT_RENEWED,
    EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS,
    EVENT_RUN_PERMIT_WITHHELD,
    GUARDED_LABEL,
    MEMBER_EVENT_REASONS,
    PermitRoute,
    PermitStep,
    guard_changes,
    permit_event,
    permit_route,
)

CP, PEERS, WITHHELD = PermitRoute.CONTROL_PLANE, PermitRoute.PEERS, PermitRoute.WITHHELD


def test_permit_route_of_each_step() -> None:
    assert permit_route(PermitStep.RENEW, through_peers=False) is CP
    assert permit_route(PermitStep.RENEW, through_peers=True) is PEERS
    assert permit_route(PermitStep.WITHHOLD, through_peers=False) is WITHHELD
    assert permit_route(PermitStep.WITHHOLD, through_peers=True) is WITHHELD
    assert permit_route(PermitStep.PURGE, through_peers=False) is WITHHELD  # not renewed until the purge ran


def test_permit_events_only_on_a_change_of_route() -> None:
    for route in (CP, PEERS, WITHHELD):
        assert permit_event(route, route, "same") is None
    assert permit_event(None, WITHHELD, "no control-plane Lease renewal has succeeded yet") is None
    first = permit_event(None, CP, "the control plane is held")
    assert first is not None and (first.type, first.reason) == ("Normal", EVENT_RUN_PERMIT_RENEWED)
    assert "again" not in first.message


def test_permit_event_of_each_transition_carries_the_decisions_reason() -> None:
    lost = permit_event(CP, WITHHELD, "the last renewal started 12.0s ago; 1 of 3 clusters report it")
    assert lost is not None and (lost.type, lost.reason) == ("Warning", EVENT_RUN_PERMIT_WITHHELD)
    assert "12.0s ago; 1 of 3 clusters" in lost.message
    peers = permit_event(CP, PEERS, "2 of 3 clusters report the control plane unreachable (peers: m2)")
    assert peers is not None and (peers.type, peers.reason) == ("Warning", EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS)
    assert "2 of 3 clusters report the control plane unreachable (peers: m2)" in peers.message
    back = permit_event(PEERS, CP, "the control plane is held (last renewal started 0.1s ago)")
    assert back is not None and (back.type, back.reason) == ("Normal", EVENT_RUN_PERMIT_RENEWED)
    assert "again" in back.message and "0.1s ago" in back.message
    assert permit_event(WITHHELD, CP, "held") is not None
    assert permit_event(PEERS, WITHHELD, "no majority") is not None
    assert {EVENT_RUN_PERMIT_WITHHELD, EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS,
            EVENT_RUN_PERMIT_RENEWED} <= MEMBER_EVENT_REASONS


def obj(name: str, uid: str, guarded: bool = True) -> dict[str, Any]:
    labels = {GUARDED_LABEL: "true"} if guarded else {}
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": name, "namespace": "default", "uid": uid, "labels": labels}}


def names(objs: list[Any]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def test_guard_changes_stop_each_guarded_object_once_and_never_an_unguarded_one() -> None:
    a, b, free = obj("a", "u1"), obj("b", "u2"), obj("free", "u3", guarded=False)
    first = guard_changes(halted=True, stopping={}, objects=[a, b, free])
    assert names(first.stopped) == ["a", "b"] and first.resumed == []
    again = guard_changes(halted=True, stopping=first.stopping, objects=[a, b, free])
    assert again.stopped == [] and again.resumed == []  # still stopped: no second Event
    late = obj("late", "u4")  # created while the permit is stale: stopped from the start
    more = guard_changes(halted=True, stopping=again.stopping, objects=[a, b, free, late])
    assert names(more.stopped) == ["late"]
    assert set(more.stopping) == {"u1", "u2", "u4"}


def test_guard_changes_resume_the_stopped_objects_that_still_exist() -> None:
    a, b = obj("a", "u1"), obj("b", "u2")
    stopped = guard_changes(halted=True, stopping={}, objects=[a, b]).stopping
    resumed = guard_changes(halted=False, stopping=stopped, objects=[a])  # b was deleted meanwhile
    assert names(resumed.resumed) == ["a"] and resumed.stopped == [] and resumed.stopping == {}
    assert guard_changes(halted=False, stopping={}, objects=[a, b]).resumed == []  # never stopped: nothing to say


def test_guard_changes_a_replaced_object_is_a_new_one_and_an_unlabelled_one_runs_again() -> None:
    stopped = guard_changes(halted=True, stopping={}, objects=[obj("a", "u1")]).stopping
    replaced = guard_changes(halted=True, stopping=stopped, objects=[obj("a", "u9")])
    assert names(replaced.stopped) == ["a"] and set(replaced.stopping) == {"u9"}
    unlabelled = guard_changes(halted=True, stopping=replaced.stopping, objects=[obj("a", "u9", guarded=False)])
    assert names(unlabelled.resumed) == ["a"] and unlabelled.stopping == {}
