"""Generic object validation the API server applies to every kind (names, labels, annotations)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from flotilla.kube import content


@dataclass
class Cause:
    """One field error of a Status (``details.causes``): which field, what is wrong, and why."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


# Kinds whose names must be DNS-1123 labels rather than subdomains.
LABEL_NAMED_KINDS = frozenset({("", "Namespace"), ("", "Service")})
MAX_ANNOTATIONS_BYTES = 256 * 1024


# The object-metadata rules, in the wording kube-apiserver uses (see :mod:`flotilla.kube.content`).


def dns1123_label_errors(value: str) -> list[str]:
    return content.dns1123_label_errors(value, legacy=True)


def dns1123_subdomain_errors(value: str) -> list[str]:
    return content.dns1123_subdomain_errors(value, legacy=True)


def qualified_name_errors(key: str) -> list[str]:
    """Label/annotation key rules: optional DNS subdomain prefix '/', then a name of <= 63 chars."""
    return content.label_key_errors(key, legacy=True)


def label_value_errors(value: str) -> list[str]:
    return content.label_value_errors(value, legacy=True)


def name_errors(group: str, kind: str, name: str) -> list[str]:
    if (group, kind) in LABEL_NAMED_KINDS:
        return dns1123_label_errors(name)
    return dns1123_subdomain_errors(name)


# Every write is checked, and the same label and annotation keys, label values and names come back again and
# again: which strings passed is remembered (a bool; the messages are made afresh whenever a string fails).


@lru_cache(maxsize=4096)
def _qualified_name_ok(key: str) -> bool:
    return not qualified_name_errors(key)


@lru_cache(maxsize=4096)
def _label_value_ok(value: str) -> bool:
    return not label_value_errors(value)


@lru_cache(maxsize=4096)
def _name_ok(group: str, kind: str, name: str) -> bool:
    return not name_errors(group, kind, name)


def _label_value_causes(value: str) -> list[Cause]:
    if type(value) is str and _label_value_ok(value):
        return []
    return [Cause("metadata.labels", f'Invalid value: "{value}": {err}') for err in label_value_errors(value)]


def _string_map_causes(
    meta: dict[str, Any], key: str, noun: str, value_causes: Callable[[str], list[Cause]] = lambda _: []
) -> list[Cause]:
    """The causes of ``metadata.<key>`` (labels or annotations): a map from qualified names to strings."""
    field = f"metadata.{key}"
    entries = meta.get(key)
    if entries is None:
        return []
    if not isinstance(entries, dict):
        return [Cause(field, f"Invalid value: {key} must be a map of strings", "FieldValueTypeInvalid")]
    causes: list[Cause] = []
    for k, v in entries.items():
        if type(k) is not str or not _qualified_name_ok(k):
            causes.extend(Cause(field, f'Invalid value: "{k}": {err}') for err in qualified_name_errors(k))
        if isinstance(v, str):
            causes.extend(value_causes(v))
        else:
            causes.append(Cause(f"{field}[{k}]", f"Invalid value: {noun} values must be strings", "FieldValueTypeInvalid"))
    return causes


def validate_metadata(group: str, kind: str, obj: dict[str, Any], *, namespaced: bool) -> list[Cause]:
    """Checks every object must pass: the shape of metadata, its name, labels and annotations."""
    causes: list[Cause] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [Cause("metadata", "Required value: metadata must be an object", "FieldValueRequired")]
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        causes.append(Cause("metadata.name", "Required value: name or generateName is required", "FieldValueRequired"))
    elif type(name) is not str or not _name_ok(group, kind, name):
        for err in name_errors(group, kind, name):
            causes.append(Cause("metadata.name", f'Invalid value: "{name}": {err}'))
    causes.extend(_string_map_causes(meta, "labels", "label", _label_value_causes))
    causes.extend(_string_map_causes(meta, "annotations", "annotation"))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        total = sum(len(k) + len(v) for k, v in annotations.items() if isinstance(v, str))
        if total > MAX_ANNOTATIONS_BYTES:
            causes.append(
                Cause("metadata.annotations", f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes", "FieldValueTooLong")
            )
    finalizers = meta.get("finalizers")
    if finalizers is not None:
        if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
            causes.append(Cause("metadata.finalizers", "Invalid value: finalizers must be a list of strings",
                                "FieldValueTypeInvalid"))
        else:
            for i, f in enumerate(finalizers):
                if type(f) is str and _qualified_name_ok(f):
                    continue
                for err in qualified_name_errors(f):
                    causes.append(Cause(f"metadata.finalizers[{i}]", f'Invalid value: "{f}": {err}'))
    owners = meta.get("ownerReferences")
    if owners is not None:
        if not isinstance(owners, list):
            causes.append(Cause("metadata.ownerReferences", "Invalid value: must be a list", "FieldValueTypeInvalid"))
        else:
            for i, ref in enumerate(owners):
                if not isinstance(ref, dict):
                    causes.append(Cause(f"metadata.ownerReferences[{i}]", "Invalid value: must be an object",
                                        "FieldValueTypeInvalid"))
                    continue
                for req in ("apiVersion", "kind", "name", "uid"):
                    if not ref.get(req):
                        causes.append(Cause(f"metadata.ownerReferences[{i}].{req}", "Required value",
                                            "FieldValueRequired"))
    if not namespaced and meta.get("namespace"):
        # cluster-scoped objects carry no namespace; the server strips it, as kube-apiserver does
        meta.pop("namespace", None)
    return causes


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote``: double quotes, escapes for quotes, backslashes and non-printables."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch == " " or (ch.isprintable() and code != 0x7F):
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
