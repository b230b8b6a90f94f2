"""The MVCC core against a brute-force model: snapshots, history, compaction garbage, watch fan-out."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from flotilla.storage.base import (
    CompactedError,
    FutureRevisionError,
    KeyValue,
    StorageError,
    WatchClosedError,
    WatchEvent,
)
from flotilla.storage.mvcc import MVCC, Change
from flotilla.storage.sortedkeys import CHUNK, SortedKeys

KEYS = [f"/{a}/{b}" for a in ("a", "ab", "b") for b in range(6)] + ["/a", "/b"]
PREFIXES = ["", "/", "/a", "/a/", "/ab/", "/b/", "/c/"]


def random_history(seed: int, writes: int = 400) -> tuple[MVCC, dict[int, dict[str, KeyValue]], list[Change]]:
    """Random writes in random-sized batches; returns the core, the state after each revision, all changes."""
    rnd = random.Random(seed)
    core = MVCC()
    snapshots: dict[int, dict[str, KeyValue]] = {0: {}}
    state: dict[str, KeyValue] = {}
    changes: list[Change] = []
    while core.revision < writes:
        batch = core.begin()
        for _ in range(rnd.randint(1, 5)):
            key = rnd.choice(KEYS)
            current = batch.get(key)
            try:
                if current is None:
                    change = batch.create(key, rnd.randbytes(3))
                elif rnd.random() < 0.3:
                    change = batch.delete(key, rnd.choice([0, current.mod_revision]))
                else:
                    change = batch.update(key, rnd.randbytes(3), current.mod_revision)
            except StorageError:
                raise AssertionError("model and core disagree") from None
            if change.kv is None:
                del state[key]
            else:
                state[key] = change.kv
            snapshots[change.revision] = dict(state)
            changes.append(change)
        core.commit(batch)
    return core, snapshots, changes


def expected(snapshot: dict[str, KeyValue], prefix: str) -> list[KeyValue]:
    return [snapshot[k] for k in sorted(snapshot) if k.startswith(prefix)]


@pytest.mark.parametrize("seed", range(5))
def test_list_matches_the_model_at_every_revision(seed: int) -> None:
    core, snapshots, _ = random_history(seed)
    rnd = random.Random(seed)
    for revision, snapshot in snapshots.items():
        for prefix in PREFIXES:
            if revision == 0:
                continue
            result = core.list(prefix, revision=revision)
            assert result.items == expected(snapshot, prefix), (revision, prefix)
            assert result.revision == revision and not result.more
            limit = rnd.randint(1, 4)  # paging gives the same items
            paged: list[KeyValue] = []
            page = core.list(prefix, revision=revision, limit=limit)
            paged += page.items
            while page.more:
                assert len(page.items) == limit
                page = core.list(prefix, revision=revision, limit=limit, start_after=paged[-1].key)
                paged += page.items
            assert paged == result.items
    assert core.list("").items == expected(snapshots[core.revision], "")
    with pytest.raises(FutureRevisionError):
        core.list("", revision=core.revision + 1)


@pytest.mark.parametrize("seed", range(5))
def test_compaction_keeps_later_snapshots_and_drops_exactly_the_garbage(seed: int) -> None:
    core, snapshots, changes = random_history(seed)
    rows = {change.revision for change in changes}  # the log a persistent backend would hold
    point = random.Random(seed).randint(core.revision // 4, core.revision // 2)
    for target in (point, point + 7, core.revision):
        rows -= set(core.compaction_garbage(target))
        core.compact(target)
        # What survives at or below the compacted revision is exactly the snapshot at it.
        assert sorted(r for r in rows if r <= target) == sorted(
            kv.mod_revision for kv in snapshots[target].values()
        )
        assert {r for r in rows if r > target} == {c.revision for c in changes if c.revision > target}
        with pytest.raises(CompactedError):
            core.list("", revision=target - 1)
        with pytest.raises(CompactedError):
            core.watch("", target - 1)
        for revision in range(target, core.revision + 1):
            assert core.list("/a/", revision=revision).items == expected(snapshots[revision], "/a/")
    with pytest.raises(CompactedError):
        core.compact(core.revision)
    assert core.history_size == 0


def test_restore_rebuilds_the_same_state() -> None:
    core, snapshots, changes = random_history(11)
    point = core.revision // 2
    core.compact(point)
    live = list(snapshots[point].values())
    restored = MVCC()
    restored.restore(compacted=point, live=live, changes=[c for c in changes if c.revision > point])
    assert (restored.revision, restored.compacted) == (core.revision, point)
    for revision in (point, point + 1, core.revision):
        assert restored.list("", revision=revision) == core.list("", revision=revision)
    for key in KEYS:  # create chaining survives too
        assert restored.deleted_at(key) == core.deleted_at(key)


def test_batch_conflicts_see_staged_writes_and_stale_batches_are_refused() -> None:
    core = MVCC()
    batch = core.begin()
    created = batch.create("/k", b"1")
    updated = batch.update("/k", b"2", created.revision)
    assert updated.prev == created.kv and updated.revision == created.revision + 1
    assert core.get("/k") is None  # nothing visible before commit
    stale = core.begin()
    stale.create("/other", b"x")
    core.commit(batch)
    assert core.get("/k") == KeyValue("/k", b"2", 1, 2)
    with pytest.raises(RuntimeError):
        core.commit(stale)
    with pytest.raises(TypeError):
        core.begin().create("/s", "not bytes")  # type: ignore[arg-type]


def test_create_after_delete_chains_to_the_tombstone() -> None:
    core = MVCC()
    batch = core.begin()
    batch.create("/k", b"1")
    gone = batch.delete("/k")
    again = batch.create("/k", b"2")
    core.commit(batch)
    assert again.prev is None and again.prev_revision == gone.revision
    assert core.deleted_at("/k") == 0  # live again
    batch = core.begin()
    tomb = batch.delete("/k")
    core.commit(batch)
    assert core.deleted_at("/k") == tomb.revision
    core.compact(tomb.revision)
    assert core.deleted_at("/k") == 0  # the tombstone row is gone after compaction


async def next_of(it: AsyncIterator[WatchEvent]) -> WatchEvent:
    return await asyncio.wait_for(anext(it), 2.0)


def write(core: MVCC, key: str, value: bytes = b"v") -> Change:
    batch = core.begin()
    current = batch.get(key)
    change = batch.create(key, value) if current is None else batch.update(key, value, current.mod_revision)
    core.commit(batch)
    return change


async def test_watch_replays_history_then_goes_live_without_duplicates() -> None:
    core = MVCC()
    first = write(core, "/w/a")
    write(core, "/x/a")
    second = write(core, "/w/b")
    watcher = core.watch("/w/", first.revision - 1)
    watcher.feed([first.event, second.event])  # already replayed: dropped
    third = write(core, "/w/a", b"v2")
    it = aiter(watcher)
    got = [await next_of(it) for _ in range(3)]
    assert [e.revision for e in got] == [first.revision, second.revision, third.revision]
    assert watcher.backlog == 0
    await watcher.close()
    assert core.watcher_count == 0


async def test_a_watcher_too_far_behind_is_ended() -> None:
    core = MVCC(max_watch_backlog=5)
    slow = core.watch("/w/")
    fast = core.watch("/w/")
    it_fast = aiter(fast)
    for i in range(5):
        write(core, f"/w/{i}")
        await next_of(it_fast)
    write(core, "/w/5")  # the sixth unconsumed event
    assert core.watcher_count == 1
    with pytest.raises(WatchClosedError):
        await next_of(aiter(slow))
    assert (await next_of(it_fast)).key == "/w/5"
    await fast.close()


async def test_close_wakes_a_waiting_consumer_and_core_close_ends_all() -> None:
    core = MVCC()
    one, two = core.watch(""), core.watch("/p/")

    async def drain(watcher: object) -> list[WatchEvent]:
        return [event async for event in watcher]  # type: ignore[attr-defined]

    task_one, task_two = asyncio.create_task(drain(one)), asyncio.create_task(drain(two))
    await asyncio.sleep(0)
    write(core, "/p/a")
    await asyncio.sleep(0)
    await one.close()
    assert [e.key for e in await asyncio.wait_for(task_one, 1)] == ["/p/a"]
    core.close()
    assert [e.key for e in await asyncio.wait_for(task_two, 1)] == ["/p/a"]
    assert core.watcher_count == 0


def test_sorted_keys_against_a_model() -> None:
    rnd = random.Random(3)
    keys = SortedKeys()
    model: set[str] = set()
    pool = [f"k{rnd.randrange(10 * CHUNK):06d}" for _ in range(8 * CHUNK)]
    for step in range(20 * CHUNK):
        key = rnd.choice(pool)
        if rnd.random() < 0.6:
            keys.add(key)
            model.add(key)
        else:
            keys.discard(key)
            model.discard(key)
        if step % 997 == 0:
            ordered = sorted(model)
            assert list(keys) == ordered and len(keys) == len(model)
            probe = rnd.choice(pool)
            assert list(keys.iter_from(probe)) == [k for k in ordered if k >= probe]
            assert list(keys.iter_from(probe, inclusive=False)) == [k for k in ordered if k > probe]
            assert (probe in keys) == (probe in model)
    assert list(SortedKeys(pool)) == sorted(set(pool))
    assert list(SortedKeys().iter_from("")) == []


def test_a_batch_staged_on_a_pending_parent_sees_its_writes() -> None:
    core = MVCC()
    parent = core.begin()
    created = parent.create("/k", b"1")
    gone = parent.delete("/k")
    child = core.begin(parent)
    again = child.create("/k", b"2")
    assert again.revision == gone.revision + 1 and again.prev_revision == gone.revision
    bumped = child.update("/k", b"3", again.revision)
    with pytest.raises(RuntimeError):
        core.commit(child)  # children land after their parent
    core.commit(parent)
    assert parent.settled and core.get("/k") is None
    core.commit(child)
    assert core.get("/k") == KeyValue("/k", b"3", again.revision, bumped.revision)
    assert core.revision == bumped.revision == created.revision + 3
