"""apps.karmada.io/v1alpha1 WorkloadRebalancer. Complete schema (Karmada v1.19 CRD).

As in the CRD, ``status.observedWorkloads[].result`` and ``reason`` are plain strings: the controller
writes ``Successful`` / ``Failed`` and ``ReferencedBindingNotFound``, but the schema declares no enum.
"""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    Schema,
    array,
    int64,
    integer,
    kind_schema,
    obj,
    string,
    timestamp,
)

GROUP = "apps.karmada.io"
VERSION = "v1alpha1"


def _object_reference(description: str) -> Schema:
    return obj(
        description,
        {
            "apiVersion": string("API version of the workload, e.g. 'apps/v1'."),
            "kind": string("Kind of the workload, e.g. 'Deployment'."),
            "name": string("Name of the workload."),
            "namespace": string("Namespace of the workload; empty for a cluster-scoped resource."),
        },
        ["apiVersion", "kind", "name"],
    )


def workloadrebalancer_schema() -> Schema:
    return kind_schema(
        GROUP,
        VERSION,
        "WorkloadRebalancer",
        "A one-off request to reschedule workloads from scratch: the controller stamps its creation time into "
        "spec.rescheduleTriggeredAt of each workload's binding, which makes the scheduler ignore the current "
        "placement once.",
        {
            "spec": obj(
                "The workloads to reschedule and how long to keep the object once done.",
                {
                    "workloads": array(
                        "Resource templates whose bindings are rescheduled; at least one.",
                        _object_reference("A resource template."),
                        minItems=1,
                    ),
                    "ttlSecondsAfterFinished": integer(
                        "Seconds after status.finishTime at which the object is deleted; unset keeps it, 0 "
                        "deletes it as soon as every workload has a result."
                    ),
                },
                ["workloads"],
            ),
            "status": obj(
                "What the controller did.",
                {
                    "observedWorkloads": array(
                        "One entry per workload, sorted by 'apiVersion kind namespace name'.",
                        obj(
                            "The outcome for one workload.",
                            {
                                "workload": _object_reference("The resource template."),
                                "result": string(
                                    "Successful (the binding was asked to reschedule) or Failed; empty while "
                                    "pending."
                                ),
                                "reason": string(
                                    "Why it failed, e.g. ReferencedBindingNotFound (the template has no binding)."
                                ),
                            },
                            ["workload"],
                        ),
                    ),
                    "observedGeneration": int64(
                        "metadata.generation the status describes; lower means the latest spec is not handled yet."
                    ),
                    "finishTime": timestamp("When every workload last got a result."),
                },
            ),
        },
        ["spec"],
    )
