"""A viewer reads Works (and bindings) on a ``flotilla apiserver`` process (secure by default), but never a
Secret's content through them; the admin reads them whole. Asked with the real kubectl (get -o yaml / -o json, the
Table of ``kubectl get works``, ``kubectl get -w``) and with plain HTTPS for a Table carrying whole objects.

The admin creates a Work holding a Secret the way the binding controller writes one (the template's
last-applied-configuration annotation included) with ``kubectl apply`` (so the Work's own last-applied annotation
holds the Secret too), gives it a reflected status carrying the Secret's values, and a ResourceBinding of the
Secret whose aggregated status carries them as well.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.client.kubeconfig import write_kubeconfig
from flotilla.local.secure import ensure_tokens
from tests.support.apiserver import Kubectl, ServerProcess

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]

NS = "karmada-es-member1"
PASSWORD = "db-password-a-viewer-must-not-see"
TOKEN = "db-token-a-viewer-must-not-see"
TOKEN_B64 = base64.b64encode(TOKEN.encode()).decode()
FORBIDDEN = (PASSWORD, TOKEN, TOKEN_B64)

SECRET: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
    "metadata": {"name": "db", "namespace": "default", "labels": {"app": "db"}, "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
             "data": {"token": TOKEN_B64}, "stringData": {"password": PASSWORD}})}},
    "data": {"token": TOKEN_B64}, "stringData": {"password": PASSWORD},
}
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"},
             "data": {"mode": "fast"}}
WORK = {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "metadata": {"name": "db-secret", "namespace": NS},
        "spec": {"workload": {"manifests": [CONFIGMAP, SECRET]}}}
WORK_STATUS = {"status": {"manifestStatuses": [
    {"identifier": {"ordinal": 1, "group": "", "version": "v1", "kind": "Secret", "resource": "secrets",
                    "namespace": "default", "name": "db"}, "status": {"token": TOKEN}, "health": "Healthy"},
    {"identifier": {"ordinal": 0, "group": "", "version": "v1", "kind": "ConfigMap", "resource": "configmaps",
                    "namespace": "default", "name": "settings"}, "status": {"mode": "fast"}, "health": "Healthy"}]}}
BINDING = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
           "metadata": {"name": "db-secret", "namespace": "default"},
           "spec": {"resource": {"apiVersion": "v1", "kind": "Secret", "namespace": "default", "name": "db"},
                    "clusters": [{"name": "member1"}]}}
BINDING_STATUS = {"status": {"aggregatedStatus": [
    {"clusterName": "member1", "status": {"token": TOKEN}, "applied": True, "health": "Healthy"}]}}


@dataclass
class Secure:
    server: ServerProcess
    admin: Kubectl
    viewer: Kubectl
    viewer_token: str


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
        admin.run("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": NS}}))
        admin.run("apply", "-f", "-", input=json.dumps(WORK))
        admin.run("patch", "work", "db-secret", "-n", NS, "--subresource=status", "--type=merge",
                  "-p", json.dumps(WORK_STATUS))
        admin.run("create", "-f", "-", input=json.dumps(BINDING))
        admin.run("patch", "resourcebinding", "db-secret", "-n", "default", "--subresource=status",
                  "--type=merge", "-p", json.dumps(BINDING_STATUS))
        yield Secure(server, admin, Kubectl(viewer_config, home), viewer_token)
    finally:
        server.stop()


def _assert_no_secret(what: str, text: str) -> None:
    for value in FORBIDDEN:
        assert value not in text, f"{what}: the viewer was served {value!r}:\n{text[:3000]}"


def _get(k: Kubectl, *args: str) -> str:
    return k.run("get", *args).stdout


def test_viewer_reads_works_with_secret_values_redacted_admin_reads_them_whole(secure: Secure) -> None:
    viewer, admin = secure.viewer, secure.admin
    as_yaml = _get(viewer, "work", "db-secret", "-n", NS, "-o", "yaml")
    _assert_no_secret("get -o yaml", as_yaml)
    assert "token: \"\"" in as_yaml and "password: \"\"" in as_yaml  # the keys are there, the values are not

    work = json.loads(_get(viewer, "work", "db-secret", "-n", NS, "-o", "json"))
    _assert_no_secret("get -o json", json.dumps(work))
    configmap, secret = work["spec"]["workload"]["manifests"]
    assert configmap == CONFIGMAP  # nothing else is touched
    assert secret["data"] == {"token": ""} and secret["stringData"] == {"password": ""}
    assert secret["metadata"] == {"name": "db", "namespace": "default", "labels": {"app": "db"},
                                  "annotations": {}}
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (work["metadata"].get("annotations") or {})
    secret_status, configmap_status = work["status"]["manifestStatuses"]
    assert "status" not in secret_status and secret_status["health"] == "Healthy"
    assert configmap_status["status"] == {"mode": "fast"}

    listed = _get(viewer, "works", "-A", "-o", "json")
    _assert_no_secret("list -A -o json", listed)
    assert [w["metadata"]["name"] for w in json.loads(listed)["items"]] == ["db-secret"]
    table = _get(viewer, "works", "-A")
    _assert_no_secret("get works (Table)", table)
    assert "db-secret" in table
    _assert_no_secret("get works -o wide", _get(viewer, "works", "-n", NS, "-o", "wide", "--show-labels"))
    _assert_no_secret("get work/status", viewer.run(
        "get", "--raw", f"/apis/work.karmada.io/v1alpha1/namespaces/{NS}/works/db-secret/status").stdout)

    binding = json.loads(_get(viewer, "resourcebinding", "db-secret", "-n", "default", "-o", "json"))
    _assert_no_secret("get resourcebinding", json.dumps(binding))
    assert binding["status"]["aggregatedStatus"] == [{"clusterName": "member1", "applied": True,
                                                      "health": "Healthy"}]
    _assert_no_secret("list resourcebindings", _get(viewer, "resourcebindings", "-A", "-o", "yaml"))

    # the admin is served everything as stored
    whole = json.loads(_get(admin, "work", "db-secret", "-n", NS, "-o", "json"))
    assert whole["spec"]["workload"]["manifests"][1] == SECRET
    assert whole["status"]["manifestStatuses"][0]["status"] == {"token": TOKEN}
    assert TOKEN_B64 in whole["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    admin_binding = json.loads(_get(admin, "resourcebinding", "db-secret", "-n", "default", "-o", "json"))
    assert admin_binding["status"]["aggregatedStatus"][0]["status"] == {"token": TOKEN}


def _https(secure: Secure, path: str, accept: str) -> str:
    context = ssl.create_default_context(cafile=str(secure.server.data_dir / "pki" / "ca.crt"))
    request = urllib.request.Request(secure.server.url + path, headers={
        "Authorization": f"Bearer {secure.viewer_token}", "Accept": accept})
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        return str(resp.read().decode())


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def test_viewer_table_with_whole_objects_is_redacted(secure: Secure) -> None:
    text = _https(secure, "/apis/work.karmada.io/v1alpha1/works?includeObject=Object", TABLE)
    _assert_no_secret("Table includeObject=Object", text)
    row = json.loads(text)["rows"][0]["object"]
    assert row["spec"]["workload"]["manifests"][1]["data"] == {"token": ""}
    one = _https(secure, f"/apis/work.karmada.io/v1alpha1/namespaces/{NS}/works/db-secret?includeObject=Object",
                 TABLE)
    _assert_no_secret("Table of one Work", one)


class _Reader:
    """Collects a child's stdout in a thread, so the test can wait for what it prints."""

    def __init__(self, proc: Any) -> None:
        self.text = ""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: Any) -> None:
        for line in proc.stdout:
            with self._lock:
                self.text += line

    def wait_for(self, needle: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if needle in self.text:
                    return self.text
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} not seen in:\n{self.text[-3000:]}")


def test_viewer_watch_of_works_never_carries_secret_values(secure: Secure) -> None:
    viewer, admin = secure.viewer, secure.admin
    rv = json.loads(admin.run("get", "--raw", "/apis/work.karmada.io/v1alpha1/works").stdout)["metadata"][
        "resourceVersion"]
    assert rv
    proc = viewer.popen("get", "works", "-A", "-w", "--output-watch-events", "-o", "json")
    try:
        events = _Reader(proc)
        events.wait_for('"type":"ADDED"')
        admin.run("label", "work", "db-secret", "-n", NS, "step=modified")
        events.wait_for('"step":"modified"')
        admin.run("delete", "work", "db-secret", "-n", NS)
        text = events.wait_for('"type":"DELETED"')
    finally:
        proc.terminate()
        proc.wait(10)
    _assert_no_secret("kubectl get works -w", text)
    watched = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert [e["type"] for e in watched][:1] == ["ADDED"] and watched[-1]["type"] == "DELETED", text
    assert "MODIFIED" in {e["type"] for e in watched}
    for event in watched:  # every event carries the redacted Secret, keys and all
        assert event["object"]["spec"]["workload"]["manifests"][1]["data"] == {"token": ""}, event

    # Table watch events with whole objects, from before the changes: ADDED is not sent, MODIFIED and DELETED are
    table_events = _https(secure, f"/apis/work.karmada.io/v1alpha1/works?watch=true&resourceVersion={rv}"
                                  "&includeObject=Object&timeoutSeconds=2", TABLE)
    kinds = [json.loads(line)["type"] for line in table_events.splitlines() if line]
    assert "MODIFIED" in kinds and kinds[-1] == "DELETED", kinds
    _assert_no_secret("Table watch", table_events)
