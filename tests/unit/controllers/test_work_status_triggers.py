"""Which Work and member-object events wake the work-status controller."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from flotilla.controllers.work_status import WorkStatusController
from flotilla.propagation.written import WrittenObjects

APPLIED = [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": ""}]


def _work(applied: bool = True, deleting: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "w", "namespace": "karmada-es-m1", "generation": 1}
    if deleting:
        md["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"metadata": md, "status": {"conditions": APPLIED} if applied else {}}


def _controller(works: dict[str, Any]) -> tuple[WorkStatusController, list[str]]:
    queued: list[str] = []
    c = WorkStatusController.__new__(WorkStatusController)
    c.enqueue = lambda key, after=0.0, priority=0: queued.append(key)  # type: ignore[method-assign]
    c.works = SimpleNamespace(store=SimpleNamespace(get=works.get))
    c._written = WrittenObjects()
    c._awaiting_applied = {}
    return c, queued


def _member_object() -> dict[str, Any]:
    return {"metadata": {"name": "app", "namespace": "default", "annotations": {
        "work.karmada.io/namespace": "karmada-es-m1", "work.karmada.io/name": "w"}}}


def test_a_work_just_created_or_being_deleted_is_not_queued() -> None:
    c, queued = _controller({})
    c._on_work_add(_work(applied=False))
    c._on_work_update(_work(), _work(deleting=True))
    assert queued == []
    c._on_work_update(_work(applied=False), _work())  # its Applied condition
    assert queued == ["work|karmada-es-m1|w"]


def test_member_object_events_of_a_work_being_deleted_are_not_queued() -> None:
    c, queued = _controller({"karmada-es-m1/w": _work(deleting=True)})
    handlers = c._member_handlers("m1", "apps/v1", "Deployment")
    handlers["on_update"](_member_object(), _member_object())
    handlers["on_delete"](_member_object())
    assert queued == []


def test_member_object_events_of_a_live_work_are_queued() -> None:
    c, queued = _controller({"karmada-es-m1/w": _work()})
    handlers = c._member_handlers("m1", "apps/v1", "Deployment")
    handlers["on_update"](_member_object(), _member_object())
    handlers["on_delete"](_member_object())  # drift by deletion is looked at
    assert len(queued) == 2 and all(k.startswith("obj|m1|apps/v1|Deployment|default|app|") for k in queued)
    c2, queued2 = _controller({})
    c2._member_handlers("m1", "apps/v1", "Deployment")["on_delete"](_member_object())
    assert queued2 == []  # its Work is gone: nothing to re-apply


def test_the_echo_of_its_own_status_write_is_not_queued_again() -> None:
    """The Work as the controller wrote it (Applied with the first report) is not looked at again; the same change
    written by someone else is."""
    c, queued = _controller({})
    before, after = _work(applied=False), _work(applied=True)
    before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"] = "5", "9"
    c._written.record("karmada-es-m1/w", before, after)
    c._on_work_update(before, after)
    assert queued == []
    other = _work(applied=True)
    other["metadata"]["resourceVersion"] = "10"
    c._on_work_update(before, other)
    assert queued == ["work|karmada-es-m1|w"]
