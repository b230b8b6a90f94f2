"""What the read-only group may read on a ``flotilla apiserver`` process (secure by default), asked with the
real kubectl.

The tokens are made as ``flotilla up`` makes them (an admin and a ``viewer`` in ``flotilla:viewers``); the
admin stores a member's credentials in a ``karmada-cluster`` Secret, as ``flotilla join`` does. The viewer then reads
every kind it needs (``get all -A``, Clusters) but no Secret, by get, list or watch, in one namespace or all, and
``kubectl auth can-i`` (a protobuf SelfSubjectAccessReview) says so too. ``/metrics`` is the admin's only.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flotilla.client.kubeconfig import write_kubeconfig
from flotilla.local.secure import ensure_tokens
from tests.support.apiserver import Kubectl, ServerProcess
from tests.support.metrics import parse_exposition

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-cluster"}}
MEMBER_TOKEN = "member1-admin-token-that-a-viewer-must-not-see"
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "member1", "namespace": "karmada-cluster"},
          "stringData": {"token": MEMBER_TOKEN}}
CLUSTER = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "member1"},
           "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push",
                    "secretRef": {"namespace": "karmada-cluster", "name": "member1"}}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


@dataclass
class Secure:
    server: ServerProcess
    admin: Kubectl
    viewer: Kubectl


@pytest.fixture
def secure(tmp_path: Path) -> Iterator[Secure]:
    data = tmp_path / "cp"
    _, viewer_token = ensure_tokens(data)
    server = ServerProcess(data, "sqlite://").start()
    try:
        home = tmp_path / "home"
        home.mkdir()
        viewer_config = write_kubeconfig(tmp_path / "viewer.kubeconfig", server=server.url, context="viewer",
                                         token=viewer_token, ca_pem=(data / "pki" / "ca.crt").read_bytes())
        admin = Kubectl(server.kubeconfig, home)
        for obj in (NAMESPACE, SECRET, CLUSTER, DEPLOYMENT):
            admin.run("apply", "-f", "-", input=json.dumps(obj))
        yield Secure(server, admin, Kubectl(viewer_config, home))
    finally:
        server.stop()


def test_viewer_gets_403_for_secrets_everywhere_but_reads_the_rest(secure: Secure) -> None:
    viewer, admin = secure.viewer, secure.admin
    denied = {
        "list -A": (["get", "secrets", "-A"],
                    'secrets is forbidden: User "viewer" cannot list resource "secrets" in API group "" at the '
                    'cluster scope'),
        "list in karmada-cluster": (["get", "secrets", "-n", "karmada-cluster"],
                                    'cannot list resource "secrets" in API group "" in the namespace '
                                    '"karmada-cluster"'),
        "get": (["get", "secret", "member1", "-n", "karmada-cluster", "-o", "json"],
                'secrets "member1" is forbidden: User "viewer" cannot get resource "secrets"'),
        "watch": (["get", "--raw", "/api/v1/namespaces/karmada-cluster/secrets?watch=true"],
                  'cannot watch resource "secrets"'),
        "watch -A": (["get", "--raw", "/api/v1/secrets?watch=1&timeoutSeconds=1"], 'cannot watch resource "secrets"'),
        "list in default": (["get", "secrets", "-n", "default"], 'cannot list resource "secrets"'),
    }
    for what, (args, message) in denied.items():
        r = viewer.run(*args, check=False, timeout=30)
        assert r.returncode != 0, f"{what}: the viewer read Secrets: {r.stdout}"
        assert message in r.stderr and "Forbidden" in r.stderr, (what, r.stderr)
        assert MEMBER_TOKEN not in r.stdout + r.stderr

    # what a viewer needs is still there
    everything = viewer.run("get", "all", "-A", "-o", "name")
    assert "deployment.apps/web" in everything.stdout.split()
    assert viewer.run("get", "clusters", "-o", "name").stdout.split() == ["cluster.cluster.karmada.io/member1"]
    assert viewer.run("get", "namespaces", "karmada-cluster", "-o", "name").stdout.strip() == \
        "namespace/karmada-cluster"
    # the admin reads the Secret (so the viewer's 403s are about the viewer, not about the Secret being absent)
    assert "token" in json.loads(admin.run("get", "secret", "member1", "-n", "karmada-cluster", "-o",
                                           "json").stdout)["data"]


def test_viewer_auth_can_i_says_no_for_secrets_and_yes_for_clusters(secure: Secure) -> None:
    def can(k: Kubectl, *query: str) -> str:
        return k.run("auth", "can-i", *query, check=False).stdout.strip()

    asked = {q: can(secure.viewer, *q.split()) for q in (
        "list secrets -A", "get secrets -n karmada-cluster", "watch secrets -n default",
        "get secrets/member1 -n karmada-cluster", "get * -n default", "create serviceaccounts/token -n default",
        "list clusters.cluster.karmada.io", "get deployments -n default", "list works.work.karmada.io -A")}
    assert asked == {"list secrets -A": "no", "get secrets -n karmada-cluster": "no",
                     "watch secrets -n default": "no", "get secrets/member1 -n karmada-cluster": "no",
                     "get * -n default": "no", "create serviceaccounts/token -n default": "no",
                     "list clusters.cluster.karmada.io": "yes", "get deployments -n default": "yes",
                     "list works.work.karmada.io -A": "yes"}
    assert can(secure.admin, "list", "secrets", "-A") == "yes"


def test_metrics_are_for_admins_only_and_count_the_viewers_refused_reads(secure: Secure) -> None:
    denied = secure.viewer.run("get", "--raw", "/metrics", check=False)
    assert denied.returncode != 0 and 'User "viewer" cannot get path "/metrics"' in denied.stderr, denied.stderr
    secure.viewer.run("get", "secrets", "-n", "karmada-cluster", check=False)
    context = ssl.create_default_context(cafile=str(secure.server.data_dir / "pki" / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(secure.server.url + "/metrics", context=context, timeout=10)
    assert anonymous.value.code == 401
    text = secure.admin.run("get", "--raw", "/metrics").stdout
    refused = [line for line in text.splitlines() if line.startswith("apiserver_request_total{")
               and 'verb="LIST"' in line and 'resource="secrets"' in line and 'code="403"' in line]
    assert refused and float(refused[0].rsplit(" ", 1)[1]) >= 1, refused
    requests = parse_exposition(text)["apiserver_request_total"].samples

    def scraped(code: str) -> bool:
        want = {"subresource": "/metrics", "scope": "", "component": "apiserver", "code": code}
        return any(want.items() <= labels.items() for _, labels, _ in requests)

    assert scraped("403")
    assert scraped("401")
