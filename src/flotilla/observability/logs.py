"""How Flotilla's processes log: level and format, chosen once per process and inherited by the processes it starts.

``--log-level debug|info|warning|error`` (default ``warning``; the global ``-v`` means ``debug``) and
``--log-format text|json`` (default ``text``: ``time LEVEL logger: message``; ``json``: one JSON object a line with
``time``, ``level``, ``logger``, ``message`` and, when there is one, ``exception``). The choice is also read from
and written to the environment (:data:`LOG_LEVEL_ENV`, :data:`LOG_FORMAT_ENV`), so that a child process
(``flotilla up --detach``, the processes a benchmark starts) logs as its parent does.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from flotilla.kube.times import format_time

__all__ = [
    "LOG_FORMATS",
    "LOG_FORMAT_ENV",
    "LOG_LEVELS",
    "LOG_LEVEL_ENV",
    "JsonFormatter",
    "LogSettings",
    "add_logging_arguments",
    "configure_logging",
    "log_formatter",
    "progress_line",
    "resolve_log_settings",
]

LOG_LEVEL_ENV: Final = "FLOTILLA_LOG_LEVEL"
LOG_FORMAT_ENV: Final = "FLOTILLA_LOG_FORMAT"
LOG_LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                     "error": logging.ERROR}
LOG_FORMATS: Final = ("text", "json")
DEFAULT_LEVEL: Final = "warning"
DEFAULT_FORMAT: Final = "text"
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_OURS: Final = "_flotilla_log_handler"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time`` (RFC 3339, UTC, milliseconds), ``level``, ``logger``, ``message``, and
    ``exception`` (the formatted traceback) / ``stack`` when the record has one."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, Any] = {
            "time": format_time(stamp, 3),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class LogSettings:
    """A resolved choice: ``level`` (a name of :data:`LOG_LEVELS`) and ``format`` (one of :data:`LOG_FORMATS`)."""

    level: str
    format: str


def _pick(flag: str | None, env_value: str | None, env_name: str, choices: Any, default: str) -> str:
    if flag:
        return flag
    if env_value is None or not env_value.strip():
        return default
    value = env_value.strip().lower()
    if value not in choices:
        raise ValueError(f"{env_name}={env_value!r} is not valid: use one of {', '.join(choices)}")
    return value


def resolve_log_settings(level: str | None, fmt: str | None, *, verbose: bool = False,
                         environ: MutableMapping[str, str] | None = None) -> LogSettings:
    """The settings a process uses: its flags first, then ``-v`` (debug), then the environment, then the defaults.
    Raises ValueError, naming the variable and the valid values, for a bad value in the environment."""
    env = os.environ if environ is None else environ
    chosen_level = _pick(level or ("debug" if verbose else None), env.get(LOG_LEVEL_ENV), LOG_LEVEL_ENV,
                         LOG_LEVELS, DEFAULT_LEVEL)
    chosen_format = _pick(fmt, env.get(LOG_FORMAT_ENV), LOG_FORMAT_ENV, LOG_FORMATS, DEFAULT_FORMAT)
    return LogSettings(chosen_level, chosen_format)


def log_formatter(fmt: str | None = None) -> logging.Formatter:
    """The formatter of ``fmt`` (default: this process's choice, from the environment)."""
    chosen = fmt or os.environ.get(LOG_FORMAT_ENV, DEFAULT_FORMAT).strip().lower()
    return JsonFormatter() if chosen == "json" else logging.Formatter(TEXT_FORMAT)


def progress_line(prog: str, message: str) -> str:
    """A line a command writes to its log stream about what it does: ``prog: message``, or with
    ``--log-format json`` an INFO object of logger ``prog`` (so that the stream stays one JSON object a line)."""
    if os.environ.get(LOG_FORMAT_ENV, DEFAULT_FORMAT).strip().lower() != "json":
        return f"{prog}: {message}"
    record = logging.LogRecord(prog, logging.INFO, "", 0, message, None, None)
    return JsonFormatter().format(record)


def configure_logging(settings: LogSettings, *, environ: MutableMapping[str, str] | None = None) -> None:
    """Log to stderr as ``settings`` say, and put them in the environment for the processes started from here."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(log_formatter(settings.format))
    setattr(handler, _OURS, True)
    for old in root.handlers[:]:
        if getattr(old, _OURS, False):  # configured again in the same process: replace, never duplicate
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LOG_LEVELS[settings.level])
    env = os.environ if environ is None else environ
    env[LOG_LEVEL_ENV] = settings.level
    env[LOG_FORMAT_ENV] = settings.format


def _add(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--log-level", choices=list(LOG_LEVELS), default=default, type=str.lower,
                        help=f"log from this level on (default {DEFAULT_LEVEL}, or ${LOG_LEVEL_ENV}; -v: debug)")
    parser.add_argument("--log-format", choices=list(LOG_FORMATS), default=default, type=str.lower,
                        help=f"text (default, or ${LOG_FORMAT_ENV}) or json: one JSON object a line with time, "
                             "level, logger, message and exception")


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                out.append(sub)
                out.extend(_subparsers(sub))
    return out


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` and ``--log-format`` on ``parser`` and on every (sub)command under it, so they may be given
    before or after the command's name (a command's value wins)."""
    _add(parser, None)
    for sub in _subparsers(parser):
        if not any("--log-level" in a.option_strings for a in sub._actions):
            _add(sub, argparse.SUPPRESS)


def setup_logging(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Configure logging from ``--log-level``/``--log-format``/``-v`` (then the environment); a bad value in the
    environment is a usage error (exit 2) naming the variable."""
    try:
        settings = resolve_log_settings(getattr(args, "log_level", None), getattr(args, "log_format", None),
                                        verbose=bool(getattr(args, "verbose", False)))
    except ValueError as e:
        parser.error(str(e))
    configure_logging(settings)
