"""The names that identify a Pull cluster's agent to the control plane: the group and user its credentials
authenticate as (``system:karmada:agent:<cluster>``, as Karmada's agent certificates name it), and the namespace of
its Lease."""

from __future__ import annotations

AGENTS_GROUP = "system:karmada:agents"
AGENT_USER_PREFIX = "system:karmada:agent:"
#: where an agent's Lease lives (Karmada's ``--cluster-namespace`` default)
LEASE_NAMESPACE = "karmada-cluster"
