"""What redacting Works costs a viewer's list on a ``--secure`` API server: nothing for Works without a Secret.

1,000 Works (a Deployment and a ConfigMap each) are listed over HTTPS as the admin (no redaction at all) and as a
viewer (each Work is looked through for Secrets), in alternation within one run; the viewer is served the very
same bytes and its median time stays within a generous ratio of the admin's (the cores are shared, so only a
ratio within one run means anything).
"""

from __future__ import annotations

import ssl
import statistics
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.local.secure import ensure_tokens
from tests.support.apiserver import ServerThread

pytestmark = pytest.mark.timeout(300)

NS = "karmada-es-member1"
WORKS = 1000
ROUNDS = 15
RATIO = 1.5


def _work(i: int) -> dict[str, Any]:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": f"web-{i}", "namespace": "default", "labels": {"app": "web"}},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}},
                                        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"web-{i}", "namespace": "default"},
                 "data": {"mode": "fast"}}
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": f"web-{i}", "namespace": NS},
            "spec": {"workload": {"manifests": [deployment, configmap]}}}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerThread, str, str]]:
    _, viewer = ensure_tokens(tmp_path)
    srv = ServerThread(tmp_path, "memory://", secure=True, compaction_interval=0).start()
    try:
        assert srv.server is not None and srv.server.storage is not None and srv.server.admin_token
        storage = srv.server.storage

        async def fill() -> None:
            ns_rt = storage.types.lookup("", "v1", "namespaces")
            work_rt = storage.types.lookup("work.karmada.io", "v1alpha1", "works")
            assert ns_rt is not None and work_rt is not None
            await storage.create(ns_rt, None, {"metadata": {"name": NS}})
            for i in range(WORKS):
                await storage.create(work_rt, NS, _work(i))

        srv.call(fill(), timeout=120)
        yield srv, srv.server.admin_token, viewer
    finally:
        srv.stop()


def test_listing_works_without_secrets_costs_a_viewer_no_more_than_the_admin(
        server: tuple[ServerThread, str, str]) -> None:
    srv, admin, viewer = server
    context = ssl.create_default_context(cafile=str(Path(srv.config.data_dir) / "pki" / "ca.crt"))

    def timed_list(token: str) -> tuple[float, bytes]:
        request = urllib.request.Request(f"{srv.url}/apis/work.karmada.io/v1alpha1/namespaces/{NS}/works",
                                         headers={"Authorization": f"Bearer {token}"})
        start = time.perf_counter()
        with urllib.request.urlopen(request, context=context, timeout=60) as resp:
            body = bytes(resp.read())
        return time.perf_counter() - start, body

    timed_list(admin)  # warm up: the decoded objects are cached for both
    times: dict[str, list[float]] = {"admin": [], "viewer": []}
    bodies: dict[str, bytes] = {}
    for _ in range(ROUNDS):
        for who, token in (("admin", admin), ("viewer", viewer)):
            took, bodies[who] = timed_list(token)
            times[who].append(took)
    assert bodies["viewer"] == bodies["admin"]
    assert bodies["admin"].count(b'"kind":"Work"') == WORKS
    admin_median, viewer_median = statistics.median(times["admin"]), statistics.median(times["viewer"])
    print(f"list of {WORKS} Works: admin {admin_median * 1000:.1f} ms, viewer {viewer_median * 1000:.1f} ms "
          f"(ratio {viewer_median / admin_median:.3f})")
    assert viewer_median <= RATIO * admin_median, times
