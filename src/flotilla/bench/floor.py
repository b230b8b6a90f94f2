"""The forward path's floor, for ``flotilla bench propagate --floor``: what no controller logic can go below.

Before a template's object exists in a member, Karmada's design needs these writes and requests, in order: the
template's create (the user's), the detector's claim on the template (a patch), the ResourceBinding's create, the
scheduler's ``spec.clusters`` (a patch), one Work per member and the member object's create in each member.
:class:`ForwardFloor` makes exactly those, with bodies of the real ones' shape and size and no decisions at all:
no policy matching, no scheduling, no interpretation, no overrides, no Events, no status, no retries beyond one
namespace create. It keeps the informers the controllers keep on the way (the templates' kinds, bindings, Works,
Clusters, and each member's managed objects), so their watch fan-out is paid too.

The control plane runs it in place of the propagation controllers (``flotilla bench control-plane --floor`` runs
only the cluster and cluster-status controllers beside it). The driver measures it exactly as the real run: the
template-to-member-object latency of the same templates on the same machine. The real pipeline's p99 cannot be
lower than this one's, so the pair tells how much of a propagation's time is the controllers' logic and how much
is the writes and their fan-out that any design on this API server pays.

Only the ``duplicated`` placement: every template to every member (the Clusters the floor's informer holds).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Final

from flotilla.api import labels as L
from flotilla.api import resources as R
from flotilla.bench.propagate import DUPLICATED_POLICY as POLICY_NAME
from flotilla.bench.workloads import KINDS, NAMESPACE, RUN_LABEL
from flotilla.cli.control_plane import create_unless_exists
from flotilla.client import Client, Informer, Resource
from flotilla.cluster.join import namespace_object
from flotilla.kube.resources import NAMESPACES
from flotilla.policy.naming import generate_binding_name, generate_execution_space_name, generate_work_name
from flotilla.runtime.member_informers import MANAGED_SELECTOR
from flotilla.signals import cancel_all

__all__ = ["FLOOR_WORKERS", "ForwardFloor", "binding_for", "claim_patch", "manifest_for", "work_for"]

log = logging.getLogger(__name__)

#: templates carried at once (each by one task, from its claim to its member objects)
FLOOR_WORKERS: Final = 64
#: the templates' kinds of ``flotilla bench propagate``
TEMPLATE_RESOURCES: Final[tuple[Resource, ...]] = (KINDS["deployment"].resource, KINDS["flink"].resource)
_SYSTEM_FIELDS: Final = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                         "ownerReferences", "finalizers", "deletionTimestamp", "deletionGracePeriodSeconds")


# ============================================================================================ the bodies


def claim_patch(policy_id: str) -> dict[str, Any]:
    """The detector's claim: the policy's permanent id as a label, its name and namespace as annotations."""
    return {"metadata": {
        "labels": {L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: policy_id},
        "annotations": {L.PROPAGATION_POLICY_NAME_ANNOTATION: POLICY_NAME,
                        L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION: NAMESPACE},
    }}


def binding_for(template: dict[str, Any], policy_id: str, clusters: list[str]) -> dict[str, Any]:
    """A ResourceBinding for ``template`` (its claimed version) as the detector creates it: owned by the
    template, with the policy's placement and no ``spec.clusters`` yet."""
    meta = template["metadata"]
    placement = {"clusterAffinity": {"clusterNames": clusters},
                 "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    return {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {
            "name": generate_binding_name(template["kind"], meta["name"]), "namespace": meta["namespace"],
            "labels": {L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: policy_id,
                       L.RESOURCE_BINDING_PERMANENT_ID_LABEL: str(uuid.uuid4())},
            "annotations": {L.PROPAGATION_POLICY_NAME_ANNOTATION: POLICY_NAME,
                            L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION: NAMESPACE},
            "finalizers": [L.BINDING_CONTROLLER_FINALIZER],
            "ownerReferences": [{"apiVersion": template["apiVersion"], "kind": template["kind"], "name": meta["name"],
                                 "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "resource": {"apiVersion": template["apiVersion"], "kind": template["kind"], "name": meta["name"],
                         "namespace": meta["namespace"], "uid": meta["uid"],
                         "resourceVersion": meta["resourceVersion"]},
            "replicas": int((template.get("spec") or {}).get("replicas") or 1),
            "placement": placement, "conflictResolution": "Abort", "schedulerName": "default-scheduler",
        },
    }


def manifest_for(template: dict[str, Any], binding: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The member object: the template without its status and system fields, marked as Karmada marks it."""
    meta = template["metadata"]
    bmeta = binding["metadata"]
    work_name = generate_work_name(template["kind"], meta["name"], meta["namespace"])
    labels = {**(meta.get("labels") or {}), L.MANAGED_LABEL: L.MANAGED_LABEL_VALUE,
              L.RESOURCE_BINDING_PERMANENT_ID_LABEL: bmeta["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL]}
    annotations = {**(meta.get("annotations") or {}),
                   L.RESOURCE_BINDING_NAME_ANNOTATION: bmeta["name"],
                   L.RESOURCE_BINDING_NAMESPACE_ANNOTATION: bmeta["namespace"],
                   L.WORK_NAME_ANNOTATION: work_name,
                   L.WORK_NAMESPACE_ANNOTATION: generate_execution_space_name(cluster)}
    out_meta = {k: v for k, v in meta.items() if k not in _SYSTEM_FIELDS}
    out_meta.update(labels=labels, annotations=annotations)
    return {**{k: v for k, v in template.items() if k not in ("metadata", "status")}, "metadata": out_meta}


def work_for(manifest: dict[str, Any], binding: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The Work that carries ``manifest`` to ``cluster``."""
    bmeta = binding["metadata"]
    return {
        "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
        "metadata": {
            "name": manifest["metadata"]["annotations"][L.WORK_NAME_ANNOTATION],
            "namespace": generate_execution_space_name(cluster),
            "labels": {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: bmeta["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL],
                       L.WORK_PERMANENT_ID_LABEL: str(uuid.uuid4())},
            "annotations": {L.RESOURCE_BINDING_NAME_ANNOTATION: bmeta["name"],
                            L.RESOURCE_BINDING_NAMESPACE_ANNOTATION: bmeta["namespace"]},
            "finalizers": [L.EXECUTION_CONTROLLER_FINALIZER],
        },
        "spec": {"workload": {"manifests": [manifest]}},
    }


# ============================================================================================ the runner


class ForwardFloor:
    """Carries every new template of the benchmark to every member with only the writes the design needs.

    ``members`` is the controller-manager's :class:`~flotilla.runtime.members.MemberClients`, so the member
    requests go through the clients the execution controller uses. ``registry`` gets
    ``flotilla_bench_floor_templates_total{outcome}`` (carried, failed) and ``flotilla_bench_floor_unsynced``
    (informers not synced yet: the driver starts once it is 0).
    """

    def __init__(self, client: Client, members: Any, registry: Any, workers: int = FLOOR_WORKERS) -> None:
        self.client = client
        self.members = members
        self.workers = workers
        self.policy_id = str(uuid.uuid4())
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._clusters = Informer(client, R.CLUSTERS)
        self._informers = [self._clusters, Informer(client, R.RESOURCE_BINDINGS), Informer(client, R.WORKS)]
        for res in TEMPLATE_RESOURCES:
            inf = Informer(client, res, NAMESPACE, label_selector=RUN_LABEL, backoff=(0.2, 1.0))
            inf.add_handler(self._on_template)
            self._informers.append(inf)
        self._member_informers: dict[tuple[str, str], Informer] = {}
        self._member_ready: dict[str, asyncio.Task[Client]] = {}
        self._outcomes = registry.counter("flotilla_bench_floor_templates_total",
                                          "Templates the forward-path floor handled", ["outcome"])
        unsynced = registry.gauge("flotilla_bench_floor_unsynced", "The floor's control-plane informers not synced")
        registry.add_collector(lambda: unsynced.set(float(sum(not i.has_synced for i in self._informers))))

    def start(self) -> None:
        for inf in self._informers:
            inf.start()
        self._tasks = [asyncio.get_running_loop().create_task(self._worker()) for _ in range(self.workers)]

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        await asyncio.gather(*(inf.stop() for inf in [*self._informers, *self._member_informers.values()]),
                             return_exceptions=True)
        for task in self._member_ready.values():
            task.cancel()

    def _on_template(self, obj: dict[str, Any]) -> None:
        if L.PROPAGATION_POLICY_PERMANENT_ID_LABEL not in ((obj.get("metadata") or {}).get("labels") or {}):
            self._queue.put_nowait(obj)

    async def _worker(self) -> None:
        while True:
            template = await self._queue.get()
            try:
                await self.carry(template)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._outcomes.labels("failed").inc()
                log.exception("floor: %s/%s not carried", template.get("kind"),
                              (template.get("metadata") or {}).get("name"))
            else:
                self._outcomes.labels("carried").inc()

    async def carry(self, template: dict[str, Any]) -> None:
        """The claim, the binding, ``spec.clusters``, the Works and the member objects of one template."""
        meta = template["metadata"]
        res = next(r for r in TEMPLATE_RESOURCES if r.kind == template.get("kind"))
        clusters = sorted(str(c["metadata"]["name"]) for c in self._clusters.store.list())
        claimed = await self.client.patch(res, meta["name"], claim_patch(self.policy_id), namespace=meta["namespace"])
        binding = binding_for(claimed, self.policy_id, clusters)
        await self.client.create(R.RESOURCE_BINDINGS, binding)
        await self.client.patch(R.RESOURCE_BINDINGS, binding["metadata"]["name"],
                                {"spec": {"clusters": [{"name": c, "replicas": binding["spec"]["replicas"]}
                                                       for c in clusters]}},
                                namespace=binding["metadata"]["namespace"])
        manifests = {c: manifest_for(claimed, binding, c) for c in clusters}
        for c in clusters:
            await self.client.create(R.WORKS, work_for(manifests[c], binding, c))
        await asyncio.gather(*(self._apply(c, res, manifests[c]) for c in clusters))

    async def _apply(self, cluster: str, res: Resource, manifest: dict[str, Any]) -> None:
        member = await self._member(cluster)
        key = (cluster, res.plural)
        if key not in self._member_informers:
            inf = self._member_informers[key] = Informer(member, res, label_selector=MANAGED_SELECTOR,
                                                         backoff=(0.2, 1.0))
            inf.start()
        await member.create(res, manifest, manifest["metadata"]["namespace"])

    async def _member(self, cluster: str) -> Client:
        """The member's client; the first use creates the benchmark's namespace there (once per member)."""
        ready = self._member_ready.get(cluster)
        if ready is None:
            ready = self._member_ready[cluster] = asyncio.get_running_loop().create_task(self._first_use(cluster))
        return await asyncio.shield(ready)

    async def _first_use(self, cluster: str) -> Client:
        obj = self._clusters.store.get_by_name(cluster)
        if obj is None:
            raise RuntimeError(f"floor: no Cluster {cluster} in the informer")
        member: Client = await self.members.client_for(obj)
        await create_unless_exists(member, NAMESPACES, namespace_object(NAMESPACE))
        return member
