"""Fault injection seen from clients: down (refused, watches dropped, same port on recover, watches served again),
unready (/readyz 500), slow (latency), and the admin HTTP endpoint of a group of members (off, the power-off, is
in test_power_off.py)."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from flotilla.member.runner import MemberGroup, read_admin_file, send_fault
from flotilla.member.simulated import MemberConfig
from tests.integration.member import MemberThread, kubectl_for


@pytest.fixture
def member(tmp_path: Path) -> Iterator[MemberThread]:
    m = MemberThread(MemberConfig(name="f1", data_dir=tmp_path, ready_delay=0.2)).start()
    yield m
    m.stop()


def get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


class WatchReader(threading.Thread):
    """A raw HTTP watch on namespaces; records lines and how the stream ended."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.lines: list[bytes] = []
        self.ended = threading.Event()
        self.started_ok = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        try:
            conn.request("GET", "/api/v1/namespaces?watch=true&timeoutSeconds=60")
            resp = conn.getresponse()
            self.started_ok.set()
            while True:
                line = resp.readline()
                if not line:
                    break
                self.lines.append(line)
        except BaseException as e:  # the connection dropped under us
            self.error = e
        finally:
            self.ended.set()
            conn.close()


def test_down_refuses_drops_watches_and_recovers_on_same_port(member: MemberThread, tmp_path: Path) -> None:
    port = member.member.port
    assert get(member.url + "/readyz") == (200, "ok")
    watch = WatchReader(port)
    watch.start()
    assert watch.started_ok.wait(5)

    assert member.fault("down")["mode"] == "down"
    assert watch.ended.wait(5), "the open watch was not dropped"
    assert refused(port)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(member.url + "/version", timeout=2)

    state = member.fault("recover")
    assert state["mode"] == "normal" and state["ready"] and state["port"] == port
    assert get(member.url + "/readyz") == (200, "ok")
    kubectl = kubectl_for(member, tmp_path / "home")
    assert "default" in kubectl.run("get", "namespaces").stdout  # same kubeconfig still works
    # down twice in a row and back: still the same port
    member.fault("down")
    member.fault("down")
    assert refused(port)
    member.fault("recover")
    assert get(member.url + "/healthz")[0] == 200


def test_a_request_reaching_a_down_member_is_cut_not_answered(member: MemberThread) -> None:
    # a connection the listener accepted just as ``down`` closed it escapes the force-close of the connections it
    # knew: the member must not answer on it either. The mode is set here without closing the listener, so that
    # every new connection is such a connection.
    faults = member.member.faults
    faults.mode = "down"
    try:
        conn = http.client.HTTPConnection("127.0.0.1", member.member.port, timeout=5)
        try:
            with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
                conn.request("GET", "/healthz")
                conn.getresponse().read()
        finally:
            conn.close()
    finally:
        faults.mode = "normal"
    assert get(member.url + "/healthz")[0] == 200


@pytest.mark.parametrize("mode", ["down", "off"])
def test_watches_are_served_again_after_recover(member: MemberThread, mode: str) -> None:
    member.fault(mode)
    member.fault("recover")
    conn = http.client.HTTPConnection("127.0.0.1", member.member.port, timeout=10)
    try:
        conn.request("GET", "/api/v1/namespaces?watch=true&timeoutSeconds=1")
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    assert resp.status == 200, body  # not 503 "the API server is shutting down"
    assert b'"ADDED"' in body  # the watch delivers the namespaces that exist


def test_simulators_keep_running_while_down(member: MemberThread, tmp_path: Path) -> None:
    kubectl = kubectl_for(member, tmp_path / "home")
    kubectl.run("apply", "-f", "-", input="""
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "postgres:16"}]}
""")
    member.fault("down")
    time.sleep(0.6)
    history = member.member.history
    ivs = history.intervals(kind="StatefulSet", name="db")
    assert len(ivs) == 1 and ivs[0].end is None  # it runs although nobody can reach the member
    member.fault("recover")
    assert kubectl.run("get", "sts/db", "-o", "jsonpath={.status.readyReplicas}").stdout == "1"


def test_unready_fails_readyz_only(member: MemberThread, tmp_path: Path) -> None:
    state = member.fault("unready")
    assert state["mode"] == "unready" and state["ready"] is False
    code, body = get(member.url + "/readyz")
    assert code == 500
    assert "unready" in body and "f1" in body and "readyz check failed" in body
    assert get(member.url + "/healthz") == (200, "ok")
    assert get(member.url + "/livez") == (200, "ok")
    kubectl = kubectl_for(member, tmp_path / "home")
    assert "default" in kubectl.run("get", "namespaces").stdout  # the API keeps working
    member.fault("recover")
    assert get(member.url + "/readyz") == (200, "ok")


def test_slow_delays_every_request(member: MemberThread) -> None:
    t0 = time.monotonic()
    get(member.url + "/version")
    fast = time.monotonic() - t0
    member.fault("slow", latency=0.5)
    t0 = time.monotonic()
    assert get(member.url + "/version")[0] == 200
    slow = time.monotonic() - t0
    assert slow >= 0.5 and slow - fast >= 0.4
    t0 = time.monotonic()
    assert get(member.url + "/api/v1/namespaces")[0] == 200
    assert time.monotonic() - t0 >= 0.5
    assert member.member.state()["ready"] is True  # slow is not unready
    member.fault("recover")
    t0 = time.monotonic()
    get(member.url + "/version")
    assert time.monotonic() - t0 < 0.4


def test_bad_fault_mode(member: MemberThread) -> None:
    from flotilla.member.faults import FaultError

    with pytest.raises(FaultError):
        member.fault("explode")
    with pytest.raises(FaultError):
        member.fault("slow", latency=-1)
    assert member.member.state()["mode"] == "normal"


class GroupThread:
    def __init__(self, group: MemberGroup) -> None:
        self.group = group
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def call(self, coro: Any) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(30)

    def __enter__(self) -> MemberGroup:
        self.thread.start()
        self.call(self.group.start())
        return self.group

    def __exit__(self, *exc: object) -> None:
        try:
            self.call(self.group.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


def post(url: str, body: Any) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_admin_endpoint_of_a_group(tmp_path: Path) -> None:
    configs = [MemberConfig(name=f"g{i}", data_dir=tmp_path, ready_delay=0.2) for i in (1, 2)]
    group = MemberGroup(configs, history_file=tmp_path / "history.jsonl")
    with GroupThread(group) as g:
        admin = g.admin_url
        info = read_admin_file(tmp_path, "g2")
        assert info["admin_url"] == admin and info["url"] == g.members["g2"].url
        assert (tmp_path / "g1" / "kubeconfig").exists() and (tmp_path / "g2" / "kubeconfig").exists()
        listed = json.loads(get(admin + "/members")[1])["members"]
        assert [m["name"] for m in listed] == ["g1", "g2"]
        assert all(m["mode"] == "normal" and m["ready"] and m["url"].startswith("http://127.0.0.1:") for m in listed)

        code, state = post(f"{admin}/members/g2/fault", {"mode": "down"})
        assert code == 200 and state["mode"] == "down" and state["ready"] is False
        assert refused(g.members["g2"].port)
        assert get(g.members["g1"].url + "/readyz") == (200, "ok")  # the other member is unaffected
        assert json.loads(get(admin + "/members/g2")[1])["mode"] == "down"  # admin stays reachable

        state = send_fault(tmp_path, "g2", "slow", 0.3)  # what `flotilla sim fault` calls
        assert state["mode"] == "slow" and state["latency"] == 0.3
        assert post(f"{admin}/members/g2/fault", {"mode": "recover"})[1]["mode"] == "normal"
        assert get(g.members["g2"].url + "/readyz") == (200, "ok")

        code, state = post(f"{admin}/members/g2/fault", {"mode": "off"})
        assert code == 200 and state["mode"] == "off" and state["workloads"] == "stopped"
        assert refused(g.members["g2"].port) and g.members["g2"].simulators == []
        assert post(f"{admin}/members/g2/fault", {"mode": "recover", "boot_delay": -1})[0] == 400
        state = send_fault(tmp_path, "g2", "recover", boot_delay=30)  # `flotilla sim fault --boot-delay 30`
        assert state["mode"] == "normal" and state["workloads"] == "booting" and state["ready"]
        assert get(g.members["g2"].url + "/readyz") == (200, "ok")  # the API answers while the workloads boot
        code, state = post(f"{admin}/members/g2/fault", {"mode": "off"})  # cancels the pending boot
        assert state["workloads"] == "stopped"
        state = send_fault(tmp_path, "g2", "recover", boot_delay=0)
        assert state["workloads"] == "running" and g.members["g2"].simulators != []
        assert post(f"{admin}/members/g2/fault", {"mode": "sideways"})[0] == 400
        assert post(f"{admin}/members/g9/fault", {"mode": "down"})[0] == 404
        assert post(f"{admin}/members/g1/fault", ["down"])[0] == 400
        history = json.loads(get(admin + "/history")[1])
        assert history == {"intervals": [], "overlaps": []}
    assert not (tmp_path / "g1" / "admin.json").exists()  # removed on a clean stop


def test_one_fault_request_names_several_members_and_leaves_the_others(tmp_path: Path) -> None:
    """`flotilla sim fault g1 g2 --mode down` is one POST /fault naming both: both go down, g3 keeps answering;
    an unknown name or a malformed list refuses the whole request and changes nothing."""
    from flotilla.main import main

    configs = [MemberConfig(name=f"g{i}", data_dir=tmp_path, ready_delay=0.2) for i in (1, 2, 3)]
    with GroupThread(MemberGroup(configs)) as g:
        admin = g.admin_url
        code, body = post(f"{admin}/fault", {"mode": "down", "members": ["g1", "g9"]})
        assert code == 404 and "g9" in body
        assert post(f"{admin}/fault", {"mode": "down", "members": "g1"})[0] == 400
        assert post(f"{admin}/fault", {"mode": "down", "members": []})[0] == 400
        assert all(m["mode"] == "normal" for m in json.loads(get(admin + "/members")[1])["members"])

        assert main(["sim", "fault", "g1", "g2", "--mode", "down", "--data-dir", str(tmp_path)]) == 0
        modes = {m["name"]: m["mode"] for m in json.loads(get(admin + "/members")[1])["members"]}
        assert modes == {"g1": "down", "g2": "down", "g3": "normal"}
        assert refused(g.members["g1"].port) and refused(g.members["g2"].port)
        assert get(g.members["g3"].url + "/readyz") == (200, "ok")
        assert main(["sim", "fault", "g2", "g1", "--mode", "recover", "--data-dir", str(tmp_path)]) == 0
        assert all(m["mode"] == "normal" for m in json.loads(get(admin + "/members")[1])["members"])


def test_partition_without_a_link_is_refused_saying_to_use_down(member: MemberThread) -> None:
    from flotilla.member.faults import FaultError

    with pytest.raises(FaultError, match="--mode down"):
        member.fault("partition")
    assert member.member.state()["mode"] == "normal"


def test_partition_cuts_the_link_only_and_recover_heals_it(member: MemberThread) -> None:
    """Through a Link: partition drops an open watch and fails new connections through it, while the member
    answers directly; recover forwards again on the same port."""
    from flotilla.local.links import Link

    link: Link = member.call(Link("f1", ("127.0.0.1", member.member.port)).start())
    try:
        member.member.faults.attach_link(link.cut, link.heal)
        via = f"http://127.0.0.1:{link.port}"
        assert get(via + "/version")[0] == 200
        watch = WatchReader(link.port)
        watch.start()
        assert watch.started_ok.wait(5)
        assert member.fault("partition")["mode"] == "partition"
        assert watch.ended.wait(5), "the watch through the link survived the partition"
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            get(via + "/version", timeout=3)
        assert get(member.url + "/version")[0] == 200  # the member itself is up
        member.fault("recover")
        assert get(via + "/version")[0] == 200
    finally:
        member.call(link.stop())


def test_one_way_partitions_of_a_push_members_link_lose_requests_or_answers_only(member: MemberThread) -> None:
    """A Push member's link (the control plane is the client): ``partition-to-member`` loses the requests (the
    member never sees them), ``partition-from-member`` delivers them (the member carries them out) and loses the
    answers; the client times out in both, and nothing is reset. ``recover`` forwards again."""
    from flotilla.local.links import Link, link_direction

    link: Link = member.call(Link("f1", ("127.0.0.1", member.member.port)).start())
    try:
        member.member.faults.attach_link(
            link.cut, link.heal,
            lambda d: link.drop(link_direction(member_is_client=False, towards_member=d == "to-member")))
        via = f"http://127.0.0.1:{link.port}"
        kubectl = kubectl_for(member, member.kubeconfig.parent / "home")

        def create_namespace(name: str) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", link.port, timeout=2)
            try:
                body = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
                with pytest.raises(TimeoutError):  # no answer, and no reset either
                    conn.request("POST", "/api/v1/namespaces", body=body,
                                  headers={"Content-Type": "application/json"})
                    conn.getresponse()
            finally:
                conn.close()

        assert member.fault("partition-to-member")["mode"] == "partition-to-member"
        assert member.member.state()["ready"]
        create_namespace("lost-on-the-way")
        assert "lost-on-the-way" not in kubectl.run("get", "namespaces").stdout  # the member never saw it

        assert member.fault("partition-from-member")["mode"] == "partition-from-member"
        create_namespace("answer-lost")  # the client hears nothing back ...
        assert "answer-lost" in kubectl.run("get", "namespaces").stdout  # ... though the member carried it out

        member.fault("recover")
        assert get(via + "/version")[0] == 200
    finally:
        member.call(link.stop())


def test_a_one_way_partition_without_a_drop_hook_is_refused(member: MemberThread) -> None:
    from flotilla.member.faults import FaultError

    member.member.faults.attach_link(lambda: None, lambda: None)
    with pytest.raises(FaultError, match="--mode partition"):
        member.fault("partition-to-member")
    assert member.member.state()["mode"] == "normal"


def test_the_admin_endpoint_faults_every_member_at_once_and_refuses_what_it_does_not_run(tmp_path: Path) -> None:
    """``POST /fault`` applies one fault to every member of the process (checked on all first: one refusing it
    refuses it for all); ``/members/<name>/agent`` and ``/controlplane`` answer 400 in a process that runs no agent
    and no control plane (a plain ``flotilla member``)."""
    configs = [MemberConfig(name=f"g{i}", data_dir=tmp_path, ready_delay=0.2) for i in (1, 2)]
    group = MemberGroup(configs, history_file=tmp_path / "history.jsonl")
    with GroupThread(group) as g:
        admin = g.admin_url
        status, body = post(f"{admin}/fault", {"mode": "unready"})
        assert status == 200 and [m["mode"] for m in body["members"]] == ["unready", "unready"], body
        assert all(not m["ready"] for m in body["members"])
        status, body = post(f"{admin}/fault", {"mode": "partition"})  # no links: refused for both, none changed
        assert status == 400 and "--mode down" in json.loads(body)["error"], body
        assert [m["mode"] for m in json.loads(get(admin + "/members")[1])["members"]] == ["unready", "unready"]
        status, body = post(f"{admin}/fault", {"mode": "recover"})
        assert status == 200 and [m["mode"] for m in body["members"]] == ["normal", "normal"], body
        status, body = post(f"{admin}/members/g1/agent", {"mode": "kill"})
        assert status == 400 and "no agent" in json.loads(body)["error"], body
        status, body = post(f"{admin}/controlplane", {"mode": "restart"})
        assert status == 400 and "no control plane" in json.loads(body)["error"], body
        assert post(f"{admin}/fault", ["recover"])[0] == 400
