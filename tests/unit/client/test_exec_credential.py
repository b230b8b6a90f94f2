"""Exec credential plugins: reading the kubeconfig stanza, what the plugin is told, reading what it prints, expiry,
and the stored form that join puts in a cluster's Secret and the controller-manager reads back."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from flotilla.client.exec_credential import (
    ClusterInfo,
    ExecConfig,
    ExecConfigError,
    exec_info,
    parse_exec_credential,
)
from flotilla.client.kubeconfig import KubeconfigError, load_kubeconfig
from flotilla.cluster.join import JoinSpec, secret_data, secret_data_patch
from flotilla.runtime.members import MemberClientError, credentials_for

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
EKS = {"apiVersion": V1BETA1, "command": "aws", "args": ["--region", "eu-west-1", "eks", "get-token",
                                                        "--cluster-name", "prod"],
       "env": [{"name": "AWS_PROFILE", "value": "ops"}]}
GKE = {"apiVersion": V1BETA1, "command": "gke-gcloud-auth-plugin", "provideClusterInfo": True,
       "installHint": "gcloud components install gke-gcloud-auth-plugin", "interactiveMode": "IfAvailable"}


def credential(status: dict[str, Any], api_version: str = V1) -> bytes:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status}).encode()


def test_eks_and_gke_stanzas_are_read_as_kubectl_reads_them() -> None:
    eks = ExecConfig.from_kubeconfig(EKS)
    assert (eks.command, eks.args, eks.env, eks.interactive_mode) == (
        "aws", ("--region", "eu-west-1", "eks", "get-token", "--cluster-name", "prod"), (("AWS_PROFILE", "ops"),),
        "IfAvailable")  # v1beta1 defaults interactiveMode
    gke = ExecConfig.from_kubeconfig(GKE)
    assert gke.provide_cluster_info and gke.install_hint.startswith("gcloud components")


def test_a_relative_command_path_is_resolved_against_the_kubeconfig_directory(tmp_path: Path) -> None:
    assert ExecConfig.from_kubeconfig({**EKS, "command": "./bin/plugin"}, base=tmp_path).command == \
        str(tmp_path / "bin" / "plugin")
    assert ExecConfig.from_kubeconfig(EKS, base=tmp_path).command == "aws"  # looked up on PATH


@pytest.mark.parametrize("stanza, message", [
    ({"apiVersion": V1}, "command must be set"),
    ({"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"}, "is not supported"),
    ({"command": "x", "apiVersion": V1}, "interactiveMode must be set"),
    ({"command": "x", "apiVersion": V1, "interactiveMode": "Always"}, "would get no terminal"),
    ({"command": "x", "apiVersion": V1BETA1, "interactiveMode": "Sometimes"}, "is not one of"),
    ({"command": "x", "apiVersion": V1BETA1, "args": "get-token"}, "args must be a list"),
    ({"command": "x", "apiVersion": V1BETA1, "env": [{"value": "v"}]}, r"env\[0\] must have a name"),
])
def test_malformed_stanzas_are_refused_with_the_field(stanza: dict[str, Any], message: str) -> None:
    with pytest.raises(ExecConfigError, match=message):
        ExecConfig.from_kubeconfig(stanza)


def test_the_plugin_is_told_it_is_not_interactive_and_about_the_cluster_only_when_asked() -> None:
    assert ClusterInfo("https://h:6443").to_json() == {"server": "https://h:6443", "config": None}  # as kubectl
    cluster = ClusterInfo("https://h:6443", ca_pem=b"CA", tls_server_name="api", config={"audience": "x"})
    assert exec_info(ExecConfig.from_kubeconfig(EKS), cluster) == {
        "apiVersion": V1BETA1, "kind": "ExecCredential", "spec": {"interactive": False}}
    assert exec_info(ExecConfig.from_kubeconfig(GKE), cluster)["spec"] == {
        "interactive": False,
        "cluster": {"server": "https://h:6443", "tls-server-name": "api",
                    "certificate-authority-data": base64.b64encode(b"CA").decode(), "config": {"audience": "x"}}}


def test_a_token_with_an_expiry_expires_then() -> None:
    result = parse_exec_credential(credential({"token": "k8s-aws-v1.secret",
                                               "expirationTimestamp": "2030-01-02T03:04:05Z"}), V1)
    at = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert (result.token, result.expires_at) == ("k8s-aws-v1.secret", at)
    assert not result.expired(at - dt.timedelta(seconds=1)) and result.expired(at)
    forever = parse_exec_credential(credential({"token": "t"}, V1BETA1), V1BETA1)
    assert forever.expires_at is None and not forever.expired(dt.datetime(2999, 1, 1, tzinfo=dt.UTC))
    assert "secret" not in repr(result)  # a credential never shows in a log line


def test_a_client_certificate_credential() -> None:
    result = parse_exec_credential(credential({"clientCertificateData": "CERT", "clientKeyData": "KEY"}), V1)
    assert (result.token, result.client_cert_pem, result.client_key_pem) == (None, b"CERT", b"KEY")


@pytest.mark.parametrize("output, message", [
    (b"Unable to locate credentials", "printed no ExecCredential JSON"),
    (b'{"kind": "Other"}', "not an ExecCredential"),
    (credential({"token": "t"}, V1BETA1), "apiVersion 'client.authentication.k8s.io/v1beta1'"),
    (credential({}), "neither status.token"),
    (credential({"clientCertificateData": "CERT"}), "must be given together"),
    (credential({"token": "t", "expirationTimestamp": "tomorrow"}), "not an RFC 3339 time"),
    (credential({"token": 5}), "status.token must be a string"),
])
def test_unusable_plugin_output_is_refused(output: bytes, message: str) -> None:
    with pytest.raises(ExecConfigError, match=message):
        parse_exec_credential(output, V1)


def kubeconfig(tmp_path: Path, user: dict[str, Any], extensions: list[dict[str, Any]] | None = None) -> Path:
    cluster: dict[str, Any] = {"server": "https://h:6443"}
    if extensions:
        cluster["extensions"] = extensions
    p = tmp_path / "config"
    p.write_text(yaml.safe_dump({"clusters": [{"name": "c", "cluster": cluster}],
                                 "users": [{"name": "u", "user": user}],
                                 "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                                 "current-context": "x"}))
    return p


def test_kubeconfig_exec_user_and_its_cluster_extension(tmp_path: Path) -> None:
    ext = [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "a"}}]
    creds = load_kubeconfig(kubeconfig(tmp_path, {"exec": GKE}, ext))
    assert creds.exec is not None and creds.exec.command == "gke-gcloud-auth-plugin" and creds.has_credentials
    assert creds.cluster_info().config == {"audience": "a"}
    assert not load_kubeconfig(kubeconfig(tmp_path, {})).has_credentials
    with pytest.raises(KubeconfigError, match="interactiveMode must be set"):
        load_kubeconfig(kubeconfig(tmp_path, {"exec": {"apiVersion": V1, "command": "x"}}))


@pytest.mark.parametrize("provider, plugin", [("gcp", "gke-gcloud-auth-plugin"), ("azure", "kubelogin"),
                                              ("oidc", "kubelogin")])
def test_auth_provider_names_the_exec_plugin_that_replaces_it(tmp_path: Path, provider: str, plugin: str) -> None:
    with pytest.raises(KubeconfigError, match=f"auth-provider '{provider}' is not supported.*{plugin}"):
        load_kubeconfig(kubeconfig(tmp_path, {"auth-provider": {"name": provider, "config": {}}}))


def cluster(name: str = "m") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"apiEndpoint": "https://h:6443"}}


def test_stored_exec_and_certificate_come_back_as_the_member_client_credentials(tmp_path: Path) -> None:
    stanza = ExecConfig.from_kubeconfig({**GKE, "command": "./plugin"}, base=tmp_path,
                                        cluster_config={"audience": "a"})
    spec = JoinSpec("m", "https://h:6443", ca_pem=b"CA", client_cert_pem=b"CERT", client_key_pem=b"KEY",
                    exec_config=stanza.to_stored())
    data = secret_data(spec)
    assert sorted(data) == ["caBundle", "exec", "tls.crt", "tls.key"]
    creds = credentials_for(cluster(), {"data": data})
    assert (creds.ca_pem, creds.client_cert_pem, creds.client_key_pem, creds.token) == (b"CA", b"CERT", b"KEY", None)
    assert creds.exec == stanza  # the resolved command and the cluster extension survive the round trip
    assert creds.cluster_info().config == {"audience": "a"}


def test_rejoining_with_a_token_removes_the_stored_certificate_and_exec() -> None:
    old = secret_data(JoinSpec("m", "https://h", client_cert_pem=b"C", client_key_pem=b"K",
                               exec_config=ExecConfig.from_kubeconfig(EKS).to_stored()))
    patch = secret_data_patch({"data": old}, JoinSpec("m", "https://h", token="t"))
    assert patch == {"data": {"token": base64.b64encode(b"t").decode(), "tls.crt": None, "tls.key": None,
                              "exec": None}}


@pytest.mark.parametrize("data, message", [
    ({"tls.crt": base64.b64encode(b"C").decode()}, "tls.crt and data.tls.key must be given together"),
    ({"exec": base64.b64encode(b"not json").decode()}, "data.exec is not JSON"),
    ({"exec": base64.b64encode(json.dumps({"command": "x"}).encode()).decode()}, "apiVersion None"),
])
def test_a_malformed_stored_credential_is_a_member_client_error(data: dict[str, str], message: str) -> None:
    with pytest.raises(MemberClientError, match=message):
        credentials_for(cluster(), {"data": data})
