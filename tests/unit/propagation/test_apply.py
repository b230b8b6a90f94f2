"""Applying manifests to a member (flotilla.propagation.apply): create/update/refuse, Retain, deletion."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.cluster.health import is_ready as cluster_ready
from flotilla.interpreter import ResourceInterpreter
from flotilla.kube.conditions import set_conditions
from flotilla.propagation.apply import (
    AppliedRecord,
    ApplyAction,
    DeleteAction,
    LazyRecord,
    WorkDeletion,
    applied_condition,
    content_changed,
    content_digest,
    decide_apply,
    decide_delete,
    dispatching_condition,
    is_managed,
    object_key,
    preserved_manifest,
    record_after_write,
    retain_cluster_fields,
    retain_metadata,
    work_deletion_action,
)
from flotilla.propagation.works import record_managed_annotations, record_managed_labels

INTERP = ResourceInterpreter()


def desired(**annotations: str) -> dict[str, Any]:
    m = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default",
                     "labels": {"app": "nginx", L.MANAGED_LABEL: "true", L.WORK_PERMANENT_ID_LABEL: "w1"},
                     "annotations": {L.WORK_NAME_ANNOTATION: "nginx-687f7fb96f",
                                     L.WORK_NAMESPACE_ANNOTATION: "karmada-es-member1",
                                     L.CONFLICT_RESOLUTION_ANNOTATION: "abort", **annotations}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}}},
    }
    record_managed_annotations(m)
    record_managed_labels(m)
    return m


def observed_from(d: dict[str, Any], rv: str = "10", **changes: Any) -> dict[str, Any]:
    """What a member returns for ``d``: server fields, status, plus ``changes`` merged into metadata."""
    o = copy.deepcopy(d)
    o["metadata"].update(uid="m-uid", resourceVersion=rv, generation=1, creationTimestamp="2024-01-01T00:00:00Z")
    for k, v in changes.items():
        o["metadata"][k] = v
    o["status"] = {"replicas": 2}
    return o


def unmanaged() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "resourceVersion": "5", "labels": {"app": "own"}},
            "spec": {"replicas": 9}}


# ------------------------------------------------------------------------------- create / update


def test_absent_object_is_created_as_is() -> None:
    d = desired()
    decision = decide_apply(d, None, cluster="member1", interpreter=INTERP)
    assert decision.action is ApplyAction.CREATE and decision.obj == d and decision.obj is not d


def test_unmanaged_object_is_refused_unless_overwrite() -> None:
    decision = decide_apply(desired(), unmanaged(), cluster="member1", interpreter=INTERP)
    assert decision.action is ApplyAction.REFUSE and decision.obj is None
    assert decision.message == (
        "resource(kind=Deployment, default/nginx) already exists in the cluster member1 and the "
        "work.karmada.io/conflict-resolution strategy value is empty, Karmada will not manage this resource")
    overwrite = desired(**{L.CONFLICT_RESOLUTION_ANNOTATION: "overwrite"})
    decision = decide_apply(overwrite, unmanaged(), cluster="member1", interpreter=INTERP)
    assert decision.action is ApplyAction.UPDATE
    assert decision.obj is not None
    assert decision.obj["spec"]["replicas"] == 2
    assert decision.obj["metadata"]["resourceVersion"] == "5"
    assert decision.obj["metadata"]["labels"]["app"] == "nginx"  # the desired value wins over the member's


def test_same_content_is_unchanged() -> None:
    d = desired()
    decision = decide_apply(d, observed_from(d), cluster="member1", interpreter=INTERP)
    assert decision.action is ApplyAction.UNCHANGED


def test_changed_content_is_updated_keeping_member_owned_fields() -> None:
    d = desired()
    old = copy.deepcopy(d)
    old["spec"]["replicas"] = 5
    o = observed_from(old, finalizers=["member.io/f"], ownerReferences=[{"kind": "X", "name": "y"}])
    o["metadata"]["labels"]["member-label"] = "m"
    o["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "3"
    decision = decide_apply(d, o, cluster="member1", interpreter=INTERP)
    assert decision.action is ApplyAction.UPDATE and decision.obj is not None
    meta = decision.obj["metadata"]
    assert meta["resourceVersion"] == "10"
    assert meta["finalizers"] == ["member.io/f"] and meta["ownerReferences"] == [{"kind": "X", "name": "y"}]
    assert meta["labels"]["member-label"] == "m"
    assert meta["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert decision.obj["spec"]["replicas"] == 2
    assert "status" not in decision.obj


def test_keys_karmada_no_longer_sets_are_removed_from_the_member() -> None:
    before = desired(**{"old-annotation": "x"})
    before["metadata"]["labels"]["old-label"] = "y"
    record_managed_annotations(before)
    record_managed_labels(before)
    o = observed_from(before)
    o["metadata"]["labels"]["member-only"] = "z"
    now = desired()
    retained = retain_metadata(now, o)
    assert "old-label" not in retained["metadata"]["labels"]
    assert "old-annotation" not in retained["metadata"]["annotations"]
    assert retained["metadata"]["labels"]["member-only"] == "z"
    decision = decide_apply(now, o, cluster="member1", interpreter=INTERP)
    assert decision.action is ApplyAction.UPDATE


def test_retain_cluster_fields_drops_empty_member_fields() -> None:
    d = desired()
    d["metadata"]["finalizers"] = ["from-template"]
    out = retain_cluster_fields(d, {"metadata": {"resourceVersion": "3"}})
    assert out["metadata"]["resourceVersion"] == "3" and "finalizers" not in out["metadata"]
    assert d["metadata"]["finalizers"] == ["from-template"]


def test_interpreter_retain_keeps_member_replicas() -> None:
    d = desired()
    d["metadata"]["labels"][L.RETAIN_REPLICAS_LABEL] = "true"
    member = copy.deepcopy(d)
    member["spec"]["replicas"] = 7  # scaled in the member (e.g. by an HPA)
    decision = decide_apply(d, observed_from(member), cluster="member1", interpreter=INTERP)
    assert decision.action is ApplyAction.UNCHANGED
    assert decision.obj is not None and decision.obj["spec"]["replicas"] == 7
    no_interp = decide_apply(d, observed_from(member), cluster="member1")
    assert no_interp.action is ApplyAction.UPDATE


def test_member_defaults_cost_one_write_then_the_record_spares_it() -> None:
    d = desired()
    member = copy.deepcopy(d)
    member["spec"]["strategy"] = {"type": "RollingUpdate"}  # a member default the desired object lacks
    o = observed_from(member)
    first = decide_apply(d, o, cluster="member1", interpreter=INTERP)
    assert first.action is ApplyAction.UPDATE and first.obj is not None
    record = record_after_write(first.obj, o)  # the member answered with the same content (no-op PUT)
    again = decide_apply(d, observed_from(member, rv="11"), cluster="member1", interpreter=INTERP,
                         last_applied=record)
    assert again.action is ApplyAction.UNCHANGED  # a status-only change (new rv) does not matter
    drifted = copy.deepcopy(member)
    drifted["spec"]["replicas"] = 4
    assert decide_apply(d, observed_from(drifted), cluster="member1", interpreter=INTERP,
                        last_applied=record).action is ApplyAction.UPDATE
    changed = desired()
    changed["spec"]["replicas"] = 3
    assert decide_apply(changed, o, cluster="member1", interpreter=INTERP,
                        last_applied=record).action is ApplyAction.UPDATE


def test_content_digest_ignores_resource_version() -> None:
    d = desired()
    assert content_digest(observed_from(d, rv="1")) == content_digest(observed_from(d, rv="2"))
    assert isinstance(record_after_write(d, observed_from(d)), AppliedRecord)


def test_content_digest_does_not_change_its_input_and_sees_nested_changes() -> None:
    o = observed_from(desired(), rv="7")
    before = copy.deepcopy(o)
    digest = content_digest(o)
    assert o == before
    o["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.26"
    assert content_digest(o) != digest


def test_lazy_record_is_the_record_after_write() -> None:
    d = desired()
    answer = observed_from(d)
    assert LazyRecord(d, answer).record() == record_after_write(d, answer)


def test_create_decision_is_a_copy_that_shares_nothing_it_changes() -> None:
    d = desired()
    decision = decide_apply(d, None, cluster="member1")
    assert decision.obj == d and decision.obj is not d
    assert d == desired()


def test_status_only_update_is_not_a_content_change() -> None:
    old = observed_from(desired(), rv="10")
    new = observed_from(desired(), rv="11", generation=2, managedFields=[{"manager": "kubelet"}])
    new["status"] = {"replicas": 2, "readyReplicas": 2}
    assert not content_changed(old, new)


def test_member_edit_is_a_content_change() -> None:
    old = observed_from(desired(), rv="10")
    edited = observed_from(desired(), rv="11")
    edited["spec"]["replicas"] = 5
    assert content_changed(old, edited)
    annotated = observed_from(desired(), rv="11")
    annotated["metadata"]["annotations"]["someone"] = "else"
    assert content_changed(old, annotated)
    relabelled = observed_from(desired(), rv="11")
    del relabelled["metadata"]["labels"]["app"]
    assert content_changed(old, relabelled)


def test_pruned_fields_are_not_a_content_change() -> None:
    old = observed_from(desired(), rv="10")
    new = observed_from(desired(), rv="11")
    new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "2"  # pruned for Deployments
    assert not content_changed(old, new)


def test_object_key_and_managed() -> None:
    assert object_key(desired()) == "apps/v1, Kind=Deployment/default/nginx"
    assert is_managed(desired()) and not is_managed(unmanaged())


# ------------------------------------------------------------------------------- deletion


def test_decide_delete() -> None:
    assert decide_delete(None) is DeleteAction.ABSENT
    assert decide_delete(unmanaged()) is DeleteAction.NOT_MANAGED
    assert decide_delete(observed_from(desired())) is DeleteAction.DELETE


def test_preserved_manifest_strips_claim_and_managed_metadata() -> None:
    d = desired()
    d["metadata"]["labels"].update({L.RESOURCE_BINDING_PERMANENT_ID_LABEL: "rb",
                                    L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: "pp"})
    d["metadata"]["annotations"].update({L.PROPAGATION_POLICY_NAME_ANNOTATION: "p",
                                         L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION: "default",
                                         L.RESOURCE_TEMPLATE_UID_ANNOTATION: "u"})
    record_managed_annotations(d)
    record_managed_labels(d)
    kept = preserved_manifest(d)
    assert kept["metadata"]["labels"] == {"app": "nginx"}
    assert kept["metadata"]["annotations"] == {L.CONFLICT_RESOLUTION_ANNOTATION: "abort"}
    # applied to the member object, the keys disappear there too (they were managed), member keys stay
    o = observed_from(d)
    o["metadata"]["labels"]["member-only"] = "z"
    decision = decide_apply(kept, o, cluster="member1", interpreter=INTERP)
    assert decision.action is ApplyAction.UPDATE and decision.obj is not None
    assert decision.obj["metadata"]["labels"] == {"app": "nginx", "member-only": "z"}
    assert set(decision.obj["metadata"]["annotations"]) == {L.CONFLICT_RESOLUTION_ANNOTATION}


def test_preserved_cluster_scoped_manifest_drops_cpp_claim() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": "apps", "labels": {L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL: "c",
                                                   L.MANAGED_LABEL: "true"},
                       "annotations": {L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION: "cpp"}}}
    kept = preserved_manifest(ns)
    assert kept["metadata"]["labels"] == {} and kept["metadata"]["annotations"] == {}


def ready(status: str = "True", deleting: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"metadata": {"name": "member1"},
                         "status": {"conditions": [{"type": "Ready", "status": status}]}}
    if deleting:
        c["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return c


@pytest.mark.parametrize(
    ("preserve", "cluster", "fenced", "expected"),
    [
        (False, ready(), False, WorkDeletion.DELETE),
        (True, ready(), False, WorkDeletion.PRESERVE),
        (False, ready("False"), False, WorkDeletion.WAIT),
        (False, ready("Unknown"), False, WorkDeletion.WAIT),
        (False, ready("False", deleting=True), False, WorkDeletion.SKIP),
        (False, ready("True", deleting=True), False, WorkDeletion.DELETE),
        (False, None, False, WorkDeletion.SKIP),
        (False, ready("False"), True, WorkDeletion.ABANDON),
        (True, ready(), True, WorkDeletion.ABANDON),
    ],
)
def test_work_deletion_action(preserve: bool, cluster: dict[str, Any] | None, fenced: bool,
                              expected: WorkDeletion) -> None:
    work = {"spec": {"preserveResourcesOnDeletion": preserve}}
    assert work_deletion_action(work, cluster, fenced=fenced) is expected


def test_cluster_ready() -> None:
    assert cluster_ready(ready()) and not cluster_ready(ready("False")) and not cluster_ready(None)
    assert not cluster_ready({"status": {}})


# ------------------------------------------------------------------------------- conditions


def test_set_condition_moves_transition_time_only_on_status_change() -> None:
    conds, changed = set_conditions(None, [applied_condition(1, [])], "t1")
    assert changed and conds == [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful",
                                  "message": "Manifest has been successfully applied", "lastTransitionTime": "t1"}]
    same, changed = set_conditions(conds, [applied_condition(1, [])], "t2")
    assert not changed and same == conds
    failed, changed = set_conditions(conds, [applied_condition(0, ["boom"])], "t3")
    assert changed and failed[0]["status"] == "False" and failed[0]["lastTransitionTime"] == "t3"
    assert failed[0]["message"] == "Failed to apply all manifests (0/1): boom"
    again, changed = set_conditions(failed, [applied_condition(0, ["other"])], "t4")
    assert changed and again[0]["lastTransitionTime"] == "t3" and again[0]["message"].endswith("other")
    both, _ = set_conditions(again, [dispatching_condition(False)], "t5")
    assert [c["type"] for c in both] == ["Applied", "Dispatching"]


def test_set_conditions_sets_each_and_tells_whether_any_changed() -> None:
    conds, changed = set_conditions(None, [dispatching_condition(False), applied_condition(1, [])], "t1")
    assert changed and [c["type"] for c in conds] == ["Dispatching", "Applied"]
    assert all(c["lastTransitionTime"] == "t1" for c in conds)
    same, changed = set_conditions(conds, [applied_condition(1, []), dispatching_condition(False)], "t2")
    assert not changed and same == conds
    _, changed = set_conditions(conds, [dispatching_condition(False), applied_condition(0, ["boom"])], "t3")
    assert changed


def test_applied_condition_many_errors() -> None:
    cond = applied_condition(1, ["a", "b"])
    assert cond["reason"] == "AppliedFailed" and cond["message"] == "Failed to apply all manifests (1/3): [a, b]"
    assert dispatching_condition(True)["reason"] == "SuspendDispatching"


def test_pruned_parts_of_other_fields_are_not_a_content_change() -> None:
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "default", "resourceVersion": "3",
                            "labels": {L.MANAGED_LABEL: "true"}},
               "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}}
    assigned = copy.deepcopy(service)
    assigned["metadata"]["resourceVersion"] = "4"
    assigned["spec"]["clusterIP"] = "10.0.0.7"  # set by the member, pruned
    assert not content_changed(service, assigned)
    assigned["spec"]["ports"][0]["port"] = 81
    assert content_changed(service, assigned)
    token = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "t", "namespace": "default"}}
    filled = {**token, "data": {"token": "YWJj"}}  # data of a token Secret is pruned
    assert not content_changed(token, filled)
