"""D1 on a real control plane: the failover machinery is on by default, each part can be switched off with
Karmada's flag names, and NoExecute taints never appear implicitly.

Clusters ``m1``/``m2`` are created directly and their Ready condition is written by the test (as the
cluster-status controller would); a ResourceBinding for a FlinkDeployment is created as the scheduler leaves it
(on ``m1``, with the applied-placement annotation and a reflected status carrying the job id). A
ClusterTaintPolicy turns ``Ready=False`` into ``cluster.karmada.io/not-ready:NoExecute``. The last test joins a
simulated member for real and takes it down, with no ClusterTaintPolicy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.api.resources import CLUSTER_TAINT_POLICIES, CLUSTERS, RESOURCE_BINDINGS
from flotilla.apiserver.inprocess import in_process_client
from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.cli.controller_manager import build_parser, options_from_args
from flotilla.controllers.graceful_eviction import GracefulEvictionController
from flotilla.controllers.taint_manager import TaintManager
from flotilla.controllers.taint_policy import TaintPolicyController
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberConfig
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import (
    FLINK_BINDING,
    FLINK_JOB_ALIAS,
    STAMP,
    ControlPlane,
    Eventually,
    create_flink_binding,
    join_in_process,
    plane_with_clusters,
)

NS = "default"
RB = FLINK_BINDING
ALIAS = FLINK_JOB_ALIAS
JOB_ID = "c0ffee42"
NOT_READY_NO_EXECUTE = "cluster.karmada.io/not-ready:NoExecute"
NOT_READY_NO_SCHEDULE = "cluster.karmada.io/not-ready:NoSchedule"
FAILOVER_CONTROLLERS = ["taint-policy", "taint-manager", "graceful-eviction"]
QUIET = 0.8  # how long "nothing happens" is watched; the enabled path acts within a few hundred ms


eventually = Eventually(interval=0.03, retry_on=())


def taint_keys(cluster: dict[str, Any] | None) -> list[str]:
    return [f"{t['key']}:{t['effect']}" for t in ((cluster or {}).get("spec") or {}).get("taints") or []]


def karmada_flags(*argv: str) -> ControllerOptions:
    """The options ``flotilla controller-manager`` builds from these command-line flags."""
    return options_from_args(build_parser().parse_args(list(argv)))


NOT_READY_POLICY = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy", "metadata": {"name": "not-ready"},
    "spec": {
        "addOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}],
        "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
        "taints": [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}],
    },
}


@dataclass
class Plane(ControlPlane):
    async def manager(self, options: ControllerOptions, controllers: list[str]) -> ControllerManager:
        m = await ControllerManager(self.client, options, controllers=controllers).start()
        self.managers.append(m)
        return m

    async def get_cluster(self, name: str) -> dict[str, Any]:
        return dict(await self.client.get(CLUSTERS, name))

    async def binding(self) -> None:
        await create_flink_binding(self.client, {"jobStatus": {"jobId": JOB_ID, "state": "RUNNING"},
                                                 "lifecycleState": "STABLE"}, namespace=NS)

    async def get_binding(self) -> dict[str, Any]:
        return dict(await self.client.get(RESOURCE_BINDINGS, RB, NS))

    async def evicted(self) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            spec = (await self.get_binding())["spec"]
            return spec if spec.get("gracefulEvictionTasks") else None

        result: dict[str, Any] = await eventually(check)
        return result

    async def stays_on_m1(self, seconds: float = QUIET) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            spec = (await self.get_binding())["spec"]
            assert [c["name"] for c in spec.get("clusters") or []] == ["m1"]
            assert not spec.get("gracefulEvictionTasks")
            await asyncio.sleep(0.05)


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    # the API server's defaults: allow_no_execute_taint_policy is not set here on purpose
    async with plane_with_clusters(tmp_path, Plane, "m1", "m2") as p:
        yield p


async def outage_of_m1(plane: Plane, options: ControllerOptions) -> ControllerManager:
    """The NoExecute policy (admitted by the API server's defaults), the binding on m1, the failover controllers
    with ``options``, then m1 goes NotReady."""
    await plane.client.create(CLUSTER_TAINT_POLICIES, NOT_READY_POLICY)
    await plane.binding()
    manager = await plane.manager(options, FAILOVER_CONTROLLERS)
    await plane.set_ready("m1", "False")
    return manager


# ---------------------------------------------------------------------------------------------- on by default


async def test_d1_default_options_fail_over_with_preserved_state(plane: Plane) -> None:
    """No flag at all: the NoExecute ClusterTaintPolicy is admitted, applied (Failover), the binding is evicted
    (--enable-no-execute-taint-eviction) with the job id extracted (StatefulFailoverInjection), and the task is
    picked up by the graceful-eviction controller (GracefulEviction)."""
    manager = await outage_of_m1(plane, karmada_flags())
    by_type = {type(c): c for c in manager.controllers}
    assert by_type[TaintPolicyController].enabled and by_type[TaintManager].enabled
    assert by_type[GracefulEvictionController].enabled

    async def tainted() -> bool:
        return NOT_READY_NO_EXECUTE in taint_keys(await plane.get_cluster("m1"))

    await eventually(tainted)
    spec = await plane.evicted()
    assert spec.get("clusters") in (None, [])
    (task,) = spec["gracefulEvictionTasks"]
    assert (task["fromCluster"], task["reason"], task["producer"], task["purgeMode"]) == (
        "m1", "TaintUntolerated", "TaintManager", "Directly")
    assert task["preservedLabelState"] == {ALIAS: JOB_ID}

    async def stamped() -> dict[str, Any] | None:
        tasks = (await plane.get_binding())["spec"].get("gracefulEvictionTasks") or []
        return tasks[0] if tasks and tasks[0].get("creationTimestamp") else None

    await eventually(stamped)


# ---------------------------------------------------------------------------------------------- switched off


async def test_d1_feature_gates_failover_false_switches_off_cluster_failover(plane: Plane) -> None:
    options = karmada_flags("--feature-gates=Failover=false")
    manager = await outage_of_m1(plane, options)
    assert not any(getattr(c, "enabled", True) for c in manager.controllers
                   if isinstance(c, TaintPolicyController | TaintManager))
    await plane.stays_on_m1()
    assert taint_keys(await plane.get_cluster("m1")) == []  # the policy is not applied
    # a NoExecute taint put there by a person does not evict either
    await plane.client.patch(CLUSTERS, "m1", {"spec": {"taints": [
        {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute", "timeAdded": STAMP}]}})
    await plane.stays_on_m1()


async def test_d1_enable_no_execute_taint_eviction_false_taints_but_never_evicts(plane: Plane) -> None:
    await outage_of_m1(plane, karmada_flags("--enable-no-execute-taint-eviction=false"))

    async def tainted() -> bool:
        return NOT_READY_NO_EXECUTE in taint_keys(await plane.get_cluster("m1"))

    await eventually(tainted)  # Failover is on: the policy still taints
    await plane.stays_on_m1()


async def test_d1_feature_gates_stateful_failover_injection_false_evicts_without_state(plane: Plane) -> None:
    await outage_of_m1(plane, karmada_flags("--feature-gates", "StatefulFailoverInjection=false"))
    (task,) = (await plane.evicted())["gracefulEvictionTasks"]
    assert task["fromCluster"] == "m1"
    assert "preservedLabelState" not in task


async def test_d1_feature_gates_graceful_eviction_false_leaves_tasks_alone(plane: Plane) -> None:
    manager = await outage_of_m1(plane, karmada_flags("--feature-gates=GracefulEviction=false"))
    assert not next(c for c in manager.controllers if isinstance(c, GracefulEvictionController)).enabled
    await plane.evicted()
    deadline = time.monotonic() + QUIET
    while time.monotonic() < deadline:
        (task,) = (await plane.get_binding())["spec"]["gracefulEvictionTasks"]
        assert "creationTimestamp" not in task  # nobody assesses the task
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------------------------------------- never implicit


FREQUENCY = 0.2
THRESHOLD = 0.3


async def test_d1_member_going_not_ready_without_a_policy_gets_no_no_execute_taint(tmp_path: Path) -> None:
    """Every controller that could add a taint runs with the defaults, a real member goes down: the cluster
    controller adds only ``not-ready:NoSchedule`` (Karmada removed the implicit NoExecute taint), and the
    binding on it is not evicted."""
    server = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                             compaction_interval=0)).start()
    members = MemberGroup([MemberConfig(name="m1", data_dir=tmp_path / "members", simulators=[])],
                          write_admin_files=False)
    client = in_process_client(server.storage)
    plane = Plane(server, client)
    try:
        await members.start()
        await plane.cluster("m2")
        options = karmada_flags(f"--cluster-status-update-frequency={FREQUENCY}",
                                f"--cluster-success-threshold={THRESHOLD}",
                                f"--cluster-failure-threshold={THRESHOLD}")
        await plane.manager(options, ["cluster", "cluster-status", *FAILOVER_CONTROLLERS])
        await join_in_process(client, "m1", members.members["m1"].kubeconfig_path)

        async def ready() -> bool:
            c = await plane.get_cluster("m1")
            conditions = (c.get("status") or {}).get("conditions") or []
            return any(x["type"] == "Ready" and x["status"] == "True" for x in conditions) and not taint_keys(c)

        await eventually(ready)
        await plane.binding()
        await members.members["m1"].set_fault("down")

        async def not_ready() -> dict[str, Any] | None:
            c = await plane.get_cluster("m1")
            return c if NOT_READY_NO_SCHEDULE in taint_keys(c) else None

        cluster = await eventually(not_ready)
        ready_condition = next(x for x in cluster["status"]["conditions"] if x["type"] == "Ready")
        assert ready_condition["status"] == "False"
        deadline = time.monotonic() + QUIET
        while time.monotonic() < deadline:
            assert taint_keys(await plane.get_cluster("m1")) == [NOT_READY_NO_SCHEDULE]
            await asyncio.sleep(0.05)
        await plane.stays_on_m1(0.2)
    finally:
        for m in plane.managers:
            await m.stop()
        await client.close()
        await members.stop()
        await server.stop()
