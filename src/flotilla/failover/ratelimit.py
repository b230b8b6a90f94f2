"""Pacing of evictions (D10, eviction at the speed of the store with a brake), pure with an injected clock.

Karmada paces its taint evictions with a fixed ``1/--resource-eviction-rate`` sleep per worker (0.5/s by
default: 33 minutes for 1,000 workloads) and has no brake for a disaster. Flotilla uses one token bucket
shared by every eviction, in the manner of Kubernetes' node lifecycle controller for zones:

* **primary** rate ``--resource-eviction-rate`` (default 100/s) while at most
  ``--unhealthy-cluster-threshold`` (default 0.55) of the clusters are unhealthy;
* **secondary** rate ``--secondary-resource-eviction-rate`` (default 1/s) when *more* than that fraction is
  unhealthy;
* **halted** when every cluster is unhealthy: the fault is then most likely the control plane's own network,
  and evicting everything would only make it worse. A rate of 0 also halts.

"Unhealthy" is a cluster whose ``Ready`` condition is not True, plus the *suspect* ones (still Ready, but their
probes fail or hang; :mod:`flotilla.failover.brake`): members that fail together are not all ``Ready=False`` at
the same moment, and the brake must not evict towards the ones that are about to be.

The bucket holds at most ``burst`` tokens (default 1, as Kubernetes' eviction limiter) and refills at the
rate in force; when the rate changes, the tokens earned so far are kept (never more than ``burst``), so a
switch never lets a burst through. Usage, for each eviction::

    wait = limiter.decide(now, unhealthy, total)
    if wait is None:      # halted: do not evict, look again later
        ...
    elif wait > 0:        # not yet: requeue after `wait` seconds
        ...
    else:
        limiter.take(now)
        evict()

``now`` is any monotonic clock in seconds (``time.monotonic()`` in the controller, a fake clock in tests).
The limiter is not thread-safe; the asyncio controller calls it from one loop.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_RESOURCE_EVICTION_RATE",
    "DEFAULT_SECONDARY_RESOURCE_EVICTION_RATE",
    "DEFAULT_UNHEALTHY_CLUSTER_THRESHOLD",
    "EvictionMode",
    "EvictionRateLimiter",
    "NoEvictionToken",
    "eviction_mode",
    "mode_message",
    "validate_eviction_rate_options",
]

DEFAULT_RESOURCE_EVICTION_RATE: Final = 100.0
DEFAULT_SECONDARY_RESOURCE_EVICTION_RATE: Final = 1.0
DEFAULT_UNHEALTHY_CLUSTER_THRESHOLD: Final = 0.55
DEFAULT_BURST: Final = 1

_EPSILON: Final = 1e-9


class EvictionMode(StrEnum):
    PRIMARY = "Primary"
    SECONDARY = "Secondary"
    HALTED = "Halted"


def eviction_mode(unhealthy: int, total: int, threshold: float = DEFAULT_UNHEALTHY_CLUSTER_THRESHOLD) -> EvictionMode:
    """The pacing mode for ``unhealthy`` of ``total`` clusters.

    Every cluster unhealthy (and at least one cluster): halted. More than ``threshold`` of them (strictly):
    secondary. Otherwise (no cluster at all included): primary.
    """
    if total <= 0:
        return EvictionMode.PRIMARY
    unhealthy = max(0, min(unhealthy, total))
    if unhealthy >= total:
        return EvictionMode.HALTED
    if unhealthy / total > threshold:
        return EvictionMode.SECONDARY
    return EvictionMode.PRIMARY


def _suspects(suspect: int) -> str:
    if suspect <= 0:
        return ""
    if suspect == 1:
        return " (1 of them is still Ready, but its probes fail or hang)"
    return f" ({suspect} of them are still Ready, but their probes fail or hang)"


def mode_message(mode: EvictionMode, unhealthy: int, total: int, rate: float, suspect: int = 0) -> str:
    """A sentence for logs and Events about the current pacing (``unhealthy`` counts the ``suspect`` clusters
    too: still Ready, but their probes fail or hang)."""
    if mode is EvictionMode.HALTED:
        if total > 0 and unhealthy >= total:
            return (f"evictions halted: every cluster ({unhealthy}/{total}) is unhealthy{_suspects(suspect)}, so "
                    "the fault is most likely the control plane's own network")
        return "evictions halted: the eviction rate is 0"
    if mode is EvictionMode.SECONDARY:
        return (f"evictions slowed to {rate:g}/s (--secondary-resource-eviction-rate): {unhealthy} of {total} "
                f"clusters are unhealthy{_suspects(suspect)}")
    return f"evictions paced at {rate:g}/s (--resource-eviction-rate)"


def validate_eviction_rate_options(primary_rate: float, secondary_rate: float, threshold: float,
                                   burst: int = DEFAULT_BURST) -> list[str]:
    """Errors in the flags, in Karmada's ``Options`` wording (empty: valid)."""
    errors = []
    if not primary_rate >= 0:
        errors.append(f"ClusterFailoverOptions.ResourceEvictionRate: Invalid value: {primary_rate:g}: "
                      "must be non-negative")
    if not secondary_rate >= 0:
        errors.append(f"ClusterFailoverOptions.SecondaryResourceEvictionRate: Invalid value: {secondary_rate:g}: "
                      "must be non-negative")
    if not 0 <= threshold <= 1:
        errors.append(f"ClusterFailoverOptions.UnhealthyClusterThreshold: Invalid value: {threshold:g}: "
                      "must be between 0 and 1")
    if burst < 1:
        errors.append(f"burst: Invalid value: {burst}: must be at least 1")
    return errors


class NoEvictionToken(RuntimeError):
    """``take`` was called while no token was available (call ``decide`` first)."""


class EvictionRateLimiter:
    """A token bucket whose refill rate follows the health of the clusters (see the module docstring)."""

    def __init__(
        self,
        primary_rate: float = DEFAULT_RESOURCE_EVICTION_RATE,
        secondary_rate: float = DEFAULT_SECONDARY_RESOURCE_EVICTION_RATE,
        unhealthy_threshold: float = DEFAULT_UNHEALTHY_CLUSTER_THRESHOLD,
        burst: int = DEFAULT_BURST,
    ) -> None:
        errors = validate_eviction_rate_options(primary_rate, secondary_rate, unhealthy_threshold, burst)
        if errors:
            raise ValueError("; ".join(errors))
        self.primary_rate = float(primary_rate)
        self.secondary_rate = float(secondary_rate)
        self.unhealthy_threshold = float(unhealthy_threshold)
        self.burst = int(burst)
        self._tokens = float(self.burst)
        self._last: float | None = None
        self._mode = EvictionMode.PRIMARY

    @property
    def mode(self) -> EvictionMode:
        """The mode set by the last :meth:`decide`."""
        return self._mode

    @property
    def rate(self) -> float:
        """The refill rate in force (tokens per second; 0 when halted)."""
        return self._rate_of(self._mode)

    def tokens(self, now: float) -> float:
        """The tokens available at ``now`` (for metrics and tests)."""
        self._advance(now)
        return self._tokens

    def _rate_of(self, mode: EvictionMode) -> float:
        if mode is EvictionMode.PRIMARY:
            return self.primary_rate
        if mode is EvictionMode.SECONDARY:
            return self.secondary_rate
        return 0.0

    def _advance(self, now: float) -> None:
        """Earn the tokens of ``[last, now]`` at the rate in force (a clock going back earns nothing)."""
        if self._last is None:
            self._last = now
            return
        if now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
            self._last = now

    def decide(self, now: float, unhealthy: int, total: int, suspect: int = 0) -> float | None:
        """Seconds to wait before the next eviction (0: evict now, then :meth:`take`); ``None``: halted.

        ``unhealthy``: clusters whose Ready condition is not True; ``suspect``: clusters still Ready whose probes
        fail or hang (:func:`flotilla.failover.brake.brake_count`); the mode follows their sum."""
        self._advance(now)
        self._mode = eviction_mode(unhealthy + suspect, total, self.unhealthy_threshold)
        rate = self.rate
        if rate <= 0:
            self._mode = EvictionMode.HALTED
            return None
        if self._tokens >= 1 - _EPSILON:
            return 0.0
        return (1 - self._tokens) / rate

    def take(self, now: float) -> None:
        """Spend one token for an eviction made at ``now``. Raises :class:`NoEvictionToken` if none is there."""
        self._advance(now)
        if self._mode is EvictionMode.HALTED or self._tokens < 1 - _EPSILON:
            raise NoEvictionToken("no eviction token available: call decide() and wait the time it returns")
        self._tokens = max(self._tokens - 1, 0.0)

    def try_take(self, now: float, unhealthy: int, total: int, suspect: int = 0) -> float | None:
        """:meth:`decide`, then :meth:`take` when the answer is 0; returns the answer."""
        wait = self.decide(now, unhealthy, total, suspect)
        if wait == 0:
            self.take(now)
        return wait

    def message(self, unhealthy: int, total: int, suspect: int = 0) -> str:
        """:func:`mode_message` for the mode of the last :meth:`decide` (same arguments)."""
        return mode_message(self._mode, min(unhealthy + suspect, total), total, self.rate, suspect)
