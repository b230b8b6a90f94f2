"""Schemas shared by every kind: object metadata, label selectors, conditions, taints and tolerations."""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    CONDITION_TYPE_PATTERN,
    REASON_PATTERN,
    Schema,
    array,
    boolean,
    enum,
    free_object,
    int64,
    keyed_list,
    obj,
    string,
    string_list,
    string_map,
    string_set,
    timestamp,
)


def owner_reference() -> Schema:
    return obj(
        "Points at an object that owns this one. Owned objects are garbage collected when every owner is gone.",
        {
            "apiVersion": string("API version of the owner."),
            "kind": string("Kind of the owner."),
            "name": string("Name of the owner (always in the same namespace, or cluster-scoped)."),
            "uid": string("UID of the owner; the reference only counts while this UID exists."),
            "controller": boolean(
                "True when the owner is the managing controller. At most one owner may say so."
            ),
            "blockOwnerDeletion": boolean(
                "With foreground deletion, the owner is not removed before this object is gone."
            ),
        },
        ["apiVersion", "kind", "name", "uid"],
        **{"x-kubernetes-map-type": "atomic"},
    )


def managed_fields_entry() -> Schema:
    return obj(
        "The set of fields one field manager owns, as tracked by server-side apply.",
        {
            "manager": string("Name of the actor (field manager) that owns the fields."),
            "operation": string("How the fields were written: 'Apply' or 'Update'."),
            "apiVersion": string("API version the field set is expressed in."),
            "time": timestamp("When the entry last changed.", nullable=True),
            "fieldsType": string("Format of fieldsV1; only 'FieldsV1' exists."),
            "fieldsV1": free_object(
                "The owned field set, as a trie of 'f:<name>', 'k:<key>', 'v:<value>' keys."
            ),
            "subresource": string(
                "Subresource the fields were written through (e.g. 'status'); empty for the main resource."
            ),
        },
    )


def object_meta() -> Schema:
    """Standard object metadata (metav1.ObjectMeta), every field enumerated."""
    return obj(
        "Standard metadata every persisted object carries: identity, labels, annotations and lifecycle fields.",
        {
            "name": string(
                "Unique name within the namespace (or the cluster, for cluster-scoped kinds). Cannot be changed."
            ),
            "generateName": string(
                "Prefix for a server-generated name, used on create when 'name' is empty; a random suffix is appended."
            ),
            "namespace": string(
                "Namespace the object lives in; empty for cluster-scoped objects. Cannot be changed."
            ),
            "selfLink": string("Deprecated and never set by the server."),
            "uid": string(
                "Server-assigned unique identifier; different for each incarnation of a name. Read-only."
            ),
            "resourceVersion": string(
                "Opaque version of this object, used for optimistic concurrency and for watches. Read-only."
            ),
            "generation": int64("Sequence number of changes to the desired state; maintained by the server."),
            "creationTimestamp": timestamp("When the object was created (UTC). Read-only.", nullable=True),
            "deletionTimestamp": timestamp(
                "When deletion was requested; set by the server, after which only finalizer removal proceeds.",
                nullable=True,
            ),
            "deletionGracePeriodSeconds": int64(
                "Seconds the object is given to terminate gracefully; set together with deletionTimestamp."
            ),
            "labels": string_map("Identifying key/value pairs used by selectors."),
            "annotations": string_map("Non-identifying key/value pairs for tools and controllers."),
            "ownerReferences": keyed_list(
                "Objects this object depends on; used by garbage collection.", owner_reference(), "uid"
            ),
            "finalizers": string_set(
                "Names of pending cleanup tasks. While any remain, a deleted object stays visible with a "
                "deletionTimestamp; the last removal completes the deletion."
            ),
            "managedFields": array(
                "Field ownership per manager, as tracked by server-side apply.", managed_fields_entry()
            ),
        },
    )


def label_selector_requirement(what: str = "label") -> Schema:
    return obj(
        f"A {what} requirement: a key, an operator and (for In/NotIn) a list of values.",
        {
            "key": string(f"The {what} key the requirement applies to."),
            "operator": string("One of In, NotIn, Exists, DoesNotExist."),
            "values": string_list(
                "Values for In/NotIn (must be non-empty); must be empty for Exists/DoesNotExist.",
                **{"x-kubernetes-list-type": "atomic"},
            ),
        },
        ["key", "operator"],
    )


def label_selector(
    description: str = "A label query; all requirements are ANDed. An empty selector matches everything.",
) -> Schema:
    return obj(
        description,
        {
            "matchLabels": string_map(
                "Exact key=value matches; each pair is an 'In' requirement with one value."
            ),
            "matchExpressions": array(
                "Set-based requirements.",
                label_selector_requirement(),
                **{"x-kubernetes-list-type": "atomic"},
            ),
        },
        **{"x-kubernetes-map-type": "atomic"},
    )


def node_selector_requirement() -> Schema:
    return obj(
        "A requirement on a key: the operator relates the key to the values.",
        {
            "key": string("The key the requirement applies to."),
            "operator": string("One of In, NotIn, Exists, DoesNotExist, Gt, Lt."),
            "values": string_list(
                "Values for In/NotIn (non-empty), a single integer for Gt/Lt, empty for Exists/DoesNotExist.",
                **{"x-kubernetes-list-type": "atomic"},
            ),
        },
        ["key", "operator"],
    )


def node_selector() -> Schema:
    term = obj(
        "One selector term; its requirements are ANDed. An empty term matches nothing.",
        {
            "matchExpressions": array(
                "Requirements on node labels.",
                node_selector_requirement(),
                **{"x-kubernetes-list-type": "atomic"},
            ),
            "matchFields": array(
                "Requirements on node fields.",
                node_selector_requirement(),
                **{"x-kubernetes-list-type": "atomic"},
            ),
        },
        **{"x-kubernetes-map-type": "atomic"},
    )
    return obj(
        "A node selector: the union (OR) of its terms.",
        {
            "nodeSelectorTerms": array(
                "The terms; a node matching any of them is selected.",
                term,
                **{"x-kubernetes-list-type": "atomic"},
            )
        },
        ["nodeSelectorTerms"],
        **{"x-kubernetes-map-type": "atomic"},
    )


def toleration() -> Schema:
    return obj(
        "Lets the holder be placed despite a matching taint.",
        {
            "key": string("Taint key to tolerate; empty with operator Exists matches every key."),
            "operator": string("Equal (default; value must match) or Exists (any value)."),
            "value": string("Value to match with operator Equal; empty with Exists."),
            "effect": string(
                "Taint effect to tolerate (NoSchedule, PreferNoSchedule, NoExecute); empty means all."
            ),
            "tolerationSeconds": int64(
                "For NoExecute taints: how long the taint is tolerated before eviction. Unset means forever; "
                "zero or negative means evict immediately."
            ),
        },
    )


def taint() -> Schema:
    return obj(
        "A taint repels objects that do not tolerate it.",
        {
            "key": string("Taint key."),
            "value": string("Taint value."),
            "effect": string(
                "Effect on objects that do not tolerate the taint: NoSchedule, PreferNoSchedule or NoExecute."
            ),
            "timeAdded": timestamp("When the taint was added (set for NoExecute taints).", nullable=True),
        },
        ["key", "effect"],
    )


def condition() -> Schema:
    """metav1.Condition with the constraints generated CRDs carry."""
    return obj(
        "One aspect of the object's current state.",
        {
            "type": string(
                "Condition type in CamelCase (or domain/Name).", maxLength=316, pattern=CONDITION_TYPE_PATTERN
            ),
            "status": enum("Whether the condition holds.", ["True", "False", "Unknown"]),
            "observedGeneration": int64("metadata.generation the condition was computed from.", minimum=0),
            "lastTransitionTime": timestamp("When status last changed."),
            "reason": string(
                "Machine-readable CamelCase reason for the last transition.",
                maxLength=1024,
                minLength=1,
                pattern=REASON_PATTERN,
            ),
            "message": string("Human-readable details; may be empty.", maxLength=32768),
        },
        ["type", "status", "lastTransitionTime", "reason", "message"],
    )


def conditions(description: str = "Current state observations, one per condition type.") -> Schema:
    return array(description, condition())


def workload_condition(what: str) -> Schema:
    """A built-in (non-metav1) condition such as DeploymentCondition or PodCondition."""
    return obj(
        f"An observation about the {what}.",
        {
            "type": string("Condition type."),
            "status": string("True, False or Unknown."),
            "reason": string("CamelCase reason for the last transition."),
            "message": string("Human-readable details."),
            "lastTransitionTime": timestamp("When status last changed.", nullable=True),
            "lastUpdateTime": timestamp("When the condition was last updated.", nullable=True),
            "lastProbeTime": timestamp("When the condition was last probed.", nullable=True),
            "observedGeneration": int64("metadata.generation the condition was computed from."),
        },
        ["type", "status"],
        open=True,
    )


def workload_conditions(what: str) -> Schema:
    return keyed_list(f"Observations about the {what}, one per type.", workload_condition(what), "type")


def object_reference(description: str = "Reference to another object.") -> Schema:
    return obj(
        description,
        {
            "apiVersion": string("API version of the referent."),
            "kind": string("Kind of the referent."),
            "namespace": string("Namespace of the referent."),
            "name": string("Name of the referent."),
            "uid": string("UID of the referent."),
            "resourceVersion": string("resourceVersion of the referent when the reference was made."),
            "fieldPath": string("Part of the referent this is about, e.g. 'spec.containers{app}'."),
        },
        **{"x-kubernetes-map-type": "atomic"},
    )


def local_object_reference(description: str = "Reference to an object in the same namespace.") -> Schema:
    return obj(description, {"name": string("Name of the referent.")}, **{"x-kubernetes-map-type": "atomic"})
