"""EventRecorder against a real API server over HTTP, checked with the real kubectl."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.client.client import Client
from flotilla.client.errors import ApiException
from flotilla.client.events import EventRecorder
from flotilla.kube.resources import DEPLOYMENTS, EVENTS, NAMESPACES, Resource
from tests.support.apiserver import Kubectl, ServerThread

NS = "default"
EVENT_NAME = re.compile(r"^(?P<obj>.+)\.[0-9a-f]{16}$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(tmp_path_factory.mktemp("events")).start()
    yield srv
    srv.stop()


@pytest.fixture
def kubectl(server: ServerThread, tmp_path: Path) -> Kubectl:
    return Kubectl(server.kubeconfig, tmp_path)


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with Client.from_kubeconfig(server.kubeconfig) as c:
        yield c


async def deployment(client: Client, name: str) -> dict[str, Any]:
    labels = {"app": name}
    return await client.create(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        },
    )


async def events_about(client: Client, name: str, namespace: str = NS) -> list[dict[str, Any]]:
    found = await client.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")
    return sorted(found["items"], key=lambda e: e["metadata"]["name"])


async def test_events_show_in_kubectl_describe_and_get_with_aggregated_counts(
    client: Client, kubectl: Kubectl
) -> None:
    dep = await deployment(client, "web")
    recorder = EventRecorder(client, "flotilla-controller", host="node-1")
    for _ in range(3):
        recorder.event(dep, "Normal", "ScalingReplicaSet", "Scaled up replica set web-abc to 3")
    recorder.event(dep, "Warning", "FailedSync", "could not sync: boom")
    await asyncio.wait_for(recorder.flush(), 10)
    assert (recorder.created, recorder.aggregated, recorder.dropped, recorder.failed) == (2, 2, 0, 0)

    scaled, failed = sorted(
        await events_about(client, "web"), key=lambda e: e["reason"] != "ScalingReplicaSet"
    )
    assert scaled["count"] == 3 and failed["count"] == 1
    assert scaled["firstTimestamp"] <= scaled["lastTimestamp"]
    md = dep["metadata"]
    assert scaled["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "namespace": NS,
        "uid": md["uid"],
        "resourceVersion": md["resourceVersion"],
    }
    assert scaled["source"] == {"component": "flotilla-controller", "host": "node-1"}
    assert scaled["reportingComponent"] == "flotilla-controller" and scaled["reportingInstance"] == "node-1"
    assert (scaled["type"], failed["type"]) == ("Normal", "Warning")
    for ev in (scaled, failed):
        m = EVENT_NAME.match(ev["metadata"]["name"])
        assert m and m["obj"] == "web"
        assert ev["metadata"]["namespace"] == NS

    described = kubectl.run("describe", "deployment", "web").stdout
    events_section = described.split("Events:", 1)[1]
    rows = {
        line.split()[1]: line
        for line in events_section.splitlines()
        if line.strip().startswith(("Normal", "Warning"))
    }
    assert set(rows) == {"ScalingReplicaSet", "FailedSync"}
    assert re.search(r"\(x3 over \d+s\)", rows["ScalingReplicaSet"])
    assert "flotilla-controller" in rows["ScalingReplicaSet"]
    assert "Scaled up replica set web-abc to 3" in rows["ScalingReplicaSet"]
    assert "x1" not in rows["FailedSync"] and "could not sync: boom" in rows["FailedSync"]

    listed = kubectl.run("get", "events", "--field-selector", "involvedObject.name=web", "-o", "wide").stdout
    lines = listed.strip().splitlines()
    header = lines[0].split()
    assert "COUNT" in header and len(lines) == 3
    by_reason = {line.split()[2]: line for line in lines[1:]}
    assert set(by_reason) == {"ScalingReplicaSet", "FailedSync"}
    assert "deployment/web" in by_reason["ScalingReplicaSet"]
    assert "flotilla-controller, node-1" in by_reason["ScalingReplicaSet"]
    # the COUNT column comes right after FIRST SEEN; the name is last
    assert by_reason["ScalingReplicaSet"].split()[-2] == "3"
    assert by_reason["FailedSync"].split()[-2] == "1"

    names = kubectl.run(
        "get", "events", "--field-selector", "involvedObject.name=web,type=Warning", "-o", "name"
    ).stdout.split()
    assert names == [f"event/{failed['metadata']['name']}"]
    await recorder.close()


async def test_cluster_scoped_objects_get_events_in_default(client: Client) -> None:
    namespace = await client.get(NAMESPACES, "kube-system")
    recorder = EventRecorder(client, "flotilla-controller")
    recorder.event(namespace, "Normal", "Checked", "namespace looks fine")
    await asyncio.wait_for(recorder.flush(), 10)
    (ev,) = await events_about(client, "kube-system", NS)
    assert ev["metadata"]["namespace"] == "default"
    assert "namespace" not in ev["involvedObject"]
    assert ev["involvedObject"]["kind"] == "Namespace"
    assert ev["source"] == {"component": "flotilla-controller"}


async def test_outside_the_window_or_after_deletion_a_new_event_is_created(client: Client) -> None:
    dep = await deployment(client, "windowed")
    recorder = EventRecorder(client, "c", aggregation_window=0.05)
    recorder.event(dep, "Normal", "Tick", "same message")
    await recorder.flush()
    await asyncio.sleep(0.1)
    recorder.event(dep, "Normal", "Tick", "same message")  # window passed: a second Event
    recorder.event(dep, "Normal", "Tick", "same message")  # within the window of the second
    recorder.event(dep, "Normal", "Tick", "another message")  # differs: its own Event
    await recorder.flush()
    events = await events_about(client, "windowed")
    assert sorted((e["message"], e["count"]) for e in events) == [
        ("another message", 1),
        ("same message", 1),
        ("same message", 2),
    ]

    recorder2 = EventRecorder(client, "c")
    recorder2.event(dep, "Normal", "Gone", "x")
    await recorder2.flush()
    (gone,) = [e for e in await events_about(client, "windowed") if e["reason"] == "Gone"]
    await client.delete(EVENTS, gone["metadata"]["name"], NS)
    recorder2.event(dep, "Normal", "Gone", "x")  # the aggregated Event is gone: patch 404 -> create
    await recorder2.flush()
    (again,) = [e for e in await events_about(client, "windowed") if e["reason"] == "Gone"]
    assert again["count"] == 1 and again["metadata"]["name"] != gone["metadata"]["name"]
    assert recorder2.failed == 0


async def test_long_messages_are_truncated(client: Client) -> None:
    dep = await deployment(client, "chatty")
    recorder = EventRecorder(client, "c")
    recorder.event(dep, "Warning", "Verbose", "é" * 2000)
    await recorder.flush()
    (ev,) = await events_about(client, "chatty")
    assert len(ev["message"].encode()) <= 1024 and ev["message"].endswith("...")


class _FailingClient:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        self.calls += 1
        await asyncio.sleep(self.delay)
        raise ApiException(503, message="unavailable")

    async def patch(self, res: Resource, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        raise AssertionError("no event was ever created")


async def test_event_never_raises_and_never_blocks() -> None:
    client = _FailingClient(delay=0.01)
    recorder = EventRecorder(client, "c", max_queue=2, attempts=2)
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}}
    for i in range(5):
        recorder.event(obj, "Normal", "R", f"m{i}")  # the writer has not run yet: 2 fit, 3 dropped
    recorder.event(obj, "Bogus", "R", "bad type")
    recorder.event({"kind": "ConfigMap"}, "Normal", "R", "no name")
    recorder.event(None, "Normal", "R", "not even an object")  # type: ignore[arg-type]
    recorder.eventf(obj, "Normal", "R", "%d%d", 1)  # bad format args: still recorded, no raise
    assert recorder.dropped == 7
    await asyncio.wait_for(recorder.flush(), 5)
    assert recorder.failed == 2 and client.calls == 4  # two events, two attempts each (503 is retried)
    await recorder.close()
    recorder.event(obj, "Normal", "R", "after close")
    assert recorder.dropped == 8


def test_event_without_a_running_loop_is_dropped() -> None:
    recorder = EventRecorder(_FailingClient(), "c")
    recorder.event({"metadata": {"name": "x"}}, "Normal", "R", "m")
    assert recorder.dropped == 1


# ---------------------------------------------------------------------------------------------- correlation and pacing
# (an in-memory client: what is written, in what order)


class _MemoryClient:
    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []

    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        self.calls.append(("create", obj["reason"]))
        self.events[name] = dict(obj)
        return obj

    async def patch(self, res: Resource, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        if name not in self.events:
            raise ApiException(404, message="gone")
        self.calls.append(("patch", self.events[name]["reason"]))
        self.events[name].update(patch)
        return self.events[name]

    def by_reason(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.events.values() if e["reason"] == reason]


def _obj(name: str, kind: str = "Deployment") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"}}


async def test_repeats_of_a_pending_event_are_folded_into_one_write() -> None:
    client = _MemoryClient()
    recorder = EventRecorder(client, "c")
    for _ in range(50):
        recorder.event(_obj("a"), "Normal", "Synced", "same")
    await asyncio.wait_for(recorder.flush(), 5)
    (ev,) = client.by_reason("Synced")
    assert ev["count"] == 50 and client.calls == [("create", "Synced")]
    assert (recorder.created, recorder.aggregated) == (1, 49)


async def test_repeats_of_a_written_event_are_bumped_once_per_patch_delay() -> None:
    client = _MemoryClient()
    recorder = EventRecorder(client, "c", patch_delay=0.2)
    recorder.event(_obj("a"), "Normal", "Synced", "same")
    await recorder.flush()
    for _ in range(5):
        recorder.event(_obj("a"), "Normal", "Synced", "same")
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert client.calls == [("create", "Synced")]  # the bump waits for its delay
    await asyncio.sleep(0.3)
    assert client.calls == [("create", "Synced"), ("patch", "Synced")]
    (ev,) = client.by_reason("Synced")
    assert ev["count"] == 6
    await recorder.close()


async def test_similar_events_are_combined_after_ten() -> None:
    client = _MemoryClient()
    recorder = EventRecorder(client, "c")
    for i in range(15):
        recorder.event(_obj("a"), "Warning", "BackOff", f"attempt {i} failed")
    await recorder.flush()
    events = client.by_reason("BackOff")
    combined = [e for e in events if e["message"].startswith("(combined from similar events): ")]
    assert len(events) == 10 and len(combined) == 1  # 9 on their own, then one Event for the rest
    assert combined[0]["count"] == 6 and combined[0]["message"].endswith("attempt 14 failed")
    recorder.event(_obj("b"), "Warning", "BackOff", "attempt 0 failed")  # another object: its own count
    await recorder.flush()
    assert len(client.by_reason("BackOff")) == 11


async def test_spam_filter_bounds_the_new_events_per_object_and_type() -> None:
    client = _MemoryClient()
    recorder = EventRecorder(client, "c", spam_burst=3, spam_qps=0.0)
    for i in range(5):
        recorder.event(_obj("a"), "Normal", f"R{i}", "m")
    recorder.event(_obj("a"), "Warning", "Failed", "m")  # another type has its own bucket
    recorder.event(_obj("b"), "Normal", "R0", "m")  # and another object
    await recorder.flush()
    assert sorted(r for _, r in client.calls) == ["Failed", "R0", "R0", "R1", "R2"]
    assert recorder.filtered == 2
    recorder.event(_obj("a"), "Normal", "R0", "m")  # a repeat costs no token: folded into the count
    await recorder.flush()
    assert recorder.filtered == 2 and client.by_reason("R0")[0]["count"] == 2


async def test_warnings_go_first_and_a_full_queue_gives_up_count_bumps_first() -> None:
    client = _MemoryClient()
    recorder = EventRecorder(client, "c", max_queue=3, patch_delay=0.0, qps=0.0)
    recorder.event(_obj("a"), "Normal", "Bumped", "m")
    await recorder.flush()
    recorder.event(_obj("a"), "Normal", "Bumped", "m")  # a count bump waits
    recorder.event(_obj("b"), "Normal", "N1", "m")
    recorder.event(_obj("c"), "Normal", "N2", "m")  # full: 3 writes wait
    recorder.event(_obj("d"), "Normal", "N3", "m")  # a new Event takes the bump's place
    recorder.event(_obj("e"), "Warning", "W1", "m")  # a Warning takes a Normal Event's place
    recorder.event(_obj("f"), "Normal", "N4", "m")  # nothing of less value left: dropped
    assert recorder.dropped == 3
    await recorder.flush()
    assert client.calls[1:] == [("create", "W1"), ("create", "N2"), ("create", "N3")]


async def test_writes_are_paced_and_nothing_is_lost_within_the_queue() -> None:
    client = _MemoryClient()
    recorder = EventRecorder(client, "c", qps=200.0, burst=50)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(150):
        recorder.event(_obj(f"w{i}"), "Normal", "Evicted", "moved")
    await asyncio.wait_for(recorder.flush(), 10)
    assert loop.time() - start >= 0.4  # 50 at once, then 200/s
    assert len(client.events) == 150 and recorder.dropped == 0
