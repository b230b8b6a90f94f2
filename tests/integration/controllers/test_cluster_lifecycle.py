"""Cluster lifecycle end to end: `flotilla join` / `unjoin` against a control-plane ApiServer, simulated
members, and the controller-manager running the cluster and cluster-status controllers with short intervals."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.cli.cluster_commands import (
    ClusterCommandError,
    add_cluster_parsers,
    unjoin_cluster,
)
from flotilla.client import ApiException, Client, Resource
from flotilla.client.kubeconfig import load_kubeconfig, write_kubeconfig
from flotilla.kube.conditions import find_condition
from flotilla.kube.resources import EVENTS, NAMESPACES, SECRETS
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberConfig
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.members import CLUSTERS
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, cluster_controllers, get_or_none, join_in_process

WORKS = Resource("work.karmada.io", "v1alpha1", "works", "Work", True)
FREQUENCY = 0.2
THRESHOLD = 0.6


@dataclass
class Env:
    tmp: Path
    server: ApiServer
    members: MemberGroup
    client: Client
    manager: ControllerManager

    @property
    def kubeconfig(self) -> Path:
        assert self.server.kubeconfig_path is not None
        return self.server.kubeconfig_path

    def member_kubeconfig(self, name: str = "member1") -> Path:
        return self.members.members[name].kubeconfig_path

    async def fault(self, mode: str, name: str = "member1") -> None:
        await self.members.members[name].set_fault(mode)

    async def cluster(self, name: str = "member1") -> dict[str, Any] | None:
        return await get_or_none(self.client, CLUSTERS, name, None)

    async def exists(self, res: Resource, name: str, namespace: str | None = None) -> bool:
        return await get_or_none(self.client, res, name, namespace) is not None

    async def join(self, name: str = "member1") -> None:
        await join_in_process(self.client, name, self.member_kubeconfig(name))


eventually = Eventually(retry_on=())


def ready_of(cluster: dict[str, Any] | None) -> dict[str, Any] | None:
    return find_condition(((cluster or {}).get("status") or {}).get("conditions"), "Ready")


def taint_keys(cluster: dict[str, Any] | None) -> list[str]:
    return [f"{t['key']}:{t['effect']}" for t in ((cluster or {}).get("spec") or {}).get("taints") or []]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    members = [MemberConfig(name=n, data_dir=tmp_path / "members", simulators=[]) for n in ("member1", "member2")]
    options = ControllerOptions(cluster_status_update_frequency=FREQUENCY,
                                cluster_success_threshold=THRESHOLD, cluster_failure_threshold=THRESHOLD)
    async with cluster_controllers(tmp_path, members, options) as c:
        yield Env(tmp_path, c.server, c.members, c.client, c.manager)


async def ready_cluster(env: Env, name: str = "member1") -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        c = await env.cluster(name)
        r = ready_of(c)
        return c if r and r["status"] == "True" and not taint_keys(c) else None

    result: dict[str, Any] = await eventually(check)
    return result


def cli(*argv: str) -> Callable[[], int]:
    """A `flotilla join|unjoin ...` command line, run through the real argument parser and command function."""
    parser = argparse.ArgumentParser(prog="flotilla")
    add_cluster_parsers(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return lambda: int(args.fn(args))


# ---------------------------------------------------------------------------------------------- join


async def test_join_via_cli_makes_the_cluster_ready(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    rc = await asyncio.to_thread(cli("join", "member1", "--cluster-kubeconfig", str(env.member_kubeconfig()),
                                     "--kubeconfig", str(env.kubeconfig), "--cluster-region", "eu"))
    assert rc == 0, capsys.readouterr().err
    assert "cluster(member1) is joined successfully" in capsys.readouterr().out

    cluster = await ready_cluster(env)
    spec, md, status = cluster["spec"], cluster["metadata"], cluster["status"]
    assert spec["syncMode"] == "Push" and spec["apiEndpoint"] == env.members.members["member1"].url
    assert spec["secretRef"] == {"namespace": "karmada-cluster", "name": "member1"}
    assert spec["region"] == "eu" and spec["id"]  # id: UID of the member's kube-system namespace
    assert "insecureSkipTLSVerification" not in spec
    assert "karmada.io/cluster-controller" in md["finalizers"]
    ready = ready_of(cluster)
    assert ready is not None and (ready["reason"], ready["message"]) == (
        "ClusterReady", "cluster is healthy and ready to accept workloads")
    assert status["kubernetesVersion"].startswith("v1.")
    by_gv = {e["groupVersion"]: e.get("resources", []) for e in status["apiEnablements"]}
    assert {"name": "deployments", "kind": "Deployment"} in by_gv["apps/v1"]
    assert {"name": "pods", "kind": "Pod"} in by_gv["v1"]
    assert not any("/" in r["name"] for rs in by_gv.values() for r in rs)
    complete = find_condition(status["conditions"], "CompleteAPIEnablements")
    assert complete is not None and complete["status"] == "True" and complete["reason"] == "Complete"

    es = await env.client.get(NAMESPACES, "karmada-es-member1")
    assert es["metadata"]["labels"]["karmada.io/system"] == "true"
    secret = await env.client.get(SECRETS, "member1", "karmada-cluster")
    assert [(r["kind"], r["name"], r["uid"]) for r in secret["metadata"]["ownerReferences"]] == [
        ("Cluster", "member1", md["uid"])]

    # joining again changes nothing
    rv = md["resourceVersion"]
    await asyncio.sleep(FREQUENCY * 2)
    rc = await asyncio.to_thread(cli("join", "member1", "--cluster-kubeconfig", str(env.member_kubeconfig()),
                                     "--kubeconfig", str(env.kubeconfig), "--cluster-region", "eu"))
    assert rc == 0
    assert "unchanged" in capsys.readouterr().out
    again = await env.cluster()
    assert again is not None and again["metadata"]["generation"] == md["generation"]
    assert again["metadata"]["resourceVersion"] == rv  # healthy and unchanged: no status writes either


async def test_rejoin_updates_the_endpoint(env: Env, tmp_path: Path) -> None:
    await env.join()
    await ready_cluster(env)
    # the same name now points at member2: join again updates spec.apiEndpoint
    await join_in_process(env.client, "member1", env.member_kubeconfig("member2"))
    cluster = await env.cluster()
    assert cluster is not None and cluster["spec"]["apiEndpoint"] == env.members.members["member2"].url
    await env.fault("down", "member1")  # the old endpoint going down does not matter any more
    await asyncio.sleep(THRESHOLD + 3 * FREQUENCY)
    ready = ready_of(await env.cluster())
    assert ready is not None and ready["status"] == "True"


async def test_join_refuses_an_unreachable_member(env: Env, tmp_path: Path) -> None:
    bad = write_kubeconfig(tmp_path / "bad-kubeconfig", server="http://127.0.0.1:1", context="bad")
    with pytest.raises(ClusterCommandError, match="cannot reach member cluster gone at http://127.0.0.1:1"):
        await join_in_process(env.client, "gone", bad)
    assert await env.cluster("gone") is None
    assert not await env.exists(SECRETS, "gone", "karmada-cluster")


async def test_join_cli_reports_errors(env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = await asyncio.to_thread(cli("join", "member1", "--cluster-kubeconfig", str(tmp_path / "missing"),
                                     "--kubeconfig", str(env.kubeconfig)))
    assert rc == 1
    assert "error: member cluster: cannot read kubeconfig" in capsys.readouterr().err
    rc = await asyncio.to_thread(cli("join", "Bad_Name", "--cluster-kubeconfig", str(env.member_kubeconfig()),
                                     "--kubeconfig", str(env.kubeconfig)))
    assert rc == 1
    assert "invalid cluster name 'Bad_Name'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- health


async def test_member_down_goes_not_ready_after_the_failure_threshold_and_back(env: Env) -> None:
    await env.join()
    await ready_cluster(env)

    faulted = time.monotonic()
    await env.fault("down")

    async def not_ready() -> dict[str, Any] | None:
        c = await env.cluster()
        r = ready_of(c)
        return c if r and r["status"] == "False" else None

    cluster = await eventually(not_ready)
    flipped = time.monotonic()
    assert flipped - faulted >= THRESHOLD - 0.1, "Ready flipped before the failure threshold"
    ready = ready_of(cluster)
    assert ready is not None and (ready["reason"], ready["message"]) == (
        "ClusterNotReachable", "cluster is not reachable")
    version = cluster["status"]["kubernetesVersion"]  # kept while offline

    async def tainted() -> dict[str, Any] | None:
        c = await env.cluster()
        return c if "cluster.karmada.io/not-ready:NoSchedule" in taint_keys(c) else None

    cluster = await eventually(tainted)
    taint = next(t for t in cluster["spec"]["taints"] if t["key"] == "cluster.karmada.io/not-ready")
    assert taint["timeAdded"].endswith("Z")
    assert cluster["status"]["kubernetesVersion"] == version

    recovered = time.monotonic()
    await env.fault("recover")
    cluster = await ready_cluster(env)
    assert time.monotonic() - recovered >= THRESHOLD - 0.1, "Ready came back before the success threshold"
    assert taint_keys(cluster) == []

    async def events() -> list[str] | None:
        items = (await env.client.list(EVENTS, "default")).get("items") or []
        reasons = [e["reason"] for e in items if e["involvedObject"].get("name") == "member1"]
        wanted = {"ClusterReady", "ClusterNotReachable", "TaintClusterSucceed", "CreateExecutionSpaceSucceed"}
        return reasons if wanted <= set(reasons) else None

    await eventually(events)


async def test_unready_member_is_not_ready(env: Env) -> None:
    await env.join()
    await ready_cluster(env)
    await env.fault("unready")  # /readyz answers 500, the API keeps working

    async def not_ready() -> dict[str, Any] | None:
        c = await env.cluster()
        r = ready_of(c)
        return c if r and r["status"] == "False" and taint_keys(c) else None

    cluster = await eventually(not_ready)
    ready = ready_of(cluster)
    assert ready is not None and ready["reason"] == "ClusterNotReady"
    assert ready["message"] == "cluster is reachable but health endpoint responded without ok"
    assert taint_keys(cluster) == ["cluster.karmada.io/not-ready:NoSchedule"]
    await env.fault("recover")
    await ready_cluster(env)


async def test_short_blip_within_the_threshold_changes_nothing(env: Env) -> None:
    await env.join()
    before = await ready_cluster(env)
    await env.fault("down")
    await asyncio.sleep(THRESHOLD / 3)
    await env.fault("recover")
    await asyncio.sleep(THRESHOLD + 2 * FREQUENCY)
    after = await env.cluster()
    assert ready_of(after) == ready_of(before) and taint_keys(after) == []


async def test_missing_secret_is_a_failure_subject_to_the_threshold(env: Env) -> None:
    """Karmada #7426: a client that cannot be built counts as a failure, damped like any other."""
    await env.join()
    await ready_cluster(env)
    secret = await env.client.get(SECRETS, "member1", "karmada-cluster")
    await env.client.delete(SECRETS, "member1", "karmada-cluster")

    async def failed() -> dict[str, Any] | None:
        r = ready_of(await env.cluster())
        return r if r and r["status"] == "False" else None

    ready = await eventually(failed)
    assert ready["reason"] == "StatusCollectionFailed"
    assert ready["message"].startswith("failed to create a ClusterClient: cluster member1: cannot read its secret")
    secret["metadata"] = {"name": "member1", "namespace": "karmada-cluster"}
    await env.client.create(SECRETS, secret, "karmada-cluster")
    await ready_cluster(env)


async def test_taint_changes_keep_other_taints(env: Env) -> None:
    await env.join()
    cluster = await ready_cluster(env)
    user = {"key": "dedicated", "value": "flink", "effect": "NoSchedule"}
    policy = {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}
    await env.client.patch(CLUSTERS, "member1", {"spec": {"taints": [user, policy]}})
    await env.fault("unready")

    async def tainted() -> list[str] | None:
        keys = taint_keys(await env.cluster())
        return keys if "cluster.karmada.io/not-ready:NoSchedule" in keys else None

    keys = await eventually(tainted)
    assert keys == ["dedicated:NoSchedule", "cluster.karmada.io/not-ready:NoExecute",
                    "cluster.karmada.io/not-ready:NoSchedule"]
    await env.fault("recover")
    cluster = await eventually(lambda: _with_taints(env, ["dedicated:NoSchedule",
                                                          "cluster.karmada.io/not-ready:NoExecute"]))
    assert cluster["spec"]["taints"][0] == user


async def _with_taints(env: Env, keys: list[str]) -> dict[str, Any] | None:
    c = await env.cluster()
    return c if taint_keys(c) == keys else None


# ---------------------------------------------------------------------------------------------- unjoin


async def test_unjoin_via_cli_removes_cluster_secret_and_execution_space(
        env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    await env.join()
    await ready_cluster(env)
    assert await env.exists(NAMESPACES, "karmada-es-member1")
    rc = await asyncio.to_thread(cli("unjoin", "member1", "--kubeconfig", str(env.kubeconfig), "--wait", "10s"))
    assert rc == 0, capsys.readouterr().err
    assert "cluster(member1) is unjoined successfully" in capsys.readouterr().out
    assert await env.cluster() is None
    assert not await env.exists(SECRETS, "member1", "karmada-cluster")
    assert not await env.exists(NAMESPACES, "karmada-es-member1")

    rc = await asyncio.to_thread(cli("unjoin", "member1", "--kubeconfig", str(env.kubeconfig)))
    assert rc == 1 and "cluster member1 not found" in capsys.readouterr().err


async def test_unjoin_waits_for_works_held_by_a_finalizer(env: Env) -> None:
    """Without an execution controller the Work's finalizer holds the cluster in Terminating; the wait times
    out with a message saying why, the controller says so in an Event, and the cleanup finishes once the
    finalizer goes. The Secret then goes with the Cluster (ownerReference)."""
    await env.join()
    await ready_cluster(env)
    work = {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "w1", "namespace": "karmada-es-member1",
                         "finalizers": ["karmada.io/execution-controller"]},
            "spec": {"workload": {"manifests": []}}}
    await env.client.create(WORKS, work, "karmada-es-member1")

    with pytest.raises(ClusterCommandError, match="still being deleted after 1s"):
        await unjoin_cluster(env.client, "member1", wait=1.0, out=lambda _: None)
    cluster = await env.cluster()
    assert cluster is not None and cluster["metadata"].get("deletionTimestamp")
    assert await env.exists(SECRETS, "member1", "karmada-cluster")

    async def pending_event() -> str | None:
        items = (await env.client.list(EVENTS, "default")).get("items") or []
        return next((e["message"] for e in items if e["reason"] == "ClusterCleanupPending"
                     and "held by the finalizer karmada.io/execution-controller" in e["message"]), None)

    message = await eventually(pending_event)
    assert "1 Work(s) in karmada-es-member1" in message and "w1" in message

    await env.client.patch(WORKS, "w1", {"metadata": {"finalizers": None}}, namespace="karmada-es-member1")
    await eventually(lambda: _gone(env))
    await eventually(lambda: _not(env.exists(SECRETS, "member1", "karmada-cluster")))
    assert not await env.exists(NAMESPACES, "karmada-es-member1")


async def _gone(env: Env) -> bool:
    return await env.cluster() is None


async def _not(aw: Awaitable[bool]) -> bool:
    return not await aw


async def test_unjoin_force_strips_finalizers(env: Env) -> None:
    await env.join()
    await ready_cluster(env)
    await env.client.create(WORKS, {
        "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "w1", "namespace": "karmada-es-member1",
                     "finalizers": ["karmada.io/execution-controller"]},
        "spec": {"workload": {"manifests": []}}}, "karmada-es-member1")
    said: list[str] = []
    await unjoin_cluster(env.client, "member1", wait=0.5, force=True, out=said.append)
    assert await env.cluster() is None
    assert not await env.exists(SECRETS, "member1", "karmada-cluster")
    assert any("removing its finalizers" in s for s in said) and said[-1].endswith("unjoined successfully")
    with contextlib.suppress(ApiException):  # leave no Work behind for the namespace to wait on
        await env.client.patch(WORKS, "w1", {"metadata": {"finalizers": None}}, namespace="karmada-es-member1")


async def test_cluster_recreated_after_unjoin_gets_a_fresh_execution_space(env: Env) -> None:
    await env.join()
    await ready_cluster(env)
    await unjoin_cluster(env.client, "member1", wait=10.0, out=lambda _: None)
    await env.join()
    await ready_cluster(env)
    assert await env.exists(NAMESPACES, "karmada-es-member1")


async def test_join_a_tls_member_with_a_token(env: Env, tmp_path: Path) -> None:
    """A member serving TLS and requiring a bearer token: the Secret carries token and caBundle, and the status
    controller reaches the member with them."""
    secure = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "secure", port=0,
                                             secure=True, context_name="secure")).start()
    try:
        assert secure.kubeconfig_path is not None and secure.url.startswith("https://")
        await join_in_process(env.client, "secure", secure.kubeconfig_path)
        secret = await env.client.get(SECRETS, "secure", "karmada-cluster")
        assert set(secret["data"]) == {"token", "caBundle"}
        cluster = await ready_cluster(env, "secure")
        assert cluster["spec"]["apiEndpoint"] == secure.url
        assert cluster["status"]["apiEnablements"]
        # a wrong token: the member refuses discovery but /readyz stays public, so the cluster stays Ready;
        # join itself refuses credentials the member rejects
        bad = write_kubeconfig(tmp_path / "bad-token", server=secure.url, context="bad", token="wrong",
                               ca_pem=load_kubeconfig(secure.kubeconfig_path).ca_pem)
        with pytest.raises(ClusterCommandError, match="refused the kubeconfig's credentials"):
            await join_in_process(env.client, "secure", bad)
    finally:
        await unjoin_cluster(env.client, "secure", wait=10.0, out=lambda _: None)
        await secure.stop()


async def test_unjoin_without_waiting_leaves_the_secret_to_garbage_collection(env: Env) -> None:
    await env.join()
    await ready_cluster(env)
    said: list[str] = []
    await unjoin_cluster(env.client, "member1", wait=0, out=said.append)
    assert said == ["cluster(member1) is being deleted; its Secret goes with it"]
    await eventually(lambda: _gone(env))
    await eventually(lambda: _not(env.exists(SECRETS, "member1", "karmada-cluster")))
