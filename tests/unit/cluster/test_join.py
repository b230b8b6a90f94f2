"""The objects `flotilla join` writes."""

from __future__ import annotations

import base64

from flotilla.cli.argtypes import parse_duration
from flotilla.cli.cluster_commands import join_spec_from_credentials
from flotilla.client.kubeconfig import ClusterCredentials
from flotilla.cluster.join import (
    JoinSpec,
    cluster_object,
    cluster_spec_patch,
    namespace_object,
    owner_references_patch,
    secret_data_patch,
    secret_object,
    validate_join,
)

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_cluster_and_secret_for_a_token_and_ca() -> None:
    spec = JoinSpec("member1", "https://10.0.0.1:6443", token="abc", ca_pem=CA, cluster_id="uid-1",
                    provider="aws", region="eu-west-1", zones=("a", "b"))
    assert cluster_object(spec) == {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "member1"},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://10.0.0.1:6443",
                 "secretRef": {"namespace": "karmada-cluster", "name": "member1"}, "id": "uid-1",
                 "provider": "aws", "region": "eu-west-1", "zones": ["a", "b"]},
    }
    assert secret_object(spec) == {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "member1", "namespace": "karmada-cluster"},
        "type": "Opaque", "data": {"token": b64(b"abc"), "caBundle": b64(CA)},
    }
    assert namespace_object("karmada-cluster") == {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": "karmada-cluster"}}


def test_plain_http_member_without_credentials() -> None:
    spec = JoinSpec("m2", "http://127.0.0.1:5000", cluster_namespace="other")
    assert secret_object(spec)["data"] == {}
    body = cluster_object(spec)
    assert body["spec"] == {"syncMode": "Push", "apiEndpoint": "http://127.0.0.1:5000",
                            "secretRef": {"namespace": "other", "name": "m2"}}


def test_insecure_skip_tls_verification() -> None:
    spec = JoinSpec("m", "https://h:1", token="t", insecure_skip_tls_verification=True)
    assert cluster_object(spec)["spec"]["insecureSkipTLSVerification"] is True


def test_validation() -> None:
    assert validate_join(JoinSpec("member1", "http://h:1")) == []
    problems = validate_join(JoinSpec("Member_1", "", cluster_namespace=""))
    assert any("invalid cluster name 'Member_1'" in p for p in problems)
    assert "the member kubeconfig has no server" in problems
    assert any("--cluster-namespace" in p for p in problems)
    assert validate_join(JoinSpec("x" * 49, "http://h:1"))  # Karmada: at most 48 characters


def test_rejoin_patch_updates_only_what_changed() -> None:
    spec = JoinSpec("m", "http://new:1")
    existing = {"metadata": {"name": "m", "resourceVersion": "5"},
                "spec": {"syncMode": "Push", "apiEndpoint": "http://old:1",
                         "secretRef": {"namespace": "karmada-cluster", "name": "m"},
                         "insecureSkipTLSVerification": True, "region": "r1",
                         "taints": [{"key": "k", "effect": "NoSchedule"}]}}
    assert cluster_spec_patch(existing, spec) == {
        "spec": {"apiEndpoint": "http://new:1", "insecureSkipTLSVerification": None},
        "metadata": {"resourceVersion": "5"},
    }
    same = {"metadata": {"name": "m"}, "spec": {**cluster_object(spec)["spec"], "region": "r1"}}
    assert cluster_spec_patch(same, spec) is None  # region not given: left alone


def test_secret_data_patch() -> None:
    spec = JoinSpec("m", "https://h:1", token="new", ca_pem=None)
    existing = {"data": {"token": b64(b"old"), "caBundle": b64(CA), "extra": "eA=="}}
    assert secret_data_patch(existing, spec) == {"data": {"token": b64(b"new"), "caBundle": None}}
    assert secret_data_patch({"data": {"token": b64(b"new")}}, spec) is None


def test_owner_reference_patch() -> None:
    cluster = {"metadata": {"name": "m", "uid": "u1"}}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u0"}
    stale = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": "m", "uid": "old"}
    secret = {"metadata": {"name": "m", "resourceVersion": "3", "ownerReferences": [other, stale]}}
    assert owner_references_patch(secret, cluster) == {"metadata": {"resourceVersion": "3", "ownerReferences": [
        other, {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": "m", "uid": "u1"}]}}
    owned = {"metadata": {"ownerReferences": [{"kind": "Cluster", "name": "m", "uid": "u1"}]}}
    assert owner_references_patch(owned, cluster) is None
    assert owner_references_patch(secret, {"metadata": {"name": "m"}}) is None


def test_join_spec_from_kubeconfig_credentials() -> None:
    creds = ClusterCredentials(server="https://h:6443", token="tok", ca_pem=CA, insecure=False, context="c")
    spec = join_spec_from_credentials("m", creds, cluster_id="id", zones=("z1",))
    assert (spec.api_endpoint, spec.token, spec.ca_pem, spec.cluster_id, spec.zones) == (
        "https://h:6443", "tok", CA, "id", ("z1",))
    insecure = join_spec_from_credentials("m", ClusterCredentials(server="https://h:1", insecure=True))
    assert insecure.insecure_skip_tls_verification and insecure.token is None


def test_parse_duration() -> None:
    assert parse_duration("60s") == 60 and parse_duration("1m30s") == 90 and parse_duration("500ms") == 0.5
    assert parse_duration("2") == 2 and parse_duration("1h") == 3600 and parse_duration("1.5s") == 1.5
    for bad in ("", "abc", "5x", "1m30"):
        try:
            parse_duration(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
