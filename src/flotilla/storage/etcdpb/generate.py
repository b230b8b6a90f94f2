"""Regenerate the Python modules of etcd's messages and services from the ``.proto`` files beside this file.

``python -m flotilla.storage.etcdpb.generate [OUT_DIR]``: writes ``rpc_pb2.py`` into
``OUT_DIR/flotilla/storage/etcdpb`` (default: the source tree this module is in). Needs ``grpcio-tools`` (a test
dependency), which runs ``protoc``.

Only the messages are generated: the store calls the four methods it needs (``KV.Range``, ``KV.Txn``,
``KV.Compact`` and the ``Watch`` stream) by their paths on the channel (see :func:`method_path`), which is all
gRPC's generated client stubs would do, without their server-side classes.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE_ROOT = HERE.parents[2]  # the directory that holds the ``flotilla`` package
PROTOS = ("rpc.proto",)
GENERATED = ("rpc_pb2.py",)


def _proto_path(name: str) -> str:
    return (HERE / name).relative_to(SOURCE_ROOT).as_posix()


def generate(out_root: Path = SOURCE_ROOT) -> list[Path]:
    """Compile the protos into ``out_root`` (a directory that stands for the source root); the files written."""
    from grpc_tools import protoc

    out_root = Path(out_root)
    (out_root / HERE.relative_to(SOURCE_ROOT)).mkdir(parents=True, exist_ok=True)
    include = f"-I{SOURCE_ROOT}"
    argv = ["protoc", include, f"--python_out={out_root}", *map(_proto_path, PROTOS)]
    if protoc.main(argv) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(argv)}")
    return [out_root / HERE.relative_to(SOURCE_ROOT) / name for name in GENERATED]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for path in generate(Path(args[0]) if args else SOURCE_ROOT):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
