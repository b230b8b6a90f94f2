"""Malformed and invalid requests, sent as raw HTTP: every one must get the right 4xx with a Kubernetes
``Status`` body whose message says what to fix, never a 5xx, and must leave nothing half-written."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.apiserver import ServerThread

NS = "bad-input"
CM = f"/api/v1/namespaces/{NS}/configmaps"
KEEP = f"{CM}/keep"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
JSON = "application/json"
YAML = "application/yaml"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
MAX_BODY = 3 * 1024 * 1024


@dataclass
class Reply:
    code: int
    headers: dict[str, str]
    raw: bytes

    def json(self) -> Any:
        return json.loads(self.raw)


def send(base: str, method: str, path: str, body: bytes | None = None, content_type: str | None = JSON,
         headers: dict[str, str] | None = None) -> Reply:
    """One raw request; ``content_type=None`` sends no Content-Type header at all (as the Python client does)."""
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=20)
    try:
        h = dict(headers or {})
        if content_type is not None and body is not None:
            h["Content-Type"] = content_type
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        return Reply(resp.status, dict(resp.getheaders()), resp.read())
    finally:
        conn.close()


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def assert_status(reply: Reply, code: int, reason: str, *hints: str) -> dict[str, Any]:
    """The reply is a 4xx Kubernetes Status with this code and reason, whose message contains every hint."""
    assert reply.code < 500, f"server error {reply.code}: {reply.raw[:500]!r}"
    assert reply.code == code, f"expected {code}, got {reply.code}: {reply.raw[:500]!r}"
    assert reply.headers.get("Content-Type", "").startswith("application/json")
    body = reply.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["status"] == "Failure" and body["code"] == code, body
    assert body["reason"] == reason, body
    message = body["message"]
    assert isinstance(message, str) and len(message) > 10, body
    for hint in hints:
        assert hint.lower() in message.lower(), f"{hint!r} not in message {message!r}"
    details = body.get("details")
    if details is not None:
        assert isinstance(details, dict)
        if "name" in details:
            assert isinstance(details["name"], str), details
        for cause in details.get("causes", []):
            assert isinstance(cause.get("message"), str), cause
    return body


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def base(server: ServerThread) -> Iterator[str]:
    """The server URL, with namespace NS holding exactly ConfigMap 'keep' and Deployment 'web'."""
    url = server.url
    assert send(url, "POST", "/api/v1/namespaces", dumps({"metadata": {"name": NS}})).code == 201
    assert send(url, "POST", CM, dumps({"metadata": {"name": "keep", "labels": {"app": "x"}},
                                        "data": {"a": "1"}})).code == 201
    deployment = {"metadata": {"name": "web"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "a"}]}}}}
    assert send(url, "POST", DEPLOY, dumps(deployment)).code == 201
    yield url


@pytest.fixture
def scratch_ns(base: str, request: pytest.FixtureRequest) -> str:
    """A namespace of its own, for requests that a buggy server might (wrongly) accept."""
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    name = "scratch-" + request.node.originalname.lower().replace("_", "-")[5:40] + "-" + digest
    name = "".join(c for c in name if c.isalnum() or c == "-")
    assert send(base, "POST", "/api/v1/namespaces", dumps({"metadata": {"name": name}})).code == 201
    return name


# ------------------------------------------------------------------------------------------ the cases
@dataclass
class Case:
    id: str
    method: str
    path: str
    body: bytes | None
    content_type: str | None
    code: int
    reason: str
    hints: tuple[str, ...] = ()
    cause_fields: tuple[str, ...] = field(default=())  # 422: fields named in details.causes

    @property
    def writes(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")


def _cm(name: str, **meta: Any) -> bytes:
    return dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"k": "v"}})


PROTOBUF_BODY = b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x0c\n\n\n\x03pbx\x12\x00"

CASES: list[Case] = [
    # ---- bodies that cannot be decoded
    Case("malformed-json", "POST", CM, b'{"metadata": {"name": "x"', JSON, 400, "BadRequest", ("not valid JSON",)),
    Case("malformed-json-no-content-type", "POST", CM, b'{"metadata": ', None, 400, "BadRequest",
         ("not valid JSON",)),
    Case("malformed-yaml", "POST", CM, b"metadata: [unclosed\n  name: : x\n", YAML, 400, "BadRequest",
         ("not valid YAML",)),
    Case("yaml-two-documents", "POST", CM, b"metadata: {name: a}\n---\nmetadata: {name: b}\n", YAML, 400,
         "BadRequest", ("single document",)),
    Case("json-array-not-object", "POST", CM, b'[{"metadata": {"name": "arr"}}]', JSON, 400, "BadRequest",
         ("must be a JSON object",)),
    Case("json-string-not-object", "POST", CM, b'"configmap"', JSON, 400, "BadRequest", ("JSON object",)),
    Case("json-null-body", "POST", CM, b"null", JSON, 400, "BadRequest", ("JSON object",)),
    Case("empty-body", "POST", CM, b"", JSON, 400, "BadRequest", ("empty",)),
    Case("not-utf8", "POST", CM, b'{"metadata": {"name": "\xff"}}', JSON, 400, "BadRequest", ("UTF-8",)),
    Case("json-too-deep", "POST", CM, b"[" * 5000 + b"]" * 5000, JSON, 400, "BadRequest", ("not valid JSON",)),
    Case("metadata-not-object", "POST", CM, dumps({"metadata": "x"}), JSON, 400, "BadRequest",
         ("metadata must be an object",)),
    # ---- body does not fit the URL
    Case("wrong-kind", "POST", CM, dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k"}}), JSON,
         400, "BadRequest", ("kind", "Secret", "ConfigMap")),
    Case("wrong-api-version", "POST", CM, dumps({"apiVersion": "apps/v1", "kind": "ConfigMap",
                                                  "metadata": {"name": "k"}}), JSON,
         400, "BadRequest", ("API version", "apps/v1")),
    Case("namespace-mismatch", "POST", CM, _cm("k", namespace="elsewhere"), JSON, 400, "BadRequest",
         ("namespace of the provided object does not match",)),
    Case("name-mismatch-on-put", "PUT", KEEP, _cm("other"), JSON, 400, "BadRequest",
         ("does not match the name on the URL",)),
    Case("missing-namespace", "POST", "/api/v1/namespaces/no-such-ns/configmaps", _cm("k"), JSON, 404, "NotFound",
         ('namespaces "no-such-ns" not found',)),
    # ---- invalid names and labels: 422 Invalid naming the field
    Case("name-underscore", "POST", CM, _cm("Bad_Name"), JSON, 422, "Invalid", ("metadata.name", "RFC 1123"),
         ("metadata.name",)),
    Case("name-300-chars", "POST", CM, _cm("a" * 300), JSON, 422, "Invalid", ("no more than 253 characters",),
         ("metadata.name",)),
    Case("name-upper", "POST", CM, _cm("UPPER"), JSON, 422, "Invalid", ("lower case",), ("metadata.name",)),
    Case("name-missing", "POST", CM, dumps({"metadata": {}}), JSON, 422, "Invalid",
         ("name or generateName is required",), ("metadata.name",)),
    Case("namespace-name-with-dot", "POST", "/api/v1/namespaces", dumps({"metadata": {"name": "a.b"}}), JSON,
         422, "Invalid", ("RFC 1123 label",), ("metadata.name",)),
    Case("label-key-space", "POST", CM, _cm("l1", labels={"bad key": "v"}), JSON, 422, "Invalid",
         ("bad key", "name part must consist of"), ("metadata.labels",)),
    Case("label-key-bad-prefix", "POST", CM, _cm("l2", labels={"Bad_Prefix/k": "v"}), JSON, 422, "Invalid",
         ("prefix part",), ("metadata.labels",)),
    Case("label-value-dashes", "POST", CM, _cm("l3", labels={"k": "-bad-"}), JSON, 422, "Invalid",
         ("-bad-", "valid label"), ("metadata.labels",)),
    Case("label-value-too-long", "POST", CM, _cm("l4", labels={"k": "v" * 64}), JSON, 422, "Invalid",
         ("no more than 63 characters",), ("metadata.labels",)),
    Case("label-value-int", "POST", CM, _cm("l5", labels={"k": 1}), JSON, 422, "Invalid", ("must be strings",),
         ("metadata.labels[k]",)),
    Case("label-value-null", "POST", CM, _cm("l6", labels={"k": None}), JSON, 422, "Invalid", ("must be strings",),
         ("metadata.labels[k]",)),
    Case("labels-a-list", "POST", CM, _cm("l7", labels=["a"]), JSON, 422, "Invalid", ("map of strings",),
         ("metadata.labels",)),
    Case("annotation-value-int", "POST", CM, _cm("a1", annotations={"k": 1}), JSON, 422, "Invalid",
         ("must be strings",), ("metadata.annotations[k]",)),
    Case("finalizers-not-list", "POST", CM, _cm("f1", finalizers="x"), JSON, 422, "Invalid",
         ("list of strings",), ("metadata.finalizers",)),
    Case("generate-name-int", "POST", CM, dumps({"metadata": {"generateName": 5}}), JSON, 422, "Invalid",
         ("must be a string",), ("metadata.generateName",)),
    # ---- size and media types
    Case("body-over-3MiB", "POST", CM, b'{"metadata":{"name":"big"},"data":{"a":"' + b"x" * (MAX_BODY + 16) + b'"}}',
         JSON, 413, "RequestEntityTooLarge", ("too large", str(MAX_BODY))),
    Case("unknown-content-type", "POST", CM, _cm("tp"), "text/plain", 415, "UnsupportedMediaType",
         ("accepted media types include", "application/json", "text/plain")),
    Case("protobuf", "POST", CM, PROTOBUF_BODY, "application/vnd.kubernetes.protobuf", 415, "UnsupportedMediaType",
         ("kubectl apply -f", "application/json")),
    Case("protobuf-magic-as-json", "POST", CM, PROTOBUF_BODY, JSON, 415, "UnsupportedMediaType",
         ("accepted media types include",)),
    # ---- patches
    Case("json-patch-not-a-list", "PATCH", KEEP, dumps({"op": "add", "path": "/data/b", "value": "2"}), JSON_PATCH,
         400, "BadRequest", ("JSON array of operations",)),
    Case("json-patch-invalid-op", "PATCH", KEEP, dumps([{"op": "frobnicate", "path": "/data/a"}]), JSON_PATCH,
         422, "Invalid", ("frobnicate",)),
    Case("json-patch-missing-value", "PATCH", KEEP, dumps([{"op": "add", "path": "/data/x"}]), JSON_PATCH,
         422, "Invalid", ("missing 'value'",)),
    Case("json-patch-bad-pointer", "PATCH", KEEP, dumps([{"op": "add", "path": "data", "value": 1}]), JSON_PATCH,
         422, "Invalid", ("JSON pointer",)),
    Case("json-patch-failed-test", "PATCH", KEEP, dumps([{"op": "test", "path": "/data/a", "value": "2"},
                                                         {"op": "replace", "path": "/data/a", "value": "3"}]),
         JSON_PATCH, 422, "Invalid", ("test failed",)),
    Case("json-patch-remove-missing", "PATCH", KEEP, dumps([{"op": "remove", "path": "/data/nope"}]), JSON_PATCH,
         422, "Invalid", ("does not exist",)),
    Case("json-patch-changes-kind", "PATCH", KEEP, dumps([{"op": "replace", "path": "/kind", "value": "Secret"}]),
         JSON_PATCH, 400, "BadRequest", ("apiVersion or kind",)),
    Case("json-patch-result-not-object", "PATCH", KEEP, dumps([{"op": "replace", "path": "", "value": []}]),
         JSON_PATCH, 422, "Invalid", ("must be a JSON object",)),
    Case("unknown-patch-type", "PATCH", KEEP, dumps({"data": {"a": "2"}}), "application/foo-patch+json", 415,
         "UnsupportedMediaType", ("application/merge-patch+json", "application/json-patch+json")),
    Case("plain-json-is-not-a-patch-type", "PATCH", KEEP, dumps({"data": {"a": "2"}}), JSON, 415,
         "UnsupportedMediaType", ("application/strategic-merge-patch+json",)),
    Case("merge-patch-not-object", "PATCH", KEEP, b"[1]", MERGE_PATCH, 400, "BadRequest", ("JSON object",)),
    Case("merge-patch-invalid-label", "PATCH", KEEP, dumps({"metadata": {"labels": {"a": 1}}}), MERGE_PATCH,
         422, "Invalid", ("must be strings",), ("metadata.labels[a]",)),
    Case("smp-unknown-directive", "PATCH", KEEP, dumps({"data": {"$patch": "frob"}}),
         "application/strategic-merge-patch+json", 422, "Invalid", ("frob",)),
    Case("apply-without-field-manager", "PATCH", KEEP, _cm("keep"), "application/apply-patch+yaml", 422, "Invalid",
         ("fieldManager",), ("fieldManager",)),
    Case("patch-missing-object", "PATCH", f"{CM}/missing", dumps({"data": {}}), MERGE_PATCH, 404, "NotFound",
         ('configmaps "missing" not found',)),
    # ---- updates and deletes
    Case("put-missing-object", "PUT", f"{CM}/missing", _cm("missing"), JSON, 404, "NotFound",
         ('configmaps "missing" not found',)),
    Case("put-stale-resource-version", "PUT", KEEP, _cm("keep", resourceVersion="1"), JSON, 409, "Conflict",
         ("the object has been modified",)),
    Case("put-array", "PUT", KEEP, b"[]", JSON, 400, "BadRequest", ("JSON object",)),
    Case("delete-options-not-object", "DELETE", KEEP, b"[]", JSON, 400, "BadRequest", ("DeleteOptions",)),
    Case("delete-bad-propagation", "DELETE", KEEP, dumps({"propagationPolicy": "Sometimes"}), JSON, 422, "Invalid",
         ("Sometimes", "Background", "Foreground", "Orphan"), ("propagationPolicy",)),
    Case("delete-precondition-uid", "DELETE", KEEP, dumps({"preconditions": {"uid": "not-the-uid"}}), JSON, 409,
         "Conflict", ("Precondition failed",)),
    Case("delete-missing-object", "DELETE", f"{CM}/missing", None, None, 404, "NotFound", ("not found",)),
    # ---- query parameters
    Case("bad-dry-run", "POST", CM + "?dryRun=Sometimes", _cm("dr"), JSON, 400, "BadRequest", ('"All"',)),
    Case("bad-field-validation", "POST", CM + "?fieldValidation=Loose", _cm("fv"), JSON, 400, "BadRequest",
         ("Ignore, Warn, Strict",)),
    Case("watch-send-initial-events-without-rv-match", "GET",
         CM + "?watch=true&sendInitialEvents=true&allowWatchBookmarks=true", None, None, 422, "Invalid",
         ("resourceVersionMatch", "NotOlderThan"), ("sendInitialEvents",)),
    Case("watch-send-initial-events-without-bookmarks", "GET",
         CM + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", None, None, 422, "Invalid",
         ("allowWatchBookmarks",), ("sendInitialEvents",)),
    Case("limit-not-a-number", "GET", CM + "?limit=ten", None, None, 400, "BadRequest", ("invalid limit", "ten")),
    Case("bad-label-selector", "GET", CM + "?labelSelector=" + urllib.parse.quote("a in (b"), None, None, 400,
         "BadRequest", ("label selector", "a in (b")),
    Case("bad-label-selector-value", "GET", CM + "?labelSelector=" + urllib.parse.quote("a=-x-"), None, None, 400,
         "BadRequest", ("label value",)),
    Case("bad-label-selector-on-watch", "GET", CM + "?watch=true&labelSelector=" + urllib.parse.quote("a in (b"),
         None, None, 400, "BadRequest", ("label selector",)),
    Case("unsupported-field-selector", "GET", CM + "?fieldSelector=spec.foo%3Dbar", None, None, 400, "BadRequest",
         ("field label not supported", "spec.foo")),
    Case("malformed-field-selector", "GET", CM + "?fieldSelector=metadata.name", None, None, 400, "BadRequest",
         ("field selector",)),
    Case("bad-limit", "GET", CM + "?limit=ten", None, None, 400, "BadRequest", ("limit", "ten")),
    Case("bad-continue-token", "GET", CM + "?limit=1&continue=not-a-token", None, None, 400, "BadRequest",
         ("continue",)),
    Case("bad-resource-version", "GET", CM + "?resourceVersion=yesterday", None, None, 400, "BadRequest",
         ("resourceVersion",)),
    Case("bad-watch-timeout", "GET", CM + "?watch=true&timeoutSeconds=forever", None, None, 400, "BadRequest",
         ("timeoutSeconds",)),
    # ---- paths and methods
    Case("unknown-resource", "GET", f"/api/v1/namespaces/{NS}/frobnitzes", None, None, 404, "NotFound",
         ("could not find the requested resource",)),
    Case("unknown-subresource", "GET", f"{KEEP}/frob", None, None, 404, "NotFound",
         ("could not find the requested resource",)),
    Case("unknown-group", "GET", "/apis/nope.example.com/v1/things", None, None, 404, "NotFound",
         ("could not find the requested resource",)),
    Case("unknown-group-discovery", "GET", "/apis/nope.example.com", None, None, 404, "NotFound",
         ("could not find the requested resource",)),
    Case("unknown-version", "GET", "/apis/apps/v9/deployments", None, None, 404, "NotFound",
         ("could not find the requested resource",)),
    Case("unknown-root", "GET", "/frobnicate", None, None, 404, "NotFound", ("could not find",)),
    Case("put-on-collection", "PUT", CM, _cm("x"), JSON, 405, "MethodNotAllowed", ("does not allow this method",)),
    Case("post-on-item", "POST", KEEP, _cm("keep"), JSON, 405, "MethodNotAllowed", ("does not allow this method",)),
    Case("patch-on-collection", "PATCH", CM, b"{}", MERGE_PATCH, 405, "MethodNotAllowed",
         ("does not allow this method",)),
    Case("create-namespaced-without-namespace", "POST", "/api/v1/configmaps", _cm("x", namespace=NS), JSON, 405,
         "MethodNotAllowed", ("does not allow this method",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rejected(base: str, case: Case) -> None:
    reply = send(base, case.method, case.path, case.body, case.content_type)
    body = assert_status(reply, case.code, case.reason, *case.hints)
    if case.cause_fields:
        fields = {c.get("field") for c in body["details"]["causes"]}
        assert set(case.cause_fields) <= fields, body
    if case.code == 422:
        assert body["details"]["kind"], body  # 422 details name the Kind


def _snapshot(base: str) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for plural, prefix in (("configmaps", "/api/v1"), ("secrets", "/api/v1"), ("services", "/api/v1"),
                           ("deployments", "/apis/apps/v1")):
        listed = send(base, "GET", f"{prefix}/namespaces/{NS}/{plural}").json()
        out[plural] = [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in listed["items"]]
    names = send(base, "GET", "/api/v1/namespaces").json()["items"]
    out["namespaces"] = sorted(n["metadata"]["name"] for n in names if not n["metadata"]["name"].startswith("scratch-"))
    return out


def test_rejected_writes_leave_no_trace(server: ServerThread, base: str) -> None:
    """Replay every rejected write as one batch: the store's revision must not move and the namespace must
    hold exactly what the fixture put there."""
    assert server.server is not None and server.server.store is not None
    store = server.server.store
    before = _snapshot(base)
    assert [n for n, _ in before["configmaps"]] == ["keep"]
    assert [n for n, _ in before["deployments"]] == ["web"]
    assert before["secrets"] == [] and before["services"] == []
    rev = server.call(store.current_revision())
    writes = [c for c in CASES if c.writes]
    assert len(writes) > 40
    for case in writes:
        reply = send(base, case.method, case.path, case.body, case.content_type)
        assert 400 <= reply.code < 500, (case.id, reply.code, reply.raw[:300])
    # also a few rejected writes against the Deployment and the namespace itself
    for method, path, body, ctype in (
        ("PATCH", f"{DEPLOY}/web", dumps([{"op": "test", "path": "/spec/replicas", "value": 9}]), JSON_PATCH),
        ("PUT", f"{DEPLOY}/web", dumps({"metadata": {"name": "web", "resourceVersion": "1"}, "spec": {}}), JSON),
        ("PATCH", f"{DEPLOY}/web/status", b"[]", MERGE_PATCH),
        ("DELETE", f"/api/v1/namespaces/{NS}", dumps({"preconditions": {"uid": "x"}}), JSON),
        ("POST", "/api/v1/namespaces", dumps({"metadata": {"name": "Bad_NS"}}), JSON),
    ):
        reply = send(base, method, path, body, ctype)
        assert 400 <= reply.code < 500, (method, path, reply.code, reply.raw[:300])
    assert server.call(store.current_revision()) == rev, "a rejected request wrote to the store"
    assert _snapshot(base) == before
    keep = send(base, "GET", KEEP).json()
    assert keep["data"] == {"a": "1"} and keep["metadata"]["labels"] == {"app": "x"}


# ------------------------------------------------------------------------------------------ server bugs found
def _post_yaml(base: str, ns: str, text: bytes) -> Reply:
    return send(base, "POST", f"/api/v1/namespaces/{ns}/configmaps", text, YAML)


@pytest.mark.parametrize("text", [
    pytest.param(b"metadata: {name: s1}\ndata: !!set {a, b}\n", id="set"),
    pytest.param(b"metadata: {name: s2}\ndata: {a: !!binary aGVsbG8=}\n", id="binary"),
    pytest.param(b"[" * 3000 + b"]" * 3000, id="deep-nesting"),
])
def test_yaml_that_is_not_json_is_rejected(base: str, scratch_ns: str, text: bytes) -> None:
    assert_status(_post_yaml(base, scratch_ns, text), 400, "BadRequest")


@pytest.mark.parametrize("text,where,key", [
    pytest.param(b"metadata: {name: s3}\ndata: {2001-12-14: a}\n", "data", "2001-12-14", id="date-key"),
    pytest.param(b"metadata: {name: s5, labels: {1: a}}\n", "labels", "1", id="int-label-key"),
    pytest.param(b"metadata: {name: s6, annotations: {true: a}}\n", "annotations", "true", id="bool-annotation-key"),
])
def test_yaml_keys_become_strings_as_with_kubectl(base: str, scratch_ns: str, text: bytes, where: str,
                                                  key: str) -> None:
    """sigs.k8s.io/yaml (what kubectl and kube-apiserver use) turns YAML map keys into JSON strings."""
    reply = _post_yaml(base, scratch_ns, text)
    assert reply.code == 201, reply.raw[:300]
    obj = reply.json()
    container = obj["data"] if where == "data" else obj["metadata"][where]
    assert container[key] == "a"


def test_yaml_alias_bomb_is_rejected(base: str, scratch_ns: str) -> None:
    levels = "abcdef"
    lines = ["a: &a [" + ",".join(['"xxxxxxxxxx"'] * 9) + "]"]
    lines += [f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]" for prev, cur in zip(levels, levels[1:], strict=False)]
    text = ("metadata: {name: bomb}\ndata:\n" + "\n".join("  " + ln for ln in lines) + "\n").encode()
    assert len(text) < 1024  # expands to about 8 MB of JSON
    reply = _post_yaml(base, scratch_ns, text)
    assert 400 <= reply.code < 500, (reply.code, len(reply.raw))
    assert send(base, "GET", f"/api/v1/namespaces/{scratch_ns}/configmaps/bomb").code == 404


def test_namespace_with_non_object_spec(base: str) -> None:
    reply = send(base, "POST", "/api/v1/namespaces", dumps({"metadata": {"name": "ns-bad-spec"}, "spec": "x"}))
    assert 400 <= reply.code < 500, reply.raw[:300]


@pytest.mark.parametrize("spec_patch", [
    pytest.param({"names": "widgets"}, id="names-a-string"),
    pytest.param({"versions": ["v1"]}, id="version-a-string"),
    pytest.param({"versions": [{"name": "v1", "served": True, "storage": True, "subresources": "status",
                                "schema": {"openAPIV3Schema": {"type": "object"}}}]}, id="subresources-a-string"),
])
def test_malformed_crd_is_rejected(tmp_path: Path, spec_patch: dict[str, Any]) -> None:
    srv = ServerThread(tmp_path, storage_url="memory://")  # cluster-scoped junk: keep it off the shared server
    srv.start()
    try:
        spec = {"group": "bad.flotilla.test", "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}]}
        spec.update(spec_patch)
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "things.bad.flotilla.test"}, "spec": spec}
        reply = send(srv.url, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", dumps(crd))
        assert_status(reply, 422, "Invalid")
        assert send(srv.url, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                    "things.bad.flotilla.test").code == 404
    finally:
        srv.stop()


@pytest.mark.parametrize("path,body", [
    pytest.param("configmaps", {"metadata": {"name": "t1"}, "data": {"a": 1}}, id="configmap-data-int"),
    pytest.param("configmaps", {"metadata": {"name": "t2"}, "data": ["a"]}, id="configmap-data-list"),
    pytest.param("configmaps", {"metadata": {"name": 5}}, id="name-int"),
    pytest.param("configmaps", {"metadata": {"name": "t3", "ownerReferences": [
        {"apiVersion": 1, "kind": "X", "name": "n", "uid": "u"}]}}, id="owner-reference-types"),
    pytest.param("configmaps", {"metadata": {"name": "t4", "managedFields": "x"}}, id="managed-fields-string"),
    pytest.param("services", {"metadata": {"name": "t5"}, "spec": {"ports": "x"}}, id="service-ports-string"),
    pytest.param("events", {"metadata": {"name": "t6"}, "involvedObject": "x"}, id="event-involved-object"),
])
def test_wrongly_typed_builtin_fields_are_rejected(base: str, scratch_ns: str, path: str, body: dict[str, Any]) -> None:
    reply = send(base, "POST", f"/api/v1/namespaces/{scratch_ns}/{path}", dumps(body))
    assert reply.code in (400, 422), reply.raw[:300]
    assert_status(reply, reply.code, reply.json()["reason"])
    assert send(base, "GET", f"/api/v1/namespaces/{scratch_ns}/{path}").json()["items"] == []


@pytest.mark.parametrize("body", [
    pytest.param({"metadata": {"name": "d1"}, "spec": "x"}, id="spec-a-string"),
    pytest.param({"metadata": {"name": "d2"}, "spec": {"replicas": "three"}}, id="replicas-a-string"),
])
def test_wrongly_typed_deployment_is_rejected(base: str, scratch_ns: str, body: dict[str, Any]) -> None:
    reply = send(base, "POST", f"/apis/apps/v1/namespaces/{scratch_ns}/deployments", dumps(body))
    assert reply.code in (400, 422), reply.raw[:300]


@pytest.mark.parametrize("how", ["query", "body"])
def test_delete_with_bad_grace_period_is_rejected(base: str, scratch_ns: str, how: str) -> None:
    path = f"/api/v1/namespaces/{scratch_ns}/configmaps"
    assert send(base, "POST", path, _cm("victim")).code == 201
    if how == "query":
        reply = send(base, "DELETE", f"{path}/victim?gracePeriodSeconds=soon")
    else:
        reply = send(base, "DELETE", f"{path}/victim", dumps({"gracePeriodSeconds": "soon"}))
    assert_status(reply, 400, "BadRequest", "gracePeriodSeconds")
    assert send(base, "GET", f"{path}/victim").code == 200


@pytest.mark.parametrize("query", [
    pytest.param("resourceVersion=1&resourceVersionMatch=Sometimes", id="unknown-match"),
    pytest.param("resourceVersionMatch=Exact", id="match-without-rv"),
])
def test_list_with_bad_resource_version_match(base: str, query: str) -> None:
    reply = send(base, "GET", f"{CM}?{query}")
    assert reply.code in (400, 422), reply.raw[:300]
    assert_status(reply, reply.code, reply.json()["reason"], "resourceVersionMatch")


def test_crafted_continue_token_is_rejected(base: str) -> None:
    encoded = base64.urlsafe_b64encode(dumps({"rv": -5, "start": ""})).decode()
    reply = send(base, "GET", f"{CM}?limit=1&continue={encoded}")
    assert reply.code in (400, 410), reply.raw[:300]
    assert_status(reply, reply.code, reply.json()["reason"], "continue")


def test_long_selector_is_served(base: str) -> None:
    selector = "app notin (" + ",".join(f"value-{i}" for i in range(1200)) + ")"
    assert len(selector) > 9000
    reply = send(base, "GET", f"{CM}?labelSelector={urllib.parse.quote(selector)}")
    assert reply.code == 200, reply.raw[:300]
    assert [i["metadata"]["name"] for i in reply.json()["items"]] == ["keep"]


# ------------------------------------------------------------------------------------------ fuzzing
_KEYS = st.sampled_from(["metadata", "name", "namespace", "labels", "annotations", "data", "binaryData", "kind",
                         "apiVersion", "generateName", "finalizers", "ownerReferences", "resourceVersion", "uid",
                         "immutable", "a", "app", "x/y"])
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(
    max_size=20) | st.sampled_from(["fuzz", "Bad_Name", "", "v1", "ConfigMap", NS, "a" * 300])
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    _KEYS | st.text(max_size=8), inner, max_size=4), max_leaves=20)
_CM_SHAPED = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({}, optional={
        "name": _SCALARS, "generateName": _SCALARS, "namespace": _SCALARS, "labels": _JSON,
        "annotations": _JSON, "finalizers": _JSON, "ownerReferences": _JSON, "resourceVersion": _SCALARS})},
    optional={"data": _JSON, "kind": _SCALARS, "apiVersion": _SCALARS, "binaryData": _JSON})
_FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def fuzz_ns(base: str) -> str:
    assert send(base, "POST", "/api/v1/namespaces", dumps({"metadata": {"name": "scratch-fuzz"}})).code == 201
    # an object to aim updates and patches at
    assert send(base, "POST", "/api/v1/namespaces/scratch-fuzz/configmaps", _cm("fuzz")).code == 201
    return "scratch-fuzz"


@_FUZZ
@given(body=_JSON | _CM_SHAPED, method=st.sampled_from(["POST", "PUT"]))
def test_fuzz_json_bodies_never_5xx(base: str, fuzz_ns: str, body: Any, method: str) -> None:
    path = f"/api/v1/namespaces/{fuzz_ns}/configmaps" + ("/fuzz" if method == "PUT" else "")
    reply = send(base, method, path, dumps(body))
    assert reply.code < 500, (body, reply.raw[:300])
    if reply.code >= 400:
        assert reply.json()["kind"] == "Status"


@_FUZZ
@given(raw=st.binary(max_size=200), content_type=st.sampled_from([JSON, YAML, None, MERGE_PATCH]),
       target=st.sampled_from(["create", "patch", "delete"]))
def test_fuzz_random_bytes_never_5xx(base: str, fuzz_ns: str, raw: bytes, content_type: str | None,
                                     target: str) -> None:
    collection = f"/api/v1/namespaces/{fuzz_ns}/configmaps"
    if target == "create":
        reply = send(base, "POST", collection, raw, content_type)
    elif target == "patch":
        reply = send(base, "PATCH", f"{collection}/fuzz", raw, content_type or MERGE_PATCH)
    else:
        reply = send(base, "DELETE", f"{collection}/does-not-exist", raw, content_type)
    assert reply.code < 500, (raw, content_type, reply.raw[:300])
    if reply.code >= 400:
        assert reply.json()["kind"] == "Status"

