"""The whole of Flotilla on one machine, in one process: what ``flotilla up`` and ``flotilla demo`` run.

* the control plane API server (SQLite in ``D/controlplane``); the controllers call it through the in-process
  transport (same client interface and semantics, no sockets, no JSON round trip), everyone else over HTTP;
* ``members`` simulated member clusters (``flotilla.member``; SQLite each, so their workloads survive a restart),
  sharing ``D/members/checkpoints``, with nothing installed for restores: the control plane's native restore
  resolves a failed-over Flink job's checkpoint (D20; ``D/members/checkpoints`` is the controllers'
  ``--restore-default-checkpoint-dir``); the member-side savepoint rule (the simulated Kyverno) only with
  ``savepoint_rule``;
* each member joined (Push mode, like ``flotilla join``), except the last ``pull_members``: those join in Pull
  mode, each with its own ``flotilla agent`` process (restarted when it exits) that registers the Cluster;
  with ``guard`` those agents keep the run permit (``--guard``) and their members run the guard
  (docs/fencing.md), so the controller-manager fences such a member automatically once it is cut off;
* a link (:mod:`flotilla.local.links`) on each path between the control plane and a member, which
  ``flotilla sim fault <member> --mode partition`` cuts;
* the default ClusterTaintPolicy ``not-ready`` (``Ready`` False/Unknown -> ``cluster.karmada.io/not-ready:NoExecute``,
  removed on True), unless switched off; an existing policy of that name is left as the user made it;
* every controller of the controller-manager, with health timings suited to a laptop (:data:`LAPTOP_TIMINGS`);
* ``D/kubeconfig`` with the context ``flotilla`` (current) and one context per member.

Restarting on the same data directory resumes: the same databases, the same member ports when they are free
(the Clusters are re-joined with the new endpoints when they are not).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from flotilla.apiserver.inprocess import in_process_client
from flotilla.local.layout import DataDirError, Layout, StackRecord, resume_conflict
from flotilla.local.timings import LAPTOP_TIMINGS, NOT_READY_TAINT

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_TAINT_POLICY", "LAPTOP_TIMINGS", "LocalStack", "PortInUseError", "StackConfig"]

#: Flink simulator settings: checkpoints every 2 s, progress in status (the member-side savepoint rule:
#: StackConfig.savepoint_rule).
MEMBER_SIM_OPTIONS: Final[dict[str, str]] = {
    "flink_checkpoint_interval": "2",
    "flink_progress_interval": "0.5",
    # the job's progress in its status every second: the failover history's records reprocessed (D22)
    "flink_status_progress_interval": "1",
}

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


def _drop_hook(link: Any, *, member_is_client: bool) -> Callable[[str], None]:
    """The one-way partitions of a member's link: ``to-member`` or ``from-member``, turned into the link's own
    direction (a Pull member's agent is its link's client, the control plane a Push member's)."""
    from flotilla.local.links import link_direction

    def drop(direction: str) -> None:
        link.drop(link_direction(member_is_client=member_is_client, towards_member=direction == "to-member"))

    return drop


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
    # admin token, which the join puts into the cluster's Secret); `flotilla up`'s default, off with --insecure
    secure: bool = True
    # the last N members join in Pull mode, each with its own agent process
    pull_members: int = 0
    # automatic fencing (docs/fencing.md): the Pull members' agents run with --guard (--fence-after,
    # --permit-hold), their members with the guard on (the same fence-after)
    guard: bool = False
    fence_after: float = 15.0
    permit_hold: float = 15.0
    # the member-side savepoint rule (the simulated Kyverno) in every member; off: the control plane restores (D20)
    savepoint_rule: bool = False
    # the controller-manager's --restore-missing and --restore-hold-timeout (D20)
    restore_missing: str = "hold"
    restore_hold_timeout: float = 300.0

    def member_names(self) -> list[str]:
        return [f"member{i}" for i in range(1, self.members + 1)]

    def pull_names(self) -> list[str]:
        names = self.member_names()
        return names[len(names) - self.pull_members:] if self.pull_members > 0 else []

    def push_names(self) -> list[str]:
        pull = set(self.pull_names())
        return [n for n in self.member_names() if n not in pull]


async def _quietly(stop: Callable[[], Awaitable[Any]]) -> None:
    """``await stop()``, its errors ignored: stopping one part must not keep the others running."""
    with contextlib.suppress(Exception):
        await stop()


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
        self.admin_token: str | None = None  # when ``secure``: the control plane's tokens
        self.viewer_token: str | None = None
        self.links: dict[str, Any] = {}  # member -> its control-plane Link
        self.agent_links: dict[str, Any] = {}  # guarded Push member -> the Link its lease-only agent reaches us by
        self.agents: dict[str, Any] = {}  # Pull member -> its AgentProcess
        self._options: Any = None  # the controller-manager's, kept for a restart
        self._metrics: Any = None

    # ------------------------------------------------------------------ properties
    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    @property
    def url(self) -> str:
        return self.api.url if self.api is not None else ""

    def dashboard_url(self) -> str | None:
        """The dashboard's URL with a new one-time token (with ``secure``, for the read-only viewer)."""
        if self.api is None:
            return None
        return self.api.dashboard_url(self.viewer_token if self.config.secure else None)

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
        if not 0 <= cfg.pull_members <= cfg.members:
            raise ValueError(f"--pull-members must be between 0 and --members ({cfg.members})")
        record = self.layout.load_record()
        conflict = resume_conflict(self.layout.root, record, secure=cfg.secure, guard=cfg.guard)
        if conflict is not None:
            raise DataDirError(conflict)
        record = record or StackRecord()
        record.secure = cfg.secure
        record.guard = cfg.guard
        from flotilla.files import make_private_tree, private_dir

        private_dir(self.layout.root)
        make_private_tree(self.layout.root)  # a directory an older version made world-readable
        self.record = record
        try:
            await self._start_api()
            await self._start_members(record)
            await self._start_links(record)
            await self._connect()
            await self._check_modes()
            await self._join_all()
            await self._ensure_lease_namespace()
            if cfg.default_taint_policy:
                await self._ensure_taint_policy()
            self._write_kubeconfig()
            await self._start_controllers()
            await self._start_agents()
            if self.config.tune_gc:
                from flotilla.apiserver.gctune import tune_gc

                tune_gc()  # a long-running server process from here on (see flotilla.apiserver.gctune)
            record.api_port = self.api.port
            record.member_ports = {name: m.port for name, m in self.group.members.items()}
            record.link_ports = {name: link.port for name, link in self.links.items()}
            self.layout.save_record(record)
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        """Stop every part, the last started first; one that fails to stop does not keep the others running."""
        if self.group is not None:
            self.group.agents.clear()
            self.group.control_plane = None
        agents, self.agents = self.agents, {}
        for agent in agents.values():
            await _quietly(agent.stop)
        await self._stop_part("metrics_server")
        await self._stop_part("manager")
        if self.controller_client is self.client:
            self.controller_client = None  # closed as the client
        await self._stop_part("controller_client", "close")
        await self._stop_part("client", "close")
        links, self.links = self.links, {}
        links.update({f"{k}-agent": v for k, v in self.agent_links.items()})
        self.agent_links = {}
        for link in links.values():
            await _quietly(link.stop)
        await self._stop_part("group")
        await self._stop_part("api")

    async def _stop_part(self, part: str, method: str = "stop") -> None:
        """Stop (or close) the part this stack holds as ``part``, if any, then forget it."""
        held = getattr(self, part)
        if held is not None:
            await _quietly(getattr(held, method))
        setattr(self, part, None)

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
        from flotilla.member.simulated import MemberConfig

        cfg = self.config
        return [MemberConfig(name=name, data_dir=self.layout.members, host=cfg.host, port=ports.get(name, 0),
                             storage_url="sqlite://", ready_delay=cfg.ready_delay,
                             options=self._member_options(name), secure=cfg.secure)
                for name in cfg.member_names()]

    def _member_options(self, name: str) -> dict[str, str]:
        """The simulator options of member ``name``: with ``guard``, every member runs its guard
        (:mod:`flotilla.member.guard`) with the agents' fence-after (a Push member's permit is kept by its
        lease-only agent)."""
        from flotilla.member.guard import GUARD_OPTION

        options = dict(self.config.sim_options)
        if self.config.savepoint_rule:
            options["savepoint_rule"] = "true"
        if self.config.guard:
            options[GUARD_OPTION] = repr(float(self.config.fence_after))
        return options

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

        for name in self.config.push_names():
            m = self.group.members[name]
            creds = load_kubeconfig(str(m.kubeconfig_path))
            spec = dataclasses.replace(join_spec_from_credentials(name, creds),  # through the cuttable link
                                       api_endpoint=self._link_url(creds.server, self.links[name]))
            result = await join_cluster(self.client, spec)
            what = "joined" if result.created else "re-joined (new endpoint)" if result.updated else "already joined"
            self.say(f"cluster {name} {what}")

    # ------------------------------------------------------------------ links and Pull members
    async def _start_links(self, record: StackRecord) -> None:
        """A link in front of each Push member's API (for the control plane) and in front of the control plane's API
        for each Pull member's agent; the member's ``partition`` fault cuts it."""
        from flotilla.local.links import Link

        cfg = self.config
        pull = set(cfg.pull_names())
        for name, m in self.group.members.items():
            target = (cfg.host, self.api.port) if name in pull else (cfg.host, m.port)
            link = Link(name, target, host=cfg.host, port=record.link_ports.get(name, 0))
            try:
                await link.start()
            except OSError:
                link = await Link(name, target, host=cfg.host).start()  # the previous port is taken
            self.links[name] = link
            m.faults.attach_link(lambda n=name: self._cut(n), lambda n=name: self._heal(n),
                                 lambda direction, n=name: self._drop(n, direction))

    def _cut(self, name: str) -> None:
        """A member's partition: its link to the control plane, and the one its lease-only agent reaches the
        control plane by. The agents still reach each other (a partition between the control plane and its
        members, not among the members)."""
        for link in (self.links.get(name), self.agent_links.get(name)):
            if link is not None:
                link.cut()

    def _heal(self, name: str) -> None:
        for link in (self.links.get(name), self.agent_links.get(name)):
            if link is not None:
                link.heal()

    def _drop(self, name: str, direction: str) -> None:
        """A member's one-way partition (``to-member`` or ``from-member``) on each link between it and the control
        plane: its own, and its lease-only agent's (whose client is on the member's side)."""
        pull = name in self.config.pull_names()
        if name in self.links:
            _drop_hook(self.links[name], member_is_client=pull)(direction)
        if name in self.agent_links:
            _drop_hook(self.agent_links[name], member_is_client=True)(direction)

    @staticmethod
    def _link_url(server: str, link: Any) -> str:
        scheme = server.split("://", 1)[0] if "://" in server else "http"
        return f"{scheme}://{link.url_host}"

    async def _check_modes(self) -> None:
        """A member that this data directory joined in the other mode is not switched silently."""
        from flotilla.api.resources import CLUSTERS

        pull = set(self.config.pull_names())
        for name in self.config.member_names():
            existing = await self.client.get_or_none(CLUSTERS, name)
            if existing is None:
                continue
            mode = (existing.get("spec") or {}).get("syncMode") or "Push"
            want = "Pull" if name in pull else "Push"
            if mode != want:
                raise DataDirError(
                    f"cluster {name} was joined in {mode} mode in {self.layout.root}; start with the same "
                    f"--pull-members as before (the last N members are Pull), or pass another --data-dir")

    async def _ensure_lease_namespace(self) -> None:
        """``karmada-cluster``, where the Pull clusters' Leases live, before any agent starts."""
        from flotilla.agent.lease import LEASE_NAMESPACE
        from flotilla.cli.control_plane import create_unless_exists
        from flotilla.cluster.join import namespace_object
        from flotilla.kube.resources import NAMESPACES

        await create_unless_exists(self.client, NAMESPACES, namespace_object(LEASE_NAMESPACE))

    async def _start_agents(self) -> None:
        from flotilla.client.kubeconfig import load_kubeconfig, write_kubeconfig
        from flotilla.local.agents import AgentProcess
        from flotilla.local.links import Link

        cfg = self.config
        cp = load_kubeconfig(str(self.api.kubeconfig_path))
        pull = set(cfg.pull_names())
        # with --guard a Push member gets an agent too, in lease-only mode: it keeps the Lease, the run permit and
        # the peer protocol, while the control plane keeps pushing its Works
        for name in cfg.member_names() if cfg.guard else cfg.pull_names():
            m = self.group.members[name]
            where = self.layout.agent_dir(name)
            from flotilla.files import private_dir

            private_dir(self.layout.agents)
            private_dir(where)
            karmada = where / "karmada.kubeconfig"
            if name in pull:
                to_cp = self.links[name]
            else:  # the Push member's own link leads to its API; its agent reaches the control plane through another
                to_cp = await Link(f"{name}-agent", (cfg.host, self.api.port), host=cfg.host).start()
                self.agent_links[name] = to_cp
            # secure, each agent holds a token of its own, scoped to its cluster (as `flotilla register` gives
            # one), never the admin's; with --insecure the API server checks no token
            token = await self._agent_token(name) if cfg.secure else cp.token
            write_kubeconfig(karmada, server=self._link_url(self.api.url, to_cp), context="karmada",
                             token=token, ca_pem=cp.ca_pem)
            argv = ["--log-level", "info", "agent", "--karmada-kubeconfig", str(karmada), "--cluster-name", name,
                    "--kubeconfig", str(m.kubeconfig_path), "--cluster-api-endpoint", m.url,
                    "--cluster-status-update-frequency", repr(cfg.timings["cluster_status_update_frequency"]),
                    "--cluster-api-timeout", repr(cfg.timings["cluster_api_timeout"]),
                    # the same health thresholds as the controller-manager's probes of the Push members: a Pull
                    # member whose API is down is Ready False within seconds, not Karmada's 30 s
                    "--cluster-success-threshold", repr(cfg.timings["cluster_success_threshold"]),
                    "--cluster-failure-threshold", repr(cfg.timings["cluster_failure_threshold"])]
            if name not in pull:
                argv.append("--lease-only")
            if cfg.guard:
                argv += ["--guard", "--fence-after", repr(float(cfg.fence_after)),
                         "--permit-hold", repr(float(cfg.permit_hold))]
                # the peer protocol: the agent answers its peers on a port of its own
                argv += ["--peer-listen", f"{cfg.host}:0"]
            metrics = f"{cfg.host}:{_free_port(cfg.host)}" if cfg.metrics_address is not None else "0"
            argv += ["--metrics-bind-address", metrics]
            agent = AgentProcess(name, argv, log_file=where / "agent.log", pid_file=where / "agent.pid",
                                 say=self.say)
            await agent.start()
            self.agents[name] = agent
            self.group.agents[name] = agent  # `flotilla sim agent` reaches it through the members' admin endpoint
            guard = (f", guard on (fence-after {cfg.fence_after:g}s, permit-hold {cfg.permit_hold:g}s)"
                     if cfg.guard else "")
            mode = "Pull mode, agent" if name in pull else "Push mode, lease-only agent"
            served = f", metrics http://{metrics}/metrics" if metrics != "0" else ""
            self.say(f"cluster {name}: {mode} pid {agent.pid}{guard}{served} (log {where / 'agent.log'})")

    async def control_plane(self, mode: str) -> dict[str, Any]:
        """``restart``: the controller-manager stops and a new one starts, as when its process restarts: everything
        it held in memory (the Leases it saw change and when, its queues and caches) is lost, and it starts again
        from the API server. The API server, the members and the links keep running."""
        from flotilla.runtime.manager import ControllerManager

        if mode != "restart":
            raise ValueError(f"unknown control-plane mode {mode!r}: use restart")
        if self.manager is None:
            raise ValueError("the controller-manager is not running")
        old, self.manager = self.manager, None
        await old.stop()
        self.say("controller-manager stopped (restart)")
        self.manager = ControllerManager(self.controller_client, self._options, metrics=self._metrics)
        await self.manager.start()
        self.say(f"controller-manager started again: {len(self.manager.controllers)} controllers running")
        return {"controllers": len(self.manager.controllers)}

    async def _agent_token(self, name: str) -> str:
        """A new token for the agent of Pull member ``name``: its Secret (only the token's SHA-256) created, or
        replaced, in the control plane, so the token of an earlier start no longer works."""
        import secrets

        from flotilla.apiserver.agent_tokens import AGENT_TOKEN_NAMESPACE, agent_token_secret
        from flotilla.kube.resources import SECRETS

        token = secrets.token_urlsafe(32)
        secret = agent_token_secret(name, token)
        existing = await self.client.get_or_none(SECRETS, secret["metadata"]["name"], AGENT_TOKEN_NAMESPACE)
        if existing is None:
            await self.client.create(SECRETS, secret, AGENT_TOKEN_NAMESPACE)
        else:
            secret["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            await self.client.update(SECRETS, secret)
        return token

    async def _ensure_taint_policy(self) -> None:
        from flotilla.api import resources as R
        from flotilla.cli.control_plane import create_unless_exists

        policy = default_taint_policy(self.config.member_names())
        if await create_unless_exists(self.client, R.CLUSTER_TAINT_POLICIES, policy) is not None:
            self.say(f"ClusterTaintPolicy {DEFAULT_TAINT_POLICY_NAME}: Ready False/Unknown -> "
                     f"{NOT_READY_TAINT}:NoExecute")

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
        from flotilla.observability.metrics import ControllerMetrics, MetricsServer
        from flotilla.runtime.manager import ControllerManager
        from flotilla.runtime.options import ControllerOptions

        options = ControllerOptions(**self.config.timings)
        options.restore_missing = self.config.restore_missing
        options.restore_hold_timeout = self.config.restore_hold_timeout
        options.restore_default_checkpoint_dir = (self.layout.members / "checkpoints").absolute().as_uri()
        if self.config.feature_gates:
            options.set_gates(self.config.feature_gates)
        metrics = ControllerMetrics()
        transport = self.config.controller_transport
        if transport == "inprocess":
            self.controller_client = in_process_client(self.api.storage, bookmark_interval=30.0)
        elif transport == "http":
            self.controller_client = self.client
        else:
            raise ValueError(f"unknown controller transport {transport!r}: inprocess or http")
        self.manager = ControllerManager(self.controller_client, options, metrics=metrics)
        await self.manager.start()
        self.say(f"{len(self.manager.controllers)} controllers running")
        self._options, self._metrics = options, metrics
        self.group.control_plane = self.control_plane
        if self.config.metrics_address is not None:
            host, port = self.config.metrics_address
            server = MetricsServer(metrics.registry, host, port)
            try:
                self.metrics_server = await server.start()
                self.say(f"metrics on {server.url}/metrics")
            except OSError as e:
                self.say(f"cannot serve metrics on {host}:{port} ({e.strerror or e}); running without metrics "
                         "(--metrics-bind-address chooses another address, 0 none)")


def _free_port(host: str) -> int:
    """A port nobody listens on at the moment (the agent binds it a moment later)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
