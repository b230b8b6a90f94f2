"""Progress of long commands: one line on stderr, redrawn in place while stderr is a terminal, absent when it is not.

``flotilla bench``, ``flotilla soak``, ``flotilla demo``, ``flotilla failover move`` and the ``--wait`` of the
commands that remove a cluster wait for seconds or minutes. On a terminal they show what they wait for, how far it
got and for how long; piped into a file or another program they print only their messages and results, so logs and
parsers never see a half-drawn line. Built on tqdm, which finds out whether the stream is a terminal, fits the line
to the terminal's width and keeps the line below messages printed meanwhile (:func:`say`).

tqdm is imported when a command first shows progress, never while the parser is built.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress", "say"]


def say(message: str, file: TextIO | None = None) -> None:
    """Print ``message`` on its own line (stderr by default) above a progress line that is showing."""
    stream = sys.stderr if file is None else file
    if "tqdm" in sys.modules:
        from tqdm import tqdm

        tqdm.write(message, file=stream)
        stream.flush()
    else:
        print(message, file=stream, flush=True)


class Progress:
    """A progress line: ``what`` and, when ``total`` is known, a bar with the count; ``status`` adds a free text.

    Used as a context manager (or closed with :meth:`close`); the line is erased when it closes. On a stream that is
    not a terminal (``force`` None) or with ``force`` False, nothing is drawn and every call costs next to nothing.
    """

    def __init__(self, what: str, total: int | None = None, *, unit: str = "", file: TextIO | None = None,
                 force: bool | None = None) -> None:
        stream = sys.stderr if file is None else file
        self.enabled = _is_terminal(stream) if force is None else force
        self._bar: Any = None
        self._started = time.monotonic()
        if not self.enabled:
            return
        from tqdm import tqdm

        if total is None:
            fmt = "{desc} {elapsed}{postfix}"
        else:
            fmt = "{desc} {n_fmt}/{total_fmt}" + (f" {unit}" if unit else "") + " |{bar:20}| {elapsed}{postfix}"
        self._bar = tqdm(total=total, desc=what, file=stream, leave=False, dynamic_ncols=True, bar_format=fmt,
                         mininterval=0.2)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def update(self, done: int | None = None, status: str | None = None) -> None:
        """Set how many of ``total`` are done and/or the status text; redraws at most a few times a second."""
        bar = self._bar
        if bar is None:
            return
        if done is not None and done != bar.n:
            bar.n = done
        if status is not None:
            bar.set_postfix_str(status, refresh=False)
        if done is None:
            bar.refresh()
        else:
            bar.update(0)

    def describe(self, what: str) -> None:
        """Change what the line says it waits for."""
        if self._bar is not None:
            self._bar.set_description_str(what, refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
