"""The benchmark's child processes (control plane, members) and what /proc says about a process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import BinaryIO

__all__ = ["ChildProcess", "peak_rss_mb", "proc_cpu_seconds", "rss_mb"]


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc; 0 if unknown."""
    if pid == os.getpid():
        return time.process_time()  # finer than /proc's clock ticks
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_kb(pid: int, key: str) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    found = re.search(rf"^{key}:\s+(\d+)\s+kB", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size so far (VmHWM), in MiB; 0 if unknown."""
    return round(_status_kb(pid, "VmHWM") / 1024, 1)


def rss_mb(pid: int) -> float:
    """The process's resident set size now (VmRSS), in MiB; 0 if unknown."""
    return round(_status_kb(pid, "VmRSS") / 1024, 1)


class ChildProcess:
    """``python -m flotilla.main ARGS`` in its own session, started once it prints a line matching ``ready``.

    Its stdout and stderr go to ``log`` (stdout after the ready line is drained there too, so a chatty child
    never blocks on a full pipe)."""

    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", "flotilla.main", *args]
        self.log_path = log
        self.proc: asyncio.subprocess.Process | None = None
        self.ready_line = ""
        self._drain: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _open_log(self) -> BinaryIO:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return open(self.log_path, "ab")  # noqa: SIM115 - closed by the caller once the child has its copy

    async def start(self, ready: str | None, within: float = 120.0) -> str:
        """Start and wait for the first stdout line matching the regex ``ready``; returns that line (``None``: do
        not wait; the caller knows another way when the child is ready)."""
        log = self._open_log()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log,
                start_new_session=True)
        finally:
            log.close()
        assert self.proc.stdout is not None
        if ready is None:
            self._drain = asyncio.create_task(self._drain_stdout())
            return ""
        pattern = re.compile(ready)
        try:
            async with asyncio.timeout(within):
                while True:
                    raw = await self.proc.stdout.readline()
                    if not raw:
                        code = await self.proc.wait()
                        raise RuntimeError(f"{self.name} exited ({code}) before it was ready: {self.log_tail()}")
                    line = raw.decode(errors="replace").rstrip()
                    self._append(line)
                    if pattern.search(line):
                        self.ready_line = line
                        break
        except TimeoutError:
            await self.stop()
            raise RuntimeError(f"{self.name} was not ready within {within:.0f}s: {self.log_tail()}") from None
        self._drain = asyncio.create_task(self._drain_stdout())
        return self.ready_line

    def _append(self, line: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    async def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            raw = await self.proc.stdout.readline()
            if not raw:
                return
            self._append(raw.decode(errors="replace").rstrip())

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; only this child's own process group."""
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                async with asyncio.timeout(grace):
                    await proc.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drain
            self._drain = None
