"""OverridePolicy and ClusterOverridePolicy admission.

Defaulting (Karmada's OverridePolicy mutating webhook): an empty ``resourceSelectors[].namespace``
becomes the policy's namespace. ClusterOverridePolicy has no mutating webhook.

Validation: Karmada's ``ValidateOverrideSpec`` with its paths and messages - ``targetCluster``
field selector, ``targetCluster``/``overriders`` vs ``overrideRules`` exclusivity, annotations and
labels overriders, image predicate paths, field overriders (JSON or YAML, JSON pointers, values per
operator), rule target clusters, and the resource-selector namespace of an OverridePolicy. Flotilla
also checks what Karmada only finds out when rendering a Work:
  - plaintext overriders: ``path`` a non-empty JSON pointer, ``value`` required for add/replace
    (a ``remove`` with a value gets a warning: the value is ignored);
  - image overriders: ``value`` required for add/replace;
  - command/args overriders: ``containerName`` not empty;
  - the deprecated ``spec.overriders`` get the same checks as the rules' overriders;
  - label selectors of resource selectors and target clusters are valid.
Operators and image components are enums in the schema, which the server checks before admission.
"""

from __future__ import annotations

from typing import Any

from flotilla.apiserver.admission import Operation
from flotilla.apiserver.webhooks.common import (
    NoOpPlugin,
    as_dict,
    default_resource_selector_namespaces,
    invalid,
    json_pointer_error,
    json_pointer_escape_error,
    metadata,
    required,
    spec_unchanged,
    validate_annotations,
    validate_cluster_affinity,
    validate_labels,
    validate_resource_selectors,
)
from flotilla.kube.objects import as_list, as_str
from flotilla.kube.validation import Cause

_LEGACY_OVERRIDER_KINDS = (
    "plaintext",
    "imageOverrider",
    "commandOverrider",
    "argsOverrider",
    "labelsOverrider",
    "annotationsOverrider",
)


def empty_overriders(overriders: Any) -> bool:
    """Karmada's ``emptyOverrides`` (it does not look at fieldOverrider)."""
    o = as_dict(overriders)
    return not any(as_list(o.get(kind)) for kind in _LEGACY_OVERRIDER_KINDS)


def _has_value(item: dict[str, Any]) -> bool:
    """A JSON value is present (Karmada's ``apiextensionsv1.JSON`` treats ``null`` as absent)."""
    return item.get("value") is not None


def _validate_operator_value(operator: Any, item: dict[str, Any], path: str) -> list[Cause]:
    """Karmada's ``validateOverrideOperator``."""
    value = item.get("value")
    if operator in ("add", "replace") and not _has_value(item):
        return [invalid(path, value, "value is required for add or replace operation")]
    if operator == "remove" and _has_value(item):
        return [invalid(path, value, "value is not allowed for remove operation")]
    return []


def _pointer_causes(pointer: Any, path: str, *, flotilla_checks: bool) -> list[Cause]:
    if not isinstance(pointer, str):
        return []
    problem = json_pointer_error(pointer)
    if problem is None and flotilla_checks:
        problem = json_pointer_escape_error(pointer)
    return [invalid(path, pointer, problem)] if problem else []


def validate_overriders(overriders: Any, path: str) -> list[Cause]:
    """Checks of one ``overriders`` block (Karmada's rule checks plus Flotilla's)."""
    o = as_dict(overriders)
    causes: list[Cause] = []
    # Karmada
    for i, item in enumerate(as_list(o.get("annotationsOverrider"))):
        causes.extend(validate_annotations(as_dict(item).get("value"), f"{path}.annotationsOverrider[{i}].value"))
    for i, item in enumerate(as_list(o.get("labelsOverrider"))):
        causes.extend(validate_labels(as_dict(item).get("value"), f"{path}.labelsOverrider[{i}].value"))
    for i, item in enumerate(as_list(o.get("imageOverrider"))):
        item = as_dict(item)
        where = f"{path}.imageOverrider[{i}]"
        predicate = item.get("predicate")
        if isinstance(predicate, dict):
            causes.extend(_pointer_causes(predicate.get("path"), f"{where}.predicate.path", flotilla_checks=False))
        if item.get("operator") in ("add", "replace") and not as_str(item.get("value")):
            causes.append(required(f"{where}.value", "value is required for add or replace operation"))
    for i, item in enumerate(as_list(o.get("fieldOverrider"))):
        item = as_dict(item)
        where = f"{path}.fieldOverrider[{i}]"
        yaml_ops, json_ops = as_list(item.get("yaml")), as_list(item.get("json"))
        if yaml_ops and json_ops:
            causes.append(invalid(where, item, "FieldOverrider has both YAML and JSON set. Only one is allowed"))
        if not yaml_ops and not json_ops:
            causes.append(required(where, "FieldOverrider must have either JSON or YAML set"))
        causes.extend(_pointer_causes(item.get("fieldPath"), f"{where}.fieldPath", flotilla_checks=False))
        for key, ops in (("json", json_ops), ("yaml", yaml_ops)):
            for j, op in enumerate(ops):
                op = as_dict(op)
                op_path = f"{where}.{key}[{j}]"
                causes.extend(_pointer_causes(op.get("subPath"), f"{op_path}.subPath", flotilla_checks=False))
                causes.extend(_validate_operator_value(op.get("operator"), op, f"{op_path}.value"))
    # Flotilla
    for i, item in enumerate(as_list(o.get("plaintext"))):
        item = as_dict(item)
        where = f"{path}.plaintext[{i}]"
        pointer = item.get("path")
        if pointer == "":
            causes.append(required(f"{where}.path", "a JSON pointer such as '/spec/replicas'"))
        else:
            causes.extend(_pointer_causes(pointer, f"{where}.path", flotilla_checks=True))
        if item.get("operator") in ("add", "replace") and not _has_value(item):
            causes.append(invalid(f"{where}.value", None, "value is required for add or replace operation"))
    for kind in ("commandOverrider", "argsOverrider"):
        for i, item in enumerate(as_list(o.get(kind))):
            if as_dict(item).get("containerName") == "":
                causes.append(required(f"{path}.{kind}[{i}].containerName"))
    return causes


def override_warnings(overriders: Any, path: str) -> list[str]:
    warnings = []
    for i, item in enumerate(as_list(as_dict(overriders).get("plaintext"))):
        item = as_dict(item)
        if item.get("operator") == "remove" and _has_value(item):
            warnings.append(f"{path}.plaintext[{i}].value: ignored: a remove operation takes no value")
    return warnings


def validate_override_spec(spec: dict[str, Any], namespace: str) -> list[Cause]:
    """Karmada's ``ValidateOverrideSpec`` plus Flotilla's checks. ``namespace`` is "" for a COP."""
    causes: list[Cause] = []
    target = spec.get("targetCluster")
    rules = spec.get("overrideRules")
    if target is not None:
        causes.extend(validate_cluster_affinity(target, "spec.targetCluster"))
    if target is not None and rules is not None:
        causes.append(invalid("spec.targetCluster", target, "overrideRules and targetCluster can't co-exist"))
    if not empty_overriders(spec.get("overriders")) and rules is not None:
        causes.append(invalid("spec.overriders", spec.get("overriders"), "overrideRules and overriders can't co-exist"))
    for i, rule in enumerate(as_list(rules)):
        rule = as_dict(rule)
        where = f"spec.overrideRules[{i}]"
        causes.extend(validate_overriders(rule.get("overriders"), f"{where}.overriders"))
        causes.extend(validate_cluster_affinity(rule.get("targetCluster"), f"{where}.targetCluster"))
    if spec.get("overriders") is not None and rules is None:
        causes.extend(validate_overriders(spec.get("overriders"), "spec.overriders"))
    causes.extend(validate_resource_selectors(spec.get("resourceSelectors"), namespace, "spec.resourceSelectors"))
    return causes


class OverridePolicyAdmission(NoOpPlugin):
    """Admission of OverridePolicy (``cluster_scoped=False``) or ClusterOverridePolicy."""

    def __init__(self, *, cluster_scoped: bool) -> None:
        self.cluster_scoped = cluster_scoped

    def _namespace(self, obj: dict[str, Any]) -> str:
        return "" if self.cluster_scoped else as_str(metadata(obj).get("namespace"))

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and not self.cluster_scoped and not spec_unchanged(obj, old, op):
            default_resource_selector_namespaces(spec.get("resourceSelectors"), self._namespace(obj))

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec_unchanged(obj, old, op):
            return []
        return validate_override_spec(spec, self._namespace(obj))

    def warnings(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[str]:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec_unchanged(obj, old, op):
            return []
        warnings: list[str] = []
        for i, rule in enumerate(as_list(spec.get("overrideRules"))):
            warnings.extend(override_warnings(as_dict(rule).get("overriders"), f"spec.overrideRules[{i}].overriders"))
        if spec.get("overrideRules") is None:
            warnings.extend(override_warnings(spec.get("overriders"), "spec.overriders"))
        return warnings
