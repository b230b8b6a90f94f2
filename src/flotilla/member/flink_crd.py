"""The FlinkDeployment CRD (flink.apache.org/v1beta1) installed on every simulated member.

Full enough for the simulator and for Karmada-style tooling: the status and scale subresources and the printer
columns of the operator's CRD (``Job Status``, ``Lifecycle State``), and a schema that declares the main spec and
status fields with their types and enums (operator 1.13) while ``x-kubernetes-preserve-unknown-fields`` on spec and
status keeps anything else (fields of other operator versions, pod templates) instead of pruning it.
"""

from __future__ import annotations

import copy
from typing import Any

from flotilla.kube.resources import Resource
from flotilla.member.flink_model import (
    GROUP,
    JM_DEPLOYMENT_STATUSES,
    JOB_STATES,
    KIND,
    LIFECYCLE_STATES,
    PLURAL,
    UPGRADE_MODES,
    VERSION,
)

CRD_NAME = f"{PLURAL}.{GROUP}"
#: the FlinkDeployments of a member (or of the control plane, once the CRD is installed there)
FLINK_DEPLOYMENTS = Resource(GROUP, VERSION, PLURAL, KIND, True)
FLINK_VERSIONS = ("v1_13", "v1_14", "v1_15", "v1_16", "v1_17", "v1_18", "v1_19", "v1_20", "v2_0", "v2_1", "v2_2")
SNAPSHOT_TRIGGER_TYPES = ("MANUAL", "PERIODIC", "UNKNOWN", "UPGRADE")
CHECKPOINT_FORMATS = ("FULL", "INCREMENTAL", "UNKNOWN")
SAVEPOINT_FORMATS = ("CANONICAL", "NATIVE", "UNKNOWN")


def _s(enum: tuple[str, ...] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string"}
    if enum:
        out["enum"] = list(enum)
    return out


_INT: dict[str, Any] = {"type": "integer"}
_BOOL: dict[str, Any] = {"type": "boolean"}
_NUM: dict[str, Any] = {"type": "number"}
_FREE: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _obj(props: dict[str, Any], *, preserve: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if preserve:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _component() -> dict[str, Any]:
    """spec.jobManager / spec.taskManager."""
    return _obj({
        "replicas": _INT,
        "resource": _obj({"cpu": _NUM, "memory": _s(), "ephemeralStorage": _s()}),
        "podTemplate": _FREE,
    }, preserve=True)


def _snapshot(location: bool, formats: tuple[str, ...]) -> dict[str, Any]:
    props: dict[str, Any] = {
        "timeStamp": _INT,
        "triggerType": _s(SNAPSHOT_TRIGGER_TYPES),
        "formatType": _s(formats),
        "triggerNonce": _INT,
    }
    if location:
        props["location"] = _s()
    return _obj(props)


SPEC_SCHEMA: dict[str, Any] = _obj({
    "image": _s(),
    "imagePullPolicy": _s(),
    "serviceAccount": _s(),
    "flinkVersion": _s(FLINK_VERSIONS),
    "flinkConfiguration": _FREE,
    "logConfiguration": {"type": "object", "additionalProperties": _s()},
    "mode": _s(("native", "standalone")),
    "restartNonce": _INT,
    "podTemplate": _FREE,
    "ingress": _FREE,
    "jobManager": _component(),
    "taskManager": _component(),
    "job": _obj({
        "jarURI": _s(),
        "entryClass": _s(),
        "args": {"type": "array", "items": _s()},
        "parallelism": _INT,
        "state": _s(("running", "suspended")),
        "upgradeMode": _s(tuple(sorted(UPGRADE_MODES))),
        "initialSavepointPath": _s(),
        "allowNonRestoredState": _BOOL,
        "savepointTriggerNonce": _INT,
        "checkpointTriggerNonce": _INT,
        "savepointRedeployNonce": _INT,
        "autoscalerResetNonce": _INT,
    }, preserve=True),
}, preserve=True)

STATUS_SCHEMA: dict[str, Any] = _obj({
    "jobStatus": _obj({
        "jobName": _s(),
        "jobId": _s(),
        "state": _s(tuple(sorted(JOB_STATES))),
        "startTime": _s(),
        "updateTime": _s(),
        "upgradeSavepointPath": _s(),
        "savepointInfo": _obj({
            "lastSavepoint": _snapshot(True, SAVEPOINT_FORMATS),
            "triggerId": _s(),
            "triggerTimestamp": _INT,
            "triggerType": _s(SNAPSHOT_TRIGGER_TYPES),
            "formatType": _s(SAVEPOINT_FORMATS),
            "savepointHistory": {"type": "array", "items": _snapshot(True, SAVEPOINT_FORMATS)},
            "lastPeriodicSavepointTimestamp": _INT,
        }),
        "checkpointInfo": _obj({
            "lastCheckpoint": _snapshot(False, CHECKPOINT_FORMATS),
            "triggerId": _s(),
            "triggerTimestamp": _INT,
            "triggerType": _s(SNAPSHOT_TRIGGER_TYPES),
            "formatType": _s(CHECKPOINT_FORMATS),
            "lastPeriodicCheckpointTimestamp": _INT,
        }),
    }, preserve=True),
    "error": _s(),
    "observedGeneration": _INT,
    "lifecycleState": _s(tuple(sorted(LIFECYCLE_STATES))),
    "clusterInfo": {"type": "object", "additionalProperties": _s()},
    "jobManagerDeploymentStatus": _s(tuple(sorted(JM_DEPLOYMENT_STATUSES))),
    "reconciliationStatus": _obj({
        "reconciliationTimestamp": _INT,
        "lastReconciledSpec": _s(),
        "lastStableSpec": _s(),
        "state": _s(("DEPLOYED", "ROLLED_BACK", "ROLLING_BACK", "UPGRADING")),
    }),
    "taskManager": _obj({"labelSelector": _s(), "replicas": _INT}),
}, preserve=True)

FLINK_DEPLOYMENT_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": GROUP,
        "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": KIND.lower(),
                  "shortNames": ["flinkdep"]},
        "scope": "Namespaced",
        "versions": [{
            "name": VERSION,
            "served": True,
            "storage": True,
            "additionalPrinterColumns": [
                {"name": "Job Status", "type": "string", "jsonPath": ".status.jobStatus.state",
                 "description": "Last observed state of the job.", "priority": 0},
                {"name": "Lifecycle State", "type": "string", "jsonPath": ".status.lifecycleState",
                 "description": "Lifecycle state of the Flink resource (including being rolled back, failed etc.).",
                 "priority": 0},
            ],
            "subresources": {
                "status": {},
                "scale": {"specReplicasPath": ".spec.taskManager.replicas",
                          "statusReplicasPath": ".status.taskManager.replicas",
                          "labelSelectorPath": ".status.taskManager.labelSelector"},
            },
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "apiVersion": _s(),
                    "kind": _s(),
                    "metadata": {"type": "object"},
                    "spec": SPEC_SCHEMA,
                    "status": STATUS_SCHEMA,
                },
            }},
        }],
    },
}


def flink_deployment_crd() -> dict[str, Any]:
    """A fresh copy of the CRD manifest (safe to mutate)."""
    return copy.deepcopy(FLINK_DEPLOYMENT_CRD)


async def ensure_flink_crd(storage: Any) -> dict[str, Any]:
    """Create the CRD through a member's ``ResourceStorage`` unless it exists; returns the stored CRD.

    The served type is registered synchronously by the CRD manager on create, so FlinkDeployments can be written
    as soon as this returns.
    """
    from flotilla.apiserver.errors import ApiError

    rt = storage.types.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    try:
        return await storage.get(rt, None, CRD_NAME)  # type: ignore[no-any-return]
    except ApiError as e:
        if e.code != 404:
            raise
    try:
        return await storage.create(rt, None, flink_deployment_crd())  # type: ignore[no-any-return]
    except ApiError as e:
        if e.code != 409:
            raise
        return await storage.get(rt, None, CRD_NAME)  # type: ignore[no-any-return]
