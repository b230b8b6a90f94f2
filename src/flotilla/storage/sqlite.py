"""A single-process store persisted to SQLite as an append-only log (kine's layout).

Every write is one row of ``log`` whose ``id`` is its revision. This process is the only writer:
the state lives in memory (the MVCC core, loaded at open), CAS checks run there, and writes are
grouped: callers queue their write and await a future; the writer stages everything queued as one
batch, appends all its rows in ONE transaction on a dedicated thread, and only after the commit
makes the writes visible, fans out their watch events and resolves the futures.

To keep both the event loop and the SQLite thread busy, the next batch is staged on top of the
one being written (at most ``MAX_IN_FLIGHT`` batches). Batches land in order; the thread refuses a
batch whose first revision does not follow the last one committed, so when a transaction fails,
every batch staged on top of it fails too and nothing is ever made visible out of order.

A small batch with nothing in flight (the common case outside bursts) is written on the event loop
itself: an SQLite commit in WAL mode with ``synchronous=NORMAL`` is a few tens of microseconds and no
fsync, much less than handing it to a thread and back (the thread and the loop then pass the GIL to
each other at every row). What could stall the loop, the checkpoints that copy the WAL into the
database file and fsync it, never run there: automatic checkpoints are off, and after
``CHECKPOINT_ROWS`` rows the next batch goes to the thread, which checkpoints after its commit
(as SQLite's automatic checkpoint would, so the WAL is then written from its start again).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from flotilla.storage.base import KeyValue, StorageError, WatchEvent
from flotilla.storage.fanout import DEFAULT_MAX_BACKLOG
from flotilla.storage.mvcc import MVCC, Batch, Change, MVCCStore

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    created INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision INTEGER NOT NULL,
    value BLOB NOT NULL,
    old_value BLOB
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
DROP INDEX IF EXISTS log_name_prev_revision;
"""
# No index but the revision: the log is only ever read in revision order, and kine's unique (name, prev_revision)
# index guards against two writers racing on a key, which cannot happen here (one writer, compare-and-swap checked
# in memory; a second process writing the same file would collide on the revision first). Keeping it cost about
# a third of the CPU of every insert.
_COLUMNS = "id, name, created, deleted, create_revision, prev_revision, value, old_value"
_INSERT = f"INSERT INTO log ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_SET_COMPACTED = (
    "INSERT INTO meta (name, value) VALUES ('compacted_revision', ?) "
    "ON CONFLICT (name) DO UPDATE SET value = MAX(value, excluded.value)"
)

Row = tuple[int, str, int, int, int, int, bytes, bytes | None]

COMPACT_CHUNK = 10_000  # revisions compacted per transaction, so writers are not stalled for long
MAX_IN_FLIGHT = 2  # batches staged but not landed: one being written, one waiting for it
SYNC_MAX_ROWS = 32  # a batch of at most this many rows, with nothing in flight, is written on the event loop
CHECKPOINT_ROWS = 1000  # rows between two checkpoints (SQLite's own default: every 1000 pages of WAL)


def row_of(change: Change) -> Row:
    """The log row recording ``change``.

    An update does not store the value it replaced (``old_value`` NULL): that value is the key's row at
    ``prev_revision``, which the log keeps as long as this row is above the compacted revision (compaction
    drops a superseded value only once the change superseding it is compacted too), so loading takes it from
    there. Half the bytes per update, and a row of a few kB then fits in one database page.
    """
    kv, prev = change.kv, change.prev
    if kv is None:
        assert prev is not None
        return (change.revision, change.key, 0, 1, prev.create_revision, prev.mod_revision, b"", prev.value)
    if prev is None:
        return (change.revision, change.key, 1, 0, change.revision, change.prev_revision, kv.value, None)
    return (change.revision, change.key, 0, 0, kv.create_revision, prev.mod_revision, kv.value, None)


def change_of(row: Row, previous: bytes | None = None) -> Change:
    """The change a log row records (inverse of :func:`row_of`). ``previous``: the value of the key's row at
    ``prev_revision``, for a row that does not carry its old value."""
    revision, key, created, deleted, create_revision, prev_revision, value, old_value = row
    if created and not deleted:
        event = WatchEvent("PUT", key, value, revision, revision, None)
        return Change(event, KeyValue(key, value, revision, revision), None, prev_revision)
    if old_value is None:
        old_value = previous
    prev = KeyValue(key, old_value if old_value is not None else b"", create_revision, prev_revision)
    if deleted:
        event = WatchEvent("DELETE", key, prev.value, revision, create_revision, prev.value)
        return Change(event, None, prev, prev_revision)
    event = WatchEvent("PUT", key, value, revision, create_revision, prev.value)
    return Change(event, KeyValue(key, value, create_revision, revision), prev, prev_revision)


def _create_private(path: Path) -> None:
    """Create the database file 0600 if it is missing, and narrow an existing one (and its -wal, -shm and -journal
    files) to 0600: it holds every object, Secrets included. SQLite creates the -wal and -shm files with the mode of
    the database file, so they are 0600 from then on."""
    from flotilla.files import PRIVATE_FILE, make_private

    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        pass
    for p in (path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))):
        make_private(p)


class LogDB:
    """The SQLite file. Not thread-safe: one call at a time, on the store's writer thread or (a small batch with
    nothing in flight) on the event loop's."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.last_revision = 0  # the newest revision committed to the file
        self.checkpoints = 0
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError("sqlite database is not open")
        return self._conn

    def load(self, max_watch_backlog: int) -> MVCC:
        """Open (creating if needed) and read the whole log into a new MVCC core."""
        _create_private(Path(self.path))
        # one writer connection, used by one thread at a time (the event loop's or the writer thread)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn = conn
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints: see write(), only on the writer thread
        conn.executescript(_SCHEMA)
        found = conn.execute("SELECT value FROM meta WHERE name = 'compacted_revision'").fetchone()
        compacted = int(found[0]) if found else 0
        live: list[KeyValue] = []
        changes: list[Change] = []
        latest: dict[str, tuple[int, bytes]] = {}  # key -> (revision, value) of its newest row so far
        for row in conn.execute(f"SELECT {_COLUMNS} FROM log ORDER BY id"):
            key = row[1]
            if row[0] > compacted:
                found = latest.get(key)
                changes.append(change_of(row, found[1] if found is not None and found[0] == row[5] else None))
            elif not row[3]:  # at or below the compacted revision only current values remain
                live.append(KeyValue(key, row[6], row[4], row[0]))
            latest[key] = (row[0], row[6])
        core = MVCC(max_watch_backlog=max_watch_backlog)
        core.restore(compacted=compacted, live=live, changes=changes)
        self.last_revision = core.revision
        return core

    def write(self, rows: list[Row], garbage: list[int], compacted: int | None, checkpoint: bool = False) -> None:
        """Append ``rows``, drop ``garbage`` ids and record ``compacted``, in one transaction; then, with
        ``checkpoint``, copy the WAL into the database file.

        Refuses rows that do not directly follow the last revision committed (their batch was
        staged on top of one that failed).
        """
        if rows and rows[0][0] != self.last_revision + 1:
            raise StorageError(
                f"an earlier write failed: revision {rows[0][0]} does not follow {self.last_revision}"
            )
        if not rows and not garbage and compacted is None:
            return
        conn = self.conn
        conn.execute("BEGIN")
        try:
            if rows:
                conn.executemany(_INSERT, rows)
            if garbage:
                conn.executemany("DELETE FROM log WHERE id = ?", [(i,) for i in garbage])
            if compacted is not None:
                conn.execute(_SET_COMPACTED, (compacted,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if rows:
            self.last_revision = rows[-1][0]
        if checkpoint:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()  # the last connection to close checkpoints the WAL and removes it
            self._conn = None


def _handed_over(exc: Exception) -> Exception:
    """``exc`` as the caller gets it: a refusal (a conflict, a key that exists or is missing) without its
    traceback, any other exception (a bug) with it.

    The traceback's frames lead back to the staging frame, which holds the batch and every request on it, while
    the batch's outcomes hold ``exc``: a reference cycle that only the garbage collector frees. Under load, with a refusal
    in most batches, that kept thousands of requests, futures and batches alive until the next collection and
    made young collections cost tens of milliseconds. A refusal's traceback says nothing its type does not."""
    if isinstance(exc, StorageError):
        return exc.with_traceback(None)
    return exc


@dataclass(slots=True)
class _Request:
    future: asyncio.Future[Change | None]
    op: Callable[[Batch], Change] | None = None  # a write, staged on the writer's batch
    compact_to: int = 0  # or a compaction step


@dataclass(eq=False, slots=True)
class _Flight:
    """A staged batch on its way to the database."""

    batch: Batch
    outcomes: list[tuple[_Request, Change | Exception | None]] = field(default_factory=list)
    rows: int = 0
    compact_to: int = 0
    doomed: bool = False  # staged on a batch whose transaction failed


class SQLiteStore(MVCCStore):
    """The MVCC core persisted to an SQLite log with grouped, pipelined commits."""

    def __init__(self, db: LogDB, executor: ThreadPoolExecutor, core: MVCC) -> None:
        self.path = db.path
        self.transactions = 0  # transactions committed by this instance
        self.writes = 0  # rows appended by this instance
        self.sync_transactions = 0  # of which written on the event loop
        self._db = db
        self._executor = executor
        self._core = core
        self._unchecked_rows = 0  # rows written since the last checkpoint
        self._loop = asyncio.get_running_loop()
        self._queue: list[_Request] = []
        self._stage_scheduled = False
        self._in_flight: deque[_Flight] = deque()
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path, *, max_watch_backlog: int = DEFAULT_MAX_BACKLOG) -> SQLiteStore:
        """Open the database at ``path`` (created if missing) and load it."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flotilla-sqlite")
        db = LogDB(path)
        try:
            core = await asyncio.get_running_loop().run_in_executor(executor, db.load, max_watch_backlog)
        except BaseException:
            executor.submit(db.close)
            executor.shutdown(wait=False)
            raise
        return cls(db, executor, core)

    # -- the grouped writer --------------------------------------------------------------------

    async def _submit(self, request: _Request) -> Change | None:
        self._check_open()
        self._queue.append(request)
        self._idle.clear()
        if not self._stage_scheduled:  # everything queued in this loop iteration forms one batch
            self._stage_scheduled = True
            self._loop.call_soon(self._stage)
        future = request.future
        try:
            return await future
        finally:
            # a refused write's exception keeps this frame in its traceback and the future keeps the exception:
            # without these names the frame does not point back at them (no reference cycle for the collector)
            del request, future

    async def _write(self, op: Callable[[Batch], Change]) -> Change:
        change = await self._submit(_Request(self._loop.create_future(), op))
        assert change is not None
        return change

    def _stage(self) -> None:
        """Stage everything queued as one batch and hand its rows to the SQLite thread."""
        self._stage_scheduled = False
        if not self._queue or len(self._in_flight) >= MAX_IN_FLIGHT:
            return  # the next landing stages again
        requests, self._queue = self._queue, []
        core = self._core
        parent = next((f.batch for f in reversed(self._in_flight) if not f.doomed), None)
        flight = _Flight(core.begin(parent))
        for request in requests:
            if request.future.done():
                continue  # its caller was cancelled before the write was staged
            if request.op is None:
                flight.compact_to = max(flight.compact_to, request.compact_to)
                flight.outcomes.append((request, None))
                continue
            try:
                flight.outcomes.append((request, request.op(flight.batch)))
            except Exception as exc:  # handed to the caller
                flight.outcomes.append((request, _handed_over(exc)))
        garbage: list[int] = []
        if flight.compact_to > core.compacted:
            garbage = core.compaction_garbage(flight.compact_to)
        else:
            flight.compact_to = 0
        rows = [row_of(change) for change in flight.batch.changes]
        flight.rows = len(rows)
        checkpoint = False
        if rows:
            self._unchecked_rows += len(rows)
            if self._unchecked_rows >= CHECKPOINT_ROWS:
                checkpoint = True
                self._unchecked_rows = 0
        if not self._in_flight and not garbage and not checkpoint and len(rows) <= SYNC_MAX_ROWS:
            self._write_here(flight, rows)
            return
        self._in_flight.append(flight)
        if checkpoint:
            written = self._loop.run_in_executor(
                self._executor, self._db.write, rows, garbage, flight.compact_to or None, True
            )
        else:
            written = self._loop.run_in_executor(
                self._executor, self._db.write, rows, garbage, flight.compact_to or None
            )
        written.add_done_callback(partial(self._landed, flight))

    def _write_here(self, flight: _Flight, rows: list[Row]) -> None:
        """Write a small batch on the event loop (nothing is in flight, so the connection is free)."""
        try:
            self._db.write(rows, [], flight.compact_to or None)
        except Exception as exc:
            self._fail(flight, exc)
        else:
            if rows:
                self.sync_transactions += 1
            try:
                self._publish(flight)
            except Exception as exc:  # a bug: still never leave a caller waiting
                self._fail(flight, exc)
        self._after_landing()

    def _after_landing(self) -> None:
        if self._queue and not self._stage_scheduled:
            self._stage_scheduled = True
            self._loop.call_soon(self._stage)
        if not self._queue and not self._in_flight:
            self._idle.set()

    def _landed(self, flight: _Flight, written: asyncio.Future[None]) -> None:
        """A batch's transaction ended (batches land in staging order): publish it or fail it."""
        assert self._in_flight[0] is flight
        self._in_flight.popleft()
        error = StorageError("sqlite write cancelled") if written.cancelled() else written.exception()
        if error is None:
            try:
                self._publish(flight)
            except Exception as exc:  # a bug: still never leave a caller waiting
                self._fail(flight, exc)
        else:
            self._fail(flight, error)
        self._stage()
        if not self._queue and not self._in_flight:
            self._idle.set()

    def _publish(self, flight: _Flight) -> None:
        if flight.rows:
            self.transactions += 1
            self.writes += flight.rows
        self._core.commit(flight.batch)
        if flight.compact_to > self._core.compacted:
            self._core.compact(flight.compact_to)
        for request, outcome in flight.outcomes:
            if request.future.done():
                continue
            if isinstance(outcome, Exception):
                request.future.set_exception(outcome)
            else:
                request.future.set_result(outcome)

    def _fail(self, flight: _Flight, error: BaseException) -> None:
        flight.batch.settle()
        if flight.rows:
            for later in self._in_flight:  # staged on top of this one; the thread refuses them too
                later.doomed = True
        failure = error if isinstance(error, StorageError) else StorageError(f"sqlite write failed: {error}")
        if failure is not error:
            failure.__cause__ = error
        for request, _ in flight.outcomes:
            if not request.future.done():
                request.future.set_exception(failure)

    # -- the Store interface (reads and watches: MVCCStore) ------------------------------------

    async def compact(self, revision: int) -> None:
        self._check_open()
        self._core.check_compact(revision)
        while self._core.compacted < revision:
            step = min(revision, self._core.compacted + COMPACT_CHUNK)
            await self._submit(_Request(self._loop.create_future(), compact_to=step))

    async def close(self) -> None:
        """Finish queued writes, end every watcher and close the database (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._idle.wait()
        self._core.close()
        await asyncio.get_running_loop().run_in_executor(self._executor, self._db.close)
        self._executor.shutdown(wait=False)
