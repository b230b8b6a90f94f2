"""Claim metadata: how a (Cluster)PropagationPolicy marks the resource templates it has taken.

Pure functions, no I/O, inputs never mutated. The resource detector claims a template by writing a
label with the policy's permanent id and annotations naming the policy, then updates the template:

* PropagationPolicy: label ``propagationpolicy.karmada.io/permanent-id=<id>``, annotations
  ``propagationpolicy.karmada.io/namespace`` and ``propagationpolicy.karmada.io/name``. Claiming
  also strips any ClusterPropagationPolicy claim (label and annotation). Nothing is written when the
  template already carries this policy's id and no ClusterPropagationPolicy label.
* ClusterPropagationPolicy: label ``clusterpropagationpolicy.karmada.io/permanent-id=<id>`` and
  annotation ``clusterpropagationpolicy.karmada.io/name``; a PropagationPolicy claim is left as it
  is. Nothing is written when the template already carries this id.

A template counts as claimed by a PP only when the namespace and name annotations and the id label
are all non-empty; by a CPP when the name annotation and the id label are non-empty; the PP claim is
looked at first. The same claim metadata is put on the binding made for the template.

Patches are JSON merge patches (RFC 7386) of the ``metadata`` only: ``None`` deletes a key. Apply
them with :func:`flotilla.kube.patch.apply_merge_patch` or send them as
``application/merge-patch+json``; :func:`claim` / :func:`unclaim` return the patched object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.metadata import string_annotations, string_labels
from flotilla.kube.objects import meta_of

__all__ = [
    "CLAIMED_BY_LABEL",
    "CLUSTER_PROPAGATION_POLICY_FINALIZER",
    "CPP_CLAIM_ANNOTATIONS",
    "CPP_CLAIM_LABELS",
    "CPP_NAME_ANNOTATION",
    "CPP_PERMANENT_ID_LABEL",
    "KARMADA_KEY_MARKER",
    "NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL",
    "PP_CLAIM_ANNOTATIONS",
    "PP_CLAIM_LABELS",
    "PP_NAMESPACE_ANNOTATION",
    "PP_NAME_ANNOTATION",
    "PP_PERMANENT_ID_LABEL",
    "PROPAGATION_POLICY_FINALIZER",
    "ClaimRef",
    "binding_claim_metadata",
    "claim",
    "claim_metadata",
    "claim_of",
    "claim_patch",
    "claimed_by_other_controller",
    "needs_claim_cleanup",
    "policy_permanent_id",
    "resource_change_by_karmada",
    "specification_changed",
    "unclaim",
    "unclaim_patch",
]

PP_PERMANENT_ID_LABEL = "propagationpolicy.karmada.io/permanent-id"
PP_NAMESPACE_ANNOTATION = "propagationpolicy.karmada.io/namespace"
PP_NAME_ANNOTATION = "propagationpolicy.karmada.io/name"
CPP_PERMANENT_ID_LABEL = "clusterpropagationpolicy.karmada.io/permanent-id"
CPP_NAME_ANNOTATION = "clusterpropagationpolicy.karmada.io/name"

PP_CLAIM_LABELS: tuple[str, ...] = (PP_PERMANENT_ID_LABEL,)
PP_CLAIM_ANNOTATIONS: tuple[str, ...] = (PP_NAMESPACE_ANNOTATION, PP_NAME_ANNOTATION)
CPP_CLAIM_LABELS: tuple[str, ...] = (CPP_PERMANENT_ID_LABEL,)
CPP_CLAIM_ANNOTATIONS: tuple[str, ...] = (CPP_NAME_ANNOTATION,)

#: A template carrying this label (any non-empty value, e.g. ``MultiClusterService``) belongs to
#: another controller: the detector leaves it alone.
CLAIMED_BY_LABEL = "resourcetemplate.karmada.io/claimed-by"

#: The one label with a Karmada prefix that is meant for users (it is not "a change by Karmada").
NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL = "namespace.karmada.io/skip-auto-propagation"

#: Any label/annotation key containing this is treated as written by Karmada (lazy activation).
KARMADA_KEY_MARKER = ".karmada.io"

PROPAGATION_POLICY_FINALIZER = "karmada.io/propagation-policy-controller"
CLUSTER_PROPAGATION_POLICY_FINALIZER = "karmada.io/cluster-propagation-policy-controller"


@dataclass(frozen=True)
class ClaimRef:
    """The policy a template (or binding) is claimed by, as read from its metadata."""

    cluster_scoped: bool  # True for a ClusterPropagationPolicy
    name: str
    namespace: str  # "" for a ClusterPropagationPolicy
    permanent_id: str

    @property
    def id_label(self) -> str:
        return CPP_PERMANENT_ID_LABEL if self.cluster_scoped else PP_PERMANENT_ID_LABEL

    def claim_labels(self) -> dict[str, str]:
        """The label selector (``{id label: id}``) that finds objects carrying this claim."""
        return {self.id_label: self.permanent_id}


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _is_cluster_policy(policy: Mapping[str, Any]) -> bool:
    kind = policy.get("kind")
    if kind == "ClusterPropagationPolicy":
        return True
    if kind == "PropagationPolicy":
        return False
    return not meta_of(policy).get("namespace")


def policy_permanent_id(policy: Mapping[str, Any]) -> str:
    """The policy's permanent id (from its own ``…/permanent-id`` label; ``""`` when absent)."""
    label = CPP_PERMANENT_ID_LABEL if _is_cluster_policy(policy) else PP_PERMANENT_ID_LABEL
    return string_labels(policy).get(label, "")


def _merge_patch(
    labels: Mapping[str, str | None], annotations: Mapping[str, str | None]
) -> dict[str, Any] | None:
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"metadata": metadata} if metadata else None


def _apply_metadata_patch(obj: Mapping[str, Any], patch: Mapping[str, Any] | None) -> dict[str, Any]:
    result = json_copy(dict(obj))
    if patch is None:
        return result
    meta = result.get("metadata")
    if not isinstance(meta, dict):
        meta = result["metadata"] = {}
    for field, changes in patch["metadata"].items():
        current = meta.get(field)
        current = dict(current) if isinstance(current, Mapping) else {}
        for key, value in changes.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        meta[field] = current
    return result


# ---------------------------------------------------------------------------------------------
# Reading claims
# ---------------------------------------------------------------------------------------------


def claim_of(obj: Mapping[str, Any]) -> ClaimRef | None:
    """Who has claimed ``obj`` (a template or a binding), or None. A PP claim wins over a CPP claim."""
    labels, annotations = string_labels(obj), string_annotations(obj)
    namespace = annotations.get(PP_NAMESPACE_ANNOTATION, "")
    name = annotations.get(PP_NAME_ANNOTATION, "")
    policy_id = labels.get(PP_PERMANENT_ID_LABEL, "")
    if namespace and name and policy_id:
        return ClaimRef(False, name, namespace, policy_id)
    name = annotations.get(CPP_NAME_ANNOTATION, "")
    policy_id = labels.get(CPP_PERMANENT_ID_LABEL, "")
    if name and policy_id:
        return ClaimRef(True, name, "", policy_id)
    return None


def claimed_by_other_controller(obj: Mapping[str, Any]) -> bool:
    """True when the template carries a non-empty ``resourcetemplate.karmada.io/claimed-by`` label."""
    return bool(string_labels(obj).get(CLAIMED_BY_LABEL, ""))


def needs_claim_cleanup(obj: Mapping[str, Any], claim_labels: Mapping[str, str]) -> bool:
    """Whether ``obj`` still carries exactly these claim labels (``NeedCleanupClaimMetadata``).

    Cleanup after a policy is deleted only touches objects that still carry that policy's id, so a
    claim taken meanwhile by a newer policy is not removed by mistake.
    """
    labels = string_labels(obj)
    return all(labels.get(k, "") == v for k, v in claim_labels.items())


# ---------------------------------------------------------------------------------------------
# Writing claims
# ---------------------------------------------------------------------------------------------


def claim_metadata(policy: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """``(labels, annotations)`` that claim an object for ``policy`` (also put on its binding)."""
    meta = meta_of(policy)
    policy_id = policy_permanent_id(policy)
    name = str(meta.get("name") or "")
    if _is_cluster_policy(policy):
        return {CPP_PERMANENT_ID_LABEL: policy_id}, {CPP_NAME_ANNOTATION: name}
    namespace = str(meta.get("namespace") or "")
    return (
        {PP_PERMANENT_ID_LABEL: policy_id},
        {PP_NAMESPACE_ANNOTATION: namespace, PP_NAME_ANNOTATION: name},
    )


def claim_patch(obj: Mapping[str, Any], policy: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge patch that makes ``policy`` the claimer of ``obj``; None when no update is needed.

    PP (``ClaimPolicyForObject``): no update when ``obj`` already has this policy's id label and no
    CPP id label (the name/namespace annotations are then not re-checked, as upstream); otherwise
    remove the CPP claim (if its label key is present) and write the PP claim.
    CPP (``ClaimClusterPolicyForObject``): no update when the CPP id label equals the policy's id;
    otherwise write the CPP claim (any PP claim stays).
    """
    labels = string_labels(obj)
    want_labels, want_annotations = claim_metadata(policy)
    label_changes: dict[str, str | None] = dict(want_labels)
    annotation_changes: dict[str, str | None] = dict(want_annotations)
    raw_labels = meta_of(obj).get("labels")
    has_cpp_label = isinstance(raw_labels, Mapping) and CPP_PERMANENT_ID_LABEL in raw_labels
    if _is_cluster_policy(policy):
        if labels.get(CPP_PERMANENT_ID_LABEL, "") == want_labels[CPP_PERMANENT_ID_LABEL]:
            return None
    else:
        if (
            not has_cpp_label
            and labels
            and labels.get(PP_PERMANENT_ID_LABEL, "") == want_labels[PP_PERMANENT_ID_LABEL]
        ):
            return None
        if has_cpp_label:
            label_changes.update(dict.fromkeys(CPP_CLAIM_LABELS))
            annotation_changes.update(dict.fromkeys(CPP_CLAIM_ANNOTATIONS))
    return _merge_patch(label_changes, annotation_changes)


def claim(obj: Mapping[str, Any], policy: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` claimed by ``policy`` (unchanged copy when :func:`claim_patch` is None)."""
    return _apply_metadata_patch(obj, claim_patch(obj, policy))


def unclaim_patch(
    obj: Mapping[str, Any], cluster_scoped: bool, *, only_if: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """Merge patch removing the PP (``cluster_scoped=False``) or CPP claim metadata from ``obj``.

    ``only_if`` (claim labels such as :meth:`ClaimRef.claim_labels`) restricts the removal to an
    object still carrying them (:func:`needs_claim_cleanup`). None when nothing is to be removed.
    """
    if only_if is not None and not needs_claim_cleanup(obj, only_if):
        return None
    label_keys = CPP_CLAIM_LABELS if cluster_scoped else PP_CLAIM_LABELS
    annotation_keys = CPP_CLAIM_ANNOTATIONS if cluster_scoped else PP_CLAIM_ANNOTATIONS
    meta = meta_of(obj)
    raw_labels = meta.get("labels")
    raw_annotations = meta.get("annotations")
    raw_labels = raw_labels if isinstance(raw_labels, Mapping) else {}
    raw_annotations = raw_annotations if isinstance(raw_annotations, Mapping) else {}
    labels = {k: None for k in label_keys if k in raw_labels}
    annotations = {k: None for k in annotation_keys if k in raw_annotations}
    return _merge_patch(labels, annotations)


def unclaim(
    obj: Mapping[str, Any], cluster_scoped: bool, *, only_if: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A copy of ``obj`` without the PP or CPP claim metadata (see :func:`unclaim_patch`)."""
    return _apply_metadata_patch(obj, unclaim_patch(obj, cluster_scoped, only_if=only_if))


def binding_claim_metadata(
    existing_binding: Mapping[str, Any] | None, policy: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and annotations of the binding after the detector applies ``policy`` to it.

    The policy's claim metadata is merged over the binding's existing labels/annotations; when a PP
    applies, any CPP claim metadata is removed (``excludeClusterPolicy``). A CPP does not remove a
    PP claim from an existing binding.
    """
    labels = string_labels(existing_binding or {})
    annotations = string_annotations(existing_binding or {})
    want_labels, want_annotations = claim_metadata(policy)
    labels.update(want_labels)
    annotations.update(want_annotations)
    if not _is_cluster_policy(policy) and CPP_PERMANENT_ID_LABEL in labels:
        for key in CPP_CLAIM_LABELS:
            labels.pop(key, None)
        for key in CPP_CLAIM_ANNOTATIONS:
            annotations.pop(key, None)
    return labels, annotations


# ---------------------------------------------------------------------------------------------
# Update-event filters of the detector (pkg/util/eventfilter)
# ---------------------------------------------------------------------------------------------


def _without_ignored_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without ``status``, ``metadata.managedFields`` and ``metadata.resourceVersion``: a view for
    comparisons that shares everything else with ``obj`` (new dicts at the top and for the metadata only, so
    the caller may replace or drop their keys, never change a nested value)."""
    result = {k: v for k, v in obj.items() if k != "status"}
    meta = result.get("metadata")
    if isinstance(meta, dict):
        result["metadata"] = {k: v for k, v in meta.items() if k not in ("managedFields", "resourceVersion")}
    return result


def specification_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an update is worth a reconcile: the objects differ once ``status``,
    ``metadata.managedFields`` and ``metadata.resourceVersion`` are dropped (label and annotation
    changes count)."""
    return _without_ignored_fields(old) != _without_ignored_fields(new)


def _without_karmada_changes(obj: Mapping[str, Any]) -> dict[str, Any]:
    result = _without_ignored_fields(obj)
    meta = result.get("metadata")
    if not isinstance(meta, dict):
        return result
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if not isinstance(values, dict):
            continue
        kept = {
            k: v
            for k, v in values.items()
            if KARMADA_KEY_MARKER not in k
            or (field == "labels" and k == NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL)
        }
        if kept:
            meta[field] = kept
        else:
            meta.pop(field)
    meta.pop("generation", None)
    return result


def resource_change_by_karmada(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an update was made by Karmada itself (used for lazy activation).

    True when the objects are equal after the :func:`specification_changed` removals plus
    ``metadata.generation`` and every label/annotation whose key contains ``.karmada.io``
    (except the label ``namespace.karmada.io/skip-auto-propagation``); an emptied labels or
    annotations map counts as absent.
    """
    return _without_karmada_changes(old) == _without_karmada_changes(new)
