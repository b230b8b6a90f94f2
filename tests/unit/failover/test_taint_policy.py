"""ClusterTaintPolicy decisions (with D13, ClusterTaintPolicy hygiene): condition matching (In/NotIn,
AND, absent conditions), target selection, adding and value-sensitive removal, ordering, and that taints no
policy owns are never touched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flotilla.failover.taint_policy import (
    RESERVED_TAINTS,
    cluster_needs_evaluation,
    conditions_match,
    desired_taints,
    evaluate,
    is_reserved,
    policy_spec_changed,
    policy_taints,
    policy_targets,
    same_taint,
    sort_policies,
)

NOW = datetime(2025, 3, 1, 8, 0, 0, tzinfo=UTC)
STAMP = "2025-03-01T08:00:00Z"
OLD = "2024-01-01T00:00:00Z"

NOT_READY_NOEXEC = {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}
READY_BAD = [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}]
READY_GOOD = [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}]


def cond(type_: str, status: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": "R", "message": "", "lastTransitionTime": OLD}


def cluster(ready: str | None = None, taints: list[Any] | None = None, *, name: str = "m1",
            labels: dict[str, str] | None = None, extra: list[dict[str, Any]] | None = None,
            **spec: Any) -> dict[str, Any]:
    conditions = ([] if ready is None else [cond("Ready", ready)]) + (extra or [])
    body_spec: dict[str, Any] = {"syncMode": "Push", **spec}
    if taints is not None:
        body_spec["taints"] = taints
    return {"metadata": {"name": name, "labels": labels or {}, "resourceVersion": "7"}, "spec": body_spec,
            "status": {"conditions": conditions}}


def policy(name: str = "p", taints: list[dict[str, Any]] | None = None, *, add: list[Any] | None = None,
           remove: list[Any] | None = None, target: dict[str, Any] | None = None,
           created: str = "2025-01-01T00:00:00Z") -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints if taints is not None else [NOT_READY_NOEXEC]}
    if add is not None:
        spec["addOnConditions"] = add
    if remove is not None:
        spec["removeOnConditions"] = remove
    if target is not None:
        spec["targetClusters"] = target
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
            "metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def failover_policy(**kw: Any) -> dict[str, Any]:
    """The reference example: not-ready:NoExecute while Ready is False/Unknown, gone once it is True."""
    return policy(add=READY_BAD, remove=READY_GOOD, **kw)


def keys(taints: list[Any]) -> list[str]:
    return [f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}" for t in taints]


# ---------------------------------------------------------------------------------------------- conditions


@pytest.mark.parametrize(("status", "operator", "values", "expected"), [
    ("False", "In", ["False", "Unknown"], True),
    ("Unknown", "In", ["False", "Unknown"], True),
    ("True", "In", ["False", "Unknown"], False),
    ("True", "NotIn", ["False", "Unknown"], True),
    ("False", "NotIn", ["False", "Unknown"], False),
    ("Unknown", "NotIn", ["True"], True),
    ("true", "In", ["True"], False),  # exact strings
])
def test_in_and_not_in(status: str, operator: str, values: list[str], expected: bool) -> None:
    match = [{"conditionType": "Ready", "operator": operator, "statusValues": values}]
    assert conditions_match([cond("Ready", status)], match) is expected


@pytest.mark.parametrize("operator", ["In", "NotIn"])
def test_absent_condition_never_matches(operator: str) -> None:
    match = [{"conditionType": "NetworkOK", "operator": operator, "statusValues": ["False"]}]
    assert not conditions_match([cond("Ready", "True")], match)
    assert not conditions_match([], match)
    assert not conditions_match(None, match)


def test_all_conditions_must_match() -> None:
    match = [{"conditionType": "Ready", "operator": "In", "statusValues": ["False"]},
             {"conditionType": "NetworkOK", "operator": "NotIn", "statusValues": ["True"]}]
    assert conditions_match([cond("Ready", "False"), cond("NetworkOK", "False")], match)
    assert not conditions_match([cond("Ready", "True"), cond("NetworkOK", "False")], match)
    assert not conditions_match([cond("Ready", "False"), cond("NetworkOK", "True")], match)
    assert not conditions_match([cond("Ready", "False")], match)  # NetworkOK absent


def test_empty_match_list_never_matches() -> None:
    assert not conditions_match([cond("Ready", "False")], [])
    assert not conditions_match([cond("Ready", "False")], None)


def test_unsupported_operator_fails_the_whole_list() -> None:
    match = [{"conditionType": "Ready", "operator": "In", "statusValues": ["False"]},
             {"conditionType": "Ready", "operator": "Exists", "statusValues": ["False"]}]
    assert not conditions_match([cond("Ready", "False")], match)


def test_not_in_last_condition_of_the_type_decides() -> None:
    match = [{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}]
    assert conditions_match([cond("Ready", "True"), cond("Ready", "False")], match)
    assert not conditions_match([cond("Ready", "False"), cond("Ready", "True")], match)


# ---------------------------------------------------------------------------------------------- targets


def test_no_target_clusters_means_every_cluster() -> None:
    assert policy_targets(policy(), cluster("True", name="any"))


@pytest.mark.parametrize(("target", "expected"), [
    ({"clusterNames": ["m1", "m2"]}, True),
    ({"clusterNames": ["m2"]}, False),
    ({"labelSelector": {"matchLabels": {"env": "prod"}}}, True),
    ({"labelSelector": {"matchLabels": {"env": "dev"}}}, False),
    ({"labelSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "qa"]}]}}, True),
    ({"fieldSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]}}, True),
    ({"fieldSelector": {"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["eu"]}]}}, False),
    ({"exclude": ["m1"]}, False),
    ({"exclude": ["m1"], "clusterNames": ["m1"]}, False),  # exclusion first
    ({"clusterNames": ["m1"], "labelSelector": {"matchLabels": {"env": "dev"}}}, False),  # ANDed
    ({}, True),
])
def test_target_selection(target: dict[str, Any], expected: bool) -> None:
    c = cluster("True", labels={"env": "prod"}, region="eu")
    assert policy_targets(policy(target=target), c) is expected


def test_target_ignores_malformed_unrelated_cluster_fields() -> None:
    c = cluster("True", [{"key": "x", "effect": 7}], labels={"env": "prod"})
    assert policy_targets(policy(target={"labelSelector": {"matchLabels": {"env": "prod"}}}), c)


def test_untargeted_cluster_is_not_tainted_and_keeps_its_taints() -> None:
    existing = {**NOT_READY_NOEXEC, "timeAdded": OLD}
    p = failover_policy(target={"clusterNames": ["other"]})
    assert desired_taints(cluster("False"), [p], NOW) == []
    assert desired_taints(cluster("True", [existing]), [p], NOW) == [existing]  # stopped matching: kept


# ---------------------------------------------------------------------------------------------- add / remove


def test_adds_taints_when_add_conditions_match() -> None:
    result = evaluate(cluster("False"), [failover_policy()], NOW)
    assert result.taints == [{**NOT_READY_NOEXEC, "timeAdded": STAMP}]
    assert result.changed and [(c.policy, c.taint["key"]) for c in result.added] == [
        ("p", "cluster.karmada.io/not-ready")]
    assert result.removed == ()


def test_value_is_written_when_the_policy_has_one() -> None:
    p = policy(taints=[{"key": "team.io/quarantine", "value": "net", "effect": "NoSchedule"}], add=READY_BAD)
    assert desired_taints(cluster("Unknown"), [p], NOW) == [
        {"key": "team.io/quarantine", "value": "net", "effect": "NoSchedule", "timeAdded": STAMP}]


def test_existing_key_and_effect_is_not_duplicated_nor_updated() -> None:
    existing = {**NOT_READY_NOEXEC, "value": "someone", "timeAdded": OLD}
    result = evaluate(cluster("False", [existing]), [failover_policy()], NOW)
    assert result.taints == [existing] and not result.changed


def test_removes_taints_when_remove_conditions_match() -> None:
    user = {"key": "dedicated", "value": "flink", "effect": "NoSchedule"}
    mine = {**NOT_READY_NOEXEC, "timeAdded": OLD}
    result = evaluate(cluster("True", [user, mine]), [failover_policy()], NOW)
    assert result.taints == [user]
    assert [(c.policy, c.taint) for c in result.removed] == [("p", mine)]


def test_nothing_happens_when_no_condition_set_matches() -> None:
    p = failover_policy()
    mine = {**NOT_READY_NOEXEC, "timeAdded": OLD}
    assert not evaluate(cluster(None), [p], NOW).changed  # no Ready yet: neither set matches
    assert not evaluate(cluster(None, [mine]), [p], NOW).changed


def test_no_conditions_sets_means_the_policy_does_nothing() -> None:
    assert desired_taints(cluster("False"), [policy()], NOW) == []


def test_add_then_remove_in_the_same_pass_leaves_nothing() -> None:
    p = policy(add=[{"conditionType": "Ready", "operator": "In", "statusValues": ["False"]}],
               remove=[{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}])
    result = evaluate(cluster("False"), [p], NOW)
    assert result.taints == [] and not result.changed and result.added == ()


def test_d13_policy_removes_only_its_own_taints() -> None:
    """Karmada removes by key and effect; Flotilla also needs the value, so a taint with the same key and
    effect put there by someone else (or another policy with another value) survives."""
    p = policy(taints=[{"key": "example.com/degraded", "value": "network", "effect": "NoExecute"}],
               add=READY_BAD, remove=READY_GOOD)
    someone_elses = {"key": "example.com/degraded", "value": "disk", "effect": "NoExecute", "timeAdded": OLD}
    no_value = {"key": "example.com/degraded", "effect": "NoExecute", "timeAdded": OLD}
    other_effect = {"key": "example.com/degraded", "value": "network", "effect": "NoSchedule"}
    for taint in (someone_elses, no_value):
        result = evaluate(cluster("True", [taint, other_effect]), [p], NOW)
        assert result.taints == [taint, other_effect] and not result.changed
    mine = {"key": "example.com/degraded", "value": "network", "effect": "NoExecute", "timeAdded": OLD}
    assert desired_taints(cluster("True", [someone_elses, mine, other_effect]), [p], NOW) == [
        someone_elses, other_effect]
    # an omitted value and "" are the same value
    q = policy(taints=[{"key": "k", "value": "", "effect": "NoSchedule"}], remove=READY_GOOD)
    assert desired_taints(cluster("True", [{"key": "k", "effect": "NoSchedule"}]), [q], NOW) == []


def test_d13_label_change_reevaluates() -> None:
    """A Cluster that starts matching a policy only because its labels changed is evaluated again (the
    controller's update filter) and then gets the policy's taints; one that stops matching keeps them."""
    p = failover_policy(target={"labelSelector": {"matchLabels": {"failover": "on"}}})
    before = cluster("False", labels={"failover": "off"})
    after = cluster("False", labels={"failover": "on"})
    assert cluster_needs_evaluation(before, after)
    assert desired_taints(before, [p], NOW) == []
    tainted = desired_taints(after, [p], NOW)
    assert tainted == [{**NOT_READY_NOEXEC, "timeAdded": STAMP}]
    # labels off again: the Cluster keeps the taint, even once Ready (the policy no longer applies to it)
    untargeted = cluster("True", tainted, labels={"failover": "off"})
    assert desired_taints(untargeted, [p], NOW) == tainted


def test_cluster_update_filter() -> None:
    base = cluster("True", labels={"a": "1"}, region="eu")
    same = cluster("True", [{"key": "x", "effect": "NoSchedule"}], labels={"a": "1"}, region="eu")
    assert not cluster_needs_evaluation(base, same)  # a taint change alone does not re-evaluate (Karmada)
    assert cluster_needs_evaluation(base, cluster("False", labels={"a": "1"}, region="eu"))
    assert cluster_needs_evaluation(base, cluster("True", labels={"a": "1"}, region="us"))
    assert cluster_needs_evaluation(base, cluster("True", labels={"a": "1"}, region="eu", zones=["z1"]))
    assert cluster_needs_evaluation(base, cluster("True", labels={}, region="eu"))
    assert cluster_needs_evaluation(base, cluster("True", labels={"a": "1"}, region="eu",
                                                  extra=[cond("NetworkOK", "False")]))


def test_policy_update_filter() -> None:
    p = failover_policy()
    relabelled = {**p, "metadata": {**p["metadata"], "labels": {"x": "y"}}}
    assert not policy_spec_changed(p, relabelled)
    assert policy_spec_changed(p, failover_policy(target={"clusterNames": ["m1"]}))


def test_cluster_controller_taints_are_never_touched() -> None:
    health = {"key": "cluster.karmada.io/not-ready", "effect": "NoSchedule", "timeAdded": OLD}
    unreachable = {"key": "cluster.karmada.io/unreachable", "effect": "NoSchedule", "timeAdded": OLD}
    p = policy(taints=[{"key": "cluster.karmada.io/not-ready", "effect": "NoSchedule"},
                       {"key": "cluster.karmada.io/unreachable", "effect": "NoSchedule"}, NOT_READY_NOEXEC],
               add=READY_BAD, remove=READY_GOOD)
    assert desired_taints(cluster("True", [health, unreachable]), [p], NOW) == [health, unreachable]
    assert desired_taints(cluster("False"), [p], NOW) == [{**NOT_READY_NOEXEC, "timeAdded": STAMP}]
    assert is_reserved(health) and not is_reserved(NOT_READY_NOEXEC)
    assert [t["key"] for t in policy_taints(p)] == ["cluster.karmada.io/not-ready"]


def test_malformed_policy_taints_are_ignored() -> None:
    p = policy(taints=[{"key": "", "effect": "NoSchedule"}, {"key": "k"}, "junk", {"key": "ok", "effect": "NoSchedule"}],
               add=READY_BAD)
    assert keys(desired_taints(cluster("False"), [p], NOW)) == ["ok:NoSchedule"]


# ---------------------------------------------------------------------------------------------- ordering


def test_policies_apply_oldest_first_with_name_as_tie_break() -> None:
    a = policy("a", [{"key": "k", "value": "a", "effect": "NoSchedule"}], add=READY_BAD, created="2025-02-01T00:00:00Z")
    b = policy("b", [{"key": "k", "value": "b", "effect": "NoSchedule"}], add=READY_BAD, created="2025-01-01T00:00:00Z")
    c = policy("c", [{"key": "k", "value": "c", "effect": "NoSchedule"}], add=READY_BAD, created="2025-01-01T00:00:00Z")
    assert [p["metadata"]["name"] for p in sort_policies([a, c, b])] == ["b", "c", "a"]
    for order in ([a, b, c], [c, b, a], [b, a, c]):
        assert keys(desired_taints(cluster("False"), order, NOW)) == ["k=b:NoSchedule"]  # b is first


def test_added_taints_follow_existing_ones_in_policy_order() -> None:
    user = {"key": "dedicated", "effect": "NoSchedule"}
    p1 = policy("p1", [{"key": "x", "effect": "NoExecute"}, {"key": "y", "effect": "NoSchedule"}],
                add=READY_BAD, created="2025-01-01T00:00:00Z")
    p2 = policy("p2", [{"key": "z", "effect": "NoSchedule"}], add=READY_BAD, created="2025-01-02T00:00:00Z")
    result = evaluate(cluster("False", [user]), [p2, p1], NOW)
    assert keys(result.taints) == ["dedicated:NoSchedule", "x:NoExecute", "y:NoSchedule", "z:NoSchedule"]
    assert [c.policy for c in result.added] == ["p1", "p1", "p2"]


def test_removed_then_re_added_in_one_pass_keeps_its_place_and_time() -> None:
    """Two policies disagreeing (one removes, a later one adds the same taint): the taint is not re-stamped,
    so the taint-manager's toleration timers are not reset on every evaluation."""
    mine = {**NOT_READY_NOEXEC, "timeAdded": OLD}
    user = {"key": "dedicated", "effect": "NoSchedule"}
    remover = policy("remover", remove=READY_BAD, created="2025-01-01T00:00:00Z")
    adder = policy("adder", add=READY_BAD, created="2025-01-02T00:00:00Z")
    result = evaluate(cluster("False", [mine, user]), [remover, adder], NOW)
    assert result.taints == [mine, user] and not result.changed
    assert result.added == () and result.removed == ()


def test_input_is_not_modified() -> None:
    c = cluster("True", [{**NOT_READY_NOEXEC, "timeAdded": OLD}])
    snapshot = repr(c)
    evaluate(c, [failover_policy()], NOW)
    assert repr(c) == snapshot


def test_same_taint() -> None:
    assert same_taint({"key": "k", "effect": "E"}, {"key": "k", "effect": "E", "value": ""})
    assert not same_taint({"key": "k", "effect": "E", "value": "a"}, {"key": "k", "effect": "E"})
    assert not same_taint({"key": "k", "effect": "E"}, {"key": "k", "effect": "F"})


# ---------------------------------------------------------------------------------------------- properties

_keys = st.sampled_from(["a", "b", "example.com/c", "cluster.karmada.io/not-ready", "cluster.karmada.io/unreachable"])
_effects = st.sampled_from(["NoSchedule", "NoExecute"])
_values = st.sampled_from([None, "", "v1", "v2"])
_statuses = st.sampled_from(["True", "False", "Unknown"])
_ctypes = st.sampled_from(["Ready", "NetworkOK", "DiskOK"])


@st.composite
def _taint(draw: st.DrawFn, with_time: bool = True) -> dict[str, Any]:
    t: dict[str, Any] = {"key": draw(_keys), "effect": draw(_effects)}
    value = draw(_values)
    if value is not None:
        t["value"] = value
    if with_time and draw(st.booleans()):
        t["timeAdded"] = OLD
    return t


@st.composite
def _cluster_taints(draw: st.DrawFn) -> list[dict[str, Any]]:
    taints = draw(st.lists(_taint(), max_size=6))
    seen: set[tuple[str, str]] = set()
    out = []
    for t in taints:  # Clusters admit one taint per key and effect
        if (t["key"], t["effect"]) not in seen:
            seen.add((t["key"], t["effect"]))
            out.append(t)
    return out


_match = st.lists(st.fixed_dictionaries({
    "conditionType": _ctypes, "operator": st.sampled_from(["In", "NotIn"]),
    "statusValues": st.lists(_statuses, min_size=1, max_size=3, unique=True)}), max_size=2)


@st.composite
def _policy(draw: st.DrawFn, i: int) -> dict[str, Any]:
    target = draw(st.sampled_from([None, {"clusterNames": ["m1"]}, {"clusterNames": ["m2"]},
                                   {"labelSelector": {"matchLabels": {"env": "prod"}}}]))
    return policy(f"p{i}", draw(st.lists(_taint(with_time=False), min_size=1, max_size=3)), add=draw(_match),
                  remove=draw(_match), target=target,
                  created=draw(st.sampled_from(["2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"])))


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    conditions = [cond(t, draw(_statuses)) for t in draw(st.lists(_ctypes, unique=True, max_size=3))]
    c = cluster(None, draw(_cluster_taints()), labels=draw(st.sampled_from([{}, {"env": "prod"}])),
                extra=conditions)
    n = draw(st.integers(min_value=0, max_value=4))
    return c, [draw(_policy(i)) for i in range(n)]


def _owned(taint: dict[str, Any], policies: list[dict[str, Any]]) -> bool:
    return any(same_taint(taint, pt) for p in policies for pt in policy_taints(p))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_taints_no_policy_owns_are_never_touched(scenario: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    c, policies = scenario
    before = c["spec"]["taints"]
    result = evaluate(c, policies, NOW)
    foreign = [t for t in before if not _owned(t, policies)]
    assert [t for t in result.taints if any(t is f or t == f for f in foreign)] == foreign  # all kept, in order
    for t in before:
        if (t["key"], t["effect"]) in RESERVED_TAINTS:
            assert t in result.taints
    # every removal is the policy's own taint (key, effect and value); every addition is new
    for change in result.removed:
        assert change.taint in before and _owned(change.taint, policies)
    for change in result.added:
        assert change.taint["timeAdded"] == STAMP and (change.taint["key"], change.taint["effect"]) not in RESERVED_TAINTS
    # still one taint per key and effect, and the reported changes are exactly the difference
    pairs = [(t["key"], t["effect"]) for t in result.taints]
    assert len(pairs) == len(set(pairs))
    assert result.changed == (result.taints != before)
    assert sorted(map(repr, [t for t in before if t not in result.taints])) == sorted(
        repr(ch.taint) for ch in result.removed)


@settings(max_examples=200, deadline=None)
@given(_scenario())
def test_evaluation_is_idempotent(scenario: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    c, policies = scenario
    first = evaluate(c, policies, NOW)
    again = evaluate({**c, "spec": {**c["spec"], "taints": first.taints}}, policies, NOW + timedelta(hours=1))
    assert not again.changed and again.taints == first.taints
