"""The peer protocol's pure decisions: reports, the quorum, acknowledgements and how many are needed."""

from __future__ import annotations

import itertools
import json

import pytest

from flotilla.failover.peer_quorum import (
    ANNOTATION_ACKNOWLEDGED_FENCES,
    ANNOTATION_FENCE_PENDING,
    ANNOTATION_PEER_ENDPOINT,
    ANNOTATION_PEER_REPORT_TTL,
    PeerReport,
    acknowledged_fences,
    acknowledgement_text,
    acknowledgements_needed,
    known_fences,
    observe_acknowledgements,
    parse_report,
    peer_announcement_patch,
    peer_endpoint,
    peer_quorum,
    peer_report_ttl,
)
from flotilla.failover.run_permit import PermitStep, permit_decision


def report(name: str, reachable: bool = False, *, synced: bool = True, clusters: int = 3,
           fences: tuple[str, ...] = ()) -> PeerReport:
    return PeerReport(name, reachable, synced, clusters, frozenset(fences))


def test_a_report_round_trips_through_its_json() -> None:
    r = report("m2", fences=("m1",))
    assert parse_report(json.loads(json.dumps(r.to_json()))) == r


@pytest.mark.parametrize("body, field", [
    ({"kind": "Other"}, "PeerReport"),
    ({"kind": "PeerReport", "cluster": "", "controlPlane": "Reachable", "synced": True, "clusters": 1,
      "fences": []}, "cluster"),
    ({"kind": "PeerReport", "cluster": "a", "controlPlane": "maybe", "synced": True, "clusters": 1,
      "fences": []}, "controlPlane"),
    ({"kind": "PeerReport", "cluster": "a", "controlPlane": "Reachable", "synced": "yes", "clusters": 1,
      "fences": []}, "synced"),
    ({"kind": "PeerReport", "cluster": "a", "controlPlane": "Reachable", "synced": True, "clusters": True,
      "fences": []}, "clusters"),
    ({"kind": "PeerReport", "cluster": "a", "controlPlane": "Reachable", "synced": True, "clusters": 1,
      "fences": [1]}, "fences"),
    ([], "PeerReport"),
])
def test_a_malformed_report_is_refused_naming_the_field(body: object, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        parse_report(body)


def test_d19_quorum_is_a_strict_majority_of_fresh_synced_unreachable_reports() -> None:
    fresh = {"m2": (report("m2"), 9.5), "m3": (report("m3", reachable=True), 9.5)}
    q = peer_quorum(me="m1", fleet=3, fenced=False, reports=fresh, now=10.0, ttl=2.0)
    assert q.held and q.votes == 2 and q.total == 3
    assert q.until == pytest.approx(11.5)  # m2's report, asked at 9.5, lasts the ttl
    # the same report asked too long ago: no vote
    stale = {"m2": (report("m2"), 7.9)}
    assert not peer_quorum(me="m1", fleet=3, fenced=False, reports=stale, now=10.0, ttl=2.0).held
    # a peer that reaches the control plane, or is not synced, or answers under another name: no vote
    for r in (report("m2", True), report("m2", synced=False), report("m9")):
        assert not peer_quorum(me="m1", fleet=3, fenced=False, reports={"m2": (r, 9.9)}, now=10.0, ttl=2.0).held


def test_a_peer_that_knows_this_cluster_fenced_gives_it_no_vote() -> None:
    reports = {"m2": (report("m2", fences=("m1",)), 9.9), "m3": (report("m3", fences=("m1",)), 9.9)}
    q = peer_quorum(me="m1", fleet=3, fenced=False, reports=reports, now=10.0, ttl=2.0)
    assert not q.held and q.votes == 1


def test_a_cluster_that_knows_itself_fenced_does_not_vote_for_itself() -> None:
    reports = {"m2": (report("m2"), 9.9)}
    assert not peer_quorum(me="m1", fleet=3, fenced=True, reports=reports, now=10.0, ttl=2.0).held
    reports["m3"] = (report("m3"), 9.9)
    q = peer_quorum(me="m1", fleet=3, fenced=True, reports=reports, now=10.0, ttl=2.0)
    assert q.held and q.votes == 2


def test_the_total_is_the_largest_fleet_anyone_knows() -> None:
    reports = {"m2": (report("m2", clusters=5), 9.9)}
    q = peer_quorum(me="m1", fleet=3, fenced=False, reports=reports, now=10.0, ttl=2.0)
    assert not q.held and q.total == 5  # 2 of 5: a cluster joined that this agent has not seen yet


def test_no_quorum_without_a_complete_list_of_the_clusters() -> None:
    q = peer_quorum(me="m1", fleet=None, fenced=False, reports={"m2": (report("m2"), 9.9)}, now=10.0, ttl=2.0)
    assert not q.held and "no complete list" in q.reason


def test_the_quorum_lasts_until_the_reports_it_needs_expire() -> None:
    reports = {"m2": (report("m2", clusters=5), 9.0), "m3": (report("m3", clusters=5), 9.6),
               "m4": (report("m4", clusters=5), 8.5)}
    q = peer_quorum(me="m1", fleet=5, fenced=False, reports=reports, now=10.0, ttl=2.0)
    # 4 of 5 vote; a majority of 5 is 3: this cluster and the two freshest reports (9.6 and 9.0)
    assert q.held and q.until == pytest.approx(11.0)


@pytest.mark.parametrize("total", range(1, 10))
def test_d19_acknowledgements_needed_meet_every_majority_that_includes_the_candidate(total: int) -> None:
    for voters in range(total):  # voters: the other clusters whose agents answer peers
        needed = acknowledgements_needed(voters, total)
        if needed > voters:  # more than there are: never fenced, which is right only if the candidate alone
            assert 2 * 1 > total  # is a majority (a fleet of one)
            continue
        assert needed >= 0
        names = list(range(voters))
        # every choice of `needed` acknowledging agents meets every majority of voters + the candidate...
        for acked in itertools.combinations(names, needed):
            for size in range(voters + 1):
                if 2 * (size + 1) <= total:
                    continue  # not a majority with the candidate
                for majority in itertools.combinations(names, size):
                    assert set(acked) & set(majority), (total, voters, acked, majority)
        # ...and one fewer does not, for some choice (so the count is the least that is safe)
        if needed > 0:
            acked = names[:needed - 1]
            rest = [n for n in names if n not in acked]
            size = total // 2  # the smallest majority: the candidate and total // 2 voters
            assert len(rest) >= size
            assert not set(acked) & set(rest[:size])


def test_known_fences_are_pending_marks_and_taints() -> None:
    clusters = [
        {"metadata": {"name": "a", "annotations": {ANNOTATION_FENCE_PENDING: "uid/t1"}}},
        {"metadata": {"name": "b"}, "spec": {"taints": [{"key": "cluster.flotilla.io/out-of-service",
                                                         "effect": "NoExecute"}]}},
        {"metadata": {"name": "c"}},
    ]
    fences = known_fences(clusters)
    assert fences == {"a": "uid/t1", "b": "taint"}
    text = acknowledgement_text(fences)
    assert json.loads(text) == {"a": "uid/t1"}  # a taint needs no acknowledgement
    lease = {"metadata": {"annotations": {ANNOTATION_ACKNOWLEDGED_FENCES: text}}}
    assert acknowledged_fences(lease) == {"a": "uid/t1"}
    for bad in ("not json", "[1]", '{"a": 1}'):
        assert acknowledged_fences({"metadata": {"annotations": {ANNOTATION_ACKNOWLEDGED_FENCES: bad}}}) == {}


def test_an_acknowledgement_is_dated_from_when_it_was_first_seen() -> None:
    lease = {"metadata": {"annotations": {ANNOTATION_ACKNOWLEDGED_FENCES: '{"a":"t1"}'}}}
    first = observe_acknowledgements({}, lease, 5.0)
    assert first == {"a": ("t1", 5.0)}
    assert observe_acknowledgements(first, lease, 9.0) == {"a": ("t1", 5.0)}
    lease2 = {"metadata": {"annotations": {ANNOTATION_ACKNOWLEDGED_FENCES: '{"a":"t2"}'}}}
    assert observe_acknowledgements(first, lease2, 9.0) == {"a": ("t2", 9.0)}
    assert observe_acknowledgements(first, {}, 9.0) == {}


def test_the_peer_announcement_reads_back() -> None:
    patch = peer_announcement_patch("127.0.0.1:7480", 2.0)
    cluster = {"metadata": patch["metadata"]}
    assert peer_endpoint(cluster) == "127.0.0.1:7480" and peer_report_ttl(cluster) == 2.0
    for bad in ("nohost", "host:", "host:port", "host:70000", ":80"):
        assert peer_endpoint({"metadata": {"annotations": {ANNOTATION_PEER_ENDPOINT: bad}}}) is None, bad
    for bad in ("soon", "0s", "-1s"):
        assert peer_report_ttl({"metadata": {"annotations": {ANNOTATION_PEER_REPORT_TTL: bad}}}) is None, bad


def test_d19_the_permit_goes_on_through_a_held_quorum_but_never_comes_back_through_one() -> None:
    q = peer_quorum(me="m1", fleet=3, fenced=False, reports={"m2": (report("m2"), 19.9)}, now=20.0, ttl=2.0)
    assert q.held
    renew = permit_decision(now=20.0, last_renewal_started=1.0, hold=15.0, fenced=False, purged=True, quorum=q)
    assert renew.step is PermitStep.RENEW and "report the control plane unreachable" in renew.reason
    # once withheld (purged reset) and expired, the peers cannot revive it: the purge needs the control plane
    lapsed = permit_decision(now=20.0, last_renewal_started=1.0, hold=15.0, fenced=False, purged=False, quorum=q)
    assert lapsed.step is PermitStep.WITHHOLD and "cannot revive" in lapsed.reason
    # ... but a permit withheld for a moment and still in force (younger than fence-after) goes on
    blip = permit_decision(now=20.0, last_renewal_started=1.0, hold=15.0, fenced=False, purged=False, quorum=q,
                           in_force=True)
    assert blip.step is PermitStep.RENEW
    fenced = permit_decision(now=20.0, last_renewal_started=1.0, hold=15.0, fenced=True, purged=True, quorum=q)
    assert fenced.step is PermitStep.WITHHOLD
    minority = peer_quorum(me="m1", fleet=3, fenced=False, reports={}, now=20.0, ttl=2.0)
    held_not = permit_decision(now=20.0, last_renewal_started=1.0, hold=15.0, fenced=False, purged=True,
                               quorum=minority)
    assert held_not.step is PermitStep.WITHHOLD and "not a strict majority" in held_not.reason
