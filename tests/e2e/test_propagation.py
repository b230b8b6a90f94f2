"""Issue 4 end to end: the propagation pipeline as real processes, driven by the real kubectl.

One module-scoped fixture starts ``flotilla apiserver``, ``flotilla member --count 3``, joins the three members
with ``flotilla join`` and starts ``flotilla controller-manager``; it then applies every scenario's objects at once
(so the scenarios progress in parallel) and each test polls for its own outcome in the members and on the
control plane. Every subprocess is killed at the end, even when the set-up fails half way.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.pipeline import (
    NS,
    STARTUP_TIMEOUT,
    Pipeline,
    condition,
    controller_manager_argv,
    deployment,
    docs,
    flink_deployment,
    policy,
    start_control_plane,
    tail,
)

pytestmark = pytest.mark.kubectl

MEMBERS = ("member1", "member2", "member3")
# what the whole pipeline needs; a missing one fails every test with its name, instead of timing out obscurely
REQUIRED_CONTROLLERS = ("cluster", "cluster-status", "detector", "scheduler", "binding", "execution",
                        "work-status", "binding-status")
CM_IDENTITY = "e2e-controller-manager"


# ----------------------------------------------------------------------------------------------- manifests


# load on member1 that the control plane does not manage (as other workloads of a real member cluster): the
# member's resourceSummary counts it, so member1 offers fewer replicas to the dynamic-weight scenario
BALLAST = deployment("ballast", 3, cpu="4")
NODE_CPU = 8  # `flotilla member` defaults: 3 nodes of 8 CPU, 32Gi, 110 pods each
NODES_PER_MEMBER = 3

SCENARIOS: dict[str, str] = {
    # Duplicated to member1 and member2: full replicas in each
    "duplicated": docs(
        policy("dup", "Deployment", "apps/v1", {
            "clusterAffinity": {"clusterNames": ["member1", "member2"]},
            "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}),
        deployment("dup", 2)),
    # Divided, static weights 1:2 over 3 replicas
    "static": docs(
        policy("static", "Deployment", "apps/v1", {
            "clusterAffinity": {"clusterNames": ["member1", "member2"]},
            "replicaScheduling": {
                "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                    {"targetCluster": {"clusterNames": ["member2"]}, "weight": 2}]}}}),
        deployment("static", 3)),
    # Divided, dynamic weights by available replicas: 4 CPU a replica; every member has 3 nodes x 8 CPU, and
    # member1 runs BALLAST (3 x 4 CPU, created in the member directly), so 3:6:6 replicas are available
    "dynamic": docs(
        policy("dynamic", "Deployment", "apps/v1", {
            "clusterAffinity": {"clusterNames": list(MEMBERS)},
            "replicaScheduling": {
                "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}),
        deployment("dynamic", 5, cpu="4")),
    # one cluster out of three
    "spread": docs(
        policy("spread", "Deployment", "apps/v1", {
            "clusterAffinity": {"clusterNames": list(MEMBERS)},
            "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]}),
        deployment("spread", 2)),
    # the image changes in member2 only (the OverridePolicy is applied first, so the first Works carry it)
    "override": docs(
        {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
         "metadata": {"name": "ovr", "namespace": NS},
         "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "ovr"}],
                  "overrideRules": [{"targetCluster": {"clusterNames": ["member2"]},
                                     "overriders": {"imageOverrider": [
                                         {"component": "Tag", "operator": "replace", "value": "1.27-alpine"}]}}]}},
        policy("ovr", "Deployment", "apps/v1", {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}),
        deployment("ovr", 1)),
    "statefulset": docs(
        policy("db", "StatefulSet", "apps/v1", {"clusterAffinity": {"clusterNames": ["member3"]}}),
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS},
         "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                  "template": {"metadata": {"labels": {"app": "db"}},
                               "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}}),
    # a FlinkDeployment to one of member1/member2 (the shape of examples/apiserver/40-,50-)
    # deleted by its test once propagated: the member copies must go
    "delete": docs(
        policy("gone", "Deployment", "apps/v1", {"clusterAffinity": {"clusterNames": ["member1", "member3"]}}),
        deployment("gone", 1)),
    "flink": docs(
        policy("wordcount", "FlinkDeployment", "flink.apache.org/v1beta1", {
            "clusterAffinity": {"clusterNames": ["member1", "member2"]},
            "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]}),
        flink_deployment("wordcount")),
}


# ----------------------------------------------------------------------------------------------- the fixture


def unavailable_controllers(log_text: str) -> list[str]:
    """The names in the controller-manager's "not available in this build, not started: a, b" line."""
    marker = "not started: "
    for line in log_text.splitlines():
        if marker in line:
            return [n.strip() for n in line.split(marker, 1)[1].split(",")]
    return []


def allocated_cpu(p: Pipeline, name: str, cpu: str) -> None:
    summary = (p.cp_get("clusters", name, namespace=None).get("status") or {}).get("resourceSummary") or {}
    assert (summary.get("allocated") or {}).get("cpu") == cpu, f"{name}: resourceSummary {summary}"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    with contextlib.ExitStack() as stack:
        p = start_control_plane(stack, tmp_path_factory.mktemp("propagation"), MEMBERS, Pipeline)
        p.start_members("members", "--count", "3")
        p.wait_members_up()
        p.install_flink_crd()
        p.join_members()
        log_text = p.start_controller_manager(
            "--cluster-status-update-frequency", "0.5s", "--cluster-success-threshold", "1s",
            "--cluster-failure-threshold", "1s", "--leader-elect", f"--leader-elect-identity={CM_IDENTITY}",
            "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
            "--leader-elect-retry-period", "500ms", command=controller_manager_argv())
        missing = [c for c in REQUIRED_CONTROLLERS if c in unavailable_controllers(log_text)]
        if missing:
            raise AssertionError(f"controllers not available yet (modules src/flotilla/controllers/*.py missing): "
                                 f"{', '.join(missing)}")

        # Ready with API enablements and untainted, before any binding exists: the scheduler does not look at
        # a binding again when only a cluster's status changes (as in Karmada)
        p.wait_clusters_ready()

        # for the same reason, member1's summary must count its ballast before the dynamic scenario is applied
        p.members["member1"].run("apply", "-f", "-", input=json.dumps(BALLAST))
        p.eventually(lambda: allocated_cpu(p, "member1", "12"), "member1's resourceSummary to count the ballast",
                     "cluster member1", timeout=STARTUP_TIMEOUT)

        for scenario, manifest in SCENARIOS.items():
            p.apply(scenario, manifest)
        yield p


# ----------------------------------------------------------------------------------------------- the tests


def test_clusters_joined_and_ready(pipeline: Pipeline) -> None:
    p = pipeline
    out = p.cp.run("get", "clusters", "-o", "json").stdout
    clusters = {c["metadata"]["name"]: c for c in json.loads(out)["items"]}
    assert sorted(clusters) == list(MEMBERS)
    for name, c in clusters.items():
        assert c["spec"]["syncMode"] == "Push"
        admin = json.loads((p.root / "members" / name / "admin.json").read_text())
        assert c["spec"]["apiEndpoint"] == admin["url"]
        assert condition(c, "Ready")["reason"] == "ClusterReady"
        # the cluster controller made the execution namespace
        p.cp.run("get", "ns", f"karmada-es-{name}")


def test_duplicated_to_two_members(pipeline: Pipeline) -> None:
    p = pipeline
    p.applied("duplicated")

    def placed() -> dict[str, dict[str, Any]]:
        found = p.placement("deployments", "dup")
        assert sorted(found) == ["member1", "member2"], f"dup is in {sorted(found)}"
        for m, obj in found.items():
            assert obj["spec"]["replicas"] == 2, f"{m}: replicas {obj['spec']['replicas']}"
        return found

    found = p.eventually(placed, "deployment dup in member1 and member2 with 2 replicas each",
                         "rb dup-deployment -n default")
    for obj in found.values():  # Karmada's bookkeeping travels with the member object
        labels = obj["metadata"].get("labels") or {}
        assert labels.get("app") == "dup"
        assert "work.karmada.io/namespace" in (obj["metadata"].get("annotations") or {})
    rb = p.cp_get("rb", "dup-deployment")
    assert sorted((c["name"], c.get("replicas")) for c in rb["spec"]["clusters"]) == [("member1", 2), ("member2", 2)]
    assert condition(rb, "Scheduled")["status"] == "True"


def test_static_weights_divide_one_to_two(pipeline: Pipeline) -> None:
    p = pipeline
    p.applied("static")

    def divided() -> None:
        found = p.placement("deployments", "static")
        replicas = {m: obj["spec"]["replicas"] for m, obj in found.items()}
        assert replicas == {"member1": 1, "member2": 2}, f"static replicas by member: {replicas}"

    p.eventually(divided, "deployment static divided 1:2", "rb static-deployment -n default")
    rb = p.cp_get("rb", "static-deployment")
    assert {c["name"]: c["replicas"] for c in rb["spec"]["clusters"]} == {"member1": 1, "member2": 2}


def test_dynamic_weights_follow_available_replicas(pipeline: Pipeline) -> None:
    """Karmada divides by each cluster's available replicas, which its general estimator computes from
    Cluster.status.resourceSummary: floor((allocatable - allocated - allocating) / request) per requested resource.
    Every simulated member serves 3 Ready nodes of 8 CPU (allocatable 24 CPU); member1
    also runs the ballast (3 x 4 CPU, allocated 12 CPU: no Pods in a simulated member, so the cluster status
    controller counts its workloads). At 4 CPU a replica that leaves 3 : 6 : 6 available replicas, and Webster
    divides the 5 replicas in that proportion: 1 : 2 : 2."""
    p = pipeline
    p.applied("dynamic")
    allocatable = {"cpu": str(NODE_CPU * NODES_PER_MEMBER), "ephemeral-storage": "300Gi", "memory": "96Gi",
                   "pods": "330"}
    for m in MEMBERS:
        status = p.cp_get("clusters", m, namespace=None)["status"]
        assert status["nodeSummary"] == {"totalNum": NODES_PER_MEMBER, "readyNum": NODES_PER_MEMBER}, m
        assert status["resourceSummary"]["allocatable"] == allocatable, m
    per_replica = 4
    before = {"member1": 12, "member2": 0, "member3": 0}  # allocated CPU when the binding was scheduled
    available = {m: (NODE_CPU * NODES_PER_MEMBER - used) // per_replica for m, used in before.items()}
    assert available == {"member1": 3, "member2": 6, "member3": 6}
    expected = {"member1": 1, "member2": 2, "member3": 2}  # 5 replicas in proportion 3:6:6

    def divided() -> None:
        found = p.placement("deployments", "dynamic")
        replicas = {m: obj["spec"]["replicas"] for m, obj in found.items()}
        assert replicas == expected, f"dynamic replicas by member: {replicas} (available {available})"

    p.eventually(divided, "deployment dynamic divided 1:2:2 over the members", "rb dynamic-deployment -n default",
                 "clusters")
    rb = p.cp_get("rb", "dynamic-deployment")
    assert {c["name"]: c["replicas"] for c in rb["spec"]["clusters"]} == expected
    assert rb["spec"]["replicaRequirements"]["resourceRequest"] == {"cpu": "4"}
    assert condition(rb, "Scheduled")["status"] == "True"

    # the member copies now count in the members' summaries too: allocated CPU = before + 4 x replicas
    for m, n in expected.items():
        cpu = str(before[m] + per_replica * n)
        p.eventually(lambda m=m, cpu=cpu: allocated_cpu(p, m, cpu), f"{m}: allocated cpu {cpu}", f"cluster {m}")


def test_spread_constraint_picks_exactly_one_member(pipeline: Pipeline) -> None:
    p = pipeline
    p.applied("spread")

    def one() -> str:
        found = p.placement("deployments", "spread")
        assert len(found) == 1, f"spread is in {sorted(found)}"
        (member, obj), = found.items()
        assert obj["spec"]["replicas"] == 2
        return member

    member = p.eventually(one, "deployment spread in exactly one member", "rb spread-deployment -n default")
    rb = p.cp_get("rb", "spread-deployment")
    assert [c["name"] for c in rb["spec"]["clusters"]] == [member]
    time.sleep(1.0)  # and it stays that way (no second copy appears once status flows back)
    assert sorted(p.placement("deployments", "spread")) == [member]


def test_override_policy_changes_image_in_member2_only(pipeline: Pipeline) -> None:
    p = pipeline
    p.applied("override")

    def images() -> dict[str, str]:
        found = p.placement("deployments", "ovr")
        got = {m: obj["spec"]["template"]["spec"]["containers"][0]["image"] for m, obj in found.items()}
        assert got == {"member1": "nginx:1.27", "member2": "nginx:1.27-alpine"}, got
        return got

    p.eventually(images, "ovr with nginx:1.27 in member1 and nginx:1.27-alpine in member2",
                 "rb ovr-deployment -n default", "op ovr -n default")
    # the template itself is untouched
    template = p.cp_get("deployments", "ovr")
    assert template["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"


def test_statefulset_to_one_member(pipeline: Pipeline) -> None:
    p = pipeline
    p.applied("statefulset")

    def running() -> None:
        found = p.placement("statefulsets", "db")
        assert sorted(found) == ["member3"], f"db is in {sorted(found)}"
        status = found["member3"].get("status") or {}
        assert status.get("readyReplicas") == 2, f"member3 db status {status}"

    p.eventually(running, "statefulset db ready in member3", "rb db-statefulset -n default")

    def aggregated() -> None:
        rb = p.cp_get("rb", "db-statefulset")
        items = rb["status"]["aggregatedStatus"]
        assert [(i["clusterName"], i.get("applied"), i.get("health")) for i in items] == \
            [("member3", True, "Healthy")], items
        template = p.cp_get("statefulsets", "db")
        assert (template.get("status") or {}).get("readyReplicas") == 2, template.get("status")

    p.eventually(aggregated, "db status aggregated", "rb db-statefulset -n default", "sts db -n default")


def test_flinkdeployment_runs_in_one_member(pipeline: Pipeline) -> None:
    p = pipeline
    p.applied("flink")

    def running() -> tuple[str, dict[str, Any]]:
        found = p.placement("flinkdeployments", "wordcount")
        assert len(found) == 1 and set(found) <= {"member1", "member2"}, f"wordcount is in {sorted(found)}"
        (member, obj), = found.items()
        state = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
        assert state == "RUNNING", f"{member}: wordcount job state {state}"
        return member, obj

    member, obj = p.eventually(running, "FlinkDeployment wordcount RUNNING in one member",
                               "rb wordcount-flinkdeployment -n default")
    job_id = obj["status"]["jobStatus"]["jobId"]
    assert job_id

    def aggregated() -> None:
        rb = p.cp_get("rb", "wordcount-flinkdeployment")
        items = rb["status"]["aggregatedStatus"]
        assert [(i["clusterName"], i.get("applied"), i.get("health")) for i in items] == \
            [(member, True, "Healthy")], items
        assert condition(rb, "FullyApplied")["status"] == "True"
        assert items[0]["status"]["jobStatus"]["jobId"] == job_id
        template = p.cp_get("flinkdeployments", "wordcount")
        jobstatus = (template.get("status") or {}).get("jobStatus") or {}
        assert jobstatus.get("jobId") == job_id, f"template jobStatus {jobstatus}"
        assert jobstatus.get("state") == "RUNNING"

    p.eventually(aggregated, "wordcount's status (jobId) on the binding and the template",
                 "rb wordcount-flinkdeployment -n default", "flinkdeployment wordcount -n default")
    # kubectl's printer columns on the control plane show the aggregated job state too
    table = p.cp.run("get", "flinkdeployment", "wordcount").stdout
    assert "RUNNING" in table, table


def test_aggregated_status_on_binding_and_template(pipeline: Pipeline) -> None:
    p = pipeline
    p.applied("duplicated")

    def aggregated() -> None:
        out = p.cp.run("get", "rb", "dup-deployment", "-o", "yaml").stdout
        rb = yaml.safe_load(out)
        items = rb["status"]["aggregatedStatus"]
        assert [(i["clusterName"], i.get("applied"), i.get("health")) for i in items] == \
            [("member1", True, "Healthy"), ("member2", True, "Healthy")], items
        for i in items:
            assert i["status"]["readyReplicas"] == 2, i
        fully = condition(rb, "FullyApplied")
        assert (fully["status"], fully.get("reason")) == ("True", "FullyAppliedSuccess"), fully
        template = p.cp_get("deployments", "dup")
        status = template.get("status") or {}
        assert status.get("replicas") == 4 and status.get("readyReplicas") == 4, status
        assert status.get("availableReplicas") == 4 and status.get("updatedReplicas") == 4, status
        assert status.get("observedGeneration") == template["metadata"]["generation"], status

    p.eventually(aggregated, "dup's aggregated status (2 x 2 ready replicas)",
                 "rb dup-deployment -n default", "deploy dup -n default")
    rollout = p.cp.run("rollout", "status", "deployment/dup", "--timeout=10s", check=False)
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr


def test_deleting_the_template_removes_the_member_copies(pipeline: Pipeline) -> None:
    p = pipeline
    p.applied("delete")

    def placed() -> None:
        assert sorted(p.placement("deployments", "gone")) == ["member1", "member3"]

    p.eventually(placed, "deployment gone in member1 and member3", "rb gone-deployment -n default")
    p.cp.run("delete", "deployment", "gone", "-n", NS, "--wait=false")

    def removed() -> None:
        assert p.placement("deployments", "gone") == {}, "member copies of gone are still there"
        r = p.cp.run("get", "rb", "gone-deployment", "-n", NS, check=False)
        assert r.returncode != 0 and "NotFound" in r.stderr, "binding gone-deployment still exists"
        works = p.cp.run("get", "works", "-A", "-o", "name").stdout
        assert "gone" not in works, works

    p.eventually(removed, "the member copies, the binding and the Works of gone to go",
                 "rb gone-deployment -n default")


def test_controller_manager_leads_and_stops_cleanly_on_sigterm(pipeline: Pipeline) -> None:
    """Runs last (it stops the controller-manager): the lease is held while running, released on SIGTERM."""
    p = pipeline
    lease = p.cp_get("lease", "flotilla-controller-manager", namespace="karmada-system")
    assert lease["spec"]["holderIdentity"] == CM_IDENTITY
    cm = p.procs.pop("controller-manager")
    cm.popen.send_signal(signal.SIGTERM)
    assert cm.popen.wait(15) == 0, tail(cm.log)
    log_text = cm.log.read_text()
    assert f"acquired lease karmada-system/flotilla-controller-manager as {CM_IDENTITY}" in log_text
    assert "controllers stopped" in log_text
    lease = p.cp_get("lease", "flotilla-controller-manager", namespace="karmada-system")
    assert lease["spec"]["holderIdentity"] == "", lease["spec"]
