"""OpenAPI v3 schemas (plain JSON-compatible dicts) of the kinds the API server serves built in.

``SCHEMA_BUILDERS`` maps ``(group, version, kind)`` to a function returning a fresh schema; ``schema_for``
calls it. Every top-level schema carries ``description`` and ``x-kubernetes-group-version-kind``.
Built-in Kubernetes kinds are documented partially and keep unknown fields; Karmada kinds are complete.
"""

from __future__ import annotations

from collections.abc import Callable

from flotilla.apiserver.schemas._build import Schema
from flotilla.apiserver.schemas.apiextensions import crd_schema
from flotilla.apiserver.schemas.apps import (
    daemonset_schema,
    deployment_schema,
    job_schema,
    replicaset_schema,
    statefulset_schema,
)
from flotilla.apiserver.schemas.coordination import lease_schema
from flotilla.apiserver.schemas.core import (
    configmap_schema,
    event_schema,
    namespace_schema,
    node_schema,
    persistentvolumeclaim_schema,
    pod_schema,
    secret_schema,
    service_schema,
    serviceaccount_schema,
)
from flotilla.apiserver.schemas.karmada_apps import workloadrebalancer_schema
from flotilla.apiserver.schemas.karmada_cluster import cluster_schema
from flotilla.apiserver.schemas.karmada_config import resourceinterpretercustomization_schema
from flotilla.apiserver.schemas.karmada_policy import (
    clusteroverridepolicy_schema,
    clusterpropagationpolicy_schema,
    clustertaintpolicy_schema,
    overridepolicy_schema,
    propagationpolicy_schema,
)
from flotilla.apiserver.schemas.karmada_work import (
    clusterresourcebinding_schema,
    resourcebinding_schema,
    work_schema,
)
from flotilla.apiserver.schemas.meta import object_meta

SCHEMA_BUILDERS: dict[tuple[str, str, str], Callable[[], Schema]] = {
    ("", "v1", "Namespace"): namespace_schema,
    ("", "v1", "ConfigMap"): configmap_schema,
    ("", "v1", "Secret"): secret_schema,
    ("", "v1", "Service"): service_schema,
    ("", "v1", "ServiceAccount"): serviceaccount_schema,
    ("", "v1", "PersistentVolumeClaim"): persistentvolumeclaim_schema,
    ("", "v1", "Event"): event_schema,
    ("", "v1", "Pod"): pod_schema,
    ("", "v1", "Node"): node_schema,
    ("apps", "v1", "Deployment"): deployment_schema,
    ("apps", "v1", "StatefulSet"): statefulset_schema,
    ("apps", "v1", "DaemonSet"): daemonset_schema,
    ("apps", "v1", "ReplicaSet"): replicaset_schema,
    ("batch", "v1", "Job"): job_schema,
    ("coordination.k8s.io", "v1", "Lease"): lease_schema,
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"): crd_schema,
    ("cluster.karmada.io", "v1alpha1", "Cluster"): cluster_schema,
    ("policy.karmada.io", "v1alpha1", "PropagationPolicy"): propagationpolicy_schema,
    ("policy.karmada.io", "v1alpha1", "ClusterPropagationPolicy"): clusterpropagationpolicy_schema,
    ("policy.karmada.io", "v1alpha1", "OverridePolicy"): overridepolicy_schema,
    ("policy.karmada.io", "v1alpha1", "ClusterOverridePolicy"): clusteroverridepolicy_schema,
    ("policy.karmada.io", "v1alpha1", "ClusterTaintPolicy"): clustertaintpolicy_schema,
    ("work.karmada.io", "v1alpha2", "ResourceBinding"): resourcebinding_schema,
    ("work.karmada.io", "v1alpha2", "ClusterResourceBinding"): clusterresourcebinding_schema,
    ("work.karmada.io", "v1alpha1", "Work"): work_schema,
    ("apps.karmada.io", "v1alpha1", "WorkloadRebalancer"): workloadrebalancer_schema,
    (
        "config.karmada.io",
        "v1alpha1",
        "ResourceInterpreterCustomization",
    ): resourceinterpretercustomization_schema,
}


def schema_for(group: str, version: str, kind: str) -> Schema:
    """A fresh copy of the schema of a built-in kind; KeyError if the kind is not built in."""
    return SCHEMA_BUILDERS[(group, version, kind)]()


__all__ = ["SCHEMA_BUILDERS", "Schema", "object_meta", "schema_for"]
