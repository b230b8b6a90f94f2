"""Which way of a member's link runs towards the member: the agent is a Pull member's link client, the control
plane a Push member's."""

from __future__ import annotations

import pytest

from flotilla.local.links import link_direction
from flotilla.member.faults import FAULT_COMMANDS, PARTITIONS, FaultError, FaultInjector


@pytest.mark.parametrize(("member_is_client", "towards_member", "want"), [
    (True, True, "downstream"),  # Pull: the control plane's answers to the agent
    (True, False, "upstream"),  # Pull: the agent's requests
    (False, True, "upstream"),  # Push: the control plane's requests to the member's API
    (False, False, "downstream"),  # Push: the member's answers
])
def test_link_direction_follows_who_the_links_client_is(member_is_client: bool, towards_member: bool,
                                                        want: str) -> None:
    assert link_direction(member_is_client=member_is_client, towards_member=towards_member) == want


def test_every_partition_mode_is_a_fault_command_and_only_partition_loses_both_ways() -> None:
    assert set(PARTITIONS) <= set(FAULT_COMMANDS)
    assert {mode for mode, direction in PARTITIONS.items() if direction is None} == {"partition"}
    assert set(PARTITIONS.values()) == {None, "to-member", "from-member"}


def test_check_refuses_partitions_without_a_link_and_unknown_modes_applying_nothing() -> None:
    faults = FaultInjector("m1")
    with pytest.raises(FaultError, match="--mode down"):
        faults.check("partition-from-member")
    with pytest.raises(FaultError, match="unknown fault mode 'sideways'"):
        faults.check("sideways")
    with pytest.raises(FaultError, match="latency"):
        faults.check("slow", latency=-1)
    assert faults.check("normal") == "normal" and faults.check("down") == "down"
    assert faults.mode == "normal"
