"""``flotilla soak crash``: SIGKILL the control plane at a random moment of a mass failover, restart it, check.

Each trial is a ``flotilla bench failover`` set-up (the control plane, API server and every controller on SQLite,
in its own process; the simulated members in another, which keep running): N stateful workloads (Directly, with
state preservation) are placed on member1, member1 gets a NoExecute taint, and after a delay drawn from the
trial's seed the control plane's process group gets SIGKILL. It is restarted at once on the same data directory
and port, and the trial waits until every workload is Healthy in another member, then until the end state holds
every promise of :mod:`flotilla.reliability.invariants` (or the timeout passes, which is a failure).

The delays come from ``random.Random(seed)``: the same seed gives the same kill moments (what the control plane
had done by then still varies with the machine's speed; each trial's report says how far the failover had got).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shlex
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flotilla.bench import stats
from flotilla.bench.harness import Ending, finish_command, say, workdir_for
from flotilla.cli.progress import Progress
from flotilla.reliability.invariants import WorkloadEnd, converged_problems, timed_out_tasks

__all__ = ["CrashParams", "converged_now", "kill_moments", "run_crash_command", "run_crash_trials"]

EXECUTION_SPACE_PREFIX = "karmada-es-"
BINDING_NAME_ANNOTATION = "resourcebinding.karmada.io/name"
BINDING_NAMESPACE_ANNOTATION = "resourcebinding.karmada.io/namespace"


@dataclass
class CrashParams:
    trials: int = 10
    workloads: int = 500
    members: int = 3
    kind: str = "mix"
    seed: int = 1
    storage: str = "sqlite"
    kill_window: float = 0.0  # the kill lands in [0, kill_window) s after the fault; 0: workloads / 100
    timeout: float = 300.0  # after the restart, until every workload converged
    setup_timeout: float = 600.0
    json: str = ""
    data_dir: str = ""

    def window(self) -> float:
        return self.kill_window if self.kill_window > 0 else max(0.5, self.workloads / 100.0)

    def command_line(self) -> str:
        cmd = ["flotilla", "soak", "crash", "--trials", str(self.trials), "--workloads", str(self.workloads),
               "--members", str(self.members), "--kind", self.kind, "--seed", str(self.seed),
               "--storage", self.storage, "--kill-window", f"{self.window():g}"]
        if self.json:
            cmd += ["--json", self.json]
        return shlex.join(cmd)


def kill_moments(seed: int, trials: int, window: float) -> list[float]:
    """When each trial kills the control plane, in seconds after the fault (reproducible from the seed)."""
    rng = random.Random(seed)
    return [round(rng.uniform(0.0, window), 3) for _ in range(trials)]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stage_counts(run: Any) -> dict[str, int]:
    tls = list(run.observer.timelines.values())
    return {key: sum(1 for tl in tls if tl.stage(key) is not None) for key, _ in stats.STAGES}


async def read_ends(run: Any) -> list[WorkloadEnd]:
    """Every placed workload's end state: its binding, its Works and its objects in every member."""
    from flotilla.api import resources as R
    from flotilla.bench.workloads import NAMESPACE

    obs = run.observer
    works_of: dict[str, list[str]] = {}
    for work in (await run.cp.list(R.WORKS)).get("items") or []:
        meta = work.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        ann = meta.get("annotations") or {}
        if ns.startswith(EXECUTION_SPACE_PREFIX) and ann.get(BINDING_NAMESPACE_ANNOTATION) == NAMESPACE:
            works_of.setdefault(str(ann.get(BINDING_NAME_ANNOTATION) or ""), []).append(
                ns[len(EXECUTION_SPACE_PREFIX):])
    objects: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    kinds = {spec.resource for spec in obs.specs.values()}
    for member, client in run.member_clients.items():
        for res in kinds:
            for obj in (await client.list(res, NAMESPACE)).get("items") or []:
                meta = obj.get("metadata") or {}
                objects.setdefault((res.kind, str(meta.get("name"))), {})[member] = dict(meta.get("labels") or {})
    ends: list[WorkloadEnd] = []
    for binding in (await run.cp.list(R.RESOURCE_BINDINGS, NAMESPACE)).get("items") or []:
        name = str((binding.get("metadata") or {}).get("name") or "")
        tl = obs.timelines.get(name)
        if tl is None:
            continue
        spec = binding.get("spec") or {}
        status = binding.get("status") or {}
        ends.append(WorkloadEnd(
            binding=name,
            clusters=[str(c.get("name")) for c in spec.get("clusters") or []],
            tasks=[str(t.get("fromCluster")) for t in spec.get("gracefulEvictionTasks") or []],
            healthy_on=[str(i.get("clusterName")) for i in status.get("aggregatedStatus") or []
                        if i.get("health") == "Healthy"],
            works_in=sorted(works_of.get(name, [])),
            objects_in=objects.get((tl.kind, tl.name), {}),
            state_label=obs.specs[name].label,
            expected_state=tl.expected_state,
        ))
    return ends


def _history_copies(run: Any) -> int:
    from flotilla.bench.workloads import NAMESPACE
    from flotilla.member.history import read_history

    intervals = [iv.to_dict() for iv in read_history(run.members_dir / "history.jsonl")]
    return stats.max_concurrent_copies(intervals, NAMESPACE)[0]


async def read_timed_out(run: Any) -> dict[str, list[str]]:
    """The workloads' graceful eviction tasks removed by their timeout, as the Events of their namespace tell."""
    from flotilla.bench.workloads import NAMESPACE
    from flotilla.kube.resources import EVENTS

    events = (await run.cp.list(EVENTS, NAMESPACE)).get("items") or []
    return {name: clusters for name, clusters in timed_out_tasks(events).items() if name in run.observer.timelines}


async def _problems(run: Any, expected: int) -> list[str]:
    ends = await read_ends(run)
    return converged_problems(ends, failed=run.failed, allowed=run.names[1:], expected=expected,
                              max_copies=_history_copies(run), duplicate_tasks=run.observer.duplicate_tasks,
                              timed_out=await read_timed_out(run))


async def converged_now(run: Any, expected: int, within: float) -> list[str]:
    """The broken promises of the run's end state, re-read every second for up to ``within`` seconds while some
    remain (the purge of old copies and Works may still be under way); empty once all hold."""
    deadline = time.monotonic() + within
    problems = await _problems(run, expected)
    while problems and time.monotonic() < deadline:
        await asyncio.sleep(1.0)
        problems = await _problems(run, expected)
    return problems


async def run_trial(p: CrashParams, index: int, delay: float, workdir: Path) -> dict[str, Any]:
    """One trial: place, fail member1, SIGKILL the control plane after ``delay`` s, restart, converge, check."""
    from flotilla.bench.failover import FailoverParams, Run

    fp = FailoverParams(workloads=p.workloads, members=p.members, kind=p.kind, purge_mode="Directly", state=True,
                        storage=p.storage, fault="taint", timeout=p.timeout, setup_timeout=p.setup_timeout)
    run = Run(fp, workdir)
    run.cp_port = _free_port()
    result: dict[str, Any] = {"trial": index, "kill_after_fault_s": delay}
    try:
        await run.start_processes()
        assert run.cp_proc is not None
        await run.setup()
        await run.fault()
        await asyncio.sleep(delay)
        result["at_kill"] = _stage_counts(run)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.cp_proc.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        assert run.cp_proc.proc is not None
        await run.cp_proc.proc.wait()
        await run.cp_proc.start(r"control-plane: serving")
        restarted = time.monotonic()
        result["restart_s"] = round(restarted - killed_at, 2)
        recovered = await run.observer.wait_for(run.observer.all_recovered, p.timeout)
        result["recovered_after_restart_s"] = round(time.monotonic() - restarted, 2) if recovered else None
        problems = await converged_now(run, p.workloads, p.timeout if recovered else 0.0)
        result["converged_after_restart_s"] = round(time.monotonic() - restarted, 2) if not problems else None
        result["problems"] = problems
    except (RuntimeError, OSError) as e:
        result["problems"] = [f"trial could not run: {e}"]
    finally:
        await run.stop()
    return result


async def run_crash_trials(p: CrashParams) -> dict[str, Any]:
    moments = kill_moments(p.seed, p.trials, p.window())
    root, cleanup = workdir_for(p.data_dir, "flotilla-soak-crash-")
    trials: list[dict[str, Any]] = []
    try:
        with Progress("soak crash: trials", total=p.trials) as line:
            for index, delay in enumerate(moments, start=1):
                say(f"trial {index}/{p.trials}: {p.workloads} workloads, SIGKILL {delay:.2f}s after the fault ...")
                trial = await run_trial(p, index, delay, root / f"trial-{index}")
                trials.append(trial)
                say(_trial_line(trial))
                line.update(index)
    finally:
        if cleanup is not None:
            cleanup.cleanup()
    return {"command": p.command_line(), "params": asdict(p), "kill_window_s": p.window(), "trials": trials,
            "failed_trials": sum(1 for t in trials if t.get("problems")),
            "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0]}}


def _trial_line(t: dict[str, Any]) -> str:
    at = t.get("at_kill") or {}
    done = " ".join(f"{k} {v}" for k, v in at.items())
    problems = t.get("problems") or []
    verdict = "ok" if not problems else f"{len(problems)} PROBLEMS"
    return (f"  trial {t['trial']}: killed {t['kill_after_fault_s']:.2f}s after the fault ({done or 'nothing seen'}); "
            f"restarted in {t.get('restart_s', '-')}s; converged {t.get('converged_after_restart_s', '-')}s after "
            f"the restart: {verdict}")


def render_report(r: dict[str, Any]) -> str:
    lines = [f"flotilla soak crash: {len(r['trials'])} trials, kills within {r['kill_window_s']:g}s of the fault"]
    for t in r["trials"]:
        lines.append(_trial_line(t))
    lines.append(f"{len(r['trials']) - r['failed_trials']} of {len(r['trials'])} trials held every invariant")
    return "\n".join(lines)


def run_crash_command(args: Any) -> int:
    p = CrashParams(trials=args.trials, workloads=args.workloads, members=args.members, kind=args.kind,
                    seed=args.seed, storage=args.storage, kill_window=args.kill_window, timeout=args.timeout,
                    setup_timeout=args.setup_timeout, json=args.json or "", data_dir=args.data_dir or "")
    if p.members < 2:
        raise SystemExit("flotilla soak crash: --members must be at least 2 (one fails, one takes over)")
    print(f"command: {p.command_line()}", flush=True)
    ending = Ending("soak crash", _all_problems, render_report, p.json)
    return finish_command(ending, lambda: run_crash_trials(p))


def _all_problems(result: dict[str, Any]) -> list[str]:
    return [f"trial {t['trial']}: {problem}" for t in result["trials"] for problem in t.get("problems") or []]
