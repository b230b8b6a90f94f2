"""WorkQueue semantics (client-go's workqueue), driven by a fake clock where time matters."""

from __future__ import annotations

import asyncio
import math
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from flotilla.client.workqueue import (
    BucketRateLimiter,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    QueueShutDown,
    WorkQueue,
    default_rate_limiter,
)


def make(clock: FakeClock | None = None, **kw: object) -> tuple[WorkQueue[str], FakeClock]:
    clock = clock or FakeClock()
    return WorkQueue("test", clock=clock, **kw), clock  # type: ignore[arg-type]


def drain(q: WorkQueue[str]) -> list[str]:
    out: list[str] = []
    while True:
        try:
            key = q.get_nowait()
        except LookupError:
            return out
        out.append(key)
        q.done(key)


# -- basic queue ---------------------------------------------------------------------------------


def test_fifo_and_dedupe() -> None:
    q, _ = make()
    for key in ["a", "b", "a", "c", "b", "a"]:
        q.add(key)
    assert q.depth == 3 and len(q) == 3
    assert q.adds == 3
    assert drain(q) == ["a", "b", "c"]


def test_higher_priority_first_and_fifo_within_a_priority() -> None:
    q, _ = make()
    q.add("low1", -1)
    q.add("a")
    q.add("high", 5)
    q.add("low2", -1)
    q.add("b")
    assert q.depth == 5 and q.ready() == ["high", "a", "b", "low1", "low2"]
    assert drain(q) == ["high", "a", "b", "low1", "low2"]


def test_adding_a_queued_key_raises_its_priority_but_never_lowers_it() -> None:
    q, _ = make()
    for key in ("a", "b", "c"):
        q.add(key, -1)
    q.add("x")
    q.add("b")  # raised to 0: behind x, ahead of a and c
    q.add("x", -1)  # not lowered
    assert q.adds == 4 and q.depth == 4
    assert q.ready() == ["x", "b", "a", "c"]
    assert drain(q) == ["x", "b", "a", "c"]
    # the stale entry b left in the -1 line is skipped, and does not hide a later add of b
    q.add("a", -1)
    q.add("b", -1)
    assert drain(q) == ["a", "b"] and q.depth == 0


def test_a_raised_key_added_again_at_its_old_priority_keeps_its_place() -> None:
    q, _ = make()
    q.add("k", -1)
    q.add("other", -1)
    q.add("k", 1)
    assert q.get_nowait() == "k"
    q.done("k")
    q.add("k", -1)  # a new entry behind "other"; the stale one in front of it must not count
    assert q.ready() == ["other", "k"]
    assert drain(q) == ["other", "k"]


def test_priority_of_a_key_re_added_while_processing_applies_on_done() -> None:
    q, _ = make()
    q.add("k")
    key = q.get_nowait()
    q.add("later")
    q.add("k", -1)
    q.add("k", 2)  # raised while processing
    q.done(key)
    assert q.ready() == ["k", "later"]


def test_discard_ready_clears_every_priority() -> None:
    q, _ = make()
    q.add("a", -1)
    q.add("b", 3)
    q.add("a", 1)
    q.shutdown(discard_ready=True)
    assert q.depth == 0 and q.ready() == []
    with pytest.raises(QueueShutDown):
        q.get_nowait()


def test_low_priority_limit_caps_the_keys_of_a_negative_priority_in_processing() -> None:
    q, _ = make(low_priority_limit=1)
    q.add("a", -1)
    q.add("b", -1)
    q.add("h")
    assert q.get_nowait() == "h"
    assert q.get_nowait() == "a"
    with pytest.raises(LookupError):
        q.get_nowait()  # b waits until a is done
    assert q.depth == 1
    q.add("x")
    assert q.get_nowait() == "x"  # other keys are not held back
    q.add("c", -1)
    q.add("c")  # raised to 0: it may go at once
    assert q.get_nowait() == "c"
    q.done("a")
    assert q.get_nowait() == "b"
    q.done("b")
    q.add("b", -5)
    assert q.get_nowait() == "b"
    with pytest.raises(ValueError):
        WorkQueue("bad", low_priority_limit=0)


async def test_a_low_priority_slot_freed_wakes_a_waiting_worker() -> None:
    q, _ = make(low_priority_limit=1)
    q.add("a", -1)
    q.add("b", -1)
    assert q.get_nowait() == "a"
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.done("a")
    assert await asyncio.wait_for(waiter, 1) == "b"


async def test_run_workers_respect_the_low_priority_limit() -> None:
    q: WorkQueue[str] = WorkQueue("t", low_priority_limit=2)
    active: set[str] = set()
    most = 0
    done: list[str] = []

    async def handler(key: str) -> None:
        nonlocal most
        if key.startswith("low"):
            active.add(key)
            most = max(most, len(active))
        for _ in range(3):
            await asyncio.sleep(0)
        active.discard(key)
        done.append(key)

    for i in range(10):
        q.add(f"low{i}", -1)
        q.add(f"high{i}")
    runner = asyncio.create_task(q.run_workers(6, handler))
    for _ in range(500):
        if len(done) == 20:
            break
        await asyncio.sleep(0)
    await q.shutdown_with_drain()
    await asyncio.wait_for(runner, 5)
    assert sorted(done) == sorted([f"low{i}" for i in range(10)] + [f"high{i}" for i in range(10)])
    assert most == 2


def test_low_priority_quiet_holds_keys_of_a_negative_priority_while_others_come() -> None:
    q, clock = make(low_priority_quiet=1.0)
    q.add("low", -1)
    q.add("h")
    assert q.get_nowait() == "h"
    with pytest.raises(LookupError):
        q.get_nowait()
    clock.advance(0.6)
    q.add("x")  # still busy: the quiet period starts again
    assert q.get_nowait() == "x"
    clock.advance(0.9)
    with pytest.raises(LookupError):
        q.get_nowait()
    clock.advance(0.2)
    assert q.get_nowait() == "low"
    q.add("low2", -1)  # a key of a negative priority does not restart the quiet period
    assert q.get_nowait() == "low2"
    q.add("late", -1)
    q.add("late")  # raised to 0: it goes at once
    assert q.get_nowait() == "late"
    with pytest.raises(ValueError):
        WorkQueue("bad", low_priority_quiet=-1)


async def test_a_worker_waiting_for_the_quiet_period_is_woken_at_its_end() -> None:
    q: WorkQueue[str] = WorkQueue("t", low_priority_quiet=0.05)
    q.add("h")
    q.add("a", -1)
    q.add("b", -1)
    assert await q.get() == "h"
    waiters = [asyncio.create_task(q.get()) for _ in range(2)]
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waiters)
    got = await asyncio.wait_for(asyncio.gather(*waiters), 1)
    assert sorted(got) == ["a", "b"]


def test_shutdown_hands_out_held_back_keys_at_once() -> None:
    q, _ = make(low_priority_quiet=10.0)
    q.add("h")
    q.add("low", -1)
    q.shutdown()
    assert q.get_nowait() == "h"
    assert q.get_nowait() == "low"
    with pytest.raises(QueueShutDown):
        q.get_nowait()


async def test_get_waits_for_add() -> None:
    q, _ = make()
    task = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not task.done()
    q.add("x")
    assert await asyncio.wait_for(task, 1) == "x"
    assert q.processing == 1


async def test_waiting_getters_are_served_in_order() -> None:
    q, _ = make()
    tasks = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    for key in "abc":
        q.add(key)
    assert await asyncio.gather(*tasks) == ["a", "b", "c"]


async def test_cancelled_getter_passes_its_wakeup_on() -> None:
    q, _ = make()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("k")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == "k"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert q.depth == 0


def test_key_re_added_while_processing_is_processed_once_more_after_done() -> None:
    q, _ = make()
    q.add("a")
    q.add("b")
    assert q.get_nowait() == "a"
    q.add("a")
    q.add("a")
    assert q.depth == 1  # only "b": "a" is not handed to a second worker
    assert q.get_nowait() == "b"
    with pytest.raises(LookupError):
        q.get_nowait()
    q.done("a")
    assert q.depth == 1
    assert q.get_nowait() == "a"
    q.done("a")
    q.done("b")
    assert q.depth == 0 and q.processing == 0
    with pytest.raises(LookupError):
        q.get_nowait()


def test_done_without_re_add_does_not_requeue_and_unknown_done_is_ignored() -> None:
    q, _ = make()
    q.add("a")
    key = q.get_nowait()
    q.done(key)
    q.done(key)
    q.done("never-seen")
    assert q.depth == 0 and q.processing == 0


# -- delays --------------------------------------------------------------------------------------


def test_add_after_becomes_ready_at_its_time() -> None:
    q, clock = make()
    q.add_after("a", 5)
    assert q.depth == 0 and q.waiting == 1
    clock.advance(4.999)
    assert q.depth == 0
    clock.advance(0.001)
    assert q.depth == 1 and q.waiting == 0
    assert drain(q) == ["a"]


def test_add_after_keeps_the_earliest_time() -> None:
    q, clock = make()
    q.add_after("a", 10)
    q.add_after("a", 2)
    q.add_after("a", 7)
    assert q.waiting == 1
    clock.advance(2)
    assert drain(q) == ["a"]
    clock.advance(20)  # the later requests were folded into the earlier one
    assert drain(q) == []

    q.add_after("b", 2)
    q.add_after("b", 10)
    clock.advance(2)
    assert drain(q) == ["b"]
    clock.advance(20)
    assert drain(q) == []


def test_delayed_keys_become_ready_in_time_order_with_one_timer() -> None:
    q, clock = make()
    for i, delay in enumerate([5, 1, 3, 2, 4]):
        q.add_after(f"k{i}", delay)
    assert clock.pending_timers == 1
    clock.advance(10)
    assert drain(q) == ["k1", "k3", "k2", "k4", "k0"]
    assert clock.pending_timers == 0


def test_many_delayed_keys_share_one_timer() -> None:
    q, clock = make()
    for i in range(200):
        q.add_after(f"k{i}", 1 + (i * 7919 % 200) / 100)
    assert clock.pending_timers == 1
    clock.advance(1.5)
    assert clock.pending_timers == 1
    clock.advance(10)
    assert clock.pending_timers == 0
    assert sorted(drain(q)) == sorted(f"k{i}" for i in range(200))


def test_zero_delay_adds_at_once_and_delayed_key_already_queued_is_deduped() -> None:
    q, clock = make()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert q.depth == 2
    q.add_after("a", 1)
    clock.advance(1)
    assert drain(q) == ["a", "b"]


async def test_add_after_with_the_real_loop_clock() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("late", 0.05)
    q.add_after("early", 0.01)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await asyncio.wait_for(q.get(), 1) == "early"
    assert await asyncio.wait_for(q.get(), 1) == "late"
    assert loop.time() - start >= 0.045


# -- rate limiting -------------------------------------------------------------------------------


def test_item_exponential_backoff_and_forget() -> None:
    lim: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    assert [lim.when("a") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert lim.num_requeues("a") == 4
    assert lim.when("b") == 0.005  # per key
    lim.forget("a")
    assert lim.num_requeues("a") == 0
    assert lim.when("a") == 0.005
    for _ in range(5000):  # no overflow, capped at max
        delay = lim.when("c")
    assert delay == 1000.0


def test_token_bucket_burst_then_rate() -> None:
    clock = FakeClock()
    bucket: BucketRateLimiter[str] = BucketRateLimiter(qps=10, burst=3, clock=clock)
    assert [bucket.when("x") for _ in range(3)] == [0, 0, 0]
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)
    clock.advance(10)
    assert [bucket.when("z") for _ in range(3)] == [0, 0, 0]  # refilled, but only to the burst
    assert bucket.when("z") == pytest.approx(0.1)


def test_default_limiter_is_max_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    lim = default_rate_limiter(qps=1, burst=1, clock=clock)
    assert isinstance(lim, MaxOfRateLimiter)
    assert lim.when("a") == 0.005  # bucket had a token
    assert lim.when("b") == pytest.approx(1.0)  # bucket empty: 1 qps
    assert lim.num_requeues("a") == 1


def test_add_rate_limited_backs_off_per_key_and_forget_resets() -> None:
    q, clock = make()
    for expected in [0.005, 0.01, 0.02, 0.04]:
        q.add_rate_limited("a")
        clock.advance(expected * 0.99)
        assert q.depth == 0
        clock.advance(expected * 0.02)
        assert drain(q) == ["a"]
    assert q.num_requeues("a") == 4
    assert q.retries == 4
    q.forget("a")
    assert q.num_requeues("a") == 0
    q.add_rate_limited("a")
    clock.advance(0.005)
    assert drain(q) == ["a"]


def test_add_rate_limited_respects_the_overall_bucket() -> None:
    clock = FakeClock()
    q, _ = make(clock, rate_limiter=default_rate_limiter(qps=10, burst=2, clock=clock))
    for key in "abcd":
        q.add_rate_limited(key)
    clock.advance(0.005)
    assert drain(q) == ["a", "b"]
    clock.advance(0.1)
    assert drain(q) == ["c"]
    clock.advance(0.1)
    assert drain(q) == ["d"]


# -- shutdown ------------------------------------------------------------------------------------


async def test_shutdown_wakes_getters_and_drops_delayed_keys() -> None:
    q, clock = make()
    getters = [asyncio.create_task(q.get()) for _ in range(2)]
    await asyncio.sleep(0)
    q.add_after("later", 1)
    q.shutdown()
    for task in getters:
        with pytest.raises(QueueShutDown):
            await asyncio.wait_for(task, 1)
    assert q.shutting_down and q.waiting == 0 and clock.pending_timers == 0
    clock.advance(5)
    q.add("x")
    q.add_after("y", 0)
    q.add_rate_limited("z")
    assert q.depth == 0
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_shutdown_still_hands_out_ready_keys_unless_discarded() -> None:
    q, _ = make()
    q.add("a")
    q.add("b")
    q.shutdown()
    assert await q.get() == "a"
    assert q.get_nowait() == "b"
    with pytest.raises(QueueShutDown):
        q.get_nowait()

    q2, _ = make()
    q2.add("a")
    q2.shutdown(discard_ready=True)
    with pytest.raises(QueueShutDown):
        await q2.get()


async def test_shutdown_with_drain_waits_for_processing() -> None:
    q, _ = make()
    q.add("a")
    key = await q.get()
    drained = asyncio.create_task(q.shutdown_with_drain())
    await asyncio.sleep(0.01)
    assert not drained.done()
    q.done(key)
    await asyncio.wait_for(drained, 1)


# -- workers -------------------------------------------------------------------------------------


async def test_run_workers_retries_failures_with_backoff_and_forgets_on_success() -> None:
    q: WorkQueue[str] = WorkQueue("workers")
    calls: Counter[str] = Counter()
    finished = asyncio.Event()

    async def handler(key: str) -> None:
        calls[key] += 1
        if key == "flaky" and calls[key] < 3:
            raise RuntimeError("transient")
        if calls["flaky"] >= 3 and calls["ok"] >= 1:
            finished.set()

    q.add("flaky")
    q.add("ok")
    runner = asyncio.create_task(q.run_workers(2, handler))
    await asyncio.wait_for(finished.wait(), 2)
    await asyncio.sleep(0)
    assert calls == {"flaky": 3, "ok": 1}
    assert q.retries == 2
    assert q.num_requeues("flaky") == 0  # forgotten after success
    q.shutdown()
    await asyncio.wait_for(runner, 1)


async def test_run_workers_process_in_parallel_but_never_one_key_twice_at_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    active: set[str] = set()
    max_parallel = 0
    seen: Counter[str] = Counter()
    all_twice = asyncio.Event()

    async def handler(key: str) -> None:
        nonlocal max_parallel
        assert key not in active
        active.add(key)
        max_parallel = max(max_parallel, len(active))
        await asyncio.sleep(0.01)
        if seen[key] == 0:
            q.add(key)  # re-added while processing: runs again after this one
        seen[key] += 1
        active.discard(key)
        if sum(seen.values()) == 8:
            all_twice.set()

    runner = asyncio.create_task(q.run_workers(4, handler))
    for key in "abcd":
        q.add(key)
    await asyncio.wait_for(all_twice.wait(), 2)
    q.shutdown()
    await asyncio.wait_for(runner, 1)
    assert seen == {k: 2 for k in "abcd"}
    assert max_parallel == 4


async def test_cancelling_run_workers_cancels_handlers_and_marks_keys_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    started = asyncio.Event()

    async def handler(key: str) -> None:
        started.set()
        await asyncio.sleep(60)

    q.add("a")
    runner = asyncio.create_task(q.run_workers(1, handler))
    await asyncio.wait_for(started.wait(), 1)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert q.processing == 0


# -- metrics -------------------------------------------------------------------------------------


def test_metrics_depth_adds_latency_work_duration_retries() -> None:
    q, clock = make()
    q.add("a")
    q.add("a")
    q.add("b")
    clock.advance(3)
    key = q.get_nowait()
    clock.advance(2)
    m = q.metrics()
    assert m["depth"] == 1 and m["processing"] == 1 and m["adds"] == 2
    assert m["unfinished_work_seconds"] == pytest.approx(2)
    assert m["longest_running_processor_seconds"] == pytest.approx(2)
    q.done(key)
    q.add_rate_limited("a")
    m = q.metrics()
    assert m["latency"]["count"] == 1 and m["latency"]["sum"] == pytest.approx(3)
    assert m["work_duration"]["count"] == 1 and m["work_duration"]["sum"] == pytest.approx(2)
    assert m["retries"] == 1 and m["waiting"] == 1
    assert q.latency.max == pytest.approx(3) and q.work_duration.mean == pytest.approx(2)


# -- properties ----------------------------------------------------------------------------------


class _RecordingLimiter(ItemExponentialFailureRateLimiter[str]):
    """The default per-key backoff, remembering the last delay so the model can follow it."""

    last = 0.0

    def when(self, key: str) -> float:
        self.last = super().when(key)
        return self.last


KEYS = st.sampled_from(["a", "b", "c", "d"])


class WorkQueueMachine(RuleBasedStateMachine):
    """Random add/add_after/add_rate_limited/get/done/time sequences against a simple model.

    Model: ``owed`` holds keys added since they were last handed out; ``due`` holds the earliest
    pending time of each delayed key.  A key is never handed out while held, and at the end every
    owed or delayed key comes out exactly once: none lost, none duplicated, none made up.
    """

    low_priority_limit: int | None = None
    low_priority_quiet = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.limiter = _RecordingLimiter(0.005, 0.5)
        self.q: WorkQueue[str] = WorkQueue(clock=self.clock, rate_limiter=self.limiter,
                                           low_priority_limit=self.low_priority_limit,
                                           low_priority_quiet=self.low_priority_quiet)
        self.last_add = -math.inf  # when a key of priority >= 0 was last added
        self.held: set[str] = set()
        self.held_low: set[str] = set()  # held keys that were handed out with a negative priority
        self.owed: set[str] = set()
        self.due: dict[str, float] = {}
        self.prio: dict[str, int] = {}  # of the owed keys: the highest priority they were added with

    def _delay(self, key: str, delay: float) -> None:
        if delay <= 0:
            self._owe(key)
            self.last_add = self.clock.now()
            return
        when = self.clock.now() + delay
        self.due[key] = min(self.due.get(key, when), when)

    def _owe(self, key: str, priority: int = 0) -> None:
        self.prio[key] = max(self.prio[key], priority) if key in self.owed else priority
        self.owed.add(key)

    @rule(key=KEYS, priority=st.sampled_from([0, 0, -1, 1]))
    def add(self, key: str, priority: int) -> None:
        self.q.add(key, priority)
        self._owe(key, priority)
        if priority >= 0:
            self.last_add = self.clock.now()

    @rule(key=KEYS, delay=st.sampled_from([0, 0.001, 0.01, 0.1, 1.0]))
    def add_after(self, key: str, delay: float) -> None:
        self.q.add_after(key, delay)
        self._delay(key, delay)

    @rule(key=KEYS)
    def add_rate_limited(self, key: str) -> None:
        self.q.add_rate_limited(key)
        self._delay(key, self.limiter.last)

    @rule(key=KEYS)
    def forget(self, key: str) -> None:
        self.q.forget(key)
        assert self.q.num_requeues(key) == 0

    @rule(dt=st.sampled_from([0.0005, 0.005, 0.05, 0.5]))
    def advance(self, dt: float) -> None:
        self.clock.advance(dt)
        for key, when in list(self.due.items()):
            if when <= self.clock.now():
                del self.due[key]
                self._owe(key)
                self.last_add = max(self.last_add, when)

    def _eligible(self) -> set[str]:
        ready = self.owed - self.held
        if (self.low_priority_limit is not None and len(self.held_low) >= self.low_priority_limit
                or self.clock.now() < self.last_add + self.low_priority_quiet):
            ready = {k for k in ready if self.prio[k] >= 0}
        return ready

    @precondition(lambda self: self.q.depth > 0)
    @rule()
    def get(self) -> None:
        eligible = self._eligible()
        if not eligible:
            with pytest.raises(LookupError):
                self.q.get_nowait()
            return
        key = self.q.get_nowait()
        assert key not in self.held, f"{key} handed out while being processed"
        assert key in eligible, f"{key} handed out but not ready (or held back by the low-priority limit)"
        highest = max(self.prio[k] for k in eligible)
        assert self.prio[key] == highest, f"{key} (priority {self.prio[key]}) handed out before one of {highest}"
        self.held.add(key)
        if self.prio[key] < 0:
            self.held_low.add(key)
        self.owed.discard(key)
        del self.prio[key]

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.held)))
        self.held.discard(key)
        self.held_low.discard(key)
        self.q.done(key)

    @invariant()
    def queue_has_no_duplicates(self) -> None:
        ready = self.q.ready()
        assert len(ready) == len(set(ready)) == self.q.depth
        assert not set(ready) & self.held
        assert set(ready) == self.owed - self.held
        assert [self.prio[k] for k in ready] == sorted((self.prio[k] for k in ready), reverse=True)
        assert self.q.processing == len(self.held)

    def teardown(self) -> None:
        for key in sorted(self.held):
            self.q.done(key)
        self.clock.advance(10)
        expected = self.owed | set(self.due)
        out = drain(self.q)
        assert len(out) == len(set(out)), f"duplicated: {out}"
        assert set(out) == expected, f"lost {expected - set(out)}, extra {set(out) - expected}"
        assert self.q.waiting == 0 and self.q.processing == 0


TestWorkQueueMachine = WorkQueueMachine.TestCase
TestWorkQueueMachine.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


class LimitedWorkQueueMachine(WorkQueueMachine):
    """The same with at most one key of a negative priority processed at a time."""

    low_priority_limit = 1


TestLimitedWorkQueueMachine = LimitedWorkQueueMachine.TestCase
TestLimitedWorkQueueMachine.settings = TestWorkQueueMachine.settings


class QuietWorkQueueMachine(LimitedWorkQueueMachine):
    """... and keys of a negative priority held back until no other key was added for 10 ms."""

    low_priority_quiet = 0.01


TestQuietWorkQueueMachine = QuietWorkQueueMachine.TestCase
TestQuietWorkQueueMachine.settings = TestWorkQueueMachine.settings


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    adds=st.lists(st.tuples(KEYS, st.integers(0, 3)), min_size=1, max_size=40),
    workers=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_concurrent_workers_never_share_a_key_and_never_lose_one(
    adds: list[tuple[str, int]], workers: int, seed: int
) -> None:
    """Producers and workers interleave at random yields; some handlers fail, some re-add."""
    rng = random.Random(seed)

    async def scenario() -> None:
        q: WorkQueue[str] = WorkQueue(
            rate_limiter=ItemExponentialFailureRateLimiter(0.0005, 0.002)
        )
        tick = 0
        last_add: dict[str, int] = {}
        last_start: dict[str, int] = {}
        active: set[str] = set()
        violations: list[str] = []
        readds = 5

        def stamp() -> int:
            nonlocal tick
            tick += 1
            return tick

        async def handler(key: str) -> None:
            nonlocal readds
            if key in active:  # an assert here would be taken for a handler failure
                violations.append(f"{key} processed twice at once")
            active.add(key)
            last_start[key] = stamp()
            try:
                for _ in range(rng.randint(0, 3)):
                    await asyncio.sleep(0)
                if readds and rng.random() < 0.2:
                    readds -= 1
                    last_add[key] = stamp()
                    q.add(key)
                if rng.random() < 0.15:
                    raise RuntimeError("boom")  # retried via add_rate_limited
            finally:
                active.discard(key)

        async def producer(items: list[tuple[str, int]]) -> None:
            for key, pause in items:
                for _ in range(pause):
                    await asyncio.sleep(0)
                last_add[key] = stamp()
                q.add(key)

        runner = asyncio.create_task(q.run_workers(workers, handler))
        half = len(adds) // 2
        await asyncio.gather(producer(adds[:half]), producer(adds[half:]))
        for _ in range(2000):
            if not (q.depth or q.processing or q.waiting):
                break
            await asyncio.sleep(0.001)
        q.shutdown()
        await asyncio.wait_for(runner, 5)
        assert not violations
        for key, added in last_add.items():
            assert last_start.get(key, -1) > added, f"{key} added at {added} but not processed after"

    asyncio.run(scenario())


def test_discard_ready_also_forgets_keys_re_added_while_processing() -> None:
    q, _ = make()
    q.add("a")
    key = q.get_nowait()
    q.add("a")
    q.shutdown(discard_ready=True)
    q.done(key)
    with pytest.raises(QueueShutDown):
        q.get_nowait()


def test_prometheus_metrics_go_to_the_registry_given_and_nowhere_without_one() -> None:
    import prometheus_client

    from flotilla.observability.metrics import MetricsRegistry, WorkqueueMetrics

    registry = MetricsRegistry()
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("prom", clock=clock, metrics=WorkqueueMetrics(registry))
    q.add("a")
    q.add("b")
    q.done(q.get_nowait())
    q.add_rate_limited("a")

    def sample(name: str) -> float | None:
        return registry.get_sample_value(name, {"name": "prom"})

    assert sample("workqueue_adds_total") == 2
    assert sample("workqueue_depth") == 1
    assert sample("workqueue_queue_duration_seconds_count") == 1
    assert sample("workqueue_work_duration_seconds_count") == 1
    assert sample("workqueue_retries_total") == 1
    plain: WorkQueue[str] = WorkQueue("plain", clock=clock)  # no metrics: not the library's global registry
    plain.add("a")
    assert prometheus_client.REGISTRY.get_sample_value("workqueue_adds_total", {"name": "plain"}) is None
