"""The FlinkDeployment simulator in a simulated member, driven by the real kubectl and read back with the official
Python client: the operator's status, checkpoints in the shared directory, broken images, suspend/resume, delete."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.member.checkpoints import CheckpointStore
from flotilla.member.flink import FlinkDeploymentSimulator
from flotilla.member.history import HistoryRecorder
from flotilla.member.simulated import MemberConfig
from tests.integration.member import MemberThread, python_client
from tests.support.apiserver import Kubectl

pytestmark = pytest.mark.kubectl

INTERVAL = 0.5  # checkpoint interval (s)
RATE = 100  # records per second
OPTIONS = {"flink_checkpoint_interval": INTERVAL, "flink_records_per_second": RATE, "flink_progress_interval": 0.2}


def flink_deployment(name: str, image: str = "flink:1.20", upgrade_mode: str = "last-state", extra_job: str = "",
                     labels: str = "") -> str:
    return f"""
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata:
  name: {name}
{labels}spec:
  image: {image}
  flinkVersion: v1_20
  serviceAccount: flink
  flinkConfiguration:
    taskmanager.numberOfTaskSlots: "2"
    state.checkpoints.num-retained: "2"
  jobManager:
    resource: {{memory: 2048m, cpu: 1}}
  taskManager:
    resource: {{memory: 2048m, cpu: 1}}
  job:
    jarURI: local:///opt/flink/examples/streaming/WordCount.jar
    parallelism: 2
    upgradeMode: {upgrade_mode}
{extra_job}"""


def wait_for(what: Callable[[], Any], timeout: float = 15.0, interval: float = 0.1, msg: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = what()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {msg or what}: last {last!r}")


def get(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kubectl.run("get", "flinkdeployment", name, "-n", ns, "-o", "json").stdout)
    return out


def status_of(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    return get(kubectl, ns, name).get("status") or {}


@pytest.fixture(scope="module")
def history() -> HistoryRecorder:
    return HistoryRecorder(None)


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory, history: HistoryRecorder) -> Iterator[MemberThread]:
    root = tmp_path_factory.mktemp("members")
    cfg = MemberConfig(name="flink1", data_dir=root, ready_delay=0.3, options=dict(OPTIONS))
    m = MemberThread(cfg, history).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def store(member: MemberThread) -> CheckpointStore:
    assert member.member.config.checkpoint_dir is not None
    return CheckpointStore(member.member.config.checkpoint_dir)


@pytest.fixture
def sim(member: MemberThread) -> FlinkDeploymentSimulator:
    s = member.member.simulator("flinkdeployment")
    assert isinstance(s, FlinkDeploymentSimulator)
    return s


@pytest.fixture
def ns(kubectl: Kubectl, request: pytest.FixtureRequest) -> str:
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    kubectl.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
    return name


def test_crd_is_installed_with_printer_columns(kubectl: Kubectl) -> None:
    crd = json.loads(kubectl.run("get", "crd", "flinkdeployments.flink.apache.org", "-o", "json").stdout)
    version = crd["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Job Status", "Lifecycle State"]
    assert set(version["subresources"]) == {"status", "scale"}
    assert "flinkdep" in kubectl.run("api-resources", "--api-group=flink.apache.org").stdout


def test_apply_runs_the_job_and_checkpoints(kubectl: Kubectl, ns: str, store: CheckpointStore,
                                            history: HistoryRecorder) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", input=flink_deployment("orders"))
    kubectl.run("wait", "-n", ns, "flinkdeployment/orders", "--for=jsonpath={.status.jobStatus.state}=RUNNING",
                "--timeout=20s")
    job_id = kubectl.run("get", "flinkdeployment", "orders", "-n", ns, "-o",
                         "jsonpath={.status.jobStatus.jobId}").stdout
    assert re.fullmatch(r"[0-9a-f]{32}", job_id)
    table = kubectl.run("get", "flinkdep", "orders", "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "JOB", "STATUS", "LIFECYCLE", "STATE", "AGE"]
    assert table[1].split()[:3] == ["orders", "RUNNING", "STABLE"]

    chk = wait_for(lambda: store.latest_checkpoint(job_id), msg="a checkpoint")
    assert Path(chk.metadata_path).is_file() and Path(chk.path).parent == store.root / job_id
    obj = get(kubectl, ns, "orders")
    assert "flinkdeployments.flink.apache.org/finalizer" in obj["metadata"]["finalizers"]
    st = obj["status"]
    assert st["jobManagerDeploymentStatus"] == "READY" and st["lifecycleState"] == "STABLE"
    assert st["taskManager"] == {"labelSelector": "component=taskmanager,app=orders", "replicas": 1}
    assert json.loads(st["reconciliationStatus"]["lastReconciledSpec"])["spec"]["job"]["state"] == "running"

    def progressed() -> bool:
        ann = get(kubectl, ns, "orders")["metadata"].get("annotations") or {}
        return int(ann.get("sim.flotilla.io/records-processed", "0")) >= RATE * 2 * INTERVAL

    wait_for(progressed, msg="records processed")
    ann = get(kubectl, ns, "orders")["metadata"]["annotations"]
    assert ann["sim.flotilla.io/restored-from"] == "none" and ann["sim.flotilla.io/restored-offset"] == "0"
    assert ann["sim.flotilla.io/last-checkpoint"].startswith(str(store.root / job_id / "chk-"))
    assert len(store.checkpoints(job_id)) <= 2  # state.checkpoints.num-retained
    (iv,) = history.intervals(kind="FlinkDeployment", namespace=ns, name="orders")
    assert iv.member == "flink1" and iv.end is None


def test_python_client_reads_the_status(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    from kubernetes import client

    kubectl.run("apply", "-n", ns, "-f", "-", input=flink_deployment("clicks"))
    api = client.CustomObjectsApi(python_client(member.kubeconfig))

    def running() -> dict[str, Any] | None:
        obj = api.get_namespaced_custom_object_status("flink.apache.org", "v1beta1", ns, "flinkdeployments",
                                                      "clicks")
        return obj if (obj.get("status") or {}).get("jobStatus", {}).get("state") == "RUNNING" else None

    obj = wait_for(running, msg="RUNNING via the Python client")
    job = obj["status"]["jobStatus"]
    assert re.fullmatch(r"[0-9a-f]{32}", job["jobId"]) and job["startTime"].isdigit()
    listed = api.list_namespaced_custom_object("flink.apache.org", "v1beta1", ns, "flinkdeployments")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["clicks"]


def test_broken_image_reports_the_operators_error(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", input=flink_deployment("broken", image="fake/flink:1.20"))
    st = wait_for(lambda: (s := status_of(kubectl, ns, "broken")).get("jobManagerDeploymentStatus") == "ERROR" and s,
                  msg="JM ERROR")
    assert st["jobStatus"]["state"] == "RECONCILING" and st["lifecycleState"] == "DEPLOYED"
    err = json.loads(st["error"])
    assert err["type"].endswith("DeploymentFailedException")
    assert err["additionalMetadata"]["reason"] == "ImagePullBackOff"
    assert "ErrImagePull" in st["error"] and 'Back-off pulling image "fake/flink:1.20"' in err["message"]
    # fixing the image redeploys
    kubectl.run("patch", "flinkdeployment", "broken", "-n", ns, "--type=merge", "-p", '{"spec":{"image":"flink:1.20"}}')
    wait_for(lambda: status_of(kubectl, ns, "broken").get("jobStatus", {}).get("state") == "RUNNING", msg="RUNNING")
    assert "error" not in status_of(kubectl, ns, "broken")


def test_suspend_with_savepoint_and_resume(kubectl: Kubectl, ns: str, store: CheckpointStore) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", input=flink_deployment("pay", upgrade_mode="savepoint"))
    wait_for(lambda: status_of(kubectl, ns, "pay").get("jobStatus", {}).get("state") == "RUNNING", msg="RUNNING")
    first_job = status_of(kubectl, ns, "pay")["jobStatus"]["jobId"]
    kubectl.run("patch", "flinkdeployment", "pay", "-n", ns, "--type=merge", "-p",
                '{"spec":{"job":{"state":"suspended"}}}')
    st = wait_for(lambda: (s := status_of(kubectl, ns, "pay")).get("lifecycleState") == "SUSPENDED" and s,
                  msg="SUSPENDED")
    assert st["jobManagerDeploymentStatus"] == "MISSING" and st["jobStatus"]["state"] == "FINISHED"
    savepoint = st["jobStatus"]["upgradeSavepointPath"]
    assert st["jobStatus"]["savepointInfo"]["lastSavepoint"]["location"] == savepoint
    saved = store.resolve(savepoint)
    assert saved.kind == "savepoint" and saved.job_id == first_job
    kubectl.run("patch", "flinkdeployment", "pay", "-n", ns, "--type=merge", "-p",
                '{"spec":{"job":{"state":"running"}}}')
    wait_for(lambda: status_of(kubectl, ns, "pay").get("jobStatus", {}).get("state") == "RUNNING", msg="resumed")
    obj = get(kubectl, ns, "pay")
    assert obj["status"]["jobStatus"]["jobId"] != first_job
    wait_for(lambda: get(kubectl, ns, "pay")["metadata"]["annotations"].get("sim.flotilla.io/restored-from")
             == savepoint, msg="restored-from annotation")
    assert get(kubectl, ns, "pay")["metadata"]["annotations"]["sim.flotilla.io/restored-offset"] == str(saved.offset)


def test_delete_stops_the_job(kubectl: Kubectl, ns: str, store: CheckpointStore, sim: FlinkDeploymentSimulator,
                              history: HistoryRecorder) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", input=flink_deployment("gone"))
    wait_for(lambda: status_of(kubectl, ns, "gone").get("jobStatus", {}).get("state") == "RUNNING", msg="RUNNING")
    job_id = status_of(kubectl, ns, "gone")["jobStatus"]["jobId"]
    wait_for(lambda: store.latest_checkpoint(job_id), msg="a checkpoint")
    kubectl.run("delete", "flinkdeployment", "gone", "-n", ns, "--timeout=15s")
    assert kubectl.run("get", "flinkdeployment", "-n", ns, "-o", "name").stdout.strip() == ""
    (run,) = sim.runs_of(ns, "gone")
    assert run.stop is not None and run.job_id == job_id
    after = store.latest_checkpoint(job_id)
    time.sleep(3 * INTERVAL)
    assert store.latest_checkpoint(job_id) == after  # no checkpoint after the job stopped
    (iv,) = history.intervals(kind="FlinkDeployment", namespace=ns, name="gone")
    assert iv.end is not None and iv.end == pytest.approx(run.stop)


def test_crash_annotation_takes_the_job_down_and_back(kubectl: Kubectl, ns: str, store: CheckpointStore,
                                                     history: HistoryRecorder) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", input=flink_deployment("flaky"))
    wait_for(lambda: status_of(kubectl, ns, "flaky").get("jobStatus", {}).get("state") == "RUNNING", msg="RUNNING")
    job_id = status_of(kubectl, ns, "flaky")["jobStatus"]["jobId"]
    wait_for(lambda: store.latest_checkpoint(job_id), msg="a checkpoint")
    kubectl.run("annotate", "flinkdeployment", "flaky", "-n", ns, "sim.flotilla.io/broken=true")
    st = wait_for(lambda: (s := status_of(kubectl, ns, "flaky")).get("jobManagerDeploymentStatus") == "ERROR" and s,
                  msg="JM ERROR")
    assert st["jobStatus"]["state"] == "RECONCILING" and "CrashLoopBackOff" in st["error"]
    kubectl.run("annotate", "flinkdeployment", "flaky", "-n", ns, "sim.flotilla.io/broken-")
    wait_for(lambda: status_of(kubectl, ns, "flaky").get("jobStatus", {}).get("state") == "RUNNING", msg="back")
    assert status_of(kubectl, ns, "flaky")["jobStatus"]["jobId"] == job_id  # HA: the same job
    ivs = history.intervals(kind="FlinkDeployment", namespace=ns, name="flaky")
    assert len(ivs) == 2 and ivs[0].end is not None and ivs[1].end is None
