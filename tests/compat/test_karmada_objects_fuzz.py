"""Generated Karmada objects (PropagationPolicy, ClusterPropagationPolicy, ClusterTaintPolicy, ResourceBinding)
and raw bodies, sent over HTTP to an API server.

- A valid object is created (201) and reads back as it was sent, plus exactly the metadata the server sets and
  the defaults of Karmada's CRDs and mutating webhooks, modelled here independently.
- The same object with one field broken (wrong type, unsupported enum value, number out of range, missing
  required field, a string its schema's ``pattern`` refuses, unknown field with ``fieldValidation=Strict``) is
  refused with a ``Status`` naming the
  field path: 422 ``Invalid``, or 400 for a strict-decoding unknown field (as Kubernetes does); sent as an
  update (PUT or merge patch) it is refused the same way and the stored object stays as it was.
- Raw bodies (truncated or non-object JSON, huge numbers, deep nesting, YAML, a wrong content type) get a 4xx.
Nothing ever gets a 5xx. ``FLOTILLA_FUZZ_EXAMPLES`` (default 100) sets the examples per test; ``make soak`` can
raise it.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.apiserver import ServerThread

NS = "kfuzz"
POLICY = "/apis/policy.karmada.io/v1alpha1"
WORK = "/apis/work.karmada.io/v1alpha2"
EXAMPLES = int(os.environ.get("FLOTILLA_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.filter_too_much, HealthCheck.data_too_large])
SERVER_SET = {"uid", "creationTimestamp", "generation", "resourceVersion"}
_names = itertools.count()


@pytest.fixture(scope="module")
def api(server: ServerThread) -> Iterator[tuple[str, requests.Session]]:
    session = requests.Session()
    r = session.post(server.url + "/api/v1/namespaces",
                     json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    assert r.status_code in (201, 409)
    yield server.url, session
    session.close()


# ---------------------------------------------------------------------------------------------- kinds


KINDS: dict[str, dict[str, Any]] = {
    "PropagationPolicy": {"api": "policy.karmada.io/v1alpha1", "coll": f"{POLICY}/namespaces/{NS}/propagationpolicies",
                          "namespaced": True, "id_label": "propagationpolicy.karmada.io/permanent-id"},
    "ClusterPropagationPolicy": {"api": "policy.karmada.io/v1alpha1", "coll": f"{POLICY}/clusterpropagationpolicies",
                                 "namespaced": False,
                                 "id_label": "clusterpropagationpolicy.karmada.io/permanent-id"},
    "ClusterTaintPolicy": {"api": "policy.karmada.io/v1alpha1", "coll": f"{POLICY}/clustertaintpolicies",
                           "namespaced": False, "id_label": None},
    "ResourceBinding": {"api": "work.karmada.io/v1alpha2", "coll": f"{WORK}/namespaces/{NS}/resourcebindings",
                        "namespaced": True, "id_label": "resourcebinding.karmada.io/permanent-id"},
}

dns_label = st.from_regex(r"[a-z]([a-z0-9-]{0,14}[a-z0-9])?", fullmatch=True)
label_key = st.one_of(st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,20}[A-Za-z0-9])?", fullmatch=True),
                      st.builds(lambda p, n: f"{p}.io/{n}", dns_label, dns_label))
label_value = st.from_regex(r"([A-Za-z0-9]([A-Za-z0-9_.-]{0,20}[A-Za-z0-9])?)?", fullmatch=True)
int32 = st.integers(0, 2**31 - 1)
labels = st.dictionaries(label_key, label_value, max_size=3)
TARGETS = [("v1", "ConfigMap"), ("apps/v1", "Deployment"), ("flink.apache.org/v1beta1", "FlinkDeployment"),
           ("multicluster.x-k8s.io/v1alpha1", "ServiceImport")]


@st.composite
def selector(draw: st.DrawFn, cluster_scoped: bool) -> dict[str, Any]:
    api, kind = draw(st.sampled_from(TARGETS))
    sel: dict[str, Any] = {"apiVersion": api, "kind": kind}
    if draw(st.booleans()):
        sel["name"] = draw(dns_label)
    elif draw(st.booleans()):
        sel["labelSelector"] = {"matchLabels": draw(labels)}
    if cluster_scoped and draw(st.booleans()):
        sel["namespace"] = draw(dns_label)
    return sel


toleration = st.fixed_dictionaries({}, optional={
    "key": label_key, "operator": st.sampled_from(["", "Equal", "Exists"]), "value": label_value,
    "effect": st.sampled_from(["", "NoSchedule", "NoExecute"]), "tolerationSeconds": st.integers(0, 10**6)})


@st.composite
def placement(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["clusterAffinity"] = draw(st.fixed_dictionaries({}, optional={
            "clusterNames": st.lists(dns_label, max_size=3), "exclude": st.lists(dns_label, max_size=2),
            "labelSelector": st.fixed_dictionaries({"matchLabels": labels})}))
    if draw(st.booleans()):
        out["clusterTolerations"] = draw(st.lists(toleration, max_size=3))
    if draw(st.booleans()):
        most = draw(st.integers(1, 5))
        spread: dict[str, Any] = {"maxGroups": most}
        if draw(st.booleans()):
            spread["spreadByField"] = "cluster"
        if draw(st.booleans()):
            spread["minGroups"] = draw(st.integers(0, most))
        out["spreadConstraints"] = [spread]
        if draw(st.booleans()):
            out["spreadConstraints"].append({"spreadByField": draw(st.sampled_from(["region", "zone", "provider"])),
                                             "maxGroups": draw(st.integers(1, 5))})
    if draw(st.booleans()):
        out["replicaScheduling"] = draw(st.fixed_dictionaries({}, optional={
            "replicaSchedulingType": st.sampled_from(["Duplicated", "Divided"]),
            "replicaDivisionPreference": st.sampled_from(["Aggregated", "Weighted"])}))
    return out


@st.composite
def failover(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rules = st.lists(st.fixed_dictionaries({"aliasLabelName": label_key, "jsonPath": st.just("{.jobStatus.jobId}")}),
                     max_size=2, unique_by=lambda r: r["aliasLabelName"])
    if draw(st.booleans()):
        app: dict[str, Any] = {"decisionConditions": draw(st.fixed_dictionaries(
            {}, optional={"tolerationSeconds": st.integers(0, 10**5)}))}
        mode = draw(st.sampled_from([None, "Directly", "Gracefully", "Never"]))
        if mode is not None:
            app["purgeMode"] = mode
        if mode in (None, "Gracefully") and draw(st.booleans()):
            app["gracePeriodSeconds"] = draw(st.integers(1, 10**5))
        if draw(st.booleans()):
            app["statePreservation"] = {"rules": draw(rules)}
        out["application"] = app
    if draw(st.booleans()):
        out["cluster"] = draw(st.fixed_dictionaries({}, optional={
            "purgeMode": st.sampled_from(["Directly", "Gracefully"]),
            "statePreservation": st.fixed_dictionaries({"rules": rules})}))
    return out


@st.composite
def propagation_policy(draw: st.DrawFn, kind: str = "PropagationPolicy") -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceSelectors": draw(st.lists(selector(kind != "PropagationPolicy"),
                                                               min_size=1, max_size=3))}
    spec.update(draw(st.fixed_dictionaries({}, optional={
        "priority": st.integers(-1000, 1000), "preemption": st.sampled_from(["Always", "Never"]),
        "conflictResolution": st.sampled_from(["Abort", "Overwrite"]), "placement": placement(),
        "propagateDeps": st.booleans(), "schedulerName": dns_label})))
    if spec.get("preemption") == "Always":  # Karmada: preemption needs named selectors
        for sel in spec["resourceSelectors"]:
            sel.setdefault("name", draw(dns_label))
            sel.pop("labelSelector", None)
    fo = draw(st.one_of(st.none(), failover()))
    if fo is not None:
        spec["failover"] = fo
        if "application" in fo:
            spec["propagateDeps"] = True  # V4
    return spec


condition = st.fixed_dictionaries({"conditionType": st.sampled_from(["Ready", "NetworkUnavailable", "x.io/Custom"]),
                                   "operator": st.sampled_from(["In", "NotIn"]),
                                   "statusValues": st.lists(st.sampled_from(["True", "False", "Unknown"]),
                                                            min_size=1, max_size=3)})


@st.composite
def taint_policy(draw: st.DrawFn) -> dict[str, Any]:
    taints = draw(st.lists(st.fixed_dictionaries({"key": label_key, "effect": st.sampled_from(
        ["NoSchedule", "NoExecute"])}, optional={"value": label_value}), min_size=1, max_size=3,
        unique_by=lambda t: (t["key"], t["effect"])))
    spec: dict[str, Any] = {"taints": taints}
    spec.update(draw(st.fixed_dictionaries({}, optional={
        "addOnConditions": st.lists(condition, max_size=2), "removeOnConditions": st.lists(condition, max_size=2),
        "targetClusters": st.fixed_dictionaries({"clusterNames": st.lists(dns_label, max_size=2)})})))
    return spec


reason = st.from_regex(r"[A-Za-z]([A-Za-z0-9_,:]{0,20}[A-Za-z0-9_])?", fullmatch=True)
# a resource.Quantity: a number, or a string matching the CRD's pattern (no exponents: see the bound test below)
quantity = st.one_of(st.integers(0, 10**6),
                     st.from_regex(r"([0-9]{1,4}(\.[0-9]{0,3})?|\.[0-9]{1,3})([KMGTPE]i|[numkMGTPE])?", fullmatch=True))


@st.composite
def resource_binding(draw: st.DrawFn) -> dict[str, Any]:
    api, kind = draw(st.sampled_from(TARGETS))
    spec: dict[str, Any] = {"resource": {"apiVersion": api, "kind": kind, "name": draw(dns_label)}}
    spec.update(draw(st.fixed_dictionaries({}, optional={
        "replicas": int32, "propagateDeps": st.booleans(),
        "replicaRequirements": st.fixed_dictionaries({"resourceRequest": st.dictionaries(
            st.sampled_from(["cpu", "memory", "pods", "ephemeral-storage"]), quantity, min_size=1, max_size=3)}),
        "clusters": st.lists(st.fixed_dictionaries({"name": dns_label}, optional={"replicas": int32}),
                             max_size=3, unique_by=lambda c: c["name"]),
        "gracefulEvictionTasks": st.lists(st.fixed_dictionaries(
            {"fromCluster": dns_label, "producer": st.sampled_from(["TaintManager", "x"]), "reason": reason},
            optional={"purgeMode": st.sampled_from(["Directly", "Gracefully", "Never"]),
                      "message": st.text(max_size=40), "replicas": int32, "suppressDeletion": st.booleans(),
                      "gracePeriodSeconds": int32,
                      "preservedLabelState": st.dictionaries(label_key, label_value, max_size=2)}),
            max_size=3, unique_by=lambda t: t["fromCluster"])})))
    return spec


SPECS = {"PropagationPolicy": propagation_policy(), "ClusterPropagationPolicy":
         propagation_policy("ClusterPropagationPolicy"), "ClusterTaintPolicy": taint_policy(),
         "ResourceBinding": resource_binding()}


@st.composite
def karmada_object(draw: st.DrawFn, kinds: tuple[str, ...] = tuple(KINDS)) -> dict[str, Any]:
    kind = draw(st.sampled_from(kinds))
    md: dict[str, Any] = {"name": f"{kind.lower()}-{next(_names)}"}
    md.update(draw(st.fixed_dictionaries({}, optional={"labels": labels, "annotations": labels})))
    return {"apiVersion": KINDS[kind]["api"], "kind": kind, "metadata": md, "spec": draw(SPECS[kind])}


# ---------------------------------------------------------------------------------------------- expected


def expected_spec(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as stored: Karmada's CRD defaults and mutating webhooks, written out independently."""
    out = copy.deepcopy(spec)
    if kind == "ClusterTaintPolicy":
        return out
    out.setdefault("conflictResolution", "Abort")
    if kind == "ResourceBinding":
        return out
    out.setdefault("priority", 0)
    out.setdefault("preemption", "Never")
    out.setdefault("schedulerName", "default-scheduler")
    for sel in out["resourceSelectors"]:
        if kind == "PropagationPolicy" and not sel.get("namespace"):
            sel["namespace"] = NS  # M1
        if sel["kind"] == "ServiceImport":
            out["propagateDeps"] = True  # M3
    pl = out.get("placement", {})
    for sc in pl.get("spreadConstraints", []):  # M2
        if not sc.get("spreadByField") and not sc.get("spreadByLabel"):
            sc["spreadByField"] = "cluster"
        if not sc.get("minGroups"):
            sc["minGroups"] = 1
    if "replicaScheduling" in pl:
        rs = pl["replicaScheduling"]
        rs.setdefault("replicaSchedulingType", "Divided")  # CRD default
        if rs["replicaSchedulingType"] == "Divided":
            rs.setdefault("replicaDivisionPreference", "Weighted")  # M4
    app = out.get("failover", {}).get("application")
    if app is not None:
        app["decisionConditions"].setdefault("tolerationSeconds", 300)
        app.setdefault("purgeMode", "Gracefully")
        if app["purgeMode"] == "Gracefully":
            app.setdefault("gracePeriodSeconds", 600)  # M5
    cluster = out.get("failover", {}).get("cluster")
    if cluster is not None:
        cluster.setdefault("purgeMode", "Gracefully")
    return out


def assert_stored_as_sent(sent: dict[str, Any], got: dict[str, Any]) -> None:
    kind = sent["kind"]
    info = KINDS[kind]
    assert (got["apiVersion"], got["kind"]) == (sent["apiVersion"], kind)
    assert set(got) == {"apiVersion", "kind", "metadata", "spec"}
    md, sent_md = got["metadata"], sent["metadata"]
    added = set(md) - set(sent_md)
    expected_added = set(SERVER_SET)
    if info["namespaced"]:
        expected_added.add("namespace")
        assert md["namespace"] == NS
    if info["id_label"] and "labels" not in sent_md:
        expected_added.add("labels")
    assert added == expected_added, added ^ expected_added
    assert md["generation"] == 1
    assert md["name"] == sent_md["name"]
    assert md.get("annotations") == sent_md.get("annotations")
    want_labels = dict(sent_md.get("labels", {}))
    if info["id_label"]:
        assert len(md["labels"].get(info["id_label"], "")) == 36  # a UUID, M6
        want_labels[info["id_label"]] = md["labels"][info["id_label"]]
    assert md.get("labels", {}) == want_labels
    assert got["spec"] == expected_spec(kind, sent["spec"])


def create(api: tuple[str, requests.Session], obj: Any, query: str = "") -> requests.Response:
    url, session = api
    kind = obj["kind"] if isinstance(obj, dict) and obj.get("kind") in KINDS else "PropagationPolicy"
    reply = session.post(url + KINDS[kind]["coll"] + query, data=json.dumps(obj),
                         headers={"Content-Type": "application/json"})
    assert reply.status_code < 500, reply.text
    return reply


# ---------------------------------------------------------------------------------------------- valid


@FUZZ
@given(obj=karmada_object())
def test_valid_object_round_trips(api: tuple[str, requests.Session], obj: dict[str, Any]) -> None:
    reply = create(api, obj, "?fieldValidation=Strict")
    assert reply.status_code == 201, reply.text
    assert_stored_as_sent(obj, reply.json())
    url, session = api
    path = KINDS[obj["kind"]]["coll"] + "/" + obj["metadata"]["name"]
    got = session.get(url + path)
    assert got.status_code == 200
    assert got.json() == reply.json()
    # writing back what was read changes nothing (no new revision, nothing re-defaulted)
    again = session.put(url + path, data=got.content, headers={"Content-Type": "application/json"})
    assert again.status_code == 200, again.text
    assert again.json() == got.json()
    assert session.delete(url + path).status_code == 200


# ---------------------------------------------------------------------------------------------- invalid


def _nodes(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, f"{path}[{i}]")


def _wrong_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return "1"
    if isinstance(value, str):
        return 7
    if isinstance(value, list):
        return {"a": 1}
    return ["a"]


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set the node at a path like ``spec.placement.clusterTolerations[0].key``; None deletes it."""
    parts: list[Any] = []
    for piece in path.split("."):
        name, _, rest = piece.partition("[")
        parts.append(name)
        parts += [int(i) for i in rest.replace("]", "").split("[") if i] if rest else []
    node: Any = obj
    for p in parts[:-1]:
        node = node[p]
    if value is None:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value


IDX = r"\[\d+\]"
# field paths (regular expressions) where Karmada's CRDs or webhooks, or Flotilla's D13 (ClusterTaintPolicy
# hygiene), allow only some values
ENUMS = [r"spec\.(preemption|conflictResolution)", r"spec\.failover\.(application|cluster)\.purgeMode",
         rf"spec\.placement\.spreadConstraints{IDX}\.spreadByField",
         r"spec\.placement\.replicaScheduling\.replicaScheduling(Type|DivisionPreference)",
         rf"spec\.placement\.clusterTolerations{IDX}\.operator", rf"spec\.taints{IDX}\.effect",
         rf"spec\.gracefulEvictionTasks{IDX}\.purgeMode"]
# (field path, a value out of its range)
RANGES = [(r"spec\.failover\.application\.decisionConditions\.tolerationSeconds", -1),
          (r"spec\.failover\.application\.gracePeriodSeconds", 0),
          (rf"spec\.placement\.spreadConstraints{IDX}\.(maxGroups|minGroups)", -1),
          (r"spec\.priority", 2**63), (rf"spec\.(clusters{IDX}\.|gracefulEvictionTasks{IDX}\.)?replicas", 2**64),
          (rf"spec\.gracefulEvictionTasks{IDX}\.reason", "R" * 33),
          (rf"spec\.gracefulEvictionTasks{IDX}\.message", "m" * 1025)]
REQUIRED = [r"spec\.(resourceSelectors|taints|resource)", rf"spec\.resourceSelectors{IDX}\.(apiVersion|kind)",
            r"spec\.failover\.application\.decisionConditions",
            r"spec\.failover\.(application|cluster)\.statePreservation\.rules",
            rf"spec\.failover\.(application|cluster)\.statePreservation\.rules{IDX}\.(aliasLabelName|jsonPath)",
            rf"spec\.taints{IDX}\.(key|effect)", rf"spec\.(add|remove)OnConditions{IDX}\.(conditionType|operator"
            r"|statusValues)", rf"spec\.clusters{IDX}\.name", rf"spec\.gracefulEvictionTasks{IDX}\.(fromCluster|producer"
            r"|reason)"]
# (field path, a string its schema's pattern refuses)
PATTERNS = [(rf"spec\.gracefulEvictionTasks{IDX}\.reason", "Taint Untolerated"),
            (r"spec\.replicaRequirements\.resourceRequest\.[a-z-]+", "lots")]
FREE_MAPS = ("labels", "matchLabels", "preservedLabelState", "resourceRequest")  # any key is allowed there


def _matching(patterns: list[str], paths: list[str]) -> list[str]:
    return [p for p in paths if any(re.fullmatch(rx, p) for rx in patterns)]


@st.composite
def broken_object(draw: st.DrawFn) -> tuple[dict[str, Any], str, str, dict[str, Any]]:
    """A valid object with one field broken: (object, field path the error must name, how it was broken, the
    valid object)."""
    obj = draw(karmada_object())
    valid = copy.deepcopy(obj)
    nodes = dict(_nodes(obj["spec"], "spec"))
    paths = sorted(nodes)
    ways = {
        "type": [p for p in paths if p != "spec" and not any(f".{m}." in p for m in FREE_MAPS)],
        "enum": _matching(ENUMS, paths),
        "range": _matching([rx for rx, _ in RANGES], paths),
        "required": _matching(REQUIRED, paths),
        "pattern": _matching([rx for rx, _ in PATTERNS], paths),
        "unknown": [p for p in paths if isinstance(nodes[p], dict) and not p.endswith(FREE_MAPS)] or ["spec"],
    }
    how = draw(st.sampled_from([w for w, found in ways.items() if found]))  # the ways this object can be broken
    candidates = ways[how]
    path = draw(st.sampled_from(candidates))
    if how == "type":
        _set(obj, path, _wrong_type(nodes[path]))
    elif how == "enum":
        _set(obj, path, "Bogus")
    elif how == "range":
        _set(obj, path, next(v for rx, v in RANGES if re.fullmatch(rx, path)))
    elif how == "required":
        _set(obj, path, None)
    elif how == "pattern":
        _set(obj, path, next(v for rx, v in PATTERNS if re.fullmatch(rx, path)))
    else:
        path = f"{path}.{draw(st.from_regex(r'zz[a-z]{1,8}', fullmatch=True))}"
        _set(obj, path, 1)
    return obj, path, how, valid


@FUZZ
@given(case=broken_object())
def test_invalid_object_is_refused_with_its_field_path(api: tuple[str, requests.Session],
                                                       case: tuple[dict[str, Any], str, str, Any]) -> None:
    obj, path, how, _ = case
    event(f"{obj['kind']}: {how}")
    reply = create(api, obj, "?fieldValidation=Strict")
    assert reply.status_code != 201, f"{how} at {path} was accepted: {reply.text}"
    status = reply.json()
    assert status["kind"] == "Status", status
    if how == "unknown":
        assert reply.status_code == 400, reply.text  # strict decoding, as Kubernetes
        assert path in status["message"], (path, status["message"])
        return
    assert_names_the_field(reply, path)


def assert_names_the_field(reply: requests.Response, path: str) -> None:
    assert reply.status_code == 422, reply.text
    status = reply.json()
    assert status["reason"] == "Invalid"
    fields = [c.get("field", "") for c in status["details"]["causes"]]
    # the broken field itself, or (when a whole list item went wrong) the object holding it
    assert any(f == path or path.startswith(f + ".") or path.startswith(f + "[") for f in fields), (path, fields)
    assert path.split("[")[0] in status["message"]


@FUZZ
@given(obj=karmada_object(("ResourceBinding",)), key=st.sampled_from(["cpu", "memory"]),
       bad=st.sampled_from(["lots", "1.5.5", "250 m", "1Gi\n", "-", "1e", "0x10", "½"]))
def test_quantity_not_matching_its_pattern_is_refused(api: tuple[str, requests.Session], obj: dict[str, Any],
                                                      key: str, bad: str) -> None:
    """The CRD's quantity pattern with Go's semantics: ``1Gi\n`` too (Go's ``$`` is the end of the text)."""
    obj["spec"]["replicaRequirements"] = {"resourceRequest": {key: bad}}
    reply = create(api, obj, "?fieldValidation=Strict")
    assert_names_the_field(reply, f"spec.replicaRequirements.resourceRequest.{key}")
    assert "in body should match" in reply.json()["message"]


@FUZZ
@given(case=broken_object(), verb=st.sampled_from(["PUT", "merge-patch"]))
def test_invalid_update_is_refused_and_changes_nothing(api: tuple[str, requests.Session],
                                                      case: tuple[dict[str, Any], str, str, Any], verb: str) -> None:
    broken, path, how, valid = case
    url, session = api
    created = create(api, valid)
    assert created.status_code == 201, created.text
    item = url + KINDS[valid["kind"]]["coll"] + "/" + valid["metadata"]["name"]
    if verb == "PUT":
        broken["metadata"]["resourceVersion"] = created.json()["metadata"]["resourceVersion"]
        reply = session.put(item + "?fieldValidation=Strict", data=json.dumps(broken),
                            headers={"Content-Type": "application/json"})
    else:
        reply = session.patch(item + "?fieldValidation=Strict", data=json.dumps({"spec": broken["spec"]}),
                              headers={"Content-Type": "application/merge-patch+json"})
    assert reply.status_code < 500, reply.text
    if how == "required" and verb == "merge-patch" and "[" not in path:
        # a merge patch that leaves a map key out keeps the stored value: the update is valid
        assert reply.status_code == 200, reply.text
    elif how == "unknown":
        assert reply.status_code == 400, reply.text
        assert path in reply.json()["message"]
    else:
        assert_names_the_field(reply, path)
    if reply.status_code != 200:
        assert session.get(item).json() == created.json()
    assert session.delete(item).status_code == 200


@FUZZ
@given(case=broken_object())
def test_unknown_fields_are_dropped_with_a_warning_by_default(api: tuple[str, requests.Session],
                                                               case: tuple[dict[str, Any], str, str, Any]) -> None:
    obj, path, how, _ = case
    if how != "unknown":
        return
    reply = create(api, obj)
    assert reply.status_code == 201, reply.text
    assert path in reply.headers.get("Warning", ""), reply.headers
    _set(obj, path, None)
    assert_stored_as_sent(obj, reply.json())
    url, session = api
    session.delete(url + KINDS[obj["kind"]]["coll"] + "/" + obj["metadata"]["name"])


# ---------------------------------------------------------------------------------------------- raw bodies


def post_raw(api: tuple[str, requests.Session], kind: str, body: bytes, content_type: str | None) -> requests.Response:
    url, session = api
    headers = {"Content-Type": content_type} if content_type else {}
    reply = session.post(url + KINDS[kind]["coll"], data=body, headers=headers)
    assert reply.status_code < 500, reply.text
    if reply.status_code >= 400:
        assert reply.json()["kind"] == "Status"
    return reply


def _text(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _nested(depth: int) -> bytes:
    return b'{"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy", "metadata": {"name": "deep"}, ' \
           b'"spec": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"


@FUZZ
@given(obj=karmada_object(), cut=st.floats(0, 1, exclude_max=True))
def test_truncated_json_is_a_bad_request(api: tuple[str, requests.Session], obj: dict[str, Any], cut: float) -> None:
    raw = _text(obj)
    assert post_raw(api, obj["kind"], raw[: int(len(raw) * cut)], "application/json").status_code == 400


@FUZZ
@given(kind=st.sampled_from(list(KINDS)), value=st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
    st.lists(st.integers(), max_size=3), st.lists(st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
                                                  max_size=2)))
def test_non_object_json_is_a_bad_request(api: tuple[str, requests.Session], kind: str, value: Any) -> None:
    assert post_raw(api, kind, _text(value), "application/json").status_code == 400


@FUZZ
@given(obj=karmada_object(("PropagationPolicy", "ResourceBinding")), digits=st.integers(19, 400),
       sign=st.sampled_from(["", "-"]))
def test_huge_numbers_are_refused_at_their_field(api: tuple[str, requests.Session], obj: dict[str, Any], digits: int,
                                                 sign: str) -> None:
    field = "priority" if obj["kind"] == "PropagationPolicy" else "replicas"
    obj["spec"][field] = 7777777777  # a marker no generated field has (they are int32)
    raw = _text(obj).replace(b"7777777777", f'{sign}{"9" * digits}'.encode())
    for content_type in ("application/json", "application/yaml"):
        reply = post_raw(api, obj["kind"], raw, content_type)
        if digits > 308:  # beyond any float: not a number JSON can carry
            assert reply.status_code == 400, reply.text
        else:
            assert reply.status_code == 422, reply.text
            assert [c["field"] for c in reply.json()["details"]["causes"]] == [f"spec.{field}"]


@pytest.mark.parametrize("depth", [50, 150, 199, 250, 1000, 100_000])
def test_deep_nesting_never_breaks_the_server(api: tuple[str, requests.Session], depth: int) -> None:
    for content_type in ("application/json", "application/yaml"):
        reply = post_raw(api, "ClusterTaintPolicy", _nested(depth), content_type)
        assert reply.status_code in (400, 422), reply.text


@FUZZ
@given(obj=karmada_object(), content_type=st.sampled_from(["text/plain", "application/xml", "image/png",
                                                          "application/x-www-form-urlencoded"]))
def test_wrong_content_type_is_unsupported(api: tuple[str, requests.Session], obj: dict[str, Any],
                                           content_type: str) -> None:
    assert post_raw(api, obj["kind"], _text(obj), content_type).status_code == 415


@FUZZ
@given(obj=karmada_object())
def test_valid_object_as_yaml_round_trips(api: tuple[str, requests.Session], obj: dict[str, Any]) -> None:
    reply = post_raw(api, obj["kind"], yaml.safe_dump(obj).encode(), "application/yaml")
    assert reply.status_code == 201, reply.text
    assert_stored_as_sent(obj, reply.json())
    url, session = api
    session.delete(url + KINDS[obj["kind"]]["coll"] + "/" + obj["metadata"]["name"])


@FUZZ
@given(kind=st.sampled_from(list(KINDS)), raw=st.binary(max_size=300),
       content_type=st.sampled_from([None, "application/json", "application/yaml", "application/merge-patch+json"]))
def test_random_bytes_never_break_the_server(api: tuple[str, requests.Session], kind: str, raw: bytes,
                                             content_type: str | None) -> None:
    assert post_raw(api, kind, raw, content_type).status_code in (400, 415, 422)


# ---------------------------------------------------------------------------------------------- regressions


WORKS = "/apis/work.karmada.io/v1alpha1/namespaces/" + NS + "/works"


@pytest.mark.parametrize(("big", "stored"), [("99999999999999999999999999", 1e26), ("18446744073709551616", 2.0**64),
                                             ("18446744073709551615", 2**64 - 1)])
def test_yaml_integer_beyond_64_bits_is_stored_as_json_would_be(api: tuple[str, requests.Session], big: str,
                                                                stored: float) -> None:
    """Was a 500 (the store's encoder refuses integers beyond 64 bits): now a float, as when JSON is decoded."""
    url, session = api
    name = f"big-{len(big)}-{big[-1]}"
    text = (f"apiVersion: work.karmada.io/v1alpha1\nkind: Work\nmetadata: {{name: {name}}}\n"
            f"spec: {{workload: {{manifests: [{{apiVersion: v1, kind: ConfigMap, x: {big}}}]}}}}\n")
    reply = session.post(url + WORKS, data=text, headers={"Content-Type": "application/yaml"})
    assert reply.status_code == 201, reply.text
    assert reply.json()["spec"]["workload"]["manifests"][0]["x"] == stored


def test_yaml_integer_beyond_any_float_is_a_bad_request(api: tuple[str, requests.Session]) -> None:
    url, session = api
    text = ("apiVersion: work.karmada.io/v1alpha1\nkind: Work\nmetadata: {name: huge}\n"
            f"spec: {{workload: {{manifests: [{{apiVersion: v1, kind: ConfigMap, x: {'9' * 400}}}]}}}}\n")
    reply = session.post(url + WORKS, data=text, headers={"Content-Type": "application/yaml"})
    assert reply.status_code == 400, reply.text
    assert "spec.workload.manifests[0].x" in reply.json()["message"]


@pytest.mark.parametrize(("raw", "accepted"), [
    ("9223372036854775807", True), ("-9223372036854775808", True), ("5.0", True), ("9007199254740991.0", True),
    ("9223372036854775808", False), ("18446744073709551615", False), ("-9223372036854775809", False),
    ("1e20", False), ("99999999999999999999", False), ("9007199254740993.0", False), ("0.5", False)])
def test_an_integer_field_takes_int64_values_only(api: tuple[str, requests.Session], raw: str, accepted: bool) -> None:
    """Was: 2**63 .. 2**64-1 and integral floats such as 1e20 were stored in integer fields (and then broke every
    client that decodes them as int64). As in Kubernetes: an int64, or a float no larger than 2**53 - 1."""
    url, session = api
    name = f"prio-{abs(hash(raw)) % 10**8}"
    body = (f'{{"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {{"name": '
            f'"{name}"}}, "spec": {{"resourceSelectors": [{{"apiVersion": "v1", "kind": "ConfigMap"}}], '
            f'"priority": {raw}}}}}')
    reply = session.post(url + KINDS["PropagationPolicy"]["coll"], data=body,
                         headers={"Content-Type": "application/json"})
    if accepted:
        assert reply.status_code == 201, reply.text
        session.delete(url + KINDS["PropagationPolicy"]["coll"] + "/" + name)
    else:
        assert reply.status_code == 422, reply.text
        assert reply.json()["details"]["causes"][0]["field"] == "spec.priority"
        assert "spec.priority in body must be of type integer" in reply.json()["message"]


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_watch_with_a_non_finite_timeout_is_a_bad_request(api: tuple[str, requests.Session], value: str) -> None:
    """Was: a 200 watch that never ended (nan) or ran for ever (inf); Kubernetes refuses a non-integer."""
    url, session = api
    reply = session.get(f"{url}{KINDS['ClusterTaintPolicy']['coll']}?watch=1&timeoutSeconds={value}", timeout=10)
    assert reply.status_code == 400, reply.text
    assert "timeoutSeconds" in reply.json()["message"]


def test_rule_messages_reach_the_client_in_karmadas_format(api: tuple[str, requests.Session]) -> None:
    """As in Karmada: one error is printed as it is, several as ``[e1, e2]``; each is a cause with its field path."""
    url, session = api
    base = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}]}}
    one = {**base, "metadata": {"name": "one-error"},
           "spec": {**base["spec"], "failover": {"application": {"decisionConditions": {}}}}}
    reply = create(api, one)
    assert reply.status_code == 422
    e4 = "spec.propagateDeps: Invalid value: false: application failover is set, propagateDeps must be true"
    assert reply.json()["message"] == f'PropagationPolicy.policy.karmada.io "one-error" is invalid: {e4}'
    two = {**base, "metadata": {"name": "two-errors"},
           "spec": {**base["spec"], "failover": {"application": {"decisionConditions": {"tolerationSeconds": -5}}}}}
    reply = create(api, two)
    assert reply.status_code == 422
    e5 = ("spec.failover.application.decisionConditions.tolerationSeconds: Invalid value: -5: must be greater than "
          "or equal to 0")
    status = reply.json()
    assert status["message"] == f'PropagationPolicy.policy.karmada.io "two-errors" is invalid: [{e4}, {e5}]'
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("spec.propagateDeps", "FieldValueInvalid"),
        ("spec.failover.application.decisionConditions.tolerationSeconds", "FieldValueInvalid")]
    assert session.get(url + KINDS["PropagationPolicy"]["coll"] + "/two-errors").status_code == 404


@pytest.mark.parametrize(("key", "value"), [("max", "1e999999999"), ("max", "1e99999999999999999999"),
                                            ("min", "9" * 5000), ("max", "lots")])
def test_cluster_resource_model_quantity_that_cannot_be_computed_is_refused(api: tuple[str, requests.Session],
                                                                            key: str, value: str) -> None:
    """Was: ``1e999999999`` kept the server busy for ever computing 10**999999999 (found by schemathesis), and a
    number of 5000 digits was a 500. Now each is a 422 at its field."""
    url, session = api
    first = {"name": "cpu", "min": "0", "max": value if key == "max" else "2"}
    second = {"name": "cpu", "min": value if key == "min" else "2", "max": "9223372036854775807"}
    cluster = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
               "metadata": {"name": f"q-{key}-{len(value)}-{value[-1]}"},
               "spec": {"syncMode": "Push", "apiEndpoint": "https://m.example:6443",
                        "resourceModels": [{"grade": 0, "ranges": [first]}, {"grade": 1, "ranges": [second]}]}}
    reply = session.post(url + "/apis/cluster.karmada.io/v1alpha1/clusters", json=cluster, timeout=10)
    assert_names_the_field(reply, f"spec.resourceModels[{0 if key == 'max' else 1}].ranges[0].{key}")


@pytest.mark.parametrize("finalizers", [-182087, "kubernetes", {"a": 1}, True])
def test_namespace_with_non_list_finalizers_is_refused_at_its_field(api: tuple[str, requests.Session],
                                                                   finalizers: Any) -> None:
    """Was a 500 (the namespace strategy iterated over an int; a string became a list of its characters),
    found by schemathesis."""
    url, session = api
    name = f"fin-{type(finalizers).__name__}"
    reply = session.post(url + "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": name},
                                                           "spec": {"finalizers": finalizers}})
    assert_names_the_field(reply, "spec.finalizers")


@pytest.mark.parametrize("field", ["zz\x16\x0bctl", "zz\x7fdel", "zzé\U000c56ba", "zz\\back"])
def test_unknown_field_with_control_characters_gets_a_reply_and_a_warning(api: tuple[str, requests.Session],
                                                                         field: str) -> None:
    """Was: the Warning header naming the unknown field held a control character, and the server dropped the
    connection without a reply (found by schemathesis)."""
    url, session = api
    name = f"ctl-{abs(hash(field)) % 10**6}"
    obj = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": name},
           "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}], field: 1}}
    reply = create(api, obj)
    assert reply.status_code == 201, reply.text
    assert field not in reply.json()["spec"]
    warning = reply.headers["Warning"]
    assert warning.isascii() and warning.isprintable()
    assert 'unknown field "spec.zz' in warning.replace("'", '"')
    patched = session.patch(url + KINDS["PropagationPolicy"]["coll"] + "/" + name, data=json.dumps({"spec": {field: 2}}),
                            headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    assert "Warning" in patched.headers
