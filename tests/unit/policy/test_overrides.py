"""(Cluster)OverridePolicy application and the applied-overrides annotations."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from flotilla.policy.overrides import (
    APPLIED_CLUSTER_OVERRIDES_ANNOTATION,
    APPLIED_OVERRIDES_ANNOTATION,
    AppliedOverride,
    OverrideError,
    applied_override_annotations,
    applied_overrides_json,
    apply_overriders,
    apply_overrides,
    cluster_overriders,
    go_json_dumps,
    matching_override_policies,
    override_rules,
)

DIGEST = "sha256:dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9c"


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {
                    "initContainers": [{"name": "init", "image": "busybox"}],
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginx:1.19",
                            "command": ["nginx"],
                            "args": ["-g", "daemon off;"],
                        },
                        {"name": "sidecar", "image": "registry.k8s.io/pause:3.9"},
                    ],
                },
            },
        },
    }


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "fictional.registry.example/imagename:v1.0.0"}]},
    }


MEMBER1 = {"metadata": {"name": "member1", "labels": {"env": "prod"}}, "spec": {"region": "eu"}}
MEMBER2 = {"metadata": {"name": "member2", "labels": {"env": "dev"}}, "spec": {"region": "us"}}


def rule(target: dict[str, Any] | None = None, **overriders: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"overriders": overriders}
    if target is not None:
        result["targetCluster"] = target
    return result


def op(
    name: str,
    *rules: dict[str, Any],
    selectors: list[dict[str, Any]] | None = None,
    namespace: str = "default",
):
    spec: dict[str, Any] = {"overrideRules": list(rules)}
    if selectors is not None:
        spec["resourceSelectors"] = selectors
    return {"kind": "OverridePolicy", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def cop(name: str, *rules: dict[str, Any], selectors: list[dict[str, Any]] | None = None):
    policy = op(name, *rules, selectors=selectors)
    policy["kind"] = "ClusterOverridePolicy"
    del policy["metadata"]["namespace"]
    return policy


def plaintext(path: str, operator: str, value: Any = None) -> dict[str, Any]:
    item = {"path": path, "operator": operator}
    if value is not None:
        item["value"] = value
    return item


def image(component: str, operator: str, value: str = "", path: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"component": component, "operator": operator}
    if value:
        item["value"] = value
    if path is not None:
        item["predicate"] = {"path": path}
    return item


def images(obj: dict[str, Any]) -> list[str]:
    spec = obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]
    return [c["image"] for c in spec["containers"]]


def overridden_images(obj: dict[str, Any], *overriders: dict[str, Any]) -> list[str]:
    return images(apply_overriders(obj, {"imageOverrider": list(overriders)}))


# -- imageOverrider ----------------------------------------------------------------------------


def test_registry_replace_on_an_image_without_registry_adds_one() -> None:
    assert overridden_images(deployment(), image("Registry", "replace", "registry.io")) == [
        "registry.io/nginx:1.19",
        "registry.io/pause:3.9",
    ]


def test_registry_add_appends_to_the_hostname() -> None:
    assert overridden_images(pod(), image("Registry", "add", ".test")) == [
        "fictional.registry.example.test/imagename:v1.0.0"
    ]


def test_registry_add_on_an_image_without_registry_sets_it() -> None:
    assert (
        overridden_images(deployment(), image("Registry", "add", "registry.io"))[0]
        == "registry.io/nginx:1.19"
    )


def test_registry_remove() -> None:
    assert overridden_images(pod(), image("Registry", "remove")) == ["imagename:v1.0.0"]


def test_a_first_path_component_without_dot_or_colon_is_not_a_registry() -> None:
    obj = pod()
    obj["spec"]["containers"][0]["image"] = "library/nginx:1.0"
    assert overridden_images(obj, image("Registry", "replace", "r.io")) == ["r.io/library/nginx:1.0"]
    obj["spec"]["containers"][0]["image"] = "localhost/nginx"
    assert overridden_images(obj, image("Registry", "remove")) == ["nginx"]


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("add", "/nginx", "fictional.registry.example/imagename/nginx:v1.0.0"),
        ("replace", "nginx", "fictional.registry.example/nginx:v1.0.0"),
        ("remove", "", "fictional.registry.example/:v1.0.0"),
    ],
)
def test_repository_operators(operator: str, value: str, expected: str) -> None:
    assert overridden_images(pod(), image("Repository", operator, value)) == [expected]


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("replace", "v2", "fictional.registry.example/imagename:v2"),
        ("replace", DIGEST, f"fictional.registry.example/imagename@{DIGEST}"),
        ("add", "-debug", "fictional.registry.example/imagename:v1.0.0-debug"),
        # "v1.0.0sha256:…" is neither a valid tag nor a valid digest: nothing changes.
        ("add", DIGEST, "fictional.registry.example/imagename:v1.0.0"),
        ("replace", "not a tag!", "fictional.registry.example/imagename:v1.0.0"),
        ("remove", "", "fictional.registry.example/imagename"),
    ],
)
def test_tag_operators(operator: str, value: str, expected: str) -> None:
    assert overridden_images(pod(), image("Tag", operator, value)) == [expected]


def test_tag_add_on_an_untagged_image_sets_the_tag() -> None:
    obj = pod()
    obj["spec"]["containers"][0]["image"] = "nginx"
    assert overridden_images(obj, image("Tag", "add", "v1")) == ["nginx:v1"]


def test_tag_operators_on_a_digest_reference() -> None:
    obj = pod()
    obj["spec"]["containers"][0]["image"] = f"nginx@{DIGEST}"
    assert overridden_images(obj, image("Tag", "replace", "v1")) == ["nginx:v1"]
    assert overridden_images(obj, image("Tag", "remove")) == ["nginx"]
    assert overridden_images(obj, image("Registry", "replace", "r.io")) == [f"r.io/nginx@{DIGEST}"]


def test_a_reference_with_tag_and_digest_loses_the_digest() -> None:
    obj = pod()
    obj["spec"]["containers"][0]["image"] = f"nginx:1.0@{DIGEST}"
    assert overridden_images(obj, image("Registry", "replace", "r.io")) == ["r.io/nginx:1.0"]
    # An unknown operator changes nothing but still normalises the reference.
    assert overridden_images(obj, image("Registry", "bogus", "x")) == ["nginx:1.0"]


def test_init_containers_are_not_touched() -> None:
    result = apply_overriders(deployment(), {"imageOverrider": [image("Registry", "replace", "r.io")]})
    assert result["spec"]["template"]["spec"]["initContainers"][0]["image"] == "busybox"


@pytest.mark.parametrize("kind", ["ReplicaSet", "Deployment", "DaemonSet", "StatefulSet", "Job"])
def test_pod_template_kinds_use_the_template_containers(kind: str) -> None:
    obj = deployment()
    obj["kind"] = kind
    assert overridden_images(obj, image("Tag", "replace", "v9")) == ["nginx:v9", "registry.k8s.io/pause:v9"]


def test_pod_uses_spec_containers() -> None:
    assert overridden_images(pod(), image("Repository", "replace", "nginx")) == [
        "fictional.registry.example/nginx:v1.0.0"
    ]


@pytest.mark.parametrize("kind", ["CronJob", "ConfigMap", "Service"])
def test_other_kinds_are_untouched_without_a_predicate(kind: str) -> None:
    obj = deployment()
    obj["kind"] = kind
    assert apply_overriders(obj, {"imageOverrider": [image("Registry", "replace", "r.io")]}) == obj


def test_workload_without_containers_is_untouched() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}}
    assert apply_overriders(obj, {"imageOverrider": [image("Registry", "replace", "r.io")]}) == obj


def test_predicate_targets_one_image() -> None:
    path = "/spec/template/spec/containers/1/image"
    assert overridden_images(deployment(), image("Repository", "replace", "nginx", path=path)) == [
        "nginx:1.19",
        "registry.k8s.io/nginx:3.9",
    ]


def test_predicate_can_reach_init_containers_and_any_kind() -> None:
    obj = deployment()
    obj["kind"] = "CronJob"
    result = apply_overriders(
        obj,
        {
            "imageOverrider": [
                image("Tag", "replace", "1.36", path="/spec/template/spec/initContainers/0/image")
            ]
        },
    )
    assert result["spec"]["template"]["spec"]["initContainers"][0]["image"] == "busybox:1.36"


@pytest.mark.parametrize(
    "path",
    [
        "/spec/template/spec/containers/5/image",
        "/spec/template/spec/containers/x/image",
        "/spec/template/spec/missing/0/image",
        "/spec/replicas/image",
        "/spec/template/spec/containers/0/name/x",
        "/spec/template",
        "",
    ],
)
def test_predicate_path_that_does_not_lead_to_a_string_fails(path: str) -> None:
    with pytest.raises(OverrideError, match="predicate path"):
        apply_overriders(deployment(), {"imageOverrider": [image("Tag", "replace", "v1", path=path)]})


def test_predicate_path_must_start_with_a_slash() -> None:
    with pytest.raises(OverrideError, match="start with /"):
        apply_overriders(
            deployment(),
            {"imageOverrider": [image("Tag", "replace", "v1", path="spec/template/spec/containers/0/image")]},
        )


@pytest.mark.parametrize("bad", ["Nginx:1.0", "", "nginx@sha256:abc", "nginx@md5:" + "a" * 32, "a//b"])
def test_invalid_images_fail(bad: str) -> None:
    obj = pod()
    obj["spec"]["containers"][0]["image"] = bad
    with pytest.raises(OverrideError, match="failed to parse image"):
        apply_overriders(obj, {"imageOverrider": [image("Tag", "replace", "v1")]})


def test_container_without_image_fails() -> None:
    obj = pod()
    del obj["spec"]["containers"][0]["image"]
    with pytest.raises(OverrideError):
        apply_overriders(obj, {"imageOverrider": [image("Tag", "replace", "v1")]})


def test_unknown_component_fails() -> None:
    with pytest.raises(OverrideError, match="unsupported image component"):
        apply_overriders(pod(), {"imageOverrider": [image("Digest", "replace", "x")]})


def test_image_overriders_apply_in_sequence() -> None:
    assert overridden_images(pod(), image("Registry", "replace", "r.io"), image("Tag", "replace", "v2")) == [
        "r.io/imagename:v2"
    ]


# -- commandOverrider / argsOverrider ----------------------------------------------------------


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["template"]["spec"]["containers"]


def test_command_add_appends_to_the_named_container_only() -> None:
    result = apply_overriders(
        deployment(),
        {"commandOverrider": [{"containerName": "nginx", "operator": "add", "value": ["-c", "x"]}]},
    )
    assert containers(result)[0]["command"] == ["nginx", "-c", "x"]
    assert "command" not in containers(result)[1]


def test_args_remove_drops_every_equal_entry() -> None:
    obj = deployment()
    containers(obj)[0]["args"] = ["-a", "-b", "-a", "-c"]
    result = apply_overriders(
        obj, {"argsOverrider": [{"containerName": "nginx", "operator": "remove", "value": ["-a", "-z"]}]}
    )
    assert containers(result)[0]["args"] == ["-b", "-c"]


def test_missing_list_is_created() -> None:
    result = apply_overriders(
        deployment(),
        {
            "argsOverrider": [{"containerName": "sidecar", "operator": "add", "value": ["--v=2"]}],
            "commandOverrider": [{"containerName": "sidecar", "operator": "remove", "value": ["x"]}],
        },
    )
    assert containers(result)[1]["args"] == ["--v=2"]
    assert containers(result)[1]["command"] == []


def test_command_overrider_on_a_pod() -> None:
    result = apply_overriders(
        pod(), {"commandOverrider": [{"containerName": "web", "operator": "add", "value": ["run"]}]}
    )
    assert result["spec"]["containers"][0]["command"] == ["run"]


def test_command_overrider_ignores_unknown_container_names_and_kinds() -> None:
    override = {"commandOverrider": [{"containerName": "nope", "operator": "add", "value": ["x"]}]}
    assert apply_overriders(deployment(), override) == deployment()
    obj = deployment()
    obj["kind"] = "CronJob"
    override["commandOverrider"][0]["containerName"] = "nginx"
    assert apply_overriders(obj, override) == obj


def test_unknown_command_operator_keeps_the_list() -> None:
    result = apply_overriders(
        deployment(), {"argsOverrider": [{"containerName": "nginx", "operator": "replace", "value": ["x"]}]}
    )
    assert containers(result)[0]["args"] == ["-g", "daemon off;"]


def test_non_string_entries_are_rewritten_like_go_percent_s() -> None:
    obj = deployment()
    containers(obj)[0]["args"] = ["a", 5, True, 1.5]
    result = apply_overriders(
        obj, {"argsOverrider": [{"containerName": "nginx", "operator": "add", "value": ["b"]}]}
    )
    assert containers(result)[0]["args"] == ["a", "%!s(int64=5)", "%!s(bool=true)", "%!s(float64=1.5)", "b"]


def test_containers_of_the_wrong_type_fail() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["containers"] = None
    with pytest.raises(OverrideError, match="accessor error"):
        apply_overriders(
            obj, {"commandOverrider": [{"containerName": "nginx", "operator": "add", "value": ["x"]}]}
        )


# -- labelsOverrider / annotationsOverrider ----------------------------------------------------


def test_labels_add_sets_and_overwrites_keys() -> None:
    result = apply_overriders(
        deployment(),
        {"labelsOverrider": [{"operator": "add", "value": {"app": "web", "example.com/team": "a"}}]},
    )
    assert result["metadata"]["labels"] == {"app": "web", "example.com/team": "a"}


def test_annotations_add_creates_the_map() -> None:
    result = apply_overriders(
        deployment(), {"annotationsOverrider": [{"operator": "add", "value": {"a/b": "c"}}]}
    )
    assert result["metadata"]["annotations"] == {"a/b": "c"}


def test_labels_replace_and_remove_only_touch_existing_keys() -> None:
    obj = deployment()
    obj["metadata"]["labels"] = {"app": "nginx", "tier": "web"}
    result = apply_overriders(
        obj,
        {
            "labelsOverrider": [
                {"operator": "replace", "value": {"app": "web", "missing": "x"}},
                {"operator": "remove", "value": {"tier": "", "absent": ""}},
            ]
        },
    )
    assert result["metadata"]["labels"] == {"app": "web"}


def test_replace_and_remove_on_missing_map_do_nothing() -> None:
    result = apply_overriders(
        deployment(), {"annotationsOverrider": [{"operator": "remove", "value": {"a": ""}}]}
    )
    assert "annotations" not in result["metadata"]


def test_unknown_label_operator_fails() -> None:
    with pytest.raises(OverrideError):
        apply_overriders(deployment(), {"labelsOverrider": [{"operator": "upsert", "value": {"a": "b"}}]})


# -- plaintext ---------------------------------------------------------------------------------


def test_plaintext_add_replace_remove() -> None:
    result = apply_overriders(
        deployment(),
        {
            "plaintext": [
                plaintext("/spec/replicas", "replace", 5),
                plaintext("/metadata/annotations", "add", {"x": "y"}),
                plaintext("/spec/template/spec/initContainers", "remove"),
            ]
        },
    )
    assert result["spec"]["replicas"] == 5
    assert result["metadata"]["annotations"] == {"x": "y"}
    assert "initContainers" not in result["spec"]["template"]["spec"]


def test_plaintext_is_one_atomic_patch() -> None:
    with pytest.raises(OverrideError):
        apply_overriders(
            deployment(),
            {
                "plaintext": [
                    plaintext("/spec/replicas", "replace", 5),
                    plaintext("/spec/missing/x", "replace", 1),
                ]
            },
        )


def test_plaintext_that_removes_the_kind_fails() -> None:
    with pytest.raises(OverrideError, match="Kind"):
        apply_overriders(deployment(), {"plaintext": [plaintext("/kind", "remove")]})


def test_plaintext_add_without_value_adds_null() -> None:
    result = apply_overriders(deployment(), {"plaintext": [plaintext("/spec/paused", "add")]})
    assert result["spec"]["paused"] is None


# -- fieldOverrider ----------------------------------------------------------------------------


def configmap(key: str, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "default"},
        "data": {key: text},
    }


def test_field_overrider_json_patches_the_embedded_document() -> None:
    obj = configmap("config.json", '{"db": {"host": "a", "port": 1}, "z": true}')
    result = apply_overriders(
        obj,
        {
            "fieldOverrider": [
                {
                    "fieldPath": "/data/config.json",
                    "json": [{"subPath": "/db/host", "operator": "replace", "value": "b<1>"}],
                }
            ]
        },
    )
    assert result["data"]["config.json"] == '{"db":{"host":"b\\u003c1\\u003e","port":1},"z":true}'


def test_field_overrider_yaml_patches_the_embedded_document() -> None:
    obj = configmap("config.yaml", "db:\n  host: a\n  since: 2024-01-01\nlist:\n- 1\n")
    result = apply_overriders(
        obj,
        {
            "fieldOverrider": [
                {
                    "fieldPath": "/data/config.yaml",
                    "yaml": [
                        {"subPath": "/db/host", "operator": "replace", "value": "b"},
                        {"subPath": "/list/-", "operator": "add", "value": 2},
                    ],
                }
            ]
        },
    )
    assert result["data"]["config.yaml"] == 'db:\n  host: b\n  since: "2024-01-01"\nlist:\n- 1\n- 2\n'


def test_field_overrider_yaml_writes_multiline_strings_as_literal_blocks() -> None:
    obj = configmap("c.yaml", "script: |\n  echo a\n  echo b\n")
    result = apply_overriders(
        obj,
        {
            "fieldOverrider": [
                {"fieldPath": "/data/c.yaml", "yaml": [{"subPath": "/x", "operator": "add", "value": "y"}]}
            ]
        },
    )
    assert result["data"]["c.yaml"] == "script: |\n  echo a\n  echo b\nx: y\n"


def test_field_overrider_on_a_non_string_fails() -> None:
    with pytest.raises(OverrideError, match="is not string"):
        apply_overriders(deployment(), {"fieldOverrider": [{"fieldPath": "/spec/replicas", "json": []}]})


def test_field_overrider_on_a_missing_path_fails() -> None:
    with pytest.raises(OverrideError):
        apply_overriders(configmap("a", "{}"), {"fieldOverrider": [{"fieldPath": "/data/b", "json": []}]})


def test_field_overrider_without_operations_empties_the_field() -> None:
    result = apply_overriders(configmap("a", '{"x":1}'), {"fieldOverrider": [{"fieldPath": "/data/a"}]})
    assert result["data"]["a"] == ""


def test_field_overrider_with_invalid_json_fails() -> None:
    with pytest.raises(OverrideError):
        apply_overriders(
            configmap("a", "{not json"),
            {
                "fieldOverrider": [
                    {"fieldPath": "/data/a", "json": [{"subPath": "/x", "operator": "add", "value": 1}]}
                ]
            },
        )


# -- order inside one overriders block ----------------------------------------------------------


def test_plaintext_runs_after_the_image_overrider() -> None:
    result = apply_overriders(
        pod(),
        {
            "plaintext": [plaintext("/spec/containers/0/image", "replace", "final:1")],
            "imageOverrider": [image("Registry", "replace", "r.io")],
        },
    )
    assert images(result) == ["final:1"]


def test_plaintext_sees_labels_added_by_the_labels_overrider() -> None:
    result = apply_overriders(
        deployment(),
        {
            "plaintext": [plaintext("/metadata/labels/added", "remove")],
            "labelsOverrider": [{"operator": "add", "value": {"added": "1"}}],
        },
    )
    assert result["metadata"]["labels"] == {"app": "nginx"}


def test_annotations_overrider_runs_after_labels_and_before_plaintext() -> None:
    result = apply_overriders(
        deployment(),
        {
            "annotationsOverrider": [{"operator": "replace", "value": {"k": "from-annotations"}}],
            "labelsOverrider": [{"operator": "add", "value": {"k": "v"}}],
            "plaintext": [plaintext("/metadata/annotations", "add", {"k": "x"})],
        },
    )
    # annotations did not exist when the annotations overrider ran: its replace was a no-op.
    assert result["metadata"]["annotations"] == {"k": "x"}


# -- policies: selection, order, target clusters -----------------------------------------------


def replicas_to(value: int) -> dict[str, Any]:
    return {"plaintext": [plaintext("/spec/replicas", "replace", value)]}


def test_cluster_override_policies_apply_before_override_policies() -> None:
    result, applied = apply_overrides(
        deployment(), MEMBER1, [op("op", rule(**replicas_to(3)))], [cop("cop", rule(**replicas_to(7)))]
    )
    assert result["spec"]["replicas"] == 3
    assert [(a.policy_name, a.cluster_scoped) for a in applied] == [("cop", True), ("op", False)]


def test_policies_apply_by_ascending_precision_then_name() -> None:
    by_name = op(
        "a-by-name",
        rule(**replicas_to(30)),
        selectors=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
    )
    by_label = op(
        "b-by-label",
        rule(**replicas_to(20)),
        selectors=[
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "labelSelector": {"matchLabels": {"app": "nginx"}},
            }
        ],
    )
    everything = op("c-all", rule(**replicas_to(10)))
    kind_only = op(
        "d-kind", rule(**replicas_to(11)), selectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}]
    )
    ordered = matching_override_policies(deployment(), [by_name, everything, by_label, kind_only])
    assert [p["metadata"]["name"] for p in ordered] == ["c-all", "d-kind", "b-by-label", "a-by-name"]
    result, applied = apply_overrides(deployment(), MEMBER1, [by_name, everything, by_label, kind_only], [])
    assert result["spec"]["replicas"] == 30
    assert [a.policy_name for a in applied] == ["c-all", "d-kind", "b-by-label", "a-by-name"]


def test_policies_whose_selectors_do_not_match_are_skipped() -> None:
    other = op(
        "other",
        rule(**replicas_to(9)),
        selectors=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}],
    )
    result, applied = apply_overrides(deployment(), MEMBER1, [other], [])
    assert result == deployment() and applied == []


def test_override_policies_of_other_namespaces_are_ignored() -> None:
    foreign = op("foreign", rule(**replicas_to(9)), namespace="other")
    result, applied = apply_overrides(deployment(), MEMBER1, [foreign], [])
    assert result["spec"]["replicas"] == 2 and applied == []


def test_cluster_scoped_objects_only_get_cluster_override_policies() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}
    add_label = rule(labelsOverrider=[{"operator": "add", "value": {"a": "b"}}])
    result, applied = apply_overrides(role, MEMBER1, [op("op", add_label)], [cop("cop", add_label)])
    assert result["metadata"]["labels"] == {"a": "b"}
    assert [a.policy_name for a in applied] == ["cop"]


def test_override_policies_are_matched_against_the_object_after_cluster_overrides() -> None:
    add_label = cop("cop", rule(labelsOverrider=[{"operator": "add", "value": {"tier": "gold"}}]))
    gold_only = op(
        "gold",
        rule(**replicas_to(9)),
        selectors=[
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "labelSelector": {"matchLabels": {"tier": "gold"}},
            }
        ],
    )
    result, _ = apply_overrides(deployment(), MEMBER1, [gold_only], [add_label])
    assert result["spec"]["replicas"] == 9


def test_rules_apply_only_to_their_target_clusters() -> None:
    policy = op(
        "per-cluster",
        rule({"clusterNames": ["member1"]}, **replicas_to(1)),
        rule({"labelSelector": {"matchLabels": {"env": "dev"}}}, **replicas_to(2)),
        rule(None, labelsOverrider=[{"operator": "add", "value": {"everywhere": "yes"}}]),
        rule(
            {"exclude": ["member1"]}, annotationsOverrider=[{"operator": "add", "value": {"not": "member1"}}]
        ),
    )
    on_member1, applied1 = apply_overrides(deployment(), MEMBER1, [policy], [])
    on_member2, applied2 = apply_overrides(deployment(), MEMBER2, [policy], [])
    assert on_member1["spec"]["replicas"] == 1 and on_member2["spec"]["replicas"] == 2
    assert (
        on_member1["metadata"]["labels"]["everywhere"]
        == on_member2["metadata"]["labels"]["everywhere"]
        == "yes"
    )
    assert "annotations" not in on_member1["metadata"]
    assert on_member2["metadata"]["annotations"] == {"not": "member1"}
    assert len(applied1) == 2 and len(applied2) == 3


def test_rules_of_one_policy_apply_in_order() -> None:
    policy = op("p", rule(**replicas_to(1)), rule(**replicas_to(2)))
    result, applied = apply_overrides(deployment(), MEMBER1, [policy], [])
    assert result["spec"]["replicas"] == 2
    assert [a.overriders for a in applied] == [replicas_to(1), replicas_to(2)]


def test_deprecated_target_cluster_and_overriders_are_one_rule() -> None:
    policy = {
        "kind": "OverridePolicy",
        "metadata": {"name": "old-style", "namespace": "default"},
        "spec": {"targetCluster": {"clusterNames": ["member2"]}, "overriders": replicas_to(4)},
    }
    assert override_rules(policy) == [({"clusterNames": ["member2"]}, replicas_to(4))]
    assert apply_overrides(deployment(), MEMBER1, [policy], [])[0]["spec"]["replicas"] == 2
    assert apply_overrides(deployment(), MEMBER2, [policy], [])[0]["spec"]["replicas"] == 4


def test_policy_without_rules_still_counts_as_applied_with_empty_overriders() -> None:
    empty = {"kind": "OverridePolicy", "metadata": {"name": "empty", "namespace": "default"}, "spec": {}}
    result, applied = apply_overrides(deployment(), MEMBER1, [empty], [])
    assert result == deployment()
    assert applied == [AppliedOverride("empty", {}, False)]
    assert applied_override_annotations(applied) == {
        APPLIED_OVERRIDES_ANNOTATION: '[{"policyName":"empty","overriders":{}}]'
    }


def test_cluster_overriders_lists_one_entry_per_matching_rule() -> None:
    policy = op("p", rule({"clusterNames": ["member2"]}, **replicas_to(1)), rule(**replicas_to(2)))
    assert [ov for _, ov in cluster_overriders(deployment(), MEMBER1, [policy])] == [replicas_to(2)]


def test_a_failing_override_names_the_policy_and_cluster() -> None:
    broken = cop("broken", rule(plaintext=[plaintext("/spec/nope/x", "replace", 1)]))
    with pytest.raises(
        OverrideError, match=r"cluster override policy\(broken\) for cluster\(member1\)"
    ) as info:
        apply_overrides(deployment(), MEMBER1, [], [broken])
    assert info.value.policy_name == "broken" and info.value.cluster_scoped
    broken_op = op("broken-op", rule(plaintext=[plaintext("/spec/nope/x", "replace", 1)]))
    with pytest.raises(OverrideError, match=r"override policy\(default/broken-op\)"):
        apply_overrides(deployment(), MEMBER1, [broken_op], [])


def test_apply_overrides_does_not_mutate_its_inputs() -> None:
    manifest = deployment()
    policies = [op("op", rule(labelsOverrider=[{"operator": "add", "value": {"a": "b"}}], **replicas_to(3)))]
    cluster_policies = [cop("cop", rule(imageOverrider=[image("Registry", "replace", "r.io")]))]
    before = copy.deepcopy((manifest, policies, cluster_policies, MEMBER1))
    result, applied = apply_overrides(manifest, MEMBER1, policies, cluster_policies)
    assert (manifest, policies, cluster_policies, MEMBER1) == before
    applied[0].overriders["imageOverrider"].clear()
    assert cluster_policies == before[2]
    assert result is not manifest


# -- applied-overrides annotations --------------------------------------------------------------


def test_applied_overrides_json_exact_format() -> None:
    items = [AppliedOverride("p", replicas_to(3), False)]
    assert applied_overrides_json(items) == (
        '[{"policyName":"p","overriders":{"plaintext":[{"path":"/spec/replicas","operator":"replace","value":3}]}}]'
    )


def test_applied_overrides_are_sorted_by_policy_name_and_split_by_scope() -> None:
    applied = [
        AppliedOverride("z-cop", {}, True),
        AppliedOverride("a-cop", {}, True),
        AppliedOverride("m-op", replicas_to(1), False),
        AppliedOverride("b-op", replicas_to(2), False),
        AppliedOverride("b-op", replicas_to(3), False),
    ]
    annotations = applied_override_annotations(applied)
    assert [i["policyName"] for i in json.loads(annotations[APPLIED_CLUSTER_OVERRIDES_ANNOTATION])] == [
        "a-cop",
        "z-cop",
    ]
    namespaced = json.loads(annotations[APPLIED_OVERRIDES_ANNOTATION])
    assert [(i["policyName"], i["overriders"]["plaintext"][0]["value"]) for i in namespaced] == [
        ("b-op", 2),
        ("b-op", 3),
        ("m-op", 1),
    ]


def test_no_applied_overrides_no_annotations() -> None:
    assert applied_override_annotations([]) == {}
    assert applied_overrides_json([]) is None
    only_cluster = applied_override_annotations([AppliedOverride("c", {}, True)])
    assert list(only_cluster) == [APPLIED_CLUSTER_OVERRIDES_ANNOTATION]


def test_overriders_are_recorded_in_go_field_order_with_empty_fields_omitted() -> None:
    overriders = {
        "fieldOverrider": [{"fieldPath": "/data/a", "yaml": [{"subPath": "/x", "operator": "remove"}]}],
        "labelsOverrider": [{"value": {"b": "2", "a": "1"}, "operator": "add"}],
        "annotationsOverrider": [{"operator": "remove"}],
        "argsOverrider": [],
        "commandOverrider": [{"value": [], "operator": "add", "containerName": "c"}],
        "imageOverrider": [
            {"value": "", "operator": "remove", "component": "Tag"},
            {"operator": "replace", "component": "Registry", "value": "r.io", "predicate": {"path": "/p"}},
        ],
        "plaintext": [{"operator": "remove", "path": "/a"}],
        "somethingUnknown": [1],
    }
    assert applied_overrides_json([("p", overriders)]) == (
        '[{"policyName":"p","overriders":{'
        '"plaintext":[{"path":"/a","operator":"remove","value":null}],'
        '"imageOverrider":[{"component":"Tag","operator":"remove"},'
        '{"predicate":{"path":"/p"},"component":"Registry","operator":"replace","value":"r.io"}],'
        '"commandOverrider":[{"containerName":"c","operator":"add"}],'
        '"labelsOverrider":[{"operator":"add","value":{"a":"1","b":"2"}}],'
        '"annotationsOverrider":[{"operator":"remove","value":null}],'
        '"fieldOverrider":[{"fieldPath":"/data/a","yaml":[{"subPath":"/x","operator":"remove","value":null}]}]'
        "}}]"
    )


def test_plaintext_values_are_recorded_with_sorted_keys_and_html_escaping() -> None:
    overriders = {
        "plaintext": [plaintext("/metadata/annotations", "add", {"z": "<b>", "a": [1.5, 2.0, "&"]})]
    }
    assert applied_overrides_json([("p", overriders)]) == (
        '[{"policyName":"p","overriders":{"plaintext":[{"path":"/metadata/annotations","operator":"add",'
        '"value":{"a":[1.5,2,"\\u0026"],"z":"\\u003cb\\u003e"}}]}}]'
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (0.5, "0.5"),
        (-2.25, "-2.25"),
        (1e-7, "1e-7"),
        (1.5e-6, "0.0000015"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (123456789.0, "123456789"),
        (12, "12"),
        (True, "true"),
        ("é\u2028", '"é\\u2028"'),
    ],
)
def test_go_json_number_and_string_formatting(value: Any, expected: str) -> None:
    assert go_json_dumps(value) == expected
