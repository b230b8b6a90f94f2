"""Simulated Nodes: KWOK's ``node-initialize`` stage for a simulated member.

A member started with ``MemberConfig.nodes = N`` serves N Nodes named ``<member>-node-0`` ..
``<member>-node-<N-1>``, each with ``node_cpu`` / ``node_memory`` / ``node_pods`` (and 100Gi of ephemeral
storage) as capacity and allocatable, so that the cluster status controller can publish a real
``resourceSummary`` and the scheduler can estimate available replicas. Their status is what a kubelet posts
once it is up: conditions Ready=True (KubeletReady) and MemoryPressure, DiskPressure, PIDPressure,
NetworkUnavailable=False, an InternalIP and a Hostname address, ``daemonEndpoints``, ``nodeInfo`` with all ten
string fields the official Python client requires, and ``phase: Running``. There is no heartbeat: the times
are set when a condition changes.

* On start, the configured nodes are created (or, when they exist already, their status brought back to the
  configuration); simulated nodes of this member beyond N (a smaller ``--nodes`` on persistent storage) are
  deleted. Simulated nodes carry the annotation ``sim.flotilla.io/node: simulated``.
* Any Node without a Ready condition (one created with ``kubectl create``: the API server drops the status of
  a new object) is initialized the same way, keeping the capacity and allocatable it may already have.
* Afterwards the simulator leaves nodes alone: a status written by someone else (Ready=False to simulate a
  failed node, other capacities) stays until the member restarts.
"""

from __future__ import annotations

import ipaddress
import logging
import uuid
import zlib
from collections.abc import Mapping
from typing import Any

from flotilla import __version__
from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.objects import now_rfc3339
from flotilla.apiserver.resource_types import ResourceType
from flotilla.member.simulator import ResourceSimulator, register_simulator

log = logging.getLogger(__name__)

__all__ = [
    "ANNOTATION_NODE",
    "NODE_EPHEMERAL_STORAGE",
    "NodeSimulator",
    "kubelet_version",
    "node_name",
    "node_object",
    "node_status",
]

ANNOTATION_NODE = "sim.flotilla.io/node"
SIMULATED = "simulated"
NODE_EPHEMERAL_STORAGE = "100Gi"
_FIRST_IP = ipaddress.IPv4Address("10.0.0.10")  # simulated node i gets 10.0.0.10 + i
_OTHER_IPS = ipaddress.IPv4Network("10.128.0.0/16")  # nodes created by hand: an address from a hash of the name
_UUID_NAMESPACE = uuid.UUID("6f1c3b0e-5d0a-4a59-9a4e-5e8f3f0f1a7d")


def kubelet_version() -> str:
    """The Kubernetes version the member's API server reports (``/version`` gitVersion)."""
    from flotilla.apiserver.app import ApiHandler

    return str(ApiHandler._version()["gitVersion"])


def node_name(member: str, index: int) -> str:
    return f"{member}-node-{index}"


def node_object(member: str, index: int) -> dict[str, Any]:
    """A simulated Node as created (the status is written afterwards, as a kubelet does)."""
    name = node_name(member, index)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
            },
            "annotations": {ANNOTATION_NODE: SIMULATED, "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"providerID": f"flotilla://{member}/{name}"},
    }


def _simulated_index(member: str, node: Mapping[str, Any]) -> int | None:
    """``i`` of ``<member>-node-<i>`` for this member's simulated nodes, else None."""
    md = node.get("metadata") or {}
    if (md.get("annotations") or {}).get(ANNOTATION_NODE) != SIMULATED:
        return None
    prefix = f"{member}-node-"
    name = str(md.get("name") or "")
    suffix = name[len(prefix):] if name.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def _internal_ip(name: str, index: int | None) -> str:
    if index is not None:
        return str(_FIRST_IP + index)
    offset = zlib.crc32(name.encode()) % (_OTHER_IPS.num_addresses - 2) + 1
    return str(_OTHER_IPS.network_address + offset)


def _condition(previous: Mapping[str, Any] | None, type_: str, status: str, reason: str, message: str,
               now: str) -> dict[str, Any]:
    """A node condition; its times stay those of ``previous`` while the status does not change."""
    stamp = heartbeat = now
    if previous is not None and previous.get("status") == status:
        stamp = str(previous.get("lastTransitionTime") or now)
        heartbeat = str(previous.get("lastHeartbeatTime") or now)
    return {"type": type_, "status": status, "lastHeartbeatTime": heartbeat, "lastTransitionTime": stamp,
            "reason": reason, "message": message}


_CONDITIONS = (
    ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def node_status(node: Mapping[str, Any], resources: Mapping[str, str], *, index: int | None = None,
                now: str | None = None, keep_resources: bool = False) -> dict[str, Any]:
    """The status a freshly started kubelet posts for ``node``.

    ``resources`` become capacity and allocatable (unless ``keep_resources`` and the node has them already).
    Condition times of the current status are kept while their status is unchanged, so computing the status
    of an initialized node again gives the same dict (no write).
    """
    now = now or now_rfc3339()
    md = node.get("metadata") or {}
    name = str(md.get("name") or "")
    current = node.get("status") if isinstance(node.get("status"), Mapping) else {}
    by_type = {c.get("type"): c for c in current.get("conditions") or [] if isinstance(c, Mapping)}
    capacity = dict(resources)
    allocatable = dict(resources)
    if keep_resources:
        own_capacity, own_allocatable = current.get("capacity"), current.get("allocatable")
        if isinstance(own_capacity, Mapping) and own_capacity:
            capacity, allocatable = dict(own_capacity), dict(own_capacity)
        if isinstance(own_allocatable, Mapping) and own_allocatable:
            allocatable = dict(own_allocatable)
    ident = f"{md.get('uid') or ''}/{name}"
    version = kubelet_version()
    return {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": [_condition(by_type.get(t), t, s, r, m, now) for t, s, r, m in _CONDITIONS],
        "addresses": [{"type": "InternalIP", "address": _internal_ip(name, index)},
                      {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": uuid.uuid5(_UUID_NAMESPACE, f"machine/{name}").hex,
            "systemUUID": str(uuid.uuid5(_UUID_NAMESPACE, f"system/{name}")),
            "bootID": str(uuid.uuid5(_UUID_NAMESPACE, f"boot/{ident}")),
            "kernelVersion": f"{__version__}-flotilla",
            "osImage": "Flotilla simulated node",
            "containerRuntimeVersion": f"flotilla://{__version__}",
            "kubeletVersion": version,
            "kubeProxyVersion": version,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "phase": "Running",
    }


def _initialized(node: Mapping[str, Any]) -> bool:
    status = node.get("status") if isinstance(node.get("status"), Mapping) else {}
    return any(isinstance(c, Mapping) and c.get("type") == "Ready" for c in status.get("conditions") or [])


class NodeSimulator(ResourceSimulator):
    """Creates the member's simulated nodes and initializes every Node without a Ready condition."""

    name = "node"
    group, version, plural = "", "v1", "nodes"
    workers = 2

    @property
    def resources(self) -> dict[str, str]:
        cfg = self.config
        return {"cpu": cfg.node_cpu, "memory": cfg.node_memory, "pods": cfg.node_pods,
                "ephemeral-storage": NODE_EPHEMERAL_STORAGE}

    async def start(self, member: Any) -> None:
        await super().start(member)
        rt = self.member.storage.types.lookup(self.group, self.version, self.plural)
        if rt is None:  # pragma: no cover - every Flotilla API server serves Nodes
            log.warning("member %s does not serve Nodes: no simulated nodes", self.member.name)
            return
        await self._ensure_nodes(rt)

    async def _ensure_nodes(self, rt: ResourceType) -> None:
        storage = self.member.storage
        member = self.member.name
        count = max(self.config.nodes, 0)
        for index in range(count):
            try:
                node = await storage.create(rt, None, node_object(member, index))
            except ApiError as e:
                if e.code != 409:
                    raise
                node = await storage.get(rt, None, node_name(member, index))
            await self.write_status(rt, node, lambda fresh, i=index: node_status(fresh, self.resources, index=i))
        listing = await storage.list(rt, None)
        for node in listing.get("items") or []:
            index = _simulated_index(member, node)
            if index is not None and index >= count:
                try:
                    await storage.delete(rt, None, node["metadata"]["name"])
                except ApiError as e:
                    if e.code != 404:
                        raise

    async def reconcile(self, obj: dict[str, Any]) -> float | None:
        if _initialized(obj) or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        assert self.rt is not None
        index = _simulated_index(self.member.name, obj)

        def compute(fresh: dict[str, Any]) -> dict[str, Any] | None:
            if _initialized(fresh):
                return None  # initialized in the meantime (by start, or by someone else)
            return node_status(fresh, self.resources, index=index, keep_resources=index is None)

        await self.write_status(self.rt, obj, compute)
        return None


register_simulator("node", NodeSimulator)
