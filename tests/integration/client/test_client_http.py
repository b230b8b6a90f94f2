"""HTTP transport specifics: TLS and tokens from kubeconfigs, connection failures, retries, timeouts."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from flotilla.client import ApiException, Client, ConnectionFailed
from flotilla.kube.resources import CONFIGMAPS, NAMESPACES
from tests.support.apiserver import ServerThread


@pytest.fixture(scope="module")
def secure_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(tmp_path_factory.mktemp("secure"), storage_url="memory://", secure=True,
                       bookmark_interval=0.5, compaction_interval=0)
    srv.start()
    yield srv
    srv.stop()


def kubeconfig_dict(server: ServerThread) -> dict[str, Any]:
    return yaml.safe_load(server.kubeconfig.read_text())


async def test_tls_and_token_from_kubeconfig(secure_server: ServerThread) -> None:
    assert secure_server.url.startswith("https://")
    async with Client.from_kubeconfig(secure_server.kubeconfig) as c:
        names = [n["metadata"]["name"] for n in (await c.list(NAMESPACES))["items"]]
        assert "default" in names
        created = await c.create(CONFIGMAPS, {"metadata": {"name": "tls"}, "data": {"a": "1"}}, "default")
        async with c.watch(CONFIGMAPS, "default", resource_version=created["metadata"]["resourceVersion"]) as w:
            await c.patch(CONFIGMAPS, "tls", {"data": {"a": "2"}}, namespace="default")
            async with asyncio.timeout(5):
                async for ev in w:
                    if ev.type == "MODIFIED":
                        assert ev.object["data"] == {"a": "2"}
                        break


async def test_bad_token_is_unauthorized(secure_server: ServerThread) -> None:
    cfg = kubeconfig_dict(secure_server)
    cfg["users"][0]["user"]["token"] = "not-the-token"
    async with Client.from_kubeconfig(cfg) as c:
        with pytest.raises(ApiException) as err:
            await c.list(NAMESPACES)
    assert err.value.status == 401 and err.value.reason == "Unauthorized"
    assert not isinstance(err.value, ConnectionFailed)


async def test_client_certificate_instead_of_a_token(secure_server: ServerThread) -> None:
    import base64

    from flotilla.apiserver.tls import CertPaths, issue_client_cert

    cert, key = issue_client_cert(CertPaths.under(secure_server.config.data_dir / "pki"), "carol",
                                  ["system:masters"])
    cfg = kubeconfig_dict(secure_server)
    cfg["users"][0]["user"] = {"client-certificate-data": base64.b64encode(cert).decode(),
                               "client-key-data": base64.b64encode(key).decode()}
    async with Client.from_kubeconfig(cfg) as c:
        assert (await c.get(NAMESPACES, "default"))["metadata"]["name"] == "default"


async def test_insecure_skip_verify_and_untrusted_ca(secure_server: ServerThread) -> None:
    cfg = kubeconfig_dict(secure_server)
    cluster = cfg["clusters"][0]["cluster"]
    ca = cluster.pop("certificate-authority-data")
    cluster["insecure-skip-tls-verify"] = True
    async with Client.from_kubeconfig(cfg) as c:
        assert (await c.get(NAMESPACES, "default"))["metadata"]["name"] == "default"
    del cluster["insecure-skip-tls-verify"]  # system trust store: the self-signed CA is not in it
    async with Client.from_kubeconfig(cfg) as c:
        with pytest.raises(ConnectionFailed) as err:
            await c.get(NAMESPACES, "default")
    assert err.value.status == 0
    assert ca


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plain_kubeconfig(url: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }


async def test_connection_refused_is_connection_failed() -> None:
    async with Client.from_kubeconfig(plain_kubeconfig(f"http://127.0.0.1:{free_port()}"), read_retries=1) as c:
        with pytest.raises(ConnectionFailed) as err:
            await c.get(NAMESPACES, "default")
        assert err.value.status == 0 and "127.0.0.1" in err.value.message
        with pytest.raises(ConnectionFailed):
            await c.create(CONFIGMAPS, {"metadata": {"name": "x"}}, "default")
        with pytest.raises(ConnectionFailed):
            async with c.watch(CONFIGMAPS, "default") as w:
                await w.__anext__()


class FlakyServer:
    """Drops the connection of every other request without answering; counts requests; can be slow."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.delay = 0.0
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.method)
        if len(self.requests) % 2 == 1:
            assert request.transport is not None
            request.transport.close()
            await asyncio.sleep(0.1)
            return web.Response(status=500)
        if self.delay:
            await asyncio.sleep(self.delay)
        return web.json_response({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "default"}})

    async def start(self) -> FlakyServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def flaky() -> AsyncIterator[FlakyServer]:
    srv = await FlakyServer().start()
    yield srv
    await srv.stop()


async def test_reads_are_retried_after_a_dropped_connection_writes_are_not(flaky: FlakyServer) -> None:
    async with Client.from_kubeconfig(plain_kubeconfig(flaky.url)) as c:
        assert (await c.get(NAMESPACES, "default"))["metadata"]["name"] == "default"
        assert flaky.requests == ["GET", "GET"]
        with pytest.raises(ConnectionFailed):
            await c.create(NAMESPACES, {"metadata": {"name": "x"}})
        assert flaky.requests == ["GET", "GET", "POST"]


async def test_request_timeout(flaky: FlakyServer, tmp_path: Path) -> None:
    flaky.delay = 5.0
    flaky.requests.append("skip")  # the next request is answered (slowly), not dropped
    async with Client.from_kubeconfig(plain_kubeconfig(flaky.url), request_timeout=0.3, read_retries=0) as c:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ConnectionFailed) as err:
            await c.get(NAMESPACES, "default")
        assert err.value.reason == "Timeout" and loop.time() - started < 2
