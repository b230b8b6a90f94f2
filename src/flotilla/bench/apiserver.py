"""``flotilla bench apiserver``: store and API server throughput, latency and watch delivery.

For each backend (memory, sqlite, etcd):

1. **store** - the Store API in this process: ``--store-writes`` creates of ~2 KB JSON values
   from 200 concurrent tasks (no watchers), then one compare-and-swap update of every key while
   4 watchers on the prefix receive every event (write-to-receipt latency under load), then 200
   sequential updates (write-to-receipt latency of a lone writer).
2. **http** - a ``flotilla apiserver`` on that backend in a separate process (a subprocess on a
   free port, so the load generator does not share its interpreter, GIL or CPU accounting) and
   ``--concurrency`` clients, each its own aiohttp client with one connection: POST
   ``--objects`` ConfigMaps of ~2 KB, GET each, PUT each (optimistic concurrency, with a watch
   opened before the PUTs that must receive every update), and LIST the namespace.

Latencies are from issuing a request (or a store call) to its answer, or to the moment the
watcher got the event. The memory store's writes never suspend, so its "200 tasks" run one after
the other and its watchers only run once the writers yield: its under-load watch latency is about
the length of the phase. HTTP watch events/s is events received / (last receipt - first PUT).
CPU is the user+system time of each process during a phase divided by the phase's wall time
(1.0 = one core busy); ``irq`` is interrupt/softirq time (loopback TCP) and ``other`` is every
other process on the machine, which tells whether something else competed for the cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import re
import secrets
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import aiohttp
import orjson

from flotilla.bench.harness import CpuWindow
from flotilla.bench.stats import percentile
from flotilla.signals import cancel_all, wait_or_kill
from flotilla.storage import ConflictError, Store, open_store

STORE_TASKS = 200  # concurrent tasks writing to the store
STORE_WATCHERS = 4  # watchers on the prefix during the CAS update phase
IDLE_WRITES = 200  # sequential updates for the lone-writer watch latency
LIST_RUNS = 3  # LIST the namespace this many times, report the fastest and the median
VALUE_BYTES = 2048
WATCH_TIMEOUT = 60.0  # how long to wait for watchers to catch up after the writes
SERVER_START_TIMEOUT = 60.0
ALL_BACKENDS = ("memory", "sqlite", "etcd")
SERVER_MODE = "subprocess: `python -m flotilla.main apiserver --port 0` (one process per backend)"


# --------------------------------------------------------------------------------------- helpers


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


def _latency(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": _ms(percentile(samples, 50)), "p99_ms": _ms(percentile(samples, 99)),
            "max_ms": _ms(max(samples, default=0.0))}


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def _value_template(tag: str) -> tuple[bytes, bytes]:
    head = orjson.dumps({"kind": "Bench", "labels": {"app": "bench"}, "tag": tag, "index": ""})[:-2]
    tail = b'","pad":"' + b"x" * (VALUE_BYTES - len(head) - 8 - 11) + b'"}'
    return head, tail  # head + b"%08d" % i + tail is VALUE_BYTES long


_TEMPLATES: dict[str, tuple[bytes, bytes]] = {}


def make_value(i: int, tag: str = "c") -> bytes:
    """A JSON document of VALUE_BYTES bytes, distinct per ``i`` and ``tag`` (cheap: no serializer)."""
    template = _TEMPLATES.get(tag)
    if template is None:
        template = _TEMPLATES[tag] = _value_template(tag)
    return template[0] + b"%08d" % i + template[1]


def configmap(i: int, namespace: str) -> dict[str, Any]:
    """A ConfigMap of ~2 KB."""
    data = {f"key{k}": f"value-{i}-{k}-" + "y" * 180 for k in range(10)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i:06d}", "namespace": namespace, "labels": {"app": "bench", "shard": str(i % 16)}},
        "data": data,
    }


async def _run_workers(count: int, workers: int, work: Callable[[int], Awaitable[None]]) -> float:
    """Run ``work(i)`` for every i in range(count) from ``workers`` concurrent tasks; return the wall time."""
    indices: Iterator[int] = iter(range(count))

    async def worker() -> None:
        for i in indices:  # a shared iterator: each index is taken by exactly one worker
            await work(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(max(1, min(workers, count)))))
    return time.perf_counter() - t0


@dataclass
class WatchTally:
    """What one watcher received: a count and write-to-receipt latencies."""

    expected: int
    received: int = 0
    latencies: list[float] = field(default_factory=list)
    first: float = 0.0
    last: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    _want: int = 0
    _waiter: asyncio.Future[None] | None = None

    def record(self, issued_at: float | None) -> None:
        now = time.perf_counter()
        if issued_at is not None:
            self.latencies.append(now - issued_at)
        if not self.received:
            self.first = now
        self.last = now
        self.received += 1
        if self.received >= self.expected:
            self.done.set()
        if self._waiter is not None and self.received >= self._want and not self._waiter.done():
            self._waiter.set_result(None)

    async def reach(self, count: int) -> None:
        """Return once ``count`` events were received."""
        if self.received >= count:
            return
        self._want = count
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


async def _wait_all(tallies: list[WatchTally]) -> None:
    """Wait (at most WATCH_TIMEOUT) until every watcher got what it expected."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(WATCH_TIMEOUT):
            await asyncio.gather(*(t.done.wait() for t in tallies))


# --------------------------------------------------------------------------------------- store phase


async def _store_watchers(store: Store, prefix: str, count: int, expected: int,
                          issued: dict[str, float]) -> tuple[list[WatchTally], list[asyncio.Task[None]]]:
    tallies = [WatchTally(expected) for _ in range(count)]
    tasks = []
    for tally in tallies:
        watcher = await store.watch(prefix)

        async def consume(watcher: Any = watcher, tally: WatchTally = tally) -> None:
            try:
                async for ev in watcher:
                    tally.record(issued.get(ev.key))
                    if tally.received >= tally.expected:
                        break
            finally:
                await watcher.close()

        tasks.append(asyncio.create_task(consume()))
    return tallies, tasks


async def _finish_watchers(tallies: list[WatchTally], tasks: list[asyncio.Task[None]]) -> None:
    await _wait_all(tallies)
    await cancel_all(tasks)


def _watch_summary(tallies: list[WatchTally]) -> dict[str, Any]:
    lat = [x for t in tallies for x in t.latencies]
    return {"watchers": len(tallies), "expected": tallies[0].expected if tallies else 0,
            "received": [t.received for t in tallies], **_latency(lat)}


async def store_phase(store: Store, n: int, *, tasks: int = STORE_TASKS, watchers: int = STORE_WATCHERS,
                      idle_writes: int = IDLE_WRITES) -> dict[str, Any]:
    """Creates (no watchers), CAS updates (with watchers), then sequential updates (with watchers)."""
    prefix = f"/flotilla-bench/{secrets.token_hex(4)}/"
    keys = [f"{prefix}k{i:07d}" for i in range(n)]
    revisions = [0] * n
    errors: list[str] = []
    lat: list[float] = []

    async def create(i: int) -> None:
        t0 = time.perf_counter()
        try:
            revisions[i] = await store.create(keys[i], make_value(i))
        except Exception as exc:  # reported, not raised: one failure should not hide the rest
            errors.append(f"create {keys[i]}: {exc!r}")
            return
        lat.append(time.perf_counter() - t0)

    wall = await _run_workers(n, tasks, create)
    result: dict[str, Any] = {"tasks": tasks, "value_bytes": len(make_value(0))}
    result["creates"] = {"count": n, "seconds": round(wall, 3), "per_second": _rate(len(lat), wall),
                         **_latency(lat), "errors": len(errors)}
    _db_stats(store, result["creates"])

    # CAS updates of every key with W watchers on the prefix.
    issued: dict[str, float] = {}
    tallies, consumers = await _store_watchers(store, prefix, watchers, n, issued)
    lat = []
    conflicts = 0

    async def update(i: int) -> None:
        nonlocal conflicts
        t0 = issued[keys[i]] = time.perf_counter()
        try:
            revisions[i] = await store.update(keys[i], make_value(i, "u"), revisions[i])
        except ConflictError:
            conflicts += 1
            return
        except Exception as exc:
            errors.append(f"update {keys[i]}: {exc!r}")
            return
        lat.append(time.perf_counter() - t0)

    wall = await _run_workers(n, tasks, update)
    await _finish_watchers(tallies, consumers)
    result["updates"] = {"count": n, "seconds": round(wall, 3), "per_second": _rate(len(lat), wall), **_latency(lat),
                         "conflicts": conflicts, "errors": len(errors) - result["creates"]["errors"]}
    result["watch_under_load"] = _watch_summary(tallies)

    # A lone writer: each write waits until every watcher has its event, so this is the latency of
    # commit + fan-out + wake-up, without queueing behind other writers.
    m = min(idle_writes, n)
    issued = {}
    tallies, consumers = await _store_watchers(store, prefix, watchers, m, issued)
    for i in range(m):
        issued[keys[i]] = time.perf_counter()
        try:
            revisions[i] = await store.update(keys[i], make_value(i, "i"), revisions[i])
        except Exception as exc:
            errors.append(f"idle update {keys[i]}: {exc!r}")
            break
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WATCH_TIMEOUT):
                await asyncio.gather(*(t.reach(i + 1) for t in tallies))
    await _finish_watchers(tallies, consumers)
    result["watch_idle"] = _watch_summary(tallies)
    result["errors"] = errors[:5]
    return result


def _db_stats(store: Store, into: dict[str, Any]) -> None:
    """For the SQLite store: how many writes each transaction grouped."""
    transactions = getattr(store, "transactions", None)
    writes = getattr(store, "writes", None)
    if isinstance(transactions, int) and isinstance(writes, int) and transactions:
        into["transactions"] = transactions
        into["writes_per_transaction"] = round(writes / transactions, 1)


# --------------------------------------------------------------------------------------- API server


class ServerProcess:
    """``flotilla apiserver --insecure`` in a subprocess on a free port: the benchmark's HTTP phase measures the
    storage backends through plain HTTP clients, the same for each backend."""

    def __init__(self, storage_url: str, data_dir: Path) -> None:
        self.storage_url = storage_url
        self.data_dir = data_dir
        self.command = [sys.executable, "-m", "flotilla.main", "apiserver", "--insecure", "--storage", storage_url,
                        "--data-dir", str(data_dir), "--port", "0"]
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""
        self.log_path = data_dir / "apiserver.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self) -> None:
        log = self._open_log()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log,
                start_new_session=True)
        finally:
            log.close()  # the child has its own copy
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(SERVER_START_TIMEOUT):
                while True:
                    line = await self.proc.stdout.readline()
                    if not line:
                        raise RuntimeError(f"apiserver exited ({await self.proc.wait()}): {self._log_tail()}")
                    found = re.search(rb"serving (https?://\S+)", line)
                    if found:
                        self.url = found.group(1).decode()
                        break
        except TimeoutError:
            await self.stop()
            raise RuntimeError(f"apiserver did not start in {SERVER_START_TIMEOUT:.0f}s: {self._log_tail()}") from None
        except BaseException:
            await self.stop()
            raise

    def _open_log(self) -> BinaryIO:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return open(self.log_path, "wb")  # handed to the child; start() closes ours

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
        except OSError:
            return "<no log>"

    async def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGINT)  # KeyboardInterrupt: the server closes its store cleanly
        await wait_or_kill(proc, 15)


def _check(status: int, body: bytes, want: int, what: str) -> None:
    if status != want:
        raise RuntimeError(f"{what}: HTTP {status} (wanted {want}): {body[:300]!r}")


async def http_phase(base_url: str, n: int, concurrency: int, namespace: str,
                     pids: dict[str, int]) -> dict[str, Any]:
    """POST, GET, PUT (watched) and LIST ``n`` ConfigMaps with ``concurrency`` clients."""
    clients = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1, keepalive_timeout=300),
                                     timeout=aiohttp.ClientTimeout(total=120))
               for _ in range(max(1, min(concurrency, n)))]
    watch_client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=None))
    json_headers = {"Content-Type": "application/json", "Accept": "application/json"}
    base = f"{base_url}/api/v1/namespaces/{namespace}/configmaps"
    errors: list[str] = []
    result: dict[str, Any] = {"namespace": namespace, "clients": len(clients)}
    try:
        async with clients[0].post(f"{base_url}/api/v1/namespaces", headers=json_headers,
                                   data=orjson.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": namespace}})) as resp:
            _check(resp.status, await resp.read(), 201, f"create namespace {namespace}")

        async def phase(name: str, work: Callable[[aiohttp.ClientSession, int], Awaitable[None]],
                        extra: dict[str, Any] | None = None) -> float:
            lat: list[float] = []
            indices = iter(range(n))

            async def worker(client: aiohttp.ClientSession) -> None:
                for i in indices:
                    t0 = time.perf_counter()
                    try:
                        await work(client, i)
                    except Exception as exc:
                        errors.append(f"{name} {i}: {exc}")
                        continue
                    lat.append(time.perf_counter() - t0)

            cpu = CpuWindow(pids)
            t0 = time.perf_counter()
            await asyncio.gather(*(worker(s) for s in clients))  # one client per worker
            wall = time.perf_counter() - t0
            result[name] = {"count": n, "seconds": round(wall, 3), "per_second": _rate(len(lat), wall),
                            **_latency(lat), "errors": n - len(lat), "cpu_cores": cpu.stop().cores, **(extra or {})}
            return wall

        bodies = [orjson.dumps(configmap(i, namespace)) for i in range(n)]
        result["object_bytes"] = len(bodies[0])
        rvs = [0] * n

        async def post(client: aiohttp.ClientSession, i: int) -> None:
            async with client.post(base, data=bodies[i], headers=json_headers) as resp:
                body = await resp.read()
                _check(resp.status, body, 201, "POST")
            rvs[i] = int(orjson.loads(body)["metadata"]["resourceVersion"])

        await phase("creates", post)

        objects: list[dict[str, Any]] = [{} for _ in range(n)]

        async def get(client: aiohttp.ClientSession, i: int) -> None:
            async with client.get(f"{base}/cm-{i:06d}", headers=json_headers) as resp:
                body = await resp.read()
                _check(resp.status, body, 200, "GET")
            objects[i] = orjson.loads(body)

        await phase("gets", get)

        # The watcher: opened (response headers received, so registered) before the first PUT.
        issued: dict[str, float] = {}
        tally = WatchTally(n)
        start_rv = max(rvs, default=0)
        watch_resp = await watch_client.get(f"{base}?watch=1&resourceVersion={start_rv}&timeoutSeconds=600")
        _check(watch_resp.status, b"", 200, "WATCH")
        kinds: dict[str, int] = {}

        async def read_watch() -> None:
            try:
                while tally.received < n:
                    line = await watch_resp.content.readline()
                    if not line:
                        break
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    kinds[event["type"]] = kinds.get(event["type"], 0) + 1
                    if event["type"] == "MODIFIED":
                        tally.record(issued.get(event["object"]["metadata"]["name"]))
            finally:
                tally.done.set()

        reader = asyncio.create_task(read_watch())

        async def put(client: aiohttp.ClientSession, i: int) -> None:
            obj = objects[i]
            obj["data"]["key0"] = f"updated-{i}"
            data = orjson.dumps(obj)
            issued[obj["metadata"]["name"]] = time.perf_counter()
            async with client.put(f"{base}/cm-{i:06d}", data=data, headers=json_headers) as resp:
                body = await resp.read()
                _check(resp.status, body, 200, "PUT")

        updates_started = time.perf_counter()
        await phase("updates", put)
        updates_ended = time.perf_counter()
        await _wait_all([tally])
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        watch_resp.close()
        span = (tally.last - updates_started) if tally.received else 0.0
        result["watch"] = {
            "expected": n, "received": tally.received, "event_types": kinds,
            "per_second": _rate(tally.received, span),
            "lag_after_last_update_ms": _ms(max(0.0, tally.last - updates_ended)) if tally.received else None,
            **_latency(tally.latencies),
        }

        # LIST the whole namespace a few times.
        runs: list[float] = []
        items = -1
        cpu = CpuWindow(pids)
        for _ in range(LIST_RUNS):
            t0 = time.perf_counter()
            async with clients[0].get(base, headers=json_headers) as resp:
                body = await resp.read()
                _check(resp.status, body, 200, "LIST")
            runs.append(time.perf_counter() - t0)
            items = len(orjson.loads(body)["items"])
        result["list"] = {"items": items, "bytes": len(body), "best_ms": _ms(min(runs)),
                          "median_ms": _ms(sorted(runs)[len(runs) // 2]), "runs": LIST_RUNS,
                          "cpu_cores": cpu.stop().cores}
    finally:
        await watch_client.close()
        for s in clients:
            await s.close()
    result["errors"] = errors[:5]
    return result


# --------------------------------------------------------------------------------------- driver


@dataclass
class BenchParams:
    backends: list[str]
    objects: int
    concurrency: int
    store_writes: int
    output: str


def _params(args: argparse.Namespace) -> BenchParams:
    backends = [b.strip() for b in str(getattr(args, "backends", ",".join(ALL_BACKENDS))).split(",") if b.strip()]
    unknown = [b for b in backends if b not in ALL_BACKENDS]
    if unknown:
        raise SystemExit(f"flotilla bench: unknown backend(s) {', '.join(unknown)}; use {','.join(ALL_BACKENDS)}")
    return BenchParams(backends=backends, objects=int(getattr(args, "objects", 2000)),
                       concurrency=int(getattr(args, "concurrency", 32)),
                       store_writes=int(getattr(args, "store_writes", 20000)),
                       output=str(getattr(args, "output", "") or ""))


def command_line(p: BenchParams) -> str:
    """The complete command line (every option spelled out) that reproduces this run."""
    cmd = ["flotilla", "bench", "apiserver", "--backends", ",".join(p.backends), "--objects", str(p.objects),
           "--concurrency", str(p.concurrency), "--store-writes", str(p.store_writes)]
    if p.output:
        cmd += ["--output", p.output]
    return shlex.join(cmd)


def machine_info() -> dict[str, Any]:
    return {"nproc": os.cpu_count(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "aiohttp": aiohttp.__version__, "orjson": orjson.__version__}


async def bench_backend(backend: str, p: BenchParams, workdir: Path) -> dict[str, Any]:
    from flotilla.storage.etcd_launcher import EtcdNotFoundError, start_etcd

    etcd = None
    out: dict[str, Any] = {}
    pids = {"bench": os.getpid()}
    try:
        if backend == "etcd":
            try:
                etcd = await asyncio.to_thread(start_etcd, workdir / "etcd")
            except EtcdNotFoundError as exc:
                return {"skipped": str(exc)}
            url = f"etcd://{etcd.endpoint}"
            pids["etcd"] = etcd.pid
            out["etcd"] = {"endpoint": etcd.endpoint, "fsync": True}
        elif backend == "sqlite":
            url = "sqlite://"
        else:
            url = "memory://"
        _say(f"[{backend}] store: {p.store_writes} creates + CAS updates from {STORE_TASKS} tasks ...")
        store = await open_store(url, workdir / f"store-{backend}")
        cpu = CpuWindow(pids)
        try:
            out["store"] = await store_phase(store, p.store_writes)
        finally:
            await store.close()
        out["store"]["cpu_cores"] = cpu.stop().cores

        _say(f"[{backend}] http: {p.objects} ConfigMaps x POST/GET/PUT/LIST, {p.concurrency} clients ...")
        server = ServerProcess(url, workdir / f"apiserver-{backend}")
        await server.start()
        try:
            namespace = f"bench-{backend}-{secrets.token_hex(3)}"
            out["http"] = await http_phase(server.url, p.objects, p.concurrency, namespace,
                                           {**pids, "apiserver": server.pid})
            out["http"]["server"] = {"mode": "subprocess", "command": shlex.join(server.command), "url": server.url}
        finally:
            await server.stop()
    finally:
        if etcd is not None:
            await asyncio.to_thread(etcd.stop)
    return out


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def problems(results: dict[str, Any]) -> list[str]:
    """Errors and missing watch events in a result document (empty when the run was clean)."""
    found: list[str] = []
    for backend, r in results["backends"].items():
        if "skipped" in r:
            continue
        if "error" in r:
            found.append(f"{backend}: {r['error']}")
            continue
        s, h = r["store"], r["http"]
        for phase in ("creates", "updates"):
            if s[phase]["errors"] or s[phase].get("conflicts"):
                found.append(f"{backend}: store {phase}: {s[phase]['errors']} errors, "
                             f"{s[phase].get('conflicts', 0)} conflicts {s['errors']}")
        for w in ("watch_under_load", "watch_idle"):
            if any(got != s[w]["expected"] for got in s[w]["received"]):
                found.append(f"{backend}: store {w}: received {s[w]['received']} of {s[w]['expected']}")
        for phase in ("creates", "gets", "updates"):
            if h[phase]["errors"]:
                found.append(f"{backend}: http {phase}: {h[phase]['errors']} errors {h['errors']}")
        if h["watch"]["received"] != h["updates"]["count"]:
            found.append(f"{backend}: http watch received {h['watch']['received']} of {h['updates']['count']}")
        if h["list"]["items"] != h["creates"]["count"]:
            found.append(f"{backend}: http list returned {h['list']['items']} of {h['creates']['count']} items")
    return found


def _pair(d: dict[str, Any]) -> str:
    return f"{d['p50_ms']:.2f} / {d['p99_ms']:.2f} / {d['max_ms']:.0f}"


def _cores(d: dict[str, Any]) -> str:
    return " ".join(f"{k[0]}{v:.2f}" for k, v in d.items())


def render_table(results: dict[str, Any]) -> str:
    backends = list(results["backends"])
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn: Callable[[dict[str, Any]], str]) -> None:
        cells = []
        for b in backends:
            r = results["backends"][b]
            if "skipped" in r:
                cells.append("skipped")
                continue
            if "error" in r:
                cells.append("FAILED")
                continue
            try:
                cells.append(fn(r))
            except (KeyError, TypeError, ValueError):
                cells.append("-")
        rows.append((label, cells))

    n = results["params"]["store_writes"]
    row(f"store creates/s ({STORE_TASKS} tasks)", lambda r: f"{r['store']['creates']['per_second']:,.0f}")
    row("store create p50/p99/max ms", lambda r: _pair(r["store"]["creates"]))
    row("sqlite writes per transaction",
        lambda r: str(r["store"]["creates"].get("writes_per_transaction", "n/a")))
    row(f"store CAS updates/s ({STORE_WATCHERS} watchers)", lambda r: f"{r['store']['updates']['per_second']:,.0f}")
    row("store update p50/p99/max ms", lambda r: _pair(r["store"]["updates"]))
    row("watch delivery p50/p99/max ms (load)", lambda r: _pair(r["store"]["watch_under_load"]))
    row("watch delivery p50/p99/max ms (1 writer)", lambda r: _pair(r["store"]["watch_idle"]))
    row(f"store watch events received (of {n})",
        lambda r: "all" if all(x == n for x in r["store"]["watch_under_load"]["received"])
        else ",".join(map(str, r["store"]["watch_under_load"]["received"])))
    row("store phase CPU cores (b/e/i/o)", lambda r: _cores(r["store"]["cpu_cores"]))
    row("HTTP creates/s", lambda r: f"{r['http']['creates']['per_second']:,.0f}")
    row("HTTP create p50/p99/max ms", lambda r: _pair(r["http"]["creates"]))
    row("HTTP gets/s", lambda r: f"{r['http']['gets']['per_second']:,.0f}")
    row("HTTP get p50/p99/max ms", lambda r: _pair(r["http"]["gets"]))
    row("HTTP updates/s (PUT)", lambda r: f"{r['http']['updates']['per_second']:,.0f}")
    row("HTTP update p50/p99/max ms", lambda r: _pair(r["http"]["updates"]))
    row("HTTP LIST all objects, best ms", lambda r: f"{r['http']['list']['best_ms']:.1f} ({r['http']['list']['items']})")
    row("HTTP watch events/s", lambda r: f"{r['http']['watch']['per_second']:,.0f}")
    row("HTTP watch p50/p99/max ms (PUT->event)", lambda r: _pair(r["http"]["watch"]))
    row("HTTP watch events received",
        lambda r: f"{r['http']['watch']['received']}/{r['http']['watch']['expected']}")
    row("CPU cores creates (b/a/e/i/o)", lambda r: _cores(r["http"]["creates"]["cpu_cores"]))
    row("CPU cores gets (b/a/e/i/o)", lambda r: _cores(r["http"]["gets"]["cpu_cores"]))
    row("CPU cores updates (b/a/e/i/o)", lambda r: _cores(r["http"]["updates"]["cpu_cores"]))

    label_w = max(len("metric"), *(len(label) for label, _ in rows))
    col_w = [max(len(b), *(len(cells[i]) for _, cells in rows)) for i, b in enumerate(backends)]
    lines = ["  ".join(["metric".ljust(label_w), *(b.rjust(w) for b, w in zip(backends, col_w, strict=True))])]
    lines.append("  ".join(["-" * label_w, *("-" * w for w in col_w)]))
    for label, cells in rows:
        lines.append("  ".join([label.ljust(label_w), *(c.rjust(w) for c, w in zip(cells, col_w, strict=True))]))
    for b in backends:
        r = results["backends"][b]
        if "skipped" in r:
            lines.append(f"{b}: skipped - {r['skipped']}")
        elif "error" in r:
            lines.append(f"{b}: FAILED - {r['error']}")
    lines.append("CPU cores: b = this bench process (load generator; in-process store for the store rows), "
                 "a = API server process, e = etcd, i = interrupts/softirqs (loopback TCP), "
                 "o = every other process on the machine")
    return "\n".join(lines)


async def _run(p: BenchParams) -> dict[str, Any]:
    results: dict[str, Any] = {
        "command": command_line(p),
        "machine": machine_info(),
        "server_mode": SERVER_MODE,
        "params": {"backends": p.backends, "objects": p.objects, "concurrency": p.concurrency,
                   "store_writes": p.store_writes, "store_tasks": STORE_TASKS, "store_watchers": STORE_WATCHERS,
                   "value_bytes": VALUE_BYTES},
        "backends": {},
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="flotilla-bench-") as tmp:
        for backend in p.backends:
            t0 = time.perf_counter()
            try:
                results["backends"][backend] = await bench_backend(backend, p, Path(tmp) / backend)
            except Exception as exc:
                results["backends"][backend] = {"error": f"{type(exc).__name__}: {exc}"}
            results["backends"][backend]["seconds"] = round(time.perf_counter() - t0, 1)
    results["seconds"] = round(time.perf_counter() - started, 1)
    return results


def run_apiserver_command(args: argparse.Namespace) -> int:
    """``flotilla bench apiserver``: 0 when the run was clean."""
    p = _params(args)
    print(f"command: {command_line(p)}", flush=True)
    print(f"server: {SERVER_MODE}", flush=True)
    results = asyncio.run(_run(p))
    m = results["machine"]
    print(f"machine: {m['nproc']} CPUs, {m['implementation']} {m['python']}, {m['platform']}; "
          f"total {results['seconds']}s")
    print(render_table(results))
    found = problems(results)
    results["problems"] = found
    for problem in found:
        print(f"PROBLEM: {problem}")
    if p.output:
        Path(p.output).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
        print(f"results written to {p.output}")
    return 1 if found else 0
