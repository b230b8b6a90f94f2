"""`flotilla failover move` (D21): argument parsing and the exit status of errors before anything is written."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import pytest

from flotilla.cli.failover_cmd import EXIT_USAGE, run_failover_move
from flotilla.main import build_parser


def test_d21_failover_move_is_wired_into_flotilla_with_its_defaults() -> None:
    args = build_parser().parse_args(["failover", "move", "fdep/orders", "-n", "shop", "--to", "member2"])
    assert args.fn is run_failover_move
    assert (args.target, args.namespace, args.to, args.wait, args.timeout) == (
        "fdep/orders", "shop", "member2", False, 300.0)
    args = build_parser().parse_args(["failover", "move", "fdep/orders", "--to", "m2", "--wait", "--timeout", "90s"])
    assert args.wait and args.timeout == 90.0


@pytest.mark.parametrize(("argv", "expected"), [
    ([], "--to"),
    (["--to", "member2", "--timeout", "soon"], "expected a duration"),
    (["--to", "member2", "--timeout", "0s"], "greater than 0"),
])
def test_d21_bad_move_options_are_usage_errors(argv: list[str], expected: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["failover", "move", "flinkdeployment/orders", *argv])
    assert info.value.code == EXIT_USAGE and expected in capsys.readouterr().err


def test_d21_failover_move_against_an_unreachable_control_plane_exits_1_as_kubectl(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "cp",
        "clusters": [{"name": "cp", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "cp", "user": {}}],
        "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "cp"}}]}))
    args = build_parser().parse_args(["failover", "move", "fdep/orders", "--to", "m2", "--kubeconfig", str(kubeconfig)])
    out, err = io.StringIO(), io.StringIO()
    assert run_failover_move(args, out=out, err=err) == 1
    assert "cannot reach the control plane" in err.getvalue() and "--kubeconfig" in err.getvalue()
    assert out.getvalue() == ""
