"""OpenAPI ``pattern`` in the API server's schema check and in CRD validation, as kube-apiserver does it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flotilla.apiserver.crd import validate_crd
from flotilla.apiserver.schema_check import schema_errors, valid

NAME = {"type": "string", "pattern": "^[a-z]+$"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "name": NAME,
                "contains": {"type": "string", "pattern": "ab"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"id": NAME}}},
                "labels": {"type": "object", "additionalProperties": NAME},
                "size": {"x-kubernetes-int-or-string": True, "pattern": "^[0-9]+m$"},
                "greek": {"type": "string", "pattern": r"^\p{Lu}\p{Ll}*$"},
                "broken": {"type": "string", "pattern": "(?=x)"},
            },
        }
    },
}


def messages(obj: dict[str, Any]) -> list[tuple[str, str]]:
    causes = schema_errors(obj, SCHEMA)
    assert valid(obj, SCHEMA) is (not causes)  # the compiled check agrees
    return [(c.field, c.message) for c in causes]


@pytest.mark.parametrize("spec,want", [
    pytest.param({"name": "abc"}, [], id="match"),
    pytest.param({"name": "aBc"}, [("spec.name", """Invalid value: "aBc": spec.name in body should match '^[a-z]+$'""")],
                 id="mismatch"),
    pytest.param({"name": "abc\n"},
                 [("spec.name", """Invalid value: "abc\\n": spec.name in body should match '^[a-z]+$'""")],
                 id="dollar-does-not-take-a-final-newline-and-the-value-is-go-quoted"),
    pytest.param({"contains": "xxabyy"}, [], id="unanchored-search"),
    pytest.param({"contains": "xx"},
                 [("spec.contains", """Invalid value: "xx": spec.contains in body should match 'ab'""")],
                 id="unanchored-mismatch"),
    pytest.param({"items": [{"id": "ok"}, {"id": "NO"}]},
                 [("spec.items[1].id", """Invalid value: "NO": spec.items[1].id in body should match '^[a-z]+$'""")],
                 id="in-array"),
    pytest.param({"labels": {"a": "ok", "b": "1"}},
                 [("spec.labels.b", """Invalid value: "1": spec.labels.b in body should match '^[a-z]+$'""")],
                 id="in-additionalProperties"),
    pytest.param({"size": 5}, [], id="int-or-string-number-is-not-matched"),
    pytest.param({"size": "5Gi"},
                 [("spec.size", """Invalid value: "5Gi": spec.size in body should match '^[0-9]+m$'""")],
                 id="int-or-string-string-is-matched"),
    pytest.param({"greek": "Ωμέγα"}, [], id="unicode"),
    pytest.param({"greek": "ωμέγα"},
                 [("spec.greek", """Invalid value: "ωμέγα": spec.greek in body should match '^\\p{Lu}\\p{Ll}*$'""")],
                 id="unicode-mismatch"),
    pytest.param({"broken": "anything"}, [], id="a-stored-pattern-go-rejects-is-not-enforced"),
    pytest.param({"name": 5}, [("spec.name", 'Invalid value: "integer": spec.name in body must be of type string: '
                                             '"integer"')], id="type-error-only"),
])
def test_pattern_errors(spec: dict[str, Any], want: list[tuple[str, str]]) -> None:
    assert messages({"spec": spec}) == want


def crd(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}}]},
    }


ROOT = "spec.versions[0].schema.openAPIV3Schema"


def test_crd_with_valid_patterns_is_accepted() -> None:
    assert validate_crd(crd({"type": "object", "properties": {"spec": SCHEMA["properties"]["spec"]["properties"]
                                                                 ["items"]}})) == []


@pytest.mark.parametrize("schema,field,message", [
    pytest.param({"type": "object", "properties": {"foo": {"type": "string", "pattern": "+"}}},
                 f"{ROOT}.properties[foo].pattern",
                 'Invalid value: "+": must be a valid regular expression, but isn\'t: error parsing regexp: missing '
                 "argument to repetition operator: `+`", id="top-property"),
    pytest.param({"type": "object", "properties": {"spec": {"type": "object", "properties": {"l": {
        "type": "array", "items": {"type": "string", "pattern": "(?=a)"}}}}}},
                 f"{ROOT}.properties[spec].properties[l].items.pattern",
                 'Invalid value: "(?=a)": must be a valid regular expression, but isn\'t: error parsing regexp: '
                 "invalid or unsupported Perl syntax: `(?=`", id="lookahead-in-items"),
    pytest.param({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {
        "type": "string", "pattern": r"(a)\1"}}}},
                 f"{ROOT}.properties[m].additionalProperties.pattern",
                 'Invalid value: "(a)\\\\1": must be a valid regular expression, but isn\'t: error parsing regexp: '
                 "invalid escape sequence: `\\1`", id="backreference-in-additionalProperties"),
    pytest.param({"type": "object", "properties": {"q": {"anyOf": [{"type": "string", "pattern": "[a"}]}}},
                 f"{ROOT}.properties[q].anyOf[0].pattern",
                 'Invalid value: "[a": must be a valid regular expression, but isn\'t: error parsing regexp: '
                 "missing closing ]: `[a`", id="in-anyOf"),
    pytest.param({"type": "object", "properties": {"n": {"type": "string", "pattern": 5}}},
                 f"{ROOT}.properties[n].pattern", "Invalid value: must be a string", id="not-a-string"),
])
def test_crd_with_an_invalid_pattern_is_refused(schema: dict[str, Any], field: str, message: str) -> None:
    causes = validate_crd(crd(schema))
    assert [(c.field, c.message) for c in causes] == [(field, message)]


def test_crd_update_keeping_a_stored_invalid_pattern_is_allowed_but_not_adding_one() -> None:
    bad = crd({"type": "object", "properties": {"foo": {"type": "string", "pattern": "(?=x)"}}})
    assert validate_crd(bad)  # create: refused
    updated = copy.deepcopy(bad)
    updated["metadata"]["finalizers"] = []
    assert validate_crd(updated, bad) == []  # an update that keeps it (a finalizer's removal)
    worse = copy.deepcopy(bad)
    worse["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["bar"] = {"pattern": "*"}
    assert [c.field for c in validate_crd(worse, bad)] == [f"{ROOT}.properties[bar].pattern"]
    assert validate_crd(bad, patterns=False) == []  # still served after a restart
