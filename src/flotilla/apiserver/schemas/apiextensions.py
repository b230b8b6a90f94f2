"""apiextensions.k8s.io/v1 CustomResourceDefinition."""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    Schema,
    any_value,
    array,
    boolean,
    free_object,
    integer,
    kind_schema,
    obj,
    string,
    string_list,
)
from flotilla.apiserver.schemas.meta import workload_conditions


def _names(description: str) -> Schema:
    return obj(
        description,
        {
            "plural": string("Lower-case plural used in URLs, e.g. 'widgets'."),
            "singular": string("Lower-case singular; defaults to the lower-cased kind."),
            "kind": string("CamelCase kind of the objects."),
            "listKind": string("Kind of the list type; defaults to '<kind>List'."),
            "shortNames": string_list("Short aliases usable on the command line."),
            "categories": string_list("Groups the resource belongs to, e.g. 'all'."),
        },
        ["plural", "kind"],
    )


def _version() -> Schema:
    column = obj(
        "An extra column shown by 'kubectl get'.",
        {
            "name": string("Column header."),
            "type": string("integer, number, string, boolean or date."),
            "format": string("Optional format hint, e.g. 'name'."),
            "description": string("Column description."),
            "priority": integer("0 = always shown; higher = only with -o wide."),
            "jsonPath": string("JSONPath evaluated against each object to fill the column."),
        },
        ["name", "type", "jsonPath"],
    )
    return obj(
        "One served version of the custom resource.",
        {
            "name": string("Version name, e.g. v1 or v1beta1."),
            "served": boolean("Whether the version is served by the REST API."),
            "storage": boolean("Whether objects are stored in this version; exactly one version has it."),
            "deprecated": boolean("Whether the version is deprecated (requests then get a warning)."),
            "deprecationWarning": string("Custom warning returned for a deprecated version."),
            "schema": obj(
                "Validation schema of the version.",
                {"openAPIV3Schema": any_value("OpenAPI v3 schema of the objects.")},
                open=True,
            ),
            "subresources": obj(
                "Subresources served for this version.",
                {
                    "status": free_object(
                        "When present, /status is served and status changes are split from spec."
                    ),
                    "scale": obj(
                        "When present, /scale is served.",
                        {
                            "specReplicasPath": string(
                                "JSON path of the desired replicas, e.g. .spec.replicas."
                            ),
                            "statusReplicasPath": string("JSON path of the observed replicas."),
                            "labelSelectorPath": string("JSON path of the serialized label selector."),
                        },
                        ["specReplicasPath", "statusReplicasPath"],
                    ),
                },
            ),
            "additionalPrinterColumns": array("Columns for 'kubectl get'.", column),
            "selectableFields": array(
                "Fields usable in field selectors.",
                obj("A selectable field.", {"jsonPath": string("JSON path of the field.")}, ["jsonPath"]),
            ),
        },
        ["name", "served", "storage"],
        open=True,
    )


def crd_schema() -> Schema:
    return kind_schema(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "Adds a new resource type to the API server.",
        {
            "spec": obj(
                "The resource type to add.",
                {
                    "group": string("API group of the new resource."),
                    "names": _names("Names of the new resource."),
                    "scope": string("Namespaced or Cluster."),
                    "versions": array("Versions served.", _version()),
                    "conversion": free_object("How objects are converted between versions."),
                    "preserveUnknownFields": boolean(
                        "Legacy flag; must be false in apiextensions.k8s.io/v1."
                    ),
                },
                ["group", "names", "scope", "versions"],
                open=True,
            ),
            "status": obj(
                "Observed state of the definition.",
                {
                    "conditions": workload_conditions("definition"),
                    "acceptedNames": _names("Names actually in use by the server."),
                    "storedVersions": string_list("Versions objects have ever been stored in."),
                },
                open=True,
            ),
        },
    )
