"""The labels the API server's request metrics get (kube-apiserver's), and who may read /metrics."""

from __future__ import annotations

from flotilla.apiserver.auth import (
    ANONYMOUS,
    AUTHENTICATED_GROUP,
    MASTERS_GROUP,
    Authorizer,
    UserInfo,
    request_attributes,
)
from flotilla.apiserver.metrics import request_labels

SERVED = {("", "v1", "configmaps"), ("", "v1", "secrets"), ("apps", "v1", "deployments"),
          ("cluster.karmada.io", "v1alpha1", "clusters")}


def labels(method: str, path: str, query: dict[str, str] | None = None, content_type: str = "") -> tuple[str, ...]:
    attrs = request_attributes(method, path, query or {})
    return request_labels(method, attrs, content_type, lambda g, v, r: (g, v, r) in SERVED)


def test_resource_requests_get_kube_apiservers_verbs_and_scopes() -> None:
    cm = "/api/v1/namespaces/default/configmaps"
    assert labels("GET", cm) == ("LIST", "", "v1", "configmaps", "", "namespace", "apiserver")
    assert labels("GET", "/api/v1/configmaps", {"watch": "true"})[:6] == ("WATCH", "", "v1", "configmaps", "",
                                                                          "cluster")
    assert labels("GET", cm + "/a")[0::5] == ("GET", "resource")
    assert labels("POST", cm)[0] == "POST" and labels("PUT", cm + "/a")[0] == "PUT"
    assert labels("PATCH", cm + "/a", content_type="application/merge-patch+json")[0] == "PATCH"
    assert labels("PATCH", cm + "/a", content_type="application/apply-patch+yaml; charset=utf-8")[0] == "APPLY"
    assert labels("DELETE", cm + "/a")[0] == labels("DELETE", cm)[0] == "DELETE"
    assert labels("PUT", "/apis/apps/v1/namespaces/d/deployments/web/scale") == (
        "PUT", "apps", "v1", "deployments", "scale", "resource", "apiserver")
    assert labels("GET", "/apis/cluster.karmada.io/v1alpha1/clusters/m1/status")[3:6] == ("clusters", "status",
                                                                                          "resource")


def test_unknown_resources_and_paths_collapse_to_other() -> None:
    assert labels("GET", "/api/v1/namespaces/d/made-up-1234") == ("LIST", "", "", "other", "", "", "apiserver")
    assert labels("GET", "/apis/x.example/v9/things") == labels("GET", "/apis/y.example/v1/stuff")
    assert labels("GET", "/api/v1/namespaces/d/configmaps/a/made-up")[4] == "other"
    assert labels("GET", "/random/path/42") == ("GET", "", "", "", "other", "", "apiserver")
    assert labels("GET", "/healthz")[4] == "/healthz" and labels("GET", "/metrics")[4] == "/metrics"
    assert labels("GET", "/openapi/v3/apis/apps/v1")[4] == "/openapi/v3"
    assert labels("HEAD", "/version")[0] == "GET"


def test_only_admins_may_read_metrics() -> None:
    authz = Authorizer()
    attrs = request_attributes("GET", "/metrics")
    admin = UserInfo("admin", "", (MASTERS_GROUP, AUTHENTICATED_GROUP))
    viewer = UserInfo("viewer", "", ("flotilla:viewers", AUTHENTICATED_GROUP))
    bob = UserInfo("bob", "", (AUTHENTICATED_GROUP,))
    assert authz.authorize(admin, "get", attrs)[0]
    assert not authz.authorize(viewer, "get", attrs)[0]
    assert not authz.authorize(bob, "get", attrs)[0]
    assert authz.authorize(bob, "get", request_attributes("GET", "/openapi/v3"))[0]  # discovery stays open
    assert not Authorizer(anonymous=True, anonymous_read_only=True).authorize(ANONYMOUS, "get", attrs)[0]
    assert not authz.authorize(ANONYMOUS, "get", attrs)[0]
