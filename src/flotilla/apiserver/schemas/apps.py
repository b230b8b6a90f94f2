"""apps/v1 (Deployment, StatefulSet, DaemonSet, ReplicaSet) and batch/v1 (Job) schemas.

Documented fields are listed; every object keeps unknown fields so valid manifests always validate.
"""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    Schema,
    atomic_list,
    boolean,
    free_object,
    int64,
    int_or_string,
    integer,
    kind_schema,
    obj,
    string,
    timestamp,
)
from flotilla.apiserver.schemas.core import pod_template_spec
from flotilla.apiserver.schemas.meta import label_selector, object_meta, workload_conditions


def _selector(what: str) -> Schema:
    return label_selector(
        f"Label query over the pods this {what} manages; it must match the template's labels and "
        "cannot change after creation."
    )


def _rolling_update(what: str, extra: dict[str, Schema] | None = None) -> Schema:
    props: dict[str, Schema] = {
        "maxUnavailable": int_or_string(
            f"Pods of the {what} that may be unavailable during the update (number or percentage)."
        ),
    }
    if extra:
        props.update(extra)
    return obj("Parameters of a rolling update.", props, open=True)


def deployment_schema() -> Schema:
    strategy = obj(
        "How old pods are replaced by new ones.",
        {
            "type": string("RollingUpdate (default) or Recreate."),
            "rollingUpdate": _rolling_update(
                "deployment",
                {
                    "maxSurge": int_or_string(
                        "Pods that may be created above the desired count (number or percentage)."
                    )
                },
            ),
        },
        open=True,
        **{"x-kubernetes-patch-strategy": "retainKeys"},
    )
    return kind_schema(
        "apps",
        "v1",
        "Deployment",
        "Declarative updates for a replicated, stateless set of pods (managed through ReplicaSets).",
        {
            "spec": obj(
                "Desired state of the deployment.",
                {
                    "replicas": integer("Desired number of pods; defaults to 1."),
                    "selector": _selector("deployment"),
                    "template": pod_template_spec(),
                    "strategy": strategy,
                    "minReadySeconds": integer(
                        "Seconds a new pod must be ready before it counts as available."
                    ),
                    "revisionHistoryLimit": integer("Old ReplicaSets kept for rollback; defaults to 10."),
                    "paused": boolean("Stop rolling out template changes."),
                    "progressDeadlineSeconds": integer(
                        "Seconds without progress before the rollout is reported as failed; defaults to 600."
                    ),
                },
                open=True,
            ),
            "status": obj(
                "Most recently observed state of the deployment.",
                {
                    "observedGeneration": int64("metadata.generation the controller has acted on."),
                    "replicas": integer("Pods targeted by the deployment (excluding terminating ones)."),
                    "updatedReplicas": integer("Pods that run the current template."),
                    "readyReplicas": integer("Pods with the Ready condition."),
                    "availableReplicas": integer("Pods ready for at least minReadySeconds."),
                    "unavailableReplicas": integer("Pods still needed to reach the desired count."),
                    "terminatingReplicas": integer("Pods being terminated."),
                    "collisionCount": integer("Hash-collision counter used in ReplicaSet names."),
                    "conditions": workload_conditions("deployment"),
                },
                open=True,
            ),
        },
    )


def statefulset_schema() -> Schema:
    return kind_schema(
        "apps",
        "v1",
        "StatefulSet",
        "Pods with stable identities (ordinal names) and stable per-pod storage.",
        {
            "spec": obj(
                "Desired state of the stateful set.",
                {
                    "replicas": integer("Desired number of pods; defaults to 1."),
                    "selector": _selector("stateful set"),
                    "template": pod_template_spec(),
                    "serviceName": string("Headless service that gives the pods their DNS names."),
                    "volumeClaimTemplates": atomic_list(
                        "Claims created per pod; each pod mounts its own.",
                        obj(
                            "A PersistentVolumeClaim template.",
                            {
                                "metadata": object_meta(),
                                "spec": free_object("Claim spec."),
                                "status": free_object("Claim status."),
                            },
                            open=True,
                        ),
                    ),
                    "podManagementPolicy": string("OrderedReady (default) or Parallel."),
                    "updateStrategy": obj(
                        "How pods are replaced after a template change.",
                        {
                            "type": string("RollingUpdate (default) or OnDelete."),
                            "rollingUpdate": _rolling_update(
                                "stateful set",
                                {"partition": integer("Only ordinals >= partition are updated.")},
                            ),
                        },
                        open=True,
                    ),
                    "revisionHistoryLimit": integer("Revisions kept; defaults to 10."),
                    "minReadySeconds": integer(
                        "Seconds a new pod must be ready before it counts as available."
                    ),
                    "persistentVolumeClaimRetentionPolicy": free_object(
                        "Whether claims are deleted when the set is deleted or scaled down."
                    ),
                    "ordinals": obj(
                        "Ordinal numbering.", {"start": integer("First ordinal; defaults to 0.")}, open=True
                    ),
                },
                open=True,
            ),
            "status": obj(
                "Most recently observed state of the stateful set.",
                {
                    "observedGeneration": int64("metadata.generation the controller has acted on."),
                    "replicas": integer("Pods created."),
                    "readyReplicas": integer("Pods with the Ready condition."),
                    "currentReplicas": integer("Pods at currentRevision."),
                    "updatedReplicas": integer("Pods at updateRevision."),
                    "availableReplicas": integer("Pods ready for at least minReadySeconds."),
                    "currentRevision": string("Revision of the pods up to currentReplicas."),
                    "updateRevision": string("Revision being rolled out."),
                    "collisionCount": integer("Hash-collision counter."),
                    "conditions": workload_conditions("stateful set"),
                },
                open=True,
            ),
        },
    )


def daemonset_schema() -> Schema:
    return kind_schema(
        "apps",
        "v1",
        "DaemonSet",
        "Runs one copy of a pod on every (selected) node.",
        {
            "spec": obj(
                "Desired state of the daemon set.",
                {
                    "selector": _selector("daemon set"),
                    "template": pod_template_spec(),
                    "updateStrategy": obj(
                        "How pods are replaced after a template change.",
                        {
                            "type": string("RollingUpdate (default) or OnDelete."),
                            "rollingUpdate": _rolling_update(
                                "daemon set",
                                {
                                    "maxSurge": int_or_string(
                                        "Nodes that may run an extra pod during the update."
                                    )
                                },
                            ),
                        },
                        open=True,
                    ),
                    "minReadySeconds": integer(
                        "Seconds a new pod must be ready before it counts as available."
                    ),
                    "revisionHistoryLimit": integer("Revisions kept; defaults to 10."),
                },
                open=True,
            ),
            "status": obj(
                "Most recently observed state of the daemon set.",
                {
                    "observedGeneration": int64("metadata.generation the controller has acted on."),
                    "desiredNumberScheduled": integer("Nodes that should run the pod."),
                    "currentNumberScheduled": integer("Nodes running at least one daemon pod that should."),
                    "numberMisscheduled": integer("Nodes running the pod that should not."),
                    "numberReady": integer("Nodes whose daemon pod is ready."),
                    "updatedNumberScheduled": integer("Nodes running the current template."),
                    "numberAvailable": integer("Nodes whose daemon pod is available."),
                    "numberUnavailable": integer("Nodes whose daemon pod is not available."),
                    "collisionCount": integer("Hash-collision counter."),
                    "conditions": workload_conditions("daemon set"),
                },
                open=True,
            ),
        },
    )


def replicaset_schema() -> Schema:
    return kind_schema(
        "apps",
        "v1",
        "ReplicaSet",
        "Keeps a fixed number of identical pods running (normally owned by a Deployment).",
        {
            "spec": obj(
                "Desired state of the replica set.",
                {
                    "replicas": integer("Desired number of pods; defaults to 1."),
                    "selector": _selector("replica set"),
                    "template": pod_template_spec(),
                    "minReadySeconds": integer(
                        "Seconds a new pod must be ready before it counts as available."
                    ),
                },
                open=True,
            ),
            "status": obj(
                "Most recently observed state of the replica set.",
                {
                    "observedGeneration": int64("metadata.generation the controller has acted on."),
                    "replicas": integer("Pods currently matched."),
                    "fullyLabeledReplicas": integer("Pods whose labels match the template's."),
                    "readyReplicas": integer("Pods with the Ready condition."),
                    "availableReplicas": integer("Pods ready for at least minReadySeconds."),
                    "terminatingReplicas": integer("Pods being terminated."),
                    "conditions": workload_conditions("replica set"),
                },
                open=True,
            ),
        },
    )


def job_schema() -> Schema:
    return kind_schema(
        "batch",
        "v1",
        "Job",
        "Runs pods until a given number of them complete successfully.",
        {
            "spec": obj(
                "Desired behaviour of the job.",
                {
                    "parallelism": integer("Maximum pods running at once; defaults to 1."),
                    "completions": integer(
                        "Successful pods needed; unset means the first success finishes the job."
                    ),
                    "completionMode": string("NonIndexed (default) or Indexed."),
                    "backoffLimit": integer("Retries before the job is marked failed; defaults to 6."),
                    "backoffLimitPerIndex": integer("Retries per index (Indexed jobs)."),
                    "activeDeadlineSeconds": int64("Seconds the job may run before it is terminated."),
                    "ttlSecondsAfterFinished": integer("Seconds after completion before the job is deleted."),
                    "suspend": boolean("Suspend the job: no pods are created, running ones are terminated."),
                    "selector": label_selector(
                        "Label query over the job's pods; normally generated by the server."
                    ),
                    "manualSelector": boolean("Use the given selector instead of a generated one."),
                    "template": pod_template_spec(),
                    "podFailurePolicy": free_object("Rules that decide how pod failures count."),
                    "successPolicy": free_object("Rules that declare the job successful early."),
                    "podReplacementPolicy": string(
                        "When replacement pods are created: TerminatingOrFailed or Failed."
                    ),
                },
                open=True,
            ),
            "status": obj(
                "Most recently observed state of the job.",
                {
                    "active": integer("Pods running."),
                    "succeeded": integer("Pods that succeeded."),
                    "failed": integer("Pods that failed."),
                    "terminating": integer("Pods being terminated."),
                    "ready": integer("Active pods that are ready."),
                    "startTime": timestamp("When the job started.", nullable=True),
                    "completionTime": timestamp("When the job completed.", nullable=True),
                    "completedIndexes": string("Completed indexes (Indexed jobs), e.g. '1,3-5'."),
                    "conditions": workload_conditions("job"),
                },
                open=True,
            ),
        },
    )
