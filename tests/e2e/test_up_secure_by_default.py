"""A ``flotilla up`` given no security flag is secure: it serves https with certificates of its own CA, refuses an
unauthenticated request with 401 and a Kubernetes Status, works with kubectl through the kubeconfig it prints,
and writes that kubeconfig (and every other credential) readable by its owner only."""

from __future__ import annotations

import base64
import json
import re
import ssl
import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_up_cli import eventually, flotilla, get
from tests.support.apiserver import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]


@pytest.fixture
def default_up(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(data directory, the kubeconfig ``flotilla up`` told to export) of a ``flotilla up --detach`` without
    --secure or --insecure."""
    d = tmp_path / "flotilla"
    started = flotilla("up", "--detach", "--data-dir", str(d), "--members", "1", "--port", "0",
                       "--metrics-bind-address", "0")
    try:
        assert started.returncode == 0, started.stderr
        exported = re.search(r"export KUBECONFIG=(\S+?);", started.stdout)
        assert exported, started.stdout
        yield d, Path(exported.group(1))
    finally:
        flotilla("down", "--data-dir", str(d))


def _cluster_of(kubeconfig: Path) -> dict[str, Any]:
    config = yaml.safe_load(kubeconfig.read_text())
    current = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    return next(c["cluster"] for c in config["clusters"] if c["name"] == current["cluster"])


def test_an_unauthenticated_request_is_refused_with_401_and_a_status(default_up: tuple[Path, Path]) -> None:
    _, kubeconfig = default_up
    cluster = _cluster_of(kubeconfig)
    assert cluster["server"].startswith("https://"), cluster["server"]
    # the certificate verifies against the CA in the kubeconfig: TLS, not just a refusal
    trusted = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    request = urllib.request.Request(cluster["server"] + "/api/v1/namespaces", headers={"Accept": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, context=trusted, timeout=10)
    assert refused.value.code == 401
    body = json.loads(refused.value.read())
    assert (body["kind"], body["apiVersion"], body["status"], body["code"], body["reason"]) == \
        ("Status", "v1", "Failure", 401, "Unauthorized"), body


def test_kubectl_works_with_the_kubeconfig_up_prints(default_up: tuple[Path, Path], tmp_path: Path) -> None:
    d, kubeconfig = default_up
    assert kubeconfig == (d / "kubeconfig").resolve()
    home = tmp_path / "home"
    home.mkdir()
    k = Kubectl(kubeconfig, home)
    assert "namespace/default" in k.run("get", "namespaces", "-o", "name").stdout.split()

    def ready() -> None:
        cluster = get(k, "clusters", "member1")
        assert cluster["spec"]["apiEndpoint"].startswith("https://")  # the member is joined over TLS
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in cluster["status"]["conditions"])

    eventually(ready, "member1 Ready", timeout=60)
    assert k.run("--context", "member1", "get", "nodes", "-o", "name").stdout.strip()  # the member's context too


def test_the_kubeconfig_and_every_credential_are_the_owners_only(default_up: tuple[Path, Path]) -> None:
    d, kubeconfig = default_up
    assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for path in (d / "viewer.kubeconfig", d / "controlplane" / "tokens.csv", d / "controlplane" / "pki" / "ca.key",
                 d / "members" / "member1" / "tokens.csv"):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path} is readable by others"


def test_insecure_serves_plain_http_and_its_data_dir_resumes_only_insecure(tmp_path: Path) -> None:
    d = tmp_path / "plain"
    common = ("--detach", "--data-dir", str(d), "--members", "1", "--port", "0", "--metrics-bind-address", "0")
    try:
        started = flotilla("up", "--insecure", *common)
        assert started.returncode == 0, started.stderr
        server = _cluster_of(d / "kubeconfig")["server"]
        assert server.startswith("http://"), server
        with urllib.request.urlopen(server + "/api/v1/namespaces", timeout=10) as resp:  # no credentials needed
            assert json.loads(resp.read())["kind"] == "NamespaceList"
        assert not (d / "viewer.kubeconfig").exists()
        assert flotilla("down", "--data-dir", str(d)).returncode == 0

        refused = flotilla("up", *common)  # the default is secure: this data directory is not switched silently
        assert refused.returncode == 1
        assert "pass --insecure to resume it as it is" in refused.stderr, refused.stderr
        resumed = flotilla("up", "--insecure", *common)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        flotilla("down", "--data-dir", str(d))
