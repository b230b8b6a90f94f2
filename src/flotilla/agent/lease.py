"""The agent's Lease, as Karmada's: ``coordination.k8s.io/v1`` Lease ``<cluster>`` in ``karmada-cluster``,
held by the cluster's name, renewed every ``duration x fraction`` seconds. The control plane judges a Pull
cluster's health from its ``renewTime``. Pure functions; the renewing loop is in :mod:`.runtime`."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from flotilla.api.labels import KARMADA_CLUSTER_NAMESPACE as LEASE_NAMESPACE
from flotilla.kube.times import format_micro_time as micro_time

__all__ = ["LEASE_NAMESPACE", "lease_body", "micro_time", "renew_interval", "renewed_lease"]

_DEFAULT_NAMESPACE: Final = LEASE_NAMESPACE


def renew_interval(duration: float, fraction: float) -> float:
    """Seconds between renewals (Karmada: ``--cluster-lease-duration`` x ``--cluster-lease-renew-interval-fraction``)."""
    return duration * fraction


def lease_body(cluster: str, duration: float, now: datetime, namespace: str = _DEFAULT_NAMESPACE,
               annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Lease the agent creates when there is none (``annotations``: the acknowledgements it carries)."""
    meta: dict[str, Any] = {"name": cluster, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": meta,
        "spec": {"holderIdentity": cluster, "leaseDurationSeconds": max(1, round(duration)),
                 "renewTime": micro_time(now)},
    }


def renewed_lease(lease: Mapping[str, Any], cluster: str, duration: float, now: datetime,
                  annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``lease`` renewed at ``now`` (its resourceVersion kept: the update is conditional on it), with
    ``annotations`` set on it."""
    out = copy.deepcopy(dict(lease))
    if annotations:
        meta = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
        old = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
        out["metadata"] = {**meta, "annotations": {**old, **annotations}}
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else {}
    spec = {**spec, "holderIdentity": cluster, "leaseDurationSeconds": max(1, round(duration)),
            "renewTime": micro_time(now)}
    out["spec"] = spec
    return out
