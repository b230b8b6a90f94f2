"""The ``store`` fixture: every conformance test runs against memory, SQLite and a real etcd."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from flotilla.storage.base import Store, Watcher, WatchEvent

REPO_ROOT = Path(__file__).resolve().parents[3]
_END = object()


class Collector:
    """Pumps a watcher's events into a queue that tests read with timeouts."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        try:
            async for event in self.watcher:
                self._queue.put_nowait(event)
        except Exception as exc:  # handed to the reader
            self._queue.put_nowait(exc)
        finally:
            self._queue.put_nowait(_END)

    async def next(self, wait: float = 5.0) -> WatchEvent:
        item = await asyncio.wait_for(self._queue.get(), wait)
        if item is _END:
            raise AssertionError("the watch ended")
        if isinstance(item, Exception):
            raise item
        assert isinstance(item, WatchEvent)
        return item

    async def take(self, n: int, wait: float = 10.0) -> list[WatchEvent]:
        async def collect() -> list[WatchEvent]:
            return [await self.next(wait) for _ in range(n)]

        return await asyncio.wait_for(collect(), wait)

    async def assert_quiet(self, wait: float = 0.3) -> None:
        """No event (and no end) arrives within ``wait`` seconds."""
        await asyncio.sleep(wait)
        assert self._queue.empty(), f"unexpected watch item: {self._queue.get_nowait()!r}"

    async def ended(self, wait: float = 5.0) -> None:
        """Wait until the watch's iteration has ended (normally or with an error)."""
        await asyncio.wait_for(asyncio.shield(self._task), wait)

    async def close(self) -> None:
        await self.watcher.close()
        try:
            await asyncio.wait_for(self._task, 5.0)
        except TimeoutError:
            self._task.cancel()
            raise


@asynccontextmanager
async def _watching(store: Store, prefix: str, after_revision: int | None = None) -> AsyncIterator[Collector]:
    collector = Collector(await store.watch(prefix, after_revision))
    try:
        yield collector
    finally:
        await collector.close()


Watching = Callable[..., AbstractAsyncContextManager[Collector]]


@pytest.fixture
def watching() -> Watching:
    """``async with watching(store, prefix, after_revision) as events:`` - a :class:`Collector`."""
    return _watching


def _etcd_support() -> tuple[Any, Any]:
    """(start_etcd, EtcdStore), or skip the test when either is not there yet."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))  # so ``tests.support`` imports however pytest was started
    try:
        from flotilla.storage.etcd import EtcdStore
        from tests.support.etcd_server import start_etcd
    except ImportError as exc:
        pytest.skip(f"etcd backend not available: {exc}")
    return start_etcd, EtcdStore


@pytest.fixture(scope="session")
def etcd_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One etcd for the whole session; tests keep apart by key prefix."""
    start_etcd, _ = _etcd_support()
    server = start_etcd(tmp_path_factory.mktemp("etcd"), unsafe_no_fsync=True)
    try:
        yield server.endpoint
    finally:
        server.stop()


@pytest.fixture(params=["memory", "sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend: str = request.param
    opened: Store
    if backend == "memory":
        from flotilla.storage.memory import MemoryStore

        opened = MemoryStore()
    elif backend == "sqlite":
        from flotilla.storage.sqlite import SQLiteStore

        opened = await SQLiteStore.open(tmp_path / "store.db")
    else:
        _, etcd_store = _etcd_support()
        endpoint = request.getfixturevalue("etcd_endpoint")
        opened = await etcd_store.open([endpoint], prefix=f"/t{uuid.uuid4().hex}")
    try:
        yield opened
    finally:
        await opened.close()
