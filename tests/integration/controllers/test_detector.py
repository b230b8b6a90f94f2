"""The resource detector on a real control plane: templates + policies -> claimed templates and bindings.

Runs an ApiServer (memory store, Karmada admission, policy finalizers on) and a ControllerManager with
the detector, the dependencies distributor and the scheduler; Clusters are created directly with a Ready
status (no member clusters are needed to decide placements).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.apiserver.inprocess import in_process_client
from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.client import ApiException, Client, Resource
from flotilla.kube.resources import CONFIGMAPS, DEPLOYMENTS, EVENTS, NAMESPACES
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.apiserver import Kubectl
from tests.support.controllers import get_or_none

PPS = Resource("policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy", True)
CPPS = Resource("policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", "ClusterPropagationPolicy", False)
OPS = Resource("policy.karmada.io", "v1alpha1", "overridepolicies", "OverridePolicy", True)
RBS = Resource("work.karmada.io", "v1alpha2", "resourcebindings", "ResourceBinding", True)
CRBS = Resource("work.karmada.io", "v1alpha2", "clusterresourcebindings", "ClusterResourceBinding", False)
CLUSTERS = Resource("cluster.karmada.io", "v1alpha1", "clusters", "Cluster", False)

NS = "default"
CONTROLLERS = ["detector", "dependencies-distributor", "scheduler"]
API_ENABLEMENTS = [
    {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
    {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"},
                                         {"name": "namespaces", "kind": "Namespace"},
                                         {"name": "secrets", "kind": "Secret"}]},
]


# ============================================================================================ helpers


async def eventually(check: Callable[[], Awaitable[Any]], within: float = 10.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy (exceptions count as not yet)."""
    deadline = time.monotonic() + within
    last: Any = None
    while True:
        try:
            result = await check()
        except (ApiException, KeyError, IndexError, TypeError) as e:
            result, last = None, e
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(0.02)


async def stays(check: Callable[[], Awaitable[bool]], for_: float = 0.5) -> None:
    """``check`` holds during the whole period."""
    deadline = time.monotonic() + for_
    while time.monotonic() < deadline:
        assert await check()
        await asyncio.sleep(0.05)


@dataclass
class Plane:
    server: ApiServer
    client: Client
    tmp: Path
    managers: list[ControllerManager] = field(default_factory=list)

    async def start(self, *, controllers: list[str] | None = None, gates: dict[str, bool] | None = None,
                    **options: Any) -> ControllerManager:
        opts = ControllerOptions(**options)
        opts.feature_gates.update(gates or {})
        manager = await ControllerManager(self.client, opts, controllers=controllers or CONTROLLERS).start()
        self.managers.append(manager)
        return manager

    async def get(self, res: Resource, name: str, namespace: str | None = NS) -> dict[str, Any]:
        return await self.client.get(res, name, namespace if res.namespaced else None)

    async def maybe(self, res: Resource, name: str, namespace: str | None = NS) -> dict[str, Any] | None:
        return await get_or_none(self.client, res, name, namespace if res.namespaced else None)

    async def binding(self, name: str, namespace: str = NS) -> dict[str, Any]:
        return await eventually(lambda: self.maybe(RBS, name, namespace), what=f"binding {name}")

    async def events(self, reason: str, name: str, namespace: str = NS) -> list[dict[str, Any]]:
        items = (await self.client.list(EVENTS, namespace))["items"]
        return [e for e in items if e.get("reason") == reason and e["involvedObject"].get("name") == name]

    async def cluster(self, name: str, labels: dict[str, str] | None = None, *,
                      taints: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
        body = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": {"syncMode": "Push", "apiEndpoint": f"https://{name}.example:6443", **spec}}
        if taints:
            body["spec"]["taints"] = taints
        await self.client.create(CLUSTERS, body)
        stamp = "2024-01-01T00:00:00Z"
        status = {
            "apiEnablements": API_ENABLEMENTS,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "cluster is healthy and ready",
                 "lastTransitionTime": stamp},
                {"type": "CompleteAPIEnablements", "status": "True", "reason": "Complete", "message": "",
                 "lastTransitionTime": stamp},
            ],
            "resourceSummary": {"allocatable": {"cpu": "100", "memory": "200Gi", "pods": "110"}},
        }
        return await self.client.patch(CLUSTERS, name, {"status": status}, subresource="status")


@pytest.fixture(name="plane")
async def plane_fixture(tmp_path: Path) -> AsyncIterator[Plane]:
    server = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                             policy_finalizers=True)).start()
    client = in_process_client(server.storage)
    p = Plane(server, client, tmp_path)
    try:
        yield p
    finally:
        for m in p.managers:
            await m.stop()
        await client.close()
        await server.stop()


def deployment(name: str = "nginx", *, replicas: int = 3, labels: dict[str, str] | None = None,
               namespace: str = NS, configmap: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "web", "image": "nginx:1.27",
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    if configmap:
        container["envFrom"] = [{"configMapRef": {"name": configmap}}]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}},
    }


def configmap(name: str = "cfg", namespace: str = NS) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"greeting": "hello"}}


def policy(name: str = "pp", *, selectors: list[dict[str, Any]] | None = None, placement: dict[str, Any] | None = None,
           namespace: str = NS, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resourceSelectors": selectors or [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
                 "placement": placement if placement is not None else {}, **spec},
    }


def cluster_policy(name: str = "cpp", *, selectors: list[dict[str, Any]], placement: dict[str, Any] | None = None,
                   **spec: Any) -> dict[str, Any]:
    body = policy(name, selectors=selectors, placement=placement, **spec)
    body["kind"] = "ClusterPropagationPolicy"
    del body["metadata"]["namespace"]
    return body


def names(binding: dict[str, Any]) -> dict[str, int]:
    return {c["name"]: c.get("replicas", 0) for c in binding["spec"].get("clusters") or []}


def claimed_by(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(L.PROPAGATION_POLICY_NAME_ANNOTATION)


# ============================================================================================ tests

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  namespace: default
  labels: {app: nginx}
spec:
  replicas: 3
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        resources: {requests: {cpu: 250m, memory: 128Mi}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
"""


@pytest.mark.kubectl
async def test_kubectl_apply_makes_a_claimed_template_and_a_scheduled_binding(plane: Plane) -> None:
    for name in ("member1", "member2", "member3"):
        await plane.cluster(name)
    await plane.start()
    assert plane.server.kubeconfig_path is not None
    kubectl = Kubectl(plane.server.kubeconfig_path, plane.tmp)
    manifest = plane.tmp / "nginx.yaml"
    manifest.write_text(MANIFEST)
    await asyncio.to_thread(kubectl.run, "apply", "-f", str(manifest))

    rb = await eventually(lambda: _scheduled(plane, "nginx-deployment"), what="scheduled binding")
    template = await plane.get(DEPLOYMENTS, "nginx")
    pp = await plane.get(PPS, "nginx-propagation")
    policy_id = pp["metadata"]["labels"][L.PROPAGATION_POLICY_PERMANENT_ID_LABEL]
    # the template is claimed
    assert template["metadata"]["labels"][L.PROPAGATION_POLICY_PERMANENT_ID_LABEL] == policy_id
    assert template["metadata"]["annotations"][L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION] == NS
    assert claimed_by(template) == "nginx-propagation"
    # the binding: owner, finalizer, claim, spec from the template, the interpreter and the policy
    md = rb["metadata"]
    assert md["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx",
                                      "uid": template["metadata"]["uid"], "controller": True,
                                      "blockOwnerDeletion": True}]
    assert L.BINDING_CONTROLLER_FINALIZER in md["finalizers"]
    assert md["labels"][L.PROPAGATION_POLICY_PERMANENT_ID_LABEL] == policy_id
    assert md["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL]
    assert claimed_by(rb) == "nginx-propagation"
    spec = rb["spec"]
    assert spec["resource"] == {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": NS, "name": "nginx",
                                "uid": template["metadata"]["uid"],
                                "resourceVersion": template["metadata"]["resourceVersion"]}
    assert spec["replicas"] == 3
    assert spec["replicaRequirements"]["resourceRequest"] == {"cpu": "250m", "memory": "128Mi"}
    assert spec["placement"] == pp["spec"]["placement"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["conflictResolution"] == "Abort"
    # Duplicated (no replicaScheduling): every matching cluster with all replicas
    assert names(rb) == {"member1": 3, "member2": 3}
    got = await kubectl_get(kubectl, "rb", "nginx-deployment", "{.spec.clusters[*].name}")
    assert got == "member1 member2"
    assert await eventually(lambda: plane.events("ApplyPolicySucceed", "nginx"), what="ApplyPolicySucceed event")
    assert await eventually(lambda: plane.events("ScheduleBindingSucceed", "nginx-deployment"),
                            what="ScheduleBindingSucceed event")


async def kubectl_get(kubectl: Kubectl, kind: str, name: str, jsonpath: str) -> str:
    proc = await asyncio.to_thread(kubectl.run, "get", kind, name, "-n", NS, "-o", f"jsonpath={jsonpath}")
    return proc.stdout


async def _scheduled(plane: Plane, name: str, namespace: str = NS) -> dict[str, Any] | None:
    rb = await plane.maybe(RBS, name, namespace)
    if rb is None:
        return None
    status = rb.get("status") or {}
    scheduled = [c for c in status.get("conditions") or [] if c["type"] == "Scheduled"]
    if not scheduled or status.get("schedulerObservedGeneration") != rb["metadata"]["generation"]:
        return None
    return rb


async def test_template_and_policy_changes_reach_the_binding(plane: Plane) -> None:
    for name in ("m1", "m2"):
        await plane.cluster(name)
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy())
    rb = await plane.binding("nginx-deployment")
    generation = rb["metadata"]["generation"]

    # the template scales: replicas and resourceVersion follow
    patched = await plane.client.patch(DEPLOYMENTS, "nginx", {"spec": {"replicas": 5}}, namespace=NS)

    async def replicas_followed() -> dict[str, Any] | None:
        b = await plane.get(RBS, "nginx-deployment")
        ok = b["spec"].get("replicas") == 5 and \
            b["spec"]["resource"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
        return b if ok else None

    rb = await eventually(replicas_followed, what="replicas 5 on the binding")
    assert rb["metadata"]["generation"] > generation

    # the policy's placement changes: the binding's placement follows, spec.clusters too
    await plane.client.patch(PPS, "pp", {"spec": {"placement": {"clusterAffinity": {"clusterNames": ["m2"]}}}},
                             namespace=NS)

    async def moved() -> bool:
        b = await plane.get(RBS, "nginx-deployment")
        return b["spec"]["placement"] == {"clusterAffinity": {"clusterNames": ["m2"]}} and names(b) == {"m2": 5}

    await eventually(moved, what="placement and clusters follow the policy")


async def test_a_template_status_write_does_not_move_the_binding_s_resource_version(plane: Plane) -> None:
    """A status write on the template (here right behind a label change, before the detector's reconcile of
    that change may run) leaves the binding naming the label change's version: Karmada's detector ignores
    status-only updates, and a newer version would bump the binding's generation for nothing."""
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy())
    await plane.binding("nginx-deployment")
    labelled = await plane.client.patch(DEPLOYMENTS, "nginx", {"metadata": {"labels": {"tier": "web"}}},
                                        namespace=NS)
    statused = await plane.client.patch(DEPLOYMENTS, "nginx", {"status": {"observedGeneration": 1}},
                                        namespace=NS, subresource="status")
    assert int(statused["metadata"]["resourceVersion"]) > int(labelled["metadata"]["resourceVersion"])

    async def names_the_label_change() -> bool:
        b = await plane.get(RBS, "nginx-deployment")
        return b["spec"]["resource"]["resourceVersion"] == labelled["metadata"]["resourceVersion"]

    await eventually(names_the_label_change, what="the binding names the label change's resourceVersion")
    await stays(names_the_label_change, for_=0.5)


async def test_the_echo_of_the_detector_s_own_claim_is_not_reconciled_again(plane: Plane) -> None:
    """The pass that claims a template builds the binding from the claimed version, so the informer's echo of
    the claim is not queued again (one pass per new template, not two); a user's change right after still is."""
    await plane.cluster("m1")
    manager = await plane.start()
    detector = next(c for c in manager.controllers if c.name == "detector")
    queued: list[str] = []
    enqueue = detector.enqueue

    def recording(key: str, after: float = 0.0, priority: int = 0) -> None:
        queued.append(key)
        enqueue(key, after, priority)

    detector.enqueue = recording  # type: ignore[method-assign]
    await plane.client.create(PPS, policy())
    # the policy's pass is over before the template comes (it would queue the template once more)
    await eventually(lambda: asyncio.sleep(0, queued and not detector.queue.keys()), what="the policy's pass")
    await plane.client.create(DEPLOYMENTS, deployment())
    rb = await plane.binding("nginx-deployment")
    template = await eventually(lambda: _claimed_template(plane), what="claimed template")
    assert rb["spec"]["resource"]["resourceVersion"] == template["metadata"]["resourceVersion"]
    await asyncio.sleep(0.3)  # the echo has long been delivered
    key = "t|apps/v1|Deployment|default|nginx"
    assert queued.count(key) == 1

    await plane.client.patch(DEPLOYMENTS, "nginx", {"metadata": {"labels": {"tier": "web"}}}, namespace=NS)
    await eventually(lambda: asyncio.sleep(0, queued.count(key) == 2), what="the user's change queued")


async def _claimed_template(plane: Plane) -> dict[str, Any] | None:
    template = await plane.get(DEPLOYMENTS, "nginx")
    return template if claimed_by(template) else None


async def test_binding_is_garbage_collected_with_its_template(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy())
    await plane.binding("nginx-deployment")
    await plane.client.delete(DEPLOYMENTS, "nginx", NS)

    # the garbage collector deletes the binding; its binding-controller finalizer holds it until the binding
    # controller (not running here) has removed the Works
    async def terminating() -> dict[str, Any] | None:
        b = await plane.maybe(RBS, "nginx-deployment")
        return b if b is None or b["metadata"].get("deletionTimestamp") else None

    rb = await eventually(terminating, what="binding deleted with its template")
    if rb is not None:
        kept = [f for f in rb["metadata"]["finalizers"] if f != L.BINDING_CONTROLLER_FINALIZER]
        await plane.client.patch(RBS, "nginx-deployment", {"metadata": {"finalizers": kept or None}}, namespace=NS)
    await eventually(lambda: _gone(plane, RBS, "nginx-deployment"), what="binding gone")


async def _gone(plane: Plane, res: Resource, name: str, namespace: str = NS) -> bool:
    return await plane.maybe(res, name, namespace) is None


async def test_recreated_template_gets_a_fresh_binding(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(PPS, policy())
    await plane.client.create(DEPLOYMENTS, deployment())
    old = await plane.binding("nginx-deployment")
    await plane.client.delete(DEPLOYMENTS, "nginx", NS)
    await eventually(lambda: _terminating_or_gone(plane, "nginx-deployment"), what="old binding terminating")
    new_template = await plane.client.create(DEPLOYMENTS, deployment())
    # the old binding (owned by the old template) blocks until it is gone
    await plane.client.patch(RBS, "nginx-deployment", {"metadata": {"finalizers": None}}, namespace=NS)

    async def rebound() -> dict[str, Any] | None:
        b = await plane.maybe(RBS, "nginx-deployment")
        if b is None or b["metadata"]["uid"] == old["metadata"]["uid"]:
            return None
        return b

    rb = await eventually(rebound, what="a new binding for the new template")
    assert rb["metadata"]["ownerReferences"][0]["uid"] == new_template["metadata"]["uid"]


async def _terminating_or_gone(plane: Plane, name: str) -> bool:
    b = await plane.maybe(RBS, name)
    return b is None or bool(b["metadata"].get("deletionTimestamp"))


async def test_higher_priority_policy_does_not_take_over_without_preemption(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy("low", priority=1))
    rb = await plane.binding("nginx-deployment")
    assert claimed_by(rb) == "low"
    # preemption: Always is inert while the PolicyPreemption gate is off (Karmada's default)
    await plane.client.create(PPS, policy("high", priority=10, preemption="Always"))

    async def still_low() -> bool:
        t, b = await plane.get(DEPLOYMENTS, "nginx"), await plane.get(RBS, "nginx-deployment")
        return claimed_by(t) == "low" and claimed_by(b) == "low"

    await stays(still_low)


async def test_higher_priority_policy_preempts_with_the_gate(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.cluster("m2")
    await plane.start(gates={"PolicyPreemption": True})
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy("low", priority=1, placement={"clusterAffinity": {"clusterNames": ["m1"]}}))
    rb = await plane.binding("nginx-deployment")
    assert claimed_by(rb) == "low"
    # same priority does not preempt; without preemption: Always neither
    await plane.client.create(PPS, policy("peer", priority=1, preemption="Always"))
    await plane.client.create(PPS, policy("quiet", priority=10))
    await stays(lambda: _claimed(plane, "low"))
    high = await plane.client.create(PPS, policy("high", priority=10, preemption="Always",
                                                 placement={"clusterAffinity": {"clusterNames": ["m2"]}}))
    high_id = high["metadata"]["labels"][L.PROPAGATION_POLICY_PERMANENT_ID_LABEL]

    async def taken() -> dict[str, Any] | None:
        b = await plane.get(RBS, "nginx-deployment")
        ok = (claimed_by(b) == "high" and b["metadata"]["labels"][L.PROPAGATION_POLICY_PERMANENT_ID_LABEL] == high_id
              and names(b) == {"m2": 3})
        return b if ok else None

    await eventually(taken, what="the high priority policy takes the template over")
    assert await eventually(lambda: plane.events("PreemptPolicySucceed", "nginx"), what="PreemptPolicySucceed")


async def _claimed(plane: Plane, name: str) -> bool:
    t, b = await plane.get(DEPLOYMENTS, "nginx"), await plane.get(RBS, "nginx-deployment")
    return claimed_by(t) == name and claimed_by(b) == name


async def test_unclaimed_template_picks_the_best_policy(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    by_label = [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "nginx"}}}]
    await plane.client.create(PPS, policy("by-label", selectors=by_label, priority=1))
    await plane.client.create(PPS, policy("by-name", priority=1))
    await plane.client.create(PPS, policy("all", selectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}],
                                          priority=0))
    await plane.client.create(DEPLOYMENTS, deployment())
    rb = await plane.binding("nginx-deployment")
    assert claimed_by(rb) == "by-name"  # same priority: a name selector beats a label selector


async def test_policy_deletion_releases_templates_and_keeps_bindings(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    pp = await plane.client.create(PPS, policy())
    assert L.PROPAGATION_POLICY_CONTROLLER_FINALIZER in pp["metadata"]["finalizers"]
    rb = await eventually(lambda: _scheduled(plane, "nginx-deployment"), what="scheduled binding")
    await plane.client.delete(PPS, "pp", NS)

    # the detector releases template and binding, then removes the policy's finalizer
    await eventually(lambda: _gone(plane, PPS, "pp"), what="policy gone (finalizer removed)")

    async def released() -> bool:
        t, b = await plane.get(DEPLOYMENTS, "nginx"), await plane.get(RBS, "nginx-deployment")
        return all(L.PROPAGATION_POLICY_PERMANENT_ID_LABEL not in (o["metadata"].get("labels") or {})
                   and claimed_by(o) is None for o in (t, b))

    await eventually(released, what="claims removed")
    kept = await plane.get(RBS, "nginx-deployment")
    assert kept["metadata"]["uid"] == rb["metadata"]["uid"]
    assert names(kept) == {"m1": 3}  # binding and its scheduling result stay

    # another policy claims the template and reuses the binding
    await plane.client.create(PPS, policy("successor"))

    async def reclaimed() -> dict[str, Any] | None:
        b = await plane.get(RBS, "nginx-deployment")
        return b if claimed_by(b) == "successor" else None

    again = await eventually(reclaimed, what="binding claimed by the successor")
    assert again["metadata"]["uid"] == rb["metadata"]["uid"]
    assert names(again) == {"m1": 3}


async def test_policy_no_longer_selecting_a_template_releases_it(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    web = [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "nginx"}}}]
    await plane.client.create(PPS, policy("web", selectors=web))
    await plane.binding("nginx-deployment")
    other = [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "other"}}}]
    await plane.client.patch(PPS, "web", {"spec": {"resourceSelectors": other}}, namespace=NS)

    async def released() -> bool:
        t, b = await plane.get(DEPLOYMENTS, "nginx"), await plane.get(RBS, "nginx-deployment")
        return claimed_by(t) is None and claimed_by(b) is None

    await eventually(released, what="template and binding released")


async def test_cluster_policy_claims_namespaces_and_unclaimed_namespaced_templates(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.cluster("m2")
    await plane.start()
    await plane.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    await plane.client.create(CPPS, cluster_policy(selectors=[
        {"apiVersion": "v1", "kind": "Namespace", "name": "team-a"},
        {"apiVersion": "apps/v1", "kind": "Deployment"},
    ]))
    await plane.client.create(DEPLOYMENTS, deployment("api"))

    crb = await eventually(lambda: plane.maybe(CRBS, "team-a-namespace", None), what="ClusterResourceBinding")
    assert crb["metadata"]["annotations"][L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION] == "cpp"
    assert L.CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER in crb["metadata"]["finalizers"]
    assert crb["spec"]["resource"]["kind"] == "Namespace" and "namespace" not in crb["spec"]["resource"]

    async def scheduled_crb() -> dict[str, Any] | None:
        b = await plane.get(CRBS, "team-a-namespace", None)
        return b if names(b) == {"m1": 0, "m2": 0} else None  # not a workload: every cluster, 0 replicas

    await eventually(scheduled_crb, what="namespace scheduled to every cluster")

    rb = await plane.binding("api-deployment")
    assert rb["metadata"]["annotations"][L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION] == "cpp"
    assert L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL in rb["metadata"]["labels"]

    # a PropagationPolicy of the namespace beats the cluster policy for templates claimed from now on
    await plane.client.create(PPS, policy("local", selectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}]))
    await plane.client.create(DEPLOYMENTS, deployment("web"))
    rb = await plane.binding("web-deployment")
    await eventually(lambda: _claim_is(plane, "web-deployment", "local"), what="PP claims the new template")
    # the older template stays with the cluster policy (no re-evaluation without preemption)
    rb = await plane.get(RBS, "api-deployment")
    assert rb["metadata"]["annotations"][L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION] == "cpp"


async def _claim_is(plane: Plane, binding: str, name: str) -> bool:
    return claimed_by(await plane.get(RBS, binding)) == name


async def test_skipped_namespaces_are_not_propagated(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(CPPS, cluster_policy(selectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}]))
    await plane.client.create(DEPLOYMENTS, deployment("system-thing", namespace="kube-system"))
    await plane.client.create(DEPLOYMENTS, deployment("app"))
    await plane.binding("app-deployment")
    await stays(lambda: _gone(plane, RBS, "system-thing-deployment", "kube-system"), 0.3)
    template = await plane.get(DEPLOYMENTS, "system-thing", "kube-system")
    assert L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL not in (template["metadata"].get("labels") or {})


async def test_lazy_policy_changes_wait_for_a_template_change(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.cluster("m2")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy(activationPreference="Lazy",
                                          placement={"clusterAffinity": {"clusterNames": ["m1"]}}))
    rb = await plane.binding("nginx-deployment")
    assert rb["spec"]["placement"] == {"clusterAffinity": {"clusterNames": ["m1"]}}
    await plane.client.patch(PPS, "pp", {"spec": {"placement": {"clusterAffinity": {"clusterNames": ["m2"]}}}},
                             namespace=NS)

    async def unchanged() -> bool:
        b = await plane.get(RBS, "nginx-deployment")
        return b["spec"]["placement"] == {"clusterAffinity": {"clusterNames": ["m1"]}}

    await stays(unchanged)
    # a user's change to the template publishes the new placement
    await plane.client.patch(DEPLOYMENTS, "nginx", {"metadata": {"labels": {"tier": "web"}}}, namespace=NS)

    async def published() -> bool:
        b = await plane.get(RBS, "nginx-deployment")
        return b["spec"]["placement"] == {"clusterAffinity": {"clusterNames": ["m2"]}}

    await eventually(published, what="placement published by the template change")


async def test_policy_waits_for_its_dependent_overrides(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy(dependentOverrides=["nginx-override"]))
    await stays(lambda: _gone(plane, RBS, "nginx-deployment"), 0.3)
    await plane.client.create(OPS, {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "nginx-override", "namespace": NS},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
                 "overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add",
                                                                         "value": {"a": "b"}}]}}]},
    })
    await plane.binding("nginx-deployment")


async def test_template_created_before_the_detector_starts(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy())
    await plane.client.create(CONFIGMAPS, configmap())
    await plane.start()
    rb = await eventually(lambda: _scheduled(plane, "nginx-deployment"), what="scheduled binding")
    assert claimed_by(rb) == "pp"
    # a restarted detector finds the same state: the binding's spec is not rewritten
    first = plane.managers.pop()
    await first.stop()
    await plane.start()
    await asyncio.sleep(0.3)
    again = await plane.get(RBS, "nginx-deployment")
    assert again["spec"] == rb["spec"]
    assert again["metadata"]["generation"] == rb["metadata"]["generation"]


async def test_policy_deleted_without_a_finalizer_releases_its_templates(tmp_path: Path) -> None:
    server = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                             policy_finalizers=False)).start()
    client = in_process_client(server.storage)
    p = Plane(server, client, tmp_path)
    try:
        await p.cluster("m1")
        await p.start()
        await client.create(DEPLOYMENTS, deployment())
        created = await client.create(PPS, policy())
        assert not created["metadata"].get("finalizers")
        await p.binding("nginx-deployment")
        await client.delete(PPS, "pp", NS)

        async def released() -> bool:
            t, b = await p.get(DEPLOYMENTS, "nginx"), await p.get(RBS, "nginx-deployment")
            return claimed_by(t) is None and claimed_by(b) is None

        await eventually(released, what="claims removed after the policy is gone")
    finally:
        for m in p.managers:
            await m.stop()
        await client.close()
        await server.stop()
