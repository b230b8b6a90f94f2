"""The resource interpreter: what Flotilla knows about a kind (replicas, status, health, dependencies).

Pure functions over JSON objects, no I/O. The entry point is :class:`ResourceInterpreter`
(:mod:`flotilla.interpreter.dispatch`), which asks, per operation, a ResourceInterpreterCustomization
Lua script first (:mod:`~flotilla.interpreter.customization`, :mod:`~flotilla.interpreter.lua`), then
the built-in third-party rules (:mod:`~flotilla.interpreter.thirdparty`), then the native rules
(:mod:`~flotilla.interpreter.native`), then the default for unknown kinds::

    from flotilla.interpreter import Operation, ResourceInterpreter

    interp = ResourceInterpreter(ric_objects)
    interp.get_replicas(deployment)            # ReplicaResult(replicas=3, requirements={...})
    interp.reflect_status(member_object)       # the status stored in the Work
    interp.health(member_object)               # ResourceHealth.HEALTHY / UNHEALTHY / UNKNOWN
    interp.interpret(Operation.RETAIN, desired=d, observed=o)   # InterpretResult(value, source)
    interp.restore_state(flink_deployment, {"path": "s3://b/ck/<jobId>/chk-42", "kind": "checkpoint",
                                            "jobId": "<jobId>", "checkpointId": 42, "existed": False, "nonce": 1})
"""

from flotilla.interpreter.customization import (
    Customization,
    CustomizationFailure,
    CustomizationRegistry,
    CustomizationRules,
    parse_customization,
)
from flotilla.interpreter.dispatch import ResourceInterpreter, interpret
from flotilla.interpreter.lua import DEFAULT_LIMITS, LuaLimits, check_script
from flotilla.interpreter.native import prune_irrelevant_fields
from flotilla.interpreter.operations import (
    GVK,
    HOOK_FIELDS,
    KARMADA_OPERATIONS,
    LUA_FUNCTIONS,
    RESTORE_KINDS,
    RESULT_NAMES,
    HookNotFoundError,
    InterpreterError,
    InterpretResult,
    LuaScriptError,
    Operation,
    ReplicaResult,
    ResourceHealth,
    Source,
    restore_input,
)

__all__ = [
    "GVK",
    "HOOK_FIELDS",
    "KARMADA_OPERATIONS",
    "LUA_FUNCTIONS",
    "RESTORE_KINDS",
    "RESULT_NAMES",
    "DEFAULT_LIMITS",
    "Customization",
    "CustomizationFailure",
    "CustomizationRegistry",
    "CustomizationRules",
    "HookNotFoundError",
    "InterpretResult",
    "InterpreterError",
    "LuaLimits",
    "LuaScriptError",
    "Operation",
    "ReplicaResult",
    "ResourceHealth",
    "ResourceInterpreter",
    "Source",
    "check_script",
    "interpret",
    "parse_customization",
    "prune_irrelevant_fields",
    "restore_input",
]
