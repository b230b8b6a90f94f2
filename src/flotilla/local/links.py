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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)

__all__ = ["Link"]

_CHUNK = 64 * 1024


class Link:
    """A cuttable TCP forwarder from ``host:port`` (0: a free port; see :attr:`port`) to ``target``."""

    def __init__(self, name: str, target: tuple[str, int], *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.name = name
        self.target = target
        self.host = host
        self.want_port = port
        self.port = 0
        self.cut_off = False
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

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
        pipes = list(self._pipes)
        for task in pipes:
            task.cancel()
        for task in pipes:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def cut(self) -> None:
        """Partition: every connection through the link fails from now on (open ones are dropped at once)."""
        if not self.cut_off:
            log.warning("link %s (%s -> %s:%d) cut", self.name, self.url_host, *self.target)
        self.cut_off = True
        self._drop_all()

    def heal(self) -> None:
        if self.cut_off:
            log.warning("link %s healed", self.name)
        self.cut_off = False

    @property
    def connections(self) -> int:
        """Connection pairs currently forwarded."""
        return len(self._pipes)

    def _drop_all(self) -> None:
        for w in list(self._writers):
            _abort(w)
        self._writers.clear()

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
        self._writers.update((writer, up_writer))
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._pipes.discard(task)
            for w in (writer, up_writer):
                self._writers.discard(w)
                _abort(w) if self.cut_off else _close(w)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
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
