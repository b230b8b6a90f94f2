"""Which policy propagates a resource template: Karmada's resource detector decisions.

Pure functions on plain JSON objects (``dict``), no I/O, inputs never mutated.

Resource selectors (``ResourceSelectorPriority``)
    A selector mismatches when ``apiVersion`` or ``kind`` differ (exact strings) or when it names a
    namespace other than the template's. Otherwise a selector with a ``name`` matches only that name
    (its ``labelSelector`` is then ignored) with precision :attr:`ImplicitPriority.MATCH_NAME`; a
    selector without ``labelSelector`` matches everything (:attr:`~ImplicitPriority.MATCH_ALL`); a
    label selector that matches (an empty ``{}`` matches everything) gives
    :attr:`~ImplicitPriority.MATCH_LABEL_SELECTOR`. A malformed label selector matches nothing. A
    policy's precision for a template is the best over its selectors.

Best policy (``getHighestPriority(Cluster)PropagationPolicy``)
    Among the policies that match (precision > 0) and are not being deleted: highest explicit
    ``spec.priority`` (absent = 0); tie -> highest precision; tie -> smallest name. PropagationPolicies
    are only those of the template's namespace, and any of them beats every ClusterPropagationPolicy
    (CPPs are consulted only when no PP matches); cluster-scoped templates only see CPPs.

Preemption (``preemption.go``, feature gate ``PolicyPreemption``, off by default in Karmada)
    Only a policy with ``spec.preemption: Always`` preempts, and only templates its selectors name.
    PP over PP: strictly higher priority. PP over CPP: always. CPP over CPP: strictly higher priority.
    CPP over PP: never.

Lazy activation
    A policy with ``spec.activationPreference: Lazy`` claims templates as usual, but a reconcile
    caused by Karmada's own change (:func:`flotilla.policy.claims.resource_change_by_karmada`) does not
    refresh the binding: only a user change to the template publishes policy changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from flotilla.kube.metadata import string_labels
from flotilla.kube.objects import as_str, meta_of, spec_of
from flotilla.kube.selectors import (
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
)
from flotilla.policy.naming import is_reserved_namespace

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_SKIPPED_PROPAGATING_NAMESPACES",
    "LAZY_ACTIVATION",
    "PREEMPT_ALWAYS",
    "ImplicitPriority",
    "best_cluster_propagation_policy",
    "best_policy",
    "best_propagation_policy",
    "can_preempt",
    "detector_handles",
    "explicit_priority",
    "is_cluster_policy",
    "is_deleting",
    "is_lazy_activation",
    "override_policy_precision",
    "policies_to_requeue_on_deprioritize",
    "policy_matches",
    "policy_precision",
    "resource_matches_selector",
    "resource_matches_selectors",
    "selector_precision",
    "selectors_precision",
    "skips_binding_refresh",
]

PREEMPT_ALWAYS = "Always"
LAZY_ACTIVATION = "Lazy"

#: ``--skipped-propagating-namespaces`` default (each entry is an anchored regular expression).
DEFAULT_SKIPPED_PROPAGATING_NAMESPACES: tuple[str, ...] = ("kube-.*",)


class ImplicitPriority(IntEnum):
    """How precisely a resource selector matches a template (``util.ImplicitPriority``)."""

    MISMATCH = 0
    MATCH_ALL = 1
    MATCH_LABEL_SELECTOR = 2
    MATCH_NAME = 3


# ---------------------------------------------------------------------------------------------
# Small accessors
# ---------------------------------------------------------------------------------------------


def _name(obj: Mapping[str, Any]) -> str:
    return as_str(meta_of(obj).get("name"))


def _namespace(obj: Mapping[str, Any]) -> str:
    return as_str(meta_of(obj).get("namespace"))


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """The object has a ``metadata.deletionTimestamp``."""
    return bool(meta_of(obj).get("deletionTimestamp"))


def is_cluster_policy(policy: Mapping[str, Any]) -> bool:
    """ClusterPropagationPolicy (by ``kind``; without a kind, a policy without namespace)."""
    kind = policy.get("kind")
    if kind in ("ClusterPropagationPolicy", "ClusterOverridePolicy"):
        return True
    if kind in ("PropagationPolicy", "OverridePolicy"):
        return False
    return not _namespace(policy)


def explicit_priority(policy: Mapping[str, Any]) -> int:
    """``spec.priority`` (absent or null counts as 0)."""
    priority = spec_of(policy).get("priority")
    return priority if isinstance(priority, int) and not isinstance(priority, bool) else 0


def _selectors(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    selectors = spec_of(policy).get("resourceSelectors")
    if not isinstance(selectors, list):
        return []
    return [s for s in selectors if isinstance(s, Mapping)]


def _label_selector(raw: Any) -> LabelSelector:
    try:
        return label_selector_from_dict(raw)
    except SelectorError:
        return LabelSelector.nothing()


# ---------------------------------------------------------------------------------------------
# Resource selectors
# ---------------------------------------------------------------------------------------------


def selector_precision(template: Mapping[str, Any], selector: Mapping[str, Any]) -> ImplicitPriority:
    """How precisely ``selector`` (a ``ResourceSelector``) matches ``template``."""
    if as_str(template.get("apiVersion")) != as_str(selector.get("apiVersion")) or as_str(
        template.get("kind")
    ) != as_str(selector.get("kind")):
        return ImplicitPriority.MISMATCH
    selector_namespace = as_str(selector.get("namespace"))
    if selector_namespace and selector_namespace != _namespace(template):
        return ImplicitPriority.MISMATCH
    selector_name = as_str(selector.get("name"))
    if selector_name:
        return ImplicitPriority.MATCH_NAME if selector_name == _name(template) else ImplicitPriority.MISMATCH
    raw = selector.get("labelSelector")
    if raw is None:
        return ImplicitPriority.MATCH_ALL
    if _label_selector(raw).matches(string_labels(template)):
        return ImplicitPriority.MATCH_LABEL_SELECTOR
    return ImplicitPriority.MISMATCH


def resource_matches_selector(template: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    return selector_precision(template, selector) > ImplicitPriority.MISMATCH


def selectors_precision(
    template: Mapping[str, Any], selectors: Iterable[Mapping[str, Any]]
) -> ImplicitPriority:
    """Best precision over ``selectors`` (MISMATCH for none)."""
    return max((selector_precision(template, s) for s in selectors), default=ImplicitPriority.MISMATCH)


def resource_matches_selectors(template: Mapping[str, Any], selectors: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any selector matches (an empty list matches nothing)."""
    return any(resource_matches_selector(template, s) for s in selectors)


def policy_precision(template: Mapping[str, Any], policy: Mapping[str, Any]) -> ImplicitPriority:
    """A (Cluster)PropagationPolicy's implicit priority for ``template``."""
    return selectors_precision(template, _selectors(policy))


def policy_matches(template: Mapping[str, Any], policy: Mapping[str, Any]) -> bool:
    """Whether the policy's selectors still match ``template`` (``ResourceMatchSelectors``)."""
    return resource_matches_selectors(template, _selectors(policy))


def override_policy_precision(template: Mapping[str, Any], policy: Mapping[str, Any]) -> ImplicitPriority:
    """An (Cluster)OverridePolicy's precision: one without selectors matches all (MATCH_ALL)."""
    selectors = _selectors(policy)
    if not selectors:
        return ImplicitPriority.MATCH_ALL
    return selectors_precision(template, selectors)


# ---------------------------------------------------------------------------------------------
# Best policy
# ---------------------------------------------------------------------------------------------


def _highest_priority(
    template: Mapping[str, Any], policies: Iterable[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    # A left fold exactly like compare.go (order-independent as long as names are unique).
    best: Mapping[str, Any] | None = None
    best_explicit = -(2**31)
    best_implicit = ImplicitPriority.MISMATCH
    for policy in policies:
        implicit = policy_precision(template, policy)
        if implicit <= ImplicitPriority.MISMATCH:
            continue
        explicit = explicit_priority(policy)
        if best is None or best_explicit < explicit:
            best, best_explicit, best_implicit = policy, explicit, implicit
            continue
        if best_explicit == explicit:
            if implicit > best_implicit:
                best, best_implicit = policy, implicit
            elif implicit == best_implicit and not _name(best) < _name(policy):
                best = policy
    return best


def best_propagation_policy(
    template: Mapping[str, Any], policies: Iterable[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The PropagationPolicy that would claim an unclaimed ``template``, or None.

    Only PPs of the template's namespace that are not being deleted are considered; a cluster-scoped
    template never gets a PP.
    """
    namespace = _namespace(template)
    if not namespace:
        return None
    candidates = [p for p in policies if _namespace(p) == namespace and not is_deleting(p)]
    return _highest_priority(template, candidates)


def best_cluster_propagation_policy(
    template: Mapping[str, Any], cluster_policies: Iterable[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The ClusterPropagationPolicy that would claim ``template``, or None (deleting ones skipped)."""
    return _highest_priority(template, [p for p in cluster_policies if not is_deleting(p)])


def best_policy(
    template: Mapping[str, Any],
    policies: Iterable[Mapping[str, Any]],
    cluster_policies: Iterable[Mapping[str, Any]],
) -> tuple[Mapping[str, Any] | None, bool]:
    """``(policy, is_cluster_policy)`` for an **unclaimed** template; ``(None, False)`` when none.

    Karmada does not re-run this for a template that is already claimed (see
    :func:`flotilla.policy.claims.claim_of`); only preemption moves a claim.
    """
    policy = best_propagation_policy(template, policies)
    if policy is not None:
        return policy, False
    cluster_policy = best_cluster_propagation_policy(template, cluster_policies)
    if cluster_policy is not None:
        return cluster_policy, True
    return None, False


# ---------------------------------------------------------------------------------------------
# Preemption
# ---------------------------------------------------------------------------------------------


def _same_policy(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if is_cluster_policy(a) != is_cluster_policy(b):
        return False
    if is_cluster_policy(a):
        return _name(a) == _name(b)
    return _name(a) == _name(b) and _namespace(a) == _namespace(b)


def can_preempt(
    current_claim: Mapping[str, Any] | None,
    candidate: Mapping[str, Any],
    *,
    feature_gate_enabled: bool = True,
) -> bool:
    """Whether ``candidate`` takes a template away from the policy that claims it now.

    ``current_claim`` is the claiming policy object (None: the template is not claimed, so there is
    nothing to preempt; it is matched normally). For a CPP claim only its identity matters: a PP
    preempts any CPP regardless of priority. ``feature_gate_enabled`` is Karmada's
    ``PolicyPreemption`` gate (``spec.preemption: Always`` is inert without it).
    """
    if not feature_gate_enabled or spec_of(candidate).get("preemption") != PREEMPT_ALWAYS:
        return False
    if current_claim is None or _same_policy(current_claim, candidate):
        return False
    candidate_cluster = is_cluster_policy(candidate)
    current_cluster = is_cluster_policy(current_claim)
    if not candidate_cluster and current_cluster:
        return True
    if candidate_cluster and not current_cluster:
        return False
    return explicit_priority(candidate) > explicit_priority(current_claim)


def policies_to_requeue_on_deprioritize(
    old_policy: Mapping[str, Any],
    new_policy: Mapping[str, Any],
    same_scope_policies: Iterable[Mapping[str, Any]],
) -> list[Mapping[str, Any]]:
    """Policies to re-enqueue after ``old_policy``'s priority dropped to ``new_policy``'s.

    Those with an explicitly set priority, ``preemption: Always`` and a priority strictly between
    the new and the old value, highest priority first (Karmada does not order equal priorities; here
    they are ordered by namespace and name). ``same_scope_policies`` are the PPs of the policy's
    namespace, or all CPPs.
    """
    low, high = explicit_priority(new_policy), explicit_priority(old_policy)
    selected = [
        p
        for p in same_scope_policies
        if isinstance(spec_of(p).get("priority"), int)
        and spec_of(p).get("preemption") == PREEMPT_ALWAYS
        and low < explicit_priority(p) < high
    ]
    return sorted(selected, key=lambda p: (-explicit_priority(p), _namespace(p), _name(p)))


# ---------------------------------------------------------------------------------------------
# Lazy activation and the detector's event filter
# ---------------------------------------------------------------------------------------------


def is_lazy_activation(policy: Mapping[str, Any] | None) -> bool:
    """``spec.activationPreference == "Lazy"``."""
    return policy is not None and spec_of(policy).get("activationPreference") == LAZY_ACTIVATION


def skips_binding_refresh(policy: Mapping[str, Any], resource_change_by_karmada: bool) -> bool:
    """Whether ApplyPolicy stops after claiming (the binding is not created/updated)."""
    return resource_change_by_karmada and is_lazy_activation(policy)


def detector_handles(
    obj: Mapping[str, Any],
    skipped_namespaces: Sequence[str] = DEFAULT_SKIPPED_PROPAGATING_NAMESPACES,
) -> bool:
    """The detector's event filter: False for objects in reserved namespaces (``karmada-system``,
    ``karmada-cluster``, ``karmada-es-*``), in namespaces matching ``^<pattern>$`` for one of
    ``skipped_namespaces`` (default ``kube-.*``), and for ``kube-system/extension-apiserver-authentication`` ConfigMap."""
    namespace = _namespace(obj)
    if is_reserved_namespace(namespace):
        return False
    # Upstream compiles "^<pattern>$" verbatim, so an alternation is anchored only at its ends.
    if any(re.search(f"^{pattern}$", namespace) for pattern in skipped_namespaces):
        return False
    return not (
        namespace == "kube-system"
        and obj.get("kind") == "ConfigMap"
        and _name(obj) == "extension-apiserver-authentication"
    )
