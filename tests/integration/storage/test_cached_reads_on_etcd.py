"""``resourceVersion=0`` reads on an etcd-backed API server: the version the server holds, without a read from etcd;
and a write guarded by a resourceVersion read that way, which another API server made stale, still lands once
retried (the failed compare-and-swap reads etcd and brings the server's version up to date)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.apiserver.builtin_kinds import BUILTIN_TYPES
from flotilla.apiserver.inprocess import InProcessTransport
from flotilla.apiserver.rest import ResourceStorage
from flotilla.apiserver.type_registry import TypeRegistry
from flotilla.client import ApiException, Client
from flotilla.kube.resources import CONFIGMAPS, NAMESPACES
from flotilla.runtime.patching import patch_with_retry
from flotilla.storage.etcd import EtcdStore

if str(Path(__file__).resolve().parents[3]) not in sys.path:  # ``tests.support`` however pytest was started
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.support.etcd_server import EtcdServer, start_etcd

pytestmark = pytest.mark.etcd


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


class CountingStore(EtcdStore):
    """An EtcdStore that counts its reads of single keys."""

    reads = 0

    async def get(self, key: str) -> Any:
        self.reads += 1
        return await super().get(key)


@pytest.fixture
async def stores(etcd: EtcdServer) -> AsyncIterator[list[CountingStore]]:
    prefix = f"/t-{uuid.uuid4().hex[:10]}"
    opened = [await CountingStore.open([etcd.endpoint], prefix=prefix) for _ in range(2)]
    yield opened  # type: ignore[misc]
    for s in opened:
        await s.close()


@pytest.fixture
async def two_servers(stores: list[CountingStore]) -> tuple[Client, Client]:
    """Two API servers (in-process clients) sharing one etcd prefix, as two replicas of the control plane do."""
    clients = [Client(InProcessTransport(ResourceStorage(s, TypeRegistry(BUILTIN_TYPES)))) for s in stores]
    await clients[0].create(NAMESPACES, {"metadata": {"name": "default"}})
    return clients[0], clients[1]


def _configmap(value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
            "data": {"k": value}}


async def test_a_cached_read_gives_the_version_the_server_holds_and_a_plain_read_gives_etcds(
        two_servers: tuple[Client, Client]) -> None:
    one, other = two_servers
    mine = await one.create(CONFIGMAPS, _configmap("1"))
    newer = await other.update(CONFIGMAPS, {**mine, "data": {"k": "2"}})

    cached = await one.get(CONFIGMAPS, "c", "default", resource_version="0")
    assert cached["data"] == {"k": "1"}  # the first server has not read or watched the other's write
    assert cached["metadata"]["resourceVersion"] == mine["metadata"]["resourceVersion"]
    plain = await one.get(CONFIGMAPS, "c", "default")
    assert plain["metadata"]["resourceVersion"] == newer["metadata"]["resourceVersion"]
    again = await one.get(CONFIGMAPS, "c", "default", resource_version="0")  # the read updated what it holds
    assert again["metadata"]["resourceVersion"] == newer["metadata"]["resourceVersion"]


async def test_a_guarded_patch_retried_from_a_stale_cached_read_lands_on_the_newest_version(
        two_servers: tuple[Client, Client]) -> None:
    one, other = two_servers
    mine = await one.create(CONFIGMAPS, _configmap("1"))
    await other.update(CONFIGMAPS, {**mine, "data": {"k": "2", "other": "x"}})
    seen: list[str] = []

    def make(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append(obj["data"]["k"])
        return {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "data": {"k": str(int(obj["data"]["k"]) + 10)}}

    written = await patch_with_retry(one, CONFIGMAPS, mine, "c", "default", make)

    assert written is not None and written["data"] == {"k": "12", "other": "x"}  # nothing of the other write lost
    assert seen[0] == "1" and seen[-1] == "2"
    assert (await other.get(CONFIGMAPS, "c", "default"))["data"] == {"k": "12", "other": "x"}


async def test_a_precondition_older_than_the_servers_version_conflicts_without_a_read(
        two_servers: tuple[Client, Client], stores: list[CountingStore]) -> None:
    one, _ = two_servers
    first = await one.create(CONFIGMAPS, _configmap("1"))
    await one.patch(CONFIGMAPS, "c", {"data": {"k": "2"}}, namespace="default")
    reads = stores[0].reads
    stale = first["metadata"]["resourceVersion"]

    with pytest.raises(ApiException) as patched:
        await one.patch(CONFIGMAPS, "c", {"metadata": {"resourceVersion": stale}, "data": {"k": "3"}},
                        namespace="default")
    with pytest.raises(ApiException) as updated:
        await one.update(CONFIGMAPS, {**first, "data": {"k": "3"}})

    assert patched.value.status == 409 and updated.value.status == 409
    assert stores[0].reads == reads  # the server's own newer version settles it: no read from etcd
    assert (await one.get(CONFIGMAPS, "c", "default"))["data"] == {"k": "2"}
