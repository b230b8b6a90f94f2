"""Merge patches computed from two versions of an object."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flotilla.kube.jsondiff import merge_patch_diff, with_precondition
from flotilla.kube.patch import apply_merge_patch

scalars = st.one_of(st.booleans(), st.integers(), st.text(max_size=5))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=12,
)
objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)


@given(objects, objects)
def test_the_diff_turns_old_into_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert apply_merge_patch(old, merge_patch_diff(old, new)) == new


@given(objects)
def test_no_change_no_patch(obj: dict[str, Any]) -> None:
    assert merge_patch_diff(obj, obj) == {}


def test_nested_keys_are_removed_with_null_and_lists_replaced() -> None:
    old = {"a": {"b": 1, "c": 2}, "l": [1, 2], "gone": True}
    new = {"a": {"b": 1}, "l": [2]}
    assert merge_patch_diff(old, new) == {"a": {"c": None}, "l": [2], "gone": None}


def test_a_bool_is_not_an_int() -> None:
    assert merge_patch_diff({"x": 1}, {"x": True}) == {"x": True}


def test_precondition() -> None:
    obj = {"metadata": {"name": "x", "resourceVersion": "5"}}
    assert with_precondition({"spec": {"a": 1}}, obj) == {"spec": {"a": 1}, "metadata": {"resourceVersion": "5"}}
    assert with_precondition({"metadata": {"labels": {"a": "b"}}}, obj)["metadata"] == {
        "labels": {"a": "b"}, "resourceVersion": "5"}
    assert with_precondition({"spec": {}}, {"metadata": {}}) == {"spec": {}}
