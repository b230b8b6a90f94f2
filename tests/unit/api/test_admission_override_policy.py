"""OverridePolicy / ClusterOverridePolicy admission."""

from __future__ import annotations

import copy
from typing import Any

from flotilla.apiserver.webhooks.override_policy import OverridePolicyAdmission, validate_override_spec


def errors(spec: dict[str, Any], namespace: str = "ns") -> list[str]:
    return [f"{c.field}: {c.message}" for c in validate_override_spec(spec, namespace)]


def rule(**overriders: Any) -> dict[str, Any]:
    return {"overrideRules": [{"overriders": overriders}]}


def test_namespace_defaulted_for_override_policy_only() -> None:
    obj = {"metadata": {"name": "o", "namespace": "ns"},
           "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}}
    cop = copy.deepcopy(obj)
    OverridePolicyAdmission(cluster_scoped=False).default(obj, None, "CREATE")
    OverridePolicyAdmission(cluster_scoped=True).default(cop, None, "CREATE")
    assert obj["spec"]["resourceSelectors"][0]["namespace"] == "ns"
    assert "namespace" not in cop["spec"]["resourceSelectors"][0]


def test_valid_policy() -> None:
    spec = {
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ns"}],
        "overrideRules": [{
            "targetCluster": {"clusterNames": ["m1"], "fieldSelector": {"matchExpressions": [
                {"key": "region", "operator": "In", "values": ["eu"]}]}},
            "overriders": {
                "plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 2},
                              {"path": "/metadata/annotations/a~1b", "operator": "remove"}],
                "imageOverrider": [{"component": "Registry", "operator": "replace", "value": "mirror.io"},
                                   {"predicate": {"path": "/spec/template/spec/containers/0/image"},
                                    "component": "Tag", "operator": "remove"}],
                "commandOverrider": [{"containerName": "app", "operator": "add", "value": ["--x"]}],
                "labelsOverrider": [{"operator": "add", "value": {"env": "prod"}}],
                "annotationsOverrider": [{"operator": "add", "value": {"Example.com/Note": "any text"}}],
                "fieldOverrider": [{"fieldPath": "/data/config.yaml",
                                    "yaml": [{"subPath": "/db/port", "operator": "replace", "value": 5432}]}],
            },
        }],
    }
    assert errors(spec) == []


def test_karmada_exclusivity_rules() -> None:
    spec = {"targetCluster": {"clusterNames": ["a"]}, "overriders": {"plaintext": [
        {"path": "/a", "operator": "remove"}]}, "overrideRules": []}
    msgs = errors(spec)
    assert msgs[0].startswith("spec.targetCluster: Invalid value: {")
    assert msgs[0].endswith("overrideRules and targetCluster can't co-exist")
    assert msgs[1].startswith("spec.overriders: Invalid value: {")
    assert msgs[1].endswith("overrideRules and overriders can't co-exist")


def test_labels_and_annotations_overriders() -> None:
    msgs = errors(rule(labelsOverrider=[{"operator": "add", "value": {"ok": "bad value!"}}],
                       annotationsOverrider=[{"operator": "add", "value": {"bad key!": "v"}}]))
    assert msgs[0].startswith('spec.overrideRules[0].overriders.annotationsOverrider[0].value: Invalid value: "bad key!"')
    assert msgs[1].startswith('spec.overrideRules[0].overriders.labelsOverrider[0].value: Invalid value: "bad value!"')


def test_image_overrider() -> None:
    assert errors(rule(imageOverrider=[{"predicate": {"path": "spec/image"}, "component": "Tag", "operator": "remove"},
                                       {"component": "Tag", "operator": "add"}])) == [
        'spec.overrideRules[0].overriders.imageOverrider[0].predicate.path: Invalid value: "spec/image": '
        'JSON pointer must be empty or start with a "/"',
        "spec.overrideRules[0].overriders.imageOverrider[1].value: Required value: value is required for add or "
        "replace operation",
    ]


def test_field_overrider() -> None:
    msgs = errors(rule(fieldOverrider=[
        {"fieldPath": "data/x", "json": [{"subPath": "a", "operator": "add"}],
         "yaml": [{"subPath": "/b", "operator": "remove", "value": 1}]},
        {"fieldPath": "/data/y"},
    ]))
    p = "spec.overrideRules[0].overriders.fieldOverrider"
    assert msgs[0].startswith(f"{p}[0]: Invalid value: {{")
    assert msgs[0].endswith("FieldOverrider has both YAML and JSON set. Only one is allowed")
    assert msgs[1:] == [
        f'{p}[0].fieldPath: Invalid value: "data/x": JSON pointer must be empty or start with a "/"',
        f'{p}[0].json[0].subPath: Invalid value: "a": JSON pointer must be empty or start with a "/"',
        f"{p}[0].json[0].value: Invalid value: null: value is required for add or replace operation",
        f"{p}[0].yaml[0].value: Invalid value: 1: value is not allowed for remove operation",
        f"{p}[1]: Required value: FieldOverrider must have either JSON or YAML set",
    ]


def test_plaintext_and_command_overriders() -> None:
    p = "spec.overrideRules[0].overriders"
    assert errors(rule(plaintext=[{"path": "", "operator": "remove"},
                                  {"path": "spec/replicas", "operator": "replace", "value": 1},
                                  {"path": "/a~2", "operator": "add", "value": "x"},
                                  {"path": "/spec/replicas", "operator": "add"}],
                       argsOverrider=[{"containerName": "", "operator": "add", "value": ["x"]}])) == [
        f"{p}.plaintext[0].path: Required value: a JSON pointer such as '/spec/replicas'",
        f'{p}.plaintext[1].path: Invalid value: "spec/replicas": JSON pointer must be empty or start with a "/"',
        f'{p}.plaintext[2].path: Invalid value: "/a~2": JSON pointer has an invalid escape: \'~\' must be followed by \'0\' or \'1\'',
        f"{p}.plaintext[3].value: Invalid value: null: value is required for add or replace operation",
        f"{p}.argsOverrider[0].containerName: Required value",
    ]


def test_deprecated_overriders_checked_too() -> None:
    assert errors({"overriders": {"plaintext": [{"path": "x", "operator": "remove"}]}}) == [
        'spec.overriders.plaintext[0].path: Invalid value: "x": JSON pointer must be empty or start with a "/"'
    ]


def test_remove_with_value_is_a_warning() -> None:
    obj = {"metadata": {"name": "o", "namespace": "ns"},
           "spec": rule(plaintext=[{"path": "/a", "operator": "remove", "value": 1}])}
    plugin = OverridePolicyAdmission(cluster_scoped=False)
    assert plugin.validate(obj, None, "CREATE") == []
    assert plugin.warnings(obj, None, "CREATE") == [
        "spec.overrideRules[0].overriders.plaintext[0].value: ignored: a remove operation takes no value"
    ]


def test_target_cluster_and_selectors() -> None:
    spec = {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "elsewhere"}],
            "overrideRules": [{"targetCluster": {"fieldSelector": {"matchExpressions": [
                {"key": "provider", "operator": "Exists"}]}}, "overriders": {}}]}
    msgs = errors(spec)
    assert msgs[0].startswith("spec.overrideRules[0].targetCluster.fieldSelector: Invalid value: {")
    assert msgs[0].endswith('unsupported operator "Exists", must be In or NotIn')
    assert msgs[1] == ('spec.resourceSelectors[0].namespace: Invalid value: "elsewhere": namespace of resource '
                       "selector must be the same as the namespace of the policy")
    assert errors(spec | {"overrideRules": []}, namespace="") == []  # ClusterOverridePolicy
