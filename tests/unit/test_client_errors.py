"""flotilla.client.errors and resources: pure helpers."""

from __future__ import annotations

import pickle

import pytest

from flotilla.client.errors import (
    ApiException,
    ConnectionFailed,
    from_status,
    is_already_exists,
    is_conflict,
    is_gone,
    is_invalid,
    is_not_found,
)
from flotilla.client.http import HttpTransport
from flotilla.client.kubeconfig import ClusterCredentials
from flotilla.kube.resources import CONFIGMAPS, CRDS, DEPLOYMENTS, NAMESPACES, Resource, object_key


def status(code: int, reason: str, message: str = "m") -> dict[str, object]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message, "details": {"name": "x"}}


@pytest.mark.parametrize(
    ("code", "reason", "predicate"),
    [
        (404, "NotFound", is_not_found),
        (409, "AlreadyExists", is_already_exists),
        (409, "Conflict", is_conflict),
        (410, "Expired", is_gone),
        (410, "Gone", is_gone),
        (422, "Invalid", is_invalid),
    ],
)
def test_classification(code: int, reason: str, predicate: object) -> None:
    e = from_status(status(code, reason), code)
    checks = [is_not_found, is_already_exists, is_conflict, is_gone, is_invalid]
    assert [c(e) for c in checks] == [c is predicate for c in checks]
    assert (e.status, e.reason, e.message) == (code, reason, "m")
    assert e.body is not None and e.body["details"] == {"name": "x"}
    assert str(e) == f"({code}) {reason}: m"


def test_non_status_bodies_and_defaults() -> None:
    e = from_status(None, 404)
    assert e.status == 404 and e.reason == "NotFound" and "could not find" in e.message and e.body is None
    e = from_status({"kind": "Status", "code": "nonsense", "reason": "X"}, 503)
    assert e.status == 503
    assert from_status({"unexpected": 1}, 0).status == 500
    assert not is_not_found(ValueError("404"))


def test_connection_failed() -> None:
    e = ConnectionFailed("refused")
    assert isinstance(e, ApiException) and e.status == 0 and e.reason == "ConnectionFailed"
    assert not any(f(e) for f in (is_not_found, is_conflict, is_gone, is_invalid, is_already_exists))
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is ConnectionFailed and again.message == "refused"
    assert pickle.loads(pickle.dumps(from_status(status(409, "Conflict")))).reason == "Conflict"


def test_resources_and_keys() -> None:
    assert CONFIGMAPS.api_version == "v1" and CONFIGMAPS.path_prefix == "/api/v1"
    assert DEPLOYMENTS.api_version == "apps/v1" and DEPLOYMENTS.path_prefix == "/apis/apps/v1"
    assert str(CRDS) == "customresourcedefinitions.v1.apiextensions.k8s.io"
    assert Resource("", "v1", "configmaps", "ConfigMap", True) == CONFIGMAPS
    assert hash(Resource("", "v1", "configmaps", "ConfigMap", True)) == hash(CONFIGMAPS)
    assert object_key({"metadata": {"name": "a", "namespace": "ns"}}) == "ns/a"
    assert object_key({"metadata": {"name": "a"}}) == "a"


def test_http_urls() -> None:
    t = HttpTransport(ClusterCredentials(server="https://h:6443/prefix/"))
    assert t.url(CONFIGMAPS, "ns") == "https://h:6443/prefix/api/v1/namespaces/ns/configmaps"
    assert t.url(CONFIGMAPS, None) == "https://h:6443/prefix/api/v1/configmaps"
    assert t.url(DEPLOYMENTS, "ns", "web", "scale") == \
        "https://h:6443/prefix/apis/apps/v1/namespaces/ns/deployments/web/scale"
    # cluster-scoped: a namespace is ignored, as the server would otherwise read it as a subresource
    assert t.url(NAMESPACES, "ignored", "default", "finalize") == "https://h:6443/prefix/api/v1/namespaces/default/finalize"
