"""The dispatch chain: customization > third-party > native > default.

For an operation on an object, the first link that has a hook for the object's exact
``apiVersion``/``kind`` answers, and its error is the answer (no fall-through on error):

1. a ResourceInterpreterCustomization Lua script (:mod:`flotilla.interpreter.customization`);
2. a built-in rule for a well-known CRD (:mod:`flotilla.interpreter.thirdparty`);
3. a built-in rule for a Kubernetes kind (:mod:`flotilla.interpreter.native`); InterpretStatus is
   answered here for every kind (the whole ``.status`` when the kind has no rule);
4. the default for kinds nobody interprets: 0 replicas and no requirements (not a workload: the
   object goes unchanged to every selected cluster), replicas not revised, nothing retained, status
   not aggregated (the template is returned unchanged), **healthy**, no dependencies. There is no
   default for InterpretComponent or RestoreState (:class:`HookNotFoundError`): a kind nobody taught to restore
   is not silently sent without its restore path.

Lua customizations are the one link that can be slow: a script may use its whole time budget
(:class:`~flotilla.interpreter.lua.LuaLimits`). Async callers therefore await
:meth:`ResourceInterpreter.offload`, which runs a call answered by a customization in one of
:data:`LUA_WORKERS` threads (lupa releases the GIL while Lua runs), so the event loop keeps going;
calls answered by built-in rules run inline.

Karmada's webhook interpreters (ResourceInterpreterWebhookConfiguration) are not part of this chain.
Callers that must behave differently when nobody has a hook (the detector does not build
requirements, the status controller does not write the template's status...) ask
:meth:`ResourceInterpreter.hook_enabled` first, or look at :attr:`InterpretResult.source`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from flotilla.interpreter import native, thirdparty
from flotilla.interpreter.customization import Customization, CustomizationFailure, CustomizationRegistry
from flotilla.interpreter.lua import DEFAULT_LIMITS, LuaLimits
from flotilla.interpreter.operations import (
    GVK,
    JSON,
    HookNotFoundError,
    InterpreterError,
    InterpretResult,
    Operation,
    ReplicaResult,
    ResourceHealth,
    Source,
    restore_input,
)

__all__ = ["LUA_WORKERS", "ResourceInterpreter", "interpret", "lua_executor"]

T = TypeVar("T")

#: Threads running Lua customizations for async callers. Scripts are CPU-bound, so this also caps the CPU
#: (and, with the per-call memory budget, the memory) that misbehaving scripts can take at once.
LUA_WORKERS = 2
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def lua_executor() -> ThreadPoolExecutor:
    """The process's pool of :data:`LUA_WORKERS` threads for Lua customizations (created on first use)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=LUA_WORKERS, thread_name_prefix="lua")
        return _executor


class ResourceInterpreter:
    """The interpreter chain over a fixed set of customizations. Every method is a pure function.

    ``customizations``: RIC objects (mappings) or parsed :class:`Customization` values, or a
    ready :class:`CustomizationRegistry`. ``third_party=False`` leaves the built-in CRD rules out.
    ``on_failure`` is called with every failing customization script call (from the thread that ran it).
    """

    def __init__(self, customizations: CustomizationRegistry | Iterable[Customization | Mapping[str, Any]] = (), *,
                 third_party: bool = True, limits: LuaLimits = DEFAULT_LIMITS,
                 print_sink: Callable[[str], None] | None = None,
                 on_failure: Callable[[CustomizationFailure], None] | None = None) -> None:
        if isinstance(customizations, CustomizationRegistry):
            self.customizations = customizations
        else:
            self.customizations = CustomizationRegistry(customizations, limits=limits, print_sink=print_sink,
                                                        on_failure=on_failure)
        self.third_party = third_party

    async def offload(self, operation: Operation, obj: Any, call: Callable[[], T]) -> T:
        """``call()``, which runs ``operation`` on ``obj`` with this interpreter: awaited in a Lua worker thread
        (:func:`lua_executor`) when a customization answers it, so that a script using its whole time budget
        does not hold up the event loop; called inline otherwise."""
        try:
            inline = self.source(GVK.of(obj), operation) is not Source.CUSTOMIZATION
        except InterpreterError:  # not an object: the call says so
            inline = True
        if inline:
            return call()
        return await asyncio.get_running_loop().run_in_executor(lua_executor(), call)

    # ----------------------------------------------------------------------------- which link

    def source(self, gvk: GVK | Mapping[str, Any], operation: Operation) -> Source:
        """The link that answers ``operation`` for ``gvk`` (``FALLBACK`` when none has a hook)."""
        gvk = gvk if isinstance(gvk, GVK) else GVK.of(gvk)
        if self.customizations.has_hook(gvk, operation):
            return Source.CUSTOMIZATION
        if self.third_party and thirdparty.has_hook(gvk, operation):
            return Source.THIRD_PARTY
        if native.has_hook(gvk, operation):
            return Source.NATIVE
        return Source.FALLBACK

    def hook_enabled(self, gvk: GVK | Mapping[str, Any], operation: Operation) -> bool:
        """Whether any link has a hook (Karmada's ``HookEnabled``; InterpretStatus: always)."""
        return self.source(gvk, operation) is not Source.FALLBACK

    def _links(self, function: str, *args: Any) -> dict[Source, Callable[[], Any]]:
        """``function(*args)`` of each link that has it: the customizations, the third-party rules and the native
        rules name the function answering an operation alike (``get_replicas``, ``retain``, ...)."""
        links = ((Source.CUSTOMIZATION, self.customizations), (Source.THIRD_PARTY, thirdparty), (Source.NATIVE, native))
        return {source: functools.partial(getattr(link, function), *args)
                for source, link in links if hasattr(link, function)}

    def _dispatch(self, operation: Operation, obj: JSON, calls: Mapping[Source, Callable[[], Any]],
                  fallback: Callable[[], Any] | None) -> InterpretResult:
        if not isinstance(obj, Mapping):
            raise InterpreterError(f"{operation}: expected a Kubernetes object, got {type(obj).__name__}",
                                   operation=operation)
        gvk = GVK.of(obj)
        src = self.source(gvk, operation)
        if src is Source.FALLBACK:
            if fallback is None:
                raise HookNotFoundError(f"{operation}: nothing interprets {gvk.api_version} {gvk.kind} "
                                        f"(define spec.customizations.{operation.hook_field} in a "
                                        "ResourceInterpreterCustomization)", operation=operation, gvk=gvk,
                                        source=Source.FALLBACK)
            return InterpretResult(operation, fallback(), Source.FALLBACK)
        try:
            value = calls[src]()
        except InterpreterError as e:
            e.operation, e.gvk, e.source = operation, gvk, src
            raise
        return InterpretResult(operation, value, src)

    # ----------------------------------------------------------------------------- operations

    def interpret_replica(self, obj: JSON) -> InterpretResult:
        return self._dispatch(Operation.INTERPRET_REPLICA, obj, self._links("get_replicas", obj),
                              lambda: ReplicaResult(0, None))

    def get_replicas(self, obj: JSON) -> ReplicaResult:
        """InterpretReplica: replicas and per-replica requirements (fallback: 0, None)."""
        value: ReplicaResult = self.interpret_replica(obj).value
        return value

    def interpret_component(self, obj: JSON) -> InterpretResult:
        return self._dispatch(Operation.INTERPRET_COMPONENT, obj, self._links("get_components", obj), None)

    def get_components(self, obj: JSON) -> list[dict[str, Any]]:
        """InterpretComponent: ``[{name, replicas, replicaRequirements}]`` (no fallback; a script returning nil: [])."""
        value: list[dict[str, Any]] | None = self.interpret_component(obj).value
        return value or []

    def interpret_revise_replica(self, obj: JSON, replicas: int) -> InterpretResult:
        return self._dispatch(Operation.REVISE_REPLICA, obj, self._links("revise_replica", obj, replicas),
                              lambda: copy.deepcopy(obj))

    def revise_replica(self, obj: JSON, replicas: int) -> JSON:
        """ReviseReplica: the object for a cluster that gets ``replicas`` (fallback: unchanged)."""
        return self.interpret_revise_replica(obj, replicas).value

    def interpret_retain(self, desired: JSON, observed: JSON) -> InterpretResult:
        return self._dispatch(Operation.RETAIN, desired, self._links("retain", desired, observed),
                              lambda: copy.deepcopy(desired))

    def retain(self, desired: JSON, observed: JSON) -> JSON:
        """Retain: ``desired`` keeping the member-owned fields of ``observed`` (fallback: desired)."""
        return self.interpret_retain(desired, observed).value

    def interpret_status(self, obj: JSON) -> InterpretResult:
        return self._dispatch(Operation.INTERPRET_STATUS, obj, self._links("reflect_status", obj), None)

    def reflect_status(self, obj: JSON) -> JSON | None:
        """InterpretStatus: the status recorded for a member object (``None`` = no status)."""
        return self.interpret_status(obj).value

    def interpret_aggregate_status(self, obj: JSON, items: Iterable[Mapping[str, Any]] | None, *,
                                   now: datetime | None = None) -> InterpretResult:
        listed = None if items is None else list(items)
        return self._dispatch(Operation.AGGREGATE_STATUS, obj, {
            Source.CUSTOMIZATION: lambda: self.customizations.aggregate_status(obj, listed),
            Source.THIRD_PARTY: lambda: thirdparty.aggregate_status(obj, listed or []),
            Source.NATIVE: lambda: native.aggregate_status(obj, listed or [], now=now),
        }, lambda: copy.deepcopy(obj))

    def aggregate_status(self, obj: JSON, items: Iterable[Mapping[str, Any]] | None, *,
                         now: datetime | None = None) -> JSON:
        """AggregateStatus: the template with the members' statuses aggregated (fallback: unchanged)."""
        return self.interpret_aggregate_status(obj, items, now=now).value

    def interpret_health(self, obj: JSON) -> InterpretResult:
        return self._dispatch(Operation.INTERPRET_HEALTH, obj, self._links("interpret_health", obj), lambda: True)

    def healthy(self, obj: JSON) -> bool:
        """InterpretHealth: whether the member object is healthy (fallback: healthy); errors raise."""
        return bool(self.interpret_health(obj).value)

    def health(self, obj: JSON) -> ResourceHealth:
        """Health as the work-status controller records it: an interpreter error is ``Unknown``."""
        try:
            return ResourceHealth.HEALTHY if self.healthy(obj) else ResourceHealth.UNHEALTHY
        except InterpreterError:
            return ResourceHealth.UNKNOWN

    def interpret_dependency(self, obj: JSON) -> InterpretResult:
        return self._dispatch(Operation.INTERPRET_DEPENDENCY, obj, self._links("get_dependencies", obj), list)

    def get_dependencies(self, obj: JSON) -> list[dict[str, Any]]:
        """InterpretDependency: ``[{apiVersion, kind, namespace, name | labelSelector}]`` (fallback: [])."""
        value: list[dict[str, Any]] = self.interpret_dependency(obj).value
        return value

    def interpret_restore_state(self, obj: JSON, restore: Mapping[str, Any]) -> InterpretResult:
        checked = restore_input(restore)
        return self._dispatch(Operation.RESTORE_STATE, obj, self._links("restore_state", obj, checked), None)

    def restore_state(self, obj: JSON, restore: Mapping[str, Any]) -> JSON:
        """RestoreState (Flotilla's operation): ``obj`` set to restart from the snapshot ``restore`` names.

        ``restore``: ``{"path", "kind": "checkpoint"|"savepoint", "jobId", "checkpointId": int|None,
        "existed": bool, "nonce": int}`` (:func:`~flotilla.interpreter.operations.restore_input`). No fallback:
        ask :meth:`hook_enabled` first; a kind nobody interprets raises :class:`HookNotFoundError`.
        """
        return self.interpret_restore_state(obj, restore).value

    # ---------------------------------------------------------------------------- one entry

    def interpret(self, operation: Operation | str, *, desired: JSON = None, observed: JSON = None,
                  status_items: Iterable[Mapping[str, Any]] | None = None, replicas: int = 0,
                  now: datetime | None = None, restore: Mapping[str, Any] | None = None) -> InterpretResult:
        """Run any operation. The object is ``desired`` or ``observed`` (Retain takes both).

        Retain(desired, observed); ReviseReplica(object, replicas); AggregateStatus(object,
        status_items); RestoreState(object, restore); the others take the one object.
        """
        op = operation if isinstance(operation, Operation) else Operation.parse(operation)
        if op is Operation.RETAIN:
            if desired is None or observed is None:
                raise InterpreterError("Retain needs both the desired and the observed object", operation=op)
            return self.interpret_retain(desired, observed)
        obj = desired if desired is not None else observed
        if obj is None:
            raise InterpreterError(f"{op} needs an object (desired or observed)", operation=op)
        if op is Operation.INTERPRET_REPLICA:
            return self.interpret_replica(obj)
        if op is Operation.INTERPRET_COMPONENT:
            return self.interpret_component(obj)
        if op is Operation.REVISE_REPLICA:
            return self.interpret_revise_replica(obj, replicas)
        if op is Operation.INTERPRET_STATUS:
            return self.interpret_status(obj)
        if op is Operation.AGGREGATE_STATUS:
            return self.interpret_aggregate_status(obj, status_items, now=now)
        if op is Operation.INTERPRET_HEALTH:
            return self.interpret_health(obj)
        if op is Operation.RESTORE_STATE:
            if restore is None:
                raise InterpreterError("RestoreState needs the restore input (path, kind, jobId, checkpointId, "
                                       "existed, nonce)", operation=op)
            return self.interpret_restore_state(obj, restore)
        return self.interpret_dependency(obj)


def interpret(operation: Operation | str, *, customizations: Iterable[Mapping[str, Any]] = (),
              desired: JSON = None, observed: JSON = None,
              status_items: Iterable[Mapping[str, Any]] | None = None, replicas: int = 0,
              now: datetime | None = None, restore: Mapping[str, Any] | None = None) -> InterpretResult:
    """One-shot :meth:`ResourceInterpreter.interpret` with the given RIC objects."""
    return ResourceInterpreter(customizations).interpret(operation, desired=desired, observed=observed,
                                                         status_items=status_items, replicas=replicas, now=now,
                                                         restore=restore)
