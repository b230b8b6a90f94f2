"""EtcdStore against a real etcd: the key layout, endpoint failover, stores sharing one etcd (HA API
servers), the Store interface semantics as etcd implements them, and the API server's reads and guarded writes that
start from the version the store last showed it (``resourceVersion=0`` reads, a 409 without a read)."""

from __future__ import annotations

import asyncio
import base64
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from flotilla.apiserver.builtin_kinds import BUILTIN_TYPES
from flotilla.apiserver.inprocess import InProcessTransport
from flotilla.apiserver.rest import ResourceStorage
from flotilla.apiserver.type_registry import TypeRegistry
from flotilla.client import ApiException, Client
from flotilla.kube.resources import CONFIGMAPS, NAMESPACES
from flotilla.runtime.patching import patch_with_retry
from flotilla.storage import (
    CompactedError,
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    WatchEvent,
    guaranteed_update,
    open_store,
)
from flotilla.storage.base import WatchClosedError, Watcher
from flotilla.storage.etcd import EtcdStore, EtcdUnavailableError

if str(Path(__file__).resolve().parents[3]) not in sys.path:  # ``tests.support`` however pytest was started
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.support.etcd_server import EtcdServer, free_ports, start_etcd, start_etcd_cluster

pytestmark = pytest.mark.etcd


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


@pytest.fixture
def prefix() -> str:
    return f"/t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def store(etcd: EtcdServer, prefix: str) -> AsyncIterator[EtcdStore]:
    s = await EtcdStore.open([etcd.endpoint], prefix=prefix)
    yield s
    await s.close()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def raw(etcd: EtcdServer, path: str, body: dict) -> dict:
    async with (
        aiohttp.ClientSession() as session,
        session.post(etcd.url + path, data=orjson.dumps(body)) as resp,
    ):
        assert resp.status == 200, await resp.text()
        return orjson.loads(await resp.read())


async def next_events(watcher: Watcher, n: int, within: float = 5.0) -> list[WatchEvent]:
    out: list[WatchEvent] = []

    async def take() -> None:
        async for ev in watcher:
            out.append(ev)
            if len(out) == n:
                return

    await asyncio.wait_for(take(), within)
    return out


def dead_endpoint() -> str:
    return f"127.0.0.1:{free_ports(1)[0]}"


# ---------------------------------------------------------------------------------- etcd specifics


async def test_keys_are_stored_verbatim_under_the_prefix(
    store: EtcdStore, etcd: EtcdServer, prefix: str
) -> None:
    value = b'{"kind":"Pod","metadata":{"name":"web"}}'
    rev = await store.create("/registry/pods/default/web", value)
    resp = await raw(etcd, "/v3/kv/range", {"key": b64(f"{prefix}/registry/pods/default/web".encode())})
    (kv,) = resp["kvs"]
    assert base64.b64decode(kv["value"]) == value
    assert int(kv["mod_revision"]) == rev == int(kv["create_revision"])
    # Nothing is written outside the prefix.
    outside = await raw(etcd, "/v3/kv/range", {"key": b64(b"/registry/pods/default/web")})
    assert "kvs" not in outside


async def test_raw_etcd_writes_are_seen_with_etcd_revisions(
    store: EtcdStore, etcd: EtcdServer, prefix: str
) -> None:
    put = await raw(etcd, "/v3/kv/put", {"key": b64(f"{prefix}/x".encode()), "value": b64(b"\x00\xffraw")})
    rev = int(put["header"]["revision"])
    kv = await store.get("/x")
    assert kv is not None
    assert (kv.key, kv.value, kv.create_revision, kv.mod_revision) == ("/x", b"\x00\xffraw", rev, rev)
    assert await store.current_revision() >= rev


async def test_resource_version_is_the_etcd_revision(store: EtcdStore, etcd: EtcdServer) -> None:
    before = int(
        (await raw(etcd, "/v3/kv/range", {"key": b64(b"\x00"), "count_only": True}))["header"]["revision"]
    )
    rev = await store.create("/a", b"1")
    assert rev == before + 1
    assert await store.current_revision() == rev


async def test_prefixes_isolate_stores(etcd: EtcdServer, prefix: str) -> None:
    a = await EtcdStore.open([etcd.endpoint], prefix=prefix + "/a")
    b = await EtcdStore.open([etcd.endpoint], prefix=prefix + "/b")
    try:
        await a.create("/k", b"from a")
        await b.create("/k", b"from b")
        assert (await a.get("/k")).value == b"from a"  # type: ignore[union-attr]
        assert [kv.value for kv in (await a.list("")).items] == [b"from a"]
        assert [kv.key for kv in (await b.list("/")).items] == ["/k"]
    finally:
        await a.close()
        await b.close()


async def test_one_dead_endpoint_is_skipped(etcd: EtcdServer, prefix: str) -> None:
    s = await EtcdStore.open([dead_endpoint(), etcd.endpoint], prefix=prefix)
    try:
        rev = await s.create("/k", b"v")
        assert (await s.get("/k")).mod_revision == rev  # type: ignore[union-attr]
        w = await s.watch("/", rev - 1)
        rev2 = await s.update("/k", b"w", rev)
        events = await next_events(w, 2)
        assert [e.revision for e in events] == [rev, rev2]
        await w.close()
    finally:
        await s.close()


async def test_etcd_url_with_dead_member_via_open_store(etcd: EtcdServer) -> None:
    s = await open_store(f"etcd://{dead_endpoint()},{etcd.endpoint}")
    try:
        assert await s.current_revision() > 0
    finally:
        await s.close()


async def test_all_endpoints_dead_fails_fast() -> None:
    t0 = time.monotonic()
    with pytest.raises(EtcdUnavailableError):
        await EtcdStore.open([dead_endpoint(), dead_endpoint()])
    assert time.monotonic() - t0 < 5


async def test_two_stores_share_one_etcd(etcd: EtcdServer, prefix: str) -> None:
    """Two API servers on one etcd: writes of one are read, listed and watched by the other."""
    a = await EtcdStore.open([etcd.endpoint], prefix=prefix)
    b = await EtcdStore.open([etcd.endpoint], prefix=prefix)
    try:
        watcher = await b.watch("/registry/")
        r1 = await a.create("/registry/pods/ns/p1", b"v1")
        got = await b.get("/registry/pods/ns/p1")
        assert got is not None and got.mod_revision == r1
        r2 = await a.update("/registry/pods/ns/p1", b"v2", r1)
        with pytest.raises(ConflictError) as exc:
            await b.update("/registry/pods/ns/p1", b"stale", r1)  # b's CAS sees a's write
        assert exc.value.actual == r2
        r3, last = await b.delete("/registry/pods/ns/p1", r2)
        assert last.value == b"v2"
        events = await next_events(watcher, 3)
        assert [(e.type, e.revision, e.is_create) for e in events] == [
            ("PUT", r1, True),
            ("PUT", r2, False),
            ("DELETE", r3, False),
        ]
        assert events[2].value == b"v2" and events[2].create_revision == r1
        assert (await a.list("/registry/")).items == []
        await watcher.close()
    finally:
        await a.close()
        await b.close()


async def test_compaction_by_another_client_is_discovered(etcd: EtcdServer, prefix: str) -> None:
    a = await EtcdStore.open([etcd.endpoint], prefix=prefix)
    b = await EtcdStore.open([etcd.endpoint], prefix=prefix)
    try:
        r1 = await a.create("/k", b"1")
        r2 = await a.update("/k", b"2", r1)
        await a.update("/k", b"3", r2)
        await a.compact(r2)
        assert await b.compacted_revision() == r2  # b never compacted: found by probing
        with pytest.raises(CompactedError) as exc:
            await b.watch("/", r1)
        assert exc.value.compacted == r2
        with pytest.raises(CompactedError):
            await b.list("/", revision=r1)
        assert [kv.value for kv in (await b.list("/", revision=r2)).items] == [b"2"]
        with pytest.raises(CompactedError):
            await b.compact(r2)
    finally:
        await a.close()
        await b.close()


async def test_watch_stream_end_raises_watch_closed(tmp_path: Path) -> None:
    server = start_etcd(tmp_path / "etcd")
    try:
        s = await EtcdStore.open([server.endpoint], prefix="/p")
        try:
            watcher = await s.watch("/")
            rev = await s.create("/a", b"1")
            assert [e.revision for e in await next_events(watcher, 1)] == [rev]
            server.kill()
            with pytest.raises(WatchClosedError):
                await next_events(watcher, 1)
            with pytest.raises(EtcdUnavailableError):
                await s.get("/a")
            # The server comes back with its data; the store reconnects on its own.
            server.start()
            assert (await s.get("/a")).value == b"1"  # type: ignore[union-attr]
            w2 = await s.watch("/", rev - 1)
            assert [e.revision for e in await next_events(w2, 1)] == [rev]
            await w2.close()
        finally:
            await s.close()
    finally:
        server.stop()


async def test_cluster_member_failure_fails_over(tmp_path: Path) -> None:
    cluster = start_etcd_cluster(tmp_path / "cluster", 3)
    try:
        s = await EtcdStore.open(cluster.endpoints, prefix="/ha")
        try:
            rev = await s.create("/k", b"0")
            cluster.members[0].kill()  # the endpoint the store was using
            # Reads fail over at once, even over pooled connections the dead member left behind.
            assert (await s.get("/k")).value == b"0"  # type: ignore[union-attr]
            await asyncio.sleep(
                0.1
            )  # let the loop notice the closed sockets (writes in flight are ambiguous)
            for i in range(1, 6):
                rev = await s.update("/k", str(i).encode(), rev)
            assert (await s.get("/k")).value == b"5"  # type: ignore[union-attr]
            w = await s.watch("/", rev - 1)
            assert [e.value for e in await next_events(w, 1)] == [b"5"]
            await w.close()
        finally:
            await s.close()
    finally:
        cluster.stop()


# ---------------------------------------------------------------------------------- interface semantics


async def test_create_get_exists(store: EtcdStore) -> None:
    assert await store.get("/k") is None
    rev = await store.create("/k", b"v")
    kv = await store.get("/k")
    assert kv is not None and (kv.key, kv.value, kv.create_revision, kv.mod_revision) == (
        "/k",
        b"v",
        rev,
        rev,
    )
    with pytest.raises(KeyExistsError):
        await store.create("/k", b"again")
    assert (await store.get("/k")).value == b"v"  # type: ignore[union-attr]


async def test_values_are_opaque_bytes(store: EtcdStore) -> None:
    blob = bytes(range(256)) * 4096  # 1 MiB, every byte value
    await store.create("/blob", blob)
    await store.create("/empty", b"")
    await store.create("/ünïcode/ключ", b"x")
    assert (await store.get("/blob")).value == blob  # type: ignore[union-attr]
    assert (await store.get("/empty")).value == b""  # type: ignore[union-attr]
    assert [kv.key for kv in (await store.list("/ü")).items] == ["/ünïcode/ключ"]


async def test_update_compare_and_swap(store: EtcdStore) -> None:
    r1 = await store.create("/k", b"1")
    r2 = await store.update("/k", b"2", r1)
    assert r2 > r1
    kv = await store.get("/k")
    assert kv is not None and (kv.value, kv.create_revision, kv.mod_revision) == (b"2", r1, r2)
    with pytest.raises(ConflictError) as exc:
        await store.update("/k", b"3", r1)
    assert (exc.value.expected, exc.value.actual) == (r1, r2)
    with pytest.raises(ConflictError):
        await store.update("/k", b"3", 0)
    with pytest.raises(KeyNotFoundError):
        await store.update("/missing", b"x", r1)
    with pytest.raises(KeyNotFoundError):
        await store.update("/missing", b"x", 0)  # mod_revision 0 must not create the key
    assert await store.get("/missing") is None


async def test_delete(store: EtcdStore) -> None:
    r1 = await store.create("/a", b"1")
    r2 = await store.update("/a", b"2", r1)
    with pytest.raises(ConflictError):
        await store.delete("/a", r1)
    rev, last = await store.delete("/a", r2)
    assert rev > r2 and (last.key, last.value, last.create_revision, last.mod_revision) == (
        "/a",
        b"2",
        r1,
        r2,
    )
    assert await store.get("/a") is None
    with pytest.raises(KeyNotFoundError):
        await store.delete("/a")
    with pytest.raises(KeyNotFoundError):
        await store.delete("/a", r2)
    await store.create("/b", b"x")
    rev_b, last_b = await store.delete("/b")
    assert last_b.value == b"x" and rev_b == await store.current_revision()
    # Re-create after delete: a new create_revision.
    r3 = await store.create("/a", b"again")
    assert (await store.get("/a")).create_revision == r3  # type: ignore[union-attr]


async def test_list_pagination(store: EtcdStore) -> None:
    keys = [f"/registry/pods/ns/p{i:02d}" for i in range(25)]
    for k in keys:
        await store.create(k, k.encode())
    await store.create("/registry/pods/nt/other", b"x")  # sibling prefix, excluded
    await store.create("/registry/podsx", b"x")
    full = await store.list("/registry/pods/ns/")
    assert [kv.key for kv in full.items] == keys and not full.more
    assert full.revision == await store.current_revision()
    seen: list[str] = []
    cursor = ""
    rev = 0
    while True:
        page = await store.list("/registry/pods/ns/", revision=rev, start_after=cursor, limit=10)
        rev = page.revision
        seen += [kv.key for kv in page.items]
        if not page.more:
            break
        assert len(page.items) == 10
        cursor = page.items[-1].key
    assert seen == keys and rev == full.revision
    exact = await store.list("/registry/pods/ns/", limit=25)
    assert len(exact.items) == 25 and not exact.more
    # start_after before the prefix is ignored; past it, nothing matches.
    assert len((await store.list("/registry/pods/ns/", start_after="/a")).items) == 25
    past = await store.list("/registry/pods/ns/", start_after="/zzz")
    assert past.items == [] and not past.more
    assert [
        kv.key for kv in (await store.list("/registry/pods/ns/p2", start_after="/registry/pods/ns/p21")).items
    ] == [
        "/registry/pods/ns/p22",
        "/registry/pods/ns/p23",
        "/registry/pods/ns/p24",
    ]


async def test_list_at_revision(store: EtcdStore) -> None:
    ra = await store.create("/l/a", b"a1")
    await store.create("/l/b", b"b1")
    snap = await store.current_revision()
    await store.update("/l/a", b"a2", ra)
    await store.delete("/l/b")
    await store.create("/l/c", b"c1")
    old = await store.list("/l/", revision=snap)
    assert old.revision == snap
    assert [(kv.key, kv.value) for kv in old.items] == [("/l/a", b"a1"), ("/l/b", b"b1")]
    now = await store.list("/l/")
    assert [(kv.key, kv.value) for kv in now.items] == [("/l/a", b"a2"), ("/l/c", b"c1")]
    page = await store.list("/l/", revision=snap, limit=1)
    assert [kv.key for kv in page.items] == ["/l/a"] and page.more
    with pytest.raises(FutureRevisionError) as exc:
        await store.list("/l/", revision=now.revision + 1000)
    assert exc.value.current >= now.revision


async def test_watch_replay_then_live(store: EtcdStore) -> None:
    r1 = await store.create("/w/a", b"1")
    r2 = await store.update("/w/a", b"2", r1)
    await store.create("/other", b"ignored")
    r3, _ = await store.delete("/w/a")
    watcher = await store.watch("/w/", r1 - 1)
    replay = await next_events(watcher, 3)
    assert [(e.type, e.key, e.value, e.revision, e.create_revision, e.prev_value) for e in replay] == [
        ("PUT", "/w/a", b"1", r1, r1, None),
        ("PUT", "/w/a", b"2", r2, r1, b"1"),
        ("DELETE", "/w/a", b"2", r3, r1, b"2"),
    ]
    r4 = await store.create("/w/b", b"live")
    (live,) = await next_events(watcher, 1)
    assert (live.type, live.key, live.revision, live.is_create) == ("PUT", "/w/b", r4, True)
    await watcher.close()
    # after_revision excludes that revision itself.
    w2 = await store.watch("/w/", r2)
    assert [e.revision for e in await next_events(w2, 2)] == [r3, r4]
    await w2.close()


async def test_watch_from_now_and_future(store: EtcdStore) -> None:
    await store.create("/n/old", b"x")
    watcher = await store.watch("/n/")
    r = await store.create("/n/new", b"y")
    assert [e.revision for e in await next_events(watcher, 1)] == [r]
    cur = await store.current_revision()
    future = await store.watch("/n/", cur + 1)  # events with revision > cur + 1
    await store.create("/n/skipped", b"")
    r3 = await store.create("/n/seen", b"")
    assert [e.revision for e in await next_events(future, 1)] == [r3]
    await watcher.close()
    await future.close()


async def test_watch_large_replay_batches(store: EtcdStore) -> None:
    """etcd sends a replay as one message; it is far bigger than one read buffer."""
    start = await store.current_revision()
    value = b"v" * 20_000
    await asyncio.gather(*(store.create(f"/big/{i:03d}", value) for i in range(60)))
    watcher = await store.watch("/big/", start)
    events = await next_events(watcher, 60)
    assert sorted(e.key for e in events) == [f"/big/{i:03d}" for i in range(60)]
    assert all(e.value == value for e in events)
    assert [e.revision for e in events] == sorted(e.revision for e in events)
    await watcher.close()


async def test_watch_close_is_idempotent_and_ends_iteration(store: EtcdStore) -> None:
    watcher = await store.watch("/c/")
    got: list[WatchEvent] = []

    async def consume() -> None:
        async for ev in watcher:
            got.append(ev)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    await watcher.close()
    await asyncio.wait_for(task, 2)  # ends without an error
    await watcher.close()
    assert got == []
    # Store.close ends open watchers too.
    w2 = await store.watch("/c/")
    task2 = asyncio.create_task(next_events(w2, 1))
    await asyncio.sleep(0.05)
    await store.close()
    done, _ = await asyncio.wait({task2}, timeout=2)
    assert task2 in done and task2.result() == []  # iteration just ended


async def test_compaction(store: EtcdStore) -> None:
    r1 = await store.create("/c/a", b"1")
    r2 = await store.update("/c/a", b"2", r1)
    r3 = await store.create("/c/b", b"b")
    assert await store.compacted_revision() < r2
    await store.compact(r2)
    assert await store.compacted_revision() == r2
    with pytest.raises(CompactedError) as exc:
        await store.list("/c/", revision=r1)
    assert (exc.value.requested, exc.value.compacted) == (r1, r2)
    with pytest.raises(CompactedError):
        await store.watch("/c/", r1)  # needs r2, which is gone
    with pytest.raises(CompactedError):
        await store.watch("/c/", 0)
    watcher = await store.watch("/c/", r2)  # needs r3 onwards: fine
    assert [e.revision for e in await next_events(watcher, 1)] == [r3]
    await watcher.close()
    assert [kv.value for kv in (await store.list("/c/", revision=r2)).items] == [b"2"]
    assert [kv.value for kv in (await store.list("/c/")).items] == [b"2", b"b"]
    with pytest.raises(CompactedError):
        await store.compact(r1)
    with pytest.raises(FutureRevisionError):
        await store.compact(r3 + 1000)


async def test_compaction_reported_by_the_stream(store: EtcdStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """If etcd compacts between the check in watch() and the watch's creation, the stream says so."""
    r1 = await store.create("/s/a", b"1")
    r2 = await store.update("/s/a", b"2", r1)
    await store.update("/s/a", b"3", r2)
    await store.compact(r2)
    store._compacted = 0  # forget what we know, and skip the up-front check

    async def readable(revision: int) -> bool:
        return True

    monkeypatch.setattr(store, "_probe", readable)
    watcher = await store.watch("/s/", r1 - 1)
    with pytest.raises(CompactedError) as exc:
        await next_events(watcher, 1)
    assert exc.value.compacted == r2
    assert await store.compacted_revision() == r2
    with pytest.raises(StopAsyncIteration):
        await watcher.__anext__()  # an ended watch stays ended
    await watcher.close()


async def test_guaranteed_update_under_contention(store: EtcdStore) -> None:
    await store.create("/counter", b"0")

    async def bump() -> None:
        await guaranteed_update(store, "/counter", lambda kv: str(int(kv.value) + 1).encode())

    await asyncio.gather(*(bump() for _ in range(20)))
    assert (await store.get("/counter")).value == b"20"  # type: ignore[union-attr]


async def test_concurrent_create_throughput(store: EtcdStore) -> None:
    value = b"x" * 2048
    n = 200
    t0 = time.perf_counter()
    revs = await asyncio.gather(*(store.create(f"/bench/{i:04d}", value) for i in range(n)))
    elapsed = time.perf_counter() - t0
    assert len(set(revs)) == n
    assert len((await store.list("/bench/")).items) == n
    print(f"\n{n} concurrent 2 KiB creates: {elapsed:.3f}s = {n / elapsed:.0f} writes/s")


# ---------------------------------------------------------------------------------- gRPC client specifics


async def test_concurrent_gets_share_round_trips_and_each_gets_its_own_key(store: EtcdStore) -> None:
    revs = {f"/g/{i:02d}": await store.create(f"/g/{i:02d}", f"v{i}".encode()) for i in range(40)}
    keys = [*revs, "/g/missing", *revs]  # repeats and a key that is not there, in one turn of the loop
    batches, gets = store.get_batches, store.batched_gets
    found = await asyncio.gather(*(store.get(k) for k in keys))
    assert [kv.key if kv else None for kv in found] == [*revs, None, *revs]
    assert all(kv.mod_revision == revs[kv.key] and kv.value == f"v{int(kv.key[3:])}".encode()
               for kv in found if kv)
    assert store.batched_gets - gets == len(keys)
    assert store.get_batches - batches < len(keys) // 10  # 81 gets: two transactions (at most 64 each)


async def test_a_get_sees_a_write_that_finished_before_it_in_the_same_turn(store: EtcdStore) -> None:
    rev = await store.create("/rw", b"1")

    async def write_then_read() -> bytes:
        await store.update("/rw", b"2", rev)
        kv = await store.get("/rw")
        assert kv is not None
        return kv.value

    async def read() -> bytes | None:
        kv = await store.get("/rw")
        return kv.value if kv else None

    results = await asyncio.gather(write_then_read(), *(read() for _ in range(10)))
    assert results[0] == b"2"
    assert set(results[1:]) <= {b"1", b"2"}


async def test_a_cancelled_get_does_not_strand_the_gets_that_joined_it(store: EtcdStore) -> None:
    await store.create("/c1", b"x")
    first = asyncio.ensure_future(store.get("/c1"))
    others = [asyncio.ensure_future(store.get("/c1")) for _ in range(5)]
    await asyncio.sleep(0)  # every get has joined the first one's batch
    first.cancel()
    got = await asyncio.wait_for(asyncio.gather(*others), 5)
    assert [kv.value for kv in got if kv] == [b"x"] * 5
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_concurrent_gets_all_fail_when_etcd_is_gone(tmp_path: Path) -> None:
    server = start_etcd(tmp_path / "etcd")
    try:
        s = await EtcdStore.open([server.endpoint], prefix="/p")
        try:
            await s.create("/a", b"1")
            server.kill()
            results = await asyncio.gather(*(s.get("/a") for _ in range(8)), return_exceptions=True)
            assert all(isinstance(r, EtcdUnavailableError) for r in results), results
        finally:
            await s.close()
    finally:
        server.stop()


async def test_a_consumer_cancelled_while_it_waits_loses_no_event(store: EtcdStore) -> None:
    watcher = await store.watch("/wc/")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(aiter(watcher)), 0.2)  # nothing yet: the wait is cancelled
    rev = await store.create("/wc/a", b"1")
    (event,) = await next_events(watcher, 1)
    assert (event.key, event.revision) == ("/wc/a", rev)
    await watcher.close()


async def test_watch_poll_and_wakeup(store: EtcdStore) -> None:
    watcher = await store.watch("/wp/")
    assert watcher.poll() is None and not watcher.finished  # type: ignore[attr-defined]
    wakeup = watcher.wakeup()  # type: ignore[attr-defined]
    r1 = await store.create("/wp/a", b"1")
    r2 = await store.create("/wp/b", b"2")
    await asyncio.wait_for(wakeup, 5)
    got: list[int] = []
    while len(got) < 2:
        event = watcher.poll()  # type: ignore[attr-defined]
        if event is None:
            await asyncio.wait_for(watcher.wakeup(), 5)  # type: ignore[attr-defined]
        else:
            got.append(event.revision)
    assert got == [r1, r2]
    await watcher.close()
    assert watcher.finished and watcher.poll() is None  # type: ignore[attr-defined]


async def test_a_consumer_that_falls_too_far_behind_loses_the_watch(
        store: EtcdStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import flotilla.storage.etcd as etcd_module

    monkeypatch.setattr(etcd_module, "MAX_BACKLOG", 5)
    start = await store.current_revision()
    for i in range(8):
        await store.create(f"/slow/{i}", b"x")
    watcher = await store.watch("/slow/", start)
    got: list[WatchEvent] = []
    with pytest.raises(WatchClosedError, match="fell more than 5 events behind"):
        await asyncio.wait_for(_drain(watcher, got), 5)
    assert len(got) <= 8
    with pytest.raises(StopAsyncIteration):
        await watcher.__anext__()


async def _drain(watcher: Watcher, into: list[WatchEvent]) -> None:
    await asyncio.sleep(0.5)  # let the stream's reader queue everything before the first event is taken
    async for event in watcher:
        into.append(event)


async def test_progress_notifications_advance_an_idle_watch(tmp_path: Path) -> None:
    server = start_etcd(tmp_path / "etcd", extra_args=["--experimental-watch-progress-notify-interval", "200ms"])
    try:
        s = await EtcdStore.open([server.endpoint], prefix="/p")
        try:
            watcher = await s.watch("/idle/")
            busy = [await s.create(f"/busy/{i}", b"x") for i in range(3)]

            for _ in range(200):  # etcd notifies every 200 ms; there is nothing to wait on but time
                if (watcher.progress_revision() or 0) >= busy[-1]:
                    break
                await asyncio.sleep(0.05)
            assert (watcher.progress_revision() or 0) >= busy[-1]  # no event of its own, yet it knows how far
            rev = await s.create("/idle/k", b"v")
            (event,) = await next_events(watcher, 1)
            assert event.revision == rev and watcher.progress_revision() == rev
            await watcher.close()
        finally:
            await s.close()
    finally:
        server.stop()


# ------------------------------------------------------- the API server on the version it last saw


class CountingStore(EtcdStore):
    """An EtcdStore that counts its reads of single keys."""

    reads = 0

    async def get(self, key: str) -> Any:
        self.reads += 1
        return await super().get(key)


@pytest.fixture
async def stores(etcd: EtcdServer) -> AsyncIterator[list[CountingStore]]:
    prefix = f"/t-{uuid.uuid4().hex[:10]}"
    opened = [await CountingStore.open([etcd.endpoint], prefix=prefix) for _ in range(2)]
    yield opened  # type: ignore[misc]
    for s in opened:
        await s.close()


@pytest.fixture
async def two_servers(stores: list[CountingStore]) -> tuple[Client, Client]:
    """Two API servers (in-process clients) sharing one etcd prefix, as two replicas of the control plane do."""
    clients = [Client(InProcessTransport(ResourceStorage(s, TypeRegistry(BUILTIN_TYPES)))) for s in stores]
    await clients[0].create(NAMESPACES, {"metadata": {"name": "default"}})
    return clients[0], clients[1]


def _configmap(value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
            "data": {"k": value}}


async def test_a_cached_read_gives_the_version_the_server_holds_and_a_plain_read_gives_etcds(
        two_servers: tuple[Client, Client]) -> None:
    one, other = two_servers
    mine = await one.create(CONFIGMAPS, _configmap("1"))
    newer = await other.update(CONFIGMAPS, {**mine, "data": {"k": "2"}})

    cached = await one.get(CONFIGMAPS, "c", "default", resource_version="0")
    assert cached["data"] == {"k": "1"}  # the first server has not read or watched the other's write
    assert cached["metadata"]["resourceVersion"] == mine["metadata"]["resourceVersion"]
    plain = await one.get(CONFIGMAPS, "c", "default")
    assert plain["metadata"]["resourceVersion"] == newer["metadata"]["resourceVersion"]
    again = await one.get(CONFIGMAPS, "c", "default", resource_version="0")  # the read updated what it holds
    assert again["metadata"]["resourceVersion"] == newer["metadata"]["resourceVersion"]


async def test_a_guarded_patch_retried_from_a_stale_cached_read_lands_on_the_newest_version(
        two_servers: tuple[Client, Client]) -> None:
    one, other = two_servers
    mine = await one.create(CONFIGMAPS, _configmap("1"))
    await other.update(CONFIGMAPS, {**mine, "data": {"k": "2", "other": "x"}})
    seen: list[str] = []

    def make(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append(obj["data"]["k"])
        return {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "data": {"k": str(int(obj["data"]["k"]) + 10)}}

    written = await patch_with_retry(one, CONFIGMAPS, mine, "c", "default", make)

    assert written is not None and written["data"] == {"k": "12", "other": "x"}  # nothing of the other write lost
    assert seen[0] == "1" and seen[-1] == "2"
    assert (await other.get(CONFIGMAPS, "c", "default"))["data"] == {"k": "12", "other": "x"}


async def test_a_precondition_older_than_the_servers_version_conflicts_without_a_read(
        two_servers: tuple[Client, Client], stores: list[CountingStore]) -> None:
    one, _ = two_servers
    first = await one.create(CONFIGMAPS, _configmap("1"))
    await one.patch(CONFIGMAPS, "c", {"data": {"k": "2"}}, namespace="default")
    reads = stores[0].reads
    stale = first["metadata"]["resourceVersion"]

    with pytest.raises(ApiException) as patched:
        await one.patch(CONFIGMAPS, "c", {"metadata": {"resourceVersion": stale}, "data": {"k": "3"}},
                        namespace="default")
    with pytest.raises(ApiException) as updated:
        await one.update(CONFIGMAPS, {**first, "data": {"k": "3"}})

    assert patched.value.status == 409 and updated.value.status == 409
    assert stores[0].reads == reads  # the server's own newer version settles it: no read from etcd
    assert (await one.get(CONFIGMAPS, "c", "default"))["data"] == {"k": "2"}
