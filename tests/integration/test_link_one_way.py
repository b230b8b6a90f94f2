"""The link of ``flotilla up`` between the control plane and a member, with real sockets: a one-way partition
loses one direction's bytes silently and keeps connections open (the side waiting for an answer times out, nothing
is reset), the other direction still arrives, and healing aborts only the connections that lost bytes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from flotilla.local.links import Link

QUIET = 0.5  # seconds within which a forwarded byte arrives on loopback: nothing by then means it was lost


class Target:
    """A TCP server that records what it receives and answers every chunk with ``ok:<chunk>``."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.got = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> Target:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(1024):
                self.received += data
                self.got.set()
                writer.write(b"ok:" + data)
                await writer.drain()
        writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()


@pytest.fixture
async def link() -> AsyncIterator[tuple[Link, Target]]:
    target = await Target().start()
    lk = await Link("m", ("127.0.0.1", target.port)).start()
    try:
        yield lk, target
    finally:
        await lk.stop()
        await target.stop()


async def connect(lk: Link) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", lk.port)


async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.read(1024), QUIET * 4)


async def nothing_comes(reader: asyncio.StreamReader) -> None:
    """No answer, and no end of stream either: the connection is open and silent."""
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.read(1024), QUIET)


async def test_upstream_loss_delivers_nothing_to_the_target_and_keeps_the_connection_open(
        link: tuple[Link, Target]) -> None:
    lk, target = link
    reader, writer = await connect(lk)
    assert await ask(reader, writer, b"one") == b"ok:one"
    lk.drop("upstream")
    writer.write(b"two")
    await writer.drain()
    await nothing_comes(reader)
    assert bytes(target.received) == b"one", "bytes of the lost direction reached the target"
    fresh_reader, fresh_writer = await connect(lk)  # a new connection is accepted, and loses its bytes too
    fresh_writer.write(b"three")
    await fresh_writer.drain()
    await nothing_comes(fresh_reader)
    assert bytes(target.received) == b"one"
    assert not reader.at_eof() and not writer.is_closing()
    writer.close()
    fresh_writer.close()


async def test_downstream_loss_delivers_the_request_and_loses_the_answer(link: tuple[Link, Target]) -> None:
    lk, target = link
    lk.drop("downstream")
    reader, writer = await connect(lk)
    writer.write(b"hello")
    await writer.drain()
    await asyncio.wait_for(target.got.wait(), QUIET * 4)
    assert bytes(target.received) == b"hello"  # the request arrived and was answered ...
    await nothing_comes(reader)  # ... but the answer is lost, and nothing resets the connection
    assert not reader.at_eof()
    writer.close()


async def test_heal_aborts_the_connections_that_lost_bytes_and_keeps_the_others(link: tuple[Link, Target]) -> None:
    lk, _ = link
    idle_reader, idle_writer = await connect(lk)
    assert await ask(idle_reader, idle_writer, b"a") == b"ok:a"
    lossy_reader, lossy_writer = await connect(lk)
    assert await ask(lossy_reader, lossy_writer, b"b") == b"ok:b"
    lk.drop("downstream")
    lossy_writer.write(b"c")
    await lossy_writer.drain()
    await nothing_comes(lossy_reader)
    lk.heal()
    with contextlib.suppress(ConnectionError):  # a hole in the stream: the connection ends rather than resume
        assert await asyncio.wait_for(lossy_reader.read(1024), QUIET * 4) == b""
    assert await ask(idle_reader, idle_writer, b"d") == b"ok:d"  # a connection that lost nothing goes on
    reader, writer = await connect(lk)
    assert await ask(reader, writer, b"e") == b"ok:e"
    for w in (idle_writer, writer):
        w.close()


async def test_a_cut_after_a_one_way_loss_resets_and_an_unknown_direction_is_refused(
        link: tuple[Link, Target]) -> None:
    lk, _ = link
    with pytest.raises(ValueError, match="upstream, downstream"):
        lk.drop("sideways")
    assert lk.dropping is None
    reader, writer = await connect(lk)
    lk.drop("upstream")
    lk.cut()
    assert lk.dropping is None and lk.cut_off
    with contextlib.suppress(ConnectionError):
        assert await asyncio.wait_for(reader.read(1024), QUIET * 4) == b""
    lk.heal()
    reader, writer = await connect(lk)
    assert await ask(reader, writer, b"x") == b"ok:x"
    writer.close()


async def test_stopping_a_link_with_open_connections_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    target = await Target().start()
    lk = await Link("m", ("127.0.0.1", target.port)).start()
    reader, writer = await connect(lk)
    assert await ask(reader, writer, b"one") == b"ok:one"
    with caplog.at_level("ERROR", logger="asyncio"):
        await lk.stop()
        await asyncio.sleep(0.1)  # asyncio's server reports a handler that ended with an error from a callback
    await target.stop()
    writer.close()
    assert lk.connections == 0
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
