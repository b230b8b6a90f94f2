"""One resource interpreter per controller-manager, over the control plane's ResourceInterpreterCustomizations:
rebuilt when they change, shared by every controller that interprets templates or members' objects."""

from __future__ import annotations

import logging
from collections.abc import Callable

from flotilla.api.resources import RESOURCE_INTERPRETER_CUSTOMIZATIONS as RICS
from flotilla.client import Informer
from flotilla.interpreter import ResourceInterpreter
from flotilla.interpreter.customization import CustomizationFailure, parse_customization
from flotilla.runtime.base import ControllerContext
from flotilla.runtime.interpreter_failures import customization_failures

__all__ = ["InterpreterSource", "shared_interpreter"]

log = logging.getLogger(__name__)


class InterpreterSource:
    """The resource interpreter over the control plane's current ResourceInterpreterCustomizations (rebuilt when
    the RICs change; a RIC that does not parse is left out, with a log line)."""

    def __init__(self, informer: Informer, on_failure: Callable[[CustomizationFailure], None] | None = None) -> None:
        self.informer = informer
        self.on_failure = on_failure
        self._key: tuple[tuple[str, str], ...] | None = None
        self._interpreter = ResourceInterpreter(())

    def get(self) -> ResourceInterpreter:
        objs = self.informer.store.list()
        key = tuple(sorted((str((o.get("metadata") or {}).get("name")),
                            str((o.get("metadata") or {}).get("resourceVersion"))) for o in objs))
        if key != self._key:
            parsed = []
            for o in objs:
                try:
                    parsed.append(parse_customization(o))
                except Exception as e:  # a bad customization must not stop every other kind
                    log.warning("ignoring ResourceInterpreterCustomization %s: %s",
                                (o.get("metadata") or {}).get("name"), e)
            self._interpreter = ResourceInterpreter(parsed, on_failure=self.on_failure)
            self._key = key
        return self._interpreter


def shared_interpreter(ctx: ControllerContext) -> InterpreterSource:
    """One :class:`InterpreterSource` per controller-manager (kept in ``ctx.extras``)."""
    src = ctx.extras.get("interpreter-source")
    if not isinstance(src, InterpreterSource):
        src = InterpreterSource(ctx.informers.informer(RICS), customization_failures(ctx))
        ctx.extras["interpreter-source"] = src
    return src
