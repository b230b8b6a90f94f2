"""Several runs of one benchmark: the median of each headline number, and which run is the median one.

``flotilla bench failover --repeat 3`` runs the benchmark three times back to back (each on a fresh control plane
and fresh members) and reports, beside each run's own report, a table of the headline numbers of every run and
their median. The JSON document is then the median run's own result (the run whose ``order_key`` is the median:
total time for a failover), with ``repeat`` added: every run's headline numbers and the medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["headline", "median_index", "medians", "render_table", "with_repeat"]


def pick(result: Mapping[str, Any], dotted: str) -> float | None:
    """The number at ``a.b.c`` in ``result``; None when it is missing or not a number."""
    value: Any = result
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def headline(result: Mapping[str, Any], keys: Sequence[str]) -> dict[str, float | None]:
    return {key: pick(result, key) for key in keys}


def medians(results: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, float | None]:
    """Per key, the median over the runs that have it (None when none has)."""
    out: dict[str, float | None] = {}
    for key in keys:
        values = [v for v in (pick(r, key) for r in results) if v is not None]
        out[key] = round(statistics.median(values), 3) if values else None
    return out


def median_index(results: Sequence[Mapping[str, Any]], order_key: str) -> int:
    """The index of the median run by ``order_key`` (the lower median for an even count; runs without the key
    sort last)."""
    if not results:
        raise ValueError("no runs")
    order = sorted(range(len(results)), key=lambda i: (pick(results[i], order_key) is None,
                                                      pick(results[i], order_key) or 0.0, i))
    return order[(len(order) - 1) // 2]


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) < 1 else f"{value:,.2f}"


def render_table(results: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> str:
    """A text table: one row per key, one column per run, then the median."""
    med = medians(results, keys)
    header = ["number", *(f"run {i}" for i in range(1, len(results) + 1)), "median"]
    rows = [[key, *(_fmt(pick(r, key)) for r in results), _fmt(med[key])] for key in keys]
    widths = [max(len(str(row[c])) for row in [header, *rows]) for c in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(widths[0]) if c == 0 else cell.rjust(widths[c]) for c, cell in enumerate(cells))

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def with_repeat(results: Sequence[dict[str, Any]], keys: Sequence[str], order_key: str) -> dict[str, Any]:
    """The JSON document of several runs: the median run's result plus ``repeat`` (every run's headline numbers,
    the medians, which run is the median one, and every run's problems)."""
    index = median_index(results, order_key)
    doc = dict(results[index])
    doc["repeat"] = {
        "runs": len(results),
        "median_run": index + 1,
        "headline": [headline(r, keys) for r in results],
        "median": medians(results, keys),
        "problems": [list(r.get("problems") or []) for r in results],
    }
    doc["problems"] = [f"run {i}: {p}" for i, r in enumerate(results, start=1) for p in (r.get("problems") or [])]
    return doc
