"""The names that identify a Pull cluster's agent to the control plane: the group and user its credentials
authenticate as (``system:karmada:agent:<cluster>``, as Karmada's agent certificates name it), and the namespace of
its Lease; and the run permit that the agent keeps in its member."""

from __future__ import annotations

AGENTS_GROUP = "system:karmada:agents"
AGENT_USER_PREFIX = "system:karmada:agent:"
#: where an agent's Lease lives (Karmada's ``--cluster-namespace`` default)
LEASE_NAMESPACE = "karmada-cluster"
#: the run permit, a Lease in the member cluster that the agent renews and each member's guard watches
PERMIT_NAMESPACE = "flotilla-system"
PERMIT_NAME = "flotilla-run-permit"
