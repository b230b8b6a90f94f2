"""Karmada e2e ``workloadrebalancer_test.go`` (failover scenario 13): real processes, real kubectl.

One module-scoped fixture starts ``flotilla apiserver``, ``flotilla member --count 2``, joins both members and
starts ``flotilla controller-manager`` with short timings (``--graceful-eviction-timeout 5s``). The scenario: a
ClusterPropagationPolicy divides Deployments over both members by dynamic weight (AvailableReplicas) and
tolerates the test taint ``Exists NoExecute`` for 0 s. Tainting member1 moves every replica to member2; once
the taint is gone nothing moves back (Steady mode keeps a Divided result), until a WorkloadRebalancer asks for a
fresh reschedule, which spreads the replicas over both members again. Every subprocess is killed at the end.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.pipeline import (
    NS,
    Pipeline,
    cluster_ready,
    condition,
    deployment,
    docs,
    start_control_plane,
)

pytestmark = pytest.mark.kubectl

MEMBERS = ("member1", "member2")
TAINT = {"key": "workload-rebalancer-test", "effect": "NoExecute"}
DEPLOY = "rebalance"
NEW_DEPLOY = "rebalance-3"  # added to the rebalancer's list later (Karmada's step 4)
MISSING_DEPLOY = "rebalance-2"  # never created: its binding is not found
BINDING = f"{DEPLOY}-deployment"
REBALANCER = "rebalancer-demo"
TIMEOUT = 30.0
QUIET_PERIOD = 3.0


def ref(name: str) -> dict[str, str]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": NS}


CPP = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
    "metadata": {"name": "rebalance"},
    "spec": {
        "resourceSelectors": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": DEPLOY, "namespace": NS},
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": NEW_DEPLOY, "namespace": NS},
        ],
        "placement": {
            "clusterAffinity": {"clusterNames": list(MEMBERS)},
            "clusterTolerations": [{"key": TAINT["key"], "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 0}],
            "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                  "weightPreference": {"dynamicWeight": "AvailableReplicas"}},
        },
    },
}


def rebalancer(name: str, *workloads: str, ttl: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"workloads": [ref(w) for w in workloads]}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer", "metadata": {"name": name},
            "spec": spec}


# ----------------------------------------------------------------------------------------------- helpers


class Env(Pipeline):
    def where(self, name: str) -> list[str]:
        """The members holding Deployment ``name``."""
        return [m for m in MEMBERS if self.member_get(m, "deployments", name) is not None]

    def binding(self, name: str = BINDING) -> dict[str, Any]:
        return self.cp_get("resourcebindings", name)

    def targets(self, name: str = BINDING) -> dict[str, int]:
        return {c["name"]: c.get("replicas", 0) for c in self.binding(name)["spec"].get("clusters") or []}

    def rebalancer(self, name: str = REBALANCER) -> dict[str, Any]:
        return self.cp_get("workloadrebalancers", name, namespace=None)

    def results(self, name: str = REBALANCER) -> list[tuple[str, str, str]]:
        status = self.rebalancer(name).get("status") or {}
        return [(w["workload"]["name"], w.get("result", ""), w.get("reason", ""))
                for w in status.get("observedWorkloads") or []]

    def gone(self, resource: str, name: str) -> bool:
        r = self.cp.run("get", resource, name, check=False)
        if r.returncode == 0:
            return False
        assert "NotFound" in r.stderr or "not found" in r.stderr, r.stderr
        return True


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with contextlib.ExitStack() as stack:
        p = start_control_plane(stack, tmp_path_factory.mktemp("rebalancer"), MEMBERS, Env)
        p.start_members("members", "--count", "2")
        p.wait_members_up()
        p.join_members()
        p.start_controller_manager("--cluster-status-update-frequency", "0.5s", "--cluster-success-threshold", "1s",
                                   "--cluster-failure-threshold", "1s", "--graceful-eviction-timeout", "5s")
        # Ready and untainted before any binding exists: a cluster status change alone never reschedules
        p.wait_clusters_ready()
        p.apply("scenario", docs(CPP, deployment(DEPLOY, 3), deployment(NEW_DEPLOY, 2)))
        yield p


# ----------------------------------------------------------------------------------------------- the tests


def test_workload_rebalancer_is_served_and_validated_for_kubectl(env: Env) -> None:
    p = env
    listed = p.cp.run("api-resources", "--api-group=apps.karmada.io").stdout
    line = next(x for x in listed.splitlines() if x.startswith("workloadrebalancers"))
    assert line.split() == ["workloadrebalancers", "apps.karmada.io/v1alpha1", "false", "WorkloadRebalancer"]
    explained = p.cp.run("explain", "workloadrebalancer.spec").stdout
    assert "workloads" in explained and "ttlSecondsAfterFinished" in explained
    assert "observedWorkloads" in p.cp.run("explain", "workloadrebalancer.status").stdout

    # the CRD's constraints: workloads is required, has at least one entry, each with apiVersion/kind/name
    for bad in ({"workloads": []}, {}, {"workloads": [{"kind": "Deployment", "name": "x"}]},
                {"workloads": [ref("x")], "bogus": 1}, {"workloads": [ref("x")], "ttlSecondsAfterFinished": "5"}):
        body = {**rebalancer("bad"), "spec": bad}
        r = p.cp.run("create", "-f", "-", input=json.dumps(body), check=False)
        assert r.returncode != 0, f"accepted {bad}: {r.stdout}"
        assert "Invalid" in r.stderr or "invalid" in r.stderr or "unknown field" in r.stderr, r.stderr

    out = p.cp.run("create", "-f", "-", input=yaml.safe_dump(rebalancer("served", "nothing-here"))).stdout
    assert "workloadrebalancer.apps.karmada.io/served created" in out
    table = p.cp.run("get", "workloadrebalancers").stdout.splitlines()
    assert table[0].split() == ["NAME", "AGE"] and any(x.split()[0] == "served" for x in table[1:])
    obj = p.rebalancer("served")
    assert obj["kind"] == "WorkloadRebalancer" and "namespace" not in obj["metadata"]
    # the controller answers: that Deployment has no binding
    def answered() -> None:
        assert p.results("served") == [("nothing-here", "Failed", "ReferencedBindingNotFound")], p.results("served")
        assert (p.rebalancer("served").get("status") or {}).get("finishTime")

    p.eventually(answered, "the served rebalancer to report its result", "workloadrebalancer served")
    p.cp.run("delete", "workloadrebalancer", "served")


def test_reschedule_when_policy_is_dynamic_weight_schedule_type(env: Env) -> None:
    p = env
    p.applied("scenario")
    what = f"rb {BINDING} -n {NS}"

    # step 1: the first schedule divides the replicas over both members
    def spread() -> None:
        targets = p.targets()
        assert sorted(targets) == list(MEMBERS) and sum(targets.values()) == 3, targets
        assert p.where(DEPLOY) == list(MEMBERS), p.where(DEPLOY)
        assert condition(p.binding(), "Scheduled")["status"] == "True"

    p.eventually(spread, f"{DEPLOY} divided over both members", what, timeout=TIMEOUT)

    # step 2: a NoExecute taint on member1 (tolerated for 0 s) evicts it; the replicas all go to member2
    p.set_taints("member1", [TAINT])
    try:
        def evicted() -> None:
            assert p.targets() == {"member2": 3}, p.targets()

        p.eventually(evicted, "the binding to shrink to member2", what, "cluster member1", timeout=TIMEOUT)

        def drained() -> None:
            tasks = p.binding()["spec"].get("gracefulEvictionTasks") or []
            assert not tasks, tasks
            assert p.where(DEPLOY) == ["member2"], p.where(DEPLOY)

        p.eventually(drained, "the graceful eviction tasks to drain and member1's copy to go", what,
                     timeout=TIMEOUT)
    finally:
        p.set_taints("member1", [])
    p.eventually(lambda: cluster_ready(p, "member1"), "member1 untainted", "cluster member1")

    # nothing moves back by itself: a Divided result is kept (Steady mode)
    before = p.binding()
    deadline = time.monotonic() + QUIET_PERIOD
    while time.monotonic() < deadline:
        assert p.targets() == {"member2": 3}, f"moved back without a rebalancer: {p.targets()}"
        assert p.where(DEPLOY) == ["member2"]
        time.sleep(0.3)
    last_scheduled = (before.get("status") or {}).get("lastScheduledTime")
    assert last_scheduled and not before["spec"].get("rescheduleTriggeredAt")

    # step 3: a WorkloadRebalancer, created with kubectl, asks for a fresh schedule
    p.cp.run("create", "-f", "-", input=yaml.safe_dump(rebalancer(REBALANCER, DEPLOY, MISSING_DEPLOY)))
    created = p.rebalancer()["metadata"]["creationTimestamp"]

    def rebalanced() -> dict[str, Any]:
        targets = p.targets()
        assert sorted(targets) == list(MEMBERS) and sum(targets.values()) == 3, targets
        assert p.where(DEPLOY) == list(MEMBERS), p.where(DEPLOY)
        rb = p.binding()
        assert rb["spec"].get("rescheduleTriggeredAt") == created, rb["spec"].get("rescheduleTriggeredAt")
        assert rb["status"]["lastScheduledTime"] >= created, rb["status"]
        return rb

    p.eventually(rebalanced, f"{DEPLOY} back in both members", what, f"workloadrebalancer {REBALANCER}",
                 timeout=TIMEOUT)

    def reported() -> None:
        assert p.results() == [(DEPLOY, "Successful", ""),
                               (MISSING_DEPLOY, "Failed", "ReferencedBindingNotFound")], p.results()
        status = p.rebalancer()["status"]
        assert status.get("finishTime") and status.get("observedGeneration") == 1, status

    p.eventually(reported, "the rebalancer to report its results", f"workloadrebalancer {REBALANCER}")

    # step 4: the list changes; the Successful entry that left the spec stays, the Failed one goes
    p.cp.run("patch", "workloadrebalancer", REBALANCER, "--type", "merge", "-p",
             json.dumps({"spec": {"workloads": [ref(NEW_DEPLOY)]}}))

    def updated() -> None:
        assert p.results() == [(DEPLOY, "Successful", ""), (NEW_DEPLOY, "Successful", "")], p.results()
        assert p.rebalancer()["status"].get("observedGeneration") == 2
        assert p.binding(f"{NEW_DEPLOY}-deployment")["spec"].get("rescheduleTriggeredAt") == created

    p.eventually(updated, "the rebalancer to handle its new workload list", f"workloadrebalancer {REBALANCER}")

    # step 5: with a TTL the finished rebalancer cleans itself up
    p.cp.run("patch", "workloadrebalancer", REBALANCER, "--type", "merge", "-p",
             json.dumps({"spec": {"ttlSecondsAfterFinished": 1}}))
    def deleted() -> None:
        assert p.gone("workloadrebalancer", REBALANCER), f"{REBALANCER} still exists"

    p.eventually(deleted, "the rebalancer to be deleted after its TTL", f"workloadrebalancer {REBALANCER}",
                 timeout=15)
