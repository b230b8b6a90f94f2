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
    "KARMADA_OPERATIONS",
    "RESTORE_KINDS",
    "describe_value",
    "restore_input",
]

JSON = Any  # a decoded JSON value

RETAIN_REPLICAS_LABEL = "resourcetemplate.karmada.io/retain-replicas"
RESOURCE_TEMPLATE_GENERATION_ANNOTATION = "resourcetemplate.karmada.io/generation"


class Operation(StrEnum):
    """The interpreter operations: Karmada's ``InterpreterOperation`` values, and Flotilla's ``RestoreState``.

    ``RestoreState`` (Flotilla only) writes where a stateful workload restarts from into the object sent to a
    cluster: it takes the object and a restore input (:func:`restore_input`) and returns the object.
    """

    INTERPRET_REPLICA = "InterpretReplica"
    INTERPRET_COMPONENT = "InterpretComponent"
    REVISE_REPLICA = "ReviseReplica"
    RETAIN = "Retain"
    INTERPRET_STATUS = "InterpretStatus"
    AGGREGATE_STATUS = "AggregateStatus"
    INTERPRET_HEALTH = "InterpretHealth"
    INTERPRET_DEPENDENCY = "InterpretDependency"
    RESTORE_STATE = "RestoreState"

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

    @property
    def karmada(self) -> bool:
        """Whether Karmada has this operation (``RestoreState`` is Flotilla's)."""
        return self in KARMADA_OPERATIONS


HOOK_FIELDS: dict[Operation, str] = {
    Operation.RETAIN: "retention",
    Operation.INTERPRET_REPLICA: "replicaResource",
    Operation.INTERPRET_COMPONENT: "componentResource",
    Operation.REVISE_REPLICA: "replicaRevision",
    Operation.INTERPRET_STATUS: "statusReflection",
    Operation.AGGREGATE_STATUS: "statusAggregation",
    Operation.INTERPRET_HEALTH: "healthInterpretation",
    Operation.INTERPRET_DEPENDENCY: "dependencyInterpretation",
    Operation.RESTORE_STATE: "restoreState",
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
    Operation.RESTORE_STATE: "RestoreState",
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
    Operation.RESTORE_STATE: ("restored",),
}

#: The operations Karmada has (every one but Flotilla's ``RestoreState``).
KARMADA_OPERATIONS = frozenset(op for op in Operation if op is not Operation.RESTORE_STATE)

#: What a restore input's ``kind`` may be.
RESTORE_KINDS = ("checkpoint", "savepoint")
_RESTORE_KEYS = ("path", "kind", "jobId", "checkpointId", "existed", "nonce")


def restore_input(restore: Any) -> dict[str, Any]:
    """The restore input of ``RestoreState``, checked: a new dict with exactly the keys below.

    ``path`` (non-empty string: the snapshot's URI), ``kind`` (``checkpoint`` or ``savepoint``), ``jobId`` (string,
    the job the snapshot belongs to; ``""`` when unknown), ``checkpointId`` (whole number or ``None``),
    ``existed`` (boolean: the object already exists in the cluster, default false) and ``nonce`` (whole number,
    default 0: for kinds that must be told to redeploy from the path, e.g. FlinkDeployment's
    ``savepointRedeployNonce``). Raises :class:`InterpreterError` naming the key to fix.
    """
    op = Operation.RESTORE_STATE
    if type(restore) is not dict and not isinstance(restore, Mapping):
        raise InterpreterError(f"RestoreState: the restore input must be an object with {', '.join(_RESTORE_KEYS)}, "
                               f"got {type(restore).__name__}", operation=op)
    unknown = sorted(str(k) for k in restore if k not in _RESTORE_KEYS)
    if unknown:
        raise InterpreterError(f"RestoreState: restore.{unknown[0]} is not a restore key; use "
                               f"{', '.join(_RESTORE_KEYS)}", operation=op)
    path = restore.get("path")
    if not isinstance(path, str) or not path.strip():
        raise InterpreterError("RestoreState: restore.path must be a non-empty string (the snapshot's URI)",
                               operation=op)
    kind = restore.get("kind")
    if kind not in RESTORE_KINDS:
        raise InterpreterError(f"RestoreState: restore.kind must be one of {', '.join(RESTORE_KINDS)}, got {kind!r}",
                               operation=op)
    job_id = restore.get("jobId")
    if job_id is None:
        job_id = ""
    if not isinstance(job_id, str):
        raise InterpreterError(f"RestoreState: restore.jobId must be a string, got {describe_value(job_id)}", operation=op)
    checkpoint_id = restore.get("checkpointId")
    if checkpoint_id is not None and not _whole(checkpoint_id):
        raise InterpreterError(f"RestoreState: restore.checkpointId must be a whole number or null, got "
                               f"{describe_value(checkpoint_id)}", operation=op)
    existed = restore.get("existed", False)
    if not isinstance(existed, bool):
        raise InterpreterError(f"RestoreState: restore.existed must be true or false, got {describe_value(existed)}",
                               operation=op)
    nonce = restore.get("nonce", 0)
    if not _whole(nonce):
        raise InterpreterError(f"RestoreState: restore.nonce must be a whole number, got {describe_value(nonce)}",
                               operation=op)
    return {"path": path, "kind": kind, "jobId": job_id,
            "checkpointId": None if checkpoint_id is None else int(checkpoint_id),
            "existed": existed, "nonce": int(nonce)}


def _whole(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    return isinstance(v, float) and v.is_integer()


def describe_value(v: Any) -> str:
    """A decoded value as an error message names it: "an object", "an array", or its repr."""
    if isinstance(v, Mapping):
        return "an object"
    if isinstance(v, list):
        return "an array"
    return repr(v)


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
