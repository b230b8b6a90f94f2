"""The ``flotilla`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flotilla.cli.flags import add_command


def _apiserver(args: argparse.Namespace) -> int:
    import asyncio

    from flotilla.apiserver.server import ApiServerConfig, serve_forever
    from flotilla.cli.etcd_flags import etcd_tls_from_args
    from flotilla.storage import StorageError

    try:
        etcd_tls = etcd_tls_from_args(args, args.storage)
    except ValueError as e:
        print(f"flotilla apiserver: error: {e}", file=sys.stderr)
        return 2
    from flotilla.cli.flags import secure

    if args.anonymous and args.insecure:
        print("flotilla apiserver: error: --anonymous only applies to the secure default (--insecure lets "
              "everyone in already): drop one of them", file=sys.stderr)
        return 2
    cfg = ApiServerConfig(
        storage_url=args.storage,
        etcd_tls=etcd_tls,
        data_dir=Path(args.data_dir),
        host=args.host,
        port=args.port,
        secure=secure(args),
        anonymous=True if args.anonymous else None,
        compaction_interval=args.compaction_interval,
        allow_no_execute_taint_policy=args.allow_no_execute_taint_policy,
    )
    try:
        asyncio.run(serve_forever(cfg))
    except KeyboardInterrupt:
        pass
    except (ValueError, StorageError) as e:  # a storage URL or TLS file that cannot work, etcd unreachable
        print(f"flotilla apiserver: error: {e}", file=sys.stderr)
        return 1
    return 0


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _demo_api(args: argparse.Namespace) -> int:
    from flotilla.local.demo_api import run_demo

    return run_demo(Path(args.data_dir), examples=Path(args.examples))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="flotilla", description="Multi-cluster Kubernetes control plane with "
                                "stateful failover, speaking Karmada's API.")
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = p.add_subparsers(dest="command", required=True)

    a = add_command(sub, "apiserver", help="run the Kubernetes-compatible API server",
                       description="Run Flotilla's Kubernetes-compatible API server (kubectl and the kubernetes "
                                   "Python client work against it); it writes a kubeconfig into --data-dir. By "
                                   "default it serves https with certificates of its own CA (--data-dir/pki) and "
                                   "requires a token or a client certificate; the kubeconfig (mode 0600) holds the "
                                   "CA and the admin token (--data-dir/tokens.csv, mode 0600).",
                       examples=["flotilla apiserver --data-dir ./cp --port 6443        # SQLite in ./cp",
                                 "KUBECONFIG=./cp/kubeconfig kubectl get namespaces",
                                 "flotilla apiserver --storage etcd://127.0.0.1:2379",
                                 "flotilla apiserver --data-dir ./cp --insecure         # plain http, no authentication",
                                 "flotilla apiserver --storage etcds://127.0.0.1:2379 --etcd-cafile ca.crt \\\n"
                                 "      --etcd-certfile client.crt --etcd-keyfile client.key"])
    a.add_argument("--storage", default="sqlite://",
                   help="memory://, sqlite:// (file in --data-dir), sqlite:///path.db, etcd://host:port[,host:port] "
                        "or etcds://host:port[,host:port] (etcd over TLS: --etcd-cafile, --etcd-certfile, "
                        "--etcd-keyfile)")
    a.add_argument("--data-dir", default=".flotilla", help="where the database, certificates and kubeconfig go")
    a.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    a.add_argument("--port", type=int, default=6443, help="port to listen on (0 = any free port)")
    from flotilla.cli.flags import add_security_flags

    add_security_flags(a, secure="serve TLS and require bearer tokens or client certificates",
                       insecure="for tests and tools that speak raw HTTP; anyone who can reach the port may do "
                                "anything")
    a.add_argument("--anonymous", action="store_true",
                   help="still allow anonymous requests (not with --insecure, which lets everyone in)")
    a.add_argument("--compaction-interval", type=float, default=300.0,
                   help="seconds between store compactions (history older than one interval is dropped; 0 = never)")
    a.add_argument("--allow-no-execute-taint-policy", type=_bool, default=True, metavar="true|false",
                   help="admit ClusterTaintPolicies that add NoExecute taints (default true: failover is on by default, D1; "
                        "Karmada's default is false)")
    from flotilla.cli.etcd_flags import add_etcd_tls_arguments

    add_etcd_tls_arguments(a)
    a.set_defaults(fn=_apiserver)

    d = add_command(sub, "demo-api", help="start an embedded API server, apply examples/ with kubectl, show them",
                    description="Start an embedded API server on SQLite, apply examples/apiserver with the real "
                                "kubectl and show the objects.",
                    examples=["flotilla demo-api --data-dir /tmp/demo-api"])
    d.add_argument("--data-dir", default=".flotilla-demo")
    d.add_argument("--examples", default="examples/apiserver")
    d.set_defaults(fn=_demo_api)

    from flotilla.bench.command import add_bench_parsers

    add_bench_parsers(sub)  # `flotilla bench apiserver|failover|propagate|scale` (and their internal processes)

    from flotilla.member.command import add_member_parsers

    add_member_parsers(sub)  # `flotilla member` and `flotilla sim fault`

    from flotilla.cli.cluster_commands import add_cluster_parsers

    add_cluster_parsers(sub)  # `flotilla join` / `flotilla unjoin`

    from flotilla.cli.register_commands import add_register_parsers

    add_register_parsers(sub)  # `flotilla register` / `flotilla unregister` (Pull mode)

    from flotilla.cli.fence_commands import add_fence_parsers

    add_fence_parsers(sub)  # `flotilla fence` / `flotilla unfence` (fencing, D2)

    from flotilla.cli.controller_manager import add_controller_manager_parser

    add_controller_manager_parser(sub)  # `flotilla controller-manager`

    from flotilla.cli.agent import add_agent_parser

    add_agent_parser(sub)  # `flotilla agent` (Pull mode)

    from flotilla.cli.guard_command import add_guard_parser

    add_guard_parser(sub)  # `flotilla guard -- COMMAND` (docs/fencing.md)

    from flotilla.cli.jsonpath_cmd import add_jsonpath_parser

    add_jsonpath_parser(sub)  # `flotilla jsonpath TEMPLATE -f OBJ`

    from flotilla.cli.interpret import add_interpret_parser

    add_interpret_parser(sub)  # `flotilla interpret`, as `karmadactl interpret`

    from flotilla.cli.failover_cmd import add_failover_parsers

    add_failover_parsers(sub)  # `flotilla failover preview KIND/NAME`

    from flotilla.local.up_command import add_up_parsers

    add_up_parsers(sub)  # `flotilla up` / `flotilla down`

    from flotilla.cli.taint_commands import add_taint_parsers

    add_taint_parsers(sub)  # `flotilla taint clusters`, `cordon`, `uncordon`, as karmadactl's

    from flotilla.cli.get_command import add_get_parser

    add_get_parser(sub)  # `flotilla get clusters|bindings|works`

    from flotilla.cli.describe_command import add_describe_parser

    add_describe_parser(sub)  # `flotilla describe cluster|binding NAME`

    from flotilla.local.demo_command import add_demo_parser

    add_demo_parser(sub)  # `flotilla demo` (what `make demo` runs)

    from flotilla.reliability.command import add_soak_parsers

    add_soak_parsers(sub)  # `flotilla soak crash` (what `make soak` runs)

    from flotilla.cli.version_command import add_version_parser

    add_version_parser(sub)  # `flotilla version`

    from flotilla.cli.completion import add_completion_parser

    add_completion_parser(sub, p)  # `flotilla completion bash|zsh`

    from flotilla.observability.logs import add_logging_arguments

    add_logging_arguments(p)  # --log-level, --log-format: before or after any command's name
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from flotilla.observability.logs import setup_logging

    setup_logging(parser, args)
    try:
        return int(args.fn(args) or 0)
    except BrokenPipeError:  # `flotilla get ... | head`: the reader has gone; no traceback, as kubectl
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
