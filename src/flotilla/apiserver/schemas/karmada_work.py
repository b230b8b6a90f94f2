"""work.karmada.io: ResourceBinding / ClusterResourceBinding (v1alpha2) and Work (v1alpha1).
Complete schemas (Karmada v1.19)."""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    REASON_PATTERN,
    Schema,
    array,
    boolean,
    enum,
    free_object,
    int64,
    integer,
    kind_schema,
    obj,
    quantity_map,
    string,
    string_list,
    string_map,
    timestamp,
)
from flotilla.apiserver.schemas.karmada_common import (
    PURGE_MODES_APPLICATION,
    conflict_resolution,
    failover_behavior,
    placement,
    suspension,
)
from flotilla.apiserver.schemas.meta import conditions, node_selector, toleration

GROUP = "work.karmada.io"
HEALTH = ["Healthy", "Unhealthy", "Unknown"]


def _node_claim() -> Schema:
    hard = node_selector()
    hard["description"] = "Required node affinity of each replica (the pod's requiredDuringScheduling terms)."
    return obj(
        "Node constraints each replica needs.",
        {
            "hardNodeAffinity": hard,
            "nodeSelector": string_map("Node labels each replica requires."),
            "tolerations": array("Node taints each replica tolerates.", toleration()),
        },
    )


def _replica_requirements(*, with_namespace: bool) -> Schema:
    props: dict[str, Schema] = {
        "nodeClaim": _node_claim(),
        "resourceRequest": quantity_map("Resources one replica requests, e.g. cpu: 500m."),
    }
    if with_namespace:
        props["namespace"] = string("Namespace of the workload (used for quota estimation).")
    props["priorityClassName"] = string("Priority class of the replicas.")
    return obj("Resources and node constraints of one replica.", props)


def _target_cluster() -> Schema:
    return obj(
        "A cluster chosen by the scheduler and the replicas it gets.",
        {
            "name": string("Name of the cluster."),
            "replicas": integer("Replicas assigned to the cluster (0 for non-workloads)."),
            "components": array(
                "Per-component replica split (multi-template workloads only).",
                obj(
                    "Replicas of one component in this cluster.",
                    {"name": string("Component name."), "replicas": integer("Replicas of the component.")},
                    ["name", "replicas"],
                ),
            ),
        },
        ["name"],
    )


def graceful_eviction_task() -> Schema:
    return obj(
        "A cluster the workload is being moved away from. While the task exists the cluster is not scheduled "
        "to; depending on purgeMode the old copy is kept until the task is removed.",
        {
            "fromCluster": string("The cluster being evicted."),
            "purgeMode": enum(
                "Directly: the old copy is deleted before the new one is created. Gracefully: kept until the "
                "new placement is healthy or the task times out. Never: kept until someone clears the task.",
                PURGE_MODES_APPLICATION,
            ),
            "replicas": integer("Replicas the cluster held when it was evicted (set only if > 0)."),
            "reason": string(
                "Why: TaintUntolerated or ApplicationFailure.",
                minLength=1,
                maxLength=32,
                pattern=REASON_PATTERN,
            ),
            "message": string("Human-readable details.", maxLength=1024),
            "producer": string("Controller that created the task."),
            "gracePeriodSeconds": integer(
                "Lifetime of the task, overriding the controller's --graceful-eviction-timeout."
            ),
            "suppressDeletion": boolean(
                "True keeps the task (and the old copy) indefinitely; false removes it now."
            ),
            "preservedLabelState": string_map(
                "State extracted from the evicted cluster (label name -> value), injected as labels into the "
                "workload in the new cluster."
            ),
            "clustersBeforeFailover": string_list(
                "The binding's clusters before the eviction; the preserved state is not injected into them."
            ),
            "creationTimestamp": timestamp(
                "When the eviction controller first saw the task; its timeout counts from here."
            ),
        },
        ["fromCluster", "producer", "reason"],
    )


def _binding_spec() -> Schema:
    return obj(
        "The template being propagated, the policy snapshot and the scheduling result.",
        {
            "resource": obj(
                "The resource template this binding is for.",
                {
                    "apiVersion": string("API version of the template."),
                    "kind": string("Kind of the template."),
                    "namespace": string("Namespace of the template; empty for cluster-scoped templates."),
                    "name": string("Name of the template."),
                    "uid": string("UID of the template."),
                    "resourceVersion": string("resourceVersion of the template last processed."),
                },
                ["apiVersion", "kind", "name"],
            ),
            "propagateDeps": boolean("Whether dependencies of the template are propagated with it."),
            "replicaRequirements": _replica_requirements(with_namespace=True),
            "replicas": integer("Desired replicas of the template (0 for non-workloads)."),
            "components": array(
                "Components of a workload with several pod templates.",
                obj(
                    "One component and what each of its replicas needs.",
                    {
                        "name": string("Component name, unique within the workload.", maxLength=32),
                        "replicas": integer("Replicas of the component."),
                        "replicaRequirements": _replica_requirements(with_namespace=False),
                    },
                    ["name", "replicas"],
                ),
            ),
            "clusters": array("Scheduling result: the target clusters.", _target_cluster()),
            "placement": placement(),
            "gracefulEvictionTasks": array(
                "Clusters being evicted, in the order the evictions happened.", graceful_eviction_task()
            ),
            "requiredBy": array(
                "Bindings that depend on this one; their clusters also receive this resource.",
                obj(
                    "A snapshot of a dependent binding.",
                    {
                        "namespace": string("Namespace of the binding; empty for a ClusterResourceBinding."),
                        "name": string("Name of the binding."),
                        "clusters": array("Scheduling result of that binding.", _target_cluster()),
                    },
                    ["name"],
                ),
            ),
            "schedulerName": string("Scheduler in charge of the binding."),
            "failover": failover_behavior(),
            "conflictResolution": conflict_resolution(),
            "rescheduleTriggeredAt": timestamp(
                "Forces a fresh reschedule when later than status.lastScheduledTime."
            ),
            "suspension": suspension(with_scheduling=True),
            "preserveResourcesOnDeletion": boolean(
                "Keep the copies in member clusters when the template is deleted."
            ),
            "schedulePriority": obj(
                "Scheduling priority of the binding.",
                {"priority": integer("Higher is scheduled first.", default=0)},
            ),
            "workloadAffinityGroups": obj(
                "Affinity groups resolved from the policy's workloadAffinity ('<labelKey>=<labelValue>').",
                {
                    "affinityGroup": string("Affinity group of the workload."),
                    "antiAffinityGroup": string("Anti-affinity group of the workload."),
                },
            ),
        },
        ["resource"],
    )


def _binding_status() -> Schema:
    return obj(
        "Scheduling and propagation state.",
        {
            "schedulerObservedGeneration": int64(
                "metadata.generation the scheduler has confirmed; lower than generation means the result is pending."
            ),
            "schedulerObservingAffinityName": string(
                "The clusterAffinities group the current result comes from."
            ),
            "lastScheduledTime": timestamp("When the binding was last scheduled successfully."),
            "conditions": conditions("Scheduled and FullyApplied conditions."),
            "aggregatedStatus": array(
                "Status collected from each cluster holding a copy, sorted by cluster name.",
                obj(
                    "The copy in one cluster.",
                    {
                        "clusterName": string("Member cluster."),
                        "status": free_object(
                            "Status reflected from the member object (interpreter output)."
                        ),
                        "applied": boolean("Whether the copy was applied to the cluster."),
                        "appliedMessage": string("Why applying failed, when it did."),
                        "health": enum("Health of the copy.", HEALTH),
                    },
                    ["clusterName"],
                ),
            ),
        },
    )


def resourcebinding_schema() -> Schema:
    return kind_schema(
        GROUP,
        "v1alpha2",
        "ResourceBinding",
        "Ties a namespaced resource template to its propagation policy and records where it is scheduled. "
        "Named '<template name>-<kind>'.",
        {"spec": _binding_spec(), "status": _binding_status()},
        ["spec"],
    )


def clusterresourcebinding_schema() -> Schema:
    return kind_schema(
        GROUP,
        "v1alpha2",
        "ClusterResourceBinding",
        "ResourceBinding for a cluster-scoped resource template.",
        {"spec": _binding_spec(), "status": _binding_status()},
        ["spec"],
    )


def work_schema() -> Schema:
    identifier = obj(
        "Identifies one manifest of the Work.",
        {
            "ordinal": integer("Index of the manifest in spec.workload.manifests.", None),
            "group": string("API group of the object."),
            "version": string("API version of the object."),
            "kind": string("Kind of the object."),
            "resource": string("Resource (plural) of the object; may be empty."),
            "namespace": string("Namespace of the object."),
            "name": string("Name of the object."),
        },
        ["kind", "name", "ordinal", "resource", "version"],
    )
    return kind_schema(
        GROUP,
        "v1alpha1",
        "Work",
        "The objects to apply to one member cluster; lives in the cluster's execution namespace "
        "'karmada-es-<cluster>'.",
        {
            "spec": obj(
                "What to apply.",
                {
                    "workload": obj(
                        "The objects.",
                        {
                            "manifests": array(
                                "Complete objects to create or update in the member cluster.",
                                free_object("An object."),
                            )
                        },
                    ),
                    "suspendDispatching": boolean("True stops applying the manifests to the cluster."),
                    "preserveResourcesOnDeletion": boolean(
                        "Keep the objects in the member cluster when the Work is deleted."
                    ),
                },
            ),
            "status": obj(
                "What happened in the member cluster.",
                {
                    "conditions": conditions("Applied and Dispatching conditions."),
                    "manifestStatuses": array(
                        "Status of the applied objects.",
                        obj(
                            "Status of one object.",
                            {
                                "identifier": identifier,
                                "status": free_object("Status reflected from the member object."),
                                "health": enum("Health of the object.", HEALTH),
                            },
                            ["identifier"],
                        ),
                    ),
                },
            ),
        },
        ["spec"],
    )
