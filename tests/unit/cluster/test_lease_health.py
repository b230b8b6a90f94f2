"""The Pull-cluster health monitor's decision: probe time from the Ready condition and the Lease, Ready Unknown
after the grace period."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flotilla.cluster.lease_health import (
    MESSAGE_CLUSTER_STATUS_NEVER_UPDATED,
    MESSAGE_CLUSTER_STATUS_UNKNOWN,
    REASON_CLUSTER_STATUS_NEVER_UPDATED,
    REASON_CLUSTER_STATUS_UNKNOWN,
    LeaseMemory,
    LeaseVerdict,
    MonitorGrace,
    is_pull_cluster,
    judge_pull_cluster,
    lease_renew_time,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
GRACE = MonitorGrace(grace_period=40.0, startup_grace_period=60.0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def micro(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ready(status: str = "True", reason: str = "ClusterReady", stamp: str = "2026-03-01T11:00:00Z") -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": "m", "lastTransitionTime": stamp}


def cluster(condition: dict[str, Any] | None = None, created: datetime = T0) -> dict[str, Any]:
    c: dict[str, Any] = {"metadata": {"name": "p1", "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
                         "spec": {"syncMode": "Pull"}}
    if condition is not None:
        c["status"] = {"conditions": [condition]}
    return c


def lease(renewed: datetime) -> dict[str, Any]:
    return {"metadata": {"name": "p1", "namespace": "karmada-cluster"},
            "spec": {"holderIdentity": "p1", "leaseDurationSeconds": 40, "renewTime": micro(renewed)}}


def run(steps: list[tuple[float, dict[str, Any], dict[str, Any] | None]],
        grace: MonitorGrace = GRACE) -> list[LeaseVerdict]:
    """Judge at each (seconds, cluster, lease), carrying the memory as the controller does (the written one when
    a condition was written)."""
    memory: LeaseMemory | None = None
    out = []
    for seconds, c, held in steps:
        verdict = judge_pull_cluster(c, held, memory, at(seconds), grace)
        memory = verdict.written()
        out.append(verdict)
    return out


def test_a_renewing_lease_keeps_ready() -> None:
    c = cluster(ready())
    steps = [(float(s), c, lease(at(s))) for s in range(0, 200, 10)]
    assert all(v.ready is None for v in run(steps))


def test_a_stale_lease_turns_ready_unknown_after_the_grace_period() -> None:
    c = cluster(ready())
    old = lease(at(0))
    verdicts = run([(0, c, old), (40, c, old), (40.5, c, old)])
    assert verdicts[0].ready is None
    assert verdicts[1].ready is None  # not yet: now must be past probe + grace
    unknown = verdicts[2].ready
    assert unknown is not None
    assert (unknown["status"], unknown["reason"], unknown["message"]) == (
        "Unknown", REASON_CLUSTER_STATUS_UNKNOWN, MESSAGE_CLUSTER_STATUS_UNKNOWN)
    assert unknown["lastTransitionTime"] == "2026-03-01T12:00:40Z"


def test_the_grace_counts_from_when_the_renewal_was_seen_not_from_the_agents_clock() -> None:
    c = cluster(ready())
    skewed = lease(at(-3600))  # the member's clock is an hour behind: the renewal still counts when seen
    verdicts = run([(0, c, skewed), (30, c, skewed), (41, c, skewed)])
    assert [v.ready is None for v in verdicts] == [True, True, False]


def test_each_renewal_moves_the_deadline() -> None:
    c = cluster(ready())
    verdicts = run([(0, c, lease(at(0))), (30, c, lease(at(30))), (65, c, lease(at(30))), (71, c, lease(at(30)))])
    assert [v.ready is None for v in verdicts] == [True, True, True, False]


def test_a_lease_whose_renew_time_goes_back_is_not_a_renewal() -> None:
    c = cluster(ready())
    verdicts = run([(0, c, lease(at(0))), (20, c, lease(at(-5))), (41, c, lease(at(-5)))])
    assert verdicts[2].ready is not None


def test_a_new_ready_condition_is_a_sign_of_life() -> None:
    old = lease(at(0))
    verdicts = run([(0, cluster(ready()), old), (35, cluster(ready("False", "ClusterNotReachable")), old),
                    (60, cluster(ready("False", "ClusterNotReachable")), old),
                    (76, cluster(ready("False", "ClusterNotReachable")), old)])
    assert [v.ready is None for v in verdicts] == [True, True, True, False]
    assert verdicts[3].ready is not None and verdicts[3].ready["reason"] == REASON_CLUSTER_STATUS_UNKNOWN


def test_never_ready_gets_the_startup_grace_from_creation() -> None:
    c = cluster(None, created=at(0))
    verdicts = run([(10, c, None), (55, c, None), (61, c, None)])
    assert [v.ready is None for v in verdicts] == [True, True, False]
    never = verdicts[2].ready
    assert never is not None
    assert (never["status"], never["reason"], never["message"]) == (
        "Unknown", REASON_CLUSTER_STATUS_NEVER_UPDATED, MESSAGE_CLUSTER_STATUS_NEVER_UPDATED)


def test_never_ready_but_renewing_is_left_alone() -> None:
    c = cluster(None, created=at(0))
    steps = [(float(s), c, lease(at(s))) for s in range(0, 300, 10)]
    assert all(v.ready is None for v in run(steps))


def test_a_lease_renewed_after_unknown_does_not_write_true() -> None:
    c = cluster(ready())
    verdicts = run([(0, c, lease(at(0))), (41, c, lease(at(0)))])
    unknown = verdicts[1].ready
    assert unknown is not None
    now_unknown = cluster(unknown)
    memory = verdicts[1].written()
    for s in (50, 60, 200):
        verdict = judge_pull_cluster(now_unknown, lease(at(s)), memory, at(s), GRACE)
        assert verdict.ready is None  # no True from the monitor, and Unknown is not written again
        memory = verdict.written()


def test_unknown_is_not_written_again_while_the_lease_stays_stale() -> None:
    c = cluster(ready())
    old = lease(at(0))
    verdicts = run([(0, c, old), (41, c, old)])
    unknown = verdicts[1].ready
    assert unknown is not None
    memory = verdicts[1].written()
    again = judge_pull_cluster(cluster(unknown), old, memory, at(500), GRACE)
    assert again.ready is None


def test_a_true_posted_by_the_agent_after_unknown_is_not_overwritten() -> None:
    c = cluster(ready())
    old = lease(at(0))
    verdicts = run([(0, c, old), (41, c, old)])
    memory = verdicts[1].written()
    back = cluster(ready("True", stamp="2026-03-01T12:00:50Z"))  # the agent is back: it posts True, lease unseen
    verdict = judge_pull_cluster(back, old, memory, at(50), GRACE)
    assert verdict.ready is None
    later = judge_pull_cluster(back, old, verdict.memory, at(89), GRACE)
    assert later.ready is None  # the grace runs from when that True was seen
    assert judge_pull_cluster(back, old, later.memory, at(91), GRACE).ready is not None


def test_a_restarted_monitor_gives_a_cluster_with_ready_a_fresh_grace() -> None:
    c = cluster(ready(), created=at(-10_000))
    verdicts = run([(0, c, None), (40, c, None), (41, c, None)])
    assert [v.ready is None for v in verdicts] == [True, True, False]


def test_short_settings_scale_the_same_way() -> None:
    c = cluster(ready())
    short = MonitorGrace(grace_period=1.0, startup_grace_period=2.0)
    old = lease(at(0))
    verdicts = run([(0, c, old), (0.9, c, old), (1.01, c, old)], short)
    assert [v.ready is None for v in verdicts] == [True, True, False]


def test_observed_generation_is_kept_on_unknown() -> None:
    condition = {**ready(), "observedGeneration": 3}
    verdicts = run([(0, cluster(condition), None), (41, cluster(condition), None)])
    assert verdicts[1].ready is not None and verdicts[1].ready["observedGeneration"] == 3


def test_helpers_read_pull_mode_and_renew_time() -> None:
    assert is_pull_cluster({"spec": {"syncMode": "Pull"}})
    assert not is_pull_cluster({"spec": {"syncMode": "Push"}}) and not is_pull_cluster(None)
    assert lease_renew_time(lease(at(1.5))) == at(1.5)
    assert lease_renew_time({"spec": {"renewTime": "yesterday"}}) is None
    assert lease_renew_time({"spec": None}) is None and lease_renew_time(None) is None
