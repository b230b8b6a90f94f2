"""``flotilla agent`` against a real control plane (HTTP on 127.0.0.1) and a simulated member.

The controller-manager runs the whole pipeline but has no way to reach the Pull member: its Cluster has neither an
``apiEndpoint`` nor a ``secretRef``. Everything that reaches the member is the agent's: registration, the Lease,
the cluster status, applying the Works and reporting their status. Restarts of the agent (with its Cluster judged
not Ready meanwhile, and with the control plane unreachable when it starts) must leave the member's objects alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flotilla.agent.runtime import Agent, AgentConfig
from flotilla.api.resources import CLUSTERS, RESOURCE_BINDINGS
from flotilla.apiserver.server import ApiServer
from flotilla.client import Client, Resource
from flotilla.client.kubeconfig import load_kubeconfig
from flotilla.failover.fencing import fence_patch, is_fenced
from flotilla.kube.resources import DEPLOYMENTS, EVENTS, LEASES, NAMESPACES
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.runner import MemberGroup
from flotilla.propagation.works import WORKS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, control_plane, set_ready, simulated_members

CLUSTER = "pull1"
ES = f"karmada-es-{CLUSTER}"
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
FLINK = Resource("flink.apache.org", "v1beta1", "flinkdeployments", "FlinkDeployment", True)
PPS = Resource("policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy", True)
CONTROLLERS = ["cluster", "cluster-status", "detector", "scheduler", "binding", "execution", "work-status",
               "binding-status"]
WORKLOADS = ((DEPLOYMENTS, "web", "apps/v1", "Deployment"), (STATEFULSETS, "db", "apps/v1", "StatefulSet"),
             (FLINK, "wordcount", "flink.apache.org/v1beta1", "FlinkDeployment"))

eventually = Eventually(timeout=60.0, interval=0.1)


def _labels(name: str) -> dict[str, Any]:
    return {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": name, "image": "nginx:1.27"}]}}}


def templates() -> list[tuple[Resource, dict[str, Any]]]:
    return [
        (DEPLOYMENTS, {"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 2, **_labels("web")}}),
        (STATEFULSETS, {"apiVersion": "apps/v1", "kind": "StatefulSet",
                        "metadata": {"name": "db", "namespace": "default"},
                        "spec": {"replicas": 1, "serviceName": "db", **_labels("db")}}),
        (FLINK, {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                 "metadata": {"name": "wordcount", "namespace": "default"},
                 "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                          "jobManager": {"resource": {"memory": "1024m", "cpu": 1}},
                          "taskManager": {"resource": {"memory": "1024m", "cpu": 1}},
                          "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar",
                                  "parallelism": 1, "upgradeMode": "stateless"}}}),
    ]


def policy() -> dict[str, Any]:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "to-pull", "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": a, "kind": k, "name": n} for _, n, a, k in WORKLOADS],
                     "placement": {"clusterAffinity": {"clusterNames": [CLUSTER]}}}}


class Proxy:
    """A TCP forwarder to the API server that can be down (refusing connections) and brought up."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        """Refuse new connections and cut the open ones (watches and kept-alive requests), as a partition does."""
        if self._server is not None:
            self._server.close()
            for w in list(self._writers):
                w.close()
            await self._server.wait_closed()
            self._server = None

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_w))

        async def copy(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            with contextlib.suppress(OSError):
                w.close()

        try:
            await asyncio.gather(copy(reader, up_w), copy(up_r, writer))
        finally:
            self._writers.difference_update((writer, up_w))


@dataclass
class Plane:
    server: ApiServer
    cp: Client
    group: MemberGroup
    member: Client
    kubeconfig: Path
    proxy: Proxy
    agent: Agent | None = None
    task: asyncio.Task[int] | None = None
    stop: asyncio.Event | None = None

    def agent_clients(self) -> tuple[Client, Client]:
        """The agent's own clients: the control plane through the proxy (over HTTP), and its member."""
        creds = load_kubeconfig(self.kubeconfig)
        scheme, _, rest = creds.server.partition("://")
        server = f"{scheme}://127.0.0.1:{self.proxy.port}"
        import dataclasses

        cp = Client.from_credentials(dataclasses.replace(creds, server=server), request_timeout=5)
        member = Client.from_kubeconfig(self.group.members[CLUSTER].kubeconfig_path, request_timeout=5,
                                        read_retries=0)
        return cp, member

    async def start_agent(self) -> Agent:
        cp, member = self.agent_clients()
        cfg = AgentConfig(cluster_name=CLUSTER, cluster_lease_duration=2.0, cluster_lease_renew_interval_fraction=0.25,
                          cluster_status_update_frequency=0.5, sync_timeout=30.0)
        self.agent = Agent(cp, member, cfg, backoff=(0.2, 1.0))
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(self.agent.run(self.stop))
        self._clients = (cp, member)
        return self.agent

    async def kill_agent(self) -> None:
        assert self.stop is not None and self.task is not None
        self.stop.set()
        assert await asyncio.wait_for(self.task, 30) == 0
        for c in self._clients:
            await c.close()


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    async with control_plane(tmp_path) as (server, cp), simulated_members(tmp_path, [CLUSTER]) as (group, members):
        await cp.create(NAMESPACES, {"metadata": {"name": "karmada-cluster"}})
        await cp.create(CRDS, flink_deployment_crd())
        assert server.kubeconfig_path is not None
        proxy = Proxy(server.port)
        await proxy.up()
        manager = await ControllerManager(cp, ControllerOptions(cluster_status_update_frequency=0.5),
                                          controllers=CONTROLLERS).start()
        p = Plane(server, cp, group, members[CLUSTER], server.kubeconfig_path, proxy)
        try:
            yield p
        finally:
            if p.task is not None and not p.task.done():
                await p.kill_agent()
            await manager.stop()
            await proxy.down()


async def cluster_ready(cp: Client) -> dict[str, Any] | None:
    cluster = await cp.get_or_none(CLUSTERS, CLUSTER)
    conditions = ((cluster or {}).get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return cluster if ready and (cluster or {}).get("status", {}).get("kubernetesVersion") else None


async def all_healthy(cp: Client) -> bool:
    for _res, name, _, kind in WORKLOADS:
        rb = await cp.get_or_none(RESOURCE_BINDINGS, f"{name}-{kind.lower()}", "default")
        items = ((rb or {}).get("status") or {}).get("aggregatedStatus") or []
        if not any(i.get("clusterName") == CLUSTER and i.get("health") == "Healthy" for i in items):
            return False
    return True


async def member_uids(member: Client) -> dict[str, str]:
    uids = {}
    for res, name, _, kind in WORKLOADS:
        obj = await member.get_or_none(res, name, "default")
        if obj is not None:
            uids[kind] = obj["metadata"]["uid"]
    return uids


async def propagate(p: Plane) -> dict[str, str]:
    for res, body in templates():
        await p.cp.create(res, body)
    await p.cp.create(PPS, policy())
    await eventually(lambda: all_healthy(p.cp), what="the three workloads Healthy in the Pull member")
    uids = await member_uids(p.member)
    assert set(uids) == {"Deployment", "StatefulSet", "FlinkDeployment"}
    return uids


async def test_agent_registers_its_pull_cluster_and_posts_its_status(plane: Plane) -> None:
    await plane.start_agent()
    cluster = await eventually(lambda: cluster_ready(plane.cp), what="the agent's Cluster Ready with a version")
    assert cluster["spec"]["syncMode"] == "Pull"
    assert "apiEndpoint" not in cluster["spec"] and "secretRef" not in cluster["spec"]  # no way to reach the member
    assert cluster["status"]["kubernetesVersion"]
    gvs = {e["groupVersion"] for e in cluster["status"]["apiEnablements"]}
    assert {"apps/v1", "flink.apache.org/v1beta1"} <= gvs
    assert "karmada.io/cluster-controller" in cluster["metadata"]["finalizers"]  # the cluster controller's


async def test_agent_lease_renew_time_advances(plane: Plane) -> None:
    agent = await plane.start_agent()
    first = await eventually(lambda: plane.cp.get_or_none(LEASES, CLUSTER, "karmada-cluster"), what="the Lease")
    assert first["spec"]["holderIdentity"] == CLUSTER and first["spec"]["leaseDurationSeconds"] == 2

    async def advanced() -> bool:
        now = await plane.cp.get(LEASES, CLUSTER, "karmada-cluster")
        return now["spec"]["renewTime"] > first["spec"]["renewTime"]

    await eventually(advanced, what="the Lease renewed")
    assert agent.renewals >= 2


async def test_agent_applies_works_and_reports_status_the_binding_aggregates_healthy(plane: Plane) -> None:
    await plane.start_agent()
    await eventually(lambda: cluster_ready(plane.cp), what="the Cluster Ready")
    await propagate(plane)
    works = (await plane.cp.list(WORKS, ES)).get("items") or []
    assert len(works) == 3
    for work in works:
        statuses = (work.get("status") or {}).get("manifestStatuses") or []
        assert statuses and statuses[0].get("health") == "Healthy", work["metadata"]["name"]
        assert "karmada.io/execution-controller" in work["metadata"]["finalizers"]
    # the Works were synced by the agent only: the controller-manager's execution controller left them alone
    # (it could not have built a client: no endpoint, no secret - it would have recorded SyncFailed)
    events = (await plane.cp.list(EVENTS, ES)).get("items") or []
    synced = {(e["source"].get("component"), e["reason"]) for e in events if e["involvedObject"]["kind"] == "Work"}
    assert ("flotilla-agent", "SyncSucceed") in synced
    assert not any(component == "flotilla-controller-manager" for component, _ in synced), synced


async def test_d18_agent_restart_after_the_cluster_was_judged_not_ready_keeps_member_objects(plane: Plane) -> None:
    await plane.start_agent()
    await eventually(lambda: cluster_ready(plane.cp), what="the Cluster Ready")
    uids = await propagate(plane)
    await plane.kill_agent()
    # what the control plane's lease monitor does to a silent Pull cluster; on its return the execution
    # controller's recovery purge runs before anything is applied
    await set_ready(plane.cp, CLUSTER, "False", reason="ClusterNotReachable", message="set by the test")
    await plane.start_agent()
    await eventually(lambda: cluster_ready(plane.cp), what="the Cluster Ready again")
    await eventually(lambda: all_healthy(plane.cp), what="the workloads Healthy again")
    await asyncio.sleep(2.0)  # several status periods and purge attempts
    assert await member_uids(plane.member) == uids


async def test_d18_agent_restart_with_the_control_plane_down_at_start_keeps_member_objects(plane: Plane) -> None:
    await plane.start_agent()
    await eventually(lambda: cluster_ready(plane.cp), what="the Cluster Ready")
    uids = await propagate(plane)
    await plane.kill_agent()
    await set_ready(plane.cp, CLUSTER, "False", reason="ClusterNotReachable", message="set by the test")
    await plane.proxy.down()
    agent = await plane.start_agent()
    await asyncio.sleep(2.0)  # the agent backs off against an unreachable control plane
    assert agent.renewals == 0 and agent.manager is None
    assert await member_uids(plane.member) == uids
    await plane.proxy.up()
    await eventually(lambda: cluster_ready(plane.cp), what="the Cluster Ready once the control plane is back")
    await eventually(lambda: all_healthy(plane.cp), what="the workloads Healthy again")
    await asyncio.sleep(2.0)
    assert await member_uids(plane.member) == uids


async def test_controller_manager_leaves_pull_cluster_works_and_status_to_the_agent(plane: Plane) -> None:
    # no agent runs: a Ready Pull cluster with a Work; the controller-manager must not touch either
    await plane.cp.create(CLUSTERS, {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                                     "metadata": {"name": CLUSTER}, "spec": {"syncMode": "Pull"}})
    await set_ready(plane.cp, CLUSTER, "True", reason="ClusterReady", message="set by the test")
    await eventually(lambda: plane.cp.get_or_none(NAMESPACES, ES), what="the execution namespace")
    _, body = templates()[0]
    await plane.cp.create(WORKS, {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
                                  "metadata": {"name": "web", "namespace": ES},
                                  "spec": {"workload": {"manifests": [body]}}})
    await asyncio.sleep(2.0)  # four status periods of the controller-manager
    work = await plane.cp.get(WORKS, "web", ES)
    assert "karmada.io/execution-controller" not in (work["metadata"].get("finalizers") or [])
    assert not (work.get("status") or {}).get("conditions")
    cluster = await plane.cp.get(CLUSTERS, CLUSTER)
    assert [c["reason"] for c in cluster["status"]["conditions"]] == ["ClusterReady"]  # only the test's
    assert "kubernetesVersion" not in cluster["status"]
    assert await plane.member.get_or_none(DEPLOYMENTS, "web", "default") is None


async def test_d17_agent_back_from_a_partition_purges_its_fenced_cluster_at_once(plane: Plane) -> None:
    await plane.start_agent()
    await eventually(lambda: cluster_ready(plane.cp), what="the Cluster Ready")
    await propagate(plane)
    await plane.proxy.down()  # the agent is cut off from the control plane; the member keeps running
    cluster = await plane.cp.get(CLUSTERS, CLUSTER)
    patch = fence_patch(cluster, datetime.now(UTC))
    assert patch is not None
    await plane.cp.patch(CLUSTERS, CLUSTER, patch)
    await plane.cp.delete(DEPLOYMENTS, "web", "default")  # web goes away: its Work is deleted, the agent's to finish

    async def web_work_gone() -> bool:
        works = (await plane.cp.list(WORKS, ES)).get("items") or []
        return not any(w["metadata"]["name"].startswith("web-") for w in works)

    # the cluster is fenced: the controller-manager releases the deleted Work without the member (its agent may
    # never come back), while the member, cut off, still runs the copy
    await eventually(web_work_gone, what="web's Work released on the fenced cluster")
    assert await plane.member.get_or_none(DEPLOYMENTS, "web", "default") is not None
    await plane.proxy.up()
    # back: the agent, whose member answers, purges the stale copy (its Work is gone) at once, still fenced
    await eventually(lambda: _gone(plane.member, DEPLOYMENTS, "web"), timeout=15.0,
                     what="the stale web deleted in the member while its cluster is still fenced")
    assert is_fenced(await plane.cp.get(CLUSTERS, CLUSTER))


async def _gone(member: Client, res: Resource, name: str) -> bool:
    return await member.get_or_none(res, name, "default") is None
