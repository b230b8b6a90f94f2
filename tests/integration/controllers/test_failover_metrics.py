"""Failover metrics from the real taint manager and graceful-eviction controller on a real control plane, and the
controller-manager's ``/metrics`` endpoint (in-process, and as the real process on a free or a busy port).

Clusters and a ResourceBinding are written directly, as the cluster-status controller and the scheduler would
leave them (the style of test_taint_manager.py); the test plays the scheduler once the old cluster is evicted.
"""

from __future__ import annotations

import re
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from flotilla.api.resources import CLUSTERS, RESOURCE_BINDINGS
from flotilla.cli.controller_manager import start_metrics_server
from flotilla.observability.metrics import CONTENT_TYPE, ControllerMetrics
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.apiserver import ServerThread
from tests.support.controllers import (
    FLINK_BINDING,
    FLINK_JOB_ALIAS,
    ControlPlane,
    Eventually,
    create_flink_binding,
    plane_with_clusters,
)
from tests.support.metrics import Family, check_histograms, parse_exposition
from tests.support.processes import LoggedProcess

NS = "default"
RB = FLINK_BINDING
ALIAS = FLINK_JOB_ALIAS
NOT_READY = {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}
TM = "taint-manager"

#: Every failover metric the controller-manager declares (Karmada's names first).
FAILOVER_METRICS = [
    "eviction_queue_depth", "eviction_kind_total", "eviction_processing_latency_seconds",
    "eviction_processing_total", "flotilla_eviction_enqueue_to_done_seconds", "flotilla_evictions_total",
    "flotilla_state_preservation_failures_total", "flotilla_state_preservation_timeouts_total",
    "flotilla_taint_to_eviction_seconds", "flotilla_eviction_to_healthy_seconds",
    "flotilla_graceful_eviction_tasks_removed_total", "flotilla_eviction_rate_limit",
    "flotilla_eviction_rate_limiter_mode", "flotilla_clusters_fenced_total",
]
WORKQUEUE_METRICS = ["workqueue_depth", "workqueue_adds_total", "workqueue_retries_total",
                     "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"]


def stamp(t: datetime | None = None) -> str:
    return (t or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


eventually = Eventually(interval=0.03, retry_on=())


def scrape(metrics: ControllerMetrics) -> dict[str, Family]:
    families = parse_exposition(metrics.render())
    check_histograms(families)
    return families


def evictions(metrics: ControllerMetrics, result: str) -> float:
    return metrics.failover.evictions.value("cluster_taint", "TaintUntolerated", result)


@dataclass
class Plane(ControlPlane):
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)

    async def start(self, *controllers: str, **options: Any) -> ControllerManager:
        m = await ControllerManager(self.client, ControllerOptions(**options), controllers=list(controllers),
                                    metrics=self.metrics).start()
        self.managers.append(m)
        return m

    async def taint(self, name: str, *, ago: float = 0.0) -> None:
        added = datetime.now(UTC) - timedelta(seconds=ago)
        await self.client.patch(CLUSTERS, name, {"spec": {"taints": [{**NOT_READY, "timeAdded": stamp(added)}]}})

    async def binding(self, *, job_id: str | None = "c0ffee42") -> None:
        job: dict[str, Any] = {"state": "RUNNING"}
        if job_id is not None:
            job["jobId"] = job_id
        await create_flink_binding(self.client, {"jobStatus": job}, namespace=NS)

    async def get_binding(self) -> dict[str, Any]:
        return dict(await self.client.get(RESOURCE_BINDINGS, RB, NS))

    async def tasks(self) -> list[dict[str, Any]]:
        return (await self.get_binding())["spec"].get("gracefulEvictionTasks") or []

    async def schedule_to(self, cluster: str, health: str) -> None:
        """What the scheduler and the status controllers do after the eviction: the binding moves to ``cluster``."""
        await self.client.patch(RESOURCE_BINDINGS, RB, {"spec": {"clusters": [{"name": cluster, "replicas": 1}]}},
                                namespace=NS)
        rb = await self.get_binding()
        await self.client.patch(RESOURCE_BINDINGS, RB, {"status": {
            "schedulerObservedGeneration": rb["metadata"]["generation"],
            "aggregatedStatus": [{"clusterName": cluster, "applied": True, "health": health}]}},
            namespace=NS, subresource="status")


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    async with plane_with_clusters(tmp_path, Plane, "m1", "m2") as p:
        yield p


# ---------------------------------------------------------------------------------------------- through the registry


async def test_taint_eviction_then_healthy_placement_are_counted_and_timed(plane: Plane) -> None:
    manager = await plane.start(TM, "graceful-eviction")
    await plane.binding()
    # the taint manager evicts from its informer's copy of the binding (as Karmada): wait until the copy has the
    # status the state is extracted from, else the first attempt is (rightly) blocked and retried
    tm = next(c for c in manager.controllers if c.name == TM)

    async def status_cached() -> bool:
        cached = tm.rbs.store.get(f"{NS}/{RB}")
        return bool(cached and (cached.get("status") or {}).get("aggregatedStatus"))

    await eventually(status_cached)
    await plane.taint("m1", ago=30)  # the taint has been there for 30 s: not tolerated, evicted at once

    async def evicted() -> bool:
        return evictions(plane.metrics, "success") == 1

    await eventually(evicted)
    f = plane.metrics.failover
    assert f.taint_to_eviction.count() == 1
    assert 29 <= f.taint_to_eviction.sum() < 60  # timeAdded is in whole seconds
    assert f.eviction_processing_total.value(TM, "success") >= 1
    assert f.eviction_processing_latency.count(TM) >= 1 and f.eviction_enqueue_to_done.count(TM) >= 1
    assert evictions(plane.metrics, "error") == 0 and evictions(plane.metrics, "blocked") == 0

    families = scrape(plane.metrics)
    assert families["flotilla_eviction_rate_limit"].value("flotilla_eviction_rate_limit", name=TM) == 100
    mode = families["flotilla_eviction_rate_limiter_mode"]
    assert mode.value("flotilla_eviction_rate_limiter_mode", name=TM, mode="Primary") == 1
    assert mode.value("flotilla_eviction_rate_limiter_mode", name=TM, mode="Halted") == 0
    assert f.eviction_to_healthy.count("cluster_taint") == 0  # the task waits for the new copy

    tasks = await eventually(plane.tasks)
    assert tasks[0]["fromCluster"] == "m1" and tasks[0]["producer"] == "TaintManager"
    await eventually(lambda: _stamped(plane))  # the graceful-eviction controller stamped creationTimestamp
    await plane.schedule_to("m2", "Healthy")

    async def removed() -> bool:
        return not await plane.tasks()

    await eventually(removed)
    await eventually(lambda: _async(f.tasks_removed.value("cluster_taint", "Healthy") == 1))
    assert f.eviction_to_healthy.count("cluster_taint") == 1
    assert 0 <= f.eviction_to_healthy.sum("cluster_taint") < 10
    assert f.tasks_removed.value("cluster_taint", "Timeout") == 0

    families = scrape(plane.metrics)
    for name in (TM, "graceful-eviction"):
        assert families["workqueue_adds_total"].value("workqueue_adds_total", name=name) >= 1
        assert families["workqueue_work_duration_seconds"].value("workqueue_work_duration_seconds_count",
                                                                  name=name) >= 1


async def _stamped(plane: Plane) -> bool:
    tasks = await plane.tasks()
    return bool(tasks and tasks[0].get("creationTimestamp"))


async def _async(value: Any) -> Any:
    return value


async def test_d6_blocked_eviction_counts_failures_then_the_timeout(plane: Plane) -> None:
    await plane.start(TM, state_preservation_timeout=1.5)
    await plane.binding(job_id=None)  # no jobId in the reflected status: the state cannot be extracted
    await plane.taint("m1")
    f = plane.metrics.failover

    await eventually(lambda: _async(evictions(plane.metrics, "blocked") >= 1))
    assert f.state_preservation_failures.value("cluster_taint") >= 1
    assert evictions(plane.metrics, "success") == 0 and f.state_preservation_timeouts.value("cluster_taint") == 0
    families = scrape(plane.metrics)
    pending = families["eviction_kind_total"]  # the blocked key waits in the queue for its retry
    assert pending.value("eviction_kind_total", member_cluster="m1", resource_kind="ResourceBinding") == 1

    await eventually(lambda: _async(evictions(plane.metrics, "success") == 1), timeout=15)
    assert f.state_preservation_timeouts.value("cluster_taint") == 1
    assert f.state_preservation_failures.value("cluster_taint") >= 2  # every failed attempt counts (D6)
    assert (await plane.tasks())[0].get("preservedLabelState") is None


async def test_halted_evictions_show_in_the_rate_limiter_gauges(plane: Plane) -> None:
    await plane.start(TM)
    await plane.binding()
    for name in ("m1", "m2"):
        await plane.set_ready(name, "False")
    await plane.taint("m1")

    async def halted() -> bool:
        families = scrape(plane.metrics)
        mode = families["flotilla_eviction_rate_limiter_mode"]
        return any(ls == {"name": TM, "mode": "Halted"} and v == 1 for _, ls, v in mode.samples)

    await eventually(halted)
    families = scrape(plane.metrics)
    assert families["flotilla_eviction_rate_limit"].value("flotilla_eviction_rate_limit", name=TM) == 0
    assert families["eviction_kind_total"].value("eviction_kind_total", member_cluster="m1",
                                                 resource_kind="ResourceBinding") == 1
    assert evictions(plane.metrics, "success") == 0
    assert await plane.tasks() == []


async def test_a_stopped_manager_forgets_live_gauges_and_keeps_its_counters(plane: Plane) -> None:
    manager = await plane.start(TM)
    await plane.binding()
    await plane.taint("m1")
    await eventually(lambda: _async(evictions(plane.metrics, "success") == 1))
    assert scrape(plane.metrics)["eviction_queue_depth"].samples != []
    await manager.stop()
    families = scrape(plane.metrics)
    for name in ("eviction_queue_depth", "eviction_kind_total", "flotilla_eviction_rate_limit",
                 "flotilla_eviction_rate_limiter_mode"):
        assert families[name].samples == [], name
    assert evictions(plane.metrics, "success") == 1
    # the next leadership term records into the same counters
    await plane.start(TM)
    assert scrape(plane.metrics)["eviction_queue_depth"].value("eviction_queue_depth", name=TM) == 0
    assert evictions(plane.metrics, "success") == 1


# ---------------------------------------------------------------------------------------------- over HTTP


async def test_metrics_endpoint_serves_the_failover_metrics_in_the_text_format(plane: Plane) -> None:
    await plane.start(TM, "graceful-eviction")
    server = await start_metrics_server(plane.metrics, ("127.0.0.1", 0))
    assert server is not None and server.port != 0
    try:
        await plane.binding()
        await plane.taint("m1", ago=5)
        await eventually(lambda: _async(evictions(plane.metrics, "success") == 1))
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{server.url}/metrics") as resp:
                assert resp.status == 200
                assert resp.headers["Content-Type"] == CONTENT_TYPE
                text = await resp.text()
            async with http.get(f"{server.url}/healthz") as resp:
                assert resp.status == 200 and await resp.text() == "ok"
            async with http.get(f"{server.url}/nothing") as resp:
                assert resp.status == 404
        families = parse_exposition(text)
        check_histograms(families)
        for name in FAILOVER_METRICS + WORKQUEUE_METRICS:
            assert name in families and families[name].help, name
        assert families["flotilla_evictions_total"].value(
            "flotilla_evictions_total", trigger="cluster_taint", reason="TaintUntolerated", result="success") == 1
        assert families["flotilla_taint_to_eviction_seconds"].value("flotilla_taint_to_eviction_seconds_count") == 1
    finally:
        await server.stop()


# ---------------------------------------------------------------------------------------------- the real process


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(tmp_path_factory.mktemp("metrics-cm")).start()
    yield srv
    srv.stop()


class Process(LoggedProcess):
    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output())
            if found:
                return found
            assert self.popen.poll() is None, f"exited {self.popen.returncode}:\n{self.output()}"
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} within {timeout}s:\n{self.output()}")

    def terminate(self) -> int:
        self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(15)


@pytest.fixture
def start_cm(api: ServerThread, tmp_path: Path) -> Iterator[Callable[..., Process]]:
    started: list[Process] = []

    def start(*extra: str) -> Process:
        started.append(Process.start([sys.executable, "-m", "flotilla.cli.controller_manager", "--kubeconfig",
                                      str(api.kubeconfig), "--controllers", "taint-manager,graceful-eviction",
                                      *extra], tmp_path / f"cm-{len(started)}.log"))
        return started[-1]

    yield start
    for p in started:
        p.kill()


def test_controller_manager_process_serves_metrics_on_the_bind_address(start_cm: Callable[..., Process]) -> None:
    cm = start_cm("--metrics-bind-address", "127.0.0.1:0")
    url = cm.wait_for(r"serving metrics on (http://127\.0\.0\.1:\d+)/metrics").group(1)
    cm.wait_for("started 2 controllers")
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"] == CONTENT_TYPE
        families = parse_exposition(resp.read().decode())
    check_histograms(families)
    for name in FAILOVER_METRICS + WORKQUEUE_METRICS:
        assert name in families, name
    mode = families["flotilla_eviction_rate_limiter_mode"]
    assert mode.value("flotilla_eviction_rate_limiter_mode", name=TM, mode="Primary") == 1
    with urllib.request.urlopen(f"{url}/healthz", timeout=10) as resp:
        assert resp.read() == b"ok"
    assert cm.terminate() == 0, cm.output()


def test_a_busy_metrics_port_is_reported_and_the_controller_manager_runs_on(
        start_cm: Callable[..., Process]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cm = start_cm("--metrics-bind-address", f"127.0.0.1:{port}")
        cm.wait_for(rf"cannot serve metrics on 127\.0\.0\.1:{port} .*running without metrics")
        cm.wait_for("started 2 controllers")
        time.sleep(0.3)
        assert cm.popen.poll() is None, cm.output()
        assert "serving metrics" not in cm.output()
        assert cm.terminate() == 0, cm.output()


def test_metrics_can_be_disabled(start_cm: Callable[..., Process]) -> None:
    cm = start_cm("--metrics-bind-address", "0")
    cm.wait_for("started 2 controllers")
    assert "metrics" not in cm.output()
    assert cm.terminate() == 0, cm.output()


def test_metrics_bind_address_flag_defaults_and_usage_errors() -> None:
    from flotilla.cli.controller_manager import build_parser, config_from_args

    parser = build_parser()
    assert config_from_args(parser.parse_args([])).metrics_address == ("127.0.0.1", 8080)
    assert config_from_args(parser.parse_args(["--metrics-bind-address", "0"])).metrics_address is None
    assert config_from_args(parser.parse_args(["--metrics-bind-address=:9100"])).metrics_address == ("0.0.0.0", 9100)
    with pytest.raises(ValueError, match="--metrics-bind-address"):
        config_from_args(parser.parse_args(["--metrics-bind-address", "localhost"]))
    assert "--metrics-bind-address" in parser.format_help()


async def test_the_manager_s_forward_first_waits_reach_its_metrics(plane: Plane) -> None:
    manager = await plane.start("taint-manager", "graceful-eviction")
    assert manager.ctx is not None
    told = manager.ctx.forward_first.on_wait
    assert told is not None
    told("cleanup", 1.5)  # what a clean-up pass that waited tells
    families = scrape(plane.metrics)
    assert families["flotilla_forward_first_waits_total"].value("flotilla_forward_first_waits_total",
                                                                role="cleanup") == 1
    assert families["flotilla_forward_first_wait_seconds_total"].value(
        "flotilla_forward_first_wait_seconds_total", role="cleanup") == 1.5
