"""Structural-schema checks of objects against OpenAPI v3 schemas (as kube-apiserver does for CRDs).

Three jobs: find unknown fields (fieldValidation=Strict/Warn), prune them (what the server stores),
and report type/enum/required violations with Kubernetes field paths (422 causes).
"""

from __future__ import annotations

from typing import Any

from flotilla.apiserver.errors import Cause

_ALWAYS_KNOWN_TOP = ("apiVersion", "kind", "metadata")
_SERVER_SET_TOP = ("apiVersion", "kind")  # the server sets these from the URL; metadata is type-checked
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _props(schema: dict[str, Any]) -> dict[str, Any] | None:
    props = schema.get("properties")
    return props if isinstance(props, dict) else None


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "", *, top: bool = True) -> list[str]:
    """Paths of fields in ``obj`` the schema does not declare (``.spec.foo`` style, as Kubernetes prints)."""
    found: list[str] = []
    if not schema or schema.get(_PRESERVE):
        return found
    if isinstance(obj, dict):
        props = _props(schema)
        addl = schema.get("additionalProperties")
        for k, v in obj.items():
            if top and k in _ALWAYS_KNOWN_TOP:
                continue
            if props is not None and k in props:
                found.extend(unknown_fields(v, props[k], _join(path, k), top=False))
            elif isinstance(addl, dict):
                found.extend(unknown_fields(v, addl, _join(path, k), top=False))
            elif addl is True or (props is None and schema.get("type") != "object"):
                continue
            elif props is not None or schema.get("type") == "object":
                found.append(_join(path, k))
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(obj):
                found.extend(unknown_fields(v, items, f"{path}[{i}]", top=False))
    return found


def prune(obj: Any, schema: dict[str, Any], *, top: bool = True) -> None:
    """Drop undeclared fields in place (keeps apiVersion/kind/metadata at the top)."""
    if not schema or schema.get(_PRESERVE):
        return
    if isinstance(obj, dict):
        props = _props(schema)
        addl = schema.get("additionalProperties")
        for k in list(obj):
            if top and k in _ALWAYS_KNOWN_TOP:
                continue
            if props is not None and k in props:
                prune(obj[k], props[k], top=False)
            elif isinstance(addl, dict):
                prune(obj[k], addl, top=False)
            elif addl is True:
                continue
            elif props is not None or schema.get("type") == "object":
                del obj[k]
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for v in obj:
                prune(v, items, top=False)


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    if value is None:
        return bool(schema.get("nullable")) or t is None
    if schema.get(_INT_OR_STRING):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    if t is None:
        return True
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    return True


_TYPE_NAMES = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    dict: "object",
    list: "array",
    type(None): "null",
}


def schema_errors(obj: Any, schema: dict[str, Any], path: str = "", *, top: bool = True) -> list[Cause]:
    """Type, enum, required, pattern-free checks; paths like ``spec.failover.cluster.purgeMode``."""
    causes: list[Cause] = []
    if not schema:
        return causes
    if not top and not _type_ok(obj, schema):
        got = _TYPE_NAMES.get(type(obj), type(obj).__name__)
        want = "integer or string" if schema.get(_INT_OR_STRING) else schema.get("type")
        causes.append(Cause(path, f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"',
                            "FieldValueTypeInvalid"))
        return causes
    enum = schema.get("enum")
    if enum is not None and obj is not None and obj not in enum:
        allowed = ", ".join(f'"{e}"' for e in enum)
        causes.append(Cause(path, f'Unsupported value: "{obj}": supported values: {allowed}', "FieldValueNotSupported"))
    if isinstance(obj, dict):
        props = _props(schema) or {}
        for req in schema.get("required", ()) or ():
            if req not in obj or (obj[req] is None and not props.get(req, {}).get("nullable")):
                causes.append(Cause(_join(path, req), "Required value", "FieldValueRequired"))
        addl = schema.get("additionalProperties")
        for k, v in obj.items():
            if top and k in _SERVER_SET_TOP:
                continue
            if k in props:
                causes.extend(schema_errors(v, props[k], _join(path, k), top=False))
            elif isinstance(addl, dict):
                causes.extend(schema_errors(v, addl, _join(path, k), top=False))
        _bounds(obj, schema, path, causes, len(obj), "properties")
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(obj):
                causes.extend(schema_errors(v, items, f"{path}[{i}]", top=False))
        _bounds(obj, schema, path, causes, len(obj), "items")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is not None and obj < lo:
            causes.append(Cause(path, f"Invalid value: {obj}: {path} in body should be greater than or equal to {lo}"))
        if hi is not None and obj > hi:
            causes.append(Cause(path, f"Invalid value: {obj}: {path} in body should be less than or equal to {hi}"))
    elif isinstance(obj, str):
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        if lo is not None and len(obj) < lo:
            causes.append(Cause(path, f'Invalid value: "{obj}": {path} in body should be at least {lo} chars long'))
        if hi is not None and len(obj) > hi:
            causes.append(Cause(path, f'Too long: may not be more than {hi} bytes', "FieldValueTooLong"))
    return causes


def _bounds(obj: Any, schema: dict[str, Any], path: str, causes: list[Cause], n: int, what: str) -> None:
    lo = schema.get(f"min{what.capitalize()}") if what == "items" else schema.get("minProperties")
    hi = schema.get(f"max{what.capitalize()}") if what == "items" else schema.get("maxProperties")
    if lo is not None and n < lo:
        causes.append(Cause(path, f"Invalid value: {n}: {path} in body should have at least {lo} {what}"))
    if hi is not None and n > hi:
        causes.append(Cause(path, f"Too many: {n}: must have at most {hi} {what}", "FieldValueTooMany"))


def apply_defaults(obj: Any, schema: dict[str, Any], *, top: bool = True) -> None:
    """Structural defaulting (as for CRDs): a missing property with a ``default`` gets it, recursively.

    Defaults apply only inside objects that exist, never create parents, and never override a value.
    """
    if not schema or not isinstance(obj, (dict, list)):
        return
    if isinstance(obj, dict):
        props = _props(schema) or {}
        for k, sub in props.items():
            if top and k in _ALWAYS_KNOWN_TOP:
                continue
            if not isinstance(sub, dict):
                continue
            if k not in obj and "default" in sub:
                import copy

                obj[k] = copy.deepcopy(sub["default"])
            if k in obj:
                apply_defaults(obj[k], sub, top=False)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for k, v in obj.items():
                if k not in props:
                    apply_defaults(v, addl, top=False)
    else:
        items = schema.get("items")
        if isinstance(items, dict):
            for v in obj:
                apply_defaults(v, items, top=False)
