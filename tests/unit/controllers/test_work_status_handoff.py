"""The work-status controller's side of the Applied hand-off, with a recording client (no I/O)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from flotilla.controllers.work_status import WorkStatusController
from flotilla.propagation.written import WrittenObjects
from flotilla.runtime.applied_handoff import AppliedHandoff
from flotilla.runtime.keyed_locks import KeyedLocks

APPLIED = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "ok"}
DISPATCHING = {"type": "Dispatching", "status": "True", "reason": "DispatchingSucceed", "message": "ok"}


class RecordingClient:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any], str | None]] = []

    async def patch(self, res: Any, name: str, body: dict[str, Any], namespace: str | None = None,
                    subresource: str | None = None) -> dict[str, Any]:
        self.patches.append((name, body, subresource))
        return {"metadata": {"name": name, "namespace": namespace, "uid": "u1", "resourceVersion": "11"},
                "status": body["status"]}


def _work() -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "w", "namespace": "karmada-es-m1", "uid": "u1", "resourceVersion": "10"},
            "spec": {"workload": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                 "metadata": {"name": "app", "namespace": "default"}}]}}}


def _controller(work: dict[str, Any], cluster_ready: str) -> tuple[WorkStatusController, RecordingClient,
                                                                      AppliedHandoff]:
    c = WorkStatusController.__new__(WorkStatusController)
    client = RecordingClient()
    handoff = AppliedHandoff()
    handoff.take_from_now_on(lambda key: None)
    c.client = client  # type: ignore[misc]
    c._handoff = handoff
    c._written = WrittenObjects()
    c._reporting = KeyedLocks()
    c._awaiting_applied = {}
    c.works = SimpleNamespace(store=SimpleNamespace(get={"karmada-es-m1/w": work}.get))
    cluster = {"metadata": {"name": "m1"}, "status": {"conditions": [{"type": "Ready", "status": cluster_ready}]}}
    c.clusters = SimpleNamespace(store=SimpleNamespace(get={"m1": cluster}.get))
    return c, client, handoff


async def test_conditions_left_for_a_work_whose_cluster_went_not_ready_are_written_alone() -> None:
    work = _work()
    c, client, handoff = _controller(work, "False")
    handoff.leave("karmada-es-m1/w", work, [DISPATCHING, APPLIED], "2026-01-01T00:00:00Z")
    await c._sync_work("karmada-es-m1", "w")
    ((name, body, subresource),) = client.patches
    assert name == "w" and subresource == "status" and body["metadata"]["resourceVersion"] == "10"
    assert [cond["type"] for cond in body["status"]["conditions"]] == ["Dispatching", "Applied"]
    assert all(cond["lastTransitionTime"] == "2026-01-01T00:00:00Z" for cond in body["status"]["conditions"])
    assert "manifestStatuses" not in body["status"]
    assert len(handoff) == 0  # written: nothing left behind


async def test_a_work_neither_applied_nor_left_for_is_not_looked_at() -> None:
    c, client, _ = _controller(_work(), "True")
    assert await c._sync_work("karmada-es-m1", "w") is None
    assert client.patches == []


def test_conditions_left_for_a_work_that_is_deleted_are_dropped() -> None:
    work = _work()
    c, client, handoff = _controller(work, "True")
    c._watches = {}
    handoff.leave("karmada-es-m1/w", work, [DISPATCHING, APPLIED], "2026-01-01T00:00:00Z")
    c._on_work_delete(work)
    assert len(handoff) == 0 and client.patches == []


def _member_object() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "app", "namespace": "default", "resourceVersion": "5",
                         "annotations": {"work.karmada.io/namespace": "karmada-es-m1", "work.karmada.io/name": "w"}},
            "status": {"replicas": 1, "readyReplicas": 1}}


def _watching_member_object(c: WorkStatusController) -> list[str]:
    """Give the controller member m1's informer holding the Deployment; return the keys it queues."""
    informer = SimpleNamespace(store=SimpleNamespace(get={"default/app": _member_object()}.get))
    c._watches = {"m1": SimpleNamespace(informers={("apps/v1", "Deployment"): informer})}
    queued: list[str] = []
    c.enqueue = lambda key, after=0.0, priority=0: queued.append(key)  # type: ignore[method-assign]
    return queued


async def test_an_object_seen_before_its_work_was_applied_is_looked_at_again_even_after_its_own_report() -> None:
    """The pass that wrote the Work's Applied condition (with the first report) may have read the object before a
    newer event, which found the Work not applied yet: that object is looked at again once the Work is applied,
    even though the Work's update is this controller's own echo."""
    work = _work()
    c, client, _ = _controller(work, "True")
    queued = _watching_member_object(c)

    assert await c._sync_object("m1", "apps/v1", "Deployment", "default", "app", "karmada-es-m1", "w") is None
    assert client.patches == [] and queued == []  # not applied: nothing to report on yet

    applied = {**work, "metadata": {**work["metadata"], "resourceVersion": "11"},
               "status": {"conditions": [DISPATCHING, APPLIED]}}
    c._written.record("karmada-es-m1/w", work, applied)  # this controller wrote the Applied condition
    c._on_work_update(work, applied)

    assert queued == ["obj|m1|apps/v1|Deployment|default|app|karmada-es-m1|w"]
    assert c._awaiting_applied == {}


async def test_a_report_that_writes_the_applied_condition_looks_again_at_the_objects_that_waited_for_it() -> None:
    work = _work()
    c, client, handoff = _controller(work, "True")
    queued = _watching_member_object(c)
    await c._sync_object("m1", "apps/v1", "Deployment", "default", "app", "karmada-es-m1", "w")

    handoff.leave("karmada-es-m1/w", work, [DISPATCHING, APPLIED], "2026-01-01T00:00:00Z")
    left = handoff.left_for("karmada-es-m1/w", work)
    await c._report(work, [], left)

    assert len(client.patches) == 1
    assert queued == ["obj|m1|apps/v1|Deployment|default|app|karmada-es-m1|w"]
