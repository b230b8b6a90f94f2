"""SQLite-only behaviour: durability across reopen, grouped commits, compaction of the log file."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from flotilla.storage import open_store
from flotilla.storage import sqlite as sqlite_module
from flotilla.storage.base import (
    CompactedError,
    ConflictError,
    KeyExistsError,
    KeyValue,
    StorageError,
    WatchEvent,
)
from flotilla.storage.sqlite import SQLiteStore


def log_ids(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM log ORDER BY id")]


async def test_reopen_keeps_data_and_revision(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = await SQLiteStore.open(path)
    r1 = await store.create("/k/a", b"a1")
    r2 = await store.update("/k/a", b"a2", r1)
    r3 = await store.create("/k/b", b"b1")
    r4, _ = await store.delete("/k/b")
    r5 = await store.create("/k/c", bytes(range(256)))
    await store.close()

    store = await SQLiteStore.open(path)
    try:
        assert await store.current_revision() == r5
        assert await store.compacted_revision() == 0
        assert (await store.list("/k/")).items == [
            KeyValue("/k/a", b"a2", r1, r2),
            KeyValue("/k/c", bytes(range(256)), r5, r5),
        ]
        assert [kv.key for kv in (await store.list("/k/", revision=r3)).items] == ["/k/a", "/k/b"]
        assert await store.get("/k/b") is None
        watcher = await store.watch("/k/", after_revision=r2)
        replay = [await asyncio.wait_for(anext(aiter(watcher)), 5.0) for _ in range(3)]
        await watcher.close()
        assert replay == [
            WatchEvent("PUT", "/k/b", b"b1", r3, r3, None),
            WatchEvent("DELETE", "/k/b", b"b1", r4, r3, b"b1"),
            WatchEvent("PUT", "/k/c", bytes(range(256)), r5, r5, None),
        ]
        assert await store.create("/k/b", b"b2") == r5 + 1  # the counter continues
    finally:
        await store.close()


async def test_reopen_after_compaction(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = await SQLiteStore.open(path)
    r1 = await store.create("/k/a", b"a1")
    r2 = await store.update("/k/a", b"a2", r1)
    await store.create("/k/gone", b"x")
    r4, _ = await store.delete("/k/gone")
    r5 = await store.update("/k/a", b"a3", r2)
    await store.compact(r4)
    await store.close()

    store = await SQLiteStore.open(path)
    try:
        assert await store.compacted_revision() == r4
        assert await store.current_revision() == r5
        with pytest.raises(CompactedError):
            await store.list("/k/", revision=r4 - 1)
        assert (await store.list("/k/", revision=r4)).items == [KeyValue("/k/a", b"a2", r1, r2)]
        assert (await store.list("/k/")).items == [KeyValue("/k/a", b"a3", r1, r5)]
        watcher = await store.watch("/k/", after_revision=r4)
        assert await asyncio.wait_for(anext(aiter(watcher)), 5.0) == WatchEvent(
            "PUT", "/k/a", b"a3", r5, r1, b"a2"
        )
        await watcher.close()
        assert await store.create("/k/gone", b"again") == r5 + 1
    finally:
        await store.close()


async def test_revision_survives_compacting_everything_away(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = await SQLiteStore.open(path)
    await store.create("/k/a", b"1")
    rev, _ = await store.delete("/k/a")
    await store.compact(rev)
    await store.close()
    assert log_ids(path) == []

    store = await SQLiteStore.open(path)
    try:
        assert await store.current_revision() == rev
        assert await store.create("/k/a", b"2") == rev + 1
    finally:
        await store.close()


async def test_compaction_drops_superseded_rows_and_tombstones(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = await SQLiteStore.open(path)
    try:
        a = created = await store.create("/k/a", b"1")
        for i in range(5):
            a = await store.update("/k/a", str(i).encode(), a)
        await store.create("/k/b", b"1")
        await store.delete("/k/b")
        keep = await store.create("/k/c", b"1")
        mid = await store.current_revision()
        later = await store.update("/k/c", b"2", keep)  # supersedes /k/c@keep after the compaction point
        await store.compact(mid)
        # At or below the compacted revision only the values visible at it remain.
        assert log_ids(path) == [a, keep, later]
        assert (await store.list("/k/", revision=mid)).items == [
            KeyValue("/k/a", b"4", created, a),
            KeyValue("/k/c", b"1", keep, keep),
        ]
        await store.compact(later)
        assert log_ids(path) == [a, later]
    finally:
        await store.close()


async def test_concurrent_writes_are_grouped_into_few_transactions(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "db.sqlite")
    try:
        revs = await asyncio.gather(*(store.create(f"/g/{i}", b"x" * 2048) for i in range(200)))
        assert sorted(revs) == list(range(1, 201))
        assert store.writes == 200
        assert 1 <= store.transactions < 200
    finally:
        await store.close()
    reopened = await SQLiteStore.open(tmp_path / "db.sqlite")
    try:
        assert len((await reopened.list("/g/")).items) == 200
    finally:
        await reopened.close()


async def test_conflicts_inside_one_group_see_earlier_writes_of_the_group(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "db.sqlite")
    try:
        rev = await store.create("/k/a", b"0")
        results = await asyncio.gather(
            store.update("/k/a", b"1", rev),
            store.update("/k/a", b"2", rev),
            store.create("/k/b", b"1"),
            store.create("/k/b", b"2"),
            return_exceptions=True,
        )
        assert isinstance(results[0], int) and isinstance(results[2], int)
        assert isinstance(results[1], ConflictError)
        assert isinstance(results[3], KeyExistsError)
        assert store.transactions == 2
        assert (await store.get("/k/a")).value == b"1"  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_failed_commit_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await SQLiteStore.open(tmp_path / "db.sqlite")
    try:
        rev = await store.create("/k/a", b"1")
        watcher = await store.watch("/k/")

        def broken(*args: object) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(store._db, "write", broken)
        with pytest.raises(StorageError, match="disk I/O error"):
            await store.update("/k/a", b"2", rev)
        assert await store.get("/k/a") == KeyValue("/k/a", b"1", rev, rev)
        assert await store.current_revision() == rev
        monkeypatch.undo()

        again = await store.update("/k/a", b"3", rev)
        assert again == rev + 1
        event = await asyncio.wait_for(anext(aiter(watcher)), 5.0)
        assert (event.revision, event.value) == (again, b"3")  # the failed write was never announced
        await watcher.close()
    finally:
        await store.close()


async def test_writes_after_close_fail(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "db.sqlite")
    pending = [asyncio.ensure_future(store.create(f"/k/{i}", b"x")) for i in range(10)]
    await asyncio.sleep(0)
    await store.close()
    assert all(isinstance(f.result(), int) for f in pending)  # queued writes were finished
    with pytest.raises(StorageError):
        await store.create("/k/late", b"x")


async def test_open_store_url(tmp_path: Path) -> None:
    store = await open_store("sqlite://", tmp_path / "data")
    try:
        assert isinstance(store, SQLiteStore)
        await store.create("/k", b"v")
    finally:
        await store.close()
    assert (tmp_path / "data" / "flotilla.db").exists()


async def test_a_write_cancelled_before_it_is_staged_is_not_applied(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "db.sqlite")
    try:
        before = await store.current_revision()
        task = asyncio.create_task(store.create("/k/cancelled", b"x"))
        await asyncio.sleep(0)  # the write is queued; the writer task has not run yet
        task.cancel()
        kept = await store.create("/k/kept", b"y")
        assert task.cancelled()
        assert kept == before + 1
        assert await store.get("/k/cancelled") is None
    finally:
        await store.close()


async def test_a_failed_batch_fails_the_batches_staged_on_top_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "db.sqlite"
    monkeypatch.setattr(sqlite_module, "SYNC_MAX_ROWS", 0)  # every batch through the writer thread (pipelined)
    store = await SQLiteStore.open(path)
    try:
        rev = await store.create("/k/a", b"0")
        real_write = store._db.write
        calls = 0

        def flaky(*args: Any) -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                time.sleep(0.3)  # the next batch gets staged on top of this one meanwhile
                raise sqlite3.OperationalError("disk I/O error")
            real_write(*args)

        monkeypatch.setattr(store._db, "write", flaky)
        first = asyncio.ensure_future(store.update("/k/a", b"1", rev))
        await asyncio.sleep(0.1)
        on_top = asyncio.ensure_future(store.update("/k/a", b"2", rev + 1))  # valid only after `first`
        other = asyncio.ensure_future(store.create("/k/b", b"x"))
        results = await asyncio.gather(first, on_top, other, return_exceptions=True)
        assert all(isinstance(r, StorageError) for r in results), results
        assert calls == 2
        assert await store.get("/k/a") == KeyValue("/k/a", b"0", rev, rev)
        assert await store.get("/k/b") is None
        assert await store.current_revision() == rev

        assert await store.update("/k/a", b"3", rev) == rev + 1  # the store recovers
    finally:
        await store.close()
    store = await SQLiteStore.open(path)
    try:
        assert (await store.list("/k/")).items == [KeyValue("/k/a", b"3", rev, rev + 1)]
    finally:
        await store.close()


async def test_small_batches_are_written_on_the_loop_and_big_ones_on_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = await SQLiteStore.open(path)
    try:
        rev = await store.create("/k/a", b"0")
        rev = await store.update("/k/a", b"1", rev)
        assert store.sync_transactions == store.transactions == 2
        revs = await asyncio.gather(*(store.create(f"/g/{i}", b"x") for i in range(sqlite_module.SYNC_MAX_ROWS + 1)))
        assert sorted(revs) == list(range(rev + 1, rev + 2 + sqlite_module.SYNC_MAX_ROWS))
        assert store.transactions == 3 and store.sync_transactions == 2  # too many rows: the thread wrote them
    finally:
        await store.close()
    store = await SQLiteStore.open(path)
    try:
        assert (await store.get("/k/a")).value == b"1"  # type: ignore[union-attr]
        assert len((await store.list("/g/")).items) == sqlite_module.SYNC_MAX_ROWS + 1
    finally:
        await store.close()


async def test_the_wal_is_checkpointed_on_the_thread_and_stays_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "CHECKPOINT_ROWS", 15)
    path = tmp_path / "db.sqlite"
    store = await SQLiteStore.open(path)
    try:
        for i in range(400):
            await store.create(f"/k/{i}", b"v" * 4096)  # one at a time: on the loop, but every 15th on the thread
        assert store._db.checkpoints >= 20
        assert store.sync_transactions < store.transactions == 400
        wal = Path(str(path) + "-wal")
        assert wal.stat().st_size < 1024 * 1024  # 1.6 MB went through it: written from its start again
        with sqlite3.connect(path) as conn:  # another reader sees every committed row
            assert conn.execute("SELECT COUNT(*) FROM log").fetchone()[0] == 400
    finally:
        await store.close()
    store = await SQLiteStore.open(path)
    try:
        assert len((await store.list("/k/")).items) == 400
    finally:
        await store.close()


async def test_updates_do_not_store_the_old_value_and_reopen_still_replays_it(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = await SQLiteStore.open(path)
    r1 = await store.create("/k/a", b"a1")
    r2 = await store.update("/k/a", b"a2", r1)
    r3 = await store.create("/k/b", b"b1")
    r4 = await store.update("/k/a", b"a3", r2)
    r5 = await store.update("/k/b", b"b2", r3)
    r6, _ = await store.delete("/k/a")
    await store.close()
    with sqlite3.connect(path) as conn:
        old_values = dict(conn.execute("SELECT id, old_value FROM log"))
    assert old_values == {r1: None, r2: None, r3: None, r4: None, r5: None, r6: b"a3"}  # a tombstone keeps it

    store = await SQLiteStore.open(path)
    try:
        watcher = await store.watch("/k/", after_revision=r1)
        replay = [await asyncio.wait_for(anext(aiter(watcher)), 5.0) for _ in range(5)]
        await watcher.close()
        assert replay == [
            WatchEvent("PUT", "/k/a", b"a2", r2, r1, b"a1"),
            WatchEvent("PUT", "/k/b", b"b1", r3, r3, None),
            WatchEvent("PUT", "/k/a", b"a3", r4, r1, b"a2"),
            WatchEvent("PUT", "/k/b", b"b2", r5, r3, b"b1"),
            WatchEvent("DELETE", "/k/a", b"a3", r6, r1, b"a3"),
        ]
    finally:
        await store.close()


async def test_a_log_whose_updates_carry_their_old_value_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = await SQLiteStore.open(path)
    r1 = await store.create("/k/a", b"a1")
    r2 = await store.update("/k/a", b"a2", r1)
    await store.close()
    with sqlite3.connect(path) as conn:  # as an earlier version wrote it
        conn.execute("UPDATE log SET old_value = ? WHERE id = ?", (b"a1", r2))
    store = await SQLiteStore.open(path)
    try:
        watcher = await store.watch("/k/", after_revision=r1)
        assert await asyncio.wait_for(anext(aiter(watcher)), 5.0) == WatchEvent("PUT", "/k/a", b"a2", r2, r1, b"a1")
        await watcher.close()
    finally:
        await store.close()


async def test_the_log_has_no_index_but_the_revision_and_an_old_one_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    with sqlite3.connect(path) as conn:  # a log as an earlier version created it
        conn.executescript(
            "CREATE TABLE log (id INTEGER PRIMARY KEY, name TEXT NOT NULL, created INTEGER NOT NULL, "
            "deleted INTEGER NOT NULL, create_revision INTEGER NOT NULL, prev_revision INTEGER NOT NULL, "
            "value BLOB NOT NULL, old_value BLOB);"
            "CREATE UNIQUE INDEX log_name_prev_revision ON log (name, prev_revision);"
            "INSERT INTO log VALUES (1, '/k/a', 1, 0, 1, 0, x'6131', NULL);"
        )
    store = await SQLiteStore.open(path)
    try:
        assert await store.get("/k/a") == KeyValue("/k/a", b"a1", 1, 1)
        assert await store.update("/k/a", b"a2", 1) == 2
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        indexes = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'log'").fetchall()
    assert indexes == []


async def test_refused_writes_leave_no_reference_cycles_behind(tmp_path: Path) -> None:
    """A write refused on a batch (a conflict, a key that exists) is freed with its batch at once: its exception
    does not hold the batch and its requests in a cycle that waits for the garbage collector."""
    store = await SQLiteStore.open(tmp_path / "db.sqlite")
    try:
        rev = await store.create("/k/a", b"0")

        async def refused() -> None:
            for _ in range(20):
                results = await asyncio.gather(
                    store.update("/k/a", b"1", rev + 1000),
                    store.create("/k/a", b"2"),
                    store.create("/k/c", b"x") if _ == 0 else store.get("/k/c"),
                    return_exceptions=True,
                )
                assert isinstance(results[0], ConflictError) and isinstance(results[1], KeyExistsError)
                del results

        await refused()  # warm up: whatever asyncio and the store cache once
        gc.collect()
        gc.disable()
        try:
            await refused()
            unreachable = gc.collect()
        finally:
            gc.enable()
        assert unreachable == 0
    finally:
        await store.close()
