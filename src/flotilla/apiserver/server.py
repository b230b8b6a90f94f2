"""Assemble and run an API server: store + types + storage semantics + HTTP (+ TLS and auth)."""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from flotilla.apiserver.admission import Admission
from flotilla.apiserver.app import ApiHandler, ServerOptions, build_app
from flotilla.apiserver.builtin_kinds import BUILTIN_TYPES
from flotilla.apiserver.controllers.compactor import Compactor
from flotilla.apiserver.controllers.garbage_collector import GarbageCollector
from flotilla.apiserver.controllers.namespaces import NamespaceLifecycle
from flotilla.apiserver.crd import CRDManager
from flotilla.apiserver.fairness import FairnessLimits
from flotilla.apiserver.gctune import tune_gc
from flotilla.apiserver.metrics import ApiServerMetrics, known_resource
from flotilla.apiserver.rest import ResourceStorage
from flotilla.apiserver.type_registry import TypeRegistry
from flotilla.files import make_private, private_dir
from flotilla.storage import Store, open_store
from flotilla.storage.etcd import EtcdTLS

log = logging.getLogger(__name__)


@dataclass
class ApiServerConfig:
    storage_url: str = "sqlite://"
    #: TLS to etcd for an ``etcds://`` storage URL (--etcd-cafile, --etcd-certfile, --etcd-keyfile)
    etcd_tls: EtcdTLS | None = None
    data_dir: Path = field(default_factory=lambda: Path(".flotilla"))
    host: str = "127.0.0.1"
    port: int = 0  # 0 = pick a free port
    secure: bool = False
    anonymous: bool | None = None  # default: allowed on plain http only
    bookmark_interval: float = 30.0
    write_kubeconfig: bool = True
    context_name: str = "flotilla"
    compaction_interval: float = 300.0  # seconds; 0 disables compaction
    # extra aiohttp middlewares, outermost first (a simulated member's fault injection uses this)
    middlewares: list[Any] = field(default_factory=list)
    # Karmada's validating/mutating webhooks for Karmada's kinds (the control plane; members go without)
    karmada_admission: bool = True
    allow_no_execute_taint_policy: bool = True  # D1: failover on by default
    # the PropagationPolicy finalizer needs the policy controller to remove it; off until that runs
    policy_finalizers: bool = False
    # how heavy request bodies are decoded: threads, per-client concurrency and queues (None: the defaults)
    body_fairness: FairnessLimits | None = None
    # the live web dashboard under /dashboard/ (flotilla.dashboard; docs/dashboard.md): the control plane's
    dashboard: bool = True


class ApiServer:
    """One API server process's worth of parts; ``start`` serves, ``stop`` shuts down cleanly."""

    def __init__(self, config: ApiServerConfig, store: Store | None = None,
                 admission: Admission | None = None) -> None:
        self.config = config
        self.store = store
        self.types = TypeRegistry(BUILTIN_TYPES)
        self.admission = admission or Admission()
        self.storage: ResourceStorage | None = None
        self.runner: web.AppRunner | None = None
        self.handler: ApiHandler | None = None
        self.port = config.port
        self.url = ""
        self.kubeconfig_path: Path | None = None
        self.admin_token: str | None = None
        self.metrics: ApiServerMetrics | None = None  # served on GET /metrics (admins only when secure)
        self._crds: CRDManager | None = None
        self._gc: GarbageCollector | None = None
        self._compactor: Compactor | None = None
        self._rics: Any = None
        self._agent_tokens: Any = None
        self._namespaces: NamespaceLifecycle | None = None
        self._owns_store = store is None
        self.dashboard: Any = None  # a flotilla.dashboard.server.Dashboard with ``config.dashboard``
        self._authn: Any = None  # with --secure: the TokenAuthenticator and the Authorizer
        self._authz: Any = None

    async def start(self) -> ApiServer:
        cfg = self.config
        private_dir(cfg.data_dir)  # its store, kubeconfig, tokens and keys are the owner's only
        make_private(cfg.data_dir / "kubeconfig")
        if self.store is None:
            self.store = await open_store(cfg.storage_url, cfg.data_dir, etcd_tls=cfg.etcd_tls)
        storage = ResourceStorage(self.store, self.types, self.admission)
        self.storage = storage
        self._crds = CRDManager(storage)
        storage.strategies[("apiextensions.k8s.io", "CustomResourceDefinition")] = self._crds.strategy
        storage.after_write.append(self._crds.on_write)
        self._namespaces = NamespaceLifecycle(storage)
        storage.after_write.append(self._namespaces.on_write)
        from flotilla.apiserver.crd import validate_crd

        self.admission.register("apiextensions.k8s.io", "CustomResourceDefinition", _CRDValidation(validate_crd))
        if cfg.karmada_admission:
            from flotilla.apiserver.webhooks import RICIndex, register_karmada_admission

            self._rics = RICIndex()
            register_karmada_admission(
                self.admission,
                allow_no_execute_taint_policy=cfg.allow_no_execute_taint_policy,
                existing_rics=self._rics.items,
                policy_finalizers=cfg.policy_finalizers,
            )
        await self._crds.start()
        if self._rics is not None:
            await self._rics.attach(storage)
        await self._namespaces.start_cache()
        await self._namespaces.ensure_defaults()
        await self._namespaces.resume()
        self._gc = GarbageCollector(storage)
        await self._gc.start()
        self._compactor = Compactor(self.store, cfg.compaction_interval)
        self._compactor.start()
        if cfg.dashboard:
            await self._start_dashboard(storage)

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((cfg.host, cfg.port))
        self.port = sock.getsockname()[1]
        scheme = "https" if cfg.secure else "http"
        self.url = f"{scheme}://{cfg.host}:{self.port}"
        handler = ApiHandler(storage, ServerOptions(bookmark_interval=cfg.bookmark_interval,
                                                    address=f"{cfg.host}:{self.port}",
                                                    body_fairness=cfg.body_fairness))
        self.metrics = ApiServerMetrics(known_resource(self.types), store_path=getattr(self.store, "path", None))
        handler.metrics = self.metrics
        # outermost: every request is counted, also those another middleware (faults, auth) answers
        middlewares: list[Any] = [self.metrics.middleware(), *cfg.middlewares]
        ssl_ctx = None
        ca_pem: bytes | None = None
        if cfg.secure:
            from flotilla.apiserver.agent_tokens import AgentTokenIndex

            self._agent_tokens = AgentTokenIndex()  # Pull-mode agents' tokens, from their Secrets
            await self._agent_tokens.attach(storage)
            ssl_ctx, ca_pem, auth_middlewares = self._secure_setup()
            middlewares += auth_middlewares
        elif cfg.anonymous is False:
            raise ValueError("anonymous access can only be disabled on a secure server (TLS), not with --insecure")
        self.handler = handler
        app = build_app(handler, middlewares, dashboard=self.dashboard)
        # on shutdown, requests still in flight (a watch a client re-opened while we were closing) get a
        # few seconds, not aiohttp's default minute
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=3.0)
        await self.runner.setup()
        site = web.SockSite(self.runner, sock, ssl_context=ssl_ctx)
        await site.start()
        if cfg.write_kubeconfig:
            from flotilla.client.kubeconfig import write_kubeconfig

            self.kubeconfig_path = cfg.data_dir / "kubeconfig"
            write_kubeconfig(self.kubeconfig_path, server=self.url, context=cfg.context_name,
                             token=self.admin_token, ca_pem=ca_pem)
        log.info("API server listening on %s (storage %s)", self.url, cfg.storage_url)
        return self

    def _secure_setup(self) -> tuple[Any, bytes, list[Any]]:
        from flotilla.apiserver.auth import (
            Authorizer,
            TokenAuthenticator,
            auth_middleware,
            ensure_token_file,
            request_attributes_of,
        )
        from flotilla.apiserver.tls import ensure_serving_certs, server_ssl_context

        cfg = self.config
        paths = ensure_serving_certs(cfg.data_dir, [cfg.host, "localhost"])
        ssl_ctx = server_ssl_context(paths)
        token_path, self.admin_token = ensure_token_file(cfg.data_dir)
        make_private(token_path)
        authn = TokenAuthenticator.from_file(
            token_path, dynamic=self._agent_tokens.user_of if self._agent_tokens is not None else None)
        authz = Authorizer(anonymous=bool(cfg.anonymous))
        self._authn, self._authz = authn, authz
        mw = auth_middleware(authn, authz, anonymous=bool(cfg.anonymous), request_attrs=request_attributes_of,
                             dashboard=self.dashboard)
        return ssl_ctx, paths.ca_pem(), [mw]

    async def _start_dashboard(self, storage: ResourceStorage) -> None:
        from flotilla.apiserver.inprocess import in_process_client
        from flotilla.dashboard.server import Dashboard

        def authenticate_token(token: str) -> Any:
            return self._authn.authenticate_token(token) if self._authn is not None else None

        self.dashboard = Dashboard(in_process_client(storage, bookmark_interval=self.config.bookmark_interval),
                                   secure=self.config.secure, authenticate_token=authenticate_token,
                                   may_view=self._may_view_dashboard)
        await self.dashboard.start()

    def _may_view_dashboard(self, user: Any) -> bool:
        """Whether ``user`` may list what the dashboard shows: Clusters, bindings, Works and Events."""
        from flotilla.apiserver.auth import RequestAttributes

        if self._authz is None:
            return True
        for group, version, resource in (("cluster.karmada.io", "v1alpha1", "clusters"),
                                         ("work.karmada.io", "v1alpha2", "resourcebindings"),
                                         ("work.karmada.io", "v1alpha1", "works"), ("", "v1", "events")):
            attrs = RequestAttributes(verb="list", path="", resource_request=True, api_group=group,
                                      api_version=version, resource=resource)
            if not self._authz.authorize(user, "list", attrs)[0]:
                return False
        return True

    def dashboard_url(self, token: str | None = None) -> str | None:
        """The dashboard's URL with a one-time token that logs its opener in as the user of ``token`` (a bearer
        token this server accepts; without --secure any user). None without a dashboard, or when ``token`` is
        not valid on a secure server."""
        if self.dashboard is None:
            return None
        user = None
        if self.config.secure:
            user = self._authn.authenticate_token(token) if token and self._authn is not None else None
            if user is None:
                return None
        return f"{self.url}/dashboard/?token={self.dashboard.issue_login(user)}"

    async def stop(self) -> None:
        if self.dashboard is not None:
            await self.dashboard.stop()
            self.dashboard = None
        if self.runner is not None:
            if self.handler is not None:
                await self.handler.close()
            await self.runner.cleanup()
            self.runner = None
        for part in (self._compactor, self._gc, self._rics, self._agent_tokens, self._crds, self._namespaces):
            if part is not None:
                await part.stop()
        self._gc = self._agent_tokens = None
        if self.store is not None and self._owns_store:
            await self.store.close()

    async def __aenter__(self) -> ApiServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class _CRDValidation:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None, op: str) -> None:
        return None

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: str) -> list[Any]:
        return list(self.fn(obj, old if op == "UPDATE" else None))

    def warnings(self, obj: dict[str, Any], old: dict[str, Any] | None, op: str) -> list[str]:
        return []


async def serve_forever(config: ApiServerConfig) -> None:
    server = ApiServer(config)
    await server.start()
    # objects alive after start-up (types, schemas, caches) stay: keep them out of full collections,
    # which otherwise stall every in-flight request for tens of milliseconds; and collect less often
    tune_gc()
    print(f"flotilla apiserver: serving {server.url} (kubeconfig: {server.kubeconfig_path})", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
