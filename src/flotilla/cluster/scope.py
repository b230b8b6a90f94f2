"""Which member clusters a process's cluster-status, execution and work-status controllers serve.

The controller-manager serves the Push clusters: it never calls a Pull cluster's API, since that cluster's agent
(``flotilla agent``) runs the same controllers inside the member, scoped to its one cluster. The scope is the
agent's cluster name (``ControllerOptions.agent_cluster``) or None for the controller-manager.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from flotilla.api.labels import EXECUTION_SPACE_PREFIX

PULL: Final = "Pull"


def is_pull(cluster: Mapping[str, Any] | None) -> bool:
    spec = (cluster or {}).get("spec")
    return isinstance(spec, Mapping) and spec.get("syncMode") == PULL


def serves_cluster(cluster: Mapping[str, Any] | None, agent_cluster: str | None) -> bool:
    """Whether a process with this scope drives ``cluster`` (a Cluster object): the agent drives exactly its own
    cluster while it is in Pull mode, the controller-manager every cluster that is not in Pull mode (so no cluster
    is driven by both). Unknown (None) clusters: only the
    controller-manager, which reports them as not found."""
    if agent_cluster is None:
        return not is_pull(cluster)
    meta = (cluster or {}).get("metadata")
    return isinstance(meta, Mapping) and meta.get("name") == agent_cluster and is_pull(cluster)


def execution_namespace(agent_cluster: str | None) -> str | None:
    """The only namespace of Works the scope watches (None: every namespace)."""
    return f"{EXECUTION_SPACE_PREFIX}{agent_cluster}" if agent_cluster else None


def cluster_field_selector(agent_cluster: str | None) -> str:
    """The field selector of the scope's Cluster watch (empty: every Cluster)."""
    return f"metadata.name={agent_cluster}" if agent_cluster else ""
