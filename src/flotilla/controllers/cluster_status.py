"""The cluster status controller: probe each Push member, publish its Ready condition
(damped by the success/failure thresholds), Kubernetes version, served APIs and node/resource summaries.

Per Cluster, every ``--cluster-status-update-frequency`` (options; 10 s): build the member's client (a failure
is a failure observation, subject to the failure threshold, Karmada #7426), ``GET /readyz`` (``/healthz`` when
that is 404), let :class:`flotilla.cluster.health.ReadyThresholds` decide the Ready condition, and when the
member answered healthy and Ready is True also publish

* ``status.kubernetesVersion`` (``/version``), ``status.apiEnablements`` and the ``CompleteAPIEnablements``
  condition (discovery), read at every sync as Karmada does when syncs are at least
  :data:`~flotilla.cluster.health.DISCOVERY_INTERVAL` (10 s, Karmada's default period) apart; with more
  frequent probes (``flotilla up``'s 1 s) at the first sync, after the cluster was not Ready, and then every
  10 s (:func:`~flotilla.cluster.health.discovery_due`). Discovery asks for the aggregated document
  (apidiscovery.k8s.io/v2, two requests: ``/api`` and ``/apis``) with the ETag of the last answer, so an
  unchanged member answers 304; a server without aggregated discovery is read group by group.
* ``status.nodeSummary`` and ``status.resourceSummary`` (:mod:`flotilla.cluster.resources`) at every sync,
  from watch-fed caches of the member's Nodes and Pods (and of its workloads while it has no Pod at all, as
  Flotilla's simulated members), as Karmada's informers on Nodes and Pods with a transform: the caches hold
  projections (:func:`~flotilla.cluster.resources.project_pod` ...), and each event that changed one adjusts
  running totals by that object's share (:class:`~flotilla.cluster.summary_totals.SummaryTotals`), so a sync costs
  what changed since the last one, not a walk over every object; the summaries are formatted again only after
  such a change. An idle member costs no request at all for its summaries.

The member's client comes from ``MemberClients`` (built from the cluster's endpoint and credentials Secret); the
Secrets of ``karmada-cluster`` (and of any other namespace a cluster names) are watched, and the client of the
last sync is kept while the endpoint and the Secret's resourceVersion are unchanged, as Karmada reads the Secret
from an informer's cache rather than from the API server at every sync. A probe that fails with a kept client
asks for the current client and probes again if that is another one.

The result is merge-patched on the ``/status`` subresource with a ``resourceVersion`` precondition (re-read and
re-decided on 409), only when something changed. A change of the published Ready status emits an Event. The
member watches are stopped when the cluster is deleted, stops being a Push cluster with credentials, or is
published not Ready while its probes fail (they start again, with a fresh list, when it is collected again).

The period is kept with the work queue's ``add_after`` (``reconcile`` returns it), not a task per cluster.
Triggers: a Cluster added, its generation (spec) or finalizers changed, or deleted - not status updates (its
own writes). It waits for the cluster controller's finalizer ``karmada.io/cluster-controller`` before it
starts, as Karmada does, and ignores Pull clusters and Push clusters without ``spec.secretRef``. In
``flotilla agent`` (``ControllerOptions.agent_cluster``) it handles exactly the agent's Pull cluster (watched by a
field selector), through the agent's own member client; no Secret is watched there.

Small deliberate deviations: when ``/version`` cannot be read, the last known ``kubernetesVersion`` is kept
instead of being blanked; when discovery fails entirely right after a healthy probe (the member went away in
between), version, APIs and summaries are left as they were instead of being written empty; likewise the
summaries while the member's caches are not synced. ``resourceSummary.allocatableModelings`` (resource models) is
not collected.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp
import orjson

from flotilla.api.labels import CLUSTER_CONTROLLER_FINALIZER
from flotilla.client import ApiException, Client, ConnectionFailed, Informer, is_conflict, is_not_found
from flotilla.client.http import HttpTransport
from flotilla.cluster.health import (
    HEALTH_PATHS,
    Collected,
    Health,
    Observation,
    ReadyThresholds,
    aggregated_resource_lists,
    api_enablements,
    discovery_due,
    is_ready,
    needs_healthz_fallback,
    observation_from_probe,
    observed_ready_condition,
    plan_status,
    ready_condition,
    ready_transition,
    should_collect,
)
from flotilla.cluster.resources import (
    WORKLOAD_KINDS,
    Summaries,
    project_node,
    project_pod,
    project_workload,
    same_projection,
    summarize,
)
from flotilla.cluster.summary_totals import SummaryTotals
from flotilla.failover.brake import PROBE_BOARD, ProbeBoard
from flotilla.kube.resources import NODES, PODS, Resource, object_key
from flotilla.runtime.base import Controller, ControllerContext
from flotilla.runtime.members import CLUSTER_SECRET_NAMESPACE, CLUSTERS, SECRETS, MemberClientError

log = logging.getLogger(__name__)

__all__ = ["ClusterStatusController", "DiscoveryCache", "MemberSummaries", "collect_summaries",
           "discover_api_enablements", "fetch_version", "probe_health"]

_CONFLICT_RETRIES = 5
_DETAIL_LIMIT = 300
_PAGE_SIZE = 500
#: How long a sync waits for a member's caches to fill (the first list); then the last summaries are kept
SUMMARY_SYNC_TIMEOUT = 5.0
#: Accept header of a discovery request that prefers the aggregated document (client-go's, since Kubernetes 1.26)
AGGREGATED_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

_WORKLOAD_PLURALS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets",
                     "DaemonSet": "daemonsets", "Job": "jobs"}
_WORKLOADS = tuple(Resource(group, "v1", _WORKLOAD_PLURALS[kind], kind, True) for group, kind in WORKLOAD_KINDS)


# ============================================================================================ member I/O


async def _http_get(client: Client, path: str,
                    headers: Mapping[str, str] | None = None) -> tuple[int, Mapping[str, str], bytes]:
    """GET ``path`` of an HTTP client's server: ``(HTTP status, response headers, body)``; ConnectionFailed when no
    answer came. A pooled connection found dead (the member restarted its listener) is retried once."""
    t = client.transport
    assert isinstance(t, HttpTransport)
    extra: dict[str, Any] = {}
    if t.credentials.tls_server_name and t.credentials.is_https:
        extra["server_hostname"] = t.credentials.tls_server_name
    url = t.server + path
    cred = await t.ensure_credentials()  # an exec plugin's credential (ConnectionFailed when the plugin fails)
    reauthenticated = retried = False
    for _ in range(3):
        try:
            async with t.session().get(url, headers={**t.headers(), **(headers or {})}, **extra) as resp:
                if resp.status == 401 and not reauthenticated and t.refused(cred):
                    reauthenticated = True  # the plugin's credential was refused: ask it again, once
                    cred = await t.ensure_credentials()
                    continue
                return resp.status, resp.headers, await resp.read()
        except aiohttp.ServerDisconnectedError as e:
            if not retried:
                retried = True
                continue
            raise ConnectionFailed(f"{url}: {type(e).__name__}: {e}") from e
        except TimeoutError as e:
            raise ConnectionFailed(f"timed out talking to {url}", reason="Timeout") from e
        except (aiohttp.ClientError, OSError) as e:
            raise ConnectionFailed(f"{url}: {type(e).__name__}: {e}") from e
    raise ConnectionFailed(f"{url}: the connection kept failing")


async def _raw_get(client: Client, path: str) -> tuple[int, str]:
    """GET a non-API path (``/readyz`` answers text, not JSON): ``(HTTP status, body)``; ConnectionFailed when no
    answer came."""
    t = client.transport
    if not isinstance(t, HttpTransport):  # in-process transports serve the API only: ask /version
        try:
            await t.discovery("/version")
        except ConnectionFailed:
            raise
        except ApiException as e:
            return e.status, e.message
        return 200, "ok"
    status, _, body = await _http_get(client, path)
    return status, body[:_DETAIL_LIMIT].decode("utf-8", errors="replace").strip()


async def probe_health(client: Client) -> Observation:
    """``GET /readyz`` (``/healthz`` when that is not served) and what the answer means."""
    readyz, healthz = HEALTH_PATHS
    try:
        status, body = await _raw_get(client, readyz)
        if needs_healthz_fallback(status):
            status, body = await _raw_get(client, healthz)
    except ConnectionFailed as e:
        return Observation.offline(e.message)
    return observation_from_probe(status, f"HTTP {status}: {body}" if status != 200 else "")


async def fetch_version(client: Client) -> str | None:
    """``gitVersion`` of the member's ``/version``, or None when it cannot be read."""
    try:
        doc = await client.transport.discovery("/version")
    except ApiException as e:
        log.debug("reading /version of %s failed: %s", client.server, e)
        return None
    version = doc.get("gitVersion")
    return str(version) if version else None


@dataclass
class DiscoveryCache:
    """One member's last aggregated discovery documents (``/api``, ``/apis``) with their ETags: asked again with
    ``If-None-Match``, an unchanged server answers 304 and the documents are not sent, decoded or parsed again."""

    etags: dict[str, str] = field(default_factory=dict)
    lists: dict[str, tuple[list[tuple[str, list[dict[str, Any]]]], list[str]]] = field(default_factory=dict)


async def _aggregated(client: Client, path: str,
                      cache: DiscoveryCache | None) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[str]] | None:
    """The resource lists (and failed group-versions) of ``path`` from its aggregated discovery document; None when
    the server answered with a legacy document (it has no aggregated discovery)."""
    headers = {"Accept": AGGREGATED_ACCEPT}
    etag = cache.etags.get(path) if cache is not None else None
    if etag and cache is not None and path in cache.lists:
        headers["If-None-Match"] = etag
    status, resp_headers, body = await _http_get(client, path, headers)
    if status == 304 and cache is not None and path in cache.lists:
        return cache.lists[path]
    if status != 200:
        raise ApiException(status, message=body[:_DETAIL_LIMIT].decode("utf-8", errors="replace").strip())
    if "g=apidiscovery.k8s.io" not in resp_headers.get("Content-Type", "").replace(" ", ""):
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ApiException(500, "InternalError", f"{path}: the server sent invalid JSON") from None
    if not isinstance(doc, dict) or doc.get("kind") != "APIGroupDiscoveryList":
        return None
    found = aggregated_resource_lists(doc)
    if cache is not None:
        cache.lists[path] = found
        new_etag = resp_headers.get("ETag")
        if new_etag:
            cache.etags[path] = new_etag
        else:
            cache.etags.pop(path, None)
    return found


async def discover_api_enablements(client: Client,
                                   cache: DiscoveryCache | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Every group-version the member serves with its resources (all versions, as ``ServerGroupsAndResources``),
    and an error text when part of discovery failed (the lists that were read are still returned).

    Over HTTP the aggregated documents are asked for first (two requests, 304 with ``cache`` when unchanged);
    a server that answers with legacy documents is read group-version by group-version."""
    if isinstance(client.transport, HttpTransport):
        try:
            core = await _aggregated(client, "/api", cache)
            groups = await _aggregated(client, "/apis", cache) if core is not None else None
        except ConnectionFailed:
            raise
        except ApiException as e:
            return [], f"aggregated discovery: {e}"
        if core is not None and groups is not None:
            errors = core[1] + groups[1]
            return api_enablements([*core[0], *groups[0]]), "; ".join(errors) or None
    return await _legacy_api_enablements(client)


async def _legacy_api_enablements(client: Client) -> tuple[list[dict[str, Any]], str | None]:
    """Discovery group-version by group-version (``/api``, ``/apis``, then each ``/apis/<group>/<version>``)."""
    t = client.transport
    errors: list[str] = []
    paths: list[tuple[str, str]] = []
    try:
        core = await t.discovery("/api")
        paths += [(str(v), f"/api/{v}") for v in core.get("versions") or []]
    except ApiException as e:
        if not is_not_found(e):
            errors.append(f"/api: {e}")
    try:
        groups = await t.discovery("/apis")
        for g in groups.get("groups") or []:
            for v in g.get("versions") or []:
                gv = v.get("groupVersion") or (f"{g.get('name')}/{v.get('version')}" if v.get("version") else "")
                if gv:
                    paths.append((str(gv), f"/apis/{gv}"))
    except ApiException as e:
        errors.append(f"/apis: {e}")

    async def one(gv: str, path: str) -> tuple[str, list[dict[str, Any]]] | None:
        try:
            doc = await t.discovery(path)
        except ApiException as e:
            errors.append(f"{gv}: {e}")
            return None
        return gv, [r for r in doc.get("resources") or [] if isinstance(r, dict)]

    found = await asyncio.gather(*(one(gv, p) for gv, p in paths))
    return api_enablements(f for f in found if f is not None), "; ".join(errors) or None


async def _list_all(client: Client, res: Resource) -> list[dict[str, Any]]:
    """Every object of ``res`` in the member (all namespaces), page by page; [] when the kind is not served."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        try:
            page = await client.list(res, None, limit=_PAGE_SIZE, continue_=token)
        except ApiException as e:
            if is_not_found(e) and not token:
                return []
            raise
        items.extend(i for i in page.get("items") or [] if isinstance(i, dict))
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def collect_summaries(client: Client) -> Summaries | None:
    """``nodeSummary`` and ``resourceSummary`` of the member from lists of its Nodes and Pods (its workloads only
    without any Pod), or None when listing failed. One-off: the controller keeps :class:`MemberSummaries`."""
    try:
        nodes, pods = await asyncio.gather(_list_all(client, NODES), _list_all(client, PODS))
        workloads: list[tuple[str, str, dict[str, Any]]] = []
        if not pods:
            lists = await asyncio.gather(*(_list_all(client, res) for res in _WORKLOADS))
            workloads = [(res.group, res.kind, obj) for res, objs in zip(_WORKLOADS, lists, strict=True)
                         for obj in objs]
    except ApiException as e:
        log.warning("listing the nodes and pods of %s failed: %s", client.server, e)
        return None
    return summarize(nodes, pods, workloads)


class _WatchEvents:
    """A member's watch stream with every object projected (what a transform does in a client-go informer)."""

    def __init__(self, stream: Any, project: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self._stream = stream
        self._project = project

    def __aiter__(self) -> _WatchEvents:
        return self

    async def __anext__(self) -> Any:
        ev = await self._stream.__anext__()
        if ev.type in ("ADDED", "MODIFIED", "DELETED") and isinstance(ev.object, dict):
            return ev._replace(object=self._project(ev.object))
        return ev

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Projecting:
    """The list and watch calls an :class:`Informer` makes, through ``client``, with every object projected, so
    that the informer's cache holds projections (the member's full objects are never kept)."""

    def __init__(self, client: Client, project: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.client = client
        self.project = project

    @property
    def server(self) -> str:
        return self.client.server

    async def list(self, res: Resource, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        page = await self.client.list(res, namespace, **kw)
        page["items"] = [self.project(obj) for obj in page.get("items") or [] if isinstance(obj, dict)]
        return page

    def watch(self, res: Resource, namespace: str | None = None, **kw: Any) -> _WatchEvents:
        return _WatchEvents(self.client.watch(res, namespace, **kw), self.project)


def _served(enablements: list[dict[str, Any]] | None, res: Resource) -> bool:
    """Does the member serve ``res`` (by its last discovered APIs; unknown: assume it does)?"""
    if not enablements:
        return True
    return any(e.get("groupVersion") == res.api_version and any(r.get("name") == res.plural for r in e.get("resources") or [])
               for e in enablements)


class MemberSummaries:
    """The node and resource summaries of one member from watch-fed caches: informers on its Nodes and Pods, and
    on its workloads while it has no Pod at all, each holding projections. Every event that changes a projection
    updates running totals (:class:`~flotilla.cluster.summary_totals.SummaryTotals`: the object's old share is
    taken away, its new one added), so a sync after a change formats the totals instead of walking every object;
    an idle member's summaries are not even formatted again."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.totals = SummaryTotals()
        self.nodes = self._informer(NODES, project_node, self.totals.put_node, self.totals.remove_node)
        self.pods = self._informer(PODS, project_pod, self.totals.put_pod, self.totals.remove_pod)
        self.workloads: dict[Resource, Informer] = {}
        self.dirty = True
        self.last: Summaries | None = None
        self.computed = 0  # how many times the summaries were computed (tests, metrics)
        self._waited: set[Informer] = set()  # informers a sync already waited for

    def _informer(self, res: Resource, project: Callable[[dict[str, Any]], dict[str, Any]],
                  put: Callable[[str, dict[str, Any]], bool], remove: Callable[[str], bool]) -> Informer:
        """An informer of projections of ``res`` whose events feed the totals through ``put`` and ``remove``
        (by the object's key; a delete event carries the object's last state, the totals its share)."""
        def on_put(obj: dict[str, Any]) -> None:
            if put(object_key(obj), obj):
                self.dirty = True

        def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
            if not same_projection(old, new):
                on_put(new)

        def on_delete(obj: dict[str, Any]) -> None:
            if remove(object_key(obj)):
                self.dirty = True

        inf = Informer(_Projecting(self.client, project), res, backoff=(0.5, 30.0))  # type: ignore[arg-type]
        inf.add_handler(on_add=on_put, on_update=on_update, on_delete=on_delete)
        return inf

    def _workload_informer(self, res: Resource) -> Informer:
        group, kind = res.group, res.kind
        return self._informer(res, project_workload,
                              lambda key, obj: self.totals.put_workload(group, kind, key, obj),
                              lambda key: self.totals.remove_workload(group, kind, key))

    def start(self) -> None:
        self.nodes.start()
        self.pods.start()

    async def stop(self) -> None:
        infs = [self.nodes, self.pods, *self.workloads.values()]
        self.workloads = {}
        await asyncio.gather(*(inf.stop() for inf in infs), return_exceptions=True)
        self.totals.clear_workloads()

    async def _stop_workloads(self) -> None:
        infs, self.workloads = list(self.workloads.values()), {}
        self._waited.difference_update(infs)
        await asyncio.gather(*(inf.stop() for inf in infs), return_exceptions=True)
        self.totals.clear_workloads()  # after the stops: no event of theirs comes later
        self.dirty = True

    async def summaries(self, enablements: list[dict[str, Any]] | None = None,
                        timeout: float = SUMMARY_SYNC_TIMEOUT) -> Summaries | None:  # noqa: ASYNC109
        """The current summaries; None while the caches are not synced (then the status keeps the last ones)."""
        if not await self._synced([self.nodes, self.pods], timeout):
            return None
        if len(self.pods.store) == 0:
            if not self.workloads:
                for res in _WORKLOADS:
                    if _served(enablements, res):
                        inf = self.workloads[res] = self._workload_informer(res)
                        inf.start()
                self.dirty = True
            if not await self._synced(list(self.workloads.values()), timeout):
                return None
        elif self.workloads:
            await self._stop_workloads()  # a cluster with Pods is measured by its Pods only
        if self.dirty or self.last is None:
            self.dirty = False
            self.last = self.totals.summaries()
            self.computed += 1
        return self.last

    async def _synced(self, informers: list[Informer], timeout: float) -> bool:  # noqa: ASYNC109
        """Are the informers synced? Waits up to ``timeout`` for an informer the first time only: one that cannot
        list (the member is slow, or refuses) keeps trying in the background without holding up later syncs."""
        if all(inf.has_synced for inf in informers):
            return True
        fresh = [inf for inf in informers if not inf.has_synced and inf not in self._waited]
        self._waited.update(fresh)
        if fresh:
            await asyncio.gather(*(inf.wait_synced(timeout) for inf in fresh))
        return all(inf.has_synced for inf in informers)


@dataclass
class _Discovered:
    """What the last discovery of a member read, and when."""

    at: datetime
    version: str | None
    enablements: list[dict[str, Any]]
    error: str | None


# ============================================================================================ controller


def _finalizers(obj: dict[str, Any]) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


class ClusterStatusController(Controller):
    name = "cluster-status"
    workers = 5  # Karmada's --concurrent-cluster-syncs

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.thresholds = ReadyThresholds(self.options.cluster_success_threshold,
                                          self.options.cluster_failure_threshold)
        self.clusters: Any = None
        self.summaries: dict[str, MemberSummaries] = {}  # watch-fed summaries of each collected member
        self._discovered: dict[str, _Discovered] = {}
        self._discovery_caches: dict[str, DiscoveryCache] = {}
        self._clients: dict[str, tuple[tuple[Any, ...], Client]] = {}  # the client of the last sync and its key
        self._secrets: dict[str, Any] = {}  # namespace -> informer of the Secrets there
        # every probe and its answer, for the taint manager's eviction brake (D10) (flotilla.failover.brake)
        self.board: ProbeBoard = ctx.extras.setdefault(
            PROBE_BOARD, ProbeBoard(self.options.cluster_status_update_frequency))

    def setup(self) -> None:
        self.clusters = self.clusters_informer()
        if self.agent_cluster is None:  # the agent's member client is its own: no Secret is read
            self._secrets[CLUSTER_SECRET_NAMESPACE] = self.informer(SECRETS, CLUSTER_SECRET_NAMESPACE)
        self.clusters.add_handler(on_add=self.enqueue_object, on_update=self._on_update,
                                  on_delete=self.enqueue_object)

    async def stop(self) -> None:
        await super().stop()
        watches, self.summaries = list(self.summaries.values()), {}
        await asyncio.gather(*(w.stop() for w in watches), return_exceptions=True)

    def _on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        om, nm = old.get("metadata") or {}, new.get("metadata") or {}
        if (om.get("generation") != nm.get("generation") or _finalizers(old) != _finalizers(new)
                or bool(om.get("deletionTimestamp")) != bool(nm.get("deletionTimestamp"))):
            self.enqueue_object(new)

    async def _forget_member(self, name: str) -> None:
        """Stop the member's watches and forget what was discovered of it."""
        watch = self.summaries.pop(name, None)
        if watch is not None:
            await watch.stop()
        self._discovered.pop(name, None)
        self._discovery_caches.pop(name, None)
        self._clients.pop(name, None)

    async def reconcile(self, key: str) -> float | None:
        cluster = self.clusters.store.get(key)
        if cluster is None:
            self.thresholds.forget(key)
            self.board.forget(key)
            await self._forget_member(key)
            await self.ctx.members.forget(key)
            return None
        spec = cluster.get("spec") or {}
        if not self.serves(cluster) or (self.agent_cluster is None
                                        and (spec.get("syncMode") != "Push"
                                             or not (spec.get("secretRef") or {}).get("name"))):
            await self._forget_member(key)
            self.board.forget(key)
            return None  # Pull clusters report through their agent; Push clusters without credentials are skipped
        if CLUSTER_CONTROLLER_FINALIZER not in _finalizers(cluster):
            log.debug("cluster %s: waiting for the %s finalizer", key, CLUSTER_CONTROLLER_FINALIZER)
            return None  # the update that adds the finalizer enqueues the cluster again
        await self.sync(cluster)
        return self.options.cluster_status_update_frequency

    async def _summary_watch(self, name: str, client: Client) -> MemberSummaries:
        """The member's watch-fed summaries, (re)started when missing or when its client was replaced."""
        watch = self.summaries.get(name)
        if watch is not None and watch.client is client:
            return watch
        if watch is not None:
            await watch.stop()
            self._discovery_caches.pop(name, None)
        watch = self.summaries[name] = MemberSummaries(client)
        watch.start()
        return watch

    async def _collect(self, name: str, client: Client, was_ready: bool, now: datetime) -> Collected | None:
        """Version and APIs when due (:func:`discovery_due`, else the last ones), summaries from the watches."""
        last = self._discovered.get(name)
        watch = await self._summary_watch(name, client)
        discovered = last is None or discovery_due(last.at, now, self.options.cluster_status_update_frequency,
                                                   was_ready)
        if discovered:
            cache = self._discovery_caches.setdefault(name, DiscoveryCache())
            version, (enablements, api_error) = await asyncio.gather(
                fetch_version(client), discover_api_enablements(client, cache))
            if api_error:
                log.warning("cluster %s: discovery incomplete: %s", name, api_error)
            if not enablements and api_error:
                # the member stopped answering between the probe and discovery; keep what the status says rather
                # than blanking the APIs (the next probe sees the failure)
                return None
            if version is None and last is not None:
                version = last.version
            last = self._discovered[name] = _Discovered(now, version, enablements, api_error)
        assert last is not None
        summaries = await watch.summaries(last.enablements)
        return Collected(last.version, last.enablements, last.error, summaries, discovered=discovered)

    async def sync(self, cluster: dict[str, Any]) -> None:
        name = cluster["metadata"]["name"]
        client: Client | None = None
        self.board.started(name, time.monotonic())
        try:
            client, reused = await self._member_client(cluster)
            obs = await probe_health(client)
            if reused and obs.health is not Health.HEALTHY:
                # a client kept from an earlier sync: its credentials may have changed (or another controller had
                # it replaced); probe again with the client the cluster's Secret makes now, if it is another one
                fresh, _ = await self._member_client(cluster, refresh=True)
                if fresh is not client:
                    client = fresh
                    obs = await probe_health(client)
        except (MemberClientError, ApiException, ValueError, OSError) as e:
            client = None
            obs = Observation.client_failure(str(e))
            log.warning("cluster %s: cannot build a client: %s", name, e)
        except BaseException:
            self.board.answered(name, False, time.monotonic())  # no answer: failing until a healthy one
            raise
        # the time of the observation, after the probe (Karmada's time.Now() in thresholdAdjustedReadyCondition):
        # a probe that hung until a frozen member resumed must not count its hang towards the threshold
        now = self.ctx.now()
        observed = observed_ready_condition(obs)
        self.board.answered(name, observed.get("status") == "True", time.monotonic())
        ready = self.thresholds.adjust(name, ready_condition(cluster), observed, now)
        if ready.get("status") != observed.get("status"):
            log.info("cluster %s: observed %s (%s) but keeping Ready=%s within the threshold", name,
                     observed["reason"], obs.detail or observed["message"], ready.get("status"))
        collected: Collected | None = None
        if client is not None and should_collect(obs, ready):
            collected = await self._collect(name, client, is_ready(cluster), now)
        elif not obs.online and ready.get("status") != "True":
            await self._forget_member(name)  # published not Ready and unreachable: no watches until it is back
        try:
            await self._write(cluster, obs, observed, ready, collected, now)
        except Exception:
            self._discovered.pop(name, None)  # what was read is not in the status: read (and compare) it again
            raise

    async def _member_client(self, cluster: dict[str, Any], refresh: bool = False) -> tuple[Client, bool]:
        """The member's client and whether it was kept from an earlier sync.

        ``MemberClients.client_for`` reads the cluster's credentials Secret from the API server each time; Karmada
        reads it from an informer's cache. Here the Secret is watched too, and the client of the last sync is kept
        while the cluster's endpoint, its Secret reference and the Secret's resourceVersion (as cached) stay the
        same; while the cache is not synced or has no such Secret, ``client_for`` decides (and fails when the Secret
        is gone, as before). ``refresh`` asks ``client_for`` in any case (a probe failed with a kept client)."""
        name = cluster["metadata"]["name"]
        if self.agent_cluster is not None:  # the agent's own member client, the same for its whole life
            client = await self.ctx.members.client_for(cluster)
            cached = self._clients.get(name)
            self._clients[name] = ((), client)
            return client, not refresh and cached is not None and cached[1] is client
        spec = cluster.get("spec") or {}
        ref = spec.get("secretRef") or {}
        secret_version = self._secret_version(str(ref.get("namespace") or CLUSTER_SECRET_NAMESPACE),
                                              str(ref.get("name") or ""))
        key = (spec.get("apiEndpoint"), spec.get("insecureSkipTLSVerification"), ref.get("namespace"), ref.get("name"),
               secret_version)
        cached = self._clients.get(name)
        if not refresh and secret_version is not None and cached is not None and cached[0] == key:
            return cached[1], True
        try:
            client = await self.ctx.members.client_for(cluster)
        except Exception:
            self._clients.pop(name, None)
            raise
        self._clients[name] = (key, client)
        return client, False

    def _secret_version(self, namespace: str, name: str) -> str | None:
        """The resourceVersion of a Secret as the watch last saw it; None when unknown (not synced, absent)."""
        inf = self._secrets.get(namespace)
        if inf is None:
            inf = self._secrets[namespace] = self.informer(SECRETS, namespace)
        if not name or not inf.has_synced:
            return None
        secret = inf.store.get(f"{namespace}/{name}")
        version = ((secret or {}).get("metadata") or {}).get("resourceVersion")
        return str(version) if version else None

    async def _write(self, cluster: dict[str, Any], obs: Observation, observed: dict[str, Any],
                     ready: dict[str, Any], collected: Collected | None, now: Any) -> None:
        name = cluster["metadata"]["name"]
        for _ in range(_CONFLICT_RETRIES):
            before = ready_condition(cluster)
            status_patch = plan_status(cluster.get("status"), ready, collected, now)
            if status_patch is None:
                return
            patch = {"metadata": {"resourceVersion": cluster["metadata"].get("resourceVersion")},
                     "status": status_patch}
            try:
                updated = await self.client.patch(CLUSTERS, name, patch, subresource="status")
            except ApiException as e:
                if is_not_found(e):
                    return
                if not is_conflict(e):
                    raise
                cluster = await self.client.get(CLUSTERS, name)
                ready = self.thresholds.adjust(name, ready_condition(cluster), observed, now)
                continue
            self._announce(updated, before, ready, obs)
            return
        raise ApiException(409, "Conflict", f"cluster {name}: status kept changing; will retry")

    def _announce(self, cluster: dict[str, Any], before: dict[str, Any] | None, ready: dict[str, Any],
                  obs: Observation) -> None:
        change = ready_transition(before, ready)
        if change is None:
            return
        event_type, reason, message = change
        name = cluster["metadata"]["name"]
        if obs.detail and obs.health is not Health.CLIENT_FAILURE and ready.get("status") != "True":
            message = f"{message} ({obs.detail[:_DETAIL_LIMIT]})"
        (log.info if event_type == "Normal" else log.warning)("cluster %s: %s", name, message)
        self.ctx.recorder.event(cluster, event_type, reason, message)
