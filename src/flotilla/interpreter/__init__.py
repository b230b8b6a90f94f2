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

from __future__ import annotations

from flotilla.kube.lazy_exports import lazy_exports

#: sub-module -> the names it defines, imported on first use (PEP 562): a command's parser that needs only
#: :class:`~flotilla.interpreter.operations.Operation` must not load the Lua runtime
__getattr__, __all__ = lazy_exports(__name__, {
    "customization": ("Customization", "CustomizationFailure", "CustomizationRegistry", "CustomizationRules",
                      "parse_customization"),
    "dispatch": ("ResourceInterpreter", "interpret"),
    "lua": ("DEFAULT_LIMITS", "LuaLimits", "check_script"),
    "native": ("prune_irrelevant_fields",),
    "operations": ("GVK", "HOOK_FIELDS", "KARMADA_OPERATIONS", "LUA_FUNCTIONS", "RESTORE_KINDS", "RESULT_NAMES",
                   "HookNotFoundError", "InterpreterError", "InterpretResult", "LuaScriptError", "Operation",
                   "ReplicaResult", "ResourceHealth", "Source", "restore_input"),
})
