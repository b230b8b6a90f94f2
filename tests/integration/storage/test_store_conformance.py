"""One behaviour suite for every Store backend (memory, SQLite, etcd).

etcd shares one server (and so one revision counter) across the session: tests only assume
relative revision properties, and every test works under its own key prefix.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

import pytest

from flotilla.storage.base import (
    CompactedError,
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    StorageError,
    Store,
    WatchEvent,
    guaranteed_update,
)

if TYPE_CHECKING:
    from conftest import Watching


async def keys_of(store: Store, prefix: str, **kwargs: int | str) -> list[str]:
    return [kv.key for kv in (await store.list(prefix, **kwargs)).items]  # type: ignore[arg-type]


# -- create / get / update / delete ------------------------------------------------------------


async def test_create_then_get(store: Store) -> None:
    before = await store.current_revision()
    rev = await store.create("/c/one", b"1")
    assert rev > before
    assert await store.get("/c/one") == KeyValue("/c/one", b"1", rev, rev)
    assert await store.get("/c/missing") is None
    assert await store.current_revision() == rev

    rev2 = await store.create("/c/two", b"2")
    assert rev2 > rev
    assert await store.current_revision() == rev2


async def test_create_existing_key_fails(store: Store) -> None:
    rev = await store.create("/c/k", b"first")
    with pytest.raises(KeyExistsError) as info:
        await store.create("/c/k", b"second")
    assert info.value.key == "/c/k"
    assert await store.get("/c/k") == KeyValue("/c/k", b"first", rev, rev)
    assert await store.current_revision() == rev  # a failed write takes no revision


async def test_values_are_opaque_bytes(store: Store) -> None:
    blob = bytes(range(256)) * 4 + b"\x00\xff\xfe"
    big = random.Random(7).randbytes(1 << 20)
    await store.create("/b/blob", blob)
    await store.create("/b/big", big)
    await store.create("/b/empty", b"")
    await store.create("/b/ünïcode-ключ", b"{}")
    assert (await store.get("/b/blob")).value == blob  # type: ignore[union-attr]
    assert (await store.get("/b/big")).value == big  # type: ignore[union-attr]
    assert (await store.get("/b/empty")).value == b""  # type: ignore[union-attr]
    assert await keys_of(store, "/b/") == ["/b/big", "/b/blob", "/b/empty", "/b/ünïcode-ключ"]


async def test_update_compare_and_swap(store: Store) -> None:
    created = await store.create("/u/k", b"v1")
    updated = await store.update("/u/k", b"v2", created)
    assert updated > created
    assert await store.get("/u/k") == KeyValue("/u/k", b"v2", created, updated)

    with pytest.raises(ConflictError) as info:
        await store.update("/u/k", b"stale", created)
    assert info.value.key == "/u/k"
    assert info.value.expected == created
    assert await store.get("/u/k") == KeyValue("/u/k", b"v2", created, updated)

    again = await store.update("/u/k", b"v2", updated)  # same value: still a new revision
    assert again > updated
    assert await store.current_revision() == again

    with pytest.raises(KeyNotFoundError) as missing:
        await store.update("/u/missing", b"x", again)
    assert missing.value.key == "/u/missing"


async def test_delete(store: Store) -> None:
    created = await store.create("/d/k", b"v1")
    updated = await store.update("/d/k", b"v2", created)
    rev, last = await store.delete("/d/k")
    assert rev > updated
    assert last == KeyValue("/d/k", b"v2", created, updated)
    assert await store.get("/d/k") is None
    assert await keys_of(store, "/d/") == []
    with pytest.raises(KeyNotFoundError):
        await store.delete("/d/k")
    with pytest.raises(KeyNotFoundError):
        await store.update("/d/k", b"v3", updated)

    recreated = await store.create("/d/k", b"again")
    assert recreated > rev
    assert await store.get("/d/k") == KeyValue("/d/k", b"again", recreated, recreated)


async def test_delete_with_expected_revision(store: Store) -> None:
    created = await store.create("/d/k", b"v1")
    updated = await store.update("/d/k", b"v2", created)
    with pytest.raises(ConflictError) as info:
        await store.delete("/d/k", expected_revision=created)
    assert info.value.expected == created
    assert await store.get("/d/k") == KeyValue("/d/k", b"v2", created, updated)

    rev, last = await store.delete("/d/k", expected_revision=updated)
    assert rev > updated
    assert last.mod_revision == updated and last.value == b"v2"
    assert await store.get("/d/k") is None
    with pytest.raises(KeyNotFoundError):
        await store.delete("/d/k", expected_revision=rev)


# -- list ----------------------------------------------------------------------------------------


async def test_list_by_prefix_in_key_order(store: Store) -> None:
    names = [f"/l/{c}" for c in "qwertyuiopasdfg"]
    for name in random.Random(1).sample(names, len(names)):
        await store.create(name, name.encode())
    for outside in ("/l", "/l2/x", "/k/z", "/m/a"):
        await store.create(outside, b"-")

    result = await store.list("/l/")
    assert [kv.key for kv in result.items] == sorted(names)
    assert all(kv.value == kv.key.encode() for kv in result.items)
    assert result.more is False
    assert result.revision == await store.current_revision()
    assert result.items[0] == await store.get(result.items[0].key)
    assert await keys_of(store, "/nothing/") == []


async def test_list_pages_with_start_after_and_limit(store: Store) -> None:
    names = [f"/p/{i:02d}" for i in range(10)]
    for name in names:
        await store.create(name, b"x")

    first = await store.list("/p/", limit=3)
    assert [kv.key for kv in first.items] == names[:3]
    assert first.more is True
    await store.create("/p/05a", b"late")  # written between pages: must not show up at first.revision
    await store.delete("/p/07")

    seen = [kv.key for kv in first.items]
    page = first
    while page.more:
        page = await store.list("/p/", revision=first.revision, start_after=seen[-1], limit=3)
        assert page.revision == first.revision
        assert 0 < len(page.items) <= 3
        seen += [kv.key for kv in page.items]
    assert seen == names

    exact = await store.list("/p/", start_after="/p/06", limit=3)  # /p/07 is gone now
    assert [kv.key for kv in exact.items] == ["/p/08", "/p/09"]
    assert exact.more is False
    whole = await store.list("/p/", limit=11)
    assert len(whole.items) == 10 and whole.more is False
    assert [kv.key for kv in (await store.list("/p/", start_after="/p/09")).items] == []


async def test_list_at_an_older_revision(store: Store) -> None:
    r1 = await store.create("/o/a", b"a1")
    r2 = await store.create("/o/b", b"b1")
    r3 = await store.update("/o/a", b"a2", r1)
    r4, _ = await store.delete("/o/b")
    r5 = await store.create("/o/c", b"c1")
    await store.create("/other/x", b"-")

    at2 = await store.list("/o/", revision=r2)
    assert at2.revision == r2
    assert at2.items == [KeyValue("/o/a", b"a1", r1, r1), KeyValue("/o/b", b"b1", r2, r2)]
    at3 = await store.list("/o/", revision=r3)
    assert at3.items == [KeyValue("/o/a", b"a2", r1, r3), KeyValue("/o/b", b"b1", r2, r2)]
    assert await keys_of(store, "/o/", revision=r4) == ["/o/a"]
    assert await keys_of(store, "/o/", revision=r5) == ["/o/a", "/o/c"]
    assert await keys_of(store, "/o/", revision=r1) == ["/o/a"]
    paged = await store.list("/o/", revision=r2, limit=1)
    assert [kv.key for kv in paged.items] == ["/o/a"] and paged.more is True
    rest = await store.list("/o/", revision=r2, start_after="/o/a", limit=1)
    assert [kv.key for kv in rest.items] == ["/o/b"] and rest.more is False


async def test_list_at_a_future_revision_fails(store: Store) -> None:
    rev = await store.create("/f/a", b"x")
    with pytest.raises(FutureRevisionError):
        await store.list("/f/", revision=rev + 1)
    assert await keys_of(store, "/f/", revision=rev) == ["/f/a"]


# -- compaction ----------------------------------------------------------------------------------


async def test_compaction(store: Store, watching: Watching) -> None:
    r1 = await store.create("/x/a", b"a1")
    r2 = await store.update("/x/a", b"a2", r1)
    r3 = await store.create("/x/b", b"b1")
    await store.compact(r2)
    assert await store.compacted_revision() == r2
    assert await store.current_revision() == r3

    with pytest.raises(CompactedError):
        await store.list("/x/", revision=r1)
    with pytest.raises(CompactedError):
        await store.watch("/x/", after_revision=r1)
    with pytest.raises(CompactedError):
        await store.compact(r2)  # already compacted
    assert (await store.list("/x/", revision=r2)).items == [KeyValue("/x/a", b"a2", r1, r2)]
    assert await keys_of(store, "/x/") == ["/x/a", "/x/b"]
    assert await store.get("/x/a") == KeyValue("/x/a", b"a2", r1, r2)

    async with watching(store, "/x/", r2) as events:  # the compacted revision itself is still served
        event = await events.next()
        assert (event.key, event.revision, event.is_create) == ("/x/b", r3, True)
        r4 = await store.update("/x/a", b"a3", r2)
        event = await events.next()
        assert (event.key, event.revision, event.prev_value) == ("/x/a", r4, b"a2")


async def test_compact_at_a_future_revision_fails(store: Store) -> None:
    rev = await store.create("/x/a", b"1")
    with pytest.raises(FutureRevisionError):
        await store.compact(rev + 1)


# -- watch -----------------------------------------------------------------------------------


async def test_watch_from_now_sees_only_later_writes(store: Store, watching: Watching) -> None:
    await store.create("/w/before", b"0")
    async with watching(store, "/w/") as events:
        rev = await store.create("/w/after", b"1")
        event = await events.next()
        assert (event.key, event.revision) == ("/w/after", rev)
        await events.assert_quiet()


async def test_watch_from_an_older_revision_replays_then_continues(store: Store, watching: Watching) -> None:
    r1 = await store.create("/w/a", b"1")
    r2 = await store.update("/w/a", b"2", r1)
    r3 = await store.create("/w/b", b"b")
    r4, _ = await store.delete("/w/a")
    async with watching(store, "/w/", r1) as events:
        replayed = await events.take(3)
        assert [(e.type, e.key, e.revision) for e in replayed] == [
            ("PUT", "/w/a", r2),
            ("PUT", "/w/b", r3),
            ("DELETE", "/w/a", r4),
        ]
        r5 = await store.update("/w/b", b"b2", r3)
        live = await events.next()
        assert (live.key, live.revision, live.value) == ("/w/b", r5, b"b2")
        await events.assert_quiet()


async def test_watch_event_fields(store: Store, watching: Watching) -> None:
    async with watching(store, "/e/") as events:
        r1 = await store.create("/e/k", b"v1")
        r2 = await store.update("/e/k", b"v2", r1)
        r3, _ = await store.delete("/e/k")
        r4 = await store.create("/e/k", b"v3")
        created, updated, deleted, recreated = await events.take(4)

    assert created == WatchEvent("PUT", "/e/k", b"v1", r1, r1, None)
    assert created.is_create
    assert updated == WatchEvent("PUT", "/e/k", b"v2", r2, r1, b"v1")
    assert not updated.is_create
    assert deleted == WatchEvent("DELETE", "/e/k", b"v2", r3, r1, b"v2")
    assert not deleted.is_create
    assert recreated == WatchEvent("PUT", "/e/k", b"v3", r4, r4, None)
    assert recreated.is_create


async def test_watch_sees_only_its_prefix(store: Store, watching: Watching) -> None:
    async with watching(store, "/w/a/") as events:
        await store.create("/w/ab", b"-")
        r1 = await store.create("/w/a/1", b"-")
        await store.create("/w/b/1", b"-")
        await store.create("/w/a", b"-")
        r2 = await store.create("/w/a/2", b"-")
        got = await events.take(2)
        assert [(e.key, e.revision) for e in got] == [("/w/a/1", r1), ("/w/a/2", r2)]
        await events.assert_quiet()


async def test_watch_replay_respects_the_prefix(store: Store, watching: Watching) -> None:
    start = await store.create("/w/a/0", b"-")
    await store.create("/w/b/1", b"-")
    r = await store.create("/w/a/1", b"-")
    await store.create("/w/b/2", b"-")
    async with watching(store, "/w/a/", start) as events:
        assert [(e.key, e.revision) for e in await events.take(1)] == [("/w/a/1", r)]
        await events.assert_quiet()


async def test_watch_order_under_concurrent_writers(store: Store, watching: Watching) -> None:
    writers, per_writer = 200, 3

    async def writer(i: int) -> list[int]:
        rev = await store.create(f"/cc/{i}", b"0")
        revs = [rev]
        for n in range(1, per_writer):
            rev = await store.update(f"/cc/{i}", str(n).encode(), rev)
            revs.append(rev)
        return revs

    async with watching(store, "/cc/") as events:
        results = await asyncio.gather(*(writer(i) for i in range(writers)))
        got = await events.take(writers * per_writer, wait=30.0)
        await events.assert_quiet(0.2)

    written = sorted(rev for revs in results for rev in revs)
    seen = [e.revision for e in got]
    assert seen == written  # every revision exactly once, in increasing order
    assert len(set(seen)) == writers * per_writer
    last_value: dict[str, bytes] = {}
    for event in got:  # and per key, the values arrive in write order
        assert event.prev_value == last_value.get(event.key)
        last_value[event.key] = event.value
    assert set(last_value.values()) == {str(per_writer - 1).encode()}


async def test_two_watchers_on_one_prefix_see_the_same_events(store: Store, watching: Watching) -> None:
    async with watching(store, "/t/") as one, watching(store, "/t/") as two:
        revs = [await store.create(f"/t/{i}", b"-") for i in range(5)]
        assert [e.revision for e in await one.take(5)] == revs
        assert [e.revision for e in await two.take(5)] == revs


async def test_closing_a_watcher_ends_iteration(store: Store) -> None:
    watcher = await store.watch("/z/")
    received: list[WatchEvent] = []

    async def consume() -> None:
        async for event in watcher:
            received.append(event)

    consumer = asyncio.create_task(consume())
    await store.create("/z/a", b"1")
    for _ in range(100):
        if received:
            break
        await asyncio.sleep(0.05)
    assert [e.key for e in received] == ["/z/a"]
    await watcher.close()
    await asyncio.wait_for(consumer, 5.0)  # ends without an error
    await watcher.close()  # idempotent
    await store.create("/z/b", b"2")
    async for event in watcher:
        raise AssertionError(f"event after close: {event}")


async def test_closing_the_store_ends_its_watchers(store: Store) -> None:
    watcher = await store.watch("/z/")

    async def consume() -> None:
        try:
            async for _ in watcher:
                pass
        except StorageError:
            pass  # ending with an error is fine too: the store is gone

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    await store.close()
    await asyncio.wait_for(consumer, 5.0)
    await store.close()  # idempotent


# -- guaranteed_update -------------------------------------------------------------------------


async def test_guaranteed_update_under_concurrent_increments(store: Store) -> None:
    await store.create("/g/counter", b"0")
    calls = 0

    async def increment(kv: KeyValue) -> bytes:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)  # let the other tasks read the same revision
        return str(int(kv.value) + 1).encode()

    async def worker() -> None:
        for _ in range(10):
            await guaranteed_update(store, "/g/counter", increment, attempts=10_000)

    await asyncio.gather(*(worker() for _ in range(20)))
    kv = await store.get("/g/counter")
    assert kv is not None and kv.value == b"200"
    assert calls > 200  # conflicts really happened and were retried


async def test_guaranteed_update_without_change_does_not_write(store: Store) -> None:
    rev = await store.create("/g/k", b"same")
    result = await guaranteed_update(store, "/g/k", lambda kv: None)
    assert result[0] == rev
    assert await store.current_revision() == rev
    with pytest.raises(KeyNotFoundError):
        await guaranteed_update(store, "/g/missing", lambda kv: b"x")


# -- revisions -----------------------------------------------------------------------------------


async def test_current_and_compacted_revision(store: Store) -> None:
    revs = []
    for i in range(5):
        revs.append(await store.create(f"/r/{i}", b"-"))
        assert await store.current_revision() == revs[-1]
    assert revs == sorted(set(revs))
    compacted = await store.compacted_revision()
    assert 0 <= compacted < revs[0]
    await store.compact(revs[2])
    assert await store.compacted_revision() == revs[2]
    assert await store.current_revision() == revs[-1]
