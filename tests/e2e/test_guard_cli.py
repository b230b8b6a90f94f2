"""``flotilla guard`` as a real process against a simulated member's API: its child runs while the run permit is
renewed and is killed once it stops being renewed (the guard exits 3 saying why)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flotilla.client import Client
from flotilla.failover.run_permit import PERMIT_NAME, PERMIT_NAMESPACE, permit_body, renewed_permit
from flotilla.kube.resources import LEASES, NAMESPACES
from flotilla.member.simulated import MemberCluster, MemberConfig

FENCE_AFTER = 1.5
POLL = 0.1


@pytest.fixture
async def member(tmp_path: Path) -> AsyncIterator[tuple[MemberCluster, Client]]:
    async with MemberCluster(MemberConfig(name="m1", data_dir=tmp_path / "members", simulators=[])) as m:
        client = Client.from_kubeconfig(m.kubeconfig_path)
        await client.create(NAMESPACES, {"metadata": {"name": PERMIT_NAMESPACE}})
        try:
            yield m, client
        finally:
            await client.close()


async def renew(client: Client) -> None:
    lease = await client.get_or_none(LEASES, PERMIT_NAME, PERMIT_NAMESPACE)
    now = datetime.now(UTC)
    if lease is None:
        await client.create(LEASES, permit_body("m1", FENCE_AFTER, now), PERMIT_NAMESPACE)
    else:
        await client.update(LEASES, renewed_permit(lease, "m1", FENCE_AFTER, now))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def child_pid(pidfile: Path, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pidfile.exists() and pidfile.read_text().strip():
            return int(pidfile.read_text())
        await asyncio.sleep(0.05)
    raise AssertionError("the guard never started its child")


async def test_guard_kills_its_child_once_the_permit_stops_being_renewed_and_keeps_it_while_renewed(
        member: tuple[MemberCluster, Client], tmp_path: Path) -> None:
    m, client = member
    pidfile = tmp_path / "child.pid"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from flotilla.main import main; raise SystemExit(main())",
        "guard", "--kubeconfig", str(m.kubeconfig_path), "--fence-after", f"{FENCE_AFTER}s",
        "--poll-interval", f"{POLL}s", "--kill-grace", "2s",
        "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 1000",
        stderr=asyncio.subprocess.PIPE)
    try:
        pid = await child_pid(pidfile)
        # renewed for several fence-after periods: the child is kept
        end = time.monotonic() + FENCE_AFTER * 3
        while time.monotonic() < end:
            await renew(client)
            await asyncio.sleep(0.2)
        assert alive(pid) and proc.returncode is None
        last = time.monotonic()
        code = await asyncio.wait_for(proc.wait(), FENCE_AFTER + 10)
        took = time.monotonic() - last
        assert code == 3
        assert FENCE_AFTER - 0.3 <= took <= FENCE_AFTER + POLL + 2.0, took
        assert not alive(pid)
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode()
        assert "has not changed for" in err and "went stale" in err, err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        with contextlib.suppress(Exception):
            os.kill(int(pidfile.read_text()), 9)
