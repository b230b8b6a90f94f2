"""Writes a controller leaves for later while the controllers ahead of it are busy (:mod:`.forward_first`).

Under a burst a controller may finish its pass without one of its writes that nothing ahead of it waits for: the
scheduler's ``Scheduled`` status, for one (the binding controller renders Works from ``spec.clusters``).
:class:`HeldWrites` keeps one such write per key (a newer one replaces it; a pass of the key's own drops it, since
that pass writes anew) and one task writes them, oldest first, each time ``turn`` lets it: one in a place taken
beside the busy controllers (``turn`` returned True), else up to ``batch`` (the controllers ahead are done, or the
longest wait is over: under a long burst the held writes still go out at a bounded lag). A write that fails
is handed to ``on_error`` (the controller queues the key again); the ones still held when the controller stops
are lost, which a restarted controller makes good, since it looks at every object once it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final, Generic, TypeVar

from flotilla.client.workqueue import log_failure

__all__ = ["HELD_WRITES_BATCH", "HeldWrites"]

#: held writes made in one turn at most
HELD_WRITES_BATCH: Final = 32

log = logging.getLogger(__name__)
T = TypeVar("T")


class HeldWrites(Generic[T]):
    """Per key the newest write held back, written oldest first by one background task."""

    def __init__(self, name: str, turn: Callable[[], Awaitable[bool]], done: Callable[[bool], None],
                 write: Callable[[str, T], Awaitable[None]], on_error: Callable[[str], None], *,
                 batch: int = HELD_WRITES_BATCH) -> None:
        self.name = name
        self.batch = max(1, batch)
        self._turn = turn
        self._done = done
        self._write = write
        self._on_error = on_error
        self._held: dict[str, T] = {}
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: str) -> bool:
        return key in self._held

    def hold(self, key: str, item: T) -> None:
        """Write ``item`` for ``key`` later (it replaces one held for the key, and keeps that one's place)."""
        self._held[key] = item
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"held-writes-{self.name}")

    def drop(self, key: str) -> None:
        """Forget the write held for ``key`` (a pass of the key writes anew, or the object went)."""
        self._held.pop(key, None)

    def take(self, key: str) -> T | None:
        """The write held for ``key``, no longer held (a pass of the key writes it, or anew)."""
        return self._held.pop(key, None)

    async def close(self) -> None:
        """Stop writing; what is still held is forgotten."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._held.clear()

    async def _run(self) -> None:
        while self._held:
            took = await self._turn()
            try:
                for _ in range(1 if took else self.batch):
                    if not self._held:
                        break
                    key = next(iter(self._held))
                    await self._write_one(key, self._held.pop(key))
            finally:
                self._done(took)

    async def _write_one(self, key: str, item: T) -> None:
        try:
            await self._write(key, item)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log_failure(log, e, "%s: a held-back write for %s failed; looking at it again", self.name, key)
            self._on_error(key)
