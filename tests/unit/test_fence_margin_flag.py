"""``--fence-margin``: the controller-manager's flag (Go duration, default 15s, never negative) and its
passage through ``flotilla up``."""

from __future__ import annotations

import argparse

import pytest

from flotilla.runtime.options import ControllerOptions

from .test_controller_manager_cli import options, parse_error


def test_fence_margin_defaults_to_15s_and_takes_go_durations() -> None:
    assert options().fence_margin == 15.0
    assert options("--fence-margin", "2m30s").fence_margin == 150.0
    assert options("--fence-margin=500ms").fence_margin == 0.5
    assert options("--fence-margin", "0").fence_margin == 0.0


def test_a_bad_fence_margin_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert "argument --fence-margin: invalid duration 'soon'" in parse_error(capsys, "--fence-margin", "soon")
    assert "--fence-margin" in parse_error(capsys, "--fence-margin", "-5s")


def test_a_negative_fence_margin_fails_validation() -> None:
    errs = ControllerOptions(fence_margin=-1.0).validate()
    assert any(e.startswith('Options.FenceMargin: Invalid value: "-1s"') for e in errs), errs
    assert not ControllerOptions(fence_margin=0.0).validate()


def test_flotilla_up_passes_the_fence_margin_to_its_controllers() -> None:
    from flotilla.local.up_command import add_up_parsers
    from flotilla.local.up_command import config_from_args as up_config

    parser = argparse.ArgumentParser(prog="flotilla")
    add_up_parsers(parser.add_subparsers(dest="command"))
    cfg = up_config(parser.parse_args(["up", "--fence-margin", "7"]))
    assert ControllerOptions(**cfg.timings).fence_margin == 7.0  # what LocalStack starts the controllers with
    assert up_config(parser.parse_args(["up"])).timings["fence_margin"] == 15.0
