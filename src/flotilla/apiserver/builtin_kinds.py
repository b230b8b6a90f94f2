"""The resource types the API server serves without any CustomResourceDefinition.

Two things live here:

* ``BUILTIN_TYPES``: one :class:`ResourceType` per served kind (names, scope, subresources, printer
  columns expressed as JSONPath, OpenAPI schema).
* ``CUSTOM_TABLES``: for kinds whose ``kubectl get`` columns cannot be expressed as plain JSONPath
  (``READY 2/3``, pod status, service ports...), Python functions that compute the cells the way
  kubectl's server-side printers do. A table builder should prefer ``CUSTOM_TABLES[(group, kind)]``
  when present and fall back to ``ResourceType.printer_columns`` otherwise.

Cell functions take ``(obj, now=None)`` and return one cell per column, in column order, including the
``priority > 0`` (``-o wide``) columns; age cells are already formatted with :func:`human_age`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flotilla.apiserver.resource_types import PrinterColumn, ResourceType
from flotilla.apiserver.schemas import schema_for
from flotilla.kube.times import format_time, human_age, human_duration, parse_time

__all__ = [
    "BUILTIN_TYPES",
    "CUSTOM_TABLES",
    "CellFunction",
    "CustomTable",
    "TableColumn",
    "builtin_type",
    "custom_cells",
    "custom_columns",
    "format_label_selector",
    "format_labels",
    "human_age",
    "human_duration",
]

# --------------------------------------------------------------------------------------------------
# Printer columns (JSONPath, CRD additionalPrinterColumns semantics)

_AGE_DESCRIPTION = "Time since the object was created."
_AGE_COLUMN = PrinterColumn("AGE", "date", ".metadata.creationTimestamp", _AGE_DESCRIPTION)


def _col(name: str, json_path: str, description: str, type_: str = "string") -> PrinterColumn:
    return PrinterColumn(name, type_, json_path, description)


def _wide(name: str, json_path: str, description: str) -> PrinterColumn:
    """A column shown only with ``-o wide`` (priority 1)."""
    return PrinterColumn(name, "string", json_path, description, 1)


def _count(name: str, json_path: str, description: str) -> PrinterColumn:
    return PrinterColumn(name, "integer", json_path, description)


def _condition_col(name: str, condition: str) -> PrinterColumn:
    return _col(name, f'.status.conditions[?(@.type=="{condition}")].status', f"Status of the {condition} condition.")


_CONTAINERS_IMAGES = (
    _wide("CONTAINERS", ".spec.template.spec.containers[*].name", "Container names of the pod template."),
    _wide("IMAGES", ".spec.template.spec.containers[*].image", "Container images of the pod template."),
)
_POLICY_COLUMNS = (
    _col("CONFLICT-RESOLUTION", ".spec.conflictResolution", "Abort or Overwrite."),
    _col("PRIORITY", ".spec.priority", "Priority of the policy."),
    _AGE_COLUMN,
)
_BINDING_COLUMNS = (_condition_col("SCHEDULED", "Scheduled"), _condition_col("FULLYAPPLIED", "FullyApplied"), _AGE_COLUMN)


# --------------------------------------------------------------------------------------------------
# The served types

_ALL = ("all",)
_KARMADA = ("karmada-io",)


def _served(group_version: str, kind: str, plural: str, *columns: PrinterColumn, **options: Any) -> ResourceType:
    """A served kind with its printer columns and OpenAPI schema; ``options`` set further ResourceType fields
    (namespaced unless they say otherwise)."""
    group, _, version = group_version.rpartition("/")
    options.setdefault("namespaced", True)
    return ResourceType(group=group, version=version, kind=kind, plural=plural, printer_columns=columns,
                        schema=schema_for(group, version, kind), **options)


def _core(kind: str, plural: str, *columns: PrinterColumn, **options: Any) -> ResourceType:
    """A core/v1 kind; none but Pod counts generations."""
    options.setdefault("generation", "")
    return _served("v1", kind, plural, *columns, **options)


def _workload(group_version: str, kind: str, plural: str, *columns: PrinterColumn, **options: Any) -> ResourceType:
    """A kind running a pod template: in ``all``, with status, and AGE, CONTAINERS and IMAGES last; a kind with
    ``has_scale`` scales by ``.spec.selector``."""
    if options.get("has_scale"):
        options["scale_selector_path"] = ".spec.selector"
    return _served(group_version, kind, plural, *columns, _AGE_COLUMN, *_CONTAINERS_IMAGES, categories=_ALL,
                   has_status=True, **options)


def _karmada(group_version: str, kind: str, plural: str, *columns: PrinterColumn, **options: Any) -> ResourceType:
    """A Karmada kind: a custom resource in Karmada, so strictly checked against its schema, with generations
    counted on any change but metadata, merge patches only, and in the ``karmada-io`` category unless
    ``options`` say otherwise."""
    options.setdefault("categories", _KARMADA)
    return _served(group_version, kind, plural, *columns, generation="non-metadata", builtin_smp=False,
                   strict_schema=True, **options)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    # ---- core/v1 -------------------------------------------------------------------------------
    _core("Namespace", "namespaces",
          _col("STATUS", ".status.phase", "Phase of the namespace: Active or Terminating."), _AGE_COLUMN,
          namespaced=False, short_names=("ns",), has_status=True, selectable_fields=("status.phase",)),
    _core("ConfigMap", "configmaps", _AGE_COLUMN, short_names=("cm",)),
    _core("Secret", "secrets", _col("TYPE", ".type", "Type of the secret."), _AGE_COLUMN, selectable_fields=("type",)),
    _core(
        "Service", "services",
        _col("TYPE", ".spec.type", "How the service is exposed."),
        _col("CLUSTER-IP", ".spec.clusterIP", "Virtual IP of the service."),
        _col("EXTERNAL-IP", ".spec.externalIPs[*]", "External IPs of the service."),
        _col("PORT(S)", ".spec.ports[*].port", "Ports exposed by the service."),
        _AGE_COLUMN,
        _wide("SELECTOR", ".spec.selector", "Labels of the pods behind the service."),
        return_deleted_object=True, short_names=("svc",), categories=_ALL, has_status=True,
    ),
    _core("ServiceAccount", "serviceaccounts", _AGE_COLUMN, return_deleted_object=True, short_names=("sa",)),
    _core(
        "PersistentVolumeClaim", "persistentvolumeclaims",
        _col("STATUS", ".status.phase", "Phase of the claim."),
        _col("VOLUME", ".spec.volumeName", "Volume the claim is bound to."),
        _col("CAPACITY", ".status.capacity.storage", "Capacity of the bound volume."),
        _col("ACCESS MODES", ".status.accessModes[*]", "Access modes of the bound volume."),
        _col("STORAGECLASS", ".spec.storageClassName", "Storage class of the claim."),
        _AGE_COLUMN,
        _wide("VOLUMEMODE", ".spec.volumeMode", "Filesystem or Block."),
        return_deleted_object=True, short_names=("pvc",), has_status=True,
    ),
    _core(
        "Event", "events",
        _col("LAST SEEN", ".lastTimestamp", "When the event last occurred.", "date"),
        _col("TYPE", ".type", "Normal or Warning."),
        _col("REASON", ".reason", "Short reason of the event."),
        _col("OBJECT", ".involvedObject.name", "Object the event is about."),
        _col("MESSAGE", ".message", "Description of the event."),
        short_names=("ev",),
        selectable_fields=(
            *(f"involvedObject.{field}"
              for field in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")),
            "reason", "reportingComponent", "source", "type",
        ),
    ),
    _core(
        "Pod", "pods",
        _col("STATUS", ".status.phase", "Phase of the pod."),
        _col("RESTARTS", ".status.containerStatuses[*].restartCount", "Container restart counts."),
        _AGE_COLUMN,
        _wide("IP", ".status.podIP", "IP of the pod."),
        _wide("NODE", ".spec.nodeName", "Node the pod runs on."),
        generation="spec", return_deleted_object=True, short_names=("po",), categories=_ALL, has_status=True,
        selectable_fields=("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                           "status.phase", "status.podIP", "status.nominatedNodeName"),
    ),
    _core(
        "Node", "nodes",
        _condition_col("STATUS", "Ready"),
        _col("ROLES", r".metadata.labels.kubernetes\.io/role", "Role of the node (kubernetes.io/role)."),
        _AGE_COLUMN,
        _col("VERSION", ".status.nodeInfo.kubeletVersion", "Kubelet version of the node."),
        _wide("INTERNAL-IP", '.status.addresses[?(@.type=="InternalIP")].address', "Internal IP of the node."),
        _wide("EXTERNAL-IP", '.status.addresses[?(@.type=="ExternalIP")].address', "External IP of the node."),
        _wide("OS-IMAGE", ".status.nodeInfo.osImage", "Operating system image of the node."),
        _wide("KERNEL-VERSION", ".status.nodeInfo.kernelVersion", "Kernel version of the node."),
        _wide("CONTAINER-RUNTIME", ".status.nodeInfo.containerRuntimeVersion", "Container runtime of the node."),
        namespaced=False, short_names=("no",), has_status=True, selectable_fields=("spec.unschedulable",),
    ),
    # ---- apps/v1 and batch/v1 ------------------------------------------------------------------
    _workload(
        "apps/v1", "Deployment", "deployments",
        _count("READY", ".status.readyReplicas", "Ready pods."),
        _count("UP-TO-DATE", ".status.updatedReplicas", "Pods running the current template."),
        _count("AVAILABLE", ".status.availableReplicas", "Available pods."),
        short_names=("deploy",), has_scale=True,
    ),
    _workload("apps/v1", "StatefulSet", "statefulsets", _count("READY", ".status.readyReplicas", "Ready pods."),
              short_names=("sts",), has_scale=True),
    _workload(
        "apps/v1", "DaemonSet", "daemonsets",
        _count("DESIRED", ".status.desiredNumberScheduled", "Nodes that should run the pod."),
        _count("CURRENT", ".status.currentNumberScheduled", "Nodes running the pod."),
        _count("READY", ".status.numberReady", "Nodes whose pod is ready."),
        _count("UP-TO-DATE", ".status.updatedNumberScheduled", "Nodes running the current template."),
        _count("AVAILABLE", ".status.numberAvailable", "Nodes whose pod is available."),
        _col("NODE SELECTOR", ".spec.template.spec.nodeSelector", "Node labels the pods require."),
        short_names=("ds",),
    ),
    _workload(
        "apps/v1", "ReplicaSet", "replicasets",
        _count("DESIRED", ".spec.replicas", "Desired pods."),
        _count("CURRENT", ".status.replicas", "Existing pods."),
        _count("READY", ".status.readyReplicas", "Ready pods."),
        short_names=("rs",), has_scale=True,
    ),
    _workload("batch/v1", "Job", "jobs", _count("COMPLETIONS", ".status.succeeded", "Pods that succeeded.")),
    # ---- coordination.k8s.io/v1 (not compiled into kubectl: client-side apply sends merge patches) --
    _served("coordination.k8s.io/v1", "Lease", "leases",
            _col("HOLDER", ".spec.holderIdentity", "Current holder of the lease."), _AGE_COLUMN,
            generation="", builtin_smp=False),
    # ---- apiextensions.k8s.io/v1 ---------------------------------------------------------------
    _served(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions",
        # type string (not date): kubectl shows the creation time itself, not an age.
        _col("CREATED AT", ".metadata.creationTimestamp", "When the definition was created (RFC 3339)."),
        namespaced=False, short_names=("crd", "crds"), categories=("api-extensions",), has_status=True,
        builtin_smp=False,
    ),
    # ---- Karmada -------------------------------------------------------------------------------
    _karmada(
        "cluster.karmada.io/v1alpha1", "Cluster", "clusters",
        _col("VERSION", ".status.kubernetesVersion", "Kubernetes version of the member cluster."),
        _col("MODE", ".spec.syncMode", "Push or Pull."),
        _condition_col("READY", "Ready"),
        _AGE_COLUMN,
        _wide("ZONES", ".spec.zones", "Failure zones of the cluster."),
        _wide("REGION", ".spec.region", "Region of the cluster."),
        _wide("PROVIDER", ".spec.provider", "Cloud provider of the cluster."),
        _wide("API-ENDPOINT", ".spec.apiEndpoint", "API server URL of the cluster."),
        _wide("PROXY-URL", ".spec.proxyURL", "Proxy used to reach the cluster."),
        namespaced=False, categories=(), has_status=True,
    ),
    _karmada("policy.karmada.io/v1alpha1", "PropagationPolicy", "propagationpolicies", *_POLICY_COLUMNS,
             short_names=("pp",)),
    _karmada("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy", "clusterpropagationpolicies",
             *_POLICY_COLUMNS, namespaced=False, short_names=("cpp",)),
    _karmada("policy.karmada.io/v1alpha1", "OverridePolicy", "overridepolicies", _AGE_COLUMN, short_names=("op",)),
    _karmada("policy.karmada.io/v1alpha1", "ClusterOverridePolicy", "clusteroverridepolicies", _AGE_COLUMN,
             namespaced=False, short_names=("cop",)),
    _karmada("policy.karmada.io/v1alpha1", "ClusterTaintPolicy", "clustertaintpolicies", _AGE_COLUMN,
             namespaced=False, categories=()),
    _karmada("work.karmada.io/v1alpha2", "ResourceBinding", "resourcebindings", *_BINDING_COLUMNS,
             short_names=("rb",), has_status=True),
    _karmada("work.karmada.io/v1alpha2", "ClusterResourceBinding", "clusterresourcebindings", *_BINDING_COLUMNS,
             namespaced=False, short_names=("crb",), has_status=True),
    _karmada(
        "work.karmada.io/v1alpha1", "Work", "works",
        _col("WORKLOAD-KIND", ".spec.workload.manifests[*].kind", "Kinds of the manifests."),
        _condition_col("APPLIED", "Applied"),
        _AGE_COLUMN,
        short_names=("wk",), has_status=True,
    ),
    _karmada(
        "config.karmada.io/v1alpha1", "ResourceInterpreterCustomization", "resourceinterpretercustomizations",
        _col("TARGET-API-VERSION", ".spec.target.apiVersion", "API version of the target kind."),
        _col("TARGET-KIND", ".spec.target.kind", "Target kind."),
        _AGE_COLUMN,
        namespaced=False, short_names=("ric",),
    ),
    _karmada("apps.karmada.io/v1alpha1", "WorkloadRebalancer", "workloadrebalancers", _AGE_COLUMN,
             namespaced=False, categories=(), has_status=True),
)

_BY_GROUP_KIND: dict[tuple[str, str], ResourceType] = {(t.group, t.kind): t for t in BUILTIN_TYPES}


def builtin_type(group: str, kind: str) -> ResourceType | None:
    """The built-in ResourceType of ``(group, kind)``, or None."""
    return _BY_GROUP_KIND.get((group, kind))


# --------------------------------------------------------------------------------------------------
# Time formatting (same rules as kubectl / apimachinery's HumanDuration)


# --------------------------------------------------------------------------------------------------
# Label formatting


def format_labels(labels: Mapping[str, Any] | None) -> str:
    """``k1=v1,k2=v2`` sorted by key; ``<none>`` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """A metav1.LabelSelector as kubectl prints it (``app=web,tier in (a,b),!legacy``); ``<none>`` if empty."""
    if not selector:
        return "<none>"
    requirements: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        requirements.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or []:
        key = expr.get("key", "")
        op = expr.get("operator", "")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        if op == "In":
            text = f"{key} in ({values})"
        elif op == "NotIn":
            text = f"{key} notin ({values})"
        elif op == "Exists":
            text = key
        elif op == "DoesNotExist":
            text = f"!{key}"
        else:
            return "<error>"
        requirements.append((key, text))
    if not requirements:
        return "<none>"
    requirements.sort(key=lambda item: item[0])
    return ",".join(text for _, text in requirements)


# --------------------------------------------------------------------------------------------------
# Custom tables


@dataclass(frozen=True)
class TableColumn:
    """A column of a meta.k8s.io/v1 Table (``columnDefinitions`` entry)."""

    name: str
    type: str = "string"  # string | integer | number | boolean | date
    description: str = ""
    priority: int = 0  # >0: shown only with -o wide
    format: str = ""  # "name" marks the object-name column

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


CellFunction = Callable[..., list[Any]]  # (obj: dict, now: datetime | None = None) -> cells


@dataclass(frozen=True)
class CustomTable:
    columns: tuple[TableColumn, ...]
    cells: CellFunction

    def column_definitions(self) -> list[dict[str, Any]]:
        return [c.definition() for c in self.columns]


def _get(obj: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return default
        obj = obj.get(key)
        if obj is None:
            return default
    return obj


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _name(obj: Mapping[str, Any]) -> str:
    return _get(obj, "metadata", "name", default="")


def _age_of(obj: Mapping[str, Any], now: datetime | None) -> str:
    return human_age(_get(obj, "metadata", "creationTimestamp"), now)


def _condition_status(obj: Mapping[str, Any], condition_type: str) -> str | None:
    for cond in _get(obj, "status", "conditions", default=[]) or []:
        if isinstance(cond, Mapping) and cond.get("type") == condition_type:
            return cond.get("status")
    return None


def _template_containers(obj: Mapping[str, Any]) -> tuple[str, str]:
    containers = _get(obj, "spec", "template", "spec", "containers", default=[]) or []
    names = ",".join(str(c.get("name", "")) for c in containers if isinstance(c, Mapping))
    images = ",".join(str(c.get("image", "")) for c in containers if isinstance(c, Mapping))
    return names, images


_NAME = TableColumn("Name", "string", "Name of the object, unique within its namespace.", 0, "name")
_AGE = TableColumn("Age", "string", _AGE_DESCRIPTION)
_CONTAINERS = TableColumn("Containers", "string", "Names of the containers in the pod template.", 1)
_IMAGES = TableColumn("Images", "string", "Images of the containers in the pod template.", 1)
_SELECTOR = TableColumn("Selector", "string", "Label selector of the pods.", 1)


def _desired_replicas(obj: Mapping[str, Any]) -> int:
    return _int(_get(obj, "spec", "replicas"), 1)  # the server defaults an unset spec.replicas to 1


# -- apps ------------------------------------------------------------------------------------------


def _pod_template_row(obj: Mapping[str, Any], now: datetime | None, *cells: Any, selector: bool = True) -> list[Any]:
    """A row of a kind running a pod template: the name, ``cells``, the age, the template's container names and
    images and, unless ``selector`` is false, the label selector."""
    names, images = _template_containers(obj)
    row = [_name(obj), *cells, _age_of(obj, now), names, images]
    if selector:
        row.append(format_label_selector(_get(obj, "spec", "selector")))
    return row


def deployment_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    status = obj.get("status") or {}
    ready = f"{_int(status.get('readyReplicas'))}/{_desired_replicas(obj)}"
    return _pod_template_row(obj, now, ready, _int(status.get("updatedReplicas")), _int(status.get("availableReplicas")))


def statefulset_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    ready = f"{_int(_get(obj, 'status', 'readyReplicas'))}/{_desired_replicas(obj)}"
    return _pod_template_row(obj, now, ready, selector=False)


def replicaset_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    status = obj.get("status") or {}
    counts = (_desired_replicas(obj), _int(status.get("replicas")), _int(status.get("readyReplicas")))
    return _pod_template_row(obj, now, *counts)


def daemonset_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    status = obj.get("status") or {}
    counts = (_int(status.get(field)) for field in (
        "desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled", "numberAvailable"
    ))
    node_selector = format_labels(_get(obj, "spec", "template", "spec", "nodeSelector"))
    return _pod_template_row(obj, now, *counts, node_selector)


# -- batch -----------------------------------------------------------------------------------------


def job_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_int(spec.get('completions'))}"
    elif _int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {_int(spec.get('parallelism'))}"
    else:
        completions = f"{succeeded}/1"

    start = parse_time(status.get("startTime"))
    end = parse_time(status.get("completionTime"))
    if start is None:
        duration = ""
    elif end is None:
        duration = human_duration((now or datetime.now(UTC)) - start)
    else:
        duration = human_duration(end - start)

    def true(condition_type: str) -> bool:
        return _condition_status(obj, condition_type) == "True"

    if true("Complete"):
        state = "Complete"
    elif true("Failed"):
        state = "Failed"
    elif _get(obj, "metadata", "deletionTimestamp"):
        state = "Terminating"
    elif true("Suspended"):
        state = "Suspended"
    elif true("FailureTarget"):
        state = "FailureTarget"
    elif true("SuccessCriteriaMet"):
        state = "SuccessCriteriaMet"
    else:
        state = "Running"
    return _pod_template_row(obj, now, state, completions, duration)


# -- core ------------------------------------------------------------------------------------------


def _restart_time(container_status: Mapping[str, Any]) -> datetime | None:
    return parse_time(_get(container_status, "lastState", "terminated", "finishedAt"))


def pod_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    init_specs = {c.get("name"): c for c in spec.get("initContainers") or [] if isinstance(c, Mapping)}

    def sidecar(name: Any) -> bool:
        return (init_specs.get(name) or {}).get("restartPolicy") == "Always"

    total = len(spec.get("containers") or []) + sum(1 for n in init_specs if sidecar(n))
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    init_statuses = [s for s in status.get("initContainerStatuses") or [] if isinstance(s, Mapping)]
    initializing = False
    for index, cs in enumerate(init_statuses):
        count = _int(cs.get("restartCount"))
        restarts += count
        finished = _restart_time(cs)
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished
        if sidecar(cs.get("name")):
            sidecar_restarts += count
            if finished and (last_sidecar_restart is None or finished > last_sidecar_restart):
                last_sidecar_restart = finished
        state = cs.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated is not None and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar(cs.get("name")) and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif _int(terminated.get("signal")):
                reason = f"Init:Signal:{_int(terminated.get('signal'))}"
            else:
                reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
        elif waiting is not None and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)
    if not initializing or initialized:
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for cs in reversed([s for s in status.get("containerStatuses") or [] if isinstance(s, Mapping)]):
            restarts += _int(cs.get("restartCount"))
            finished = _restart_time(cs)
            if finished and (last_restart is None or finished > last_restart):
                last_restart = finished
            state = cs.get("state") or {}
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                if _int(terminated.get("signal")):
                    reason = f"Signal:{_int(terminated.get('signal'))}"
                else:
                    reason = f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if pod_ready else "NotReady"

    if _get(obj, "metadata", "deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_age(last_restart, now)} ago)"

    pod_ips = [p for p in status.get("podIPs") or [] if isinstance(p, Mapping)]
    pod_ip = (pod_ips[0].get("ip") if pod_ips else None) or status.get("podIP") or "<none>"
    gates = [g for g in spec.get("readinessGates") or [] if isinstance(g, Mapping)]
    readiness_gates = "<none>"
    if gates:
        by_type = {}
        for cond in conditions:
            by_type.setdefault(cond.get("type"), cond.get("status"))
        passed = sum(1 for g in gates if by_type.get(g.get("conditionType")) == "True")
        readiness_gates = f"{passed}/{len(gates)}"
    return [
        _name(obj),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        _age_of(obj, now),
        pod_ip,
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        readiness_gates,
    ]


_NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
_NODE_ROLE_LABEL = "kubernetes.io/role"


def _node_roles(obj: Mapping[str, Any]) -> str:
    """Roles from ``node-role.kubernetes.io/<role>`` label keys and the ``kubernetes.io/role`` value, sorted."""
    roles: set[str] = set()
    for key, value in (_get(obj, "metadata", "labels", default={}) or {}).items():
        if key.startswith(_NODE_ROLE_PREFIX) and key[len(_NODE_ROLE_PREFIX):]:
            roles.add(key[len(_NODE_ROLE_PREFIX):])
        elif key == _NODE_ROLE_LABEL and value:
            roles.add(str(value))
    return ",".join(sorted(roles)) if roles else "<none>"


def _node_address(obj: Mapping[str, Any], address_type: str) -> str:
    for address in _get(obj, "status", "addresses", default=[]) or []:
        if isinstance(address, Mapping) and address.get("type") == address_type:
            return str(address.get("address") or "")
    return "<none>"


def node_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    ready = _condition_status(obj, "Ready")
    states = ["Unknown" if ready is None else "Ready" if ready == "True" else "NotReady"]
    if _get(obj, "spec", "unschedulable"):
        states.append("SchedulingDisabled")
    info = _get(obj, "status", "nodeInfo", default={}) or {}
    return [
        _name(obj),
        ",".join(states),
        _node_roles(obj),
        _age_of(obj, now),
        info.get("kubeletVersion") or "",
        _node_address(obj, "InternalIP"),
        _node_address(obj, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def namespace_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    return [_name(obj), _get(obj, "status", "phase", default=""), _age_of(obj, now)]


def configmap_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [_name(obj), count, _age_of(obj, now)]


def secret_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    return [_name(obj), obj.get("type") or "Opaque", len(obj.get("data") or {}), _age_of(obj, now)]


def serviceaccount_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    return [_name(obj), len(obj.get("secrets") or []), _age_of(obj, now)]


def _service_external_ip(obj: Mapping[str, Any]) -> str:
    spec = obj.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    external = [str(ip) for ip in spec.get("externalIPs") or []]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if kind == "LoadBalancer":
        ingress = _get(obj, "status", "loadBalancer", "ingress", default=[]) or []
        lb = [
            str(i.get("ip") or i.get("hostname"))
            for i in ingress
            if isinstance(i, Mapping) and (i.get("ip") or i.get("hostname"))
        ]
        addresses = lb + external
        return ",".join(addresses) if addresses else "<pending>"
    if kind == "ExternalName":
        return spec.get("externalName") or ""
    return "<unknown>"


def _service_ports(obj: Mapping[str, Any]) -> str:
    parts = []
    for port in _get(obj, "spec", "ports", default=[]) or []:
        if not isinstance(port, Mapping):
            continue
        protocol = port.get("protocol") or "TCP"
        if port.get("nodePort"):
            parts.append(f"{port.get('port')}:{port.get('nodePort')}/{protocol}")
        else:
            parts.append(f"{port.get('port')}/{protocol}")
    return ",".join(parts) if parts else "<none>"


def service_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    spec = obj.get("spec") or {}
    return [
        _name(obj),
        spec.get("type") or "ClusterIP",
        spec.get("clusterIP") or "<none>",
        _service_external_ip(obj),
        _service_ports(obj),
        _age_of(obj, now),
        format_labels(spec.get("selector")),
    ]


def event_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    if obj.get("firstTimestamp"):
        first_seen = human_age(obj.get("firstTimestamp"), now)
    else:
        first_seen = human_age(obj.get("eventTime"), now)
    last_seen = human_age(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first_seen
    count = _int(obj.get("count"))
    series = obj.get("series")
    if isinstance(series, Mapping):
        last_seen = human_age(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return [
        last_seen,
        obj.get("type") or "",
        obj.get("reason") or "",
        target,
        involved.get("fieldPath") or "",
        f"{component}, {instance}" if instance else component,
        str(obj.get("message") or "").strip(),
        first_seen,
        count,
        _name(obj),
    ]


def lease_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    return [_name(obj), _get(obj, "spec", "holderIdentity", default=""), _age_of(obj, now)]


def crd_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    created = parse_time(_get(obj, "metadata", "creationTimestamp"))
    return [_name(obj), format_time(created) if created else None]


def cluster_cells(obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    spec = obj.get("spec") or {}
    zones = [str(z) for z in spec.get("zones") or []]
    return [
        _name(obj),
        _get(obj, "status", "kubernetesVersion", default=""),
        spec.get("syncMode") or "",
        _condition_status(obj, "Ready") or "Unknown",
        _age_of(obj, now),
        ",".join(zones) if zones else "<none>",
        spec.get("region") or "<none>",
        spec.get("provider") or "<none>",
        spec.get("apiEndpoint") or "",
        spec.get("proxyURL") or "<none>",
    ]


def _table(columns: Iterable[TableColumn], cells: CellFunction) -> CustomTable:
    return CustomTable(tuple(columns), cells)


def _pod_template_table(cells: CellFunction, *columns: TableColumn, selector: bool = True) -> CustomTable:
    """The table of a kind running a pod template, the columns of :func:`_pod_template_row`."""
    return _table([_NAME, *columns, _AGE, _CONTAINERS, _IMAGES, *([_SELECTOR] if selector else [])], cells)


CUSTOM_TABLES: dict[tuple[str, str], CustomTable] = {
    ("apps", "Deployment"): _pod_template_table(
        deployment_cells,
        TableColumn("Ready", "string", "Ready pods out of the desired number."),
        TableColumn("Up-to-date", "integer", "Pods running the current pod template."),
        TableColumn("Available", "integer", "Pods available to serve."),
    ),
    ("apps", "StatefulSet"): _pod_template_table(
        statefulset_cells, TableColumn("Ready", "string", "Ready pods out of the desired number."), selector=False
    ),
    ("apps", "ReplicaSet"): _pod_template_table(
        replicaset_cells,
        TableColumn("Desired", "integer", "Desired number of pods."),
        TableColumn("Current", "integer", "Pods that exist."),
        TableColumn("Ready", "integer", "Pods that are ready."),
    ),
    ("apps", "DaemonSet"): _pod_template_table(
        daemonset_cells,
        TableColumn("Desired", "integer", "Nodes that should run the pod."),
        TableColumn("Current", "integer", "Nodes running the pod."),
        TableColumn("Ready", "integer", "Nodes whose pod is ready."),
        TableColumn("Up-to-date", "integer", "Nodes running the current pod template."),
        TableColumn("Available", "integer", "Nodes whose pod is available."),
        TableColumn("Node Selector", "string", "Node labels the pods require."),
    ),
    ("batch", "Job"): _pod_template_table(
        job_cells,
        TableColumn("Status", "string", "Complete, Failed, Running, Suspended, Terminating..."),
        TableColumn("Completions", "string", "Successful pods out of the required number."),
        TableColumn("Duration", "string", "How long the job ran (or has been running)."),
    ),
    ("", "Pod"): _table(
        [
            _NAME,
            TableColumn("Ready", "string", "Ready containers out of all containers."),
            TableColumn("Status", "string", "Summary of the pod and container states."),
            TableColumn("Restarts", "string", "Container restarts, and how long ago the last one happened."),
            _AGE,
            TableColumn("IP", "string", "IP of the pod.", 1),
            TableColumn("Node", "string", "Node the pod is bound to.", 1),
            TableColumn("Nominated Node", "string", "Node the pod may run on after preemption.", 1),
            TableColumn("Readiness Gates", "string", "Readiness gates that pass out of all gates.", 1),
        ],
        pod_cells,
    ),
    ("", "Node"): _table(
        [
            _NAME,
            TableColumn("Status", "string", "Ready, NotReady or Unknown (+SchedulingDisabled when cordoned)."),
            TableColumn("Roles", "string", "Roles of the node, from its node-role.kubernetes.io/* labels."),
            _AGE,
            TableColumn("Version", "string", "Kubelet version of the node."),
            TableColumn("Internal-IP", "string", "First InternalIP address of the node.", 1),
            TableColumn("External-IP", "string", "First ExternalIP address of the node.", 1),
            TableColumn("OS-Image", "string", "Operating system image of the node.", 1),
            TableColumn("Kernel-Version", "string", "Kernel version of the node.", 1),
            TableColumn("Container-Runtime", "string", "Container runtime and version of the node.", 1),
        ],
        node_cells,
    ),
    ("", "Namespace"): _table(
        [_NAME, TableColumn("Status", "string", "Phase of the namespace."), _AGE], namespace_cells
    ),
    ("", "ConfigMap"): _table(
        [_NAME, TableColumn("Data", "string", "Number of keys (data and binaryData)."), _AGE], configmap_cells
    ),
    ("", "Secret"): _table(
        [
            _NAME,
            TableColumn("Type", "string", "Type of the secret."),
            TableColumn("Data", "string", "Number of keys."),
            _AGE,
        ],
        secret_cells,
    ),
    ("", "ServiceAccount"): _table(
        [_NAME, TableColumn("Secrets", "string", "Number of referenced secrets."), _AGE], serviceaccount_cells
    ),
    ("", "Service"): _table(
        [
            _NAME,
            TableColumn("Type", "string", "How the service is exposed."),
            TableColumn("Cluster-IP", "string", "Virtual IP of the service."),
            TableColumn("External-IP", "string", "Addresses reachable from outside the cluster."),
            TableColumn("Port(s)", "string", "Exposed ports (port[:nodePort]/protocol)."),
            _AGE,
            TableColumn("Selector", "string", "Labels of the pods behind the service.", 1),
        ],
        service_cells,
    ),
    ("", "Event"): _table(
        [
            TableColumn("Last Seen", "string", "Time since the event last occurred."),
            TableColumn("Type", "string", "Normal or Warning."),
            TableColumn("Reason", "string", "Short reason of the event."),
            TableColumn("Object", "string", "kind/name of the object the event is about."),
            TableColumn("Subobject", "string", "Part of the object the event is about.", 1),
            TableColumn("Source", "string", "Component that reported the event.", 1),
            TableColumn("Message", "string", "Description of the event."),
            TableColumn("First Seen", "string", "Time since the event first occurred.", 1),
            TableColumn("Count", "string", "How many times the event occurred.", 1),
            TableColumn("Name", "string", "Name of the event object.", 1, "name"),
        ],
        event_cells,
    ),
    ("coordination.k8s.io", "Lease"): _table(
        [_NAME, TableColumn("Holder", "string", "Current holder of the lease."), _AGE], lease_cells
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _table(
        [_NAME, TableColumn("Created At", "date", "When the definition was created.")], crd_cells
    ),
    ("cluster.karmada.io", "Cluster"): _table(
        [
            _NAME,
            TableColumn("Version", "string", "Kubernetes version of the member cluster."),
            TableColumn("Mode", "string", "Push or Pull."),
            TableColumn("Ready", "string", "Status of the Ready condition (Unknown when missing)."),
            _AGE,
            TableColumn("Zones", "string", "Failure zones of the cluster.", 1),
            TableColumn("Region", "string", "Region of the cluster.", 1),
            TableColumn("Provider", "string", "Cloud provider of the cluster.", 1),
            TableColumn("API-Endpoint", "string", "API server URL of the cluster.", 1),
            TableColumn("Proxy-URL", "string", "Proxy used to reach the cluster.", 1),
        ],
        cluster_cells,
    ),
}

# Flat views of CUSTOM_TABLES, keyed by (group, kind).
custom_cells: dict[tuple[str, str], CellFunction] = {key: table.cells for key, table in CUSTOM_TABLES.items()}
custom_columns: dict[tuple[str, str], tuple[TableColumn, ...]] = {
    key: table.columns for key, table in CUSTOM_TABLES.items()
}
