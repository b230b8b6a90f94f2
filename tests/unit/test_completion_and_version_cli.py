"""`flotilla completion bash|zsh` completes the parser's own commands, flags and get's resource words in a real
bash; `flotilla version` prints the client's version, and says what to pass when no control plane answers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flotilla import __version__
from flotilla.main import main

SRC = Path(__file__).resolve().parents[2] / "src"


def _flotilla(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flotilla.main", *argv], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "HOME": "/nonexistent"}, timeout=60)


def _complete(script: Path, *words: str) -> list[str]:
    line = " ".join(words)
    out = subprocess.run(["bash", "-c", f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                                        '_flotilla; printf "%s\\n" "${COMPREPLY[@]}"'],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_offers_commands_flags_and_get_resources(tmp_path: Path) -> None:
    done = _flotilla("completion", "bash")
    assert done.returncode == 0, done.stderr
    script = tmp_path / "flotilla.bash"
    script.write_text(done.stdout)
    assert _complete(script, "flotilla", "ver") == ["version"]
    assert _complete(script, "flotilla", "get", "") [:4] == ["clusters", "bindings", "works", "failovers"]
    assert "--all-namespaces" in _complete(script, "flotilla", "get", "--")
    assert _complete(script, "flotilla", "sim", "fault", "member1", "--mo") == ["--mode"]
    assert _complete(script, "flotilla", "completion", "") == ["bash", "zsh"]


def test_zsh_completion_is_the_bash_one_through_bashcompinit() -> None:
    done = _flotilla("completion", "zsh")
    assert done.returncode == 0 and done.stdout.startswith("#compdef flotilla") and "bashcompinit" in done.stdout


def test_version_client_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version", "--client"]) == 0
    assert capsys.readouterr().out.strip() == f"Client Version: v{__version__}"
    assert main(["version", "--client", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["clientVersion"]["gitVersion"] == f"v{__version__}"


def test_version_without_a_control_plane_exits_1_saying_what_to_pass(tmp_path: Path) -> None:
    done = _flotilla("version", "--kubeconfig", str(tmp_path / "missing"))
    assert done.returncode == 1
    assert f"Client Version: v{__version__}" in done.stdout
    assert "pass --kubeconfig" in done.stderr and "--client" in done.stderr and "Traceback" not in done.stderr


def test_unknown_shell_is_a_usage_error() -> None:
    assert _flotilla("completion", "fish").returncode == 2
