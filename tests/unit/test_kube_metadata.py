"""flotilla.kube.metadata: JSON records in annotations, where anything unreadable is no record."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from flotilla.kube.metadata import json_annotation


@pytest.mark.parametrize(("annotations", "expected"), [
    ({"k": '{"a": [1, 2]}'}, {"a": [1, 2]}),
    ({"k": "[1]"}, [1]),
    (MappingProxyType({"k": '"text"'}), "text"),
])
def test_a_readable_record_is_its_json_document(annotations: Any, expected: Any) -> None:
    assert json_annotation(annotations, "k") == expected


@pytest.mark.parametrize("annotations", [None, "k", ["k"], {}, {"other": "{}"}, {"k": ""}, {"k": 7},
                                         {"k": "{not json"}, {"k": None}])
def test_anything_unreadable_is_no_record(annotations: Any) -> None:
    assert json_annotation(annotations, "k") is None
