"""The in-process transport's ownership rule: what the caller gets back is its own, watch events are shared and
immutable, and no write of the server's ever changes an object it handed out (a watch event's, or one
returned earlier)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from flotilla.apiserver.inprocess import in_process_client
from flotilla.client import WatchEvent
from flotilla.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES
from tests.integration.client.conftest import LocalServer


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}, "annotations": {"a": "1"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}},
    }


async def _next(watch: Any) -> WatchEvent:
    while True:
        ev = await asyncio.wait_for(anext(watch), 5.0)
        if ev.type != "BOOKMARK":
            return ev


async def test_watch_events_are_shared_and_no_write_changes_them(local_server: LocalServer) -> None:
    async with in_process_client(local_server.storage) as c:
        await c.create(NAMESPACES, {"metadata": {"name": "own"}})
        w1 = c.watch(DEPLOYMENTS, "own", resource_version="1")
        w2 = c.watch(DEPLOYMENTS, "own", resource_version="1")
        try:
            created = await c.create(DEPLOYMENTS, deployment("d"), "own")
            e1, e2 = await _next(w1), await _next(w2)
            assert e1.object is e2.object  # decoded once, shared by both watchers
            seen = [e1.object]
            rv = created["metadata"]["resourceVersion"]
            # every kind of write, each against the object the watchers hold now
            writes = [
                lambda: c.patch(DEPLOYMENTS, "d", {"spec": {"replicas": 2}}, namespace="own"),
                lambda: c.patch(DEPLOYMENTS, "d", {"status": {"replicas": 2, "conditions": [{"type": "A", "status": "True"}]}},
                                namespace="own", subresource="status"),
                lambda: c.patch(DEPLOYMENTS, "d", {"metadata": {"labels": {"x": "y"}}, "status": {"replicas": 9}},
                                namespace="own"),  # a status in a main-resource patch is ignored
                lambda: c.patch(DEPLOYMENTS, "d", [{"op": "replace", "path": "/spec/replicas", "value": 3}],
                                namespace="own", patch_type="json"),
                lambda: c.patch(DEPLOYMENTS, "d", {"metadata": {"annotations": {"b": "2"}}}, namespace="own",
                                patch_type="strategic"),
            ]
            for write in writes:
                before = [copy.deepcopy(o) for o in seen]
                result = await write()
                assert result["metadata"]["resourceVersion"] != rv
                rv = result["metadata"]["resourceVersion"]
                ev = await _next(w1)
                assert (await _next(w2)).object is ev.object
                # the caller's result is its own: changing it changes nothing anywhere
                result["spec"]["template"]["spec"]["containers"].clear()
                result.setdefault("status", {})["mutated"] = True
                result["metadata"]["labels"]["mutated"] = "yes"
                assert seen == before, "a write changed an object a watcher already had"
                seen.append(ev.object)
            got = await c.get(DEPLOYMENTS, "d", "own")
            got["metadata"]["labels"]["mutated"] = "yes"
            current = await c.get(DEPLOYMENTS, "d", "own")
            assert current == seen[-1]
            assert "mutated" not in current["metadata"]["labels"]
            assert current["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
            assert current["status"] == {"replicas": 2, "conditions": [{"type": "A", "status": "True"}]}

            # a full update that keeps the stored status, then a no-op update: both results are the caller's
            body = copy.deepcopy(current)
            body["spec"]["replicas"] = 5
            before = [copy.deepcopy(o) for o in seen]
            updated = await c.update(DEPLOYMENTS, body)
            updated["status"]["conditions"].clear()
            ev = await _next(w1)
            assert ev.object["status"]["conditions"] == [{"type": "A", "status": "True"}]
            await _next(w2)
            seen.append(ev.object)
            same = await c.update(DEPLOYMENTS, copy.deepcopy(ev.object))  # changes nothing: no new revision
            assert same["metadata"]["resourceVersion"] == ev.object["metadata"]["resourceVersion"]
            same["status"]["conditions"].clear()
            same["spec"]["replicas"] = 0
            assert seen[:-1] == before
            assert seen[-1]["status"]["conditions"] == [{"type": "A", "status": "True"}] and seen[-1]["spec"]["replicas"] == 5
        finally:
            await w1.aclose()
            await w2.aclose()


async def test_bodies_are_copied_in_and_deleted_objects_are_the_callers(local_server: LocalServer) -> None:
    async with in_process_client(local_server.storage) as c:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "finalizers": ["x.io/hold"]},
                "data": {"k": ("tuple", "becomes", "list")}}
        sent = copy.deepcopy(body)
        w = c.watch(CONFIGMAPS, "default", resource_version="1")
        try:
            try:
                await c.create(CONFIGMAPS, body, "default")
            except Exception:  # data values must be strings: the server says so, as it would over HTTP
                pass
            assert body == sent  # the caller's dict is untouched either way
            body["data"] = {"k": "v"}
            created = await c.create(CONFIGMAPS, body, "default")
            assert body["metadata"] == sent["metadata"]
            ev = await _next(w)
            held = await c.delete(CONFIGMAPS, "cm", "default")  # a finalizer holds it: the object comes back
            assert held["metadata"]["deletionTimestamp"]
            held["metadata"]["finalizers"].clear()
            modified = await _next(w)
            assert modified.object["metadata"]["finalizers"] == ["x.io/hold"]
            assert ev.object["metadata"].get("deletionTimestamp") is None
            assert created["data"] == {"k": "v"}
        finally:
            await w.aclose()


async def test_in_process_watch_hands_out_ready_events_without_waiting(local_server: LocalServer) -> None:
    async with in_process_client(local_server.storage) as c:
        await c.create(NAMESPACES, {"metadata": {"name": "ready"}})
        w = c.watch(CONFIGMAPS, "ready", resource_version="1")
        try:
            assert w.ready() is None  # not open yet: the first read opens it
            first = await c.create(CONFIGMAPS, {"metadata": {"name": "a"}}, "ready")
            ev = await _next(w)
            assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "a")
            assert w.ready() is None  # nothing more yet
            await c.patch(CONFIGMAPS, "a", {"data": {"k": "1"}}, namespace="ready")
            await c.delete(CONFIGMAPS, "a", "ready")
            got = [w.ready(), w.ready(), w.ready()]
            assert [(e.type, e.object["metadata"]["name"]) for e in got if e is not None] == [
                ("MODIFIED", "a"), ("DELETED", "a")]
            assert got[2] is None
            assert int(got[1].object["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
            # a later write is read by __anext__ as before
            await c.create(CONFIGMAPS, {"metadata": {"name": "b"}}, "ready")
            ev = await _next(w)
            assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "b")
        finally:
            await w.aclose()
