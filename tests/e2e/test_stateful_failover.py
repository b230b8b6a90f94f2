"""Stateful failover end to end: real processes, driven by the real kubectl.

One module-scoped fixture starts ``flotilla apiserver``, ``flotilla member --count 2`` (with the member's
savepoint rule on and 1 s Flink checkpoints), joins both members, applies a ClusterTaintPolicy (Ready in
[False, Unknown] -> cluster.karmada.io/not-ready:NoExecute) and starts ``flotilla controller-manager`` with short
timings. The workloads go to ONE of the two members (spreadConstraints cluster 1/1) with
``failover.cluster.purgeMode: Directly`` and state preservation.

* The proposal's three cases with a hand-made NoExecute taint: a Deployment, a StatefulSet and a FlinkDeployment
  move to the other member, created with the preserved label holding the value the old copy reported; the old
  copy is gone.
* D2 with a network partition (``flotilla sim fault M --mode down``: the member is unreachable but its workloads
  keep running): the CTP taints it not-ready, and nothing starts elsewhere until ``flotilla fence``.
* A real outage (``--mode off``, power off: the API goes AND the member's workloads stop): the CTP taints it,
  Directly waits for ``flotilla fence``, then the FlinkDeployment starts in the other member with the old job id
  as label and the member's savepoint rule resumes it from the newest checkpoint of the old job: no record lost,
  and over the whole test (power back on, unfence, stale copy purged) no two copies ever ran at once.

Every subprocess is killed at the end, even when the set-up fails half way.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.member.checkpoints import CheckpointStore
from flotilla.member.history import Interval, overlaps, read_history
from tests.support.pipeline import (
    NOT_READY,
    NS,
    STARTUP_TIMEOUT,
    Pipeline,
    condition,
    deployment,
    docs,
    flink_deployment,
    not_ready_taint_policy,
    policy,
    start_control_plane,
)

pytestmark = pytest.mark.kubectl

MEMBERS = ("member1", "member2")
JOB_LABEL = "failover.flink.io/job-id"
ALIAS = "test-alias"
# each hand-made taint moves one workload only: the other scenarios tolerate it (and the taint scenarios tolerate
# not-ready, so the outage tests move only their own workloads)
HAND_TAINTED = ("sdep", "ssts", "wc-taint")
OUT_OF_SERVICE = "cluster.flotilla.io/out-of-service"
RULE_ANNOTATION = "savepoint-rule.flotilla.io/restored-from"
ANN_RECORDS = "sim.flotilla.io/records-processed"
ANN_RESTORED_FROM = "sim.flotilla.io/restored-from"
ANN_RESTORED_OFFSET = "sim.flotilla.io/restored-offset"
ANN_LAST_CHECKPOINT = "sim.flotilla.io/last-checkpoint"
TIMEOUT = 25.0
# after a power-off, the powered-on member's workloads run again this long after its API answers (a real cluster's
# API is up before its kubelets and operators); the control plane must purge the stale copy within it
BOOT_DELAY = 12.0  # (the purge is seen about 4-5 s after power-on here: recover, unfence, Ready, purge)


# ----------------------------------------------------------------------------------------------- manifests


def fail_taint(name: str) -> dict[str, str]:
    """The hand-made NoExecute taint that moves the workload ``name`` (and no other)."""
    return {"key": f"fail-{name}", "effect": "NoExecute"}


def tolerations(name: str) -> list[dict[str, str]]:
    keys = [fail_taint(other)["key"] for other in HAND_TAINTED if other != name]
    if name in HAND_TAINTED:
        keys.append(NOT_READY)
    return [{"key": key, "operator": "Exists", "effect": "NoExecute"} for key in keys]


def stateful_policy(name: str, kind: str, api_version: str, rules: list[dict[str, str]]) -> dict[str, Any]:
    return policy(name, kind, api_version, {
        "clusterAffinity": {"clusterNames": list(MEMBERS)},
        "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
        "clusterTolerations": tolerations(name)},
        failover={"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": rules}}})


JOB_RULE = [{"aliasLabelName": JOB_LABEL, "jsonPath": "{ .jobStatus.jobId }"}]

# Karmada's e2e case 3: a never-healthy image, so the eviction task (and hence the injection) persists
DEPLOYMENT = deployment("sdep", 2, image="fake/nginx:1.19.0")

# OrderedReady with a never-ready image: the member creates pod 0 only and waits for it, so the reflected
# status.replicas is 1 (spec.replicas 3): the label value can only come from what the old copy reported
STATEFULSET = {
    "apiVersion": "apps/v1", "kind": "StatefulSet",
    "metadata": {"name": "ssts", "namespace": NS, "labels": {"app": "ssts"}},
    "spec": {"replicas": 3, "serviceName": "ssts", "selector": {"matchLabels": {"app": "ssts"}},
             "template": {"metadata": {"labels": {"app": "ssts"}},
                          "spec": {"containers": [{"name": "db", "image": "fake/postgres:16"}]}}},
}

def without_savepoint_on_move(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (a policy) turning D21 off: a taint on a Ready cluster then moves the job as Karmada does (the
    savepoint rule restores the newest checkpoint), which is what the taint test here is about."""
    obj["metadata"].setdefault("annotations", {})["restore.flotilla.io/savepoint-on-move"] = "false"
    return obj


def _retaining(obj: dict[str, Any], checkpoints: int) -> dict[str, Any]:
    """``obj`` (a FlinkDeployment) keeping its newest ``checkpoints`` completed checkpoints (Flink keeps 1)."""
    obj["spec"].setdefault("flinkConfiguration", {})["state.checkpoints.num-retained"] = str(checkpoints)
    return obj


# A partitioned member's copy keeps running and checkpointing into the shared directory until it is fenced and
# after. With Flink's default of one retained checkpoint it deletes the checkpoint the savepoint rule gave the new
# copy as soon as it completes the next one (each second here), and the new copy's restore fails when the member is
# slow to start it; three retained checkpoints give it three seconds (docs/state-preservation.md, "When the old
# copy may still run").
PARTITIONED_FLINK = _retaining(flink_deployment("wc-outage"), 3)

SCENARIOS = {
    "deployment": docs(stateful_policy("sdep", "Deployment", "apps/v1",
                                       [{"aliasLabelName": ALIAS, "jsonPath": "{.replicas}"}]), DEPLOYMENT),
    "statefulset": docs(stateful_policy("ssts", "StatefulSet", "apps/v1",
                                        [{"aliasLabelName": ALIAS, "jsonPath": "{.replicas}"}]), STATEFULSET),
    "flink-taint": docs(without_savepoint_on_move(stateful_policy("wc-taint", "FlinkDeployment",
                                                                  "flink.apache.org/v1beta1", JOB_RULE)),
                        flink_deployment("wc-taint")),
    "flink-outage": docs(stateful_policy("wc-outage", "FlinkDeployment", "flink.apache.org/v1beta1", JOB_RULE),
                         PARTITIONED_FLINK),
}
# applied by its test (so that the earlier outage test cannot have moved it before)
POWER_OFF = docs(stateful_policy("wc-off", "FlinkDeployment", "flink.apache.org/v1beta1", JOB_RULE), flink_deployment("wc-off"))

TAINT_POLICY = not_ready_taint_policy(MEMBERS)


# ----------------------------------------------------------------------------------------------- helpers


class Env(Pipeline):
    def where(self, resource: str, name: str) -> dict[str, dict[str, Any]]:
        return self.placement(resource, name)

    def fault(self, member: str, mode: str, *extra: str, boot_delay: float | None = None) -> dict[str, Any]:
        return super().fault(member, mode, *extra, *([] if boot_delay is None else ["--boot-delay", str(boot_delay)]))


def running_in_one(p: Env, name: str) -> tuple[str, dict[str, Any]]:
    found = p.where("flinkdeployments", name)
    assert len(found) == 1, f"{name} is in {sorted(found)}"
    (member, obj), = found.items()
    state = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
    assert state == "RUNNING", f"{member}: {name} job state {state}"
    return member, obj


def job_id_on_binding(p: Env, name: str, member: str) -> str:
    """The job id the binding holds for ``member`` (what the taint-manager extracts the state from)."""
    rb = p.cp_get("rb", f"{name}-flinkdeployment")
    items = {i["clusterName"]: i for i in (rb.get("status") or {}).get("aggregatedStatus") or []}
    job_id = items[member]["status"]["jobStatus"]["jobId"]
    assert job_id, f"no jobId for {member} on the binding yet"
    return str(job_id)


def records(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["annotations"][ANN_RECORDS])


def checkpointed(p: Env, name: str, member: str) -> int:
    """The records processed by ``name`` in ``member`` once it completed a checkpoint (there is state to restore)."""
    obj = p.member_get(member, "flinkdeployments", name)
    assert obj is not None, f"{name} not in {member}"
    last = obj["metadata"].get("annotations", {}).get("sim.flotilla.io/last-checkpoint")
    assert last and last != "none", f"{name}: no checkpoint yet ({last})"
    return records(obj)


# ----------------------------------------------------------------------------------------------- the fixture


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with contextlib.ExitStack() as stack:
        p = start_control_plane(stack, tmp_path_factory.mktemp("stateful"), MEMBERS, Env)
        p.start_members("members", "--count", "2", extra=[
            "--sim-option", "savepoint_rule=true", "--sim-option", "flink_checkpoint_interval=1",
            "--sim-option", "flink_progress_interval=0.5"])
        p.wait_members_up()
        p.install_flink_crd()
        p.join_members()
        p.cp.run("apply", "-f", "-", input=json.dumps(TAINT_POLICY))
        p.start_controller_manager(
            "--cluster-status-update-frequency", "0.5s", "--cluster-success-threshold", "1s",
            "--cluster-failure-threshold", "1s", "--graceful-eviction-timeout", "30s")
        p.wait_clusters_ready()

        def untainted() -> None:  # the CTP's not-ready taint of a joining cluster is gone
            for m in MEMBERS:
                assert p.taints(m) == [], f"{m}: taints {p.taints(m)}"

        p.eventually(untainted, "the clusters without taints", *(f"cluster {m}" for m in MEMBERS),
                     timeout=STARTUP_TIMEOUT)
        for scenario, manifest in SCENARIOS.items():
            p.apply(scenario, manifest)
        yield p


# ----------------------------------------------------------------------------------------------- the tests


def test_deployment_moves_with_preserved_replicas_label_on_noexecute_taint(env: Env) -> None:
    """Karmada e2e case 3: Directly + statePreservation {.replicas}; a hand-made NoExecute taint moves it."""
    p = env
    p.applied("deployment")

    def one() -> tuple[str, dict[str, Any]]:
        found = p.where("deployments", "sdep")
        assert len(found) == 1, f"sdep is in {sorted(found)}"
        (member, obj), = found.items()
        rb = p.cp_get("rb", "sdep-deployment")
        items = (rb.get("status") or {}).get("aggregatedStatus") or []
        assert [i["clusterName"] for i in items] == [member], items
        assert items[0]["status"]["replicas"] == 2, items  # the state the rule will extract
        return member, obj

    old, _ = p.eventually(one, "deployment sdep in one member with status collected", "rb sdep-deployment -n default")
    new = p.other(old)
    p.set_taints(old, [fail_taint("sdep")])
    try:
        def moved() -> dict[str, Any]:
            found = p.where("deployments", "sdep")
            assert sorted(found) == [new], f"sdep is in {sorted(found)}"
            labels = found[new]["metadata"].get("labels") or {}
            assert labels.get(ALIAS) == "2", f"{new}: labels {labels}"
            return found[new]

        p.eventually(moved, f"sdep only in {new}, labelled {ALIAS}=2", "rb sdep-deployment -n default")
        rb = p.cp_get("rb", "sdep-deployment")
        assert [c["name"] for c in rb["spec"]["clusters"]] == [new]
        tasks = rb["spec"].get("gracefulEvictionTasks") or []
        assert [(t["fromCluster"], t.get("purgeMode"), t.get("preservedLabelState")) for t in tasks] == \
            [(old, "Directly", {ALIAS: "2"})], tasks
    finally:
        p.set_taints(old, [])


def test_statefulset_moves_with_preserved_label_on_noexecute_taint(env: Env) -> None:
    """The proposal's StatefulSet case: Directly + statePreservation {.replicas}; the old copy reports
    status.replicas 1 (one never-ready pod of 3); a hand-made NoExecute taint moves it, and the new copy carries
    the label with that value."""
    p = env
    p.applied("statefulset")

    def one() -> tuple[str, dict[str, Any]]:
        found = p.where("statefulsets", "ssts")
        assert len(found) == 1, f"ssts is in {sorted(found)}"
        (member, obj), = found.items()
        assert (obj.get("status") or {}).get("replicas") == 1, obj.get("status")
        rb = p.cp_get("rb", "ssts-statefulset")
        items = (rb.get("status") or {}).get("aggregatedStatus") or []
        assert [i["clusterName"] for i in items] == [member], items
        assert items[0]["status"]["replicas"] == 1, items  # what the old copy reported: the rule's input
        return member, obj

    old, _ = p.eventually(one, "statefulset ssts in one member with status collected", "rb ssts-statefulset -n default")
    new = p.other(old)
    p.set_taints(old, [fail_taint("ssts")])
    try:
        def moved() -> dict[str, Any]:
            found = p.where("statefulsets", "ssts")
            assert sorted(found) == [new], f"ssts is in {sorted(found)}"
            labels = found[new]["metadata"].get("labels") or {}
            assert labels.get(ALIAS) == "1", f"{new}: labels {labels}"
            return found[new]

        obj = p.eventually(moved, f"ssts only in {new}, labelled {ALIAS}=1", "rb ssts-statefulset -n default")
        assert obj["spec"]["replicas"] == 3  # the label is the reported status, not the spec
        rb = p.cp_get("rb", "ssts-statefulset")
        assert [c["name"] for c in rb["spec"]["clusters"]] == [new]
        tasks = rb["spec"].get("gracefulEvictionTasks") or []
        assert [(t["fromCluster"], t.get("purgeMode"), t.get("preservedLabelState")) for t in tasks] == \
            [(old, "Directly", {ALIAS: "1"})], tasks
        assert p.member_get(old, "statefulsets", "ssts") is None
    finally:
        p.set_taints(old, [])


def test_flinkdeployment_moves_with_its_job_id_on_noexecute_taint(env: Env) -> None:
    """The proposal's FlinkDeployment case with a hand-made taint: the new copy is created with the old job id as
    label; the member's savepoint rule turns it into initialSavepointPath; the old copy is gone first."""
    p = env
    p.applied("flink-taint")
    old, _ = p.eventually(lambda: running_in_one(p, "wc-taint"), "wc-taint RUNNING in one member",
                          "rb wc-taint-flinkdeployment -n default")
    job_id = p.eventually(lambda: job_id_on_binding(p, "wc-taint", old), "wc-taint's jobId on the binding",
                          "rb wc-taint-flinkdeployment -n default")
    p.eventually(lambda: checkpointed(p, "wc-taint", old), "a completed checkpoint of wc-taint", timeout=15)
    new = p.other(old)
    p.set_taints(old, [fail_taint("wc-taint")])
    try:
        seen_label: list[str] = []

        def moved() -> dict[str, Any]:
            found = p.where("flinkdeployments", "wc-taint")
            if new in found:
                label = (found[new]["metadata"].get("labels") or {}).get(JOB_LABEL)
                if label is not None:
                    seen_label.append(label)
            assert sorted(found) == [new], f"wc-taint is in {sorted(found)}"
            obj = found[new]
            assert seen_label, f"{new}: no {JOB_LABEL} label seen; labels {obj['metadata'].get('labels')}"
            state = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
            assert state == "RUNNING", f"{new}: state {state}"
            return obj

        obj = p.eventually(moved, f"wc-taint RUNNING only in {new}, created with {JOB_LABEL}",
                           "rb wc-taint-flinkdeployment -n default")
        assert set(seen_label) == {job_id}, seen_label
        # the rule set spec.job.initialSavepointPath at CREATE and recorded it in its annotation; the spec field
        # itself does not survive the execution controller's next update (no retention for FlinkDeployment, as
        # in Karmada), so the audit annotation and the job's restored-from are what prove the restore
        path = obj["metadata"]["annotations"].get(RULE_ANNOTATION)
        assert path and job_id in path, f"savepoint rule path {path!r} (job {job_id}): {obj['metadata']}"
        assert obj["metadata"]["annotations"].get(ANN_RESTORED_FROM) == path
        assert p.member_get(old, "flinkdeployments", "wc-taint") is None
    finally:
        p.set_taints(old, [])


def test_d2_directly_on_unreachable_member_waits_until_fenced(env: Env) -> None:
    """An unreachable member (Karmada's Directly waits for its task's timeout; Flotilla's D2, fencing; ``--mode
    down``, a partition: its workloads keep running): the CTP taints it not-ready:NoExecute; with Directly the old
    Work cannot be deleted, so nothing starts elsewhere until ``flotilla fence``; then the new copy starts from a
    checkpoint of the old job id, with no record lost; after recover + unfence the stale copy in the old member is
    deleted."""
    p = env
    p.applied("flink-outage")
    old, _ = p.eventually(lambda: running_in_one(p, "wc-outage"), "wc-outage RUNNING in one member",
                          "rb wc-outage-flinkdeployment -n default")
    job_id = p.eventually(lambda: job_id_on_binding(p, "wc-outage", old), "wc-outage's jobId on the binding",
                          "rb wc-outage-flinkdeployment -n default")
    new = p.other(old)

    p.eventually(lambda: checkpointed(p, "wc-outage", old), "a completed checkpoint of wc-outage", timeout=15)
    history = p.members_dir / "history.jsonl"
    fault_at = time.time()
    p.fault(old, "down")
    fenced = False
    try:
        def tainted() -> None:
            keys = {(t["key"], t["effect"]) for t in p.taints(old)}
            assert (NOT_READY, "NoExecute") in keys, f"{old} taints {keys}"
            rb = p.cp_get("rb", "wc-outage-flinkdeployment")
            assert [c["name"] for c in rb["spec"]["clusters"]] == [new], rb["spec"]["clusters"]
            tasks = rb["spec"].get("gracefulEvictionTasks") or []
            assert [(t["fromCluster"], t.get("purgeMode")) for t in tasks] == [(old, "Directly")], tasks
            assert tasks[0].get("preservedLabelState") == {JOB_LABEL: job_id}, tasks

        p.eventually(tainted, f"{old} tainted not-ready and wc-outage rescheduled to {new} (Directly)",
                     f"cluster {old}", "rb wc-outage-flinkdeployment -n default")
        # the move waits: the old Work cannot be deleted on an unreachable member
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            assert p.member_get(new, "flinkdeployments", "wc-outage") is None, \
                f"wc-outage started in {new} while {old} was unreachable and not fenced"
            time.sleep(0.3)

        fence_at = time.time()
        p.flotilla("fence", old)
        fenced = True

        def restored() -> dict[str, Any]:
            obj = p.member_get(new, "flinkdeployments", "wc-outage")
            assert obj is not None, f"wc-outage not in {new} yet"
            state = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
            assert state == "RUNNING", f"{new}: state {state}"
            assert ANN_RECORDS in obj["metadata"].get("annotations", {}), "no records-processed yet"
            return obj

        obj = p.eventually(restored, f"wc-outage RUNNING in {new} after fencing {old}",
                           f"cluster {old}", "rb wc-outage-flinkdeployment -n default")
        labels = obj["metadata"].get("labels") or {}
        ann = obj["metadata"]["annotations"]
        path = ann.get(RULE_ANNOTATION)
        assert labels.get(JOB_LABEL) == job_id, labels  # injected at creation and kept (D4)
        assert path and job_id in path, (path, ann)
        # (not compared with the newest checkpoint now: with --mode down the partitioned old copy keeps running
        # and checkpointing into the shared directory, see the report on the overlap below)
        assert Path(path).name.startswith("chk-"), path  # (pruned by retention once newer ones exist)
        assert ann.get(ANN_RESTORED_FROM) == path
        meta = json.loads((Path(path) / "_metadata").read_text()) if (Path(path) / "_metadata").is_file() else {}
        restored_offset = int(ann[ANN_RESTORED_OFFSET])
        if "offset" in meta:
            assert restored_offset == int(meta["offset"]), (restored_offset, meta)
        assert records(obj) >= restored_offset
        ivs = [iv for iv in read_history(history) if iv.name == "wc-outage"]
        starts_new = [iv.start for iv in ivs if iv.member == new and iv.start >= fault_at]
        assert starts_new and min(starts_new) >= fence_at, f"{new} ran before the fence: {ivs}"
        # `--mode down` is a partition: the old copy keeps running inside the old member (faults.py), so after a
        # fence the copies do overlap from the fence on (fencing a cluster that is not dead is the operator's
        # error); what the product guarantees is nothing before the fence. A power-off: the last test
        before_fence = [iv for iv in ivs if iv.start < fence_at]
        assert overlaps(before_fence) == [], f"two copies of wc-outage ran at once: {overlaps(before_fence)}"
    finally:
        p.fault(old, "recover")
        if fenced:
            with contextlib.suppress(AssertionError):
                p.flotilla("unfence", old)

    def stale_gone() -> None:
        assert p.member_get(old, "flinkdeployments", "wc-outage") is None, f"stale wc-outage still in {old}"
        assert p.member_get(new, "flinkdeployments", "wc-outage") is not None

    p.eventually(stale_gone, f"the stale copy in {old} to be deleted after recover + unfence",
                 f"cluster {old}", "rb wc-outage-flinkdeployment -n default")

    def ready_again() -> None:  # D17 purges as soon as the member answers, before its success threshold
        assert condition(p.cp_get("clusters", old, namespace=None), "Ready")["status"] == "True"

    p.eventually(ready_again, f"{old} Ready again", f"cluster {old}")


def test_flinkdeployment_moves_with_its_job_id_when_its_member_powers_off(env: Env) -> None:
    """A real outage: the member hosting the job powers off (its API and its workloads stop); the CTP taints it
    not-ready:NoExecute; Directly waits until an operator fences it (D2); the new copy is created in the other
    member with the old job id as label, and the savepoint rule resumes it from the newest checkpoint of the old
    job, with no record lost. Over the whole test, through power-on, unfence and the purge of the stale copy, no
    two copies run at once."""
    p = env
    since = time.time()
    p.apply("flink-poweroff", POWER_OFF)
    p.applied("flink-poweroff")
    old, _ = p.eventually(lambda: running_in_one(p, "wc-off"), "wc-off RUNNING in one member",
                          "rb wc-off-flinkdeployment -n default")
    job_id = p.eventually(lambda: job_id_on_binding(p, "wc-off", old), "wc-off's jobId on the binding",
                          "rb wc-off-flinkdeployment -n default")
    new = p.other(old)
    p.eventually(lambda: checkpointed(p, "wc-off", old), "a completed checkpoint of wc-off", timeout=15)
    last_seen = (p.member_get(old, "flinkdeployments", "wc-off") or {})["metadata"]["annotations"][ANN_LAST_CHECKPOINT]
    store = CheckpointStore(p.members_dir / "checkpoints")
    history = p.members_dir / "history.jsonl"

    def runs() -> list[Interval]:
        """wc-off's running intervals during this test."""
        return [iv for iv in read_history(history)
                if iv.name == "wc-off" and (iv.end is None or iv.end >= since)]

    off_at = time.time()
    state = p.fault(old, "off")
    off_done = time.time()
    assert state["mode"] == "off" and state["workloads"] == "stopped", state
    fenced = False
    try:
        # the old job died with the power: its intervals ended then, and its newest checkpoint is final
        old_runs = [iv for iv in runs() if iv.member == old]
        assert old_runs and all(iv.end is not None and iv.end <= off_done for iv in old_runs), old_runs
        final = store.latest_checkpoint(job_id)
        assert final is not None
        assert final.checkpoint_id >= int(Path(last_seen).name.removeprefix("chk-")), (final, last_seen)

        def tainted() -> None:
            keys = {(t["key"], t["effect"]) for t in p.taints(old)}
            assert (NOT_READY, "NoExecute") in keys, f"{old} taints {keys}"
            rb = p.cp_get("rb", "wc-off-flinkdeployment")
            assert [c["name"] for c in rb["spec"]["clusters"]] == [new], rb["spec"]["clusters"]
            tasks = rb["spec"].get("gracefulEvictionTasks") or []
            assert [(t["fromCluster"], t.get("purgeMode")) for t in tasks] == [(old, "Directly")], tasks
            assert tasks[0].get("preservedLabelState") == {JOB_LABEL: job_id}, tasks

        p.eventually(tainted, f"{old} tainted not-ready and wc-off rescheduled to {new} (Directly)",
                     f"cluster {old}", "rb wc-off-flinkdeployment -n default")
        deadline = time.monotonic() + 3.0  # D2: the old Work cannot be deleted on a dead member: nothing moves
        while time.monotonic() < deadline:
            assert p.member_get(new, "flinkdeployments", "wc-off") is None, \
                f"wc-off started in {new} while {old} was off and not fenced"
            time.sleep(0.3)

        fence_at = time.time()
        p.flotilla("fence", old)  # the operator confirms the cluster is dead
        fenced = True

        def restored() -> dict[str, Any]:
            obj = p.member_get(new, "flinkdeployments", "wc-off")
            assert obj is not None, f"wc-off not in {new} yet"
            state = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
            assert state == "RUNNING", f"{new}: state {state}"
            assert ANN_RECORDS in obj["metadata"].get("annotations", {}), "no records-processed yet"
            return obj

        obj = p.eventually(restored, f"wc-off RUNNING in {new} after fencing {old}",
                           f"cluster {old}", "rb wc-off-flinkdeployment -n default")
        ann = obj["metadata"]["annotations"]
        # the rule saw the job-id label at creation and chose the newest checkpoint of the old job
        assert ann.get(RULE_ANNOTATION) == final.path, (ann, final)
        assert ann.get(ANN_RESTORED_FROM) == final.path
        assert store.latest_checkpoint(job_id) == final  # nobody wrote into the old job's directory since
        assert (obj["metadata"].get("labels") or {}).get(JOB_LABEL) == job_id  # kept (D4)
        restored_offset = int(ann[ANN_RESTORED_OFFSET])
        assert restored_offset == final.offset, (restored_offset, final)  # no record lost
        assert records(obj) >= restored_offset
        new_runs = [iv for iv in runs() if iv.member == new and iv.start >= off_at]
        assert new_runs and min(iv.start for iv in new_runs) >= fence_at, f"{new} ran before the fence: {runs()}"
        assert overlaps(runs()) == [], f"two copies of wc-off ran at once: {overlaps(runs())}"
    finally:
        p.fault(old, "recover", boot_delay=BOOT_DELAY)  # power back on: the API now, the workloads later
        if fenced:
            with contextlib.suppress(AssertionError):
                p.flotilla("unfence", old)

    def purged() -> str:
        stale = p.member_get(old, "flinkdeployments", "wc-off")
        assert stale is None or stale["metadata"].get("deletionTimestamp"), f"stale wc-off in {old} not deleted"
        return str(p.member_state(old)["workloads"])  # read after: "booting" means it was booting before

    workloads = p.eventually(purged, f"the recovery purge of {old} to delete the stale wc-off",
                             f"cluster {old}", "rb wc-off-flinkdeployment -n default", timeout=BOOT_DELAY + TIMEOUT)
    # deleted before the member's operator restarted its job; the operator's finalizer keeps the object until the
    # operator runs again, sees it deleted and releases it without starting anything
    assert workloads == "booting", f"the purge came after {old}'s workloads restarted (boot delay {BOOT_DELAY}s)"

    def stale_gone() -> None:
        assert p.member_get(old, "flinkdeployments", "wc-off") is None, f"stale wc-off still in {old}"
        assert p.member_get(new, "flinkdeployments", "wc-off") is not None

    p.eventually(stale_gone, f"the stale copy in {old} to be gone once its operator runs",
                 f"cluster {old}", "rb wc-off-flinkdeployment -n default", timeout=BOOT_DELAY + TIMEOUT)
    def booted() -> None:
        state = p.member_state(old)
        assert state["workloads"] == "running", state

    p.eventually(booted, f"{old}'s workloads running again", timeout=BOOT_DELAY + TIMEOUT)
    time.sleep(1.0)  # a stale copy the purge missed would restart under HA within the ready delay (0.2 s)
    assert [iv for iv in runs() if iv.member == old and iv.start >= off_at] == [], runs()
    assert overlaps(runs()) == [], f"two copies of wc-off ran at once: {overlaps(runs())}"
    assert condition(p.cp_get("clusters", old, namespace=None), "Ready")["status"] == "True"
