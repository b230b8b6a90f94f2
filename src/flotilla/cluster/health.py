"""Cluster health as pure functions: probe outcome -> observed Ready condition -> threshold-damped Ready
condition -> the status fields to write, as Karmada's cluster status controller does.

The status controller probes a member (``/readyz``, ``/healthz`` when that is 404), turns the answer into an
:class:`Observation`, asks :class:`ReadyThresholds` which Ready condition to publish, and writes what
:func:`plan_status` returns. Nothing here does I/O or reads the clock: ``now`` is always passed in.

Observed Ready (Karmada's reasons and messages, which users and tools match on):

========================  ========  ==========================  ====================================================
observation               status    reason                      message
========================  ========  ==========================  ====================================================
request failed (offline)  False     ``ClusterNotReachable``     cluster is not reachable
answered, not 200         False     ``ClusterNotReady``         cluster is reachable but health endpoint responded
                                                                without ok
answered 200              True      ``ClusterReady``            cluster is healthy and ready to accept workloads
client cannot be built    False     ``StatusCollectionFailed``  failed to create a ClusterClient: <error>
========================  ========  ==========================  ====================================================

Thresholds (per-process memory ``{last observed status, since}``): the first observation of a cluster since
the process started, and any observation of a cluster without a Ready condition, is published as is. Otherwise
a change of the observed status starts a window; while the observation and the current condition disagree on
True-versus-not-True and the window (``success threshold`` when the observation is True, ``failure threshold``
otherwise) has not passed, the **current** condition is kept unchanged. A client that cannot be built is a
failure observation like any other and goes through the same window (Karmada #7426).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from flotilla.cluster.resources import OWNED_SUMMARY_KEYS, Summaries, merge_patch_diff
from flotilla.kube.conditions import find_condition, set_condition

__all__ = [
    "CLIENT_FAILURE_PREFIX",
    "CONDITION_COMPLETE_API_ENABLEMENTS",
    "CONDITION_READY",
    "DISCOVERY_INTERVAL",
    "HEALTH_PATHS",
    "Collected",
    "Health",
    "Observation",
    "ReadyThresholds",
    "ThresholdMemory",
    "aggregated_resource_lists",
    "api_enablements",
    "api_enablements_condition",
    "condition_status",
    "discovery_due",
    "is_ready",
    "needs_healthz_fallback",
    "new_condition",
    "observation_from_probe",
    "observed_ready_condition",
    "plan_status",
    "ready_condition",
    "ready_transition",
    "should_collect",
    "threshold_adjusted_ready",
]

CONDITION_READY = "Ready"
CONDITION_COMPLETE_API_ENABLEMENTS = "CompleteAPIEnablements"

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"

REASON_CLUSTER_READY = "ClusterReady"
MESSAGE_CLUSTER_READY = "cluster is healthy and ready to accept workloads"
REASON_CLUSTER_NOT_READY = "ClusterNotReady"
MESSAGE_CLUSTER_NOT_READY = "cluster is reachable but health endpoint responded without ok"
REASON_CLUSTER_NOT_REACHABLE = "ClusterNotReachable"
MESSAGE_CLUSTER_NOT_REACHABLE = "cluster is not reachable"
REASON_STATUS_COLLECTION_FAILED = "StatusCollectionFailed"
CLIENT_FAILURE_PREFIX = "failed to create a ClusterClient: "

REASON_API_COMPLETE = "Complete"
MESSAGE_API_COMPLETE = "collected complete APIEnablements from the cluster"
REASON_API_PARTIAL = "Partial"
REASON_API_EMPTY = "Empty"
MESSAGE_API_EMPTY = "collected empty APIEnablements from the cluster"

#: The health endpoints probed, in order: ``/healthz`` only when ``/readyz`` is not served (404).
HEALTH_PATHS = ("/readyz", "/healthz")
#: metav1.Condition.message is limited to 32768 characters by the schema.
MAX_MESSAGE = 32768


# ============================================================================================ time


# ============================================================================================ observations


class Health(StrEnum):
    HEALTHY = "Healthy"  # the health endpoint answered 200
    UNHEALTHY = "Unhealthy"  # it answered something else
    OFFLINE = "Offline"  # no answer: refused, reset, timed out, TLS failure
    CLIENT_FAILURE = "ClientFailure"  # no client could be built (no endpoint, Secret missing or malformed)


@dataclass(frozen=True)
class Observation:
    """One probe of a member. ``detail`` is the error or the endpoint's answer (for logs and events); for a
    client failure it is the error that goes into the condition's message."""

    health: Health
    detail: str = ""

    @property
    def online(self) -> bool:
        return self.health in (Health.HEALTHY, Health.UNHEALTHY)

    @classmethod
    def healthy(cls) -> Observation:
        return cls(Health.HEALTHY)

    @classmethod
    def unhealthy(cls, detail: str = "") -> Observation:
        return cls(Health.UNHEALTHY, detail)

    @classmethod
    def offline(cls, detail: str = "") -> Observation:
        return cls(Health.OFFLINE, detail)

    @classmethod
    def client_failure(cls, error: str) -> Observation:
        return cls(Health.CLIENT_FAILURE, error)


def needs_healthz_fallback(readyz_status: int | None) -> bool:
    """Probe ``/healthz`` too? Only when ``/readyz`` answered 404 (an API server without it)."""
    return readyz_status == 404


def observation_from_probe(status: int | None, detail: str = "") -> Observation:
    """HTTP status of the (last) health endpoint probed; None when the request itself failed."""
    if status is None:
        return Observation.offline(detail)
    if status == 200:
        return Observation.healthy()
    return Observation.unhealthy(detail or f"health endpoint answered HTTP {status}")


def _truncate(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def new_condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    """A condition without ``lastTransitionTime`` (:func:`set_condition` stamps it)."""
    return {"type": type_, "status": status, "reason": reason, "message": _truncate(message)}


def observed_ready_condition(obs: Observation) -> dict[str, Any]:
    """The Ready condition an observation stands for, before thresholds."""
    if obs.health is Health.CLIENT_FAILURE:
        return new_condition(CONDITION_READY, FALSE, REASON_STATUS_COLLECTION_FAILED,
                             CLIENT_FAILURE_PREFIX + obs.detail)
    if obs.health is Health.OFFLINE:
        return new_condition(CONDITION_READY, FALSE, REASON_CLUSTER_NOT_REACHABLE, MESSAGE_CLUSTER_NOT_REACHABLE)
    if obs.health is Health.UNHEALTHY:
        return new_condition(CONDITION_READY, FALSE, REASON_CLUSTER_NOT_READY, MESSAGE_CLUSTER_NOT_READY)
    return new_condition(CONDITION_READY, TRUE, REASON_CLUSTER_READY, MESSAGE_CLUSTER_READY)


# ============================================================================================ conditions


def condition_status(cluster: Mapping[str, Any] | None, type_: str = CONDITION_READY) -> str | None:
    """Status of a Cluster's condition: "True", "False", "Unknown", or None when it has none."""
    cond = ready_condition(cluster, type_)
    return str(cond.get("status")) if cond is not None else None


def ready_condition(cluster: Mapping[str, Any] | None, type_: str = CONDITION_READY) -> dict[str, Any] | None:
    """The Cluster's condition of ``type_`` (Ready by default), or None."""
    status = (cluster or {}).get("status")
    return find_condition(status.get("conditions") if isinstance(status, Mapping) else None, type_)


def is_ready(cluster: Mapping[str, Any] | None) -> bool:
    """Karmada's ``IsClusterReady``: the Ready condition is True."""
    return condition_status(cluster) == TRUE


# ============================================================================================ thresholds


@dataclass(frozen=True)
class ThresholdMemory:
    """What the status controller remembers of a cluster: the last observed Ready status and since when it has
    been observed (None: since before the window logic applied, i.e. the first observation)."""

    status: str
    since: datetime | None = None


def threshold_adjusted_ready(
    current: Mapping[str, Any] | None,
    observed: Mapping[str, Any],
    memory: ThresholdMemory | None,
    now: datetime,
    success_threshold: float,
    failure_threshold: float,
) -> tuple[dict[str, Any], ThresholdMemory | None]:
    """The Ready condition to publish and the memory to keep (see the module docstring).

    ``current`` is the Cluster's Ready condition now, ``observed`` what the probe says, thresholds in seconds.
    The condition returned is ``current`` itself while a flip is held back, else ``observed``.
    """
    obs_status = str(observed.get("status"))
    if memory is None:  # the first observation since this process started
        return dict(observed), ThresholdMemory(obs_status, None)
    if current is None:  # no Ready condition yet: publish as observed
        return dict(observed), memory
    if memory.status != obs_status:
        memory = ThresholdMemory(obs_status, now)
    threshold = success_threshold if obs_status == TRUE else failure_threshold
    flips = (obs_status == TRUE) != (current.get("status") == TRUE)
    if flips and memory.since is not None and now < memory.since + timedelta(seconds=threshold):
        return dict(current), memory
    return dict(observed), memory


class ReadyThresholds:
    """:func:`threshold_adjusted_ready` with the memory of every cluster (per process, as Karmada)."""

    def __init__(self, success_threshold: float, failure_threshold: float) -> None:
        self.success_threshold = success_threshold
        self.failure_threshold = failure_threshold
        self._memory: dict[str, ThresholdMemory] = {}

    def adjust(self, name: str, current: Mapping[str, Any] | None, observed: Mapping[str, Any],
               now: datetime) -> dict[str, Any]:
        ready, memory = threshold_adjusted_ready(current, observed, self._memory.get(name), now,
                                                 self.success_threshold, self.failure_threshold)
        if memory is not None:
            self._memory[name] = memory
        return ready

    def memory(self, name: str) -> ThresholdMemory | None:
        return self._memory.get(name)

    def forget(self, name: str) -> None:
        self._memory.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._memory


# ============================================================================================ status


def api_enablements(resource_lists: Iterable[tuple[str, Iterable[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """``[{groupVersion, resources: [{name, kind}]}]`` from discovery resource lists: subresources (names with
    '/') skipped, resources sorted by name (the key left out when there are none), group-versions sorted."""
    out: list[dict[str, Any]] = []
    for group_version, resources in resource_lists:
        items = [{"name": str(r.get("name")), "kind": str(r.get("kind") or "")}
                 for r in resources if r.get("name") and "/" not in str(r.get("name"))]
        items.sort(key=lambda r: r["name"])
        entry: dict[str, Any] = {"groupVersion": group_version}
        if items:  # omitempty, as Karmada serialises it
            entry["resources"] = items
        out.append(entry)
    out.sort(key=lambda e: e["groupVersion"])
    return out


def aggregated_resource_lists(doc: Mapping[str, Any]) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[str]]:
    """The resource lists of an aggregated discovery document (``APIGroupDiscoveryList``, apidiscovery.k8s.io/v2,
    what ``/api`` and ``/apis`` answer to a client that asks for it) as ``(groupVersion, [{name, kind}])``, the
    input of :func:`api_enablements`, and the group-versions that failed: as client-go's
    ``ServerGroupsAndResources``, a version whose ``freshness`` is ``Stale`` is reported as failed, not listed.
    Subresources are nested in the document, so never listed."""
    lists: list[tuple[str, list[dict[str, Any]]]] = []
    failed: list[str] = []
    for item in doc.get("items") or []:
        if not isinstance(item, Mapping):
            continue
        group = str((item.get("metadata") or {}).get("name") or "")
        for v in item.get("versions") or []:
            if not isinstance(v, Mapping) or not v.get("version"):
                continue
            gv = f"{group}/{v['version']}" if group else str(v["version"])
            if v.get("freshness") == "Stale":
                failed.append(f"{gv}: the group version's discovery is stale")
                continue
            resources = [{"name": str(r.get("resource") or ""), "kind": str((r.get("responseKind") or {}).get("kind")
                                                                            or "")}
                         for r in v.get("resources") or [] if isinstance(r, Mapping) and r.get("resource")]
            lists.append((gv, resources))
    return lists, failed


def api_enablements_condition(enablements: Sequence[Any], error: str | None) -> dict[str, Any]:
    """``CompleteAPIEnablements``: False/Empty without any, False/Partial when discovery failed in part,
    else True/Complete."""
    if not enablements:
        return new_condition(CONDITION_COMPLETE_API_ENABLEMENTS, FALSE, REASON_API_EMPTY, MESSAGE_API_EMPTY)
    if error:
        return new_condition(CONDITION_COMPLETE_API_ENABLEMENTS, FALSE, REASON_API_PARTIAL,
                             f"might collect partial APIEnablements({len(enablements)}) from the cluster")
    return new_condition(CONDITION_COMPLETE_API_ENABLEMENTS, TRUE, REASON_API_COMPLETE, MESSAGE_API_COMPLETE)


@dataclass(frozen=True)
class Collected:
    """What was read from a healthy member: ``kubernetes_version`` None when ``/version`` failed (the last
    known version is kept); ``summaries`` None when the member's Nodes and Pods could not be listed (the last
    known ``nodeSummary`` and ``resourceSummary`` are kept). ``discovered`` False: version and APIs are the ones
    read at an earlier sync (:func:`discovery_due`), already compared with the status then, so they are not
    compared again (a member's API list is long, and probes come every second)."""

    kubernetes_version: str | None
    api_enablements: list[dict[str, Any]]
    api_error: str | None = None
    summaries: Summaries | None = None
    discovered: bool = True


def should_collect(obs: Observation, ready: Mapping[str, Any]) -> bool:
    """Collect version, APIs and the node/resource summaries only when the member answered healthy and Ready
    (as published) is True; otherwise only the Ready condition is written and the rest of the status stays as
    it was."""
    return obs.health is Health.HEALTHY and ready.get("status") == TRUE


#: How often a member's Kubernetes version and served APIs are read when probes are more frequent than that.
#: Karmada reads them at every sync, i.e. every ``--cluster-status-update-frequency``, 10 s by default; Flotilla's
#: laptop and benchmark timings probe every second, and reading discovery at each probe is most of what an idle
#: control plane with many members would spend.
DISCOVERY_INTERVAL = 10.0


def discovery_due(last: datetime | None, now: datetime, frequency: float, was_ready: bool) -> bool:
    """Read the version and the APIs in this sync (one where :func:`should_collect` holds)?

    Always when syncs are at least :data:`DISCOVERY_INTERVAL` apart (Karmada: at every sync), on the first
    collection (``last`` None) and when the cluster was not published Ready before this sync (it just became
    Ready or recovered: what it serves may have changed); otherwise once :data:`DISCOVERY_INTERVAL` has passed
    since ``last``. The node and resource summaries do not depend on this: they come from watches, at every sync.
    """
    if last is None or not was_ready or frequency >= DISCOVERY_INTERVAL:
        return True
    return now - last >= timedelta(seconds=DISCOVERY_INTERVAL)


def plan_status(status: Mapping[str, Any] | None, ready: Mapping[str, Any], collected: Collected | None,
                now: datetime) -> dict[str, Any] | None:
    """The ``status`` part of a merge patch (only the fields that change), or None when nothing changes.

    ``conditions`` is written as a whole list (merge patches replace lists), with every other condition kept.
    ``nodeSummary`` and the ``allocatable``/``allocated``/``allocating`` lists of ``resourceSummary`` are
    patched key by key (``null`` for a resource that went away); ``allocatableModelings`` is never touched.
    """
    status = status or {}
    old_conditions = status.get("conditions") if isinstance(status.get("conditions"), list) else []
    conditions = set_condition(old_conditions, ready, now)
    patch: dict[str, Any] = {}
    if collected is not None:
        conditions = set_condition(conditions, api_enablements_condition(collected.api_enablements,
                                                                         collected.api_error), now)
        version = collected.kubernetes_version
        if collected.discovered:
            if version is not None and version != status.get("kubernetesVersion"):
                patch["kubernetesVersion"] = version
            if collected.api_enablements != (status.get("apiEnablements") or []):
                patch["apiEnablements"] = collected.api_enablements or None  # null removes the field
        if collected.summaries is not None:
            patch.update(_summary_patch(status, collected.summaries))
    if conditions != old_conditions:
        patch["conditions"] = conditions
    return patch or None


def _summary_patch(status: Mapping[str, Any], summaries: Summaries) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    nodes = merge_patch_diff(status.get("nodeSummary"), summaries.node_summary)
    if nodes is not None:
        patch["nodeSummary"] = nodes
    old = status.get("resourceSummary")
    if not isinstance(old, Mapping):
        patch["resourceSummary"] = dict(summaries.resource_summary)
        return patch
    owned = {k: old[k] for k in OWNED_SUMMARY_KEYS if k in old}
    resources = merge_patch_diff(owned, summaries.resource_summary)
    if resources is not None:
        patch["resourceSummary"] = resources
    return patch


def ready_transition(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(event type, reason, message)`` when the published Ready status changes (or is first set)."""
    old_status = old.get("status") if old else None
    if old_status == new.get("status"):
        return None
    event_type = "Normal" if new.get("status") == TRUE else "Warning"
    before = old_status or "unset"
    return event_type, str(new.get("reason") or "ClusterReadyChanged"), \
        f"Ready {before} -> {new.get('status')}: {new.get('message', '')}"
