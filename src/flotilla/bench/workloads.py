"""What ``flotilla bench failover`` places: one PropagationPolicy per kind, N stateful workloads (pure data).

Every workload is pinned to ``member1`` by the same placement as ``flotilla demo``: cluster affinities
``primary: [member1]`` then ``fallback: [member2 .. memberM]``, a ``cluster`` spread constraint with
``maxGroups: 1``, no tolerations (an untolerated NoExecute taint evicts at once), ``failover.cluster.purgeMode``
from ``--purge-mode`` and, with ``--state``, a state-preservation rule per kind:

* Deployment and StatefulSet: ``{.replicas}`` (the reflected status) as the label ``bench.flotilla.io/state``;
* FlinkDeployment: ``{ .jobStatus.jobId }`` as ``failover.flink.io/job-id`` (the proposal's rule).

The policies select their workloads by the label ``bench.flotilla.io/run``, so N workloads need only one policy
per kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from flotilla.bench.choices import KIND_NAMES
from flotilla.client import Resource
from flotilla.kube.resources import DEPLOYMENTS, STATEFULSETS
from flotilla.member.flink_crd import FLINK_DEPLOYMENTS as FLINK
from flotilla.member.savepoint_rule import DEFAULT_LABEL as JOB_LABEL

__all__ = [
    "FLINK",
    "KINDS",
    "NAMESPACE",
    "RUN_LABEL",
    "KindSpec",
    "expected_state",
    "kinds_for",
    "policy",
    "workload",
    "workload_kinds",
]

NAMESPACE: Final = "bench"
RUN_LABEL: Final = "bench.flotilla.io/run"
STATE_LABEL: Final = "bench.flotilla.io/state"


@dataclass(frozen=True)
class KindSpec:
    """One workload kind: its API resource, the state rule and the label the state is injected as."""

    name: str  # the --kind value
    resource: Resource
    api_version: str
    json_path: str  # the state-preservation rule (on the reflected status)
    label: str  # aliasLabelName
    status_path: tuple[str, ...]  # where the rule reads, to predict the injected value

    @property
    def kind(self) -> str:
        return self.resource.kind

    def binding_name(self, name: str) -> str:
        """Karmada's binding name for a workload of this kind (``<name>-<kind lower case>``)."""
        return f"{name}-{self.kind.lower()}"


KINDS: Final[dict[str, KindSpec]] = {
    "deployment": KindSpec("deployment", DEPLOYMENTS, "apps/v1", "{.replicas}", STATE_LABEL, ("replicas",)),
    "statefulset": KindSpec("statefulset", STATEFULSETS, "apps/v1", "{.replicas}", STATE_LABEL, ("replicas",)),
    "flink": KindSpec("flink", FLINK, "flink.apache.org/v1beta1", "{ .jobStatus.jobId }", JOB_LABEL,
                      ("jobStatus", "jobId")),
}
assert tuple(KINDS) == KIND_NAMES  # the --kind words, known without importing this module


def kinds_for(choice: str) -> list[KindSpec]:
    """The kinds of ``--kind`` (``mix``: all three, in turn)."""
    if choice == "mix":
        return list(KINDS.values())
    return [KINDS[choice]]


def workload_kinds(choice: str, count: int) -> list[KindSpec]:
    """The kind of each of ``count`` workloads: ``mix`` takes the kinds in turn (deployment, statefulset, flink)."""
    kinds = kinds_for(choice)
    return [kinds[i % len(kinds)] for i in range(count)]


def workload_name(index: int) -> str:
    return f"w{index:05d}"


def policy(spec: KindSpec, members: list[str], *, purge_mode: str, state: bool, run: str) -> dict[str, Any]:
    """The PropagationPolicy that pins every workload of ``spec``'s kind to ``members[0]``."""
    cluster_failover: dict[str, Any] = {"purgeMode": purge_mode}
    if state:
        cluster_failover["statePreservation"] = {"rules": [{"aliasLabelName": spec.label,
                                                            "jsonPath": spec.json_path}]}
    affinities = [{"affinityName": "primary", "clusterNames": [members[0]]}]
    if len(members) > 1:
        affinities.append({"affinityName": "fallback", "clusterNames": list(members[1:])})
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": f"bench-{spec.name}", "namespace": NAMESPACE},
        "spec": {
            "resourceSelectors": [{"apiVersion": spec.api_version, "kind": spec.kind,
                                   "labelSelector": {"matchLabels": {RUN_LABEL: run}}}],
            "placement": {
                "clusterAffinities": affinities,
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
            },
            "failover": {"cluster": cluster_failover},
        },
    }


def workload(spec: KindSpec, name: str, run: str) -> dict[str, Any]:
    """A small, healthy workload of ``spec``'s kind (one replica; a Flink job of parallelism 1)."""
    meta = {"name": name, "namespace": NAMESPACE, "labels": {RUN_LABEL: run, "app": name}}
    if spec.name == "flink":
        return {"apiVersion": spec.api_version, "kind": spec.kind, "metadata": meta,
                "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                         "jobManager": {"resource": {"memory": "1024m", "cpu": 0.5}},
                         "taskManager": {"resource": {"memory": "1024m", "cpu": 0.5}},
                         "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 1,
                                 "upgradeMode": "last-state"}}}
    pod_spec = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}
    body: dict[str, Any] = {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}
    if spec.name == "statefulset":
        body["serviceName"] = name
    return {"apiVersion": spec.api_version, "kind": spec.kind, "metadata": meta, "spec": body}


def expected_state(spec: KindSpec, reflected_status: Any) -> str | None:
    """The label value the state rule should produce from a reflected status (None: not there yet).

    Mirrors the JSONPath printing of the two rules used here: a number or a string printed as it is."""
    value: Any = reflected_status
    for key in spec.status_path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if value is None or value == "" or isinstance(value, (dict, list)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
