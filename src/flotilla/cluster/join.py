"""The objects ``flotilla join`` writes to the control plane, as pure functions.

A Push-mode join registers a member with:

* the namespace ``karmada-cluster`` (``--cluster-namespace``) if it is missing;
* a Secret named after the cluster there - what the controllers use to reach the member (``spec.secretRef``);
  it is owned by the Cluster (ownerReference), so it goes when the Cluster goes. Its data (base64; each key only
  when the member kubeconfig has it): Karmada's ``token`` and ``caBundle``; Flotilla's ``tls.crt`` / ``tls.key``
  (a client certificate and its key, PEM) and ``exec`` (an exec credential plugin's kubeconfig stanza, JSON, that
  the controller-manager runs for a fresh token);
* the Cluster: ``spec.syncMode: Push``, ``spec.apiEndpoint`` (the kubeconfig's server), ``spec.secretRef``,
  ``spec.insecureSkipTLSVerification`` when the kubeconfig skips verification, ``spec.id`` (the UID of the
  member's ``kube-system`` namespace, when readable), and provider/region/zones when given.

Joining again updates what changed (endpoint, credentials, ...) and leaves everything else - taints, resource
models, labels - as it is.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flotilla.cluster.names import cluster_name_errors

__all__ = [
    "CLUSTER_API_VERSION",
    "DEFAULT_CLUSTER_NAMESPACE",
    "SECRET_CA_KEY",
    "SECRET_CERT_KEY",
    "SECRET_EXEC_KEY",
    "SECRET_KEYS",
    "SECRET_KEY_KEY",
    "SECRET_TOKEN_KEY",
    "JoinSpec",
    "cluster_object",
    "cluster_spec",
    "cluster_spec_patch",
    "namespace_object",
    "owner_references_patch",
    "secret_data",
    "secret_data_patch",
    "secret_object",
    "validate_join",
]

CLUSTER_API_VERSION = "cluster.karmada.io/v1alpha1"
DEFAULT_CLUSTER_NAMESPACE = "karmada-cluster"
SECRET_TOKEN_KEY = "token"
SECRET_CA_KEY = "caBundle"
#: a client certificate and its key (PEM), as in a ``kubernetes.io/tls`` Secret; Karmada's Secret has no such keys
SECRET_CERT_KEY = "tls.crt"
SECRET_KEY_KEY = "tls.key"
#: an exec credential plugin's kubeconfig stanza (JSON), run by the controller-manager; Flotilla only
SECRET_EXEC_KEY = "exec"
#: every key join writes (and removes when the kubeconfig no longer has it)
SECRET_KEYS = (SECRET_TOKEN_KEY, SECRET_CA_KEY, SECRET_CERT_KEY, SECRET_KEY_KEY, SECRET_EXEC_KEY)


@dataclass(frozen=True)
class JoinSpec:
    """Everything a join decides from: the cluster's name, how to reach it, and how to describe it."""

    name: str
    api_endpoint: str
    token: str | None = None
    ca_pem: bytes | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    #: an exec plugin's stanza (:meth:`flotilla.client.exec_credential.ExecConfig.to_stored`)
    exec_config: Mapping[str, Any] | None = None
    insecure_skip_tls_verification: bool = False
    cluster_namespace: str = DEFAULT_CLUSTER_NAMESPACE
    cluster_id: str | None = None
    provider: str | None = None
    region: str | None = None
    zones: tuple[str, ...] = field(default_factory=tuple)

    @property
    def secret_name(self) -> str:
        return self.name


def validate_join(spec: JoinSpec) -> list[str]:
    """Problems that make the join pointless (the API server would refuse the Cluster, or it could not be
    reached), as sentences."""
    problems = [f"invalid cluster name {spec.name!r}: {e}" for e in cluster_name_errors(spec.name)]
    if not spec.api_endpoint:
        problems.append("the member kubeconfig has no server")
    if not spec.cluster_namespace:
        problems.append("--cluster-namespace must not be empty")
    return problems


def namespace_object(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def secret_data(spec: JoinSpec) -> dict[str, str]:
    data: dict[str, str] = {}
    if spec.token:
        data[SECRET_TOKEN_KEY] = base64.b64encode(spec.token.encode()).decode("ascii")
    if spec.ca_pem:
        data[SECRET_CA_KEY] = base64.b64encode(spec.ca_pem).decode("ascii")
    if spec.client_cert_pem and spec.client_key_pem:
        data[SECRET_CERT_KEY] = base64.b64encode(spec.client_cert_pem).decode("ascii")
        data[SECRET_KEY_KEY] = base64.b64encode(spec.client_key_pem).decode("ascii")
    if spec.exec_config:
        stanza = json.dumps(dict(spec.exec_config), sort_keys=True, separators=(",", ":"))
        data[SECRET_EXEC_KEY] = base64.b64encode(stanza.encode()).decode("ascii")
    return data


def secret_object(spec: JoinSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": spec.secret_name, "namespace": spec.cluster_namespace},
        "type": "Opaque",
        "data": secret_data(spec),
    }


def secret_data_patch(existing: Mapping[str, Any], spec: JoinSpec) -> dict[str, Any] | None:
    """Merge patch bringing an existing Secret's credentials (:data:`SECRET_KEYS`) in line (a key the kubeconfig
    no longer has is removed; other keys are left alone), or None."""
    current = existing.get("data") or {}
    desired = secret_data(spec)
    changes: dict[str, Any] = {}
    for key in SECRET_KEYS:
        if current.get(key) != desired.get(key):
            changes[key] = desired.get(key)  # None removes the key
    return {"data": changes} if changes else None


def cluster_spec(spec: JoinSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "syncMode": "Push",
        "apiEndpoint": spec.api_endpoint,
        "secretRef": {"namespace": spec.cluster_namespace, "name": spec.secret_name},
    }
    if spec.insecure_skip_tls_verification:
        out["insecureSkipTLSVerification"] = True
    if spec.cluster_id:
        out["id"] = spec.cluster_id
    if spec.provider:
        out["provider"] = spec.provider
    if spec.region:
        out["region"] = spec.region
    if spec.zones:
        out["zones"] = list(spec.zones)
    return out


def cluster_object(spec: JoinSpec) -> dict[str, Any]:
    return {"apiVersion": CLUSTER_API_VERSION, "kind": "Cluster", "metadata": {"name": spec.name},
            "spec": cluster_spec(spec)}


def cluster_spec_patch(existing: Mapping[str, Any], spec: JoinSpec) -> dict[str, Any] | None:
    """Merge patch of the join-owned spec fields that differ on an existing Cluster, or None.

    ``insecureSkipTLSVerification`` is cleared (null) when the kubeconfig no longer skips verification;
    id/provider/region/zones are only set, never cleared (a join without them leaves them alone).
    """
    current = existing.get("spec") or {}
    desired = cluster_spec(spec)
    changes: dict[str, Any] = {k: v for k, v in desired.items() if current.get(k) != v}
    if not spec.insecure_skip_tls_verification and current.get("insecureSkipTLSVerification"):
        changes["insecureSkipTLSVerification"] = None
    if not changes:
        return None
    patch: dict[str, Any] = {"spec": changes}
    rv = (existing.get("metadata") or {}).get("resourceVersion")
    if rv:
        patch["metadata"] = {"resourceVersion": rv}
    return patch


def owner_references_patch(secret: Mapping[str, Any], cluster: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge patch making ``cluster`` an owner of ``secret`` (other owners kept), or None if it is one."""
    md = cluster.get("metadata") or {}
    uid, name = md.get("uid"), md.get("name")
    if not uid or not name:
        return None
    refs = [dict(r) for r in (secret.get("metadata") or {}).get("ownerReferences") or [] if isinstance(r, dict)]
    if any(r.get("uid") == uid for r in refs):
        return None
    refs = [r for r in refs if not (r.get("kind") == "Cluster" and r.get("name") == name
                                    and str(r.get("apiVersion", "")).startswith("cluster.karmada.io/"))]
    refs.append({"apiVersion": CLUSTER_API_VERSION, "kind": "Cluster", "name": name, "uid": uid})
    patch: dict[str, Any] = {"metadata": {"ownerReferences": refs}}
    rv = (secret.get("metadata") or {}).get("resourceVersion")
    if rv:
        patch["metadata"]["resourceVersion"] = rv
    return patch
