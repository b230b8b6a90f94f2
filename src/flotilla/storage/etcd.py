"""The etcd v3 store: talks to etcd's JSON gRPC gateway (``/v3/...``) over HTTP with aiohttp.

Layout and revisions are etcd's own, as kube-apiserver uses them: every key is stored verbatim under
the store's ``prefix`` (so ``/registry/pods/default/web`` is the etcd key
``<prefix>/registry/pods/default/web``), values are the raw bytes, and every revision this store
returns (``mod_revision``, ``create_revision``, list and watch revisions) is the etcd revision.
Several EtcdStore instances - one per API server - may share one etcd cluster.

Notes and limits:

* ``http://`` endpoints, or ``https://`` ones with :class:`EtcdTLS` (the ``etcds://`` storage URL): the server
  certificate is checked against ``cafile`` (else the system's CAs) and ``certfile``/``keyfile`` are the client
  certificate etcd's ``--client-cert-auth`` asks for. No user/password auth.
* Failover: each request starts at the endpoint that answered last and moves on to the next one
  when the connection cannot be made. Reads also move on when a connection breaks mid-request or
  when etcd answers "unavailable"; a write whose connection broke after it was sent is ambiguous
  (it may have been applied) and raises :class:`EtcdUnavailableError` instead of being retried.
* ``compacted_revision()``: etcd has no API that reports it. The store remembers the compactions it
  performed and the compact revisions etcd reports to its watches; when that is stale (another
  client compacted) it finds the exact value by probing ranges at old revisions (a binary search,
  about log2(current revision) cheap requests, only when the remembered value is out of date).
* A watch is one streaming HTTP request. If the stream breaks (member down) the iterator raises
  :class:`~flotilla.storage.base.WatchClosedError`; the caller re-watches from the last revision it
  saw (on another endpoint). A silently dead peer (no FIN) is not detected.
"""

from __future__ import annotations

import asyncio
import ssl
from base64 import b64decode, b64encode
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from flotilla.storage import base

__all__ = ["EtcdError", "EtcdStore", "EtcdTLS", "EtcdUnavailableError"]

_JSON = {"Content-Type": "application/json"}
_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"
_GRPC_UNAVAILABLE = 14


class EtcdError(base.StorageError):
    """etcd rejected a request for a reason the Store interface has no error for."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class EtcdUnavailableError(EtcdError):
    """No endpoint could serve the request (or a write's outcome is unknown after a broken connection)."""


def _b64(data: bytes) -> str:
    return b64encode(data).decode("ascii")


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


def _describe(exc: BaseException | None) -> str:
    """An error as a reader wants it: its type and its message (a TLS failure says which check failed)."""
    if exc is None:
        return "no answer"
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


class EtcdStore(base.Store):
    """A :class:`Store` backed by an etcd v3 cluster."""

    def __init__(
        self,
        endpoints: list[str],
        prefix: str,
        session: aiohttp.ClientSession,
        watch_session: aiohttp.ClientSession,
        *,
        secure: bool = False,
    ) -> None:
        self._urls = [_endpoint_url(e, secure) for e in endpoints]
        self._prefix = prefix
        self._pb = prefix.encode()
        self._plen = len(self._pb)
        self._session = session
        self._watch_session = watch_session
        self._current = 0  # index of the endpoint that answered last
        self._compacted = 0  # newest compacted revision known to this client
        self._watchers: set[_EtcdWatcher] = set()
        self._closed = False

    @classmethod
    async def open(
        cls,
        endpoints: list[str],
        *,
        prefix: str = "",
        request_timeout: float = 30.0,
        connect_timeout: float = 3.0,
        max_connections: int = 256,
        tls: EtcdTLS | None = None,
    ) -> EtcdStore:
        """Connect to an etcd cluster given as ``host:port`` (or ``http://host:port``) endpoints; with ``tls``,
        over https (``host:port`` or ``https://host:port``).

        Fails with :class:`EtcdUnavailableError` if no endpoint answers (a TLS handshake that fails included:
        the message says why), with ValueError for endpoints or TLS files that are not usable.
        """
        if not endpoints:
            raise ValueError("EtcdStore needs at least one endpoint")
        secure = tls is not None
        for e in endpoints:
            _endpoint_url(e, secure)  # bad endpoints fail before any session exists
        ctx: ssl.SSLContext | bool = tls.ssl_context() if tls is not None else True
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max_connections, keepalive_timeout=60, ssl=ctx),
            timeout=aiohttp.ClientTimeout(total=request_timeout, sock_connect=connect_timeout),
            auto_decompress=False,
        )
        watch_session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=True, ssl=ctx),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=None),
            auto_decompress=False,
        )
        store = cls(list(endpoints), prefix, session, watch_session, secure=secure)
        try:
            await store.current_revision()
        except BaseException:
            await store.close()
            raise
        return store

    # ------------------------------------------------------------------ transport

    def _rotation(self) -> list[int]:
        """The endpoints' indexes in the order to try them: the current one first, then round the list."""
        n = len(self._urls)
        return [(self._current + attempt) % n for attempt in range(n)]

    async def _post(self, path: str, body: dict[str, Any], *, idempotent: bool) -> dict[str, Any]:
        payload = orjson.dumps(body)
        last: BaseException | None = None
        order = self._rotation()
        for idx in order:
            try:
                async with self._session.post(self._urls[idx] + path, data=payload, headers=_JSON) as resp:
                    status = resp.status
                    data = await resp.read()
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                last = exc  # never reached the server: safe to try the next endpoint
                continue
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                last = exc
                if idempotent:
                    continue
                self._current = (idx + 1) % len(self._urls)
                raise EtcdUnavailableError(
                    f"etcd {self._urls[idx]}: connection lost during {path}; the write may or may not "
                    f"have been applied: {exc!r}"
                ) from exc
            if status == 200:
                self._current = idx
                return orjson.loads(data)
            message, code = _error_of(data, status)
            if code == _GRPC_UNAVAILABLE and (idempotent or "no leader" in message):
                last = EtcdUnavailableError(message, code)
                continue
            self._current = idx
            raise EtcdError(message, code)
        self._current = (order[0] + 1) % len(self._urls)
        raise EtcdUnavailableError(f"no etcd endpoint of {self._urls} could serve {path}: {_describe(last)}") from last

    # ------------------------------------------------------------------ helpers

    def _key(self, key: str) -> bytes:
        return self._pb + key.encode()

    def _kv(self, d: dict[str, Any]) -> base.KeyValue:
        return base.KeyValue(
            b64decode(d["key"])[self._plen :].decode(),
            b64decode(d["value"]) if "value" in d else b"",
            int(d.get("create_revision", 0)),
            int(d.get("mod_revision", 0)),
        )

    async def _range(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v3/kv/range, mapping etcd's compacted/future revision errors."""
        try:
            return await self._post("/v3/kv/range", body, idempotent=True)
        except EtcdError as exc:
            requested = int(body.get("revision", 0))
            text = str(exc)
            if _COMPACTED in text:
                raise base.CompactedError(requested, await self._discover_compacted(requested + 1)) from None
            if _FUTURE in text:
                raise base.FutureRevisionError(requested, await self.current_revision()) from None
            raise

    async def _probe(self, revision: int) -> bool:
        """True if reads at ``revision`` are still possible (it is not older than the compacted one)."""
        try:
            await self._post(
                "/v3/kv/range",
                {"key": _b64(self._pb or b"\x00"), "revision": revision, "count_only": True},
                idempotent=True,
            )
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

    async def create(self, key: str, value: bytes) -> int:
        k = _b64(self._key(key))
        resp = await self._post(
            "/v3/kv/txn",
            {
                "compare": [{"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": 0}],
                "success": [{"request_put": {"key": k, "value": _b64(value)}}],
            },
            idempotent=False,
        )
        if not resp.get("succeeded"):
            raise base.KeyExistsError(key)
        return int(resp["header"]["revision"])

    async def get(self, key: str) -> base.KeyValue | None:
        resp = await self._post("/v3/kv/range", {"key": _b64(self._key(key))}, idempotent=True)
        kvs = resp.get("kvs")
        return self._kv(kvs[0]) if kvs else None

    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str = "", limit: int = 0
    ) -> base.ListResult:
        full = self._key(prefix)
        end = _prefix_end(full)
        start = full or b"\x00"
        if start_after:
            after = self._key(start_after) + b"\x00"
            if after > start:
                start = after
        body: dict[str, Any] = {"key": _b64(start), "range_end": _b64(end)}
        if revision > 0:
            body["revision"] = revision
        if limit > 0:
            body["limit"] = limit
        if end != b"\x00" and start >= end:
            # Nothing can match (start_after is past the prefix); still validate the revision.
            body = {
                "key": _b64(full or b"\x00"),
                "count_only": True,
                **({"revision": revision} if revision else {}),
            }
            resp = await self._range(body)
            return base.ListResult([], revision or int(resp["header"]["revision"]), False)
        resp = await self._range(body)
        items = [self._kv(d) for d in resp.get("kvs", ())]
        return base.ListResult(items, revision or int(resp["header"]["revision"]), bool(resp.get("more")))

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        k = _b64(self._key(key))
        resp = await self._post(
            "/v3/kv/txn",
            {
                "compare": [
                    {"key": k, "target": "CREATE", "result": "GREATER", "create_revision": 0},
                    {"key": k, "target": "MOD", "result": "EQUAL", "mod_revision": expected_revision},
                ],
                "success": [{"request_put": {"key": k, "value": _b64(value)}}],
                "failure": [{"request_range": {"key": k}}],
            },
            idempotent=False,
        )
        if resp.get("succeeded"):
            return int(resp["header"]["revision"])
        current = self._failure_kv(resp)
        if current is None:
            raise base.KeyNotFoundError(key)
        raise base.ConflictError(key, expected_revision, current.mod_revision)

    async def delete(self, key: str, expected_revision: int = 0) -> tuple[int, base.KeyValue]:
        k = _b64(self._key(key))
        compare: list[dict[str, Any]] = [
            {"key": k, "target": "CREATE", "result": "GREATER", "create_revision": 0}
        ]
        if expected_revision:
            compare.append({"key": k, "target": "MOD", "result": "EQUAL", "mod_revision": expected_revision})
        resp = await self._post(
            "/v3/kv/txn",
            {
                "compare": compare,
                "success": [{"request_delete_range": {"key": k, "prev_kv": True}}],
                "failure": [{"request_range": {"key": k}}],
            },
            idempotent=False,
        )
        if resp.get("succeeded"):
            prev = resp["responses"][0]["response_delete_range"].get("prev_kvs") or ()
            if not prev:  # cannot happen: the compare proved the key existed in this very txn
                raise EtcdError(f"etcd deleted {key} but returned no previous value")
            return int(resp["header"]["revision"]), self._kv(prev[0])
        current = self._failure_kv(resp)
        if current is None:
            raise base.KeyNotFoundError(key)
        raise base.ConflictError(key, expected_revision, current.mod_revision)

    def _failure_kv(self, resp: dict[str, Any]) -> base.KeyValue | None:
        responses = resp.get("responses") or ()
        if not responses:
            return None
        kvs = responses[0].get("response_range", {}).get("kvs")
        return self._kv(kvs[0]) if kvs else None

    async def watch(self, prefix: str, after_revision: int | None = None) -> base.Watcher:
        full = self._key(prefix)
        request: dict[str, Any] = {
            "key": _b64(full or b"\x00"),
            "range_end": _b64(_prefix_end(full)),
            "prev_kv": True,
            "progress_notify": True,
        }
        if after_revision is not None:
            if after_revision < self._compacted:
                raise base.CompactedError(after_revision, self._compacted)
            # etcd only reports a too-old start revision asynchronously (up to ~100 ms later, on the
            # stream); a read at ``after_revision`` fails at once exactly when history after it is gone.
            if not await self._probe(max(after_revision, 1)):
                raise base.CompactedError(after_revision, await self._discover_compacted(after_revision + 1))
            request["start_revision"] = after_revision + 1
        payload = orjson.dumps({"create_request": request})
        last: BaseException | None = None
        for idx in self._rotation():
            try:
                resp = await self._watch_session.post(
                    self._urls[idx] + "/v3/watch", data=payload, headers=_JSON
                )
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                last = exc
                continue
            try:
                if resp.status != 200:
                    message, code = _error_of(await resp.read(), resp.status)
                    raise EtcdError(f"watch: {message}", code)
                watcher = _EtcdWatcher(self, resp, after_revision)
                await asyncio.wait_for(watcher._wait_created(), 10.0)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                resp.close()
                last = exc
                continue
            except BaseException:
                resp.close()
                raise
            self._current = idx
            self._watchers.add(watcher)
            return watcher
        raise EtcdUnavailableError(f"no etcd endpoint of {self._urls} accepted a watch: {last!r}") from last

    async def current_revision(self) -> int:
        resp = await self._post(
            "/v3/kv/range", {"key": _b64(self._pb or b"\x00"), "count_only": True}, idempotent=True
        )
        return int(resp["header"]["revision"])

    async def compacted_revision(self) -> int:
        return await self._discover_compacted()

    async def compact(self, revision: int) -> None:
        """etcd's compaction (physical: returns once the history is gone). Like etcd, compacting at or
        below the compacted revision raises CompactedError and past the current one FutureRevisionError."""
        if revision <= self._compacted:
            raise base.CompactedError(revision, self._compacted)
        try:
            await self._post("/v3/kv/compaction", {"revision": revision, "physical": True}, idempotent=True)
        except EtcdError as exc:
            if _COMPACTED in str(exc):  # another client compacted at or past ``revision``
                raise base.CompactedError(revision, await self._discover_compacted(revision)) from None
            if _FUTURE in str(exc):
                raise base.FutureRevisionError(revision, await self.current_revision()) from None
            raise
        self._compacted = max(self._compacted, revision)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for watcher in list(self._watchers):
            await watcher.close()
        await self._session.close()
        await self._watch_session.close()

    def _forget(self, watcher: _EtcdWatcher) -> None:
        self._watchers.discard(watcher)


def _error_of(data: bytes, status: int) -> tuple[str, int]:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return f"HTTP {status}: {data[:200]!r}", 0
    if isinstance(body, dict) and isinstance(body.get("error"), dict):  # streaming error envelope
        body = body["error"]
    if not isinstance(body, dict):
        return f"HTTP {status}: {body!r}", 0
    return str(body.get("message") or body.get("error") or f"HTTP {status}"), int(body.get("code") or 0)


class _EtcdWatcher(base.Watcher):
    """One etcd watch over one streaming HTTP response of newline-delimited JSON messages."""

    def __init__(self, store: EtcdStore, resp: aiohttp.ClientResponse, after_revision: int | None) -> None:
        self._store = store
        self._resp = resp
        self._after = after_revision
        self._buf = bytearray()
        self._scan = 0  # bytes of _buf known to hold no newline
        self._closed = False
        self._pending: deque[base.WatchEvent] = deque()
        self._progress: int | None = None  # every event up to this revision has been received

    async def _message(self) -> dict[str, Any] | None:
        """The next message of the stream, or None at its end."""
        buf = self._buf
        while True:
            nl = buf.find(b"\n", self._scan)
            if nl >= 0:
                line = bytes(buf[:nl])
                del buf[: nl + 1]
                self._scan = 0
                if line.strip():
                    return orjson.loads(line)
                continue
            self._scan = len(buf)
            chunk = await self._resp.content.readany()
            if not chunk:
                return None
            buf += chunk

    async def _wait_created(self) -> None:
        msg = await self._message()
        if msg is None:
            raise aiohttp.ClientPayloadError("etcd closed the watch stream before confirming it")
        result = self._check(msg)
        if not result.get("created"):
            raise aiohttp.ClientPayloadError(f"unexpected first watch message: {msg!r}")

    def _check(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The ``result`` of a stream message; raises for errors, compaction and cancellation."""
        if "error" in msg:
            message, code = _error_of(orjson.dumps(msg), 200)
            raise base.WatchClosedError(f"etcd ended the watch: {message} (code {code})")
        result = msg.get("result", {})
        compact = int(result.get("compact_revision", 0))
        if compact:
            self._store._compacted = max(self._store._compacted, compact)
            raise base.CompactedError(self._after if self._after is not None else 0, compact)
        if result.get("canceled"):
            raise base.WatchClosedError(
                f"etcd canceled the watch: {result.get('cancel_reason', 'no reason given')}"
            )
        return result

    def _events(self, result: dict[str, Any]) -> list[base.WatchEvent]:
        plen = self._store._plen
        out = []
        for ev in result.get("events", ()):
            kv = ev["kv"]
            key = b64decode(kv["key"])[plen:].decode()
            revision = int(kv["mod_revision"])
            prev = ev.get("prev_kv")
            prev_value = (b64decode(prev["value"]) if "value" in prev else b"") if prev else None
            if ev.get("type") == "DELETE":
                value = prev_value if prev_value is not None else b""
                create_revision = int(prev.get("create_revision", 0)) if prev else 0
                out.append(base.WatchEvent("DELETE", key, value, revision, create_revision, value))
            else:
                value = b64decode(kv["value"]) if "value" in kv else b""
                create_revision = int(kv["create_revision"])
                if create_revision == revision:
                    prev_value = None  # a create (even if etcd had an older, deleted incarnation)
                elif prev_value is None:
                    prev_value = b""  # an update whose previous value was compacted away
                out.append(base.WatchEvent("PUT", key, value, revision, create_revision, prev_value))
        return out

    def __aiter__(self) -> AsyncIterator[base.WatchEvent]:
        return self

    async def __anext__(self) -> base.WatchEvent:
        """The next event. Leaving an ``async for`` early keeps the watch open (iterate it again to go
        on); errors close it. Not safe for several concurrent consumers."""
        while not self._pending:
            if self._closed:
                raise StopAsyncIteration
            try:
                msg = await self._message()
                if self._closed:
                    raise StopAsyncIteration
                if msg is None:
                    raise base.WatchClosedError("etcd closed the watch stream")
                result = self._check(msg)
                events = self._events(result)
                self._pending.extend(events)
                if events:
                    self._progress = events[-1].revision
                elif "header" in result and not result.get("created"):
                    self._progress = int(result["header"].get("revision", 0)) or self._progress
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                if self._closed:
                    raise StopAsyncIteration from None
                await self.close()
                raise base.WatchClosedError(f"etcd watch stream broke: {exc!r}") from exc
            except (base.StorageError, ValueError):  # WatchClosedError, CompactedError, bad JSON
                await self.close()
                raise
        return self._pending.popleft()

    def progress_revision(self) -> int | None:
        return None if self._pending or self._closed else self._progress

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        self._resp.close()
        self._store._forget(self)
