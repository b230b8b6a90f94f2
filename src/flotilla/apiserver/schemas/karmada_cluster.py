"""cluster.karmada.io/v1alpha1 Cluster. Complete schema (Karmada v1.19)."""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    Schema,
    array,
    boolean,
    enum,
    integer,
    kind_schema,
    obj,
    quantity,
    quantity_map,
    string,
    string_list,
    string_map,
)
from flotilla.apiserver.schemas.meta import conditions, taint


def _secret_ref(description: str) -> Schema:
    return obj(
        description,
        {"namespace": string("Namespace of the Secret."), "name": string("Name of the Secret.")},
        ["namespace", "name"],
    )


def _resource_model() -> Schema:
    return obj(
        "One grade of the resource model: nodes whose free resources fall in every range of the grade.",
        {
            "grade": integer("Index of the grade; higher grades hold bigger nodes.", None, minimum=0),
            "ranges": array(
                "Resource ranges of the grade; a node belongs to it when min <= free < max for every resource.",
                obj(
                    "Range of one resource.",
                    {
                        "name": string("Resource name, e.g. cpu or memory."),
                        "min": quantity("Inclusive lower bound."),
                        "max": quantity("Exclusive upper bound."),
                    },
                    ["name", "min", "max"],
                ),
            ),
        },
        ["grade", "ranges"],
    )


def cluster_schema() -> Schema:
    spec = obj(
        "How to reach and describe the member cluster.",
        {
            "id": string(
                "Unique id of the cluster (by default the UID of its kube-system namespace).",
                maxLength=128000,
            ),
            "syncMode": enum(
                "Push: the control plane applies Works to the cluster. Pull: an agent in the cluster fetches them.",
                ["Push", "Pull"],
            ),
            "apiEndpoint": string("URL of the member cluster's API server."),
            "secretRef": _secret_ref("Secret with 'token' and 'caBundle' used to access the member cluster."),
            "impersonatorSecretRef": _secret_ref(
                "Secret with the 'token' of the impersonator service account."
            ),
            "insecureSkipTLSVerification": boolean("Do not verify the member API server's certificate."),
            "proxyURL": string("HTTP(S)/SOCKS5 proxy used to reach the member cluster."),
            "proxyHeader": string_map("Extra headers sent to the proxy."),
            "provider": string("Cloud provider of the cluster (usable in field selectors and spreading)."),
            "region": string("Region of the cluster (usable in field selectors and spreading)."),
            "zone": string("Deprecated: use zones."),
            "zones": string_list("Failure zones the cluster spans."),
            "taints": array("Taints of the cluster; placements must tolerate them.", taint()),
            "resourceModels": array("Grades used to estimate how many replicas fit.", _resource_model()),
        },
        ["syncMode"],
    )
    api_enablement = obj(
        "Resources served under one group/version.",
        {
            "groupVersion": string("Group/version, e.g. 'apps/v1'."),
            "resources": array(
                "Resources of the group/version.",
                obj(
                    "A served resource.",
                    {"name": string("Plural resource name."), "kind": string("Kind of the resource.")},
                    ["name", "kind"],
                ),
            ),
        },
        ["groupVersion"],
    )
    status = obj(
        "Observed state of the member cluster.",
        {
            "kubernetesVersion": string("Version reported by the member API server."),
            "apiEnablements": array("APIs the member cluster serves.", api_enablement),
            "conditions": conditions("Ready and CompleteAPIEnablements conditions (and any custom ones)."),
            "nodeSummary": obj(
                "Node counts.",
                {"totalNum": integer("Number of nodes."), "readyNum": integer("Number of ready nodes.")},
            ),
            "resourceSummary": obj(
                "Resource totals of the member cluster.",
                {
                    "allocatable": quantity_map("Sum of the nodes' allocatable resources."),
                    "allocating": quantity_map("Requests of pods not yet scheduled."),
                    "allocated": quantity_map("Requests of scheduled, non-terminated pods."),
                    "allocatableModelings": array(
                        "Number of nodes per resource-model grade.",
                        obj(
                            "Nodes in one grade.",
                            {
                                "grade": integer("Grade index.", None, minimum=0),
                                "count": integer("Number of nodes in the grade.", None),
                            },
                            ["grade", "count"],
                        ),
                    ),
                },
            ),
            "remedyActions": string_list("Remedy actions to carry out on the cluster."),
        },
    )
    return kind_schema(
        "cluster.karmada.io",
        "v1alpha1",
        "Cluster",
        "A member cluster registered with the control plane.",
        {"spec": spec, "status": status},
        ["spec"],
    )
