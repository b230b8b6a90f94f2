"""The small object accessors take a fast path for plain dicts and still accept every other Mapping.

Callers pass read-only views (``types.MappingProxyType``) and custom Mapping classes as well as dicts: each
helper that got a ``type(x) is dict`` fast path answers the same for all three, and still refuses a non-mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest

from flotilla.failover import purge, state
from flotilla.interpreter import native, thirdparty
from flotilla.interpreter.operations import GVK
from flotilla.kube.jsondiff import merge_patch_diff
from flotilla.kube.metadata import string_map
from flotilla.kube.objects import as_map, meta_of, spec_of, status_of
from flotilla.propagation import status, written
from flotilla.scheduler import model


class _Custom(Mapping[str, Any]):
    """A Mapping that is not a dict (as a read-only wrapper a caller may pass)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _views(data: dict[str, Any]) -> list[Mapping[str, Any]]:
    return [dict(data), MappingProxyType(dict(data)), _Custom(dict(data))]


_OBJ = {"metadata": {"name": "a", "resourceVersion": "7"}, "spec": {"x": 1}, "status": {"conditions": []}}


@pytest.mark.parametrize("helper", [as_map])
def test_map_helpers_keep_any_mapping_and_drop_the_rest(helper: Callable[[Any], Mapping[str, Any]]) -> None:
    for view in _views({"a": 1}):
        assert helper(view) is view
    for other in (None, [("a", 1)], "a", 1):
        assert helper(other) == {}


def test_object_accessors_read_nested_mappings_of_any_kind() -> None:
    for view in _views({k: MappingProxyType(v) for k, v in _OBJ.items()}):
        assert dict(meta_of(view)) == _OBJ["metadata"]
        assert dict(status_of(view)) == _OBJ["status"]
        assert dict(spec_of(view)) == _OBJ["spec"]
        assert dict(meta_of(view)) == _OBJ["metadata"]
        assert written._rv(view) == "7"
        assert native._path(view, "metadata", "name") == "a"
    assert meta_of({"metadata": ["not", "a", "mapping"]}) == {}
    assert written._rv(None) is None
    assert native._path({"metadata": "x"}, "metadata", "name") is None


def test_find_condition_matches_mapping_conditions_only() -> None:
    ready = MappingProxyType({"type": "Ready", "status": "True"})
    assert status.find_condition(["junk", ready], "Ready") is ready
    assert status.find_condition([{"type": "Ready"}], "Ready") == {"type": "Ready"}
    assert status.find_condition(["Ready"], "Ready") is None


def test_scheduler_model_mapping_accepts_views_and_refuses_other_values() -> None:
    view = MappingProxyType({"a": 1})
    assert model._mapping(view, "spec") is view
    assert model._mapping(None, "spec") == {}
    with pytest.raises(model.ModelError, match="spec: must be an object"):
        model._mapping([1], "spec")


def test_eviction_tasks_and_string_maps_accept_any_mapping() -> None:
    task = MappingProxyType({"fromCluster": "m1"})
    assert purge.eviction_tasks({"gracefulEvictionTasks": [task, "junk", {"fromCluster": "m2"}]}) == [
        task, {"fromCluster": "m2"}]
    assert string_map(_Custom({"a": "x", "b": 1})) == {"a": "x"}
    assert string_map(["a"]) == {}


def test_interpreter_helpers_accept_any_mapping() -> None:
    for view in _views({"apiVersion": "apps/v1", "kind": "Deployment"}):
        assert GVK.of(view) == GVK("apps/v1", "Deployment")
        native._check_object(view)
        assert thirdparty._marked(view) == {"apiVersion": "apps/v1", "kind": "Deployment"}
    with pytest.raises(Exception, match="a mapping"):
        GVK.of(["apps/v1"])  # type: ignore[arg-type]
    assert thirdparty._marked(MappingProxyType({"a": None})) is None


def test_merge_patch_diff_recurses_into_any_mapping() -> None:
    old = {"spec": MappingProxyType({"a": 1, "b": 2})}
    new = {"spec": _Custom({"a": 1, "b": 3})}
    assert merge_patch_diff(old, new) == {"spec": {"b": 3}}


def test_injected_state_record_is_read_from_any_mapping() -> None:
    record = state.InjectedStateRecord("m1", {"k": "v"}, "m1", datetime(2026, 1, 1, tzinfo=UTC)).to_json()
    for view in _views({"metadata": {"annotations": {state.INJECTED_STATE_ANNOTATION: record}}}):
        parsed = state.parse_injected_state_record(view)
        assert parsed is not None and parsed.cluster == "m1"
    assert state.parse_injected_state_record(MappingProxyType({"metadata": []})) is None
