"""State preservation for stateful failover, with the divergences D3-D7 and D9 described below.

Pure functions: no I/O, no clock (``now`` is passed in), inputs never mutated.

**Extraction** (:func:`extract_state`). Each ``statePreservation`` rule ``{aliasLabelName, jsonPath}`` is a
kubectl JSONPath *template* (text outside ``{...}`` is printed as is) evaluated on the **reflected status**
the failed cluster last reported: the ``status`` of its item in the binding's ``status.aggregatedStatus``,
not the whole object, so paths are written without ``.status`` (``{.jobStatus.jobId}``). As in Karmada:

* no rules: nothing to extract, no error, whatever the status;
* no item for the cluster, or an item without ``status``: the status "has not yet been collected" and
  every rule fails with that error;
* strict mode: a key found nowhere is an error (``jobID is not found``), an index out of range too;
* the rules run in order and any error fails the whole extraction (no partial state); a duplicate alias
  overwrites the earlier one (admission rejects duplicates, D3, state-preservation checks).

Flotilla differences: values print as kubectl prints them, with integral numbers as integers (D7:
``1734462491693``, not Go's ``1.734462491693e+12``), and every value must be a valid label value (D7): an
invalid one fails the extraction with an error naming the rule, the value and why, instead of a Work the
member cluster rejects later. Errors are :class:`StateExtractionError` (``rule_alias``, ``json_path``,
``reason``, plus the ``failure`` kind).

**Injection** (:func:`should_inject`, :func:`inject_labels`). Karmada's conditions exactly: the
``StatefulFailoverInjection`` gate is on; the binding renders exactly one target cluster (``spec.clusters``
merged with ``requiredBy``); only the **last** eviction task counts; its ``purgeMode`` is ``Directly``; the
target is not in its ``clustersBeforeFailover``. The task's ``preservedLabelState`` then overwrites the
manifest's labels of the same keys.

**D4, injected state stays** (:func:`decide_injection`, per target; :func:`plan_injection`, per binding).
Karmada drops the labels as soon as the task is removed. Flotilla records the last injection on the binding
(annotation ``failover.flotilla.io/injected-state``, :func:`injected_state_record`) and keeps injecting the
recorded labels into the recorded cluster until the record is superseded: by a later injection, by an
eviction task from that cluster (its copy is being replaced, so the state it started from is history), or
when that cluster is no longer a target. The binding controller writes the record
(:func:`injected_state_patch`) before the Works; the scheduler writes it already with the ``spec.clusters``
that lead to a fresh injection (:func:`injected_state_for_schedule`), which spares that write.

**D5, consecutive failovers** (:func:`previous_injection`, :func:`carry_forward`). When the workload fails
over again from a cluster where its copy never became Healthy after the previous injection, the state
preserved is the previous one, not what the unhealthy copy reported (a fresh Flink job has a new job id and
no checkpoint; Karmada #6232); both failover triggers apply it. Whether the copy became Healthy is recorded
in the D4 record (``healthyAt``, stamped with :func:`observe_injected_copy_health` by the binding-status
controller, or by the graceful-eviction controller with the task removal while the binding has tasks:
:func:`injected_state_stamp`), so a controller restart does not forget it.

**D6, no silent blocking** (:func:`on_extraction_failure`). A failed extraction still blocks the eviction
and is retried, as in Karmada, but every attempt yields a Warning Event ``StatePreservationFailed`` naming
the rule and the error, the binding condition ``StatePreserved=False`` and a metric sample. With
``--state-preservation-timeout`` > 0 (0 = wait forever, as Karmada) the eviction proceeds without state once
the first failure for that cluster (annotation ``failover.flotilla.io/state-preservation-failing-since``) is
that old, with a Warning Event ``StatePreservationTimedOut``.

**D9**: :func:`clusters_before_failover` is what both failover triggers record on the task, so state is never
injected into a copy that was already running in the surviving cluster.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Any, Final, Literal

from flotilla.api.labels import INJECTED_STATE_ANNOTATION
from flotilla.failover.purge import eviction_tasks
from flotilla.jsonpath import (
    JSONPathError,
    JSONPathMissingKeyError,
    JSONPathSyntaxError,
    Template,
    parse,
)
from flotilla.kube.metadata import json_annotation
from flotilla.kube.objects import as_map, as_str
from flotilla.kube.times import format_time, parse_time
from flotilla.kube.validation import label_value_errors, qualified_name_errors

__all__ = [
    "CONDITION_STATE_PRESERVED",
    "EVENT_STATE_CARRIED_FORWARD",
    "EVENT_STATE_PRESERVATION_FAILED",
    "EVENT_STATE_PRESERVATION_TIMED_OUT",
    "INJECTED_STATE_ANNOTATION",
    "METRIC_STATE_PRESERVATION_FAILURES",
    "PURGE_MODE_DIRECTLY",
    "REASON_STATE_PRESERVATION_FAILED",
    "REASON_STATE_PRESERVATION_TIMED_OUT",
    "REASON_STATE_PRESERVED",
    "STATEFUL_FAILOVER_INJECTION_GATE",
    "STATE_PRESERVATION_FAILING_SINCE_ANNOTATION",
    "CarryForward",
    "EventSpec",
    "EvictionState",
    "ExtractionFailure",
    "InjectedStateRecord",
    "InjectionDecision",
    "InjectionPlan",
    "StateExtractionError",
    "StatePreservationOutcome",
    "StatePreservationRule",
    "Trigger",
    "carry_forward",
    "clear_failing_since",
    "clusters_before_failover",
    "current_record",
    "decide_injection",
    "extract_rule",
    "extract_state",
    "failing_since",
    "inject_labels",
    "injected_copy_health_pending",
    "injected_state_patch",
    "injected_state_for_schedule",
    "injected_state_record",
    "injected_state_stamp",
    "observe_injected_copy_health",
    "on_extraction_failure",
    "on_extraction_success",
    "not_collected_message",
    "parse_injected_state_record",
    "plan_injection",
    "preserve_state_for_eviction",
    "previous_injection",
    "record_failing_since",
    "reflected_status",
    "render_targets",
    "rule_summary",
    "rules_of",
    "should_inject",
    "similar_keys",
    "state_preservation_deadline",
    "target_entries",
]

PURGE_MODE_DIRECTLY: Final = "Directly"
STATEFUL_FAILOVER_INJECTION_GATE: Final = "StatefulFailoverInjection"
HEALTHY: Final = "Healthy"

#: Flotilla-only binding annotation (D6): JSON ``{"<cluster>": "<RFC 3339 time>"}``, when state extraction for
#: an eviction from that cluster first failed (the start of ``--state-preservation-timeout``).
STATE_PRESERVATION_FAILING_SINCE_ANNOTATION: Final = "failover.flotilla.io/state-preservation-failing-since"

#: Flotilla-only binding condition (D6): ``True``/``StatePreserved`` after a successful extraction,
#: ``False``/``StatePreservationFailed`` while it fails (the eviction waits), ``False``/``StatePreservationTimedOut``
#: once the eviction went ahead without state.
CONDITION_STATE_PRESERVED: Final = "StatePreserved"
REASON_STATE_PRESERVED: Final = "StatePreserved"
REASON_STATE_PRESERVATION_FAILED: Final = "StatePreservationFailed"
REASON_STATE_PRESERVATION_TIMED_OUT: Final = "StatePreservationTimedOut"

#: Event reasons (on the binding and the resource template).
EVENT_STATE_PRESERVATION_FAILED: Final = "StatePreservationFailed"  # Warning, every failed attempt (D6)
EVENT_STATE_PRESERVATION_TIMED_OUT: Final = "StatePreservationTimedOut"  # Warning, evicting without state (D6)
EVENT_STATE_CARRIED_FORWARD: Final = "StateCarriedForward"  # Normal, previous state kept (D5)

#: Counter (D6) incremented on every failed attempt, labelled ``failure`` (an :class:`ExtractionFailure` value).
METRIC_STATE_PRESERVATION_FAILURES: Final = "state_preservation_failures_total"

_MAX_VALUE_IN_MESSAGE: Final = 100

Trigger = Literal["application", "cluster"]


# ============================================================================================ helpers


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _string_map(value: Any) -> dict[str, str]:
    return {str(k): v for k, v in as_map(value).items() if isinstance(v, str)}


def _strings(value: Any) -> list[str]:
    return [v for v in _list(value) if isinstance(v, str)]


def _seconds(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _duration_text(seconds: float) -> str:
    """Go's ``time.Duration`` text for whole seconds (``5m0s``, ``1h0m0s``, ``30s``)."""
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def _shown(value: str) -> str:
    """A value quoted for a message, shortened when long."""
    if len(value) <= _MAX_VALUE_IN_MESSAGE:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value[:_MAX_VALUE_IN_MESSAGE], ensure_ascii=False)[:-1] + f'..." ({len(value)} characters)'


@dataclass(frozen=True)
class EventSpec:
    """An Event to record: ``type`` (Normal/Warning), ``reason``, ``message``."""

    type: str
    reason: str
    message: str


# ============================================================================================ rules


@dataclass(frozen=True)
class StatePreservationRule:
    """One ``statePreservation.rules[]`` entry."""

    alias: str
    json_path: str

    @classmethod
    def of(cls, rule: StatePreservationRule | Mapping[str, Any]) -> StatePreservationRule:
        if isinstance(rule, StatePreservationRule):
            return rule
        return cls(as_str(rule.get("aliasLabelName")), as_str(rule.get("jsonPath")))


RuleLike = StatePreservationRule | Mapping[str, Any]


def rules_of(failover: Mapping[str, Any] | None, trigger: Trigger) -> list[StatePreservationRule]:
    """The rules of ``failover.<trigger>.statePreservation`` (a policy's or binding's ``spec.failover``).

    Application evictions use the ``application`` block and taint evictions the ``cluster`` block; neither
    falls back to the other, as in Karmada.
    """
    block = as_map(as_map(failover).get(trigger))
    rules = _list(as_map(block.get("statePreservation")).get("rules"))
    return [StatePreservationRule.of(r) for r in rules if isinstance(r, Mapping)]


# ============================================================================================ extraction


class ExtractionFailure(StrEnum):
    STATUS_NOT_COLLECTED = "StatusNotCollected"
    INVALID_ALIAS = "InvalidAlias"
    SYNTAX = "InvalidJSONPath"
    MISSING_KEY = "MissingKey"
    EVALUATION = "EvaluationError"
    INVALID_VALUE = "InvalidLabelValue"


class StateExtractionError(Exception):
    """State could not be extracted. ``str()`` names the rule and says why.

    ``rule_alias``/``json_path`` are the failing rule's (for ``STATUS_NOT_COLLECTED``: the first rule's, every
    rule being affected); ``reason`` is the bare cause (``jobID is not found``); ``value`` the rendered value
    when it is not a valid label value; ``missing_key`` the key not found; ``cluster`` the evicted cluster
    when known.
    """

    def __init__(
        self,
        rule_alias: str,
        json_path: str,
        reason: str,
        *,
        failure: ExtractionFailure = ExtractionFailure.EVALUATION,
        value: str | None = None,
        missing_key: str | None = None,
        cluster: str | None = None,
    ) -> None:
        self.rule_alias = rule_alias
        self.json_path = json_path
        self.reason = reason
        self.failure = failure
        self.value = value
        self.missing_key = missing_key
        self.cluster = cluster
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if self.failure is ExtractionFailure.STATUS_NOT_COLLECTED:
            return self.reason
        return f"state preservation rule {self.rule_alias!r} (jsonPath {self.json_path!r}): {self.reason}"

    def __repr__(self) -> str:
        return (f"StateExtractionError(rule_alias={self.rule_alias!r}, json_path={self.json_path!r}, "
                f"reason={self.reason!r}, failure={self.failure.value!r})")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, StateExtractionError)
                and (self.rule_alias, self.json_path, self.reason, self.failure, self.value, self.missing_key)
                == (other.rule_alias, other.json_path, other.reason, other.failure, other.value,
                    other.missing_key))

    def __hash__(self) -> int:
        return hash((self.rule_alias, self.json_path, self.reason, self.failure))


def not_collected_message(cluster: str | None) -> str:
    """Karmada's text for a status not collected yet."""
    return f"the application status has not yet been collected from Cluster({cluster or ''})"


def reflected_status(aggregated_status: Iterable[Mapping[str, Any]] | Mapping[str, Any] | None, cluster: str) -> Any:
    """The ``status`` of ``cluster``'s item in ``status.aggregatedStatus``; ``None`` when not collected yet.

    ``aggregated_status`` may also be a whole binding (its ``status.aggregatedStatus`` is used).
    """
    if isinstance(aggregated_status, Mapping):
        aggregated_status = _list(as_map(aggregated_status.get("status")).get("aggregatedStatus"))
    for item in aggregated_status or ():
        if isinstance(item, Mapping) and item.get("clusterName") == cluster:
            return item.get("status")
    return None


def _selection_hint(template: Template, status: Any) -> str:
    """Why a rendered value has the shape it has (literal text, several values, an object or a list)."""
    if "{" not in template.source:
        return (f"the JSONPath has no {{...}} expression, so it is printed as literal text; write "
                f"{{{template.source.strip()}}}")
    try:
        results = template.execute(status)
    except JSONPathError:
        return ""
    for values in results:
        if len(values) > 1:
            return f"the JSONPath selects {len(values)} values, printed separated by spaces; select one"
        if values and isinstance(values[0], Mapping):
            return "the JSONPath selects an object, printed as JSON; select one of its fields"
        if values and isinstance(values[0], list | tuple):
            return "the JSONPath selects a list, printed as JSON; select one of its items"
    return ""


def extract_rule(rule: RuleLike, status: Any, *, cluster: str | None = None) -> str:
    """The label value one rule extracts from the reflected ``status``. Raises :class:`StateExtractionError`."""
    r = StatePreservationRule.of(rule)

    def fail(reason: str, failure: ExtractionFailure, **extra: Any) -> StateExtractionError:
        return StateExtractionError(r.alias, r.json_path, reason, failure=failure, cluster=cluster, **extra)

    alias_errors = qualified_name_errors(r.alias)
    if alias_errors:
        raise fail(f"aliasLabelName is not a valid label key: {'; '.join(alias_errors)}",
                   ExtractionFailure.INVALID_ALIAS)
    try:
        template = parse(r.json_path)
    except JSONPathSyntaxError as e:
        raise fail(f"invalid JSONPath template: {e}", ExtractionFailure.SYNTAX) from None
    if status is None:
        raise fail(not_collected_message(cluster), ExtractionFailure.STATUS_NOT_COLLECTED)
    try:
        value = template.render(status, allow_missing_keys=False)
    except JSONPathMissingKeyError as e:
        raise fail(str(e), ExtractionFailure.MISSING_KEY, missing_key=e.key) from None
    except JSONPathError as e:
        raise fail(str(e), ExtractionFailure.EVALUATION) from None
    value_errors = label_value_errors(value)
    if value_errors:
        hint = _selection_hint(template, status)
        why = "; ".join(([hint] if hint else []) + value_errors)
        raise fail(f"value {_shown(value)} is not a valid label value: {why}", ExtractionFailure.INVALID_VALUE,
                   value=value)
    return value


def extract_state(rules: Iterable[RuleLike], reflected_status: Any, *, cluster: str | None = None) -> dict[str, str]:
    """``aliasLabelName -> value`` for every rule, evaluated on the failed cluster's reflected status.

    ``reflected_status`` is ``None`` when the status has not been collected. Raises
    :class:`StateExtractionError` for the first failing rule (the whole extraction fails).
    """
    normalized = [StatePreservationRule.of(r) for r in rules]
    if not normalized:
        return {}
    if reflected_status is None:
        first = normalized[0]
        raise StateExtractionError(first.alias, first.json_path, not_collected_message(cluster),
                                   failure=ExtractionFailure.STATUS_NOT_COLLECTED, cluster=cluster)
    state: dict[str, str] = {}
    for rule in normalized:
        state[rule.alias] = extract_rule(rule, reflected_status, cluster=cluster)
    return state


def _walk_keys(data: Any, path: str, out: list[tuple[str, str]], depth: int = 0) -> None:
    if depth > 32:
        return
    if isinstance(data, Mapping):
        for key, value in data.items():
            k = str(key)
            simple = k.replace("_", "a").replace("-", "a").isalnum()
            child = f"{path}.{k}" if simple else f"{path}['{k}']"
            out.append((k, child))
            _walk_keys(value, child, out, depth + 1)
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data[:20]):
            _walk_keys(value, f"{path}[{index}]", out, depth + 1)


def similar_keys(missing: str, data: Any, limit: int = 3) -> list[tuple[str, str]]:
    """Keys in ``data`` that look like ``missing``: ``[(key, path)]``, the same key in another case first."""
    found: list[tuple[str, str]] = []
    _walk_keys(data, "", found)
    same_case = [(k, p) for k, p in found if k.lower() == missing.lower() and k != missing]
    names = sorted({k for k, _ in found if k != missing})
    close = difflib.get_close_matches(missing, names, n=limit, cutoff=0.75)
    out = list(same_case)
    for name in close:
        out.extend((k, p) for k, p in found if k == name and (k, p) not in out)
    return out[:limit]


# ============================================================================================ injection


def target_entries(binding_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The target cluster entries (``{name, replicas}``) a binding renders Works for: ``spec.clusters`` then
    the ``requiredBy`` clusters not already listed (the first entry of a name wins); entries without a name
    are left out."""
    out: dict[str, Mapping[str, Any]] = {}
    sources = [_list(binding_spec.get("clusters"))]
    sources += [_list(as_map(b).get("clusters")) for b in _list(binding_spec.get("requiredBy"))]
    for entries in sources:
        for entry in entries:
            entry = as_map(entry)
            name = as_str(entry.get("name"))
            if name and name not in out:
                out[name] = entry
    return list(out.values())


def render_targets(binding_spec: Mapping[str, Any]) -> list[str]:
    """The names of the clusters a binding renders Works for (:func:`target_entries`)."""
    return [as_str(e.get("name")) for e in target_entries(binding_spec)]


def clusters_before_failover(binding_spec: Mapping[str, Any]) -> list[str]:
    """The names of ``spec.clusters`` before an eviction removes any (the task's ``clustersBeforeFailover``).

    Karmada's application failover records it (when state is preserved); Flotilla's cluster failover records
    it too (D9), so state is never injected into a copy that was already running in the surviving cluster.
    """
    return [n for n in (as_str(as_map(c).get("name")) for c in _list(binding_spec.get("clusters"))) if n]


def should_inject(binding_spec: Mapping[str, Any], target_cluster: str, *, gate: bool = True,
                  targets: Sequence[str] | None = None) -> tuple[bool, str]:
    """Whether the last eviction task's preserved state goes into ``target_cluster``'s Work, and why (not).
    ``targets``: the clusters the binding renders Works for, when the caller has them already (by default
    :func:`render_targets`)."""
    if not gate:
        return False, f"the feature gate {STATEFUL_FAILOVER_INJECTION_GATE} is disabled"
    targets = render_targets(binding_spec) if targets is None else list(targets)
    if len(targets) > 1:
        return False, (f"the workload is placed in {len(targets)} clusters ({', '.join(targets)}); state is "
                       "injected only when it runs in exactly one cluster")
    if target_cluster not in targets:
        return False, f"cluster {target_cluster} is not a target cluster of the binding"
    tasks = eviction_tasks(binding_spec)
    if not tasks:
        return False, "the binding has no graceful eviction task"
    last = tasks[-1]
    source = as_str(last.get("fromCluster"))
    mode = as_str(last.get("purgeMode")) or "<unset>"
    if mode != PURGE_MODE_DIRECTLY:
        return False, (f"the last eviction task (from cluster {source}) has purgeMode {mode}; state is "
                       f"injected only with purgeMode {PURGE_MODE_DIRECTLY}")
    if target_cluster in _strings(last.get("clustersBeforeFailover")):
        return False, (f"cluster {target_cluster} already ran the workload before the failover from cluster "
                       f"{source} (clustersBeforeFailover); its copy keeps its own state")
    state = _string_map(last.get("preservedLabelState"))
    if not state:
        return True, f"the last eviction task (from cluster {source}, purgeMode Directly) preserved no state"
    return True, (f"the last eviction task (from cluster {source}, purgeMode Directly) preserved "
                  f"{len(state)} label(s): {', '.join(sorted(state))}")


def inject_labels(manifest: Mapping[str, Any], preserved_label_state: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``manifest`` whose labels include ``preserved_label_state`` (overwriting the same keys)."""
    out = copy.deepcopy(dict(manifest))
    if not preserved_label_state:
        return out
    meta = out.get("metadata")
    if not isinstance(meta, dict):
        meta = out["metadata"] = {}
    labels: dict[str, Any] = meta["labels"] if isinstance(meta.get("labels"), dict) else {}
    meta["labels"] = {**labels, **{str(k): str(v) for k, v in preserved_label_state.items()}}
    return out


# ============================================================================================ D4 record


@dataclass(frozen=True)
class InjectedStateRecord:
    """The last injected state of a binding (D4): which ``labels`` went into ``cluster``, preserved from
    ``from_cluster``, ``at`` what time; ``healthy_at`` is when that copy was first seen Healthy (D5)."""

    cluster: str
    labels: Mapping[str, str]
    from_cluster: str
    at: datetime
    healthy_at: datetime | None = None

    def to_json(self) -> str:
        doc: dict[str, Any] = {"cluster": self.cluster, "labels": dict(sorted(self.labels.items())),
                               "fromCluster": self.from_cluster, "at": format_time(self.at)}
        if self.healthy_at is not None:
            doc["healthyAt"] = format_time(self.healthy_at)
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)

    def same_injection(self, other: InjectedStateRecord | None) -> bool:
        return (other is not None and other.cluster == self.cluster and dict(other.labels) == dict(self.labels)
                and other.from_cluster == self.from_cluster)


def injected_state_record(cluster: str, labels: Mapping[str, str], from_cluster: str, at: datetime) -> str:
    """The value of the ``failover.flotilla.io/injected-state`` annotation:
    ``{"cluster":...,"labels":{...},"fromCluster":...,"at":"<RFC 3339>"}``."""
    return InjectedStateRecord(cluster, dict(labels), from_cluster, at).to_json()


def parse_injected_state_record(value: str | Mapping[str, Any] | None) -> InjectedStateRecord | None:
    """The record in an annotation value (or a binding's annotations, or a whole binding); ``None`` when
    absent or unreadable (a damaged record is ignored rather than trusted)."""
    if type(value) is dict or isinstance(value, Mapping):
        annotations = value
        if "metadata" in value:
            annotations = as_map(as_map(value.get("metadata")).get("annotations"))
        is_map = type(annotations) is dict or isinstance(annotations, Mapping)
        value = annotations.get(INJECTED_STATE_ANNOTATION) if is_map else None
    if not isinstance(value, str) or not value:
        return None
    parts = _record_parts(value) if type(value) is str else _parse_record_parts(value)
    if parts is None:
        return None
    cluster, labels, from_cluster, at, healthy_at = parts
    return InjectedStateRecord(cluster, dict(labels), from_cluster, at, healthy_at)


_RecordParts = tuple[str, tuple[tuple[str, str], ...], str, datetime, "datetime | None"]


def _parse_record_parts(value: str) -> _RecordParts | None:
    """The fields of an annotation value, all immutable (labels as pairs, in order); ``None``: unreadable."""
    try:
        doc = json.loads(value)
    except ValueError:
        return None
    if type(doc) is not dict and not isinstance(doc, Mapping):
        return None
    cluster, at = as_str(doc.get("cluster")), parse_time(doc.get("at"))
    labels = doc.get("labels")
    if not cluster or at is None or (type(labels) is not dict and not isinstance(labels, Mapping)):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    return cluster, tuple(labels.items()), as_str(doc.get("fromCluster")), at, parse_time(doc.get("healthyAt"))


#: every pass over a binding reads its record again, from the same annotation text; the parts are immutable and
#: each call still gets a record (and a labels dict) of its own
_record_parts = lru_cache(maxsize=2048)(_parse_record_parts)


def current_record(binding_spec: Mapping[str, Any], record: InjectedStateRecord | None) -> InjectedStateRecord | None:
    """``record`` while it still describes the copy in its cluster, else ``None`` (drop the annotation).

    It is superseded when its cluster is no longer a target (the copy is gone), or when an eviction task
    comes from its cluster (that copy is being replaced; a later failover decides the new state).
    """
    if record is None:
        return None
    if record.cluster not in render_targets(binding_spec):
        return None
    if any(as_str(t.get("fromCluster")) == record.cluster for t in eviction_tasks(binding_spec)):
        return None
    return record


@dataclass(frozen=True)
class InjectionDecision:
    """What to inject into one target cluster's Work.

    ``labels``: the labels to inject (empty: none); ``source``: ``"task"`` (Karmada's rule), ``"record"`` (D4:
    kept after the task went) or ``None``; ``reason``: why; ``record``: the record the binding should carry
    after this render (``None``: remove the annotation); ``record_changed``: whether to write it.
    """

    labels: Mapping[str, str]
    source: Literal["task", "record"] | None
    reason: str
    record: InjectedStateRecord | None
    record_changed: bool


def decide_injection(
    binding_spec: Mapping[str, Any],
    target_cluster: str,
    record: InjectedStateRecord | None,
    now: datetime,
    *,
    gate: bool = True,
) -> InjectionDecision:
    """D4: the labels to inject into ``target_cluster`` given the eviction tasks and the last record.

    1. Karmada's rule (:func:`should_inject`) with a non-empty state: inject it and record it (the time of an
       unchanged injection is kept, so re-renders do not rewrite the annotation);
    2. otherwise, while the record is current (:func:`current_record`) and names ``target_cluster``: inject
       the recorded labels again;
    3. otherwise nothing. With the gate off nothing is injected and the record is left alone.
    """
    if not gate:
        ok, reason = should_inject(binding_spec, target_cluster, gate=False)
        return InjectionDecision({}, None, reason, record, False)
    valid = current_record(binding_spec, record)
    ok, reason = should_inject(binding_spec, target_cluster)
    if ok:
        task = eviction_tasks(binding_spec)[-1]
        state = _string_map(task.get("preservedLabelState"))
        if state:
            fresh = InjectedStateRecord(target_cluster, state, as_str(task.get("fromCluster")), now)
            if fresh.same_injection(record):
                assert record is not None
                return InjectionDecision(state, "task", reason, record, False)
            return InjectionDecision(state, "task", reason, fresh, True)
    if valid is not None and valid.cluster == target_cluster and valid.labels:
        why = (f"keeping the state injected at {format_time(valid.at)} (preserved from cluster "
               f"{valid.from_cluster}) until a later failover replaces it")
        return InjectionDecision(dict(valid.labels), "record", why, valid, False)
    return InjectionDecision({}, None, reason, valid, valid != record)


@dataclass(frozen=True)
class InjectionPlan:
    """What one render of a binding injects (D4), over all its target clusters.

    ``labels``: the labels for each target cluster that gets some; ``decisions``: every target's
    :class:`InjectionDecision`; ``record``: the record the binding carries after the render (``None``: no
    annotation); ``record_changed``: whether the annotation must be written (added, replaced or removed).
    """

    labels: Mapping[str, Mapping[str, str]]
    decisions: Mapping[str, InjectionDecision]
    record: InjectedStateRecord | None
    record_changed: bool


def plan_injection(
    binding_spec: Mapping[str, Any],
    record: InjectedStateRecord | None,
    now: datetime,
    *,
    gate: bool = True,
) -> InjectionPlan:
    """:func:`decide_injection` for every render target of a binding, and the one record it leaves behind.

    Only a single-target binding can get a fresh injection (Karmada's rule), so the targets never disagree on
    the record: it is the fresh one when there is one, else the current record (:func:`current_record`),
    which is dropped when it was superseded, also when the binding has no target at all. With the gate off
    nothing is injected and the record is left as it is.
    """
    decisions = {t: decide_injection(binding_spec, t, record, now, gate=gate) for t in render_targets(binding_spec)}
    labels = {t: dict(d.labels) for t, d in decisions.items() if d.labels}
    if not gate:
        return InjectionPlan(labels, decisions, record, False)
    fresh = [d for d in decisions.values() if d.source == "task"]
    if fresh:
        return InjectionPlan(labels, decisions, fresh[0].record, fresh[0].record_changed)
    kept = current_record(binding_spec, record)
    return InjectionPlan(labels, decisions, kept, kept != record)


def injected_state_patch(record: InjectedStateRecord | None, resource_version: Any) -> dict[str, Any]:
    """The merge patch writing ``record`` to the binding's ``failover.flotilla.io/injected-state`` annotation
    (``None``: removing it), guarded by ``resource_version`` (a metadata-only write: the generation stays)."""
    value = None if record is None else record.to_json()
    return {"metadata": {"resourceVersion": resource_version, "annotations": {INJECTED_STATE_ANNOTATION: value}}}


def injected_copy_health_pending(old_binding: Mapping[str, Any] | None, new_binding: Mapping[str, Any]) -> bool:
    """Whether a binding update brings a changed record whose copy has not been seen Healthy yet (D5): the
    binding-status controller looks at the binding then, so a copy already Healthy is stamped at once."""
    def raw(binding: Mapping[str, Any] | None) -> Any:
        return as_map(as_map(as_map(binding).get("metadata")).get("annotations")).get(INJECTED_STATE_ANNOTATION)

    if old_binding is not None and raw(old_binding) == raw(new_binding):
        return False
    record = parse_injected_state_record(raw(new_binding))
    return record is not None and record.healthy_at is None


def observe_injected_copy_health(
    record: InjectedStateRecord | None, aggregated_status: Iterable[Mapping[str, Any]] | Mapping[str, Any] | None,
    now: datetime,
) -> InjectedStateRecord | None:
    """The record with ``healthy_at`` stamped the first time its cluster's item reports ``Healthy`` (D5);
    the same object when nothing changes (compare with ``is`` to know whether to write it)."""
    if record is None or record.healthy_at is not None:
        return record
    if isinstance(aggregated_status, Mapping):
        aggregated_status = _list(as_map(aggregated_status.get("status")).get("aggregatedStatus"))
    for item in aggregated_status or ():
        if isinstance(item, Mapping) and item.get("clusterName") == record.cluster and item.get("health") == HEALTHY:
            return replace(record, healthy_at=now)
    return record


def injected_state_for_schedule(
    binding: Mapping[str, Any], new_clusters: Sequence[Mapping[str, Any]] | None, now: datetime, *, gate: bool = True
) -> str | None:
    """D4: the ``failover.flotilla.io/injected-state`` value that the binding controller's render of ``binding``
    with ``spec.clusters = new_clusters`` records before its Works, when that render is a fresh injection
    (Karmada's rule, :func:`plan_injection`) that changes the record; else ``None``. The scheduler writes it with
    the ``spec.clusters`` that lead to it (one binding write less per stateful failover); the binding controller
    then finds it recorded (:meth:`InjectedStateRecord.same_injection`) and writes nothing. Drops of a
    superseded record are left to the binding controller."""
    if not gate:
        return None
    spec = {**as_map(binding.get("spec")), "clusters": list(new_clusters or [])}
    plan = plan_injection(spec, parse_injected_state_record(binding), now)
    if not plan.record_changed or plan.record is None:
        return None
    if not any(d.source == "task" for d in plan.decisions.values()):
        return None
    return plan.record.to_json()


def injected_state_stamp(binding: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """The annotations merge patch stamping ``healthyAt`` on ``binding``'s record when its own
    ``status.aggregatedStatus`` reports the record's copy Healthy for the first time (D5); ``None``: nothing to
    stamp (no record, already stamped, not Healthy, or the binding is being deleted)."""
    if as_map(as_map(binding).get("metadata")).get("deletionTimestamp"):
        return None
    record = parse_injected_state_record(binding)
    stamped = observe_injected_copy_health(record, binding, now)
    if stamped is record or stamped is None:
        return None
    return {INJECTED_STATE_ANNOTATION: stamped.to_json()}


# ============================================================================================ D5


Previous = InjectedStateRecord | Mapping[str, Any]


def previous_injection(
    binding_spec: Mapping[str, Any], record: InjectedStateRecord | None, failed_cluster: str
) -> tuple[Previous | None, bool]:
    """The previous injection into ``failed_cluster`` and whether that copy became Healthy since.

    Call it before the new eviction task is appended (``failed_cluster`` is still a target). The D4 record
    is used when it names ``failed_cluster`` (``healthy_at`` says whether the copy became Healthy).
    Without a record, the last eviction task counts, as not Healthy, when it injects a non-empty state into
    ``failed_cluster`` (:func:`should_inject`: ``Directly``, a single target, not in its
    ``clustersBeforeFailover``): the graceful-eviction controller removes a task once every target is
    Healthy, so a task still present means the copy has not been seen Healthy.
    """
    if record is not None and record.cluster == failed_cluster:
        return record, record.healthy_at is not None
    tasks = eviction_tasks(binding_spec)
    if tasks and as_str(tasks[-1].get("fromCluster")) != failed_cluster:
        last = tasks[-1]
        if should_inject(binding_spec, failed_cluster)[0] and _string_map(last.get("preservedLabelState")):
            return last, False
    return None, False


@dataclass(frozen=True)
class CarryForward:
    """The state to preserve for an eviction (D5): ``state`` (``None`` with ``error``), whether it is the
    ``carried_forward`` previous state, ``reason`` and an Event to record when carried forward."""

    state: Mapping[str, str] | None
    error: StateExtractionError | None
    carried_forward: bool
    reason: str
    event: EventSpec | None = None


def _previous_state(previous: Previous) -> tuple[dict[str, str], str, str | None]:
    """(labels, fromCluster, cluster injected into or None)."""
    if isinstance(previous, InjectedStateRecord):
        return dict(previous.labels), previous.from_cluster, previous.cluster
    return _string_map(previous.get("preservedLabelState")), as_str(previous.get("fromCluster")), None


def carry_forward(
    previous_task_or_record: Previous | None,
    failed_cluster_health_since_injection: bool | str | None,
    newly_extracted: Mapping[str, str] | StateExtractionError,
    *,
    failed_cluster: str | None = None,
) -> CarryForward:
    """D5: the state an eviction from ``failed_cluster`` preserves.

    ``previous_task_or_record`` is the previous injection into the failed cluster (:func:`previous_injection`):
    a D4 record or the eviction task that injected. ``failed_cluster_health_since_injection`` says whether the
    copy became Healthy after it (``True`` or ``"Healthy"``; ``False``/``None``/another health: never).
    ``newly_extracted`` is what the failed copy's status gave (a state, or the extraction error).

    When the copy never became Healthy and there was a previous non-empty state, that state is carried
    forward, even when the extraction failed (an unhealthy copy often lacks the fields). Otherwise the new
    extraction stands, error included (D6 applies to it).
    """
    healthy = failed_cluster_health_since_injection is True or failed_cluster_health_since_injection == HEALTHY

    def fresh(reason: str) -> CarryForward:
        if isinstance(newly_extracted, StateExtractionError):
            return CarryForward(None, newly_extracted, False, reason)
        return CarryForward(dict(newly_extracted), None, False, reason)

    if previous_task_or_record is None:
        return fresh("no previous injection into the failed cluster")
    labels, source, injected_into = _previous_state(previous_task_or_record)
    where = failed_cluster or injected_into or "the failed cluster"
    if failed_cluster is not None and injected_into is not None and injected_into != failed_cluster:
        return fresh(f"the previous injection went into cluster {injected_into}, not {failed_cluster}")
    if not labels:
        return fresh("the previous injection carried no state")
    if healthy:
        return fresh(f"the copy in cluster {where} became Healthy after the previous injection; its own state "
                     "is preserved")
    reason = (f"the copy in cluster {where} never became Healthy after the state preserved from cluster "
              f"{source} was injected; that state is carried forward instead of what the unhealthy copy "
              "reported")
    if isinstance(newly_extracted, StateExtractionError):
        reason += f" (its extraction failed: {newly_extracted})"
    message = (f"Cluster {where}: the workload never became Healthy there after the failover from cluster "
               f"{source}; preserving the previous state ({', '.join(f'{k}={v}' for k, v in sorted(labels.items()))})")
    return CarryForward(labels, None, True, reason, EventSpec("Normal", EVENT_STATE_CARRIED_FORWARD, message))


# ============================================================================================ D6


def state_preservation_deadline(first_failure_at: datetime, timeout: float | timedelta) -> datetime | None:
    """When an eviction blocked on state extraction proceeds without state; ``None``: never (timeout 0)."""
    seconds = _seconds(timeout)
    if seconds <= 0:
        return None
    return first_failure_at + timedelta(seconds=seconds)


@dataclass(frozen=True)
class StatePreservationOutcome:
    """What a failed extraction leads to (D6).

    ``proceed_without_state``: evict now with no preserved state; otherwise keep the eviction waiting and
    retry (``retry_after``: the seconds until the deadline, the longest a retry should wait; ``None``: no
    deadline, retry with the usual backoff). ``event``, ``condition`` (binding status) and ``metric_labels``
    are to be recorded on every attempt.
    """

    proceed_without_state: bool
    retry_after: float | None
    event: EventSpec
    condition: dict[str, Any]
    metric_labels: dict[str, str] = field(default_factory=dict)


def on_extraction_failure(
    error: StateExtractionError,
    *,
    cluster: str,
    first_failure_at: datetime | None,
    now: datetime,
    timeout: float | timedelta = 0.0,
) -> StatePreservationOutcome:
    """D6: the Event, condition and decision for one failed extraction attempt of an eviction from ``cluster``.

    ``first_failure_at`` is the first failure for that cluster (:func:`failing_since`; ``None``: this one).
    """
    first = first_failure_at or now
    deadline = state_preservation_deadline(first, timeout)
    metric = {"failure": error.failure.value}
    if deadline is not None and now >= deadline:
        waited = _duration_text((now - first).total_seconds())
        message = (f"Evicting the workload from cluster {cluster} without preserved state: state preservation "
                   f"has failed for {waited} (--state-preservation-timeout={_duration_text(_seconds(timeout))}); "
                   f"last error: {error}")
        condition = {"type": CONDITION_STATE_PRESERVED, "status": "False",
                     "reason": REASON_STATE_PRESERVATION_TIMED_OUT, "message": message}
        return StatePreservationOutcome(True, None, EventSpec("Warning", EVENT_STATE_PRESERVATION_TIMED_OUT, message),
                                        condition, metric)
    if deadline is None:
        tail = "the eviction waits until it succeeds (--state-preservation-timeout=0: wait forever)"
        retry_after = None
    else:
        retry_after = max((deadline - now).total_seconds(), 0.0)
        tail = (f"the eviction waits and retries; it proceeds without state at {format_time(deadline)} "
                f"(--state-preservation-timeout={_duration_text(_seconds(timeout))})")
    message = f"Cannot preserve state for the eviction from cluster {cluster}: {error}; {tail}"
    condition = {"type": CONDITION_STATE_PRESERVED, "status": "False", "reason": REASON_STATE_PRESERVATION_FAILED,
                 "message": message}
    return StatePreservationOutcome(False, retry_after, EventSpec("Warning", EVENT_STATE_PRESERVATION_FAILED, message),
                                    condition, metric)


def on_extraction_success(state: Mapping[str, str], *, cluster: str, carried_forward: bool = False) -> dict[str, Any]:
    """The ``StatePreserved=True`` binding condition after a successful extraction from ``cluster``."""
    keys = ", ".join(sorted(state)) or "none"
    origin = "carried forward from the previous failover" if carried_forward else f"extracted from cluster {cluster}"
    return {"type": CONDITION_STATE_PRESERVED, "status": "True", "reason": REASON_STATE_PRESERVED,
            "message": f"State {origin} for the eviction from cluster {cluster}: {len(state)} label(s) ({keys})"}


@dataclass(frozen=True)
class EvictionState:
    """What state preservation decides for one eviction from a cluster (D5, D6).

    ``state``: the labels to record on the eviction task (``None``: none, the extraction failed).
    ``condition``: the binding's ``StatePreserved`` condition. ``carried``: the D5 Event, to record once the
    eviction is written. ``failure``: the D6 outcome of a failed extraction (its Event and metric labels are
    for every attempt); ``None`` after a success.
    """

    state: dict[str, str] | None
    condition: dict[str, Any]
    carried: EventSpec | None = None
    failure: StatePreservationOutcome | None = None

    @property
    def proceed(self) -> bool:
        """The eviction goes ahead now: with ``state``, or without any once the timeout has passed."""
        return self.failure is None or self.failure.proceed_without_state

    @property
    def retry_after(self) -> float | None:
        """While the eviction waits: the seconds until it proceeds without state (``None``: no deadline)."""
        return self.failure.retry_after if self.failure is not None else None


def preserve_state_for_eviction(
    rules: Sequence[RuleLike],
    binding: Mapping[str, Any],
    cluster: str,
    *,
    record: InjectedStateRecord | None,
    first_failure_at: datetime | None,
    now: datetime,
    timeout: float | timedelta = 0.0,
) -> EvictionState:
    """The state an eviction of ``binding`` from ``cluster`` preserves, as both failover triggers decide it:
    :func:`extract_state` on the status the cluster reflected, :func:`carry_forward` of the previous injection
    into that cluster (D5, ``record`` is the binding's :func:`parse_injected_state_record`), and
    :func:`on_extraction_failure` when that leaves an error (D6; ``first_failure_at`` from :func:`failing_since`).
    """
    extracted: dict[str, str] | StateExtractionError
    try:
        extracted = extract_state(rules, reflected_status(binding, cluster), cluster=cluster)
    except StateExtractionError as e:
        extracted = e
    previous, healthy = previous_injection(as_map(binding.get("spec")), record, cluster)
    kept = carry_forward(previous, healthy, extracted, failed_cluster=cluster)
    if kept.error is None:
        state = dict(kept.state or {})
        return EvictionState(state, on_extraction_success(state, cluster=cluster, carried_forward=kept.carried_forward),
                             kept.event)
    failure = on_extraction_failure(kept.error, cluster=cluster, first_failure_at=first_failure_at, now=now,
                                    timeout=timeout)
    return EvictionState(None, failure.condition, kept.event, failure)


def failing_since(annotations: Mapping[str, Any] | str | None) -> dict[str, datetime]:
    """``cluster -> first failure`` from the ``failover.flotilla.io/state-preservation-failing-since``
    annotation (a binding's annotations, or the value itself); unreadable entries are ignored."""
    key = STATE_PRESERVATION_FAILING_SINCE_ANNOTATION
    doc = json_annotation(annotations if isinstance(annotations, Mapping) else {key: annotations}, key)
    out: dict[str, datetime] = {}
    for cluster, stamp in as_map(doc).items():
        parsed = parse_time(stamp)
        if parsed is not None:
            out[str(cluster)] = parsed
    return out


def _encode_failing_since(entries: Mapping[str, datetime]) -> str | None:
    if not entries:
        return None
    return json.dumps({k: format_time(v) for k, v in sorted(entries.items())}, separators=(",", ":"))


def record_failing_since(annotations: Mapping[str, Any] | str | None, cluster: str, now: datetime) -> str:
    """The annotation value with ``cluster``'s first failure set to ``now`` unless already recorded."""
    entries = failing_since(annotations)
    entries.setdefault(cluster, now)
    encoded = _encode_failing_since(entries)
    assert encoded is not None
    return encoded


def clear_failing_since(annotations: Mapping[str, Any] | str | None, cluster: str) -> str | None:
    """The annotation value without ``cluster`` (after a success or an eviction without state); ``None``:
    remove the annotation."""
    entries = failing_since(annotations)
    entries.pop(cluster, None)
    return _encode_failing_since(entries)


def rule_summary(rules: Sequence[RuleLike]) -> str:
    """``alias={jsonPath}, ...`` for messages."""
    return ", ".join(f"{r.alias}={r.json_path}" for r in (StatePreservationRule.of(x) for x in rules))
