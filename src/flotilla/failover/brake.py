"""What the eviction brake (D10) counts as unhealthy, pure with an injected clock.

The brake (:class:`~flotilla.failover.ratelimit.EvictionRateLimiter`) picks its pacing mode from how many
clusters are unhealthy. A cluster's ``Ready`` condition alone is a late and uneven signal when several members
fail together: the cluster-status controller flips it only once the probes have failed for
``--cluster-failure-threshold``, and members that fail at the same instant are probed at different moments of
the status period (and a frozen member's probe hangs until ``--cluster-api-timeout``). So when every member goes
down at once, the first one is ``Ready=False`` and tainted while the others still read ``Ready=True``: without
more, a workload that does not tolerate the taint is evicted at the primary or secondary rate in that window,
towards members that are down too, where the brake should have halted it.

The fix: the brake also counts, as unhealthy, every cluster that is still ``Ready=True`` but *suspect* in the
eyes of the cluster-status controller of the same controller-manager, as recorded on a :class:`ProbeBoard`:

* **failing**: its last probe answered unhealthy or not at all (refused, timed out); its Ready condition is
  kept True only because the failure threshold has not run out yet;
* **overdue**: a probe has been waiting for an answer for ``overdue_after`` (the status period) or longer,
  as a frozen member's probe does until it times out.

The reverse happens when the members come back together: the first ones are Ready again while the others are
still ``Ready=False`` (and tainted) for up to a status period, although they answer their probes again. An
eviction from a cluster that is not Ready but whose last probe answered healthy (:func:`recovering`) waits.

A suspect cluster is either confirmed (``Ready=False`` after the failure threshold) or cleared (a healthy
answer) within the failure threshold plus a probe timeout, so a halt caused by suspects is looked at again
after :func:`halted_recheck`. A normal failover of one member while the others answer their probes has no
suspect at all and is not delayed. A slow member whose every probe takes longer than the status period is
suspect while its probe is in flight: the brake then errs on the side of slowing evictions down.

Limits: the board exists only where the cluster-status controller runs in the same process as the taint
manager (always with ``flotilla controller-manager`` and ``flotilla up`` unless ``--controllers`` splits them);
without it the brake counts Ready conditions only, as before. Members that fail together are seen failing
within one status period of each other, so the window is closed when ``--cluster-failure-threshold`` is at
least ``--cluster-status-update-frequency`` (Karmada's defaults: 30 s and 10 s).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

__all__ = ["PROBE_BOARD", "BrakeCount", "ProbeBoard", "brake_count", "halted_recheck", "recovering"]

#: Key of the :class:`ProbeBoard` in ``ControllerContext.extras`` (put there by the cluster-status controller).
PROBE_BOARD: Final = "flotilla.failover.brake.probe-board"


@dataclass
class _Probes:
    started: float | None = None  # a probe waiting for its answer since (None: none in flight)
    failing_since: float | None = None  # the first of the failed answers since the last healthy one
    healthy: bool | None = None  # the last answer (None: none yet)


class ProbeBoard:
    """The probes of each member as the cluster-status controller made them (one board per controller-manager).

    ``now`` is a monotonic clock in seconds (``time.monotonic()`` in the controllers, a fake one in tests).
    """

    def __init__(self, overdue_after: float) -> None:
        if not overdue_after > 0:
            raise ValueError(f"overdue_after must be greater than 0, got {overdue_after!r}")
        self.overdue_after = float(overdue_after)
        self._probes: dict[str, _Probes] = {}
        self._listeners: list[Callable[[str, bool], None]] = []

    def add_listener(self, listener: Callable[[str, bool], None]) -> Callable[[], None]:
        """Call ``listener(cluster, healthy)`` after every answer (the execution controller's recovery purge
        runs as soon as a member answers again, D17); returns what removes it. A listener must not block: it
        only queues work."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def started(self, cluster: str, now: float) -> None:
        """A probe of ``cluster`` was sent at ``now``."""
        self._probes.setdefault(cluster, _Probes()).started = now

    def answered(self, cluster: str, healthy: bool, now: float) -> None:
        """The probe of ``cluster`` ended at ``now``: healthy, or not (an unhealthy answer, a refused connection,
        a timeout, a client that could not be built)."""
        probes = self._probes.setdefault(cluster, _Probes())
        probes.started = None
        probes.healthy = healthy
        if healthy:
            probes.failing_since = None
        elif probes.failing_since is None:
            probes.failing_since = now
        for listener in list(self._listeners):
            try:
                listener(cluster, healthy)
            except Exception:  # a listener's bug must not fail the probe
                log.exception("probe board: a listener failed on the answer of %s", cluster)

    def forget(self, cluster: str) -> None:
        """``cluster`` is no longer probed here (deleted, Pull mode, no credentials)."""
        self._probes.pop(cluster, None)

    def last_answer(self, cluster: str) -> bool | None:
        """The last answer of ``cluster``'s probe: healthy (True) or not (False); None when none answered here
        yet (not probed by this process, or its first probe still in flight)."""
        probes = self._probes.get(cluster)
        return None if probes is None else probes.healthy

    def answering(self, cluster: str) -> bool:
        """Whether the last probe of ``cluster`` answered healthy (False when it failed or none answered yet)."""
        probes = self._probes.get(cluster)
        return probes is not None and probes.healthy is True

    def suspect(self, cluster: str, now: float) -> str | None:
        """Why ``cluster`` is suspect at ``now`` (``failing`` or ``overdue``), or None."""
        probes = self._probes.get(cluster)
        if probes is None:
            return None
        if probes.failing_since is not None:
            return "failing"
        if probes.started is not None and now - probes.started >= self.overdue_after:
            return "overdue"
        return None


@dataclass(frozen=True)
class BrakeCount:
    """The clusters as the brake counts them: ``unhealthy`` (Ready not True) and ``suspect`` (Ready True, but
    failing or overdue on the board) among ``total``."""

    total: int
    unhealthy: int
    suspect: int = 0

    @property
    def counted(self) -> int:
        """What the mode is decided from: the unhealthy and the suspect clusters."""
        return self.unhealthy + self.suspect


def brake_count(clusters: Iterable[tuple[str, bool]], board: ProbeBoard | None, now: float) -> BrakeCount:
    """Count ``(name, ready)`` pairs: not ready is unhealthy; ready and suspect on ``board`` is suspect."""
    total = unhealthy = suspect = 0
    for name, ready in clusters:
        total += 1
        if not ready:
            unhealthy += 1
        elif board is not None and board.suspect(name, now) is not None:
            suspect += 1
    return BrakeCount(total, unhealthy, suspect)


def recovering(board: ProbeBoard | None, cluster: str, ready: bool) -> bool:
    """Whether ``cluster`` is not Ready but answers its probes again: it is Ready (and its not-ready taint gone)
    within the success threshold, so an eviction from it waits (members coming back together are Ready a
    status period apart; in between, the brake would see the first ones healthy and the others not)."""
    return not ready and board is not None and board.answering(cluster)


def halted_recheck(count: BrakeCount, default: float, status_period: float, failure_threshold: float) -> float:
    """Seconds before a halted eviction is looked at again: ``default``; sooner when suspects took part in the
    halt (they are confirmed or cleared within a status period plus the failure threshold)."""
    if count.suspect <= 0:
        return default
    return max(min(default, status_period + failure_threshold), 0.1)
