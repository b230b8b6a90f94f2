"""The progress line of long commands: drawn on a terminal (a real pseudo-terminal here), absent when piped."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap

from flotilla.cli.progress import Progress, say

SCRIPT = textwrap.dedent("""
    import time
    from flotilla.cli.progress import Progress, say

    with Progress("placing workloads:", total=4, unit="healthy") as line:
        for i in range(1, 5):
            line.update(i, status=f"step {i}")
            time.sleep(0.25)
            if i == 2:
                say("a message above the line")
    print("result: done", flush=True)
""")


def run_on_terminal() -> str:
    """Run SCRIPT with stdout and stderr on a pseudo-terminal; what the terminal received."""
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 rows, 100 columns
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=child, stderr=child, stdin=subprocess.DEVNULL,
                            )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(parent, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(30)
    os.close(parent)
    return b"".join(chunks).decode(errors="replace")


def test_progress_line_is_drawn_on_a_terminal_with_messages_above_it() -> None:
    out = run_on_terminal()
    assert "placing workloads: 4/4 healthy" in out
    assert "step 4" in out and "\r" in out
    assert "a message above the line" in out
    assert out.rstrip().endswith("result: done")


def test_progress_line_is_absent_when_piped() -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "result: done\n"
    assert r.stderr == "a message above the line\n"


def test_progress_on_a_stream_that_is_not_a_terminal_costs_nothing() -> None:
    buf = io.StringIO()
    with Progress("waiting", total=3, file=buf) as line:
        assert not line.enabled
        line.update(2, status="two")
        line.describe("still waiting")
    say("done", buf)
    assert buf.getvalue() == "done\n"
