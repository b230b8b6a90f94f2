"""Guarded workloads, the run permit decision and the guard's judgement (flotilla.failover.run_permit)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.failover.run_permit import (
    ANNOTATION_FENCE_AFTER,
    ANNOTATION_GUARDED_KINDS,
    ANNOTATION_PERMIT_HOLD,
    GUARDED_LABEL,
    Announcement,
    AnnouncementError,
    PermitStep,
    PermitWatch,
    announcement_patch,
    cache_behind,
    guarded_kinds,
    is_guarded,
    parse_announcement,
    parse_guarded_kinds,
    permit_body,
    permit_decision,
    renewed_permit,
    stale_guarded_objects,
)
from flotilla.interpreter import ResourceInterpreter
from flotilla.propagation.works import plan_works
from tests.unit.propagation.test_works import binding, template

NOW = datetime(2025, 1, 1, tzinfo=UTC)


# ------------------------------------------------------------------ guarded workloads
@pytest.mark.parametrize(("failover", "flag", "guarded"), [
    ({"cluster": {"purgeMode": "Directly"}}, "Gracefully", True),
    ({"cluster": {"purgeMode": "Gracefully"}}, "Directly", False),  # the binding's own mode wins over the flag
    ({"cluster": {}}, "Directly", False),  # empty purgeMode is Gracefully
    ({"cluster": {"purgeMode": "Never"}}, "Gracefully", False),
    (None, "Directly", True),  # no failover.cluster: the taint manager's flag
    (None, "Gracefully", False),
    ({"application": {"purgeMode": "Directly", "decisionConditions": {}}}, "Gracefully", True),
    ({"application": {"purgeMode": "Gracefully"}}, "Gracefully", False),
    ({"application": {"purgeMode": "Never"}}, "Directly", True),  # cluster failover falls back to the flag
    ("malformed", "Gracefully", False),
])
def test_is_guarded_follows_the_resolved_purge_mode(failover: Any, flag: str, guarded: bool) -> None:
    spec = {} if failover is None else {"failover": failover}
    assert is_guarded(spec, flag) is guarded


def test_plan_works_labels_guarded_manifests_only_for_directly() -> None:
    interp = ResourceInterpreter()
    directly, _ = plan_works(template(), binding(failover={"cluster": {"purgeMode": "Directly"}}), interpreter=interp)
    gracefully, _ = plan_works(template(), binding(failover={"cluster": {"purgeMode": "Gracefully"}}),
                               interpreter=interp)
    assert directly and all(i.manifest["metadata"]["labels"][GUARDED_LABEL] == "true" for i in directly)
    assert gracefully and all(GUARDED_LABEL not in i.manifest["metadata"]["labels"] for i in gracefully)
    flag, _ = plan_works(template(), binding(), interpreter=interp, default_purge_mode="Directly")
    assert all(i.manifest["metadata"]["labels"][GUARDED_LABEL] == "true" for i in flag)


def _obj(kind: str, name: str, *, guarded: bool = True, work: str = "w") -> dict[str, Any]:
    labels = {L.MANAGED_LABEL: L.MANAGED_LABEL_VALUE, **({GUARDED_LABEL: "true"} if guarded else {})}
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "default", "labels": labels,
                         "annotations": {L.WORK_NAME_ANNOTATION: work, L.WORK_NAMESPACE_ANNOTATION: "karmada-es-m"}}}


def _work(*manifests: dict[str, Any], deleting: bool = False, preserve: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w", "namespace": "karmada-es-m"}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"preserveResourcesOnDeletion": preserve,
                                       "workload": {"manifests": list(manifests)}}}


def test_stale_guarded_objects_are_guarded_ones_no_work_wants() -> None:
    kept, stale, unguarded = _obj("StatefulSet", "kept"), _obj("StatefulSet", "gone"), _obj("Deployment", "x",
                                                                                            guarded=False)
    preserved = _obj("StatefulSet", "preserved")
    works = [_work(kept), _work(preserved, deleting=True, preserve=True)]
    assert stale_guarded_objects([kept, stale, unguarded, preserved], works) == [stale]
    assert guarded_kinds(works + [_work(unguarded)]) == {("apps/v1", "StatefulSet")}


def test_guarded_kinds_survive_on_the_permit_and_bad_records_count_as_none() -> None:
    body = permit_body("m1", 15, NOW, {("apps/v1", "StatefulSet")})
    assert body["metadata"]["namespace"] == "flotilla-system" and body["metadata"]["name"] == "flotilla-run-permit"
    assert body["spec"]["holderIdentity"] == "m1" and body["spec"]["leaseDurationSeconds"] == 15
    body["metadata"]["resourceVersion"] = "7"
    renewed = renewed_permit(body, "m1", 15, NOW, {("flink.apache.org/v1beta1", "FlinkDeployment")})
    assert renewed["metadata"]["resourceVersion"] == "7"
    assert parse_guarded_kinds(renewed) == {("apps/v1", "StatefulSet"), ("flink.apache.org/v1beta1",
                                                                           "FlinkDeployment")}
    for bad in ("not json", '{"a": 1}', '[["x"], [1, 2]]'):
        assert parse_guarded_kinds({"metadata": {"annotations": {ANNOTATION_GUARDED_KINDS: bad}}}) == set()


# ------------------------------------------------------------------ the run permit decision
def test_permit_is_renewed_only_while_the_control_plane_is_held() -> None:
    held = permit_decision(now=114.9, last_renewal_started=100.0, hold=15, fenced=False, purged=True)
    assert held.step is PermitStep.RENEW
    lapsed = permit_decision(now=115.0, last_renewal_started=100.0, hold=15, fenced=False, purged=True)
    assert lapsed.step is PermitStep.WITHHOLD and "15" in lapsed.reason
    never = permit_decision(now=1.0, last_renewal_started=None, hold=15, fenced=False, purged=True)
    assert never.step is PermitStep.WITHHOLD


def test_permit_waits_for_the_purge_and_is_withheld_on_a_fenced_cluster() -> None:
    assert permit_decision(now=101, last_renewal_started=100, hold=15, fenced=False,
                           purged=False).step is PermitStep.PURGE
    fenced = permit_decision(now=101, last_renewal_started=100, hold=15, fenced=True, purged=True)
    assert fenced.step is PermitStep.WITHHOLD and "fenced" in fenced.reason


# ------------------------------------------------------------------ the guard
def _permit(rv: str, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": rv}}


def test_guard_that_never_saw_a_permit_stops_nothing() -> None:
    watch = PermitWatch(fence_after=15)
    for t in range(0, 100, 10):
        watch.observe(None, float(t))
    assert not watch.stopped(100.0)


def test_guard_stops_fence_after_the_last_observed_change() -> None:
    watch = PermitWatch(fence_after=15)
    watch.observe(None, 0.0)
    assert watch.observe(_permit("1"), 1.0)
    assert not watch.observe(_permit("1"), 10.0)  # unchanged: the clock runs from t=1
    assert not watch.stopped(15.9)
    assert watch.stopped(16.0)
    assert watch.observe(_permit("2"), 20.0)  # renewed again: runs again
    assert not watch.stopped(34.9) and watch.stopped(35.0)


def test_guard_counts_a_deleted_permit_as_unchanged() -> None:
    watch = PermitWatch(fence_after=5)
    watch.observe(None, 0.0)
    watch.observe(_permit("1"), 1.0)
    watch.observe(None, 2.0)
    assert watch.stopped(6.0)
    assert watch.observe(_permit("1", uid="u2"), 7.0)  # re-created: a change
    assert not watch.stopped(8.0)


def test_guard_started_on_an_existing_permit_waits_for_it_to_change() -> None:
    watch = PermitWatch(fence_after=15)
    assert not watch.observe(_permit("9"), 0.0)
    assert watch.stopped(0.0) and "before the guard started" in watch.reason(0.0)
    assert watch.observe(_permit("10"), 1.0)
    assert not watch.stopped(1.0)


# ------------------------------------------------------------------ announcement
def test_announcement_round_trips_and_is_absent_without_annotations() -> None:
    patch = announcement_patch(15, 20.5)
    assert patch["metadata"]["annotations"] == {ANNOTATION_FENCE_AFTER: "15s", ANNOTATION_PERMIT_HOLD: "20.5s"}
    assert parse_announcement(patch) == Announcement(15.0, 20.5)
    assert parse_announcement({"metadata": {}}) is None


@pytest.mark.parametrize("annotations", [
    {ANNOTATION_FENCE_AFTER: "15s"},
    {ANNOTATION_FENCE_AFTER: "soon", ANNOTATION_PERMIT_HOLD: "15s"},
    {ANNOTATION_FENCE_AFTER: "0s", ANNOTATION_PERMIT_HOLD: "15s"},
    {ANNOTATION_FENCE_AFTER: 15, ANNOTATION_PERMIT_HOLD: "15s"},
])
def test_malformed_announcement_is_a_clear_error(annotations: dict[str, Any]) -> None:
    with pytest.raises(AnnouncementError, match="guard.flotilla.io/"):
        parse_announcement({"metadata": {"annotations": annotations}})


def test_cache_behind_names_cached_works_the_fresh_list_lacks() -> None:
    a = {"metadata": {"namespace": "es", "name": "a", "uid": "1"}}
    b = {"metadata": {"namespace": "es", "name": "b", "uid": "2"}}
    b_again = {"metadata": {"namespace": "es", "name": "b", "uid": "3"}}  # re-created: another Work
    assert cache_behind([a, b], [a, b]) == []
    assert cache_behind([a, b], [a]) == ["es/b"]
    assert cache_behind([b], [b_again]) == ["es/b"]
    assert cache_behind([], [a]) == []


def test_agent_config_refuses_guard_settings_that_cannot_work() -> None:
    from flotilla.agent.runtime import AgentConfig

    assert AgentConfig(cluster_name="m1", guard=True).validate() == []
    errs = AgentConfig(cluster_name="m1", guard=True, fence_after=0).validate()
    assert any("--fence-after must be greater than 0" in e for e in errs)
    errs = AgentConfig(cluster_name="m1", guard=True, permit_hold=5).validate()  # renewals every 10s
    assert any("--permit-hold" in e and "renew interval" in e for e in errs)
    errs = AgentConfig(cluster_name="m1", guard=True, permit_renew_interval=20).validate()
    assert any("--permit-renew-interval" in e for e in errs)
