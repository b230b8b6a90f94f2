"""``flotilla apiserver`` serves its own Prometheus metrics on ``/metrics``, scraped from a real process after real
kubectl calls: requests counted by verb, resource, scope and code, their latency, in-flight requests, the store's
size."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from tests.support.apiserver import Kubectl, ServerProcess

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120)]

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}}


def scrape(url: str) -> dict[str, float]:
    """``{'name{labels}': value}`` of every sample."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def sample(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for key, value in samples.items():
        metric, _, rest = key.partition("{")
        if metric != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', rest))
        if all(have.get(k) == v for k, v in labels.items()):
            total += value
    return total


def test_metrics_count_and_time_kubectls_requests_by_verb_resource_and_code(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "cp", "sqlite://", extra=["--insecure"]).start()
    try:
        k = Kubectl(server.kubeconfig, tmp_path)
        k.run("apply", "-f", "-", input=json.dumps(CM))
        k.run("get", "configmaps")  # discovery happens here, before the first scrape
        before = scrape(server.url)
        lists = 4
        for _ in range(lists):
            k.run("get", "configmaps", "-n", "default")
        missing = k.run("get", "--raw", "/api/v1/namespaces/default/configmaps/nope", check=False)  # one GET
        assert missing.returncode != 0
        k.run("delete", "configmap", "a", "-n", "default", "--wait=false")  # no GET waiting for it to go
        after = scrape(server.url)

        def delta(name: str, **labels: str) -> float:
            return sample(after, name, **labels) - sample(before, name, **labels)

        cms = {"resource": "configmaps", "group": "", "version": "v1", "component": "apiserver"}
        assert delta("apiserver_request_total", verb="LIST", scope="namespace", code="200", **cms) == lists
        assert delta("apiserver_request_total", verb="GET", scope="resource", code="404", **cms) == 1
        assert delta("apiserver_request_total", verb="DELETE", scope="resource", code="200", **cms) == 1
        assert delta("apiserver_request_duration_seconds_count", verb="LIST", scope="namespace", **cms) == lists
        # every LIST took a positive time, within the histogram's +Inf bucket and its sum
        assert delta("apiserver_request_duration_seconds_sum", verb="LIST", scope="namespace", **cms) > 0
        assert delta("apiserver_request_duration_seconds_bucket", verb="LIST", scope="namespace", le="+Inf",
                     **cms) == lists
        # the first scrape is itself counted, as a non-resource request
        assert delta("apiserver_request_total", verb="GET", subresource="/metrics", code="200") == 1
        # while it answers, the scrape is the one read-only request in flight
        assert sample(after, "apiserver_current_inflight_requests", request_kind="readOnly") == 1
        assert sample(after, "apiserver_current_inflight_requests", request_kind="mutating") == 0
        assert sample(after, "apiserver_storage_size_bytes", storage_cluster_id="sqlite") > 0
    finally:
        server.stop()
