"""TLS serving certificates + token/client-certificate auth, driven by the real kubectl and the official
Python client through kubeconfigs written by ``flotilla.client.kubeconfig``."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from flotilla.apiserver.auth import (
    MASTERS_GROUP,
    Authorizer,
    TokenAuthenticator,
    auth_middleware,
    ensure_token_file,
)
from flotilla.apiserver.tls import CertPaths, ensure_serving_certs, issue_client_cert, server_ssl_context
from flotilla.client.kubeconfig import (
    KubeconfigEntry,
    KubeconfigError,
    load_kubeconfig,
    merge_contexts,
    write_kubeconfig,
)

KUBECTL = Path(sys.executable).parent / "kubectl"
needs_kubectl = pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl binary not installed in the venv")


# ============================================================================================ certificates


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_serving_certs_shape_and_reuse(tmp_path: Path) -> None:
    paths = ensure_serving_certs(tmp_path)
    assert paths.dir == tmp_path / "pki"
    for key in (paths.ca_key, paths.server_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600

    ca = _cert(paths.ca_cert)
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca
    ku = ca.extensions.get_extension_for_class(x509.KeyUsage)
    assert ku.critical and ku.value.key_cert_sign

    leaf = _cert(paths.server_cert)
    leaf.verify_directly_issued_by(ca)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier)
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku

    before = {p: p.read_bytes() for p in (paths.ca_cert, paths.ca_key, paths.server_cert, paths.server_key)}
    again = ensure_serving_certs(tmp_path)
    assert again == paths
    assert {p: p.read_bytes() for p in before} == before  # reused, not regenerated

    # new host -> serving cert reissued from the same CA
    ensure_serving_certs(tmp_path, ["127.0.0.1", "localhost", "flotilla.example", "::1"])
    assert paths.ca_cert.read_bytes() == before[paths.ca_cert]
    assert paths.server_cert.read_bytes() != before[paths.server_cert]
    san2 = _cert(paths.server_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "flotilla.example" in san2.get_values_for_type(x509.DNSName)
    assert {str(ip) for ip in san2.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}

    # broken CA -> everything regenerated
    paths.ca_key.write_bytes(b"garbage")
    ensure_serving_certs(tmp_path)
    assert paths.ca_cert.read_bytes() != before[paths.ca_cert]
    _cert(paths.server_cert).verify_directly_issued_by(_cert(paths.ca_cert))
    assert not [p for p in paths.dir.iterdir() if p.name.endswith(".tmp")]


def test_client_cert_subject(tmp_path: Path) -> None:
    paths = ensure_serving_certs(tmp_path)
    cert_pem, key_pem = issue_client_cert(paths, "dave", ["system:masters", "team-a"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "dave"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters",
        "team-a",
    ]
    assert (
        ExtendedKeyUsageOID.CLIENT_AUTH
        in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    )
    cert.verify_directly_issued_by(_cert(paths.ca_cert))
    assert b"PRIVATE KEY" in key_pem
    with pytest.raises(ValueError):
        issue_client_cert(CertPaths.under(tmp_path / "nope"), "x")


# ============================================================================================ kubeconfig files


def test_write_and_load_kubeconfig(tmp_path: Path) -> None:
    k = tmp_path / "kube" / "config"
    write_kubeconfig(k, server="https://127.0.0.1:6443", token="tok", ca_pem=b"CA-PEM", namespace="ns1")
    assert stat.S_IMODE(k.stat().st_mode) == 0o600
    doc = yaml.safe_load(k.read_text())
    assert doc["apiVersion"] == "v1" and doc["kind"] == "Config"
    assert doc["current-context"] == "flotilla"
    assert doc["clusters"] == [
        {
            "name": "flotilla",
            "cluster": {
                "server": "https://127.0.0.1:6443",
                "certificate-authority-data": base64.b64encode(b"CA-PEM").decode(),
            },
        }
    ]
    assert doc["users"] == [{"name": "flotilla", "user": {"token": "tok"}}]
    assert doc["contexts"] == [
        {"name": "flotilla", "context": {"cluster": "flotilla", "user": "flotilla", "namespace": "ns1"}}
    ]
    creds = load_kubeconfig(k)
    assert (creds.server, creds.token, creds.ca_pem, creds.namespace, creds.insecure) == (
        "https://127.0.0.1:6443",
        "tok",
        b"CA-PEM",
        "ns1",
        False,
    )
    assert creds.auth_headers() == {"Authorization": "Bearer tok"}

    with pytest.raises(KubeconfigError):
        write_kubeconfig(k, server="https://x", ca_pem=b"x", insecure_skip_tls_verify=True)


def test_merge_contexts_and_file_references(tmp_path: Path) -> None:
    k = tmp_path / "config"
    merge_contexts(
        k,
        [
            KubeconfigEntry(context="flotilla", server="https://127.0.0.1:1", token="a"),
            KubeconfigEntry(context="member1", server="https://127.0.0.1:2", token="b", namespace="m"),
        ],
    )
    merge_contexts(
        k,
        [
            KubeconfigEntry(context="member2", server="http://127.0.0.1:3", insecure_skip_tls_verify=True),
            KubeconfigEntry(context="member1", server="https://127.0.0.1:22", token="b2"),
        ],
    )
    doc = yaml.safe_load(k.read_text())
    assert [c["name"] for c in doc["contexts"]] == ["flotilla", "member1", "member2"]
    assert doc["current-context"] == "flotilla"
    assert load_kubeconfig(k).server == "https://127.0.0.1:1"
    m1 = load_kubeconfig(k, "member1")
    assert (m1.server, m1.token, m1.namespace) == ("https://127.0.0.1:22", "b2", "default")
    m2 = load_kubeconfig(k, "member2")
    assert m2.insecure and m2.token is None and m2.ssl_context() is None
    merge_contexts(k, [], current_context="member2")
    assert yaml.safe_load(k.read_text())["current-context"] == "member2"
    with pytest.raises(KubeconfigError):
        merge_contexts(k, [], current_context="nope")
    with pytest.raises(KubeconfigError):
        load_kubeconfig(k, "nope")

    # file references are relative to the kubeconfig's directory; tokenFile wins over token
    (tmp_path / "ca.pem").write_bytes(b"CA")
    (tmp_path / "tok").write_text("from-file\n")
    (tmp_path / "c.pem").write_bytes(b"CERT")
    (tmp_path / "k.pem").write_bytes(b"KEY")
    ref = tmp_path / "ref.yaml"
    ref.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://h:1/", "certificate-authority": "ca.pem"}}
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "token": "inline",
                            "tokenFile": "tok",
                            "client-certificate": "c.pem",
                            "client-key": str(tmp_path / "k.pem"),
                        },
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    creds = load_kubeconfig(ref)
    assert (creds.server, creds.ca_pem, creds.token, creds.client_cert_pem, creds.client_key_pem) == (
        "https://h:1",
        b"CA",
        "from-file",
        b"CERT",
        b"KEY",
    )
    assert creds.token_file == tmp_path / "tok"
    (tmp_path / "tok").write_text("rotated\n")
    assert creds.auth_headers() == {"Authorization": "Bearer rotated"}


def test_load_rejects_unsupported_and_conflicting(tmp_path: Path) -> None:
    def cfg(cluster: dict[str, object], user: dict[str, object]) -> Path:
        p = tmp_path / "k.yaml"
        p.write_text(
            yaml.safe_dump(
                {
                    "clusters": [{"name": "c", "cluster": cluster}],
                    "users": [{"name": "u", "user": user}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        return p

    ca = base64.b64encode(b"CA").decode()
    with pytest.raises(KubeconfigError, match="exclusive"):
        load_kubeconfig(
            cfg(
                {"server": "https://h", "certificate-authority-data": ca, "insecure-skip-tls-verify": True},
                {},
            )
        )
    with pytest.raises(KubeconfigError, match="exec"):
        load_kubeconfig(cfg({"server": "https://h"}, {"exec": {"command": "x"}}))
    with pytest.raises(KubeconfigError, match="together"):
        load_kubeconfig(cfg({"server": "https://h"}, {"client-certificate-data": ca}))
    with pytest.raises(KubeconfigError, match="base64"):
        load_kubeconfig(cfg({"server": "https://h", "certificate-authority-data": "!!!"}, {}))


# ============================================================================================ live server


@dataclass
class Server:
    url: str
    paths: CertPaths
    admin_token: str
    tmp: Path


async def _api(request: web.Request) -> web.Response:
    host = request.host
    return web.json_response(
        {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
        }
    )


async def _apis(request: web.Request) -> web.Response:
    return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})


async def _configmaps(request: web.Request) -> web.Response:
    return web.json_response(
        {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}
    )


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    data = tmp_path / "data"
    paths = ensure_serving_certs(data)
    token_path, admin_token = ensure_token_file(data)
    assert admin_token is not None
    with token_path.open("a") as f:
        f.write("bob-token,bob,1002\nvera-token,vera,1003,flotilla:viewers\n")
    authn = TokenAuthenticator.from_file(token_path)
    app = web.Application(middlewares=[auth_middleware(authn, Authorizer(), anonymous=False)])
    # the official Python client asks for "/api/" and "/apis/" (trailing slash); kubectl for "/api" and "/apis"
    for path, handler in (("/api", _api), ("/api/", _api), ("/apis", _apis), ("/apis/", _apis)):
        app.router.add_get(path, handler)
    app.router.add_get("/api/v1/namespaces/{ns}/configmaps", _configmaps)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl_context(paths))
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Server(f"https://127.0.0.1:{port}", paths, admin_token, tmp_path)
    finally:
        await runner.cleanup()


def _kubectl(kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["HOME"] = str(home)
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--request-timeout=20s", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


async def _run_kubectl(kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(_kubectl, kubeconfig, home, *args)


@pytest.mark.kubectl
@needs_kubectl
async def test_kubectl_bearer_token(server: Server) -> None:
    good = write_kubeconfig(
        server.tmp / "good.yaml", server=server.url, token=server.admin_token, ca_pem=server.paths.ca_pem()
    )
    r = await _run_kubectl(good, server.tmp / "home", "get", "--raw", "/api")
    assert r.returncode == 0, r.stderr
    assert '"APIVersions"' in r.stdout and '"v1"' in r.stdout

    r = await _run_kubectl(good, server.tmp / "home", "get", "--raw", "/apis")
    assert r.returncode == 0, r.stderr
    assert "APIGroupList" in r.stdout

    bad = write_kubeconfig(
        server.tmp / "bad.yaml", server=server.url, token="wrong", ca_pem=server.paths.ca_pem()
    )
    r = await _run_kubectl(bad, server.tmp / "home-bad", "get", "--raw", "/api")
    assert r.returncode != 0
    assert "You must be logged in to the server" in r.stderr and "Unauthorized" in r.stderr, r.stderr

    # (No credential-less https kubeconfig here: kubectl would prompt for a username on stdin instead of
    # sending the request.)


@pytest.mark.kubectl
@needs_kubectl
async def test_kubectl_forbidden_and_viewer(server: Server) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    bob = write_kubeconfig(
        server.tmp / "bob.yaml", server=server.url, token="bob-token", ca_pem=server.paths.ca_pem()
    )
    r = await _run_kubectl(bob, server.tmp / "home-bob", "get", "--raw", path)
    assert r.returncode != 0
    assert (
        'configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" '
        'in the namespace "default"'
    ) in r.stderr, r.stderr
    assert "Forbidden" in r.stderr

    vera = write_kubeconfig(
        server.tmp / "vera.yaml", server=server.url, token="vera-token", ca_pem=server.paths.ca_pem()
    )
    r = await _run_kubectl(vera, server.tmp / "home-vera", "get", "--raw", path)
    assert r.returncode == 0, r.stderr
    assert "ConfigMapList" in r.stdout


@pytest.mark.kubectl
@needs_kubectl
async def test_kubectl_client_certificate(server: Server) -> None:
    cert_pem, key_pem = issue_client_cert(server.paths, "carol", [MASTERS_GROUP])
    k = write_kubeconfig(
        server.tmp / "cert.yaml",
        server=server.url,
        ca_pem=server.paths.ca_pem(),
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
        user="carol",
    )
    r = await _run_kubectl(
        k, server.tmp / "home-cert", "get", "--raw", "/api/v1/namespaces/default/configmaps"
    )
    assert r.returncode == 0, r.stderr
    assert "ConfigMapList" in r.stdout

    # a certificate whose subject has no admin group authenticates but is not authorised for resources
    cert_pem, key_pem = issue_client_cert(server.paths, "eve", ["team-a"])
    k2 = write_kubeconfig(
        server.tmp / "cert2.yaml",
        server=server.url,
        ca_pem=server.paths.ca_pem(),
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
    )
    r = await _run_kubectl(
        k2, server.tmp / "home-cert2", "get", "--raw", "/api/v1/namespaces/default/configmaps"
    )
    assert r.returncode != 0
    assert 'User "eve" cannot list' in r.stderr, r.stderr


@pytest.mark.kubectl
@needs_kubectl
async def test_kubectl_rejects_untrusted_server(server: Server, tmp_path: Path) -> None:
    other_ca = ensure_serving_certs(tmp_path / "other").ca_pem()
    k = write_kubeconfig(
        tmp_path / "wrongca.yaml", server=server.url, token=server.admin_token, ca_pem=other_ca
    )
    r = await _run_kubectl(k, tmp_path / "home-wrongca", "get", "--raw", "/api")
    assert r.returncode != 0
    assert "certificate" in r.stderr.lower(), r.stderr


def _python_client_calls(kubeconfig: Path) -> tuple[list[str], object, list[object]]:
    import kubernetes

    api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    try:
        versions = kubernetes.client.CoreApi(api).get_api_versions()
        # raw call (kubernetes client 37 / openapi-generator 7 API: param_serialize + call_api)
        method, url, headers, body, post = api.param_serialize("GET", "/api", auth_settings=["BearerToken"])
        resp = api.call_api(method, url, headers, body, post)
        resp.read()
        assert resp.status == 200, resp.data
        raw = json.loads(resp.data)
        groups = kubernetes.client.ApisApi(api).get_api_versions()
        return list(versions.versions), raw, list(groups.groups)
    finally:
        api.close()


async def test_python_client_token_and_cert(server: Server) -> None:
    import kubernetes

    good = write_kubeconfig(
        server.tmp / "py.yaml", server=server.url, token=server.admin_token, ca_pem=server.paths.ca_pem()
    )
    versions, raw, groups = await asyncio.to_thread(_python_client_calls, good)
    assert versions == ["v1"]
    assert isinstance(raw, dict) and raw["kind"] == "APIVersions"
    assert groups == []

    cert_pem, key_pem = issue_client_cert(server.paths, "carol", [MASTERS_GROUP])
    cert_cfg = write_kubeconfig(
        server.tmp / "py-cert.yaml",
        server=server.url,
        ca_pem=server.paths.ca_pem(),
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
    )
    versions, _, _ = await asyncio.to_thread(_python_client_calls, cert_cfg)
    assert versions == ["v1"]

    bad = write_kubeconfig(
        server.tmp / "py-bad.yaml", server=server.url, token="nope", ca_pem=server.paths.ca_pem()
    )
    with pytest.raises(kubernetes.client.ApiException) as info:
        await asyncio.to_thread(_python_client_calls, bad)
    assert info.value.status == 401
    assert yaml.safe_load(info.value.body)["reason"] == "Unauthorized"


async def test_flotilla_credentials_with_aiohttp(server: Server) -> None:
    cert_pem, key_pem = issue_client_cert(server.paths, "carol", [MASTERS_GROUP])
    k = server.tmp / "multi.yaml"
    merge_contexts(
        k,
        [
            KubeconfigEntry(
                context="token", server=server.url, token=server.admin_token, ca_pem=server.paths.ca_pem()
            ),
            KubeconfigEntry(
                context="cert",
                server=server.url,
                ca_pem=server.paths.ca_pem(),
                client_cert_pem=cert_pem,
                client_key_pem=key_pem,
            ),
            KubeconfigEntry(
                context="insecure", server=server.url, token=server.admin_token, insecure_skip_tls_verify=True
            ),
        ],
    )
    for ctx in ("token", "cert", "insecure"):
        creds = load_kubeconfig(k, ctx)
        ssl_ctx = creds.ssl_context()
        assert isinstance(ssl_ctx, ssl.SSLContext)
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{creds.server}/api/v1/namespaces/default/configmaps",
                ssl=ssl_ctx,
                headers=creds.auth_headers(),
            ) as r,
        ):
            assert r.status == 200, (ctx, await r.text())
            assert (await r.json())["kind"] == "ConfigMapList"

    # the chain also passes strict X.509 verification (the default of Python 3.13+ clients)
    strict = load_kubeconfig(k, "cert").ssl_context()
    assert strict is not None
    strict.verify_flags |= ssl.VERIFY_X509_STRICT
    async with aiohttp.ClientSession() as session, session.get(f"{server.url}/api/", ssl=strict) as r:
        assert r.status == 200

    # without the CA the default trust store does not know our CA
    creds = load_kubeconfig(k, "token")
    plain = ssl.create_default_context()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await session.get(f"{creds.server}/api", ssl=plain, headers=creds.auth_headers())
