"""Builders for the objects the interpreter tests use."""

from __future__ import annotations

from typing import Any

GEN_ANNOTATION = "resourcetemplate.karmada.io/generation"


def obj(api_version: str, kind: str, name: str = "x", namespace: str | None = "default", **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta.update(fields.pop("metadata", {}))
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **fields}


def deployment(replicas: int | None = 3, *, generation: int = 1, status: dict[str, Any] | None = None,
               template_generation: str | None = "1", labels: dict[str, str] | None = None,
               pod_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"generation": generation}
    if template_generation is not None:
        meta["annotations"] = {GEN_ANNOTATION: template_generation}
    if labels:
        meta["labels"] = labels
    spec: dict[str, Any] = {"template": {"spec": pod_spec or {"containers": [{"name": "app", "image": "nginx"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    out = obj("apps/v1", "Deployment", metadata=meta, spec=spec)
    if status is not None:
        out["status"] = status
    return out


def workload(kind: str, **kw: Any) -> dict[str, Any]:
    d = deployment(**kw)
    d["kind"] = kind
    return d


def item(cluster: str, status: dict[str, Any] | None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"clusterName": cluster, "applied": True}
    if status is not None:
        out["status"] = status
    out.update(kw)
    return out
