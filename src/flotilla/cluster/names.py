"""Karmada's rule for Cluster names: a DNS-1123 label of at most 48 characters (the name becomes part of the
execution namespace ``karmada-es-<name>`` and of label values)."""

from __future__ import annotations

from flotilla.kube.content import dns1123_label_errors

CLUSTER_NAME_MAX_LENGTH = 48


def cluster_name_errors(name: str) -> list[str]:
    if not name:
        return ["must be not empty"]
    if len(name) > CLUSTER_NAME_MAX_LENGTH:
        return [f"must be no more than {CLUSTER_NAME_MAX_LENGTH} characters"]
    return dns1123_label_errors(name)
