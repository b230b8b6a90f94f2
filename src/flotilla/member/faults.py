"""Fault injection for one simulated member: ``down``, ``off``, ``unready``, ``slow`` and ``recover``.

* ``down``: the API listener is closed and every open connection (watches included) is dropped, like a cluster
  cut off by the network: new connections are refused. The port stays reserved (bound, not listening), and
  ``recover`` listens on the SAME port again, so kubeconfigs and Cluster objects stay valid. A request that
  reaches the member while it is down anyway (on a connection accepted just as the listener closed) has its
  connection cut instead of an answer. The member's
  simulators keep running inside the process (the cluster is unreachable, not stopped: its workloads still run,
  as in a network partition), so running-interval history keeps its open intervals; that is what makes
  split-brain visible.
* ``off``: power off. The API goes away as with ``down`` AND the member's workloads stop: its simulators are
  stopped (a Flink job ends abruptly, completing only the checkpoints already due) and every running interval of
  the member ends at that moment. The member's store keeps what it held (a dead cluster's etcd keeps its objects
  and their last status). ``recover`` is the power coming back: the API listens again on the same port at once,
  and the simulators start again ``boot_delay`` seconds later (default 0; a real cluster's API answers before its
  kubelets and operators have restarted its workloads). They find the objects in the store and resume them as a
  restarted cluster does: pods start again (Ready after the ready delay), a FlinkDeployment's job restarts under
  HA with its job id from its newest checkpoint. Any other mode given while ``off`` also powers the member on
  (``down`` then: running, but unreachable).
* ``unready``: ``/readyz`` answers 500 with a body saying why; ``/healthz``, ``/livez`` and the API keep working.
* ``slow``: every HTTP request (health endpoints included) is delayed by ``latency`` seconds before it is handled.
* ``partition``: the member is cut off from the control plane in both directions, through the link hooks given to
  :meth:`FaultInjector.attach_link` (``flotilla up`` attaches its per-member links, :mod:`flotilla.local.links`):
  the control plane cannot reach a Push member's API and a Pull member's agent cannot reach the control plane.
  The member's own API (``kubectl --context <member>``) and its workloads keep running. A member with no link
  (a standalone ``flotilla member``) refuses the mode: ``down`` is what cuts it off.
* ``partition-to-member`` and ``partition-from-member``: one direction of the member's link loses every byte,
  silently, while the other direction is still delivered and no connection is reset (through the ``drop`` hook of
  :meth:`FaultInjector.attach_link`): ``to-member`` loses what the control plane sends towards the member's side,
  ``from-member`` what the member's side sends towards the control plane. For a Pull member the agent's requests
  still reach the control plane and are carried out, but their answers are lost (``to-member``), or its requests
  are lost and the control plane hears nothing (``from-member``); for a Push member the control plane's requests
  are lost (``to-member``), or reach the member and are carried out while their answers are lost
  (``from-member``). Either way the side waiting for an answer times out, as on a real asymmetric loss.
* ``recover``: back to normal.

``state()`` reports ``workloads``: ``running``, ``stopped`` (powered off) or ``booting`` (powered on, the
simulators not started yet).

A whole member process can also be frozen from outside with ``kill -STOP <pid>`` (``kill -CONT`` resumes):
the kernel still accepts TCP connections, but nothing answers, so clients time out instead of being refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

if TYPE_CHECKING:
    from flotilla.apiserver.server import ApiServer

log = logging.getLogger(__name__)

__all__ = ["FAULT_COMMANDS", "FaultError", "FaultInjector", "MODES", "PARTITIONS"]

PARTITION_TO_MEMBER: Final = "partition-to-member"
PARTITION_FROM_MEMBER: Final = "partition-from-member"
#: the partitions of the member's link, and which way bytes are lost (None: both ways, connections reset)
PARTITIONS: Final[dict[str, str | None]] = {"partition": None, PARTITION_TO_MEMBER: "to-member",
                                            PARTITION_FROM_MEMBER: "from-member"}
MODES = ("normal", "down", "off", "unready", "slow", *PARTITIONS)
FAULT_COMMANDS = ("down", "off", "unready", "slow", *PARTITIONS, "recover")
UNREACHABLE = frozenset({"down", "off"})  # modes with the API listener closed

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PowerHook = Callable[[], Awaitable[None]]
LinkHook = Callable[[], None]
DropHook = Callable[[str], None]  # "to-member" or "from-member": that direction of the link loses its bytes


class FaultError(ValueError):
    """An unknown fault mode, a bad latency or boot delay."""


class FaultInjector:
    """The fault state of one member and the means to apply it: an aiohttp middleware (``unready``, ``slow``),
    control of the member API server's listener (``down``, ``off``) and of its workloads (``off``: the hooks
    given to :meth:`attach` stop and start the member's simulators)."""

    def __init__(self, member: str, default_latency: float = 2.0) -> None:
        self.member = member
        self.mode = "normal"
        self.latency = default_latency
        self.starting = True  # /readyz fails until the member's simulators run
        self.since: float | None = None
        self._server: ApiServer | None = None
        self._placeholder: socket.socket | None = None
        self._ssl: Any = None
        self.boot_delay = 0.0  # seconds from power-on (recover after off) to the simulators running again
        self.workloads = "running"  # running | stopped (powered off) | booting (powered on, not started yet)
        self._power_off: PowerHook | None = None
        self._power_on: PowerHook | None = None
        self._boot: asyncio.Task[None] | None = None
        self._cut_link: LinkHook | None = None
        self._heal_link: LinkHook | None = None
        self._drop_link: DropHook | None = None
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ middleware
    def middleware(self) -> Any:
        @web.middleware
        async def fault_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            if self.mode in UNREACHABLE:
                # a connection the listener accepted as it closed escapes the force-close of the ones it knew
                # (its protocol is made a moment later): an unreachable member answers nothing on it either
                if request.transport is not None:
                    request.transport.abort()  # the client sees the connection cut, as on the ones force-closed
                raise web.HTTPServiceUnavailable(text=f"member {self.member} is {self.mode}")  # never sent
            if self.mode == "slow" and self.latency > 0:
                await asyncio.sleep(self.latency)
            path = request.path.rstrip("/")
            if (path == "/readyz" or path.startswith("/readyz/")) and (self.mode == "unready" or self.starting):
                return web.Response(status=500, text=self.unready_body(), content_type="text/plain")
            return await handler(request)

        return fault_middleware

    def unready_body(self) -> str:
        if self.starting:
            why = f"member {self.member} is starting: its simulators are not running yet"
        else:
            why = (f"member {self.member} was made unready by fault injection "
                   f"(flotilla sim fault {self.member} --mode recover undoes it)")
        return f"[+]ping ok\n[+]log ok\n[-]flotilla-member-fault failed: {why}\nreadyz check failed\n"

    # ------------------------------------------------------------------ state
    @property
    def ready(self) -> bool:
        return not self.starting and (self.mode in ("normal", "slow") or self.mode in PARTITIONS)

    def state(self) -> dict[str, Any]:
        return {"mode": self.mode, "latency": self.latency, "ready": self.ready, "workloads": self.workloads}

    def attach(self, server: ApiServer, *, power_off: PowerHook | None = None,
               power_on: PowerHook | None = None) -> None:
        """The API server whose listener ``down`` and ``off`` close (call after it started), and how ``off``
        stops the member's workloads (``power_off``) and a later power-on starts them again (``power_on``)."""
        self._server = server
        self._power_off = power_off
        self._power_on = power_on

    def attach_link(self, cut: LinkHook, heal: LinkHook, drop: DropHook | None = None) -> None:
        """How ``partition`` cuts the member off the control plane (``cut``), how the one-way partitions lose one
        direction of the link (``drop("to-member")``, ``drop("from-member")``) and how ``recover`` reconnects it."""
        self._cut_link = cut
        self._heal_link = heal
        self._drop_link = drop

    async def set(self, command: str, latency: float | None = None,
                  boot_delay: float | None = None) -> dict[str, Any]:
        """Apply ``down``, ``off``, ``unready``, ``slow``, a partition (:data:`PARTITIONS`) or ``recover`` (one
        fault at a time: a new one replaces the current one). ``latency`` (seconds) sets the ``slow`` delay, ``boot_delay`` (seconds) how long the
        workloads take to run again when a powered-off member is powered on (both are kept for later faults)."""
        mode = self.check(command, latency, boot_delay)
        if latency is not None:
            self.latency = _seconds("latency", latency)
        if boot_delay is not None:
            self.boot_delay = _seconds("boot delay", boot_delay)
        direction = PARTITIONS.get(mode)
        async with self._lock:
            old = self.mode
            if old in PARTITIONS and mode != old and self._heal_link is not None:
                self._heal_link()  # from one partition to another too: the damaged connections go
            if mode in PARTITIONS and mode != old:
                if direction is None and self._cut_link is not None:
                    self._cut_link()
                elif direction is not None and self._drop_link is not None:
                    self._drop_link(direction)
            if mode in UNREACHABLE and old not in UNREACHABLE:
                await self._close_listener()
            if mode == "off" and old != "off":
                await self._stop_workloads()
            if mode not in UNREACHABLE and old in UNREACHABLE:
                await self._open_listener()  # the API answers first; workloads follow after the boot delay
            if old == "off" and mode != "off":
                await self._start_workloads()
            if mode != old:
                self.since = asyncio.get_running_loop().time()
                log.warning("member %s: fault mode %s -> %s", self.member, old, mode)
            self.mode = mode
        return self.state()

    def check(self, command: str, latency: float | None = None, boot_delay: float | None = None) -> str:
        """The mode ``command`` puts the member in, or :class:`FaultError` saying why it cannot (nothing applied)."""
        if command == "normal":
            command = "recover"
        if command not in FAULT_COMMANDS:
            raise FaultError(f"unknown fault mode {command!r}: use one of {', '.join(FAULT_COMMANDS)}")
        if latency is not None:
            _seconds("latency", latency)
        if boot_delay is not None:
            _seconds("boot delay", boot_delay)
        mode = "normal" if command == "recover" else command
        if mode in PARTITIONS and self._cut_link is None:
            raise FaultError(f"member {self.member} has no control-plane link to cut (it is not run by flotilla "
                             "up); use --mode down to make it unreachable")
        if PARTITIONS.get(mode) is not None and self._drop_link is None:
            raise FaultError(f"the control-plane link of member {self.member} cannot lose one direction only; "
                             "use --mode partition")
        return mode

    # ------------------------------------------------------------------ power (off and back on)
    async def _stop_workloads(self) -> None:
        """Power off: a pending boot never happens; running simulators stop (called with the lock held)."""
        booting, self._boot = self._boot, None
        if booting is not None:
            booting.cancel()  # it waits for the boot delay or for the lock: nothing of it ran yet
        if self.workloads == "running" and self._power_off is not None:
            await self._power_off()
        self.workloads = "stopped"

    async def _start_workloads(self) -> None:
        """Power on: start the simulators now (no boot delay) or after the boot delay (lock held)."""
        if self.boot_delay <= 0:
            await self._boot_now()
            return
        self.workloads = "booting"
        self._boot = asyncio.get_running_loop().create_task(self._boot_later(self.boot_delay),
                                                            name=f"{self.member}/boot")

    async def _boot_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        async with self._lock:
            if self._boot is not asyncio.current_task():
                return  # powered off again (or shut down) meanwhile
            self._boot = None
            try:
                await self._boot_now()
            except Exception:
                log.exception("member %s: starting the simulators after power-on failed", self.member)

    async def _boot_now(self) -> None:
        try:
            if self._power_on is not None:
                await self._power_on()
        finally:
            self.workloads = "running"  # what did start runs (and a later ``off`` stops it)
        log.warning("member %s: powered on, its workloads run again", self.member)

    # ------------------------------------------------------------------ listener control
    async def _close_listener(self) -> None:
        server = self._server
        if server is None or server.runner is None:
            raise FaultError(f"member {self.member} is not serving")
        runner = server.runner
        for site in list(runner.sites):
            self._ssl = getattr(site, "_ssl_context", None)
            await site.stop()  # closes the listening socket: new connections are refused
        # keep the port: a bound socket that does not listen refuses connections, and nobody else gets the port
        try:
            self._placeholder = self._bind(server.config.host, server.port)
        except OSError as e:  # pragma: no cover - depends on the kernel's TIME_WAIT handling
            log.warning("member %s: cannot reserve port %d while down: %s", self.member, server.port, e)
        if runner.server is not None:
            for conn in runner.server.connections:
                conn.force_close()  # drop keep-alive connections and open watches at once
        if server.handler is not None:
            await server.handler.close()  # end the watch handlers still waiting for events

    async def _open_listener(self) -> None:
        server = self._server
        if server is None or server.runner is None:
            raise FaultError(f"member {self.member} is not serving")
        sock = self._placeholder
        self._placeholder = None
        if sock is None:
            for _ in range(50):  # the port could not be reserved when going down: try to get it back
                try:
                    sock = self._bind(server.config.host, server.port)
                    break
                except OSError:
                    await asyncio.sleep(0.1)
            if sock is None:
                raise FaultError(f"member {self.member}: port {server.port} is taken; cannot listen again")
        site = web.SockSite(server.runner, sock, ssl_context=self._ssl)
        await site.start()
        if server.handler is not None:
            server.handler.closing = False  # _close_listener ended the watches: new ones are served again

    @staticmethod
    def _bind(host: str, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except OSError:
            sock.close()
            raise
        return sock

    async def close(self) -> None:
        """Forget a pending boot and release the reserved port (member shutdown while down or off)."""
        booting, self._boot = self._boot, None
        if booting is not None:
            booting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await booting
        if self._placeholder is not None:
            with contextlib.suppress(OSError):
                self._placeholder.close()
            self._placeholder = None


def _seconds(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise FaultError(f"{what} must be a non-negative number of seconds, got {value!r}")
    return float(value)
