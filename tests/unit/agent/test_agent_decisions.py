"""The agent's pure decisions: which clusters a process serves, the Cluster it registers or adopts, its Lease,
and the Works a recovery purge may decide from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from flotilla.agent.lease import lease_body, micro_time, renew_interval, renewed_lease
from flotilla.agent.registration import RegistrationError, adoption_patch, cluster_body
from flotilla.agent.runtime import AgentConfig
from flotilla.cluster.scope import cluster_field_selector, execution_namespace, serves_cluster
from flotilla.failover.fencing import recovery_works


def cluster(name: str, mode: str, **spec: object) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"syncMode": mode, **spec}}


def test_controller_manager_serves_push_clusters_and_skips_pull_ones() -> None:
    assert serves_cluster(cluster("a", "Push"), None)
    assert not serves_cluster(cluster("a", "Pull"), None)


def test_agent_serves_only_its_own_pull_cluster() -> None:
    assert serves_cluster(cluster("a", "Pull"), "a")
    assert not serves_cluster(cluster("b", "Pull"), "a")
    assert not serves_cluster(cluster("a", "Push"), "a")  # never driven by both
    assert not serves_cluster(None, "a")


def test_agent_scope_watches_its_execution_namespace_and_its_cluster_only() -> None:
    assert execution_namespace("a") == "karmada-es-a" and execution_namespace(None) is None
    assert cluster_field_selector("a") == "metadata.name=a" and cluster_field_selector(None) == ""


def test_registered_cluster_is_pull_without_secret_and_endpoint_optional() -> None:
    assert cluster_body("a")["spec"] == {"syncMode": "Pull"}
    assert cluster_body("a", "https://m:6443")["spec"] == {"syncMode": "Pull", "apiEndpoint": "https://m:6443"}


def test_adoption_of_an_existing_pull_cluster() -> None:
    assert adoption_patch(cluster("a", "Pull")) is None
    assert adoption_patch(cluster("a", "Pull", apiEndpoint="x"), "y") == {"spec": {"apiEndpoint": "y"}}


@pytest.mark.parametrize(("existing", "says"), [
    (cluster("a", "Push", secretRef={"name": "a"}), "unjoin it first"),
    (cluster("a", "Pull", secretRef={"name": "a"}), "remove spec.secretRef"),
    ({"metadata": {"name": "a", "deletionTimestamp": "2025-01-01T00:00:00Z"}, "spec": {"syncMode": "Pull"}},
     "being deleted"),
])
def test_adoption_refused_with_what_to_do(existing: dict[str, object], says: str) -> None:
    with pytest.raises(RegistrationError, match=says):
        adoption_patch(existing)


def test_lease_renew_time_is_rfc3339_micro_time_in_utc() -> None:
    t = datetime(2025, 1, 2, 3, 4, 5, 600, tzinfo=timezone(timedelta(hours=2)))
    assert micro_time(t) == "2025-01-02T01:04:05.000600Z"
    body = lease_body("a", 40.0, t)
    assert body["metadata"] == {"name": "a", "namespace": "karmada-cluster"}
    assert body["spec"]["holderIdentity"] == "a" and body["spec"]["leaseDurationSeconds"] == 40


def test_lease_renewal_keeps_the_resource_version_and_advances_renew_time() -> None:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    lease = {**lease_body("a", 40.0, t0), "metadata": {"name": "a", "namespace": "karmada-cluster",
                                                        "resourceVersion": "7"}}
    again = renewed_lease(lease, "a", 40.0, t0 + timedelta(seconds=10))
    assert again["metadata"]["resourceVersion"] == "7"
    assert again["spec"]["renewTime"] > lease["spec"]["renewTime"]
    assert renew_interval(40.0, 0.25) == 10.0


def test_agent_config_validation_says_which_flag() -> None:
    assert AgentConfig("a").validate() == []
    errs = AgentConfig("Bad_Name", cluster_lease_renew_interval_fraction=1.5).validate()
    assert any("--cluster-name" in e for e in errs)
    assert any("--cluster-lease-renew-interval-fraction" in e for e in errs)


def test_agent_health_thresholds_default_to_karmadas_30s_and_reach_its_controllers() -> None:
    import argparse

    from flotilla.cli.agent import add_agent_parser, config_from_args

    parser = argparse.ArgumentParser()
    add_agent_parser(parser.add_subparsers())
    base = ["agent", "--karmada-kubeconfig", "cp", "--cluster-name", "edge1"]
    default = config_from_args(parser.parse_args(base)).controller_options()
    assert (default.cluster_success_threshold, default.cluster_failure_threshold) == (30.0, 30.0)
    cfg = config_from_args(parser.parse_args(
        [*base, "--cluster-success-threshold", "2s", "--cluster-failure-threshold", "1500ms"]))
    opts = cfg.controller_options()
    assert (opts.cluster_success_threshold, opts.cluster_failure_threshold, opts.agent_cluster) == (
        2.0, 1.5, "edge1")
    assert any("--cluster-failure-threshold" in e for e in AgentConfig("a", cluster_failure_threshold=-1).validate())


def test_d18_recovery_purge_never_decides_without_a_complete_fresh_list() -> None:
    work = {"metadata": {"name": "w", "namespace": "karmada-es-a"}}
    assert recovery_works(None) is None  # the list failed (403, unreachable)
    assert recovery_works({"metadata": {"continue": "x"}, "items": [work]}) is None  # one page of several
    assert recovery_works({"metadata": {}}) is None  # not a list answer
    assert recovery_works({"metadata": {}, "items": [work]}) == [work]
    assert recovery_works({"metadata": {}, "items": []}) == []  # a complete list that is empty is an answer
