"""The binding-status controller's hand-over of another controller's binding conditions."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from flotilla.api.labels import RESOURCE_BINDING_PERMANENT_ID_LABEL
from flotilla.api.resources import RESOURCE_BINDINGS
from flotilla.controllers.binding_status import SPEC_CHANGE_SETTLE
from flotilla.runtime.handoffs import ConditionHandoff, drop_handed_off_conditions, hand_off_conditions

COND = {"type": "StatePreserved", "status": "True", "reason": "StatePreserved", "message": "m"}


def _binding(permanent_id: str | None = "id-1") -> dict[str, Any]:
    labels = {RESOURCE_BINDING_PERMANENT_ID_LABEL: permanent_id} if permanent_id else {}
    return {"metadata": {"name": "b", "namespace": "ns", "labels": labels}}


def test_handed_off_conditions_are_pending_until_written_and_wake_the_binding_within_the_settle_time() -> None:
    queued: list[tuple[str, float]] = []
    handoff = ConditionHandoff(lambda key, after: queued.append((key, after)), SPEC_CHANGE_SETTLE)
    ctx = SimpleNamespace(extras={"binding-status-condition-handoff": handoff})
    assert hand_off_conditions(ctx, RESOURCE_BINDINGS, _binding(), [COND])
    assert queued == [("rb|ns|b", SPEC_CHANGE_SETTLE)]
    pending = handoff.pending("rb|ns|b")
    assert pending == [COND]
    handoff.settle("rb|ns|b", pending)
    assert handoff.pending("rb|ns|b") == []


def test_conditions_offered_while_a_write_is_in_flight_stay_pending() -> None:
    handoff = ConditionHandoff(lambda key, after: None, SPEC_CHANGE_SETTLE)
    handoff.offer("rb|ns|b", [COND])
    in_flight = handoff.pending("rb|ns|b")
    handoff.offer("rb|ns|b", [{**COND, "message": "newer"}])
    handoff.settle("rb|ns|b", in_flight)
    assert [c["message"] for c in handoff.pending("rb|ns|b")] == ["m", "newer"]


def test_a_newer_condition_of_the_owner_drops_what_was_handed_off() -> None:
    handoff = ConditionHandoff(lambda key, after: None, SPEC_CHANGE_SETTLE)
    ctx = SimpleNamespace(extras={"binding-status-condition-handoff": handoff})
    hand_off_conditions(ctx, RESOURCE_BINDINGS, _binding(), [COND])
    drop_handed_off_conditions(ctx, RESOURCE_BINDINGS, _binding())
    assert handoff.pending("rb|ns|b") == []


def test_no_hand_off_without_the_controller_or_without_a_permanent_id() -> None:
    assert not hand_off_conditions(SimpleNamespace(extras={}), RESOURCE_BINDINGS, _binding(), [COND])
    handoff = ConditionHandoff(lambda key, after: None, SPEC_CHANGE_SETTLE)
    ctx = SimpleNamespace(extras={"binding-status-condition-handoff": handoff})
    assert not hand_off_conditions(ctx, RESOURCE_BINDINGS, _binding(None), [COND])
