"""The cluster status controller (karmada-core.md §8.1): probe each Push member, publish its Ready condition
(damped by the success/failure thresholds), Kubernetes version and served APIs.

Per Cluster, every ``--cluster-status-update-frequency`` (options; 10 s): build the member's client (a failure
is a failure observation, subject to the failure threshold, Karmada #7426), ``GET /readyz`` (``/healthz`` when
that is 404), let :class:`flotilla.cluster.health.ReadyThresholds` decide the Ready condition, and when the
member answered healthy and Ready is True also read ``/version`` and discovery for ``status.kubernetesVersion``,
``status.apiEnablements`` and the ``CompleteAPIEnablements`` condition, and list the member's Nodes and Pods
(its workloads too when it has no Pod at all, as Flotilla's simulated members) for ``status.nodeSummary`` and
``status.resourceSummary`` (:mod:`flotilla.cluster.resources`). The result is merge-patched on the
``/status`` subresource with a ``resourceVersion`` precondition (re-read and re-decided on 409), only when
something changed. A change of the published Ready status emits an Event.

The period is kept with the work queue's ``add_after`` (``reconcile`` returns it), not a task per cluster.
Triggers: a Cluster added, its generation (spec) or finalizers changed, or deleted - not status updates (its
own writes). It waits for the cluster controller's finalizer ``karmada.io/cluster-controller`` before it
starts, as Karmada does, and ignores Pull clusters and Push clusters without ``spec.secretRef``.

Small deliberate deviations: when ``/version`` cannot be read, the last known ``kubernetesVersion`` is kept
instead of being blanked; when discovery fails entirely right after a healthy probe (the member went away in
between), version and APIs are left as they were instead of being written empty; likewise the summaries when
the Nodes or Pods cannot be listed. The summaries come from paginated lists on every sync rather than from
member informers as in Karmada; ``resourceSummary.allocatableModelings`` (resource models) is not collected.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp

from flotilla.api.labels import CLUSTER_CONTROLLER_FINALIZER
from flotilla.client import ApiException, Client, ConnectionFailed, is_conflict, is_not_found
from flotilla.client.http import HttpTransport
from flotilla.client.resources import NODES, PODS, Resource
from flotilla.cluster.health import (
    HEALTH_PATHS,
    Collected,
    Health,
    Observation,
    ReadyThresholds,
    api_enablements,
    needs_healthz_fallback,
    observation_from_probe,
    observed_ready_condition,
    plan_status,
    ready_condition,
    ready_transition,
    should_collect,
)
from flotilla.cluster.resources import WORKLOAD_KINDS, Summaries, summarize
from flotilla.controllers.base import Controller, ControllerContext
from flotilla.controllers.members import CLUSTERS, MemberClientError

log = logging.getLogger(__name__)

__all__ = ["ClusterStatusController", "collect_summaries", "discover_api_enablements", "fetch_version",
           "probe_health"]

_CONFLICT_RETRIES = 5
_DETAIL_LIMIT = 300
_PAGE_SIZE = 500

_WORKLOAD_PLURALS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets",
                     "DaemonSet": "daemonsets", "Job": "jobs"}
_WORKLOADS = tuple(Resource(group, "v1", _WORKLOAD_PLURALS[kind], kind, True) for group, kind in WORKLOAD_KINDS)


# ============================================================================================ member I/O


async def _raw_get(client: Client, path: str) -> tuple[int, str]:
    """GET a non-API path (``/readyz`` answers text, not JSON): ``(HTTP status, body)``; ConnectionFailed when
    no answer came. A pooled connection found dead (the member restarted its listener) is retried once."""
    t = client.transport
    if not isinstance(t, HttpTransport):  # in-process transports serve the API only: ask /version
        try:
            await t.discovery("/version")
        except ConnectionFailed:
            raise
        except ApiException as e:
            return e.status, e.message
        return 200, "ok"
    extra: dict[str, Any] = {}
    if t.credentials.tls_server_name and t.credentials.is_https:
        extra["server_hostname"] = t.credentials.tls_server_name
    url = t.server + path
    for attempt in range(2):
        try:
            async with t.session().get(url, headers=t.headers(), **extra) as resp:
                body = await resp.read()
                return resp.status, body[:_DETAIL_LIMIT].decode("utf-8", errors="replace").strip()
        except aiohttp.ServerDisconnectedError as e:
            if attempt == 0:
                continue
            raise ConnectionFailed(f"{url}: {type(e).__name__}: {e}") from e
        except TimeoutError as e:
            raise ConnectionFailed(f"timed out talking to {url}", reason="Timeout") from e
        except (aiohttp.ClientError, OSError) as e:
            raise ConnectionFailed(f"{url}: {type(e).__name__}: {e}") from e
    raise AssertionError("unreachable")


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


async def discover_api_enablements(client: Client) -> tuple[list[dict[str, Any]], str | None]:
    """Every group-version the member serves with its resources (all versions, as ``ServerGroupsAndResources``),
    and an error text when part of discovery failed (the lists that were read are still returned)."""
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
    """``nodeSummary`` and ``resourceSummary`` of the member (Nodes, Pods; workloads only without any Pod),
    or None when listing failed (the status keeps the last known summaries)."""
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

    def setup(self) -> None:
        self.clusters = self.informer(CLUSTERS)
        self.clusters.add_handler(on_add=self.enqueue_object, on_update=self._on_update,
                                  on_delete=self.enqueue_object)

    def _on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        om, nm = old.get("metadata") or {}, new.get("metadata") or {}
        if (om.get("generation") != nm.get("generation") or _finalizers(old) != _finalizers(new)
                or bool(om.get("deletionTimestamp")) != bool(nm.get("deletionTimestamp"))):
            self.enqueue_object(new)

    async def reconcile(self, key: str) -> float | None:
        cluster = self.clusters.store.get(key)
        if cluster is None:
            self.thresholds.forget(key)
            await self.ctx.members.forget(key)
            return None
        spec = cluster.get("spec") or {}
        if spec.get("syncMode") != "Push" or not (spec.get("secretRef") or {}).get("name"):
            return None  # Pull clusters report through their agent; Push clusters without credentials are skipped
        if CLUSTER_CONTROLLER_FINALIZER not in _finalizers(cluster):
            log.debug("cluster %s: waiting for the %s finalizer", key, CLUSTER_CONTROLLER_FINALIZER)
            return None  # the update that adds the finalizer enqueues the cluster again
        await self.sync(cluster)
        return self.options.cluster_status_update_frequency

    async def sync(self, cluster: dict[str, Any]) -> None:
        name = cluster["metadata"]["name"]
        now = self.ctx.now()
        client: Client | None = None
        try:
            client = await self.ctx.members.client_for(cluster)
        except (MemberClientError, ApiException, ValueError, OSError) as e:
            obs = Observation.client_failure(str(e))
            log.warning("cluster %s: cannot build a client: %s", name, e)
        else:
            obs = await probe_health(client)
        observed = observed_ready_condition(obs)
        ready = self.thresholds.adjust(name, ready_condition(cluster), observed, now)
        if ready.get("status") != observed.get("status"):
            log.info("cluster %s: observed %s (%s) but keeping Ready=%s within the threshold", name,
                     observed["reason"], obs.detail or observed["message"], ready.get("status"))
        collected: Collected | None = None
        if client is not None and should_collect(obs, ready):
            version, (enablements, api_error), summaries = await asyncio.gather(
                fetch_version(client), discover_api_enablements(client), collect_summaries(client))
            if api_error:
                log.warning("cluster %s: discovery incomplete: %s", name, api_error)
            if enablements or not api_error:
                collected = Collected(version, enablements, api_error, summaries)
            # else: the member stopped answering between the probe and discovery; keep what the status says
            # rather than blanking the APIs (the next probe sees the failure)
        await self._write(cluster, obs, observed, ready, collected, now)

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
