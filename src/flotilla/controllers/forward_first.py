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


class ForwardFirst:
    """The forward controllers' queues, and the wait of a reporting pass."""

    def __init__(self, max_wait: float = FORWARD_FIRST_MAX_WAIT, trickle: int = FORWARD_FIRST_TRICKLE) -> None:
        self.max_wait = max_wait
        self.trickle = trickle
        self._queues: list[Any] = []
        self._reports: list[Any] = []
        self.cleanup_max_wait = FORWARD_FIRST_CLEANUP_MAX_WAIT
        self._trickling = 0
        #: passes that waited, and the seconds they waited in all (for the metrics and the benchmarks)
        self.waits = 0
        self.waited_seconds = 0.0

    def add_forward(self, queue: Any) -> None:
        """A queue (anything with a ``depth``) of a controller that moves objects towards their clusters."""
        self._queues.append(queue)

    def add_reports(self, queue: Any) -> None:
        """A queue of a controller that reports status: clean-up passes wait for it too."""
        self._reports.append(queue)

    async def cleanup_turn(self) -> None:
        """Return once no reporting queue has keys ready, or after ``cleanup_max_wait`` seconds."""
        if self.cleanup_max_wait <= 0 or not self._reporting():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cleanup_max_wait
        while loop.time() < deadline:
            await asyncio.sleep(min(_LOOK_EVERY, max(0.0, deadline - loop.time())))
            if not self._reporting():
                return

    def _reporting(self) -> bool:
        return any(q.depth for q in self._reports)

    def busy(self) -> bool:
        """Whether a forward queue has keys ready for its workers."""
        return any(q.depth for q in self._queues)

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
        deadline = start + self.max_wait
        took = False
        while True:
            await asyncio.sleep(min(_LOOK_EVERY, max(0.0, deadline - loop.time())))
            if not self.busy() or loop.time() >= deadline:
                break
            if self._take_trickle():
                took = True
                break
        self.waits += 1
        self.waited_seconds += loop.time() - start
        return took

    def done(self, took: bool) -> None:
        """A pass that :meth:`turn` let run as a trickle place is over."""
        if took:
            self._trickling -= 1
