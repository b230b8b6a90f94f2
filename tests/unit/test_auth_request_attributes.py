"""Request-attribute resolution, the authorizer policy, Status bodies and the aiohttp auth middleware."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from flotilla.apiserver.auth import (
    ANONYMOUS,
    AUTHENTICATED_GROUP,
    MASTERS_GROUP,
    Authorizer,
    RequestAttributes,
    TokenAuthenticator,
    UserInfo,
    attributes_from_access_review,
    auth_middleware,
    forbidden_message,
    forbidden_status,
    is_always_allowed_path,
    request_attributes,
    unauthorized_status,
)

# ------------------------------------------------------------------------------------------- request_attributes


def test_namespaced_collection_list() -> None:
    a = request_attributes("GET", "/api/v1/namespaces/default/configmaps", {})
    assert a.resource_request
    assert (a.verb, a.api_group, a.api_version, a.namespace, a.resource, a.name, a.subresource) == (
        "list",
        "",
        "v1",
        "default",
        "configmaps",
        "",
        "",
    )


def test_group_subresource_update() -> None:
    a = request_attributes("PUT", "/apis/apps/v1/namespaces/x/deployments/web/status", {})
    assert a.resource_request
    assert (a.verb, a.api_group, a.api_version, a.namespace, a.resource, a.name, a.subresource) == (
        "update",
        "apps",
        "v1",
        "x",
        "deployments",
        "web",
        "status",
    )
    assert a.qualified_resource == "deployments.apps"


def test_cluster_scoped_list_and_get() -> None:
    a = request_attributes("GET", "/api/v1/nodes", {})
    assert (a.resource_request, a.verb, a.namespace, a.resource, a.name) == (True, "list", "", "nodes", "")
    b = request_attributes("GET", "/api/v1/nodes/n1", {})
    assert (b.verb, b.resource, b.name) == ("get", "nodes", "n1")


@pytest.mark.parametrize("value", ["true", "1", "True", "yes-ish"])
def test_watch_query_makes_watch(value: str) -> None:
    a = request_attributes("GET", "/api/v1/namespaces/default/pods", {"watch": value})
    assert a.verb == "watch"


@pytest.mark.parametrize("value", ["false", "0", "False", "f", ""])
def test_watch_false_is_list(value: str) -> None:
    assert request_attributes("GET", "/api/v1/pods", {"watch": value}).verb == "list"


def test_watch_query_string_form() -> None:
    a = request_attributes("GET", "/apis/apps/v1/deployments", "watch=true&resourceVersion=5")
    assert (a.verb, a.api_group, a.resource, a.namespace) == ("watch", "apps", "deployments", "")


def test_watch_query_parse_qs_form() -> None:
    assert request_attributes("GET", "/api/v1/pods", {"watch": ["1"]}).verb == "watch"


def test_legacy_watch_prefix() -> None:
    a = request_attributes("GET", "/api/v1/watch/namespaces/default/pods/p1", {})
    assert (a.verb, a.namespace, a.resource, a.name) == ("watch", "default", "pods", "p1")


def test_field_selector_name_sets_name() -> None:
    a = request_attributes(
        "GET", "/api/v1/namespaces/default/configmaps", {"fieldSelector": "metadata.name=foo", "watch": "1"}
    )
    assert (a.verb, a.name) == ("watch", "foo")
    b = request_attributes("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=n,metadata.name==p"})
    assert (b.verb, b.name) == ("list", "p")
    c = request_attributes("GET", "/api/v1/pods", {"fieldSelector": "metadata.name!=p"})
    assert c.name == ""


@pytest.mark.parametrize(
    ("method", "path", "verb"),
    [
        ("POST", "/api/v1/namespaces/default/configmaps", "create"),
        ("GET", "/api/v1/namespaces/default/configmaps/c", "get"),
        ("HEAD", "/api/v1/namespaces/default/configmaps/c", "get"),
        ("PUT", "/api/v1/namespaces/default/configmaps/c", "update"),
        ("PATCH", "/api/v1/namespaces/default/configmaps/c", "patch"),
        ("DELETE", "/api/v1/namespaces/default/configmaps/c", "delete"),
        ("DELETE", "/api/v1/namespaces/default/configmaps", "deletecollection"),
        ("OPTIONS", "/api/v1/namespaces/default/configmaps/c", ""),
    ],
)
def test_method_verbs(method: str, path: str, verb: str) -> None:
    assert request_attributes(method, path, {}).verb == verb


def test_namespace_object_and_its_subresources() -> None:
    ns = request_attributes("GET", "/api/v1/namespaces/default", {})
    assert (ns.verb, ns.resource, ns.name, ns.namespace) == ("get", "namespaces", "default", "default")
    fin = request_attributes("PUT", "/api/v1/namespaces/t/finalize", {})
    assert (fin.verb, fin.resource, fin.name, fin.subresource, fin.namespace) == (
        "update",
        "namespaces",
        "t",
        "finalize",
        "t",
    )
    lst = request_attributes("GET", "/api/v1/namespaces", {})
    assert (lst.verb, lst.resource, lst.namespace) == ("list", "namespaces", "")


def test_pod_subresources() -> None:
    log = request_attributes("GET", "/api/v1/namespaces/d/pods/p/log", {"follow": "true"})
    assert (log.verb, log.resource, log.name, log.subresource) == ("get", "pods", "p", "log")
    ex = request_attributes("POST", "/api/v1/namespaces/d/pods/p/exec", {})
    assert (ex.verb, ex.subresource) == ("create", "exec")


def test_proxy_verb_has_no_subresource() -> None:
    a = request_attributes("GET", "/api/v1/proxy/namespaces/d/services/s/some/path", {})
    assert (a.verb, a.resource, a.name, a.subresource) == ("proxy", "services", "s", "")


def test_trailing_slash_is_ignored() -> None:
    a = request_attributes("GET", "/api/v1/namespaces/default/configmaps/", {})
    assert (a.verb, a.resource) == ("list", "configmaps")


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/version",
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/openapi/v2",
        "/openapi/v3",
        "/openapi/v3/apis/apps/v1",
        "/healthz",
        "/readyz",
        "/livez",
        "/metrics",
    ],
)
def test_non_resource_paths(path: str) -> None:
    a = request_attributes("GET", path, {"watch": "true"})
    assert not a.resource_request
    assert a.verb == "get"
    assert a.path == path
    assert request_attributes("POST", path, {}).verb == "post"


def test_always_allowed_paths() -> None:
    for p in ("/healthz", "/readyz", "/livez", "/version", "/version/", "/readyz/etcd", "/livez/ping"):
        assert is_always_allowed_path(p), p
    for p in ("/api", "/apis", "/openapi/v3", "/healthzz", "/metrics", "/"):
        assert not is_always_allowed_path(p), p


# ------------------------------------------------------------------------------------------- authorizer

ADMIN = UserInfo("admin", "1", (MASTERS_GROUP, AUTHENTICATED_GROUP))
BOB = UserInfo("bob", "2", (AUTHENTICATED_GROUP,))
VIEWER = UserInfo("vera", "3", ("flotilla:viewers", AUTHENTICATED_GROUP))


def _ok(
    authz: Authorizer, user: UserInfo, method: str, path: str, query: dict[str, str] | None = None
) -> bool:
    attrs = request_attributes(method, path, query or {})
    allowed, reason = authz.authorize(user, attrs.verb, attrs)
    assert isinstance(reason, str)
    return allowed


def test_admin_group_may_do_anything() -> None:
    authz = Authorizer()
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        assert _ok(authz, ADMIN, method, "/api/v1/namespaces/default/configmaps/x")
    assert _ok(authz, ADMIN, "DELETE", "/apis/apps/v1/namespaces/x/deployments")
    assert _ok(authz, ADMIN, "POST", "/some/non-resource")


def test_listed_admins() -> None:
    authz = Authorizer(admins=["bob"])
    assert _ok(authz, BOB, "DELETE", "/api/v1/nodes/n1")
    assert not _ok(Authorizer(), BOB, "DELETE", "/api/v1/nodes/n1")


def test_viewers_are_read_only() -> None:
    authz = Authorizer()
    assert _ok(authz, VIEWER, "GET", "/api/v1/namespaces/default/configmaps")
    assert _ok(authz, VIEWER, "GET", "/api/v1/namespaces/default/configmaps/c")
    assert _ok(authz, VIEWER, "GET", "/apis/apps/v1/deployments", {"watch": "true"})
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert not _ok(authz, VIEWER, method, "/api/v1/namespaces/default/configmaps/c")
    custom = Authorizer(viewers_group="readers")
    assert not _ok(custom, VIEWER, "GET", "/api/v1/pods")
    assert _ok(custom, UserInfo("r", "", ("readers",)), "GET", "/api/v1/pods")
    assert _ok(Authorizer(viewers=["bob"]), BOB, "GET", "/api/v1/pods")


def test_viewers_cannot_read_secrets_or_credential_subresources() -> None:
    authz = Authorizer()
    for path, query in (("/api/v1/secrets", {}), ("/api/v1/secrets", {"watch": "true"}),
                        ("/api/v1/namespaces/karmada-cluster/secrets", {}),
                        ("/api/v1/namespaces/karmada-cluster/secrets/member1", {}),
                        ("/api/v1/namespaces/karmada-cluster/secrets", {"fieldSelector": "metadata.name=member1"}),
                        ("/api/v1/watch/namespaces/default/secrets", {})):
        assert not _ok(authz, VIEWER, "GET", path, query), (path, query)
        assert not _ok(Authorizer(viewers=["bob"]), BOB, "GET", path, query), (path, query)
    for sub in ("token", "exec", "attach", "portforward", "proxy"):
        assert not _ok(authz, VIEWER, "GET", f"/api/v1/namespaces/default/serviceaccounts/sa/{sub}")
        assert not _ok(authz, VIEWER, "GET", f"/api/v1/namespaces/default/pods/p/{sub}")
    # what Kubernetes' view role does grant stays readable
    assert _ok(authz, VIEWER, "GET", "/api/v1/namespaces/default/serviceaccounts/sa")
    assert _ok(authz, VIEWER, "GET", "/apis/apps/v1/namespaces/default/deployments/web/scale")
    assert _ok(authz, VIEWER, "GET", "/apis/cluster.karmada.io/v1alpha1/clusters/member1/status")
    assert _ok(authz, VIEWER, "GET", "/api/v1/namespaces/default/pods/p/log")
    assert _ok(authz, VIEWER, "GET", "/apis/cluster.karmada.io/v1alpha1/clusters")
    # a group's own "secrets" resource (a custom resource) is not the core Secret
    assert _ok(authz, VIEWER, "GET", "/apis/example.com/v1/secrets")
    # admins still read them
    assert _ok(authz, ADMIN, "GET", "/api/v1/namespaces/karmada-cluster/secrets/member1")


def test_viewer_access_reviews_deny_secrets_and_wildcards() -> None:
    authz = Authorizer()

    def can(verb: str, resource: str, group: str = "", namespace: str = "") -> bool:
        attrs = attributes_from_access_review({"resourceAttributes": {
            "verb": verb, "resource": resource, "group": group, "namespace": namespace}})
        return authz.authorize(VIEWER, attrs.verb, attrs)[0]

    assert not can("list", "secrets") and not can("get", "secrets", namespace="karmada-cluster")
    assert not can("watch", "secrets", namespace="default")
    assert not can("get", "*") and not can("list", "*", group="*")
    assert can("list", "clusters", "cluster.karmada.io") and can("list", "deployments", "apps")


def test_anonymous_read_only_cannot_read_secrets() -> None:
    ro = Authorizer(anonymous=True, anonymous_read_only=True)
    assert _ok(ro, ANONYMOUS, "GET", "/api/v1/configmaps")
    assert not _ok(ro, ANONYMOUS, "GET", "/api/v1/secrets")
    assert not _ok(ro, ANONYMOUS, "GET", "/api/v1/namespaces/karmada-cluster/secrets/member1")
    assert _ok(Authorizer(anonymous=True), ANONYMOUS, "GET", "/api/v1/secrets")  # full anonymous access is full


def test_plain_authenticated_user() -> None:
    authz = Authorizer()
    assert not _ok(authz, BOB, "GET", "/api/v1/namespaces/default/configmaps")
    # discovery and other non-resource reads are fine for every authenticated user
    for p in ("/api", "/apis", "/api/v1", "/apis/apps/v1", "/openapi/v3", "/version", "/healthz"):
        assert _ok(authz, BOB, "GET", p), p
    assert not _ok(authz, BOB, "POST", "/api")
    # kubectl auth can-i / whoami
    assert _ok(authz, BOB, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert _ok(authz, BOB, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews")
    assert not _ok(authz, BOB, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews")


def test_anonymous_policy() -> None:
    off = Authorizer()
    assert not _ok(off, ANONYMOUS, "GET", "/api")
    assert not _ok(off, ANONYMOUS, "GET", "/api/v1/pods")
    for p in ("/healthz", "/readyz", "/livez", "/version"):
        assert _ok(off, ANONYMOUS, "GET", p), p
    assert not _ok(off, ANONYMOUS, "POST", "/healthz")

    on = Authorizer(anonymous=True)
    assert _ok(on, ANONYMOUS, "GET", "/api")
    assert _ok(on, ANONYMOUS, "POST", "/api/v1/namespaces/default/configmaps")

    ro = Authorizer(anonymous=True, anonymous_read_only=True)
    assert _ok(ro, ANONYMOUS, "GET", "/apis")
    assert _ok(ro, ANONYMOUS, "GET", "/api/v1/pods", {"watch": "1"})
    assert not _ok(ro, ANONYMOUS, "DELETE", "/api/v1/namespaces/default/pods/p")


def test_access_review_attributes() -> None:
    authz = Authorizer()
    a = attributes_from_access_review(
        {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "configmaps"}}
    )
    assert (a.resource_request, a.verb, a.namespace, a.resource, a.api_group) == (
        True,
        "list",
        "default",
        "configmaps",
        "",
    )
    assert authz.authorize(VIEWER, a.verb, a)[0]
    assert not authz.authorize(BOB, a.verb, a)[0]
    d = attributes_from_access_review(
        {"resourceAttributes": {"verb": "delete", "group": "apps", "resource": "deployments", "name": "w"}}
    )
    assert not authz.authorize(VIEWER, d.verb, d)[0]
    assert authz.authorize(ADMIN, d.verb, d)[0]
    n = attributes_from_access_review({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}})
    assert not n.resource_request and authz.authorize(ANONYMOUS, n.verb, n)[0]
    with pytest.raises(ValueError):
        attributes_from_access_review({})


# ------------------------------------------------------------------------------------------- Status bodies


def test_forbidden_messages_match_kubernetes() -> None:
    a = request_attributes("GET", "/api/v1/namespaces/default/configmaps", {})
    assert forbidden_message(BOB, a.verb, a) == (
        'configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" '
        'in the namespace "default"'
    )
    n = request_attributes("GET", "/api/v1/nodes", {})
    assert forbidden_message(BOB, n.verb, n) == (
        'nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope'
    )
    d = request_attributes("PUT", "/apis/apps/v1/namespaces/x/deployments/web/status", {})
    assert forbidden_message(BOB, d.verb, d) == (
        'deployments.apps "web" is forbidden: User "bob" cannot update resource "deployments/status" '
        'in API group "apps" in the namespace "x"'
    )
    p = request_attributes("GET", "/metrics", {})
    assert (
        forbidden_message(ANONYMOUS, p.verb, p)
        == 'forbidden: User "system:anonymous" cannot get path "/metrics"'
    )
    assert forbidden_message(BOB, a.verb, a, "no RBAC policy matched").endswith(
        '"default": no RBAC policy matched'
    )


def test_forbidden_status_shape() -> None:
    d = request_attributes("DELETE", "/apis/apps/v1/namespaces/x/deployments/web", {})
    body = forbidden_status(BOB, d.verb, d)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["metadata"] == {}
    assert (body["status"], body["reason"], body["code"]) == ("Failure", "Forbidden", 403)
    assert body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
    core = forbidden_status(BOB, "list", request_attributes("GET", "/api/v1/namespaces/d/configmaps", {}))
    assert core["details"] == {"kind": "configmaps"}


def test_unauthorized_status_exact() -> None:
    assert unauthorized_status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


# ------------------------------------------------------------------------------------------- middleware

TOKENS = {
    "admin-token": UserInfo("admin", "u1", (MASTERS_GROUP,)),
    "bob-token": UserInfo("bob", "u2", ()),
}


async def _client(anonymous: bool, authz: Authorizer | None = None) -> TestClient:
    async def whoami(request: web.Request) -> web.Response:
        user: UserInfo = request["user"]
        attrs: RequestAttributes = request["request_attributes"]
        return web.json_response({"user": user.name, "groups": list(user.groups), "verb": attrs.verb})

    app = web.Application(
        middlewares=[
            auth_middleware(
                TokenAuthenticator(TOKENS),
                authz or Authorizer(anonymous=anonymous),
                anonymous=anonymous,
            )
        ]
    )
    app.router.add_route("*", "/{tail:.*}", whoami)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


async def test_middleware_valid_token_sets_user() -> None:
    client = await _client(anonymous=False)
    try:
        r = await client.get(
            "/api/v1/namespaces/default/configmaps", headers={"Authorization": "Bearer admin-token"}
        )
        assert r.status == 200
        body = await r.json()
        assert body == {"user": "admin", "groups": [MASTERS_GROUP, AUTHENTICATED_GROUP], "verb": "list"}
    finally:
        await client.close()


async def test_middleware_401_shapes() -> None:
    client = await _client(anonymous=True)
    try:
        for headers in (
            {"Authorization": "Bearer wrong"},
            {"Authorization": "Bearer  admin-token"},
            {"authorization": "bearer x"},
        ):
            r = await client.get("/api", headers=headers)
            assert r.status == 401, headers
            assert r.content_type == "application/json"
            assert await r.json() == unauthorized_status()
        # invalid credentials are rejected even on the always-allowed paths
        r = await client.get("/healthz", headers={"Authorization": "Bearer wrong"})
        assert r.status == 401
    finally:
        await client.close()


async def test_middleware_no_credentials_without_anonymous() -> None:
    client = await _client(anonymous=False)
    try:
        r = await client.get("/api")
        assert r.status == 401
        assert (await r.json())["reason"] == "Unauthorized"
        for p in ("/healthz", "/readyz", "/livez", "/version"):
            r = await client.get(p)
            assert r.status == 200, p
            assert (await r.json())["user"] == "system:anonymous"
    finally:
        await client.close()


async def test_middleware_anonymous_enabled() -> None:
    client = await _client(anonymous=True)
    try:
        r = await client.get("/api/v1/pods")
        assert r.status == 200
        assert await r.json() == {
            "user": "system:anonymous",
            "groups": ["system:unauthenticated"],
            "verb": "list",
        }
        # another scheme is "no bearer credentials", as in Kubernetes
        r = await client.get("/apis", headers={"Authorization": "Basic Zm9vOmJhcg=="})
        assert r.status == 200
    finally:
        await client.close()


async def test_middleware_403_shape() -> None:
    client = await _client(anonymous=False)
    try:
        r = await client.get(
            "/api/v1/namespaces/default/configmaps", headers={"Authorization": "Bearer bob-token"}
        )
        assert r.status == 403
        assert await r.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" '
            'in the namespace "default"',
            "reason": "Forbidden",
            "details": {"kind": "configmaps"},
            "code": 403,
        }
        r = await client.get("/api", headers={"Authorization": "Bearer bob-token"})
        assert r.status == 200
    finally:
        await client.close()


async def test_middleware_anonymous_authn_but_authz_denies() -> None:
    client = await _client(anonymous=True, authz=Authorizer(anonymous=False))
    try:
        r = await client.get("/api/v1/nodes")
        assert r.status == 403
        body = await r.json()
        assert body["message"] == (
            'nodes is forbidden: User "system:anonymous" cannot list resource "nodes" in API group "" '
            "at the cluster scope"
        )
    finally:
        await client.close()
