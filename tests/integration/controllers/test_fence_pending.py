"""The fence-pending handshake of clusters whose agents speak the peer protocol, on a real API server with the
controller-manager's cluster controller and short settings.

The test plays the agents: each Pull cluster announces a guard and a peer endpoint, its Lease is renewed while
``renewing``, and an agent's acknowledgement of a pending fence is written on its Lease as the real agent writes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.client import Client
from flotilla.failover.fencing import is_fenced
from flotilla.failover.peer_quorum import (
    ANNOTATION_ACKNOWLEDGED_FENCES,
    ANNOTATION_FENCE_PENDING,
    ANNOTATION_PEER_ENDPOINT,
    ANNOTATION_PEER_REPORT_TTL,
    pending_token,
)
from flotilla.kube.resources import LEASES, NAMESPACES
from flotilla.runtime.manager import ControllerManager
from tests.support.controllers import Eventually, control_plane, events_by_reason

from .test_auto_fence import (
    BOUND,
    FENCE_AFTER,
    HOLD,
    MARGIN,
    PERIOD,
    SLACK,
    agents,
    fenced_condition,
    guard_annotations,
    options,
    pull_cluster,
)
from .test_pull_cluster_health import LEASE_NS, Agent, Plane

TTL = 0.3
eventually = Eventually(timeout=20.0, interval=0.02, retry_on=())


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    async with control_plane(tmp_path, compaction_interval=0) as (_server, client):
        await client.create(NAMESPACES, {"metadata": {"name": LEASE_NS}})
        manager = await ControllerManager(client, options(), controllers=["cluster"]).start()
        try:
            yield Plane(client, manager)
        finally:
            await manager.stop()


def peer_annotations(port: int) -> dict[str, str]:
    return {**guard_annotations(), ANNOTATION_PEER_ENDPOINT: f"127.0.0.1:{port}",
            ANNOTATION_PEER_REPORT_TTL: f"{TTL}s"}


async def three(plane: Plane) -> list[Agent]:
    return [await pull_cluster(plane.client, f"p{i}", peer_annotations(7000 + i)) for i in (1, 2, 3)]


async def acknowledge(client: Client, agent: str, fences: dict[str, str]) -> float:
    import json

    await client.patch(LEASES, agent, {"metadata": {"annotations": {
        ANNOTATION_ACKNOWLEDGED_FENCES: json.dumps(fences)}}}, namespace=LEASE_NS)
    return time.monotonic()


async def pending(plane: Plane, name: str) -> dict[str, Any] | None:
    c = await plane.get(name)
    return c if pending_token(c) is not None else None


async def test_d19_a_peer_cluster_is_fenced_only_after_the_acknowledgements_and_their_wait(plane: Plane) -> None:
    p1, p2, p3 = await three(plane)
    async with agents(p1, p2, p3):
        await asyncio.sleep(3 * PERIOD)
        p1.renewing = False
        await asyncio.sleep(0.25)
        stopped = p1.last
        c = await eventually(lambda: pending(plane, "p1"), what="p1's fence pending")
        marked = time.monotonic() - stopped
        assert marked >= HOLD * 0.95, f"marked pending {marked:.2f}s after the last renewal, before the hold"
        token = pending_token(c)
        assert token and not is_fenced(c)
        cond = await eventually(lambda: _cond(plane, "p1", "FencePending"), what="the FencePending condition")
        assert cond["status"] == "False" and "waiting for 2 of the 2 other agents" in cond["message"]
        assert await eventually(lambda: events_by_reason(plane.client, "ClusterFencePending"), what="the Event")

        # without the acknowledgements the fence never comes, however long the Lease is silent
        await asyncio.sleep(BOUND + SLACK)
        assert not is_fenced(await plane.get("p1"))
        await acknowledge(plane.client, "p2", {"p1": token})
        await asyncio.sleep(BOUND)
        assert not is_fenced(await plane.get("p1")), "fenced with one acknowledgement of the two needed"
        acked = await acknowledge(plane.client, "p3", {"p1": token})

        async def fenced() -> dict[str, Any] | None:
            c = await plane.get("p1")
            return c if is_fenced(c) else None

        c = await eventually(fenced, what="p1 fenced")
        waited = time.monotonic() - acked
        assert waited >= (TTL + FENCE_AFTER + MARGIN) * 0.95, f"fenced {waited:.2f}s after the last acknowledgement"
        assert waited <= TTL + FENCE_AFTER + MARGIN + PERIOD + SLACK
        assert ANNOTATION_FENCE_PENDING not in (c["metadata"].get("annotations") or {})
        cond = await eventually(lambda: _cond(plane, "p1", "LeaseExpired"), what="the Fenced condition")
        assert cond["status"] == "True" and "acknowledged by 2 of the 2 other agents" in cond["message"]
        assert not is_fenced(await plane.get("p2")) and not is_fenced(await plane.get("p3"))


async def test_d19_an_acknowledgement_of_another_token_does_not_count(plane: Plane) -> None:
    p1, p2, p3 = await three(plane)
    async with agents(p1, p2, p3):
        p1.renewing = False
        c = await eventually(lambda: pending(plane, "p1"), what="p1's fence pending")
        await acknowledge(plane.client, "p2", {"p1": "some/other-renewal"})
        await acknowledge(plane.client, "p3", {"p1": str(pending_token(c))})
        await asyncio.sleep(BOUND + TTL + SLACK)
        assert not is_fenced(await plane.get("p1"))


async def test_d19_a_lease_renewal_during_the_pending_wait_cancels_it(plane: Plane) -> None:
    p1, p2, p3 = await three(plane)
    async with agents(p1, p2, p3):
        p1.renewing = False
        c = await eventually(lambda: pending(plane, "p1"), what="p1's fence pending")
        await acknowledge(plane.client, "p2", {"p1": str(pending_token(c))})
        p1.renewing = True  # the agent is back before the acknowledgements are complete

        async def cancelled() -> dict[str, Any] | None:
            c = await plane.get("p1")
            return c if pending_token(c) is None else None

        await eventually(cancelled, what="the pending mark removed")
        cond = await eventually(lambda: _cond(plane, "p1", "FenceCancelled"), what="the FenceCancelled condition")
        assert cond["status"] == "False" and "renewed after the fence was marked pending" in cond["message"]
        await acknowledge(plane.client, "p3", {"p1": str(pending_token(c))})
        deadline = time.monotonic() + BOUND + TTL + SLACK
        while time.monotonic() < deadline:
            c = await plane.get("p1")
            assert not is_fenced(c) and pending_token(c) is None
            await asyncio.sleep(0.05)
        assert await events_by_reason(plane.client, "ClusterFenceCancelled")


async def test_d19_peer_clusters_cut_off_as_a_minority_are_never_fenced(plane: Plane) -> None:
    p1, p2, p3 = await three(plane)
    async with agents(p1, p2, p3):
        p1.renewing = p2.renewing = False
        deadline = time.monotonic() + 2 * BOUND + TTL + SLACK
        while time.monotonic() < deadline:
            for name in ("p1", "p2"):
                c = await plane.get(name)
                assert not is_fenced(c), name
            await asyncio.sleep(0.05)
        # p3 acknowledges whatever is pending: still one live cluster of three, so still no fence
        for name in ("p1", "p2"):
            token = pending_token(await plane.get(name))
            if token is not None:
                await acknowledge(plane.client, "p3", {name: token})
        await asyncio.sleep(BOUND + TTL + SLACK)
        assert not is_fenced(await plane.get("p1")) and not is_fenced(await plane.get("p2"))


async def _cond(plane: Plane, name: str, reason: str) -> dict[str, Any] | None:
    cond = fenced_condition(await plane.get(name))
    return cond if cond.get("reason") == reason else None
