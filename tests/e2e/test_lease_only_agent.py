"""A Push member fenced automatically through its lease-only agent: ``flotilla up --members 3 --guard`` with no
Pull member at all, driven by the real kubectl.

Every member is joined in Push mode (the control plane applies its Works), and each has a ``flotilla agent
--lease-only --guard`` beside it that renews its Lease, keeps its run permit and speaks the peer protocol. A
FlinkDeployment placed on member1 with ``purgeMode: Directly`` is guarded. ``flotilla sim fault member1 --mode
partition`` cuts member1 (its API link, its agent's link to the control plane and its peer endpoint) and nothing
else is typed: the guard stops the job, the control plane marks member1 fence-pending, member2's and member3's
agents acknowledge it, the control plane fences member1 and the job resumes elsewhere with its job id. The members'
running history never has the job in two members at once.
"""

from __future__ import annotations

import json
import time

import pytest

from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.history import overlaps, read_history
from tests.e2e.test_automatic_fencing import (
    FENCE_AFTER,
    FENCE_MARGIN,
    GUARD_FLAGS,
    GUARDED,
    JOB,
    JOB_LABEL,
    NS,
    PERMIT_HOLD,
    condition,
    fenced,
    start,
    stop,
)
from tests.support.pipeline import NOT_READY, flink_deployment, policy

pytestmark = pytest.mark.kubectl

PEER_TTL = 2.0
#: the pending mark at permit-hold, the acknowledgements (about a second), then ttl + fence-after + margin
FENCE_DUE = PERMIT_HOLD + 1.0 + PEER_TTL + FENCE_AFTER + FENCE_MARGIN
SLACK = 20.0  # the failover after the fence, and a loaded machine


@pytest.mark.timeout(240)
def test_d19_a_push_member_cut_off_is_fenced_through_its_lease_only_agent_and_its_job_moves(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("lease-only") / "flotilla"
    try:
        up = start(root, "--members", "3", *GUARD_FLAGS)
        for m in ("member1", "member2", "member3"):
            def announced(m: str = m) -> None:
                c = up.cluster(m)
                annotations = c["metadata"].get("annotations") or {}
                assert c["spec"].get("syncMode", "Push") == "Push", c["spec"]
                assert annotations.get("guard.flotilla.io/fence-after") == f"{FENCE_AFTER:g}s", annotations
                assert annotations.get("guard.flotilla.io/peer-endpoint"), annotations

            up.eventually(announced, f"{m}'s lease-only agent announcing its guard and peers", timeout=60)
        crd = flink_deployment_crd()
        up.cp.run("apply", "-f", "-", input=json.dumps(crd))
        up.cp.run("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=20s")
        tolerate_not_ready = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]
        up.apply(flink_deployment(JOB), policy(
            JOB, "FlinkDeployment", "flink.apache.org/v1beta1",
            {"clusterAffinities": [{"affinityName": "first", "clusterNames": ["member1"]},
                                   {"affinityName": "rest", "clusterNames": ["member2", "member3"]}],
             "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
             "clusterTolerations": tolerate_not_ready},  # only the fence moves it
            failover={"cluster": {"purgeMode": "Directly", "statePreservation": {
                "rules": [{"aliasLabelName": JOB_LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}}))

        def running_on_member1() -> str:
            obj = up.member_get("member1", "flinkdeployments", JOB)
            assert obj is not None and obj["metadata"]["labels"].get(GUARDED) == "true", obj
            job = obj["status"]["jobStatus"]
            assert job["state"] == "RUNNING", job
            return str(job["jobId"])

        job_id = up.eventually(running_on_member1, "the guarded job RUNNING on member1", timeout=60)
        cut = time.monotonic()
        up.fault("member1", "partition")

        def pending_seen() -> None:
            c = up.cluster("member1")
            assert (c["metadata"].get("annotations") or {}).get("guard.flotilla.io/fence-pending") or fenced(c), c

        up.eventually(pending_seen, "member1 fence-pending", timeout=PERMIT_HOLD + SLACK)
        up.eventually(lambda: _true(fenced(up.cluster("member1"))), "member1 fenced automatically",
                      timeout=FENCE_DUE + SLACK)
        fenced_after = time.monotonic() - cut
        assert fenced_after >= PERMIT_HOLD + PEER_TTL + FENCE_AFTER + FENCE_MARGIN - 10.0 - 1.0, fenced_after
        cond = condition(up.cluster("member1"), "Fenced") or {}
        assert cond.get("status") == "True" and cond.get("reason") == "LeaseExpired", cond
        assert "acknowledged by 2 of the 2 other agents" in cond.get("message", ""), cond

        def moved() -> str:
            for m in ("member2", "member3"):
                obj = up.member_get(m, "flinkdeployments", JOB)
                if obj is not None and ((obj.get("status") or {}).get("jobStatus") or {}).get("state") == "RUNNING":
                    assert obj["metadata"]["labels"].get(JOB_LABEL) == job_id, obj["metadata"]["labels"]
                    return m
            raise AssertionError("not running on member2 or member3 yet")

        up.eventually(moved, "the job RUNNING elsewhere with its job id", timeout=SLACK + 20)
        runs = [i for i in read_history(up.history) if i.namespace == NS and i.name == JOB]
        assert {i.member for i in runs} >= {"member1"}, runs
        assert not overlaps(runs), f"two copies ran at once: {runs}"
    finally:
        stop(root)


def _true(value: bool) -> None:
    assert value
