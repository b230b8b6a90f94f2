"""The control plane's automatic fence of guarded Pull clusters, on a real API server with the controller-manager's
controllers and short settings.

The test plays the agents: it posts each Pull cluster's Ready condition and guard announcement, renews its Lease
``karmada-cluster/<cluster>``, then stops (as an agent cut off from the control plane would). The announced
permit-hold and fence-after are HOLD and FENCE_AFTER, the controller-manager's ``--fence-margin`` MARGIN.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.api.resources import CLUSTERS
from flotilla.client import Client
from flotilla.failover.auto_fence import ANNOTATION_FENCE_AFTER, ANNOTATION_PERMIT_HOLD
from flotilla.failover.fencing import is_fenced
from flotilla.kube.resources import DEPLOYMENTS, NAMESPACES, Resource
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import WORKS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import (
    STAMP,
    Eventually,
    control_plane,
    events_by_reason,
    get_or_none,
    plane_with_members,
    set_ready,
)

from .test_pull_cluster_health import LEASE_NS, Agent, Plane

PERIOD = 0.2
GRACE = 1.0
HOLD = 0.5
FENCE_AFTER = 0.6
MARGIN = 0.4
BOUND = HOLD + FENCE_AFTER + MARGIN
SLACK = 2.0  # watch delivery and the controllers' writes on a shared machine

eventually = Eventually(timeout=20.0, interval=0.02, retry_on=())


def options(**more: Any) -> ControllerOptions:
    return ControllerOptions(cluster_monitor_period=PERIOD, cluster_monitor_grace_period=GRACE,
                             cluster_startup_grace_period=GRACE, fence_margin=MARGIN, **more)


def guard_annotations(hold: str = f"{HOLD}s", fence_after: str = f"{FENCE_AFTER}s") -> dict[str, str]:
    return {ANNOTATION_PERMIT_HOLD: hold, ANNOTATION_FENCE_AFTER: fence_after}


def fenced_condition(cluster: dict[str, Any] | None) -> dict[str, Any]:
    for c in ((cluster or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Fenced":
            return dict(c)
    return {}


@contextlib.asynccontextmanager
async def agents(*running: Agent) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(a.run()) for a in running]
    try:
        yield
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t


async def pull_cluster(client: Client, name: str, annotations: dict[str, str] | None) -> Agent:
    """A Pull cluster registered by its agent: the Cluster (with the agent's guard announcement), its Lease and
    Ready True."""
    await client.create(CLUSTERS, {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                                   "metadata": {"name": name, "annotations": annotations or {}},
                                   "spec": {"syncMode": "Pull"}})
    agent = Agent(client, name)
    await agent.create()
    await set_ready(client, name, "True", reason="ClusterReady")
    return agent


async def push_cluster(client: Client, name: str) -> None:
    await client.create(CLUSTERS, {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                                   "metadata": {"name": name},
                                   "spec": {"syncMode": "Push", "apiEndpoint": f"https://{name}.example:6443"}})
    await set_ready(client, name, "True")


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    async with control_plane(tmp_path, compaction_interval=0) as (_server, client):
        await client.create(NAMESPACES, {"metadata": {"name": LEASE_NS}})
        manager = await ControllerManager(client, options(), controllers=["cluster", "taint-policy"]).start()
        try:
            yield Plane(client, manager)
        finally:
            await manager.stop()


async def never_fenced(plane: Plane, names: list[str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in names:
            c = await plane.get(name)
            assert not is_fenced(c) and not fenced_condition(c), f"{name} fenced: {c}"
        await asyncio.sleep(0.05)


async def test_d16_a_guarded_pull_cluster_whose_lease_stops_is_fenced_after_the_bound_and_not_before(
        plane: Plane) -> None:
    await push_cluster(plane.client, "push1")
    await push_cluster(plane.client, "push2")
    agent = await pull_cluster(plane.client, "pull1", guard_annotations())
    async with agents(agent):
        await never_fenced(plane, ["pull1"], 3 * BOUND)  # renewing: never fenced

        agent.renewing = False
        await asyncio.sleep(0.25)  # a renewal in flight lands
        stopped = agent.last

        async def fenced() -> dict[str, Any] | None:
            c = await plane.get("pull1")
            return c if is_fenced(c) else None

        c = await eventually(fenced, what="pull1 fenced")
        elapsed = time.monotonic() - stopped
        assert elapsed >= BOUND * 0.95, f"fenced {elapsed:.2f}s after the last renewal, before the bound {BOUND}s"
        assert elapsed <= BOUND + PERIOD + SLACK, f"fenced only {elapsed:.2f}s after the last renewal"

        async def recorded() -> dict[str, Any] | None:
            cond = fenced_condition(await plane.get("pull1"))
            return cond or None

        cond = await eventually(recorded, what="the Fenced condition")
        assert cond["status"] == "True" and cond["reason"] == "LeaseExpired"
        assert "No renewal of Lease karmada-cluster/pull1 seen for" in cond["message"]
        assert "permit-hold 0.5s + fence-after 0.6s + fence-margin 0.4s = 1.5s" in cond["message"]
        assert "2 of 3 clusters live" in cond["message"]
        events = await eventually(lambda: events_by_reason(plane.client, "ClusterFencedAutomatically"),
                                  what="the ClusterFencedAutomatically Event")
        assert events[0]["type"] == "Warning" and events[0]["involvedObject"]["name"] == "pull1"
        metrics = plane.manager.ctx.metrics if plane.manager.ctx is not None else None
        assert metrics is not None and metrics.failover.clusters_fenced.value("lease") == 1

        # never twice: the taint stays single, one Event, one count
        await asyncio.sleep(3 * PERIOD + 0.5)
        c = await plane.get("pull1")
        assert [t["key"] for t in c["spec"]["taints"]].count("cluster.flotilla.io/out-of-service") == 1
        await plane.manager.ctx.recorder.flush()
        events = await events_by_reason(plane.client, "ClusterFencedAutomatically")
        assert len(events) == 1 and events[0].get("count", 1) == 1
        assert metrics.failover.clusters_fenced.value("lease") == 1
        for push in ("push1", "push2"):
            assert not is_fenced(await plane.get(push))


async def test_d16_a_pull_cluster_without_a_guard_or_with_a_malformed_one_is_never_fenced(plane: Plane) -> None:
    await push_cluster(plane.client, "push1")
    await push_cluster(plane.client, "push2")
    await push_cluster(plane.client, "push3")
    plain = await pull_cluster(plane.client, "plain", None)
    broken = await pull_cluster(plane.client, "broken", guard_annotations(fence_after="soon"))
    plain.renewing = broken.renewing = False
    async with agents(plain, broken):
        await never_fenced(plane, ["plain", "broken"], 3 * BOUND + SLACK)
    events = await eventually(lambda: events_by_reason(plane.client, "GuardAnnouncementInvalid"),
                              what="the GuardAnnouncementInvalid Event")
    assert events[0]["involvedObject"]["name"] == "broken" and events[0]["type"] == "Warning"
    assert "guard.flotilla.io/fence-after" in events[0]["message"] and "soon" in events[0]["message"]
    assert not await events_by_reason(plane.client, "ClusterFencedAutomatically")


async def test_d16_with_only_a_minority_of_clusters_live_nobody_is_fenced(plane: Plane) -> None:
    pulls = [await pull_cluster(plane.client, f"pull{i}", guard_annotations()) for i in (1, 2, 3)]
    async with agents(*pulls):
        await never_fenced(plane, ["pull1", "pull2", "pull3"], BOUND)
        pulls[0].renewing = pulls[1].renewing = False  # the control plane sees only pull3 of 3 live
        await never_fenced(plane, ["pull1", "pull2", "pull3"], 3 * BOUND + SLACK)
        assert not await events_by_reason(plane.client, "ClusterFencedAutomatically")

        pulls[1].renewing = True  # pull2 back: 2 of 3 live, pull1 alone is cut off

        async def fenced() -> bool:
            return is_fenced(await plane.get("pull1"))

        await eventually(fenced, what="pull1 fenced once a majority is live again")
        assert not is_fenced(await plane.get("pull2")) and not is_fenced(await plane.get("pull3"))


# ------------------------------------------------------------------------------------ the Directly failover

MEMBERS = ("member1", "member2")
FAILOVER_CONTROLLERS = ["cluster", "detector", "scheduler", "taint-manager", "binding", "execution", "work-status",
                        "binding-status", "graceful-eviction"]
PPS = Resource("policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy", True)
API_ENABLEMENTS = [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}]
PARKED = {"key": "test.flotilla.io/parked", "effect": "NoSchedule"}


def _ready_status() -> dict[str, Any]:
    return {"apiEnablements": API_ENABLEMENTS, "conditions": [
        {"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "set by the test",
         "lastTransitionTime": STAMP},
        {"type": "CompleteAPIEnablements", "status": "True", "reason": "Complete", "message": "",
         "lastTransitionTime": STAMP}]}


async def test_a_directly_workload_on_an_automatically_fenced_pull_cluster_fails_over(tmp_path: Path) -> None:
    async with plane_with_members(tmp_path, MEMBERS) as p:
        cp = p.cp
        for name in MEMBERS:
            await cp.patch(CLUSTERS, name, {"status": _ready_status()}, subresource="status")
        await cp.patch(CLUSTERS, "member2", {"spec": {"taints": [PARKED]}})  # the workload goes to pull1 first
        agent = await pull_cluster(cp, "pull1", guard_annotations())
        await cp.patch(CLUSTERS, "pull1", {"status": _ready_status()}, subresource="status")
        manager = await ControllerManager(cp, options(), controllers=FAILOVER_CONTROLLERS).start()
        try:
            async with agents(agent):
                await cp.create(DEPLOYMENTS, {
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "app", "namespace": "default", "labels": {"app": "app"}},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "app"}},
                             "template": {"metadata": {"labels": {"app": "app"}},
                                          "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}})
                await cp.create(PPS, {
                    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                    "metadata": {"name": "app", "namespace": "default"},
                    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "app"}],
                             "placement": {"clusterAffinity": {"clusterNames": ["pull1", "member2"]},
                                           "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1,
                                                                  "minGroups": 1}]},
                             "failover": {"cluster": {"purgeMode": "Directly"}}}})
                work_name = generate_work_name("Deployment", "app", "default")

                async def on_pull1() -> dict[str, Any] | None:
                    return await get_or_none(cp, WORKS, work_name, "karmada-es-pull1")

                work = await eventually(on_pull1, what="the Work on pull1")
                # the agent takes the Work (its execution controller's finalizer), as it would apply it
                await cp.patch(WORKS, work_name, {"metadata": {
                    "finalizers": [L.EXECUTION_CONTROLLER_FINALIZER],
                    "resourceVersion": work["metadata"]["resourceVersion"]}}, namespace="karmada-es-pull1")
                await cp.patch(CLUSTERS, "member2", {"spec": {"taints": None}})
                assert await get_or_none(cp, WORKS, work_name, "karmada-es-member2") is None

                # pull1 names an endpoint (as `flotilla up` has its agents record one): the control plane must never
                # call it, not even for the recovery purge its abandoned Work asks for (that purge is the agent's)
                calls = 0

                async def count(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                    nonlocal calls
                    calls += 1
                    writer.close()

                endpoint = await asyncio.start_server(count, "127.0.0.1", 0)
                port = endpoint.sockets[0].getsockname()[1]
                await cp.patch(CLUSTERS, "pull1", {"spec": {"apiEndpoint": f"https://127.0.0.1:{port}"}})
                agent.renewing = False  # pull1's agent is cut off from the control plane
                seen_both = False

                async def moved() -> bool:
                    nonlocal seen_both
                    new = await get_or_none(cp, WORKS, work_name, "karmada-es-member2")
                    old = await get_or_none(cp, WORKS, work_name, "karmada-es-pull1")
                    if new is not None and old is not None:
                        seen_both = True
                    return new is not None and old is None

                await eventually(moved, what="the Work moved from pull1 to member2")
                assert not seen_both, "the new Work existed while the old one was still there (Directly)"
                assert is_fenced(await cp.get(CLUSTERS, "pull1"))
                abandoned = await eventually(lambda: events_by_reason(cp, "WorkAbandoned"),
                                             what="the WorkAbandoned Event")
                assert "pull1 is fenced" in abandoned[0]["message"]

                async def running_in_member2() -> bool:
                    return await get_or_none(p.members["member2"], DEPLOYMENTS, "app", "default") is not None

                await eventually(running_in_member2, what="the new copy in member2")
                await asyncio.sleep(2.0)  # a purge retried by the control plane would have called by now
                endpoint.close()
                assert calls == 0, "the control plane called the fenced Pull cluster's API"
        finally:
            await manager.stop()


async def test_after_a_cut_off_of_the_control_plane_the_last_agents_back_get_a_fresh_bound(plane: Plane) -> None:
    """Every Lease silent for longer than the bound (the control plane cut off from all members), then two agents
    back at once and the third a little later: the third is not fenced for having been the last one back. One that
    never comes back is fenced a bound after the majority returned, not before."""
    pulls = [await pull_cluster(plane.client, f"pull{i}", guard_annotations()) for i in (1, 2, 3, 4, 5)]
    async with agents(*pulls):
        await never_fenced(plane, [p.name for p in pulls], BOUND)
        for p in pulls:
            p.renewing = False  # the control plane's network is cut from every member
        await never_fenced(plane, [p.name for p in pulls], 2 * BOUND + SLACK)
        for p in pulls[1:4]:
            p.renewing = True  # three of five back: a majority again
        regained = time.monotonic()
        await asyncio.sleep(BOUND * 0.6)
        pulls[0].renewing = True  # pull1 back within the bound counted from the regained majority
        await never_fenced(plane, ["pull1"], 2 * BOUND)

        async def pull5_fenced() -> bool:
            return is_fenced(await plane.get("pull5"))

        await eventually(pull5_fenced, what="pull5, never back, fenced")
        assert time.monotonic() - regained >= BOUND * 0.95
