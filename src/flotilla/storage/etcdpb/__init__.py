"""etcd's v3 gRPC messages, compiled for Python: ``rpc_pb2`` (requests, responses, key-value records and events,
and the KV and Watch service descriptors), from ``rpc.proto`` beside this file, which holds the part of etcd's API
that :mod:`flotilla.storage.etcd` uses.

``rpc_pb2.py`` is generated; never edit it. After changing ``rpc.proto``, or to move to another
``grpcio-tools`` (whose version the generated modules require of ``protobuf`` at run time, see pyproject.toml),
regenerate it with ``make protos``, which runs::

    python -m flotilla.storage.etcdpb.generate

(with the ``grpcio-tools`` of the test dependencies installed). ``tests/unit/test_etcdpb.py`` fails when the
module in the repository is not what that command makes.

No client stub module is generated: :func:`method` gives the store a call of one method by its path on a channel,
with the request and response classes of its descriptor, which is all a generated stub does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["method", "method_path"]


def _descriptor(service: str, name: str) -> Any:
    # imported here, so that the generator (a module of this package) runs while rpc_pb2 is missing or stale
    from flotilla.storage.etcdpb import rpc_pb2

    return rpc_pb2.DESCRIPTOR.services_by_name[service].methods_by_name[name]


def method_path(service: str, name: str) -> str:
    """The gRPC path of a method of etcd's API, as etcd serves it (``/etcdserverpb.KV/Range``)."""
    descriptor = _descriptor(service, name)
    return f"/{descriptor.containing_service.full_name}/{descriptor.name}"


def method(channel: Any, service: str, name: str) -> Any:
    """A multi-callable for one method on ``channel`` (a ``grpc.aio.Channel``): unary or bidirectional stream."""
    from flotilla.storage.etcdpb import rpc_pb2

    descriptor = _descriptor(service, name)
    request = getattr(rpc_pb2, descriptor.input_type.name)
    response = getattr(rpc_pb2, descriptor.output_type.name)
    kind = channel.stream_stream if descriptor.client_streaming else channel.unary_unary
    return kind(method_path(service, name), request_serializer=request.SerializeToString,
                response_deserializer=response.FromString, _registered_method=True)
