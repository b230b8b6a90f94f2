"""The run permit asks for the agent's own Lease renewal at once when neither its hold nor the peers keep it.

When a control-plane cut heals, the other agents reach the control plane first and stop reporting it
unreachable: the peers' quorum that kept this agent's permit dissolves while this agent's own renewal may still be
waiting for its retry backoff. Retrying at once renews the permit before the guard's fence-after runs out.
Real API servers (in process) stand for the control plane and the member."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flotilla.agent.permit import PermitKeeper
from flotilla.apiserver.inprocess import in_process_client
from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.failover.run_permit import PermitStep


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, ApiServer]]:
    cp = await ApiServer(ApiServerConfig(data_dir=tmp_path / "cp", port=0, write_kubeconfig=False)).start()
    member = await ApiServer(ApiServerConfig(data_dir=tmp_path / "member", port=0, write_kubeconfig=False)).start()
    try:
        yield cp, member
    finally:
        await member.stop()
        await cp.stop()


def keeper(cp: ApiServer, member: ApiServer, last_renewal_started: float | None,
           asked: list[float]) -> PermitKeeper:
    assert cp.storage is not None and member.storage is not None
    return PermitKeeper(in_process_client(cp.storage), in_process_client(member.storage), "member1",
                        fence_after=4.0, permit_hold=12.0, renew_interval=1.0,
                        last_renewal_started=lambda: last_renewal_started, caches=lambda: None,
                        monotonic=time.monotonic, now=lambda: datetime.now(UTC),
                        renew_now=lambda: asked.append(time.monotonic()))


async def test_a_withheld_permit_asks_for_the_agents_lease_renewal_at_once(
        servers: tuple[ApiServer, ApiServer]) -> None:
    cp, member = servers
    asked: list[float] = []
    lapsed = keeper(cp, member, time.monotonic() - 46.0, asked)  # the hold lapsed; no peer keeps the permit
    assert await lapsed.step_once() is PermitStep.WITHHOLD
    assert len(asked) == 1


async def test_a_permit_held_by_the_agents_own_renewal_asks_for_nothing(
        servers: tuple[ApiServer, ApiServer]) -> None:
    cp, member = servers
    asked: list[float] = []
    held = keeper(cp, member, time.monotonic() - 1.0, asked)
    assert await held.step_once() is not PermitStep.WITHHOLD
    assert asked == []
