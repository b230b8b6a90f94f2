"""config.karmada.io/v1alpha1 ResourceInterpreterCustomization. Complete schema (Karmada v1.19).

Flotilla extension: ``spec.customizations.restoreState`` (the RestoreState operation's script). Every RIC valid
for Karmada stays valid.
"""

from __future__ import annotations

from flotilla.apiserver.schemas._build import Schema, kind_schema, obj, string

# hook name -> (Lua function the script defines, what it does)
HOOKS: dict[str, tuple[str, str]] = {
    "retention": (
        "Retain(desiredObj, observedObj)",
        "returns the object to apply, keeping fields owned by the member cluster",
    ),
    "replicaResource": (
        "GetReplicas(desiredObj)",
        "returns the replica count and the per-replica requirements",
    ),
    "componentResource": ("GetComponents(desiredObj)", "returns the components of a multi-template workload"),
    "replicaRevision": (
        "ReviseReplica(desiredObj, desiredReplica)",
        "returns the object with its replicas set",
    ),
    "statusReflection": (
        "ReflectStatus(observedObj)",
        "returns the status to collect from the member object",
    ),
    "statusAggregation": (
        "AggregateStatus(desiredObj, statusItems)",
        "returns the template with the statuses of all clusters merged into it",
    ),
    "healthInterpretation": (
        "InterpretHealth(observedObj)",
        "returns true when the member object is healthy",
    ),
    "dependencyInterpretation": (
        "GetDependencies(desiredObj)",
        "returns the objects the template depends on ({apiVersion, kind, namespace, name})",
    ),
    # Flotilla's extension (no Karmada counterpart)
    "restoreState": (
        "RestoreState(desiredObj, restore)",
        "returns the object set to restart from the snapshot restore.path (Flotilla extension; restore holds "
        "path, kind, jobId, checkpointId, existed, nonce)",
    ),
}


def _hook(name: str) -> Schema:
    function, effect = HOOKS[name]
    return obj(
        f"Lua script of the '{name}' hook.",
        {"luaScript": string(f"Lua source that defines {function}, which {effect}.")},
        ["luaScript"],
    )


def resourceinterpretercustomization_schema() -> Schema:
    return kind_schema(
        "config.karmada.io",
        "v1alpha1",
        "ResourceInterpreterCustomization",
        "Lua scripts that teach the control plane how to read and change one kind of resource (replicas, "
        "status, health, dependencies...).",
        {
            "spec": obj(
                "The target kind and its scripts.",
                {
                    "target": obj(
                        "Kind the scripts apply to.",
                        {
                            "apiVersion": string("API version, e.g. 'apps/v1'."),
                            "kind": string("Kind, e.g. 'Deployment'."),
                        },
                        ["apiVersion", "kind"],
                    ),
                    "customizations": obj(
                        "Scripts by hook; hooks left out fall back to the built-in interpretation.",
                        {name: _hook(name) for name in HOOKS},
                    ),
                },
                ["customizations", "target"],
            )
        },
        ["spec"],
    )
