"""Watching a ``flotilla up --guard`` stack through a fault: when each cluster was first seen fenced, when each
job was first seen RUNNING away from its home member, and whether its home copy was seen stopped by its guard."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.support.fencing import Stack


@dataclass
class Watch:
    stack: Stack
    t0: float = field(default_factory=time.monotonic)
    fenced: dict[str, float] = field(default_factory=dict)  # cluster -> seconds after t0 it was seen fenced
    moved: dict[str, tuple[str, float]] = field(default_factory=dict)  # job -> (new member, seconds after t0)
    stopped: dict[str, float] = field(default_factory=dict)  # job -> seconds after t0 its home copy was not RUNNING
    errors: list[BaseException] = field(default_factory=list)  # raised by the timed actions

    def now(self) -> float:
        return time.monotonic() - self.t0

    def poll(self, jobs: list[str]) -> None:
        for name in self.stack.fenced():
            self.fenced.setdefault(name, self.now())
        states = self.stack.states()
        for job in jobs:
            home = self.stack.jobs[job]
            at_home = states[home]
            if job not in self.stopped and at_home is not None and at_home.get(job) not in ("RUNNING", None):
                self.stopped[job] = self.now()
            if job not in self.moved:
                for m, running in states.items():
                    if m != home and running is not None and running.get(job) == "RUNNING":
                        self.moved[job] = (m, self.now())

    def until(self, jobs: list[str], seconds: float, *, done: list[str] | None = None,
              actions: list[tuple[float, Callable[[], object]]] | None = None) -> None:
        """Poll until ``seconds`` after t0, or until every job of ``done`` has moved (once every action ran).
        ``actions``: (time.monotonic() at which to run it, what to run), each run on time on a timer thread,
        however long a poll takes."""
        timers = [threading.Timer(max(0.0, at - time.monotonic()), self._run, (action,)) for at, action in actions or []]
        for timer in timers:
            timer.start()
        try:
            while self.now() < seconds:
                self.poll(jobs)
                if all(not t.is_alive() for t in timers) and done is not None and all(j in self.moved for j in done):
                    break
                time.sleep(0.3)
        finally:
            for timer in timers:
                timer.join()
        assert not self.errors, f"actions failed: {self.errors}"

    def _run(self, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as e:  # reported by until(), in the test's thread
            self.errors.append(e)

    def summary(self) -> str:
        return (f"fenced {({k: round(v, 1) for k, v in self.fenced.items()})}, "
                f"moved {({k: (m, round(t, 1)) for k, (m, t) in self.moved.items()})}, "
                f"guard-stopped {({k: round(v, 1) for k, v in self.stopped.items()})}")
