"""Watch fan-out: every open watcher has its own queue, fed synchronously by the committing writer."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable

from flotilla.storage.base import WatchClosedError, Watcher, WatchEvent

DEFAULT_MAX_BACKLOG = 100_000


class QueueWatcher(Watcher):
    """A watch on one key prefix, backed by an unbounded-but-policed in-memory queue.

    Events at or below the last revision queued are dropped, so feeding the same event twice
    (replay racing a live commit) cannot duplicate it. A consumer that falls more than
    ``max_backlog`` events behind is ended: its iterator raises :class:`WatchClosedError`.
    """

    def __init__(self, hub: WatchHub, prefix: str, after_revision: int, max_backlog: int) -> None:
        self.prefix = prefix
        self.last_revision = after_revision  # the newest revision queued so far
        self._seen = after_revision  # the newest revision fed to this watcher, matching or not
        self._hub = hub
        self._max_backlog = max_backlog
        self._events: deque[WatchEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._error: str | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def backlog(self) -> int:
        """Events queued but not consumed yet."""
        return len(self._events)

    def feed(self, events: Iterable[WatchEvent]) -> None:
        """Queue the events of ``events`` (in revision order) that match this watch."""
        if self._closed:
            return
        prefix = self.prefix
        last = self.last_revision
        before = len(self._events)
        append = self._events.append
        event = None
        for event in events:
            if event.revision > last and event.key.startswith(prefix):
                append(event)
                last = event.revision
        self.last_revision = last
        if event is not None and event.revision > self._seen:
            self._seen = event.revision
        if len(self._events) > self._max_backlog:
            self.end(
                f"watch on {prefix!r} fell more than {self._max_backlog} events behind; re-list and re-watch"
            )
        elif len(self._events) != before:
            self._wake()

    def end(self, error: str | None = None) -> None:
        """Stop the watch; pending events are dropped. With ``error`` the iterator raises WatchClosedError."""
        if self._closed:
            return
        self._closed = True
        self._error = error
        self._events.clear()
        self._hub.discard(self)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._events:
                return self._events.popleft()
            if self._closed:
                if self._error is not None:
                    raise WatchClosedError(self._error)
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def close(self) -> None:
        self.end()

    def progress_revision(self) -> int | None:
        if self._events or self._closed:
            return None
        return self._seen


class WatchHub:
    """The set of open watchers of one store."""

    def __init__(self, max_backlog: int = DEFAULT_MAX_BACKLOG) -> None:
        self.max_backlog = max_backlog
        self._watchers: dict[QueueWatcher, None] = {}  # an insertion-ordered set

    def __len__(self) -> int:
        return len(self._watchers)

    def open(self, prefix: str, after_revision: int) -> QueueWatcher:
        """Register a watcher that accepts events with revision > ``after_revision``."""
        watcher = QueueWatcher(self, prefix, after_revision, self.max_backlog)
        self._watchers[watcher] = None
        return watcher

    def discard(self, watcher: QueueWatcher) -> None:
        self._watchers.pop(watcher, None)

    def publish(self, events: list[WatchEvent]) -> None:
        """Hand committed events (in revision order) to every watcher."""
        if not events:
            return
        for watcher in tuple(self._watchers):
            watcher.feed(events)

    def close_all(self) -> None:
        """End every watcher; their iterators stop."""
        for watcher in tuple(self._watchers):
            watcher.end()
