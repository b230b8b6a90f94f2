"""What the WorkloadRebalancer controller decides: observed list, binding triggers, status, TTL."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flotilla.kube.patch import apply_merge_patch
from flotilla.kube.times import parse_time
from flotilla.propagation.rebalance import (
    REASON_BINDING_NOT_FOUND,
    RESULT_FAILED,
    RESULT_SUCCESSFUL,
    Observed,
    Outcome,
    WorkloadRef,
    apply_outcomes,
    needs_trigger,
    next_status,
    observed_workloads,
    pending,
    spec_workloads,
    status_patch,
    sync_observed,
    trigger_patch,
    ttl_remaining,
)

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
DEPLOY = WorkloadRef("apps/v1", "Deployment", "web", "default")
MISSING = WorkloadRef("apps/v1", "Deployment", "web-2", "default")
ROLE = WorkloadRef("rbac.authorization.k8s.io/v1", "ClusterRole", "system:reader")


def rebalancer(workloads: list[Any], status: dict[str, Any] | None = None, *, generation: int = 1,
               ttl: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"workloads": workloads}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    obj: dict[str, Any] = {
        "apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
        "metadata": {"name": "demo", "generation": generation, "resourceVersion": "7",
                     "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def binding(triggered_at: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}
    if triggered_at is not None:
        spec["rescheduleTriggeredAt"] = triggered_at
    return {"metadata": {"name": "web-deployment", "namespace": "default", "resourceVersion": "42"}, "spec": spec}


# ------------------------------------------------------------------------------------------- references


def test_workload_ref_names_its_binding_and_scope() -> None:
    assert DEPLOY.binding_name == "web-deployment" and not DEPLOY.cluster_scoped
    assert ROLE.binding_name == "system.reader-clusterrole" and ROLE.cluster_scoped
    assert DEPLOY.to_dict() == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}
    assert ROLE.to_dict() == {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                              "name": "system:reader"}


@pytest.mark.parametrize("bad", [None, "web", 3, [], {}, {"apiVersion": "apps/v1", "kind": "Deployment"},
                                 {"apiVersion": "apps/v1", "kind": "Deployment", "name": ""},
                                 {"apiVersion": 1, "kind": "Deployment", "name": "web"},
                                 {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": 5}])
def test_malformed_workload_references_are_ignored(bad: Any) -> None:
    assert WorkloadRef.parse(bad) is None
    assert spec_workloads(rebalancer([bad, DEPLOY.to_dict()])) == [DEPLOY]


def test_spec_workloads_drop_duplicates_and_survive_a_missing_spec() -> None:
    assert spec_workloads(rebalancer([DEPLOY.to_dict(), DEPLOY.to_dict(), ROLE.to_dict()])) == [DEPLOY, ROLE]
    assert spec_workloads({"spec": "nonsense"}) == []
    assert spec_workloads({}) == []


def test_observed_workloads_parse_and_skip_malformed_entries() -> None:
    rb = rebalancer([], {"observedWorkloads": [
        {"workload": DEPLOY.to_dict(), "result": "Successful"}, {"workload": {"kind": "x"}}, "junk",
        {"workload": ROLE.to_dict(), "result": 7}]})
    assert observed_workloads(rb) == [Observed(DEPLOY, RESULT_SUCCESSFUL), Observed(ROLE)]
    assert observed_workloads({"status": {"observedWorkloads": "x"}}) == []


# ------------------------------------------------------------------------------------------- the observed list


def test_new_workloads_start_pending_and_are_sorted_by_api_version_kind_namespace_name() -> None:
    got = sync_observed([MISSING, ROLE, DEPLOY], [])
    assert [e.workload for e in got] == [DEPLOY, MISSING, ROLE]
    assert all(e.result == "" for e in got)
    assert pending(got) == [DEPLOY, MISSING, ROLE]


def test_workloads_still_in_spec_keep_their_result() -> None:
    before = [Observed(DEPLOY, RESULT_SUCCESSFUL), Observed(MISSING, RESULT_FAILED, REASON_BINDING_NOT_FOUND)]
    assert sync_observed([DEPLOY, MISSING], before) == before
    assert pending(before) == []


def test_workload_removed_from_spec_stays_only_if_successful() -> None:
    """Karmada e2e step 4: {deploy, missing, role} -> {role, new}: deploy stays (Successful), missing goes."""
    new = WorkloadRef("apps/v1", "Deployment", "web-3", "default")
    before = [Observed(DEPLOY, RESULT_SUCCESSFUL), Observed(MISSING, RESULT_FAILED, REASON_BINDING_NOT_FOUND),
              Observed(ROLE, RESULT_SUCCESSFUL)]
    got = sync_observed([ROLE, new], before)
    assert got == [Observed(DEPLOY, RESULT_SUCCESSFUL), Observed(new), Observed(ROLE, RESULT_SUCCESSFUL)]
    assert pending(got) == [new]


def test_removed_pending_workload_is_dropped_and_duplicates_collapse() -> None:
    assert sync_observed([ROLE], [Observed(DEPLOY), Observed(ROLE), Observed(ROLE, RESULT_SUCCESSFUL)]) == \
        [Observed(ROLE)]


# ------------------------------------------------------------------------------------------- triggering


def test_trigger_when_unset_or_older_only() -> None:
    created = NOW
    assert needs_trigger(created, None)
    assert needs_trigger(created, NOW - timedelta(seconds=1))
    assert not needs_trigger(created, NOW)
    assert not needs_trigger(created, NOW + timedelta(seconds=1))


def test_trigger_patch_sets_the_creation_time_with_a_precondition() -> None:
    b = binding()
    before = copy.deepcopy(b)
    patch = trigger_patch(b, NOW)
    assert patch == {"spec": {"rescheduleTriggeredAt": "2025-06-01T12:00:00Z"},
                     "metadata": {"resourceVersion": "42"}}
    assert b == before
    patched = apply_merge_patch(b, patch)
    assert patched["spec"]["resource"] == b["spec"]["resource"]
    assert trigger_patch(patched, NOW) is None  # idempotent


def test_trigger_patch_leaves_a_newer_trigger_alone_and_overrides_an_unreadable_one() -> None:
    assert trigger_patch(binding("2025-06-01T12:00:05Z"), NOW) is None
    assert trigger_patch(binding("2025-06-01T12:00:00Z"), NOW) is None
    assert trigger_patch(binding("2025-06-01T11:59:59Z"), NOW) is not None
    assert trigger_patch(binding("yesterday"), NOW) is not None
    assert trigger_patch(binding(12), NOW) is not None
    assert trigger_patch({}, NOW) == {"spec": {"rescheduleTriggeredAt": "2025-06-01T12:00:00Z"}}


def test_outcomes_become_results_and_retries_are_counted() -> None:
    observed = [Observed(DEPLOY), Observed(MISSING), Observed(ROLE)]
    got, retry = apply_outcomes(observed, {DEPLOY: Outcome.TRIGGERED, MISSING: Outcome.NOT_FOUND,
                                           ROLE: Outcome.RETRY})
    assert got == [Observed(DEPLOY, RESULT_SUCCESSFUL), Observed(MISSING, RESULT_FAILED, REASON_BINDING_NOT_FOUND),
                   Observed(ROLE)]
    assert retry == 1


def test_final_results_are_never_rewritten() -> None:
    done = [Observed(DEPLOY, RESULT_FAILED, REASON_BINDING_NOT_FOUND)]
    assert apply_outcomes(done, {DEPLOY: Outcome.TRIGGERED}) == (done, 0)


# ------------------------------------------------------------------------------------------- status


def test_first_status_records_results_generation_and_finish_time() -> None:
    rb = rebalancer([DEPLOY.to_dict(), MISSING.to_dict()], generation=3)
    observed = [Observed(DEPLOY, RESULT_SUCCESSFUL), Observed(MISSING, RESULT_FAILED, REASON_BINDING_NOT_FOUND)]
    status = next_status(rb, observed, 0, NOW)
    assert status == {
        "observedWorkloads": [
            {"workload": DEPLOY.to_dict(), "result": "Successful"},
            {"workload": MISSING.to_dict(), "result": "Failed", "reason": "ReferencedBindingNotFound"},
        ],
        "observedGeneration": 3,
        "finishTime": "2025-06-01T12:00:00Z",
    }
    patch = status_patch(rb, status)
    assert patch == {"status": status, "metadata": {"resourceVersion": "7"}}


def test_unchanged_status_keeps_the_finish_time_and_needs_no_patch() -> None:
    observed = [Observed(DEPLOY, RESULT_SUCCESSFUL)]
    old = {"observedWorkloads": [{"workload": DEPLOY.to_dict(), "result": "Successful"}],
           "observedGeneration": 1, "finishTime": "2025-06-01T11:00:01Z"}
    rb = rebalancer([DEPLOY.to_dict()], old)
    status = next_status(rb, observed, 0, NOW)
    assert status == old
    assert status_patch(rb, status) is None


def test_finish_time_moves_when_the_spec_changed_and_everything_is_done_again() -> None:
    old = {"observedWorkloads": [{"workload": DEPLOY.to_dict(), "result": "Successful"}],
           "observedGeneration": 1, "finishTime": "2025-06-01T11:00:01Z"}
    rb = rebalancer([DEPLOY.to_dict(), ROLE.to_dict()], old, generation=2)
    status = next_status(rb, [Observed(DEPLOY, RESULT_SUCCESSFUL), Observed(ROLE, RESULT_SUCCESSFUL)], 0, NOW)
    assert status["finishTime"] == "2025-06-01T12:00:00Z" and status["observedGeneration"] == 2


def test_pending_retries_keep_the_old_finish_time_or_none() -> None:
    observed = [Observed(DEPLOY, RESULT_SUCCESSFUL), Observed(ROLE)]
    assert "finishTime" not in next_status(rebalancer([]), observed, 1, NOW)
    old = {"observedWorkloads": [{"workload": DEPLOY.to_dict(), "result": "Successful"}],
           "finishTime": "2025-06-01T11:00:01Z"}
    assert next_status(rebalancer([], old), observed, 1, NOW)["finishTime"] == "2025-06-01T11:00:01Z"


def test_done_without_a_readable_finish_time_gets_one() -> None:
    old = {"observedWorkloads": [{"workload": DEPLOY.to_dict(), "result": "Successful"}],
           "observedGeneration": 1, "finishTime": "garbage"}
    status = next_status(rebalancer([DEPLOY.to_dict()], old), [Observed(DEPLOY, RESULT_SUCCESSFUL)], 0, NOW)
    assert status["finishTime"] == "2025-06-01T12:00:00Z"


# ------------------------------------------------------------------------------------------- TTL


def test_ttl_counts_from_the_finish_time() -> None:
    rb = rebalancer([], {"finishTime": "2025-06-01T11:59:58Z"}, ttl=5)
    assert ttl_remaining(rb, NOW) == pytest.approx(3.0)
    assert ttl_remaining(rb, NOW + timedelta(seconds=10)) == 0.0
    assert ttl_remaining(rebalancer([], {"finishTime": "2025-06-01T12:00:00Z"}, ttl=0), NOW) == 0.0


@pytest.mark.parametrize(("status", "ttl"), [({"finishTime": "2025-06-01T11:00:00Z"}, None), ({}, 5),
                                              ({"finishTime": "soon"}, 5), ({"finishTime": "2025-06-01T11:00:00Z"},
                                                                            "5"),
                                              ({"finishTime": "2025-06-01T11:00:00Z"}, True)])
def test_no_ttl_or_no_finish_time_means_never_deleted(status: dict[str, Any], ttl: Any) -> None:
    assert ttl_remaining(rebalancer([], status, ttl=ttl), NOW) is None


def test_negative_ttl_is_due_at_once() -> None:
    assert ttl_remaining(rebalancer([], {"finishTime": "2025-06-01T12:00:00Z"}, ttl=-3), NOW) == 0.0


def test_parse_time_is_tolerant() -> None:
    assert parse_time("2025-06-01T12:00:00Z") == NOW
    assert parse_time("2025-06-01T12:00:00") == NOW
    for bad in (None, "", "  ", "noon", 12, []):
        assert parse_time(bad) is None
