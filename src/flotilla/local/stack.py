"""The whole of Flotilla on one machine, in one process: what ``flotilla up`` and ``flotilla demo`` run.

* the control plane API server (SQLite in ``D/controlplane``); the controllers call it through the in-process
  transport (same client interface and semantics, no sockets, no JSON round trip), everyone else over HTTP;
* ``members`` simulated member clusters (``flotilla.member``; SQLite each, so their workloads survive a restart),
  with the member-side savepoint rule on, sharing ``D/members/checkpoints``;
* each member joined (Push mode, like ``flotilla join``);
* the default ClusterTaintPolicy ``not-ready`` (``Ready`` False/Unknown -> ``cluster.karmada.io/not-ready:NoExecute``,
  removed on True), unless switched off; an existing policy of that name is left as the user made it;
* every controller of the controller-manager, with health timings suited to a laptop (:data:`LAPTOP_TIMINGS`);
* ``D/kubeconfig`` with the context ``flotilla`` (current) and one context per member.

Restarting on the same data directory resumes: the same databases, the same member ports when they are free
(the Clusters are re-joined with the new endpoints when they are not).
"""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from flotilla.local.layout import DataDirError, Layout, StackRecord

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_TAINT_POLICY", "LAPTOP_TIMINGS", "LocalStack", "PortInUseError", "StackConfig"]

#: Controller-manager timings for a laptop (seconds): a dead member is noticed within a few seconds rather
#: than Karmada's ~40 s; the graceful-eviction timeout is 2 minutes instead of 10.
LAPTOP_TIMINGS: Final[dict[str, float]] = {
    "cluster_status_update_frequency": 1.0,
    "cluster_success_threshold": 2.0,
    "cluster_failure_threshold": 3.0,
    "graceful_eviction_timeout": 120.0,
    "cluster_api_timeout": 10.0,  # the controller-manager's default: a frozen member is seen failing after it
    # Pull clusters: checked every second; the grace periods stay Karmada's, which an agent's default Lease
    # (40 s, renewed every 10 s) needs
    "cluster_monitor_period": 1.0,
    "cluster_monitor_grace_period": 40.0,
    "cluster_startup_grace_period": 60.0,
}

#: Flink simulator settings: checkpoints every 2 s, the member-side restore rule on.
MEMBER_SIM_OPTIONS: Final[dict[str, str]] = {
    "savepoint_rule": "true",
    "flink_checkpoint_interval": "2",
    "flink_progress_interval": "0.5",
}

NOT_READY_TAINT: Final = "cluster.karmada.io/not-ready"
DEFAULT_TAINT_POLICY_NAME: Final = "not-ready"


def default_taint_policy(members: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
        "metadata": {"name": DEFAULT_TAINT_POLICY_NAME,
                     "labels": {"app.kubernetes.io/managed-by": "flotilla-up"}},
        "spec": {
            "targetClusters": {"clusterNames": list(members)},
            "addOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}],
            "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
            "taints": [{"key": NOT_READY_TAINT, "effect": "NoExecute"}],
        },
    }


DEFAULT_TAINT_POLICY: Final = default_taint_policy(["member1", "member2", "member3"])


class PortInUseError(DataDirError):
    """The API server's port is taken."""


@dataclass
class StackConfig:
    data_dir: Path = field(default_factory=lambda: Path(".flotilla"))
    members: int = 3
    host: str = "127.0.0.1"
    port: int = 6443
    default_taint_policy: bool = True
    timings: dict[str, float] = field(default_factory=lambda: dict(LAPTOP_TIMINGS))
    ready_delay: float = 1.0
    sim_options: dict[str, str] = field(default_factory=lambda: dict(MEMBER_SIM_OPTIONS))
    feature_gates: str = ""
    metrics_address: tuple[str, int] | None = ("127.0.0.1", 8080)  # None: no metrics endpoint
    # how the controllers reach the control plane's API server: "inprocess" (its storage, directly) or "http"
    # (its URL, as a separate controller-manager would); members are always reached over HTTP
    controller_transport: str = "inprocess"
    # the garbage collector's settings for a long-running server (process-wide; tests embedding a stack may not)
    tune_gc: bool = True
    # TLS and tokens: the control plane (an admin and a read-only viewer token) and every member (its own CA and
    # admin token, which the join puts into the cluster's Secret)
    secure: bool = False

    def member_names(self) -> list[str]:
        return [f"member{i}" for i in range(1, self.members + 1)]


class LocalStack:
    """Start with :meth:`start`, stop with :meth:`stop` (or ``async with``)."""

    def __init__(self, config: StackConfig, *, say: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.layout = Layout(Path(config.data_dir))
        self.say = say or (lambda message: log.info("%s", message))
        self.api: Any = None
        self.group: Any = None
        self.client: Any = None  # over HTTP: joins, the default taint policy, `flotilla demo`'s operator
        self.controller_client: Any = None  # the controllers' (in-process unless configured otherwise)
        self.manager: Any = None
        self.metrics_server: Any = None
        self.record: StackRecord | None = None
        self.admin_token: str | None = None  # with ``secure``: the control plane's tokens
        self.viewer_token: str | None = None

    # ------------------------------------------------------------------ properties
    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    @property
    def url(self) -> str:
        return self.api.url if self.api is not None else ""

    @property
    def members_dir(self) -> Path:
        return self.layout.members

    def member(self, name: str) -> Any:
        return self.group.members[name]

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> LocalStack:
        cfg = self.config
        if cfg.members < 1:
            raise ValueError("--members must be at least 1")
        record = self.layout.load_record()
        if record is not None and record.api_port and record.secure != cfg.secure:
            was, now = ("with", "without") if record.secure else ("without", "with")
            raise DataDirError(f"{self.layout.root} was created {was} --secure and cannot be resumed {now} it: "
                               f"pass {'--secure' if record.secure else 'no --secure'}, or another --data-dir")
        record = record or StackRecord()
        record.secure = cfg.secure
        from flotilla.files import make_private_tree, private_dir

        private_dir(self.layout.root)
        make_private_tree(self.layout.root)  # a directory an older version made world-readable
        self.record = record
        try:
            await self._start_api()
            await self._start_members(record)
            await self._connect()
            await self._join_all()
            if cfg.default_taint_policy:
                await self._ensure_taint_policy()
            self._write_kubeconfig()
            await self._start_controllers()
            if self.config.tune_gc:
                from flotilla.apiserver.gctune import tune_gc

                tune_gc()  # a long-running server process from here on (see flotilla.apiserver.gctune)
            record.api_port = self.api.port
            record.member_ports = {name: m.port for name, m in self.group.members.items()}
            self.layout.save_record(record)
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        if self.metrics_server is not None:
            with contextlib.suppress(Exception):
                await self.metrics_server.stop()
            self.metrics_server = None
        if self.manager is not None:
            with contextlib.suppress(Exception):
                await self.manager.stop()
            self.manager = None
        if self.controller_client is not None:
            if self.controller_client is not self.client:
                with contextlib.suppress(Exception):
                    await self.controller_client.close()
            self.controller_client = None
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()
            self.client = None
        if self.group is not None:
            with contextlib.suppress(Exception):
                await self.group.stop()
            self.group = None
        if self.api is not None:
            with contextlib.suppress(Exception):
                await self.api.stop()
            self.api = None

    async def __aenter__(self) -> LocalStack:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ parts
    async def _start_api(self) -> None:
        from flotilla.apiserver.server import ApiServer, ApiServerConfig

        cfg = self.config
        if cfg.secure:
            from flotilla.local.secure import ensure_tokens

            self.admin_token, self.viewer_token = ensure_tokens(self.layout.controlplane)
        api = ApiServer(ApiServerConfig(storage_url="sqlite://", data_dir=self.layout.controlplane, host=cfg.host,
                                        port=cfg.port, context_name="flotilla", secure=cfg.secure))
        try:
            await api.start()
        except OSError as e:
            await api.stop()
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                raise PortInUseError(
                    f"cannot serve the control plane on {cfg.host}:{cfg.port}: {e.strerror}. Is another "
                    f"`flotilla up` running? Stop it with `flotilla down --data-dir ...`, or pass --port "
                    f"(0 picks a free port)") from None
            raise
        self.api = api
        self.say(f"control plane API server on {api.url} (SQLite in {self.layout.controlplane})")

    def _member_configs(self, ports: dict[str, int]) -> list[Any]:
        from flotilla.member.cluster import MemberConfig

        cfg = self.config
        return [MemberConfig(name=name, data_dir=self.layout.members, host=cfg.host, port=ports.get(name, 0),
                             storage_url="sqlite://", ready_delay=cfg.ready_delay,
                             options=dict(cfg.sim_options), secure=cfg.secure)
                for name in cfg.member_names()]

    async def _start_members(self, record: StackRecord) -> None:
        from flotilla.member.runner import MemberGroup

        history = self.layout.members / "history.jsonl"
        group = MemberGroup(self._member_configs(record.member_ports), history_file=history)
        try:
            await group.start()
        except OSError as e:
            if not record.member_ports:
                raise
            log.warning("the members' previous ports are not all free (%s); picking new ones", e)
            group = MemberGroup(self._member_configs({}), history_file=history)
            await group.start()
        self.group = group
        for name, m in group.members.items():
            self.say(f"member {name} on {m.url}")

    async def _connect(self) -> None:
        from flotilla.client import Client

        assert self.api is not None and self.api.kubeconfig_path is not None
        self.client = Client.from_kubeconfig(str(self.api.kubeconfig_path))

    async def _join_all(self) -> None:
        from flotilla.cli.cluster_commands import join_cluster, join_spec_from_credentials
        from flotilla.client.kubeconfig import load_kubeconfig

        for name, m in self.group.members.items():
            creds = load_kubeconfig(str(m.kubeconfig_path))
            result = await join_cluster(self.client, join_spec_from_credentials(name, creds))
            what = "joined" if result.created else "re-joined (new endpoint)" if result.updated else "already joined"
            self.say(f"cluster {name} {what}")

    async def _ensure_taint_policy(self) -> None:
        from flotilla.api import resources as R
        from flotilla.client import ApiException, is_already_exists

        try:
            await self.client.create(R.CLUSTER_TAINT_POLICIES, default_taint_policy(self.config.member_names()))
            self.say(f"ClusterTaintPolicy {DEFAULT_TAINT_POLICY_NAME}: Ready False/Unknown -> "
                     f"{NOT_READY_TAINT}:NoExecute")
        except ApiException as e:
            if not is_already_exists(e):
                raise

    def _write_kubeconfig(self) -> None:
        from flotilla.client.kubeconfig import KubeconfigEntry, load_kubeconfig, merge_contexts

        cp = load_kubeconfig(str(self.api.kubeconfig_path))
        entries = [KubeconfigEntry(context="flotilla", server=self.api.url, token=cp.token, ca_pem=cp.ca_pem)]
        for name, m in self.group.members.items():
            creds = load_kubeconfig(str(m.kubeconfig_path))
            entries.append(KubeconfigEntry(context=name, server=creds.server, token=creds.token,
                                           ca_pem=creds.ca_pem, insecure_skip_tls_verify=creds.insecure))
        merge_contexts(self.layout.kubeconfig, entries, current_context="flotilla", replace=True)
        if self.config.secure:
            from flotilla.client.kubeconfig import write_kubeconfig

            write_kubeconfig(self.layout.viewer_kubeconfig, server=self.api.url, context="flotilla-viewer",
                             token=self.viewer_token, ca_pem=cp.ca_pem)

    async def _start_controllers(self) -> None:
        from flotilla.client import Client
        from flotilla.controllers.manager import ControllerManager
        from flotilla.controllers.options import ControllerOptions
        from flotilla.observability.metrics import ControllerMetrics, MetricsServer

        options = ControllerOptions(**self.config.timings)
        if self.config.feature_gates:
            options.set_gates(self.config.feature_gates)
        metrics = ControllerMetrics()
        transport = self.config.controller_transport
        if transport == "inprocess":
            self.controller_client = Client.in_process(self.api.storage, bookmark_interval=30.0)
        elif transport == "http":
            self.controller_client = self.client
        else:
            raise ValueError(f"unknown controller transport {transport!r}: inprocess or http")
        self.manager = ControllerManager(self.controller_client, options, metrics=metrics)
        await self.manager.start()
        self.say(f"{len(self.manager.controllers)} controllers running")
        if self.config.metrics_address is not None:
            host, port = self.config.metrics_address
            server = MetricsServer(metrics.registry, host, port)
            try:
                self.metrics_server = await server.start()
                self.say(f"metrics on {server.url}/metrics")
            except OSError as e:
                self.say(f"cannot serve metrics on {host}:{port} ({e.strerror or e}); running without metrics "
                         "(--metrics-bind-address chooses another address, 0 none)")
