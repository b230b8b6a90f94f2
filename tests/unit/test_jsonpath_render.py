"""How rendered templates print values: kubectl's JSONPath printer (Go fmt and encoding/json)."""

from __future__ import annotations

from typing import Any

import pytest

from flotilla.jsonpath import JSONPathEvaluationError, format_value, parse

FLINK_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "flink.apache.org/v1beta1",
    "kind": "FlinkDeployment",
    "metadata": {"name": "orders", "namespace": "stream"},
    "status": {
        "jobStatus": {
            "jobId": "cafebabe0123456789abcdef01234567",
            "state": "RUNNING",
            "checkpointInfo": {"lastCheckpoint": {"timeStamp": 1734462491693}},
        }
    },
}


def render(template: str, data: Any, **kwargs: Any) -> str:
    return parse(template).render(data, **kwargs)


def test_strings_print_raw_without_quotes_or_escapes() -> None:
    assert render("{.s}", {"s": 'a "b"\n<&>\\'}) == 'a "b"\n<&>\\'


def test_integers_print_in_decimal() -> None:
    assert (
        render("{.status.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}", FLINK_DEPLOYMENT)
        == "1734462491693"
    )
    assert render("{.n}", {"n": -42}) == "-42"


def test_integral_float_prints_as_integer_not_exponent() -> None:
    status = {"lastCheckpoint": {"timeStamp": 1734462491693.0}}
    assert render("{.lastCheckpoint.timeStamp}", status) == "1734462491693"
    assert render("{.f}", {"f": 3.0}) == "3"
    assert render("{.f}", {"f": -0.0}) == "0"


@pytest.mark.parametrize(
    ("number", "printed"),
    [
        (1.5, "1.5"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1e-7, "1e-07"),
        (123456.5, "123456.5"),
        (1234567.5, "1.2345675e+06"),
        (123456789.125, "1.23456789125e+08"),
        (1 / 3, "0.3333333333333333"),
        (1e21, "1e+21"),  # integral but outside int64: Go's float printing
        (2.0**63, "9.223372036854776e+18"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
    ],
)
def test_other_floats_print_like_go_fmt(number: float, printed: str) -> None:
    assert format_value(number) == printed


def test_integers_outside_int64_print_as_the_float_go_would_decode() -> None:
    assert format_value(2**64) == "1.8446744073709552e+19"
    assert format_value(2**63 - 1) == "9223372036854775807"


def test_booleans_print_as_true_false() -> None:
    assert render("{.a} {.b}", {"a": True, "b": False}) == "true false"


def test_null_prints_as_json_null() -> None:
    assert render("{.a}", {"a": None}) == "null"


def test_maps_print_as_compact_json_with_sorted_keys() -> None:
    assert render("{.m}", {"m": {"z": 1, "a": "x", "k": [1, 2]}}) == '{"a":"x","k":[1,2],"z":1}'


def test_json_escapes_like_go_encoding_json() -> None:
    text = '<&>"\\\b\f\n\r\t\x01\x7f\u2028\u2029é😀'
    expected = '["\\u003c\\u0026\\u003e\\"\\\\\\b\\f\\n\\r\\t\\u0001\x7f\\u2028\\u2029é😀"]'
    assert render("{.l}", {"l": [text]}) == expected


@pytest.mark.parametrize(
    ("number", "printed"),
    [
        (1734462491693.0, "1734462491693"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (2.5e-5, "0.000025"),
        (-0.0, "-0"),
        (123456789.125, "123456789.125"),
        (2**64, "18446744073709552000"),
    ],
)
def test_floats_inside_json_print_like_go_encoding_json(number: float, printed: str) -> None:
    assert render("{.l}", {"l": [number]}) == f"[{printed}]"


def test_infinite_float_in_json_is_an_error() -> None:
    with pytest.raises(JSONPathEvaluationError, match="unsupported value"):
        render("{.l}", {"l": [float("inf")]})


def test_empty_containers_print_as_json() -> None:
    assert render("{.l}|{.m}", {"l": [], "m": {}}) == "[]|{}"


def test_several_values_of_one_expression_are_separated_by_one_space() -> None:
    assert render("{.l[*]}", {"l": ["a", 1, None, {"k": "v"}, [2]]}) == 'a 1 null {"k":"v"} [2]'


def test_values_of_different_expressions_are_not_separated() -> None:
    assert render("{.a}{.b}", {"a": "x", "b": "y"}) == "xy"


def test_empty_template_renders_empty() -> None:
    assert render("", {"a": 1}) == ""


def test_text_only_template_renders_itself() -> None:
    assert render(".status.phase", {"status": {"phase": "Running"}}) == ".status.phase"


def test_whole_object_prints_as_json() -> None:
    assert render("{$}", {"b": 1, "a": [True]}) == '{"a":[true],"b":1}'


def test_kubectl_style_table_with_range() -> None:
    items = {
        "items": [
            {
                "metadata": {"name": "orders"},
                "status": {"jobStatus": {"state": "RUNNING", "ts": 1734462491693.0}},
            },
            {"metadata": {"name": "billing"}, "status": {"jobStatus": {"state": "FAILED", "ts": 17.25}}},
        ]
    }
    template = '{range .items[*]}{.metadata.name}{"\\t"}{.status.jobStatus.state}{"\\t"}{.status.jobStatus.ts}{"\\n"}{end}'
    assert render(template, items) == "orders\tRUNNING\t1734462491693\nbilling\tFAILED\t17.25\n"
