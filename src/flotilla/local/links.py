"""The network between the control plane and each member of ``flotilla up``, as something a fault can cut.

A :class:`Link` is a TCP forwarder on its own loopback port: every connection it accepts is piped, byte for byte,
to its target (TLS passes through untouched, so certificates and tokens work as on a direct connection). ``flotilla
up`` puts one link on each path that crosses between the control plane and a member:

* a Push member: the Cluster's ``apiEndpoint`` is the link in front of the member's API server (the
  controller-manager reaches the member through it; ``kubectl --context <member>`` goes to the member directly);
* a Pull member: the agent's control-plane kubeconfig names the link in front of the control plane's API server.

:meth:`Link.cut` (``flotilla sim fault <member> --mode partition``) drops every open connection through the link
(watches included) and resets each new one as soon as it is accepted, so clients on that path see their
connections fail, while both ends keep running. :meth:`Link.heal` (``--mode recover``) forwards again on the same
port.

:meth:`Link.drop` loses the bytes of one direction only, silently, as an asymmetric loss on a real network does:
connections stay open (new ones are accepted and connected through), the bytes flowing the other way are still
delivered, and nothing is reset, so a client waiting for an answer that was dropped times out instead of seeing
its connection fail. The two directions of a link are named by its geometry: ``upstream`` is from the client that
connected to the link towards its target, ``downstream`` back. Which one runs towards the member depends on who the
client is (:func:`link_direction`): the control plane for a Push member's link, the member's agent for a Pull
member's. A connection that lost bytes is broken for good (a byte stream with a hole in it), so :meth:`Link.heal`
aborts those, and forwards every other one as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Final

from flotilla.signals import cancel_all

log = logging.getLogger(__name__)

__all__ = ["DIRECTIONS", "Link", "link_direction"]

_CHUNK = 64 * 1024

UPSTREAM: Final = "upstream"  # from the client that connected to the link towards the link's target
DOWNSTREAM: Final = "downstream"  # from the target back to the client
DIRECTIONS: Final = (UPSTREAM, DOWNSTREAM)


def link_direction(*, member_is_client: bool, towards_member: bool) -> str:
    """The direction of a link that carries bytes towards the member (``towards_member``) or away from it.

    A Pull member's agent is the client of its link (the target is the control plane): bytes towards the member
    are the control plane's answers, ``downstream``. The control plane is the client of a Push member's link (the
    target is the member's API): bytes towards the member are the control plane's requests, ``upstream``."""
    return DOWNSTREAM if member_is_client == towards_member else UPSTREAM


@dataclass(eq=False)
class _Connection:
    """One forwarded connection: its two writers, and whether bytes of it were dropped."""

    client: asyncio.StreamWriter
    target: asyncio.StreamWriter
    damaged: bool = False


class Link:
    """A cuttable TCP forwarder from ``host:port`` (0: a free port; see :attr:`port`) to ``target``."""

    def __init__(self, name: str, target: tuple[str, int], *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.name = name
        self.target = target
        self.host = host
        self.want_port = port
        self.port = 0
        self.cut_off = False
        self.dropping: str | None = None  # the direction whose bytes are lost (None: none)
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._conns: set[_Connection] = set()

    @property
    def url_host(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> Link:
        self._server = await asyncio.start_server(self._accept, self.host, self.want_port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        self._drop_all()
        await cancel_all(self._pipes)

    def cut(self) -> None:
        """Partition: every connection through the link fails from now on (open ones are dropped at once)."""
        if not self.cut_off:
            log.warning("link %s (%s -> %s:%d) cut", self.name, self.url_host, *self.target)
        self.cut_off = True
        self.dropping = None
        self._drop_all()

    def drop(self, direction: str) -> None:
        """One-way loss: the bytes flowing in ``direction`` (``upstream`` or ``downstream``) are discarded from
        now on, on open connections and new ones alike, while the other direction is forwarded and no connection
        is reset."""
        if direction not in DIRECTIONS:
            raise ValueError(f"unknown link direction {direction!r}: use one of {', '.join(DIRECTIONS)}")
        if self.dropping != direction or self.cut_off:
            log.warning("link %s (%s -> %s:%d): %s bytes lost from now on", self.name, self.url_host,
                        *self.target, direction)
        self.cut_off = False
        self.dropping = direction

    def heal(self) -> None:
        if self.cut_off or self.dropping is not None:
            log.warning("link %s healed", self.name)
        self.cut_off = False
        self.dropping = None
        for conn in [c for c in self._conns if c.damaged]:  # a stream with a hole in it is of no use to anyone
            self._conns.discard(conn)
            _abort(conn.client)
            _abort(conn.target)

    @property
    def connections(self) -> int:
        """Connection pairs currently forwarded."""
        return len(self._pipes)

    def _drop_all(self) -> None:
        for conn in list(self._conns):
            _abort(conn.client)
            _abort(conn.target)
        self._conns.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)  # the far end is not there: the client sees its connection fail, as a direct one would
            return
        if self.cut_off:  # cut while connecting
            _abort(writer)
            _abort(up_writer)
            return
        conn = _Connection(writer, up_writer)
        self._conns.add(conn)
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            await asyncio.gather(self._pipe(conn, reader, up_writer, UPSTREAM),
                                 self._pipe(conn, up_reader, writer, DOWNSTREAM))
        except asyncio.CancelledError:
            # the link stops (flotilla up is stopping): end this connection's handler quietly; asyncio's server
            # would otherwise log the cancelled handler as an error
            conn.damaged = True
        finally:
            self._pipes.discard(task)
            self._conns.discard(conn)
            for w in (writer, up_writer):
                _abort(w) if self.cut_off or conn.damaged else _close(w)

    async def _pipe(self, conn: _Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    direction: str) -> None:
        try:
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    break
                if self.dropping == direction:
                    conn.damaged = True  # lost on the way: the other end never hears of it
                    continue
                writer.write(data)
                await writer.drain()
            if self.dropping == direction:
                conn.damaged = True  # the end of the stream is lost too: the other end keeps waiting
                return
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.transport.abort()


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
