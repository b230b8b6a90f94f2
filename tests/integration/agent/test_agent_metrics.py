"""What an operator sees of the run permit: the agents' ``/metrics`` scraped over HTTP and the Events in the members.

Three guarded members with real agents (each serving its metrics on a port of its own), a real API server and the
controller-manager's controllers, the agents' links to the control plane and to each other cut by the test. The
permit is renewed on the control plane, then through the peers while the control plane is cut off from every
agent, on the control plane again once it is back, and withheld when one member is cut off from everything. The
counters move with each route, and the member Events mark each transition once, never one per renewal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from flotilla.api.resources import CLUSTERS
from flotilla.client import Client
from flotilla.failover.fencing import is_fenced
from flotilla.failover.run_permit import (
    EVENT_RUN_PERMIT_RENEWED,
    EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS,
    EVENT_RUN_PERMIT_WITHHELD,
    PERMIT_NAME,
    PERMIT_NAMESPACE,
)
from flotilla.kube.resources import EVENTS
from flotilla.observability.metrics import CONTENT_TYPE
from tests.integration.agent.test_agent_peers import (
    FENCE_AFTER,
    MARGIN,
    NAMES,
    PERMIT_HOLD,
    TTL,
    PeerPlane,
    peer_plane,
    place_guarded_job,
)
from tests.support.controllers import Eventually

#: how long the test watches a state hold (several permit renewals of 0.2 s each) before judging its Events
SETTLE = 1.5
eventually = Eventually(timeout=60.0, interval=0.05)
PERMIT_EVENTS = (EVENT_RUN_PERMIT_RENEWED, EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS, EVENT_RUN_PERMIT_WITHHELD)


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[PeerPlane]:
    async with peer_plane(tmp_path, metrics_address=("127.0.0.1", 0)) as p:
        yield p


async def scrape(p: PeerPlane, name: str) -> dict[str, float]:
    """The samples of the agent of ``name``, over HTTP: ``{'metric{labels}': value}``."""
    server = p.agents[name].metrics_server
    assert server is not None, f"the agent of {name} serves no metrics"
    async with aiohttp.ClientSession() as session, session.get(f"{server.url}/metrics") as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == CONTENT_TYPE
        text = await resp.text()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def renewals(route: str) -> str:
    return f'flotilla_agent_run_permit_renewals_total{{route="{route}"}}'


async def member_events(p: PeerPlane, name: str) -> list[dict[str, Any]]:
    client = Client.from_kubeconfig(p.group.members[name].kubeconfig_path)
    try:
        return list((await client.list(EVENTS, PERMIT_NAMESPACE)).get("items") or [])
    finally:
        await client.close()


async def permit_events(p: PeerPlane, name: str) -> dict[str, int]:
    """The occurrences of each permit Event in member ``name`` (an Event's ``count`` included)."""
    out = dict.fromkeys(PERMIT_EVENTS, 0)
    for ev in await member_events(p, name):
        inv = ev.get("involvedObject") or {}
        assert (inv.get("kind"), inv.get("name"), inv.get("namespace")) == ("Lease", PERMIT_NAME, PERMIT_NAMESPACE)
        assert ev["source"]["component"] == "flotilla-agent"
        out[ev["reason"]] = out.get(ev["reason"], 0) + int(ev.get("count") or 1)
    return out


async def grows(p: PeerPlane, name: str, key: str, before: float) -> bool:
    return (await scrape(p, name)).get(key, 0.0) > before


async def test_agent_metrics_and_member_events_follow_the_permit_through_peers_and_a_lapse(
        plane: PeerPlane) -> None:
    await place_guarded_job(plane)
    for name in NAMES:
        await eventually(lambda name=name: _events_are(plane, name, {EVENT_RUN_PERMIT_RENEWED: 1}),
                         what=f"RunPermitRenewed in {name}")

    # on the control plane: Lease and permit renewals counted, the permit fresh, one Event for many renewals
    m1 = await scrape(plane, "m1")
    assert m1['flotilla_agent_lease_renewals_total{result="success"}'] > 0
    assert m1["flotilla_agent_control_plane_reachable"] == 1
    assert m1["flotilla_agent_run_permit_withheld"] == 0
    assert 0 <= m1["flotilla_agent_run_permit_age_seconds"] < 1.0
    await eventually(lambda: grows(plane, "m1", renewals("control-plane"), m1[renewals("control-plane")] + 5),
                     what="more permit renewals on the control plane")
    assert (await scrape(plane, "m1"))[renewals("peers")] == 0
    for name in NAMES:
        assert await permit_events(plane, name) == {EVENT_RUN_PERMIT_RENEWED: 1, EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS: 0,
                                                    EVENT_RUN_PERMIT_WITHHELD: 0}, name
        [first] = await member_events(plane, name)
        assert first["type"] == "Normal" and "renewed on the control plane" in first["message"], first["message"]

    # the control plane cut off from every agent: the permits go on through the peers
    for link in plane.cp_links.values():
        link.cut()
    for name in NAMES:
        await eventually(lambda name=name: grows(plane, name, renewals("peers"), 0),
                         what=f"{name}'s permit renewed through the peers")
    m1 = await scrape(plane, "m1")
    await eventually(lambda: grows(plane, "m1", renewals("peers"), m1[renewals("peers")] + 5),
                     what="more permit renewals through the peers")
    await asyncio.sleep(SETTLE)
    m1 = await scrape(plane, "m1")
    assert m1["flotilla_agent_control_plane_reachable"] == 0
    assert m1['flotilla_agent_lease_renewals_total{result="failure"}'] > 0
    assert m1["flotilla_agent_run_permit_withheld"] == 0
    assert 0 <= m1["flotilla_agent_run_permit_age_seconds"] < 1.0
    assert (m1["flotilla_agent_peer_votes"], m1["flotilla_agent_peer_total"]) == (3, 3)
    for peer in ("m2", "m3"):
        assert m1[f'flotilla_agent_peer_requests_total{{peer="{peer}",result="success"}}'] > 0
    assert plane.job_running("m1")
    for name in NAMES:
        assert await permit_events(plane, name) == {EVENT_RUN_PERMIT_RENEWED: 1,
                                                    EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS: 1,
                                                    EVENT_RUN_PERMIT_WITHHELD: 0}, name

    # the control plane back: renewed on it again, one more Event each
    for link in plane.cp_links.values():
        link.heal()
    for name in NAMES:
        await eventually(lambda name=name: _events_are(plane, name, {EVENT_RUN_PERMIT_RENEWED: 2,
                                                                       EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS: 1}),
                         what=f"RunPermitRenewed again in {name}")
    m1 = await scrape(plane, "m1")
    await eventually(lambda: grows(plane, "m1", renewals("control-plane"), m1[renewals("control-plane")] + 5),
                     what="permit renewals on the control plane again")
    peers_before = (await scrape(plane, "m1"))[renewals("peers")]
    await asyncio.sleep(SETTLE)
    m1 = await scrape(plane, "m1")
    assert m1["flotilla_agent_control_plane_reachable"] == 1 and m1[renewals("peers")] == peers_before

    # m1 cut off from everything: no majority, the permit withheld; the others acknowledge its pending fence
    failures = m1.get('flotilla_agent_peer_requests_total{peer="m2",result="failure"}', 0.0)
    plane.cp_links["m1"].cut()
    for link in plane.peer_links.values():  # every peer link: m1's report requests fail too
        link.cut()
    cut = time.monotonic()
    acked: set[str] = set()
    while time.monotonic() - cut < PERMIT_HOLD + TTL + FENCE_AFTER + MARGIN + 20:
        for name in ("m2", "m3"):
            if (await scrape(plane, name))["flotilla_agent_fence_acknowledgements"] == 1:
                acked.add(name)
        if is_fenced(await plane.cp.get(CLUSTERS, "m1")):
            break
        await asyncio.sleep(0.05)
    assert is_fenced(await plane.cp.get(CLUSTERS, "m1")), "m1 was not fenced"
    assert acked == {"m2", "m3"}, "the agents' gauge never showed the acknowledged pending fence"
    m1 = await scrape(plane, "m1")
    assert m1["flotilla_agent_run_permit_withheld"] == 1
    assert m1["flotilla_agent_run_permit_age_seconds"] > FENCE_AFTER
    assert m1['flotilla_agent_peer_requests_total{peer="m2",result="failure"}'] > failures
    assert m1["flotilla_agent_peer_votes"] == 1 and m1["flotilla_agent_peer_total"] == 3
    renewed = m1[renewals("control-plane")] + m1[renewals("peers")]
    await asyncio.sleep(SETTLE)
    m1 = await scrape(plane, "m1")
    assert m1[renewals("control-plane")] + m1[renewals("peers")] == renewed  # withheld: no write at all
    assert await permit_events(plane, "m1") == {EVENT_RUN_PERMIT_RENEWED: 2, EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS: 1,
                                                EVENT_RUN_PERMIT_WITHHELD: 1}
    for name in ("m2", "m3"):  # they held the control plane throughout
        assert await permit_events(plane, name) == {EVENT_RUN_PERMIT_RENEWED: 2,
                                                    EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS: 1,
                                                    EVENT_RUN_PERMIT_WITHHELD: 0}, name
        assert (await scrape(plane, name))["flotilla_agent_fence_acknowledgements"] == 0  # fenced: none pending


async def _events_are(p: PeerPlane, name: str, wanted: dict[str, int]) -> bool:
    got = await permit_events(p, name)
    return all(got.get(reason, 0) == n for reason, n in wanted.items())
