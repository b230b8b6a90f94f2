"""Applying a Work's manifests to a member cluster: what to do with each object, as Karmada's object watcher.

Pure functions, no I/O; inputs are never mutated. The execution controller
(:mod:`flotilla.controllers.execution`) reads the member object, asks :func:`decide_apply` (or
:func:`decide_delete`), and performs the answer.

Create / update (:func:`decide_apply`):

* no member object: **create** the manifest;
* a member object without ``karmada.io/managed=true`` belongs to someone else: it is **refused**
  unless the manifest's ``work.karmada.io/conflict-resolution`` is ``overwrite`` (the Work is then
  ``Applied=False``, with the message naming the conflict);
* otherwise the desired object keeps what the member owns (:func:`retain_cluster_fields`: its
  ``resourceVersion``, ``finalizers``, ``ownerReferences``, and the labels/annotations only the
  member set, except keys Karmada had put there earlier (listed in ``managed-labels`` /
  ``managed-annotations``) and no longer wants), then the interpreter's ``Retain`` hook (e.g. a
  Deployment labelled ``resourcetemplate.karmada.io/retain-replicas=true`` keeps the member's
  replicas); if that equals the pruned member object with the same retained fields nothing is
  written (**unchanged**), else the whole object is **updated** (PUT, the resourceVersion is the lock).

  Flotilla also skips the write when both the desired object and the member's pruned content are
  what they were right after its last write there (:class:`AppliedRecord`): members default fields
  the control plane's copy lacks, which would otherwise make every reconcile a (no-op) PUT.

Delete (:func:`decide_delete`): an absent object is done; a member object that is not managed is left
alone; a managed one is deleted (propagation ``Background``).

Work deletion (:func:`work_deletion_action`): ``preserveResourcesOnDeletion`` keeps the objects and
strips Karmada's metadata from them (:func:`preserved_manifest`); a Ready cluster gets its objects
deleted; a cluster that is not Ready keeps the Work (and its finalizer) until it is, unless the
cluster itself is being deleted (or is gone), then the member is not contacted. ``fenced`` is the
hook for fencing, D2 (a fenced cluster's Works are released without contacting it).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from flotilla.api import labels as L
from flotilla.cluster.health import is_ready
from flotilla.interpreter import InterpreterError, Operation, ResourceInterpreter, prune_irrelevant_fields
from flotilla.kube.metadata import string_annotations, string_labels
from flotilla.kube.objects import meta_of

__all__ = [
    "APPLIED",
    "APPLIED_FAILED",
    "APPLIED_SUCCESSFUL",
    "APPLIED_SUCCESSFUL_MESSAGE",
    "DISPATCHING",
    "MANAGED_RESOURCE_ANNOTATIONS",
    "MANAGED_RESOURCE_LABELS",
    "ApplyAction",
    "ApplyDecision",
    "AppliedRecord",
    "DeleteAction",
    "LazyRecord",
    "WorkDeletion",
    "applied_condition",
    "cluster_terminating",
    "content_changed",
    "content_digest",
    "decide_apply",
    "decide_delete",
    "dispatching_condition",
    "is_managed",
    "object_key",
    "preserved_manifest",
    "record_after_write",
    "refusal_message",
    "retain_cluster_fields",
    "retain_metadata",
    "work_deletion_action",
]

#: Labels Karmada puts on member objects (removed when a Work preserving its resources goes).
MANAGED_RESOURCE_LABELS: tuple[str, ...] = (
    L.RESOURCE_BINDING_PERMANENT_ID_LABEL,
    L.WORK_PERMANENT_ID_LABEL,
    L.MANAGED_LABEL,
)
#: Annotations Karmada puts on member objects (likewise).
MANAGED_RESOURCE_ANNOTATIONS: tuple[str, ...] = (
    L.MANAGED_ANNOTATIONS_ANNOTATION,
    L.MANAGED_LABELS_ANNOTATION,
    L.RESOURCE_BINDING_NAMESPACE_ANNOTATION,
    L.RESOURCE_BINDING_NAME_ANNOTATION,
    L.RESOURCE_TEMPLATE_UID_ANNOTATION,
    L.RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
    L.WORK_NAME_ANNOTATION,
    L.WORK_NAMESPACE_ANNOTATION,
)
_PP_CLAIM_LABELS = (L.PROPAGATION_POLICY_PERMANENT_ID_LABEL,)
_PP_CLAIM_ANNOTATIONS = (L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION, L.PROPAGATION_POLICY_NAME_ANNOTATION)
_CPP_CLAIM_LABELS = (L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,)
_CPP_CLAIM_ANNOTATIONS = (L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION,)

# Work conditions (work.karmada.io/v1alpha1)
APPLIED = "Applied"
APPLIED_SUCCESSFUL = "AppliedSuccessful"
APPLIED_SUCCESSFUL_MESSAGE = "Manifest has been successfully applied"
APPLIED_FAILED = "AppliedFailed"
DISPATCHING = "Dispatching"
_DISPATCHING_REASON = "Dispatching"
_DISPATCHING_MESSAGE = "Work is being dispatched to member clusters."
_SUSPEND_DISPATCHING_REASON = "SuspendDispatching"
_SUSPEND_DISPATCHING_MESSAGE = "Work dispatching is in a suspended state."


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _set_or_drop(meta: dict[str, Any], key: str, value: Any) -> None:
    if value:
        meta[key] = value
    else:
        meta.pop(key, None)


def object_key(obj: Mapping[str, Any]) -> str:
    """``<apiVersion>, Kind=<kind>/<namespace>/<name>``: one object of one cluster (version records)."""
    meta = meta_of(obj)
    return f"{obj.get('apiVersion', '')}, Kind={obj.get('kind', '')}/{meta.get('namespace') or ''}/{meta.get('name', '')}"


def is_managed(obj: Mapping[str, Any]) -> bool:
    """Whether a member object is owned by the control plane (``karmada.io/managed=true``)."""
    return string_labels(obj).get(L.MANAGED_LABEL) == L.MANAGED_LABEL_VALUE


def content_digest(obj: Mapping[str, Any]) -> str:
    """A digest of ``obj`` without its resourceVersion (canonical JSON, sorted keys; nothing is copied but the
    top level and ``metadata``)."""
    clean = dict(obj)
    meta = clean.get("metadata")
    if isinstance(meta, Mapping) and "resourceVersion" in meta:
        clean["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
    return hashlib.sha256(orjson.dumps(clean, option=orjson.OPT_SORT_KEYS)).hexdigest()


#: What every prune drops, whatever the kind (:func:`~flotilla.interpreter.prune_irrelevant_fields`): an update
#: that changed only these cannot have changed the pruned content.
_VOLATILE_METADATA = frozenset(("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                                "managedFields", "resourceVersion", "selfLink", "uid", "ownerReferences",
                                "finalizers"))


def _same_besides_volatile(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``old`` and ``new`` are equal but for ``status`` and :data:`_VOLATILE_METADATA` (compared in place)."""
    if old.keys() - {"status"} != new.keys() - {"status"}:
        return False
    for key, value in old.items():
        if key != "status" and key != "metadata" and new[key] != value:
            return False
    om, nm = old.get("metadata"), new.get("metadata")
    if not (isinstance(om, Mapping) and isinstance(nm, Mapping)):
        return om == nm
    if om.keys() - _VOLATILE_METADATA != nm.keys() - _VOLATILE_METADATA:
        return False
    return all(nm[key] == value for key, value in om.items() if key not in _VOLATILE_METADATA)


#: Top-level fields the pruning of another field may depend on (kind, the Secret's type; metadata for names)
_PRUNE_INPUTS = frozenset(("apiVersion", "kind", "type", "metadata"))


def _differing_part(obj: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without its status, the volatile metadata, and the top-level fields equal in ``other`` (pruning a
    field depends only on it and :data:`_PRUNE_INPUTS`, so the pruned parts compare as the whole objects do)."""
    out = {k: v for k, v in obj.items()
           if k != "status" and (k in _PRUNE_INPUTS or k not in other or other[k] != v)}
    meta = out.get("metadata")
    if isinstance(meta, Mapping):
        out["metadata"] = {k: v for k, v in meta.items() if k not in _VOLATILE_METADATA}
    return out


def content_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a member object's update changed its pruned content (as in Karmada, only such an
    update re-syncs its Work). A status-only update (the usual one) is told without pruning (copying) either
    side; any other is pruned without what did not change (a spec and a status are not copied for a new
    annotation)."""
    if _same_besides_volatile(old, new):
        return False
    try:
        return bool(prune_irrelevant_fields(_differing_part(old, new)) !=
                    prune_irrelevant_fields(_differing_part(new, old)))
    except Exception:  # noqa: BLE001 - not prunable: treated as changed (the Work is synced again)
        return True


# ---------------------------------------------------------------------------------------------
# retaining what the member owns
# ---------------------------------------------------------------------------------------------


def _retain_map(desired: dict[str, str], observed: dict[str, str], previously_managed: str) -> dict[str, str]:
    deleted = set(filter(None, previously_managed.split(","))) - set(desired)
    out = dict(desired)
    for key, value in observed.items():
        if key not in deleted and key not in out:
            out[key] = value
    return out


def retain_metadata(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """``desired`` with the member-only labels/annotations of ``observed`` (``RetainLabels``/``RetainAnnotations``).

    A key on the member object that ``desired`` lacks is kept, unless it is listed in the member
    object's managed-labels / managed-annotations (Karmada put it there and no longer sets it).
    """
    out = copy.deepcopy(dict(desired))
    meta = out.setdefault("metadata", {})
    observed_annotations = string_annotations(observed)
    annotations = _retain_map(string_annotations(out), observed_annotations,
                              observed_annotations.get(L.MANAGED_ANNOTATIONS_ANNOTATION, ""))
    labels = _retain_map(string_labels(out), string_labels(observed), observed_annotations.get(L.MANAGED_LABELS_ANNOTATION, ""))
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return out


def retain_cluster_fields(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """``desired`` plus the member's resourceVersion, finalizers, ownerReferences and own labels/annotations."""
    out = retain_metadata(desired, observed)
    meta = out.setdefault("metadata", {})
    observed_meta = meta_of(observed)
    _set_or_drop(meta, "resourceVersion", observed_meta.get("resourceVersion"))
    _set_or_drop(meta, "finalizers", copy.deepcopy(observed_meta.get("finalizers")))
    _set_or_drop(meta, "ownerReferences", copy.deepcopy(observed_meta.get("ownerReferences")))
    return out


# ---------------------------------------------------------------------------------------------
# create / update
# ---------------------------------------------------------------------------------------------


class ApplyAction(StrEnum):
    CREATE = "Create"
    UPDATE = "Update"
    UNCHANGED = "Unchanged"
    REFUSE = "Refuse"


@dataclass(frozen=True)
class ApplyDecision:
    """What to do with one manifest; ``obj`` is the body to create/PUT (to be sent, not changed: it may share nested
    values with the desired object), ``message`` why a refusal."""

    action: ApplyAction
    obj: dict[str, Any] | None = None
    message: str = ""


@dataclass(frozen=True)
class AppliedRecord:
    """What Flotilla wrote to a member object last: digests of the body sent and of the member's pruned answer."""

    desired: str
    observed: str


def _pruned(obj: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = prune_irrelevant_fields(obj, remove_job_ttl=True)
    return result


def record_after_write(sent: Mapping[str, Any], answer: Mapping[str, Any]) -> AppliedRecord:
    """The record of a successful create/update: the body sent and the member's answer to it."""
    return AppliedRecord(content_digest(sent), content_digest(_pruned(answer)))


class LazyRecord:
    """:func:`record_after_write` whose member-side digest is computed when first asked for (pruning the answer is a
    deep copy, and most objects written are never compared again). Holds the answer until then: it must not be
    changed afterwards (a decoded response, or an informer's cached object, are not)."""

    __slots__ = ("_answer", "_record", "desired")

    def __init__(self, sent: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        self.desired = content_digest(sent)
        self._answer: Mapping[str, Any] | None = answer
        self._record: AppliedRecord | None = None

    def record(self) -> AppliedRecord:
        if self._record is None:
            assert self._answer is not None
            self._record = AppliedRecord(self.desired, content_digest(_pruned(self._answer)))
            self._answer = None
        return self._record


def refusal_message(desired: Mapping[str, Any], cluster: str) -> str:
    meta = meta_of(desired)
    return (f"resource(kind={desired.get('kind', '')}, {meta.get('namespace') or ''}/{meta.get('name', '')}) "
            f"already exists in the cluster {cluster} and the {L.CONFLICT_RESOLUTION_ANNOTATION} strategy value "
            "is empty, Karmada will not manage this resource")


def _allow_update(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> bool:
    if is_managed(observed):
        return True
    return string_annotations(desired).get(L.CONFLICT_RESOLUTION_ANNOTATION) == L.CONFLICT_RESOLUTION_OVERWRITE


def decide_apply(
    desired: Mapping[str, Any],
    observed: Mapping[str, Any] | None,
    *,
    cluster: str,
    interpreter: ResourceInterpreter | None = None,
    last_applied: AppliedRecord | None = None,
) -> ApplyDecision:
    """Create, update, leave unchanged or refuse ``desired`` given the member's ``observed`` object.

    Raises :class:`~flotilla.interpreter.InterpreterError` when a Retain hook fails.
    """
    if observed is None:  # the body is sent as it is: a shallow copy (nested values are shared, read-only)
        return ApplyDecision(ApplyAction.CREATE, dict(desired))
    if not _allow_update(desired, observed):
        return ApplyDecision(ApplyAction.REFUSE, None, refusal_message(desired, cluster))
    retained = retain_cluster_fields(desired, observed)
    if interpreter is not None and interpreter.hook_enabled(retained, Operation.RETAIN):
        retained = interpreter.retain(retained, observed)
    try:
        pruned: dict[str, Any] | None = _pruned(observed)
    except InterpreterError:
        pruned = None
    if last_applied is not None and pruned is not None and last_applied == AppliedRecord(content_digest(retained),
                                                                                         content_digest(pruned)):
        return ApplyDecision(ApplyAction.UNCHANGED, retained)
    current = retain_cluster_fields(pruned, observed) if pruned is not None else None
    if current is not None and current == retained:
        return ApplyDecision(ApplyAction.UNCHANGED, retained)
    return ApplyDecision(ApplyAction.UPDATE, retained)


# ---------------------------------------------------------------------------------------------
# delete
# ---------------------------------------------------------------------------------------------


class DeleteAction(StrEnum):
    DELETE = "Delete"
    ABSENT = "Absent"
    NOT_MANAGED = "NotManaged"


def decide_delete(observed: Mapping[str, Any] | None) -> DeleteAction:
    """Delete only what the control plane manages; someone else's object stays."""
    if observed is None:
        return DeleteAction.ABSENT
    if not is_managed(observed):
        return DeleteAction.NOT_MANAGED
    return DeleteAction.DELETE


def preserved_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` without the policy claim and Karmada's managed metadata (the object is handed over).

    Applied with :func:`decide_apply` against the member object, the keys also disappear there (they
    are listed in its managed-labels/-annotations).
    """
    out = copy.deepcopy(dict(manifest))
    meta = out.setdefault("metadata", {})
    cluster_scoped = not meta.get("namespace")
    drop_labels = MANAGED_RESOURCE_LABELS + (_CPP_CLAIM_LABELS if cluster_scoped else _PP_CLAIM_LABELS)
    drop_annotations = MANAGED_RESOURCE_ANNOTATIONS + (_CPP_CLAIM_ANNOTATIONS if cluster_scoped
                                                       else _PP_CLAIM_ANNOTATIONS)
    for field, drop in (("labels", drop_labels), ("annotations", drop_annotations)):
        values = meta.get(field)
        if isinstance(values, dict):
            for key in drop:
                values.pop(key, None)
    return out


# ---------------------------------------------------------------------------------------------
# Work deletion
# ---------------------------------------------------------------------------------------------


def cluster_terminating(cluster: Mapping[str, Any] | None) -> bool:
    """The Cluster is being deleted (or is already gone: ``None``)."""
    return cluster is None or bool(meta_of(cluster).get("deletionTimestamp"))


class WorkDeletion(StrEnum):
    PRESERVE = "Preserve"  # keep the member objects, strip Karmada's metadata from them
    DELETE = "Delete"  # delete the member objects
    WAIT = "Wait"  # cluster not Ready and not going away: keep the Work and retry
    SKIP = "Skip"  # cluster going away and not Ready: release the Work without contacting it
    ABANDON = "Abandon"  # D2: the cluster is fenced; release the Work without contacting it


def work_deletion_action(work: Mapping[str, Any], cluster: Mapping[str, Any] | None, *,
                         fenced: bool = False) -> WorkDeletion:
    """How a deleted Work is finished, before its finalizer is removed."""
    if fenced:
        return WorkDeletion.ABANDON
    spec = work.get("spec")
    if isinstance(spec, Mapping) and spec.get("preserveResourcesOnDeletion") is True:
        return WorkDeletion.PRESERVE
    if is_ready(cluster):
        return WorkDeletion.DELETE
    if not cluster_terminating(cluster):
        return WorkDeletion.WAIT
    return WorkDeletion.SKIP


# ---------------------------------------------------------------------------------------------
# Work conditions
# ---------------------------------------------------------------------------------------------


def applied_condition(succeeded: int, errors: Sequence[str]) -> dict[str, Any]:
    """The ``Applied`` condition after applying ``succeeded`` manifests with ``errors`` for the others."""
    if not errors:
        return {"type": APPLIED, "status": "True", "reason": APPLIED_SUCCESSFUL, "message": APPLIED_SUCCESSFUL_MESSAGE}
    total = succeeded + len(errors)
    detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return {"type": APPLIED, "status": "False", "reason": APPLIED_FAILED,
            "message": f"Failed to apply all manifests ({succeeded}/{total}): {detail}"}


def dispatching_condition(suspended: bool) -> dict[str, Any]:
    if suspended:
        return {"type": DISPATCHING, "status": "False", "reason": _SUSPEND_DISPATCHING_REASON,
                "message": _SUSPEND_DISPATCHING_MESSAGE}
    return {"type": DISPATCHING, "status": "True", "reason": _DISPATCHING_REASON, "message": _DISPATCHING_MESSAGE}
