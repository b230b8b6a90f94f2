"""Building blocks shared by the Karmada policy and binding schemas (policy.karmada.io/v1alpha1 types).

These are complete: every field of the Karmada v1.19 types is listed, with the same types, enums,
defaults and required lists as Karmada's CRDs. Descriptions are written for this project.
"""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    Schema,
    array,
    boolean,
    enum,
    int64,
    integer,
    obj,
    string,
    string_list,
)
from flotilla.apiserver.schemas.meta import label_selector, node_selector_requirement, toleration

PURGE_MODES_APPLICATION = ("Directly", "Gracefully", "Never")
PURGE_MODES_CLUSTER = ("Directly", "Gracefully")


def resource_selector() -> Schema:
    return obj(
        "Selects resource templates by API version and kind, and optionally by namespace, name or labels.",
        {
            "apiVersion": string(
                "API version of the selected resources, e.g. 'apps/v1' (compared as a whole string)."
            ),
            "kind": string("Kind of the selected resources, e.g. 'Deployment'."),
            "namespace": string(
                "Namespace of the selected resources. Empty means the policy's own namespace for namespaced "
                "policies, any namespace for cluster-scoped ones."
            ),
            "name": string(
                "Name of the selected resource. Empty selects all names; when set, labelSelector is ignored."
            ),
            "labelSelector": label_selector("Label query over the resources; ignored when name is set."),
        },
        ["apiVersion", "kind"],
    )


def field_selector() -> Schema:
    return obj(
        "Filters clusters by their fields. Supported keys: 'provider', 'region' and 'zone'; operators In and NotIn.",
        {
            "matchExpressions": array(
                "Requirements on cluster fields; all must hold.", node_selector_requirement()
            )
        },
    )


def cluster_affinity_properties() -> dict[str, Schema]:
    return {
        "labelSelector": label_selector("Label query over Cluster objects. Unset matches every cluster."),
        "fieldSelector": field_selector(),
        "clusterNames": string_list("Names of the clusters to select. Empty places no restriction."),
        "exclude": string_list("Names of clusters that are never selected; checked before anything else."),
    }


def cluster_affinity(
    description: str = "A set of clusters: every non-empty part must match (ANDed).",
) -> Schema:
    return obj(description, cluster_affinity_properties())


def _affinity_term(description: str, *, with_overflow: bool) -> Schema:
    props: dict[str, Schema] = {
        "affinityName": string(
            "Name of this cluster group; unique within the list.", minLength=1, maxLength=32
        ),
    }
    props.update(cluster_affinity_properties())
    if with_overflow:
        props["overflowAffinities"] = array(
            "Extra cluster groups added one after another when the primary group lacks capacity (and removed "
            "in reverse order on scale-down). Only with dynamic-weight or Aggregated division.",
            _affinity_term("An overflow cluster group.", with_overflow=False),
        )
    return obj(description, props, ["affinityName"])


def spread_constraint() -> Schema:
    return obj(
        "Spreads replicas over groups of clusters.",
        {
            "spreadByField": enum(
                "Cluster field the groups are formed by. 'cluster' must be used whenever any field is used.",
                ["cluster", "region", "zone", "provider"],
            ),
            "spreadByLabel": string(
                "Cluster label the groups are formed by; cannot be combined with spreadByField."
            ),
            "maxGroups": integer("Maximum number of groups to select. Has no default: set it.", None),
            "minGroups": integer("Minimum number of groups to select; defaults to 1 (by the webhook).", None),
        },
    )


def replica_scheduling() -> Schema:
    static_weight = obj(
        "A weight for a set of clusters.",
        {
            "targetCluster": cluster_affinity("Clusters the weight applies to."),
            "weight": int64("Relative weight; at least 1.", minimum=1),
        },
        ["targetCluster", "weight"],
    )
    return obj(
        "How the replicas of a workload are scheduled.",
        {
            "replicaSchedulingType": enum(
                "Duplicated: every selected cluster gets all replicas. Divided: the replicas are shared among them.",
                ["Duplicated", "Divided"],
                default="Divided",
            ),
            "replicaDivisionPreference": enum(
                "With Divided: Aggregated packs replicas into as few clusters as capacity allows; Weighted "
                "(the default) splits them by weight.",
                ["Aggregated", "Weighted"],
            ),
            "weightPreference": obj(
                "Weights for the Weighted division.",
                {
                    "staticWeightList": array("Fixed weights per set of clusters.", static_weight),
                    "dynamicWeight": enum(
                        "Compute the weights instead; takes precedence over staticWeightList.",
                        ["AvailableReplicas"],
                    ),
                },
            ),
        },
    )


def workload_affinity() -> Schema:
    def term(kind: str) -> Schema:
        return obj(
            f"Workload {kind} rule.",
            {
                "groupByLabelKey": string(
                    f"Label key of the resource template whose value names the {kind} group (per namespace)."
                )
            },
            ["groupByLabelKey"],
        )

    return obj(
        "Co-locate (affinity) or separate (anti-affinity) workloads by a template label. Alpha, feature-gated.",
        {"affinity": term("affinity"), "antiAffinity": term("anti-affinity")},
    )


def placement() -> Schema:
    return obj(
        "Where resources are propagated and how replicas are divided.",
        {
            "clusterAffinity": cluster_affinity(
                "Clusters the resources may be scheduled to. Cannot be used together with clusterAffinities."
            ),
            "clusterAffinities": array(
                "Ordered cluster groups: the scheduler uses the first group that can hold the workload and falls "
                "back to later groups. Cannot be used together with clusterAffinity.",
                _affinity_term("A named cluster group.", with_overflow=True),
            ),
            "clusterTolerations": array(
                "Cluster taints tolerated. Operators Lt and Gt are not supported.", toleration()
            ),
            "spreadConstraints": array("Spread rules over cluster groups.", spread_constraint()),
            "replicaScheduling": replica_scheduling(),
            "workloadAffinity": workload_affinity(),
        },
    )


def state_preservation() -> Schema:
    rule = obj(
        "Copies one value from the failed cluster's reflected status into a label of the new workload.",
        {
            "aliasLabelName": string("Label key the value is stored under; must be a valid label key."),
            "jsonPath": string(
                "JSONPath into the status reflected from the failed cluster (the root is that status, so write "
                "'{.jobStatus.jobId}', not '{.status.jobStatus.jobId}')."
            ),
        },
        ["aliasLabelName", "jsonPath"],
    )
    return obj(
        "State carried from the failed cluster to the one taking over (needs the StatefulFailoverInjection gate).",
        {"rules": array("Values to carry over; an empty list carries nothing.", rule)},
        ["rules"],
    )


def failover_behavior() -> Schema:
    application = obj(
        "Migration when the application turns unhealthy in a cluster. Requires propagateDeps: true.",
        {
            "decisionConditions": obj(
                "When an application counts as failed.",
                {
                    "tolerationSeconds": integer(
                        "Seconds the application may stay unhealthy before it is migrated (>= 0).",
                        default=300,
                    )
                },
            ),
            "purgeMode": enum(
                "What happens to the copy in the failed cluster: Directly deletes it before the new copy is "
                "created, Gracefully keeps it until the new copy is healthy or gracePeriodSeconds expires, "
                "Never keeps it until someone removes it.",
                PURGE_MODES_APPLICATION,
                default="Gracefully",
            ),
            "gracePeriodSeconds": integer(
                "With Gracefully: seconds to wait for the new copy before the old one is removed anyway (> 0); "
                "defaults to 600. Not allowed with other purge modes."
            ),
            "statePreservation": state_preservation(),
        },
        ["decisionConditions"],
    )
    cluster = obj(
        "Migration when a cluster is tainted NoExecute and the workload does not tolerate it. When unset, the "
        "controller-manager flag --no-execute-taint-eviction-purge-mode decides.",
        {
            "purgeMode": enum(
                "What happens to the copy in the failed cluster: Directly deletes it first, Gracefully keeps it "
                "until the new copy is healthy or the eviction times out.",
                PURGE_MODES_CLUSTER,
                default="Gracefully",
            ),
            "statePreservation": state_preservation(),
        },
    )
    return obj(
        "How applications are migrated when they or their cluster fail. Unset disables application failover.",
        {"application": application, "cluster": cluster},
    )


def suspension(*, with_scheduling: bool = False) -> Schema:
    props: dict[str, Schema] = {
        "dispatching": boolean(
            "True stops propagating to every cluster. Cannot be combined with dispatchingOnClusters."
        ),
        "dispatchingOnClusters": obj(
            "Clusters to which propagation is paused.",
            {"clusterNames": string_list("Names of the clusters.")},
        ),
    }
    if with_scheduling:
        props["scheduling"] = boolean("True makes the scheduler skip this binding until it is cleared.")
    return obj("Pauses parts of the propagation.", props)


def conflict_resolution() -> Schema:
    return enum(
        "What to do when the resource already exists in a member cluster and was not created by this system: "
        "Abort (leave it alone) or Overwrite (take it over).",
        ["Abort", "Overwrite"],
        default="Abort",
    )


def propagation_spec() -> Schema:
    return obj(
        "Which resource templates are propagated, and where to.",
        {
            "resourceSelectors": array(
                "Resource templates the policy applies to. At least one is required (an empty list does not "
                "mean 'everything').",
                resource_selector(),
                minItems=1,
            ),
            "association": boolean("Deprecated: use propagateDeps."),
            "propagateDeps": boolean(
                "Also propagate what the selected resources depend on (ConfigMaps, Secrets, ServiceAccounts, "
                "claims...), and move them along on failover."
            ),
            "placement": placement(),
            "priority": integer(
                "Priority of the policy; the highest one matching a template claims it. Ties go to the more "
                "precise selector (name, then labels, then kind), then to the alphabetically first name.",
                default=0,
            ),
            "preemption": enum(
                "Whether the policy may take templates already claimed by a lower-priority policy.",
                ["Always", "Never"],
                default="Never",
            ),
            "dependentOverrides": string_list(
                "Override policies that must exist before this policy is applied."
            ),
            "schedulerName": string("Scheduler in charge of the resources.", default="default-scheduler"),
            "failover": failover_behavior(),
            "conflictResolution": conflict_resolution(),
            "activationPreference": enum(
                "Empty: policy changes apply at once. Lazy: they apply to a template only when it next changes.",
                ["Lazy"],
            ),
            "suspension": suspension(),
            "preserveResourcesOnDeletion": boolean(
                "Keep the propagated copies in the member clusters when the template is deleted."
            ),
            "schedulePriority": obj(
                "Where the scheduling priority of the workloads comes from.",
                {
                    "priorityClassSource": enum(
                        "Kind of priority class referenced; only KubePriorityClass is supported.",
                        ["KubePriorityClass"],
                    ),
                    "priorityClassName": string("Name of the priority class."),
                },
                ["priorityClassName", "priorityClassSource"],
            ),
        },
        ["resourceSelectors"],
    )


def taint_effect_taint() -> Schema:
    """policy.karmada.io Taint (no timeAdded)."""
    return obj(
        "A taint to put on a cluster.",
        {
            "key": string("Taint key."),
            "effect": string("NoSchedule or NoExecute."),
            "value": string("Taint value."),
        },
        ["effect", "key"],
    )


def match_condition() -> Schema:
    return obj(
        "A test on one condition of the cluster.",
        {
            "conditionType": string("Type of the cluster condition, e.g. Ready."),
            "operator": string(
                "In: the condition's status is one of statusValues. NotIn: it is none of them. A condition "
                "missing from the cluster never matches."
            ),
            "statusValues": string_list("Statuses to compare with: True, False or Unknown."),
        },
        ["conditionType", "operator", "statusValues"],
    )
