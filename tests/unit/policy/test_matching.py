"""Policy matching, precedence, preemption, lazy activation and cluster affinity."""

from __future__ import annotations

from typing import Any

import pytest

from flotilla.policy.matching import (
    ImplicitPriority,
    best_cluster_propagation_policy,
    best_policy,
    best_propagation_policy,
    can_preempt,
    detector_handles,
    explicit_priority,
    is_cluster_policy,
    is_lazy_activation,
    override_policy_precision,
    policies_to_requeue_on_deprioritize,
    policy_matches,
    policy_precision,
    resource_matches_selector,
    resource_matches_selectors,
    selector_precision,
    skips_binding_refresh,
)
from flotilla.scheduler.affinity import cluster_object_matches

NGINX: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "web", "tier": "frontend"}},
}
CLUSTER_ROLE: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "reader"},
}


def deployments(**extra: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", **extra}


def pp(name: str, *selectors: dict[str, Any], namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resourceSelectors": list(selectors), **spec},
    }


def cpp(name: str, *selectors: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": name},
        "spec": {"resourceSelectors": list(selectors), **spec},
    }


def names(policies: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in policies]


# -- selectors ---------------------------------------------------------------------------------


def test_selector_by_name_ranks_highest() -> None:
    assert selector_precision(NGINX, deployments(name="nginx")) is ImplicitPriority.MATCH_NAME


def test_selector_by_name_ignores_its_label_selector() -> None:
    sel = deployments(name="nginx", labelSelector={"matchLabels": {"app": "db"}})
    assert selector_precision(NGINX, sel) is ImplicitPriority.MATCH_NAME


def test_selector_with_another_name_mismatches_even_if_labels_match() -> None:
    sel = deployments(name="other", labelSelector={"matchLabels": {"app": "web"}})
    assert selector_precision(NGINX, sel) is ImplicitPriority.MISMATCH


def test_matching_label_selector_ranks_two() -> None:
    sel = deployments(labelSelector={"matchLabels": {"app": "web"}})
    assert selector_precision(NGINX, sel) is ImplicitPriority.MATCH_LABEL_SELECTOR


def test_match_expressions_are_supported() -> None:
    sel = deployments(
        labelSelector={"matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}]}
    )
    assert resource_matches_selector(NGINX, sel)
    sel = deployments(labelSelector={"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]})
    assert not resource_matches_selector(NGINX, sel)


def test_non_matching_label_selector_mismatches() -> None:
    assert selector_precision(NGINX, deployments(labelSelector={"matchLabels": {"app": "db"}})) == 0


def test_empty_label_selector_matches_everything_with_label_precision() -> None:
    assert selector_precision(NGINX, deployments(labelSelector={})) is ImplicitPriority.MATCH_LABEL_SELECTOR


def test_selector_without_name_or_label_selector_matches_all() -> None:
    assert selector_precision(NGINX, deployments()) is ImplicitPriority.MATCH_ALL
    assert selector_precision(NGINX, deployments(labelSelector=None)) is ImplicitPriority.MATCH_ALL


def test_malformed_label_selector_matches_nothing() -> None:
    sel = deployments(labelSelector={"matchExpressions": [{"key": "app", "operator": "In", "values": []}]})
    assert selector_precision(NGINX, sel) is ImplicitPriority.MISMATCH


@pytest.mark.parametrize(
    "selector",
    [
        {"apiVersion": "apps/v1beta1", "kind": "Deployment"},
        {"apiVersion": "apps/v1", "kind": "StatefulSet"},
        {"apiVersion": "apps/v1", "kind": "deployment"},
        {"kind": "Deployment"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"},
    ],
)
def test_api_version_kind_and_namespace_must_match_exactly(selector: dict[str, Any]) -> None:
    assert not resource_matches_selector(NGINX, selector)


def test_selector_namespace_is_optional_and_checked_when_set() -> None:
    assert resource_matches_selector(NGINX, deployments(namespace="default"))
    assert resource_matches_selector(NGINX, deployments(namespace=""))


def test_selector_with_namespace_never_matches_a_cluster_scoped_object() -> None:
    sel = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "namespace": "default"}
    assert not resource_matches_selector(CLUSTER_ROLE, sel)
    assert resource_matches_selector(
        CLUSTER_ROLE, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}
    )


def test_policy_precision_is_the_best_of_its_selectors() -> None:
    policy = pp("p", deployments(), deployments(name="nginx"), deployments(labelSelector={}))
    assert policy_precision(NGINX, policy) is ImplicitPriority.MATCH_NAME


def test_policy_without_selectors_matches_nothing() -> None:
    assert policy_precision(NGINX, pp("p")) is ImplicitPriority.MISMATCH
    assert not policy_matches(NGINX, pp("p"))
    assert not resource_matches_selectors(NGINX, [])


def test_override_policy_without_selectors_counts_as_match_all() -> None:
    assert override_policy_precision(NGINX, {"spec": {}}) is ImplicitPriority.MATCH_ALL
    op = {"spec": {"resourceSelectors": [deployments(name="nginx")]}}
    assert override_policy_precision(NGINX, op) is ImplicitPriority.MATCH_NAME


# -- best policy -------------------------------------------------------------------------------


def test_no_policy_matches() -> None:
    assert best_policy(NGINX, [pp("p", deployments(name="x"))], [cpp("c", deployments(name="x"))]) == (
        None,
        False,
    )


def test_explicit_priority_beats_selector_precision() -> None:
    by_name = pp("by-name", deployments(name="nginx"))
    match_all = pp("match-all", deployments(), priority=1)
    assert best_policy(NGINX, [by_name, match_all], []) == (match_all, False)


def test_precision_breaks_priority_ties_name_over_label_over_all() -> None:
    by_name = pp("z-name", deployments(name="nginx"))
    by_label = pp("b-label", deployments(labelSelector={"matchLabels": {"app": "web"}}))
    match_all = pp("a-all", deployments())
    assert best_propagation_policy(NGINX, [match_all, by_label, by_name]) is by_name
    assert best_propagation_policy(NGINX, [match_all, by_label]) is by_label


def test_smaller_name_breaks_full_ties() -> None:
    a, b = pp("alpha", deployments()), pp("beta", deployments())
    assert best_propagation_policy(NGINX, [b, a]) is a
    assert best_propagation_policy(NGINX, [a, b]) is a


def test_absent_priority_counts_as_zero() -> None:
    negative = pp("a-negative", deployments(), priority=-1)
    default = pp("z-default", deployments())
    assert best_propagation_policy(NGINX, [negative, default]) is default
    assert explicit_priority(default) == 0
    assert explicit_priority(pp("n", priority=None)) == 0


def test_any_namespaced_policy_beats_every_cluster_policy() -> None:
    weak = pp("weak", deployments(), priority=-100)
    strong = cpp("strong", deployments(name="nginx"), priority=100)
    assert best_policy(NGINX, [weak], [strong]) == (weak, False)


def test_cluster_policy_is_used_when_no_namespaced_policy_matches() -> None:
    other = pp("other", deployments(name="not-nginx"))
    cluster = cpp("cluster", deployments())
    assert best_policy(NGINX, [other], [cluster]) == (cluster, True)


def test_cluster_policies_follow_the_same_precedence() -> None:
    low = cpp("a", deployments(name="nginx"), priority=1)
    high = cpp("b", deployments(), priority=2)
    assert best_cluster_propagation_policy(NGINX, [low, high]) is high


def test_policies_of_other_namespaces_are_ignored() -> None:
    foreign = pp("foreign", deployments(), namespace="other")
    assert best_propagation_policy(NGINX, [foreign]) is None


def test_policies_being_deleted_are_ignored() -> None:
    deleting = pp("deleting", deployments(name="nginx"))
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    fallback = pp("fallback", deployments())
    assert best_propagation_policy(NGINX, [deleting, fallback]) is fallback
    deleting_cpp = cpp("deleting", deployments())
    deleting_cpp["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert best_cluster_propagation_policy(NGINX, [deleting_cpp]) is None


def test_cluster_scoped_templates_only_match_cluster_policies() -> None:
    selector = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}
    namespaced = pp("pp", selector, namespace="")
    cluster = cpp("cpp", selector)
    assert best_policy(CLUSTER_ROLE, [namespaced], [cluster]) == (cluster, True)
    assert best_policy(CLUSTER_ROLE, [namespaced], []) == (None, False)


def test_is_cluster_policy_by_kind_or_namespace() -> None:
    assert is_cluster_policy(cpp("c"))
    assert not is_cluster_policy(pp("p"))
    assert is_cluster_policy({"metadata": {"name": "x"}})
    assert not is_cluster_policy({"metadata": {"name": "x", "namespace": "default"}})


# -- preemption --------------------------------------------------------------------------------


def test_preemption_requires_preemption_always() -> None:
    current = pp("current", deployments(name="nginx"))
    assert not can_preempt(current, pp("candidate", deployments(name="nginx"), priority=10))
    assert not can_preempt(
        current, pp("candidate", deployments(name="nginx"), priority=10, preemption="Never")
    )
    assert can_preempt(current, pp("candidate", deployments(name="nginx"), priority=10, preemption="Always"))


def test_preemption_requires_the_feature_gate() -> None:
    candidate = pp("candidate", priority=10, preemption="Always")
    assert not can_preempt(pp("current"), candidate, feature_gate_enabled=False)


def test_pp_preempts_pp_only_with_strictly_higher_priority() -> None:
    current = pp("current", priority=5)
    assert not can_preempt(current, pp("equal", priority=5, preemption="Always"))
    assert not can_preempt(current, pp("lower", priority=4, preemption="Always"))
    assert can_preempt(current, pp("higher", priority=6, preemption="Always"))


def test_pp_preempts_any_cpp_regardless_of_priority() -> None:
    assert can_preempt(cpp("current", priority=1000), pp("candidate", priority=-5, preemption="Always"))


def test_cpp_preempts_cpp_only_with_strictly_higher_priority() -> None:
    current = cpp("current", priority=1)
    assert can_preempt(current, cpp("higher", priority=2, preemption="Always"))
    assert not can_preempt(current, cpp("equal", priority=1, preemption="Always"))


def test_cpp_never_preempts_pp() -> None:
    assert not can_preempt(pp("current", priority=-100), cpp("candidate", priority=100, preemption="Always"))


def test_nothing_to_preempt_from_an_unclaimed_template_or_from_itself() -> None:
    candidate = pp("candidate", priority=10, preemption="Always")
    assert not can_preempt(None, candidate)
    assert not can_preempt(candidate, candidate)
    assert not can_preempt(
        cpp("c", priority=1, preemption="Always"), cpp("c", priority=5, preemption="Always")
    )


def test_deprioritized_policy_requeues_preempting_policies_in_between_highest_first() -> None:
    old, new = pp("p", priority=10), pp("p", priority=2)
    others = [
        pp("mid-a", priority=5, preemption="Always"),
        pp("mid-b", priority=8, preemption="Always"),
        pp("never", priority=6),
        pp("equal-old", priority=10, preemption="Always"),
        pp("equal-new", priority=2, preemption="Always"),
        pp("unset", preemption="Always"),
        pp("above", priority=11, preemption="Always"),
    ]
    assert names(policies_to_requeue_on_deprioritize(old, new, others)) == ["mid-b", "mid-a"]


def test_unset_priority_is_not_requeued_even_when_zero_is_in_range() -> None:
    old, new = pp("p", priority=5), pp("p", priority=-5)
    assert names(policies_to_requeue_on_deprioritize(old, new, [pp("unset", preemption="Always")])) == []
    explicit_zero = pp("zero", priority=0, preemption="Always")
    assert names(policies_to_requeue_on_deprioritize(old, new, [explicit_zero])) == ["zero"]


# -- lazy activation ---------------------------------------------------------------------------


def test_lazy_activation_is_read_from_the_policy() -> None:
    assert is_lazy_activation(pp("p", activationPreference="Lazy"))
    assert not is_lazy_activation(pp("p"))
    assert not is_lazy_activation(pp("p", activationPreference=""))
    assert not is_lazy_activation(None)


def test_lazy_policy_skips_binding_refresh_only_for_karmada_made_changes() -> None:
    lazy, eager = pp("p", activationPreference="Lazy"), pp("p")
    assert skips_binding_refresh(lazy, resource_change_by_karmada=True)
    assert not skips_binding_refresh(lazy, resource_change_by_karmada=False)
    assert not skips_binding_refresh(eager, resource_change_by_karmada=True)


# -- detector event filter ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "kind", "name", "handled"),
    [
        ("default", "Deployment", "nginx", True),
        ("", "ClusterRole", "reader", True),
        ("karmada-system", "Deployment", "x", False),
        ("karmada-cluster", "Secret", "x", False),
        ("karmada-es-member1", "Work", "x", False),
        ("kube-system", "Deployment", "x", False),
        ("kube-public", "ConfigMap", "x", False),
        ("mykube-ns", "ConfigMap", "x", True),
    ],
)
def test_detector_event_filter(namespace: str, kind: str, name: str, handled: bool) -> None:
    obj = {"kind": kind, "metadata": {"name": name, "namespace": namespace}}
    assert detector_handles(obj) is handled


def test_detector_skips_the_apiserver_authentication_configmap_only_in_kube_system() -> None:
    obj = {
        "kind": "ConfigMap",
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
    }
    assert not detector_handles(obj, skipped_namespaces=())
    obj["metadata"]["namespace"] = "default"
    assert detector_handles(obj, skipped_namespaces=())


def test_skipped_namespace_patterns_are_anchored_like_upstream() -> None:
    obj = {"kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team-a"}}
    assert not detector_handles(obj, skipped_namespaces=("team-.*",))
    assert detector_handles(obj, skipped_namespaces=("team",))
    # "^a|b$" is anchored only at its ends: "team-b" ends with b.
    assert not detector_handles(
        obj | {"metadata": {"name": "x", "namespace": "team-b"}}, skipped_namespaces=("a|b",)
    )


# -- cluster affinity --------------------------------------------------------------------------

MEMBER1: dict[str, Any] = {
    "metadata": {"name": "member1", "labels": {"env": "prod", "location": "eu"}},
    "spec": {"provider": "aws", "region": "eu-west-1", "zones": ["eu-west-1a", "eu-west-1b"]},
}
BARE: dict[str, Any] = {"metadata": {"name": "bare"}, "spec": {}}


def test_no_or_empty_affinity_matches_every_cluster() -> None:
    assert cluster_object_matches(MEMBER1, None)
    assert cluster_object_matches(MEMBER1, {})
    assert cluster_object_matches(BARE, {"fieldSelector": {}})


def test_cluster_names() -> None:
    assert cluster_object_matches(MEMBER1, {"clusterNames": ["member1", "member2"]})
    assert not cluster_object_matches(MEMBER1, {"clusterNames": ["member2"]})


def test_exclude_wins_over_cluster_names() -> None:
    assert not cluster_object_matches(MEMBER1, {"clusterNames": ["member1"], "exclude": ["member1"]})


def test_label_selector() -> None:
    assert cluster_object_matches(MEMBER1, {"labelSelector": {"matchLabels": {"env": "prod"}}})
    assert not cluster_object_matches(MEMBER1, {"labelSelector": {"matchLabels": {"env": "dev"}}})
    assert cluster_object_matches(MEMBER1, {"labelSelector": {}})


def test_all_parts_must_hold() -> None:
    affinity = {"labelSelector": {"matchLabels": {"env": "prod"}}, "clusterNames": ["member2"]}
    assert not cluster_object_matches(MEMBER1, affinity)


def field(key: str, operator: str, *values: str) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"fieldSelector": {"matchExpressions": [expression]}}


@pytest.mark.parametrize(
    ("affinity", "member1", "bare"),
    [
        (field("provider", "In", "aws"), True, False),
        (field("provider", "In", "gcp"), False, False),
        (field("provider", "NotIn", "gcp"), True, True),
        (field("provider", "NotIn", "aws"), False, True),
        (field("region", "In", "eu-west-1"), True, False),
        (field("region", "Exists"), True, False),
        (field("region", "DoesNotExist"), False, True),
        (field("zone", "In", "eu-west-1b", "us-east-1a"), True, False),
        (field("zone", "In", "us-east-1a"), False, False),
        (field("zone", "NotIn", "eu-west-1a"), False, True),
        (field("zone", "NotIn", "us-east-1a"), True, True),
        (field("zone", "Exists"), True, False),
        (field("zone", "DoesNotExist"), False, True),
        (field("zone", "Gt", "1"), False, False),
    ],
)
def test_field_selector_on_provider_region_and_zones(
    affinity: dict[str, Any], member1: bool, bare: bool
) -> None:
    assert cluster_object_matches(MEMBER1, affinity) is member1
    assert cluster_object_matches(BARE, affinity) is bare


def test_field_selector_expressions_are_anded() -> None:
    affinity = {
        "fieldSelector": {
            "matchExpressions": [
                {"key": "provider", "operator": "In", "values": ["aws"]},
                {"key": "zone", "operator": "In", "values": ["eu-west-1a"]},
                {"key": "region", "operator": "In", "values": ["us-east-1"]},
            ]
        }
    }
    assert not cluster_object_matches(MEMBER1, affinity)


def test_malformed_field_selector_matches_nothing() -> None:
    assert not cluster_object_matches(MEMBER1, field("provider", "Bogus", "aws"))
    assert not cluster_object_matches(MEMBER1, field("provider", "In"))
