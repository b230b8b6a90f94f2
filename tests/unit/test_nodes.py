"""core/v1 Node as a built-in kind (names, schema, kubectl's columns) and the simulated nodes' objects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flotilla.apiserver.builtin_kinds import builtin_type, custom_cells, custom_columns
from flotilla.apiserver.schema_check import schema_errors
from flotilla.member.nodes import ANNOTATION_NODE, kubelet_version, node_name, node_object, node_status

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
RESOURCES = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
NODE_INFO_FIELDS = {"machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
                    "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture"}


def cells(obj: dict[str, Any]) -> dict[str, Any]:
    columns = custom_columns[("", "Node")]
    return dict(zip([c.name for c in columns], custom_cells[("", "Node")](obj, NOW), strict=True))


def simulated(index: int = 0) -> dict[str, Any]:
    node = node_object("member1", index)
    node["metadata"].update(uid="0b5c7a3e-1111-4c8e-9d7e-000000000001", creationTimestamp="2025-06-01T11:00:00Z")
    node["status"] = node_status(node, RESOURCES, index=index, now="2025-06-01T11:00:00Z")
    return node


def test_node_is_served_like_kube_apiserver_serves_it() -> None:
    rt = builtin_type("", "Node")
    assert rt is not None
    assert (rt.plural, rt.singular, rt.short_names, rt.namespaced) == ("nodes", "node", ("no",), False)
    assert rt.has_status and not rt.has_scale and rt.generation == "" and rt.builtin_smp
    assert rt.selectable_fields == ("spec.unschedulable",)
    assert [c.name for c in rt.printer_columns if c.priority == 0] == ["STATUS", "ROLES", "AGE", "VERSION"]
    assert rt.key(None, "n1") == "/registry/nodes/n1"


def test_node_schema_describes_the_kubelet_fields_and_keeps_unknown_ones() -> None:
    schema = builtin_type("", "Node").schema  # type: ignore[union-attr]
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "Node"}]
    spec, status = schema["properties"]["spec"], schema["properties"]["status"]
    assert spec["x-kubernetes-preserve-unknown-fields"] and status["x-kubernetes-preserve-unknown-fields"]
    assert {"unschedulable", "taints", "podCIDR", "providerID"} <= set(spec["properties"])
    assert status["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["properties"]["addresses"]["x-kubernetes-patch-merge-key"] == "type"
    info = status["properties"]["nodeInfo"]
    assert set(info["required"]) == NODE_INFO_FIELDS == set(info["properties"])
    assert status["properties"]["capacity"]["additionalProperties"]["x-kubernetes-int-or-string"]
    node = simulated()
    assert schema_errors(node, schema) == []
    assert set(node["status"]) <= set(status["properties"])


def test_simulated_node_has_every_field_clients_need() -> None:
    node = simulated(2)
    assert node["metadata"]["name"] == node_name("member1", 2) == "member1-node-2"
    assert node["metadata"]["annotations"][ANNOTATION_NODE] == "simulated"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "member1-node-2"
    status = node["status"]
    assert status["capacity"] == status["allocatable"] == RESOURCES
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["Ready"]["status"] == "True" and by_type["Ready"]["reason"] == "KubeletReady"
    for pressure in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        assert by_type[pressure]["status"] == "False"
    assert {a["type"]: a["address"] for a in status["addresses"]} == {"InternalIP": "10.0.0.12",
                                                                      "Hostname": "member1-node-2"}
    info = status["nodeInfo"]
    assert set(info) == NODE_INFO_FIELDS and all(isinstance(v, str) and v for v in info.values())
    assert info["kubeletVersion"] == kubelet_version() and info["kubeletVersion"].startswith("v1.")
    assert status["phase"] == "Running"
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}


def test_node_status_is_stable_and_keeps_times_and_own_resources() -> None:
    node = simulated()
    # computing it again later changes nothing (no write, no heartbeat)
    assert node_status(node, RESOURCES, index=0, now="2025-06-01T12:00:00Z") == node["status"]
    # a condition that changes gets new times
    node["status"]["conditions"][-1]["status"] = "False"
    again = node_status(node, RESOURCES, index=0, now="2025-06-01T12:00:00Z")
    ready = next(c for c in again["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["lastTransitionTime"]) == ("True", "2025-06-01T12:00:00Z")
    # a node created by hand keeps what it says it has
    mine = {"metadata": {"name": "big"}, "status": {"capacity": {"cpu": "64", "memory": "256Gi"}}}
    status = node_status(mine, RESOURCES, keep_resources=True)
    assert status["capacity"] == status["allocatable"] == {"cpu": "64", "memory": "256Gi"}
    assert status["addresses"][0]["address"].startswith("10.128.")
    assert node_status({"metadata": {"name": "x"}}, RESOURCES, keep_resources=True)["capacity"] == RESOURCES


def test_node_cells_like_kubectl() -> None:
    node = simulated()
    assert cells(node) == {
        "Name": "member1-node-0",
        "Status": "Ready",
        "Roles": "<none>",
        "Age": "60m",
        "Version": kubelet_version(),
        "Internal-IP": "10.0.0.10",
        "External-IP": "<none>",
        "OS-Image": "Flotilla simulated node",
        "Kernel-Version": node["status"]["nodeInfo"]["kernelVersion"],
        "Container-Runtime": node["status"]["nodeInfo"]["containerRuntimeVersion"],
    }
    node["spec"]["unschedulable"] = True
    node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    node["metadata"]["labels"].update({"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "x",
                                       "kubernetes.io/role": "worker"})
    node["metadata"]["creationTimestamp"] = (NOW - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    row = cells(node)
    assert (row["Status"], row["Roles"], row["Age"]) == ("NotReady,SchedulingDisabled", "control-plane,worker", "3d")
    bare = cells({"metadata": {"name": "n"}})
    assert (bare["Status"], bare["Roles"], bare["Version"], bare["OS-Image"]) == ("Unknown", "<none>", "", "<unknown>")


def test_member_config_node_settings(tmp_path: Any) -> None:
    from flotilla.member.simulated import MemberConfig

    cfg = MemberConfig(name="m", data_dir=tmp_path, nodes=5)
    assert (cfg.nodes, cfg.node_cpu, cfg.node_memory, cfg.node_pods) == (5, "8", "32Gi", "110")
    assert cfg.daemonset_nodes == 5  # DaemonSets run on every simulated node unless told otherwise
    assert MemberConfig(name="m", data_dir=tmp_path, nodes=5, daemonset_nodes=2).daemonset_nodes == 2
    assert MemberConfig(name="m", data_dir=tmp_path).daemonset_nodes == 3
    for bad in ({"node_cpu": "eight"}, {"node_memory": "-1Gi"}, {"nodes": -1}):
        with pytest.raises(ValueError, match="member m: "):
            MemberConfig(name="m", data_dir=tmp_path, **bad)
