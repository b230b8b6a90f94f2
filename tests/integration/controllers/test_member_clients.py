"""MemberClients: one client per member, rebuilt when the member's credentials change, without failing the
requests already sent with the client it replaces.

Joining a member writes its credentials Secret twice, so a client built between the two writes is replaced a few
seconds later. Closing the old client at once failed every request in flight on it ("Server disconnected"), and
each failed reconcile then waited for its workqueue's rate limiter: the soak's crash trials and `flotilla bench
failover` saw hundreds of workloads held up for half a minute while being placed.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.client import Client
from flotilla.client.errors import ApiException
from flotilla.kube.resources import NAMESPACES
from flotilla.runtime.members import CLUSTER_SECRET_NAMESPACE, SECRETS, MemberClients

RETIRE_AFTER = 0.6


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[Client, str]]:
    """The control plane's client (with the member's Secret in it) and the member's URL."""
    cp = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                         compaction_interval=0)).start()
    member = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "m1", port=0,
                                             compaction_interval=0)).start()
    assert cp.kubeconfig_path is not None
    client = Client.from_kubeconfig(cp.kubeconfig_path)
    await client.create(NAMESPACES, {"metadata": {"name": CLUSTER_SECRET_NAMESPACE}})
    await client.create(SECRETS, {"metadata": {"name": "m1"},
                                  "data": {"token": base64.b64encode(b"t0").decode()}}, CLUSTER_SECRET_NAMESPACE)
    try:
        yield client, member.url
    finally:
        await client.close()
        await member.stop()
        await cp.stop()


def cluster(url: str) -> dict[str, Any]:
    return {"metadata": {"name": "m1"},
            "spec": {"apiEndpoint": url, "secretRef": {"namespace": CLUSTER_SECRET_NAMESPACE, "name": "m1"}}}


async def rotate_secret(client: Client) -> None:
    await client.patch(SECRETS, "m1", {"data": {"token": base64.b64encode(b"t1").decode()}},
                       namespace=CLUSTER_SECRET_NAMESPACE)


async def closed(client: Client) -> bool:
    try:
        await client.get(NAMESPACES, "default")
    except ApiException as e:
        return "closed" in str(e)
    return False


async def test_callers_asking_together_after_the_credentials_changed_share_one_new_client(
        servers: tuple[Client, str]) -> None:
    cp, url = servers
    clients = MemberClients(cp, secret_ttl=0, retire_after=RETIRE_AFTER)
    try:
        old = await clients.client_for(cluster(url))
        await rotate_secret(cp)
        got = await asyncio.gather(*(clients.client_for(cluster(url)) for _ in range(20)))
        assert all(c is got[0] for c in got)
        assert got[0] is not old
        assert clients.retiring == 1  # the old one, once
        assert await clients.client_for(cluster(url)) is got[0]
    finally:
        await clients.close()
    assert clients.retiring == 0


async def test_a_replaced_client_serves_requests_in_flight_then_is_closed(servers: tuple[Client, str]) -> None:
    cp, url = servers
    clients = MemberClients(cp, secret_ttl=0, retire_after=RETIRE_AFTER)
    try:
        old = await clients.client_for(cluster(url))
        await old.get(NAMESPACES, "default")  # its connection is open
        await rotate_secret(cp)
        new = await clients.client_for(cluster(url))
        assert new is not old
        # what was sent with the old client just before the swap still gets its answer
        ns = await old.get(NAMESPACES, "default")
        assert ns["metadata"]["name"] == "default"
        assert not await closed(old)
        await asyncio.sleep(RETIRE_AFTER + 0.3)
        assert clients.retiring == 0
        assert await closed(old)
        assert (await new.get(NAMESPACES, "default"))["metadata"]["name"] == "default"
    finally:
        await clients.close()


async def test_closing_member_clients_closes_the_ones_being_retired_at_once(servers: tuple[Client, str]) -> None:
    cp, url = servers
    clients = MemberClients(cp, secret_ttl=0, retire_after=60)
    old = await clients.client_for(cluster(url))
    await rotate_secret(cp)
    new = await clients.client_for(cluster(url))
    await asyncio.wait_for(clients.close(), 5)
    assert clients.retiring == 0
    assert await closed(old) and await closed(new)
