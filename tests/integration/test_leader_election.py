"""Lease leader election: candidates talk HTTP to one API server (a thread; one a real subprocess)."""

from __future__ import annotations

import asyncio
import copy
import os
import re
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.client.client import Client
from flotilla.client.leaderelection import LeaderElector
from flotilla.kube.resources import LEASES
from flotilla.kube.times import format_micro_time
from flotilla.kube.times import parse_time as parse_micro_time
from tests.support.apiserver import ServerThread

NS, LOCK = "default", "flotilla-lock"
LEASE, RENEW, RETRY, JITTER = 2.0, 1.5, 0.3, 0.2
# A standby notices a change at most one (jittered) poll late, waits a lease, then polls once more.
TAKEOVER_BOUND = LEASE + 2 * RETRY * (1 + JITTER) + 0.5
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(tmp_path_factory.mktemp("leader-election")).start()
    yield srv
    srv.stop()


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with Client.from_kubeconfig(server.kubeconfig) as c:
        yield c


async def eventually(check: Callable[[], bool], within: float, what: str) -> float:
    """Poll until ``check()``; returns the seconds it took."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > within:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - start


class Candidate:
    def __init__(self, client: Client, identity: str, lock: str, **kw: Any) -> None:
        self.identity = identity
        self.started = 0
        self.stopped = 0
        self.work_cancelled = 0
        self.leaders: list[str] = []
        self.fail_with: BaseException | None = None
        self.elector = LeaderElector(
            client, NS, lock, identity,
            lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY, jitter=JITTER,
            on_started_leading=self._lead, on_stopped_leading=self._stopped, on_new_leader=self.leaders.append,
            **kw,
        )  # fmt: skip
        self.task: asyncio.Task[None] | None = None

    async def _lead(self) -> None:
        self.started += 1
        if self.fail_with is not None:
            raise self.fail_with
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.work_cancelled += 1
            raise

    def _stopped(self) -> None:
        self.stopped += 1

    def start(self) -> Candidate:
        self.task = asyncio.create_task(self.elector.run())
        return self

    async def crash(self) -> None:
        """Die without releasing, as a killed process would."""
        self.elector.release_on_cancel = False
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task

    async def cleanup(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)


async def lease_spec(client: Client, lock: str) -> dict[str, Any]:
    spec: dict[str, Any] = (await client.get(LEASES, lock, NS))["spec"]
    return spec


def test_micro_time_format() -> None:
    from datetime import UTC, datetime

    dt = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
    assert format_micro_time(dt) == "2026-11-30T12:00:00.123456Z"
    assert parse_micro_time("2026-11-30T12:00:00.123456Z") == dt


def test_durations_are_validated() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, NS, LOCK, "x", lease_duration=2, renew_deadline=2, retry_period=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LeaderElector(None, NS, LOCK, "x", lease_duration=3, renew_deadline=1, retry_period=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LeaderElector(None, NS, LOCK, "", lease_duration=3, renew_deadline=2, retry_period=1)  # type: ignore[arg-type]


async def test_exactly_one_of_two_leads_and_keeps_renewing(client: Client) -> None:
    lock = "one-leader"
    a, b = Candidate(client, "a", lock).start(), Candidate(client, "b", lock).start()
    try:
        await eventually(lambda: a.elector.is_leader() or b.elector.is_leader(), 3, "a leader")
        leader, standby = (a, b) if a.elector.is_leader() else (b, a)
        first = await lease_spec(client, lock)
        await asyncio.sleep(4 * RETRY)
        assert leader.elector.is_leader() and not standby.elector.is_leader()
        assert (leader.started, standby.started) == (1, 0)
        spec = await lease_spec(client, lock)
        assert spec["holderIdentity"] == leader.identity
        assert spec["leaseDurationSeconds"] == 2
        assert spec["leaseTransitions"] == 0
        assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"])
        assert spec["acquireTime"] == first["acquireTime"]  # renewals keep the acquire time ...
        assert parse_micro_time(spec["renewTime"]) > parse_micro_time(
            first["renewTime"]
        )  # ... and move renewTime
        assert standby.leaders == [leader.identity] and standby.elector.leader == leader.identity
    finally:
        await a.cleanup()
        await b.cleanup()


async def test_standby_takes_over_after_the_leader_crashes(client: Client) -> None:
    lock = "crash"
    a = Candidate(client, "a", lock).start()
    await eventually(a.elector.is_leader, 3, "a to lead")
    b = Candidate(client, "b", lock).start()
    try:
        await asyncio.sleep(3 * RETRY)
        assert not b.elector.is_leader()
        await a.crash()
        took = await eventually(b.elector.is_leader, TAKEOVER_BOUND + 2, "b to take over")
        assert took <= TAKEOVER_BOUND
        assert took >= LEASE - RETRY * (1 + JITTER) - 0.2  # not before the crashed leader's lease ran out
        spec = await lease_spec(client, lock)
        assert spec["holderIdentity"] == "b"
        assert spec["leaseTransitions"] == 1
        assert b.started == 1 and b.leaders == ["a", "b"]
    finally:
        await a.cleanup()
        await b.cleanup()


async def test_clean_release_hands_over_at_once(client: Client) -> None:
    lock = "release"
    a = Candidate(client, "a", lock).start()
    await eventually(a.elector.is_leader, 3, "a to lead")
    b = Candidate(client, "b", lock).start()
    try:
        await asyncio.sleep(2 * RETRY)
        await a.elector.stop()
        assert a.task is not None and a.task.done()
        assert (a.work_cancelled, a.stopped) == (1, 1)
        released = await lease_spec(client, lock)
        if released["holderIdentity"] == "":  # b may already have taken it
            assert released["leaseDurationSeconds"] == 1
        took = await eventually(b.elector.is_leader, LEASE, "b to take over")
        assert took <= RETRY * (1 + JITTER) + 0.5
        spec = await lease_spec(client, lock)
        assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
        # and back again: a new candidate "a" is second in line, transitions keep counting
        await b.elector.stop()
        a2 = Candidate(client, "a", lock).start()
        await eventually(a2.elector.is_leader, 2, "a to lead again")
        assert (await lease_spec(client, lock))["leaseTransitions"] == 2
        await a2.cleanup()
    finally:
        await a.cleanup()
        await b.cleanup()


async def test_a_deposed_leader_cancels_its_work_and_returns(client: Client) -> None:
    lock = "deposed"
    a = Candidate(client, "a", lock).start()
    await eventually(a.elector.is_leader, 3, "a to lead")
    lease = await client.get(LEASES, lock, NS)
    lease["spec"].update(holderIdentity="intruder", leaseDurationSeconds=30)
    await client.update(LEASES, lease)  # someone else grabbed it (e.g. after a partition)
    assert a.task is not None
    await asyncio.wait_for(asyncio.shield(a.task), RENEW + 2 * RETRY + 1)
    assert not a.elector.is_leader()
    assert (a.started, a.work_cancelled, a.stopped) == (1, 1, 1)
    assert (await lease_spec(client, lock))[
        "holderIdentity"
    ] == "intruder"  # a deposed leader does not release
    assert a.leaders == ["a", "intruder"]


async def test_failing_leader_work_steps_down_and_raises(client: Client) -> None:
    lock = "failing"
    a = Candidate(client, "a", lock)
    a.fail_with = RuntimeError("controller crashed")
    a.start()
    assert a.task is not None
    with pytest.raises(RuntimeError, match="controller crashed"):
        await asyncio.wait_for(a.task, 5)
    assert a.stopped == 1
    spec = await lease_spec(client, lock)
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1


class _InterferingClient:
    """Reads the lease, then lets someone else write it before the caller's update (which is stale)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.create = client.create
        self.update = client.update

    async def get(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj = await self.client.get(res, name, namespace)
        other = copy.deepcopy(obj)
        other["metadata"].setdefault("annotations", {})["touched"] = "yes"
        await self.client.update(res, other)  # bumps resourceVersion
        obj["spec"]["holderIdentity"] = ""  # looks free: the caller will try to take it
        return obj


async def test_a_write_with_a_stale_resource_version_loses_the_race(client: Client) -> None:
    lock = "race"
    a = Candidate(client, "a", lock).start()
    try:
        await eventually(a.elector.is_leader, 3, "a to lead")
        await a.elector.stop(release=False)
        b = LeaderElector(
            _InterferingClient(client),
            NS,
            lock,
            "b",
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
        )
        assert await b._try_acquire_or_renew() is False  # 409 Conflict: not leader
        assert not b.is_leader()
        assert (await lease_spec(client, lock))["holderIdentity"] == "a"
    finally:
        await a.cleanup()


ELECTOR_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from flotilla.client.client import Client
    from flotilla.client.leaderelection import LeaderElector

    async def main() -> None:
        kubeconfig, lock, identity = sys.argv[1:4]
        async with Client.from_kubeconfig(kubeconfig) as client:
            async def lead() -> None:
                print("LEADING", flush=True)
                await asyncio.Event().wait()

            elector = LeaderElector(client, "default", lock, identity, lease_duration=2.0,
                                    renew_deadline=1.5, retry_period=0.3, jitter=0.2, on_started_leading=lead)
            await elector.run()

    asyncio.run(main())
    """
)


async def test_standby_takes_over_from_a_sigkilled_process(
    client: Client, server: ServerThread, tmp_path: Path
) -> None:
    lock = "sigkill"
    script = tmp_path / "elector.py"
    script.write_text(ELECTOR_SCRIPT)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(server.kubeconfig), lock, "proc",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    b: Candidate | None = None
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        assert line.strip() == b"LEADING", (
            line,
            await proc.stderr.read() if proc.returncode is not None else "",
        )
        b = Candidate(client, "b", lock).start()
        await asyncio.sleep(3 * RETRY)
        assert not b.elector.is_leader() and b.elector.leader == "proc"
        os.kill(proc.pid, signal.SIGKILL)
        assert await asyncio.wait_for(proc.wait(), 5) == -signal.SIGKILL
        took = await eventually(b.elector.is_leader, TAKEOVER_BOUND + 2, "b to take over")
        assert took <= TAKEOVER_BOUND
        spec = await lease_spec(client, lock)
        assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if b is not None:
            await b.cleanup()
