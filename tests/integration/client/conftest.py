"""Servers and clients for the client/informer tests.

* ``thread_server``: a ServerThread (its own loop and thread), reached over real HTTP on 127.0.0.1.
* ``LocalServer``: an ApiServer on the test's own event loop, over a store the test owns, so it can be stopped
  and started again on the same port (the store survives) and used by ``Client.in_process``: an in-process
  client must run on the loop that owns the storage.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.apiserver.inprocess import in_process_client
from flotilla.apiserver.rest import ResourceStorage
from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.client import Client
from flotilla.kube.resources import NAMESPACES
from flotilla.storage.memory import MemoryStore
from tests.support.apiserver import ServerThread

BOOKMARK_INTERVAL = 0.5


class LocalServer:
    """An ApiServer on the current loop whose HTTP side can go down and come back on the same port."""

    def __init__(self, data_dir: Path, **config: Any) -> None:
        self.config = ApiServerConfig(storage_url="memory://", data_dir=data_dir, port=0,
                                      bookmark_interval=BOOKMARK_INTERVAL, compaction_interval=0, **config)
        self.store = MemoryStore()
        self.server: ApiServer | None = None
        self.port = 0

    async def start(self) -> LocalServer:
        cfg = dataclasses.replace(self.config, port=self.port)
        self.server = await ApiServer(cfg, store=self.store).start()
        self.port = self.server.port
        return self

    async def stop(self) -> None:
        """Stop serving (open watches end, the port closes); the store and its objects stay."""
        if self.server is not None:
            await self.server.stop()  # refuses new watches once closing, so re-watching clients cannot hold it
            self.server = None

    async def close(self) -> None:
        await self.stop()
        await self.store.close()

    @property
    def storage(self) -> ResourceStorage:
        assert self.server is not None and self.server.storage is not None
        return self.server.storage

    @property
    def kubeconfig(self) -> Path:
        assert self.server is not None and self.server.kubeconfig_path is not None
        return self.server.kubeconfig_path

    async def compact(self) -> int:
        rev = await self.store.current_revision()
        await self.store.compact(rev)
        return rev


@pytest.fixture(scope="module")
def thread_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(tmp_path_factory.mktemp("apiserver"), storage_url="memory://",
                       bookmark_interval=BOOKMARK_INTERVAL, compaction_interval=0)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
async def local_server(tmp_path: Path) -> AsyncIterator[LocalServer]:
    srv = await LocalServer(tmp_path / "local").start()
    yield srv
    await srv.close()


@dataclass
class Env:
    """A client on one of the two transports, and how to compact its server's store."""

    transport: str
    client: Client
    compact: Callable[[], Awaitable[int]]


@pytest.fixture(params=["http", "inprocess"])
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    if request.param == "http":
        ts: ServerThread = request.getfixturevalue("thread_server")
        store = ts.server.store  # type: ignore[union-attr]

        async def compact_thread() -> int:
            rev = ts.call(store.current_revision())
            ts.call(store.compact(rev))
            return int(rev)

        async with Client.from_kubeconfig(ts.kubeconfig) as client:
            yield Env("http", client, compact_thread)
    else:
        srv = await LocalServer(tmp_path / "local").start()
        try:
            async with in_process_client(srv.storage, bookmark_interval=BOOKMARK_INTERVAL) as client:
                yield Env("inprocess", client, srv.compact)
        finally:
            await srv.close()


async def make_namespace(client: Client, prefix: str = "t") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await client.create(NAMESPACES, {"metadata": {"name": name}})
    return name
