"""The failover examples and guides: ``examples/failover/`` and ``docs/failover.md`` / ``docs/state-preservation.md``.

* ``walkthrough.sh`` runs a planned move and an unplanned failover of a Flink job with real processes
  (apiserver, two members with nothing installed in them, controller-manager) and must succeed, show the job
  starting from a savepoint after the planned move (0 records processed again) and from a checkpoint of the
  preserved job id after the failover, both written by the control plane, list both in ``flotilla get
  failovers``, and stop every process it started;
* every manifest in ``examples/failover/`` is accepted by a real ``flotilla apiserver`` with
  ``kubectl apply --dry-run=server`` (after the FlinkDeployment CRD), without admission warnings, and so is every
  complete object the guides show;
* the guides' relative links point at files (and headings) that exist.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from flotilla.member.flink_crd import flink_deployment_crd
from tests.support.apiserver import Kubectl, ServerProcess

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "failover"
WALKTHROUGH = EXAMPLES / "walkthrough.sh"
GUIDES = (REPO / "docs" / "failover.md", REPO / "docs" / "state-preservation.md")
BIN = Path(sys.executable).parent
WALKTHROUGH_TIMEOUT = 150.0  # the script takes 40-60 s; each of its waits gives up after 30 s


def manifests() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))


# what the guides show of the member clusters' own set-up (the Kyverno policy a Karmada user runs in every member
# today), which the control plane does not serve
MEMBER_SIDE_GROUPS = ("kyverno.io/",)


def guide_objects() -> list[dict[str, Any]]:
    """The complete control-plane API objects (with apiVersion and kind) in the guides' ```yaml blocks."""
    out = []
    for guide in GUIDES:
        for block in re.findall(r"^```yaml\n(.*?)^```", guide.read_text(), flags=re.M | re.S):
            for doc in yaml.safe_load_all(block):
                if isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc \
                        and not str(doc["apiVersion"]).startswith(MEMBER_SIDE_GROUPS):
                    out.append(doc)
    return out



def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) counts as gone
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


@pytest.mark.kubectl
@pytest.mark.timeout(WALKTHROUGH_TIMEOUT + 30)
def test_walkthrough_moves_the_flink_job_with_its_state(tmp_path: Path) -> None:
    assert os.access(WALKTHROUGH, os.X_OK), f"{WALKTHROUGH} is not executable"
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    env = dict(os.environ, HOME=str(home), WALKTHROUGH_DIR=str(work),
               FLOTILLA=str(BIN / "flotilla"), KUBECTL=str(BIN / "kubectl"), PYTHON=sys.executable)
    env.pop("KUBECONFIG", None)
    started = time.monotonic()
    proc = subprocess.Popen([str(WALKTHROUGH)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=tmp_path, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=WALKTHROUGH_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"walkthrough.sh did not finish in {WALKTHROUGH_TIMEOUT:.0f}s:\n{out}")
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, f"walkthrough.sh failed ({proc.returncode}):\n{out}"
    assert elapsed < 120, f"walkthrough.sh took {elapsed:.0f}s:\n{out}"

    # the job ran in one member with a job id
    ran = re.search(r"wordcount runs in (member\d) with job id ([0-9a-f]{32})", out)
    assert ran, out
    old, job_id = ran.groups()
    assert "savepoint rule" not in out, out

    # the planned move: the job id's savepoint, written by the control plane, and nothing processed twice
    planned = re.search(r"planned move: job id ([0-9a-f]{32}) moved from (member\d) to (member\d): restored from "
                        r"savepoint (\S+), (\d+) records processed again", out)
    assert planned, out
    assert planned.group(1) == job_id and planned.group(2) == old and planned.group(3) != old, out
    new = planned.group(3)
    assert f"/savepoint-{job_id[:6]}-" in planned.group(4), out
    assert planned.group(5) == "0", out
    assert f'preservedLabelState={{"failover.flink.io/job-id":"{job_id}"}}' in out, out
    assert "phase=Done" in out, out

    # the failover of the member it moved to: the newest checkpoint of the preserved job id
    failed = re.search(r"failover: job id ([0-9a-f]{32}) carried over from (member\d) to (member\d): restored from "
                       r"checkpoint (\S+), (\d+) records processed again", out)
    assert failed, out
    second_job = failed.group(1)
    assert second_job != job_id and failed.group(2) == new and failed.group(3) == old, out
    assert f"/{second_job}/chk-" in failed.group(4), out
    assert f'preservedLabelState={{"failover.flink.io/job-id":"{second_job}"}}' in out, out
    assert out.count("the control plane wrote spec.job.initialSavepointPath=") == 2, out
    for label in re.findall(r"created with the label failover\.flink\.io/job-id=(\S+)", out):
        assert label in (job_id, second_job), out  # seen unless a new copy's whole life fell between two polls

    # the history lists both, newest first
    rows = re.findall(r"^streaming\s+FlinkDeployment/wordcount\s+(member\d)\s+(member\d)\s+(\w+)\s", out, flags=re.M)
    assert rows == [(new, old, "ClusterTaint"), (old, new, "PlannedMove")], out
    assert "==> Done:" in out, out

    # every process it started is gone
    pids = [int(p) for p in re.findall(r"started [\w-]+ \(pid (\d+)\)", out)]
    assert len(pids) == 3, out
    deadline = time.monotonic() + 10
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in pids if _pid_alive(p)], f"processes left running: {pids}\n{out}"


@pytest.mark.kubectl
def test_every_example_manifest_is_accepted_by_the_api_server(tmp_path: Path) -> None:
    files = manifests()
    kinds = set()
    for f in files:
        docs = [d for d in yaml.safe_load_all(f.read_text()) if d]
        assert docs, f"{f.name} has no object"
        kinds |= {d["kind"] for d in docs}
    assert {"Namespace", "ClusterTaintPolicy", "PropagationPolicy", "FlinkDeployment", "StatefulSet",
            "Deployment"} <= kinds, kinds

    home = tmp_path / "home"
    home.mkdir()
    server = ServerProcess(tmp_path / "cp", storage_url="memory://")
    server.start()
    try:
        cp = Kubectl(server.kubeconfig, home)
        crd = flink_deployment_crd()
        cp.run("apply", "-f", "-", input=json.dumps(crd))
        cp.run("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=20s")
        cp.run("apply", "-f", str(EXAMPLES / "00-namespace.yaml"))  # the namespaced objects need it for real
        for f in files:
            r = cp.run("apply", "--dry-run=server", "-f", str(f), check=False)
            assert r.returncode == 0, f"{f.name}: kubectl apply --dry-run=server failed:\n{r.stdout}\n{r.stderr}"
            assert "Warning" not in r.stderr, f"{f.name}: admission warnings:\n{r.stderr}"
            objects = len([d for d in yaml.safe_load_all(f.read_text()) if d])
            assert r.stdout.count("(server dry run)") == objects, f"{f.name}:\n{r.stdout}"
        # the whole directory at once
        r = cp.run("apply", "--dry-run=server", "-f", str(EXAMPLES), check=False)
        assert r.returncode == 0, r.stderr
        # complete objects shown in the guides (the ResourceInterpreterCustomization recipe)
        shown = guide_objects()
        assert any(o["kind"] == "ResourceInterpreterCustomization" for o in shown), shown
        for obj in shown:
            r = cp.run("apply", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False)
            assert r.returncode == 0, f"{obj['kind']} {obj['metadata']['name']} from a guide:\n{r.stderr}"
    finally:
        server.stop()


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_the_guides_link_to_files_and_headings_that_exist() -> None:
    for guide in GUIDES:
        text = guide.read_text()
        links = re.findall(r"\]\(([^)\s]+)\)", text)
        local = [t for t in links if not re.match(r"[a-z]+://", t)]
        assert local, f"{guide.name}: no relative links found"
        broken = []
        for link in local:
            path, _, anchor = link.partition("#")
            target = (guide.parent / path).resolve() if path else guide
            if not target.exists():
                broken.append(link)
            elif anchor and target.suffix == ".md" and anchor not in _anchors(target.read_text()):
                broken.append(link)
        assert not broken, f"{guide.name}: broken links: {broken}"
