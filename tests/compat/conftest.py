from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apiserver import Kubectl, ServerThread


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(tmp_path_factory.mktemp("apiserver"), storage_url="memory://", bookmark_interval=1.0)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def kubectl(server: ServerThread, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(server.kubeconfig, tmp_path_factory.mktemp("home"))


@pytest.fixture
def ns(kubectl: Kubectl, request: pytest.FixtureRequest) -> str:
    """A fresh namespace per test, named after it."""
    name = "t-" + request.node.name.lower().replace("_", "-")[:50].strip("-")
    name = "".join(c for c in name if c.isalnum() or c == "-").strip("-")
    kubectl.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
    return name


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p
