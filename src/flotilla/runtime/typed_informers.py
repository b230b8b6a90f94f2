"""Informers of kinds a controller learns of only at run time (a template's, a dependency's), each started on
first use, and the Warning Event of a step that failed for another reason than a conflict."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from flotilla.client import ApiException, Informer, Resource, is_conflict, is_not_found
from flotilla.client.events import WARNING
from flotilla.interpreter.operations import InterpreterError
from flotilla.propagation.binding_spec import OwnerConflict

if TYPE_CHECKING:
    from flotilla.runtime.base import Controller

log = logging.getLogger(__name__)

__all__ = ["TypedInformers", "warn_on_failure"]


class TypedInformers:
    """One informer per ``(apiVersion, kind)``, started when first asked for and kept from then on.

    ``prepare(informer, resource)`` sets a new informer up (indexers, handlers) before it starts; the first
    caller waits up to ``sync_timeout`` seconds for its list (then goes on with what it has, saying so in the log
    as ``what``).
    """

    def __init__(self, ctrl: Controller, what: str, *, sync_timeout: float,
                 prepare: Callable[[Informer, Resource], None] | None = None) -> None:
        self._ctrl = ctrl
        self._what = what
        self._sync_timeout = sync_timeout
        self._prepare = prepare
        self._informers: dict[tuple[str, str], Informer] = {}
        self._resources: dict[tuple[str, str], Resource] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def started(self, api_version: str, kind: str) -> Informer | None:
        """The informer of the kind when it was started already, else None."""
        return self._informers.get((api_version, kind))

    def resource(self, api_version: str, kind: str) -> Resource | None:
        """The collection of a kind whose informer was started, else None."""
        return self._resources.get((api_version, kind))

    async def informer(self, api_version: str, kind: str) -> Informer | None:
        """The informer of the kind, started on first use; None when the control plane does not serve the kind
        (asked again on the next call)."""
        tkey = (api_version, kind)
        inf = self._informers.get(tkey)
        if inf is not None:
            return inf
        async with self._locks.setdefault(tkey, asyncio.Lock()):
            inf = self._informers.get(tkey)
            if inf is not None:
                return inf
            try:
                res = await self._ctrl.client.resource_for(api_version, kind)
            except ApiException as e:
                if is_not_found(e):
                    return None
                raise
            inf = self._ctrl.informer(res)
            if self._prepare is not None:
                self._prepare(inf, res)
            inf.start()  # no-op when the factory started it already
            if not await inf.wait_synced(self._sync_timeout):
                log.warning("%s: %s not listed within %.0fs", self._what, res, self._sync_timeout)
            self._resources[tkey] = res
            self._informers[tkey] = inf
        return inf

    async def get(self, api_version: str, kind: str, namespace: str | None,
                  name: str) -> tuple[Resource | None, dict[str, Any] | None]:
        """The collection of the kind and the object from its informer (from the API while the informer has not
        listed yet); ``(None, None)`` when the kind is not served, ``(resource, None)`` when the object does not
        exist. ``namespace`` counts only for a namespaced kind."""
        inf = await self.informer(api_version, kind)
        if inf is None:
            return None, None
        res = self._resources[(api_version, kind)]
        ns = (namespace or None) if res.namespaced else None
        obj = inf.store.get(f"{ns}/{name}" if ns else name)
        if obj is None and not inf.has_synced:
            obj = await self._ctrl.client.get_or_none(res, name, ns)
        return res, obj


@contextlib.contextmanager
def warn_on_failure(ctrl: Controller, subject: Callable[[], Mapping[str, Any]], reason: str,
                    what: str) -> Iterator[None]:
    """Record the Warning Event ``reason``, ``<what> failed: <error>``, on ``subject()`` (the object as it
    stands when the block fails) when the block fails with an API error other than a conflict (that one is
    simply retried), an interpreter error or an owner conflict; the error goes on either way."""
    try:
        yield
    except (ApiException, InterpreterError, OwnerConflict) as e:
        if not (isinstance(e, ApiException) and is_conflict(e)):
            ctrl.ctx.recorder.event(subject(), WARNING, reason, f"{what} failed: {e}")
        raise
