"""Karmada admission plugins in a real API server, driven with the real kubectl."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.apiserver import Kubectl, ServerThread

pytestmark = pytest.mark.kubectl


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """The API server registers Karmada's admission plugins itself (ApiServerConfig.karmada_admission)."""
    srv = ServerThread(tmp_path_factory.mktemp("karmada-admission"), policy_finalizers=True).start()
    yield srv
    srv.stop()


@pytest.fixture
def kubectl(server: ServerThread, tmp_path: Path) -> Kubectl:
    return Kubectl(server.kubeconfig, tmp_path)


def apply(kubectl: Kubectl, manifest: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return kubectl.run("apply", "-f", "-", input=textwrap.dedent(manifest), check=check)


def pp(name: str, spec: str) -> str:
    return f"""
    apiVersion: policy.karmada.io/v1alpha1
    kind: PropagationPolicy
    metadata:
      name: {name}
      namespace: default
    spec:
      resourceSelectors:
        - apiVersion: apps/v1
          kind: Deployment
          name: {name}
{textwrap.indent(textwrap.dedent(spec), "      ")}
    """


def test_defaults_visible_in_kubectl_get(kubectl: Kubectl) -> None:
    apply(
        kubectl,
        pp(
            "defaults",
            """
            propagateDeps: true
            placement:
              spreadConstraints:
                - maxGroups: 1
              replicaScheduling:
                replicaSchedulingType: Divided
            failover:
              application:
                decisionConditions: {}
            """,
        ),
    )
    got = yaml.safe_load(kubectl.run("get", "pp", "defaults", "-n", "default", "-o", "yaml").stdout)
    md, spec = got["metadata"], got["spec"]
    assert md["labels"]["propagationpolicy.karmada.io/permanent-id"]
    assert md["finalizers"] == ["karmada.io/propagation-policy-controller"]
    assert spec["resourceSelectors"][0]["namespace"] == "default"
    assert spec["placement"]["spreadConstraints"] == [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    assert spec["placement"]["replicaScheduling"]["replicaDivisionPreference"] == "Weighted"
    app = spec["failover"]["application"]
    assert app == {"decisionConditions": {"tolerationSeconds": 300}, "purgeMode": "Gracefully", "gracePeriodSeconds": 600}
    assert "clusterTolerations" not in spec["placement"]  # no default tolerations since 2025-06
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["conflictResolution"] == "Abort"

    # a second apply keeps the id (the label is immutable, kubectl apply does not remove it)
    first_id = md["labels"]["propagationpolicy.karmada.io/permanent-id"]
    apply(kubectl, pp("defaults", "propagateDeps: true\nplacement:\n  spreadConstraints:\n    - maxGroups: 2\n"))
    again = yaml.safe_load(kubectl.run("get", "pp", "defaults", "-n", "default", "-o", "yaml").stdout)
    assert again["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"] == first_id


def test_reapplying_an_unchanged_policy_changes_nothing(kubectl: Kubectl) -> None:
    """The mutating defaults run before the generation is decided (as in kube-apiserver): a re-apply whose patch only
    drops a defaulted field (resourceSelectors[].namespace) is a no-op, not a new generation."""
    manifest = pp("same", "placement:\n  clusterAffinity:\n    clusterNames: [member1]\n")
    apply(kubectl, manifest)
    before = yaml.safe_load(kubectl.run("get", "pp", "same", "-n", "default", "-o", "yaml").stdout)
    apply(kubectl, manifest)  # kubectl says "configured": its patch puts back the list without the namespace
    after = yaml.safe_load(kubectl.run("get", "pp", "same", "-n", "default", "-o", "yaml").stdout)
    assert after["metadata"]["generation"] == before["metadata"]["generation"] == 1
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # a merge patch that drops the defaulted namespace leaves the policy as it was
    kubectl.run("patch", "pp", "same", "-n", "default", "--type", "merge", "-p",
                '{"spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "same"}]}}')
    patched = yaml.safe_load(kubectl.run("get", "pp", "same", "-n", "default", "-o", "yaml").stdout)
    assert patched["metadata"]["generation"] == 1
    assert patched["spec"]["resourceSelectors"][0]["namespace"] == "default"


def test_invalid_policy_prints_karmada_field_path(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        pp(
            "invalid",
            """
            placement:
              spreadConstraints:
                - spreadByField: cluster
                  maxGroups: 1
                  minGroups: 2
            failover:
              application:
                decisionConditions:
                  tolerationSeconds: -1
            """,
        ),
        check=False,
    )
    assert proc.returncode != 0
    err = proc.stderr
    assert 'The PropagationPolicy "invalid" is invalid' in err
    assert "spec.placement.spreadConstraints[0]: Invalid value:" in err
    assert "maxGroups lower than minGroups is not allowed" in err
    assert "spec.propagateDeps: Invalid value: false: application failover is set, propagateDeps must be true" in err
    assert (
        "spec.failover.application.decisionConditions.tolerationSeconds: Invalid value: -1: "
        "must be greater than or equal to 0" in err
    )
    assert kubectl.run("get", "pp", "invalid", "-n", "default", check=False).returncode != 0


def test_d3_warning_printed_by_kubectl(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        pp(
            "stateful",
            """
            propagateDeps: true
            placement:
              spreadConstraints:
                - spreadByField: cluster
                  maxGroups: 1
            failover:
              cluster:
                purgeMode: Gracefully
                statePreservation:
                  rules:
                    - aliasLabelName: flink.apache.org/job-id
                      jsonPath: "{ .jobStatus.jobId }"
            """,
        ),
    )
    assert "Warning: spec.failover.cluster.statePreservation: the preserved state is injected only with purgeMode Directly" in proc.stderr
    assert "propagationpolicy.policy.karmada.io/stateful created" in proc.stdout


def test_d3_warning_for_multi_cluster_placement(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        pp(
            "stateful-dup",
            """
            placement:
              clusterAffinity:
                clusterNames: [member1, member2]
            failover:
              cluster:
                purgeMode: Directly
                statePreservation:
                  rules:
                    - aliasLabelName: job-id
                      jsonPath: "{.jobStatus.jobId}"
            """,
        ),
    )
    assert "Warning: " in proc.stderr
    assert "injected only when the workload runs in exactly one cluster" in proc.stderr
    assert "purgeMode Directly" not in proc.stderr


def test_d3_jsonpath_syntax_error_rejected(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        pp(
            "bad-jsonpath",
            """
            placement:
              spreadConstraints:
                - maxGroups: 1
            failover:
              cluster:
                purgeMode: Directly
                statePreservation:
                  rules:
                    - aliasLabelName: job-id
                      jsonPath: "{ %health }"
                    - aliasLabelName: job-id
                      jsonPath: "{.jobStatus.jobId}"
            """,
        ),
        check=False,
    )
    assert proc.returncode != 0
    assert 'spec.failover.cluster.statePreservation.rules[0].jsonPath: Invalid value: "{ %health }"' in proc.stderr
    assert 'spec.failover.cluster.statePreservation.rules[1].aliasLabelName: Duplicate value: "job-id"' in proc.stderr


def test_d12_cluster_spread_constraint_without_max_groups_rejected(kubectl: Kubectl) -> None:
    proc = apply(kubectl, pp("no-max", "placement:\n  spreadConstraints:\n    - spreadByField: cluster\n"), check=False)
    assert proc.returncode != 0
    assert "spec.placement.spreadConstraints[0].maxGroups: Required value: a cluster spread constraint must set maxGroups" in proc.stderr
    proc = apply(kubectl, pp("zero-max", "placement:\n  spreadConstraints:\n    - maxGroups: 0\n"), check=False)
    assert proc.returncode != 0
    assert "spec.placement.spreadConstraints[0].maxGroups: Invalid value: 0:" in proc.stderr


def test_d13_cluster_taint_policy_taints_validated(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        """
        apiVersion: policy.karmada.io/v1alpha1
        kind: ClusterTaintPolicy
        metadata:
          name: bad-taints
        spec:
          addOnConditions:
            - conditionType: Ready
              operator: In
              statusValues: ["False", "Unknown"]
          taints:
            - key: "bad key"
              effect: NoExecute
            - key: not-ready
              value: "{oops}"
              effect: PreferNoSchedule
        """,
        check=False,
    )
    assert proc.returncode != 0
    err = proc.stderr
    assert 'spec.taints[0].key: Invalid value: "bad key"' in err
    assert 'spec.taints[1].value: Invalid value: "{oops}"' in err
    assert 'spec.taints[1].effect: Unsupported value: "PreferNoSchedule": supported values: "NoSchedule", "NoExecute"' in err

    ok = apply(
        kubectl,
        """
        apiVersion: policy.karmada.io/v1alpha1
        kind: ClusterTaintPolicy
        metadata:
          name: not-ready
        spec:
          addOnConditions:
            - conditionType: Ready
              operator: In
              statusValues: ["False", "Unknown"]
          removeOnConditions:
            - conditionType: Ready
              operator: In
              statusValues: ["True"]
          taints:
            - key: cluster.example.com/not-ready
              effect: NoExecute
        """,
    )
    assert "clustertaintpolicy.policy.karmada.io/not-ready created" in ok.stdout


def test_cluster_taints_and_time_added(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        """
        apiVersion: cluster.karmada.io/v1alpha1
        kind: Cluster
        metadata:
          name: member1
        spec:
          syncMode: Push
          apiEndpoint: https://172.18.0.3:6443
          taints:
            - key: fence
              effect: NoExecute
        """,
    )
    assert "created" in proc.stdout
    got = yaml.safe_load(kubectl.run("get", "clusters.cluster.karmada.io", "member1", "-o", "yaml").stdout)
    assert got["spec"]["taints"][0]["timeAdded"]
    assert len(got["spec"]["resourceModels"]) == 9

    bad = apply(
        kubectl,
        """
        apiVersion: cluster.karmada.io/v1alpha1
        kind: Cluster
        metadata:
          name: member2
        spec:
          syncMode: Push
          apiEndpoint: 172.18.0.4:6443
          taints:
            - {key: a, effect: NoSchedule}
            - {key: a, effect: NoSchedule, value: x}
        """,
        check=False,
    )
    assert bad.returncode != 0
    assert "spec.apiEndpoint: Invalid value:" in bad.stderr
    assert "first path segment in URL cannot contain colon" in bad.stderr
    assert "spec.taints[1]: Duplicate value:" in bad.stderr
    assert "taints must be unique by key and effect pair" in bad.stderr


def ric(name: str, hook: str, body: dict, *, api_version: str = "flink.apache.org/v1beta1",
        kind: str = "FlinkDeployment") -> str:
    """A ResourceInterpreterCustomization manifest with one hook."""
    return yaml.safe_dump({"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
                           "metadata": {"name": name},
                           "spec": {"target": {"apiVersion": api_version, "kind": kind},
                                    "customizations": {hook: body}}})


def test_resource_interpreter_customization(kubectl: Kubectl) -> None:
    def health(name: str, script: str) -> str:
        return ric(name, "healthInterpretation", {"luaScript": script})

    ok = apply(kubectl, health("flink-health", "function InterpretHealth(observedObj)\n  return true\nend\n"))
    assert "created" in ok.stdout
    broken = apply(kubectl, health("flink-broken", "function InterpretHealth(observedObj\n  return true\nend\n"), check=False)
    assert broken.returncode != 0
    assert "spec.customizations.healthInterpretation.luaScript: Invalid value: InterpreterOperation(InterpretHealth) Lua script error:" in broken.stderr
    misnamed = apply(kubectl, health("flink-misnamed", "function interpretHealth(observedObj)\n  return true\nend\n"), check=False)
    assert "does not define the global function InterpretHealth" in misnamed.stderr
    conflict = apply(kubectl, health("flink-other", "function InterpretHealth(o)\n  return false\nend\n"), check=False)
    assert conflict.returncode != 0
    assert (
        "conflicting with InterpreterOperation(InterpretHealth) of existing "
        "ResourceInterpreterCustomization(flink-health)" in conflict.stderr
    )
    # updating the first one is no conflict with itself
    assert apply(kubectl, health("flink-health", "function InterpretHealth(o)\n  return o ~= nil\nend\n")).returncode == 0


def test_d20_restore_state_customization_accepted_and_checked(kubectl: Kubectl) -> None:
    def restore(name: str, script: object) -> str:
        return ric(name, "restoreState", {"luaScript": script}, api_version="example.io/v1", kind="Ledger")

    script = "function RestoreState(desiredObj, restore)\n  return desiredObj\nend\n"
    ok = apply(kubectl, restore("ledger-restore", script))
    assert "created" in ok.stdout
    stored = yaml.safe_load(kubectl.run("get", "resourceinterpretercustomizations", "ledger-restore", "-o",
                                        "yaml").stdout)
    assert stored["spec"]["customizations"]["restoreState"]["luaScript"].startswith("function RestoreState(")
    not_a_string = apply(kubectl, restore("ledger-number", 42), check=False)
    assert not_a_string.returncode != 0
    assert 'ResourceInterpreterCustomization "ledger-number" is invalid' in not_a_string.stderr  # a 422
    assert ("spec.customizations.restoreState.luaScript: Invalid value: \"integer\": "
            "spec.customizations.restoreState.luaScript in body must be of type string") in not_a_string.stderr
    misnamed = apply(kubectl, restore("ledger-misnamed", script.replace("RestoreState(", "Restore(")), check=False)
    assert misnamed.returncode != 0
    assert ("spec.customizations.restoreState.luaScript: Invalid value: InterpreterOperation(RestoreState) Lua "
            "script error: the script does not define the global function RestoreState") in misnamed.stderr
    conflict = apply(kubectl, restore("ledger-other", script), check=False)
    assert conflict.returncode != 0
    assert ("conflicting with InterpreterOperation(RestoreState) of existing "
            "ResourceInterpreterCustomization(ledger-restore)") in conflict.stderr
    for name in ("ledger-number", "ledger-misnamed", "ledger-other"):
        assert kubectl.run("get", "resourceinterpretercustomizations", name, check=False).returncode != 0


def test_cluster_propagation_policy_and_override_policy(kubectl: Kubectl) -> None:
    ok = apply(
        kubectl,
        """
        apiVersion: policy.karmada.io/v1alpha1
        kind: ClusterPropagationPolicy
        metadata:
          name: namespaces
        spec:
          resourceSelectors:
            - apiVersion: v1
              kind: Namespace
        """,
    )
    assert "created" in ok.stdout
    got = yaml.safe_load(kubectl.run("get", "cpp", "namespaces", "-o", "yaml").stdout)
    assert got["metadata"]["labels"]["clusterpropagationpolicy.karmada.io/permanent-id"]
    assert got["metadata"]["finalizers"] == ["karmada.io/cluster-propagation-policy-controller"]

    bad = apply(
        kubectl,
        """
        apiVersion: policy.karmada.io/v1alpha1
        kind: OverridePolicy
        metadata:
          name: replicas
          namespace: default
        spec:
          resourceSelectors:
            - apiVersion: apps/v1
              kind: Deployment
              namespace: other
          overrideRules:
            - targetCluster:
                clusterNames: [member1]
              overriders:
                plaintext:
                  - path: spec/replicas
                    operator: replace
                    value: 3
        """,
        check=False,
    )
    assert bad.returncode != 0
    assert (
        'spec.overrideRules[0].overriders.plaintext[0].path: Invalid value: "spec/replicas": '
        'JSON pointer must be empty or start with a "/"' in bad.stderr
    )
    assert (
        'spec.resourceSelectors[0].namespace: Invalid value: "other": namespace of resource selector must be the '
        "same as the namespace of the policy" in bad.stderr
    )


# ---------------------------------------------------------------------------------------------- failover rules
# (the full table of failover rules is tests/unit/api/test_failover_admission_rules.py; these rows go
# through the real server and kubectl, which prints the 422 causes and the Warning headers)


def test_failover_rules_print_karmadas_messages(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        pp(
            "karmada-messages",
            """
            placement:
              clusterTolerations:
                - key: cluster.karmada.io/not-ready
                  operator: Lt
                  value: "5"
              spreadConstraints:
                - spreadByField: cluster
                  maxGroups: 1
                - spreadByField: cluster
                  maxGroups: 2
            failover:
              application:
                decisionConditions:
                  tolerationSeconds: 60
                purgeMode: Directly
                gracePeriodSeconds: 30
              cluster:
                purgeMode: Directly
                statePreservation:
                  rules:
                    - aliasLabelName: -job-id
                      jsonPath: "{.jobStatus.jobId}"
            """,
        ),
        check=False,
    )
    assert proc.returncode != 0
    err = proc.stderr
    assert 'The PropagationPolicy "karmada-messages" is invalid' in err
    for line in (  # V11, V17, V4, V6, V10: Karmada's field paths, values and details
        'spec.placement.clusterTolerations[0].operator: Unsupported value: "Lt": supported values: "", "Exists", '
        '"Equal"',
        'spec.placement.spreadConstraints: Invalid value: [{"spreadByField":"cluster","maxGroups":1,"minGroups":1},'
        '{"spreadByField":"cluster","maxGroups":2,"minGroups":1}]: multiple cluster spread constraints are not allowed',
        "spec.propagateDeps: Invalid value: false: application failover is set, propagateDeps must be true",
        "spec.failover.application.gracePeriodSeconds: Invalid value: 30: only takes effect when purgeMode is "
        "gracefully",
        'spec.failover.cluster.statePreservation.rules[0].aliasLabelName: Invalid value: "-job-id": name part must '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ):
        assert line in err, line
    assert kubectl.run("get", "pp", "karmada-messages", "-n", "default", check=False).returncode != 0


def test_removed_purge_modes_rejected_by_the_schema(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        pp(
            "immediately",
            """
            propagateDeps: true
            failover:
              application:
                decisionConditions: {}
                purgeMode: Immediately
              cluster:
                purgeMode: Never
            """,
        ),
        check=False,
    )
    assert proc.returncode != 0
    assert ('spec.failover.application.purgeMode: Unsupported value: "Immediately": supported values: "Directly", '
            '"Gracefully", "Never"') in proc.stderr
    assert 'spec.failover.cluster.purgeMode: Unsupported value: "Never": supported values: "Directly", "Gracefully"' \
        in proc.stderr


def test_d3_warnings_name_the_purge_mode_and_the_placement(kubectl: Kubectl) -> None:
    proc = apply(
        kubectl,
        pp(
            "stateful-app",
            """
            propagateDeps: true
            placement:
              spreadConstraints:
                - spreadByField: cluster
                  maxGroups: 2
            failover:
              application:
                decisionConditions:
                  tolerationSeconds: 60
                purgeMode: Never
                statePreservation:
                  rules:
                    - aliasLabelName: flink.apache.org/job-id
                      jsonPath: "{.jobStatus.jobId}"
            """,
        ),
    )
    assert "propagationpolicy.policy.karmada.io/stateful-app created" in proc.stdout
    assert (
        "Warning: spec.failover.application.statePreservation: the preserved state is injected only with purgeMode "
        "Directly; with purgeMode Never it is extracted but never reaches the new workload (set "
        "spec.failover.application.purgeMode: Directly)" in proc.stderr
    )
    assert (
        "Warning: spec.failover.application.statePreservation: the preserved state is injected only when the "
        "workload runs in exactly one cluster, but its cluster spread constraint allows up to 2 clusters (add the "
        "spread constraint {spreadByField: cluster, maxGroups: 1})" in proc.stderr
    )


def test_eviction_task_constraints_of_the_binding_crd(kubectl: Kubectl) -> None:
    def binding(reason: str, purge_mode: str = "Gracefully") -> str:
        return f"""
        apiVersion: work.karmada.io/v1alpha2
        kind: ResourceBinding
        metadata:
          name: flink-flinkdeployment
          namespace: default
        spec:
          resource:
            apiVersion: flink.apache.org/v1beta1
            kind: FlinkDeployment
            name: flink
          gracefulEvictionTasks:
            - fromCluster: member1
              producer: TaintManager
              reason: "{reason}"
              purgeMode: {purge_mode}
        """

    bad = apply(kubectl, binding("Taint Untolerated", "Immediately"), check=False)
    assert bad.returncode != 0
    task = "spec.gracefulEvictionTasks[0]"
    assert (f'{task}.reason: Invalid value: "Taint Untolerated": {task}.reason in body should match '
            "'^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'") in bad.stderr
    assert (f'{task}.purgeMode: Unsupported value: "Immediately": supported values: "Directly", "Gracefully", '
            '"Never"') in bad.stderr
    long = apply(kubectl, binding("R" * 33), check=False)
    assert f"{task}.reason: Too long: may not be more than 32 bytes" in long.stderr
    ok = apply(kubectl, binding("TaintUntolerated"))
    assert "resourcebinding.work.karmada.io/flink-flinkdeployment created" in ok.stdout


def test_t1_no_execute_policy_refused_when_the_server_disallows_it(tmp_path_factory: pytest.TempPathFactory,
                                                                 tmp_path: Path) -> None:
    """D1/T1: with ``allow_no_execute_taint_policy=False`` the server answers as Karmada's default webhook does."""
    srv = ServerThread(tmp_path_factory.mktemp("no-execute-refused"), allow_no_execute_taint_policy=False).start()
    try:
        kubectl = Kubectl(srv.kubeconfig, tmp_path)

        def policy(name: str, effect: str) -> str:
            return f"""
            apiVersion: policy.karmada.io/v1alpha1
            kind: ClusterTaintPolicy
            metadata:
              name: {name}
            spec:
              addOnConditions:
                - conditionType: Ready
                  operator: In
                  statusValues: ["False", "Unknown"]
              taints:
                - key: cluster.karmada.io/not-ready
                  effect: {effect}
            """

        refused = apply(kubectl, policy("evict", "NoExecute"), check=False)
        assert refused.returncode != 0
        assert (
            'The ClusterTaintPolicy "evict" is invalid: spec.taints[0]: Forbidden: Configuring taint with NoExecute '
            "effect is not allowed, this capability must be explicitly enabled by administrators through "
            "command-line flags" in refused.stderr
        )
        ok = apply(kubectl, policy("keep-away", "NoSchedule"))
        assert "clustertaintpolicy.policy.karmada.io/keep-away created" in ok.stdout
    finally:
        srv.stop()


def test_d20_malformed_restore_annotations_rejected_naming_the_annotation(kubectl: Kubectl) -> None:
    manifest = pp("bad-restore", """
        placement:
          clusterAffinity:
            clusterNames: [m1]
        """).replace("  namespace: default\n", """  namespace: default
      annotations:
        restore.flotilla.io/max-checkpoint-age: ten minutes
        restore.flotilla.io/native: "maybe"
""", 1)
    proc = apply(kubectl, manifest, check=False)
    assert proc.returncode != 0
    assert "metadata.annotations[restore.flotilla.io/max-checkpoint-age]: Invalid value: \"ten minutes\"" in proc.stderr
    assert "metadata.annotations[restore.flotilla.io/native]: Invalid value: \"maybe\"" in proc.stderr
    good = manifest.replace("ten minutes", "10m").replace('"maybe"', '"false"')
    assert apply(kubectl, good, check=False).returncode == 0
