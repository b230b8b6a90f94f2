"""Cluster health: probe outcomes, Karmada's Ready reasons, the success/failure threshold state machine,
condition bookkeeping and the status patch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flotilla.cluster.health import (
    CONDITION_COMPLETE_API_ENABLEMENTS,
    CONDITION_READY,
    DISCOVERY_INTERVAL,
    Collected,
    Health,
    Observation,
    ReadyThresholds,
    ThresholdMemory,
    aggregated_resource_lists,
    api_enablements,
    api_enablements_condition,
    condition_status,
    discovery_due,
    is_ready,
    needs_healthz_fallback,
    observation_from_probe,
    observed_ready_condition,
    plan_status,
    ready_transition,
    should_collect,
    threshold_adjusted_ready,
)
from flotilla.kube.conditions import find_condition, set_condition
from flotilla.kube.times import format_time, parse_time

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


HEALTHY = observed_ready_condition(Observation.healthy())
UNHEALTHY = observed_ready_condition(Observation.unhealthy("HTTP 500"))
OFFLINE = observed_ready_condition(Observation.offline("connection refused"))
NO_CLIENT = observed_ready_condition(Observation.client_failure("secret karmada-cluster/m1 not found"))


def published(cond: dict[str, Any], t: float) -> dict[str, Any]:
    return {**cond, "lastTransitionTime": format_time(at(t))}


# ---------------------------------------------------------------------------------------------- observations


def test_probe_outcomes() -> None:
    assert observation_from_probe(None, "refused").health is Health.OFFLINE
    assert observation_from_probe(200).health is Health.HEALTHY
    assert observation_from_probe(500, "readyz check failed").health is Health.UNHEALTHY
    assert observation_from_probe(503).detail == "health endpoint answered HTTP 503"
    assert observation_from_probe(500).online and not observation_from_probe(None).online
    assert needs_healthz_fallback(404)
    assert not needs_healthz_fallback(500) and not needs_healthz_fallback(None) and not needs_healthz_fallback(200)


def test_observed_ready_conditions_use_karmada_reasons_and_messages() -> None:
    assert HEALTHY == {"type": "Ready", "status": "True", "reason": "ClusterReady",
                       "message": "cluster is healthy and ready to accept workloads"}
    assert UNHEALTHY == {"type": "Ready", "status": "False", "reason": "ClusterNotReady",
                         "message": "cluster is reachable but health endpoint responded without ok"}
    assert OFFLINE == {"type": "Ready", "status": "False", "reason": "ClusterNotReachable",
                       "message": "cluster is not reachable"}
    assert NO_CLIENT == {"type": "Ready", "status": "False", "reason": "StatusCollectionFailed",
                         "message": "failed to create a ClusterClient: secret karmada-cluster/m1 not found"}
    huge = observed_ready_condition(Observation.client_failure("x" * 40000))
    assert len(huge["message"]) == 32768 and huge["message"].endswith("...")


# ---------------------------------------------------------------------------------------------- thresholds


def adjust(current: dict[str, Any] | None, observed: dict[str, Any], memory: ThresholdMemory | None,
           t: float) -> tuple[dict[str, Any], ThresholdMemory | None]:
    return threshold_adjusted_ready(current, observed, memory, at(t), 30.0, 30.0)


def test_first_observation_since_start_is_published_without_threshold() -> None:
    current = published(HEALTHY, 0)
    ready, memory = adjust(current, OFFLINE, None, 100)
    assert ready == OFFLINE  # e.g. a controller restart while the member is down: flips at once
    assert memory == ThresholdMemory("False", None)


def test_no_ready_condition_publishes_observed_and_keeps_memory() -> None:
    memory = ThresholdMemory("True", at(5))
    ready, after = adjust(None, OFFLINE, memory, 10)
    assert ready == OFFLINE and after is memory


def test_failure_held_until_failure_threshold_then_published() -> None:
    current = published(HEALTHY, 0)
    memory = ThresholdMemory("True", None)
    ready, memory = adjust(current, OFFLINE, memory, 10)  # first failure: window starts at 10
    assert ready == current and memory == ThresholdMemory("False", at(10))
    ready, memory = adjust(current, OFFLINE, memory, 39.9)
    assert ready == current and memory == ThresholdMemory("False", at(10))  # window does not restart
    ready, memory = adjust(current, OFFLINE, memory, 40)  # now >= start + 30 s
    assert ready == OFFLINE


def test_success_held_until_success_threshold_then_published() -> None:
    current = published(OFFLINE, 0)
    memory = ThresholdMemory("False", at(0))
    ready, memory = adjust(current, HEALTHY, memory, 50)
    assert ready == current and memory == ThresholdMemory("True", at(50))
    ready, memory = adjust(current, HEALTHY, memory, 79)
    assert ready == current
    ready, memory = adjust(current, HEALTHY, memory, 80)
    assert ready == HEALTHY


def test_thresholds_are_separate() -> None:
    current = published(HEALTHY, 0)
    memory = ThresholdMemory("True", None)
    ready, memory = threshold_adjusted_ready(current, OFFLINE, memory, at(10), 100.0, 5.0)
    assert ready == current
    ready, memory = threshold_adjusted_ready(current, OFFLINE, memory, at(15), 100.0, 5.0)
    assert ready == OFFLINE  # failure threshold 5 s
    current = published(OFFLINE, 15)
    ready, memory = threshold_adjusted_ready(current, HEALTHY, memory, at(20), 100.0, 5.0)
    ready, memory = threshold_adjusted_ready(current, HEALTHY, memory, at(110), 100.0, 5.0)
    assert ready == current  # success threshold 100 s not yet over
    ready, memory = threshold_adjusted_ready(current, HEALTHY, memory, at(120), 100.0, 5.0)
    assert ready == HEALTHY


def test_flapping_restarts_the_window() -> None:
    current = published(HEALTHY, 0)
    memory = ThresholdMemory("True", None)
    _, memory = adjust(current, OFFLINE, memory, 10)
    ready, memory = adjust(current, HEALTHY, memory, 20)  # recovered within the window: still True
    assert ready == HEALTHY and memory == ThresholdMemory("True", at(20))
    ready, memory = adjust(current, OFFLINE, memory, 30)  # fails again: a new window from 30
    assert ready == current and memory == ThresholdMemory("False", at(30))
    ready, memory = adjust(current, OFFLINE, memory, 45)
    assert ready == current  # 45 < 30 + 30, although the first failure was 35 s ago
    ready, _ = adjust(current, OFFLINE, memory, 60)
    assert ready == OFFLINE


def test_not_true_to_not_true_changes_are_published_at_once() -> None:
    """Only True-versus-not-True flips are damped: unreachable -> unhealthy (both False) is immediate, and
    so is a change of reason within the same status."""
    current = published(OFFLINE, 0)
    memory = ThresholdMemory("False", at(0))
    ready, _ = adjust(current, UNHEALTHY, memory, 1)
    assert ready == UNHEALTHY
    unknown = {"type": "Ready", "status": "Unknown", "reason": "ClusterStatusUnknown", "message": "stale"}
    ready, _ = adjust(published(unknown, 0), OFFLINE, ThresholdMemory("True", None), 1)
    assert ready == OFFLINE  # Unknown -> False: both not True


def test_unknown_current_to_true_is_damped() -> None:
    unknown = {"type": "Ready", "status": "Unknown", "reason": "ClusterStatusUnknown", "message": "stale"}
    current = published(unknown, 0)
    memory = ThresholdMemory("False", at(0))
    ready, memory = adjust(current, HEALTHY, memory, 5)
    assert ready == current
    ready, _ = adjust(current, HEALTHY, memory, 35)
    assert ready == HEALTHY


def test_client_failure_goes_through_the_failure_threshold() -> None:
    """Karmada #7426: a client that cannot be built (Secret missing during a rotation) does not flip a Ready
    cluster at once."""
    current = published(HEALTHY, 0)
    memory = ThresholdMemory("True", None)
    ready, memory = adjust(current, NO_CLIENT, memory, 10)
    assert ready == current
    ready, memory = adjust(current, HEALTHY, memory, 20)  # the Secret is back
    assert ready == HEALTHY
    _, memory = adjust(current, NO_CLIENT, memory, 30)
    ready, _ = adjust(current, NO_CLIENT, memory, 60)
    assert ready == NO_CLIENT and ready["reason"] == "StatusCollectionFailed"


def test_same_status_observed_is_published_without_waiting() -> None:
    current = published(HEALTHY, 0)
    ready, memory = adjust(current, HEALTHY, ThresholdMemory("True", at(0)), 1)
    assert ready == HEALTHY and memory == ThresholdMemory("True", at(0))


def test_ready_thresholds_object_keeps_memory_per_cluster() -> None:
    th = ReadyThresholds(30.0, 30.0)
    current = published(HEALTHY, 0)
    assert th.adjust("a", current, HEALTHY, at(0)) == HEALTHY
    assert "a" in th and "b" not in th
    assert th.adjust("a", current, OFFLINE, at(1)) == current  # held
    assert th.adjust("b", current, OFFLINE, at(1)) == OFFLINE  # b: first observation
    assert th.memory("a") == ThresholdMemory("False", at(1))
    th.forget("a")
    assert th.memory("a") is None
    assert th.adjust("a", current, OFFLINE, at(2)) == OFFLINE  # forgotten: first observation again


def test_adjust_is_idempotent_for_the_same_observation_and_time() -> None:
    """The controller re-decides after a 409 with the fresh object: calling again must not move the window."""
    th = ReadyThresholds(30.0, 30.0)
    current = published(HEALTHY, 0)
    th.adjust("a", current, HEALTHY, at(0))
    first = th.adjust("a", current, OFFLINE, at(10))
    again = th.adjust("a", current, OFFLINE, at(10))
    assert first == again == current and th.memory("a") == ThresholdMemory("False", at(10))


def test_timeline_of_a_member_going_down_and_coming_back() -> None:
    """A member going down and back, probes every 10 s, thresholds 30 s: Ready=False/ClusterNotReachable is first
    published by the probe at window start + 30 s; recovery needs 30 s of successes."""
    th = ReadyThresholds(30.0, 30.0)
    conditions: list[dict[str, Any]] = []
    seen: list[tuple[int, str]] = []
    for t in range(0, 200, 10):
        down = 40 <= t < 120
        observed = OFFLINE if down else HEALTHY
        ready = th.adjust("m", find_condition(conditions, CONDITION_READY), observed, at(t))
        conditions = set_condition(conditions, ready, at(t))
        seen.append((t, find_condition(conditions, CONDITION_READY)["status"]))  # type: ignore[index]
    statuses = dict(seen)
    assert statuses[40] == statuses[60] == "True"
    assert statuses[70] == "False"  # 40 + 30
    assert statuses[120] == statuses[140] == "False"
    assert statuses[150] == "True"  # 120 + 30
    ready = find_condition(conditions, CONDITION_READY)
    assert ready is not None and ready["lastTransitionTime"] == format_time(at(150))


# ---------------------------------------------------------------------------------------------- conditions


def test_set_condition_moves_transition_time_only_on_status_change() -> None:
    other = {"type": "Custom", "status": "True", "reason": "X", "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}
    conds = set_condition([other], OFFLINE, at(0))
    assert conds[0] == other and conds[1]["lastTransitionTime"] == format_time(at(0))
    conds2 = set_condition(conds, UNHEALTHY, at(5))  # same status, new reason
    assert conds2[1]["reason"] == "ClusterNotReady" and conds2[1]["lastTransitionTime"] == format_time(at(0))
    conds3 = set_condition(conds2, HEALTHY, at(9))
    assert conds3[1]["status"] == "True" and conds3[1]["lastTransitionTime"] == format_time(at(9))
    assert conds[1]["reason"] == "ClusterNotReachable"  # inputs untouched
    explicit = set_condition(conds3, {**OFFLINE, "lastTransitionTime": "2024-05-05T00:00:00Z"}, at(20))
    assert explicit[1]["lastTransitionTime"] == "2024-05-05T00:00:00Z"


def test_condition_helpers() -> None:
    cluster = {"metadata": {"name": "m"}, "status": {"conditions": [published(HEALTHY, 0)]}}
    assert condition_status(cluster) == "True" and is_ready(cluster)
    assert condition_status({"status": {}}) is None and not is_ready(None)
    assert condition_status(cluster, CONDITION_COMPLETE_API_ENABLEMENTS) is None
    assert parse_time(format_time(at(3))) == at(3)
    assert parse_time("garbage") is None and parse_time(None) is None
    assert format_time(datetime(2025, 1, 1, 12, 0, 0)) == "2025-01-01T12:00:00Z"


def test_ready_transition_events() -> None:
    assert ready_transition(None, HEALTHY) == ("Normal", "ClusterReady",
                                              "Ready unset -> True: cluster is healthy and ready to accept workloads")
    kind, reason, message = ready_transition(published(HEALTHY, 0), OFFLINE)  # type: ignore[misc]
    assert (kind, reason) == ("Warning", "ClusterNotReachable") and message.startswith("Ready True -> False")
    assert ready_transition(published(OFFLINE, 0), UNHEALTHY) is None  # same status: no event


# ---------------------------------------------------------------------------------------------- API enablements


def test_api_enablements_sorted_without_subresources() -> None:
    lists = [
        ("v1", [{"name": "pods", "kind": "Pod"}, {"name": "pods/status", "kind": "Pod"},
                {"name": "configmaps", "kind": "ConfigMap"}]),
        ("apps/v1", [{"name": "deployments", "kind": "Deployment"}, {"name": "deployments/scale", "kind": "Scale"}]),
        ("x.io/v1", [{"name": "things/status", "kind": "Thing"}]),
    ]
    assert api_enablements(lists) == [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"},
                                             {"name": "pods", "kind": "Pod"}]},
        {"groupVersion": "x.io/v1"},
    ]


def test_api_enablements_condition() -> None:
    one = [{"groupVersion": "v1", "resources": []}]
    assert api_enablements_condition(one, None) == {
        "type": "CompleteAPIEnablements", "status": "True", "reason": "Complete",
        "message": "collected complete APIEnablements from the cluster"}
    partial = api_enablements_condition(one, "metrics.k8s.io/v1beta1: 503")
    assert (partial["status"], partial["reason"]) == ("False", "Partial")
    assert partial["message"] == "might collect partial APIEnablements(1) from the cluster"
    empty = api_enablements_condition([], "boom")
    assert (empty["status"], empty["reason"], empty["message"]) == (
        "False", "Empty", "collected empty APIEnablements from the cluster")


# ---------------------------------------------------------------------------------------------- status plan


ENABLEMENTS = [{"groupVersion": "v1", "resources": [{"name": "pods", "kind": "Pod"}]}]


def test_should_collect_only_when_healthy_and_published_ready() -> None:
    assert should_collect(Observation.healthy(), HEALTHY)
    assert not should_collect(Observation.healthy(), published(OFFLINE, 0))  # recovering, within threshold
    assert not should_collect(Observation.offline(), published(HEALTHY, 0))  # failing, within threshold
    assert not should_collect(Observation.unhealthy(), UNHEALTHY)


def test_plan_status_first_write_and_no_op() -> None:
    collected = Collected("v1.37.0", ENABLEMENTS)
    patch = plan_status({}, HEALTHY, collected, at(0))
    assert patch is not None
    assert patch["kubernetesVersion"] == "v1.37.0" and patch["apiEnablements"] == ENABLEMENTS
    assert [c["type"] for c in patch["conditions"]] == ["Ready", "CompleteAPIEnablements"]
    assert all(c["lastTransitionTime"] == format_time(at(0)) for c in patch["conditions"])
    assert plan_status(patch, HEALTHY, collected, at(10)) is None  # nothing changed: no write


def test_plan_status_only_ready_when_not_collecting() -> None:
    status = plan_status({}, HEALTHY, Collected("v1.37.0", ENABLEMENTS), at(0))
    assert status is not None
    patch = plan_status(status, OFFLINE, None, at(50))
    assert patch is not None and set(patch) == {"conditions"}  # version and APIs stay as they were
    ready = find_condition(patch["conditions"], "Ready")
    api = find_condition(patch["conditions"], "CompleteAPIEnablements")
    assert ready is not None and ready["status"] == "False" and ready["lastTransitionTime"] == format_time(at(50))
    assert api is not None and api["status"] == "True"


def test_plan_status_keeps_version_when_unreadable_and_clears_empty_apis() -> None:
    status = plan_status({}, HEALTHY, Collected("v1.37.0", ENABLEMENTS), at(0))
    assert status is not None
    patch = plan_status(status, HEALTHY, Collected(None, [], "/apis: 500"), at(10))
    assert patch is not None
    assert "kubernetesVersion" not in patch
    assert patch["apiEnablements"] is None  # null in a merge patch removes the field
    api = find_condition(patch["conditions"], "CompleteAPIEnablements")
    assert api is not None and api["reason"] == "Empty"


@pytest.mark.parametrize("observation", [Observation.offline("x"), Observation.unhealthy("y"),
                                         Observation.client_failure("z")])
def test_every_failure_observation_is_false(observation: Observation) -> None:
    assert observed_ready_condition(observation)["status"] == "False"


# ---------------------------------------------------------------------------------------------- discovery


def test_discovery_is_read_at_every_sync_at_karmadas_period_and_every_10s_with_faster_probes() -> None:
    assert DISCOVERY_INTERVAL == 10.0
    # Karmada's default period (or longer): every sync
    assert discovery_due(at(0), at(10), 10.0, was_ready=True)
    assert discovery_due(at(0), at(30), 30.0, was_ready=True)
    # a probe every second: the first collection, then every 10 s
    assert discovery_due(None, at(0), 1.0, was_ready=True)
    assert not discovery_due(at(0), at(1), 1.0, was_ready=True)
    assert not discovery_due(at(0), at(9.9), 1.0, was_ready=True)
    assert discovery_due(at(0), at(10), 1.0, was_ready=True)
    # just became Ready (or recovered): at once
    assert discovery_due(at(0), at(1), 1.0, was_ready=False)


def test_aggregated_discovery_documents_become_resource_lists() -> None:
    core = {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
        {"metadata": {"name": ""}, "versions": [{"version": "v1", "freshness": "Current", "resources": [
            {"resource": "pods", "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
             "subresources": [{"subresource": "status"}]},
            {"resource": "configmaps", "responseKind": {"kind": "ConfigMap"}}]}]}]}
    groups = {"kind": "APIGroupDiscoveryList", "items": [
        {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
            {"resource": "deployments", "responseKind": {"kind": "Deployment"}}]}]},
        {"metadata": {"name": "flink.apache.org"}, "versions": [
            {"version": "v1beta1", "resources": [{"resource": "flinkdeployments",
                                                   "responseKind": {"kind": "FlinkDeployment"}}]},
            {"version": "v1alpha1", "freshness": "Stale", "resources": [{"resource": "old"}]}]},
        {"metadata": {"name": "empty.io"}, "versions": [{"version": "v1"}]}]}
    lists, failed = aggregated_resource_lists(core)
    assert lists == [("v1", [{"name": "pods", "kind": "Pod"}, {"name": "configmaps", "kind": "ConfigMap"}])]
    assert failed == []
    lists, failed = aggregated_resource_lists(groups)
    assert [gv for gv, _ in lists] == ["apps/v1", "flink.apache.org/v1beta1", "empty.io/v1"]
    assert failed == ["flink.apache.org/v1alpha1: the group version's discovery is stale"]
    assert api_enablements(lists) == [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "empty.io/v1"},
        {"groupVersion": "flink.apache.org/v1beta1", "resources": [{"name": "flinkdeployments",
                                                                     "kind": "FlinkDeployment"}]},
    ]
