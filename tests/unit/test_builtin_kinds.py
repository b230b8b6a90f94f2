"""Built-in resource types: names, schemas (well-formed OpenAPI v3, complete Karmada types), tables."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flotilla.apiserver.builtin_kinds import (
    BUILTIN_TYPES,
    CUSTOM_TABLES,
    builtin_type,
    custom_cells,
    custom_columns,
    format_label_selector,
    format_labels,
    human_age,
    human_duration,
)
from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.schemas import SCHEMA_BUILDERS, schema_for

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def ago(**kw: float) -> str:
    return (NOW - timedelta(**kw)).strftime("%Y-%m-%dT%H:%M:%SZ")


KARMADA_GROUPS = {"cluster.karmada.io", "policy.karmada.io", "work.karmada.io", "config.karmada.io",
                  "apps.karmada.io"}
KARMADA_TYPES = [t for t in BUILTIN_TYPES if t.group in KARMADA_GROUPS]


def by_kind(kind: str) -> ResourceType:
    matches = [t for t in BUILTIN_TYPES if t.kind == kind]
    assert len(matches) == 1, kind
    return matches[0]


# --------------------------------------------------------------------------------------------------
# Names, scopes, flags


def test_expected_kinds_are_served() -> None:
    served = {(t.group, t.version, t.kind) for t in BUILTIN_TYPES}
    assert served == set(SCHEMA_BUILDERS)
    assert len(BUILTIN_TYPES) == 27


def test_group_kind_and_plural_are_unique() -> None:
    group_kinds = [(t.group, t.kind) for t in BUILTIN_TYPES]
    assert len(group_kinds) == len(set(group_kinds))
    plurals = [t.plural for t in BUILTIN_TYPES]
    assert len(plurals) == len(set(plurals))
    for t in BUILTIN_TYPES:
        assert t.plural == t.plural.lower() and t.singular == t.kind.lower()


def test_short_names_are_unique_and_do_not_shadow_resource_names() -> None:
    shorts = [s for t in BUILTIN_TYPES for s in t.short_names]
    assert len(shorts) == len(set(shorts))
    names = {t.plural for t in BUILTIN_TYPES} | {t.singular for t in BUILTIN_TYPES}
    assert not set(shorts) & names


@pytest.mark.parametrize(
    ("kind", "short_names", "namespaced"),
    [
        ("Namespace", ("ns",), False),
        ("ConfigMap", ("cm",), True),
        ("Secret", (), True),
        ("Service", ("svc",), True),
        ("ServiceAccount", ("sa",), True),
        ("PersistentVolumeClaim", ("pvc",), True),
        ("Event", ("ev",), True),
        ("Pod", ("po",), True),
        ("Deployment", ("deploy",), True),
        ("StatefulSet", ("sts",), True),
        ("DaemonSet", ("ds",), True),
        ("ReplicaSet", ("rs",), True),
        ("Job", (), True),
        ("Lease", (), True),
        ("CustomResourceDefinition", ("crd", "crds"), False),
        ("Cluster", (), False),
        ("PropagationPolicy", ("pp",), True),
        ("ClusterPropagationPolicy", ("cpp",), False),
        ("OverridePolicy", ("op",), True),
        ("ClusterOverridePolicy", ("cop",), False),
        ("ClusterTaintPolicy", (), False),
        ("ResourceBinding", ("rb",), True),
        ("ClusterResourceBinding", ("crb",), False),
        ("Work", ("wk",), True),
        ("ResourceInterpreterCustomization", ("ric",), False),
        ("WorkloadRebalancer", (), False),
    ],
)
def test_short_names_and_scope(kind: str, short_names: tuple[str, ...], namespaced: bool) -> None:
    t = by_kind(kind)
    assert t.short_names == short_names
    assert t.namespaced is namespaced


def test_categories() -> None:
    in_all = {t.kind for t in BUILTIN_TYPES if "all" in t.categories}
    assert in_all == {"Service", "Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
    karmada_io = {t.kind for t in BUILTIN_TYPES if "karmada-io" in t.categories}
    assert karmada_io == {
        "PropagationPolicy",
        "ClusterPropagationPolicy",
        "OverridePolicy",
        "ClusterOverridePolicy",
        "ResourceBinding",
        "ClusterResourceBinding",
        "Work",
        "ResourceInterpreterCustomization",
    }


def test_patch_and_generation_flags() -> None:
    for t in BUILTIN_TYPES:
        compiled_into_kubectl = t.group in ("", "apps", "batch")
        assert t.builtin_smp is compiled_into_kubectl, t.kind
        assert t.generation in ("spec", "non-metadata", ""), t.kind
        assert not t.from_crd
    for kind in ("ConfigMap", "Secret", "ServiceAccount", "Event", "Lease", "Namespace", "Service"):
        assert by_kind(kind).generation == ""
    for kind in (
        "Pod",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CustomResourceDefinition",
    ):
        assert by_kind(kind).generation == "spec"
    for t in KARMADA_TYPES:
        assert t.generation == "non-metadata" and t.strict_schema, t.kind
    assert not any(t.strict_schema for t in BUILTIN_TYPES if t.group not in KARMADA_GROUPS)


def test_status_subresources_follow_karmada_crds() -> None:
    with_status = {t.kind for t in KARMADA_TYPES if t.has_status}
    # PropagationPolicy & co. have no status at all in Karmada; the bindings, Work and Cluster do.
    assert with_status == {"Cluster", "ResourceBinding", "ClusterResourceBinding", "Work", "WorkloadRebalancer"}
    for kind in (
        "Namespace",
        "Service",
        "PersistentVolumeClaim",
        "Pod",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CustomResourceDefinition",
    ):
        assert by_kind(kind).has_status, kind
    for kind in ("ConfigMap", "Secret", "ServiceAccount", "Event", "Lease"):
        assert not by_kind(kind).has_status, kind


def test_scale_subresources() -> None:
    scalable = {t.kind for t in BUILTIN_TYPES if t.has_scale}
    assert scalable == {"Deployment", "StatefulSet", "ReplicaSet"}
    for kind in scalable:
        t = by_kind(kind)
        assert t.scale_selector_path == ".spec.selector"
        assert (t.scale_spec_path, t.scale_status_path) == (".spec.replicas", ".status.replicas")


def test_selectable_fields() -> None:
    assert set(by_kind("Pod").selectable_fields) >= {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
    assert set(by_kind("Event").selectable_fields) >= {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }


def test_builtin_type_lookup_and_storage_keys() -> None:
    assert builtin_type("apps", "Deployment") is by_kind("Deployment")
    assert builtin_type("apps", "Nope") is None
    assert by_kind("Deployment").key("default", "web") == "/registry/deployments/default/web"
    assert (
        by_kind("PropagationPolicy").key("default", "pp")
        == "/registry/policy.karmada.io/propagationpolicies/default/pp"
    )
    assert by_kind("Cluster").key(None, "m1") == "/registry/cluster.karmada.io/clusters/m1"


# --------------------------------------------------------------------------------------------------
# Printer columns


@pytest.mark.parametrize("rtype", BUILTIN_TYPES, ids=lambda t: t.kind)
def test_printer_columns_are_well_formed(rtype: ResourceType) -> None:
    assert rtype.printer_columns, rtype.kind
    names = [c.name for c in rtype.printer_columns]
    assert len(names) == len(set(names))
    for col in rtype.printer_columns:
        assert col.type in {"string", "integer", "number", "boolean", "date"}
        assert col.json_path.startswith(".") and "{" not in col.json_path
        assert col.priority >= 0
        assert col.description


def test_karmada_printer_columns_match_crds() -> None:
    def cols(kind: str) -> list[tuple[str, str, str]]:
        return [(c.name, c.type, c.json_path) for c in by_kind(kind).printer_columns if c.priority == 0]

    age = ("AGE", "date", ".metadata.creationTimestamp")
    assert cols("Cluster") == [
        ("VERSION", "string", ".status.kubernetesVersion"),
        ("MODE", "string", ".spec.syncMode"),
        ("READY", "string", '.status.conditions[?(@.type=="Ready")].status'),
        age,
    ]
    for kind in ("ResourceBinding", "ClusterResourceBinding"):
        assert cols(kind) == [
            ("SCHEDULED", "string", '.status.conditions[?(@.type=="Scheduled")].status'),
            ("FULLYAPPLIED", "string", '.status.conditions[?(@.type=="FullyApplied")].status'),
            age,
        ]
    assert cols("Work") == [
        ("WORKLOAD-KIND", "string", ".spec.workload.manifests[*].kind"),
        ("APPLIED", "string", '.status.conditions[?(@.type=="Applied")].status'),
        age,
    ]
    for kind in ("PropagationPolicy", "ClusterPropagationPolicy"):
        assert cols(kind) == [
            ("CONFLICT-RESOLUTION", "string", ".spec.conflictResolution"),
            ("PRIORITY", "string", ".spec.priority"),
            age,
        ]
    assert cols("ResourceInterpreterCustomization") == [
        ("TARGET-API-VERSION", "string", ".spec.target.apiVersion"),
        ("TARGET-KIND", "string", ".spec.target.kind"),
        age,
    ]
    for kind in ("OverridePolicy", "ClusterOverridePolicy", "ClusterTaintPolicy"):
        assert cols(kind) == [age]


# --------------------------------------------------------------------------------------------------
# Schema well-formedness

ALLOWED_KEYWORDS = {
    "type",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "default",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
    "nullable",
    "anyOf",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-patch-strategy",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-group-version-kind",
}
FORMATS = {"string": {"date-time", "byte"}, "integer": {"int32", "int64"}, "number": {"double"}}
PY_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


def check_schema(
    node: Any, path: str = "", *, top: bool = True, problems: list[str] | None = None
) -> list[str]:
    """Recursively check that ``node`` is a well-formed (structural) OpenAPI v3 schema."""
    problems = [] if problems is None else problems

    def bad(msg: str) -> None:
        problems.append(f"{path or '<root>'}: {msg}")

    if not isinstance(node, dict):
        bad(f"not a mapping: {node!r}")
        return problems
    unknown = set(node) - ALLOWED_KEYWORDS
    if unknown:
        bad(f"unknown keywords {sorted(unknown)}")
    if "x-kubernetes-group-version-kind" in node and not top:
        bad("group-version-kind below the top level")
    if "description" in node and (
        not isinstance(node["description"], str) or not node["description"].strip()
    ):
        bad("empty description")
    typ = node.get("type")
    if typ is None:
        if not (
            node.get("x-kubernetes-preserve-unknown-fields")
            or node.get("x-kubernetes-int-or-string")
            or "anyOf" in node
        ):
            bad("no type and not free-form")
    elif typ not in PY_TYPES:
        bad(f"bad type {typ!r}")
    if "format" in node and node["format"] not in FORMATS.get(typ, set()):
        bad(f"format {node['format']!r} not valid for type {typ!r}")
    if "anyOf" in node:
        if not node.get("x-kubernetes-int-or-string") or node["anyOf"] != [
            {"type": "integer"},
            {"type": "string"},
        ]:
            bad("anyOf only allowed for int-or-string")
    if "enum" in node:
        if not node["enum"] or not all(isinstance(v, PY_TYPES.get(typ, object)) for v in node["enum"]):
            bad("enum values do not match the type")
    if "default" in node:
        if typ in PY_TYPES and not isinstance(node["default"], PY_TYPES[typ]):
            bad("default does not match the type")
        if "enum" in node and node["default"] not in node["enum"]:
            bad("default not among the enum values")
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        if key in node and not (isinstance(node[key], int) and node[key] >= 0):
            bad(f"{key} must be a non-negative integer")
    if "pattern" in node:
        re.compile(node["pattern"])
    if "nullable" in node and node["nullable"] is not True:
        bad("nullable must be true when present")
    if typ != "object":
        for key in ("properties", "required", "additionalProperties"):
            if key in node:
                bad(f"{key} on a non-object")
    if typ != "array" and "items" in node:
        bad("items on a non-array")
    if typ == "array":
        if "items" not in node:
            bad("array without items")
        else:
            check_schema(node["items"], path + "[]", top=False, problems=problems)
        list_type = node.get("x-kubernetes-list-type")
        if list_type is not None and list_type not in ("atomic", "set", "map"):
            bad(f"bad list type {list_type!r}")
        item_props = node.get("items", {}).get("properties", {})
        if list_type == "map":
            keys = node.get("x-kubernetes-list-map-keys")
            if not keys or any(k not in item_props for k in keys):
                bad("map list keys are not item properties")
        merge_key = node.get("x-kubernetes-patch-merge-key")
        if merge_key is not None and merge_key not in item_props:
            bad("patch merge key is not an item property")
    if "x-kubernetes-patch-strategy" in node:
        if not set(node["x-kubernetes-patch-strategy"].split(",")) <= {"merge", "retainKeys", "replace"}:
            bad("bad patch strategy")
    if node.get("x-kubernetes-map-type") not in (None, "atomic", "granular"):
        bad("bad map type")
    if typ == "object":
        props = node.get("properties", {})
        if not isinstance(props, dict):
            bad("properties is not a mapping")
            props = {}
        if props and "additionalProperties" in node:
            bad("properties and additionalProperties together (not structural)")
        required = node.get("required", [])
        if len(required) != len(set(required)) or any(r not in props for r in required):
            bad(f"required {required} not all declared")
        for name, sub in props.items():
            if not isinstance(sub, dict) or not sub.get("description"):
                problems.append(f"{path}.{name}: property without description")
            check_schema(sub, f"{path}.{name}", top=False, problems=problems)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            check_schema(extra, path + "{*}", top=False, problems=problems)
        elif extra is not None and not isinstance(extra, bool):
            bad("additionalProperties must be a schema or a boolean")
    return problems


def walk(node: dict[str, Any], path: str = ""):
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], path + "[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], path + "{*}")


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """Navigate ``.spec.failover.cluster.purgeMode`` / ``.spec.clusters[].name`` style paths."""
    node = schema
    for part in path.strip(".").split("."):
        name, _, rest = part.partition("[]")
        node = node["properties"][name]
        for _ in range(part.count("[]")):
            node = node["items"]
        assert not rest.replace("[]", ""), path
    return node


def test_checker_catches_malformed_schemas() -> None:
    assert check_schema(
        {"type": "object", "description": "x", "properties": {"a": {"type": "strin", "description": "a"}}}
    )
    assert check_schema({"type": "object", "description": "x", "required": ["b"]})
    assert check_schema({"type": "array", "description": "x"})
    assert check_schema({"type": "string", "description": "x", "enum": ["A"], "default": "B"})
    assert check_schema({"type": "object", "description": "x", "properties": {"a": {"type": "string"}}})
    assert check_schema({"description": "x"})
    assert not check_schema(
        {"type": "object", "description": "x", "properties": {"a": {"type": "string", "description": "a"}}}
    )


@pytest.mark.parametrize("rtype", BUILTIN_TYPES, ids=lambda t: t.kind)
def test_schema_is_well_formed(rtype: ResourceType) -> None:
    schema = rtype.schema
    assert check_schema(schema) == []
    assert schema["type"] == "object"
    assert schema["description"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    ]
    assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])
    assert json.loads(json.dumps(schema)) == schema  # JSON-compatible
    if rtype.has_status:
        assert "status" in schema["properties"]


def test_object_meta_is_complete() -> None:
    meta = schema_for("", "v1", "ConfigMap")["properties"]["metadata"]
    assert set(meta["properties"]) == {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
    assert meta["properties"]["ownerReferences"]["x-kubernetes-patch-merge-key"] == "uid"
    assert meta["properties"]["finalizers"]["x-kubernetes-patch-strategy"] == "merge"
    assert meta["properties"]["creationTimestamp"]["nullable"] is True


def test_schema_builders_return_independent_copies() -> None:
    a = schema_for("policy.karmada.io", "v1alpha1", "PropagationPolicy")
    a["properties"]["spec"]["properties"].clear()
    b = schema_for("policy.karmada.io", "v1alpha1", "PropagationPolicy")
    assert b["properties"]["spec"]["properties"]
    pp = a["properties"]["spec"]
    assert pp is not b["properties"]["spec"]


@pytest.mark.parametrize(
    "rtype", [t for t in BUILTIN_TYPES if t.group not in KARMADA_GROUPS], ids=lambda t: t.kind
)
def test_builtin_schemas_keep_unknown_fields(rtype: ResourceType) -> None:
    props = rtype.schema["properties"]
    for part in ("spec", "status"):
        if part in props:
            assert props[part].get("x-kubernetes-preserve-unknown-fields") is True, (rtype.kind, part)


def test_builtin_merge_metadata() -> None:
    pod_spec = schema_for("", "v1", "Pod")["properties"]["spec"]["properties"]
    assert pod_spec["containers"]["x-kubernetes-patch-merge-key"] == "name"
    assert pod_spec["volumes"]["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    container = pod_spec["containers"]["items"]["properties"]
    assert container["ports"]["x-kubernetes-patch-merge-key"] == "containerPort"
    assert container["volumeMounts"]["x-kubernetes-patch-merge-key"] == "mountPath"
    assert container["env"]["x-kubernetes-patch-merge-key"] == "name"
    service_ports = schema_for("", "v1", "Service")["properties"]["spec"]["properties"]["ports"]
    assert service_ports["x-kubernetes-patch-merge-key"] == "port"
    deploy = schema_for("apps", "v1", "Deployment")
    assert at(deploy, ".status.conditions")["x-kubernetes-patch-merge-key"] == "type"
    assert at(deploy, ".spec.strategy")["x-kubernetes-patch-strategy"] == "retainKeys"


# --------------------------------------------------------------------------------------------------
# Karmada schemas: complete and strict

FREE_FORM_LEAVES = {
    "Work": {".spec.workload.manifests[]", ".status.manifestStatuses[].status"},
    "ResourceBinding": {".status.aggregatedStatus[].status"},
    "ClusterResourceBinding": {".status.aggregatedStatus[].status"},
}


@pytest.mark.parametrize("rtype", KARMADA_TYPES, ids=lambda t: t.kind)
def test_karmada_schemas_are_closed(rtype: ResourceType) -> None:
    allowed = FREE_FORM_LEAVES.get(rtype.kind, set())
    for path, node in walk(rtype.schema):
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            continue
        if path in allowed or path.endswith((".value", ".fieldsV1")):
            continue
        pytest.fail(f"{rtype.kind}{path} accepts unknown fields")
    assert rtype.schema["required"] == ["spec"]


FAILOVER_PATHS = {
    ("policy.karmada.io", "PropagationPolicy"): [
        ".spec.failover.cluster.purgeMode",
        ".spec.failover.cluster.statePreservation.rules[].aliasLabelName",
        ".spec.failover.cluster.statePreservation.rules[].jsonPath",
        ".spec.failover.application.decisionConditions.tolerationSeconds",
        ".spec.failover.application.purgeMode",
        ".spec.failover.application.gracePeriodSeconds",
        ".spec.failover.application.statePreservation.rules[].aliasLabelName",
        ".spec.failover.application.statePreservation.rules[].jsonPath",
        ".spec.placement.clusterTolerations[].tolerationSeconds",
        ".spec.placement.spreadConstraints[].maxGroups",
        ".spec.placement.clusterAffinities[].overflowAffinities[].affinityName",
        ".spec.placement.replicaScheduling.weightPreference.staticWeightList[].targetCluster.fieldSelector.matchExpressions[].key",
        ".spec.propagateDeps",
        ".spec.resourceSelectors[].labelSelector.matchExpressions[].values",
    ],
    ("work.karmada.io", "ResourceBinding"): [
        ".spec.clusters[].name",
        ".spec.clusters[].replicas",
        ".spec.gracefulEvictionTasks[].fromCluster",
        ".spec.gracefulEvictionTasks[].purgeMode",
        ".spec.gracefulEvictionTasks[].preservedLabelState",
        ".spec.gracefulEvictionTasks[].clustersBeforeFailover",
        ".spec.gracefulEvictionTasks[].suppressDeletion",
        ".spec.gracefulEvictionTasks[].gracePeriodSeconds",
        ".spec.gracefulEvictionTasks[].creationTimestamp",
        ".spec.failover.cluster.statePreservation.rules[].jsonPath",
        ".spec.placement.clusterTolerations[].key",
        ".spec.requiredBy[].clusters[].name",
        ".spec.resource.uid",
        ".status.schedulerObservedGeneration",
        ".status.aggregatedStatus[].health",
        ".status.aggregatedStatus[].status",
        ".status.conditions[].reason",
    ],
    ("policy.karmada.io", "ClusterTaintPolicy"): [
        ".spec.addOnConditions[].conditionType",
        ".spec.addOnConditions[].operator",
        ".spec.addOnConditions[].statusValues",
        ".spec.removeOnConditions[].statusValues",
        ".spec.taints[].key",
        ".spec.taints[].effect",
        ".spec.taints[].value",
        ".spec.targetClusters.clusterNames",
        ".spec.targetClusters.exclude",
        ".spec.targetClusters.labelSelector.matchLabels",
    ],
    ("cluster.karmada.io", "Cluster"): [
        ".spec.syncMode",
        ".spec.taints[].timeAdded",
        ".spec.zones",
        ".spec.resourceModels[].ranges[].min",
        ".status.conditions[].type",
        ".status.apiEnablements[].resources[].kind",
        ".status.resourceSummary.allocatable",
        ".status.kubernetesVersion",
    ],
    ("work.karmada.io", "Work"): [
        ".spec.workload.manifests",
        ".spec.suspendDispatching",
        ".spec.preserveResourcesOnDeletion",
        ".status.manifestStatuses[].identifier.ordinal",
        ".status.manifestStatuses[].health",
    ],
    ("config.karmada.io", "ResourceInterpreterCustomization"): [
        ".spec.target.apiVersion",
        ".spec.customizations.healthInterpretation.luaScript",
        ".spec.customizations.statusReflection.luaScript",
        ".spec.customizations.componentResource.luaScript",
    ],
    ("policy.karmada.io", "OverridePolicy"): [
        ".spec.overrideRules[].overriders.plaintext[].path",
        ".spec.overrideRules[].overriders.imageOverrider[].predicate.path",
        ".spec.overrideRules[].overriders.fieldOverrider[].yaml[].subPath",
        ".spec.overrideRules[].targetCluster.clusterNames",
    ],
}


@pytest.mark.parametrize(("group_kind", "paths"), list(FAILOVER_PATHS.items()), ids=lambda v: str(v))
def test_karmada_key_fields_exist(group_kind: tuple[str, str], paths: list[str]) -> None:
    rtype = builtin_type(*group_kind)
    assert rtype is not None
    for path in paths:
        node = at(rtype.schema, path)
        assert node.get("description"), path


def test_karmada_enums_defaults_and_required() -> None:
    pp = by_kind("PropagationPolicy").schema
    assert at(pp, ".spec.failover.cluster.purgeMode")["enum"] == ["Directly", "Gracefully"]
    assert at(pp, ".spec.failover.cluster.purgeMode")["default"] == "Gracefully"
    assert at(pp, ".spec.failover.application.purgeMode")["enum"] == ["Directly", "Gracefully", "Never"]
    assert at(pp, ".spec.failover.application.decisionConditions.tolerationSeconds")["default"] == 300
    assert at(pp, ".spec.failover.application")["required"] == ["decisionConditions"]
    assert at(pp, ".spec.failover.cluster.statePreservation")["required"] == ["rules"]
    assert sorted(at(pp, ".spec.failover.cluster.statePreservation.rules[]")["required"]) == [
        "aliasLabelName",
        "jsonPath",
    ]
    assert at(pp, ".spec")["required"] == ["resourceSelectors"]
    assert at(pp, ".spec.resourceSelectors")["minItems"] == 1
    assert at(pp, ".spec.conflictResolution")["default"] == "Abort"
    assert at(pp, ".spec.placement.replicaScheduling.replicaSchedulingType")["default"] == "Divided"
    assert at(pp, ".spec.placement.spreadConstraints[].spreadByField")["enum"] == [
        "cluster",
        "region",
        "zone",
        "provider",
    ]
    assert "default" not in at(pp, ".spec.placement.spreadConstraints[].maxGroups")

    rb = by_kind("ResourceBinding").schema
    task = at(rb, ".spec.gracefulEvictionTasks[]")
    assert sorted(task["required"]) == ["fromCluster", "producer", "reason"]
    assert task["properties"]["purgeMode"]["enum"] == ["Directly", "Gracefully", "Never"]
    assert task["properties"]["reason"]["maxLength"] == 32
    assert task["properties"]["message"]["maxLength"] == 1024
    assert at(rb, ".spec.gracefulEvictionTasks[].preservedLabelState")["additionalProperties"] == {
        "type": "string"
    }
    assert at(rb, ".spec.clusters[]")["required"] == ["name"]
    assert at(rb, ".status.aggregatedStatus[].health")["enum"] == ["Healthy", "Unhealthy", "Unknown"]
    assert at(rb, ".spec")["required"] == ["resource"]

    ctp = by_kind("ClusterTaintPolicy").schema
    assert at(ctp, ".spec")["required"] == ["taints"]
    assert at(ctp, ".spec.taints")["minItems"] == 1
    assert "enum" not in at(ctp, ".spec.addOnConditions[].operator")  # Karmada declares no enum here

    cluster = by_kind("Cluster").schema
    assert at(cluster, ".spec.syncMode")["enum"] == ["Push", "Pull"]
    assert at(cluster, ".spec")["required"] == ["syncMode"]


# A tiny validator, enough to run sample manifests through the strict schemas.
def validate(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    errors: list[str] = []
    if value is None and schema.get("nullable"):
        return errors
    typ = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return (
            []
            if isinstance(value, (int, str)) and not isinstance(value, bool)
            else [f"{path}: int-or-string"]
        )
    if typ is None:
        return errors
    expected = PY_TYPES[typ]
    if isinstance(value, bool) and typ in ("integer", "number") or not isinstance(value, expected):
        return [f"{path}: expected {typ}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: Unsupported value {value!r}")
    if typ == "object":
        props = schema.get("properties", {})
        for req in schema.get("required", []):
            if req not in value:
                errors.append(f"{path}.{req}: Required value")
        for key, sub in value.items():
            if key in props:
                errors += validate(sub, props[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += validate(sub, schema["additionalProperties"], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f'{path}: unknown field "{key}"')
    if typ == "array":
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: too few items")
        for i, item in enumerate(value):
            errors += validate(item, schema["items"], f"{path}[{i}]")
    if typ == "string" and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: does not match pattern")
    return errors


SAMPLE_PP: dict[str, Any] = {
    "apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "PropagationPolicy",
    "metadata": {"name": "flink", "namespace": "default", "labels": {"app": "flink"}},
    "spec": {
        "propagateDeps": True,
        "resourceSelectors": [
            {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "name": "job"}
        ],
        "placement": {
            "clusterAffinity": {"clusterNames": ["member1", "member2"]},
            "clusterTolerations": [
                {
                    "key": "cluster.karmada.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 30,
                }
            ],
            "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {
                    "staticWeightList": [{"targetCluster": {"clusterNames": ["member1"]}, "weight": 2}]
                },
            },
        },
        "failover": {
            "application": {
                "decisionConditions": {"tolerationSeconds": 120},
                "purgeMode": "Directly",
                "statePreservation": {
                    "rules": [{"aliasLabelName": "failover.io/job-id", "jsonPath": "{.jobStatus.jobId}"}]
                },
            },
            "cluster": {
                "purgeMode": "Directly",
                "statePreservation": {
                    "rules": [{"aliasLabelName": "failover.io/job-id", "jsonPath": "{.jobStatus.jobId}"}]
                },
            },
        },
        "conflictResolution": "Overwrite",
        "priority": 10,
    },
}


def test_sample_propagation_policy_validates() -> None:
    schema = by_kind("PropagationPolicy").schema
    assert validate(SAMPLE_PP, schema) == []
    cpp = copy.deepcopy(SAMPLE_PP)
    cpp["kind"] = "ClusterPropagationPolicy"
    del cpp["metadata"]["namespace"]
    assert validate(cpp, by_kind("ClusterPropagationPolicy").schema) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda s: s["failover"]["cluster"].update(purgeMode="Never"),
            ".spec.failover.cluster.purgeMode: Unsupported",
        ),
        (lambda s: s["failover"]["application"].update(purgeMode="Immediately"), "purgeMode: Unsupported"),
        (lambda s: s["failover"]["cluster"].update(purgeMode="Graciously"), "purgeMode: Unsupported"),
        (lambda s: s["failover"].update(foo=1), '.spec.failover: unknown field "foo"'),
        (
            lambda s: s["failover"]["application"].pop("decisionConditions"),
            "decisionConditions: Required value",
        ),
        (
            lambda s: s["failover"]["cluster"]["statePreservation"]["rules"][0].pop("jsonPath"),
            "jsonPath: Required value",
        ),
        (lambda s: s.update(resourceSelectors=[]), "resourceSelectors: too few items"),
        (
            lambda s: s["placement"]["spreadConstraints"][0].update(spreadByField="rack"),
            "spreadByField: Unsupported",
        ),
        (lambda s: s.update(priority="high"), ".spec.priority: expected integer"),
    ],
)
def test_invalid_propagation_policies_are_caught(mutate: Any, expected: str) -> None:
    sample = copy.deepcopy(SAMPLE_PP)
    mutate(sample["spec"])
    errors = validate(sample, by_kind("PropagationPolicy").schema)
    assert any(expected in e for e in errors), errors


def test_sample_binding_work_cluster_and_taint_policy_validate() -> None:
    condition = {
        "type": "Scheduled",
        "status": "True",
        "reason": "Success",
        "message": "Binding has been scheduled successfully.",
        "lastTransitionTime": "2025-06-01T11:00:00Z",
    }
    rb = {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {"name": "job-flinkdeployment", "namespace": "default"},
        "spec": {
            "resource": {
                "apiVersion": "flink.apache.org/v1beta1",
                "kind": "FlinkDeployment",
                "name": "job",
                "uid": "u1",
            },
            "replicas": 3,
            "replicaRequirements": {"resourceRequest": {"cpu": "500m", "memory": 1073741824}},
            "clusters": [{"name": "member2", "replicas": 3}],
            "gracefulEvictionTasks": [
                {
                    "fromCluster": "member1",
                    "purgeMode": "Directly",
                    "replicas": 3,
                    "reason": "ApplicationFailure",
                    "producer": "resource-binding-application-failover-controller",
                    "preservedLabelState": {"failover.io/job-id": "abc"},
                    "clustersBeforeFailover": ["member1"],
                    "creationTimestamp": "2025-06-01T11:30:00Z",
                }
            ],
            "failover": SAMPLE_PP["spec"]["failover"],
            "placement": SAMPLE_PP["spec"]["placement"],
        },
        "status": {
            "schedulerObservedGeneration": 4,
            "conditions": [condition],
            "aggregatedStatus": [
                {
                    "clusterName": "member2",
                    "applied": True,
                    "health": "Healthy",
                    "status": {"jobStatus": {"jobId": "abc"}},
                }
            ],
        },
    }
    assert validate(rb, by_kind("ResourceBinding").schema) == []
    bad_task = copy.deepcopy(rb)
    bad_task["spec"]["gracefulEvictionTasks"][0]["reason"] = "has spaces"
    assert validate(bad_task, by_kind("ResourceBinding").schema)

    work = {
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "job-687f7fb96f", "namespace": "karmada-es-member2"},
        "spec": {
            "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "anything": {"goes": 1}}]}
        },
        "status": {
            "conditions": [dict(condition, type="Applied", reason="AppliedSuccessful", message="")],
            "manifestStatuses": [
                {
                    "identifier": {
                        "ordinal": 0,
                        "version": "v1",
                        "kind": "ConfigMap",
                        "resource": "",
                        "name": "c",
                    },
                    "health": "Healthy",
                }
            ],
        },
    }
    assert validate(work, by_kind("Work").schema) == []

    cluster = {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "member1"},
        "spec": {
            "syncMode": "Push",
            "apiEndpoint": "https://127.0.0.1:6443",
            "secretRef": {"namespace": "karmada-cluster", "name": "member1"},
            "taints": [
                {
                    "key": "cluster.karmada.io/not-ready",
                    "effect": "NoExecute",
                    "timeAdded": "2025-06-01T11:00:00Z",
                }
            ],
            "zones": ["z1"],
        },
        "status": {
            "kubernetesVersion": "v1.37.0",
            "conditions": [
                dict(condition, type="Ready", reason="ClusterReady", message="cluster is healthy and ready")
            ],
            "resourceSummary": {"allocatable": {"cpu": "8", "pods": 110}},
        },
    }
    assert validate(cluster, by_kind("Cluster").schema) == []
    assert validate(dict(cluster, spec={"syncMode": "Sideways"}), by_kind("Cluster").schema)

    ctp = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterTaintPolicy",
        "metadata": {"name": "not-ready"},
        "spec": {
            "targetClusters": {"clusterNames": ["member1"]},
            "addOnConditions": [
                {"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}
            ],
            "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
            "taints": [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}],
        },
    }
    assert validate(ctp, by_kind("ClusterTaintPolicy").schema) == []
    assert validate(dict(ctp, spec=dict(ctp["spec"], taints=[])), by_kind("ClusterTaintPolicy").schema)


def test_builtin_schema_accepts_real_world_manifest() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "creationTimestamp": None, "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {},
            "template": {
                "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginx:1.27",
                            "resources": {"requests": {"cpu": "100m"}},
                            "ports": [{"containerPort": 80}],
                            "someFutureField": True,
                        }
                    ],
                    "shareProcessNamespace": True,
                },
            },
        },
        "status": {},
    }
    assert validate(deployment, by_kind("Deployment").schema) == []


# --------------------------------------------------------------------------------------------------
# Time and label formatting


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (270, "4m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 20 * 60, "3h20m"),
        (9 * 3600, "9h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (2 * 86400 + 5 * 3600, "2d5h"),
        (8 * 86400, "8d"),
        (400 * 86400, "400d"),
        (800 * 86400, "2y70d"),
        (730 * 86400, "2y"),
        (3650 * 86400, "10y"),
        (-1, "0s"),
        (-3, "<invalid>"),
    ],
)
def test_human_duration(seconds: int, expected: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == expected


def test_human_age() -> None:
    assert human_age(ago(seconds=45), NOW) == "45s"
    assert human_age("2025-06-01T11:55:30.123456Z", NOW) == "4m29s"
    assert human_age(NOW - timedelta(days=3), NOW) == "3d"
    assert human_age(None, NOW) == "<unknown>"
    assert human_age("garbage", NOW) == "<unknown>"
    recent = (datetime.now(UTC) - timedelta(seconds=5)).isoformat()
    assert human_age(recent) in {"4s", "5s", "6s"}  # defaults to the current time


def test_label_formatting() -> None:
    assert format_labels({"b": "2", "a": "1"}) == "a=1,b=2"
    assert format_labels({}) == "<none>"
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["fe", "be"]},
            {"key": "legacy", "operator": "DoesNotExist"},
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "canary", "operator": "Exists"},
        ],
    }
    assert format_label_selector(selector) == "app=web,canary,env notin (dev),!legacy,tier in (be,fe)"
    assert format_label_selector(None) == "<none>"
    assert format_label_selector({}) == "<none>"


# --------------------------------------------------------------------------------------------------
# Custom tables


def test_custom_tables_shape() -> None:
    assert set(CUSTOM_TABLES) >= {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("", "Pod"),
        ("", "Namespace"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "Service"),
        ("batch", "Job"),
        ("", "Event"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("coordination.k8s.io", "Lease"),
    }
    for key, table in CUSTOM_TABLES.items():
        assert builtin_type(*key) is not None, key
        names = [c.name for c in table.columns]
        assert len(names) == len(set(names)), key
        name_cols = [c for c in table.columns if c.format == "name"]
        assert len(name_cols) == 1 and name_cols[0].name == "Name", key
        for col in table.columns:
            assert col.type in {"string", "integer", "number", "boolean", "date"}
            assert col.description
        definitions = table.column_definitions()
        assert set(definitions[0]) == {"name", "type", "format", "description", "priority"}
        # every cell function copes with an empty object and returns one cell per column
        assert len(table.cells({}, NOW)) == len(table.columns), key
        assert len(table.cells({"metadata": {"name": "x"}, "spec": None, "status": None}, NOW)) == len(
            table.columns
        )
        assert custom_cells[key] is table.cells and custom_columns[key] == table.columns


def cells(group: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    columns = custom_columns[(group, kind)]
    values = custom_cells[(group, kind)](obj, NOW)
    json.dumps(values)  # cells must be JSON-compatible
    return dict(zip([c.name for c in columns], values, strict=True))


def test_deployment_cells() -> None:
    deploy = {
        "metadata": {"name": "web", "creationTimestamp": ago(minutes=5)},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "spec": {"containers": [{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "busybox"}]}
            },
        },
        "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    assert cells("apps", "Deployment", deploy) == {
        "Name": "web",
        "Ready": "2/3",
        "Up-to-date": 3,
        "Available": 2,
        "Age": "5m",
        "Containers": "a,b",
        "Images": "nginx:1,busybox",
        "Selector": "app=web",
    }
    fresh = {"metadata": {"name": "web", "creationTimestamp": ago(seconds=3)}, "spec": {}}
    assert cells("apps", "Deployment", fresh)["Ready"] == "0/1"


def test_statefulset_replicaset_daemonset_cells() -> None:
    sts = {"metadata": {"name": "db"}, "spec": {"replicas": 2}, "status": {"readyReplicas": 1}}
    assert cells("apps", "StatefulSet", sts)["Ready"] == "1/2"
    rs = {
        "metadata": {"name": "web-abc"},
        "spec": {"replicas": 4},
        "status": {"replicas": 4, "readyReplicas": 3},
    }
    assert [cells("apps", "ReplicaSet", rs)[c] for c in ("Desired", "Current", "Ready")] == [4, 4, 3]
    ds = {
        "metadata": {"name": "agent"},
        "spec": {"template": {"spec": {"nodeSelector": {"os": "linux"}}}},
        "status": {"desiredNumberScheduled": 3, "numberReady": 2},
    }
    row = cells("apps", "DaemonSet", ds)
    assert (row["Desired"], row["Ready"], row["Node Selector"]) == (3, 2, "os=linux")


def running_pod(**status_extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "creationTimestamp": ago(hours=4)},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app"}, {"name": "side"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.5",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": ago(hours=2)}},
                },
                {
                    "name": "side",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": ago(hours=2)}},
                },
            ],
            **status_extra,
        },
    }


def test_pod_cells_running() -> None:
    assert cells("", "Pod", running_pod()) == {
        "Name": "web-1",
        "Ready": "2/2",
        "Status": "Running",
        "Restarts": "0",
        "Age": "4h",
        "IP": "10.0.0.5",
        "Node": "node-a",
        "Nominated Node": "<none>",
        "Readiness Gates": "<none>",
    }


def test_pod_cells_waiting_and_restarts() -> None:
    pod = running_pod()
    pod["status"]["containerStatuses"][1] = {
        "name": "side",
        "ready": False,
        "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(seconds=90)}},
    }
    row = cells("", "Pod", pod)
    assert (row["Ready"], row["Status"], row["Restarts"]) == ("1/2", "CrashLoopBackOff", "4 (90s ago)")


def test_pod_cells_pending_terminating_and_init() -> None:
    pending = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app"}]},
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
            ],
        },
    }
    row = cells("", "Pod", pending)
    assert (row["Ready"], row["Status"], row["IP"], row["Node"]) == (
        "0/1",
        "ContainerCreating",
        "<none>",
        "<none>",
    )

    no_status = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app"}]},
        "status": {"phase": "Pending"},
    }
    assert cells("", "Pod", no_status)["Status"] == "Pending"

    terminating = running_pod()
    terminating["metadata"]["deletionTimestamp"] = ago(seconds=1)
    assert cells("", "Pod", terminating)["Status"] == "Terminating"

    init = {
        "metadata": {"name": "p"},
        "spec": {"initContainers": [{"name": "setup"}], "containers": [{"name": "app"}]},
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "setup", "ready": False, "restartCount": 0, "state": {"running": {}}}
            ],
        },
    }
    assert cells("", "Pod", init)["Status"] == "Init:0/1"

    done = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app"}]},
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
            ],
        },
    }
    assert cells("", "Pod", done)["Status"] == "Completed"


def test_pod_readiness_gates_and_sidecars() -> None:
    pod = running_pod()
    pod["spec"]["readinessGates"] = [
        {"conditionType": "example.com/lb"},
        {"conditionType": "example.com/dns"},
    ]
    pod["status"]["conditions"].append({"type": "example.com/lb", "status": "True"})
    assert cells("", "Pod", pod)["Readiness Gates"] == "1/2"

    sidecar = running_pod()
    sidecar["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always"}]
    sidecar["status"]["initContainerStatuses"] = [
        {"name": "proxy", "ready": True, "started": True, "restartCount": 1, "state": {"running": {}}}
    ]
    row = cells("", "Pod", sidecar)
    assert (row["Ready"], row["Restarts"]) == ("3/3", "1")


def test_job_cells() -> None:
    job = {
        "metadata": {"name": "pi", "creationTimestamp": ago(minutes=3)},
        "spec": {"completions": 3, "selector": {"matchLabels": {"batch.kubernetes.io/job-name": "pi"}}},
        "status": {
            "succeeded": 3,
            "startTime": ago(minutes=3),
            "completionTime": ago(minutes=1),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    row = cells("batch", "Job", job)
    assert (row["Status"], row["Completions"], row["Duration"], row["Age"]) == (
        "Complete",
        "3/3",
        "2m",
        "3m",
    )
    assert row["Selector"] == "batch.kubernetes.io/job-name=pi"

    running = {
        "metadata": {"name": "pi"},
        "spec": {"parallelism": 2},
        "status": {"startTime": ago(seconds=30)},
    }
    row = cells("batch", "Job", running)
    assert (row["Status"], row["Completions"], row["Duration"]) == ("Running", "0/1 of 2", "30s")
    failed = {
        "metadata": {"name": "pi"},
        "spec": {},
        "status": {"conditions": [{"type": "Failed", "status": "True"}]},
    }
    row = cells("batch", "Job", failed)
    assert (row["Status"], row["Completions"], row["Duration"]) == ("Failed", "0/1", "")
    suspended = {
        "metadata": {"name": "pi"},
        "status": {"conditions": [{"type": "Suspended", "status": "True"}]},
    }
    assert cells("batch", "Job", suspended)["Status"] == "Suspended"


def test_namespace_configmap_secret_serviceaccount_lease_crd_cells() -> None:
    ns = {"metadata": {"name": "default", "creationTimestamp": ago(days=10)}, "status": {"phase": "Active"}}
    assert cells("", "Namespace", ns) == {"Name": "default", "Status": "Active", "Age": "10d"}
    cm = {"metadata": {"name": "cfg"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert cells("", "ConfigMap", cm)["Data"] == 3
    secret = {
        "metadata": {"name": "tls"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "x", "tls.key": "y"},
    }
    assert cells("", "Secret", secret) == {
        "Name": "tls",
        "Type": "kubernetes.io/tls",
        "Data": 2,
        "Age": "<unknown>",
    }
    assert cells("", "Secret", {"metadata": {"name": "s"}})["Type"] == "Opaque"
    assert cells("", "ServiceAccount", {"metadata": {"name": "default"}})["Secrets"] == 0
    lease = {
        "metadata": {"name": "member1", "creationTimestamp": ago(seconds=20)},
        "spec": {"holderIdentity": "agent-1"},
    }
    assert cells("coordination.k8s.io", "Lease", lease) == {
        "Name": "member1",
        "Holder": "agent-1",
        "Age": "20s",
    }
    crd = {"metadata": {"name": "widgets.example.com", "creationTimestamp": "2025-05-01T10:00:00.5Z"}}
    assert cells("apiextensions.k8s.io", "CustomResourceDefinition", crd) == {
        "Name": "widgets.example.com",
        "Created At": "2025-05-01T10:00:00Z",
    }


def test_service_cells() -> None:
    svc = {
        "metadata": {"name": "web", "creationTimestamp": ago(hours=30)},
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.10",
            "selector": {"app": "web"},
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        },
    }
    assert cells("", "Service", svc) == {
        "Name": "web",
        "Type": "NodePort",
        "Cluster-IP": "10.96.0.10",
        "External-IP": "<none>",
        "Port(s)": "80:30080/TCP,53/UDP",
        "Age": "30h",
        "Selector": "app=web",
    }
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}}
    assert cells("", "Service", lb)["External-IP"] == "<pending>"
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb.example.com"}]}}
    assert cells("", "Service", lb)["External-IP"] == "1.2.3.4,lb.example.com"
    headless = {"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}}
    row = cells("", "Service", headless)
    assert (row["Type"], row["Cluster-IP"], row["Port(s)"], row["Selector"]) == (
        "ClusterIP",
        "None",
        "<none>",
        "<none>",
    )
    ext = {"metadata": {"name": "e"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}}
    assert cells("", "Service", ext)["External-IP"] == "db.example.com"


def test_event_cells() -> None:
    event = {
        "metadata": {"name": "web-1.17f0"},
        "involvedObject": {
            "kind": "Pod",
            "name": "web-1",
            "namespace": "default",
            "fieldPath": "spec.containers{app}",
        },
        "reason": "Pulled",
        "message": "Successfully pulled image \n",
        "type": "Normal",
        "source": {"component": "kubelet", "host": "node-a"},
        "firstTimestamp": ago(minutes=10),
        "lastTimestamp": ago(minutes=2),
        "count": 3,
    }
    assert cells("", "Event", event) == {
        "Last Seen": "2m",
        "Type": "Normal",
        "Reason": "Pulled",
        "Object": "pod/web-1",
        "Subobject": "spec.containers{app}",
        "Source": "kubelet, node-a",
        "Message": "Successfully pulled image",
        "First Seen": "10m",
        "Count": 3,
        "Name": "web-1.17f0",
    }
    new_style = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Cluster"},
        "eventTime": ago(seconds=30),
        "reportingComponent": "karmada-scheduler",
        "series": {"count": 5, "lastObservedTime": ago(seconds=4)},
    }
    row = cells("", "Event", new_style)
    assert (row["Last Seen"], row["First Seen"], row["Object"], row["Source"], row["Count"]) == (
        "4s",
        "30s",
        "cluster",
        "karmada-scheduler",
        5,
    )


def test_cluster_cells() -> None:
    cluster = {
        "metadata": {"name": "member1", "creationTimestamp": ago(minutes=15)},
        "spec": {
            "syncMode": "Push",
            "apiEndpoint": "https://10.0.0.1:6443",
            "zones": ["z1", "z2"],
            "region": "eu",
        },
        "status": {"kubernetesVersion": "v1.37.0", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert cells("cluster.karmada.io", "Cluster", cluster) == {
        "Name": "member1",
        "Version": "v1.37.0",
        "Mode": "Push",
        "Ready": "True",
        "Age": "15m",
        "Zones": "z1,z2",
        "Region": "eu",
        "Provider": "<none>",
        "API-Endpoint": "https://10.0.0.1:6443",
        "Proxy-URL": "<none>",
    }
    assert cells("cluster.karmada.io", "Cluster", {"metadata": {"name": "m"}})["Ready"] == "Unknown"
