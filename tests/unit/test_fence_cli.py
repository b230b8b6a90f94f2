"""`flotilla fence` / `flotilla unfence`: argument parsing (fencing, D2)."""

from __future__ import annotations

import argparse

import pytest

from flotilla.cli.fence_commands import add_fence_parsers, run_fence_command, run_unfence_command
from flotilla.main import build_parser


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="flotilla")
    add_fence_parsers(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


def test_fence_defaults() -> None:
    args = parse("fence", "member1")
    assert args.command == "fence" and args.name == "member1"
    assert args.kubeconfig is None and args.karmada_context is None
    assert args.fn is run_fence_command


def test_unfence_with_kubeconfig_and_context() -> None:
    args = parse("unfence", "member2", "--kubeconfig", "/tmp/kc", "--context", "karmada")
    assert args.command == "unfence" and args.name == "member2"
    assert args.kubeconfig == "/tmp/kc" and args.karmada_context == "karmada"
    assert args.fn is run_unfence_command
    assert parse("unfence", "m", "--karmada-context", "x").karmada_context == "x"


@pytest.mark.parametrize("command", ["fence", "unfence"])
def test_name_is_required(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(command)
    assert "name" in capsys.readouterr().err


def test_wired_into_flotilla() -> None:
    args = build_parser().parse_args(["fence", "member1", "--kubeconfig", "kc"])
    assert args.fn is run_fence_command and args.name == "member1" and args.kubeconfig == "kc"
    assert build_parser().parse_args(["unfence", "member1"]).fn is run_unfence_command


def test_missing_kubeconfig_is_an_error(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("fence", "member1", "--kubeconfig", "/nonexistent/kubeconfig")
    assert args.fn(args) == 1
    assert capsys.readouterr().err.startswith("error: ")
