"""`flotilla join` with the kubeconfigs managed clusters come with, as real processes: `flotilla member --secure`
(TLS, token and client-certificate authentication), `flotilla join`, `flotilla controller-manager`, and the real
kubectl. member1 is joined with an exec credential plugin (as EKS's `aws eks get-token`: a script that prints an
ExecCredential with a short expiry and counts its runs), member2 with a client certificate (as kind's admin
kubeconfig). kubectl itself runs the same plugin, so the kubeconfig is one kubectl accepts; both members become
Ready and get a propagated ConfigMap, and the controller-manager runs the plugin again as its credential expires."""

from __future__ import annotations

import contextlib
import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flotilla.apiserver.tls import CertPaths, issue_client_cert
from tests.support.apiserver import Kubectl
from tests.support.pipeline import FLOTILLA, Pipeline, policy, start_control_plane

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]

MEMBERS = ("member1", "member2")
PLUGIN = """#!{python}
import datetime, json, os, sys
with open({count!r}, "a") as f:
    f.write(os.environ.get("KUBERNETES_EXEC_INFO", "") + "\\n")
at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
json.dump({{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
           "status": {{"token": os.environ["MEMBER_TOKEN"],
                      "expirationTimestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}, sys.stdout)
"""


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    root = tmp_path_factory.mktemp("joinreal")
    with contextlib.ExitStack() as stack:
        p = start_control_plane(stack, root, MEMBERS, Pipeline)
        p.start_members("members", "--count", "2", extra=["--secure", "--nodes", "1"])
        p.wait_members_up()
        yield p


def admin_token(p: Pipeline, member: str) -> str:
    rows = csv.reader(line for line in (p.members_dir / member / "tokens.csv").read_text().splitlines()
                      if line and not line.startswith("#"))
    return next(row[0] for row in rows if row)


def kubeconfig(p: Pipeline, member: str, user: dict[str, Any], name: str) -> Path:
    """``member``'s server and CA with ``user`` as its credentials."""
    own = yaml.safe_load((p.members_dir / member / "kubeconfig").read_text())
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": member, "preferences": {},
           "clusters": [{"name": member, "cluster": own["clusters"][0]["cluster"]}],
           "users": [{"name": f"{member}-user", "user": user}],
           "contexts": [{"name": member, "context": {"cluster": member, "user": f"{member}-user"}}]}
    path = p.root / name
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def join(p: Pipeline, member: str, member_kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLOTILLA, "join", member, "--cluster-kubeconfig", str(member_kubeconfig), "--kubeconfig",
                           str(p.kubeconfig)], capture_output=True, text=True, timeout=60, env=p.cp.env())


def present(obj: dict[str, Any] | None, why: str) -> dict[str, Any]:
    """``obj``, or AssertionError(``why``) while it is None (``Pipeline.eventually`` returns the first value it
    gets without an exception: None would end the wait)."""
    assert obj is not None, why
    return obj


def plugin_runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_members_joined_with_an_exec_plugin_and_a_client_certificate_are_ready_and_get_objects(
        pipeline: Pipeline) -> None:
    p = pipeline
    count = p.root / "plugin-runs"
    script = p.root / "get-token.py"
    script.write_text(PLUGIN.format(python=sys.executable, count=str(count)))
    script.chmod(0o755)
    exec_kubeconfig = kubeconfig(p, "member1", {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "./get-token.py",  # relative: kubeconfig dir
        "args": ["eks", "get-token", "--cluster-name", "member1"],
        "env": [{"name": "MEMBER_TOKEN", "value": admin_token(p, "member1")}], "provideClusterInfo": True}},
        "member1-exec.kubeconfig")
    # kubectl runs the plugin from this kubeconfig as well: the stanza and the plugin's output are kubectl's format
    who = Kubectl(exec_kubeconfig, p.cp.home).run("get", "namespace", "kube-system", "-o", "name")
    assert who.stdout.strip() == "namespace/kube-system"
    assert plugin_runs(count) >= 1
    kubectl_info = json.loads(count.read_text().splitlines()[0])

    paths = CertPaths.under(p.members_dir / "member2" / "pki")
    cert, key = issue_client_cert(paths, "kind-admin", ["system:masters"])
    (p.root / "member2.crt").write_bytes(cert)
    (p.root / "member2.key").write_bytes(key)
    cert_kubeconfig = kubeconfig(p, "member2", {"client-certificate": str(p.root / "member2.crt"),
                                                "client-key": str(p.root / "member2.key")}, "member2-cert.kubeconfig")

    for member, path in (("member1", exec_kubeconfig), ("member2", cert_kubeconfig)):
        seen = plugin_runs(count)
        r = join(p, member, path)
        assert r.returncode == 0, r.stderr
        assert f"cluster({member}) is joined successfully" in r.stdout
        assert "warning" not in r.stderr, r.stderr
        if member == "member1":  # the plugin is told what kubectl tells it (KUBERNETES_EXEC_INFO)
            assert json.loads(count.read_text().splitlines()[seen]) == kubectl_info
    secret = json.loads(p.cp.run("get", "secret", "member1", "-n", "karmada-cluster", "-o", "json").stdout)
    assert sorted(secret["data"]) == ["caBundle", "exec"]
    secret = json.loads(p.cp.run("get", "secret", "member2", "-n", "karmada-cluster", "-o", "json").stdout)
    assert sorted(secret["data"]) == ["caBundle", "tls.crt", "tls.key"]

    p.start_controller_manager("--cluster-status-update-frequency", "0.5s", "--cluster-success-threshold", "1s")
    p.wait_clusters_ready()  # apiEnablements too: discovery read with the stored credentials
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"},
          "data": {"mode": "joined"}}
    p.cp.run("apply", "-f", "-", input=json.dumps(policy("settings", "ConfigMap", "v1",
                                                       {"clusterAffinity": {"clusterNames": list(MEMBERS)}})))
    p.cp.run("apply", "-f", "-", input=json.dumps(cm))
    for member in MEMBERS:
        landed = p.eventually(lambda m=member: present(p.member_get(m, "configmaps", "settings"), f"not in {m} yet"),
                              f"the ConfigMap in {member}", "clusters")
        assert landed["data"] == {"mode": "joined"}

    before = plugin_runs(count)

    def ran_twice_more() -> None:
        assert plugin_runs(count) >= before + 2, f"{plugin_runs(count) - before} runs of the plugin since"

    p.eventually(ran_twice_more, "the controller-manager to run the plugin again as its 2 s credentials expire",
                 timeout=30)
    cluster = p.cp_get("clusters", "member1", namespace=None)
    ready = [c for c in cluster["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True", ready


def test_join_without_credentials_exits_1_saying_what_to_add(pipeline: Pipeline) -> None:
    r = join(pipeline, "member3", kubeconfig(pipeline, "member1", {}, "anonymous.kubeconfig"))
    assert r.returncode == 1
    assert "has no credentials" in r.stderr and "refuses anonymous requests (401" in r.stderr, r.stderr
    assert "exec plugin" in r.stderr
    gone = pipeline.cp.run("get", "cluster", "member3", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
