"""What the WorkloadRebalancer controller decides (apps.karmada.io/v1alpha1): an explicit, ``Fresh``
reschedule of the workloads it lists.

Pure functions, no I/O, inputs never mutated. A WorkloadRebalancer lists resource templates
(``spec.workloads[] {apiVersion, kind, name, namespace}``); for each one the controller finds its binding
(a ResourceBinding in the template's namespace, or a ClusterResourceBinding when ``namespace`` is empty,
named :func:`~flotilla.policy.naming.generate_binding_name`) and sets the binding's
``spec.rescheduleTriggeredAt`` to the rebalancer's ``creationTimestamp`` unless it already holds that time or
a later one. The scheduler then schedules the binding afresh, ignoring where its replicas are now.

* :func:`sync_observed` - the ``status.observedWorkloads`` list for the current spec: entries still in the
  spec keep their result; entries dropped from the spec stay only if Successful; new entries start
  without a result; sorted by ``"apiVersion kind namespace name"``.
* :func:`needs_trigger` / :func:`trigger_patch` - whether and how a binding is asked to reschedule.
* :func:`apply_outcomes` - the results: ``Successful``, or ``Failed`` with reason
  ``ReferencedBindingNotFound``; any other error leaves the entry pending (retried).
* :func:`next_status` - the new status: ``observedGeneration`` = ``metadata.generation``; ``finishTime`` is
  set to now when the status changed and nothing is pending (kept otherwise).
* :func:`ttl_remaining` - seconds until a finished rebalancer with ``ttlSecondsAfterFinished`` is deleted.

Malformed entries (not an object, or without apiVersion/kind/name as strings) are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from flotilla.kube.jsondiff import merge_patch_diff, with_precondition
from flotilla.kube.objects import as_list, as_map
from flotilla.kube.times import format_time, parse_time
from flotilla.policy.naming import generate_binding_name

__all__ = [
    "REASON_BINDING_NOT_FOUND",
    "RESULT_FAILED",
    "RESULT_SUCCESSFUL",
    "Observed",
    "Outcome",
    "WorkloadRef",
    "apply_outcomes",
    "needs_trigger",
    "next_status",
    "observed_workloads",
    "pending",
    "spec_workloads",
    "status_patch",
    "sync_observed",
    "trigger_patch",
    "ttl_remaining",
]

RESULT_SUCCESSFUL = "Successful"
RESULT_FAILED = "Failed"
REASON_BINDING_NOT_FOUND = "ReferencedBindingNotFound"


@dataclass(frozen=True)
class WorkloadRef:
    """A resource template named by a WorkloadRebalancer (Karmada's ``ObjectReference``)."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""

    @classmethod
    def parse(cls, value: Any) -> WorkloadRef | None:
        """The reference in ``value`` (an ``{apiVersion, kind, name, namespace}`` dict), or None if malformed."""
        if not isinstance(value, Mapping):
            return None
        fields = [value.get(k) for k in ("apiVersion", "kind", "name")]
        if not all(isinstance(f, str) and f for f in fields):
            return None
        namespace = value.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            return None
        return cls(fields[0], fields[1], fields[2], namespace or "")

    def to_dict(self) -> dict[str, str]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        return out

    @property
    def sort_key(self) -> str:
        return f"{self.api_version} {self.kind} {self.namespace} {self.name}"

    @property
    def cluster_scoped(self) -> bool:
        """No namespace: the template is cluster-scoped and its binding is a ClusterResourceBinding."""
        return not self.namespace

    @property
    def binding_name(self) -> str:
        return generate_binding_name(self.kind, self.name)

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}({self.api_version}) {where}{self.name}"


@dataclass(frozen=True)
class Observed:
    """One ``status.observedWorkloads`` entry; ``result`` empty while pending."""

    workload: WorkloadRef
    result: str = ""
    reason: str = ""

    @classmethod
    def parse(cls, value: Any) -> Observed | None:
        item = as_map(value)
        ref = WorkloadRef.parse(item.get("workload"))
        if ref is None:
            return None
        result, reason = item.get("result"), item.get("reason")
        return cls(ref, result if isinstance(result, str) else "", reason if isinstance(reason, str) else "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workload": self.workload.to_dict()}
        if self.result:
            out["result"] = self.result
        if self.reason:
            out["reason"] = self.reason
        return out


class Outcome(Enum):
    """What happened when the controller looked at one workload's binding."""

    TRIGGERED = "triggered"  # the binding holds the rebalancer's time (set now or already)
    NOT_FOUND = "not-found"  # no binding: a final failure
    RETRY = "retry"  # any other error: stays pending and the rebalancer is retried


def spec_workloads(rebalancer: Mapping[str, Any]) -> list[WorkloadRef]:
    """``spec.workloads`` as references, malformed entries and duplicates left out (first kept)."""
    out: list[WorkloadRef] = []
    for item in as_list(as_map(rebalancer.get("spec")).get("workloads")):
        ref = WorkloadRef.parse(item)
        if ref is not None and ref not in out:
            out.append(ref)
    return out


def observed_workloads(rebalancer: Mapping[str, Any]) -> list[Observed]:
    """``status.observedWorkloads`` as entries, malformed ones left out."""
    out = []
    for item in as_list(as_map(rebalancer.get("status")).get("observedWorkloads")):
        entry = Observed.parse(item)
        if entry is not None:
            out.append(entry)
    return out


def sync_observed(spec: Sequence[WorkloadRef], observed: Iterable[Observed]) -> list[Observed]:
    """The observed list for ``spec`` (Karmada's ``syncWorkloadsFromSpecToStatus``).

    A workload in both keeps its entry; one only in ``observed`` is kept if Successful (else dropped);
    one only in ``spec`` is added without a result. Sorted by :attr:`WorkloadRef.sort_key`.
    """
    wanted = list(dict.fromkeys(spec))
    out: list[Observed] = []
    seen: set[WorkloadRef] = set()
    for entry in observed:
        if entry.workload in seen:
            continue
        if entry.workload in wanted:
            out.append(entry)
            seen.add(entry.workload)
        elif entry.result == RESULT_SUCCESSFUL:
            out.append(entry)
            seen.add(entry.workload)
    out.extend(Observed(ref) for ref in wanted if ref not in seen)
    return sorted(out, key=lambda e: e.workload.sort_key)


def pending(observed: Iterable[Observed]) -> list[WorkloadRef]:
    """The workloads still without a result (Successful and Failed are final)."""
    return [e.workload for e in observed if e.result not in (RESULT_SUCCESSFUL, RESULT_FAILED)]


def needs_trigger(created_at: datetime, triggered_at: datetime | None) -> bool:
    """Whether a binding whose ``rescheduleTriggeredAt`` is ``triggered_at`` must be set to ``created_at``:
    it is unset or older."""
    return triggered_at is None or created_at > triggered_at


def trigger_patch(binding: Mapping[str, Any], created_at: datetime) -> dict[str, Any] | None:
    """The merge patch setting the binding's ``spec.rescheduleTriggeredAt`` to ``created_at`` (with the
    binding's resourceVersion as precondition), or None when it already holds that time or a later one.

    An unreadable ``rescheduleTriggeredAt`` counts as unset."""
    current = parse_time(as_map(binding.get("spec")).get("rescheduleTriggeredAt"))
    if not needs_trigger(created_at, current):
        return None
    return with_precondition({"spec": {"rescheduleTriggeredAt": format_time(created_at)}}, binding)


def apply_outcomes(observed: Sequence[Observed], outcomes: Mapping[WorkloadRef, Outcome]) -> tuple[list[Observed], int]:
    """``observed`` with the outcomes recorded, and how many workloads must be retried.

    Entries that already have a result, or no outcome, are left as they are."""
    out: list[Observed] = []
    retry = 0
    for entry in observed:
        outcome = outcomes.get(entry.workload)
        if entry.result in (RESULT_SUCCESSFUL, RESULT_FAILED) or outcome is None:
            out.append(entry)
        elif outcome is Outcome.TRIGGERED:
            out.append(Observed(entry.workload, RESULT_SUCCESSFUL))
        elif outcome is Outcome.NOT_FOUND:
            out.append(Observed(entry.workload, RESULT_FAILED, REASON_BINDING_NOT_FOUND))
        else:
            out.append(entry)
            retry += 1
    return out, retry


def _generation(rebalancer: Mapping[str, Any]) -> int:
    value = as_map(rebalancer.get("metadata")).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def next_status(rebalancer: Mapping[str, Any], observed: Sequence[Observed], retry: int,
                now: datetime) -> dict[str, Any]:
    """The rebalancer's new ``status``.

    ``finishTime`` becomes ``now`` when the status differs from the current one (``finishTime`` aside)
    and ``retry`` is 0, or when nothing is pending and there is no (readable) ``finishTime`` yet;
    otherwise the current one is kept.
    """
    old = dict(as_map(rebalancer.get("status")))
    new: dict[str, Any] = {}
    if observed:
        new["observedWorkloads"] = [e.to_dict() for e in observed]
    generation = _generation(rebalancer)
    if generation:
        new["observedGeneration"] = generation
    old_finish = old.get("finishTime")
    old_without_finish = {k: v for k, v in old.items() if k != "finishTime"}
    changed = old_without_finish != new
    if retry == 0 and (changed or parse_time(old_finish) is None):
        new["finishTime"] = format_time(now)
    elif old_finish is not None:
        new["finishTime"] = old_finish
    return new


def status_patch(rebalancer: Mapping[str, Any], new_status: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge patch of ``status`` (for the status subresource, resourceVersion precondition), or None."""
    diff = merge_patch_diff(as_map(rebalancer.get("status")), new_status)
    if not diff:
        return None
    return with_precondition({"status": diff}, rebalancer)


def ttl_remaining(rebalancer: Mapping[str, Any], now: datetime) -> float | None:
    """Seconds until the rebalancer is due for deletion (0 when due now), or None when it is never deleted
    (no ``ttlSecondsAfterFinished``, or no ``finishTime``: not finished)."""
    ttl = as_map(rebalancer.get("spec")).get("ttlSecondsAfterFinished")
    if not isinstance(ttl, int) or isinstance(ttl, bool):
        return None
    finish = parse_time(as_map(rebalancer.get("status")).get("finishTime"))
    if finish is None:
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    remaining = (finish + timedelta(seconds=max(ttl, 0)) - now).total_seconds()
    return max(remaining, 0.0)
