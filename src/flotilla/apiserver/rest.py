"""The API's storage semantics, independent of HTTP: create, get, list, update, patch, delete, watch.

Everything kube-apiserver's generic registry does that clients depend on lives here: uid and
timestamps, resourceVersion = store revision, generation rules, the status subresource split,
finalizers and deletionTimestamp, namespace rules, optimistic concurrency, no-op writes, selectors,
pagination and watch semantics. The HTTP layer (``app.py``) only translates requests to these calls,
and the in-process transport can call them directly.
"""

from __future__ import annotations

import asyncio
import base64
import copy
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from flotilla import storage
from flotilla.apiserver import errors
from flotilla.apiserver.admission import Admission, Operation
from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.objects import decode, decode_kv, encode, generate_name, meta, new_uid, now_rfc3339
from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.schema_check import (
    Skip,
    defaults,
    has_unknown_fields,
    prune,
    schema_errors,
    unchanged_parts,
    unknown_fields,
    valid,
)
from flotilla.apiserver.type_registry import TypeRegistry
from flotilla.kube.patch import (
    PatchError,
    apply_json_patch_into,
    apply_server_side_apply,
    apply_strategic_merge_patch,
    merge_key_table_for,
    merge_patch_into,
)
from flotilla.kube.selectors import (
    SelectorError,
    check_supported,
    object_field_value,
    parse_field_selector,
    parse_label_selector,
)
from flotilla.kube.validation import Cause, validate_metadata
from flotilla.storage.fanout import PolledWatcher

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)
MAX_JSON_PATCH_OPS = 10_000
_RETRIES = 100

NAMESPACE_FINALIZER = "kubernetes"
PROGRESS = "PROGRESS"  # watch event type internal to the server: "everything up to this revision was sent"
DECODED_CACHE_SIZE = 2048  # watch events decoded once and shared by every watcher: the newest ones kept
_COMPUTE: Any = object()  # "compare with the stored object to find the unchanged parts"
_ABSENT: Any = object()
_RV_ONLY = frozenset({"resourceVersion"})


class DecodedObjects:
    """Objects of recent watch events, decoded once per store revision and shared by every watcher.

    A revision is one write of one key, so ``(value, revision)`` always decodes to the same object. The objects
    are shared: whoever gets one must not mutate it (the HTTP layer only serializes them; the in-process
    transport hands them to informers, whose caches are read-only by contract).
    """

    def __init__(self, size: int = DECODED_CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[int, dict[str, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, value: bytes, revision: int, slot: int | None = None) -> dict[str, Any]:
        """``decode(value, revision)``, shared. ``slot`` (default ``revision``) names the value when it is not
        the one written at ``revision`` (a watch's previous value: ``-revision``)."""
        key = revision if slot is None else slot
        items = self._items
        obj = items.get(key)
        if obj is None:
            obj = decode(value, revision)
            if len(items) >= self.size:
                items.popitem(last=False)
            items[key] = obj
        return obj

    def cached(self, kv: storage.KeyValue) -> dict[str, Any] | None:
        """The shared object of ``kv``'s revision if it is here (read it, never change it), else None."""
        return self._items.get(kv.mod_revision)

    def peek(self, kv: storage.KeyValue) -> dict[str, Any]:
        """The shared object of ``kv`` if it is still here, else a new one (not kept: lists must not churn)."""
        obj = self._items.get(kv.mod_revision)
        return obj if obj is not None else decode(kv.value, kv.mod_revision)


@dataclass
class RequestContext:
    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Strict"  # Strict | Warn | Ignore
    warnings: list[str] = field(default_factory=list)
    force: bool = False


@dataclass
class WatchSpec:
    namespace: str | None = None
    label_selector: str = ""
    field_selector: str = ""
    resource_version: str = ""
    send_initial_events: bool = False
    allow_bookmarks: bool = False


# Hooks for kinds with server-side behaviour (Namespace, CRD): called on the object before it is stored.
Strategy = Callable[[dict[str, Any], dict[str, Any] | None], None]


def _namespace_strategy(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return  # schema validation rejects it with a field path
    if old is None:
        fins = spec.get("finalizers") or []
        if isinstance(fins, list) and NAMESPACE_FINALIZER not in fins:  # else the schema check names the field
            spec["finalizers"] = [*fins, NAMESPACE_FINALIZER]
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    if meta(obj).get("deletionTimestamp"):
        status["phase"] = "Terminating"
    else:
        status.setdefault("phase", "Active")
    obj["status"] = status
    labels = meta(obj).setdefault("labels", {})
    name = meta(obj).get("name")
    if isinstance(labels, dict) and isinstance(name, str):
        labels["kubernetes.io/metadata.name"] = name


def _secret_strategy(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """stringData is write-only: merged into data (base64) and dropped; type defaults to Opaque."""
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and all(isinstance(v, str) for v in string_data.values()):
        data = obj.get("data")
        if data is None:
            data = obj["data"] = {}
        if isinstance(data, dict):
            for k, v in string_data.items():
                data[k] = base64.b64encode(v.encode()).decode()
    elif string_data is not None:
        obj["stringData"] = string_data  # leave it for validation to reject
    if old is None and not obj.get("type"):
        obj["type"] = "Opaque"


class ResourceStorage:
    """All REST operations on all resource types, on one Store."""

    def __init__(self, store: storage.Store, types: TypeRegistry, admission: Admission | None = None) -> None:
        self.store = store
        self.types = types
        self.admission = admission or Admission()
        self.strategies: dict[tuple[str, str], Strategy] = {
            ("", "Namespace"): _namespace_strategy,
            ("", "Secret"): _secret_strategy,
        }
        # callbacks after a successful write: (rt, event type, object)
        self.after_write: list[Callable[[ResourceType, str, dict[str, Any]], Any]] = []
        self.namespace_rt = types.lookup("", "v1", "namespaces")
        # name -> terminating?, kept by NamespaceLifecycle; None: always read the store
        self.namespace_cache: dict[str, bool] | None = None
        self.decoded = DecodedObjects()

    # ------------------------------------------------------------------ helpers
    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> str:
        return rt.key(namespace, name)

    def _old(self, kv: storage.KeyValue) -> tuple[dict[str, Any], bool]:
        """The stored object to write against, READ-ONLY, and whether it is shared (a watch event's object).

        Writes read the stored object (preconditions, what changed, admission's ``old``) but never change it:
        the revision's shared object serves when it was decoded already, which saves a decode per write. The
        places that would hand a part of it to the caller (the status a main-resource write keeps, the object
        a no-op write returns) copy it when it is shared.
        """
        shared = self.decoded.cached(kv)
        if shared is not None:
            return shared, True
        return decode_kv(kv), False

    async def _get_kv(self, rt: ResourceType, namespace: str | None, name: str) -> storage.KeyValue:
        kv = await self.store.get(self._key(rt, namespace, name))
        if kv is None:
            raise errors.not_found(rt, name)
        return kv

    async def _check_namespace(self, rt: ResourceType, namespace: str | None, name: str = "") -> None:
        if not rt.namespaced:
            return
        if not namespace:
            raise errors.bad_request("the namespace of the object is required for namespaced resources")
        if self.namespace_rt is None:
            return
        cache = self.namespace_cache
        if cache is not None and namespace in cache:
            terminating = cache[namespace]
        else:
            kv = await self.store.get(self.namespace_rt.key(None, namespace))
            if kv is None:
                raise errors.namespace_not_found(namespace)
            terminating = bool(orjson.loads(kv.value).get("metadata", {}).get("deletionTimestamp"))
        if terminating:
            raise ApiError(
                403,
                "Forbidden",
                f'{rt.plural} "{name}" is forbidden: unable to create new content in namespace {namespace} '
                "because it is being terminated",
                {"causes": [{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being terminated",
                             "field": "metadata.namespace"}]},
            )

    def _notify(self, rt: ResourceType, kind: str, value: bytes, revision: int) -> None:
        """Tell the ``after_write`` hooks. They get the shared object of the revision (what its watch event will
        carry, decoded once for both), never the object the writer returns: that one is the caller's."""
        if self.after_write:
            obj = self.decoded.get(value, revision)
            for cb in self.after_write:
                cb(rt, kind, obj)

    @staticmethod
    def _check_body(rt: ResourceType, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request must be a JSON object describing a {rt.kind}")
        api_version = body.get("apiVersion")
        kind = body.get("kind")
        if kind is not None and kind != rt.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind}) for "
                f"{rt.url_prefix}/{rt.plural}"
            )
        if api_version is not None and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
            )
        md = body.get("metadata", {})
        if md is None:
            md = body["metadata"] = {}
        if not isinstance(md, dict):
            raise errors.bad_request("metadata must be an object")
        body["apiVersion"] = rt.api_version
        body["kind"] = rt.kind
        return body

    def _patched_parts(self, rt: ResourceType, patch: dict[str, Any], obj: dict[str, Any],
                       subresource: str | None, *, stored: bool) -> Skip | None:
        """What :meth:`_unchanged` would find for a merge patch applied to a fresh decode of the stored object
        (``obj``), without comparing anything: the parts the patch does not name are the stored bytes decoded,
        exactly. (A part the patch names but leaves as it was counts as changed: it is checked again.)

        ``stored``: for the object as ``_write_update`` validates it, where a status write has kept everything
        but its status as stored and a main-resource write the stored status; else for the patched object as
        it is. None (compare instead) when the kind has a server-side strategy, which may change any part.
        """
        if rt.from_crd or not rt.schema or (rt.group, rt.kind) in self.strategies:
            return None
        skip: Skip = {}
        for k, v in obj.items():
            if subresource == "status":
                if k != "status":
                    skip[k] = None
                    continue
                p = patch.get("status", _ABSENT)
            else:
                if stored and k == "status" and rt.has_status:
                    skip[k] = None  # the stored status stays
                    continue
                p = patch.get(k, _ABSENT)
            if p is _ABSENT:
                skip[k] = None
            elif isinstance(p, dict) and isinstance(v, dict):
                if k == "metadata" and p.keys() <= _RV_ONLY:
                    skip[k] = None  # a precondition only; resourceVersion is the store's
                    continue
                inner: Skip = {k2: None for k2 in v if k2 not in p}
                if inner:
                    skip[k] = inner
        return skip

    @staticmethod
    def _unchanged(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> Skip | None:
        """The parts of ``obj`` exactly as in ``old``, a stored version of it, which passed the same checks.

        Only for built-in kinds: their schemas never change while the server runs, so an unchanged part checks
        out as it did when it was stored. A custom resource's schema changes with its CRD: checked in full.
        """
        if old is None or rt.from_crd or not rt.schema:
            return None
        return unchanged_parts(obj, old)

    def _field_checks(self, rt: ResourceType, obj: dict[str, Any], ctx: RequestContext,
                      old: dict[str, Any] | None = None, skip: Any = _COMPUTE) -> None:
        """Unknown fields per fieldValidation (Strict: 400; Warn: warning) and pruning of them."""
        if not rt.schema:
            return
        enforce = rt.strict_schema or rt.from_crd
        if not enforce:
            return
        if skip is _COMPUTE:
            skip = self._unchanged(rt, obj, old)
        if skip is not None and rt.has_status and "status" in skip:
            # status writes are not field-checked (nor defaulted): a stored status may hold what these find
            skip = {k: v for k, v in skip.items() if k != "status"}
        unknown = unknown_fields(obj, rt.schema, skip=skip) if has_unknown_fields(obj, rt.schema, skip) else []
        if unknown and ctx.field_validation == "Strict":
            msg = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise errors.bad_request(f"strict decoding error: {msg}")
        if unknown and ctx.field_validation == "Warn":
            ctx.warnings.extend(f'unknown field "{u}"' for u in unknown)
        if unknown:
            prune(obj, rt.schema, skip=skip)
        defaults(obj, rt.schema, skip)

    def _validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation, ctx: RequestContext,
        skip: Any = _COMPUTE,
    ) -> None:
        if skip is _COMPUTE:
            skip = self._unchanged(rt, obj, old)
        if skip is not None and "metadata" in skip and skip["metadata"] is None:
            causes: list[Cause] = []  # metadata exactly as stored: it passed these checks then
        else:
            causes = validate_metadata(rt.group, rt.kind, obj, namespaced=rt.namespaced)
        if rt.schema and not valid(obj, rt.schema, skip):  # the compiled check; the messages only when needed
            causes.extend(schema_errors(obj, rt.schema, skip=skip))
        result = self.admission.admit(rt.group, rt.kind, obj, old, op)
        causes.extend(result.causes)
        ctx.warnings.extend(result.warnings)
        if causes:
            raise errors.invalid(rt, meta(obj).get("name") or "", causes)

    @staticmethod
    def _bump_generation(rt: ResourceType, new: dict[str, Any], old: dict[str, Any]) -> None:
        om, nm = meta(old), meta(new)
        gen = om.get("generation")
        if not rt.generation:
            nm.pop("generation", None)
            return
        gen = int(gen or 1)
        changed = False
        if rt.generation == "spec":
            changed = new.get("spec") != old.get("spec")
        else:
            skip = {"metadata", "status"} if rt.has_status else {"metadata"}
            changed = {k: v for k, v in new.items() if k not in skip} != {
                k: v for k, v in old.items() if k not in skip
            }
        if nm.get("deletionTimestamp") and not om.get("deletionTimestamp"):
            changed = True
        nm["generation"] = gen + 1 if changed else gen

    # ------------------------------------------------------------------ create
    async def create(
        self, rt: ResourceType, namespace: str | None, body: Any, ctx: RequestContext | None = None
    ) -> dict[str, Any]:
        ctx = ctx or RequestContext()
        obj = self._check_body(rt, body)
        md = meta(obj)
        if rt.namespaced:
            body_ns = md.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or body_ns
            md["namespace"] = namespace
        else:
            md.pop("namespace", None)
            namespace = None
        generate = not md.get("name") and md.get("generateName")
        if generate and not isinstance(md.get("generateName"), str):
            raise errors.invalid(rt, "", [Cause("metadata.generateName", "Invalid value: must be a string")])
        await self._check_namespace(rt, namespace, md.get("name") or md.get("generateName") or "")
        self._field_checks(rt, obj, ctx)
        for key in ("resourceVersion", "uid", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            md.pop(key, None)
        md["uid"] = new_uid()
        md["creationTimestamp"] = now_rfc3339()
        if rt.generation:
            md["generation"] = 1
        else:
            md.pop("generation", None)
        if rt.has_status:
            obj.pop("status", None)
        for attempt in range(5):
            if generate:
                md["name"] = generate_name(md["generateName"])
            strategy = self.strategies.get((rt.group, rt.kind))
            if strategy:
                strategy(obj, None)
            self._validate(rt, obj, None, "CREATE", ctx)
            if ctx.dry_run:
                return obj
            try:
                value = encode(obj)
                rev = await self.store.create(self._key(rt, namespace, md["name"]), value)
            except storage.KeyExistsError:
                if generate and attempt < 4:
                    continue
                raise errors.already_exists(rt, md["name"]) from None
            md["resourceVersion"] = str(rev)
            self._notify(rt, "ADDED", value, rev)
            return obj
        raise errors.already_exists(rt, md.get("name", ""))

    # ------------------------------------------------------------------ get / list
    async def get(self, rt: ResourceType, namespace: str | None, name: str, *, shared: bool = False,
                  cached: bool = False) -> dict[str, Any]:
        """The object, the caller's own; with ``shared`` (for a caller that only reads it, e.g. to serialize it)
        possibly the revision's shared object, which saves decoding it again. With ``cached`` (a GET with
        ``resourceVersion=0``) the newest version this server knows without a read from its store when the store
        keeps one (etcd: what this server wrote or watched last; it may be older than the store's): what a
        compare-and-swap write starts from, as the server's own writes do."""
        kv = self.store.peek(self._key(rt, namespace, name)) if cached else None
        if kv is None:
            kv = await self._get_kv(rt, namespace, name)
        return self.decoded.peek(kv) if shared else decode_kv(kv)

    def _selectors(self, rt: ResourceType, label_selector: str, field_selector: str):  # type: ignore[no-untyped-def]
        try:
            ls = parse_label_selector(label_selector or "")
            fs = parse_field_selector(field_selector or "")
            supported = {"metadata.name", "metadata.namespace", *rt.selectable_fields}
            check_supported(fs, supported)
        except SelectorError as e:
            raise errors.bad_request(str(e)) from None
        return ls, fs

    @staticmethod
    def _matches(obj: dict[str, Any], ls: Any, fs: Any) -> bool:
        if not ls.empty and not ls.matches(meta(obj).get("labels") or {}):
            return False
        if fs.requirements and not fs.matches(lambda f: object_field_value(obj, f)):
            return False
        return True

    @staticmethod
    def _name_from_fields(fs: Any) -> str | None:
        for f, op, value in fs.requirements:
            if f == "metadata.name" and op in ("=", "=="):
                return str(value)
        return None

    async def list_query(
        self, rt: ResourceType, namespace: str | None, query: Mapping[str, str], *, shared: bool = False
    ) -> dict[str, Any]:
        """:meth:`list` with its options as a request's query parameters name them (``labelSelector``,
        ``limit``, ``continue``, ``resourceVersion``...)."""
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise errors.bad_request(f"invalid limit {query.get('limit')!r}") from None
        return await self.list(
            rt,
            namespace,
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""),
            limit=max(limit, 0),
            continue_token=query.get("continue", ""),
            resource_version=query.get("resourceVersion", ""),
            resource_version_match=query.get("resourceVersionMatch", ""),
            shared=shared,
        )

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
        resource_version: str = "",
        resource_version_match: str = "",
        shared: bool = False,
    ) -> dict[str, Any]:
        """A List; its items are the caller's own, or with ``shared`` possibly shared objects (see ``get``)."""
        ls, fs = self._selectors(rt, label_selector, field_selector)
        decode_item = self.decoded.peek if shared else decode_kv
        prefix = rt.key_prefix(namespace if rt.namespaced else None)
        revision = 0
        start_after = ""
        if resource_version_match not in ("", "NotOlderThan", "Exact"):
            raise errors.invalid(rt, "", [Cause("resourceVersionMatch", f'Unsupported value: "{resource_version_match}"'
                                               ': supported values: "Exact", "NotOlderThan"', "FieldValueNotSupported")])
        if resource_version_match and not resource_version:
            raise errors.invalid(rt, "", [Cause("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                                               "unless resourceVersion is provided", "FieldValueForbidden")])
        if continue_token:
            try:
                tok = orjson.loads(base64.urlsafe_b64decode(continue_token.encode()))
                revision, start = tok["rv"], tok["start"]
                if not isinstance(revision, int) or isinstance(revision, bool) or revision <= 0:
                    raise ValueError
                if not isinstance(start, str):
                    raise ValueError
                start_after = prefix + start
            except Exception:
                raise errors.bad_request(
                    "invalid continue parameter: use the continue value from the previous list response unchanged"
                ) from None
        elif resource_version and resource_version != "0":
            try:
                wanted = int(resource_version)
            except ValueError:
                raise errors.bad_request(f"invalid resourceVersion {resource_version!r}") from None
            if resource_version_match == "Exact":
                revision = wanted
            else:
                await self._wait_for_revision(wanted)
        only_name = self._name_from_fields(fs)
        items: list[dict[str, Any]] = []
        more_token = ""
        try:
            if only_name is not None and not continue_token and revision == 0:
                list_rev = await self.store.current_revision()
                kv = await self.store.get(self._key(rt, namespace, only_name)) if (namespace or not rt.namespaced) else None
                if kv is not None:
                    obj = decode_item(kv)
                    if self._matches(obj, ls, fs):
                        items.append(obj)
                elif rt.namespaced and not namespace:
                    res = await self.store.list(prefix)
                    list_rev = res.revision
                    items = [o for o in (decode_item(k) for k in res.items) if self._matches(o, ls, fs)]
            else:
                list_rev = revision
                cursor = start_after
                done = False
                while not done:
                    page = max(limit * 2, 100) if limit else 0
                    res = await self.store.list(prefix, revision=list_rev, start_after=cursor, limit=page)
                    list_rev = res.revision
                    for i, kv in enumerate(res.items):
                        cursor = kv.key
                        obj = decode_item(kv)
                        if self._matches(obj, ls, fs):
                            items.append(obj)
                        if limit and len(items) >= limit:
                            if i < len(res.items) - 1 or res.more:
                                more_token = self._continue(list_rev, cursor[len(prefix):])
                            done = True
                            break
                    if not res.more:
                        done = True
        except storage.CompactedError:
            if continue_token:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter, or use the continue token in this response to "
                    "retrieve the remainder of the results."
                ) from None
            raise errors.expired(f"too old resource version: {revision}") from None
        except storage.FutureRevisionError:
            raise errors.timeout(
                f"Too large resource version: {revision}, current: {await self.store.current_revision()}",
                "ResourceVersionTooLarge",
            ) from None
        list_meta: dict[str, Any] = {"resourceVersion": str(list_rev)}
        if more_token:
            list_meta["continue"] = more_token
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": list_meta, "items": items}

    @staticmethod
    def _continue(rev: int, last: str) -> str:
        return base64.urlsafe_b64encode(orjson.dumps({"rv": rev, "start": last})).decode()

    async def _wait_for_revision(self, wanted: int) -> None:
        for _ in range(30):
            if await self.store.current_revision() >= wanted:
                return
            await asyncio.sleep(0.1)
        raise errors.timeout(
            f"Too large resource version: {wanted}, current: {await self.store.current_revision()}",
            "ResourceVersionTooLarge",
        )

    # ------------------------------------------------------------------ update
    def _merge_for_update(
        self, rt: ResourceType, body: dict[str, Any], old: dict[str, Any], subresource: str | None, kv: storage.KeyValue,
        old_shared: bool = False,
    ) -> dict[str, Any]:
        """The object to store: ``body`` (which the caller hands over) merged with ``old`` per subresource.

        A subresource write starts from a fresh copy of the stored object (decoding ``kv`` is several times
        cheaper than deep-copying ``old``).
        """
        if subresource == "status":
            new = decode_kv(kv)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            return new
        if subresource == "finalize":
            new = decode_kv(kv)
            spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
            new.setdefault("spec", {})["finalizers"] = list(spec.get("finalizers") or [])
            return new
        new = body
        if rt.has_status:
            if "status" in old:
                new["status"] = orjson.loads(orjson.dumps(old["status"])) if old_shared else old["status"]
            else:
                new.pop("status", None)
        return new

    async def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        ctx: RequestContext | None = None,
        subresource: str | None = None,
        *,
        owned: bool = False,
    ) -> dict[str, Any]:
        """PUT. ``owned``: the caller hands ``body`` over (the HTTP layer's parsed body, the in-process transport's
        copy), so the write may build the new object out of it; else the body's nested objects are left alone."""
        ctx = ctx or RequestContext()
        body = self._check_body(rt, body)
        md = meta(body)
        if md.get("name") and md["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({md['name']}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and md.get("namespace") and md["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        precondition = md.get("resourceVersion") or ""
        key = self._key(rt, namespace, name)
        # the first attempt may start from the store's newest known value (no round trip): an attempt on it that
        # does not end in a compare-and-swap is made again from a read (see Store.peek)
        found = self.store.peek(key)
        peeked = found is not None
        stored: tuple[storage.KeyValue, dict[str, Any], bool] | None = None
        if subresource is None:
            if found is None:
                found = await self.store.get(key)
            if found is not None:
                stored = (found, *self._old(found))
            try:
                self._field_checks(rt, body, ctx, stored[1] if stored is not None else None)
            except ApiError:
                if not peeked:
                    raise
                peeked, found = False, await self.store.get(key)
                stored = (found, *self._old(found)) if found is not None else None
                self._field_checks(rt, body, ctx, stored[1] if stored is not None else None)
        elif found is not None:
            stored = (found, *self._old(found))
        pristine: bytes | None = None
        for attempt in range(_RETRIES):
            from_peek = attempt == 0 and peeked
            if attempt == 0 and stored is not None:
                kv, old, shared = stored  # read (or peeked) just above, nothing awaited since
            else:
                kv = await self._get_kv(rt, namespace, name)
                old, shared = self._old(kv)
            # an owned body is consumed by the first attempt; a retry (or a body not handed over) starts again
            # from a copy taken before (an orjson round trip: several times cheaper than a deep copy)
            if pristine is None:
                pristine = orjson.dumps(body)
            if precondition and precondition != str(kv.mod_revision):
                # certain unless a peeked value is older than the precondition: the store holds a newer one
                if not from_peek or _older_than(precondition, kv.mod_revision):
                    raise errors.conflict(rt, name)
                continue  # decide again on a read
            try:
                work = body if attempt == 0 and owned else orjson.loads(pristine)
                new = self._merge_for_update(rt, work, old, subresource, kv, shared)
                return await self._write_update(rt, namespace, name, kv, old, new, ctx, subresource, shared,
                                                peeked=from_peek)
            except _Retry:
                if precondition and not from_peek:
                    raise errors.conflict(rt, name) from None
                continue
            except ApiError:
                if from_peek:
                    continue  # decided on a value that may be stale: decide again on a read
                raise
        raise errors.conflict(rt, name, "too many concurrent writers; try again")

    async def _write_update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        kv: storage.KeyValue,
        old: dict[str, Any],
        new: dict[str, Any],
        ctx: RequestContext,
        subresource: str | None,
        old_shared: bool = False,
        skip: Any = _COMPUTE,
        *,
        peeked: bool = False,
    ) -> dict[str, Any]:
        """Store ``new`` (the caller's from now on) over ``old`` (read-only; shared with watchers if
        ``old_shared``). ``peeked``: ``kv`` is the store's newest known value, not read, so an outcome without a
        compare-and-swap on it (a no-op, a dry run) raises _Retry to be decided again on a read."""
        om, nm = old["metadata"], meta(new)
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if key in om:
                nm[key] = om[key]
            else:
                nm.pop(key, None)
        nm["name"] = name
        if rt.namespaced:
            nm["namespace"] = namespace
        else:
            nm.pop("namespace", None)
        nm.pop("resourceVersion", None)
        nm.pop("selfLink", None)
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        if om.get("deletionTimestamp"):
            added = set(nm.get("finalizers") or []) - set(om.get("finalizers") or [])
            if added:
                raise errors.invalid(
                    rt, name, [Cause("metadata.finalizers", "Forbidden: no new finalizers can be added if the "
                                     "object is being deleted, found new finalizers " + str(sorted(added)),
                                     "FieldValueForbidden")]
                )
        strategy = self.strategies.get((rt.group, rt.kind))
        if strategy:
            strategy(new, old)
        # admission defaults first (as kube-apiserver's mutating admission runs before the generation is decided):
        # a write whose spec only differs by what defaulting puts back is not a spec change
        self._validate(rt, new, old, "UPDATE", ctx, skip)
        self._bump_generation(rt, new, old)
        value = encode(new)
        if peeked and (value == kv.value or ctx.dry_run):
            raise _Retry()
        if value == kv.value:
            # no-op (encoding is canonical: sorted keys): nothing bumps, no event
            return decode_kv(kv) if old_shared else old
        if ctx.dry_run:
            nm["resourceVersion"] = str(kv.mod_revision)
            return new
        if nm.get("deletionTimestamp") and not pending_finalizers(rt, new):
            try:
                rev, last = await self.store.delete(kv.key, kv.mod_revision)
            except (storage.ConflictError, storage.KeyNotFoundError):
                raise _Retry() from None
            nm["resourceVersion"] = str(rev)
            self._notify(rt, "DELETED", last.value, rev)
            return new
        try:
            rev = await self.store.update(kv.key, value, kv.mod_revision)
        except storage.ConflictError:
            raise _Retry() from None
        except storage.KeyNotFoundError:
            raise errors.not_found(rt, name) from None
        nm["resourceVersion"] = str(rev)
        self._notify(rt, "MODIFIED", value, rev)
        return new

    # ------------------------------------------------------------------ patch
    async def write_guarded(
        self, rt: ResourceType, obj: Mapping[str, Any],
        attempt: Callable[[dict[str, Any]], Awaitable[dict[str, Any]] | dict[str, Any] | None], *,
        attempts: int = 10,
    ) -> tuple[bool, dict[str, Any] | None]:
        """Write ``obj`` (the stored object as last read) with optimistic concurrency, reading it again after a
        conflict.

        ``attempt(current)`` returns the write to await (one conditional on ``current``'s resourceVersion, its
        result the stored object), or, when nothing is to be written, the object to return (or None). Returns
        ``(done, object)``: done once a write landed or none was needed, with the object as it stands (None when
        it is gone, was replaced by one with another uid, or ``attempt`` gave None); ``(False, None)`` when every
        attempt met a concurrent write.
        """
        md = obj.get("metadata") or {}
        namespace = (md.get("namespace") or None) if rt.namespaced else None
        name, uid = str(md.get("name") or ""), md.get("uid")
        current = dict(obj)
        for _ in range(attempts):
            write = attempt(current)
            if write is None or isinstance(write, dict):
                return True, write
            try:
                return True, await write
            except ApiError as e:
                if e.code == 404:
                    return True, None
                if e.code != 409:
                    raise
            try:
                current = await self.get(rt, namespace, name)
            except ApiError as e:
                if e.code == 404:
                    return True, None
                raise
            if (current.get("metadata") or {}).get("uid") != uid:
                return True, None
        return False, None

    async def edit_metadata(
        self, rt: ResourceType, obj: Mapping[str, Any],
        edit: Callable[[Mapping[str, Any]], dict[str, Any] | None], *, attempts: int = 10,
    ) -> tuple[bool, dict[str, Any] | None]:
        """Change ``obj``'s metadata with merge patches guarded by its resourceVersion (see :meth:`write_guarded`).

        ``edit(metadata)`` gives the metadata fields to merge (None for a field removes it), or None when nothing
        needs to change (then the object is returned as it stands).
        """
        md = obj.get("metadata") or {}
        namespace = (md.get("namespace") or None) if rt.namespaced else None
        name = str(md.get("name") or "")

        async def patched(fields: dict[str, Any]) -> dict[str, Any]:
            written, _ = await self.patch(rt, namespace, name, MERGE_PATCH, {"metadata": fields})
            return written

        def attempt(current: dict[str, Any]) -> Awaitable[dict[str, Any]] | dict[str, Any]:
            cmd = current.get("metadata") or {}
            fields = edit(cmd)
            if fields is None:
                return current
            return patched({**fields, "resourceVersion": cmd.get("resourceVersion")})

        return await self.write_guarded(rt, obj, attempt, attempts=attempts)

    async def remove_finalizer(self, rt: ResourceType, obj: Mapping[str, Any], finalizer: str, *,
                               attempts: int = 10) -> bool:
        """Take ``finalizer`` off ``obj`` (see :meth:`edit_metadata`); False when every attempt conflicted."""

        def without(md: Mapping[str, Any]) -> dict[str, Any] | None:
            finalizers = [f for f in md.get("finalizers") or [] if isinstance(f, str)]
            if finalizer not in finalizers:
                return None
            return {"finalizers": [f for f in finalizers if f != finalizer] or None}

        done, _ = await self.edit_metadata(rt, obj, without, attempts=attempts)
        return done

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: Any,
        ctx: RequestContext | None = None,
        subresource: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Apply a patch; returns (object, created). Server-side apply creates a missing object."""
        ctx = ctx or RequestContext()
        if patch_type == APPLY_PATCH:
            if not ctx.field_manager:
                raise errors.invalid(rt, name, [Cause("fieldManager", "Required value: is required for apply patch",
                                                      "FieldValueRequired")])
            if not isinstance(patch, dict):
                raise errors.bad_request("apply patch body must be an object")
            pm = patch.get("metadata") or {}
            if isinstance(pm, dict) and pm.get("name") and pm["name"] != name:
                raise errors.bad_request(
                    f"the name of the object ({pm['name']}) does not match the name on the URL ({name})"
                )
        elif patch_type == JSON_PATCH:
            if not isinstance(patch, list):
                raise errors.bad_request("json patch must be a JSON array of operations")
            if len(patch) > MAX_JSON_PATCH_OPS:
                raise errors.invalid(rt, name, [Cause("", f"Too many: {len(patch)}: must have at most "
                                                      f"{MAX_JSON_PATCH_OPS} operations", "FieldValueTooMany")])
        elif not isinstance(patch, dict):
            raise errors.bad_request("patch body must be a JSON object")
        key = self._key(rt, namespace, name)
        for attempt in range(_RETRIES):
            # the first attempt may start from the store's newest known value (no round trip); an attempt that
            # does not end in a compare-and-swap on it is made again from a read (see Store.peek)
            kv = self.store.peek(key) if attempt == 0 else None
            peeked = kv is not None
            if kv is None:
                kv = await self.store.get(key)
            if kv is None:
                if patch_type == APPLY_PATCH and subresource is None:
                    body = copy.deepcopy(patch)
                    meta(body)["name"] = name
                    return await self.create(rt, namespace, body, ctx), True
                raise errors.not_found(rt, name)
            try:
                return await self._patch_attempt(rt, namespace, name, kv, patch_type, patch, ctx, subresource,
                                                 peeked), False
            except _CertainConflict as e:
                raise e.error from None
            except _Retry:
                # another write landed first: apply the patch again to what it wrote (kube-apiserver's
                # GuaranteedUpdate). A patch that carries a resourceVersion precondition then meets the check
                # below and gets 409; one without always applies to the newest object (``precondition`` is read
                # off the patched object, which otherwise carries the stored object's own resourceVersion)
                continue
            except ApiError:
                if peeked:
                    continue  # decided on a value that may be stale: decide again on a read
                raise
        raise errors.conflict(rt, name, "too many concurrent writers; try again")

    async def _patch_attempt(self, rt: ResourceType, namespace: str | None, name: str, kv: storage.KeyValue,
                             patch_type: str, patch: Any, ctx: RequestContext, subresource: str | None,
                             peeked: bool) -> dict[str, Any]:
        """One attempt of :meth:`patch` on the stored ``kv`` (``peeked``: the store's newest known value, not
        read); raises _Retry to be made again on a newer value."""
        old, shared = self._old(kv)
        try:
            patched = self._apply_patch(rt, old, kv, patch_type, patch)
        except PatchError as e:
            raise errors.patch_failed(rt, name, str(e)) from None
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch result is not an object")
        pmeta = patched.get("metadata")
        if not isinstance(pmeta, dict):
            raise errors.invalid(rt, name, [Cause("metadata", "Required value", "FieldValueRequired")])
        precondition = pmeta.get("resourceVersion") or ""
        if precondition and precondition != str(kv.mod_revision):
            if peeked and _older_than(precondition, kv.mod_revision):
                # a value the store held after the precondition's: whatever it holds now is newer still
                raise _CertainConflict(errors.conflict(rt, name))
            raise errors.conflict(rt, name)
        if patched.get("kind") not in (None, rt.kind) or patched.get("apiVersion") not in (None, rt.api_version):
            raise errors.bad_request("a patch may not change apiVersion or kind")
        skip: Any = _COMPUTE
        fields_skip: Any = _COMPUTE
        if patch_type == MERGE_PATCH and isinstance(patched, dict):
            # what the patch names is all that may have changed: no need to compare to find the rest
            skip = self._patched_parts(rt, patch, patched, subresource, stored=True)
            if skip is None:
                skip = _COMPUTE
            elif subresource is None:
                fields_skip = self._patched_parts(rt, patch, patched, subresource, stored=False)
        if subresource is None:
            self._field_checks(rt, patched, ctx, old, fields_skip)
            new = self._merge_for_update(rt, patched, old, subresource, kv, shared)
        elif subresource == "status" and patch_type == MERGE_PATCH:
            # ``patched`` is a fresh copy of the stored object changed only where the patch says: the
            # status write keeps its status and puts back what the patch changed elsewhere
            new = patched
            for k in patch:
                if k != "status":
                    if k in old:
                        new[k] = orjson.loads(orjson.dumps(old[k]))
                    else:
                        new.pop(k, None)
        else:
            new = self._merge_for_update(rt, patched, old, subresource, kv, shared)
        return await self._write_update(rt, namespace, name, kv, old, new, ctx, subresource, shared, skip,
                                        peeked=peeked)

    def _apply_patch(self, rt: ResourceType, old: dict[str, Any], kv: storage.KeyValue, patch_type: str, patch: Any) -> Any:
        """The patched object, sharing nothing with ``old`` or ``patch``."""
        if patch_type == MERGE_PATCH:
            # into a fresh copy of the stored object: O(patch), not a copy of the whole object per level
            return merge_patch_into(decode_kv(kv), patch)
        if patch_type == JSON_PATCH:
            return apply_json_patch_into(decode_kv(kv), patch)  # into a fresh copy too: one decode, no copy
        table = merge_key_table_for(rt.group, rt.kind)
        if patch_type == STRATEGIC_PATCH:
            return apply_strategic_merge_patch(old, patch, table)
        if patch_type == APPLY_PATCH:
            return apply_server_side_apply(old, patch, table)
        raise errors.unsupported_media_type(patch_type, list(PATCH_TYPES))

    # ------------------------------------------------------------------ delete
    async def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        options: dict[str, Any] | None = None,
        ctx: RequestContext | None = None,
    ) -> tuple[dict[str, Any], int]:
        """Returns (body, http code): the object while finalizers hold it, else a Success Status."""
        ctx = ctx or RequestContext()
        options = options or {}
        pre = options.get("preconditions") or {}
        propagation = options.get("propagationPolicy") or ""
        if propagation not in ("", "Background", "Foreground", "Orphan"):
            raise errors.invalid(rt, name, [Cause("propagationPolicy", f'Unsupported value: "{propagation}": '
                                                  'supported values: "Background", "Foreground", "Orphan"',
                                                  "FieldValueNotSupported")])
        for _ in range(_RETRIES):
            kv = await self._get_kv(rt, namespace, name)
            obj = decode_kv(kv)
            md = meta(obj)
            if pre.get("uid") and pre["uid"] != md.get("uid"):
                raise errors.conflict(
                    rt, name, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {md.get('uid')}"
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != md.get("resourceVersion"):
                raise errors.conflict(
                    rt,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                    f"ResourceVersion in object meta: {md.get('resourceVersion')}",
                )
            finalizers = pending_finalizers(rt, obj)
            if propagation == "Orphan" and "orphan" not in finalizers and self._gc_enabled:
                md.setdefault("finalizers", []).append("orphan")
                finalizers.append("orphan")
            elif propagation == "Foreground" and "foregroundDeletion" not in finalizers and self._gc_enabled:
                md.setdefault("finalizers", []).append("foregroundDeletion")
                finalizers.append("foregroundDeletion")
            if finalizers:
                if md.get("deletionTimestamp") and len(md.get("finalizers") or []) == len(kv_finalizers(kv)):
                    # already being deleted and this request adds nothing: report the object as it is
                    return obj, 202 if propagation == "Foreground" else 200
                new = orjson.loads(orjson.dumps(obj))  # a JSON object's deep copy, several times cheaper
                nm = meta(new)
                if not nm.get("deletionTimestamp"):
                    nm["deletionTimestamp"] = now_rfc3339()
                    nm["deletionGracePeriodSeconds"] = 0
                strategy = self.strategies.get((rt.group, rt.kind))
                if strategy:
                    strategy(new, obj)
                self._bump_generation(rt, new, obj)
                if ctx.dry_run:
                    return new, 200
                value = encode(new)
                try:
                    rev = await self.store.update(kv.key, value, kv.mod_revision)
                except storage.ConflictError:
                    continue
                nm["resourceVersion"] = str(rev)
                self._notify(rt, "MODIFIED", value, rev)
                return new, 202 if propagation == "Foreground" else 200
            if ctx.dry_run:
                return (obj if rt.return_deleted_object else self._success(rt, obj)), 200
            try:
                rev, last = await self.store.delete(kv.key, kv.mod_revision)
            except (storage.ConflictError, storage.KeyNotFoundError):
                continue
            deleted = decode(last.value, rev)
            self._notify(rt, "DELETED", last.value, rev)
            if rt.return_deleted_object:
                return deleted, 200
            return self._success(rt, deleted, propagation), 200
        raise errors.conflict(rt, name, "too many concurrent writers; try again")

    _gc_enabled = False

    @staticmethod
    def _success(rt: ResourceType, obj: dict[str, Any], propagation: str = "") -> dict[str, Any]:
        md = meta(obj)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": md.get("name"), "group": rt.group, "kind": rt.plural, "uid": md.get("uid")},
        }

    async def delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        options: dict[str, Any] | None = None,
        ctx: RequestContext | None = None,
    ) -> dict[str, Any]:
        listed = await self.list(rt, namespace, label_selector=label_selector, field_selector=field_selector)
        items = []
        for obj in listed["items"]:
            md = meta(obj)
            try:
                body, _ = await self.delete(rt, md.get("namespace"), md["name"], options, ctx)
            except ApiError as e:
                if e.code == 404:
                    continue
                raise
            items.append(obj if body.get("kind") == "Status" else body)
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": listed["metadata"], "items": items}

    # ------------------------------------------------------------------ watch
    async def watch(self, rt: ResourceType, spec: WatchSpec) -> WatchStream:
        """The events (type, object) of a watch. Raises ApiError(410) at once when the RV is too old.

        The objects are shared with every other watcher of the same revision: do not mutate them.
        """
        ls, fs = self._selectors(rt, spec.label_selector, spec.field_selector)
        prefix = rt.key_prefix(spec.namespace if rt.namespaced else None)
        rv = spec.resource_version
        initial: list[dict[str, Any]] = []
        if spec.send_initial_events or rv in ("", "0"):
            res = await self.store.list(prefix)
            start = res.revision
            peek = self.decoded.peek
            initial = [o for o in (peek(kv) for kv in res.items) if self._matches(o, ls, fs)]
        else:
            try:
                start = int(rv)
            except ValueError:
                raise errors.bad_request(f"invalid resourceVersion {rv!r}") from None
        try:
            watcher = await self.store.watch(prefix, start)
        except storage.CompactedError as e:
            raise errors.expired(f"too old resource version: {start} ({e.compacted + 1})") from None
        return WatchStream(self.decoded, rt, watcher, initial, start, ls, fs, spec)


class WatchStream:
    """The events of one watch, and how far the underlying store watch has got.

    Read it with ``poll`` (the next event ready now, or None; no await, no task) and ``wakeup`` (a future done
    once ``poll`` has something again), or iterate it (async). ``finished``: nothing more will come. An
    ``ERROR`` event (410 Expired: the store ended the watch, or its history was compacted) is the last one.
    """

    def __init__(self, decoded: DecodedObjects, rt: ResourceType, watcher: Any, initial: list[dict[str, Any]],
                 start: int, ls: Any, fs: Any, spec: WatchSpec) -> None:
        if not hasattr(watcher, "wakeup"):
            watcher = PolledWatcher(watcher)
        self._watcher = watcher
        self._decoded = decoded
        self._ls = ls
        self._fs = fs
        self._filtered = not (ls.empty and not fs.requirements)
        self._start = start
        self._ended = False  # no more events from the store watch (closed, or an ERROR was produced)
        self._closed = False
        pending: deque[tuple[str, dict[str, Any]]] = deque(("ADDED", obj) for obj in initial)
        if spec.send_initial_events:
            pending.append(("BOOKMARK", {
                "kind": rt.kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(start), "annotations": {"k8s.io/initial-events-end": "true"}},
            }))
        elif initial or spec.resource_version in ("", "0"):
            # not sent to clients: tells the HTTP layer the snapshot's revision, which later bookmarks
            # may carry (the initial objects' own revisions are older and unordered)
            pending.append((PROGRESS, {"metadata": {"resourceVersion": str(start)}}))
        self._pending = pending
        self.initial_done = not pending

    # -- reading -------------------------------------------------------------------------------
    def poll(self) -> tuple[str, dict[str, Any]] | None:
        """The next event if one is ready, else None (see ``finished``)."""
        pending = self._pending
        if pending:
            item = pending.popleft()
            if not pending:
                self.initial_done = True
            return item
        if self._ended or self._closed:
            return None
        watcher = self._watcher
        while True:
            try:
                ev = watcher.poll()
            except storage.WatchClosedError:
                self._ended = True
                return "ERROR", errors.expired("watch closed by the server: the client fell too far behind; "
                                               "re-list and watch again").status()
            except storage.CompactedError as e:
                self._ended = True
                return "ERROR", errors.expired(f"too old resource version: {self._start} "
                                               f"({e.compacted + 1})").status()
            if ev is None:
                if watcher.finished:
                    self._ended = True
                return None
            item = self._event(ev)
            if item is not None:
                return item

    def _event(self, ev: storage.WatchEvent) -> tuple[str, dict[str, Any]] | None:
        obj = self._decoded.get(ev.value, ev.revision)
        if ev.type == "DELETE":
            return ("DELETED", obj) if not self._filtered or self._matches(obj) else None
        if not self._filtered:
            return ("ADDED", obj) if ev.prev_value is None else ("MODIFIED", obj)
        now = self._matches(obj)
        if ev.prev_value is None:
            return ("ADDED", obj) if now else None
        before = self._matches(self._decoded.get(ev.prev_value, ev.revision, -ev.revision))
        if now and before:
            return "MODIFIED", obj
        if now:
            return "ADDED", obj
        if before:
            return "DELETED", obj
        return None

    def _matches(self, obj: dict[str, Any]) -> bool:
        return ResourceStorage._matches(obj, self._ls, self._fs)

    @property
    def finished(self) -> bool:
        """Nothing more will come (the store watch ended, or after an ERROR event)."""
        return not self._pending and (self._ended or self._closed)

    def wakeup(self) -> asyncio.Future[None]:
        """A future done once ``poll`` may have something; cancelling it loses nothing."""
        if self._pending or self._ended or self._closed:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        wakeup: asyncio.Future[None] = self._watcher.wakeup()
        return wakeup

    async def wait(self, within: float | None = None) -> bool:
        """Wait until ``poll`` may have something, at most ``within`` seconds; False when the time ran out."""
        wakeup = self.wakeup()
        if wakeup.done():
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()

        def wake(_: object = None) -> None:
            if not waiter.done():
                waiter.set_result(None)

        wakeup.add_done_callback(wake)
        timer = loop.call_later(within, wake) if within is not None else None
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            wakeup.remove_done_callback(wake)
        return wakeup.done()

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> tuple[str, dict[str, Any]]:
        while True:
            item = self.poll()
            if item is not None:
                return item
            if self.finished:
                await self.aclose()
                raise StopAsyncIteration
            await self.wakeup()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        await self._watcher.close()

    def __del__(self) -> None:
        # a consumer that stopped reading without aclose: the store must not keep feeding the watcher
        if not self._closed:
            self._closed = True
            discard = getattr(self._watcher, "discard", None)
            if discard is not None:
                discard()

    def progress_revision(self) -> int | None:
        """While the consumer waits for the next event: a revision every event up to which was sent."""
        if not self.initial_done or self._closed:
            return None
        progress: int | None = self._watcher.progress_revision()
        return progress


class _Retry(Exception):
    pass


class _CertainConflict(Exception):
    """A resourceVersion precondition older than a value the store held: the conflict needs no read to confirm
    (a key's mod_revision only grows), so ``error`` (409) is the answer at once."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _older_than(precondition: str, revision: int) -> bool:
    """Whether the resourceVersion ``precondition`` names a revision before ``revision``."""
    try:
        return int(precondition) < revision
    except ValueError:
        return False


def kv_finalizers(kv: storage.KeyValue) -> list[str]:
    return list((orjson.loads(kv.value).get("metadata") or {}).get("finalizers") or [])


def pending_finalizers(rt: ResourceType, obj: dict[str, Any]) -> list[str]:
    """What still holds the object back from deletion: metadata.finalizers (and a Namespace's spec ones)."""
    fins = list(meta(obj).get("finalizers") or [])
    if rt.group == "" and rt.kind == "Namespace":
        fins.extend(f"spec/{f}" for f in ((obj.get("spec") or {}).get("finalizers") or []))
    return fins
