"""``flotilla agent --guard`` with a guarded simulated member: guarded labels, the run permit, the guard.

The control plane is real (HTTP), the agent reaches it through a proxy the tests take down (a partition: the
member and the agent keep running), and the member runs its guard (``--sim-option guard=...``)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.agent.runtime import Agent, AgentConfig
from flotilla.api.resources import CLUSTERS
from flotilla.client import Client
from flotilla.client.kubeconfig import load_kubeconfig
from flotilla.failover.run_permit import (
    ANNOTATION_FENCE_AFTER,
    ANNOTATION_PERMIT_HOLD,
    GUARDED_LABEL,
    PERMIT_NAME,
    PERMIT_NAMESPACE,
)
from flotilla.kube.resources import DEPLOYMENTS, LEASES, NAMESPACES
from flotilla.member.flink import FlinkDeploymentSimulator
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberConfig
from flotilla.propagation.works import WORKS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.integration.agent.test_agent import (
    CLUSTER,
    CONTROLLERS,
    CRDS,
    ES,
    FLINK,
    PPS,
    STATEFULSETS,
    Proxy,
    templates,
)
from tests.support.controllers import Eventually, control_plane


class CuttingProxy(Proxy):
    """The proxy whose ``down`` also drops every open connection (a partition, not just refused new ones)."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.writers: set[asyncio.StreamWriter] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            await super()._pipe(reader, writer)
        finally:
            self.writers.discard(writer)

    async def down(self) -> None:
        await super().down()
        for w in list(self.writers):
            w.transport.abort()


FENCE_AFTER = 1.5
PERMIT_HOLD = 1.5
GUARD_POLL = 0.1
eventually = Eventually(timeout=60.0, interval=0.05)
MODES = {"wordcount": "Directly", "db": "Gracefully", "web": None}  # web: no failover, the flag (Gracefully)


def policies() -> list[dict[str, Any]]:
    out = []
    for (res, body) in templates():
        name = body["metadata"]["name"]
        spec: dict[str, Any] = {"resourceSelectors": [{"apiVersion": body["apiVersion"], "kind": body["kind"],
                                                       "name": name}],
                                "placement": {"clusterAffinity": {"clusterNames": [CLUSTER]}}}
        if MODES[name]:
            spec["failover"] = {"cluster": {"purgeMode": MODES[name]}}
        out.append({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                    "metadata": {"name": name, "namespace": "default"}, "spec": spec})
        del res
    return out


@dataclass
class GuardPlane:
    cp: Client
    group: MemberGroup
    member: Client
    kubeconfig: Path
    proxy: Proxy
    agent: Agent | None = None
    task: asyncio.Task[int] | None = None
    stop: asyncio.Event | None = None
    clients: tuple[Client, ...] = ()

    async def start_agent(self) -> Agent:
        creds = load_kubeconfig(self.kubeconfig)
        scheme = creds.server.partition("://")[0]
        cp = Client.from_credentials(dataclasses.replace(creds, server=f"{scheme}://127.0.0.1:{self.proxy.port}"),
                                     request_timeout=2)
        member = Client.from_kubeconfig(self.group.members[CLUSTER].kubeconfig_path, request_timeout=2,
                                        read_retries=0)
        cfg = AgentConfig(cluster_name=CLUSTER, cluster_lease_duration=1.0, cluster_lease_renew_interval_fraction=0.25,
                          cluster_status_update_frequency=0.5, sync_timeout=30.0, guard=True,
                          fence_after=FENCE_AFTER, permit_hold=PERMIT_HOLD, permit_renew_interval=0.2)
        assert cfg.validate() == []
        self.agent = Agent(cp, member, cfg, backoff=(0.1, 0.5))
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(self.agent.run(self.stop))
        self.clients = (cp, member)
        return self.agent

    async def kill_agent(self) -> None:
        assert self.stop is not None and self.task is not None
        self.stop.set()
        assert await asyncio.wait_for(self.task, 30) == 0
        for c in self.clients:
            await c.close()

    def flink(self) -> FlinkDeploymentSimulator:
        sim = self.group.members[CLUSTER].simulator("flinkdeployment")
        assert isinstance(sim, FlinkDeploymentSimulator)
        return sim

    def job_running(self) -> bool:
        model = self.flink().model_for("default", "wordcount")
        return model is not None and model.running


@pytest.fixture
async def gplane(tmp_path: Path) -> AsyncIterator[GuardPlane]:
    cfg = MemberConfig(name=CLUSTER, data_dir=tmp_path / "members", ready_delay=0.2,
                       options={"guard": f"{FENCE_AFTER}s", "guard_poll": GUARD_POLL})
    async with control_plane(tmp_path) as (server, cp):
        group = await MemberGroup([cfg], write_admin_files=False).start()
        member = Client.from_kubeconfig(group.members[CLUSTER].kubeconfig_path)
        await cp.create(NAMESPACES, {"metadata": {"name": "karmada-cluster"}})
        await cp.create(CRDS, flink_deployment_crd())
        assert server.kubeconfig_path is not None
        proxy = CuttingProxy(server.port)
        await proxy.up()
        manager = await ControllerManager(cp, ControllerOptions(cluster_status_update_frequency=0.5),
                                          controllers=CONTROLLERS).start()
        p = GuardPlane(cp, group, member, server.kubeconfig_path, proxy)
        try:
            yield p
        finally:
            if p.task is not None and not p.task.done():
                await p.kill_agent()
            await manager.stop()
            await proxy.down()
            await member.close()
            await group.stop()


async def propagate(p: GuardPlane) -> None:
    for res, body in templates():
        await p.cp.create(res, body)
    for pp in policies():
        await p.cp.create(PPS, pp)

    async def all_there() -> bool:
        return all([await p.member.get_or_none(res, body["metadata"]["name"], "default") is not None
                    for res, body in templates()])

    await eventually(all_there, what="the three workloads in the member")
    await eventually(lambda: _true(p.job_running()), what="the Flink job running in the member")


async def _true(value: bool) -> bool:
    return value


async def test_agent_guard_labels_member_objects_of_directly_bindings_only(gplane: GuardPlane) -> None:
    await gplane.start_agent()
    await propagate(gplane)
    flink = await gplane.member.get(FLINK, "wordcount", "default")
    assert flink["metadata"]["labels"][GUARDED_LABEL] == "true"
    for res, name in ((STATEFULSETS, "db"), (DEPLOYMENTS, "web")):
        obj = await gplane.member.get(res, name, "default")
        assert GUARDED_LABEL not in (obj["metadata"].get("labels") or {}), name


async def test_agent_guard_renews_the_permit_and_announces_the_guard(gplane: GuardPlane) -> None:
    agent = await gplane.start_agent()
    first = await eventually(lambda: gplane.member.get_or_none(LEASES, PERMIT_NAME, PERMIT_NAMESPACE),
                             what="the run permit in the member")
    assert first["spec"]["holderIdentity"] == CLUSTER

    async def renewed() -> bool:
        now = await gplane.member.get(LEASES, PERMIT_NAME, PERMIT_NAMESPACE)
        return now["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]

    await eventually(renewed, what="the permit renewed")
    cluster = await gplane.cp.get(CLUSTERS, CLUSTER)
    assert cluster["metadata"]["annotations"][ANNOTATION_FENCE_AFTER] == "1.5s"
    assert cluster["metadata"]["annotations"][ANNOTATION_PERMIT_HOLD] == "1.5s"
    assert agent.permit is not None and agent.permit.purges == 1  # the purge ran once, before the first renewal


async def test_agent_guard_cut_off_stops_the_guarded_job_within_the_bound_and_resumes_on_reconnect(
        gplane: GuardPlane) -> None:
    agent = await gplane.start_agent()
    await propagate(gplane)
    await asyncio.sleep(PERMIT_HOLD + FENCE_AFTER)  # held: nothing stops
    assert gplane.job_running()
    await gplane.proxy.down()  # the partition: the agent cannot renew its control-plane Lease
    cut = time.monotonic()
    last_started = agent.last_renewal_started
    assert last_started is not None and cut - last_started < 1.0
    await eventually(lambda: _true(not gplane.job_running()), what="the guarded Flink job stopped")
    stopped = time.monotonic()
    # the member-side timeline: the permit stops by t_c + hold, the guard stops by then + fence-after + poll
    bound = last_started + PERMIT_HOLD + FENCE_AFTER + GUARD_POLL
    assert stopped <= bound + 1.0, (stopped - last_started, bound - last_started)
    assert stopped - last_started >= FENCE_AFTER  # never before fence-after
    sts = await gplane.member.get(STATEFULSETS, "db", "default")
    assert (sts.get("status") or {}).get("readyReplicas") == 1  # unguarded: runs on
    await gplane.proxy.up()
    await eventually(lambda: _true(gplane.job_running()), what="the guarded job running again after reconnect")
    assert agent.permit is not None and agent.permit.purges >= 2  # purged again before resuming


async def test_agent_guard_purges_a_stale_guarded_copy_before_renewing_the_permit(gplane: GuardPlane) -> None:
    agent = await gplane.start_agent()
    await propagate(gplane)
    await gplane.proxy.down()
    await eventually(lambda: _true(not gplane.job_running()), what="the guarded Flink job stopped")
    runs = len(gplane.flink().runs_of("default", "wordcount"))
    # meanwhile the control plane moved the workload away: its Work is gone (the test plays that part)
    await gplane.cp.delete(PPS, "wordcount", "default")
    await gplane.cp.delete(FLINK, "wordcount", "default")
    work_name = next(w["metadata"]["name"] for w in (await gplane.cp.list(WORKS, ES))["items"]
                     if w["spec"]["workload"]["manifests"][0]["kind"] == "FlinkDeployment")
    await gplane.cp.patch(WORKS, work_name, {"metadata": {"finalizers": None}}, namespace=ES)
    await eventually(lambda: _none(gplane.cp.get_or_none(WORKS, work_name, ES)), what="the Work gone")
    permit = await gplane.member.get(LEASES, PERMIT_NAME, PERMIT_NAMESPACE)
    await gplane.proxy.up()

    async def renewed() -> bool:
        now = await gplane.member.get(LEASES, PERMIT_NAME, PERMIT_NAMESPACE)
        return now["metadata"]["resourceVersion"] != permit["metadata"]["resourceVersion"]

    await eventually(renewed, what="the permit renewed after reconnect")
    assert await gplane.member.get_or_none(FLINK, "wordcount", "default") is None or \
        (await gplane.member.get(FLINK, "wordcount", "default"))["metadata"].get("deletionTimestamp")
    await asyncio.sleep(1.0)
    assert len(gplane.flink().runs_of("default", "wordcount")) == runs  # the stale copy never ran again
    assert not gplane.job_running()
    assert agent.permit is not None and agent.permit.purges >= 2


async def _none(value: Any) -> bool:
    return await value is None
