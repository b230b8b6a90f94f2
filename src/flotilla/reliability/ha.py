"""``flotilla soak ha``: the HA deployment on etcd loses a controller-manager, an etcd member, an API server.

The deployment (docs/operations.md, "High availability"): a three-member etcd cluster; two ``flotilla apiserver``
replicas on it (``--storage etcd://m0,m1,m2``); two ``flotilla controller-manager --leader-elect`` replicas whose
kubeconfig lists both API servers (the ``servers.flotilla.io`` extension); simulated members in their own process.
One trial, in order:

1. N stateful workloads (Directly, with state) are placed on member1, which then gets a NoExecute taint;
2. once ``--kill-at`` of them are evicted, the controller-manager holding the lease gets SIGKILL; the standby must
   take the lease (within the lease duration, plus its retry period) and finish the failover: every invariant of
   :mod:`flotilla.reliability.invariants` must hold (among them: no graceful eviction task removed by its timeout,
   which is what a scheduler status left behind by the change of leader leads to);
3. one etcd member gets SIGKILL; new workloads must still be placed and become Healthy;
4. the API server the clients use first gets SIGKILL; the controller-manager and this driver move to the other one,
   and new workloads must still be placed and become Healthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flotilla.bench.control_plane import BENCH_TIMINGS
from flotilla.bench.failover import FailoverParams, Run
from flotilla.bench.harness import Ending, finish_command, say, workdir_for
from flotilla.bench.processes import ChildProcess
from flotilla.reliability.crash import converged_now

__all__ = ["HaParams", "run_ha_command", "run_ha_trial"]

LEASE_NAMESPACE = "karmada-system"
LEASE_NAME = "flotilla-controller-manager"
RETRY_PERIOD = 0.5


@dataclass
class HaParams:
    workloads: int = 200
    members: int = 3
    kind: str = "mix"
    kill_at: float = 0.3  # kill the leading controller-manager once this share of the workloads is evicted
    lease_duration: float = 4.0
    extra: int = 10  # workloads created after the etcd member and after the API server are gone
    timeout: float = 300.0
    setup_timeout: float = 600.0
    json: str = ""
    data_dir: str = ""

    def command_line(self) -> str:
        cmd = ["flotilla", "soak", "ha", "--workloads", str(self.workloads), "--members", str(self.members),
               "--kind", self.kind, "--kill-at", f"{self.kill_at:g}", "--lease-duration", f"{self.lease_duration:g}",
               "--extra", str(self.extra)]
        if self.json:
            cmd += ["--json", self.json]
        return shlex.join(cmd)


class HaRun(Run):
    """``flotilla bench failover``'s run, with the HA deployment instead of the one-process control plane."""

    def __init__(self, p: HaParams, workdir: Path) -> None:
        super().__init__(FailoverParams(workloads=p.workloads, members=p.members, kind=p.kind, purge_mode="Directly",
                                        state=True, storage="etcd", fault="taint", timeout=p.timeout,
                                        setup_timeout=p.setup_timeout), workdir)
        self.hp = p
        self.etcds: list[Any] = []
        self.apiservers: list[ChildProcess] = []
        self.api_urls: list[str] = []
        self.cms: dict[str, ChildProcess] = {}
        self.kubeconfig = workdir / "kubeconfig"
        self.retried_writes = 0  # the driver's creates retried after a 5xx or a broken connection

    async def start_processes(self) -> None:
        from flotilla.client import Client
        from flotilla.client.kubeconfig import write_kubeconfig
        from flotilla.storage.etcd_launcher import free_ports, start_etcd_cluster

        self.etcds = await asyncio.to_thread(start_etcd_cluster, self.workdir / "etcd", 3)
        storage = "etcd://" + ",".join(e.endpoint for e in self.etcds)
        for name, port in zip(("a", "b"), free_ports(2), strict=True):
            # plain http: one kubeconfig names both servers (the second a fallback), and each secure server would
            # have a CA and tokens of its own
            self.apiservers.append(ChildProcess(f"apiserver-{name}", [
                "apiserver", "--insecure", "--storage", storage, "--data-dir", str(self.workdir / f"apiserver-{name}"),
                "--port", str(port)], self.workdir / f"apiserver-{name}.log"))
        lines = await asyncio.gather(*(a.start(r"flotilla apiserver: serving") for a in self.apiservers),
                                     self.start_members())
        for line in lines[:2]:
            found = re.search(r"serving (\S+)", line)
            if found is None:
                raise RuntimeError(f"cannot read an API server's ready line: {line!r}")
            self.api_urls.append(found.group(1))
        write_kubeconfig(self.kubeconfig, server=self.api_urls[0], fallback_servers=tuple(self.api_urls[1:]))
        self.cp = Client.from_kubeconfig(str(self.kubeconfig))
        d = self.hp.lease_duration
        for name in ("cm-a", "cm-b"):
            self.cms[name] = ChildProcess(name, [
                "controller-manager", "--kubeconfig", str(self.kubeconfig), *BENCH_TIMINGS,
                "--resource-eviction-rate", "1000000", "--metrics-bind-address", "0",
                "--leader-elect", "--leader-elect-lease-duration", f"{d:g}s",
                "--leader-elect-renew-deadline", f"{d * 0.75:g}s", "--leader-elect-retry-period", f"{RETRY_PERIOD:g}s",
                "--leader-elect-identity", name], self.workdir / f"{name}.log")
            await self.cms[name].start(None)
        await self.leader(within=60.0)

    async def stop(self) -> None:
        await super().stop()
        for proc in [*self.cms.values(), *self.apiservers]:
            await proc.stop()
        for etcd in self.etcds:
            await asyncio.to_thread(etcd.stop)

    async def leader(self, within: float, not_before: float = 0.0, other_than: str = "") -> tuple[str, float]:
        """(the lease holder, when it was seen holding) once one holds it, renewed after ``not_before``."""
        from flotilla.kube.resources import LEASES

        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                lease = await self.cp.get(LEASES, LEASE_NAME, LEASE_NAMESPACE)
                holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
                if holder in self.cms and holder != other_than and self.cms[holder].running:
                    seen = time.monotonic()
                    if seen >= not_before:
                        return holder, seen
            await asyncio.sleep(0.1)
        raise RuntimeError(f"no controller-manager held the lease {LEASE_NAMESPACE}/{LEASE_NAME} within {within:.0f}s")

    def evicted(self) -> int:
        return sum(1 for tl in self.observer.timelines.values() if tl.evicted is not None)

    async def more_workloads(self, tag: str) -> tuple[list[str], float | None]:
        """Create ``extra`` workloads now; (their bindings, seconds until all were Healthy, None if not in time)."""
        from flotilla.bench.workloads import NAMESPACE, kinds_for, workload

        kinds = kinds_for(self.p.kind)
        made: list[str] = []
        t0 = time.monotonic()
        deadline = t0 + self.hp.timeout
        for i in range(self.hp.extra):
            spec = kinds[i % len(kinds)]
            name = f"{tag}{i:04d}"
            await self._create_retrying(spec.resource, workload(spec, name, self.run_id), NAMESPACE, deadline)
            made.append(spec.binding_name(name))
        while time.monotonic() < deadline:
            if await self._all_healthy_elsewhere(made):
                return made, round(time.monotonic() - t0, 2)
            await asyncio.sleep(0.5)
        return made, None

    async def _create_retrying(self, res: Any, body: dict[str, Any], namespace: str, deadline: float) -> None:
        """Create as a client would while the store elects a new leader: a 5xx or a broken connection (the write
        may or may not have been applied) is retried; AlreadyExists then means an earlier attempt landed."""
        from flotilla.client import ApiException, is_already_exists

        while True:
            try:
                await self.cp.create(res, body, namespace)
                return
            except ApiException as e:
                if is_already_exists(e):
                    return
                if (e.status and e.status < 500) or time.monotonic() > deadline:
                    raise
                self.retried_writes += 1
                await asyncio.sleep(0.5)

    async def _all_healthy_elsewhere(self, bindings: list[str]) -> bool:
        from flotilla.api import resources as R
        from flotilla.bench.workloads import NAMESPACE

        items = {i["metadata"]["name"]: i for i in (await self.cp.list(R.RESOURCE_BINDINGS, NAMESPACE))["items"]}
        for name in bindings:
            rb = items.get(name)
            if rb is None:
                return False
            clusters = [c.get("name") for c in (rb.get("spec") or {}).get("clusters") or []]
            healthy = [i.get("clusterName") for i in (rb.get("status") or {}).get("aggregatedStatus") or []
                       if i.get("health") == "Healthy"]
            if len(clusters) != 1 or clusters[0] == self.failed or clusters[0] not in healthy:
                return False
        return True


def _kill(proc: ChildProcess) -> None:
    assert proc.proc is not None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.proc.pid, signal.SIGKILL)


async def run_ha_trial(p: HaParams, workdir: Path) -> dict[str, Any]:
    from flotilla.client import ApiException

    run = HaRun(p, workdir)
    result: dict[str, Any] = {"params": asdict(p)}
    problems: list[str] = []
    try:
        await run.start_processes()
        await run.setup()
        result["api_servers"] = list(run.api_urls)
        first, _ = await run.leader(within=30.0)
        result["first_leader"] = first
        await run.fault()
        want = max(1, int(p.kill_at * p.workloads))
        await run.observer.wait_for(lambda: run.evicted() >= want, p.timeout)
        result["evicted_at_kill"] = run.evicted()
        _kill(run.cms[first])
        killed = time.monotonic()
        second, seen = await run.leader(within=p.lease_duration * 4 + 10, other_than=first)
        result["new_leader"] = second
        result["takeover_s"] = round(seen - killed, 2)
        if seen - killed > p.lease_duration + 2 * RETRY_PERIOD + 1.0:
            problems.append(f"the standby took the lease {seen - killed:.1f}s after the leader died "
                            f"(lease duration {p.lease_duration:g}s)")
        recovered = await run.observer.wait_for(run.observer.all_recovered, p.timeout)
        result["recovered_after_kill_s"] = round(time.monotonic() - killed, 2) if recovered else None
        found = await converged_now(run, p.workloads, p.timeout if recovered else 0.0)
        problems += found
        # one etcd member down: everything keeps working
        await asyncio.to_thread(run.etcds[0].process.kill)
        _, took = await run.more_workloads("e")
        result["healthy_after_etcd_member_loss_s"] = took
        if took is None:
            problems.append(f"with one etcd member down, {p.extra} new workloads were not Healthy in time")
        # the API server the clients use first: they move to the other one
        _kill(run.apiservers[0])
        _, took = await run.more_workloads("a")
        result["healthy_after_apiserver_loss_s"] = took
        if took is None:
            problems.append(f"with API server {run.api_urls[0]} down, {p.extra} new workloads were not Healthy "
                            f"in time")
        result["driver_server_after"] = run.cp.transport.server
        result["driver_writes_retried"] = run.retried_writes
        problems += [found for found in await converged_now(run, p.workloads, 0.0) if found not in problems]
    except (RuntimeError, OSError, ApiException) as e:
        problems.append(f"trial could not run: {e}")
    finally:
        await run.stop()
    result["problems"] = problems
    return result


def render_report(r: dict[str, Any]) -> str:
    lines = [
        f"flotilla soak ha: {r['params']['workloads']} workloads, lease {r['params']['lease_duration']:g}s",
        f"  leader {r.get('first_leader', '-')} killed with {r.get('evicted_at_kill', '-')} evicted; "
        f"{r.get('new_leader', '-')} took the lease after {r.get('takeover_s', '-')}s; every workload recovered "
        f"{r.get('recovered_after_kill_s', '-')}s after the kill",
        f"  one etcd member killed: {r['params']['extra']} new workloads Healthy after "
        f"{r.get('healthy_after_etcd_member_loss_s', '-')}s",
        f"  API server killed: {r['params']['extra']} new workloads Healthy after "
        f"{r.get('healthy_after_apiserver_loss_s', '-')}s (clients now on {r.get('driver_server_after', '-')})",
    ]
    lines.append("every invariant held" if not r["problems"] else f"{len(r['problems'])} problems:")
    return "\n".join(lines)


def run_ha_command(args: Any) -> int:
    p = HaParams(workloads=args.workloads, members=args.members, kind=args.kind, kill_at=args.kill_at,
                 lease_duration=args.lease_duration, extra=args.extra, timeout=args.timeout,
                 setup_timeout=args.setup_timeout, json=args.json or "", data_dir=args.data_dir or "")
    if p.members < 2:
        raise SystemExit("flotilla soak ha: --members must be at least 2 (one fails, one takes over)")
    if not 0.0 < p.kill_at <= 1.0:
        raise SystemExit("flotilla soak ha: --kill-at must be in (0, 1]")
    print(f"command: {p.command_line()}", flush=True)

    async def trial() -> dict[str, Any]:
        root, cleanup = workdir_for(p.data_dir, "flotilla-soak-ha-")
        try:
            say(f"HA trial: {p.workloads} workloads, two API servers on a three-member etcd, two controller-managers")
            return await run_ha_trial(p, root)
        finally:
            if cleanup is not None:
                cleanup.cleanup()

    def problems(result: dict[str, Any]) -> list[str]:
        result["command"] = p.command_line()
        return list(result["problems"])

    return finish_command(Ending("soak ha", problems, render_report, p.json), trial)
