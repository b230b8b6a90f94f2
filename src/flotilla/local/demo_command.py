"""``flotilla demo``: the stateful failover story on one machine (:mod:`flotilla.local.demo`); ``make demo`` runs it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_demo_parser"]

DEMO_EPILOG = """\
what it shows: a FlinkDeployment processing records on member1, with a PropagationPolicy preserving
{ .jobStatus.jobId } and purgeMode Directly, moved to another member with its state when member1 fails.

By default, automatic fencing: the three members are Pull members whose agents keep a run permit and whose
members run the guard (as flotilla up --pull-members 3 --guard --fence-after 4 --permit-hold 12 --fence-margin 4).
member1 is cut off from the control plane; its job keeps running behind the cut until its guard stops it (the run
permit went stale); the control plane fences member1 by itself once it has seen no Lease renewal for
12 + 4 + 4 = 20 s (Event ClusterFencedAutomatically, condition Fenced); the job is re-created on another member
with the job id as a label and resumes from its newest checkpoint. Nobody types anything. The partition heals and
member1's stale copy is deleted before it could run again.

With --manual-fence: member1 loses power; detection, the not-ready:NoExecute taint, the eviction with the job id,
an operator's `flotilla fence member1`, the job resumed on another member; then member1 comes back, is unfenced
and its stale copy is removed.

Each step is printed with the time since the fault; a summary table (the time of each step, and how many copies
ran at once according to the members' running history) and checks close it. Exit code 0 only if every check held.

examples:
  flotilla demo                 # automatic fencing, about a minute; everything stops at the end
  flotilla demo --manual-fence  # the power-off story with an operator's fence, about 30 seconds
  flotilla demo --keep          # leaves Flotilla running to explore with kubectl (Ctrl-C stops it)
"""


def add_demo_parser(sub: Any) -> None:
    d = sub.add_parser("demo", help="the stateful failover demo: a Flink job survives losing its cluster, which "
                                    "the control plane fences by itself",
                       description="Run the stateful failover demo on this machine.", epilog=DEMO_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--data-dir", default=".flotilla-demo",
                   help="where the demo's control plane and members keep their data; removed at the start "
                        "(default .flotilla-demo)")
    d.add_argument("--manual-fence", action="store_true",
                   help="the power-off story instead: three Push members, member1 powered off and fenced by an "
                        "operator (flotilla fence member1)")
    d.add_argument("--keep", action="store_true", help="leave Flotilla running at the end (Ctrl-C stops it)")
    d.set_defaults(fn=_run)


def _run(args: argparse.Namespace) -> int:
    from flotilla.local.demo import run_demo

    return run_demo(Path(args.data_dir), keep=args.keep, manual_fence=args.manual_fence)
