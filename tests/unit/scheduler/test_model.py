"""Parsing Karmada dicts, placement normalisation, quantities and the general replica estimator."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from flotilla.scheduler.errors import ModelError
from flotilla.scheduler.estimation import allocatable_replicas, general_estimate
from flotilla.scheduler.model import (
    MAX_INT32,
    BindingStatus,
    ClusterAffinity,
    ReplicaRequirements,
    Strategy,
    milli_value,
    parse_binding,
    parse_binding_spec,
    parse_cluster,
    parse_placement,
    parse_quantity,
    parse_time,
    quantity_value,
)

from .builders import NOW, aggregated, binding, cluster, divided_dynamic, divided_static, rfc3339

# -- quantities ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        ("1Ki", Fraction(1024)),
        ("1Gi", Fraction(2**30)),
        ("0.5Mi", Fraction(2**19)),
        ("3k", Fraction(3000)),
        ("1M", Fraction(10**6)),
        ("1e3", Fraction(1000)),
        ("2E-3", Fraction(2, 1000)),
        ("100n", Fraction(1, 10**7)),
        ("-1", Fraction(-1)),
        (".5", Fraction(1, 2)),
        (4, Fraction(4)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse_quantity(text: Any, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Qi", "1.2.3", "1e", True, None])
def test_parse_quantity_rejects_garbage(text: Any) -> None:
    with pytest.raises(ModelError):
        parse_quantity(text)


def test_quantity_value_rounds_away_from_zero() -> None:
    assert quantity_value(Fraction(1, 10)) == 1
    assert quantity_value(Fraction(2)) == 2
    assert quantity_value(Fraction(-1, 10)) == -1
    assert milli_value(parse_quantity("1.0001")) == 1001
    assert milli_value(parse_quantity("250m")) == 250


# -- times ---------------------------------------------------------------------------------------


def test_parse_time() -> None:
    assert parse_time(rfc3339(NOW)) == NOW
    assert parse_time("2025-03-01T12:00:00.5+00:00") is not None
    assert parse_time(None) is None
    assert parse_time(NOW.replace(tzinfo=None)) == NOW
    with pytest.raises(ModelError):
        parse_time("yesterday")


# -- clusters ---------------------------------------------------------------------------------------


def test_parse_cluster_reads_what_scheduling_needs() -> None:
    obj = cluster(
        "m1",
        labels={"env": "prod"},
        provider="aws",
        region="eu",
        zones=["z1", "z2"],
        taints=[{"key": "k", "value": "v", "effect": "NoExecute", "timeAdded": rfc3339(NOW)}],
        deleting=True,
    )
    c = parse_cluster(obj)
    assert (c.name, dict(c.labels), c.provider, c.region, c.zones) == (
        "m1",
        {"env": "prod"},
        "aws",
        "eu",
        ("z1", "z2"),
    )
    assert c.taints[0].key == "k" and c.taints[0].time_added == NOW
    assert str(c.taints[0]) == "k=v:NoExecute"
    assert c.deleting
    assert c.api_enabled("apps/v1", "Deployment") == "Enabled"
    assert c.api_enabled("batch/v1", "Job") == "Disabled"
    assert parse_cluster(cluster("m1", complete=False)).api_enabled("batch/v1", "Job") == "Unknown"


def test_api_enabled_answers_each_kind_on_its_own_when_asked_again() -> None:
    """The answers are remembered per (apiVersion, kind) of one parsed Cluster: asking again, in any order,
    gives each question its own answer."""
    c = parse_cluster(cluster("m1", apis=(("apps/v1", "Deployment"), ("batch/v1", "Job"))))
    questions = [("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("batch/v1", "Job"), ("/v1", "ConfigMap"),
                 ("batch/v1", "Deployment")]
    first = [c.api_enabled(v, k) for v, k in questions]
    assert first == ["Enabled", "Disabled", "Enabled", "Disabled", "Disabled"]
    assert [c.api_enabled(v, k) for v, k in reversed(questions)] == first[::-1]
    other = parse_cluster(cluster("m2", apis=(("apps/v1", "StatefulSet"),), complete=False))
    assert [other.api_enabled(v, k) for v, k in questions[:2]] == ["Unknown", "Enabled"]  # not m1's answers


def test_parsing_against_an_earlier_version_gives_what_a_fresh_parse_gives() -> None:
    """``previous`` is only a shortcut: whatever changed between the versions, the parse equals a fresh one, and
    the status parts whose raw value did not change are the earlier parse's own objects."""
    apis = (("apps/v1", "Deployment"), ("batch/v1", "Job"))
    first = cluster("m1", apis=apis, allocated_pods=1)
    earlier = parse_cluster(first)
    # answers remembered by the earlier parse, which a version with other enablements must not reuse
    assert [earlier.api_enabled("apps/v1", k) for k in ("Deployment", "StatefulSet")] == ["Enabled", "Disabled"]
    versions = {
        "summary moved": cluster("m1", apis=apis, allocated_pods=2),
        "enablements changed": cluster("m1", apis=apis[:1], allocated_pods=1),
        "incomplete": cluster("m1", apis=apis, allocated_pods=1, complete=False),
        "no summary": cluster("m1", apis=apis, pods=None),
        "labels": cluster("m1", apis=apis, allocated_pods=1, labels={"env": "prod"}),
        "unchanged": cluster("m1", apis=apis, allocated_pods=1),
    }
    for what, obj in versions.items():
        again = parse_cluster(obj, previous=(first, earlier))
        assert again == parse_cluster(obj), what
        same_apis = obj["status"]["apiEnablements"] == first["status"]["apiEnablements"]
        assert (again.api_enablements is earlier.api_enablements) == same_apis, what
        same_summary = obj["status"].get("resourceSummary") == first["status"]["resourceSummary"]
        assert (again.resource_summary is earlier.resource_summary) == same_summary, what
        for kind in ("Deployment", "StatefulSet"):
            assert again.api_enabled("apps/v1", kind) == parse_cluster(obj).api_enabled("apps/v1", kind), what


def test_a_malformed_status_is_refused_even_after_a_good_version() -> None:
    first = cluster("m1")
    bad = cluster("m1")
    bad["status"]["apiEnablements"] = [{"groupVersion": "apps/v1", "resources": "nope"}]
    with pytest.raises(ModelError):
        parse_cluster(bad, previous=(first, parse_cluster(first)))


def test_affinity_name_sets_hold_the_names_and_do_not_change_equality() -> None:
    a = ClusterAffinity.from_dict({"clusterNames": [f"m{i}" for i in range(200)], "exclude": ["m7"]})
    b = ClusterAffinity.from_dict({"clusterNames": [f"m{i}" for i in range(200)], "exclude": ["m7"]})
    assert a.cluster_name_set == frozenset(a.cluster_names) and a.exclude_set == {"m7"}
    assert a == b and hash(a) == hash(b)


def test_parse_cluster_requires_a_name() -> None:
    with pytest.raises(ModelError):
        parse_cluster({"metadata": {}})


def test_parse_cluster_rejects_wrong_shapes() -> None:
    with pytest.raises(ModelError):
        parse_cluster({"metadata": {"name": "m1"}, "spec": {"taints": "nope"}})


# -- placement normalisation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("placement", "strategy"),
    [
        ({}, Strategy.DUPLICATED),
        ({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}, Strategy.DUPLICATED),
        ({"replicaScheduling": {}}, Strategy.STATIC_WEIGHT),  # Divided, Weighted, no preference
        (divided_static(), Strategy.STATIC_WEIGHT),
        (divided_static({"m1": 1}), Strategy.STATIC_WEIGHT),
        (divided_dynamic(), Strategy.DYNAMIC_WEIGHT),
        (aggregated(), Strategy.AGGREGATED),
        (
            {
                "replicaScheduling": {
                    "weightPreference": {
                        "staticWeightList": [{"targetCluster": {"clusterNames": ["m1"]}, "weight": 1}],
                        "dynamicWeight": "AvailableReplicas",
                    }
                }
            },
            Strategy.DYNAMIC_WEIGHT,  # a dynamic weight makes the static list irrelevant
        ),
    ],
)
def test_replica_scheduling_normalisation(placement: dict[str, Any], strategy: Strategy) -> None:
    assert parse_placement(placement).strategy is strategy


def test_spread_constraints_are_ignored_only_for_static_weights() -> None:
    assert parse_placement(divided_static()).spread_constraints_ignored()
    assert parse_placement(divided_static({"m1": 1})).spread_constraints_ignored()
    assert not parse_placement({"replicaScheduling": {"weightPreference": {}}}).spread_constraints_ignored()
    assert not parse_placement(divided_dynamic()).spread_constraints_ignored()
    assert not parse_placement(aggregated()).spread_constraints_ignored()
    assert not parse_placement({}).spread_constraints_ignored()


def test_empty_cluster_affinities_list_is_treated_as_absent() -> None:
    assert parse_placement({"clusterAffinities": []}).cluster_affinities is None


def test_placement_parsing_is_idempotent() -> None:
    p = parse_placement(divided_dynamic())
    assert parse_placement(p) is p


# -- bindings ---------------------------------------------------------------------------------------


def test_parse_binding_whole_object_and_bare_spec() -> None:
    rb = binding(
        divided_dynamic(),
        replicas=3,
        clusters={"m1": 2},
        uid="u-1",
        status={"schedulerObservingAffinityName": "a", "lastScheduledTime": rfc3339(NOW)},
    )
    spec, status = parse_binding(rb)
    assert spec.replicas == 3 and spec.resource.uid == "u-1" and spec.assigned_replicas("m1") == 2
    assert status == BindingStatus(affinity_name="a", last_scheduled_time=NOW)
    spec2, status2 = parse_binding(rb["spec"])
    assert spec2 == spec and status2 is None


def test_is_workload() -> None:
    assert parse_binding_spec(binding(replicas=1)["spec"]).is_workload
    assert not parse_binding_spec(binding(replicas=0)["spec"]).is_workload
    assert parse_binding_spec(binding(replicas=0, requests={})["spec"]).is_workload


# -- the general estimator --------------------------------------------------------------------------


def estimate(requests: dict[str, str] | None, **cluster_kw: Any) -> int:
    req = (
        None if requests is None else ReplicaRequirements({k: parse_quantity(v) for k, v in requests.items()})
    )
    return general_estimate(parse_cluster(cluster("m1", **cluster_kw)), req)


def test_estimate_without_resource_summary_is_zero() -> None:
    assert estimate(None, pods=None) == 0


def test_estimate_without_requirements_is_the_pods_left() -> None:
    assert estimate(None, pods=10, allocated_pods=3) == 7
    assert estimate(None, pods=10, allocated_pods=12) == 0


def test_estimate_cpu_in_millicores() -> None:
    assert estimate({"cpu": "300m"}, allocatable={"cpu": "1"}) == 3
    assert estimate({"cpu": "250m"}, allocatable={"cpu": "2"}, allocated={"cpu": "500m"}) == 6


def test_estimate_memory_in_units() -> None:
    assert estimate({"memory": "1Gi"}, allocatable={"memory": "4Gi"}, allocated={"memory": "1536Mi"}) == 2


def test_estimate_is_the_minimum_over_resources_and_pods() -> None:
    assert estimate({"cpu": "1", "memory": "1Gi"}, allocatable={"cpu": "8", "memory": "3Gi"}) == 3
    assert estimate({"cpu": "100m"}, pods=4, allocatable={"cpu": "8"}) == 4


def test_estimate_resource_missing_or_exhausted_is_zero() -> None:
    assert estimate({"nvidia.com/gpu": "1"}, allocatable={"cpu": "8"}) == 0
    assert estimate({"cpu": "1"}, allocatable={"cpu": "2"}, allocated={"cpu": "2"}) == 0


def test_estimate_ignores_zero_requests() -> None:
    assert estimate({"cpu": "0", "memory": "0"}, pods=5) == 5


def test_allocatable_replicas_skips_estimation_without_replicas() -> None:
    spec = parse_binding_spec(binding(replicas=0, kind="ConfigMap")["spec"])
    assert allocatable_replicas([parse_cluster(cluster("m1", pods=None))], spec) == {"m1": MAX_INT32}


def test_allocatable_replicas_min_merges_other_estimators() -> None:
    spec = parse_binding_spec(binding(replicas=5)["spec"])
    clusters = [parse_cluster(cluster(n, pods=10)) for n in ("m1", "m2", "m3")]
    got = allocatable_replicas(clusters, spec, {"m1": 3, "m2": -1, "m3": 50, "unknown": 1})
    assert got == {"m1": 3, "m2": 10, "m3": 10}


def test_allocatable_replicas_unbounded_estimate_becomes_the_replicas() -> None:
    spec = parse_binding_spec(binding(replicas=5)["spec"])
    huge = parse_cluster(cluster("m1", pods=2**40))
    assert allocatable_replicas([huge], spec) == {"m1": 5}
