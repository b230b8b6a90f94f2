"""``flotilla register`` / ``unregister`` against a ``flotilla apiserver`` process (secure by default), with the real kubectl.

The agent kubeconfig register writes works, over TLS with the control plane's CA, for every request of the agent's
scope (its Cluster and status, its Lease, the Works of ``karmada-es-<cluster>``, Events) and is 403 outside it;
unregister revokes it (401). The token appears in the agent kubeconfig only: not in the CLI's output, the
Secret or the API server's output.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from flotilla.client.kubeconfig import write_kubeconfig
from tests.support.apiserver import Kubectl, ServerProcess

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(240)]

#: kubectl's words for a 401
UNAUTHORIZED = "You must be logged in to the server"
FLOTILLA = str(Path(sys.executable).parent / "flotilla")


def flotilla(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLOTILLA, *args], capture_output=True, text=True, timeout=120)


def _ns(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _work(namespace: str, manifest: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "w1", "namespace": namespace},
            "spec": {"workload": {"manifests": [manifest]}}}


SECRET_MANIFEST = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app", "namespace": "default"},
                   "data": {"password": "c2VjcmV0LXZhbHVl"}}


def _cluster(name: str) -> dict[str, object]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"syncMode": "Pull"}}


def _lease(name: str) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "karmada-cluster"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": "2025-01-01T00:00:00.000000Z"}}


@dataclass
class ControlPlane:
    server: ServerProcess
    admin: Kubectl
    home: Path
    member_kubeconfig: Path
    tmp: Path

    def agent(self, kubeconfig: Path) -> Kubectl:
        return Kubectl(kubeconfig, self.home)

    def register(self, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return flotilla("register", name, "--kubeconfig", str(self.member_kubeconfig), "--karmada-kubeconfig",
                        str(self.server.kubeconfig), "--agent-kubeconfig", str(self.tmp / f"{name}-agent.kubeconfig"),
                        *extra)

    def unregister(self, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return flotilla("unregister", name, "--karmada-kubeconfig", str(self.server.kubeconfig),
                        "--agent-kubeconfig", str(self.tmp / f"{name}-agent.kubeconfig"), *extra)


@pytest.fixture
def cp(tmp_path: Path) -> Iterator[ControlPlane]:
    server = ServerProcess(tmp_path / "cp", "sqlite://").start()
    try:
        home = tmp_path / "home"
        home.mkdir()
        member = write_kubeconfig(tmp_path / "member.kubeconfig", server="https://127.0.0.1:6443", context="m1",
                                  token="the-member-admin-token")
        admin = Kubectl(server.kubeconfig, home)
        admin.run("get", "--raw", "/readyz")
        yield ControlPlane(server, admin, home, member, tmp_path)
    finally:
        server.stop()


def _token(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])


def test_register_prints_the_agent_command_and_writes_a_private_kubeconfig(cp: ControlPlane) -> None:
    done = cp.register("m1", "--print-command")
    assert done.returncode == 0, done.stderr
    out = cp.tmp / "m1-agent.kubeconfig"
    assert out.stat().st_mode & 0o077 == 0
    command = (f"flotilla agent --karmada-kubeconfig {out} --cluster-name m1 --kubeconfig "
               f"{cp.member_kubeconfig}")
    assert command in done.stdout.splitlines()[-1]
    config = yaml.safe_load(out.read_text())
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == cp.server.url and cluster["certificate-authority-data"]
    token = _token(out)
    assert token not in done.stdout + done.stderr
    secret = json.loads(cp.admin.run("get", "secret", "m1.agent-token", "-n", "karmada-cluster", "-o",
                                     "json").stdout)
    assert secret["type"] == "flotilla.io/agent-token"
    import base64
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data == {"cluster": "m1", "tokenSHA256": hashlib.sha256(token.encode()).hexdigest()}
    # the API server knows the token at once (no restart) as the agent of m1: kubectl auth can-i asks it
    agent = cp.agent(out)
    can = {q: agent.run("auth", "can-i", *q.split(), check=False).stdout.strip()
           for q in ("get clusters/m1", "get clusters/m2", "patch clusters/m2", "patch clusters/m1 --subresource=status",
                     "list works -n karmada-es-m1", "list works -n karmada-es-m2", "get secrets -n karmada-cluster")}
    assert can == {"get clusters/m1": "yes",
                   "get clusters/m2": "yes",  # the peer protocol follows every Cluster
                   "patch clusters/m2": 'no - the agent of cluster "m1" may only use its own Cluster (named "m1")',
                   "patch clusters/m1 --subresource=status": "yes",
                   "list works -n karmada-es-m1": "yes",
                   "list works -n karmada-es-m2":
                       'no - the agent of cluster "m1" may only use the Works in namespace "karmada-es-m1"',
                   "get secrets -n karmada-cluster": "no"}


def test_agent_token_works_within_its_scope_is_403_outside_and_401_after_unregister(cp: ControlPlane) -> None:
    admin = cp.admin
    for ns in ("karmada-es-m1", "karmada-es-m2"):
        admin.run("create", "-f", "-", input=json.dumps(_ns(ns)))
        admin.run("create", "-f", "-", input=json.dumps(_work(ns, SECRET_MANIFEST)))
    assert cp.register("m1").returncode == 0  # it creates the namespace karmada-cluster
    admin.run("create", "-f", "-", input=json.dumps(_lease("m2")))
    agent = cp.agent(cp.tmp / "m1-agent.kubeconfig")

    # allowed: register its Cluster, read it, keep its status
    agent.run("create", "-f", "-", input=json.dumps(_cluster("m1")))
    assert agent.run("get", "cluster", "m1", "-o", "name").stdout.strip() == "cluster.cluster.karmada.io/m1"
    assert agent.run("get", "clusters", "--field-selector", "metadata.name=m1", "-o", "name").stdout.strip() \
        == "cluster.cluster.karmada.io/m1"
    agent.run("get", "--raw", "/apis/cluster.karmada.io/v1alpha1/clusters?fieldSelector=metadata.name%3Dm1"
              "&watch=true&timeoutSeconds=1")
    agent.run("patch", "cluster", "m1", "--subresource=status", "--type=merge",
              "-p", '{"status":{"kubernetesVersion":"v1.31.0"}}')
    assert json.loads(admin.run("get", "cluster", "m1", "-o", "json").stdout)["status"]["kubernetesVersion"] \
        == "v1.31.0"
    # its Lease: create, update, patch
    agent.run("create", "-f", "-", input=json.dumps(_lease("m1")))
    lease = json.loads(agent.run("get", "lease", "m1", "-n", "karmada-cluster", "-o", "json").stdout)
    lease["spec"]["renewTime"] = "2025-01-01T00:00:10.000000Z"
    agent.run("replace", "-f", "-", input=json.dumps(lease))
    agent.run("patch", "lease", "m1", "-n", "karmada-cluster", "--type=merge",
              "-p", '{"spec":{"renewTime":"2025-01-01T00:00:20.000000Z"}}')
    # its Works: list, watch, patch, status; a Secret they carry is not redacted for it
    works = json.loads(agent.run("get", "works", "-n", "karmada-es-m1", "-o", "json").stdout)["items"]
    assert works[0]["spec"]["workload"]["manifests"][0]["data"] == SECRET_MANIFEST["data"]
    agent.run("get", "--raw", "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-m1/works?watch=true"
              "&timeoutSeconds=1")
    agent.run("patch", "work", "w1", "-n", "karmada-es-m1", "--type=merge", "-p",
              '{"metadata":{"labels":{"applied-by":"agent"}}}')
    agent.run("patch", "work", "w1", "-n", "karmada-es-m1", "--subresource=status", "--type=merge", "-p",
              '{"status":{"conditions":[{"type":"Applied","status":"True","reason":"AppliedSuccessful",'
              '"message":"ok","lastTransitionTime":"2025-01-01T00:00:00Z"}]}}')
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "m1.applied", "namespace": "karmada-es-m1"},
             "involvedObject": {"kind": "Work", "name": "w1", "namespace": "karmada-es-m1"},
             "reason": "AppliedSuccessful", "message": "applied", "type": "Normal"}
    agent.run("create", "-f", "-", input=json.dumps(event))

    # refused: everything else
    refused = {
        "another cluster's Works": ["get", "works", "-n", "karmada-es-m2"],
        "Secrets in karmada-cluster": ["get", "secrets", "-n", "karmada-cluster"],
        "Secrets everywhere": ["get", "secrets", "-A"],
        "another Cluster's status": ["patch", "cluster", "m2", "--subresource=status", "--type", "merge", "-p",
                                     '{"status": {}}'],
        "bindings": ["get", "resourcebindings.work.karmada.io", "-A"],
        "another cluster's Lease": ["get", "lease", "m2", "-n", "karmada-cluster"],
        "deleting its Cluster": ["delete", "cluster", "m1", "--wait=false"],
        "another Cluster": ["create", "-f", "-"],
    }
    for what, argv in refused.items():
        denied = agent.run(*argv, check=False, input=json.dumps(_cluster("m2")) if "-f" in argv else None)
        assert denied.returncode != 0 and "Forbidden" in denied.stderr, (what, denied.stderr)
    assert "karmada-es-m1" in agent.run(*refused["another cluster's Works"], check=False).stderr

    done = cp.unregister("m1")
    assert done.returncode == 0, done.stderr
    assert "unregistered" in done.stdout
    for kind, name, ns in (("cluster", "m1", None), ("lease", "m1", "karmada-cluster"),
                           ("secret", "m1.agent-token", "karmada-cluster")):
        gone = admin.run("get", kind, name, *(["-n", ns] if ns else []), check=False)
        assert "NotFound" in gone.stderr, (kind, gone.stderr)
    after = agent.run("get", "cluster", "m1", check=False)
    assert after.returncode != 0 and UNAUTHORIZED in after.stderr

    token = _token(cp.tmp / "m1-agent.kubeconfig")
    cp.server.stop()
    assert cp.server.proc is not None and cp.server.proc.stdout is not None
    server_output = cp.server.proc.stdout.read()
    assert token not in server_output + done.stdout + done.stderr
    for log in (cp.tmp / "cp").rglob("*.log"):
        assert token not in log.read_text(errors="replace"), log


def test_register_again_gives_a_new_token_and_revokes_the_old_one(cp: ControlPlane) -> None:
    assert cp.register("m1").returncode == 0
    out = cp.tmp / "m1-agent.kubeconfig"
    old = cp.tmp / "old.kubeconfig"
    old.write_text(out.read_text())
    again = cp.register("m1")
    assert again.returncode == 0, again.stderr
    assert "new token" in again.stdout
    cp.agent(out).run("get", "--raw", "/apis/coordination.k8s.io/v1/namespaces/karmada-cluster/leases?"
                      "fieldSelector=metadata.name%3Dm1")
    stale = cp.agent(old).run("get", "cluster", "m1", check=False)
    assert stale.returncode != 0 and UNAUTHORIZED in stale.stderr


def test_register_and_unregister_refuse_a_push_cluster(cp: ControlPlane) -> None:
    push = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "p1"},
            "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1",
                     "secretRef": {"namespace": "karmada-cluster", "name": "p1"}}}
    cp.admin.run("create", "-f", "-", input=json.dumps(push))
    done = cp.register("p1")
    assert done.returncode == 1
    assert "joined in Push mode; unjoin it first" in done.stderr
    assert not (cp.tmp / "p1-agent.kubeconfig").exists()
    assert "NotFound" in cp.admin.run("get", "secret", "p1.agent-token", "-n", "karmada-cluster",
                                      check=False).stderr
    done = cp.unregister("p1")
    assert done.returncode == 1 and "use `flotilla unjoin p1`" in done.stderr
    assert cp.admin.run("get", "cluster", "p1", "-o", "name").stdout.strip()


def test_register_and_unregister_explain_bad_input(cp: ControlPlane) -> None:
    bad_member = flotilla("register", "m1", "--kubeconfig", str(cp.tmp / "missing.kubeconfig"),
                          "--karmada-kubeconfig", str(cp.server.kubeconfig))
    assert bad_member.returncode == 1 and "member cluster" in bad_member.stderr
    bad_name = cp.register("Not_A_Name")
    assert bad_name.returncode == 1 and "invalid cluster name" in bad_name.stderr
    bad_cp = flotilla("register", "m1", "--kubeconfig", str(cp.member_kubeconfig), "--karmada-kubeconfig",
                      str(cp.tmp / "nope"))
    assert bad_cp.returncode == 1 and "--karmada-kubeconfig" in bad_cp.stderr
    unknown = cp.unregister("m9")
    assert unknown.returncode == 1 and "cluster m9 not found" in unknown.stderr
    both = cp.register("m1", "--start", "--print-command")
    assert both.returncode == 2 and "not allowed with" in both.stderr


def _agent_available() -> bool:
    return flotilla("agent", "--help").returncode == 0


def test_register_start_runs_the_agent_in_the_background_and_unregister_stops_it(cp: ControlPlane) -> None:
    if not _agent_available():
        pytest.skip("`flotilla agent` is not in this tree yet: --start launches it once it is")
    done = cp.register("m1", "--start")
    assert done.returncode == 0, done.stderr
    pid = int((cp.tmp / "m1-agent.pid").read_text())
    assert Path(f"/proc/{pid}").exists()
    assert (cp.tmp / "m1-agent.log").exists()
    again = cp.register("m1", "--start")
    assert again.returncode == 1 and "already running" in again.stderr
    gone = cp.unregister("m1", "--force")
    assert gone.returncode == 0, gone.stderr
    assert f"pid {pid}" in gone.stdout
    assert not (cp.tmp / "m1-agent.pid").exists()
    token = _token(cp.tmp / "m1-agent.kubeconfig")
    assert token not in (cp.tmp / "m1-agent.log").read_text(errors="replace")
