"""CustomResourceDefinitions: validation, status, and the resource types they make the server serve."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.objects import meta, now_rfc3339
from flotilla.apiserver.resource_types import PrinterColumn, ResourceType
from flotilla.apiserver.tasks import TasksByName, cancel_and_wait
from flotilla.kube.validation import Cause, dns1123_label_errors, dns1123_subdomain_errors

if TYPE_CHECKING:
    from flotilla.apiserver.rest import ResourceStorage

log = logging.getLogger(__name__)
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _type_causes(spec: dict[str, Any]) -> list[Cause]:
    """Shape checks that must pass before anything else reads the CRD."""
    causes: list[Cause] = []

    def want(path: str, value: Any, kind: type, name: str) -> bool:
        if value is not None and not isinstance(value, kind):
            causes.append(Cause(path, f"Invalid value: must be {name}", "FieldValueTypeInvalid"))
            return False
        return value is not None

    for f in ("group", "scope"):
        want(f"spec.{f}", spec.get(f), str, "a string")
    if want("spec.names", spec.get("names"), dict, "an object"):
        for f in ("plural", "singular", "kind", "listKind"):
            want(f"spec.names.{f}", spec["names"].get(f), str, "a string")
        for f in ("shortNames", "categories"):
            if want(f"spec.names.{f}", spec["names"].get(f), list, "a list of strings"):
                for i, x in enumerate(spec["names"][f]):
                    want(f"spec.names.{f}[{i}]", x, str, "a string")
    if want("spec.versions", spec.get("versions"), list, "a list"):
        for i, v in enumerate(spec["versions"]):
            p = f"spec.versions[{i}]"
            if not want(p, v, dict, "an object"):
                continue
            want(f"{p}.name", v.get("name"), str, "a string")
            if want(f"{p}.schema", v.get("schema"), dict, "an object"):
                want(f"{p}.schema.openAPIV3Schema", v["schema"].get("openAPIV3Schema"), dict, "an object")
            if want(f"{p}.subresources", v.get("subresources"), dict, "an object"):
                for sub in ("status", "scale"):
                    want(f"{p}.subresources.{sub}", v["subresources"].get(sub), dict, "an object")
            if want(f"{p}.additionalPrinterColumns", v.get("additionalPrinterColumns"), list, "a list"):
                for j, c in enumerate(v["additionalPrinterColumns"]):
                    cp = f"{p}.additionalPrinterColumns[{j}]"
                    if want(cp, c, dict, "an object"):
                        for f in ("name", "type", "jsonPath"):
                            if not isinstance(c.get(f), str) or not c.get(f):
                                causes.append(Cause(f"{cp}.{f}", "Required value", "FieldValueRequired"))
                        if isinstance(c.get("jsonPath"), str) and c.get("jsonPath"):
                            causes.extend(_jsonpath_causes(f"{cp}.jsonPath", c["jsonPath"]))
            if want(f"{p}.selectableFields", v.get("selectableFields"), list, "a list"):
                for j, f in enumerate(v["selectableFields"]):
                    if not isinstance(f, dict) or not isinstance(f.get("jsonPath"), str):
                        causes.append(Cause(f"{p}.selectableFields[{j}].jsonPath", "Required value",
                                            "FieldValueRequired"))
    return causes


def _jsonpath_causes(path: str, expr: str) -> list[Cause]:
    from flotilla.jsonpath import JSONPathSyntaxError, parse_expression

    try:
        parse_expression(expr)
    except JSONPathSyntaxError as e:
        return [Cause(path, f'Invalid value: "{expr}": {e}')]
    return []


def _pattern_causes(schema: dict[str, Any], path: str) -> list[Cause]:
    """Every ``pattern`` in the schema must compile as Go's regexp compiles it (kube-apiserver's check).

    A pattern is then enforced on every string it applies to (:mod:`flotilla.apiserver.schema_check`), never
    failing later: the error is the CRD author's, at creation, with Go's message.
    """
    from flotilla.kube.go_regexp import pattern_error
    from flotilla.kube.validation import go_quote

    causes: list[Cause] = []
    todo: list[tuple[Any, str]] = [(schema, path)]
    while todo:
        node, where = todo.pop()
        if not isinstance(node, dict):
            continue
        pattern = node.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            causes.append(Cause(f"{where}.pattern", "Invalid value: must be a string", "FieldValueTypeInvalid"))
        elif pattern:
            err = pattern_error(pattern)
            if err is not None:
                causes.append(Cause(f"{where}.pattern", f"Invalid value: {go_quote(pattern)}: must be a valid "
                                                        f"regular expression, but isn't: {err}"))
        for key in ("properties", "patternProperties", "definitions"):
            for name, sub in _d(node.get(key)).items():
                todo.append((sub, f"{where}.{key}[{name}]"))
        for key in ("items", "additionalProperties", "additionalItems", "not"):
            sub = node.get(key)
            if isinstance(sub, list):
                todo.extend((x, f"{where}.{key}[{i}]") for i, x in enumerate(sub))
            else:
                todo.append((sub, f"{where}.{key}"))
        for key in ("allOf", "anyOf", "oneOf"):
            todo.extend((x, f"{where}.{key}[{i}]") for i, x in enumerate(_l(node.get(key))))
    causes.sort(key=lambda c: c.field)
    return causes


def validate_crd(crd: dict[str, Any], old: dict[str, Any] | None = None, *, patterns: bool = True) -> list[Cause]:
    """kube-apiserver's checks of a CRD; ``old``: the stored version, on an update.

    A pattern Go cannot compile is refused on create and when an update brings it; one already stored (from before
    Flotilla checked patterns) neither blocks updates (the cleanup finalizer's removal is one) nor stops the CRD
    from being served (``patterns=False``): it is simply not enforced.
    """
    causes = _validate_crd(crd, patterns)
    if patterns and old is not None:
        before = {(c.field, c.message) for c in _validate_crd(old, True) if c.field.endswith(".pattern")}
        causes = [c for c in causes if not c.field.endswith(".pattern") or (c.field, c.message) not in before]
    return causes


def _validate_crd(crd: dict[str, Any], patterns: bool) -> list[Cause]:
    causes: list[Cause] = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [Cause("spec", "Required value", "FieldValueRequired")]
    causes = _type_causes(spec)
    if causes:
        return causes
    group = spec.get("group") or ""
    names = spec.get("names") or {}
    if not group:
        causes.append(Cause("spec.group", "Required value", "FieldValueRequired"))
    elif "." not in group:
        causes.append(Cause("spec.group", f'Invalid value: "{group}": should be a domain with at least one dot'))
    else:
        causes.extend(Cause("spec.group", f'Invalid value: "{group}": {e}') for e in dns1123_subdomain_errors(group))
    plural = names.get("plural") or ""
    kind = names.get("kind") or ""
    if not plural:
        causes.append(Cause("spec.names.plural", "Required value", "FieldValueRequired"))
    else:
        causes.extend(Cause("spec.names.plural", f'Invalid value: "{plural}": {e}') for e in dns1123_label_errors(plural))
    if not kind:
        causes.append(Cause("spec.names.kind", "Required value", "FieldValueRequired"))
    name = meta(crd).get("name", "")
    if plural and group and name != f"{plural}.{group}":
        causes.append(Cause("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        causes.append(Cause("spec.scope", f'Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"',
                            "FieldValueNotSupported"))
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(Cause("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
        return causes
    storage = 0
    for i, v in enumerate(versions):
        if not isinstance(v, dict) or not v.get("name"):
            causes.append(Cause(f"spec.versions[{i}].name", "Required value", "FieldValueRequired"))
            continue
        if v.get("storage"):
            storage += 1
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            causes.append(Cause(f"spec.versions[{i}].schema.openAPIV3Schema", "Required value: schemas are required",
                                "FieldValueRequired"))
        elif schema.get("type") not in (None, "object"):
            causes.append(Cause(f"spec.versions[{i}].schema.openAPIV3Schema.type",
                                'Unsupported value: must be "object" at the root', "FieldValueNotSupported"))
        elif patterns:
            causes.extend(_pattern_causes(schema, f"spec.versions[{i}].schema.openAPIV3Schema"))
    if storage != 1:
        causes.append(Cause("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    return causes


def crd_status(crd: dict[str, Any]) -> dict[str, Any]:
    spec = _d(crd.get("spec"))
    names = dict(_d(spec.get("names")))
    names.setdefault("singular", (names.get("kind") or "").lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    now = now_rfc3339()
    status = dict(_d(crd.get("status")))
    conds = {c.get("type"): c for c in _l(status.get("conditions")) if isinstance(c, dict)}
    for ctype, reason, message in (
        ("NamesAccepted", "NoConflicts", "no conflicts found"),
        ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
    ):
        if ctype not in conds:
            conds[ctype] = {"type": ctype, "status": "True", "lastTransitionTime": now, "reason": reason,
                            "message": message}
    status["conditions"] = list(conds.values())
    status["acceptedNames"] = names
    status["storedVersions"] = [v.get("name") for v in _l(spec.get("versions"))
                                if isinstance(v, dict) and v.get("storage")]
    return status


def resource_types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for v in spec.get("versions") or []:
        if not v.get("served", True):
            continue
        schema = dict((v.get("schema") or {}).get("openAPIV3Schema") or {})
        subs = v.get("subresources") or {}
        scale = subs.get("scale") or {}
        cols = tuple(
            PrinterColumn(
                name=c.get("name", ""),
                type=c.get("type", "string"),
                json_path=c.get("jsonPath", ""),
                description=c.get("description", ""),
                priority=int(c.get("priority", 0) or 0),
                format=c.get("format", ""),
            )
            for c in v.get("additionalPrinterColumns") or []
        )
        out.append(ResourceType(
            group=spec.get("group", ""),
            version=v["name"],
            kind=names.get("kind", ""),
            plural=names.get("plural", ""),
            singular=names.get("singular") or names.get("kind", "").lower(),
            namespaced=spec.get("scope") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            has_status="status" in subs,
            has_scale=bool(scale),
            scale_spec_path=scale.get("specReplicasPath", ".spec.replicas"),
            scale_status_path=scale.get("statusReplicasPath", ".status.replicas"),
            scale_selector_path=scale.get("labelSelectorPath", ""),
            printer_columns=cols,
            schema=schema,
            generation="non-metadata",
            builtin_smp=False,
            from_crd=True,
            selectable_fields=tuple(
                f.get("jsonPath", "").lstrip(".") for f in v.get("selectableFields") or [] if f.get("jsonPath")
            ),
        ))
    return out


class CRDManager:
    """Keeps the served types in step with the stored CRDs (also those written by other API servers)."""

    def __init__(self, storage: ResourceStorage) -> None:
        self.storage = storage
        self.types = storage.types
        self.crd_rt = self.types.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        self._task: asyncio.Task[None] | None = None
        self._cleanups = TasksByName(log, "cleanup of CRD %s failed")
        self._registered: dict[str, tuple[str, str]] = {}

    def strategy(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is None:
            fins = meta(obj).setdefault("finalizers", [])
            if CLEANUP_FINALIZER not in fins:
                fins.append(CLEANUP_FINALIZER)
        obj["status"] = crd_status(obj)

    def apply(self, crd: dict[str, Any], deleted: bool = False) -> None:
        try:
            self._apply(crd, deleted)
        except Exception:  # a stored CRD this server cannot serve must not stop it (or its restart)
            log.exception("cannot serve CRD %s", meta(crd).get("name"))

    def _apply(self, crd: dict[str, Any], deleted: bool) -> None:
        name = meta(crd).get("name", "")
        spec = crd.get("spec") or {}
        old = self._registered.pop(name, None)
        if old:
            self.types.remove_group_resource(*old)
        if deleted:
            return
        if validate_crd(crd, patterns=False):
            log.warning("not serving CRD %s: it does not validate", name)
            return
        for rt in resource_types_from_crd(crd):
            self.types.add(rt)
        self._registered[name] = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        if meta(crd).get("deletionTimestamp"):
            self._cleanups.start(name, lambda: self._cleanup(crd))

    def on_write(self, rt: ResourceType, event: str, obj: dict[str, Any]) -> None:
        if rt is self.crd_rt:
            self.apply(obj, deleted=event == "DELETED")

    async def start(self) -> None:
        assert self.crd_rt is not None
        listed = await self.storage.list(self.crd_rt, None)
        for crd in listed["items"]:
            self.apply(crd)
        rv = listed["metadata"]["resourceVersion"]
        self._task = asyncio.get_running_loop().create_task(self._follow(rv))

    async def _follow(self, rv: str) -> None:
        from flotilla.apiserver.rest import WatchSpec

        assert self.crd_rt is not None
        while True:
            try:
                events = await self.storage.watch(self.crd_rt, WatchSpec(resource_version=rv))
                async for etype, obj in events:
                    if etype in ("ADDED", "MODIFIED", "DELETED"):
                        rv = obj["metadata"]["resourceVersion"]
                        self.apply(obj, deleted=etype == "DELETED")
                    elif etype == "ERROR":
                        break
            except asyncio.CancelledError:
                raise
            except ApiError:
                pass
            except Exception:  # keep following; a broken store connection must not stop CRD sync
                log.exception("CRD watch failed; retrying")
            await asyncio.sleep(0.5)
            listed = await self.storage.list(self.crd_rt, None)
            for crd in listed["items"]:
                self.apply(crd)
            rv = listed["metadata"]["resourceVersion"]

    async def _cleanup(self, crd: dict[str, Any]) -> None:
        """Delete every custom resource of a CRD being deleted, then release its finalizer."""
        spec = crd.get("spec") or {}
        rts = resource_types_from_crd(crd)
        while rts:
            rt = rts[0]
            listed = await self.storage.list(rt, None)
            if not listed["items"]:
                break
            for obj in listed["items"]:
                md = meta(obj)
                try:
                    await self.storage.delete(rt, md.get("namespace"), md["name"])
                except ApiError:
                    pass
            await asyncio.sleep(0.2)
        assert self.crd_rt is not None
        await self.storage.remove_finalizer(self.crd_rt, crd, CLEANUP_FINALIZER, attempts=100)
        self.types.remove_group_resource(spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))

    async def stop(self) -> None:
        await cancel_and_wait([self._task, *self._cleanups.running()])
