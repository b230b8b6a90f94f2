"""The pure parts of ``flotilla bench propagate`` and ``flotilla bench scale``: what is placed where, the
per-template stages and the reports (no processes)."""

from __future__ import annotations

from flotilla.bench.harness import member_groups, member_names
from flotilla.bench.propagate import (
    STAGES,
    TemplateTimeline,
    object_latencies,
    policies,
    stage_summaries,
    step_summaries,
    template_kinds,
)
from flotilla.bench.propagate import render_report as render_propagate
from flotilla.bench.scale import assignments, quiet, scale_policies
from flotilla.bench.scale import render_report as render_scale
from flotilla.bench.workloads import KINDS, RUN_LABEL, kinds_for


def test_template_kinds_spread_the_flink_share_evenly() -> None:
    kinds = template_kinds(20, 0.2)
    flinks = [i for i, k in enumerate(kinds) if k.name == "flink"]
    assert flinks == [0, 5, 10, 15]
    assert template_kinds(3, 0.0) == [KINDS["deployment"]] * 3
    assert all(k.name == "flink" for k in template_kinds(4, 1.0))


def test_propagation_policies() -> None:
    kinds = template_kinds(10, 0.1)
    (dup,) = policies(kinds, ["m1", "m2"], "duplicated", "r1")
    assert dup["spec"]["placement"] == {"clusterAffinity": {"clusterNames": ["m1", "m2"]},
                                        "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    assert [s["kind"] for s in dup["spec"]["resourceSelectors"]] == ["FlinkDeployment", "Deployment"]
    assert all(s["labelSelector"] == {"matchLabels": {RUN_LABEL: "r1"}} for s in dup["spec"]["resourceSelectors"])
    single = policies(template_kinds(4, 0.0), ["m1", "m2"], "single", "r1")
    assert [p["spec"]["placement"]["clusterAffinity"]["clusterNames"] for p in single] == [["m1"], ["m2"]]
    assert single[1]["spec"]["resourceSelectors"][0]["labelSelector"] == {"matchLabels": {RUN_LABEL: "r1.m2"}}


def test_template_stages_and_latencies() -> None:
    a = TemplateTimeline("t0", "Deployment", "t0-deployment", targets=2, created=10.0, bound=10.1, scheduled=10.2,
                         works=10.3, first_member=10.5, all_members=10.8, healthy=11.0,
                         member_seen={"m1": 10.5, "m2": 10.8})
    b = TemplateTimeline("t1", "Deployment", "t1-deployment", targets=2, created=10.0, bound=10.2)
    assert sorted(round(x, 3) for x in object_latencies([a, b])) == [0.5, 0.8]
    stages = stage_summaries([a, b])
    assert [k for k, _ in STAGES] == list(stages)
    assert stages["bound"]["count"] == 2 and stages["healthy"]["count"] == 1
    assert stages["healthy"]["p50"] == 1000.0
    steps = step_summaries([a, b])
    assert steps["created->bound"]["count"] == 2 and steps["all_members->healthy"]["p50"] == 200.0
    text = render_propagate({"templates": 2, "members": 2, "placement": "duplicated", "member_objects_expected": 4,
                             "stages_ms": stages, "steps_ms": steps, "latency_ms": {"count": 2, "p50": 500.0}})
    assert "template -> member object" in text and "ResourceBinding created" in text


def test_scale_placement_and_policies() -> None:
    names = ["m1", "m2", "m3"]
    assert assignments(7, names, 3) == ["m1", "m1", "m1", "m2", "m3", "m2", "m3"]
    assert assignments(2, ["m1"], 1) == ["m1", "m1"]
    pols = scale_policies(kinds_for("mix"), names, "r")
    assert len(pols) == 9
    first = [p for p in pols if p["metadata"]["name"].endswith("-m1")]
    assert all(p["spec"]["failover"]["cluster"].get("statePreservation") for p in first)
    assert [a["clusterNames"] for a in first[0]["spec"]["placement"]["clusterAffinities"]] == [["m1"], ["m2", "m3"]]
    other = [p for p in pols if p["metadata"]["name"] == "bench-deployment-m2"][0]
    assert [a["clusterNames"] for a in other["spec"]["placement"]["clusterAffinities"]] == [["m2"]]
    assert other["spec"]["resourceSelectors"][0]["labelSelector"] == {"matchLabels": {RUN_LABEL: "r.m2"}}
    assert len({p["metadata"]["name"] for p in pols}) == 9


def test_member_processes_and_names() -> None:
    assert member_groups(3, 0) == [("member", 3)]
    assert member_groups(100, 0) == [("p1-member", 50), ("p2-member", 50)]
    assert member_groups(5, 2) == [("p1-member", 3), ("p2-member", 2)]
    assert member_groups(2, 5) == [("p1-member", 1), ("p2-member", 1)]
    assert member_names(member_groups(5, 2)) == ["p1-member1", "p1-member2", "p1-member3", "p2-member1",
                                                 "p2-member2"]


def test_quiet_and_the_scale_report() -> None:
    assert quiet(0, 2.0) and quiet(1, 2.0) and not quiet(5, 2.0)
    text = render_scale({"workloads": 10, "members": 2, "idle": {"cpu_percent_of_one_core": 3.2,
                                                                  "cpu_cores": {"control_plane": 0.032}},
                         "memory": {"member_processes": [{"rss_mb": 50.0, "members": 2}]}, "rss_mb": 100.0})
    assert "3.2% of one core" in text and "50 MB (2 members)" in text
