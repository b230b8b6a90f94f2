"""The detector fills a binding's ``spec.components`` from a stored ResourceInterpreterCustomization.

Karmada's multi-component scheduling: with the ``MultiplePodTemplatesScheduling`` gate on (off by default, as in
Karmada) and an InterpretComponent hook for the template's kind, the binding gets ``spec.components`` and neither
``spec.replicas`` nor ``spec.replicaRequirements``; otherwise InterpretReplica fills those as before.
"""

from __future__ import annotations

from typing import Any

from flotilla.api.resources import RESOURCE_INTERPRETER_CUSTOMIZATIONS
from flotilla.client import Resource
from tests.integration.controllers.test_detector import (  # noqa: F401 - the plane fixture
    CLUSTERS,
    NS,
    RBS,
    Plane,
    eventually,
    plane_fixture,
    policy,
)

CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
WIDGETS = Resource("example.io", "v1", "widgets", "Widget", True)

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.io"},
    "spec": {"group": "example.io", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}

# a two-template kind: a coordinator and workers, each with its own pod template
COMPONENTS = """
local kube = require("kube")
function GetComponents(obj)
  local out = {}
  for _, role in ipairs({"coordinator", "worker"}) do
    local part = obj.spec[role]
    local req = kube.accuratePodRequirements(part.template)
    out[#out + 1] = { name = role, replicas = part.replicas,
                      replicaRequirements = { resourceRequest = req.resourceRequest } }
  end
  return out
end
"""
REPLICAS = """
function GetReplicas(obj)
  return obj.spec.worker.replicas, nil
end
"""


def ric(components: str = COMPONENTS) -> dict[str, Any]:
    return {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
            "metadata": {"name": "widgets"},
            "spec": {"target": {"apiVersion": "example.io/v1", "kind": "Widget"},
                     "customizations": {"componentResource": {"luaScript": components},
                                        "replicaResource": {"luaScript": REPLICAS}}}}


def pod(cpu: str, memory: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "image": "w:1",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}


def widget(name: str = "w1") -> dict[str, Any]:
    return {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": name, "namespace": NS},
            "spec": {"coordinator": {"replicas": 1, "template": pod("1", "1Gi")},
                     "worker": {"replicas": 3, "template": pod("500m", "2Gi")}}}


def widget_policy() -> dict[str, Any]:
    return policy("widgets", selectors=[{"apiVersion": "example.io/v1", "kind": "Widget"}],
                  placement={"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}]})


async def setup(plane: Plane, customization: dict[str, Any]) -> None:
    await plane.client.create(CRDS, CRD)
    await plane.client.create(RESOURCE_INTERPRETER_CUSTOMIZATIONS, customization)
    await plane.client.create(WIDGETS, widget(), NS)


async def binding_spec(plane: Plane, name: str = "w1") -> dict[str, Any]:
    binding = await plane.binding(f"{name}-widget")
    spec: dict[str, Any] = binding["spec"]
    return spec


async def test_components_of_a_custom_kind_come_from_its_customization_with_the_gate_on(plane: Plane) -> None:
    await setup(plane, ric())
    await plane.start(controllers=["detector"], gates={"MultiplePodTemplatesScheduling": True})
    await plane.client.create(Resource("policy.karmada.io", "v1alpha1", "propagationpolicies",
                                       "PropagationPolicy", True), widget_policy(), NS)
    spec = await binding_spec(plane)
    assert spec["components"] == [
        {"name": "coordinator", "replicas": 1,
         "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "1Gi"}}},
        {"name": "worker", "replicas": 3,
         "replicaRequirements": {"resourceRequest": {"cpu": "500m", "memory": "2Gi"}}},
    ]
    # as in Karmada, the components replace the single-template fields
    assert "replicas" not in spec and "replicaRequirements" not in spec

    # a change of the template reaches the binding's components
    await plane.client.patch(WIDGETS, "w1", {"spec": {"worker": {"replicas": 5}}}, namespace=NS)

    async def five_workers() -> bool:
        components = (await binding_spec(plane)).get("components") or []
        return [c["replicas"] for c in components] == [1, 5]

    await eventually(five_workers, what="the worker component at 5 replicas")


async def test_without_the_gate_the_replica_hook_fills_the_binding(plane: Plane) -> None:
    await setup(plane, ric())
    await plane.start(controllers=["detector"])  # Karmada's default: MultiplePodTemplatesScheduling off
    await plane.client.create(Resource("policy.karmada.io", "v1alpha1", "propagationpolicies",
                                       "PropagationPolicy", True), widget_policy(), NS)
    spec = await binding_spec(plane)
    assert spec["replicas"] == 3
    assert "components" not in spec


async def test_a_failing_component_script_is_reported_on_the_template(plane: Plane) -> None:
    await setup(plane, ric("function GetComponents(obj) return obj.spec.missing.replicas end"))
    await plane.start(controllers=["detector"], gates={"MultiplePodTemplatesScheduling": True})
    await plane.client.create(Resource("policy.karmada.io", "v1alpha1", "propagationpolicies",
                                       "PropagationPolicy", True), widget_policy(), NS)

    async def reported() -> list[dict[str, Any]]:
        return await plane.events("GetComponentsFailed", "w1")

    events = await eventually(reported, what="a GetComponentsFailed Event")
    assert "spec.customizations.componentResource" in events[0]["message"]
    assert await plane.maybe(RBS, "w1-widget") is None


async def test_with_the_gate_the_scheduler_places_the_whole_set_where_it_fits(plane: Plane) -> None:
    """Detector and scheduler together: one set (1 CPU + 3 x 500m = 2.5 CPU) does not fit in the first cluster."""
    await setup(plane, ric())
    enablements = [{"groupVersion": "example.io/v1", "resources": [{"name": "widgets", "kind": "Widget"}]}]
    for name, cpu in (("a-small", "2"), ("b-big", "64")):
        await plane.client.create(CLUSTERS, {
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"syncMode": "Push", "apiEndpoint": f"https://{name}.example:6443"}})
        await plane.client.patch(CLUSTERS, name, {"status": {
            "apiEnablements": enablements,
            "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "ready",
                            "lastTransitionTime": "2024-01-01T00:00:00Z"}],
            "resourceSummary": {"allocatable": {"cpu": cpu, "memory": "200Gi", "pods": "110"}}}},
            subresource="status")
    await plane.start(controllers=["detector", "scheduler"], gates={"MultiplePodTemplatesScheduling": True})
    await plane.client.create(Resource("policy.karmada.io", "v1alpha1", "propagationpolicies",
                                       "PropagationPolicy", True), widget_policy(), NS)

    async def placed() -> list[dict[str, Any]]:
        return (await binding_spec(plane)).get("clusters") or []

    assert await eventually(placed, what="the widget placed") == [{"name": "b-big"}]
