"""Fencing (D2) after a long outage: fencing a cluster lets the deletions that wait for it complete at once.

While a member is unreachable, the deletion of its Works fails and is retried with per-key exponential backoff
(5 ms doubling to 1000 s, as client-go's default controller rate limiter): after an outage of a few minutes the
next retry is minutes away. A ``Directly`` failover waits for that deletion, so ``flotilla fence`` (the operator's
"this cluster is gone") must not wait for the backoff: the execution controller takes the Works being deleted there
again as soon as the cluster is fenced. Here the backoff of a long outage is made explicit (a minute from the
first failure on), so the test fails if the fence does not wake the Work.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flotilla.api import labels as L
from flotilla.client.workqueue import ItemExponentialFailureRateLimiter
from flotilla.controllers.execution import ExecutionController
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import WORKS

from .test_binding_execution import eventually
from .test_fencing import HOLD, FenceEnv, env, fence  # noqa: F401 (env is a fixture)

LONG_OUTAGE_BACKOFF = 60.0  # the retry delay of a deletion that has failed for about a minute already


async def test_d2_fencing_wakes_the_deletions_backed_off_during_a_long_outage(env: FenceEnv) -> None:  # noqa: F811
    execution = next(c for c in env.manager.controllers if isinstance(c, ExecutionController))
    template = await env.template("nginx")
    await env.create_binding(template, [("member1", 1)])
    work_name = generate_work_name("Deployment", "nginx", "default")
    await eventually(lambda: env.applied("member1", name=work_name), what="applied in member1")
    await env.cp.patch(WORKS, work_name, {"metadata": {"finalizers": [L.EXECUTION_CONTROLLER_FINALIZER, HOLD]}},
                       namespace="karmada-es-member1")

    await env.take_down("member1")
    execution.queue.rate_limiter = ItemExponentialFailureRateLimiter(LONG_OUTAGE_BACKOFF, LONG_OUTAGE_BACKOFF)
    await env.cp.delete(WORKS, work_name, "karmada-es-member1")
    await asyncio.sleep(1.0)  # the deletion failed (the member is down) and is backed off for a minute
    work = await env.work("member1", work_name)
    assert work is not None and L.EXECUTION_CONTROLLER_FINALIZER in work["metadata"]["finalizers"]
    assert execution.queue.rate_limiter.num_requeues(f"karmada-es-member1/{work_name}") >= 1

    await fence(env, "member1")

    async def released() -> dict[str, Any] | None:
        w = await env.work("member1", work_name)
        return w if w is not None and w["metadata"]["finalizers"] == [HOLD] else None

    await eventually(released, what="the Work released as soon as its cluster is fenced")
    await env.cp.patch(WORKS, work_name, {"metadata": {"finalizers": None}}, namespace="karmada-es-member1")
