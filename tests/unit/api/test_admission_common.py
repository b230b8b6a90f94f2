"""The apimachinery validators and helpers shared by the Karmada admission plugins."""

from __future__ import annotations

from fractions import Fraction

import pytest

from flotilla.apiserver.webhooks.common import (
    go_quote,
    go_value,
    invalid,
    json_pointer_error,
    json_pointer_escape_error,
    label_key_errors,
    label_value_errors,
    not_supported,
    parse_quantity,
    policy_field_selector_error,
    spec_unchanged,
    validate_annotations,
    validate_label_selector,
    validate_labels,
)

NAME_REGEX_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


@pytest.mark.parametrize("key", ["a", "app.kubernetes.io/name", "example.com/My_Name.1", "x" * 63])
def test_valid_label_keys(key: str) -> None:
    assert label_key_errors(key) == []


def test_label_key_messages_are_apimachinery_ones() -> None:
    assert label_key_errors("") == ["name part must be non-empty", NAME_REGEX_MSG]
    assert label_key_errors("x" * 64) == ["name part must be no more than 63 bytes"]
    assert label_key_errors("-a") == [NAME_REGEX_MSG]
    assert label_key_errors("/a") == ["prefix part must be non-empty"]
    assert label_key_errors("Example.com/a")[0].startswith("prefix part a lowercase RFC 1123 subdomain")
    (only,) = label_key_errors("a/b/c")
    assert only.startswith("a valid label key must consist of alphanumeric characters")
    assert only.endswith("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")


def test_label_values() -> None:
    assert label_value_errors("") == []
    assert label_value_errors("v1.2_3-x") == []
    assert label_value_errors("1.734462491693e+12")[0].startswith("a valid label must be an empty string")
    assert label_value_errors("a" * 64)[0] == "must be no more than 63 bytes"


def test_go_value_and_quote() -> None:
    assert go_value(None) == "null"
    assert go_value(False) == "false"
    assert go_value(-1) == "-1"
    assert go_value('a"b') == '"a\\"b"'
    assert go_value({"b": 1, "a": "<"}) == '{"a":"\\u003c","b":1}'
    assert go_quote("tab\there\x01") == '"tab\\there\\x01"'


def test_field_error_bodies() -> None:
    assert invalid("spec.x", 3, "too big").message == "Invalid value: 3: too big"
    cause = not_supported("spec.op", "Lt", ["", "Exists", "Equal"])
    assert cause.message == 'Unsupported value: "Lt": supported values: "", "Exists", "Equal"'
    assert cause.reason == "FieldValueNotSupported"


def test_label_selector_validation() -> None:
    causes = validate_label_selector(
        {
            "matchLabels": {"bad key!": "v"},
            "matchExpressions": [
                {"key": "a", "operator": "In"},
                {"key": "b", "operator": "Exists", "values": ["x"]},
                {"key": "c", "operator": "Near", "values": ["x"]},
                {"key": "d", "operator": "In", "values": ["not valid!"]},
            ],
        },
        "spec.sel",
    )
    fields = [c.field for c in causes]
    assert fields == [
        "spec.sel.matchLabels",
        "spec.sel.matchExpressions[0].values",
        "spec.sel.matchExpressions[1].values",
        "spec.sel.matchExpressions[2].operator",
        "spec.sel.matchExpressions[3].values[0]",
    ]
    assert causes[1].message == "Required value: must be specified when `operator` is 'In' or 'NotIn'"
    assert causes[2].message == "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
    assert causes[3].message == 'Invalid value: "Near": not a valid selector operator'
    assert validate_label_selector({}, "x") == []
    assert validate_label_selector(None, "x") == []


def test_labels_and_annotations() -> None:
    assert validate_labels({"a": "b"}, "p") == []
    assert [c.message.split(":")[1].strip() for c in validate_labels({"a": "b c"}, "p")] == ['"b c"']
    # annotation keys are checked lower-cased; values are free
    assert validate_annotations({"Example.com/Key": "any value at all"}, "p") == []
    (too_long,) = validate_annotations({"a": "x" * (256 * 1024)}, "p")
    assert too_long.message == "Too long: may not be more than 262144 bytes"


def test_policy_field_selector() -> None:
    assert policy_field_selector_error({"matchExpressions": [{"key": "region", "operator": "In"}]}) is None
    assert (
        policy_field_selector_error({"matchExpressions": [{"key": "name", "operator": "In"}]})
        == 'unsupported key "name", must be provider, region, or zone'
    )
    assert (
        policy_field_selector_error({"matchExpressions": [{"key": "zone", "operator": "Exists"}]})
        == 'unsupported operator "Exists", must be In or NotIn'
    )


def test_json_pointers() -> None:
    assert json_pointer_error("") is None
    assert json_pointer_error("/spec/replicas") is None
    assert json_pointer_error("spec/replicas") == 'JSON pointer must be empty or start with a "/"'
    assert json_pointer_escape_error("/metadata/labels/a~1b") is None
    assert json_pointer_escape_error("/a~2") is not None


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("1", 1), ("500m", Fraction(1, 2)), ("4Gi", 4 * 2**30), ("1Ti", 2**40), ("1e3", 1000), (2, 2),
     ("9223372036854775807", 2**63 - 1), ("1.5k", 1500)],
)
def test_quantities(text: str | int, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


def test_quantity_garbage() -> None:
    assert parse_quantity("lots") is None
    assert parse_quantity(None) is None


def test_spec_unchanged() -> None:
    obj = {"spec": {"a": 1}, "status": {"x": 1}}
    assert spec_unchanged(obj, {"spec": {"a": 1}}, "UPDATE")
    assert not spec_unchanged(obj, {"spec": {"a": 2}}, "UPDATE")
    assert not spec_unchanged(obj, None, "CREATE")
