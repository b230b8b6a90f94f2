"""``flotilla up --guard``: its flags, what the Pull members and their agents are started with, and the data
directory remembering the setting (docs/fencing.md "Trying it: flotilla up --guard")."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from flotilla.local.layout import DataDirError, Layout, StackRecord
from flotilla.local.stack import LocalStack, StackConfig
from flotilla.local.up_command import _child_argv, add_up_parsers, config_from_args
from flotilla.member.guard import guard_settings
from tests.support.pipeline import FLOTILLA


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="flotilla")
    add_up_parsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(["up", *argv])


def test_up_guard_takes_fence_after_and_permit_hold_defaulting_to_15s() -> None:
    cfg = config_from_args(parse("--pull-members", "1", "--guard"))
    assert (cfg.guard, cfg.fence_after, cfg.permit_hold) == (True, 15.0, 15.0)
    cfg = config_from_args(parse("--pull-members", "1", "--guard", "--fence-after", "4s", "--permit-hold", "12"))
    assert (cfg.guard, cfg.fence_after, cfg.permit_hold) == (True, 4.0, 12.0)
    assert config_from_args(parse("--pull-members", "1")).guard is False


def test_up_guard_without_pull_members_guards_the_push_members() -> None:
    cfg = config_from_args(parse("--guard"))
    assert cfg.guard and cfg.pull_members == 0


def test_up_fence_after_or_permit_hold_without_guard_is_refused() -> None:
    with pytest.raises(ValueError, match="--fence-after only apply with --guard"):
        config_from_args(parse("--pull-members", "1", "--fence-after", "4"))
    with pytest.raises(ValueError, match="--permit-hold only apply with --guard"):
        config_from_args(parse("--pull-members", "1", "--permit-hold", "20"))


def test_up_refuses_a_permit_hold_the_agents_would_refuse() -> None:
    """A permit-hold not longer than the agents' 10 s Lease renew interval, or a fence-after not longer than the
    1 s permit renew interval, is a usage error of ``up``, not an agent restarted forever."""
    with pytest.raises(ValueError, match=r"--permit-hold \(10s\) must be longer than the Lease renew interval"):
        config_from_args(parse("--pull-members", "1", "--guard", "--permit-hold", "10"))
    with pytest.raises(ValueError, match=r"must be shorter than --fence-after \(1s\)"):
        config_from_args(parse("--pull-members", "1", "--guard", "--fence-after", "1"))


def test_up_guard_with_a_bad_permit_hold_exits_2_with_a_clear_message() -> None:
    r = subprocess.run([FLOTILLA, "up", "--guard", "--members", "2", "--permit-hold", "5"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stdout
    assert "--permit-hold (5s) must be longer than the Lease renew interval" in r.stderr, r.stderr


def test_up_detach_passes_the_guard_flags_to_the_background_process() -> None:
    argv = _child_argv(parse("--pull-members", "1", "--guard", "--fence-after", "4", "--permit-hold", "12"))
    assert "--guard" in argv
    assert argv[argv.index("--fence-after") + 1] == "4.0" and argv[argv.index("--permit-hold") + 1] == "12.0"
    plain = _child_argv(parse("--pull-members", "1"))
    assert "--guard" not in plain and "--fence-after" not in plain and "--permit-hold" not in plain


def test_up_guard_runs_every_member_with_the_guard_and_its_fence_after(tmp_path: Path) -> None:
    stack = LocalStack(StackConfig(data_dir=tmp_path, members=3, pull_members=2, guard=True, fence_after=4.0,
                                   permit_hold=12.0))
    configs = {c.name: c for c in stack._member_configs({})}
    assert guard_settings(configs["member1"].options) == (4.0, 0.5)  # Push: its lease-only agent keeps a permit
    assert guard_settings(configs["member2"].options) == (4.0, 0.5)
    assert guard_settings(configs["member3"].options) == (4.0, 0.5)
    unguarded = LocalStack(StackConfig(data_dir=tmp_path, members=2, pull_members=1))
    assert all(guard_settings(c.options) is None for c in unguarded._member_configs({}))


def test_the_up_record_remembers_the_guard_setting() -> None:
    again = StackRecord.from_json(StackRecord(api_port=6443, guard=True).to_json(), Path("/d/flotilla-up.json"))
    assert again.guard is True
    assert StackRecord.from_json(b'{"format": 1, "apiPort": 1}', Path("/d/x")).guard is False  # older records


@pytest.mark.parametrize("made_with", [True, False])
async def test_a_data_dir_is_not_resumed_with_another_guard_setting(tmp_path: Path, made_with: bool) -> None:
    Layout(tmp_path).save_record(StackRecord(api_port=6443, guard=made_with))
    stack = LocalStack(StackConfig(data_dir=tmp_path, members=1, pull_members=1, guard=not made_with,
                                   tune_gc=False, metrics_address=None, port=0))
    was, now = ("with", "without") if made_with else ("without", "with")
    with pytest.raises(DataDirError, match=f"was created {was} --guard and cannot be resumed {now} it"):
        await stack.start()


def test_up_on_a_guarded_data_dir_without_guard_exits_1_saying_what_to_pass(tmp_path: Path) -> None:
    root = tmp_path / "flotilla"
    Layout(root).save_record(StackRecord(api_port=6443, guard=True))
    r = subprocess.run([FLOTILLA, "up", "--data-dir", str(root), "--members", "1", "--pull-members", "1",
                        "--port", "0", "--metrics-bind-address", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout
    assert "was created with --guard and cannot be resumed without it: pass --guard" in r.stderr, r.stderr
