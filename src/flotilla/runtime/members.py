"""Clients for member clusters, built from a Cluster's apiEndpoint and its credentials Secret.

As in Karmada (Push mode), the Cluster object names a Secret (``spec.secretRef``, namespace
``karmada-cluster`` by default) whose data holds ``token`` and, for TLS, ``caBundle``; the endpoint is
``spec.apiEndpoint`` and ``spec.insecureSkipTLSVerification`` skips verification. Flotilla also reads a client
certificate (``tls.crt`` + ``tls.key``) and an exec credential plugin (``exec``, the kubeconfig stanza as JSON,
which the member's client runs for its credential), as ``flotilla join`` stores them. A client is cached per
cluster and rebuilt when the Cluster's endpoint or credentials change. The Secret is read again at most every
``secret_ttl`` seconds (every controller asks for the client on each reconcile; one read per ask was most of the
control plane's reads during a failover), so changed credentials are picked up within that time.

A replaced client is not closed at once: requests already sent with it (applies, deletions, probes, informers'
watches) finish first, within ``retire_after`` seconds (the request timeout and a second). Closing it at once failed
them all with "Server disconnected", and each failed reconcile then waited for its workqueue's rate limiter: joining
a member, whose Secret is written twice, held up the first hundreds of workloads for half a minute.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
import time
from typing import Any

from flotilla.api.resources import CLUSTERS
from flotilla.client import Client, Resource
from flotilla.client.exec_credential import ExecConfig, ExecConfigError
from flotilla.client.kubeconfig import ClusterCredentials

__all__ = ["CLUSTERS", "CLUSTER_SECRET_NAMESPACE", "SECRETS", "MemberClientError", "MemberClients", "credentials_for"]

SECRETS = Resource("", "v1", "secrets", "Secret", True)
CLUSTER_SECRET_NAMESPACE = "karmada-cluster"


class MemberClientError(Exception):
    """The client for a member cannot be built (no endpoint, missing Secret...); the message says why."""


def credentials_for(cluster: dict[str, Any], secret: dict[str, Any] | None) -> ClusterCredentials:
    spec = cluster.get("spec") or {}
    endpoint = spec.get("apiEndpoint")
    name = (cluster.get("metadata") or {}).get("name", "")
    if not endpoint:
        raise MemberClientError(f"cluster {name} has no spec.apiEndpoint")
    data = (secret or {}).get("data") or {}

    def field(key: str) -> bytes | None:
        raw = data.get(key)
        if not raw:
            return None
        try:
            return base64.b64decode(raw)
        except (ValueError, TypeError):
            raise MemberClientError(f"secret of cluster {name}: data.{key} is not base64") from None

    token = field("token")
    cert, key = field("tls.crt"), field("tls.key")
    if bool(cert) != bool(key):
        raise MemberClientError(f"secret of cluster {name}: data.tls.crt and data.tls.key must be given together")
    exec_config = None
    stanza = field("exec")
    if stanza:
        try:
            exec_config = ExecConfig.from_stored(json.loads(stanza), where=f"secret of cluster {name}: data.exec")
        except ValueError as e:  # ExecConfigError, or not JSON
            detail = str(e) if isinstance(e, ExecConfigError) else f"secret of cluster {name}: data.exec is not JSON"
            raise MemberClientError(detail) from None
    return ClusterCredentials(
        server=endpoint,
        token=token.decode() if token else None,
        ca_pem=field("caBundle"),
        client_cert_pem=cert,
        client_key_pem=key,
        insecure=bool(spec.get("insecureSkipTLSVerification")),
        context=name,
        exec=exec_config,
    )


class MemberClients:
    """One cached Client per member cluster."""

    def __init__(self, control_plane: Client, *, request_timeout: float = 10.0, secret_ttl: float = 2.0,
                 retire_after: float | None = None) -> None:
        self.control_plane = control_plane
        self.request_timeout = request_timeout
        self.secret_ttl = secret_ttl
        self.retire_after = request_timeout + 1.0 if retire_after is None else retire_after
        self._clients: dict[str, tuple[tuple[Any, ...], Client]] = {}
        self._secrets: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._retiring: dict[asyncio.Task[None], Client] = {}

    async def _secret(self, name: str, namespace: str) -> dict[str, Any]:
        now = time.monotonic()
        known = self._secrets.get((namespace, name))
        if known is not None and now - known[0] < self.secret_ttl:
            return known[1]
        secret: dict[str, Any] = await self.control_plane.get(SECRETS, name, namespace)
        self._secrets[(namespace, name)] = (now, secret)
        return secret

    async def client_for(self, cluster: dict[str, Any]) -> Client:
        """The client for ``cluster`` (a Cluster object); raises MemberClientError if it cannot be built."""
        name = (cluster.get("metadata") or {}).get("name", "")
        spec = cluster.get("spec") or {}
        ref = spec.get("secretRef") or {}
        secret = None
        if ref.get("name"):
            try:
                secret = await self._secret(ref["name"], ref.get("namespace") or CLUSTER_SECRET_NAMESPACE)
            except Exception as e:
                raise MemberClientError(f"cluster {name}: cannot read its secret "
                                        f"{ref.get('namespace') or CLUSTER_SECRET_NAMESPACE}/{ref['name']}: {e}") from e
        fingerprint = (spec.get("apiEndpoint"), spec.get("insecureSkipTLSVerification"),
                       ((secret or {}).get("metadata") or {}).get("resourceVersion"))
        # from the lookup to the store no await: callers that get here together share one client
        cached = self._clients.get(name)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        try:
            client = Client.from_credentials(credentials_for(cluster, secret), request_timeout=self.request_timeout,
                                             read_retries=0)
        except ssl.SSLError as e:  # a tls.crt/tls.key pair that does not load
            raise MemberClientError(f"cluster {name}: the client certificate in its secret cannot be used: "
                                    f"{e}") from None
        self._clients[name] = (fingerprint, client)
        if cached is not None:
            self._retire(cached[1])
        return client

    def _retire(self, client: Client) -> None:
        """Close ``client`` once the requests already sent with it have had their time."""
        async def close_later() -> None:
            try:
                await asyncio.sleep(self.retire_after)
            finally:
                await client.close()

        task = asyncio.get_running_loop().create_task(close_later())
        self._retiring[task] = client
        task.add_done_callback(lambda t: self._retiring.pop(t, None))

    @property
    def retiring(self) -> int:
        """Replaced clients not closed yet."""
        return len(self._retiring)

    async def forget(self, name: str) -> None:
        """Drop the client of a cluster that is gone (closed at once)."""
        self._secrets.clear()
        cached = self._clients.pop(name, None)
        if cached is not None:
            await cached[1].close()

    async def close(self) -> None:
        for name in list(self._clients):
            await self.forget(name)
        tasks = list(self._retiring)
        for task in tasks:
            task.cancel()  # closes its client at once
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class AgentMemberClients(MemberClients):
    """The member client of ``flotilla agent``: its own member, from its ``--kubeconfig``, for its one cluster.

    The agent's Cluster has no ``secretRef`` (and may have no ``apiEndpoint``): the credentials stay in the member.
    Asked for another cluster (never, within the agent's scope), it refuses instead of reading a Secret."""

    def __init__(self, control_plane: Client, cluster: str, member: Client) -> None:
        super().__init__(control_plane, request_timeout=10.0)
        self.cluster = cluster
        self.member = member

    async def client_for(self, cluster: dict[str, Any]) -> Client:
        name = (cluster.get("metadata") or {}).get("name", "")
        if name != self.cluster:
            raise MemberClientError(f"cluster {name}: this agent serves cluster {self.cluster} only")
        return self.member

    async def forget(self, name: str) -> None:
        return None  # the member client is the agent's for its whole life

    async def close(self) -> None:
        await self.member.close()
