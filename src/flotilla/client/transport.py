"""What a transport does for the client: the API's verbs on one resource, plus discovery documents.

Requests speak the protocol's own vocabulary: ``query`` holds the URL query parameters exactly as they would go
over HTTP (``labelSelector``, ``limit``, ``continue``, ``resourceVersion``, ``dryRun``, ``fieldManager``,
``force``, ``timeoutSeconds``, ``allowWatchBookmarks`` ...), so the in-process transport and the HTTP one are
interchangeable by construction. Both raise :class:`~flotilla.client.errors.ApiException`.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from typing import Any, NamedTuple

from flotilla.kube.resources import Resource

__all__ = ["PATCH_CONTENT_TYPES", "Transport", "WatchEvent", "WatchStream"]

Query = Mapping[str, str]

PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


class WatchEvent(NamedTuple):
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK; ``object`` the object (a dict)."""

    type: str
    object: dict[str, Any]


class WatchStream(ABC):
    """An open (or about to be opened) watch: iterate it for events; ``aclose`` ends it (idempotent).

    The stream ends (``StopAsyncIteration``) when the server ends the watch normally, e.g. at ``timeoutSeconds``.
    An ``ERROR`` event is raised as an ApiException (410 Expired: re-list). Cancelling a pending ``__anext__``
    loses no events, so callers may time reads out.
    """

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    @abstractmethod
    async def __anext__(self) -> WatchEvent: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    async def __aenter__(self) -> WatchStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self.aclose()


class Transport(ABC):
    """The verbs of the Kubernetes API. ``namespace`` is None for cluster-scoped resources and "all namespaces"."""

    #: a name for logs: the server URL, or "in-process"
    server: str = ""

    @abstractmethod
    async def get(self, res: Resource, namespace: str | None, name: str, subresource: str | None, *,
                  resource_version: str = "") -> dict[str, Any]:
        """The object; ``resource_version="0"``: any version the server holds, possibly stale, without a read from
        its storage (Kubernetes' meaning of ``resourceVersion=0``)."""

    @abstractmethod
    async def list(self, res: Resource, namespace: str | None, query: Query) -> dict[str, Any]: ...

    @abstractmethod
    async def create(self, res: Resource, namespace: str | None, body: dict[str, Any], query: Query) -> dict[str, Any]:
        ...

    @abstractmethod
    async def update(self, res: Resource, namespace: str | None, name: str, body: dict[str, Any],
                     subresource: str | None, query: Query) -> dict[str, Any]: ...

    @abstractmethod
    async def patch(self, res: Resource, namespace: str | None, name: str, body: Any, content_type: str,
                    subresource: str | None, query: Query) -> dict[str, Any]: ...

    @abstractmethod
    async def delete(self, res: Resource, namespace: str | None, name: str, options: dict[str, Any],
                     query: Query) -> dict[str, Any]: ...

    @abstractmethod
    async def delete_collection(self, res: Resource, namespace: str | None, options: dict[str, Any],
                                query: Query) -> dict[str, Any]: ...

    @abstractmethod
    def watch(self, res: Resource, namespace: str | None, query: Query) -> WatchStream:
        """A stream that connects on the first ``__anext__``."""

    @abstractmethod
    async def discovery(self, path: str) -> dict[str, Any]:
        """``/api``, ``/apis``, ``/api/v1`` or ``/apis/<group>/<version>`` (legacy discovery documents)."""

    async def close(self) -> None:
        return None
