"""The dependencies distributor: a workload's ConfigMaps, Secrets, PVCs... follow it (D15: and leave last).

For a ResourceBinding with ``spec.propagateDeps`` (gate ``PropagateDeps``), the interpreter's
InterpretDependency hook names the objects its template needs. The distributor records them in the
binding's ``resourcebinding.karmada.io/dependencies`` annotation, puts its finalizer
``karmada.io/binding-dependencies-distributor`` on the binding, and creates or updates an *attached*
ResourceBinding per dependency whose ``spec.requiredBy`` lists the clusters of this binding
(:mod:`flotilla.propagation.attached_bindings`: ``spec.clusters`` plus, D15, the clusters where the old
copy is kept by a graceful eviction). The binding controller ships each dependency to those clusters.
When a dependency is no longer needed, or the binding stops propagating dependencies or is deleted,
its entry is removed; an attached binding nobody requires any more is deleted.

Triggers: binding add (once scheduled), generation changes of bindings that propagate (or stopped
propagating) dependencies, and any change of an object some binding depends on (informers per
dependency type, started on demand).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flotilla.api import labels as L
from flotilla.api.resources import RESOURCE_BINDINGS
from flotilla.client import ApiException, Informer, is_already_exists, is_conflict, is_not_found
from flotilla.client.events import NORMAL, WARNING
from flotilla.interpreter import Operation
from flotilla.interpreter.operations import GVK, InterpreterError
from flotilla.kube.jsondiff import with_precondition
from flotilla.kube.objects import meta_of, spec_of
from flotilla.kube.selectors import SelectorError, label_selector_from_dict
from flotilla.policy.claims import specification_changed
from flotilla.policy.matching import is_deleting
from flotilla.policy.naming import DEPENDED_BY_LABEL_KEY_PREFIX, depended_by_label_key
from flotilla.propagation.attached_bindings import (
    AttachedUpdate,
    attach_update,
    build_attached_binding,
    dependencies_annotation,
    dependency_matches,
    detach_update,
    is_orphan,
    parse_dependencies_annotation,
)
from flotilla.runtime.base import Controller, ControllerContext, settle_deleted, split_key
from flotilla.runtime.interpreters import shared_interpreter
from flotilla.runtime.patching import patch_with_retry
from flotilla.runtime.typed_informers import TypedInformers, warn_on_failure

log = logging.getLogger(__name__)

__all__ = ["DependenciesDistributor"]

GET_DEPENDENCIES_FAILED = "GetDependenciesFailed"
SYNC_SUCCEED = "SyncScheduleResultToDependenciesSucceed"
SYNC_FAILED = "SyncScheduleResultToDependenciesFailed"
DEPENDENCY_POLICY_CONFLICT = "DependencyPolicyConflict"

_DEPENDED_BY_INDEX = "dependencies/depended-by"
_SYNC_TIMEOUT = 30.0


def _depended_by_keys(obj: dict[str, Any]) -> list[str]:
    labels = meta_of(obj).get("labels")
    if not isinstance(labels, Mapping):
        return []
    return [k for k in labels if isinstance(k, str) and k.startswith(DEPENDED_BY_LABEL_KEY_PREFIX)]


def _key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class DependenciesDistributor(Controller):
    name = "dependencies-distributor"
    workers = 2

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self._typed = TypedInformers(self, "dependencies distributor", sync_timeout=_SYNC_TIMEOUT)
        self._watched: set[tuple[str, str]] = set()
        self._deleted: dict[str, dict[str, Any]] = {}
        # the dependencies last computed per binding (the annotation in the cache may lag behind)
        self._dependencies: dict[str, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ setup and event handlers

    def setup(self) -> None:
        if not self.options.gate("PropagateDeps"):
            log.info("dependencies distributor: feature gate PropagateDeps is off")
            return
        self.rbs = self.informer(RESOURCE_BINDINGS)
        try:
            self.rbs.add_indexer(_DEPENDED_BY_INDEX, _depended_by_keys)
        except ValueError:
            pass
        self.rbs.add_handler(on_add=self._on_binding_add, on_update=self._on_binding_update,
                             on_delete=self._on_binding_delete)
        self.interpreters = shared_interpreter(self.ctx)

    def _on_binding_add(self, binding: Mapping[str, Any]) -> None:
        spec = spec_of(binding)
        if spec.get("propagateDeps") is True and (spec.get("clusters") or is_deleting(binding)):
            self.enqueue_object(dict(binding))

    def _on_binding_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if meta_of(old).get("generation") == meta_of(new).get("generation"):
            return
        if spec_of(old).get("propagateDeps") is True or spec_of(new).get("propagateDeps") is True:
            self.enqueue_object(dict(new))

    def _on_binding_delete(self, binding: Mapping[str, Any]) -> None:
        if spec_of(binding).get("propagateDeps") is True or parse_dependencies_annotation(binding):
            key = _key(meta_of(binding).get("namespace"), str(meta_of(binding).get("name")))
            self._deleted[key] = dict(binding)
            self.enqueue(key)
        # an attached binding is gone: the bindings it still listed re-attach their dependency if needed
        for item in spec_of(binding).get("requiredBy") or []:
            if isinstance(item, Mapping) and item.get("namespace") and item.get("name"):
                self.enqueue(_key(str(item["namespace"]), str(item["name"])))

    def _on_dependency_event(self, obj: Mapping[str, Any]) -> None:
        namespace = str(meta_of(obj).get("namespace") or "")
        for binding in self.rbs.store.by_index("namespace", namespace) if namespace else []:
            if is_deleting(binding):
                continue
            key = _key(namespace, str(meta_of(binding).get("name")))
            deps = self._dependencies.get(key) or parse_dependencies_annotation(binding)
            if deps and dependency_matches(deps, obj):
                self.enqueue(key)

    def _on_dependency_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if not specification_changed(old, new):
            return
        if meta_of(old).get("labels") != meta_of(new).get("labels"):
            self._on_dependency_event(old)
        self._on_dependency_event(new)

    # ------------------------------------------------------------------ typed informers

    async def _informer(self, api_version: str, kind: str, *, watch_dependents: bool) -> Informer | None:
        tkey = (api_version, kind)
        inf = await self._typed.informer(api_version, kind)
        if inf is None:
            return None
        if watch_dependents and tkey not in self._watched:
            self._watched.add(tkey)
            inf.add_handler(on_add=self._on_dependency_event, on_update=self._on_dependency_update,
                            on_delete=self._on_dependency_event)
        return inf

    async def _get(self, api_version: str, kind: str, namespace: str | None, name: str,
                   *, watch_dependents: bool = False) -> dict[str, Any] | None:
        if await self._informer(api_version, kind, watch_dependents=watch_dependents) is None:
            return None
        _, obj = await self._typed.get(api_version, kind, namespace, name)
        return obj

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> float | None:
        namespace, name = split_key(key)
        if namespace is None:
            return None
        binding = self.rbs.store.get(key)
        if await settle_deleted(self._deleted, key, binding, self._detach_all):
            return None
        if spec_of(binding).get("propagateDeps") is not True or is_deleting(binding):
            await self._detach_all(binding)
            await self._remove_finalizer(binding)
            return None
        with warn_on_failure(self, lambda: binding, SYNC_FAILED, "Syncing the schedule result to the dependencies"):
            changed = await self._sync(binding)
        if changed:
            self.ctx.recorder.event(binding, NORMAL, SYNC_SUCCEED,
                                    "Schedule result synced to the dependencies.")
        return None

    async def _sync(self, binding: Mapping[str, Any]) -> bool:
        """Record the dependencies and attach them; True when something was written."""
        ref = spec_of(binding).get("resource")
        ref = ref if isinstance(ref, Mapping) else {}
        template = await self._get(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""),
                                   ref.get("namespace") or None, str(ref.get("name") or ""))
        if template is None:
            return False  # the template is gone: the binding follows it (garbage collector)
        interpreter = self.interpreters.get()
        if not interpreter.hook_enabled(GVK.of(template), Operation.INTERPRET_DEPENDENCY):
            return False
        try:
            dependencies = await interpreter.offload(Operation.INTERPRET_DEPENDENCY, template,
                                                     lambda: interpreter.get_dependencies(template))
        except InterpreterError as e:
            self.ctx.recorder.event(template, WARNING, GET_DEPENDENCIES_FAILED, str(e))
            raise
        namespace = str(meta_of(binding).get("namespace"))
        name = str(meta_of(binding).get("name"))
        self._dependencies[_key(namespace, name)] = [dict(d) for d in dependencies]
        annotation = dependencies_annotation(dependencies)

        def record(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            meta = meta_of(obj)
            finalizers = list(meta.get("finalizers") or [])
            annotations = meta.get("annotations") or {}
            patch: dict[str, Any] = {}
            if L.BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER not in finalizers:
                patch["finalizers"] = [*finalizers, L.BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER]
            if annotations.get(L.DEPENDENCIES_ANNOTATION) != annotation:
                patch["annotations"] = {L.DEPENDENCIES_ANNOTATION: annotation}
            return with_precondition({"metadata": patch}, obj) if patch else None

        before = meta_of(binding).get("resourceVersion")
        updated = await patch_with_retry(self.client, RESOURCE_BINDINGS, binding, name, namespace, record)
        if updated is None:
            return False
        wrote = meta_of(updated).get("resourceVersion") != before
        binding = updated

        # attached bindings no dependency refers to any more
        for attached in self._attached_to(namespace, name):
            if is_orphan(attached, dependencies, self._lookup_cached):
                wrote = await self._detach(attached, namespace, name) or wrote

        for dep in dependencies:
            for obj in await self._dependency_objects(dep):
                wrote = await self._attach(binding, obj) or wrote
        return wrote

    def _lookup_cached(self, api_version: str, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        inf = self._typed.started(api_version, kind)
        return None if inf is None else inf.store.get(_key(namespace or None, name))

    async def _dependency_objects(self, dep: Mapping[str, Any]) -> list[dict[str, Any]]:
        api_version, kind = str(dep.get("apiVersion") or ""), str(dep.get("kind") or "")
        namespace = str(dep.get("namespace") or "")
        if dep.get("name"):
            obj = await self._get(api_version, kind, namespace or None, str(dep["name"]), watch_dependents=True)
            return [obj] if obj is not None else []
        inf = await self._informer(api_version, kind, watch_dependents=True)
        if inf is None or dep.get("labelSelector") is None:
            return []
        try:
            selector = label_selector_from_dict(dep["labelSelector"])
        except SelectorError as e:
            raise ApiException(422, "Invalid", f"dependency {kind} label selector: {e}") from e
        objs = inf.store.by_index("namespace", namespace) if namespace else inf.store.list()
        return [o for o in objs if selector.matches({str(k): str(v) for k, v in
                                                     (meta_of(o).get("labels") or {}).items()})]

    def _attached_to(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self.rbs.store.by_index(_DEPENDED_BY_INDEX, depended_by_label_key(namespace, name))

    def _referrers(self, required_by: Any, current: Mapping[str, Any] | None = None) -> list[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        cur_key = None if current is None else (meta_of(current).get("namespace"), meta_of(current).get("name"))
        for item in required_by if isinstance(required_by, list) else []:
            if not isinstance(item, Mapping):
                continue
            if cur_key is not None and (item.get("namespace"), item.get("name")) == cur_key:
                out.append(current)  # type: ignore[arg-type]
                continue
            rb = self.rbs.store.get(_key(item.get("namespace") or None, str(item.get("name"))))
            if rb is not None:
                out.append(rb)
        return out

    async def _attach(self, independent: Mapping[str, Any], dependency: Mapping[str, Any]) -> bool:
        desired = build_attached_binding(independent, dependency)
        namespace = desired["metadata"]["namespace"]
        name = desired["metadata"]["name"]
        existing: Mapping[str, Any] | None = self.rbs.store.get(_key(namespace, name))
        for _ in range(5):
            if existing is not None and is_deleting(existing):
                raise ApiException(409, "Conflict", f"attached binding {namespace}/{name} is being deleted; "
                                   "attaching again once it is gone")
            if existing is None:
                try:
                    await self.client.create(RESOURCE_BINDINGS, desired, namespace)
                    return True
                except ApiException as e:
                    if not is_already_exists(e):
                        raise
                existing = await self._live(namespace, name)
                continue
            merged_required_by = _merged_required_by(existing, desired)
            update = attach_update(existing, desired, self._referrers(merged_required_by, independent))
            self._conflict_event(existing, update)
            if update.patch is None:
                return False
            try:
                await self.client.patch(RESOURCE_BINDINGS, name, update.patch, namespace=namespace)
                return True
            except ApiException as e:
                if not (is_conflict(e) or is_not_found(e)):
                    raise
            existing = await self._live(namespace, name)
        raise ApiException(409, "Conflict", f"attached binding {namespace}/{name} keeps changing; will retry")

    async def _detach(self, attached: Mapping[str, Any], namespace: str, name: str) -> bool:
        """Remove binding ``namespace/name`` from ``attached``; True when something was written."""
        aname = str(meta_of(attached).get("name"))
        anamespace = str(meta_of(attached).get("namespace"))
        current: Mapping[str, Any] | None = attached
        for _ in range(5):
            if current is None:
                return False
            remaining = [i for i in (spec_of(current).get("requiredBy") or [])
                         if isinstance(i, Mapping) and not (i.get("namespace") == namespace and i.get("name") == name)]
            update = detach_update(current, namespace, name, self._referrers(remaining))
            try:
                if update.delete:
                    await self.client.delete(RESOURCE_BINDINGS, aname, anamespace,
                                             preconditions={"resourceVersion": str(meta_of(current).get("resourceVersion"))})
                    return True
                self._conflict_event(current, update)
                if update.patch is None:
                    return False
                await self.client.patch(RESOURCE_BINDINGS, aname, update.patch, namespace=anamespace)
                return True
            except ApiException as e:
                if is_not_found(e):
                    return False
                if not is_conflict(e):
                    raise
            current = await self._live(anamespace, aname)
        raise ApiException(409, "Conflict", f"attached binding {anamespace}/{aname} keeps changing; will retry")

    async def _detach_all(self, binding: Mapping[str, Any]) -> None:
        namespace = str(meta_of(binding).get("namespace"))
        name = str(meta_of(binding).get("name"))
        self._dependencies.pop(_key(namespace, name), None)
        for attached in self._attached_to(namespace, name):
            await self._detach(attached, namespace, name)

    async def _remove_finalizer(self, binding: Mapping[str, Any]) -> None:
        def make(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            finalizers = list(meta_of(obj).get("finalizers") or [])
            if L.BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER not in finalizers:
                return None
            kept = [f for f in finalizers if f != L.BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER]
            return with_precondition({"metadata": {"finalizers": kept or None}}, obj)

        await patch_with_retry(self.client, RESOURCE_BINDINGS, binding, str(meta_of(binding).get("name")),
                               str(meta_of(binding).get("namespace")), make)

    async def _live(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self.client.get_or_none(RESOURCE_BINDINGS, name, namespace)

    def _conflict_event(self, attached: Mapping[str, Any], update: AttachedUpdate) -> None:
        if update.conflicts:
            self.ctx.recorder.event(attached, WARNING, DEPENDENCY_POLICY_CONFLICT,
                                    "Bindings requiring this dependency disagree: " + "; ".join(update.conflicts))


def _merged_required_by(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> list[Any]:
    """The ``requiredBy`` list after merging ``desired``'s single entry into ``existing``'s."""
    entry = (spec_of(desired).get("requiredBy") or [{}])[0]
    out = [i for i in (spec_of(existing).get("requiredBy") or [])
           if isinstance(i, Mapping) and not (i.get("namespace") == entry.get("namespace")
                                              and i.get("name") == entry.get("name"))]
    out.append(entry)
    return out
