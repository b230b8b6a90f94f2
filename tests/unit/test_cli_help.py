"""Every ``flotilla`` command and sub-command says what it does and shows an example in its ``--help``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from flotilla.main import build_parser


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                         argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


def test_every_command_has_a_description_and_an_example_in_its_help() -> None:
    found = dict(commands(build_parser()))
    assert {("up",), ("down",), ("demo",), ("taint",), ("get",), ("failover", "preview"), ("sim", "fault"),
            ("bench", "failover")} <= set(found)
    missing = [" ".join(path) for path, parser in found.items() if "example" not in parser.format_help().lower()]
    assert missing == [], f"--help without an example: {missing}"
