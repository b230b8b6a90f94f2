"""Structural-schema checks of objects against OpenAPI v3 schemas (as kube-apiserver does for CRDs).

Three jobs: find unknown fields (fieldValidation=Strict/Warn), prune them (what the server stores),
and report type/enum/required violations with Kubernetes field paths (422 causes).

Every function takes an optional ``skip``: the parts of the object known to be exactly as in a stored version
that passed the same checks against the same schema (see :func:`unchanged_parts`). Those parts would give the
same answer again (no unknown fields, nothing to prune, defaults present, no errors), so they are not walked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from flotilla.kube.go_regexp import GoRegexp, GoRegexpError, compile_pattern
from flotilla.kube.validation import Cause, go_quote

_ALWAYS_KNOWN_TOP = ("apiVersion", "kind", "metadata")
_SERVER_SET_TOP = ("apiVersion", "kind")  # the server sets these from the URL; metadata is type-checked
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _props(schema: dict[str, Any]) -> dict[str, Any] | None:
    props = schema.get("properties")
    return props if isinstance(props, dict) else None


#: ``skip`` maps a key of a dict to None (that value is unchanged: skip it) or to the ``skip`` of that value
Skip = dict[str, "Skip | None"]
_ABSENT: Any = object()


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, strictly: ``True`` is not ``1`` and ``1.0`` is not ``1`` (unlike Python's ``==``).

    Python's ``==`` rules out most differences at C speed; equal containers are then compared as encoded JSON,
    which tells ``true`` from ``1``. Members in another order encode differently: then they count as changed,
    which only costs a check (objects patched in place keep their order).
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, (dict, list)):
        return bool(a == b) and orjson.dumps(a) == orjson.dumps(b)
    return bool(a == b)


def unchanged_parts(new: dict[str, Any], old: dict[str, Any]) -> Skip:
    """The top-level values of ``new`` (and the values one level below them) exactly as in ``old``.

    ``metadata.resourceVersion`` is left out of the comparison: it is the store's, not the object's.
    """
    skip: Skip = {}
    for k, v in new.items():
        o = old.get(k, _ABSENT)
        if o is _ABSENT or type(o) is not type(v):
            continue
        if k == "metadata" and isinstance(v, dict):
            v = {mk: mv for mk, mv in v.items() if mk != "resourceVersion"}
            o = {mk: mv for mk, mv in o.items() if mk != "resourceVersion"}
        if _same(v, o):
            skip[k] = None
        elif isinstance(v, dict):
            inner: Skip = {k2: None for k2, v2 in v.items() if k2 in o and _same(v2, o[k2])}
            if inner:
                skip[k] = inner
    return skip


def _child_skip(skip: Skip | None, k: str) -> Any:
    """_ABSENT: walk the child fully; None: skip it; a Skip: walk it, skipping those parts."""
    if skip is None:
        return _ABSENT
    return skip.get(k, _ABSENT)


def _walked(obj: dict[str, Any], skip: Skip | None, ignored: tuple[str, ...] = ()) -> Iterator[tuple[str, Any, Any]]:
    """``(key, value, skip of the value)`` of the members of ``obj`` to walk: all but the ``ignored`` keys and
    those ``skip`` says are unchanged. (The compiled checks below walk inline: a generator would cost them a
    good part of their time.)"""
    if skip is None:
        for k, v in obj.items():
            if k not in ignored:
                yield k, v, None
        return
    for k, v in obj.items():
        if k in ignored:
            continue
        s = skip.get(k, _ABSENT)
        if s is not None:
            yield k, v, None if s is _ABSENT else s


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "", *, top: bool = True,
                   skip: Skip | None = None) -> list[str]:
    """Paths of fields in ``obj`` the schema does not declare (``.spec.foo`` style, as Kubernetes prints)."""
    found: list[str] = []
    if not schema or schema.get(_PRESERVE):
        return found
    if isinstance(obj, dict):
        props = _props(schema)
        addl = schema.get("additionalProperties")
        for k, v, sub in _walked(obj, skip, _ALWAYS_KNOWN_TOP if top else ()):
            if props is not None and k in props:
                found.extend(unknown_fields(v, props[k], _join(path, k), top=False, skip=sub))
            elif isinstance(addl, dict):
                found.extend(unknown_fields(v, addl, _join(path, k), top=False, skip=sub))
            elif addl is True or (props is None and schema.get("type") != "object"):
                continue
            elif props is not None or schema.get("type") == "object":
                found.append(_join(path, k))
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(obj):
                found.extend(unknown_fields(v, items, f"{path}[{i}]", top=False))
    return found


def prune(obj: Any, schema: dict[str, Any], *, top: bool = True, skip: Skip | None = None) -> None:
    """Drop undeclared fields in place (keeps apiVersion/kind/metadata at the top)."""
    if not schema or schema.get(_PRESERVE):
        return
    if isinstance(obj, dict):
        props = _props(schema)
        addl = schema.get("additionalProperties")
        for k, v, sub in list(_walked(obj, skip, _ALWAYS_KNOWN_TOP if top else ())):
            if props is not None and k in props:
                prune(v, props[k], top=False, skip=sub)
            elif isinstance(addl, dict):
                prune(v, addl, top=False, skip=sub)
            elif addl is True:
                continue
            elif props is not None or schema.get("type") == "object":
                del obj[k]
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for v in obj:
                prune(v, items, top=False)


_INT64 = range(-(1 << 63), 1 << 63)
_MAX_JSON_INTEGER = float((1 << 53) - 1)  # the largest float that still counts as an integer (as in go-openapi)


def _is_integer(value: Any) -> bool:
    """An int64, or a float with an exact integer value (JSON ``5.0``); not 1e20, not 2**64."""
    if isinstance(value, int):
        return not isinstance(value, bool) and value in _INT64
    return isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_JSON_INTEGER


def _type_name(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        return "number"  # what a JSON decoder makes of an integer beyond int64
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _pattern(schema: dict[str, Any]) -> GoRegexp | None:
    """The schema's compiled ``pattern`` (Go syntax, memoized), or None.

    A pattern Go would not compile is refused when a CRD is created (see :mod:`flotilla.apiserver.crd`); one that
    was stored before that check existed is not enforced, rather than failing every request of the kind.
    """
    p = schema.get("pattern")
    if not isinstance(p, str) or not p:
        return None
    try:
        return compile_pattern(p)
    except GoRegexpError:
        return None


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    if value is None:
        return bool(schema.get("nullable")) or t is None
    if schema.get(_INT_OR_STRING):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    if t is None:
        return True
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return _is_integer(value)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    return True


_TYPE_NAMES = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    dict: "object",
    list: "array",
    type(None): "null",
}


def schema_errors(obj: Any, schema: dict[str, Any], path: str = "", *, top: bool = True,
                  skip: Skip | None = None) -> list[Cause]:
    """Type, enum, required, bounds and pattern checks; paths like ``spec.failover.cluster.purgeMode``."""
    causes: list[Cause] = []
    if not schema:
        return causes
    if not top and not _type_ok(obj, schema):
        got = _type_name(obj)
        want = "integer or string" if schema.get(_INT_OR_STRING) else schema.get("type")
        causes.append(Cause(path, f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"',
                            "FieldValueTypeInvalid"))
        return causes
    enum = schema.get("enum")
    if enum is not None and obj is not None and obj not in enum:
        allowed = ", ".join(f'"{e}"' for e in enum)
        causes.append(Cause(path, f'Unsupported value: "{obj}": supported values: {allowed}', "FieldValueNotSupported"))
    if isinstance(obj, dict):
        props = _props(schema) or {}
        for req in schema.get("required", ()) or ():
            if req not in obj or (obj[req] is None and not props.get(req, {}).get("nullable")):
                causes.append(Cause(_join(path, req), "Required value", "FieldValueRequired"))
        addl = schema.get("additionalProperties")
        for k, v, sub in _walked(obj, skip, _SERVER_SET_TOP if top else ()):
            if k in props:
                causes.extend(schema_errors(v, props[k], _join(path, k), top=False, skip=sub))
            elif isinstance(addl, dict):
                causes.extend(schema_errors(v, addl, _join(path, k), top=False, skip=sub))
        _bounds(obj, schema, path, causes, len(obj), "properties")
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(obj):
                causes.extend(schema_errors(v, items, f"{path}[{i}]", top=False))
        _bounds(obj, schema, path, causes, len(obj), "items")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is not None and obj < lo:
            causes.append(Cause(path, f"Invalid value: {obj}: {path} in body should be greater than or equal to {lo}"))
        if hi is not None and obj > hi:
            causes.append(Cause(path, f"Invalid value: {obj}: {path} in body should be less than or equal to {hi}"))
    elif isinstance(obj, str):
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        if lo is not None and len(obj) < lo:
            causes.append(Cause(path, f'Invalid value: "{obj}": {path} in body should be at least {lo} chars long'))
        if hi is not None and len(obj) > hi:
            causes.append(Cause(path, f'Too long: may not be more than {hi} bytes', "FieldValueTooLong"))
        rx = _pattern(schema) if "pattern" in schema else None
        if rx is not None and not rx.search(obj):
            causes.append(Cause(path, f"Invalid value: {go_quote(obj)}: {path} in body should match '{rx.pattern}'"))
    return causes


def _bounds(obj: Any, schema: dict[str, Any], path: str, causes: list[Cause], n: int, what: str) -> None:
    lo = schema.get(f"min{what.capitalize()}") if what == "items" else schema.get("minProperties")
    hi = schema.get(f"max{what.capitalize()}") if what == "items" else schema.get("maxProperties")
    if lo is not None and n < lo:
        causes.append(Cause(path, f"Invalid value: {n}: {path} in body should have at least {lo} {what}"))
    if hi is not None and n > hi:
        causes.append(Cause(path, f"Too many: {n}: must have at most {hi} {what}", "FieldValueTooMany"))


def apply_defaults(obj: Any, schema: dict[str, Any], *, top: bool = True, skip: Skip | None = None) -> None:
    """Structural defaulting (as for CRDs): a missing property with a ``default`` gets it, recursively.

    Defaults apply only inside objects that exist, never create parents, and never override a value.
    """
    if not schema or not isinstance(obj, (dict, list)):
        return
    if isinstance(obj, dict):
        props = _props(schema) or {}
        for k, sub in props.items():
            if top and k in _ALWAYS_KNOWN_TOP:
                continue
            if not isinstance(sub, dict):
                continue
            if k not in obj and "default" in sub:
                import copy

                obj[k] = copy.deepcopy(sub["default"])
            if k in obj:
                s = _child_skip(skip, k)
                if s is not None:
                    apply_defaults(obj[k], sub, top=False, skip=None if s is _ABSENT else s)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for k, v, sub_skip in _walked(obj, skip):
                if k not in props:
                    apply_defaults(v, addl, top=False, skip=sub_skip)
    else:
        items = schema.get("items")
        if isinstance(items, dict):
            for v in obj:
                apply_defaults(v, items, top=False)


# ---------------------------------------------------------------------------------------------
# Compiled fast paths
# ---------------------------------------------------------------------------------------------
#
# The functions above interpret the schema at every node of every object: a dozen dictionary lookups per node
# and a path string per field, even for an object that is fine. A schema is compiled once into closures that
# know their node's rules; they answer "is there anything to report?" (``valid``, ``has_unknown_fields``) and
# apply defaults (``defaults``) exactly as the functions above would. Only when there IS something to report
# do the functions above run, for their messages and field paths, so the 400/422 answers stay byte for byte.

_CacheEntry = tuple[dict[str, Any], "_Compiled | _Interpreted"]
_compiled_cache: dict[int, _CacheEntry] = {}
_COMPILED_CACHE_SIZE = 512  # schemas (one per served kind and version; CRDs replace theirs when they change)


class _Node:
    """A compiled check of one schema node; ``fn`` is set once its children exist (schemas may be recursive)."""

    __slots__ = ("fn",)

    def __init__(self) -> None:
        self.fn: Any = None


def _node(schema: dict[str, Any], memo: dict[int, _Node], build: Any) -> _Node:
    """The compiled node of ``schema`` (``build(schema, memo, top=False)``), made once per schema node and compile.

    The node is memoized before ``build`` runs, so a schema that refers to itself gets the node being built.
    """
    node = memo.get(id(schema))
    if node is None:
        node = memo[id(schema)] = _Node()
        node.fn = build(schema, memo, top=False)
    return node


class _Compiled:
    __slots__ = ("defaults", "errors", "unknown")

    def __init__(self, schema: dict[str, Any]) -> None:
        self.errors = _compile_errors_top(schema)
        self.unknown = _compile_unknown_top(schema)
        self.defaults = _compile_defaults_top(schema)


class _Interpreted:
    """What a schema the compiler cannot handle (malformed) gets: the functions above, as they are."""

    __slots__ = ("schema",)

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    def errors(self, obj: Any, skip: Skip | None) -> bool:
        return not schema_errors(obj, self.schema, skip=skip)

    def unknown(self, obj: Any, skip: Skip | None) -> bool:
        return bool(unknown_fields(obj, self.schema, skip=skip))

    def defaults(self, obj: Any, skip: Skip | None) -> None:
        apply_defaults(obj, self.schema, skip=skip)


def _compiled(schema: dict[str, Any]) -> _Compiled | _Interpreted:
    entry = _compiled_cache.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    compiled: _Compiled | _Interpreted
    try:
        compiled = _Compiled(schema)
    except Exception:  # e.g. a non-object where a schema belongs: the interpreter reports it where it applies
        compiled = _Interpreted(schema)
    if len(_compiled_cache) >= _COMPILED_CACHE_SIZE:
        _compiled_cache.pop(next(iter(_compiled_cache)))
    _compiled_cache[id(schema)] = (schema, compiled)  # the schema is kept alive: its id stays its own
    return compiled


def valid(obj: dict[str, Any], schema: dict[str, Any], skip: Skip | None = None) -> bool:
    """``not schema_errors(obj, schema, skip=skip)``, fast."""
    if not schema:
        return True
    return bool(_compiled(schema).errors(obj, skip))


def has_unknown_fields(obj: dict[str, Any], schema: dict[str, Any], skip: Skip | None = None) -> bool:
    """``bool(unknown_fields(obj, schema, skip=skip))``, fast."""
    if not schema or schema.get(_PRESERVE):
        return False
    return bool(_compiled(schema).unknown(obj, skip))


def defaults(obj: dict[str, Any], schema: dict[str, Any], skip: Skip | None = None) -> None:
    """``apply_defaults(obj, schema, skip=skip)``, fast: only the parts of the schema that have defaults."""
    if not schema:
        return
    _compiled(schema).defaults(obj, skip)


# -- type/enum/required/bounds (schema_errors) ------------------------------------------------------


def _type_check(schema: dict[str, Any]) -> Any:
    """A function value -> bool equal to ``_type_ok(value, schema)``."""
    t = schema.get("type")
    nullable = bool(schema.get("nullable")) or t is None
    if schema.get(_INT_OR_STRING):
        def int_or_string(v: Any) -> bool:
            if v is None:
                return nullable
            return isinstance(v, (int, str)) and not isinstance(v, bool)
        return int_or_string
    if t is None:
        return None  # anything goes (None included: nullable is True)
    if t == "string":
        return lambda v: isinstance(v, str) or (v is None and nullable)
    if t == "integer":
        return lambda v: _is_integer(v) or (v is None and nullable)
    if t == "number":
        return lambda v: ((isinstance(v, (int, float)) and not isinstance(v, bool)) or (v is None and nullable))
    if t == "boolean":
        return lambda v: isinstance(v, bool) or (v is None and nullable)
    if t == "object":
        return lambda v: isinstance(v, dict) or (v is None and nullable)
    if t == "array":
        return lambda v: isinstance(v, list) or (v is None and nullable)
    return lambda v: v is not None or nullable


def _compile_errors(schema: dict[str, Any], memo: dict[int, _Node]) -> _Node:
    return _node(schema, memo, _errors_fn)


def _errors_fn(schema: dict[str, Any], memo: dict[int, _Node], *, top: bool) -> Any:
    if not schema:
        return lambda v, skip=None: True
    type_ok = None if top else _type_check(schema)
    enum = schema.get("enum")
    props_raw = _props(schema) or {}
    props = {k: _compile_errors(sub, memo) for k, sub in props_raw.items()}
    required = [(r, bool(props_raw.get(r, {}).get("nullable"))) for r in (schema.get("required", ()) or ())]
    addl_raw = schema.get("additionalProperties")
    addl = _compile_errors(addl_raw, memo) if isinstance(addl_raw, dict) else None
    items_raw = schema.get("items")
    items = _compile_errors(items_raw, memo) if isinstance(items_raw, dict) else None
    min_p, max_p = schema.get("minProperties"), schema.get("maxProperties")
    min_i, max_i = schema.get("minItems"), schema.get("maxItems")
    lo, hi = schema.get("minimum"), schema.get("maximum")
    min_l, max_l = schema.get("minLength"), schema.get("maxLength")
    rx = _pattern(schema)
    search = rx.search if rx is not None else None
    server_set = _SERVER_SET_TOP if top else ()
    special = None if top else _special_errors_fn(schema, enum, props, required, addl, items, search)
    if special is not None:
        return special
    array = _array_check(False, items, min_i, max_i)  # the items and bounds of a list value, as the array node

    def check(v: Any, skip: Skip | None = None) -> bool:
        if type_ok is not None and not type_ok(v):
            return False
        if enum is not None and v is not None and v not in enum:
            return False
        if isinstance(v, dict):
            for req, req_nullable in required:
                if req not in v or (v[req] is None and not req_nullable):
                    return False
            for k, x in v.items():
                if k in server_set:
                    continue
                if skip is not None:
                    s = skip.get(k, _ABSENT)
                    if s is None:
                        continue
                    sub = None if s is _ABSENT else s
                else:
                    sub = None
                child = props.get(k)
                if child is None:
                    child = addl
                    if child is None:
                        continue
                if not child.fn(x, sub):
                    return False
            n = len(v)
            if (min_p is not None and n < min_p) or (max_p is not None and n > max_p):
                return False
        elif isinstance(v, list):
            if not array(v):
                return False
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                return False
        elif isinstance(v, str):
            n = len(v)
            if (min_l is not None and n < min_l) or (max_l is not None and n > max_l):
                return False
            if search is not None and not search(v):
                return False
        return True

    return check


# The general ``check`` above asks every question of every value. The common nodes (a plain string, an integer
# with or without bounds, an object, an array, of a declared type, not int-or-string) get a check that asks only
# the questions their type leaves open: for a value of another type the general check stops at ``type_ok``.


def _special_errors_fn(schema: dict[str, Any], enum: Any, props: dict[str, _Node],
                       required: list[tuple[str, bool]], addl: _Node | None, items: _Node | None,
                       search: Any) -> Any:
    """A check equal to the general one for this (non-top) node, specialised to its type; None when none fits."""
    t = schema.get("type")
    if schema.get(_INT_OR_STRING) or not isinstance(t, str):
        return None
    nullable = bool(schema.get("nullable"))
    if t == "string":
        if schema.get("minLength") is not None or schema.get("maxLength") is not None or search is not None:
            return None
        return _string_check(nullable, enum)
    if enum is not None:
        return None
    if t == "integer":
        return _integer_check(nullable, schema.get("minimum"), schema.get("maximum"))
    if t == "boolean":
        return _boolean_check(nullable)
    if t == "object":
        if schema.get("minProperties") is not None or schema.get("maxProperties") is not None:
            return None
        return _object_check(nullable, props, required, addl)
    if t == "array":
        return _array_check(nullable, items, schema.get("minItems"), schema.get("maxItems"))
    return None


def _string_check(nullable: bool, enum: Any) -> Any:
    if enum is None:
        def string(v: Any, skip: Skip | None = None) -> bool:
            return isinstance(v, str) or (v is None and nullable)
        return string

    def string_enum(v: Any, skip: Skip | None = None) -> bool:
        if isinstance(v, str):
            return v in enum
        return v is None and nullable
    return string_enum


def _boolean_check(nullable: bool) -> Any:
    def boolean(v: Any, skip: Skip | None = None) -> bool:
        return isinstance(v, bool) or (v is None and nullable)
    return boolean


def _integer_check(nullable: bool, lo: Any, hi: Any) -> Any:
    def integer(v: Any, skip: Skip | None = None) -> bool:
        if not _is_integer(v):
            return v is None and nullable
        return not ((lo is not None and v < lo) or (hi is not None and v > hi))
    return integer


def _object_check(nullable: bool, props: dict[str, _Node], required: list[tuple[str, bool]],
                  addl: _Node | None) -> Any:
    get = props.get

    def obj(v: Any, skip: Skip | None = None) -> bool:
        if not isinstance(v, dict):
            return v is None and nullable
        for req, req_nullable in required:
            if req not in v or (v[req] is None and not req_nullable):
                return False
        if skip is None:
            for k, x in v.items():
                child = get(k, addl)
                if child is not None and not child.fn(x, None):
                    return False
            return True
        for k, x in v.items():
            s = skip.get(k, _ABSENT)
            if s is None:
                continue
            child = get(k, addl)
            if child is not None and not child.fn(x, None if s is _ABSENT else s):
                return False
        return True
    return obj


def _array_check(nullable: bool, items: _Node | None, lo: Any, hi: Any) -> Any:
    def array(v: Any, skip: Skip | None = None) -> bool:
        if not isinstance(v, list):
            return v is None and nullable
        if items is not None:
            fn = items.fn
            for x in v:
                if not fn(x, None):
                    return False
        n = len(v)
        return not ((lo is not None and n < lo) or (hi is not None and n > hi))
    return array


def _compile_errors_top(schema: dict[str, Any]) -> Any:
    return _errors_fn(schema, {}, top=True)


# -- unknown fields (unknown_fields) ----------------------------------------------------------------


def _compile_unknown(schema: dict[str, Any], memo: dict[int, _Node]) -> _Node:
    return _node(schema, memo, _unknown_fn)


def _unknown_fn(schema: dict[str, Any], memo: dict[int, _Node], *, top: bool) -> Any:
    """A function (value, skip) -> True when ``unknown_fields`` would find something."""
    if not schema or schema.get(_PRESERVE):
        return lambda v, skip=None: False
    props_raw = _props(schema)
    props = {k: _compile_unknown(sub, memo) for k, sub in props_raw.items()} if props_raw is not None else None
    addl_raw = schema.get("additionalProperties")
    addl = _compile_unknown(addl_raw, memo) if isinstance(addl_raw, dict) else None
    # a key neither declared nor covered by additionalProperties: unknown unless anything goes here
    undeclared_ok = addl_raw is True or (props_raw is None and schema.get("type") != "object")
    undeclared_unknown = not undeclared_ok and (props_raw is not None or schema.get("type") == "object")
    items_raw = schema.get("items")
    items = _compile_unknown(items_raw, memo) if isinstance(items_raw, dict) else None
    if props is None and addl is None and items is None and not undeclared_unknown:
        return _nothing_unknown  # a leaf (a string, a number, anything-goes): no key below it is unknown
    always_known = _ALWAYS_KNOWN_TOP if top else ()

    def check(v: Any, skip: Skip | None = None) -> bool:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in always_known:
                    continue
                if skip is not None:
                    s = skip.get(k, _ABSENT)
                    if s is None:
                        continue
                    sub = None if s is _ABSENT else s
                else:
                    sub = None
                child = props.get(k) if props is not None else None
                if child is None:
                    child = addl
                    if child is None:
                        if undeclared_unknown:
                            return True
                        continue
                if child.fn(x, sub):
                    return True
        elif isinstance(v, list) and items is not None:
            fn = items.fn
            for x in v:
                if fn(x, None):
                    return True
        return False

    return check


def _nothing_unknown(v: Any, skip: Skip | None = None) -> bool:
    return False


def _compile_unknown_top(schema: dict[str, Any]) -> Any:
    return _unknown_fn(schema, {}, top=True)


# -- defaults (apply_defaults) ----------------------------------------------------------------------


def _has_defaults(schema: Any, seen: set[int]) -> bool:
    """Whether ``apply_defaults`` could ever change anything under this schema node."""
    if not isinstance(schema, dict) or id(schema) in seen:
        return False
    seen.add(id(schema))
    for sub in (_props(schema) or {}).values():
        if isinstance(sub, dict) and ("default" in sub or _has_defaults(sub, seen)):
            return True
    addl = schema.get("additionalProperties")
    if isinstance(addl, dict) and _has_defaults(addl, seen):
        return True
    items = schema.get("items")
    return isinstance(items, dict) and _has_defaults(items, seen)


def _compile_defaults(schema: dict[str, Any], memo: dict[int, _Node]) -> _Node | None:
    if not _has_defaults(schema, set()):
        return None
    return _node(schema, memo, _defaults_fn)


def _defaults_fn(schema: dict[str, Any], memo: dict[int, _Node], *, top: bool) -> Any:
    import copy

    props = _props(schema) or {}
    # in schema order (as apply_defaults goes): (key, has a default, default, compiled child or None)
    plan = []
    for k, sub in props.items():
        if top and k in _ALWAYS_KNOWN_TOP:
            continue
        if not isinstance(sub, dict):
            continue
        has_default = "default" in sub
        child = _compile_defaults(sub, memo)
        if has_default or child is not None:
            plan.append((k, has_default, sub.get("default"), child))
    addl_raw = schema.get("additionalProperties")
    addl = _compile_defaults(addl_raw, memo) if isinstance(addl_raw, dict) else None
    items_raw = schema.get("items")
    items = _compile_defaults(items_raw, memo) if isinstance(items_raw, dict) else None

    def apply(v: Any, skip: Skip | None = None) -> None:
        if isinstance(v, dict):
            for k, has_default, default, child in plan:
                if has_default and k not in v:
                    v[k] = copy.deepcopy(default)
                if child is not None and k in v:
                    if skip is not None:
                        s = skip.get(k, _ABSENT)
                        if s is None:
                            continue
                        child.fn(v[k], None if s is _ABSENT else s)
                    else:
                        child.fn(v[k], None)
            if addl is not None:
                for k, x in v.items():
                    if k not in props:
                        if skip is not None:
                            s = skip.get(k, _ABSENT)
                            if s is None:
                                continue
                            addl.fn(x, None if s is _ABSENT else s)
                        else:
                            addl.fn(x, None)
        elif isinstance(v, list) and items is not None:
            fn = items.fn
            for x in v:
                fn(x, None)

    return apply


def _compile_defaults_top(schema: dict[str, Any]) -> Any:
    return _defaults_fn(schema, {}, top=True)
