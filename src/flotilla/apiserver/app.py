"""The HTTP face of the API server: routing, content negotiation, watch streaming (aiohttp)."""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson
from aiohttp import web

from flotilla import __version__
from flotilla.apiserver import discovery, errors
from flotilla.apiserver.agent_scope import agent_cluster_of, agent_create_name_error
from flotilla.apiserver.auth import may_read_secrets
from flotilla.apiserver.bodies import not_json, parse_body, parse_json, parse_yaml
from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.fairness import INLINE_JSON_BYTES, INLINE_YAML_BYTES, BodyDecoder, FairnessLimits
from flotilla.apiserver.openapi import OpenAPICache
from flotilla.apiserver.redaction import Redactor, may_carry_secret, redactor_for
from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.rest import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    PROGRESS,
    STRATEGIC_PATCH,
    RequestContext,
    ResourceStorage,
    WatchSpec,
)
from flotilla.apiserver.scale import scale_from_object, scale_to_patch
from flotilla.apiserver.tables import build_table, wants_table
from flotilla.apiserver.tasks import cancel_and_wait

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 3 * 1024 * 1024
JSON_TYPES = ("application/json", "")
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
ACCEPTED_BODY_TYPES = ["application/json", "application/yaml"]
_DISCONNECT_CHECK = 2.0  # seconds between checks that a quiet watch's client is still there


@dataclass
class ServerOptions:
    bookmark_interval: float = 30.0
    default_watch_timeout: float = 1800.0
    address: str = "127.0.0.1:6443"
    body_fairness: FairnessLimits | None = None  # heavy body decoding; None: the defaults


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None,
          content_type: str = "application/json") -> web.Response:
    h = dict(headers or {})
    h["Content-Type"] = content_type
    return web.Response(body=orjson.dumps(data), status=status, headers=h)


def error_response(err: ApiError) -> web.Response:
    resp = web.Response(body=orjson.dumps(err.status()), status=err.code, content_type="application/json")
    for k, v in err.headers.items():
        resp.headers[k] = v
    return resp


def _warning_headers(resp: web.StreamResponse, warnings: list[str]) -> None:
    for w in dict.fromkeys(warnings):
        text = w.replace('"', "'").replace("\n", " ")
        # a header carries printable ASCII only: a control character would abort the whole response
        text = "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii") for c in text)
        resp.headers.add("Warning", f'299 - "{text}"')


def _flow(request: web.Request) -> str:
    """Whose request this is, for fairness: the authenticated user, else the peer and its User-Agent."""
    user = request.get("user")
    name = getattr(user, "name", None)
    if name:
        return f"user:{name}"
    return f"peer:{request.remote}:{request.headers.get('User-Agent', '')}"


def _check_agent_create(request: web.Request, rt: ResourceType, body: Any) -> None:
    """A Pull cluster's agent creates only its own Cluster and Lease: the authorizer cannot see a create's name."""
    user, attrs = request.get("user"), request.get("request_attributes")
    if user is None or attrs is None:
        return
    cluster = agent_cluster_of(user)
    if cluster is None:
        return
    md = body.get("metadata") if isinstance(body, dict) else None
    name = md.get("name") if isinstance(md, dict) else None
    why = agent_create_name_error(attrs, name if isinstance(name, str) else None, cluster)
    if why is not None:
        raise errors.forbidden(f"{attrs.qualified_resource} is forbidden: User \"{user.name}\" cannot create "
                               f"resource \"{attrs.resource}\" in API group \"{attrs.api_group}\": {why}", rt,
                               name if isinstance(name, str) else None)


def _truthy(v: str | None) -> bool:
    return (v or "").lower() in ("1", "true")


class ApiHandler:
    def __init__(self, storage: ResourceStorage, options: ServerOptions | None = None) -> None:
        self.storage = storage
        self.types = storage.types
        self.options = options or ServerOptions()
        self.openapi = OpenAPICache(self.types)
        self._watches: set[asyncio.Task[Any]] = set()
        self.closing = False
        self.metrics: Any = None  # an ApiServerMetrics: serves GET /metrics
        self.decoder = BodyDecoder(self.options.body_fairness)

    async def close(self) -> None:
        """End every open watch (server shutdown); clients re-watch from their last resourceVersion.

        From now on new watches are refused (503), so clients cannot keep the server from stopping.
        """
        self.closing = True
        await cancel_and_wait(list(self._watches))
        self.decoder.close()

    # --------------------------------------------------------------- entry point
    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except ApiError as e:
            return error_response(e)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as e:  # never crash a request handler on unexpected input
            log.exception("internal error on %s %s", request.method, request.path)
            return error_response(errors.internal(f"{type(e).__name__}: {e}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        segs = [s for s in request.path.split("/") if s]
        if not segs:
            return _json({"paths": ["/api", "/api/v1", "/apis", "/openapi/v3", "/version", "/healthz"]})
        head = segs[0]
        if head in ("healthz", "livez", "readyz") and len(segs) == 1:
            return web.Response(text="ok")
        if head == "version" and len(segs) == 1:
            return _json(self._version())
        if head == "metrics" and len(segs) == 1 and self.metrics is not None and request.method in ("GET", "HEAD"):
            return self.metrics.render()
        if head == "openapi":
            return self._openapi(segs, request)
        if head == "api":
            if len(segs) == 1:
                return self._discovery_root(request, core=True)
            return await self._group_version(request, "", segs[1], segs[2:])
        if head == "apis":
            if len(segs) == 1:
                return self._discovery_root(request, core=False)
            if len(segs) == 2:
                if not self.types.versions(segs[1]):
                    raise errors.path_not_found()
                return _json(discovery.api_group(self.types, segs[1]))
            if segs[1] == "authorization.k8s.io" and len(segs) == 4 and segs[3] == "selfsubjectaccessreviews":
                return await self._self_subject_access_review(request)
            return await self._group_version(request, segs[1], segs[2], segs[3:])
        raise errors.path_not_found()

    @staticmethod
    def _version() -> dict[str, Any]:
        return {
            "major": "1",
            "minor": "37",
            "gitVersion": f"v1.37.0+flotilla-{__version__}",
            "gitCommit": "flotilla",
            "gitTreeState": "clean",
            "buildDate": "2026-11-30T00:00:00Z",
            "goVersion": "python3.11",
            "compiler": "cpython",
            "platform": "linux/amd64",
        }

    async def _self_subject_access_review(self, request: web.Request) -> web.Response:
        """``kubectl auth can-i``: what the authorizer would decide for the requesting user."""
        from flotilla.apiserver.auth import RequestAttributes
        from flotilla.apiserver.protobuf_ssar import decode_self_subject_access_review

        if request.method != "POST":
            raise errors.method_not_allowed()
        body = await self._body(request, protobuf=decode_self_subject_access_review)
        if not isinstance(body, dict):
            raise errors.bad_request("expected a SelfSubjectAccessReview object")
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (res is None) == (non is None) or not isinstance(res or non, dict):
            message = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
            cause = errors.Cause("spec.resourceAttributes", message)
            raise errors.ApiError(422, "Invalid", f'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                                  f"spec.resourceAttributes: Invalid value: {message}",
                                  {"group": "authorization.k8s.io", "kind": "SelfSubjectAccessReview",
                                   "causes": [cause.as_dict()]})
        attrs_in = res if res is not None else non
        verb = str(attrs_in.get("verb") or "")
        if res is not None:
            attrs = RequestAttributes(verb=verb, path="", resource_request=True,
                                      api_group=str(res.get("group") or ""), api_version=str(res.get("version") or ""),
                                      namespace=str(res.get("namespace") or ""), resource=str(res.get("resource") or ""),
                                      subresource=str(res.get("subresource") or ""), name=str(res.get("name") or ""))
        else:
            attrs = RequestAttributes(verb=verb, path=str(non.get("path") or ""))
        user, authorizer = request.get("user"), request.get("authorizer")
        if user is None or authorizer is None:
            allowed, reason = True, "this API server authorizes every request (it was started with --insecure)"
        else:
            allowed, reason = authorizer.authorize(user, verb, attrs)
        body.setdefault("metadata", {})
        body["status"] = {"allowed": bool(allowed), **({"reason": reason} if reason else {})}
        return _json(body, status=201)

    # --------------------------------------------------------------- discovery / openapi
    def _discovery_root(self, request: web.Request, core: bool) -> web.Response:
        accept = request.headers.get("Accept", "")
        etag = '"' + self.types.etag() + ("c" if core else "g") + '"'
        if discovery.wants_aggregated(accept):
            if request.headers.get("If-None-Match") == etag:
                return web.Response(status=304, headers={"ETag": etag})
            return _json(discovery.aggregated(self.types, core), headers={"ETag": etag},
                         content_type=discovery.AGGREGATED_V2)
        if core:
            return _json(discovery.api_versions(self.options.address))
        return _json(discovery.api_group_list(self.types))

    def _openapi(self, segs: list[str], request: web.Request) -> web.Response:
        if len(segs) >= 2 and segs[1] == "v3":
            if len(segs) == 2:
                return _json(self.openapi.root())
            found = self.openapi.document("/".join(segs[2:]))
            if found is None:
                raise errors.path_not_found()
            raw, h = found
            headers = {"ETag": f'"{h}"'}
            if request.query.get("hash") == h:
                headers["Cache-Control"] = "public, immutable"
            else:
                headers["Cache-Control"] = "no-cache, private"
            return web.Response(body=raw, content_type="application/json", headers=headers)
        if len(segs) == 2 and segs[1] == "v2":
            return _openapi_v2(request)
        raise errors.path_not_found()

    # --------------------------------------------------------------- resources
    def _resolve(
        self, group: str, version: str, rest: list[str]
    ) -> tuple[ResourceType, str | None, str | None, str | None]:
        """(type, namespace, name, subresource) for the path after /api/v1 or /apis/g/v."""
        ns: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            rt = self.types.lookup(group, version, rest[2])
            if rt is not None and rt.namespaced:
                ns = rest[1]
                rest = rest[2:]
        rt = self.types.lookup(group, version, rest[0])
        if rt is None or len(rest) > 3:
            raise errors.path_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rt.subresources:
            raise errors.path_not_found()
        return rt, ns, name, sub

    async def _group_version(
        self, request: web.Request, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        if not rest:
            doc = discovery.api_resource_list(self.types, group, version)
            if doc is None:
                raise errors.path_not_found()
            return _json(doc)
        rt, ns, name, sub = self._resolve(group, version, rest)
        method = request.method
        if name is None:
            if method == "GET":
                if _truthy(request.query.get("watch")):
                    return await self._watch(request, rt, ns)
                return await self._list(request, rt, ns)
            if method == "POST":
                if rt.namespaced and ns is None:
                    raise errors.method_not_allowed()
                return await self._create(request, rt, ns)
            if method == "DELETE":
                return await self._delete_collection(request, rt, ns)
            raise errors.method_not_allowed()
        if rt.namespaced and ns is None:
            raise errors.path_not_found()
        if sub == "scale":
            return await self._scale(request, rt, ns, name)
        if method == "GET":
            obj = await self.storage.get(rt, ns, name, shared=True,  # only serialized
                                         cached=request.query.get("resourceVersion") == "0")
            return self._object_response(request, rt, obj, _redactor(request, rt))
        if method == "PUT":
            if sub == "finalize" or sub == "status" or sub is None:
                body = await self._body(request)
                ctx = self._ctx(request)
                obj = await self.storage.update(rt, ns, name, body, ctx, subresource=sub, owned=True)
                return self._written(request, rt, obj, ctx, 200)
        if method == "PATCH":
            if sub in (None, "status"):
                return await self._patch(request, rt, ns, name, sub)
        if method == "DELETE" and sub is None:
            body = await self._body(request, allow_empty=True)
            options = self._delete_options(request, body)
            ctx = self._ctx(request)
            result, code = await self.storage.delete(rt, ns, name, options, ctx)
            return self._written(request, rt, result, ctx, code)
        raise errors.method_not_allowed()

    # --------------------------------------------------------------- request helpers
    async def _body(self, request: web.Request, *, allow_empty: bool = False, patch: bool = False,
                    protobuf: Any = None) -> Any:
        ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise errors.too_large(MAX_BODY_BYTES)
        # read to the end of the body (a single read returns only what has arrived so far), with the limit
        buf = bytearray()
        while True:
            chunk = await request.content.read(MAX_BODY_BYTES + 1 - len(buf))
            if not chunk:
                break
            buf += chunk
            if len(buf) > MAX_BODY_BYTES:
                raise errors.too_large(MAX_BODY_BYTES)
        raw = bytes(buf)
        if not raw.strip():
            if allow_empty:
                return None
            raise errors.bad_request("the request body is empty; send a JSON object")
        if protobuf is not None and raw[:4] == b"k8s\x00":  # the one kind kubectl sends as protobuf regardless
            try:
                return protobuf(raw)
            except (ValueError, UnicodeDecodeError) as e:
                raise errors.bad_request(f"the protobuf body cannot be read: {e}") from None
        if "protobuf" in ctype or raw[:4] == b"k8s\x00":
            raise errors.unsupported_media_type("application/vnd.kubernetes.protobuf",
                                                list(PATCH_TYPES) if patch else ACCEPTED_BODY_TYPES)
        if patch:
            if ctype not in PATCH_TYPES:
                raise errors.unsupported_media_type(ctype, list(PATCH_TYPES))
            return await self._parse(request, raw, yaml_ok=ctype == APPLY_PATCH)
        if ctype in JSON_TYPES or ctype.endswith("+json"):
            return await self._parse(request, raw, yaml_ok=False)
        if ctype in YAML_TYPES:
            return await self._parse(request, raw, yaml_ok=True)
        raise errors.unsupported_media_type(ctype, ACCEPTED_BODY_TYPES)

    async def _parse(self, request: web.Request, raw: bytes, *, yaml_ok: bool) -> Any:
        """Small bodies on the loop; heavy ones (big JSON, any but small YAML) on the decoder's threads."""
        if len(raw) <= INLINE_JSON_BYTES:
            try:
                return parse_json(raw)
            except orjson.JSONDecodeError as e:
                if not yaml_ok:
                    raise not_json(e) from None
            if len(raw) <= INLINE_YAML_BYTES:
                return parse_yaml(raw)
        return await self.decoder.run(_flow(request), partial(parse_body, raw, yaml_ok=yaml_ok))

    @staticmethod
    def _ctx(request: web.Request) -> RequestContext:
        q = request.query
        dry = q.getall("dryRun", [])
        for d in dry:
            if d != "All":
                raise errors.bad_request(f'unsupported dryRun value "{d}": supported values: "All"')
        validation = q.get("fieldValidation") or "Warn"
        if validation not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(
                f"fieldValidation parameter unsupported: {validation}. Supported values are Ignore, Warn, Strict"
            )
        return RequestContext(dry_run=bool(dry), field_manager=q.get("fieldManager", ""),
                              field_validation=validation, force=_truthy(q.get("force")))

    @staticmethod
    def _delete_options(request: web.Request, body: Any) -> dict[str, Any]:
        options: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
        if body is not None and not isinstance(body, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        q = request.query
        if q.get("propagationPolicy"):
            options["propagationPolicy"] = q["propagationPolicy"]
        if q.get("gracePeriodSeconds"):
            options["gracePeriodSeconds"] = q["gracePeriodSeconds"]
        grace = options.get("gracePeriodSeconds")
        if grace is not None:
            try:
                if isinstance(grace, bool) or int(grace) < 0:
                    raise ValueError
                options["gracePeriodSeconds"] = int(grace)
            except (TypeError, ValueError):
                raise errors.bad_request(
                    f"gracePeriodSeconds must be a non-negative integer number of seconds, got {grace!r}"
                ) from None
        policy = options.get("propagationPolicy")
        if policy is not None and not isinstance(policy, str):
            raise errors.bad_request("propagationPolicy must be one of Background, Foreground, Orphan")
        if q.get("orphanDependents") and "propagationPolicy" not in options:
            options["propagationPolicy"] = "Orphan" if _truthy(q["orphanDependents"]) else "Background"
        if options.get("orphanDependents") is True and "propagationPolicy" not in options:
            options["propagationPolicy"] = "Orphan"
        pre = options.get("preconditions")
        if pre is not None and not isinstance(pre, dict):
            raise errors.bad_request("preconditions must be an object")
        return options

    def _object_response(self, request: web.Request, rt: ResourceType, obj: dict[str, Any],
                         redact: Redactor | None = None) -> web.Response:
        accept = request.headers.get("Accept", "")
        if wants_table(accept):
            def table(o: dict[str, Any]) -> dict[str, Any]:
                return build_table(rt, [o], include_object=request.query.get("includeObject", "Metadata"),
                                   list_meta={"resourceVersion": obj["metadata"].get("resourceVersion", "")})

            return _json_body(_serialized(table(obj), None if redact is None else lambda: table(redact(obj))))
        return _json_body(_serialized(obj, None if redact is None else lambda: redact(obj)))

    def _written(self, request: web.Request, rt: ResourceType, obj: dict[str, Any], ctx: RequestContext,
                 code: int) -> web.Response:
        resp = _json(obj, status=code)
        _warning_headers(resp, ctx.warnings)
        return resp

    # --------------------------------------------------------------- verbs
    async def _create(self, request: web.Request, rt: ResourceType, ns: str | None) -> web.Response:
        body = await self._body(request)
        _check_agent_create(request, rt, body)
        ctx = self._ctx(request)
        obj = await self.storage.create(rt, ns, body, ctx)
        return self._written(request, rt, obj, ctx, 201)

    async def _patch(self, request: web.Request, rt: ResourceType, ns: str | None, name: str,
                     sub: str | None) -> web.Response:
        ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype == STRATEGIC_PATCH and rt.from_crd:
            # kube-apiserver refuses SMP for custom resources; the Python dynamic client sends it by
            # default, so Flotilla applies it as a JSON merge patch (lists replaced) instead.
            ctype_eff = MERGE_PATCH
        else:
            ctype_eff = ctype
        body = await self._body(request, patch=True)
        ctx = self._ctx(request)
        obj, created = await self.storage.patch(rt, ns, name, ctype_eff, body, ctx, subresource=sub)
        return self._written(request, rt, obj, ctx, 201 if created else 200)

    async def _list(self, request: web.Request, rt: ResourceType, ns: str | None) -> web.Response:
        q = request.query
        result = await self.storage.list_query(rt, ns, q, shared=True)  # shared: only serialized
        redact = _redactor(request, rt)
        items = result["items"]
        if wants_table(request.headers.get("Accept", "")):
            def table(objects: list[dict[str, Any]]) -> dict[str, Any]:
                return build_table(rt, objects, include_object=q.get("includeObject", "Metadata"),
                                   list_meta=result["metadata"])

            redacted_table = None if redact is None else lambda: table([redact(o) for o in items])
            return _json_body(_serialized(table(items), redacted_table))
        redacted = None if redact is None else lambda: {**result, "items": [redact(o) for o in items]}
        return _json_body(_serialized(result, redacted))

    async def _delete_collection(self, request: web.Request, rt: ResourceType, ns: str | None) -> web.Response:
        body = await self._body(request, allow_empty=True)
        options = self._delete_options(request, body)
        ctx = self._ctx(request)
        result = await self.storage.delete_collection(
            rt, ns, label_selector=request.query.get("labelSelector", ""),
            field_selector=request.query.get("fieldSelector", ""), options=options, ctx=ctx)
        return _json(result)

    async def _scale(self, request: web.Request, rt: ResourceType, ns: str | None, name: str) -> web.Response:
        if request.method == "GET":
            return _json(scale_from_object(rt, await self.storage.get(rt, ns, name)))
        ctx = self._ctx(request)
        if request.method == "PUT":
            body = await self._body(request)
            patch = scale_to_patch(rt, body)
        elif request.method == "PATCH":
            ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            body = await self._body(request, patch=True)
            current = scale_from_object(rt, await self.storage.get(rt, ns, name))
            patched, _ = await self._apply_to_scale(rt, current, ctype, body)
            patch = scale_to_patch(rt, patched)
        else:
            raise errors.method_not_allowed()
        obj, _ = await self.storage.patch(rt, ns, name, MERGE_PATCH, patch, ctx)
        return _json(scale_from_object(rt, obj))

    async def _apply_to_scale(self, rt: ResourceType, current: dict[str, Any], ctype: str,
                              body: Any) -> tuple[dict[str, Any], bool]:
        from flotilla.kube.patch import PatchError, apply_json_patch, apply_merge_patch

        try:
            if ctype == JSON_PATCH:
                return apply_json_patch(current, body), False
            if not isinstance(body, dict):
                raise errors.bad_request("patch body must be a JSON object")
            return apply_merge_patch(current, body), False
        except PatchError as e:
            raise errors.bad_request(str(e)) from None

    # --------------------------------------------------------------- watch
    @staticmethod
    def _event_line(rt: ResourceType, item: tuple[str, dict[str, Any]], state: _WatchState,
                    allow_bookmarks: bool, table: bool, q: Any, redact: Redactor | None = None) -> bytes:
        etype, obj = item
        if etype == PROGRESS:
            state.last_rv = obj["metadata"]["resourceVersion"]
            return b""
        if etype == "BOOKMARK":
            if not allow_bookmarks:
                return b""
            state.last_rv = obj["metadata"]["resourceVersion"]
        elif etype != "ERROR":
            state.last_rv = obj["metadata"].get("resourceVersion", state.last_rv)
            if table:
                list_meta, with_columns = {"resourceVersion": state.last_rv}, state.first_table
                state.first_table = False

                def event(o: dict[str, Any]) -> dict[str, Any]:
                    return {"type": etype, "object": build_table(
                        rt, [o], include_object=q.get("includeObject", "Metadata"), list_meta=list_meta,
                        with_columns=with_columns)}
            else:
                def event(o: dict[str, Any]) -> dict[str, Any]:
                    return {"type": etype, "object": o}

            return _serialized(event(obj), None if redact is None else lambda: event(redact(obj))) + b"\n"
        return orjson.dumps({"type": etype, "object": obj}) + b"\n"

    @staticmethod
    async def _bookmark(resp: web.StreamResponse, rt: ResourceType, events: Any, state: _WatchState) -> None:
        """A BOOKMARK at the newest revision known to be fully delivered (the store's progress when idle)."""
        progress = events.progress_revision()
        if progress is not None and progress > int(state.last_rv or 0):
            state.last_rv = str(progress)
        if state.last_rv:
            await resp.write(orjson.dumps({"type": "BOOKMARK", "object": {
                "kind": rt.kind, "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": state.last_rv}}}) + b"\n")

    async def _watch(self, request: web.Request, rt: ResourceType, ns: str | None) -> web.StreamResponse:
        if self.closing:
            raise ApiError(503, "ServiceUnavailable", "the API server is shutting down; retry the watch",
                           headers={"Retry-After": "1"})
        q = request.query
        send_initial = _truthy(q.get("sendInitialEvents"))
        allow_bookmarks = _truthy(q.get("allowWatchBookmarks"))
        if send_initial and (q.get("resourceVersionMatch") != "NotOlderThan" or not allow_bookmarks):
            raise errors.invalid(rt, "", [errors.Cause(
                "sendInitialEvents",
                "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled "
                "and resourceVersionMatch is NotOlderThan and allowWatchBookmarks is true",
                "FieldValueForbidden")])
        spec = WatchSpec(
            namespace=ns,
            label_selector=q.get("labelSelector", ""),
            field_selector=q.get("fieldSelector", ""),
            resource_version=q.get("resourceVersion", ""),
            send_initial_events=send_initial,
            allow_bookmarks=allow_bookmarks,
        )
        try:
            timeout = float(q.get("timeoutSeconds") or 0)
        except ValueError:
            raise errors.bad_request("invalid timeoutSeconds") from None
        if not math.isfinite(timeout):  # nan would never end the watch
            raise errors.bad_request("invalid timeoutSeconds")
        if timeout <= 0:
            timeout = self.options.default_watch_timeout * (1 + random.random())
        table = wants_table(request.headers.get("Accept", ""))
        redact = _redactor(request, rt)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        try:
            events = await self.storage.watch(rt, spec)
        except ApiError as e:
            if e.code != 410:
                raise
            await resp.prepare(request)
            await resp.write(orjson.dumps({"type": "ERROR", "object": e.status()}) + b"\n")
            await resp.write_eof()
            return resp
        await resp.prepare(request)
        this = asyncio.current_task()
        if this is not None:
            self._watches.add(this)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        state = _WatchState(last_rv=spec.resource_version if spec.resource_version not in ("", "0") else "")
        last_bookmark = loop.time()
        # Events are taken from the watch as they are ready (no task or queue per event) and every event ready
        # at once is written as one chunk (one syscall for a burst of events, not one per event). While events
        # keep coming, a chunk waits until _COALESCE after the previous one, so a busy watch makes a few hundred
        # writes a second, each with many events; an idle watch sends its next event at once.
        written_at = -_COALESCE
        try:
            done = False
            while not done:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                item = events.poll()
                if item is None:
                    if events.finished:
                        break
                    wait = min(remaining, self.options.bookmark_interval if allow_bookmarks else remaining,
                               _DISCONNECT_CHECK)
                    if await events.wait(wait):
                        hold = written_at + _COALESCE - loop.time()
                        if hold > 0:
                            await asyncio.sleep(hold)
                        continue
                    if request.transport is None or request.transport.is_closing():
                        break
                    if allow_bookmarks and loop.time() >= last_bookmark + self.options.bookmark_interval:
                        last_bookmark = loop.time()
                        await self._bookmark(resp, rt, events, state)
                    continue
                chunk = bytearray()
                count = 0
                while item is not None:
                    line = self._event_line(rt, item, state, allow_bookmarks, table, q, redact)
                    if line:
                        chunk += line
                    if item[0] == "ERROR":
                        done = True
                        break
                    count += 1
                    if count >= _WATCH_BATCH:
                        break
                    item = events.poll()
                if chunk:
                    await resp.write(bytes(chunk))
                    written_at = loop.time()
        except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if this is not None:
                self._watches.discard(this)
            await events.aclose()
        try:
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        return resp


def _json_body(body: bytes) -> web.Response:
    return web.Response(body=body, headers={"Content-Type": "application/json"})


def _serialized(data: Any, redacted: Callable[[], Any] | None) -> bytes:
    """``data`` as JSON; for a requester who may not read Secrets (``redacted`` given), ``redacted()`` instead
    when the bytes may carry a Secret's content (serializing first: looking through the bytes costs next to
    nothing, looking through the objects does not)."""
    body = orjson.dumps(data)
    if redacted is not None and may_carry_secret(body):
        body = orjson.dumps(redacted())
    return body


def _redactor(request: web.Request, rt: ResourceType) -> Redactor | None:
    """How objects of ``rt`` are served to this request's user: redacted when they may carry a Secret's content
    and the user may not read Secrets (decided once per request); None to serve them as stored."""
    redact = redactor_for(rt.group, rt.kind)
    if redact is None:
        return None
    user, authorizer = request.get("user"), request.get("authorizer")
    if user is None or authorizer is None:  # --insecure: every request may do anything
        return None
    return None if may_read_secrets(authorizer, user) else redact


@dataclass
class _WatchState:
    last_rv: str
    first_table: bool = True


_WATCH_BATCH = 256
_COALESCE = 0.002  # seconds: the shortest time between two chunks of a busy watch


def build_app(handler: ApiHandler, middlewares: list[Any] | None = None, dashboard: Any = None) -> web.Application:
    """The API server's application; ``dashboard`` (a :class:`flotilla.dashboard.server.Dashboard`) adds its
    pages under ``/dashboard/`` before the API's routes."""
    # kube-apiserver accepts long request lines (big selectors); aiohttp's default is 8190 bytes
    app = web.Application(client_max_size=MAX_BODY_BYTES + 1024, middlewares=middlewares or [],
                          handler_args={"max_line_size": 1024 * 1024, "max_field_size": 1024 * 1024})
    if dashboard is not None:
        dashboard.add_routes(app.router)
    app.router.add_route("*", "/{tail:.*}", handler.handle)
    return app


# A Swagger 2.0 document without definitions. kubectl reads /openapi/v2 only for what OpenAPI v3 cannot answer
# (client-side validation of a ``kind: List`` before its items go to the server one by one, with server-side
# validation); without a definition for a kind it skips the client-side check. Protobuf (gnostic's
# openapi_v2.Document, field 1 ``swagger``) when asked for it, as kube-apiserver answers; JSON otherwise.
_OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_OPENAPI_V2_PB = b"\x0a\x032.0"
_OPENAPI_V2_JSON = {"swagger": "2.0", "info": {"title": "Flotilla", "version": "v2"}, "paths": {}, "definitions": {}}


def _openapi_v2(request: web.Request) -> web.Response:
    if "protobuf" in request.headers.get("Accept", ""):
        return web.Response(body=_OPENAPI_V2_PB, headers={"Content-Type": _OPENAPI_V2_PROTOBUF})
    return _json(_OPENAPI_V2_JSON)
