"""The guard of a simulated member (docs/fencing.md "The guard"): guarded workloads stop on a stale run permit.

A member started with ``MemberConfig.options["guard"] = "<fence-after>"`` (``flotilla member --sim-option
guard=15s``) runs :class:`PermitGuard`: every ``guard_poll`` seconds (default 0.5 s) it reads the Lease
``flotilla-system/flotilla-run-permit`` of its own API server and feeds
:class:`~flotilla.failover.run_permit.PermitWatch`, on the event loop's monotonic clock. While the watch says the
permit is stale, every object labelled ``guard.flotilla.io/guarded: "true"`` is stopped by the workload simulators,
exactly as a guard beside a real workload would stop it: a FlinkDeployment's job stops (its running history
records the stop), the pods of a Deployment, ReplicaSet, StatefulSet or DaemonSet stop being ready. When the permit
is renewed again, the guarded workloads whose objects still exist start again (a Flink job under HA from its newest
checkpoint, pods Ready after the ready delay). Unguarded objects are never stopped.

The guard records a Warning Event ``GuardStoppedWorkload`` on each guarded object it stops (one created while the
permit is stale included) and a Normal Event ``GuardResumedWorkload`` on each it lets run again, in the member
itself (written straight to its storage: they land while the control plane is unreachable).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.rest import MERGE_PATCH
from flotilla.client.errors import ApiException
from flotilla.client.events import NORMAL, WARNING, EventRecorder
from flotilla.failover.run_permit import (
    EVENT_GUARD_RESUMED_WORKLOAD,
    EVENT_GUARD_STOPPED_WORKLOAD,
    MEMBER_EVENT_REASONS,
    PERMIT_NAME,
    PERMIT_NAMESPACE,
    PermitWatch,
    guard_changes,
    is_guarded_object,
)
from flotilla.kube.resources import Resource
from flotilla.member.simulator import ResourceSimulator, Simulator

if TYPE_CHECKING:
    from flotilla.apiserver.rest import ResourceStorage
    from flotilla.member.simulated import MemberCluster

log = logging.getLogger(__name__)

__all__ = ["GUARD_OPTION", "GUARD_POLL_OPTION", "PermitGuard", "guard_settings"]

GUARD_OPTION: Final = "guard"
GUARD_POLL_OPTION: Final = "guard_poll"
DEFAULT_POLL: Final = 0.5


def guard_settings(options: dict[str, Any]) -> tuple[float, float] | None:
    """(fence-after, poll) from a member's options; None without a guard ("off", "false" or absent). Raises
    ValueError with a clear message for a value that is not a positive duration."""
    from flotilla.cli.argtypes import parse_duration

    raw = options.get(GUARD_OPTION)
    if raw is None or str(raw).strip().lower() in ("", "off", "false", "no", "0"):
        return None
    out = []
    for key, value, default in ((GUARD_OPTION, raw, None), (GUARD_POLL_OPTION, options.get(GUARD_POLL_OPTION),
                                                             DEFAULT_POLL)):
        if value is None:
            out.append(float(default or 0))
            continue
        try:
            seconds = value if isinstance(value, int | float) and not isinstance(value, bool) else parse_duration(
                str(value))
        except ValueError as e:
            raise ValueError(f"--sim-option {key}={value}: {e}") from None
        if not seconds > 0:
            raise ValueError(f"--sim-option {key}={value}: must be a duration greater than 0 (e.g. 15s)")
        out.append(float(seconds))
    return out[0], out[1]


class StorageEventClient:
    """What the event recorder needs of a client, on the member's own storage (no HTTP)."""

    def __init__(self, storage: ResourceStorage) -> None:
        self.storage = storage

    def _type(self, res: Resource) -> Any:
        rt = self.storage.types.lookup(res.group, res.version, res.plural)
        if rt is None:  # pragma: no cover - every Flotilla API server serves Events
            raise ApiException(404, "NotFound", f"{res} is not served")
        return rt

    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        try:
            return await self.storage.create(self._type(res), namespace, obj)  # type: ignore[no-any-return]
        except ApiError as e:
            raise ApiException(e.code, e.reason, e.message) from None

    async def patch(self, res: Resource, name: str, patch: Any, *, namespace: str | None = None,
                    patch_type: str = "merge") -> dict[str, Any]:
        if patch_type != "merge":  # pragma: no cover - the recorder only merges
            raise ApiException(415, "UnsupportedMediaType", f"patch type {patch_type!r}")
        try:
            obj, _ = await self.storage.patch(self._type(res), namespace, name, MERGE_PATCH, patch)
        except ApiError as e:
            raise ApiException(e.code, e.reason, e.message) from None
        return obj  # type: ignore[no-any-return]


class PermitGuard(Simulator):
    """Watches the member's run permit; :meth:`stops` tells the workload simulators what to stop."""

    name = "guard"

    def __init__(self, fence_after: float, poll: float = DEFAULT_POLL) -> None:
        super().__init__()
        self.watch = PermitWatch(fence_after)
        self.poll = poll
        self.halted = False
        #: the guarded objects stopped (and told so by an Event), by uid
        self.stopping: dict[str, Mapping[str, Any]] = {}
        self.recorder: EventRecorder | None = None

    async def start(self, member: MemberCluster) -> None:
        await super().start(member)
        self.recorder = EventRecorder(StorageEventClient(member.storage), "flotilla-guard", member.name,
                                      priority_reasons=MEMBER_EVENT_REASONS)
        self._observe(await self._read())
        self.spawn(self._loop(), "permit")

    async def stop(self) -> None:
        await super().stop()
        if self.recorder is not None:
            await self.recorder.close(grace=2.0)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def stops(self, obj: dict[str, Any]) -> bool:
        """Whether the guard stops this object now (it is guarded and the permit is stale)."""
        return self.halted and is_guarded_object(obj)

    async def _read(self) -> dict[str, Any] | None:
        storage = self.member.storage
        rt = storage.types.lookup("coordination.k8s.io", "v1", "leases")
        if rt is None:  # pragma: no cover - every Flotilla API server serves Leases
            return None
        try:
            return await storage.get(rt, PERMIT_NAMESPACE, PERMIT_NAME)  # type: ignore[no-any-return]
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def _observe(self, permit: dict[str, Any] | None, *, read: bool = True) -> None:
        now = self._now()
        if read:
            self.watch.observe(permit, now)
        halted = self.watch.stopped(now)
        if halted != self.halted:
            self.halted = halted
            log.warning("member %s: guard %s guarded workloads: %s", self.member.name,
                        "stops" if halted else "resumes", self.watch.reason(now))
            for sim in self.member.simulators:
                if isinstance(sim, ResourceSimulator):
                    for key in list(sim.cache):
                        sim.enqueue(key)
        self._tell(now)

    def _tell(self, now: float) -> None:
        """An Event on each guarded object stopped or let run again since the last pass."""
        if not self.halted and not self.stopping:
            return
        objects = [obj for sim in self.member.simulators
                   if isinstance(sim, ResourceSimulator) and sim.stopped_by_guard for obj in sim.cache.values()]
        changes = guard_changes(halted=self.halted, stopping=self.stopping, objects=objects)
        self.stopping = changes.stopping
        if self.recorder is None:
            return
        why = self.watch.reason(now)
        for obj in changes.stopped:
            self.recorder.event(obj, WARNING, EVENT_GUARD_STOPPED_WORKLOAD,
                                f"Stopped by the member's guard: {why}; it runs again once the permit is renewed")
        for obj in changes.resumed:
            self.recorder.event(obj, NORMAL, EVENT_GUARD_RESUMED_WORKLOAD, f"Running again: {why}")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll)
            try:
                permit = await self._read()
            except Exception:  # noqa: BLE001 - a failed read changes nothing: the permit's age keeps growing
                log.exception("member %s: guard cannot read the run permit", self.member.name)
                self._observe(None, read=False)
                continue
            self._observe(permit)
