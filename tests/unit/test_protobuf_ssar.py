"""``kubectl auth can-i`` sends a SelfSubjectAccessReview as protobuf: the server reads exactly that message."""

from __future__ import annotations

import pytest

from flotilla.apiserver.protobuf_ssar import MAGIC, decode_self_subject_access_review, fields


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _strings(**values: str) -> bytes:
    order = {"namespace": 1, "verb": 2, "group": 3, "version": 4, "resource": 5, "subresource": 6, "name": 7,
             "path": 1}
    return b"".join(_field(order[k], v.encode()) for k, v in values.items())


def _ssar(spec: bytes, kind: str = "SelfSubjectAccessReview", extra: bytes = b"") -> bytes:
    type_meta = _field(1, b"authorization.k8s.io/v1") + _field(2, kind.encode())
    message = _field(1, b"") + _field(2, spec)
    return MAGIC + _field(1, type_meta) + _field(2, message) + _field(4, b"application/vnd.kubernetes.protobuf") \
        + extra


def test_resource_attributes_are_read_as_kubectl_sends_them() -> None:
    raw = _ssar(_field(1, _strings(namespace="default", verb="create", group="apps", resource="deployments",
                                   subresource="scale", name="web")))
    assert decode_self_subject_access_review(raw) == {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "group": "apps",
                                        "resource": "deployments", "subresource": "scale", "name": "web"}}}


def test_non_resource_attributes_are_read() -> None:
    raw = _ssar(_field(2, _strings(path="/healthz") + _field(2, b"get")))
    assert decode_self_subject_access_review(raw)["spec"] == {
        "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}


def test_unknown_fields_and_varints_are_skipped() -> None:
    spec = _field(1, _strings(verb="list", resource="pods") + _varint(10 << 3 | 0) + _varint(300))
    got = decode_self_subject_access_review(_ssar(spec, extra=_varint(9 << 3 | 0) + _varint(1)))
    assert got["spec"]["resourceAttributes"] == {"verb": "list", "resource": "pods"}


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"kind": "SelfSubjectAccessReview"}', "no k8s"),
    (_ssar(b"", kind="Pod"), "expected a SelfSubjectAccessReview, got Pod"),
    (MAGIC + b"\x0a\x05ab", "truncated"),
    (MAGIC + b"\x0b", "unsupported wire type"),
])
def test_anything_else_is_refused_with_a_reason(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_self_subject_access_review(raw)


def test_fields_groups_repeated_values() -> None:
    assert fields(_field(3, b"a") + _field(3, b"b") + _varint(1 << 3) + _varint(7)) == {3: [b"a", b"b"], 1: [7]}
