"""The forward-path floor's bodies (``flotilla.bench.floor``) have the shape of the controllers' writes.

The floor makes no decisions, but the driver recognises its objects by the names and annotations Karmada's
controllers give them, and its writes must cost what theirs cost: these tests hold the bodies to that.
"""

from __future__ import annotations

from typing import Any

from flotilla.api import labels as L
from flotilla.bench.floor import binding_for, claim_patch, manifest_for, work_for
from flotilla.bench.workloads import KINDS, NAMESPACE, workload
from flotilla.policy.naming import generate_binding_name, generate_work_name

CLUSTERS = ["member1", "member2", "member3"]


def claimed_template(kind: str = "deployment") -> dict[str, Any]:
    obj = workload(KINDS[kind], "t00007", "run-1")
    obj["metadata"].update(namespace=NAMESPACE, uid="uid-7", resourceVersion="42", generation=1,
                           creationTimestamp="2026-12-01T00:00:00Z",
                           managedFields=[{"manager": "kubectl"}])
    obj["metadata"].setdefault("labels", {})[L.PROPAGATION_POLICY_PERMANENT_ID_LABEL] = "pid"
    obj["status"] = {"replicas": 1}
    return obj


def test_the_claim_names_the_policy_as_the_detector_does() -> None:
    patch = claim_patch("pid")
    assert patch["metadata"]["labels"] == {L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: "pid"}
    assert patch["metadata"]["annotations"][L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION] == NAMESPACE


def test_the_binding_is_owned_by_its_template_and_not_yet_scheduled() -> None:
    for kind in ("deployment", "flink"):
        template = claimed_template(kind)
        binding = binding_for(template, "pid", CLUSTERS)
        meta = binding["metadata"]
        assert meta["name"] == generate_binding_name(template["kind"], "t00007")
        assert meta["name"] == KINDS[kind].binding_name("t00007")  # what the driver looks for
        assert meta["ownerReferences"][0]["uid"] == "uid-7" and meta["ownerReferences"][0]["controller"] is True
        assert meta["finalizers"] == [L.BINDING_CONTROLLER_FINALIZER]
        assert binding["spec"]["resource"] == {"apiVersion": template["apiVersion"], "kind": template["kind"],
                                               "name": "t00007", "namespace": NAMESPACE, "uid": "uid-7",
                                               "resourceVersion": "42"}
        assert "clusters" not in binding["spec"]
        assert binding["spec"]["placement"]["clusterAffinity"]["clusterNames"] == CLUSTERS


def test_the_manifest_is_the_template_without_status_or_system_fields() -> None:
    template = claimed_template()
    binding = binding_for(template, "pid", CLUSTERS)
    manifest = manifest_for(template, binding, "member2")
    meta = manifest["metadata"]
    assert "status" not in manifest and manifest["spec"] == template["spec"]
    for system in ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"):
        assert system not in meta, system
    assert meta["labels"][L.MANAGED_LABEL] == L.MANAGED_LABEL_VALUE
    assert meta["labels"]["app"] == "t00007"  # the template's own labels stay
    assert meta["annotations"][L.WORK_NAMESPACE_ANNOTATION] == "karmada-es-member2"
    assert meta["annotations"][L.RESOURCE_BINDING_NAME_ANNOTATION] == binding["metadata"]["name"]
    assert template["metadata"]["uid"] == "uid-7" and "status" in template  # the template is not changed


def test_the_work_sits_in_the_execution_space_and_names_its_binding() -> None:
    template = claimed_template()
    binding = binding_for(template, "pid", CLUSTERS)
    work = work_for(manifest_for(template, binding, "member3"), binding, "member3")
    meta = work["metadata"]
    assert meta["namespace"] == "karmada-es-member3"
    assert meta["name"] == generate_work_name("Deployment", "t00007", NAMESPACE)
    assert meta["annotations"] == {L.RESOURCE_BINDING_NAME_ANNOTATION: binding["metadata"]["name"],
                                   L.RESOURCE_BINDING_NAMESPACE_ANNOTATION: NAMESPACE}
    assert meta["finalizers"] == [L.EXECUTION_CONTROLLER_FINALIZER]
    assert work["spec"]["workload"]["manifests"][0]["metadata"]["name"] == "t00007"
