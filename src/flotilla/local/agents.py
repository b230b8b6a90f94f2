"""The agents of ``flotilla up``'s Pull members: one ``flotilla agent`` process each, restarted when it exits.

Each agent runs as its own process (a ``kill -9`` of it is a real agent crash; ``flotilla up`` starts it again a
moment later, as a kubelet restarts a crashed karmada-agent pod). Its pid is in ``D/agents/<member>/agent.pid``
and its log in ``D/agents/<member>/agent.log``. The processes die with ``flotilla up`` (on Linux even when it is
killed: the parent-death signal).

:meth:`AgentProcess.control` is what ``flotilla sim agent <member> --mode kill|freeze|thaw|start`` reaches
through the members' admin endpoint: ``kill`` is a ``kill -9`` after which the agent is NOT started again (an
agent whose node died, or a crash loop that never comes back) until ``start``; ``freeze`` stops the process with
SIGSTOP (it holds its connections and answers nothing, as a hung process does) until ``thaw`` (SIGCONT).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from flotilla.files import PRIVATE_FILE, atomic_write
from flotilla.signals import wait_or_kill

log = logging.getLogger(__name__)

__all__ = ["AGENT_MODES", "AgentControlError", "AgentProcess"]

AGENT_MODES: Final = ("kill", "freeze", "thaw", "start")


class AgentControlError(ValueError):
    """An unknown agent control mode, or one that does not apply to the agent's state."""

RESTART_DELAY: Final = 1.0
STOP_TIMEOUT: Final = 10.0
_PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class AgentProcess:
    """``flotilla <argv>`` supervised: started by :meth:`start`, restarted after it exits, ended by :meth:`stop`."""

    def __init__(self, member: str, argv: Sequence[str], *, log_file: Path, pid_file: Path,
                 say: Callable[[str], None] | None = None, restart_delay: float = RESTART_DELAY) -> None:
        self.member = member
        self.argv = [sys.executable, "-m", "flotilla.main", *argv]
        self.log_file = log_file
        self.pid_file = pid_file
        self.say = say or (lambda m: log.info("%s", m))
        self.restart_delay = restart_delay
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.held = False  # killed by `control("kill")`: not started again until `control("start")`
        self.frozen = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._released = asyncio.Event()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    async def start(self) -> AgentProcess:
        await self._spawn()
        self._task = asyncio.get_running_loop().create_task(self._supervise(), name=f"agent/{self.member}")
        return self

    async def _spawn(self) -> None:
        fd = os.open(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        finally:
            os.close(fd)
        self.starts += 1
        atomic_write(self.pid_file, f"{self.proc.pid}\n".encode())

    async def _supervise(self) -> None:
        while not self._stopping:
            proc = self.proc
            assert proc is not None
            code = await proc.wait()
            if self._stopping:
                return
            if self.proc is not proc:
                continue  # started again by control("start") while this one was being reaped
            if self.held:
                self.say(f"agent of {self.member} (pid {proc.pid}) killed; not started again until "
                         f"`flotilla sim agent {self.member} --mode start`")
                await self._released.wait()
                self._released.clear()
                continue  # control("start") spawned the new process
            self.say(f"agent of {self.member} (pid {proc.pid}) exited with {code}; starting it again in "
                     f"{self.restart_delay:g}s (log {self.log_file})")
            await asyncio.sleep(self.restart_delay)
            if self._stopping:
                return
            if self.held:
                continue  # killed for good meanwhile
            try:
                await self._spawn()
            except OSError as e:
                self.say(f"cannot start the agent of {self.member}: {e}; trying again")

    def state(self) -> dict[str, object]:
        """``{"state": running|frozen|killed, "pid": ..., "starts": n}`` (pid None while killed)."""
        alive = self.proc is not None and self.proc.returncode is None
        what = "killed" if self.held else "frozen" if self.frozen else "running" if alive else "restarting"
        return {"state": what, "pid": self.pid if alive else None, "starts": self.starts}

    async def control(self, mode: str) -> dict[str, object]:
        """``kill`` (SIGKILL, kept stopped), ``freeze`` (SIGSTOP), ``thaw`` (SIGCONT) or ``start`` (a killed
        agent started again, a frozen one thawed); answers :meth:`state`. Repeating a mode changes nothing."""
        if mode not in AGENT_MODES:
            raise AgentControlError(f"unknown agent mode {mode!r}: use one of {', '.join(AGENT_MODES)}")
        if self._stopping:
            raise AgentControlError(f"the agent of {self.member} is being stopped")
        proc = self.proc
        if mode == "kill" and not self.held:
            self.held = True
            self.frozen = False
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()  # SIGKILL reaches a stopped process too
                await proc.wait()
            with contextlib.suppress(OSError):
                self.pid_file.unlink()
            self.say(f"agent of {self.member} killed (kill -9), kept stopped")
        elif mode == "freeze":
            if self.held:
                raise AgentControlError(f"the agent of {self.member} is killed: `--mode start` starts it again")
            if proc is not None and proc.returncode is None and not self.frozen:
                os.kill(proc.pid, signal.SIGSTOP)
                self.frozen = True
                self.say(f"agent of {self.member} (pid {proc.pid}) frozen (SIGSTOP)")
        elif mode in ("thaw", "start") and self.frozen:
            self._thaw()
        elif mode == "start" and self.held:
            self.held = False
            await self._spawn()
            self._released.set()
            self.say(f"agent of {self.member} started again (pid {self.pid})")
        return self.state()

    def _thaw(self) -> None:
        self.frozen = False
        proc = self.proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            self.say(f"agent of {self.member} (pid {proc.pid}) thawed (SIGCONT)")

    async def stop(self) -> None:
        """SIGTERM (the agent stops its controllers and exits 0), SIGKILL after :data:`STOP_TIMEOUT` seconds."""
        self._stopping = True
        self._released.set()
        proc = self.proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            if self.frozen:
                self._thaw()  # a stopped process handles its SIGTERM once it runs again
            await wait_or_kill(proc, STOP_TIMEOUT)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(OSError):
            self.pid_file.unlink()
