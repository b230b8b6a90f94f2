"""Generic object validation the API server applies to every kind (names, labels, annotations)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass
class Cause:
    """One field error of a Status (``details.causes``): which field, what is wrong, and why."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# Kinds whose names must be DNS-1123 labels rather than subdomains.
LABEL_NAMED_KINDS = frozenset({("", "Namespace"), ("", "Service")})
MAX_ANNOTATIONS_BYTES = 256 * 1024


def dns1123_label_errors(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1123_LABEL.match(value):
        errs.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
            "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
            "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return errs


def qualified_name_errors(key: str) -> list[str]:
    """Label/annotation key rules: optional DNS subdomain prefix '/', then a name of <= 63 chars."""
    errs: list[str] = []
    prefix, sep, name = key.rpartition("/")
    if sep:
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + e for e in dns1123_subdomain_errors(prefix))
    else:
        name = key
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.match(name):
        errs.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
            "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
            "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
    return errs


def label_value_errors(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        errs.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
            "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )
    return errs


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
    labels = meta.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            causes.append(Cause("metadata.labels", "Invalid value: labels must be a map of strings", "FieldValueTypeInvalid"))
        else:
            for k, v in labels.items():
                if type(k) is not str or not _qualified_name_ok(k):
                    for err in qualified_name_errors(k):
                        causes.append(Cause("metadata.labels", f'Invalid value: "{k}": {err}'))
                if not isinstance(v, str):
                    causes.append(
                        Cause(f"metadata.labels[{k}]", "Invalid value: label values must be strings", "FieldValueTypeInvalid")
                    )
                    continue
                if type(v) is str and _label_value_ok(v):
                    continue
                for err in label_value_errors(v):
                    causes.append(Cause("metadata.labels", f'Invalid value: "{v}": {err}'))
    annotations = meta.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict):
            causes.append(
                Cause("metadata.annotations", "Invalid value: annotations must be a map of strings", "FieldValueTypeInvalid")
            )
        else:
            total = 0
            for k, v in annotations.items():
                if type(k) is not str or not _qualified_name_ok(k):
                    for err in qualified_name_errors(k):
                        causes.append(Cause("metadata.annotations", f'Invalid value: "{k}": {err}'))
                if not isinstance(v, str):
                    causes.append(
                        Cause(f"metadata.annotations[{k}]", "Invalid value: annotation values must be strings",
                              "FieldValueTypeInvalid")
                    )
                    continue
                total += len(k) + len(v)
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
