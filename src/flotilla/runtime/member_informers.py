"""The member informers of a controller-manager: one per member cluster and kind, shared by its controllers.

The execution controller watches the objects it placed in a member for drift, and the work-status controller
watches the same objects for their status. Like Karmada's multi-cluster informer manager, which its object watcher
and work-status controller share, Flotilla lists and watches the managed objects (``karmada.io/managed=true``) of
one kind in one member once; each controller adds its own handlers to that informer (a handler added late is first
told of every cached object) and removes them when it no longer needs them. The informers of a member are replaced
when its client is (new endpoint or credentials) and stopped when its Cluster goes or the controller-manager stops.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from flotilla.api.labels import MANAGED_LABEL, MANAGED_LABEL_VALUE
from flotilla.client import Client, Informer, Resource, SharedInformerFactory

__all__ = ["MANAGED_SELECTOR", "MEMBER_INFORMERS", "MemberInformers", "member_informers"]

MANAGED_SELECTOR: Final = f"{MANAGED_LABEL}={MANAGED_LABEL_VALUE}"
#: the key of the shared member informers in a controller-manager's ``ctx.extras``
MEMBER_INFORMERS: Final = "member-informers"
#: seconds between the attempts to list or watch a member that does not answer (first, at most)
BACKOFF: Final = (0.2, 10.0)


class MemberInformers:
    """Cluster name -> the informer factory on that member's current client."""

    def __init__(self) -> None:
        self._factories: dict[str, SharedInformerFactory] = {}
        self._stopping: set[asyncio.Task[Any]] = set()

    def informer(self, cluster: str, client: Client, res: Resource) -> Informer:
        """The (started) informer of ``res``'s managed objects in ``cluster`` through ``client``; the informers on
        an older client of that cluster are stopped."""
        factory = self._factories.get(cluster)
        if factory is None or factory.client is not client:
            if factory is not None:
                self._stop_later(factory)
            factory = self._factories[cluster] = SharedInformerFactory(client, backoff=BACKOFF)
            factory.start()
        return factory.informer(res, label_selector=MANAGED_SELECTOR)

    def watched(self, cluster: str) -> list[Resource]:
        """The resources watched in ``cluster`` (one informer each)."""
        factory = self._factories.get(cluster)
        return [inf.res for inf in factory.informers] if factory is not None else []

    def forget(self, cluster: str) -> None:
        """The cluster is gone: stop its informers."""
        factory = self._factories.pop(cluster, None)
        if factory is not None:
            self._stop_later(factory)

    def _stop_later(self, factory: SharedInformerFactory) -> None:
        task = asyncio.get_running_loop().create_task(factory.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def stop(self) -> None:
        """Stop every informer (idempotent)."""
        factories, self._factories = list(self._factories.values()), {}
        await asyncio.gather(*(f.stop() for f in factories), *list(self._stopping), return_exceptions=True)


def member_informers(extras: dict[str, Any]) -> MemberInformers:
    """The controller-manager's shared member informers (created on first use)."""
    shared: MemberInformers = extras.setdefault(MEMBER_INFORMERS, MemberInformers())
    return shared
