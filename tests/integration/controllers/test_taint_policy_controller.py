"""The ClusterTaintPolicy controller on a real control plane (D1, on by default; D13, ClusterTaintPolicy hygiene).

Two set-ups: Clusters created directly whose status the test writes, with only the taint-policy controller
running; and a simulated member joined for real, with the cluster and cluster-status controllers probing it
(short intervals), so the Ready condition comes from an actual outage.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.api.resources import CLUSTER_TAINT_POLICIES, CLUSTERS
from flotilla.apiserver.inprocess import in_process_client
from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.client import ApiException, Client
from flotilla.kube.resources import EVENTS
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberConfig
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import (
    STAMP,
    ControlPlane,
    Eventually,
    get_or_none,
    join_in_process,
    plane_with_clusters,
)

NOT_READY_NOEXEC = "cluster.karmada.io/not-ready:NoExecute"
NOT_READY_NOSCHED = "cluster.karmada.io/not-ready:NoSchedule"


def failover_policy(name: str = "not-ready", target: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "addOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}],
        "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
        "taints": [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}],
    }
    if target is not None:
        spec["targetClusters"] = target
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
            "metadata": {"name": name}, "spec": spec}


def taint_keys(cluster: dict[str, Any] | None) -> list[str]:
    return [f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
            for t in ((cluster or {}).get("spec") or {}).get("taints") or []]


eventually = Eventually(interval=0.03, retry_on=())


@dataclass
class Plane(ControlPlane):
    async def manager(self, controllers: list[str], options: ControllerOptions | None = None) -> ControllerManager:
        m = await ControllerManager(self.client, options, controllers=controllers).start()
        self.managers.append(m)
        return m

    async def get(self, name: str) -> dict[str, Any] | None:
        return await get_or_none(self.client, CLUSTERS, name, None)

    async def taints_become(self, name: str, keys: list[str]) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            c = await self.get(name)
            return c if taint_keys(c) == keys else None

        result: dict[str, Any] = await eventually(check)
        return result

    async def stays(self, name: str, keys: list[str], seconds: float = 0.3) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert taint_keys(await self.get(name)) == keys
            await asyncio.sleep(0.03)

    async def events(self, name: str, reason: str = "TaintClusterSucceed") -> list[str]:
        items = (await self.client.list(EVENTS, "default")).get("items") or []
        return [e["message"] for e in items
                if e["involvedObject"].get("name") == name and e["reason"] == reason]


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    async with plane_with_clusters(tmp_path, Plane) as p:
        yield p


# ---------------------------------------------------------------------------------------------- written status


async def test_not_ready_taint_follows_the_ready_condition(plane: Plane) -> None:
    await plane.manager(["taint-policy"])
    user = {"key": "dedicated", "value": "flink", "effect": "NoSchedule"}
    await plane.cluster("m1", taints=[user])
    await plane.client.create(CLUSTER_TAINT_POLICIES, failover_policy())
    await plane.stays("m1", ["dedicated=flink:NoSchedule"])  # Ready: nothing to add

    await plane.set_ready("m1", "False")
    cluster = await plane.taints_become("m1", ["dedicated=flink:NoSchedule", NOT_READY_NOEXEC])
    assert cluster["spec"]["taints"][0] == user
    assert cluster["spec"]["taints"][1]["timeAdded"].endswith("Z")
    added = cluster["spec"]["taints"][1]

    await plane.set_ready("m1", "Unknown")  # still In [False, Unknown]: the taint (and its time) stays
    await plane.stays("m1", ["dedicated=flink:NoSchedule", NOT_READY_NOEXEC])
    again = await plane.get("m1")
    assert again is not None and again["spec"]["taints"][1] == added

    await plane.set_ready("m1", "True")
    await plane.taints_become("m1", ["dedicated=flink:NoSchedule"])

    async def evented() -> list[str] | None:
        messages = await plane.events("m1")
        return messages if any("removed taints" in m for m in messages) else None

    messages = await eventually(evented)
    assert any(m.startswith("ClusterTaintPolicy(not-ready) added taints(cluster.karmada.io/not-ready:NoExecute)")
               for m in messages)
    assert any(m.startswith("ClusterTaintPolicy(not-ready) removed taints(cluster.karmada.io/not-ready:NoExecute)")
               and m.endswith("cluster now has taints(dedicated=flink:NoSchedule).") for m in messages)


async def test_policy_created_after_the_outage_taints_matching_clusters(plane: Plane) -> None:
    await plane.manager(["taint-policy"])
    await plane.cluster("m1", ready="False")
    await plane.cluster("m2", ready="False")
    await plane.cluster("m3", ready="True")
    await plane.client.create(CLUSTER_TAINT_POLICIES, failover_policy(target={"exclude": ["m2"]}))
    await plane.taints_become("m1", [NOT_READY_NOEXEC])
    await plane.stays("m2", [])
    assert taint_keys(await plane.get("m3")) == []

    # a spec change re-evaluates the clusters it now selects
    policy = await plane.client.get(CLUSTER_TAINT_POLICIES, "not-ready")
    policy["spec"].pop("targetClusters")
    await plane.client.update(CLUSTER_TAINT_POLICIES, policy)
    await plane.taints_become("m2", [NOT_READY_NOEXEC])

    # deleting the policy removes nothing, and nothing is removed later either
    await plane.client.delete(CLUSTER_TAINT_POLICIES, "not-ready")
    await plane.set_ready("m1", "True")
    await plane.stays("m1", [NOT_READY_NOEXEC])


async def test_d13_label_change_reevaluates(plane: Plane) -> None:
    await plane.manager(["taint-policy"])
    await plane.cluster("m1", {"failover": "off"}, ready="False")
    await plane.client.create(CLUSTER_TAINT_POLICIES,
                              failover_policy(target={"labelSelector": {"matchLabels": {"failover": "on"}}}))
    await plane.stays("m1", [])

    # only the labels change (Ready stays False): the cluster is targeted now and gets the taint
    await plane.client.patch(CLUSTERS, "m1", {"metadata": {"labels": {"failover": "on"}}})
    await plane.taints_become("m1", [NOT_READY_NOEXEC])

    # untargeted again: it keeps the taint, even once Ready (the policy no longer applies to it)
    await plane.client.patch(CLUSTERS, "m1", {"metadata": {"labels": {"failover": "off"}}})
    await plane.set_ready("m1", "True")
    await plane.stays("m1", [NOT_READY_NOEXEC])
    # targeted again while Ready: the policy removes its taint
    await plane.client.patch(CLUSTERS, "m1", {"metadata": {"labels": {"failover": "on"}}})
    await plane.taints_become("m1", [])


async def test_d13_policy_removes_only_its_own_taints(plane: Plane) -> None:
    await plane.manager(["taint-policy"])
    policy = failover_policy()
    policy["spec"]["taints"] = [{"key": "example.com/degraded", "value": "network", "effect": "NoExecute"}]
    await plane.client.create(CLUSTER_TAINT_POLICIES, policy)
    someone_elses = {"key": "example.com/degraded", "value": "disk", "effect": "NoExecute", "timeAdded": STAMP}
    await plane.cluster("m1", ready="False", taints=[someone_elses])
    await plane.stays("m1", ["example.com/degraded=disk:NoExecute"])  # same key and effect: not duplicated
    await plane.set_ready("m1", "True")
    await plane.stays("m1", ["example.com/degraded=disk:NoExecute"])  # another value: not the policy's


async def test_gate_off_does_nothing(plane: Plane) -> None:
    options = ControllerOptions()
    options.set_gates("Failover=false")
    await plane.manager(["taint-policy"], options)
    await plane.client.create(CLUSTER_TAINT_POLICIES, failover_policy())
    await plane.cluster("m1", ready="False")
    await plane.stays("m1", [])


class RacingClient:
    """The real client, except that the first taint patch of a Cluster is preceded by somebody else's taint
    change, so the controller's patch meets a newer resourceVersion (409)."""

    def __init__(self, inner: Client) -> None:
        self.inner = inner
        self.raced = 0
        self.conflicts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def patch(self, res: Any, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        if res == CLUSTERS and "taints" in (patch.get("spec") or {}) and not self.raced:
            self.raced += 1
            current = (await self.inner.get(CLUSTERS, name))["spec"].get("taints") or []
            await self.inner.patch(CLUSTERS, name, {"spec": {"taints": [
                *current, {"key": "user", "effect": "NoSchedule"}]}})
        try:
            return await self.inner.patch(res, name, patch, **kw)
        except ApiException as e:
            self.conflicts += e.status == 409
            raise


async def test_concurrent_taint_change_is_not_lost(plane: Plane) -> None:
    """The patch carries the resourceVersion it decided on: a taint added meanwhile makes it fail with 409, and
    the controller decides again on the fresh Cluster, so the other taint survives (Karmada #7348)."""
    racing = RacingClient(plane.client)
    m = await ControllerManager(racing, controllers=["taint-policy"]).start()  # type: ignore[arg-type]
    plane.managers.append(m)
    await plane.client.create(CLUSTER_TAINT_POLICIES, failover_policy())
    await plane.cluster("m1", ready="False")
    cluster = await plane.taints_become("m1", ["user:NoSchedule", NOT_READY_NOEXEC])
    assert racing.raced == 1 and racing.conflicts == 1
    assert cluster["spec"]["taints"][-1]["timeAdded"]


class RefusingClient(RacingClient):
    """Every taint patch of a Cluster is refused as invalid (what a Cluster's validation would answer)."""

    async def patch(self, res: Any, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        if res == CLUSTERS and "taints" in (patch.get("spec") or {}):
            raise ApiException(422, "Invalid", "Cluster.cluster.karmada.io \"m1\" is invalid: spec.taints[0]")
        return await self.inner.patch(res, name, patch, **kw)


async def test_refused_patch_is_evented_and_retried(plane: Plane) -> None:
    refusing = RefusingClient(plane.client)
    m = await ControllerManager(refusing, controllers=["taint-policy"]).start()  # type: ignore[arg-type]
    plane.managers.append(m)
    await plane.client.create(CLUSTER_TAINT_POLICIES, failover_policy())
    await plane.cluster("m1", ready="False")

    async def failed() -> list[str] | None:
        return await plane.events("m1", "TaintClusterFailed") or None

    messages = await eventually(failed)
    assert messages[0].startswith("Update Cluster(m1) with taints(cluster.karmada.io/not-ready:NoExecute) failed:")
    assert "is invalid" in messages[0]
    assert taint_keys(await plane.get("m1")) == []


# ---------------------------------------------------------------------------------------------- real member

FREQUENCY = 0.1
THRESHOLD = 0.3


async def test_member_outage_adds_and_recovery_removes_the_no_execute_taint(tmp_path: Path) -> None:
    server = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                             compaction_interval=0)).start()
    members = MemberGroup([MemberConfig(name="member1", data_dir=tmp_path / "members", simulators=[])],
                          write_admin_files=False)
    client = in_process_client(server.storage)
    manager: ControllerManager | None = None
    plane = Plane(server, client)
    try:
        await members.start()
        options = ControllerOptions(cluster_status_update_frequency=FREQUENCY,
                                    cluster_success_threshold=THRESHOLD, cluster_failure_threshold=THRESHOLD)
        manager = await ControllerManager(client, options,
                                          controllers=["cluster", "cluster-status", "taint-policy"]).start()
        await client.create(CLUSTER_TAINT_POLICIES, failover_policy())
        await join_in_process(client, "member1", members.members["member1"].kubeconfig_path)

        async def ready() -> bool:
            c = await plane.get("member1")
            conditions = ((c or {}).get("status") or {}).get("conditions") or []
            return any(x["type"] == "Ready" and x["status"] == "True" for x in conditions) and not taint_keys(c)

        await eventually(ready)
        await members.members["member1"].set_fault("down")

        async def both_taints() -> dict[str, Any] | None:
            c = await plane.get("member1")
            return c if sorted(taint_keys(c)) == [NOT_READY_NOEXEC, NOT_READY_NOSCHED] else None

        cluster = await eventually(both_taints)
        noexec = next(t for t in cluster["spec"]["taints"] if t["effect"] == "NoExecute")
        assert noexec["timeAdded"].endswith("Z")

        await members.members["member1"].set_fault("recover")
        await plane.taints_become("member1", [])  # the policy's taint and the cluster controller's both go
    finally:
        if manager is not None:
            await manager.stop()
        await client.close()
        await members.stop()
        await server.stop()
