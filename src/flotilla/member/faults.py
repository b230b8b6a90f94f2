"""Fault injection for one simulated member: ``down``, ``unready``, ``slow`` and ``recover``.

* ``down``: the API listener is closed and every open connection (watches included) is dropped, like a dead
  cluster: new connections are refused. The port stays reserved (bound, not listening), and ``recover`` listens
  on the SAME port again, so kubeconfigs and Cluster objects stay valid. The member's simulators keep running
  inside the process (the cluster is unreachable, not stopped: its workloads still run, as in a network
  partition), so running-interval history keeps its open intervals; that is what makes split-brain visible.
* ``unready``: ``/readyz`` answers 500 with a body saying why; ``/healthz``, ``/livez`` and the API keep working.
* ``slow``: every HTTP request (health endpoints included) is delayed by ``latency`` seconds before it is handled.
* ``recover``: back to normal.

A whole member process can also be frozen from outside with ``kill -STOP <pid>`` (``kill -CONT`` resumes):
the kernel still accepts TCP connections, but nothing answers, so clients time out instead of being refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from flotilla.apiserver.server import ApiServer

log = logging.getLogger(__name__)

__all__ = ["FAULT_COMMANDS", "FaultError", "FaultInjector", "MODES"]

MODES = ("normal", "down", "unready", "slow")
FAULT_COMMANDS = ("down", "unready", "slow", "recover")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FaultError(ValueError):
    """An unknown fault mode or a bad latency."""


class FaultInjector:
    """The fault state of one member and the means to apply it: an aiohttp middleware (``unready``, ``slow``)
    plus control of the member API server's listener (``down``)."""

    def __init__(self, member: str, default_latency: float = 2.0) -> None:
        self.member = member
        self.mode = "normal"
        self.latency = default_latency
        self.starting = True  # /readyz fails until the member's simulators run
        self.since: float | None = None
        self._server: ApiServer | None = None
        self._placeholder: socket.socket | None = None
        self._ssl: Any = None
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ middleware
    def middleware(self) -> Any:
        @web.middleware
        async def fault_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
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
        return not self.starting and self.mode in ("normal", "slow")

    def state(self) -> dict[str, Any]:
        return {"mode": self.mode, "latency": self.latency, "ready": self.ready}

    def attach(self, server: ApiServer) -> None:
        """The API server whose listener ``down`` closes (call after it started)."""
        self._server = server

    async def set(self, command: str, latency: float | None = None) -> dict[str, Any]:
        """Apply ``down``, ``unready``, ``slow`` or ``recover`` (one fault at a time: a new one replaces the
        current one). ``latency`` (seconds) sets the ``slow`` delay."""
        if command == "normal":
            command = "recover"
        if command not in FAULT_COMMANDS:
            raise FaultError(f"unknown fault mode {command!r}: use one of {', '.join(FAULT_COMMANDS)}")
        if latency is not None:
            if isinstance(latency, bool) or not isinstance(latency, int | float) or latency < 0:
                raise FaultError(f"latency must be a non-negative number of seconds, got {latency!r}")
            self.latency = float(latency)
        mode = "normal" if command == "recover" else command
        async with self._lock:
            if mode == "down" and self.mode != "down":
                await self._close_listener()
            elif mode != "down" and self.mode == "down":
                await self._open_listener()
            if mode != self.mode:
                self.since = asyncio.get_running_loop().time()
                log.warning("member %s: fault mode %s -> %s", self.member, self.mode, mode)
            self.mode = mode
        return self.state()

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
        """Release the reserved port (member shutdown while down)."""
        if self._placeholder is not None:
            with contextlib.suppress(OSError):
                self._placeholder.close()
            self._placeholder = None
