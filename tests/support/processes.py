"""Child processes for tests whose output goes to a log file (a pipe nobody reads could fill up and block them)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Self


@dataclass
class LoggedProcess:
    popen: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, argv: list[str], log: Path) -> Self:
        """Run ``argv`` with stdout and stderr to ``log``."""
        with open(log, "wb") as out:
            popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        return cls(popen, log)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
