"""Merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch and minimal apply."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flotilla.kube.patch import (
    BUILTIN_MERGE_KEYS,
    EMPTY_MERGE_KEYS,
    MAX_JSON_PATCH_OPERATIONS,
    METADATA_MERGE_KEYS,
    MergeKeyTable,
    PatchError,
    PatchMeta,
    apply_json_patch,
    apply_merge_patch,
    apply_server_side_apply,
    apply_strategic_merge_patch,
    json_equal,
    merge_key_table_for,
    merge_key_table_from_schema,
    merge_patch,
)

# ================================================================================================
# RFC 7386
# ================================================================================================

# Appendix A of RFC 7386: (original, patch, result)
RFC7386_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), RFC7386_EXAMPLES)
def test_merge_patch_matches_rfc7386_appendix(original: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(original, patch) == expected


@pytest.mark.parametrize(
    ("original", "patch", "expected"),
    [ex for ex in RFC7386_EXAMPLES if isinstance(ex[0], dict) and isinstance(ex[1], dict)],
)
def test_apply_merge_patch_matches_rfc7386_for_objects(original: Any, patch: Any, expected: Any) -> None:
    assert apply_merge_patch(original, patch) == expected


@pytest.mark.parametrize("patch", [["c"], "bar", None, 3])
def test_apply_merge_patch_rejects_patches_that_are_not_objects(patch: Any) -> None:
    with pytest.raises(PatchError):
        apply_merge_patch({"a": "b"}, patch)


def test_apply_merge_patch_rejects_a_target_that_is_not_an_object() -> None:
    with pytest.raises(PatchError):
        apply_merge_patch(["a"], {"a": 1})  # type: ignore[arg-type]


def test_merge_patch_does_not_mutate_or_alias_inputs() -> None:
    target = {"a": {"b": [1, 2]}, "keep": {"x": 1}}
    patch = {"a": {"c": {"d": 1}}, "n": [{"m": 1}]}
    before = copy.deepcopy((target, patch))
    result = apply_merge_patch(target, patch)
    assert (target, patch) == before
    result["keep"]["x"] = 2
    result["a"]["b"].append(3)
    result["n"][0]["m"] = 2
    result["a"]["c"]["d"] = 2
    assert (target, patch) == before


# ================================================================================================
# RFC 6902
# ================================================================================================

# Appendix A of RFC 6902: (name, document, patch, result or None when the patch must fail)
RFC6902_EXAMPLES: list[tuple[str, Any, list[dict[str, Any]], Any]] = [
    ("A.1 add object member", {"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
     {"baz": "qux", "foo": "bar"}),
    ("A.2 add array element", {"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
     {"foo": ["bar", "qux", "baz"]}),
    ("A.3 remove object member", {"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}],
     {"foo": "bar"}),
    ("A.4 remove array element", {"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}],
     {"foo": ["bar", "baz"]}),
    ("A.5 replace value", {"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}],
     {"baz": "boo", "foo": "bar"}),
    ("A.6 move value", {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ("A.7 move array element", {"foo": ["all", "grass", "cows", "eat"]},
     [{"op": "move", "from": "/foo/1", "path": "/foo/3"}], {"foo": ["all", "cows", "eat", "grass"]}),
    ("A.8 test success", {"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ("A.9 test error", {"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], None),
    ("A.10 add nested member object", {"foo": "bar"},
     [{"op": "add", "path": "/child", "value": {"grandchild": {}}}], {"foo": "bar", "child": {"grandchild": {}}}),
    ("A.11 ignore unrecognized elements", {"foo": "bar"},
     [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}], {"foo": "bar", "baz": "qux"}),
    ("A.12 add to nonexistent target", {"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], None),
    ("A.14 ~ escape ordering", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}],
     {"/": 9, "~1": 10}),
    ("A.15 comparing strings and numbers", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}],
     None),
    ("A.16 add an array value", {"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
     {"foo": ["bar", ["abc", "def"]]}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "doc", "ops", "expected"), RFC6902_EXAMPLES, ids=[e[0] for e in RFC6902_EXAMPLES]
)
def test_json_patch_matches_rfc6902_appendix(name: str, doc: Any, ops: list[Any], expected: Any) -> None:
    if expected is None:
        with pytest.raises(PatchError):
            apply_json_patch(doc, ops)
    else:
        assert apply_json_patch(doc, ops) == expected


def test_json_patch_a13_op_without_a_valid_op_member_is_rejected() -> None:
    # A.13 (duplicate "op" members) cannot survive JSON decoding into a dict; the closest checks
    # are a missing and a nonsense "op".
    with pytest.raises(PatchError):
        apply_json_patch({"foo": "bar"}, [{"path": "/baz", "value": "qux"}])
    with pytest.raises(PatchError):
        apply_json_patch({"foo": "bar"}, [{"op": "merge", "path": "/baz", "value": "qux"}])


def test_json_patch_escapes_tilde_and_slash_in_member_names() -> None:
    doc = {"a/b": 1, "m~n": 2}
    result = apply_json_patch(
        doc,
        [
            {"op": "replace", "path": "/a~1b", "value": 10},
            {"op": "replace", "path": "/m~0n", "value": 20},
            {"op": "add", "path": "/~0~1", "value": 30},
        ],
    )
    assert result == {"a/b": 10, "m~n": 20, "~/": 30}


def test_json_patch_operations_apply_in_order_and_copy_duplicates() -> None:
    doc = {"spec": {"replicas": 1, "template": {"labels": {"a": "b"}}}}
    result = apply_json_patch(
        doc,
        [
            {"op": "copy", "from": "/spec/template/labels", "path": "/spec/selector"},
            {"op": "add", "path": "/spec/selector/c", "value": "d"},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "test", "path": "/spec/replicas", "value": 3.0},
        ],
    )
    assert result["spec"]["selector"] == {"a": "b", "c": "d"}
    assert result["spec"]["template"]["labels"] == {"a": "b"}  # copy is deep
    assert result["spec"]["replicas"] == 3
    assert doc["spec"] == {"replicas": 1, "template": {"labels": {"a": "b"}}}


def test_json_patch_add_replaces_an_existing_member() -> None:
    assert apply_json_patch({"a": 1}, [{"op": "add", "path": "/a", "value": 2}]) == {"a": 2}


def test_json_patch_add_at_array_length_appends() -> None:
    assert apply_json_patch({"a": [1]}, [{"op": "add", "path": "/a/1", "value": 2}]) == {"a": [1, 2]}


def test_json_patch_replace_root_replaces_document() -> None:
    assert apply_json_patch({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}
    assert apply_json_patch({"a": 1}, [{"op": "test", "path": "", "value": {"a": 1.0}}]) == {"a": 1}


def test_json_patch_move_to_same_path_is_a_noop() -> None:
    assert apply_json_patch({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}]) == {"a": 1}


def test_json_patch_test_does_not_confuse_booleans_and_numbers() -> None:
    with pytest.raises(PatchError):
        apply_json_patch({"a": True}, [{"op": "test", "path": "/a", "value": 1}])
    with pytest.raises(PatchError):
        apply_json_patch({"a": 0}, [{"op": "test", "path": "/a", "value": False}])


def test_json_patch_failure_leaves_the_target_untouched() -> None:
    doc = {"a": [1, 2]}
    with pytest.raises(PatchError):
        apply_json_patch(doc, [{"op": "remove", "path": "/a/0"}, {"op": "remove", "path": "/missing"}])
    assert doc == {"a": [1, 2]}


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add", "path": "/a", "value": 1},  # not a list
        [["add", "/a", 1]],  # operation not an object
        [{"op": "add", "path": "/a"}],  # missing value
        [{"op": "replace", "path": "/a"}],
        [{"op": "test", "path": "/a"}],
        [{"op": "move", "path": "/b"}],  # missing from
        [{"op": "copy", "path": "/b"}],
        [{"op": "add", "value": 1}],  # missing path
        [{"op": "add", "path": "a", "value": 1}],  # pointer without leading slash
        [{"op": "add", "path": "/a~2", "value": 1}],  # bad escape
        [{"op": "add", "path": 5, "value": 1}],
        [{"op": "remove", "path": "/list/01"}],  # leading zero
        [{"op": "remove", "path": "/list/-"}],  # '-' only for add
        [{"op": "remove", "path": "/list/2"}],  # out of bounds
        [{"op": "add", "path": "/list/3", "value": 1}],
        [{"op": "add", "path": "/list/-1", "value": 1}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "remove", "path": ""}],  # cannot remove the root
        [{"op": "add", "path": "/a/x", "value": 1}],  # a is a scalar
        [{"op": "move", "from": "/obj", "path": "/obj/inner"}],  # into its own child
        [{"op": "move", "from": "/missing", "path": "/b"}],
        [{"op": "copy", "from": "/missing", "path": "/b"}],
        [{"op": "add", "path": "", "value": [1]}],  # result is not an object
    ],
)
def test_json_patch_rejects_malformed_or_inapplicable_operations(ops: Any) -> None:
    with pytest.raises(PatchError):
        apply_json_patch({"a": 1, "list": [1, 2], "obj": {"k": 1}}, ops)


def test_json_patch_allows_exactly_the_maximum_number_of_operations() -> None:
    ops = [{"op": "test", "path": "/a", "value": 1}] * MAX_JSON_PATCH_OPERATIONS
    assert apply_json_patch({"a": 1}, ops) == {"a": 1}
    with pytest.raises(PatchError, match="maximum"):
        apply_json_patch({"a": 1}, [*ops, {"op": "test", "path": "/a", "value": 1}])


def test_json_equal_semantics() -> None:
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal(True, 1)
    assert not json_equal({"a": None}, {})
    assert not json_equal([1, 2], [2, 1])


# ================================================================================================
# Strategic merge patch
# ================================================================================================


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["a", "b"]},
        "spec": {
            "replicas": 2,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "a",
                            "image": "a:1",
                            "args": ["--x", "--y"],
                            "env": [{"name": "XX", "value": "1"}, {"name": "YY", "value": "2"}],
                            "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 9090}],
                        },
                        {"name": "b", "image": "b:1"},
                    ],
                    "tolerations": [{"key": "k1", "operator": "Exists"}],
                },
            },
        },
    }


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["template"]["spec"]["containers"]


def test_smp_kubectl_apply_removal_of_container_and_env_var() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "a"}],
                    "containers": [
                        {
                            "name": "a",
                            "image": "a:2",
                            "$setElementOrder/env": [{"name": "YY"}],
                            "env": [{"name": "XX", "$patch": "delete"}],
                        },
                        {"name": "b", "$patch": "delete"},
                    ],
                }
            }
        }
    }
    live = deployment()
    result = apply_strategic_merge_patch(live, patch, BUILTIN_MERGE_KEYS)
    (only,) = containers(result)
    assert only["name"] == "a"
    assert only["image"] == "a:2"
    assert only["env"] == [{"name": "YY", "value": "2"}]
    assert only["args"] == ["--x", "--y"]  # untouched fields survive
    assert live == deployment()  # input not mutated
    assert "$" not in repr(result)


def test_smp_merges_list_items_by_key_and_adds_new_ones_after_patched_ones() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}]}
            }
        }
    }
    result = apply_strategic_merge_patch(deployment(), patch)
    assert [(c["name"], c["image"]) for c in containers(result)] == [("a", "a:1"), ("b", "b:2"), ("c", "c:1")]
    assert containers(result)[0]["env"] == deployment()["spec"]["template"]["spec"]["containers"][0]["env"]


def test_smp_env_merges_by_name_inside_a_container() -> None:
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "YY", "value": "3"}]}]}}}
    }
    result = apply_strategic_merge_patch(deployment(), patch)
    assert containers(result)[0]["env"] == [{"name": "XX", "value": "1"}, {"name": "YY", "value": "3"}]


def test_smp_container_ports_merge_by_container_port() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 9090, "name": "metrics"}]}]}
            }
        }
    }
    result = apply_strategic_merge_patch(deployment(), patch)
    assert containers(result)[0]["ports"] == [
        {"containerPort": 80, "name": "http"},
        {"containerPort": 9090, "name": "metrics"},
    ]


def test_smp_service_ports_merge_by_port_not_name() -> None:
    service = {
        "kind": "Service",
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443}]},
    }
    patch = {"spec": {"ports": [{"port": 443, "targetPort": 8443}, {"name": "dns", "port": 53}]}}
    result = apply_strategic_merge_patch(service, patch, merge_key_table_for("", "Service"))
    assert result["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": 8080},
        {"name": "https", "port": 443, "targetPort": 8443},
        {"name": "dns", "port": 53},
    ]


def test_smp_service_port_deletion_by_port() -> None:
    service = {"spec": {"ports": [{"port": 80}, {"port": 443}]}}
    result = apply_strategic_merge_patch(service, {"spec": {"ports": [{"port": 80, "$patch": "delete"}]}})
    assert result["spec"]["ports"] == [{"port": 443}]


def test_smp_conditions_merge_by_type() -> None:
    pod = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "Starting"},
                {"type": "PodScheduled", "status": "True"},
            ]
        }
    }
    patch = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": None},
                {"type": "Initialized", "status": "True"},
            ]
        }
    }
    result = apply_strategic_merge_patch(pod, patch)
    # upstream order: patch items keep the patch order; a server-only item stays ahead of a patch
    # item only if it was ahead of it in the live list (so the new item lands before PodScheduled)
    assert result["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "Initialized", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_smp_new_item_without_set_element_order_goes_before_trailing_server_items() -> None:
    # kube-apiserver behaviour (see the kubectl patch task in the Kubernetes docs): a container
    # added by a plain patch is placed ahead of the live containers the patch does not mention.
    live = {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}
    result = apply_strategic_merge_patch(
        live, {"spec": {"containers": [{"name": "redis", "image": "redis"}]}}
    )
    assert [c["name"] for c in result["spec"]["containers"]] == ["redis", "nginx"]


def test_smp_patch_list_order_reorders_mentioned_items() -> None:
    live = {"metadata": {"finalizers": ["x", "y", "z"]}}
    result = apply_strategic_merge_patch(live, {"metadata": {"finalizers": ["z", "x"]}})
    assert result["metadata"]["finalizers"] == ["y", "z", "x"]


def test_smp_finalizers_merge_as_ordered_union() -> None:
    result = apply_strategic_merge_patch(deployment(), {"metadata": {"finalizers": ["b", "c"]}})
    assert result["metadata"]["finalizers"] == ["a", "b", "c"]


def test_smp_delete_from_primitive_list_removes_values() -> None:
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "zzz"]}}
    result = apply_strategic_merge_patch(deployment(), patch)
    assert result["metadata"]["finalizers"] == ["b"]


def test_smp_delete_from_primitive_list_applies_after_merge_and_order() -> None:
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["b", "c"],
            "$deleteFromPrimitiveList/finalizers": ["a"],
            "finalizers": ["c"],
        }
    }
    result = apply_strategic_merge_patch(deployment(), patch)
    assert result["metadata"]["finalizers"] == ["b", "c"]


def test_smp_retain_keys_drops_unlisted_keys() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    result = apply_strategic_merge_patch(deployment(), patch)
    assert result["spec"]["strategy"] == {"type": "Recreate"}


def test_smp_retain_keys_on_volume_items_switches_volume_source() -> None:
    pod = {
        "spec": {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]}
    }
    patch = {
        "spec": {
            "volumes": [{"name": "data", "$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/d"}}]
        }
    }
    result = apply_strategic_merge_patch(pod, patch)
    assert result["spec"]["volumes"] == [
        {"name": "data", "hostPath": {"path": "/d"}},
        {"name": "cfg", "configMap": {"name": "c"}},
    ]


def test_smp_retain_keys_rejects_patch_fields_outside_the_list() -> None:
    patch = {
        "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": {"maxSurge": 2}}}
    }
    with pytest.raises(PatchError):
        apply_strategic_merge_patch(deployment(), patch)
    # a null for an unlisted key is fine
    ok = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None}}}
    assert apply_strategic_merge_patch(deployment(), ok)["spec"]["strategy"] == {"type": "Recreate"}


def test_smp_null_deletes_a_key_and_unmatched_nulls_are_dropped() -> None:
    patch = {"spec": {"replicas": None, "paused": None}, "metadata": {"labels": {"app": None, "new": "x"}}}
    result = apply_strategic_merge_patch(deployment(), patch)
    assert "replicas" not in result["spec"] and "paused" not in result["spec"]
    assert result["metadata"]["labels"] == {"new": "x"}


def test_smp_lists_without_merge_key_are_replaced_whole() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "tolerations": [{"key": "k2", "operator": "Exists"}],
                    "containers": [{"name": "a", "args": ["--z"]}],
                }
            }
        }
    }
    result = apply_strategic_merge_patch(deployment(), patch)
    assert result["spec"]["template"]["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]
    assert containers(result)[0]["args"] == ["--z"]


def test_smp_patch_replace_item_replaces_a_merge_list() -> None:
    patch = {
        "spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "z:1"}]}}}
    }
    result = apply_strategic_merge_patch(deployment(), patch)
    assert containers(result) == [{"name": "z", "image": "z:1"}]


def test_smp_patch_replace_in_a_map_replaces_the_map() -> None:
    patch = {"spec": {"strategy": {"$patch": "replace", "type": "Recreate"}}}
    result = apply_strategic_merge_patch(deployment(), patch)
    assert result["spec"]["strategy"] == {"type": "Recreate"}


def test_smp_patch_delete_in_a_map_removes_it() -> None:
    result = apply_strategic_merge_patch(deployment(), {"spec": {"strategy": {"$patch": "delete"}}})
    assert "strategy" not in result["spec"]
    assert apply_strategic_merge_patch({"a": 1}, {"$patch": "delete"}) == {}


def test_smp_set_element_order_reorders_merged_list() -> None:
    patch = {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}}}
    result = apply_strategic_merge_patch(deployment(), patch)
    assert [c["name"] for c in containers(result)] == ["b", "a"]


def test_smp_set_element_order_keeps_server_only_items_at_their_live_position() -> None:
    live = {"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}
    patch = {"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}]}}
    result = apply_strategic_merge_patch(live, patch)
    # upstream interleaves: b came before c in the live list, so it stays before it
    assert [c["name"] for c in result["spec"]["containers"]] == ["b", "c", "a"]


def test_smp_set_element_order_puts_listed_items_first_when_server_items_trail() -> None:
    live = {"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "extra"}]}}
    patch = {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}, {"name": "new"}],
                      "containers": [{"name": "new", "image": "n"}]}}  # fmt: skip
    result = apply_strategic_merge_patch(live, patch)
    assert [c["name"] for c in result["spec"]["containers"]] == ["b", "a", "new", "extra"]


def test_smp_set_element_order_with_delete_and_add_places_server_only_items_like_kube_apiserver() -> None:
    # kubectl apply removing container b and adding c while an injected sidecar is live-only.
    # apimachinery reads the live order through a slice its own merge rewrote in place, which
    # leaves the sidecar ahead of the new container.
    live = {"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "sidecar"}]}}
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "c"}],
            "containers": [{"name": "c", "image": "c:1"}, {"name": "b", "$patch": "delete"}],
        }
    }
    result = apply_strategic_merge_patch(live, patch)
    assert [c["name"] for c in result["spec"]["containers"]] == ["a", "sidecar", "c"]


def test_smp_directives_never_reach_the_result_for_new_fields() -> None:
    live = {"spec": {}}
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "a"}],
                    "containers": [
                        {
                            "name": "a",
                            "env": [{"name": "X", "value": "1"}, {"name": "Y", "$patch": "delete"}],
                        },
                        {"name": "gone", "$patch": "delete"},
                    ],
                    "securityContext": {"$patch": "delete"},
                    "affinity": {"$patch": "replace", "nodeAffinity": {"x": None, "y": 1}},
                    "$retainKeys": ["containers", "securityContext", "affinity"],
                }
            }
        }
    }
    result = apply_strategic_merge_patch(live, patch)
    assert result == {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}],
                    "affinity": {"nodeAffinity": {"y": 1}},
                }
            }
        }
    }


def test_smp_type_change_replaces_value() -> None:
    result = apply_strategic_merge_patch({"a": {"b": 1}, "c": [1]}, {"a": "x", "c": {"d": None, "e": 1}})
    assert result == {"a": "x", "c": {"e": 1}}


def test_smp_does_not_mutate_inputs() -> None:
    live = deployment()
    patch = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "a", "env": [{"name": "XX", "$patch": "delete"}]}]}}
        }
    }
    frozen = copy.deepcopy((live, patch))
    result = apply_strategic_merge_patch(live, patch)
    assert (live, patch) == frozen
    containers(result)[0]["ports"].append({"containerPort": 1})
    assert (live, patch) == frozen


@pytest.mark.parametrize(
    "patch",
    [
        ["not", "an", "object"],
        {"spec": {"template": {"spec": {"containers": [{"image": "no-name"}]}}}},  # merge key missing
        {"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}},  # delete without key
        {"spec": {"template": {"spec": {"containers": ["a"]}}}},  # items must be maps
        {"spec": {"template": {"spec": {"containers": [{"name": "a", "$patch": "merge"}]}}}},
        {"spec": {"template": {"spec": {"containers": [{"name": "a", "$patch": "explode"}]}}}},
        {"spec": {"strategy": {"$patch": "explode"}}},
        {"spec": {"strategy": {"$retainKeys": "type"}}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
        {"metadata": {"$setElementOrder/finalizers": "a"}},
        {"metadata": {"finalizers": [{"not": "a scalar"}]}},
        {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"image": "x"}]}}}},
    ],
)
def test_smp_rejects_malformed_patches(patch: Any) -> None:
    with pytest.raises(PatchError):
        apply_strategic_merge_patch(deployment(), patch)


def test_smp_with_empty_table_behaves_like_merge_patch_for_lists() -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}}
    result = apply_strategic_merge_patch(deployment(), patch, EMPTY_MERGE_KEYS)
    assert containers(result) == [{"name": "b", "image": "b:2"}]
    assert result == apply_merge_patch(deployment(), patch)


def test_smp_accepts_a_plain_lookup_function() -> None:
    def lookup(path: tuple[str, ...]) -> tuple[str | None, str]:
        return ("id", "merge") if path == ("items",) else (None, "")

    result = apply_strategic_merge_patch(
        {"items": [{"id": 1, "v": "a"}]}, {"items": [{"id": 1, "v": "b"}, {"id": 2}]}, lookup
    )
    assert result == {"items": [{"id": 1, "v": "b"}, {"id": 2}]}


def test_pdb_selector_is_replaced_not_merged() -> None:
    pdb = {"spec": {"selector": {"matchLabels": {"app": "a"}}}}
    patch = {"spec": {"selector": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}}
    replaced = apply_strategic_merge_patch(pdb, patch, merge_key_table_for("policy", "PodDisruptionBudget"))
    assert replaced["spec"]["selector"] == patch["spec"]["selector"]
    merged = apply_strategic_merge_patch(pdb, patch, merge_key_table_for("apps", "Deployment"))
    assert merged["spec"]["selector"] == {**pdb["spec"]["selector"], **patch["spec"]["selector"]}


def test_merge_key_table_distinguishes_service_ports_from_container_ports() -> None:
    assert BUILTIN_MERGE_KEYS(("spec", "ports")) == ("port", "merge")
    assert BUILTIN_MERGE_KEYS(("spec", "containers", "ports")) == ("containerPort", "merge")
    assert BUILTIN_MERGE_KEYS(("spec", "template", "spec", "initContainers", "ports")) == (
        "containerPort",
        "merge",
    )
    assert BUILTIN_MERGE_KEYS(("spec", "ingress", "ports")) == (None, "")  # NetworkPolicy: replaced
    assert BUILTIN_MERGE_KEYS(("spec", "template", "spec", "containers", "env")) == ("name", "merge")
    assert BUILTIN_MERGE_KEYS(("metadata", "finalizers")) == (None, "merge")
    assert BUILTIN_MERGE_KEYS(("spec", "finalizers")) == (None, "")  # NamespaceSpec: atomic
    assert BUILTIN_MERGE_KEYS(("spec", "template", "metadata", "ownerReferences")) == ("uid", "merge")
    assert BUILTIN_MERGE_KEYS.lookup(("spec", "volumeClaimTemplates")).strategy == "replace"


def test_merge_key_table_for_custom_groups_only_knows_object_meta() -> None:
    table = merge_key_table_for("example.com", "Widget")
    assert table is METADATA_MERGE_KEYS
    assert table(("status", "conditions")) == (None, "")
    assert table(("metadata", "ownerReferences")) == ("uid", "merge")


def test_merge_key_table_from_schema_reads_list_extensions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "members": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["cluster"],
                        "items": {"type": "object", "properties": {"tags": {"type": "array", "x-kubernetes-list-type": "set"}}},
                    },
                    "pairs": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"]},
                    "legacy": {"type": "array", "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "id"},
                }
            }
        },
    }  # fmt: skip
    table = merge_key_table_from_schema(schema)
    assert table(("spec", "members")) == ("cluster", "merge")
    assert table(("spec", "members", "tags")) == (None, "merge")
    assert table(("spec", "pairs")) == (None, "replace")
    assert table(("spec", "legacy")) == ("id", "merge")
    assert table(("metadata", "finalizers")) == (None, "merge")


def test_merge_key_table_extended_overrides_rules() -> None:
    table = MergeKeyTable({"items": PatchMeta("merge", "id")}).extended({"items": PatchMeta("merge", "uid")})
    assert table(("x", "items")) == ("uid", "merge")


# ================================================================================================
# Minimal server-side apply
# ================================================================================================


def test_apply_without_live_object_returns_the_applied_object() -> None:
    applied = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    result = apply_server_side_apply(None, applied)
    assert result == applied and result is not applied


def test_apply_merges_maps_and_keyed_lists_and_replaces_other_lists() -> None:
    applied = {
        "spec": {
            "replicas": 3,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "a", "image": "a:2", "args": ["--only"]},
                        {"name": "c", "image": "c:1"},
                    ],
                    "tolerations": [],
                }
            },
        }
    }
    result = apply_server_side_apply(deployment(), applied)
    names = [c["name"] for c in containers(result)]
    assert names == ["a", "b", "c"]
    a = containers(result)[0]
    assert a["image"] == "a:2" and a["args"] == ["--only"] and a["env"][0]["name"] == "XX"
    assert result["spec"]["template"]["spec"]["tolerations"] == []
    assert result["spec"]["replicas"] == 3
    assert result["spec"]["strategy"] == deployment()["spec"]["strategy"]


def test_apply_known_gap_dropped_fields_are_not_removed() -> None:
    result = apply_server_side_apply({"data": {"a": "1", "b": "2"}}, {"data": {"a": "1"}})
    assert result == {"data": {"a": "1", "b": "2"}}


def test_apply_null_removes_a_field_and_finalizers_union() -> None:
    result = apply_server_side_apply(
        deployment(), {"spec": {"strategy": None}, "metadata": {"finalizers": ["c", "a"]}}
    )
    assert "strategy" not in result["spec"]
    assert result["metadata"]["finalizers"] == ["a", "b", "c"]


def test_apply_rejects_non_objects_and_keyless_items() -> None:
    with pytest.raises(PatchError):
        apply_server_side_apply(None, ["x"])
    with pytest.raises(PatchError):
        apply_server_side_apply(
            deployment(), {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}
        )


def test_apply_does_not_mutate_inputs() -> None:
    live, applied = (
        deployment(),
        {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "new"}]}}}},
    )
    frozen = copy.deepcopy((live, applied))
    apply_server_side_apply(live, applied)
    assert (live, applied) == frozen
