"""Which collection of the API a request is about: group, version, plural, kind, scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONFIGMAPS",
    "CRDS",
    "DEPLOYMENTS",
    "EVENTS",
    "JOBS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "SECRETS",
    "SERVICES",
    "STATEFULSETS",
    "Resource",
    "api_path",
    "group_version",
    "object_key",
]


def group_version(group: str, version: str) -> str:
    """``<group>/<version>``, or ``<version>`` alone for the core group: an object's ``apiVersion``."""
    return f"{group}/{version}" if group else version


def api_path(group: str, version: str) -> str:
    """Where a group-version is served: ``/api/<version>`` for the core group, else ``/apis/<group>/<version>``."""
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return group_version(self.group, self.version)

    @property
    def path_prefix(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return api_path(self.group, self.version)

    def __str__(self) -> str:
        return f"{self.plural}.{self.version}.{self.group}" if self.group else f"{self.plural}.{self.version}"


def object_key(obj: dict[str, Any]) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects), the key informers and work queues use."""
    md = obj.get("metadata") or {}
    ns = md.get("namespace")
    return f"{ns}/{md.get('name', '')}" if ns else str(md.get("name", ""))


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
NODES = Resource("", "v1", "nodes", "Node", False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
PODS = Resource("", "v1", "pods", "Pod", True)
SERVICES = Resource("", "v1", "services", "Service", True)
EVENTS = Resource("", "v1", "events", "Event", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
JOBS = Resource("batch", "v1", "jobs", "Job", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
