"""``flotilla demo``: the stateful failover story on one machine (:mod:`flotilla.local.demo`); ``make demo`` runs it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_demo_parser"]

DEMO_EPILOG = """\
what it shows: a FlinkDeployment processing records on member1, with a PropagationPolicy preserving
{ .jobStatus.jobId } and purgeMode Directly; member1 loses power; detection, the not-ready:NoExecute taint, the
eviction with the job id, fencing, the job re-created on another member with the job id as a label, the member-side
restore rule resuming it from its newest checkpoint; then member1 comes back and its stale copy is removed. Each
step is printed with the time since the power went off; a summary table and checks close it. Exit code 0 only if
every check held.

examples:
  flotilla demo                 # about 30 seconds; everything stops at the end
  flotilla demo --keep          # leaves Flotilla running to explore with kubectl (Ctrl-C stops it)
"""


def add_demo_parser(sub: Any) -> None:
    d = sub.add_parser("demo", help="the stateful failover demo: a Flink job survives its cluster's power loss",
                       description="Run the stateful failover demo on this machine.", epilog=DEMO_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--data-dir", default=".flotilla-demo",
                   help="where the demo's control plane and members keep their data; removed at the start "
                        "(default .flotilla-demo)")
    d.add_argument("--keep", action="store_true", help="leave Flotilla running at the end (Ctrl-C stops it)")
    d.set_defaults(fn=_run)


def _run(args: argparse.Namespace) -> int:
    from flotilla.local.demo import run_demo

    return run_demo(Path(args.data_dir), keep=args.keep)
