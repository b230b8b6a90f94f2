"""``--plot FILE.png``: counts over time, as step curves (matplotlib, the optional extra ``flotilla[bench]``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flotilla.bench.stats import STAGES

__all__ = ["MatplotlibMissing", "plot_recovery", "require_matplotlib", "step_plot"]


class MatplotlibMissing(SystemExit):
    """--plot without matplotlib installed."""


def require_matplotlib() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MatplotlibMissing("flotilla bench: --plot needs matplotlib, which is not installed; install "
                                "the extra with `pip install -e '.[bench]'` (make bench does), or leave out "
                                "--plot") from None
    return plt


@contextlib.contextmanager
def step_plot(path: str, total: int, since: str, counted: str) -> Iterator[Any]:
    """The axes to draw step curves of ``counted`` things on (up to ``total``, a dashed line) over seconds since
    ``since``; the figure is written to ``path`` when the block ends."""
    plt = require_matplotlib()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    try:
        yield ax
        ax.axhline(total, color="black", linewidth=0.5, linestyle="--")
        ax.set_xlabel(f"seconds since {since}")
        ax.set_ylabel(counted)
        ax.set_ylim(0, max(1, total) * 1.05)
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def plot_recovery(result: dict[str, Any], path: str) -> None:
    """One line per stage (workloads that reached it, over seconds since the fault); Healthy is the bold one."""
    with step_plot(path, result.get("workloads", 0), "the fault", "workloads") as ax:
        curves = result.get("curves") or {}
        for key, label in STAGES:
            points = curves.get(key) or []
            xs = [0.0] + [p[0] for p in points]
            ys = [0] + [p[1] for p in points]
            healthy = key == "healthy"
            ax.step(xs, ys, where="post", label=label, linewidth=2.4 if healthy else 1.1,
                    alpha=1.0 if healthy else 0.75, zorder=3 if healthy else 2)
        fault = result.get("fault") or {}
        for what, key in (("not-ready taint", "not_ready_taint_s"), ("fenced", "fenced_s")):
            if isinstance(fault.get(key), (int, float)):
                ax.axvline(fault[key], color="grey", linestyle=":", linewidth=1)
                ax.annotate(what, (fault[key], 0), textcoords="offset points", xytext=(3, 5), fontsize=8,
                            color="grey")
        ax.set_title(f"{result.get('workloads', 0)} {result.get('kind')} workloads off member1 "
                     f"({result.get('members')} members, {result.get('purge_mode')}, "
                     f"state {'on' if result.get('state') else 'off'}, {result.get('storage')}, "
                     f"fault {fault.get('kind')}): all Healthy in {result.get('total_seconds', 0):.1f} s, "
                     f"{result.get('throughput_per_s', 0):.1f}/s", fontsize=9)
