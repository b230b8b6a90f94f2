"""Watch over HTTP: framing, bookmarks, timeouts, tables, 410 as an ERROR event."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from tests.support.apiserver import ServerThread

JSON = {"Content-Type": "application/json"}


def stream(url: str, accept: str = "application/json") -> list[dict[str, Any]]:
    req = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return [json.loads(line) for line in resp.read().splitlines() if line.strip()]


def test_quiet_watch_sends_bookmarks_and_ends_at_timeout(server: ServerThread) -> None:
    base = f"{server.url}/api/v1/namespaces/default/configmaps"
    rv = json.loads(urllib.request.urlopen(base).read())["metadata"]["resourceVersion"]
    started = time.monotonic()
    events = stream(f"{base}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3")
    elapsed = time.monotonic() - started
    assert 2.5 <= elapsed < 10
    assert events and {e["type"] for e in events} == {"BOOKMARK"}
    assert all(int(e["object"]["metadata"]["resourceVersion"]) >= int(rv) for e in events)
    assert events[0]["object"]["kind"] == "ConfigMap"


def test_watch_without_bookmarks_sends_none(server: ServerThread) -> None:
    base = f"{server.url}/api/v1/namespaces/default/configmaps"
    rv = json.loads(urllib.request.urlopen(base).read())["metadata"]["resourceVersion"]
    assert stream(f"{base}?watch=true&resourceVersion={rv}&timeoutSeconds=2") == []


def test_watch_from_compacted_revision_gets_an_expired_error_event(server: ServerThread) -> None:
    base = f"{server.url}/api/v1/namespaces/default/configmaps"
    body = json.dumps({"metadata": {"name": "compacted-watch"}}).encode()
    created = json.loads(urllib.request.urlopen(urllib.request.Request(base, data=body, method="POST", headers=JSON)).read())
    old_rv = created["metadata"]["resourceVersion"]
    for i in range(3):
        patch = json.dumps({"data": {"i": str(i)}}).encode()
        urllib.request.urlopen(urllib.request.Request(
            f"{base}/compacted-watch", data=patch, method="PATCH",
            headers={"Content-Type": "application/merge-patch+json"})).read()
    store = server.server.store  # type: ignore[union-attr]
    server.call(store.compact(server.call(store.current_revision())))
    events = stream(f"{base}?watch=true&resourceVersion={old_rv}&timeoutSeconds=5")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["code"] == 410 and status["reason"] == "Expired"


def test_watch_with_table_accept_streams_table_rows(server: ServerThread) -> None:
    base = f"{server.url}/api/v1/namespaces/default/configmaps"
    events = stream(f"{base}?watch=true&fieldSelector=metadata.name=kube-root-ca-none&timeoutSeconds=1",
                    accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert events == []
    body = json.dumps({"metadata": {"name": "table-watch"}, "data": {"a": "1"}}).encode()
    urllib.request.urlopen(urllib.request.Request(base, data=body, method="POST", headers=JSON)).read()
    events = stream(f"{base}?watch=true&fieldSelector=metadata.name=table-watch&resourceVersion=0&timeoutSeconds=1",
                    accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert events[0]["type"] == "ADDED"
    table = events[0]["object"]
    assert table["kind"] == "Table" and table["rows"][0]["cells"][0] == "table-watch"
    assert [c["name"] for c in table["columnDefinitions"]][:2] == ["Name", "Data"]
