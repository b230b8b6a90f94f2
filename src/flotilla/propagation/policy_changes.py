"""Which templates and bindings a (Cluster)PropagationPolicy change affects.

Pure functions over plain objects (the detector reads them from its informer caches):

* :func:`selector_scopes` - the distinct ``(apiVersion, kind, namespace)`` a policy selects (where
  templates carrying its claim are looked for when it is deleted);
* :func:`bound_template_keys` / :func:`unmatched_bindings` - templates of the bindings labelled with
  a policy's permanent id: re-reconciled after a policy update, or released when the policy's
  selectors no longer match them;
* :func:`unclaimed_matching` - unclaimed templates the policy matches (Karmada keeps a "waiting
  list" of templates no policy matched; looking at the caches gives the same set and survives
  restarts);
* :func:`preemption_targets` - templates named by a ``preemption: Always`` policy that it takes over;
* :func:`missing_dependent_overrides` - ``spec.dependentOverrides`` that do not exist yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from flotilla.kube.objects import as_str, meta_of, spec_of
from flotilla.policy.claims import (
    CPP_PERMANENT_ID_LABEL,
    PP_PERMANENT_ID_LABEL,
    claim_of,
    claimed_by_other_controller,
    policy_permanent_id,
)
from flotilla.policy.matching import (
    can_preempt,
    is_cluster_policy,
    is_deleting,
    policy_matches,
    resource_matches_selector,
)

__all__ = [
    "TemplateKey",
    "SKIPPED_GROUPS",
    "bound_template_keys",
    "detector_watches",
    "missing_dependent_overrides",
    "policy_claim_label",
    "preemption_targets",
    "selector_scopes",
    "selector_types",
    "template_key",
    "template_key_of_binding",
    "unclaimed_matching",
    "unmatched_bindings",
]


class TemplateKey(NamedTuple):
    """A resource template's identity across types: ``apiVersion``, ``kind``, namespace, name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind}({self.api_version}) {where}"


def _selectors(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    selectors = spec_of(policy).get("resourceSelectors")
    return [s for s in selectors if isinstance(s, Mapping)] if isinstance(selectors, list) else []


def template_key(obj: Mapping[str, Any]) -> TemplateKey:
    meta = meta_of(obj)
    return TemplateKey(as_str(obj.get("apiVersion")), as_str(obj.get("kind")), as_str(meta.get("namespace")),
                       as_str(meta.get("name")))


def template_key_of_binding(binding: Mapping[str, Any]) -> TemplateKey | None:
    """The template a binding was made for (``spec.resource``); None when it names none."""
    ref = spec_of(binding).get("resource")
    if not isinstance(ref, Mapping) or not ref.get("kind") or not ref.get("name"):
        return None
    return TemplateKey(as_str(ref.get("apiVersion")), as_str(ref.get("kind")), as_str(ref.get("namespace")),
                       as_str(ref.get("name")))


def selector_scopes(policy: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Distinct ``(apiVersion, kind, namespace)`` of the policy's selectors, in order (namespace ""
    for a CPP selector without one: every namespace, or a cluster-scoped kind)."""
    seen: list[tuple[str, str, str]] = []
    for s in _selectors(policy):
        scope = (as_str(s.get("apiVersion")), as_str(s.get("kind")), as_str(s.get("namespace")))
        if scope[0] and scope[1] and scope not in seen:
            seen.append(scope)
    return seen


def selector_types(policies: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """Every ``(apiVersion, kind)`` the given policies select."""
    return {(a, k) for p in policies for a, k, _ in selector_scopes(p)}


def policy_claim_label(policy: Mapping[str, Any]) -> dict[str, str]:
    """``{id label: id}``: the label selector of everything the policy claims (empty without an id)."""
    policy_id = policy_permanent_id(policy)
    if not policy_id:
        return {}
    return {(CPP_PERMANENT_ID_LABEL if is_cluster_policy(policy) else PP_PERMANENT_ID_LABEL): policy_id}


def _carries(obj: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    have = meta_of(obj).get("labels")
    have = have if isinstance(have, Mapping) else {}
    return bool(labels) and all(have.get(k) == v for k, v in labels.items())


def _bindings_of(policy: Mapping[str, Any], bindings: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    labels = policy_claim_label(policy)
    out = []
    for b in bindings:
        if not _carries(b, labels):
            continue
        # a PP only claims bindings in its own namespace
        if not is_cluster_policy(policy) and meta_of(b).get("namespace") != meta_of(policy).get("namespace"):
            continue
        out.append(b)
    return out


def bound_template_keys(policy: Mapping[str, Any], bindings: Iterable[Mapping[str, Any]]) -> list[TemplateKey]:
    """Templates of the bindings labelled with the policy's id (re-reconciled after a policy change)."""
    keys: list[TemplateKey] = []
    for b in _bindings_of(policy, bindings):
        key = template_key_of_binding(b)
        if key is not None and key not in keys:
            keys.append(key)
    return keys


def unmatched_bindings(
    policy: Mapping[str, Any],
    bindings: Iterable[Mapping[str, Any]],
    template_lookup: Callable[[TemplateKey], Mapping[str, Any] | None],
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """``(binding, template)`` pairs, labelled with the policy's id, whose template still exists
    but is no longer matched by the policy's selectors: both lose the claim."""
    out = []
    for b in _bindings_of(policy, bindings):
        key = template_key_of_binding(b)
        template = template_lookup(key) if key is not None else None
        if template is None or policy_matches(template, policy):
            continue
        out.append((b, template))
    return out


def unclaimed_matching(policy: Mapping[str, Any], templates: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Templates not claimed by any policy (nor by another controller) that ``policy`` matches.

    A PP only considers templates in its namespace.
    """
    namespace = as_str(meta_of(policy).get("namespace"))
    cluster_policy = is_cluster_policy(policy)
    out = []
    for t in templates:
        if not cluster_policy and meta_of(t).get("namespace") != namespace:
            continue
        if claim_of(t) is not None or claimed_by_other_controller(t):
            continue
        if policy_matches(t, policy):
            out.append(t)
    return out


def preemption_targets(
    policy: Mapping[str, Any],
    templates: Iterable[Mapping[str, Any]],
    claimer: Callable[[Mapping[str, Any]], Mapping[str, Any] | None],
    *,
    feature_gate_enabled: bool,
) -> list[Mapping[str, Any]]:
    """Templates ``policy`` (with ``preemption: Always``) takes from the policy claiming them (preemption).

    Only templates its selectors name (``name`` set) are candidates, and never ones being deleted
    or unclaimed (those are matched normally). ``claimer(template)`` returns the policy object that
    claims the template now (None when it cannot be found; such a template is left alone).
    """
    if not feature_gate_enabled:
        return []
    named = [s for s in _selectors(policy) if as_str(s.get("name"))]
    out = []
    for t in templates:
        if is_deleting(t) or not any(resource_matches_selector(t, s) for s in named):
            continue
        if claim_of(t) is None:
            continue
        current = claimer(t)
        if current is None:
            continue
        if can_preempt(current, policy, feature_gate_enabled=True):
            out.append(t)
    return out


def missing_dependent_overrides(policy: Mapping[str, Any], existing_names: Iterable[str]) -> list[str]:
    """Names in ``spec.dependentOverrides`` that are not among ``existing_names`` (the policy waits)."""
    names = spec_of(policy).get("dependentOverrides")
    if not isinstance(names, list):
        return []
    have = set(existing_names)
    return [n for n in names if isinstance(n, str) and n and n not in have]


#: API groups whose objects are never resource templates (Karmada's own API, events, leases).
SKIPPED_GROUPS: frozenset[str] = frozenset({
    "cluster.karmada.io", "policy.karmada.io", "work.karmada.io", "config.karmada.io",
    "networking.karmada.io", "autoscaling.karmada.io", "remedy.karmada.io", "apps.karmada.io",
    "events.k8s.io", "coordination.k8s.io",
})


def detector_watches(api_version: str, kind: str) -> bool:
    """Whether objects of this type can be resource templates (Karmada skips its own API groups,
    ``events.k8s.io``, core ``Event`` and ``coordination.k8s.io``)."""
    group = api_version.rpartition("/")[0]
    if group in SKIPPED_GROUPS:
        return False
    return not (group == "" and kind == "Event")
