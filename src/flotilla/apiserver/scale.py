"""The ``/scale`` subresource: autoscaling/v1 Scale views of objects with replicas."""

from __future__ import annotations

from typing import Any

from flotilla.apiserver import errors
from flotilla.apiserver.resource_types import ResourceType


def _get(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in [p for p in path.split(".") if p]:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _selector_string(sel: Any) -> str:
    if isinstance(sel, str):
        return sel
    if not isinstance(sel, dict):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        op = expr.get("operator")
        key = expr.get("key")
        vals = ",".join(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({vals})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({vals})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def scale_from_object(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    md = obj.get("metadata", {})
    selector_path = rt.scale_selector_path or ".spec.selector"
    status: dict[str, Any] = {"replicas": int(_get(obj, rt.scale_status_path) or 0)}
    sel = _selector_string(_get(obj, selector_path))
    if sel:
        status["selector"] = sel
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in md},
        "spec": {"replicas": int(_get(obj, rt.scale_spec_path) or 0)},
        "status": status,
    }


def scale_to_patch(rt: ResourceType, scale: Any) -> dict[str, Any]:
    if not isinstance(scale, dict):
        raise errors.bad_request("a Scale must be a JSON object")
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid(rt, (scale.get("metadata") or {}).get("name", ""), [
            errors.Cause("spec.replicas", f"Invalid value: {replicas!r}: must be greater than or equal to 0")])
    parts = [p for p in rt.scale_spec_path.split(".") if p]
    patch: dict[str, Any] = {}
    cur = patch
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = replicas
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv:
        patch.setdefault("metadata", {})["resourceVersion"] = rv
    return patch
