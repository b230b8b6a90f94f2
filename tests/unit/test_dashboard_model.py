"""The dashboard's pure parts: slim objects, the model's indexes and versions, the pages' queries, the timeline,
the one-time tokens and sessions; and the workloads page over 10,000 bindings."""

from __future__ import annotations

import json
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flotilla.dashboard.model import (
    DashboardModel,
    QueryError,
    WorkloadQuery,
    cluster_views,
    slim_binding,
    slim_cluster,
    slim_event,
    slim_lease,
    slim_work,
    workload_page,
    workload_topic,
)
from flotilla.dashboard.sessions import Sessions
from flotilla.dashboard.timeline import axis_start_of, event_step_kind, parse_window, timeline

NOW = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)


def ts(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster(name: str, ready: str = "True", taints: list[dict[str, str]] | None = None,
            mode: str = "Push") -> dict[str, Any]:
    return {"kind": "Cluster", "metadata": {"name": name, "uid": f"u-{name}", "resourceVersion": "1",
                                            "creationTimestamp": ts(600), "annotations": {"noise": "x" * 100}},
            "spec": {"syncMode": mode, "apiEndpoint": f"https://{name}:6443", "taints": taints or [],
                     "secretRef": {"name": "s"}},
            "status": {"kubernetesVersion": "v1.37.0",
                       "conditions": [{"type": "Ready", "status": ready, "reason": "R", "lastTransitionTime": ts(30)}],
                       "resourceSummary": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                                           "allocated": {"cpu": "2"}},
                       "nodeSummary": {"totalNum": 3}}}


def history(*entries: dict[str, Any]) -> str:
    return json.dumps(list(entries))


def binding(name: str, namespace: str = "default", clusters: tuple[str, ...] = ("member1",),
            tasks: list[dict[str, Any]] | None = None, health: dict[str, str] | None = None,
            hist: str | None = None, pid: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": f"{name}-deployment", "namespace": namespace, "uid": f"u-{name}",
                          "resourceVersion": "1", "creationTimestamp": ts(300),
                          "labels": {"resourcebinding.karmada.io/permanent-id": pid or f"pid-{name}", "x": "y"},
                          "annotations": {"propagationpolicy.karmada.io/name": "pp",
                                          "kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 2000 + "}"}}
    if hist is not None:
        md["annotations"]["failover.flotilla.io/history"] = hist
    return {"kind": "ResourceBinding", "metadata": md,
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                  "namespace": namespace, "uid": "t"},
                     "clusters": [{"name": c, "replicas": 2} for c in clusters],
                     "gracefulEvictionTasks": tasks or [],
                     "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}},
            "status": {"conditions": [{"type": "Scheduled", "status": "True"}, {"type": "FullyApplied",
                                                                                "status": "True"},
                                      {"type": "Other", "status": "True"}],
                       "aggregatedStatus": [{"clusterName": c, "health": h, "applied": True,
                                             "status": {"readyReplicas": 2, "big": "x" * 1000}}
                                            for c, h in (health or {}).items()]}}


def test_slim_objects_keep_what_the_pages_show_and_drop_the_rest() -> None:
    c = slim_cluster(cluster("member1"))
    assert "annotations" not in c["metadata"] and "secretRef" not in c["spec"] and "nodeSummary" not in c["status"]
    assert c["spec"]["apiEndpoint"] == "https://member1:6443" and c["status"]["resourceSummary"]["allocated"]
    b = slim_binding(binding("web", health={"member1": "Healthy"}, hist="[]"))
    assert b["metadata"]["annotations"] == {"failover.flotilla.io/history": "[]",
                                            "propagationpolicy.karmada.io/name": "pp"}
    assert b["metadata"]["labels"] == {"resourcebinding.karmada.io/permanent-id": "pid-web"}
    assert "placement" not in b["spec"] and b["status"]["aggregatedStatus"] == [
        {"clusterName": "member1", "health": "Healthy", "applied": True}]
    assert [x["type"] for x in b["status"]["conditions"]] == ["Scheduled", "FullyApplied"]
    flink = binding("job", health={"member1": "Healthy"})
    flink["status"]["aggregatedStatus"][0]["status"]["jobStatus"] = {"state": "RUNNING", "jobId": "j"}
    assert slim_binding(flink)["status"]["aggregatedStatus"][0]["jobState"] == "RUNNING"
    w = slim_work({"metadata": {"name": "w", "namespace": "karmada-es-member1", "labels": {
        "resourcebinding.karmada.io/permanent-id": "pid-web"}}, "spec": {"workload": {"manifests": [
            {"kind": "Deployment", "metadata": {"name": "web"}, "spec": {"template": "x" * 1000}}]}}})
    assert w["spec"]["workload"]["manifests"] == [{"kind": "Deployment", "metadata": {"name": "web"}}]
    routine = slim_event({"metadata": {"name": "e", "uid": "1"}, "reason": "Pulled", "type": "Normal",
                          "message": "x" * 500})
    assert routine == {"kind": "Event", "metadata": {"name": "e", "uid": "1"}}
    failover = slim_event({"metadata": {"name": "e", "uid": "2"}, "reason": "ClusterNotReady", "type": "Warning",
                           "involvedObject": {"kind": "Cluster", "name": "member1", "uid": "x"},
                           "source": {"component": "cluster-status-controller", "host": "h"}})
    assert failover["involvedObject"] == {"kind": "Cluster", "name": "member1"}
    assert failover["source"] == {"component": "cluster-status-controller"}
    assert slim_lease({"metadata": {"name": "m"}, "spec": {"renewTime": "t", "holderIdentity": "h"}})["spec"] == {
        "renewTime": "t"}


def test_the_model_bumps_the_topics_whose_pages_show_a_change() -> None:
    m = DashboardModel()
    m.put_cluster(slim_cluster(cluster("member1")))
    assert m.versions.of("fleet") == 1 and m.versions.of("timeline") == 0
    b = slim_binding(binding("web"))
    m.put_binding(b)
    assert m.versions.of(workload_topic("default/web-deployment")) == 1 and m.versions.of("timeline") == 1
    m.put_binding(b)  # the same tasks and history: the timeline shows nothing new
    assert m.versions.of("timeline") == 1 and m.versions.of("workloads") == 3  # the cluster, then each put
    work = slim_work({"metadata": {"name": "w1", "namespace": "karmada-es-member1",
                                   "labels": {"resourcebinding.karmada.io/permanent-id": "pid-web"}}})
    m.put_work(work)
    assert m.versions.of(workload_topic("default/web-deployment")) == 3
    assert [w["metadata"]["name"] for w in m.works_of(b)] == ["w1"]
    m.remove_work(work)
    assert m.works_of(b) == [] and m.versions.of(workload_topic("default/web-deployment")) == 4
    event = slim_event({"metadata": {"name": "e", "uid": "e1"}, "reason": "EvictionPerformed", "type": "Normal",
                        "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "default"}})
    m.put_event(event)
    assert m.versions.of(workload_topic("default/web-deployment")) == 5  # the template's Event: its binding's page
    assert m.events_about("Deployment", "default", "web") == [event]
    m.put_event(slim_event({"metadata": {"name": "e", "uid": "e1"}, "reason": "Pulled"}))  # no longer one shown
    assert m.events_about("Deployment", "default", "web") == [] and m.all_events() == []
    m.remove_binding(b)
    assert m.bindings == {} and m.sorted_binding_keys() == []


def test_cluster_views_say_ready_taints_fence_resources_lease_and_workloads() -> None:
    m = DashboardModel()
    m.put_cluster(slim_cluster(cluster("member1", "False", [
        {"key": "cluster.flotilla.io/out-of-service", "effect": "NoExecute"}])))
    m.put_cluster(slim_cluster(cluster("member3", mode="Pull")))
    m.put_lease(slim_lease({"metadata": {"name": "member3"}, "spec": {"renewTime": ts(4)}}))
    m.put_binding(slim_binding(binding("web", clusters=("member3",))))
    v1, v3 = cluster_views(m, NOW)
    assert (v1.name, v1.ready, v1.fenced, v1.taints) == ("member1", "False", "Manual",
                                                       ["cluster.flotilla.io/out-of-service:NoExecute"])
    assert v1.summary == ["cpu 2 / 8", "memory 0 / 32Gi", "pods 0 / 110"] and v1.ready_since == "30s"
    assert (v3.mode, v3.lease_age, v3.workloads, v1.workloads) == ("Pull", "4s", 1, 0)


def test_workload_query_parse_refuses_what_it_cannot_use() -> None:
    assert WorkloadQuery.parse({}) == WorkloadQuery()
    q = WorkloadQuery.parse({"q": " web ", "state": "moving", "page": "2", "size": "25", "cluster": "member1"})
    assert (q.search, q.state, q.page, q.size, q.cluster) == ("web", "moving", 2, 25, "member1")
    assert q.params(page=3) == {"q": "web", "cluster": "member1", "state": "moving", "page": "3", "size": "25"}
    for params, said in [({"page": "0"}, "page"), ({"page": "-1"}, "page"), ({"page": "1e9"}, "page"),
                         ({"size": "13"}, "size"), ({"state": "x"}, "state"), ({"q": "x" * 201}, "q"),
                         ({"order": "name"}, "unknown query parameter 'order'"), ({"page": "9" * 12}, "page"),
                         ({"page": "\u00b2"}, "page"), ({"size": "\u0665\u0660"}, "size")]:
        with pytest.raises(QueryError, match=said):
            WorkloadQuery.parse(params)


def test_workload_rows_show_placement_health_tasks_with_state_and_the_last_failover() -> None:
    m = DashboardModel()
    task = {"fromCluster": "member1", "purgeMode": "Directly", "producer": "TaintManager",
            "reason": "TaintUntolerated", "preservedLabelState": {"failover.example.com/replicas": "2"},
            "creationTimestamp": ts(5)}
    hist = history({"at": ts(5), "from": "member1", "to": "member2", "trigger": "ClusterTaint",
                    "phase": "InProgress"})
    m.put_binding(slim_binding(binding("web", clusters=("member2",), tasks=[task], hist=hist)))
    m.put_binding(slim_binding(binding("db", health={"member1": "Healthy"})))
    page = workload_page(m, WorkloadQuery(state="moving"), NOW)
    assert page.matching == 1 and page.total == 2
    row = page.rows[0]
    assert (row.workload, row.clusters, row.moving, row.healthy, row.policy) == (
        "Deployment/web", ["member2 (2)"], True, False, "pp")
    assert row.tasks[0].preserved == {"failover.example.com/replicas": "2"} and row.tasks[0].age == "5s"
    assert row.last_failover == "member1 → member2 (ClusterTaint, in progress, 5s ago)"
    assert [r.name for r in workload_page(m, WorkloadQuery(state="unhealthy"), NOW).rows] == ["web-deployment"]
    assert [r.name for r in workload_page(m, WorkloadQuery(search="DB"), NOW).rows] == ["db-deployment"]


def test_the_timeline_puts_history_and_failover_events_on_one_axis() -> None:
    m = DashboardModel()
    hist = history({"at": ts(40), "from": "member1", "to": "member2", "trigger": "ClusterTaint",
                    "purgeMode": "Directly", "preservedState": {"jobid": "j1"}, "phase": "Completed",
                    "runningAt": ts(10), "timeToRunning": 30.0, "restoredPath": "file:///ck/j1/chk-4",
                    "stateGap": {"ageAtFault": 1.5, "recordsReprocessed": 120}})
    m.put_binding(slim_binding(binding("web", clusters=("member2",), hist=hist)))
    for i, (reason, kind, name, ago, etype) in enumerate([
            ("ClusterNotReady", "Cluster", "member1", 50, "Warning"),
            ("TaintClusterSucceed", "Cluster", "member1", 45, "Normal"),
            ("ClusterFencedAutomatically", "Cluster", "member1", 30, "Warning"),
            ("SyncWorkSucceed", "ResourceBinding", "web-deployment", 20, "Normal"),
            ("StatePreservationFailed", "ResourceBinding", "other-deployment", 3600 * 3, "Warning")]):
        m.put_event(slim_event({"metadata": {"name": f"e{i}", "uid": f"e{i}"}, "reason": reason, "type": etype,
                                "message": f"{reason} member1", "lastTimestamp": ts(ago),
                                "involvedObject": {"kind": kind, "name": name,
                                                   **({"namespace": "default"} if kind != "Cluster" else {})}}))
    steps = timeline(m.bindings, m.all_events(), NOW, parse_window("1h"))
    assert [s.kind for s in steps] == ["running", "placed", "fence", "eviction", "taint", "fault"]  # newest first
    running = steps[0]
    assert running.title == "running on member2 after 30s" and running.link == "default/web-deployment"
    assert "checkpoint age at fault 1.5s, 120 records reprocessed" in running.detail
    assert "restored from file:///ck/j1/chk-4" in running.detail
    assert steps[3].title == "failover from member1 (ClusterTaint)" and "jobid=j1" in steps[3].detail
    assert steps[-1].position == pytest.approx((60 - 50) / 60 * 100, abs=0.5)  # the axis starts before the fault
    assert [s.kind for s in timeline(m.bindings, m.all_events(), NOW, parse_window("6h"))][-1] == "warning"
    only = timeline(m.bindings, m.all_events(), NOW, 3600, only="default/web-deployment")
    assert [s.kind for s in only] == ["running", "placed", "eviction"]
    assert [s.kind for s in timeline(m.bindings, m.all_events(), NOW, 3600, cluster="member9")] == []
    for uid, kind, name in (("t1", "Deployment", "web"), ("t2", "ResourceBinding", "web-deployment")):
        m.put_event(slim_event({"metadata": {"name": uid, "uid": uid}, "reason": "EvictionPerformed", "type": "Normal",
                                "message": "evicted from member1", "lastTimestamp": ts(35),
                                "involvedObject": {"kind": kind, "name": name, "namespace": "default"}}))
    evictions = [s for s in timeline(m.bindings, m.all_events(), NOW, 3600) if s.title == "EvictionPerformed"]
    assert len(evictions) == 1  # written on the binding and on its template: one step
    assert event_step_kind({"reason": "Unknown", "type": "Normal"}) == "info"
    assert [s.lane for s in steps] == [6, 4, 3, 2, 1, 0]  # one row of the axis per kind, in a failover's order
    assert axis_start_of([], NOW, 3600) == NOW - timedelta(seconds=60)
    with pytest.raises(ValueError, match="window"):
        parse_window("1y")


def test_a_one_time_token_opens_one_session_and_expires() -> None:
    s: Sessions[str] = Sessions(login_ttl=10, session_ttl=100)
    token = s.issue_login("viewer", now=0)
    assert s.redeem("other", now=1) is None
    session, user = s.redeem(token, now=1) or ("", "")
    assert user == "viewer" and s.user_of(session, now=50) == "viewer"
    assert s.redeem(token, now=2) is None  # spent
    assert s.user_of(session, now=101) is None  # expired
    late = s.issue_login("viewer", now=0)
    assert s.redeem(late, now=11) is None
    assert s.user_of("made-up", now=0) is None


def test_the_workloads_page_over_10000_bindings_renders_quickly_in_bounded_memory() -> None:
    m = DashboardModel()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(10_000):
        m.put_binding(slim_binding(binding(f"app-{i:05d}", namespace=f"ns-{i % 20}",
                                           clusters=(f"member{i % 100}",), health={f"member{i % 100}": "Healthy"})))
    per_binding = (tracemalloc.get_traced_memory()[0] - before) / 10_000
    tracemalloc.stop()
    assert per_binding < 4096, per_binding  # bytes: the slim binding and the model's indexes
    started = time.perf_counter()
    page = workload_page(m, WorkloadQuery(page=7, size=50), NOW)
    plain = time.perf_counter() - started
    started = time.perf_counter()
    found = workload_page(m, WorkloadQuery(search="app-0999", cluster="member99", size=50), NOW)
    searched = time.perf_counter() - started
    assert len(page.rows) == 50 and page.total == 10_000 and page.pages == 200
    assert found.matching == 1
    assert plain < 0.5 and searched < 0.5, (plain, searched)  # generous: a shared 2-core machine


def test_the_indexes_follow_bindings_that_move_and_go() -> None:
    m = DashboardModel()
    b = slim_binding(binding("web", clusters=("member1",), health={"member1": "Healthy"}))
    m.put_binding(b)
    assert m.placed == {"member1": 1} and m.moving == set() and not m.facts["default/web-deployment"].unhealthy
    task = {"fromCluster": "member1", "purgeMode": "Directly"}
    moved = slim_binding(binding("web", clusters=("member2",), tasks=[task], hist=history({"from": "member1"})))
    m.put_binding(moved)
    assert m.placed == {"member2": 1} and m.moving == {"default/web-deployment"}
    assert m.with_history == {"default/web-deployment"}
    assert m.facts["default/web-deployment"].clusters == {"member1", "member2"}  # placed, and evicted from
    m.remove_binding(moved)
    assert (m.placed, m.moving, m.with_history, m.facts) == ({}, set(), set(), {})
