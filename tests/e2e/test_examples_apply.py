"""Every manifest under ``examples/`` applies cleanly with the real kubectl against a real ``flotilla apiserver``.

One test per directory of examples (``examples/apiserver``, ``examples/failover``, ``examples/tour``, and any added
later), each against its own API server process on memory storage, because directories reuse names (``web`` in
``streaming``). For each directory: the FlinkDeployment CRD (``examples/apiserver/30-flinkdeployment-crd.yaml``) is
applied first and waited for; then every file that holds Namespaces or CRDs is checked with
``kubectl apply --dry-run=server`` and applied, so that the namespaced files can be checked next; every other file is
checked with ``--dry-run=server``; finally the whole directory is applied for real, every object is there, and
applying it again leaves every object's spec as it was. No step may print an admission warning (D3's
state-preservation warnings).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.apiserver import Kubectl, ServerProcess

pytestmark = pytest.mark.kubectl

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CRD = EXAMPLES / "apiserver" / "30-flinkdeployment-crd.yaml"
SETUP_KINDS = {"Namespace", "CustomResourceDefinition"}


def yaml_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def example_dirs() -> list[Path]:
    return sorted({p.parent for p in yaml_files()})


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def object_names(path: Path) -> list[str]:
    """``kind/name`` (lower case, as ``kubectl get -o name`` minus the group) of every object in a file."""
    return [f"{d['kind'].lower()}/{d['metadata']['name']}" for d in documents(path)]


def no_warnings(stderr: str, what: str) -> None:
    assert "Warning" not in stderr and "warning" not in stderr, f"{what} printed a warning:\n{stderr}"


@pytest.fixture
def kubectl(tmp_path: Path) -> Iterator[Kubectl]:
    server = ServerProcess(tmp_path / "cp", storage_url="memory://").start()
    home = tmp_path / "home"
    home.mkdir()
    try:
        yield Kubectl(server.kubeconfig, home)
    finally:
        server.stop()


def test_there_are_examples_and_the_crd() -> None:
    assert CRD in yaml_files()
    assert {d.name for d in example_dirs()} >= {"apiserver", "failover", "tour"}
    for path in yaml_files():
        docs = documents(path)
        assert docs, f"{path} holds no object"
        for d in docs:
            assert {"apiVersion", "kind", "metadata"} <= d.keys(), f"{path}: not a complete object: {d}"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("directory", example_dirs(), ids=lambda d: str(d.relative_to(EXAMPLES)))
def test_every_manifest_of_the_directory_applies_cleanly(directory: Path, kubectl: Kubectl) -> None:
    k = kubectl
    r = k.run("apply", "-f", str(CRD))
    no_warnings(r.stderr, "applying the CRD")
    k.run("wait", "--for=condition=Established", "--timeout=30s", "crd/flinkdeployments.flink.apache.org")

    files = [p for p in yaml_files() if p.parent == directory]
    setup = [p for p in files if {d["kind"] for d in documents(p)} <= SETUP_KINDS]
    rest = [p for p in files if p not in setup]

    for path in setup:
        r = k.run("apply", "--dry-run=server", "-f", str(path))
        assert "(server dry run)" in r.stdout, r.stdout
        no_warnings(r.stderr, f"kubectl apply --dry-run=server -f {path.name}")
        no_warnings(k.run("apply", "-f", str(path)).stderr, f"kubectl apply -f {path.name}")

    for path in rest:
        r = k.run("apply", "--dry-run=server", "-f", str(path))
        for name in object_names(path):
            assert f"/{name.split('/', 1)[1]} " in r.stdout and "(server dry run)" in r.stdout, (path, r.stdout)
        no_warnings(r.stderr, f"kubectl apply --dry-run=server -f {path.name}")

    # the dry runs created nothing
    for path in rest:
        r = k.run("get", "-f", str(path), "-o", "name", check=False)
        assert r.returncode != 0 and "NotFound" in r.stderr, (path, r.stdout, r.stderr)

    r = k.run("apply", "-f", str(directory))
    no_warnings(r.stderr, f"kubectl apply -f {directory.name}/")
    for path in files:
        got = k.run("get", "-f", str(path), "-o", "name").stdout.split()
        assert [g.split("/", 1)[0].split(".", 1)[0] + "/" + g.split("/", 1)[1] for g in got] == object_names(path)

    # applying again changes nothing: kubectl still sends a patch ("configured") where admission defaulted a field
    # inside a list (a PropagationPolicy's resourceSelectors[].namespace, as Karmada's webhook does), and
    # admission defaults it again
    before = specs(k, directory)
    r = k.run("apply", "-f", str(directory))
    no_warnings(r.stderr, f"kubectl apply -f {directory.name}/ (again)")
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert lines and all(line.endswith((" unchanged", " configured")) for line in lines), r.stdout
    assert specs(k, directory) == before


def specs(k: Kubectl, directory: Path) -> dict[str, object]:
    """The spec, data and labels of every object the directory's manifests name."""
    items = json.loads(k.run("get", "-f", str(directory), "-o", "json").stdout)["items"]
    return {f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}":
            (o.get("spec"), o.get("data"), o["metadata"].get("labels")) for o in items}
