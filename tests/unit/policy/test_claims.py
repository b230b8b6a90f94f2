"""Claim labels/annotations the detector writes on templates and bindings."""

from __future__ import annotations

import copy
from typing import Any

from flotilla.kube.patch import apply_merge_patch
from flotilla.policy.claims import (
    CPP_NAME_ANNOTATION,
    CPP_PERMANENT_ID_LABEL,
    PP_NAME_ANNOTATION,
    PP_NAMESPACE_ANNOTATION,
    PP_PERMANENT_ID_LABEL,
    ClaimRef,
    binding_claim_metadata,
    claim,
    claim_metadata,
    claim_of,
    claim_patch,
    claimed_by_other_controller,
    needs_claim_cleanup,
    policy_permanent_id,
    resource_change_by_karmada,
    specification_changed,
    unclaim,
    unclaim_patch,
)

PP = {
    "apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "PropagationPolicy",
    "metadata": {"name": "pp", "namespace": "default", "labels": {PP_PERMANENT_ID_LABEL: "pp-id"}},
}
CPP = {
    "apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "ClusterPropagationPolicy",
    "metadata": {"name": "cpp", "labels": {CPP_PERMANENT_ID_LABEL: "cpp-id"}},
}


def template(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "nginx", "namespace": "default"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {"replicas": 2}}


PP_CLAIMED = template(
    {"app": "web", PP_PERMANENT_ID_LABEL: "pp-id"},
    {PP_NAMESPACE_ANNOTATION: "default", PP_NAME_ANNOTATION: "pp"},
)
CPP_CLAIMED = template({"app": "web", CPP_PERMANENT_ID_LABEL: "cpp-id"}, {CPP_NAME_ANNOTATION: "cpp"})


# -- reading -----------------------------------------------------------------------------------


def test_policy_permanent_id_comes_from_the_policy_label() -> None:
    assert policy_permanent_id(PP) == "pp-id"
    assert policy_permanent_id(CPP) == "cpp-id"
    assert policy_permanent_id({"kind": "PropagationPolicy", "metadata": {"name": "x"}}) == ""


def test_claim_of_a_pp_claimed_template() -> None:
    assert claim_of(PP_CLAIMED) == ClaimRef(False, "pp", "default", "pp-id")


def test_claim_of_a_cpp_claimed_template() -> None:
    ref = claim_of(CPP_CLAIMED)
    assert ref == ClaimRef(True, "cpp", "", "cpp-id")
    assert ref is not None and ref.claim_labels() == {CPP_PERMANENT_ID_LABEL: "cpp-id"}


def test_a_pp_claim_needs_namespace_name_and_id() -> None:
    partial = template({PP_PERMANENT_ID_LABEL: "pp-id"}, {PP_NAME_ANNOTATION: "pp"})
    assert claim_of(partial) is None
    empty_id = template(
        {PP_PERMANENT_ID_LABEL: ""}, {PP_NAMESPACE_ANNOTATION: "default", PP_NAME_ANNOTATION: "pp"}
    )
    assert claim_of(empty_id) is None


def test_a_cpp_claim_needs_name_and_id() -> None:
    assert claim_of(template({CPP_PERMANENT_ID_LABEL: "cpp-id"})) is None
    assert claim_of(template(None, {CPP_NAME_ANNOTATION: "cpp"})) is None


def test_pp_claim_is_read_before_cpp_claim() -> None:
    both = template(
        {PP_PERMANENT_ID_LABEL: "pp-id", CPP_PERMANENT_ID_LABEL: "cpp-id"},
        {PP_NAMESPACE_ANNOTATION: "default", PP_NAME_ANNOTATION: "pp", CPP_NAME_ANNOTATION: "cpp"},
    )
    ref = claim_of(both)
    assert ref is not None and not ref.cluster_scoped


def test_unclaimed_template_has_no_claim() -> None:
    assert claim_of(template()) is None
    assert claim_of({"kind": "Deployment"}) is None


def test_claimed_by_label_hands_the_template_to_another_controller() -> None:
    assert claimed_by_other_controller(
        template({"resourcetemplate.karmada.io/claimed-by": "MultiClusterService"})
    )
    assert not claimed_by_other_controller(template({"resourcetemplate.karmada.io/claimed-by": ""}))
    assert not claimed_by_other_controller(template())


def test_cleanup_only_when_the_object_still_carries_the_same_id() -> None:
    assert needs_claim_cleanup(PP_CLAIMED, {PP_PERMANENT_ID_LABEL: "pp-id"})
    assert not needs_claim_cleanup(PP_CLAIMED, {PP_PERMANENT_ID_LABEL: "another-id"})
    assert not needs_claim_cleanup(template(), {PP_PERMANENT_ID_LABEL: "pp-id"})


# -- claiming ----------------------------------------------------------------------------------


def test_claim_metadata_of_a_pp_and_a_cpp() -> None:
    assert claim_metadata(PP) == (
        {PP_PERMANENT_ID_LABEL: "pp-id"},
        {PP_NAMESPACE_ANNOTATION: "default", PP_NAME_ANNOTATION: "pp"},
    )
    assert claim_metadata(CPP) == ({CPP_PERMANENT_ID_LABEL: "cpp-id"}, {CPP_NAME_ANNOTATION: "cpp"})


def test_pp_claim_of_a_fresh_template_adds_label_and_annotations() -> None:
    fresh = template({"app": "web"})
    patch = claim_patch(fresh, PP)
    assert patch == {
        "metadata": {
            "labels": {PP_PERMANENT_ID_LABEL: "pp-id"},
            "annotations": {PP_NAMESPACE_ANNOTATION: "default", PP_NAME_ANNOTATION: "pp"},
        }
    }
    claimed = apply_merge_patch(fresh, patch)
    assert claimed["metadata"]["labels"] == {"app": "web", PP_PERMANENT_ID_LABEL: "pp-id"}
    assert claim_of(claimed) == ClaimRef(False, "pp", "default", "pp-id")


def test_pp_claim_of_a_template_without_labels() -> None:
    claimed = claim(template(), PP)
    assert claim_of(claimed) == ClaimRef(False, "pp", "default", "pp-id")


def test_pp_claim_is_a_no_op_when_the_template_already_has_the_id() -> None:
    assert claim_patch(PP_CLAIMED, PP) is None
    assert claim(PP_CLAIMED, PP) == PP_CLAIMED


def test_pp_claim_checks_only_the_id_label_not_the_annotations() -> None:
    stale = template({PP_PERMANENT_ID_LABEL: "pp-id"}, {PP_NAME_ANNOTATION: "renamed"})
    assert claim_patch(stale, PP) is None


def test_pp_claim_replaces_a_cpp_claim() -> None:
    patch = claim_patch(CPP_CLAIMED, PP)
    assert patch is not None
    assert patch["metadata"]["labels"] == {PP_PERMANENT_ID_LABEL: "pp-id", CPP_PERMANENT_ID_LABEL: None}
    assert patch["metadata"]["annotations"][CPP_NAME_ANNOTATION] is None
    claimed = claim(CPP_CLAIMED, PP)
    assert CPP_PERMANENT_ID_LABEL not in claimed["metadata"]["labels"]
    assert CPP_NAME_ANNOTATION not in claimed["metadata"]["annotations"]
    assert claim_of(claimed) == ClaimRef(False, "pp", "default", "pp-id")


def test_pp_claim_strips_a_cpp_label_even_when_the_pp_id_is_already_there() -> None:
    both = template({PP_PERMANENT_ID_LABEL: "pp-id", CPP_PERMANENT_ID_LABEL: "cpp-id"})
    claimed = claim(both, PP)
    assert claimed["metadata"]["labels"] == {PP_PERMANENT_ID_LABEL: "pp-id"}


def test_pp_claim_takes_over_from_another_pp() -> None:
    other = template(
        {PP_PERMANENT_ID_LABEL: "old"}, {PP_NAMESPACE_ANNOTATION: "default", PP_NAME_ANNOTATION: "old"}
    )
    assert claim_of(claim(other, PP)) == ClaimRef(False, "pp", "default", "pp-id")


def test_cpp_claim_of_a_fresh_template() -> None:
    patch = claim_patch(template(), CPP)
    assert patch == {
        "metadata": {
            "labels": {CPP_PERMANENT_ID_LABEL: "cpp-id"},
            "annotations": {CPP_NAME_ANNOTATION: "cpp"},
        }
    }


def test_cpp_claim_is_a_no_op_when_the_id_matches() -> None:
    assert claim_patch(CPP_CLAIMED, CPP) is None


def test_cpp_claim_leaves_a_pp_claim_in_place() -> None:
    claimed = claim(PP_CLAIMED, CPP)
    assert claimed["metadata"]["labels"][PP_PERMANENT_ID_LABEL] == "pp-id"
    assert claimed["metadata"]["labels"][CPP_PERMANENT_ID_LABEL] == "cpp-id"
    # The PP claim is still the one the detector reads first.
    assert claim_of(claimed) == ClaimRef(False, "pp", "default", "pp-id")


def test_policy_without_permanent_id_does_not_claim_a_labelled_template() -> None:
    # Upstream compares the template label with the policy id; both empty counts as "already claimed".
    no_id = {"kind": "PropagationPolicy", "metadata": {"name": "pp", "namespace": "default"}}
    assert claim_patch(template({"app": "web"}), no_id) is None
    assert (
        claim_patch(template({"app": "web"}), {"kind": "ClusterPropagationPolicy", "metadata": {"name": "c"}})
        is None
    )


def test_claim_does_not_mutate_its_inputs() -> None:
    before_template, before_policy = copy.deepcopy(CPP_CLAIMED), copy.deepcopy(PP)
    claim(CPP_CLAIMED, PP)
    assert CPP_CLAIMED == before_template and PP == before_policy


# -- unclaiming --------------------------------------------------------------------------------


def test_unclaim_removes_pp_claim_metadata_only() -> None:
    patch = unclaim_patch(PP_CLAIMED, cluster_scoped=False)
    assert patch == {
        "metadata": {
            "labels": {PP_PERMANENT_ID_LABEL: None},
            "annotations": {PP_NAMESPACE_ANNOTATION: None, PP_NAME_ANNOTATION: None},
        }
    }
    freed = unclaim(PP_CLAIMED, cluster_scoped=False)
    assert freed["metadata"]["labels"] == {"app": "web"}
    assert freed["metadata"]["annotations"] == {}
    assert claim_of(freed) is None


def test_unclaim_removes_cpp_claim_metadata() -> None:
    freed = unclaim(CPP_CLAIMED, cluster_scoped=True)
    assert freed["metadata"]["labels"] == {"app": "web"}
    assert claim_of(freed) is None


def test_unclaim_of_an_unclaimed_template_is_no_patch() -> None:
    assert unclaim_patch(template({"app": "web"}), cluster_scoped=False) is None
    assert unclaim_patch(PP_CLAIMED, cluster_scoped=True) is None


def test_unclaim_only_if_the_id_still_matches() -> None:
    assert unclaim_patch(PP_CLAIMED, False, only_if={PP_PERMANENT_ID_LABEL: "newer-id"}) is None
    assert unclaim(PP_CLAIMED, False, only_if={PP_PERMANENT_ID_LABEL: "newer-id"}) == PP_CLAIMED
    assert unclaim_patch(PP_CLAIMED, False, only_if={PP_PERMANENT_ID_LABEL: "pp-id"}) is not None


# -- bindings ----------------------------------------------------------------------------------


def test_new_binding_gets_the_same_claim_metadata() -> None:
    assert binding_claim_metadata(None, PP) == claim_metadata(PP)


def test_pp_applied_binding_loses_cpp_claim_and_keeps_other_metadata() -> None:
    existing = {
        "metadata": {
            "labels": {"resourcebinding.karmada.io/permanent-id": "rb-id", CPP_PERMANENT_ID_LABEL: "cpp-id"},
            "annotations": {CPP_NAME_ANNOTATION: "cpp", "policy.karmada.io/applied-placement": "{}"},
        }
    }
    labels, annotations = binding_claim_metadata(existing, PP)
    assert labels == {"resourcebinding.karmada.io/permanent-id": "rb-id", PP_PERMANENT_ID_LABEL: "pp-id"}
    assert annotations == {
        "policy.karmada.io/applied-placement": "{}",
        PP_NAMESPACE_ANNOTATION: "default",
        PP_NAME_ANNOTATION: "pp",
    }


def test_cpp_applied_binding_keeps_a_pp_claim() -> None:
    existing = {
        "metadata": {"labels": {PP_PERMANENT_ID_LABEL: "pp-id"}, "annotations": {PP_NAME_ANNOTATION: "pp"}}
    }
    labels, annotations = binding_claim_metadata(existing, CPP)
    assert labels == {PP_PERMANENT_ID_LABEL: "pp-id", CPP_PERMANENT_ID_LABEL: "cpp-id"}
    assert annotations == {PP_NAME_ANNOTATION: "pp", CPP_NAME_ANNOTATION: "cpp"}


# -- event filters -----------------------------------------------------------------------------


def test_status_resource_version_and_managed_fields_are_not_a_specification_change() -> None:
    old = template({"app": "web"})
    new = copy.deepcopy(old)
    new["status"] = {"replicas": 2}
    new["metadata"]["resourceVersion"] = "42"
    new["metadata"]["managedFields"] = [{"manager": "x"}]
    assert not specification_changed(old, new)


def test_label_changes_are_a_specification_change() -> None:
    assert specification_changed(template({"app": "web"}), template({"app": "db"}))


def test_claiming_is_a_change_by_karmada() -> None:
    old = template({"app": "web"})
    new = claim(old, PP)
    new["metadata"]["generation"] = 7
    assert specification_changed(old, new)
    assert resource_change_by_karmada(old, new)


def test_user_spec_change_is_not_a_change_by_karmada() -> None:
    old = template({"app": "web"})
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    assert not resource_change_by_karmada(old, new)


def test_user_label_change_is_not_a_change_by_karmada() -> None:
    assert not resource_change_by_karmada(template({"app": "web"}), template({"app": "db"}))


def test_skip_auto_propagation_label_counts_as_a_user_change() -> None:
    old = template({"app": "web"})
    new = template({"app": "web", "namespace.karmada.io/skip-auto-propagation": "true"})
    assert not resource_change_by_karmada(old, new)


def test_emptied_karmada_only_maps_compare_equal_to_absent_ones() -> None:
    old = template()
    new = template({"x.karmada.io/y": "1"}, {"a.karmada.io/b": "2"})
    assert resource_change_by_karmada(old, new)
