"""The agents of ``flotilla up``'s Pull members: one ``flotilla agent`` process each, restarted when it exits.

Each agent runs as its own process (a ``kill -9`` of it is a real agent crash; ``flotilla up`` starts it again a
moment later, as a kubelet restarts a crashed karmada-agent pod). Its pid is in ``D/agents/<member>/agent.pid``
and its log in ``D/agents/<member>/agent.log``. The processes die with ``flotilla up`` (on Linux even when it is
killed: the parent-death signal).
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

log = logging.getLogger(__name__)

__all__ = ["AgentProcess"]

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
        self.argv = [sys.executable, "-m", "flotilla.cli.main", *argv]
        self.log_file = log_file
        self.pid_file = pid_file
        self.say = say or (lambda m: log.info("%s", m))
        self.restart_delay = restart_delay
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

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
            assert self.proc is not None
            code = await self.proc.wait()
            if self._stopping:
                return
            self.say(f"agent of {self.member} (pid {self.proc.pid}) exited with {code}; starting it again in "
                     f"{self.restart_delay:g}s (log {self.log_file})")
            await asyncio.sleep(self.restart_delay)
            if self._stopping:
                return
            try:
                await self._spawn()
            except OSError as e:
                self.say(f"cannot start the agent of {self.member}: {e}; trying again")

    async def stop(self) -> None:
        """SIGTERM (the agent stops its controllers and exits 0), SIGKILL after :data:`STOP_TIMEOUT` seconds."""
        self._stopping = True
        proc = self.proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(OSError):
            self.pid_file.unlink()
