"""The in-process transport: the client's verbs as direct calls into a ResourceStorage, no sockets, no JSON text.

It mirrors what the HTTP layer (``flotilla.apiserver.app``) adds on top of ResourceStorage, so a controller sees
the same semantics on either transport: query parameters, fieldValidation defaulting to Warn, strategic merge
patches on custom resources applied as merge patches, the ``/scale`` subresource, watch bookmarks at an interval
and ``timeoutSeconds``.

Objects are handed over as Python dicts, with this ownership rule:

* what the caller sends (bodies, patches, delete options) is copied on the way in (an orjson round trip: the
  server may change its copy, and the caller sees exactly what JSON would carry), so the caller keeps its dicts;
* what ``get``, ``list``, ``create``, ``update``, ``patch`` and ``delete`` return is the caller's own: the
  server decodes or builds it for this call and keeps no reference to it (its ``after_write`` hooks get the
  shared object of the revision instead), so the caller may mutate it (e.g. get-modify-update);
* watch events carry the server's decoded object of that revision, shared with every other watcher (other
  informers, HTTP watches): they are immutable. An informer's cache holds them as they are; whoever wants to
  change one copies it first (``copy.deepcopy``), as the informer's contract already says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

import orjson

from flotilla.apiserver import discovery as docs
from flotilla.apiserver import errors as server_errors
from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.rest import (
    JSON_PATCH,
    MERGE_PATCH,
    PROGRESS,
    STRATEGIC_PATCH,
    RequestContext,
    ResourceStorage,
    WatchSpec,
)
from flotilla.apiserver.rest import (
    WatchStream as StorageWatch,
)
from flotilla.apiserver.scale import scale_from_object, scale_to_patch
from flotilla.client.client import Client
from flotilla.client.errors import ApiException, from_status
from flotilla.client.transport import Query, Transport, WatchEvent, WatchStream
from flotilla.kube.patch import PatchError, apply_json_patch, apply_merge_patch
from flotilla.kube.resources import Resource

__all__ = ["InProcessTransport", "in_process_client"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def _copy(obj: Any) -> Any:
    """A deep copy that is also exactly what a JSON round trip would give (and several times faster than
    ``copy.deepcopy``)."""
    return orjson.loads(orjson.dumps(obj))


#: what the caller sends, as the server would receive it over HTTP (tuples become lists, and a value JSON
#: cannot carry raises TypeError, as the HTTP transport's encoder does)
_copy_in = _copy


def _exception(e: ApiError) -> ApiException:
    return ApiException(e.code, e.reason, e.message, e.status())


def _truthy(v: str | None) -> bool:
    return (v or "").lower() in ("1", "true")


class InProcessTransport(Transport):
    server = "in-process"

    def __init__(self, storage: ResourceStorage, *, bookmark_interval: float = 30.0) -> None:
        self.storage = storage
        self.bookmark_interval = bookmark_interval

    # ------------------------------------------------------------------ helpers
    async def _call(self, aw: Awaitable[T]) -> T:
        try:
            return await aw
        except ApiError as e:
            raise _exception(e) from None
        except (ApiException, asyncio.CancelledError):
            raise
        except Exception as e:  # what the HTTP server would answer: 500, and the cause kept for debugging
            log.exception("in-process request failed")
            raise ApiException(500, "InternalError", f"Internal error occurred: {type(e).__name__}: {e}") from e

    def _type(self, res: Resource) -> ResourceType:
        rt = self.storage.types.lookup(res.group, res.version, res.plural)
        if rt is None:
            raise _exception(server_errors.path_not_found())
        return rt

    def _item(self, res: Resource, namespace: str | None, subresource: str | None) -> tuple[ResourceType, str | None]:
        rt = self._type(res)
        if rt.namespaced and not namespace:
            raise _exception(server_errors.path_not_found())
        if subresource is not None and subresource not in rt.subresources:
            raise _exception(server_errors.path_not_found())
        return rt, namespace if rt.namespaced else None

    @staticmethod
    def _ctx(query: Query) -> RequestContext:
        dry = query.get("dryRun", "")
        if dry and dry != "All":
            raise _exception(server_errors.bad_request(f'unsupported dryRun value "{dry}": supported values: "All"'))
        validation = query.get("fieldValidation") or "Warn"
        if validation not in ("Strict", "Warn", "Ignore"):
            raise _exception(server_errors.bad_request(f"fieldValidation parameter unsupported: {validation}"))
        return RequestContext(dry_run=bool(dry), field_manager=query.get("fieldManager", ""),
                              field_validation=validation, force=_truthy(query.get("force")))

    @staticmethod
    def _delete_options(options: dict[str, Any]) -> dict[str, Any]:
        options = _copy_in(options)
        grace = options.get("gracePeriodSeconds")
        if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool) or grace < 0):
            raise _exception(server_errors.bad_request(
                f"gracePeriodSeconds must be a non-negative integer number of seconds, got {grace!r}"))
        if options.get("propagationPolicy") is not None and not isinstance(options["propagationPolicy"], str):
            raise _exception(server_errors.bad_request("propagationPolicy must be one of Background, Foreground, Orphan"))
        if options.get("preconditions") is not None and not isinstance(options["preconditions"], dict):
            raise _exception(server_errors.bad_request("preconditions must be an object"))
        return options

    # ------------------------------------------------------------------ verbs
    async def get(self, res: Resource, namespace: str | None, name: str, subresource: str | None, *,
                  resource_version: str = "") -> dict[str, Any]:
        rt, ns = self._item(res, namespace, subresource)
        obj = await self._call(self.storage.get(rt, ns, name, cached=resource_version == "0"))
        if subresource == "scale":
            return scale_from_object(rt, obj)
        return obj  # decoded for this call: the caller's own

    async def list(self, res: Resource, namespace: str | None, query: Query) -> dict[str, Any]:
        rt = self._type(res)
        # the items are decoded for this call: the caller's own
        return await self._call(self.storage.list_query(rt, namespace if rt.namespaced else None, query))

    async def create(self, res: Resource, namespace: str | None, body: dict[str, Any], query: Query) -> dict[str, Any]:
        rt = self._type(res)
        if rt.namespaced and not namespace:
            raise _exception(server_errors.method_not_allowed())
        ctx = self._ctx(query)
        return await self._call(self.storage.create(rt, namespace if rt.namespaced else None, _copy_in(body), ctx))

    async def update(self, res: Resource, namespace: str | None, name: str, body: dict[str, Any],
                     subresource: str | None, query: Query) -> dict[str, Any]:
        rt, ns = self._item(res, namespace, subresource)
        ctx = self._ctx(query)
        if subresource == "scale":
            patch = await self._call(self._scale_patch(rt, _copy_in(body)))
            obj, _ = await self._call(self.storage.patch(rt, ns, name, MERGE_PATCH, patch, ctx))
            return scale_from_object(rt, obj)
        return await self._call(self.storage.update(rt, ns, name, _copy_in(body), ctx, subresource=subresource,
                                                     owned=True))

    @staticmethod
    async def _scale_patch(rt: ResourceType, scale: Any) -> dict[str, Any]:
        return scale_to_patch(rt, scale)

    async def patch(self, res: Resource, namespace: str | None, name: str, body: Any, content_type: str,
                    subresource: str | None, query: Query) -> dict[str, Any]:
        rt, ns = self._item(res, namespace, subresource)
        ctx = self._ctx(query)
        if subresource == "scale":
            current = scale_from_object(rt, await self._call(self.storage.get(rt, ns, name)))
            try:
                if content_type == JSON_PATCH:
                    patched = apply_json_patch(current, _copy_in(body))
                elif isinstance(body, dict):
                    patched = apply_merge_patch(current, _copy_in(body))
                else:
                    raise _exception(server_errors.bad_request("patch body must be a JSON object"))
            except PatchError as e:
                raise _exception(server_errors.bad_request(str(e))) from None
            patch = await self._call(self._scale_patch(rt, patched))
            obj, _ = await self._call(self.storage.patch(rt, ns, name, MERGE_PATCH, patch, ctx))
            return scale_from_object(rt, obj)
        if content_type == STRATEGIC_PATCH and rt.from_crd:
            content_type = MERGE_PATCH  # as the HTTP layer does for custom resources
        obj, _ = await self._call(self.storage.patch(rt, ns, name, content_type, _copy_in(body), ctx,
                                                     subresource=subresource))
        return obj

    async def delete(self, res: Resource, namespace: str | None, name: str, options: dict[str, Any],
                     query: Query) -> dict[str, Any]:
        rt, ns = self._item(res, namespace, None)
        ctx = self._ctx(query)
        result, _ = await self._call(self.storage.delete(rt, ns, name, self._delete_options(options), ctx))
        return result

    async def delete_collection(self, res: Resource, namespace: str | None, options: dict[str, Any],
                                query: Query) -> dict[str, Any]:
        rt = self._type(res)
        ctx = self._ctx(query)
        result = await self._call(self.storage.delete_collection(
            rt, namespace if rt.namespaced else None, label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""), options=self._delete_options(options), ctx=ctx))
        return _copy(result)

    def watch(self, res: Resource, namespace: str | None, query: Query) -> WatchStream:
        return _InProcessWatch(self, res, namespace, query)

    async def discovery(self, path: str) -> dict[str, Any]:
        types = self.storage.types
        segs = [s for s in path.split("/") if s]
        doc: dict[str, Any] | None = None
        if segs == ["api"]:
            doc = docs.api_versions("in-process")
        elif segs == ["apis"]:
            doc = docs.api_group_list(types)
        elif len(segs) == 2 and segs[0] == "api":
            doc = docs.api_resource_list(types, "", segs[1])
        elif len(segs) == 3 and segs[0] == "apis":
            doc = docs.api_resource_list(types, segs[1], segs[2])
        if doc is None:
            raise _exception(server_errors.path_not_found())
        return _copy(doc)


class _InProcessWatch(WatchStream):
    """A ResourceStorage watch, with the HTTP layer's bookmarks (when idle) and timeoutSeconds.

    Events are polled from the storage's stream (no task per event); a caller that times out a read (and so
    cancels ``__anext__``) loses nothing, since only the wait for the next event is cancelled. The objects are
    the server's shared decoded objects (see the module's ownership rule): not copied, not to be mutated.
    """

    def __init__(self, transport: InProcessTransport, res: Resource, namespace: str | None, query: Query) -> None:
        self._t = transport
        self._res = res
        self._namespace = namespace
        self._query = dict(query)
        self._stream: StorageWatch | None = None
        self._closed = False
        self._bookmarks = _truthy(query.get("allowWatchBookmarks"))
        self._kind = ""
        self._api_version = res.api_version
        self._last_rv = ""
        self._deadline = float("inf")
        self._next_bookmark = float("inf")
        # what ``ready`` took from the stream but cannot hand out without awaiting: ``__anext__`` handles it
        self._held: tuple[str, dict[str, Any]] | Exception | None = None
        self._active = False  # events were handed out since the stream was last idle

    def ready(self) -> WatchEvent | None:
        """The next event if the server has it ready now (no await, no timer: what a reader tries before it
        waits), else None; then ``__anext__`` reads on (it also sends bookmarks, ends the watch at its
        deadline and raises an ERROR)."""
        stream = self._stream
        if stream is None or self._closed or self._held is not None:
            return None
        while True:
            try:
                item = stream.poll()
            except Exception as e:
                self._held = e
                return None
            if item is None:
                return None
            etype, obj = item
            if etype == PROGRESS:
                self._last_rv = obj["metadata"]["resourceVersion"]
                continue
            if etype in ("ERROR", "BOOKMARK"):
                self._held = item
                return None
            return self._event(etype, obj)

    def _event(self, etype: str, obj: dict[str, Any]) -> WatchEvent:
        self._last_rv = (obj.get("metadata") or {}).get("resourceVersion", self._last_rv)
        self._active = True  # the next bookmark is due an interval after the stream goes idle
        return WatchEvent(etype, obj)

    async def _open(self) -> StorageWatch:
        t, q = self._t, self._query
        rt = t._type(self._res)
        send_initial = _truthy(q.get("sendInitialEvents"))
        if send_initial and (q.get("resourceVersionMatch") != "NotOlderThan" or not self._bookmarks):
            raise _exception(server_errors.invalid(rt, "", [server_errors.Cause(
                "sendInitialEvents", "Forbidden: sendInitialEvents requires resourceVersionMatch=NotOlderThan and "
                "allowWatchBookmarks=true", "FieldValueForbidden")]))
        spec = WatchSpec(
            namespace=self._namespace if rt.namespaced else None,
            label_selector=q.get("labelSelector", ""),
            field_selector=q.get("fieldSelector", ""),
            resource_version=q.get("resourceVersion", ""),
            send_initial_events=send_initial,
            allow_bookmarks=self._bookmarks,
        )
        try:
            timeout = float(q.get("timeoutSeconds") or 0)
        except ValueError:
            raise _exception(server_errors.bad_request("invalid timeoutSeconds")) from None
        stream = await t._call(t.storage.watch(rt, spec))
        loop = asyncio.get_running_loop()
        if timeout > 0:
            self._deadline = loop.time() + timeout
        if self._bookmarks:
            self._next_bookmark = loop.time() + t.bookmark_interval
        self._kind = rt.kind
        rv = spec.resource_version
        self._last_rv = rv if rv not in ("", "0") else ""
        return stream

    async def __anext__(self) -> WatchEvent:
        if self._closed:
            raise StopAsyncIteration
        if self._stream is None:
            try:
                self._stream = await self._open()
            except BaseException:
                self._closed = True
                raise
        stream = self._stream
        loop: asyncio.AbstractEventLoop | None = None
        while True:
            held, self._held = self._held, None
            try:
                if isinstance(held, Exception):
                    raise held
                item = stream.poll() if held is None else held
            except Exception as e:  # a bug below; the HTTP server would end the watch too
                await self.aclose()
                raise ApiException(500, "InternalError", f"watch failed: {type(e).__name__}: {e}") from e
            if item is None:
                if stream.finished:
                    await self.aclose()
                    raise StopAsyncIteration
                if loop is None:
                    loop = asyncio.get_running_loop()
                now = loop.time()
                if self._active:
                    self._active = False
                    if self._bookmarks:
                        self._next_bookmark = now + self._t.bookmark_interval
                wait = min(self._deadline, self._next_bookmark) - now
                if wait > 0 and await stream.wait(None if wait == float("inf") else wait):
                    continue
                now = loop.time()
                if now >= self._deadline:
                    await self.aclose()
                    raise StopAsyncIteration
                if now < self._next_bookmark:
                    continue
                self._next_bookmark = now + self._t.bookmark_interval
                progress = stream.progress_revision()
                if progress is not None and progress > int(self._last_rv or 0):
                    self._last_rv = str(progress)
                if not self._last_rv:
                    continue
                return WatchEvent("BOOKMARK", {"kind": self._kind, "apiVersion": self._api_version,
                                               "metadata": {"resourceVersion": self._last_rv}})
            etype, obj = item
            if etype == PROGRESS:
                self._last_rv = obj["metadata"]["resourceVersion"]
                continue
            if etype == "ERROR":
                await self.aclose()
                raise from_status(obj, 500)
            if etype == "BOOKMARK":
                if not self._bookmarks:
                    continue
            return self._event(etype, obj)

    async def aclose(self) -> None:
        self._closed = True
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                await stream.aclose()
            except (RuntimeError, ApiError):
                pass


def in_process_client(storage: ResourceStorage, *, bookmark_interval: float = 30.0) -> Client:
    """A client calling ``storage`` directly (same semantics as HTTP; no sockets, objects copied)."""
    return Client(InProcessTransport(storage, bookmark_interval=bookmark_interval))
