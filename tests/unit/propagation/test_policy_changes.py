"""Which templates and bindings a policy change concerns."""

from __future__ import annotations

import copy
from typing import Any

from flotilla.api import labels as L
from flotilla.propagation.policy_changes import (
    TemplateKey,
    bound_template_keys,
    detector_watches,
    missing_dependent_overrides,
    policy_claim_label,
    preemption_targets,
    selector_scopes,
    selector_types,
    template_key,
    template_key_of_binding,
    unclaimed_matching,
    unmatched_bindings,
)

PP_ID = L.PROPAGATION_POLICY_PERMANENT_ID_LABEL
CPP_ID = L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL


def pp(name: str, selectors: list[dict[str, Any]], *, namespace: str = "default", priority: int | None = None,
       preemption: str | None = None, policy_id: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceSelectors": selectors}
    if priority is not None:
        spec["priority"] = priority
    if preemption:
        spec["preemption"] = preemption
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace, "labels": {PP_ID: policy_id or f"{name}-id"}},
            "spec": spec}


def cpp(name: str, selectors: list[dict[str, Any]], *, priority: int | None = None,
        preemption: str | None = None) -> dict[str, Any]:
    out = pp(name, selectors, priority=priority, preemption=preemption)
    out["kind"] = "ClusterPropagationPolicy"
    del out["metadata"]["namespace"]
    out["metadata"]["labels"] = {CPP_ID: f"{name}-id"}
    return out


def deployment(name: str, *, namespace: str = "default", labels: dict[str, str] | None = None,
               claim: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {}), "annotations": {}}
    if claim is not None:
        if claim["kind"] == "PropagationPolicy":
            meta["labels"][PP_ID] = claim["metadata"]["labels"][PP_ID]
            meta["annotations"][L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION] = claim["metadata"]["namespace"]
            meta["annotations"][L.PROPAGATION_POLICY_NAME_ANNOTATION] = claim["metadata"]["name"]
        else:
            meta["labels"][CPP_ID] = claim["metadata"]["labels"][CPP_ID]
            meta["annotations"][L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION] = claim["metadata"]["name"]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


def binding_for(template: dict[str, Any]) -> dict[str, Any]:
    meta = template["metadata"]
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{meta['name']}-deployment", "namespace": meta["namespace"],
                         "labels": {k: v for k, v in meta["labels"].items() if k in (PP_ID, CPP_ID)}},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": meta["namespace"],
                                  "name": meta["name"]}}}


BY_NAME = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "a"}
BY_LABEL = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
            "labelSelector": {"matchLabels": {"tier": "web"}}}


def test_scopes_are_distinct_type_and_namespace() -> None:
    policy = pp("p", [BY_NAME, BY_LABEL, {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default"}])
    assert selector_scopes(policy) == [("apps/v1", "Deployment", "default"), ("v1", "ConfigMap", "default")]
    assert selector_types([policy, cpp("c", [{"apiVersion": "v1", "kind": "Namespace"}])]) == {
        ("apps/v1", "Deployment"), ("v1", "ConfigMap"), ("v1", "Namespace")}


def test_claim_label_of_a_policy() -> None:
    assert policy_claim_label(pp("p", [])) == {PP_ID: "p-id"}
    assert policy_claim_label(cpp("c", [])) == {CPP_ID: "c-id"}
    anonymous = pp("p", [])
    anonymous["metadata"]["labels"] = {}
    assert policy_claim_label(anonymous) == {}


def test_template_keys() -> None:
    t = deployment("a")
    assert template_key(t) == TemplateKey("apps/v1", "Deployment", "default", "a")
    assert template_key_of_binding(binding_for(t)) == template_key(t)
    assert template_key_of_binding({"spec": {}}) is None
    assert str(TemplateKey("v1", "Namespace", "", "x")) == "Namespace(v1) x"


def test_bound_templates_are_those_of_bindings_with_the_policy_id() -> None:
    policy = pp("p", [BY_NAME])
    other = pp("q", [BY_NAME])
    bindings = [binding_for(deployment("a", claim=policy)), binding_for(deployment("b", claim=other)),
                binding_for(deployment("c", namespace="prod", claim=policy))]  # a PP never claims elsewhere
    assert bound_template_keys(policy, bindings) == [TemplateKey("apps/v1", "Deployment", "default", "a")]


def test_templates_the_policy_no_longer_selects_are_released() -> None:
    policy = pp("p", [BY_LABEL])
    web = deployment("a", labels={"tier": "web"}, claim=policy)
    db = deployment("b", labels={"tier": "db"}, claim=policy)  # its label changed
    templates = {template_key(t): t for t in (web, db)}
    pairs = unmatched_bindings(policy, [binding_for(web), binding_for(db), binding_for(deployment("gone", claim=policy))],
                               templates.get)
    assert [(b["metadata"]["name"], t["metadata"]["name"]) for b, t in pairs] == [("b-deployment", "b")]


def test_unclaimed_matching_templates() -> None:
    policy = pp("p", [BY_LABEL])
    templates = [
        deployment("free", labels={"tier": "web"}),
        deployment("claimed", labels={"tier": "web"}, claim=pp("q", [BY_LABEL])),
        deployment("other-ns", namespace="prod", labels={"tier": "web"}),
        deployment("no-match", labels={"tier": "db"}),
        deployment("mcs", labels={"tier": "web", L.RESOURCE_TEMPLATE_CLAIMED_BY_LABEL: "MultiClusterService"}),
    ]
    assert [t["metadata"]["name"] for t in unclaimed_matching(policy, templates)] == ["free"]
    cluster_policy = cpp("c", [{"apiVersion": "apps/v1", "kind": "Deployment",
                                "labelSelector": {"matchLabels": {"tier": "web"}}}])
    assert [t["metadata"]["name"] for t in unclaimed_matching(cluster_policy, templates)] == ["free", "other-ns"]


def test_preemption_needs_the_gate_and_a_strictly_higher_priority() -> None:
    low = pp("low", [BY_NAME], priority=1)
    high = pp("high", [BY_NAME], priority=5, preemption="Always")
    same = pp("same", [BY_NAME], priority=1, preemption="Always")
    a = deployment("a", claim=low)
    policies = {"low": low}

    def claimer(t: dict[str, Any]) -> dict[str, Any] | None:
        return policies.get(t["metadata"]["annotations"].get(L.PROPAGATION_POLICY_NAME_ANNOTATION, ""))

    assert preemption_targets(high, [a], claimer, feature_gate_enabled=False) == []
    assert preemption_targets(high, [a], claimer, feature_gate_enabled=True) == [a]
    assert preemption_targets(same, [a], claimer, feature_gate_enabled=True) == []
    never = copy.deepcopy(high)
    del never["spec"]["preemption"]
    assert preemption_targets(never, [a], claimer, feature_gate_enabled=True) == []


def test_preemption_only_for_templates_named_by_the_policy() -> None:
    low = pp("low", [BY_LABEL], priority=1)
    high = pp("high", [BY_LABEL], priority=5, preemption="Always")
    a = deployment("a", labels={"tier": "web"}, claim=low)
    assert preemption_targets(high, [a], lambda t: low, feature_gate_enabled=True) == []


def test_propagation_policy_always_takes_from_a_cluster_policy_but_not_the_reverse() -> None:
    c = cpp("c", [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "a"}], priority=100)
    p = pp("p", [BY_NAME], priority=0, preemption="Always")
    by_cpp = deployment("a", claim=c)
    assert preemption_targets(p, [by_cpp], lambda t: c, feature_gate_enabled=True) == [by_cpp]
    c_always = cpp("c2", [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "a"}], priority=100,
                   preemption="Always")
    by_pp = deployment("a", claim=p)
    assert preemption_targets(c_always, [by_pp], lambda t: p, feature_gate_enabled=True) == []


def test_unclaimed_or_deleting_templates_are_not_preempted() -> None:
    high = pp("high", [BY_NAME], priority=5, preemption="Always")
    low = pp("low", [BY_NAME], priority=1)
    deleting = deployment("a", claim=low)
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert preemption_targets(high, [deployment("a"), deleting], lambda t: low, feature_gate_enabled=True) == []
    # the claiming policy cannot be found: left alone
    assert preemption_targets(high, [deployment("a", claim=low)], lambda t: None, feature_gate_enabled=True) == []


def test_missing_dependent_overrides() -> None:
    policy = pp("p", [BY_NAME])
    assert missing_dependent_overrides(policy, []) == []
    policy["spec"]["dependentOverrides"] = ["op-a", "op-b"]
    assert missing_dependent_overrides(policy, ["op-a"]) == ["op-b"]
    assert missing_dependent_overrides(policy, ["op-b", "op-a"]) == []


def test_karmada_api_groups_are_not_templates() -> None:
    assert detector_watches("apps/v1", "Deployment")
    assert detector_watches("v1", "ConfigMap")
    assert not detector_watches("v1", "Event")
    assert not detector_watches("events.k8s.io/v1", "Event")
    assert not detector_watches("policy.karmada.io/v1alpha1", "PropagationPolicy")
    assert not detector_watches("work.karmada.io/v1alpha2", "ResourceBinding")
    assert not detector_watches("coordination.k8s.io/v1", "Lease")
    assert detector_watches("flink.apache.org/v1beta1", "FlinkDeployment")
