"""register_karmada_admission wires a plugin for every Karmada kind; Admission runs them."""

from __future__ import annotations

from flotilla.apiserver.admission import Admission
from flotilla.apiserver.webhooks import register_karmada_admission

KINDS = [
    ("policy.karmada.io", "PropagationPolicy"),
    ("policy.karmada.io", "ClusterPropagationPolicy"),
    ("policy.karmada.io", "OverridePolicy"),
    ("policy.karmada.io", "ClusterOverridePolicy"),
    ("policy.karmada.io", "ClusterTaintPolicy"),
    ("cluster.karmada.io", "Cluster"),
    ("work.karmada.io", "ResourceBinding"),
    ("work.karmada.io", "ClusterResourceBinding"),
    ("config.karmada.io", "ResourceInterpreterCustomization"),
]


def test_every_kind_has_a_plugin() -> None:
    admission = Admission()
    register_karmada_admission(admission)
    for group, kind in KINDS:
        assert len(admission.plugins_for(group, kind)) == 1, kind


def test_admit_defaults_validates_and_warns() -> None:
    admission = Admission()
    register_karmada_admission(admission, allow_no_execute_taint_policy=False)
    pp = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": {"spreadConstraints": [{"maxGroups": 1}]},
            "failover": {"cluster": {"statePreservation": {"rules": [{"aliasLabelName": "id", "jsonPath": "{.id}"}]}}},
        },
    }
    result = admission.admit("policy.karmada.io", "PropagationPolicy", pp, None, "CREATE")
    assert result.causes == []
    assert len(result.warnings) == 1 and "purgeMode Directly" in result.warnings[0]
    assert pp["spec"]["failover"]["cluster"]["purgeMode"] == "Gracefully"

    ctp = {"metadata": {"name": "t"}, "spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}}
    result = admission.admit("policy.karmada.io", "ClusterTaintPolicy", ctp, None, "CREATE")
    assert [c.field for c in result.causes] == ["spec.taints[0]"]
    assert result.causes[0].message.startswith("Forbidden: Configuring taint with NoExecute effect is not allowed")
