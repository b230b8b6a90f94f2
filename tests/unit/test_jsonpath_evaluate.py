"""Each construct of kubectl's JSONPath dialect, evaluated on realistic objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flotilla.jsonpath import (
    JSONPathError,
    JSONPathEvaluationError,
    JSONPathMissingKeyError,
    JSONPathSyntaxError,
    evaluate,
    parse,
)


def _pod(
    name: str, phase: str, ready: str, containers: list[dict[str, Any]], node: str | None
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"app.kubernetes.io/name": "web", "tier": "frontend"},
            "creationTimestamp": "2024-12-17T19:08:11Z",
        },
        "spec": {"containers": containers},
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": ready},
            ],
            "containerStatuses": [
                {"name": c["name"], "restartCount": i * 2, "ready": ready == "True"}
                for i, c in enumerate(containers)
            ],
        },
    }
    if node is not None:
        pod["spec"]["nodeName"] = node
    return pod


POD_LIST: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        _pod(
            "web-0",
            "Running",
            "True",
            [
                {
                    "name": "nginx",
                    "image": "nginx:1.27",
                    "ports": [{"containerPort": 80}, {"containerPort": 443}],
                },
                {"name": "sidecar", "image": "envoy:1.31"},
            ],
            "member1-node-a",
        ),
        _pod("web-1", "Pending", "False", [{"name": "nginx", "image": "nginx:1.27"}], None),
        _pod(
            "web-2",
            "Running",
            "True",
            [{"name": "nginx", "image": "nginx:1.26", "ports": [{"containerPort": 8080}]}],
            "member2-node-b",
        ),
    ],
}

FLINK_STATUS: dict[str, Any] = {
    "jobStatus": {
        "jobId": "cafebabe0123456789abcdef01234567",
        "state": "RUNNING",
        "checkpointInfo": {"lastCheckpoint": {"timeStamp": 1734462491693}},
    }
}


def values(expression: str, data: Any = POD_LIST, **kwargs: Any) -> list[Any]:
    return evaluate(expression, data, **kwargs)


def render(template: str, data: Any = POD_LIST, **kwargs: Any) -> str:
    return parse(template).render(data, **kwargs)


# -- fields ---------------------------------------------------------------------------------------


def test_dotted_fields_walk_into_maps() -> None:
    assert values(".items[0].metadata.name") == ["web-0"]
    assert values(".jobStatus.state", FLINK_STATUS) == ["RUNNING"]


@pytest.mark.parametrize(
    "expression",
    [
        ".jobStatus.jobId",
        "jobStatus.jobId",
        "$.jobStatus.jobId",
        "@.jobStatus.jobId",
        "{.jobStatus.jobId}",
        "{ .jobStatus.jobId }",
        "  { .jobStatus.jobId }  ",
        "{$.jobStatus.jobId}",
        "['jobStatus']['jobId']",
    ],
)
def test_expression_is_accepted_with_or_without_braces_dollar_and_dot(expression: str) -> None:
    assert values(expression, FLINK_STATUS) == ["cafebabe0123456789abcdef01234567"]


def test_state_preservation_rule_reads_integer_checkpoint_timestamp() -> None:
    assert values("{ .jobStatus.checkpointInfo.lastCheckpoint.timeStamp }", FLINK_STATUS) == [1734462491693]


def test_missing_key_is_an_error_naming_the_key_in_strict_mode() -> None:
    with pytest.raises(JSONPathMissingKeyError) as caught:
        values("{ .jobStatus.savepointInfo.location }", FLINK_STATUS)
    assert caught.value.key == "savepointInfo"
    assert str(caught.value) == "savepointInfo is not found"


def test_missing_key_names_the_first_key_that_is_missing() -> None:
    with pytest.raises(JSONPathMissingKeyError, match=r"^status is not found$"):
        values(".status.jobStatus.jobId", {"spec": {}})


def test_missing_key_gives_no_values_when_allowed() -> None:
    assert values("{ .jobStatus.savepointInfo.location }", FLINK_STATUS, allow_missing_keys=True) == []
    assert render("[{.status.phase}]", {"metadata": {}}, allow_missing_keys=True) == "[]"


def test_missing_key_error_is_an_evaluation_error_and_a_jsonpath_error() -> None:
    assert issubclass(JSONPathMissingKeyError, JSONPathEvaluationError)
    assert issubclass(JSONPathEvaluationError, JSONPathError)
    assert issubclass(JSONPathSyntaxError, JSONPathError)


def test_key_present_with_null_value_is_found_not_missing() -> None:
    assert values(".status.message", {"status": {"message": None}}) == [None]


def test_field_below_null_is_missing() -> None:
    with pytest.raises(JSONPathMissingKeyError, match="reason"):
        values(".status.message.reason", {"status": {"message": None}})


def test_field_is_missing_only_when_absent_from_every_value() -> None:
    # web-1 has no nodeName: with several inputs, the found ones are returned without error
    assert values(".items[*].spec.nodeName") == ["member1-node-a", "member2-node-b"]


def test_field_of_empty_selection_is_not_missing() -> None:
    assert values(".items[*].spec.containers[1:1].name") == []


def test_bracket_key_is_the_same_as_a_dotted_field() -> None:
    assert values(".items[0]['metadata']['name']") == ["web-0"]


def test_backslash_escaped_dots_name_a_key_containing_dots() -> None:
    assert values(r".items[0].metadata.labels.app\.kubernetes\.io/name") == ["web"]
    assert values(r".items[0].metadata.labels['app\.kubernetes\.io/name']") == ["web"]


def test_dots_inside_bracket_quotes_still_split_the_path_like_kubectl() -> None:
    data = {"m": {"a.b": "flat", "a": {"b": "nested"}}}
    assert values(".m['a.b']", data) == ["nested"]
    assert values(r".m['a\.b']", data) == ["flat"]


def test_double_quoted_bracket_key_is_a_syntax_error_like_kubectl() -> None:
    with pytest.raises(JSONPathSyntaxError, match='invalid array index "name"'):
        parse('{.metadata["name"]}')


def test_empty_field_name_looks_up_the_empty_key() -> None:
    assert values("{.}", {"": 1}) == [1]
    with pytest.raises(JSONPathMissingKeyError, match=r"^ is not found$"):
        values("{.}", {"a": 1})


# -- wildcard and recursive descent ---------------------------------------------------------------


def test_wildcard_lists_map_values_in_order() -> None:
    assert values(".items[0].metadata.labels.*") == ["web", "frontend"]


def test_wildcard_lists_list_items() -> None:
    assert values(".items[0].spec.containers.*.name") == ["nginx", "sidecar"]


def test_wildcard_on_string_gives_its_utf8_bytes_like_kubectl() -> None:
    assert values(".s.*", {"s": "é!"}) == [195, 169, 33]


def test_recursive_descent_finds_keys_at_any_depth_in_document_order() -> None:
    assert values("..containerPort") == [80, 443, 8080]
    assert values(".items[0]..image") == ["nginx:1.27", "envoy:1.31"]


def test_recursive_descent_alone_lists_every_non_empty_container_and_string() -> None:
    data = {"a": {"b": "x", "n": 1, "e": []}, "l": ["y", ""]}
    assert values("{..}", data) == [data, data["a"], "x", data["l"], "y"]


def test_recursive_descent_twice_in_a_row_is_a_syntax_error() -> None:
    with pytest.raises(JSONPathSyntaxError, match="invalid multiple recursive descent"):
        parse("{....a}")


# -- indexes and slices ---------------------------------------------------------------------------


def test_index_and_negative_index() -> None:
    assert values(".items[1].metadata.name") == ["web-1"]
    assert values(".items[-1].metadata.name") == ["web-2"]
    assert values(".items[-3].metadata.name") == ["web-0"]


def test_star_in_brackets_selects_all_items() -> None:
    assert values(".items[*].metadata.name") == ["web-0", "web-1", "web-2"]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("[1:3]", [1, 2]),
        ("[:2]", [0, 1]),
        ("[3:]", [3, 4]),
        ("[-2:]", [3, 4]),
        ("[:-2]", [0, 1, 2]),
        ("[::2]", [0, 2, 4]),
        ("[1::2]", [1, 3]),
        ("[0:5:3]", [0, 3]),
        ("[:]", [0, 1, 2, 3, 4]),
        ("[]", [0]),
        ("[2:2]", []),
        ("[5:]", []),
        ("[7:7]", []),
    ],
)
def test_slices_follow_kubectl(selector: str, expected: list[int]) -> None:
    assert values(".l" + selector, {"l": [0, 1, 2, 3, 4]}) == expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("[5]", "array index out of bounds: index 5, length 5"),
        ("[-6]", "array index out of bounds: index -1, length 5"),
        ("[0:10]", "array index out of bounds: index 9, length 5"),
        ("[-7:]", "array index out of bounds: index -2, length 5"),
        ("[3:1]", "starting index 3 is greater than ending index 1"),
        ("[::0]", "step must be > 0"),
        ("[::-1]", "step must be > 0"),
    ],
)
def test_out_of_range_selection_is_an_error_even_when_missing_keys_are_allowed(
    selector: str, message: str
) -> None:
    for allow in (False, True):
        with pytest.raises(JSONPathEvaluationError) as caught:
            values(".l" + selector, {"l": [0, 1, 2, 3, 4]}, allow_missing_keys=allow)
        assert str(caught.value) == message
        assert not isinstance(caught.value, JSONPathMissingKeyError)


def test_index_on_a_map_is_an_error_with_go_type_name() -> None:
    with pytest.raises(JSONPathEvaluationError, match=r"^map\[string\]interface \{\} is not array or slice$"):
        values(".items[0].metadata[0]")


def test_index_skips_null() -> None:
    assert values(".n[0]", {"n": None}) == []


def test_empty_slice_of_first_input_skips_the_rest_like_kubectl() -> None:
    data = {"l": [{"v": [1]}, {"v": [1, 2, 3]}]}
    assert values(".l[*].v[1:]", data) == []
    assert values(".l[*].v[0:]", data) == [1, 1, 2, 3]


# -- unions -----------------------------------------------------------------------------------------


def test_index_union_selects_each_index_in_order() -> None:
    assert values(".items[2,0].metadata.name") == ["web-2", "web-0"]
    assert values(".items[0, -1].metadata.name") == ["web-0", "web-2"]


def test_key_union_runs_branch_after_branch() -> None:
    containers = ".items[0].spec.containers[*]"
    assert values(containers + "['name','image']") == ["nginx", "sidecar", "nginx:1.27", "envoy:1.31"]


def test_union_mixes_slices_and_indexes() -> None:
    assert values(".l[1:2,4]", {"l": [0, 1, 2, 3, 4]}) == [1, 4]


# -- filters ----------------------------------------------------------------------------------------


def test_filter_equality_on_strings() -> None:
    assert values('.items[*].status.conditions[?(@.type=="Ready")].status') == ["True", "False", "True"]
    assert values(".items[?(@.status.phase=='Pending')].metadata.name") == ["web-1"]


def test_filter_with_spaces_around_the_operator() -> None:
    assert values('.items[?( @.status.phase != "Running" )].metadata.name') == ["web-1"]


def test_filter_existence() -> None:
    assert values(".items[?(@.spec.nodeName)].metadata.name") == ["web-0", "web-2"]
    assert values(".items[*].spec.containers[?(@.ports)].name") == ["nginx", "nginx"]


def test_filter_existence_never_raises_for_missing_keys() -> None:
    assert values(".items[?(@.spec.priority)].metadata.name") == []


def test_filter_existence_keeps_items_whose_index_fails_like_kubectl() -> None:
    # kubectl's failing index step hands its input back, so the test sees "something"
    data = {"l": [{"name": "a", "v": [1, 2]}, {"name": "b", "v": [3]}]}
    assert values(".l[?(@.v[1])].name", data) == ["a", "b"]


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("@.restartCount>0", ["sidecar"]),
        ("@.restartCount>=0", ["nginx", "sidecar"]),
        ("@.restartCount<2", ["nginx"]),
        ("@.restartCount<=2", ["nginx", "sidecar"]),
        ("@.restartCount==2", ["sidecar"]),
        ("@.restartCount!=2", ["nginx"]),
        ("@.restartCount>-1", ["nginx", "sidecar"]),
        ('@.name<"o"', ["nginx"]),
        ("@.ready==true", ["nginx", "sidecar"]),
        ("@.name==@.name", ["nginx", "sidecar"]),
    ],
)
def test_filter_comparisons(condition: str, expected: list[str]) -> None:
    assert values(f".items[0].status.containerStatuses[?({condition})].name") == expected


def test_filter_on_nested_path() -> None:
    data = {"l": [{"x": {"y": "z"}, "s": "first"}, {"x": {"y": "w"}, "s": "second"}]}
    assert values('.l[?(@.x.y=="w")].s', data) == ["second"]


def test_filter_on_the_item_itself() -> None:
    assert values('.l[?(@=="b")]', {"l": ["a", "b"]}) == ["b"]


def test_filter_comparison_with_missing_key_is_strict() -> None:
    with pytest.raises(JSONPathMissingKeyError, match="nodeName"):
        values('.items[?(@.spec.nodeName=="member1-node-a")].metadata.name')
    found = values('.items[?(@.spec.nodeName=="member1-node-a")].metadata.name', allow_missing_keys=True)
    assert found == ["web-0"]


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("@.n==1.0", "incompatible types for comparison"),
        ('@.n=="1"', "incompatible types for comparison"),
        ("@.f>1", "incompatible types for comparison"),
        ("@.b<true", "invalid type for comparison"),
        ('@.m=="x"', "invalid type for comparison"),
        ('@.z=="x"', "invalid type for comparison"),
        ("@.l==1", "invalid type for comparison"),
        ("@.l[*]==1", "can only compare one element at a time"),
        ("@.n==@.l[*]", "can only compare one element at a time"),
    ],
)
def test_filter_comparison_type_errors_follow_go_templates(condition: str, message: str) -> None:
    data = {"items": [{"n": 1, "f": 1.5, "b": True, "m": {}, "z": None, "l": [1, 2]}]}
    with pytest.raises(JSONPathEvaluationError, match=f"^{message}$"):
        values(f".items[?({condition})]", data)


def test_filter_compares_floats_with_floats() -> None:
    assert values(".l[?(@>2.0)]", {"l": [1.0, 2.5]}) == [2.5]


def test_filter_on_a_map_is_an_error() -> None:
    with pytest.raises(
        JSONPathEvaluationError, match=r"^map\[a:1\] is not array or slice and cannot be filtered$"
    ):
        values(".m[?(@.x)]", {"m": {"a": 1}})


def test_filter_on_null_is_an_error() -> None:
    with pytest.raises(JSONPathEvaluationError, match="<nil> is not array or slice"):
        values(".n[?(@.x)]", {"n": None})


# -- literals, text and range ---------------------------------------------------------------------


def test_text_between_actions_is_copied() -> None:
    assert render("pod {.items[0].metadata.name} is {.items[0].status.phase}.") == "pod web-0 is Running."


def test_quoted_literals_with_escapes() -> None:
    assert render('{.items[0].metadata.name}{"\\n"}{\'\\t\'}{"\\u00e9\\x41\\101"}') == "web-0\n\téAA"


def test_plain_text_backslashes_are_not_escapes() -> None:
    assert render("a\\nb") == "a\\nb"


def test_literal_numbers_and_booleans() -> None:
    assert render("{1} {-2} {+3} {1.5} {true} {false}") == "1 -2 3 1.5 true false"


def test_range_renders_body_per_item() -> None:
    template = '{range .items[*]}{.metadata.name}={.status.phase}{"\\n"}{end}'
    assert render(template) == "web-0=Running\nweb-1=Pending\nweb-2=Running\n"


def test_nested_range() -> None:
    template = "{range .items[*]}{.metadata.name}:{range .spec.containers[*]}[{.name}]{end};{end}"
    assert render(template) == "web-0:[nginx][sidecar];web-1:[nginx];web-2:[nginx];"


def test_range_keyword_may_follow_the_path_like_kubectl() -> None:
    assert render("{.items[*] range}{.metadata.name},{end}") == "web-0,web-1,web-2,"


def test_range_over_a_single_map_runs_once() -> None:
    assert render("{range .jobStatus}{.state}{end}", FLINK_STATUS) == "RUNNING"


def test_range_over_nothing_renders_nothing_but_text_after_it() -> None:
    assert render("{range .l[*]}{.name}{end}after", {"l": []}, allow_missing_keys=True) == "after"


def test_range_over_nothing_still_reports_missing_keys_in_strict_mode() -> None:
    with pytest.raises(JSONPathMissingKeyError, match="name"):
        render("{range .l[*]}{.name}{end}after", {"l": []})


def test_range_current_object_is_the_item_for_dollar_too() -> None:
    assert render("{range .l[*]}{$.v}{end}", {"v": "root", "l": [{"v": 1}, {"v": 2}]}) == "12"


def test_range_item_that_is_null_prints_no_value() -> None:
    assert render("{range .l[*]}[{@}]{end}", {"l": [None, 1]}) == "[<no value>][1]"
    assert parse("{range .l[*]}{@}{end}").execute({"l": [None]}) == [[None]]


def test_execute_returns_values_per_node_including_text() -> None:
    result = parse("{range .items[*]}{.metadata.name}:{end}").execute(POD_LIST)
    assert result == [["web-0"], [":"], ["web-1"], [":"], ["web-2"], [":"]]
    assert parse("x{.items[*].status.phase}").execute(POD_LIST) == [["x"], ["Running", "Pending", "Running"]]


def test_execute_returns_the_objects_themselves() -> None:
    found = parse("{.items[0].metadata.labels}").execute(POD_LIST)[0][0]
    assert found is POD_LIST["items"][0]["metadata"]["labels"]


def test_empty_action_is_the_current_object() -> None:
    assert parse("{}").execute({"a": 1}) == [[{"a": 1}]]
    assert parse("{ }").execute({"a": 1}) == [[{"a": 1}]]


def test_evaluation_does_not_modify_the_data() -> None:
    before = copy.deepcopy(POD_LIST)
    render('{range .items[*]}{..name}{.spec.containers[?(@.ports)].ports[-1:]}{"\\n"}{end}')
    assert before == POD_LIST


def test_evaluate_rejects_text_and_range() -> None:
    for expression in ("{.a} and {.b}", "{range .a}{end}", "   "):
        with pytest.raises(JSONPathSyntaxError):
            evaluate(expression, {})
