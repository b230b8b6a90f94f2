"""One client, several API servers of the same control plane (HA replicas over one etcd): fail over between them.

Every request goes to the server that answered last. When that server cannot be reached, the request moves on to
the next one:

* reads (get, list, discovery) and watches after any connection failure (refused, reset, timed out, TLS): they
  change nothing, so asking another replica is always safe;
* writes only when the connection was never established (``ClientConnectorError``: refused, unreachable, TLS
  handshake): the request cannot have reached the server. A write whose connection broke afterwards may have been
  applied, so its ConnectionFailed goes to the caller, as client-go does; a controller retries it from what it
  reads next.

A watch that breaks mid-stream ends with ConnectionFailed as with one server; the informer re-opens it, and the
re-opened watch goes to the next replica (the failed one is moved past), resuming from the same resourceVersion:
all replicas serve one store, so their revisions are the same.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import aiohttp

from flotilla.client.errors import ConnectionFailed
from flotilla.client.transport import Query, Transport, WatchEvent, WatchStream
from flotilla.kube.resources import Resource

__all__ = ["MultiServerTransport"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def never_connected(e: ConnectionFailed) -> bool:
    """True when the request cannot have reached the server (no connection was ever made)."""
    cause = e.__cause__
    return isinstance(cause, aiohttp.ClientConnectorError)


class MultiServerTransport(Transport):
    """A Transport over several transports, one per API server replica, used one at a time."""

    def __init__(self, transports: Sequence[Transport]) -> None:
        if not transports:
            raise ValueError("MultiServerTransport needs at least one transport")
        self.transports = list(transports)
        self.current = 0

    @property
    def server(self) -> str:  # type: ignore[override]
        return self.transports[self.current].server

    def _failed(self, index: int, e: ConnectionFailed) -> None:
        if index == self.current:
            self.current = (index + 1) % len(self.transports)
            log.warning("API server %s failed (%s); now using %s", self.transports[index].server, e.message,
                        self.transports[self.current].server)

    async def _call(self, op: Callable[[Transport], Awaitable[T]], *, write: bool) -> T:
        last: ConnectionFailed | None = None
        for _ in range(len(self.transports)):
            index = self.current
            try:
                return await op(self.transports[index])
            except ConnectionFailed as e:
                last = e
                if write and not never_connected(e):
                    raise
                self._failed(index, e)
        assert last is not None
        raise last

    async def get(self, res: Resource, namespace: str | None, name: str, subresource: str | None, *,
                  resource_version: str = "") -> dict[str, Any]:
        return await self._call(lambda t: t.get(res, namespace, name, subresource, resource_version=resource_version),
                                write=False)

    async def list(self, res: Resource, namespace: str | None, query: Query) -> dict[str, Any]:
        return await self._call(lambda t: t.list(res, namespace, query), write=False)

    async def create(self, res: Resource, namespace: str | None, body: dict[str, Any], query: Query) -> dict[str, Any]:
        return await self._call(lambda t: t.create(res, namespace, body, query), write=True)

    async def update(self, res: Resource, namespace: str | None, name: str, body: dict[str, Any],
                     subresource: str | None, query: Query) -> dict[str, Any]:
        return await self._call(lambda t: t.update(res, namespace, name, body, subresource, query), write=True)

    async def patch(self, res: Resource, namespace: str | None, name: str, body: Any, content_type: str,
                    subresource: str | None, query: Query) -> dict[str, Any]:
        return await self._call(lambda t: t.patch(res, namespace, name, body, content_type, subresource, query),
                                write=True)

    async def delete(self, res: Resource, namespace: str | None, name: str, options: dict[str, Any],
                     query: Query) -> dict[str, Any]:
        return await self._call(lambda t: t.delete(res, namespace, name, options, query), write=True)

    async def delete_collection(self, res: Resource, namespace: str | None, options: dict[str, Any],
                                query: Query) -> dict[str, Any]:
        return await self._call(lambda t: t.delete_collection(res, namespace, options, query), write=True)

    def watch(self, res: Resource, namespace: str | None, query: Query) -> WatchStream:
        return _FailoverWatch(self, res, namespace, query)

    async def discovery(self, path: str) -> dict[str, Any]:
        return await self._call(lambda t: t.discovery(path), write=False)

    async def close(self) -> None:
        for t in self.transports:
            await t.close()


class _FailoverWatch(WatchStream):
    """A watch on the current replica; opening it moves on to the next replica when one cannot be reached, and a
    break mid-stream moves the transport past that replica before the error reaches the informer."""

    def __init__(self, owner: MultiServerTransport, res: Resource, namespace: str | None, query: Query) -> None:
        self.owner = owner
        self.res = res
        self.namespace = namespace
        self.query = query
        self.stream: WatchStream | None = None
        self.index = -1
        self.started = False

    async def __anext__(self) -> WatchEvent:
        if self.stream is None:
            return await self._first()
        try:
            return await self.stream.__anext__()
        except ConnectionFailed as e:
            self.owner._failed(self.index, e)
            raise

    async def _first(self) -> WatchEvent:
        last: ConnectionFailed | None = None
        for _ in range(len(self.owner.transports)):
            self.index = self.owner.current
            self.stream = self.owner.transports[self.index].watch(self.res, self.namespace, self.query)
            try:
                return await self.stream.__anext__()
            except ConnectionFailed as e:
                last = e
                await self.stream.aclose()
                self.stream = None
                self.owner._failed(self.index, e)
        assert last is not None
        raise last

    async def aclose(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
