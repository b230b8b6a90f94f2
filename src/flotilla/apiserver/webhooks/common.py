"""Shared pieces of the Karmada admission plugins: Kubernetes field errors, the apimachinery
validators Karmada relies on (label keys and values, label selectors, annotations), cluster-affinity
checks, JSON pointers and resource quantities.

Messages reproduce apimachinery's ``field.Error`` bodies: ``Invalid value: <value>: <detail>``,
``Required value: <detail>``, ``Unsupported value: "x": supported values: "a", "b"``,
``Duplicate value: <value>``, ``Forbidden: <detail>``, ``Too long: may not be more than N bytes``.
Values are printed as Go prints them: numbers and booleans plainly, strings quoted (``%q``), nil as
``null``, maps and lists as compact JSON (``json.Marshal``). A value that is a typed Go struct in
Karmada (a spread constraint, a placement, a taint) is wrapped in :class:`GoStruct`, which prints
its fields in the struct's declaration order and leaves out empty ``omitempty`` fields, as
``json.Marshal`` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

from flotilla.apiserver.admission import Operation
from flotilla.jsonpath.formatting import go_json, go_json_string
from flotilla.kube.content import (
    byte_len,
    label_key_errors,
    label_value_errors,
)
from flotilla.kube.objects import as_list, as_str
from flotilla.kube.validation import Cause, go_quote

# ---------------------------------------------------------------------------------------------
# Field errors
# ---------------------------------------------------------------------------------------------


class _Omit:
    """Marks an error whose value is not printed (apimachinery's ``omitValue``)."""


OMIT: Any = _Omit()


class GoStruct:
    """A bad value that Karmada holds as a typed struct: printed as ``json.Marshal`` prints the struct.

    ``schema`` is the OpenAPI schema of the type; its property order is the Go declaration order and
    its ``required`` list names the fields without ``omitempty``. An empty ``omitempty`` field (absent,
    null, ``""``, 0, false, an empty list or map) is left out, except scalars Karmada holds as pointers
    (:data:`GO_POINTER_FIELDS`), which are printed whenever they are set. Fields the schema does not
    declare are dropped, as decoding into the struct drops them.
    """

    def __init__(self, value: Any, schema: Mapping[str, Any]) -> None:
        self.value = value
        self.schema = schema

    def json(self) -> str:
        out: list[str] = []
        _write_go_struct(self.value, self.schema, out)
        return "".join(out)


#: Scalar fields Karmada's and Kubernetes' types hold as pointers (``*int32``, ``*int64``, ``*bool``): a
#: zero value is set, not empty, so ``json.Marshal`` prints it.
GO_POINTER_FIELDS = frozenset({
    "tolerationSeconds", "gracePeriodSeconds", "priority", "dispatching", "scheduling",
    "preserveResourcesOnDeletion", "suppressDeletion", "timeAdded",
})


def _go_zero(schema: Mapping[str, Any]) -> Any:
    """The JSON of a Go zero value of the schema's type (a missing non-``omitempty`` field)."""
    kind = schema.get("type")
    if kind == "string":
        return ""
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return {}
    return None  # nil slice, map or pointer


def _go_empty(value: Any) -> bool:
    return value is None or value is False or value == "" or (
        isinstance(value, int | float) and not isinstance(value, bool) and value == 0
    ) or (isinstance(value, list | dict) and not value)


def _write_go_struct(value: Any, schema: Mapping[str, Any], out: list[str]) -> None:
    props = schema.get("properties")
    items = schema.get("items")
    if isinstance(value, dict) and isinstance(props, Mapping):
        required = set(schema.get("required") or ())
        first = True
        out.append("{")
        for key, sub in props.items():
            sub = sub if isinstance(sub, Mapping) else {}
            is_struct = isinstance(sub.get("properties"), Mapping)
            if key in value:
                field_value = value[key]
                if key not in required and (field_value is None or (
                        not is_struct and key not in GO_POINTER_FIELDS and _go_empty(field_value))):
                    continue
            elif key in required:
                field_value = _go_zero(sub)
            else:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(go_json_string(key))
            out.append(":")
            _write_go_struct(field_value, sub, out)
        out.append("}")
    elif isinstance(value, list) and isinstance(items, Mapping):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write_go_struct(item, items, out)
        out.append("]")
    else:
        out.append(go_json(value))


def go_value(value: Any) -> str:
    """A bad value as ``field.Error`` prints it."""
    if isinstance(value, GoStruct):
        return value.json()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return go_json(value)
    if isinstance(value, str):
        return go_quote(value)
    try:
        return go_json(value)
    except (TypeError, ValueError):  # pragma: no cover - objects come from JSON
        return repr(value)


def _body(kind: str, value: Any, detail: str) -> str:
    text = kind if value is OMIT else f"{kind}: {go_value(value)}"
    return f"{text}: {detail}" if detail else text


def invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause(path, _body("Invalid value", value, detail), "FieldValueInvalid")


def required(path: str, detail: str = "") -> Cause:
    return Cause(path, f"Required value: {detail}" if detail else "Required value", "FieldValueRequired")


def forbidden(path: str, detail: str) -> Cause:
    return Cause(path, f"Forbidden: {detail}" if detail else "Forbidden", "FieldValueForbidden")


def duplicate(path: str, value: Any, detail: str = "") -> Cause:
    return Cause(path, _body("Duplicate value", value, detail), "FieldValueDuplicate")


def not_supported(path: str, value: Any, supported: Sequence[str]) -> Cause:
    detail = "supported values: " + ", ".join(go_quote(s) for s in supported) if supported else ""
    return Cause(path, _body("Unsupported value", value, detail), "FieldValueNotSupported")


def too_long(path: str, max_length: int) -> Cause:
    unit = "byte" if max_length == 1 else "bytes"
    return Cause(path, f"Too long: may not be more than {max_length} {unit}", "FieldValueTooLong")


# ---------------------------------------------------------------------------------------------
# Defensive accessors (admission also sees objects that failed the schema check)
# ---------------------------------------------------------------------------------------------


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def objects_of(items: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, item)`` of the items of a list that are objects; other items, and a value that is not a list,
    give nothing (the schema check reports them)."""
    for i, item in enumerate(as_list(items)):
        if isinstance(item, dict):
            yield i, item


def child(obj: dict[str, Any], key: str) -> dict[str, Any] | None:
    """``obj[key]`` if it is an object, else ``None`` (a Go nil pointer)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else None


def metadata(obj: dict[str, Any]) -> dict[str, Any]:
    md = obj.get("metadata")
    if not isinstance(md, dict):
        md = obj["metadata"] = {}
    return md


def set_label(obj: dict[str, Any], key: str, value: str) -> None:
    md = metadata(obj)
    labels = md.get("labels")
    if not isinstance(labels, dict):
        labels = md["labels"] = {}
    labels[key] = value


def add_finalizer(obj: dict[str, Any], finalizer: str) -> None:
    md = metadata(obj)
    finalizers = md.get("finalizers")
    if not isinstance(finalizers, list):
        finalizers = md["finalizers"] = []
    if finalizer not in finalizers:
        finalizers.append(finalizer)


def spec_unchanged(obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> bool:
    """An update that leaves ``spec`` as stored (status writes, label or finalizer edits).

    Such updates skip spec defaulting and validation: the stored spec was admitted when it was
    written, and an object stored before a rule existed must still be updatable (e.g. to remove
    a finalizer) - the same "ratcheting" kube-apiserver applies to CRD validation.
    """
    return op == "UPDATE" and old is not None and obj.get("spec") == old.get("spec")


class NoOpPlugin:
    """Base class: a plugin that neither defaults, validates nor warns."""

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> None:
        return None

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        return []

    def warnings(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[str]:
        return []


# ---------------------------------------------------------------------------------------------
# metav1 validation (k8s.io/apimachinery/pkg/apis/meta/v1/validation, api/validation)
# ---------------------------------------------------------------------------------------------

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def validate_label_name(key: Any, path: str) -> list[Cause]:
    if not isinstance(key, str):
        return [invalid(path, key, "must be a string")]
    return [invalid(path, key, m) for m in label_key_errors(key)]


def validate_labels(labels: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in as_dict(labels).items():
        causes.extend(validate_label_name(key, path))
        if isinstance(value, str):
            causes.extend(invalid(path, value, m) for m in label_value_errors(value))
    return causes


def validate_annotations(annotations: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    total = 0
    for key, value in as_dict(annotations).items():
        causes.extend(invalid(path, key, m) for m in label_key_errors(key.lower()))
        total += byte_len(key) + (byte_len(value) if isinstance(value, str) else 0)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def validate_label_selector(selector: Any, path: str) -> list[Cause]:
    """``metav1validation.ValidateLabelSelector`` (keys, values, operators, values per operator)."""
    if not isinstance(selector, dict):
        return []
    causes = validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(as_list(selector.get("matchExpressions"))):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            continue
        operator = expr.get("operator")
        values = as_list(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(required(f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(
                    forbidden(f"{where}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
                )
        else:
            causes.append(invalid(f"{where}.operator", operator, "not a valid selector operator"))
        if "key" in expr:
            causes.extend(validate_label_name(expr.get("key"), f"{where}.key"))
        for j, value in enumerate(values):
            if isinstance(value, str):
                causes.extend(invalid(f"{where}.values[{j}]", value, m) for m in label_value_errors(value))
    return causes


# ---------------------------------------------------------------------------------------------
# Karmada cluster affinity (pkg/util/validation: ValidateClusterAffinity, ValidatePolicyFieldSelector)
# ---------------------------------------------------------------------------------------------

POLICY_FIELD_SELECTOR_KEYS = ("provider", "region", "zone")


def policy_field_selector_error(field_selector: Any) -> str | None:
    """The first problem of a policy field selector (keys provider/region/zone, operators In/NotIn)."""
    for expr in as_list(as_dict(field_selector).get("matchExpressions")):
        expr = as_dict(expr)
        key = expr.get("key")
        if key not in POLICY_FIELD_SELECTOR_KEYS:
            return f"unsupported key {go_quote(as_str(key))}, must be provider, region, or zone"
        operator = expr.get("operator")
        if operator not in ("In", "NotIn"):
            return f"unsupported operator {go_quote(as_str(operator))}, must be In or NotIn"
    return None


def validate_cluster_affinity(affinity: Any, path: str) -> list[Cause]:
    """Karmada's field-selector check, plus the label selector's validity (Flotilla)."""
    if not isinstance(affinity, dict):
        return []
    causes: list[Cause] = []
    field_selector = affinity.get("fieldSelector")
    if isinstance(field_selector, dict):
        problem = policy_field_selector_error(field_selector)
        if problem:
            causes.append(invalid(f"{path}.fieldSelector", field_selector, problem))
    causes.extend(validate_label_selector(affinity.get("labelSelector"), f"{path}.labelSelector"))
    return causes


def empty_cluster_affinity(affinity: Mapping[str, Any]) -> bool:
    return (
        affinity.get("labelSelector") is None
        and affinity.get("fieldSelector") is None
        and not as_list(affinity.get("clusterNames"))
        and not as_list(affinity.get("exclude"))
    )


def validate_resource_selectors(selectors: Any, policy_namespace: str, path: str) -> list[Cause]:
    """Karmada: a namespaced policy (``policy_namespace`` not empty) selects only its own namespace.
    Flotilla: apiVersion and kind must not be empty strings (the schema already requires the keys)
    and label selectors must be valid."""
    causes: list[Cause] = []
    for i, selector in objects_of(selectors):
        where = f"{path}[{i}]"
        for key in ("apiVersion", "kind"):
            if selector.get(key) == "":
                causes.append(required(f"{where}.{key}"))
        if policy_namespace and selector.get("namespace") != policy_namespace:
            causes.append(
                invalid(
                    f"{where}.namespace",
                    as_str(selector.get("namespace")),
                    "namespace of resource selector must be the same as the namespace of the policy",
                )
            )
        causes.extend(validate_label_selector(selector.get("labelSelector"), f"{where}.labelSelector"))
    return causes


def default_resource_selector_namespaces(selectors: Any, namespace: str) -> None:
    """Namespaced policies: an empty selector namespace means the policy's own namespace."""
    if not namespace:
        return
    for selector in as_list(selectors):
        if isinstance(selector, dict) and not selector.get("namespace"):
            selector["namespace"] = namespace


# ---------------------------------------------------------------------------------------------
# JSON pointers (go-openapi/jsonpointer, as Karmada parses overrider paths)
# ---------------------------------------------------------------------------------------------


def json_pointer_error(pointer: str) -> str | None:
    """The error of ``jsonpointer.New`` (only the leading ``/`` is checked), or ``None``."""
    if pointer == "" or pointer.startswith("/"):
        return None
    return 'JSON pointer must be empty or start with a "/"'


def json_pointer_escape_error(pointer: str) -> str | None:
    """RFC 6901: ``~`` must be followed by ``0`` or ``1`` (Flotilla; Karmada fails when applying)."""
    if re.search(r"~(?![01])", pointer):
        return "JSON pointer has an invalid escape: '~' must be followed by '0' or '1'"
    return None


# ---------------------------------------------------------------------------------------------
# Resource quantities
# ---------------------------------------------------------------------------------------------

_QUANTITY_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
MAX_INT64 = 2**63 - 1
MAX_QUANTITY_DIGITS = 1000  # longer numbers are refused rather than parsed (Python caps int parsing at 4300 digits)
MAX_QUANTITY_EXPONENT = 1000


def parse_quantity(value: Any) -> Fraction | None:
    """The exact value of a Kubernetes quantity (``"1Gi"``, ``"500m"``, ``"1e3"``, ``2``), or ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value)
    if not isinstance(value, str):
        return None
    m = _QUANTITY_RE.match(value.strip())
    if not m or len(m.group(1)) > MAX_QUANTITY_DIGITS:
        return None
    number = Fraction(m.group(1))
    suffix = m.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix and suffix[0] in "eE":
        exponent = int(suffix[1:]) if len(suffix) <= 6 else MAX_QUANTITY_EXPONENT + 1
        if abs(exponent) > MAX_QUANTITY_EXPONENT:  # 10**1e9 would take the server for ever to compute
            return None
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[suffix]


def first_duplicates(values: Iterable[Any]) -> list[int]:
    """Indexes of the values that repeat an earlier one."""
    seen: set[Any] = set()
    dups = []
    for i, value in enumerate(values):
        if value in seen:
            dups.append(i)
        else:
            seen.add(value)
    return dups
