"""ResourceBinding and ClusterResourceBinding admission.

Defaulting (Karmada's RB/CRB mutating webhooks): the permanent-id label
(``resourcebinding.karmada.io/permanent-id`` / ``clusterresourcebinding.karmada.io/permanent-id``)
gets a fresh UUID when it is missing or empty, on create and update.

Validation (Karmada's RB validating webhook, which the CRB does not have in Karmada; Flotilla
applies it to both): the ``resourcebinding.karmada.io/dependencies`` annotation must be JSON, and
``spec.components[].name`` must be non-empty and unique. The FederatedResourceQuota check is not
part of Flotilla. Graceful-eviction tasks get the constraints of Karmada's CRD from
the server's schema check: the required ``fromCluster``, ``producer`` and ``reason``, the lengths
(reason 1-32, message at most 1024), the purge-mode enum and the reason pattern
``^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$``, with kube-apiserver's messages. Flotilla also rejects a
cluster listed twice in ``spec.clusters`` (each name would get one Work).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from flotilla.api import labels as L
from flotilla.apiserver.admission import Operation
from flotilla.apiserver.webhooks.common import (
    NoOpPlugin,
    as_dict,
    duplicate,
    invalid,
    objects_of,
    set_label,
)
from flotilla.kube.objects import annotations_of, as_list, labels_of
from flotilla.kube.validation import Cause


def validate_binding(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    annotations = annotations_of(obj)
    dependencies = annotations.get(L.DEPENDENCIES_ANNOTATION)
    if isinstance(dependencies, str):
        try:
            parsed = json.loads(dependencies)
        except ValueError:
            parsed = None
            ok = False
        else:
            ok = parsed is None or (isinstance(parsed, list) and all(isinstance(d, dict) for d in parsed))
        if not ok:
            causes.append(
                invalid(
                    f"metadata.annotations.{L.DEPENDENCIES_ANNOTATION}",
                    dependencies,
                    "annotation value must be a valid JSON",
                )
            )
    spec = as_dict(obj.get("spec"))
    names: set[str] = set()
    for i, component in objects_of(spec.get("components")):
        name = component.get("name")
        path = f"spec.components[{i}].name"
        if not name:
            causes.append(invalid(path, name or "", "component names must be non-empty"))
        elif name in names:
            causes.append(invalid(path, name, "component names must be unique"))
        else:
            names.add(name)
    clusters: set[str] = set()
    for i, target in enumerate(as_list(spec.get("clusters"))):
        name = as_dict(target).get("name")
        if not isinstance(name, str):
            continue
        if name in clusters:
            causes.append(duplicate(f"spec.clusters[{i}].name", name))
        clusters.add(name)
    return causes


class ResourceBindingAdmission(NoOpPlugin):
    """Admission of ResourceBinding (``cluster_scoped=False``) or ClusterResourceBinding."""

    def __init__(self, *, cluster_scoped: bool, new_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        self.id_label = (
            L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL if cluster_scoped else L.RESOURCE_BINDING_PERMANENT_ID_LABEL
        )
        self.new_id = new_id

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> None:
        if not labels_of(obj).get(self.id_label):
            set_label(obj, self.id_label, self.new_id())

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        causes = validate_binding(obj)
        if causes and op == "UPDATE" and old is not None:
            # controllers update bindings all the time: only what this update breaks is refused
            before = validate_binding(old)
            causes = [c for c in causes if c not in before]
        return causes
