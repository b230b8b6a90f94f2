"""How Flotilla's long-running commands learn that they are asked to stop."""

from __future__ import annotations

import asyncio
import contextlib
import signal

__all__ = ["stop_on_signals"]


def stop_on_signals() -> asyncio.Event:
    """An Event that SIGTERM or SIGINT sets, for the running loop (where signal handlers cannot be installed, as
    outside the main thread, it is only set by its owner)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    return stop
