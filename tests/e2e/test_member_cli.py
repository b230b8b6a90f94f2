"""`flotilla member` and `flotilla sim fault` as real processes: several members per process with their
kubeconfigs, fault injection from another process, SIGSTOP/SIGCONT, the shared history file. The fault tests
speak raw HTTP to the members (--insecure); a member started without it serves TLS and requires its token."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from flotilla.member.history import overlaps, read_history
from tests.support.apiserver import Kubectl

FLOTILLA = str(Path(sys.executable).parent / "flotilla")


def free_port_run(n: int) -> int:
    """A port P such that P..P+n-1 are free right now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


def start_members(data_dir: Path, *args: str, names: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([FLOTILLA, "member", "--data-dir", str(data_dir), "--ready-delay", "0.2", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not all((data_dir / n / "admin.json").exists() for n in names):
        if proc.poll() is not None:
            raise AssertionError(f"flotilla member exited: {proc.stdout.read() if proc.stdout else ''}")
        assert time.monotonic() < deadline, "members did not start in 30 s"
        time.sleep(0.05)
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def sim_fault(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLOTILLA, "sim", "fault", *args, "--data-dir", str(data_dir)], capture_output=True,
                          text=True, timeout=30)


@pytest.fixture
def three(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, int]]:
    base = free_port_run(3)
    data = tmp_path / "d"
    proc = start_members(data, "--insecure", "--count", "3", "--port", str(base), "--progress-deadline", "1",
                         names=["member1", "member2", "member3"])
    yield proc, data, base
    stop(proc)


def test_three_members_in_one_process(three: tuple[subprocess.Popen[str], Path, int], tmp_path: Path) -> None:
    proc, data, base = three
    admins = [json.loads((data / f"member{i}" / "admin.json").read_text()) for i in (1, 2, 3)]
    assert [a["url"] for a in admins] == [f"http://127.0.0.1:{base + i}" for i in range(3)]
    assert len({a["admin_url"] for a in admins}) == 1 and admins[0]["pid"] == proc.pid
    for i in (1, 2, 3):
        kc = yaml.safe_load((data / f"member{i}" / "kubeconfig").read_text())
        assert kc["current-context"] == f"member{i}"
        assert http_get(f"http://127.0.0.1:{base + i - 1}/readyz") == (200, "ok")

    kubectl = Kubectl(data / "member2" / "kubeconfig", tmp_path / "home")
    kubectl.run("apply", "-f", "-", input="""
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "postgres:16"}]}
""")
    kubectl.run("rollout", "status", "statefulset/db", "--timeout=20s")

    # fault injection from another process
    out = sim_fault(data, "member2", "--mode", "down")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["mode"] == "down"
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(f"http://127.0.0.1:{base + 1}/version", timeout=3)
    assert isinstance(err.value.reason, ConnectionRefusedError)
    assert http_get(f"http://127.0.0.1:{base}/readyz") == (200, "ok")
    assert kubectl.run("get", "ns", check=False).returncode != 0

    out = sim_fault(data, "member2", "--mode", "unready")
    assert out.returncode == 0 and json.loads(out.stdout)["mode"] == "unready"
    assert http_get(f"http://127.0.0.1:{base + 1}/readyz")[0] == 500  # listening again, same port, unready
    out = sim_fault(data, "member2", "--mode", "slow", "--latency", "0.4")
    state = json.loads(out.stdout)
    assert (state["mode"], state["latency"], state["ready"]) == ("slow", 0.4, True)
    t0 = time.monotonic()
    http_get(f"http://127.0.0.1:{base + 1}/version")
    assert time.monotonic() - t0 >= 0.4
    assert sim_fault(data, "member2", "--mode", "recover").returncode == 0
    assert "db" in kubectl.run("get", "sts").stdout

    bad = sim_fault(data, "member9", "--mode", "down")
    assert bad.returncode == 1 and "member9" in bad.stderr

    # a clean stop closes the running intervals in the shared history file and removes admin.json
    proc.terminate()
    assert proc.wait(15) == 0
    intervals = read_history(data / "history.jsonl")
    db = [i for i in intervals if i.name == "db"]
    assert len(db) == 1 and db[0].member == "member2" and db[0].end is not None
    assert overlaps(intervals) == []
    assert not (data / "member2" / "admin.json").exists()


def test_sigstop_freezes_a_member_process(tmp_path: Path) -> None:
    data = tmp_path / "d"
    proc = start_members(data, "--insecure", "--name", "solo", names=["solo"])
    try:
        url = json.loads((data / "solo" / "admin.json").read_text())["url"]
        assert http_get(url + "/version")[0] == 200
        os.kill(proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises((TimeoutError, urllib.error.URLError)) as err:
            urllib.request.urlopen(url + "/version", timeout=1)
        if isinstance(err.value, urllib.error.URLError):
            assert isinstance(err.value.reason, TimeoutError)  # a timeout, not a refusal
        assert time.monotonic() - t0 >= 0.9
        os.kill(proc.pid, signal.SIGCONT)
        assert http_get(url + "/version")[0] == 200
    finally:
        stop(proc)


def test_member_help_documents_sigstop() -> None:
    out = subprocess.run([FLOTILLA, "member", "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "kill -STOP" in out and "--broken-image-pattern" in out and "--checkpoint-dir" in out


def test_a_member_is_secure_by_default(tmp_path: Path) -> None:
    data = tmp_path / "d"
    proc = start_members(data, "--name", "solo", names=["solo"])
    try:
        url = json.loads((data / "solo" / "admin.json").read_text())["url"]
        assert url.startswith("https://"), url
        kubeconfig = data / "solo" / "kubeconfig"
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        assert "namespace/default" in Kubectl(kubeconfig, tmp_path / "home").run("get", "ns", "-o", "name").stdout
        context = ssl.create_default_context(cafile=str(data / "solo" / "pki" / "ca.crt"))
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url + "/api/v1/namespaces", context=context, timeout=5)
        assert refused.value.code == 401
    finally:
        stop(proc)
