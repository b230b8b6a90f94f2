"""Which interpreter operation fills a binding's replica fields (Karmada's applyReplicaInterpretation)."""

from __future__ import annotations

import pytest

from flotilla.interpreter import Operation
from flotilla.propagation.binding_spec import build_binding, replica_interpretation
from flotilla.runtime.options import DEFAULT_FEATURE_GATES


@pytest.mark.parametrize(("gate", "component", "replica", "expected"), [
    (True, True, True, Operation.INTERPRET_COMPONENT),
    (True, True, False, Operation.INTERPRET_COMPONENT),
    (True, False, True, Operation.INTERPRET_REPLICA),
    (False, True, True, Operation.INTERPRET_REPLICA),
    (False, True, False, None),
    (True, False, False, None),
])
def test_components_win_only_with_the_gate_and_the_hook(gate: bool, component: bool, replica: bool,
                                                         expected: Operation | None) -> None:
    assert replica_interpretation(multiple_pod_templates=gate, component_hook=component,
                                  replica_hook=replica) is expected


def test_the_gate_is_off_by_default_as_in_karmada() -> None:
    assert DEFAULT_FEATURE_GATES["MultiplePodTemplatesScheduling"] is False


def test_components_are_written_to_the_binding_spec() -> None:
    template = {"apiVersion": "example.io/v1", "kind": "Widget",
                "metadata": {"name": "w", "namespace": "ns", "uid": "u1"}}
    policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
              "metadata": {"name": "p", "namespace": "ns"}, "spec": {"placement": {}}}
    components = [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 2}]
    spec = build_binding(template, policy, components=components)["spec"]
    assert spec["components"] == components and "replicas" not in spec
    assert "components" not in build_binding(template, policy, components=[])["spec"]
