"""How Flotilla's long-running commands learn that they are asked to stop, and how they stop what they started
(child processes, tasks). asyncio is imported where it is used: a command's parser imports this module, and
``flotilla --help`` should not pay for the event loop."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["cancel_all", "run_until_stopped", "stop_on_signals", "wait_or_kill"]


def stop_on_signals() -> asyncio.Event:
    """An Event that SIGTERM or SIGINT sets, for the running loop (where signal handlers cannot be installed, as
    outside the main thread, it is only set by its owner)."""
    import asyncio

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    return stop


def run_until_stopped(main: Callable[[asyncio.Event], Coroutine[Any, Any, int]], interrupted: int = 0) -> int:
    """Run ``main(stop)`` in a new event loop, ``stop`` being set by SIGTERM or SIGINT (:func:`stop_on_signals`),
    and return its exit code; ``interrupted`` when a Ctrl-C came before the handlers were in place."""
    import asyncio


    async def with_stop() -> int:
        return await main(stop_on_signals())

    try:
        return asyncio.run(with_stop())
    except KeyboardInterrupt:
        return interrupted


async def wait_or_kill(proc: asyncio.subprocess.Process, grace: float) -> None:
    """Wait up to ``grace`` seconds for ``proc`` (asked to stop) to exit, then SIGKILL it and reap it."""
    import asyncio

    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def cancel_all(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended; what they raise is dropped (they are being stopped)."""
    import asyncio

    pending = list(tasks)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
