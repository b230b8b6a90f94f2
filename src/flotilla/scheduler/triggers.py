"""When the scheduler controller schedules a binding, and what it writes back.

Pure functions, no I/O, inputs never mutated. The placement decision itself is
:func:`flotilla.scheduler.schedule`; this module decides *whether* to call it and shapes the result:

* :func:`considered` - the bindings this scheduler looks at (scheduler name, not suspended, claimed
  by a policy or labelled ``binding.karmada.io/managed-by``, with a placement);
* :func:`schedule_reason` - Karmada's ordered checks (placement changed, replicas changed, explicit
  reschedule, Duplicated/non-workload, a target cluster terminating); ``None`` = nothing to do
  beyond confirming ``schedulerObservedGeneration``;
* :func:`cluster_update_matters` / :func:`affected_by_cluster` (:class:`ClusterChange` for a whole
  scan) - which Cluster updates re-enqueue which bindings;
* :func:`clusters_patch` / :func:`scheduled_status` - the spec and status writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from flotilla.api import labels as L
from flotilla.kube.conditions import set_condition
from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.jsondiff import merge_patch_diff, with_precondition
from flotilla.kube.objects import as_list, labels_of, meta_of, spec_of, status_of
from flotilla.kube.times import format_time, parse_time
from flotilla.scheduler.affinity import cluster_identity, cluster_object_matches
from flotilla.scheduler.affinity import cluster_matches as scheduler_cluster_matches
from flotilla.scheduler.errors import ModelError
from flotilla.scheduler.model import Cluster, ClusterAffinity
from flotilla.scheduler.schedule import reschedule_required

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "REASON_CLUSTER_TERMINATING",
    "REASON_DUPLICATED",
    "REASON_PLACEMENT_CHANGED",
    "REASON_REPLICAS_CHANGED",
    "REASON_RESCHEDULE_TRIGGERED",
    "SCHEDULED_CONDITION",
    "ClusterChange",
    "affected_by_cluster",
    "applied_placement",
    "cluster_update_matters",
    "clusters_patch",
    "confirmation_patch",
    "considered",
    "guarded_clusters_patch",
    "guarded_status_patch",
    "held_status_due",
    "observed_generation_patch",
    "pass_status_patch",
    "placement_changed",
    "replicas_changed",
    "schedule_reason",
    "scheduled_fields",
    "scheduled_status",
    "scheduled_status_patch",
    "status_patch",
    "target_clusters_dicts",
]

DEFAULT_SCHEDULER_NAME = "default-scheduler"
SCHEDULED_CONDITION = "Scheduled"

REASON_PLACEMENT_CHANGED = "placement changed"
REASON_REPLICAS_CHANGED = "replicas changed"
REASON_RESCHEDULE_TRIGGERED = "reschedule triggered"
REASON_DUPLICATED = "duplicated or not a workload"
REASON_CLUSTER_TERMINATING = "a target cluster is being deleted"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# ---------------------------------------------------------------------------------------------
# Which bindings
# ---------------------------------------------------------------------------------------------


def considered(binding: Mapping[str, Any], scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> bool:
    """Whether this scheduler looks at ``binding`` at all.

    Its ``spec.schedulerName`` (empty = ``default-scheduler``) must be ours, ``spec.suspension.scheduling``
    not true, it must carry a policy's permanent-id label or ``binding.karmada.io/managed-by`` (so
    bindings whose policy is gone and attached dependency bindings are left alone) and have a placement.
    """
    spec = spec_of(binding)
    if (spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME) != scheduler_name:
        return False
    suspension = spec.get("suspension")
    if isinstance(suspension, Mapping) and suspension.get("scheduling") is True:
        return False
    if not isinstance(spec.get("placement"), Mapping):
        return False
    labels = labels_of(binding)
    return any(labels.get(k) for k in (L.PROPAGATION_POLICY_PERMANENT_ID_LABEL,
                                       L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
                                       L.BINDING_MANAGED_BY_LABEL))


# ---------------------------------------------------------------------------------------------
# Whether to schedule (doScheduleBinding)
# ---------------------------------------------------------------------------------------------


def _term(terms: Any, name: str) -> Mapping[str, Any] | None:
    for t in as_list(terms):
        if isinstance(t, Mapping) and t.get("affinityName") == name:
            return t
    return None


def placement_changed(placement: Mapping[str, Any], applied: str | None, observing_affinity_name: str = "") -> bool:
    """Whether ``placement`` differs from the one last scheduled with (the applied-placement annotation).

    No annotation: changed. Unreadable annotation: not changed (as Karmada). Otherwise a difference in
    ``clusterAffinity``, ``clusterTolerations``, ``spreadConstraints`` or ``replicaScheduling`` counts;
    any other difference counts when no ``clusterAffinities`` term is observed yet; otherwise only
    a missing or different observed term counts (other terms, ``workloadAffinity``... do not).
    """
    if not applied:
        return True
    try:
        old = json.loads(applied)
    except ValueError:
        return False
    if not isinstance(old, Mapping):
        return False
    if dict(old) == dict(placement):
        return False
    for key in ("clusterAffinity", "clusterTolerations", "spreadConstraints", "replicaScheduling"):
        if old.get(key) != placement.get(key):
            return True
    if not observing_affinity_name:
        return True
    new_term = _term(placement.get("clusterAffinities"), observing_affinity_name)
    old_term = _term(old.get("clusterAffinities"), observing_affinity_name)
    if new_term is None or old_term is None:
        return True
    return dict(new_term) != dict(old_term)


def replicas_changed(spec: Mapping[str, Any]) -> bool:
    """Karmada's ``IsBindingReplicasChanged``: Duplicated -> some target's replicas differ from
    ``spec.replicas``; Divided -> the targets' sum differs; no ``replicaScheduling`` -> False."""
    placement = spec.get("placement")
    rs = placement.get("replicaScheduling") if isinstance(placement, Mapping) else None
    if not isinstance(rs, Mapping):
        return False
    replicas = _int(spec.get("replicas"))
    clusters = [c for c in as_list(spec.get("clusters")) if isinstance(c, Mapping)]
    kind = rs.get("replicaSchedulingType") or "Divided"
    if kind == "Duplicated":
        return any(_int(c.get("replicas")) != replicas for c in clusters)
    if kind == "Divided":
        return sum(_int(c.get("replicas")) for c in clusters) != replicas
    return False


def _is_workload(spec: Mapping[str, Any]) -> bool:
    return (_int(spec.get("replicas")) > 0 or spec.get("replicaRequirements") is not None
            or len(as_list(spec.get("components"))) >= 1)


def _duplicated(placement: Mapping[str, Any]) -> bool:
    rs = placement.get("replicaScheduling")
    return not isinstance(rs, Mapping) or rs.get("replicaSchedulingType") == "Duplicated"


def schedule_reason(binding: Mapping[str, Any], clusters: Iterable[Mapping[str, Any]]) -> str | None:
    """Why ``binding`` must be scheduled now (the first of Karmada's ordered checks that holds), or None.

    ``clusters``: every Cluster object (only their deletion state is looked at here).
    """
    spec = spec_of(binding)
    placement = spec.get("placement")
    placement = placement if isinstance(placement, Mapping) else {}
    annotations = meta_of(binding).get("annotations")
    applied = annotations.get(L.POLICY_PLACEMENT_ANNOTATION) if isinstance(annotations, Mapping) else None
    status = status_of(binding)
    if placement_changed(placement, applied, str(status.get("schedulerObservingAffinityName") or "")):
        return REASON_PLACEMENT_CHANGED
    if replicas_changed(spec):
        return REASON_REPLICAS_CHANGED
    if reschedule_required(parse_time(spec.get("rescheduleTriggeredAt")), parse_time(status.get("lastScheduledTime"))):
        return REASON_RESCHEDULE_TRIGGERED
    if not _is_workload(spec) or _duplicated(placement):
        return REASON_DUPLICATED
    targets = {c.get("name") for c in as_list(spec.get("clusters")) if isinstance(c, Mapping)}
    for c in clusters:
        if meta_of(c).get("deletionTimestamp") and meta_of(c).get("name") in targets:
            return REASON_CLUSTER_TERMINATING
    return None


def observed_generation_patch(binding: Mapping[str, Any]) -> dict[str, Any] | None:
    """When nothing is scheduled: the status merge patch confirming the current generation, or None."""
    generation = _int(meta_of(binding).get("generation"))
    if _int(status_of(binding).get("schedulerObservedGeneration")) == generation:
        return None
    return with_precondition({"status": {"schedulerObservedGeneration": generation}}, binding)


def confirmation_patch(binding: Mapping[str, Any],
                       held: tuple[Mapping[str, Any], datetime, str | None] | None = None) -> dict[str, Any] | None:
    """The status patch of a pass with nothing to schedule: it confirms the binding's generation, with ``held``
    (the ``Scheduled`` condition, time and affinity term of an earlier pass whose status write was held back under
    load) when there is one: else that result would never be written, where Karmada's pass writes its condition at
    once. The held result is left out when the status records a later ``lastScheduledTime`` (a later pass, of this
    scheduler or of another replica, wrote its own result: the held one would move it back). None when there is
    nothing to change."""
    generation = meta_of(binding).get("generation")
    if held is None or not isinstance(generation, int) or isinstance(generation, bool):
        return observed_generation_patch(binding)
    condition, now, affinity = held
    recorded = parse_time(status_of(binding).get("lastScheduledTime"))
    if recorded is not None and recorded > (now if now.tzinfo is not None else now.replace(tzinfo=UTC)):
        return observed_generation_patch(binding)
    return scheduled_status_patch(binding, condition, now, affinity_name=affinity, generation=generation)


def held_status_due(binding: Mapping[str, Any] | None, observed: int) -> bool:
    """Whether a scheduling result's status write held back under load (``observed``: the generation it
    confirms) is still to be written on ``binding`` as it is now: not when the binding is gone or being
    deleted, when its spec moved on (the pass that change queues writes its own status), or when the status
    records that generation or a newer one already (a later pass wrote it: the write would move it back)."""
    if binding is None or meta_of(binding).get("deletionTimestamp"):
        return False
    generation = _int(meta_of(binding).get("generation"))
    return generation == observed and _int(status_of(binding).get("schedulerObservedGeneration")) < observed


def pass_status_patch(binding: Mapping[str, Any], condition: Mapping[str, Any], now: datetime, *,
                      affinity_name: str | None, observed: int, held: bool = False) -> dict[str, Any] | None:
    """The status write of a scheduling pass whose result confirms generation ``observed`` (-1: none), decided on
    ``binding`` as it is now (re-read after a failed precondition): None when there is nothing to change, when the
    status already records a newer generation (a later pass, of this scheduler or of another replica, wrote its
    own result: this one would move ``schedulerObservedGeneration`` back), and for a write held back under load
    (``held``) when :func:`held_status_due` says it is no longer due."""
    if held and not held_status_due(binding, observed):
        return None
    if observed >= 0 and _int(status_of(binding).get("schedulerObservedGeneration")) > observed:
        return None
    return scheduled_status_patch(binding, condition, now, affinity_name=affinity_name,
                                  generation=observed if observed >= 0 else None)


# ---------------------------------------------------------------------------------------------
# Cluster events
# ---------------------------------------------------------------------------------------------


def cluster_update_matters(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """A Cluster update re-enqueues bindings when deletion starts, labels change, or the spec
    (``generation``: taints, region, zones...) changes; status changes (Ready flips) do not."""
    if not meta_of(old).get("deletionTimestamp") and meta_of(new).get("deletionTimestamp"):
        return True
    if dict(labels_of(old)) != dict(labels_of(new)):
        return True
    return meta_of(old).get("generation") != meta_of(new).get("generation")


def affected_by_cluster(binding: Mapping[str, Any], cluster: Mapping[str, Any]) -> bool:
    """Whether a change of ``cluster`` (old or new version) concerns ``binding``: the affinity it is
    scheduled against is absent or matches the cluster. With ``clusterAffinities`` a binding whose
    ``schedulerObservedGeneration`` lags its generation is always affected."""
    affinity = _affinity_in_force(binding)
    if affinity is _NEVER or affinity is _ALWAYS:
        return affinity is _ALWAYS
    return cluster_object_matches(cluster, affinity)


class ClusterChange:
    """One Cluster update (its old and new versions) to test many bindings against: :meth:`affects` is
    ``affected_by_cluster(binding, old) or affected_by_cluster(binding, new)``, with each version parsed once for
    the whole scan instead of twice per binding (a Cluster update that matters is tested against every binding)."""

    __slots__ = ("_answers", "_versions")

    def __init__(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self._answers: dict[bytes, bool] = {}  # by the affinity's JSON: the bindings of one policy share it
        versions = []
        for cluster in (old, new):
            try:
                versions.append(cluster_identity(cluster))
            except (ModelError, ValueError, TypeError):
                pass  # a malformed version matches no affinity (as in cluster_object_matches)
        self._versions: tuple[Cluster, ...] = tuple(versions)

    def affects(self, binding: Mapping[str, Any]) -> bool:
        affinity = _affinity_in_force(binding)
        if affinity is _NEVER or affinity is _ALWAYS:
            return affinity is _ALWAYS
        if affinity is None:
            return True
        try:
            key = orjson.dumps(affinity)
        except TypeError:  # not JSON (no object read from the API server is): answered without the memo
            key = b""
        answer = self._answers.get(key) if key else None
        if answer is None:
            try:
                parsed = ClusterAffinity.from_dict(affinity)
            except (ModelError, ValueError, TypeError):
                answer = False  # a malformed affinity matches nothing (as in cluster_object_matches)
            else:
                answer = any(scheduler_cluster_matches(cluster, parsed) for cluster in self._versions)
            if key:
                self._answers[key] = answer
        return answer


_NEVER = object()
_ALWAYS = object()


def _affinity_in_force(binding: Mapping[str, Any]) -> Any:
    """The affinity a Cluster update is tested against for ``binding``: ``_NEVER`` (no placement),
    ``_ALWAYS`` (a ``clusterAffinities`` binding not yet scheduled for its generation), ``None`` (no affinity:
    every cluster matches) or the affinity as written (the term it is scheduled against)."""
    spec = spec_of(binding)
    placement = spec.get("placement")
    if not isinstance(placement, Mapping):
        return _NEVER
    terms = placement.get("clusterAffinities")
    if terms:
        status = status_of(binding)
        if _int(status.get("schedulerObservedGeneration")) != _int(meta_of(binding).get("generation")):
            return _ALWAYS
        observed = str(status.get("schedulerObservingAffinityName") or "")
        term = _term(terms, observed) if observed else None
        if term is None:
            term = terms[0] if isinstance(terms[0], Mapping) else {}
        return {k: v for k, v in term.items() if k not in ("affinityName", "overflowAffinities")}
    return placement.get("clusterAffinity")


# ---------------------------------------------------------------------------------------------
# Writing the result
# ---------------------------------------------------------------------------------------------


def applied_placement(placement: Mapping[str, Any]) -> str:
    """The ``policy.karmada.io/applied-placement`` annotation value: the placement as compact JSON."""
    return json.dumps(placement, separators=(",", ":"))


def target_clusters_dicts(targets: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``spec.clusters`` entries as Karmada serializes them (``replicas`` omitted when 0)."""
    out = []
    for t in targets:
        entry: dict[str, Any] = {"name": t["name"]}
        if _int(t.get("replicas")):
            entry["replicas"] = t["replicas"]
        out.append(entry)
    return out


def clusters_patch(binding: Mapping[str, Any], targets: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Merge patch writing ``spec.clusters`` and the applied-placement annotation (precondition:
    the binding's resourceVersion); None when both are already so."""
    spec = spec_of(binding)
    placement = spec.get("placement") if isinstance(spec.get("placement"), Mapping) else {}
    annotations = meta_of(binding).get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    new_clusters = target_clusters_dicts(targets)
    patch: dict[str, Any] = {}
    value = applied_placement(placement)
    if annotations.get(L.POLICY_PLACEMENT_ANNOTATION) != value:
        patch["metadata"] = {"annotations": {L.POLICY_PLACEMENT_ANNOTATION: value}}
    old_clusters = [c for c in as_list(spec.get("clusters")) if isinstance(c, Mapping)]
    if target_clusters_dicts(old_clusters) != new_clusters or len(old_clusters) != len(as_list(spec.get("clusters"))):
        patch["spec"] = {"clusters": new_clusters if new_clusters else None}
    if not patch:
        return None
    return with_precondition(patch, binding)


def _pointer(*tokens: str) -> str:
    """An RFC 6901 JSON pointer."""
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _guards(binding: Mapping[str, Any], *paths: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """JSON patch ``test`` operations that the binding still has the value of each path it has now; None when
    one of them is absent (a test cannot say "still absent")."""
    ops = []
    for path in paths:
        value: Any = binding
        for token in path:
            if not isinstance(value, Mapping) or token not in value:
                return None
            value = value[token]
        ops.append({"op": "test", "path": _pointer(*path), "value": value})
    return ops


def guarded_clusters_patch(binding: Mapping[str, Any], patch: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``patch`` (from :func:`clusters_patch`) as a JSON patch whose precondition is not the resourceVersion
    but what the decision read: the same object (uid), the same spec and no deletion started (generation),
    the same claim (labels) and the same scheduler status (``schedulerObservingAffinityName``,
    ``lastScheduledTime``). A status write of another controller meanwhile is then no conflict.

    None when such a patch cannot say it (a guarded value is absent, or there is no annotations map to
    add to): then the merge patch with the resourceVersion precondition is the way.
    """
    guards = _guards(binding, ("metadata", "uid"), ("metadata", "generation"), ("metadata", "labels"),
                     ("status", "schedulerObservingAffinityName"), ("status", "lastScheduledTime"))
    if guards is None or not isinstance(meta_of(binding).get("annotations"), Mapping):
        return None
    ops = list(guards)
    for key, value in ((patch.get("metadata") or {}).get("annotations") or {}).items():
        ops.append({"op": "add", "path": _pointer("metadata", "annotations", key), "value": value})
    spec_patch = patch.get("spec") or {}
    if "clusters" in spec_patch:
        clusters = spec_patch["clusters"]
        if clusters is not None:
            ops.append({"op": "add", "path": "/spec/clusters", "value": clusters})
        elif "clusters" in spec_of(binding):
            ops.append({"op": "remove", "path": "/spec/clusters"})
    return ops


def guarded_status_patch(binding: Mapping[str, Any], patch: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``patch`` (from :func:`scheduled_status_patch`) as a JSON patch when it writes nothing but the scheduler's
    own fields (``schedulerObservedGeneration``, ``lastScheduledTime``, ``schedulerObservingAffinityName``), which
    no other controller writes. Its tests are what the result was decided on, and nothing another controller
    writes: the uid, the generation (the spec it was computed from) and ``schedulerObservedGeneration`` when the
    status has one (no other pass recorded a generation meanwhile, so the write cannot move it back). None when
    it also writes ``conditions`` (a list other controllers write too: the resourceVersion precondition guards
    it)."""
    status = patch.get("status") or {}
    if "conditions" in status or not isinstance(binding.get("status"), Mapping):
        return None
    ops = _guards(binding, ("metadata", "uid"), ("metadata", "generation"))
    if ops is None:
        return None
    if "schedulerObservedGeneration" in status_of(binding):
        ops += _guards(binding, ("status", "schedulerObservedGeneration")) or []
    for key, value in status.items():
        ops.append({"op": "add", "path": _pointer("status", key), "value": value})
    return ops


def scheduled_fields(binding: Mapping[str, Any], condition: Mapping[str, Any], now: datetime,
                     *, affinity_name: str | None = None, generation: int | None = None) -> dict[str, Any]:
    """The status fields a scheduling pass sets (see :func:`scheduled_status`), and only those: ``conditions``
    and, as the case may be, ``schedulerObservedGeneration``, ``lastScheduledTime`` and
    ``schedulerObservingAffinityName``. Shares nothing with ``binding``."""
    stamp = format_time(now)
    fields: dict[str, Any] = {
        "conditions": set_condition(as_list(status_of(binding).get("conditions")), condition, stamp)}
    if condition.get("status") == "True":
        fields["schedulerObservedGeneration"] = (
            generation if generation is not None else _int(meta_of(binding).get("generation")))
        fields["lastScheduledTime"] = stamp
    if affinity_name is not None:
        fields["schedulerObservingAffinityName"] = affinity_name
    return fields


def scheduled_status(binding: Mapping[str, Any], condition: Mapping[str, Any], now: datetime,
                     *, affinity_name: str | None = None, generation: int | None = None) -> dict[str, Any]:
    """The binding's status after a scheduling pass.

    ``condition``: the ``Scheduled`` condition (``ScheduleResult.condition()``). On success
    (status True) ``schedulerObservedGeneration`` becomes ``generation`` (the generation read at the
    start of the pass; default: the binding's) and ``lastScheduledTime`` becomes ``now``.
    ``affinity_name``: the ``clusterAffinities`` term used (None: leave it).
    """
    status = json_copy(dict(status_of(binding)))
    status.update(scheduled_fields(binding, condition, now, affinity_name=affinity_name, generation=generation))
    return status


def scheduled_status_patch(binding: Mapping[str, Any], condition: Mapping[str, Any], now: datetime,
                           *, affinity_name: str | None = None, generation: int | None = None
                           ) -> dict[str, Any] | None:
    """``status_patch(binding, scheduled_status(binding, ...))`` without copying or comparing the rest of
    the status (which a scheduling pass leaves alone)."""
    old = status_of(binding)
    diff: dict[str, Any] = {}
    for key, value in scheduled_fields(binding, condition, now, affinity_name=affinity_name,
                                       generation=generation).items():
        if key not in old:
            diff[key] = value
            continue
        before = old[key]
        if before != value or type(before) is not type(value):
            diff[key] = value
    if not diff:
        return None
    return with_precondition({"status": diff}, binding)


def status_patch(binding: Mapping[str, Any], new_status: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge patch of ``status`` (for the status subresource) with the resourceVersion precondition,
    or None when unchanged. ``conditions`` is a list, so it is sent whole (others' conditions kept:
    that is why the precondition matters)."""
    diff = merge_patch_diff(status_of(binding), new_status)
    if not diff:
        return None
    return with_precondition({"status": diff}, binding)
