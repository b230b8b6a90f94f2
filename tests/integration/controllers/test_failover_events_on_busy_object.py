"""A workload whose status keeps changing fails over, and the failover's Events are on its binding.

A real control plane, two simulated members and the controllers a cluster failover goes through (detector,
scheduler, taint manager, binding, execution, work-status, binding-status, graceful-eviction). The event
recorder's per-object budget is shrunk to 6 writes, never refilled, so that the churn of the first seconds
(every template change: SyncWorkSucceed, then AggregateStatusSucceed for each step of the member's rollout)
asks for several times that budget on the binding, as hours of a busy job would with the real one. Then the
member is tainted NoExecute: the eviction, the new placement and the new Work must be recorded on the binding,
and the controller-manager's /metrics must show no failover Event dropped.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from flotilla.api.resources import CLUSTERS, RESOURCE_BINDINGS
from flotilla.client import Client
from flotilla.failover.events import (
    EVENT_EVICTION_PERFORMED,
    EVENT_EVICTION_QUEUED,
    EVENT_SCHEDULE_BINDING_SUCCEED,
    EVENT_SYNC_WORK_SUCCEED,
    FAILOVER_EVENT_REASONS,
)
from flotilla.kube.resources import DEPLOYMENTS, EVENTS, Resource
from flotilla.observability.metrics import MetricsServer
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import WORKS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import STAMP, Eventually, MembersPlane, get_or_none, plane_with_members

MEMBERS = ("member1", "member2")
CONTROLLERS = ["detector", "scheduler", "taint-manager", "binding", "execution", "work-status", "binding-status",
               "graceful-eviction"]
PPS = Resource("policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy", True)
BINDING = "app-deployment"
ALIAS = "failover.example.io/replicas"
BUDGET = 6
CHURN = 8  # template changes before the failover
API_ENABLEMENTS = [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}]

eventually = Eventually(timeout=30.0, interval=0.1)


def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "app", "namespace": "default", "labels": {"app": "app"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "app"}},
                     "template": {"metadata": {"labels": {"app": "app"}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


def propagation_policy() -> dict[str, Any]:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "app", "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "app"}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)},
                                   "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1,
                                                          "minGroups": 1}]},
                     "failover": {"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
                         {"aliasLabelName": ALIAS, "jsonPath": "{ .replicas }"}]}}}}}


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[tuple[MembersPlane, ControllerManager]]:
    async with plane_with_members(tmp_path, MEMBERS) as p:
        for name in MEMBERS:  # what the cluster-status controller would write for a healthy member
            await p.cp.patch(CLUSTERS, name, {"status": {"apiEnablements": API_ENABLEMENTS, "conditions": [
                {"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "set by the test",
                 "lastTransitionTime": STAMP},
                {"type": "CompleteAPIEnablements", "status": "True", "reason": "Complete", "message": "",
                 "lastTransitionTime": STAMP}]}}, subresource="status")
        manager = await ControllerManager(p.cp, ControllerOptions(), controllers=CONTROLLERS, recorder_options={
            "spam_burst": BUDGET, "spam_qps": 0.0, "patch_delay": 0.05, "bump_max_interval": 0.4}).start()
        try:
            yield p, manager
        finally:
            await manager.stop()


async def binding_events(cp: Client) -> dict[str, dict[str, Any]]:
    """The Events about the binding, by reason (one each here: the messages do not vary)."""
    found = await cp.list(EVENTS, "default", field_selector=f"involvedObject.name={BINDING}")
    by_reason: dict[str, dict[str, Any]] = {}
    for ev in found.get("items") or []:
        if ev["involvedObject"].get("kind") == "ResourceBinding":
            prev = by_reason.get(ev["reason"])
            by_reason[ev["reason"]] = ev if prev is None or ev["count"] > prev["count"] else prev
    return by_reason


async def healthy_on(cp: Client) -> str | None:
    rb = await get_or_none(cp, RESOURCE_BINDINGS, BINDING, "default")
    clusters = [c["name"] for c in ((rb or {}).get("spec") or {}).get("clusters") or []]
    items = {i.get("clusterName"): i for i in ((rb or {}).get("status") or {}).get("aggregatedStatus") or []}
    if len(clusters) == 1 and (items.get(clusters[0]) or {}).get("health") == "Healthy":
        return clusters[0]
    return None


async def test_failover_events_land_on_a_binding_whose_budget_the_status_churn_used_up(
        plane: tuple[MembersPlane, ControllerManager]) -> None:
    p, manager = plane
    cp = p.cp
    await cp.create(DEPLOYMENTS, deployment())
    await cp.create(PPS, propagation_policy())
    source = await eventually(lambda: healthy_on(cp), what="the workload Healthy in one member")
    target = next(m for m in MEMBERS if m != source)

    # the churn: each template change is a new Work, a rollout in the member, statuses aggregated
    for i in range(CHURN):
        await cp.patch(DEPLOYMENTS, "app", {"spec": {"template": {"metadata": {"annotations": {"rev": str(i)}}}}},
                       namespace="default")

        async def rolled_out(i: int = i) -> bool:
            obj = await get_or_none(p.members[source], DEPLOYMENTS, "app", "default")
            status = (obj or {}).get("status") or {}
            return (obj is not None and _annotation(obj) == str(i)
                    and status.get("observedGeneration") == obj["metadata"]["generation"]
                    and status.get("updatedReplicas") == status.get("readyReplicas") == 2
                    and await healthy_on(cp) == source)

        await eventually(rolled_out, what=f"template change {i} rolled out and aggregated")
    await manager.ctx.recorder.flush()
    before = await binding_events(cp)
    synced_before = before[EVENT_SYNC_WORK_SUCCEED]["count"]

    # the failover: an untolerated NoExecute taint on the member the workload runs in
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await cp.patch(CLUSTERS, source, {"spec": {"taints": [{"key": "fail-test", "effect": "NoExecute",
                                                           "timeAdded": now}]}})

    async def moved() -> bool:
        return await healthy_on(cp) == target

    await eventually(moved, what=f"the workload Healthy in {target}")
    work = await eventually(lambda: get_or_none(cp, WORKS, generate_work_name("Deployment", "app", "default"),
                                                f"karmada-es-{target}"), what="the new Work")
    manifest = work["spec"]["workload"]["manifests"][0]
    assert str(manifest["metadata"]["labels"].get(ALIAS)).isdigit()  # the replicas the old copy reported

    async def failover_recorded() -> dict[str, dict[str, Any]] | None:
        events = await binding_events(cp)
        ok = (EVENT_EVICTION_QUEUED in events and EVENT_EVICTION_PERFORMED in events
              and EVENT_SCHEDULE_BINDING_SUCCEED in events
              and events[EVENT_SYNC_WORK_SUCCEED]["count"] > synced_before)
        return events if ok else None

    events = await eventually(failover_recorded, timeout=15.0, what="the failover's Events on the binding")
    assert source in events[EVENT_EVICTION_QUEUED]["message"]
    assert source in events[EVENT_EVICTION_PERFORMED]["message"]
    # the routine Events asked for far more writes than the budget, and every occurrence is in their counts
    assert events[EVENT_SYNC_WORK_SUCCEED]["count"] > CHURN
    assert sum(ev["count"] for ev in events.values() if ev["type"] == "Normal") > 3 * BUDGET, events

    # and the controller-manager's metrics say none of the failover's Events was dropped
    server = await MetricsServer(manager.metrics.registry, "127.0.0.1", 0).start()
    try:
        async with aiohttp.ClientSession() as session, session.get(f"{server.url}/metrics") as resp:
            text = await resp.text()
    finally:
        await server.stop()
    assert "# TYPE flotilla_events_dropped_total counter" in text
    dropped = re.findall(r'^flotilla_events_dropped_total\{reason="([^"]*)",cause="([^"]*)"\} (\S+)$', text, re.M)
    assert not [d for d in dropped if d[0] in FAILOVER_EVENT_REASONS and float(d[2]) > 0], dropped


def _annotation(tpl: dict[str, Any]) -> str | None:
    return (((tpl.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations", {}).get("rev")
