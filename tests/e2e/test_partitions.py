"""Partitions and slow members with real faults: frozen, slow and down members told apart by the
cluster status controller, the eviction brake of D10 when every member is down, and the recovery purge (D2, D17).

Karmada's e2e suites fail clusters over by adding taints by hand; here the faults are real. One module-scoped
fixture starts ``flotilla apiserver``, ``flotilla member --count 2`` (member1, member2) and a second
``flotilla member --name member3`` process of its own (so that ``SIGSTOP`` freezes member3 only), joins the
three, applies a ClusterTaintPolicy (Ready in [False, Unknown] -> ``cluster.karmada.io/not-ready:NoExecute``)
and starts ``flotilla controller-manager`` with short timings: status every 0.5 s, success threshold 1 s,
failure threshold 2 s (Karmada: 10 s, 30 s, 30 s). A background watch records every change of every cluster's
Ready condition and taints, with the time it was seen, so that a test can assert that something did NOT happen
(no Ready flap, no taint) and the module can print its detection times.

* frozen (``kill -STOP``: TCP connects, nothing answers): the probe times out (``--cluster-api-timeout``, 10 s by
  default; Karmada's is 32 s, hard-coded) instead of hanging, Ready goes False after the failure threshold, the
  CTP taints the member, a ``Gracefully`` workload moves at once and a ``Directly`` one waits for ``flotilla
  fence`` (D2); after ``kill -CONT`` Ready is True again after the success threshold, and once unfenced the member
  is purged of its stale copies before a Work that waited for it is applied there (the member's own watch shows
  the order).
* slow (``flotilla sim fault --mode slow``, latency 3 x the status period, below the probe timeout): Ready stays
  True for many periods, no taint, no eviction, no Ready transition at all.
* down (``--mode down``: refused): Ready False with Karmada's reason ``ClusterNotReachable`` (the same reason and
  message as frozen, as in Karmada: a request error is "not reachable"; Flotilla's Event tells refused and timed
  out apart), failover, and back.
* every member down at once (member1 and member2 down through the member processes' admin endpoint, member3
  frozen, at the same moment): D10 halts the evictions (Warning ``EvictionHalted`` on the bindings, the rate
  limiter's ``Halted`` gauge) and nothing is evicted at any moment, although the workloads tolerate
  ``not-ready:NoExecute`` for 0 s (or not at all) and the members are not Ready many seconds apart (member3's
  probe hangs until the probe timeout): the brake counts the members whose probes fail or hang before they are
  Ready=False. Before that fix, the workloads of member1 and member2 were evicted (at the primary or secondary
  rate) as soon as their member was tainted. When the members come back every workload is where it was.
* blips (a member down and another frozen for a quarter of the failure threshold, again and again): Ready never
  changes. ``FLOTILLA_PARTITION_SOAK_SECONDS=600`` runs them for 10 minutes (``make soak``).

Each test removes its workloads at the end. Run with ``-s`` to see the detection times measured.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.metrics import parse_exposition
from tests.support.pipeline import (
    FLOTILLA,
    NOT_READY,
    NS,
    STARTUP_TIMEOUT,
    Pipeline,
    cluster_ready,
    deployment,
    docs,
    free_port,
    not_ready_taint_policy,
    policy,
    start_control_plane,
)

pytestmark = pytest.mark.kubectl

MEMBERS = ("member1", "member2", "member3")
FROZEN = "member3"  # runs in a process of its own
OUT_OF_SERVICE = "cluster.flotilla.io/out-of-service"
PERIOD = 0.5  # --cluster-status-update-frequency
SUCCESS_THRESHOLD = 1.0
FAILURE_THRESHOLD = 2.0
PROBE_TIMEOUT = 10.0  # --cluster-api-timeout (its default)
SLOW_LATENCY = 3 * PERIOD  # every request to the slow member takes longer than a status period
TIMEOUT = 30.0
CLUSTERS_PATH = "/apis/cluster.karmada.io/v1alpha1/clusters"

TIMELINE: list[str] = []  # detection times, printed at the end of the module (pytest -s)


def measured(line: str) -> None:
    TIMELINE.append(line)
    print(f"\n[timing] {line}", flush=True)


# ----------------------------------------------------------------------------------------------- HTTP


def http_json(url: str, timeout: float = 10) -> dict[str, Any] | None:
    """GET a JSON document; None on 404."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
            return doc
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise AssertionError(f"GET {url}: HTTP {e.code}: {e.read()[:300]!r}") from e


def server_of(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


def ready_of(cluster: dict[str, Any]) -> dict[str, Any]:
    for c in (cluster.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return dict(c)
    return {}


def taint_keys(cluster: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in (cluster.get("spec") or {}).get("taints") or []}


@dataclass
class Seen:
    """One change of a cluster's Ready condition or taints, as the watch saw it."""

    at: float  # time.monotonic()
    cluster: str
    ready: str
    reason: str
    message: str
    taints: frozenset[tuple[str, str]]


@dataclass
class ClusterRecorder:
    """Watches the control plane's Clusters in a thread and records every change of Ready or of the taints."""

    server: str
    seen: list[Seen] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cluster-recorder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop at the next event (the thread is a daemon: closing the stream from here could deadlock on the
        reader's lock; the stream ends anyway when the API server stops)."""
        self._stop.set()

    def _run(self) -> None:
        last: dict[str, tuple[str, str, frozenset[tuple[str, str]]]] = {}
        while not self._stop.is_set():
            try:
                listed = http_json(self.server + CLUSTERS_PATH) or {}
                for c in listed.get("items") or []:
                    self._record(c, last)
                rv = (listed.get("metadata") or {}).get("resourceVersion", "")
                url = f"{self.server}{CLUSTERS_PATH}?watch=1&resourceVersion={rv}&allowWatchBookmarks=false"
                with urllib.request.urlopen(url, timeout=3600) as resp:
                    for line in resp:
                        if self._stop.is_set():
                            return
                        event = json.loads(line)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._record(event["object"], last)
            except Exception:  # the watch ended or the server is gone: list and watch again
                if self._stop.wait(0.2):
                    return

    def _record(self, cluster: dict[str, Any], last: dict[str, tuple[str, str, frozenset[tuple[str, str]]]]) -> None:
        name = cluster["metadata"]["name"]
        ready = ready_of(cluster)
        now = (str(ready.get("status", "")), str(ready.get("reason", "")), frozenset(taint_keys(cluster)))
        if last.get(name) != now:
            last[name] = now
            self.seen.append(Seen(time.monotonic(), name, now[0], now[1], str(ready.get("message", "")), now[2]))

    def since(self, t0: float, cluster: str) -> list[Seen]:
        return [s for s in list(self.seen) if s.cluster == cluster and s.at >= t0]

    def ready_transitions(self, t0: float, cluster: str) -> list[tuple[float, str]]:
        """(time, new Ready status) of every change of the Ready status of ``cluster`` after ``t0``."""
        out: list[tuple[float, str]] = []
        before = [s for s in list(self.seen) if s.cluster == cluster and s.at < t0]
        status = before[-1].ready if before else None
        for s in self.since(t0, cluster):
            if s.ready != status:
                out.append((s.at, s.ready))
                status = s.ready
        return out

    def first(self, t0: float, cluster: str, *, ready: str | None = None,
              taint: tuple[str, str] | None = None, untainted: tuple[str, str] | None = None) -> Seen:
        """The first change after ``t0`` with that Ready status / with or without that taint (AssertionError if
        none yet)."""
        for s in self.since(t0, cluster):
            if ready is not None and s.ready != ready:
                continue
            if taint is not None and taint not in s.taints:
                continue
            if untainted is not None and untainted in s.taints:
                continue
            return s
        raise AssertionError(f"{cluster}: no change with ready={ready} taint={taint} untainted={untainted} yet; "
                             f"seen {[(round(s.at - t0, 2), s.ready, s.reason, sorted(s.taints)) for s in self.since(t0, cluster)]}")


# ----------------------------------------------------------------------------------------------- manifests


def placed(name: str, first: str, then: str | None, purge_mode: str | None = None,
           tolerations: list[dict[str, Any]] | None = None) -> str:
    """A Deployment in ``first`` that fails over to ``then`` (clusterAffinities, as Karmada's scenario 8)."""
    affinities = [{"affinityName": "primary", "clusterNames": [first]}]
    if then is not None:
        affinities.append({"affinityName": "backup", "clusterNames": [then]})
    placement: dict[str, Any] = {"clusterAffinities": affinities, "clusterTolerations": tolerations or []}
    failover = {} if purge_mode is None else {"failover": {"cluster": {"purgeMode": purge_mode}}}
    return docs(policy(name, "Deployment", "apps/v1", placement, **failover), deployment(name, 1))


TAINT_POLICY = not_ready_taint_policy(MEMBERS)


# ----------------------------------------------------------------------------------------------- the environment


class Env(Pipeline):
    member_servers: dict[str, str]
    recorder: ClusterRecorder
    metrics_url: str

    # -- reads (HTTP, no kubectl: a check is polled many times) ---------------------------------

    def cluster(self, name: str) -> dict[str, Any]:
        obj = http_json(f"{self.url}{CLUSTERS_PATH}/{name}")
        assert obj is not None, f"no cluster {name}"
        return obj

    def rb(self, name: str) -> dict[str, Any]:
        obj = http_json(f"{self.url}/apis/work.karmada.io/v1alpha2/namespaces/{NS}/resourcebindings/"
                        f"{name}-deployment")
        assert obj is not None, f"no binding {name}-deployment"
        return obj

    def targets(self, name: str) -> list[str]:
        return [c["name"] for c in self.rb(name)["spec"].get("clusters") or []]

    def tasks(self, name: str) -> list[tuple[str, str | None]]:
        return [(t["fromCluster"], t.get("purgeMode")) for t in self.rb(name)["spec"].get("gracefulEvictionTasks") or []]

    def in_member(self, member: str, name: str, timeout: float = 5) -> dict[str, Any] | None:
        return http_json(f"{self.member_servers[member]}/apis/apps/v1/namespaces/{NS}/deployments/{name}",
                         timeout=timeout)

    def where(self, name: str, members: tuple[str, ...] = MEMBERS) -> list[str]:
        return [m for m in members if self.in_member(m, name) is not None]

    def events(self, reason: str, name: str | None = None) -> list[dict[str, Any]]:
        listed = http_json(f"{self.url}/api/v1/events") or {}
        return [e for e in listed.get("items") or [] if e.get("reason") == reason
                and (name is None or (e.get("involvedObject") or {}).get("name") == name)]

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            return str(resp.read().decode())

    # -- faults -----------------------------------------------------------------------------------

    def placed_in(self, name: str, member: str) -> None:
        """``name`` runs in ``member`` only, as its binding says."""
        assert self.targets(name) == [member], f"{name}: binding targets {self.targets(name)}"
        assert self.where(name) == [member], f"{name} is in {self.where(name)}"

    def remove(self, *names: str) -> None:
        """Delete the workloads and their policies (the next test starts with nothing placed)."""
        for name in names:
            self.cp.run("delete", "deployment", name, "-n", NS, "--ignore-not-found", "--wait=false")
            self.cp.run("delete", "pp", name, "-n", NS, "--ignore-not-found", "--wait=false")

        def gone() -> None:
            for name in names:
                assert self.where(name) == [], f"{name} still in {self.where(name)}"

        self.eventually(gone, f"{', '.join(names)} deleted from the members")

    def all_ready(self) -> None:
        for m in MEMBERS:
            cluster_ready(self, m)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with contextlib.ExitStack() as stack:
        # plain http: the recorder and the checks read the control plane and the members with raw HTTP
        p = start_control_plane(stack, tmp_path_factory.mktemp("partitions"), MEMBERS, Env, insecure=True)
        p.start_members("members", "--count", "2", extra=["--insecure"])
        p.start_members(FROZEN, "--name", FROZEN, extra=["--insecure"])
        p.wait_members_up()
        p.member_servers = {m: server_of(p.members_dir / m / "kubeconfig") for m in MEMBERS}
        p.join_members()
        p.cp.run("apply", "-f", "-", input=json.dumps(TAINT_POLICY))

        p.recorder = ClusterRecorder(p.url)
        p.recorder.start()
        stack.callback(p.recorder.stop)

        metrics_port = free_port()
        p.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        p.start_controller_manager(
            "--cluster-status-update-frequency", f"{PERIOD}s", "--cluster-success-threshold", f"{SUCCESS_THRESHOLD}s",
            "--cluster-failure-threshold", f"{FAILURE_THRESHOLD}s", "--graceful-eviction-timeout", "60s",
            "--metrics-bind-address", f"127.0.0.1:{metrics_port}",
            command=[FLOTILLA, *(["-v"] if os.environ.get("H5_VERBOSE") else []), "controller-manager"])

        p.eventually(p.all_ready, "every cluster Ready and untainted", *(f"cluster {m}" for m in MEMBERS),
                     timeout=STARTUP_TIMEOUT)
        yield p
        if TIMELINE:
            print("\n" + "\n".join(["detection times (s after the fault):", *TIMELINE]))


def frozen_process(p: Env) -> subprocess.Popen[bytes]:
    return p.procs[FROZEN].popen


# ----------------------------------------------------------------------------------------------- the tests


def test_d2_frozen_member_times_out_fails_over_and_is_purged_before_anything_runs_there(env: Env) -> None:
    p = env
    p.apply("fz-grace", placed("fz-grace", FROZEN, "member1", "Gracefully"))
    p.apply("fz-direct", placed("fz-direct", FROZEN, "member1", "Directly"))
    for name in ("fz-grace", "fz-direct"):
        p.applied(name)
        p.eventually(lambda name=name: p.placed_in(name, FROZEN), f"{name} in {FROZEN}", f"rb {name}-deployment")
    # the member's own history of its Deployments from here on: the order of what the control plane did there
    rv0 = (http_json(f"{p.member_servers[FROZEN]}/apis/apps/v1/namespaces/{NS}/deployments") or {})["metadata"][
        "resourceVersion"]

    proc = frozen_process(p)
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGSTOP)
    fenced = False
    try:
        not_ready = p.eventually(lambda: p.recorder.first(t0, FROZEN, ready="False"), f"{FROZEN} not Ready",
                                 f"cluster {FROZEN}", timeout=2 * PROBE_TIMEOUT + TIMEOUT)
        assert not_ready.reason == "ClusterNotReachable", not_ready
        assert not_ready.message == "cluster is not reachable", not_ready
        # the probe timed out: it took the probe timeout plus the failure threshold (it did not hang)
        assert not_ready.at - t0 >= PROBE_TIMEOUT, f"not Ready {not_ready.at - t0:.1f}s after the freeze"
        tainted = p.eventually(lambda: p.recorder.first(t0, FROZEN, taint=(NOT_READY, "NoExecute")),
                               f"{FROZEN} tainted not-ready:NoExecute", f"cluster {FROZEN}")

        def grace_moved() -> float:
            assert "member1" in p.where("fz-grace", ("member1",)), "fz-grace not in member1 yet"
            return time.monotonic()

        moved_at = p.eventually(grace_moved, "fz-grace (Gracefully) created in member1", "rb fz-grace-deployment")
        assert p.targets("fz-direct") == ["member1"]
        assert p.tasks("fz-direct") == [(FROZEN, "Directly")]
        measured(f"frozen {FROZEN}: not Ready {not_ready.at - t0:.1f}, tainted {tainted.at - t0:.1f}, "
                        f"Gracefully workload created elsewhere {moved_at - t0:.1f}")
        # D2: Directly deletes the old copy first, which cannot happen on a frozen member: nothing moves
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert p.in_member("member1", "fz-direct") is None, "fz-direct started elsewhere before the fence"
            time.sleep(0.2)

        # a workload that must run in the frozen member: its Work waits for it
        late_tolerations = [{"key": NOT_READY, "operator": "Exists"}]
        p.apply("fz-late", placed("fz-late", FROZEN, None, tolerations=late_tolerations))
        p.applied("fz-late")
        p.eventually(lambda: p.targets("fz-late") == [FROZEN] or (_ for _ in ()).throw(AssertionError("unplaced")),
                     "fz-late scheduled to the frozen member", "rb fz-late-deployment")

        t_fence = time.monotonic()
        p.flotilla("fence", FROZEN)
        fenced = True
        p.eventually(lambda: p.in_member("member1", "fz-direct") or (_ for _ in ()).throw(AssertionError("no")),
                     "fz-direct (Directly) created in member1 once fenced", "rb fz-direct-deployment")
        measured(f"frozen {FROZEN}: Directly workload created elsewhere {time.monotonic() - t_fence:.1f} "
                        "after `flotilla fence`")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    t_cont = time.monotonic()
    back = p.eventually(lambda: p.recorder.first(t_cont, FROZEN, ready="True"), f"{FROZEN} Ready again",
                        f"cluster {FROZEN}")
    assert back.at - t_cont >= SUCCESS_THRESHOLD - 0.1, f"Ready again {back.at - t_cont:.2f}s after SIGCONT"
    measured(f"frozen {FROZEN}: Ready again {back.at - t_cont:.1f} after SIGCONT")
    # fenced: nothing is applied nor purged there yet
    time.sleep(1.0)
    assert p.in_member(FROZEN, "fz-late") is None, "fz-late applied on a fenced cluster"
    if fenced:
        p.flotilla("unfence", FROZEN)

    def settled() -> None:
        assert p.where("fz-grace") == ["member1"], f"fz-grace in {p.where('fz-grace')}"
        assert p.where("fz-direct") == ["member1"], f"fz-direct in {p.where('fz-direct')}"
        assert p.where("fz-late") == [FROZEN], f"fz-late in {p.where('fz-late')}"

    p.eventually(settled, "stale copies purged from the returning member and fz-late applied there",
                 f"cluster {FROZEN}", "rb fz-late-deployment")
    # the member's history: every stale copy was deleted before fz-late was created
    url = (f"{p.member_servers[FROZEN]}/apis/apps/v1/namespaces/{NS}/deployments?watch=1&resourceVersion={rv0}"
           "&timeoutSeconds=1")
    with urllib.request.urlopen(url, timeout=10) as resp:
        events = [(e["type"], e["object"]["metadata"]["name"]) for e in map(json.loads, resp)]
    order = [e for e in events if e in {("DELETED", "fz-grace"), ("DELETED", "fz-direct"), ("ADDED", "fz-late")}]
    assert sorted(order) == sorted({("DELETED", "fz-grace"), ("DELETED", "fz-direct"), ("ADDED", "fz-late")}), events
    assert order[-1] == ("ADDED", "fz-late"), f"fz-late was created before the stale copies were deleted: {events}"
    p.remove("fz-grace", "fz-direct", "fz-late")


def work_seconds(p: Env, controller: str) -> float:
    """Total seconds the controller's workers spent on keys (``workqueue_work_duration_seconds_sum``)."""
    prefix = f'workqueue_work_duration_seconds_sum{{name="{controller}"}} '
    for line in p.metrics().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    raise AssertionError(f"no {prefix.strip()} in the controller-manager's metrics")


def test_slow_member_stays_ready_without_taint_eviction_or_flapping(env: Env) -> None:
    p = env
    p.apply("sl-app", placed("sl-app", "member2", "member1"))
    p.applied("sl-app")
    p.eventually(lambda: p.placed_in("sl-app", "member2"), "sl-app in member2", "rb sl-app-deployment")
    p.eventually(p.all_ready, "every cluster Ready and untainted", *(f"cluster {m}" for m in MEMBERS))
    busy_before = work_seconds(p, "cluster-status")
    t0 = time.monotonic()
    p.fault("member2", "slow", "--latency", str(SLOW_LATENCY))
    try:
        started = time.monotonic()
        http_json(f"{p.member_servers['member2']}/version")
        assert time.monotonic() - started >= SLOW_LATENCY, "the member is not slow"
        time.sleep(3 * (SLOW_LATENCY + PERIOD))
        # the controller kept probing it (each sync of member2 now takes the latency at least)
        assert work_seconds(p, "cluster-status") - busy_before >= 3 * SLOW_LATENCY
        assert p.recorder.ready_transitions(t0, "member2") == [], p.recorder.since(t0, "member2")
        assert all(not s.taints for s in p.recorder.since(t0, "member2")), p.recorder.since(t0, "member2")
        assert ready_of(p.cluster("member2"))["status"] == "True"
        assert p.targets("sl-app") == ["member2"] and p.tasks("sl-app") == []
    finally:
        p.fault_now("member2", "recover")
    measured(f"slow member2 ({SLOW_LATENCY}s a request, status every {PERIOD}s): no Ready transition, no taint, "
             f"no eviction in {time.monotonic() - t0:.1f}s")
    p.remove("sl-app")


def events_about(p: Env, cluster: str, reason: str) -> list[str]:
    return [str(e.get("message")) for e in p.events(reason, cluster)]


def test_down_member_is_not_reachable_like_a_frozen_one_and_fails_over(env: Env) -> None:
    p = env
    p.apply("dn-app", placed("dn-app", "member2", "member1"))
    p.applied("dn-app")
    p.eventually(lambda: p.placed_in("dn-app", "member2"), "dn-app in member2", "rb dn-app-deployment")
    p.eventually(p.all_ready, "every cluster Ready and untainted", *(f"cluster {m}" for m in MEMBERS))
    t0 = time.monotonic()
    p.fault("member2", "down")
    try:
        not_ready = p.eventually(lambda: p.recorder.first(t0, "member2", ready="False"), "member2 not Ready",
                                 "cluster member2")
        # Karmada does not tell a refused connection from a timeout: both are "not reachable"
        assert (not_ready.reason, not_ready.message) == ("ClusterNotReachable", "cluster is not reachable")
        assert not_ready.at - t0 >= FAILURE_THRESHOLD - 0.1, f"not Ready {not_ready.at - t0:.2f}s after the fault"
        tainted = p.eventually(lambda: p.recorder.first(t0, "member2", taint=(NOT_READY, "NoExecute")),
                               "member2 tainted not-ready:NoExecute", "cluster member2")

        def moved() -> float:
            assert p.where("dn-app", ("member1",)) == ["member1"], "dn-app not in member1 yet"
            return time.monotonic()

        moved_at = p.eventually(moved, "dn-app created in member1", "rb dn-app-deployment")
        measured(f"down member2: not Ready {not_ready.at - t0:.1f}, tainted {tainted.at - t0:.1f}, "
                 f"workload created elsewhere {moved_at - t0:.1f}")
        # ... Flotilla's Event says which it was
        refused = p.eventually(lambda: events_about(p, "member2", "ClusterNotReachable") or [][0],
                               "the ClusterNotReachable Event of member2")
        assert any("Connect" in m and "timed out" not in m for m in refused), refused
        frozen = events_about(p, FROZEN, "ClusterNotReachable")
        assert frozen and all("timed out" in m for m in frozen), frozen
    finally:
        t_back = time.monotonic()  # (the member recovers before the command returns: time it from the call)
        p.fault("member2", "recover")
    back = p.eventually(lambda: p.recorder.first(t_back, "member2", ready="True", untainted=(NOT_READY, "NoExecute")),
                        "member2 Ready and untainted again", "cluster member2")
    assert back.at - t_back >= SUCCESS_THRESHOLD - 0.1
    p.eventually(lambda: p.placed_in("dn-app", "member1"), "the stale dn-app gone from member2",
                 "rb dn-app-deployment")
    measured(f"down member2: Ready and untainted again {back.at - t_back:.1f} after recover")
    p.remove("dn-app")


def test_d10_every_member_down_at_once_evicts_nothing_even_without_toleration(env: Env) -> None:
    """member1 and member2 down and member3 frozen at the same moment; the workloads tolerate not-ready for 0 s
    (or not at all), so each is due for eviction the moment its member is tainted. The members are not Ready
    seconds apart (member3's probe hangs until the probe timeout), yet nothing is evicted at any moment: the
    brake counts the members whose probes fail or hang as unhealthy before they are Ready=False (D10)."""
    p = env
    homes = {"all-1": ("member1", "member2"), "all-2": ("member2", FROZEN), "all-3": (FROZEN, "member1")}
    at_once = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]
    tolerations = {"all-1": at_once, "all-2": None, "all-3": at_once}
    for name, (first, then) in homes.items():
        p.apply(name, placed(name, first, then, tolerations=tolerations[name]))
        p.applied(name)
    for name, (first, _) in homes.items():
        p.eventually(lambda name=name, first=first: p.placed_in(name, first), f"{name} in {first}",
                     f"rb {name}-deployment")
    p.eventually(p.all_ready, "every cluster Ready and untainted", *(f"cluster {m}" for m in MEMBERS))
    bindings = {f"{n}-deployment" for n in homes}

    def about_ours(reason: str) -> list[dict[str, Any]]:
        return [e for e in p.events(reason) if (e.get("involvedObject") or {}).get("kind") == "ResourceBinding"
                and e["involvedObject"].get("name") in bindings]

    def nothing_evicted() -> None:
        assert about_ours("EvictionPerformed") == [], about_ours("EvictionPerformed")
        for name, (first, _) in homes.items():
            assert p.targets(name) == [first] and p.tasks(name) == [], (name, p.targets(name), p.tasks(name))

    proc = frozen_process(p)
    with concurrent.futures.ThreadPoolExecutor(len(MEMBERS)) as pool:
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGSTOP)
        list(pool.map(lambda m: p.fault_now(m, "down"), [m for m in MEMBERS if m != FROZEN]))
    try:
        for m in MEMBERS:
            p.eventually(lambda m=m: p.recorder.first(t0, m, ready="False", taint=(NOT_READY, "NoExecute")),
                         f"{m} not Ready and tainted", f"cluster {m}", timeout=2 * PROBE_TIMEOUT + TIMEOUT)
            nothing_evicted()
        flips = {m: p.recorder.first(t0, m, ready="False").at - t0 for m in MEMBERS}

        def halted() -> list[dict[str, Any]]:
            found = about_ours("EvictionHalted")
            assert {e["involvedObject"]["name"] for e in found} == bindings, found
            return found

        halted_events = p.eventually(halted, "EvictionHalted on every binding")
        messages = {str(e.get("message")) for e in halted_events}
        assert all("every cluster (3/3) is unhealthy" in m for m in messages), messages
        # while member3's probe hung, it was counted before it was Ready=False
        assert any("still Ready, but its probes fail or hang" in m for m in messages), messages
        modes = parse_exposition(p.metrics())["flotilla_eviction_rate_limiter_mode"]
        assert modes.value("flotilla_eviction_rate_limiter_mode", name="taint-manager", mode="Halted") == 1
        measured(f"all members down (member3 frozen): not Ready at "
                 f"{', '.join(f'{m} {t:.1f}' for m, t in sorted(flips.items()))}; evictions halted; nothing evicted "
                 f"{time.monotonic() - t0:.1f}")
        time.sleep(2 * PERIOD)
        nothing_evicted()
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        with concurrent.futures.ThreadPoolExecutor(len(MEMBERS)) as pool:
            list(pool.map(lambda m: p.fault_now(m, "recover"), [m for m in MEMBERS if m != FROZEN]))
    p.eventually(p.all_ready, "every cluster Ready and untainted again", *(f"cluster {m}" for m in MEMBERS))
    nothing_evicted()
    for name, (first, _) in homes.items():
        assert p.where(name) == [first], f"{name} is in {p.where(name)}"
    p.remove(*homes)


#: seconds of intermittent faults in the next test; ``make soak`` sets FLOTILLA_PARTITION_SOAK_SECONDS (600)
BLIP_SECONDS = float(os.environ.get("FLOTILLA_PARTITION_SOAK_SECONDS") or 4)
BLIP = FAILURE_THRESHOLD / 4  # each fault lasts a quarter of the failure threshold


@pytest.mark.timeout(BLIP_SECONDS + 120)
def test_faults_shorter_than_the_failure_threshold_never_flip_ready(env: Env) -> None:
    """Blips: member2 down and member3 frozen for a quarter of the failure threshold, again and again (with time to answer
    in between): the probes fail or hang, but never for as long as the threshold, so Ready never changes, nothing
    is tainted and nothing moves."""
    p = env
    p.apply("blip", placed("blip", "member2", "member1"))
    p.applied("blip")
    p.eventually(lambda: p.placed_in("blip", "member2"), "blip in member2", "rb blip-deployment")
    p.eventually(p.all_ready, "every cluster Ready and untainted", *(f"cluster {m}" for m in MEMBERS))
    proc = frozen_process(p)
    t0 = time.monotonic()
    cycles = 0
    try:
        while time.monotonic() - t0 < BLIP_SECONDS:
            p.fault_now("member2", "down")
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(BLIP)
            os.kill(proc.pid, signal.SIGCONT)
            p.fault_now("member2", "recover")
            time.sleep(BLIP + 2 * PERIOD)  # (every probe that hung has answered, and a healthy one follows)
            cycles += 1
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        p.fault_now("member2", "recover")
    time.sleep(FAILURE_THRESHOLD)
    for m in ("member2", FROZEN):
        assert p.recorder.ready_transitions(t0, m) == [], (m, p.recorder.since(t0, m))
        assert all(not s.taints for s in p.recorder.since(t0, m)), (m, p.recorder.since(t0, m))
    assert p.targets("blip") == ["member2"] and p.tasks("blip") == []
    measured(f"{cycles} blips of {BLIP}s (member2 down, {FROZEN} frozen) in {time.monotonic() - t0:.0f}s: "
             "no Ready transition, no taint, no eviction")
    p.remove("blip")
