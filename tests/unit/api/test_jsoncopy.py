"""json_copy: the deep copy of API objects used on the controllers' hot paths."""

from __future__ import annotations

import copy
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flotilla.kube.jsoncopy import json_copy

_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(st.dictionaries(st.text(), _json, max_size=6))
def test_json_copy_of_an_api_object_equals_deepcopy_and_shares_nothing(obj: dict[str, Any]) -> None:
    copied = json_copy(obj)
    assert copied == copy.deepcopy(obj)
    assert type(copied) is dict

    def containers(value: Any) -> list[int]:
        if isinstance(value, dict):
            return [id(value), *(i for v in value.values() for i in containers(v))]
        if isinstance(value, list):
            return [id(value), *(i for v in value for i in containers(v))]
        return []

    assert not set(containers(copied)) & set(containers(obj))


def test_json_copy_keeps_values_json_cannot_carry_by_falling_back_to_deepcopy() -> None:
    when = datetime(2026, 11, 30, tzinfo=UTC)
    obj = {"when": when, "big": 2**70, "keys": {1: "int key"}, "ordered": OrderedDict(a=1)}
    copied = json_copy(obj)
    assert copied == obj
    assert type(copied["when"]) is datetime
    assert type(copied["ordered"]) is OrderedDict
    copied["keys"][1] = "changed"
    assert obj["keys"][1] == "int key"


def test_json_copy_of_a_scalar_or_a_non_json_container_is_deepcopy() -> None:
    assert json_copy("text") == "text"
    assert json_copy(None) is None
    value = ({"a": [1]},)
    copied = json_copy(value)
    assert copied == value and copied[0] is not value[0]
