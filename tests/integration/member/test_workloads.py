"""Workload simulators driven through the real kubectl against a simulated member; statuses read back with the
official Python client's strict models."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flotilla.member.history import overlaps
from flotilla.member.simulated import MemberConfig
from tests.integration.member import MemberThread, python_client
from tests.support.apiserver import Kubectl

pytestmark = pytest.mark.kubectl

DELAY = 0.3


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemberThread]:
    cfg = MemberConfig(name="sim1", data_dir=tmp_path_factory.mktemp("members"), ready_delay=DELAY,
                       progress_deadline=1.0, daemonset_nodes=2)
    m = MemberThread(cfg).start()
    yield m
    m.stop()


@pytest.fixture
def ns(kubectl: Kubectl, request: pytest.FixtureRequest) -> str:
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    kubectl.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
    return name


def deployment(name: str, image: str, replicas: int = 3, extra_meta: str = "") -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
{extra_meta}spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: {name}, image: "{image}"}}]
"""


def statefulset(name: str, image: str, replicas: int = 2) -> str:
    return f"""
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {name}
spec:
  serviceName: {name}
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: {name}, image: "{image}"}}]
"""


def job(name: str, image: str, extra_spec: str = "") -> str:
    return f"""
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
{extra_spec}  template:
    spec:
      restartPolicy: Never
      containers: [{{name: {name}, image: "{image}"}}]
"""


def test_deployment_rollout_set_image_and_scale(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    from kubernetes import client

    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("web", "nginx:1.25"))
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=20s")
    apps = client.AppsV1Api(python_client(member.kubeconfig))
    d = apps.read_namespaced_deployment("web", ns)
    assert d.status.observed_generation == d.metadata.generation == 1
    assert (d.status.replicas, d.status.ready_replicas, d.status.available_replicas,
            d.status.updated_replicas) == (3, 3, 3, 3)
    conds = {c.type: c for c in d.status.conditions}
    assert conds["Available"].status == "True" and conds["Available"].reason == "MinimumReplicasAvailable"
    assert conds["Progressing"].status == "True" and conds["Progressing"].reason == "NewReplicaSetAvailable"
    assert conds["Progressing"].last_update_time is not None and conds["Available"].last_transition_time is not None
    assert d.spec.strategy.type == "RollingUpdate" and d.spec.progress_deadline_seconds == 600  # member defaults

    kubectl.run("set", "image", "deployment/web", "web=nginx:1.26", "-n", ns)
    t0 = time.monotonic()
    out = kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=20s").stdout
    assert "successfully rolled out" in out
    assert time.monotonic() - t0 >= DELAY * 0.5  # the new pods needed the delay to become ready
    d = apps.read_namespaced_deployment("web", ns)
    assert d.metadata.generation == 2 and d.status.observed_generation == 2
    assert d.status.updated_replicas == 3 and d.status.replicas == 3  # the old pods are gone

    kubectl.run("scale", "deployment/web", "--replicas=5", "-n", ns)
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=20s")
    d = apps.read_namespaced_deployment("web", ns)
    assert d.status.ready_replicas == 5 and d.status.available_replicas == 5
    kubectl.run("scale", "deployment/web", "--replicas=1", "-n", ns)
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=20s")
    assert apps.read_namespaced_deployment("web", ns).status.replicas == 1


def test_broken_image_deployment_exceeds_progress_deadline(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    from kubernetes import client

    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("bad", "fake/nginx:1.0", replicas=2))
    proc = kubectl.run("rollout", "status", "deployment/bad", "-n", ns, "--timeout=20s", check=False)
    assert proc.returncode != 0
    assert "exceeded its progress deadline" in proc.stderr
    d = client.AppsV1Api(python_client(member.kubeconfig)).read_namespaced_deployment("bad", ns)
    assert not d.status.ready_replicas and not d.status.available_replicas
    assert d.status.unavailable_replicas == 2 and d.status.updated_replicas == 2
    conds = {c.type: c for c in d.status.conditions}
    assert (conds["Available"].status, conds["Available"].reason) == ("False", "MinimumReplicasUnavailable")
    assert (conds["Progressing"].status, conds["Progressing"].reason) == ("False", "ProgressDeadlineExceeded")

    # fixing the image rolls out again
    kubectl.run("set", "image", "deployment/bad", "bad=nginx:1.25", "-n", ns)
    kubectl.run("rollout", "status", "deployment/bad", "-n", ns, "--timeout=20s")


def test_rollout_to_broken_image_keeps_old_pods(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    from kubernetes import client

    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("web", "nginx:1.25", replicas=2))
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=20s")
    kubectl.run("set", "image", "deployment/web", "web=fake/nginx:2", "-n", ns)
    proc = kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=20s", check=False)
    assert proc.returncode != 0 and "exceeded its progress deadline" in proc.stderr
    d = client.AppsV1Api(python_client(member.kubeconfig)).read_namespaced_deployment("web", ns)
    # RollingUpdate with the default 25%/25% of 2 replicas: one surge pod, none unavailable; the broken new pod
    # never becomes ready, so the two old ones stay
    assert d.status.ready_replicas == 2 and d.status.updated_replicas == 1 and d.status.replicas == 3
    assert {c.type: c.status for c in d.status.conditions} == {"Available": "True", "Progressing": "False"}


def test_rolling_update_respects_max_surge_and_max_unavailable(kubectl: Kubectl, member: MemberThread,
                                                              ns: str) -> None:
    """maxSurge 1 / maxUnavailable 0 over 4 replicas: never more than 5 pods, never fewer than 4 available, and the
    rollout completes one new pod at a time."""
    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("roll", "nginx:1.25", replicas=4))
    kubectl.run("rollout", "status", "deployment/roll", "-n", ns, "--timeout=20s")
    kubectl.run("patch", "deployment/roll", "-n", ns, "--type=merge", "-p",
                '{"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, '
                '"maxUnavailable": 0}}, "template": {"spec": {"containers": [{"name": "roll", "image": "nginx:2"}]}}}}')
    w = kubectl.popen("get", "deployment/roll", "-n", ns, "-w", "-o",
                      "jsonpath={.status.replicas} {.status.availableReplicas} {.status.updatedReplicas}{\"\\n\"}")
    try:
        kubectl.run("rollout", "status", "deployment/roll", "-n", ns, "--timeout=30s")
    finally:
        w.terminate()
        out, _ = w.communicate(timeout=10)
    seen = [tuple(int(x) for x in line.split()) for line in out.splitlines() if len(line.split()) == 3]
    assert seen, out
    assert all(replicas <= 5 and available >= 4 for replicas, available, _ in seen), seen
    assert any(replicas == 5 for replicas, _, _ in seen), seen  # the surge pod was used
    final = json.loads(kubectl.run("get", "deployment/roll", "-n", ns, "-o", "json").stdout)["status"]
    assert (final["replicas"], final["availableReplicas"], final["updatedReplicas"]) == (4, 4, 4)


def test_crash_annotation_makes_workload_unready_until_removed(kubectl: Kubectl, member: MemberThread,
                                                               ns: str) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("app", "nginx:1.25", replicas=2))
    kubectl.run("rollout", "status", "deployment/app", "-n", ns, "--timeout=20s")
    kubectl.run("annotate", "deployment/app", "sim.flotilla.io/broken=true", "-n", ns)
    kubectl.run("wait", "--for=condition=Available=False", "deployment/app", "-n", ns, "--timeout=20s")
    kubectl.run("annotate", "deployment/app", "sim.flotilla.io/broken-", "-n", ns)
    kubectl.run("wait", "--for=condition=Available", "deployment/app", "-n", ns, "--timeout=20s")
    out = kubectl.run("get", "deployment/app", "-n", ns, "-o", "jsonpath={.status.readyReplicas}").stdout
    assert out == "2"


def test_replace_without_defaults_keeps_generation(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("web", "nginx:1.25", replicas=1))
    kubectl.run("replace", "-n", ns, "-f", "-", input=deployment("web", "nginx:1.25", replicas=1))
    out = kubectl.run("get", "deployment/web", "-n", ns, "-o", "jsonpath={.metadata.generation}").stdout
    assert out == "1"


def test_statefulset_rollout_update_and_history(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    from kubernetes import client

    kubectl.run("apply", "-n", ns, "-f", "-", input=statefulset("db", "postgres:16", replicas=2))
    t0 = time.monotonic()
    kubectl.run("rollout", "status", "statefulset/db", "-n", ns, "--timeout=20s")
    assert time.monotonic() - t0 >= 2 * DELAY * 0.8  # OrderedReady: one pod after the other
    apps = client.AppsV1Api(python_client(member.kubeconfig))
    s = apps.read_namespaced_stateful_set("db", ns)
    assert s.spec.update_strategy.type == "RollingUpdate" and s.spec.pod_management_policy == "OrderedReady"
    st = s.status
    assert (st.replicas, st.ready_replicas, st.available_replicas, st.current_replicas, st.updated_replicas) == \
        (2, 2, 2, 2, 2)
    assert st.current_revision == st.update_revision and st.update_revision.startswith("db-")
    assert st.observed_generation == 1
    first_rev = st.update_revision

    kubectl.run("set", "image", "statefulset/db", "db=postgres:17", "-n", ns)
    kubectl.run("rollout", "status", "statefulset/db", "-n", ns, "--timeout=20s")
    st = apps.read_namespaced_stateful_set("db", ns).status
    assert st.update_revision != first_rev and st.current_revision == st.update_revision
    assert st.updated_replicas == 2 and st.ready_replicas == 2 and st.observed_generation == 2

    history = member.member.history
    ivs = history.intervals(kind="StatefulSet", namespace=ns, name="db")
    assert ivs and ivs[0].member == "sim1" and ivs[-1].end is None  # running now
    kubectl.run("delete", "statefulset/db", "-n", ns)
    deadline = time.monotonic() + 5
    while history.intervals(kind="StatefulSet", namespace=ns, name="db")[-1].end is None:
        assert time.monotonic() < deadline, "deleting the StatefulSet did not close its running interval"
        time.sleep(0.05)
    assert overlaps(history.intervals(kind="StatefulSet", namespace=ns)) == []


def test_broken_statefulset_never_runs(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", input=statefulset("bad", "fake/redis:7", replicas=1))
    proc = kubectl.run("rollout", "status", "statefulset/bad", "-n", ns, "--timeout=1s", check=False)
    assert proc.returncode != 0
    out = kubectl.run("get", "statefulset/bad", "-n", ns, "-o", "jsonpath={.status.replicas}/"
                      "{.status.readyReplicas}/{.status.observedGeneration}").stdout
    assert out == "1//1"
    assert member.member.history.intervals(kind="StatefulSet", namespace=ns, name="bad") == []
    # fixing the image recovers (the broken pod is replaced without waiting for it)
    kubectl.run("set", "image", "statefulset/bad", "bad=redis:7", "-n", ns)
    kubectl.run("rollout", "status", "statefulset/bad", "-n", ns, "--timeout=20s")
    assert len(member.member.history.intervals(kind="StatefulSet", namespace=ns, name="bad")) == 1


def test_daemonset_and_replicaset(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    from kubernetes import client

    kubectl.run("apply", "-n", ns, "-f", "-", input="""
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "fluentd:1"}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 2
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: rs, image: "nginx:1.25"}]}
""")
    kubectl.run("rollout", "status", "daemonset/agent", "-n", ns, "--timeout=20s")
    kubectl.run("wait", "--for=jsonpath={.status.readyReplicas}=2", "replicaset/rs", "-n", ns, "--timeout=20s")
    apps = client.AppsV1Api(python_client(member.kubeconfig))
    ds = apps.read_namespaced_daemon_set("agent", ns).status
    assert (ds.desired_number_scheduled, ds.current_number_scheduled, ds.number_ready, ds.number_available,
            ds.updated_number_scheduled, ds.number_misscheduled) == (2, 2, 2, 2, 2, 0)
    rs = apps.read_namespaced_replica_set("rs", ns).status
    assert (rs.replicas, rs.ready_replicas, rs.available_replicas, rs.observed_generation) == (2, 2, 2, 1)
    kubectl.run("set", "image", "daemonset/agent", "agent=fluentd:2", "-n", ns)
    kubectl.run("rollout", "status", "daemonset/agent", "-n", ns, "--timeout=20s")
    assert apps.read_namespaced_daemon_set("agent", ns).status.observed_generation == 2


def test_jobs_complete_or_fail(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    from kubernetes import client

    kubectl.run("apply", "-n", ns, "-f", "-", input=job("ok", "busybox:1", "  completions: 2\n"))
    kubectl.run("apply", "-n", ns, "-f", "-", input=job("bad", "fake/busybox:1", "  backoffLimit: 1\n"))
    kubectl.run("wait", "--for=condition=complete", "job/ok", "-n", ns, "--timeout=20s")
    kubectl.run("wait", "--for=condition=failed", "job/bad", "-n", ns, "--timeout=20s")
    batch = client.BatchV1Api(python_client(member.kubeconfig))
    ok = batch.read_namespaced_job("ok", ns).status
    assert ok.succeeded == 2 and not ok.active and ok.start_time and ok.completion_time
    assert ok.completion_time >= ok.start_time
    assert {c.type: c.status for c in ok.conditions} == {"SuccessCriteriaMet": "True", "Complete": "True"}
    bad = batch.read_namespaced_job("bad", ns).status
    assert bad.failed == 2 and not bad.succeeded and bad.completion_time is None
    assert {(c.type, c.reason) for c in bad.conditions} == {("FailureTarget", "BackoffLimitExceeded"),
                                                           ("Failed", "BackoffLimitExceeded")}


def test_python_client_decodes_every_status(kubectl: Kubectl, member: MemberThread, ns: str) -> None:
    """Everything the simulators wrote, in every namespace, through the strict models (list calls)."""
    from kubernetes import client

    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("d", "nginx:1") + "---" + statefulset("s", "x:1")
                + "---" + job("j", "busybox:1") + "---" + deployment("b", "fake/x:1", replicas=1))
    kubectl.run("wait", "--for=condition=complete", "job/j", "-n", ns, "--timeout=20s")
    kubectl.run("rollout", "status", "statefulset/s", "-n", ns, "--timeout=20s")
    api = python_client(member.kubeconfig)
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    lists = [apps.list_deployment_for_all_namespaces(), apps.list_stateful_set_for_all_namespaces(),
             apps.list_daemon_set_for_all_namespaces(), apps.list_replica_set_for_all_namespaces(),
             batch.list_job_for_all_namespaces()]
    assert all(lst.items for lst in lists), [len(lst.items) for lst in lists]
    for lst in lists:
        for item in lst.items:
            assert item.status is not None, f"{item.kind} {item.metadata.name} has no status"


def test_member_files(member: MemberThread) -> None:
    import yaml

    kc = yaml.safe_load(Path(member.kubeconfig).read_text())
    assert kc["current-context"] == "sim1"
    assert kc["clusters"][0]["cluster"]["server"] == member.url
    assert member.member.config.checkpoints.is_dir()
