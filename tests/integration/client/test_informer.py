"""Informers against real API servers: sync, handlers, indexes, resume, 410 re-list, reconnects."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flotilla.apiserver.inprocess import in_process_client
from flotilla.client import Client, Informer, SharedInformerFactory, label_indexer, object_key
from flotilla.kube.resources import CONFIGMAPS, NAMESPACES, SECRETS
from tests.integration.client.conftest import Env, LocalServer, make_namespace
from tests.support.apiserver import ServerProcess

FAST = {"backoff": (0.05, 0.3)}


def cm(name: str, team: str = "", data: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name}, "data": data or {}}
    if team:
        obj["metadata"]["labels"] = {"team": team}
    return obj


async def eventually(cond: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.01)


class Recorder:
    """Handlers that write down (event, key[, detail]); on_update is a coroutine function on purpose."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.updates: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def on_add(self, obj: dict[str, Any]) -> None:
        self.events.append(("add", object_key(obj)))

    async def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        self.events.append(("update", object_key(new)))
        self.updates.append((old, new))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.events.append(("delete", object_key(obj)))

    def register(self, inf: Informer) -> Recorder:
        inf.add_handler(self.on_add, self.on_update, self.on_delete)
        return self

    def of(self, kind: str) -> list[str]:
        return [k for e, k in self.events if e == kind]


async def test_sync_handlers_and_indexes(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    for name, team in (("a", "red"), ("b", "blue"), ("c", "red"), ("d", ""), ("e", "blue")):
        await c.create(CONFIGMAPS, cm(name, team), ns)
    inf = Informer(c, CONFIGMAPS, ns, page_size=2, **FAST)  # three pages
    inf.add_indexer("team", label_indexer("team"))
    rec = Recorder().register(inf)
    inf.start()
    try:
        assert await inf.wait_synced(5)
        assert inf.has_synced and inf.stats.lists == 1
        assert sorted(rec.of("add")) == [f"{ns}/{n}" for n in "abcde"]
        assert sorted(inf.store.keys()) == [f"{ns}/{n}" for n in "abcde"]
        assert inf.store.get(f"{ns}/a")["kind"] == "ConfigMap"  # list items carry kind/apiVersion too
        assert inf.store.get_by_name("a", ns) is inf.store.get(f"{ns}/a")
        assert [o["metadata"]["name"] for o in inf.store.by_index("team", "red")] == ["a", "c"]
        assert len(inf.store.by_index("namespace", ns)) == 5
        assert inf.store.index_values("team") == ["blue", "red"]

        rec.events.clear()
        await c.create(CONFIGMAPS, cm("f", "red"), ns)
        await c.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"team": "blue"}}}, namespace=ns)
        await c.delete(CONFIGMAPS, "b", ns)
        await eventually(lambda: len(rec.events) == 3, what="three events")
        assert rec.events == [("add", f"{ns}/f"), ("update", f"{ns}/a"), ("delete", f"{ns}/b")]
        old, new = rec.updates[-1]
        assert old["metadata"]["labels"] == {"team": "red"} and new["metadata"]["labels"] == {"team": "blue"}
        assert [o["metadata"]["name"] for o in inf.store.by_index("team", "red")] == ["c", "f"]
        assert [o["metadata"]["name"] for o in inf.store.by_index("team", "blue")] == ["a", "e"]
        assert f"{ns}/b" not in inf.store and len(inf.store) == 5
        assert inf.resource_version == new["metadata"]["resourceVersion"] or int(inf.resource_version) > int(
            new["metadata"]["resourceVersion"])
    finally:
        await inf.stop()
    assert not inf.running


async def test_late_handler_is_replayed_the_cache_then_gets_live_events(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    await c.create(CONFIGMAPS, cm("x"), ns)
    await c.create(CONFIGMAPS, cm("y"), ns)
    inf = Informer(c, CONFIGMAPS, ns, **FAST)
    inf.start()
    try:
        assert await inf.wait_synced(5)
        late = Recorder().register(inf)
        await c.create(CONFIGMAPS, cm("z"), ns)
        await eventually(lambda: len(late.events) == 3)
        assert sorted(late.events[:2]) == [("add", f"{ns}/x"), ("add", f"{ns}/y")]
        assert late.events[2] == ("add", f"{ns}/z")
    finally:
        await inf.stop()


async def test_resync_redelivers_cached_objects(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    await c.create(CONFIGMAPS, cm("r"), ns)
    inf = Informer(c, CONFIGMAPS, ns, resync=0.3, **FAST)
    rec = Recorder().register(inf)
    inf.start()
    try:
        await eventually(lambda: len(rec.of("update")) >= 2, what="two resyncs")
        old, new = rec.updates[0]
        assert old is new
    finally:
        await inf.stop()


async def test_watch_is_resumed_when_the_server_ends_it(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    inf = Informer(c, CONFIGMAPS, ns, watch_timeout=1, **FAST)
    rec = Recorder().register(inf)
    inf.start()
    try:
        assert await inf.wait_synced(5)
        await eventually(lambda: inf.stats.watches >= 3, timeout=6, what="three watch requests")
        await c.create(CONFIGMAPS, cm("after-resume"), ns)
        await eventually(lambda: rec.events == [("add", f"{ns}/after-resume")])
        assert inf.stats.lists == 1 and inf.stats.gone == 0  # resumed from the last RV, never re-listed
        assert inf.stats.bookmarks >= 1
    finally:
        await inf.stop()


async def test_shared_informer_factory_dedupes(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    f = SharedInformerFactory(c, **FAST)
    a = f.informer(CONFIGMAPS, ns)
    assert f.informer(CONFIGMAPS, ns) is a
    assert f.informer(CONFIGMAPS, ns, label_selector="team=red") is not a
    assert f.informer(NAMESPACES, "ignored-for-cluster-scoped") is f.informer(NAMESPACES)
    f.start()
    late = f.informer(SECRETS, ns)  # made after start: starts at once
    try:
        assert await f.wait_for_sync(5)
        assert late.has_synced and len(f.informers) == 4
        assert ns in f.informer(NAMESPACES).store
    finally:
        await f.stop()
    assert not any(i.running for i in f.informers)


async def test_relist_after_410_while_the_server_was_away(local_server: LocalServer) -> None:
    """The server goes down; meanwhile objects change and history is compacted; the informer's resume gets
    410 Expired, it re-lists, and its handlers hear exactly what changed."""
    async with Client.from_kubeconfig(local_server.kubeconfig) as c, in_process_client(
            local_server.storage) as direct:
        for name in ("keep", "change", "remove"):
            await c.create(CONFIGMAPS, cm(name), "default")
        inf = Informer(c, CONFIGMAPS, "default", **FAST)
        rec = Recorder().register(inf)
        inf.start()
        try:
            assert await inf.wait_synced(5)
            rec.events.clear()
            await local_server.stop()
            await eventually(lambda: inf.stats.connection_errors >= 1, what="a failed reconnect")

            await direct.create(CONFIGMAPS, cm("new"), "default")
            await direct.patch(CONFIGMAPS, "change", {"data": {"v": "2"}}, namespace="default")
            await direct.delete(CONFIGMAPS, "remove", "default")
            await direct.create(CONFIGMAPS, cm("flash"), "default")  # created and deleted while away: unseen
            await direct.delete(CONFIGMAPS, "flash", "default")
            await local_server.compact()

            await local_server.start()  # same port, same store
            await eventually(lambda: inf.stats.lists == 2, what="a re-list")
            await eventually(lambda: len(rec.events) == 3, what="three handler calls")
            assert sorted(rec.events) == [("add", "default/new"), ("delete", "default/remove"),
                                          ("update", "default/change")]
            assert inf.stats.gone >= 1
            assert sorted(inf.store.keys()) == ["default/change", "default/keep", "default/new"]
            assert inf.store.get("default/change")["data"] == {"v": "2"}

            await c.create(CONFIGMAPS, cm("later"), "default")  # and it keeps watching
            await eventually(lambda: "default/later" in inf.store)
        finally:
            await inf.stop()


async def test_reconnect_resumes_without_relist_when_history_allows(local_server: LocalServer) -> None:
    async with Client.from_kubeconfig(local_server.kubeconfig) as c, in_process_client(
            local_server.storage) as direct:
        inf = Informer(c, CONFIGMAPS, "default", **FAST)
        rec = Recorder().register(inf)
        inf.start()
        try:
            assert await inf.wait_synced(5)
            await local_server.stop()
            await direct.create(CONFIGMAPS, cm("while-down"), "default")
            await eventually(lambda: inf.stats.connection_errors >= 2, what="failed reconnects")
            await local_server.start()
            await eventually(lambda: rec.events == [("add", "default/while-down")])
            assert inf.stats.lists == 1 and inf.stats.gone == 0  # caught up through the watch alone
        finally:
            await inf.stop()


async def test_reconnect_to_a_killed_and_restarted_process(tmp_path: Path) -> None:
    """A real ``flotilla apiserver`` (SQLite) is SIGKILLed and started again on the same port."""
    proc = ServerProcess(tmp_path / "srv", storage_url="sqlite://").start()
    port = int(proc.url.rsplit(":", 1)[1])
    try:
        async with Client.from_kubeconfig(proc.kubeconfig) as c:
            await c.create(CONFIGMAPS, cm("before"), "default")
            inf = Informer(c, CONFIGMAPS, "default", **FAST)
            rec = Recorder().register(inf)
            inf.start()
            try:
                assert await inf.wait_synced(5)
                assert proc.proc is not None
                proc.proc.kill()
                proc.proc.wait(5)
                if proc.proc.stdout is not None:
                    proc.proc.stdout.close()
                await eventually(lambda: inf.stats.connection_errors >= 1, what="the crash to be noticed")
                await asyncio.to_thread(proc.start, port)
                await c.create(CONFIGMAPS, cm("after"), "default")
                await eventually(lambda: "default/after" in inf.store, timeout=10)
                assert rec.events == [("add", "default/before"), ("add", "default/after")]
            finally:
                await inf.stop()
    finally:
        proc.stop()
        if proc.proc is not None and proc.proc.stdout is not None:
            proc.proc.stdout.close()


@dataclasses.dataclass
class FakeServer:
    """A hand-written API server for one collection, for failure modes a real server never shows on cue.

    ``watch_modes`` is consumed one per watch request: "hang" (never answers), "silent" (200, then nothing),
    "gone-event" (an ERROR 410 event), "gone-http" (an HTTP 410 response), "events" (sends ``events``, then
    stays open). ``items``/``rv`` make the list response.
    """

    watch_modes: list[str]
    items: list[dict[str, Any]]
    rv: int = 10
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    watch_requests: list[dict[str, str]] = dataclasses.field(default_factory=list)
    list_requests: int = 0
    runner: Any = None
    url: str = ""

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        if request.query.get("watch") != "true":
            self.list_requests += 1
            return web.json_response({"kind": "ConfigMapList", "apiVersion": "v1",
                                      "metadata": {"resourceVersion": str(self.rv)}, "items": self.items})
        self.watch_requests.append(dict(request.query))
        mode = self.watch_modes.pop(0) if self.watch_modes else "silent"
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "gone-http":
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                                      "reason": "Expired", "message": "too old resource version"}, status=410)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        if mode == "gone-event":
            await resp.write(b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
                             b'"code":410,"reason":"Expired","message":"too old resource version"}}\n')
            return resp
        if mode == "events":
            import orjson

            for ev in self.events:
                await resp.write(orjson.dumps(ev) + b"\n")
        await asyncio.sleep(3600)
        return resp

    async def start(self) -> FakeServer:
        from aiohttp import web

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        await self.runner.cleanup()

    def client(self) -> Client:
        return Client.from_kubeconfig({
            "apiVersion": "v1", "kind": "Config", "current-context": "x",
            "clusters": [{"name": "c", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        })


def fake_cm(name: str, rv: int, uid: str = "") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv), "uid": uid or name}}


async def test_inactivity_timeout_replaces_dead_streams() -> None:
    fake = await FakeServer(watch_modes=["hang", "silent", "events"], items=[fake_cm("a", 5)],
                            events=[{"type": "ADDED", "object": fake_cm("b", 11)}]).start()
    try:
        async with fake.client() as c:
            inf = Informer(c, CONFIGMAPS, "default", inactivity_timeout=0.3, **FAST)
            rec = Recorder().register(inf)
            loop = asyncio.get_running_loop()
            started = loop.time()
            inf.start()
            try:
                await eventually(lambda: "default/b" in inf.store, what="the event on the third stream")
                assert 0.6 <= loop.time() - started < 3
                assert inf.stats.inactivity_restarts == 2 and inf.stats.lists == 1
                assert rec.events == [("add", "default/a"), ("add", "default/b")]
                assert [q["resourceVersion"] for q in fake.watch_requests] == ["10", "10", "10"]
                assert all(q.get("allowWatchBookmarks") == "true" for q in fake.watch_requests)
            finally:
                await inf.stop()
    finally:
        await fake.stop()


@pytest.mark.parametrize("mode", ["gone-event", "gone-http"])
async def test_gone_relists_and_reports_the_difference(mode: str) -> None:
    fake = await FakeServer(watch_modes=[mode], items=[fake_cm("same", 3), fake_cm("changed", 4),
                                                       fake_cm("removed", 5), fake_cm("recreated", 6)]).start()
    try:
        async with fake.client() as c:
            inf = Informer(c, CONFIGMAPS, "default", **FAST)
            rec = Recorder().register(inf)
            # the second list: one changed, one gone, one new, one deleted and created again (new uid)
            first_list_seen = asyncio.Event()
            inf.add_handler(on_add=lambda obj: first_list_seen.set())
            inf.start()
            try:
                await first_list_seen.wait()
                fake.items = [fake_cm("same", 3), fake_cm("changed", 40), fake_cm("added", 41),
                              fake_cm("recreated", 42, uid="other")]
                fake.rv = 50
                await eventually(lambda: inf.stats.lists == 2, what="the re-list")
                await eventually(lambda: len(rec.events) == 9)
                assert sorted(rec.events[4:]) == sorted([
                    ("delete", "default/removed"), ("update", "default/changed"), ("add", "default/added"),
                    ("delete", "default/recreated"), ("add", "default/recreated")])
                assert inf.stats.gone == 1 and inf.resource_version == "50"
                await eventually(lambda: len(fake.watch_requests) == 2)
                assert fake.watch_requests[1]["resourceVersion"] == "50"
            finally:
                await inf.stop()
    finally:
        await fake.stop()


async def test_transform_keeps_only_what_it_returns_in_the_cache_and_in_the_handlers(env: Env) -> None:
    c = env.client
    ns = await make_namespace(c)
    await c.create(CONFIGMAPS, cm("listed", data={"big": "x" * 1000}), ns)

    def slim(obj: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": obj["metadata"], "size": len((obj.get("data") or {}).get("big", ""))}

    inf = Informer(c, CONFIGMAPS, ns, transform=slim, **FAST)
    rec = Recorder().register(inf)
    inf.start()
    try:
        assert await inf.wait_synced(5)
        assert inf.store.get(f"{ns}/listed") == {"metadata": inf.store.get(f"{ns}/listed")["metadata"], "size": 1000}
        await c.create(CONFIGMAPS, cm("watched", data={"big": "y" * 10}), ns)
        await eventually(lambda: f"{ns}/watched" in inf.store, what="the watched ConfigMap")
        assert inf.store.get(f"{ns}/watched")["size"] == 10 and "data" not in inf.store.get(f"{ns}/watched")
        await c.patch(CONFIGMAPS, "watched", {"data": {"big": "z"}}, namespace=ns)
        await eventually(lambda: inf.store.get(f"{ns}/watched")["size"] == 1, what="the update")
        assert rec.updates[-1][1] == inf.store.get(f"{ns}/watched")
    finally:
        await inf.stop()
