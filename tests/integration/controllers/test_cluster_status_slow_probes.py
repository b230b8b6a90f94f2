"""The cluster status controller's thresholds with probes that take long.

The success and failure thresholds are measured from the moment a probe's answer was observed, as Karmada's
``thresholdAdjustedReadyCondition`` does (``time.Now()`` after the probe), not from the start of the sync: a
probe that hangs (a frozen member: TCP connects, nothing answers until it resumes) must not shorten the threshold
by the time it hung. Found by tests/e2e/test_partitions.py: a member frozen with SIGSTOP was published Ready 0.03 s
after SIGCONT (success threshold 1 s) because the sync that resumed with it had started 10 s earlier.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.integration.controllers.test_cluster_lifecycle import (  # noqa: F401 (env is a fixture)
    FREQUENCY,
    THRESHOLD,
    Env,
    env,
    eventually,
    ready_cluster,
    ready_of,
)

HANG = 4 * THRESHOLD  # the probe that ends the outage answers after this long


async def ready_status(plane: Env, status: str, timeout: float, after: str) -> dict[str, Any]:
    """Wait for member1's Ready condition to have this status; a timeout names the conditions last seen."""
    seen: list[Any] = []

    async def check() -> dict[str, Any] | None:
        c = await plane.cluster()
        seen[:] = [((c or {}).get("status") or {}).get("conditions")]
        r = ready_of(c)
        return c if r and r["status"] == status else None

    try:
        found: dict[str, Any] = await eventually(check, timeout=timeout, what=f"Ready {status} after {after}")
    except AssertionError as e:
        raise AssertionError(f"{e}; member1's conditions last seen: {seen[0] if seen else None}") from None
    return found


async def test_success_threshold_counts_from_the_answer_not_from_the_start_of_a_hanging_probe(env: Env) -> None:  # noqa: F811
    await env.join()
    await ready_cluster(env)
    await env.fault("down")

    await ready_status(env, "False", timeout=10.0, after="the down fault")
    # the member answers again, but the next probe hangs HANG seconds first (every request started while slow
    # sleeps the whole latency); the probes after it answer at once
    slow_from = time.monotonic()
    await env.members.members["member1"].set_fault("slow", latency=HANG)
    await asyncio.sleep(FREQUENCY * 3)  # the hanging probe has started
    await env.fault("recover")

    await ready_status(env, "True", timeout=HANG + 10 * THRESHOLD, after="recover")
    flipped = time.monotonic()
    # the first healthy answer came HANG seconds after the fault changed, at the earliest: Ready may flip only a
    # success threshold after that
    assert flipped - slow_from >= HANG + THRESHOLD - 0.05, \
        f"Ready True {flipped - slow_from:.2f}s after the member answered again (hang {HANG}s, threshold {THRESHOLD}s)"
