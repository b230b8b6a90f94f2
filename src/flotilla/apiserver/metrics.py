"""The API server's own Prometheus metrics, under kube-apiserver's names, served on its ``/metrics``.

* ``apiserver_request_total{verb, group, version, resource, subresource, scope, component, code}``: every request
  once it has been answered, 401/403/429 included;
* ``apiserver_request_duration_seconds{verb, group, version, resource, subresource, scope, component}``: the time to
  answer it (a histogram with kube-apiserver's buckets; watches are left out, as their duration is the client's);
* ``apiserver_current_inflight_requests{request_kind}``: requests being served, ``readOnly`` or ``mutating``
  (watches apart, as kube-apiserver's max-in-flight filter does), and ``apiserver_longrunning_requests{verb}``: open
  watches;
* ``apiserver_storage_size_bytes{storage_cluster_id}``: the SQLite store's files (database and WAL) on disk;
* the ``process_*`` metrics of the process serving it.

``verb`` is kube-apiserver's reported verb: ``GET``, ``LIST``, ``WATCH``, ``POST``, ``PUT``, ``PATCH``, ``APPLY``
(a server-side apply), ``DELETE`` (also for a collection). ``scope`` is ``resource`` (one named object),
``namespace`` or ``cluster``; a non-resource request (``/healthz``, ``/openapi/v3``...) has its path as
``subresource`` and an empty ``scope``, as in kube-apiserver. A request for a resource this server does not serve is labelled ``resource="other"``
(with empty group and version), and a non-resource path that is not one of the server's own as ``other`` too, so
that made-up paths cannot grow the label set without bound. Deciding the labels is pure
(:func:`request_labels`); :class:`ApiServerMetrics` holds the metrics and the aiohttp middleware that records them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from aiohttp import web
from prometheus_client import generate_latest

from flotilla.apiserver.auth import RequestAttributes, request_attributes
from flotilla.observability.metrics import CONTENT_TYPE, MetricsRegistry

__all__ = [
    "REQUEST_DURATION_BUCKETS",
    "ApiServerMetrics",
    "RequestLabels",
    "known_resource",
    "request_labels",
    "reported_verb",
]

#: kube-apiserver's buckets for ``apiserver_request_duration_seconds``.
REQUEST_DURATION_BUCKETS: Final = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0,
                                   5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)
APPLY_PATCH: Final = "application/apply-patch+yaml"
#: Non-resource paths labelled as themselves (anything else is ``other``).
NON_RESOURCE_PATHS: Final = frozenset({"/", "/api", "/apis", "/version", "/healthz", "/livez", "/readyz",
                                       "/metrics", "/openapi/v2"})
_SUBRESOURCES: Final = frozenset({"status", "scale", "finalize", "log", "binding", "eviction", "token", "proxy"})
_VERBS: Final = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
                 "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}

#: (verb, group, version, resource, subresource, scope, component)
RequestLabels = tuple[str, str, str, str, str, str, str]
KnownResource = Callable[[str, str, str], bool]


def reported_verb(method: str, attrs: RequestAttributes, content_type: str = "") -> str:
    """kube-apiserver's verb label for a request: LIST and WATCH for collections, APPLY for server-side apply."""
    if not attrs.resource_request:
        return "GET" if method.upper() == "HEAD" else method.upper()
    verb = _VERBS.get(attrs.verb, method.upper())
    if verb == "PATCH" and content_type.split(";")[0].strip().lower() == APPLY_PATCH:
        return "APPLY"
    return verb


def request_labels(method: str, attrs: RequestAttributes, content_type: str, known: KnownResource) -> RequestLabels:
    """The labels of one request (see the module docstring); ``known(group, version, resource)`` says whether the
    server serves that resource."""
    verb = reported_verb(method, attrs, content_type)
    if not attrs.resource_request:
        path = attrs.path.rstrip("/") or "/"
        if path not in NON_RESOURCE_PATHS and not path.startswith("/openapi/v3"):
            path = "other"
        elif path.startswith("/openapi/v3"):
            path = "/openapi/v3"
        return (verb, "", "", "", path, "", "apiserver")  # kube-apiserver puts the path in "subresource"
    if not known(attrs.api_group, attrs.api_version, attrs.resource):
        return (verb, "", "", "other", "", "", "apiserver")
    scope = "resource" if attrs.name else "namespace" if attrs.namespace else "cluster"
    subresource = attrs.subresource if attrs.subresource in _SUBRESOURCES else "other" if attrs.subresource else ""
    return (verb, attrs.api_group, attrs.api_version, attrs.resource, subresource, scope, "apiserver")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiServerMetrics:
    """The metrics of one API server (its own registry, so several servers in one process stay apart; with the
    ``process_*`` metrics of the process)."""

    def __init__(self, known: KnownResource, *, registry: MetricsRegistry | None = None,
                 store_path: str | os.PathLike[str] | None = None) -> None:
        self.registry = registry if registry is not None else MetricsRegistry()
        self._known = known
        r = self.registry
        labels = ("verb", "group", "version", "resource", "subresource", "scope", "component")
        self.requests = r.counter("apiserver_request_total", "Counter of apiserver requests broken out for each "
                                  "verb, API resource, client, and HTTP response code.", (*labels, "code"))
        self.duration = r.histogram("apiserver_request_duration_seconds", "Response latency distribution in "
                                    "seconds for each verb, group, version, resource, subresource, scope and "
                                    "component (watches left out).", labels, buckets=REQUEST_DURATION_BUCKETS)
        self.inflight = r.gauge("apiserver_current_inflight_requests", "Maximal number of currently used inflight "
                                "request limit of this apiserver per request kind in last second.",
                                ("request_kind",))
        self.longrunning = r.gauge("apiserver_longrunning_requests", "Gauge of all active long-running apiserver "
                                   "requests (watches).", ("verb",))
        self._read_only = self.inflight.labels("readOnly")
        self._mutating = self.inflight.labels("mutating")
        self._watches = self.longrunning.labels("WATCH")
        # the children of each label combination seen, looked up once (a library lookup costs more than the
        # recording); bounded as the labels are (request_labels folds unknown resources and paths into "other")
        self._request_children: dict[tuple[str, ...], Any] = {}
        self._duration_children: dict[RequestLabels, Any] = {}
        self._store_files: list[Path] = []
        if store_path is not None:
            db = Path(store_path)
            self._store_files = [db, db.with_name(db.name + "-wal")]
            self.storage_size = r.gauge("apiserver_storage_size_bytes", "Size of the storage database file "
                                        "physically allocated in bytes.", ("storage_cluster_id",))
            r.add_collector(self._collect_storage_size)
        r.add_process_metrics()

    def _collect_storage_size(self) -> None:
        size = 0
        for p in self._store_files:
            try:
                size += p.stat().st_size
            except OSError:
                pass
        self.storage_size.labels("sqlite").set(size)

    def render(self) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE})

    def middleware(self) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
        """Outermost aiohttp middleware: counts and times every request, rejected ones included."""

        @web.middleware
        async def _metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
            attrs = request_attributes(request.method, request.path, request.query)
            labels = request_labels(request.method, attrs, request.headers.get("Content-Type", ""), self._known)
            verb = labels[0]
            if verb == "WATCH":
                gauge = self._watches
            else:
                gauge = self._read_only if verb in ("GET", "LIST") else self._mutating
            gauge.inc()
            started = time.perf_counter()
            code = 500
            try:
                response = await handler(request)
                code = response.status
                return response
            except web.HTTPException as e:
                code = e.status
                raise
            finally:
                gauge.dec()
                key = (*labels, str(code))
                counter = self._request_children.get(key)
                if counter is None:
                    counter = self._request_children[key] = self.requests.labels(*key)
                counter.inc()
                if verb != "WATCH":
                    duration = self._duration_children.get(labels)
                    if duration is None:
                        duration = self._duration_children[labels] = self.duration.labels(*labels)
                    duration.observe(time.perf_counter() - started)

        return _metrics


def known_resource(types: Any) -> KnownResource:
    """``known`` for :class:`ApiServerMetrics` from a type registry (CRDs appear when they are established)."""

    def known(group: str, version: str, resource: str) -> bool:
        return types.lookup(group, version, resource) is not None

    return known

