"""``flotilla describe cluster`` against a real ``flotilla up --detach``: a taint put by ``flotilla taint`` and
the Events the controllers record about the Cluster are shown; a cluster that does not exist is NotFound, exit 1."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_up_cli import FLOTILLA, eventually, flotilla

pytestmark = pytest.mark.kubectl


def describe(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLOTILLA, "describe", *args, "--kubeconfig", str(kubeconfig)], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("describe") / "flotilla"
    try:
        r = flotilla("up", "--detach", "--data-dir", str(data_dir), "--port", "0", "--members", "1",
                     "--metrics-bind-address", "0", "--cluster-status-update-frequency", "1")
        assert r.returncode == 0, r.stdout + r.stderr
        yield data_dir / "kubeconfig"
    finally:
        flotilla("down", "--data-dir", str(data_dir))


def _events(text: str) -> list[str]:
    assert "Events:" in text and "Events:  <none>" not in text, text
    table = text.split("Events:", 1)[1].strip().splitlines()
    assert table[0].split() == ["Type", "Reason", "Age", "From", "Message"], text
    return table[2:]


def test_describe_cluster_shows_its_taint_and_events(kubeconfig: Path) -> None:
    r = flotilla("taint", "clusters", "member1", "k=v:NoSchedule", "--kubeconfig", str(kubeconfig))
    assert r.returncode == 0, r.stderr

    def shown() -> str:
        d = describe(kubeconfig, "cluster", "member1")
        assert d.returncode == 0, d.stderr
        assert _events(d.stdout)
        return d.stdout

    text = eventually(shown, "an Event about member1")
    assert text.startswith("Name:") and "member1" in text.splitlines()[0]
    assert "k=v:NoSchedule" in next(line for line in text.splitlines() if line.startswith("Taints:")) or \
        any(line.strip() == "k=v:NoSchedule" for line in text.splitlines()), text
    assert "Mode:" in text and "Fenced:" in text


def test_describe_missing_cluster_exits_1_with_not_found(kubeconfig: Path) -> None:
    r = describe(kubeconfig, "cluster", "nosuch")
    assert r.returncode == 1
    assert 'Error from server (NotFound): clusters.cluster.karmada.io "nosuch" not found' in r.stderr
