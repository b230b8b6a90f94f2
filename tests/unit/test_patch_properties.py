"""Property tests for the patch algorithms, against small reference implementations."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from flotilla.kube.patch import (
    BUILTIN_MERGE_KEYS,
    EMPTY_MERGE_KEYS,
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_server_side_apply,
    apply_strategic_merge_patch,
    merge_patch,
)

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def canon(value: Any) -> str:
    """Exact JSON identity (Python's == would equate True with 1)."""
    return json.dumps(value, sort_keys=True)


# -- strategies ----------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c", "d", "t~", "s/l", ""])
SCALARS = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.5, 1.0]) | st.text("xyz", max_size=2)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=12,
)
OBJECTS = st.dictionaries(KEYS, JSON_VALUES, max_size=4)

# Maps without lists, keys that carry no list strategy in the built-in table.
MAP_KEYS = st.sampled_from(["a", "b", "c", "spec", "metadata", "labels", "template"])
MAP_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text("xy", max_size=2),
    lambda inner: st.dictionaries(MAP_KEYS, inner, max_size=3),
    max_leaves=10,
)
MAP_OBJECTS = st.dictionaries(MAP_KEYS, MAP_VALUES, max_size=4)


# -- reference: RFC 7386 written as a plain recursive definition ------------------------------------


def ref_merge(target: Any, patch: Any) -> Any:
    if type(patch) is not dict:
        return patch
    base = target if type(target) is dict else {}
    out = {}
    for key in set(base) | set(patch):
        if key not in patch:
            out[key] = base[key]
        elif patch[key] is not None:
            out[key] = ref_merge(base.get(key), patch[key])
    return out


@PROPERTY
@given(JSON_VALUES, JSON_VALUES)
def test_merge_patch_agrees_with_reference(target: Any, patch: Any) -> None:
    assert canon(merge_patch(target, patch)) == canon(ref_merge(target, patch))


@PROPERTY
@given(OBJECTS, OBJECTS)
def test_apply_merge_patch_agrees_with_reference_and_keeps_inputs(
    target: dict[str, Any], patch: dict[str, Any]
) -> None:
    frozen = copy.deepcopy((target, patch))
    assert canon(apply_merge_patch(target, patch)) == canon(ref_merge(target, patch))
    assert canon((target, patch)) == canon(frozen)


@PROPERTY
@given(OBJECTS, OBJECTS)
def test_merge_patch_is_idempotent(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = apply_merge_patch(target, patch)
    assert canon(apply_merge_patch(once, patch)) == canon(once)


# -- JSON patch --------------------------------------------------------------------------------------


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def containers_of(doc: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    yield pointer, doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc)
    for key, value in items:
        if isinstance(value, (dict, list)):
            yield from containers_of(value, f"{pointer}/{escape(str(key))}")


@st.composite
def doc_and_new_location(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A document and a pointer where ``add`` creates a new member or inserts an element."""
    doc = draw(OBJECTS)
    pointer, container = draw(st.sampled_from(list(containers_of(doc))))
    if isinstance(container, dict):
        key = draw(st.text("pqr~/", min_size=1, max_size=3).filter(lambda k: k not in container))
        return doc, f"{pointer}/{escape(key)}"
    index = draw(st.integers(0, len(container)))
    token = draw(st.sampled_from(["-", str(index)])) if index == len(container) else str(index)
    return doc, f"{pointer}/{token}"


@st.composite
def doc_and_existing_location(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    doc = draw(OBJECTS)
    candidates = [
        (f"{pointer}/{escape(str(key))}")
        for pointer, container in containers_of(doc)
        for key in (container.keys() if isinstance(container, dict) else range(len(container)))
    ]
    assume(candidates)
    return doc, draw(st.sampled_from(candidates))


def resolve(doc: Any, pointer: str) -> Any:
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


def materialise(pointer: str, doc: Any) -> str:
    """``/-`` means "the end"; after the add the element sits at the last index."""
    if not pointer.endswith("/-"):
        return pointer
    parent = pointer[:-2]
    return f"{parent}/{len(resolve(doc, parent)) - 1}"


@PROPERTY
@given(doc_and_new_location(), JSON_VALUES)
def test_json_patch_test_after_add_succeeds(located: tuple[dict[str, Any], str], value: Any) -> None:
    doc, pointer = located
    added = apply_json_patch(doc, [{"op": "add", "path": pointer, "value": value}])
    where = materialise(pointer, added)
    assert canon(resolve(added, where)) == canon(value)
    both = apply_json_patch(
        doc, [{"op": "add", "path": pointer, "value": value}, {"op": "test", "path": where, "value": value}]
    )
    assert canon(both) == canon(added)


@PROPERTY
@given(doc_and_new_location(), JSON_VALUES)
def test_json_patch_add_then_remove_restores_the_document(
    located: tuple[dict[str, Any], str], value: Any
) -> None:
    doc, pointer = located
    frozen = copy.deepcopy(doc)
    added = apply_json_patch(doc, [{"op": "add", "path": pointer, "value": value}])
    restored = apply_json_patch(added, [{"op": "remove", "path": materialise(pointer, added)}])
    assert canon(restored) == canon(doc)
    assert canon(doc) == canon(frozen)


@PROPERTY
@given(doc_and_existing_location(), JSON_VALUES)
def test_json_patch_replace_then_replace_back_restores(
    located: tuple[dict[str, Any], str], value: Any
) -> None:
    doc, pointer = located
    old = resolve(doc, pointer)
    changed = apply_json_patch(
        doc,
        [{"op": "replace", "path": pointer, "value": value}, {"op": "test", "path": pointer, "value": value}],
    )
    back = apply_json_patch(changed, [{"op": "replace", "path": pointer, "value": old}])
    assert canon(back) == canon(doc)


@PROPERTY
@given(doc_and_existing_location())
def test_json_patch_copy_then_test_sees_equal_values(located: tuple[dict[str, Any], str]) -> None:
    doc, source = located
    copied = apply_json_patch(doc, [{"op": "copy", "from": source, "path": "/copied~1here"}])
    assert canon(copied["copied/here"]) == canon(resolve(doc, source))


POINTERS = st.lists(st.sampled_from(["a", "b", "0", "1", "-", "~0", "~1", "~", "01", ""]), max_size=3).map(
    lambda parts: "".join("/" + p for p in parts)
)
OPS = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus"])},
    optional={"path": POINTERS | st.integers(), "from": POINTERS, "value": JSON_VALUES},
)


@PROPERTY
@given(OBJECTS, st.lists(OPS, max_size=4) | JSON_VALUES)
def test_json_patch_either_applies_or_raises_patch_error(doc: dict[str, Any], ops: Any) -> None:
    frozen = copy.deepcopy(doc)
    try:
        result = apply_json_patch(doc, ops)
    except PatchError:
        pass
    else:
        assert isinstance(result, dict)
    assert canon(doc) == canon(frozen)


# -- strategic merge patch -----------------------------------------------------------------------


@PROPERTY
@given(MAP_OBJECTS, MAP_OBJECTS)
def test_smp_on_maps_without_lists_equals_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    expected = canon(ref_merge(target, patch))
    assert canon(apply_strategic_merge_patch(target, patch, BUILTIN_MERGE_KEYS)) == expected
    assert canon(apply_strategic_merge_patch(target, patch, EMPTY_MERGE_KEYS)) == expected


@PROPERTY
@given(OBJECTS, OBJECTS)
def test_smp_with_empty_table_and_no_directives_equals_merge_patch(
    target: dict[str, Any], patch: dict[str, Any]
) -> None:
    # Lists are replaced whole by both; SMP additionally drops nulls inside new maps in lists,
    # which merge patch keeps, so compare only patches without nulls inside lists.
    def nulls_in_lists(value: Any, in_list: bool = False) -> bool:
        if isinstance(value, dict):
            return any((v is None and in_list) or nulls_in_lists(v, in_list) for v in value.values())
        if isinstance(value, list):
            return any(nulls_in_lists(v, True) for v in value)
        return False

    assume(not nulls_in_lists(patch))
    assert canon(apply_strategic_merge_patch(target, patch, EMPTY_MERGE_KEYS)) == canon(
        ref_merge(target, patch)
    )


NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
FIELD_VALUES = st.none() | st.sampled_from(["x", "y", 1, True])


@st.composite
def live_containers(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(NAMES, unique=True, max_size=5))
    return [
        {
            "name": n,
            **draw(
                st.dictionaries(st.sampled_from(["image", "x"]), st.sampled_from(["x", "y", 2]), max_size=2)
            ),
        }
        for n in names
    ]


PATCH_ITEMS = st.one_of(
    st.builds(lambda n: {"name": n, "$patch": "delete"}, NAMES),
    st.builds(
        lambda n, f: {"name": n, **f},
        NAMES,
        st.dictionaries(st.sampled_from(["image", "x", "y"]), FIELD_VALUES, max_size=3),
    ),
)


def ref_keyed_merge(live: list[dict[str, Any]], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge-by-name as a dictionary: deletions first, then each patch item merged in order."""
    state = {item["name"]: item for item in live}
    for item in patch:
        if item.get("$patch") == "delete":
            state.pop(item["name"], None)
    for item in patch:
        if "$patch" not in item:
            state[item["name"]] = ref_merge(state.get(item["name"], {}), item)
    return state


@PROPERTY
@given(live_containers(), st.lists(PATCH_ITEMS, max_size=6), st.booleans())
def test_smp_merge_keyed_list_contains_each_key_once_with_merged_content(
    live: list[dict[str, Any]], patch_items: list[dict[str, Any]], with_order: bool
) -> None:
    target = {"spec": {"containers": live}}
    body: dict[str, Any] = {"containers": patch_items}
    wanted_order: list[str] = []
    if with_order:
        wanted_order = list(dict.fromkeys(i["name"] for i in patch_items if "$patch" not in i))
        body["$setElementOrder/containers"] = [{"name": n} for n in wanted_order]
    result = apply_strategic_merge_patch(target, {"spec": body})
    names = [c["name"] for c in result["spec"]["containers"]]
    assert len(names) == len(set(names)), names
    expected = ref_keyed_merge(live, patch_items)
    assert sorted(names) == sorted(expected)
    for item in result["spec"]["containers"]:
        assert canon(item) == canon(expected[item["name"]])
    positions = [names.index(n) for n in wanted_order]
    assert positions == sorted(positions)
    assert "$" not in canon(result)


@PROPERTY
@given(
    st.lists(st.sampled_from(["f1", "f2", "f3", "f4"]), unique=True, max_size=4),
    st.lists(st.sampled_from(["f1", "f2", "f3", "f4", "f5"]), max_size=4),
    st.lists(st.sampled_from(["f1", "f2", "f5"]), max_size=2),
)
def test_smp_primitive_merge_list_is_a_set_union_minus_deletions(
    live: list[str], added: list[str], deleted: list[str]
) -> None:
    patch: dict[str, Any] = {"metadata": {"finalizers": added}}
    if deleted:
        patch["metadata"]["$deleteFromPrimitiveList/finalizers"] = deleted
    result = apply_strategic_merge_patch({"metadata": {"finalizers": live}}, patch)
    finalizers = result["metadata"]["finalizers"]
    assert len(finalizers) == len(set(finalizers))
    assert set(finalizers) == (set(live) | set(added)) - set(deleted)
    # live-only entries keep their relative order
    kept = [f for f in finalizers if f in live and f not in added]
    assert kept == [f for f in live if f in kept]


SMP_KEYS = st.sampled_from(
    [
        "spec",
        "containers",
        "env",
        "name",
        "image",
        "finalizers",
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$setElementOrder/finalizers",
        "$deleteFromPrimitiveList/finalizers",
        "$bogus",
    ]
)
SMP_VALUES = st.recursive(
    st.none() | st.sampled_from(["a", "b", "delete", "replace", "merge", "name", "image", 1]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SMP_KEYS, inner, max_size=3),
    max_leaves=14,
)


def has_directive(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k.startswith("$") or has_directive(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_directive(v) for v in value)
    return False


@PROPERTY
@given(
    st.dictionaries(SMP_KEYS.filter(lambda k: not k.startswith("$")), SMP_VALUES, max_size=3),
    st.dictionaries(SMP_KEYS, SMP_VALUES, max_size=4),
)
def test_smp_never_leaks_directives_and_only_raises_patch_error(
    target: dict[str, Any], patch: dict[str, Any]
) -> None:
    assume(not has_directive(target))
    frozen = copy.deepcopy((target, patch))
    try:
        result = apply_strategic_merge_patch(target, patch)
    except PatchError:
        pass
    else:
        assert not has_directive(result)
    assert canon((target, patch)) == canon(frozen)


# -- minimal server-side apply ---------------------------------------------------------------------


def drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


@PROPERTY
@given(OBJECTS)
def test_apply_creates_the_applied_object_without_nulls(applied: dict[str, Any]) -> None:
    assert canon(apply_server_side_apply(None, applied)) == canon(drop_nulls(applied))


@PROPERTY
@given(MAP_OBJECTS, MAP_OBJECTS)
def test_apply_on_maps_without_lists_equals_merge_patch(
    live: dict[str, Any], applied: dict[str, Any]
) -> None:
    assert canon(apply_server_side_apply(live, applied)) == canon(ref_merge(live, applied))


@PROPERTY
@given(live_containers(), live_containers())
def test_apply_merges_keyed_lists_without_duplicates(
    live: list[dict[str, Any]], applied: list[dict[str, Any]]
) -> None:
    result = apply_server_side_apply({"spec": {"containers": live}}, {"spec": {"containers": applied}})
    names = [c["name"] for c in result["spec"]["containers"]]
    assert len(names) == len(set(names))
    assert set(names) == {c["name"] for c in live} | {c["name"] for c in applied}
    assert names[: len(live)] == [c["name"] for c in live]


@pytest.mark.parametrize("bad", [[], "x", 1, None])
def test_apply_rejects_non_object_configuration(bad: Any) -> None:
    with pytest.raises(PatchError):
        apply_server_side_apply({}, bad)
