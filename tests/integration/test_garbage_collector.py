"""The garbage collector: background / foreground / orphan cascading deletion by ownerReferences, custom
resources, and catching up after a restart - on a real ApiServer (memory store), driven through its storage."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from flotilla.apiserver.controllers.garbage_collector import GarbageCollector, _node_of, owner_refs_of
from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.rest import ResourceStorage
from flotilla.apiserver.server import ApiServer, ApiServerConfig

NS = "default"


# ============================================================================================ helpers


async def eventually(check: Callable[[], Awaitable[Any]], within: float = 5.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + within
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.02)


async def settled(gc: GarbageCollector, within: float = 5.0) -> None:
    """Wait until the collector has nothing queued or in progress (scheduled rechecks aside)."""
    async def idle() -> bool:
        return gc.idle()

    await eventually(idle, within, "the collector to settle")


class Api:
    def __init__(self, storage: ResourceStorage) -> None:
        self.storage = storage

    def rt(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.storage.types.lookup(group, version, plural)
        assert rt is not None, f"{group}/{version}/{plural} not served"
        return rt

    @property
    def cm(self) -> ResourceType:
        return self.rt("", "v1", "configmaps")

    async def create(self, rt: ResourceType, name: str, owners: list[dict[str, Any]] | None = None,
                     ns: str | None = NS, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"metadata": {"name": name, **extra}}
        if owners:
            body["metadata"]["ownerReferences"] = owners
        return await self.storage.create(rt, ns if rt.namespaced else None, body)

    async def get(self, rt: ResourceType, name: str, ns: str | None = NS) -> dict[str, Any] | None:
        try:
            return await self.storage.get(rt, ns if rt.namespaced else None, name)
        except ApiError as e:
            assert e.code == 404, e
            return None

    async def gone(self, rt: ResourceType, name: str, ns: str | None = NS, within: float = 5.0) -> None:
        async def check() -> bool:
            return await self.get(rt, name, ns) is None

        await eventually(check, within, f"{rt.plural} {name} to be deleted")

    async def delete(self, rt: ResourceType, name: str, policy: str = "", ns: str | None = NS) -> tuple[dict, int]:
        options = {"propagationPolicy": policy} if policy else None
        return await self.storage.delete(rt, ns if rt.namespaced else None, name, options)


def ref(obj: dict[str, Any], block: bool | None = None, controller: bool | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
                         "uid": obj["metadata"]["uid"]}
    if block is not None:
        r["blockOwnerDeletion"] = block
    if controller is not None:
        r["controller"] = controller
    return r


def owner_uids(obj: dict[str, Any] | None) -> list[str]:
    assert obj is not None
    return [r["uid"] for r in obj["metadata"].get("ownerReferences") or []]


async def _stop_wired_collectors(server: ApiServer) -> None:
    """If ApiServer starts a collector itself, stop it: these tests control their own."""
    for value in list(vars(server).values()):
        if isinstance(value, GarbageCollector):
            await value.stop()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    srv = ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path, write_kubeconfig=False))
    await srv.start()
    await _stop_wired_collectors(srv)
    try:
        yield srv
    finally:
        await srv.stop()


@pytest.fixture
async def gc(server: ApiServer) -> AsyncIterator[GarbageCollector]:
    assert server.storage is not None
    collector = GarbageCollector(server.storage)
    await collector.start()
    try:
        yield collector
    finally:
        await collector.stop()


@pytest.fixture
def api(server: ApiServer) -> Api:
    assert server.storage is not None
    return Api(server.storage)


# ============================================================================================ background


async def test_background_cascade_over_three_levels(api: Api, gc: GarbageCollector) -> None:
    deploy_rt, rs_rt, pod_rt = api.rt("apps", "v1", "deployments"), api.rt("apps", "v1", "replicasets"), \
        api.rt("", "v1", "pods")
    # a dependent whose owner's kind nobody serves is never collected (kube cannot look the owner up)
    unknown = {"apiVersion": "example.com/v1", "kind": "Nothing", "name": "x", "uid": str(uuid.uuid4())}
    stray = await api.create(api.cm, "stray", [unknown])

    deploy = await api.create(deploy_rt, "web")
    rs1 = await api.create(rs_rt, "web-1", [ref(deploy, block=True, controller=True)])
    rs2 = await api.create(rs_rt, "web-2", [ref(deploy, block=True, controller=True)])
    pods = [await api.create(pod_rt, f"web-{i}-p{j}", [ref(rs, block=True, controller=True)])
            for i, rs in ((1, rs1), (2, rs2)) for j in range(3)]
    bystander = await api.create(api.cm, "bystander")

    body, code = await api.delete(deploy_rt, "web")
    assert code == 200 and body["kind"] == "Status"
    for rs in (rs1, rs2):
        await api.gone(rs_rt, rs["metadata"]["name"])
    for pod in pods:
        await api.gone(pod_rt, pod["metadata"]["name"])
    assert await api.get(api.cm, "bystander") == bystander
    assert await api.get(api.cm, "stray") == stray


async def test_dependent_created_for_an_absent_owner_is_collected(api: Api, gc: GarbageCollector) -> None:
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())}
    await api.create(api.cm, "orphaned-at-birth", [ghost])
    await api.gone(api.cm, "orphaned-at-birth")

    # the owner's name exists, but it is another object (another uid): still absent
    await api.create(api.cm, "ghost")
    await api.create(api.cm, "wrong-uid", [ghost])
    await api.gone(api.cm, "wrong-uid")
    assert await api.get(api.cm, "ghost") is not None


async def test_dependent_with_another_owner_survives_and_loses_the_reference(api: Api, gc: GarbageCollector) -> None:
    a = await api.create(api.cm, "owner-a")
    b = await api.create(api.cm, "owner-b")
    dep = await api.create(api.cm, "shared", [ref(a), ref(b)], labels={"keep": "me"})

    await api.delete(api.cm, "owner-a")

    async def only_b() -> bool:
        cur = await api.get(api.cm, "shared")
        return cur is not None and owner_uids(cur) == [b["metadata"]["uid"]]

    await eventually(only_b, what="the reference to owner-a to be removed")
    cur = await api.get(api.cm, "shared")
    assert cur is not None and cur["metadata"]["uid"] == dep["metadata"]["uid"]
    assert cur["metadata"]["labels"] == {"keep": "me"}

    await api.delete(api.cm, "owner-b")
    await api.gone(api.cm, "shared")


async def test_namespaced_owner_must_be_in_the_dependents_namespace(api: Api, server: ApiServer,
                                                                    gc: GarbageCollector) -> None:
    ns_rt = api.rt("", "v1", "namespaces")
    await api.create(ns_rt, "other")
    owner = await api.create(api.cm, "owner", ns="other")
    # same uid, but a namespaced owner in another namespace is not an owner: the dependent is collected
    await api.create(api.cm, "cross", [ref(owner)], ns=NS)
    await api.gone(api.cm, "cross", NS)
    assert await api.get(api.cm, "owner", "other") is not None


# ============================================================================================ foreground


async def test_foreground_waits_for_blocking_dependents(api: Api, gc: GarbageCollector) -> None:
    owner = await api.create(api.cm, "fg-owner")
    # the blocking dependent holds on with its own finalizer, so the owner has to wait visibly
    held = await api.create(api.cm, "fg-held", [ref(owner, block=True)], finalizers=["example.com/hold"])
    child = await api.create(api.cm, "fg-child", [ref(held, block=True)])
    plain = await api.create(api.cm, "fg-plain", [ref(owner)])  # deleted too, but does not block
    other = await api.create(api.cm, "fg-other-owner")
    kept = await api.create(api.cm, "fg-kept", [ref(owner, block=True), ref(other)])

    body, code = await api.delete(api.cm, "fg-owner", "Foreground")
    assert code == 202
    assert body["metadata"]["deletionTimestamp"] and "foregroundDeletion" in body["metadata"]["finalizers"]

    await api.gone(api.cm, "fg-plain")
    await api.gone(api.cm, "fg-child")

    async def held_terminating() -> bool:
        cur = await api.get(api.cm, "fg-held")
        return cur is not None and bool(cur["metadata"].get("deletionTimestamp"))

    await eventually(held_terminating, what="the blocking dependent to be deleted")

    async def kept_lost_owner() -> bool:
        return owner_uids(await api.get(api.cm, "fg-kept")) == [other["metadata"]["uid"]]

    await eventually(kept_lost_owner, what="the dependent with another owner to lose the reference")

    await settled(gc)
    cur = await api.get(api.cm, "fg-owner")
    assert cur is not None, "the owner must wait for its blocking dependent"
    assert cur["metadata"]["deletionTimestamp"] and cur["metadata"]["finalizers"] == ["foregroundDeletion"]

    # release the dependent: it goes, then the owner
    held_now = await api.get(api.cm, "fg-held")
    assert held_now is not None
    held_now["metadata"]["finalizers"] = []
    await api.storage.update(api.cm, NS, "fg-held", held_now)
    await api.gone(api.cm, "fg-held")
    await api.gone(api.cm, "fg-owner")
    assert await api.get(api.cm, "fg-kept") is not None
    assert plain["metadata"]["uid"] and child["metadata"]["uid"] and kept["metadata"]["uid"]


async def test_foreground_cascades_through_a_chain(api: Api, gc: GarbageCollector) -> None:
    top = await api.create(api.cm, "top")
    mid = await api.create(api.cm, "mid", [ref(top, block=True)])
    await api.create(api.cm, "leaf", [ref(mid, block=True)])
    await api.delete(api.cm, "top", "Foreground")
    for name in ("leaf", "mid", "top"):
        await api.gone(api.cm, name)


async def test_foreground_without_dependents_deletes_at_once(api: Api, gc: GarbageCollector) -> None:
    await api.create(api.cm, "lonely")
    _, code = await api.delete(api.cm, "lonely", "Foreground")
    assert code == 202
    await api.gone(api.cm, "lonely")


# ============================================================================================ orphan


async def test_orphan_leaves_dependents_without_the_reference(api: Api, gc: GarbageCollector) -> None:
    owner = await api.create(api.cm, "or-owner")
    other = await api.create(api.cm, "or-other")
    d1 = await api.create(api.cm, "or-d1", [ref(owner, block=True, controller=True)])
    d2 = await api.create(api.cm, "or-d2", [ref(owner), ref(other)])
    grandchild = await api.create(api.cm, "or-gc", [ref(d1)])

    body, code = await api.delete(api.cm, "or-owner", "Orphan")
    assert code == 200 and "orphan" in body["metadata"]["finalizers"]
    await api.gone(api.cm, "or-owner")

    cur1, cur2 = await api.get(api.cm, "or-d1"), await api.get(api.cm, "or-d2")
    assert cur1 is not None and "ownerReferences" not in cur1["metadata"]
    assert cur1["metadata"]["uid"] == d1["metadata"]["uid"]
    assert cur2 is not None and owner_uids(cur2) == [other["metadata"]["uid"]]
    assert owner_uids(await api.get(api.cm, "or-gc")) == [d1["metadata"]["uid"]]
    await settled(gc)
    assert await api.get(api.cm, "or-d1") is not None and await api.get(api.cm, "or-gc") is not None
    assert grandchild["metadata"]["uid"] and d2["metadata"]["uid"]


# ============================================================================================ custom resources


def _crd(plural: str, kind: str, scope: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.gc.example.com"},
        "spec": {
            "group": "gc.example.com",
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object",
                                                         "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }


async def test_custom_resources_as_dependents_and_owners(api: Api, gc: GarbageCollector) -> None:
    crd_rt = api.rt("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    await api.storage.create(crd_rt, None, _crd("widgets", "Widget", "Namespaced"))
    await api.storage.create(crd_rt, None, _crd("fleets", "Fleet", "Cluster"))

    async def served() -> bool:
        return all(api.storage.types.lookup("gc.example.com", "v1", p) for p in ("widgets", "fleets"))

    await eventually(served, what="the CRDs to be served")
    widget_rt, fleet_rt = api.rt("gc.example.com", "v1", "widgets"), api.rt("gc.example.com", "v1", "fleets")

    # a custom resource owned by a built-in
    owner = await api.create(api.cm, "cr-owner")
    widget = await api.create(widget_rt, "w1", [ref(owner, block=True)])
    # a built-in owned (across scopes) by a cluster-scoped custom resource, which is owned by a built-in
    ns_owner = await api.create(api.rt("", "v1", "namespaces"), "fleet-home", ns=None)
    fleet = await api.create(fleet_rt, "f1", [ref(ns_owner)], ns=None)
    cm_of_fleet = await api.create(api.cm, "of-fleet", [ref(fleet)])
    # a cluster-scoped object cannot have a namespaced owner: such a reference never counts as absent
    invalid = await api.create(fleet_rt, "f-invalid", [ref(owner)], ns=None)

    await api.delete(api.cm, "cr-owner")
    await api.gone(widget_rt, "w1")
    assert widget["metadata"]["uid"]

    await api.delete(fleet_rt, "f1", ns=None)
    await api.gone(api.cm, "of-fleet")
    assert cm_of_fleet["metadata"]["uid"]

    await settled(gc)
    assert await api.get(fleet_rt, "f-invalid", None) == invalid


async def test_types_added_after_start_are_followed(api: Api, gc: GarbageCollector) -> None:
    owner = await api.create(api.cm, "late-owner")
    crd_rt = api.rt("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    await api.storage.create(crd_rt, None, _crd("gadgets", "Gadget", "Namespaced"))

    async def served() -> ResourceType | None:
        return api.storage.types.lookup("gc.example.com", "v1", "gadgets")

    gadget_rt = await eventually(served, what="the CRD to be served")
    g_owner = await api.create(gadget_rt, "g-owner")
    await api.create(gadget_rt, "g-child", [ref(owner)])
    await api.create(api.cm, "cm-child", [ref(g_owner)])

    await api.delete(gadget_rt, "g-owner")
    await api.gone(api.cm, "cm-child")
    await api.delete(api.cm, "late-owner")
    await api.gone(gadget_rt, "g-child")


# ============================================================================================ restart


async def test_resync_after_restart(api: Api, server: ApiServer) -> None:
    assert server.storage is not None
    first = GarbageCollector(server.storage)
    await first.start()
    owner = await api.create(api.cm, "rs-owner")
    await api.create(api.cm, "rs-dep", [ref(owner)])
    fg_owner = await api.create(api.cm, "rs-fg", finalizers=["foregroundDeletion"])
    await api.create(api.cm, "rs-fg-dep", [ref(fg_owner, block=True)])
    orphan_owner = await api.create(api.cm, "rs-orphan", finalizers=["orphan"])
    await api.create(api.cm, "rs-orphan-dep", [ref(orphan_owner)])
    await settled(first)
    await first.stop()
    assert not server.storage._gc_enabled

    # while no collector runs: an owner disappears, two get stuck on the collector's finalizers
    await api.delete(api.cm, "rs-owner")
    _, code = await api.delete(api.cm, "rs-fg")
    assert code == 200
    await api.delete(api.cm, "rs-orphan")
    for name in ("rs-dep", "rs-fg", "rs-fg-dep", "rs-orphan", "rs-orphan-dep"):
        assert await api.get(api.cm, name) is not None, name

    second = GarbageCollector(server.storage)
    await second.start()
    try:
        assert server.storage._gc_enabled
        await api.gone(api.cm, "rs-dep")
        await api.gone(api.cm, "rs-fg-dep")
        await api.gone(api.cm, "rs-fg")
        await api.gone(api.cm, "rs-orphan")
        orphaned = await api.get(api.cm, "rs-orphan-dep")
        assert orphaned is not None and "ownerReferences" not in orphaned["metadata"]
    finally:
        await second.stop()


async def test_without_collector_foreground_and_orphan_add_no_finalizer(api: Api) -> None:
    await api.create(api.cm, "no-gc")
    body, _ = await api.delete(api.cm, "no-gc", "Foreground")
    assert body["kind"] == "Status"
    assert await api.get(api.cm, "no-gc") is None


async def test_two_api_servers_on_one_store(api: Api, server: ApiServer, gc: GarbageCollector,
                                            tmp_path: Path) -> None:
    """Writes through another API server (no after_write here) reach the collector by watches, and two
    collectors on one store do not get in each other's way."""
    other = ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "b", write_kubeconfig=False),
                      store=server.store)
    await other.start()
    await _stop_wired_collectors(other)
    try:
        assert other.storage is not None
        api_b = Api(other.storage)
        owner = await api_b.create(api_b.cm, "x-owner")
        await api_b.create(api_b.cm, "x-dep", [ref(owner)])
        await api_b.delete(api_b.cm, "x-owner")
        await api.gone(api.cm, "x-dep")

        gc_b = GarbageCollector(other.storage)
        await gc_b.start()
        try:
            owners = [await api.create(api.cm, f"y-owner-{i}") for i in range(3)]
            for i, o in enumerate(owners):
                for j in range(5):
                    await api_b.create(api_b.cm, f"y-dep-{i}-{j}", [ref(o, block=True)])
            await api_b.delete(api_b.cm, "y-owner-0", "Foreground")
            await api.delete(api.cm, "y-owner-1", "Orphan")
            await api_b.delete(api_b.cm, "y-owner-2")
            for i in range(3):
                await api.gone(api.cm, f"y-owner-{i}")
            for j in range(5):
                await api.gone(api.cm, f"y-dep-0-{j}")
                await api.gone(api.cm, f"y-dep-2-{j}")
                kept = await api.get(api.cm, f"y-dep-1-{j}")
                assert kept is not None and "ownerReferences" not in kept["metadata"]
        finally:
            await gc_b.stop()
    finally:
        await other.stop()


async def test_odd_objects_do_not_disturb_the_collector(api: Api, gc: GarbageCollector) -> None:
    assert owner_refs_of({}) == []
    assert owner_refs_of({"metadata": None}) == []
    assert owner_refs_of({"metadata": {"ownerReferences": "x"}}) == []
    assert owner_refs_of({"metadata": {"ownerReferences": [1, None, {"uid": ""}, {"uid": 5}, {"uid": "u"}]}}) == [
        {"uid": "u"}]
    rt = api.cm
    prefix = rt.key_prefix(None)
    # events the watch could deliver from a store written by anything: none of them may break the graph
    for odd in ({}, {"metadata": []}, {"metadata": {"uid": 7}},
                {"metadata": {"uid": "odd-1", "name": "odd", "ownerReferences": [{"uid": "nobody", "kind": 3}]}},
                {"metadata": {"uid": "odd-2", "finalizers": "x", "deletionTimestamp": "now"}}):
        node = _node_of(prefix, rt, odd)
        if node is not None:
            gc._on_upsert(node)
            gc._on_deleted(node)
    owner = await api.create(api.cm, "after-odd")
    await api.create(api.cm, "after-odd-dep", [ref(owner)])
    await api.delete(api.cm, "after-odd")
    await api.gone(api.cm, "after-odd-dep")


async def test_a_modification_that_leaves_owners_and_deletion_state_alone_does_not_rebuild_the_node(
        api: Api, gc: GarbageCollector) -> None:
    owner = await api.create(api.cm, "owner")
    other = await api.create(api.cm, "other")
    dep = await api.create(api.cm, "dep", [ref(owner)])
    uid = dep["metadata"]["uid"]

    async def node_built() -> bool:
        return uid in gc.nodes

    await eventually(node_built, what="the dependent's node")
    node = gc.nodes[uid]
    # a label and data change: the same node object stays (nothing rebuilt, nothing queued)
    await api.storage.patch(api.cm, NS, "dep", "application/merge-patch+json",
                            {"metadata": {"labels": {"x": "1"}}, "data": {"k": "v"}})
    await api.storage.patch(api.cm, NS, "dep", "application/merge-patch+json", {"data": {"k": "w"}})
    await settled(gc)
    await asyncio.sleep(0.05)
    assert gc.nodes[uid] is node
    # a new owner reference is seen
    await api.storage.patch(api.cm, NS, "dep", "application/merge-patch+json",
                            {"metadata": {"ownerReferences": [ref(owner), ref(other)]}})

    async def two_owners() -> bool:
        return len(gc.nodes[uid].owners) == 2

    await eventually(two_owners, what="the new owner reference")
    assert uid in gc.dependents[other["metadata"]["uid"]]
    # and a change back to the earlier references too (compared with the last event, not the first)
    await api.storage.patch(api.cm, NS, "dep", "application/merge-patch+json",
                            {"metadata": {"ownerReferences": [ref(owner)]}})

    async def one_owner() -> bool:
        return len(gc.nodes[uid].owners) == 1

    await eventually(one_owner, what="the reference removed")
    assert other["metadata"]["uid"] not in gc.dependents
    # finalizers and deletion are seen as well: deleting the owner collects the dependent as before
    await api.delete(api.cm, "owner")
    await api.gone(api.cm, "dep")


async def test_events_are_ignored_as_by_kubernetes_garbage_collector(api: Api, gc: GarbageCollector) -> None:
    event_rt = api.rt("", "v1", "events")
    owner = await api.create(api.cm, "owner")
    event = await api.storage.create(event_rt, NS, {
        "metadata": {"name": "owner.1", "ownerReferences": [ref(owner)]},
        "involvedObject": {"kind": "ConfigMap", "name": "owner", "namespace": NS}, "reason": "R", "message": "m"})
    dep = await api.create(api.cm, "dep", [ref(owner)])
    await api.delete(api.cm, "owner")
    await api.gone(api.cm, "dep")
    await settled(gc)
    assert event["metadata"]["uid"] not in gc.nodes
    assert await api.get(event_rt, "owner.1") is not None  # kube-controller-manager leaves Events to their TTL
    assert dep["metadata"]["uid"] not in gc.nodes
