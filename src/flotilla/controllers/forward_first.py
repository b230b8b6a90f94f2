"""Forward first: while the controllers that carry objects to their clusters have keys waiting, the controllers
that only report status hold back.

Every controller of a controller-manager shares one event loop, so under a burst (a thousand templates applied at
once, a member failing with a thousand workloads) they share one CPU. The detector, scheduler, binding, execution,
taint-manager and application-failover controllers move a workload towards its clusters; the work-status and
binding-status controllers report what happened there. Reporting the first copies while the last ones are not
created yet delays the last ones, and reports an intermediate picture that the next report replaces.

So a pass of a reporting controller first waits, while any forward queue has keys ready and for at most
``max_wait`` seconds, then runs. Nothing starves: a reporting pass is delayed by ``max_wait`` at most, and at once
when the forward queues are empty. Karmada runs its controllers on many cores and has no such order; the end
state and every object written are the same, only their order under load differs.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

__all__ = ["FORWARD_FIRST_MAX_WAIT", "ForwardFirst"]

#: Seconds at most that one pass of a reporting controller waits for the forward queues.
FORWARD_FIRST_MAX_WAIT: Final = 1.0
#: Seconds between two looks at the forward queues while waiting.
_LOOK_EVERY: Final = 0.02


class ForwardFirst:
    """The forward controllers' queues, and the wait of a reporting pass."""

    def __init__(self, max_wait: float = FORWARD_FIRST_MAX_WAIT) -> None:
        self.max_wait = max_wait
        self._queues: list[Any] = []
        #: passes that waited, and the seconds they waited in all (for the metrics and the benchmarks)
        self.waits = 0
        self.waited_seconds = 0.0

    def add_forward(self, queue: Any) -> None:
        """A queue (anything with a ``depth``) of a controller that moves objects towards their clusters."""
        self._queues.append(queue)

    def busy(self) -> bool:
        """Whether a forward queue has keys ready for its workers."""
        return any(q.depth for q in self._queues)

    async def turn(self) -> None:
        """Return once no forward queue has keys ready, or after ``max_wait`` seconds."""
        if self.max_wait <= 0 or not self.busy():
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + self.max_wait
        while True:
            await asyncio.sleep(min(_LOOK_EVERY, max(0.0, deadline - loop.time())))
            if not self.busy() or loop.time() >= deadline:
                break
        self.waits += 1
        self.waited_seconds += loop.time() - start
