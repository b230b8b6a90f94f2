"""What a Pull-mode cluster's agent may do on the control plane, as a pure decision.

An agent authenticates as ``system:karmada:agent:<cluster>`` in the group ``system:karmada:agents`` (Karmada's
names). :func:`agent_may` decides a resource request of such a user from the request attributes and the cluster's
name alone; the :class:`~flotilla.apiserver.auth.Authorizer` asks it after the rules every authenticated user
shares (discovery, ``/version``, health, self reviews). The scope is what the agent's controllers need for its one
cluster:

* ``clusters`` (cluster.karmada.io): get/list/watch of every Cluster (the peer protocol follows the other agents'
  endpoints and the fences), get of its own Cluster's ``status``, create, update/patch of its own Cluster and of
  its ``status``; never delete;
* ``leases`` (coordination.k8s.io) in ``karmada-cluster``: get/create/update/patch of the one named ``<cluster>``,
  list/watch with that field selector;
* ``works`` (work.karmada.io) and their ``status`` (kubectl reads it before patching it) in ``karmada-es-<cluster>``: get/list/watch/update/patch;
* ``events`` (core and events.k8s.io) in ``karmada-es-<cluster>`` and ``default``: create/update/patch;
* ``resourceinterpretercustomizations`` and ``resourceinterpreterwebhookconfigurations`` (config.karmada.io),
  cluster-wide: get/list/watch.

A create names no object in its path, so the authorizer cannot see which Cluster or Lease is created; the API
server checks the body's name of an agent's create (:func:`agent_create_name_error`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flotilla.api.agents import AGENT_USER_PREFIX, AGENTS_GROUP, LEASE_NAMESPACE

if TYPE_CHECKING:  # auth.py imports this module: the names it needs at run time come from there lazily
    from flotilla.apiserver.auth import RequestAttributes, UserInfo

__all__ = [
    "AGENTS_GROUP",
    "AGENT_USER_PREFIX",
    "LEASE_NAMESPACE",
    "agent_cluster_of",
    "agent_create_name_error",
    "agent_may",
    "agent_user",
    "execution_namespace",
]


_CLUSTER = ("cluster.karmada.io", "clusters")
_LEASE = ("coordination.k8s.io", "leases")
_WORK = ("work.karmada.io", "works")
_EVENTS = frozenset({("", "events"), ("events.k8s.io", "events")})
_INTERPRETER = frozenset({("config.karmada.io", "resourceinterpretercustomizations"),
                          ("config.karmada.io", "resourceinterpreterwebhookconfigurations")})
READ_VERBS = frozenset({"get", "list", "watch"})
_EVENT_VERBS = frozenset({"create", "update", "patch"})
_WRITE_VERBS = frozenset({"update", "patch"})


def execution_namespace(cluster: str) -> str:
    """The namespace of the cluster's Works (Karmada's ``karmada-es-<cluster>``)."""
    return f"karmada-es-{cluster}"


def agent_user(cluster: str, uid: str = "") -> UserInfo:
    """The identity of ``cluster``'s agent."""
    from flotilla.apiserver.auth import UserInfo

    return UserInfo(AGENT_USER_PREFIX + cluster, uid, (AGENTS_GROUP,))


def agent_cluster_of(user: UserInfo) -> str | None:
    """The cluster whose agent ``user`` is (named ``system:karmada:agent:<cluster>`` and in the agents group)."""
    if AGENTS_GROUP not in user.groups or not user.name.startswith(AGENT_USER_PREFIX):
        return None
    cluster = user.name[len(AGENT_USER_PREFIX):]
    return cluster or None


@dataclass(frozen=True)
class _Refusal:
    reason: str


def _own(attrs: RequestAttributes, cluster: str, what: str) -> _Refusal | None:
    if attrs.name != cluster:
        return _Refusal(f'the agent of cluster "{cluster}" may only use its own {what} (named "{cluster}")')
    return None


def agent_may(attrs: RequestAttributes, verb: str, cluster: str) -> tuple[bool, str]:
    """Whether the agent of ``cluster`` may do ``verb`` on what ``attrs`` names; ``(allowed, reason)``.

    Only resource requests are decided here (non-resource reads are every authenticated user's). A wildcard
    (``kubectl auth can-i '*' ...``) names more than the scope and is refused.
    """
    if not attrs.resource_request:
        return False, ""
    if "*" in (verb, attrs.resource, attrs.api_group, attrs.subresource, attrs.namespace, attrs.name):
        return False, ""
    key = (attrs.api_group, attrs.resource)
    sub = attrs.subresource
    refusal: _Refusal | None
    # Clusters and the interpreter's kinds are cluster-scoped: a namespace (kubectl auth can-i adds its context's)
    # does not narrow or widen what they name
    if key == _CLUSTER:
        if verb == "create" and not attrs.name:
            return True, "an agent registers its cluster"
        if verb == "create":
            refusal = _own(attrs, cluster, "Cluster")
            return (False, refusal.reason) if refusal else (True, "an agent registers its cluster")
        if verb in READ_VERBS and not sub:
            # every Cluster: the peer protocol needs the other agents' endpoints and the fences
            return True, "an agent follows the Clusters (its own, and its peers' for the peer protocol)"
        if (verb in READ_VERBS or verb in _WRITE_VERBS) and sub in ("", "status"):
            refusal = _own(attrs, cluster, "Cluster")
            return (False, refusal.reason) if refusal else (True, "an agent keeps its Cluster")
        return False, ""
    if key == _LEASE:
        if attrs.namespace != LEASE_NAMESPACE or sub:
            return False, ""
        if verb == "create" and not attrs.name:
            return True, "an agent creates its Lease"
        if verb in READ_VERBS or verb in ("create", "update", "patch"):
            refusal = _own(attrs, cluster, "Lease")
            return (False, refusal.reason) if refusal else (True, "an agent renews its Lease")
        return False, ""
    if key == _WORK:
        if attrs.namespace != execution_namespace(cluster):
            return False, (f'the agent of cluster "{cluster}" may only use the Works in namespace '
                           f'"{execution_namespace(cluster)}"') if attrs.namespace else ""
        if (verb in READ_VERBS or verb in _WRITE_VERBS) and sub in ("", "status"):
            return True, "an agent applies its cluster's Works"
        return False, ""
    if key in _EVENTS:
        if verb in _EVENT_VERBS and not sub and attrs.namespace in (execution_namespace(cluster), "default"):
            return True, "an agent records Events"
        return False, ""
    if key in _INTERPRETER:
        if verb in READ_VERBS and not sub:
            return True, "an agent's resource interpreter reads its customizations"
        return False, ""
    return False, ""


def agent_create_name_error(attrs: RequestAttributes, body_name: str | None, cluster: str) -> str | None:
    """For a create by ``cluster``'s agent, why the body's name is refused (a Cluster or Lease other than its own),
    or None. The authorizer cannot see a create's name (its path names only the collection)."""
    if attrs.verb != "create" or attrs.name or attrs.subresource:
        return None
    key = (attrs.api_group, attrs.resource)
    if key not in (_CLUSTER, _LEASE):
        return None
    if body_name == cluster:
        return None
    what = "Cluster" if key == _CLUSTER else "Lease"
    return f'the agent of cluster "{cluster}" may only create its own {what} (named "{cluster}"), not {body_name!r}'
