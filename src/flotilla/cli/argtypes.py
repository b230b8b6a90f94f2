"""The commands' value syntax and the argparse ``type=`` callables built on it (each says what is wrong with the
value).

Durations take Go's syntax (``10s``, ``1m30s``, ``500ms``) or plain seconds (``0.5``), as Karmada's flags do;
:func:`parse_duration` (``flotilla.kube.durations``) is the one reader of them for every command and tool; the
argparse types here turn its errors into the flag's message.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

from flotilla.kube.durations import parse_duration

__all__ = ["argtype", "bind_address", "duration", "non_negative", "parse_duration", "parse_non_negative",
           "positive_duration", "positive_int", "seconds"]

T = TypeVar("T")

def argtype(fn: Callable[[str], T], what: str) -> Callable[[str], T]:
    """``fn`` as an argparse type: its ValueError becomes the flag's error message (``what`` names the value when
    the error has no message)."""

    def convert(text: str) -> T:
        try:
            return fn(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e) or f"invalid {what}: {text!r}") from None

    convert.__name__ = what  # argparse names the type in its messages
    return convert


def parse_non_negative(text: str) -> float:
    """A finite number of at least 0."""
    value = float(text)
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise ValueError(f"must be a non-negative number: {text!r}")
    return value


duration = argtype(parse_duration, "duration")
non_negative = argtype(parse_non_negative, "number")


def positive_duration(text: str) -> float:
    """A duration (:func:`parse_duration`) greater than 0."""
    value = duration(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def seconds(text: str) -> float:
    """A number of seconds greater than 0, with or without a trailing ``s`` (``2``, ``2.5s``)."""
    try:
        value = float(text.strip().removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, e.g. 2 or 2.5s, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
    return value


def bind_address(text: str) -> tuple[str, int] | None:
    """``--metrics-bind-address``: ``HOST:PORT``, ``:PORT`` or ``0`` (off), as ``(host, port)`` or None."""
    from flotilla.observability.metrics import parse_bind_address

    try:
        return parse_bind_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--metrics-bind-address: ")) from None
