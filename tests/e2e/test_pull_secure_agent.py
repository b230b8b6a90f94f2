"""A Pull member registered with ``flotilla register --start`` on a ``flotilla up`` control plane (secure by
default), as a user runs it: the agent, holding only its scoped token, registers its Cluster, keeps it Ready, applies a propagated
Deployment in its member and reports it back, without a single request refused by the authorizer, and its token
appears in no log."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from tests.e2e.test_member_cli import start_members, stop
from tests.e2e.test_up_cli import DEPLOYMENT, eventually, flotilla, free_port, get
from tests.support.apiserver import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(240)]

T = TypeVar("T")

POLICY = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
             "placement": {"clusterAffinity": {"clusterNames": ["edge1"]}}},
}


@pytest.fixture
def secure_up_and_edge(tmp_path: Path) -> Iterator[tuple[Path, Path, subprocess.Popen[str]]]:
    d = tmp_path / "flotilla"
    started = flotilla("up", "--detach", "--data-dir", str(d), "--members", "1", "--port",
                       str(free_port()), "--metrics-bind-address", "0")
    assert started.returncode == 0, started.stderr
    members = tmp_path / "edge"
    proc = start_members(members, "--name", "edge1", "--port", "0", names=["edge1"])
    try:
        yield d, members / "edge1" / "kubeconfig", proc
    finally:
        flotilla("unregister", "edge1", "--karmada-kubeconfig", str(d / "kubeconfig"), "--agent-kubeconfig",
                 str(tmp_path / "edge1-agent.kubeconfig"), "--wait", "0")
        stop(proc)
        flotilla("down", "--data-dir", str(d))


def until(check: Callable[[], T | None], what: str) -> T:
    """``eventually`` for a check that answers None until it is satisfied (``eventually`` takes None for done)."""
    def present() -> T:
        value = check()
        assert value is not None, f"not yet: {what}"
        return value

    return eventually(present, what)


def _ready(cluster: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (cluster.get("status") or {}).get("conditions") or [])


def test_registered_agent_serves_its_pull_member_within_its_scope_on_a_secure_control_plane(
        secure_up_and_edge: tuple[Path, Path, subprocess.Popen[str]], tmp_path: Path) -> None:
    d, member_kubeconfig, _ = secure_up_and_edge
    home = tmp_path / "home"
    home.mkdir()
    admin = Kubectl(d / "kubeconfig", home)
    agent_kubeconfig = tmp_path / "edge1-agent.kubeconfig"
    done = flotilla("register", "edge1", "--kubeconfig", str(member_kubeconfig), "--karmada-kubeconfig",
                    str(d / "kubeconfig"), "--agent-kubeconfig", str(agent_kubeconfig), "--start")
    assert done.returncode == 0, done.stderr

    cluster = until(lambda: next((c for c in get(admin, "clusters")["items"]
                                  if c["metadata"]["name"] == "edge1" and _ready(c)), None),
                    "the agent registers edge1 and posts Ready True")
    assert cluster["spec"]["syncMode"] == "Pull"
    assert "secretRef" not in cluster["spec"]
    assert cluster["status"].get("kubernetesVersion")
    columns = admin.run("get", "clusters").stdout.split("\n")
    assert any(line.split()[:1] == ["edge1"] and "Pull" in line.split() for line in columns), columns
    lease = get(admin, "lease", "-n", "karmada-cluster", "edge1")
    assert lease["spec"]["holderIdentity"] == "edge1"

    manifest = tmp_path / "web.yaml"
    manifest.write_text(yaml.safe_dump_all([DEPLOYMENT, POLICY]))
    admin.run("apply", "-f", str(manifest))
    member = Kubectl(member_kubeconfig, home)
    until(lambda: member.run("get", "deploy", "web", "-n", "default", check=False).returncode == 0 or None,
          "the agent creates the Deployment in edge1")
    work = until(lambda: next((w for w in get(admin, "works", "-n", "karmada-es-edge1")["items"]
                               if any(c.get("type") == "Applied" and c.get("status") == "True"
                                      for c in (w.get("status") or {}).get("conditions") or [])), None),
                 "the agent reports the Work applied")
    assert work["metadata"]["namespace"] == "karmada-es-edge1"

    log = (tmp_path / "edge1-agent.log").read_text(errors="replace")
    assert "forbidden" not in log.lower() and " 403" not in log, log[-3000:]
    token = str(yaml.safe_load(agent_kubeconfig.read_text())["users"][0]["user"]["token"])
    assert token not in log
    for path in d.rglob("*.log"):
        assert token not in path.read_text(errors="replace"), path


def test_secure_up_gives_each_pull_agent_a_scoped_token_of_its_own(tmp_path: Path) -> None:
    d = tmp_path / "flotilla"
    started = flotilla("up", "--detach", "--data-dir", str(d), "--members", "2", "--pull-members", "1",
                       "--port", str(free_port()), "--metrics-bind-address", "0")
    assert started.returncode == 0, started.stderr
    try:
        home = tmp_path / "home"
        home.mkdir()
        admin = Kubectl(d / "kubeconfig", home)
        until(lambda: next((c for c in get(admin, "clusters")["items"]
                            if c["metadata"]["name"] == "member2" and _ready(c)), None),
              "the Pull member's agent posts Ready True")
        agent_kubeconfig = d / "agents" / "member2" / "karmada.kubeconfig"
        token = str(yaml.safe_load(agent_kubeconfig.read_text())["users"][0]["user"]["token"])
        admin_token = str(yaml.safe_load((d / "kubeconfig").read_text())["users"][0]["user"]["token"])
        assert token != admin_token
        agent = Kubectl(agent_kubeconfig, home)
        can = {q: agent.run("auth", "can-i", *q.split(), check=False).stdout.strip().split(" ")[0]
               for q in ("list works -n karmada-es-member2", "list works -n karmada-es-member1",
                         "get secrets -n karmada-cluster", "list resourcebindings -A")}
        assert can == {"list works -n karmada-es-member2": "yes", "list works -n karmada-es-member1": "no",
                       "get secrets -n karmada-cluster": "no", "list resourcebindings -A": "no"}, can
        for path in d.rglob("*.log"):
            assert token not in path.read_text(errors="replace"), path
    finally:
        flotilla("down", "--data-dir", str(d))
