"""Property tests for label and field selectors, against set-logic reference evaluation."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flotilla.kube.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
    parse_field_selector,
    parse_label_selector,
)

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYS = st.sampled_from(["app", "tier", "example.com/owner", "k8s.io/x", "a.b-c_d", "Z9"])
VALUES = st.sampled_from(["", "web", "db", "v1.2", "x_y", "A", "3", "10"])
NUMBERS = st.integers(0, 12).map(str)
LABELS = st.dictionaries(KEYS, VALUES, max_size=6)

# A requirement as plain data: (operator, key, values)
REQUIREMENTS = st.one_of(
    st.tuples(st.sampled_from(["=", "==", "!="]), KEYS, VALUES.map(lambda v: (v,))),
    st.tuples(st.sampled_from(["in", "notin"]), KEYS, st.lists(VALUES, min_size=1, max_size=3).map(tuple)),
    st.tuples(st.sampled_from(["exists", "!"]), KEYS, st.just(())),
    st.tuples(st.sampled_from([">", "<"]), KEYS, NUMBERS.map(lambda v: (v,))),
)
SPACE = st.sampled_from(["", " ", "  ", "\t"])


def reference_match(req: tuple[str, str, tuple[str, ...]], labels: dict[str, str]) -> bool:
    op, key, values = req
    has = key in labels
    value = labels.get(key)
    if op in ("=", "==", "in"):
        return has and value in set(values)
    if op in ("!=", "notin"):
        return not has or value not in set(values)
    if op == "exists":
        return has
    if op == "!":
        return not has
    if not has or not str(value).isdigit():
        return False
    return int(value) > int(values[0]) if op == ">" else int(value) < int(values[0])  # type: ignore[arg-type]


@st.composite
def rendered(draw: st.DrawFn) -> tuple[list[tuple[str, str, tuple[str, ...]]], str]:
    """Requirements and a selector string for them, with random (legal) whitespace."""
    reqs = draw(st.lists(REQUIREMENTS, max_size=5))
    parts = []
    for op, key, values in reqs:
        a, b, c = draw(SPACE), draw(SPACE), draw(SPACE)
        if op == "exists":
            parts.append(f"{a}{key}{b}")
        elif op == "!":
            parts.append(f"{a}!{b}{key}{c}")
        elif op in ("in", "notin"):
            inner = ",".join(f"{draw(SPACE)}{v}{draw(SPACE)}" for v in values)
            parts.append(f"{a}{key} {op}{b}({inner}){c}")
        else:
            parts.append(f"{a}{key}{b}{op}{c}{values[0]}")
    return reqs, ",".join(parts)


@PROPERTY
@given(rendered(), LABELS)
def test_parsed_selector_matches_like_set_logic(case: tuple[list[Any], str], labels: dict[str, str]) -> None:
    reqs, text = case
    selector = parse_label_selector(text)
    assert selector.matches(labels) == all(reference_match(r, labels) for r in reqs)
    assert selector.empty == (not reqs)


@PROPERTY
@given(rendered())
def test_canonical_string_round_trips(case: tuple[list[Any], str]) -> None:
    selector = parse_label_selector(case[1])
    assert parse_label_selector(str(selector)) == selector
    assert str(parse_label_selector(str(selector))) == str(selector)


@PROPERTY
@given(rendered(), rendered(), LABELS)
def test_comma_is_conjunction(
    left: tuple[list[Any], str], right: tuple[list[Any], str], labels: dict[str, str]
) -> None:
    joined = ",".join(t for t in (left[1], right[1]) if t.strip())
    both = parse_label_selector(joined)
    assert both.matches(labels) == (
        parse_label_selector(left[1]).matches(labels) and parse_label_selector(right[1]).matches(labels)
    )


DICT_REQUIREMENTS = st.one_of(
    st.tuples(st.sampled_from(["In", "NotIn"]), KEYS, st.lists(VALUES, min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["Exists", "DoesNotExist"]), KEYS, st.just([])),
)
_DICT_TO_REF = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


@PROPERTY
@given(st.dictionaries(KEYS, VALUES, max_size=3), st.lists(DICT_REQUIREMENTS, max_size=4), LABELS)
def test_dict_selector_matches_like_set_logic(
    match_labels: dict[str, str], expressions: list[tuple[str, str, list[str]]], labels: dict[str, str]
) -> None:
    sel: dict[str, Any] = {"matchLabels": match_labels, "matchExpressions": []}
    for op, key, values in expressions:
        expr: dict[str, Any] = {"key": key, "operator": op}
        if values:
            expr["values"] = values
        sel["matchExpressions"].append(expr)
    refs = [("=", k, (v,)) for k, v in match_labels.items()]
    refs += [(_DICT_TO_REF[op], key, tuple(values)) for op, key, values in expressions]
    selector = label_selector_from_dict(sel)
    assert selector.matches(labels) == all(reference_match(r, labels) for r in refs)
    assert parse_label_selector(str(selector)) == selector


@PROPERTY
@given(st.text(alphabet="ab=!(),<> \tinotx/.-_9", max_size=24))
def test_any_label_selector_text_parses_or_raises_selector_error(text: str) -> None:
    try:
        selector = parse_label_selector(text)
    except SelectorError:
        return
    assert isinstance(selector, LabelSelector)
    assert parse_label_selector(str(selector)) == selector


FIELDS = st.sampled_from(["metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"])
FIELD_VALUES = st.text(alphabet="ab,=\\.-", max_size=5)


def escape_field(value: str) -> str:
    out = []
    for ch in value:
        out.append("\\" + ch if ch in "\\,=" else ch)
    return "".join(out)


@PROPERTY
@given(
    st.lists(st.tuples(FIELDS, st.sampled_from(["=", "==", "!="]), FIELD_VALUES), max_size=4),
    st.dictionaries(FIELDS, FIELD_VALUES),
)
def test_field_selector_round_trips_and_matches_like_reference(
    reqs: list[tuple[str, str, str]], fields: dict[str, str]
) -> None:
    text = ",".join(f"{f}{op}{escape_field(v)}" for f, op, v in reqs)
    selector = parse_field_selector(text)
    assert selector.requirements == tuple((f, "!=" if op == "!=" else "=", v) for f, op, v in reqs)
    assert parse_field_selector(str(selector)) == selector

    def expected(f: str, op: str, v: str) -> bool:
        actual = fields.get(f, "")
        return actual != v if op == "!=" else actual == v

    assert selector.matches(fields.get) == all(expected(*r) for r in reqs)


@PROPERTY
@given(st.text(alphabet="ab=!,\\. ", max_size=20))
def test_any_field_selector_text_parses_or_raises_selector_error(text: str) -> None:
    try:
        selector = parse_field_selector(text)
    except SelectorError:
        return
    assert isinstance(selector, FieldSelector)
    assert parse_field_selector(str(selector)) == selector
