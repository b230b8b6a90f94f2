"""The control plane's judgement of Pull clusters from their Lease, on a real API server
with the controller-manager's cluster and taint-policy controllers and short monitor settings.

The test plays the agent: it posts the Pull cluster's Ready condition and renews its Lease
``karmada-cluster/<cluster>``, then stops. Beside it, a Push cluster with no Lease is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flotilla.api.resources import CLUSTER_TAINT_POLICIES, CLUSTERS
from flotilla.client import Client
from flotilla.kube.resources import LEASES, NAMESPACES
from flotilla.local.stack import default_taint_policy
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, control_plane, set_ready

LEASE_NS = "karmada-cluster"
PERIOD = 0.2
GRACE = 1.0
STARTUP_GRACE = 1.5
RENEW_EVERY = 0.1
#: generous slack on a shared machine for watch delivery and the controllers' writes
SLACK = 2.0

UNREACHABLE = "cluster.karmada.io/unreachable:NoSchedule"
NOT_READY_NOEXEC = "cluster.karmada.io/not-ready:NoExecute"

eventually = Eventually(timeout=15.0, interval=0.02, retry_on=())


def micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def taints(cluster: dict[str, Any] | None) -> set[str]:
    return {f"{t['key']}:{t['effect']}" for t in ((cluster or {}).get("spec") or {}).get("taints") or []}


def ready(cluster: dict[str, Any] | None) -> dict[str, Any]:
    for c in ((cluster or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return dict(c)
    return {}


@dataclass
class Agent:
    """Renews the Lease as an agent would, while ``renewing``; ``last`` is the monotonic time of the last renewal
    the API server accepted."""

    client: Client
    name: str
    renewing: bool = True
    last: float = 0.0

    async def create(self) -> None:
        await self.client.create(LEASES, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": LEASE_NS},
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 1, "renewTime": micro_now()}})
        self.last = time.monotonic()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(RENEW_EVERY)
            if self.renewing:
                await self.client.patch(LEASES, self.name, {"spec": {"renewTime": micro_now()}}, namespace=LEASE_NS)
                self.last = time.monotonic()


@dataclass
class Plane:
    client: Client
    manager: ControllerManager

    async def get(self, name: str) -> dict[str, Any] | None:
        return await self.client.get_or_none(CLUSTERS, name)

    async def cluster(self, name: str, mode: str) -> None:
        spec: dict[str, Any] = {"syncMode": mode}
        if mode == "Push":
            spec["apiEndpoint"] = f"https://{name}.example:6443"
        await self.client.create(CLUSTERS, {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                                            "metadata": {"name": name}, "spec": spec})


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    options = ControllerOptions(cluster_monitor_period=PERIOD, cluster_monitor_grace_period=GRACE,
                                cluster_startup_grace_period=STARTUP_GRACE)
    async with control_plane(tmp_path, compaction_interval=0) as (_server, client):
        await client.create(NAMESPACES, {"metadata": {"name": LEASE_NS}})
        manager = await ControllerManager(client, options, controllers=["cluster", "taint-policy"]).start()
        try:
            yield Plane(client, manager)
        finally:
            await manager.stop()


async def test_a_pull_cluster_whose_agent_stops_renewing_goes_unknown_then_is_tainted(plane: Plane) -> None:
    await plane.client.create(CLUSTER_TAINT_POLICIES, default_taint_policy(["pull1", "push1"]))
    await plane.cluster("push1", "Push")
    await set_ready(plane.client, "push1", "True")
    await plane.cluster("pull1", "Pull")
    agent = Agent(plane.client, "pull1")
    await agent.create()
    await set_ready(plane.client, "pull1", "True", reason="ClusterReady")
    renewer = asyncio.create_task(agent.run())
    try:
        # while the agent renews, Ready stays as the agent posted it, for several grace periods
        deadline = time.monotonic() + 3 * GRACE
        while time.monotonic() < deadline:
            c = await plane.get("pull1")
            assert ready(c).get("status") == "True" and taints(c) == set()
            await asyncio.sleep(0.05)
        push_before = await plane.get("push1")
        assert push_before is not None and "karmada.io/cluster-controller" in push_before["metadata"]["finalizers"]

        agent.renewing = False
        await asyncio.sleep(2 * RENEW_EVERY)  # a renewal in flight lands
        stopped = agent.last

        async def unknown() -> dict[str, Any] | None:
            c = await plane.get("pull1")
            return c if ready(c).get("status") == "Unknown" else None

        c = await eventually(unknown, what="Ready Unknown")
        elapsed = time.monotonic() - stopped
        condition = ready(c)
        assert condition["reason"] == "ClusterStatusUnknown"
        assert condition["message"] == "Cluster status controller stopped posting cluster status."
        assert elapsed >= GRACE * 0.95, f"Unknown {elapsed:.2f}s after the last renewal, before the grace period"
        assert elapsed <= GRACE + PERIOD + SLACK, f"Unknown only {elapsed:.2f}s after the last renewal"

        async def tainted() -> dict[str, Any] | None:
            c = await plane.get("pull1")
            return c if taints(c) == {UNREACHABLE, NOT_READY_NOEXEC} else None

        await eventually(tainted, what="unreachable:NoSchedule and the policy's NoExecute taint")

        push_after = await plane.get("push1")
        assert push_after is not None
        assert push_after["metadata"]["resourceVersion"] == push_before["metadata"]["resourceVersion"]
        assert ready(push_after)["status"] == "True" and taints(push_after) == set()
    finally:
        renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewer


async def test_renewals_after_unknown_do_not_make_it_ready_but_the_agents_true_stays(plane: Plane) -> None:
    await plane.client.create(CLUSTER_TAINT_POLICIES, default_taint_policy(["pull1"]))
    await plane.cluster("pull1", "Pull")
    agent = Agent(plane.client, "pull1", renewing=False)
    await agent.create()
    await set_ready(plane.client, "pull1", "True", reason="ClusterReady")

    async def unknown() -> dict[str, Any] | None:
        c = await plane.get("pull1")
        return c if ready(c).get("status") == "Unknown" and taints(c) == {UNREACHABLE, NOT_READY_NOEXEC} else None

    await eventually(unknown, what="Ready Unknown and tainted")
    agent.renewing = True
    renewer = asyncio.create_task(agent.run())
    try:
        deadline = time.monotonic() + 2 * GRACE  # the agent is back, but only its own status write says True
        while time.monotonic() < deadline:
            assert ready(await plane.get("pull1")).get("status") == "Unknown"
            await asyncio.sleep(0.05)

        await set_ready(plane.client, "pull1", "True", reason="ClusterReady")

        async def untainted() -> dict[str, Any] | None:
            c = await plane.get("pull1")
            return c if taints(c) == set() else None

        await eventually(untainted, what="taints removed once the agent posts True")
        deadline = time.monotonic() + 3 * GRACE  # renewing: the monitor leaves the agent's True alone
        while time.monotonic() < deadline:
            assert ready(await plane.get("pull1")).get("status") == "True"
            await asyncio.sleep(0.05)
    finally:
        renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewer


async def test_a_pull_cluster_that_never_posts_status_gets_never_updated_after_the_startup_grace(
        plane: Plane) -> None:
    started = time.monotonic()
    await plane.cluster("pull2", "Pull")

    async def never() -> dict[str, Any] | None:
        c = await plane.get("pull2")
        return c if ready(c).get("status") == "Unknown" else None

    c = await eventually(never, what="Ready Unknown")
    elapsed = time.monotonic() - started
    assert ready(c)["reason"] == "ClusterStatusNeverUpdated"
    # the startup grace counts from creationTimestamp, which has whole seconds: up to 1 s earlier than the create
    assert STARTUP_GRACE - 1.0 <= elapsed <= STARTUP_GRACE + PERIOD + SLACK

    async def unreachable() -> dict[str, Any] | None:
        c = await plane.get("pull2")
        return c if UNREACHABLE in taints(c) else None

    await eventually(unreachable, what="unreachable:NoSchedule")


async def test_a_renewal_the_informer_has_not_delivered_yet_keeps_the_monitor_from_writing_unknown(
        tmp_path: Path) -> None:
    from datetime import timedelta

    from flotilla.controllers.cluster import ClusterController

    options = ControllerOptions(cluster_monitor_period=3600.0, cluster_monitor_grace_period=GRACE,
                                cluster_startup_grace_period=STARTUP_GRACE)  # passes driven by the test
    async with control_plane(tmp_path, compaction_interval=0) as (_server, client):
        await client.create(NAMESPACES, {"metadata": {"name": LEASE_NS}})
        manager = await ControllerManager(client, options, controllers=["cluster"]).start()
        try:
            assert manager.ctx is not None
            controller = next(c for c in manager.controllers if isinstance(c, ClusterController))
            plane = Plane(client, manager)
            await plane.cluster("pull1", "Pull")
            agent = Agent(client, "pull1")
            await agent.create()
            await set_ready(client, "pull1", "True", reason="ClusterReady")

            async def seen() -> bool:
                return controller.leases.store.get(f"{LEASE_NS}/pull1") is not None and \
                    ready(controller.clusters.store.get("pull1")).get("status") == "True"

            await eventually(seen, what="the Lease and Ready True in the controller's caches")
            await controller.monitor_pull_clusters()

            await controller.leases.stop()  # its cache keeps the first renewal: a view that lags behind
            await client.patch(LEASES, "pull1", {"spec": {"renewTime": micro_now()}}, namespace=LEASE_NS)
            later = datetime.now(UTC) + timedelta(seconds=10 * GRACE)
            manager.ctx.now = lambda: later
            await controller.monitor_pull_clusters()  # the cache says stale; the API server says renewed
            assert ready(await plane.get("pull1"))["status"] == "True"

            much_later = later + timedelta(seconds=10 * GRACE)
            manager.ctx.now = lambda: much_later
            await controller.monitor_pull_clusters()  # no renewal since: now it is Unknown
            assert ready(await plane.get("pull1"))["reason"] == "ClusterStatusUnknown"
        finally:
            await manager.stop()


async def test_the_cluster_controller_creates_the_lease_namespace_for_a_pull_cluster(tmp_path: Path) -> None:
    """On a bare control plane (no ``flotilla up`` to create it) the first Pull cluster gets ``karmada-cluster``,
    so its agent, which may not create namespaces, can write its Lease; a Push cluster alone does not."""
    async with control_plane(tmp_path, compaction_interval=0) as (_server, client):
        manager = await ControllerManager(client, ControllerOptions(), controllers=["cluster"]).start()
        try:
            p = Plane(client, manager)
            await p.cluster("push9", "Push")
            await eventually(lambda: client.get_or_none(NAMESPACES, "karmada-es-push9"), what="push9's es")
            assert await client.get_or_none(NAMESPACES, LEASE_NS) is None
            await p.cluster("pull9", "Pull")
            await eventually(lambda: client.get_or_none(NAMESPACES, LEASE_NS), what="karmada-cluster created")
            await Agent(client, "pull9").create()  # what the agent then does
        finally:
            await manager.stop()
