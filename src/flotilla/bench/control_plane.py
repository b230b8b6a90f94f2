"""``flotilla bench control-plane``: the control plane alone in one process, for ``flotilla bench failover``.

What ``flotilla up`` runs (:class:`~flotilla.local.stack.LocalStack`) without the members: the API server on the
given storage and every controller of the controller-manager, which call it through the in-process transport (as
``flotilla up`` does; ``--transport http`` for its URL instead, as a separate controller-manager would). Running
alone, its CPU time and peak RSS are its own (``/proc/<pid>``).

Controller flags come after ``--`` with the controller-manager's names and syntax (``-- --concurrent-syncs 10
--resource-eviction-rate 1000``), parsed and validated by ``flotilla controller-manager``'s own parser.
Without them the bench timings apply (:data:`BENCH_TIMINGS`: a dead member is Ready=False 1-2 s after its
probes start failing).

It serves ``/metrics`` on its own port: the controllers' metrics plus

* ``flotilla_bench_apiserver_writes_total{resource, event}``: every write the API server made (ADDED, MODIFIED,
  DELETED; one per store revision), counted by an ``after_write`` hook;
* ``flotilla_bench_store_revision``: the newest revision the API server wrote;
* ``flotilla_bench_sqlite_transactions`` / ``flotilla_bench_sqlite_rows``: with SQLite, how the writes were grouped;
* ``flotilla_bench_events{outcome}``: the Event recorder's created / aggregated / dropped / failed counts.

With ``--floor`` it runs the forward-path floor (:mod:`flotilla.bench.floor`, for ``flotilla bench propagate
--floor``) in place of the propagation controllers, beside the cluster and cluster-status controllers only.

Once serving it prints one line on stdout::

    flotilla bench control-plane: serving URL (kubeconfig: PATH) metrics URL pid PID
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from flotilla.signals import run_until_stopped

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger(__name__)

__all__ = ["BENCH_TIMINGS", "READY_LINE", "add_control_plane_parser", "run_control_plane_command"]

#: Controller-manager timings for the benchmark (durations in Go syntax), before any flag given after ``--``:
#: ``flotilla up``'s probe period (1 s; every probe LISTs each member's nodes and pods, so a shorter one costs
#: CPU that grows with the workloads), failure and success thresholds of 1 s (a dead member is Ready=False
#: 1-2 s after it stops answering), ``flotilla up``'s graceful-eviction timeout.
BENCH_TIMINGS: Final[tuple[str, ...]] = (
    "--cluster-status-update-frequency", "1s",
    "--cluster-success-threshold", "1s",
    "--cluster-failure-threshold", "1s",
    "--graceful-eviction-timeout", "2m",
)
READY_LINE: Final = "flotilla bench control-plane: serving"


def add_control_plane_parser(sub: Any) -> None:
    p = sub.add_parser("control-plane", help="(internal) the API server and every controller in one process, "
                                             "for `flotilla bench failover`",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example (what `flotilla bench failover` starts):\n"
                              "  flotilla bench control-plane --data-dir /tmp/cp -- --concurrent-syncs=20")
    p.add_argument("--data-dir", required=True, help="where the database and kubeconfig go")
    p.add_argument("--storage", default="sqlite://", help="memory://, sqlite:// or etcd://host:port")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="API port (0: a free one)")
    p.add_argument("--transport", choices=("http", "inprocess"), default="inprocess",
                   help="how the controllers reach the API server (default inprocess, as `flotilla up`)")
    p.add_argument("--floor", action="store_true",
                   help="run the forward-path floor (flotilla.bench.floor) in place of the propagation "
                        "controllers: only the cluster and cluster-status controllers beside it")
    p.add_argument("controller_flags", nargs=argparse.REMAINDER,
                   help="after --: controller-manager flags (e.g. -- --resource-eviction-rate 1000)")


def controller_config(flags: list[str], kubeconfig: str) -> Any:
    """The controller-manager's Config for ``BENCH_TIMINGS`` + ``flags`` (ValueError on a bad flag)."""
    from flotilla.cli import controller_manager as cm

    rest = [f for f in flags if f != "--"] if flags[:1] == ["--"] else list(flags)
    parser = cm.build_parser()
    parser.exit_on_error = False
    try:
        args = parser.parse_args(["--kubeconfig", kubeconfig, "--metrics-bind-address", "0",
                                  *BENCH_TIMINGS, *rest])
    except (argparse.ArgumentError, SystemExit) as e:
        raise ValueError(f"bad controller-manager flags {rest}: {e}") from None
    return cm.config_from_args(args)


class WriteCounter:
    """Counts the API server's writes by resource and event into a metrics registry (an ``after_write`` hook),
    and keeps the newest revision written (``flotilla_bench_store_revision``)."""

    def __init__(self, registry: Any) -> None:
        self.counter = registry.counter("flotilla_bench_apiserver_writes_total",
                                        "Writes made by the API server (one store revision each)",
                                        ["resource", "event"])
        self.revision = registry.gauge("flotilla_bench_store_revision", "The newest revision the API server wrote")
        self._children: dict[tuple[str, str], Any] = {}
        self._newest = 0

    def __call__(self, rt: Any, event: str, obj: dict[str, Any]) -> None:
        key = (str(getattr(rt, "plural", "?")), event)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.counter.labels(*key)
        child.inc()
        try:
            rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
        except (TypeError, ValueError):
            return
        if rv > self._newest:
            self._newest = rv
            self.revision.set(float(rv))


def store_gauges(registry: Any, store: Any) -> Any:
    """A collector keeping SQLite's grouping of writes into transactions in gauges; returns it."""
    transactions = registry.gauge("flotilla_bench_sqlite_transactions", "SQLite transactions committed")
    rows = registry.gauge("flotilla_bench_sqlite_rows", "Rows SQLite appended")

    def collect() -> None:
        if isinstance(getattr(store, "transactions", None), int):
            transactions.set(float(store.transactions))
            rows.set(float(store.writes))

    registry.add_collector(collect)
    return collect


def recorder_gauges(registry: Any, manager: Any) -> None:
    """``flotilla_bench_events{outcome}``: the controller-manager's Event recorder's counts (created, aggregated,
    dropped: its queue was full, failed)."""
    gauge = registry.gauge("flotilla_bench_events", "Events the controller-manager's recorder handled", ["outcome"])

    def collect() -> None:
        recorder = getattr(getattr(manager, "ctx", None), "recorder", None)
        for outcome in ("created", "aggregated", "dropped", "failed"):
            value = getattr(recorder, outcome, None)
            if isinstance(value, int):
                gauge.labels(outcome).set(float(value))

    registry.add_collector(collect)


#: the controllers ``--floor`` keeps: members join and become Ready; nothing else propagates
FLOOR_CONTROLLERS: Final = ("cluster", "cluster-status")


async def run_control_plane(data_dir: Path, storage_url: str, host: str, port: int, transport: str,
                            flags: list[str], stop: asyncio.Event, floor: bool = False) -> int:
    from flotilla.apiserver.gctune import tune_gc
    from flotilla.apiserver.inprocess import in_process_client
    from flotilla.apiserver.server import ApiServer, ApiServerConfig
    from flotilla.client import Client
    from flotilla.observability.metrics import ControllerMetrics, MetricsServer
    from flotilla.runtime.manager import ControllerManager

    # plain http, as the benchmarks' members (bench.harness.MEMBER_ARGS): Flotilla's work is measured, not TLS
    api = ApiServer(ApiServerConfig(storage_url=storage_url, data_dir=data_dir, host=host, port=port,
                                    context_name="flotilla", secure=False))
    await api.start()
    client = None
    manager = None
    server = None
    forward_floor = None
    try:
        assert api.kubeconfig_path is not None and api.storage is not None
        cfg = controller_config(flags, str(api.kubeconfig_path))
        metrics = ControllerMetrics()
        api.storage.after_write.append(WriteCounter(metrics.registry))
        store_gauges(metrics.registry, api.store)
        server = await MetricsServer(metrics.registry, "127.0.0.1", 0).start()
        client = in_process_client(api.storage) if transport == "inprocess" else \
            Client.from_kubeconfig(str(api.kubeconfig_path))
        controllers = list(FLOOR_CONTROLLERS) if floor else cfg.controllers
        manager = ControllerManager(client, cfg.options, controllers=controllers, metrics=metrics)
        await manager.start()
        if floor:
            from flotilla.bench.floor import ForwardFloor

            assert manager.ctx is not None
            forward_floor = ForwardFloor(client, manager.ctx.members, metrics.registry)
            forward_floor.start()
        recorder_gauges(metrics.registry, manager)
        tune_gc()  # as `flotilla up` and `flotilla apiserver` do once started
        print(f"{READY_LINE} {api.url} (kubeconfig: {api.kubeconfig_path}) metrics {server.url} pid {os.getpid()}",
              flush=True)
        await stop.wait()
        return 0
    finally:
        if forward_floor is not None:
            with contextlib.suppress(Exception):
                await forward_floor.stop()
        if manager is not None:
            with contextlib.suppress(Exception):
                await manager.stop()
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if server is not None:
            await server.stop()
        await api.stop()


def run_control_plane_command(args: argparse.Namespace) -> int:
    try:
        return run_until_stopped(lambda stop: run_control_plane(
            Path(args.data_dir), args.storage, args.host, args.port, args.transport,
            list(args.controller_flags or []), stop, floor=args.floor))
    except ValueError as e:
        print(f"flotilla bench control-plane: {e}", flush=True)
        return 2
