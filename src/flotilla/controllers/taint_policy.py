"""The ClusterTaintPolicy controller (D1, on by default; D13, ClusterTaintPolicy hygiene).

Turns Cluster conditions into taints as the ClusterTaintPolicies say: for each Cluster it asks
:func:`flotilla.failover.taint_policy.evaluate` for the new ``spec.taints`` and, when they differ, writes them
with a merge patch guarded by the Cluster's ``resourceVersion`` (Karmada #7348: a concurrent taint change by the
cluster controller or a person makes the patch fail with 409 instead of being lost; the Cluster is then read
again and the decision made again).

Reconciled per Cluster, when:

* a Cluster is created;
* a Cluster's ``status.conditions`` change, **or its labels** or the fields ``targetClusters`` can select on
  (``spec.provider``, ``region``, ``zone``, ``zones``) change (D13: Karmada waits for the next condition change
  before a Cluster that newly matches a policy is evaluated);
* a ClusterTaintPolicy is created, or its ``spec`` changes: every Cluster its ``targetClusters`` (old or new)
  select is reconciled.

Deleting a policy or a Cluster does nothing: taints are never removed because a policy went away.

Events on the Cluster, one per policy that changed something: ``TaintClusterSucceed`` (Normal), naming the policy
and the taints it added and removed, and the Cluster's taints afterwards; ``TaintClusterFailed`` (Warning) when
the patch is refused (e.g. a taint the Cluster's validation rejects).

Runs only while the feature gate ``Failover`` is on (on by default, D1). The cluster controller's NoSchedule
``not-ready``/``unreachable`` taints are never touched (:data:`flotilla.failover.taint_policy.RESERVED_TAINTS`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flotilla.api.resources import CLUSTER_TAINT_POLICIES, CLUSTERS
from flotilla.client import ApiException, is_conflict, is_not_found
from flotilla.cluster.taints import taints_message, taints_patch
from flotilla.failover.events import EVENT_TAINT_CLUSTER_FAILED, EVENT_TAINT_CLUSTER_SUCCEED
from flotilla.failover.taint_policy import (
    TaintChange,
    TaintPolicyResult,
    cluster_needs_evaluation,
    evaluate,
    policy_spec_changed,
    policy_targets,
)
from flotilla.kube.objects import meta_of
from flotilla.runtime.base import Controller, ControllerContext

log = logging.getLogger(__name__)

__all__ = ["REASON_TAINT_CLUSTER_FAILED", "REASON_TAINT_CLUSTER_SUCCEED", "TaintPolicyController"]

REASON_TAINT_CLUSTER_SUCCEED = EVENT_TAINT_CLUSTER_SUCCEED
REASON_TAINT_CLUSTER_FAILED = EVENT_TAINT_CLUSTER_FAILED

_CONFLICT_RETRIES = 5


def _as_event_object(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The Cluster with apiVersion and kind set (objects from a list may lack them), for the Event recorder."""
    return {"apiVersion": CLUSTERS.api_version, "kind": CLUSTERS.kind, **cluster}


def _change_message(policy: str, added: list[TaintChange], removed: list[TaintChange],
                    taints: list[Any]) -> str:
    parts = []
    if added:
        parts.append(f"added taints({taints_message([c.taint for c in added])})")
    if removed:
        parts.append(f"removed taints({taints_message([c.taint for c in removed])})")
    return f"ClusterTaintPolicy({policy}) {' and '.join(parts)}: cluster now has taints({_taints_text(taints)})."


def _taints_text(taints: list[Any]) -> str:
    return taints_message([t for t in taints if isinstance(t, Mapping)])


class TaintPolicyController(Controller):
    name = "taint-policy"
    workers = 2

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.clusters: Any = None
        self.policies: Any = None
        self.enabled = self.options.gate("Failover")

    # ------------------------------------------------------------------ setup and event handlers
    def setup(self) -> None:
        if not self.enabled:
            log.info("taint-policy controller: feature gate Failover is off; ClusterTaintPolicies are not applied")
            return
        self.clusters = self.informer(CLUSTERS)
        self.clusters.add_handler(on_add=self.enqueue_object, on_update=self._on_cluster_update)
        self.policies = self.informer(CLUSTER_TAINT_POLICIES)
        self.policies.add_handler(on_add=self._on_policy_add, on_update=self._on_policy_update)

    def _on_cluster_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if cluster_needs_evaluation(old, new):
            self.enqueue_object(new)

    def _enqueue_targets(self, *policies: Mapping[str, Any]) -> None:
        for cluster in self.clusters.store.list():
            if any(policy_targets(p, cluster) for p in policies):
                self.enqueue_object(cluster)

    def _on_policy_add(self, policy: dict[str, Any]) -> None:
        self._enqueue_targets(policy)

    def _on_policy_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if policy_spec_changed(old, new):
            self._enqueue_targets(old, new)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> float | None:
        if not self.enabled:
            return None
        cluster = self.clusters.store.get(key)
        if cluster is None:
            return None
        for _ in range(_CONFLICT_RETRIES):
            result = evaluate(cluster, self.policies.store.list(), self.ctx.now())
            if not result.changed:
                return None
            patch = taints_patch(result.taints, meta_of(cluster).get("resourceVersion"))
            try:
                updated = await self.client.patch(CLUSTERS, key, patch)
            except ApiException as e:
                if is_not_found(e):
                    return None
                if is_conflict(e):
                    found = await self.client.get_or_none(CLUSTERS, key)
                    if found is None:
                        return None
                    cluster = found
                    continue
                self.ctx.recorder.event(_as_event_object(cluster), "Warning", REASON_TAINT_CLUSTER_FAILED,
                                        f"Update Cluster({key}) with taints({_taints_text(result.taints)}) "
                                        f"failed: {e}")
                raise
            self._report(updated, result)
            return None
        raise ApiException(409, "Conflict", f"cluster {key} kept changing; will retry")

    def _report(self, cluster: dict[str, Any], result: TaintPolicyResult) -> None:
        name = meta_of(cluster).get("name")
        by_policy: dict[str, tuple[list[TaintChange], list[TaintChange]]] = {}
        for change in result.added:
            by_policy.setdefault(change.policy, ([], []))[0].append(change)
        for change in result.removed:
            by_policy.setdefault(change.policy, ([], []))[1].append(change)
        for policy, (added, removed) in by_policy.items():
            message = _change_message(policy, added, removed, result.taints)
            log.info("cluster %s: %s", name, message)
            self.ctx.recorder.event(_as_event_object(cluster), "Normal", REASON_TAINT_CLUSTER_SUCCEED, message)
