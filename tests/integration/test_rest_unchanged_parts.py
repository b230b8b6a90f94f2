"""Writes skip checking what they did not change; the answers must be exactly those of checking everything.

Two ResourceStorages over two memory stores get the same sequence of random writes (merge patches of the main
resource and of its status, JSON patches, full updates), valid or not: one as the server runs (parts a merge
patch does not name, or that compare equal to the stored object, are not checked again), the other with
every check on the whole object, as before those shortcuts. Every write must give the same object or the same
error (code, reason, message, causes), and the stores must end up equal.
"""

from __future__ import annotations

import copy
import random
import uuid
from typing import Any

import pytest

from flotilla.apiserver.admission import Admission
from flotilla.apiserver.builtin_kinds import BUILTIN_TYPES
from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.rest import JSON_PATCH, MERGE_PATCH, RequestContext, ResourceStorage
from flotilla.apiserver.type_registry import TypeRegistry
from flotilla.apiserver.webhooks import register_karmada_admission
from flotilla.storage.memory import MemoryStore

_JUNK: list[Any] = [None, True, 0, 7, 2.5, "", "x", "Always", [], {}, [1], {"a": 1}, {"unknownField": 1}]


def _storage(full_checks: bool) -> ResourceStorage:
    admission = Admission()
    register_karmada_admission(admission, allow_no_execute_taint_policy=True, existing_rics=lambda: {},
                               policy_finalizers=False)
    storage = ResourceStorage(MemoryStore(), TypeRegistry(BUILTIN_TYPES), admission)
    # a hook, as every server has: writes then leave the revision's shared object behind, which the next
    # write reads as its (read-only) stored object
    storage.after_write.append(lambda rt, event, obj: None)
    if full_checks:  # the server before the shortcuts: nothing is known to be unchanged
        storage._unchanged = lambda rt, obj, old: None  # type: ignore[method-assign]
        storage._patched_parts = lambda *a, **k: None  # type: ignore[method-assign]
    return storage


def _objects() -> list[tuple[tuple[str, str, str], dict[str, Any]]]:
    return [
        (("apps", "v1", "deployments"), {
            "metadata": {"name": "d", "labels": {"app": "d"}, "annotations": {"n": "1"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                     "strategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": {"app": "d"}},
                                  "spec": {"containers": [{"name": "c", "image": "i:1", "ports": [
                                      {"containerPort": 80}]}]}}}}),
        (("work.karmada.io", "v1alpha2", "resourcebindings"), {
            "metadata": {"name": "rb", "labels": {"a": "b"}},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "namespace": "default"},
                     "replicas": 2, "clusters": [{"name": "m1", "replicas": 2}],
                     "placement": {"clusterAffinity": {"clusterNames": ["m1", "m2"]}},
                     "failover": {"cluster": {"purgeMode": "Directly"}}}}),
        (("work.karmada.io", "v1alpha1", "works"), {
            "metadata": {"name": "w", "labels": {"a": "b"}},
            "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": "x"}, "data": {"k": "v"}}]}}}),
        (("", "v1", "configmaps"), {"metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"k": "v"}}),
        (("", "v1", "services"), {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}],
                                                                       "type": "ClusterIP"}}),
    ]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    return out


def _merge_patch(obj: dict[str, Any], rnd: random.Random, status: bool) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for _ in range(rnd.randint(1, 3)):
        candidates = [p for p in _paths(obj) if p[0] not in ("apiVersion", "kind")]
        if status or rnd.random() < 0.15:
            candidates = [("status", rnd.choice(["replicas", "conditions", "aggregatedStatus", "x",
                                                "manifestStatuses", "loadBalancer"]))]
        if rnd.random() < 0.2:
            candidates.append(("metadata", "resourceVersion"))
        path = rnd.choice(candidates)
        value: Any = copy.deepcopy(rnd.choice(_JUNK))
        if path == ("metadata", "resourceVersion"):
            value = obj["metadata"].get("resourceVersion") if rnd.random() < 0.8 else "1"
        elif rnd.random() < 0.4:  # often a plausible value: the same as now, or a copy of a sibling's
            cur: Any = obj
            for k in path:
                cur = cur.get(k) if isinstance(cur, dict) else None
            value = copy.deepcopy(cur) if cur is not None else value
        node = patch
        for k in path[:-1]:
            node = node.setdefault(k, {}) if isinstance(node.get(k, {}), dict) else node
        node[path[-1]] = value
    return patch


async def _do(storage: ResourceStorage, rt: Any, op: str, name: str, body: Any, validation: str) -> Any:
    ctx = RequestContext(field_validation=validation)
    try:
        if op == "merge":
            result, _ = await storage.patch(rt, "default", name, MERGE_PATCH, copy.deepcopy(body), ctx)
        elif op == "status":
            result, _ = await storage.patch(rt, "default", name, MERGE_PATCH, copy.deepcopy(body), ctx,
                                            subresource="status")
        elif op == "json":
            result, _ = await storage.patch(rt, "default", name, JSON_PATCH, copy.deepcopy(body), ctx)
        else:
            result = await storage.update(rt, "default", name, copy.deepcopy(body), ctx)
    except ApiError as e:
        return ("error", e.code, e.reason, e.message, e.status())
    return ("ok", _comparable(result), sorted(ctx.warnings))


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """Without the creation time (the servers are not created in the same second, necessarily)."""
    md = dict(obj["metadata"])
    md.pop("creationTimestamp", None)
    return {**obj, "metadata": md}


class _Uuids:
    """uuid4 made deterministic per server: both servers get the same ids in the same order."""

    def __init__(self) -> None:
        self.counters = {"fast": 0, "full": 0}
        self.active = "fast"

    def __call__(self) -> uuid.UUID:
        self.counters[self.active] += 1
        return uuid.UUID(int=self.counters[self.active])


@pytest.mark.parametrize("seed", range(6))
async def test_skipping_unchanged_parts_answers_as_checking_everything(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    uuids = _Uuids()
    monkeypatch.setattr(uuid, "uuid4", uuids)
    rnd = random.Random(seed)
    fast, full = _storage(False), _storage(True)
    try:
        for storage, which in ((fast, "fast"), (full, "full")):
            uuids.active = which
            ns = storage.types.lookup("", "v1", "namespaces")
            await storage.create(ns, None, {"metadata": {"name": "default"}})
        for (g, v, p), body in _objects():
            rt = fast.types.lookup(g, v, p)
            rt_full = full.types.lookup(g, v, p)
            name = body["metadata"]["name"]
            uuids.active = "fast"
            await fast.create(rt, "default", copy.deepcopy(body))
            uuids.active = "full"
            await full.create(rt_full, "default", copy.deepcopy(body))
            for _ in range(60):
                current = await fast.get(rt, "default", name)
                op = rnd.choice(["merge", "merge", "status", "json", "update"])
                validation = rnd.choice(["Strict", "Warn", "Ignore"])
                if op in ("merge", "status"):
                    req: Any = _merge_patch(current, rnd, op == "status")
                elif op == "json":
                    path = rnd.choice(_paths(current))
                    req = [{"op": rnd.choice(["replace", "add", "remove"]), "path": "/" + "/".join(map(str, path)),
                            "value": copy.deepcopy(rnd.choice(_JUNK))}]
                else:
                    req = copy.deepcopy(current)
                    if rnd.random() < 0.2:
                        req["metadata"].pop("resourceVersion", None)
                    node = req
                    path = rnd.choice(_paths(req))
                    for k in path[:-1]:
                        node = node[k]
                    if rnd.random() < 0.7:
                        node[path[-1]] = copy.deepcopy(rnd.choice(_JUNK))
                uuids.active = "fast"
                a = await _do(fast, rt, op, name, req, validation)
                uuids.active = "full"
                b = await _do(full, rt_full, op, name, req, validation)
                assert a == b, (op, req, a, b)
            assert _comparable(await fast.get(rt, "default", name)) == _comparable(
                await full.get(rt_full, "default", name))
    finally:
        await fast.store.close()
        await full.store.close()
