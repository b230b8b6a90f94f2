"""The faults ``flotilla soak partition`` draws from, by name, with what each does: a table that imports nothing,
so that the command's ``--help`` lists them without loading the trial (:data:`flotilla.reliability.partition.FAULTS`
holds how each is injected and healed)."""

from __future__ import annotations

from typing import Final

__all__ = ["FAULT_WHAT"]

#: fault name -> what it does
FAULT_WHAT: Final[dict[str, str]] = {
    "partition": "cut one member's link to the control plane both ways",
    "partition-near-bound": "a partition healed around the moment the fence is due",
    "partition-two": "two members cut off at once",
    "agent-kill": "kill -9 of the member's agent (flotilla up starts it again)",
    "agent-freeze": "the agent SIGSTOPped, then SIGCONTinued",
    "member-down": "the member's API refuses connections while its agent runs",
    "member-off": "the member powered off (API gone, workloads stopped)",
}
