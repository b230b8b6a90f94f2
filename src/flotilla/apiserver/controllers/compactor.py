"""Periodic store compaction, as kube-apiserver does for etcd: history older than one interval goes.

Each tick compacts to the revision seen at the previous tick, so clients always have at least one
interval to resume a watch or finish a paginated list before they get 410 Expired.
"""

from __future__ import annotations

import asyncio
import logging

from flotilla.storage import CompactedError, StorageError, Store

log = logging.getLogger(__name__)


class Compactor:
    def __init__(self, store: Store, interval: float) -> None:
        self.store = store
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval > 0:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        previous = await self.store.current_revision()
        while True:
            await asyncio.sleep(self.interval)
            current = await self.store.current_revision()
            await self.compact_to(previous)
            previous = current

    async def compact_to(self, revision: int) -> bool:
        """Compact to ``revision`` unless that is already done (another API server may have)."""
        try:
            if revision <= await self.store.compacted_revision():
                return False
            await self.store.compact(revision)
            log.info("compacted the store to revision %d", revision)
            return True
        except CompactedError:
            return False
        except StorageError:
            log.exception("compaction to revision %d failed", revision)
            return False

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
