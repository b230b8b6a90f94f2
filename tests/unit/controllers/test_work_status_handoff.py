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
