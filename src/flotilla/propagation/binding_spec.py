"""The (Cluster)ResourceBinding the resource detector makes for a template claimed by a policy.

Pure functions, no I/O, inputs never mutated.

A namespaced template always gets a ResourceBinding in its namespace (even when a
ClusterPropagationPolicy claims it); a cluster-scoped template gets a ClusterResourceBinding. The
binding is named ``<name>-<kind>`` (lower case), is controlled by the template (an owner reference
with ``controller`` and ``blockOwnerDeletion``, so the garbage collector deletes it with the
template), carries the binding controller's finalizer and the policy's claim labels/annotations.

``spec`` written by the detector:

* ``resource``: ``apiVersion``, ``kind``, ``namespace`` (namespaced templates), ``name``, ``uid``,
  ``resourceVersion`` of the template (so every template change bumps the binding's generation);
* ``replicas`` and ``replicaRequirements`` from the interpreter's InterpretReplica hook (absent
  when the kind has no hook or the answer is 0 / None);
* from the policy: ``placement`` (always present, ``{}`` for an empty one: attached dependency
  bindings are the ones without a placement), ``propagateDeps`` (only when true), ``schedulerName``,
  ``failover``, ``conflictResolution``, ``preserveResourcesOnDeletion``, ``suspension`` (the
  policy's part; a ``scheduling`` flag set by others is kept), ``schedulePriority`` (when a
  priority was resolved).

The policy's ``restore.flotilla.io/*`` annotations (native restore settings, D20) are copied to the binding's
annotations; on update the ones the policy no longer has are removed.

On update only those fields, the labels/annotations/finalizers (merged) and the owner references
are written: ``spec.clusters``, ``gracefulEvictionTasks``, ``requiredBy``,
``rescheduleTriggeredAt`` and the status belong to other controllers. A ClusterResourceBinding's
``propagateDeps`` and ``schedulePriority`` are set at creation only, as in Karmada.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flotilla.api import labels as L
from flotilla.failover.restore import POLICY_ANNOTATION_PREFIX, policy_restore_annotations
from flotilla.interpreter.operations import Operation
from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.jsondiff import merge_patch_diff, with_precondition
from flotilla.kube.metadata import string_map
from flotilla.kube.objects import meta_of, spec_of
from flotilla.policy.claims import CPP_CLAIM_ANNOTATIONS, CPP_CLAIM_LABELS, claim_metadata
from flotilla.policy.naming import generate_binding_name

__all__ = [
    "BINDING_API_VERSION",
    "RB_UPDATED_SPEC_FIELDS",
    "CRB_UPDATED_SPEC_FIELDS",
    "OwnerConflict",
    "binding_kind_for",
    "binding_name_for",
    "binding_update_patch",
    "build_binding",
    "replica_interpretation",
    "controller_owner",
    "controller_ref",
    "owner_conflict",
    "resource_ref",
]

BINDING_API_VERSION = "work.karmada.io/v1alpha2"
RESOURCE_BINDING = "ResourceBinding"
CLUSTER_RESOURCE_BINDING = "ClusterResourceBinding"

#: ``spec`` fields the detector overwrites on an existing ResourceBinding (``suspension`` is merged).
RB_UPDATED_SPEC_FIELDS: tuple[str, ...] = (
    "resource",
    "replicaRequirements",
    "replicas",
    "components",
    "propagateDeps",
    "schedulerName",
    "placement",
    "failover",
    "conflictResolution",
    "preserveResourcesOnDeletion",
    "schedulePriority",
    "suspension",
    "workloadAffinityGroups",
)
#: The same for a ClusterResourceBinding.
CRB_UPDATED_SPEC_FIELDS: tuple[str, ...] = tuple(
    f for f in RB_UPDATED_SPEC_FIELDS if f not in ("propagateDeps", "schedulePriority", "workloadAffinityGroups")
)


class OwnerConflict(Exception):
    """The binding that exists is controlled by another object (an older template with the same
    name): wait until the garbage collector removed it."""


def binding_kind_for(template: Mapping[str, Any]) -> str:
    """``ResourceBinding`` for a namespaced template, ``ClusterResourceBinding`` otherwise."""
    return RESOURCE_BINDING if meta_of(template).get("namespace") else CLUSTER_RESOURCE_BINDING


def binding_name_for(template: Mapping[str, Any]) -> str:
    return generate_binding_name(str(template.get("kind") or ""), str(meta_of(template).get("name") or ""))


def resource_ref(template: Mapping[str, Any]) -> dict[str, Any]:
    """``spec.resource``: the template's identity and the resourceVersion the binding reflects."""
    meta = meta_of(template)
    ref: dict[str, Any] = {"apiVersion": template.get("apiVersion") or "", "kind": template.get("kind") or ""}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    ref["name"] = meta.get("name") or ""
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = str(meta["resourceVersion"])
    return ref


def controller_ref(owner: Mapping[str, Any]) -> dict[str, Any]:
    """An owner reference making ``owner`` the controller (``controller``, ``blockOwnerDeletion``)."""
    meta = meta_of(owner)
    return {
        "apiVersion": owner.get("apiVersion") or "",
        "kind": owner.get("kind") or "",
        "name": meta.get("name") or "",
        "uid": meta.get("uid") or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_owner(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true``, if any."""
    refs = meta_of(obj).get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def owner_conflict(existing: Mapping[str, Any], owner_uid: str) -> bool:
    """The existing object is controlled by something other than the object with ``owner_uid``."""
    ref = controller_owner(existing)
    return ref is not None and ref.get("uid") != owner_uid


def _policy_suspension(policy: Mapping[str, Any]) -> dict[str, Any] | None:
    suspension = spec_of(policy).get("suspension")
    return json_copy(dict(suspension)) if isinstance(suspension, Mapping) else None


def replica_interpretation(*, multiple_pod_templates: bool, component_hook: bool, replica_hook: bool) -> Operation | None:
    """The interpreter operation that fills a binding's replica fields (Karmada's ``applyReplicaInterpretation``).

    InterpretComponent (``spec.components``) when the ``MultiplePodTemplatesScheduling`` gate is on and the kind
    has that hook; otherwise InterpretReplica (``spec.replicas``, ``spec.replicaRequirements``) when it has that
    hook; otherwise none (the template is not a workload).
    """
    if multiple_pod_templates and component_hook:
        return Operation.INTERPRET_COMPONENT
    if replica_hook:
        return Operation.INTERPRET_REPLICA
    return None


def build_binding(
    template: Mapping[str, Any],
    policy: Mapping[str, Any],
    *,
    replicas: int = 0,
    replica_requirements: Mapping[str, Any] | None = None,
    components: Sequence[Mapping[str, Any]] | None = None,
    schedule_priority: int | None = None,
) -> dict[str, Any]:
    """The binding the detector wants for ``template`` claimed by ``policy`` (a PP or CPP object).

    ``replicas``/``replica_requirements``: the interpreter's InterpretReplica answer (leave the
    defaults when the kind has no such hook). ``components``: the InterpretComponent answer, set instead of
    them when :func:`replica_interpretation` chose that operation. ``schedule_priority``: the value resolved from the
    policy's ``schedulePriority`` (None: not set).
    """
    meta = meta_of(template)
    kind = binding_kind_for(template)
    labels, annotations = claim_metadata(policy)
    binding_meta: dict[str, Any] = {"name": binding_name_for(template)}
    if kind == RESOURCE_BINDING:
        binding_meta["namespace"] = meta.get("namespace")
    binding_meta["labels"] = labels
    binding_meta["annotations"] = {**annotations, **policy_restore_annotations(policy)}
    binding_meta["ownerReferences"] = [controller_ref(template)]
    binding_meta["finalizers"] = [
        L.BINDING_CONTROLLER_FINALIZER if kind == RESOURCE_BINDING else L.CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER
    ]

    pspec = spec_of(policy)
    spec: dict[str, Any] = {"resource": resource_ref(template)}
    if pspec.get("propagateDeps") is True:
        spec["propagateDeps"] = True
    if replica_requirements is not None:
        spec["replicaRequirements"] = json_copy(dict(replica_requirements))
    if replicas:
        spec["replicas"] = int(replicas)
    if components:
        spec["components"] = json_copy([dict(c) for c in components])
    placement = pspec.get("placement")
    spec["placement"] = json_copy(dict(placement)) if isinstance(placement, Mapping) else {}
    if pspec.get("schedulerName"):
        spec["schedulerName"] = pspec["schedulerName"]
    if isinstance(pspec.get("failover"), Mapping):
        spec["failover"] = json_copy(dict(pspec["failover"]))
    if pspec.get("conflictResolution"):
        spec["conflictResolution"] = pspec["conflictResolution"]
    if isinstance(pspec.get("preserveResourcesOnDeletion"), bool):
        spec["preserveResourcesOnDeletion"] = pspec["preserveResourcesOnDeletion"]
    suspension = _policy_suspension(policy)
    if suspension is not None:
        spec["suspension"] = suspension
    if schedule_priority is not None:
        spec["schedulePriority"] = {"priority": int(schedule_priority)}
    return {"apiVersion": BINDING_API_VERSION, "kind": kind, "metadata": binding_meta, "spec": spec}


def _merged_suspension(existing: Any, policy_part: dict[str, Any] | None) -> dict[str, Any] | None:
    """Karmada's ``MergePolicySuspension``: the policy's part replaces the binding's; ``scheduling``
    (written by other systems) is kept; nothing left -> no suspension."""
    scheduling = existing.get("scheduling") if isinstance(existing, Mapping) else None
    merged: dict[str, Any] = dict(policy_part or {})
    merged.pop("scheduling", None)
    if scheduling is not None:
        merged["scheduling"] = scheduling
    if policy_part is None and scheduling is None:
        return None
    return merged


def binding_update_patch(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge patch bringing the detector's fields of ``existing`` to ``desired`` (from
    :func:`build_binding`), with ``existing``'s resourceVersion as precondition; None if up to date.

    Labels, annotations and finalizers are merged (desired wins per key; when the desired claim is
    a PropagationPolicy's, any ClusterPropagationPolicy claim is removed), owner references are
    replaced, the spec fields in :data:`RB_UPDATED_SPEC_FIELDS` (:data:`CRB_UPDATED_SPEC_FIELDS`)
    are overwritten, ``suspension`` is merged. Raises :class:`OwnerConflict` when another object
    controls ``existing``.
    """
    dmeta = meta_of(desired)
    owners = dmeta.get("ownerReferences") or []
    owner_uid = owners[0].get("uid") if owners and isinstance(owners[0], Mapping) else ""
    if owner_conflict(existing, str(owner_uid or "")):
        ref = controller_owner(existing) or {}
        raise OwnerConflict(
            f"{existing.get('kind')} {meta_of(existing).get('name')} is controlled by another object "
            f"(uid {ref.get('uid')}); waiting for the garbage collector to remove it"
        )
    emeta = meta_of(existing)
    labels = string_map(emeta.get("labels"))
    labels.update(string_map(dmeta.get("labels")))
    annotations = string_map(emeta.get("annotations"))
    desired_annotations = string_map(dmeta.get("annotations"))
    for key in [k for k in annotations if k.startswith(POLICY_ANNOTATION_PREFIX) and k not in desired_annotations]:
        del annotations[key]  # the policy dropped a restore setting
    annotations.update(desired_annotations)
    pp_claim = L.PROPAGATION_POLICY_PERMANENT_ID_LABEL in string_map(dmeta.get("labels"))
    if pp_claim and L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL in labels:
        for key in CPP_CLAIM_LABELS:
            labels.pop(key, None)
        for key in CPP_CLAIM_ANNOTATIONS:
            annotations.pop(key, None)
    finalizers = [f for f in (emeta.get("finalizers") or []) if isinstance(f, str)]
    for f in dmeta.get("finalizers") or []:
        if f not in finalizers:
            finalizers.append(f)

    new_meta = json_copy(dict(emeta))
    new_meta["labels"] = labels
    new_meta["annotations"] = annotations
    if finalizers:
        new_meta["finalizers"] = finalizers
    new_meta["ownerReferences"] = json_copy(list(owners))
    for empty in ("labels", "annotations"):
        if not new_meta[empty] and empty not in emeta:
            del new_meta[empty]

    fields = RB_UPDATED_SPEC_FIELDS if existing.get("kind", desired.get("kind")) != CLUSTER_RESOURCE_BINDING \
        else CRB_UPDATED_SPEC_FIELDS
    espec = spec_of(existing)
    dspec = spec_of(desired)
    new_spec = json_copy(dict(espec))
    for field in fields:
        if field == "suspension":
            value = _merged_suspension(espec.get("suspension"), dspec.get("suspension"))
        else:
            value = json_copy(dspec.get(field))
        if value is None:
            new_spec.pop(field, None)
        else:
            new_spec[field] = value

    patch: dict[str, Any] = {}
    meta_patch = merge_patch_diff(emeta, new_meta)
    if meta_patch:
        patch["metadata"] = meta_patch
    spec_patch = merge_patch_diff(espec, new_spec)
    if spec_patch:
        patch["spec"] = spec_patch
    if not patch:
        return None
    return with_precondition(patch, existing)
