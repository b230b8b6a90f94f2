"""An in-process store with nothing persisted (tests, demos)."""

from __future__ import annotations

from collections.abc import Callable

from flotilla.storage.fanout import DEFAULT_MAX_BACKLOG
from flotilla.storage.mvcc import MVCC, Batch, Change, MVCCStore


class MemoryStore(MVCCStore):
    """The MVCC core with every write committed at once (no awaits, so writes are atomic)."""

    def __init__(self, *, max_watch_backlog: int = DEFAULT_MAX_BACKLOG) -> None:
        self._core = MVCC(max_watch_backlog=max_watch_backlog)
        self._closed = False

    async def _write(self, op: Callable[[Batch], Change]) -> Change:
        self._check_open()
        batch = self._core.begin()
        change = op(batch)
        self._core.commit(batch)
        return change

    async def compact(self, revision: int) -> None:
        self._check_open()
        self._core.compact(revision)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._core.close()
