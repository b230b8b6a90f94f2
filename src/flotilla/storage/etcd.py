"""The etcd v3 store: etcd's gRPC API (the KV and Watch services) through grpcio's asyncio API.

The message and service definitions are the ones in :mod:`flotilla.storage.etcdpb` (etcd's own wire format,
compiled into Python modules that are part of the package).

Layout and revisions are etcd's own, as kube-apiserver uses them: every key is stored verbatim under
the store's ``prefix`` (so ``/registry/pods/default/web`` is the etcd key
``<prefix>/registry/pods/default/web``), values are the raw bytes, and every revision this store
returns (``mod_revision``, ``create_revision``, list and watch revisions) is the etcd revision.
Several EtcdStore instances - one per API server - may share one etcd cluster.

Notes and limits:

* ``host:port`` (or ``http://host:port``) endpoints, or with :class:`EtcdTLS` (the ``etcds://`` storage URL)
  TLS ones (``https://host:port``): the server certificate is checked against ``cafile`` (else the system's CAs)
  and the host name, and ``certfile``/``keyfile`` are the client certificate etcd's ``--client-cert-auth`` asks
  for. No user/password auth.
* One gRPC channel (one HTTP/2 connection) per endpoint carries every request and watch of the store.
* Failover: each request starts at the endpoint that answered last and moves on to the next one when the
  connection cannot be made (within ``connect_timeout``). Reads also move on when a connection breaks
  mid-request or when etcd answers "unavailable"; a write whose connection broke after it was sent is ambiguous
  (it may have been applied) and raises :class:`EtcdUnavailableError` instead of being retried. When no endpoint
  is connected, a request waits a moment (:data:`RECONNECT_WAIT`) for one to come back before it fails: a member
  that restarted is used again within about a second.
* ``compacted_revision()``: etcd has no API that reports it. The store remembers the compactions it
  performed and the compact revisions etcd reports to its watches; when that is stale (another
  client compacted) it finds the exact value by probing ranges at old revisions (a binary search,
  about log2(current revision) cheap requests, only when the remembered value is out of date).
* ``peek``: the newest value of each key the store has seen (its own writes and reads, its watches' events; at
  most :data:`PEEK_CACHE_SIZE` keys), so the API server starts a compare-and-swap write without a read first,
  as kube-apiserver does from its watch cache. A stale value only costs a failed compare and a read; see
  :meth:`flotilla.storage.base.Store.peek` for the rule that keeps it safe.
* ``get``: the gets that tasks issue in one turn of the event loop are read by one transaction of ranges (at
  most :data:`MAX_BATCHED_GETS`): one round trip instead of one each, still linearizable.
* A watch is one gRPC Watch stream on the current endpoint's connection, read by a task of its own into a
  queue (bounded by :data:`MAX_BACKLOG`), created with etcd's "require a leader" flag: a member that loses its
  cluster's leader ends the stream. When the stream ends (member down, no leader) the iterator raises
  :class:`~flotilla.storage.base.WatchClosedError` and the caller re-watches from the last revision it saw (on
  another endpoint). HTTP/2 keepalive pings find a peer that vanished without closing the connection within
  about :data:`KEEPALIVE_SECONDS` plus :data:`KEEPALIVE_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# gRPC's C core logs every failed TLS handshake and every fork of a process that uses it at INFO level on
# stderr; the store reports those failures itself.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402
from grpc import aio  # noqa: E402

from flotilla.storage.base import (  # noqa: E402
    CompactedError,
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    PollableWatcher,
    StorageError,
    Store,
    WatchClosedError,
    Watcher,
    WatchEvent,
)
from flotilla.storage.etcdpb import method, rpc_pb2  # noqa: E402
from flotilla.storage.fanout import DEFAULT_MAX_BACKLOG  # noqa: E402

__all__ = ["EtcdError", "EtcdStore", "EtcdTLS", "EtcdUnavailableError"]

_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"
_NOT_CONNECTED = "failed to connect to all addresses"  # gRPC's words for a request that never left the client
_NO_LEADER = "no leader"

#: gets read in one transaction at most (etcd's --max-txn-ops is 128 by default)
MAX_BATCHED_GETS = 64
#: keys whose newest known value the store keeps for :meth:`EtcdStore.peek` (least recently written dropped first)
PEEK_CACHE_SIZE = 20_000
#: events a watch queues for a consumer that does not take them before it ends the watch (as the other stores do)
MAX_BACKLOG = DEFAULT_MAX_BACKLOG
#: seconds a request waits for a connection to come back when no endpoint is connected
RECONNECT_WAIT = 1.5
KEEPALIVE_SECONDS = 10
KEEPALIVE_TIMEOUT_SECONDS = 5
#: metadata asking etcd to end a watch stream when the member it is on has no leader
_REQUIRE_LEADER = (("hasleader", "true"),)

_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
_DEADLINE = grpc.StatusCode.DEADLINE_EXCEEDED

_CREATE = rpc_pb2.Compare.CREATE
_MOD = rpc_pb2.Compare.MOD
_EQUAL = rpc_pb2.Compare.EQUAL
_GREATER = rpc_pb2.Compare.GREATER
_DELETE_EVENT = rpc_pb2.Event.DELETE


class EtcdError(StorageError):
    """etcd rejected a request for a reason the Store interface has no error for (``code``: the gRPC status)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class EtcdUnavailableError(EtcdError):
    """No endpoint could serve the request (or a write's outcome is unknown after a broken connection)."""


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix`` (etcd's range_end)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"  # no upper bound: every key >= key


@dataclass(frozen=True)
class EtcdTLS:
    """TLS to etcd, with kube-apiserver's flags: ``cafile`` (``--etcd-cafile``: the CA that signed etcd's serving
    certificate; None: the system's CAs), ``certfile`` and ``keyfile`` (``--etcd-certfile``/``--etcd-keyfile``:
    the client certificate, for an etcd started with ``--client-cert-auth``; both or neither)."""

    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None

    def __post_init__(self) -> None:
        if bool(self.certfile) != bool(self.keyfile):
            given, missing = (("--etcd-certfile", "--etcd-keyfile") if self.certfile
                              else ("--etcd-keyfile", "--etcd-certfile"))
            raise ValueError(f"{given} needs {missing} too: the client certificate and its key go together")
        for flag, path in (("--etcd-cafile", self.cafile), ("--etcd-certfile", self.certfile),
                           ("--etcd-keyfile", self.keyfile)):
            if path and not Path(path).is_file():
                raise ValueError(f"{flag} {path}: no such file")

    @property
    def given(self) -> bool:
        """Whether any file is set."""
        return bool(self.cafile or self.certfile or self.keyfile)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that verifies etcd's certificate (and host name) and presents the client
        certificate; ValueError naming the flag when a file is not what it should be."""
        try:
            ctx = ssl.create_default_context(cafile=self.cafile or None)
        except (ssl.SSLError, OSError) as e:
            raise ValueError(f"--etcd-cafile {self.cafile}: not a PEM CA certificate ({e})") from e
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.certfile and self.keyfile:
            try:
                ctx.load_cert_chain(self.certfile, self.keyfile)
            except (ssl.SSLError, OSError) as e:
                raise ValueError(f"--etcd-certfile {self.certfile} / --etcd-keyfile {self.keyfile}: not a PEM "
                                 f"certificate and its key ({e})") from e
        return ctx

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """gRPC credentials with the same files (checked first, as :meth:`ssl_context` does). Without ``cafile``
        the trusted CAs are OpenSSL's default bundle of this system, else gRPC's own."""
        self.ssl_context()
        roots: bytes | None = None
        try:
            if self.cafile:
                roots = Path(self.cafile).read_bytes()
            else:
                system = ssl.get_default_verify_paths().cafile
                if system and Path(system).is_file():
                    roots = Path(system).read_bytes()
            key = Path(self.keyfile).read_bytes() if self.keyfile else None
            chain = Path(self.certfile).read_bytes() if self.certfile else None
        except OSError as e:
            raise ValueError(f"cannot read an etcd TLS file: {e}") from e
        return grpc.ssl_channel_credentials(root_certificates=roots, private_key=key, certificate_chain=chain)


def _describe(exc: BaseException | None) -> str:
    """An error as a reader wants it: for gRPC its status and details, else its type and message."""
    if exc is None:
        return "no answer"
    if isinstance(exc, aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _endpoint_url(endpoint: str, secure: bool = False) -> str:
    endpoint = endpoint.strip().rstrip("/")
    if endpoint.startswith("https://"):
        if not secure:
            raise ValueError(f"{endpoint}: an https etcd endpoint needs TLS settings (an etcds:// storage URL)")
        return endpoint
    if endpoint.startswith("http://"):
        if secure:
            raise ValueError(f"{endpoint}: a plain http endpoint in a TLS etcd cluster (etcds://)")
        return endpoint
    return ("https://" if secure else "http://") + endpoint


def _target(url: str) -> str:
    """The gRPC target (``host:port``) of an endpoint URL."""
    target = url.partition("://")[2]
    if not target or "/" in target:
        raise ValueError(f"{url}: an etcd endpoint is host:port")
    return target


class _Endpoint:
    """One etcd member: its channel and the stubs on it."""

    __slots__ = ("channel", "compact", "range", "txn", "url", "watch")

    def __init__(self, url: str, channel: aio.Channel) -> None:
        self.url = url
        self.channel = channel
        self.range = method(channel, "KV", "Range")
        self.txn = method(channel, "KV", "Txn")
        self.compact = method(channel, "KV", "Compact")
        self.watch = method(channel, "Watch", "Watch")


_Method = Callable[[_Endpoint], Any]


def _range_of(ep: _Endpoint) -> Any:
    return ep.range


def _txn_of(ep: _Endpoint) -> Any:
    return ep.txn


def _compact_of(ep: _Endpoint) -> Any:
    return ep.compact


class EtcdStore(Store):
    """A :class:`Store` backed by an etcd v3 cluster."""

    def __init__(
        self,
        endpoints: list[_Endpoint],
        prefix: str,
        *,
        request_timeout: float,
    ) -> None:
        self._endpoints = endpoints
        self._urls = [e.url for e in endpoints]
        self._prefix = prefix
        self._pb = prefix.encode()
        self._plen = len(self._pb)
        self._timeout = request_timeout
        self._current = 0  # index of the endpoint that answered last
        self._compacted = 0  # newest compacted revision known to this client
        self._watchers: set[_EtcdWatcher] = set()
        self._closed = False
        self._gets: list[tuple[Any, asyncio.Future[Any] | None]] | None = None  # the batch of gets of this turn
        self.get_batches = 0  # round trips that gets took
        self.batched_gets = 0  # gets answered by them
        #: the newest value seen of each key (its own writes and reads, its watches' events), for peek
        self._latest: OrderedDict[str, KeyValue] = OrderedDict()

    @classmethod
    async def open(
        cls,
        endpoints: list[str],
        *,
        prefix: str = "",
        request_timeout: float = 30.0,
        connect_timeout: float = 3.0,
        tls: EtcdTLS | None = None,
    ) -> EtcdStore:
        """Connect to an etcd cluster given as ``host:port`` (or ``http://host:port``) endpoints; with ``tls``,
        over TLS (``host:port`` or ``https://host:port``).

        Fails with :class:`EtcdUnavailableError` if no endpoint answers (a TLS handshake that fails included:
        the message says why), with ValueError for endpoints or TLS files that are not usable.
        """
        if not endpoints:
            raise ValueError("EtcdStore needs at least one endpoint")
        secure = tls is not None
        urls = [_endpoint_url(e, secure) for e in endpoints]
        targets = [_target(u) for u in urls]  # bad endpoints fail before any channel exists
        credentials = tls.channel_credentials() if tls is not None else None
        options = [
            ("grpc.max_receive_message_length", -1),  # a LIST or a watch replay can be far over gRPC's 4 MiB
            ("grpc.max_send_message_length", -1),  # etcd enforces its own --max-request-bytes
            # connect attempts: each may take connect_timeout; a member that comes back is retried within 1 s
            ("grpc.min_reconnect_backoff_ms", max(1, int(connect_timeout * 1000))),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            ("grpc.keepalive_time_ms", KEEPALIVE_SECONDS * 1000),
            ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_SECONDS * 1000),
            ("grpc.http2.max_pings_without_data", 0),
            # no transparent retries: the store fails over itself, and the retry machinery costs every call
            ("grpc.enable_retries", 0),
            # a store of its own connections: closing one store does not touch another's (tests, HA replicas)
            ("grpc.use_local_subchannel_pool", 1),
        ]
        eps = []
        for url, target in zip(urls, targets, strict=True):
            channel = (aio.secure_channel(target, credentials, options=options) if credentials is not None
                       else aio.insecure_channel(target, options=options))
            eps.append(_Endpoint(url, channel))
        store = cls(eps, prefix, request_timeout=request_timeout)
        try:
            await store.current_revision()
        except BaseException:
            await store.close()
            raise
        return store

    # ------------------------------------------------------------------ transport

    async def _call(self, method: _Method, request: Any, *, idempotent: bool, what: str) -> Any:
        """One unary request, failing over between endpoints as the module's notes say."""
        eps = self._endpoints
        n = len(eps)
        start = self._current
        last: BaseException | None = None
        for attempt in range(n):
            idx = (start + attempt) % n
            try:
                resp = await method(eps[idx])(request, timeout=self._timeout)
            except aio.AioRpcError as exc:
                last = self._failed(exc, idx, idempotent=idempotent, what=what)
                continue
            self._current = idx
            return resp
        # No endpoint was connected (or, for a read, none answered). A member that just came back may still be
        # waiting for its channel's next connect attempt: give that a moment, then try the first one that is up.
        idx = await self._wait_connected(RECONNECT_WAIT)
        if idx is not None:
            try:
                resp = await method(eps[idx])(request, timeout=self._timeout)
            except aio.AioRpcError as exc:
                last = self._failed(exc, idx, idempotent=idempotent, what=what)
            else:
                self._current = idx
                return resp
        self._current = (start + 1) % n
        raise EtcdUnavailableError(f"no etcd endpoint of {self._urls} could serve {what}: {_describe(last)}") from last

    def _failed(self, exc: aio.AioRpcError, idx: int, *, idempotent: bool, what: str) -> aio.AioRpcError:
        """Return ``exc`` when the request may go on to the next endpoint, else raise what it means."""
        code = exc.code()
        details = exc.details() or ""
        if code is _UNAVAILABLE or code is _DEADLINE:
            if idempotent or details.startswith(_NOT_CONNECTED) or _NO_LEADER in details:
                return exc
            self._current = (idx + 1) % len(self._endpoints)
            raise EtcdUnavailableError(
                f"etcd {self._urls[idx]}: {what} got no answer ({_describe(exc)}); the write may or may not "
                f"have been applied"
            ) from exc
        self._current = idx
        raise EtcdError(f"etcd {self._urls[idx]}: {what}: {details or code.name}", code.value[0]) from None

    async def _wait_connected(self, within: float) -> int | None:
        """The index of the first endpoint whose channel gets connected within ``within`` seconds, or None."""
        waits = {asyncio.ensure_future(ep.channel.channel_ready()): i for i, ep in enumerate(self._endpoints)}
        try:
            done, _ = await asyncio.wait(waits, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        for task in done:
            if not task.cancelled() and task.exception() is None:
                return waits[task]
        return None

    # ------------------------------------------------------------------ helpers

    def _key(self, key: str) -> bytes:
        return self._pb + key.encode()

    def _kv(self, kv: Any) -> KeyValue:
        return KeyValue(kv.key[self._plen :].decode(), kv.value, kv.create_revision, kv.mod_revision)

    async def _range(self, request: Any) -> Any:
        """A range request, mapping etcd's compacted/future revision errors."""
        try:
            return await self._call(_range_of, request, idempotent=True, what="range")
        except EtcdError as exc:
            text = str(exc)
            if _COMPACTED in text:
                raise CompactedError(request.revision, await self._discover_compacted(request.revision + 1)) from None
            if _FUTURE in text:
                raise FutureRevisionError(request.revision, await self.current_revision()) from None
            raise

    async def _probe(self, revision: int) -> bool:
        """True if reads at ``revision`` are still possible (it is not older than the compacted one)."""
        try:
            await self._call(_range_of, rpc_pb2.RangeRequest(key=self._pb or b"\x00", revision=revision,
                                                              count_only=True), idempotent=True, what="range")
        except EtcdError as exc:
            if _COMPACTED in str(exc):
                return False
            if _FUTURE in str(exc):
                return True
            raise
        return True

    async def _discover_compacted(self, low: int = 0) -> int:
        """etcd's compacted revision, known to be at least ``low`` (and at least what we knew before)."""
        known = max(self._compacted, 1)
        if low <= known and await self._probe(known):
            return self._compacted  # nothing newer was compacted since we last knew
        # Binary search for the smallest readable revision; that is etcd's compacted revision.
        lo = max(known, low)  # lo may be unreadable
        hi = await self.current_revision()  # the current revision is always readable
        while lo < hi:
            mid = (lo + hi) // 2
            if await self._probe(mid):
                hi = mid
            else:
                lo = mid + 1
        self._compacted = max(self._compacted, hi)
        return self._compacted

    # ------------------------------------------------------------------ Store API

    def peek(self, key: str) -> KeyValue | None:
        """The newest value of ``key`` this store has seen: written or read by it, or delivered to one of its
        watches (so it is current for every prefix someone watches, as kube-apiserver's watch cache is). It may
        be stale; see :meth:`Store.peek`."""
        return self._latest.get(key)

    def _saw(self, kv: KeyValue) -> None:
        latest = self._latest
        known = latest.get(kv.key)
        if known is not None:
            if known.mod_revision >= kv.mod_revision:
                return
            latest.move_to_end(kv.key)
        latest[kv.key] = kv
        if len(latest) > PEEK_CACHE_SIZE:
            latest.popitem(last=False)

    def _saw_deleted(self, key: str, revision: int) -> None:
        known = self._latest.get(key)
        if known is not None and known.mod_revision < revision:
            del self._latest[key]

    async def create(self, key: str, value: bytes) -> int:
        k = self._pb + key.encode()
        resp = await self._call(_txn_of, rpc_pb2.TxnRequest(
            compare=[rpc_pb2.Compare(key=k, target=_CREATE, result=_EQUAL, create_revision=0)],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=k, value=value))],
        ), idempotent=False, what="create")
        if not resp.succeeded:
            raise KeyExistsError(key)
        revision = resp.header.revision
        self._saw(KeyValue(key, value, revision, revision))
        return revision

    async def get(self, key: str) -> KeyValue | None:
        """The key's value, read linearizably. Gets that tasks issue in the same turn of the event loop go out
        as one transaction of ranges (one round trip, one revision) instead of one request each."""
        request = rpc_pb2.RangeRequest(key=self._pb + key.encode())
        batch = self._gets
        if batch is not None and len(batch) < MAX_BATCHED_GETS:  # another get of this turn leads a batch
            waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            batch.append((request, waiter))
            kvs = await waiter
        else:
            batch = self._gets = [(request, None)]
            try:
                await asyncio.sleep(0)  # the gets of the other tasks that run in this turn join the batch
            except BaseException:
                if self._gets is batch:
                    self._gets = None
                if len(batch) > 1:  # cancelled: the others still get their answers
                    asyncio.get_running_loop().create_task(self._get_batch(batch[1:]))
                raise
            if self._gets is batch:
                self._gets = None
            kvs = await self._get_batch(batch)
        if not kvs:
            return None
        kv = self._kv(kvs[0])
        self._saw(kv)
        return kv

    async def _get_batch(self, batch: list[tuple[Any, asyncio.Future[Any] | None]]) -> Any:
        """Read the ranges of ``batch``, all in one transaction; hand each waiter its ``kvs`` (or the error). An
        entry without a waiter is the caller's own: its ``kvs`` is returned, its error raised."""
        self.get_batches += 1
        self.batched_gets += len(batch)
        try:
            if len(batch) == 1:
                responses = [await self._call(_range_of, batch[0][0], idempotent=True, what="get")]
            else:
                resp = await self._call(_txn_of, rpc_pb2.TxnRequest(
                    success=[rpc_pb2.RequestOp(request_range=request) for request, _ in batch]),
                    idempotent=True, what="get")
                responses = [op.response_range for op in resp.responses]
        except BaseException as exc:
            for _, waiter in batch:
                if waiter is not None and not waiter.done():
                    waiter.set_exception(exc)
            if batch[0][1] is None:
                raise
            return None
        own = None
        for (_, waiter), response in zip(batch, responses, strict=True):
            if waiter is None:
                own = response.kvs
            elif not waiter.done():
                waiter.set_result(response.kvs)
        return own

    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str = "", limit: int = 0
    ) -> ListResult:
        full = self._key(prefix)
        end = _prefix_end(full)
        start = full or b"\x00"
        if start_after:
            after = self._key(start_after) + b"\x00"
            if after > start:
                start = after
        if end != b"\x00" and start >= end:
            # Nothing can match (start_after is past the prefix); still validate the revision.
            resp = await self._range(rpc_pb2.RangeRequest(key=full or b"\x00", count_only=True,
                                                          revision=max(revision, 0)))
            return ListResult([], revision or resp.header.revision, False)
        resp = await self._range(rpc_pb2.RangeRequest(key=start, range_end=end, revision=max(revision, 0),
                                                      limit=max(limit, 0)))
        plen = self._plen
        items = [KeyValue(kv.key[plen:].decode(), kv.value, kv.create_revision, kv.mod_revision) for kv in resp.kvs]
        return ListResult(items, revision or resp.header.revision, resp.more)

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        k = self._pb + key.encode()
        resp = await self._call(_txn_of, rpc_pb2.TxnRequest(
            compare=[
                rpc_pb2.Compare(key=k, target=_CREATE, result=_GREATER, create_revision=0),
                rpc_pb2.Compare(key=k, target=_MOD, result=_EQUAL, mod_revision=expected_revision),
            ],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=k, value=value))],
            failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=k))],
        ), idempotent=False, what="update")
        if resp.succeeded:
            revision = resp.header.revision
            known = self._latest.get(key)
            if known is not None and known.mod_revision == expected_revision:
                self._saw(KeyValue(key, value, known.create_revision, revision))
            return revision
        current = self._failure_kv(resp)
        if current is None:
            self._saw_deleted(key, resp.header.revision)
            raise KeyNotFoundError(key)
        self._saw(current)
        raise ConflictError(key, expected_revision, current.mod_revision)

    async def delete(self, key: str, expected_revision: int = 0) -> tuple[int, KeyValue]:
        k = self._pb + key.encode()
        compare = [rpc_pb2.Compare(key=k, target=_CREATE, result=_GREATER, create_revision=0)]
        if expected_revision:
            compare.append(rpc_pb2.Compare(key=k, target=_MOD, result=_EQUAL, mod_revision=expected_revision))
        resp = await self._call(_txn_of, rpc_pb2.TxnRequest(
            compare=compare,
            success=[rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=k, prev_kv=True))],
            failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=k))],
        ), idempotent=False, what="delete")
        if resp.succeeded:
            prev = resp.responses[0].response_delete_range.prev_kvs if resp.responses else ()
            if not prev:  # cannot happen: the compare proved the key existed in this very txn
                raise EtcdError(f"etcd deleted {key} but returned no previous value")
            self._saw_deleted(key, resp.header.revision)
            return resp.header.revision, self._kv(prev[0])
        current = self._failure_kv(resp)
        if current is None:
            raise KeyNotFoundError(key)
        raise ConflictError(key, expected_revision, current.mod_revision)

    def _failure_kv(self, resp: Any) -> KeyValue | None:
        if not resp.responses:
            return None
        kvs = resp.responses[0].response_range.kvs
        return self._kv(kvs[0]) if kvs else None

    async def watch(self, prefix: str, after_revision: int | None = None) -> Watcher:
        full = self._key(prefix)
        request = rpc_pb2.WatchCreateRequest(key=full or b"\x00", range_end=_prefix_end(full), prev_kv=True,
                                             progress_notify=True)
        if after_revision is not None:
            if after_revision < self._compacted:
                raise CompactedError(after_revision, self._compacted)
            # etcd only reports a too-old start revision asynchronously (up to ~100 ms later, on the
            # stream); a read at ``after_revision`` fails at once exactly when history after it is gone.
            if not await self._probe(max(after_revision, 1)):
                raise CompactedError(after_revision, await self._discover_compacted(after_revision + 1))
            request.start_revision = after_revision + 1
        create = rpc_pb2.WatchRequest(create_request=request)
        eps = self._endpoints
        n = len(eps)
        start = self._current
        last: BaseException | None = None
        for attempt in range(n + 1):
            if attempt < n:
                idx = (start + attempt) % n
            else:  # none was connected: wait a moment for one to come back, as requests do
                found = await self._wait_connected(RECONNECT_WAIT)
                if found is None:
                    break
                idx = found
            call = eps[idx].watch(metadata=_REQUIRE_LEADER)
            watcher = _EtcdWatcher(self, call, prefix, after_revision)
            try:
                await call.write(create)
                await watcher._start(10.0)
            except (aio.AioRpcError, asyncio.InvalidStateError, WatchClosedError, TimeoutError) as exc:
                await watcher.close()
                last = exc
                continue
            except BaseException:
                await watcher.close()
                raise
            self._current = idx
            self._watchers.add(watcher)
            return watcher
        raise EtcdUnavailableError(f"no etcd endpoint of {self._urls} accepted a watch: {_describe(last)}") from last

    async def current_revision(self) -> int:
        resp = await self._call(_range_of, rpc_pb2.RangeRequest(key=self._pb or b"\x00", count_only=True),
                                idempotent=True, what="range")
        return resp.header.revision

    async def compacted_revision(self) -> int:
        return await self._discover_compacted()

    async def compact(self, revision: int) -> None:
        """etcd's compaction (physical: returns once the history is gone). Like etcd, compacting at or
        below the compacted revision raises CompactedError and past the current one FutureRevisionError."""
        if revision <= self._compacted:
            raise CompactedError(revision, self._compacted)
        try:
            await self._call(_compact_of, rpc_pb2.CompactionRequest(revision=revision, physical=True),
                             idempotent=True, what="compaction")
        except EtcdError as exc:
            if _COMPACTED in str(exc):  # another client compacted at or past ``revision``
                raise CompactedError(revision, await self._discover_compacted(revision)) from None
            if _FUTURE in str(exc):
                raise FutureRevisionError(revision, await self.current_revision()) from None
            raise
        self._compacted = max(self._compacted, revision)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for watcher in list(self._watchers):
            await watcher.close()
        for ep in self._endpoints:
            await ep.channel.close()

    def _forget(self, watcher: _EtcdWatcher) -> None:
        self._watchers.discard(watcher)


class _EtcdWatcher(PollableWatcher):
    """One etcd watch: one gRPC Watch stream, read by a task of its own into a queue of events.

    Read it as an async iterator, or without a task per event through ``poll`` (the next event, or None),
    ``wakeup`` (a future done once ``poll`` has something, or the watch ended) and ``finished`` (nothing more will
    come), as the API server's watch streams do. A consumer cancelled while it waits loses nothing, and leaving
    an ``async for`` early keeps the watch open (iterate it again to go on). An error (the stream broke, etcd
    ended or canceled the watch, history was compacted, the consumer fell more than :data:`MAX_BACKLOG` events
    behind) is raised once, after the events before it, and ends the watch. Not for several concurrent consumers.
    """

    def __init__(self, store: EtcdStore, call: Any, prefix: str, after_revision: int | None) -> None:
        self._store = store
        self._call = call
        self._prefix = prefix
        self._after = after_revision
        self._events: deque[WatchEvent] = deque()
        self._error: StorageError | None = None  # raised by poll once the events before it are taken
        self._ended = False  # the stream is over: nothing more will be queued
        self._closed = False  # closed, or its error was handed out
        self._waiter: asyncio.Future[None] | None = None
        self._progress: int | None = None  # every event up to this revision has been received
        self._task: asyncio.Task[None] | None = None

    async def _start(self, within: float) -> None:
        """Wait (at most ``within`` seconds) for etcd to confirm the watch, then read the stream in a task."""
        msg = await asyncio.wait_for(self._call.read(), within)
        if msg is aio.EOF:
            raise WatchClosedError("etcd closed the watch stream before confirming it")
        self._check(msg)
        if not msg.created:
            raise WatchClosedError(f"unexpected first watch message: {msg}")
        self._task = asyncio.get_running_loop().create_task(self._pump())

    def _check(self, msg: Any) -> None:
        """Raise for compaction and cancellation."""
        compact = msg.compact_revision
        if compact:
            self._store._compacted = max(self._store._compacted, compact)
            raise CompactedError(self._after if self._after is not None else 0, compact)
        if msg.canceled:
            raise WatchClosedError(f"etcd canceled the watch: {msg.cancel_reason or 'no reason given'}")

    def _convert(self, msg: Any) -> list[WatchEvent]:
        plen = self._store._plen
        out = []
        for ev in msg.events:
            kv = ev.kv
            key = kv.key[plen:].decode()
            revision = kv.mod_revision
            has_prev = ev.HasField("prev_kv")
            if ev.type == _DELETE_EVENT:
                self._store._saw_deleted(key, revision)
                if has_prev:
                    prev = ev.prev_kv
                    out.append(WatchEvent("DELETE", key, prev.value, revision, prev.create_revision, prev.value))
                else:
                    out.append(WatchEvent("DELETE", key, b"", revision, 0, b""))
            else:
                create_revision = kv.create_revision
                if create_revision == revision:
                    prev_value = None  # a create (even if etcd had an older, deleted incarnation)
                elif has_prev:
                    prev_value = ev.prev_kv.value
                else:
                    prev_value = b""  # an update whose previous value was compacted away
                out.append(WatchEvent("PUT", key, kv.value, revision, create_revision, prev_value))
                self._store._saw(KeyValue(key, kv.value, create_revision, revision))
        return out

    async def _pump(self) -> None:
        call = self._call
        queue = self._events
        try:
            while True:
                msg = await call.read()
                if msg is aio.EOF:
                    raise WatchClosedError("etcd closed the watch stream")
                self._check(msg)
                if msg.events:
                    events = self._convert(msg)
                    queue.extend(events)
                    self._progress = events[-1].revision
                    if len(queue) > MAX_BACKLOG:
                        raise WatchClosedError(f"watch on {self._prefix!r} fell more than {MAX_BACKLOG} events "
                                               f"behind; re-list and re-watch")
                    self._wake()
                elif not msg.created and msg.header.revision:
                    # a progress notification; etcd stamps event batches with its current revision, not theirs
                    self._progress = msg.header.revision
        except aio.AioRpcError as exc:
            if not self._closed:
                self._error = WatchClosedError(f"etcd watch stream broke: {_describe(exc)}")
        except StorageError as exc:  # WatchClosedError, CompactedError
            self._error = exc
        except Exception as exc:  # e.g. a key under the prefix that is not UTF-8
            self._error = WatchClosedError(f"etcd watch ended: {_describe(exc)}")
        finally:
            self._ended = True
            call.cancel()
            self._store._forget(self)
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def poll(self) -> WatchEvent | None:
        """The next event if one is here, else None; raises the watch's error (once) after the events before it."""
        if self._events:
            return self._events.popleft()
        error = self._error
        if error is not None:
            self._error = None
            self._closed = True
            raise error
        return None

    @property
    def finished(self) -> bool:
        """Nothing more will come (an error still to raise counts as something)."""
        return not self._events and self._error is None and (self._ended or self._closed)

    def wakeup(self) -> asyncio.Future[None]:
        """A future done once ``poll`` may have something (or the watch ended); cancelling it loses nothing."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            if self._events or self._error is not None or self._ended or self._closed:
                waiter.set_result(None)
        return waiter

    def progress_revision(self) -> int | None:
        return None if self._events or self._ended or self._closed else self._progress

    async def close(self) -> None:
        task = self._task
        self.discard()
        if task is not None and not task.done():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def discard(self) -> None:
        """``close`` without waiting for the reading task to end."""
        if self._closed and self._ended:
            return
        self._closed = True
        self._error = None
        self._events.clear()
        self._call.cancel()
        if self._task is not None:
            self._task.cancel()
        self._store._forget(self)
        self._wake()
