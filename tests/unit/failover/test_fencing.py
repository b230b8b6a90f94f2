"""D2: fencing instead of deadlock (out-of-service taint, abandoned Works, purge on recovery)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.failover.fencing import (
    ABANDONED_ANNOTATION,
    CONDITION_ABANDONED,
    EVENT_WORK_ABANDONED,
    OUT_OF_SERVICE_TAINT_EFFECT,
    OUT_OF_SERVICE_TAINT_KEY,
    REASON_CLUSTER_FENCED,
    ObjectIdentity,
    PurgeStep,
    fence_patch,
    is_fenced,
    purge_retry_delay,
    recovery_purge_step,
    stale_objects_on_recovery,
    unfence_patch,
    wanted_identities,
    work_deletion_decision,
)
from flotilla.propagation.apply import WorkDeletion, work_deletion_action

T0 = datetime(2024, 12, 17, 19, 8, 11, tzinfo=UTC)
NOT_READY_NO_SCHEDULE = {"key": "cluster.karmada.io/not-ready", "effect": "NoSchedule",
                         "timeAdded": "2024-12-17T19:00:00Z"}


def _cluster(*taints: dict[str, Any], ready: str = "False", rv: str = "42") -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "member1", "resourceVersion": rv},
            "spec": {"syncMode": "Push", "taints": list(taints)},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def test_d2_the_taint_is_cluster_flotilla_io_out_of_service_no_execute() -> None:
    assert OUT_OF_SERVICE_TAINT_KEY == "cluster.flotilla.io/out-of-service" == L.TAINT_CLUSTER_OUT_OF_SERVICE
    assert OUT_OF_SERVICE_TAINT_EFFECT == "NoExecute"


@pytest.mark.parametrize(
    ("taints", "fenced"),
    [
        ([], False),
        ([NOT_READY_NO_SCHEDULE], False),
        ([{"key": "cluster.flotilla.io/out-of-service", "effect": "NoExecute"}], True),
        ([{"key": "cluster.flotilla.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}], True),
        ([{"key": "cluster.flotilla.io/out-of-service", "effect": "NoSchedule"}], False),
        ([{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}], False),
    ],
)
def test_d2_is_fenced(taints: list[dict[str, Any]], fenced: bool) -> None:
    assert is_fenced(_cluster(*taints)) is fenced


def test_d2_is_fenced_tolerates_missing_parts() -> None:
    assert not is_fenced(None)
    assert not is_fenced({"metadata": {"name": "x"}})
    assert not is_fenced({"spec": {"taints": None}})


def test_d2_fence_patch_adds_the_taint_and_keeps_the_others() -> None:
    cluster = _cluster(NOT_READY_NO_SCHEDULE)
    patch = fence_patch(cluster, T0)
    assert patch == {
        "metadata": {"resourceVersion": "42"},
        "spec": {"taints": [
            NOT_READY_NO_SCHEDULE,
            {"key": "cluster.flotilla.io/out-of-service", "effect": "NoExecute", "timeAdded": "2024-12-17T19:08:11Z"},
        ]},
    }
    assert cluster["spec"]["taints"] == [NOT_READY_NO_SCHEDULE]  # input untouched
    fenced = _cluster(*patch["spec"]["taints"])
    assert is_fenced(fenced)
    assert fence_patch(fenced, T0) is None  # already fenced


def test_d2_unfence_patch_removes_only_the_out_of_service_taint() -> None:
    other_out_of_service = {"key": "cluster.flotilla.io/out-of-service", "effect": "NoSchedule"}
    cluster = _cluster(NOT_READY_NO_SCHEDULE, {"key": OUT_OF_SERVICE_TAINT_KEY, "effect": "NoExecute"},
                       other_out_of_service)
    patch = unfence_patch(cluster)
    assert patch == {"metadata": {"resourceVersion": "42"},
                     "spec": {"taints": [NOT_READY_NO_SCHEDULE, other_out_of_service]}}
    assert unfence_patch(_cluster(NOT_READY_NO_SCHEDULE)) is None
    only = unfence_patch(_cluster({"key": OUT_OF_SERVICE_TAINT_KEY, "effect": "NoExecute"}, rv=""))
    assert only == {"spec": {"taints": None}}  # merge patch: the field goes


def test_d2_work_on_a_fenced_cluster_is_abandoned_with_a_record() -> None:
    work = {"metadata": {"namespace": "karmada-es-member1", "name": "orders-flinkdeployment"},
            "spec": {"workload": {"manifests": [
                {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                 "metadata": {"namespace": "shop", "name": "orders"}}]}}}
    cluster = _cluster({"key": OUT_OF_SERVICE_TAINT_KEY, "effect": "NoExecute"})
    decision = work_deletion_decision(cluster, work=work, now=T0)
    assert decision.abandon
    assert json.loads(decision.annotations[ABANDONED_ANNOTATION]) == {"cluster": "member1",
                                                                       "at": "2024-12-17T19:08:11Z"}
    assert decision.condition is not None
    assert (decision.condition["type"], decision.condition["status"], decision.condition["reason"]) == (
        CONDITION_ABANDONED, "True", REASON_CLUSTER_FENCED)
    assert decision.event is not None
    assert (decision.event.type, decision.event.reason) == ("Warning", EVENT_WORK_ABANDONED)
    message = decision.event.message
    assert "Cluster member1 is fenced" in message and "cluster.flotilla.io/out-of-service:NoExecute" in message
    assert "FlinkDeployment shop/orders" in message and "karmada-es-member1/orders-flinkdeployment" in message
    # the execution controller's deletion path agrees
    assert work_deletion_action(work, cluster, fenced=decision.abandon) is WorkDeletion.ABANDON


def test_d2_work_on_an_unfenced_cluster_is_deleted_as_usual() -> None:
    cluster = _cluster(NOT_READY_NO_SCHEDULE)
    decision = work_deletion_decision(cluster)
    assert not decision.abandon and decision.event is None and decision.condition is None
    assert decision.annotations == {}
    assert work_deletion_decision("member1", fenced=True).abandon  # a name and an explicit answer
    assert "at" not in json.loads(work_deletion_decision("member1", fenced=True).annotations[ABANDONED_ANNOTATION])


def _member_object(kind: str, name: str, namespace: str = "shop", *, api_version: str = "apps/v1",
                   work: str | None = "orders", managed: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {}, "annotations": {}}
    if namespace:
        meta["namespace"] = namespace
    if managed:
        meta["labels"][L.MANAGED_LABEL] = L.MANAGED_LABEL_VALUE
    if work:
        meta["annotations"][L.WORK_NAMESPACE_ANNOTATION] = "karmada-es-member1"
        meta["annotations"][L.WORK_NAME_ANNOTATION] = work
    if deleting:
        meta["deletionTimestamp"] = "2024-12-17T19:08:11Z"
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def test_d2_recovered_cluster_is_purged_of_objects_no_work_wants() -> None:
    wanted_work = {"metadata": {"namespace": "karmada-es-member1", "name": "web"},
                   "spec": {"workload": {"manifests": [
                       {"apiVersion": "apps/v1beta2", "kind": "Deployment", "metadata": {"namespace": "shop",
                                                                                         "name": "web"}},
                       {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "shop", "name": "web"}}]}}}
    deleted_work = {"metadata": {"name": "old", "deletionTimestamp": "2024-12-17T19:08:11Z"},
                    "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "Secret",
                                                         "metadata": {"namespace": "shop", "name": "old"}}]}}}
    wanted = wanted_identities([wanted_work, deleted_work])
    assert wanted == {ObjectIdentity("apps", "Deployment", "shop", "web"), ObjectIdentity("", "ConfigMap", "shop", "web")}

    flink = _member_object("FlinkDeployment", "orders", api_version="flink.apache.org/v1beta1")
    namespace = _member_object("Namespace", "analytics", "", api_version="v1")
    objects = [
        namespace,
        _member_object("Deployment", "web"),  # wanted (at another version)
        _member_object("ConfigMap", "web", api_version="v1"),  # wanted
        flink,  # its Work was abandoned while the cluster was fenced
        _member_object("Secret", "old", api_version="v1"),  # its Work is being deleted
        _member_object("Deployment", "mine", managed=False),  # not placed by Flotilla
        _member_object("Namespace", "shop", "", api_version="v1", work=None),  # created for convenience
        _member_object("Deployment", "going", deleting=True),  # already being deleted
    ]
    stale = stale_objects_on_recovery(objects, wanted)
    names = [(o["kind"], o["metadata"]["name"]) for o in stale]
    assert names == [("Secret", "old"), ("FlinkDeployment", "orders"), ("Namespace", "analytics")]
    assert stale[1] is flink


def test_d2_nothing_is_purged_when_every_object_is_wanted() -> None:
    obj = _member_object("Deployment", "web")
    assert stale_objects_on_recovery([obj], [("apps", "Deployment", "shop", "web")]) == []
    assert str(ObjectIdentity.of(obj)) == "Deployment.apps shop/web"


# ---------------------------------------------------------------------------------------------- D17: when the purge runs


def _member1(fenced: bool = False) -> dict[str, Any]:
    return _cluster(*([{"key": OUT_OF_SERVICE_TAINT_KEY, "effect": "NoExecute"}] if fenced else []))


@pytest.mark.parametrize("fenced", [True, False])
def test_d17_purge_runs_once_the_api_answers_fenced_or_not_and_before_ready(fenced: bool) -> None:
    # the probe answered healthy: purge now, although the cluster is still fenced or not Ready yet
    assert recovery_purge_step(_member1(fenced), pending=True, ready=False, answering=True) is PurgeStep.PURGE
    assert recovery_purge_step(_member1(fenced), pending=True, ready=True, answering=True) is PurgeStep.PURGE


@pytest.mark.parametrize("fenced", [True, False])
def test_d17_purge_waits_while_the_probe_says_the_member_does_not_answer(fenced: bool) -> None:
    assert recovery_purge_step(_member1(fenced), pending=True, ready=False, answering=False) is PurgeStep.WAIT


def test_d17_without_probes_in_this_process_the_purge_itself_finds_out() -> None:
    assert recovery_purge_step(_member1(True), pending=True, ready=False, answering=None) is PurgeStep.PURGE


def test_d17_ready_is_reason_enough_to_try_the_purge() -> None:
    # Ready within the failure threshold although the last probe failed: try (a failure is retried)
    assert recovery_purge_step(_member1(), pending=True, ready=True, answering=False) is PurgeStep.PURGE


def test_d17_nothing_to_do_when_no_purge_is_pending_or_the_cluster_is_gone() -> None:
    assert recovery_purge_step(_member1(True), pending=False, ready=False, answering=True) is PurgeStep.DONE
    assert recovery_purge_step(None, pending=True, ready=False, answering=True) is PurgeStep.DONE


def test_d17_purge_retry_delay_doubles_and_is_capped() -> None:
    delays = [purge_retry_delay(n, 0.2, 1.0) for n in range(1, 6)]
    assert delays == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert purge_retry_delay(10_000, 0.2, 10.0) == 10.0  # no overflow after a very long outage
    assert purge_retry_delay(0, 0.2, 10.0) == 0.2
