"""``flotilla bench dashboard``: the dashboard's pages over a large fleet, through HTTP, and its model's memory.

One API server in this process (SQLite, the dashboard on) gets ``--clusters`` Clusters and ``--bindings``
ResourceBindings spread over them, created through the in-process client. Once the dashboard's model holds them
all, each page is fetched ``--requests`` times in a row by one HTTP client, as a browser would (the whole page, and
the live fragment a change makes the browser fetch): the fleet, the first workloads page, a page in the middle, a
search, a filter by cluster, the timeline and one workload. Then the time from a binding's change to the event
stream's ``changed`` (``--changes`` times), and the model's memory per binding: the model built again from the same
slim bindings under ``tracemalloc``. Its flags are declared in :mod:`flotilla.bench.command`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

__all__ = ["run_dashboard_command"]


def _binding(i: int, clusters: int) -> dict[str, Any]:
    name = f"app-{i:05d}"
    cluster = f"member{i % clusters + 1}"
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-deployment", "namespace": f"team-{i % 20}",
                         "labels": {"resourcebinding.karmada.io/permanent-id": f"00000000-0000-0000-0000-{i:012d}"},
                         "annotations": {"propagationpolicy.karmada.io/name": "spread"}},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                  "namespace": f"team-{i % 20}"},
                     "replicas": 2, "clusters": [{"name": cluster, "replicas": 2}]},
            "status": {"aggregatedStatus": [{"clusterName": cluster, "applied": True, "health": "Healthy",
                                             "status": {"replicas": 2, "readyReplicas": 2}}]}}


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "p90_ms": round(pick(0.9) * 1000, 2),
            "p99_ms": round(pick(0.99) * 1000, 2), "max_ms": round(ordered[-1] * 1000, 2)}


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    from flotilla.api import resources as R
    from flotilla.apiserver.inprocess import in_process_client
    from flotilla.apiserver.server import ApiServer, ApiServerConfig
    from flotilla.dashboard.model import DashboardModel, slim_binding
    from flotilla.kube.resources import NAMESPACES

    result: dict[str, Any] = {"bindings": args.bindings, "clusters": args.clusters, "requests": args.requests}
    with tempfile.TemporaryDirectory() as tmp:
        api = await ApiServer(ApiServerConfig(data_dir=Path(tmp), port=0, write_kubeconfig=False)).start()
        try:
            assert api.storage is not None and api.dashboard is not None
            client = in_process_client(api.storage)
            started = time.perf_counter()
            for n in range(20):
                await client.create(NAMESPACES, {"metadata": {"name": f"team-{n}"}})
            for c in range(1, args.clusters + 1):
                await client.create(R.CLUSTERS, {"metadata": {"name": f"member{c}"},
                                                 "spec": {"syncMode": "Push",
                                                          "apiEndpoint": f"https://member{c}.example:6443"}})
            sem = asyncio.Semaphore(32)

            async def create(i: int) -> None:
                async with sem:
                    b = _binding(i, args.clusters)
                    await client.create(R.RESOURCE_BINDINGS, b, b["metadata"]["namespace"])

            await asyncio.gather(*(create(i) for i in range(args.bindings)))
            model = api.dashboard.model
            await api.dashboard.follow()  # what the first page a user opens does
            while len(model.bindings) < args.bindings:
                await api.dashboard.feed.wait_change(1.0)
            result["setup_s"] = round(time.perf_counter() - started, 1)
            base = api.url + "/dashboard"
            pages = {
                "fleet": "/", "workloads page 1": "/workloads", "workloads page 100": "/workloads?page=100",
                "search": "/workloads?q=app-0424", "filter by cluster": "/workloads?cluster=member7",
                "timeline": "/timeline", "one workload": "/workloads/team-3/app-00003-deployment",
            }
            timings: dict[str, Any] = {}
            async with aiohttp.ClientSession() as http:
                for label, path in pages.items():
                    for fragment in (False, True):
                        headers = {"HX-Request": "true"} if fragment else {}
                        samples, size = [], 0
                        for _ in range(args.requests):
                            t0 = time.perf_counter()
                            async with http.get(base + path, headers=headers) as r:
                                body = await r.read()
                                if r.status != 200:
                                    raise RuntimeError(f"{path}: {r.status}")
                            samples.append(time.perf_counter() - t0)
                            size = len(body)
                        timings[label + (" (fragment)" if fragment else "")] = {**_stats(samples), "bytes": size}
                result["pages"] = timings
                # a change to the notification a browser gets
                delays = []
                async with http.get(base + "/events?topic=workloads") as stream:
                    await stream.content.readline()
                    await stream.content.readline()
                    for i in range(args.changes):
                        await asyncio.sleep(0.4)  # past the previous notification's coalescing
                        t0 = time.perf_counter()
                        await client.patch(R.RESOURCE_BINDINGS, "app-00000-deployment",
                                           {"metadata": {"labels": {"bench": str(i)}}}, namespace="team-0")
                        while not (await stream.content.readline()).startswith(b"event: changed"):
                            pass
                        delays.append(time.perf_counter() - t0)
                result["change_to_event"] = _stats(delays)
            slim = [slim_binding(_binding(i, args.clusters)) for i in range(args.bindings)]
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            copy = DashboardModel()
            for b in json.loads(json.dumps(slim)):  # fresh objects, counted while the model takes them in
                copy.put_binding(b)
            result["model_bytes_per_binding"] = round((tracemalloc.get_traced_memory()[0] - before) / args.bindings)
            tracemalloc.stop()
            await client.close()
        finally:
            await api.stop()
    return result


def run_dashboard_command(args: argparse.Namespace) -> int:
    if args.bindings < 1 or args.clusters < 1 or args.requests < 1 or args.changes < 1:
        print("flotilla bench dashboard: --bindings, --clusters, --requests and --changes must be at least 1",
              file=sys.stderr)
        return 2
    result = asyncio.run(_bench(args))
    print(f"{result['bindings']} bindings on {result['clusters']} clusters (set up in {result['setup_s']} s); "
          f"{result['requests']} fetches each, milliseconds:")
    print(f"{'page':<36}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}{'bytes':>9}")
    for label, t in result["pages"].items():
        print(f"{label:<36}{t['p50_ms']:>9}{t['p90_ms']:>9}{t['p99_ms']:>9}{t['max_ms']:>9}{t['bytes']:>9}")
    c = result["change_to_event"]
    print(f"a binding's change to the event stream's 'changed': p50 {c['p50_ms']} ms, p90 {c['p90_ms']} ms, "
          f"max {c['max_ms']} ms")
    print(f"the model's memory: {result['model_bytes_per_binding']} bytes per binding")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0
