"""The Flotilla pipeline as real processes, for end-to-end tests driven by the real kubectl.

``start_control_plane`` starts ``flotilla apiserver`` (memory storage) and returns a ``Pipeline`` (or a subclass
of it) whose methods start the rest in the usual order: simulated members (``flotilla member``), the Flink CRD,
``flotilla join`` of every member, ``flotilla controller-manager``, and wait for the clusters to be Ready. Every
process is stopped by the ``ExitStack`` given, even when the set-up fails half way. ``Pipeline.eventually`` polls
a check and, on a timeout, fails with the named control-plane objects and the processes' log tails.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.runner import read_admin_file
from tests.support.apiserver import Kubectl, ServerProcess
from tests.support.processes import LoggedProcess

FLOTILLA = str(Path(sys.executable).parent / "flotilla")
NS = "default"
STARTUP_TIMEOUT = 30.0
TIMEOUT = 30.0  # what ``Pipeline.eventually`` waits unless told otherwise
NOT_READY = "cluster.karmada.io/not-ready"

T = TypeVar("T")
P = TypeVar("P", bound="Pipeline")


# ----------------------------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Proc(LoggedProcess):
    name: str = ""

    def check_alive(self) -> None:
        if not self.alive():
            raise AssertionError(f"{self.name} exited with {self.popen.returncode}:\n{tail(self.log)}")

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGCONT)  # in case a test froze it
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def spawn(name: str, argv: list[str], logs: Path) -> Proc:
    proc = Proc.start(argv, logs / f"{name}.log")
    proc.name = name
    return proc


@functools.cache
def controller_manager_argv() -> list[str]:
    """``flotilla controller-manager`` once cli/main.py knows the subcommand; the module entry point until then."""
    probe = subprocess.run([FLOTILLA, "controller-manager", "--help"], capture_output=True, text=True, timeout=30)
    if probe.returncode == 0:
        return [FLOTILLA, "controller-manager"]
    return [sys.executable, "-m", "flotilla.cli.controller_manager"]


# ``flotilla join`` through add_cluster_parsers directly, for when cli/main.py does not wire it in yet
_JOIN_SHIM = ("import argparse, sys\n"
              "from flotilla.cli.cluster_commands import add_cluster_parsers\n"
              "p = argparse.ArgumentParser(prog='flotilla')\n"
              "add_cluster_parsers(p.add_subparsers(dest='command', required=True))\n"
              "a = p.parse_args(sys.argv[1:])\n"
              "sys.exit(int(a.fn(a) or 0))\n")


@functools.cache
def join_argv() -> list[str]:
    """How to run ``flotilla join``; fails clearly if it does not exist yet."""
    probe = subprocess.run([FLOTILLA, "join", "--help"], capture_output=True, text=True, timeout=30)
    if probe.returncode == 0:
        return [FLOTILLA]
    shim = [sys.executable, "-c", _JOIN_SHIM]
    probe2 = subprocess.run([*shim, "join", "--help"], capture_output=True, text=True, timeout=30)
    if probe2.returncode == 0:
        return shim
    why = (probe.stderr.strip().splitlines() or ["?"])[-1] + " / " + (probe2.stderr.strip().splitlines() or ["?"])[-1]
    raise AssertionError("`flotilla join` is not available (src/flotilla/cli/cluster_commands.py "
                         f"add_cluster_parsers, wired into cli/main.py): {why}")


def apply_large(kubectl: Kubectl, manifest: str) -> None:
    """``kubectl apply`` of a large body (the FlinkDeployment CRD: kubectl writes it in 4 kB pieces)."""
    kubectl.run("apply", "-f", "-", input=manifest)


# ----------------------------------------------------------------------------------------------- objects


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    raise AssertionError(f"no {type_} condition in {obj.get('kind')} {obj['metadata']['name']}: "
                         f"{(obj.get('status') or {}).get('conditions')}")


def docs(*objs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(objs, sort_keys=False)


def deployment(name: str, replicas: int, image: str = "nginx:1.27", cpu: str | None = None) -> dict[str, Any]:
    web: dict[str, Any] = {"name": "web", "image": image}
    if cpu is not None:
        web["resources"] = {"requests": {"cpu": cpu}}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [web]}}},
    }


def flink_deployment(name: str) -> dict[str, Any]:
    """A FlinkDeployment of the WordCount example (the shape of examples/apiserver/40-,50-)."""
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                     "jobManager": {"resource": {"memory": "2048m", "cpu": 1}},
                     "taskManager": {"resource": {"memory": "2048m", "cpu": 1}},
                     "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 2,
                             "upgradeMode": "last-state"}}}


def policy(name: str, kind: str, api_version: str, placement: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A PropagationPolicy of the object ``kind/name`` (``spec``: more of its spec, e.g. ``failover``)."""
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"resourceSelectors": [{"apiVersion": api_version, "kind": kind, "name": name}],
                 "placement": placement, **spec},
    }


def not_ready_taint_policy(clusters: Sequence[str]) -> dict[str, Any]:
    """The ClusterTaintPolicy ``not-ready``: Ready in [False, Unknown] -> not-ready:NoExecute, removed on True."""
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
        "metadata": {"name": "not-ready"},
        "spec": {"targetClusters": {"clusterNames": list(clusters)},
                 "addOnConditions": [{"conditionType": "Ready", "operator": "In",
                                      "statusValues": ["False", "Unknown"]}],
                 "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
                 "taints": [{"key": NOT_READY, "effect": "NoExecute"}]},
    }


# ----------------------------------------------------------------------------------------------- the pipeline


@dataclass
class Pipeline:
    root: Path
    cp: Kubectl
    members: dict[str, Kubectl]
    procs: dict[str, Proc] = field(default_factory=dict)
    apply_errors: dict[str, str] = field(default_factory=dict)
    apiserver: ServerProcess | None = None

    # -- where things are ----------------------------------------------------------------------

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def members_dir(self) -> Path:
        return self.root / "members"

    @property
    def kubeconfig(self) -> Path:
        """The control plane's kubeconfig."""
        return self.cp.kubeconfig

    @property
    def url(self) -> str:
        """The control plane's API server."""
        assert self.apiserver is not None
        return self.apiserver.url

    # -- start and stop ------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str]) -> Proc:
        self.procs[name] = spawn(name, argv, self.logs)
        return self.procs[name]

    def stop_processes(self) -> None:
        for proc in reversed(list(self.procs.values())):
            proc.stop()

    def start_members(self, name: str, *which: str, extra: Sequence[str] = ()) -> Proc:
        """``flotilla member *which`` (``--count N`` or ``--name M``) with the pipeline's data dir and a short
        ready delay, as the process ``name``."""
        return self.spawn(name, [FLOTILLA, "member", *which, "--data-dir", str(self.members_dir),
                                 "--ready-delay", "0.2", *extra])

    def wait_members_up(self) -> None:
        def members_up() -> None:
            for m in self.members:
                assert (self.members_dir / m / "admin.json").exists(), f"{m} not up yet"

        self.eventually(members_up, "the members to start", timeout=STARTUP_TIMEOUT)

    def install_flink_crd(self) -> None:
        """The FlinkDeployment CRD on the control plane too (members have it already), as on a real Karmada."""
        crd = flink_deployment_crd()
        apply_large(self.cp, json.dumps(crd))
        self.cp.run("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=20s")

    def join_members(self) -> None:
        join = join_argv()
        for m in self.members:
            r = subprocess.run([*join, "join", m, "--cluster-kubeconfig", str(self.members_dir / m / "kubeconfig"),
                                "--kubeconfig", str(self.kubeconfig)],
                               capture_output=True, text=True, timeout=60, env=self.cp.env())
            assert r.returncode == 0, f"flotilla join {m} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"

    def start_controller_manager(self, *flags: str, command: Sequence[str] = (FLOTILLA, "controller-manager")) -> str:
        """``command --kubeconfig <control plane> *flags``; waits for it to start its controllers and returns its
        log so far."""
        proc = self.spawn("controller-manager", [*command, "--kubeconfig", str(self.kubeconfig), *flags])

        def controllers_started() -> str:
            text = proc.log.read_text()
            assert "started " in text, "controller-manager has not started its controllers yet"
            return text

        return self.eventually(controllers_started, "the controller-manager to start", timeout=STARTUP_TIMEOUT)

    def wait_clusters_ready(self) -> None:
        """Every member's Cluster Ready with API enablements and untainted."""
        for m in self.members:
            self.eventually(lambda m=m: cluster_ready(self, m), f"cluster {m} to be Ready", f"cluster {m}",
                            timeout=STARTUP_TIMEOUT)

    # -- diagnostics ---------------------------------------------------------------------------

    def diagnostics(self, *objects: str) -> str:
        out = []
        for obj in objects:
            r = self.cp.run("get", *obj.split(), "-o", "yaml", check=False)
            out.append(f"--- control plane: kubectl get {obj}\n{r.stdout or r.stderr}")
        for name, proc in self.procs.items():
            state = "running" if proc.alive() else f"exited {proc.popen.returncode}"
            out.append(f"--- {name} ({state}), log tail:\n{tail(proc.log, 25)}")
        return "\n".join(out)

    def eventually(self, check: Callable[[], T], what: str, *objects: str, timeout: float = TIMEOUT) -> T:
        """Poll ``check`` (it raises AssertionError until satisfied) and return its value; on timeout fail
        with the last assertion, the named control-plane objects and the processes' log tails."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            for proc in self.procs.values():
                proc.check_alive()
            try:
                return check()
            except (AssertionError, KeyError, IndexError, TypeError, ValueError) as e:
                last = e
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last}\n"
                                     f"{self.diagnostics(*objects)}")
            time.sleep(0.2)

    # -- objects -------------------------------------------------------------------------------

    def cp_get(self, resource: str, name: str, namespace: str | None = NS) -> dict[str, Any]:
        args = ["get", resource, name, "-o", "json"] + (["-n", namespace] if namespace else [])
        r = self.cp.run(*args, check=False)
        if r.returncode != 0:
            raise AssertionError(f"control plane: {resource}/{name}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def member_get(self, member: str, resource: str, name: str, namespace: str = NS) -> dict[str, Any] | None:
        r = self.members[member].run("get", resource, name, "-n", namespace, "-o", "json", check=False)
        if r.returncode != 0:
            if "NotFound" in r.stderr or "not found" in r.stderr:
                return None
            raise AssertionError(f"{member}: kubectl get {resource}/{name}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def placement(self, resource: str, name: str) -> dict[str, dict[str, Any]]:
        """The member objects of ``resource/name``, by member (members without one left out)."""
        found = {}
        for m in self.members:
            obj = self.member_get(m, resource, name)
            if obj is not None:
                found[m] = obj
        return found

    def apply(self, scenario: str, manifest: str) -> None:
        r = self.cp.run("apply", "-f", "-", input=manifest, check=False)
        if r.returncode != 0:
            self.apply_errors[scenario] = f"kubectl apply failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"

    def applied(self, scenario: str) -> None:
        assert scenario not in self.apply_errors, f"{scenario}: {self.apply_errors[scenario]}"

    def other(self, member: str) -> str:
        """A member that is not ``member``."""
        return next(m for m in self.members if m != member)

    def cluster(self, name: str) -> dict[str, Any]:
        return self.cp_get("clusters", name, namespace=None)

    def taints(self, cluster: str) -> list[dict[str, Any]]:
        return list((self.cluster(cluster).get("spec") or {}).get("taints") or [])

    def set_taints(self, cluster: str, taints: list[dict[str, Any]]) -> None:
        self.cp.run("patch", "cluster", cluster, "--type", "merge", "-p", json.dumps({"spec": {"taints": taints}}))

    # -- the flotilla CLI and the members' faults ------------------------------------------------

    def flotilla(self, *args: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([FLOTILLA, *args], capture_output=True, text=True, timeout=60, env=self.cp.env())
        assert r.returncode == 0, f"flotilla {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r

    def fault(self, member: str, mode: str, *extra: str) -> dict[str, Any]:
        """``flotilla sim fault member --mode mode *extra``; the member's fault state it prints."""
        r = self.flotilla("sim", "fault", member, "--mode", mode, "--data-dir", str(self.members_dir), *extra)
        state: dict[str, Any] = json.loads(r.stdout)
        return state

    def admin_url(self, member: str) -> str:
        """The admin endpoint of the member's process."""
        return str(read_admin_file(self.members_dir, member)["admin_url"])

    def fault_now(self, member: str, mode: str) -> dict[str, Any]:
        """The same fault through the member process's admin endpoint (what ``flotilla sim fault`` sends), without
        starting a process: faults meant to happen at once."""
        req = urllib.request.Request(f"{self.admin_url(member)}/members/{member}/fault",
                                     data=json.dumps({"mode": mode}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            state: dict[str, Any] = json.loads(resp.read())
        return state

    def member_state(self, member: str) -> dict[str, Any]:
        """The member's fault state from its process's admin endpoint (mode, ready, workloads)."""
        with urllib.request.urlopen(f"{self.admin_url(member)}/members/{member}", timeout=10) as resp:
            state: dict[str, Any] = json.loads(resp.read())
        return state


def cluster_ready(p: Pipeline, name: str) -> None:
    cluster = p.cp_get("clusters", name, namespace=None)
    ready = condition(cluster, "Ready")
    assert ready.get("status") == "True", f"{name}: Ready {ready}"
    assert (cluster.get("status") or {}).get("apiEnablements"), f"{name}: no apiEnablements yet"
    taints = (cluster.get("spec") or {}).get("taints") or []
    assert not taints, f"{name}: still tainted {taints}"


def start_control_plane(stack: contextlib.ExitStack, root: Path, members: Sequence[str], cls: type[P], *,
                        insecure: bool = False) -> P:
    """``flotilla apiserver`` (memory storage) under ``root/cp`` and a ``cls`` for it and the members (their
    kubeconfigs under ``root/members``); the server and every process the pipeline spawns stop with ``stack``.
    Secure (reached through its kubeconfig) unless ``insecure``: plain http, for a test that speaks raw HTTP."""
    (root / "logs").mkdir()
    home = root / "home"
    home.mkdir()
    server = ServerProcess(root / "cp", storage_url="memory://", extra=["--insecure"] if insecure else [])
    stack.callback(server.stop)
    server.start()
    p = cls(root, Kubectl(server.kubeconfig, home),
            {m: Kubectl(root / "members" / m / "kubeconfig", home) for m in members}, apiserver=server)
    stack.callback(p.stop_processes)
    return p
