"""The Applied hand-off (under load a Work's ``Applied`` condition goes out with its first status report) and the
member informers the execution and work-status controllers share.

The binding, execution and work-status controllers on a control plane with two simulated members; "under load"
is a forward queue that always has a key ready, added to the controller-manager's forward-first gate.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flotilla.api import labels as L
from flotilla.client import Client
from flotilla.kube.resources import DEPLOYMENTS
from flotilla.propagation.works import RESOURCE_BINDINGS, WORKS
from flotilla.runtime.applied_handoff import APPLIED_HANDOFF
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.member_informers import member_informers
from flotilla.runtime.members import CLUSTERS
from tests.support.controllers import plane_with_members, set_ready

MEMBERS = ("member1", "member2")


@dataclass
class Backlog:
    """A forward queue with a key always ready (what the gate sees during a burst)."""

    depth: int = 1


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}},
    }


@contextlib.asynccontextmanager
async def plane(tmp_path: Path, controllers: list[str], busy: bool) -> AsyncIterator[tuple[Client, ControllerManager]]:
    async with plane_with_members(tmp_path, MEMBERS) as p:
        manager = ControllerManager(p.cp, controllers=controllers)
        for name in MEMBERS:
            await set_ready(p.cp, name, "True", reason="ClusterReady", message="set by the test",
                            stamp="2025-01-01T00:00:00Z")
        await manager.start()
        if busy:
            assert manager.ctx is not None
            manager.ctx.forward_first.add_forward(Backlog())
        try:
            yield p.cp, manager
        finally:
            await manager.stop()


async def work_versions_until_reported(cp: Client) -> list[dict[str, Any]]:
    """Propagate one Deployment to member1 and return every version of its Work until it carries both the Applied
    condition and a manifest status."""
    template = await cp.create(DEPLOYMENTS, deployment())
    meta = template["metadata"]
    rb = await cp.create(RESOURCE_BINDINGS, {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "nginx-deployment", "namespace": "default",
                     "finalizers": [L.BINDING_CONTROLLER_FINALIZER]},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                              "name": "nginx", "uid": meta["uid"]},
                 "replicas": 2, "clusters": [{"name": "member1", "replicas": 2}]},
    })
    stream = cp.watch(WORKS, "karmada-es-member1", resource_version=rb["metadata"]["resourceVersion"])
    versions: list[dict[str, Any]] = []
    try:
        while True:
            ev = await asyncio.wait_for(stream.__anext__(), 20)
            if ev.type not in ("ADDED", "MODIFIED"):
                continue
            versions.append(ev.object)
            status = ev.object.get("status") or {}
            if _applied(ev.object) and status.get("manifestStatuses"):
                return versions
    finally:
        await stream.aclose()


def _applied(work: dict[str, Any]) -> bool:
    return any(c.get("type") == "Applied" and c.get("status") == "True"
               for c in (work.get("status") or {}).get("conditions") or [])


def _first_applied(versions: list[dict[str, Any]]) -> dict[str, Any]:
    return next(v for v in versions if _applied(v))


async def test_under_load_the_applied_condition_rides_on_the_first_status_report(tmp_path: Path) -> None:
    async with plane(tmp_path, ["binding", "execution", "work-status"], busy=True) as (cp, manager):
        versions = await work_versions_until_reported(cp)
        first = _first_applied(versions)
        status = first["status"]
        assert status.get("manifestStatuses"), "Applied was written without the copy's status"
        assert {c["type"] for c in status["conditions"]} == {"Applied", "Dispatching"}
        applied = next(c for c in status["conditions"] if c["type"] == "Applied")
        assert applied["reason"] == "AppliedSuccessful" and applied["lastTransitionTime"]
        assert manager.ctx is not None and len(manager.ctx.extras[APPLIED_HANDOFF]) == 0  # nothing left behind


async def test_an_idle_system_writes_the_applied_condition_at_once(tmp_path: Path) -> None:
    async with plane(tmp_path, ["binding", "execution", "work-status"], busy=False) as (cp, _):
        versions = await work_versions_until_reported(cp)
        assert not _first_applied(versions)["status"].get("manifestStatuses")  # as Karmada: two writes


async def test_without_the_work_status_controller_the_execution_controller_writes_applied(tmp_path: Path) -> None:
    async with plane(tmp_path, ["binding", "execution"], busy=True) as (cp, _):
        template = await cp.create(DEPLOYMENTS, deployment())
        await cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": "nginx-deployment", "namespace": "default",
                         "finalizers": [L.BINDING_CONTROLLER_FINALIZER]},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                  "name": "nginx", "uid": template["metadata"]["uid"]},
                     "replicas": 2, "clusters": [{"name": "member1", "replicas": 2}]},
        })
        for _ in range(200):
            works = (await cp.list(WORKS, "karmada-es-member1")).get("items") or []
            if works and _applied(works[0]):
                assert not works[0]["status"].get("manifestStatuses")
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the Work was never Applied")


async def test_one_member_informer_per_kind_serves_both_drift_and_status(tmp_path: Path) -> None:
    """The execution controller (drift) and the work-status controller (status) share one list and watch of a
    member's managed objects of a kind; both still see every event."""
    async with plane(tmp_path, ["binding", "execution", "work-status"], busy=False) as (cp, manager):
        await work_versions_until_reported(cp)
        assert manager.ctx is not None
        shared = member_informers(manager.ctx.extras)
        assert [res.kind for res in shared.watched("member1")] == ["Deployment"]
        cluster = await cp.get(CLUSTERS, "member1")
        member = await manager.ctx.members.client_for(cluster)
        await member.patch(DEPLOYMENTS, "nginx", {"spec": {"replicas": 7}}, namespace="default")
        for _ in range(300):  # drift corrected by the execution controller, the status reflected by work-status
            obj = await member.get(DEPLOYMENTS, "nginx", "default")
            work = (await cp.list(WORKS, "karmada-es-member1"))["items"][0]
            reported = (work["status"]["manifestStatuses"][0].get("status") or {}).get("observedGeneration")
            generation = obj["metadata"]["generation"]
            if obj["spec"]["replicas"] == 2 and generation > 2 and reported == generation:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"drift not corrected or status not reflected: {obj['metadata']}, {reported}")
        assert [res.kind for res in shared.watched("member1")] == ["Deployment"]


async def test_a_report_made_from_an_older_copy_of_an_object_never_undoes_a_newer_one(tmp_path: Path) -> None:
    """Two passes report one Work (its own key and its object's key are queued separately). The one that read the
    object before the newer report went out reflects the object as the cache holds it when its turn comes, so the
    Work never goes back to the older status."""
    from flotilla.controllers.work_status import WorkStatusController

    async with plane(tmp_path, ["binding", "execution", "work-status"], busy=False) as (cp, manager):
        await work_versions_until_reported(cp)
        ctrl = next(c for c in manager.controllers if isinstance(c, WorkStatusController))
        cluster = await cp.get(CLUSTERS, "member1")
        member = await manager.ctx.members.client_for(cluster) if manager.ctx else None
        assert member is not None
        for _ in range(300):  # the member's copy is Ready and the Work says Healthy
            work = (await cp.list(WORKS, "karmada-es-member1"))["items"][0]
            health = [m.get("health") for m in (work.get("status") or {}).get("manifestStatuses") or []]
            if health == ["Healthy"]:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the Work never reported the copy Healthy: {health}")
        inf = next(iter(ctrl._watches["member1"].informers.values()))
        current = inf.store.get("default/nginx")
        assert current is not None
        older = {**current, "status": {"replicas": 2, "observedGeneration": 1}}  # as it was before it was Ready
        assert ctrl.interpreters.get().health(older) != ctrl.interpreters.get().health(current)

        await asyncio.gather(ctrl._report(work, [(inf, older)], None), ctrl._report(work, [(inf, current)], None))

        work = (await cp.list(WORKS, "karmada-es-member1"))["items"][0]
        assert [m.get("health") for m in work["status"]["manifestStatuses"]] == ["Healthy"]
