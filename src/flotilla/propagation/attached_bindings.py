"""Dependencies follow the workload: attached ResourceBindings (with D15, below).

Pure functions, no I/O, inputs never mutated. For an *independent* binding with
``spec.propagateDeps``, the interpreter names the objects its template depends on (ConfigMaps,
Secrets, PVCs, ServiceAccounts...). Each such object gets an *attached* binding (named like any
binding, ``<name>-<kind>``, in the independent binding's namespace, controlled by the dependency
object, with the binding controller's finalizer) whose ``spec.requiredBy`` lists, per independent
binding, the clusters the dependency must be in; the binding controller ships the dependency to the
union of those clusters (and of the binding's own ``spec.clusters`` when a policy also claimed the
dependency). The attached binding carries the label ``resourcebinding.karmada.io/depended-by-<hash>``
= the independent binding's permanent id, one per independent binding.

D15 (Flotilla): the clusters recorded for an independent binding are its ``spec.clusters`` **plus**
the clusters of its graceful eviction tasks whose purge mode is not ``Directly`` - the clusters where
the old copy of the workload is still kept (Gracefully, Never). Karmada records ``spec.clusters``
only, so the old copy loses its ConfigMaps and Secrets while it lingers.

For a purely attached binding (no ``placement``) the effective ``conflictResolution`` and
``preserveResourcesOnDeletion`` are resolved across every referring binding: any ``Overwrite`` wins
over ``Abort``, any ``true`` over ``false``. When no binding requires a purely attached binding any
more it is deleted (Karmada leaves it behind with an empty ``requiredBy``); a policy-made binding only
loses the ``requiredBy`` entry and the label.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flotilla.api import labels as L
from flotilla.kube.jsondiff import merge_patch_diff, with_precondition
from flotilla.kube.metadata import json_annotation, string_labels
from flotilla.kube.objects import annotations_of, as_list, as_str, meta_of, spec_of
from flotilla.kube.selectors import SelectorError, label_selector_from_dict
from flotilla.policy.naming import depended_by_label_key, generate_binding_name
from flotilla.propagation.binding_spec import (
    BINDING_API_VERSION,
    OwnerConflict,
    controller_ref,
    owner_conflict,
    resource_ref,
)

__all__ = [
    "AttachedUpdate",
    "PURGE_MODE_DIRECTLY",
    "attach_update",
    "build_attached_binding",
    "dependencies_annotation",
    "dependency_matches",
    "detach_update",
    "effective_conflict_resolution",
    "effective_preserve_on_deletion",
    "is_attached_only",
    "is_orphan",
    "parse_dependencies_annotation",
    "required_clusters",
]

PURGE_MODE_DIRECTLY = "Directly"
CONFLICT_OVERWRITE = "Overwrite"
CONFLICT_ABORT = "Abort"


# ---------------------------------------------------------------------------------------------
# What the independent binding needs
# ---------------------------------------------------------------------------------------------


def required_clusters(independent: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Where the dependencies of ``independent`` must be: its ``spec.clusters``, then (D15) the
    ``fromCluster`` of each graceful eviction task whose purge mode is not ``Directly``."""
    spec = spec_of(independent)
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for c in as_list(spec.get("clusters")):
        if isinstance(c, Mapping) and as_str(c.get("name")) and c["name"] not in names:
            entry: dict[str, Any] = {"name": c["name"]}
            if isinstance(c.get("replicas"), int) and c["replicas"]:
                entry["replicas"] = c["replicas"]
            out.append(entry)
            names.add(c["name"])
    for task in as_list(spec.get("gracefulEvictionTasks")):
        if not isinstance(task, Mapping) or task.get("purgeMode") == PURGE_MODE_DIRECTLY:
            continue
        name = as_str(task.get("fromCluster"))
        if name and name not in names:
            entry = {"name": name}
            if isinstance(task.get("replicas"), int) and task["replicas"]:
                entry["replicas"] = task["replicas"]
            out.append(entry)
            names.add(name)
    return out


def dependencies_annotation(dependencies: Sequence[Mapping[str, Any]]) -> str:
    """The ``resourcebinding.karmada.io/dependencies`` value: the dependency list as compact JSON
    (``apiVersion``, ``kind``, ``namespace``, then ``name`` or ``labelSelector``)."""
    items = []
    for d in dependencies:
        item: dict[str, Any] = {"apiVersion": as_str(d.get("apiVersion")), "kind": as_str(d.get("kind"))}
        if d.get("namespace"):
            item["namespace"] = d["namespace"]
        if d.get("name"):
            item["name"] = d["name"]
        if isinstance(d.get("labelSelector"), Mapping):
            item["labelSelector"] = d["labelSelector"]
        items.append(item)
    return json.dumps(items, separators=(",", ":"))


def parse_dependencies_annotation(binding: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The dependency list recorded on an independent binding (``[]`` when absent or malformed)."""
    parsed = json_annotation(annotations_of(binding), L.DEPENDENCIES_ANNOTATION)
    return [d for d in parsed if isinstance(d, dict)] if isinstance(parsed, list) else []


def _selector_matches(raw: Any, labels: Mapping[str, str]) -> bool:
    try:
        return label_selector_from_dict(raw).matches(labels)
    except SelectorError:
        return False


def dependency_matches(dependencies: Iterable[Mapping[str, Any]], obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is one of ``dependencies`` (same apiVersion, kind, namespace; then the same
    name, or - without a name - matched by the label selector)."""
    meta = meta_of(obj)
    for d in dependencies:
        if (as_str(d.get("apiVersion")), as_str(d.get("kind")), as_str(d.get("namespace"))) != (
            as_str(obj.get("apiVersion")), as_str(obj.get("kind")), as_str(meta.get("namespace"))):
            continue
        if d.get("name"):
            if d["name"] == meta.get("name"):
                return True
            continue
        if d.get("labelSelector") is not None and _selector_matches(d["labelSelector"], string_labels(obj)):
            return True
    return False


def is_orphan(attached: Mapping[str, Any], dependencies: Iterable[Mapping[str, Any]],
              template_lookup: Callable[[str, str, str, str], Mapping[str, Any] | None]) -> bool:
    """An attached binding no dependency of the independent binding refers to any more.

    ``template_lookup(apiVersion, kind, namespace, name)`` returns the dependency object (for
    label-selector dependencies), or None.
    """
    ref = spec_of(attached).get("resource")
    ref = ref if isinstance(ref, Mapping) else {}
    key = (as_str(ref.get("apiVersion")), as_str(ref.get("kind")), as_str(ref.get("namespace")))
    for d in dependencies:
        if (as_str(d.get("apiVersion")), as_str(d.get("kind")), as_str(d.get("namespace"))) != key:
            continue
        if d.get("name"):
            if d["name"] == ref.get("name"):
                return False
            continue
        if d.get("labelSelector") is not None:
            obj = template_lookup(key[0], key[1], key[2], as_str(ref.get("name")))
            if obj is not None and _selector_matches(d["labelSelector"], string_labels(obj)):
                return False
    return True


# ---------------------------------------------------------------------------------------------
# The attached binding
# ---------------------------------------------------------------------------------------------


def _snapshot(independent: Mapping[str, Any]) -> dict[str, Any]:
    meta = meta_of(independent)
    snap: dict[str, Any] = {}
    if meta.get("namespace"):
        snap["namespace"] = meta["namespace"]
    snap["name"] = meta.get("name") or ""
    clusters = required_clusters(independent)
    if clusters:
        snap["clusters"] = clusters
    return snap


def _depended_by_label(independent: Mapping[str, Any]) -> dict[str, str]:
    meta = meta_of(independent)
    binding_id = string_labels(independent).get(L.RESOURCE_BINDING_PERMANENT_ID_LABEL, "")
    return {depended_by_label_key(as_str(meta.get("namespace")), as_str(meta.get("name"))): binding_id}


def build_attached_binding(independent: Mapping[str, Any], dependency: Mapping[str, Any]) -> dict[str, Any]:
    """The attached binding for ``dependency`` as ``independent`` alone would want it."""
    dmeta = meta_of(dependency)
    spec: dict[str, Any] = {"resource": resource_ref(dependency), "requiredBy": [_snapshot(independent)]}
    ispec = spec_of(independent)
    if isinstance(ispec.get("preserveResourcesOnDeletion"), bool):
        spec["preserveResourcesOnDeletion"] = ispec["preserveResourcesOnDeletion"]
    if ispec.get("conflictResolution"):
        spec["conflictResolution"] = ispec["conflictResolution"]
    return {
        "apiVersion": BINDING_API_VERSION,
        "kind": "ResourceBinding",
        "metadata": {
            "name": generate_binding_name(as_str(dependency.get("kind")), as_str(dmeta.get("name"))),
            "namespace": meta_of(independent).get("namespace"),
            "labels": _depended_by_label(independent),
            "ownerReferences": [controller_ref(dependency)],
            "finalizers": [L.BINDING_CONTROLLER_FINALIZER],
        },
        "spec": spec,
    }


def is_attached_only(binding: Mapping[str, Any]) -> bool:
    """Made by the dependencies distributor alone (no policy placed it: no ``spec.placement``)."""
    return spec_of(binding).get("placement") is None


def effective_conflict_resolution(referrers: Iterable[Mapping[str, Any]]) -> tuple[str, bool]:
    """``(value, conflicted)`` across the referring bindings: Overwrite if any says so, else Abort
    (empty counts as Abort); conflicted when both occur."""
    values = {CONFLICT_OVERWRITE if spec_of(b).get("conflictResolution") == CONFLICT_OVERWRITE else CONFLICT_ABORT
              for b in referrers}
    return (CONFLICT_OVERWRITE if CONFLICT_OVERWRITE in values else CONFLICT_ABORT), len(values) > 1


def effective_preserve_on_deletion(referrers: Iterable[Mapping[str, Any]]) -> tuple[bool, bool]:
    """``(value, conflicted)``: true if any referring binding preserves resources on deletion."""
    values = {spec_of(b).get("preserveResourcesOnDeletion") is True for b in referrers}
    return (True in values), len(values) > 1


@dataclass(frozen=True)
class AttachedUpdate:
    """What to do to an existing attached binding.

    ``patch``: merge patch (with the resourceVersion precondition) or None; ``delete``: delete the
    binding instead (nobody requires it any more); ``conflicts``: human-readable policy conflicts
    between the referring bindings (for a Warning event).
    """

    patch: dict[str, Any] | None = None
    delete: bool = False
    conflicts: tuple[str, ...] = ()


def _merge_required_by(existing: Any, snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    replaced = False
    for item in as_list(existing):
        if not isinstance(item, Mapping):
            continue
        if as_str(item.get("namespace")) == as_str(snapshot.get("namespace")) and item.get("name") == snapshot.get("name"):
            if not replaced:
                out.append(copy.deepcopy(dict(snapshot)))
                replaced = True
            continue
        out.append(copy.deepcopy(dict(item)))
    if not replaced:
        out.append(copy.deepcopy(dict(snapshot)))
    return out


def _resolve_strategy(new_spec: dict[str, Any], referrers: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    cr, cr_conflict = effective_conflict_resolution(referrers)
    preserve, preserve_conflict = effective_preserve_on_deletion(referrers)
    new_spec["conflictResolution"] = cr
    new_spec["preserveResourcesOnDeletion"] = preserve
    conflicts = []
    if cr_conflict:
        conflicts.append("conflictResolution differs between the bindings requiring it (Overwrite wins)")
    if preserve_conflict:
        conflicts.append("preserveResourcesOnDeletion differs between the bindings requiring it (true wins)")
    return tuple(conflicts)


def _patch(existing: Mapping[str, Any], new_meta: Mapping[str, Any], new_spec: Mapping[str, Any]) -> dict[str, Any] | None:
    patch: dict[str, Any] = {}
    meta_patch = merge_patch_diff(meta_of(existing), new_meta)
    if meta_patch:
        patch["metadata"] = meta_patch
    spec_patch = merge_patch_diff(spec_of(existing), new_spec)
    if spec_patch:
        patch["spec"] = spec_patch
    return with_precondition(patch, existing) if patch else None


def attach_update(existing: Mapping[str, Any], desired: Mapping[str, Any],
                  referrers: Sequence[Mapping[str, Any]]) -> AttachedUpdate:
    """Merge ``desired`` (from :func:`build_attached_binding`) into the existing binding of the same
    name: the independent binding's ``requiredBy`` entry is replaced or added, its depended-by label
    set, ``spec.resource`` refreshed; for a purely attached binding the strategy fields are resolved
    over ``referrers`` (every binding in the merged ``requiredBy``, the new one included).

    Raises :class:`~flotilla.propagation.binding_spec.OwnerConflict` when another object controls it.
    """
    owner = meta_of(desired).get("ownerReferences") or [{}]
    if owner_conflict(existing, as_str(owner[0].get("uid"))):
        raise OwnerConflict(f"ResourceBinding {meta_of(existing).get('name')} is controlled by another object; "
                            "waiting for the garbage collector to remove it")
    new_meta = copy.deepcopy(dict(meta_of(existing)))
    labels = string_labels(existing)
    labels.update(string_labels(desired))
    new_meta["labels"] = labels
    new_spec = copy.deepcopy(dict(spec_of(existing)))
    dspec = spec_of(desired)
    snapshot = as_list(dspec.get("requiredBy"))[0]
    new_spec["requiredBy"] = _merge_required_by(new_spec.get("requiredBy"), snapshot)
    new_spec["resource"] = copy.deepcopy(dspec.get("resource"))
    conflicts: tuple[str, ...] = ()
    if is_attached_only(existing):
        conflicts = _resolve_strategy(new_spec, referrers)
    return AttachedUpdate(patch=_patch(existing, new_meta, new_spec), conflicts=conflicts)


def detach_update(existing: Mapping[str, Any], independent_namespace: str, independent_name: str,
                  remaining_referrers: Sequence[Mapping[str, Any]]) -> AttachedUpdate:
    """Remove an independent binding's ``requiredBy`` entry and depended-by label from ``existing``.

    A purely attached binding that nobody requires any more is deleted; otherwise its strategy
    fields are resolved over ``remaining_referrers``.
    """
    key = depended_by_label_key(independent_namespace, independent_name)
    new_meta = copy.deepcopy(dict(meta_of(existing)))
    labels = string_labels(existing)
    labels.pop(key, None)
    if labels or "labels" in new_meta:
        new_meta["labels"] = labels
    new_spec = copy.deepcopy(dict(spec_of(existing)))
    remaining = [copy.deepcopy(dict(i)) for i in as_list(new_spec.get("requiredBy"))
                 if isinstance(i, Mapping)
                 and not (as_str(i.get("namespace")) == independent_namespace and i.get("name") == independent_name)]
    if remaining:
        new_spec["requiredBy"] = remaining
    else:
        new_spec.pop("requiredBy", None)
    attached_only = is_attached_only(existing)
    if attached_only and not remaining:
        return AttachedUpdate(delete=True)
    conflicts: tuple[str, ...] = ()
    if attached_only:
        conflicts = _resolve_strategy(new_spec, remaining_referrers)
    return AttachedUpdate(patch=_patch(existing, new_meta, new_spec), conflicts=conflicts)
