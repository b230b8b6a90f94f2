"""Read-decide-write of one Cluster for the CLI (``fence``, ``unfence``, ``taint``, ``cordon``, ``uncordon``).

The decision function gets the live Cluster and returns a JSON merge patch (or ``None``: nothing to do); the patch
is written guarded by the Cluster's ``resourceVersion`` and decided again on a conflict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flotilla.client import Client


__all__ = ["ATTEMPTS", "ClusterNotFound", "ClusterUpdateConflict", "update_cluster"]

ATTEMPTS = 5


class ClusterNotFound(Exception):
    """The Cluster does not exist; the message is kubectl's."""


class ClusterUpdateConflict(Exception):
    """The Cluster kept changing under the command."""


async def update_cluster(cp: Client, name: str, decide: Callable[[dict[str, Any]], dict[str, Any] | None], *,
                         dry_run: bool = False) -> bool:
    """Apply ``decide(cluster)`` to Cluster ``name``; True when it wrote (with ``dry_run``: when it would)."""
    from flotilla.client import ApiException, is_conflict, is_not_found
    from flotilla.runtime.members import CLUSTERS

    for _ in range(ATTEMPTS):
        try:
            cluster = await cp.get(CLUSTERS, name)
        except ApiException as e:
            if is_not_found(e):
                raise ClusterNotFound(f'clusters.cluster.karmada.io "{name}" not found') from None
            raise
        patch = decide(cluster)
        if patch is None:
            return False
        if dry_run:
            return True
        patch.setdefault("metadata", {}).setdefault("resourceVersion", cluster["metadata"].get("resourceVersion"))
        try:
            await cp.patch(CLUSTERS, name, patch)
            return True
        except ApiException as e:
            if is_not_found(e):
                raise ClusterNotFound(f'clusters.cluster.karmada.io "{name}" not found') from None
            if not is_conflict(e):
                raise
    raise ClusterUpdateConflict(f"cluster {name} kept changing while its taints were being updated; try again")
