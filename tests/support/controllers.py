"""Set-up for the controllers' integration tests: an in-process control plane, simulated members registered as
Push clusters, Clusters without a member whose status the test writes, a FlinkDeployment binding as the scheduler
leaves it, and polling.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from flotilla.api.resources import CLUSTERS, RESOURCE_BINDINGS
from flotilla.apiserver.inprocess import in_process_client
from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.cli.cluster_commands import inspect_member, join_cluster, join_spec_from_credentials
from flotilla.client import Client, Resource
from flotilla.client.kubeconfig import load_kubeconfig
from flotilla.kube.resources import EVENTS, NAMESPACES, SECRETS
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberConfig
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions

T = TypeVar("T")
P = TypeVar("P", bound="ControlPlane")

CLUSTER_NAMESPACE = "karmada-cluster"  # where the clusters' Secrets are
STAMP = "2024-01-01T00:00:00Z"


@dataclass(frozen=True)
class Eventually:
    """``await eventually(check)`` polls ``check`` until it returns something truthy and returns that; an exception
    of a type in ``retry_on`` counts as "not yet" (any other fails at once). Fails after ``timeout`` seconds."""

    timeout: float = 10.0
    interval: float = 0.05
    retry_on: tuple[type[Exception], ...] = (AssertionError,)

    async def __call__(self, check: Callable[[], Awaitable[T]], timeout: float | None = None,
                       what: str = "condition", interval: float | None = None) -> T:
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = await check()
            except self.retry_on as e:
                last = e
            else:
                if last:
                    return last
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
            await asyncio.sleep(self.interval if interval is None else interval)


async def get_or_none(client: Client, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
    return await client.get_or_none(res, name, namespace)


async def events_by_reason(client: Client, reason: str) -> list[dict[str, Any]]:
    """The Events with this reason, in every namespace."""
    found = await client.list(EVENTS, None)
    return [e for e in found.get("items") or [] if e.get("reason") == reason]


# ----------------------------------------------------------------------------------------------- processes in-process


@contextlib.asynccontextmanager
async def control_plane(tmp_path: Path, **config: Any) -> AsyncIterator[tuple[ApiServer, Client]]:
    """An API server with memory storage under ``tmp_path/cp`` and an in-process client of it."""
    server = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                             **config)).start()
    cp = in_process_client(server.storage)
    try:
        yield server, cp
    finally:
        await cp.close()
        await server.stop()


@contextlib.asynccontextmanager
async def simulated_members(tmp_path: Path, names: Sequence[str]) -> AsyncIterator[tuple[MemberGroup, dict[str, Client]]]:
    """Simulated members under ``tmp_path/members`` (ready delay 0.2 s) and a client of each."""
    group = await MemberGroup([MemberConfig(name=n, data_dir=tmp_path / "members", ready_delay=0.2) for n in names],
                              write_admin_files=False).start()
    clients = {n: Client.from_kubeconfig(group.members[n].kubeconfig_path) for n in names}
    try:
        yield group, clients
    finally:
        for c in clients.values():
            await c.close()
        await group.stop()


async def register_push_clusters(cp: Client, group: MemberGroup, names: Sequence[str], *,
                                 name_labels: bool = True) -> None:
    """What ``flotilla join`` and the cluster controller leave for each member, written directly: its Secret (the
    admin token) in karmada-cluster, its Cluster (Push, the member's URL) and its execution namespace."""
    await cp.create(NAMESPACES, {"metadata": {"name": CLUSTER_NAMESPACE}})
    for name in names:
        m = group.members[name]
        await cp.create(NAMESPACES, {"metadata": {"name": f"karmada-es-{name}"}})
        token = m.server.admin_token if m.server is not None else None
        await cp.create(SECRETS, {"metadata": {"name": name, "namespace": CLUSTER_NAMESPACE},
                                  "data": {"token": base64.b64encode((token or "").encode()).decode()}})
        await cp.create(CLUSTERS, {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                                   "metadata": {"name": name, **({"labels": {"name": name}} if name_labels else {})},
                                   "spec": {"syncMode": "Push", "apiEndpoint": m.url,
                                            "secretRef": {"namespace": CLUSTER_NAMESPACE, "name": name}}})


@dataclass
class MembersPlane:
    """A control plane whose Push clusters are simulated members (their Secrets and Clusters written directly)."""

    server: ApiServer
    cp: Client
    group: MemberGroup
    members: dict[str, Client]


@contextlib.asynccontextmanager
async def plane_with_members(tmp_path: Path, names: Sequence[str], *, name_labels: bool = True,
                             **config: Any) -> AsyncIterator[MembersPlane]:
    """``control_plane`` (with ``config``), ``simulated_members`` and ``register_push_clusters`` of them; the
    Clusters have no status yet."""
    async with control_plane(tmp_path, **config) as (server, cp), simulated_members(tmp_path, names) as (group, members):
        await register_push_clusters(cp, group, names, name_labels=name_labels)
        yield MembersPlane(server, cp, group, members)


async def set_ready(cp: Client, cluster: str, status: str, *, reason: str = "Test", message: str = "",
                    stamp: str = STAMP) -> None:
    """Write the Cluster's Ready condition (the only condition), as the cluster-status controller would."""
    condition = {"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": stamp}
    await cp.patch(CLUSTERS, cluster, {"status": {"conditions": [condition]}}, subresource="status")


async def join_in_process(cp: Client, name: str, member_kubeconfig: Path) -> None:
    """``flotilla join`` in this process: inspect the member, then create its Secret and Cluster."""
    creds = load_kubeconfig(member_kubeconfig)
    async with Client.from_credentials(creds, request_timeout=5, read_retries=0) as member:
        _, cluster_id, _ = await inspect_member(member, name)
    await join_cluster(cp, join_spec_from_credentials(name, creds, cluster_id=cluster_id))


@dataclass
class ClusterControllers:
    """The cluster and cluster-status controllers, over HTTP, on a control plane with simulated members."""

    server: ApiServer
    members: MemberGroup
    client: Client
    manager: ControllerManager


@contextlib.asynccontextmanager
async def cluster_controllers(tmp_path: Path, members: list[MemberConfig],
                              options: ControllerOptions) -> AsyncIterator[ClusterControllers]:
    """A control plane (no compaction) under ``tmp_path/cp``, the ``members`` started (not joined), and the cluster
    and cluster-status controllers running with ``options`` through a client of the server's kubeconfig."""
    server = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                             compaction_interval=0)).start()
    group = MemberGroup(members, write_admin_files=False)
    try:
        await group.start()
        assert server.kubeconfig_path is not None
        client = Client.from_kubeconfig(server.kubeconfig_path)
        manager = ControllerManager(client, options, controllers=["cluster", "cluster-status"])
        await manager.start()
        try:
            yield ClusterControllers(server, group, client, manager)
        finally:
            await manager.stop()
            await client.close()
    finally:
        await group.stop()
        await server.stop()


# ----------------------------------------------------------------------------------------------- written clusters


@dataclass
class ControlPlane:
    """A control plane with Clusters that have no member behind them (the test writes their status), and the
    controller managers a test starts (stopped at the end)."""

    server: ApiServer
    client: Client
    managers: list[ControllerManager] = field(default_factory=list)

    async def cluster(self, name: str, labels: dict[str, str] | None = None, ready: str = "True",
                      taints: list[dict[str, Any]] | None = None) -> None:
        body: dict[str, Any] = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                                "metadata": {"name": name, **({"labels": labels} if labels is not None else {})},
                                "spec": {"syncMode": "Push", "apiEndpoint": f"https://{name}.example:6443"}}
        if taints:
            body["spec"]["taints"] = taints
        await self.client.create(CLUSTERS, body)
        await self.set_ready(name, ready)

    async def set_ready(self, name: str, status: str) -> None:
        await set_ready(self.client, name, status)


@contextlib.asynccontextmanager
async def plane_with_clusters(tmp_path: Path, cls: type[P], *clusters: str) -> AsyncIterator[P]:
    """A ``cls`` on a fresh control plane (no compaction) with these Ready clusters."""
    async with control_plane(tmp_path, compaction_interval=0) as (server, client):
        p = cls(server, client)
        try:
            for name in clusters:
                await p.cluster(name)
            yield p
        finally:
            for m in p.managers:
                await m.stop()


FLINK_BINDING = "flink-job-flinkdeployment"
FLINK_JOB_ALIAS = "flink.apache.org/job-id"


async def create_flink_binding(client: Client, status: dict[str, Any], *, namespace: str = "default",
                               tolerations: list[dict[str, Any]] | None = None,
                               rules: bool = True) -> dict[str, Any]:
    """A ResourceBinding of the FlinkDeployment ``flink-job`` as the scheduler leaves it: on m1 (one of m1/m2, the
    applied-placement annotation), purge mode Directly with the job id preserved (``rules``), and ``status`` as
    m1's reflected status in ``aggregatedStatus`` (Healthy). Returns the binding after the status patch."""
    placement: dict[str, Any] = {"clusterAffinity": {"clusterNames": ["m1", "m2"]},
                                 "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]}
    if tolerations:
        placement["clusterTolerations"] = tolerations
    cluster_failover: dict[str, Any] = {"purgeMode": "Directly"}
    if rules:
        cluster_failover["statePreservation"] = {"rules": [{"aliasLabelName": FLINK_JOB_ALIAS,
                                                            "jsonPath": "{ .jobStatus.jobId }"}]}
    await client.create(RESOURCE_BINDINGS, {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": FLINK_BINDING, "namespace": namespace,
                     "annotations": {"policy.karmada.io/applied-placement": json.dumps(placement)}},
        "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                              "namespace": namespace, "name": "flink-job", "uid": "0f1e2d3c"},
                 "replicas": 1, "clusters": [{"name": "m1", "replicas": 1}], "placement": placement,
                 "failover": {"cluster": cluster_failover}},
    })
    item = {"clusterName": "m1", "applied": True, "health": "Healthy", "status": status}
    return dict(await client.patch(RESOURCE_BINDINGS, FLINK_BINDING, {"status": {"aggregatedStatus": [item]}},
                                   namespace=namespace, subresource="status"))
