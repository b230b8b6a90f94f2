"""The generated etcd gRPC modules in flotilla/storage/etcdpb are what their .proto files and the pinned
grpcio-tools make (``make protos``), and they speak etcd's service and method names."""

from __future__ import annotations

from pathlib import Path

from flotilla.storage.etcdpb import generate, method_path, rpc_pb2


def test_committed_modules_are_what_the_generator_makes(tmp_path: Path) -> None:
    written = generate.generate(tmp_path)
    assert sorted(p.name for p in written) == sorted(generate.GENERATED)
    stale = [p.name for p in written if p.read_bytes() != (generate.HERE / p.name).read_bytes()]
    assert stale == [], f"regenerate with `make protos`: {stale} differ from their .proto files"


def test_services_and_methods_have_etcds_names() -> None:
    services = rpc_pb2.DESCRIPTOR.services_by_name
    assert rpc_pb2.DESCRIPTOR.package == "etcdserverpb"
    assert {m.name for m in services["KV"].methods} == {"Range", "Put", "DeleteRange", "Txn", "Compact"}
    watch = services["Watch"].methods_by_name["Watch"]
    assert watch.client_streaming and watch.server_streaming
    # a few field numbers the store depends on, as etcd defines them
    assert rpc_pb2.WatchResponse.DESCRIPTOR.fields_by_name["events"].number == 11
    assert rpc_pb2.Compare.DESCRIPTOR.fields_by_name["range_end"].number == 64
    assert rpc_pb2.WatchCreateRequest.DESCRIPTOR.fields_by_name["prev_kv"].number == 6


def test_method_paths_are_the_ones_etcd_serves() -> None:
    assert method_path("KV", "Range") == "/etcdserverpb.KV/Range"
    assert method_path("KV", "Compact") == "/etcdserverpb.KV/Compact"
    assert method_path("Watch", "Watch") == "/etcdserverpb.Watch/Watch"
