"""The agent's Cluster: created when missing, adopted when present (pure decisions; the writes are in
:mod:`.runtime`).

The Cluster of a Pull member has ``spec.syncMode: Pull`` and no ``secretRef`` (the member's credentials stay in
the member); ``spec.apiEndpoint`` is informational and optional. The agent adds no finalizer: the control plane's
cluster controller adds ``karmada.io/cluster-controller`` (and creates ``karmada-es-<cluster>``), and the agent's
cluster-status controller waits for it, as for a Push cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class RegistrationError(Exception):
    """The Cluster cannot be registered or adopted by this agent (the message says what to do)."""


def cluster_body(name: str, api_endpoint: str | None = None) -> dict[str, Any]:
    """The Cluster the agent creates."""
    spec: dict[str, Any] = {"syncMode": "Pull"}
    if api_endpoint:
        spec["apiEndpoint"] = api_endpoint
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
            "spec": spec}


def adoption_patch(existing: Mapping[str, Any], api_endpoint: str | None = None) -> dict[str, Any] | None:
    """The merge patch that makes an existing Cluster this agent's (None: it already is), or RegistrationError when
    it must not be adopted: a Push cluster (``flotilla join``) is the controller-manager's, and a Cluster being
    deleted is going away (the agent registers it again once it is gone)."""
    meta = existing.get("metadata") if isinstance(existing.get("metadata"), Mapping) else {}
    spec = existing.get("spec") if isinstance(existing.get("spec"), Mapping) else {}
    name = meta.get("name", "")
    if meta.get("deletionTimestamp"):
        raise RegistrationError(f"cluster {name} is being deleted; it is registered again once it is gone")
    if spec.get("syncMode") != "Pull":
        raise RegistrationError(f"cluster {name} is registered in {spec.get('syncMode') or 'Push'} mode (flotilla "
                                "join); unjoin it first, or give this agent another --cluster-name")
    if (spec.get("secretRef") or {}).get("name"):
        raise RegistrationError(f"cluster {name} is in Pull mode but names a secret (spec.secretRef); remove "
                                "spec.secretRef: a Pull cluster's credentials stay in the member")
    if api_endpoint and spec.get("apiEndpoint") != api_endpoint:
        return {"spec": {"apiEndpoint": api_endpoint}}
    return None
