"""Go's durations (``time.ParseDuration`` and ``Duration.String()``), as Karmada's flags and annotations write
them: ``15s``, ``1m30s``, ``500ms``, ``0``; command-line flags also take a plain number of seconds."""

from __future__ import annotations

import math
import re
from typing import Any, Final

__all__ = ["go_duration", "parse_duration", "parse_go_duration"]

_GO_UNITS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART: Final = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_PLAIN_NUMBER: Final = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _split_sign(text: str) -> tuple[float, str]:
    if text[:1] in ("+", "-"):
        return (-1.0 if text[0] == "-" else 1.0), text[1:]
    return 1.0, text


def _unsigned_seconds(body: str) -> float | None:
    """Seconds of a Go duration without its sign (``1m30s``); None when ``body`` is not one."""
    pos, total = 0, 0.0
    while pos < len(body):
        m = _GO_PART.match(body, pos)
        if m is None:
            return None
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    return total if pos else None


def parse_go_duration(text: Any) -> float:
    """Seconds from a Go duration (``15s``, ``1m30s``, ``500ms``, ``0``); ValueError for anything else."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{text!r} is not a duration")
    sign, body = _split_sign(text.strip())
    if body == "0":
        return 0.0
    total = _unsigned_seconds(body)
    if total is None or math.isinf(total):
        raise ValueError(f"{text!r} is not a Go duration (examples: 15s, 1m30s, 500ms)")
    return sign * total


def parse_duration(text: str) -> float:
    """Seconds from a Go duration (``1h2m3.5s``, ``500ms``, ``0``) or a plain number of seconds (``0.5``), as
    command-line flags take a duration.

    Negative, infinite and NaN values are refused (ValueError): no flag means anything by them.
    """
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    if _PLAIN_NUMBER.fullmatch(s):
        value = float(s)
    else:
        sign, body = _split_sign(s)
        if not body:
            raise ValueError(f"invalid duration {text!r}")
        total = _unsigned_seconds(body)
        if total is None:
            raise ValueError(f"invalid duration {text!r} (examples: 10s, 1m30s, 500ms, 2h, or seconds: 0.5)")
        value = sign * total
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"invalid duration {text!r}")
    if value < 0:
        raise ValueError(f"duration must not be negative: {text!r}")
    return value


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` of ``seconds`` (rounded to nanoseconds): ``1h2m3.5s``, ``-1.5ms``, ``0s``."""
    if math.isnan(seconds):
        return "NaN"
    if math.isinf(seconds):
        return "-Inf" if seconds < 0 else "+Inf"
    ns = round(seconds * 1_000_000_000)
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns == 0:
        return "0s"
    if ns < 1_000_000_000:
        for unit, scale in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= scale:
                return sign + _fraction(ns, scale) + unit
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _fraction(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _fraction(value: int, scale: int) -> str:
    whole, frac = divmod(value, scale)
    if not frac:
        return str(whole)
    width = len(str(scale)) - 1
    return f"{whole}." + f"{frac:0{width}d}".rstrip("0")
