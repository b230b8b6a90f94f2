"""Karmada's mutating and validating webhooks as admission plugins of the Flotilla API server.

>>> from flotilla.apiserver.admission import Admission
>>> admission = Admission()
>>> register_karmada_admission(admission)

Every plugin defaults in ``default`` and validates in ``validate`` with Karmada's field paths and
messages, plus Flotilla's divergences D3 (state-preservation checks), D12 (no empty ``cluster``
spread) and D13 (ClusterTaintPolicy taints validated), listed in ``docs/karmada-compatibility.md``. On an update
that leaves ``spec`` as stored (status writes, label and finalizer edits) spec defaulting and validation are
skipped, so objects stored before a rule existed stay updatable.

The ResourceInterpreterCustomization conflict check needs the stored RICs: pass
``existing_rics`` (e.g. ``RICIndex().items``, attached to the server's storage after start-up with
``await index.attach(server.storage)``); without it that one check is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flotilla.apiserver.admission import Admission
from flotilla.apiserver.webhooks.cluster import ClusterAdmission
from flotilla.apiserver.webhooks.cluster_taint_policy import ClusterTaintPolicyAdmission
from flotilla.apiserver.webhooks.interpreter_customization import InterpreterCustomizationAdmission, RICIndex
from flotilla.apiserver.webhooks.override_policy import OverridePolicyAdmission
from flotilla.apiserver.webhooks.propagation_policy import PropagationPolicyAdmission
from flotilla.apiserver.webhooks.resource_binding import ResourceBindingAdmission

POLICY_GROUP = "policy.karmada.io"
WORK_GROUP = "work.karmada.io"
CLUSTER_GROUP = "cluster.karmada.io"
CONFIG_GROUP = "config.karmada.io"


def register_karmada_admission(
    admission: Admission,
    *,
    allow_no_execute_taint_policy: bool = True,
    existing_rics: Callable[[], Iterable[Mapping[str, Any]]] | None = None,
    policy_finalizers: bool = True,
    cluster_resource_modeling: bool = True,
) -> None:
    """Register the admission plugins of every Karmada kind Flotilla serves.

    ``allow_no_execute_taint_policy``: ClusterTaintPolicies may carry NoExecute taints (Flotilla's
    default, D1; ``--allow-no-execute-taint-policy=false`` gives Karmada's behaviour).
    ``existing_rics``: returns the stored ResourceInterpreterCustomizations, for the check that no
    two of them customize the same operation of the same kind.
    ``policy_finalizers``: add Karmada's policy-controller finalizer to new (Cluster)PropagationPolicies
    (the controller that handles policy deletion must then remove it).
    ``cluster_resource_modeling``: gate CustomizedClusterResourceModeling (default resource models
    on new Clusters, standardized models on every write).
    """
    admission.register(POLICY_GROUP, "PropagationPolicy",
                       PropagationPolicyAdmission(cluster_scoped=False, add_finalizer=policy_finalizers))
    admission.register(POLICY_GROUP, "ClusterPropagationPolicy",
                       PropagationPolicyAdmission(cluster_scoped=True, add_finalizer=policy_finalizers))
    admission.register(POLICY_GROUP, "OverridePolicy", OverridePolicyAdmission(cluster_scoped=False))
    admission.register(POLICY_GROUP, "ClusterOverridePolicy", OverridePolicyAdmission(cluster_scoped=True))
    admission.register(POLICY_GROUP, "ClusterTaintPolicy",
                       ClusterTaintPolicyAdmission(allow_no_execute=allow_no_execute_taint_policy))
    admission.register(CLUSTER_GROUP, "Cluster", ClusterAdmission(resource_modeling=cluster_resource_modeling))
    admission.register(WORK_GROUP, "ResourceBinding", ResourceBindingAdmission(cluster_scoped=False))
    admission.register(WORK_GROUP, "ClusterResourceBinding", ResourceBindingAdmission(cluster_scoped=True))
    admission.register(CONFIG_GROUP, "ResourceInterpreterCustomization",
                       InterpreterCustomizationAdmission(existing=existing_rics))


__all__ = ["RICIndex", "register_karmada_admission"]
