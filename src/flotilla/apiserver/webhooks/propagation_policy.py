"""PropagationPolicy and ClusterPropagationPolicy admission: Karmada's mutating and validating
webhooks, plus Flotilla's D3 (state-preservation checks) and D12 (no empty ``cluster`` spread), listed in
docs/karmada-compatibility.md.

Defaulting (Karmada's mutating webhook, in its order):
  1. PP only: an empty ``resourceSelectors[].namespace`` becomes the policy's namespace;
  2. spread constraints: ``spreadByField: cluster`` when neither field nor label is set, and
     ``minGroups: 1`` when it is 0;
  3. ``propagateDeps: true`` when a ``multicluster.x-k8s.io/v1alpha1 ServiceImport`` is selected;
  4. Divided replica scheduling: ``replicaDivisionPreference: Weighted`` when empty;
  5. application failover with ``purgeMode: Gracefully``: ``gracePeriodSeconds: 600`` when unset;
  6. on create: the permanent-id label (a fresh UUID) and the policy-controller finalizer.
The CRD defaults the later steps rely on (``tolerationSeconds: 300``, ``purgeMode: Gracefully``,
``replicaSchedulingType: Divided``, ``schedulerName``, ``priority``, ``preemption``,
``conflictResolution``) are applied too, in case the schema defaulting did not run. No default
cluster tolerations are added (Karmada removed them).

Validation: Karmada's ``ValidatePropagationSpec`` with its field paths and messages (its rules, numbered
V1-V18 here and in the admission tests, overflow affinities, workload affinity, suspension, preemption), plus:
  - D12: a ``cluster`` spread constraint must set ``maxGroups`` > 0;
  - D3: each state-preservation ``jsonPath`` must parse as a kubectl JSONPath template, must not
    be empty, and ``aliasLabelName`` must be unique within its block;
  - resource selectors: ``apiVersion``/``kind`` not empty, label selectors valid; cluster-affinity
    label selectors valid; toleration operators and effects among the supported ones.
  - D20, D21 (native restore, savepoints on planned moves): their annotations (``restore.flotilla.io/native``,
    ``.../max-checkpoint-age``, ``.../credentials-secret``, ``.../savepoint-on-move``) must be well formed; the
    field path names the annotation.
Warnings (D3): state preservation with a purge mode other than Directly, or on a placement that
can select more than one cluster (the state is injected only for a one-cluster workload).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from flotilla.api import labels as L
from flotilla.apiserver.admission import Operation
from flotilla.apiserver.schemas import karmada_common as karmada_schemas
from flotilla.apiserver.webhooks.common import (
    GoStruct,
    NoOpPlugin,
    add_finalizer,
    as_dict,
    child,
    default_resource_selector_namespaces,
    duplicate,
    empty_cluster_affinity,
    forbidden,
    invalid,
    label_key_errors,
    metadata,
    not_supported,
    objects_of,
    required,
    set_label,
    spec_unchanged,
    validate_cluster_affinity,
    validate_label_name,
    validate_resource_selectors,
)
from flotilla.failover.restore import validate_restore_annotations
from flotilla.jsonpath import JSONPathSyntaxError, parse
from flotilla.kube.objects import annotations_of, as_int, as_list, as_str, labels_of
from flotilla.kube.validation import Cause

SERVICE_IMPORT_API_VERSION = "multicluster.x-k8s.io/v1alpha1"
SERVICE_IMPORT_KIND = "ServiceImport"
DEFAULT_GRACE_PERIOD_SECONDS = 600
DEFAULT_TOLERATION_SECONDS = 300
SUPPORTED_TOLERATION_OPERATORS = ("", "Exists", "Equal")
SUPPORTED_TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
ONE_CLUSTER_RECIPE = "{spreadByField: cluster, maxGroups: 1}"

# The Go types of the values Karmada prints in its errors (field order and omitempty, see GoStruct).
_SPEC_SCHEMA = karmada_schemas.propagation_spec()
_PLACEMENT_SCHEMA = _SPEC_SCHEMA["properties"]["placement"]
_SUSPENSION_SCHEMA = _SPEC_SCHEMA["properties"]["suspension"]
_SPREAD_CONSTRAINTS_SCHEMA = _PLACEMENT_SCHEMA["properties"]["spreadConstraints"]
_SPREAD_CONSTRAINT_SCHEMA = _SPREAD_CONSTRAINTS_SCHEMA["items"]
_AFFINITIES_SCHEMA = _PLACEMENT_SCHEMA["properties"]["clusterAffinities"]
_OVERFLOW_SCHEMA = _AFFINITIES_SCHEMA["items"]["properties"]["overflowAffinities"]
_WORKLOAD_AFFINITY_SCHEMA = _PLACEMENT_SCHEMA["properties"]["workloadAffinity"]


# ---------------------------------------------------------------------------------------------
# Defaulting
# ---------------------------------------------------------------------------------------------


def default_spread_constraints(constraints: Any) -> None:
    for constraint in as_list(constraints):
        if not isinstance(constraint, dict):
            continue
        if not constraint.get("spreadByLabel") and not constraint.get("spreadByField"):
            constraint["spreadByField"] = "cluster"
        if constraint.get("minGroups") is None or as_int(constraint.get("minGroups")) == 0:
            constraint["minGroups"] = 1


def replica_scheduling_type(placement: dict[str, Any]) -> str:
    """``Placement.ReplicaSchedulingType()``: Duplicated without replicaScheduling; the CRD default is Divided."""
    rs = child(placement, "replicaScheduling")
    if rs is None:
        return "Duplicated"
    return as_str(rs.get("replicaSchedulingType")) or "Divided"


def contains_service_import(selectors: Any) -> bool:
    return any(
        isinstance(s, dict) and s.get("kind") == SERVICE_IMPORT_KIND and s.get("apiVersion") == SERVICE_IMPORT_API_VERSION
        for s in as_list(selectors)
    )


def default_propagation_spec(spec: dict[str, Any], namespace: str) -> None:
    """Karmada's mutating-webhook defaults (and the CRD defaults they depend on), in place."""
    for key, value in (
        ("schedulerName", "default-scheduler"),
        ("priority", 0),
        ("preemption", "Never"),
        ("conflictResolution", "Abort"),
    ):
        if spec.get(key) is None:
            spec[key] = value
    default_resource_selector_namespaces(spec.get("resourceSelectors"), namespace)
    placement = child(spec, "placement")
    if placement is not None:
        default_spread_constraints(placement.get("spreadConstraints"))
    if contains_service_import(spec.get("resourceSelectors")):
        spec["propagateDeps"] = True
    if placement is not None:
        rs = child(placement, "replicaScheduling")
        if rs is not None:
            if not rs.get("replicaSchedulingType"):
                rs["replicaSchedulingType"] = "Divided"
            if rs["replicaSchedulingType"] == "Divided" and not rs.get("replicaDivisionPreference"):
                rs["replicaDivisionPreference"] = "Weighted"
    failover = child(spec, "failover")
    if failover is None:
        return
    application = child(failover, "application")
    if application is not None:
        conditions = child(application, "decisionConditions")
        if conditions is not None and conditions.get("tolerationSeconds") is None:
            conditions["tolerationSeconds"] = DEFAULT_TOLERATION_SECONDS
        if application.get("purgeMode") is None:
            application["purgeMode"] = "Gracefully"
        if application["purgeMode"] == "Gracefully" and application.get("gracePeriodSeconds") is None:
            application["gracePeriodSeconds"] = DEFAULT_GRACE_PERIOD_SECONDS
    cluster = child(failover, "cluster")
    if cluster is not None and cluster.get("purgeMode") is None:
        cluster["purgeMode"] = "Gracefully"


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def overflow_scheduling_allowed(placement: dict[str, Any]) -> bool:
    rs = child(placement, "replicaScheduling")
    if rs is None or rs.get("replicaSchedulingType") != "Divided":
        return False
    preference = rs.get("replicaDivisionPreference")
    if preference == "Aggregated":
        return True
    if preference == "Weighted":
        return bool(as_dict(rs.get("weightPreference")).get("dynamicWeight"))
    return False


def validate_spread_constraints(constraints: Any, path: str) -> list[Cause]:
    """Karmada's ``ValidateSpreadConstraint`` (V13-V18) plus D12."""
    causes: list[Cause] = []
    constraints = as_list(constraints)
    seen_fields: dict[str, bool] = {}  # field -> already reported as duplicated
    for i, constraint in enumerate(constraints):
        if not isinstance(constraint, dict):
            continue
        where = f"{path}[{i}]"
        by_field = as_str(constraint.get("spreadByField"))
        by_label = as_str(constraint.get("spreadByLabel"))
        min_groups = as_int(constraint.get("minGroups")) or 0
        max_groups = as_int(constraint.get("maxGroups")) or 0
        value = GoStruct(constraint, _SPREAD_CONSTRAINT_SCHEMA)
        if by_field and by_label:
            causes.append(invalid(where, value, "spreadByLabel should not co-exist with spreadByField"))
        if min_groups < 0:
            causes.append(invalid(where, value, "minGroups lower than 0 is not allowed"))
        if max_groups < 0:
            causes.append(invalid(where, value, "maxGroups lower than 0 is not allowed"))
        if 0 < max_groups < min_groups:
            causes.append(invalid(where, value, "maxGroups lower than minGroups is not allowed"))
        if by_field:
            if by_field in seen_fields:
                if not seen_fields[by_field]:
                    causes.append(invalid(path, GoStruct(constraints, _SPREAD_CONSTRAINTS_SCHEMA),
                                          f"multiple {by_field} spread constraints are not allowed"))
                    seen_fields[by_field] = True
            else:
                seen_fields[by_field] = False
        raw_max = constraint.get("maxGroups")
        if by_field == "cluster" and (raw_max is None or as_int(raw_max) == 0):  # D12
            detail = (
                "a cluster spread constraint must set maxGroups, the most clusters to select (e.g. 1 to keep "
                "the workload in a single cluster); with maxGroups unset or 0 no cluster is ever selected"
            )
            if raw_max is None:
                causes.append(required(f"{where}.maxGroups", detail))
            else:
                causes.append(invalid(f"{where}.maxGroups", raw_max, detail))
    if seen_fields and "cluster" not in seen_fields:
        causes.append(
            invalid(
                path,
                GoStruct(constraints, _SPREAD_CONSTRAINTS_SCHEMA),
                "the cluster spread constraint must be enabled in one of the constraints in case of SpreadByField "
                "is enabled",
            )
        )
    return causes


def _validate_overflow_affinities(term: dict[str, Any], path: str) -> list[Cause]:
    overflow = term.get("overflowAffinities")
    if overflow is None:
        return []
    causes: list[Cause] = []
    if empty_cluster_affinity(term):
        causes.append(
            invalid(
                f"{path}.overflowAffinities",
                GoStruct(overflow, _OVERFLOW_SCHEMA),
                "overflowAffinities can only be used together with the inline ClusterAffinity",
            )
        )
    names = {as_str(term.get("affinityName"))}
    for j, item in enumerate(as_list(overflow)):
        if not isinstance(item, dict):
            continue
        where = f"{path}.overflowAffinities[{j}]"
        name = as_str(item.get("affinityName"))
        causes.extend(invalid(f"{where}.affinityName", name, m) for m in label_key_errors(name))
        if name in names:
            causes.append(
                invalid(
                    f"{where}.affinityName",
                    name,
                    "overflow affinity name must be unique and must not duplicate the primary group's affinityName",
                )
            )
        else:
            names.add(name)
        causes.extend(validate_cluster_affinity(item, where))
    return causes


def validate_cluster_affinities(terms: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, term in objects_of(terms):
        where = f"{path}[{i}]"
        name = as_str(term.get("affinityName"))
        causes.extend(invalid(where, name, m) for m in label_key_errors(name))
        if name in names:
            causes.append(invalid(path, GoStruct(terms, _AFFINITIES_SCHEMA),
                                  "each affinity term in a policy must have a unique name"))
        else:
            names.add(name)
        causes.extend(validate_cluster_affinity(term, where))
        causes.extend(_validate_overflow_affinities(term, where))
    return causes


def validate_workload_affinity(affinity: Any, path: str) -> list[Cause]:
    if not isinstance(affinity, dict):
        return []
    causes: list[Cause] = []
    keys = {}
    for part in ("affinity", "antiAffinity"):
        term = child(affinity, part)
        if term is not None:
            key = as_str(term.get("groupByLabelKey"))
            keys[part] = key
            causes.extend(invalid(f"{path}.{part}.groupByLabelKey", key, m) for m in label_key_errors(key))
    if len(keys) == 2 and keys["affinity"] == keys["antiAffinity"]:
        causes.append(invalid(path, GoStruct(affinity, _WORKLOAD_AFFINITY_SCHEMA),
                              "affinity and antiAffinity must not use the same groupByLabelKey"))
    return causes


def validate_cluster_tolerations(tolerations: Any, path: str) -> list[Cause]:
    """Karmada rejects Lt/Gt (V11); Flotilla also any other unknown operator and unknown effects."""
    causes: list[Cause] = []
    for i, toleration in objects_of(tolerations):
        operator = toleration.get("operator", "")
        if operator not in SUPPORTED_TOLERATION_OPERATORS:
            causes.append(not_supported(f"{path}[{i}].operator", operator, SUPPORTED_TOLERATION_OPERATORS))
        effect = toleration.get("effect", "")
        if effect and effect not in SUPPORTED_TOLERATION_EFFECTS:
            causes.append(not_supported(f"{path}[{i}].effect", effect, SUPPORTED_TOLERATION_EFFECTS))
    return causes


def validate_placement(placement: dict[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    if placement.get("clusterAffinity") is not None and placement.get("clusterAffinities") is not None:
        causes.append(invalid(path, GoStruct(placement, _PLACEMENT_SCHEMA),
                              "clusterAffinities cannot co-exist with clusterAffinity"))
    allow_overflow = overflow_scheduling_allowed(placement)
    for i, term in enumerate(as_list(placement.get("clusterAffinities"))):
        if isinstance(term, dict) and term.get("overflowAffinities") is not None and not allow_overflow:
            causes.append(
                invalid(
                    f"{path}.clusterAffinities[{i}].overflowAffinities",
                    GoStruct(term["overflowAffinities"], _OVERFLOW_SCHEMA),
                    "overflowAffinities can only be used together with dynamic weight or aggregated scheduling",
                )
            )
    causes.extend(validate_cluster_affinity(placement.get("clusterAffinity"), f"{path}.clusterAffinity"))
    causes.extend(validate_cluster_affinities(placement.get("clusterAffinities"), f"{path}.clusterAffinities"))
    causes.extend(validate_spread_constraints(placement.get("spreadConstraints"), f"{path}.spreadConstraints"))
    causes.extend(validate_workload_affinity(placement.get("workloadAffinity"), f"{path}.workloadAffinity"))
    causes.extend(validate_cluster_tolerations(placement.get("clusterTolerations"), f"{path}.clusterTolerations"))
    weights = as_dict(as_dict(placement.get("replicaScheduling")).get("weightPreference"))
    for i, item in enumerate(as_list(weights.get("staticWeightList"))):
        if isinstance(item, dict):
            where = f"{path}.replicaScheduling.weightPreference.staticWeightList[{i}].targetCluster"
            causes.extend(validate_cluster_affinity(item.get("targetCluster"), where))
    return causes


def validate_state_preservation(preservation: dict[str, Any], path: str) -> list[Cause]:
    """Karmada: aliasLabelName is a label key (V9/V10). D3: jsonPath parses and is not empty; no
    alias is used twice."""
    causes: list[Cause] = []
    first_use: dict[str, int] = {}
    for i, rule in objects_of(preservation.get("rules")):
        where = f"{path}.rules[{i}]"
        alias = rule.get("aliasLabelName")
        if isinstance(alias, str):
            causes.extend(validate_label_name(alias, f"{where}.aliasLabelName"))
            if alias in first_use:
                causes.append(
                    duplicate(
                        f"{where}.aliasLabelName",
                        alias,
                        f"rules[{first_use[alias]}] already writes this label; each rule must use its own aliasLabelName",
                    )
                )
            else:
                first_use[alias] = i
        json_path = rule.get("jsonPath")
        if json_path == "":
            causes.append(required(f"{where}.jsonPath", "a JSONPath template such as '{.jobStatus.jobId}'"))
        elif isinstance(json_path, str):
            try:
                parse(json_path)
            except JSONPathSyntaxError as e:
                causes.append(
                    invalid(
                        f"{where}.jsonPath",
                        json_path,
                        f"not a valid JSONPath template: {e.message} (at position {e.position})",
                    )
                )
    return causes


def validate_failover(failover: dict[str, Any] | None, path: str) -> list[Cause]:
    if failover is None:
        return []
    causes: list[Cause] = []
    application = child(failover, "application")
    if application is not None:
        where = f"{path}.application"
        toleration = as_int(as_dict(application.get("decisionConditions")).get("tolerationSeconds"))
        if toleration is not None and toleration < 0:
            causes.append(
                invalid(f"{where}.decisionConditions.tolerationSeconds", toleration, "must be greater than or equal to 0")
            )
        purge_mode = application.get("purgeMode")
        grace = application.get("gracePeriodSeconds")
        if purge_mode != "Gracefully" and grace is not None:
            causes.append(invalid(f"{where}.gracePeriodSeconds", grace, "only takes effect when purgeMode is gracefully"))
        if purge_mode == "Gracefully" and grace is None:
            causes.append(invalid(f"{where}.gracePeriodSeconds", None, "should not be empty when purgeMode is gracefully"))
        grace_int = as_int(grace)
        if grace_int is not None and grace_int <= 0:
            causes.append(invalid(f"{where}.gracePeriodSeconds", grace_int, "must be greater than 0"))
        preservation = child(application, "statePreservation")
        if preservation is not None:
            causes.extend(validate_state_preservation(preservation, f"{where}.statePreservation"))
    cluster = child(failover, "cluster")
    if cluster is not None:
        preservation = child(cluster, "statePreservation")
        if preservation is not None:
            causes.extend(validate_state_preservation(preservation, f"{path}.cluster.statePreservation"))
    return causes


def validate_propagation_spec(spec: dict[str, Any], namespace: str) -> list[Cause]:
    """Everything Karmada's ``ValidatePropagationSpec`` checks, plus Flotilla's D3/D12 rules.

    ``namespace`` is the policy's namespace ("" for a ClusterPropagationPolicy)."""
    causes = validate_placement(as_dict(spec.get("placement")), "spec.placement")
    failover = child(spec, "failover")
    if failover is not None and child(failover, "application") is not None and not spec.get("propagateDeps"):
        causes.append(
            invalid("spec.propagateDeps", bool(spec.get("propagateDeps")),
                    "application failover is set, propagateDeps must be true")
        )
    causes.extend(validate_failover(failover, "spec.failover"))
    causes.extend(validate_resource_selectors(spec.get("resourceSelectors"), namespace, "spec.resourceSelectors"))
    if spec.get("preemption") == "Always":
        for i, selector in enumerate(as_list(spec.get("resourceSelectors"))):
            if isinstance(selector, dict) and not selector.get("name"):
                causes.append(
                    invalid(
                        f"spec.resourceSelectors[{i}].name",
                        as_str(selector.get("name")),
                        "name cannot be empty if preemption is Always, the empty name may cause unexpected "
                        "resources preemption",
                    )
                )
    suspension = child(spec, "suspension")
    if suspension is not None:
        on_clusters = as_dict(suspension.get("dispatchingOnClusters"))
        if suspension.get("dispatching") is True and as_list(on_clusters.get("clusterNames")):
            causes.append(
                invalid("spec.suspension", GoStruct(suspension, _SUSPENSION_SCHEMA),
                        "suspension dispatching cannot co-exist with dispatchingOnClusters.clusterNames")
            )
    return causes


# ---------------------------------------------------------------------------------------------
# Warnings (D3)
# ---------------------------------------------------------------------------------------------


def static_weight_division(placement: dict[str, Any]) -> bool:
    """The scheduler ignores spread constraints for a Divided/Weighted placement with static weights."""
    rs = child(placement, "replicaScheduling")
    if rs is None or rs.get("replicaSchedulingType", "Divided") != "Divided":
        return False
    if rs.get("replicaDivisionPreference") != "Weighted":
        return False
    weights = child(rs, "weightPreference")
    if weights is None:
        return True
    return bool(as_list(weights.get("staticWeightList"))) and not weights.get("dynamicWeight")


def _pinned_to_one_cluster(placement: dict[str, Any]) -> bool:
    affinity = child(placement, "clusterAffinity")
    if affinity is not None and len(as_list(affinity.get("clusterNames"))) == 1:
        return True
    terms = as_list(placement.get("clusterAffinities"))
    return bool(terms) and all(
        isinstance(t, dict) and len(as_list(t.get("clusterNames"))) == 1 and not as_list(t.get("overflowAffinities"))
        for t in terms
    )


def multi_cluster_reason(placement: dict[str, Any]) -> str | None:
    """Why this placement can put the workload in more than one cluster (with what to do about
    it), or ``None`` if it cannot."""
    if _pinned_to_one_cluster(placement):
        return None
    constraints = [c for c in as_list(placement.get("spreadConstraints")) if isinstance(c, dict)]
    by_field = {as_str(c.get("spreadByField")): c for c in constraints if c.get("spreadByField")}
    cluster_max = as_int(by_field.get("cluster", {}).get("maxGroups"))
    region_max = as_int(by_field["region"].get("maxGroups")) if "region" in by_field else None
    if static_weight_division(placement):
        return (
            "a Divided placement with static weights ignores spread constraints and can give replicas to every "
            "matching cluster (use replicaDivisionPreference Aggregated or dynamic weights with the spread "
            f"constraint {ONE_CLUSTER_RECIPE}, or Duplicated scheduling)"
        )
    if cluster_max == 1 and (region_max is None or region_max <= 1):
        return None
    if cluster_max is not None and cluster_max > 1:
        why = f"its cluster spread constraint allows up to {cluster_max} clusters"
    elif region_max is not None and region_max > 1:
        why = f"its region spread constraint allows up to {region_max} regions"
    elif replica_scheduling_type(placement) == "Duplicated":
        why = "this Duplicated placement runs a copy in every matching cluster"
    else:
        why = "this Divided placement can spread the replicas over several clusters"
    return f"{why} (add the spread constraint {ONE_CLUSTER_RECIPE})"


def state_preservation_warnings(spec: dict[str, Any]) -> list[str]:
    """D3: say when configured state preservation cannot take effect."""
    warnings: list[str] = []
    failover = child(spec, "failover")
    if failover is None:
        return warnings
    blocks: list[str] = []
    for which in ("application", "cluster"):
        block = child(failover, which)
        if block is None:
            continue
        preservation = child(block, "statePreservation")
        if preservation is None or not as_list(preservation.get("rules")):
            continue
        path = f"spec.failover.{which}.statePreservation"
        blocks.append(path)
        purge_mode = as_str(block.get("purgeMode")) or "Gracefully"
        if purge_mode != "Directly":
            warnings.append(
                f"{path}: the preserved state is injected only with purgeMode Directly; with purgeMode "
                f"{purge_mode} it is extracted but never reaches the new workload "
                f"(set spec.failover.{which}.purgeMode: Directly)"
            )
    if blocks:
        reason = multi_cluster_reason(as_dict(spec.get("placement")))
        if reason:
            warnings.append(
                f"{' and '.join(blocks)}: the preserved state is injected only when the workload runs in exactly "
                f"one cluster, but {reason}"
            )
    return warnings


# ---------------------------------------------------------------------------------------------
# The plugin
# ---------------------------------------------------------------------------------------------


def new_permanent_id() -> str:
    return str(uuid.uuid4())


class PropagationPolicyAdmission(NoOpPlugin):
    """Admission of PropagationPolicy (``cluster_scoped=False``) or ClusterPropagationPolicy."""

    def __init__(
        self,
        *,
        cluster_scoped: bool,
        add_finalizer: bool = True,
        new_id: Callable[[], str] = new_permanent_id,
    ) -> None:
        self.cluster_scoped = cluster_scoped
        self.add_finalizer = add_finalizer
        self.new_id = new_id
        if cluster_scoped:
            self.id_label = L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL
            self.finalizer = L.CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER
        else:
            self.id_label = L.PROPAGATION_POLICY_PERMANENT_ID_LABEL
            self.finalizer = L.PROPAGATION_POLICY_CONTROLLER_FINALIZER

    def _namespace(self, obj: dict[str, Any]) -> str:
        return "" if self.cluster_scoped else as_str(metadata(obj).get("namespace"))

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and not spec_unchanged(obj, old, op):
            default_propagation_spec(spec, self._namespace(obj))
        if op == "CREATE":
            set_label(obj, self.id_label, self.new_id())
            if self.add_finalizer:
                add_finalizer(obj, self.finalizer)
        elif self.id_label not in labels_of(old) and self.id_label not in labels_of(obj):
            # stored before admission was installed: give it its id now instead of failing every update
            set_label(obj, self.id_label, self.new_id())

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        causes: list[Cause] = []
        labels = labels_of(obj)
        spec = obj.get("spec")
        if op == "UPDATE" and old is not None:
            new_scheduler = as_dict(spec).get("schedulerName")
            if new_scheduler != as_dict(old.get("spec")).get("schedulerName"):
                causes.append(forbidden("spec.schedulerName", "the schedulerName should not be updated"))
            old_id = labels_of(old).get(self.id_label)
            if old_id is not None and labels.get(self.id_label) != old_id:
                causes.append(
                    forbidden(
                        "metadata.labels",
                        f"label {self.id_label} is immutable, it can only be set by the system during creation",
                    )
                )
        if self.id_label not in labels:
            causes.append(
                required(
                    "metadata.labels",
                    f"label {self.id_label} is required, it should be set by the mutating admission webhook "
                    "during creation",
                )
            )
        if isinstance(spec, dict) and not spec_unchanged(obj, old, op):
            causes.extend(validate_propagation_spec(spec, self._namespace(obj)))
        annotations = annotations_of(obj)
        for key, problem in validate_restore_annotations(annotations):
            causes.append(invalid(f"metadata.annotations[{key}]", annotations.get(key), problem))
        return causes

    def warnings(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[str]:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec_unchanged(obj, old, op):
            return []
        return state_preservation_warnings(spec)
