"""One asyncio lock per key, held only while somebody uses it.

A controller whose queue has several kinds of keys for one object (the work-status controller queues a Work both
as itself and through each of its member objects) runs passes for that object side by side. Where such passes
write the same thing, :class:`KeyedLocks` makes them take turns: ``async with locks.hold(key): ...``. A key's lock
is dropped once nobody holds it or waits for it, so the map stays as small as the passes under way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["KeyedLocks"]


class KeyedLocks:
    """``hold(key)``: an async context manager that waits for the key's lock and holds it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """How many keys are held or waited for."""
        return len(self._locks)
