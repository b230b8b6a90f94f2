"""One simulated member cluster: an API server (memory storage) + workload simulators + fault state."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flotilla.apiserver.rest import ResourceStorage
from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.files import private_dir
from flotilla.kube.quantity import QuantityError, parse_quantity
from flotilla.member.faults import FaultInjector
from flotilla.member.history import HistoryRecorder
from flotilla.member.simulator import Simulator, SimulatorFactory, registered_simulators
from flotilla.storage.etcd import EtcdTLS

log = logging.getLogger(__name__)

__all__ = [
    "ANNOTATION_BROKEN",
    "ANNOTATION_READY_DELAY",
    "DEFAULT_BROKEN_IMAGE_PATTERN",
    "PLUGIN_MODULES",
    "MemberCluster",
    "MemberConfig",
    "simulator_factories",
]

# Karmada's e2e tests make a workload fail with an image from the non-existent registry "fake/".
DEFAULT_BROKEN_IMAGE_PATTERN = r"^fake/"
ANNOTATION_READY_DELAY = "sim.flotilla.io/ready-delay"
ANNOTATION_BROKEN = "sim.flotilla.io/broken"

# Modules that register more simulators when imported (if they exist): the FlinkDeployment simulator.
PLUGIN_MODULES: tuple[str, ...] = ("flotilla.member.flink",)


@dataclass
class MemberConfig:
    """Everything about one member: where it serves, and the settings its simulators read."""

    name: str = "member1"
    data_dir: Path = field(default_factory=lambda: Path(".flotilla-members"))  # shared root; files go to D/<name>
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port
    storage_url: str = "memory://"
    etcd_tls: EtcdTLS | None = None  # for an etcds:// storage_url
    ready_delay: float = 1.0  # seconds from a simulated pod's creation to Ready
    broken_image_pattern: str = DEFAULT_BROKEN_IMAGE_PATTERN  # regex searched in every image of a workload
    progress_deadline: float | None = None  # seconds; None: each Deployment's spec.progressDeadlineSeconds
    nodes: int = 3  # simulated Nodes <name>-node-0..N-1 (flotilla.member.nodes)
    node_cpu: str = "8"  # capacity and allocatable of each simulated node (quantities)
    node_memory: str = "32Gi"
    node_pods: str = "110"
    daemonset_nodes: int | None = None  # nodes a DaemonSet runs one pod on; None: ``nodes``
    slow_latency: float = 2.0  # the delay of the "slow" fault unless given with it
    checkpoint_dir: Path | None = None  # shared by all members; default D/checkpoints (Flink simulator)
    simulators: Sequence[str] | None = None  # names of registered simulators to run; None: all
    bookmark_interval: float = 30.0
    options: dict[str, Any] = field(default_factory=dict)  # free-form settings for plug-in simulators
    secure: bool = False  # serve TLS (its own CA in D/<name>/pki) and require its admin token (D/<name>/tokens.csv)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if self.nodes < 0:
            raise ValueError(f"member {self.name}: nodes must not be negative, got {self.nodes}")
        for what in ("node_cpu", "node_memory", "node_pods"):
            value = getattr(self, what)
            try:
                negative = parse_quantity(value).value < 0
            except (QuantityError, TypeError) as e:
                raise ValueError(f"member {self.name}: {what} {e}") from None
            if negative:
                raise ValueError(f"member {self.name}: {what} must not be negative, got {value!r}")
            setattr(self, what, str(value))
        if self.daemonset_nodes is None:
            self.daemonset_nodes = self.nodes
        if self.checkpoint_dir is None:
            self.checkpoint_dir = self.data_dir / "checkpoints"
        self.checkpoint_dir = Path(self.checkpoint_dir)
        self._broken = re.compile(self.broken_image_pattern) if self.broken_image_pattern else None
        from flotilla.member.guard import guard_settings

        try:
            self.guard = guard_settings(self.options)
        except ValueError as e:
            raise ValueError(f"member {self.name}: {e}") from None

    @property
    def member_dir(self) -> Path:
        """``D/<name>``: the member's kubeconfig and admin.json."""
        return self.data_dir / self.name

    @property
    def checkpoints(self) -> Path:
        assert self.checkpoint_dir is not None
        return self.checkpoint_dir

    def broken_image(self, image: Any) -> bool:
        """Does this image match the broken-image pattern (a workload using it never becomes ready)?"""
        return bool(self._broken is not None and isinstance(image, str) and self._broken.search(image))

    def image_broken(self, obj: dict[str, Any]) -> bool:
        """Any image of the object broken? Looks at ``spec.template.spec`` containers and init containers
        (built-in workloads), ``spec.jobTemplate.spec.template.spec`` and ``spec.image`` (FlinkDeployment)."""
        return any(self.broken_image(i) for i in images_of(obj))

    guard: tuple[float, float] | None = field(default=None, init=False, repr=False)  # (fence-after, poll)

    def crash_annotation(self, obj: dict[str, Any]) -> bool:
        """``sim.flotilla.io/broken: "true"`` on the object: its pods crash until the annotation goes."""
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        return str(ann.get(ANNOTATION_BROKEN, "")).strip().lower() in ("true", "1", "yes")

    def ready_delay_for(self, obj: dict[str, Any]) -> float:
        """The object's ``sim.flotilla.io/ready-delay`` annotation (seconds), else ``ready_delay``."""
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        raw = ann.get(ANNOTATION_READY_DELAY)
        if raw is not None:
            try:
                value = float(raw)
                if value >= 0:
                    return value
            except (TypeError, ValueError):
                pass
        return self.ready_delay


def images_of(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    out: list[str] = []
    if isinstance(spec.get("image"), str):
        out.append(spec["image"])
    pod_specs = []
    for path in (("template", "spec"), ("jobTemplate", "spec", "template", "spec")):
        cur: Any = spec
        for part in path:
            cur = cur.get(part) if isinstance(cur, dict) else None
        if isinstance(cur, dict):
            pod_specs.append(cur)
    for ps in pod_specs:
        for key in ("containers", "initContainers"):
            for c in ps.get(key) or []:
                if isinstance(c, dict) and isinstance(c.get("image"), str):
                    out.append(c["image"])
    return out


def load_plugins() -> None:
    """Import the plug-in simulator modules that exist (their import registers their simulators)."""
    for mod in PLUGIN_MODULES:
        try:
            found = importlib.util.find_spec(mod)
        except ModuleNotFoundError:
            found = None
        if found is not None:
            importlib.import_module(mod)


def simulator_factories(names: Sequence[str] | None = None) -> list[SimulatorFactory]:
    """The registered simulators (built-in workloads and plug-ins), all or those named."""
    import flotilla.member.nodes  # noqa: F401  (registers the node simulator)
    import flotilla.member.workloads  # noqa: F401  (registers the built-in simulators)

    load_plugins()
    registry = registered_simulators()
    if names is None:
        return list(registry.values())
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise ValueError(f"unknown simulator(s) {', '.join(unknown)}: known are {', '.join(registry)}")
    return [registry[n] for n in names]


class MemberCluster:
    """A simulated member: start() serves its API and runs its simulators; stop() ends both.

    ``history`` is shared by the members of a process (running intervals, see :mod:`flotilla.member.history`);
    without one, the member records in memory only.
    """

    def __init__(self, config: MemberConfig, history: HistoryRecorder | None = None,
                 simulators: Sequence[SimulatorFactory] | None = None) -> None:
        self.config = config
        self.name = config.name
        self.history = history if history is not None else HistoryRecorder(None)
        self._factories = simulators
        self._running_factories: list[SimulatorFactory] = []  # what start() runs, and a power-on runs again
        self.faults = FaultInjector(config.name, config.slow_latency)
        self.server: ApiServer | None = None
        self.simulators: list[Simulator] = []

    # ------------------------------------------------------------------ properties
    @property
    def storage(self) -> ResourceStorage:
        if self.server is None or self.server.storage is None:
            raise RuntimeError(f"member {self.name} is not started")
        return self.server.storage

    @property
    def url(self) -> str:
        return self.server.url if self.server is not None else ""

    @property
    def port(self) -> int:
        return self.server.port if self.server is not None else self.config.port

    @property
    def kubeconfig_path(self) -> Path:
        return self.config.member_dir / "kubeconfig"

    def simulator(self, name: str) -> Simulator:
        for s in self.simulators:
            if s.name == name:
                return s
        raise KeyError(name)

    def guard_stops(self, obj: dict[str, Any]) -> bool:
        """Whether the member's guard stops this object now (docs/fencing.md; never without a guard)."""
        from flotilla.member.guard import PermitGuard

        return any(isinstance(s, PermitGuard) and s.stops(obj) for s in self.simulators)

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "port": self.port, "kubeconfig": str(self.kubeconfig_path),
                **self.faults.state()}

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> MemberCluster:
        from flotilla.member.workloads import install_workload_defaults

        cfg = self.config
        private_dir(cfg.member_dir)
        private_dir(cfg.checkpoints)
        factories = list(self._factories) if self._factories is not None else simulator_factories(cfg.simulators)
        if cfg.guard is not None:
            from flotilla.member.guard import PermitGuard

            fence_after, poll = cfg.guard
            factories.insert(0, lambda: PermitGuard(fence_after, poll))
        api = ApiServerConfig(storage_url=cfg.storage_url, etcd_tls=cfg.etcd_tls, data_dir=cfg.member_dir, host=cfg.host, port=cfg.port,
                              context_name=cfg.name, bookmark_interval=cfg.bookmark_interval,
                              middlewares=[self.faults.middleware()], karmada_admission=False, secure=cfg.secure,
                              dashboard=False)
        self.server = ApiServer(api)
        try:
            await self.server.start()
        except OSError as e:
            await self.stop()
            raise OSError(e.errno, f"member {cfg.name}: cannot serve on {cfg.host}:{cfg.port}: {e.strerror}") from e
        try:
            install_workload_defaults(self.server.storage)
            self.faults.attach(self.server, power_off=self._stop_simulators, power_on=self._power_on)
            self._running_factories = factories
            await self._start_simulators(cold=False)
        except BaseException:
            await self.stop()
            raise
        self.faults.starting = False
        log.info("member %s serving %s with simulators %s", self.name, self.url,
                 ", ".join(s.name for s in self.simulators))
        return self

    async def stop(self) -> None:
        await self.faults.close()  # a pending power-on boot never happens
        await self._stop_simulators()
        if self.server is not None:
            await self.server.stop()
            self.server = None

    async def _start_simulators(self, *, cold: bool) -> None:
        """One new instance of every simulator; ``cold``: after a power-off (what they simulated had died)."""
        for factory in self._running_factories:
            sim = factory()
            sim.cold_start = cold
            await sim.start(self)
            self.simulators.append(sim)

    async def _power_on(self) -> None:
        await self._start_simulators(cold=True)

    async def _stop_simulators(self) -> None:
        """Stop every simulator (shutdown, or the ``off`` fault): nothing of this member runs any more."""
        for sim in reversed(self.simulators):
            try:
                await sim.stop()
            except Exception:
                log.exception("member %s: stopping simulator %s failed", self.name, sim.name)
        self.simulators.clear()
        self.history.close_member(self.name)

    async def set_fault(self, mode: str, latency: float | None = None,
                        boot_delay: float | None = None) -> dict[str, Any]:
        """Apply a fault (:mod:`flotilla.member.faults`); ``boot_delay`` matters for a power-on after ``off``."""
        await self.faults.set(mode, latency, boot_delay)
        return self.state()

    async def __aenter__(self) -> MemberCluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
