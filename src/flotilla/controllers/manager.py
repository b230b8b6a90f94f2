"""The controller-manager: one context, shared informers, the enabled controllers, optional leader election."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from flotilla.client import Client, SharedInformerFactory
from flotilla.controllers.base import Controller, ControllerContext
from flotilla.controllers.members import MemberClients
from flotilla.controllers.options import ControllerOptions
from flotilla.observability.events import EventRecorder

log = logging.getLogger(__name__)


def all_controllers() -> dict[str, type[Controller]]:
    """Every controller by name, in start order. Controllers register here as they are written."""
    from flotilla.controllers.registry import CONTROLLERS

    return dict(CONTROLLERS)


class ControllerManager:
    def __init__(self, client: Client, options: ControllerOptions | None = None, *,
                 controllers: Sequence[str] | None = None, sync_timeout: float = 60.0) -> None:
        self.client = client
        self.options = options or ControllerOptions()
        self.selected = controllers
        self.sync_timeout = sync_timeout
        self.controllers: list[Controller] = []
        self.ctx: ControllerContext | None = None

    async def start(self) -> ControllerManager:
        available = all_controllers()
        names = list(self.selected) if self.selected is not None else list(available)
        unknown = [n for n in names if n not in available]
        if unknown:
            raise ValueError(f"unknown controllers {unknown}; known: {', '.join(available)}")
        informers = SharedInformerFactory(self.client)
        recorder = EventRecorder(self.client, "flotilla-controller-manager")
        self.ctx = ControllerContext(client=self.client, informers=informers, recorder=recorder,
                                     options=self.options, members=MemberClients(self.client))
        self.controllers = [available[n](self.ctx) for n in names]
        for c in self.controllers:
            c.setup()
        informers.start()
        if not await informers.wait_for_sync(self.sync_timeout):
            log.warning("informers did not sync within %.0fs; starting controllers anyway", self.sync_timeout)
        for c in self.controllers:
            c.start()
        return self

    async def stop(self) -> None:
        for c in reversed(self.controllers):
            await c.stop()
        if self.ctx is not None:
            await self.ctx.informers.stop()
            await self.ctx.recorder.close()
            await self.ctx.members.close()
        self.controllers = []

    async def run_forever(self) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()
