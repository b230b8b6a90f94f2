"""Differential test: our renders against the real kubectl binary, byte for byte.

kubectl only prints ``-o jsonpath`` for objects it has read, and ``kubectl get`` and ``kubectl
create --dry-run=client`` need an API server (discovery, validation). ``kubectl label --local``
does not: it reads the file, applies the label in memory and prints the object with any output
format, without a server (here with an empty kubeconfig). The objects already carry the label, so
``--overwrite`` leaves them unchanged. A ``List`` file is flattened: kubectl prints the template
once per item, concatenated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flotilla.jsonpath import JSONPathError, JSONPathSyntaxError, parse

KUBECTL = Path(sys.executable).parent / "kubectl"
LABEL = "flotilla.io/jsonpath-test"

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not KUBECTL.exists(), reason=f"no kubectl at {KUBECTL}"),
]


def _metadata(name: str, **extra: Any) -> dict[str, Any]:
    labels = {LABEL: "yes", "app.kubernetes.io/name": "web", **extra.pop("labels", {})}
    return {"name": name, "namespace": "shop", "labels": labels, **extra}


POD_A: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": _metadata(
        "web-0",
        creationTimestamp="2024-12-17T19:08:11Z",
        annotations={"note": "a<b> & ü\u2028", "empty": ""},
    ),
    "spec": {
        "nodeName": "member1-node-a",
        "containers": [
            {
                "name": "nginx",
                "image": "nginx:1.27",
                "ports": [{"containerPort": 80}, {"containerPort": 443}],
            },
            {"name": "sidecar", "image": "envoy:1.31", "args": ["--log-level", "info"]},
            {"name": "metrics", "image": "prom:2", "ports": [{"containerPort": 9090, "protocol": "TCP"}]},
        ],
    },
    "status": {
        "phase": "Running",
        "startTime": "2024-12-17T19:08:12Z",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-12-17T19:08:11Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2024-12-18T08:00:00Z"},
        ],
        "containerStatuses": [
            {"name": "nginx", "restartCount": 0, "ready": True},
            {"name": "sidecar", "restartCount": 3, "ready": True},
            {"name": "metrics", "restartCount": 1, "ready": False},
        ],
    },
}

POD_B: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": _metadata("web-1", labels={"tier": "frontend"}),
    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.26"}]},
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    },
}

FLINK: dict[str, Any] = {
    "apiVersion": "flink.apache.org/v1beta1",
    "kind": "FlinkDeployment",
    "metadata": _metadata("orders"),
    "spec": {"job": {"parallelism": 4, "upgradeMode": "savepoint"}},
    "status": {
        "jobStatus": {
            "jobId": "cafebabe0123456789abcdef01234567",
            "state": "RUNNING",
            "checkpointInfo": {"lastCheckpoint": {"timeStamp": 1734462491693, "triggerType": "PERIODIC"}},
        },
        "lifecycleState": "STABLE",
    },
}

MEASUREMENT: dict[str, Any] = {
    "apiVersion": "example.flotilla.io/v1",
    "kind": "Measurement",
    "metadata": _metadata("numbers"),
    "spec": {
        "floats": [1.5, 0.1, 1e-7, 0.0001, 2.5e-5, 123456.5, 1234567.5, 1e21, -3.25, 1 / 3, 3.0, 1e300],
        "ints": [0, -1, 9007199254740993, 9223372036854775807],
        "flags": [True, False, None],
        "nested": {"b": [1.5, 1e-7, 1e20], "a": {"z": None, "y": "<tag>"}},
    },
}

ITEMS = [POD_A, POD_B, FLINK, MEASUREMENT]

PER_ITEM_TEMPLATES = [
    '{.metadata.name}{"\\n"}',
    '{.kind}/{.metadata.namespace}/{.metadata.name}{"\\t"}{.status.phase}{"\\n"}',
    "{.spec.containers[*].name}|",
    "{.spec.containers[0].image}|{.spec.containers[-1].name}|",
    "{.spec.containers[*].ports[*].containerPort}|",
    '{range .spec.containers[*]}{.name}={.image}{"\\n"}{end}',
    "{range .status.conditions[*]}{.type}:{.status};{end}",
    '{.status.conditions[?(@.type=="Ready")].status}|',
    "{.status.conditions[?(@.status!='True')].type}|",
    "{.spec.containers[?(@.ports)].name}|",
    "{.status.containerStatuses[?(@.restartCount>=1)].name}|",
    "{.status.containerStatuses[?(@.ready==false)].name}|",
    '{.status.conditions[?(@.lastTransitionTime>"2024-12-18")].type}|',
    "{..containerPort}|",
    "{.metadata.labels}|{.metadata.annotations}|",
    "{.spec.containers[0]}|",
    "{.metadata.labels.app\\.kubernetes\\.io/name}|",
    "{.metadata['name','namespace']}|",
    "{.spec.containers[*]['name','image']}|",
    "{.spec.containers[:1].name}|{.spec.containers[::2].name}|{.spec.containers[0,-1].name}|",
    "{range .spec.containers[*]}{.name}{range .ports[*]}:{.containerPort}{end},{end}",
    "{.status.jobStatus.jobId}|{.status.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}|",
    "{.status.jobStatus.checkpointInfo}|{.spec.job}|",
    "{'\\t'}{\"\\u00e9\\x41\"}{$.metadata.name} {@.kind} and a } brace|",
    "{.spec.floats[*]}|{.spec.floats}|",
    "{.spec.ints[*]}|{.spec.ints}|{.spec.flags[*]}|{.spec.flags}|",
    "{.spec.nested}|{.spec.nested.b.*}|",
    "{.metadata.name.*}|",
    "{.nope}{.spec.nope.deeper}|",
]


@pytest.fixture(scope="module")
def kubectl_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("kubectl-home")
    kubeconfig = home / "empty-kubeconfig"
    kubeconfig.write_text("")
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "KUBECONFIG": str(kubeconfig)}


def kubectl_jsonpath(
    env: dict[str, str], directory: Path, document: dict[str, Any], template: str, *, allow_missing_keys: bool
) -> subprocess.CompletedProcess[bytes]:
    path = directory / "objects.json"
    path.write_text(json.dumps(document))
    command = [
        str(KUBECTL),
        "label",
        "--local",
        "--overwrite",
        "-f",
        str(path),
        f"{LABEL}=yes",
        f"--allow-missing-template-keys={str(allow_missing_keys).lower()}",
        "-o",
        f"jsonpath={template}",
    ]
    return subprocess.run(command, capture_output=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("template", PER_ITEM_TEMPLATES)
def test_render_of_each_list_item_matches_kubectl(
    template: str, kubectl_env: dict[str, str], tmp_path: Path
) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": ITEMS}
    result = kubectl_jsonpath(kubectl_env, tmp_path, document, template, allow_missing_keys=True)
    assert result.returncode == 0, result.stderr.decode()
    compiled = parse(template)
    ours = "".join(compiled.render(json.loads(json.dumps(item)), allow_missing_keys=True) for item in ITEMS)
    assert ours.encode() == result.stdout


@pytest.mark.parametrize(
    "template",
    [
        "{.status.jobStatus.jobId}",
        "{.status.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}",
        '{range .status.jobStatus.checkpointInfo.*}{.timeStamp}{"\\n"}{end}',
    ],
)
def test_strict_render_matches_kubectl(template: str, kubectl_env: dict[str, str], tmp_path: Path) -> None:
    result = kubectl_jsonpath(kubectl_env, tmp_path, FLINK, template, allow_missing_keys=False)
    assert result.returncode == 0, result.stderr.decode()
    assert parse(template).render(FLINK).encode() == result.stdout


@pytest.mark.parametrize(
    ("document", "template", "allow_missing_keys"),
    [
        (FLINK, "{.status.jobStatus.savepointInfo.location}", False),
        (FLINK, "{.status.jobStatus.jobId}{.status.error}", False),
        (POD_A, '{.status.conditions[?(@.reason=="Unschedulable")].type}', False),
        (POD_A, "{.spec.containers[5].name}", True),
        (POD_A, "{.spec.containers[1:9].name}", True),
        (POD_A, "{.spec.containers[2:1].name}", True),
        (POD_A, "{.metadata[0]}", True),
        (POD_A, "{.metadata[?(@.name)]}", True),
        (POD_A, "{.status.containerStatuses[?(@.restartCount==1.0)].name}", True),
        (POD_A, '{.status.containerStatuses[?(@.restartCount=="1")].name}', True),
        (POD_A, "{.status.containerStatuses[?(@.ready<true)].name}", True),
        (POD_A, "{.spec.containers[?(@.ports[*].containerPort==80)].name}", True),
        (POD_A, "{range .spec.volumes[*]}{.name}{end}", False),
    ],
)
def test_evaluation_errors_match_kubectl(
    document: dict[str, Any],
    template: str,
    allow_missing_keys: bool,
    kubectl_env: dict[str, str],
    tmp_path: Path,
) -> None:
    result = kubectl_jsonpath(
        kubectl_env, tmp_path, document, template, allow_missing_keys=allow_missing_keys
    )
    assert result.returncode != 0
    with pytest.raises(JSONPathError) as caught:
        parse(template).render(document, allow_missing_keys=allow_missing_keys)
    assert f"Error executing template: {caught.value}." in result.stderr.decode()


@pytest.mark.parametrize(
    "template",
    [
        "{.a[0",
        "{.metadata['name'}",
        '{.metadata["name"]}',
        "{....name}",
        "{.a,b}",
        '{"\\q"}',
        "{1.2.3}",
        "{.a[1:x]}",
    ],
)
def test_templates_kubectl_cannot_parse_are_syntax_errors(
    template: str, kubectl_env: dict[str, str], tmp_path: Path
) -> None:
    result = kubectl_jsonpath(kubectl_env, tmp_path, POD_B, template, allow_missing_keys=True)
    assert result.returncode != 0
    assert "error parsing jsonpath" in result.stderr.decode()
    with pytest.raises(JSONPathSyntaxError):
        parse(template)


@pytest.mark.parametrize(
    "template", ["{status.phase}", "{end}", '{.status.conditions[?(@.type="Ready")].type}']
)
def test_templates_that_always_fail_in_kubectl_are_rejected_when_parsing(
    template: str, kubectl_env: dict[str, str], tmp_path: Path
) -> None:
    # kubectl parses these and fails when executing them; we report them at parse time (admission)
    result = kubectl_jsonpath(kubectl_env, tmp_path, POD_A, template, allow_missing_keys=True)
    assert result.returncode != 0
    assert "error executing jsonpath" in result.stderr.decode()
    with pytest.raises(JSONPathSyntaxError):
        parse(template)


def test_integral_float_deliberately_prints_as_integer_unlike_kubectl(
    kubectl_env: dict[str, str], tmp_path: Path
) -> None:
    document = json.loads(json.dumps(FLINK))
    document["status"]["jobStatus"]["checkpointInfo"]["lastCheckpoint"]["timeStamp"] = 1734462491693.0
    template = "{.status.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}"
    result = kubectl_jsonpath(kubectl_env, tmp_path, document, template, allow_missing_keys=False)
    assert result.stdout == b"1.734462491693e+12"  # Go's %v of a float64
    assert parse(template).render(document) == "1734462491693"
