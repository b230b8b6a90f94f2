"""etcd's v3 gRPC messages and services, compiled for Python: ``kv_pb2`` (keys and events), ``rpc_pb2`` (requests
and responses) and ``rpc_pb2_grpc`` (the KV and Watch client stubs), from ``kv.proto`` and ``rpc.proto`` beside
this file, which hold the part of etcd's API that :mod:`flotilla.storage.etcd` uses.

The ``*_pb2*.py`` and ``*.pyi`` modules are generated; never edit them. After changing a ``.proto`` file, or to move
to another ``grpcio-tools`` (whose version the generated modules require of ``grpcio`` and ``protobuf`` at run time,
see pyproject.toml), regenerate them with ``make protos``, which runs::

    python -m flotilla.storage.etcdpb.generate

(with the ``grpcio-tools`` of the test dependencies installed). ``tests/unit/test_etcdpb.py`` fails when the
modules in the repository are not what that command makes.
"""
