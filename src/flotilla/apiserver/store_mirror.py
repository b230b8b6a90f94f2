"""A copy of one kind's objects inside an API server process, kept current from its storage.

Admission and authentication sometimes need every object of a kind at hand on each request (the
ResourceInterpreterCustomizations an admission check compares against, the agent-token Secrets the authenticator
looks tokens up in). :class:`StoreMirror` lists them once, then follows this server's own writes (synchronously,
through ``storage.after_write``, so a request sees a write that came just before it) and the store's watch (the
writes of other API servers sharing the store), re-listing whenever the watch ends or fails. Subclasses say what to
keep of each object (:meth:`remember`) and how to start over from a list (:meth:`reset`); :class:`NameMirror` keeps
one value per object name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from flotilla.kube.objects import meta_of

__all__ = ["NameMirror", "StoreMirror"]

log = logging.getLogger(__name__)

#: Pause before a failed or ended watch is re-listed (never a busy loop against a failing store).
RELIST_PAUSE = 0.5


class StoreMirror:
    """Objects of one resource type (``attach``'s ``rt``) in ``namespace`` (None: all), kept current.

    ``what`` names the objects in log lines."""

    what = "objects"
    #: seconds to wait before re-listing after the watch failed or ended
    relist_pause = RELIST_PAUSE

    def __init__(self, namespace: str | None = None) -> None:
        self.namespace = namespace
        self._rt: Any = None
        self._task: asyncio.Task[None] | None = None

    def remember(self, event: str, obj: Mapping[str, Any]) -> None:
        """Take in one ``ADDED``, ``MODIFIED`` or ``DELETED`` object."""
        raise NotImplementedError

    def reset(self, items: list[dict[str, Any]]) -> None:
        """Forget everything and take in a fresh list."""
        raise NotImplementedError

    def watches(self, rt: Any) -> bool:
        """Whether a write of type ``rt`` is one this mirror keeps."""
        return rt is self._rt

    def on_write(self, rt: Any, event: str, obj: dict[str, Any]) -> None:
        if self.watches(rt):
            self.remember(event, obj)

    async def attach(self, storage: Any, rt: Any, *, follow: bool = True) -> None:
        """List once, then follow this server's writes and (``follow``) the store's watch."""
        self._rt = rt
        listed = await storage.list(rt, self.namespace)
        self.reset(listed["items"])
        storage.after_write.append(self.on_write)
        if follow:
            self._task = asyncio.get_running_loop().create_task(
                self._follow(storage, listed["metadata"]["resourceVersion"]))

    async def _follow(self, storage: Any, rv: str) -> None:
        from flotilla.apiserver.rest import WatchSpec

        while True:
            try:
                events = await storage.watch(self._rt, WatchSpec(namespace=self.namespace, resource_version=rv))
                async for etype, obj in events:
                    if etype in ("ADDED", "MODIFIED", "DELETED"):
                        rv = obj["metadata"]["resourceVersion"]
                        self.remember(etype, obj)
                    elif etype == "ERROR":
                        break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("watch of %s failed; re-listing", self.what)
            await asyncio.sleep(self.relist_pause)
            try:
                listed = await storage.list(self._rt, self.namespace)
            except Exception:
                log.exception("re-list of %s failed", self.what)
                continue
            self.reset(listed["items"])
            rv = listed["metadata"]["resourceVersion"]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


V = TypeVar("V")


class NameMirror(StoreMirror, Generic[V]):
    """A :class:`StoreMirror` keeping ``value_of(obj)`` for each object's name in ``by_name`` (updated in place:
    the dict may be handed out)."""

    def __init__(self, namespace: str | None = None) -> None:
        super().__init__(namespace)
        self.by_name: dict[str, V] = {}

    def value_of(self, obj: Mapping[str, Any]) -> V:
        """What to keep of an object."""
        raise NotImplementedError

    def remember(self, event: str, obj: Mapping[str, Any]) -> None:
        name = meta_of(obj).get("name")
        if not isinstance(name, str):
            return
        if event == "DELETED":
            self.by_name.pop(name, None)
        else:
            self.by_name[name] = self.value_of(obj)

    def reset(self, items: list[dict[str, Any]]) -> None:
        self.by_name.clear()
        for item in items:
            self.remember("ADDED", item)
