"""The guard of a simulated member: guarded workloads stop when the run permit goes stale, unguarded ones never.

The permit (Lease ``flotilla-system/flotilla-run-permit``) is renewed by the test through the member's API, as
an agent with ``--guard`` would; the member runs its guard with a short fence-after."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flotilla.client import Client, Resource
from flotilla.failover.run_permit import (
    EVENT_GUARD_RESUMED_WORKLOAD,
    EVENT_GUARD_STOPPED_WORKLOAD,
    GUARDED_LABEL,
    PERMIT_NAME,
    PERMIT_NAMESPACE,
    permit_body,
    renewed_permit,
)
from flotilla.kube.resources import EVENTS, LEASES, NAMESPACES
from flotilla.member.flink import FlinkDeploymentSimulator
from flotilla.member.simulated import MemberCluster, MemberConfig
from tests.support.controllers import Eventually

FLINK = Resource("flink.apache.org", "v1beta1", "flinkdeployments", "FlinkDeployment", True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
FENCE_AFTER = 1.5
POLL = 0.1
eventually = Eventually(timeout=30.0, interval=0.05)


def flink(name: str, guarded: bool) -> dict[str, Any]:
    labels = {GUARDED_LABEL: "true"} if guarded else {}
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                     "jobManager": {"resource": {"memory": "1024m", "cpu": 1}},
                     "taskManager": {"resource": {"memory": "1024m", "cpu": 1}},
                     "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 1,
                             "upgradeMode": "last-state"}}}


def statefulset(name: str, guarded: bool) -> dict[str, Any]:
    labels = {GUARDED_LABEL: "true"} if guarded else {}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"replicas": 1, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": name, "image": "nginx:1.27"}]}}}}


class Permit:
    """Renews the permit every ``interval`` while ``renewing`` is set, like an agent holding the control plane."""

    def __init__(self, client: Client, interval: float = 0.2) -> None:
        self.client, self.interval = client, interval
        self.renewing = asyncio.Event()
        self.last_renewed = 0.0
        self._task: asyncio.Task[None] | None = None

    async def renew_once(self) -> None:
        lease = await self.client.get_or_none(LEASES, PERMIT_NAME, PERMIT_NAMESPACE)
        now = datetime.now(UTC)
        if lease is None:
            await self.client.create(LEASES, permit_body("m1", FENCE_AFTER, now), PERMIT_NAMESPACE)
        else:
            await self.client.update(LEASES, renewed_permit(lease, "m1", FENCE_AFTER, now))
        self.last_renewed = time.monotonic()

    async def _run(self) -> None:
        while True:
            await self.renewing.wait()
            await self.renew_once()
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@pytest.fixture
async def guarded_member(tmp_path: Path) -> AsyncIterator[tuple[MemberCluster, Client, Permit]]:
    cfg = MemberConfig(name="m1", data_dir=tmp_path / "members", ready_delay=0.2,
                       options={"guard": f"{FENCE_AFTER}s", "guard_poll": POLL, "flink_checkpoint_interval": 0.3})
    async with MemberCluster(cfg) as member:
        client = Client.from_kubeconfig(member.kubeconfig_path)
        await client.create(NAMESPACES, {"metadata": {"name": PERMIT_NAMESPACE}})
        permit = Permit(client)
        permit.start()
        try:
            yield member, client, permit
        finally:
            await permit.close()
            await client.close()


def flink_running(member: MemberCluster, name: str) -> bool:
    sim = member.simulator("flinkdeployment")
    assert isinstance(sim, FlinkDeploymentSimulator)
    model = sim.model_for("default", name)
    return model is not None and model.running


async def ready_replicas(client: Client, name: str) -> int:
    sts = await client.get(STATEFULSETS, name, "default")
    return int((sts.get("status") or {}).get("readyReplicas") or 0)


async def test_member_guard_stops_guarded_flink_job_after_fence_after_and_resumes_on_renewal(
        guarded_member: tuple[MemberCluster, Client, Permit]) -> None:
    member, client, permit = guarded_member
    permit.renewing.set()
    for name, guarded in (("guarded", True), ("free", False)):
        await client.create(FLINK, flink(name, guarded), "default")
        await client.create(STATEFULSETS, statefulset(f"db-{name}", guarded), "default")
    for name in ("guarded", "free"):
        await eventually(lambda name=name: _true(flink_running(member, name)), what=f"job {name} running")
        await eventually(lambda name=name: _positive(ready_replicas(client, f"db-{name}")), what=f"db-{name} ready")
    # renewed well past fence-after: nothing stops
    await asyncio.sleep(FENCE_AFTER * 1.5)
    assert flink_running(member, "guarded") and flink_running(member, "free")

    permit.renewing.clear()
    await asyncio.sleep(permit.interval * 2)  # an in-flight renewal lands
    cut = permit.last_renewed
    await eventually(lambda: _true(not flink_running(member, "guarded")), what="the guarded job stopped")
    stopped_after = time.monotonic() - cut
    assert FENCE_AFTER - 0.2 <= stopped_after <= FENCE_AFTER + POLL + 1.0, stopped_after
    await eventually(lambda: _zero(ready_replicas(client, "db-guarded")), what="the guarded StatefulSet not ready")
    intervals = member.history.intervals(name="guarded")
    assert intervals and all(iv.end is not None for iv in intervals), intervals  # recorded as stopped
    await asyncio.sleep(FENCE_AFTER)
    assert flink_running(member, "free") and await ready_replicas(client, "db-free") == 1  # never stopped
    assert not flink_running(member, "guarded")

    permit.renewing.set()
    await eventually(lambda: _true(flink_running(member, "guarded")), what="the guarded job running again")
    await eventually(lambda: _positive(ready_replicas(client, "db-guarded")), what="db-guarded ready again")


async def guard_events(client: Client) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """The guard's Events in the member: (kind, name, reason) -> Events."""
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for ev in (await client.list(EVENTS, "default")).get("items") or []:
        if ev.get("reason") in (EVENT_GUARD_STOPPED_WORKLOAD, EVENT_GUARD_RESUMED_WORKLOAD):
            inv = ev.get("involvedObject") or {}
            out.setdefault((str(inv.get("kind")), str(inv.get("name")), str(ev["reason"])), []).append(ev)
    return out


async def test_member_guard_records_an_event_on_each_guarded_object_it_stops_and_resumes(
        guarded_member: tuple[MemberCluster, Client, Permit]) -> None:
    member, client, permit = guarded_member
    permit.renewing.set()
    await client.create(FLINK, flink("guarded", True), "default")
    await client.create(FLINK, flink("free", False), "default")
    await client.create(STATEFULSETS, statefulset("db-guarded", True), "default")
    for name in ("guarded", "free"):
        await eventually(lambda name=name: _true(flink_running(member, name)), what=f"job {name} running")
    assert await guard_events(client) == {}  # a fresh permit: nothing to tell

    permit.renewing.clear()
    stopped = {("FlinkDeployment", "guarded", EVENT_GUARD_STOPPED_WORKLOAD),
               ("StatefulSet", "db-guarded", EVENT_GUARD_STOPPED_WORKLOAD)}

    async def told(keys: set[tuple[str, str, str]]) -> bool:
        return set(await guard_events(client)) == keys

    await eventually(lambda: told(stopped), what="a GuardStoppedWorkload Event on each guarded object")
    assert not flink_running(member, "guarded")
    await asyncio.sleep(FENCE_AFTER)  # many guard passes on the stale permit: still one Event each, counted once
    events = await guard_events(client)
    assert set(events) == stopped
    for key, evs in events.items():
        assert len(evs) == 1 and evs[0]["count"] == 1 and evs[0]["type"] == "Warning", (key, evs)
        assert "run permit has not changed" in evs[0]["message"], evs[0]["message"]
        assert evs[0]["source"]["component"] == "flotilla-guard"
    guarded = await client.get(FLINK, "guarded", "default")
    assert events[("FlinkDeployment", "guarded", EVENT_GUARD_STOPPED_WORKLOAD)][0]["involvedObject"]["uid"] == (
        guarded["metadata"]["uid"])

    permit.renewing.set()
    resumed = stopped | {("FlinkDeployment", "guarded", EVENT_GUARD_RESUMED_WORKLOAD),
                         ("StatefulSet", "db-guarded", EVENT_GUARD_RESUMED_WORKLOAD)}
    await eventually(lambda: told(resumed), what="a GuardResumedWorkload Event on each guarded object")
    await eventually(lambda: _true(flink_running(member, "guarded")), what="the guarded job running again")
    await asyncio.sleep(FENCE_AFTER / 2)
    events = await guard_events(client)
    assert set(events) == resumed  # nothing on the unguarded job, ever
    for key in resumed - stopped:
        assert len(events[key]) == 1 and events[key][0]["type"] == "Normal", events[key]


async def test_member_guard_without_a_permit_stops_nothing(
        guarded_member: tuple[MemberCluster, Client, Permit]) -> None:
    member, client, _permit = guarded_member  # never renewed: no permit exists
    await client.create(FLINK, flink("guarded", True), "default")
    await eventually(lambda: _true(flink_running(member, "guarded")), what="the guarded job running")
    await asyncio.sleep(FENCE_AFTER * 2)
    assert flink_running(member, "guarded")


async def _true(value: bool) -> bool:
    return value


async def _positive(value: Any) -> bool:
    return await value > 0


async def _zero(value: Any) -> bool:
    return await value == 0
