"""``--log-format json`` and ``--log-level`` through the real ``flotilla`` processes: every log line is one JSON
object with time, level, logger and message, and the processes a command starts log the same way."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

FLOTILLA = str(Path(sys.executable).parent / "flotilla")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _records(lines: list[str]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        record = json.loads(line)  # every log line parses
        assert set(record) >= {"time", "level", "logger", "message"}, record
        assert TIME.match(record["time"]) and record["level"] in ("DEBUG", "INFO", "WARNING", "ERROR"), record
        out.append(record)
    return out


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """``flotilla --log-format json apiserver --log-level info``: (its data directory, its stderr file)."""
    data, err = tmp_path / "cp", tmp_path / "apiserver.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([FLOTILLA, "--log-format", "json", "apiserver", "--log-level", "info",
                                 "--storage", "memory://", "--data-dir", str(data), "--port", str(_free_port())],
                                stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        _wait_for(lambda: "API server listening" in err.read_text(), "the API server's log line")
        yield data, err
    finally:
        _stop(proc)


def test_apiserver_log_lines_are_json_objects(apiserver: tuple[Path, Path]) -> None:
    _, err = apiserver
    records = _records(err.read_text().splitlines())
    listening = [r for r in records if "API server listening" in r["message"]]
    assert listening and listening[0]["level"] == "INFO" and listening[0]["logger"] == "flotilla.apiserver.server"
    assert not [r for r in records if r["level"] == "DEBUG"]  # --log-level info


def test_controller_manager_log_lines_are_json_objects_with_the_level_asked(
        apiserver: tuple[Path, Path], tmp_path: Path) -> None:
    data, _ = apiserver
    err, out = tmp_path / "cm.err", tmp_path / "cm.out"
    with open(err, "wb") as stderr, open(out, "wb") as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "flotilla.cli.controller_manager", "--kubeconfig",
                                 str(data / "kubeconfig"), "--metrics-bind-address", "0", "--log-format", "json",
                                 "--log-level", "debug"], stdout=stdout, stderr=stderr)
    try:
        _wait_for(lambda: '"DEBUG"' in err.read_text(), "a debug record")
        time.sleep(1.0)  # the controllers start meanwhile
    finally:
        _stop(proc)
    records = _records(err.read_text().splitlines())
    assert any(r["level"] == "DEBUG" for r in records), records  # hidden at the default level (warning)
    # its progress lines share stderr with the log: JSON objects too
    assert any(r["logger"] == "flotilla controller-manager" and r["message"].startswith("started ")
               for r in records), records


def test_up_detach_passes_json_logging_to_the_background_process(tmp_path: Path) -> None:
    data = tmp_path / "up"
    r = subprocess.run([FLOTILLA, "up", "--detach", "--data-dir", str(data), "--port", "0", "--members", "1",
                        "--metrics-bind-address", "0", "--log-format", "json", "--log-level", "info"],
                       capture_output=True, text=True, timeout=120)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        _wait_for(lambda: "Ready unset -> True" in (data / "up.log").read_text(), "the member's Ready log line")
    finally:
        subprocess.run([FLOTILLA, "down", "--data-dir", str(data)], capture_output=True, timeout=60)
    lines = (data / "up.log").read_text().splitlines()
    # the command's own progress lines (stdout) stay text; every log line of the background process is JSON
    logs = [line for line in lines if not line.startswith("flotilla up:")]
    records = _records(logs)
    assert any(r["logger"] == "flotilla.controllers.cluster_status" and r["level"] == "INFO" for r in records)
