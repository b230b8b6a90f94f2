"""Names that Karmada derives for the objects of the propagation pipeline.

Pure functions, no I/O. Every algorithm reproduces Karmada's ``pkg/util/names`` exactly, so names
produced here agree with the names a real Karmada control plane would pick for the same template:

* binding (ResourceBinding and ClusterResourceBinding alike): ``lower(name' + "-" + kind)`` where
  ``name'`` is the template name with every ``:`` replaced by ``.`` (RBAC objects such as
  ``system:controller:x``). Nothing is truncated: a name that is already near the 253-character limit
  gives an over-long binding name, exactly as upstream.
* Work: ``lower(name') + "-" + hash`` where ``hash`` is the FNV-32a hash of
  ``lower(namespace + "-" + lower(name') + "-" + kind)`` (``lower(lower(name') + "-" + kind)`` for
  cluster-scoped objects), written as decimal digits and then mapped through the Kubernetes
  ``SafeEncodeString`` alphabet. ``default/nginx`` Deployment -> ``nginx-687f7fb96f``.
* execution namespace: ``karmada-es-<cluster>``.

Upstream hashes with ``kr/pretty``'s ``%v`` of the string, which for a Go string is the string itself,
so the hash input is simply the UTF-8 bytes of the string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEPENDED_BY_LABEL_KEY_PREFIX",
    "EXECUTION_SPACE_PREFIX",
    "NAMESPACE_DEFAULT",
    "NAMESPACE_KARMADA_CLUSTER",
    "NAMESPACE_KARMADA_SYSTEM",
    "SAFE_ENCODE_ALPHABET",
    "cluster_name_from_execution_space",
    "depended_by_label_key",
    "fnv32a",
    "generate_binding_name",
    "generate_binding_reference_key",
    "generate_derived_service_name",
    "generate_endpoint_slice_name",
    "generate_estimator_service_name",
    "generate_execution_space_name",
    "generate_impersonation_secret_name",
    "generate_policy_name",
    "generate_role_name",
    "generate_service_account_name",
    "generate_work_name",
    "gvk_string",
    "is_execution_space",
    "is_reserved_namespace",
    "namespaced_key",
    "safe_encode_string",
    "work_name_for",
]

EXECUTION_SPACE_PREFIX = "karmada-es-"
NAMESPACE_KARMADA_SYSTEM = "karmada-system"
NAMESPACE_KARMADA_CLUSTER = "karmada-cluster"
NAMESPACE_DEFAULT = "default"

#: Label key prefix of the label an attached (dependency) binding carries for each binding that
#: depends on it; the suffix is :func:`generate_binding_reference_key` of that binding.
DEPENDED_BY_LABEL_KEY_PREFIX = "resourcebinding.karmada.io/depended-by-"

#: ``k8s.io/apimachinery/pkg/util/rand`` alphabet: no vowels, no 0/1/3 (avoids bad words and confusion).
SAFE_ENCODE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193
_ESTIMATOR_SERVICE_PREFIX = "karmada-scheduler-estimator"


def fnv32a(data: str | bytes) -> int:
    """32-bit FNV-1a hash (Go's ``hash/fnv.New32a``) of the UTF-8 bytes of ``data``."""
    raw = data.encode() if isinstance(data, str) else data
    h = _FNV32_OFFSET
    for byte in raw:
        h ^= byte
        h = (h * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def safe_encode_string(s: str) -> str:
    """``rand.SafeEncodeString``: map each character through :data:`SAFE_ENCODE_ALPHABET` by code point."""
    return "".join(SAFE_ENCODE_ALPHABET[ord(c) % len(SAFE_ENCODE_ALPHABET)] for c in s)


def _hash_suffix(s: str) -> str:
    return safe_encode_string(str(fnv32a(s)))


def _dns_safe(name: str) -> str:
    # Only ':' is replaced; other characters that are illegal in a DNS subdomain are left alone (upstream).
    return name.replace(":", ".")


def generate_binding_name(kind: str, name: str) -> str:
    """Name of the ResourceBinding / ClusterResourceBinding made for a template ``kind``/``name``."""
    return (_dns_safe(name) + "-" + kind).lower()


def generate_work_name(kind: str, name: str, namespace: str) -> str:
    """Name of the Work made for an object (``namespace`` is ``""`` for cluster-scoped objects)."""
    name = _dns_safe(name).lower()
    hashed = (name + "-" + kind) if not namespace else (namespace + "-" + name + "-" + kind)
    return f"{name}-{_hash_suffix(hashed.lower())}"


def work_name_for(obj: Mapping[str, Any]) -> str:
    """:func:`generate_work_name` for a Kubernetes object (uses ``kind`` and ``metadata``)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return generate_work_name(
        str(obj.get("kind") or ""), str(meta.get("name") or ""), str(meta.get("namespace") or "")
    )


def generate_execution_space_name(cluster_name: str) -> str:
    """The execution namespace that holds the Works of a member cluster."""
    return EXECUTION_SPACE_PREFIX + cluster_name


def is_execution_space(namespace: str) -> bool:
    return namespace.startswith(EXECUTION_SPACE_PREFIX)


def cluster_name_from_execution_space(namespace: str) -> str:
    """The member cluster an execution namespace belongs to (``GetClusterName``).

    Raises ValueError when the namespace does not have the ``karmada-es-`` prefix. ``"karmada-es-"``
    itself yields ``""`` without an error, as upstream.
    """
    if not is_execution_space(namespace):
        raise ValueError("the execution space name is in wrong format")
    return namespace[len(EXECUTION_SPACE_PREFIX) :]


def is_reserved_namespace(namespace: str) -> bool:
    """``karmada-system``, ``karmada-cluster`` and every ``karmada-es-*`` namespace."""
    return namespace in (NAMESPACE_KARMADA_SYSTEM, NAMESPACE_KARMADA_CLUSTER) or is_execution_space(namespace)


def namespaced_key(namespace: str, name: str) -> str:
    """``namespace/name``, or ``name`` when the namespace is empty."""
    return f"{namespace}/{name}" if namespace else name


def generate_binding_reference_key(namespace: str, name: str) -> str:
    """Hash key of a binding (FNV-32a of ``namespace/name``), used in depended-by label keys."""
    return _hash_suffix(namespaced_key(namespace, name))


def depended_by_label_key(binding_namespace: str, binding_name: str) -> str:
    """``resourcebinding.karmada.io/depended-by-<hash>``: the label an attached binding carries."""
    return DEPENDED_BY_LABEL_KEY_PREFIX + generate_binding_reference_key(binding_namespace, binding_name)


def gvk_string(api_version: str, kind: str) -> str:
    """Go's ``schema.GroupVersionKind.String()``: ``"apps/v1, Kind=Deployment"``, ``"/v1, Kind=Pod"``."""
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={kind}"


def generate_policy_name(namespace: str, name: str, gvk: str) -> str:
    """Name of the policy ``karmadactl promote`` creates: ``lower(name' + "-" + hash(namespace + gvk))``.

    ``gvk`` is the Go string form (:func:`gvk_string`); the hash input is not lower-cased.
    """
    return f"{_dns_safe(name)}-{_hash_suffix(namespace + gvk)}".lower()


def generate_service_account_name(cluster_name: str) -> str:
    return f"karmada-{cluster_name}"


def generate_role_name(service_account_name: str) -> str:
    return f"karmada-controller-manager:{service_account_name}"


def generate_impersonation_secret_name(cluster_name: str) -> str:
    return f"{cluster_name}-impersonator"


def generate_endpoint_slice_name(endpoint_slice_name: str, cluster: str) -> str:
    return f"imported-{cluster}-{endpoint_slice_name}"


def generate_derived_service_name(service_name: str) -> str:
    return f"derived-{service_name}"


def generate_estimator_service_name(cluster_name: str, prefix: str = _ESTIMATOR_SERVICE_PREFIX) -> str:
    return f"{prefix}-{cluster_name}"
