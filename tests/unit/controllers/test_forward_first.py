"""Forward first: reporting passes wait while the forward controllers have keys ready, and never for long."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from flotilla.runtime.forward_first import ForwardFirst
from flotilla.runtime.manager import all_controllers


@dataclass
class Queue:
    depth: int = 0


async def test_a_reporting_pass_runs_at_once_when_the_forward_queues_are_empty() -> None:
    gate = ForwardFirst(max_wait=5.0)
    gate.add_forward(Queue(0))
    async with asyncio.timeout(0.5):
        await gate.turn()
    assert gate.waits == 0


async def test_a_reporting_pass_waits_until_the_forward_queues_drain() -> None:
    gate = ForwardFirst(max_wait=5.0, trickle=0)
    busy = Queue(3)
    gate.add_forward(Queue(0))
    gate.add_forward(busy)
    waiter = asyncio.ensure_future(gate.turn())
    await asyncio.sleep(0.1)
    assert not waiter.done()
    busy.depth = 0
    async with asyncio.timeout(0.5):
        await waiter
    assert gate.waits == 1 and 0.09 < gate.waited_seconds < 1.0


async def test_a_reporting_pass_waits_at_most_max_wait() -> None:
    gate = ForwardFirst(max_wait=0.2, trickle=0)
    gate.add_forward(Queue(100))
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with asyncio.timeout(1.0):
        await gate.turn()
    assert 0.19 <= loop.time() - start < 0.6


async def test_no_wait_at_all_when_max_wait_is_zero() -> None:
    gate = ForwardFirst(max_wait=0)
    gate.add_forward(Queue(100))
    async with asyncio.timeout(0.1):
        await gate.turn()
    assert gate.waits == 0


async def test_one_reporting_pass_at_a_time_runs_while_the_forward_queues_are_busy() -> None:
    gate = ForwardFirst(max_wait=5.0, trickle=1)
    gate.add_forward(Queue(10))
    async with asyncio.timeout(0.5):
        first = await gate.turn()  # the trickle place: at once
    assert first is True
    second = asyncio.ensure_future(gate.turn())
    await asyncio.sleep(0.1)
    assert not second.done()  # waits for the place (or for the forward queues)
    gate.done(first)
    async with asyncio.timeout(0.5):
        assert await second is True
    gate.done(True)
    assert gate.waits == 1


def test_the_controllers_that_carry_objects_go_first_and_the_status_reporters_wait() -> None:
    roles = {name: cls.role for name, cls in all_controllers().items()}
    forward = {n for n, r in roles.items() if r == "forward"}
    reports = {n for n, r in roles.items() if r == "reports"}
    assert forward == {"detector", "scheduler", "binding", "execution", "taint-manager", "application-failover"}
    assert reports == {"work-status", "binding-status"}
    assert {n for n, r in roles.items() if r == "cleanup"} == {"graceful-eviction"}


async def test_a_cleanup_pass_waits_while_the_reports_have_a_backlog_and_never_for_long() -> None:
    gate = ForwardFirst()
    reports = Queue(5)
    gate.add_forward(Queue(0))
    gate.add_reports(reports)
    gate.cleanup_max_wait = 5.0
    waiter = asyncio.ensure_future(gate.cleanup_turn())
    await asyncio.sleep(0.1)
    assert not waiter.done()
    reports.depth = 0
    async with asyncio.timeout(0.5):
        await waiter
    reports.depth = 5
    gate.cleanup_max_wait = 0.2
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with asyncio.timeout(1.0):
        await gate.cleanup_turn()
    assert 0.19 <= loop.time() - start < 0.6


async def test_every_wait_is_told_with_its_role_and_length() -> None:
    told: list[tuple[str, float]] = []
    gate = ForwardFirst(max_wait=0.1, trickle=0, cleanup_max_wait=0.1)
    gate.on_wait = lambda role, seconds: told.append((role, seconds))
    gate.add_forward(Queue(1))
    gate.add_reports(Queue(1))
    await gate.turn()
    await gate.cleanup_turn()
    assert [role for role, _ in told] == ["reports", "cleanup"]
    assert all(0.09 <= seconds < 0.5 for _, seconds in told)


def test_the_controller_metrics_count_the_waits_by_role() -> None:
    from flotilla.observability.metrics import ControllerMetrics
    from tests.support.metrics import parse_exposition

    metrics = ControllerMetrics()
    metrics.forward_first_waited("reports", 0.25)
    metrics.forward_first_waited("reports", 0.5)
    metrics.forward_first_waited("cleanup", 2.0)
    families = parse_exposition(metrics.render())
    waits = families["flotilla_forward_first_waits_total"]
    seconds = families["flotilla_forward_first_wait_seconds_total"]
    assert waits.type == "counter" and seconds.type == "counter"
    assert waits.value("flotilla_forward_first_waits_total", role="reports") == 2
    assert seconds.value("flotilla_forward_first_wait_seconds_total", role="reports") == 0.75
    assert seconds.value("flotilla_forward_first_wait_seconds_total", role="cleanup") == 2.0
