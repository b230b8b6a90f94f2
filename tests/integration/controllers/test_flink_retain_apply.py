"""FlinkDeployment's Retain through the binding and execution controllers and a simulated member.

The member object of a propagated FlinkDeployment gets ``spec.job.initialSavepointPath`` and
``savepointRedeployNonce`` set in the member (as a member-side webhook or an earlier restore leaves them); the next
Work applied from a template that sets neither keeps them, and still changes what the template changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.client import Client, Resource
from flotilla.client.errors import ApiException
from flotilla.kube.resources import CRDS
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import RESOURCE_BINDINGS, WORKS
from flotilla.runtime.manager import ControllerManager
from tests.support.controllers import Eventually, get_or_none, plane_with_members, set_ready

FLINK = Resource("flink.apache.org", "v1beta1", "flinkdeployments", "FlinkDeployment", True)
WORK = generate_work_name("FlinkDeployment", "orders", "default")
PATH = "s3://flink/checkpoints/6f1c0e2b9a4d4b7e8c3a1d2e5f607182/chk-42"

eventually = Eventually(timeout=20.0)


def orders(parallelism: int) -> dict[str, Any]:
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": "orders", "namespace": "default"},
            "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                     "jobManager": {"resource": {"cpu": 1, "memory": "1024m"}},
                     "taskManager": {"resource": {"cpu": 1, "memory": "1024m"}},
                     "job": {"jarURI": "local:///opt/flink/job.jar", "parallelism": parallelism,
                             "upgradeMode": "stateless"}}}


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[tuple[Client, Client]]:
    async with plane_with_members(tmp_path, ("member1",)) as p:
        await p.cp.create(CRDS, flink_deployment_crd())

        async def served() -> bool:
            try:
                await p.cp.list(FLINK, "default", limit=1)
            except ApiException:
                return False
            return True

        await eventually(served, what="the FlinkDeployment CRD served by the control plane")
        manager = ControllerManager(p.cp, controllers=["binding", "execution"])
        await set_ready(p.cp, "member1", "True", reason="ClusterReady")
        await manager.start()
        try:
            yield p.cp, p.members["member1"]
        finally:
            await manager.stop()


async def test_d20_member_savepoint_path_and_nonce_survive_the_next_work_apply(plane: tuple[Client, Client]) -> None:
    cp, member = plane
    template = await cp.create(FLINK, orders(2))
    await cp.create(RESOURCE_BINDINGS, {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "orders-flinkdeployment", "namespace": "default",
                     "finalizers": [L.BINDING_CONTROLLER_FINALIZER]},
        "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                              "namespace": "default", "name": "orders", "uid": template["metadata"]["uid"]},
                 "replicas": 3, "clusters": [{"name": "member1", "replicas": 3}]},
    })

    async def member_job() -> dict[str, Any] | None:
        obj = await get_or_none(member, FLINK, "orders", "default")
        return None if obj is None else obj["spec"]["job"]

    await eventually(member_job, what="the FlinkDeployment applied to member1")
    # what a member-side webhook (or an earlier restore) leaves in the member object
    await member.patch(FLINK, "orders", {"spec": {"job": {"initialSavepointPath": PATH, "upgradeMode": "savepoint",
                                                          "savepointRedeployNonce": 4}}}, namespace="default")
    work_before = await get_or_none(cp, WORKS, WORK, "karmada-es-member1")
    assert work_before is not None
    await cp.patch(FLINK, "orders", {"spec": {"job": {"parallelism": 3}}}, namespace="default")

    async def reapplied() -> dict[str, Any] | None:
        job = await member_job()
        return job if job is not None and job.get("parallelism") == 3 else None

    job = await eventually(reapplied, what="the template's new parallelism applied to member1")
    assert job["initialSavepointPath"] == PATH
    assert job["savepointRedeployNonce"] == 4
    assert job["upgradeMode"] == "savepoint"
    work = await get_or_none(cp, WORKS, WORK, "karmada-es-member1")
    assert work is not None
    manifest = work["spec"]["workload"]["manifests"][0]
    assert "initialSavepointPath" not in manifest["spec"]["job"]  # the Work holds the template; Retain keeps the rest
