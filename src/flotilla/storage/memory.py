"""An in-process store with nothing persisted (tests, demos)."""

from __future__ import annotations

from collections.abc import Callable

from flotilla.storage.base import KeyValue, ListResult, StorageError, Store, Watcher
from flotilla.storage.fanout import DEFAULT_MAX_BACKLOG
from flotilla.storage.mvcc import MVCC, Batch, Change


class MemoryStore(Store):
    """The MVCC core with every write committed at once (no awaits, so writes are atomic)."""

    def __init__(self, *, max_watch_backlog: int = DEFAULT_MAX_BACKLOG) -> None:
        self._core = MVCC(max_watch_backlog=max_watch_backlog)
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("store is closed")

    def _write(self, op: Callable[[Batch], Change]) -> Change:
        self._check_open()
        batch = self._core.begin()
        change = op(batch)
        self._core.commit(batch)
        return change

    async def create(self, key: str, value: bytes) -> int:
        return self._write(lambda b: b.create(key, value)).revision

    async def get(self, key: str) -> KeyValue | None:
        self._check_open()
        return self._core.get(key)

    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str = "", limit: int = 0
    ) -> ListResult:
        self._check_open()
        return self._core.list(prefix, revision=revision, start_after=start_after, limit=limit)

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        return self._write(lambda b: b.update(key, value, expected_revision)).revision

    async def delete(self, key: str, expected_revision: int = 0) -> tuple[int, KeyValue]:
        change = self._write(lambda b: b.delete(key, expected_revision))
        assert change.prev is not None
        return change.revision, change.prev

    async def watch(self, prefix: str, after_revision: int | None = None) -> Watcher:
        self._check_open()
        return self._core.watch(prefix, after_revision)

    async def current_revision(self) -> int:
        return self._core.revision

    async def compacted_revision(self) -> int:
        return self._core.compacted

    async def compact(self, revision: int) -> None:
        self._check_open()
        self._core.compact(revision)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._core.close()
