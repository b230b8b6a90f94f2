"""Field selector parsing, matching and field resolution."""

from __future__ import annotations

from typing import Any

import pytest

from flotilla.kube.selectors import (
    FieldSelector,
    SelectorError,
    check_supported,
    object_field_value,
    parse_field_selector,
)

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-0", "namespace": "prod", "uid": "u-1"},
    "spec": {"nodeName": "node-a", "restartPolicy": "Always", "priority": 10},
    "status": {"phase": "Running", "podIP": "10.0.0.3"},
}


def matches(selector: str, obj: dict[str, Any]) -> bool:
    return parse_field_selector(selector).matches(lambda f: object_field_value(obj, f))


def test_single_equals_matches_the_field_value() -> None:
    assert matches("metadata.name=web-0", POD)
    assert not matches("metadata.name=web-1", POD)


def test_double_equals_is_normalised_to_equals() -> None:
    selector = parse_field_selector("status.phase==Running")
    assert selector.requirements == (("status.phase", "=", "Running"),)
    assert matches("status.phase==Running", POD)


def test_not_equals_excludes_the_value() -> None:
    assert matches("spec.nodeName!=node-b", POD)
    assert not matches("spec.nodeName!=node-a", POD)


def test_comma_means_and() -> None:
    assert matches("metadata.name=web-0,metadata.namespace=prod", POD)
    assert not matches("metadata.name=web-0,metadata.namespace=dev", POD)
    selector = parse_field_selector("metadata.name=a,spec.nodeName!=b,status.phase==c")
    assert selector.requirements == (
        ("metadata.name", "=", "a"),
        ("spec.nodeName", "!=", "b"),
        ("status.phase", "=", "c"),
    )
    assert selector.fields == ["metadata.name", "spec.nodeName", "status.phase"]


def test_empty_value_selects_missing_fields() -> None:
    unscheduled = {**POD, "spec": {"restartPolicy": "Always"}}
    assert matches("spec.nodeName=", unscheduled)
    assert not matches("spec.nodeName=", POD)
    assert matches("spec.nodeName!=", POD)


def test_empty_selector_matches_everything() -> None:
    for text in ("", None, " , "):
        selector = parse_field_selector(text)
        assert selector.empty
        assert selector.matches(lambda f: None)


def test_getter_returning_none_counts_as_empty_string() -> None:
    assert parse_field_selector("x=").matches(lambda f: None)
    assert not parse_field_selector("x=a").matches(lambda f: None)


def test_escaped_separators_are_part_of_the_value() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d,spec.x=y")
    assert selector.requirements == (("metadata.name", "=", "a,b=c\\d"), ("spec.x", "=", "y"))
    assert parse_field_selector(str(selector)) == selector


@pytest.mark.parametrize(
    "text",
    [
        "metadata.name",  # no operator
        "=web",  # no field
        "metadata.name=a=b",  # unescaped '='
        r"metadata.name=a\n",  # unknown escape
        "metadata.name=a\\",  # dangling backslash
        "a=b,c",
    ],
)
def test_malformed_field_selectors_raise(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(text)


def test_value_for_returns_the_pinned_value() -> None:
    selector = parse_field_selector("metadata.name=web-0,spec.nodeName!=x")
    assert selector.value_for("metadata.name") == "web-0"
    assert selector.value_for("spec.nodeName") is None
    assert selector.value_for("status.phase") is None


def test_matches_object_resolves_fields_itself() -> None:
    assert parse_field_selector("status.podIP=10.0.0.3").matches_object(POD)


def test_check_supported_accepts_known_fields() -> None:
    check_supported(
        parse_field_selector("metadata.name=a,spec.nodeName=b"), {"metadata.name", "spec.nodeName"}
    )
    check_supported(parse_field_selector(""), set())


def test_check_supported_rejects_unknown_fields_with_kubernetes_message() -> None:
    with pytest.raises(SelectorError) as info:
        check_supported(parse_field_selector("metadata.name=a,spec.foo=b"), {"metadata.name"})
    assert info.value.message == "field label not supported: spec.foo"


def test_object_field_value_resolves_dotted_paths() -> None:
    event = {
        "kind": "Event",
        "involvedObject": {"kind": "Pod", "name": "web-0", "uid": "u-1"},
        "reason": "Scheduled",
        "type": "Normal",
        "source": {"component": "scheduler"},
    }
    assert object_field_value(event, "involvedObject.uid") == "u-1"
    assert object_field_value(event, "involvedObject.namespace") == ""
    assert object_field_value(event, "reason") == "Scheduled"
    assert object_field_value(event, "source") == "scheduler"
    assert object_field_value(POD, "status.phase") == "Running"
    assert object_field_value(POD, "metadata.name") == "web-0"


def test_object_field_value_renders_booleans_and_numbers_like_kubernetes() -> None:
    assert object_field_value({"spec": {"unschedulable": True}}, "spec.unschedulable") == "true"
    assert object_field_value({"spec": {"unschedulable": False}}, "spec.unschedulable") == "false"
    assert object_field_value({"spec": {}}, "spec.unschedulable") == ""
    assert object_field_value(POD, "spec.priority") == "10"
    assert object_field_value({"a": 1.5}, "a") == "1.5"
    assert object_field_value({"a": 2.0}, "a") == "2"


def test_object_field_value_missing_paths_are_empty_strings() -> None:
    assert object_field_value(POD, "spec.schedulerName") == ""
    assert object_field_value(POD, "nope.deeper.still") == ""
    assert object_field_value(POD, "metadata.name.more") == ""  # walks into a scalar
    assert object_field_value({"metadata": {"namespace": None}}, "metadata.namespace") == ""


def test_object_field_value_of_maps_and_lists_is_none() -> None:
    assert object_field_value(POD, "metadata") is None
    assert object_field_value({"spec": {"x": [1]}}, "spec.x") is None


def test_unschedulable_nodes_selected_by_boolean_string() -> None:
    node = {"kind": "Node", "metadata": {"name": "n"}, "spec": {"unschedulable": True}}
    assert matches("spec.unschedulable=true", node)
    assert not matches("spec.unschedulable=false", node)
    assert matches("spec.unschedulable!=true", {"kind": "Node", "spec": {}})


def test_field_selector_is_hashable_and_comparable() -> None:
    assert parse_field_selector("a=b") == FieldSelector((("a", "=", "b"),))
    assert len({parse_field_selector("a=b"), parse_field_selector("a==b")}) == 1


def test_absent_node_unschedulable_reads_as_false() -> None:
    from flotilla.kube.selectors import object_field_value, parse_field_selector

    node = {"kind": "Node", "metadata": {"name": "n"}, "spec": {}}
    assert object_field_value(node, "spec.unschedulable") == "false"
    assert parse_field_selector("spec.unschedulable=false").matches(lambda f: object_field_value(node, f))
    cordoned = {"kind": "Node", "metadata": {"name": "c"}, "spec": {"unschedulable": True}}
    assert not parse_field_selector("spec.unschedulable=false").matches(lambda f: object_field_value(cordoned, f))
