"""Record core/v1 Events about objects, as client-go's ``record.EventRecorder`` does.

``recorder.event(obj, "Normal", "Synced", "...")`` returns at once: the Event is written by a
background task.  Repeats of the same (object, type, reason, message) within ``aggregation_window``
bump ``count`` and ``lastTimestamp`` of the Event already written (a merge patch) instead of
creating another, which ``kubectl describe`` shows as ``(x3 over 2m)``.  Events about
cluster-scoped objects go to the ``default`` namespace.  Nothing here raises into the caller: a
full queue or a failing API server costs events (counted in ``dropped`` / ``failed``), not errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from flotilla.client.errors import ApiException, is_already_exists, is_not_found
from flotilla.client.resources import EVENTS, Resource

log = logging.getLogger(__name__)

__all__ = ["EventClient", "EventRecorder", "NORMAL", "WARNING"]

NORMAL = "Normal"
WARNING = "Warning"
_TYPES = (NORMAL, WARNING)
_MAX_MESSAGE = 1024  # bytes, as events.k8s.io allows; client-go truncates the same way
_MAX_NAME = 253


class EventClient(Protocol):
    """The part of :class:`flotilla.client.client.Client` the recorder uses."""

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def patch(
        self, res: Resource, name: str, patch: Any, *, namespace: str | None = None, patch_type: str = "merge"
    ) -> dict[str, Any]: ...


@dataclass(slots=True)
class _Pending:
    involved: dict[str, str]
    namespace: str
    type: str
    reason: str
    message: str
    wall: datetime
    mono: float


@dataclass(slots=True)
class _Seen:
    name: str
    namespace: str
    count: int
    first_mono: float
    last_mono: float


def _timestamp(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _truncate(message: str) -> str:
    raw = message.encode()
    if len(raw) <= _MAX_MESSAGE:
        return message
    return raw[: _MAX_MESSAGE - 3].decode(errors="ignore") + "..."


class EventRecorder:
    """Writes Events for ``component`` (``source.component`` / ``reportingComponent``) on ``host``."""

    def __init__(
        self,
        client: EventClient,
        component: str,
        host: str = "",
        *,
        max_queue: int = 1000,
        aggregation_window: float = 600.0,
        cache_size: int = 4096,
        attempts: int = 3,
        request_timeout: float = 10.0,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host
        self.aggregation_window = aggregation_window
        self.cache_size = cache_size
        self.attempts = max(1, attempts)
        self.request_timeout = request_timeout
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=max_queue)
        self._worker: asyncio.Task[None] | None = None
        self._seen: OrderedDict[tuple[Any, ...], _Seen] = OrderedDict()
        self._last_suffix = 0
        self._closed = False
        #: events created, patched (aggregated), dropped (queue full / no loop / invalid), failed to write
        self.created = 0
        self.aggregated = 0
        self.dropped = 0
        self.failed = 0

    # -- the caller's side -------------------------------------------------------------------

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Queue an Event about ``obj`` (an API object: apiVersion, kind, metadata); never raises."""
        try:
            self._enqueue(obj, type, reason, message)
        except Exception:
            self.dropped += 1
            log.exception("event recorder: could not queue event %s/%s", type, reason)

    def eventf(self, obj: Mapping[str, Any], type: str, reason: str, fmt: str, *args: Any) -> None:
        """``event`` with a %-format message."""
        try:
            message = fmt % args if args else fmt
        except Exception:
            message = f"{fmt} {args!r}"
        self.event(obj, type, reason, message)

    async def flush(self) -> None:
        """Wait until every queued event has been written (or given up on); bound it with asyncio.timeout."""
        await self._queue.join()

    async def close(self, *, grace: float | None = 5.0) -> None:
        """Flush (for at most ``grace`` seconds), then stop the writer; later events are dropped."""
        try:
            async with asyncio.timeout(grace):
                await self.flush()
        except TimeoutError:
            log.warning("event recorder: closing with %d events unwritten", self._queue.qsize())
        self._closed = True
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        while not self._queue.empty():  # what the grace period did not cover
            self._queue.get_nowait()
            self._queue.task_done()
            self.dropped += 1

    # -- queueing ------------------------------------------------------------------------------

    def _enqueue(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        if self._closed:
            self.dropped += 1
            return
        if type not in _TYPES:
            self.dropped += 1
            log.warning("event recorder: unsupported event type %r (reason %s) dropped", type, reason)
            return
        md = obj.get("metadata") or {}
        name = md.get("name")
        if not name:
            self.dropped += 1
            log.warning("event recorder: object without metadata.name, event %s dropped", reason)
            return
        involved = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": name,
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion"),
        }
        involved = {k: str(v) for k, v in involved.items() if v}
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.dropped += 1
            log.warning("event recorder: no running event loop, event %s dropped", reason)
            return
        item = _Pending(
            involved=involved,
            namespace=involved.get("namespace") or "default",
            type=type,
            reason=str(reason),
            message=_truncate(str(message)),
            wall=datetime.now(UTC),
            mono=time.monotonic(),
        )
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                log.warning("event recorder: queue full, %d events dropped so far", self.dropped)
            return
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run(), name=f"event-recorder-{self.component}")

    # -- writing -------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._write(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failed += 1
                log.warning("event recorder: could not write event %s about %s", item.reason,
                            item.involved.get("name"), exc_info=True)  # fmt: skip
            finally:
                self._queue.task_done()

    async def _write(self, item: _Pending) -> None:
        inv = item.involved
        key = (
            inv.get("apiVersion"), inv.get("kind"), inv.get("namespace"), inv.get("name"), inv.get("uid"),
            item.type, item.reason, item.message,
        )  # fmt: skip
        seen = self._seen.get(key)
        if seen is not None and item.mono - seen.last_mono <= self.aggregation_window:
            count = seen.count + 1
            patch = {"count": count, "lastTimestamp": _timestamp(item.wall)}
            try:
                await self._retrying(
                    lambda: self.client.patch(
                        EVENTS, seen.name, patch, namespace=seen.namespace, patch_type="merge"
                    )
                )
            except ApiException as e:
                if not is_not_found(e):
                    raise
                self._seen.pop(key, None)  # the Event was deleted (or expired): start a new one
            else:
                seen.count = count
                seen.last_mono = item.mono
                self._seen.move_to_end(key)
                self.aggregated += 1
                return

        for _ in range(3):  # a name clash is all but impossible; try a fresh name if it happens
            name = self._event_name(inv["name"])
            body = self._body(item, name)
            try:
                await self._retrying(lambda body=body: self.client.create(EVENTS, body, item.namespace))
            except ApiException as e:
                if is_already_exists(e):
                    continue
                raise
            break
        else:
            raise RuntimeError("could not find a free Event name")
        self.created += 1
        self._seen[key] = _Seen(name, item.namespace, 1, item.mono, item.mono)
        self._seen.move_to_end(key)
        while len(self._seen) > self.cache_size:
            self._seen.popitem(last=False)

    async def _retrying(self, call: Any) -> Any:
        """Retry a write on server or connection trouble (not on 4xx answers, which won't change)."""
        for attempt in range(self.attempts):
            try:
                async with asyncio.timeout(self.request_timeout):
                    return await call()
            except (ApiException, TimeoutError, OSError) as e:
                status = e.status if isinstance(e, ApiException) else 0
                if 400 <= status < 500 and status != 429 or attempt == self.attempts - 1:
                    raise
                await asyncio.sleep(0.1 * 2**attempt)
        raise AssertionError("unreachable")

    def _event_name(self, obj_name: str) -> str:
        suffix = max(time.time_ns(), self._last_suffix + 1)
        self._last_suffix = suffix
        return f"{obj_name[: _MAX_NAME - 17]}.{suffix:016x}"

    def _body(self, item: _Pending, name: str) -> dict[str, Any]:
        ts = _timestamp(item.wall)
        source: dict[str, str] = {"component": self.component}
        if self.host:
            source["host"] = self.host
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": item.namespace},
            "involvedObject": dict(item.involved),
            "reason": item.reason,
            "message": item.message,
            "source": source,
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
            "type": item.type,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        return body
