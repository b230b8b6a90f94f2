"""The in-memory MVCC core shared by the memory and SQLite stores.

It holds the current value of every key, the history of changes after the compacted revision
(enough to list at an older revision and to replay watches) and the watch fan-out. Writes are
staged in a :class:`Batch` (CAS checks see the batch's own earlier writes) and become visible,
all at once and in revision order, with :meth:`MVCC.commit`. :class:`MVCCStore` answers the Store interface
from a core; a store built on it says how a write is committed.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from flotilla.storage import base
from flotilla.storage.fanout import DEFAULT_MAX_BACKLOG, QueueWatcher, WatchHub
from flotilla.storage.sortedkeys import SortedKeys


@dataclass(frozen=True, slots=True)
class Change:
    """One write: its watch event plus the key's value after and before it."""

    event: base.WatchEvent
    kv: base.KeyValue | None  # the value after the write; None for a delete
    prev: base.KeyValue | None  # the value before the write; None for a create
    # prev.mod_revision; for a create, the revision of the key's previous delete if that is still
    # in history (0 otherwise). Persistent backends use it to chain a key's log rows.
    prev_revision: int

    @property
    def revision(self) -> int:
        return self.event.revision

    @property
    def key(self) -> str:
        return self.event.key


def _revision_of(change: Change) -> int:
    return change.event.revision


def _check_value(value: object) -> None:
    if not isinstance(value, bytes):
        raise TypeError(f"values must be bytes, not {type(value).__name__}")


class Batch:
    """Writes staged on top of the committed state, or on top of a parent batch not committed yet.

    Revisions are assigned in order, from the parent's (or the core's) revision + 1.
    """

    def __init__(self, core: MVCC, parent: Batch | None = None) -> None:
        self._core = core
        self._parent = parent
        self.settled = False  # committed or abandoned: children read the core instead
        self.revision = parent.revision if parent is not None else core.revision
        self.changes: list[Change] = []
        self._staged: dict[str, base.KeyValue | None] = {}
        self._deleted_at: dict[str, int] = {}

    def get(self, key: str) -> base.KeyValue | None:
        if key in self._staged:
            return self._staged[key]
        parent = self._parent
        if parent is not None and not parent.settled:
            return parent.get(key)
        return self._core.get(key)

    def deleted_at(self, key: str) -> int:
        """The revision of ``key``'s last delete still in history (0 if none)."""
        if key in self._deleted_at:
            return self._deleted_at[key]
        parent = self._parent
        if parent is not None and not parent.settled:
            return parent.deleted_at(key)
        return self._core.deleted_at(key)

    def settle(self) -> None:
        """Mark the batch committed (or abandoned) and let go of its parent."""
        self.settled = True
        self._parent = None

    def create(self, key: str, value: bytes) -> Change:
        _check_value(value)
        if self.get(key) is not None:
            raise base.KeyExistsError(key)
        revision = self.revision + 1
        prev_revision = self.deleted_at(key)
        event = base.WatchEvent("PUT", key, value, revision, revision, None)
        return self._stage(Change(event, base.KeyValue(key, value, revision, revision), None, prev_revision))

    def update(self, key: str, value: bytes, expected_revision: int) -> Change:
        _check_value(value)
        current = self._current(key, expected_revision)
        revision = self.revision + 1
        event = base.WatchEvent("PUT", key, value, revision, current.create_revision, current.value)
        kv = base.KeyValue(key, value, current.create_revision, revision)
        return self._stage(Change(event, kv, current, current.mod_revision))

    def delete(self, key: str, expected_revision: int = 0) -> Change:
        current = self._current(key, expected_revision or None)
        revision = self.revision + 1
        event = base.WatchEvent("DELETE", key, current.value, revision, current.create_revision, current.value)
        return self._stage(Change(event, None, current, current.mod_revision))

    def _current(self, key: str, expected_revision: int | None) -> base.KeyValue:
        current = self.get(key)
        if current is None:
            raise base.KeyNotFoundError(key)
        if expected_revision is not None and current.mod_revision != expected_revision:
            raise base.ConflictError(key, expected_revision, current.mod_revision)
        return current

    def _stage(self, change: Change) -> Change:
        self.revision = change.revision
        self._staged[change.key] = change.kv
        if change.kv is None:
            self._deleted_at[change.key] = change.revision
        self.changes.append(change)
        return change


class MVCC:
    """Current state, history since the compacted revision, and watchers of one store."""

    def __init__(self, *, max_watch_backlog: int = DEFAULT_MAX_BACKLOG) -> None:
        self.revision = 0
        self.compacted = 0
        self._kvs: dict[str, base.KeyValue] = {}
        self._keys = SortedKeys()
        self._history: list[Change] = []  # every change after ``compacted``, in revision order
        self._deleted_at: dict[str, int] = {}  # deleted key -> revision of its delete, while in history
        self._hub = WatchHub(max_watch_backlog)

    # -- reads ---------------------------------------------------------------------------------

    def get(self, key: str) -> base.KeyValue | None:
        return self._kvs.get(key)

    def deleted_at(self, key: str) -> int:
        """The revision of ``key``'s last delete if it is still in history and the key is absent, else 0."""
        return self._deleted_at.get(key, 0)

    def __len__(self) -> int:
        return len(self._kvs)

    @property
    def history_size(self) -> int:
        return len(self._history)

    @property
    def watcher_count(self) -> int:
        return len(self._hub)

    def list(self, prefix: str, *, revision: int = 0, start_after: str = "", limit: int = 0) -> base.ListResult:
        """Keys starting with ``prefix`` as of ``revision`` (0 = now), in key order, after ``start_after``."""
        read_revision = self._read_revision(revision)
        # Keys changed after the read revision, mapped to their value at it (None: absent then).
        then: dict[str, base.KeyValue | None] = {}
        if read_revision < self.revision:
            history = self._history
            for i in range(bisect_right(history, read_revision, key=_revision_of), len(history)):
                change = history[i]
                if change.key.startswith(prefix) and change.key not in then:
                    then[change.key] = change.prev
        if start_after >= prefix:
            live = self._keys.iter_from(start_after, inclusive=False)
        else:
            live = self._keys.iter_from(prefix)
        gone = sorted(k for k in then if k not in self._kvs and k > start_after)
        wanted = limit + 1 if limit > 0 else -1
        items: list[base.KeyValue] = []
        for key in heapq.merge(live, gone):
            if not key.startswith(prefix):
                break  # keys with the prefix are contiguous; every ``gone`` key has it
            kv = then[key] if key in then else self._kvs[key]
            if kv is None:
                continue
            items.append(kv)
            if len(items) == wanted:
                break
        more = 0 < limit < len(items)
        if more:
            del items[limit:]
        return base.ListResult(items, read_revision, more)

    def _read_revision(self, revision: int) -> int:
        if revision < 0:
            raise ValueError(f"revision must be >= 0, got {revision}")
        if revision == 0:
            return self.revision
        if revision > self.revision:
            raise base.FutureRevisionError(revision, self.revision)
        if revision < self.compacted:
            raise base.CompactedError(revision, self.compacted)
        return revision

    # -- writes --------------------------------------------------------------------------------

    def begin(self, parent: Batch | None = None) -> Batch:
        """A new batch, staged on ``parent`` (a batch not committed yet) or on the committed state."""
        return Batch(self, parent)

    def commit(self, batch: Batch) -> None:
        """Make the batch's writes visible and hand their events to the watchers."""
        if batch.changes:
            if batch.changes[0].revision != self.revision + 1:
                raise RuntimeError("batch was staged on a stale revision")
            self.apply(batch.changes)
        batch.settle()

    def apply(self, changes: list[Change], *, notify: bool = True) -> None:
        """Apply changes with increasing revisions > ``self.revision`` (no CAS checks)."""
        kvs, keys, deleted_at = self._kvs, self._keys, self._deleted_at
        for change in changes:
            if change.revision <= self.revision:
                raise ValueError(f"change revision {change.revision} <= current {self.revision}")
            key = change.key
            if change.kv is None:
                if kvs.pop(key, None) is not None:
                    keys.discard(key)
                deleted_at[key] = change.revision
            else:
                if key not in kvs:
                    keys.add(key)
                    deleted_at.pop(key, None)
                kvs[key] = change.kv
            self._history.append(change)
            self.revision = change.revision
        if notify:
            self._hub.publish([change.event for change in changes])

    def restore(self, *, compacted: int, live: Iterable[base.KeyValue], changes: Iterable[Change]) -> None:
        """Load persisted state into an empty core: values at or below ``compacted``, then later changes."""
        if self.revision or self._kvs:
            raise RuntimeError("restore needs an empty core")
        kvs = self._kvs
        top = compacted
        for kv in live:
            kvs[kv.key] = kv
            top = max(top, kv.mod_revision)
        for change in changes:
            if change.revision <= top:
                raise ValueError(f"change revision {change.revision} out of order (after {top})")
            top = change.revision
            if change.kv is None:
                kvs.pop(change.key, None)
                self._deleted_at[change.key] = change.revision
            else:
                kvs[change.key] = change.kv
                self._deleted_at.pop(change.key, None)
            self._history.append(change)
        self._keys = SortedKeys(kvs)
        self.compacted = compacted
        self.revision = top

    # -- compaction ----------------------------------------------------------------------------

    def check_compact(self, revision: int) -> None:
        """Raise unless ``compact(revision)`` would be valid now."""
        if revision > self.revision:
            raise base.FutureRevisionError(revision, self.revision)
        if revision <= self.compacted:
            raise base.CompactedError(revision, self.compacted)

    def compaction_garbage(self, revision: int) -> list[int]:
        """Revisions of log rows that compacting at ``revision`` makes useless: tombstones and superseded values.

        A row is garbage once the change that supersedes it is compacted; a key's current value
        is never garbage.
        """
        history = self._history
        garbage: list[int] = []
        for i in range(bisect_right(history, revision, key=_revision_of)):
            change = history[i]
            if change.prev is not None:
                garbage.append(change.prev.mod_revision)
            if change.kv is None:
                garbage.append(change.revision)
        return garbage

    def compact(self, revision: int) -> None:
        """Drop history at and before ``revision``."""
        self.check_compact(revision)
        del self._history[: bisect_right(self._history, revision, key=_revision_of)]
        if self._deleted_at:
            self._deleted_at = {k: r for k, r in self._deleted_at.items() if r > revision}
        self.compacted = revision

    # -- watch ---------------------------------------------------------------------------------

    def watch(self, prefix: str, after_revision: int | None = None) -> QueueWatcher:
        """A watcher of ``prefix`` that first replays kept history after ``after_revision``."""
        after = self.revision if after_revision is None else after_revision
        if after < self.compacted:
            raise base.CompactedError(after, self.compacted)
        watcher = self._hub.open(prefix, after)  # registered first: later commits feed it directly
        history = self._history
        start = bisect_right(history, after, key=_revision_of)
        if start < len(history):
            watcher.feed(history[i].event for i in range(start, len(history)))
        return watcher

    def close(self) -> None:
        """End every watcher."""
        self._hub.close_all()


class MVCCStore(base.Store):
    """A Store whose reads and watches are answered by an MVCC core (``_core``); subclasses commit the writes
    (:meth:`_write`) and implement ``compact`` and ``close``."""

    _core: MVCC
    _closed: bool

    def _check_open(self) -> None:
        if self._closed:
            raise base.StorageError("store is closed")

    async def _write(self, op: Callable[[Batch], Change]) -> Change:
        """Stage ``op`` on a batch, commit it and return its change."""
        raise NotImplementedError

    async def create(self, key: str, value: bytes) -> int:
        return (await self._write(lambda b: b.create(key, value))).revision

    async def get(self, key: str) -> base.KeyValue | None:
        self._check_open()
        return self._core.get(key)

    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str = "", limit: int = 0
    ) -> base.ListResult:
        self._check_open()
        return self._core.list(prefix, revision=revision, start_after=start_after, limit=limit)

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        return (await self._write(lambda b: b.update(key, value, expected_revision))).revision

    async def delete(self, key: str, expected_revision: int = 0) -> tuple[int, base.KeyValue]:
        change = await self._write(lambda b: b.delete(key, expected_revision))
        assert change.prev is not None
        return change.revision, change.prev

    async def watch(self, prefix: str, after_revision: int | None = None) -> base.Watcher:
        self._check_open()
        return self._core.watch(prefix, after_revision)

    async def current_revision(self) -> int:
        return self._core.revision

    async def compacted_revision(self) -> int:
        return self._core.compacted
