"""ResourceBinding / ClusterResourceBinding admission."""

from __future__ import annotations

import copy
from typing import Any

from flotilla.api import labels as L
from flotilla.apiserver.webhooks.resource_binding import ResourceBindingAdmission, validate_binding


def binding(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web-deployment", "namespace": "ns"}, "spec": {
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, **spec}}


def test_permanent_id_added_when_missing() -> None:
    rb = binding()
    ResourceBindingAdmission(cluster_scoped=False, new_id=lambda: "rb-1").default(rb, None, "CREATE")
    assert rb["metadata"]["labels"] == {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: "rb-1"}
    ResourceBindingAdmission(cluster_scoped=False, new_id=lambda: "rb-2").default(rb, None, "UPDATE")
    assert rb["metadata"]["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL] == "rb-1"
    crb = binding()
    crb["metadata"]["labels"] = {L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: ""}
    ResourceBindingAdmission(cluster_scoped=True, new_id=lambda: "crb-1").default(crb, None, "UPDATE")
    assert crb["metadata"]["labels"] == {L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: "crb-1"}


def errors(obj: dict[str, Any]) -> list[str]:
    return [f"{c.field}: {c.message}" for c in validate_binding(obj)]


def test_dependencies_annotation_must_be_json() -> None:
    rb = binding()
    rb["metadata"]["annotations"] = {L.DEPENDENCIES_ANNOTATION: "[{"}
    assert errors(rb) == [
        'metadata.annotations.resourcebinding.karmada.io/dependencies: Invalid value: "[{": annotation value must be '
        "a valid JSON"
    ]
    rb["metadata"]["annotations"] = {L.DEPENDENCIES_ANNOTATION: '[{"apiVersion":"v1","kind":"ConfigMap","name":"c"}]'}
    assert errors(rb) == []


def test_components_and_clusters() -> None:
    rb = binding(components=[{"name": "jm"}, {"name": "jm"}, {"name": ""}],
                 clusters=[{"name": "m1"}, {"name": "m2"}, {"name": "m1"}])
    assert errors(rb) == [
        'spec.components[1].name: Invalid value: "jm": component names must be unique',
        'spec.components[2].name: Invalid value: "": component names must be non-empty',
        'spec.clusters[2].name: Duplicate value: "m1"',
    ]


def test_updates_only_refuse_new_problems() -> None:
    plugin = ResourceBindingAdmission(cluster_scoped=False)
    old = binding(clusters=[{"name": "m1"}, {"name": "m1"}])
    status_update = copy.deepcopy(old)
    status_update["status"] = {"schedulerObservedGeneration": 2}
    assert plugin.validate(status_update, old, "UPDATE") == []
    worse = copy.deepcopy(old)
    worse["spec"]["components"] = [{"name": ""}]
    assert [c.field for c in plugin.validate(worse, old, "UPDATE")] == ["spec.components[0].name"]
