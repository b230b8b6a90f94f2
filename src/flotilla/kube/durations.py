"""Go's durations (``time.ParseDuration`` and ``Duration.String()``), as Karmada's flags and annotations write
them: ``15s``, ``1m30s``, ``500ms``, ``0``."""

from __future__ import annotations

import math
import re
from typing import Any, Final

__all__ = ["go_duration", "parse_go_duration"]

_GO_UNITS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART: Final = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: Any) -> float:
    """Seconds from a Go duration (``15s``, ``1m30s``, ``500ms``, ``0``); ValueError for anything else."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{text!r} is not a duration")
    s = text.strip()
    sign = 1.0
    if s[0] in "+-":
        sign, s = (-1.0 if s[0] == "-" else 1.0), s[1:]
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(s):
        m = _GO_PART.match(s, pos)
        if m is None:
            raise ValueError(f"{text!r} is not a Go duration (examples: 15s, 1m30s, 500ms)")
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    if pos == 0 or math.isinf(total):
        raise ValueError(f"{text!r} is not a Go duration (examples: 15s, 1m30s, 500ms)")
    return sign * total


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
