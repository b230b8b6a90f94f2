"""kube-apiserver semantics of ResourceStorage, on the memory store (no HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from flotilla.apiserver.builtin_kinds import BUILTIN_TYPES
from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.rest import MERGE_PATCH, STRATEGIC_PATCH, RequestContext, ResourceStorage, WatchSpec
from flotilla.apiserver.type_registry import TypeRegistry
from flotilla.storage.memory import MemoryStore


@pytest.fixture
async def rs() -> AsyncIterator[ResourceStorage]:
    store = MemoryStore()
    storage = ResourceStorage(store, TypeRegistry(BUILTIN_TYPES))
    ns_rt = storage.types.lookup("", "v1", "namespaces")
    assert ns_rt is not None
    await storage.create(ns_rt, None, {"metadata": {"name": "default"}})
    yield storage
    await store.close()


def rt(storage: ResourceStorage, group: str, version: str, plural: str) -> Any:
    t = storage.types.lookup(group, version, plural)
    assert t is not None
    return t


def deployment(name: str = "web", replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
        "status": {"replicas": 99},
    }


async def test_create_sets_server_fields_and_drops_status(rs: ResourceStorage) -> None:
    d = rt(rs, "apps", "v1", "deployments")
    obj = await rs.create(d, "default", deployment())
    md = obj["metadata"]
    assert md["uid"] and md["creationTimestamp"].endswith("Z") and md["generation"] == 1
    assert int(md["resourceVersion"]) > 0 and md["namespace"] == "default"
    assert "status" not in obj
    with pytest.raises(ApiError) as e:
        await rs.create(d, "default", deployment())
    assert e.value.code == 409 and e.value.reason == "AlreadyExists"


async def test_generate_name_and_missing_namespace(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    obj = await rs.create(cm, "default", {"metadata": {"generateName": "cfg-"}})
    assert obj["metadata"]["name"].startswith("cfg-") and len(obj["metadata"]["name"]) == 9
    with pytest.raises(ApiError) as e:
        await rs.create(cm, "nowhere", {"metadata": {"name": "x"}})
    assert e.value.code == 404 and e.value.message == 'namespaces "nowhere" not found'
    listed = await rs.list(cm, "nowhere")
    assert listed["items"] == []
    with pytest.raises(ApiError) as e:
        await rs.create(cm, "default", {"metadata": {}})
    assert e.value.code == 422 and "name or generateName is required" in e.value.message


async def test_generation_bumps_only_on_spec_changes(rs: ResourceStorage) -> None:
    d = rt(rs, "apps", "v1", "deployments")
    await rs.create(d, "default", deployment())
    obj, _ = await rs.patch(d, "default", "web", MERGE_PATCH, {"metadata": {"labels": {"x": "y"}}})
    assert obj["metadata"]["generation"] == 1
    obj, _ = await rs.patch(d, "default", "web", STRATEGIC_PATCH, {"spec": {"replicas": 3}})
    assert obj["metadata"]["generation"] == 2
    obj, _ = await rs.patch(d, "default", "web", MERGE_PATCH, {"status": {"replicas": 3}}, subresource="status")
    assert obj["metadata"]["generation"] == 2 and obj["status"]["replicas"] == 3


async def test_noop_write_keeps_resource_version(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    created = await rs.create(cm, "default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    before = await rs.store.current_revision()
    same, _ = await rs.patch(cm, "default", "a", MERGE_PATCH, {"data": {"k": "v"}})
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    updated = await rs.update(cm, "default", "a", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert updated["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert await rs.store.current_revision() == before


async def test_stale_resource_version_conflicts_and_missing_rv_is_unconditional(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    created = await rs.create(cm, "default", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    await rs.update(cm, "default", "a", {"metadata": {"name": "a"}, "data": {"k": "2"}})
    stale = {"metadata": {"name": "a", "resourceVersion": created["metadata"]["resourceVersion"]}, "data": {"k": "3"}}
    with pytest.raises(ApiError) as e:
        await rs.update(cm, "default", "a", stale)
    assert e.value.code == 409 and e.value.reason == "Conflict"
    assert "the object has been modified" in e.value.message
    last = await rs.update(cm, "default", "a", {"metadata": {"name": "a"}, "data": {"k": "4"}})
    assert last["data"] == {"k": "4"}
    assert last["metadata"]["uid"] == created["metadata"]["uid"]


async def test_status_subresource_split(rs: ResourceStorage) -> None:
    d = rt(rs, "apps", "v1", "deployments")
    await rs.create(d, "default", deployment())
    await rs.patch(d, "default", "web", MERGE_PATCH, {"status": {"readyReplicas": 1}}, subresource="status")
    body = deployment(replicas=5)
    body["status"] = {"readyReplicas": 0}
    obj = await rs.update(d, "default", "web", body)
    assert obj["spec"]["replicas"] == 5 and obj["status"] == {"readyReplicas": 1}
    spec_change = deployment(replicas=9)
    spec_change["status"] = {"readyReplicas": 7}
    obj = await rs.update(d, "default", "web", spec_change, subresource="status")
    assert obj["spec"]["replicas"] == 5 and obj["status"] == {"readyReplicas": 7}


async def test_finalizers_hold_deletion_until_removed(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    await rs.create(cm, "default", {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    body, code = await rs.delete(cm, "default", "held")
    assert code == 200 and body["metadata"]["deletionTimestamp"]
    cur = await rs.get(cm, "default", "held")
    cur["metadata"]["finalizers"].append("example.com/new")
    with pytest.raises(ApiError) as e:
        await rs.update(cm, "default", "held", cur)
    assert e.value.code == 422
    cur = await rs.get(cm, "default", "held")
    cur["metadata"]["finalizers"] = []
    await rs.update(cm, "default", "held", cur)
    with pytest.raises(ApiError) as e:
        await rs.get(cm, "default", "held")
    assert e.value.code == 404


async def test_delete_preconditions(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    await rs.create(cm, "default", {"metadata": {"name": "a"}})
    with pytest.raises(ApiError) as e:
        await rs.delete(cm, "default", "a", {"preconditions": {"uid": "not-it"}})
    assert e.value.code == 409
    body, code = await rs.delete(cm, "default", "a")
    assert body["status"] == "Success" and body["details"]["name"] == "a"


async def test_paginated_list_is_a_consistent_snapshot(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    for i in range(5):
        await rs.create(cm, "default", {"metadata": {"name": f"c{i}", "labels": {"even": str(i % 2 == 0).lower()}}})
    page1 = await rs.list(cm, "default", limit=2)
    assert [o["metadata"]["name"] for o in page1["items"]] == ["c0", "c1"]
    token = page1["metadata"]["continue"]
    await rs.create(cm, "default", {"metadata": {"name": "c2a"}})  # after the snapshot
    await rs.delete(cm, "default", "c3")
    page2 = await rs.list(cm, "default", limit=2, continue_token=token)
    assert [o["metadata"]["name"] for o in page2["items"]] == ["c2", "c3"]
    page3 = await rs.list(cm, "default", limit=2, continue_token=page2["metadata"]["continue"])
    assert [o["metadata"]["name"] for o in page3["items"]] == ["c4"]
    assert "continue" not in page3["metadata"]
    evens = await rs.list(cm, "default", label_selector="even=true", limit=2)
    assert [o["metadata"]["name"] for o in evens["items"]] == ["c0", "c2"]
    assert evens["metadata"].get("continue")
    with pytest.raises(ApiError) as e:
        await rs.list(cm, "default", field_selector="data.k=v")
    assert e.value.code == 400 and "field label not supported" in e.value.message


async def _collect(it: Any, n: int) -> list[tuple[str, dict[str, Any]]]:
    out = []
    async for item in it:
        out.append(item)
        if len(out) == n:
            break
    return out


async def test_watch_label_selector_transitions(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    created = await rs.create(cm, "default", {"metadata": {"name": "a", "labels": {"app": "x"}}})
    events = await rs.watch(cm, WatchSpec(namespace="default", label_selector="app=y",
                                          resource_version=created["metadata"]["resourceVersion"]))
    collector = asyncio.ensure_future(_collect(events, 3))
    await rs.patch(cm, "default", "a", MERGE_PATCH, {"metadata": {"labels": {"app": "y"}}})
    await rs.patch(cm, "default", "a", MERGE_PATCH, {"data": {"k": "v"}})
    await rs.patch(cm, "default", "a", MERGE_PATCH, {"metadata": {"labels": {"app": "z"}}})
    got = await asyncio.wait_for(collector, 5)
    assert [t for t, _ in got] == ["ADDED", "MODIFIED", "DELETED"]
    rvs = [int(o["metadata"]["resourceVersion"]) for _, o in got]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


async def test_watch_send_initial_events_then_bookmark(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    await rs.create(cm, "default", {"metadata": {"name": "a"}})
    await rs.create(cm, "default", {"metadata": {"name": "b"}})
    events = await rs.watch(cm, WatchSpec(namespace="default", send_initial_events=True, allow_bookmarks=True))
    got = await asyncio.wait_for(_collect(events, 3), 5)
    assert [t for t, _ in got] == ["ADDED", "ADDED", "BOOKMARK"]
    assert got[2][1]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_watch_from_compacted_revision_is_expired(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    first = await rs.create(cm, "default", {"metadata": {"name": "a"}})
    for i in range(3):
        await rs.patch(cm, "default", "a", MERGE_PATCH, {"data": {"i": str(i)}})
    await rs.store.compact(await rs.store.current_revision())
    with pytest.raises(ApiError) as e:
        await rs.watch(cm, WatchSpec(namespace="default", resource_version=first["metadata"]["resourceVersion"]))
    assert e.value.code == 410 and e.value.reason == "Expired"


async def test_dry_run_writes_nothing(rs: ResourceStorage) -> None:
    cm = rt(rs, "", "v1", "configmaps")
    before = await rs.store.current_revision()
    obj = await rs.create(cm, "default", {"metadata": {"name": "dry"}}, RequestContext(dry_run=True))
    assert obj["metadata"]["uid"]
    assert await rs.store.current_revision() == before
    with pytest.raises(ApiError):
        await rs.get(cm, "default", "dry")


async def test_terminating_namespace_refuses_new_content(rs: ResourceStorage) -> None:
    ns_rt = rt(rs, "", "v1", "namespaces")
    cm = rt(rs, "", "v1", "configmaps")
    await rs.create(ns_rt, None, {"metadata": {"name": "going"}})
    body, _ = await rs.delete(ns_rt, None, "going")
    assert body["status"]["phase"] == "Terminating"
    with pytest.raises(ApiError) as e:
        await rs.create(cm, "going", {"metadata": {"name": "x"}})
    assert e.value.code == 403 and "being terminated" in e.value.message
    assert e.value.message.startswith('configmaps "x" is forbidden')


class _InterleavingStore(MemoryStore):
    """A store whose reads let other tasks run before they return, so concurrent writers all read the same
    revision and all but one lose the compare-and-swap (as writers do on a busy server)."""

    async def get(self, key: str) -> Any:
        kv = await super().get(key)
        await asyncio.sleep(0)
        return kv


@pytest.fixture
async def racy() -> AsyncIterator[ResourceStorage]:
    store = _InterleavingStore()
    storage = ResourceStorage(store, TypeRegistry(BUILTIN_TYPES))
    ns_rt = storage.types.lookup("", "v1", "namespaces")
    assert ns_rt is not None
    await storage.create(ns_rt, None, {"metadata": {"name": "default"}})
    yield storage
    await store.close()


async def test_concurrent_patches_without_resource_version_all_land(racy: ResourceStorage) -> None:
    from flotilla.apiserver.rest import JSON_PATCH

    cm = rt(racy, "", "v1", "configmaps")
    await racy.create(cm, "default", {"metadata": {"name": "a", "annotations": {}}, "data": {}})
    before = await racy.store.current_revision()
    patches = [racy.patch(cm, "default", "a", MERGE_PATCH, {"data": {f"m{i}": str(i)}}) for i in range(8)]
    patches += [racy.patch(cm, "default", "a", STRATEGIC_PATCH, {"data": {f"s{i}": str(i)}}) for i in range(4)]
    patches += [racy.patch(cm, "default", "a", JSON_PATCH,
                           [{"op": "add", "path": f"/metadata/annotations/j{i}", "value": str(i)}]) for i in range(4)]
    results = await asyncio.gather(*patches, return_exceptions=True)
    assert [r for r in results if isinstance(r, BaseException)] == []
    obj = await racy.get(cm, "default", "a")
    assert obj["data"] == {**{f"m{i}": str(i) for i in range(8)}, **{f"s{i}": str(i) for i in range(4)}}
    assert obj["metadata"]["annotations"] == {f"j{i}": str(i) for i in range(4)}
    assert await racy.store.current_revision() == before + 16  # one write each, none lost, none doubled


async def test_concurrent_patch_with_stale_resource_version_precondition_conflicts(racy: ResourceStorage) -> None:
    cm = rt(racy, "", "v1", "configmaps")
    created = await racy.create(cm, "default", {"metadata": {"name": "a"}, "data": {}})
    rv = created["metadata"]["resourceVersion"]
    # both read revision rv; the unconditioned patch lands first, so the conditioned one's precondition is stale
    # by the time it retries: 409, not a patch applied over a write it did not see
    free = racy.patch(cm, "default", "a", MERGE_PATCH, {"data": {"free": "1"}})
    guarded = racy.patch(cm, "default", "a", MERGE_PATCH, {"metadata": {"resourceVersion": rv}, "data": {"g": "1"}})
    results = await asyncio.gather(free, guarded, return_exceptions=True)
    assert not isinstance(results[0], BaseException)
    assert isinstance(results[1], ApiError) and results[1].code == 409 and results[1].reason == "Conflict"
    obj = await racy.get(cm, "default", "a")
    assert obj["data"] == {"free": "1"}
