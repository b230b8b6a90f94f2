"""Agent-token Secrets: they hold a hash, the index turns a token into the agent's identity, deletion revokes."""

from __future__ import annotations

import hashlib
from typing import Any

from flotilla.apiserver.agent_tokens import (
    AgentTokenIndex,
    agent_token_of_secret,
    agent_token_secret,
)
from flotilla.apiserver.auth import AuthenticationError, TokenAuthenticator

TOKEN = "a-very-secret-agent-token"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def test_agent_token_secret_holds_only_the_hash_of_the_token() -> None:
    secret = agent_token_secret("m1", TOKEN)
    assert secret["type"] == "flotilla.io/agent-token"
    assert secret["metadata"] == {"name": "m1.agent-token", "namespace": "karmada-cluster",
                                  "labels": {"cluster.karmada.io/name": "m1"}}
    assert TOKEN not in repr(secret)
    import base64
    assert TOKEN.encode() not in b"".join(base64.b64decode(v) for v in secret["data"].values())
    assert agent_token_of_secret(secret) == (_digest(TOKEN), "m1")


def test_agent_token_of_secret_ignores_other_and_inconsistent_secrets() -> None:
    good = agent_token_secret("m1", TOKEN)
    renamed: dict[str, Any] = {**good, "metadata": {**good["metadata"], "name": "m2.agent-token"}}
    elsewhere: dict[str, Any] = {**good, "metadata": {**good["metadata"], "namespace": "default"}}
    opaque = {**good, "type": "Opaque"}
    bad_hash = {**good, "data": {**good["data"], "tokenSHA256": "bm90LWhleA=="}}
    not_b64 = {**good, "data": {**good["data"], "cluster": "%%%"}}
    for secret in (renamed, elsewhere, opaque, bad_hash, not_b64, {"type": "flotilla.io/agent-token"}):
        assert agent_token_of_secret(secret) is None, secret


def test_agent_token_index_authenticates_until_the_secret_is_deleted() -> None:
    index = AgentTokenIndex()
    authn = TokenAuthenticator(dynamic=index.user_of)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    secret = agent_token_secret("m1", TOKEN)
    secret["metadata"]["uid"] = "u-1"
    index.remember("ADDED", secret)
    user = authn.authenticate(headers)
    assert user is not None
    assert (user.name, user.uid) == ("system:karmada:agent:m1", "u-1")
    assert set(user.groups) == {"system:karmada:agents", "system:authenticated"}
    # rotating the token (the Secret rewritten) drops the old one
    index.remember("MODIFIED", agent_token_secret("m1", "the-new-token"))
    try:
        authn.authenticate(headers)
        raise AssertionError("the old token still works")
    except AuthenticationError:
        pass
    assert authn.authenticate({"Authorization": "Bearer the-new-token"}) is not None
    index.remember("DELETED", agent_token_secret("m1", "the-new-token"))
    assert len(index) == 0
    try:
        authn.authenticate({"Authorization": "Bearer the-new-token"})
        raise AssertionError("a revoked token still works")
    except AuthenticationError:
        pass
