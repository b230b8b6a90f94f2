"""The dashboard served by a real API server (in this process): authentication, the one-time token, 401s,
paging / filter / search on the server, and the Server-Sent Events stream delivering a change."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from flotilla.api import resources as R
from flotilla.apiserver.auth import MASTERS_GROUP, format_token_line
from flotilla.apiserver.inprocess import in_process_client
from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.client import Client
from flotilla.kube.resources import NAMESPACES

VIEWER_TOKEN = "viewer-token-for-the-dashboard-tests"
NOBODY_TOKEN = "nobody-token-for-the-dashboard-tests"
ADMIN_TOKEN = "admin-token-for-the-dashboard-tests"


def cluster(name: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"syncMode": "Push", "apiEndpoint": f"https://{name}.example:6443"}}


def binding(name: str, namespace: str, clusters: list[str], tasks: list[dict[str, Any]] | None = None
            ) -> dict[str, Any]:
    spec: dict[str, Any] = {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                         "namespace": namespace},
                            "clusters": [{"name": c, "replicas": 1} for c in clusters]}
    if tasks:
        spec["gracefulEvictionTasks"] = tasks
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-deployment", "namespace": namespace}, "spec": spec}


async def _server(tmp_path: Path, secure: bool) -> ApiServer:
    if secure:
        tmp_path.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tokens.csv").write_text(
            format_token_line(ADMIN_TOKEN, "admin", "1", [MASTERS_GROUP])
            + format_token_line(VIEWER_TOKEN, "viewer", "2", ["flotilla:viewers"])
            + format_token_line(NOBODY_TOKEN, "nobody", "3"))
    return await ApiServer(ApiServerConfig(data_dir=tmp_path, port=0, secure=secure)).start()


@pytest.fixture
async def open_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    api = await _server(tmp_path, secure=False)
    try:
        yield api
    finally:
        await api.stop()


@pytest.fixture
async def secure_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    api = await _server(tmp_path, secure=True)
    try:
        yield api
    finally:
        await api.stop()


def browser() -> aiohttp.ClientSession:
    """A client that keeps cookies for 127.0.0.1 (as a browser does) and trusts the test server's CA."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                 connector=aiohttp.TCPConnector(ssl=False))


async def eventually_text(session: aiohttp.ClientSession, url: str, needle: str, timeout: float = 5.0,
                          headers: dict[str, str] | None = None) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        async with session.get(url, headers=headers) as r:
            text = await r.text()
        if needle in text or asyncio.get_running_loop().time() > deadline:
            assert needle in text, text
            return text
        await asyncio.sleep(0.05)


def client_of(api: ApiServer) -> Client:
    assert api.storage is not None
    return in_process_client(api.storage)


async def test_without_secure_the_pages_are_open_and_bad_input_is_a_clear_error(open_server: ApiServer) -> None:
    c = client_of(open_server)
    await c.create(R.CLUSTERS, cluster("member1"))
    await c.create(R.RESOURCE_BINDINGS, binding("web", "default", ["member1"]), "default")
    base = open_server.url + "/dashboard"
    async with browser() as s:
        fleet = await eventually_text(s, base + "/", 'id="cluster-member1"')
        assert "Content-Security-Policy" in (await s.get(base + "/")).headers
        assert "https://member1.example:6443" in fleet
        page = await eventually_text(s, base + "/workloads", 'id="wl-default-web-deployment"')
        assert "<html" in page and "Deployment/web" in page
        async with s.get(base + "/workloads", headers={"HX-Request": "true"}) as r:  # the live fragment only
            fragment = await r.text()
        assert fragment.lstrip().startswith('<div id="live"') and "<html" not in fragment
        async with s.get(base + "/workloads", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"}) as r:
            assert "<html" in await r.text()  # back in the browser's history: the whole page
        async with s.get(base + "/workloads/default/web-deployment") as r:
            assert r.status == 200 and "Eviction tasks in progress" in await r.text()
        async with s.get(base + "/timeline?window=15m") as r:
            assert r.status == 200
        for path, status, said in [
            ("/workloads?page=abc", 400, "page: a whole number"),
            ("/workloads?size=7", 400, "size: one of 10, 25, 50, 100, 200"),
            ("/workloads?state=burning", 400, "state: one of all, moving, unhealthy"),
            ("/workloads?sort=name", 400, "unknown query parameter &#39;sort&#39;"),
            ("/workloads?q=" + "x" * 300, 400, "q: at most 200 characters"),
            ("/timeline?window=2y", 400, "window: one of 15m, 1h, 6h, 24h"),
            ("/timeline?cluster=nope", 400, "no cluster named"),
            ("/workloads/default/nope", 404, "no workload default/nope"),
            ("/events?topic=secrets", 400, "topic: fleet, workloads, timeline"),
            ("/events?topic=fleet&since=%C2%B2", 400, "since: a whole number"),
            ("/workloads?page=%C2%B2", 400, "page: a whole number"),
            ("/static/../../etc/passwd", 404, ""),
        ]:
            async with s.get(base + path) as r:
                text = await r.text()
                assert r.status == status and said in text, (path, r.status, text[:300])
    await c.close()


async def test_with_secure_no_credentials_get_401_and_the_login_page_without_any_data(
        secure_server: ApiServer) -> None:
    c = client_of(secure_server)
    await c.create(R.CLUSTERS, cluster("member1"))
    await c.create(R.RESOURCE_BINDINGS, binding("web", "default", ["member1"]), "default")
    base = secure_server.url + "/dashboard"
    async with browser() as s:
        for path in ("/", "/workloads", "/workloads/default/web-deployment", "/timeline"):
            async with s.get(base + path) as r:
                text = await r.text()
                assert r.status == 401 and "Log in" in text, path
                assert "member1" not in text and "Deployment/web" not in text, path  # only the path it was asked
        async with s.get(base + "/workloads", headers={"HX-Request": "true"}) as r:
            assert r.status == 401 and "member1" not in await r.text()
        async with s.get(base + "/events?topic=fleet") as r:
            assert r.status == 401
        async with s.get(base + "/", headers={"Authorization": "Bearer wrong"}) as r:
            assert r.status == 401 and "That token is not valid." in await r.text()
        async with s.get(base + "/static/htmx.min.js") as r:  # the static files carry no data
            assert r.status == 200
        # a bearer token works as for the API
        async with s.get(base + "/", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"}) as r:
            assert r.status == 200
        await eventually_text(s, base + "/", "cluster-member1", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"})
    await c.close()


async def test_the_one_time_token_logs_in_once_with_a_strict_httponly_cookie_and_redirects_to_the_clean_url(
        secure_server: ApiServer) -> None:
    url = secure_server.dashboard_url(VIEWER_TOKEN)
    assert url is not None and url.startswith(secure_server.url + "/dashboard/?token=")
    assert secure_server.dashboard_url("not-a-token") is None
    async with browser() as s:
        async with s.get(url.replace("/dashboard/?", "/dashboard/workloads?q=web&"), allow_redirects=False) as r:
            assert r.status == 303
            assert r.headers["Location"] == "/dashboard/workloads?q=web"
            cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/dashboard" in cookie
        assert "Secure" in cookie
        async with s.get(secure_server.url + "/dashboard/workloads?q=web") as r:
            assert r.status == 200 and "Workloads" in await r.text()
    async with browser() as other:  # the same link a second time: spent
        async with other.get(url, allow_redirects=False) as r:
            assert r.status == 401 and "used already" in await r.text()
        async with other.get(secure_server.url + "/dashboard/") as r:
            assert r.status == 401


async def test_the_session_cookie_opens_only_dashboard_reads_never_the_api_nor_a_write(
        secure_server: ApiServer) -> None:
    url = secure_server.dashboard_url(ADMIN_TOKEN)  # even an admin's session
    assert url is not None
    async with browser() as s:
        async with s.get(url) as r:
            assert r.status == 200
        async with s.get(secure_server.url + "/apis/cluster.karmada.io/v1alpha1/clusters") as r:
            assert r.status == 401
        async with s.post(secure_server.url + "/apis/cluster.karmada.io/v1alpha1/clusters",
                          json=cluster("evil")) as r:
            assert r.status == 401
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            async with s.request(method, secure_server.url + "/dashboard/") as r:
                assert r.status == 401, method
        async with s.post(secure_server.url + "/dashboard/login", data={"token": ""}) as r:  # no token: no login
            assert r.status == 401
        async with s.get(secure_server.url + "/dashboard/") as r:
            assert r.status == 200  # the session still reads


async def test_the_login_form_takes_a_bearer_token_refuses_other_origins_and_users_who_may_not_list(
        secure_server: ApiServer) -> None:
    login = secure_server.url + "/dashboard/login"
    async with browser() as s:
        async with s.post(login, data={"token": VIEWER_TOKEN}, headers={"Origin": "https://evil.example"},
                          allow_redirects=False) as r:
            assert r.status == 403
        async with s.post(login, data=b"--x\r\nbroken", headers={"Content-Type": "multipart/form-data; boundary=x"},
                          allow_redirects=False) as r:
            assert r.status == 400 and "could not be read" in await r.text()
        async with s.post(login, data={"token": "wrong"}, allow_redirects=False) as r:
            assert r.status == 401 and "That token is not valid." in await r.text()
        async with s.post(login, data={"token": VIEWER_TOKEN, "next": "https://evil.example/"},
                          headers={"Origin": secure_server.url}, allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/dashboard/"
        async with s.get(secure_server.url + "/dashboard/timeline") as r:
            assert r.status == 200
    async with browser() as s:
        async with s.post(login, data={"token": NOBODY_TOKEN}, allow_redirects=False) as r:
            assert r.status == 403 and "may not see the dashboard" in await r.text()
        async with s.get(secure_server.url + "/dashboard/", headers={"Authorization": f"Bearer {NOBODY_TOKEN}"}) as r:
            assert r.status == 403 and "may not list" in await r.text()


async def test_workloads_are_paged_filtered_and_searched_on_the_server(open_server: ApiServer) -> None:
    c = client_of(open_server)
    for name in ("member1", "member2"):
        await c.create(R.CLUSTERS, cluster(name))
    await c.create(NAMESPACES, {"metadata": {"name": "streaming"}})
    for i in range(120):
        ns = "default" if i % 2 == 0 else "streaming"
        await c.create(R.RESOURCE_BINDINGS, binding(f"app-{i:03d}", ns, ["member1" if i < 100 else "member2"]), ns)
    task = {"fromCluster": "member1", "purgeMode": "Directly", "producer": "TaintManager",
            "reason": "TaintUntolerated", "preservedLabelState": {"jobid": "abc123"}}
    await c.create(R.RESOURCE_BINDINGS, binding("moving", "default", ["member2"], [task]), "default")
    base = open_server.url + "/dashboard/workloads"

    def rows(text: str) -> list[str]:
        return re.findall(r'<tr id="wl-([^"]+)"', text)

    async with browser() as s:
        await eventually_text(s, base + "?q=moving", "wl-default-moving-deployment")
        async with s.get(base + "?size=50&page=3") as r:
            text = await r.text()
        assert len(rows(text)) == 21 and "121 of 121 workloads" in text and "page 3 of 3" in text
        assert rows(text)[0] == "streaming-app-079-deployment"  # by namespace, then name: 61 in default first
        async with s.get(base + "?size=50&page=9") as r:  # past the end: the last page
            assert "page 3 of 3" in await r.text()
        async with s.get(base + "?q=APP-11") as r:  # case-insensitive, on namespace, name, kind and workload
            assert sorted(rows(await r.text())) == sorted(f"{'default' if i % 2 == 0 else 'streaming'}-app-{i:03d}-"
                                                          f"deployment" for i in range(110, 120))
        async with s.get(base + "?namespace=streaming&size=100") as r:
            assert len(rows(await r.text())) == 60
        async with s.get(base + "?cluster=member2&size=100") as r:
            assert len(rows(await r.text())) == 21
        async with s.get(base + "?cluster=member1&size=200") as r:  # placed there, or evicted from there
            assert len(rows(await r.text())) == 101
        async with s.get(base + "?state=moving") as r:
            text = await r.text()
        assert rows(text) == ["default-moving-deployment"]
        assert "jobid=abc123" in text and "from member1" in text
        async with s.get(base + "?state=unhealthy&size=10") as r:  # no member reported any of them healthy
            assert "121 of 121 workloads" in await r.text()
    await c.close()


async def test_the_event_stream_says_changed_when_the_fleet_changes(open_server: ApiServer) -> None:
    c = client_of(open_server)
    base = open_server.url + "/dashboard"
    async with browser() as s:
        async with s.get(base + "/events?topic=fleet") as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
            assert await r.content.readline() == b"retry: 2000\n"
            await c.create(R.CLUSTERS, cluster("member9"))
            async with asyncio.timeout(5):
                while True:
                    line = await r.content.readline()
                    if line.startswith(b"event: "):
                        break
            assert line == b"event: changed\n"
            assert (await r.content.readline()).startswith(b"data: ")
        # a page rendered before a change gives its version; a stream opened later from it says changed at once
        async with s.get(base + "/workloads") as r:
            since = re.search(r"since=(\d+)", await r.text())
        assert since is not None
        await c.create(R.RESOURCE_BINDINGS, binding("late", "default", ["member9"]), "default")
        await asyncio.sleep(0.5)
        async with s.get(base + f"/events?topic=workloads&since={since.group(1)}") as r:
            async with asyncio.timeout(2):
                lines = [await r.content.readline() for _ in range(3)]
        assert lines[2] == b"event: changed\n", lines
    await c.close()


async def test_a_pull_clusters_agent_lease_and_a_cluster_scoped_workload_have_their_places(
        open_server: ApiServer) -> None:
    from datetime import UTC, datetime

    from flotilla.kube.resources import LEASES

    c = client_of(open_server)
    pull = cluster("member3")
    pull["spec"]["syncMode"] = "Pull"
    await c.create(R.CLUSTERS, pull)
    await c.create(NAMESPACES, {"metadata": {"name": "karmada-cluster"}})
    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await c.create(LEASES, {"metadata": {"name": "member3"},
                            "spec": {"holderIdentity": "member3", "renewTime": renewed}}, "karmada-cluster")
    crb = binding("ns-admin", "", ["member3"])
    crb["kind"] = "ClusterResourceBinding"
    crb["metadata"] = {"name": "ns-admin-clusterrole"}
    crb["spec"]["resource"] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                               "name": "ns-admin"}
    await c.create(R.CLUSTER_RESOURCE_BINDINGS, crb)
    base = open_server.url + "/dashboard"
    async with browser() as s:
        fleet = await eventually_text(s, base + "/", "renewed ")
        row = fleet[fleet.index('id="cluster-member3"'):]
        assert "<td>Pull</td>" in row[:600] and re.search(r"renewed \d+s ago", row[:1500])
        page = await eventually_text(s, base + "/workloads", "wl---ns-admin-clusterrole")
        assert "ClusterRole/ns-admin" in page and "(cluster-scoped)" in page
        async with s.get(base + "/workloads/-/ns-admin-clusterrole") as r:
            assert r.status == 200 and "ClusterRole/ns-admin" in await r.text()
        async with s.head(base + "/workloads") as r:
            assert r.status == 200
    await c.close()


async def test_odd_input_on_every_route_is_answered_never_with_a_server_error(open_server: ApiServer) -> None:
    c = client_of(open_server)
    await c.create(R.CLUSTERS, cluster("member1"))
    await c.create(R.RESOURCE_BINDINGS, binding("web", "default", ["member1"]), "default")
    base = open_server.url + "/dashboard"
    odd = ["", "?", "?page=", "?size=", "?q=%00%ff", "?q=<script>alert(1)</script>", "?state=%C2%B2",
           "?page=1&page=2", "?cluster=%2F..%2F", "?window=", "?window=%00", "?topic=workload:", "?since=-1",
           "?token=", "?token=%00", "?namespace=" + "n" * 5000]
    paths = ["/", "/workloads", "/timeline", "/workloads/default/web-deployment", "/workloads/%2e%2e/x",
             "/workloads/-/nope", "/static/htmx.min.js", "/static/", "/nope"]
    async with browser() as s:
        await eventually_text(s, base + "/workloads", "wl-default-web-deployment")
        for path in paths:
            for query in odd:
                async with s.get(base + path + query, allow_redirects=False) as r:
                    body = await r.text()
                    assert r.status < 500, (path, query, r.status, body[:300])
                    assert "<script>alert(1)</script>" not in body, (path, query)
        async with asyncio.timeout(5):
            async with s.head(base + "/events?topic=fleet") as r:  # answered, not held open
                assert r.status == 200 and r.headers["Content-Type"] == "text/event-stream"
        for topic in ("workload:default/web-deployment", "workload:x", "fleet"):
            async with s.get(base + f"/events?topic={topic}") as r:
                assert r.status == 200
                assert await r.content.readline() == b"retry: 2000\n"
    await c.close()


async def test_the_dashboard_follows_the_api_only_once_a_page_is_opened(open_server: ApiServer) -> None:
    dashboard = open_server.dashboard
    assert dashboard is not None
    assert dashboard.feed.informers == [], "nobody opened the dashboard: nothing is watched for it"
    client = in_process_client(open_server.storage)
    await client.create(R.CLUSTERS, cluster("member9"))
    async with browser() as session, session.get(open_server.url + "/dashboard/") as r:
        assert r.status == 200 and 'id="cluster-member9"' in await r.text()
    assert dashboard.feed.informers, "the first page started the informers"
    started = list(dashboard.feed.informers)
    async with browser() as session, session.get(open_server.url + "/dashboard/workloads") as r:
        assert r.status == 200
    assert dashboard.feed.informers == started, "later pages reuse them"
