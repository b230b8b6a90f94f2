"""``flotilla apiserver`` as a real process: SQLite persistence across restarts, etcd shared by two servers."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apiserver import Kubectl, ServerProcess
from tests.support.etcd_server import start_etcd, start_etcd_tls

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  k: {value}\n"
CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sqlite_data_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    server = ServerProcess(data, "sqlite://").start(port)
    kubectl = Kubectl(server.kubeconfig, tmp_path)
    try:
        kubectl.run("apply", "-f", "-", input=CM.format(name="keep", value="one"))
        rv_before = json.loads(kubectl.run("get", "cm", "keep", "-o", "json").stdout)["metadata"]["resourceVersion"]
    finally:
        server.stop()
    assert (data / "flotilla.db").exists()
    server = ServerProcess(data, "sqlite://").start(port)
    try:
        obj = json.loads(kubectl.run("get", "cm", "keep", "-o", "json").stdout)
        assert obj["data"] == {"k": "one"} and obj["metadata"]["resourceVersion"] == rv_before
        kubectl.run("apply", "-f", "-", input=CM.format(name="keep", value="two"))
        obj = json.loads(kubectl.run("get", "cm", "keep", "-o", "json").stdout)
        assert int(obj["metadata"]["resourceVersion"]) > int(rv_before)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield server.endpoint
    server.stop()


def test_two_apiservers_share_one_etcd(etcd: str, tmp_path: Path) -> None:
    a = ServerProcess(tmp_path / "a", f"etcd://{etcd}").start()
    b = ServerProcess(tmp_path / "b", f"etcd://{etcd}").start()
    try:
        ka = Kubectl(a.kubeconfig, tmp_path / "ha")
        kb = Kubectl(b.kubeconfig, tmp_path / "hb")
        (tmp_path / "ha").mkdir()
        (tmp_path / "hb").mkdir()
        ka.run("apply", "-f", "-", input=CM.format(name="shared", value="from-a"))
        assert kb.run("get", "cm", "shared", "-o", "jsonpath={.data.k}").stdout == "from-a"
        # a namespace made through A takes content through B at once (B's namespace cache falls back to
        # the store for names it has not seen yet)
        ka.run("apply", "-f", "-", input="apiVersion: v1\nkind: Namespace\nmetadata: {name: made-on-a}\n")
        kb.run("apply", "-f", "-", input=CM.format(name="x", value="val").replace("default", "made-on-a"))
        watcher = kb.popen("get", "cm", "shared", "-w", "-o", "jsonpath={.data.k}{\"\\n\"}",
                           "--request-timeout=8s")
        import time

        time.sleep(1.0)
        ka.run("patch", "cm", "shared", "--type", "merge", "-p", '{"data":{"k":"changed-on-a"}}')
        time.sleep(1.0)
        watcher.terminate()
        out, _ = watcher.communicate(timeout=10)
        assert "changed-on-a" in out
        # a CRD created through A is served by B (B follows CRDs through the store's watch)
        ka.run("apply", "-f", "-", input=CRD)
        ka.run("wait", "--for=condition=established", "crd/gadgets.example.com", "--timeout=20s")
        deadline = time.time() + 10
        while time.time() < deadline:
            res = kb.run("apply", "-f", "-", check=False, input=(
                "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1, namespace: default}\nspec: {x: 1}\n"))
            if res.returncode == 0:
                break
            time.sleep(0.5)
        assert ka.run("get", "gadgets", "g1", "-o", "jsonpath={.spec.x}").stdout == "1"
    finally:
        a.stop()
        b.stop()


def test_apiserver_on_etcd_over_tls_with_a_client_certificate(tmp_path: Path) -> None:
    """``--storage etcds://`` with kube-apiserver's --etcd-* flags against an etcd that serves https only and
    requires client certificates: kubectl writes and reads through it; without the client certificate the server
    does not start and says why."""
    import subprocess
    import sys

    etcd, files = start_etcd_tls(tmp_path / "etcd")
    try:
        url = f"etcds://{etcd.endpoint}"
        flags = ["--etcd-cafile", str(files.ca), "--etcd-certfile", str(files.client_cert),
                 "--etcd-keyfile", str(files.client_key)]
        server = ServerProcess(tmp_path / "cp", url, extra=flags).start()
        try:
            k = Kubectl(server.kubeconfig, tmp_path / "home")
            (tmp_path / "home").mkdir()
            k.run("apply", "-f", "-", input=CM.format(name="over-tls", value="secret-ish"))
            assert k.run("get", "cm", "over-tls", "-o", "jsonpath={.data.k}").stdout == "secret-ish"
        finally:
            server.stop()
        flotilla = str(Path(sys.executable).parent / "flotilla")
        refused = subprocess.run([flotilla, "apiserver", "--storage", url, "--etcd-cafile", str(files.ca),
                                  "--data-dir", str(tmp_path / "cp2"), "--port", str(free_port())],
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1, refused.stderr
        assert "flotilla apiserver: error:" in refused.stderr and "BAD_CERTIFICATE" in refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        etcd.stop()


def test_secure_server_requires_a_valid_token(tmp_path: Path) -> None:
    data = tmp_path / "secure"
    server = ServerProcess(data, "sqlite://").start()
    try:
        kubectl = Kubectl(server.kubeconfig, tmp_path)
        kubectl.run("apply", "-f", "-", input=CM.format(name="tls", value="ok"))
        assert kubectl.run("get", "cm", "tls", "-o", "jsonpath={.data.k}").stdout == "ok"
        assert "https://" in server.kubeconfig.read_text()
        bad = server.kubeconfig.read_text()
        import yaml

        cfg = yaml.safe_load(bad)
        cfg["users"][0]["user"]["token"] = "wrong-token"
        wrong = tmp_path / "wrong-kubeconfig"
        wrong.write_text(yaml.safe_dump(cfg))
        denied = Kubectl(wrong, tmp_path).run("get", "cm", check=False)
        assert denied.returncode != 0 and "Unauthorized" in denied.stderr
    finally:
        server.stop()


def test_allow_no_execute_taint_policy_false_refuses_noexecute_policies_with_karmadas_message(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "cp", storage_url="memory://",
                           extra=["--allow-no-execute-taint-policy", "false"]).start()
    try:
        k = Kubectl(server.data_dir / "kubeconfig", tmp_path)
        policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
                  "metadata": {"name": "not-ready"},
                  "spec": {"addOnConditions": [{"conditionType": "Ready", "operator": "In",
                                                "statusValues": ["False"]}],
                           "taints": [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}]}}
        r = k.run("apply", "-f", "-", input=json.dumps(policy), check=False)
        assert r.returncode != 0
        assert ("Configuring taint with NoExecute effect is not allowed, this capability must be explicitly "
                "enabled by administrators through command-line flags") in r.stderr
        policy["spec"]["taints"][0]["effect"] = "NoSchedule"
        k.run("apply", "-f", "-", input=json.dumps(policy))
    finally:
        server.stop()
