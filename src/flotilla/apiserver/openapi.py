"""OpenAPI v3 documents, per group-version, built from the served types' schemas.

kubectl needs, per kind, a PATCH operation tagged with ``x-kubernetes-group-version-kind`` that takes
a ``fieldValidation`` query parameter (then ``kubectl apply`` validates server-side), and a schema
tagged with the GVK list (``kubectl explain``). Strategic merge patch is deliberately not listed in
the request bodies: kubectl then computes SMPs from its compiled-in types, which is exact.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.type_registry import TypeRegistry

_QUERY = ("dryRun", "fieldManager", "fieldValidation", "pretty")


def schema_name(rt: ResourceType) -> str:
    if rt.group == "":
        return f"io.k8s.api.core.{rt.version}.{rt.kind}"
    if "." not in rt.group:
        return f"io.k8s.api.{rt.group}.{rt.version}.{rt.kind}"
    return ".".join(reversed(rt.group.split("."))) + f".{rt.version}.{rt.kind}"


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _params(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}} for n in names]


def _ref(rt: ResourceType) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{schema_name(rt)}"}


def _json_body(rt: ResourceType) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": _ref(rt)}, "application/yaml": {"schema": _ref(rt)}}}


def _ok(rt: ResourceType) -> dict[str, Any]:
    return {"200": {"description": "OK", "content": {"application/json": {"schema": _ref(rt)}}}}


def _operations(rt: ResourceType) -> dict[str, Any]:
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    base = rt.url_prefix
    coll = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    item = f"{coll}/{{name}}"
    path_params = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    if rt.namespaced:
        path_params.append({"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}})
    coll_params = path_params[1:]

    def op(action: str, verb_id: str, **extra: Any) -> dict[str, Any]:
        return {
            "operationId": f"{verb_id}{rt.kind}",
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "responses": extra.pop("responses", _ok(rt)),
            **extra,
        }

    paths: dict[str, Any] = {
        coll: {
            "parameters": coll_params,
            "get": op("list", "list", parameters=_params(("labelSelector", "fieldSelector", "limit", "continue",
                                                             "resourceVersion", "watch"))),
            "post": op("post", "create", parameters=_params(_QUERY), requestBody=_json_body(rt)),
        },
        item: {
            "parameters": path_params,
            "get": op("get", "read"),
            "put": op("put", "replace", parameters=_params(_QUERY), requestBody=_json_body(rt)),
            "patch": op(
                "patch",
                "patch",
                parameters=_params((*_QUERY, "force")),
                requestBody={"content": {
                    "application/json-patch+json": {"schema": {"type": "object"}},
                    "application/merge-patch+json": {"schema": {"type": "object"}},
                    "application/apply-patch+yaml": {"schema": {"type": "object"}},
                }},
            ),
            "delete": op("delete", "delete", parameters=_params(("dryRun", "propagationPolicy",
                                                                 "gracePeriodSeconds"))),
        },
    }
    if rt.has_status:
        paths[f"{item}/status"] = {
            "parameters": path_params,
            "get": op("get", "read", operationId=f"read{rt.kind}Status"),
            "patch": op("patch", "patch", operationId=f"patch{rt.kind}Status", parameters=_params((*_QUERY, "force"))),
        }
    return paths


def _schema(rt: ResourceType) -> dict[str, Any]:
    schema = dict(rt.schema) if rt.schema else {
        "type": "object",
        "description": f"{rt.kind} is served by Flotilla without a published schema.",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of this representation of the object."},
            "kind": {"type": "string", "description": "Kind is the REST resource this object represents."},
            "metadata": {"type": "object", "description": "Standard object metadata.",
                         "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    schema["x-kubernetes-group-version-kind"] = [{"group": rt.group, "version": rt.version, "kind": rt.kind}]
    return schema


def group_version_document(types: TypeRegistry, group: str, version: str) -> dict[str, Any] | None:
    rts = types.in_group_version(group, version)
    if not rts:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in rts:
        paths.update(_operations(rt))
        schemas[schema_name(rt)] = _schema(rt)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Flotilla", "version": f"{group or 'core'}/{version}"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


class OpenAPICache:
    """Serialised documents and their hashes, rebuilt when the type registry changes."""

    def __init__(self, types: TypeRegistry) -> None:
        self.types = types
        self._generation = -1
        self._docs: dict[str, bytes] = {}
        self._hashes: dict[str, str] = {}

    def _refresh(self) -> None:
        if self._generation == self.types.generation:
            return
        docs: dict[str, bytes] = {}
        hashes: dict[str, str] = {}
        for g in self.types.groups():
            for v in self.types.versions(g):
                doc = group_version_document(self.types, g, v)
                if doc is None:
                    continue
                raw = orjson.dumps(doc)
                key = gv_path(g, v)
                docs[key] = raw
                hashes[key] = hashlib.sha512(raw).hexdigest()[:64].upper()
        self._docs, self._hashes = docs, hashes
        self._generation = self.types.generation

    def root(self) -> dict[str, Any]:
        self._refresh()
        return {"paths": {k: {"serverRelativeURL": f"/openapi/v3/{k}?hash={h}"} for k, h in self._hashes.items()}}

    def document(self, gv: str) -> tuple[bytes, str] | None:
        self._refresh()
        raw = self._docs.get(gv)
        if raw is None:
            return None
        return raw, self._hashes[gv]
