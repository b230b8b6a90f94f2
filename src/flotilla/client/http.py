"""The HTTP transport: aiohttp, one session (connection pool) per client, JSON via orjson, TLS per kubeconfig.

A kubeconfig user with an ``exec`` plugin gets its credential from the plugin (:mod:`flotilla.client.exec_credential`):
run before the first request, again once the credential's ``expirationTimestamp`` has passed, and again when the
server answers 401 (the request is then sent once more). A plugin that fails raises ConnectionFailed with reason
``ExecPluginFailed`` and the plugin's message.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import ssl
import time
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

from flotilla.client.errors import ApiException, ConnectionFailed, from_status
from flotilla.client.exec_credential import ExecConfigError, ExecCredentialSource, ExecResult
from flotilla.client.kubeconfig import ClusterCredentials
from flotilla.client.transport import Query, Transport, WatchEvent, WatchStream
from flotilla.kube.resources import Resource

__all__ = ["HttpTransport"]

log = logging.getLogger(__name__)

_TOKEN_FILE_TTL = 60.0  # seconds between re-reads of a kubeconfig tokenFile (client-go re-reads it too)
_JSON = "application/json"
# failures where the request cannot have reached the server's handler; a read may be retried after them
_RETRYABLE = (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError)


def _connection_failed(e: BaseException, url: str) -> ConnectionFailed:
    if isinstance(e, TimeoutError):
        return ConnectionFailed(f"timed out talking to {url}", reason="Timeout")
    return ConnectionFailed(f"{url}: {type(e).__name__}: {e}")


class HttpTransport(Transport):
    """Talks to one API server. Sessions are created lazily, inside the running event loop.

    ``connection_limit`` caps concurrent connections (0 = no cap); every open watch holds one connection.
    ``request_timeout`` bounds every request except watches (whose liveness the informer checks); reads
    (GET: get, list, discovery) are retried ``read_retries`` times when the connection could not be made or
    was dropped before a response arrived.
    """

    def __init__(
        self,
        credentials: ClusterCredentials,
        *,
        request_timeout: float = 30.0,
        connection_limit: int = 256,
        read_retries: int = 3,
        user_agent: str = "flotilla-client",
    ) -> None:
        self.credentials = credentials
        self.server = credentials.server.rstrip("/")
        self.request_timeout = request_timeout
        self.connection_limit = connection_limit
        self.read_retries = read_retries
        self.user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        self._ssl = credentials.ssl_context()
        self._auth: dict[str, str] = credentials.auth_headers()
        self._auth_read = time.monotonic()
        self._closed = False
        self.exec_source = (ExecCredentialSource(credentials.exec, credentials.cluster_info())
                            if credentials.exec is not None else None)
        self._exec_applied: ExecResult | None = None
        self._exec_cert: tuple[bytes, bytes] | None = None
        self._retired: list[aiohttp.ClientSession] = []

    # ------------------------------------------------------------------ plumbing
    def session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ConnectionFailed("the client is closed", reason="ClientClosed")
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.connection_limit, ssl=self._ssl if self._ssl else False)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.request_timeout), trust_env=False)
        return self._session

    async def ensure_credentials(self) -> ExecResult | None:
        """Run the exec plugin when there is no valid credential yet; returns the one in use (None without one)."""
        if self.exec_source is None:
            return None
        try:
            cred = await self.exec_source.get()
        except ExecConfigError as e:
            raise ConnectionFailed(str(e), reason="ExecPluginFailed") from None
        if cred is not self._exec_applied:
            self._apply_exec(cred)
        return cred

    def refused(self, cred: ExecResult | None) -> bool:
        """The server answered 401 to a request sent with ``cred``: True when asking the exec plugin again may
        help (the caller then sends the request once more)."""
        if self.exec_source is None:
            return False
        self.exec_source.invalidate(cred)
        return True

    def _apply_exec(self, cred: ExecResult) -> None:
        self._auth = {"Authorization": f"Bearer {cred.token}"} if cred.token else self.credentials.auth_headers()
        if cred.client_cert_pem and cred.client_key_pem and self._exec_cert != (cred.client_cert_pem,
                                                                                 cred.client_key_pem):
            creds = dataclasses.replace(self.credentials, client_cert_pem=cred.client_cert_pem,
                                        client_key_pem=cred.client_key_pem)
            try:
                self._ssl = creds.ssl_context()
            except ssl.SSLError as e:
                raise ConnectionFailed(f"the exec plugin's client certificate cannot be used: {e}",
                                       reason="ExecPluginFailed") from None
            self._exec_cert = (cred.client_cert_pem, cred.client_key_pem)
            old, self._session = self._session, None  # pooled connections keep the certificate they began with
            if old is not None:  # requests already sent on it finish first
                self._retired.append(old)
                asyncio.get_running_loop().call_later(self.request_timeout + 1.0, self._close_retired, old)
        self._exec_applied = cred

    def _close_retired(self, session: aiohttp.ClientSession) -> None:
        if session in self._retired:
            self._retired.remove(session)
            asyncio.ensure_future(session.close())

    def headers(self, content_type: str | None = None) -> dict[str, str]:
        if self.exec_source is None and self.credentials.token_file is not None \
                and time.monotonic() - self._auth_read > _TOKEN_FILE_TTL:
            self._auth = self.credentials.auth_headers()
            self._auth_read = time.monotonic()
        h = {"Accept": _JSON, "User-Agent": self.user_agent, **self._auth}
        if content_type:
            h["Content-Type"] = content_type
        return h

    def _extra(self) -> dict[str, Any]:
        name = self.credentials.tls_server_name
        return {"server_hostname": name} if name and self._ssl is not None else {}

    def url(self, res: Resource, namespace: str | None, name: str | None = None,
            subresource: str | None = None) -> str:
        parts = [self.server, res.path_prefix]
        if res.namespaced and namespace:
            parts.append("/namespaces/" + quote(namespace, safe=""))
        parts.append("/" + res.plural)
        if name is not None:
            parts.append("/" + quote(name, safe=""))
            if subresource:
                parts.append("/" + subresource)
        return "".join(parts)

    async def request(self, method: str, url: str, *, query: Query | None = None, body: Any = None,
                      content_type: str | None = None) -> dict[str, Any]:
        data = None if body is None else orjson.dumps(body)
        if data is not None and content_type is None:
            content_type = _JSON
        cred = await self.ensure_credentials()
        try:
            return await self._send(method, url, query, data, content_type)
        except ApiException as e:
            if e.status != 401 or not self.refused(cred):
                raise
        await self.ensure_credentials()
        return await self._send(method, url, query, data, content_type)

    async def _send(self, method: str, url: str, query: Query | None, data: bytes | None,
                    content_type: str | None) -> dict[str, Any]:
        attempts = 1 + (self.read_retries if method == "GET" else 0)
        for attempt in range(attempts):
            try:
                async with self.session().request(
                    method, url, params=dict(query) if query else None, data=data,
                    headers=self.headers(content_type), **self._extra(),
                ) as resp:
                    raw = await resp.read()
                    return _decode(resp.status, raw)
            except ApiException:
                raise
            except aiohttp.ClientSSLError as e:
                raise _connection_failed(e, url) from e
            except _RETRYABLE as e:
                if attempt + 1 >= attempts:
                    raise _connection_failed(e, url) from e
                log.debug("retrying GET %s after %s", url, e)
                await asyncio.sleep(0.05 * (2**attempt))
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                raise _connection_failed(e, url) from e
        raise AssertionError("unreachable")

    async def close(self) -> None:
        self._closed = True
        for old in self._retired:
            await old.close()
        self._retired.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ------------------------------------------------------------------ verbs
    async def get(self, res: Resource, namespace: str | None, name: str, subresource: str | None, *,
                  resource_version: str = "") -> dict[str, Any]:
        query = {"resourceVersion": resource_version} if resource_version else None
        return await self.request("GET", self.url(res, namespace, name, subresource), query=query)

    async def list(self, res: Resource, namespace: str | None, query: Query) -> dict[str, Any]:
        return await self.request("GET", self.url(res, namespace), query=query)

    async def create(self, res: Resource, namespace: str | None, body: dict[str, Any], query: Query) -> dict[str, Any]:
        return await self.request("POST", self.url(res, namespace), query=query, body=body)

    async def update(self, res: Resource, namespace: str | None, name: str, body: dict[str, Any],
                     subresource: str | None, query: Query) -> dict[str, Any]:
        return await self.request("PUT", self.url(res, namespace, name, subresource), query=query, body=body)

    async def patch(self, res: Resource, namespace: str | None, name: str, body: Any, content_type: str,
                    subresource: str | None, query: Query) -> dict[str, Any]:
        return await self.request("PATCH", self.url(res, namespace, name, subresource), query=query, body=body,
                                  content_type=content_type)

    async def delete(self, res: Resource, namespace: str | None, name: str, options: dict[str, Any],
                     query: Query) -> dict[str, Any]:
        return await self.request("DELETE", self.url(res, namespace, name), query=query, body=options)

    async def delete_collection(self, res: Resource, namespace: str | None, options: dict[str, Any],
                                query: Query) -> dict[str, Any]:
        return await self.request("DELETE", self.url(res, namespace), query=query, body=options)

    def watch(self, res: Resource, namespace: str | None, query: Query) -> WatchStream:
        return _HttpWatch(self, self.url(res, namespace), {**query, "watch": "true"})

    async def discovery(self, path: str) -> dict[str, Any]:
        return await self.request("GET", self.server + path)


def _decode(status: int, raw: bytes) -> dict[str, Any]:
    if 200 <= status < 300:
        if not raw:
            return {}
        try:
            decoded = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ApiException(500, "InternalError", f"the server sent invalid JSON: {raw[:200]!r}") from None
        if not isinstance(decoded, dict):
            raise ApiException(500, "InternalError", "the server sent a JSON value that is not an object")
        return decoded
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        text = raw[:500].decode("utf-8", errors="replace").strip()
        raise ApiException(status, message=text or "") from None
    raise from_status(body, status)


class _HttpWatch(WatchStream):
    """Newline-delimited JSON events of one watch response (lines of any length)."""

    def __init__(self, transport: HttpTransport, url: str, query: dict[str, str]) -> None:
        self._t = transport
        self._url = url
        self._query = query
        self._resp: aiohttp.ClientResponse | None = None
        self._buf = b""
        self._ready: collections.deque[WatchEvent] = collections.deque()
        self._error: ApiException | None = None  # raised once the events before it are consumed
        self._closed = False

    async def _open(self) -> aiohttp.ClientResponse:
        t = self._t
        timeout = aiohttp.ClientTimeout(total=None, connect=t.request_timeout, sock_connect=t.request_timeout)
        for attempt in range(2):
            try:
                cred = await t.ensure_credentials()
                resp = await t.session().get(self._url, params=self._query, headers=t.headers(), timeout=timeout,
                                             **t._extra())
            except ConnectionFailed:
                self._closed = True
                raise
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                self._closed = True
                raise _connection_failed(e, self._url) from e
            if resp.status == 401 and attempt == 0 and t.refused(cred):
                resp.release()
                continue
            break
        if resp.status != 200:
            try:
                raw = await resp.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                raise _connection_failed(e, self._url) from e
            finally:
                resp.release()
                self._closed = True
            _decode(resp.status, raw)
            raise ApiException(resp.status)
        return resp

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._ready:
                return self._ready.popleft()
            if self._error is not None:
                err, self._error = self._error, None
                raise err
            if self._closed:
                raise StopAsyncIteration
            if self._resp is None:
                self._resp = await self._open()
            try:
                chunk = await self._resp.content.readany()
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                await self.aclose()
                raise _connection_failed(e, self._url) from e
            if not chunk:  # the server ended the watch: the connection can serve the next request
                resp, self._resp = self._resp, None
                resp.release()
                await self.aclose()
                raise StopAsyncIteration
            self._parse(chunk)

    def _parse(self, chunk: bytes) -> None:
        data = self._buf + chunk if self._buf else chunk
        lines = data.split(b"\n")
        self._buf = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                ev = orjson.loads(line)
                etype, obj = ev["type"], ev["object"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                self._fail(ApiException(500, "InternalError", f"malformed watch event: {line[:200]!r}"))
                return
            if etype == "ERROR":
                self._fail(from_status(obj, 500))
                return
            self._ready.append(WatchEvent(etype, obj))

    def _fail(self, err: ApiException) -> None:
        self._error = err
        self._closed = True
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    async def aclose(self) -> None:
        self._closed = True
        if self._resp is not None:
            self._resp.close()  # drops the connection: a half-read chunked stream cannot go back to the pool
            self._resp = None
