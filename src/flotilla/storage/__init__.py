"""Revisioned key-value stores with watch: memory, SQLite and etcd behind one interface."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from flotilla.storage.etcd import EtcdTLS

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


async def open_store(url: str, data_dir: str | Path | None = None, *, etcd_tls: EtcdTLS | None = None) -> Store:
    """Open a store from a URL.

    * ``memory://`` - in-process, nothing persisted (tests);
    * ``sqlite://`` - ``<data_dir>/flotilla.db``; ``sqlite:///abs/path.db`` - that file;
    * ``etcd://host:port[,host:port...]`` - a real etcd v3 cluster;
    * ``etcds://host:port[,host:port...]`` - the same over TLS, with ``etcd_tls`` (the CA and client certificate
      files; none: the system's CAs and no client certificate).

    ValueError, saying what to change, for a URL or TLS settings that cannot work.
    """
    scheme, _, rest = url.partition("://")
    tls_given = etcd_tls is not None and etcd_tls.given
    if tls_given and scheme != "etcds":
        raise ValueError(f"--etcd-cafile, --etcd-certfile and --etcd-keyfile are for etcd over TLS: use "
                         f"etcds://host:port instead of {url!r}")
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
    if scheme in ("etcd", "etcds"):
        from flotilla.storage.etcd import EtcdStore
        from flotilla.storage.etcd import EtcdTLS as _EtcdTLS

        endpoints = [e for e in rest.split(",") if e]
        if not endpoints:
            raise ValueError(f"{scheme}:// needs at least one host:port")
        if scheme == "etcds":
            return await EtcdStore.open(endpoints, tls=etcd_tls or _EtcdTLS())
        return await EtcdStore.open(endpoints)
    raise ValueError(f"unknown storage URL {url!r}: use memory://, sqlite://, etcd://host:port or etcds://host:port")
