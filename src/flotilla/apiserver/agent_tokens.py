"""Bearer tokens of Pull-mode agents, kept as Secrets the API server follows.

``flotilla register`` makes a random token for a cluster's agent and stores, in namespace ``karmada-cluster``, a
Secret of type ``flotilla.io/agent-token`` named ``<cluster>.agent-token`` (a Cluster's name has no dot, so it
never meets the Secret ``flotilla join`` names after a Push cluster). The Secret holds only the cluster's name
(``cluster``) and the SHA-256 of the token (``tokenSHA256``, hex): the token itself is written only into the
agent's kubeconfig.

Every API server of the control plane keeps an :class:`AgentTokenIndex` of those Secrets (its own writes at once,
through ``storage.after_write``; other servers' through a watch of the store) and its
:class:`~flotilla.apiserver.auth.TokenAuthenticator` asks it for tokens the static token file does not know: a
match is the user ``system:karmada:agent:<cluster>`` in ``system:karmada:agents``. Deleting the Secret revokes the
token for the next request; no restart is needed either way.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from flotilla.apiserver.agent_scope import LEASE_NAMESPACE, agent_user
from flotilla.apiserver.store_mirror import StoreMirror

__all__ = [
    "AGENT_TOKEN_CLUSTER_KEY",
    "AGENT_TOKEN_HASH_KEY",
    "AGENT_TOKEN_NAMESPACE",
    "AGENT_TOKEN_SECRET_TYPE",
    "AgentTokenIndex",
    "agent_token_of_secret",
    "agent_token_secret",
    "agent_token_secret_name",
    "token_sha256",
]

log = logging.getLogger(__name__)

AGENT_TOKEN_SECRET_TYPE = "flotilla.io/agent-token"
AGENT_TOKEN_NAMESPACE = LEASE_NAMESPACE
AGENT_TOKEN_CLUSTER_KEY = "cluster"
AGENT_TOKEN_HASH_KEY = "tokenSHA256"


def token_sha256(token: str) -> str:
    """The hex SHA-256 of a token, as the Secret keeps it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def agent_token_secret_name(cluster: str) -> str:
    return f"{cluster}.agent-token"


def agent_token_secret(cluster: str, token: str) -> dict[str, Any]:
    """The Secret that makes ``token`` the credential of ``cluster``'s agent (it holds the token's hash only)."""
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode("ascii")

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": agent_token_secret_name(cluster), "namespace": AGENT_TOKEN_NAMESPACE,
                     "labels": {"cluster.karmada.io/name": cluster}},
        "type": AGENT_TOKEN_SECRET_TYPE,
        "data": {AGENT_TOKEN_CLUSTER_KEY: b64(cluster), AGENT_TOKEN_HASH_KEY: b64(token_sha256(token))},
    }


def agent_token_of_secret(secret: Mapping[str, Any]) -> tuple[bytes, str] | None:
    """(token digest, cluster) of an agent-token Secret, or None for any other Secret or a malformed one (a Secret
    whose name is not its cluster's, whose hash is not 32 bytes of hex, ...)."""
    if secret.get("type") != AGENT_TOKEN_SECRET_TYPE:
        return None
    md = secret.get("metadata") or {}
    if not isinstance(md, Mapping) or md.get("namespace") != AGENT_TOKEN_NAMESPACE:
        return None
    data = secret.get("data") or {}
    if not isinstance(data, Mapping):
        return None
    try:
        cluster = base64.b64decode(str(data.get(AGENT_TOKEN_CLUSTER_KEY) or ""), validate=True).decode()
        digest = bytes.fromhex(base64.b64decode(str(data.get(AGENT_TOKEN_HASH_KEY) or ""), validate=True).decode())
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if not cluster or len(digest) != 32 or md.get("name") != agent_token_secret_name(cluster):
        return None
    return digest, cluster


class AgentTokenIndex(StoreMirror):
    """The agent-token Secrets of an API server's store, kept current; ``user_of(digest)`` answers the
    authenticator."""

    what = "agent-token Secrets"

    def __init__(self) -> None:
        super().__init__(AGENT_TOKEN_NAMESPACE)
        self._by_secret: dict[str, tuple[bytes, str, str]] = {}  # Secret name -> (digest, cluster, uid)
        self._by_digest: dict[bytes, tuple[str, str]] = {}  # digest -> (cluster, uid)

    def user_of(self, digest: bytes) -> Any:
        """The agent whose token has SHA-256 ``digest`` (a :class:`~flotilla.apiserver.auth.UserInfo`), or None."""
        found = self._by_digest.get(digest)
        return agent_user(found[0], found[1]) if found is not None else None

    def __len__(self) -> int:
        return len(self._by_secret)

    def remember(self, event: str, secret: Mapping[str, Any]) -> None:
        md = secret.get("metadata") or {}
        if not isinstance(md, Mapping) or md.get("namespace") != AGENT_TOKEN_NAMESPACE:
            return
        name = md.get("name")
        if not isinstance(name, str):
            return
        old = self._by_secret.pop(name, None)
        if old is not None:
            self._by_digest.pop(old[0], None)
        if event == "DELETED":
            return
        parsed = agent_token_of_secret(secret)
        if parsed is None:
            return
        digest, cluster = parsed
        uid = str(md.get("uid") or "")
        self._by_secret[name] = (digest, cluster, uid)
        self._by_digest[digest] = (cluster, uid)

    def reset(self, items: list[dict[str, Any]]) -> None:
        self._by_secret, self._by_digest = {}, {}
        for item in items:
            self.remember("ADDED", item)

    async def attach(self, storage: Any, rt: Any = None, *, follow: bool = True) -> None:
        """List the Secrets once, then follow this server's writes and (``follow``) the store's watch."""
        rt = rt if rt is not None else storage.types.lookup("", "v1", "secrets")
        if rt is None:
            raise LookupError("v1 secrets are not served")
        await super().attach(storage, rt, follow=follow)
