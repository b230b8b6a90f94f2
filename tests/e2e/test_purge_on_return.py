"""D17 end to end: a fenced cluster's stale FlinkDeployment goes as soon as the cluster's API answers again.

``flotilla up --detach --members 2`` in a fresh directory, driven by the real kubectl and ``flotilla`` commands:

1. the FlinkDeployment of ``examples/failover`` (one cluster of member1/member2, ``purgeMode: Directly``) runs in
   one member, A;
2. ``flotilla sim fault A --mode down`` (cut off, its job keeps running), ``flotilla fence A``: the job moves to the
   other member, B;
3. ``flotilla sim fault A --mode recover``: A's stale copy is deleted within seconds, while A is still fenced (it
   stayed until ``flotilla unfence`` before);
4. the real outage, the other way round: ``flotilla unfence A``, ``flotilla sim fault B --mode off`` (power off:
   its job stops), ``flotilla fence B``, the job moves back to A; ``flotilla sim fault B --mode recover
   --boot-delay 6`` powers B on with its workloads restarting 6 s after its API: the purge deletes B's stale copy
   before that, while B is fenced, so from the power-off on no two copies of the job ever ran at once (the
   members' running history). Before D17 the stale copy restarted and ran beside the new one until an unfence.

In step 2 both copies run while A is cut off: a fence of a cluster that is only partitioned lets the new copy
start beside the old one (docs/failover.md says so); what D17 bounds is how long that lasts once A answers.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.history import Interval, overlaps, read_history
from tests.e2e.test_readme_tour import BIN, REPO, Shell, eventually

pytestmark = pytest.mark.kubectl

EXAMPLES = REPO / "examples" / "failover"
NS, NAME = "streaming", "wordcount"
OUT_OF_SERVICE = "cluster.flotilla.io/out-of-service"
PURGE_BOUND = 10.0  # seconds from recover to the stale copy gone (the purge itself takes well under one here)
BOOT_DELAY = 6.0


class Up(Shell):
    def apply_json(self, obj: dict[str, Any]) -> None:
        r = subprocess.run([str(BIN / "kubectl"), "apply", "-f", "-"],
                           cwd=self.cwd, env=self.env, input=json.dumps(obj), capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr

    def kubectl_json(self, *argv: str) -> dict[str, Any] | None:
        r = self.run("kubectl", *argv, "-o", "json", check=False, timeout=20)
        if r.returncode != 0:
            assert "NotFound" in r.stderr or "not found" in r.stderr, r.stderr
            return None
        out: dict[str, Any] = json.loads(r.stdout)
        return out

    def flink(self, member: str) -> dict[str, Any] | None:
        return self.kubectl_json("--context", member, "get", "flinkdeployments", NAME, "-n", NS)

    def job_state(self, member: str) -> str | None:
        obj = self.flink(member)
        return (((obj or {}).get("status") or {}).get("jobStatus") or {}).get("state")

    def cluster(self, member: str) -> dict[str, Any]:
        obj = self.kubectl_json("get", "clusters", member)
        assert obj is not None, member
        return obj

    def fenced(self, member: str) -> bool:
        return any(t.get("key") == OUT_OF_SERVICE for t in (self.cluster(member).get("spec") or {}).get("taints") or [])

    def ready(self, member: str) -> str | None:
        for c in (self.cluster(member).get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready":
                return str(c.get("status"))
        return None

    def fault(self, member: str, mode: str, *extra: str) -> None:
        r = self.run("flotilla", "sim", "fault", member, "--mode", mode, "--data-dir", ".flotilla/members", *extra)
        assert f'"mode": "{"normal" if mode == "recover" else mode}"' in r.stdout, r.stdout


def running_in(sh: Up, member: str) -> None:
    assert sh.job_state(member) == "RUNNING", f"{member}: {sh.job_state(member)}"


def gone_from(sh: Up, member: str) -> None:
    assert sh.flink(member) is None, f"{NAME} still in {member}"


def deleted_in(sh: Up, member: str) -> None:
    """Gone, or being deleted (a FlinkDeployment keeps its operator's finalizer until the operator runs)."""
    obj = sh.flink(member)
    assert obj is None or obj["metadata"].get("deletionTimestamp"), f"{NAME} still in {member}, not being deleted"


def not_ready(sh: Up, member: str) -> None:
    assert sh.ready(member) != "True", f"{member} Ready {sh.ready(member)}"


def ready_untainted(sh: Up, member: str) -> None:
    c = sh.cluster(member)
    assert sh.ready(member) == "True" and not (c.get("spec") or {}).get("taints"), c.get("spec")


def runs(history: Path) -> list[Interval]:
    return [iv for iv in read_history(history) if iv.kind == "FlinkDeployment" and iv.name == NAME]


@pytest.mark.timeout(300)
def test_d17_fenced_cluster_back_loses_its_stale_flink_copy_at_once_and_no_two_copies_run(tmp_path: Path) -> None:
    sh = Up(tmp_path)
    r = sh.run("flotilla", "up", "--detach", "--port", "0", "--members", "2", "--metrics-bind-address", "0",
               timeout=120)
    try:
        assert "running in the background" in r.stdout, r.stdout
        scenario(sh, tmp_path / ".flotilla" / "members" / "history.jsonl")
    finally:
        sh.run("flotilla", "down", check=False)


def scenario(sh: Up, history: Path) -> None:
    eventually(lambda: [ready_untainted(sh, m) for m in ("member1", "member2")], "both members Ready")
    sh.apply_json(flink_deployment_crd())  # the CRD the members serve, on the control plane
    sh.run("kubectl", "wait", "--for=condition=Established", "crd/flinkdeployments.flink.apache.org",
           "--timeout=30s")
    for name in ("00-namespace.yaml", "21-flinkdeployment-policy.yaml"):
        sh.run("kubectl", "apply", "-f", str(EXAMPLES / name))
    # A is fenced while its job still runs (the point of this test), and that job goes on checkpointing: with
    # Flink's default of one retained checkpoint it would delete the one the new copy restores from before the new
    # job has read it. Keeping three is what the state-preservation guide advises for this case.
    job = yaml.safe_load((EXAMPLES / "20-flinkdeployment.yaml").read_text())
    job["spec"]["flinkConfiguration"] = {"state.checkpoints.num-retained": "3"}
    sh.apply_json(job)

    def placed() -> str:
        found = [m for m in ("member1", "member2") if sh.job_state(m) == "RUNNING"]
        assert len(found) == 1, found
        return found[0]

    a = eventually(placed, "the job RUNNING in one member")
    b = "member2" if a == "member1" else "member1"

    # 2. A is cut off (its job keeps running), fenced: the job moves to B
    sh.fault(a, "down")
    eventually(lambda: not_ready(sh, a), f"{a} not Ready")
    sh.run("flotilla", "fence", a)
    eventually(lambda: running_in(sh, b), f"the job RUNNING in {b}")

    # 3. A answers again: its stale copy goes at once, A still fenced
    sh.fault(a, "recover")
    back = time.monotonic()
    eventually(lambda: gone_from(sh, a), f"the stale copy deleted in {a}", timeout=PURGE_BOUND * 2)
    took = time.monotonic() - back
    assert sh.fenced(a), f"{a} must still be fenced"
    print(f"D17: stale copy in {a} deleted {took:.1f}s after recover (still fenced)")
    assert took <= PURGE_BOUND, f"the stale copy went {took:.1f}s after {a} answered again"
    stale = [iv for iv in runs(history) if iv.member == a]
    assert stale and all(iv.end is not None for iv in stale), stale  # A's copy stopped running

    # 4. the other way round with a real outage: the stale copy never runs beside the new one
    sh.run("flotilla", "unfence", a)
    eventually(lambda: ready_untainted(sh, a), f"{a} Ready without taints")
    power_off = time.time()
    sh.fault(b, "off")
    eventually(lambda: not_ready(sh, b), f"{b} not Ready")
    sh.run("flotilla", "fence", b)
    eventually(lambda: running_in(sh, a), f"the job RUNNING in {a} again")
    sh.fault(b, "recover", "--boot-delay", str(BOOT_DELAY))
    on = time.monotonic()
    eventually(lambda: deleted_in(sh, b), f"the stale copy deleted in {b}", timeout=PURGE_BOUND * 2)
    took = time.monotonic() - on
    assert sh.fenced(b)
    print(f"D17: stale copy in {b} deleted {took:.1f}s after power-on (boot delay {BOOT_DELAY:g}s, still fenced)")
    assert took < BOOT_DELAY, f"the purge came {took:.1f}s after power-on, after {b}'s workloads restarted"
    # B's operator runs again after the boot delay: it lets the deleted copy go instead of restarting it
    eventually(lambda: gone_from(sh, b), f"the stale copy gone from {b} once it booted")
    running_in(sh, a)
    since = [iv for iv in runs(history) if iv.end is None or iv.end > power_off]
    assert overlaps(since) == [], f"two copies of {NAME} ran at once: {overlaps(since)}"
