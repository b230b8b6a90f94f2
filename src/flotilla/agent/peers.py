"""The agent's side of the peer protocol (``flotilla agent --guard --peer-listen``; docs/fencing.md).

Three parts, each small:

* :class:`FleetView` follows every Cluster of the control plane (list and watch): how many there are, where each
  other agent answers peers (the annotation ``guard.flotilla.io/peer-endpoint``) and which clusters are fenced or
  fence-pending. When a new pending fence appears it calls ``on_new_fence`` so that the agent renews its Lease at
  once, carrying the acknowledgement. The view keeps what it last saw while the control plane is unreachable.
* :class:`PeerServer` answers ``GET /peer/v1/report`` with this agent's report: whether it holds the control plane,
  whether its view is synced, the fleet's size and the fences it knows. A request with ``probe=1`` (sent by a peer
  that has lost the control plane) makes the agent check the control plane now rather than at its next renewal.
* :class:`PeerPoller` asks every peer for its report every ``interval`` while the agent's own hold of the control
  plane is in doubt, and keeps each peer's latest answer with the time the request was sent.

The decisions are :mod:`flotilla.failover.peer_quorum`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from flotilla.api.resources import CLUSTERS
from flotilla.client import Client
from flotilla.client.informer import Informer
from flotilla.failover.peer_quorum import (
    REPORT_PATH,
    PeerReport,
    Quorum,
    known_fences,
    parse_report,
    peer_endpoint,
    peer_quorum,
)

log = logging.getLogger(__name__)

__all__ = ["FleetView", "PeerPoller", "PeerServer", "split_host_port"]


def split_host_port(value: str) -> tuple[str, int]:
    """``host:port`` (a port of 0 picks a free one); ValueError saying what is wrong."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


class FleetView:
    """Every Cluster as the agent last saw it (see the module docstring)."""

    def __init__(self, cp: Client, me: str, *, on_new_fence: Callable[[], None] = lambda: None) -> None:
        self.me = me
        self.on_new_fence = on_new_fence
        self.informer = Informer(cp, CLUSTERS, backoff=(0.2, 5.0))
        self.informer.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new),
                                  on_delete=self._changed)
        self.fences: dict[str, str] = {}

    def start(self) -> None:
        self.informer.start()

    async def stop(self) -> None:
        await self.informer.stop()

    @property
    def synced(self) -> bool:
        return self.informer.has_synced

    def _changed(self, _obj: Any = None) -> None:
        fences = known_fences(self.informer.store.list())
        new = any(self.fences.get(name) != token for name, token in fences.items() if token != "taint")
        self.fences = fences
        if new:
            self.on_new_fence()

    def fleet(self) -> int | None:
        """How many Clusters there are (None before the first complete list)."""
        return len(self.informer.store.list()) if self.synced else None

    def me_fenced(self) -> bool:
        return self.me in self.fences

    def peers(self) -> dict[str, str]:
        """The other clusters whose agents answer peers: name -> ``host:port``."""
        out: dict[str, str] = {}
        for cluster in self.informer.store.list():
            name = (cluster.get("metadata") or {}).get("name")
            endpoint = peer_endpoint(cluster)
            if name and name != self.me and endpoint is not None:
                out[name] = endpoint
        return out

    def report(self, reachable: bool) -> PeerReport:
        return PeerReport(self.me, reachable, self.synced, self.fleet() or 0,
                          frozenset(self.fences))


class PeerServer:
    """Serves this agent's report on ``host:port`` (plain HTTP)."""

    def __init__(self, fleet: FleetView, reachable: Callable[[], bool], probe: Callable[[], None], *,
                 host: str, port: int) -> None:
        self.fleet, self.reachable, self.probe = fleet, reachable, probe
        self.host, self.want_port = host, port
        self.port = 0
        self.asked = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> PeerServer:
        app = web.Application()
        app.router.add_get(REPORT_PATH, self._report)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.want_port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.want_port
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _report(self, request: web.Request) -> web.Response:
        self.asked += 1
        if request.query.get("probe") == "1":
            self.probe()
        return web.json_response(self.fleet.report(self.reachable()).to_json())


class PeerPoller:
    """Asks every peer for its report while ``wanted()`` says the agent needs them (see the module docstring)."""

    def __init__(self, fleet: FleetView, *, interval: float, timeout: float, ttl: float,
                 wanted: Callable[[], bool], monotonic: Callable[[], float],
                 on_request: Callable[[str, bool], None] = lambda peer, ok: None) -> None:
        self.fleet = fleet
        self.interval, self.timeout, self.ttl = interval, timeout, ttl
        self.wanted = wanted
        self.monotonic = monotonic
        #: called after every request with the peer's name and whether it gave a usable report (the metrics)
        self.on_request = on_request
        self.reports: dict[str, tuple[PeerReport, float]] = {}
        self.failures: dict[str, str] = {}

    def quorum(self) -> Quorum:
        return peer_quorum(me=self.fleet.me, fleet=self.fleet.fleet(), fenced=self.fleet.me_fenced(),
                           reports=self.reports, now=self.monotonic(), ttl=self.ttl)

    async def ask_all(self, session: aiohttp.ClientSession) -> None:
        peers = self.fleet.peers()
        for gone in set(self.reports) - set(peers):
            self.reports.pop(gone, None)
        await asyncio.gather(*(self._ask(session, name, endpoint) for name, endpoint in peers.items()))

    async def _ask(self, session: aiohttp.ClientSession, name: str, endpoint: str) -> None:
        asked = self.monotonic()
        url = f"http://{endpoint}{REPORT_PATH}"
        try:
            async with session.get(url, params={"from": self.fleet.me, "probe": "1"},
                                   timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}")
                report = parse_report(await resp.json(content_type=None))
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
            why = str(e) or type(e).__name__
            if self.failures.get(name) != why:
                log.info("peer %s (%s): no report: %s", name, endpoint, why)
            self.failures[name] = why
            self.on_request(name, False)
            return
        self.on_request(name, True)
        self.failures.pop(name, None)
        self.reports[name] = (report, asked)

    async def run(self, stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession() as session:
            while not stop.is_set():
                if self.wanted():
                    with contextlib.suppress(Exception):
                        await self.ask_all(session)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval)

