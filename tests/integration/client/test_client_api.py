"""The async client against a real API server, over HTTP (ServerThread) and in-process (same assertions)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from flotilla.apiserver.inprocess import in_process_client
from flotilla.client import (
    ApiException,
    WatchEvent,
    is_already_exists,
    is_conflict,
    is_gone,
    is_invalid,
    is_not_found,
)
from flotilla.kube.resources import CONFIGMAPS, CRDS, DEPLOYMENTS, NAMESPACES, Resource
from tests.integration.client.conftest import Env, make_namespace


def cm(name: str, data: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                           "data": data or {}}
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
            },
        },
    }


async def test_create_get_update_list_delete(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    created = await c.create(CONFIGMAPS, cm("one", {"k": "v"}), ns)
    md = created["metadata"]
    assert md["namespace"] == ns and md["uid"] and md["resourceVersion"]
    got = await c.get(CONFIGMAPS, "one", ns)
    assert got == created

    got["data"]["k"] = "v2"
    updated = await c.update(CONFIGMAPS, got)
    assert updated["data"] == {"k": "v2"}
    assert int(updated["metadata"]["resourceVersion"]) > int(md["resourceVersion"])

    listed = await c.list(CONFIGMAPS, ns)
    assert listed["kind"] == "ConfigMapList" and listed["metadata"]["resourceVersion"]
    assert [o["metadata"]["name"] for o in listed["items"]] == ["one"]

    status = await c.delete(CONFIGMAPS, "one", ns)
    assert status["kind"] == "Status" and status["status"] == "Success"
    with pytest.raises(ApiException) as err:
        await c.get(CONFIGMAPS, "one", ns)
    assert is_not_found(err.value) and err.value.status == 404 and err.value.reason == "NotFound"
    assert err.value.body is not None and err.value.body["kind"] == "Status"


async def test_namespace_comes_from_the_object_and_is_required(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    obj = cm("from-body")
    obj["metadata"]["namespace"] = ns
    assert (await c.create(CONFIGMAPS, obj))["metadata"]["namespace"] == ns
    with pytest.raises(ValueError):
        await c.create(CONFIGMAPS, cm("nowhere"))
    with pytest.raises(ValueError):
        await c.get(CONFIGMAPS, "from-body")


async def test_get_or_none_answers_none_for_a_missing_object_and_raises_other_errors(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    assert await c.get_or_none(CONFIGMAPS, "absent", ns) is None
    await c.create(CONFIGMAPS, cm("present"), ns)
    assert (await c.get_or_none(CONFIGMAPS, "present", ns) or {})["metadata"]["name"] == "present"
    with pytest.raises(ValueError):  # any other error is the caller's: here a namespaced kind without namespace
        await c.get_or_none(CONFIGMAPS, "present")


async def test_errors_are_classified(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    first = await c.create(CONFIGMAPS, cm("dup"), ns)
    with pytest.raises(ApiException) as err:
        await c.create(CONFIGMAPS, cm("dup"), ns)
    assert is_already_exists(err.value) and not is_conflict(err.value) and err.value.status == 409

    await c.patch(CONFIGMAPS, "dup", {"data": {"x": "1"}}, namespace=ns)
    with pytest.raises(ApiException) as err:
        await c.update(CONFIGMAPS, first)  # stale resourceVersion
    assert is_conflict(err.value) and err.value.reason == "Conflict"

    with pytest.raises(ApiException) as err:
        await c.create(CONFIGMAPS, cm("Not_A_Valid_Name"), ns)
    assert is_invalid(err.value) and err.value.status == 422
    assert err.value.body and err.value.body["details"]["causes"]

    with pytest.raises(ApiException) as err:
        await c.get(Resource("example.com", "v1", "nothings", "Nothing", True), "x", ns)
    assert is_not_found(err.value)

    with pytest.raises(ApiException) as err:
        await c.create(CONFIGMAPS, cm("orphan"), "no-such-namespace")
    assert is_not_found(err.value) and "namespaces" in err.value.message


async def test_patch_types(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    await c.create(CONFIGMAPS, cm("p", {"a": "1", "b": "2"}), ns)
    merged = await c.patch(CONFIGMAPS, "p", {"data": {"b": None, "c": "3"}}, namespace=ns)
    assert merged["data"] == {"a": "1", "c": "3"}
    jsoned = await c.patch(CONFIGMAPS, "p", [{"op": "replace", "path": "/data/a", "value": "9"}],
                           namespace=ns, patch_type="json")
    assert jsoned["data"]["a"] == "9"
    applied = await c.patch(CONFIGMAPS, "applied", {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": "applied"}, "data": {"z": "1"}},
                            namespace=ns, patch_type="apply", field_manager="tests", force=True)
    assert applied["data"] == {"z": "1"}  # server-side apply creates

    await c.create(DEPLOYMENTS, deployment("web"), ns)
    smp = {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}}
    patched = await c.patch(DEPLOYMENTS, "web", smp, namespace=ns, patch_type="strategic")
    images = {x["name"]: x["image"] for x in patched["spec"]["template"]["spec"]["containers"]}
    assert images == {"a": "a:1", "b": "b:2"}  # merged by name, not replaced

    with pytest.raises(ApiException) as err:
        await c.patch(CONFIGMAPS, "p", {"metadata": {"resourceVersion": "1"}, "data": {"q": "1"}}, namespace=ns)
    assert is_conflict(err.value)


async def test_status_and_scale_subresources(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    created = await c.create(DEPLOYMENTS, deployment("d", replicas=2), ns)
    created["status"] = {"replicas": 2, "readyReplicas": 1}
    after_main = await c.update(DEPLOYMENTS, created)
    assert "status" not in after_main  # the main resource ignores status

    after_main["status"] = {"replicas": 2, "readyReplicas": 2}
    with_status = await c.update(DEPLOYMENTS, after_main, subresource="status")
    assert with_status["status"]["readyReplicas"] == 2
    patched = await c.patch(DEPLOYMENTS, "d", {"status": {"observedGeneration": 1}}, namespace=ns,
                            subresource="status")
    assert patched["status"] == {"replicas": 2, "readyReplicas": 2, "observedGeneration": 1}

    scale = await c.get(DEPLOYMENTS, "d", ns, subresource="scale")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
    scaled = await c.patch(DEPLOYMENTS, "d", {"spec": {"replicas": 5}}, namespace=ns, subresource="scale")
    assert scaled["spec"]["replicas"] == 5
    assert (await c.get(DEPLOYMENTS, "d", ns))["spec"]["replicas"] == 5


async def test_delete_finalizers_preconditions_dry_run(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    obj = cm("held")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    created = await c.create(CONFIGMAPS, obj, ns)

    with pytest.raises(ApiException) as err:
        await c.delete(CONFIGMAPS, "held", ns, preconditions={"uid": "not-the-uid"})
    assert is_conflict(err.value)

    dry = await c.delete(CONFIGMAPS, "held", ns, dry_run=True)
    assert dry["metadata"].get("deletionTimestamp")
    assert not (await c.get(CONFIGMAPS, "held", ns))["metadata"].get("deletionTimestamp")

    held = await c.delete(CONFIGMAPS, "held", ns, propagation_policy="Background",
                          preconditions={"uid": created["metadata"]["uid"]}, grace_period_seconds=0)
    assert held["kind"] == "ConfigMap" and held["metadata"]["deletionTimestamp"]
    await c.patch(CONFIGMAPS, "held", {"metadata": {"finalizers": None}}, namespace=ns)
    with pytest.raises(ApiException) as err:
        await c.get(CONFIGMAPS, "held", ns)
    assert is_not_found(err.value)

    assert (await c.create(CONFIGMAPS, cm("dry"), ns, dry_run=True))["metadata"]["name"] == "dry"
    with pytest.raises(ApiException):
        await c.get(CONFIGMAPS, "dry", ns)


async def test_list_pagination_and_selectors(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    for i in range(7):
        await c.create(CONFIGMAPS, cm(f"cm-{i}", labels={"parity": "even" if i % 2 == 0 else "odd"}), ns)
    names: list[str] = []
    cont = ""
    pages = 0
    rvs = set()
    while True:
        page = await c.list(CONFIGMAPS, ns, limit=3, continue_=cont)
        pages += 1
        rvs.add(page["metadata"]["resourceVersion"])
        names += [o["metadata"]["name"] for o in page["items"]]
        cont = page["metadata"].get("continue", "")
        if not cont:
            break
    assert pages == 3 and names == [f"cm-{i}" for i in range(7)]
    assert len(rvs) == 1  # every page is read at the first page's revision
    odd = await c.list(CONFIGMAPS, ns, label_selector="parity=odd")
    assert sorted(o["metadata"]["name"] for o in odd["items"]) == ["cm-1", "cm-3", "cm-5"]
    one = await c.list(CONFIGMAPS, ns, field_selector="metadata.name=cm-4")
    assert [o["metadata"]["name"] for o in one["items"]] == ["cm-4"]
    everywhere = await c.list(CONFIGMAPS, label_selector="parity in (even)")
    assert len([o for o in everywhere["items"] if o["metadata"]["namespace"] == ns]) == 4

    gone = await c.delete_collection(CONFIGMAPS, ns, label_selector="parity=even")
    assert len(gone["items"]) == 4
    assert len((await c.list(CONFIGMAPS, ns))["items"]) == 3


async def next_event(stream: Any, *, skip_bookmarks: bool = True, timeout: float = 5.0) -> WatchEvent:
    async with asyncio.timeout(timeout):
        while True:
            ev: WatchEvent = await stream.__anext__()
            if not (skip_bookmarks and ev.type == "BOOKMARK"):
                return ev


async def test_watch_events_bookmarks_and_timeout(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    await c.create(CONFIGMAPS, cm("before"), ns)
    rv = (await c.list(CONFIGMAPS, ns))["metadata"]["resourceVersion"]
    async with c.watch(CONFIGMAPS, ns, resource_version=rv, timeout_seconds=30) as w:
        await c.create(CONFIGMAPS, cm("w", {"a": "1"}), ns)
        await c.patch(CONFIGMAPS, "w", {"data": {"a": "2"}}, namespace=ns)
        await c.delete(CONFIGMAPS, "w", ns)
        seen = [await next_event(w) for _ in range(3)]
        assert [(e.type, e.object["metadata"]["name"]) for e in seen] == [
            ("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
        assert seen[1].object["data"] == {"a": "2"}
        rvs = [int(e.object["metadata"]["resourceVersion"]) for e in seen]
        assert rvs == sorted(rvs) and rvs[0] > int(rv)
        bookmark = await next_event(w, skip_bookmarks=False, timeout=5)  # idle: the server sends bookmarks
        assert bookmark.type == "BOOKMARK" and bookmark.object["kind"] == "ConfigMap"
        assert int(bookmark.object["metadata"]["resourceVersion"]) >= rvs[-1]

    # no resourceVersion: synthetic ADDED for what exists; timeout_seconds ends the stream
    loop = asyncio.get_running_loop()
    started = loop.time()
    events = []
    async with asyncio.timeout(10):
        async for ev in c.watch(CONFIGMAPS, ns, timeout_seconds=1, allow_bookmarks=False):
            events.append(ev)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "before")]
    assert 0.5 < loop.time() - started < 5


async def test_watch_label_selector(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    rv = (await c.list(CONFIGMAPS, ns))["metadata"]["resourceVersion"]
    async with c.watch(CONFIGMAPS, ns, resource_version=rv, label_selector="team=a") as w:
        await c.create(CONFIGMAPS, cm("b1", labels={"team": "b"}), ns)
        await c.create(CONFIGMAPS, cm("a1", labels={"team": "a"}), ns)
        ev = await next_event(w)
        assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "a1")


async def test_watch_from_a_compacted_revision_raises_gone(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    old_rv = (await c.create(CONFIGMAPS, cm("c"), ns))["metadata"]["resourceVersion"]
    await c.patch(CONFIGMAPS, "c", {"data": {"x": "1"}}, namespace=ns)
    await c.patch(CONFIGMAPS, "c", {"data": {"x": "2"}}, namespace=ns)
    await env.compact()
    with pytest.raises(ApiException) as err:
        async with c.watch(CONFIGMAPS, ns, resource_version=old_rv) as w:
            await next_event(w)
    assert is_gone(err.value) and err.value.reason == "Expired"


CRD_GROUP = "stable.example.com"


def crd(plural: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{CRD_GROUP}"},
        "spec": {
            "group": CRD_GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
            }],
        },
    }


async def test_discovery_builtins_and_crds_appearing_later(env: Env) -> None:
    c = env.client
    assert await c.resource_for("v1", "ConfigMap") == CONFIGMAPS
    assert await c.resource_for("apps/v1", "Deployment") == DEPLOYMENTS
    assert await c.resource("", "v1", "namespaces") == NAMESPACES
    assert await c.mapper.preferred_version("apps") == "v1"
    assert await c.mapper.preferred_version("") == "v1"

    suffix = uuid.uuid4().hex[:6]
    plural, kind = f"widgets{suffix}", f"Widget{suffix}"
    with pytest.raises(ApiException) as err:
        await c.resource_for(f"{CRD_GROUP}/v1", kind)
    assert is_not_found(err.value)

    await c.create(CRDS, crd(plural, kind))
    widgets = await c.resource_for(f"{CRD_GROUP}/v1", kind)
    assert widgets == Resource(CRD_GROUP, "v1", plural, kind, True)
    # a second CRD in a group-version that is cached by now: the miss refreshes it
    plural2, kind2 = f"gadgets{suffix}", f"Gadget{suffix}"
    await c.create(CRDS, crd(plural2, kind2))
    assert (await c.resource(CRD_GROUP, "v1", plural2)).kind == kind2

    ns = await make_namespace(c)
    obj = {"apiVersion": f"{CRD_GROUP}/v1", "kind": kind, "metadata": {"name": "w1"},
           "spec": {"size": 3, "nested": {"unknown": [1, {"deep": True}]}}}
    assert await c.resource_for_object(obj) == widgets
    await c.create(widgets, obj, ns)
    got = await c.get(widgets, "w1", ns)
    assert got["spec"] == obj["spec"]  # unknown fields round-trip
    # a strategic merge patch on a custom resource is applied as a merge patch (both transports)
    patched = await c.patch(widgets, "w1", {"spec": {"size": 4}}, namespace=ns, patch_type="strategic")
    assert patched["spec"]["size"] == 4 and patched["spec"]["nested"] == obj["spec"]["nested"]


async def test_concurrent_discovery_misses_share_one_request(env: Env) -> None:
    c = env.client
    calls = 0
    real = c.transport.discovery

    async def counting(path: str) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return await real(path)

    c.transport.discovery = counting  # type: ignore[method-assign]
    found = await asyncio.gather(*(c.resource_for("batch/v1", "Job") for _ in range(10)))
    assert len(set(found)) == 1 and calls == 1


async def test_in_process_objects_are_copies(tmp_path: Any, local_server: Any) -> None:
    async with in_process_client(local_server.storage) as c:
        body = cm("copied", {"a": "1"})
        created = await c.create(CONFIGMAPS, body, "default")
        assert "uid" not in body["metadata"]  # the caller's object is not touched
        created["data"]["a"] = "mutated"
        got = await c.get(CONFIGMAPS, "copied", "default")
        assert got["data"] == {"a": "1"}
        got["data"]["a"] = "mutated too"
        assert (await c.get(CONFIGMAPS, "copied", "default"))["data"] == {"a": "1"}
        listed = await c.list(CONFIGMAPS, "default")
        listed["items"][0]["data"].clear()
        assert (await c.get(CONFIGMAPS, "copied", "default"))["data"] == {"a": "1"}
