"""Every command that talks to a control plane ends as kubectl does when it cannot: one line on stderr that starts
with ``error:`` and says what to pass, exit status 1 (``failover preview``: 2, as ``kubectl diff``'s errors), no
traceback. Real ``flotilla`` processes, a kubeconfig that does not exist and one whose server does not answer."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

FLOTILLA = str(Path(sys.executable).parent / "flotilla")

#: (arguments, the flag that names the control plane's kubeconfig, the exit status of an error)
COMMANDS = [
    (["get", "clusters"], "--kubeconfig", 1),
    (["get", "failovers", "-A", "-o", "json"], "--kubeconfig", 1),
    (["describe", "cluster", "member1"], "--kubeconfig", 1),
    (["taint", "clusters", "member1", "maintenance=yes:NoSchedule"], "--kubeconfig", 1),
    (["cordon", "member1"], "--kubeconfig", 1),
    (["uncordon", "member1"], "--kubeconfig", 1),
    (["fence", "member1"], "--kubeconfig", 1),
    (["unfence", "member1"], "--kubeconfig", 1),
    (["unjoin", "member1", "--wait", "0"], "--kubeconfig", 1),
    (["unregister", "member3", "--wait", "0"], "--karmada-kubeconfig", 1),
    (["failover", "move", "flinkdeployment/orders", "--to", "member2"], "--kubeconfig", 1),
    (["failover", "preview", "flinkdeployment/orders"], "--kubeconfig", 2),
    (["version"], "--kubeconfig", 1),
]


@pytest.fixture(scope="module")
def dead_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with socket.socket() as s:  # a port nobody listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path_factory.mktemp("dead") / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "cp",
        "clusters": [{"name": "cp", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "cp", "user": {"token": "t"}}],
        "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "cp"}}]}))
    return path


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLOTILLA, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def _error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.mark.parametrize(("args", "flag", "status"), COMMANDS, ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_a_kubeconfig_that_does_not_exist_is_named_with_the_flag_to_pass(args: list[str], flag: str, status: int,
                                                                      tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    r = _run([*args, flag, str(missing)])
    assert r.returncode == status, r.stderr
    line = _error_line(r)
    assert str(missing) in line and "--" in line, line


@pytest.mark.parametrize(("args", "flag", "status"), COMMANDS, ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_a_control_plane_that_does_not_answer_says_so_and_what_to_pass(args: list[str], flag: str, status: int,
                                                                      dead_kubeconfig: Path) -> None:
    r = _run([*args, flag, str(dead_kubeconfig)])
    assert r.returncode == status, r.stderr
    line = _error_line(r)
    assert "cannot reach the control plane" in line and flag in line, line
    assert "answered" not in line, line


def test_usage_errors_exit_2_with_argparse_usage() -> None:
    for args in (["get"], ["describe", "cluster"], ["failover", "move", "fdep/orders"], ["taint"],
                 ["get", "clusters", "-o", "table"]):
        r = _run(args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("usage: flotilla") and "error:" in r.stderr and "Traceback" not in r.stderr
