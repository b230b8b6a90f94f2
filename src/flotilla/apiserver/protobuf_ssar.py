"""Read the one protobuf body kubectl insists on: a SelfSubjectAccessReview (``kubectl auth can-i``).

The server speaks JSON, but kubectl sends ``SelfSubjectAccessReview`` as ``application/vnd.kubernetes.protobuf``
whatever the server says. Its wire format is small: the ``k8s\\x00`` magic, a ``runtime.Unknown`` envelope
(``typeMeta`` = 1, ``raw`` = 2, ``contentEncoding`` = 3, ``contentType`` = 4) whose ``raw`` is the message
(``metadata`` = 1, ``spec`` = 2), whose spec holds ``resourceAttributes`` = 1 (namespace 1, verb 2, group 3,
version 4, resource 5, subresource 6, name 7) or ``nonResourceAttributes`` = 2 (path 1, verb 2), as in
``k8s.io/api/authorization/v1/generated.proto``. This module decodes exactly that into the JSON shape (fields it
does not know are skipped, as protobuf readers do); anything malformed is a ValueError.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAGIC", "decode_self_subject_access_review"]

MAGIC = b"k8s\x00"
_RESOURCE_FIELDS = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource",
                    7: "name"}
_NON_RESOURCE_FIELDS = {1: "path", 2: "verb"}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(buf: bytes) -> dict[int, list[Any]]:
    """Field number -> its values (bytes for length-delimited fields, int for varints) of one message."""
    out: dict[int, list[Any]] = {}
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated length-delimited field")
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated fixed-width field")
        out.setdefault(number, []).append(value)
    return out


def _message(f: dict[int, list[Any]], number: int) -> dict[int, list[Any]]:
    values = f.get(number) or []
    if values and not isinstance(values[-1], bytes):
        raise ValueError(f"field {number} is not a message")
    return fields(values[-1]) if values else {}


def _strings(f: dict[int, list[Any]], names: dict[int, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, name in names.items():
        values = f.get(number)
        if values:
            if not isinstance(values[-1], bytes):
                raise ValueError(f"{name} is not a string")
            out[name] = values[-1].decode("utf-8")
    return out


def decode_self_subject_access_review(raw: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded SelfSubjectAccessReview (ValueError if it is not one)."""
    if not raw.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body (no k8s\\x00 magic)")
    envelope = fields(raw[len(MAGIC):])
    type_meta = _strings(_message(envelope, 1), {1: "apiVersion", 2: "kind"})
    if type_meta.get("kind") != "SelfSubjectAccessReview":
        raise ValueError(f"expected a SelfSubjectAccessReview, got {type_meta.get('kind') or 'no kind'}")
    encoding = _strings(envelope, {3: "contentEncoding"}).get("contentEncoding", "")
    if encoding:
        raise ValueError(f"content encoding {encoding!r} is not supported")
    body = envelope.get(2) or [b""]
    if not isinstance(body[-1], bytes):
        raise ValueError("raw is not bytes")
    spec = _message(fields(body[-1]), 2)
    out_spec: dict[str, Any] = {}
    resource = _strings(_message(spec, 1), _RESOURCE_FIELDS)
    if 1 in spec:
        out_spec["resourceAttributes"] = resource
    if 2 in spec:
        out_spec["nonResourceAttributes"] = _strings(_message(spec, 2), _NON_RESOURCE_FIELDS)
    return {"apiVersion": type_meta.get("apiVersion") or "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview", "metadata": {}, "spec": out_spec}
