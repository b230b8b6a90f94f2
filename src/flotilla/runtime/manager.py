"""The controller-manager: one context, shared informers, the enabled controllers, optional leader election."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from flotilla.client import Client, SharedInformerFactory
from flotilla.client.events import EventRecorder
from flotilla.failover.events import FAILOVER_EVENT_REASONS
from flotilla.observability.metrics import ControllerMetrics
from flotilla.runtime.base import Controller, ControllerContext
from flotilla.runtime.members import MemberClients
from flotilla.runtime.options import ControllerOptions

log = logging.getLogger(__name__)


def all_controllers() -> dict[str, type[Controller]]:
    """Every controller by name, in start order. Controllers register here as they are written."""
    from flotilla.runtime.registry import CONTROLLERS

    return dict(CONTROLLERS)


class ControllerManager:
    """Runs the selected controllers on one context.

    ``metrics``: where the controllers record (``ctx.metrics``); give the process's own to keep counting across
    leadership terms, else each manager has a fresh one. While running, a collector on its registry asks every
    controller to refresh its live gauges before each scrape.

    The controllers' Events go through one :class:`EventRecorder` that never holds back the failover's Events
    (:data:`~flotilla.failover.events.FAILOVER_EVENT_REASONS`) and counts what it drops in ``metrics``;
    ``recorder_options`` are passed on to it (its budgets and delays: tests shrink them).

    ``members``: the member clients (default: built from each Cluster's endpoint and Secret; ``flotilla agent``
    gives :class:`~flotilla.runtime.members.AgentMemberClients`), closed with the manager. ``component``: the
    Events' source.
    """

    def __init__(self, client: Client, options: ControllerOptions | None = None, *,
                 controllers: Sequence[str] | None = None, sync_timeout: float = 60.0,
                 metrics: ControllerMetrics | None = None,
                 recorder_options: Mapping[str, Any] | None = None, members: MemberClients | None = None,
                 component: str = "flotilla-controller-manager") -> None:
        self.client = client
        self.metrics = metrics if metrics is not None else ControllerMetrics()
        self.options = options or ControllerOptions()
        self.selected = controllers
        self.sync_timeout = sync_timeout
        self.recorder_options = dict(recorder_options or {})
        self.members = members
        self.component = component
        self.controllers: list[Controller] = []
        self.ctx: ControllerContext | None = None

    async def start(self) -> ControllerManager:
        available = all_controllers()
        names = list(self.selected) if self.selected is not None else list(available)
        unknown = [n for n in names if n not in available]
        if unknown:
            raise ValueError(f"unknown controllers {unknown}; known: {', '.join(available)}")
        informers = SharedInformerFactory(self.client)
        recorder = EventRecorder(self.client, self.component, **{
            "priority_reasons": FAILOVER_EVENT_REASONS, "metrics": self.metrics.events, **self.recorder_options})
        self.ctx = ControllerContext(client=self.client, informers=informers, recorder=recorder,
                                     options=self.options,
                                     members=self.members or MemberClients(
                                         self.client, request_timeout=self.options.cluster_api_timeout),
                                     metrics=self.metrics)
        self.ctx.forward_first.on_wait = self.metrics.forward_first_waited
        self.controllers = [available[n](self.ctx) for n in names]
        self.metrics.registry.add_collector(self.collect_metrics)
        for c in self.controllers:
            c.setup()
        informers.start()
        if not await informers.wait_for_sync(self.sync_timeout):
            log.warning("informers did not sync within %.0fs; starting controllers anyway", self.sync_timeout)
        for c in self.controllers:
            c.start()
        return self

    def collect_metrics(self) -> None:
        for c in self.controllers:
            try:
                c.collect_metrics()
            except Exception:
                log.exception("metrics: controller %s failed to collect", c.name)

    async def stop(self) -> None:
        for c in reversed(self.controllers):
            await c.stop()
        self.collect_metrics()  # stopped controllers forget their live gauges
        self.metrics.registry.remove_collector(self.collect_metrics)
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
