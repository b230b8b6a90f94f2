"""``flotilla jsonpath`` as a process, byte for byte against the real kubectl.

kubectl prints ``-o jsonpath`` offline with ``kubectl label --local -f OBJ x=y --overwrite`` and an empty
kubeconfig (see tests/unit/test_jsonpath_matches_kubectl.py): the objects already carry the label, so the
command leaves them unchanged. The command is run as ``python -m flotilla.cli.jsonpath_cmd`` (always
available) and, once it is wired into ``flotilla``, as ``flotilla jsonpath``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

BIN = Path(sys.executable).parent
KUBECTL = BIN / "kubectl"
FLOTILLA = BIN / "flotilla"
LABEL = "flotilla.io/jsonpath-test"

pytestmark = [pytest.mark.kubectl, pytest.mark.skipif(not KUBECTL.exists(), reason=f"no kubectl at {KUBECTL}")]


def _meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "shop", "labels": {LABEL: "yes", "app": name}, **extra}


FLINK: dict[str, Any] = {
    "apiVersion": "flink.apache.org/v1beta1",
    "kind": "FlinkDeployment",
    "metadata": _meta("orders", annotations={"note": "a<b> & c"}),
    "spec": {"job": {"parallelism": 4, "upgradeMode": "savepoint"}, "taskManager": {"replicas": 2}},
    "status": {
        "jobManagerDeploymentStatus": "READY",
        "lifecycleState": "STABLE",
        "jobStatus": {
            "jobId": "cafebabe0123456789abcdef01234567",
            "state": "RUNNING",
            "checkpointInfo": {"lastCheckpoint": {"timeStamp": 1734462491693, "triggerType": "PERIODIC"}},
            "savepointInfo": {"savepointHistory": [{"location": "s3://b/sp-1", "timeStamp": 1734400000000},
                                                   {"location": "s3://b/sp-2", "timeStamp": 1734460000000}]},
        },
        "ratio": 0.25,
        "flags": [True, False, None],
    },
}

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": _meta("web"),
    "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"},
                                                                 {"name": "envoy", "image": "envoy:1.31"}]}}},
    "status": {"replicas": 3, "readyReplicas": 2, "conditions": [{"type": "Available", "status": "True"}]},
}

LIST: dict[str, Any] = {"apiVersion": "v1", "kind": "List", "items": [FLINK, DEPLOYMENT]}

TEMPLATES = [
    "{.status.jobStatus.jobId}",
    "{.status.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}",
    "{.status.jobStatus.checkpointInfo}",
    "{.metadata.name}/{.status.jobStatus.state}-{.status.lifecycleState}",
    '{range .status.jobStatus.savepointInfo.savepointHistory[*]}{.location}={.timeStamp}{"\\n"}{end}',
    "{.status.jobStatus.savepointInfo.savepointHistory[-1:].location}",
    '{.status.jobStatus.savepointInfo.savepointHistory[?(@.timeStamp>1734450000000)].location}',
    "{.status.ratio} {.status.flags} {.status.flags[*]}",
    "{.metadata.annotations}",
    "{..jobId} {.status..location}",  # kubectl walks maps in random order: one map per level here
]

LIST_TEMPLATES = [
    '{.kind}/{.metadata.name}{"\\n"}',
    "{.metadata.labels.app}|",
    "{.metadata['name','namespace']};",
]


@pytest.fixture(scope="module")
def kubectl_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("kubectl-home")
    (home / "empty-kubeconfig").write_text("")
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "KUBECONFIG": str(home / "empty-kubeconfig")}


def kubectl(env: dict[str, str], path: Path, template: str, *, allow_missing_keys: bool
            ) -> subprocess.CompletedProcess[bytes]:
    command = [str(KUBECTL), "label", "--local", "--overwrite", "-f", str(path), f"{LABEL}=yes",
               f"--allow-missing-template-keys={str(allow_missing_keys).lower()}", "-o", f"jsonpath={template}"]
    return subprocess.run(command, capture_output=True, env=env, timeout=60, check=False)


def _wired() -> bool:
    if not FLOTILLA.exists():
        return False
    probe = subprocess.run([str(FLOTILLA), "jsonpath", "--help"], capture_output=True, timeout=60, check=False)
    return probe.returncode == 0


RUNNERS = [
    pytest.param([sys.executable, "-m", "flotilla.cli.jsonpath_cmd"], id="module"),
    pytest.param([str(FLOTILLA), "jsonpath"], id="flotilla",
                 marks=pytest.mark.skipif(not _wired(), reason="`flotilla jsonpath` is not wired into cli/main.py yet")),
]


@pytest.fixture(params=RUNNERS)
def cli(request: pytest.FixtureRequest) -> list[str]:
    return list(request.param)


def flotilla(cli: list[str], *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*cli, *args], input=stdin, capture_output=True, timeout=60, check=False)


def _write(tmp_path: Path, name: str, document: Any) -> Path:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(document))
    else:
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_output_matches_kubectl(template: str, suffix: str, cli: list[str], kubectl_env: dict[str, str],
                                tmp_path: Path) -> None:
    path = _write(tmp_path, "flink" + suffix, FLINK)
    expected = kubectl(kubectl_env, path, template, allow_missing_keys=False)
    assert expected.returncode == 0, expected.stderr.decode()
    ours = flotilla(cli, template, "-f", str(path))
    assert ours.returncode == 0, ours.stderr.decode()
    assert ours.stdout == expected.stdout


@pytest.mark.parametrize("template", LIST_TEMPLATES)
def test_a_list_prints_per_item_like_kubectl(template: str, cli: list[str], kubectl_env: dict[str, str],
                                             tmp_path: Path) -> None:
    path = _write(tmp_path, "list.json", LIST)
    expected = kubectl(kubectl_env, path, template, allow_missing_keys=False)
    assert expected.returncode == 0, expected.stderr.decode()
    ours = flotilla(cli, template, "-f", str(path))
    assert (ours.returncode, ours.stdout) == (0, expected.stdout)


def test_several_yaml_documents_print_one_after_the_other(cli: list[str], kubectl_env: dict[str, str],
                                                          tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(FLINK) + "---\n" + yaml.safe_dump(DEPLOYMENT))
    template = "{.metadata.name}:{.spec.replicas};"
    expected = kubectl(kubectl_env, path, template, allow_missing_keys=True)
    ours = flotilla(cli, template, "-f", str(path), "--allow-missing-keys")
    assert (ours.returncode, ours.stdout) == (expected.returncode, expected.stdout) == (0, b"orders:;web:3;")


def test_missing_keys_fail_like_kubectl_and_the_other_items_still_print(
    cli: list[str], kubectl_env: dict[str, str], tmp_path: Path
) -> None:
    path = _write(tmp_path, "list.json", LIST)
    template = "{.metadata.name}={.status.jobStatus.state};"
    expected = kubectl(kubectl_env, path, template, allow_missing_keys=False)
    ours = flotilla(cli, template, "-f", str(path))
    assert expected.returncode == ours.returncode == 1
    assert ours.stdout == expected.stdout == b"orders=RUNNING;"
    assert "jobStatus is not found" in expected.stderr.decode()
    err = ours.stderr.decode()
    assert "error: executing jsonpath" in err and "Deployment shop/web" in err and "jobStatus is not found" in err
    assert "--allow-missing-keys" in err
    relaxed = flotilla(cli, template, "-f", str(path), "--allow-missing-keys")
    expected_relaxed = kubectl(kubectl_env, path, template, allow_missing_keys=True)
    assert (relaxed.returncode, relaxed.stdout) == (0, expected_relaxed.stdout)


def test_wrong_case_job_id_is_not_found(cli: list[str], kubectl_env: dict[str, str], tmp_path: Path) -> None:
    path = _write(tmp_path, "flink.yaml", FLINK)
    template = "{.status.jobStatus.jobID}"
    assert kubectl(kubectl_env, path, template, allow_missing_keys=False).returncode == 1
    ours = flotilla(cli, template, "-f", str(path))
    assert ours.returncode == 1 and ours.stdout == b""
    assert "jobID is not found; similar keys: jobId (at .status.jobStatus.jobId)" in ours.stderr.decode()


def test_syntax_errors_exit_1_with_the_position(cli: list[str], kubectl_env: dict[str, str], tmp_path: Path) -> None:
    path = _write(tmp_path, "flink.json", FLINK)
    template = "{.status.jobStatus[0"
    assert "error parsing jsonpath" in kubectl(kubectl_env, path, template, allow_missing_keys=True).stderr.decode()
    ours = flotilla(cli, template, "-f", str(path))
    assert ours.returncode == 1 and ours.stdout == b""
    err = ours.stderr.decode()
    assert err.startswith("error: error parsing jsonpath {.status.jobStatus[0") and "^" in err


def test_reads_stdin_by_default_and_with_dash(cli: list[str]) -> None:
    status = json.dumps(FLINK["status"]).encode()
    assert flotilla(cli, "{.jobStatus.jobId}", stdin=status).stdout == b"cafebabe0123456789abcdef01234567"
    assert flotilla(cli, "{.lifecycleState}", "-f", "-", stdin=status).stdout == b"STABLE"


def test_bad_input_is_a_clear_error(cli: list[str], tmp_path: Path) -> None:
    missing = flotilla(cli, "{.a}", "-f", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and "no such file or directory" in missing.stderr.decode()
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [1, 2\n")
    result = flotilla(cli, "{.a}", "-f", str(broken))
    assert result.returncode == 1 and "not valid YAML or JSON" in result.stderr.decode()
    empty = flotilla(cli, "{.a}", stdin=b"")
    assert empty.returncode == 1 and "no object found" in empty.stderr.decode()


def test_d7_integral_numbers_print_as_integers_unlike_kubectl(cli: list[str], kubectl_env: dict[str, str],
                                                              tmp_path: Path) -> None:
    path = tmp_path / "float.json"
    text = json.dumps(FLINK).replace("1734462491693", "1.734462491693e12")
    path.write_text(text)
    template = "{.status.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}"
    assert kubectl(kubectl_env, path, template, allow_missing_keys=False).stdout == b"1.734462491693e+12"
    assert flotilla(cli, template, "-f", str(path)).stdout == b"1734462491693"
    yaml_path = tmp_path / "float.yaml"
    yaml_path.write_text("metadata: {name: x}\nts: 1.734462491693e12\nsmall: 1e-7\n")
    assert flotilla(cli, "{.ts} {.small}", "-f", str(yaml_path)).stdout == b"1734462491693 1e-07"
