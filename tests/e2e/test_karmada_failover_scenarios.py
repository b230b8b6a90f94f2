"""Karmada's failover end-to-end scenarios 1-12 (numbered as in docs/karmada-compatibility.md), as real processes
driven by kubectl.

One module-scoped fixture starts ``flotilla apiserver``, ``flotilla member --count 2``, joins both members and
starts ``flotilla controller-manager`` with short probe timings and otherwise default failover settings (D1: the
``Failover``, ``GracefulEviction`` and ``StatefulFailoverInjection`` gates and NoExecute eviction are on,
``--no-execute-taint-eviction-purge-mode`` is ``Gracefully``, ClusterTaintPolicies may carry NoExecute taints).
The tests run one after the other, as Karmada's serial suites do: each creates its own objects (named after the
scenario), taints or re-conditions a cluster, checks the outcome the scenario describes, and removes its taints,
conditions and objects in a ``finally`` so the next test starts from two Ready, untainted clusters. Karmada's
timings are shortened (tolerationSeconds 2-4 s instead of 30 s, gracePeriodSeconds 2 s instead of 10 s).

| test | scenario | Karmada e2e (test/e2e/suites/base/) |
|---|---|---|
| test_scenario_1_deployment_failover_testing | 1 | failover_test.go "deployment failover testing" (nil failover behavior) |
| test_scenario_2_taint_cluster_with_noexecute_taint_gracefully | 2 | failover_test.go "taint Cluster with NoExecute taint" (purgeMode Gracefully) |
| test_scenario_3_taint_cluster_with_noexecute_taint_directly_with_state_preservation | 3 | failover_test.go "taint Cluster with NoExecute taint" (purgeMode Directly) |
| test_scenario_4_application_failover_gracefully_when_the_application_comes_back_to_healthy_on_the_new_cluster | 4 | failover_test.go "application failover with purgeMode gracefully when the application come back to healthy on the new cluster" |
| test_scenario_5_application_failover_gracefully_when_the_grace_period_is_reached | 5 | failover_test.go "application failover with purgeMode gracefully when the GracePeriodSeconds is reach out" |
| test_scenario_6_application_failover_purge_mode_never | 6 | failover_test.go "application failover with purgeMode never" |
| test_scenario_7_application_failover_directly_deletes_the_old_ones_first_then_creates_the_new_ones | 7 | failover_test.go "Delete the old ones first, then create the new ones" |
| test_scenario_8_member_cluster_becomes_unreachable_with_cluster_affinities | 8 | clusteraffinities_test.go "[Failover] member cluster become unReachable" |
| test_scenario_9_deployment_with_cluster_tolerations | 9 | tainttoleration_test.go "deployment with cluster tolerations testing" |
| test_scenario_10_taint_added_and_removed_upon_single_condition_match | 10 | clustertaintpolicy_test.go "taint should be added and removed upon single condition match" |
| test_scenario_11_taint_added_and_removed_upon_multi_conditions_match | 11 | clustertaintpolicy_test.go "taint should be added and removed upon multi conditions match" |
| test_scenario_12_multiple_taints | 12 | clustertaintpolicy_test.go "multiple taints should be added and removed upon conditions match" |

Scenario 13 (WorkloadRebalancer) and 14 (karmadactl taint) are covered elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.pipeline import (
    NS,
    Pipeline,
    cluster_ready,
    condition,
    docs,
    policy,
    start_control_plane,
)

pytestmark = pytest.mark.kubectl

MEMBERS = ("member1", "member2")
TIMEOUT = 25.0
IMAGE = "nginx:1.19.0"  # Karmada's testhelper.NewDeployment image
FAKE_IMAGE = "fake/nginx:1.19.0"  # the members' broken-image pattern (^fake/): never Ready, as in Karmada's e2e
NOT_READY = "cluster.karmada.io/not-ready"
ALIAS = "test-alias"
POLICY_API = "policy.karmada.io/v1alpha1"
# the taint timeAdded and the task creationTimestamp are metav1.Time (whole seconds): timers may fire up to this
# much earlier than the wall clock of the change that started them
SECOND_PRECISION = 1.0


# ----------------------------------------------------------------------------------------------- manifests


def deployment(name: str, image: str = IMAGE, replicas: int = 2) -> dict[str, Any]:
    """Karmada's test Deployment (default RollingUpdate strategy). Broken by an image override, it stops at
    maxSurge (25% of 2: one new pod that never becomes Ready, the two old ones stay), so ``updatedReplicas`` stays
    below ``replicas`` and the health rule says Unhealthy, as on a real member."""
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}},
                                         "spec": {"containers": [{"name": "nginx", "image": image}]}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": name}}, "spec": spec}


def propagation_policy(name: str, placement: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return policy(name, "Deployment", "apps/v1", placement, **spec)


def one_of_two(tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The placement of Karmada's failover suites: member1 or member2, exactly one of them."""
    placement: dict[str, Any] = {
        "clusterAffinity": {"clusterNames": list(MEMBERS)},
        "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
    }
    if tolerations:
        placement["clusterTolerations"] = tolerations
    return placement


def no_execute_toleration(key: str, seconds: int) -> dict[str, Any]:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


def application_failover(toleration_seconds: int, purge_mode: str, **extra: Any) -> dict[str, Any]:
    return {"application": {"decisionConditions": {"tolerationSeconds": toleration_seconds},
                            "purgeMode": purge_mode, **extra}}


def fake_registry_override(name: str, clusters: list[str]) -> dict[str, Any]:
    """Karmada's "make the application unhealthy" OverridePolicy: registry ``fake`` in the given clusters."""
    return {
        "apiVersion": POLICY_API, "kind": "OverridePolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
                 "overrideRules": [{"targetCluster": {"clusterNames": clusters},
                                    "overriders": {"imageOverrider": [
                                        {"component": "Registry", "operator": "replace", "value": "fake"}]}}]},
    }


def in_condition(condition_type: str, *statuses: str) -> dict[str, Any]:
    return {"conditionType": condition_type, "operator": "In", "statusValues": list(statuses)}


def cluster_taint_policy(name: str, cluster: str, add_on: list[dict[str, Any]], remove_on: list[dict[str, Any]],
                         taints: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": POLICY_API, "kind": "ClusterTaintPolicy", "metadata": {"name": name},
        "spec": {"targetClusters": {"clusterNames": [cluster]}, "addOnConditions": add_on,
                 "removeOnConditions": remove_on, "taints": taints},
    }


# ----------------------------------------------------------------------------------------------- helpers


class Env(Pipeline):
    def where(self, name: str, first: str | None = None) -> dict[str, dict[str, Any]]:
        """The member copies of Deployment ``name``, by member; ``first``: the member read first.

        The members are read one after the other, so a copy created in the second member just after the
        first one's copy was deleted can be seen with it. Reading the new copy's member first makes "both
        seen" mean both existed at once: the new copy existed at the first read and the old one still
        at the second."""
        found = {}
        for m in sorted(MEMBERS, key=lambda m: m != first):
            obj = self.member_get(m, "deployments", name)
            if obj is not None:
                found[m] = obj
        return found

    def rb(self, name: str) -> dict[str, Any]:
        return self.cp_get("rb", f"{name}-deployment")

    def rb_clusters(self, name: str) -> list[str]:
        return [c["name"] for c in self.rb(name)["spec"].get("clusters") or []]

    def _patch_cluster(self, name: str, change: Callable[[dict[str, Any]], dict[str, Any]],
                       status: bool = False) -> None:
        """Read the Cluster, merge-patch what ``change`` returns under its resourceVersion; again on a conflict
        (the cluster controllers write the same object)."""
        for _ in range(20):
            cluster = self.cluster(name)
            body = {"metadata": {"resourceVersion": cluster["metadata"]["resourceVersion"]}, **change(cluster)}
            args = ["patch", "cluster", name, "--type=merge", "-p", json.dumps(body)]
            if status:
                args.append("--subresource=status")
            r = self.cp.run(*args, check=False)
            if r.returncode == 0:
                return
            if "Conflict" not in r.stderr and "modified" not in r.stderr:
                raise AssertionError(f"kubectl {' '.join(args)} failed: {r.stderr}")
            time.sleep(0.1)
        raise AssertionError(f"cluster {name} kept changing under the patch")

    def add_taint(self, cluster: str, taint: dict[str, str]) -> None:
        self._patch_cluster(cluster, lambda c: {"spec": {"taints": [
            *((c.get("spec") or {}).get("taints") or []), taint]}})

    def remove_taints(self, cluster: str, *taints: dict[str, str]) -> None:
        """Remove the taints with these key and effect (what Karmada's RemoveClusterTaint matches on)."""
        def keep(t: dict[str, Any]) -> bool:
            return not any(t.get("key") == x["key"] and t.get("effect") == x["effect"] for x in taints)

        if any(not keep(t) for t in self.taints(cluster)):
            self._patch_cluster(cluster, lambda c: {"spec": {"taints": [
                t for t in (c.get("spec") or {}).get("taints") or [] if keep(t)]}})

    def set_conditions(self, cluster: str, **statuses: str) -> None:
        """Set custom conditions (``NetworkReady="False"``) on the Cluster status, keeping every other one: a
        merge patch replaces the whole list, so it is read and written back (with the resourceVersion)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

        def change(c: dict[str, Any]) -> dict[str, Any]:
            conditions = [dict(x) for x in (c.get("status") or {}).get("conditions") or []]
            for ctype, status in statuses.items():
                mine = {"type": ctype, "status": status, "reason": f"E2E{ctype}{status}",
                        "message": f"set by the e2e test: {ctype}={status}", "lastTransitionTime": now}
                for i, x in enumerate(conditions):
                    if x.get("type") == ctype:
                        if x.get("status") == status:
                            mine["lastTransitionTime"] = x.get("lastTransitionTime", now)
                        conditions[i] = mine
                        break
                else:
                    conditions.append(mine)
            return {"status": {"conditions": conditions}}

        self._patch_cluster(cluster, change, status=True)

    def drop_conditions(self, cluster: str, *types: str) -> None:
        if not any(x.get("type") in types for x in (self.cluster(cluster).get("status") or {}).get("conditions")
                   or []):
            return
        self._patch_cluster(cluster, lambda c: {"status": {"conditions": [
            x for x in (c.get("status") or {}).get("conditions") or [] if x.get("type") not in types]}},
            status=True)

    def condition_status(self, cluster: str, ctype: str) -> str | None:
        for x in (self.cluster(cluster).get("status") or {}).get("conditions") or []:
            if x.get("type") == ctype:
                return str(x.get("status"))
        return None

    def events(self, kind: str, name: str, reason: str, namespace: str = NS) -> list[dict[str, Any]]:
        out = self.cp.run("get", "events", "-n", namespace, "--field-selector",
                          f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}",
                          "-o", "json").stdout
        return list(json.loads(out).get("items") or [])

    def delete(self, *objects: str, namespace: str | None = NS) -> None:
        """``kubectl delete`` the objects (``kind/name``) that exist, without waiting for the members."""
        for obj in objects:
            args = ["delete", obj, "--ignore-not-found", "--wait=false"] + (["-n", namespace] if namespace else [])
            self.cp.run(*args, check=False)


def has_taint(taints: list[dict[str, Any]], key: str, effect: str) -> bool:
    return any(t.get("key") == key and t.get("effect") == effect for t in taints)


def image_of(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def placed_in_one(p: Env, name: str, healthy: bool | None = None, status_key: str | None = None) -> str:
    """The one member ``name`` is scheduled to and present in (its binding carries no eviction task yet);
    optionally once its health there is reported, and once a field of its status is collected."""
    rb = p.rb(name)
    clusters = [c["name"] for c in rb["spec"].get("clusters") or []]
    assert len(clusters) == 1, f"{name}: scheduled to {clusters}"
    assert not rb["spec"].get("gracefulEvictionTasks"), rb["spec"].get("gracefulEvictionTasks")
    member = clusters[0]
    assert sorted(p.where(name)) == [member], f"{name} is in {sorted(p.where(name))}, scheduled to {member}"
    items = {i["clusterName"]: i for i in (rb.get("status") or {}).get("aggregatedStatus") or []}
    if healthy is not None:
        want = "Healthy" if healthy else "Unhealthy"
        assert items.get(member, {}).get("health") == want, f"{name}: aggregatedStatus {list(items.values())}"
    if status_key is not None:
        assert status_key in (items.get(member, {}).get("status") or {}), f"{name}: {list(items.values())}"
    return member


def moved_to(p: Env, name: str, old: str) -> str:
    """The binding targets exactly one cluster, not ``old`` (Karmada's "rescheduled to other available cluster")."""
    clusters = p.rb_clusters(name)
    assert len(clusters) == 1 and clusters[0] != old, f"{name}: scheduled to {clusters} (evicted from {old})"
    return clusters[0]


def gone_from(p: Env, name: str, member: str) -> None:
    assert p.member_get(member, "deployments", name) is None, f"{name} still in {member}"


# ----------------------------------------------------------------------------------------------- the fixture


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with contextlib.ExitStack() as stack:
        p = start_control_plane(stack, tmp_path_factory.mktemp("karmada-scenarios"), MEMBERS, Env)
        p.start_members("members", "--count", "2")
        p.wait_members_up()
        p.join_members()
        # failover settings are the defaults (D1); only the probe timings are short
        p.start_controller_manager("--cluster-status-update-frequency", "0.5s", "--cluster-success-threshold", "1s",
                                   "--cluster-failure-threshold", "1s")
        p.wait_clusters_ready()
        yield p


@pytest.fixture
def clean(env: Env) -> Iterator[Env]:
    """Each scenario starts with both clusters Ready and untainted (what the previous one cleaned up)."""
    for m in MEMBERS:
        env.eventually(lambda m=m: cluster_ready(env, m), f"cluster {m} Ready and untainted", f"cluster {m}")
    yield env


# ----------------------------------------------------------------------------------------------- cluster failover


def test_scenario_1_deployment_failover_testing(clean: Env) -> None:
    """Scenario 1: nil failover behavior, so the purge mode is the flag's (Gracefully by default). A NoExecute
    ``not-ready`` taint on the chosen cluster, tolerated for 2 s, moves the workload to the other cluster; once the
    taint is removed the Deployment is gone from the formerly tainted cluster."""
    p, name, tol = clean, "s1-failover", 2
    taint = {"key": NOT_READY, "effect": "NoExecute"}
    p.apply(name, docs(propagation_policy(name, one_of_two([no_execute_toleration(NOT_READY, tol)])),
                       deployment(name)))
    tainted = False
    try:
        p.applied(name)
        old = p.eventually(lambda: placed_in_one(p, name, healthy=True), f"{name} running in one member",
                           f"rb {name}-deployment -n {NS}")
        new = p.other(old)
        t0 = time.time()
        p.add_taint(old, taint)
        tainted = True
        p.eventually(lambda: moved_to(p, name, old), f"{name} rescheduled away from {old}",
                     f"rb {name}-deployment -n {NS}", f"cluster {old}")
        assert time.time() - t0 >= tol - SECOND_PRECISION, "evicted before the toleration expired"
        p.eventually(lambda: p.where(name)[new], f"{name} in {new}", f"rb {name}-deployment -n {NS}")

        p.remove_taints(old, taint)
        p.eventually(lambda: gone_from(p, name, old), f"{name} gone from the formerly tainted {old}",
                     f"rb {name}-deployment -n {NS}")
        assert p.rb_clusters(name) == [new]
        assert p.member_get(new, "deployments", name) is not None
    finally:
        if tainted:
            p.remove_taints(old, taint)
        p.delete(f"deployment/{name}", f"pp/{name}")


def test_scenario_2_taint_cluster_with_noexecute_taint_gracefully(clean: Env) -> None:
    """Scenario 2: ``failover.cluster.purgeMode: Gracefully``, ``fail-test`` tolerated for 3 s. The workload moves; the
    graceful-eviction controller removes the task once the new copy is Healthy and says so with an
    ``EvictWorkloadFromClusterSucceed`` event on the Deployment; after the taint is removed the Deployment is gone
    from the old cluster."""
    p, name, tol = clean, "s2-gracefully", 3
    taint = {"key": "fail-test", "effect": "NoExecute"}
    p.apply(name, docs(propagation_policy(name, one_of_two([no_execute_toleration("fail-test", tol)]),
                                          failover={"cluster": {"purgeMode": "Gracefully"}}),
                       deployment(name)))
    tainted = False
    try:
        p.applied(name)
        old = p.eventually(lambda: placed_in_one(p, name, healthy=True), f"{name} running in one member",
                           f"rb {name}-deployment -n {NS}")
        new = p.other(old)
        t0 = time.time()
        p.add_taint(old, taint)
        tainted = True
        p.eventually(lambda: moved_to(p, name, old), f"{name} rescheduled away from {old}",
                     f"rb {name}-deployment -n {NS}", f"cluster {old}")
        assert time.time() - t0 >= tol - SECOND_PRECISION, "evicted before the toleration expired"

        def evict_succeeded() -> None:
            events = p.events("Deployment", name, "EvictWorkloadFromClusterSucceed")
            assert [e["message"] for e in events] == [f"Evict from cluster {old} succeed."], events
            assert events[0]["type"] == "Normal"

        p.eventually(evict_succeeded, f"EvictWorkloadFromClusterSucceed on deployment {name}",
                     f"rb {name}-deployment -n {NS}")
        assert not p.rb(name)["spec"].get("gracefulEvictionTasks")
        assert p.where(name)[new]["status"].get("readyReplicas") == 2

        p.remove_taints(old, taint)
        p.eventually(lambda: gone_from(p, name, old), f"{name} gone from {old}", f"rb {name}-deployment -n {NS}")
        assert p.rb_clusters(name) == [new]
    finally:
        if tainted:
            p.remove_taints(old, taint)
        p.delete(f"deployment/{name}", f"pp/{name}")


def test_scenario_3_taint_cluster_with_noexecute_taint_directly_with_state_preservation(clean: Env) -> None:
    """Scenario 3: ``failover.cluster.purgeMode: Directly`` with ``statePreservation {test-alias: {.replicas}}`` and a
    never-Ready image (so the task, and hence the injection, persists). The workload moves, the new member copy
    carries ``test-alias`` (the old copy's ``.replicas``), the old copy no longer exists, and the two copies were
    never seen at the same time (Directly deletes the old one first)."""
    p, name, tol = clean, "s3-directly", 3
    taint = {"key": "fail-test", "effect": "NoExecute"}
    p.apply(name, docs(
        propagation_policy(name, one_of_two([no_execute_toleration("fail-test", tol)]), failover={"cluster": {
            "purgeMode": "Directly",
            "statePreservation": {"rules": [{"aliasLabelName": ALIAS, "jsonPath": "{.replicas}"}]}}}),
        deployment(name, image=FAKE_IMAGE)))
    tainted = False
    try:
        p.applied(name)
        # the state is extracted from the status the old cluster reported: wait until it is collected
        old = p.eventually(lambda: placed_in_one(p, name, status_key="replicas"),
                           f"{name} in one member with its status collected", f"rb {name}-deployment -n {NS}")
        new = p.other(old)
        t0 = time.time()
        p.add_taint(old, taint)
        tainted = True
        p.eventually(lambda: moved_to(p, name, old), f"{name} rescheduled away from {old}",
                     f"rb {name}-deployment -n {NS}", f"cluster {old}")
        assert time.time() - t0 >= tol - SECOND_PRECISION, "evicted before the toleration expired"
        both: list[list[str]] = []

        def injected() -> None:
            found = p.where(name, first=new)
            if len(found) > 1:
                both.append(sorted(found))
            assert new in found, f"{name} not in {new} yet"
            labels = found[new]["metadata"].get("labels") or {}
            assert labels.get(ALIAS) == "2", f"{new}: labels {labels}"
            assert old not in found, f"{name} still in {old}"

        p.eventually(injected, f"{name} only in {new}, labelled {ALIAS}=2", f"rb {name}-deployment -n {NS}")
        assert both == [], f"old and new copies of {name} existed at once: {both}"
        tasks = p.rb(name)["spec"].get("gracefulEvictionTasks") or []
        assert [(t["fromCluster"], t.get("purgeMode"), t.get("preservedLabelState")) for t in tasks] == \
            [(old, "Directly", {ALIAS: "2"})], tasks
    finally:
        if tainted:
            p.remove_taints(old, taint)
        p.delete(f"deployment/{name}", f"pp/{name}")


# ----------------------------------------------------------------------------------------------- application failover


def test_scenario_4_application_failover_gracefully_when_the_application_comes_back_to_healthy_on_the_new_cluster(
        clean: Env) -> None:
    """Scenario 4: application failover, Gracefully, tolerationSeconds 3, gracePeriodSeconds 30. An OverridePolicy breaks
    the image only in the current cluster; the workload moves, becomes Healthy in the other cluster, so the task is
    removed (long before the grace period) and the Deployment disappears from the broken cluster."""
    p, name, tol, grace = clean, "s4-back-to-healthy", 3, 30
    p.apply(name, docs(propagation_policy(name, one_of_two(), propagateDeps=True,
                                          failover=application_failover(tol, "Gracefully", gracePeriodSeconds=grace)),
                       deployment(name)))
    try:
        p.applied(name)
        old = p.eventually(lambda: placed_in_one(p, name, healthy=True), f"{name} Healthy in one member",
                           f"rb {name}-deployment -n {NS}")
        new = p.other(old)
        t0 = time.time()
        p.cp.run("apply", "-f", "-", input=json.dumps(fake_registry_override(name, [old])))

        def broken() -> None:
            obj = p.member_get(old, "deployments", name)
            assert obj is not None and image_of(obj) == FAKE_IMAGE, f"{old}: {obj and image_of(obj)}"

        p.eventually(broken, f"{name} in {old} with image {FAKE_IMAGE}", f"rb {name}-deployment -n {NS}")
        p.eventually(lambda: gone_from(p, name, old), f"{name} gone from {old}", f"rb {name}-deployment -n {NS}")
        elapsed = time.time() - t0
        assert elapsed < grace, f"removed after {elapsed:.1f}s: by the grace-period timeout, not by health"
        assert moved_to(p, name, old) == new
        obj = p.member_get(new, "deployments", name)
        assert obj is not None and image_of(obj) == IMAGE, obj
        items = (p.rb(name).get("status") or {}).get("aggregatedStatus") or []
        assert [(i["clusterName"], i.get("health")) for i in items] == [(new, "Healthy")], items
    finally:
        p.delete(f"op/{name}", f"deployment/{name}", f"pp/{name}")


def test_scenario_5_application_failover_gracefully_when_the_grace_period_is_reached(clean: Env) -> None:
    """Scenario 5: application failover, Gracefully; gracePeriodSeconds patched down (30 -> 2) below tolerationSeconds
    (4), as Karmada does (10 < 30) so the old copy's timeout comes before the new copy's own failover. An
    OverridePolicy breaks the image in every cluster: the new copy never becomes Healthy, so the old one is
    removed by the timeout, no earlier than gracePeriodSeconds + tolerationSeconds after the override."""
    p, name, tol, grace = clean, "s5-grace-period", 4, 2
    p.apply(name, docs(propagation_policy(name, one_of_two(), propagateDeps=True,
                                          failover=application_failover(tol, "Gracefully", gracePeriodSeconds=30)),
                       deployment(name)))
    try:
        p.applied(name)
        p.cp.run("patch", "pp", name, "-n", NS, "--type=json", "-p", json.dumps(
            [{"op": "replace", "path": "/spec/failover/application/gracePeriodSeconds", "value": grace}]))
        old = p.eventually(lambda: placed_in_one(p, name, healthy=True), f"{name} Healthy in one member",
                           f"rb {name}-deployment -n {NS}")

        def grace_on_binding() -> None:
            application = p.rb(name)["spec"]["failover"]["application"]
            assert application.get("gracePeriodSeconds") == grace, application

        p.eventually(grace_on_binding, f"gracePeriodSeconds {grace} copied to the binding",
                     f"rb {name}-deployment -n {NS}")
        begin = time.time()
        p.cp.run("apply", "-f", "-", input=json.dumps(fake_registry_override(name, list(MEMBERS))))

        def broken() -> None:
            obj = p.member_get(old, "deployments", name)
            assert obj is not None and image_of(obj) == FAKE_IMAGE, f"{old}: {obj and image_of(obj)}"

        p.eventually(broken, f"{name} in {old} with image {FAKE_IMAGE}", f"rb {name}-deployment -n {NS}")
        gone_at: list[float] = []
        timeline: dict[str, Any] = {}

        def gone() -> None:
            rb = p.rb(name)
            since = (rb["metadata"].get("annotations") or {}).get("failover.flotilla.io/unhealthy-since")
            if since:
                timeline.setdefault("unhealthy-since", since)
            for task in rb["spec"].get("gracefulEvictionTasks") or []:
                timeline.setdefault("task", task)
            gone_from(p, name, old)
            gone_at.append(time.time())

        p.eventually(gone, f"{name} gone from {old}", f"rb {name}-deployment -n {NS}")
        elapsed = gone_at[0] - begin
        timeline["override"] = time.strftime("%H:%M:%S", time.gmtime(begin)) + f"{begin % 1:.3f}"[1:]
        # the task's creationTimestamp is a metav1.Time (whole seconds), so its grace period can end up to
        # SECOND_PRECISION early, in Karmada as here
        assert elapsed >= grace + tol - SECOND_PRECISION, \
            f"old copy removed {elapsed:.1f}s after the override (< {grace + tol}s): {timeline}"
    finally:
        p.delete(f"op/{name}", f"deployment/{name}", f"pp/{name}")


def test_scenario_6_application_failover_purge_mode_never(clean: Env) -> None:
    """Scenario 6: application failover, ``purgeMode: Never``, tolerationSeconds 3, a never-Ready image from the start.
    The workload is rescheduled to the other cluster and the Deployment still exists on the original one."""
    p, name, tol = clean, "s6-never", 3
    p.apply(name, docs(propagation_policy(name, one_of_two(), propagateDeps=True,
                                          failover=application_failover(tol, "Never")),
                       deployment(name, image=FAKE_IMAGE)))
    try:
        p.applied(name)
        old = p.eventually(lambda: placed_in_one(p, name, healthy=False), f"{name} Unhealthy in one member",
                           f"rb {name}-deployment -n {NS}")
        new = p.other(old)
        seen: list[set[str]] = []

        def rescheduled() -> None:
            clusters = p.rb_clusters(name)
            assert clusters == [new], f"{name}: scheduled to {clusters}"
            seen.append(set(p.where(name)))
            assert seen[-1] == {old, new}, f"{name} is in {sorted(seen[-1])}"

        p.eventually(rescheduled, f"{name} rescheduled to {new} and still in {old}", f"rb {name}-deployment -n {NS}")
        tasks = p.rb(name)["spec"].get("gracefulEvictionTasks") or []
        assert (tasks[0]["fromCluster"], tasks[0].get("purgeMode"), tasks[0].get("suppressDeletion")) == \
            (old, "Never", True), tasks
        assert p.member_get(old, "deployments", name) is not None, f"{name} removed from {old}"
    finally:
        p.delete(f"deployment/{name}", f"pp/{name}")


def test_scenario_7_application_failover_directly_deletes_the_old_ones_first_then_creates_the_new_ones(
        clean: Env) -> None:
    """Scenario 7: application failover, ``purgeMode: Directly`` with ``statePreservation {test-alias: {.replicas}}``,
    tolerationSeconds 3, a never-Ready image everywhere. The workload moves, the new Deployment carries
    ``test-alias``, the one on the original cluster no longer exists, and both never existed at once."""
    p, name, tol = clean, "s7-directly", 3
    p.apply(name, docs(propagation_policy(name, one_of_two(), propagateDeps=True, failover=application_failover(
        tol, "Directly", statePreservation={"rules": [{"aliasLabelName": ALIAS, "jsonPath": "{.replicas}"}]})),
        deployment(name, image=FAKE_IMAGE)))
    try:
        p.applied(name)
        old = p.eventually(lambda: placed_in_one(p, name, healthy=False, status_key="replicas"),
                           f"{name} Unhealthy in one member", f"rb {name}-deployment -n {NS}")
        new = p.other(old)
        both: list[list[str]] = []

        def injected() -> None:
            found = p.where(name, first=new)
            if len(found) > 1:
                both.append(sorted(found))
            assert new in found, f"{name} not in {new} yet (in {sorted(found)})"
            labels = found[new]["metadata"].get("labels") or {}
            assert labels.get(ALIAS) == "2", f"{new}: labels {labels}"
            assert old not in found, f"{name} still in {old}"

        p.eventually(injected, f"{name} only in {new}, labelled {ALIAS}=2", f"rb {name}-deployment -n {NS}")
        assert both == [], f"old and new copies of {name} existed at once: {both}"
        tasks = p.rb(name)["spec"].get("gracefulEvictionTasks") or []
        assert (tasks[0]["fromCluster"], tasks[0].get("purgeMode"), tasks[0].get("preservedLabelState"),
                tasks[0].get("clustersBeforeFailover")) == (old, "Directly", {ALIAS: "2"}, [old]), tasks
    finally:
        p.delete(f"deployment/{name}", f"pp/{name}")


# ----------------------------------------------------------------------------------------------- other suites


def test_scenario_8_member_cluster_becomes_unreachable_with_cluster_affinities(clean: Env) -> None:
    """Scenario 8: ``clusterAffinities [group1: member1, group2: member2]``, ``not-ready:NoExecute`` tolerated for 2 s.
    Tainting member1 moves the workload to group2: the Deployment appears on member2."""
    p, name, tol = clean, "s8-affinities", 2
    taint = {"key": NOT_READY, "effect": "NoExecute"}
    p.apply(name, docs(propagation_policy(name, {
        "clusterTolerations": [no_execute_toleration(NOT_READY, tol)],
        "clusterAffinities": [{"affinityName": "group1", "clusterNames": ["member1"]},
                              {"affinityName": "group2", "clusterNames": ["member2"]}]}), deployment(name)))
    tainted = False
    try:
        p.applied(name)

        def in_group(member: str, group: str) -> None:
            rb = p.rb(name)
            assert [c["name"] for c in rb["spec"].get("clusters") or []] == [member], rb["spec"].get("clusters")
            assert rb["status"].get("schedulerObservingAffinityName") == group, rb["status"]
            assert p.member_get(member, "deployments", name) is not None, f"{name} not in {member}"

        p.eventually(lambda: in_group("member1", "group1"), f"{name} in member1 (group1)",
                     f"rb {name}-deployment -n {NS}")
        t0 = time.time()
        p.add_taint("member1", taint)
        tainted = True
        p.eventually(lambda: in_group("member2", "group2"), f"{name} in member2 (group2)",
                     f"rb {name}-deployment -n {NS}", "cluster member1")
        assert time.time() - t0 >= tol - SECOND_PRECISION, "evicted before the toleration expired"
    finally:
        if tainted:
            p.remove_taints("member1", taint)
        p.delete(f"deployment/{name}", f"pp/{name}")


def test_scenario_9_deployment_with_cluster_tolerations(clean: Env) -> None:
    """Scenario 9: every cluster tainted ``cluster-toleration.karmada.io=<its name>:NoSchedule``; a policy over all
    clusters tolerating only ``=member1``: the binding is scheduled to exactly [member1]."""
    p, name, key = clean, "s9-tolerations", "cluster-toleration.karmada.io"
    tainted: list[str] = []
    try:
        for m in MEMBERS:
            p.add_taint(m, {"key": key, "value": m, "effect": "NoSchedule"})
            tainted.append(m)
        for m in MEMBERS:
            assert has_taint(p.taints(m), key, "NoSchedule"), p.taints(m)
        time.sleep(1.0)  # as Karmada's test: let the scheduler see the taints before the workload comes
        p.apply(name, docs(propagation_policy(name, {
            "clusterAffinity": {"clusterNames": list(MEMBERS)},
            "clusterTolerations": [{"key": key, "operator": "Equal", "value": "member1", "effect": "NoSchedule"}]}),
            deployment(name)))
        p.applied(name)

        def scheduled() -> None:
            assert p.rb_clusters(name) == ["member1"], p.rb_clusters(name)
            assert sorted(p.where(name)) == ["member1"], sorted(p.where(name))

        p.eventually(scheduled, f"{name} scheduled to exactly [member1]", f"rb {name}-deployment -n {NS}")
        rb = p.rb(name)
        assert condition(rb, "Scheduled")["status"] == "True"
    finally:
        for m in tainted:
            p.remove_taints(m, {"key": key, "effect": "NoSchedule"})
        p.delete(f"deployment/{name}", f"pp/{name}")


# ----------------------------------------------------------------------------------------------- ClusterTaintPolicy


def policy_events(p: Env, cluster: str, policy: str) -> list[dict[str, Any]]:
    """The ``TaintClusterSucceed`` events on the Cluster that name the ClusterTaintPolicy."""
    return [e for e in p.events("Cluster", cluster, "TaintClusterSucceed", namespace="default")
            if f"ClusterTaintPolicy({policy})" in (e.get("message") or "")]


def tainted_with(p: Env, cluster: str, *taints: dict[str, str]) -> None:
    current = p.taints(cluster)
    assert all(has_taint(current, t["key"], t["effect"]) for t in taints), f"{cluster}: taints {current}"


def not_tainted_with(p: Env, cluster: str, *taints: dict[str, str]) -> None:
    current = p.taints(cluster)
    assert not any(has_taint(current, t["key"], t["effect"]) for t in taints), f"{cluster}: taints {current}"


def added_by_policy(p: Env, cluster: str, policy: str, *taints: dict[str, str]) -> None:
    """The taints are on the Cluster and a ``TaintClusterSucceed`` event names the policy and each taint."""
    tainted_with(p, cluster, *taints)
    events = policy_events(p, cluster, policy)
    assert events, f"no TaintClusterSucceed event for ClusterTaintPolicy({policy}) on {cluster}"
    for t in taints:
        assert any(t["key"] in e["message"] and t["effect"] in e["message"] for e in events), events


def cleanup_taint_policy(p: Env, policy: str, cluster: str, conditions: tuple[str, ...],
                         taints: list[dict[str, str]]) -> None:
    """Delete the policy first (deleting it removes no taint), then the conditions and the taints it made."""
    p.delete(f"clustertaintpolicy/{policy}", namespace=None)
    p.drop_conditions(cluster, *conditions)
    p.remove_taints(cluster, *taints)


def test_scenario_10_taint_added_and_removed_upon_single_condition_match(clean: Env) -> None:
    """Scenario 10: a ClusterTaintPolicy for member2 adds ``testing/network-not-ready:NoSchedule`` on ``NetworkReady In
    [False, Unknown]`` and removes it on ``NetworkReady In [True]``. Setting the condition False adds the taint
    (with a ``TaintClusterSucceed`` event); setting it True removes it. The custom condition survives the
    cluster-status controller's own writes of the Cluster status."""
    p, name, cluster = clean, "s10-network", "member2"
    taint = {"key": "testing/network-not-ready", "effect": "NoSchedule"}
    ballast = deployment("s10-ballast", replicas=1)
    ballast["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    p.cp.run("apply", "-f", "-", input=json.dumps(cluster_taint_policy(
        name, cluster, [in_condition("NetworkReady", "False", "Unknown")], [in_condition("NetworkReady", "True")],
        [taint])))
    try:
        p.set_conditions(cluster, NetworkReady="False")
        p.eventually(lambda: added_by_policy(p, cluster, name, taint),
                     f"{cluster} tainted {taint} with a TaintClusterSucceed event", f"cluster {cluster}")

        # make the cluster-status controller write the status (a new workload in the member changes its
        # resourceSummary): the condition it does not own must still be there afterwards
        before = ((p.cluster(cluster).get("status") or {}).get("resourceSummary") or {}).get("allocated")
        p.members[cluster].run("apply", "-f", "-", input=json.dumps(ballast))

        def status_written() -> None:
            status = p.cluster(cluster).get("status") or {}
            allocated = (status.get("resourceSummary") or {}).get("allocated")
            assert allocated != before, f"{cluster}: allocated still {allocated}"

        p.eventually(status_written, f"the cluster-status controller to write {cluster}'s status",
                     f"cluster {cluster}")
        assert p.condition_status(cluster, "NetworkReady") == "False", p.cluster(cluster).get("status")
        assert p.condition_status(cluster, "Ready") == "True"
        tainted_with(p, cluster, taint)

        p.set_conditions(cluster, NetworkReady="True")
        p.eventually(lambda: not_tainted_with(p, cluster, taint), f"{taint} removed from {cluster}",
                     f"cluster {cluster}")
        assert p.condition_status(cluster, "NetworkReady") == "True"
    finally:
        p.members[cluster].run("delete", "deployment", "s10-ballast", "-n", NS, "--ignore-not-found", check=False)
        cleanup_taint_policy(p, name, cluster, ("NetworkReady",), [taint])


def test_scenario_11_taint_added_and_removed_upon_multi_conditions_match(clean: Env) -> None:
    """Scenario 11: a ClusterTaintPolicy for member1 adds ``testing/all-not-ready:NoSchedule`` only when NetworkReady
    **and** StorageReady are in [False, Unknown], and removes it only when both are True. One condition False
    is not enough; both False add the taint (with an event); one True keeps it; both True remove it."""
    p, name, cluster = clean, "s11-all", "member1"
    taint = {"key": "testing/all-not-ready", "effect": "NoSchedule"}
    p.cp.run("apply", "-f", "-", input=json.dumps(cluster_taint_policy(
        name, cluster,
        [in_condition("NetworkReady", "False", "Unknown"), in_condition("StorageReady", "False", "Unknown")],
        [in_condition("NetworkReady", "True"), in_condition("StorageReady", "True")], [taint])))
    try:
        p.set_conditions(cluster, NetworkReady="False")
        time.sleep(1.0)  # the controller reacts within milliseconds; one condition alone must not add the taint
        not_tainted_with(p, cluster, taint)
        assert policy_events(p, cluster, name) == []

        p.set_conditions(cluster, StorageReady="False")
        p.eventually(lambda: added_by_policy(p, cluster, name, taint),
                     f"{cluster} tainted {taint} with a TaintClusterSucceed event", f"cluster {cluster}")

        p.set_conditions(cluster, NetworkReady="True")
        time.sleep(1.0)  # one condition True alone must not remove it
        tainted_with(p, cluster, taint)

        p.set_conditions(cluster, StorageReady="True")
        p.eventually(lambda: not_tainted_with(p, cluster, taint), f"{taint} removed from {cluster}",
                     f"cluster {cluster}")
    finally:
        cleanup_taint_policy(p, name, cluster, ("NetworkReady", "StorageReady"), [taint])


def test_scenario_12_multiple_taints(clean: Env) -> None:
    """Scenario 12: one ClusterTaintPolicy for member2 with ``testing/network-not-ready`` as NoSchedule **and**
    NoExecute (accepted without any flag: D1). NetworkReady False adds both; NetworkReady True removes both."""
    p, name, cluster = clean, "s12-multiple", "member2"
    taints = [{"key": "testing/network-not-ready", "effect": "NoSchedule"},
              {"key": "testing/network-not-ready", "effect": "NoExecute"}]
    p.cp.run("apply", "-f", "-", input=json.dumps(cluster_taint_policy(
        name, cluster, [in_condition("NetworkReady", "False", "Unknown")], [in_condition("NetworkReady", "True")],
        taints)))
    try:
        p.set_conditions(cluster, NetworkReady="False")
        p.eventually(lambda: added_by_policy(p, cluster, name, *taints),
                     f"{cluster} tainted with both {taints}", f"cluster {cluster}")
        no_execute = next(t for t in p.taints(cluster) if t.get("effect") == "NoExecute")
        assert no_execute.get("timeAdded"), no_execute  # what the taint-manager's timers count from

        p.set_conditions(cluster, NetworkReady="True")
        p.eventually(lambda: not_tainted_with(p, cluster, *taints), f"both {taints} removed from {cluster}",
                     f"cluster {cluster}")
    finally:
        cleanup_taint_policy(p, name, cluster, ("NetworkReady",), taints)
