"""Forward first: while the controllers that carry objects to their clusters have keys waiting, the controllers
that only report status hold back, and clean-up waits for both.

Every controller of a controller-manager shares one event loop, so under a burst (a thousand templates applied at
once, a member failing with a thousand workloads) they share one CPU. The detector, scheduler, binding, execution,
taint-manager and application-failover controllers move a workload towards its clusters; the work-status and
binding-status controllers report what happened there. Reporting the first copies while the last ones are not
created yet delays the last ones, and reports an intermediate picture that the next report replaces.

So a pass of a reporting controller first waits, while any forward queue has keys ready and for at most
``max_wait`` seconds, then runs. One reporting pass at a time (``trickle``) runs meanwhile: it fills the moments
in which every forward pass waits for a write or a member, so the CPU does not idle while reports wait.

A forward controller's own status write that nothing forward waits for goes the same way: the scheduler writes
``spec.clusters`` at once and the ``Scheduled`` condition with ``schedulerObservedGeneration`` as a reporting pass
(:meth:`ForwardFirst.holds_reports`).

Last come the clean-up passes: the graceful-eviction controller removes a task once the new copy is Healthy
(bookkeeping after a Directly eviction, the old copy's removal after a Graceful one). Each of its passes waits
while a reporting queue has keys ready, at most ``cleanup_max_wait`` seconds, so all the workloads of a burst are
Healthy before the bookkeeping of the first ones is done.

Nothing starves: a pass is delayed by its maximum wait at most, and not at all when the queues it waits for are
empty. Karmada runs its controllers on many cores and has no such order; the end state and every object written
are the same, only their order under load differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

__all__ = ["FORWARD_FIRST_CLEANUP_MAX_WAIT", "FORWARD_FIRST_MAX_WAIT", "FORWARD_FIRST_TRICKLE", "ForwardFirst"]

#: Seconds at most that one pass of a reporting controller waits for the forward queues.
FORWARD_FIRST_MAX_WAIT: Final = 1.0
#: Reporting passes that run at once while the forward queues are busy: they use the moments in which every
#: forward pass waits for a write or a member, so the CPU does not idle while reports wait.
FORWARD_FIRST_TRICKLE: Final = 1
#: Seconds at most that one pass of a clean-up controller waits for the forward and reporting queues.
FORWARD_FIRST_CLEANUP_MAX_WAIT: Final = 5.0
#: Seconds between two looks at the forward queues while waiting.
_LOOK_EVERY: Final = 0.02


def _ready(queues: list[Any]) -> bool:
    return any(q.depth for q in queues)


class ForwardFirst:
    """The forward and reporting controllers' queues, and the waits of reporting and clean-up passes."""

    def __init__(self, max_wait: float = FORWARD_FIRST_MAX_WAIT, trickle: int = FORWARD_FIRST_TRICKLE,
                 cleanup_max_wait: float = FORWARD_FIRST_CLEANUP_MAX_WAIT) -> None:
        self.max_wait = max_wait
        self.trickle = trickle
        self.cleanup_max_wait = cleanup_max_wait
        self._forward: list[Any] = []
        self._reports: list[Any] = []
        self._trickling = 0
        #: passes that waited, and the seconds they waited in all
        self.waits = 0
        self.waited_seconds = 0.0
        #: told of every wait: ``(role, seconds)`` (the controller-manager's metrics)
        self.on_wait: Callable[[str, float], None] | None = None

    def _waited(self, role: str, seconds: float) -> None:
        self.waits += 1
        self.waited_seconds += seconds
        if self.on_wait is not None:
            self.on_wait(role, seconds)

    def add_forward(self, queue: Any) -> None:
        """A queue (anything with a ``depth``) of a controller that moves objects towards their clusters."""
        self._forward.append(queue)

    def add_reports(self, queue: Any) -> None:
        """A queue of a controller that reports status: clean-up passes wait for it."""
        self._reports.append(queue)

    def busy(self) -> bool:
        """Whether a forward queue has keys ready for its workers."""
        return _ready(self._forward)

    def holds_reports(self) -> bool:
        """Whether a report made now would wait (:meth:`turn`): a forward queue has keys ready and reports are
        held at all (``max_wait`` > 0). A forward controller then leaves its own status write for later."""
        return self.max_wait > 0 and self.busy()

    def _take_trickle(self) -> bool:
        if self._trickling < self.trickle:
            self._trickling += 1
            return True
        return False

    async def turn(self) -> bool:
        """Return once no forward queue has keys ready, or one of the ``trickle`` passes that run meanwhile may
        run, or after ``max_wait`` seconds. True when the pass took a trickle place: give it back with
        :meth:`done` once the pass is over."""
        if self.max_wait <= 0 or not self.busy():
            return False
        if self._take_trickle():
            return True
        loop = asyncio.get_running_loop()
        start = loop.time()
        took = await _wait_while(self.busy, start + self.max_wait, self._take_trickle)
        self._waited("reports", loop.time() - start)
        return took

    def done(self, took: bool) -> None:
        """A pass that :meth:`turn` let run as a trickle place is over."""
        if took:
            self._trickling -= 1

    async def cleanup_turn(self) -> None:
        """Return once no reporting queue has keys ready, or after ``cleanup_max_wait`` seconds."""
        if self.cleanup_max_wait <= 0 or not _ready(self._reports):
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        await _wait_while(lambda: _ready(self._reports), start + self.cleanup_max_wait)
        self._waited("cleanup", loop.time() - start)


async def _wait_while(busy: Callable[[], bool], deadline: float,
                      place: Callable[[], bool] | None = None) -> bool:
    """Look every :data:`_LOOK_EVERY` seconds until ``busy()`` is false, ``deadline`` (loop time) has passed or
    ``place()`` gives a place; True only in the last case."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(min(_LOOK_EVERY, max(0.0, deadline - loop.time())))
        if not busy() or loop.time() >= deadline:
            return False
        if place is not None and place():
            return True
