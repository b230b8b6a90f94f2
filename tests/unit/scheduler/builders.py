"""Plain Karmada dicts for scheduler tests (Cluster objects, placements, ResourceBindings)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)

DEPLOYMENT_APIS: tuple[tuple[str, str], ...] = (("apps/v1", "Deployment"), ("v1", "ConfigMap"))


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(seconds: float) -> str:
    return rfc3339(NOW - timedelta(seconds=seconds))


def taint(key: str, effect: str, value: str = "", added: str | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "effect": effect}
    if value:
        t["value"] = value
    if added is not None:
        t["timeAdded"] = added
    return t


NOT_READY_NO_SCHEDULE = taint("cluster.karmada.io/not-ready", "NoSchedule", added=ago(60))


def cluster(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    provider: str = "",
    region: str = "",
    zones: Sequence[str] = (),
    taints: Iterable[Mapping[str, Any]] = (),
    pods: int | None = 110,
    allocated_pods: int = 0,
    allocatable: Mapping[str, Any] | None = None,
    allocated: Mapping[str, Any] | None = None,
    apis: Iterable[tuple[str, str]] = DEPLOYMENT_APIS,
    complete: bool = True,
    deleting: bool = False,
) -> dict[str, Any]:
    """A Cluster object as the cluster status controller would have filled it."""
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if deleting:
        metadata["deletionTimestamp"] = rfc3339(NOW)
    spec: dict[str, Any] = {"syncMode": "Push", "taints": [dict(t) for t in taints]}
    if provider:
        spec["provider"] = provider
    if region:
        spec["region"] = region
    if zones:
        spec["zones"] = list(zones)
    by_group: dict[str, list[dict[str, str]]] = {}
    for group_version, kind in apis:
        by_group.setdefault(group_version, []).append({"name": kind.lower() + "s", "kind": kind})
    status: dict[str, Any] = {
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "CompleteAPIEnablements", "status": "True" if complete else "False"},
        ],
        "apiEnablements": [{"groupVersion": gv, "resources": rs} for gv, rs in sorted(by_group.items())],
    }
    if pods is not None:
        alloc: dict[str, Any] = {"pods": str(pods)}
        alloc.update(allocatable or {})
        used: dict[str, Any] = {"pods": str(allocated_pods)}
        used.update(allocated or {})
        status["resourceSummary"] = {"allocatable": alloc, "allocated": used, "allocating": {}}
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


def duplicated(**extra: Any) -> dict[str, Any]:
    return {**extra}


def divided_static(weights: Mapping[str, int] | None = None, **extra: Any) -> dict[str, Any]:
    rs: dict[str, Any] = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}
    if weights is not None:
        rs["weightPreference"] = {
            "staticWeightList": [
                {"targetCluster": {"clusterNames": [n]}, "weight": w} for n, w in weights.items()
            ]
        }
    return {"replicaScheduling": rs, **extra}


def divided_dynamic(**extra: Any) -> dict[str, Any]:
    return {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"dynamicWeight": "AvailableReplicas"},
        },
        **extra,
    }


def aggregated(**extra: Any) -> dict[str, Any]:
    return {
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
        **extra,
    }


def single_cluster(**extra: Any) -> dict[str, Any]:
    """The stateful recipe: every replica in exactly one cluster."""
    return {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}], **extra}


def binding(
    placement: Mapping[str, Any] | None = None,
    *,
    replicas: int = 1,
    clusters: Mapping[str, int] | None = None,
    tasks: Iterable[Mapping[str, Any]] = (),
    uid: str = "",
    kind: str = "Deployment",
    api_version: str = "apps/v1",
    requests: Mapping[str, str] | None = None,
    status: Mapping[str, Any] | None = None,
    reschedule_triggered_at: str | None = None,
) -> dict[str, Any]:
    """A ResourceBinding; ``clusters`` is the previous ``spec.clusters``."""
    spec: dict[str, Any] = {
        "resource": {
            "apiVersion": api_version,
            "kind": kind,
            "namespace": "default",
            "name": "app",
            "uid": uid,
        },
        "replicas": replicas,
        "placement": dict(placement or {}),
        "clusters": [{"name": n, "replicas": r} for n, r in (clusters or {}).items()],
    }
    if requests is not None:
        spec["replicaRequirements"] = {"resourceRequest": dict(requests)}
    tasks = list(tasks)
    if tasks:
        spec["gracefulEvictionTasks"] = [dict(t) for t in tasks]
    if reschedule_triggered_at is not None:
        spec["rescheduleTriggeredAt"] = reschedule_triggered_at
    return {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {"name": "app-deployment", "namespace": "default"},
        "spec": spec,
        "status": dict(status or {}),
    }


def eviction_task(
    from_cluster: str, purge_mode: str = "Gracefully", replicas: int | None = None
) -> dict[str, Any]:
    task: dict[str, Any] = {
        "fromCluster": from_cluster,
        "purgeMode": purge_mode,
        "reason": "TaintUntolerated",
        "producer": "TaintManager",
    }
    if replicas is not None:
        task["replicas"] = replicas
    return task


def as_map(targets: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    return {t["name"]: t["replicas"] for t in targets}
