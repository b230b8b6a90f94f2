"""Watch fan-out: every open watcher has its own queue, fed synchronously by the committing writer.

Besides async iteration, a watcher can be read without a task per event: :meth:`QueueWatcher.poll` takes the
next queued event (or None) and :meth:`QueueWatcher.wakeup` gives a future that is done once there is something
to poll (an event, or the end). Watchers of other stores get the same interface from :class:`PolledWatcher`.
The events are the store's own objects, handed to every watcher: they are immutable (frozen dataclasses over
bytes), so nothing is copied per watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Iterable

from flotilla.storage.base import PollableWatcher, WatchClosedError, Watcher, WatchEvent

DEFAULT_MAX_BACKLOG = 100_000


class _EventQueue(PollableWatcher):
    """What both watchers below give their one consumer: the queued events, ``poll``, ``finished`` and
    ``wakeup``. A subclass sets ``_ended`` once no more events will be queued, and raises in
    :meth:`_raise_failure` what the consumer gets after the last event of a watch that ended with an error."""

    def __init__(self) -> None:
        self._events: deque[WatchEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False

    def _raise_failure(self) -> None:
        """Raise the error the watch ended with; nothing when it ended without one."""
        raise NotImplementedError

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def poll(self) -> WatchEvent | None:
        """The next queued event, or None when there is none now (then ``finished`` tells whether one may come).
        Once the events are consumed, a watch that ended with an error raises it."""
        if self._events:
            return self._events.popleft()
        if self._ended:
            self._raise_failure()
        return None

    @property
    def finished(self) -> bool:
        """Ended, and nothing left to poll: no event will come any more."""
        return self._ended and not self._events

    def wakeup(self) -> asyncio.Future[None]:
        """A future done once ``poll`` has something (or the watch ended). Cancelling it loses nothing."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            if self._events or self._ended:
                waiter.set_result(None)
        return waiter


class QueueWatcher(_EventQueue):
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
        self._error: str | None = None
        super().__init__()

    @property
    def closed(self) -> bool:
        return self._ended

    @property
    def backlog(self) -> int:
        """Events queued but not consumed yet."""
        return len(self._events)

    def feed(self, events: Iterable[WatchEvent]) -> None:
        """Queue the events of ``events`` (in revision order) that match this watch."""
        if self._ended:
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
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._events.clear()
        self._hub.discard(self)
        self._wake()

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise WatchClosedError(self._error)

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._events:
                return self._events.popleft()
            if self._ended:
                self._raise_failure()
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def close(self) -> None:
        self.end()

    def discard(self) -> None:
        """``close`` without awaiting (for a consumer that is being garbage-collected)."""
        self.end()

    def progress_revision(self) -> int | None:
        if self._events or self._ended:
            return None
        # every event the store published so far was offered to the watchers it concerns
        return max(self._seen, self._hub.revision)


class WatchHub:
    """The set of open watchers of one store.

    Watchers are indexed by prefix, so publishing an event costs a few dictionary lookups (one per ``/`` in its
    key) plus the watchers it concerns, not one call per open watcher: a server has a watcher per resource type
    (the garbage collector's) besides the informers'.
    """

    def __init__(self, max_backlog: int = DEFAULT_MAX_BACKLOG) -> None:
        self.max_backlog = max_backlog
        self.revision = 0  # the newest revision published
        self._watchers: dict[QueueWatcher, None] = {}  # an insertion-ordered set
        # prefixes ending in "/" (and ""), as the API server's are: looked up by the key's own "/" prefixes
        self._by_prefix: dict[str, dict[QueueWatcher, None]] = {}
        self._other: dict[QueueWatcher, None] = {}  # any other prefix: matched one by one

    def __len__(self) -> int:
        return len(self._watchers)

    def open(self, prefix: str, after_revision: int) -> QueueWatcher:
        """Register a watcher that accepts events with revision > ``after_revision``."""
        watcher = QueueWatcher(self, prefix, after_revision, self.max_backlog)
        self._watchers[watcher] = None
        if not prefix or prefix.endswith("/"):
            self._by_prefix.setdefault(prefix, {})[watcher] = None
        else:
            self._other[watcher] = None
        return watcher

    def discard(self, watcher: QueueWatcher) -> None:
        if self._watchers.pop(watcher, False) is not False:
            bucket = self._by_prefix.get(watcher.prefix)
            if bucket is not None and bucket.pop(watcher, False) is not False:
                if not bucket:
                    del self._by_prefix[watcher.prefix]
            else:
                self._other.pop(watcher, None)

    def publish(self, events: list[WatchEvent]) -> None:
        """Hand committed events (in revision order) to the watchers of their keys."""
        if not events:
            return
        by_prefix = self._by_prefix
        other = self._other
        targets: dict[QueueWatcher, list[WatchEvent]] = {}
        for event in events:
            key = event.key
            bucket = by_prefix.get("")
            if bucket:
                for watcher in bucket:
                    targets.setdefault(watcher, []).append(event)
            i = key.find("/")
            while i >= 0:
                bucket = by_prefix.get(key[: i + 1])
                if bucket:
                    for watcher in bucket:
                        targets.setdefault(watcher, []).append(event)
                i = key.find("/", i + 1)
            for watcher in other:
                if key.startswith(watcher.prefix):
                    targets.setdefault(watcher, []).append(event)
        self.revision = events[-1].revision
        for watcher, matched in targets.items():
            watcher.feed(matched)

    def close_all(self) -> None:
        """End every watcher; their iterators stop."""
        for watcher in tuple(self._watchers):
            watcher.end()


class PolledWatcher(_EventQueue):
    """``poll``/``wakeup``/``finished`` for any watcher (e.g. etcd's): one task moves its events into a deque."""

    def __init__(self, watcher: Watcher) -> None:
        super().__init__()
        self._watcher = watcher
        self._error: BaseException | None = None
        self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        try:
            async for event in self._watcher:
                self._events.append(event)
                self._wake()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # handed to the consumer once the events before it are taken
            self._error = e
        finally:
            self._ended = True
            self._wake()

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise self._error

    def progress_revision(self) -> int | None:
        if self._events or self._ended:
            return None
        return self._watcher.progress_revision()

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        self._ended = True
        self._events.clear()
        self._wake()
        await self._watcher.close()

    def discard(self) -> None:
        """``close`` without awaiting (for a consumer that is being garbage-collected)."""
        self._task.cancel()
        self._ended = True
        self._events.clear()
        with contextlib.suppress(RuntimeError):  # no loop running any more: nothing to close on
            asyncio.get_running_loop().create_task(self._watcher.close())
