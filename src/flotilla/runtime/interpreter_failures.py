"""Failing ResourceInterpreterCustomization scripts, made visible to whoever operates the control plane.

Every failing script call (a script error, its time budget or its memory budget used up) is counted in
``flotilla_interpreter_customization_failures_total{customization, operation, reason}`` and recorded as a Warning
Event ``InterpreterCustomizationFailed`` on the ResourceInterpreterCustomization, naming the operation and the
object interpreted. The controllers still answer as for any interpreter error (the health is ``Unknown``, the
status is not reflected, ...); this only says why.

Scripts may run in the Lua worker threads (:func:`flotilla.interpreter.dispatch.lua_executor`): the counter is
thread-safe, the Event is handed to the event loop the reporter was made on. The Event recorder folds repeats and
rate-limits per object, so a script failing on every call costs a counter bump per call and few writes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from flotilla.api.resources import RESOURCE_INTERPRETER_CUSTOMIZATIONS
from flotilla.client import Informer
from flotilla.client.events import WARNING
from flotilla.interpreter.customization import RIC_API_VERSION, RIC_KIND, CustomizationFailure
from flotilla.runtime.base import ControllerContext

log = logging.getLogger(__name__)

__all__ = ["EVENT_REASON", "CustomizationFailureReporter", "customization_failures"]

#: The reason of the Warning Event recorded on a ResourceInterpreterCustomization whose script failed.
EVENT_REASON = "InterpreterCustomizationFailed"
_EXTRA = "interpreter-customization-failures"


class CustomizationFailureReporter:
    """The ``on_failure`` callback of a controller-manager's resource interpreters (callable from any thread)."""

    def __init__(self, ctx: ControllerContext, rics: Informer) -> None:
        self.ctx = ctx
        self.rics = rics
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    def __call__(self, failure: CustomizationFailure) -> None:
        self.ctx.metrics.interpreter.record_customization_failure(failure.customization, str(failure.operation),
                                                                  failure.reason)
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self._loop or running
        if loop is None or running is loop:
            self._record(failure)
        elif not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._record, failure)
            except RuntimeError:  # the loop closed meanwhile: the controller-manager is gone
                pass

    def _record(self, failure: CustomizationFailure) -> None:
        ric: dict[str, Any] | None = self.rics.store.get(failure.customization)
        if ric is None:  # deleted since (or not listed yet): an Event about it by name
            ric = {"apiVersion": RIC_API_VERSION, "kind": RIC_KIND, "metadata": {"name": failure.customization}}
        what = f"{failure.target.api_version} {failure.target.kind} {failure.object}".rstrip()
        self.ctx.recorder.event(ric, WARNING, EVENT_REASON,
                                f"{failure.operation} of {what} failed ({failure.reason}): {failure.message}")


def customization_failures(ctx: ControllerContext) -> CustomizationFailureReporter:
    """The controller-manager's shared reporter (made on first use, during setup)."""
    reporter = ctx.extras.get(_EXTRA)
    if not isinstance(reporter, CustomizationFailureReporter):
        reporter = CustomizationFailureReporter(ctx, ctx.informers.informer(RESOURCE_INTERPRETER_CUSTOMIZATIONS))
        ctx.extras[_EXTRA] = reporter
    return reporter
