"""The revisioned key-value store interface every backend implements.

Semantics follow etcd v3 (which kube-apiserver relies on):

* One store-wide revision counter, strictly increasing; every successful write (create, update,
  delete) gets a new revision, and that revision becomes the key's ``mod_revision``.
* ``create_revision`` is the revision at which the key was (last) created.
* A watch delivers every event with ``revision > after_revision`` whose key starts with the prefix,
  in revision order, never skipping or reordering; a watch that would need events older than the
  compacted revision fails with :class:`CompactedError` (the API server maps it to 410 Expired).
* Values are opaque bytes (the API server stores JSON).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Literal


class StorageError(Exception):
    """Base class of every error a store raises on purpose."""


class KeyExistsError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key exists: {key}")
        self.key = key


class KeyNotFoundError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key}")
        self.key = key


class ConflictError(StorageError):
    """A compare-and-swap failed: the key's mod_revision is not the expected one."""

    def __init__(self, key: str, expected: int, actual: int) -> None:
        super().__init__(f"conflict on {key}: expected revision {expected}, found {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual


class CompactedError(StorageError):
    """The requested revision is older than the oldest one the store still has."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"required revision {requested} has been compacted (compacted revision {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevisionError(StorageError):
    """The requested revision is newer than the store's current revision."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(f"required revision {requested} is a future revision (current {current})")
        self.requested = requested
        self.current = current


class WatchClosedError(StorageError):
    """The watch was ended by the store (e.g. the consumer fell too far behind); re-list and re-watch."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int


@dataclass(frozen=True, slots=True)
class ListResult:
    items: list[KeyValue]
    revision: int  # the revision this list was read at (the store's current revision if none was asked)
    more: bool  # True when ``limit`` cut the result short


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: Literal["PUT", "DELETE"]
    key: str
    value: bytes  # the new value; for DELETE, the value the key had before it was deleted
    revision: int  # the revision of this write
    create_revision: int  # for DELETE, the create_revision the deleted key had
    prev_value: bytes | None  # the value before this write (None for a create)

    @property
    def is_create(self) -> bool:
        return self.type == "PUT" and self.prev_value is None


class Watcher(ABC):
    """An open watch. Iterate it to receive events; ``close`` ends it (idempotent)."""

    @abstractmethod
    def __aiter__(self) -> AsyncIterator[WatchEvent]: ...

    @abstractmethod
    async def close(self) -> None: ...

    def progress_revision(self) -> int | None:
        """A revision up to which every event of this watch has been handed out, if known now.

        Only meaningful while the consumer is waiting for the next event (nothing is buffered); None
        when unknown. The API server uses it to send bookmarks that keep idle watches resumable.
        """
        return None


class PollableWatcher(Watcher):
    """A watch its one consumer can read without a task per event: ``poll`` (the next event, or None),
    ``finished`` (no event will come any more) and ``wakeup`` (a future done once ``poll`` may have something, or
    the watch ended; cancelling it loses nothing). Iterating it is built on those three."""

    @abstractmethod
    def poll(self) -> WatchEvent | None: ...

    @property
    @abstractmethod
    def finished(self) -> bool: ...

    @abstractmethod
    def wakeup(self) -> asyncio.Future[None]: ...

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            event = self.poll()
            if event is not None:
                return event
            if self.finished:
                raise StopAsyncIteration
            await self.wakeup()


class Store(ABC):
    """A revisioned key-value store with compare-and-swap and watch."""

    @abstractmethod
    async def create(self, key: str, value: bytes) -> int:
        """Create ``key``; return the new revision. Raises KeyExistsError if it exists."""

    @abstractmethod
    async def get(self, key: str) -> KeyValue | None:
        """The current value of ``key``, or None."""

    @abstractmethod
    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str = "", limit: int = 0
    ) -> ListResult:
        """Keys starting with ``prefix`` in key order, as of ``revision`` (0 = current).

        ``start_after`` skips keys <= it (pagination); ``limit`` > 0 caps the number of items.
        Raises CompactedError for a revision older than the compacted one and
        FutureRevisionError for one newer than the current one.
        """

    def peek(self, key: str) -> KeyValue | None:
        """The newest value of ``key`` this store knows without a round trip, or None.

        It may be stale (a write by another client not seen yet, even a deletion): use it only for a read whose
        write is conditional on its ``mod_revision`` (a compare-and-swap that fails when it is stale), and confirm
        with :meth:`get` any outcome that does not end in such a write. Stores whose reads are local return None.
        """
        return None

    @abstractmethod
    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        """Replace ``key``'s value if its mod_revision is ``expected_revision``; return the new revision.

        Raises KeyNotFoundError if the key does not exist and ConflictError if the revision differs.
        """

    @abstractmethod
    async def delete(self, key: str, expected_revision: int = 0) -> tuple[int, KeyValue]:
        """Delete ``key`` (only if its mod_revision is ``expected_revision`` when that is non-zero).

        Returns the delete's revision and the last KeyValue. Raises KeyNotFoundError or ConflictError.
        """

    @abstractmethod
    async def watch(self, prefix: str, after_revision: int | None = None) -> Watcher:
        """Watch keys starting with ``prefix`` for events with revision > ``after_revision``.

        ``None`` means from the current revision on. Raises CompactedError at once when events after
        ``after_revision`` are no longer available.
        """

    @abstractmethod
    async def current_revision(self) -> int: ...

    @abstractmethod
    async def compacted_revision(self) -> int:
        """The newest revision that has been compacted away (0 if none)."""

    @abstractmethod
    async def compact(self, revision: int) -> None:
        """Forget history at and before ``revision`` (the current value of each key is kept)."""

    @abstractmethod
    async def close(self) -> None: ...


async def guaranteed_update(
    store: Store,
    key: str,
    mutate: Callable[[KeyValue], Awaitable[bytes | None] | bytes | None],
    *,
    attempts: int = 50,
) -> tuple[int, KeyValue, bytes]:
    """Read-modify-write ``key`` with compare-and-swap, retrying on conflict.

    ``mutate`` receives the current KeyValue and returns the new value, or None to leave it as is
    (then no write happens and the current revision is returned). Returns (revision, old, new value).
    Raises KeyNotFoundError if the key is absent, and whatever ``mutate`` raises.
    """
    for _ in range(attempts):
        current = await store.get(key)
        if current is None:
            raise KeyNotFoundError(key)
        result = mutate(current)
        if isinstance(result, Awaitable):
            result = await result
        if result is None or result == current.value:
            return current.mod_revision, current, current.value
        try:
            revision = await store.update(key, result, current.mod_revision)
        except ConflictError:
            continue
        return revision, current, result
    raise ConflictError(key, -1, -1)
