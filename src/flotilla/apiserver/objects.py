"""Small helpers for stored objects: encoding, timestamps, names, metadata access."""

from __future__ import annotations

import copy
import secrets
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson

from flotilla.kube.times import utc_seconds
from flotilla.storage import KeyValue

_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339() -> str:
    return utc_seconds(datetime.now(UTC))


def new_uid() -> str:
    return str(uuid.uuid4())


def generate_name(prefix: str) -> str:
    # kube-apiserver truncates the prefix so that the result stays within 63 characters
    prefix = prefix[: 63 - 5]
    return prefix + "".join(secrets.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))


def encode(obj: dict[str, Any]) -> bytes:
    """The stored form: canonical JSON (sorted keys) without metadata.resourceVersion.

    The store's revision is the RV. Sorted keys make equal objects encode to equal bytes, so a no-op
    write is detected by comparing bytes.
    """
    meta = obj.get("metadata")
    rv = None
    if isinstance(meta, dict) and "resourceVersion" in meta:
        rv = meta.pop("resourceVersion")
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    finally:
        if rv is not None:
            meta["resourceVersion"] = rv  # type: ignore[index]


def decode(value: bytes, revision: int) -> dict[str, Any]:
    obj = orjson.loads(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return obj


def decode_kv(kv: KeyValue) -> dict[str, Any]:
    return decode(kv.value, kv.mod_revision)


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = {}
        obj["metadata"] = m
    return m


def deep_copy(obj: Any) -> Any:
    return copy.deepcopy(obj)


def without(obj: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}
