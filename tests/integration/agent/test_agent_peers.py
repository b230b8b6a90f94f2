"""The peer protocol with real agents: three guarded Pull members, each agent reaching the control plane through a
link and answered by its peers through another, a real API server and the controller-manager's controllers.

* When the control plane is cut off from every agent, the agents keep each other's permits: the guarded Flink job
  never stops, nothing is marked pending or fenced.
* When one member is cut off from everything, its agent gets no majority, its permit lapses and its guard stops the
  job; the control plane marks the fence pending, the two other agents acknowledge it on their Leases, and the
  fence lands only after the last acknowledgement plus the report ttl, fence-after and margin, after the job
  stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flotilla.agent.runtime import Agent, AgentConfig
from flotilla.api.resources import CLUSTERS
from flotilla.client import Client
from flotilla.client.kubeconfig import load_kubeconfig
from flotilla.failover.fencing import is_fenced
from flotilla.failover.peer_quorum import acknowledged_fences, pending_token
from flotilla.kube.resources import LEASES, NAMESPACES
from flotilla.local.links import Link
from flotilla.member.flink import FlinkDeploymentSimulator
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberConfig
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.integration.agent.test_agent import CONTROLLERS, CRDS, FLINK, PPS, templates
from tests.support.controllers import Eventually, control_plane

NAMES = ("m1", "m2", "m3")
FENCE_AFTER = 1.5
PERMIT_HOLD = 1.5
GUARD_POLL = 0.1
TTL = 1.0  # reports live this long: long enough for a loaded machine's event loop
MARGIN = 0.5
PERIOD = 0.2
LEASE_DURATION, RENEW_FRACTION = 1.0, 0.25  # the agents renew their Leases every 0.25 s
eventually = Eventually(timeout=60.0, interval=0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PeerPlane:
    cp: Client
    group: MemberGroup
    cp_links: dict[str, Link]
    peer_links: dict[str, Link]
    agents: dict[str, Agent] = field(default_factory=dict)
    tasks: list[asyncio.Task[int]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    clients: list[Client] = field(default_factory=list)

    def flink(self, name: str) -> FlinkDeploymentSimulator:
        sim = self.group.members[name].simulator("flinkdeployment")
        assert isinstance(sim, FlinkDeploymentSimulator)
        return sim

    def job_running(self, name: str) -> bool:
        model = self.flink(name).model_for("default", "wordcount")
        return model is not None and model.running


@contextlib.asynccontextmanager
async def peer_plane(tmp_path: Path, **agent_options: Any) -> AsyncIterator[PeerPlane]:
    """Three guarded members, their agents (``agent_options``: more AgentConfig fields) and the control plane."""
    members = [MemberConfig(name=n, data_dir=tmp_path / "members", ready_delay=0.2,
                            options={"guard": f"{FENCE_AFTER}s", "guard_poll": GUARD_POLL}) for n in NAMES]
    async with control_plane(tmp_path, compaction_interval=0) as (server, cp):
        group = await MemberGroup(members, write_admin_files=False).start()
        await cp.create(NAMESPACES, {"metadata": {"name": "karmada-cluster"}})
        await cp.create(CRDS, flink_deployment_crd())
        manager = await ControllerManager(cp, ControllerOptions(
            cluster_status_update_frequency=0.5, cluster_monitor_period=PERIOD, cluster_monitor_grace_period=1.0,
            cluster_startup_grace_period=5.0, fence_margin=MARGIN), controllers=CONTROLLERS).start()
        assert server.kubeconfig_path is not None
        creds = load_kubeconfig(server.kubeconfig_path)
        scheme = creds.server.partition("://")[0]
        p = PeerPlane(cp, group, {}, {})
        try:
            for name in NAMES:
                cp_link = await Link(f"{name}-cp", ("127.0.0.1", server.port)).start()
                peer_port = _free_port()
                peer_link = await Link(f"{name}-peers", ("127.0.0.1", peer_port)).start()
                p.cp_links[name], p.peer_links[name] = cp_link, peer_link
                agent_cp = Client.from_credentials(
                    dataclasses.replace(creds, server=f"{scheme}://{cp_link.url_host}"), request_timeout=2)
                member = Client.from_kubeconfig(group.members[name].kubeconfig_path, request_timeout=2,
                                                read_retries=0)
                p.clients += [agent_cp, member]
                cfg = AgentConfig(cluster_name=name, cluster_lease_duration=LEASE_DURATION,
                                  cluster_lease_renew_interval_fraction=RENEW_FRACTION, cluster_status_update_frequency=0.5,
                                  cluster_api_timeout=1.0, sync_timeout=30.0, guard=True, fence_after=FENCE_AFTER,
                                  permit_hold=PERMIT_HOLD, permit_renew_interval=0.2,
                                  peer_listen=f"127.0.0.1:{peer_port}", peer_advertise=peer_link.url_host,
                                  peer_report_ttl=TTL, peer_poll_interval=0.1, **agent_options)
                assert cfg.validate() == []
                agent = Agent(agent_cp, member, cfg, backoff=(0.1, 0.5))
                p.agents[name] = agent
                p.tasks.append(asyncio.ensure_future(agent.run(p.stop)))
            yield p
        finally:
            p.stop.set()
            for t in p.tasks:
                await asyncio.wait_for(t, 30)
            for c in p.clients:
                await c.close()
            for link in [*p.cp_links.values(), *p.peer_links.values()]:
                await link.stop()
            await manager.stop()
            await group.stop()


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[PeerPlane]:
    async with peer_plane(tmp_path) as p:
        yield p


async def _true(value: bool) -> bool:
    return value


async def place_guarded_job(p: PeerPlane) -> None:
    """The Flink job on m1, failing over with purgeMode Directly (so it is guarded)."""
    flink = next(body for res, body in templates() if res == FLINK)
    await p.cp.create(FLINK, flink)
    await p.cp.create(PPS, {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                            "metadata": {"name": "wordcount", "namespace": "default"},
                            "spec": {"resourceSelectors": [{"apiVersion": flink["apiVersion"], "kind": flink["kind"],
                                                            "name": "wordcount"}],
                                     "placement": {"clusterAffinity": {"clusterNames": ["m1"]}},
                                     "failover": {"cluster": {"purgeMode": "Directly"}}}})
    await eventually(lambda: _true(p.job_running("m1")), what="the guarded job running on m1")

    async def peers_known() -> bool:  # every agent knows its two peers and holds the control plane
        return all(a.fleet is not None and len(a.fleet.peers()) == 2 and a.permit is not None and a.permit.renewals
                   for a in p.agents.values())

    await eventually(peers_known, what="the agents knowing their peers and renewing their permits")


async def test_d19_agents_keep_their_permits_through_a_control_plane_cut_off_from_all_of_them(
        plane: PeerPlane) -> None:
    await place_guarded_job(plane)
    before = {n: a.permit.peer_renewals if a.permit else 0 for n, a in plane.agents.items()}
    for link in plane.cp_links.values():
        link.cut()
    outage = PERMIT_HOLD + FENCE_AFTER + 3.0
    deadline = time.monotonic() + outage
    while time.monotonic() < deadline:
        assert plane.job_running("m1"), "the guarded job stopped during a control-plane outage"
        await asyncio.sleep(0.1)
    for name, agent in plane.agents.items():
        assert agent.permit is not None and agent.permit.peer_renewals > before[name], name
        assert not agent.cp_reachable
    for link in plane.cp_links.values():
        link.heal()
    await asyncio.sleep(1.0)
    for name in NAMES:
        cluster = await plane.cp.get(CLUSTERS, name)
        assert not is_fenced(cluster) and pending_token(cluster) is None, name
    assert plane.job_running("m1")


async def test_d19_a_member_cut_off_from_everything_stops_its_job_before_the_acknowledged_fence(
        plane: PeerPlane) -> None:
    await place_guarded_job(plane)
    plane.cp_links["m1"].cut()
    plane.peer_links["m1"].cut()
    cut = time.monotonic()
    seen: dict[str, float] = {}  # what happened, first seen when (polled every 20 ms)
    token = ""
    while "fenced" not in seen and time.monotonic() - cut < 60:
        now = time.monotonic()
        if not plane.job_running("m1"):
            seen.setdefault("stopped", now)
        cluster = await plane.cp.get(CLUSTERS, "m1")
        if pending_token(cluster) is not None:
            seen.setdefault("pending", now)
            token = str(pending_token(cluster))
        if token and "acked" not in seen:
            leases = [await plane.cp.get(LEASES, n, "karmada-cluster") for n in ("m2", "m3")]
            if all(acknowledged_fences(lease).get("m1") == token for lease in leases):
                seen["acked"] = time.monotonic()
        if is_fenced(cluster):
            seen["fenced"] = now
        await asyncio.sleep(0.02)
    assert set(seen) == {"stopped", "pending", "acked", "fenced"}, seen
    assert seen["stopped"] < seen["fenced"], f"fenced before the job stopped: {seen}"
    # pending permit-hold after the last renewal the control plane saw, up to one renew interval before the cut
    assert seen["pending"] - cut >= PERMIT_HOLD - LEASE_DURATION * RENEW_FRACTION - 0.1, seen
    # the control plane saw the last acknowledgement no later than the test did (give the polling 0.3 s)
    assert seen["fenced"] - seen["acked"] >= TTL + FENCE_AFTER + MARGIN - 0.3, seen
    assert seen["fenced"] - cut < PERMIT_HOLD + TTL + FENCE_AFTER + MARGIN + 5.0, seen
    assert not plane.job_running("m1")
    agent = plane.agents["m1"]
    assert agent.permit is not None and agent.permit.step is not None and agent.permit.step.value == "Withhold"
    for name in ("m2", "m3"):
        assert not is_fenced(await plane.cp.get(CLUSTERS, name))
