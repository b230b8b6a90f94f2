"""The Pull-mode agent's scope: each request its controllers make is allowed, everything around it refused."""

from __future__ import annotations

import pytest

from flotilla.apiserver.agent_scope import (
    agent_cluster_of,
    agent_create_name_error,
    agent_may,
    agent_user,
)
from flotilla.apiserver.auth import (
    AUTHENTICATED_GROUP,
    Authorizer,
    UserInfo,
    attributes_from_access_review,
    may_read_secrets,
    request_attributes,
)

CLUSTERS = "/apis/cluster.karmada.io/v1alpha1/clusters"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/karmada-cluster/leases"
WORKS = "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-m1/works"
AGENT = agent_user("m1").with_group(AUTHENTICATED_GROUP)

ALLOWED = [
    ("GET", f"{CLUSTERS}/m1", ""),
    ("GET", CLUSTERS, "fieldSelector=metadata.name%3Dm1"),
    ("GET", CLUSTERS, "fieldSelector=metadata.name%3Dm1&watch=true"),
    ("POST", CLUSTERS, ""),
    ("PUT", f"{CLUSTERS}/m1", ""),
    ("PATCH", f"{CLUSTERS}/m1", ""),
    ("GET", f"{CLUSTERS}/m1/status", ""),
    ("PUT", f"{CLUSTERS}/m1/status", ""),
    ("PATCH", f"{CLUSTERS}/m1/status", ""),
    ("GET", f"{LEASES}/m1", ""),
    ("POST", LEASES, ""),
    ("PUT", f"{LEASES}/m1", ""),
    ("PATCH", f"{LEASES}/m1", ""),
    ("GET", LEASES, "fieldSelector=metadata.name%3Dm1&watch=1"),
    ("GET", WORKS, ""),
    ("GET", WORKS, "watch=true"),
    ("GET", f"{WORKS}/w1", ""),
    ("PUT", f"{WORKS}/w1", ""),
    ("PATCH", f"{WORKS}/w1", ""),
    ("GET", f"{WORKS}/w1/status", ""),
    ("PUT", f"{WORKS}/w1/status", ""),
    ("PATCH", f"{WORKS}/w1/status", ""),
    ("POST", "/api/v1/namespaces/karmada-es-m1/events", ""),
    ("PATCH", "/api/v1/namespaces/karmada-es-m1/events/e1", ""),
    ("POST", "/api/v1/namespaces/default/events", ""),
    ("POST", "/apis/events.k8s.io/v1/namespaces/default/events", ""),
    ("PUT", "/apis/events.k8s.io/v1/namespaces/karmada-es-m1/events/e1", ""),
    ("GET", "/apis/config.karmada.io/v1alpha1/resourceinterpretercustomizations", ""),
    ("GET", "/apis/config.karmada.io/v1alpha1/resourceinterpretercustomizations", "watch=true"),
    ("GET", "/apis/config.karmada.io/v1alpha1/resourceinterpreterwebhookconfigurations/w", ""),
]

REFUSED = {
    "another cluster's Works": ("GET", "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-m2/works", ""),
    "Works of all namespaces": ("GET", "/apis/work.karmada.io/v1alpha1/works", ""),
    "deleting a Work": ("DELETE", f"{WORKS}/w1", ""),
    "creating a Work": ("POST", WORKS, ""),
    "Secrets in its namespace": ("GET", "/api/v1/namespaces/karmada-es-m1/secrets", ""),
    "Secrets in karmada-cluster": ("GET", "/api/v1/namespaces/karmada-cluster/secrets/m1", ""),
    "Secrets everywhere": ("GET", "/api/v1/secrets", ""),
    "bindings": ("GET", "/apis/work.karmada.io/v1alpha2/resourcebindings", ""),
    "cluster bindings": ("GET", "/apis/work.karmada.io/v1alpha2/clusterresourcebindings", ""),
    "templates": ("GET", "/apis/apps/v1/namespaces/default/deployments", ""),
    "policies": ("GET", "/apis/policy.karmada.io/v1alpha1/propagationpolicies", ""),
    "another cluster's Lease": ("GET", f"{LEASES}/m2", ""),
    "renewing another cluster's Lease": ("PUT", f"{LEASES}/m2", ""),
    "a Lease in another namespace": ("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/m1", ""),
    "listing every Lease": ("GET", LEASES, ""),
    "deleting its Lease": ("DELETE", f"{LEASES}/m1", ""),
    "patching another Cluster's status": ("PATCH", f"{CLUSTERS}/m2/status", ""),
    "deleting its Cluster": ("DELETE", f"{CLUSTERS}/m1", ""),
    "deleting every Cluster": ("DELETE", CLUSTERS, ""),
    "another Cluster's status": ("GET", f"{CLUSTERS}/m2/status", ""),
    "its Cluster's proxy": ("GET", f"{CLUSTERS}/m1/proxy/api/v1/secrets", ""),
    "events elsewhere": ("POST", "/api/v1/namespaces/kube-system/events", ""),
    "reading events": ("GET", "/api/v1/namespaces/default/events", ""),
    "writing a customization": ("POST", "/apis/config.karmada.io/v1alpha1/resourceinterpretercustomizations", ""),
    "namespaces": ("POST", "/api/v1/namespaces", ""),
    "the metrics": ("GET", "/metrics", ""),
}


@pytest.mark.parametrize(("method", "path", "query"), ALLOWED, ids=[f"{m} {p}?{q}" for m, p, q in ALLOWED])
def test_agent_scope_allows_what_its_controllers_need(method: str, path: str, query: str) -> None:
    attrs = request_attributes(method, path, query)
    allowed, reason = agent_may(attrs, attrs.verb, "m1")
    assert allowed, (attrs, reason)
    assert Authorizer().authorize(AGENT, attrs.verb, attrs)[0]


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_agent_scope_refuses_everything_else(what: str) -> None:
    method, path, query = REFUSED[what]
    attrs = request_attributes(method, path, query)
    assert not agent_may(attrs, attrs.verb, "m1")[0]
    assert not Authorizer().authorize(AGENT, attrs.verb, attrs)[0]


def test_agent_scope_reads_discovery_version_and_health_like_every_user() -> None:
    for path in ("/api", "/apis", "/apis/work.karmada.io/v1alpha1", "/version", "/healthz", "/readyz",
                 "/openapi/v3"):
        attrs = request_attributes("GET", path)
        assert Authorizer().authorize(AGENT, attrs.verb, attrs)[0], path


def test_agent_refusal_names_its_own_cluster_and_namespace() -> None:
    attrs = request_attributes("GET", "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-m2/works")
    allowed, reason = agent_may(attrs, attrs.verb, "m1")
    assert not allowed and '"karmada-es-m1"' in reason
    attrs = request_attributes("PATCH", f"{CLUSTERS}/m2")
    assert 'own Cluster (named "m1")' in agent_may(attrs, attrs.verb, "m1")[1]


def test_agent_reads_every_cluster_for_the_peer_protocol_but_writes_only_its_own() -> None:
    for method, path, query in (("GET", f"{CLUSTERS}/m2", ""), ("GET", CLUSTERS, ""),
                                ("GET", CLUSTERS, "watch=true"), ("GET", CLUSTERS, "fieldSelector=metadata.name%3Dm2")):
        attrs = request_attributes(method, path, query)
        assert agent_may(attrs, attrs.verb, "m1")[0], (method, path, query)
    for method, path in (("PATCH", f"{CLUSTERS}/m2"), ("PUT", f"{CLUSTERS}/m2"), ("PATCH", f"{CLUSTERS}/m2/status"),
                         ("GET", f"{CLUSTERS}/m2/status"), ("DELETE", f"{CLUSTERS}/m2")):
        attrs = request_attributes(method, path)
        assert not agent_may(attrs, attrs.verb, "m1")[0], (method, path)


def test_agent_scope_refuses_wildcards_of_can_i() -> None:
    for spec in ({"verb": "*", "group": "work.karmada.io", "resource": "works", "namespace": "karmada-es-m1"},
                 {"verb": "get", "group": "*", "resource": "*"},
                 {"verb": "list", "group": "work.karmada.io", "resource": "works", "namespace": "*"}):
        attrs = attributes_from_access_review({"resourceAttributes": spec})
        assert not agent_may(attrs, attrs.verb, "m1")[0], spec


def test_agent_identity_needs_both_the_name_and_the_group() -> None:
    assert agent_cluster_of(agent_user("m1")) == "m1"
    assert agent_cluster_of(UserInfo("system:karmada:agent:m1", "", ())) is None  # name without the group
    assert agent_cluster_of(UserInfo("bob", "", ("system:karmada:agents",))) is None
    assert agent_cluster_of(UserInfo("system:karmada:agent:", "", ("system:karmada:agents",))) is None
    bob = UserInfo("system:karmada:agent:m1", "", (AUTHENTICATED_GROUP,))
    attrs = request_attributes("GET", f"{CLUSTERS}/m1")
    assert not Authorizer().authorize(bob, attrs.verb, attrs)[0]


def test_agent_creates_only_its_own_cluster_and_lease() -> None:
    for path in (CLUSTERS, LEASES):
        attrs = request_attributes("POST", path)
        assert agent_create_name_error(attrs, "m1", "m1") is None
        assert "may only create its own" in (agent_create_name_error(attrs, "m2", "m1") or "")
        assert agent_create_name_error(attrs, None, "m1") is not None  # generateName: not its own
    events = request_attributes("POST", "/api/v1/namespaces/default/events")
    assert agent_create_name_error(events, "anything", "m1") is None


def test_agent_reads_its_works_unredacted() -> None:
    assert may_read_secrets(Authorizer(), AGENT)
    assert not may_read_secrets(Authorizer(), UserInfo("viewer", "", ("flotilla:viewers",)))
