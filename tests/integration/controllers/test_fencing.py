"""D2 (fencing instead of deadlock) against a control plane and two simulated members.

Clusters, execution namespaces and bindings are written by the test (as in test_binding_execution), with the
binding and execution controllers running; member1 is taken down and brought back through the fault API.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.apiserver.server import ApiServer
from flotilla.cli.fence_commands import add_fence_parsers
from flotilla.client import Client
from flotilla.controllers.execution import ExecutionController
from flotilla.failover.fencing import ABANDONED_ANNOTATION, OUT_OF_SERVICE_TAINT_KEY, is_fenced
from flotilla.kube.resources import DEPLOYMENTS
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import WORKS
from flotilla.runtime.members import CLUSTERS
from tests.support.controllers import get_or_none

from .test_binding_execution import Env, deployment, eventually, running

MEMBERS = ("member1", "member2")
HOLD = "test.flotilla.io/hold"


@dataclass
class FenceEnv(Env):
    server: ApiServer

    @property
    def kubeconfig(self) -> Path:
        assert self.server.kubeconfig_path is not None
        return self.server.kubeconfig_path

    async def fault(self, cluster: str, mode: str) -> None:
        await self.group.members[cluster].set_fault(mode)

    async def template(self, name: str, replicas: int = 2) -> dict[str, Any]:
        obj = deployment(replicas=replicas)
        obj["metadata"]["name"] = name
        return await self.cp.create(DEPLOYMENTS, obj)

    async def take_down(self, cluster: str) -> None:
        """The member is unreachable and the Cluster says so (as the cluster-status controller would)."""
        await self.fault(cluster, "down")
        await self.set_ready(cluster, "False")


def cli(*argv: str) -> Callable[[], int]:
    parser = argparse.ArgumentParser(prog="flotilla")
    add_fence_parsers(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return lambda: int(args.fn(args))


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[FenceEnv]:
    async with running(tmp_path, lambda plane, manager: FenceEnv(plane.cp, plane.members, plane.group, manager,
                                                                 plane.server), compaction_interval=0) as env:
        yield env


async def fence(env: FenceEnv, cluster: str) -> None:
    rc = await asyncio.to_thread(cli("fence", cluster, "--kubeconfig", str(env.kubeconfig)))
    assert rc == 0


async def unfence(env: FenceEnv, cluster: str) -> None:
    rc = await asyncio.to_thread(cli("unfence", cluster, "--kubeconfig", str(env.kubeconfig)))
    assert rc == 0


# ---------------------------------------------------------------------------------------------- CLI


async def test_fence_and_unfence_cli(env: FenceEnv, capsys: pytest.CaptureFixture[str]) -> None:
    other = {"key": "example.com/maintenance", "effect": "NoSchedule"}
    await env.cp.patch(CLUSTERS, "member1", {"spec": {"taints": [other]}})

    await fence(env, "member1")
    captured = capsys.readouterr()
    assert f"cluster(member1) fenced: taint {OUT_OF_SERVICE_TAINT_KEY}:NoExecute added" in captured.out
    assert "treated as gone" in captured.err
    cluster = await env.cp.get(CLUSTERS, "member1")
    assert is_fenced(cluster)
    taints = cluster["spec"]["taints"]
    assert taints[0] == other and len(taints) == 2 and taints[1]["timeAdded"]

    await fence(env, "member1")  # idempotent
    assert "already fenced" in capsys.readouterr().out
    assert len((await env.cp.get(CLUSTERS, "member1"))["spec"]["taints"]) == 2

    await unfence(env, "member1")
    assert "cluster(member1) unfenced" in capsys.readouterr().out
    cluster = await env.cp.get(CLUSTERS, "member1")
    assert not is_fenced(cluster) and cluster["spec"]["taints"] == [other]
    await unfence(env, "member1")
    assert "is not fenced" in capsys.readouterr().out
    assert not is_fenced(await env.cp.get(CLUSTERS, "member2"))

    rc = await asyncio.to_thread(cli("fence", "nosuch", "--kubeconfig", str(env.kubeconfig)))
    assert rc == 1 and 'clusters.cluster.karmada.io "nosuch" not found' in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- D2


async def test_d2_work_deletion_on_fenced_cluster_completes_without_member(env: FenceEnv) -> None:
    template = await env.template("nginx")
    await env.create_binding(template, [("member1", 1), ("member2", 1)])
    work_name = generate_work_name("Deployment", "nginx", "default")
    for cluster in MEMBERS:
        await eventually(lambda c=cluster: env.applied(c, name=work_name), what=f"{cluster} applied")
    # a finalizer of the test's own keeps the released Work readable
    await env.cp.patch(WORKS, work_name, {"metadata": {"finalizers": [L.EXECUTION_CONTROLLER_FINALIZER, HOLD]}},
                       namespace="karmada-es-member1")

    await env.take_down("member1")
    await env.cp.delete(WORKS, work_name, "karmada-es-member1")
    await asyncio.sleep(1.0)  # not fenced: the deletion waits for the member (Karmada's behaviour)
    work = await env.work("member1", work_name)
    assert work is not None and L.EXECUTION_CONTROLLER_FINALIZER in work["metadata"]["finalizers"]

    await fence(env, "member1")

    async def released() -> dict[str, Any] | None:
        w = await env.work("member1", work_name)
        return w if w is not None and w["metadata"]["finalizers"] == [HOLD] else None

    work = await eventually(released, what="the Work released on the fenced cluster")
    record = json.loads(work["metadata"]["annotations"][ABANDONED_ANNOTATION])
    assert record["cluster"] == "member1" and record["at"]
    (cond,) = [c for c in work["status"]["conditions"] if c["type"] == "Abandoned"]
    assert cond["status"] == "True" and cond["reason"] == "ClusterFenced"
    assert "Deployment default/nginx" in cond["message"]
    events = await eventually(lambda: env.events("WorkAbandoned"), what="the WorkAbandoned event")
    assert events[0]["type"] == "Warning" and "member1 is fenced" in events[0]["message"]
    await env.cp.patch(WORKS, work_name, {"metadata": {"finalizers": None}}, namespace="karmada-es-member1")
    await eventually(lambda: _is_none(env.work("member1", work_name)), what="the Work gone")

    # the member was not contacted while fenced; once it answers again (still fenced, not Ready) the recovery purge
    # deletes the copy (D17). No cluster-status controller runs here: the purge's own retries find the member back
    await env.fault("member1", "recover")
    await eventually(lambda: _is_none(env.member_object("member1")), timeout=20.0,
                     what="the abandoned copy purged while member1 is still fenced")
    assert is_fenced(await env.cp.get(CLUSTERS, "member1"))
    assert await env.applied("member2", name=work_name)  # member2 untouched


async def test_d2_recovered_cluster_is_purged_of_stale_objects(env: FenceEnv,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    nginx = await env.template("nginx")
    web = await env.template("web")
    await env.create_binding(nginx, [("member1", 1), ("member2", 1)])
    await env.create_binding(web, [("member1", 2)])
    nginx_work = generate_work_name("Deployment", "nginx", "default")
    web_work = generate_work_name("Deployment", "web", "default")
    await eventually(lambda: env.applied("member1", name=nginx_work), what="nginx applied in member1")
    await eventually(lambda: env.applied("member1", name=web_work), what="web applied in member1")

    await env.take_down("member1")
    await fence(env, "member1")
    # nginx leaves member1 (as the taint manager's eviction would make it): its Work is abandoned there
    await env.patch_binding({"clusters": [{"name": "member2", "replicas": 2}]}, name="nginx-deployment")
    await eventually(lambda: _is_none(env.work("member1", nginx_work)), what="nginx's member1 Work released")
    # web changes meanwhile: its Work waits for member1
    await env.patch_binding({"clusters": [{"name": "member1", "replicas": 3}]}, name="web-deployment")

    async def web_work_revised() -> bool:
        w = await env.work("member1", web_work)
        return bool(w) and w["spec"]["workload"]["manifests"][0]["spec"]["replicas"] == 3

    await eventually(web_work_revised, what="web's Work revised")

    # every apply to member1 from now on must find the stale copy already gone
    seen: list[tuple[str, bool]] = []
    original = ExecutionController._apply

    async def spying_apply(self: ExecutionController, cluster: str, member: Client, manifest: dict[str, Any]
                           ) -> None:
        if cluster == "member1":
            stale = await get_or_none(member, DEPLOYMENTS, "nginx", "default")
            seen.append((manifest["metadata"]["name"], stale is None or bool(stale["metadata"].get(
                "deletionTimestamp"))))
        await original(self, cluster, member, manifest)

    monkeypatch.setattr(ExecutionController, "_apply", spying_apply)

    await env.fault("member1", "recover")
    await unfence(env, "member1")
    await asyncio.sleep(0.5)  # unfenced but not Ready: nothing is applied yet (the purge may run: D17)
    assert not seen
    await env.set_ready("member1", "True")

    await eventually(lambda: _is_none(env.member_object("member1")), what="the stale nginx deleted in member1")

    async def web_updated() -> bool:
        obj = await env.member_object("member1", name="web")
        return bool(obj) and obj["spec"]["replicas"] == 3

    await eventually(web_updated, what="web updated in member1")
    assert seen and all(gone for _, gone in seen), seen
    assert await env.member_object("member1", name="web") is not None  # still wanted: kept
    assert await env.member_object("member2") is not None  # the other cluster is untouched
    events = await eventually(lambda: env.events("StaleObjectsDeleted"), what="the StaleObjectsDeleted event")
    assert "Deployment.apps default/nginx" in events[0]["message"]
    assert "web" not in events[0]["message"]


async def _is_none(aw: Any) -> bool:
    return await aw is None
