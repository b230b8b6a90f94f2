"""Discovery documents: legacy (/api, /apis, /api/v1, /apis/g/v) and aggregated v2."""

from __future__ import annotations

from typing import Any

from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.type_registry import TypeRegistry
from flotilla.kube.resources import group_version

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
SUBRESOURCE_VERBS = ["get", "patch", "update"]


def wants_aggregated(accept: str) -> bool:
    for part in accept.split(","):
        params = [p.strip() for p in part.split(";")]
        if params[0] != "application/json":
            continue
        kv = dict(p.split("=", 1) for p in params[1:] if "=" in p)
        if kv.get("g") == "apidiscovery.k8s.io" and kv.get("v") == "v2" and kv.get("as") == "APIGroupDiscoveryList":
            return True
    return False


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _gv(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}", "version": version}


def api_group(types: TypeRegistry, group: str) -> dict[str, Any]:
    versions = [_gv(group, v) for v in types.versions(group)]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions[0] if versions else {},
    }


def api_group_list(types: TypeRegistry) -> dict[str, Any]:
    groups = [api_group(types, g) for g in types.groups() if g]
    for g in groups:
        del g["kind"], g["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_resource_list(types: TypeRegistry, group: str, version: str) -> dict[str, Any] | None:
    rts = types.in_group_version(group, version)
    if not rts:
        return None
    resources: list[dict[str, Any]] = []
    for rt in rts:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        if rt.has_status:
            resources.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                              "kind": rt.kind, "verbs": SUBRESOURCE_VERBS})
        if rt.has_scale:
            resources.append({"name": f"{rt.plural}/scale", "singularName": "", "namespaced": rt.namespaced,
                              "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": SUBRESOURCE_VERBS})
        if rt.group == "" and rt.kind == "Namespace":
            resources.append({"name": "namespaces/finalize", "singularName": "", "namespaced": False,
                              "kind": "Namespace", "verbs": ["update"]})
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(group, version),
        "resources": resources,
    }


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "singularResource": rt.singular,
        "responseKind": kind,
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subs = []
    if rt.has_status:
        subs.append({"subresource": "status", "responseKind": kind, "verbs": SUBRESOURCE_VERBS})
    if rt.has_scale:
        subs.append({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                     "verbs": SUBRESOURCE_VERBS})
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(types: TypeRegistry, core: bool) -> dict[str, Any]:
    items = []
    groups = [""] if core else [g for g in types.groups() if g]
    for g in groups:
        versions = []
        for v in types.versions(g):
            versions.append({
                "version": v,
                "freshness": "Current",
                "resources": [_aggregated_resource(rt) for rt in types.in_group_version(g, v)],
            })
        if versions:
            items.append({"metadata": {"name": g}, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}
