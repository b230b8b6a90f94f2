"""Watching a ``flotilla up --guard`` stack through a fault: when each cluster was first seen fenced, when each
job was first seen RUNNING away from its home member, and whether its home copy was seen stopped by its guard."""

from __future__ import annotations

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

    def now(self) -> float:
        return time.monotonic() - self.t0

    def poll(self, jobs: list[str]) -> None:
        for name in self.stack.fenced():
            self.fenced.setdefault(name, self.now())
        states = self.stack.states()
        for job in jobs:
            home = self.stack.jobs[job]
            if job not in self.stopped and states[home].get(job) not in ("RUNNING", None):
                self.stopped[job] = self.now()
            if job not in self.moved:
                for m, running in states.items():
                    if m != home and running.get(job) == "RUNNING":
                        self.moved[job] = (m, self.now())

    def until(self, jobs: list[str], seconds: float, *, done: list[str] | None = None,
              actions: list[tuple[float, Callable[[], object]]] | None = None) -> None:
        """Poll until ``seconds`` after t0, or until every job of ``done`` has moved (once every action ran).
        ``actions``: (time.monotonic() at which to run it, what to run), each run once when its time comes."""
        pending = sorted(actions or [], key=lambda a: a[0])
        while self.now() < seconds:
            while pending and time.monotonic() >= pending[0][0]:
                pending.pop(0)[1]()
            self.poll(jobs)
            if not pending and done is not None and all(j in self.moved for j in done):
                return
            time.sleep(0.3)
        assert not pending, f"{len(pending)} actions never ran: the watch ended first"

    def summary(self) -> str:
        return (f"fenced {({k: round(v, 1) for k, v in self.fenced.items()})}, "
                f"moved {({k: (m, round(t, 1)) for k, (m, t) in self.moved.items()})}, "
                f"guard-stopped {({k: round(v, 1) for k, v in self.stopped.items()})}")
