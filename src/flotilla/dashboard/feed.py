"""The dashboard's feed: informers on the API server's own storage keep :class:`DashboardModel` up to date.

The API server hands the dashboard a client on its in-process transport (no sockets, the controllers' kind of
client), so the informers list once and then follow the store's watches, with the informers' resume, re-list on
410 and reconnects. Each informer slims its objects before caching them (``Informer(transform=...)``): the cache
and the model share the same small dicts. Every change wakes whoever waits in :meth:`DashboardFeed.wait_change`
(the Server-Sent Events streams).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from flotilla.api import resources as R
from flotilla.api.agents import LEASE_NAMESPACE
from flotilla.client import Client, Informer
from flotilla.dashboard.model import (
    DashboardModel,
    slim_binding,
    slim_cluster,
    slim_event,
    slim_lease,
    slim_work,
)
from flotilla.kube.resources import EVENTS, LEASES, Resource

__all__ = ["DashboardFeed"]

log = logging.getLogger(__name__)


class DashboardFeed:
    def __init__(self, client: Client, model: DashboardModel) -> None:
        self.client = client
        self.model = model
        self.informers: list[Informer] = []
        self._wake = asyncio.Event()

    def _follow(self, res: Resource, namespace: str | None, transform: Callable[[dict[str, Any]], dict[str, Any]],
                put: Callable[[dict[str, Any]], None], remove: Callable[[dict[str, Any]], None]) -> None:
        inf = Informer(self.client, res, namespace, transform=transform, page_size=1000)

        def added(obj: dict[str, Any]) -> None:
            put(obj)
            self._changed()

        def updated(_old: dict[str, Any], new: dict[str, Any]) -> None:
            put(new)
            self._changed()

        def deleted(obj: dict[str, Any]) -> None:
            remove(obj)
            self._changed()

        inf.add_handler(added, updated, deleted)
        self.informers.append(inf)

    async def start(self, sync_timeout: float = 10.0) -> None:
        """Start following; returns once every informer listed (or after ``sync_timeout``: the pages fill in as
        the lists arrive)."""
        m = self.model
        self._follow(R.CLUSTERS, None, slim_cluster, m.put_cluster, m.remove_cluster)
        self._follow(R.RESOURCE_BINDINGS, None, slim_binding, m.put_binding, m.remove_binding)
        self._follow(R.CLUSTER_RESOURCE_BINDINGS, None, slim_binding, m.put_binding, m.remove_binding)
        self._follow(R.WORKS, None, slim_work, m.put_work, m.remove_work)
        self._follow(EVENTS, None, slim_event, m.put_event, m.remove_event)
        self._follow(LEASES, LEASE_NAMESPACE, slim_lease, m.put_lease, m.remove_lease)
        for inf in self.informers:
            inf.start()
        synced = await asyncio.gather(*(inf.wait_synced(sync_timeout) for inf in self.informers))
        if not all(synced):
            log.warning("dashboard: not every list arrived within %.0fs; the pages fill in as they do", sync_timeout)

    async def stop(self) -> None:
        await asyncio.gather(*(inf.stop() for inf in self.informers))
        self.informers = []
        self._changed()

    def _changed(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    async def wait_change(self, timeout: float) -> bool:  # noqa: ASYNC109
        """True when anything changed within ``timeout`` seconds."""
        wake = self._wake
        try:
            async with asyncio.timeout(timeout):
                await wake.wait()
        except TimeoutError:
            return False
        return True
