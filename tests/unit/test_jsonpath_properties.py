"""Property tests of the JSONPath package (hypothesis)."""

from __future__ import annotations

import json
import math
import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.jsonpath import JSONPathError, JSONPathSyntaxError, evaluate, format_value, parse
from flotilla.jsonpath.formatting import go_json

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | INT64 | FINITE | st.text(max_size=8)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)
IDENTIFIERS = st.text(alphabet=string.ascii_letters + string.digits + "_-/", min_size=1, max_size=10)
# Any non-empty key without a backslash can be written as a field by escaping kubectl's terminator
# characters (backslashes are dropped from field names; an empty key would make ".." in a path).
ANY_KEYS = st.text(
    alphabet=st.characters(blacklist_characters="\\", blacklist_categories=("Cs",)), min_size=1, max_size=8
)
TERMINATORS = set(" \t\r\n.,[]$@{}*")


def escape_key(key: str) -> str:
    return "".join("\\" + ch if ch in TERMINATORS else ch for ch in key)


def nest(path: list[str], leaf: Any, siblings: dict[str, Any]) -> dict[str, Any]:
    """A document where ``path`` leads to ``leaf``, with unrelated siblings at every level."""
    node: Any = leaf
    for key in reversed(path):
        level = {k: v for k, v in siblings.items() if k != key}
        level[key] = node
        node = level
    return node


@given(
    st.lists(IDENTIFIERS, min_size=1, max_size=5),
    JSON_VALUES,
    st.dictionaries(IDENTIFIERS, SCALARS, max_size=3),
)
def test_dotted_path_equals_direct_indexing(path: list[str], leaf: Any, siblings: dict[str, Any]) -> None:
    data = nest(path, leaf, siblings)
    expected = data
    for key in path:
        expected = expected[key]
    dotted = "." + ".".join(path)
    assert evaluate(dotted, data) == [expected]
    assert evaluate("{" + dotted + "}", data) == [expected]
    assert evaluate("".join(f"['{key}']" for key in path), data) == [expected]


@given(st.lists(ANY_KEYS, min_size=1, max_size=4), SCALARS)
def test_escaped_field_names_reach_any_key(path: list[str], leaf: Any) -> None:
    data = nest(path, leaf, {"other": 1})
    expression = "{" + "".join("." + escape_key(key) for key in path) + "}"
    assert evaluate(expression, data) == [leaf]


@given(
    st.lists(IDENTIFIERS, min_size=1, max_size=4),
    IDENTIFIERS,
    st.dictionaries(IDENTIFIERS, SCALARS, max_size=3),
)
def test_absent_key_raises_in_strict_mode_and_is_empty_when_allowed(
    path: list[str], absent: str, siblings: dict[str, Any]
) -> None:
    data = nest(path, {k: v for k, v in siblings.items() if k != absent}, {})
    expression = "." + ".".join([*path, absent])
    assert evaluate(expression, data, allow_missing_keys=True) == []
    try:
        evaluate(expression, data)
    except JSONPathError as error:
        assert str(error) == f"{absent} is not found"
    else:
        raise AssertionError("a missing key must raise in strict mode")


ITEMS = st.lists(
    st.fixed_dictionaries({"name": st.text(max_size=6), "value": INT64 | FINITE | st.booleans()}), max_size=6
)


@given(ITEMS, st.booleans())
def test_range_equals_joined_per_item_renders(items: list[dict[str, Any]], allow: bool) -> None:
    body = '{.name}={.value}{"\\n"}'
    range_template = parse("{range .items[*]}" + body + "{end}")
    if not items and not allow:
        return  # kubectl: the body of an empty range still runs, on no value, and misses .name
    whole = range_template.render({"items": items}, allow_missing_keys=allow)
    assert whole == "".join(parse(body).render(item, allow_missing_keys=allow) for item in items)


def test_range_over_empty_list_in_strict_mode_reports_the_body_s_missing_key() -> None:
    try:
        parse("{range .items[*]}{.name}{end}").render({"items": []})
    except JSONPathError as error:
        assert str(error) == "name is not found"
    else:
        raise AssertionError("kubectl reports the missing key of an empty range body in strict mode")


@given(ITEMS)
def test_wildcard_renders_values_joined_by_spaces(items: list[dict[str, Any]]) -> None:
    rendered = parse("{.items[*].name}").render({"items": items})
    assert rendered == " ".join(item["name"] for item in items)


@given(st.lists(INT64, max_size=8), st.integers(-10, 10), st.integers(-10, 10) | st.none())
def test_index_selects_like_python_within_bounds(items: list[int], index: int, unused: int | None) -> None:
    data = {"l": items}
    if -len(items) <= index < len(items):
        assert evaluate(f".l[{index}]", data) == [items[index]]
    else:
        try:
            evaluate(f".l[{index}]", data, allow_missing_keys=True)
        except JSONPathError as error:
            assert "out of bounds" in str(error)
        else:
            raise AssertionError("an index out of bounds must raise")


@given(st.lists(INT64, min_size=1, max_size=8), st.data())
def test_valid_slices_select_like_python(items: list[int], data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(items) - 1))
    end = data.draw(st.integers(start + 1, len(items)))
    step = data.draw(st.integers(1, 4))
    assert evaluate(f".l[{start}:{end}:{step}]", {"l": items}) == items[start:end:step]


@given(FINITE)
def test_float_printing_round_trips_and_prints_integral_values_as_integers(number: float) -> None:
    printed = format_value(number)
    if number.is_integer() and -(2**63) <= number < 2**63:
        assert printed == str(int(number))
    else:
        assert float(printed) == number
        assert "e" in printed or "." in printed


@given(JSON_VALUES)
def test_json_output_has_sorted_keys_parses_back_to_the_value_and_is_stable(value: Any) -> None:
    text = go_json(value)
    assert _same(json.loads(text, object_pairs_hook=_sorted_object), value)
    assert text == go_json(json.loads(text)) or _has_negative_zero(value)  # "-0" parses back as int 0
    for ch in "<>&\n":
        assert ch not in text


def _sorted_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    assert keys == sorted(keys), "Go writes map keys sorted"
    return dict(pairs)


def _same(parsed: Any, value: Any) -> bool:
    """Equal, except that Go writes an integral float without a fraction (it parses back as int)."""
    if isinstance(value, float) and isinstance(parsed, int | float) and not isinstance(parsed, bool):
        return float(parsed) == value
    if isinstance(value, dict) and isinstance(parsed, dict):
        return parsed.keys() == value.keys() and all(_same(parsed[k], value[k]) for k in value)
    if isinstance(value, list) and isinstance(parsed, list):
        return len(parsed) == len(value) and all(_same(p, v) for p, v in zip(parsed, value, strict=True))
    return type(parsed) is type(value) and parsed == value


def _has_negative_zero(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_negative_zero(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_negative_zero(v) for v in value)
    return isinstance(value, float) and value == 0 and math.copysign(1, value) < 0


TEMPLATE_ALPHABET = "{}[]()?@$.*,:'\"=!<>-+ \\nabrange0123456789\n"
SAMPLE = {
    "a": {"b": [1, 2.5, "x", None, {"a": True}], "n": None},
    "b": [{"a": 1, "n": "x"}, {"a": 2}],
    "range": "r",
}


@settings(max_examples=400)
@given(st.text(alphabet=TEMPLATE_ALPHABET, max_size=24))
def test_any_text_parses_or_raises_a_positioned_syntax_error(text: str) -> None:
    try:
        template = parse(text)
    except JSONPathSyntaxError as error:
        assert 0 <= error.position <= len(text)
        assert error.message
        return
    for allow in (False, True):
        try:
            assert isinstance(template.render(SAMPLE, allow_missing_keys=allow), str)
        except JSONPathError:
            pass
