"""Namespace lifecycle: a deleted namespace is Terminating until its content is gone, then it goes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from typing import Any

from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.objects import meta
from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.rest import ResourceStorage
from flotilla.apiserver.store_mirror import NameMirror
from flotilla.apiserver.tasks import TasksByName, cancel_and_wait
from flotilla.kube.objects import meta_of

log = logging.getLogger(__name__)
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class _TerminatingNamespaces(NameMirror[bool]):
    """Namespace name -> terminating?, of every namespace."""

    what = "namespaces"
    relist_pause = 0.2

    def value_of(self, obj: Mapping[str, Any]) -> bool:
        return bool(meta_of(obj).get("deletionTimestamp"))


class NamespaceLifecycle:
    """Namespace termination, plus the cache of namespaces that spares creates a store read.

    The cache (name -> terminating?) follows the store through a watch, so namespaces created or
    deleted through another API server on the same etcd are seen too; a name missing from it is
    looked up in the store, as kube-apiserver's NamespaceLifecycle admission does.
    """

    def __init__(self, storage: ResourceStorage) -> None:
        self.storage = storage
        self.ns_rt = storage.types.lookup("", "v1", "namespaces")
        self._terminations = TasksByName(log, "terminating namespace %s failed")
        self._mirror = _TerminatingNamespaces()
        self.cache = self._mirror.by_name

    async def start_cache(self) -> None:
        assert self.ns_rt is not None
        await self._mirror.attach(self.storage, self.ns_rt)
        self.storage.namespace_cache = self.cache

    async def ensure_defaults(self) -> None:
        assert self.ns_rt is not None
        for name in DEFAULT_NAMESPACES:
            try:
                await self.storage.create(self.ns_rt, None, {"metadata": {"name": name}})
            except ApiError as e:
                if e.code != 409:
                    raise

    async def resume(self) -> None:
        assert self.ns_rt is not None
        listed = await self.storage.list(self.ns_rt, None)
        for ns in listed["items"]:
            if meta(ns).get("deletionTimestamp"):
                self._schedule(meta(ns)["name"])

    def on_write(self, rt: ResourceType, event: str, obj: dict[str, Any]) -> None:
        if rt is not self.ns_rt:
            return
        if event == "MODIFIED" and meta(obj).get("deletionTimestamp"):
            self._schedule(meta(obj)["name"])

    def _schedule(self, name: str) -> None:
        self._terminations.start(name, lambda: self._terminate(name))

    async def _terminate(self, name: str) -> None:
        ns_rt = self.ns_rt
        assert ns_rt is not None
        while True:
            remaining = 0
            for rt in self.storage.types.namespaced_types():
                listed = await self.storage.list(rt, name)
                for obj in listed["items"]:
                    remaining += 1
                    if meta(obj).get("deletionTimestamp"):
                        continue
                    try:
                        await self.storage.delete(rt, name, meta(obj)["name"])
                    except ApiError:
                        pass
            if remaining == 0:
                break
            await asyncio.sleep(0.5)
        try:
            ns = await self.storage.get(ns_rt, None, name)
        except ApiError:
            return

        def finalized(current: dict[str, Any]) -> Awaitable[dict[str, Any]]:
            spec = {**(current.get("spec") or {}), "finalizers": []}
            return self.storage.update(ns_rt, None, name, {**current, "spec": spec}, subresource="finalize")

        await self.storage.write_guarded(ns_rt, ns, finalized, attempts=100)

    async def stop(self) -> None:
        self.storage.namespace_cache = None
        await self._mirror.stop()
        await cancel_and_wait(self._terminations.running())
