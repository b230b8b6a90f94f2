"""An asyncio work queue for controllers, with the semantics of client-go's workqueue.

* A key is queued at most once (``add`` of a key that is already waiting is a no-op).
* A key that is added while a worker processes it is not handed to a second worker; it is
  queued again when that worker calls ``done`` (so it is processed once more, afterwards).
* Ready keys are handed out first in, first out, higher ``priority`` first (controller-runtime's
  priority queue, which Karmada's ``ControllerPriorityQueue`` gate uses): ``add(key, priority=p)``;
  the default is 0, and adding a key that is already queued with a higher priority raises its
  priority (it moves to the end of that priority's line) but never lowers it.
* Keys of a negative priority (background work) may be held back further: ``low_priority_limit``
  caps how many of them are processed at once, and ``low_priority_quiet`` hands them out only once no
  key of another priority was added for that many seconds (a burst of real changes first; a key raised
  meanwhile is processed once, for both reasons).
* ``add_after`` delays a key; when the same key is delayed more than once the earliest time wins.
  All delayed keys share one heap and a single timer handle.
* ``add_rate_limited`` delays a key by the rate limiter: per-key exponential backoff
  (5 ms doubling to at most 1000 s) combined with an overall token bucket (10 qps, burst 100);
  the larger of the two delays is used.  ``forget`` resets the key's backoff.
* ``shutdown`` drops delayed keys and wakes every waiting ``get``; keys that were already ready
  are still handed out, then ``get`` raises :class:`QueueShutDown`.
* ``metrics`` (a :class:`~flotilla.observability.metrics.WorkqueueMetrics`) records client-go's
  ``workqueue_*`` metrics of the queue, labelled with its ``name``, into that registry.

Everything runs on one event loop; the queue is not thread-safe.  Time comes from a
:class:`Clock`, so tests can drive delays with :class:`FakeClock` instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from flotilla.client.errors import retry_reason

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

__all__ = [
    "BucketRateLimiter",
    "Clock",
    "FakeClock",
    "ItemExponentialFailureRateLimiter",
    "LoopClock",
    "MaxOfRateLimiter",
    "QueueShutDown",
    "RateLimiter",
    "Stat",
    "TimerHandle",
    "WorkQueue",
    "default_rate_limiter",
    "failure_log_level",
    "log_failure",
]


#: reasons of failures that are part of optimistic concurrency (someone wrote first, the object went meanwhile):
#: logged at DEBUG; other expected ones (a member down, throttling) at INFO
_ROUTINE_REASONS = frozenset({"Conflict", "AlreadyExists", "NotFound", "Expired", "Gone"})


def failure_log_level(e: BaseException) -> tuple[int, str | None]:
    """How a failure that will be retried is logged: ``(level, reason)``. An expected one
    (:func:`flotilla.client.errors.retry_reason`) is one line at DEBUG (conflicts, not found) or INFO (connection
    failures, throttling, an unavailable server) naming its reason; anything else is a WARNING with its
    traceback (reason ``None``)."""
    reason = retry_reason(e)
    if reason is None:
        return logging.WARNING, None
    return (logging.DEBUG if reason in _ROUTINE_REASONS else logging.INFO), reason


def log_failure(logger: logging.Logger, e: BaseException, msg: str, *args: Any) -> None:
    """Log ``msg % args`` for a failure ``e`` that will be retried, as :func:`failure_log_level` says."""
    level, reason = failure_log_level(e)
    if reason is None:
        logger.warning(msg, *args, exc_info=e)
    elif logger.isEnabledFor(level):
        logger.log(level, msg + "; will retry (%s): %s", *args, reason, e)


class QueueShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down and has no ready key left."""


# ---------------------------------------------------------------------------------------------
# Clocks


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Where the queue reads the time and schedules its single timer."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Call ``callback`` (on the event loop) once ``now() >= when``."""
        ...


class LoopClock:
    """The running event loop's monotonic clock."""

    def now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_at(when, callback)


class _FakeTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to (:meth:`advance`); for tests."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._seq = 0
        self._timers: list[tuple[float, int, _FakeTimer, Callable[[], None]]] = []

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        handle = _FakeTimer()
        self._seq += 1
        heapq.heappush(self._timers, (when, self._seq, handle, callback))
        return handle

    def advance(self, seconds: float) -> None:
        """Move time forward, running every timer that falls due, in time order."""
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, handle, callback = heapq.heappop(self._timers)
            if handle.cancelled:
                continue
            self._now = max(self._now, when)
            callback()
        self._now = target

    @property
    def pending_timers(self) -> int:
        return sum(1 for t in self._timers if not t[2].cancelled)


# ---------------------------------------------------------------------------------------------
# Rate limiters


class RateLimiter(Protocol[K_contra]):
    def when(self, key: K_contra) -> float:
        """How long to wait (seconds) before the key is retried; records one more failure."""
        ...

    def forget(self, key: K_contra) -> None: ...

    def num_requeues(self, key: K_contra) -> int: ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """``base * 2**failures`` seconds per key, capped at ``max_delay``."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        exp = self._failures.get(key, 0)
        self._failures[key] = exp + 1
        if exp >= 1000:  # 2.0**1024 overflows a float; any realistic cap is far below this
            return self.max_delay
        return min(self.base_delay * math.ldexp(1.0, exp), self.max_delay)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter(Generic[K]):
    """An overall token bucket (``qps`` tokens a second, at most ``burst`` saved up).

    Each ``when`` takes a token, going into debt if there is none; the delay is the time until
    the debt is paid off (the reservation semantics of golang.org/x/time/rate).
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self.clock: Clock = clock or LoopClock()
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, key: K) -> float:
        now = self.clock.now()
        if self._last is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: K) -> None:
        pass

    def num_requeues(self, key: K) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """Asks every limiter (each records the attempt) and waits for the longest delay."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("need at least one rate limiter")
        self.limiters = limiters

    def when(self, key: K) -> float:
        return max([lim.when(key) for lim in self.limiters])

    def forget(self, key: K) -> None:
        for lim in self.limiters:
            lim.forget(key)

    def num_requeues(self, key: K) -> int:
        return max(lim.num_requeues(key) for lim in self.limiters)


def default_rate_limiter(
    *,
    base_delay: float = 0.005,
    max_delay: float = 1000.0,
    qps: float = 10.0,
    burst: int = 100,
    clock: Clock | None = None,
) -> MaxOfRateLimiter[Any]:
    """client-go's ``DefaultControllerRateLimiter``: per-key backoff and an overall bucket."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base_delay, max_delay), BucketRateLimiter(qps, burst, clock)
    )


# ---------------------------------------------------------------------------------------------
# Metrics


@dataclass
class Stat:
    """Count, sum and max of observed durations (seconds)."""

    count: int = 0
    total: float = 0.0
    max: float = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.total += value
        if value > self.max:
            self.max = value

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"count": self.count, "sum": self.total, "max": self.max, "mean": self.mean}


class _QueueMetrics:
    """One queue's children (label ``name``) of the workqueue metrics."""

    __slots__ = ("adds", "depth", "latency", "retries", "work")

    def __init__(self, metrics: Any, name: str) -> None:
        self.depth = metrics.depth.labels(name)
        self.adds = metrics.adds.labels(name)
        self.latency = metrics.latency.labels(name)
        self.work = metrics.work.labels(name)
        self.retries = metrics.retries.labels(name)


# ---------------------------------------------------------------------------------------------
# The queue


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limited FIFO of keys (see the module docstring)."""

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter[K] | None = None,
        metrics: Any = None,
        low_priority_limit: int | None = None,
        low_priority_quiet: float = 0.0,
    ) -> None:
        self.name = name
        if low_priority_limit is not None and low_priority_limit < 1:
            raise ValueError("low_priority_limit must be at least 1")
        if not low_priority_quiet >= 0:
            raise ValueError("low_priority_quiet must be >= 0")
        self.low_priority_limit = low_priority_limit
        self.low_priority_quiet = low_priority_quiet
        self.clock: Clock = clock or LoopClock()
        self.rate_limiter: RateLimiter[K] = rate_limiter or default_rate_limiter(clock=self.clock)

        # ready keys: one FIFO line per priority (nearly always just 0). A key whose priority was raised
        # leaves a stale entry in its old line, counted in _stale and skipped when reached.
        self._queue: deque[K] = deque()  # the line of priority 0
        self._lines: dict[int, deque[K]] = {0: self._queue}
        self._order: list[int] = [0]  # the priorities of _lines, highest first
        self._stale: dict[tuple[int, K], int] = {}
        self._ready = 0  # keys in the lines (stale entries excluded)
        # keys of a negative priority: ready, and being processed (at most low_priority_limit of them)
        self._low_ready = 0
        self._low_processing: set[K] = set()
        self._last_add = -math.inf  # when a key of priority >= 0 was last added (low_priority_quiet)
        self._quiet_timer: TimerHandle | None = None
        # keys added and not yet handed out (ready, or re-added while processing) -> their priority
        self._dirty: dict[K, int] = {}
        self._processing: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drained: asyncio.Event | None = None

        # delayed keys: a heap of (when, seq, key) with lazy deletion; _waiting holds the live entry
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, tuple[float, int]] = {}
        self._seq = 0
        self._timer: TimerHandle | None = None
        self._timer_when = math.inf

        # metrics
        self.adds = 0
        self.retries = 0
        self.latency = Stat()
        self.work_duration = Stat()
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._ready_since: dict[K, float] = {}
        # where the counts are also recorded: ``metrics``, client-go's workqueue metrics on a registry
        # (flotilla.observability.metrics.WorkqueueMetrics: depth, adds, latency, work, retries), or nowhere.
        # This queue's children of them are looked up once: a lookup costs more than the recording.
        self._m: _QueueMetrics | None = None if metrics is None else _QueueMetrics(metrics, name)

    # -- inspection ----------------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Keys ready to be handed out."""
        return self._ready

    def __len__(self) -> int:
        return self._ready

    @property
    def waiting(self) -> int:
        """Keys delayed by ``add_after`` / ``add_rate_limited``."""
        return len(self._waiting)

    @property
    def processing(self) -> int:
        return len(self._processing)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def ready(self) -> list[K]:
        """The ready keys in the order they will be handed out (for inspection and tests)."""
        stale = dict(self._stale)
        out: list[K] = []
        for priority in self._order:
            for key in self._lines[priority]:
                left = stale.get((priority, key), 0)
                if left:
                    stale[(priority, key)] = left - 1
                    continue
                out.append(key)
        return out

    def keys(self) -> set[K]:
        """Every key the queue holds: ready, delayed, or being processed."""
        return set(self._dirty) | set(self._waiting) | set(self._processing)

    def ready_since(self, key: K) -> float | None:
        """For a key being processed: when (``clock.now()``) it became ready, i.e. was added (not delayed)."""
        return self._ready_since.get(key)

    def metrics(self) -> dict[str, Any]:
        now = self.clock.now()
        return {
            "name": self.name,
            "depth": self.depth,
            "waiting": self.waiting,
            "processing": self.processing,
            "adds": self.adds,
            "retries": self.retries,
            "latency": self.latency.as_dict(),
            "work_duration": self.work_duration.as_dict(),
            "unfinished_work_seconds": sum(now - t for t in self._started_at.values()),
            "longest_running_processor_seconds": max(
                (now - t for t in self._started_at.values()), default=0.0
            ),
        }

    # -- adding --------------------------------------------------------------------------------

    def add(self, key: K, priority: int = 0) -> None:
        """Queue the key unless it is already queued; a key being processed is queued on ``done``.

        ``priority``: keys of a higher priority are handed out first; a key already queued with a lower
        priority is raised to this one (no new add is counted).
        """
        if self._shutting_down:
            return
        if priority >= 0 and self.low_priority_quiet:
            self._last_add = self.clock.now()
        current = self._dirty.get(key)
        if current is not None:
            if priority > current:
                self._raise(key, current, priority)
            return
        self.adds += 1
        if self._m is not None:
            self._m.adds.inc()
        self._dirty[key] = priority
        self._added_at.setdefault(key, self.clock.now())
        if key in self._processing:
            return
        self._push_ready(key, priority)

    def add_after(self, key: K, delay: float) -> None:
        """Add the key once ``delay`` seconds have passed; an earlier pending time for it wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        when = self.clock.now() + delay
        current = self._waiting.get(key)
        if current is not None and current[0] <= when:
            return
        self._seq += 1
        self._waiting[key] = (when, self._seq)
        heapq.heappush(self._heap, (when, self._seq, key))
        if when < self._timer_when:
            self._arm(when)

    def add_rate_limited(self, key: K) -> None:
        """Add the key after the rate limiter's delay (a retry: bumps its backoff)."""
        if self._shutting_down:
            return
        self.retries += 1
        if self._m is not None:
            self._m.retries.inc()
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """The key was handled successfully: reset its backoff."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.rate_limiter.num_requeues(key)

    # -- taking --------------------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for a ready key and mark it processing; the caller must call ``done(key)``.

        Raises :class:`QueueShutDown` once the queue is shut down and no ready key is left.
        """
        if self._available():
            return self._take()
        loop = asyncio.get_running_loop()
        while not self._available():
            if self._shutting_down and not self._ready:
                raise QueueShutDown(self.name)
            fut: asyncio.Future[None] = loop.create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):
                    self._getters.remove(fut)
                if fut.done() and not fut.cancelled():
                    self._wake_one()  # the wake-up was meant for someone: pass it on
                raise
        return self._take()

    def get_nowait(self) -> K:
        """A ready key (marked processing), or ``QueueShutDown`` / ``LookupError`` when there is none (or only
        keys of a negative priority held back by ``low_priority_limit`` or ``low_priority_quiet``)."""
        if not self._available():
            if self._shutting_down and not self._ready:
                raise QueueShutDown(self.name)
            raise LookupError("no key is ready")
        return self._take()

    def done(self, key: K) -> None:
        """Processing of ``key`` finished; if it was added meanwhile it is queued again."""
        if key not in self._processing:
            return
        self._processing.discard(key)
        if self._low_processing and key in self._low_processing:
            self._low_processing.discard(key)
            if self._low_ready:
                self._wake_one()  # a key of a negative priority may be handed out again
        self._ready_since.pop(key, None)
        started = self._started_at.pop(key, None)
        if started is not None:
            elapsed = self.clock.now() - started
            self.work_duration.observe(elapsed)
            if self._m is not None:
                self._m.work.observe(elapsed)
        priority = self._dirty.get(key)
        if priority is not None:
            self._push_ready(key, priority)
        if self._drained is not None:
            self._drained.set()

    # -- shutting down -------------------------------------------------------------------------

    def shutdown(self, *, discard_ready: bool = False) -> None:
        """Stop accepting keys, drop delayed ones and wake every waiting ``get``.

        Keys already ready are still handed out (as in client-go) unless ``discard_ready``.
        """
        self._shutting_down = True
        if self._quiet_timer is not None:
            self._quiet_timer.cancel()
            self._quiet_timer = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_when = math.inf
        self._heap.clear()
        self._waiting.clear()
        if discard_ready:
            for key in self._dirty:
                self._added_at.pop(key, None)
            self._dirty.clear()  # includes keys re-added while processing: done() won't requeue them
            for line in self._lines.values():
                line.clear()
            self._stale.clear()
            self._ready = self._low_ready = 0
            self._set_depth()
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)

    async def shutdown_with_drain(self, *, discard_ready: bool = False) -> None:
        """``shutdown``, then wait until no key is ready or being processed (workers must run)."""
        self.shutdown(discard_ready=discard_ready)
        while self._processing or self._ready:
            self._drained = asyncio.Event()
            await self._drained.wait()
        self._drained = None

    # -- workers -------------------------------------------------------------------------------

    async def run_workers(self, n: int, handler: Callable[[K], Awaitable[Any]]) -> None:
        """Run ``n`` workers calling ``await handler(key)`` until the queue shuts down.

        A handler that raises gets its key re-added with ``add_rate_limited``; one that returns
        gets it forgotten (backoff reset).  Cancelling this coroutine cancels the workers.
        """

        async def worker() -> None:
            while True:
                try:
                    key = await self.get()
                except QueueShutDown:
                    return
                try:
                    await handler(key)
                except asyncio.CancelledError:
                    self.done(key)
                    raise
                except Exception as e:
                    log_failure(log, e, "workqueue %s: handler failed for %r (retry %d)", self.name, key,
                                self.num_requeues(key) + 1)
                    self.add_rate_limited(key)
                else:
                    self.forget(key)
                self.done(key)

        async with asyncio.TaskGroup() as tg:
            for i in range(n):
                tg.create_task(worker(), name=f"workqueue-{self.name}-worker-{i}")

    # -- internals -----------------------------------------------------------------------------

    def _line(self, priority: int) -> deque[K]:
        line = self._lines.get(priority)
        if line is None:
            line = self._lines[priority] = deque()
            self._order = sorted(self._lines, reverse=True)
        return line

    def _available(self) -> int:
        """How many ready keys may be handed out now."""
        if self._low_ready and not self._low_allowed():
            return self._ready - self._low_ready
        return self._ready

    def _low_allowed(self) -> bool:
        """Whether a key of a negative priority may be handed out now: fewer than ``low_priority_limit`` of them
        are being processed, and no other key was added for ``low_priority_quiet`` seconds (else a timer is set
        to look again then)."""
        if self.low_priority_limit is not None and len(self._low_processing) >= self.low_priority_limit:
            return False
        if self.low_priority_quiet and not self._shutting_down:
            until = self._last_add + self.low_priority_quiet
            if self.clock.now() < until:
                if self._quiet_timer is None:
                    self._quiet_timer = self.clock.call_at(until, self._on_quiet)
                return False
        return True

    def _on_quiet(self) -> None:
        self._quiet_timer = None
        if self._low_ready and not self._shutting_down:
            # they look again (and set the timer again if keys were added meanwhile)
            for _ in range(min(len(self._getters), max(1, self._available()))):
                self._wake_one()

    def _push_ready(self, key: K, priority: int = 0) -> None:
        if priority == 0:
            self._queue.append(key)
        else:
            self._line(priority).append(key)
            if priority < 0:
                self._low_ready += 1
        self._ready += 1
        self._set_depth()
        self._wake_one()

    def _raise(self, key: K, current: int, priority: int) -> None:
        """A queued key gets a higher priority: if it is ready, it moves to the end of the higher line."""
        self._dirty[key] = priority
        if key in self._processing:
            return  # queued on done(), with the new priority
        if current < 0 <= priority:
            self._low_ready -= 1
            self._wake_one()  # it may be handed out now
        stale = (current, key)
        self._stale[stale] = self._stale.get(stale, 0) + 1
        self._line(priority).append(key)

    def _pop_ready(self) -> K:
        if not self._stale and len(self._lines) == 1:
            return self._queue.popleft()
        low_allowed = not self._low_ready or self._low_allowed()
        for priority in self._order:
            if priority < 0 and not low_allowed:
                break
            line = self._lines[priority]
            while line:
                key = line.popleft()
                if self._stale:
                    # a raised key's earlier entry comes before its live one in the same line
                    stale = (priority, key)
                    left = self._stale.get(stale)
                    if left is not None:
                        if left > 1:
                            self._stale[stale] = left - 1
                        else:
                            del self._stale[stale]
                        continue
                return key
        raise LookupError("no key is ready")  # pragma: no cover - _ready counts the live entries

    def _take(self) -> K:
        key = self._pop_ready()
        self._ready -= 1
        self._set_depth()
        self._processing.add(key)
        if self._dirty.pop(key) < 0:
            self._low_ready -= 1
            self._low_processing.add(key)
        now = self.clock.now()
        added = self._added_at.pop(key, None)
        self._ready_since[key] = now if added is None else added
        if added is not None:
            self.latency.observe(now - added)
            if self._m is not None:
                self._m.latency.observe(now - added)
        self._started_at[key] = now
        return key

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _set_depth(self) -> None:
        if self._m is not None:
            self._m.depth.set(self._ready)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_when = when
        self._timer = self.clock.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_when = math.inf
        if self._shutting_down:
            return
        now = self.clock.now()
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, seq, key = heapq.heappop(heap)
            if self._waiting.get(key) == (when, seq):
                del self._waiting[key]
                self.add(key)
        # skip stale entries so the next timer is for a live key
        while heap and self._waiting.get(heap[0][2]) != (heap[0][0], heap[0][1]):
            heapq.heappop(heap)
        if heap:
            self._arm(heap[0][0])
