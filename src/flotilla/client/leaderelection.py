"""Lease-based leader election (coordination.k8s.io/v1 ``Lease``), after client-go's leaderelection.

Candidates share one Lease.  The holder renews ``spec.renewTime`` every ``retry_period``; the others
poll.  A candidate takes the lease over when its holder is empty (released) or when the lease
record has not changed for ``leaseDurationSeconds`` *as measured by the candidate's own monotonic
clock* since it last saw a change (so clock skew between machines does not matter).  Every write is
an update carrying the ``resourceVersion`` that was read: of two racing candidates the server lets
one win and answers the other 409 Conflict.

A leader that cannot renew within ``renew_deadline`` steps down: its ``on_started_leading`` task is
cancelled and ``on_stopped_leading`` runs.  ``lease_duration > renew_deadline`` leaves the slack that
keeps two leaders from overlapping: the old leader gives up before anyone else may take over.

On a clean exit (the ``run()`` task cancelled or :meth:`LeaderElector.stop`) the leader releases
the lease: holder emptied, ``leaseDurationSeconds`` 1, so a standby takes over at its next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from flotilla.client.callbacks import run_callback
from flotilla.client.errors import ApiException, is_already_exists, is_conflict, is_not_found
from flotilla.kube.resources import LEASES, Resource
from flotilla.kube.times import format_micro_time

log = logging.getLogger(__name__)

__all__ = ["LeaderElector", "LeaseClient"]


class LeaseClient(Protocol):
    """The part of :class:`flotilla.client.client.Client` the elector uses."""

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def update(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]: ...


def _now_micro() -> str:
    return format_micro_time(datetime.now(UTC))


Callback = Callable[..., Any]


class LeaderElector:
    """Campaign for the Lease ``namespace/name`` as ``identity``; lead until cancelled or deposed.

    ``on_started_leading()`` (async) runs as a task while this elector leads and is cancelled when
    leadership ends; if it returns, the elector keeps leading; if it raises, the elector steps down
    (releasing the lease) and ``run()`` raises that error.  ``on_stopped_leading()`` runs once
    leadership ends (only if it began).  ``on_new_leader(identity)`` runs whenever a different holder
    is observed, this elector included.  The two latter may be plain functions or coroutines.

    ``run()`` returns when leadership is lost (like client-go, the caller decides whether to campaign
    again or exit); cancelling it stops the campaign and, with ``release_on_cancel``, releases a held
    lease.

    A candidate polls every ``retry_period * (1 + U(0, jitter))`` (client-go's JitterFactor 1.2);
    the leader renews every ``retry_period``.
    """

    def __init__(
        self,
        client: LeaseClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        jitter: float = 1.2,
        on_started_leading: Callable[[], Awaitable[Any]] | None = None,
        on_stopped_leading: Callable[[], Any] | None = None,
        on_new_leader: Callable[[str], Any] | None = None,
        release_on_cancel: bool = True,
        resource: Resource = LEASES,
    ) -> None:
        if not identity:
            raise ValueError("identity must not be empty")
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if renew_deadline <= retry_period:
            raise ValueError("renew_deadline must be greater than retry_period")
        if retry_period <= 0 or jitter < 0:
            raise ValueError("retry_period must be > 0 and jitter >= 0")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.jitter = jitter
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        self.resource = resource

        self._observed_spec: dict[str, Any] | None = None
        self._observed_time = 0.0  # monotonic time the record was last seen to change
        self._reported_leader = ""
        self._leading = False
        self._release_on_stop: bool | None = None
        self._task: asyncio.Task[None] | None = None
        self._callback_tasks: set[asyncio.Task[Any]] = set()
        #: how many times this elector has gained leadership
        self.leadership_count = 0

    # -- state ---------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True while this elector holds the lease (as of its last successful write)."""
        return self._leading

    @property
    def leader(self) -> str:
        """The holder last observed ("" if none)."""
        return str((self._observed_spec or {}).get("holderIdentity") or "")

    # -- running -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign until leading, lead until the lease is lost; see the class docstring."""
        self._task = asyncio.current_task()
        try:
            await self._acquire()
            await self._lead()
        finally:
            self._task = None
            self._release_on_stop = None

    async def stop(self, *, release: bool = True) -> None:
        """Stop ``run()`` (from another task) and wait for it; ``release`` overrides ``release_on_cancel``."""
        task = self._task
        if task is None or task.done():
            return
        self._release_on_stop = release
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _acquire(self) -> None:
        while True:
            if await self._attempt():
                log.info("%s: acquired lease %s/%s", self.identity, self.namespace, self.name)
                return
            await asyncio.sleep(self._jittered(self.retry_period))

    async def _lead(self) -> None:
        self._leading = True
        self.leadership_count += 1
        work: asyncio.Task[Any] | None = None
        renew = asyncio.create_task(self._renew_loop(), name=f"lease-renew-{self.identity}")
        failure: BaseException | None = None
        lost = False
        try:
            if self.on_started_leading is not None:
                work = asyncio.create_task(self._call_started(), name=f"leading-{self.identity}")
            pending: set[asyncio.Task[Any]] = {renew} | ({work} if work else set())
            while True:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if renew in done:
                    lost = True
                    if not renew.cancelled() and renew.exception() is not None:
                        log.error("%s: lease renewal crashed", self.identity, exc_info=renew.exception())
                    break
                assert work is not None and work in done
                pending.discard(work)
                if not work.cancelled() and work.exception() is not None:
                    failure = work.exception()
                    log.error("%s: on_started_leading failed; stepping down", self.identity, exc_info=failure)
                    break
        finally:
            for task in (work, renew):
                if task is not None and not task.done():
                    task.cancel()
            for task in (work, renew):
                if task is not None:
                    with contextlib.suppress(BaseException):
                        await task
            self._leading = False
            if lost:
                log.warning("%s: lost lease %s/%s", self.identity, self.namespace, self.name)
            else:
                release = (
                    self._release_on_stop if self._release_on_stop is not None else self.release_on_cancel
                )
                if release or failure is not None:
                    await self.release()
            await self._call(self.on_stopped_leading)
        if failure is not None:
            raise failure

    async def _call_started(self) -> None:
        assert self.on_started_leading is not None
        await self.on_started_leading()

    async def _renew_loop(self) -> None:
        """Renew every ``retry_period``; return once a renewal has not succeeded within ``renew_deadline``."""
        while True:
            try:
                async with asyncio.timeout(self.renew_deadline):
                    while True:
                        if await self._attempt():
                            break
                        await asyncio.sleep(self.retry_period)
            except TimeoutError:
                return
            await asyncio.sleep(self.retry_period)

    async def release(self) -> bool:
        """Give the lease up if this elector holds it: holder emptied, 1 s duration. True when done."""
        try:
            async with asyncio.timeout(self.renew_deadline):
                lease = await self.client.get(self.resource, self.name, self.namespace)
                spec = dict(lease.get("spec") or {})
                if spec.get("holderIdentity") != self.identity:
                    return True
                now = _now_micro()
                spec.update(holderIdentity="", leaseDurationSeconds=1, acquireTime=now, renewTime=now)
                lease["spec"] = spec
                updated = await self.client.update(self.resource, lease)
        except (ApiException, TimeoutError, OSError) as e:
            log.warning("%s: could not release lease %s/%s: %s", self.identity, self.namespace, self.name, e)
            return False
        self._observe(updated.get("spec") or {}, time.monotonic())
        log.info("%s: released lease %s/%s", self.identity, self.namespace, self.name)
        return True

    # -- one attempt ---------------------------------------------------------------------------

    async def _attempt(self) -> bool:
        try:
            async with asyncio.timeout(self.renew_deadline):
                return await self._try_acquire_or_renew()
        except (ApiException, TimeoutError, OSError) as e:
            log.info("%s: lease %s/%s attempt failed: %s", self.identity, self.namespace, self.name, e)
            return False

    async def _try_acquire_or_renew(self) -> bool:
        now = _now_micro()
        desired = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        try:
            lease = await self.client.get(self.resource, self.name, self.namespace)
        except ApiException as e:
            if not is_not_found(e):
                raise
            body = {
                "apiVersion": self.resource.api_version,
                "kind": self.resource.kind,
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": desired,
            }
            try:
                created = await self.client.create(self.resource, body, self.namespace)
            except ApiException as e2:
                if is_already_exists(e2):
                    return False  # another candidate created it first
                raise
            self._observe(created.get("spec") or desired, time.monotonic())
            return True

        spec = dict(lease.get("spec") or {})
        mono = time.monotonic()
        self._observe(spec, mono)
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        if holder and holder != self.identity and mono < self._observed_time + float(duration):
            return False  # held by another, and not expired

        if holder == self.identity:
            desired["acquireTime"] = spec.get("acquireTime") or now
            desired["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
        else:
            desired["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        lease["spec"] = {**spec, **desired}
        try:
            updated = await self.client.update(self.resource, lease)  # carries metadata.resourceVersion
        except ApiException as e:
            if is_conflict(e):
                return False  # lost the race: someone wrote the lease since we read it
            raise
        self._observe(updated.get("spec") or lease["spec"], time.monotonic())
        return True

    def _observe(self, spec: dict[str, Any], mono: float) -> None:
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_time = mono
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            if self.on_new_leader is not None:
                task = asyncio.ensure_future(self._call(self.on_new_leader, holder))
                self._callback_tasks.add(task)
                task.add_done_callback(self._callback_tasks.discard)

    # -- helpers -------------------------------------------------------------------------------

    def _jittered(self, period: float) -> float:
        return period + random.random() * self.jitter * period if self.jitter else period

    async def _call(self, fn: Callback | None, *args: Any) -> None:
        await run_callback(fn, *args, logger=log, what=f"{self.identity}: leader election callback")
