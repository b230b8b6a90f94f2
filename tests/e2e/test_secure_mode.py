"""``flotilla up`` (secure by default) end to end, as a user runs it: TLS with generated CAs, tokens, an admin and a read-only
kubeconfig, members joined over TLS with their tokens. After a failover has run, no credential (the members'
tokens, the control plane's admin and viewer tokens, raw or base64) appears in a log, an Event, the CLI's output or
any object's status: only in the Secrets that hold them (and the kubeconfig/token files that are credentials)."""

from __future__ import annotations

import base64
import csv
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_up_cli import DEPLOYMENT, FLOTILLA, eventually, flotilla, free_port, get
from tests.support.apiserver import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(240)]

POLICY = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
             "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                           "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]},
             "failover": {"cluster": {"purgeMode": "Directly"}}},
}


def _tokens(path: Path) -> list[str]:
    rows = csv.reader(line for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return [row[0] for row in rows if row]


def _forms(secret: str) -> list[str]:
    raw = secret.encode()
    return [secret, base64.b64encode(raw).decode(), base64.b64encode(raw).decode().rstrip("=")]


@pytest.fixture
def secure_up(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "flotilla"
    started = flotilla("up", "--detach", "--data-dir", str(d), "--members", "2", "--port",
                       str(free_port()), "--metrics-bind-address", "0")
    assert started.returncode == 0, started.stderr
    yield d
    flotilla("down", "--data-dir", str(d))


def test_secure_up_serves_tls_with_tokens_and_keeps_credentials_out_of_logs_events_cli_and_status(
        secure_up: Path, tmp_path: Path) -> None:
    d = secure_up
    home = tmp_path / "home"
    home.mkdir()
    admin = Kubectl(d / "kubeconfig", home)
    viewer = Kubectl(d / "viewer.kubeconfig", home)
    for path in (d / "kubeconfig", d / "viewer.kubeconfig", d / "controlplane" / "tokens.csv"):
        assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"
    # the control plane and every member serve https only
    assert admin.run("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}").stdout \
        .startswith("https://127.0.0.1:")
    def both_ready() -> list[dict[str, Any]]:
        ready = [c for c in get(admin, "clusters")["items"]
                 if any(x["type"] == "Ready" and x["status"] == "True" for x in c.get("status", {}).get("conditions", []))]
        assert len(ready) == 2, f"Ready: {[c['metadata']['name'] for c in ready]}"
        return ready

    clusters = eventually(both_ready, "both members Ready over TLS")
    assert len(clusters) == 2
    assert all(c["spec"]["apiEndpoint"].startswith("https://") for c in clusters)
    # read-only: the viewer reads everything and writes nothing
    assert viewer.run("get", "clusters", "-o", "name").stdout.split() == ["cluster.cluster.karmada.io/member1",
                                                                         "cluster.cluster.karmada.io/member2"]
    denied = viewer.run("create", "namespace", "not-allowed", check=False)
    assert denied.returncode != 0 and "Forbidden" in denied.stderr
    # kubectl auth can-i asks the server's authorizer (SelfSubjectAccessReview, sent as protobuf)
    can = {(who, q): k.run("auth", "can-i", *q.split(), check=False).stdout.strip()
           for who, k in (("viewer", viewer), ("admin", admin))
           for q in ("create namespaces", "list clusters.cluster.karmada.io", "delete deployments -n default")}
    assert can == {("viewer", "create namespaces"): "no", ("viewer", "list clusters.cluster.karmada.io"): "yes",
                   ("viewer", "delete deployments -n default"): "no", ("admin", "create namespaces"): "yes",
                   ("admin", "list clusters.cluster.karmada.io"): "yes",
                   ("admin", "delete deployments -n default"): "yes"}
    assert _status_without_token(clusters[0]["spec"]["apiEndpoint"] + "/api/v1/namespaces") == 401  # a member

    # a failover, so that every controller logs and records Events about the members
    admin.run("apply", "-f", "-", input=json.dumps(POLICY))
    admin.run("apply", "-f", "-", input=json.dumps(DEPLOYMENT))
    first = eventually(lambda: get(admin, "resourcebindings", "web-deployment")["spec"]["clusters"][0]["name"],
                       "the Deployment scheduled")
    tainted = subprocess.run([FLOTILLA, "taint", "clusters", first, "fail=now:NoExecute", "--kubeconfig",
                              str(d / "kubeconfig")], capture_output=True, text=True, timeout=30)
    assert tainted.returncode == 0, tainted.stderr
    eventually(lambda: _moved(admin, first), "the Deployment moved to the other member", timeout=60)

    # every credential, as it could be leaked
    secrets: list[str] = []
    for token_file in [d / "controlplane" / "tokens.csv", *(d / "members").glob("*/tokens.csv")]:
        secrets += _tokens(token_file)
    assert len(secrets) >= 4  # admin + viewer of the control plane, one admin per member
    forms = [form for s in secrets for form in _forms(s)]

    outputs: dict[str, str] = {}
    for log in d.rglob("*.log"):
        outputs[str(log)] = log.read_text(errors="replace")
    outputs["events"] = admin.run("get", "events", "-A", "-o", "yaml").stdout
    for name in ("member1", "member2"):
        outputs[f"events in {name}"] = admin.run("--context", name, "get", "events", "-A", "-o", "yaml").stdout
    kinds = [k for k in admin.run("api-resources", "--verbs=list", "-o", "name").stdout.split()
             if k not in ("secrets",)]
    outputs["every object but Secrets"] = admin.run("get", ",".join(kinds), "-A", "-o", "json").stdout
    for args in (["get", "clusters", "-o", "yaml"], ["get", "bindings", "-o", "yaml", "-A"],
                 ["get", "works", "-o", "yaml", "-A"], ["get", "clusters", "-o", "wide"],
                 ["failover", "preview", "deployment/web", "-n", "default", "-o", "yaml"]):
        run = subprocess.run([FLOTILLA, *args, "--kubeconfig", str(d / "kubeconfig")], capture_output=True,
                             text=True, timeout=60)
        outputs["flotilla " + " ".join(args)] = run.stdout + run.stderr
    outputs["kubectl describe clusters"] = admin.run("describe", "clusters").stdout
    leaks = sorted({where for where, text in outputs.items() for form in forms if form in text})
    assert leaks == [], f"a credential appears in: {leaks}"
    # ...and they are where they belong: the cluster's Secret holds its member's token (which this search finds,
    # so it would have found a leak)
    secret = get(admin, "secret", "member1", "-n", "karmada-cluster")
    assert base64.b64decode(secret["data"]["token"]).decode() in secrets
    assert any(form in json.dumps(secret) for form in forms)


def _status_without_token(url: str) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _moved(k: Kubectl, away_from: str) -> bool:
    rb = get(k, "resourcebindings", "web-deployment")
    clusters = [c["name"] for c in rb["spec"]["clusters"]]
    healthy = [i["clusterName"] for i in rb.get("status", {}).get("aggregatedStatus", []) if i.get("health") ==
               "Healthy"]
    assert clusters and away_from not in clusters and clusters[0] in healthy, (clusters, healthy)
    return True
