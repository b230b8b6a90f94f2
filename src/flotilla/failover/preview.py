"""``flotilla failover preview``: what a failover would preserve and inject now, pure.

For a live workload the report says, for each failover trigger configured in ``spec.failover`` (``cluster``:
taint eviction, ``application``: unhealthy application), and for each state-preservation rule, the value it
would preserve from the reflected status now, or the error that would block the eviction (D6), with a hint
(``{.jobStatus.jobID}``: "jobID is not found", similar key ``jobId``); then whether the preserved state would
be injected into the new cluster and, if not, why (purge mode, several clusters, the target already running
the workload, the feature gate). A rule such as ``{.jobStatus.jobID}`` is thus caught before a real outage.

The hypothetical failover evicts ``from_cluster`` (the workload's only cluster when not given) and lands in
``target_cluster`` (a new cluster when not given), with the clusters it runs in recorded as
``clustersBeforeFailover`` (D9, both triggers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from flotilla.failover.state import (
    PURGE_MODE_DIRECTLY,
    STATEFUL_FAILOVER_INJECTION_GATE,
    ExtractionFailure,
    StateExtractionError,
    StatePreservationRule,
    Trigger,
    clusters_before_failover,
    extract_rule,
    should_inject,
    similar_keys,
)
from flotilla.failover.state import reflected_status as status_of
from flotilla.kube.objects import as_map

__all__ = [
    "BlockPreview",
    "PreviewReport",
    "RulePreview",
    "UNKNOWN_TARGET",
    "hint_for",
    "preview",
    "preview_binding",
    "render_preview",
]

#: Placeholder for "the cluster the scheduler would pick" when no target is given.
UNKNOWN_TARGET: Final = "<new cluster>"
PURGE_MODE_GRACEFULLY: Final = "Gracefully"

_TRIGGER_TITLES: Final = {"cluster": "cluster failover (NoExecute taint eviction)",
                          "application": "application failover (unhealthy workload)"}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


@dataclass(frozen=True)
class RulePreview:
    """One rule: the ``value`` it would preserve, or the ``error`` (with a ``hint``)."""

    alias: str
    json_path: str
    value: str | None
    error: StateExtractionError | None = None
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """The machine-readable form (``flotilla failover preview -o json``): every key is always present."""
        error: dict[str, Any] | None = None
        if self.error is not None:
            error = {"failure": self.error.failure.value, "reason": self.error.reason,
                     "message": self.error.message, "missingKey": self.error.missing_key,
                     "value": self.error.value}
        return {"aliasLabelName": self.alias, "jsonPath": self.json_path, "ok": self.ok, "value": self.value,
                "error": error, "hint": self.hint or None}


@dataclass(frozen=True)
class BlockPreview:
    """One trigger's ``statePreservation`` (``failover.cluster`` or ``failover.application``)."""

    trigger: Trigger
    configured: bool
    purge_mode: str
    rules: tuple[RulePreview, ...]
    inject: bool
    inject_reason: str
    warnings: tuple[str, ...] = ()

    @property
    def state(self) -> dict[str, str] | None:
        """The state that would be preserved (``None`` when a rule fails: the eviction would wait, D6)."""
        if any(not r.ok for r in self.rules):
            return None
        out: dict[str, str] = {}
        for r in self.rules:
            assert r.value is not None
            out[r.alias] = r.value
        return out

    @property
    def ok(self) -> bool:
        return self.state is not None

    def to_dict(self) -> dict[str, Any]:
        """The machine-readable form: ``state`` is ``null`` when a rule fails (the eviction would wait)."""
        return {"trigger": self.trigger, "configured": self.configured, "purgeMode": self.purge_mode or None,
                "ok": self.ok, "rules": [r.to_dict() for r in self.rules], "state": self.state,
                "injection": {"inject": self.inject, "reason": self.inject_reason},
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class PreviewReport:
    from_cluster: str | None
    target_cluster: str
    status_collected: bool
    gate: bool
    blocks: tuple[BlockPreview, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Every configured block would preserve its state."""
        return all(b.ok for b in self.blocks if b.configured)

    @property
    def failing_rules(self) -> tuple[RulePreview, ...]:
        """The rules of configured blocks that fail now (each would block an eviction, D6)."""
        return tuple(r for b in self.blocks if b.configured for r in b.rules if not r.ok)

    def to_dict(self) -> dict[str, Any]:
        """The machine-readable form of the report (``-o json`` / ``-o yaml``), with stable keys.

        ``targetCluster`` is ``null`` when no target was given (the scheduler's pick); ``ok`` is
        :attr:`ok`; ``triggers`` holds one entry per trigger, ``cluster`` then ``application``.
        """
        target = None if self.target_cluster == UNKNOWN_TARGET else self.target_cluster
        return {"fromCluster": self.from_cluster, "targetCluster": target, "statusCollected": self.status_collected,
                "featureGates": {STATEFUL_FAILOVER_INJECTION_GATE: self.gate}, "ok": self.ok,
                "notes": list(self.notes), "triggers": [b.to_dict() for b in self.blocks]}


# ------------------------------------------------------------------------------------------------ hints


def hint_for(error: StateExtractionError, status: Any) -> str:
    """A suggestion for fixing a rule that fails on ``status``."""
    if error.failure is ExtractionFailure.MISSING_KEY and error.missing_key:
        key = error.missing_key
        if key == "status" and ".status" in error.json_path:
            fixed = error.json_path.replace(".status.", ".", 1).replace(".status}", "}", 1)
            return ("the JSONPath is evaluated on the reflected status, not on the whole object: leave out "
                    f".status (e.g. {fixed})")
        similar = similar_keys(key, status)
        if similar:
            return "similar keys: " + ", ".join(f"{k} (at {p})" for k, p in similar)
        top = sorted(str(k) for k in as_map(status))
        listing = f"keys at the top of the reflected status: {', '.join(top)}" if top else "the reflected status is empty"
        return (f"{listing}; a field whose value is zero or empty is often left out of a status "
                "(e.g. readyReplicas: 0), which makes it not found")
    if error.failure is ExtractionFailure.STATUS_NOT_COLLECTED:
        return "the cluster has not reported the workload's status yet (Work not applied, or cluster not Ready)"
    if error.failure is ExtractionFailure.SYNTAX:
        return "a rule is a kubectl JSONPath template: put expressions in braces, e.g. {.jobStatus.jobId}"
    if error.failure is ExtractionFailure.INVALID_VALUE:
        return ("a label value has at most 63 characters among A-Z a-z 0-9 - _ . and starts and ends with a "
                "letter or digit; select a scalar field that fits")
    return ""


# ------------------------------------------------------------------------------------------------ preview


def _failover_block(policy_or_binding_failover: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``spec.failover`` from a policy/binding, its spec, or the failover block itself."""
    source = as_map(policy_or_binding_failover)
    if "spec" in source:
        source = as_map(source.get("spec"))
    if "failover" in source and not ({"application", "cluster"} & set(source)):
        source = as_map(source.get("failover"))
    return source


def _preview_rules(rules: list[StatePreservationRule], status: Any, cluster: str | None) -> tuple[RulePreview, ...]:
    out = []
    for rule in rules:
        try:
            value = extract_rule(rule, status, cluster=cluster)
        except StateExtractionError as error:
            out.append(RulePreview(rule.alias, rule.json_path, None, error, hint_for(error, status)))
        else:
            out.append(RulePreview(rule.alias, rule.json_path, value))
    return tuple(out)


def _hypothetical_spec(binding_spec: Mapping[str, Any], from_cluster: str | None, target: str, purge_mode: str,
                       state: Mapping[str, str]) -> dict[str, Any]:
    before = clusters_before_failover(binding_spec)
    remaining = [c for c in _list(binding_spec.get("clusters"))
                 if isinstance(c, Mapping) and c.get("name") != from_cluster]
    if target not in [c.get("name") for c in remaining]:
        remaining.append({"name": target})
    task: dict[str, Any] = {"fromCluster": from_cluster or "", "purgeMode": purge_mode,
                            "preservedLabelState": dict(state), "clustersBeforeFailover": before}
    spec = dict(binding_spec)
    spec["clusters"] = remaining
    spec["gracefulEvictionTasks"] = [*_list(binding_spec.get("gracefulEvictionTasks")), task]
    return spec


def preview(
    policy_or_binding_failover: Mapping[str, Any] | None,
    reflected_status: Any,
    binding_spec: Mapping[str, Any],
    target_cluster: str | None = None,
    *,
    from_cluster: str | None = None,
    gate: bool = True,
    no_execute_taint_eviction_purge_mode: str = PURGE_MODE_GRACEFULLY,
) -> PreviewReport:
    """The preview report.

    ``policy_or_binding_failover``: a ``spec.failover`` block, or a policy/binding (or its spec) carrying one.
    ``reflected_status``: the reflected status of ``from_cluster`` (``None``: not collected yet).
    ``binding_spec``: the binding's ``spec`` (its clusters, requiredBy and tasks). ``from_cluster`` defaults
    to the binding's only cluster; ``target_cluster`` to a new cluster. ``gate``: the
    ``StatefulFailoverInjection`` feature gate; ``no_execute_taint_eviction_purge_mode``: the controller flag
    used by taint evictions when ``failover.cluster`` is not set.
    """
    failover = _failover_block(policy_or_binding_failover)
    current = [str(as_map(c).get("name")) for c in _list(binding_spec.get("clusters")) if as_map(c).get("name")]
    notes: list[str] = []
    if from_cluster is None:
        if len(current) == 1:
            from_cluster = current[0]
        elif current:
            notes.append(f"the workload runs in {len(current)} clusters ({', '.join(current)}); the failing "
                         "cluster was not given, so the injection verdict assumes none of them fails")
        else:
            notes.append("the binding is not scheduled to any cluster")
    target = target_cluster or UNKNOWN_TARGET
    if target_cluster is None:
        notes.append("no target cluster given: assuming the scheduler picks a cluster the workload does not run in")
    if not gate:
        notes.append(f"the feature gate {STATEFUL_FAILOVER_INJECTION_GATE} is off: no state is extracted or injected")

    blocks = []
    for trigger in ("cluster", "application"):
        block = failover.get(trigger)
        configured = isinstance(block, Mapping)
        if trigger == "cluster":
            if configured:
                mode = str(as_map(block).get("purgeMode") or PURGE_MODE_GRACEFULLY)
            else:
                mode = PURGE_MODE_DIRECTLY if no_execute_taint_eviction_purge_mode == PURGE_MODE_DIRECTLY \
                    else PURGE_MODE_GRACEFULLY
        else:
            mode = str(as_map(block).get("purgeMode") or "")
            if not configured:
                blocks.append(BlockPreview("application", False, "", (), False,
                                           "application failover is not configured (spec.failover.application)"))
                continue
        raw_rules = _list(as_map(as_map(block).get("statePreservation")).get("rules"))
        rules = [StatePreservationRule.of(r) for r in raw_rules if isinstance(r, Mapping)]
        previews = _preview_rules(rules, reflected_status, from_cluster) if gate else ()
        warnings = []
        if not configured:
            warnings.append("spec.failover.cluster is not set: taint evictions use --no-execute-taint-eviction-"
                            f"purge-mode ({mode}) and preserve no state")
        elif not rules:
            warnings.append("no statePreservation rules: nothing is preserved")
        if rules and mode != PURGE_MODE_DIRECTLY:
            warnings.append(f"purgeMode {mode or '<unset>'}: the state is extracted (and a failure blocks the "
                            f"eviction) but never injected; only {PURGE_MODE_DIRECTLY} injects")
        state = {p.alias: p.value for p in previews if p.value is not None}
        if not gate:
            inject, reason = False, f"the feature gate {STATEFUL_FAILOVER_INJECTION_GATE} is disabled"
        elif not rules:
            inject, reason = False, "there is no state to inject"
        else:
            spec = _hypothetical_spec(binding_spec, from_cluster, target, mode, state)
            inject, reason = should_inject(spec, target)
            if any(not p.ok for p in previews):
                verdict = "would apply" if inject else "would not apply"
                inject, reason = False, (f"the extraction fails now, so the eviction would wait instead (D6); once "
                                         f"it succeeds, injection {verdict}: {reason}")
        blocks.append(BlockPreview(trigger, configured, mode, previews, inject, reason, tuple(warnings)))
    return PreviewReport(from_cluster, target, reflected_status is not None, gate, tuple(blocks), tuple(notes))


def preview_binding(binding: Mapping[str, Any], target_cluster: str | None = None, *,
                    from_cluster: str | None = None, gate: bool = True,
                    no_execute_taint_eviction_purge_mode: str = PURGE_MODE_GRACEFULLY) -> PreviewReport:
    """:func:`preview` for a whole (Cluster)ResourceBinding: its ``spec.failover``, its spec, and the
    reflected status of ``from_cluster`` (default: its only cluster) from ``status.aggregatedStatus``."""
    spec = as_map(binding.get("spec"))
    if from_cluster is None:
        names = [str(as_map(c).get("name")) for c in _list(spec.get("clusters")) if as_map(c).get("name")]
        from_cluster = names[0] if len(names) == 1 else None
    status = status_of(binding, from_cluster) if from_cluster else None
    return preview(as_map(spec.get("failover")), status, spec, target_cluster, from_cluster=from_cluster, gate=gate,
                   no_execute_taint_eviction_purge_mode=no_execute_taint_eviction_purge_mode)


# ------------------------------------------------------------------------------------------------ text


def render_preview(report: PreviewReport) -> str:
    """The report as text (what ``flotilla failover preview`` prints)."""
    lines = []
    source = report.from_cluster or "<unknown>"
    lines.append(f"Failover preview: from cluster {source} to {_cluster_label(report.target_cluster)}")
    collected = "collected" if report.status_collected else "NOT collected yet"
    lines.append(f"Reflected status of cluster {source}: {collected}")
    for note in report.notes:
        lines.append(f"Note: {note}")
    for block in report.blocks:
        lines.append("")
        title = _TRIGGER_TITLES[block.trigger]
        if block.trigger == "application" and not block.configured:
            lines.append(f"{title}: not configured")
            continue
        lines.append(f"{title}: purgeMode {block.purge_mode or '<unset>'}")
        for warning in block.warnings:
            lines.append(f"  warning: {warning}")
        for rule in block.rules:
            lines.append(f"  rule {rule.alias}: {rule.json_path}")
            if rule.error is None:
                lines.append(f"    value: {rule.value}")
            else:
                lines.append(f"    error: {rule.error.reason}")
                if rule.hint:
                    lines.append(f"    hint: {rule.hint}")
        if block.rules:
            state = block.state
            if state is None:
                lines.append("  state: extraction FAILS: the eviction would wait and retry (Warning Event "
                             "StatePreservationFailed) until it succeeds or --state-preservation-timeout passes")
            else:
                rendered = ", ".join(f"{k}={v}" for k, v in state.items())
                lines.append(f"  state: would preserve {rendered}")
        verdict = "yes" if block.inject else "no"
        lines.append(f"  injection into {_cluster_label(report.target_cluster)}: {verdict}: {block.inject_reason}")
    return "\n".join(lines) + "\n"


def _cluster_label(name: str) -> str:
    return "a new cluster" if name == UNKNOWN_TARGET else f"cluster {name}"
