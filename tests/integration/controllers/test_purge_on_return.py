"""D17: a fenced or failed cluster's stale copies are deleted as soon as its API answers again.

A control plane, two simulated members, and the binding, execution and cluster-status controllers in one
process (so the execution controller sees the cluster-status controller's probes). Probes every 0.2 s, a
failure counts after 0.4 s, and a success only after 30 s (Karmada's default success threshold): the stale copy
must go while member1 is still fenced and still not Ready, and nothing new may be applied there meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.client import Client
from flotilla.controllers.execution import ExecutionController
from flotilla.failover.fencing import is_fenced
from flotilla.policy.naming import generate_work_name
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.members import CLUSTERS
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import plane_with_members

from .test_binding_execution import eventually
from .test_fencing import MEMBERS, FenceEnv, fence

SUCCESS_THRESHOLD = 30.0
PURGE_WITHIN = 5.0  # generous: the probe period is 0.2 s, the purge a few requests


@contextlib.asynccontextmanager
async def probed(tmp_path: Path) -> AsyncIterator[FenceEnv]:
    async with plane_with_members(tmp_path, MEMBERS, compaction_interval=0) as plane:
        options = ControllerOptions(cluster_status_update_frequency=0.2, cluster_failure_threshold=0.4,
                                    cluster_success_threshold=SUCCESS_THRESHOLD)
        manager = ControllerManager(plane.cp, options, controllers=["binding", "execution", "cluster-status"])
        env = FenceEnv(plane.cp, plane.members, plane.group, manager, plane.server)
        for name in MEMBERS:
            await plane.cp.patch(CLUSTERS, name, {"metadata": {"finalizers": [L.CLUSTER_CONTROLLER_FINALIZER]}})
            await env.set_ready(name, "True")
        await manager.start()
        try:
            yield env
        finally:
            await manager.stop()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[FenceEnv]:
    async with probed(tmp_path) as env:
        yield env


def _ready(cluster: dict[str, Any] | None) -> str | None:
    for c in ((cluster or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


async def test_d17_fenced_cluster_is_purged_as_soon_as_it_answers_and_nothing_is_applied_there(
        env: FenceEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    nginx = await env.template("nginx")
    web = await env.template("web")
    await env.create_binding(nginx, [("member1", 1)])
    await env.create_binding(web, [("member1", 2)])
    nginx_work = generate_work_name("Deployment", "nginx", "default")
    web_work = generate_work_name("Deployment", "web", "default")
    await eventually(lambda: env.applied("member1", name=nginx_work), what="nginx applied in member1")
    await eventually(lambda: env.applied("member1", name=web_work), what="web applied in member1")

    await env.fault("member1", "down")

    async def not_ready() -> bool:
        return _ready(await env.cp.get(CLUSTERS, "member1")) == "False"

    await eventually(not_ready, what="member1 Ready=False from its probes")
    await fence(env, "member1")
    # nginx moves to member2 (as the taint manager's eviction would make it): its member1 Work is abandoned
    await env.patch_binding({"clusters": [{"name": "member2", "replicas": 1}]}, name="nginx-deployment")
    await eventually(lambda: _is_none(env.work("member1", nginx_work)), what="nginx's member1 Work released")
    await eventually(lambda: env.member_object("member2"), what="nginx in member2")
    # web changes meanwhile: its Work must not be applied to member1 while it is fenced
    await env.patch_binding({"clusters": [{"name": "member1", "replicas": 3}]}, name="web-deployment")

    async def web_work_revised() -> bool:
        w = await env.work("member1", web_work)
        return bool(w) and w["spec"]["workload"]["manifests"][0]["spec"]["replicas"] == 3

    await eventually(web_work_revised, what="web's Work revised")
    applied_to_member1: list[str] = []
    original = ExecutionController._apply

    async def spying_apply(self: ExecutionController, cluster: str, member: Client, manifest: dict[str, Any]
                           ) -> None:
        if cluster == "member1":
            applied_to_member1.append(manifest["metadata"]["name"])
        await original(self, cluster, member, manifest)

    monkeypatch.setattr(ExecutionController, "_apply", spying_apply)

    await env.fault("member1", "recover")
    back = time.monotonic()
    await eventually(lambda: _is_none(env.member_object("member1")), timeout=PURGE_WITHIN,
                     what="the stale nginx deleted in member1 while it is still fenced")
    took = time.monotonic() - back
    print(f"stale copy deleted {took:.2f}s after member1 answered again")

    cluster = await env.cp.get(CLUSTERS, "member1")
    assert is_fenced(cluster), "the purge must not need an unfence"
    assert _ready(cluster) == "False", f"purged {took:.2f}s after recover: before Ready (threshold {SUCCESS_THRESHOLD}s)"
    # the copy was there and the purge deleted it (not, say, a member that lost its store)
    events = await eventually(lambda: env.events("StaleObjectsDeleted"), what="the StaleObjectsDeleted event")
    assert "Deployment.apps default/nginx" in events[0]["message"] and "web" not in events[0]["message"]
    # still wanted: kept, and not updated (nothing is applied to a fenced cluster)
    await asyncio.sleep(1.0)
    kept = await env.member_object("member1", name="web")
    assert kept is not None and kept["spec"]["replicas"] == 2, kept
    assert applied_to_member1 == [], applied_to_member1
    assert await env.member_object("member2") is not None  # the new copy is untouched


async def _is_none(aw: Any) -> bool:
    return await aw is None
