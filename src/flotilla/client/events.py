"""Record core/v1 Events about objects, as client-go's ``record.EventRecorder`` does.

``recorder.event(obj, "Normal", "Synced", "...")`` returns at once: the Event is written by background
writers.  What reaches the API server follows client-go's ``EventCorrelator`` (``tools/record/events_cache.go``):

* **dedupe** (its ``eventLogger``): a repeat of the same (object, type, reason, message) within
  ``aggregation_window`` bumps ``count`` and ``lastTimestamp`` of the Event already written (a merge patch)
  instead of creating another, which ``kubectl describe`` shows as ``(x3 over 2m)``;
* **aggregation of similar events** (its ``EventAggregator``): once ``similar_max`` (10) events of one object
  with the same type and reason but different messages were seen within ``similar_window`` (10 min), the
  next ones become one Event "(combined from similar events): <latest message>" whose count grows;
* **spam filter per object** (its ``EventSourceObjectSpamFilter``): a token bucket per (source, object, type)
  of ``spam_burst`` (25) refilled at ``spam_qps`` (one per 5 min). Unlike client-go, a token is spent per *new
  Event* only, not per occurrence: a repeat is folded into the count of the Event already written and costs no
  token, so a busy object's routine Events (``AggregateStatusSucceed`` on every status change) cannot use up the
  budget of the Events that matter. The count bumps of an Event that keeps repeating are spaced out instead:
  the first waits ``patch_delay``, each next one twice as long after the previous write, up to
  ``bump_max_interval`` (5 min, the filter's refill period); an Event quiet for that long starts again at
  ``patch_delay``. The count stays exact, only its update lags.

**Priority reasons.** Events whose reason is in ``priority_reasons`` (the controller-manager gives
:data:`flotilla.failover.events.FAILOVER_EVENT_REASONS`) always land: the spam filter never holds them back,
their count bumps wait ``patch_delay`` only, they are written before any other, and when the queue is full they
take the place of any other waiting write. Their number is bounded by what a failover writes (and by the
aggregation of similar events).

To keep this cheap and bounded when many objects change at once (a mass failover records tens of thousands
of Events), the writes themselves are coalesced and paced:

* a repeat of an Event whose write is still pending (or in flight) is folded into it (the count is written
  once); the count bump of an already written Event waits ``patch_delay`` so that the repeats of that moment
  go out as one patch;
* at most ``max_queue`` distinct writes wait; new Events are written before count bumps, and among each, priority
  Events first, then Warnings, then Normal Events. When the queue is full the write to queue takes the place of
  the oldest waiting write of less value (in that order, a count bump being worth less than a new Event: the
  Event exists, only its count lags); when there is none it is dropped;
* writes are paced by a token bucket (``qps`` 200/s, ``burst`` 1000), so Events never take more than a small,
  fixed share of the API server while controllers are busy (a mass failover asks for ~25 Events per workload,
  Karmada's and Flotilla's, on the binding, its template and the Work); the backlog drains afterwards.

Events about cluster-scoped objects go to the ``default`` namespace.  Nothing here raises into the caller: a
full queue or a failing API server costs events (counted in ``dropped`` / ``failed``; the spam filter's in
``filtered``), not errors. With ``metrics`` (:class:`flotilla.observability.metrics.EventMetrics`) every lost
occurrence is also counted in ``flotilla_events_dropped_total{reason, cause}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from flotilla.client.errors import ApiException, ConnectionFailed, is_already_exists, is_not_found
from flotilla.kube.resources import EVENTS, Resource
from flotilla.kube.times import format_time
from flotilla.observability.metrics import (
    DROP_CLOSED,
    DROP_INVALID,
    DROP_NO_LOOP,
    DROP_QUEUE_FULL,
    DROP_SPAM_FILTER,
    DROP_WRITE_FAILED,
    EventMetrics,
)

log = logging.getLogger(__name__)

__all__ = ["COMBINED_PREFIX", "EventClient", "EventRecorder", "NORMAL", "WARNING"]

NORMAL = "Normal"
WARNING = "Warning"
_TYPES = (NORMAL, WARNING)
_MAX_MESSAGE = 1024  # bytes, as events.k8s.io allows; client-go truncates the same way
_MAX_NAME = 253
#: client-go's ``EventAggregatorByReasonMessageFunc`` prefix.
COMBINED_PREFIX = "(combined from similar events): "


class EventClient(Protocol):
    """The part of :class:`flotilla.client.client.Client` the recorder uses."""

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def patch(
        self, res: Resource, name: str, patch: Any, *, namespace: str | None = None, patch_type: str = "merge"
    ) -> dict[str, Any]: ...


@dataclass(slots=True)
class _Seen:
    """An Event written to the API server (the dedupe cache)."""

    name: str
    namespace: str
    count: int
    first_mono: float
    last_mono: float  # the last occurrence written
    written_mono: float = 0.0  # when it was last written
    interval: float = 0.0  # how long the next count bump waits after that write (grows while it repeats)


@dataclass(slots=True)
class _Entry:
    """One write waiting (or in flight): a new Event (``seen is None``) or a count bump of ``seen``."""

    key: tuple[Any, ...]
    involved: dict[str, str]
    namespace: str
    type: str
    reason: str
    message: str
    first_wall: float  # time.time()
    last_wall: float
    last_mono: float
    count: int
    seen: _Seen | None
    ready_at: float
    priority: bool = False
    inflight: bool = False
    more: int = 0  # occurrences that arrived while the write was in flight


class _DueQueue:
    """Waiting count bumps, the soonest due first (their delays differ: see ``bump_max_interval``); the subset of
    a deque's methods the recorder uses."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Entry]] = []
        self._seq = itertools.count()

    def append(self, entry: _Entry) -> None:
        heapq.heappush(self._heap, (entry.ready_at, next(self._seq), entry))

    appendleft = append

    def popleft(self) -> _Entry:
        return heapq.heappop(self._heap)[2]

    def __getitem__(self, index: int) -> _Entry:
        if index != 0:
            raise IndexError("only the first entry of a _DueQueue can be read")
        return self._heap[0][2]

    def __len__(self) -> int:
        return len(self._heap)

    def clear(self) -> None:
        self._heap.clear()


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


@dataclass(slots=True)
class _Similar:
    messages: set[str]
    last_mono: float


#: the write queues by rank (:func:`_rank`), from the least valuable to the most
_RANKS = 6
#: the order they are written in: new Events before count bumps, the more valuable first within each
_WRITE_ORDER = (5, 3, 1)
_BUMP_ORDER = (4, 2, 0)


def _rank(type: str, priority: bool, new_event: bool) -> int:
    """What a write is worth when the queue is full (0-5): a priority Event more than a Warning, a Warning more
    than a Normal Event, and of each a new Event more than a count bump (the Event exists, only its count lags)."""
    return 2 * (2 if priority else 1 if type == WARNING else 0) + (1 if new_event else 0)


def _timestamp(wall: float) -> str:
    return format_time(datetime.fromtimestamp(wall, UTC))


def _truncate(message: str) -> str:
    if len(message) <= _MAX_MESSAGE // 4:  # at most 4 bytes a character: short enough without encoding it
        return message
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
        max_queue: int = 16384,
        aggregation_window: float = 600.0,
        cache_size: int = 16384,
        attempts: int = 3,
        request_timeout: float = 10.0,
        qps: float = 200.0,
        burst: int = 1000,
        writers: int = 2,
        patch_delay: float = 1.0,
        spam_burst: int = 25,
        spam_qps: float = 1.0 / 300.0,
        similar_max: int = 10,
        similar_window: float = 600.0,
        bump_max_interval: float = 300.0,
        priority_reasons: Iterable[str] = (),
        metrics: EventMetrics | None = None,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host
        self.max_queue = max(1, max_queue)
        self.aggregation_window = aggregation_window
        self.cache_size = max(1, cache_size)
        self.attempts = max(1, attempts)
        self.request_timeout = request_timeout
        self.qps = qps
        self.burst = max(1, burst)
        self.writers = max(1, writers)
        self.patch_delay = patch_delay
        self.spam_burst = spam_burst
        self.spam_qps = spam_qps
        self.similar_max = similar_max
        self.similar_window = similar_window
        self.bump_max_interval = bump_max_interval
        self.priority_reasons = frozenset(priority_reasons)
        self.metrics = metrics
        #: every write not yet done, by key; the deques hold the waiting ones, one deque per rank
        #: (:func:`_rank`: the index in this list, from the least valuable to the most)
        self._pending: dict[tuple[Any, ...], _Entry] = {}
        self._queues: tuple[deque[_Entry] | _DueQueue, ...] = tuple(
            deque() if rank in _WRITE_ORDER else _DueQueue() for rank in range(_RANKS))
        self._seen: OrderedDict[tuple[Any, ...], _Seen] = OrderedDict()
        self._spam: OrderedDict[tuple[Any, ...], _Bucket] = OrderedDict()
        self._similar: OrderedDict[tuple[Any, ...], _Similar] = OrderedDict()
        self._tokens = float(self.burst)
        self._token_stamp = time.monotonic()
        self._workers: list[asyncio.Task[None]] = []
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._flushing = 0
        self._last_suffix = 0
        self._closed = False
        #: Events created; occurrences folded into an Event (count bumps); occurrences dropped (queue full, no
        #: loop, invalid, closed); writes that failed; occurrences held back by the per-object spam filter
        self.created = 0
        self.aggregated = 0
        self.dropped = 0
        self.failed = 0
        self.filtered = 0

    # -- the caller's side -------------------------------------------------------------------

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Queue an Event about ``obj`` (an API object: apiVersion, kind, metadata); never raises."""
        try:
            self._enqueue(obj, type, reason, message)
        except Exception:
            self._drop(reason, DROP_INVALID)
            log.exception("event recorder: could not queue event %s/%s", type, reason)

    def eventf(self, obj: Mapping[str, Any], type: str, reason: str, fmt: str, *args: Any) -> None:
        """``event`` with a %-format message."""
        try:
            message = fmt % args if args else fmt
        except Exception:
            message = f"{fmt} {args!r}"
        self.event(obj, type, reason, message)

    @property
    def pending(self) -> int:
        """Writes not done yet (waiting or in flight)."""
        return len(self._pending)

    async def flush(self) -> None:
        """Wait until every queued event has been written (or given up on); count bumps are not held back
        meanwhile. Bound it with asyncio.timeout."""
        if not self._pending:
            return
        self._flushing += 1
        try:
            if self._wake is not None:
                self._wake.set()
            while self._pending:
                if self._idle is None:
                    self._idle = asyncio.Event()
                self._idle.clear()
                await self._idle.wait()
        finally:
            self._flushing -= 1

    async def close(self, *, grace: float | None = 5.0) -> None:
        """Flush (for at most ``grace`` seconds), then stop the writers; later events are dropped."""
        try:
            async with asyncio.timeout(grace):
                await self.flush()
        except TimeoutError:
            log.warning("event recorder: closing with %d writes of events left", len(self._pending))
        self._closed = True
        workers, self._workers = self._workers, []
        for task in workers:
            task.cancel()
        for task in workers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for entry in self._pending.values():  # what the grace period did not cover
            self._drop(entry.reason, DROP_CLOSED, entry.count + entry.more)
        self._pending.clear()
        for q in self._queues:
            q.clear()
        if self._idle is not None:
            self._idle.set()

    # -- correlation (client-go's EventCorrelator) ---------------------------------------------

    def _drop(self, reason: Any, cause: str, n: int = 1) -> None:
        """``n`` occurrences of an Event with ``reason`` are lost (``cause``: one of the ``DROP_*``)."""
        if cause == DROP_SPAM_FILTER:
            self.filtered += n
        elif cause == DROP_WRITE_FAILED:
            self.failed += 1
        else:
            self.dropped += n
        if self.metrics is not None:
            try:
                self.metrics.record_dropped(str(reason), cause, n)
            except Exception:
                log.exception("event recorder: could not count a dropped event")

    def _enqueue(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        if self._closed:
            self._drop(reason, DROP_CLOSED)
            return
        if type not in _TYPES:
            self._drop(reason, DROP_INVALID)
            log.warning("event recorder: unsupported event type %r (reason %s) dropped", type, reason)
            return
        md = obj.get("metadata") or {}
        name = md.get("name")
        if not name:
            self._drop(reason, DROP_INVALID)
            log.warning("event recorder: object without metadata.name, event %s dropped", reason)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._drop(reason, DROP_NO_LOOP)
            log.warning("event recorder: no running event loop, event %s dropped", reason)
            return
        api_version, kind, namespace, uid = obj.get("apiVersion"), obj.get("kind"), md.get("namespace"), md.get("uid")
        reason = str(reason)
        message = _truncate(str(message))
        now = time.monotonic()
        obj_key = (api_version, kind, namespace, name, uid)
        key: tuple[Any, ...] = (*obj_key, type, reason, message)

        entry = self._pending.get(key)
        if entry is None:
            key, message = self._aggregate(obj_key, type, reason, message, now)
            entry = self._pending.get(key)
        wall = time.time()
        if entry is not None:  # a write of this Event is pending: fold the occurrence into it
            if entry.inflight:
                entry.more += 1
            else:
                entry.count += 1
            entry.last_wall, entry.last_mono, entry.message = wall, now, message
            self.aggregated += 1
            return

        seen = self._seen.get(key)
        if seen is not None and now - seen.last_mono > self.aggregation_window:
            seen = None  # too old to aggregate: a new Event
        priority = reason in self.priority_reasons
        if seen is None and not priority and not self._spam_allows((*obj_key, type), now):
            self._drop(reason, DROP_SPAM_FILTER)
            return
        rank = _rank(type, priority, seen is None)
        if len(self._pending) >= self.max_queue and not self._make_room(rank):
            self._drop(reason, DROP_QUEUE_FULL)
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event recorder: %d writes waiting, %d events dropped so far", len(self._pending),
                            self.dropped)
            return
        involved = {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace, "uid": uid,
                    "resourceVersion": md.get("resourceVersion")}
        involved = {k: str(v) for k, v in involved.items() if v}
        entry = _Entry(key=key, involved=involved, namespace=involved.get("namespace") or "default", type=type,
                       reason=reason, message=message, first_wall=wall, last_wall=wall, last_mono=now, count=1,
                       seen=seen, ready_at=self._ready_at(seen, priority, now), priority=priority)
        if seen is not None:
            self.aggregated += 1
        self._pending[key] = entry
        self._queue_for(entry).append(entry)
        self._start(loop)

    def _ready_at(self, seen: _Seen | None, priority: bool, now: float) -> float:
        """When a write may go: a new Event at once, a count bump after ``patch_delay`` and, unless it is a
        priority Event, no sooner than ``seen.interval`` after the Event's last write."""
        if seen is None:
            return now
        if now - seen.last_mono > self.bump_max_interval:
            seen.interval = 0.0  # quiet for long: the next repeats are written promptly again
        ready = now + self.patch_delay
        return ready if priority else max(ready, seen.written_mono + seen.interval)

    def _aggregate(self, obj_key: tuple[Any, ...], type: str, reason: str, message: str,
                   now: float) -> tuple[tuple[Any, ...], str]:
        """client-go's ``EventAggregator``: the key and message the occurrence is recorded under."""
        akey = (*obj_key, type, reason)
        record = self._similar.get(akey)
        if record is None or now - record.last_mono > self.similar_window:
            record = _Similar(set(), now)
        record.messages.add(message)
        record.last_mono = now
        self._similar[akey] = record
        self._similar.move_to_end(akey)
        while len(self._similar) > self.cache_size:
            self._similar.popitem(last=False)
        if self.similar_max <= 0 or len(record.messages) < self.similar_max:
            return (*akey, message), message
        record.messages.pop()  # keep the set bounded, as client-go does
        return (*akey, COMBINED_PREFIX), _truncate(COMBINED_PREFIX + message)

    def _spam_allows(self, skey: tuple[Any, ...], now: float) -> bool:
        """client-go's ``EventSourceObjectSpamFilter``: one token per write, per (source, object, type)."""
        if self.spam_burst <= 0:
            return True
        bucket = self._spam.get(skey)
        if bucket is None:
            bucket = self._spam[skey] = _Bucket(float(self.spam_burst), now)
            while len(self._spam) > self.cache_size:
                self._spam.popitem(last=False)
        else:
            bucket.tokens = min(float(self.spam_burst), bucket.tokens + (now - bucket.stamp) * self.spam_qps)
            bucket.stamp = now
            self._spam.move_to_end(skey)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _queue_for(self, entry: _Entry) -> deque[_Entry] | _DueQueue:
        return self._queues[_rank(entry.type, entry.priority, entry.seen is None)]

    def _make_room(self, rank: int) -> bool:
        """Give up the oldest waiting write of the least value below ``rank``; False when there is none."""
        for q in self._queues[:rank]:
            while q:
                victim = q.popleft()
                if self._pending.get(victim.key) is victim and not victim.inflight:
                    del self._pending[victim.key]
                    self._drop(victim.reason, DROP_QUEUE_FULL, victim.count)
                    return True
        return False

    # -- writing -------------------------------------------------------------------------------

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        self._workers = [t for t in self._workers if not t.done()]
        while len(self._workers) < self.writers:
            self._workers.append(loop.create_task(self._run(), name=f"event-recorder-{self.component}"))

    def _next(self, now: float) -> tuple[_Entry | None, float | None]:
        """The next write to make, else when a count bump becomes due (``None``: nothing waits)."""
        for rank in _WRITE_ORDER:
            q = self._queues[rank]
            while q:
                entry = q.popleft()
                if self._pending.get(entry.key) is entry:
                    return entry, None
        due: float | None = None
        for rank in _BUMP_ORDER:
            q = self._queues[rank]
            while q:
                entry = q[0]
                if self._pending.get(entry.key) is not entry:
                    q.popleft()
                    continue
                if entry.ready_at <= now or self._flushing:
                    q.popleft()
                    return entry, None
                due = entry.ready_at if due is None else min(due, entry.ready_at)
                break
        return None, due

    def _token_wait(self, now: float) -> float:
        if self.qps <= 0:
            return 0.0
        self._tokens = min(float(self.burst), self._tokens + (now - self._token_stamp) * self.qps)
        self._token_stamp = now
        if self._tokens >= 1.0:
            return 0.0
        return (1.0 - self._tokens) / self.qps

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            now = time.monotonic()
            entry, due = self._next(now)
            if entry is None:
                if not self._pending and self._idle is not None:
                    self._idle.set()
                self._wake.clear()
                try:
                    if due is None:
                        await self._wake.wait()
                    else:
                        async with asyncio.timeout(max(0.0, due - now)):
                            await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            wait = self._token_wait(now)
            if wait > 0:
                self._queue_for(entry).appendleft(entry)  # keep its place; the token comes first
                await asyncio.sleep(wait)
                continue
            self._tokens -= 1.0
            entry.inflight = True
            try:
                await self._write(entry)
            except asyncio.CancelledError:
                raise
            except ConnectionFailed as e:  # the API server is away: expected, one line (no traceback)
                self._drop(entry.reason, DROP_WRITE_FAILED, entry.count)
                log.warning("event recorder: could not write event %s about %s: %s", entry.reason,
                            entry.involved.get("name"), e.message)  # fmt: skip
            except Exception:
                self._drop(entry.reason, DROP_WRITE_FAILED, entry.count)
                log.warning("event recorder: could not write event %s about %s", entry.reason,
                            entry.involved.get("name"), exc_info=True)  # fmt: skip
            finally:
                self._done(entry)

    def _done(self, entry: _Entry) -> None:
        if self._pending.get(entry.key) is not entry:
            return
        del self._pending[entry.key]
        if entry.more and not self._closed:  # occurrences that came during the write: one more bump
            seen = self._seen.get(entry.key)
            now = time.monotonic()
            follow = _Entry(key=entry.key, involved=entry.involved, namespace=entry.namespace, type=entry.type,
                            reason=entry.reason, message=entry.message, first_wall=entry.last_wall,
                            last_wall=entry.last_wall, last_mono=entry.last_mono, count=entry.more, seen=seen,
                            ready_at=self._ready_at(seen, entry.priority, now), priority=entry.priority)
            self._pending[entry.key] = follow
            self._queue_for(follow).append(follow)
            if self._wake is not None:
                self._wake.set()
        elif not self._pending and self._idle is not None:
            self._idle.set()

    async def _write(self, entry: _Entry) -> None:
        seen = entry.seen
        if seen is not None:
            count = seen.count + entry.count
            patch: dict[str, Any] = {"count": count, "lastTimestamp": _timestamp(entry.last_wall)}
            if entry.key[-1] == COMBINED_PREFIX:
                patch["message"] = entry.message
            try:
                await self._retrying(
                    lambda: self.client.patch(EVENTS, seen.name, patch, namespace=seen.namespace, patch_type="merge")
                )
            except ApiException as e:
                if not is_not_found(e):
                    raise
                self._seen.pop(entry.key, None)  # the Event was deleted (or expired): start a new one
            else:
                seen.count = count
                seen.last_mono = entry.last_mono
                seen.written_mono = time.monotonic()
                seen.interval = min(self.bump_max_interval, max(self.patch_delay, 2 * seen.interval))
                if self._seen.get(entry.key) is seen:
                    self._seen.move_to_end(entry.key)
                return

        for _ in range(3):  # a name clash is all but impossible; try a fresh name if it happens
            name = self._event_name(entry.involved["name"])
            body = self._body(entry, name)
            try:
                await self._retrying(lambda body=body: self.client.create(EVENTS, body, entry.namespace))
            except ApiException as e:
                if is_already_exists(e):
                    continue
                raise
            break
        else:
            raise RuntimeError("could not find a free Event name")
        self.created += 1
        self._seen[entry.key] = _Seen(name, entry.namespace, entry.count, entry.last_mono, entry.last_mono,
                                      written_mono=time.monotonic())
        self._seen.move_to_end(entry.key)
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

    def _body(self, entry: _Entry, name: str) -> dict[str, Any]:
        source: dict[str, str] = {"component": self.component}
        if self.host:
            source["host"] = self.host
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": entry.namespace},
            "involvedObject": dict(entry.involved),
            "reason": entry.reason,
            "message": entry.message,
            "source": source,
            "firstTimestamp": _timestamp(entry.first_wall),
            "lastTimestamp": _timestamp(entry.last_wall),
            "count": entry.count,
            "type": entry.type,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
