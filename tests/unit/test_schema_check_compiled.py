"""The compiled schema checks answer exactly what the interpreting functions answer.

``valid`` == ``not schema_errors``, ``has_unknown_fields`` == ``bool(unknown_fields)``, and ``defaults`` changes an
object exactly as ``apply_defaults`` does, with and without ``skip``: on random objects built from every built-in
kind's schema (mostly right, with wrong types, missing required fields, nulls, unknown fields, out-of-range and
out-of-enum values mixed in), on hand-written schemas with every keyword the checks know, and on generated schemas
(hypothesis) with shared and self-referring nodes.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flotilla.apiserver.builtin_kinds import BUILTIN_TYPES
from flotilla.apiserver.schema_check import (
    apply_defaults,
    defaults,
    has_unknown_fields,
    schema_errors,
    unchanged_parts,
    unknown_fields,
    valid,
)

_SCALARS: list[Any] = [None, True, False, 0, 1, -3, 2.5, 4.0, "", "x", "Always", [], {}]


def _value(schema: Any, rnd: random.Random, depth: int = 0) -> Any:
    """A value for ``schema``: usually of the right shape, sometimes not."""
    if not isinstance(schema, dict) or depth > 8 or rnd.random() < 0.07:
        return rnd.choice(_SCALARS)
    if "enum" in schema and rnd.random() < 0.8:
        return rnd.choice(schema["enum"])
    if "default" in schema and rnd.random() < 0.2:
        return copy.deepcopy(schema["default"])
    t = schema.get("type")
    props = schema.get("properties")
    if t == "object" or isinstance(props, dict):
        out: dict[str, Any] = {}
        for k, sub in (props or {}).items():
            if k in (schema.get("required") or ()) or rnd.random() < 0.5:
                out[k] = _value(sub, rnd, depth + 1)
        addl = schema.get("additionalProperties")
        if (isinstance(addl, dict) or addl is True) and rnd.random() < 0.5:
            for i in range(rnd.randint(0, 3)):
                out[f"extra{i}"] = _value(addl if isinstance(addl, dict) else {}, rnd, depth + 1)
        if rnd.random() < 0.1:
            out["unknownField"] = rnd.choice(_SCALARS)
        return out
    if t == "array":
        return [_value(schema.get("items"), rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    if t == "integer":
        return rnd.choice([0, 1, 7, -1, 3.0, 2.5, True, "1", 10**6])
    if t == "number":
        return rnd.choice([0, 1.5, -2, True, "1"])
    if t == "boolean":
        return rnd.choice([True, False, 0, "true"])
    if t == "string" or schema.get("x-kubernetes-int-or-string"):
        return rnd.choice(["", "a", "ab", "abc" * 30, "Ready", "250m", 5, True, None])
    return rnd.choice(_SCALARS)


def _object(schema: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    obj = _value(schema, rnd)
    if not isinstance(obj, dict):
        obj = {}
    obj.setdefault("metadata", {"name": "x", "labels": {"a": "b"}})
    return obj


def _skip(obj: dict[str, Any], rnd: random.Random) -> Any:
    """A ``skip`` as unchanged_parts makes it: compare with a copy changed here and there."""
    old = copy.deepcopy(obj)
    for k in list(old):
        if rnd.random() < 0.3:
            old[k] = rnd.choice(_SCALARS)
        elif isinstance(old[k], dict) and old[k] and rnd.random() < 0.5:
            old[k][rnd.choice(list(old[k]))] = rnd.choice(_SCALARS)
    return unchanged_parts(obj, old)


def _same(obj: dict[str, Any], schema: dict[str, Any], skip: Any) -> None:
    assert valid(obj, schema, skip) == (not schema_errors(obj, schema, skip=skip)), obj
    assert has_unknown_fields(obj, schema, skip) == bool(unknown_fields(obj, schema, skip=skip)), obj
    a, b = copy.deepcopy(obj), copy.deepcopy(obj)
    apply_defaults(a, schema, skip=skip)
    defaults(b, schema, skip)
    assert a == b, obj


@pytest.mark.parametrize("rt", [rt for rt in BUILTIN_TYPES if rt.schema], ids=lambda rt: f"{rt.group}/{rt.kind}")
def test_compiled_checks_match_on_builtin_kinds(rt: Any) -> None:
    rnd = random.Random(f"{rt.group}/{rt.kind}")
    for _ in range(150):
        obj = _object(rt.schema, rnd)
        _same(obj, rt.schema, None)
        _same(obj, rt.schema, _skip(obj, rnd))


HAND_WRITTEN: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object", "required": ["mode", "size"], "minProperties": 2, "maxProperties": 6,
            "properties": {
                "mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
                "size": {"type": "integer", "minimum": 1, "maximum": 10, "nullable": True},
                "ratio": {"type": "number", "minimum": 0.5},
                "port": {"x-kubernetes-int-or-string": True},
                "name": {"type": "string", "minLength": 2, "maxLength": 5},
                "code": {"type": "string", "pattern": "^[a-z]{2,3}$"},
                "loose": {"type": "string", "pattern": "b"},
                "broken": {"type": "string", "pattern": "(?=a)"},
                "qty": {"x-kubernetes-int-or-string": True, "pattern": "^[0-9]+m$"},
                "flags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "boolean"}},
                "opts": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "on": {"type": "boolean", "default": True}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "any": {},
                "odd": {"type": "weird"},
                "nested": {"type": "object", "properties": {"deep": {"type": "object", "properties": {
                    "v": {"type": "string", "default": "d"}}, "default": {}}}},
            },
        },
        "status": {"type": "object", "additionalProperties": True},
        "list": {"type": "array", "items": {"type": "object", "required": ["k"], "properties": {
            "k": {"type": "string"}, "n": {"type": "integer", "default": 3}}}},
    },
}


def test_compiled_checks_match_on_every_keyword() -> None:
    rnd = random.Random("hand-written")
    for _ in range(3000):
        obj = _object(HAND_WRITTEN, rnd)
        _same(obj, HAND_WRITTEN, None)
        _same(obj, HAND_WRITTEN, _skip(obj, rnd))


def test_recursive_schema_compiles_and_matches() -> None:
    node: dict[str, Any] = {"type": "object", "properties": {"v": {"type": "integer", "default": 1}}}
    node["properties"]["child"] = node  # a schema that contains itself
    schema = {"type": "object", "properties": {"root": node}}
    obj = {"root": {"child": {"child": {"v": "bad"}}, "extra": 1}}
    _same(obj, schema, None)
    fixed = copy.deepcopy(obj)
    defaults(fixed, schema)
    assert fixed["root"]["v"] == 1 and fixed["root"]["child"]["v"] == 1


def test_a_malformed_schema_falls_back_to_the_interpreter() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": "not a schema"}}
    assert valid({}, schema) is True  # nothing to check: the bad node is never reached
    with pytest.raises(AttributeError):
        valid({"a": 1}, schema)  # as schema_errors fails on it
    with pytest.raises(AttributeError):
        schema_errors({"a": 1}, schema)


# -- generated schemas ------------------------------------------------------------------------------

_LEAVES = st.sampled_from([
    {}, {"type": "string"}, {"type": "string", "minLength": 1, "maxLength": 3}, {"type": "string", "pattern": "^a"},
    {"type": "string", "pattern": "b$", "default": "b"}, {"type": "string", "enum": ["a", "ab"]},
    {"type": "integer", "minimum": 0, "maximum": 5}, {"type": "integer", "default": 2, "nullable": True},
    {"type": "number"}, {"type": "boolean", "default": False}, {"x-kubernetes-int-or-string": True, "pattern": "m$"},
    {"type": "object", "x-kubernetes-preserve-unknown-fields": True}, {"type": "string", "pattern": "("},
])


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["a", "b", "c", "spec", "status"])
    obj = st.builds(
        lambda props, req, addl, extra: {"type": "object", "properties": props, **extra,
                                         **({"required": req} if req else {}),
                                         **({"additionalProperties": addl} if addl is not None else {})},
        st.dictionaries(names, children, max_size=3), st.lists(names, max_size=2, unique=True),
        st.one_of(st.none(), st.just(True), children),
        st.sampled_from([{}, {"minProperties": 1}, {"maxProperties": 2}, {"default": {}}, {"nullable": True}]))
    arr = st.builds(lambda items, extra: {"type": "array", "items": items, **extra}, children,
                    st.sampled_from([{}, {"minItems": 1}, {"maxItems": 2}]))
    return st.one_of(obj, arr)


_SCHEMAS = st.recursive(_LEAVES, _extend, max_leaves=12)


def _share(schema: Any, rnd: random.Random, seen: list[dict[str, Any]]) -> None:
    """Make some properties refer to subschemas met before (one node at several places; cycles, with defaults
    at every level, would default forever: test_recursive_schema_compiles_and_matches has one without)."""
    if not isinstance(schema, dict):
        return
    for k in list(schema.get("properties") or {}):
        if seen and rnd.random() < 0.2:
            schema["properties"][k] = rnd.choice(seen)
        else:
            _share(schema["properties"][k], rnd, seen)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            _share(schema[key], rnd, seen)
    seen.append(schema)  # after its children: never an ancestor of where it is put


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(root_props=st.dictionaries(st.sampled_from(["spec", "status", "list"]), _SCHEMAS, max_size=3),
       seed=st.integers(0, 2**32))
def test_compiled_checks_match_on_generated_schemas(root_props: dict[str, Any], seed: int) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": root_props}
    rnd = random.Random(seed)
    _share(schema, rnd, [])
    for _ in range(20):
        obj = _object(schema, rnd)
        _same(obj, schema, None)
        _same(obj, schema, _skip(obj, rnd))


# -- the type-specialised node checks ---------------------------------------------------------------

_NODE_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string"}, {"type": "string", "nullable": True}, {"type": "string", "enum": ["a", "b"]},
    {"type": "string", "enum": ["a", None], "nullable": True},
    {"type": "boolean"}, {"type": "boolean", "nullable": True},
    {"type": "integer"}, {"type": "integer", "nullable": True}, {"type": "integer", "minimum": 0, "maximum": 3},
    {"type": "object"}, {"type": "object", "nullable": True},
    {"type": "object", "required": ["a", "n"], "properties": {"a": {"type": "string"},
                                                              "n": {"type": "integer", "nullable": True}},
     "additionalProperties": {"type": "boolean"}},
    {"type": "array"}, {"type": "array", "nullable": True, "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
    {}, {"x-kubernetes-preserve-unknown-fields": True}, {"type": "object", "additionalProperties": True},
    {"properties": {"a": {"type": "string"}}},
]
_NODE_VALUES: list[Any] = [
    None, True, False, 0, 2, 5, -1, 3.0, 2.5, 2**64, "", "a", "c", [], ["a"], ["a", "b", "c"], [1], {},
    {"a": "x", "n": None}, {"a": "x", "n": 1, "extra": True}, {"a": "x", "n": 1, "extra": "no"}, {"a": None, "n": 1},
    {"n": 1},
]


@pytest.mark.parametrize("node", _NODE_SCHEMAS, ids=lambda s: _schema_id(s))
def test_type_specialised_node_checks_match_the_interpreter(node: dict[str, Any]) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"x": node}}
    for value in _NODE_VALUES:
        obj = {"x": copy.deepcopy(value)}
        assert valid(obj, schema) == (not schema_errors(obj, schema)), value
        assert has_unknown_fields(obj, schema) == bool(unknown_fields(obj, schema)), value
        if isinstance(value, dict):
            for skip in ({"x": {"a": None}}, {"x": {"extra": None}}, {"x": {}}):
                assert valid(obj, schema, skip) == (not schema_errors(obj, schema, skip=skip)), (value, skip)


def _schema_id(schema: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in schema.items() if k != "properties")
