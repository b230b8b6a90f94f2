"""What the controllers of one controller-manager tell each other through ``ControllerContext.extras``, so that
no controller imports another: whether the graceful-eviction controller runs here, and the conditions handed to
the binding-status controller to be written with its next status write."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flotilla.api.labels import (
    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    RESOURCE_BINDING_PERMANENT_ID_LABEL,
)
from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS
from flotilla.client import Resource

#: ``ControllerContext.extras`` key set while this controller runs (enabled) in the controller-manager.
_RUNNING = "graceful-eviction-running"


def graceful_eviction_running(ctx: Any) -> bool:
    """Whether this controller runs in the controller-manager of ``ctx``. Then:

    * the task producers beside it (taint manager, application failover) write new tasks with their
      ``creationTimestamp``: this controller would stamp the task on its first pass anyway, and writing it with
      the task saves that write (and a generation, so a scheduler pass);
    * it stamps the ``healthyAt`` that consecutive failovers read (D5) of a binding with eviction tasks
      (:func:`~flotilla.failover.state.injected_state_stamp`) with the task removal the same Health allows, so
      the binding-status controller leaves that stamp to it.
    """
    return bool(ctx.extras.get(_RUNNING))


def mark_graceful_eviction_running(ctx: Any) -> None:
    """Said by the graceful-eviction controller when it starts in the controller-manager of ``ctx``."""
    ctx.extras[_RUNNING] = True


HANDOFF = "binding-status-condition-handoff"  # the ConditionHandoff in ControllerContext.extras


class ConditionHandoff:
    """Binding conditions another controller of this controller-manager hands over to be written with this
    controller's next status write of the binding (the taint manager's ``StatePreserved`` after an eviction:
    the old Work's deletion or the spec change brings the binding here shortly anyway, so one status write
    carries both). Keys are this controller's (``rb|<ns>|<name>``, ``crb|<name>``)."""

    def __init__(self, enqueue: Callable[[str, float], None], settle: float) -> None:
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._enqueue = enqueue
        self._settle = settle

    def offer(self, key: str, conditions: list[dict[str, Any]]) -> None:
        """Queue ``conditions`` (later ones of the same type win) and look at the binding within
        ``settle`` seconds (sooner when a Work event comes first)."""
        self._pending[key] = [*self._pending.get(key, []), *(dict(c) for c in conditions)]
        self._enqueue(key, self._settle)

    def pending(self, key: str) -> list[dict[str, Any]]:
        return self._pending.get(key, [])

    def settle(self, key: str, written: list[dict[str, Any]]) -> None:
        """``written`` is on the binding now: forget it unless more was offered meanwhile."""
        if written and self._pending.get(key) is written:
            del self._pending[key]

    def drop(self, key: str) -> None:
        """Forget what is pending for ``key`` (the binding is gone, or its owner writes a newer condition)."""
        self._pending.pop(key, None)


def status_key(res: Resource, binding: Mapping[str, Any]) -> str:
    md = binding.get("metadata") or {}
    if res is CLUSTER_RESOURCE_BINDINGS:
        return f"crb|{md.get('name')}"
    return f"rb|{md.get('namespace')}|{md.get('name')}"


def hand_off_conditions(ctx: Any, res: Resource, binding: Mapping[str, Any],
                        conditions: list[dict[str, Any]]) -> bool:
    """Hand ``conditions`` of ``binding`` to the binding-status controller running in this controller-manager
    (written with its next status write); ``False`` when it does not run here (write them yourself)."""
    handoff = ctx.extras.get(HANDOFF)
    label = CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL if res is CLUSTER_RESOURCE_BINDINGS else \
        RESOURCE_BINDING_PERMANENT_ID_LABEL
    labels = (binding.get("metadata") or {}).get("labels") or {}
    if not isinstance(handoff, ConditionHandoff) or not labels.get(label):
        return False  # not running here, or a binding it does not look at (no permanent id)
    handoff.offer(status_key(res, binding), conditions)
    return True


def drop_handed_off_conditions(ctx: Any, res: Resource, binding: Mapping[str, Any]) -> None:
    """Forget conditions handed over for ``binding`` and not written yet (a newer condition supersedes them)."""
    handoff = ctx.extras.get(HANDOFF)
    if isinstance(handoff, ConditionHandoff):
        handoff.drop(status_key(res, binding))
