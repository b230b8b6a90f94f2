"""Simulated Nodes of a member through the real kubectl (table columns, short name, field selector, cordon) and
the official Python client's strict models (CoreV1Api.list_node / read_node_status)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from flotilla.member.simulated import MemberConfig
from tests.integration.member import MemberThread, python_client
from tests.support.apiserver import Kubectl

pytestmark = pytest.mark.kubectl

NODES = ["nodes1-node-0", "nodes1-node-1"]


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemberThread]:
    cfg = MemberConfig(name="nodes1", data_dir=tmp_path_factory.mktemp("members"), nodes=2, node_cpu="4",
                       node_memory="16Gi", node_pods="50", simulators=["node"])
    m = MemberThread(cfg).start()
    yield m
    m.stop()


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_kubectl_get_nodes(kubectl: Kubectl) -> None:
    rows = table(kubectl.run("get", "nodes").stdout)
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [r[0] for r in rows[1:]] == NODES
    for r in rows[1:]:
        assert r[1:3] == ["Ready", "<none>"] and r[4].startswith("v1.37.")
    wide = table(kubectl.run("get", "no", "-o", "wide").stdout)
    assert wide[0][:7] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP"]
    assert wide[1][5:7] == ["10.0.0.10", "<none>"]
    node = json.loads(kubectl.run("get", "node", NODES[1], "-o", "json").stdout)
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "16Gi", "pods": "50",
                                             "ephemeral-storage": "100Gi"}
    assert "generation" not in node["metadata"]
    out = kubectl.run("get", "nodes", "-o", "jsonpath={.items[*].status.nodeInfo.kubeletVersion}").stdout
    assert len(out.split()) == 2
    assert "Kubelet Version:" in kubectl.run("describe", "node", NODES[0]).stdout


def test_cordon_and_the_unschedulable_field_selector(kubectl: Kubectl) -> None:
    kubectl.run("cordon", NODES[0])
    try:
        rows = table(kubectl.run("get", "nodes").stdout)
        assert rows[1][:2] == [NODES[0], "Ready,SchedulingDisabled"]
        cordoned = kubectl.run("get", "nodes", "--field-selector", "spec.unschedulable=true", "-o", "name").stdout
        assert cordoned.split() == [f"node/{NODES[0]}"]
        open_ = kubectl.run("get", "nodes", "--field-selector", "spec.unschedulable!=true", "-o", "name").stdout
        assert open_.split() == [f"node/{NODES[1]}"]
    finally:
        kubectl.run("uncordon", NODES[0])
    assert table(kubectl.run("get", "nodes").stdout)[1][1] == "Ready"
    bad = kubectl.run("get", "nodes", "--field-selector", "spec.nodeName=x", check=False)
    assert bad.returncode != 0 and "field label not supported" in bad.stderr


def test_python_client_decodes_nodes(member: MemberThread) -> None:
    with python_client(member.kubeconfig) as api:
        v1 = client.CoreV1Api(api)
        nodes = v1.list_node()
        assert [n.metadata.name for n in nodes.items] == NODES
        for n in nodes.items:
            info = n.status.node_info
            assert info.kubelet_version.startswith("v1.") and info.operating_system == "linux"
            assert info.machine_id and info.system_uuid and info.boot_id and info.container_runtime_version
            assert {c.type: c.status for c in n.status.conditions}["Ready"] == "True"
            assert n.status.capacity["cpu"] == "4" and n.status.allocatable["pods"] == "50"
            assert {a.type for a in n.status.addresses} == {"InternalIP", "Hostname"}
            assert n.status.daemon_endpoints.kubelet_endpoint.port == 10250
        status = v1.read_node_status(NODES[0])
        assert status.status.phase == "Running"


def test_a_node_created_by_hand_is_initialized(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input="apiVersion: v1\nkind: Node\nmetadata:\n  name: extra\n"
                                          "  labels: {node-role.kubernetes.io/worker: ''}\n")
    try:
        deadline = time.monotonic() + 10
        while True:
            rows = {r[0]: r for r in table(kubectl.run("get", "nodes").stdout)[1:]}
            if "extra" in rows and rows["extra"][1] == "Ready":
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.05)
        assert rows["extra"][2] == "worker"
        node = json.loads(kubectl.run("get", "node", "extra", "-o", "json").stdout)
        assert node["status"]["capacity"]["cpu"] == "4"
    finally:
        kubectl.run("delete", "node", "extra", "--wait=false")
