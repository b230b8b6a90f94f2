"""Operation names, the shapes interpreters return, and their errors.

Objects are plain JSON values (``dict``/``list``/``str``/``int``/``float``/``bool``/``None``), as they
come from the API server. Every interpreter function is pure: it never changes its arguments and
returns new values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "Operation",
    "Source",
    "ResourceHealth",
    "GVK",
    "ReplicaResult",
    "InterpretResult",
    "InterpreterError",
    "HookNotFoundError",
    "LuaScriptError",
    "FAILURE_REASONS",
    "REASON_ERROR",
    "REASON_MEMORY",
    "REASON_TIMEOUT",
    "JSON",
    "HOOK_FIELDS",
    "LUA_FUNCTIONS",
    "RESULT_NAMES",
]

JSON = Any  # a decoded JSON value

RETAIN_REPLICAS_LABEL = "resourcetemplate.karmada.io/retain-replicas"
RESOURCE_TEMPLATE_GENERATION_ANNOTATION = "resourcetemplate.karmada.io/generation"


class Operation(StrEnum):
    """The interpreter operations (Karmada's ``InterpreterOperation`` values)."""

    INTERPRET_REPLICA = "InterpretReplica"
    INTERPRET_COMPONENT = "InterpretComponent"
    REVISE_REPLICA = "ReviseReplica"
    RETAIN = "Retain"
    INTERPRET_STATUS = "InterpretStatus"
    AGGREGATE_STATUS = "AggregateStatus"
    INTERPRET_HEALTH = "InterpretHealth"
    INTERPRET_DEPENDENCY = "InterpretDependency"

    @classmethod
    def parse(cls, name: str) -> Operation:
        """The operation called ``name``, ignoring case; the RIC hook names are accepted too."""
        key = name.strip().lower()
        for op in cls:
            if key in (op.value.lower(), HOOK_FIELDS[op].lower(), LUA_FUNCTIONS[op].lower()):
                return op
        raise ValueError(f"operation {name!r} is not supported. Use one of: {', '.join(o.value for o in cls)}")

    @property
    def hook_field(self) -> str:
        """The key under ``spec.customizations`` of a ResourceInterpreterCustomization."""
        return HOOK_FIELDS[self]

    @property
    def lua_function(self) -> str:
        """The global function a customization script must define."""
        return LUA_FUNCTIONS[self]


HOOK_FIELDS: dict[Operation, str] = {
    Operation.RETAIN: "retention",
    Operation.INTERPRET_REPLICA: "replicaResource",
    Operation.INTERPRET_COMPONENT: "componentResource",
    Operation.REVISE_REPLICA: "replicaRevision",
    Operation.INTERPRET_STATUS: "statusReflection",
    Operation.AGGREGATE_STATUS: "statusAggregation",
    Operation.INTERPRET_HEALTH: "healthInterpretation",
    Operation.INTERPRET_DEPENDENCY: "dependencyInterpretation",
}

LUA_FUNCTIONS: dict[Operation, str] = {
    Operation.RETAIN: "Retain",
    Operation.INTERPRET_REPLICA: "GetReplicas",
    Operation.INTERPRET_COMPONENT: "GetComponents",
    Operation.REVISE_REPLICA: "ReviseReplica",
    Operation.INTERPRET_STATUS: "ReflectStatus",
    Operation.AGGREGATE_STATUS: "AggregateStatus",
    Operation.INTERPRET_HEALTH: "InterpretHealth",
    Operation.INTERPRET_DEPENDENCY: "GetDependencies",
}

# The names ``flotilla interpret`` (like ``karmadactl interpret``) prints before each result.
RESULT_NAMES: dict[Operation, tuple[str, ...]] = {
    Operation.RETAIN: ("retained",),
    Operation.INTERPRET_REPLICA: ("replica", "requires"),
    Operation.INTERPRET_COMPONENT: ("components",),
    Operation.REVISE_REPLICA: ("revised",),
    Operation.INTERPRET_STATUS: ("status",),
    Operation.AGGREGATE_STATUS: ("aggregatedStatus",),
    Operation.INTERPRET_HEALTH: ("healthy",),
    Operation.INTERPRET_DEPENDENCY: ("dependencies",),
}


class Source(StrEnum):
    """Which link of the dispatch chain answered."""

    CUSTOMIZATION = "customization"  # a ResourceInterpreterCustomization Lua script
    THIRD_PARTY = "thirdparty"  # a built-in rule for a well-known CRD (FlinkDeployment)
    NATIVE = "native"  # a built-in rule for a Kubernetes kind
    FALLBACK = "fallback"  # nobody has a hook: the documented default for unknown kinds


class ResourceHealth(StrEnum):
    """Health as the work-status controller records it."""

    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, order=True)
class GVK:
    """``apiVersion`` + ``kind``: what interpreters are keyed by (exact match, no version fallback)."""

    api_version: str
    kind: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> GVK:
        if type(obj) is not dict and not isinstance(obj, Mapping):
            raise InterpreterError(f"expected a Kubernetes object (a mapping), got {type(obj).__name__}")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not kind:
            raise InterpreterError("the object has no apiVersion/kind; give the whole object, "
                                   "with apiVersion and kind set")
        return cls(api_version, kind)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


@dataclass(frozen=True)
class ReplicaResult:
    """What ``GetReplicas`` answers: desired replicas and per-replica requirements (``None`` = none)."""

    replicas: int
    requirements: dict[str, Any] | None = None


@dataclass(frozen=True)
class InterpretResult:
    """One operation's answer with the chain link that produced it.

    ``value`` is the operation's natural result (``ReplicaResult`` for InterpretReplica, ``bool`` for
    InterpretHealth, the status or ``None`` for InterpretStatus, a list of dicts for InterpretDependency
    and InterpretComponent, an object for the others).
    """

    operation: Operation
    value: Any
    source: Source
    named: tuple[tuple[str, Any], ...] = field(default=())

    def named_values(self) -> tuple[tuple[str, Any], ...]:
        """The results as ``karmadactl interpret`` names them (``replica``/``requires``, ``healthy``...)."""
        if self.named:
            return self.named
        if self.operation is Operation.INTERPRET_REPLICA:
            r: ReplicaResult = self.value
            return (("replica", r.replicas), ("requires", r.requirements))
        return ((RESULT_NAMES[self.operation][0], self.value),)


class InterpreterError(Exception):
    """An interpreter could not answer (bad object, failing script...). The message says what to fix."""

    def __init__(self, message: str, *, operation: Operation | None = None, gvk: GVK | None = None,
                 source: Source | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.operation = operation
        self.gvk = gvk
        self.source = source

    def __str__(self) -> str:
        return self.message


class HookNotFoundError(InterpreterError):
    """No interpreter in the chain implements the operation for the kind, and it has no default."""


#: Why a Lua script failed (:attr:`LuaScriptError.reason`): it raised or returned something unusable, ran out of
#: its time budget, or out of its memory budget.
REASON_ERROR = "error"
REASON_TIMEOUT = "timeout"
REASON_MEMORY = "memory"
FAILURE_REASONS = (REASON_ERROR, REASON_TIMEOUT, REASON_MEMORY)


class LuaScriptError(InterpreterError):
    """A customization's Lua script failed: syntax, runtime error, time or memory limit, wrong result.

    ``reason`` is one of :data:`FAILURE_REASONS`; ``customization`` names the ResourceInterpreterCustomization(s)
    the script comes from (empty when a script is run on its own).
    """

    def __init__(self, message: str, *, operation: Operation | None = None, gvk: GVK | None = None,
                 source: Source | None = None, reason: str = REASON_ERROR, customization: str = "") -> None:
        super().__init__(message, operation=operation, gvk=gvk, source=source)
        self.reason = reason
        self.customization = customization
