"""The automatic fence's decision (flotilla.failover.auto_fence): when a guarded Pull cluster is fenced, when it is
not yet, when never, and the majority rule."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from flotilla.cluster.lease_health import LeaseMemory, MonitorGrace, judge_pull_cluster
from flotilla.failover.auto_fence import (
    ANNOTATION_FENCE_AFTER,
    ANNOTATION_PERMIT_HOLD,
    CONDITION_FENCED,
    EVENT_CLUSTER_FENCED_AUTOMATICALLY,
    REASON_LEASE_EXPIRED,
    AutoFenceAction,
    ClusterLiveness,
    announced_guard,
    cluster_liveness,
    decide_auto_fence,
    fence_reason,
    fleet_window,
    keeps_lease,
    majority_live,
    parse_go_duration,
    silent_clusters,
)
from flotilla.failover.events import FAILOVER_EVENT_REASONS
from flotilla.failover.peer_quorum import (
    ANNOTATION_FENCE_PENDING,
    ANNOTATION_PEER_ENDPOINT,
    ANNOTATION_PEER_REPORT_TTL,
    fence_pending_token,
)

A = AutoFenceAction
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
MARGIN = 15.0
GRACE = 40.0
BOUND = 15.0 + 15.0 + MARGIN  # the announced hold and fence-after below, plus the margin


def pull(name: str = "p1", hold: str | None = "15s", fence_after: str | None = "15s",
         taints: list[dict[str, Any]] | None = None, **meta: Any) -> dict[str, Any]:
    annotations = {}
    if hold is not None:
        annotations[ANNOTATION_PERMIT_HOLD] = hold
    if fence_after is not None:
        annotations[ANNOTATION_FENCE_AFTER] = fence_after
    return {"metadata": {"name": name, "annotations": annotations, **meta},
            "spec": {"syncMode": "Pull", "taints": taints or []}}


def memory(renewed_at: float | None) -> LeaseMemory:
    return LeaseMemory(probe=T0, renewed_at=renewed_at, renew_seen="x")


def live(n: int) -> list[ClusterLiveness]:
    """``n`` live Push clusters."""
    return [ClusterLiveness(f"push{i}", False, ready=True) for i in range(n)]


def decide(cluster: dict[str, Any], renewed_at: float | None, now: float,
           clusters: list[ClusterLiveness] | None = None, margin: float = MARGIN) -> Any:
    return decide_auto_fence(cluster, memory(renewed_at), now, margin, live(2) if clusters is None else clusters,
                             GRACE)


def test_no_guard_is_never_fenced() -> None:
    d = decide(pull(hold=None, fence_after=None), 0.0, 10 * BOUND)
    assert d.action is A.NEVER and "no guard announced" in d.reason and not d.invalid


def test_a_push_cluster_without_a_lease_only_agent_is_never_fenced_automatically() -> None:
    c = pull(hold=None, fence_after=None)
    c["spec"]["syncMode"] = "Push"
    d = decide(c, 0.0, 10 * BOUND)
    assert d.action is A.NEVER and "fenced only by hand" in d.reason
    assert not keeps_lease(c)


def test_a_push_cluster_whose_lease_only_agent_announces_a_guard_is_fenced_like_a_pull_one() -> None:
    c = pull()
    c["spec"]["syncMode"] = "Push"
    assert keeps_lease(c)
    assert decide(c, 100.0, 100.0 + BOUND - 1.0).action is A.NOT_YET
    assert decide(c, 100.0, 100.0 + BOUND + 1.0).action is A.FENCE
    broken = pull(fence_after="soon")
    broken["spec"]["syncMode"] = "Push"
    d = decide(broken, 0.0, 10 * BOUND)
    assert d.action is A.NEVER and d.invalid  # reported, as for a Pull cluster


def test_a_guarded_cluster_stale_for_less_than_the_bound_is_not_fenced_yet() -> None:
    d = decide(pull(), 100.0, 100.0 + BOUND - 1.0)
    assert d.action is A.NOT_YET
    assert d.recheck_after == pytest.approx(1.0)


def test_past_the_bound_with_a_majority_the_cluster_is_fenced() -> None:
    d = decide(pull(), 100.0, 100.0 + BOUND + 1.0)
    assert d.action is A.FENCE
    assert d.condition is not None and d.condition["type"] == CONDITION_FENCED
    assert d.condition["status"] == "True" and d.condition["reason"] == REASON_LEASE_EXPIRED
    assert "46s" in d.condition["message"] and "= 45s" in d.condition["message"]
    assert d.event is not None and d.event.type == "Warning" and d.event.reason == EVENT_CLUSTER_FENCED_AUTOMATICALLY
    assert "2 of 3 clusters live" in d.event.message


def test_past_the_bound_with_only_a_minority_live_is_held_and_says_so() -> None:
    others = [ClusterLiveness("push0", False, ready=True), ClusterLiveness("p2", True, renewed_at=100.0)]
    d = decide(pull(), 100.0, 100.0 + BOUND + 1.0, others)
    assert d.action is A.HELD
    assert "only 1 of 3 clusters live" in d.reason and "strict majority" in d.reason


def test_half_is_not_a_strict_majority() -> None:
    others = [ClusterLiveness("push0", False, ready=True), ClusterLiveness("push1", False, ready=False),
              ClusterLiveness("push2", False, ready=True)]
    assert decide(pull(), 0.0, BOUND + 1.0, others).action is A.HELD  # 2 of 4
    extra = ClusterLiveness("push3", False, ready=True)
    assert decide(pull(), 0.0, BOUND + 1.0, [*others, extra]).action is A.FENCE  # 3 of 5


def test_the_candidate_never_counts_as_live_for_its_own_majority() -> None:
    me = ClusterLiveness("p1", True, renewed_at=BOUND)  # a stale entry for the candidate itself, in the window
    d = decide(pull(), 0.0, BOUND + 1.0, [me, *live(1)])
    assert d.action is A.HELD and "1 of 2" in d.reason


def test_a_pull_cluster_silent_as_long_as_the_candidate_is_not_live_whatever_the_grace() -> None:
    # the control plane cut off from every member: all Leases stop at once; a long grace must not make them live
    others = [ClusterLiveness("p2", True, renewed_at=0.0), ClusterLiveness("p3", True, renewed_at=0.0)]
    d = decide_auto_fence(pull(), memory(0.0), BOUND + 1.0, MARGIN, others, grace_period=10 * BOUND)
    assert d.action is A.HELD
    others_renewing = [ClusterLiveness("p2", True, renewed_at=BOUND), ClusterLiveness("p3", True, renewed_at=BOUND)]
    assert decide(pull(), 0.0, BOUND + 1.0, others_renewing).action is A.FENCE


def test_a_control_plane_cut_off_from_staggered_leases_fences_nobody() -> None:
    # cut off at X = 9: the candidate last renewed at 0, the others at 5 and 9 (renewed every 10 s, within the
    # candidate's 15 s permit-hold); when the candidate's bound runs out they are within the window, but none
    # renewed after 0 + permit-hold, so none counts as live
    others = [ClusterLiveness("p2", True, renewed_at=5.0), ClusterLiveness("p3", True, renewed_at=9.0)]
    d = decide(pull(), 0.0, BOUND + 1.0, others)
    assert d.action is A.HELD and "only 0 of 3 clusters live" in d.reason, d.reason
    # only the candidate cut off: the others' renewals go on past 0 + permit-hold
    going_on = [ClusterLiveness("p2", True, renewed_at=15.5), ClusterLiveness("p3", True, renewed_at=19.0)]
    assert decide(pull(), 0.0, BOUND + 1.0, going_on).action is A.FENCE
    one_after = [ClusterLiveness("p2", True, renewed_at=14.0), ClusterLiveness("p3", True, renewed_at=16.0)]
    d = decide(pull(), 0.0, BOUND + 1.0, one_after)
    assert d.action is A.HELD and "only 1 of 3" in d.reason  # p2's last renewal came before 0 + 15 s


def test_an_already_fenced_cluster_gets_nothing() -> None:
    fenced = pull(taints=[{"key": "cluster.flotilla.io/out-of-service", "effect": "NoExecute"}])
    assert decide(fenced, 0.0, 10 * BOUND).action is A.NOTHING


@pytest.mark.parametrize(("hold", "fence_after", "says"), [
    ("15s", None, "fence-after is missing"),
    (None, "15s", "permit-hold is missing"),
    ("fifteen", "15s", "permit-hold"),
    ("15", "15s", "not a Go duration"),
    ("15s", "0s", "must be greater than 0"),
    ("-5s", "15s", "must be greater than 0"),
    ("", "15s", "permit-hold"),
])
def test_a_malformed_announcement_is_never_fenced_with_a_reason(hold: str | None, fence_after: str | None,
                                                                 says: str) -> None:
    d = decide(pull(hold=hold, fence_after=fence_after), 0.0, 10 * BOUND)
    assert d.action is A.NEVER and d.invalid
    assert "malformed guard announcement" in d.reason and says in d.reason


def test_a_non_string_annotation_value_is_malformed_not_a_crash() -> None:
    c = pull()
    c["metadata"]["annotations"][ANNOTATION_PERMIT_HOLD] = 15
    assert decide(c, 0.0, 10 * BOUND).invalid


def test_the_bound_is_the_announced_hold_plus_fence_after_plus_the_margin() -> None:
    c = pull(hold="2s", fence_after="1m30s")
    bound = 2.0 + 90.0 + 5.0
    assert decide(c, 0.0, bound - 0.01, margin=5.0).action is A.NOT_YET
    assert decide(c, 0.0, bound, margin=5.0).action is A.FENCE
    assert decide(c, 0.0, bound + 0.01, margin=5.0).action is A.FENCE


def test_no_lease_change_seen_yet_is_not_yet() -> None:
    d = decide_auto_fence(pull(), None, 1000.0, MARGIN, live(2), GRACE)
    assert d.action is A.NOT_YET and "no change of its Lease" in d.reason


def test_a_cluster_being_deleted_is_never_fenced() -> None:
    assert decide(pull(deletionTimestamp="2026-03-01T12:00:00Z"), 0.0, 10 * BOUND).action is A.NEVER


def test_the_fence_event_is_never_dropped() -> None:
    assert EVENT_CLUSTER_FENCED_AUTOMATICALLY in FAILOVER_EVENT_REASONS


def test_liveness_of_push_and_pull_clusters() -> None:
    push = {"metadata": {"name": "a"}, "spec": {"syncMode": "Push"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert cluster_liveness(push, None).live(0.0, 1.0)
    push["status"]["conditions"][0]["status"] = "Unknown"
    assert not cluster_liveness(push, None).live(0.0, 1.0)
    assert cluster_liveness(pull(), memory(5.0)).live(5.5, 1.0)
    assert not cluster_liveness(pull(), memory(5.0)).live(6.0, 1.0)
    assert not cluster_liveness(pull(), None).live(0.0, 1.0)


def test_guard_and_durations_parse_go_spelling() -> None:
    assert parse_go_duration("1m30s") == 90.0 and parse_go_duration("500ms") == 0.5 and parse_go_duration("0") == 0
    guard, _ = announced_guard(pull(hold="1.5s", fence_after="2m"))
    assert guard is not None and guard.permit_hold == 1.5 and guard.fence_after == 120.0


def test_fence_reason_for_get_clusters() -> None:
    taint = [{"key": "cluster.flotilla.io/out-of-service", "effect": "NoExecute"}]
    assert fence_reason(pull()) is None
    assert fence_reason(pull(taints=taint)) == "Manual"
    auto = pull(taints=taint)
    auto["status"] = {"conditions": [{"type": "Fenced", "status": "True", "reason": "LeaseExpired"}]}
    assert fence_reason(auto) == "LeaseExpired"


# ---------------------------------------------------------------------------------- the Lease memory it reads


def _lease(renew: str) -> dict[str, Any]:
    return {"spec": {"renewTime": renew}}


def test_the_lease_memory_records_when_the_monitor_saw_each_change_on_its_monotonic_clock() -> None:
    c = pull()
    grace = MonitorGrace()
    m = judge_pull_cluster(c, _lease("2026-03-01T12:00:00.000000Z"), None, T0, grace, monotonic=7.0).memory
    assert m.renewed_at == 7.0  # the first Lease seen counts
    m = judge_pull_cluster(c, _lease("2026-03-01T12:00:00.000000Z"), m, T0, grace, monotonic=9.0).memory
    assert m.renewed_at == 7.0  # unchanged: no renewal
    m = judge_pull_cluster(c, _lease("2026-03-01T12:00:10.000000Z"), m, T0, grace, monotonic=11.0).memory
    assert m.renewed_at == 11.0


def test_a_renew_time_that_goes_back_still_counts_for_the_fence() -> None:
    # the agent's clock stepped back: it is renewing, and the fence must not think otherwise
    c = pull()
    grace = MonitorGrace()
    m = judge_pull_cluster(c, _lease("2026-03-01T12:00:10.000000Z"), None, T0, grace, monotonic=1.0).memory
    m = judge_pull_cluster(c, _lease("2026-03-01T11:00:00.000000Z"), m, T0, grace, monotonic=2.0).memory
    assert m.renewed_at == 2.0


# ---------------------------------------------------------------------------------- the pending step (peers)

TTL = 2.0


def peer(name: str = "p1", token: str | None = None, **kw: Any) -> dict[str, Any]:
    c = pull(name, uid="u1", **kw)
    c["metadata"]["annotations"].update({ANNOTATION_PEER_ENDPOINT: "127.0.0.1:7480",
                                         ANNOTATION_PEER_REPORT_TTL: f"{TTL:g}s"})
    if token is not None:
        c["metadata"]["annotations"][ANNOTATION_FENCE_PENDING] = token
    return c


def decide_peer(cluster: dict[str, Any], now: float, acks: dict[str, tuple[str, float]] | None = None,
                voters: int = 2, clusters: list[ClusterLiveness] | None = None) -> Any:
    return decide_auto_fence(cluster, memory(100.0), now, MARGIN, live(2) if clusters is None else clusters,
                             GRACE, acks or {}, voters)


TOKEN = fence_pending_token("x", "u1")  # memory(): renew_seen "x"; peer(): uid "u1"


def test_a_peer_cluster_is_marked_pending_after_its_permit_hold_not_fenced() -> None:
    assert decide_peer(peer(), 100.0 + 15.0 - 0.1).action is A.NOT_YET
    d = decide_peer(peer(), 100.0 + 15.0)
    assert d.action is A.PEND and d.token == TOKEN
    assert d.condition is not None and d.condition["status"] == "False" and d.condition["reason"] == "FencePending"
    assert d.event is not None and d.event.reason == "ClusterFencePending"
    assert "waiting for 2 of the 2 other agents" in d.condition["message"]


def test_a_pending_mark_needs_only_a_majority_within_the_window() -> None:
    # another Pull cluster last seen before the candidate's hold ran out still counts for the mark
    others = [ClusterLiveness("p2", True, renewed_at=101.0), ClusterLiveness("p3", True, renewed_at=109.0)]
    assert decide_peer(peer(), 116.0, clusters=others).action is A.PEND
    # ... but the fence itself wants renewals seen after the candidate's last one plus its hold
    acks = {"p2": (TOKEN, 117.0), "p3": (TOKEN, 117.0)}
    assert decide_peer(peer(token=TOKEN), 117.0 + TTL + 30.0 + 1, acks, clusters=others).action is A.HELD


def test_a_pending_fence_waits_for_the_acknowledgements_then_ttl_fence_after_and_margin() -> None:
    c = peer(token=TOKEN)
    d = decide_peer(c, 200.0, {"p2": (TOKEN, 120.0)})
    assert d.action is A.NOT_YET and "1 of the 2 acknowledgements" in d.reason
    acks = {"p2": (TOKEN, 120.0), "p3": (TOKEN, 130.0)}
    due = 130.0 + TTL + 15.0 + MARGIN
    assert decide_peer(c, due - 0.1, acks).action is A.NOT_YET
    assert decide_peer(c, due - 0.1, acks).recheck_after == pytest.approx(0.1)
    d = decide_peer(c, due, acks)
    assert d.action is A.FENCE and "acknowledged by 2 of the 2 other agents (needed 2)" in d.reason


def test_the_fence_also_waits_for_the_bound() -> None:
    c = peer(token=TOKEN)
    acks = {"p2": (TOKEN, 101.0), "p3": (TOKEN, 101.0)}  # acknowledged early: the bound still rules
    assert decide_peer(c, 100.0 + BOUND - 0.5, acks).action is A.NOT_YET
    assert decide_peer(c, 100.0 + BOUND + 0.1, acks).action is A.FENCE


def test_acknowledgements_of_another_token_do_not_count() -> None:
    acks = {"p2": (TOKEN, 120.0), "p3": ("u1/older", 120.0)}
    assert decide_peer(peer(token=TOKEN), 500.0, acks).action is A.NOT_YET


def test_five_clusters_need_three_of_four_acknowledgements() -> None:
    c = peer(token=TOKEN)
    four = live(4)
    acks = {"p2": (TOKEN, 120.0), "p3": (TOKEN, 120.0)}
    assert decide_peer(c, 500.0, acks, voters=4, clusters=four).action is A.NOT_YET
    acks["p4"] = (TOKEN, 121.0)
    assert decide_peer(c, 500.0, acks, voters=4, clusters=four).action is A.FENCE


def test_a_renewal_after_the_mark_cancels_it() -> None:
    d = decide_peer(peer(token=fence_pending_token("an-older-renewal", "u1")), 500.0)
    assert d.action is A.CANCEL and "renewed after the fence was marked pending" in d.reason
    assert d.condition is not None and d.condition["reason"] == "FenceCancelled"
    assert d.event is not None and d.event.reason == "ClusterFenceCancelled" and d.event.type == "Normal"


def test_a_mark_on_a_cluster_that_no_longer_speaks_the_peer_protocol_is_cancelled() -> None:
    c = pull(uid="u1")
    c["metadata"]["annotations"][ANNOTATION_FENCE_PENDING] = TOKEN
    assert decide_peer(c, 500.0).action is A.CANCEL


def test_fence_reason_says_pending() -> None:
    assert fence_reason(peer(token=TOKEN)) == "Pending"
    assert fence_reason(peer()) is None


def test_the_pending_events_are_failover_events() -> None:
    assert {"ClusterFencePending", "ClusterFenceCancelled"} <= FAILOVER_EVENT_REASONS


# ---------------------------------------------------------------------------------- after the control plane's cut-off


def test_majority_live_counts_every_cluster() -> None:
    pulls = [ClusterLiveness(f"p{i}", True, renewed_at=at) for i, at in enumerate((99.0, 99.0, 50.0))]
    assert majority_live(pulls, 100.0, 10.0)  # 2 of 3
    assert not majority_live(pulls[1:], 100.0, 10.0)  # 1 of 2
    assert not majority_live([ClusterLiveness(f"p{i}", True, renewed_at=50.0) for i in range(3)], 100.0, 10.0)


def test_silent_clusters_are_those_seen_once_and_quiet_for_the_window() -> None:
    renewed = {"a": 99.0, "b": 80.0, "c": None, "d": 90.0}
    assert silent_clusters(renewed, 100.0, 10.0) == ["b", "d"]


def test_the_fleet_window_is_the_grace_capped_by_the_smallest_announced_bound() -> None:
    assert fleet_window([pull(), pull("p2", hold="4s", fence_after="2s")], 40.0, 1.0) == 7.0
    assert fleet_window([pull(hold=None, fence_after=None)], 40.0, 15.0) == 40.0
