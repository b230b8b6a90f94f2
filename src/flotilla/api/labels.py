"""Well-known label keys, annotation keys, finalizers and taint keys of the Karmada API.

The values are the ones Karmada uses (so objects written by Karmada tools and by Flotilla are
interchangeable); the Flotilla-only keys at the end are marked as such. Import these constants
instead of spelling the strings out.
"""

from __future__ import annotations

from typing import Final

# ---------------------------------------------------------------------------------------------
# Policies (policy.karmada.io)
# ---------------------------------------------------------------------------------------------

#: Label with the UUID of a PropagationPolicy; set on the policy at creation (admission), then on
#: the templates, bindings and member objects it claims.
PROPAGATION_POLICY_PERMANENT_ID_LABEL: Final = "propagationpolicy.karmada.io/permanent-id"
#: Annotations naming the PropagationPolicy that claims a template (also on its binding and copies).
PROPAGATION_POLICY_NAMESPACE_ANNOTATION: Final = "propagationpolicy.karmada.io/namespace"
PROPAGATION_POLICY_NAME_ANNOTATION: Final = "propagationpolicy.karmada.io/name"

#: Label with the UUID of a ClusterPropagationPolicy (same life cycle as the PP label).
CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL: Final = "clusterpropagationpolicy.karmada.io/permanent-id"
#: Annotation naming the ClusterPropagationPolicy that claims a template.
CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION: Final = "clusterpropagationpolicy.karmada.io/name"

#: Namespace label: ``"true"`` keeps the namespace from being propagated automatically.
NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL: Final = "namespace.karmada.io/skip-auto-propagation"

#: Binding annotation: the JSON of the placement the scheduler last scheduled with.
POLICY_PLACEMENT_ANNOTATION: Final = "policy.karmada.io/applied-placement"
#: Work annotations: JSON ``[{policyName, overriders}]`` of the applied (cluster) override policies.
APPLIED_OVERRIDES_ANNOTATION: Final = "policy.karmada.io/applied-overrides"
APPLIED_CLUSTER_OVERRIDES_ANNOTATION: Final = "policy.karmada.io/applied-cluster-overrides"

# ---------------------------------------------------------------------------------------------
# Bindings and Works (work.karmada.io)
# ---------------------------------------------------------------------------------------------

#: Label with the UUID of a ResourceBinding (set by admission when missing); Works are found by it.
RESOURCE_BINDING_PERMANENT_ID_LABEL: Final = "resourcebinding.karmada.io/permanent-id"
#: Label with the UUID of a ClusterResourceBinding.
CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: Final = "clusterresourcebinding.karmada.io/permanent-id"
#: Label with the UUID of a Work (set by admission when missing).
WORK_PERMANENT_ID_LABEL: Final = "work.karmada.io/permanent-id"

#: Annotations on Works and member objects naming the owning (cluster) binding.
RESOURCE_BINDING_NAMESPACE_ANNOTATION: Final = "resourcebinding.karmada.io/namespace"
RESOURCE_BINDING_NAME_ANNOTATION: Final = "resourcebinding.karmada.io/name"
CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION: Final = "clusterresourcebinding.karmada.io/name"

#: Annotations on member objects naming the Work that manages them.
WORK_NAMESPACE_ANNOTATION: Final = "work.karmada.io/namespace"
WORK_NAME_ANNOTATION: Final = "work.karmada.io/name"

#: Annotation (template, Work, member manifest): ``overwrite`` or ``abort``.
CONFLICT_RESOLUTION_ANNOTATION: Final = "work.karmada.io/conflict-resolution"
CONFLICT_RESOLUTION_OVERWRITE: Final = "overwrite"
CONFLICT_RESOLUTION_ABORT: Final = "abort"

#: Independent binding annotation: JSON list of the objects it depends on.
DEPENDENCIES_ANNOTATION: Final = "resourcebinding.karmada.io/dependencies"
#: Prefix of the label an attached (dependency) binding carries per independent binding:
#: ``resourcebinding.karmada.io/depended-by-<hash>`` = the independent binding's permanent id.
DEPENDED_BY_LABEL_PREFIX: Final = "resourcebinding.karmada.io/depended-by-"

#: Binding label: any non-empty value makes the scheduler consider a binding without a policy.
BINDING_MANAGED_BY_LABEL: Final = "binding.karmada.io/managed-by"

# ---------------------------------------------------------------------------------------------
# Resource templates and member objects
# ---------------------------------------------------------------------------------------------

#: Member-object annotation: UID of the resource template.
RESOURCE_TEMPLATE_UID_ANNOTATION: Final = "resourcetemplate.karmada.io/uid"
#: Member-object annotation: the template's ``metadata.generation`` when the Work was built.
RESOURCE_TEMPLATE_GENERATION_ANNOTATION: Final = "resourcetemplate.karmada.io/generation"
#: Member-object annotations: sorted, comma-separated keys of the labels/annotations Karmada manages.
MANAGED_LABELS_ANNOTATION: Final = "resourcetemplate.karmada.io/managed-labels"
MANAGED_ANNOTATIONS_ANNOTATION: Final = "resourcetemplate.karmada.io/managed-annotations"
#: Template label: ``Always`` makes admission refuse to delete the template.
DELETION_PROTECTION_LABEL: Final = "resourcetemplate.karmada.io/deletion-protected"
DELETION_PROTECTION_ALWAYS: Final = "Always"
#: Template label (Deployment): ``"true"`` keeps the member cluster's replicas.
RETAIN_REPLICAS_LABEL: Final = "resourcetemplate.karmada.io/retain-replicas"
RETAIN_REPLICAS_VALUE: Final = "true"
#: Template label: claimed by another controller, the detector leaves the template alone.
RESOURCE_TEMPLATE_CLAIMED_BY_LABEL: Final = "resourcetemplate.karmada.io/claimed-by"

#: Member-object label: ``"true"`` when the object is owned by the control plane.
MANAGED_LABEL: Final = "karmada.io/managed"
MANAGED_LABEL_VALUE: Final = "true"
#: Label on execution namespaces and the member's ``karmada-cluster`` namespace: ``"true"``.
SYSTEM_LABEL: Final = "karmada.io/system"

# ---------------------------------------------------------------------------------------------
# Finalizers
# ---------------------------------------------------------------------------------------------

CLUSTER_CONTROLLER_FINALIZER: Final = "karmada.io/cluster-controller"
BINDING_CONTROLLER_FINALIZER: Final = "karmada.io/binding-controller"
CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER: Final = "karmada.io/cluster-resource-binding-controller"
EXECUTION_CONTROLLER_FINALIZER: Final = "karmada.io/execution-controller"
PROPAGATION_POLICY_CONTROLLER_FINALIZER: Final = "karmada.io/propagation-policy-controller"
CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER: Final = "karmada.io/cluster-propagation-policy-controller"
BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER: Final = "karmada.io/binding-dependencies-distributor"

# ---------------------------------------------------------------------------------------------
# Cluster taints (cluster.karmada.io)
# ---------------------------------------------------------------------------------------------

#: NoSchedule taint of a cordoned cluster (``karmadactl cordon``).
TAINT_CLUSTER_UNSCHEDULABLE: Final = "cluster.karmada.io/unschedulable"
#: NoSchedule taint while the cluster's Ready condition is False.
TAINT_CLUSTER_NOT_READY: Final = "cluster.karmada.io/not-ready"
#: NoSchedule taint while the cluster's Ready condition is Unknown.
TAINT_CLUSTER_UNREACHABLE: Final = "cluster.karmada.io/unreachable"

TAINT_EFFECT_NO_SCHEDULE: Final = "NoSchedule"
TAINT_EFFECT_PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
TAINT_EFFECT_NO_EXECUTE: Final = "NoExecute"

# ---------------------------------------------------------------------------------------------
# Namespaces
# ---------------------------------------------------------------------------------------------

#: Prefix of the execution namespace of a cluster: ``karmada-es-<cluster>``.
EXECUTION_SPACE_PREFIX: Final = "karmada-es-"
#: Namespace of Pull-mode leases and the default namespace of cluster secrets.
KARMADA_CLUSTER_NAMESPACE: Final = "karmada-cluster"
KARMADA_SYSTEM_NAMESPACE: Final = "karmada-system"

# ---------------------------------------------------------------------------------------------
# Flotilla-only keys (not used by Karmada)
# ---------------------------------------------------------------------------------------------

#: NoExecute taint set by a person (``flotilla fence NAME``): the cluster is known to be down, so
#: deleting its Works completes without contacting it (fencing, D2).
TAINT_CLUSTER_OUT_OF_SERVICE: Final = "cluster.flotilla.io/out-of-service"
#: Binding annotation: JSON ``{cluster, labels, fromCluster, at}`` of the last injected state (D4).
INJECTED_STATE_ANNOTATION: Final = "failover.flotilla.io/injected-state"
#: Binding annotation: JSON list, newest first, of the binding's last failovers (D22, failover/history.py).
FAILOVER_HISTORY_ANNOTATION: Final = "failover.flotilla.io/history"
#: Binding annotation: JSON of the last native restore decided for the binding (D20, failover/restore.py).
RESTORE_ANNOTATION: Final = "failover.flotilla.io/restore"
#: Binding annotation: JSON of a planned move in progress or done (D21, failover/moves.py).
MOVE_ANNOTATION: Final = "failover.flotilla.io/move"
#: Binding annotation: JSON ``{fromCluster, toCluster, path, at}`` of the savepoint a planned move took (D21).
MOVE_SAVEPOINT_ANNOTATION: Final = "failover.flotilla.io/move-savepoint"
#: Prefix of the (Cluster)PropagationPolicy annotations of native restore and planned moves (copied to bindings).
RESTORE_POLICY_ANNOTATION_PREFIX: Final = "restore.flotilla.io/"
#: Policy or template annotation: ``"false"`` makes a planned move an ordinary failover (no savepoint, D21).
SAVEPOINT_ON_MOVE_ANNOTATION: Final = "restore.flotilla.io/savepoint-on-move"
