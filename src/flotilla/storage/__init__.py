"""Revisioned key-value stores with watch: memory, SQLite and etcd behind one interface."""

from __future__ import annotations

from pathlib import Path

from flotilla.storage.base import (
    CompactedError,
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    StorageError,
    Store,
    WatchClosedError,
    Watcher,
    WatchEvent,
    guaranteed_update,
)

__all__ = [
    "CompactedError",
    "ConflictError",
    "FutureRevisionError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyValue",
    "ListResult",
    "StorageError",
    "Store",
    "WatchEvent",
    "WatchClosedError",
    "Watcher",
    "guaranteed_update",
    "open_store",
]


async def open_store(url: str, data_dir: str | Path | None = None) -> Store:
    """Open a store from a URL.

    * ``memory://`` - in-process, nothing persisted (tests);
    * ``sqlite://`` - ``<data_dir>/flotilla.db``; ``sqlite:///abs/path.db`` - that file;
    * ``etcd://host:port[,host:port...]`` - a real etcd v3 cluster (``etcds://`` for TLS is not supported yet).
    """
    scheme, _, rest = url.partition("://")
    if scheme == "memory":
        from flotilla.storage.memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from flotilla.storage.sqlite import SQLiteStore

        if rest:
            path = Path(rest)
        else:
            path = Path(data_dir or ".") / "flotilla.db"
        if not path.parent.exists():
            from flotilla.files import private_dir

            private_dir(path.parent)
        return await SQLiteStore.open(path)
    if scheme == "etcd":
        from flotilla.storage.etcd import EtcdStore

        endpoints = [e for e in rest.split(",") if e]
        if not endpoints:
            raise ValueError("etcd:// needs at least one host:port")
        return await EtcdStore.open(endpoints)
    raise ValueError(f"unknown storage URL {url!r}: use memory://, sqlite:// or etcd://host:port")
