"""Two API servers in one process (as under ``flotilla up``) each serve their own ``/metrics``: a request to one is
counted there only, with kube-apiserver's names and labels, the process metrics beside them, and nothing lands in
prometheus_client's global registry."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import prometheus_client
import pytest

from flotilla.observability.metrics import CONTENT_TYPE
from tests.support.apiserver import ServerThread
from tests.support.metrics import Family, check_histograms, parse_exposition

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
LIST_CONFIGMAPS = {"verb": "LIST", "group": "", "version": "v1", "resource": "configmaps", "subresource": "",
                   "scope": "namespace", "component": "apiserver"}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[ServerThread, ServerThread]]:
    a = ServerThread(tmp_path / "a").start()
    b = ServerThread(tmp_path / "b").start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def get(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def scrape(server: ServerThread) -> dict[str, Family]:
    content_type, text = get(server.url + "/metrics")
    assert content_type == CONTENT_TYPE
    return parse_exposition(text)


def listed(families: dict[str, Family]) -> float:
    return sum(v for n, labels, v in families["apiserver_request_total"].samples
               if n == "apiserver_request_total" and labels == {**LIST_CONFIGMAPS, "code": "200"})


def test_each_api_server_in_a_process_counts_its_own_requests(servers: tuple[ServerThread, ServerThread]) -> None:
    a, b = servers
    for _ in range(3):
        get(a.url + CONFIGMAPS)
    get(b.url + CONFIGMAPS)
    fa, fb = scrape(a), scrape(b)
    assert listed(fa) == 3 and listed(fb) == 1
    for families in (fa, fb):
        assert {n: f.type for n, f in families.items() if not n.startswith("process_")} == {
            "apiserver_request_total": "counter", "apiserver_request_duration_seconds": "histogram",
            "apiserver_current_inflight_requests": "gauge", "apiserver_longrunning_requests": "gauge"}
        assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"} <= set(families)
        check_histograms(families)
        # the scrape itself is the one read-only request in flight
        assert families["apiserver_current_inflight_requests"].value(
            "apiserver_current_inflight_requests", request_kind="readOnly") == 1
        assert families["apiserver_longrunning_requests"].value("apiserver_longrunning_requests", verb="WATCH") == 0
    assert fa["apiserver_request_duration_seconds"].value("apiserver_request_duration_seconds_count",
                                                          **LIST_CONFIGMAPS) == 3
    assert fb["apiserver_request_duration_seconds"].value("apiserver_request_duration_seconds_count",
                                                          **LIST_CONFIGMAPS) == 1
    assert listed(scrape(a)) == 3  # a second scrape counts the same: nothing shared, nothing reset
    assert prometheus_client.REGISTRY.get_sample_value("apiserver_request_total",
                                                       {**LIST_CONFIGMAPS, "code": "200"}) is None
