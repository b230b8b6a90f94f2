"""Status collection as pure functions: identifiers, manifest statuses, aggregated status, FullyApplied, D14
(stale health is Unknown)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from flotilla.cluster.health import is_ready
from flotilla.kube.conditions import set_condition
from flotilla.propagation import status as st

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
LATER = datetime(2025, 1, 2, 3, 9, 0, tzinfo=UTC)
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "nginx"}
DEPLOY_STATUS = {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2,
                 "observedGeneration": 1, "generation": 1, "resourceTemplateGeneration": 1}


def manifest(kind: str = "Deployment", name: str = "nginx", ns: str | None = "default",
             api_version: str = "apps/v1") -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": api_version, "kind": kind, "metadata": md}


def identifier(ordinal: int = 0, kind: str = "Deployment", name: str = "nginx", ns: str = "default",
               group: str = "apps", version: str = "v1") -> dict[str, Any]:
    return {"ordinal": ordinal, "group": group, "version": version, "kind": kind, "resource": "",
            "namespace": ns, "name": name}


def work(cluster: str, *, applied: str | None = "True", message: str = "", health: str | None = "Healthy",
         status: dict[str, Any] | None = None, deleting: bool = False,
         manifests: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "nginx-687f7fb96f", "namespace": f"karmada-es-{cluster}"}
    if deleting:
        md["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    w: dict[str, Any] = {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "metadata": md,
                         "spec": {"workload": {"manifests": manifests if manifests is not None else [manifest()]}},
                         "status": {}}
    if applied is not None:
        w["status"]["conditions"] = [{"type": "Applied", "status": applied, "reason": "x", "message": message}]
    if health is not None:
        entry: dict[str, Any] = {"identifier": identifier(), "health": health}
        entry["status"] = status if status is not None else dict(DEPLOY_STATUS)
        w["status"]["manifestStatuses"] = [entry]
    return w


def cluster(name: str, ready: str | None) -> dict[str, Any]:
    c: dict[str, Any] = {"metadata": {"name": name}, "status": {}}
    if ready is not None:
        c["status"]["conditions"] = [{"type": "Ready", "status": ready}]
    return c


# ============================================================================================ small helpers


def test_split_api_version_and_cluster_of_work() -> None:
    assert st.split_api_version("apps/v1") == ("apps", "v1")
    assert st.split_api_version("v1") == ("", "v1")
    assert st.split_api_version("flink.apache.org/v1beta1") == ("flink.apache.org", "v1beta1")
    assert st.work_cluster(work("member1")) == "member1"
    assert st.work_cluster({"metadata": {"namespace": "default"}}) is None
    assert st.work_cluster({"metadata": {"namespace": "karmada-es-"}}) is None


@pytest.mark.parametrize(("ready", "expected"), [("True", True), ("False", False), ("Unknown", False), (None, False)])
def test_cluster_ready(ready: str | None, expected: bool) -> None:
    assert is_ready(cluster("m", ready)) is expected


def test_cluster_ready_missing_cluster_is_not_ready_and_flip_detection() -> None:
    assert is_ready(None) is False
    assert st.ready_changed(cluster("m", "True"), cluster("m", "False"))
    assert st.ready_changed(cluster("m", "Unknown"), cluster("m", "True"))
    assert not st.ready_changed(cluster("m", "False"), cluster("m", "Unknown"))


def test_work_applied_reads_the_applied_condition() -> None:
    assert st.work_applied(work("m")) == (True, "")
    assert st.work_applied(work("m", applied="False", message="boom")) == (False, "boom")
    assert st.work_applied(work("m", applied="Unknown", message="?")) == (False, "?")
    assert st.work_applied(work("m", applied=None)) == (False, "")


def test_work_ref_of_member_object() -> None:
    obj = {"metadata": {"annotations": {"work.karmada.io/namespace": "karmada-es-m1",
                                        "work.karmada.io/name": "nginx-687f7fb96f"}}}
    assert st.work_ref_of(obj) == ("karmada-es-m1", "nginx-687f7fb96f")
    assert st.work_ref_of({"metadata": {"annotations": {"work.karmada.io/name": "x"}}}) is None
    assert st.work_ref_of({"metadata": {}}) is None


# ============================================================================================ Work side


def test_identifier_is_built_from_the_manifest_index() -> None:
    manifests = [manifest("ConfigMap", "cfg", api_version="v1"), manifest()]
    obj = manifest()
    assert st.build_identifier(manifests, obj, "deployments") == {
        "ordinal": 1, "group": "apps", "version": "v1", "kind": "Deployment", "resource": "deployments",
        "namespace": "default", "name": "nginx"}
    core = st.build_identifier(manifests, manifest("ConfigMap", "cfg", api_version="v1"))
    assert core is not None and core["group"] == "" and core["version"] == "v1" and core["ordinal"] == 0
    assert st.build_identifier(manifests, manifest(name="other")) is None
    assert st.build_identifier(manifests, manifest(ns="elsewhere")) is None


def test_identifier_of_a_cluster_scoped_object() -> None:
    cr = manifest("ClusterRole", "reader", ns=None, api_version="rbac.authorization.k8s.io/v1")
    ident = st.build_identifier([cr], cr)
    assert ident is not None and ident["namespace"] == "" and ident["group"] == "rbac.authorization.k8s.io"


def test_manifest_status_entry_leaves_out_a_missing_status() -> None:
    assert st.manifest_status_entry(identifier(), None, "Healthy") == {"identifier": identifier(), "health": "Healthy"}
    entry = st.manifest_status_entry(identifier(), {"replicas": 1}, "Unhealthy")
    assert entry["status"] == {"replicas": 1} and entry["health"] == "Unhealthy"


def test_merge_manifest_statuses_replaces_the_same_object_and_keeps_others() -> None:
    manifests = [manifest("ConfigMap", "cfg", api_version="v1"), manifest()]
    cfg = {"identifier": identifier(0, "ConfigMap", "cfg", group="", version="v1"), "health": "Healthy"}
    old = {"identifier": identifier(1), "status": {"replicas": 1}, "health": "Unhealthy"}
    new = {"identifier": identifier(1), "status": {"replicas": 2}, "health": "Healthy"}
    assert st.merge_manifest_statuses([old, cfg], new, manifests) == [cfg, new]


def test_merge_manifest_statuses_drops_entries_of_objects_no_longer_in_the_work() -> None:
    gone = {"identifier": identifier(0, "ConfigMap", "cfg", group="", version="v1"), "health": "Healthy"}
    moved = {"identifier": identifier(3), "health": "Healthy"}  # ordinal past the end
    new = {"identifier": identifier(0), "health": "Healthy"}
    assert st.merge_manifest_statuses([gone, moved], new, [manifest()]) == [new]
    assert st.merge_manifest_statuses(None, new, [manifest()]) == [new]


def test_identifier_matching_ignores_resource_but_not_ordinal() -> None:
    ident = identifier(0) | {"resource": "deployments"}
    assert st.identifier_matches(ident, 0, "apps/v1", "Deployment", "default", "nginx")
    assert not st.identifier_matches(ident, 1, "apps/v1", "Deployment", "default", "nginx")
    assert not st.identifier_matches(ident, 0, "apps/v1beta1", "Deployment", "default", "nginx")
    assert not st.identifier_matches(ident, -1, "apps/v1", "Deployment", "default", "nginx")
    assert not st.identifier_matches(None, 0, "apps/v1", "Deployment", "default", "nginx")


def test_work_report_patch_records_the_copies_with_the_conditions_left_in_one_status() -> None:
    w = work("m1", applied=None, health=None)
    applied = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "ok"}
    patch = st.work_report_patch(w, [(manifest(), "deployments", {"replicas": 2}, "Healthy")], [applied],
                                 "2026-01-01T00:00:00Z")
    assert patch is not None
    assert patch["manifestStatuses"] == [{"identifier": {**identifier(), "resource": "deployments"},
                                          "status": {"replicas": 2}, "health": "Healthy"}]
    assert patch["conditions"] == [{**applied, "lastTransitionTime": "2026-01-01T00:00:00Z"}]


def test_work_report_patch_leaves_out_what_is_already_there() -> None:
    w = work("m1")  # applied, with the same status recorded
    w["status"]["conditions"][0]["lastTransitionTime"] = "2025-01-01T00:00:00Z"
    entry = w["status"]["manifestStatuses"][0]
    same = [(manifest(), "", entry["status"], "Healthy")]
    assert st.work_report_patch(w, same) is None
    assert st.work_report_patch(w, same, [{"type": "Applied", "status": "True", "reason": "x", "message": ""}],
                                "t") is None
    conditions_only = st.work_report_patch(w, [], [{"type": "Dispatching", "status": "True", "reason": "d",
                                                    "message": ""}], "t")
    assert conditions_only is not None and set(conditions_only) == {"conditions"}
    assert st.work_report_patch(w, [(manifest(name="other"), "", {}, "Healthy")]) is None  # not carried


def test_reapply_patch_stamps_the_annotation() -> None:
    patch = st.reapply_patch(NOW)
    assert patch == {"metadata": {"annotations": {st.REAPPLY_REQUESTED_ANNOTATION: "2025-01-02T03:04:05.000000Z"}}}
    assert st.REAPPLY_REQUESTED_ANNOTATION == "work.flotilla.io/reapply-requested"


def test_work_informer_sync_trigger_ignores_manifest_status_writes() -> None:
    old = work("m", health="Unhealthy")
    old["metadata"]["generation"] = 1
    new = work("m", health="Healthy")
    new["metadata"]["generation"] = 1
    assert not st.work_needs_informer_sync(old, new)
    assert st.work_needs_informer_sync(work("m", applied="False"), work("m"))
    bumped = work("m")
    bumped["metadata"]["generation"] = 2
    assert st.work_needs_informer_sync(old, bumped)
    deleting = work("m", deleting=True)
    deleting["metadata"]["generation"] = 1
    assert st.work_needs_informer_sync(new, deleting)


# ============================================================================================ aggregated status


def test_applied_work_gives_its_status_and_health() -> None:
    items = st.build_aggregated_status([work("member1")], REF, {"member1"})
    assert items == [{"clusterName": "member1", "applied": True, "status": DEPLOY_STATUS, "health": "Healthy"}]


def test_not_applied_work_gives_the_message_and_unknown_health_without_status() -> None:
    items = st.build_aggregated_status([work("m1", applied="False", message="Failed to apply all manifests (0/1)")],
                                       REF, {"m1"})
    assert items == [{"clusterName": "m1", "appliedMessage": "Failed to apply all manifests (0/1)",
                      "health": "Unknown"}]
    items = st.build_aggregated_status([work("m1", applied=None)], REF, {"m1"})
    assert items == [{"clusterName": "m1", "health": "Unknown"}]  # applied: false is omitted, as Karmada does


def test_applied_work_without_matching_manifest_status_is_unknown() -> None:
    items = st.build_aggregated_status([work("m1", health=None)], REF, {"m1"})
    assert items == [{"clusterName": "m1", "applied": True, "health": "Unknown"}]
    other = work("m1")
    other["status"]["manifestStatuses"][0]["identifier"]["name"] = "other"
    assert st.build_aggregated_status([other], REF, {"m1"})[0]["health"] == "Unknown"
    # the template is not among the manifests: applied, but nothing to report
    assert st.build_aggregated_status([work("m1", manifests=[manifest(name="x")])], REF, {"m1"}) == [
        {"clusterName": "m1", "applied": True, "health": "Unknown"}]


def test_deleting_works_are_left_out_and_items_are_sorted_by_cluster() -> None:
    works = [work("m3"), work("m1"), work("m2", deleting=True), work("m0", health="Unhealthy")]
    items = st.build_aggregated_status(works, REF, lambda c: True)
    assert [i["clusterName"] for i in items] == ["m0", "m1", "m3"]
    assert items[0]["health"] == "Unhealthy"


def test_d14_stale_health_is_unknown_while_cluster_not_ready() -> None:
    works = [work("member1"), work("member2")]
    ready = st.build_aggregated_status(works, REF, {"member1", "member2"})
    assert [i["health"] for i in ready] == ["Healthy", "Healthy"]

    items = st.build_aggregated_status(works, REF, {"member2"})  # member1 is not Ready
    assert items[0] == {"clusterName": "member1", "applied": True, "status": DEPLOY_STATUS, "health": "Unknown"}
    assert items[1]["health"] == "Healthy"
    # the last status is kept, and the binding says which clusters are stale
    stale = st.stale_clusters(items, {"member2"})
    assert stale == ["member1"]
    cond = st.status_up_to_date_condition(stale)
    assert cond["type"] == "StatusUpToDate" and cond["status"] == "False" and cond["reason"] == "ClusterNotReady"
    assert "member1" in cond["message"] and "Unknown" in cond["message"]
    fresh = st.status_up_to_date_condition(st.stale_clusters(ready, {"member1", "member2"}))
    assert fresh["status"] == "True" and fresh["reason"] == "AllClustersReady"


def test_d14_applies_to_unhealthy_copies_and_to_clusters_that_are_gone() -> None:
    items = st.build_aggregated_status([work("m1", health="Unhealthy")], REF, set())
    assert items[0]["health"] == "Unknown" and items[0]["status"] == DEPLOY_STATUS
    assert st.stale_clusters(items, set()) == ["m1"]


def test_d14_does_not_change_applied_or_fully_applied() -> None:
    spec = {"clusters": [{"name": "m1", "replicas": 1}]}
    items = st.build_aggregated_status([work("m1")], REF, set())
    assert items[0]["applied"] is True
    assert st.fully_applied_condition(spec, items)["status"] == "True"


# ============================================================================================ FullyApplied


def test_expected_clusters_include_required_by_and_non_directly_eviction_tasks() -> None:
    spec = {
        "clusters": [{"name": "a"}],
        "requiredBy": [{"namespace": "default", "name": "x", "clusters": [{"name": "b"}]}],
        "gracefulEvictionTasks": [{"fromCluster": "c", "purgeMode": "Gracefully"},
                                  {"fromCluster": "d", "purgeMode": "Directly"},
                                  {"fromCluster": "e"}],
    }
    assert st.expected_clusters(spec) == {"a", "b", "c", "e"}


def test_fully_applied_true_when_every_expected_cluster_is_applied() -> None:
    spec = {"clusters": [{"name": "m1"}, {"name": "m2"}]}
    items = st.build_aggregated_status([work("m1"), work("m2", health="Unhealthy")], REF, {"m1", "m2"})
    cond = st.fully_applied_condition(spec, items)
    assert cond == {"type": "FullyApplied", "status": "True", "reason": "FullyAppliedSuccess",
                    "message": "All works have been successfully applied"}


@pytest.mark.parametrize(("spec", "works", "fragment"), [
    ({}, [], "not scheduled"),
    ({"clusters": [{"name": "m1"}, {"name": "m2"}]}, [work("m1")], "no Work yet for m2"),
    ({"clusters": [{"name": "m1"}]}, [work("m1", applied="False")], "not applied in m1"),
    ({"clusters": [{"name": "m1"}]}, [work("m1"), work("m9")], "no longer targeted: m9"),
    ({"clusters": [{"name": "m1"}]}, [work("m9")], "no Work yet for m1"),
])
def test_fully_applied_false(spec: dict[str, Any], works: list[dict[str, Any]], fragment: str) -> None:
    items = st.build_aggregated_status(works, REF, lambda c: True)
    cond = st.fully_applied_condition(spec, items)
    assert cond["status"] == "False" and cond["reason"] == "FullyAppliedFailed"
    assert fragment in cond["message"]


def test_a_written_fully_applied_true_is_overstated_while_a_target_cluster_lacks_an_applied_work() -> None:
    true = {"conditions": [{"type": "FullyApplied", "status": "True"}]}
    false = {"conditions": [{"type": "FullyApplied", "status": "False"}]}
    before = {"clusters": [{"name": "m1"}]}
    failed_over = {"clusters": [{"name": "m2"}], "gracefulEvictionTasks": [{"fromCluster": "m1"}]}
    old_items = st.build_aggregated_status([work("m1")], REF, lambda c: True)
    assert not st.fully_applied_overstated(true, before, old_items)
    # the new cluster has no Work yet, then a Work not applied yet: True no longer holds
    assert st.fully_applied_overstated(true, failed_over, old_items)
    not_applied = st.build_aggregated_status([work("m1"), work("m2", applied=None, health=None)], REF,
                                             lambda c: True)
    assert st.fully_applied_overstated(true, failed_over, not_applied)
    both = st.build_aggregated_status([work("m1"), work("m2")], REF, lambda c: True)
    assert not st.fully_applied_overstated(true, failed_over, both)
    # nothing overstated when the binding does not say True
    assert not st.fully_applied_overstated(false, failed_over, old_items)
    assert not st.fully_applied_overstated({}, failed_over, old_items)
    assert not st.fully_applied_overstated(None, failed_over, old_items)


def test_expected_clusters_gained_by_a_spec_change() -> None:
    before = {"clusters": [{"name": "m1"}]}
    failed_over = {"clusters": [{"name": "m2"}], "gracefulEvictionTasks": [{"fromCluster": "m1"}]}
    assert st.expected_clusters_gained(before, failed_over) == {"m2"}
    assert st.expected_clusters_gained(failed_over, {"clusters": [{"name": "m2"}]}) == set()
    assert st.fully_applied_written({"conditions": [{"type": "FullyApplied", "status": "True"}]})
    assert not st.fully_applied_written({"conditions": [{"type": "Scheduled", "status": "True"}]})


# ============================================================================================ conditions and patches


def test_set_condition_moves_the_transition_time_only_on_a_status_change() -> None:
    scheduled = {"type": "Scheduled", "status": "True", "reason": "Success", "message": "ok",
                 "lastTransitionTime": "2024-01-01T00:00:00Z"}
    conds = set_condition([scheduled], {"type": "FullyApplied", "status": "False", "reason": "r", "message": "m"},
                             NOW)
    assert conds[0] == scheduled
    assert conds[1]["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    same = set_condition(conds, {"type": "FullyApplied", "status": "False", "reason": "r2", "message": "m2"}, LATER)
    assert same[1]["lastTransitionTime"] == "2025-01-02T03:04:05Z" and same[1]["reason"] == "r2"
    flipped = set_condition(same, {"type": "FullyApplied", "status": "True", "reason": "ok", "message": ""}, LATER)
    assert flipped[1]["lastTransitionTime"] == "2025-01-02T03:09:00Z"


def test_binding_status_patch_touches_only_aggregated_status_and_conditions() -> None:
    status = {"schedulerObservedGeneration": 3, "lastScheduledTime": "2024-01-01T00:00:00Z",
              "conditions": [{"type": "Scheduled", "status": "True", "reason": "Success", "message": "",
                              "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    items = st.build_aggregated_status([work("m1")], REF, {"m1"})
    conds = [st.fully_applied_condition({"clusters": [{"name": "m1"}]}, items), st.status_up_to_date_condition([])]
    patch = st.binding_status_patch(status, items, conds, NOW)
    assert patch is not None and set(patch) == {"aggregatedStatus", "conditions"}
    assert [c["type"] for c in patch["conditions"]] == ["Scheduled", "FullyApplied", "StatusUpToDate"]
    applied = dict(status, aggregatedStatus=patch["aggregatedStatus"], conditions=patch["conditions"])
    assert st.binding_status_patch(applied, items, conds, LATER) is None


def test_binding_status_patch_removes_an_emptied_aggregated_status() -> None:
    items = st.build_aggregated_status([work("m1")], REF, {"m1"})
    conds = [st.status_up_to_date_condition([])]
    status = {"aggregatedStatus": items, "conditions": set_condition([], conds[0], NOW)}
    assert st.binding_status_patch(status, [], conds, NOW) == {"aggregatedStatus": None}
    assert st.binding_status_patch({"conditions": status["conditions"]}, [], conds, NOW) is None


# ============================================================================================ triggers


def binding(generation: int, scheduled: bool, rv: str = "1") -> dict[str, Any]:
    b: dict[str, Any] = {"metadata": {"generation": generation}, "spec": {"resource": {"resourceVersion": rv}},
                         "status": {}}
    if scheduled:
        b["status"]["lastScheduledTime"] = "2025-01-01T00:00:00Z"
    return b


def test_binding_triggers() -> None:
    assert not st.binding_needs_sync(None, binding(1, False))
    assert st.binding_needs_sync(None, binding(1, True))
    assert not st.binding_needs_sync(binding(1, True), binding(1, True))  # status-only update
    assert st.binding_needs_sync(binding(1, True), binding(2, True))
    assert st.binding_needs_sync(binding(1, False), binding(1, True))
    assert st.binding_needs_sync(binding(1, True), binding(1, True, rv="2"))
    assert not st.binding_needs_sync(binding(1, False), binding(2, False))


def test_work_triggers_and_binding_keys() -> None:
    a, b = work("m1", health="Unhealthy"), work("m1")
    assert st.work_status_changed(a, b)
    assert not st.work_status_changed(b, work("m1"))
    assert st.work_status_changed(b, work("m1", deleting=True))
    rb = {"metadata": {"annotations": {"resourcebinding.karmada.io/namespace": "default",
                                       "resourcebinding.karmada.io/name": "nginx-deployment"}}}
    crb = {"metadata": {"annotations": {"clusterresourcebinding.karmada.io/name": "reader-clusterrole"}}}
    assert st.binding_key_for_work(rb) == "rb|default|nginx-deployment"
    assert st.binding_key_for_work(crb) == "crb|reader-clusterrole"
    assert st.binding_key_for_work({"metadata": {}}) is None


def test_template_status_changed() -> None:
    assert not st.template_status_changed({"status": {"replicas": 1}}, {"status": {"replicas": 1}})
    assert st.template_status_changed({"status": {"replicas": 1}}, {"status": {"replicas": 2}})
    assert st.template_status_changed({}, {"status": {}})


def _work(conditions: list[dict[str, Any]] | None = None, reports: list[str] | None = None,
          deleting: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "w", "namespace": "karmada-es-m2", "uid": "u-1"}
    if deleting:
        md["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if conditions is not None:
        status["conditions"] = conditions
    if reports is not None:
        status["manifestStatuses"] = [{"identifier": {"ordinal": i}, "health": h} for i, h in enumerate(reports)]
    return {"metadata": md, "status": status}


APPLIED = [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": ""}]
NOT_APPLIED = [{"type": "Applied", "status": "False", "reason": "AppliedFailed", "message": "boom"}]


def test_a_copy_still_coming_up_is_a_starting_step_and_its_first_healthy_or_a_failure_is_not() -> None:
    new, applied = _work(), _work(APPLIED)
    assert st.work_status_starting(new, applied)  # applied, no report yet
    assert st.work_status_starting(applied, _work(APPLIED, ["Unknown"]))
    assert st.work_status_starting(_work(APPLIED, ["Unknown"]), _work(APPLIED, ["Unhealthy"]))
    assert not st.work_status_starting(_work(APPLIED, ["Unhealthy"]), _work(APPLIED, ["Healthy"]))  # first Healthy
    assert not st.work_status_starting(_work(APPLIED, ["Healthy"]), _work(APPLIED, ["Unhealthy"]))  # was Healthy
    assert not st.work_status_starting(new, _work(NOT_APPLIED))  # a failed apply
    assert not st.work_status_starting(applied, _work(APPLIED, deleting=True))


def test_a_work_awaits_its_first_status_until_it_has_an_applied_condition() -> None:
    assert st.work_awaits_first_status(_work()) == "u-1"
    assert st.work_awaits_first_status(_work(APPLIED)) is None
    assert st.work_awaits_first_status(_work(NOT_APPLIED)) is None
    assert st.work_awaits_first_status(_work(deleting=True)) is None


def test_clusters_without_work_are_the_targets_the_binding_controller_has_still_to_serve() -> None:
    spec = {"clusters": [{"name": "m1"}, {"name": "m2"}, {"name": "m3"}]}
    works = [work("m1"), work("m2", deleting=True), work("m4")]
    assert st.clusters_without_work(spec, works) == {"m2", "m3"}
    assert st.clusters_without_work(spec, [work("m1"), work("m2"), work("m3")]) == set()
    assert st.clusters_without_work({}, works) == set()


def test_an_applied_work_awaits_its_first_report_until_it_has_manifest_statuses() -> None:
    waiting = work("m1", health=None)
    waiting["metadata"]["uid"] = "u1"
    assert st.work_awaits_first_report(waiting) == "u1"
    assert st.work_awaits_first_report(work("m1")) is None  # reported
    assert st.work_awaits_first_report(work("m1", applied="False", health=None)) is None  # not applied
    assert st.work_awaits_first_report(work("m1", applied=None, health=None)) is None  # no first status yet
    assert st.work_awaits_first_report(work("m1", health=None, deleting=True)) is None


def test_awaited_reports_name_the_missing_works_the_first_statuses_and_the_first_reports() -> None:
    spec = {"clusters": [{"name": "m1"}, {"name": "m2"}, {"name": "m3"}, {"name": "m4"}]}
    no_status = work("m2", applied=None, health=None)
    no_status["metadata"]["uid"] = "u2"
    no_report = work("m3", health=None)
    no_report["metadata"]["uid"] = "u3"
    reported = work("m4")
    assert st.awaited_reports(spec, [no_status, no_report, reported]) == {
        "cluster:m1": st.AWAIT_WORK, "u2": st.AWAIT_WORK, "u3": st.AWAIT_REPORT}
    assert st.awaited_reports({"clusters": [{"name": "m4"}]}, [reported]) == {}
