"""Heavy body decoding: per-client limits, round robin between clients, 429 when a client's queue overflows."""

from __future__ import annotations

import asyncio
import threading

import pytest

from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.fairness import BodyDecoder, FairnessLimits, FlowQueues


def test_one_client_holds_one_worker_and_the_other_worker_stays_free_for_others() -> None:
    q = FlowQueues(FairnessLimits(workers=2, per_flow=1, queue_per_flow=8))
    assert q.arrive("a", "a1") == "run"
    assert q.arrive("a", "a2") == "wait"
    assert q.arrive("a", "a3") == "wait"
    assert q.arrive("b", "b1") == "run"  # a's backlog does not stand in front of b
    assert q.arrive("c", "c1") == "wait"  # both workers busy
    # a just had a turn: c, waiting behind it, goes first
    assert q.finish("a") == [("c", "c1")]
    assert q.finish("b") == [("a", "a2")]
    assert q.finish("c") == []  # a3 waits for a2: one at a time per client
    assert q.finish("a") == [("a", "a3")]
    assert q.finish("a") == []
    assert q.total == 0 and not q.running and not q.waiting


def test_clients_take_turns_when_workers_free_up() -> None:
    q = FlowQueues(FairnessLimits(workers=1, per_flow=1, queue_per_flow=8))
    assert q.arrive("a", "a0") == "run"
    for i in range(1, 4):
        assert q.arrive("a", f"a{i}") == "wait"
    assert q.arrive("b", "b1") == "wait"
    assert q.arrive("b", "b2") == "wait"
    order = []
    flow = "a"
    while True:
        started = q.finish(flow)
        if not started:
            break
        flow, token = started[0]
        order.append(token)
    assert order == ["b1", "a1", "b2", "a2", "a3"]


def test_a_client_with_a_full_queue_is_refused_and_others_are_not() -> None:
    q = FlowQueues(FairnessLimits(workers=1, per_flow=1, queue_per_flow=2))
    assert q.arrive("a", 0) == "run"
    assert [q.arrive("a", i) for i in (1, 2, 3)] == ["wait", "wait", "reject"]
    assert q.arrive("b", 1) == "wait"
    assert q.leave("a", 1) and not q.leave("a", 1)
    assert q.queued("a") == 1
    assert q.arrive("a", 4) == "wait"


def test_decoder_runs_heavy_work_on_threads_and_answers_429_with_retry_after() -> None:
    async def scenario() -> None:
        decoder = BodyDecoder(FairnessLimits(workers=1, per_flow=1, queue_per_flow=1, queue_wait=30, retry_after=3))
        release = threading.Event()
        loop_thread = threading.get_ident()

        def slow() -> int:
            assert threading.get_ident() != loop_thread
            release.wait(10)
            return 1

        try:
            first = asyncio.create_task(decoder.run("a", slow))
            await asyncio.sleep(0.05)
            second = asyncio.create_task(decoder.run("a", lambda: 2))  # waits for its turn
            await asyncio.sleep(0.05)
            with pytest.raises(ApiError) as info:
                await decoder.run("a", lambda: 3)
            err = info.value
            assert err.code == 429 and err.reason == "TooManyRequests"
            assert err.headers["Retry-After"] == "3" and err.details["retryAfterSeconds"] == 3
            assert "waiting" in err.message
            # the loop is free while the worker blocks
            ticks = 0
            for _ in range(5):
                await asyncio.sleep(0.01)
                ticks += 1
            assert ticks == 5 and not first.done()
            release.set()
            assert await first == 1 and await second == 2
            assert decoder.queues.total == 0
        finally:
            release.set()
            decoder.close()

    asyncio.run(scenario())


def test_a_body_that_waits_too_long_for_its_turn_gets_429() -> None:
    async def scenario() -> None:
        decoder = BodyDecoder(FairnessLimits(workers=1, per_flow=1, queue_per_flow=4, queue_wait=0.1))
        release = threading.Event()
        try:
            first = asyncio.create_task(decoder.run("a", lambda: release.wait(10)))
            await asyncio.sleep(0.02)
            with pytest.raises(ApiError) as info:
                await decoder.run("b", lambda: None)
            assert info.value.code == 429 and "waited" in info.value.message
            assert decoder.queues.queued("b") == 0
            release.set()
            await first
            assert await decoder.run("b", lambda: 5) == 5
        finally:
            release.set()
            decoder.close()

    asyncio.run(scenario())


def test_a_cancelled_waiter_gives_its_turn_away() -> None:
    async def scenario() -> None:
        decoder = BodyDecoder(FairnessLimits(workers=1, per_flow=1, queue_per_flow=4, queue_wait=30))
        release = threading.Event()
        try:
            first = asyncio.create_task(decoder.run("a", lambda: release.wait(10)))
            await asyncio.sleep(0.02)
            gone = asyncio.create_task(decoder.run("b", lambda: "never"))
            await asyncio.sleep(0.02)
            gone.cancel()
            with pytest.raises(asyncio.CancelledError):
                await gone
            later = asyncio.create_task(decoder.run("c", lambda: "c"))
            await asyncio.sleep(0.02)
            release.set()
            await first
            assert await later == "c"
            assert decoder.queues.total == 0 and not decoder.queues.waiting
        finally:
            release.set()
            decoder.close()

    asyncio.run(scenario())


def test_no_queue_means_a_busy_client_is_refused_at_once() -> None:
    q = FlowQueues(FairnessLimits(workers=2, per_flow=1, queue_per_flow=0))
    assert q.arrive("a", 1) == "run"
    assert q.arrive("a", 2) == "reject"
    assert q.arrive("b", 1) == "run"
