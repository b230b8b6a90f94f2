"""Calling the functions users hand to the client's machinery (informer handlers, leader-election callbacks)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["run_callback"]


async def run_callback(fn: Callable[..., Any] | None, *args: Any, logger: logging.Logger, what: str) -> None:
    """Call ``fn(*args)`` (None: nothing to call) and await its result when that is awaitable. What it raises
    is logged on ``logger`` as ``<what> <fn> failed`` and goes no further; cancellation passes through."""
    if fn is None:
        return
    try:
        result = fn(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        logger.exception("%s %r failed", what, fn)
