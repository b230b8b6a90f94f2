"""Flotilla's async Kubernetes client: HTTP and in-process transports, discovery, informers, kubeconfig."""

from flotilla.client.client import Client
from flotilla.client.errors import (
    ApiException,
    ConnectionFailed,
    is_already_exists,
    is_conflict,
    is_gone,
    is_invalid,
    is_not_found,
)
from flotilla.client.informer import Informer, SharedInformerFactory, label_indexer
from flotilla.client.transport import WatchEvent
from flotilla.kube.resources import Resource, object_key

__all__ = [
    "ApiException",
    "Client",
    "ConnectionFailed",
    "Informer",
    "Resource",
    "SharedInformerFactory",
    "WatchEvent",
    "is_already_exists",
    "is_conflict",
    "is_gone",
    "is_invalid",
    "is_not_found",
    "label_indexer",
    "object_key",
]
