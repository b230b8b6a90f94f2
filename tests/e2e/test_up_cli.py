"""``flotilla up`` / ``flotilla down`` as a user runs them: real processes, the real kubectl.

One data directory is brought up in the background, used with kubectl (clusters Ready, the default
ClusterTaintPolicy, a Deployment propagated to a member), brought down, and brought up again: the same state is
there. The error paths (a busy port, another version's data directory, a second ``up`` on a running directory)
each give exit code 1 and a message that says what to do.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.apiserver import Kubectl

pytestmark = pytest.mark.kubectl

FLOTILLA = str(Path(sys.executable).parent / "flotilla")
T = TypeVar("T")

POLICY = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
             "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}},
}
DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
}


def flotilla(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLOTILLA, *args], capture_output=True, text=True, timeout=timeout)


def eventually(check: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            return check()
        except (AssertionError, subprocess.CalledProcessError, KeyError, ValueError, OSError) as e:
            last = e
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}: {last}")


def get(k: Kubectl, *args: str) -> dict[str, Any]:
    return json.loads(k.run("get", *args, "-o", "json").stdout)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "flotilla"
    yield d
    flotilla("down", "--data-dir", str(d))


def _listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket of process ``pid`` in LISTEN state (IPv4 and IPv6), from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    out: list[tuple[str, int]] = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            raw_host, raw_port = cols[1].split(":")
            if width == 8:
                host = ".".join(str(b) for b in reversed(bytes.fromhex(raw_host)))
            else:
                host = "::" if int(raw_host, 16) == 0 else raw_host
            out.append((host, int(raw_port, 16)))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_up_detach_serves_clusters_policy_and_propagation_then_down_and_up_resumes(
        data_dir: Path, tmp_path: Path) -> None:
    metrics_port = free_port()
    r = flotilla("up", "--detach", "--data-dir", str(data_dir), "--port", "0", "--members", "2",
                 "--metrics-bind-address", f"127.0.0.1:{metrics_port}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "flotilla down" in r.stdout
    k = Kubectl(data_dir / "kubeconfig", tmp_path)
    contexts = k.run("config", "get-contexts", "-o", "name").stdout.split()
    assert sorted(contexts) == ["flotilla", "member1", "member2"]

    def ready() -> list[str]:
        clusters = get(k, "clusters")["items"]
        names = sorted(c["metadata"]["name"] for c in clusters
                       if any(x["type"] == "Ready" and x["status"] == "True" for x in c["status"]["conditions"]))
        assert names == ["member1", "member2"], names
        return names

    eventually(ready, "both members Ready")
    # the default embedded mode serves on loopback only: every socket of the process listens on 127.0.0.1
    pid = int((data_dir / "up.pid").read_text().split()[0])
    listening = _listening_addresses(pid)
    assert listening and all(host == "127.0.0.1" for host, _ in listening), listening
    servers = [k.run("config", "view", "--minify", "--context", c, "-o", "jsonpath={.clusters[0].cluster.server}")
               .stdout for c in contexts]
    assert {int(url.rsplit(":", 1)[1]) for url in servers} | {metrics_port} <= {port for _, port in listening}
    ctp = get(k, "clustertaintpolicy", "not-ready")
    assert ctp["spec"]["taints"] == [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}]
    assert sorted(ctp["spec"]["targetClusters"]["clusterNames"]) == ["member1", "member2"]

    k.run("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [POLICY, DEPLOYMENT]}))
    eventually(lambda: get(k, "--context", "member1", "deployment", "web"), "web in member1")
    nodes = get(k, "--context", "member2", "nodes")["items"]
    assert len(nodes) == 3
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert "# TYPE flotilla_evictions_total counter" in text and 'workqueue_depth{name="binding"}' in text
    uid = get(k, "cluster", "member1")["metadata"]["uid"]

    r = flotilla("down", "--data-dir", str(data_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stopped" in r.stdout
    assert not (data_dir / "up.pid").exists()
    again = flotilla("down", "--data-dir", str(data_dir))  # stopped already: nothing to stop is an error
    assert again.returncode == 1 and "nothing is running" in again.stderr
    r = k.run("get", "clusters", check=False, timeout=10)
    assert r.returncode != 0  # nothing answers any more

    r = flotilla("up", "--detach", "--data-dir", str(data_dir), "--port", "0", "--members", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert get(k, "cluster", "member1")["metadata"]["uid"] == uid  # the same control plane state
    assert get(k, "deployment", "web")["metadata"]["name"] == "web"
    eventually(ready, "both members Ready again")
    member_copy = eventually(lambda: get(k, "--context", "member1", "deployment", "web"), "web in member1 again")
    assert member_copy["spec"]["replicas"] == 1


def test_up_on_a_running_data_dir_says_it_is_running(data_dir: Path) -> None:
    r = flotilla("up", "--detach", "--data-dir", str(data_dir), "--port", "0", "--members", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    again = flotilla("up", "--data-dir", str(data_dir), "--port", "0")
    assert again.returncode == 1
    assert "already running" in again.stderr and "flotilla down" in again.stderr


def test_up_on_a_busy_port_says_which_port_and_what_to_do(data_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = flotilla("up", "--data-dir", str(data_dir), "--port", str(port), "--members", "1", timeout=60)
    assert r.returncode == 1
    assert f"127.0.0.1:{port}" in r.stderr and "--port" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_up_refuses_a_data_dir_from_another_version(tmp_path: Path) -> None:
    d = tmp_path / "old"
    d.mkdir()
    (d / "flotilla-up.json").write_text(json.dumps({"format": 99, "version": "9.9.9", "members": {}}))
    r = flotilla("up", "--data-dir", str(d), "--port", "0", timeout=60)
    assert r.returncode == 1
    assert "9.9.9" in r.stderr and "another --data-dir" in r.stderr, r.stderr
    assert not (d / "controlplane").exists()  # nothing was started or written


def test_up_rejects_bad_flags_with_usage_errors(tmp_path: Path) -> None:
    r = flotilla("up", "--data-dir", str(tmp_path / "x"), "--members", "0")
    assert r.returncode == 2 and "--members must be at least 1" in r.stderr
    r = flotilla("up", "--data-dir", str(tmp_path / "x"), "--feature-gates", "Nope=true")
    assert r.returncode == 2 and "unknown gate 'Nope'" in r.stderr
    r = flotilla("up", "--data-dir", str(tmp_path / "x"), "--cluster-failure-threshold", "-1")
    assert r.returncode == 2 and "greater than 0" in r.stderr


def test_down_on_an_idle_data_dir_exits_1_saying_nothing_was_running(tmp_path: Path) -> None:
    r = flotilla("down", "--data-dir", str(tmp_path))
    assert r.returncode == 1 and f"nothing is running on {tmp_path}" in r.stderr and "--data-dir" in r.stderr
    (tmp_path / "up.pid").write_text("999999999\n")  # a stale pid file (the process is gone) is not a run
    r = flotilla("down", "--data-dir", str(tmp_path))
    assert r.returncode == 1 and "nothing is running" in r.stderr


def test_up_with_the_older_secure_flag_keeps_every_data_file_0600_in_0700_dirs_and_narrows_older_ones(
        data_dir: Path, tmp_path: Path) -> None:
    # a data directory as an older version (or a copy with the usual umask) left it: world-readable
    (data_dir / "members").mkdir(parents=True)
    for d in (data_dir, data_dir / "members"):
        d.chmod(0o755)
    for name in ("up.log", "members/history.jsonl"):
        (data_dir / name).write_text("")
        (data_dir / name).chmod(0o644)
    r = flotilla("up", "--secure", "--detach", "--data-dir", str(data_dir), "--members", "1", "--port", "0",
                 "--metrics-bind-address", "0", "--no-default-taint-policy")
    assert r.returncode == 0, r.stdout + r.stderr
    k = Kubectl(data_dir / "kubeconfig", tmp_path)
    k.run("apply", "-f", "-", input=json.dumps(DEPLOYMENT))  # writes: the control plane's WAL
    k.run("--context", "member1", "apply", "-f", "-", input=json.dumps(DEPLOYMENT))  # and a member's
    wide = {str(p.relative_to(data_dir)): oct(p.stat().st_mode & 0o777) for p in [data_dir, *data_dir.rglob("*")]
            if not p.is_symlink() and p.stat().st_mode & 0o077}
    assert wide == {}, f"readable by group or others: {wide}"
    dirs = {p for p in [data_dir, *data_dir.rglob("*")] if p.is_dir()}
    assert all(p.stat().st_mode & 0o777 == 0o700 for p in dirs)
    files = {str(p.relative_to(data_dir)) for p in data_dir.rglob("*") if p.is_file()}
    for expected in ("controlplane/flotilla.db", "controlplane/flotilla.db-wal", "controlplane/flotilla.db-shm",
                     "controlplane/tokens.csv", "controlplane/pki/ca.key", "kubeconfig", "viewer.kubeconfig",
                     "up.log", "up.pid", "members/history.jsonl"):
        assert expected in files, sorted(files)
    member_dbs = [f for f in files if f.startswith("members/") and f.endswith("flotilla.db-wal")]
    assert member_dbs, sorted(files)


def test_up_foreground_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    d = tmp_path / "fg"
    proc = subprocess.Popen([FLOTILLA, "up", "--data-dir", str(d), "--port", "0", "--members", "1",
                             "--no-default-taint-policy"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        eventually(lambda: (d / "up.pid").read_text(), "the pid file", timeout=60)
        k = Kubectl(d / "kubeconfig", tmp_path)
        assert get(k, "clustertaintpolicies")["items"] == []
        os.kill(proc.pid, 15)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "stopped" in out
    assert not (d / "up.pid").exists()
