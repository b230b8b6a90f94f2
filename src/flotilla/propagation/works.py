"""The Works a binding asks for: one per target cluster, as Karmada's binding controller writes them.

Pure functions, no I/O; inputs are never mutated. The binding controller
(:mod:`flotilla.controllers.binding`) reads the binding, its template, the override policies and the
clusters from its caches, calls :func:`plan_works` and :func:`orphan_works`, then writes what
:func:`render_work` returns.

For each target cluster (``spec.clusters``, plus the clusters of ``spec.requiredBy`` not already
there), on a copy of the template:

1. workloads (``replicas > 0``, ``replicaRequirements`` or ``components``) get ``ReviseReplica`` with
   the cluster's replicas when the interpreter has that hook (for Divided placements these are the
   per-cluster shares; for Duplicated they equal ``spec.replicas``);
2. a Job of a Divided workload binding gets its share of ``spec.completions`` (Webster, weighted by
   each target's replicas), only when the template sets ``completions``;
3. ClusterOverridePolicies then OverridePolicies (:func:`flotilla.policy.overrides.apply_overrides`):
   overrides come last and win;
4. the binding's permanent-id label and the binding/template-generation annotations go on the
   object, the binding's on the Work; the Work gets ``work.karmada.io/conflict-resolution`` (the
   template's own ``overwrite``/``abort``, else ``overwrite`` for a binding with
   ``conflictResolution: Overwrite``, else ``abort``) and the applied-overrides annotations;
5. with ``StatefulFailoverInjection``, preserved state goes on as labels (overwriting the same keys).
   Which labels is decided by the caller and passed in (``injections`` / ``injected_labels``): the
   binding controller passes :func:`flotilla.failover.state.plan_injection`'s, which adds D4 to
   Karmada's rule (the recorded injection stays until a later failover replaces it). Without them,
   Karmada's rule alone applies (:func:`inject_preserved_label_state`): a single target cluster, the
   *last* graceful-eviction task purged ``Directly`` and a target that is not in its
   ``clustersBeforeFailover`` get the task's ``preservedLabelState``;
6. the objects of a binding whose failover resolves to ``purgeMode: Directly`` get
   ``guard.flotilla.io/guarded: "true"`` (:func:`flotilla.failover.run_permit.is_guarded`; docs/fencing.md);
7. a target restored natively (D20, :mod:`flotilla.failover.restore`) gets the snapshot written in through the
   interpreter's ``RestoreState`` (``restores``, decided by the caller) on every render, after the overrides, so
   neither the template nor an override drops it; a target whose restore is not resolved yet (``held``) gets no
   Work at all in this render;
8. the object gets ``karmada.io/managed=true`` and the template-uid / Work name / Work namespace /
   conflict-resolution annotations, is pruned of server-set fields, and finally records
   ``resourcetemplate.karmada.io/managed-annotations``, the Work's permanent id as a label, and
   ``resourcetemplate.karmada.io/managed-labels`` (:func:`render_work`).

Works are found by the binding's permanent-id label. A Work is an orphan when its cluster is not in
``spec.clusters``, ``spec.requiredBy[*].clusters`` or a graceful-eviction task whose purge mode is
not ``Directly`` (those old copies stay until the eviction task goes). While a Work of the binding
still exists in a cluster evicted with ``purgeMode: Directly`` no Work is written
(:func:`directly_purge_pending`), so the old copy is gone before a new one is made.

Differences from Karmada (deliberate, small): an existing Work keeps its other finalizers (Karmada
replaces the list), and applied-overrides annotations that no longer apply are removed (Karmada
leaves the stale ones on the Work).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flotilla.api import labels as L
from flotilla.api.resources import (
    CLUSTER_OVERRIDE_POLICIES,
    CLUSTER_RESOURCE_BINDINGS,
    OVERRIDE_POLICIES,
    RESOURCE_BINDINGS,
    RESOURCE_INTERPRETER_CUSTOMIZATIONS,
    WORKS,
)
from flotilla.failover.purge import (
    PURGE_MODE_GRACEFULLY,
    directly_purge_pending,
    directly_purged_clusters,
    eviction_tasks,
    kept_clusters,
    orphan_works,
)
from flotilla.failover.run_permit import GUARDED_LABEL, GUARDED_LABEL_VALUE, is_guarded
from flotilla.failover.state import should_inject, target_entries
from flotilla.interpreter import (
    CustomizationFailure,
    InterpreterError,
    Operation,
    ResourceInterpreter,
    parse_customization,
    prune_irrelevant_fields,
)
from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.metadata import string_map
from flotilla.kube.objects import as_list, as_map, as_str, meta_of
from flotilla.policy.naming import (
    cluster_name_from_execution_space,
    generate_execution_space_name,
    generate_work_name,
    is_execution_space,
)
from flotilla.policy.overrides import OverrideError, applied_override_annotations, apply_overrides
from flotilla.scheduler.division import spread_by_weights
from flotilla.scheduler.model import TargetCluster

__all__ = [
    "CLUSTER_OVERRIDE_POLICIES",
    "CLUSTER_RESOURCE_BINDINGS",
    "CLUSTER_RESOURCE_BINDING_KIND",
    "OVERRIDE_POLICIES",
    "RESOURCE_BINDINGS",
    "RESOURCE_BINDING_KIND",
    "RESOURCE_INTERPRETER_CUSTOMIZATIONS",
    "WORKS",
    "WORK_API_VERSION",
    "BindingRef",
    "InterpreterCache",
    "WorkBuildError",
    "WorkIntent",
    "binding_ref",
    "build_work_intent",
    "conflict_resolution",
    "directly_purge_pending",
    "directly_purged_clusters",
    "expected_clusters",
    "inject_preserved_label_state",
    "is_workload",
    "job_completions",
    "orphan_works",
    "plan_works",
    "record_managed_annotations",
    "record_managed_labels",
    "render_work",
    "should_suspend_dispatching",
    "target_clusters",
    "work_cluster",
    "work_update",
    "apply_restore_state",
    "restore_state_enabled",
]

RESOURCE_BINDING_KIND = "ResourceBinding"
CLUSTER_RESOURCE_BINDING_KIND = "ClusterResourceBinding"
WORK_API_VERSION = "work.karmada.io/v1alpha1"


CONFLICT_OVERWRITE = "Overwrite"  # the binding's spec.conflictResolution value
JOB_KIND = "Job"


# ---------------------------------------------------------------------------------------------
# small readers
# ---------------------------------------------------------------------------------------------


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def work_cluster(work: Mapping[str, Any]) -> str | None:
    """The member cluster a Work is for (from its ``karmada-es-<cluster>`` namespace), or None."""
    namespace = as_str(meta_of(work).get("namespace"))
    if not is_execution_space(namespace):
        return None
    return cluster_name_from_execution_space(namespace) or None


# ---------------------------------------------------------------------------------------------
# the binding
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BindingRef:
    """Who a Work belongs to: the (Cluster)ResourceBinding's kind, namespace, name and permanent id."""

    kind: str
    namespace: str
    name: str
    permanent_id: str

    @property
    def cluster_scoped(self) -> bool:
        return self.kind == CLUSTER_RESOURCE_BINDING_KIND

    @property
    def id_label(self) -> str:
        """The label key carrying the binding's permanent id on its Works and member objects."""
        return (L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL if self.cluster_scoped
                else L.RESOURCE_BINDING_PERMANENT_ID_LABEL)

    @property
    def key(self) -> str:
        return self.name if self.cluster_scoped else f"{self.namespace}/{self.name}"

    def annotations(self) -> dict[str, str]:
        """The annotations naming the binding (on the Work and on the member object)."""
        if self.cluster_scoped:
            return {L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION: self.name}
        return {L.RESOURCE_BINDING_NAMESPACE_ANNOTATION: self.namespace, L.RESOURCE_BINDING_NAME_ANNOTATION: self.name}


def binding_ref(binding: Mapping[str, Any]) -> BindingRef:
    meta = meta_of(binding)
    kind = as_str(binding.get("kind")) or (RESOURCE_BINDING_KIND if meta.get("namespace") else
                                         CLUSTER_RESOURCE_BINDING_KIND)
    labels = string_map(meta.get("labels"))
    key = (L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL if kind == CLUSTER_RESOURCE_BINDING_KIND
           else L.RESOURCE_BINDING_PERMANENT_ID_LABEL)
    return BindingRef(kind, as_str(meta.get("namespace")), as_str(meta.get("name")), labels.get(key, ""))


def is_workload(spec: Mapping[str, Any]) -> bool:
    """``IsWorkload``: replicas > 0, per-replica requirements, or components."""
    return (_int(spec.get("replicas")) > 0 or spec.get("replicaRequirements") is not None
            or len(as_list(spec.get("components"))) >= 1)


def target_clusters(spec: Mapping[str, Any]) -> list[TargetCluster]:
    """``spec.clusters`` then the ``spec.requiredBy`` clusters not already listed (first entry wins)."""
    return [TargetCluster(as_str(e.get("name")), _int(e.get("replicas"))) for e in target_entries(spec)]


# Which clusters keep the binding's Works, and the Directly barrier: one rule, in flotilla.failover.purge
expected_clusters = kept_clusters


def conflict_resolution(template: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """The Work's ``work.karmada.io/conflict-resolution``: the template's valid value, else the binding's."""
    own = string_map(meta_of(template).get("annotations")).get(L.CONFLICT_RESOLUTION_ANNOTATION, "")
    if own in (L.CONFLICT_RESOLUTION_OVERWRITE, L.CONFLICT_RESOLUTION_ABORT):
        return own
    if spec.get("conflictResolution") == CONFLICT_OVERWRITE:
        return L.CONFLICT_RESOLUTION_OVERWRITE
    return L.CONFLICT_RESOLUTION_ABORT


def should_suspend_dispatching(spec: Mapping[str, Any], cluster: str) -> bool:
    suspension = as_map(spec.get("suspension"))
    if suspension.get("dispatching") is True:
        return True
    on_clusters = as_map(suspension.get("dispatchingOnClusters"))
    return cluster in [c for c in as_list(on_clusters.get("clusterNames")) if isinstance(c, str)]


def _divided(spec: Mapping[str, Any]) -> bool:
    rs = as_map(as_map(spec.get("placement")).get("replicaScheduling"))
    return rs.get("replicaSchedulingType") == "Divided"


def job_completions(template: Mapping[str, Any], spec: Mapping[str, Any],
                    targets: Sequence[TargetCluster]) -> dict[str, int] | None:
    """Each cluster's share of a divided Job's ``spec.completions`` (None: not split)."""
    if template.get("kind") != JOB_KIND or _int(spec.get("replicas")) <= 0 or not _divided(spec):
        return None
    completions = as_map(template.get("spec")).get("completions")
    if not isinstance(completions, int) or isinstance(completions, bool):
        return None
    uid = as_str(as_map(spec.get("resource")).get("uid")) or as_str(meta_of(template).get("uid"))
    shares = spread_by_weights(completions, list(targets), uid)
    return {s.name: s.replicas for s in shares} or None


def inject_preserved_label_state(spec: Mapping[str, Any], target: str, manifest: dict[str, Any],
                                 targets: int) -> dict[str, Any]:
    """``manifest`` with the last eviction task's preserved labels, when Karmada's rule
    (:func:`flotilla.failover.state.should_inject`) lets them into ``target``, one of ``targets`` clusters."""
    if targets > 1 or not should_inject(spec, target, targets=[target])[0]:
        return manifest
    state = string_map(eviction_tasks(spec)[-1].get("preservedLabelState"))
    return _with_labels(manifest, state) if state else manifest


def restore_state_enabled(interpreter: ResourceInterpreter, obj: Mapping[str, Any]) -> bool:
    """Whether the interpreter has ``RestoreState`` for ``obj``'s kind (D20)."""
    return interpreter.hook_enabled(obj, Operation.RESTORE_STATE)


def apply_restore_state(interpreter: ResourceInterpreter, manifest: Mapping[str, Any],
                        restore: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` with ``restore`` written in by the interpreter's ``RestoreState`` (D20)."""
    return dict(interpreter.restore_state(manifest, restore))


def _with_labels(manifest: dict[str, Any], injected: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``manifest`` with ``injected`` among its labels (overwriting the same keys)."""
    out = json_copy(manifest)
    meta = out.get("metadata")
    if not isinstance(meta, dict):
        meta = out["metadata"] = {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    meta["labels"] = {**labels, **{str(k): str(v) for k, v in injected.items()}}
    return out


# ---------------------------------------------------------------------------------------------
# building one Work
# ---------------------------------------------------------------------------------------------


class WorkBuildError(Exception):
    """The Work for one cluster could not be built (the others still are)."""

    def __init__(self, cluster: str, message: str) -> None:
        super().__init__(message)
        self.cluster = cluster
        self.message = message


@dataclass
class WorkIntent:
    """What the binding wants in one cluster's execution namespace, before merging with the stored Work.

    ``manifest`` is final except for the keys :func:`render_work` adds last (managed-annotations, the
    Work's permanent-id label, managed-labels).
    """

    cluster: str
    namespace: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    manifest: dict[str, Any]
    suspend_dispatching: bool = False
    preserve_resources_on_deletion: bool = False
    finalizers: list[str] = field(default_factory=lambda: [L.EXECUTION_CONTROLLER_FINALIZER])

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _set_metadata_entry(obj: dict[str, Any], field: str, key: str, value: str) -> None:
    """Set ``metadata.<field>.<key>`` (``field``: labels or annotations), making the maps it needs."""
    meta = obj.setdefault("metadata", {})
    entries = meta.get(field)
    if not isinstance(entries, dict):
        entries = meta[field] = {}
    entries[key] = value


def _set_label(obj: dict[str, Any], key: str, value: str) -> None:
    _set_metadata_entry(obj, "labels", key, value)


def _set_annotation(obj: dict[str, Any], key: str, value: str) -> None:
    _set_metadata_entry(obj, "annotations", key, value)


def build_work_intent(
    template: Mapping[str, Any],
    binding: Mapping[str, Any],
    target: TargetCluster,
    *,
    interpreter: ResourceInterpreter,
    cluster: Mapping[str, Any] | None = None,
    override_policies: Iterable[Mapping[str, Any]] = (),
    cluster_override_policies: Iterable[Mapping[str, Any]] = (),
    completions: Mapping[str, int] | None = None,
    targets: int = 1,
    inject_preserved_labels: bool = True,
    injected_labels: Mapping[str, str] | None = None,
    guarded: bool = False,
    restore: Mapping[str, Any] | None = None,
) -> WorkIntent:
    """The Work for ``target``. Raises :class:`WorkBuildError`.

    ``cluster`` is the Cluster object (for override rules' cluster affinity; a bare name is used when
    it is unknown); ``completions`` is :func:`job_completions`; ``targets`` the number of target
    clusters (Karmada's rule injects only for a single one). ``inject_preserved_labels`` is the gate
    ``StatefulFailoverInjection`` (off: nothing is injected); ``injected_labels`` the labels decided for
    this cluster (D4, may be empty), ``None`` for Karmada's rule (:func:`inject_preserved_label_state`).
    ``guarded``: the binding's failover resolves to ``purgeMode: Directly``
    (:func:`flotilla.failover.run_permit.is_guarded`): the object gets ``guard.flotilla.io/guarded: "true"``.
    ``restore``: the ``RestoreState`` argument for this cluster (D20), written in after the overrides.
    """
    spec = as_map(binding.get("spec"))
    ref = binding_ref(binding)
    name = target.name
    manifest: dict[str, Any] = json_copy(dict(template))
    try:
        if is_workload(spec) and interpreter.hook_enabled(manifest, Operation.REVISE_REPLICA):
            manifest = interpreter.revise_replica(manifest, target.replicas)
    except InterpreterError as e:
        raise WorkBuildError(name, f"failed to revise replicas for cluster {name}: {e}") from None
    if completions is not None:
        if name not in completions:
            raise WorkBuildError(name, f"no completions found for cluster {name}")
        job_spec = manifest.get("spec")
        if isinstance(job_spec, dict) and "completions" in job_spec:
            job_spec["completions"] = completions[name]
    cluster_obj = cluster if cluster is not None else {"metadata": {"name": name}}
    try:
        manifest, applied = apply_overrides(manifest, cluster_obj, override_policies, cluster_override_policies)
    except OverrideError as e:
        raise WorkBuildError(name, e.message) from None

    work_labels = {ref.id_label: ref.permanent_id}
    _set_label(manifest, ref.id_label, ref.permanent_id)
    generation = _int(meta_of(manifest).get("generation"))
    if generation > 0:
        _set_annotation(manifest, L.RESOURCE_TEMPLATE_GENERATION_ANNOTATION, str(generation))
    work_annotations = ref.annotations()
    for k, v in work_annotations.items():
        _set_annotation(manifest, k, v)
    work_annotations[L.CONFLICT_RESOLUTION_ANNOTATION] = conflict_resolution(manifest, spec)
    work_annotations.update(applied_override_annotations(applied))
    if inject_preserved_labels:
        if injected_labels is None:
            manifest = inject_preserved_label_state(spec, name, manifest, targets)
        elif injected_labels:
            manifest = _with_labels(manifest, injected_labels)
    if restore is not None:
        try:
            manifest = apply_restore_state(interpreter, manifest, restore)
        except InterpreterError as e:
            raise WorkBuildError(name, f"failed to restore state for cluster {name}: {e}") from None

    meta = meta_of(manifest)
    work_name = generate_work_name(as_str(manifest.get("kind")), as_str(meta.get("name")), as_str(meta.get("namespace")))
    work_namespace = generate_execution_space_name(name)
    # ctrlutil.CreateOrUpdateWork: the managed label and the Work references on the object, then prune.
    if guarded:
        _set_label(manifest, GUARDED_LABEL, GUARDED_LABEL_VALUE)
    _set_label(manifest, L.MANAGED_LABEL, L.MANAGED_LABEL_VALUE)
    _set_annotation(manifest, L.RESOURCE_TEMPLATE_UID_ANNOTATION, as_str(meta.get("uid")))
    _set_annotation(manifest, L.WORK_NAME_ANNOTATION, work_name)
    _set_annotation(manifest, L.WORK_NAMESPACE_ANNOTATION, work_namespace)
    _set_annotation(manifest, L.CONFLICT_RESOLUTION_ANNOTATION, work_annotations[L.CONFLICT_RESOLUTION_ANNOTATION])
    try:
        manifest = prune_irrelevant_fields(manifest, remove_job_ttl=True)
    except InterpreterError as e:
        raise WorkBuildError(name, f"failed to prune the manifest for cluster {name}: {e}") from None
    return WorkIntent(
        cluster=name,
        namespace=work_namespace,
        name=work_name,
        labels=work_labels,
        annotations=work_annotations,
        manifest=manifest,
        suspend_dispatching=should_suspend_dispatching(spec, name),
        preserve_resources_on_deletion=spec.get("preserveResourcesOnDeletion") is True,
    )


def plan_works(
    template: Mapping[str, Any],
    binding: Mapping[str, Any],
    *,
    interpreter: ResourceInterpreter,
    clusters: Mapping[str, Mapping[str, Any]] | None = None,
    override_policies: Iterable[Mapping[str, Any]] = (),
    cluster_override_policies: Iterable[Mapping[str, Any]] = (),
    inject_preserved_labels: bool = True,
    injections: Mapping[str, Mapping[str, str]] | None = None,
    default_purge_mode: str = PURGE_MODE_GRACEFULLY,
    restores: Mapping[str, Mapping[str, Any]] | None = None,
    held: Iterable[str] = (),
) -> tuple[list[WorkIntent], list[WorkBuildError]]:
    """Every target cluster's Work; errors for one cluster do not stop the others.

    ``clusters``: Cluster objects by name; ``inject_preserved_labels``: gate ``StatefulFailoverInjection``;
    ``injections``: the labels to inject per cluster (D4, :attr:`flotilla.failover.state.InjectionPlan.labels`;
    a cluster not in it gets none), ``None`` for Karmada's rule; ``default_purge_mode``: the controller-manager's
    ``--no-execute-taint-eviction-purge-mode`` (whether the binding's objects are guarded, :func:`is_guarded`);
    ``restores``: the ``RestoreState`` argument per cluster (D20); ``held``: clusters whose Work waits for its
    restore to be resolved (none is built for them).
    """
    spec = as_map(binding.get("spec"))
    targets = target_clusters(spec)
    guarded = is_guarded(spec, default_purge_mode)
    ops, cops = list(override_policies), list(cluster_override_policies)
    try:
        completions = job_completions(template, spec, targets)
    except Exception as e:  # noqa: BLE001 - a malformed template fails every cluster alike
        return [], [WorkBuildError(t.name, f"failed to divide the Job's completions: {e}") for t in targets]
    intents: list[WorkIntent] = []
    errors: list[WorkBuildError] = []
    skipped = set(held)
    for target in targets:
        if target.name in skipped:
            continue
        try:
            intents.append(build_work_intent(
                template, binding, target, interpreter=interpreter, cluster=(clusters or {}).get(target.name),
                override_policies=ops, cluster_override_policies=cops, completions=completions,
                targets=len(targets), inject_preserved_labels=inject_preserved_labels,
                injected_labels=None if injections is None else injections.get(target.name, {}), guarded=guarded,
                restore=(restores or {}).get(target.name)))
        except WorkBuildError as e:
            errors.append(e)
    return intents, errors


# ---------------------------------------------------------------------------------------------
# the Work as written
# ---------------------------------------------------------------------------------------------


def record_managed_annotations(obj: dict[str, Any]) -> None:
    """Set ``resourcetemplate.karmada.io/managed-annotations`` to the sorted keys of all annotations."""
    keys = {L.MANAGED_ANNOTATIONS_ANNOTATION, L.MANAGED_LABELS_ANNOTATION}
    keys.update(string_map(meta_of(obj).get("annotations")))
    _set_annotation(obj, L.MANAGED_ANNOTATIONS_ANNOTATION, ",".join(sorted(keys)))


def record_managed_labels(obj: dict[str, Any]) -> None:
    """Set ``resourcetemplate.karmada.io/managed-labels`` to the sorted keys of all labels."""
    keys = sorted(string_map(meta_of(obj).get("labels")))
    _set_annotation(obj, L.MANAGED_LABELS_ANNOTATION, ",".join(keys))


_OWNED_WORK_ANNOTATIONS = (L.APPLIED_OVERRIDES_ANNOTATION, L.APPLIED_CLUSTER_OVERRIDES_ANNOTATION)


def render_work(intent: WorkIntent, existing: Mapping[str, Any] | None, new_permanent_id: str) -> dict[str, Any]:
    """The whole Work to store: ``intent`` merged into ``existing`` (its labels, annotations, finalizers).

    The Work's permanent id is the existing one, else ``new_permanent_id`` (Karmada's Work webhook
    assigns one; Flotilla's binding controller does it itself). For an existing Work the result keeps
    its ``metadata`` (resourceVersion included, the optimistic lock) and ``status``.
    """
    old_meta = meta_of(existing) if existing is not None else {}
    labels = {**string_map(old_meta.get("labels")), **intent.labels}
    annotations = string_map(old_meta.get("annotations"))
    for key in _OWNED_WORK_ANNOTATIONS:
        annotations.pop(key, None)
    annotations.update(intent.annotations)
    permanent_id = labels.get(L.WORK_PERMANENT_ID_LABEL) or new_permanent_id
    labels[L.WORK_PERMANENT_ID_LABEL] = permanent_id
    finalizers = [f for f in as_list(old_meta.get("finalizers")) if isinstance(f, str)]
    finalizers += [f for f in intent.finalizers if f not in finalizers]

    manifest = json_copy(intent.manifest)
    record_managed_annotations(manifest)
    _set_label(manifest, L.WORK_PERMANENT_ID_LABEL, permanent_id)
    record_managed_labels(manifest)

    work: dict[str, Any] = json_copy(dict(existing)) if existing is not None else {}
    work["apiVersion"] = WORK_API_VERSION
    work["kind"] = "Work"
    meta = work.setdefault("metadata", {})
    meta.update(name=intent.name, namespace=intent.namespace, labels=labels, annotations=annotations,
                finalizers=finalizers)
    work["spec"] = {
        "workload": {"manifests": [manifest]},
        "suspendDispatching": intent.suspend_dispatching,
        "preserveResourcesOnDeletion": intent.preserve_resources_on_deletion,
    }
    return work


def work_update(existing: Mapping[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any] | None:
    """``rendered`` when it differs from ``existing`` in labels, annotations, finalizers or spec; else None."""
    old, new = meta_of(existing), meta_of(rendered)
    same = (
        string_map(old.get("labels")) == string_map(new.get("labels"))
        and string_map(old.get("annotations")) == string_map(new.get("annotations"))
        and as_list(old.get("finalizers")) == as_list(new.get("finalizers"))
        and existing.get("spec") == rendered.get("spec")
    )
    return None if same else dict(rendered)


# ---------------------------------------------------------------------------------------------
# the interpreter of the current customizations
# ---------------------------------------------------------------------------------------------


class InterpreterCache:
    """A :class:`ResourceInterpreter` for a set of ResourceInterpreterCustomizations, rebuilt on change."""

    def __init__(self, on_failure: Callable[[CustomizationFailure], None] | None = None) -> None:
        self.on_failure = on_failure
        self._key: tuple[tuple[str, str], ...] | None = None
        self._interpreter = ResourceInterpreter()

    def get(self, customizations: Iterable[Mapping[str, Any]]) -> ResourceInterpreter:
        rics = sorted(customizations, key=lambda r: as_str(meta_of(r).get("name")))
        key = tuple((as_str(meta_of(r).get("name")), as_str(meta_of(r).get("resourceVersion"))) for r in rics)
        if key != self._key:
            parsed = []
            for ric in rics:  # admission validates RICs; one that still does not parse is left out
                try:
                    parsed.append(parse_customization(ric))
                except Exception:  # noqa: BLE001
                    continue
            self._interpreter = ResourceInterpreter(parsed, on_failure=self.on_failure)
            self._key = key
        return self._interpreter
