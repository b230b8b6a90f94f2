"""``flotilla interpret --operation RestoreState`` (D20) as a process: the restore input from a file or inline."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

FLOTILLA = Path(sys.executable).parent / "flotilla"
PATH = "s3://ledger/checkpoints/6f1c0e2b9a4d4b7e8c3a1d2e5f607182/chk-42"

RIC = """\
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata:
  name: ledgers
spec:
  target:
    apiVersion: example.io/v1
    kind: Ledger
  customizations:
    healthInterpretation:
      luaScript: |
        function InterpretHealth(observedObj)
          return true
        end
    restoreState:
      luaScript: |
        function RestoreState(desiredObj, restore)
          desiredObj.metadata.annotations = desiredObj.metadata.annotations or {}
          desiredObj.metadata.annotations["example.io/restore-from"] = restore.path
          for _, c in ipairs(desiredObj.spec.template.spec.containers) do
            c.env = c.env or {}
            table.insert(c.env, {name = "RESTORE_FROM", value = restore.path})
          end
          if restore.existed then
            desiredObj.spec.restoreNonce = restore.nonce
          end
          return desiredObj
        end
"""

LEDGER = """\
apiVersion: example.io/v1
kind: Ledger
metadata:
  name: books
  namespace: shop
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: main
        image: ledger:1
"""

FLINK = """\
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata:
  name: orders
  namespace: stream
spec:
  image: flink:1.20
  job:
    jarURI: local:///opt/job.jar
    upgradeMode: stateless
"""

RESTORE = f"""\
path: {PATH}
kind: checkpoint
jobId: 6f1c0e2b9a4d4b7e8c3a1d2e5f607182
checkpointId: 42
existed: true
nonce: 3
"""


def flotilla(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(FLOTILLA), "interpret"] if FLOTILLA.exists() else [sys.executable, "-m", "flotilla.cli.interpret"]
    return subprocess.run([*command, *args], input=stdin, capture_output=True, text=True, timeout=60)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out = {}
    for name, text in (("ric", RIC), ("ledger", LEDGER), ("flink", FLINK), ("restore", RESTORE)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        out[name] = str(path)
    return out


def restored(stdout: str) -> dict:
    assert stdout.startswith("---\n# [1/1] restored:\n"), stdout
    value: dict = yaml.safe_load(stdout.split("\n", 2)[2])
    return value


def test_d20_restore_state_runs_the_customization_with_a_restore_file(files: dict[str, str]) -> None:
    result = flotilla("-f", files["ric"], "--operation", "RestoreState", "--desired-file", files["ledger"],
                      "--restore-file", files["restore"])
    assert result.returncode == 0, result.stderr
    out = restored(result.stdout)
    assert out["metadata"]["annotations"] == {"example.io/restore-from": PATH}
    assert out["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "RESTORE_FROM", "value": PATH}]
    assert out["spec"]["restoreNonce"] == 3
    assert out["spec"]["replicas"] == 3


def test_d20_restore_state_with_inline_json_and_from_stdin(files: dict[str, str]) -> None:
    inline = json.dumps({"path": PATH, "kind": "savepoint"})
    result = flotilla("-f", files["ric"], "--operation", "restorestate", "--observed-file", files["ledger"],
                      "--restore", inline)
    assert result.returncode == 0, result.stderr
    out = restored(result.stdout)
    assert out["metadata"]["annotations"] == {"example.io/restore-from": PATH}
    assert "restoreNonce" not in out["spec"]  # existed defaults to false
    piped = flotilla("-f", files["ric"], "--operation", "RestoreState", "--desired-file", files["ledger"],
                     "--restore-file", "-", stdin=RESTORE)
    assert piped.returncode == 0, piped.stderr
    assert restored(piped.stdout)["spec"]["restoreNonce"] == 3


def test_d20_restore_state_built_in_flink_rule(files: dict[str, str]) -> None:
    result = flotilla("--with-builtin", "--operation", "RestoreState", "--desired-file", files["flink"],
                      "--restore-file", files["restore"])
    assert result.returncode == 0, result.stderr
    assert "answered by the thirdparty interpreter" in result.stderr
    assert restored(result.stdout)["spec"]["job"] == {"jarURI": "local:///opt/job.jar", "upgradeMode": "savepoint",
                                                       "initialSavepointPath": PATH, "savepointRedeployNonce": 3}


def test_d20_check_lists_restore_state_when_set(tmp_path: Path, files: dict[str, str]) -> None:
    result = flotilla("-f", files["ric"], "--check")
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert any(line.split() == ["RestoreState:", "PASS"] for line in lines)
    assert any(line.split() == ["Retain:", "UNSET"] for line in lines)
    karmadas = yaml.safe_load(RIC)
    del karmadas["spec"]["customizations"]["restoreState"]
    path = tmp_path / "karmada.yaml"
    path.write_text(yaml.safe_dump(karmadas))
    result = flotilla("-f", str(path), "--check")
    assert result.returncode == 0, result.stdout
    assert "RestoreState" not in result.stdout  # a Karmada RIC's rules print as karmadactl prints them
    assert len([line for line in result.stdout.splitlines() if line.startswith("    ")]) == 8


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--operation", "RestoreState", "--desired-file", "@ledger"),
         "RestoreState needs the restore input: give --restore-file FILE or --restore JSON"),
        (("--operation", "RestoreState", "--desired-file", "@ledger", "--restore", '{"path": "x"'),
         "--restore: not valid JSON"),
        (("--operation", "RestoreState", "--desired-file", "@ledger", "--restore", '{"path": "x", "kind": "full"}'),
         "--restore: restore.kind must be one of checkpoint, savepoint, got 'full'"),
        (("--operation", "RestoreState", "--desired-file", "@ledger", "--restore", '{"kind": "checkpoint"}'),
         "--restore: restore.path must be a non-empty string"),
        (("--operation", "RestoreState", "--desired-file", "@ledger", "--restore", "[1]"),
         "--restore: the restore input must be an object with path, kind"),
        (("--operation", "RestoreState", "--desired-file", "@ledger", "--restore", '{"path": "x", "kind": "savepoint"}',
          "--restore-file", "@restore"), "give the restore input once"),
        (("--operation", "InterpretHealth", "--observed-file", "@ledger", "--restore-file", "@restore"),
         "--restore and --restore-file are inputs of RestoreState, not of InterpretHealth"),
        (("--operation", "RestoreState", "--restore-file", "@restore"), "RestoreState needs the object"),
    ],
)
def test_d20_restore_state_usage_errors(files: dict[str, str], args: tuple[str, ...], message: str) -> None:
    result = flotilla("-f", files["ric"], *(files[a[1:]] if a.startswith("@") else a for a in args))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert message in result.stderr


def test_d20_restore_state_script_failures_exit_1(tmp_path: Path, files: dict[str, str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(RIC.replace("return desiredObj\n", "return 'done'\n"))
    result = flotilla("-f", str(broken), "--operation", "RestoreState", "--desired-file", files["ledger"],
                      "--restore-file", files["restore"])
    assert result.returncode == 1
    assert result.stderr == textwrap.dedent("""\
        error: RestoreState failed: ResourceInterpreterCustomization 'ledgers', spec.customizations.restoreState: \
RestoreState: the result must be a table, got string
        """)
    only_health = yaml.safe_load(RIC)
    del only_health["spec"]["customizations"]["restoreState"]
    path = tmp_path / "health-only.yaml"
    path.write_text(yaml.safe_dump(only_health))
    missing = flotilla("-f", str(path), "--operation", "RestoreState", "--desired-file", files["ledger"],
                       "--restore-file", files["restore"])
    assert missing.returncode == 1
    assert "has no restoreState script: set spec.customizations.restoreState.luaScript" in missing.stderr
