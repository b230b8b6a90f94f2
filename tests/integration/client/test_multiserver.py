"""HA clients: one kubeconfig lists every API server replica (``servers.flotilla.io``); when the one in use goes
away, reads, writes that never reached it, and watches move to the next replica, which serves the same etcd."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from flotilla.client import Client, Informer
from flotilla.client.errors import ApiException, ConnectionFailed
from flotilla.client.kubeconfig import KubeconfigError, load_kubeconfig, write_kubeconfig
from flotilla.client.multiserver import MultiServerTransport
from flotilla.kube.resources import CONFIGMAPS
from tests.support.apiserver import KUBECTL, ServerThread
from tests.support.etcd_server import EtcdServer, start_etcd

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    server = start_etcd(tmp_path_factory.mktemp("etcd"), unsafe_no_fsync=True)
    yield server
    server.stop()


@pytest.fixture
def replicas(etcd: EtcdServer, tmp_path: Path) -> Iterator[list[ServerThread]]:
    servers = [ServerThread(tmp_path / name, f"etcd://{etcd.endpoint}").start() for name in ("a", "b")]
    yield servers
    for s in servers:
        if s.server is not None:
            s.stop()


def _kubeconfig(path: Path, servers: list[ServerThread]) -> Path:
    return write_kubeconfig(path, server=servers[0].url, fallback_servers=tuple(s.url for s in servers[1:]))


def _cm(name: str, value: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"k": value}}


def test_kubeconfig_keeps_every_replica_and_kubectl_still_reads_it(replicas: list[ServerThread],
                                                                    tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc", replicas)
    creds = load_kubeconfig(path)
    assert creds.server == replicas[0].url
    assert creds.fallback_servers == (replicas[1].url,)
    (tmp_path / "home").mkdir()
    out = subprocess.run([KUBECTL, "--kubeconfig", str(path), "get", "namespaces", "-o", "name"], check=True,
                         capture_output=True, text=True, env={"HOME": str(tmp_path / "home")}, timeout=30)
    assert "namespace/default" in out.stdout


def test_a_malformed_servers_extension_is_refused_with_what_to_fix(tmp_path: Path) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1", "extensions": [
                  {"name": "servers.flotilla.io", "extension": {"servers": "http://127.0.0.1:2"}}]}}],
              "users": [{"name": "c", "user": {}}], "contexts": [{"name": "c", "context": {"cluster": "c",
                                                                                           "user": "c"}}]}
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeconfigError, match=r"servers\.flotilla\.io needs 'servers: \[URL, \.\.\.\]'"):
        load_kubeconfig(path)


async def test_reads_and_writes_move_to_the_other_replica_when_one_stops(replicas: list[ServerThread],
                                                                         tmp_path: Path) -> None:
    client = Client.from_kubeconfig(_kubeconfig(tmp_path / "kc", replicas))
    try:
        assert isinstance(client.transport, MultiServerTransport)
        await client.create(CONFIGMAPS, _cm("before", "a"), "default")
        replicas[0].stop()
        replicas[0].server = None
        got = await client.get(CONFIGMAPS, "before", "default")  # served by b, from the same etcd
        assert got["data"] == {"k": "a"}
        assert client.transport.server == replicas[1].url
        await client.create(CONFIGMAPS, _cm("after", "b"), "default")
        names = {i["metadata"]["name"] for i in (await client.list(CONFIGMAPS, "default"))["items"]}
        assert {"before", "after"} <= names
    finally:
        await client.close()


async def test_a_watch_resumes_on_the_other_replica(replicas: list[ServerThread], tmp_path: Path) -> None:
    client = Client.from_kubeconfig(_kubeconfig(tmp_path / "kc", replicas))
    writer = Client.from_kubeconfig(replicas[1].kubeconfig)
    seen: set[str] = set()
    changed = asyncio.Event()
    inf = Informer(client, CONFIGMAPS, "default", backoff=(0.05, 0.2))

    def on_add(obj: dict) -> None:
        seen.add(obj["metadata"]["name"])
        changed.set()

    inf.add_handler(on_add)
    inf.start()
    try:
        await writer.create(CONFIGMAPS, _cm("first", "1"), "default")
        async with asyncio.timeout(20):
            while "first" not in seen:
                changed.clear()
                await changed.wait()
        replicas[0].stop()
        replicas[0].server = None
        await writer.create(CONFIGMAPS, _cm("second", "2"), "default")
        async with asyncio.timeout(30):
            while "second" not in seen:
                changed.clear()
                await changed.wait()
        assert client.transport.server == replicas[1].url
    finally:
        await inf.stop()
        await client.close()
        await writer.close()


class _Failing:
    """A transport whose every call fails the way the test says."""

    def __init__(self, server: str, exc: ConnectionFailed | None) -> None:
        self.server = server
        self.exc = exc
        self.calls = 0

    async def create(self, *args: object) -> dict:
        self.calls += 1
        if self.exc is not None:
            raise self.exc
        return {"served_by": self.server}

    async def close(self) -> None:
        return None


def _broken_after_sending() -> ConnectionFailed:
    try:
        raise ConnectionFailed("timed out talking to a", reason="Timeout") from TimeoutError()
    except ConnectionFailed as e:
        return e


async def test_a_write_that_may_have_reached_the_server_is_not_sent_again_elsewhere() -> None:
    a, b = _Failing("a", _broken_after_sending()), _Failing("b", None)
    transport = MultiServerTransport([a, b])  # type: ignore[list-item]
    with pytest.raises(ApiException) as info:
        await transport.create(CONFIGMAPS, "default", _cm("x", "1"), {})
    assert isinstance(info.value, ConnectionFailed)
    assert (a.calls, b.calls) == (1, 0)
