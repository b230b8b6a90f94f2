"""The official ``kubernetes`` Python client (37.x, strict pydantic models) against Flotilla's API server.

Covers the typed APIs (core, apps, coordination, apiextensions, custom objects), Karmada kinds through
CustomObjectsApi, the dynamic client, and watch semantics including recovery from 410 Expired.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException
from kubernetes.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from tests.support.apiserver import ServerThread

CRD_GROUP = "widgets.flotilla.test"
CRD_PLURAL = "widgets"
CRD_NAME = f"{CRD_PLURAL}.{CRD_GROUP}"
KARMADA_POLICY = ("policy.karmada.io", "v1alpha1", "propagationpolicies")


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def api(server: ServerThread) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(server.kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def v1(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def apps(api: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api)


@pytest.fixture(scope="module")
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def ns(v1: client.CoreV1Api, request: pytest.FixtureRequest) -> str:
    """A fresh namespace per test, created through the Python client (faster than kubectl)."""
    name = "py-" + request.node.name.lower().replace("_", "-")[:50]
    name = "".join(c for c in name if c.isalnum() or c == "-").strip("-")
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


@pytest.fixture(scope="module")
def widget_crd(api: client.ApiClient) -> dict[str, Any]:
    """A namespaced CRD with a status subresource, created with ApiextensionsV1Api, once Established."""
    ext = client.ApiextensionsV1Api(api)
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": CRD_GROUP,
            "scope": "Namespaced",
            "names": {"plural": CRD_PLURAL, "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
            "versions": [{
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "color": {"type": "string", "enum": ["red", "blue"]},
                            "tags": {"type": "array", "items": {"type": "string"}},
                        }},
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                    },
                }},
            }],
        },
    }
    created = ext.create_custom_resource_definition(body)
    assert isinstance(created, client.V1CustomResourceDefinition)
    deadline = time.monotonic() + 10
    while True:
        crd = ext.read_custom_resource_definition(CRD_NAME)
        conds = {c.type: c.status for c in (crd.status.conditions or [])} if crd.status else {}
        if conds.get("Established") == "True":
            break
        assert time.monotonic() < deadline, f"CRD never became Established: {crd.status}"
        time.sleep(0.1)
    assert crd.status.accepted_names.kind == "Widget"
    assert crd.status.stored_versions == ["v1"]
    # the new group is discoverable at once
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert CRD_GROUP in groups
    return crd.to_dict()


def _status_body(exc: ApiException) -> dict[str, Any]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == exc.status
    assert body["message"]
    return body


def _cm(name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data=data or {"k": "v"})


def _deployment(name: str, replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]}]},
            },
        },
    }


def _wait_gone(read: Callable[[], Any], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            read()
        except ApiException as e:
            if e.status == 404:
                return
            raise
        assert time.monotonic() < deadline, "object was not deleted"
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------ discovery / strict models
def test_discovery_and_version_deserialise_strictly(api: client.ApiClient) -> None:
    assert client.VersionApi(api).get_code().major == "1"
    core = client.CoreV1Api(api).get_api_resources()
    by_name = {r.name: r for r in core.resources}
    assert by_name["configmaps"].namespaced and "watch" in by_name["configmaps"].verbs
    assert by_name["configmaps"].singular_name == "configmap"
    app_resources = {r.name for r in client.AppsV1Api(api).get_api_resources().resources}
    assert {"deployments", "deployments/status", "deployments/scale"} <= app_resources
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"apps", "coordination.k8s.io", "apiextensions.k8s.io", "policy.karmada.io"} <= groups


def test_strict_models_for_lists_and_reads(v1: client.CoreV1Api, apps: client.AppsV1Api, ns: str) -> None:
    namespaces = v1.list_namespace()
    assert isinstance(namespaces, client.V1NamespaceList)
    assert ns in {n.metadata.name for n in namespaces.items}
    me = v1.read_namespace(ns)
    assert me.status.phase == "Active"
    assert me.metadata.creation_timestamp is not None  # parsed into a datetime
    v1.create_namespaced_config_map(ns, _cm("one"))
    cms = v1.list_namespaced_config_map(ns)
    assert isinstance(cms, client.V1ConfigMapList) and [c.metadata.name for c in cms.items] == ["one"]
    assert int(cms.metadata.resource_version) > 0
    apps.create_namespaced_deployment(ns, _deployment("web"))
    d = apps.read_namespaced_deployment("web", ns)
    assert isinstance(d, client.V1Deployment)
    assert d.metadata.generation == 1 and d.spec.template.spec.containers[0].image == "a:1"
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="web.1"),
        involved_object=client.V1ObjectReference(kind="Deployment", name="web", namespace=ns,
                                                 api_version="apps/v1", uid=d.metadata.uid),
        reason="ScalingReplicaSet",
        message="Scaled up replica set web-1 to 2",
        type="Normal",
        source=client.V1EventSource(component="deployment-controller"),
        count=1,
    )
    v1.create_namespaced_event(ns, event)
    v1.create_namespaced_event(ns, client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="other.1"),
        involved_object=client.V1ObjectReference(kind="ConfigMap", name="one", namespace=ns),
        reason="Other", message="m", type="Warning"))
    events = v1.list_namespaced_event(ns)
    assert isinstance(events, client.CoreV1EventList) and len(events.items) == 2
    about_web = v1.list_namespaced_event(ns, field_selector=f"involvedObject.name=web,involvedObject.uid={d.metadata.uid}")
    assert [e.metadata.name for e in about_web.items] == ["web.1"]
    warnings = v1.list_namespaced_event(ns, field_selector="type=Warning")
    assert [e.reason for e in warnings.items] == ["Other"]


# ------------------------------------------------------------------------------------------ core CRUD
def test_configmap_crud(v1: client.CoreV1Api, ns: str) -> None:
    created = v1.create_namespaced_config_map(ns, _cm("cfg", {"app": "x"}, {"a": "1"}))
    assert created.metadata.uid and created.metadata.namespace == ns
    rv0 = int(created.metadata.resource_version)
    got = v1.read_namespaced_config_map("cfg", ns)
    assert got.data == {"a": "1"} and got.metadata.uid == created.metadata.uid
    # a dict body makes the client send a strategic merge patch: keys are merged, null deletes
    patched = v1.patch_namespaced_config_map("cfg", ns, {"data": {"b": "2"}, "metadata": {"labels": {"app": None}}})
    assert patched.data == {"a": "1", "b": "2"}
    assert not patched.metadata.labels
    assert int(patched.metadata.resource_version) > rv0
    # a list body is a JSON patch
    patched = v1.patch_namespaced_config_map("cfg", ns, [{"op": "replace", "path": "/data/a", "value": "9"}])
    assert patched.data["a"] == "9"
    # replace with the current resourceVersion works and bumps it
    patched.data = {"only": "this"}
    replaced = v1.replace_namespaced_config_map("cfg", ns, patched)
    assert replaced.data == {"only": "this"}
    assert int(replaced.metadata.resource_version) > int(patched.metadata.resource_version)
    # a no-op replace does not bump the resourceVersion
    same = v1.replace_namespaced_config_map("cfg", ns, replaced)
    assert same.metadata.resource_version == replaced.metadata.resource_version
    # replace without a resourceVersion is an unconditional update
    unconditional = _cm("cfg", data={"u": "1"})
    assert v1.replace_namespaced_config_map("cfg", ns, unconditional).data == {"u": "1"}
    status = v1.delete_namespaced_config_map("cfg", ns)  # the 37.x client returns the Status as a dict
    assert status["kind"] == "Status" and status["status"] == "Success"
    assert status["details"]["name"] == "cfg" and status["details"]["uid"] == created.metadata.uid
    with pytest.raises(ApiException) as ei:
        v1.read_namespaced_config_map("cfg", ns)
    assert ei.value.status == 404
    body = _status_body(ei.value)
    assert body["reason"] == "NotFound"
    assert body["message"] == 'configmaps "cfg" not found'
    assert body["details"] == {"name": "cfg", "group": "", "kind": "configmaps"}


def test_conflict_on_stale_resource_version(v1: client.CoreV1Api, ns: str) -> None:
    first = v1.create_namespaced_config_map(ns, _cm("c"))
    v1.patch_namespaced_config_map("c", ns, {"data": {"k": "changed"}})
    first.data = {"k": "mine"}
    with pytest.raises(ApiException) as ei:
        v1.replace_namespaced_config_map("c", ns, first)  # carries the now stale resourceVersion
    assert ei.value.status == 409
    body = _status_body(ei.value)
    assert body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    assert v1.read_namespaced_config_map("c", ns).data == {"k": "changed"}
    with pytest.raises(ApiException) as ei:
        v1.create_namespaced_config_map(ns, _cm("c"))
    assert ei.value.status == 409 and _status_body(ei.value)["reason"] == "AlreadyExists"
    # a patch carrying a stale resourceVersion is a precondition too
    with pytest.raises(ApiException) as ei:
        v1.patch_namespaced_config_map("c", ns, {"metadata": {"resourceVersion": first.metadata.resource_version},
                                                 "data": {"k": "x"}})
    assert ei.value.status == 409


def test_invalid_names_give_422(v1: client.CoreV1Api, ns: str) -> None:
    for bad in ("Bad_Name", "UPPER", "x" * 300):
        with pytest.raises(ApiException) as ei:
            v1.create_namespaced_config_map(ns, _cm(bad))
        assert ei.value.status == 422, bad
        body = _status_body(ei.value)
        assert body["reason"] == "Invalid"
        assert body["details"]["kind"] == "ConfigMap"
        assert any(c["field"] == "metadata.name" for c in body["details"]["causes"])
    with pytest.raises(ApiException) as ei:
        v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta()))
    assert ei.value.status == 422
    assert "name or generateName is required" in _status_body(ei.value)["message"]
    generated = v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="gen-")))
    assert generated.metadata.name.startswith("gen-") and len(generated.metadata.name) == len("gen-") + 5
    assert [c.metadata.name for c in v1.list_namespaced_config_map(ns).items] == [generated.metadata.name]


def test_secret_data_is_base64(v1: client.CoreV1Api, ns: str) -> None:
    raw = b"\x00\xffhunter2\n"
    secret = client.V1Secret(metadata=client.V1ObjectMeta(name="s"), type="Opaque",
                             data={"pw": base64.b64encode(raw).decode()})
    v1.create_namespaced_secret(ns, secret)
    got = v1.read_namespaced_secret("s", ns)
    assert base64.b64decode(got.data["pw"]) == raw and got.type == "Opaque"
    v1.patch_namespaced_secret("s", ns, {"data": {"user": base64.b64encode(b"admin").decode()}})
    listed = v1.list_namespaced_secret(ns, field_selector="type=Opaque")
    assert [s.metadata.name for s in listed.items] == ["s"]
    assert base64.b64decode(listed.items[0].data["user"]) == b"admin"
    assert v1.list_namespaced_secret(ns, field_selector="type=kubernetes.io/tls").items == []
    v1.delete_namespaced_secret("s", ns)
    assert v1.list_namespaced_secret(ns).items == []


def test_secret_string_data_is_merged_into_data(v1: client.CoreV1Api, ns: str) -> None:
    v1.create_namespaced_secret(ns, client.V1Secret(metadata=client.V1ObjectMeta(name="sd"),
                                                    string_data={"user": "admin"}))
    got = v1.read_namespaced_secret("sd", ns)
    assert got.data == {"user": base64.b64encode(b"admin").decode()}
    assert got.string_data is None
    assert got.type == "Opaque"


def test_service_crud(v1: client.CoreV1Api, ns: str) -> None:
    svc = client.V1Service(
        metadata=client.V1ObjectMeta(name="web", labels={"app": "web"}),
        spec=client.V1ServiceSpec(selector={"app": "web"},
                                  ports=[client.V1ServicePort(name="http", port=80, target_port=8080)]),
    )
    created = v1.create_namespaced_service(ns, svc)
    assert created.spec.ports[0].port == 80 and created.spec.ports[0].target_port == 8080
    # SMP merges ports by name (ServiceSpec.ports merge key)
    patched = v1.patch_namespaced_service("web", ns, {"spec": {"ports": [{"name": "https", "port": 443,
                                                                          "targetPort": "https"}]}})
    assert sorted((p.name, p.port) for p in patched.spec.ports) == [("http", 80), ("https", 443)]
    assert {p.name: p.target_port for p in patched.spec.ports} == {"http": 8080, "https": "https"}
    patched.spec.selector = {"app": "web2"}
    replaced = v1.replace_namespaced_service("web", ns, patched)
    assert replaced.spec.selector == {"app": "web2"}
    assert [s.metadata.name for s in v1.list_namespaced_service(ns, label_selector="app=web").items] == ["web"]
    # Service names are DNS-1123 labels: a dot is not allowed
    with pytest.raises(ApiException) as ei:
        v1.create_namespaced_service(ns, client.V1Service(metadata=client.V1ObjectMeta(name="a.b"),
                                                          spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=1)])))
    assert ei.value.status == 422
    # (typed deserialisation of the delete response: see test_delete_returns_the_object_for_some_kinds)
    v1.delete_namespaced_service("web", ns, _preload_content=False).release_conn()
    _wait_gone(lambda: v1.read_namespaced_service("web", ns))


def test_delete_returns_the_object_for_some_kinds(v1: client.CoreV1Api, ns: str) -> None:
    v1.create_namespaced_service(ns, client.V1Service(metadata=client.V1ObjectMeta(name="svc"),
                                                      spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
    v1.create_namespaced_service_account(ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="sa")))
    v1.create_namespaced_pod(ns, client.V1Pod(metadata=client.V1ObjectMeta(name="po"), spec=client.V1PodSpec(
        containers=[client.V1Container(name="c", image="i")])))
    svc = v1.delete_namespaced_service("svc", ns)
    assert isinstance(svc, client.V1Service) and svc.metadata.name == "svc"
    sa = v1.delete_namespaced_service_account("sa", ns)
    assert isinstance(sa, client.V1ServiceAccount) and sa.metadata.name == "sa"
    pod = v1.delete_namespaced_pod("po", ns)
    assert isinstance(pod, client.V1Pod) and pod.metadata.name == "po"


# ------------------------------------------------------------------------------------------ apps
def test_deployment_lifecycle(apps: client.AppsV1Api, ns: str) -> None:
    created = apps.create_namespaced_deployment(ns, _deployment("web"))
    assert created.metadata.generation == 1
    assert created.status is None or not created.status.replicas
    # dict body -> strategic merge patch: containers are merged by name, env by name
    patched = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "b", "image": "b:1"},
        {"name": "a", "env": [{"name": "Y", "value": "2"}]},
    ]}}}})
    containers = {c.name: c for c in patched.spec.template.spec.containers}
    assert set(containers) == {"a", "b"}
    assert containers["a"].image == "a:1"
    assert {e.name: e.value for e in containers["a"].env} == {"X": "1", "Y": "2"}
    assert patched.metadata.generation == 2
    # $patch: delete directive removes a list element by merge key
    patched = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "b", "$patch": "delete"}]}}}})
    assert [c.name for c in patched.spec.template.spec.containers] == ["a"]
    assert patched.metadata.generation == 3

    # status subresource: readable, writable, and separate from the main resource
    st = apps.read_namespaced_deployment_status("web", ns)
    assert isinstance(st, client.V1Deployment) and st.metadata.name == "web"
    written = apps.patch_namespaced_deployment_status("web", ns, {"status": {
        "observedGeneration": 3, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                        "message": "ok", "lastUpdateTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }, "spec": {"replicas": 99}})
    assert written.status.ready_replicas == 2 and written.status.conditions[0].type == "Available"
    assert written.spec.replicas == 2, "a status write must not change spec"
    assert written.metadata.generation == 3, "a status write must not bump generation"
    # a main-resource write ignores .status
    after = apps.patch_namespaced_deployment("web", ns, {"spec": {"replicas": 3}, "status": {"replicas": 0}})
    assert after.spec.replicas == 3 and after.status.replicas == 2 and after.metadata.generation == 4
    # replace with the read object (its RV) works; spec change bumps generation
    current = apps.read_namespaced_deployment("web", ns)
    current.spec.template.spec.containers[0].image = "a:2"
    replaced = apps.replace_namespaced_deployment("web", ns, current)
    assert replaced.spec.template.spec.containers[0].image == "a:2"
    assert replaced.metadata.generation == 5
    assert replaced.status.ready_replicas == 2
    # stale replace -> 409
    current.spec.replicas = 7
    with pytest.raises(ApiException) as ei:
        apps.replace_namespaced_deployment("web", ns, current)
    assert ei.value.status == 409
    assert _status_body(ei.value)["details"]["kind"] == "deployments"
    # scale subresource
    scale = apps.read_namespaced_deployment_scale("web", ns)
    assert scale.spec.replicas == 3 and scale.status.replicas == 2
    scale = apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 4}})
    assert scale.spec.replicas == 4
    scale.spec.replicas = 1
    assert apps.replace_namespaced_deployment_scale("web", ns, scale).spec.replicas == 1
    assert apps.read_namespaced_deployment("web", ns).spec.replicas == 1
    # deletes with explicit propagation policies
    apps.create_namespaced_deployment(ns, _deployment("fg"))
    res = apps.delete_namespaced_deployment("fg", ns, body=client.V1DeleteOptions(propagation_policy="Foreground"))
    # a Status, or the object itself while the foreground finalizer holds it
    assert res.get("status") == "Success" or res["metadata"]["name"] == "fg"
    _wait_gone(lambda: apps.read_namespaced_deployment("fg", ns))
    res = apps.delete_namespaced_deployment("web", ns, body=client.V1DeleteOptions(propagation_policy="Background"))
    assert res["kind"] == "Status" and res["status"] == "Success"
    _wait_gone(lambda: apps.read_namespaced_deployment("web", ns))
    with pytest.raises(ApiException) as ei:
        apps.delete_namespaced_deployment("web", ns)
    assert ei.value.status == 404
    assert _status_body(ei.value)["message"] == 'deployments.apps "web" not found'
    with pytest.raises(ApiException) as ei:
        apps.delete_namespaced_deployment("x", ns, body=client.V1DeleteOptions(propagation_policy="Sometimes"))
    assert ei.value.status in (404, 422)


def test_list_selectors_and_pagination(v1: client.CoreV1Api, ns: str) -> None:
    for i in range(7):
        v1.create_namespaced_config_map(ns, _cm(f"c{i}", {"app": "web" if i % 2 == 0 else "db", "idx": str(i)}))
    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="app=web").items]
    assert names == ["c0", "c2", "c4", "c6"]
    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="app in (db),idx!=3").items]
    assert names == ["c1", "c5"]
    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="!missing,app notin (web)").items]
    assert names == ["c1", "c3", "c5"]
    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns, field_selector="metadata.name=c3").items]
    assert names == ["c3"]
    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns, field_selector="metadata.name!=c3",
                                                                     label_selector="app=db").items]
    assert names == ["c1", "c5"]
    everywhere = v1.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={ns}")
    assert len(everywhere.items) == 7
    # pagination: limit + _continue, a consistent snapshot across pages
    pages: list[list[str]] = []
    token = None
    first_rv = None
    while True:
        page = v1.list_namespaced_config_map(ns, limit=3, _continue=token)
        pages.append([c.metadata.name for c in page.items])
        if first_rv is None:
            first_rv = page.metadata.resource_version
            v1.create_namespaced_config_map(ns, _cm("c9"))  # written after the snapshot: not in later pages
        token = page.metadata._continue
        if not token:
            break
    assert pages == [["c0", "c1", "c2"], ["c3", "c4", "c5"], ["c6"]]
    # pagination combined with a selector
    pages = []
    token = None
    while True:
        page = v1.list_namespaced_config_map(ns, limit=2, _continue=token, label_selector="app=web")
        pages.append([c.metadata.name for c in page.items])
        token = page.metadata._continue
        if not token:
            break
    assert [n for p in pages for n in p] == ["c0", "c2", "c4", "c6"]
    assert all(len(p) <= 2 for p in pages)


# ------------------------------------------------------------------------------------------ coordination
def test_lease_leader_election(api: client.ApiClient, ns: str) -> None:
    coord = client.CoordinationV1Api(api)

    def candidate(identity: str) -> LeaseLock:
        lock = LeaseLock("leader", ns, identity)
        lock.api_instance = coord  # the library's lock, bound to this server
        return lock

    a, b = candidate("a"), candidate("b")
    found, err = a.get("leader", ns)
    assert not found and err.status == 404
    now = "2026-01-01 10:00:00.123456+00:00"
    assert a.create("leader", ns, LeaderElectionRecord("a", "15", now, now))
    found, record = b.get("leader", ns)
    assert found and record.holder_identity == "a" and record.lease_duration == "15"
    lease = coord.read_namespaced_lease("leader", ns)
    assert lease.spec.acquire_time.microsecond == 123456  # MicroTime survives the round trip
    # a renews (get + update, as leaderelection.py does)
    assert a.get("leader", ns)[0]
    assert a.update("leader", ns, LeaderElectionRecord("a", "15", now, "2026-01-01 10:00:05.000001+00:00"))
    # b's view is now stale: its takeover must fail with a conflict, not overwrite the renewal
    assert not b.update("leader", ns, LeaderElectionRecord("b", "15", now, now))
    stale = b.lease_reference
    with pytest.raises(ApiException) as ei:
        coord.replace_namespaced_lease("leader", ns, stale)
    assert ei.value.status == 409
    lease = coord.read_namespaced_lease("leader", ns)
    assert lease.spec.holder_identity == "a"
    assert lease.spec.renew_time.second == 5
    # after a fresh read, b can take over (expired lease)
    assert b.get("leader", ns)[0]
    assert b.update("leader", ns, LeaderElectionRecord("b", "15", "2026-01-01 10:01:00+00:00",
                                                       "2026-01-01 10:01:00+00:00"))
    lease = coord.read_namespaced_lease("leader", ns)
    assert lease.spec.holder_identity == "b"
    assert [x.metadata.name for x in coord.list_namespaced_lease(ns).items] == ["leader"]
    # typed create with an explicit V1Lease, then a merge-style patch
    coord.create_namespaced_lease(ns, client.V1Lease(metadata=client.V1ObjectMeta(name="node-1"),
                                                     spec=client.V1LeaseSpec(holder_identity="node-1",
                                                                             lease_duration_seconds=40)))
    renewed = coord.patch_namespaced_lease("node-1", ns, {"spec": {"renewTime": "2026-01-01T10:00:00.000000Z"}})
    assert renewed.spec.renew_time is not None and renewed.spec.lease_duration_seconds == 40


# ------------------------------------------------------------------------------------------ custom resources
def test_custom_objects_crud(custom: client.CustomObjectsApi, widget_crd: dict[str, Any], ns: str) -> None:
    g, v, p = CRD_GROUP, "v1", CRD_PLURAL
    body = {"apiVersion": f"{g}/v1", "kind": "Widget", "metadata": {"name": "w1", "labels": {"tier": "a"}},
            "spec": {"size": 1, "color": "red", "tags": ["x", "y"]}}
    created = custom.create_namespaced_custom_object(g, v, ns, p, body)
    assert created["metadata"]["generation"] == 1 and created["spec"]["size"] == 1
    assert "status" not in created
    got = custom.get_namespaced_custom_object(g, v, ns, p, "w1")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    custom.create_namespaced_custom_object(g, v, ns, p, {**body, "metadata": {"name": "w2", "labels": {"tier": "b"}}})
    listed = custom.list_namespaced_custom_object(g, v, ns, p, label_selector="tier=a")
    assert listed["kind"] == "WidgetList" and [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
    assert listed["metadata"]["resourceVersion"]
    everywhere = custom.list_cluster_custom_object(g, v, p)
    assert {i["metadata"]["name"] for i in everywhere["items"]} >= {"w1", "w2"}
    # merge patch: lists replaced whole, null deletes, generation bumps on spec change
    patched = custom.patch_namespaced_custom_object(g, v, ns, p, "w1", {"spec": {"tags": ["z"], "color": None}})
    assert patched["spec"] == {"size": 1, "tags": ["z"]}
    assert patched["metadata"]["generation"] == 2
    # metadata-only change: no generation bump
    patched = custom.patch_namespaced_custom_object(g, v, ns, p, "w1", {"metadata": {"labels": {"tier": "c"}}})
    assert patched["metadata"]["generation"] == 2
    # status subresource: only status changes, generation stays
    st = custom.patch_namespaced_custom_object_status(g, v, ns, p, "w1",
                                                     {"status": {"ready": True}, "spec": {"size": 50}})
    assert st["status"] == {"ready": True} and st["spec"]["size"] == 1
    assert st["metadata"]["generation"] == 2
    assert custom.get_namespaced_custom_object_status(g, v, ns, p, "w1")["status"] == {"ready": True}
    # main resource ignores status
    again = custom.patch_namespaced_custom_object(g, v, ns, p, "w1", {"status": {"ready": False}})
    assert again["status"] == {"ready": True}
    # schema validation: wrong enum -> 422 naming the field
    with pytest.raises(ApiException) as ei:
        custom.patch_namespaced_custom_object(g, v, ns, p, "w1", {"spec": {"color": "green"}})
    assert ei.value.status == 422
    assert "spec.color" in _status_body(ei.value)["message"]
    # replace with a stale RV
    stale = dict(got)
    with pytest.raises(ApiException) as ei:
        custom.replace_namespaced_custom_object(g, v, ns, p, "w1", stale)
    assert ei.value.status == 409
    deleted = custom.delete_namespaced_custom_object(g, v, ns, p, "w1")
    assert deleted["status"] == "Success" or deleted["metadata"]["name"] == "w1"
    with pytest.raises(ApiException) as ei:
        custom.get_namespaced_custom_object(g, v, ns, p, "w1")
    assert ei.value.status == 404
    assert _status_body(ei.value)["message"] == f'{CRD_PLURAL}.{CRD_GROUP} "w1" not found'


def _policy(name: str, spec_extra: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
        "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}},
    }
    spec.update(spec_extra)
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name}, "spec": spec}


def test_karmada_propagation_policy_defaults_and_validation(custom: client.CustomObjectsApi, ns: str) -> None:
    g, v, p = KARMADA_POLICY
    pp = custom.create_namespaced_custom_object(g, v, ns, p, _policy("pp", {
        "propagateDeps": True,  # Karmada's webhook requires it with application failover
        "failover": {"cluster": {}, "application": {"decisionConditions": {}}},
        "placement": {"clusterAffinity": {"clusterNames": ["member1"]}, "replicaScheduling": {}},
    }), field_validation="Strict")
    spec = pp["spec"]
    # defaults from the Karmada CRD schema (src/flotilla/apiserver/schemas/karmada_common.py)
    assert spec["priority"] == 0
    assert spec["preemption"] == "Never"
    assert spec["conflictResolution"] == "Abort"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["failover"]["cluster"]["purgeMode"] == "Gracefully"
    assert spec["failover"]["application"]["purgeMode"] == "Gracefully"
    assert spec["failover"]["application"]["decisionConditions"]["tolerationSeconds"] == 300
    assert spec["placement"]["replicaScheduling"]["replicaSchedulingType"] == "Divided"
    assert pp["metadata"]["generation"] == 1
    # defaults do not overwrite given values and do not create absent parents
    pp2 = custom.create_namespaced_custom_object(g, v, ns, p, _policy("pp2", {
        "priority": 5, "failover": {"cluster": {"purgeMode": "Directly"}}}))
    assert pp2["spec"]["priority"] == 5
    assert pp2["spec"]["failover"]["cluster"]["purgeMode"] == "Directly"
    assert "application" not in pp2["spec"]["failover"]
    assert "replicaScheduling" not in pp2["spec"]["placement"]
    got = custom.get_namespaced_custom_object(g, v, ns, p, "pp")
    assert got["spec"] == spec
    # merge patch + strict validation of the patched result
    patched = custom.patch_namespaced_custom_object(g, v, ns, p, "pp", {"spec": {"priority": 10}})
    assert patched["spec"]["priority"] == 10 and patched["metadata"]["generation"] == 2
    # unknown field with fieldValidation=Strict -> 400 naming the field
    with pytest.raises(ApiException) as ei:
        custom.create_namespaced_custom_object(g, v, ns, p, _policy("unknown", {"bogusField": 1}),
                                               field_validation="Strict")
    assert ei.value.status == 400
    body = _status_body(ei.value)
    assert body["reason"] == "BadRequest" and "spec.bogusField" in body["message"]
    with pytest.raises(ApiException) as ei:
        custom.patch_namespaced_custom_object(g, v, ns, p, "pp", {"spec": {"bogusField": 1}},
                                              field_validation="Strict")
    assert ei.value.status == 400 and "spec.bogusField" in _status_body(ei.value)["message"]
    # wrong enum -> 422 whose Status names the field path
    with pytest.raises(ApiException) as ei:
        custom.create_namespaced_custom_object(g, v, ns, p, _policy("bad-enum", {
            "failover": {"cluster": {"purgeMode": "Sometimes"}}}))
    assert ei.value.status == 422
    body = _status_body(ei.value)
    assert body["reason"] == "Invalid" and body["details"]["kind"] == "PropagationPolicy"
    assert "spec.failover.cluster.purgeMode" in body["message"] and "Sometimes" in body["message"]
    causes = body["details"]["causes"]
    assert any(c["field"] == "spec.failover.cluster.purgeMode" and c["reason"] == "FieldValueNotSupported"
               for c in causes)
    # required field missing
    with pytest.raises(ApiException) as ei:
        custom.create_namespaced_custom_object(g, v, ns, p, {"apiVersion": f"{g}/{v}", "kind": "PropagationPolicy",
                                                             "metadata": {"name": "nosel"}, "spec": {}})
    assert ei.value.status == 422
    assert "spec.resourceSelectors" in _status_body(ei.value)["message"]
    names = [i["metadata"]["name"] for i in custom.list_namespaced_custom_object(g, v, ns, p)["items"]]
    assert names == ["pp", "pp2"]


# ------------------------------------------------------------------------------------------ dynamic client
def test_dynamic_client(api: client.ApiClient, widget_crd: dict[str, Any], ns: str, tmp_path: Path) -> None:
    dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    pps = dyn.resources.get(api_version="policy.karmada.io/v1alpha1", kind="PropagationPolicy")
    widgets = dyn.resources.get(api_version=f"{CRD_GROUP}/v1", kind="Widget")
    deploys = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert cms.namespaced and pps.namespaced and widgets.namespaced
    assert widgets.name == CRD_PLURAL and pps.name == "propagationpolicies"

    # built-in
    cms.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {"a": "1"}},
               namespace=ns)
    assert cms.get(name="d", namespace=ns).data.a == "1"
    patched = cms.patch(name="d", namespace=ns, body={"data": {"b": "2"}})  # default: strategic merge patch
    assert dict(patched.data) == {"a": "1", "b": "2"}
    applied = cms.server_side_apply(namespace=ns, field_manager="py-test", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d", "labels": {"ssa": "yes"}},
        "data": {"c": "3"}})
    assert applied.metadata.labels.ssa == "yes" and applied.data.c == "3"
    created_by_apply = cms.server_side_apply(namespace=ns, field_manager="py-test", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d2"}, "data": {"x": "y"}})
    assert created_by_apply.metadata.uid
    assert sorted(i.metadata.name for i in cms.get(namespace=ns).items) == ["d", "d2"]
    cms.delete(name="d", namespace=ns)
    with pytest.raises(dynamic.exceptions.NotFoundError):
        cms.get(name="d", namespace=ns)

    # SMP on a Deployment through the dynamic client merges containers by name
    deploys.create(body=_deployment("dyn"), namespace=ns)
    out = deploys.patch(name="dyn", namespace=ns, body={"spec": {"template": {"spec": {"containers": [
        {"name": "side", "image": "s:1"}]}}}})
    assert sorted(c.name for c in out.spec.template.spec.containers) == ["a", "side"]

    # Karmada kind
    pps.create(body=_policy("dyn-pp", {}), namespace=ns)
    pp = pps.get(name="dyn-pp", namespace=ns)
    assert pp.spec.conflictResolution == "Abort"
    pp = pps.patch(name="dyn-pp", namespace=ns, body={"spec": {"priority": 3}},
                   content_type="application/merge-patch+json")
    assert pp.spec.priority == 3
    pp = pps.server_side_apply(namespace=ns, field_manager="py-test", body={
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "dyn-pp", "labels": {"x": "y"}}})
    assert pp.metadata.labels.x == "y" and pp.spec.priority == 3
    pps.delete(name="dyn-pp", namespace=ns)

    # CRD kind; the dynamic client's default SMP is applied as a merge patch to custom resources
    widgets.create(body={"apiVersion": f"{CRD_GROUP}/v1", "kind": "Widget", "metadata": {"name": "dw"},
                         "spec": {"size": 2, "tags": ["a"]}}, namespace=ns)
    w = widgets.patch(name="dw", namespace=ns, body={"spec": {"size": 3}})
    assert w.spec.size == 3 and list(w.spec.tags) == ["a"]
    w = widgets.server_side_apply(namespace=ns, field_manager="py-test", body={
        "apiVersion": f"{CRD_GROUP}/v1", "kind": "Widget", "metadata": {"name": "dw"}, "spec": {"color": "blue"}})
    assert w.spec.color == "blue"
    assert [i.metadata.name for i in widgets.get(namespace=ns).items] == ["dw"]
    widgets.delete(name="dw", namespace=ns)
    with pytest.raises(dynamic.exceptions.NotFoundError):
        widgets.get(name="dw", namespace=ns)


# ------------------------------------------------------------------------------------------ watch
def test_watch_sees_changes_in_order(v1: client.CoreV1Api, ns: str) -> None:
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.create_namespaced_config_map(ns, _cm("w"))
    v1.patch_namespaced_config_map("w", ns, {"data": {"k": "2"}})
    v1.delete_namespaced_config_map("w", ns)
    w = watch.Watch()
    seen: list[tuple[str, str, int, Any]] = []
    for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
        obj = ev["object"]
        assert isinstance(obj, client.V1ConfigMap)  # deserialised through the strict model
        seen.append((ev["type"], obj.metadata.name, int(obj.metadata.resource_version), obj.data))
        if len(seen) == 3:
            w.stop()
    assert [(t, n) for t, n, _, _ in seen] == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    rvs = [r for _, _, r, _ in seen]
    assert int(rv) < rvs[0] < rvs[1] < rvs[2]
    assert seen[1][3] == {"k": "2"} and seen[2][3] == {"k": "2"}  # DELETED carries the last state
    # a watch with no RV first sends the current objects as synthetic ADDED, then live changes
    v1.create_namespaced_config_map(ns, _cm("live"))
    w = watch.Watch()
    types = []
    for ev in w.stream(v1.list_namespaced_config_map, ns, timeout_seconds=5):
        types.append((ev["type"], ev["object"].metadata.name))
        if len(types) == 1:  # the watch is established: this change must arrive live
            v1.patch_namespaced_config_map("live", ns, {"data": {"k": "live"}})
        else:
            w.stop()
    assert types == [("ADDED", "live"), ("MODIFIED", "live")]
    # with a label selector, objects moving out of / into the selection arrive as DELETED / ADDED
    v1.create_namespaced_config_map(ns, _cm("sel", {"app": "web"}))
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.patch_namespaced_config_map("sel", ns, {"metadata": {"labels": {"app": "db"}}})
    v1.patch_namespaced_config_map("sel", ns, {"data": {"k": "unseen"}})
    v1.patch_namespaced_config_map("sel", ns, {"metadata": {"labels": {"app": "web"}}})
    w = watch.Watch()
    moves = [(e["type"], e["object"].metadata.labels["app"])
             for e in w.stream(v1.list_namespaced_config_map, ns, label_selector="app=web", resource_version=rv,
                               timeout_seconds=1)]
    assert moves == [("DELETED", "db"), ("ADDED", "web")]


def test_watch_bookmarks(v1: client.CoreV1Api, ns: str) -> None:
    v1.create_namespaced_config_map(ns, _cm("b"))
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    w = watch.Watch()
    got: list[dict[str, Any]] = []
    start = time.monotonic()
    for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, allow_watch_bookmarks=True,
                       timeout_seconds=5):
        got.append(ev)
        if ev["type"] == "BOOKMARK":
            w.stop()
    assert time.monotonic() - start < 4.5, "no bookmark before the watch timed out"
    assert [e["type"] for e in got] == ["BOOKMARK"]
    bm = got[0]["raw_object"]
    assert bm["kind"] == "ConfigMap" and bm["apiVersion"] == "v1"
    assert int(bm["metadata"]["resourceVersion"]) >= int(rv)
    assert w.resource_version == bm["metadata"]["resourceVersion"]  # the client tracks bookmark RVs
    # without allowWatchBookmarks there are none
    w = watch.Watch()
    assert list(w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=1)) == []


def test_bookmarks_keep_an_idle_watch_resumable_after_compaction(
    server: ServerThread, v1: client.CoreV1Api, ns: str
) -> None:
    assert server.server is not None and server.server.store is not None
    store = server.server.store
    other = ns + "-busy"
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other)))
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    for i in range(3):  # configmap writes elsewhere: the watched namespace stays quiet
        v1.create_namespaced_config_map(other, _cm(f"busy{i}"))
    current = server.call(store.current_revision())
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, allow_watch_bookmarks=True,
                       timeout_seconds=3):
        if ev["type"] == "BOOKMARK":
            w.stop()
    bookmark_rv = w.resource_version
    server.call(store.compact(server.call(store.current_revision())))
    # the point of bookmarks: resuming from the bookmark's RV does not need a re-list after compaction
    w2 = watch.Watch()
    assert list(w2.stream(v1.list_namespaced_config_map, ns, resource_version=bookmark_rv, timeout_seconds=1)) == []
    assert int(bookmark_rv) >= current


def test_watch_resumes_from_last_resource_version(v1: client.CoreV1Api, ns: str) -> None:
    calls: list[dict[str, Any]] = []

    def short_watch(namespace: str, **kwargs: Any) -> client.V1ConfigMapList:
        """list_namespaced_config_map with a 1 s server-side timeout the Watch does not know about, so
        the Watch itself re-watches (from its last RV) each time a stream ends."""
        calls.append(dict(kwargs))
        return v1.list_namespaced_config_map(namespace, timeout_seconds=1, **kwargs)

    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.create_namespaced_config_map(ns, _cm("r1"))
    timer = threading.Timer(1.6, lambda: v1.create_namespaced_config_map(ns, _cm("r2")))
    timer.start()
    w = watch.Watch(return_type=client.V1ConfigMap)  # the wrapper hides the list function's return type
    seen: list[tuple[str, str, str]] = []
    try:
        for ev in w.stream(short_watch, ns, resource_version=rv):
            seen.append((ev["type"], ev["object"].metadata.name, ev["object"].metadata.resource_version))
            if len(seen) == 2:
                w.stop()
    finally:
        timer.join()
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "r1"), ("ADDED", "r2")]
    assert len(calls) >= 2, "the second event should have come from a resumed watch"
    assert calls[0]["resource_version"] == rv
    assert calls[1]["resource_version"] == seen[0][2]  # resumed from the last RV it saw, no duplicates

    # resuming by hand after a stream ends normally
    w = watch.Watch()
    first = [e["type"] for e in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=1)]
    assert first == ["ADDED", "ADDED"]
    last = w.resource_version
    v1.delete_namespaced_config_map("r1", ns)
    w = watch.Watch()
    second = [(e["type"], e["object"].metadata.name)
              for e in w.stream(v1.list_namespaced_config_map, ns, resource_version=last, timeout_seconds=1)]
    assert second == [("DELETED", "r1")]


def watch_with_relist(
    list_fn: Callable[..., Any],
    namespace: str,
    resource_version: str,
    done: Callable[[dict[str, str]], bool],
    *,
    after_relist: Callable[[], None] | None = None,
    timeout: float = 10,
) -> tuple[dict[str, str], int]:
    """An informer in miniature: keep a name -> resourceVersion cache in step with the server by watching
    from ``resource_version``; on 410 Expired, re-list and watch again from the list's RV.

    Returns (cache, number of re-lists) once ``done(cache)`` holds.
    """
    cache: dict[str, str] = {}
    relists = 0
    rv = resource_version
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        w = watch.Watch()
        try:
            for ev in w.stream(list_fn, namespace, resource_version=rv, timeout_seconds=2):
                obj = ev["object"]
                rv = obj.metadata.resource_version
                if ev["type"] == "DELETED":
                    cache.pop(obj.metadata.name, None)
                elif ev["type"] in ("ADDED", "MODIFIED"):
                    cache[obj.metadata.name] = rv
                if done(cache):
                    w.stop()
                    return cache, relists
            rv = w.resource_version or rv
        except ApiException as e:
            if e.status != 410:
                raise
            relists += 1
            listed = list_fn(namespace)
            cache = {o.metadata.name: o.metadata.resource_version for o in listed.items}
            rv = listed.metadata.resource_version
            if after_relist is not None:
                after_relist()
            if done(cache):
                return cache, relists
    raise AssertionError(f"watch_with_relist did not converge: {cache}")


def test_watch_410_expired_and_relist(server: ServerThread, v1: client.CoreV1Api, ns: str) -> None:
    assert server.server is not None and server.server.store is not None
    store = server.server.store
    old_rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.create_namespaced_config_map(ns, _cm("x1"))
    v1.create_namespaced_config_map(ns, _cm("x2"))
    v1.patch_namespaced_config_map("x1", ns, {"data": {"k": "2"}})
    page = v1.list_namespaced_config_map(ns, limit=1)
    assert page.metadata._continue
    v1.delete_namespaced_config_map("x2", ns)
    server.call(store.compact(server.call(store.current_revision())))

    # with timeout_seconds the client does not retry: the ERROR 410 event surfaces at once
    w = watch.Watch()
    with pytest.raises(ApiException) as ei:
        list(w.stream(v1.list_namespaced_config_map, ns, resource_version=old_rv, timeout_seconds=5))
    assert ei.value.status == 410 and "Expired" in str(ei.value.reason)
    # without it, the client retries once from the same RV, then gives up with 410 too
    w = watch.Watch()
    with pytest.raises(ApiException) as ei:
        next(iter(w.stream(v1.list_namespaced_config_map, ns, resource_version=old_rv)))
    assert ei.value.status == 410
    # the raw ERROR event is a Status with code 410 / reason Expired
    resp = v1.list_namespaced_config_map(ns, watch=True, resource_version=old_rv, timeout_seconds=5,
                                         _preload_content=False)
    try:
        lines = [ln for ln in resp.data.decode().splitlines() if ln.strip()]
    finally:
        resp.release_conn()
    assert len(lines) == 1
    err = json.loads(lines[0])
    assert err["type"] == "ERROR"
    assert err["object"]["kind"] == "Status" and err["object"]["code"] == 410
    assert err["object"]["reason"] == "Expired" and "too old resource version" in err["object"]["message"]
    # so has a list at an exact, compacted resourceVersion
    with pytest.raises(ApiException) as ei:
        v1.list_namespaced_config_map(ns, resource_version=old_rv, resource_version_match="Exact")
    assert ei.value.status == 410 and _status_body(ei.value)["reason"] == "Expired"
    # a continue token from before the compaction has expired as well
    with pytest.raises(ApiException) as ei:
        v1.list_namespaced_config_map(ns, limit=1, _continue=page.metadata._continue)
    assert ei.value.status == 410 and _status_body(ei.value)["reason"] == "Expired"

    # the recovery path: re-list, then watch from the list's RV; a change made after the re-list arrives
    cache, relists = watch_with_relist(
        v1.list_namespaced_config_map, ns, old_rv,
        done=lambda c: "x3" in c,
        after_relist=lambda: v1.create_namespaced_config_map(ns, _cm("x3")),
    )
    assert relists == 1
    live = {c.metadata.name: c.metadata.resource_version for c in v1.list_namespaced_config_map(ns).items}
    assert cache == live and set(live) == {"x1", "x3"}
    # watching from the current RV works normally after compaction
    current = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.patch_namespaced_config_map("x3", ns, {"data": {"k": "3"}})
    w = watch.Watch()
    after = [(e["type"], e["object"].metadata.name)
             for e in w.stream(v1.list_namespaced_config_map, ns, resource_version=current, timeout_seconds=1)]
    assert after == [("MODIFIED", "x3")]
