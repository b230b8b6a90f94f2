"""The background tasks of the API server's parts: one per object name, and ending them when a part stops."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

__all__ = ["TasksByName", "cancel_and_wait"]


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


class TasksByName:
    """Background work on named objects (a namespace's termination, a CRD's cleanup), one task a name at a time.

    What a task raises is logged on ``log`` as ``failure % name``; a name is free for a new task once its task
    ended, however it ended.
    """

    def __init__(self, log: logging.Logger, failure: str) -> None:
        self._log = log
        self._failure = failure
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._tasks

    def start(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` in a task of its own, unless the task of ``name`` still runs."""
        if name not in self._tasks:
            self._tasks[name] = asyncio.get_running_loop().create_task(self._run(name, work))

    async def _run(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception:
            self._log.exception(self._failure, name)
        finally:
            self._tasks.pop(name, None)

    def running(self) -> list[asyncio.Task[None]]:
        """The tasks that have not ended yet."""
        return list(self._tasks.values())
