"""EtcdStore over TLS (``etcds://``) against a real etcd that serves clients over https only and requires client
certificates (``--client-cert-auth``), with certificates made by Flotilla's TLS helpers."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flotilla.storage import open_store
from flotilla.storage.etcd import EtcdStore, EtcdTLS, EtcdUnavailableError

if str(Path(__file__).resolve().parents[3]) not in sys.path:  # ``tests.support`` however pytest was started
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.support.etcd_server import EtcdServer, EtcdTLSFiles, start_etcd_tls

pytestmark = pytest.mark.etcd


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EtcdServer, EtcdTLSFiles]]:
    server, files = start_etcd_tls(tmp_path_factory.mktemp("etcd-tls"))
    yield server, files
    server.stop()


def _client_tls(files: EtcdTLSFiles) -> EtcdTLS:
    return EtcdTLS(str(files.ca), str(files.client_cert), str(files.client_key))


async def test_etcds_url_writes_reads_and_watches_over_tls(tls_etcd: tuple[EtcdServer, EtcdTLSFiles]) -> None:
    server, files = tls_etcd
    store = await open_store(f"etcds://{server.endpoint}", etcd_tls=_client_tls(files))
    try:
        key = f"/registry/configmaps/default/{uuid.uuid4().hex}"
        rev = await store.create(key, b"one")
        watcher = await store.watch(key, rev)
        await store.update(key, b"two", rev)
        async for event in watcher:
            assert (event.type, event.key, event.value) == ("PUT", key, b"two")
            break
        await watcher.close()
        got = await store.get(key)
        assert got is not None and got.value == b"two"
    finally:
        await store.close()


@pytest.mark.parametrize(("tls", "fragment"), [
    (lambda f: EtcdTLS(str(f.ca)), "BAD_CERTIFICATE"),  # no client certificate: etcd refuses the handshake
    (lambda f: EtcdTLS(None, str(f.client_cert), str(f.client_key)), "CERTIFICATE_VERIFY_FAILED"),  # unknown CA
])
async def test_tls_that_etcd_or_the_client_refuses_fails_with_the_reason(
        tls_etcd: tuple[EtcdServer, EtcdTLSFiles], tls: object, fragment: str) -> None:
    server, files = tls_etcd
    with pytest.raises(EtcdUnavailableError, match=fragment):
        await EtcdStore.open([server.endpoint], tls=tls(files), connect_timeout=5, request_timeout=10)  # type: ignore[operator]


async def test_plain_etcd_url_to_a_tls_etcd_does_not_get_through(tls_etcd: tuple[EtcdServer, EtcdTLSFiles]) -> None:
    server, _ = tls_etcd
    with pytest.raises(EtcdUnavailableError):
        await EtcdStore.open([server.endpoint], connect_timeout=5, request_timeout=10)


async def test_tls_files_with_a_plain_etcd_url_are_refused(tls_etcd: tuple[EtcdServer, EtcdTLSFiles]) -> None:
    server, files = tls_etcd
    with pytest.raises(ValueError, match="use etcds://host:port"):
        await open_store(f"etcd://{server.endpoint}", etcd_tls=_client_tls(files))
