"""One process, informers on 100 member clusters: one task each, no threads, quick to sync and to follow.

The 100 API servers run on 4 background event loops (25 each), so the informers' loop is the test's own.
Run with ``-s`` to see the measurements.
"""

from __future__ import annotations

import asyncio
import resource
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.client import Client, SharedInformerFactory
from flotilla.client.kubeconfig import ClusterCredentials
from flotilla.kube.resources import CONFIGMAPS

CLUSTERS = 100
LOOPS = 4
OBJECTS = 5


class ServerPool:
    """Many ApiServers (memory stores) spread over a few event-loop threads."""

    def __init__(self, data_dir: Path, count: int, loops: int) -> None:
        self.loops = [asyncio.new_event_loop() for _ in range(loops)]
        self.threads = [threading.Thread(target=lp.run_forever, daemon=True) for lp in self.loops]
        self.data_dir = data_dir
        self.count = count
        self.servers: list[ApiServer] = []

    def call(self, i: int, coro: Any) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loops[i % len(self.loops)])
        return fut.result(30)

    def start(self) -> ServerPool:
        for t in self.threads:
            t.start()
        for i in range(self.count):
            cfg = ApiServerConfig(storage_url="memory://", data_dir=self.data_dir / f"m{i}", port=0,
                                  write_kubeconfig=False, compaction_interval=0, bookmark_interval=5.0)
            self.servers.append(self.call(i, ApiServer(cfg).start()))
        return self

    def stop(self) -> None:
        for i, srv in enumerate(self.servers):
            self.call(i, srv.stop())
        for lp in self.loops:
            lp.call_soon_threadsafe(lp.stop)
        for t in self.threads:
            t.join(10)
        for lp in self.loops:
            lp.close()


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    started = time.perf_counter()
    p = ServerPool(tmp_path_factory.mktemp("members"), CLUSTERS, LOOPS).start()
    print(f"\n{CLUSTERS} API servers started in {time.perf_counter() - started:.2f}s")
    yield p
    p.stop()


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def test_informers_on_100_clusters(pool: ServerPool) -> None:
    for i, srv in enumerate(pool.servers):
        assert srv.storage is not None
        for j in range(OBJECTS):
            pool.call(i, srv.storage.create(srv.storage.types.lookup("", "v1", "configmaps"), "default",
                                            {"metadata": {"name": f"cm-{j}"}, "data": {"cluster": str(i)}}))

    tasks_before = len(asyncio.all_tasks())
    threads_before = threading.active_count()
    rss_before = rss_mib()
    clients = [Client.from_credentials(ClusterCredentials(server=srv.url)) for srv in pool.servers]
    factories = [SharedInformerFactory(c, backoff=(0.05, 1.0)) for c in clients]
    informers = [f.informer(CONFIGMAPS, "default") for f in factories]
    seen: list[int] = [0] * CLUSTERS
    all_seen = asyncio.Event()

    for i, inf in enumerate(informers):
        def on_update(old: dict[str, Any], new: dict[str, Any], i: int = i) -> None:
            if new["data"].get("v") == "2":
                seen[i] += 1
                if sum(seen) == CLUSTERS:
                    all_seen.set()

        inf.add_handler(on_update=on_update)
    started = time.perf_counter()
    for f in factories:
        f.start()
    try:
        synced = await asyncio.gather(*(f.wait_for_sync(20) for f in factories))
        sync_s = time.perf_counter() - started
        assert all(synced)
        assert all(len(inf.store) == OBJECTS for inf in informers)
        await asyncio.sleep(0.2)  # let the watch requests settle
        tasks = len(asyncio.all_tasks()) - tasks_before
        threads = threading.active_count() - threads_before
        rss = rss_mib() - rss_before

        started = time.perf_counter()
        cm_rt = pool.servers[0].types.lookup("", "v1", "configmaps")
        for i, srv in enumerate(pool.servers):
            assert srv.storage is not None
            pool.call(i, srv.storage.patch(cm_rt, "default", "cm-0", "application/merge-patch+json",
                                           {"data": {"v": "2"}}))
        async with asyncio.timeout(10):
            await all_seen.wait()
        follow_s = time.perf_counter() - started
        assert seen == [1] * CLUSTERS
        print(f"{CLUSTERS} informers: synced in {sync_s:.2f}s; {tasks} new asyncio tasks, {threads} new threads, "
              f"RSS +{rss:.1f} MiB (client and server side of {CLUSTERS} watches); one update on every cluster "
              f"seen by every informer {follow_s:.2f}s after the first write")
        assert threads == 0
        assert tasks <= CLUSTERS + 5  # one task per informer (plus the odd transient)
    finally:
        started = time.perf_counter()
        await asyncio.gather(*(f.stop() for f in factories))
        await asyncio.gather(*(c.close() for c in clients))
        print(f"stopped {CLUSTERS} informers and closed their clients in {time.perf_counter() - started:.2f}s")
