"""Decoding heavy request bodies off the event loop, fairly between clients.

In the spirit of kube-apiserver's API Priority and Fairness, cut down to the one resource a client can
monopolise here: decoding a large body (YAML above all) costs tens to hundreds of milliseconds of CPU,
which on the event loop would stall every other request, every watch and every in-process controller.

* Small bodies are decoded inline (:data:`INLINE_JSON_BYTES`, :data:`INLINE_YAML_BYTES`): the thread
  hop would cost more than the decode.
* A heavy body is decoded on a small thread pool (:attr:`FairnessLimits.workers` threads), so the loop
  keeps serving meanwhile.
* Each client (a *flow*: the authenticated user, or without authentication the peer address and
  User-Agent) decodes at most :attr:`FairnessLimits.per_flow` heavy bodies at once; the rest wait in the
  client's own queue, and when a worker frees up the flows with waiting bodies take turns (round robin),
  so one client's backlog never stands in front of another client's body.
* A client with :attr:`FairnessLimits.queue_per_flow` bodies already waiting, or a body that waited
  :attr:`FairnessLimits.queue_wait` seconds without its turn, gets 429 TooManyRequests with
  ``Retry-After`` (client-go and kubectl wait and retry by themselves).

Writes that do not come over HTTP (the in-process transport of embedded controllers) never pass here.
:class:`FlowQueues` holds the decisions (no I/O, no clock); :class:`BodyDecoder` runs them on asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from flotilla.apiserver import errors

T = TypeVar("T")

#: JSON bodies up to this size are decoded on the event loop (orjson: a few milliseconds)
INLINE_JSON_BYTES = 256 * 1024
#: YAML bodies up to this size are decoded on the event loop
INLINE_YAML_BYTES = 16 * 1024

Verdict = Literal["run", "wait", "reject"]


@dataclass(frozen=True)
class FairnessLimits:
    workers: int = 2  # heavy decodes at once, server-wide
    per_flow: int = 1  # heavy decodes at once for one client
    queue_per_flow: int = 16  # one client's heavy bodies waiting for their turn; one more is refused
    queue_wait: float = 20.0  # seconds a heavy body may wait for its turn
    retry_after: int = 1  # seconds, the Retry-After of a 429


class FlowQueues:
    """Who decodes now and who next: per-flow concurrency and queues, round robin between flows.

    Tokens are opaque to this class (the asyncio side uses futures). ``arrive`` answers ``run`` (the
    caller holds a slot now), ``wait`` (queued) or ``reject``; ``finish`` frees a slot and returns the
    waiters that hold one now; ``leave`` takes a waiter out of its queue (it gave up).
    """

    def __init__(self, limits: FairnessLimits) -> None:
        self.limits = limits
        self.running: dict[str, int] = {}
        self.waiting: dict[str, deque[Any]] = {}
        self._turns: deque[str] = deque()  # flows with waiters, the next to be served first
        self.total = 0

    def arrive(self, flow: str, token: Any) -> Verdict:
        queue = self.waiting.get(flow)
        if queue is None and self._can_run(flow):
            self._start(flow)
            return "run"
        if len(queue or ()) >= self.limits.queue_per_flow:
            return "reject"
        if queue is None:
            queue = self.waiting[flow] = deque()
            self._turns.append(flow)
        queue.append(token)
        return "wait"

    def leave(self, flow: str, token: Any) -> bool:
        """Drop a waiter; False if it is not waiting (it holds a slot already)."""
        queue = self.waiting.get(flow)
        if queue is None or token not in queue:
            return False
        queue.remove(token)
        if not queue:
            del self.waiting[flow]
            self._turns.remove(flow)
        return True

    def finish(self, flow: str) -> list[tuple[str, Any]]:
        """A decode of ``flow`` ended: the (flow, token) pairs that start now."""
        left = self.running.get(flow, 0) - 1
        if left > 0:
            self.running[flow] = left
        else:
            self.running.pop(flow, None)
        self.total -= 1
        if flow in self.waiting:  # it just had a turn: the other flows waiting go first
            self._turns.remove(flow)
            self._turns.append(flow)
        return self._dispatch()

    def queued(self, flow: str) -> int:
        return len(self.waiting.get(flow, ()))

    def _can_run(self, flow: str) -> bool:
        return self.total < self.limits.workers and self.running.get(flow, 0) < self.limits.per_flow

    def _start(self, flow: str) -> None:
        self.running[flow] = self.running.get(flow, 0) + 1
        self.total += 1

    def _dispatch(self) -> list[tuple[str, Any]]:
        started: list[tuple[str, Any]] = []
        passes = len(self._turns)
        while self._turns and self.total < self.limits.workers and passes > 0:
            flow = self._turns.popleft()
            passes -= 1
            if not self._can_run(flow):
                self._turns.append(flow)  # at its limit: keeps its place in the rotation
                continue
            queue = self.waiting[flow]
            started.append((flow, queue.popleft()))
            self._start(flow)
            if queue:
                self._turns.append(flow)
                passes += 1  # it may be served again in this round if slots remain
            else:
                del self.waiting[flow]
        return started


def too_many_requests(limits: FairnessLimits, why: str) -> errors.ApiError:
    return errors.ApiError(
        429, "TooManyRequests",
        f"Too many requests, please try again later: {why}",
        {"retryAfterSeconds": limits.retry_after},
        {"Retry-After": str(limits.retry_after)},
    )


class BodyDecoder:
    """Runs decode functions on a thread pool, admitted by :class:`FlowQueues`."""

    def __init__(self, limits: FairnessLimits | None = None) -> None:
        self.limits = limits or FairnessLimits()
        self.queues = FlowQueues(self.limits)
        self._pool = ThreadPoolExecutor(max_workers=self.limits.workers, thread_name_prefix="flotilla-decode")

    async def run(self, flow: str, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        verdict = self.queues.arrive(flow, turn)
        if verdict == "reject":
            raise too_many_requests(
                self.limits, f"this client has {self.limits.queue_per_flow} large request bodies waiting "
                             "to be decoded already")
        if verdict == "wait":
            try:
                await asyncio.wait_for(asyncio.shield(turn), self.limits.queue_wait)
            except TimeoutError:
                if self.queues.leave(flow, turn):
                    raise too_many_requests(
                        self.limits, f"this client's large request body waited {self.limits.queue_wait:g}s "
                                     "for its turn to be decoded") from None
            except asyncio.CancelledError:
                if not self.queues.leave(flow, turn):
                    self._finished(flow)  # it had been given a slot: hand it on
                raise
        try:
            job = self._pool.submit(fn)
        except BaseException:
            self._finished(flow)
            raise

        def done(_: Any) -> None:  # in the worker thread (or here, if cancelled before it started)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits any more
                loop.call_soon_threadsafe(self._finished, flow)

        job.add_done_callback(done)
        return await asyncio.wrap_future(job, loop=loop)

    def _finished(self, flow: str) -> None:
        for _, turn in self.queues.finish(flow):
            if not turn.done():
                turn.set_result(None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
