"""The cluster status controller publishes a joined member's nodeSummary and resourceSummary:
simulated nodes make the allocatable, workloads (no Pods) or Pods the allocated/allocating, and the
summary follows changes in the member without rewriting an unchanged status. The summaries come from watches
(an idle member is not listed again) and discovery is aggregated, conditional (304) and read every 10 s when
probes are more frequent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.client import Client
from flotilla.cluster.resources import summarize
from flotilla.controllers import cluster_status
from flotilla.controllers.cluster_status import (
    ClusterStatusController,
    DiscoveryCache,
    discover_api_enablements,
)
from flotilla.kube.resources import CRDS, DEPLOYMENTS, NODES, PODS
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberConfig
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.members import CLUSTERS
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, cluster_controllers, join_in_process

FREQUENCY = 0.2
eventually = Eventually(retry_on=())
ZERO = {"cpu": "0", "ephemeral-storage": "0", "memory": "0", "pods": "0"}


@dataclass
class Env:
    client: Client
    members: MemberGroup
    manager: ControllerManager

    async def status(self, name: str) -> dict[str, Any]:
        return (await self.client.get(CLUSTERS, name)).get("status") or {}

    def member_client(self, name: str) -> Client:
        return Client.from_kubeconfig(self.members.members[name].kubeconfig_path)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    members = [MemberConfig(name="member1", data_dir=tmp_path / "members", simulators=["node"]),
               MemberConfig(name="bare", data_dir=tmp_path / "members", simulators=[])]
    options = ControllerOptions(cluster_status_update_frequency=FREQUENCY, cluster_success_threshold=0.6,
                                cluster_failure_threshold=0.6)
    async with cluster_controllers(tmp_path, members, options) as c:
        for name in c.members.members:
            await join_in_process(c.client, name, c.members.members[name].kubeconfig_path)
        yield Env(c.client, c.members, c.manager)


def deployment(name: str, replicas: int, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx",
                                                           "resources": {"requests": {"cpu": cpu}}}]}}}}


def pod(name: str, cpu: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def test_joined_members_get_node_and_resource_summaries(env: Env) -> None:
    async def summarized(name: str) -> dict[str, Any] | None:
        status = await env.status(name)
        return status if "resourceSummary" in status else None

    status = await eventually(lambda: summarized("member1"))
    assert status["nodeSummary"] == {"totalNum": 3, "readyNum": 3}
    assert status["resourceSummary"] == {
        "allocatable": {"cpu": "24", "ephemeral-storage": "300Gi", "memory": "96Gi", "pods": "330"},
        "allocated": ZERO,
        "allocating": ZERO,
    }
    bare = await eventually(lambda: summarized("bare"))  # no node simulator: no capacity at all
    assert bare["nodeSummary"] == {}
    assert bare["resourceSummary"] == {"allocated": ZERO, "allocating": ZERO}

    # unchanged member: no status writes
    rv = (await env.client.get(CLUSTERS, "member1"))["metadata"]["resourceVersion"]
    await asyncio.sleep(FREQUENCY * 3)
    assert (await env.client.get(CLUSTERS, "member1"))["metadata"]["resourceVersion"] == rv

    async with env.member_client("member1") as member:
        # no Pods in the member: its workloads are counted (4 x 500m)
        await member.create(DEPLOYMENTS, deployment("web", 4, "500m"))

        async def allocated(expected: dict[str, str], key: str = "allocated") -> bool:
            return (await env.status("member1"))["resourceSummary"].get(key) == expected

        await eventually(lambda: allocated({"cpu": "2", "ephemeral-storage": "0", "memory": "0", "pods": "4"}))

        # as soon as the member has Pods, they are what counts (bound: allocated; unbound: allocating)
        await member.create(PODS, pod("bound", "1", "member1-node-0"))
        await member.create(PODS, pod("pending", "250m", None))
        await eventually(lambda: allocated({"cpu": "1", "ephemeral-storage": "0", "memory": "0", "pods": "1"}))
        await eventually(lambda: allocated({"cpu": "250m", "ephemeral-storage": "0", "memory": "0", "pods": "1"},
                                           "allocating"))

        # a node going NotReady no longer offers its capacity
        node = await member.get(NODES, "member1-node-2")
        for cond in node["status"]["conditions"]:
            if cond["type"] == "Ready":
                cond["status"] = "False"
        await member.update(NODES, node, subresource="status")

        async def degraded() -> dict[str, Any] | None:
            status = await env.status("member1")
            return status if status["nodeSummary"].get("readyNum") == 2 else None

        status = await eventually(degraded)
        assert status["nodeSummary"] == {"totalNum": 3, "readyNum": 2}
        assert status["resourceSummary"]["allocatable"] == {"cpu": "16", "ephemeral-storage": "200Gi",
                                                            "memory": "64Gi", "pods": "220"}
    assert_totals_match_the_caches(status_controller(env).summaries["member1"])


def assert_totals_match_the_caches(watch: cluster_status.MemberSummaries) -> None:
    """The running totals the watch events kept are what summarize gives on the cached objects."""
    workloads = [(res.group, res.kind, obj) for res, inf in watch.workloads.items() for obj in inf.store.list()]
    assert watch.totals.summaries() == summarize(watch.nodes.store.list(), watch.pods.store.list(), workloads)


def status_controller(env: Env) -> ClusterStatusController:
    found = [c for c in env.manager.controllers if isinstance(c, ClusterStatusController)]
    assert found
    return found[0]


async def test_an_idle_member_is_neither_listed_nor_discovered_again(env: Env, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    await eventually(lambda: _has_summary(env, "member1"))
    ctrl = status_controller(env)
    watch = ctrl.summaries["member1"]
    computed = watch.computed
    discoveries = 0
    real = cluster_status.discover_api_enablements

    async def counting(*args: object, **kw: object) -> object:
        nonlocal discoveries
        discoveries += 1
        return await real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(cluster_status, "discover_api_enablements", counting)
    clients = 0
    client_for = ctrl.ctx.members.client_for

    async def counting_clients(cluster: dict[str, Any]) -> Client:
        nonlocal clients
        clients += 1
        return await client_for(cluster)

    monkeypatch.setattr(ctrl.ctx.members, "client_for", counting_clients)
    rv = (await env.client.get(CLUSTERS, "member1"))["metadata"]["resourceVersion"]
    await asyncio.sleep(FREQUENCY * 8)  # 8 probes: nothing changed in the member, discovery is not due (10 s)
    assert watch.computed == computed
    assert discoveries == 0
    assert clients == 0  # the Secret is watched: the client of the last sync is kept
    assert ctrl.summaries["member1"] is watch  # the same watches all along
    assert (await env.client.get(CLUSTERS, "member1"))["metadata"]["resourceVersion"] == rv

    async with env.member_client("member1") as member:  # a change reaches the summary through the watch
        await member.create(DEPLOYMENTS, deployment("api", 2, "1"))

        async def allocated() -> bool:
            summary = (await env.status("member1")).get("resourceSummary") or {}
            return (summary.get("allocated") or {}).get("cpu") == "2"

        await eventually(allocated)
    assert watch.computed > computed
    assert watch.workloads  # no Pod in the member: measured by its workloads
    assert_totals_match_the_caches(watch)


async def _has_summary(env: Env, name: str) -> bool:
    return "resourceSummary" in await env.status(name)


async def test_aggregated_discovery_matches_the_legacy_one_and_is_conditional(env: Env) -> None:
    async with env.member_client("member1") as member:
        cache = DiscoveryCache()
        enablements, error = await discover_api_enablements(member, cache)
        assert error is None
        legacy, legacy_error = await cluster_status._legacy_api_enablements(member)
        assert legacy_error is None
        assert enablements == legacy  # the same APIEnablements from two requests instead of one per group
        assert set(cache.etags) == {"/api", "/apis"}
        first = cache.lists["/apis"]
        again, _ = await discover_api_enablements(member, cache)
        assert again == enablements
        assert cache.lists["/apis"] is first  # 304 Not Modified: the document was not sent again

        # a CRD installed in the member changes the document (and its ETag)
        from flotilla.member.flink_crd import flink_deployment_crd

        await member.create(CRDS, flink_deployment_crd())

        async def served() -> list[dict[str, Any]] | None:
            found, _ = await discover_api_enablements(member, cache)
            return found if any(e["groupVersion"] == "flink.apache.org/v1beta1" for e in found) else None

        found = await eventually(served)
        assert found == (await cluster_status._legacy_api_enablements(member))[0]
