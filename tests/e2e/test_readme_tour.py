"""The README's five-minute tour, command for command, as a newcomer types it.

The commands and the manifests (``examples/tour/``) are the README's; nothing is parsed from the README itself. They
run in a fresh working directory with the virtualenv's ``flotilla`` and ``kubectl`` on ``PATH`` and
``KUBECONFIG=.flotilla/kubeconfig``, the only change being ``flotilla up --detach --port 0`` (the README uses the
default port 6443, which another process may hold). Each step's assertion is about what the command prints:

1. ``flotilla up --detach`` prints the dashboard's URL with its one-time token; ``kubectl get clusters`` lists
   member1..3 Ready (what the dashboard shows meanwhile is tests/e2e/test_dashboard_browser.py's);
2. ``kubectl apply -f examples/tour/`` creates the PropagationPolicy and the Deployment without a warning;
   ``kubectl --context member1 get deploy`` shows ``web`` 2/2; ``flotilla get bindings`` places it on member1;
3. ``flotilla sim fault member1 --mode off --data-dir .flotilla``: ``flotilla get clusters`` shows member1
   not Ready with the ``cluster.karmada.io/not-ready:NoExecute`` taint; ``flotilla get bindings -o wide`` shows the
   eviction task from member1 (Directly) with the preserved replica count, and member2 as the new placement; no copy
   runs in member2 yet (Directly waits until member1 is known to be gone);
4. ``flotilla fence member1``: ``web`` runs in member2 with the label ``failover.example.com/replicas=2``;
5. ``flotilla sim fault member1 --mode recover ...`` and ``flotilla unfence member1``: member1 is Ready without taints
   and its stale copy is gone;
6. ``flotilla taint clusters member2 fail-test:NoExecute``: ``web`` moves to member3 with the label, member2's copy
   goes; the taint is removed again;
7. ``flotilla down`` (also when a step failed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

pytestmark = pytest.mark.kubectl

REPO = Path(__file__).resolve().parents[2]
TOUR = REPO / "examples" / "tour"
BIN = Path(sys.executable).parent
T = TypeVar("T")
LABEL = "failover.example.com/replicas"


class Shell:
    """Runs the tour's commands in one working directory, as a shell with the virtualenv activated would."""

    def __init__(self, cwd: Path) -> None:
        home = cwd / "home"
        home.mkdir()
        self.cwd = cwd
        self.env = dict(os.environ, HOME=str(home), PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                        KUBECONFIG=".flotilla/kubeconfig")

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        exe = str(BIN / argv[0])  # the virtualenv's flotilla and kubectl, whatever else is on PATH
        r = subprocess.run([exe, *argv[1:]], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r


def table(output: str) -> list[dict[str, str]]:
    """The rows of a kubectl-style table (no cell holds a space)."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    if not lines:
        return []
    header, *rows = lines
    assert all(len(r) == len(header) for r in rows), output
    return [dict(zip(header, r, strict=True)) for r in rows]


def eventually(check: Callable[[], T], what: str, timeout: float = 40.0) -> T:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            return check()
        except AssertionError as e:
            last = e
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}: {last}")


@pytest.mark.timeout(180)
def test_the_readme_tour(tmp_path: Path) -> None:
    sh = Shell(tmp_path)
    r = sh.run("flotilla", "up", "--detach", "--port", "0", timeout=120)
    try:
        assert "running in the background" in r.stdout and "flotilla down" in r.stdout, r.stdout
        assert "flotilla up: dashboard https://127.0.0.1:" in r.stdout and "/dashboard/?token=" in r.stdout, r.stdout
        assert (tmp_path / ".flotilla" / "kubeconfig").is_file()
        tour(sh)
    finally:
        down = sh.run("flotilla", "down", check=False)
    assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
    assert sh.run("kubectl", "get", "clusters", check=False, timeout=20).returncode != 0  # nothing answers


def tour(sh: Shell) -> None:
    # 1. the control plane and its three members
    def clusters_ready() -> list[dict[str, str]]:
        rows = table(sh.run("kubectl", "get", "clusters").stdout)
        assert [(c["NAME"], c["READY"]) for c in rows] == [("member1", "True"), ("member2", "True"),
                                                         ("member3", "True")], rows
        return rows

    eventually(clusters_ready, "kubectl get clusters: member1..3 Ready")

    # 2. Karmada YAML, applied with kubectl, lands in member1
    r = sh.run("kubectl", "apply", "-f", str(TOUR))
    assert r.stdout.split("\n")[:2] == ["propagationpolicy.policy.karmada.io/web created",
                                        "deployment.apps/web created"], r.stdout
    assert "arning" not in r.stderr, r.stderr

    def web_in(member: str, *extra: str) -> dict[str, str]:
        rows = table(sh.run("kubectl", "--context", member, "get", "deploy", *extra).stdout)
        assert [d["NAME"] for d in rows] == ["web"] and rows[0]["READY"] == "2/2", rows
        return rows[0]

    eventually(lambda: web_in("member1"), "kubectl --context member1 get deploy: web 2/2")

    def binding(expect: dict[str, str], *extra: str) -> dict[str, str]:
        rows = table(sh.run("flotilla", "get", "bindings", *extra).stdout)
        assert len(rows) == 1 and {k: rows[0].get(k) for k in expect} == expect, rows
        return rows[0]

    eventually(lambda: binding({"NAME": "web-deployment", "RESOURCE": "Deployment/web", "CLUSTERS": "member1:2",
                                "EVICTING": "<none>", "SCHEDULED": "True", "FULLYAPPLIED": "True"}),
               "flotilla get bindings: web on member1")

    # 3. member1 loses power: not Ready, tainted, evicted with its state; Directly waits
    r = sh.run("flotilla", "sim", "fault", "member1", "--mode", "off", "--data-dir", ".flotilla")
    assert '"mode": "off"' in r.stdout, r.stdout

    def member1_tainted() -> None:
        rows = {c["NAME"]: c for c in table(sh.run("flotilla", "get", "clusters").stdout)}
        assert rows["member1"]["READY"] == "False", rows
        assert "cluster.karmada.io/not-ready:NoExecute" in rows["member1"]["TAINTS"].split(","), rows

    eventually(member1_tainted, "flotilla get clusters: member1 not Ready and tainted")
    eventually(lambda: binding({"CLUSTERS": "member2:2", "EVICTING": f"member1(Directly){{{LABEL}=2}}"}, "-o", "wide"),
               "flotilla get bindings -o wide: the eviction task from member1 with the preserved state")
    r = sh.run("flotilla", "describe", "cluster", "member1")
    assert "cluster.karmada.io/not-ready:NoExecute" in r.stdout and "Events:" in r.stdout, r.stdout
    r = sh.run("kubectl", "--context", "member2", "get", "deploy")
    assert r.stdout == "" and "No resources found" in r.stderr, (r.stdout, r.stderr)

    # 4. fencing says member1 is really down: the new copy starts, with the state as a label
    r = sh.run("flotilla", "fence", "member1")
    assert "cluster(member1) fenced" in r.stdout, r.stdout
    row = eventually(lambda: web_in("member2", "-L", LABEL), "web 2/2 in member2")
    assert row["REPLICAS"] == "2", row
    binding({"CLUSTERS": "member2:2"})

    # 5. member1 comes back: Ready, no taint, and its stale copy is deleted
    sh.run("flotilla", "sim", "fault", "member1", "--mode", "recover", "--data-dir", ".flotilla")
    r = sh.run("flotilla", "unfence", "member1")
    assert "cluster(member1) unfenced" in r.stdout, r.stdout

    def member1_back() -> None:
        rows = {c["NAME"]: c for c in table(sh.run("flotilla", "get", "clusters").stdout)}
        assert (rows["member1"]["READY"], rows["member1"]["TAINTS"]) == ("True", "<none>"), rows
        r = sh.run("kubectl", "--context", "member1", "get", "deploy")
        assert r.stdout == "" and "No resources found" in r.stderr, r.stdout

    eventually(member1_back, "member1 Ready, untainted and without its stale copy")

    # 6. the same with a taint, as karmadactl taint: web moves on to member3 with the label
    r = sh.run("flotilla", "taint", "clusters", "member2", "fail-test:NoExecute")
    assert r.stdout.strip() == "cluster/member2 tainted", r.stdout
    eventually(lambda: binding({"CLUSTERS": "member3:2"}), "flotilla get bindings: web on member3")
    row = eventually(lambda: web_in("member3", "-L", LABEL), "web 2/2 in member3")
    assert row["REPLICAS"] == "2", row

    def gone_from_member2() -> None:
        r = sh.run("kubectl", "--context", "member2", "get", "deploy")
        assert r.stdout == "" and "No resources found" in r.stderr, r.stdout

    eventually(gone_from_member2, "web gone from member2")
    r = sh.run("flotilla", "taint", "clusters", "member2", "fail-test:NoExecute-")
    assert r.stdout.strip() == "cluster/member2 untainted", r.stdout
