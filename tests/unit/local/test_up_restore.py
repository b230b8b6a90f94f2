"""``flotilla up`` and native restore (D20): the member-side savepoint rule is off unless asked for, and the
restore flags reach the controllers (also through ``--detach``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from flotilla.local.stack import LocalStack, StackConfig
from flotilla.local.up_command import _child_argv, add_up_parsers, config_from_args


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="flotilla")
    add_up_parsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(["up", *argv])


def test_d20_up_runs_members_without_the_savepoint_rule_unless_asked(tmp_path: Path) -> None:
    plain = LocalStack(StackConfig(data_dir=tmp_path, members=2))
    assert all("savepoint_rule" not in c.options for c in plain._member_configs({}))
    cfg = config_from_args(parse("--savepoint-rule"))
    assert cfg.savepoint_rule
    ruled = LocalStack(StackConfig(data_dir=tmp_path, members=2, savepoint_rule=True))
    assert all(c.options.get("savepoint_rule") == "true" for c in ruled._member_configs({}))


def test_d20_up_restore_flags_reach_the_config_and_the_background_process() -> None:
    cfg = config_from_args(parse("--restore-missing", "fresh", "--restore-hold-timeout", "30s"))
    assert (cfg.restore_missing, cfg.restore_hold_timeout) == ("fresh", 30.0)
    defaults = config_from_args(parse())
    assert (defaults.restore_missing, defaults.restore_hold_timeout, defaults.savepoint_rule) == ("hold", 300.0, False)
    argv = _child_argv(parse("--restore-missing", "fresh", "--restore-hold-timeout", "30s", "--savepoint-rule"))
    assert argv[argv.index("--restore-missing") + 1] == "fresh"
    assert argv[argv.index("--restore-hold-timeout") + 1] == "30.0" and "--savepoint-rule" in argv
