"""policy.karmada.io/v1alpha1: PropagationPolicy, ClusterPropagationPolicy, OverridePolicy,
ClusterOverridePolicy and ClusterTaintPolicy. Complete schemas (Karmada v1.19)."""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    Schema,
    any_value,
    array,
    enum,
    kind_schema,
    obj,
    string,
    string_list,
    string_map,
)
from flotilla.apiserver.schemas.karmada_common import (
    cluster_affinity,
    match_condition,
    propagation_spec,
    resource_selector,
    taint_effect_taint,
)

GROUP = "policy.karmada.io"
VERSION = "v1alpha1"

_OPS = ["add", "remove", "replace"]


def propagationpolicy_schema() -> Schema:
    return kind_schema(
        GROUP,
        VERSION,
        "PropagationPolicy",
        "Selects resource templates of its own namespace and says to which member clusters they are "
        "propagated, how replicas are divided and how failures are handled.",
        {"spec": propagation_spec()},
        ["spec"],
    )


def clusterpropagationpolicy_schema() -> Schema:
    return kind_schema(
        GROUP,
        VERSION,
        "ClusterPropagationPolicy",
        "Cluster-wide PropagationPolicy: can select cluster-scoped templates and templates of any namespace. "
        "A matching PropagationPolicy always wins over a ClusterPropagationPolicy.",
        {"spec": propagation_spec()},
        ["spec"],
    )


def _overriders() -> Schema:
    json_patch = obj(
        "One change inside the embedded document.",
        {
            "subPath": string("JSON pointer inside the embedded document, e.g. '/db/port'."),
            "operator": enum("add, remove or replace.", _OPS),
            "value": any_value("New value (not used by remove)."),
        },
        ["operator", "subPath"],
    )
    return obj(
        "Changes applied to the resource for the target clusters. Within one block they are applied in the "
        "order image, command, args, labels, annotations, field, plaintext.",
        {
            "plaintext": array(
                "Raw JSON-patch style changes.",
                obj(
                    "A JSON-patch style change.",
                    {
                        "path": string("JSON pointer to the field, e.g. '/spec/replicas'."),
                        "operator": enum("add, remove or replace.", _OPS),
                        "value": any_value("New value (not used by remove)."),
                    },
                    ["operator", "path"],
                ),
            ),
            "imageOverrider": array(
                "Changes to container images.",
                obj(
                    "Changes one component of matching image references.",
                    {
                        "predicate": obj(
                            "Which image to change. Unset: the images of all containers of known workload kinds.",
                            {
                                "path": string(
                                    "JSON pointer to the image field, e.g. '/spec/template/spec/containers/0/image'."
                                )
                            },
                            ["path"],
                        ),
                        "component": enum(
                            "Part of the image reference to change.", ["Registry", "Repository", "Tag"]
                        ),
                        "operator": enum("add (append to the component), remove or replace.", _OPS),
                        "value": string("The value to add or to replace with."),
                    },
                    ["component", "operator"],
                ),
            ),
            "commandOverrider": array(
                "Changes to a container's command.",
                obj(
                    "Changes the command of one container.",
                    {
                        "containerName": string("Name of the container."),
                        "operator": enum(
                            "add appends the values; remove deletes equal entries.", ["add", "remove"]
                        ),
                        "value": string_list("Entries to add or remove."),
                    },
                    ["containerName", "operator"],
                ),
            ),
            "argsOverrider": array(
                "Changes to a container's args.",
                obj(
                    "Changes the args of one container.",
                    {
                        "containerName": string("Name of the container."),
                        "operator": enum(
                            "add appends the values; remove deletes equal entries.", ["add", "remove"]
                        ),
                        "value": string_list("Entries to add or remove."),
                    },
                    ["containerName", "operator"],
                ),
            ),
            "labelsOverrider": array(
                "Changes to metadata.labels.",
                obj(
                    "Adds, removes or replaces labels.",
                    {
                        "operator": enum(
                            "add, remove or replace (replace/remove only touch existing keys).", _OPS
                        ),
                        "value": string_map("The labels."),
                    },
                    ["operator", "value"],
                ),
            ),
            "annotationsOverrider": array(
                "Changes to metadata.annotations.",
                obj(
                    "Adds, removes or replaces annotations.",
                    {
                        "operator": enum(
                            "add, remove or replace (replace/remove only touch existing keys).", _OPS
                        ),
                        "value": string_map("The annotations."),
                    },
                    ["operator", "value"],
                ),
            ),
            "fieldOverrider": array(
                "Changes inside a string field that holds a JSON or YAML document (e.g. a ConfigMap value).",
                obj(
                    "Changes one embedded document.",
                    {
                        "fieldPath": string("JSON pointer to the string field, e.g. '/data/config.yaml'."),
                        "json": array("Changes when the field holds JSON.", json_patch),
                        "yaml": array("Changes when the field holds YAML.", json_patch),
                    },
                    ["fieldPath"],
                ),
            ),
        },
    )


def _override_spec() -> Schema:
    return obj(
        "Which resources are changed, for which clusters, and how.",
        {
            "resourceSelectors": array(
                "Resources the policy applies to; empty means every resource (of the namespace for an OverridePolicy).",
                resource_selector(),
            ),
            "overrideRules": array(
                "Rules applied in order.",
                obj(
                    "Overriders for a set of clusters.",
                    {
                        "targetCluster": cluster_affinity("Clusters the rule applies to; unset means all."),
                        "overriders": _overriders(),
                    },
                    ["overriders"],
                ),
            ),
            "targetCluster": cluster_affinity("Deprecated (use overrideRules): clusters for 'overriders'."),
            "overriders": _overriders(),
        },
    )


def overridepolicy_schema() -> Schema:
    return kind_schema(
        GROUP,
        VERSION,
        "OverridePolicy",
        "Changes resources of its namespace before they are sent to particular member clusters. Applied after "
        "every ClusterOverridePolicy.",
        {"spec": _override_spec()},
        ["spec"],
    )


def clusteroverridepolicy_schema() -> Schema:
    return kind_schema(
        GROUP,
        VERSION,
        "ClusterOverridePolicy",
        "Cluster-wide OverridePolicy, applied before the namespaced ones.",
        {"spec": _override_spec()},
        ["spec"],
    )


def clustertaintpolicy_schema() -> Schema:
    return kind_schema(
        GROUP,
        VERSION,
        "ClusterTaintPolicy",
        "Adds taints to clusters when their conditions match, and removes them when other conditions match. "
        "Taints stay when the policy is deleted.",
        {
            "spec": obj(
                "The clusters, the conditions and the taints.",
                {
                    "targetClusters": cluster_affinity("Clusters the policy applies to; unset means all."),
                    "addOnConditions": array(
                        "All must match for the taints to be added; empty means they are never added.",
                        match_condition(),
                    ),
                    "removeOnConditions": array(
                        "All must match for the taints to be removed; empty means they are never removed. "
                        "Evaluated after addOnConditions.",
                        match_condition(),
                    ),
                    "taints": array(
                        "Taints to add or remove (matched by key and effect).",
                        taint_effect_taint(),
                        minItems=1,
                    ),
                },
                ["taints"],
            ),
        },
        ["spec"],
    )
