"""ResourceInterpreterCustomization (RIC) objects: parsing, merging per target, running their scripts.

A RIC (``config.karmada.io/v1alpha1``, cluster-scoped) targets one exact ``apiVersion``/``kind`` and
holds a Lua script per hook under ``spec.customizations``. Several RICs may target the same kind:
they are taken in ascending ``metadata.name`` order and, per operation, the first non-empty script
wins, except ``dependencyInterpretation`` where every script runs and the results are merged
(deduplicated, sorted by apiVersion, kind, namespace, name). Karmada's admission webhook refuses two
RICs that define the same non-dependency hook for the same target; :meth:`CustomizationRegistry.conflicts`
reports such pairs. Besides Karmada's hooks, ``spec.customizations.restoreState`` (Flotilla's extension) holds
the ``RestoreState(desiredObj, restore)`` script of the RestoreState operation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from flotilla.interpreter import lua as _lua
from flotilla.interpreter.operations import (
    GVK,
    HOOK_FIELDS,
    JSON,
    REASON_ERROR,
    HookNotFoundError,
    InterpreterError,
    LuaScriptError,
    Operation,
    ReplicaResult,
    Source,
    restore_input,
)

__all__ = ["RIC_API_VERSION", "RIC_KIND", "Customization", "CustomizationFailure", "CustomizationRules", "CustomizationRegistry",
           "parse_customization"]

RIC_API_VERSION = "config.karmada.io/v1alpha1"
RIC_KIND = "ResourceInterpreterCustomization"
T = TypeVar("T")
log = logging.getLogger(__name__)
_OPERATION_BY_HOOK = {hook: op for op, hook in HOOK_FIELDS.items()}


@dataclass(frozen=True)
class Customization:
    """One RIC: its name, target and the scripts it sets (an empty script counts as unset)."""

    name: str
    target: GVK
    scripts: Mapping[Operation, str]


def parse_customization(obj: Mapping[str, Any]) -> Customization:
    """Validate a RIC object; the error says which field to fix."""
    if not isinstance(obj, Mapping):
        raise InterpreterError(f"a {RIC_KIND} must be an object, got {type(obj).__name__}")
    name = obj.get("metadata", {}).get("name", "") if isinstance(obj.get("metadata"), Mapping) else ""
    who = f"{RIC_KIND} {name!r}" if name else RIC_KIND
    if obj.get("kind") != RIC_KIND:
        raise InterpreterError(f"expected kind {RIC_KIND}, got {obj.get('kind')!r}")
    if obj.get("apiVersion") != RIC_API_VERSION:
        raise InterpreterError(f"{who}: apiVersion must be {RIC_API_VERSION}, got {obj.get('apiVersion')!r}")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InterpreterError(f"{who}: spec is missing")
    target = spec.get("target")
    if not isinstance(target, Mapping):
        raise InterpreterError(f"{who}: spec.target is missing (apiVersion and kind of the resource to customize)")
    api_version, kind = target.get("apiVersion"), target.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise InterpreterError(f"{who}: spec.target.apiVersion is not set")
    if not isinstance(kind, str) or not kind:
        raise InterpreterError(f"{who}: spec.target.kind is not set")
    hooks = spec.get("customizations")
    if hooks is None:
        hooks = {}
    if not isinstance(hooks, Mapping):
        raise InterpreterError(f"{who}: spec.customizations must be an object")
    scripts: dict[Operation, str] = {}
    for hook, body in hooks.items():
        op = _OPERATION_BY_HOOK.get(hook)
        if op is None:
            raise InterpreterError(f"{who}: unknown customization spec.customizations.{hook}; use one of "
                                   f"{', '.join(HOOK_FIELDS.values())}")
        if body is None:
            continue
        script = body.get("luaScript") if isinstance(body, Mapping) else None
        if not isinstance(script, str):
            raise InterpreterError(f"{who}: spec.customizations.{hook}.luaScript must be a string (the Lua script "
                                   f"defining {op.lua_function})")
        scripts[op] = script
    return Customization(str(name), GVK(api_version, kind), scripts)


@dataclass(frozen=True)
class CustomizationFailure:
    """One failing script call: which RIC, for which operation, why (``error``, ``timeout``, ``memory``), on which
    object (``namespace/name`` or ``name``), and the message."""

    customization: str
    operation: Operation
    reason: str
    target: GVK
    object: str
    message: str

    @classmethod
    def of(cls, error: LuaScriptError, obj: JSON) -> CustomizationFailure:
        md = obj.get("metadata") if isinstance(obj, Mapping) else None
        md = md if isinstance(md, Mapping) else {}
        ns, name = str(md.get("namespace") or ""), str(md.get("name") or "")
        assert error.operation is not None and error.gvk is not None
        return cls(error.customization, error.operation, error.reason, error.gvk,
                   f"{ns}/{name}" if ns else name, error.message)


@dataclass(frozen=True)
class CustomizationRules:
    """The merged scripts for one target: per operation the script and the RIC it came from."""

    target: GVK
    scripts: Mapping[Operation, tuple[str, str]] = field(default_factory=dict)  # op -> (RIC name, script)
    dependency_scripts: tuple[tuple[str, str], ...] = ()

    def has(self, operation: Operation) -> bool:
        if operation is Operation.INTERPRET_DEPENDENCY:
            return bool(self.dependency_scripts)
        return operation in self.scripts

    def script(self, operation: Operation) -> str | None:
        entry = self.scripts.get(operation)
        return entry[1] if entry else None

    def origin(self, operation: Operation) -> str:
        """Which RIC(s) the operation's script comes from, for messages."""
        if operation is Operation.INTERPRET_DEPENDENCY:
            names = [n for n, _ in self.dependency_scripts]
        else:
            names = [self.scripts[operation][0]] if operation in self.scripts else []
        return ", ".join(repr(n) for n in names)


class CustomizationRegistry:
    """All RICs, merged per target; runs their scripts. Immutable once built."""

    def __init__(self, customizations: Iterable[Customization | Mapping[str, Any]] = (), *,
                 limits: _lua.LuaLimits = _lua.DEFAULT_LIMITS,
                 print_sink: Callable[[str], None] | None = None,
                 on_failure: Callable[[CustomizationFailure], None] | None = None) -> None:
        parsed = [c if isinstance(c, Customization) else parse_customization(c) for c in customizations]
        self.customizations: tuple[Customization, ...] = tuple(sorted(parsed, key=lambda c: c.name))
        self.limits = limits
        self.print_sink = print_sink
        #: called (in the thread that ran the script) with every failing script call
        self.on_failure = on_failure
        scripts: dict[GVK, dict[Operation, tuple[str, str]]] = {}
        deps: dict[GVK, list[tuple[str, str]]] = {}
        for c in self.customizations:
            per_target = scripts.setdefault(c.target, {})
            deps.setdefault(c.target, [])
            for op, script in c.scripts.items():
                if not script:
                    continue
                if op is Operation.INTERPRET_DEPENDENCY:
                    deps[c.target].append((c.name, script))
                elif op not in per_target:
                    per_target[op] = (c.name, script)
        self._rules = {gvk: CustomizationRules(gvk, scripts[gvk], tuple(deps[gvk])) for gvk in scripts}

    @property
    def targets(self) -> tuple[GVK, ...]:
        return tuple(sorted(self._rules))

    def rules_for(self, gvk: GVK) -> CustomizationRules | None:
        return self._rules.get(gvk)

    def has_hook(self, gvk: GVK, operation: Operation) -> bool:
        rules = self._rules.get(gvk)
        return rules is not None and rules.has(operation)

    def conflicts(self) -> list[str]:
        """Pairs of RICs defining the same non-dependency hook for the same target (the webhook refuses them)."""
        seen: dict[tuple[GVK, Operation], str] = {}
        out = []
        for c in self.customizations:
            for op, script in c.scripts.items():
                if op is Operation.INTERPRET_DEPENDENCY or not script:
                    continue
                key = (c.target, op)
                if key in seen:
                    out.append(f"{RIC_KIND}s {seen[key]!r} and {c.name!r} both define "
                               f"{op.hook_field} for {c.target.api_version} {c.target.kind}")
                else:
                    seen[key] = c.name
        return out

    # -------------------------------------------------------------------------------- running

    def _script(self, obj: JSON, operation: Operation) -> tuple[GVK, str, str]:
        gvk = GVK.of(obj)
        rules = self._rules.get(gvk)
        script = rules.script(operation) if rules else None
        if rules is None or script is None:
            raise HookNotFoundError(f"no {RIC_KIND} defines {operation.hook_field} for {gvk.api_version} {gvk.kind}",
                                    operation=operation, gvk=gvk, source=Source.CUSTOMIZATION)
        return gvk, rules.origin(operation), script

    def _call(self, obj: JSON, operation: Operation, run: Callable[[str], T]) -> T:
        gvk, origin, script = self._script(obj, operation)
        try:
            return run(script)
        except InterpreterError as e:
            raise self._failed(obj, gvk, operation, self._rules[gvk].scripts[operation][0], e) from None

    def _failed(self, obj: JSON, gvk: GVK, operation: Operation, name: str, e: InterpreterError) -> LuaScriptError:
        """The error for a failing script of the RIC ``name``, after reporting it to ``on_failure``."""
        reason = e.reason if isinstance(e, LuaScriptError) else REASON_ERROR
        error = LuaScriptError(f"{RIC_KIND} {name!r}, spec.customizations.{operation.hook_field}: {e.message}",
                               operation=operation, gvk=gvk, source=Source.CUSTOMIZATION, reason=reason,
                               customization=name)
        if self.on_failure is not None:
            try:
                self.on_failure(CustomizationFailure.of(error, obj))
            except Exception:  # noqa: BLE001 - reporting must not change the answer
                log.exception("reporting a failing %s failed", RIC_KIND)
        return error

    def get_replicas(self, obj: JSON) -> ReplicaResult:
        return self._call(obj, Operation.INTERPRET_REPLICA, lambda s: _lua.lua_get_replicas(
            s, obj, limits=self.limits, print_sink=self.print_sink))

    def get_components(self, obj: JSON) -> list[dict[str, Any]]:
        return self._call(obj, Operation.INTERPRET_COMPONENT, lambda s: _lua.lua_get_components(
            s, obj, limits=self.limits, print_sink=self.print_sink))

    def revise_replica(self, obj: JSON, replicas: int) -> dict[str, Any]:
        return self._call(obj, Operation.REVISE_REPLICA, lambda s: _lua.lua_revise_replica(
            s, obj, replicas, limits=self.limits, print_sink=self.print_sink))

    def retain(self, desired: JSON, observed: JSON) -> dict[str, Any]:
        return self._call(desired, Operation.RETAIN, lambda s: _lua.lua_retain(
            s, desired, observed, limits=self.limits, print_sink=self.print_sink))

    def reflect_status(self, obj: JSON) -> JSON:
        return self._call(obj, Operation.INTERPRET_STATUS, lambda s: _lua.lua_reflect_status(
            s, obj, limits=self.limits, print_sink=self.print_sink))

    def aggregate_status(self, obj: JSON, items: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
        listed = list(items or ())
        return self._call(obj, Operation.AGGREGATE_STATUS, lambda s: _lua.lua_aggregate_status(
            s, obj, listed, limits=self.limits, print_sink=self.print_sink))

    def interpret_health(self, obj: JSON) -> bool:
        return self._call(obj, Operation.INTERPRET_HEALTH, lambda s: _lua.lua_interpret_health(
            s, obj, limits=self.limits, print_sink=self.print_sink))

    def restore_state(self, obj: JSON, restore: Mapping[str, Any]) -> dict[str, Any]:
        checked = restore_input(restore)  # the caller's mistake, not the script's: checked before it runs
        return self._call(obj, Operation.RESTORE_STATE, lambda s: _lua.lua_restore_state(
            s, obj, checked, limits=self.limits, print_sink=self.print_sink))

    def get_dependencies(self, obj: JSON) -> list[dict[str, Any]]:
        gvk = GVK.of(obj)
        rules = self._rules.get(gvk)
        if rules is None or not rules.dependency_scripts:
            raise HookNotFoundError(f"no {RIC_KIND} defines dependencyInterpretation for "
                                    f"{gvk.api_version} {gvk.kind}", operation=Operation.INTERPRET_DEPENDENCY,
                                    gvk=gvk, source=Source.CUSTOMIZATION)
        merged: dict[str, dict[str, Any]] = {}
        for name, script in rules.dependency_scripts:
            try:
                deps = _lua.lua_get_dependencies(script, obj, limits=self.limits, print_sink=self.print_sink)
            except InterpreterError as e:
                raise self._failed(obj, gvk, Operation.INTERPRET_DEPENDENCY, name, e) from None
            for d in deps:
                merged.setdefault(json.dumps(d, sort_keys=True), d)
        return sorted(merged.values(), key=lambda d: (d.get("apiVersion", ""), d.get("kind", ""),
                                                      d.get("namespace", ""), d.get("name", "")))
