"""What register decides (files, command line, refusals), and how it starts and stops an agent process."""

from __future__ import annotations

import sys
from pathlib import Path

from flotilla.cli.register_commands import start_agent, stop_agent
from flotilla.cluster.register import (
    agent_argv,
    agent_files,
    agent_process_matches,
    existing_cluster_problem,
)


def test_agent_files_sit_next_to_the_agent_kubeconfig(tmp_path: Path) -> None:
    files = agent_files("m1", tmp_path / "m1-agent.kubeconfig")
    assert (files.pid, files.log) == (tmp_path / "m1-agent.pid", tmp_path / "m1-agent.log")
    default = agent_files("m1")
    assert default.kubeconfig == Path.cwd() / "m1-agent.kubeconfig"


def test_agent_argv_uses_the_plans_flags(tmp_path: Path) -> None:
    files = agent_files("m1", tmp_path / "a.kubeconfig")
    argv = agent_argv(["flotilla"], "m1", files, tmp_path / "member.kubeconfig", "ctx")
    assert argv == ["flotilla", "agent", "--karmada-kubeconfig", str(tmp_path / "a.kubeconfig"), "--cluster-name",
                    "m1", "--kubeconfig", str(tmp_path / "member.kubeconfig"), "--context", "ctx"]
    assert agent_process_matches(argv, "m1")
    assert not agent_process_matches(argv, "m2")
    assert not agent_process_matches(["sleep", "100"], "m1")


def test_existing_cluster_problem_refuses_push_clusters() -> None:
    push = {"metadata": {"name": "p1"}, "spec": {"syncMode": "Push"}}
    assert "joined in Push mode; unjoin it first" in (existing_cluster_problem(push, "p1") or "")
    assert "use `flotilla unjoin p1`" in (existing_cluster_problem(push, "p1", unregistering=True) or "")
    pull = {"metadata": {"name": "m1"}, "spec": {"syncMode": "Pull"}}
    assert existing_cluster_problem(pull, "m1") is None
    assert existing_cluster_problem(None, "m1") is None
    deleting = {"metadata": {"name": "m1", "deletionTimestamp": "2025-01-01T00:00:00Z"}, "spec": {"syncMode": "Pull"}}
    assert "being deleted" in (existing_cluster_problem(deleting, "m1") or "")
    assert existing_cluster_problem(deleting, "m1", unregistering=True) is None


def test_start_agent_detaches_a_process_and_stop_agent_stops_it(tmp_path: Path) -> None:
    files = agent_files("m1", tmp_path / "m1-agent.kubeconfig")
    # a real process standing in for `flotilla agent`: the pid file check matches its command line
    argv = [sys.executable, "-c", "import time; print('agent up', flush=True); time.sleep(60)", "agent",
            "--cluster-name", "m1"]
    pid = start_agent(argv, files, settle=0.5)
    assert int(files.pid.read_text()) == pid
    assert files.pid.stat().st_mode & 0o077 == 0
    assert Path(f"/proc/{pid}").exists()
    assert stop_agent(files, "m1") == pid
    assert not files.pid.exists()
    assert "agent up" in files.log.read_text()
    assert stop_agent(files, "m1") is None  # nothing left to stop


def test_stop_agent_leaves_a_process_the_pid_file_does_not_describe(tmp_path: Path) -> None:
    import subprocess

    files = agent_files("m1", tmp_path / "m1-agent.kubeconfig")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        files.pid.write_text(f"{other.pid}\n")  # a stale pid file whose pid was reused
        assert stop_agent(files, "m1") is None
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_start_agent_reports_an_agent_that_exits_at_once(tmp_path: Path) -> None:
    files = agent_files("m1", tmp_path / "m1-agent.kubeconfig")
    argv = [sys.executable, "-c", "import sys; print('bad flag', flush=True); sys.exit(2)"]
    try:
        start_agent(argv, files, settle=2.0)
        raise AssertionError("no error")
    except Exception as e:
        assert "exited at once (code 2)" in str(e) and "bad flag" in str(e)
    assert not files.pid.exists()
