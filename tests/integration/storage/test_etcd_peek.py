"""Writes that start from the etcd store's newest known value (``peek``) instead of a read: two API servers share
one etcd, and the one whose known value is stale still writes what a read-modify-write would have written."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from flotilla.apiserver.builtin_kinds import BUILTIN_TYPES
from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.rest import MERGE_PATCH, RequestContext, ResourceStorage
from flotilla.apiserver.type_registry import TypeRegistry
from flotilla.storage.etcd import EtcdStore

pytestmark = pytest.mark.etcd


@pytest.fixture
async def servers(etcd_endpoint: str) -> AsyncIterator[tuple[ResourceStorage, ResourceStorage]]:
    """Two API servers' storage layers on the session's etcd (same prefix), with no watch: each knows only its own
    writes."""
    prefix = f"/t-{uuid.uuid4().hex[:10]}"
    a = await EtcdStore.open([etcd_endpoint], prefix=prefix)
    b = await EtcdStore.open([etcd_endpoint], prefix=prefix)
    ra, rb = ResourceStorage(a, TypeRegistry(BUILTIN_TYPES)), ResourceStorage(b, TypeRegistry(BUILTIN_TYPES))
    await ra.create(_rt(ra, "namespaces"), None, {"metadata": {"name": "default"}})
    yield ra, rb
    await a.close()
    await b.close()


def _rt(storage: ResourceStorage, plural: str) -> Any:
    t = storage.types.lookup("", "v1", plural)
    assert t is not None
    return t


def _cm(value: str) -> dict[str, Any]:
    return {"metadata": {"name": "c", "labels": {"x": value}}, "data": {"k": value}}


async def _stale_pair(servers: tuple[ResourceStorage, ResourceStorage]) -> tuple[ResourceStorage, Any, str]:
    """A ConfigMap written by server a (x=1), then changed by server b (x=2): a still knows x=1."""
    a, b = servers
    cms = _rt(a, "configmaps")
    await a.create(cms, "default", _cm("1"))
    newer = await b.patch(cms, "default", "c", MERGE_PATCH, {"metadata": {"labels": {"x": "2"}}, "data": {"k": "2"}})
    known = a.store.peek(a._key(cms, "default", "c"))
    assert known is not None and b"\"x\":\"1\"" in known.value  # a's known value is stale
    return a, cms, newer[0]["metadata"]["resourceVersion"]


async def test_a_patch_from_a_stale_known_value_applies_to_the_newest_object(servers: Any) -> None:
    a, cms, _ = await _stale_pair(servers)
    out, _ = await a.patch(cms, "default", "c", MERGE_PATCH, {"data": {"other": "y"}})
    assert out["metadata"]["labels"] == {"x": "2"} and out["data"] == {"k": "2", "other": "y"}


async def test_a_patch_that_is_a_no_op_on_the_stale_value_is_written(servers: Any) -> None:
    a, cms, _ = await _stale_pair(servers)
    # x=1 is what a still knows: decided on that alone the patch would change nothing and be lost
    out, _ = await a.patch(cms, "default", "c", MERGE_PATCH, {"metadata": {"labels": {"x": "1"}}})
    assert out["metadata"]["labels"] == {"x": "1"}
    stored = await servers[1].get(cms, "default", "c")
    assert stored["metadata"]["labels"] == {"x": "1"}


async def test_a_precondition_on_the_newest_version_passes_when_the_known_value_is_stale(servers: Any) -> None:
    a, cms, newest = await _stale_pair(servers)
    out, _ = await a.patch(cms, "default", "c", MERGE_PATCH,
                           {"metadata": {"resourceVersion": newest, "annotations": {"seen": "2"}}})
    assert out["metadata"]["annotations"] == {"seen": "2"}
    body = _cm("3")
    body["metadata"]["resourceVersion"] = out["metadata"]["resourceVersion"]
    servers[1].store._latest.clear()  # noqa: SLF001  (b forgets, then a writes: b's next PUT must read)
    updated = await a.update(cms, "default", "c", body)
    assert updated["data"] == {"k": "3"}


async def test_a_precondition_on_an_old_version_is_still_a_conflict(servers: Any) -> None:
    a, cms, _ = await _stale_pair(servers)
    body = _cm("3")
    known = a.store.peek(a._key(cms, "default", "c"))
    assert known is not None
    body["metadata"]["resourceVersion"] = str(known.mod_revision)  # the version a knows, no longer current
    with pytest.raises(ApiError) as e:
        await a.update(cms, "default", "c", body)
    assert e.value.code == 409


async def test_a_dry_run_on_a_stale_value_answers_with_the_newest_object(servers: Any) -> None:
    a, cms, newest = await _stale_pair(servers)
    out, _ = await a.patch(cms, "default", "c", MERGE_PATCH, {"data": {"dry": "1"}},
                           RequestContext(dry_run=True))
    assert out["metadata"]["resourceVersion"] == newest and out["data"] == {"k": "2", "dry": "1"}


async def test_a_write_to_an_object_deleted_elsewhere_is_not_found(servers: Any) -> None:
    a, b = servers
    cms = _rt(a, "configmaps")
    await a.create(cms, "default", _cm("1"))
    await b.delete(cms, "default", "c")
    assert a.store.peek(a._key(cms, "default", "c")) is not None
    with pytest.raises(ApiError) as e:
        await a.patch(cms, "default", "c", MERGE_PATCH, {"data": {"k": "9"}})
    assert e.value.code == 404
    with pytest.raises(ApiError) as e:
        await a.update(cms, "default", "c", _cm("9"))
    assert e.value.code == 404


async def test_the_known_value_follows_the_stores_watches(servers: Any) -> None:
    a, b = servers
    cms = _rt(a, "configmaps")
    key = a._key(cms, "default", "c")
    watcher = await a.store.watch(key)
    try:
        await b.create(cms, "default", _cm("1"))
        async for event in watcher:
            assert event.key == key
            break
        known = a.store.peek(key)
        assert known is not None and known.mod_revision == event.revision
    finally:
        await watcher.close()
