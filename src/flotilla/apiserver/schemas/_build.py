"""Constructors for OpenAPI v3 schema fragments.

Every helper returns a *new* plain dict (JSON-compatible), so schemas built from the same helper never
share nodes and a caller may mutate one schema without affecting another.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flotilla.kube.resources import group_version

Schema = dict[str, Any]

# The grammar of a Kubernetes resource.Quantity when written as a string (e.g. "500m", "2Gi", "1e3").
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# metav1.Condition constraints (shared by every Karmada condition list).
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def _with(node: Schema, description: str, extra: Mapping[str, Any]) -> Schema:
    if description:
        node["description"] = description
    node.update(extra)
    return node


def string(description: str, **extra: Any) -> Schema:
    return _with({"type": "string"}, description, extra)


def enum(description: str, values: Iterable[str], default: str | None = None, **extra: Any) -> Schema:
    node = _with({"type": "string", "enum": list(values)}, description, extra)
    if default is not None:
        node["default"] = default
    return node


def integer(description: str, fmt: str | None = "int32", **extra: Any) -> Schema:
    node: Schema = {"type": "integer"}
    if fmt:
        node["format"] = fmt
    return _with(node, description, extra)


def int64(description: str, **extra: Any) -> Schema:
    return integer(description, "int64", **extra)


def number(description: str, **extra: Any) -> Schema:
    return _with({"type": "number", "format": "double"}, description, extra)


def boolean(description: str, **extra: Any) -> Schema:
    return _with({"type": "boolean"}, description, extra)


def timestamp(description: str, *, nullable: bool = False, **extra: Any) -> Schema:
    """An RFC 3339 time (metav1.Time / metav1.MicroTime are both serialised this way)."""
    node = _with({"type": "string", "format": "date-time"}, description, extra)
    if nullable:
        node["nullable"] = True
    return node


def byte_string(description: str, **extra: Any) -> Schema:
    return _with({"type": "string", "format": "byte"}, description, extra)


def obj(
    description: str,
    properties: Mapping[str, Schema] | None = None,
    required: Iterable[str] = (),
    *,
    open: bool = False,
    **extra: Any,
) -> Schema:
    """An object. ``open=True`` keeps fields not listed in ``properties`` (partial schemas)."""
    node: Schema = {"type": "object"}
    _with(node, description, {})
    if properties:
        node["properties"] = dict(properties)
    req = list(required)
    if req:
        node["required"] = req
    if open:
        node["x-kubernetes-preserve-unknown-fields"] = True
    node.update(extra)
    return node


def free_object(description: str, **extra: Any) -> Schema:
    """An object whose content is not described (any fields accepted)."""
    return obj(description, open=True, **extra)


def any_value(description: str, **extra: Any) -> Schema:
    """Any JSON value (string, number, object, list...)."""
    return _with({"x-kubernetes-preserve-unknown-fields": True}, description, extra)


def array(description: str, items: Schema, **extra: Any) -> Schema:
    return _with({"type": "array", "items": items}, description, extra)


def string_list(description: str, item_description: str = "", **extra: Any) -> Schema:
    return array(description, string(item_description), **extra)


def string_set(description: str, item_description: str = "", **extra: Any) -> Schema:
    """A list of unique strings merged element-wise by strategic merge patch (e.g. finalizers)."""
    node = string_list(description, item_description, **extra)
    node["x-kubernetes-list-type"] = "set"
    node["x-kubernetes-patch-strategy"] = "merge"
    return node


def keyed_list(
    description: str, items: Schema, *keys: str, patch_strategy: str = "merge", **extra: Any
) -> Schema:
    """A list of objects identified by ``keys``; the first key is the strategic-merge-patch merge key."""
    node = array(description, items, **extra)
    node["x-kubernetes-list-type"] = "map"
    node["x-kubernetes-list-map-keys"] = list(keys)
    node["x-kubernetes-patch-merge-key"] = keys[0]
    node["x-kubernetes-patch-strategy"] = patch_strategy
    return node


def atomic_list(description: str, items: Schema, **extra: Any) -> Schema:
    """A list replaced as a whole by every kind of patch."""
    node = array(description, items, **extra)
    node["x-kubernetes-list-type"] = "atomic"
    return node


def map_of(description: str, values: Schema, **extra: Any) -> Schema:
    return _with({"type": "object", "additionalProperties": values}, description, extra)


def string_map(description: str, **extra: Any) -> Schema:
    return map_of(description, {"type": "string"}, **extra)


def int_or_string(description: str, **extra: Any) -> Schema:
    node: Schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    return _with(node, description, extra)


def quantity(description: str, **extra: Any) -> Schema:
    """A resource quantity: a number or a string such as ``"250m"`` / ``"1Gi"``."""
    node = int_or_string(description, **extra)
    node["pattern"] = QUANTITY_PATTERN
    return node


def quantity_map(description: str, **extra: Any) -> Schema:
    return map_of(description, quantity(""), **extra)


def kind_schema(
    group: str,
    version: str,
    kind: str,
    description: str,
    properties: Mapping[str, Schema],
    required: Iterable[str] = (),
    *,
    metadata: Schema | None = None,
) -> Schema:
    """The top-level schema of a kind: apiVersion, kind, metadata plus the kind's own fields."""
    from flotilla.apiserver.schemas.meta import object_meta

    gv = group_version(group, version)
    props: dict[str, Schema] = {
        "apiVersion": string(f"API group and version the object is written in: {gv!r}."),
        "kind": string(f"Type of the object: {kind!r}."),
        "metadata": metadata if metadata is not None else object_meta(),
    }
    props.update(properties)
    node = obj(description, props, required)
    node["x-kubernetes-group-version-kind"] = [{"group": group, "version": version, "kind": kind}]
    return node
