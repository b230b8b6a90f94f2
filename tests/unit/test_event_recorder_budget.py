"""The event recorder's budget: failover Events always land on a busy object, routine repeats are folded into
counts without spending the per-object budget, and every lost occurrence is counted in a metric.

An in-memory Event client records what is written, in what order; nothing else is faked.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flotilla.client.errors import ApiException, ConnectionFailed
from flotilla.client.events import EventRecorder
from flotilla.failover.events import (
    EVENT_EVICTION_PERFORMED,
    EVENT_EVICTION_QUEUED,
    EVENT_SYNC_WORK_SUCCEED,
    FAILOVER_EVENT_REASONS,
)
from flotilla.kube.resources import Resource
from flotilla.observability.metrics import DROP_QUEUE_FULL, DROP_SPAM_FILTER, EventMetrics, MetricsRegistry
from tests.support.metrics import parse_exposition


class MemoryEvents:
    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []

    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("create", obj["reason"]))
        self.events[obj["metadata"]["name"]] = dict(obj)
        return obj

    async def patch(self, res: Resource, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        if name not in self.events:
            raise ApiException(404, message="gone")
        self.calls.append(("patch", self.events[name]["reason"]))
        self.events[name].update(patch)
        return self.events[name]

    def by_reason(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.events.values() if e["reason"] == reason]


BINDING = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
           "metadata": {"name": "wordcount-flinkdeployment", "namespace": "streaming", "uid": "u-1"}}


def sample(registry: MetricsRegistry, reason: str, cause: str) -> float:
    dropped = parse_exposition(registry.render())["flotilla_events_dropped_total"]
    return next((v for _, labels, v in dropped.samples if labels == {"reason": reason, "cause": cause}), 0.0)


async def test_a_busy_object_still_records_eviction_events_after_hundreds_of_routine_ones() -> None:
    client = MemoryEvents()
    registry = MetricsRegistry()
    recorder = EventRecorder(client, "c", patch_delay=0.0, bump_max_interval=0.0,
                             priority_reasons=FAILOVER_EVENT_REASONS, metrics=EventMetrics(registry))
    # hours of status churn: the same routine Event, each occurrence written on its own ...
    for _ in range(300):
        recorder.event(BINDING, "Normal", "AggregateStatusSucceed", "Collected the status")
        await recorder.flush()
    # ... and more distinct routine Events than the object's budget (25) holds
    for i in range(40):
        recorder.event(BINDING, "Normal", f"Routine{i}", "something routine happened")
    await recorder.flush()
    assert recorder.filtered > 0  # the budget is spent now
    spent = sum(sample(registry, f"Routine{i}", DROP_SPAM_FILTER) for i in range(40))
    assert spent == recorder.filtered

    recorder.event(BINDING, "Normal", EVENT_EVICTION_QUEUED, "Eviction from cluster member1 queued: due now")
    recorder.event(BINDING, "Normal", EVENT_EVICTION_PERFORMED, "Evicted from cluster member1")
    recorder.event(BINDING, "Normal", EVENT_SYNC_WORK_SUCCEED, "Sync work of ResourceBinding successful.")
    recorder.event(BINDING, "Normal", EVENT_SYNC_WORK_SUCCEED, "Sync work of ResourceBinding successful.")
    await recorder.flush()

    assert [e["count"] for e in client.by_reason(EVENT_EVICTION_QUEUED)] == [1]
    assert [e["count"] for e in client.by_reason(EVENT_EVICTION_PERFORMED)] == [1]
    assert [e["count"] for e in client.by_reason(EVENT_SYNC_WORK_SUCCEED)] == [2]
    (routine,) = client.by_reason("AggregateStatusSucceed")
    assert routine["count"] == 300  # every occurrence counted, none lost
    for reason in (EVENT_EVICTION_QUEUED, EVENT_EVICTION_PERFORMED, EVENT_SYNC_WORK_SUCCEED,
                   "AggregateStatusSucceed"):
        assert sample(registry, reason, DROP_SPAM_FILTER) == 0
    await recorder.close()


async def test_routine_repeats_are_folded_into_counts_without_spending_the_budget() -> None:
    client = MemoryEvents()
    recorder = EventRecorder(client, "c", patch_delay=0.0, bump_max_interval=0.0, spam_burst=3, spam_qps=0.0)
    for _ in range(100):
        recorder.event(BINDING, "Normal", "AggregateStatusSucceed", "Collected the status")
        await recorder.flush()
    # one token went to the AggregateStatusSucceed Event, two are left: two more new Events, then none
    for reason in ("ApplyPolicySucceed", "StatusUpToDate", "PreemptPolicySucceed"):
        recorder.event(BINDING, "Normal", reason, "m")
    await recorder.flush()
    assert client.by_reason("AggregateStatusSucceed")[0]["count"] == 100
    assert [r for op, r in client.calls if op == "create"] == [
        "AggregateStatusSucceed", "ApplyPolicySucceed", "StatusUpToDate"]
    assert recorder.filtered == 1
    await recorder.close()


async def test_an_event_that_keeps_repeating_is_bumped_less_and_less_often_with_an_exact_count() -> None:
    client = MemoryEvents()
    recorder = EventRecorder(client, "c", patch_delay=0.01, bump_max_interval=0.16)
    loop = asyncio.get_running_loop()
    recorder.event(BINDING, "Normal", "AggregateStatusSucceed", "Collected the status")
    occurrences, end = 1, loop.time() + 0.8
    while loop.time() < end:  # one occurrence every 5 ms
        await asyncio.sleep(0.005)
        recorder.event(BINDING, "Normal", "AggregateStatusSucceed", "Collected the status")
        occurrences += 1
    patches = sum(1 for op, _ in client.calls if op == "patch")
    # 10, 20, 40, 80, 160, 160, ... ms apart: at most ~9 bumps in 0.8 s (a patch per patch_delay would be ~80)
    assert 2 <= patches <= 12, patches
    await recorder.flush()
    assert client.by_reason("AggregateStatusSucceed")[0]["count"] == occurrences
    await recorder.close()


async def test_failover_events_are_bumped_after_patch_delay_only() -> None:
    client = MemoryEvents()
    recorder = EventRecorder(client, "c", patch_delay=0.02, bump_max_interval=30.0,
                             priority_reasons=FAILOVER_EVENT_REASONS)
    for reason in (EVENT_SYNC_WORK_SUCCEED, "AggregateStatusSucceed"):
        for _ in range(7):  # create, then 6 bumps (flush writes them at once): the next waits 20 ms * 2**5
            recorder.event(BINDING, "Normal", reason, "m")
            await recorder.flush()
    recorder.event(BINDING, "Normal", "AggregateStatusSucceed", "m")
    recorder.event(BINDING, "Normal", EVENT_SYNC_WORK_SUCCEED, "m")
    await asyncio.sleep(0.25)
    assert client.by_reason(EVENT_SYNC_WORK_SUCCEED)[0]["count"] == 8
    assert client.by_reason("AggregateStatusSucceed")[0]["count"] == 7  # its bump waits 640 ms
    await recorder.flush()
    assert client.by_reason("AggregateStatusSucceed")[0]["count"] == 8
    await recorder.close()


async def test_a_full_queue_makes_room_for_failover_events_and_counts_what_it_gives_up() -> None:
    client = MemoryEvents()
    registry = MetricsRegistry()
    recorder = EventRecorder(client, "c", max_queue=3, qps=0.0, priority_reasons=FAILOVER_EVENT_REASONS,
                             metrics=EventMetrics(registry))
    others = [{**BINDING, "metadata": {**BINDING["metadata"], "name": f"b{i}", "uid": f"u{i}"}} for i in range(6)]
    for obj in others[:3]:  # the writers have not run yet: the queue is full
        recorder.event(obj, "Warning", "AggregateStatusFailed", "boom")
    recorder.event(others[3], "Normal", EVENT_EVICTION_QUEUED, "queued")  # takes a Warning's place
    recorder.event(others[4], "Normal", EVENT_EVICTION_PERFORMED, "evicted")  # and another one's
    recorder.event(others[5], "Normal", "AggregateStatusSucceed", "ok")  # nothing of less value: dropped
    assert sample(registry, "AggregateStatusFailed", DROP_QUEUE_FULL) == 2
    assert sample(registry, "AggregateStatusSucceed", DROP_QUEUE_FULL) == 1
    assert recorder.dropped == 3
    await recorder.flush()
    assert client.calls == [("create", EVENT_EVICTION_QUEUED), ("create", EVENT_EVICTION_PERFORMED),
                            ("create", "AggregateStatusFailed")]
    await recorder.close()


async def test_dropped_events_are_counted_by_reason_and_cause() -> None:
    registry = MetricsRegistry()
    recorder = EventRecorder(MemoryEvents(), "c", spam_burst=1, spam_qps=0.0, metrics=EventMetrics(registry))
    recorder.event(BINDING, "Normal", "R1", "m")
    recorder.event(BINDING, "Normal", "R2", "m")
    recorder.event(BINDING, "Normal", "R3", "m")
    recorder.event({"kind": "ConfigMap"}, "Normal", "NoName", "m")
    await recorder.flush()
    await recorder.close()
    recorder.event(BINDING, "Normal", "Late", "m")
    assert sample(registry, "R2", DROP_SPAM_FILTER) == 1 and sample(registry, "R3", DROP_SPAM_FILTER) == 1
    assert sample(registry, "R1", DROP_SPAM_FILTER) == 0
    assert sample(registry, "NoName", "invalid") == 1 and sample(registry, "Late", "closed") == 1
    assert "# TYPE flotilla_events_dropped_total counter" in registry.render()


class Unreachable(MemoryEvents):
    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        raise ConnectionFailed("http://cp/api/v1/events: connection refused")


async def test_an_unreachable_api_server_costs_one_log_line_per_lost_event_without_a_traceback(
        caplog: Any) -> None:
    recorder = EventRecorder(Unreachable(), "c", attempts=1, patch_delay=0.0)
    with caplog.at_level("WARNING", logger="flotilla.client.events"):
        recorder.event(BINDING, "Normal", EVENT_SYNC_WORK_SUCCEED, "synced")
        await recorder.flush()
        await recorder.close()
    lost = [r for r in caplog.records if "could not write event" in r.getMessage()]
    assert len(lost) == 1 and lost[0].exc_info is None, [(r.getMessage(), r.exc_info) for r in lost]
    assert "connection refused" in lost[0].getMessage()
