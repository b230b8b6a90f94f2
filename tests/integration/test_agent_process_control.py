"""``flotilla up``'s supervised agent processes under ``flotilla sim agent``: a real child process killed for good
(not restarted until started again), frozen with SIGSTOP and thawed, while a crash the supervisor did not cause is
still followed by a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from flotilla.local.agents import AgentControlError, AgentProcess

RESTART_DELAY = 0.2


def process_state(pid: int) -> str:
    """The kernel's state letter of ``pid`` (R, S, T for stopped, Z), "" once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        pass
    return ""


async def sleeper(tmp_path: Path) -> AgentProcess:
    agent = AgentProcess("m3", [], log_file=tmp_path / "agent.log", pid_file=tmp_path / "agent.pid",
                         restart_delay=RESTART_DELAY)
    agent.argv = [sys.executable, "-c", "import time; time.sleep(300)"]  # a process that runs until killed
    return await agent.start()


async def eventually(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_a_killed_agent_stays_stopped_until_started_again(tmp_path: Path) -> None:
    agent = await sleeper(tmp_path)
    try:
        first = agent.pid
        assert first is not None and agent.state() == {"state": "running", "pid": first, "starts": 1}
        state = await agent.control("kill")
        assert state == {"state": "killed", "pid": None, "starts": 1}
        assert process_state(first) in ("", "Z")
        assert not (tmp_path / "agent.pid").exists()
        await asyncio.sleep(RESTART_DELAY * 5)
        assert agent.state()["state"] == "killed" and agent.starts == 1, "the killed agent was started again"
        assert (await agent.control("kill"))["state"] == "killed"  # again: nothing changes
        with pytest.raises(AgentControlError, match="--mode start"):
            await agent.control("freeze")
        state = await agent.control("start")
        assert state["state"] == "running" and state["starts"] == 2 and state["pid"] not in (None, first)
        assert (tmp_path / "agent.pid").read_text().strip() == str(state["pid"])
        await asyncio.sleep(RESTART_DELAY * 5)
        assert agent.starts == 2, "start spawned more than one process"
    finally:
        await agent.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_freeze_stops_the_process_thaw_resumes_it_and_a_frozen_agent_still_stops_promptly(
        tmp_path: Path) -> None:
    agent = await sleeper(tmp_path)
    pid = agent.pid
    assert pid is not None
    assert (await agent.control("freeze"))["state"] == "frozen"
    await eventually(lambda: process_state(pid) == "T")
    assert (await agent.control("thaw"))["state"] == "running"
    await eventually(lambda: process_state(pid) in ("S", "R"))
    await agent.control("freeze")
    started = time.monotonic()
    await agent.stop()  # SIGTERM reaches it once it is thawed: no wait for the SIGKILL timeout
    assert time.monotonic() - started < 5
    assert process_state(pid) in ("", "Z")


async def test_a_crash_is_still_followed_by_a_restart_and_unknown_modes_are_refused(tmp_path: Path) -> None:
    agent = await sleeper(tmp_path)
    try:
        pid = agent.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # not through control(): a crash
        await eventually(lambda: agent.starts == 2 and agent.pid != pid)
        with pytest.raises(AgentControlError, match="kill, freeze, thaw, start"):
            await agent.control("pause")
    finally:
        await agent.stop()
