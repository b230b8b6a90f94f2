"""Running totals of a member's summaries (flotilla.cluster.summary_totals): whatever sequence of adds, updates and
deletes of Nodes, Pods and workloads they are fed, they give exactly what ``summarize`` gives on the objects left."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.cluster import summary_totals
from flotilla.cluster.resources import (
    WORKLOAD_KINDS,
    Summaries,
    project_node,
    project_pod,
    project_workload,
    summarize,
)
from flotilla.cluster.summary_totals import ResourceSums, SummaryTotals

ZERO = {"cpu": "0", "ephemeral-storage": "0", "memory": "0", "pods": "0"}


# ============================================================================================ objects


def node(name: str, *, ready: str | None = "True", **allocatable: str) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": allocatable or {"cpu": "8", "memory": "32Gi", "pods": "110"}}
    if ready is not None:
        status["conditions"] = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
    return {"metadata": {"name": name}, "status": status}


def requests(**amounts: str) -> dict[str, Any]:
    return {"name": "c", "image": "nginx", "resources": {"requests": {k.replace("_", "-"): v for k, v in
                                                                      amounts.items()}}}


def pod(name: str, node_name: str | None, *containers: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers) or [requests(cpu="1")]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": {"phase": phase}}


def workload(kind: str, name: str, *containers: dict[str, Any], owner: str | None = None,
             status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "u",
                                    "controller": True}]
    obj = {"metadata": meta,
           "spec": {"template": {"spec": {"containers": list(containers) or [requests(cpu="1")]}}, **spec}}
    if status is not None:
        obj["status"] = status
    return obj


class Model:
    """The objects a member has (by key) and the totals fed the same changes."""

    def __init__(self) -> None:
        self.totals = SummaryTotals()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.workloads: dict[tuple[str, str, str], dict[str, Any]] = {}

    def node(self, key: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            self.nodes.pop(key, None)
            self.totals.remove_node(key)
        else:
            self.nodes[key] = project_node(obj)
            self.totals.put_node(key, self.nodes[key])

    def pod(self, key: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            self.pods.pop(key, None)
            self.totals.remove_pod(key)
        else:
            self.pods[key] = project_pod(obj)
            self.totals.put_pod(key, self.pods[key])

    def workload(self, group: str, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            self.workloads.pop((group, kind, key), None)
            self.totals.remove_workload(group, kind, key)
        else:
            self.workloads[group, kind, key] = project_workload(obj)
            self.totals.put_workload(group, kind, key, self.workloads[group, kind, key])

    def reference(self) -> Summaries:
        return summarize(self.nodes.values(), self.pods.values(),
                         [(group, kind, obj) for (group, kind, _), obj in self.workloads.items()])


# ============================================================================================ property


QUANTITIES = st.sampled_from(["0", "1", "250m", "1500m", "3", "64Mi", "2Gi", "1G", "0.5", "100k", "7"])
RESOURCES = st.sampled_from(["cpu", "memory", "ephemeral-storage", "pods", "nvidia.com/gpu", "hugepages-2Mi"])
RESOURCE_LISTS = st.dictionaries(RESOURCES, QUANTITIES, max_size=4)
CONTAINERS = st.builds(lambda req, lim: {"name": "c", "resources": {"requests": req, "limits": lim}},
                       RESOURCE_LISTS, RESOURCE_LISTS)
SMALL = st.none() | st.integers(min_value=-1, max_value=5)


@st.composite
def nodes(draw: st.DrawFn) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": draw(RESOURCE_LISTS)}
    ready = draw(st.sampled_from(["True", "False", "Unknown", None]))
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": "n"}, "status": status}


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(st.lists(CONTAINERS, min_size=1, max_size=2))}
    if draw(st.booleans()):
        spec["initContainers"] = draw(st.lists(CONTAINERS, max_size=1))
    if draw(st.booleans()):
        spec["overhead"] = draw(RESOURCE_LISTS)
    node_name = draw(st.sampled_from([None, "", "n1", "n2"]))
    if node_name is not None:
        spec["nodeName"] = node_name
    phase = draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", None]))
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec,
            "status": {"phase": phase} if phase else {}}


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": draw(st.lists(CONTAINERS, min_size=1, max_size=2))}}}
    for key in ("replicas", "parallelism", "completions"):
        value = draw(SMALL)
        if value is not None:
            spec[key] = value
    if draw(st.booleans()):
        spec["suspend"] = draw(st.booleans())
    status: dict[str, Any] = {}
    for key in ("desiredNumberScheduled", "succeeded"):
        value = draw(SMALL)
        if value is not None:
            status[key] = value
    finished = draw(st.sampled_from([None, "Complete", "Failed"]))
    if finished:
        status["conditions"] = [{"type": finished, "status": draw(st.sampled_from(["True", "False"]))}]
    meta: dict[str, Any] = {"name": "w", "namespace": "ns"}
    owner = draw(st.sampled_from([None, "Deployment", "StatefulSet"]))
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "controller": draw(st.booleans())}]
    return {"metadata": meta, "spec": spec, "status": status}


KEYS = st.sampled_from(["a", "b", "c"])
OPERATIONS = st.one_of(
    st.tuples(st.just("node"), KEYS, st.none() | nodes()),
    st.tuples(st.just("pod"), KEYS, st.none() | pods()),
    st.tuples(st.just("workload"), st.tuples(st.sampled_from(WORKLOAD_KINDS), KEYS), st.none() | workloads()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(OPERATIONS, max_size=40))
def test_totals_after_any_adds_updates_and_deletes_equal_summarize_of_the_objects_left(
        operations: list[tuple[str, Any, dict[str, Any] | None]]) -> None:
    model = Model()
    for what, key, obj in operations:
        if what == "node":
            model.node(key, obj)
        elif what == "pod":
            model.pod(key, obj)
        else:
            (group, kind), name = key
            model.workload(group, kind, name, obj)
        assert model.totals.summaries() == model.reference()


# ============================================================================================ focused


def test_the_first_pod_switches_from_workloads_to_pods_and_the_last_one_back() -> None:
    model = Model()
    model.node("n1", node("n1"))
    model.workload("apps", "Deployment", "default/web", workload("Deployment", "web", requests(cpu="500m"),
                                                                 replicas=4))
    assert not model.totals.summaries().from_pods
    assert model.totals.summaries().resource_summary["allocated"] == {**ZERO, "cpu": "2", "pods": "4"}

    model.pod("default/p", pod("p", None, requests(cpu="250m"), phase="Pending"))
    summary = model.totals.summaries()
    assert summary.from_pods  # one Pod: the workloads are not counted any more, never both
    assert summary.resource_summary["allocated"] == ZERO
    assert summary.resource_summary["allocating"] == {**ZERO, "cpu": "250m", "pods": "1"}
    assert summary == model.reference()

    model.pod("default/p", None)
    assert not model.totals.summaries().from_pods
    assert model.totals.summaries().resource_summary["allocated"] == {**ZERO, "cpu": "2", "pods": "4"}
    assert model.totals.summaries() == model.reference()


def test_a_finished_pod_still_means_the_member_is_measured_by_pods() -> None:
    model = Model()
    model.workload("apps", "Deployment", "default/web", workload("Deployment", "web", replicas=2))
    model.pod("default/done", pod("done", "n1", phase="Succeeded"))
    summary = model.totals.summaries()
    assert summary.from_pods
    assert summary.resource_summary["allocated"] == ZERO
    assert summary == model.reference()


def test_a_replicaset_controlled_by_a_deployment_is_left_out_until_it_is_orphaned() -> None:
    model = Model()
    model.workload("apps", "Deployment", "default/web", workload("Deployment", "web", replicas=3))
    model.workload("apps", "ReplicaSet", "default/web-1",
                   workload("ReplicaSet", "web-1", owner="Deployment", replicas=3))
    assert model.totals.summaries().resource_summary["allocated"] == {**ZERO, "cpu": "3", "pods": "3"}
    model.workload("apps", "ReplicaSet", "default/web-1", workload("ReplicaSet", "web-1", replicas=3))
    assert model.totals.summaries().resource_summary["allocated"] == {**ZERO, "cpu": "6", "pods": "6"}
    assert model.totals.summaries() == model.reference()


def test_a_job_counts_the_completions_still_missing_and_nothing_once_complete() -> None:
    model = Model()
    key = "default/batch"
    gpu = requests(cpu="1", **{"nvidia.com/gpu": "1"})
    model.workload("batch", "Job", key, workload("Job", "batch", gpu, parallelism=2, completions=4))
    assert model.totals.summaries().resource_summary["allocated"] == {**ZERO, "cpu": "2", "nvidia.com/gpu": "2",
                                                                      "pods": "2"}
    model.workload("batch", "Job", key, workload("Job", "batch", gpu, parallelism=2, completions=4,
                                                 status={"succeeded": 3}))
    assert model.totals.summaries().resource_summary["allocated"] == {**ZERO, "cpu": "1", "nvidia.com/gpu": "1",
                                                                      "pods": "1"}
    model.workload("batch", "Job", key, workload("Job", "batch", gpu, parallelism=2, completions=4, status={
        "succeeded": 4, "conditions": [{"type": "Complete", "status": "True"}]}))
    assert model.totals.summaries().resource_summary["allocated"] == ZERO  # the GPU is no longer listed at all
    assert model.totals.summaries() == model.reference()


def test_a_notready_node_leaves_readynum_and_allocatable() -> None:
    model = Model()
    model.node("a", node("a", cpu="8", memory="32Gi"))
    model.node("b", node("b", cpu="4", memory="16Gi"))
    summary = model.totals.summaries()
    assert summary.node_summary == {"totalNum": 2, "readyNum": 2}
    assert summary.resource_summary["allocatable"] == {"cpu": "12", "memory": "48Gi"}

    model.node("b", node("b", ready="False", cpu="4", memory="16Gi"))
    summary = model.totals.summaries()
    assert summary.node_summary == {"totalNum": 2, "readyNum": 1}
    assert summary.resource_summary["allocatable"] == {"cpu": "8", "memory": "32Gi"}

    model.node("a", node("a", ready=None))  # no Ready condition at all: not Ready
    summary = model.totals.summaries()
    assert summary.node_summary == {"totalNum": 2}  # readyNum 0 is left out
    assert "allocatable" not in summary.resource_summary  # omitempty
    assert summary == model.reference()


def test_removing_everything_goes_back_to_the_empty_summaries() -> None:
    model = Model()
    empty = model.totals.summaries()
    assert empty == summarize([], [])
    assert empty.node_summary == {}
    assert empty.resource_summary == {"allocated": ZERO, "allocating": ZERO}
    model.node("a", node("a", **{"cpu": "8", "nvidia.com/gpu": "2"}))
    model.pod("default/p", pod("p", "a", requests(cpu="1500m", memory="1Gi", **{"hugepages-2Mi": "4Mi"})))
    model.workload("apps", "StatefulSet", "default/db", workload("StatefulSet", "db", replicas=2))
    assert model.totals.summaries() != empty
    model.node("a", None)
    model.pod("default/p", None)
    model.workload("apps", "StatefulSet", "default/db", None)
    assert model.totals.summaries() == empty  # no leftover "0" entries of resources nobody names any more
    assert model.totals.summaries() == model.reference()


def test_a_changed_pod_template_changes_the_requests_and_an_unchanged_or_repeated_one_is_not_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model = Model()
    key = "default/web"
    model.workload("apps", "Deployment", key, workload("Deployment", "web", requests(cpu="1"), replicas=2))
    assert model.totals.summaries().resource_summary["allocated"]["cpu"] == "2"
    model.workload("apps", "Deployment", key, workload("Deployment", "web", requests(cpu="2"), replicas=2))
    assert model.totals.summaries().resource_summary["allocated"]["cpu"] == "4"

    def unexpected(pod_spec: Any) -> Any:
        raise AssertionError("the requests of an unchanged pod template were computed again")

    model.workload("apps", "Deployment", "default/other", workload("Deployment", "other", requests(cpu="3")))
    monkeypatch.setattr(summary_totals, "pod_requests", unexpected)
    model.workload("apps", "Deployment", key, workload("Deployment", "web", requests(cpu="2"), replicas=5,
                                                       status={"conditions": [{"type": "Available",
                                                                               "status": "True"}]}))
    assert model.totals.summaries().resource_summary["allocated"]["cpu"] == "13"
    # a new workload with the same template as the last one computed
    model.workload("apps", "StatefulSet", "default/db", workload("StatefulSet", "db", requests(cpu="3")))
    assert model.totals.summaries().resource_summary["allocated"]["cpu"] == "16"
    assert model.totals.summaries() == model.reference()


def test_put_and_remove_tell_whether_the_totals_changed() -> None:
    totals = SummaryTotals()
    assert totals.put_node("a", node("a"))
    assert not totals.put_node("a", node("a"))  # the same share
    assert totals.put_node("b", node("b", ready="False"))  # a new node: totalNum changes
    assert not totals.put_node("b", node("b", ready="False", cpu="64"))  # a NotReady node offers nothing anyway
    assert totals.remove_node("b")
    assert not totals.remove_node("b")  # unknown key
    assert totals.put_pod("default/p", pod("p", "a"))
    assert not totals.put_pod("default/p", pod("p", "a"))
    assert totals.put_workload("apps", "Deployment", "default/w", workload("Deployment", "w", replicas=1))
    assert not totals.remove_workload("apps", "StatefulSet", "default/w")  # another kind
    assert totals.clear_workloads()
    assert not totals.clear_workloads()


def test_resource_sums_list_a_resource_while_a_share_names_it_even_at_zero() -> None:
    sums = ResourceSums()
    sums.add({"cpu": Fraction(1), "nvidia.com/gpu": Fraction(0)})
    sums.add({"cpu": Fraction(-1)})
    assert sums.resource_list() == {"cpu": "0", "nvidia.com/gpu": "0"}
    sums.subtract({"cpu": Fraction(1), "nvidia.com/gpu": Fraction(0)})
    assert sums.resource_list(["pods"]) == {"cpu": "-1", "pods": "0"}
    sums.subtract({"cpu": Fraction(-1)})
    assert sums.resource_list() == {}
    assert sums.amounts == {} and sums.named == {}
