"""The simulator framework as a plug-in (the FlinkDeployment simulator's path) uses it: a CRD installed by the
simulator, followed once served, status written with optimistic retries, running intervals recorded."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from flotilla.member.simulated import MemberConfig, simulator_factories
from flotilla.member.simulator import ObjectKey, ResourceSimulator, register_simulator, registered_simulators
from tests.integration.member import MemberThread, kubectl_for, python_client

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}


class WidgetSimulator(ResourceSimulator):
    """A toy FlinkDeployment: Running after the member's ready delay, unless its image is broken."""

    name = "widget"
    group, version, plural = "example.com", "v1", "widgets"

    def __init__(self) -> None:
        super().__init__()
        self.first_seen: dict[str, float] = {}
        self.forgotten: list[ObjectKey] = []

    async def start(self, member: Any) -> None:
        await super().start(member)
        await self.install_crd(WIDGET_CRD)

    async def reconcile(self, obj: dict[str, Any]) -> float | None:
        uid = obj["metadata"]["uid"]
        seen = self.first_seen.setdefault(uid, time.monotonic())
        delay = self.config.ready_delay_for(obj)
        broken = self.config.image_broken(obj)
        running = not broken and time.monotonic() - seen >= delay
        phase = "Running" if running else ("Failed" if broken else "Deploying")
        await self.set_status(obj, lambda fresh: {**(fresh.get("status") or {}), "phase": phase,
                                                  "checkpointDir": str(self.config.checkpoints)})
        self.record_running(obj, running)
        return None if running or broken else delay - (time.monotonic() - seen)

    async def forget(self, key: ObjectKey, last: dict[str, Any]) -> None:
        self.forgotten.append(key)
        self.record_running(last, False)


def test_registry_rejects_a_second_simulator_of_one_name() -> None:
    simulator_factories()
    assert {"deployment", "statefulset", "daemonset", "replicaset", "job"} <= set(registered_simulators())
    with pytest.raises(ValueError):
        register_simulator("deployment", WidgetSimulator)
    with pytest.raises(ValueError):
        simulator_factories(["deployment", "nope"])


def test_a_crd_simulator_plugs_in(tmp_path: Path) -> None:
    from kubernetes import client

    cfg = MemberConfig(name="fw1", data_dir=tmp_path, ready_delay=0.3, simulators=["deployment"])
    member = MemberThread(cfg, simulators=[*simulator_factories(cfg.simulators), WidgetSimulator]).start()
    try:
        sim = member.member.simulator("widget")
        assert isinstance(sim, WidgetSimulator)
        kubectl = kubectl_for(member, tmp_path / "home")
        deadline = time.monotonic() + 10
        while kubectl.run("get", "crd", "widgets.example.com", check=False).returncode != 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        kubectl.run("apply", "-f", "-", input="""
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {image: "flink:1.20"}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w2}
spec: {image: "fake/flink:1.20"}
""")
        kubectl.run("wait", "--for=jsonpath={.status.phase}=Running", "widget/w1", "--timeout=20s")
        kubectl.run("wait", "--for=jsonpath={.status.phase}=Failed", "widget/w2", "--timeout=20s")
        api = client.CustomObjectsApi(python_client(member.kubeconfig))
        w1 = api.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w1")
        assert w1["status"]["checkpointDir"] == str(tmp_path / "checkpoints")

        history = member.member.history
        [iv] = history.intervals(kind="Widget")
        assert (iv.name, iv.member, iv.end) == ("w1", "fw1", None)
        kubectl.run("delete", "widget/w1", "widget/w2")
        deadline = time.monotonic() + 5
        while history.intervals(kind="Widget")[0].end is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert sorted(sim.forgotten) == [("default", "w1"), ("default", "w2")]
    finally:
        member.stop()


class _FakeTypes:
    def lookup(self, group: str, version: str, plural: str) -> Any:
        return object() if plural == "things" else None


class _FakeStorage:
    """Scripted watch streams: a list, an expired watch, a re-list without one object."""

    def __init__(self) -> None:
        self.types = _FakeTypes()
        self.calls: list[str] = []
        a = {"metadata": {"namespace": "ns", "name": "a", "uid": "ua", "resourceVersion": "3"}}
        b = {"metadata": {"namespace": "ns", "name": "b", "uid": "ub", "resourceVersion": "4"}}
        a2 = {"metadata": {"namespace": "ns", "name": "a", "uid": "ua", "resourceVersion": "6"}}
        self.scripts = [
            [("ADDED", a), ("ADDED", b), ("PROGRESS", {"metadata": {"resourceVersion": "5"}}),
             ("ERROR", {"kind": "Status", "code": 410})],
            [("ADDED", a2), ("PROGRESS", {"metadata": {"resourceVersion": "7"}})],
        ]

    async def watch(self, rt: Any, spec: Any) -> Any:
        self.calls.append(spec.resource_version)
        script = self.scripts.pop(0) if self.scripts else []

        async def events() -> Any:
            for item in script:
                yield item
            if not self.scripts:
                import asyncio

                await asyncio.Event().wait()  # an idle watch

        return events()


class _Recorder(ResourceSimulator):
    name = "things"
    group, version, plural = "example.com", "v1", "things"
    workers = 1

    def __init__(self) -> None:
        super().__init__()
        self.reconciled: list[str] = []
        self.forgotten: list[ObjectKey] = []

    async def reconcile(self, obj: dict[str, Any]) -> float | None:
        self.reconciled.append(obj["metadata"]["resourceVersion"])
        return None

    async def forget(self, key: ObjectKey, last: dict[str, Any]) -> None:
        self.forgotten.append(key)


async def test_follow_relists_after_an_expired_watch() -> None:
    import asyncio
    from types import SimpleNamespace

    storage = _FakeStorage()
    fake_member = SimpleNamespace(name="fake", storage=storage, config=None, history=None)
    sim = _Recorder()
    await sim.start(fake_member)  # type: ignore[arg-type]
    try:
        for _ in range(200):
            if sim.forgotten and "6" in sim.reconciled:
                break
            await asyncio.sleep(0.01)
        assert storage.calls == ["", ""]  # listed, then listed again after the ERROR (not resumed)
        assert sim.forgotten == [("ns", "b")]  # b vanished while the watch was broken
        assert set(sim.cache) == {("ns", "a")} and sim.synced.is_set()
        assert "6" in sim.reconciled
    finally:
        await sim.stop()
