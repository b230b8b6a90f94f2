"""The store ceiling: raw writes/s of a storage backend, through the Store interface, in this process.

``writes`` creates of values of ``value_bytes`` (the size of a real ResourceBinding of the run) from ``tasks``
concurrent tasks, then one compare-and-swap update of every key (no watchers: the raw rate). The ceiling is
every write over the time of both phases: a failover's writes are mostly updates, with creates (Works, Events)
and deletes in between. SQLite writes to its own file beside the control plane's; etcd writes to the same etcd
under a prefix the API server never reads.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flotilla.storage import open_store

__all__ = ["measure_store_ceiling", "padded_value"]

DEFAULT_TASKS = 200


def padded_value(i: int, size: int, tag: str = "c") -> bytes:
    """A JSON object of exactly ``size`` bytes (at least ~40), distinct per ``i`` and ``tag``."""
    head = b'{"kind":"BenchBinding","i":"%s%08d","pad":"' % (tag.encode(), i)
    tail = b'"}'
    return head + b"x" * max(0, size - len(head) - len(tail)) + tail


async def _run(count: int, tasks: int, work: Any) -> float:
    indices: Iterator[int] = iter(range(count))

    async def worker() -> None:
        for i in indices:
            await work(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(max(1, min(tasks, count)))))
    return time.perf_counter() - t0


async def measure_store_ceiling(storage_url: str, data_dir: Path, value_bytes: int, writes: int,
                                tasks: int = DEFAULT_TASKS) -> dict[str, Any]:
    """Creates then CAS updates on a fresh store of ``storage_url``; the rates and the ceiling (writes/s)."""
    store = await open_store(storage_url, data_dir)
    prefix = f"/flotilla-bench-ceiling/{secrets.token_hex(4)}/"
    keys = [f"{prefix}k{i:07d}" for i in range(writes)]
    revisions = [0] * writes
    errors = 0
    try:
        async def create(i: int) -> None:
            nonlocal errors
            try:
                revisions[i] = await store.create(keys[i], padded_value(i, value_bytes))
            except Exception:  # noqa: BLE001 - counted: one failure should not hide the rate
                errors += 1

        create_s = await _run(writes, tasks, create)

        async def update(i: int) -> None:
            nonlocal errors
            try:
                revisions[i] = await store.update(keys[i], padded_value(i, value_bytes, "u"), revisions[i])
            except Exception:  # noqa: BLE001
                errors += 1

        update_s = await _run(writes, tasks, update)
        for i in range(0, writes if storage_url.startswith("etcd") else 0, 1000):  # no litter in a shared etcd
            await asyncio.gather(*(store.delete(k) for k in keys[i:i + 1000]), return_exceptions=True)
    finally:
        await store.close()
    total = create_s + update_s
    return {
        "backend": storage_url.partition("://")[0],
        "value_bytes": value_bytes,
        "writes": writes,
        "tasks": tasks,
        "creates_per_s": round(writes / create_s, 1) if create_s > 0 else 0.0,
        "updates_per_s": round(writes / update_s, 1) if update_s > 0 else 0.0,
        "writes_per_s": round(2 * writes / total, 1) if total > 0 else 0.0,
        "errors": errors,
    }
