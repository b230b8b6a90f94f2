"""Ending the background tasks of the API server's parts when they stop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel every task (None: none there), then wait until each has ended, whatever it ended with: a part
    that stops has no use for what its tasks raised while they were cancelled."""
    pending = [task for task in tasks if task is not None]
    for task in pending:
        task.cancel()
    for task in pending:
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
