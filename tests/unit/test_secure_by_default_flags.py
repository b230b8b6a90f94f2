"""``flotilla up``, ``flotilla apiserver`` and ``flotilla member`` are secure unless given ``--insecure``;
``--secure`` is still accepted, and the two together are a usage error (exit 2)."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from flotilla.cli.flags import secure
from flotilla.local.layout import Layout, StackRecord, resume_conflict
from flotilla.local.up_command import _child_argv, config_from_args, run_up_command
from flotilla.main import build_parser
from tests.support.pipeline import FLOTILLA

COMMANDS = ("up", "apiserver", "member")


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_is_secure_unless_given_insecure(command: str) -> None:
    assert secure(parse(command)) is True
    assert secure(parse(command, "--secure")) is True  # older command lines keep working
    assert secure(parse(command, "--insecure")) is False


@pytest.mark.parametrize("command", COMMANDS)
def test_secure_and_insecure_together_is_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(command, "--secure", "--insecure")
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("command", COMMANDS)
def test_help_says_secure_is_the_default(command: str) -> None:
    r = subprocess.run([FLOTILLA, command, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "--secure the default:" in text and "--insecure plain http and no authentication" in text


def test_up_config_follows_the_flags() -> None:
    assert config_from_args(parse("up")).secure is True
    assert config_from_args(parse("up", "--secure")).secure is True
    assert config_from_args(parse("up", "--insecure")).secure is False


def test_up_detach_passes_insecure_to_the_background_process_and_nothing_by_default() -> None:
    assert "--insecure" in _child_argv(parse("up", "--insecure"))
    argv = _child_argv(parse("up"))
    assert "--insecure" not in argv and "--secure" not in argv  # the background process has the same default


def test_apiserver_refuses_anonymous_with_insecure(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("apiserver", "--insecure", "--anonymous")
    assert args.fn(args) == 2
    assert "--anonymous only applies to the secure default" in capsys.readouterr().err


def test_resuming_is_allowed_in_the_mode_the_data_dir_was_made_in() -> None:
    root = Path("/d")
    assert resume_conflict(root, None, secure=True, guard=False) is None  # a new data directory
    assert resume_conflict(root, StackRecord(api_port=1, secure=True), secure=True, guard=False) is None
    assert resume_conflict(root, StackRecord(api_port=1, secure=False), secure=False, guard=False) is None
    older = StackRecord.from_json(b'{"format": 1, "apiPort": 6443}', root / "flotilla-up.json")
    conflict = resume_conflict(root, older, secure=True, guard=False)
    assert conflict is not None and "pass --insecure to resume it as it is" in conflict


def test_up_on_an_older_insecure_data_dir_exits_1_saying_to_pass_insecure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Layout(tmp_path).record_path.write_text('{"format": 1, "apiPort": 6443, "members": {"member1": 1}}\n')
    assert run_up_command(parse("up", "--data-dir", str(tmp_path), "--detach")) == 1
    err = capsys.readouterr().err
    assert "was created without TLS and authentication" in err and "pass --insecure" in err, err
    assert not Layout(tmp_path).log_file.exists()  # refused before any background process started


def test_up_insecure_on_a_secure_data_dir_exits_1_saying_to_drop_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Layout(tmp_path).save_record(StackRecord(api_port=6443, secure=True))
    assert run_up_command(parse("up", "--data-dir", str(tmp_path), "--insecure")) == 1
    assert "cannot be resumed with --insecure: drop --insecure" in capsys.readouterr().err
