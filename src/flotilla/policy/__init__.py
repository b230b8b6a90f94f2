"""Policies: what Karmada's PropagationPolicies and OverridePolicies decide about a template, as pure functions.

Which policy claims a template, the claim it leaves on it, the names Karmada derives from it, and how overrides
change the manifest sent to each cluster. What happens to the claimed template afterwards (its binding, its Works,
their status) is :mod:`flotilla.propagation`.

* :mod:`flotilla.policy.matching` - which (Cluster)PropagationPolicy claims a template, preemption,
  lazy activation, cluster affinity.
* :mod:`flotilla.policy.claims` - the claim labels/annotations and the patches that write/remove them.
* :mod:`flotilla.policy.naming` - binding, Work and execution-namespace names.
* :mod:`flotilla.policy.overrides` - (Cluster)OverridePolicy application and the applied-overrides
  annotations.
"""

from flotilla.policy.claims import ClaimRef, claim, claim_of, claim_patch, unclaim, unclaim_patch
from flotilla.policy.matching import (
    ImplicitPriority,
    best_policy,
    can_preempt,
    resource_matches_selector,
    selector_precision,
)
from flotilla.policy.naming import generate_binding_name, generate_execution_space_name, generate_work_name
from flotilla.policy.overrides import (
    AppliedOverride,
    OverrideError,
    applied_override_annotations,
    apply_overrides,
)

__all__ = [
    "AppliedOverride",
    "ClaimRef",
    "ImplicitPriority",
    "OverrideError",
    "applied_override_annotations",
    "apply_overrides",
    "best_policy",
    "can_preempt",
    "claim",
    "claim_of",
    "claim_patch",
    "generate_binding_name",
    "generate_execution_space_name",
    "generate_work_name",
    "resource_matches_selector",
    "selector_precision",
    "unclaim",
    "unclaim_patch",
]
