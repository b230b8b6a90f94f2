"""Log level and format: the flags, the environment children inherit, and the JSON lines."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from flotilla.main import build_parser
from flotilla.observability.logs import (
    LOG_FORMAT_ENV,
    LOG_LEVEL_ENV,
    JsonFormatter,
    LogSettings,
    configure_logging,
    progress_line,
    resolve_log_settings,
)


def _record(exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise KeyError("boom")
        except KeyError:
            exc_info = sys.exc_info()
    return logging.LogRecord("flotilla.test", logging.WARNING, __file__, 1, "a %s line", ("formatted",), exc_info)


def test_a_json_line_has_time_level_logger_message_and_the_exception() -> None:
    plain = json.loads(JsonFormatter().format(_record()))
    assert set(plain) == {"time", "level", "logger", "message"}
    assert (plain["level"], plain["logger"], plain["message"]) == ("WARNING", "flotilla.test", "a formatted line")
    assert plain["time"].endswith("Z") and "T" in plain["time"]
    line = JsonFormatter().format(_record(exc=True))
    assert "\n" not in line  # one object a line, the traceback escaped inside it
    failed = json.loads(line)
    assert failed["exception"].startswith("Traceback") and "KeyError: 'boom'" in failed["exception"]


def test_flags_win_over_verbose_which_wins_over_the_environment() -> None:
    env = {LOG_LEVEL_ENV: "error", LOG_FORMAT_ENV: "json"}
    assert resolve_log_settings(None, None, environ={}) == LogSettings("warning", "text")
    assert resolve_log_settings(None, None, environ=env) == LogSettings("error", "json")
    assert resolve_log_settings(None, None, verbose=True, environ=env) == LogSettings("debug", "json")
    assert resolve_log_settings("info", "text", verbose=True, environ=env) == LogSettings("info", "text")
    assert resolve_log_settings(None, None, environ={LOG_LEVEL_ENV: " INFO ", LOG_FORMAT_ENV: ""}) == \
        LogSettings("info", "text")


def test_a_bad_value_in_the_environment_names_the_variable_and_the_choices() -> None:
    with pytest.raises(ValueError, match=r"FLOTILLA_LOG_FORMAT='yaml' is not valid: use one of text, json"):
        resolve_log_settings(None, None, environ={LOG_FORMAT_ENV: "yaml"})


def test_configure_logging_exports_the_choice_for_child_processes() -> None:
    env: dict[str, str] = {}
    root = logging.getLogger()
    before = (root.handlers[:], root.level)
    try:
        configure_logging(LogSettings("info", "json"), environ=env)
        configure_logging(LogSettings("error", "json"), environ=env)
        ours = [h for h in root.handlers if h not in before[0]]
        assert len(ours) == 1 and isinstance(ours[0].formatter, JsonFormatter)  # replaced, not added twice
        assert root.level == logging.ERROR
    finally:
        root.handlers[:] = before[0]
        root.setLevel(before[1])
    assert env == {LOG_LEVEL_ENV: "error", LOG_FORMAT_ENV: "json"}


@pytest.mark.parametrize("argv", [
    ["--log-level", "info", "--log-format", "json", "apiserver"],
    ["apiserver", "--log-level", "info", "--log-format", "json"],
    ["--log-level", "error", "apiserver", "--log-level", "INFO", "--log-format", "JSON"],  # the command's wins
    ["bench", "failover", "--log-level", "info", "--log-format", "json"],  # nested commands too
])
def test_the_flags_go_before_or_after_any_command(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.log_level, args.log_format) == ("info", "json")


def test_a_bad_flag_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["up", "--log-format", "yaml"])
    assert e.value.code == 2
    assert "--log-format: invalid choice: 'yaml'" in capsys.readouterr().err


def test_progress_lines_follow_the_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOG_FORMAT_ENV, raising=False)
    assert progress_line("flotilla controller-manager", "started 3 controllers") == \
        "flotilla controller-manager: started 3 controllers"
    monkeypatch.setenv(LOG_FORMAT_ENV, "json")
    record = json.loads(progress_line("flotilla controller-manager", "started 3 controllers"))
    assert (record["level"], record["logger"], record["message"]) == (
        "INFO", "flotilla controller-manager", "started 3 controllers")
